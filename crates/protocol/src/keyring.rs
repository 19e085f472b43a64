//! The keys a node seals and opens frames with, and the one it sends under (PROTO-9, SEC-3;
//! issue 26 item 3: key rotation without downtime).
//!
//! During a rotation a node holds the current key and the next one. It opens a frame under
//! either, and seals under the one the operator names, so every node can be moved to the next
//! key one at a time while all of them still understand each other: first every node learns
//! the next key, then every node sends under it, then the old key is dropped.

use crate::auth::AuthKey;

/// Which of a [`KeyRing`]'s keys frames are sealed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendKey {
    /// The current key (`cluster.psk_file`).
    #[default]
    Current,
    /// The next key (`cluster.psk_next_file`).
    Next,
}

impl SendKey {
    /// The configuration's spelling: `"current"` or `"next"`.
    pub fn label(self) -> &'static str {
        match self {
            SendKey::Current => "current",
            SendKey::Next => "next",
        }
    }
}

/// The current key, the next one during a rotation, and which of them frames are sealed under.
#[derive(Debug, Clone)]
pub struct KeyRing {
    current: AuthKey,
    next: Option<AuthKey>,
    send: SendKey,
}

impl KeyRing {
    /// A ring of one key, sealing and opening under it.
    pub fn single(current: AuthKey) -> Self {
        Self {
            current,
            next: None,
            send: SendKey::Current,
        }
    }

    /// A ring of the current key and, during a rotation, the next one; sealing under `send`.
    /// Sending under a next key that is absent is a configuration error the caller reports;
    /// here it falls back to the current key rather than sending nothing.
    pub fn new(current: AuthKey, next: Option<AuthKey>, send: SendKey) -> Self {
        let send = if next.is_none() {
            SendKey::Current
        } else {
            send
        };
        Self {
            current,
            next,
            send,
        }
    }

    /// The key frames are sealed under.
    pub fn sending(&self) -> &AuthKey {
        match (self.send, &self.next) {
            (SendKey::Next, Some(next)) => next,
            _ => &self.current,
        }
    }

    /// Which key frames are sealed under.
    pub fn send(&self) -> SendKey {
        self.send
    }

    /// The current key.
    pub fn current(&self) -> &AuthKey {
        &self.current
    }

    /// The next key, during a rotation.
    pub fn next(&self) -> Option<&AuthKey> {
        self.next.as_ref()
    }

    /// Every key a frame may be opened under, the sending one first: most frames of a
    /// cluster are under the key this node sends under, so the second try is the exception.
    pub fn opening(&self) -> impl Iterator<Item = &AuthKey> {
        let sending = self.sending();
        let other = match (self.send, &self.next) {
            (SendKey::Next, Some(_)) => Some(&self.current),
            (SendKey::Current, Some(next)) => Some(next),
            _ => None,
        };
        std::iter::once(sending).chain(other)
    }

    /// A short description for logs: fingerprints, which one is sent under.
    pub fn describe(&self) -> String {
        match &self.next {
            None => format!("key {}", self.current.fingerprint()),
            Some(next) => format!(
                "current key {}, next key {}, sending under the {} key",
                self.current.fingerprint(),
                next.fingerprint(),
                self.send.label()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> AuthKey {
        AuthKey::new(&[byte; 32], 16).unwrap()
    }

    /// PROTO-9: a ring opens under both keys, the sending one first, and falls back to the
    /// current key when told to send under a next key it does not have.
    #[test]
    fn proto9_ring_opens_under_both_and_sends_under_the_named_one() {
        let ring = KeyRing::new(key(1), Some(key(2)), SendKey::Next);
        assert_eq!(ring.sending().fingerprint(), key(2).fingerprint());
        let order: Vec<String> = ring.opening().map(AuthKey::fingerprint).collect();
        assert_eq!(order, [key(2).fingerprint(), key(1).fingerprint()]);

        let ring = KeyRing::new(key(1), Some(key(2)), SendKey::Current);
        let order: Vec<String> = ring.opening().map(AuthKey::fingerprint).collect();
        assert_eq!(order, [key(1).fingerprint(), key(2).fingerprint()]);

        let ring = KeyRing::new(key(1), None, SendKey::Next);
        assert_eq!(ring.send(), SendKey::Current);
        assert_eq!(ring.opening().count(), 1);
        assert!(ring.describe().contains(&key(1).fingerprint()));
    }
}
