//! Sealing frames with a cluster pre-shared key (PROTO-5, PROTO-9, SEC-3, ESP-8; issue 26
//! item 3).
//!
//! With a key, the body of every frame is encrypted and the whole frame authenticated with
//! AES-256-GCM-SIV (RFC 8452): the envelope's header (version, cluster, sender, incarnation,
//! sequence, addressee) stays in clear as the associated data, because the receiver needs it to
//! pick the key and the replay position before it can open anything; the body is sealed; the
//! 16-byte tag takes the place of the 16-byte HMAC tag of protocol version 2, so a frame is no
//! larger than it was. ESP-NOW broadcast is neither encrypted nor authenticated by the radio,
//! so this is what keeps values and job payloads private and forged frames out; the replay
//! guard keeps captured ones from being played back.
//!
//! Nothing extra travels for the nonce. Each start of a sender seals under its own stream key,
//! derived with HKDF-SHA256 from the pre-shared key, the cluster, the sender and its
//! incarnation, and the nonce is the frame's sequence number, which starts at a random point
//! at every start ([`first_seq`]) and only grows. `docs/wire-protocol.md` ("Sealed frames")
//! says why a nonce does not repeat under one key, and why a repeat — which would take two
//! starts sharing an incarnation and a random draw — would reveal no more than that two frames
//! are equal: that is what GCM-SIV is for.
//!
//! A stream key is derived once per start of a sender and its cipher kept ([`StreamCiphers`]),
//! not derived again for every frame: the derivation (HKDF and AES's key expansion) costs about
//! half as much as sealing the frame itself, and every frame of a stream would repeat it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use aes_gcm_siv::aead::{AeadInPlace, KeyInit};
use aes_gcm_siv::{Aes256GcmSiv, Key, Nonce, Tag};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::KeyError;
use crate::ids::{ClusterId, PeerId};

type HmacSha256 = Hmac<Sha256>;

/// Shortest pre-shared key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// The tag every sealed frame carries: GCM-SIV's 16 bytes, neither truncated nor padded.
pub const SEALED_TAG_LEN: usize = 16;
/// Shortest tag accepted: sealing fixes it at [`SEALED_TAG_LEN`].
pub const MIN_TAG_LEN: usize = SEALED_TAG_LEN;
/// Longest tag accepted: sealing fixes it at [`SEALED_TAG_LEN`].
pub const MAX_TAG_LEN: usize = SEALED_TAG_LEN;
/// Tag length used unless configured otherwise.
pub const DEFAULT_TAG_LEN: usize = SEALED_TAG_LEN;

/// HKDF-SHA256 salt of the key schedule: names the use, so the same secret used elsewhere (or
/// by version 2's HMAC tags) never yields these keys.
const HKDF_SALT: &[u8] = b"conclave sealed frames v3";
/// HKDF info prefix of a sender's stream key.
const STREAM_INFO: &[u8] = b"conclave frame stream key";
/// HKDF info of the key's public fingerprint.
const FINGERPRINT_INFO: &[u8] = b"conclave key fingerprint";

/// The first sequence number of a start, from 64 random bits: a point in `[2^16, 2^31 + 2^16)`.
///
/// The random start keeps nonces apart when two starts of one sender share an incarnation
/// (see the module docs). The range keeps the sequence in MessagePack's 5-byte form, as a
/// sender's sequence is after its first 65,536 frames anyway, for two billion frames, so a
/// heartbeat stays within its 64 bytes.
pub fn first_seq(random: u64) -> u64 {
    (1 << 16) + (random >> 33)
}

/// The nonce of the frame with sequence number `seq` under its sender's stream key: the
/// number big-endian, then four zero bytes (GCM-SIV's nonce is 12 bytes).
pub fn frame_nonce(seq: u64) -> [u8; 12] {
    let mut nonce = [0; 12];
    nonce[..8].copy_from_slice(&seq.to_be_bytes());
    nonce
}

/// Where a frame sits in its sender's key stream: what the receiver reads in clear before it
/// opens the body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamPosition<'a> {
    pub(crate) cluster: &'a ClusterId,
    pub(crate) from: &'a PeerId,
    pub(crate) incarnation: u64,
    pub(crate) seq: u64,
}

/// Stream ciphers one key keeps: every member of a large cluster, with room for restarts.
const MAX_STREAMS: usize = 64;

