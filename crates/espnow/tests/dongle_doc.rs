//! ESP-6: `docs/dongle-protocol.md` cannot drift from the code. Its hex examples, its COBS
//! worked example, its size arithmetic and its tables of kinds, status codes and reset reasons
//! sit between HTML comment markers (`<!-- example:NAME -->` … `<!-- /example:NAME -->` and
//! alike); this test renders each from the encoder and compares.
//!
//! After a deliberate change, `CONCLAVE_BLESS_DOC=1 cargo test -p conclave-espnow --test
//! dongle_doc` rewrites the marked regions from the code (and still fails on a table that
//! disagrees, since tables are written by hand).

#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use bytes::BytesMut;
use conclave_espnow::frame::{
    CRC_LEN, HEADER_LEN, MAX_DECODED, MAX_ENCODED, MAX_PAYLOAD, PROTOCOL_MAJOR, PROTOCOL_MINOR,
    RawFrame, cobs_encode, crc16_kermit,
};
use conclave_espnow::message::kind;
use conclave_espnow::{DongleCodec, Frame, Info, Mac, Message, ResetReason, Status};
use tokio_util::codec::Encoder;

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/dongle-protocol.md")
}

// ---------------------------------------------------------------------------------------------
// the examples

const GW_B: Mac = Mac([0x24, 0x6f, 0x28, 0x0b, 0x0b, 0x0b]);
const GW_C: Mac = Mac([0x24, 0x6f, 0x28, 0x0c, 0x0c, 0x0c]);
const DONGLE: Mac = Mac([0x24, 0x6f, 0x28, 0xaa, 0xbb, 0xcc]);

/// The examples of the document, by marker name: one short session, in order.
fn examples() -> Vec<(&'static str, Frame)> {
    vec![
        (
            "boot",
            Frame::new(
                0,
                Message::Boot {
                    reason: ResetReason::PowerOn,
                    major: PROTOCOL_MAJOR,
                    minor: PROTOCOL_MINOR,
                },
            ),
        ),
        (
            "hello",
            Frame::new(
                1,
                Message::Hello {
                    major: PROTOCOL_MAJOR,
                    minor: PROTOCOL_MINOR,
                },
            ),
        ),
        (
            "info",
            Frame::new(
                1,
                Message::Info(Info {
                    protocol_major: PROTOCOL_MAJOR,
                    protocol_minor: PROTOCOL_MINOR,
                    firmware: "conclave-dongle 1.0.0".into(),
                    mac: DONGLE,
                    espnow_version: 1,
                    max_payload: 250,
                    channel: 1,
                    tx_credits: 8,
                    max_peers: 19,
                }),
            ),
        ),
        (
            "set_channel",
            Frame::new(2, Message::SetChannel { channel: 6 }),
        ),
        ("resp", Frame::new(2, Message::Resp { status: Status::Ok })),
        (
            "set_pmk",
            Frame::new(
                3,
                Message::SetPmk {
                    pmk: *b"pmk-of-site-1-16",
                },
            ),
        ),
        (
            "add_peer",
            Frame::new(
                4,
                Message::AddPeer {
                    mac: GW_B,
                    channel: 0,
                    encrypt: true,
                    key: *b"lmk-of-gw-b-0016",
                },
            ),
        ),
        ("del_peer", Frame::new(5, Message::DelPeer { mac: GW_C })),
        (
            "send",
            Frame::new(
                6,
                Message::Send {
                    dst: GW_B,
                    payload: vec![0x93, 0x01, 0x00, 0x00, 0x2a, 0x00, 0xc3, 0xff],
                },
            ),
        ),
        (
            "resp_no_credit",
            Frame::new(
                7,
                Message::Resp {
                    status: Status::NoCredit,
                },
            ),
        ),
        (
            "tx_done",
            Frame::new(
                1,
                Message::TxDone {
                    send_seq: 6,
                    mac: GW_B,
                    ok: true,
                },
            ),
        ),
        (
            "rx",
            Frame::new(
                2,
                Message::Rx {
                    src: GW_C,
                    dst: Mac::BROADCAST,
                    rssi: -42,
                    channel: 6,
                    timestamp_us: 12_345_678,
                    payload: vec![0x93, 0x02, 0x00, 0xc2, 0x00, 0x10],
                },
            ),
        ),
        (
            "stats",
            Frame::new(
                3,
                Message::Stats {
                    rx_dropped: 0,
                    tx_dropped: 2,
                    crc_errors: 1,
                },
            ),
        ),
        (
            "log",
            Frame::new(
                4,
                Message::Log {
                    level: 2,
                    text: "peer added".into(),
                },
            ),
        ),
        ("ping", Frame::new(8, Message::Ping)),
        ("reset", Frame::new(9, Message::Reset)),
    ]
}

