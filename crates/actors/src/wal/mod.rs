//! The write-ahead log of one node (WAL-1..WAL-4): the election's hard state, the node's
//! incarnation (PROTO-2) and the leadership history (CB-6), made durable before the node acts
//! on them.
//!
//! - `record.rs` — the on-disk format, byte by byte, in its module docs: a `b"CWL1"` file
//!   header, then records of `length u32 | kind u8 | crc32 u32 | payload`.
//! - [`WalFile`] — `conclave.wal` in the data directory: recovery to the last valid record
//!   with the torn tail cut off (WAL-2), group-committed appends (WAL-1), compaction through
//!   a temp file, rename and directory fsync (WAL-3), and a new incarnation at every open.
//! - [`WalActor`] — runs the `WalFile` on a `SyncArbiter` thread so that fsync never blocks an
//!   event loop (WAL-4); [`Persist`] answers once the records are durable.
//!
//! Start-up order: [`WalFile::open`] on the node's start path (it blocks, once), hand the
//! [`Recovered`] state to the election core, then [`WalActor::start`] with the file.

mod actor;
mod error;
mod file;
mod record;
#[cfg(test)]
mod tests;

pub use actor::{History, InlineWalActor, Persist, WalActor};
pub use error::WalError;
pub use file::{
    DEFAULT_COMPACT_THRESHOLD, DEFAULT_HISTORY_LIMIT, Recovered, WAL_FILE_NAME, WalFile,
    WalOptions, read_records,
};
pub use record::{HistoryRecord, WalRecord};
