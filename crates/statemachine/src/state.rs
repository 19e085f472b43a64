//! [`ClusterState`], the built-in state machine (LOG-5, LOG-6): the key-value store, the job
//! queue and the table of applied request ids, applied entry by entry and snapshotted whole.
//!
//! # Applying an entry
//!
//! The node hands over every committed entry in log order ([`StateMachine::apply_entry`]):
//!
//! 1. an entry that is not the next one (at or below the applied index, or after a gap) is
//!    answered [`Applied::NotNext`] and changes nothing;
//! 2. a no-op entry advances the applied index only;
//! 3. data that is not a valid [`Command`] advances the applied index, is counted
//!    ([`ClusterState::rejected_entries`]) and answered [`Applied::Rejected`]: every node
//!    refuses the same entry the same way, so the replicas stay equal and none panics;
//! 4. a command whose request id was applied already answers the remembered outcome
//!    ([`Applied::Replayed`]) and changes nothing (LOG-6), or, when the id came with another
//!    kind of write, [`Applied::RequestIdInUse`];
//! 5. otherwise the write is applied to its store and answered [`Applied::Answered`]; its
//!    request id, if any, is remembered with the outcome.
//!
//! # Snapshots
//!
//! A snapshot is one format byte ([`SNAPSHOT_FORMAT`]) followed by the state as compact
//! MessagePack (`rmp_serde::to_vec`): the applied index, the store with its kept history, the
//! jobs, the remembered request ids and the count of rejected entries. Every collection is
//! ordered (no hash maps), so two replicas that applied the same entries write byte-identical
//! snapshots. Indexes derived from that state (ready jobs per queue, leases by end) are not
//! written; restoring rebuilds them after checking that the snapshot is consistent, and
//! refuses it with an error otherwise, leaving the state as it was.

use conclave_protocol::{EntryKind, LogEntry};
use serde::{Deserialize, Serialize};

use crate::command::{Command, Write};
use crate::error::{Error, Result};
use crate::jobs::{DONE_JOB_RETENTION, JobOutcome, JobQueue};
use crate::kv::{KvOutcome, KvStore};
use crate::requests::{REQUEST_ID_CAPACITY, RequestLedger, RequestScope};

/// The format byte in front of every snapshot.
pub const SNAPSHOT_FORMAT: u8 = 1;

/// A replicated state machine: committed entries go in, in log order, and each is applied
/// once; the state can be written as a snapshot and restored from one (LOG-5). Applying must
/// be deterministic: the same entries give the same state and the same answers on every
/// node, so an implementation reads no clock, draws no random number and iterates no hash
/// map in an order that shows.
pub trait StateMachine {
    /// What applying an entry answers; the node hands it to the client that proposed it.
    type Output;

    /// Applies the command in the data of the committed entry at `index`, the one after
    /// [`applied_index`](Self::applied_index).
    fn apply(&mut self, index: u64, data: &[u8]) -> Self::Output;

    /// Records the committed entry at `index` that carries no command (a new leader's no-op):
    /// the applied index moves, nothing else does.
    fn apply_noop(&mut self, index: u64) -> Self::Output;

    /// The whole state, to be restored by [`restore`](Self::restore).
    fn snapshot(&self) -> Result<Vec<u8>>;

    /// Replaces the state with a snapshot's. A snapshot that cannot be read is an error and
    /// the state is left as it was.
    fn restore(&mut self, snapshot: &[u8]) -> Result<()>;

    /// The index of the last entry applied (or restored); 0 before any.
    fn applied_index(&self) -> u64;

    /// Applies a committed log entry, a no-op or a command.
    fn apply_entry(&mut self, entry: &LogEntry) -> Self::Output {
        match entry.kind {
            EntryKind::Noop => self.apply_noop(entry.index),
            EntryKind::Command => self.apply(entry.index, &entry.data),
        }
    }
}

/// What a write answered: the key-value store's or the job queue's outcome. This is what the
/// request-id table remembers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// A key-value write's.
    Kv(KvOutcome),
    /// A job-queue write's.
    Jobs(JobOutcome),
}

/// What applying one entry to a [`ClusterState`] did.
#[derive(Debug)]
pub enum Applied {
    /// The write was applied (or its comparison failed, which is an answer too).
    Answered(Outcome),
    /// The write's request id was applied already: this is what that first apply answered,
    /// and nothing changed (LOG-6).
    Replayed(Outcome),
    /// The request id was applied already with another kind of write (another key, queue or
    /// job): a client reused an id; nothing changed.
    RequestIdInUse {
        /// The id.
        request_id: String,
    },
    /// A no-op entry; only the applied index moved.
    Noop,
    /// The entry's data is not a valid command. It counts as applied, as a no-op, on every
    /// node alike.
    Rejected(Error),
    /// The entry is not the next one; nothing changed. At or below `applied` it was applied
    /// already (say, before a snapshot was restored); above `applied + 1` the driver skipped
    /// entries.
    NotNext {
        /// The entry's index.
        index: u64,
        /// The state's applied index.
        applied: u64,
    },
}

