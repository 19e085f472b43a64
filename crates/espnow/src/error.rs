//! Errors of the dongle protocol.

/// Why bytes from the serial line are not a valid frame or message (ESP-1, ESP-2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// COBS structure broken (a zero inside, a code past the end).
    #[error("COBS encoding is broken")]
    Cobs,
    /// Longer than any valid frame.
    #[error("frame of {len} bytes is longer than any valid frame")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Shorter than a header and a CRC.
    #[error("frame of {len} bytes is too short for a header and a CRC")]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// The CRC does not match.
    #[error("CRC mismatch: frame says {expected:#06x}, content gives {actual:#06x}")]
    Crc {
        /// CRC in the frame.
        expected: u16,
        /// CRC of the content.
        actual: u16,
    },
    /// Another protocol major version.
    #[error("protocol version {got}, this side speaks {supported}")]
    Version {
        /// The frame's version.
        got: u8,
        /// Ours.
        supported: u8,
    },
    /// A message kind this side does not know.
    #[error("unknown message kind {0:#04x}")]
    UnknownKind(u8),
    /// The payload ends before its fields do.
    #[error("payload too short for its message")]
    ShortPayload,
    /// Bytes left after the message's fields.
    #[error("{extra} bytes after the fields of message kind {kind:#04x}")]
    TrailingBytes {
        /// The kind.
        kind: u8,
        /// Bytes left.
        extra: usize,
    },
    /// A field has an impossible value.
    #[error("invalid {0} field")]
    BadField(&'static str),
}
