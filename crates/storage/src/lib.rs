//! A node's durable state on disk (WAL-1..WAL-3, WAL-5, LOG-2..LOG-4): the write-ahead log
//! `conclave.wal` with its format, recovery and corruption rules, the data-directory lock, the
//! replicated log's segments and snapshots in `log/`, and what an operator does with a damaged
//! file (`conclave wal inspect`, `conclave wal repair`). Everything here is synchronous and
//! blocks on the disk: the WalActor in `conclave-actors` runs it on a thread of its own so
//! that no event loop ever waits for an fsync (WAL-4). No actix, no tokio. `docs/wal.md`
//! describes the files, recovery and the repair procedure for users.
//!
//! - `record` — the on-disk format: a `b"CWL1"` file header, then records of
//!   `length u32 | kind u8 | crc32 u32 | payload`; every group commit ends with a seal record.
//!   Log segments use the same framing after a `b"CLS1"` header.
//! - `examine` — judges a file's bytes without changing them: clean, a torn tail (cut off at
//!   start) or corruption (refused, file untouched) (WAL-2); the same for every segment.
//! - [`WalFile`] — `conclave.wal` in the data directory: recovery, group-committed appends
//!   (WAL-1), compaction through a temp file, rename and directory fsync (WAL-3), and a new
//!   incarnation at every open. It holds the data-directory lock ([`DataDirLock`]) for its
//!   lifetime: one process per data directory. It also owns the replicated log and is raft's
//!   [`Storage`](conclave_core::storage::Storage) on disk: hard state and entries are held
//!   until a sync writes them with one fsync per file (group commit).
//! - `log` — the replicated log's segment files: replay, truncation by the entries record
//!   that replaces a suffix (LOG-2), a new segment past a size, compaction that deletes whole
//!   segments behind a snapshot (LOG-4).
//! - `snapshot` — snapshot files, written through a temp file, fsync, rename and directory
//!   fsync (WAL-3).
//! - [`inspect`] and [`repair`] — what `conclave wal inspect` and `conclave wal repair` do.
//! - `backup` — saved snapshots ([`SnapshotBackup`]), the checksummed file `conclave snapshot
//!   save` writes and `GET /v1/snapshot` serves; `restore` — [`WalFile::init_from_snapshot`],
//!   which seeds an empty data directory from one for a node of a new cluster (MEMB-6).
//!
//! Start-up order: [`WalFile::open`] on the node's start path (it blocks, once), hand the
//! [`Recovered`] state to the election core (an amnesic WAL makes it abstain), then start the
//! WalActor with the file.

mod backup;
mod clock;
mod error;
mod examine;
mod file;
mod lock;
mod log;
mod record;
mod repair;
mod restore;
mod snapshot;
#[cfg(test)]
mod storage_tests;
#[cfg(test)]
mod tests;

pub use backup::{
    BACKUP_FORMAT_VERSION, BACKUP_MAGIC, BackupError, Checksum, SnapshotBackup, write_atomically,
};
pub use error::LogDamage;
pub use error::WalError;
pub use examine::{DamagedSpan, Examination, ExaminedRecord, RecordContent, Verdict};
pub use file::{
    DEFAULT_COMPACT_THRESHOLD, DEFAULT_HISTORY_LIMIT, Recovered, WAL_FILE_NAME, WalFile,
    WalOptions, read_records,
};
pub use lock::{DataDirLock, LOCK_FILE_NAME};
pub use log::{DEFAULT_SEGMENT_SIZE, LOG_DIR_NAME};
pub use record::{HistoryRecord, SegmentContent, WalRecord};
pub use repair::{
    Inspection, LogInspection, LogVerdict, RepairOutcome, RepairReport, SegmentInspection,
    StartState, inspect, repair,
};
pub use snapshot::SnapshotFile;
