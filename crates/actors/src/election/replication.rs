//! The replicated log's shell in the ElectionActor (LOG-1..4, WAL-1, WAL-4): entries the core
//! hands out go to the WalActor, one batch per fsync; committed entries are applied to the
//! node's state machine, in order, once; a client's write waits for its entry to be applied.
//!
//! - **Group commit.** One [`AppendLog`] is in flight at a time. While its fsync runs, the core
//!   keeps appending (a leader sends the new entries to its followers at once), and the next
//!   write takes everything that piled up: one fsync for all of it. When the write is durable
//!   the core is told ([`ReplicatedLog::handle_persisted`]), and only then does a follower
//!   acknowledge or a leader count itself towards a commit. Unlike a hard state, a log write
//!   never stops the actor: timers, frames and status queries go on while the disk works.
//! - **Apply.** After every input the committed, durable entries are applied to the
//!   [`LogMachine`]; effects happen there only. An entry with no data is a read barrier (see
//!   [`ReadLinearizable`]) and changes nothing.
//! - **Snapshots (LOG-4).** After applying, when the core says a snapshot is due, the machine's
//!   bytes at the applied index go to the core (which compacts its log behind them and keeps
//!   them for followers) and to the WalActor ([`SaveSnapshot`]), which writes the snapshot
//!   file and deletes the log segments it covers. A snapshot the core received from the leader
//!   is taken before anything else: the machine is restored from it, and it is saved through
//!   the same mailbox as the log writes, so it reaches the disk before the entries that follow
//!   it; once saved, the core is told, and only then does the follower acknowledge it. A
//!   snapshot that does not decode, or cannot be saved, stops the node as a failed write does:
//!   its machine would no longer be the log's.
//! - **Clients.** [`ProposeWrite`] appends on the leader and answers when the entry at the
//!   position it was given is applied: with the machine's answer when it is the client's entry,
//!   `Lost` when another entry took that index (the leader lost its term before it committed).
//!   A node that is not the leader refuses at once, naming the leader it knows (LOG-1).
//!   [`ReadLinearizable`] appends a barrier and reads once it is applied: whatever was
//!   acknowledged before the read started is applied by then (LOG-7, by a log round rather than
//!   a read index for now). [`ReadLocal`] reads this node's copy as it is.
//! - **Failure.** A log write that fails stops the node as a failed hard-state write does: the
//!   entries it carried may not be on disk, so nothing may be acknowledged after it.

use std::collections::BTreeMap;

use actix::prelude::*;
use conclave_core::raft::{LogPosition, ProposeError};
use conclave_core::storage::Snapshot;
use conclave_protocol::{LogEntry, PeerId};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::ElectionActor;
use crate::wal::{AppendLog, SaveSnapshot};

/// Applied entries handed out per pass at most, so that a long backlog after a restart does not
/// keep the actor from its timers.
const APPLY_BATCH: usize = 256;

/// Why a machine could not make or read a snapshot (LOG-4), with its source kept.
pub type MachineError = Box<dyn std::error::Error + Send + Sync>;

/// What a node runs on its committed log entries (LOG-5).
pub trait LogMachine: Send + 'static {
    /// Applies one committed entry, in log order, once — every entry, a leader's no-op and a
    /// read barrier (an entry without data) included, so that the machine's applied index
    /// follows the log's; the answer for the client that wrote it.
    fn apply(&mut self, entry: &LogEntry) -> serde_json::Value;

    /// On the leader, now and then: a command the leader must write for the machine's own
    /// sake (the job queue's lease expiry, decided on the leader's clock and applied by all).
    fn upkeep(&self, now_unix_ms: u64) -> Option<Vec<u8>>;

    /// The machine itself, for reads of a known type.
    fn as_any(&self) -> &dyn std::any::Any;

    /// LOG-4: the whole state, as [`LogMachine::restore`] reads it back.
    fn snapshot(&self) -> Result<Vec<u8>, MachineError>;

    /// LOG-4: replaces the state with a snapshot's. One that cannot be read is an error, and
    /// the state is left as it was.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), MachineError>;

    /// The index of the last entry applied (or restored from a snapshot); 0 before any.
    fn applied_index(&self) -> u64;
}

/// A read of the state machine, run in the ElectionActor.
pub type MachineRead = Box<dyn FnOnce(&dyn LogMachine) -> serde_json::Value + Send>;

