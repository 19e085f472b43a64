//! The serial framing between host and dongle (ESP-1): a frame body
//! `ver:u8 | kind:u8 | seq:u16 LE | payload`, followed by its CRC-16/KERMIT (little-endian),
//! COBS-encoded, terminated by one `0x00`.
//!
//! COBS removes every zero byte from the encoded frame, so `0x00` only ever marks a frame's
//! end: a receiver that starts in the middle of a stream, or sees line noise, resynchronises
//! at the next `0x00` and loses at most the frame it was in. The CRC then rejects whatever
//! noise survived. Both algorithms are small and public; this module implements them from
//! their definitions.

use crate::error::FrameError;

/// The protocol's major version, in every frame header (ESP-3: a different major is refused).
pub const PROTOCOL_MAJOR: u8 = 1;
/// The protocol's minor version, reported in `HELLO` and `INFO` (a different minor is fine).
pub const PROTOCOL_MINOR: u8 = 0;

/// Bytes of a frame body before the payload: ver, kind, seq.
pub const HEADER_LEN: usize = 4;
/// Bytes of CRC after the body.
pub const CRC_LEN: usize = 2;
/// Longest payload of any message: an `RX` of a 1470-byte ESP-NOW v2 frame plus its fields.
pub const MAX_PAYLOAD: usize = 1500;
/// Longest decoded frame.
pub const MAX_DECODED: usize = HEADER_LEN + MAX_PAYLOAD + CRC_LEN;
/// Longest COBS-encoded frame, delimiter excluded: COBS adds one byte per 254, plus one.
pub const MAX_ENCODED: usize = MAX_DECODED + MAX_DECODED / 254 + 1;

/// The frame delimiter.
pub const DELIMITER: u8 = 0x00;

/// CRC-16/KERMIT: polynomial 0x1021 reflected (0x8408), initial value 0, no final XOR.
/// Its check value over `b"123456789"` is 0x2189.
pub fn crc16_kermit(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x8408
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// COBS-encodes `data` into `out` (without the delimiter). Every zero byte is replaced by the
/// distance to the next zero (or to the end of a 254-byte run), so the output has none.
pub fn cobs_encode(data: &[u8], out: &mut Vec<u8>) {
    let mut code_index = out.len();
    out.push(0); // placeholder for the first code byte
    let mut code: u8 = 1;
    for &byte in data {
        if byte == 0 {
            out[code_index] = code;
            code_index = out.len();
            out.push(0);
            code = 1;
        } else {
            out.push(byte);
            code += 1;
            if code == 0xff {
                out[code_index] = code;
                code_index = out.len();
                out.push(0);
                code = 1;
            }
        }
    }
    out[code_index] = code;
}

/// COBS-decodes one frame (without its delimiter). Refuses a zero byte, a code that runs past
/// the end, and output longer than `limit`.
pub fn cobs_decode(encoded: &[u8], limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut index = 0;
    while index < encoded.len() {
        let code = encoded[index];
        if code == 0 {
            return Err(FrameError::Cobs);
        }
        let run = usize::from(code) - 1;
        let start = index + 1;
        let end = start + run;
        if end > encoded.len() {
            return Err(FrameError::Cobs);
        }
        let chunk = &encoded[start..end];
        if chunk.contains(&0) {
            return Err(FrameError::Cobs);
        }
        out.extend_from_slice(chunk);
        index = end;
        // A code below 0xff stands for a zero after its run, except at the very end.
        if code < 0xff && index < encoded.len() {
            out.push(0);
        }
        if out.len() > limit {
            return Err(FrameError::TooLong { len: out.len() });
        }
    }
    Ok(out)
}

/// One frame's header and raw payload, before the payload is parsed into a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// Protocol major version of the sender.
    pub version: u8,
    /// Message kind.
    pub kind: u8,
    /// Sequence number: a request's, echoed by its answer.
    pub seq: u16,
    /// The message's fields.
    pub payload: Vec<u8>,
}

impl RawFrame {
    /// Appends the frame as it goes on the wire: COBS(body ‖ CRC) then `0x00`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(HEADER_LEN + self.payload.len() + CRC_LEN);
        body.push(self.version);
        body.push(self.kind);
        body.extend_from_slice(&self.seq.to_le_bytes());
        body.extend_from_slice(&self.payload);
        let crc = crc16_kermit(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        cobs_encode(&body, out);
        out.push(DELIMITER);
    }

    /// Parses the bytes between two delimiters.
    pub fn decode(encoded: &[u8]) -> Result<RawFrame, FrameError> {
        if encoded.len() > MAX_ENCODED {
            return Err(FrameError::TooLong { len: encoded.len() });
        }
        let decoded = cobs_decode(encoded, MAX_DECODED)?;
        if decoded.len() < HEADER_LEN + CRC_LEN {
            return Err(FrameError::TooShort { len: decoded.len() });
        }
        let (body, crc) = decoded.split_at(decoded.len() - CRC_LEN);
        let expected = u16::from_le_bytes([crc[0], crc[1]]);
        let actual = crc16_kermit(body);
        if expected != actual {
            return Err(FrameError::Crc { expected, actual });
        }
        Ok(RawFrame {
            version: body[0],
            kind: body[1],
            seq: u16::from_le_bytes([body[2], body[3]]),
            payload: body[HEADER_LEN..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESP-1: CRC-16/KERMIT's published check value.
    #[test]
    fn kermit_check_value() {
        assert_eq!(crc16_kermit(b"123456789"), 0x2189);
        assert_eq!(crc16_kermit(b""), 0);
    }

    /// ESP-1: COBS round trips, never emits a zero, and handles the 254-byte run boundary.
    #[test]
    fn cobs_round_trips() {
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![1, 2, 3],
            vec![1, 0, 2, 0],
            (1..=253).collect(),
            (1..=254).collect(),
            (1..=255).collect(),
            (0..=255).collect(),
            vec![0xff; 600],
        ];
        for data in cases {
            let mut encoded = Vec::new();
            cobs_encode(&data, &mut encoded);
            assert!(!encoded.contains(&0), "{data:?}");
            assert_eq!(cobs_decode(&encoded, 10_000).unwrap(), data);
        }
        assert_eq!(
            {
                let mut e = Vec::new();
                cobs_encode(&[0x11, 0x00, 0x22], &mut e);
                e
            },
            vec![0x02, 0x11, 0x02, 0x22]
        );
    }

    /// ESP-1: a frame survives encoding; a corrupt byte is caught by the CRC or by COBS.
    #[test]
    fn frame_round_trip_and_corruption() {
        let frame = RawFrame {
            version: PROTOCOL_MAJOR,
            kind: 7,
            seq: 0x1234,
            payload: vec![0, 1, 2, 0, 255],
        };
        let mut wire = Vec::new();
        frame.encode_into(&mut wire);
        assert_eq!(wire.last(), Some(&DELIMITER));
        let body = &wire[..wire.len() - 1];
        assert_eq!(RawFrame::decode(body).unwrap(), frame);
        for index in 0..body.len() {
            let mut bad = body.to_vec();
            bad[index] ^= 0x40;
            assert!(
                RawFrame::decode(&bad).is_err(),
                "corruption at {index} not caught"
            );
        }
    }
}
