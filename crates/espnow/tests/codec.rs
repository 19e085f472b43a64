//! The serial line codec end to end (ESP-1, ESP-2, ESP-3, ESP-5, TR-2): every message kind
//! round-trips, every single-byte corruption of a frame is caught, garbage never costs the
//! next good frame, chunking never matters, arbitrary bytes never panic or grow the buffer,
//! and a frame of another protocol major is handed up as such.

#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use conclave_espnow::frame::{
    DELIMITER, MAX_ENCODED, MAX_PAYLOAD, PROTOCOL_MAJOR, PROTOCOL_MINOR, RawFrame,
};
use conclave_espnow::message::kind;
use conclave_espnow::{
    CodecStats, DongleCodec, Frame, Inbound, Info, Mac, Message, ResetReason, Status,
};
use futures_util::StreamExt;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder, FramedRead};

// ---------------------------------------------------------------------------------------------
// helpers

/// The bytes `DongleCodec` puts on the wire for `frame`, delimiter included.
fn wire(frame: &Frame) -> Vec<u8> {
    let mut dst = BytesMut::new();
    DongleCodec::new().encode(frame.clone(), &mut dst).unwrap();
    dst.to_vec()
}

/// Everything one fresh codec decodes from `bytes` given in one piece, and its counters.
fn decode_all(bytes: &[u8]) -> (Vec<Inbound>, CodecStats) {
    let mut codec = DongleCodec::new();
    let mut src = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(inbound) = codec.decode(&mut src).unwrap() {
        out.push(inbound);
    }
    (out, codec.stats())
}

/// Everything one fresh codec decodes from `bytes` fed in pieces of the given sizes (the
/// rest in one last piece). After each call that yields nothing, the buffer must hold no
/// delimiter and at most `MAX_ENCODED` bytes: the decoder drains or bounds it.
fn decode_chunked(
    bytes: &[u8],
    sizes: impl IntoIterator<Item = usize>,
) -> (Vec<Inbound>, CodecStats) {
    let mut codec = DongleCodec::new();
    let mut src = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut sizes = sizes.into_iter();
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (piece, tail) = rest.split_at(size);
        rest = tail;
        src.extend_from_slice(piece);
        while let Some(inbound) = codec.decode(&mut src).unwrap() {
            out.push(inbound);
        }
        assert!(src.len() <= MAX_ENCODED, "buffer grew to {}", src.len());
        assert!(
            !src.contains(&DELIMITER),
            "a delimiter was left in the buffer"
        );
    }
    (out, codec.stats())
}

/// Frames dropped by any cause.
fn dropped(stats: CodecStats) -> u64 {
    stats.crc_errors + stats.malformed + stats.unknown_kind + stats.oversize
}

/// Deterministic pseudo-random numbers (xorshift64*), so a failure replays.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    /// `len` bytes, each 0x00 with probability `1 / zero_one_in` (never when it is 0).
    fn bytes_with_zeros(&mut self, len: usize, zero_one_in: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                let byte = self.next().to_le_bytes()[3];
                match zero_one_in {
                    0 => byte.max(1),
                    n if self.below(n) == 0 => 0,
                    _ => byte,
                }
            })
            .collect()
    }
}

const PEER: Mac = Mac([0x24, 0x6f, 0x28, 0x01, 0x02, 0x03]);

/// Position of each `Message` variant. The match has no wildcard: a new variant must be added
/// here, and the round-trip test then fails until the samples below cover it.
fn variant(message: &Message) -> usize {
    match message {
        Message::Hello { .. } => 0,
        Message::Reset => 1,
        Message::SetChannel { .. } => 2,
        Message::AddPeer { .. } => 3,
        Message::DelPeer { .. } => 4,
        Message::SetPmk { .. } => 5,
        Message::Send { .. } => 6,
        Message::Ping => 7,
        Message::Resp { .. } => 8,
        Message::Info(_) => 9,
        Message::Boot { .. } => 10,
        Message::Rx { .. } => 11,
        Message::TxDone { .. } => 12,
        Message::Stats { .. } => 13,
        Message::Log { .. } => 14,
    }
}
const VARIANTS: usize = 15;

fn info(firmware: String, fill: u8) -> Info {
    Info {
        protocol_major: fill,
        protocol_minor: fill,
        firmware,
        mac: Mac([fill; 6]),
        espnow_version: fill,
        max_payload: u16::from_le_bytes([fill, fill]),
        channel: fill,
        tx_credits: fill,
        max_peers: fill,
    }
}

