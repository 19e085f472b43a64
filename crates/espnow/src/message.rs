//! Every message between host and dongle (ESP-2), with its payload layout.
//!
//! Host to dongle, each answered with the same `seq`: `HELLO` (by `INFO`), `RESET`,
//! `SET_CHANNEL`, `ADD_PEER`, `DEL_PEER`, `SET_PMK`, `SEND`, `PING` (by `RESP`). Dongle to
//! host: `RESP`, `INFO`, `BOOT`, `RX`, `TX_DONE`, `STATS`, `LOG`. All integers are
//! little-endian; variable-length fields carry their length; a payload must be used up
//! exactly, so a frame whose length was damaged is refused even when its CRC happened to
//! match. `docs/dongle-protocol.md` is the byte-level reference.

use std::fmt;

use crate::error::FrameError;
use crate::frame::{PROTOCOL_MAJOR, RawFrame};

/// A 6-byte ESP-NOW (Wi-Fi) MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// `FF:FF:FF:FF:FF:FF`: ESP-NOW broadcast.
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// Whether this is the broadcast address.
    pub fn is_broadcast(self) -> bool {
        self == Self::BROADCAST
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Mac {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let mut bytes = [0u8; 6];
        let mut parts = text.split(':');
        for byte in &mut bytes {
            let part = parts
                .next()
                .ok_or_else(|| format!("{text:?}: a MAC has six parts"))?;
            *byte = u8::from_str_radix(part, 16)
                .map_err(|_| format!("{text:?}: {part:?} is not a hex byte"))?;
        }
        if parts.next().is_some() {
            return Err(format!("{text:?}: a MAC has six parts"));
        }
        Ok(Mac(bytes))
    }
}

/// The answer status of a `RESP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done.
    Ok,
    /// The dongle does not know this message kind.
    UnknownKind,
    /// The payload has the wrong length or layout.
    Malformed,
    /// A field is out of range (channel, key length).
    BadArgument,
    /// `SEND` while no TX credit is left; the frame was not queued.
    NoCredit,
    /// `ADD_PEER` with the peer table full (ESP-NOW: 20 peers).
    PeerTableFull,
    /// `DEL_PEER` of a peer not in the table, or `SEND` to a unicast peer never added.
    UnknownPeer,
    /// `SEND` payload longer than the radio's `max_payload`.
    PayloadTooLarge,
    /// The radio refused the operation.
    RadioError,
    /// A status this host does not know (from a newer dongle).
    Other(u8),
}

impl Status {
    fn to_u8(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::UnknownKind => 1,
            Status::Malformed => 2,
            Status::BadArgument => 3,
            Status::NoCredit => 4,
            Status::PeerTableFull => 5,
            Status::UnknownPeer => 6,
            Status::PayloadTooLarge => 7,
            Status::RadioError => 8,
            Status::Other(code) => code,
        }
    }

    fn from_u8(code: u8) -> Self {
        match code {
            0 => Status::Ok,
            1 => Status::UnknownKind,
            2 => Status::Malformed,
            3 => Status::BadArgument,
            4 => Status::NoCredit,
            5 => Status::PeerTableFull,
            6 => Status::UnknownPeer,
            7 => Status::PayloadTooLarge,
            8 => Status::RadioError,
            other => Status::Other(other),
        }
    }
}

/// Why the dongle (re)started, in `BOOT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetReason {
    /// Power on.
    PowerOn,
    /// The host sent `RESET`.
    HostRequest,
    /// The watchdog fired.
    Watchdog,
    /// A crash (panic, exception).
    Crash,
    /// Brown-out.
    BrownOut,
    /// Something else (code as sent).
    Other(u8),
}

impl ResetReason {
    fn to_u8(self) -> u8 {
        match self {
            ResetReason::PowerOn => 0,
            ResetReason::HostRequest => 1,
            ResetReason::Watchdog => 2,
            ResetReason::Crash => 3,
            ResetReason::BrownOut => 4,
            ResetReason::Other(code) => code,
        }
    }

    fn from_u8(code: u8) -> Self {
        match code {
            0 => ResetReason::PowerOn,
            1 => ResetReason::HostRequest,
            2 => ResetReason::Watchdog,
            3 => ResetReason::Crash,
            4 => ResetReason::BrownOut,
            other => ResetReason::Other(other),
        }
    }
}

