//! The WAL's write logic, once, whichever thread runs it (WAL-1, WAL-4, LOG-3, LOG-4): each
//! message's write on a [`WalStorage`], its fsync timed into `conclave_wal_fsync_seconds`, its
//! failure logged, and the answer a closed WAL gives. The actor in [`super::actor`] only hands
//! its messages to a [`WalWriter`].

use std::path::PathBuf;

use conclave_core::storage::Snapshot;
use conclave_protocol::LogEntry;
use conclave_storage::{HistoryRecord, WalError, WalRecord};
use tracing::error;

use super::storage::WalStorage;
use crate::metrics::NodeMetrics;

/// One node's storage, until [`WalWriter::close`], and the metrics its writes are timed into.
#[derive(Debug)]
pub(super) struct WalWriter<S> {
    /// `None` once closed: the file and the data-directory lock are released.
    storage: Option<S>,
    /// The storage's path, for the error once it is closed.
    path: PathBuf,
    metrics: NodeMetrics,
}

impl<S: WalStorage> WalWriter<S> {
    pub(super) fn new(storage: S, metrics: NodeMetrics) -> Self {
        Self {
            path: storage.path().to_path_buf(),
            storage: Some(storage),
            metrics,
        }
    }

    /// Appends and times one `Persist` batch; durable when it answers `Ok` (WAL-1).
    pub(super) fn persist(&mut self, records: &[WalRecord]) -> Result<(), WalError> {
        // Nothing to write is nothing to refuse, closed or not.
        if records.is_empty() {
            return Ok(());
        }
        let storage = self.open()?;
        match storage.append_records(records) {
            Ok(took) => {
                self.metrics.wal_fsync(took);
                Ok(())
            }
            Err(failure) => {
                error!(error = %failure, records = records.len(), "WAL append failed");
                Err(failure)
            }
        }
    }

    /// Writes `entries` and syncs them with one fsync for the batch (LOG-3).
    pub(super) fn append_log(&mut self, entries: &[LogEntry]) -> Result<(), WalError> {
        let storage = self.open()?;
        // Tokio's clock: on the WAL thread, outside any runtime, it reads the OS clock.
        let started = actix::clock::Instant::now();
        let result = storage
            .append_entries(entries)
            .and_then(|()| storage.sync());
        match result {
            Ok(()) => {
                self.metrics.wal_fsync(started.elapsed());
                self.metrics.log_entries_synced(entries.len());
                Ok(())
            }
            Err(failure) => {
                error!(error = %failure, entries = entries.len(), "log append failed");
                Err(failure)
            }
        }
    }

    /// Saves `snapshot`, durable when it answers `Ok` (LOG-4, WAL-3).
    pub(super) fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), WalError> {
        let storage = self.open()?;
        let started = actix::clock::Instant::now();
        let index = snapshot.last.index;
        match storage.save_snapshot(snapshot) {
            Ok(()) => {
                self.metrics.wal_fsync(started.elapsed());
                Ok(())
            }
            Err(failure) => {
                error!(error = %failure, index, "saving a snapshot failed");
                Err(failure)
            }
        }
    }

    /// Drops the storage, releasing the file and the data-directory lock; later writes answer
    /// [`WalError::Closed`].
    pub(super) fn close(&mut self) {
        drop(self.storage.take());
    }

    /// The leadership history, oldest first (CB-6); empty once closed.
    pub(super) fn history(&self) -> Vec<HistoryRecord> {
        self.storage
            .as_ref()
            .map_or_else(Vec::new, |storage| storage.history().to_vec())
    }

    fn open(&mut self) -> Result<&mut S, WalError> {
        self.storage.as_mut().ok_or_else(|| WalError::Closed {
            path: self.path.clone(),
        })
    }
}