/// One start of one sender: what its stream key is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StreamId {
    cluster: ClusterId,
    from: PeerId,
    incarnation: u64,
}

impl From<StreamPosition<'_>> for StreamId {
    fn from(at: StreamPosition<'_>) -> Self {
        Self {
            cluster: *at.cluster,
            from: *at.from,
            incarnation: at.incarnation,
        }
    }
}

/// The stream ciphers of one key already derived, at most [`MAX_STREAMS`] of them, the least
/// recently used one making room for a new one.
///
/// A stream enters only once it has sealed a frame of this node's own or opened one it
/// received: a forger without the key, who can make a frame name any sender and incarnation,
/// never gets an entry, so cannot push the members' streams out.
#[derive(Default)]
struct StreamCiphers {
    /// Each cipher with the tick of its last use.
    ciphers: HashMap<StreamId, (Arc<Aes256GcmSiv>, u64)>,
    /// Counts uses, to tell the least recently used stream.
    tick: u64,
    /// Stream keys derived so far, kept or not (what the cache is there to keep low).
    derived: u64,
}

impl StreamCiphers {
    /// The kept cipher of `stream`, marked used.
    fn get(&mut self, stream: &StreamId) -> Option<Arc<Aes256GcmSiv>> {
        self.tick += 1;
        let tick = self.tick;
        self.ciphers.get_mut(stream).map(|(cipher, used)| {
            *used = tick;
            Arc::clone(cipher)
        })
    }

    /// Keeps `cipher` for `stream`, forgetting the least recently used stream when full.
    fn keep(&mut self, stream: StreamId, cipher: Arc<Aes256GcmSiv>) {
        if self.ciphers.len() >= MAX_STREAMS && !self.ciphers.contains_key(&stream) {
            let oldest = self
                .ciphers
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                self.ciphers.remove(&oldest);
            }
        }
        self.tick += 1;
        self.ciphers.insert(stream, (cipher, self.tick));
    }
}

/// A cluster's pre-shared key, ready to seal and open frames.
#[derive(Clone)]
pub struct AuthKey {
    /// HMAC keyed with the HKDF pseudo-random key; cloned per derivation so the extract step
    /// and the HMAC key schedule run once.
    prk: HmacSha256,
    fingerprint: [u8; 4],
    /// Shared by the clones of this key (every codec of a node holds one through its ring),
    /// so that a stream is derived once per node, not once per clone.
    streams: Arc<Mutex<StreamCiphers>>,
}

