//! The tokio-util codec of the serial line (ESP-1): bytes in, [`Inbound`] frames out; frames
//! in, bytes out.
//!
//! Decoding never fails the stream: a frame that is damaged (bad COBS, bad CRC, bad layout),
//! too long, or of an unknown kind is counted in [`CodecStats`] and skipped, and decoding
//! resumes at the next delimiter, so garbage ended by a delimiter never loses the frame after
//! it. A run of bytes longer than any frame without a delimiter is dropped as it comes, so a
//! babbling line cannot make the buffer grow, and a frame cut off by the end of the stream is
//! counted as malformed rather than failing it. A frame of another protocol major version is
//! handed up as [`Inbound::OtherVersion`]: the handshake must refuse that dongle with a clear
//! error rather than ignore it.

use std::io;

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};
use tracing::debug;

use crate::error::FrameError;
use crate::frame::{CRC_LEN, DELIMITER, HEADER_LEN, MAX_ENCODED, MAX_PAYLOAD, RawFrame};
use crate::message::Frame;

/// What the decoder delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A valid frame of this protocol version.
    Frame(Frame),
    /// A frame with a valid CRC but another protocol major version.
    OtherVersion(RawFrame),
}

/// What the decoder dropped, by cause, and what it delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodecStats {
    /// Frames delivered.
    pub frames: u64,
    /// Frames dropped for a CRC mismatch.
    pub crc_errors: u64,
    /// Frames dropped for broken COBS, a short frame, a payload that does not fit its kind, or
    /// a frame cut off by the end of the stream.
    pub malformed: u64,
    /// Frames of a kind this side does not know.
    pub unknown_kind: u64,
    /// Runs of bytes longer than any frame, dropped.
    pub oversize: u64,
}

/// The serial line codec. See the [module docs](self).
#[derive(Debug, Default)]
pub struct DongleCodec {
    stats: CodecStats,
    /// Inside an oversize run: drop everything up to the next delimiter.
    discarding: bool,
}

impl DongleCodec {
    /// A codec with zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters since creation.
    pub fn stats(&self) -> CodecStats {
        self.stats
    }

    fn count(&mut self, err: &FrameError) {
        match err {
            FrameError::Crc { .. } => self.stats.crc_errors += 1,
            FrameError::UnknownKind(_) => self.stats.unknown_kind += 1,
            FrameError::TooLong { .. } => self.stats.oversize += 1,
            _ => self.stats.malformed += 1,
        }
    }
}

impl Decoder for DongleCodec {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Inbound>> {
        loop {
            let Some(end) = src.iter().position(|&byte| byte == DELIMITER) else {
                if src.len() > MAX_ENCODED {
                    if !self.discarding {
                        self.stats.oversize += 1;
                        debug!(
                            bytes = src.len(),
                            "serial line: run without delimiter dropped"
                        );
                    }
                    self.discarding = true;
                    src.clear();
                }
                return Ok(None);
            };
            let chunk = src.split_to(end + 1);
            if std::mem::take(&mut self.discarding) {
                // The tail of an oversize run, already counted.
                continue;
            }
            let encoded = &chunk[..end];
            if encoded.is_empty() {
                // A lone delimiter: the flush byte of ESP-3, or two frames' delimiters.
                continue;
            }
            let raw = match RawFrame::decode(encoded) {
                Ok(raw) => raw,
                Err(err) => {
                    debug!(%err, "serial line: frame dropped");
                    self.count(&err);
                    continue;
                }
            };
            match Frame::from_raw(&raw) {
                Ok(frame) => {
                    self.stats.frames += 1;
                    return Ok(Some(Inbound::Frame(frame)));
                }
                Err(FrameError::Version { .. }) => return Ok(Some(Inbound::OtherVersion(raw))),
                Err(err) => {
                    debug!(%err, kind = raw.kind, "serial line: frame dropped");
                    self.count(&err);
                }
            }
        }
    }

    /// At the end of the stream (an unplugged dongle, ESP-5), a frame cut off before its
    /// delimiter is counted and dropped. tokio-util's default would fail the stream with
    /// "bytes remaining on stream" instead, against the promise of the module docs.
    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<Inbound>> {
        if let Some(inbound) = self.decode(src)? {
            return Ok(Some(inbound));
        }
        // The tail of an oversize run was counted when the run was dropped.
        if !src.is_empty() && !self.discarding {
            self.stats.malformed += 1;
            debug!(
                bytes = src.len(),
                "serial line: frame cut off by the end of the stream"
            );
        }
        src.clear();
        // A codec kept for the next connection starts in step with it.
        self.discarding = false;
        Ok(None)
    }
}

impl Encoder<Frame> for DongleCodec {
    type Error = io::Error;

    /// Refuses a message whose payload exceeds [`MAX_PAYLOAD`]: the other side would drop the
    /// frame as too long, so it is an error here rather than a silent loss there.
    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> io::Result<()> {
        let raw = frame.to_raw();
        if raw.payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                FrameError::TooLong {
                    len: HEADER_LEN + raw.payload.len() + CRC_LEN,
                },
            ));
        }
        let mut bytes = Vec::new();
        raw.encode_into(&mut bytes);
        dst.extend_from_slice(&bytes);
        Ok(())
    }
}
