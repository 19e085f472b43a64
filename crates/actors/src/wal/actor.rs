//! The WAL actor: the node's [`WalFile`] on a `SyncArbiter` thread of its own, so that writes
//! and fsyncs never block an event loop (WAL-4), with every fsync timed into
//! `conclave_wal_fsync_seconds` (docs/design.md §8).
//!
//! The arbiter has exactly one thread: the WAL has one writer, and messages are handled one at
//! a time in the order they were sent, so a sender's `Persist`s reach the disk in its order.
//! [`AppendLog`] writes the replicated log's entries the same way, one fsync per batch, and
//! [`SaveSnapshot`] its snapshots (LOG-4, WAL-3).

use std::sync::{Arc, Mutex, PoisonError};

use actix::{Actor, Addr, Context, Handler, Message, SyncArbiter, SyncContext};
use conclave_core::storage::{Snapshot, Storage};
use conclave_protocol::LogEntry;
use conclave_storage::{HistoryRecord, WalError, WalFile, WalRecord};
use tracing::error;

use crate::metrics::NodeMetrics;

/// Appends the records with one write and one fsync; answers `Ok` once they are durable.
///
/// Contract with the sender (RAFT-1, WAL-1): whatever depends on these records — a vote, a
/// message of the new term, a leader-change event — is released only after this answered
/// `Ok(())`. On `Err` (or a mailbox error) the records may not be durable, and the WAL takes
/// no further writes ([`WalError::Failed`]); the sender must not release the dependent
/// messages, and the node should stop: a restart recovers to the last durable record.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), WalError>")]
pub struct Persist(pub Vec<WalRecord>);

/// Writes log entries (replacing every stored entry from the first one's index on, LOG-2) and
/// fsyncs them: one fsync for the whole batch, the group commit of everything the core handed
/// out since the previous write. Answers `Ok` once they are durable; the sender then tells the
/// core ([`ReplicatedLog::handle_persisted`](conclave_core::raft::ReplicatedLog::handle_persisted)).
/// On `Err` nothing of the batch may be counted durable and the WAL takes no more writes.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), WalError>")]
pub struct AppendLog(pub Vec<LogEntry>);

/// Saves a snapshot of the state machine (LOG-4): temp file, fsync, rename, directory fsync
/// (WAL-3), then the log segments it covers are deleted. Answers `Ok` once it is durable; the
/// sender then tells the core
/// ([`ReplicatedLog::handle_snapshot_persisted`](conclave_core::raft::ReplicatedLog::handle_snapshot_persisted)).
/// Sent through the same mailbox as [`AppendLog`], so it reaches the disk in order with the
/// entries around it.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), WalError>")]
pub struct SaveSnapshot(pub Snapshot);

/// Closes the WAL: the file and the data-directory lock are released once this is answered,
/// so the directory can be opened again (a node restarted in the same process). Later
/// `Persist`s answer [`WalError::Closed`].
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CloseWal;

/// Asks for the leadership history kept in memory, oldest first (CB-6).
#[derive(Debug, Message)]
#[rtype(result = "Vec<HistoryRecord>")]
pub struct History;

/// Owns the node's WAL file on a dedicated thread (WAL-4).
#[derive(Debug)]
pub struct WalActor {
    /// Shared rather than owned because a `SyncArbiter` builds its actor with an `Fn`
    /// factory, which it calls again if the actor is ever restarted; the one worker thread
    /// means the lock is never contended.
    wal: Arc<Mutex<Option<WalFile>>>,
    /// The file's path, for the error once it is closed.
    path: std::path::PathBuf,
    metrics: NodeMetrics,
}

impl Actor for WalActor {
    type Context = SyncContext<Self>;
}

impl WalActor {
    /// Starts the actor on a `SyncArbiter` with one thread. Call from inside a running actix
    /// `System`.
    pub fn start(wal: WalFile, metrics: NodeMetrics) -> Addr<WalActor> {
        let path = wal.path().to_path_buf();
        let wal = Arc::new(Mutex::new(Some(wal)));
        SyncArbiter::start(1, move || WalActor {
            wal: Arc::clone(&wal),
            path: path.clone(),
            metrics: metrics.clone(),
        })
    }
}