fn rx(rssi: i8, payload: Vec<u8>) -> Message {
    Message::Rx {
        src: PEER,
        dst: Mac::BROADCAST,
        rssi,
        channel: 13,
        timestamp_us: u32::MAX,
        payload,
    }
}

/// Every variant, with edge values: empty and longest payloads, all zeros and all 0xff,
/// extreme integers, negative RSSI, every status and reset reason, 255-byte texts.
fn samples() -> Vec<Message> {
    let pattern = |len: usize| (0..len).map(|i| (i % 7) as u8).collect::<Vec<u8>>();
    let mut out = vec![
        Message::Hello { major: 0, minor: 0 },
        Message::Hello {
            major: PROTOCOL_MAJOR,
            minor: PROTOCOL_MINOR,
        },
        Message::Hello {
            major: 0xff,
            minor: 0xff,
        },
        Message::Reset,
        Message::SetChannel { channel: 0 },
        Message::SetChannel { channel: 14 },
        Message::SetChannel { channel: 0xff },
        Message::AddPeer {
            mac: Mac([0; 6]),
            channel: 0,
            encrypt: false,
            key: [0; 16],
        },
        Message::AddPeer {
            mac: Mac::BROADCAST,
            channel: 0xff,
            encrypt: true,
            key: [0xff; 16],
        },
        Message::DelPeer { mac: Mac([0; 6]) },
        Message::DelPeer { mac: PEER },
        Message::SetPmk { pmk: [0; 16] },
        Message::SetPmk { pmk: [0xff; 16] },
        Message::Ping,
    ];
    for payload in [
        vec![],
        vec![0],
        vec![0; 250],
        vec![0xff; 250],
        pattern(250),
        vec![0; 1470],
        vec![0xff; 1470],
        pattern(1470),
    ] {
        out.push(Message::Send {
            dst: Mac::BROADCAST,
            payload: payload.clone(),
        });
        out.push(rx(-42, payload));
    }
    for rssi in [i8::MIN, -1, 0, i8::MAX] {
        out.push(rx(rssi, vec![0x5a]));
    }
    for status in [
        Status::Ok,
        Status::UnknownKind,
        Status::Malformed,
        Status::BadArgument,
        Status::NoCredit,
        Status::PeerTableFull,
        Status::UnknownPeer,
        Status::PayloadTooLarge,
        Status::RadioError,
        Status::Other(9),
        Status::Other(0xff),
    ] {
        out.push(Message::Resp { status });
    }
    out.push(Message::Info(info(String::new(), 0)));
    out.push(Message::Info(info("conclave-dongle 1.0.0".into(), 1)));
    out.push(Message::Info(info("f".repeat(255), 0xff)));
    for reason in [
        ResetReason::PowerOn,
        ResetReason::HostRequest,
        ResetReason::Watchdog,
        ResetReason::Crash,
        ResetReason::BrownOut,
        ResetReason::Other(5),
        ResetReason::Other(0xff),
    ] {
        out.push(Message::Boot {
            reason,
            major: PROTOCOL_MAJOR,
            minor: 0xff,
        });
    }
    out.push(Message::Rx {
        src: Mac([0; 6]),
        dst: Mac([0; 6]),
        rssi: 0,
        channel: 0,
        timestamp_us: 0,
        payload: vec![],
    });
    for (send_seq, ok) in [(0, false), (0xffff, true)] {
        out.push(Message::TxDone {
            send_seq,
            mac: PEER,
            ok,
        });
    }
    out.push(Message::Stats {
        rx_dropped: 0,
        tx_dropped: 0,
        crc_errors: 0,
    });
    out.push(Message::Stats {
        rx_dropped: u32::MAX,
        tx_dropped: 1,
        crc_errors: u32::MAX,
    });
    for level in [0, 1, 2, 3, 0xff] {
        out.push(Message::Log {
            level,
            text: String::new(),
        });
    }
    out.push(Message::Log {
        level: 2,
        text: "x".repeat(255),
    });
    // 127 two-byte characters and one one-byte character: exactly 255 bytes.
    out.push(Message::Log {
        level: 0,
        text: format!("{}!", "é".repeat(127)),
    });
    out
}

// ---------------------------------------------------------------------------------------------
// round trips

