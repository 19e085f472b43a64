//! Frames: an encoded envelope followed by its authentication tag (PROTO-2, PROTO-4..6).
//!
//! ```text
//! +--------------------------------------------+------------------------+
//! | envelope, MessagePack compact array (7)    | HMAC-SHA256, truncated |
//! +--------------------------------------------+------------------------+
//!                                               absent without a key
//! ```
//!
//! [`FrameCodec`] encodes with an MTU check and decodes totally: any byte string yields an
//! envelope or a typed [`FrameError`]. Checks run cheapest and most informative first —
//! structure, version, cluster, tag — so an operator who mistyped the cluster id sees
//! `foreign_cluster` rather than `bad_tag`. [`FrameReceiver`] adds the replay guard, which only
//! ever sees frames whose tag verified.

use std::io::Cursor;

use serde::Deserialize;

use crate::auth::AuthKey;
use crate::envelope::{Envelope, PROTOCOL_VERSION};
use crate::error::FrameError;
use crate::ids::ClusterId;
use crate::replay::ReplayGuard;

/// ESP-NOW v1 payload limit, the smallest MTU of any link (PROTO-4).
pub const ESPNOW_V1_MTU: usize = 250;
/// ESP-NOW v2 payload limit.
pub const ESPNOW_V2_MTU: usize = 1470;
/// A UDP payload that fits a 1500-byte Ethernet MTU without fragmentation.
pub const UDP_MTU: usize = 1452;

/// Deepest MessagePack nesting a valid envelope needs is 5; anything far deeper is hostile.
const MAX_NESTING: usize = 16;

/// Encodes and decodes the frames of one cluster.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    cluster: ClusterId,
    key: Option<AuthKey>,
}

impl FrameCodec {
    /// A codec for `cluster`; with `key`, every frame is tagged and every tag checked.
    pub fn new(cluster: ClusterId, key: Option<AuthKey>) -> Self {
        Self { cluster, key }
    }

    /// The cluster this codec accepts.
    pub fn cluster(&self) -> ClusterId {
        self.cluster
    }

    /// Whether frames are authenticated.
    pub fn is_authenticated(&self) -> bool {
        self.key.is_some()
    }

    /// Bytes of tag per frame (0 without a key).
    pub fn tag_len(&self) -> usize {
        self.key.as_ref().map_or(0, AuthKey::tag_len)
    }

    /// Encodes `envelope` and its tag; fails rather than truncating when the result exceeds
    /// `mtu` bytes (PROTO-4).
    pub fn encode(&self, envelope: &Envelope, mtu: usize) -> Result<Vec<u8>, FrameError> {
        let mut frame =
            rmp_serde::to_vec(envelope).map_err(|err| FrameError::Encode(err.to_string()))?;
        if let Some(key) = &self.key {
            let envelope_len = frame.len();
            frame.reserve(key.tag_len());
            let (message, _) = frame.split_at(envelope_len);
            let mut tag = Vec::with_capacity(key.tag_len());
            key.append_tag(message, &mut tag);
            frame.extend_from_slice(&tag);
        }
        if frame.len() > mtu {
            return Err(FrameError::Oversize {
                len: frame.len(),
                mtu,
            });
        }
        Ok(frame)
    }

    /// Decodes a received frame and checks version, cluster and tag. Replays are the
    /// [`FrameReceiver`]'s business.
    pub fn decode(&self, frame: &[u8]) -> Result<Envelope, FrameError> {
        let tag_len = self.tag_len();
        if frame.len() <= tag_len {
            return Err(self.untagged_or(
                frame,
                FrameError::Truncated {
                    len: frame.len(),
                    tag_len,
                },
            ));
        }
        let (message, tag) = frame.split_at(frame.len() - tag_len);
        let envelope = match self.decode_envelope_for_us(message) {
            Ok(envelope) => envelope,
            Err(err @ FrameError::Malformed(_)) => return Err(self.untagged_or(frame, err)),
            Err(err) => return Err(err),
        };
        if let Some(key) = &self.key {
            if !key.verify(message, tag) {
                return Err(FrameError::BadTag);
            }
        }
        Ok(envelope)
    }

