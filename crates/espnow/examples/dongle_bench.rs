//! The dongle benchmark (ESP-1, ESP-4, ESP-7; issue 4, item 7).
//!
//! ```text
//! cargo run --release -p conclave-espnow --example dongle_bench
//! ```
//!
//! Three tables, for `docs/benchmarks.md`:
//!
//! 1. **Bytes per message**: the conclave frames sent all the time (heartbeat, vote request,
//!    vote, ping), each as an ESP-NOW payload, as an 802.11 frame on the air, and as the
//!    `SEND` (host → dongle) and `RX` (dongle → host) serial frames that carry it, with the
//!    time those take on a 921600-baud 8N1 line.
//! 2. **Log entries per frame**: the largest `AppendEntries` batch that fits 250 bytes, for
//!    several command sizes.
//! 3. **The pty path**: two virtual dongles, each behind its own pseudo-terminal opened with
//!    tokio-serial at 921600 baud by the real driver, on one simulated air — the code path of
//!    `conclave demo` and of a gateway on `/dev/ttyACM0`. One-way latency from
//!    `DongleHandle::send` on one host to `DongleEvent::Received` on the other, one frame at
//!    a time, and throughput with the send queue kept full. Run on a current-thread runtime,
//!    as the gateway's actors are.
//!
//! A pseudo-terminal does not pace bytes at the baud rate, so the pty figures are what the
//! software costs; the physical line's limits are computed next to them.
//!
//! ```text
//! cargo run --release -p conclave-espnow --example dongle_bench -- --firmware
//! ```
//!
//! runs table 3 on the reference firmware instead (issue 10): two `firmware/micropython`
//! processes under CPython, each behind its own pseudo-terminal on one simulated air (UDP
//! multicast on loopback), driven by the same driver code, next to the virtual dongle with no
//! air latency, in the same run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/firmware_support/mod.rs"]
mod firmware_support;

use std::path::PathBuf;
use std::time::Duration;