/// The dongle's description of itself, the answer to `HELLO` (ESP-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// Protocol major version; a different one from the host's is refused.
    pub protocol_major: u8,
    /// Protocol minor version; any is accepted.
    pub protocol_minor: u8,
    /// Firmware version text (at most 32 bytes).
    pub firmware: String,
    /// The dongle's own MAC address.
    pub mac: Mac,
    /// ESP-NOW version: 1 (250-byte payloads) or 2 (1470).
    pub espnow_version: u8,
    /// Largest `SEND` payload the radio accepts.
    pub max_payload: u16,
    /// Wi-Fi channel the radio is on.
    pub channel: u8,
    /// `SEND`s that may be outstanding (ESP-4).
    pub tx_credits: u8,
    /// Peer table size (ESP-NOW: 20).
    pub max_peers: u8,
}

/// A message between host and dongle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Host: who are you? Answered by `INFO`. Carries the host's protocol version.
    Hello {
        /// Host protocol major.
        major: u8,
        /// Host protocol minor.
        minor: u8,
    },
    /// Host: restart; answered by `RESP`, then the dongle reboots and sends `BOOT`.
    Reset,
    /// Host: switch the radio to this channel (1–14).
    SetChannel {
        /// The channel.
        channel: u8,
    },
    /// Host: add a unicast peer (ESP-NOW needs one per unicast destination).
    AddPeer {
        /// The peer.
        mac: Mac,
        /// Its channel (0: the current one).
        channel: u8,
        /// Encrypt frames to it with `key` (the radio's LMK).
        encrypt: bool,
        /// The 16-byte local master key; zeros when not encrypting.
        key: [u8; 16],
    },
    /// Host: remove a peer.
    DelPeer {
        /// The peer.
        mac: Mac,
    },
    /// Host: set the 16-byte primary master key.
    SetPmk {
        /// The key.
        pmk: [u8; 16],
    },
    /// Host: transmit `payload` to `dst` (broadcast: [`Mac::BROADCAST`]). Answered by `RESP`
    /// when queued, then by `TX_DONE` whose `send_seq` is this seq when the radio is done with
    /// it (the `TX_DONE` header carries the dongle's own counter).
    Send {
        /// Destination.
        dst: Mac,
        /// What to send.
        payload: Vec<u8>,
    },
    /// Host: are you there? Answered by `RESP`.
    Ping,
    /// Dongle: the answer to a request with the same seq.
    Resp {
        /// The outcome.
        status: Status,
    },
    /// Dongle: the answer to `HELLO`.
    Info(Info),
    /// Dongle: I (re)started; I forgot channel, peers and keys (ESP-3).
    Boot {
        /// Why.
        reason: ResetReason,
        /// Its protocol major.
        major: u8,
        /// Its protocol minor.
        minor: u8,
    },
    /// Dongle: a frame was received over the air.
    Rx {
        /// Sender.
        src: Mac,
        /// Destination (this dongle, or broadcast).
        dst: Mac,
        /// Received signal strength, dBm.
        rssi: i8,
        /// Channel it was heard on.
        channel: u8,
        /// Dongle time of reception, microseconds since its boot (wraps).
        timestamp_us: u32,
        /// The frame.
        payload: Vec<u8>,
    },
    /// Dongle: the radio finished with the `SEND` of `send_seq`; a TX credit is back (ESP-4).
    TxDone {
        /// The `SEND`'s seq.
        send_seq: u16,
        /// Its destination.
        mac: Mac,
        /// Delivered (unicast: acknowledged by the peer; broadcast: always true).
        ok: bool,
    },
    /// Dongle: counters since boot.
    Stats {
        /// Frames received over the air and dropped (host too slow).
        rx_dropped: u32,
        /// Frames to send dropped.
        tx_dropped: u32,
        /// Host frames dropped for a bad CRC.
        crc_errors: u32,
    },
    /// Dongle: a log line.
    Log {
        /// 0 error, 1 warning, 2 info, 3 debug.
        level: u8,
        /// The text (UTF-8, lossily decoded).
        text: String,
    },
}

/// Kind numbers: host commands 0x01–0x7f, dongle messages 0x80–0xff.
pub mod kind {
    /// `HELLO`.
    pub const HELLO: u8 = 0x01;
    /// `RESET`.
    pub const RESET: u8 = 0x02;
    /// `SET_CHANNEL`.
    pub const SET_CHANNEL: u8 = 0x03;
    /// `ADD_PEER`.
    pub const ADD_PEER: u8 = 0x04;
    /// `DEL_PEER`.
    pub const DEL_PEER: u8 = 0x05;
    /// `SET_PMK`.
    pub const SET_PMK: u8 = 0x06;
    /// `SEND`.
    pub const SEND: u8 = 0x07;
    /// `PING`.
    pub const PING: u8 = 0x08;
    /// `RESP`.
    pub const RESP: u8 = 0x80;
    /// `INFO`.
    pub const INFO: u8 = 0x81;
    /// `BOOT`.
    pub const BOOT: u8 = 0x82;
    /// `RX`.
    pub const RX: u8 = 0x83;
    /// `TX_DONE`.
    pub const TX_DONE: u8 = 0x84;
    /// `STATS`.
    pub const STATS: u8 = 0x85;
    /// `LOG`.
    pub const LOG: u8 = 0x86;
}

