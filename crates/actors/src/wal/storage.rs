//! What the WAL actor writes to: raft's [`Storage`] (hard state, log entries, sync,
//! snapshots: WAL-1, LOG-2..4) plus the records only the node's WAL file keeps, which the core's
//! trait does not know (leader changes for the history, CB-6; amnesia markers, WAL-2; the
//! automatic-election switch, RAFT-8; incarnations, PROTO-2).
//!
//! Those records are [`WalRecord`]s of `conclave-storage`, which the core cannot name (it
//! does not depend on that crate), so they get a trait of their own here, with [`Storage`] as
//! its supertrait, rather than a method on the core's trait.

use std::path::Path;
use std::time::Duration;

use conclave_core::storage::Storage;
use conclave_storage::{HistoryRecord, WalError, WalFile, WalRecord};

/// A node's durable storage as the WAL actor uses it: raft's [`Storage`] and the WAL's own
/// records.
///
/// Contract (WAL-1): once a write or sync failed, every later write and sync answers
/// [`WalError::Failed`], since the storage can no longer say what reached the disk.
pub trait WalStorage: Storage<Error = WalError> + Send + 'static {
    /// Appends `records` in order with one write and one fsync, and returns how long the
    /// write and fsync took. They are durable when this returns `Ok`; an empty slice does
    /// nothing.
    ///
    /// One batch, not a hard state through [`Storage::save_hard_state`] and the rest apart:
    /// the order inside a batch is meaning (a hard state after an amnesia marker ends an
    /// abstention, WAL-2), and a batch is durable whole or not at all.
    fn append_records(&mut self, records: &[WalRecord]) -> Result<Duration, WalError>;

    /// The newest leadership history records, oldest first (CB-6).
    fn history(&self) -> &[HistoryRecord];

    /// Where the storage lives, to name it in errors.
    fn path(&self) -> &Path;
}

impl WalStorage for WalFile {
    fn append_records(&mut self, records: &[WalRecord]) -> Result<Duration, WalError> {
        self.append(records)
    }

    fn history(&self) -> &[HistoryRecord] {
        WalFile::history(self)
    }

    fn path(&self) -> &Path {
        WalFile::path(self)
    }
}