/// ESP-1, ESP-2: every message kind, with empty and longest payloads, all-zero and all-0xff
/// fields, negative RSSI, 255-byte texts, and seq 0 and 0xffff, goes through
/// `DongleCodec` encode → decode unchanged.
#[test]
fn every_message_kind_round_trips_with_edge_values() {
    let samples = samples();
    let mut seen = [false; VARIANTS];
    for message in &samples {
        seen[variant(message)] = true;
        for seq in [0, 1, 0x00ff, 0xff00, 0xffff] {
            let frame = Frame::new(seq, message.clone());
            let (out, stats) = decode_all(&wire(&frame));
            assert_eq!(out, vec![Inbound::Frame(frame)], "{message:?} seq {seq}");
            assert_eq!(
                stats,
                CodecStats {
                    frames: 1,
                    ..CodecStats::default()
                }
            );
        }
    }
    assert!(seen.iter().all(|&s| s), "a variant has no sample: {seen:?}");

    // The kind numbers are the ones ESP-2 assigns: host commands below 0x80, dongle messages
    // from 0x80.
    let kinds: Vec<u8> = samples.iter().map(Message::kind).collect();
    for (k, host) in [
        (kind::HELLO, true),
        (kind::RESET, true),
        (kind::SET_CHANNEL, true),
        (kind::ADD_PEER, true),
        (kind::DEL_PEER, true),
        (kind::SET_PMK, true),
        (kind::SEND, true),
        (kind::PING, true),
        (kind::RESP, false),
        (kind::INFO, false),
        (kind::BOOT, false),
        (kind::RX, false),
        (kind::TX_DONE, false),
        (kind::STATS, false),
        (kind::LOG, false),
    ] {
        assert!(kinds.contains(&k), "kind {k:#04x} not covered");
        assert_eq!(k < 0x80, host, "kind {k:#04x} is in the wrong half");
    }
}

/// ESP-1, ESP-7: the longest messages (an `RX` of a 1470-byte ESP-NOW v2 frame, a `SEND` with
/// a payload filling `MAX_PAYLOAD`) fit the frame limits; one byte more is refused by the
/// encoder instead of being put on the wire for the other side to drop.
#[test]
fn longest_messages_fit_and_longer_ones_are_refused() {
    let longest_rx = Frame::new(7, rx(-90, vec![0xff; 1470]));
    assert!(wire(&longest_rx).len() <= MAX_ENCODED + 1);

    // SEND's fields before the payload: dst (6) and the length (2).
    let fill = MAX_PAYLOAD - 8;
    for byte in [0x00, 0xff] {
        let longest = Frame::new(
            1,
            Message::Send {
                dst: PEER,
                payload: vec![byte; fill],
            },
        );
        let bytes = wire(&longest);
        assert!(bytes.len() <= MAX_ENCODED + 1, "{} bytes", bytes.len());
        assert_eq!(decode_all(&bytes).0, vec![Inbound::Frame(longest)]);
    }

    let too_long = Frame::new(
        1,
        Message::Send {
            dst: PEER,
            payload: vec![0xff; fill + 1],
        },
    );
    let mut dst = BytesMut::new();
    let err = DongleCodec::new().encode(too_long, &mut dst).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        dst.is_empty(),
        "nothing of a refused frame reaches the wire"
    );
}

