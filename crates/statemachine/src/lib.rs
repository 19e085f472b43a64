//! conclave's replicated state machines (LOG-5, LOG-6): the [`StateMachine`] trait the
//! replicated log applies committed entries to, and [`ClusterState`], the built-in one: a
//! key-value store of cluster facts ([`KvStore`]: one store-wide revision, compare-and-set,
//! watch from a revision) and seed 004's job queue ([`JobQueue`]: enqueue, claim with a lease,
//! ack, nack, lease expiry, dead letters an operator retries or purges), with a table of
//! applied request ids so that a retried write is applied at most once.
//!
//! This crate is sans-IO and deterministic, like `conclave-core`: it reads no clock and draws
//! no random number; every time comes inside a command, stamped by the leader that proposed
//! it. Effects happen on apply only, so every node that applies the same committed entries
//! holds the same state and gives the same answers.
//!
//! ```text
//!   client write ──▶ leader: Command::encode ──▶ ReplicatedLog::propose(now, data)
//!                                                         │ committed
//!   answer ◀── Applied ◀── ClusterState::apply_entry ◀── take_committed (every node)
//!
//!   reads (get, list, changes_from, jobs list) ──▶ the local ClusterState, once it has
//!                                                  applied the read index (LOG-7)
//! ```
//!
//! Leases and sessions end only through the log: the leader counts them on its own monotonic
//! clock ([`LeaseClock`]) and writes [`JobCommand::ExpireClaims`] and
//! [`SessionCommand::Expire`]; no node compares a wall clock, and no follower counts at all.

#![deny(missing_docs)]

mod codec;
mod command;
mod error;
mod jobs;
mod kv;
mod lease_clock;
mod requests;
mod sessions;
mod state;
mod store_bounds;

pub use command::{
    COMMAND_FORMAT, Command, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobCommand, KvCommand,
    MAX_ATTEMPTS_LIMIT, MAX_EXPIRE_BATCH, MAX_KEY_LEN, MAX_LEASE_MS, MAX_NAME_LEN, MAX_PAYLOAD_LEN,
    MAX_REASON_LEN, MAX_REQUEST_ID_LEN, MAX_VALUE_LEN, Write,
};
pub use error::{Error, InvalidCommand, Result};
pub use jobs::{
    AttemptFailure, ClaimRef, DONE_JOB_RETENTION, Job, JobId, JobOutcome, JobQueue, JobState,
    JobStateKind, PURGE_ANSWER_IDS,
};
pub use kv::{Change, KeyFilter, KeyValue, KvOutcome, KvStore};
pub use lease_clock::{EXPIRY_RETRY_MS, LeaseClock, UNRECORDED_LEASE_MS};
pub use requests::REQUEST_ID_CAPACITY;
pub use sessions::{
    DEFAULT_SESSION_CLAIMS, EndedSession, MAX_LIVE_SESSIONS, MAX_SESSION_CLAIMS,
    MAX_SESSION_TTL_MS, MIN_SESSION_TTL_MS, Session, SessionCommand, SessionId, SessionOutcome,
    Sessions,
};
pub use state::{Applied, ClusterState, Outcome, SNAPSHOT_FORMAT, StateConfig, StateMachine};
pub use store_bounds::{
    JOB_OVERHEAD, KV_ENTRY_OVERHEAD, MAX_KEY_WEIGHT, StoreDemand, StoreFull, StoreLimits, StoreUse,
};