/// One field of an annotated frame: its bytes, its name, what the bytes say.
struct Field {
    bytes: Vec<u8>,
    name: String,
    value: String,
}

fn field(bytes: &[u8], name: &str, value: impl Into<String>) -> Field {
    Field {
        bytes: bytes.to_vec(),
        name: name.into(),
        value: value.into(),
    }
}

fn mac_field(mac: Mac, name: &str) -> Field {
    let note = if mac.is_broadcast() {
        format!("`{mac}` (broadcast)")
    } else {
        format!("`{mac}`")
    };
    field(&mac.0, name, note)
}

fn text_fields(fields: &mut Vec<Field>, name: &str, text: &str) {
    let bytes = text.as_bytes();
    fields.push(field(
        &[bytes.len() as u8],
        &format!("{name}_len"),
        bytes.len().to_string(),
    ));
    fields.push(field(bytes, name, format!("`{text}` (UTF-8)")));
}

fn bytes_fields(fields: &mut Vec<Field>, payload: &[u8]) {
    let len = payload.len() as u16;
    fields.push(field(&len.to_le_bytes(), "len", len.to_string()));
    fields.push(field(payload, "payload", "the ESP-NOW frame's bytes"));
}

fn kind_name(kind: u8) -> &'static str {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, name)| *name)
        .unwrap()
}

fn status_name(status: Status) -> String {
    STATUS_NAMES
        .iter()
        .find(|(s, _)| *s == status)
        .map_or_else(|| format!("{status:?}"), |(_, name)| (*name).to_string())
}