/// ESP-2: a firmware or log text longer than its 255-byte field is cut at a character
/// boundary, so the wire never carries broken UTF-8 and the receiver gets a true prefix.
#[test]
fn text_longer_than_its_field_is_cut_at_a_character_boundary() {
    // 'é' is two bytes: 128 of them are 256 bytes, and byte 255 is inside the last one.
    let text = "é".repeat(128);
    let frame = Frame::new(
        3,
        Message::Log {
            level: 1,
            text: text.clone(),
        },
    );
    let bytes = wire(&frame);
    let raw = RawFrame::decode(&bytes[..bytes.len() - 1]).unwrap();
    assert_eq!(raw.payload[1], 254, "length byte");
    assert!(std::str::from_utf8(&raw.payload[2..]).is_ok());
    match decode_all(&bytes).0.as_slice() {
        [
            Inbound::Frame(Frame {
                message: Message::Log { text: got, .. },
                ..
            }),
        ] => assert_eq!(got.as_str(), &text[..254]),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// corruption

/// ESP-1: every single-byte corruption of a frame is caught. For each frame, every byte
/// position except the final delimiter is replaced by each of the 255 other values; decoding
/// the result never yields a frame different from the original (it may yield nothing, and
/// it never yields more than one frame). Frames: a SEND with zeros in its payload, a 250-byte
/// RX of random bytes about a quarter of them zeros (so many COBS code bytes), and an INFO,
/// TX_DONE, BOOT, PING and ADD_PEER. The positions are shared among threads so the sweep
/// (about 110,000 decodes) stays within a few seconds in a debug build.
#[test]
fn every_single_byte_corruption_is_caught() {
    let mut noise = Noise(0x5eed_0001);
    let frames = vec![
        Frame::new(
            0x0102,
            Message::Send {
                dst: PEER,
                payload: vec![1, 0, 0, 2, 0, 3, 0, 0, 0, 4, 0],
            },
        ),
        Frame::new(0xfffe, rx(-67, noise.bytes_with_zeros(250, 4))),
        Frame::new(
            0x8000,
            Message::Info(info("conclave-dongle 1.0.0".into(), 1)),
        ),
        Frame::new(
            0x0001,
            Message::TxDone {
                send_seq: 0x0100,
                mac: Mac::BROADCAST,
                ok: true,
            },
        ),
        Frame::new(
            0x0000,
            Message::Boot {
                reason: ResetReason::PowerOn,
                major: PROTOCOL_MAJOR,
                minor: PROTOCOL_MINOR,
            },
        ),
        Frame::new(0x00ff, Message::Ping),
        Frame::new(
            0x0007,
            Message::AddPeer {
                mac: PEER,
                channel: 0,
                encrypt: true,
                key: [0; 16],
            },
        ),
    ];
    // Work items: (frame, every `stride`-th position from `first`).
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let checked: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|first| {
                let frames = &frames;
                scope.spawn(move || {
                    frames
                        .iter()
                        .map(|frame| corrupt_every_byte(frame, first, threads))
                        .sum::<usize>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let expected: usize = frames.iter().map(|f| (wire(f).len() - 1) * 255).sum();
    assert_eq!(checked, expected);
}

/// Checks every single-byte corruption of `frame`'s wire bytes at positions `first`,
/// `first + stride`, ... (never the final delimiter); returns how many.
fn corrupt_every_byte(frame: &Frame, first: usize, stride: usize) -> usize {
    let original = wire(frame);
    let expected = Inbound::Frame(frame.clone());
    let mut codec = DongleCodec::new();
    let mut src = BytesMut::with_capacity(original.len());
    let mut checked = 0;
    for position in (first..original.len() - 1).step_by(stride) {
        for value in 0..=u8::MAX {
            if value == original[position] {
                continue;
            }
            src.clear();
            src.extend_from_slice(&original);
            src[position] = value;
            let mut yielded = 0;
            while let Some(inbound) = codec.decode(&mut src).unwrap() {
                assert_eq!(
                    inbound, expected,
                    "byte {position} set to {value:#04x} gave another frame"
                );
                yielded += 1;
            }
            assert!(yielded <= 1, "byte {position} set to {value:#04x}");
            assert!(src.is_empty());
            checked += 1;
        }
    }
    checked
}

// ---------------------------------------------------------------------------------------------
// garbage and chunking

/// ESP-1, TR-2: garbage ended by a delimiter never costs the next good frame, whatever the
/// garbage (zeros, a frame cut short, a corrupted frame, an unknown kind, a run of bytes
/// without delimiter longer than `MAX_ENCODED`), and each kind of garbage is counted where it
/// belongs. The 0x00 after the garbage is the sender's job: the dongle sends one before
/// `BOOT`, the host one when it opens the port (ESP-3).
#[test]
fn garbage_before_a_delimiter_never_loses_the_next_frame() {
    let good = Frame::new(
        0x4242,
        Message::Send {
            dst: PEER,
            payload: vec![0, 1, 0, 2],
        },
    );
    let good_wire = wire(&good);
    let rx_wire = wire(&Frame::new(9, rx(-50, vec![0xab; 250])));
    let corrupt = {
        let mut bytes = rx_wire.clone();
        bytes[40] ^= 0x01;
        bytes
    };
    let unknown_kind = {
        let mut bytes = Vec::new();
        RawFrame {
            version: PROTOCOL_MAJOR,
            kind: 0x7f,
            seq: 1,
            payload: vec![1, 2, 3],
        }
        .encode_into(&mut bytes);
        bytes
    };
    let short_payload = {
        let mut bytes = Vec::new();
        RawFrame {
            version: PROTOCOL_MAJOR,
            kind: kind::TX_DONE,
            seq: 1,
            payload: vec![1, 2, 3],
        }
        .encode_into(&mut bytes);
        bytes
    };
    let mut noise = Noise(0x5eed_0002);
    let cases: Vec<(&str, Vec<u8>, CodecStats)> = vec![
        ("nothing", vec![], CodecStats::default()),
        ("zeros", vec![0; 17], CodecStats::default()),
        (
            "a frame cut short",
            rx_wire[..100].to_vec(),
            CodecStats {
                malformed: 1,
                ..CodecStats::default()
            },
        ),
        (
            "a corrupted frame",
            corrupt[..corrupt.len() - 1].to_vec(),
            CodecStats {
                crc_errors: 1,
                ..CodecStats::default()
            },
        ),
        (
            "an unknown kind",
            unknown_kind,
            CodecStats {
                unknown_kind: 1,
                ..CodecStats::default()
            },
        ),
        (
            "a payload too short for its kind",
            short_payload,
            CodecStats {
                malformed: 1,
                ..CodecStats::default()
            },
        ),
        (
            "a run without delimiter just over MAX_ENCODED",
            vec![0x55; MAX_ENCODED + 1],
            CodecStats {
                oversize: 1,
                ..CodecStats::default()
            },
        ),
        (
            "a run without delimiter of 10 kB",
            vec![0xff; 10_000],
            CodecStats {
                oversize: 1,
                ..CodecStats::default()
            },
        ),
        (
            "two partial frames and a frame whose CRC bytes are swapped",
            {
                let mut bytes = good_wire[..3].to_vec();
                bytes.push(0);
                bytes.extend_from_slice(&rx_wire[5..60]);
                bytes.push(0);
                let mut body = RawFrame::decode(&good_wire[..good_wire.len() - 1])
                    .map(|raw| {
                        let mut b = vec![raw.version, raw.kind];
                        b.extend_from_slice(&raw.seq.to_le_bytes());
                        b.extend_from_slice(&raw.payload);
                        b
                    })
                    .unwrap();
                let crc = conclave_espnow::frame::crc16_kermit(&body);
                body.extend_from_slice(&crc.to_be_bytes());
                conclave_espnow::frame::cobs_encode(&body, &mut bytes);
                bytes
            },
            CodecStats {
                malformed: 2,
                crc_errors: 1,
                ..CodecStats::default()
            },
        ),
    ];
    for (name, garbage, counted) in cases {
        let mut bytes = garbage.clone();
        bytes.push(DELIMITER);
        bytes.extend_from_slice(&good_wire);
        let expected_stats = CodecStats {
            frames: 1,
            ..counted
        };
        // In one piece, one byte at a time, and in random pieces.
        let mut sizes = vec![Vec::new(), vec![1; bytes.len()]];
        sizes.push((0..bytes.len()).map(|_| 1 + noise.below(300)).collect());
        for pieces in sizes {
            let (out, stats) = decode_chunked(&bytes, pieces);
            assert_eq!(out, vec![Inbound::Frame(good.clone())], "after {name}");
            assert_eq!(stats, expected_stats, "after {name}");
        }
    }
}

/// ESP-1: a sequence of frames of every kind, fed to the decoder one byte at a time and in
/// random pieces, yields exactly those frames in order.
#[test]
fn frames_survive_any_chunking() {
    let frames: Vec<Frame> = samples()
        .into_iter()
        .enumerate()
        .map(|(i, message)| Frame::new(i as u16, message))
        .collect();
    let bytes: Vec<u8> = frames.iter().flat_map(wire).collect();
    let expected: Vec<Inbound> = frames.into_iter().map(Inbound::Frame).collect();

    let (out, stats) = decode_chunked(&bytes, std::iter::repeat(1));
    assert_eq!(out, expected);
    assert_eq!(dropped(stats), 0);

    let mut noise = Noise(0x5eed_0003);
    for max in [2, 7, 64, 300, 2000, 9000] {
        let sizes: Vec<usize> = (0..bytes.len()).map(|_| 1 + noise.below(max)).collect();
        let (out, stats) = decode_chunked(&bytes, sizes);
        assert_eq!(out, expected, "pieces up to {max} bytes");
        assert_eq!(dropped(stats), 0);
    }
}

/// ESP-5: when the dongle is unplugged in the middle of a frame, the stream delivers the
/// frames before it, counts the cut-off frame as malformed and ends cleanly instead of
/// failing with "bytes remaining on stream".
#[tokio::test]
async fn frame_cut_off_by_the_end_of_the_stream_is_counted_not_an_error() {
    let first = Frame::new(1, Message::Resp { status: Status::Ok });
    let second = Frame::new(2, rx(-30, vec![0; 40]));
    let mut bytes = wire(&first);
    bytes.extend_from_slice(&wire(&second)[..20]);
    let mut stream = FramedRead::new(bytes.as_slice(), DongleCodec::new());
    assert_eq!(stream.next().await.unwrap().unwrap(), Inbound::Frame(first));
    assert!(stream.next().await.is_none(), "the stream ends cleanly");
    assert_eq!(
        stream.decoder().stats(),
        CodecStats {
            frames: 1,
            malformed: 1,
            ..CodecStats::default()
        }
    );

    // The tail of an oversize run, arriving after the run was dropped, was already counted
    // with it; and the codec is in step again for whatever comes next.
    let mut codec = DongleCodec::new();
    let mut src = BytesMut::from(&[0x11; MAX_ENCODED + 5][..]);
    assert_eq!(codec.decode(&mut src).unwrap(), None);
    src.extend_from_slice(&[0x11; 3]);
    assert_eq!(codec.decode_eof(&mut src).unwrap(), None);
    assert!(src.is_empty());
    let ping = Frame::new(3, Message::Ping);
    src.extend_from_slice(&wire(&ping));
    assert_eq!(codec.decode(&mut src).unwrap(), Some(Inbound::Frame(ping)));
    assert_eq!(
        codec.stats(),
        CodecStats {
            frames: 1,
            oversize: 1,
            ..CodecStats::default()
        }
    );
}

// ---------------------------------------------------------------------------------------------
// versions

/// ESP-3: a frame with a valid CRC but another protocol major comes out as
/// `Inbound::OtherVersion` with its header and payload untouched, whatever its kind and
/// payload (the layout of another major is not ours to judge), and the frame after it is
/// decoded as usual.
#[test]
fn frame_of_another_major_comes_out_as_other_version() {
    let others = [
        RawFrame {
            version: PROTOCOL_MAJOR + 1,
            kind: kind::INFO,
            seq: 0x0001,
            payload: vec![2, 0, 3, b'v', b'2', b'!'],
        },
        RawFrame {
            version: 0,
            kind: kind::BOOT,
            seq: 0,
            payload: vec![],
        },
        RawFrame {
            version: 0xff,
            kind: 0x42,
            seq: 0xffff,
            payload: vec![0; 300],
        },
    ];
    let next = Frame::new(5, Message::Ping);
    for other in others {
        let mut bytes = Vec::new();
        other.encode_into(&mut bytes);
        bytes.extend_from_slice(&wire(&next));
        let (out, stats) = decode_all(&bytes);
        assert_eq!(
            out,
            vec![Inbound::OtherVersion(other), Inbound::Frame(next.clone())]
        );
        assert_eq!(dropped(stats), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// properties

fn mac() -> impl Strategy<Value = Mac> {
    prop_oneof![
        Just(Mac::BROADCAST),
        Just(Mac([0; 6])),
        any::<[u8; 6]>().prop_map(Mac),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Ok),
        Just(Status::UnknownKind),
        Just(Status::Malformed),
        Just(Status::BadArgument),
        Just(Status::NoCredit),
        Just(Status::PeerTableFull),
        Just(Status::UnknownPeer),
        Just(Status::PayloadTooLarge),
        Just(Status::RadioError),
        // Codes 0..=8 have names; `Other` of one of them would come back under its name.
        (9u8..=u8::MAX).prop_map(Status::Other),
    ]
}

fn reset_reason() -> impl Strategy<Value = ResetReason> {
    prop_oneof![
        Just(ResetReason::PowerOn),
        Just(ResetReason::HostRequest),
        Just(ResetReason::Watchdog),
        Just(ResetReason::Crash),
        Just(ResetReason::BrownOut),
        (5u8..=u8::MAX).prop_map(ResetReason::Other),
    ]
}

/// Texts that fit their 255-byte field: any characters (at most 4 bytes each), or ASCII up
/// to the full 255 bytes.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<char>(), 0..=63).prop_map(|chars| chars.into_iter().collect()),
        prop::collection::vec(0x20u8..0x7f, 0..=255)
            .prop_map(|bytes| bytes.into_iter().map(char::from).collect()),
    ]
}

/// Radio payloads up to ESP-NOW v2's 1470 bytes, often rich in 0x00 and 0xff (the bytes COBS
/// and length fields care about).
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()], 0..=64),
        soup(1470),
        (0usize..=1470, prop_oneof![Just(0u8), Just(0xffu8)])
            .prop_map(|(len, fill)| vec![fill; len]),
    ]
}

/// Up to `max` seeded pseudo-random bytes: no zeros, a few, or many. Long vectors are
/// generated from a seed because proptest's element-wise vectors are slow in a debug build.
fn soup(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (
        0..=max,
        any::<u64>(),
        prop_oneof![Just(0usize), Just(2), Just(256)],
    )
        .prop_map(|(len, seed, zero_one_in)| Noise(seed | 1).bytes_with_zeros(len, zero_one_in))
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        any::<(u8, u8)>().prop_map(|(major, minor)| Message::Hello { major, minor }),
        Just(Message::Reset),
        any::<u8>().prop_map(|channel| Message::SetChannel { channel }),
        (mac(), any::<u8>(), any::<bool>(), any::<[u8; 16]>()).prop_map(
            |(mac, channel, encrypt, key)| Message::AddPeer {
                mac,
                channel,
                encrypt,
                key
            }
        ),
        mac().prop_map(|mac| Message::DelPeer { mac }),
        any::<[u8; 16]>().prop_map(|pmk| Message::SetPmk { pmk }),
        (mac(), payload()).prop_map(|(dst, payload)| Message::Send { dst, payload }),
        Just(Message::Ping),
        status().prop_map(|status| Message::Resp { status }),
        (
            any::<(u8, u8)>(),
            text(),
            mac(),
            any::<(u8, u16, u8, u8, u8)>()
        )
            .prop_map(
                |(
                    (protocol_major, protocol_minor),
                    firmware,
                    mac,
                    (espnow_version, max_payload, channel, tx_credits, max_peers),
                )| Message::Info(Info {
                    protocol_major,
                    protocol_minor,
                    firmware,
                    mac,
                    espnow_version,
                    max_payload,
                    channel,
                    tx_credits,
                    max_peers,
                })
            ),
        (reset_reason(), any::<(u8, u8)>()).prop_map(|(reason, (major, minor))| Message::Boot {
            reason,
            major,
            minor
        }),
        (mac(), mac(), any::<(i8, u8, u32)>(), payload()).prop_map(
            |(src, dst, (rssi, channel, timestamp_us), payload)| Message::Rx {
                src,
                dst,
                rssi,
                channel,
                timestamp_us,
                payload,
            }
        ),
        (any::<u16>(), mac(), any::<bool>()).prop_map(|(send_seq, mac, ok)| Message::TxDone {
            send_seq,
            mac,
            ok
        }),
        any::<(u32, u32, u32)>().prop_map(|(rx_dropped, tx_dropped, crc_errors)| {
            Message::Stats {
                rx_dropped,
                tx_dropped,
                crc_errors,
            }
        }),
        (any::<u8>(), text()).prop_map(|(level, text)| Message::Log { level, text }),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (any::<u16>(), message()).prop_map(|(seq, message)| Frame::new(seq, message))
}

/// Garbage that can never be a valid frame of this major by accident (short of a CRC
/// collision on random bytes, ~10^-10 per chunk once the layout checks are counted): random
/// bytes (zeros included), runs without delimiter past `MAX_ENCODED`, and frames cut short.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..40),
        soup(300),
        (MAX_ENCODED + 1..MAX_ENCODED + 600, 1u8..=u8::MAX).prop_map(|(len, fill)| vec![fill; len]),
        (frame(), any::<prop::sample::Index>()).prop_map(|(frame, cut)| {
            let bytes = wire(&frame);
            // Drop at least the last byte before the delimiter: a strict prefix decodes to
            // a shorter payload than its header promises, or not at all.
            bytes[..cut.index(bytes.len() - 1)].to_vec()
        }),
    ]
}

