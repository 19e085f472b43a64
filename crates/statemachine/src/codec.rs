//! Decoding of entries' commands and of snapshots (LOG-5): MessagePack read with a nesting
//! bound and to its last byte, so that no input, however forged, makes a node overflow its
//! stack or read two meanings into one entry.

use std::io::Cursor;

use serde::de::DeserializeOwned;

/// The deepest nesting a command or a snapshot needs is under 10. The decoder recurses once
/// per level, a couple of kilobytes of stack each in a debug build, and skipping an unknown
/// field recurses as deep as the garbage in it: without this bound, an entry of nested
/// one-element arrays would overflow the stack of every node that applies it.
const MAX_NESTING: usize = 32;

/// Decodes `bytes` as one `T` and nothing after it.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, rmp_serde::decode::Error> {
    let mut deserializer = rmp_serde::Deserializer::new(Cursor::new(bytes));
    deserializer.set_max_depth(MAX_NESTING);
    let value = T::deserialize(&mut deserializer)?;
    let consumed = usize::try_from(deserializer.position()).unwrap_or(usize::MAX);
    if consumed != bytes.len() {
        return Err(rmp_serde::decode::Error::Uncategorized(format!(
            "{} bytes after the end",
            bytes.len().saturating_sub(consumed)
        )));
    }
    Ok(value)
}
