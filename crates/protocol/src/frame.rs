//! Frames: an encoded envelope whose body is sealed, followed by its tag (PROTO-2, PROTO-4..6,
//! PROTO-9).
//!
//! ```text
//! +---------------------------------------------+--------------------------+-----------+
//! | header: 0x97, version, cluster, from,       | body (MessagePack)       | tag (16)  |
//! | incarnation, seq, to — in clear             | sealed with a key        | with a key|
//! +---------------------------------------------+--------------------------+-----------+
//!   associated data of the AEAD                   ciphertext, same length
//! ```
//!
//! Without a key the body is in clear and there is no tag; either way the bytes before the tag
//! are the envelope's MessagePack array, body last. [`FrameCodec`] encodes with an MTU check and
//! decodes totally: any byte string yields an envelope or a typed [`FrameError`]. Checks run
//! cheapest and most informative first — structure, version, cluster, tag — so an operator who
//! mistyped the cluster id sees `foreign_cluster` rather than `bad_tag`. [`FrameReceiver`]
//! adds the replay guard, which only ever sees frames that opened.
//!
//! The keys sit behind a shared lock so that every clone of a codec (the transport's and
//! each link reader's) moves to new keys at once when the operator rotates them
//! ([`FrameCodec::replace_keys`]).

use std::io::Cursor;
use std::sync::{Arc, PoisonError, RwLock};

use serde::Deserialize;

use crate::auth::{AuthKey, SEALED_TAG_LEN, StreamPosition};
use crate::body::Body;
use crate::envelope::{Envelope, PROTOCOL_VERSION};
use crate::error::FrameError;
use crate::ids::{ClusterId, PeerId};
use crate::keyring::KeyRing;
use crate::replay::ReplayGuard;

/// ESP-NOW v1 payload limit, the smallest MTU of any link (PROTO-4).
pub const ESPNOW_V1_MTU: usize = 250;
/// ESP-NOW v2 payload limit.
pub const ESPNOW_V2_MTU: usize = 1470;
/// A UDP payload that fits a 1500-byte Ethernet MTU without fragmentation.
pub const UDP_MTU: usize = 1452;

/// Deepest MessagePack nesting a valid envelope needs is 5; anything far deeper is hostile.
const MAX_NESTING: usize = 16;

/// The envelope's marker: a fixarray of its seven fields.
const ENVELOPE_MARKER: u8 = 0x97;

/// Encodes and decodes the frames of one cluster.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    cluster: ClusterId,
    keys: Option<Arc<RwLock<KeyRing>>>,
}

/// The envelope's fields before its body, as they are read in clear.
struct Header {
    cluster: ClusterId,
    from: PeerId,
    incarnation: u64,
    seq: u64,
    to: Option<PeerId>,
    /// Where the body starts.
    len: usize,
}

impl FrameCodec {
    /// A codec for `cluster`; with `key`, every frame is sealed and every frame opened.
    pub fn new(cluster: ClusterId, key: Option<AuthKey>) -> Self {
        Self::with_keys(cluster, key.map(KeyRing::single))
    }

    /// A codec for `cluster` with a ring of keys (a rotation under way), or none.
    pub fn with_keys(cluster: ClusterId, keys: Option<KeyRing>) -> Self {
        Self {
            cluster,
            keys: keys.map(|ring| Arc::new(RwLock::new(ring))),
        }
    }

    /// The cluster this codec accepts.
    pub fn cluster(&self) -> ClusterId {
        self.cluster
    }

    /// Whether frames are sealed.
    pub fn is_authenticated(&self) -> bool {
        self.keys.is_some()
    }

    /// Bytes of tag per frame (0 without a key).
    pub fn tag_len(&self) -> usize {
        if self.keys.is_some() {
            SEALED_TAG_LEN
        } else {
            0
        }
    }

    /// The keys in use, if any.
    pub fn keys(&self) -> Option<KeyRing> {
        self.keys.as_ref().map(|keys| read(keys).clone())
    }