/// Sizes of the pieces a stream is cut into: the first 64 bytes one at a time, or random
/// sizes up to a random bound, from a seed; the rest in one piece. (The decoder rescans its
/// buffer at every call, so feeding kilobytes one byte at a time would cost seconds here;
/// the example tests above do that.)
fn pieces() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![1; 64]),
        (any::<u64>(), 16usize..2000).prop_map(|(seed, max)| {
            let mut noise = Noise(seed | 1);
            (0..512).map(|_| 1 + noise.below(max)).collect()
        }),
    ]
}

/// Bytes in which every non-empty run between delimiters is one dropped frame, counting a
/// run longer than `MAX_ENCODED` once.
fn chunks(bytes: &[u8]) -> u64 {
    bytes
        .split(|&b| b == DELIMITER)
        .filter(|chunk| !chunk.is_empty())
        .count() as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// ESP-1, TR-2: arbitrary bytes, given whole or in arbitrary pieces, never make the
    /// decoder panic or fail, never leave more than `MAX_ENCODED` bytes or a delimiter in its
    /// buffer, account for every chunk between delimiters exactly once, and whatever frame
    /// they yield re-encodes to a frame that decodes to itself.
    #[test]
    fn arbitrary_bytes_never_panic_stay_bounded_and_yield_only_valid_frames(
        bytes in prop_oneof![
            prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..64),
            soup(2 * MAX_ENCODED),
        ],
        sizes in pieces(),
    ) {
        let (whole, whole_stats) = decode_all(&bytes);
        let (pieces, piece_stats) = decode_chunked(&bytes, sizes);
        prop_assert_eq!(&whole, &pieces);
        // A trailing run without delimiter is only counted once it is longer than a frame.
        let trailing = bytes.rsplit(|&b| b == DELIMITER).next().unwrap_or(&[]);
        let complete = chunks(&bytes) - u64::from(!trailing.is_empty());
        for stats in [whole_stats, piece_stats] {
            let trailing_oversize = u64::from(trailing.len() > MAX_ENCODED);
            prop_assert_eq!(
                whole.len() as u64 + dropped(stats),
                complete + trailing_oversize
            );
        }
        for inbound in whole {
            match inbound {
                Inbound::Frame(frame) => {
                    let (again, _) = decode_all(&wire(&frame));
                    prop_assert_eq!(again, vec![Inbound::Frame(frame)]);
                }
                Inbound::OtherVersion(raw) => {
                    prop_assert_ne!(raw.version, PROTOCOL_MAJOR);
                    let mut again = Vec::new();
                    raw.encode_into(&mut again);
                    prop_assert_eq!(RawFrame::decode(&again[..again.len() - 1]), Ok(raw));
                }
            }
        }
    }

    /// ESP-1, ESP-2: arbitrary frames of every kind round-trip through the codec.
    #[test]
    fn arbitrary_frames_round_trip(frame in frame()) {
        let bytes = wire(&frame);
        prop_assert!(bytes.len() <= MAX_ENCODED + 1);
        prop_assert_eq!(bytes.iter().position(|&b| b == DELIMITER), Some(bytes.len() - 1));
        let (out, stats) = decode_all(&bytes);
        prop_assert_eq!(out, vec![Inbound::Frame(frame)]);
        prop_assert_eq!(stats.frames, 1);
    }
}

