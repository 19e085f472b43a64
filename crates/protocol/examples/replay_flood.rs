//! The attacker of `bench/replay_flood.py` (issue 15): captures `Hello` frames off the wire and
//! plays one back at a node, from another address, as fast as the machine sends, for a fixed
//! time.
//!
//! It listens at `--tap` (an address in the nodes' `link.udp.peers`, where they announce
//! themselves, as a sniffer on their segment would hear them) until it holds a `Hello` of each
//! of `--ids`, and says so on standard output (`captured <id> incarnation <n> seq <n> bytes
//! <n>`). It then reads one line from standard input, `<target address> <leader id>`, and
//! floods the target with the captured `Hello` of an id other than the leader's, byte for byte,
//! from a socket of its own, for `--seconds`. At the end it prints `sent <n> datagrams in <s> s
//! (<rate>/s); <n> datagrams came back` and exits. It never needs the cluster's key: it sends
//! what it heard. Without a key it can read the frames (decoding checks no tag then); with one,
//! the frames cannot be read here and the program says so.
//!
//! Safety: it sends only to 127.0.0.1, stops by itself after `--seconds` (at most 600), and
//! gives up waiting for frames after a minute.
//!
//! ```text
//! cargo run --release -p conclave-protocol --example replay_flood -- \
//!     --tap 127.0.0.1:7999 --cluster bench --ids gw-a,gw-b,gw-c --seconds 30
//! ```

#![expect(
    clippy::disallowed_types,
    reason = "a benchmark program measures real time"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use conclave_protocol::{Body, ClusterId, FrameCodec};

/// How long to wait for the nodes' announcements.
const CAPTURE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest flood accepted.
const MAX_SECONDS: u64 = 600;

struct Args {
    tap: SocketAddr,
    cluster: String,
    ids: Vec<String>,
    seconds: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut tap = None;
    let mut cluster = None;
    let mut ids = None;
    let mut seconds = 30;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tap" => {
                tap = Some(
                    value
                        .parse()
                        .map_err(|err| format!("--tap {value}: {err}"))?,
                )
            }
            "--cluster" => cluster = Some(value),
            "--ids" => ids = Some(value.split(',').map(str::to_owned).collect()),
            "--seconds" => {
                seconds = value
                    .parse()
                    .map_err(|err| format!("--seconds {value}: {err}"))?;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let tap: SocketAddr = tap.ok_or("--tap is required")?;
    if tap.ip() != Ipv4Addr::LOCALHOST {
        return Err(format!("--tap {tap}: only 127.0.0.1 is allowed"));
    }
    if seconds == 0 || seconds > MAX_SECONDS {
        return Err(format!("--seconds {seconds}: between 1 and {MAX_SECONDS}"));
    }
    Ok(Args {
        tap,
        cluster: cluster.ok_or("--cluster is required")?,
        ids: ids.ok_or("--ids is required")?,
        seconds,
    })
}

/// Listens at the tap until it holds one `Hello` of each id.
fn capture(args: &Args) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let cluster = ClusterId::new(&args.cluster).map_err(|err| format!("--cluster: {err}"))?;
    let codec = FrameCodec::new(cluster, None);
    let tap = UdpSocket::bind(args.tap).map_err(|err| format!("bind {}: {err}", args.tap))?;
    tap.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|err| err.to_string())?;
    println!("listening {}", args.tap);
    let deadline = Instant::now() + CAPTURE_TIMEOUT;
    let mut hellos = BTreeMap::new();
    let mut buffer = [0u8; 2048];
    while hellos.len() < args.ids.len() {
        if Instant::now() > deadline {
            return Err(format!(
                "no Hello from every id within {CAPTURE_TIMEOUT:?}; have {:?}",
                hellos.keys().collect::<Vec<_>>()
            ));
        }
        let len = match tap.recv(&mut buffer) {
            Ok(len) => len,
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                continue;
            }
            Err(err) => return Err(format!("receive at the tap: {err}")),
        };
        let Ok(envelope) = codec.decode(&buffer[..len]) else {
            return Err("cannot read the frames: the cluster has a key".to_owned());
        };
        let from = envelope.from.to_string();
        if matches!(envelope.body, Body::Hello(_))
            && args.ids.contains(&from)
            && !hellos.contains_key(&from)
        {
            println!(
                "captured {from} incarnation {} seq {} bytes {len}",
                envelope.incarnation, envelope.seq
            );
            hellos.insert(from, buffer[..len].to_vec());
        }
    }
    Ok(hellos)
}

/// Sends `frame` to `target` from a socket of its own for `seconds`; returns what was sent and
/// what came back to that socket.
fn flood(frame: &[u8], target: SocketAddr, seconds: u64) -> Result<(u64, u64, Duration), String> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|err| err.to_string())?;
    socket.connect(target).map_err(|err| err.to_string())?;
    socket
        .set_nonblocking(true)
        .map_err(|err| err.to_string())?;
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let (mut sent, mut answers) = (0u64, 0u64);
    let mut buffer = [0u8; 2048];
    loop {
        for _ in 0..256 {
            match socket.send(frame) {
                Ok(_) => sent += 1,
                // A full send buffer, or the ICMP of a port nobody listens on: go on.
                Err(_) => std::thread::yield_now(),
            }
        }
        while socket.recv(&mut buffer).is_ok() {
            answers += 1;
        }
        if Instant::now() >= end {
            break;
        }
    }
    Ok((sent, answers, start.elapsed()))
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let hellos = capture(&args)?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|err| format!("read the target: {err}"))?;
    let mut words = line.split_whitespace();
    let target: SocketAddr = words
        .next()
        .ok_or("no target given")?
        .parse()
        .map_err(|err| format!("target: {err}"))?;
    if target.ip() != Ipv4Addr::LOCALHOST {
        return Err(format!("target {target}: only 127.0.0.1 is allowed"));
    }
    let leader = words.next().unwrap_or_default();
    let (id, frame) = hellos
        .iter()
        .find(|(id, _)| id.as_str() != leader)
        .ok_or("no Hello of a node other than the leader")?;
    println!("flooding {target} with the Hello of {id}");
    let (sent, answers, took) = flood(frame, target, args.seconds)?;
    let secs = took.as_secs_f64();
    println!(
        "sent {sent} datagrams in {secs:.1} s ({:.0}/s); {answers} datagrams came back",
        sent as f64 / secs
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("replay_flood: {err}");
            ExitCode::FAILURE
        }
    }
}
