//! The WAL actor: the node's storage (its [`WalFile`]) on a `SyncArbiter` thread of its own,
//! so that writes and fsyncs never block an event loop (WAL-4), with every fsync timed into
//! `conclave_wal_fsync_seconds` (docs/design.md §8).
//!
//! The arbiter has exactly one thread: the WAL has one writer, and messages are handled one at
//! a time in the order they were sent, so a sender's `Persist`s reach the disk in its order.
//! [`AppendLog`] writes the replicated log's entries the same way, one fsync per batch, and
//! [`SaveSnapshot`] its snapshots (LOG-4, WAL-3).
//!
//! One actor, two places to run it. Actix fixes an actor's context type per type, and the WAL
//! needs two: a `SyncContext` on its own thread for every node, and a `Context` on the caller's
//! event loop for tests with a paused clock (see [`EventLoop`] for why). So [`WalActor`] takes
//! where it runs as a type parameter, [`OwnThread`] or [`EventLoop`], each with a one-line
//! `Actor` impl, and each handler is written once for both, generic over that parameter. The
//! handlers only pass their message to a [`WalWriter`], which holds the write logic and reaches
//! the disk through the [`WalStorage`] trait (raft's `Storage` and the WAL's own records), not
//! through the file's type: [`AppendLog`] and [`SaveSnapshot`] are raft's `Storage` calls, and
//! a [`Persist`] batch is [`WalStorage::append_records`], one write and one fsync, because the
//! order of the records inside it carries meaning that separate `save_hard_state` calls would
//! lose. Two actor types with a copy of every handler each would let the path tests exercise
//! drift from the one nodes run; a macro generating both would hide the handlers from a reader.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actix::{Actor, Addr, Context, Handler, Message, SyncArbiter, SyncContext};
use conclave_core::storage::Snapshot;
use conclave_protocol::LogEntry;
use conclave_storage::{HistoryRecord, WalError, WalFile, WalRecord};

use super::storage::WalStorage;
use super::writer::WalWriter;
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

/// Runs a [`WalActor`] on a `SyncArbiter` thread of its own: what every node does, because
/// file I/O must not block the event loop (WAL-4).
#[derive(Debug)]
pub enum OwnThread {}

/// Runs a [`WalActor`] on the caller's own event loop, for tests with a paused clock only.
///
/// A paused tokio clock jumps to the next timer whenever its runtime has nothing to do, and
/// waiting for an answer from the WAL thread is exactly that: every fsync would let virtual
/// time leap ahead and fire election timeouts that real time would never reach. Running the
/// WAL on the same loop keeps virtual time honest in such tests. Production nodes always use
/// [`OwnThread`].
#[derive(Debug)]
pub enum EventLoop {}

/// Owns the node's storage `S` (WAL-4) and answers [`Persist`], [`AppendLog`],
/// [`SaveSnapshot`], [`CloseWal`] and [`History`]; `P` says where it runs, [`OwnThread`] or
/// [`EventLoop`].
#[derive(Debug)]
pub struct WalActor<P, S = WalFile> {
    /// Shared rather than owned because a `SyncArbiter` builds its actor with an `Fn`
    /// factory, which it calls again if the actor is ever restarted; one thread handles the
    /// messages wherever the actor runs, so the lock is never contended.
    writer: Arc<Mutex<WalWriter<S>>>,
    placement: PhantomData<P>,
}

impl<S: WalStorage> Actor for WalActor<OwnThread, S> {
    type Context = SyncContext<Self>;
}

impl<S: WalStorage> Actor for WalActor<EventLoop, S> {
    type Context = Context<Self>;
}

impl<P, S> WalActor<P, S> {
    fn new(writer: Arc<Mutex<WalWriter<S>>>) -> Self {
        Self {
            writer,
            placement: PhantomData,
        }
    }