proptest! {
    // Each case builds, encodes and decodes up to four frames and as much garbage: 1,024
    // cases keep it to a couple of seconds in a debug build.
    #![proptest_config(ProptestConfig::with_cases(1_024))]

    /// ESP-1, TR-2: frames with garbage between them (each garbage ended by a delimiter),
    /// in arbitrary pieces, all come out in order, and every piece of garbage is counted.
    #[test]
    fn frames_among_garbage_all_come_out_in_order(
        items in prop::collection::vec((garbage(), frame()), 1..5),
        sizes in pieces(),
    ) {
        let mut bytes = Vec::new();
        let mut garbage_chunks = 0;
        for (garbage, frame) in &items {
            bytes.extend_from_slice(garbage);
            bytes.push(DELIMITER);
            garbage_chunks += chunks(garbage);
            bytes.extend_from_slice(&wire(frame));
        }
        let (out, stats) = decode_chunked(&bytes, sizes);
        // Random bytes pass the CRC once in 65,536 chunks; such a chunk with another version
        // byte is handed up, not dropped. One that also has version 1, a known kind and the
        // exact layout of that kind is too rare to consider.
        let (frames, others): (Vec<Inbound>, Vec<Inbound>) = out
            .into_iter()
            .partition(|inbound| matches!(inbound, Inbound::Frame(_)));
        let expected: Vec<Inbound> =
            items.into_iter().map(|(_, frame)| Inbound::Frame(frame)).collect();
        prop_assert_eq!(frames, expected);
        prop_assert_eq!(dropped(stats) + others.len() as u64, garbage_chunks);
    }
}