/// Why a client's write or read was not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogRefusal {
    /// This node does not lead; the leader it knows, if any (the 421 redirect).
    #[error("this node is not the leader")]
    NotLeader {
        /// The leader this node knows.
        leader: Option<PeerId>,
    },
    /// The node runs no replicated log (`log.enabled` is false, or the mode is not raft).
    #[error("this node runs no replicated log (log.enabled = false)")]
    Disabled,
    /// The leader is handing over or stopping; ask again shortly.
    #[error("the leader is handing over or stopping; retry")]
    Busy,
    /// Another entry took the write's place: its leader lost its term before it committed.
    /// Nothing was applied; the write may be retried (with its request id).
    #[error("the write was not committed: its leader lost its term; retry")]
    Lost,
    /// The write does not fit one replication frame (`log.max_append_bytes`).
    #[error("{0}")]
    TooLarge(String),
    /// The node stopped before the outcome was known: the write may or may not have been
    /// applied. Retry with the same request id.
    #[error("the node stopped before the write's outcome was known; retry with its request id")]
    Unknown,
}

/// A client's write (LOG-1): `data` is the state machine's encoded command. Answered once its
/// entry is applied.
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, LogRefusal>")]
pub struct ProposeWrite {
    /// The encoded command.
    pub data: Vec<u8>,
}

/// A linearizable read (LOG-7): carried out on the leader once every entry committed before it
/// started is applied.
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, LogRefusal>")]
pub struct ReadLinearizable(pub MachineRead);

/// A read of this node's own copy, as it is (`?stale=true`).
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, LogRefusal>")]
pub struct ReadLocal(pub MachineRead);

/// Committed entries from `from` on, at most `max` (`GET /v1/log`).
#[derive(Message)]
#[rtype(result = "Result<Vec<LogEntry>, LogRefusal>")]
pub struct ReadCommitted {
    /// The first index wanted.
    pub from: u64,
    /// How many at most.
    pub max: usize,
}

/// Someone waiting for the entry at an index.
enum Waiter {
    /// A write, answered with the machine's answer.
    Write(oneshot::Sender<Result<serde_json::Value, LogRefusal>>),
    /// A linearizable read, run once its barrier is applied.
    Read(
        MachineRead,
        oneshot::Sender<Result<serde_json::Value, LogRefusal>>,
    ),
}

/// The log's side of the ElectionActor. See the [module docs](self).
pub(super) struct LogDriver {
    machine: Box<dyn LogMachine>,
    /// An `AppendLog` is on its way to the disk.
    writing: bool,
    /// Clients waiting, by the position their entry was given.
    waiting: BTreeMap<u64, (u64, Waiter)>,
}

impl LogDriver {
    /// A driver around `machine`, which holds the state up to the core's applied index (the
    /// durable snapshot's, restored at start).
    pub(super) fn new(machine: Box<dyn LogMachine>) -> Self {
        Self {
            machine,
            writing: false,
            waiting: BTreeMap::new(),
        }
    }
}

impl ElectionActor {
    /// After an input: the next log write if none is in flight, then what may be applied.
    pub(super) fn drive_log(&mut self, ctx: &mut Context<Self>) {
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        let Some(mut log) = self.election.replicated_log() else {
            return;
        };
        // LOG-4: an installed snapshot before any write or apply that follows it.
        if let Some(snapshot) = log.take_snapshot_to_install() {
            if let Err(err) = driver.machine.restore(&snapshot.data) {
                let reason = format!(
                    "the leader's snapshot at index {} does not decode: {err}",
                    snapshot.last.index
                );
                self.halt(&reason, ctx);
                return;
            }
            debug!(
                index = snapshot.last.index,
                bytes = snapshot.data.len(),
                "state machine restored from the leader's snapshot"
            );
            self.answer_covered_waiters(snapshot.last.index);
            self.save_snapshot(snapshot, "installed", ctx);
        }
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        let Some(mut log) = self.election.replicated_log() else {
            return;
        };
        if !driver.writing {
            if let Some(write) = log.take_write() {
                driver.writing = true;
                let last = write.last();
                let request = self.outputs.wal_log.send(AppendLog(write.entries));
                // Not `ctx.wait`: the actor goes on serving while the disk works.
                ctx.spawn(request.into_actor(self).map(move |result, actor, ctx| {
                    let _span = actor.span.clone().entered();
                    match result {
                        Ok(Ok(())) => {
                            if let Some(driver) = actor.log.as_mut() {
                                driver.writing = false;
                            }
                            let now = actor.clock.now();
                            if let Some(mut log) = actor.election.replicated_log() {
                                log.handle_persisted(now, last);
                            }
                            actor.pump(ctx);
                        }
                        Ok(Err(err)) => actor.halt(&err.to_string(), ctx),
                        Err(err) => actor.halt(&format!("WAL actor unreachable: {err}"), ctx),
                    }
                }));
            }
        }
        loop {
            let Some(mut log) = self.election.replicated_log() else {
                return;
            };
            let entries = log.take_committed(APPLY_BATCH);
            let status = log.status();
            if entries.is_empty() {
                self.metrics.set_log_indices(status.commit, status.applied);
                let last = log.last().index;
                for (peer, matched) in status.followers {
                    self.metrics
                        .set_replication_lag(peer, last.saturating_sub(matched));
                }
                self.take_due_snapshot(ctx);
                return;
            }
            for entry in entries {
                self.apply_entry(&entry);
            }
        }
    }