/// Longest firmware text and log line.
const MAX_TEXT: usize = 255;

impl Message {
    /// The kind number.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello { .. } => kind::HELLO,
            Message::Reset => kind::RESET,
            Message::SetChannel { .. } => kind::SET_CHANNEL,
            Message::AddPeer { .. } => kind::ADD_PEER,
            Message::DelPeer { .. } => kind::DEL_PEER,
            Message::SetPmk { .. } => kind::SET_PMK,
            Message::Send { .. } => kind::SEND,
            Message::Ping => kind::PING,
            Message::Resp { .. } => kind::RESP,
            Message::Info(_) => kind::INFO,
            Message::Boot { .. } => kind::BOOT,
            Message::Rx { .. } => kind::RX,
            Message::TxDone { .. } => kind::TX_DONE,
            Message::Stats { .. } => kind::STATS,
            Message::Log { .. } => kind::LOG,
        }
    }

    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Reset => "reset",
            Message::SetChannel { .. } => "set_channel",
            Message::AddPeer { .. } => "add_peer",
            Message::DelPeer { .. } => "del_peer",
            Message::SetPmk { .. } => "set_pmk",
            Message::Send { .. } => "send",
            Message::Ping => "ping",
            Message::Resp { .. } => "resp",
            Message::Info(_) => "info",
            Message::Boot { .. } => "boot",
            Message::Rx { .. } => "rx",
            Message::TxDone { .. } => "tx_done",
            Message::Stats { .. } => "stats",
            Message::Log { .. } => "log",
        }
    }

    /// The payload bytes.
    pub fn encode_payload(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Message::Hello { major, minor } => out.extend_from_slice(&[*major, *minor]),
            Message::Reset | Message::Ping => {}
            Message::SetChannel { channel } => out.push(*channel),
            Message::AddPeer {
                mac,
                channel,
                encrypt,
                key,
            } => {
                out.extend_from_slice(&mac.0);
                out.push(*channel);
                out.push(u8::from(*encrypt));
                out.extend_from_slice(key);
            }
            Message::DelPeer { mac } => out.extend_from_slice(&mac.0),
            Message::SetPmk { pmk } => out.extend_from_slice(pmk),
            Message::Send { dst, payload } => {
                out.extend_from_slice(&dst.0);
                put_bytes16(&mut out, payload);
            }
            Message::Resp { status } => out.push(status.to_u8()),
            Message::Info(info) => {
                out.push(info.protocol_major);
                out.push(info.protocol_minor);
                put_text8(&mut out, &info.firmware);
                out.extend_from_slice(&info.mac.0);
                out.push(info.espnow_version);
                out.extend_from_slice(&info.max_payload.to_le_bytes());
                out.push(info.channel);
                out.push(info.tx_credits);
                out.push(info.max_peers);
            }
            Message::Boot {
                reason,
                major,
                minor,
            } => out.extend_from_slice(&[reason.to_u8(), *major, *minor]),
            Message::Rx {
                src,
                dst,
                rssi,
                channel,
                timestamp_us,
                payload,
            } => {
                out.extend_from_slice(&src.0);
                out.extend_from_slice(&dst.0);
                out.push(rssi.to_le_bytes()[0]);
                out.push(*channel);
                out.extend_from_slice(&timestamp_us.to_le_bytes());
                put_bytes16(&mut out, payload);
            }
            Message::TxDone { send_seq, mac, ok } => {
                out.extend_from_slice(&send_seq.to_le_bytes());
                out.extend_from_slice(&mac.0);
                out.push(u8::from(*ok));
            }
            Message::Stats {
                rx_dropped,
                tx_dropped,
                crc_errors,
            } => {
                out.extend_from_slice(&rx_dropped.to_le_bytes());
                out.extend_from_slice(&tx_dropped.to_le_bytes());
                out.extend_from_slice(&crc_errors.to_le_bytes());
            }
            Message::Log { level, text } => {
                out.push(*level);
                put_text8(&mut out, text);
            }
        }
        out
    }

    /// Parses a payload of `kind`.
    pub fn decode_payload(kind: u8, payload: &[u8]) -> Result<Message, FrameError> {
        let mut reader = Reader::new(payload);
        let message = match kind {
            kind::HELLO => Message::Hello {
                major: reader.u8()?,
                minor: reader.u8()?,
            },
            kind::RESET => Message::Reset,
            kind::SET_CHANNEL => Message::SetChannel {
                channel: reader.u8()?,
            },
            kind::ADD_PEER => Message::AddPeer {
                mac: reader.mac()?,
                channel: reader.u8()?,
                encrypt: reader.flag()?,
                key: reader.array()?,
            },
            kind::DEL_PEER => Message::DelPeer { mac: reader.mac()? },
            kind::SET_PMK => Message::SetPmk {
                pmk: reader.array()?,
            },
            kind::SEND => Message::Send {
                dst: reader.mac()?,
                payload: reader.bytes16()?,
            },
            kind::PING => Message::Ping,
            kind::RESP => Message::Resp {
                status: Status::from_u8(reader.u8()?),
            },
            kind::INFO => Message::Info(Info {
                protocol_major: reader.u8()?,
                protocol_minor: reader.u8()?,
                firmware: reader.text8()?,
                mac: reader.mac()?,
                espnow_version: reader.u8()?,
                max_payload: reader.u16()?,
                channel: reader.u8()?,
                tx_credits: reader.u8()?,
                max_peers: reader.u8()?,
            }),
            kind::BOOT => Message::Boot {
                reason: ResetReason::from_u8(reader.u8()?),
                major: reader.u8()?,
                minor: reader.u8()?,
            },
            kind::RX => Message::Rx {
                src: reader.mac()?,
                dst: reader.mac()?,
                rssi: i8::from_le_bytes([reader.u8()?]),
                channel: reader.u8()?,
                timestamp_us: reader.u32()?,
                payload: reader.bytes16()?,
            },
            kind::TX_DONE => Message::TxDone {
                send_seq: reader.u16()?,
                mac: reader.mac()?,
                ok: reader.flag()?,
            },
            kind::STATS => Message::Stats {
                rx_dropped: reader.u32()?,
                tx_dropped: reader.u32()?,
                crc_errors: reader.u32()?,
            },
            kind::LOG => Message::Log {
                level: reader.u8()?,
                text: reader.text8()?,
            },
            other => return Err(FrameError::UnknownKind(other)),
        };
        reader.finish(kind)?;
        Ok(message)
    }
}