    /// Moves this codec and every clone of it to `keys` (a step of a key rotation). A codec
    /// without keys stays without: sealing is switched on or off by a restart only, since
    /// nodes with and without a key do not understand each other. Returns whether the keys
    /// were replaced.
    pub fn replace_keys(&self, keys: KeyRing) -> bool {
        let Some(shared) = &self.keys else {
            return false;
        };
        *shared.write().unwrap_or_else(PoisonError::into_inner) = keys;
        true
    }

    /// Encodes `envelope`, sealed with a key; fails rather than truncating when the result
    /// exceeds `mtu` bytes (PROTO-4).
    pub fn encode(&self, envelope: &Envelope, mtu: usize) -> Result<Vec<u8>, FrameError> {
        let encode_err = |err: rmp_serde::encode::Error| FrameError::Encode(err.to_string());
        // Room for a whole frame at once (no link's MTU is larger): grown from empty, a
        // 150-byte frame was moved through five reallocations on its way to the socket.
        let mut frame = Vec::with_capacity(mtu.min(ESPNOW_V2_MTU));
        rmp_serde::encode::write(
            &mut frame,
            &(
                envelope.version,
                envelope.cluster,
                envelope.from,
                envelope.incarnation,
                envelope.seq,
                envelope.to,
            ),
        )
        .map_err(encode_err)?;
        // The six header fields were written as an array of six; the body makes it seven.
        frame[0] = ENVELOPE_MARKER;
        let header_len = frame.len();
        rmp_serde::encode::write(&mut frame, &envelope.body).map_err(encode_err)?;
        if let Some(keys) = &self.keys {
            let ring = read(keys);
            let at = StreamPosition {
                cluster: &envelope.cluster,
                from: &envelope.from,
                incarnation: envelope.incarnation,
                seq: envelope.seq,
            };
            let (header, body) = frame.split_at_mut(header_len);
            let tag = ring
                .sending()
                .seal(at, header, body)
                .ok_or_else(|| FrameError::Encode("the body is too long to seal".to_owned()))?;
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

    /// Decodes a received frame: structure, version, cluster, then (with a key) opens the
    /// body under the current or the next key. Replays are the [`FrameReceiver`]'s business.
    pub fn decode(&self, frame: &[u8]) -> Result<Envelope, FrameError> {
        let tag_len = self.tag_len();
        if frame.len() <= tag_len || frame.is_empty() {
            return Err(FrameError::Truncated {
                len: frame.len(),
                tag_len,
            });
        }
        check_version(frame)?;
        let header = decode_header(frame)?;
        if header.cluster != self.cluster {
            return Err(FrameError::ForeignCluster {
                got: header.cluster,
                expected: self.cluster,
            });
        }
        let (clear, rest) = frame.split_at(header.len);
        let body = match &self.keys {
            None => decode_body(rest)?,
            Some(keys) => {
                // A frame too short for a tag after its header was not sealed for us: a node
                // without the key, or a forger who has none.
                let Some(sealed_len) = rest.len().checked_sub(SEALED_TAG_LEN) else {
                    return Err(FrameError::BadTag);
                };
                let (sealed, tag) = rest.split_at(sealed_len);
                let at = StreamPosition {
                    cluster: &header.cluster,
                    from: &header.from,
                    incarnation: header.incarnation,
                    seq: header.seq,
                };
                let ring = read(keys);
                let opened = ring.opening().find_map(|key| {
                    let mut body = sealed.to_vec();
                    key.open(at, clear, &mut body, tag).then_some(body)
                });
                drop(ring);
                decode_body(&opened.ok_or(FrameError::BadTag)?)?
            }
        };
        Ok(Envelope {
            version: PROTOCOL_VERSION,
            cluster: header.cluster,
            from: header.from,
            incarnation: header.incarnation,
            seq: header.seq,
            to: header.to,
            body,
        })
    }
}

fn read(keys: &RwLock<KeyRing>) -> std::sync::RwLockReadGuard<'_, KeyRing> {
    // A panic while holding the lock cannot leave a half-written ring: replacing it is one
    // assignment.
    keys.read().unwrap_or_else(PoisonError::into_inner)
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

/// The six fields before the body, read in clear, and where the body starts.
fn decode_header(frame: &[u8]) -> Result<Header, FrameError> {
    if frame.first() != Some(&ENVELOPE_MARKER) {
        return Err(FrameError::Malformed(
            "the envelope is not an array of 7 elements".to_owned(),
        ));
    }
    let malformed = |err: rmp_serde::decode::Error| FrameError::Malformed(err.to_string());
    let mut de = rmp_serde::Deserializer::new(Cursor::new(&frame[1..]));
    let _version = u8::deserialize(&mut de).map_err(malformed)?;
    let cluster = ClusterId::deserialize(&mut de).map_err(malformed)?;
    let from = PeerId::deserialize(&mut de).map_err(malformed)?;
    let incarnation = u64::deserialize(&mut de).map_err(malformed)?;
    let seq = u64::deserialize(&mut de).map_err(malformed)?;
    let to = Option::<PeerId>::deserialize(&mut de).map_err(malformed)?;
    let len = 1 + usize::try_from(de.position()).unwrap_or(usize::MAX);
    Ok(Header {
        cluster,
        from,
        incarnation,
        seq,
        to,
        len,
    })
}

fn decode_body(bytes: &[u8]) -> Result<Body, FrameError> {
    // The reader copies strings into a buffer that grows only as bytes arrive, so a forged
    // length field cannot make it allocate more than the frame holds (PROTO-6).
    let mut deserializer = rmp_serde::Deserializer::new(Cursor::new(bytes));
    deserializer.set_max_depth(MAX_NESTING);
    let body = Body::deserialize(&mut deserializer)
        .map_err(|err| FrameError::Malformed(err.to_string()))?;
    let consumed = usize::try_from(deserializer.position()).unwrap_or(usize::MAX);
    if consumed != bytes.len() {
        return Err(FrameError::Malformed(format!(
            "{} bytes after the envelope",
            bytes.len().saturating_sub(consumed)
        )));
    }
    Ok(body)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{AppendEntries, EntryKind, LogEntry};
    use crate::keyring::SendKey;

    const VALUE: &[u8] = b"the-distinctive-secret-value";

    fn key(byte: u8) -> AuthKey {
        AuthKey::new(&[byte; 32], SEALED_TAG_LEN).unwrap()
    }

    fn cluster() -> ClusterId {
        ClusterId::new("site-1").unwrap()
    }

    fn append(seq: u64) -> Envelope {
        Envelope::new(
            cluster(),
            PeerId::from_static("gw-a"),
            1_764_000_000,
            seq,
            Some(PeerId::from_static("gw-b")),
            AppendEntries {
                entries: vec![LogEntry {
                    index: 5,
                    term: 2,
                    kind: EntryKind::Command,
                    data: VALUE.to_vec(),
                }],
                ..AppendEntries::new(2, PeerId::from_static("gw-a"))
            },
        )
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle)
    }

    /// PROTO-9: a sealed frame opens to the envelope it was made from, shows its header in
    /// clear and its body nowhere, and is exactly as long as the same frame without a key plus
    /// the 16-byte tag (nothing else travels for the nonce).
    #[test]
    fn proto9_seal_open_round_trip() {
        let sealed = FrameCodec::new(cluster(), Some(key(1)));
        let clear = FrameCodec::new(cluster(), None);
        let envelope = append(70_000);
        let frame = sealed.encode(&envelope, UDP_MTU).unwrap();
        let plain = clear.encode(&envelope, UDP_MTU).unwrap();
        assert_eq!(plain, rmp_serde::to_vec(&envelope).unwrap());
        assert_eq!(frame.len(), plain.len() + SEALED_TAG_LEN);
        assert!(contains(&plain, VALUE));
        assert!(!contains(&frame, VALUE));
        assert!(
            !contains(&frame, b"gw-b\x97"),
            "the body's fields are sealed too"
        );
        let header_len = decode_header(&plain).unwrap().len;
        assert_eq!(
            frame[..header_len],
            plain[..header_len],
            "the header is in clear"
        );
        assert_eq!(sealed.decode(&frame).unwrap(), envelope);
        assert_eq!(clear.decode(&plain).unwrap(), envelope);
    }

    /// PROTO-9: flipping any single bit of a sealed frame, header, body or tag, makes it a
    /// counted drop, never an envelope and never a panic.
    #[test]
    fn proto9_any_flipped_bit_is_refused() {
        let codec = FrameCodec::new(cluster(), Some(key(1)));
        let frame = codec.encode(&append(70_000), UDP_MTU).unwrap();
        for bit in 0..frame.len() * 8 {
            let mut altered = frame.clone();
            altered[bit / 8] ^= 1 << (bit % 8);
            let err = codec.decode(&altered).expect_err("an altered frame opened");
            // Bits of the version or of a field's type may read as another version, another
            // cluster or no envelope at all; everything else does not open.
            assert!(
                matches!(
                    err,
                    FrameError::BadTag
                        | FrameError::Malformed(_)
                        | FrameError::UnsupportedVersion { .. }
                        | FrameError::ForeignCluster { .. }
                ),
                "bit {bit}: {err:?}"
            );
        }
    }

    /// PROTO-9: a frame sealed under another key does not open (`bad_tag`), and neither does
    /// an unsealed frame at a node with a key.
    #[test]
    fn proto9_wrong_key_is_refused() {
        let ours = FrameCodec::new(cluster(), Some(key(1)));
        let theirs = FrameCodec::new(cluster(), Some(key(2)));
        let frame = theirs.encode(&append(70_000), UDP_MTU).unwrap();
        assert_eq!(ours.decode(&frame), Err(FrameError::BadTag));
        let plain = FrameCodec::new(cluster(), None)
            .encode(&append(70_000), UDP_MTU)
            .unwrap();
        assert_eq!(ours.decode(&plain), Err(FrameError::BadTag));
    }

    /// PROTO-9: during a rotation a node opens frames under the current and the next key,
    /// seals under the one named, and every clone of its codec follows a replacement.
    #[test]
    fn proto9_rotation_opens_both_keys_and_sends_under_the_named_one() {
        let old_only = FrameCodec::new(cluster(), Some(key(1)));
        let new_only = FrameCodec::new(cluster(), Some(key(2)));
        let both = FrameCodec::with_keys(
            cluster(),
            Some(KeyRing::new(key(1), Some(key(2)), SendKey::Current)),
        );
        let reader = both.clone();
        for sender in [&old_only, &new_only] {
            let frame = sender.encode(&append(70_000), UDP_MTU).unwrap();
            assert!(reader.decode(&frame).is_ok());
        }
        let under_current = both.encode(&append(70_001), UDP_MTU).unwrap();
        assert!(old_only.decode(&under_current).is_ok());
        assert_eq!(new_only.decode(&under_current), Err(FrameError::BadTag));

        assert!(both.replace_keys(KeyRing::new(key(1), Some(key(2)), SendKey::Next)));
        let under_next = both.encode(&append(70_002), UDP_MTU).unwrap();
        assert!(new_only.decode(&under_next).is_ok());
        assert_eq!(old_only.decode(&under_next), Err(FrameError::BadTag));

        // The old key retired: the reader (a clone) follows and refuses the old key's frames.
        assert!(both.replace_keys(KeyRing::single(key(2))));
        let frame = old_only.encode(&append(70_003), UDP_MTU).unwrap();
        assert_eq!(reader.decode(&frame), Err(FrameError::BadTag));
        assert!(!FrameCodec::new(cluster(), None).replace_keys(KeyRing::single(key(2))));
    }

    /// PROTO-9, issue 26 item 3: a node of protocol version 2 and one of version 3 refuse each
    /// other's frames as `version`, whatever their keys.
    #[test]
    fn proto9_old_and_new_versions_refuse_each_other() {
        let codec = FrameCodec::new(cluster(), Some(key(1)));
        let mut old = rmp_serde::to_vec(&append(70_000)).unwrap();
        old[1] = 2;
        old.extend_from_slice(&[0; 16]);
        assert_eq!(
            codec.decode(&old),
            Err(FrameError::UnsupportedVersion {
                got: 2,
                supported: 3
            })
        );
        assert_eq!(
            codec.decode(&old).unwrap_err().drop_reason(),
            crate::DropReason::Version
        );
    }
}