/// Appends and times one `Persist`; shared by both WAL actors.
fn persist(
    wal: Option<&mut WalFile>,
    path: &std::path::Path,
    metrics: &NodeMetrics,
    records: &[WalRecord],
) -> Result<(), WalError> {
    if records.is_empty() {
        return Ok(());
    }
    let Some(wal) = wal else {
        return Err(WalError::Closed {
            path: path.to_path_buf(),
        });
    };
    match wal.append(records) {
        Ok(took) => {
            metrics.wal_fsync(took);
            Ok(())
        }
        Err(failure) => {
            error!(error = %failure, records = records.len(), "WAL append failed");
            Err(failure)
        }
    }
}

/// Appends, syncs and times one [`AppendLog`]; shared by both WAL actors.
fn append_log(
    wal: Option<&mut WalFile>,
    path: &std::path::Path,
    metrics: &NodeMetrics,
    entries: &[LogEntry],
) -> Result<(), WalError> {
    let Some(wal) = wal else {
        return Err(WalError::Closed {
            path: path.to_path_buf(),
        });
    };
    let started = actix::clock::Instant::now();
    let result = wal.append_entries(entries).and_then(|()| wal.sync());
    match result {
        Ok(()) => {
            metrics.wal_fsync(started.elapsed());
            metrics.log_entries_synced(entries.len());
            Ok(())
        }
        Err(failure) => {
            error!(error = %failure, entries = entries.len(), "log append failed");
            Err(failure)
        }
    }
}

impl Handler<AppendLog> for WalActor {
    type Result = Result<(), WalError>;

    fn handle(&mut self, AppendLog(entries): AppendLog, _: &mut SyncContext<Self>) -> Self::Result {
        let mut wal = self.wal.lock().unwrap_or_else(PoisonError::into_inner);
        append_log(wal.as_mut(), &self.path, &self.metrics, &entries)
    }
}

impl Handler<AppendLog> for InlineWalActor {
    type Result = Result<(), WalError>;

    fn handle(&mut self, AppendLog(entries): AppendLog, _: &mut Context<Self>) -> Self::Result {
        append_log(self.wal.as_mut(), &self.path, &self.metrics, &entries)
    }
}

/// Saves and times one [`SaveSnapshot`]; shared by both WAL actors.
fn save_snapshot(
    wal: Option<&mut WalFile>,
    path: &std::path::Path,
    metrics: &NodeMetrics,
    snapshot: Snapshot,
) -> Result<(), WalError> {
    let Some(wal) = wal else {
        return Err(WalError::Closed {
            path: path.to_path_buf(),
        });
    };
    let started = actix::clock::Instant::now();
    let index = snapshot.last.index;
    match wal.save_snapshot(snapshot) {
        Ok(()) => {
            metrics.wal_fsync(started.elapsed());
            Ok(())
        }
        Err(failure) => {
            error!(error = %failure, index, "saving a snapshot failed");
            Err(failure)
        }
    }
}

impl Handler<SaveSnapshot> for WalActor {
    type Result = Result<(), WalError>;

    fn handle(
        &mut self,
        SaveSnapshot(snapshot): SaveSnapshot,
        _: &mut SyncContext<Self>,
    ) -> Self::Result {
        let mut wal = self.wal.lock().unwrap_or_else(PoisonError::into_inner);
        save_snapshot(wal.as_mut(), &self.path, &self.metrics, snapshot)
    }
}

impl Handler<SaveSnapshot> for InlineWalActor {
    type Result = Result<(), WalError>;

    fn handle(
        &mut self,
        SaveSnapshot(snapshot): SaveSnapshot,
        _: &mut Context<Self>,
    ) -> Self::Result {
        save_snapshot(self.wal.as_mut(), &self.path, &self.metrics, snapshot)
    }
}

impl Handler<Persist> for WalActor {
    type Result = Result<(), WalError>;

    fn handle(&mut self, Persist(records): Persist, _: &mut SyncContext<Self>) -> Self::Result {
        // A poisoned lock means an earlier handler panicked mid-call; the WalFile's own
        // `failed` flag already covers a write that did not finish.
        let mut wal = self.wal.lock().unwrap_or_else(PoisonError::into_inner);
        persist(wal.as_mut(), &self.path, &self.metrics, &records)
    }
}

impl Handler<CloseWal> for WalActor {
    type Result = ();

    fn handle(&mut self, _: CloseWal, _: &mut SyncContext<Self>) {
        let mut wal = self.wal.lock().unwrap_or_else(PoisonError::into_inner);
        drop(wal.take());
    }
}

