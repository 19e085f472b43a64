//! The state machine a node runs on its replicated log (LOG-4, LOG-5, LOG-6): conclave-statemachine's
//! [`ClusterState`] — the key-value store of cluster facts and seed 004's job queue — as the
//! ElectionActor applies committed entries to it and serves reads from it.
//!
//! Every committed entry is applied, in order: a client's command, a leader's no-op and a
//! read barrier (an entry without data, which older versions wrote for linearizable reads)
//! alike, so that the state's applied index is the log's. A write answers with a
//! [`WriteOutcome`]: the state machine's typed outcome, and the jobs it names as they stand
//! right after it, read in the same step so that no other write comes between; the client
//! API turns it into its answer. Reads are closures over the state ([`MachineRead`]), run in
//! the actor at the point the read's consistency asks for.

use conclave_protocol::{EntryKind, LogEntry};
use conclave_statemachine::{
    Applied, ClusterState, Job, JobOutcome, Outcome, StateMachine, StoreDemand, StoreFull,
    StoreLimits, StoreUse,
};
use tracing::warn;

/// Why a machine could not make or read a snapshot (LOG-4), with its source kept.
pub type MachineError = conclave_statemachine::Error;

/// A read of the state machine, run in the ElectionActor; it hands its result on itself (see
/// [`crate::node::NodeHandle::read`]).
pub type MachineRead = Box<dyn FnOnce(&ClusterState) + Send>;

/// What applying a client's write answered.
#[derive(Debug)]
pub struct WriteOutcome {
    /// The state machine's answer.
    pub applied: Applied,
    /// The jobs the answer names by id (an enqueue, ack or nack), as they stand right after
    /// the write; a claim and a retry carry their job already.
    pub jobs: Vec<Job>,
}

/// The built-in state machine of a node with `[log] enabled`.
#[derive(Debug, Default)]
pub struct ClusterMachine {
    state: ClusterState,
    /// STORE-1, STORE-2: what the leader holds the state to before it appends a write.
    limits: StoreLimits,
}

impl ClusterMachine {
    /// An empty state: a node that replays its log from the start.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same machine held to `limits` (`log.max_store_bytes`, `log.max_jobs`).
    #[must_use]
    pub fn with_limits(self, limits: StoreLimits) -> Self {
        Self { limits, ..self }
    }

    /// STORE-1, STORE-2: whether a write asking `demand` fits the store's bounds; checked by
    /// the leader before it appends the write, never when applying.
    pub fn admit(&self, demand: &StoreDemand) -> Result<(), StoreFull> {
        self.state.admit(demand, self.limits)
    }

    /// [`Self::admit`] beside `pending`, what writes admitted and not yet applied will add;
    /// returns what this one adds (STORE-1: writes in flight together cannot pass a bound).
    pub fn admit_beside(
        &self,
        demand: &StoreDemand,
        pending: StoreUse,
    ) -> Result<StoreUse, StoreFull> {
        self.state.admit_beside(demand, self.limits, pending)
    }

    /// What the store holds now against its bounds (STORE-3): the use, and the bounds.
    pub fn store_use(&self) -> (StoreUse, StoreLimits) {
        (self.state.store_use(), self.limits)
    }

    /// The state a snapshot holds (LOG-4): a node that starts from its durable snapshot and
    /// replays the entries after it.
    pub fn restored(snapshot: &[u8]) -> Result<Self, MachineError> {
        let mut machine = Self::new();
        machine.restore(snapshot)?;
        Ok(machine)
    }

    /// The state, for reads.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Applies one committed entry, in log order, once — every entry, a leader's no-op and an
    /// older version's read barrier (an entry without data) included, so that the machine's
    /// applied index follows the log's; the answer for the client that wrote it.
    pub fn apply(&mut self, entry: &LogEntry) -> WriteOutcome {
        // A configuration entry (MEMB-1) is raft's, not the machine's: it takes the index.
        let applied = if entry.kind != EntryKind::Command || entry.data.is_empty() {
            self.state.apply_noop(entry.index)
        } else {
            self.state.apply(entry.index, &entry.data)
        };
        match &applied {
            Applied::Rejected(error) => {
                warn!(%error, "a log entry is not a valid command; applied as a no-op");
            }
            Applied::NotNext { index, applied } => {
                // The log hands out every entry once, in order; this would be a bug in the node.
                warn!(
                    index,
                    applied, "a log entry arrived out of order at the state machine"
                );
            }
            _ => {}
        }
        let jobs = match applied.outcome() {
            Some(Outcome::Jobs(
                JobOutcome::Enqueued { job }
                | JobOutcome::Acked { job }
                | JobOutcome::Requeued { job, .. }
                | JobOutcome::DeadLettered { job, .. },
            )) => self.state.jobs().get(*job).cloned().into_iter().collect(),
            _ => Vec::new(),
        };
        WriteOutcome { applied, jobs }
    }

    /// LOG-4: the whole state, as [`ClusterMachine::restore`] reads it back.
    pub fn snapshot(&self) -> Result<Vec<u8>, MachineError> {
        self.state.snapshot()
    }

    /// LOG-4: replaces the state with a snapshot's. One that cannot be read is an error, and
    /// the state is left as it was.
    pub fn restore(&mut self, snapshot: &[u8]) -> Result<(), MachineError> {
        self.state.restore(snapshot)
    }

    /// The index of the last entry applied (or restored from a snapshot); 0 before any.
    pub fn applied_index(&self) -> u64 {
        self.state.applied_index()
    }
}
