//! The write-ahead log of one node (WAL-1..WAL-4): the election's hard state, the node's
//! incarnation (PROTO-2), the leadership history (CB-6) and the operator's automatic-election
//! switch (RAFT-8), made durable before the node acts on them. `docs/wal.md` describes the
//! format, recovery, `conclave wal inspect` and the repair procedure.
//!
//! - `record.rs` — the on-disk format: a `b"CWL1"` file header, then records of
//!   `length u32 | kind u8 | crc32 u32 | payload`; every group commit ends with a seal record.
//! - `examine.rs` — judges a file's bytes without changing them: clean, a torn tail
//!   (cut off at start) or corruption (refused, file untouched) (WAL-2).
//! - [`WalFile`] — `conclave.wal` in the data directory: recovery, group-committed appends
//!   (WAL-1), compaction through a temp file, rename and directory fsync (WAL-3), and a new
//!   incarnation at every open. It holds the data-directory lock ([`DataDirLock`]) for its
//!   lifetime: one process per data directory.
//! - [`inspect`] and [`repair`] — what `conclave wal inspect` and `conclave wal repair` do.
//! - [`WalActor`] — runs the `WalFile` on a `SyncArbiter` thread so that fsync never blocks an
//!   event loop (WAL-4); [`Persist`] answers once the records are durable.
//!
//! Start-up order: [`WalFile::open`] on the node's start path (it blocks, once), hand the
//! [`Recovered`] state to the election core (an amnesic WAL makes it abstain), then
//! [`WalActor::start`] with the file.

mod actor;
mod error;
mod examine;
mod file;
mod lock;
mod record;
mod repair;
#[cfg(test)]
mod tests;

pub use actor::{CloseWal, History, InlineWalActor, Persist, WalActor};
pub use error::WalError;
pub use examine::{DamagedSpan, Examination, ExaminedRecord, RecordContent, Verdict};
pub use file::{
    DEFAULT_COMPACT_THRESHOLD, DEFAULT_HISTORY_LIMIT, Recovered, WAL_FILE_NAME, WalFile,
    WalOptions, read_records,
};
pub use lock::{DataDirLock, LOCK_FILE_NAME};
pub use record::{HistoryRecord, WalRecord};
pub use repair::{Inspection, RepairOutcome, RepairReport, StartState, inspect, repair};