    /// LOG-4: snapshots the machine if the core says one is due; the core compacts its log at
    /// once, the WalActor saves the file and deletes the segments behind it.
    fn take_due_snapshot(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let (Some(driver), Some(mut log)) = (self.log.as_mut(), self.election.replicated_log())
        else {
            return;
        };
        let Some(last) = log.snapshot_due() else {
            return;
        };
        if driver.machine.applied_index() != last.index {
            // The core hands out every entry it counts as applied; a machine elsewhere would
            // be a bug in this driver. The snapshot waits for the next pass.
            warn!(
                index = last.index,
                machine = driver.machine.applied_index(),
                "a snapshot is due at an index the state machine is not at; not taken"
            );
            return;
        }
        let data = match driver.machine.snapshot() {
            Ok(data) => data,
            Err(err) => {
                warn!(%err, index = last.index, "the state machine could not be snapshotted");
                return;
            }
        };
        let snapshot = Snapshot { last, data };
        if log.snapshot_taken(now, snapshot.clone()) {
            debug!(
                index = last.index,
                bytes = snapshot.data.len(),
                "snapshot taken"
            );
            self.save_snapshot(snapshot, "taken", ctx);
        }
    }

    /// Sends `snapshot` to the WalActor and tells the core once it is durable.
    fn save_snapshot(&mut self, snapshot: Snapshot, origin: &'static str, ctx: &mut Context<Self>) {
        let last = snapshot.last;
        let bytes = snapshot.data.len();
        let request = self.outputs.wal_snapshot.send(SaveSnapshot(snapshot));
        ctx.spawn(request.into_actor(self).map(move |result, actor, ctx| {
            let _span = actor.span.clone().entered();
            match result {
                Ok(Ok(())) => {
                    actor.metrics.snapshot_saved(origin, bytes);
                    let now = actor.clock.now();
                    if let Some(mut log) = actor.election.replicated_log() {
                        log.handle_snapshot_persisted(now, last);
                    }
                    actor.pump(ctx);
                }
                Ok(Err(err)) => actor.halt(&format!("saving a snapshot failed: {err}"), ctx),
                Err(err) => actor.halt(&format!("WAL actor unreachable: {err}"), ctx),
            }
        }));
    }

    /// Clients waiting for an entry a leader's snapshot now covers: this node never saw it
    /// applied, so the outcome is unknown here.
    fn answer_covered_waiters(&mut self, covered: u64) {
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        while let Some((&index, _)) = driver.waiting.first_key_value() {
            if index > covered {
                break;
            }
            if let Some((_, (_, waiter))) = driver.waiting.pop_first() {
                answer_waiter_now(waiter, LogRefusal::Unknown);
            }
        }
    }

    /// Applies one committed entry and answers whoever waited for its index.
    fn apply_entry(&mut self, entry: &LogEntry) {
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        let answer = driver.machine.apply(entry);
        // Anyone waiting for an earlier index missed it: its entry was replaced and a shorter
        // log committed past it.
        while let Some((&index, _)) = driver.waiting.first_key_value() {
            if index >= entry.index {
                break;
            }
            if let Some((_, (_, waiter))) = driver.waiting.pop_first() {
                answer_waiter(waiter, Err(LogRefusal::Lost), &*driver.machine);
                self.metrics.proposal("lost");
            }
        }
        let Some((term, waiter)) = driver.waiting.remove(&entry.index) else {
            return;
        };
        if term != entry.term {
            debug!(index = entry.index, term, "a client's entry was replaced");
            self.metrics.proposal("lost");
            answer_waiter(waiter, Err(LogRefusal::Lost), &*driver.machine);
            return;
        }
        self.metrics.proposal("committed");
        answer_waiter(waiter, Ok(answer), &*driver.machine);
    }

