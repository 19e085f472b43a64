//! The job queue's endpoints (LOG-5, LOG-6, SESS-3): enqueue, claim with a lease (at once, or
//! waiting a bounded time for a job to become ready), ack, nack, the dead letters' retry and
//! purge, and the paged list.

use serde::{Deserialize, Serialize};

use crate::common::Fencing;

/// The longest a claim may wait for a ready job (`wait_ms`), in milliseconds: a worker that
/// wants to wait longer claims again. Bounded so that a waiting claim never outlives the
/// clients, proxies and connections that carry it by much.
pub const MAX_CLAIM_WAIT_MS: u64 = 60_000;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for a worker.
    Ready,
    /// Held by a worker until its lease ends.
    Claimed,
    /// Acknowledged; it never runs again.
    Done,
    /// Its attempts are used up: a dead letter, until retried or purged.
    Dead,
}

impl JobState {
    /// The state as the JSON and the `state` query spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Claimed => "claimed",
            Self::Done => "done",
            Self::Dead => "dead",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a job's last attempt did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptFailure {
    /// The worker's lease ended before it acked, and the leader took the job back.
    LeaseExpired {
        /// The worker that held it.
        worker: String,
    },
    /// The worker gave it back.
    Nacked {
        /// The worker.
        worker: String,
        /// What it said; null when it said nothing.
        reason: Option<String>,
    },
    /// The session that held the claim ended (revoked, or its holder stopped keeping it
    /// alive), and the leader took the job back at once.
    SessionEnded {
        /// The worker that held it.
        worker: String,
        /// Its session.
        session: u64,
    },
}

/// A job: the one shape of a job everywhere it appears (an enqueue, a claim, an ack, a nack,
/// a retry, a list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Job {
    /// Its id, from 1, in the order jobs were enqueued.
    pub id: u64,
    /// Its queue.
    pub queue: String,
    /// What it is; opaque to the queue.
    pub payload: String,
    /// Where it is.
    pub state: JobState,
    /// Claims it got so far.
    pub attempts: u32,
    /// Claims it may get before it is dead-lettered.
    pub max_attempts: u32,
    /// While claimed: the worker holding it; null otherwise.
    pub worker: Option<String>,
    /// While claimed with a lease: when the lease would end, in milliseconds since the Unix
    /// epoch, on the wall clock of the leader that granted it; null otherwise. For display:
    /// the lease ends once `lease_ms` has passed on the leader's monotonic clock, counted
    /// afresh by each new leader, so never before this time and possibly after it.
    pub lease_until_unix_ms: Option<u64>,
    /// While claimed with a lease: how long the lease is, in milliseconds; null otherwise.
    pub lease_ms: Option<u64>,
    /// While claimed under a session: the session, which holds the job for as long as it
    /// lives; null otherwise.
    pub session: Option<u64>,
    /// Why its last attempt failed; null if none did.
    pub last_failure: Option<AttemptFailure>,
}

/// `POST /v1/jobs`: put a job in a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// What the job is (UTF-8 text; JSON in a string is common).
    pub payload: String,
    /// The queue; `default` without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Claims it may get before it is dead-lettered; 5 without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `POST /v1/jobs/claim`: give the oldest ready job of a queue to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Who takes the job.
    pub worker: String,
    /// The queue; `default` without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// How long the worker may hold it before the leader takes it back; 30000 without it.
    /// Not used with `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Hold the job for as long as this session lives instead of for a lease: when the
    /// session ends, the job is ready again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// The client's id for this write (applied at most once: a retried claim gets the same
    /// job and lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// When no job of the queue is ready: how long the leader waits for one, in milliseconds,
    /// 0 to 60000, before it answers `none_ready`; without it (or 0) the claim answers at
    /// once. Waiting writes nothing to the log. A leader change ends the wait with
    /// `not_leader`, naming the new leader when known: claim there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_CLAIM_WAIT_MS)))]
    pub wait_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/ack`: the worker finished the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// The worker that claimed it.
    pub worker: String,
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `POST /v1/jobs/{id}/nack`: the worker gives the job back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// The worker that claimed it.
    pub worker: String,
    /// Why, kept on the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `POST /v1/jobs/{id}/retry`: a dead job back in its queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `POST /v1/jobs/purge`: delete every dead job (of a queue).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    /// Only this queue's dead jobs; every queue's without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The query of `DELETE /v1/jobs/{id}` (a DELETE has no body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PurgeOneQuery {
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The query of `GET /v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    /// Only jobs in this state; all without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// Jobs per page, 1 to 1000; 100 without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The `continue` of the previous page, to read the next one.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_from: Option<String>,
    /// Read this node's copy as it is.
    #[serde(default)]
    pub stale: bool,
}

/// The answer of an enqueue, a claim, an ack, a nack and a retry: the job right after the
/// write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobAnswer {
    /// The job as the write left it (a replayed claim: as it was claimed then; any other
    /// replayed write: as it is now).
    pub job: Job,
    /// The request id was applied before: nothing changed now.
    pub replayed: bool,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The answer of `DELETE /v1/jobs/{id}` and `POST /v1/jobs/purge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PurgeAnswer {
    /// How many dead jobs were deleted.
    pub purged: usize,
    /// Their ids, ascending: all of them for one job, the first 100 for a purge of a queue's
    /// or every queue's dead jobs (`purged` counts them all).
    pub jobs: Vec<u64>,
    /// The request id was applied before: these are the jobs it deleted then.
    pub replayed: bool,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The answer of `GET /v1/jobs`: one page of jobs, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobListAnswer {
    /// The jobs, by id.
    pub jobs: Vec<Job>,
    /// Pass this as `continue` to read the next page; null on the last page.
    #[serde(rename = "continue")]
    pub continue_from: Option<String>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}
