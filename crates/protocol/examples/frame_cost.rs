//! What a frame costs the CPU to encode and to decode, without a key and sealed under one
//! (issue 26: the per-frame share of what a secured cluster spends beside a plain one).
//!
//! The frame is the leader's usual one under `bench/kv_commit.py`'s load: an AppendEntries
//! carrying one entry of a `PUT` with a 64-byte value, from one sender in one start, its
//! sequence number growing as on the wire, so that sealing runs as a node runs it (one stream,
//! many frames). Each case runs for a fixed number of frames several times over and the
//! fastest trial is printed: on a shared machine the fastest is the one the least disturbed.
//!
//! ```text
//! cargo run --release -p conclave-protocol --example frame_cost [-- FRAMES TRIALS plain|sealed]
//! ```
//!
//! Timings on a busy machine move by a third from run to run. Counting instructions does not:
//! under `valgrind --tool=cachegrind --cache-sim=no`, the difference between two frame counts
//! of one case, divided by the difference of the counts, is what one frame (encoded once per
//! trial, decoded once per trial) costs in instructions.

#![expect(
    clippy::disallowed_types,
    reason = "a benchmark program measures real time"
)]

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use conclave_protocol::{
    AppendEntries, AuthKey, ClusterId, EntryKind, Envelope, FrameCodec, LogEntry, PeerId,
    SEALED_TAG_LEN, UDP_MTU,
};

/// Frames per trial, unless told otherwise.
const FRAMES: u32 = 100_000;
/// Trials per case, unless told otherwise; the fastest counts.
const TRIALS: usize = 5;
/// The first sequence number, in the range a start draws from.
const FIRST_SEQ: u64 = 1 << 20;

/// The `n`th AppendEntries of the leader's stream.
fn append(cluster: ClusterId, n: u32) -> Envelope {
    let leader = PeerId::from_static("gw-c");
    let put = format!(
        r#"{{"put":{{"key":"bench-{n}","value":"{}"}}}}"#,
        "v".repeat(64)
    );
    Envelope::new(
        cluster,
        leader,
        1_764_000_000,
        FIRST_SEQ + u64::from(n),
        Some(PeerId::from_static("gw-a")),
        AppendEntries {
            entries: vec![LogEntry {
                index: u64::from(n) + 1,
                term: 3,
                kind: EntryKind::Command,
                data: put.into_bytes(),
            }],
            ..AppendEntries::new(3, leader)
        },
    )
}

/// The fastest of `trials` runs of `step` over `frames` frames, in nanoseconds per frame.
fn fastest(frames: u32, trials: usize, mut step: impl FnMut(u32)) -> f64 {
    (0..trials)
        .map(|_| {
            let start = Instant::now();
            for n in 0..frames {
                step(n);
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(frames)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let frames = args.first().map_or(Some(FRAMES), |arg| arg.parse().ok());
    let trials = args.get(1).map_or(Some(TRIALS), |arg| arg.parse().ok());
    let only = args.get(2).map(String::as_str);
    let (Some(frames), Some(trials), None | Some("plain" | "sealed")) = (frames, trials, only)
    else {
        eprintln!("usage: frame_cost [FRAMES [TRIALS [plain|sealed]]]");
        return ExitCode::from(64);
    };
    let Ok(cluster) = ClusterId::new("kv-bench") else {
        return ExitCode::FAILURE;
    };
    // Each node reads the secret into a key of its own.
    let key = || AuthKey::new(&[0x5a; 32], SEALED_TAG_LEN).ok();
    let (Some(sending), Some(receiving)) = (key(), key()) else {
        return ExitCode::FAILURE;
    };
    let envelopes: Vec<Envelope> = (0..frames).map(|n| append(cluster, n)).collect();
    println!("frames of {frames}, fastest of {trials} trials, ns per frame");
    for (name, codec, receiver) in [
        (
            "plain ",
            FrameCodec::new(cluster, None),
            FrameCodec::new(cluster, None),
        ),
        (
            "sealed",
            FrameCodec::new(cluster, Some(sending)),
            FrameCodec::new(cluster, Some(receiving)),
        ),
    ] {
        if only.is_some_and(|only| only != name.trim_end()) {
            continue;
        }
        let mut encoded = Vec::with_capacity(envelopes.len());
        for envelope in &envelopes {
            match codec.encode(envelope, UDP_MTU) {
                Ok(frame) => encoded.push(frame),
                Err(err) => {
                    eprintln!("error: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let encode = fastest(frames, trials, |n| {
            black_box(codec.encode(&envelopes[n as usize], UDP_MTU).ok());
        });
        let decode = fastest(frames, trials, |n| {
            black_box(receiver.decode(&encoded[n as usize]).ok());
        });
        println!(
            "{name}: encode {encode:6.0}  decode {decode:6.0}  ({} bytes)",
            encoded.first().map_or(0, Vec::len)
        );
    }
    ExitCode::SUCCESS
}