impl Applied {
    /// The write's outcome, first time or replayed.
    #[must_use]
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::Answered(outcome) | Self::Replayed(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// Settings of one node's state machine that do not change what applying answers, so nodes
/// may differ in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateConfig {
    /// Changes of the key-value store kept for watches.
    pub watch_history: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            watch_history: 10_000,
        }
    }
}

/// The bounds that do change answers; constants everywhere but in tests, which shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Capacities {
    request_ids: usize,
    done_jobs: usize,
}

impl Default for Capacities {
    fn default() -> Self {
        Self {
            request_ids: REQUEST_ID_CAPACITY,
            done_jobs: DONE_JOB_RETENTION,
        }
    }
}

/// The built-in state machine: the key-value store of cluster facts, the job queue and the
/// table of applied request ids. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    applied_index: u64,
    kv: KvStore,
    jobs: JobQueue,
    requests: RequestLedger,
    rejected_entries: u64,
    #[serde(skip)]
    config: StateConfig,
    #[serde(skip)]
    capacities: Capacities,
}

impl Default for ClusterState {
    fn default() -> Self {
        Self::new(StateConfig::default())
    }
}

impl ClusterState {
    /// An empty state, nothing applied.
    #[must_use]
    pub fn new(config: StateConfig) -> Self {
        Self::with_capacities(config, Capacities::default())
    }

    fn with_capacities(config: StateConfig, capacities: Capacities) -> Self {
        Self {
            applied_index: 0,
            kv: KvStore::new(config.watch_history),
            jobs: JobQueue::new(capacities.done_jobs),
            requests: RequestLedger::new(capacities.request_ids),
            rejected_entries: 0,
            config,
            capacities,
        }
    }

    /// The key-value store, for reads.
    #[must_use]
    pub fn kv(&self) -> &KvStore {
        &self.kv
    }

    /// The job queue, for reads.
    #[must_use]
    pub fn jobs(&self) -> &JobQueue {
        &self.jobs
    }

    /// Entries whose data was not a valid command, applied as no-ops.
    #[must_use]
    pub fn rejected_entries(&self) -> u64 {
        self.rejected_entries
    }

    /// Request ids remembered now.
    #[must_use]
    pub fn remembered_requests(&self) -> usize {
        self.requests.len()
    }

    fn apply_command(&mut self, command: Command) -> Applied {
        let Command { request_id, write } = command;
        let scope = request_id.as_ref().map(|_| RequestScope::of(&write));
        if let (Some(id), Some(scope)) = (&request_id, &scope) {
            if let Some(seen) = self.requests.get(id) {
                if seen.scope == *scope {
                    return Applied::Replayed(seen.outcome.clone());
                }
                return Applied::RequestIdInUse {
                    request_id: id.clone(),
                };
            }
        }
        let outcome = match &write {
            Write::Kv(command) => Outcome::Kv(self.kv.apply(command)),
            Write::Jobs(command) => Outcome::Jobs(self.jobs.apply(command)),
        };
        if let (Some(id), Some(scope)) = (request_id, scope) {
            self.requests.record(id, scope, outcome.clone());
        }
        Applied::Answered(outcome)
    }

    /// Moves the applied index to `index` if it is the next one.
    fn advance(&mut self, index: u64) -> Result<(), Applied> {
        if Some(index) != self.applied_index.checked_add(1) {
            return Err(Applied::NotNext {
                index,
                applied: self.applied_index,
            });
        }
        self.applied_index = index;
        Ok(())
    }
}

impl StateMachine for ClusterState {
    type Output = Applied;

    fn apply(&mut self, index: u64, data: &[u8]) -> Applied {
        if let Err(not_next) = self.advance(index) {
            return not_next;
        }
        match Command::decode(data) {
            Ok(command) => self.apply_command(command),
            Err(error) => {
                self.rejected_entries = self.rejected_entries.saturating_add(1);
                Applied::Rejected(error)
            }
        }
    }

    fn apply_noop(&mut self, index: u64) -> Applied {
        match self.advance(index) {
            Ok(()) => Applied::Noop,
            Err(not_next) => not_next,
        }
    }

    fn snapshot(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![SNAPSHOT_FORMAT];
        rmp_serde::encode::write(&mut bytes, self).map_err(Error::EncodeSnapshot)?;
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let Some((&SNAPSHOT_FORMAT, body)) = snapshot.split_first() else {
            return Err(Error::SnapshotFormat {
                found: snapshot.first().copied(),
                expected: SNAPSHOT_FORMAT,
            });
        };
        let decoded: Self =
            rmp_serde::from_slice(body).map_err(|source| Error::DecodeSnapshot {
                len: snapshot.len(),
                source,
            })?;
        let restored = Self {
            applied_index: decoded.applied_index,
            kv: decoded.kv.restored(self.config.watch_history)?,
            jobs: decoded.jobs.restored(self.capacities.done_jobs)?,
            requests: decoded.requests.restored(self.capacities.request_ids)?,
            rejected_entries: decoded.rejected_entries,
            config: self.config,
            capacities: self.capacities,
        };
        *self = restored;
        Ok(())
    }

    fn applied_index(&self) -> u64 {
        self.applied_index
    }
}
