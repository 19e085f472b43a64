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
//!   [`ClusterMachine`]; effects happen there only. An entry with no data (a read barrier, written
//!   by earlier versions for linearizable reads and still found in their logs) changes nothing.
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
//!   [`ReadLinearizable`] goes by the core's read index (LOG-7): the read is registered with
//!   the core, which gives its read index once a heartbeat round confirmed this node still
//!   leads; it is served when the machine has applied that index, so whatever was acknowledged
//!   before the read started is in what it reads, and nothing is written to the log for it. A
//!   read still waiting when the node steps down is refused with the redirect, as a refused
//!   write is. [`ReadLocal`] reads this node's copy as it is.
//! - **Failure.** A log write that fails stops the node as a failed hard-state write does: the
//!   entries it carried may not be on disk, so nothing may be acknowledged after it.

use std::collections::BTreeMap;

use actix::prelude::*;
use conclave_core::raft::{LogPosition, ProposeError, ReadError, ReadId};
use conclave_core::storage::Snapshot;
use conclave_protocol::{LogEntry, PeerId};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::ElectionActor;
use crate::machine::{ClusterMachine, MachineRead, WriteOutcome};
use crate::wal::{AppendLog, SaveSnapshot};

/// Applied entries handed out per pass at most, so that a long backlog after a restart does not
/// keep the actor from its timers.
const APPLY_BATCH: usize = 256;

/// What the ElectionActor answers a client's write or read with: the outcome, and the
/// fencing token (CB-5) as the node knew it when it answered.
#[derive(Debug)]
pub struct Fenced<T> {
    /// The outcome.
    pub outcome: Result<T, LogRefusal>,
    /// The node's term then.
    pub term: u64,
    /// The leader it knew then.
    pub leader: Option<PeerId>,
}

impl<T> Fenced<T> {
    /// The same fencing token with another outcome.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fenced<U> {
        Fenced {
            outcome: self.outcome.map(f),
            term: self.term,
            leader: self.leader,
        }
    }
}

/// Committed entries and the commit index they were read at (`GET /v1/log`).
#[derive(Debug)]
pub struct CommittedEntries {
    /// The entries, in order.
    pub entries: Vec<LogEntry>,
    /// The highest index this node knows committed.
    pub commit: u64,
}

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
#[rtype(result = "Fenced<WriteOutcome>")]
pub struct ProposeWrite {
    /// The encoded command.
    pub data: Vec<u8>,
}

/// A linearizable read (LOG-7): carried out on the leader at the read index a heartbeat round
/// confirmed, once the machine has applied it.
#[derive(Message)]
#[rtype(result = "Fenced<()>")]
pub struct ReadLinearizable(pub MachineRead);

/// A read of this node's own copy, as it is (`?stale=true`).
#[derive(Message)]
#[rtype(result = "Fenced<()>")]
pub struct ReadLocal(pub MachineRead);

/// Committed entries from `from` on, at most `max` (`GET /v1/log`).
#[derive(Message)]
#[rtype(result = "Fenced<CommittedEntries>")]
pub struct ReadCommitted {
    /// The first index wanted.
    pub from: u64,
    /// How many at most.
    pub max: usize,
}

/// A client's write waiting for the entry at an index, answered with the machine's answer.
struct Waiter(oneshot::Sender<Fenced<WriteOutcome>>);

/// A linearizable read waiting for its read index, or for the machine to apply it.
struct PendingRead {
    read: MachineRead,
    reply: oneshot::Sender<Fenced<()>>,
}

/// The log's side of the ElectionActor. See the [module docs](self).
pub(super) struct LogDriver {
    machine: ClusterMachine,
    /// An `AppendLog` is on its way to the disk.
    writing: bool,
    /// Clients waiting, by the position their entry was given.
    waiting: BTreeMap<u64, (u64, Waiter)>,
    /// The id of the last read registered with the core.
    last_read: u64,
    /// LOG-7: reads the core took and has not answered yet.
    reads: BTreeMap<ReadId, PendingRead>,
    /// LOG-7: reads whose read index is known, by that index, until the machine applies it.
    reads_ready: BTreeMap<u64, Vec<PendingRead>>,
}