/// The frame body (header and payload), field by field, as the encoder lays it out.
fn annotate(frame: &Frame) -> Vec<Field> {
    let message = &frame.message;
    let mut fields = vec![
        field(
            &[PROTOCOL_MAJOR],
            "ver",
            format!("protocol major {PROTOCOL_MAJOR}"),
        ),
        field(
            &[message.kind()],
            "kind",
            format!("`{}`", kind_name(message.kind())),
        ),
        field(&frame.seq.to_le_bytes(), "seq", frame.seq.to_string()),
    ];
    match message {
        Message::Hello { major, minor } => {
            fields.push(field(&[*major], "major", format!("host speaks {major}.x")));
            fields.push(field(&[*minor], "minor", minor.to_string()));
        }
        Message::Reset | Message::Ping => {}
        Message::SetChannel { channel } => {
            fields.push(field(&[*channel], "channel", channel.to_string()));
        }
        Message::AddPeer {
            mac,
            channel,
            encrypt,
            key,
        } => {
            fields.push(mac_field(*mac, "mac"));
            let note = match channel {
                0 => "0: the current channel".to_string(),
                other => other.to_string(),
            };
            fields.push(field(&[*channel], "channel", note));
            fields.push(field(&[u8::from(*encrypt)], "encrypt", encrypt.to_string()));
            fields.push(field(
                key,
                "lmk",
                format!("`{}`", String::from_utf8_lossy(key)),
            ));
        }
        Message::DelPeer { mac } => fields.push(mac_field(*mac, "mac")),
        Message::SetPmk { pmk } => fields.push(field(
            pmk,
            "pmk",
            format!("`{}`", String::from_utf8_lossy(pmk)),
        )),
        Message::Send { dst, payload } => {
            fields.push(mac_field(*dst, "dst"));
            bytes_fields(&mut fields, payload);
        }
        Message::Resp { status } => {
            let code = RawFrame::decode(&{
                let w = wire(frame);
                w[..w.len() - 1].to_vec()
            })
            .unwrap()
            .payload[0];
            fields.push(field(
                &[code],
                "status",
                format!("`{}`", status_name(*status)),
            ));
        }
        Message::Info(info) => {
            fields.push(field(
                &[info.protocol_major],
                "major",
                info.protocol_major.to_string(),
            ));
            fields.push(field(
                &[info.protocol_minor],
                "minor",
                info.protocol_minor.to_string(),
            ));
            text_fields(&mut fields, "firmware", &info.firmware);
            fields.push(mac_field(info.mac, "mac"));
            fields.push(field(
                &[info.espnow_version],
                "espnow_version",
                info.espnow_version.to_string(),
            ));
            fields.push(field(
                &info.max_payload.to_le_bytes(),
                "max_payload",
                info.max_payload.to_string(),
            ));
            fields.push(field(&[info.channel], "channel", info.channel.to_string()));
            fields.push(field(
                &[info.tx_credits],
                "tx_credits",
                info.tx_credits.to_string(),
            ));
            fields.push(field(
                &[info.max_peers],
                "max_peers",
                info.max_peers.to_string(),
            ));
        }
        Message::Boot {
            reason,
            major,
            minor,
        } => {
            let name = REASONS
                .iter()
                .find(|(r, _)| r == reason)
                .map(|(_, name)| *name)
                .unwrap();
            let code = RawFrame::decode(&{
                let w = wire(frame);
                w[..w.len() - 1].to_vec()
            })
            .unwrap()
            .payload[0];
            fields.push(field(&[code], "reason", format!("`{name}`")));
            fields.push(field(&[*major], "major", major.to_string()));
            fields.push(field(&[*minor], "minor", minor.to_string()));
        }
        Message::Rx {
            src,
            dst,
            rssi,
            channel,
            timestamp_us,
            payload,
        } => {
            fields.push(mac_field(*src, "src"));
            fields.push(mac_field(*dst, "dst"));
            fields.push(field(&rssi.to_le_bytes(), "rssi", format!("{rssi} dBm")));
            fields.push(field(&[*channel], "channel", channel.to_string()));
            fields.push(field(
                &timestamp_us.to_le_bytes(),
                "timestamp_us",
                timestamp_us.to_string(),
            ));
            bytes_fields(&mut fields, payload);
        }
        Message::TxDone { send_seq, mac, ok } => {
            fields.push(field(
                &send_seq.to_le_bytes(),
                "send_seq",
                send_seq.to_string(),
            ));
            fields.push(mac_field(*mac, "mac"));
            fields.push(field(&[u8::from(*ok)], "ok", ok.to_string()));
        }
        Message::Stats {
            rx_dropped,
            tx_dropped,
            crc_errors,
        } => {
            fields.push(field(
                &rx_dropped.to_le_bytes(),
                "rx_dropped",
                rx_dropped.to_string(),
            ));
            fields.push(field(
                &tx_dropped.to_le_bytes(),
                "tx_dropped",
                tx_dropped.to_string(),
            ));
            fields.push(field(
                &crc_errors.to_le_bytes(),
                "crc_errors",
                crc_errors.to_string(),
            ));
        }
        Message::Log { level, text } => {
            let name = ["error", "warning", "info", "debug"]
                .get(usize::from(*level))
                .unwrap_or(&"debug");
            fields.push(field(&[*level], "level", format!("{level}: {name}")));
            text_fields(&mut fields, "text", text);
        }
    }
    fields
}