fn put_bytes16(out: &mut Vec<u8>, bytes: &[u8]) {
    // Payloads are bounded by the frame size, far below 64 KiB.
    let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes[..usize::from(len)]);
}

fn put_text8(out: &mut Vec<u8>, text: &str) {
    // Cut at a character boundary: cutting inside one would put invalid UTF-8 on the wire.
    let mut len = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    let bytes = &text.as_bytes()[..len];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

/// Reads a payload's fields in order, refusing short or overlong payloads.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(payload: &'a [u8]) -> Self {
        Self { rest: payload }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.rest.len() < n {
            return Err(FrameError::ShortPayload);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn flag(&mut self) -> Result<bool, FrameError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(FrameError::BadField("flag")),
        }
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        let bytes = self.take(2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn mac(&mut self) -> Result<Mac, FrameError> {
        Ok(Mac(self.array()?))
    }

    fn bytes16(&mut self) -> Result<Vec<u8>, FrameError> {
        let len = usize::from(self.u16()?);
        Ok(self.take(len)?.to_vec())
    }

    fn text8(&mut self) -> Result<String, FrameError> {
        let len = usize::from(self.u8()?);
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    fn finish(self, kind: u8) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(FrameError::TrailingBytes {
                kind,
                extra: self.rest.len(),
            })
        }
    }
}

/// One message with its header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Sequence number: a request's, echoed by its answer.
    pub seq: u16,
    /// The message.
    pub message: Message,
}

impl Frame {
    /// A frame of this protocol version.
    pub fn new(seq: u16, message: Message) -> Self {
        Self { seq, message }
    }

    /// The raw frame: header and payload.
    pub fn to_raw(&self) -> RawFrame {
        RawFrame {
            version: PROTOCOL_MAJOR,
            kind: self.message.kind(),
            seq: self.seq,
            payload: self.message.encode_payload(),
        }
    }

    /// Parses a raw frame of the same protocol major. A frame of another major is refused
    /// with [`FrameError::Version`] before its payload is looked at: the layout may differ.
    pub fn from_raw(raw: &RawFrame) -> Result<Frame, FrameError> {
        if raw.version != PROTOCOL_MAJOR {
            return Err(FrameError::Version {
                got: raw.version,
                supported: PROTOCOL_MAJOR,
            });
        }
        Ok(Frame {
            seq: raw.seq,
            message: Message::decode_payload(raw.kind, &raw.payload)?,
        })
    }
}