/// The WAL on the caller's own event loop, for tests with a paused clock only.
///
/// A paused tokio clock jumps to the next timer whenever its runtime has nothing to do, and
/// waiting for an answer from the WAL thread is exactly that: every fsync would let virtual
/// time leap ahead and fire election timeouts that real time would never reach. Running the
/// WAL on the same loop keeps virtual time honest in such tests. Production nodes always use
/// [`WalActor`], because file I/O must not block the event loop (WAL-4).
#[derive(Debug)]
pub struct InlineWalActor {
    wal: Option<WalFile>,
    path: std::path::PathBuf,
    metrics: NodeMetrics,
}

impl Actor for InlineWalActor {
    type Context = Context<Self>;
}

impl InlineWalActor {
    /// Starts it on the current arbiter.
    pub fn start(wal: WalFile, metrics: NodeMetrics) -> Addr<InlineWalActor> {
        InlineWalActor {
            path: wal.path().to_path_buf(),
            wal: Some(wal),
            metrics,
        }
        .start()
    }
}

impl Handler<Persist> for InlineWalActor {
    type Result = Result<(), WalError>;

    fn handle(&mut self, Persist(records): Persist, _: &mut Context<Self>) -> Self::Result {
        persist(self.wal.as_mut(), &self.path, &self.metrics, &records)
    }
}

impl Handler<CloseWal> for InlineWalActor {
    type Result = ();

    fn handle(&mut self, _: CloseWal, _: &mut Context<Self>) {
        drop(self.wal.take());
    }
}

impl Handler<History> for InlineWalActor {
    type Result = Vec<HistoryRecord>;

    fn handle(&mut self, _: History, _: &mut Context<Self>) -> Self::Result {
        self.wal
            .as_ref()
            .map_or_else(Vec::new, |wal| wal.history().to_vec())
    }
}

impl Handler<History> for WalActor {
    type Result = Vec<HistoryRecord>;

    fn handle(&mut self, _: History, _: &mut SyncContext<Self>) -> Self::Result {
        let wal = self.wal.lock().unwrap_or_else(PoisonError::into_inner);
        wal.as_ref()
            .map_or_else(Vec::new, |wal| wal.history().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use conclave_core::election::{HardState, LeaderChangeCause};
    use conclave_protocol::PeerId;

    use super::*;

    /// Shows the test thread's log when a test fails. The WAL thread logs to the global
    /// subscriber, which tests leave unset.
    fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_test_writer()
                .finish(),
        )
    }

    fn id(text: &str) -> PeerId {
        PeerId::new(text).unwrap()
    }

    fn fsyncs(metrics: &NodeMetrics) -> Option<f64> {
        metrics.value("conclave_wal_fsync_seconds_count", &[])
    }

    /// WAL-4, WAL-1, RAFT-1: the actor, on its SyncArbiter thread, makes a hard state and a
    /// history record durable before answering; a restart (a second open of the file) reads
    /// them back, and the fsync was timed into `conclave_wal_fsync_seconds`.
    #[actix_rt::test]
    async fn wal4_persisted_hard_state_reads_back_after_reopen() {
        let _log = log_to_test_output();
        let dir = tempfile::tempdir().unwrap();
        let (wal, opened) = WalFile::open(dir.path()).unwrap();
        let first_incarnation = opened.incarnation;
        let metrics = NodeMetrics::new();
        let wal_actor = WalActor::start(wal, metrics.clone());

        let state = HardState {
            term: 5,
            vote: Some(id("gw-a")),
            manual_override: None,
        };
        let change = HistoryRecord {
            term: 5,
            leader: Some(id("gw-a")),
            cause: LeaderChangeCause::VoteWon,
            at_unix_ms: 1_700_000_000_000,
        };
        let answer = wal_actor
            .send(Persist(vec![
                WalRecord::HardState(state),
                WalRecord::LeaderChange(change),
            ]))
            .await
            .unwrap();
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(wal_actor.send(History).await.unwrap(), vec![change]);
        assert_eq!(fsyncs(&metrics), Some(1.0));

        // Once it answered, the records are on disk: a reader sees them while the actor still
        // holds the file, and a restart (after the actor closed it) recovers them.
        assert_eq!(
            conclave_storage::read_records(dir.path()).unwrap()[1..],
            [WalRecord::HardState(state), WalRecord::LeaderChange(change)]
        );
        assert!(matches!(
            WalFile::open(dir.path()),
            Err(WalError::Locked { .. })
        ));
        wal_actor.send(CloseWal).await.unwrap();
        let closed = wal_actor
            .send(Persist(vec![WalRecord::Incarnation(9)]))
            .await
            .unwrap();
        assert!(matches!(closed, Err(WalError::Closed { .. })), "{closed:?}");
        let (_, recovered) = WalFile::open(dir.path()).unwrap();
        assert_eq!(recovered.hard_state, state);
        assert_eq!(recovered.history, vec![change]);
        assert!(
            recovered.incarnation > first_incarnation,
            "a new start, a new incarnation"
        );
    }