fn wire(frame: &Frame) -> Vec<u8> {
    let mut dst = BytesMut::new();
    DongleCodec::new().encode(frame.clone(), &mut dst).unwrap();
    dst.to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Hex, 16 bytes a line.
fn hex_lines(bytes: &[u8]) -> String {
    bytes.chunks(16).map(hex).collect::<Vec<_>>().join("\n")
}

/// Offsets of the COBS code bytes in an encoded frame (delimiter excluded).
fn code_offsets(encoded: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut index = 0;
    while index < encoded.len() {
        offsets.push(index);
        index += usize::from(encoded[index]);
    }
    offsets
}

fn list(numbers: &[usize]) -> String {
    match numbers {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!(
            "{} and {last}",
            init.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The markdown of one example: the decoded frame field by field, then the wire bytes.
fn render_example(frame: &Frame) -> String {
    let fields = annotate(frame);
    let body: Vec<u8> = fields.iter().flat_map(|f| f.bytes.clone()).collect();
    let raw = frame.to_raw();
    let mut expected_body = vec![raw.version, raw.kind];
    expected_body.extend_from_slice(&raw.seq.to_le_bytes());
    expected_body.extend_from_slice(&raw.payload);
    assert_eq!(
        body, expected_body,
        "the annotation of {frame:?} is not the encoder's layout"
    );
    let crc = crc16_kermit(&body);
    let bytes = wire(frame);
    let encoded = &bytes[..bytes.len() - 1];

    let mut out = String::new();
    out.push_str("| offset | bytes | field | value |\n|---:|---|---|---|\n");
    let mut offset = 0;
    for f in &fields {
        let chunks: Vec<&[u8]> = if f.bytes.is_empty() {
            vec![&[]]
        } else {
            f.bytes.chunks(16).collect()
        };
        for (i, chunk) in chunks.iter().enumerate() {
            let shown = if chunk.is_empty() {
                "(none)".to_string()
            } else {
                format!("`{}`", hex(chunk))
            };
            let (name, value) = if i == 0 {
                (format!("`{}`", f.name), f.value.clone())
            } else {
                (format!("`{}` (cont.)", f.name), String::new())
            };
            writeln!(out, "| {offset} | {shown} | {name} | {value} |").unwrap();
            offset += chunk.len();
        }
    }
    writeln!(
        out,
        "| {offset} | `{}` | CRC | CRC-16/KERMIT of bytes 0–{} = `0x{crc:04x}`, little-endian |",
        hex(&crc.to_le_bytes()),
        offset - 1
    )
    .unwrap();
    writeln!(
        out,
        "\nOn the wire, {} bytes: COBS code bytes at offsets {}, the delimiter at {}.\n",
        bytes.len(),
        list(&code_offsets(encoded)),
        bytes.len() - 1
    )
    .unwrap();
    writeln!(out, "```text\n{}\n```", hex_lines(&bytes)).unwrap();
    out
}

/// The COBS worked example of section 3.
fn render_cobs_example() -> String {
    let input = [0x11, 0x22, 0x00, 0x33, 0x00, 0x00, 0x44];
    let mut encoded = Vec::new();
    cobs_encode(&input, &mut encoded);
    let mut out = String::new();
    writeln!(out, "```text").unwrap();
    writeln!(out, "input     {}", hex(&input)).unwrap();
    writeln!(out, "encoded   {}", hex(&encoded)).unwrap();
    writeln!(out, "on wire   {} 00", hex(&encoded)).unwrap();
    writeln!(out, "```").unwrap();
    let long: Vec<u8> = (1..=254).collect();
    let mut long_encoded = Vec::new();
    cobs_encode(&long, &mut long_encoded);
    writeln!(
        out,
        "\nA run of 254 non-zero bytes (`01 02 … fe`) fills a block: it encodes to `{:02x}` \
         followed by the 254 bytes, then `{:02x}` for the empty block after it ({} bytes in all, \
         plus the delimiter).",
        long_encoded[0],
        long_encoded[255],
        long_encoded.len()
    )
    .unwrap();
    out
}

/// Frame size arithmetic of sections 2 and 3.
fn render_sizes() -> String {
    let rx250 = wire(&Frame::new(
        0xffff,
        Message::Rx {
            src: GW_C,
            dst: Mac::BROADCAST,
            rssi: -42,
            channel: 6,
            timestamp_us: 0xffff_ffff,
            payload: vec![0xff; 250],
        },
    ));
    let send250 = wire(&Frame::new(
        0xffff,
        Message::Send {
            dst: GW_B,
            payload: vec![0xff; 250],
        },
    ));
    let baud_bytes = 921_600 / 10;
    format!(
        "- `MAX_PAYLOAD` = {MAX_PAYLOAD} bytes: the longest payload of any message (an `RX` \
         of a 1470-byte ESP-NOW v2 frame needs 1490).\n\
         - `MAX_DECODED` = {HEADER_LEN} + {MAX_PAYLOAD} + {CRC_LEN} = {MAX_DECODED} bytes: \
         the longest frame before COBS.\n\
         - `MAX_ENCODED` = {MAX_DECODED} + {MAX_DECODED} / 254 + 1 = {MAX_ENCODED} bytes: the \
         longest frame after COBS, delimiter excluded. A receiver needs a buffer of \
         {} bytes.\n\
         - At 921600 baud 8N1 the line carries {baud_bytes} bytes per second each way. An `RX` \
         of a 250-byte ESP-NOW frame is at most {} bytes on the wire, so about {} of them per \
         second; a `SEND` of 250 bytes is at most {} bytes, about {} per second.\n",
        MAX_ENCODED + 1,
        rx250.len(),
        baud_bytes / rx250.len(),
        send250.len(),
        baud_bytes / send250.len(),
    )
}

/// Every generated region: marker name and content.
fn regions() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = examples()
        .into_iter()
        .map(|(name, frame)| (format!("example:{name}"), render_example(&frame)))
        .collect();
    out.push(("cobs-example".into(), render_cobs_example()));
    out.push(("sizes".into(), render_sizes()));
    out
}

/// The text between `<!-- NAME -->` and `<!-- /NAME -->`, and where it starts and ends.
fn region(doc: &str, name: &str) -> Option<(usize, usize)> {
    let open = format!("<!-- {name} -->\n");
    let close = format!("<!-- /{name} -->");
    let start = doc.find(&open)? + open.len();
    let end = start + doc[start..].find(&close)?;
    Some((start, end))
}

/// ESP-6: every hex example, the COBS example and the size arithmetic in the document are
/// what the encoder produces, and the document has no example this test does not know.
#[test]
fn doc_examples_match_the_encoder() {
    let path = doc_path();
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let bless = std::env::var_os("CONCLAVE_BLESS_DOC").is_some();
    let mut stale = Vec::new();
    for (name, content) in regions() {
        let (start, end) =
            region(&doc, &name).unwrap_or_else(|| panic!("no <!-- {name} --> region in the doc"));
        if doc[start..end] != content {
            if bless {
                doc.replace_range(start..end, &content);
            } else {
                stale.push(format!("<!-- {name} -->\n{content}<!-- /{name} -->"));
            }
        }
    }
    if bless {
        std::fs::write(&path, &doc).unwrap();
    }
    assert!(
        stale.is_empty(),
        "docs/dongle-protocol.md differs from the encoder; expected:\n\n{}\n\n(rerun with \
         CONCLAVE_BLESS_DOC=1 to rewrite the regions)",
        stale.join("\n\n")
    );

    let known: Vec<String> = regions().into_iter().map(|(name, _)| name).collect();
    // Markers open a line; the ones quoted in the text do not.
    for (index, _) in doc.match_indices("\n<!-- example:") {
        let index = index + 1;
        let name = doc[index + 5..].split(" -->").next().unwrap();
        assert!(known.iter().any(|k| k == name), "unknown example {name}");
    }
}

/// ESP-1: the COBS example and each annotated example decode back (the bytes in the
/// document are valid frames, not just equal to something).
#[test]
fn doc_wire_examples_decode_to_their_frames() {
    use tokio_util::codec::Decoder;
    let doc = std::fs::read_to_string(doc_path()).unwrap();
    for (name, frame) in examples() {
        let (start, end) = region(&doc, &format!("example:{name}")).unwrap();
        let block = doc[start..end]
            .split("```text\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap();
        let bytes: Vec<u8> = block
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        let mut src = BytesMut::from(bytes.as_slice());
        let decoded = DongleCodec::new().decode(&mut src).unwrap();
        assert_eq!(
            decoded,
            Some(conclave_espnow::Inbound::Frame(frame)),
            "example {name}"
        );
        assert!(src.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// the tables

const KINDS: &[(u8, &str)] = &[
    (kind::HELLO, "HELLO"),
    (kind::RESET, "RESET"),
    (kind::SET_CHANNEL, "SET_CHANNEL"),
    (kind::ADD_PEER, "ADD_PEER"),
    (kind::DEL_PEER, "DEL_PEER"),
    (kind::SET_PMK, "SET_PMK"),
    (kind::SEND, "SEND"),
    (kind::PING, "PING"),
    (kind::RESP, "RESP"),
    (kind::INFO, "INFO"),
    (kind::BOOT, "BOOT"),
    (kind::RX, "RX"),
    (kind::TX_DONE, "TX_DONE"),
    (kind::STATS, "STATS"),
    (kind::LOG, "LOG"),
];

const STATUSES: &[(u8, Status)] = &[
    (0, Status::Ok),
    (1, Status::UnknownKind),
    (2, Status::Malformed),
    (3, Status::BadArgument),
    (4, Status::NoCredit),
    (5, Status::PeerTableFull),
    (6, Status::UnknownPeer),
    (7, Status::PayloadTooLarge),
    (8, Status::RadioError),
];

const STATUS_NAMES: &[(Status, &str)] = &[
    (Status::Ok, "OK"),
    (Status::UnknownKind, "UNKNOWN_KIND"),
    (Status::Malformed, "MALFORMED"),
    (Status::BadArgument, "BAD_ARGUMENT"),
    (Status::NoCredit, "NO_CREDIT"),
    (Status::PeerTableFull, "PEER_TABLE_FULL"),
    (Status::UnknownPeer, "UNKNOWN_PEER"),
    (Status::PayloadTooLarge, "PAYLOAD_TOO_LARGE"),
    (Status::RadioError, "RADIO_ERROR"),
];

const REASONS: &[(ResetReason, &str)] = &[
    (ResetReason::PowerOn, "POWER_ON"),
    (ResetReason::HostRequest, "HOST_REQUEST"),
    (ResetReason::Watchdog, "WATCHDOG"),
    (ResetReason::Crash, "CRASH"),
    (ResetReason::BrownOut, "BROWN_OUT"),
];

/// The first two cells of each data row of the table in region `name`: (number, name).
fn table(doc: &str, name: &str) -> Vec<(u8, String)> {
    let (start, end) =
        region(doc, name).unwrap_or_else(|| panic!("no <!-- {name} --> region in the doc"));
    doc[start..end]
        .lines()
        .filter(|line| line.starts_with('|') && !line.starts_with("|--") && !line.starts_with("|:"))
        .skip(1) // the header row
        .map(|line| {
            let cells: Vec<&str> = line
                .split('|')
                .map(|c| c.trim().trim_matches('`'))
                .collect();
            let number = cells[1]
                .strip_prefix("0x")
                .map_or_else(|| cells[1].parse(), |h| u8::from_str_radix(h, 16))
                .unwrap_or_else(|_| panic!("{name}: bad number in {line:?}"));
            (number, cells[2].to_string())
        })
        .collect()
}

fn resp_code(status: Status) -> u8 {
    let w = wire(&Frame::new(0, Message::Resp { status }));
    RawFrame::decode(&w[..w.len() - 1]).unwrap().payload[0]
}

fn boot_code(reason: ResetReason) -> u8 {
    let w = wire(&Frame::new(
        0,
        Message::Boot {
            reason,
            major: 1,
            minor: 0,
        },
    ));
    RawFrame::decode(&w[..w.len() - 1]).unwrap().payload[0]
}

/// ESP-2, ESP-6: the document's tables of message kinds, `RESP` status codes and `BOOT`
/// reset reasons list exactly the numbers the code uses, under the names used here.
#[test]
fn doc_tables_match_the_code() {
    let doc = std::fs::read_to_string(doc_path()).unwrap();

    let documented = table(&doc, "table:kinds");
    let expected: Vec<(u8, String)> = KINDS.iter().map(|(k, n)| (*k, (*n).to_string())).collect();
    assert_eq!(documented, expected, "kinds");

    let documented = table(&doc, "table:status");
    let expected: Vec<(u8, String)> = STATUSES
        .iter()
        .map(|(code, status)| {
            assert_eq!(resp_code(*status), *code);
            (*code, status_name(*status))
        })
        .collect();
    assert_eq!(documented, expected, "status codes");

    let documented = table(&doc, "table:reset");
    let expected: Vec<(u8, String)> = REASONS
        .iter()
        .map(|(reason, name)| (boot_code(*reason), (*name).to_string()))
        .collect();
    assert_eq!(documented, expected, "reset reasons");

    // The CRC parameters the document gives, against the implementation.
    assert_eq!(crc16_kermit(b"123456789"), 0x2189);
    assert!(doc.contains("`0x2189`"));
}
