//! Node and cluster identities (PROTO-1).
//!
//! A `PeerId` names one gateway, a `ClusterId` names the group it belongs to. Both are 1 to 32
//! bytes of `[A-Za-z0-9._-]`, compared byte-wise: that order is what the split-brain tie-break of
//! `connected` quorum mode uses ("the byte-wise larger id stays leader"). They are stored inline
//! and are `Copy`, because the election core passes them around in every message and map.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::IdError;

/// Longest identity, in bytes.
pub const MAX_ID_LEN: usize = 32;

/// The alphabet of an identity: `[A-Za-z0-9._-]`. `const` so that `PeerId::from_static` checks
/// the same rule as `new`.
const fn is_id_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-')
}

/// The validated bytes of an identity, kept inline so that identities are `Copy`.
#[derive(Clone, Copy)]
struct IdBytes {
    len: u8,
    bytes: [u8; MAX_ID_LEN],
}

impl IdBytes {
    fn parse(what: &'static str, text: &str) -> Result<Self, IdError> {
        let raw = text.as_bytes();
        if raw.is_empty() {
            return Err(IdError::Empty { what });
        }
        if raw.len() > MAX_ID_LEN {
            return Err(IdError::TooLong {
                what,
                len: raw.len(),
            });
        }
        if let Some((position, &byte)) = raw.iter().enumerate().find(|(_, b)| !is_id_byte(**b)) {
            return Err(IdError::InvalidByte {
                what,
                byte,
                position,
            });
        }
        let mut bytes = [0u8; MAX_ID_LEN];
        bytes[..raw.len()].copy_from_slice(raw);
        Ok(Self {
            // Cannot truncate: the length was checked against MAX_ID_LEN above.
            len: raw.len() as u8,
            bytes,
        })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    fn as_str(&self) -> &str {
        // Only ASCII bytes pass `parse`, so this never fails; the fallback keeps it total.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

/// Generates one identity newtype; both kinds share rules and differ only in name.
macro_rules! identity {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name(IdBytes);

        impl $name {
            /// Validates `text` (1–32 bytes of `[A-Za-z0-9._-]`).
            pub fn new(text: &str) -> Result<Self, IdError> {
                IdBytes::parse($what, text).map(Self)
            }

            /// The identity as text.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// The identity's bytes, in the order used for comparisons.
            pub fn as_bytes(&self) -> &[u8] {
                self.0.as_bytes()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.as_bytes() == other.as_bytes()
            }
        }

        impl Eq for $name {}

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $name {
            fn cmp(&self, other: &Self) -> Ordering {
                self.as_bytes().cmp(other.as_bytes())
            }
        }

        impl Hash for $name {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.as_bytes().hash(state);
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                Self::new(text)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(text: &str) -> Result<Self, IdError> {
                Self::new(text)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct IdVisitor;
                impl Visitor<'_> for IdVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(concat!("a ", $what, " of 1-32 bytes [A-Za-z0-9._-]"))
                    }
                    fn visit_str<E: de::Error>(self, text: &str) -> Result<$name, E> {
                        $name::new(text).map_err(E::custom)
                    }
                    fn visit_bytes<E: de::Error>(self, raw: &[u8]) -> Result<$name, E> {
                        let text = std::str::from_utf8(raw)
                            .map_err(|_| E::custom(concat!($what, " is not UTF-8")))?;
                        $name::new(text).map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(IdVisitor)
            }
        }
    };
}

identity!(
    /// The identity of one node (PROTO-1). Ordered byte-wise.
    PeerId,
    "peer id"
);

impl PeerId {
    /// A peer id written in the source, such as `PeerId::from_static("gw-a")`.
    ///
    /// For names fixed when the code is written (tests, examples); a name that comes from
    /// configuration or the network goes through [`PeerId::new`], which returns an error.
    /// Being `const`, it also builds a `const` id, and then a bad literal fails the build.
    ///
    /// # Panics
    ///
    /// If `name` is not 1 to 32 bytes of `[A-Za-z0-9._-]`. A bad literal is a mistake in the
    /// code, like an out-of-range integer literal, so it panics instead of returning an error.
    #[must_use]
    pub const fn from_static(name: &'static str) -> Self {
        let raw = name.as_bytes();
        if raw.is_empty() {
            panic!(
                "PeerId::from_static: the name is empty; a peer id is 1 to 32 bytes of [A-Za-z0-9._-]"
            );
        }
        if raw.len() > MAX_ID_LEN {
            panic!(
                "PeerId::from_static: the name is longer than 32 bytes; a peer id is 1 to 32 bytes of [A-Za-z0-9._-]"
            );
        }
        let mut bytes = [0u8; MAX_ID_LEN];
        // A `while` loop because iterators are not available in a `const fn`.
        let mut position = 0;
        while position < raw.len() {
            if !is_id_byte(raw[position]) {
                panic!(
                    "PeerId::from_static: the name has a byte outside [A-Za-z0-9._-]; a peer id is 1 to 32 bytes of [A-Za-z0-9._-]"
                );
            }
            bytes[position] = raw[position];
            position += 1;
        }
        Self(IdBytes {
            // Cannot truncate: the length was checked against MAX_ID_LEN above.
            len: raw.len() as u8,
            bytes,
        })
    }
}

identity!(
    /// The identity of a cluster (PROTO-1); frames naming another cluster are dropped (PROTO-5).
    ClusterId,
    "cluster id"
);

#[cfg(test)]
mod tests {
    use super::*;

    /// PROTO-1: the allowed alphabet and both length limits.
    #[test]
    fn peer_id_validation() {
        assert!(PeerId::new("gw-a").is_ok());
        assert!(PeerId::new("node_1.site-2").is_ok());
        assert!(PeerId::new(&"x".repeat(32)).is_ok());
        assert_eq!(PeerId::new(""), Err(IdError::Empty { what: "peer id" }));
        assert_eq!(
            PeerId::new(&"x".repeat(33)),
            Err(IdError::TooLong {
                what: "peer id",
                len: 33
            })
        );
        assert_eq!(
            ClusterId::new("site 1"),
            Err(IdError::InvalidByte {
                what: "cluster id",
                byte: b' ',
                position: 4
            })
        );
        assert!(PeerId::new("gw/a").is_err());
        assert!(PeerId::new("gw-é").is_err());
    }

    /// PROTO-1: ordering is byte-wise, so uppercase sorts before lowercase and a prefix first.
    #[test]
    fn peer_ids_order_bytewise() {
        let id = |s| PeerId::new(s).unwrap();
        assert!(id("B") < id("a"));
        assert!(id("gw") < id("gw-a"));
        assert!(id("gw-a") < id("gw-b"));
        assert!(id("10") < id("9"));
    }

    /// PROTO-1: a literal that follows the rule gives the same id as `new`, also in a `const`.
    #[test]
    fn from_static_accepts_a_valid_literal() {
        const GW_A: PeerId = PeerId::from_static("gw-a");
        assert_eq!(GW_A, PeerId::new("gw-a").unwrap());
        assert_eq!(
            PeerId::from_static("node_1.site-2"),
            PeerId::new("node_1.site-2").unwrap()
        );
        let longest = PeerId::from_static("abcdefghijklmnopqrstuvwxyz012345");
        assert_eq!(longest.as_bytes().len(), MAX_ID_LEN);
        assert_eq!(longest.as_str(), "abcdefghijklmnopqrstuvwxyz012345");
    }

    /// PROTO-1: a literal outside the alphabet is a programmer error and panics, naming the rule.
    #[test]
    #[should_panic(expected = "byte outside [A-Za-z0-9._-]")]
    fn from_static_panics_on_an_invalid_byte() {
        let _ = PeerId::from_static("gw/a");
    }

    /// PROTO-1: an empty literal panics, naming the rule.
    #[test]
    #[should_panic(expected = "the name is empty; a peer id is 1 to 32 bytes")]
    fn from_static_panics_on_an_empty_name() {
        let _ = PeerId::from_static("");
    }

    /// PROTO-1: a literal over 32 bytes panics, naming the rule.
    #[test]
    #[should_panic(expected = "longer than 32 bytes")]
    fn from_static_panics_on_a_name_too_long() {
        let _ = PeerId::from_static("abcdefghijklmnopqrstuvwxyz0123456");
    }

    /// PROTO-1, PROTO-6: an invalid id inside a frame is a decode error, not a panic.
    #[test]
    fn deserializing_an_invalid_id_fails() {
        let bytes = rmp_serde::to_vec(&"not valid!").unwrap();
        assert!(rmp_serde::from_slice::<PeerId>(&bytes).is_err());
        let bytes = rmp_serde::to_vec(&PeerId::new("gw-c").unwrap()).unwrap();
        assert_eq!(
            rmp_serde::from_slice::<PeerId>(&bytes).unwrap(),
            PeerId::new("gw-c").unwrap()
        );
    }
}