    /// WAL-4: fsync timing uses tokio's clock, which outside a runtime (the SyncArbiter
    /// thread has none) reads the OS clock; so persisting works and is measured, not frozen at
    /// zero, even while the event loop's clock is paused, as it is in actor tests. An empty
    /// `Persist` does no I/O.
    #[actix_rt::test]
    async fn wal4_persists_while_the_event_loop_clock_is_paused() {
        let _log = log_to_test_output();
        tokio::time::pause();
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = WalFile::open(dir.path()).unwrap();
        let metrics = NodeMetrics::new();
        let wal_actor = WalActor::start(wal, metrics.clone());

        for term in 1..=3 {
            let state = HardState {
                term,
                vote: None,
                manual_override: None,
            };
            let answer = wal_actor
                .send(Persist(vec![WalRecord::HardState(state)]))
                .await
                .unwrap();
            assert!(answer.is_ok(), "{answer:?}");
        }
        let answer = wal_actor.send(Persist(Vec::new())).await.unwrap();
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(fsyncs(&metrics), Some(3.0));
        // A paused clock would have measured exactly zero.
        let total = metrics.value("conclave_wal_fsync_seconds_sum", &[]);
        assert!(total.is_some_and(|seconds| seconds > 0.0), "{total:?}");
        wal_actor.send(CloseWal).await.unwrap();
        let (_, recovered) = WalFile::open(dir.path()).unwrap();
        assert_eq!(recovered.hard_state.term, 3);
    }

    /// WAL-1: a WAL that failed answers `Persist` with an error, so the sender keeps the
    /// dependent messages back; nothing is counted as an fsync.
    #[actix_rt::test]
    async fn wal1_failed_wal_answers_persist_with_an_error() {
        let _log = log_to_test_output();
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = WalFile::open(dir.path()).unwrap();
        wal.fail_for_test();
        let metrics = NodeMetrics::new();
        let wal_actor = WalActor::start(wal, metrics.clone());

        let answer = wal_actor
            .send(Persist(vec![WalRecord::Incarnation(9)]))
            .await
            .unwrap();
        assert!(matches!(answer, Err(WalError::Failed { .. })), "{answer:?}");
        assert_eq!(fsyncs(&metrics), Some(0.0));
    }

    /// LOG-3, WAL-1: log entries are durable once `AppendLog` answers (one fsync for the
    /// batch), and a WAL that failed (a full disk, an I/O error) refuses them, so the node
    /// acknowledges nothing it did not write.
    #[actix_rt::test]
    async fn log_entries_are_durable_on_answer_and_refused_by_a_failed_wal() {
        use conclave_protocol::{EntryKind, LogEntry};

        let _log = log_to_test_output();
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = WalFile::open(dir.path()).unwrap();
        let metrics = NodeMetrics::new();
        let wal_actor = WalActor::start(wal, metrics.clone());
        let entries: Vec<LogEntry> = (1..=3)
            .map(|index| LogEntry {
                index,
                term: 1,
                kind: EntryKind::Command,
                data: vec![index as u8],
            })
            .collect();
        let answer = wal_actor.send(AppendLog(entries)).await.unwrap();
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(fsyncs(&metrics), Some(1.0));
        wal_actor.send(CloseWal).await.unwrap();
        let (mut wal, recovered) = WalFile::open(dir.path()).unwrap();
        let indices: Vec<u64> = recovered.entries.iter().map(|entry| entry.index).collect();
        assert_eq!(indices, [1, 2, 3]);

        wal.fail_for_test();
        let wal_actor = WalActor::start(wal, metrics.clone());
        let more = vec![LogEntry {
            index: 4,
            term: 1,
            kind: EntryKind::Command,
            data: vec![4],
        }];
        let answer = wal_actor.send(AppendLog(more)).await.unwrap();
        assert!(matches!(answer, Err(WalError::Failed { .. })), "{answer:?}");
        wal_actor.send(CloseWal).await.unwrap();
        let (_, recovered) = WalFile::open(dir.path()).unwrap();
        assert_eq!(
            recovered.entries.len(),
            3,
            "the refused entry was not written"
        );
    }
}
