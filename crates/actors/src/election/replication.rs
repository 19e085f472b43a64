//! The replicated log's shell in the ElectionActor (LOG-1..4, WAL-1, WAL-4): entries the core's
//! driver hands out go to the WalActor, one batch per fsync; committed entries are applied to
//! the node's state machine, in order, once; a client's write waits for its entry to be
//! applied.
//!
//! - **Group commit.** One `AppendLog` is in flight at a time (the core hands out the next
//!   one only once this one is reported). While its fsync runs, the core keeps appending (a
//!   leader sends the new entries to its followers at once), and the next write takes
//!   everything that piled up: one fsync for all of it. When the write is durable the driver
//!   is told, and only then does a follower acknowledge or a leader count itself towards a
//!   commit. A log write never stops the actor: timers, frames and status queries go on while
//!   the disk works.
//! - **Apply.** After every input the committed, durable entries are applied to the
//!   [`ClusterMachine`]; effects happen there only. An entry with no data (a read barrier, written
//!   by earlier versions for linearizable reads and still found in their logs) changes nothing.
//! - **Snapshots (LOG-4).** After applying, when the core says a snapshot is due, the machine's
//!   bytes at the applied index go to the core (which compacts its log behind them and keeps
//!   them for followers) and to the WalActor (`SaveSnapshot`), which writes the snapshot
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
use conclave_core::raft::{LogPosition, MembershipError, ProposeError, ReadError, ReadId};
use conclave_core::storage::Snapshot;
use conclave_protocol::{LogEntry, PeerId};
use conclave_statemachine::{LeaseClock, StoreDemand, StoreFull, StoreUse};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::ElectionActor;
use crate::machine::{ClusterMachine, MachineRead, WriteOutcome};

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
    /// The write is larger than a log entry may carry.
    #[error("{0}")]
    TooLarge(String),
    /// STORE-1, STORE-2: the write would take the store past `log.max_store_bytes` or the
    /// job queue past `log.max_jobs`; the leader did not append it.
    #[error("{0}")]
    StoreFull(String),
    /// The node stopped before the outcome was known: the write may or may not have been
    /// applied. Retry with the same request id.
    #[error("the node stopped before the write's outcome was known; retry with its request id")]
    Unknown,
    /// MEMB-1..3: the leader refused a membership change (one at a time, a learner not caught
    /// up, the last voter, ...).
    #[error(transparent)]
    Membership(MembershipError),
}

/// A client's write (LOG-1): `data` is the state machine's encoded command. Answered once its
/// entry is applied.
#[derive(Message)]
#[rtype(result = "Fenced<WriteOutcome>")]
pub struct ProposeWrite {
    /// The encoded command.
    pub data: Vec<u8>,
    /// What it asks of the store's room, checked before it is appended (STORE-1).
    pub demand: StoreDemand,
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
    pub(super) machine: ClusterMachine,
    /// Clients waiting, by the position their entry was given.
    waiting: BTreeMap<u64, (u64, Waiter)>,
    /// STORE-1: the room writes admitted by this node as leader will take, by their index,
    /// held until that index is applied (whatever entry it holds by then), and their sum.
    held_room: BTreeMap<u64, StoreUse>,
    held_total: StoreUse,
    /// The id of the last read registered with the core.
    last_read: u64,
    /// LOG-7: reads the core took and the driver has not answered yet.
    reads: BTreeMap<ReadId, PendingRead>,
    /// SESS-0, SESS-1: the leader's count of job leases and sessions.
    pub(super) lease_clock: LeaseClock,
    /// The term of the last entry applied (or of the snapshot restored): a leader whose
    /// machine has applied no entry of its own term may not have applied every committed
    /// grant yet, so it does not say a session is unknown (SESS-1).
    pub(super) applied_term: u64,
}

impl LogDriver {
    /// Holds `room` for the write at `index` until that index is applied.
    fn hold_room(&mut self, index: u64, room: StoreUse) {
        if room != StoreUse::default() {
            let held = self.held_room.entry(index).or_default();
            held.bytes = held.bytes.saturating_add(room.bytes);
            held.jobs = held.jobs.saturating_add(room.jobs);
            self.held_total.bytes = self.held_total.bytes.saturating_add(room.bytes);
            self.held_total.jobs = self.held_total.jobs.saturating_add(room.jobs);
        }
    }