impl AuthKey {
    /// A key from the secret's bytes; `tag_len` must be [`SEALED_TAG_LEN`] (the configuration
    /// still names it, and a value other than 16 is refused rather than silently ignored).
    pub fn new(secret: &[u8], tag_len: usize) -> Result<Self, KeyError> {
        if secret.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                len: secret.len(),
                min: MIN_KEY_LEN,
            });
        }
        if tag_len != SEALED_TAG_LEN {
            return Err(KeyError::TagLength {
                len: tag_len,
                expected: SEALED_TAG_LEN,
            });
        }
        // HKDF-Extract: PRK = HMAC(salt, secret).
        let mut extract = new_hmac(HKDF_SALT);
        extract.update(secret);
        let prk = new_hmac(&extract.finalize().into_bytes());
        let mut key = Self {
            prk,
            fingerprint: [0; 4],
            streams: Arc::default(),
        };
        let id = key.expand(&[FINGERPRINT_INFO]);
        key.fingerprint.copy_from_slice(&id[..4]);
        Ok(key)
    }

    /// Bytes of tag appended to each frame.
    pub fn tag_len(&self) -> usize {
        SEALED_TAG_LEN
    }

    /// Eight hex digits that name the key without revealing it, so logs and operators can
    /// tell which key a node sends under (derived one-way from the secret).
    pub fn fingerprint(&self) -> String {
        self.fingerprint
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// Encrypts `body` in place and returns the tag over `header` (the associated data) and
    /// the ciphertext.
    pub(crate) fn seal(
        &self,
        at: StreamPosition<'_>,
        header: &[u8],
        body: &mut [u8],
    ) -> Option<[u8; SEALED_TAG_LEN]> {
        let stream = StreamId::from(at);
        let (cipher, kept) = self.stream_cipher(&stream);
        if !kept {
            // This node's own stream: it is sealing, so it holds the key.
            self.streams().keep(stream, Arc::clone(&cipher));
        }
        let nonce = frame_nonce(at.seq);
        cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), header, body)
            .ok()
            .map(Into::into)
    }

    /// Checks `tag` over `header` and `body` and decrypts `body` in place; `false` (with
    /// `body` unusable) when the frame was forged, altered or sealed under another key.
    pub(crate) fn open(
        &self,
        at: StreamPosition<'_>,
        header: &[u8],
        body: &mut [u8],
        tag: &[u8],
    ) -> bool {
        if tag.len() != SEALED_TAG_LEN {
            return false;
        }
        let stream = StreamId::from(at);
        let (cipher, kept) = self.stream_cipher(&stream);
        let nonce = frame_nonce(at.seq);
        let opened = cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                header,
                body,
                Tag::from_slice(tag),
            )
            .is_ok();
        if opened && !kept {
            // Only a holder of the key can have sealed it: a stream worth keeping.
            self.streams().keep(stream, cipher);
        }
        opened
    }

    /// The cipher of `stream` and whether it is kept already; derived (see
    /// [`AuthKey::stream_key`]) when it is not.
    fn stream_cipher(&self, stream: &StreamId) -> (Arc<Aes256GcmSiv>, bool) {
        if let Some(cipher) = self.streams().get(stream) {
            return (cipher, true);
        }
        // Derived outside the lock: a reader opening another stream's frame need not wait.
        let key = self.stream_key(&stream.cluster, &stream.from, stream.incarnation);
        let cipher = Aes256GcmSiv::new(Key::<Aes256GcmSiv>::from_slice(&key));
        self.streams().derived += 1;
        (Arc::new(cipher), false)
    }

    fn streams(&self) -> std::sync::MutexGuard<'_, StreamCiphers> {
        // Every change to the cache is a whole insert or removal: a panic elsewhere while the
        // lock was held cannot leave it half-written.
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stream key of one start of a sender: HKDF-Expand(PRK, label | cluster | sender |
    /// incarnation), the ids length-prefixed so no two of them share an info string.
    pub(crate) fn stream_key(
        &self,
        cluster: &ClusterId,
        from: &PeerId,
        incarnation: u64,
    ) -> [u8; 32] {
        let cluster = cluster.as_bytes();
        let from = from.as_bytes();
        self.expand(&[
            STREAM_INFO,
            &[id_len(cluster)],
            cluster,
            &[id_len(from)],
            from,
            &incarnation.to_be_bytes(),
        ])
    }

    /// Stream keys this key and its clones have derived, and stream ciphers they keep.
    #[cfg(test)]
    fn derivations(&self) -> (u64, usize) {
        let streams = self.streams();
        (streams.derived, streams.ciphers.len())
    }

    /// One 32-byte block of HKDF-Expand: HMAC(PRK, info | 0x01).
    fn expand(&self, info: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.prk.clone();
        for part in info {
            mac.update(part);
        }
        mac.update(&[1]);
        mac.finalize().into_bytes().into()
    }
}

/// Ids are at most 32 bytes (PROTO-1), so their length fits a byte.
fn id_len(id: &[u8]) -> u8 {
    u8::try_from(id.len()).unwrap_or(u8::MAX)
}