    fn writer(&self) -> MutexGuard<'_, WalWriter<S>> {
        // A poisoned lock means an earlier handler panicked mid-call; the storage refuses
        // writes after one that did not finish (the `WalStorage` contract).
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S: WalStorage> WalActor<OwnThread, S> {
    /// Starts the actor on a `SyncArbiter` with one thread. Call from inside a running actix
    /// `System`.
    pub fn start_on_thread(storage: S, metrics: NodeMetrics) -> Addr<Self> {
        let writer = Arc::new(Mutex::new(WalWriter::new(storage, metrics)));
        SyncArbiter::start(1, move || Self::new(Arc::clone(&writer)))
    }
}

impl<S: WalStorage> WalActor<EventLoop, S> {
    /// Starts the actor on the current arbiter: for tests with a paused clock only (see
    /// [`EventLoop`]).
    pub fn start_on_event_loop(storage: S, metrics: NodeMetrics) -> Addr<Self> {
        let writer = Arc::new(Mutex::new(WalWriter::new(storage, metrics)));
        Actor::start(Self::new(writer))
    }
}

impl<P, S: WalStorage> Handler<Persist> for WalActor<P, S>
where
    Self: Actor,
{
    type Result = Result<(), WalError>;

    fn handle(&mut self, Persist(records): Persist, _: &mut Self::Context) -> Self::Result {
        self.writer().persist(&records)
    }
}

impl<P, S: WalStorage> Handler<AppendLog> for WalActor<P, S>
where
    Self: Actor,
{
    type Result = Result<(), WalError>;

    fn handle(&mut self, AppendLog(entries): AppendLog, _: &mut Self::Context) -> Self::Result {
        self.writer().append_log(&entries)
    }
}

impl<P, S: WalStorage> Handler<SaveSnapshot> for WalActor<P, S>
where
    Self: Actor,
{
    type Result = Result<(), WalError>;

    fn handle(
        &mut self,
        SaveSnapshot(snapshot): SaveSnapshot,
        _: &mut Self::Context,
    ) -> Self::Result {
        self.writer().save_snapshot(snapshot)
    }
}

impl<P, S: WalStorage> Handler<CloseWal> for WalActor<P, S>
where
    Self: Actor,
{
    type Result = ();

    fn handle(&mut self, _: CloseWal, _: &mut Self::Context) {
        self.writer().close();
    }
}

impl<P, S: WalStorage> Handler<History> for WalActor<P, S>
where
    Self: Actor,
{
    type Result = Vec<HistoryRecord>;

    fn handle(&mut self, _: History, _: &mut Self::Context) -> Self::Result {
        self.writer().history()
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use actix::Recipient;
    use actix::dev::ToEnvelope;
    use conclave_core::election::{HardState, LeaderChangeCause};
    use conclave_core::raft::LogPosition;
    use conclave_core::storage::{DurableState, Storage};
    use conclave_protocol::{EntryKind, PeerId};

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
        let wal_actor = WalActor::start_on_thread(wal, metrics.clone());

        let state = HardState {
            term: 5,
            vote: Some(PeerId::from_static("gw-a")),
            manual_override: None,
        };
        let change = HistoryRecord {
            term: 5,
            leader: Some(PeerId::from_static("gw-a")),
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
        let wal_actor = WalActor::start_on_thread(wal, metrics.clone());

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
        let wal_actor = WalActor::start_on_thread(wal, metrics.clone());

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
        let wal_actor = WalActor::start_on_thread(wal, metrics.clone());
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
        let wal_actor = WalActor::start_on_thread(wal, metrics.clone());
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

    /// A WAL file on a disk that can be made to fail: the first write after `broken` is set
    /// fails with an I/O error, as on a full disk, and leaves the file failed, as a real
    /// failure does, so every later write is refused by the file itself.
    #[derive(Debug)]
    struct FlakyDisk {
        file: WalFile,
        broken: Arc<AtomicBool>,
    }

    impl FlakyDisk {
        fn write_fails(&mut self) -> Result<(), WalError> {
            if self.broken.swap(false, Ordering::SeqCst) {
                self.file.fail_for_test();
                return Err(WalError::Io {
                    path: self.file.path().to_path_buf(),
                    source: io::Error::other("no space left on device"),
                });
            }
            Ok(())
        }
    }

    impl Storage for FlakyDisk {
        type Error = WalError;

        fn save_hard_state(&mut self, hard: HardState) -> Result<(), WalError> {
            self.write_fails()?;
            self.file.save_hard_state(hard)
        }

        fn append_entries(&mut self, entries: &[LogEntry]) -> Result<(), WalError> {
            self.write_fails()?;
            self.file.append_entries(entries)
        }

        fn sync(&mut self) -> Result<(), WalError> {
            self.write_fails()?;
            self.file.sync()
        }

        fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), WalError> {
            self.write_fails()?;
            self.file.save_snapshot(snapshot)
        }

        fn durable_state(&self) -> Result<DurableState, WalError> {
            self.file.durable_state()
        }
    }

    impl WalStorage for FlakyDisk {
        fn append_records(&mut self, records: &[WalRecord]) -> Result<Duration, WalError> {
            self.write_fails()?;
            self.file.append(records)
        }

        fn history(&self) -> &[HistoryRecord] {
            self.file.history()
        }

        fn path(&self) -> &Path {
            self.file.path()
        }
    }

    /// The messages a node sends its WAL, addressed to one actor wherever it runs.
    struct WalMailbox {
        persist: Recipient<Persist>,
        append_log: Recipient<AppendLog>,
        save_snapshot: Recipient<SaveSnapshot>,
        close: Recipient<CloseWal>,
        history: Recipient<History>,
    }

    impl WalMailbox {
        fn of<A>(actor: Addr<A>) -> Self
        where
            A: Handler<Persist>
                + Handler<AppendLog>
                + Handler<SaveSnapshot>
                + Handler<CloseWal>
                + Handler<History>,
            A::Context: ToEnvelope<A, Persist>
                + ToEnvelope<A, AppendLog>
                + ToEnvelope<A, SaveSnapshot>
                + ToEnvelope<A, CloseWal>
                + ToEnvelope<A, History>,
        {
            Self {
                persist: actor.clone().recipient(),
                append_log: actor.clone().recipient(),
                save_snapshot: actor.clone().recipient(),
                close: actor.clone().recipient(),
                history: actor.recipient(),
            }
        }
    }

    /// What one run of [`write_fail_close`] saw: the answers in order, the history asked for
    /// before and after the close, the fsyncs timed, and what a restart recovers.
    #[derive(Debug, PartialEq)]
    struct Transcript {
        answers: Vec<&'static str>,
        history_open: Vec<HistoryRecord>,
        history_closed: Vec<HistoryRecord>,
        fsyncs: Option<f64>,
        recovered_hard_state: HardState,
        recovered_entries: Vec<u64>,
        recovered_history: Vec<HistoryRecord>,
    }

    fn answer(result: Result<(), WalError>) -> &'static str {
        match result {
            Ok(()) => "ok",
            Err(WalError::Io { .. }) => "io error",
            Err(WalError::Failed { .. }) => "failed",
            Err(WalError::Closed { .. }) => "closed",
            Err(_) => "other error",
        }
    }

    fn entries(indices: std::ops::RangeInclusive<u64>) -> Vec<LogEntry> {
        indices
            .map(|index| LogEntry {
                index,
                term: 1,
                kind: EntryKind::Command,
                data: vec![index as u8],
            })
            .collect()
    }

    const LEADER_CHANGE: HistoryRecord = HistoryRecord {
        term: 1,
        leader: None,
        cause: LeaderChangeCause::VoteWon,
        at_unix_ms: 1_700_000_000_000,
    };

    fn hard_state(term: u64) -> HardState {
        HardState {
            term,
            vote: None,
            manual_override: None,
        }
    }

    /// Writes, breaks the disk, writes again, closes and restarts, through an actor that
    /// `start` places.
    async fn write_fail_close(
        start: impl FnOnce(FlakyDisk, NodeMetrics) -> WalMailbox,
    ) -> Transcript {
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = WalFile::open(dir.path()).unwrap();
        let broken = Arc::new(AtomicBool::new(false));
        let metrics = NodeMetrics::new();
        let wal = start(
            FlakyDisk {
                file,
                broken: Arc::clone(&broken),
            },
            metrics.clone(),
        );
        let persist = |records| wal.persist.send(Persist(records));
        let mut answers = vec![
            answer(
                persist(vec![
                    WalRecord::HardState(hard_state(1)),
                    WalRecord::LeaderChange(LEADER_CHANGE),
                ])
                .await
                .unwrap(),
            ),
            answer(
                wal.append_log
                    .send(AppendLog(entries(1..=2)))
                    .await
                    .unwrap(),
            ),
        ];
        broken.store(true, Ordering::SeqCst);
        answers.push(answer(
            wal.append_log
                .send(AppendLog(entries(3..=3)))
                .await
                .unwrap(),
        ));
        answers.push(answer(
            persist(vec![WalRecord::HardState(hard_state(2))])
                .await
                .unwrap(),
        ));
        let snapshot = Snapshot {
            last: LogPosition::new(1, 2),
            data: vec![7].into(),
            config: None,
        };
        answers.push(answer(
            wal.save_snapshot
                .send(SaveSnapshot(snapshot))
                .await
                .unwrap(),
        ));
        let history_open = wal.history.send(History).await.unwrap();
        wal.close.send(CloseWal).await.unwrap();
        answers.push(answer(
            persist(vec![WalRecord::Incarnation(9)]).await.unwrap(),
        ));
        answers.push(answer(persist(Vec::new()).await.unwrap()));
        let history_closed = wal.history.send(History).await.unwrap();
        let (_, recovered) = WalFile::open(dir.path()).unwrap();
        Transcript {
            answers,
            history_open,
            history_closed,
            fsyncs: fsyncs(&metrics),
            recovered_hard_state: recovered.hard_state,
            recovered_entries: recovered.entries.iter().map(|entry| entry.index).collect(),
            recovered_history: recovered.history,
        }
    }

    /// WAL-4, WAL-1, LOG-3: the one WAL actor behaves the same on its own thread (every node)
    /// and on the event loop (paused-clock tests): writes are durable and timed, the first
    /// failed write is an I/O error and every write after it is refused, and once closed it
    /// refuses writes, answers an empty history and has released the file for a restart,
    /// which recovers exactly what was answered `Ok`.
    #[actix_rt::test]
    async fn wal4_one_actor_writes_fails_and_closes_alike_on_both_placements() {
        let _log = log_to_test_output();
        tokio::time::pause();
        let expected = Transcript {
            answers: vec![
                "ok", "ok", // a hard state with a leader change, then two entries
                "io error", "failed", "failed", // the disk breaks; nothing is written after
                "closed", "ok", // closed; an empty batch asks for nothing
            ],
            history_open: vec![LEADER_CHANGE],
            history_closed: Vec::new(),
            fsyncs: Some(2.0),
            recovered_hard_state: hard_state(1),
            recovered_entries: vec![1, 2],
            recovered_history: vec![LEADER_CHANGE],
        };

        let on_thread = write_fail_close(|disk, metrics| {
            WalMailbox::of(WalActor::start_on_thread(disk, metrics))
        })
        .await;
        assert_eq!(on_thread, expected, "on its own thread");
        let on_event_loop = write_fail_close(|disk, metrics| {
            WalMailbox::of(WalActor::start_on_event_loop(disk, metrics))
        })
        .await;
        assert_eq!(on_event_loop, expected, "on the event loop");
    }
}