    /// Gives back the room held for every index up to `applied`.
    fn release_room(&mut self, applied: u64) {
        while let Some((&index, _)) = self.held_room.first_key_value() {
            if index > applied {
                break;
            }
            if let Some((_, room)) = self.held_room.pop_first() {
                self.held_total.bytes = self.held_total.bytes.saturating_sub(room.bytes);
                self.held_total.jobs = self.held_total.jobs.saturating_sub(room.jobs);
            }
        }
    }

    /// A driver around `machine`, which holds the state up to the core's applied index (the
    /// durable snapshot's, restored at start).
    pub(super) fn new(machine: ClusterMachine) -> Self {
        Self {
            machine,
            waiting: BTreeMap::new(),
            held_room: BTreeMap::new(),
            held_total: StoreUse::default(),
            last_read: 0,
            reads: BTreeMap::new(),
            lease_clock: LeaseClock::new(),
            applied_term: 0,
        }
    }
}

impl ElectionActor {
    /// LOG-4: a leader's snapshot: the machine is restored from it before anything after it
    /// is applied (the driver then hands out its save). Returns false once the actor halted:
    /// a snapshot that does not decode would leave the machine apart from the log.
    pub(super) fn restore(&mut self, snapshot: &Snapshot, ctx: &mut Context<Self>) -> bool {
        let Some(driver) = self.log.as_mut() else {
            return true;
        };
        if let Err(err) = driver.machine.restore(&snapshot.data) {
            let reason = format!(
                "the leader's snapshot at index {} does not decode: {err}",
                snapshot.last.index
            );
            self.halt(&reason, ctx);
            return false;
        }
        driver.applied_term = snapshot.last.term;
        debug!(
            index = snapshot.last.index,
            bytes = snapshot.data.len(),
            "state machine restored from the leader's snapshot"
        );
        self.job_wakeups.wake();
        self.answer_covered_waiters(snapshot.last.index);
        true
    }

    /// The log's indices and each follower's lag, for the metrics.
    pub(super) fn log_metrics(&mut self) {
        if self.log.is_none() {
            return;
        }
        let Some(log) = self.driver.election_mut().replicated_log() else {
            return;
        };
        let status = log.status();
        let last = log.last().index;
        self.metrics.set_log_indices(status.commit, status.applied);
        self.configuration_metrics(&status);
        for (peer, matched) in status.followers {
            self.metrics
                .set_replication_lag(peer, last.saturating_sub(matched));
        }
    }

    /// LOG-7: the driver's answer to a read: serve it from the machine (everything up to its
    /// read index is applied), or refuse it.
    pub(super) fn answer_read(&mut self, id: ReadId, outcome: Result<(), ReadError>) {
        let fence = self.fence();
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        let Some(pending) = driver.reads.remove(&id) else {
            return;
        };
        match outcome {
            Ok(()) => {
                self.metrics.read("served");
                (pending.read)(driver.machine.state());
                let _ = pending.reply.send(fence.wrap(Ok(())));
            }
            Err(err) => {
                let (result, refusal) = read_refusal(err, None);
                self.metrics.read(result);
                let _ = pending.reply.send(fence.wrap(Err(refusal)));
            }
        }
    }