    /// Structure, version and cluster checks of an envelope without its tag.
    fn decode_envelope_for_us(&self, message: &[u8]) -> Result<Envelope, FrameError> {
        check_version(message)?;
        let envelope = decode_envelope(message)?;
        if envelope.version != PROTOCOL_VERSION {
            return Err(FrameError::UnsupportedVersion {
                got: envelope.version,
                supported: PROTOCOL_VERSION,
            });
        }
        if envelope.cluster != self.cluster {
            return Err(FrameError::ForeignCluster {
                got: envelope.cluster,
                expected: self.cluster,
            });
        }
        Ok(envelope)
    }

    /// With a key, a frame that is a whole envelope with no tag at all (from a node without
    /// the key, or a forger who has none) would read as an envelope cut short; it is an
    /// authentication failure and is reported as one, after the version and cluster checks it
    /// would have failed first. Anything else keeps the structural error `otherwise`.
    fn untagged_or(&self, frame: &[u8], otherwise: FrameError) -> FrameError {
        if self.key.is_none() {
            return otherwise;
        }
        match self.decode_envelope_for_us(frame) {
            Ok(_) => FrameError::BadTag,
            Err(FrameError::Malformed(_)) => otherwise,
            Err(err) => err,
        }
    }
}

/// Reports a foreign version before trying to decode a layout this build may not know: the
/// envelope is an array whose first element is the version as a positive fixint.
fn check_version(message: &[u8]) -> Result<(), FrameError> {
    match message {
        [array, version, ..] if (0x90..=0x9f).contains(array) && *version < 0x80 => {
            if *version != PROTOCOL_VERSION {
                return Err(FrameError::UnsupportedVersion {
                    got: *version,
                    supported: PROTOCOL_VERSION,
                });
            }
            Ok(())
        }
        _ => Err(FrameError::Malformed(
            "does not start with an envelope array and a version".to_owned(),
        )),
    }
}

fn decode_envelope(message: &[u8]) -> Result<Envelope, FrameError> {
    // The reader copies strings into a buffer that grows only as bytes arrive, so a forged
    // length field cannot make it allocate more than the frame holds (PROTO-6).
    let mut deserializer = rmp_serde::Deserializer::new(Cursor::new(message));
    deserializer.set_max_depth(MAX_NESTING);
    let envelope = Envelope::deserialize(&mut deserializer)
        .map_err(|err| FrameError::Malformed(err.to_string()))?;
    let consumed = usize::try_from(deserializer.position()).unwrap_or(usize::MAX);
    if consumed != message.len() {
        return Err(FrameError::Malformed(format!(
            "{} bytes after the envelope",
            message.len().saturating_sub(consumed)
        )));
    }
    Ok(envelope)
}

/// The receiving side of a link: decode, authenticate, then refuse replays (PROTO-5).
#[derive(Debug, Clone)]
pub struct FrameReceiver {
    codec: FrameCodec,
    replay: ReplayGuard,
}

impl FrameReceiver {
    /// A receiver with the default replay table size.
    pub fn new(codec: FrameCodec) -> Self {
        Self {
            codec,
            replay: ReplayGuard::default(),
        }
    }

    /// The codec it decodes with.
    pub fn codec(&self) -> &FrameCodec {
        &self.codec
    }

    /// Accepts a frame, or says why it must be dropped.
    pub fn receive(&mut self, frame: &[u8]) -> Result<Envelope, FrameError> {
        let envelope = self.codec.decode(frame)?;
        self.replay
            .admit(envelope.from, envelope.incarnation, envelope.seq)?;
        Ok(envelope)
    }

    /// Forgets a sender's replay window.
    pub fn forget(&mut self, from: &crate::PeerId) {
        self.replay.forget(from);
    }
}