fn new_hmac(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; the error exists only for other MACs.
    match <HmacSha256 as Mac>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material; the fingerprint is one-way.
        f.debug_struct("AuthKey")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123";

    fn at<'a>(cluster: &'a ClusterId, from: &'a PeerId, seq: u64) -> StreamPosition<'a> {
        StreamPosition {
            cluster,
            from,
            incarnation: 1_700_000_000,
            seq,
        }
    }

    /// PROTO-5: keys shorter than 16 bytes are refused; sealing takes a 16-byte tag only.
    #[test]
    fn key_and_tag_limits() {
        assert_eq!(
            AuthKey::new(b"short", 16).unwrap_err(),
            KeyError::TooShort { len: 5, min: 16 }
        );
        for len in [8, 15, 17, 32] {
            assert_eq!(
                AuthKey::new(&[7; 32], len).unwrap_err(),
                KeyError::TagLength { len, expected: 16 }
            );
        }
        assert!(AuthKey::new(&[7; 16], 16).is_ok());
    }

    /// PROTO-9: a sealed body opens under the same key, header and position only.
    #[test]
    fn proto9_seal_binds_header_position_and_key() {
        let key = AuthKey::new(SECRET, 16).unwrap();
        let other = AuthKey::new(b"fedcba98765432100123", 16).unwrap();
        let cluster = ClusterId::new("site-1").unwrap();
        let from = PeerId::from_static("gw-a");
        let mut body = b"secret value".to_vec();
        let tag = key.seal(at(&cluster, &from, 9), b"hdr", &mut body).unwrap();
        assert_ne!(body, b"secret value");
        let sealed = body.clone();

        let opens = |key: &AuthKey, at: StreamPosition<'_>, header: &[u8]| {
            let mut copy = sealed.clone();
            key.open(at, header, &mut copy, &tag).then_some(copy)
        };
        assert_eq!(
            opens(&key, at(&cluster, &from, 9), b"hdr").as_deref(),
            Some(&b"secret value"[..])
        );
        assert!(opens(&other, at(&cluster, &from, 9), b"hdr").is_none());
        assert!(opens(&key, at(&cluster, &from, 10), b"hdr").is_none());
        assert!(opens(&key, at(&cluster, &from, 9), b"hdR").is_none());
        let b = PeerId::from_static("gw-b");
        assert!(opens(&key, at(&cluster, &b, 9), b"hdr").is_none());
        let mut short = sealed.clone();
        assert!(!key.open(at(&cluster, &from, 9), b"hdr", &mut short, &tag[..15]));
    }

    /// PROTO-9, issue 26: a stream's key is derived once on each side, not once per frame,
    /// and a clone of the key (each codec of a node holds one) uses what the original derived.
    #[test]
    fn proto9_a_stream_key_is_derived_once() {
        let sender = AuthKey::new(SECRET, 16).unwrap();
        let receiver = AuthKey::new(SECRET, 16).unwrap();
        let cluster = ClusterId::new("site-1").unwrap();
        let from = PeerId::from_static("gw-a");
        let reader = receiver.clone();
        for seq in 70_000..70_100 {
            let mut body = b"a replicated entry".to_vec();
            let tag = sender
                .seal(at(&cluster, &from, seq), b"hdr", &mut body)
                .unwrap();
            let opener = if seq % 2 == 0 { &receiver } else { &reader };
            assert!(opener.open(at(&cluster, &from, seq), b"hdr", &mut body, &tag));
            assert_eq!(body, b"a replicated entry");
        }
        assert_eq!(sender.derivations(), (1, 1));
        assert_eq!(receiver.derivations(), (1, 1));
    }

    /// PROTO-9, issue 26: a frame that does not open keeps nothing, so frames forged under any
    /// sender and incarnation cannot push the members' streams out; the streams kept are
    /// bounded, the least recently used going first.
    #[test]
    fn proto9_only_opened_streams_are_kept_and_they_are_bounded() {
        let sender = AuthKey::new(SECRET, 16).unwrap();
        let receiver = AuthKey::new(SECRET, 16).unwrap();
        let cluster = ClusterId::new("site-1").unwrap();
        let member = PeerId::from_static("gw-a");
        let open = |incarnation: u64, forged: bool| {
            let position = StreamPosition {
                cluster: &cluster,
                from: &member,
                incarnation,
                seq: 70_000,
            };
            let mut body = b"entry".to_vec();
            let mut tag = sender.seal(position, b"hdr", &mut body).unwrap();
            if forged {
                tag[0] ^= 1;
            }
            receiver.open(position, b"hdr", &mut body, &tag)
        };
        assert!(open(1, false));
        for _ in 0..3 {
            assert!(!open(2, true));
        }
        assert_eq!(receiver.derivations(), (4, 1), "forged frames keep nothing");

        for incarnation in 3..3 + MAX_STREAMS as u64 {
            assert!(open(incarnation, false));
            // The first stream stays in use throughout, so it is never the oldest.
            assert!(open(1, false));
        }
        let (derived, kept) = receiver.derivations();
        assert_eq!(kept, MAX_STREAMS);
        assert_eq!(derived, 4 + MAX_STREAMS as u64, "stream 1 derived once");
        assert!(
            open(3, false),
            "the oldest stream was let go and is derived again"
        );
        assert_eq!(receiver.derivations().0, derived + 1);
    }

    /// The key never appears in debug output; its fingerprint does, and differs per key.
    #[test]
    fn debug_hides_key() {
        let key = AuthKey::new(b"super-secret-key-material", 16).unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("secret"));
        assert!(shown.contains(&key.fingerprint()));
        assert_eq!(key.fingerprint().len(), 8);
        let other = AuthKey::new(b"super-secret-key-materiaL", 16).unwrap();
        assert_ne!(key.fingerprint(), other.fingerprint());
    }

    /// PROTO-9: a start's first sequence number keeps the 5-byte encoding for 2^31 - 2^16 frames
    /// whatever the random bits, and uses 31 of them.
    #[test]
    fn proto9_first_seq_range() {
        for random in [0, 1, u64::MAX, 0x8000_0000_0000_0000, 0x1234_5678_9abc_def0] {
            let seq = first_seq(random);
            assert!(seq >= 1 << 16, "{seq:#x}");
            assert!(
                u64::from(u32::MAX) - seq >= (1 << 31) - (1 << 16),
                "{seq:#x}"
            );
        }
        assert_ne!(first_seq(0), first_seq(u64::MAX));
        assert_ne!(first_seq(1 << 33), first_seq(2 << 33));
    }

    /// The (stream key, nonce) of each of the first `frames` frames of one start.
    fn stream(
        key: &AuthKey,
        from: &PeerId,
        incarnation: u64,
        random: u64,
        frames: u64,
    ) -> Vec<([u8; 32], [u8; 12])> {
        let cluster = ClusterId::new("site-1").unwrap();
        let stream_key = key.stream_key(&cluster, from, incarnation);
        let first = first_seq(random);
        (first..first + frames)
            .map(|seq| (stream_key, frame_nonce(seq)))
            .collect()
    }

    fn disjoint(a: &[([u8; 32], [u8; 12])], b: &[([u8; 32], [u8; 12])]) -> bool {
        let seen: std::collections::BTreeSet<_> = a.iter().collect();
        b.iter().all(|pair| !seen.contains(pair))
    }

    /// PROTO-9, issue 26 item 3: no two starts of one sender share a (stream key, nonce) in
    /// any of the cases that can give them the same inputs otherwise, each modelled by what
    /// this design takes: the incarnation the WAL gives a start, and the 64 random bits the
    /// start draws for its first sequence number.
    #[test]
    fn proto9_nonces_never_repeat_across_starts() {
        let key = AuthKey::new(SECRET, 16).unwrap();
        let a = PeerId::from_static("gw-a");
        let now = 1_764_000_000;
        const FRAMES: u64 = 10_000;
        let first = stream(&key, &a, now, 0x1234_5678_9abc_def0, FRAMES);

        // Restarted within the same second: the WAL gives the stored incarnation plus one
        // (even with the same random draw, the stream key differs).
        let restarted = stream(&key, &a, now + 1, 0x1234_5678_9abc_def0, FRAMES);
        assert!(
            disjoint(&first, &restarted),
            "restart within the same second"
        );
        assert_ne!(first[0].0, restarted[0].0);

        // A wiped data directory, started again in the same second: the incarnation is the
        // clock's second again, the random draw is new.
        let wiped = stream(&key, &a, now, 0x0fed_cba9_8765_4321, FRAMES);
        assert!(disjoint(&first, &wiped), "wiped data directory");

        // The clock stepped back by an hour and the data directory wiped: the incarnation is
        // smaller, so its stream key differs; and with the WAL kept, stored plus one.
        let stepped_back = stream(&key, &a, now - 3600, 0x0fed_cba9_8765_4321, FRAMES);
        assert!(disjoint(&first, &stepped_back), "clock stepped back");
        let stepped_back_kept = stream(&key, &a, now + 1, 0x7777_0000_3333_1111, FRAMES);
        assert!(
            disjoint(&first, &stepped_back_kept),
            "clock stepped back, WAL kept"
        );

        // The same id on two machines, started in the same second: same incarnation, each
        // machine's own random draw.
        let twin = stream(&key, &a, now, 0xdead_beef_0bad_f00d, FRAMES);
        assert!(disjoint(&first, &twin), "same id on two machines");

        // Another sender with the very same numbers has its own stream key.
        let b = stream(
            &key,
            &PeerId::from_static("gw-b"),
            now,
            0x1234_5678_9abc_def0,
            FRAMES,
        );
        assert!(disjoint(&first, &b), "another sender");
    }
}