    /// LOG-7: registers a linearizable read with the core; the driver answers it
    /// ([`ElectionActor::answer_read`]).
    fn request_read(&mut self, read: MachineRead, reply: oneshot::Sender<Fenced<()>>) {
        let now = self.clock.now();
        let fence = self.fence();
        let leader = fence.leader;
        let Some(driver) = self.log.as_mut() else {
            let _ = reply.send(fence.wrap(Err(LogRefusal::Disabled)));
            return;
        };
        driver.last_read += 1;
        let id = ReadId(driver.last_read);
        match self.driver.request_read(now, id) {
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
    /// once, and the driver hands out the snapshot's save. Whether one was taken.
    pub(super) fn take_due_snapshot(&mut self) -> bool {
        let now = self.clock.now();
        let Some(driver) = self.log.as_mut() else {
            return false;
        };
        let Some(last) = self.driver.snapshot_due() else {
            return false;
        };
        if driver.machine.applied_index() != last.index {
            // The core hands out every entry it counts as applied; a machine elsewhere would
            // be a bug in this driver. The snapshot waits for the next pass.
            warn!(
                index = last.index,
                machine = driver.machine.applied_index(),
                "a snapshot is due at an index the state machine is not at; not taken"
            );
            return false;
        }
        let data = match driver.machine.snapshot() {
            Ok(data) => data,
            Err(err) => {
                warn!(%err, index = last.index, "the state machine could not be snapshotted");
                return false;
            }
        };
        let bytes = data.len();
        let taken = self.driver.snapshot_taken(
            now,
            Snapshot {
                last,
                data: data.into(),
                config: None,
            },
        );
        if taken {
            debug!(index = last.index, bytes, "snapshot taken");
        }
        taken
    }

    /// Clients waiting for an entry a leader's snapshot now covers: this node never saw it
    /// applied, so the outcome is unknown here.
    fn answer_covered_waiters(&mut self, covered: u64) {
        let fence = self.fence();
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        driver.release_room(covered);
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
    pub(super) fn apply_entry(&mut self, entry: &LogEntry) {
        let fence = self.fence();
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        let answer = driver.machine.apply(entry);
        driver.applied_term = entry.term;
        driver.release_room(entry.index);
        if crate::job_wakeups::makes_job_ready(&answer.applied) {
            // SESS-3: claims waiting for a job look again.
            self.job_wakeups.wake();
        }
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

    /// Registers `reply` for the entry at `position`, answered once it is applied (or lost).
    pub(super) fn wait_for(
        &mut self,
        position: LogPosition,
        reply: oneshot::Sender<Fenced<WriteOutcome>>,
    ) {
        if let Some(driver) = self.log.as_mut() {
            driver
                .waiting
                .insert(position.index, (position.term, Waiter(reply)));
        }
    }

    /// STORE-1, STORE-2: whether a write asking `demand` fits the store's bounds. Only the
    /// leader looks, against what it has applied plus the room it holds for the writes it
    /// admitted and has not applied yet; anywhere else the write goes on to be refused with
    /// the leader's name, so that the client asks the node that decides. Returns the room the
    /// write takes, to be held until it is applied, so that writes in flight together cannot
    /// pass a bound between them.
    fn admit(&self, demand: &StoreDemand) -> Result<StoreUse, StoreFull> {
        match self.log.as_ref() {
            Some(driver) if self.driver.election().is_leader() => {
                driver.machine.admit_beside(demand, driver.held_total)
            }
            _ => Ok(StoreUse::default()),
        }
    }

    /// Appends `data` on the leader, holding `room` for it, and registers who waits for it.
    fn propose(&mut self, data: Vec<u8>, room: StoreUse, waiter: Waiter) {
        let now = self.clock.now();
        let fence = self.fence();
        let leader = fence.leader;
        let Some(mut log) = self.driver.election_mut().replicated_log() else {
            let _ = waiter.0.send(fence.wrap(Err(LogRefusal::Disabled)));
            return;
        };
        match log.propose(now, data) {
            Ok(LogPosition { term, index }) => {
                if let Some(driver) = self.log.as_mut() {
                    driver.waiting.insert(index, (term, waiter));
                    driver.hold_room(index, room);
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

    /// The node halts or stops: whoever still waits cannot be told the outcome. A read
    /// changed nothing, so it is only to be asked again (of the next leader).
    pub(super) fn abandon_waiters(&mut self) {
        let fence = self.fence();
        if let Some(driver) = self.log.as_mut() {
            driver.release_room(u64::MAX);
            for (_, (_, Waiter(reply))) in std::mem::take(&mut driver.waiting) {
                let _ = reply.send(fence.wrap(Err(LogRefusal::Unknown)));
            }
            for pending in std::mem::take(&mut driver.reads).into_values() {
                let _ = pending.reply.send(fence.wrap(Err(LogRefusal::Busy)));
            }
        }
    }

    /// The fencing token now, for the answers about to be sent.
    pub(super) fn fence(&self) -> Fence {
        Fence {
            term: self.driver.election().term(),
            leader: self.driver.election().leader(),
        }
    }
}

/// The fencing token `(term, leader)` an answer carries.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence {
    term: u64,
    leader: Option<PeerId>,
}

impl Fence {
    pub(super) fn wrap<T>(self, outcome: Result<T, LogRefusal>) -> Fenced<T> {
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
            match self.admit(&write.demand) {
                Err(full) => {
                    self.metrics.proposal("store_full");
                    let _ = reply.send(fence.wrap(Err(LogRefusal::StoreFull(full.to_string()))));
                }
                Ok(room) => {
                    self.propose(write.data, room, Waiter(reply));
                    self.pump(ctx);
                }
            }
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
        MessageResult(
            fence.wrap(match self.driver.election_mut().replicated_log() {
                Some(log) => Ok(CommittedEntries {
                    entries: log.committed_from(read.from, read.max),
                    commit: log.status().commit,
                }),
                None => Err(LogRefusal::Disabled),
            }),
        )
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
