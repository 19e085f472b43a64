//! The bounds of what the state machine holds (STORE-1, STORE-2): how much the store weighs,
//! counted from the entries alike on every replica, and whether a write would pass the
//! bounds a node is configured with.
//!
//! Every replica holds the whole store in memory, so a client (or a bug) writing without end
//! would run every replica out of memory at the same moment, and each would replay its log
//! into the same wall after a restart. The leader therefore looks at each write before it
//! appends it ([`ClusterState::admit`]) and refuses one that would take the store past
//! `log.max_store_bytes` or the job queue past `log.max_jobs`. Writes that free room or
//! change nothing's size (deletes, claims, acks, nacks, purges, sessions) always pass, so a
//! full store can always be emptied.
//!
//! The weight is counted from what the entries hold, never from the allocator, so every
//! replica counts the same: a key weighs its key and value bytes plus [`KV_ENTRY_OVERHEAD`];
//! a job not yet done weighs its queue and payload bytes plus [`JOB_OVERHEAD`]. Done jobs are
//! kept by count ([`crate::DONE_JOB_RETENTION`]), not weighed, so that acking a job frees its
//! room at once. The bound is checked on the leader only, against what it has applied: writes
//! admitted together while earlier ones are still in flight can pass it by what those carry.
//! Applying never refuses for room, as nodes may be configured with different bounds and
//! must still apply the same entries alike.

use std::fmt;

use crate::command::{Command, JobCommand, KvCommand, MAX_KEY_LEN, MAX_VALUE_LEN, Write};
use crate::state::ClusterState;

/// What a key weighs beyond its key and value bytes: its revisions, version and session, and
/// its share of the map that holds it.
pub const KV_ENTRY_OVERHEAD: u64 = 128;

/// What a job weighs beyond its queue and payload bytes: its id, counts, state and last
/// failure, and its share of the maps that hold it.
pub const JOB_OVERHEAD: u64 = 128;

/// The most one key weighs: the longest key with the longest value.
pub const MAX_KEY_WEIGHT: u64 = MAX_KEY_LEN as u64 + MAX_VALUE_LEN as u64 + KV_ENTRY_OVERHEAD;

/// What a key `key` holding `value` weighs.
pub(crate) fn key_weight(key: &str, value: &str) -> u64 {
    key.len() as u64 + value.len() as u64 + KV_ENTRY_OVERHEAD
}

/// What a job of `queue` carrying `payload` weighs while it is not done.
pub(crate) fn job_weight(queue: &str, payload: &str) -> u64 {
    queue.len() as u64 + payload.len() as u64 + JOB_OVERHEAD
}

/// The bounds of one node's store: `log.max_store_bytes` and `log.max_jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// The most the keys and the jobs not done may weigh together, in bytes.
    pub max_bytes: u64,
    /// The most jobs not done (ready, claimed or dead) the queue may hold.
    pub max_jobs: u64,
}

impl StoreLimits {
    /// Default of `log.max_store_bytes`: 32 MiB, which a small gateway holds: a node needs
    /// about six times what its store weighs (docs/benchmarks.md), some 200 MiB when full.
    pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;
    /// Default of `log.max_jobs`.
    pub const DEFAULT_MAX_JOBS: u64 = 100_000;
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_jobs: Self::DEFAULT_MAX_JOBS,
        }
    }
}

/// What a write asks of the store's room, known before it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDemand {
    /// Nothing: it frees room or leaves the weight as it is.
    Nothing,
    /// A put: `key` will weigh `weight`, in place of what it weighs now, if anything.
    Key {
        /// The key.
        key: String,
        /// What it will weigh.
        weight: u64,
        /// The write's request id, if any: a retry of a write already applied only replays
        /// its answer, so it passes whatever the store holds now (LOG-6).
        request_id: Option<String>,
    },
    /// An enqueue: one more job, weighing `weight`.
    Job {
        /// What it will weigh.
        weight: u64,
        /// The write's request id, as for [`StoreDemand::Key`].
        request_id: Option<String>,
    },
}

impl Write {
    /// What this write asks of the store's room (STORE-1), without a request id.
    #[must_use]
    pub fn demand(&self) -> StoreDemand {
        match self {
            Write::Kv(KvCommand::Put { key, value, .. }) => StoreDemand::Key {
                key: key.clone(),
                weight: key_weight(key, value),
                request_id: None,
            },
            Write::Jobs(JobCommand::Enqueue { queue, payload, .. }) => StoreDemand::Job {
                weight: job_weight(queue, payload),
                request_id: None,
            },
            _ => StoreDemand::Nothing,
        }
    }
}