use bytes::BytesMut;
use conclave_espnow::{
    Air, AirConfig, DongleCodec, DongleConfig, DongleError, DongleEvent, DongleHandle, Frame, Mac,
    Message, Priority, VirtualDongleConfig, VirtualSerialPort, open_serial, spawn_dongle,
};
use conclave_protocol::{
    AppendEntries, AuthKey, Body, ClusterId, ESPNOW_V1_MTU, EntryKind, Envelope, FrameCodec,
    LogEntry, PeerId, Ping, RequestVote, Vote,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Encoder;

/// 921600 baud, 8N1: ten bit times per byte.
const BAUD: u32 = 921_600;
/// An ESP-NOW frame on the air: 802.11 MAC header (24), category (1), OUI (3), random (4),
/// the vendor-specific element's header (7) and the FCS (4) around the payload.
const ESPNOW_OVERHEAD: usize = 43;

/// The realistic values of `docs/wire-protocol.md`: cluster `site-1`, `gw-a` and `gw-b`,
/// term 7, incarnation 3, log index 1234, a sealed frame's 16-byte tag.
fn frame_codec() -> FrameCodec {
    FrameCodec::new(
        ClusterId::new("site-1").unwrap(),
        Some(AuthKey::new(b"conclave-bench-key-site-1", 16).unwrap()),
    )
}

fn envelope(to: Option<PeerId>, body: Body) -> Envelope {
    let cluster = ClusterId::new("site-1").unwrap();
    Envelope::new(cluster, PeerId::from_static("gw-a"), 3, 123_456, to, body)
}

/// A heartbeat as a node of today sends it: its incarnation is the Unix second of its start
/// (5 bytes, not the document's 3) and its sequence number starts at a random point
/// (`first_seq`, 5 bytes).
fn heartbeat_as_sent(to: Option<PeerId>) -> Envelope {
    let cluster = ClusterId::new("site-1").unwrap();
    let seq = conclave_protocol::first_seq(0x9e37_79b9_7f4a_7c15);
    let gw_a = PeerId::from_static("gw-a");
    Envelope::new(cluster, gw_a, 1_764_000_000, seq, to, heartbeat(vec![]))
}

fn heartbeat(entries: Vec<LogEntry>) -> Body {
    Body::AppendEntries(AppendEntries {
        prev_index: 1234,
        prev_term: 7,
        entries,
        commit: 1234,
        ..AppendEntries::new(7, PeerId::from_static("gw-a"))
    })
}

/// Bytes of one dongle-protocol frame on the serial line, delimiter included.
fn serial_bytes(message: Message) -> usize {
    let mut out = BytesMut::new();
    DongleCodec::new()
        .encode(Frame::new(1, message), &mut out)
        .unwrap();
    out.len()
}

fn line_micros(bytes: usize) -> f64 {
    bytes as f64 * 10.0 / f64::from(BAUD) * 1e6
}

fn bytes_per_message() {
    let codec = frame_codec();
    let b = PeerId::from_static("gw-b");
    let frames: Vec<(&str, Envelope)> = vec![
        ("heartbeat, unicast", envelope(Some(b), heartbeat(vec![]))),
        ("heartbeat, broadcast", envelope(None, heartbeat(vec![]))),
        ("heartbeat, unicast, as sent", heartbeat_as_sent(Some(b))),
        ("heartbeat, broadcast, as sent", heartbeat_as_sent(None)),
        (
            "vote request, broadcast",
            envelope(
                None,
                Body::RequestVote(RequestVote {
                    term: 8,
                    candidate: PeerId::from_static("gw-a"),
                    last_log_index: 1234,
                    last_log_term: 7,
                    pre_vote: false,
                    leadership_transfer: false,
                    priority: None,
                }),
            ),
        ),
        (
            "vote",
            envelope(
                Some(b),
                Body::Vote(Vote {
                    term: 8,
                    granted: true,
                    pre_vote: false,
                    priority: None,
                }),
            ),
        ),
        (
            "ping",
            envelope(
                Some(b),
                Body::Ping(Ping {
                    timestamp_ms: 1_700_000_000_000,
                }),
            ),
        ),
    ];
    println!("## Bytes per message (16-byte tag, 921600 baud 8N1)\n");
    println!(
        "| frame | ESP-NOW payload | 802.11 frame on the air | SEND on the serial line | RX on the serial line | SEND + RX line time |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, envelope) in frames {
        let payload = codec.encode(&envelope, ESPNOW_V1_MTU).unwrap();
        let dst = if envelope.to.is_some() {
            Mac([0x02, 0, 0, 0, 0, 2])
        } else {
            Mac::BROADCAST
        };
        let send = serial_bytes(Message::Send {
            dst,
            payload: payload.clone(),
        });
        let rx = serial_bytes(Message::Rx {
            src: Mac([0x02, 0, 0, 0, 0, 1]),
            dst,
            rssi: -60,
            channel: 1,
            timestamp_us: 123_456_789,
            payload: payload.clone(),
        });
        println!(
            "| {name} | {} B | {} B | {send} B | {rx} B | {:.0} µs |",
            payload.len(),
            payload.len() + ESPNOW_OVERHEAD,
            line_micros(send + rx)
        );
    }
    let full = serial_bytes(Message::Send {
        dst: Mac([0x02, 0, 0, 0, 0, 2]),
        payload: vec![0x55; 250],
    });
    println!(
        "\nA full 250-byte payload is a {full}-byte SEND: {:.0} µs on the line, at most {:.0} per second.\n",
        line_micros(full),
        1e6 / line_micros(full)
    );
}

fn entries_per_frame() {
    let codec = frame_codec();
    let b = PeerId::from_static("gw-b");
    println!("## Log entries per 250-byte ESP-NOW frame (unicast AppendEntries, 16-byte tag)\n");
    println!("| command bytes per entry | entries per frame | frame bytes |");
    println!("|---|---|---|");
    for size in [0usize, 8, 16, 32, 64, 128, 183, 184] {
        let mut best = (0, 0);
        for count in 1..=64u64 {
            let entries = (0..count)
                .map(|i| LogEntry {
                    index: 1235 + i,
                    term: 7,
                    kind: EntryKind::Command,
                    data: vec![0xab; size],
                })
                .collect();
            match codec.encode(&envelope(Some(b), heartbeat(entries)), ESPNOW_V1_MTU) {
                Ok(frame) => best = (count, frame.len()),
                Err(_) => break,
            }
        }
        println!("| {size} | {} | {} |", best.0, best.1);
    }
    println!();
}

/// What is behind a host's pseudo-terminal, kept alive for the run (dropping it unplugs it).
enum Dongle {
    Virtual {
        _port: VirtualSerialPort,
    },
    Firmware {
        _process: firmware_support::Firmware,
    },
}

/// Where the dongles live: a virtual air in this process, or firmware processes on a
/// multicast air.
enum Medium {
    Virtual(Air),
    Firmware(firmware_support::AirAddress),
}

/// One host: the driver of a dongle reached through its pseudo-terminal.
struct Host {
    handle: DongleHandle,
    events: mpsc::Receiver<DongleEvent>,
    mac: Mac,
    _dongle: Dongle,
}

async fn host(medium: &Medium, dir: &std::path::Path, n: u8) -> Host {
    let mac = Mac([0x02, 0, 0, 0, 0, n]);
    let link = dir.join(format!("tty-{n}"));
    let dongle = match medium {
        Medium::Virtual(air) => Dongle::Virtual {
            _port: VirtualSerialPort::create(&link, air, VirtualDongleConfig::new(mac)).unwrap(),
        },
        Medium::Firmware(air) => Dongle::Firmware {
            _process: firmware_support::Firmware::start(air, &mac.to_string(), &link, &[]),
        },
    };
    let path = link.to_string_lossy().into_owned();
    let (handle, mut events) = spawn_dongle(DongleConfig::new(&path, 1), open_serial(&path, BAUD));
    loop {
        match events.recv().await {
            Some(DongleEvent::Connected(_)) => break,
            Some(_) => {}
            None => panic!("the driver of {path} stopped"),
        }
    }
    Host {
        handle,
        events,
        mac,
        _dongle: dongle,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// One frame at a time from `a` to `b`: `send` → `Received`.
async fn latency(a: &Host, b: &mut Host, size: usize, rounds: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut payload = vec![0u8; size];
        payload[..8].copy_from_slice(&(round as u64).to_le_bytes());
        let start = Instant::now();
        a.handle
            .send(b.mac, payload.clone(), Priority::Essential)
            .unwrap();
        loop {
            match b.events.recv().await {
                Some(DongleEvent::Received { payload: got, .. }) if got == payload => break,
                Some(_) => {}
                None => panic!("receiver stopped"),
            }
        }
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

/// `count` frames of `size` bytes from `a` to `b` with the send queue kept full; returns the
/// frames received and the time until the last one (or until the stream dried up).
async fn throughput(a: &Host, b: &mut Host, size: usize, count: usize) -> (usize, Duration) {
    let start = Instant::now();
    let sender = {
        let handle = a.handle.clone();
        let dst = b.mac;
        tokio::spawn(async move {
            let mut sent = 0;
            while sent < count {
                match handle.send(dst, vec![0x5a; size], Priority::Essential) {
                    Ok(()) => sent += 1,
                    Err(DongleError::QueueFull { .. }) => tokio::task::yield_now().await,
                    Err(err) => panic!("{err}"),
                }
            }
        })
    };
    let mut received = 0;
    let mut last = start;
    while received < count {
        match tokio::time::timeout(Duration::from_secs(2), b.events.recv()).await {
            Ok(Some(DongleEvent::Received { .. })) => {
                received += 1;
                last = Instant::now();
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    sender.await.unwrap();
    (received, last - start)
}

/// What table 3 runs on.
#[derive(Clone, Copy)]
enum Backend {
    /// Virtual dongles on a virtual air with this latency.
    Virtual(Duration),
    /// Reference firmware processes (`firmware/micropython` under CPython).
    Firmware,
}

async fn pty_path(backend: Backend) {
    let dir = std::env::temp_dir().join(format!("conclave-dongle-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let medium = match backend {
        Backend::Virtual(air_latency) => Medium::Virtual(Air::with_config(AirConfig {
            seed: 1,
            latency_min: air_latency,
            latency_max: air_latency,
            // The receiving host drains as fast as it can; a deep queue keeps the measure
            // about the serial path rather than the firmware's buffer.
            rx_queue: 1024,
            ..AirConfig::default()
        })),
        Backend::Firmware => Medium::Firmware(firmware_support::AirAddress::random()),
    };
    let a = host(&medium, &dir, 1).await;
    let mut b = host(&medium, &dir, 2).await;
    a.handle.add_peer(b.mac, false, [0; 16]).unwrap();
    // Let the ADD_PEER reach the dongle before measuring.
    tokio::time::sleep(Duration::from_millis(50)).await;

    match backend {
        Backend::Virtual(air_latency) => println!(
            "### Virtual dongles, air latency {} ms\n",
            air_latency.as_secs_f64() * 1000.0
        ),
        Backend::Firmware => println!(
            "### Reference firmware (firmware/micropython under CPython), multicast air on loopback\n"
        ),
    }
    println!("| one frame at a time | median | p99 | max |");
    println!("|---|---|---|---|");
    for size in [55usize, 250] {
        let samples = latency(&a, &mut b, size, 2000).await;
        println!(
            "| {size}-byte payload, 2000 frames | {} | {} | {} |",
            millis(percentile(&samples, 0.5)),
            millis(percentile(&samples, 0.99)),
            millis(*samples.last().unwrap())
        );
    }
    println!();
    println!(
        "| queue kept full | frames received | frames/s | payload kB/s | serial bytes/s each way |"
    );
    println!("|---|---|---|---|---|");
    for size in [55usize, 250] {
        let count = 20_000;
        let (received, elapsed) = throughput(&a, &mut b, size, count).await;
        let per_second = received as f64 / elapsed.as_secs_f64();
        let send_bytes = serial_bytes(Message::Send {
            dst: b.mac,
            payload: vec![0x5a; size],
        });
        println!(
            "| {size}-byte payload, {count} sent | {received} | {per_second:.0} | {:.1} | {:.0} |",
            per_second * size as f64 / 1000.0,
            per_second * send_bytes as f64
        );
    }
    println!();
    drop(a);
    drop(b);
    let _ = std::fs::remove_dir_all(PathBuf::from(&dir));
}

fn main() {
    let firmware = std::env::args().skip(1).any(|arg| arg == "--firmware");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if firmware {
        assert!(
            firmware_support::python_available(),
            "--firmware runs firmware/micropython under python3, which is not installed"
        );
        println!(
            "## The pty path at 921600 baud (current-thread runtime): virtual dongle and reference firmware\n"
        );
        runtime.block_on(pty_path(Backend::Virtual(Duration::ZERO)));
        runtime.block_on(pty_path(Backend::Firmware));
        return;
    }
    bytes_per_message();
    entries_per_frame();
    println!("## The pty path at 921600 baud (current-thread runtime)\n");
    runtime.block_on(pty_path(Backend::Virtual(Duration::ZERO)));
    runtime.block_on(pty_path(Backend::Virtual(Duration::from_millis(2))));
}