    /// Appends `data` on the leader and registers who waits for it.
    fn propose(&mut self, data: Vec<u8>, waiter: Waiter) {
        let now = self.clock.now();
        let leader = self.election.leader();
        let Some(mut log) = self.election.replicated_log() else {
            answer_waiter_now(waiter, LogRefusal::Disabled);
            return;
        };
        match log.propose(now, data) {
            Ok(LogPosition { term, index }) => {
                if let Some(driver) = self.log.as_mut() {
                    driver.waiting.insert(index, (term, waiter));
                }
            }
            Err(ProposeError::NotLeader { leader: known }) => {
                self.metrics.proposal("not_leader");
                answer_waiter_now(
                    waiter,
                    LogRefusal::NotLeader {
                        leader: known.or(leader),
                    },
                );
            }
            Err(too_large @ ProposeError::TooLarge { .. }) => {
                self.metrics.proposal("too_large");
                answer_waiter_now(waiter, LogRefusal::TooLarge(too_large.to_string()));
            }
            Err(ProposeError::Transferring | ProposeError::ShuttingDown) => {
                self.metrics.proposal("busy");
                answer_waiter_now(waiter, LogRefusal::Busy);
            }
        }
    }

    /// On the leader, every second: what the machine needs written (lease expiry, LOG-5).
    pub(super) fn log_upkeep(&mut self, ctx: &mut Context<Self>) {
        if !self.election.is_leader() {
            return;
        }
        let now_unix_ms = crate::events::unix_millis(std::time::SystemTime::now());
        let Some(data) = self
            .log
            .as_ref()
            .and_then(|driver| driver.machine.upkeep(now_unix_ms))
        else {
            return;
        };
        let now = self.clock.now();
        if let Some(mut log) = self.election.replicated_log() {
            // Refused while handing over: the next leader's upkeep writes it.
            let _ = log.propose(now, data);
        }
        self.pump(ctx);
    }

    /// The node halts or stops: whoever still waits cannot be told the outcome.
    pub(super) fn abandon_waiters(&mut self) {
        if let Some(driver) = self.log.as_mut() {
            for (_, (_, waiter)) in std::mem::take(&mut driver.waiting) {
                answer_waiter_now(waiter, LogRefusal::Unknown);
            }
        }
    }
}

/// Answers a waiter with `result`, running a read against the machine first.
fn answer_waiter(
    waiter: Waiter,
    result: Result<serde_json::Value, LogRefusal>,
    machine: &dyn LogMachine,
) {
    match waiter {
        Waiter::Write(reply) => {
            let _ = reply.send(result);
        }
        Waiter::Read(read, reply) => {
            let _ = reply.send(result.map(|_| read(machine)));
        }
    }
}

/// Refuses a waiter without touching the machine.
fn answer_waiter_now(waiter: Waiter, refusal: LogRefusal) {
    match waiter {
        Waiter::Write(reply) | Waiter::Read(_, reply) => {
            let _ = reply.send(Err(refusal));
        }
    }
}

impl Handler<ProposeWrite> for ElectionActor {
    type Result = ResponseFuture<Result<serde_json::Value, LogRefusal>>;

    fn handle(&mut self, write: ProposeWrite, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (reply, answer) = oneshot::channel();
        if write.data.is_empty() {
            // An empty entry is a read barrier; a write always carries a command.
            let _ = reply.send(Err(LogRefusal::Busy));
        } else {
            self.propose(write.data, Waiter::Write(reply));
            self.pump(ctx);
        }
        Box::pin(async move { answer.await.unwrap_or(Err(LogRefusal::Unknown)) })
    }
}

impl Handler<ReadLinearizable> for ElectionActor {
    type Result = ResponseFuture<Result<serde_json::Value, LogRefusal>>;

    fn handle(&mut self, read: ReadLinearizable, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (reply, answer) = oneshot::channel();
        self.propose(Vec::new(), Waiter::Read(read.0, reply));
        self.pump(ctx);
        Box::pin(async move { answer.await.unwrap_or(Err(LogRefusal::Unknown)) })
    }
}

impl Handler<ReadCommitted> for ElectionActor {
    type Result = Result<Vec<LogEntry>, LogRefusal>;

    fn handle(&mut self, read: ReadCommitted, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        match self.election.replicated_log() {
            Some(log) => Ok(log.committed_from(read.from, read.max)),
            None => Err(LogRefusal::Disabled),
        }
    }
}

impl Handler<ReadLocal> for ElectionActor {
    type Result = Result<serde_json::Value, LogRefusal>;

    fn handle(&mut self, read: ReadLocal, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        match self.log.as_ref() {
            Some(driver) => Ok((read.0)(&*driver.machine)),
            None => Err(LogRefusal::Disabled),
        }
    }
}
