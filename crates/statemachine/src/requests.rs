//! The table of request ids already applied (LOG-6): a client that retries a write after an
//! ambiguous failure (its leader died before answering) gives the same id, and the retry
//! answers what the first apply answered instead of applying again.
//!
//! The table is replicated state: it changes only on apply, lives in snapshots, and is the
//! same on every node. It is bounded: it keeps the last [`REQUEST_ID_CAPACITY`] ids, the
//! oldest forgotten first. A retry that comes after that many newer writes with ids is applied
//! as new: at most once holds within that window only. A client retries within seconds, and
//! a hundred thousand writes is far more than a cluster of facts and jobs takes in that time.
//!
//! An id is remembered with what kind of write it came with (the key, the queue, the job). A
//! second write that reuses the id for something else is a client's mistake, not a retry: it
//! is refused rather than answered with another write's outcome.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::command::{JobCommand, KvCommand, Write};
use crate::error::{Error, Result};
use crate::jobs::JobId;
use crate::sessions::{SessionCommand, SessionId};
use crate::state::Outcome;

/// Request ids remembered, the oldest forgotten first. A constant of the state machine, not a
/// setting: replicas that remembered different numbers could apply a late retry differently.
pub const REQUEST_ID_CAPACITY: usize = 100_000;

/// What a request id was used for; a retry must be for the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RequestScope {
    KvPut { key: String },
    KvDelete { key: String },
    Enqueue { queue: String },
    Claim { queue: String, worker: String },
    Ack { job: JobId },
    Nack { job: JobId },
    ExpireLeases,
    // Added later: appended, so that the scopes in older snapshots keep their meaning.
    Retry { job: JobId },
    Purge { job: JobId },
    PurgeDead { queue: Option<String> },
    ExpireClaims,
    SessionGrant,
    SessionRevoke { session: SessionId },
    SessionExpire,
}

impl RequestScope {
    pub(crate) fn of(write: &Write) -> Self {
        match write {
            Write::Kv(KvCommand::Put { key, .. }) => Self::KvPut { key: key.clone() },
            Write::Kv(KvCommand::Delete { key, .. }) => Self::KvDelete { key: key.clone() },
            Write::Jobs(JobCommand::Enqueue { queue, .. }) => Self::Enqueue {
                queue: queue.clone(),
            },
            Write::Jobs(JobCommand::Claim { queue, worker, .. }) => Self::Claim {
                queue: queue.clone(),
                worker: worker.clone(),
            },
            Write::Jobs(JobCommand::Ack { job, .. }) => Self::Ack { job: *job },
            Write::Jobs(JobCommand::Nack { job, .. }) => Self::Nack { job: *job },
            Write::Jobs(JobCommand::ExpireLeases { .. }) => Self::ExpireLeases,
            Write::Jobs(JobCommand::Retry { job }) => Self::Retry { job: *job },
            Write::Jobs(JobCommand::Purge { job }) => Self::Purge { job: *job },
            Write::Jobs(JobCommand::PurgeDead { queue }) => Self::PurgeDead {
                queue: queue.clone(),
            },
            Write::Jobs(JobCommand::ExpireClaims { .. }) => Self::ExpireClaims,
            Write::Sessions(SessionCommand::Grant { .. }) => Self::SessionGrant,
            Write::Sessions(SessionCommand::Revoke { session }) => {
                Self::SessionRevoke { session: *session }
            }
            Write::Sessions(SessionCommand::Expire { .. }) => Self::SessionExpire,
        }
    }
}

/// One remembered request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SeenRequest {
    pub(crate) id: String,
    pub(crate) scope: RequestScope,
    pub(crate) outcome: Outcome,
}

/// The bounded table of applied request ids. See the [module docs](self).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RequestLedger {
    /// Oldest first.
    seen: VecDeque<SeenRequest>,
    /// Each id's sequence number (`forgotten` + its position in `seen`); rebuilt on restore.
    #[serde(skip)]
    by_id: BTreeMap<String, u64>,
    /// Entries forgotten since this table was built or restored.
    #[serde(skip)]
    forgotten: u64,
    #[serde(skip)]
    capacity: usize,
}

/// Two tables are equal when they remember the same requests in the same order; their
/// sequence numbers differ after a restore and say nothing about the replicated state.
impl PartialEq for RequestLedger {
    fn eq(&self, other: &Self) -> bool {
        self.seen == other.seen && self.capacity == other.capacity
    }
}

impl Eq for RequestLedger {}

impl RequestLedger {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            seen: VecDeque::new(),
            by_id: BTreeMap::new(),
            forgotten: 0,
            capacity,
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&SeenRequest> {
        let sequence = *self.by_id.get(id)?;
        let position = usize::try_from(sequence.checked_sub(self.forgotten)?).ok()?;
        self.seen.get(position)
    }

    /// Remembers the first outcome of `id`; the caller has checked it is not remembered yet.
    pub(crate) fn record(&mut self, id: String, scope: RequestScope, outcome: Outcome) {
        let sequence = self.forgotten + self.seen.len() as u64;
        self.by_id.insert(id.clone(), sequence);
        self.seen.push_back(SeenRequest { id, scope, outcome });
        self.forget_beyond_capacity();
    }

    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }

    fn forget_beyond_capacity(&mut self) {
        while self.seen.len() > self.capacity {
            if let Some(oldest) = self.seen.pop_front() {
                self.by_id.remove(&oldest.id);
                self.forgotten += 1;
            }
        }
    }

    /// Checks a table decoded from a snapshot and rebuilds its index.
    pub(crate) fn restored(mut self, capacity: usize) -> Result<Self> {
        self.by_id.clear();
        self.forgotten = 0;
        for (sequence, request) in (0u64..).zip(&self.seen) {
            if self.by_id.insert(request.id.clone(), sequence).is_some() {
                return Err(Error::InconsistentSnapshot(
                    "a request id is remembered twice",
                ));
            }
        }
        self.capacity = capacity;
        self.forget_beyond_capacity();
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::JobOutcome;

    fn outcome() -> Outcome {
        Outcome::Jobs(JobOutcome::NoneReady)
    }

    /// LOG-6: ids are forgotten oldest first, and a restored table finds the ids it kept.
    #[test]
    fn the_oldest_ids_are_forgotten_first() {
        let mut ledger = RequestLedger::new(2);
        for id in ["a", "b", "c"] {
            ledger.record(id.into(), RequestScope::ExpireLeases, outcome());
        }
        assert!(ledger.get("a").is_none());
        assert!(ledger.get("b").is_some() && ledger.get("c").is_some());
        let restored = ledger.clone().restored(1).unwrap();
        assert!(restored.get("b").is_none());
        assert_eq!(
            restored.get("c").map(|seen| &seen.outcome),
            Some(&outcome())
        );
    }

    /// LOG-6: a snapshot that remembers an id twice is refused.
    #[test]
    fn an_id_remembered_twice_is_refused() {
        let mut ledger = RequestLedger::new(4);
        ledger.record("a".into(), RequestScope::ExpireLeases, outcome());
        let mut doubled = ledger.clone();
        doubled.seen.push_back(ledger.seen[0].clone());
        assert!(matches!(
            doubled.restored(4),
            Err(Error::InconsistentSnapshot(_))
        ));
    }
}