impl LogDriver {
    /// A driver around `machine`, which holds the state up to the core's applied index (the
    /// durable snapshot's, restored at start).
    pub(super) fn new(machine: ClusterMachine) -> Self {
        Self {
            machine,
            writing: false,
            waiting: BTreeMap::new(),
            last_read: 0,
            reads: BTreeMap::new(),
            reads_ready: BTreeMap::new(),
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
                self.serve_reads();
                self.take_due_snapshot(ctx);
                return;
            }
            for entry in entries {
                self.apply_entry(&entry);
            }
        }
    }

    /// LOG-7: takes the core's read outcomes, and serves every read whose read index the
    /// machine has applied.
    fn serve_reads(&mut self) {
        let fence = self.fence();
        let (Some(driver), Some(mut log)) = (self.log.as_mut(), self.election.replicated_log())
        else {
            return;
        };
        for (id, outcome) in log.take_read_results() {
            let Some(pending) = driver.reads.remove(&id) else {
                continue;
            };
            match outcome {
                Ok(index) => driver.reads_ready.entry(index).or_default().push(pending),
                Err(err) => {
                    let (result, refusal) = read_refusal(err, None);
                    self.metrics.read(result);
                    let _ = pending.reply.send(fence.wrap(Err(refusal)));
                }
            }
        }
        let applied = driver.machine.applied_index();
        while let Some(entry) = driver.reads_ready.first_entry() {
            if *entry.key() > applied {
                break;
            }
            for pending in entry.remove() {
                self.metrics.read("served");
                (pending.read)(driver.machine.state());
                let _ = pending.reply.send(fence.wrap(Ok(())));
            }
        }
    }

    /// LOG-7: registers a linearizable read with the core; it is answered from
    /// [`ElectionActor::serve_reads`].
    fn request_read(&mut self, read: MachineRead, reply: oneshot::Sender<Fenced<()>>) {
        let now = self.clock.now();
        let fence = self.fence();
        let leader = fence.leader;
        let (Some(driver), Some(mut log)) = (self.log.as_mut(), self.election.replicated_log())
        else {
            let _ = reply.send(fence.wrap(Err(LogRefusal::Disabled)));
            return;
        };
        driver.last_read += 1;
        let id = ReadId(driver.last_read);
        match log.request_read(now, id) {
            Ok(()) => {
                driver.reads.insert(id, PendingRead { read, reply });
            }
            Err(err) => {
                let (result, refusal) = read_refusal(err, leader);
                self.metrics.read(result);
                let _ = reply.send(fence.wrap(Err(refusal)));
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
        let fence = self.fence();
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        while let Some((&index, _)) = driver.waiting.first_key_value() {
            if index > covered {
                break;
            }
            if let Some((_, (_, Waiter(reply)))) = driver.waiting.pop_first() {
                let _ = reply.send(fence.wrap(Err(LogRefusal::Unknown)));
            }
        }
    }

    /// Applies one committed entry and answers whoever waited for its index.
    fn apply_entry(&mut self, entry: &LogEntry) {
        let fence = self.fence();
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
            if let Some((_, (_, Waiter(reply)))) = driver.waiting.pop_first() {
                let _ = reply.send(fence.wrap(Err(LogRefusal::Lost)));
                self.metrics.proposal("lost");
            }
        }
        let Some((term, Waiter(reply))) = driver.waiting.remove(&entry.index) else {
            return;
        };
        if term != entry.term {
            debug!(index = entry.index, term, "a client's entry was replaced");
            self.metrics.proposal("lost");
            let _ = reply.send(fence.wrap(Err(LogRefusal::Lost)));
            return;
        }
        self.metrics.proposal("committed");
        let _ = reply.send(fence.wrap(Ok(answer)));
    }

    /// Appends `data` on the leader and registers who waits for it.
    fn propose(&mut self, data: Vec<u8>, waiter: Waiter) {
        let now = self.clock.now();
        let fence = self.fence();
        let leader = fence.leader;
        let Some(mut log) = self.election.replicated_log() else {
            let _ = waiter.0.send(fence.wrap(Err(LogRefusal::Disabled)));
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
                let _ = waiter.0.send(fence.wrap(Err(LogRefusal::NotLeader {
                    leader: known.or(leader),
                })));
            }
            Err(too_large @ ProposeError::TooLarge { .. }) => {
                self.metrics.proposal("too_large");
                let _ = waiter
                    .0
                    .send(fence.wrap(Err(LogRefusal::TooLarge(too_large.to_string()))));
            }
            Err(ProposeError::Transferring | ProposeError::ShuttingDown) => {
                self.metrics.proposal("busy");
                let _ = waiter.0.send(fence.wrap(Err(LogRefusal::Busy)));
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

    /// The node halts or stops: whoever still waits cannot be told the outcome. A read
    /// changed nothing, so it is only to be asked again (of the next leader).
    pub(super) fn abandon_waiters(&mut self) {
        let fence = self.fence();
        if let Some(driver) = self.log.as_mut() {
            for (_, (_, Waiter(reply))) in std::mem::take(&mut driver.waiting) {
                let _ = reply.send(fence.wrap(Err(LogRefusal::Unknown)));
            }
            let ready = std::mem::take(&mut driver.reads_ready)
                .into_values()
                .flatten();
            for pending in std::mem::take(&mut driver.reads).into_values().chain(ready) {
                let _ = pending.reply.send(fence.wrap(Err(LogRefusal::Busy)));
            }
        }
    }

    /// The fencing token now, for the answers about to be sent.
    fn fence(&self) -> Fence {
        Fence {
            term: self.election.term(),
            leader: self.election.leader(),
        }
    }
}

/// The fencing token `(term, leader)` an answer carries.
#[derive(Debug, Clone, Copy)]
struct Fence {
    term: u64,
    leader: Option<PeerId>,
}

impl Fence {
    fn wrap<T>(self, outcome: Result<T, LogRefusal>) -> Fenced<T> {
        Fenced {
            outcome,
            term: self.term,
            leader: self.leader,
        }
    }
}

/// What a read the core refused or failed is answered with: the metric's `result` label and
/// the client's refusal. `leader` is the leader the node knows, when the core names none.
fn read_refusal(err: ReadError, leader: Option<PeerId>) -> (&'static str, LogRefusal) {
    match err {
        ReadError::NotLeader { leader: known } => (
            "not_leader",
            LogRefusal::NotLeader {
                leader: known.or(leader),
            },
        ),
        ReadError::ShuttingDown | ReadError::TooMany { .. } => ("busy", LogRefusal::Busy),
    }
}

impl Handler<ProposeWrite> for ElectionActor {
    type Result = ResponseFuture<Fenced<WriteOutcome>>;

    fn handle(&mut self, write: ProposeWrite, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (reply, answer) = oneshot::channel();
        let fence = self.fence();
        if write.data.is_empty() {
            // A write always carries a command; an empty entry would read as an old read
            // barrier in `/v1/log`.
            let _ = reply.send(fence.wrap(Err(LogRefusal::Busy)));
        } else {
            self.propose(write.data, Waiter(reply));
            self.pump(ctx);
        }
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| fence.wrap(Err(LogRefusal::Unknown)))
        })
    }
}

impl Handler<ReadLinearizable> for ElectionActor {
    type Result = ResponseFuture<Fenced<()>>;

    fn handle(&mut self, read: ReadLinearizable, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (reply, answer) = oneshot::channel();
        let fence = self.fence();
        self.request_read(read.0, reply);
        self.pump(ctx);
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| fence.wrap(Err(LogRefusal::Unknown)))
        })
    }
}

impl Handler<ReadCommitted> for ElectionActor {
    type Result = MessageResult<ReadCommitted>;

    fn handle(&mut self, read: ReadCommitted, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let fence = self.fence();
        MessageResult(fence.wrap(match self.election.replicated_log() {
            Some(log) => Ok(CommittedEntries {
                entries: log.committed_from(read.from, read.max),
                commit: log.status().commit,
            }),
            None => Err(LogRefusal::Disabled),
        }))
    }
}

impl Handler<ReadLocal> for ElectionActor {
    type Result = MessageResult<ReadLocal>;

    fn handle(&mut self, read: ReadLocal, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let fence = self.fence();
        MessageResult(fence.wrap(match self.log.as_ref() {
            Some(driver) => {
                (read.0)(driver.machine.state());
                Ok(())
            }
            None => Err(LogRefusal::Disabled),
        }))
    }
}
