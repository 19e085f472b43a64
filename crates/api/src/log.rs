//! `GET /v1/log`: the committed entries of the replicated log, each command decoded into a
//! tagged object.

use serde::{Deserialize, Serialize};

use crate::common::Fencing;

/// The query of `GET /v1/log`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// The first index wanted (entries compacted into a snapshot are gone: the answer starts
    /// at the first one kept).
    #[serde(default)]
    pub from: u64,
    /// Entries at most, 1 to 1000; 100 without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// What kind of entry it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogEntryKind {
    /// A new leader's first entry of its term.
    Noop,
    /// An entry without data, which older versions wrote for each linearizable read.
    Barrier,
    /// A client's write, or the leader's own (lease expiry).
    Command,
    /// Data that is no command this version reads; every node applied it as a no-op.
    Invalid,
}

/// A write as the log holds it: one tagged object per kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LogWrite {
    /// `PUT /v1/kv/{key}`.
    KvPut {
        /// The key.
        key: String,
        /// The new value.
        value: String,
        /// The compare on the key's revision, if any.
        if_revision: Option<u64>,
        /// The compare on the key's value, if any.
        if_value: Option<String>,
        /// The session the key goes with, if any.
        session: Option<u64>,
    },
    /// `DELETE /v1/kv/{key}`.
    KvDelete {
        /// The key.
        key: String,
        /// The compare on the key's revision, if any.
        if_revision: Option<u64>,
    },
    /// `POST /v1/jobs`.
    JobEnqueue {
        /// The queue.
        queue: String,
        /// The payload.
        payload: String,
        /// Claims it may get.
        max_attempts: u32,
    },
    /// `POST /v1/jobs/claim`.
    JobClaim {
        /// The queue.
        queue: String,
        /// The worker.
        worker: String,
        /// The lease.
        lease_ms: u64,
        /// The leader's wall clock when it proposed the claim (shown, never compared).
        now_unix_ms: u64,
        /// The session that holds the claim, if any.
        session: Option<u64>,
    },
    /// `POST /v1/jobs/{id}/ack`.
    JobAck {
        /// The job.
        job: u64,
        /// The worker.
        worker: String,
    },
    /// `POST /v1/jobs/{id}/nack`.
    JobNack {
        /// The job.
        job: u64,
        /// The worker.
        worker: String,
        /// Why, if it said.
        reason: Option<String>,
    },
    /// An older leader took back the leases that ended by its wall clock.
    JobExpireLeases {
        /// The leader's clock when it proposed the expiry.
        now_unix_ms: u64,
    },
    /// `POST /v1/jobs/{id}/retry`.
    JobRetry {
        /// The dead job.
        job: u64,
    },
    /// `DELETE /v1/jobs/{id}`.
    JobPurge {
        /// The dead job.
        job: u64,
    },
    /// `POST /v1/jobs/purge`.
    JobPurgeDead {
        /// Only this queue's dead jobs; null: every queue's.
        queue: Option<String>,
    },
    /// The leader takes back the claims whose lease ran out on its clock.
    JobExpireClaims {
        /// The claims: each a job and the index of the entry that claimed it.
        claims: Vec<ExpiredClaim>,
    },
    /// `POST /v1/sessions`.
    SessionGrant {
        /// The session's time to live.
        ttl_ms: u64,
        /// Its name, if any.
        name: Option<String>,
        /// The claims it may hold.
        max_claims: u32,
    },
    /// `DELETE /v1/sessions/{id}`.
    SessionRevoke {
        /// The session.
        session: u64,
    },
    /// The leader ends the sessions that got no keepalive for their TTL on its clock.
    SessionExpire {
        /// The sessions.
        sessions: Vec<u64>,
    },
}

/// A claim a [`LogWrite::JobExpireClaims`] names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExpiredClaim {
    /// The job.
    pub job: u64,
    /// The index of the entry that claimed it.
    pub claimed_at: u64,
}

/// A command: the write with the client's request id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogCommand {
    /// What it writes (`type` says which kind).
    #[serde(flatten)]
    pub write: LogWrite,
    /// The client's request id; null without one.
    pub request_id: Option<String>,
}

/// One committed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogEntry {
    /// Its index in the log.
    pub index: u64,
    /// The term of the leader that appended it.
    pub term: u64,
    /// What kind of entry it is.
    pub kind: LogEntryKind,
    /// The command of a `command` entry; null for the other kinds.
    pub command: Option<LogCommand>,
}

/// The answer of `GET /v1/log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogEntriesAnswer {
    /// The highest index this node knows committed.
    pub commit_index: u64,
    /// Committed entries from `from` on, in order.
    pub entries: Vec<LogEntry>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}