impl Command {
    /// What this command asks of the store's room (STORE-1), with its request id, so that a
    /// retry of a write already applied is never refused for room.
    #[must_use]
    pub fn demand(&self) -> StoreDemand {
        let mut demand = self.write.demand();
        if let StoreDemand::Key { request_id, .. } | StoreDemand::Job { request_id, .. } =
            &mut demand
        {
            request_id.clone_from(&self.request_id);
        }
        demand
    }
}

/// What the store holds now, as the bounds count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreUse {
    /// What the keys and the jobs not done weigh, in bytes.
    pub bytes: u64,
    /// Jobs not done.
    pub jobs: u64,
}

impl StoreUse {
    /// Whether the store is at its bounds (STORE-3's alarm): the largest write might not fit
    /// any more, or the queue holds `max_jobs` jobs. It clears once room is freed.
    #[must_use]
    pub fn is_full(&self, limits: StoreLimits) -> bool {
        self.bytes.saturating_add(MAX_KEY_WEIGHT) > limits.max_bytes || self.jobs >= limits.max_jobs
    }
}

/// Why a write was refused: it would take the store past a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFull {
    /// `log.max_store_bytes`.
    Bytes {
        /// What the store weighs now.
        used: u64,
        /// What the write adds.
        adds: u64,
        /// The bound.
        limit: u64,
    },
    /// `log.max_jobs`.
    Jobs {
        /// Jobs not done now.
        held: u64,
        /// The bound.
        limit: u64,
    },
}

impl fmt::Display for StoreFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreFull::Bytes { used, adds, limit } => write!(
                f,
                "the store is full: it holds {used} bytes and this write adds {adds}, past \
                 log.max_store_bytes = {limit}; delete keys, ack or purge jobs to make room \
                 (reads, deletes, acks and purges still work), or raise the bound on every node"
            ),
            StoreFull::Jobs { held, limit } => write!(
                f,
                "the job queue is full: it holds {held} jobs not done, log.max_jobs = {limit}; \
                 ack or purge jobs to make room (claims, acks and purges still work), or raise \
                 the bound on every node"
            ),
        }
    }
}

impl ClusterState {
    /// What the store holds now, as the bounds count it.
    #[must_use]
    pub fn store_use(&self) -> StoreUse {
        StoreUse {
            bytes: self.kv().weight().saturating_add(self.jobs().weight()),
            jobs: self.jobs().live(),
        }
    }

    /// STORE-1, STORE-2: whether a write asking `demand` may be appended under `limits`.
    /// A put that replaces a key counts only what it adds to the key's weight.
    ///
    /// # Errors
    ///
    /// [`StoreFull`] naming the bound the write would pass.
    pub fn admit(&self, demand: &StoreDemand, limits: StoreLimits) -> Result<(), StoreFull> {
        self.admit_beside(demand, limits, StoreUse::default())
            .map(|_| ())
    }

