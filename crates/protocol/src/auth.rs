//! Frame authentication with a cluster pre-shared key (PROTO-5, ESP-8).
//!
//! The tag is HMAC-SHA256 over the encoded envelope, truncated to its leftmost `tag_len` bytes
//! (at least 8, 16 by default) and appended to the frame. ESP-NOW broadcast is neither
//! encrypted nor authenticated by the radio, so this tag is what keeps forged frames out; the
//! replay guard keeps captured ones from being played back.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::KeyError;

type HmacSha256 = Hmac<Sha256>;

/// Shortest pre-shared key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// Shortest truncated tag, in bytes.
pub const MIN_TAG_LEN: usize = 8;
/// Longest tag: the whole HMAC-SHA256 output.
pub const MAX_TAG_LEN: usize = 32;
/// Tag length used unless configured otherwise: 128 bits keeps forgery out of reach while a
/// heartbeat stays far below ESP-NOW's 250-byte payload.
pub const DEFAULT_TAG_LEN: usize = 16;

/// A cluster's pre-shared key, ready to tag and verify frames.
#[derive(Clone)]
pub struct AuthKey {
    /// The keyed MAC state; cloned per frame so the key schedule runs once.
    mac: HmacSha256,
    tag_len: usize,
}

impl AuthKey {
    /// A key from the secret's bytes, producing tags of `tag_len` bytes.
    pub fn new(secret: &[u8], tag_len: usize) -> Result<Self, KeyError> {
        if secret.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                len: secret.len(),
                min: MIN_KEY_LEN,
            });
        }
        if !(MIN_TAG_LEN..=MAX_TAG_LEN).contains(&tag_len) {
            return Err(KeyError::TagLength {
                len: tag_len,
                min: MIN_TAG_LEN,
                max: MAX_TAG_LEN,
            });
        }
        let mac = HmacSha256::new_from_slice(secret).map_err(|_| KeyError::TooShort {
            len: secret.len(),
            min: MIN_KEY_LEN,
        })?;
        Ok(Self { mac, tag_len })
    }

    /// Bytes of tag appended to each frame.
    pub fn tag_len(&self) -> usize {
        self.tag_len
    }

    /// Appends the tag of `message` (the encoded envelope) to `out`.
    pub fn append_tag(&self, message: &[u8], out: &mut Vec<u8>) {
        let mut mac = self.mac.clone();
        mac.update(message);
        let full = mac.finalize().into_bytes();
        out.extend_from_slice(&full[..self.tag_len]);
    }

    /// Whether `tag` is the tag of `message`, compared in constant time.
    pub fn verify(&self, message: &[u8], tag: &[u8]) -> bool {
        if tag.len() != self.tag_len {
            return false;
        }
        let mut mac = self.mac.clone();
        mac.update(message);
        mac.verify_truncated_left(tag).is_ok()
    }
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.debug_struct("AuthKey")
            .field("tag_len", &self.tag_len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PROTO-5: keys shorter than 16 bytes and tags outside 8..=32 bytes are refused.
    #[test]
    fn key_and_tag_limits() {
        assert_eq!(
            AuthKey::new(b"short", 16).unwrap_err(),
            KeyError::TooShort { len: 5, min: 16 }
        );
        assert!(matches!(
            AuthKey::new(&[7; 32], 7),
            Err(KeyError::TagLength { len: 7, .. })
        ));
        assert!(AuthKey::new(&[7; 32], 33).is_err());
        assert!(AuthKey::new(&[7; 16], 8).is_ok());
    }

    /// PROTO-5: a tag verifies its own message only, and only under the same key.
    #[test]
    fn tag_binds_message_and_key() {
        let key = AuthKey::new(b"0123456789abcdef0123", 16).unwrap();
        let other = AuthKey::new(b"fedcba98765432100123", 16).unwrap();
        let mut tag = Vec::new();
        key.append_tag(b"hello", &mut tag);
        assert_eq!(tag.len(), 16);
        assert!(key.verify(b"hello", &tag));
        assert!(!key.verify(b"hellp", &tag));
        assert!(!other.verify(b"hello", &tag));
        assert!(!key.verify(b"hello", &tag[..15]));
    }

    /// The key never appears in debug output.
    #[test]
    fn debug_hides_key() {
        let key = AuthKey::new(b"super-secret-key-material", 12).unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("secret"));
        assert!(shown.contains("tag_len: 12"));
    }
}