    /// [`Self::admit`] beside `pending`, what writes admitted earlier and not applied yet will
    /// add: the leader holds their room for them, so that writes in flight together cannot
    /// pass the bound between them (STORE-1). Returns what this write adds, for the leader to
    /// hold until it is applied.
    ///
    /// # Errors
    ///
    /// [`StoreFull`] naming the bound the write would pass.
    pub fn admit_beside(
        &self,
        demand: &StoreDemand,
        limits: StoreLimits,
        pending: StoreUse,
    ) -> Result<StoreUse, StoreFull> {
        let applied = self.store_use();
        let used = StoreUse {
            bytes: applied.bytes.saturating_add(pending.bytes),
            jobs: applied.jobs.saturating_add(pending.jobs),
        };
        let retried = match demand {
            StoreDemand::Nothing => None,
            StoreDemand::Key { request_id, .. } | StoreDemand::Job { request_id, .. } => {
                request_id.as_deref()
            }
        };
        if retried.is_some_and(|id| self.remembers_request(id)) {
            return Ok(StoreUse::default());
        }
        let adds = match demand {
            StoreDemand::Nothing => return Ok(StoreUse::default()),
            StoreDemand::Key { key, weight, .. } => {
                let now = self
                    .kv()
                    .get(key)
                    .map_or(0, |current| key_weight(key, &current.value));
                StoreUse {
                    bytes: weight.saturating_sub(now),
                    jobs: 0,
                }
            }
            StoreDemand::Job { weight, .. } => {
                if used.jobs >= limits.max_jobs {
                    return Err(StoreFull::Jobs {
                        held: used.jobs,
                        limit: limits.max_jobs,
                    });
                }
                StoreUse {
                    bytes: *weight,
                    jobs: 1,
                }
            }
        };
        if adds.bytes > 0 && used.bytes.saturating_add(adds.bytes) > limits.max_bytes {
            return Err(StoreFull::Bytes {
                used: used.bytes,
                adds: adds.bytes,
                limit: limits.max_bytes,
            });
        }
        Ok(adds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateMachine;
    use crate::{JobId, SessionCommand};

    fn apply(state: &mut ClusterState, write: Write) {
        let index = state.applied_index() + 1;
        let data = Command::new(write).encode().unwrap();
        let applied = state.apply(index, &data);
        assert!(applied.outcome().is_some(), "{applied:?}");
    }

    fn put(key: &str, value: &str) -> Write {
        Write::Kv(KvCommand::Put {
            key: key.to_owned(),
            value: value.to_owned(),
            if_revision: None,
            if_value: None,
            session: None,
        })
    }

    fn enqueue(payload: &str) -> Write {
        Write::Jobs(JobCommand::Enqueue {
            queue: "q".to_owned(),
            payload: payload.to_owned(),
            max_attempts: 5,
        })
    }

    fn claim() -> Write {
        Write::Jobs(JobCommand::Claim {
            queue: "q".to_owned(),
            worker: "w".to_owned(),
            lease_ms: 1000,
            now_unix_ms: 0,
            session: None,
        })
    }

    #[test]
    fn the_weight_follows_puts_replacements_deletes_and_session_ends() {
        let mut state = ClusterState::default();
        apply(&mut state, put("a", "1234"));
        assert_eq!(state.store_use().bytes, 1 + 4 + KV_ENTRY_OVERHEAD);
        apply(&mut state, put("a", "12"));
        assert_eq!(state.store_use().bytes, 1 + 2 + KV_ENTRY_OVERHEAD);
        apply(
            &mut state,
            Write::Sessions(SessionCommand::Grant {
                ttl_ms: 1000,
                name: None,
                max_claims: 4,
            }),
        );
        let session = state.sessions().iter().next().unwrap().id;
        apply(
            &mut state,
            Write::Kv(KvCommand::Put {
                key: "owned".to_owned(),
                value: "v".to_owned(),
                if_revision: None,
                if_value: None,
                session: Some(session),
            }),
        );
        assert_eq!(
            state.store_use().bytes,
            (1 + 2 + KV_ENTRY_OVERHEAD) + (5 + 1 + KV_ENTRY_OVERHEAD)
        );
        apply(
            &mut state,
            Write::Sessions(SessionCommand::Revoke { session }),
        );
        apply(
            &mut state,
            Write::Kv(KvCommand::Delete {
                key: "a".to_owned(),
                if_revision: None,
            }),
        );
        assert_eq!(state.store_use(), StoreUse::default());
    }

    #[test]
    fn a_job_weighs_until_it_is_done_or_purged() {
        let mut state = ClusterState::default();
        apply(&mut state, enqueue("payload"));
        apply(&mut state, enqueue("x"));
        let weight = |payload: &str| 1 + payload.len() as u64 + JOB_OVERHEAD;
        assert_eq!(
            state.store_use(),
            StoreUse {
                bytes: weight("payload") + weight("x"),
                jobs: 2
            }
        );
        apply(&mut state, claim());
        apply(
            &mut state,
            Write::Jobs(JobCommand::Ack {
                job: JobId(1),
                worker: "w".to_owned(),
            }),
        );
        assert_eq!(
            state.store_use(),
            StoreUse {
                bytes: weight("x"),
                jobs: 1
            }
        );
        // Dead letters weigh until purged.
        apply(
            &mut state,
            Write::Jobs(JobCommand::Enqueue {
                queue: "q".to_owned(),
                payload: "d".to_owned(),
                max_attempts: 1,
            }),
        );
        apply(&mut state, claim());
        apply(&mut state, claim());
        for job in [JobId(2), JobId(3)] {
            apply(
                &mut state,
                Write::Jobs(JobCommand::Nack {
                    job,
                    worker: "w".to_owned(),
                    reason: None,
                }),
            );
        }
        assert_eq!(state.store_use().jobs, 2);
        apply(
            &mut state,
            Write::Jobs(JobCommand::PurgeDead { queue: None }),
        );
        assert_eq!(
            state.store_use(),
            StoreUse {
                bytes: weight("x"),
                jobs: 1
            }
        );
    }

    #[test]
    fn a_write_past_a_bound_is_refused_and_what_frees_room_passes() {
        let mut state = ClusterState::default();
        let one = key_weight("k1", "vvvv");
        let limits = StoreLimits {
            max_bytes: 2 * one,
            max_jobs: 1,
        };
        for key in ["k1", "k2"] {
            assert_eq!(state.admit(&put(key, "vvvv").demand(), limits), Ok(()));
            apply(&mut state, put(key, "vvvv"));
        }
        assert_eq!(
            state.admit(&put("k3", "vvvv").demand(), limits),
            Err(StoreFull::Bytes {
                used: 2 * one,
                adds: one,
                limit: 2 * one
            })
        );
        // A replacement no larger than what it replaces adds nothing; a larger one does.
        assert_eq!(state.admit(&put("k1", "wwww").demand(), limits), Ok(()));
        assert_eq!(state.admit(&put("k1", "w").demand(), limits), Ok(()));
        assert!(state.admit(&put("k1", "wwwww").demand(), limits).is_err());
        let delete = Write::Kv(KvCommand::Delete {
            key: "k1".to_owned(),
            if_revision: None,
        });
        assert_eq!(state.admit(&delete.demand(), limits), Ok(()));
        assert!(state.store_use().is_full(limits));
        apply(&mut state, delete);
        assert_eq!(state.admit(&put("k3", "vvvv").demand(), limits), Ok(()));

        let roomy = StoreLimits {
            max_bytes: u64::MAX,
            max_jobs: 1,
        };
        assert_eq!(state.admit(&enqueue("p").demand(), roomy), Ok(()));
        apply(&mut state, enqueue("p"));
        assert_eq!(
            state.admit(&enqueue("p").demand(), roomy),
            Err(StoreFull::Jobs { held: 1, limit: 1 })
        );
        assert!(state.store_use().is_full(roomy));
        assert_eq!(state.admit(&claim().demand(), roomy), Ok(()));
        assert!(
            StoreFull::Jobs { held: 1, limit: 1 }
                .to_string()
                .contains("log.max_jobs = 1")
        );
    }

    /// STORE-1: writes admitted together, none applied yet, cannot pass the bound between
    /// them: each is admitted beside what the earlier ones will add.
    #[test]
    fn writes_in_flight_hold_their_room() {
        let state = ClusterState::default();
        let one = key_weight("k1", "vvvv");
        let limits = StoreLimits {
            max_bytes: 2 * one,
            max_jobs: 2,
        };
        let mut pending = StoreUse::default();
        for key in ["k1", "k2"] {
            let adds = state
                .admit_beside(&put(key, "vvvv").demand(), limits, pending)
                .unwrap();
            assert_eq!(
                adds,
                StoreUse {
                    bytes: one,
                    jobs: 0
                }
            );
            pending.bytes += adds.bytes;
        }
        assert_eq!(
            state.admit_beside(&put("k3", "vvvv").demand(), limits, pending),
            Err(StoreFull::Bytes {
                used: 2 * one,
                adds: one,
                limit: 2 * one
            })
        );
        // Nothing applied: without the pending room the same write would pass.
        assert_eq!(state.admit(&put("k3", "vvvv").demand(), limits), Ok(()));

        let roomy = StoreLimits {
            max_bytes: u64::MAX,
            max_jobs: 2,
        };
        let pending = StoreUse { bytes: 0, jobs: 2 };
        assert_eq!(
            state.admit_beside(&enqueue("p").demand(), roomy, pending),
            Err(StoreFull::Jobs { held: 2, limit: 2 })
        );
        assert_eq!(
            state.admit_beside(&enqueue("p").demand(), roomy, StoreUse::default()),
            Ok(StoreUse {
                bytes: job_weight("q", "p"),
                jobs: 1
            })
        );
    }

    /// LOG-6: a write retried with the request id it was applied under only replays its
    /// answer, so a full store does not refuse it; a new write is refused.
    #[test]
    fn a_retry_of_an_applied_write_passes_a_full_store() {
        let mut state = ClusterState::default();
        let limits = StoreLimits {
            max_bytes: 1 << 20,
            max_jobs: 1,
        };
        let first = Command::new(enqueue("p")).with_request_id("r-1");
        assert_eq!(state.admit(&first.demand(), limits), Ok(()));
        assert!(state.apply(1, &first.encode().unwrap()).outcome().is_some());
        let other = Command::new(enqueue("p")).with_request_id("r-2");
        assert_eq!(
            state.admit(&other.demand(), limits),
            Err(StoreFull::Jobs { held: 1, limit: 1 })
        );
        assert_eq!(state.admit(&first.demand(), limits), Ok(()));
        let replayed = state.apply(2, &first.encode().unwrap());
        assert!(
            matches!(replayed, crate::Applied::Replayed(_)),
            "{replayed:?}"
        );
        assert_eq!(state.store_use().jobs, 1);
    }

    #[test]
    fn a_restored_store_weighs_what_the_original_did() {
        let mut state = ClusterState::default();
        apply(&mut state, put("a", "value"));
        apply(&mut state, enqueue("job"));
        let mut restored = ClusterState::default();
        restored.restore(&state.snapshot().unwrap()).unwrap();
        assert_eq!(restored.store_use(), state.store_use());
        assert_ne!(restored.store_use(), StoreUse::default());
    }
}
