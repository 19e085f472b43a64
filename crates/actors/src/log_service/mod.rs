//! The replicated log's client operations as typed calls (LOG-1, LOG-5..8): the key-value
//! store, the job queue and the log itself, taking conclave-api's requests and giving its
//! answers and errors. The admin API serves them over HTTP; the Rust façade calls them in
//! process. Neither builds or parses JSON of its own.
//!
//! - **Writes** are encoded as the state machine's commands (their bounds checked first) and
//!   proposed to the node; the answer comes once the entry is applied, with the jobs it names
//!   read in the same step. A node that does not lead refuses at once (`not_leader`, naming
//!   the leader and, when `admin.peer_urls` lists it, its admin API).
//! - **Reads** are linearizable by default (LOG-7: on the leader, at a read index a heartbeat
//!   round confirmed) or of this node's copy (`stale`). Lists are paged.
//! - **Outcomes not known in time.** A write not applied within [`APPLY_TIMEOUT`] is
//!   `timeout`, one whose node stopped is `outcome_unknown`: either may still be applied, so
//!   the client retries with the same request id (LOG-6). `lost`: its leader lost its term and
//!   it was not applied.
//! - **Waiting claims** (`waiting.rs`, SESS-3): a claim with `wait_ms` that finds no job
//!   ready waits on the leader, writing nothing, until one is (then claims it) or the wait
//!   has passed (`none_ready`); a leader change ends it with `not_leader`.
//! - **Snapshots** (`snapshot.rs`): the state machine's image at a committed index, as the
//!   saved-snapshot file `conclave snapshot save` writes, taken without stopping writes.
//! - Every answer and every error carries the fencing token as the node knew it when it
//!   answered, but `unavailable` (the node stopped: nothing to read).

mod convert;
mod members;
mod sessions;
mod snapshot;
mod waiting;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use conclave_api::{
    self as api, Compacted, Continuation, ErrorAnswer, ErrorCode, Fencing, KvWatchEvent,
    WRITE_SIZE_LIMIT,
};
use conclave_protocol::PeerId;
use conclave_statemachine::{
    self as machine, Applied, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, InvalidCommand, JobCommand,
    JobId, JobOutcome, KvCommand, KvOutcome, Outcome, Write,
};

pub use self::snapshot::SnapshotImage;
pub use self::waiting::MAX_WAITING_CLAIMS;
pub(crate) use self::waiting::WaitingClaims;
use crate::election::{Fenced, LogRefusal};
use crate::events::unix_millis;
use crate::machine::WriteOutcome;
use crate::member_directory::AdminUrls;
use crate::node::{NodeError, NodeHandle};

/// How long a write waits for its entry to be applied, or a linearizable read for its read
/// index to be confirmed and applied, before the client is told the outcome is not known yet.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A claim's lease when the worker asks for none.
pub const DEFAULT_LEASE_MS: u64 = 30_000;

/// How long an error path waits to read the fencing token it adds.
const FENCING_WAIT: Duration = Duration::from_secs(1);

/// The result of an operation: its answer, or the error to give the client.
pub type Answer<T> = Result<T, Box<ErrorAnswer>>;

/// The replicated log's client operations on one node. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogService {
    node: NodeHandle,
    peer_urls: AdminUrls,
}

impl LogService {
    /// The operations of `node`; `peer_urls` (`admin.peer_urls`), and the admin URLs the
    /// replicated configuration gives members added at runtime (MEMB-3), name the leader's
    /// admin API in a `not_leader` refusal.
    pub fn new(node: NodeHandle, peer_urls: BTreeMap<PeerId, String>) -> Self {
        let peer_urls = AdminUrls::new(peer_urls, node.member_directory().clone());
        Self { node, peer_urls }
    }

    /// Every admin URL this node knows, by peer: `admin.peer_urls` and the configuration's.
    pub fn admin_urls(&self) -> &AdminUrls {
        &self.peer_urls
    }

    // -----------------------------------------------------------------------------------------
    // key-value store

    /// `PUT /v1/kv/{key}`.
    pub async fn kv_put(&self, key: &str, request: api::PutRequest) -> Answer<api::KvWriteAnswer> {
        let write = Write::Kv(KvCommand::Put {
            key: key.to_owned(),
            value: request.value,
            if_revision: request.if_revision,
            if_value: request.if_value.clone(),
            session: request.session.map(machine::SessionId),
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        let compare = Compare {
            if_revision: request.if_revision,
            if_value: request.if_value,
        };
        self.kv_answer(key, outcome, fencing, &compare)
    }

    /// `DELETE /v1/kv/{key}`.
    pub async fn kv_delete(
        &self,
        key: &str,
        query: api::KvDeleteQuery,
    ) -> Answer<api::KvWriteAnswer> {
        let write = Write::Kv(KvCommand::Delete {
            key: key.to_owned(),
            if_revision: query.if_revision,
        });
        let (outcome, fencing) = self.write(write, query.request_id).await?;
        let compare = Compare {
            if_revision: query.if_revision,
            if_value: None,
        };
        self.kv_answer(key, outcome, fencing, &compare)
    }

    /// `GET /v1/kv/{key}`.
    pub async fn kv_get(&self, key: &str, stale: bool) -> Answer<api::KvGetAnswer> {
        if key.is_empty() {
            return Err(self.invalid_key().await);
        }
        let wanted = key.to_owned();
        let read = self
            .read(stale, move |state| {
                state.kv().get(&wanted).map(|kv| convert::key_value(&kv))
            })
            .await?;
        match read.value {
            Some(kv) => Ok(api::KvGetAnswer {
                kv,
                fencing: read.fencing,
            }),
            None => {
                let mut error = self.error(
                    ErrorCode::NotFound,
                    format!("no key {key:?}"),
                    Some(read.fencing),
                );
                error.key = Some(key.to_owned());
                Err(error)
            }
        }
    }

    /// `GET /v1/kv?prefix=`: one page.
    pub async fn kv_list(&self, query: &api::KvListQuery) -> Answer<api::KvListAnswer> {
        let limit = self
            .page_limit(query.limit, api::DEFAULT_PAGE_LIMIT, api::MAX_PAGE_LIMIT)
            .await?;
        let after = match query.continue_from.as_deref().map(Continuation::decode_key) {
            Some(Ok(key)) => Some(key),
            Some(Err(err)) => {
                return Err(self.error_now(ErrorCode::BadQuery, err.to_string()).await);
            }
            None => None,
        };
        let prefix = query.prefix.clone();
        let read = self
            .read(query.stale, move |state| {
                let kv = state.kv();
                let (page, more) = kv.page(&prefix, after.as_deref(), limit);
                let next = more
                    .then(|| page.last().map(|kv| Continuation::AfterKey(kv.key.clone())))
                    .flatten();
                (
                    kv.revision(),
                    page.iter().map(convert::key_value).collect::<Vec<_>>(),
                    next,
                )
            })
            .await?;
        let (revision, items, next) = read.value;
        Ok(api::KvListAnswer {
            revision,
            items,
            continue_from: next.map(|next| next.encode()),
            fencing: read.fencing,
        })
    }

    /// The changes of `key` from store revision `from` on, in this node's copy: what a watch
    /// sends next, or where the kept history starts when it no longer reaches `from`.
    pub async fn kv_changes(
        &self,
        key: &str,
        from: u64,
    ) -> Answer<Result<Vec<KvWatchEvent>, Compacted>> {
        let wanted = key.to_owned();
        let read = self
            .read(true, move |state| {
                match state
                    .kv()
                    .changes_from(from, machine::KeyFilter::Exact(&wanted))
                {
                    Ok(changes) => Ok(changes
                        .iter()
                        .map(|change| match change {
                            machine::Change::Put(kv) => KvWatchEvent::Put(convert::key_value(kv)),
                            machine::Change::Delete { key, revision } => {
                                KvWatchEvent::Delete(api::KvDeleted {
                                    key: key.clone(),
                                    revision: *revision,
                                })
                            }
                        })
                        .collect()),
                    Err(machine::Error::Compacted { oldest }) => Err(Compacted { oldest }),
                    // `changes_from` fails only for a compacted history.
                    Err(_) => Ok(Vec::new()),
                }
            })
            .await?;
        Ok(read.value)
    }

    // -----------------------------------------------------------------------------------------
    // job queue

    /// `POST /v1/jobs`.
    pub async fn enqueue(&self, request: api::EnqueueRequest) -> Answer<api::JobAnswer> {
        let write = Write::Jobs(JobCommand::Enqueue {
            queue: request.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
            payload: request.payload,
            max_attempts: request.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.job_answer(outcome, fencing, None)
    }

    /// `POST /v1/jobs/claim`: at once, or with `wait_ms` waiting for a job to become ready
    /// (SESS-3, `waiting.rs`).
    pub async fn claim(&self, request: api::ClaimRequest) -> Answer<api::JobAnswer> {
        match request.wait_ms {
            None | Some(0) => self.claim_now(request).await,
            Some(wait_ms) if wait_ms > api::MAX_CLAIM_WAIT_MS => Err(self
                .error_now(
                    ErrorCode::InvalidArgument,
                    format!(
                        "wait_ms must be 0 to {}, found {wait_ms}: a worker that wants to wait \
                         longer claims again",
                        api::MAX_CLAIM_WAIT_MS
                    ),
                )
                .await),
            Some(wait_ms) => {
                self.claim_waiting(request, Duration::from_millis(wait_ms))
                    .await
            }
        }
    }

    /// A claim answered at once: the oldest ready job, or `none_ready`.
    async fn claim_now(&self, request: api::ClaimRequest) -> Answer<api::JobAnswer> {
        let queue = request.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_owned());
        let write = Write::Jobs(JobCommand::Claim {
            queue: queue.clone(),
            worker: request.worker,
            lease_ms: request.lease_ms.unwrap_or(DEFAULT_LEASE_MS),
            // Shown with the job; the lease itself runs on the leader's monotonic clock.
            now_unix_ms: unix_millis(SystemTime::now()),
            session: request.session.map(machine::SessionId),
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.job_answer(outcome, fencing, Some(&queue))
    }

    /// `POST /v1/jobs/{id}/ack`.
    pub async fn ack(&self, job: u64, request: api::AckRequest) -> Answer<api::JobAnswer> {
        let write = Write::Jobs(JobCommand::Ack {
            job: JobId(job),
            worker: request.worker,
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.job_answer(outcome, fencing, None)
    }

    /// `POST /v1/jobs/{id}/nack`.
    pub async fn nack(&self, job: u64, request: api::NackRequest) -> Answer<api::JobAnswer> {
        let write = Write::Jobs(JobCommand::Nack {
            job: JobId(job),
            worker: request.worker,
            reason: request.reason,
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.job_answer(outcome, fencing, None)
    }

    /// `POST /v1/jobs/{id}/retry`.
    pub async fn retry(&self, job: u64, request: api::RetryRequest) -> Answer<api::JobAnswer> {
        let write = Write::Jobs(JobCommand::Retry { job: JobId(job) });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.job_answer(outcome, fencing, None)
    }

    /// `DELETE /v1/jobs/{id}`.
    pub async fn purge_one(&self, job: u64, query: api::PurgeOneQuery) -> Answer<api::PurgeAnswer> {
        let write = Write::Jobs(JobCommand::Purge { job: JobId(job) });
        let (outcome, fencing) = self.write(write, query.request_id).await?;
        self.purge_answer(outcome, fencing)
    }

    /// `POST /v1/jobs/purge`.
    pub async fn purge(&self, request: api::PurgeRequest) -> Answer<api::PurgeAnswer> {
        // No queue means every queue: DEFAULT_QUEUE is not filled in here, as a purge of
        // "default" only would delete less than the operator asked for.
        let write = Write::Jobs(JobCommand::PurgeDead {
            queue: request.queue,
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        self.purge_answer(outcome, fencing)
    }

    /// The queue of `job`, when the state machine (linearizable unless `stale`) holds it: what
    /// the admin API checks a queue-limited token's ack, nack or retry against (SEC-2).
    pub async fn job_queue(&self, job: u64, stale: bool) -> Answer<Option<String>> {
        let read = self
            .read(stale, move |state_machine| {
                state_machine
                    .jobs()
                    .get(JobId(job))
                    .map(|job| job.queue.clone())
            })
            .await?;
        Ok(read.value)
    }

    /// `GET /v1/jobs`: one page.
    pub async fn jobs_list(&self, query: &api::JobListQuery) -> Answer<api::JobListAnswer> {
        let limit = self
            .page_limit(query.limit, api::DEFAULT_PAGE_LIMIT, api::MAX_PAGE_LIMIT)
            .await?;
        let after = match query.continue_from.as_deref().map(Continuation::decode_job) {
            Some(Ok(id)) => Some(JobId(id)),
            Some(Err(err)) => {
                return Err(self.error_now(ErrorCode::BadQuery, err.to_string()).await);
            }
            None => None,
        };
        let state = query.state.map(convert::state_kind);
        let read = self
            .read(query.stale, move |state_machine| {
                let (page, more) = state_machine.jobs().page(state, after, limit);
                let next = more
                    .then(|| page.last().map(|job| Continuation::AfterJob(job.id.0)))
                    .flatten();
                (page.into_iter().map(convert::job).collect::<Vec<_>>(), next)
            })
            .await?;
        let (jobs, next) = read.value;
        Ok(api::JobListAnswer {
            jobs,
            continue_from: next.map(|next| next.encode()),
            fencing: read.fencing,
        })
    }

    // -----------------------------------------------------------------------------------------
    // the log

    /// `GET /v1/log`.
    pub async fn log_entries(&self, query: &api::LogQuery) -> Answer<api::LogEntriesAnswer> {
        let limit = self
            .page_limit(query.limit, api::LOG_DEFAULT_LIMIT, api::LOG_MAX_LIMIT)
            .await?;
        let answer = self
            .node
            .committed_entries(query.from, limit)
            .await
            .map_err(|err| self.unavailable(&err))?;
        let fencing = fencing(answer.term, answer.leader);
        match answer.outcome {
            Ok(read) => Ok(api::LogEntriesAnswer {
                commit_index: read.commit,
                entries: read.entries.iter().map(convert::log_entry).collect(),
                fencing,
            }),
            Err(refusal) => Err(self.refused(refusal, fencing)),
        }
    }

    // -----------------------------------------------------------------------------------------
    // errors the HTTP layer raises itself

    /// The fencing token now, read from the election (for an error raised before the node was
    /// asked anything); `None` when the node does not answer in time.
    pub async fn fencing(&self) -> Option<Fencing> {
        let status = tokio::time::timeout(FENCING_WAIT, self.node.election_status())
            .await
            .ok()?
            .ok()?;
        Some(fencing(status.term, status.leader))
    }

    /// An error answer of this node: its code, message, id and the fencing token.
    pub fn error(
        &self,
        code: ErrorCode,
        message: impl Into<String>,
        fencing: Option<Fencing>,
    ) -> Box<ErrorAnswer> {
        let mut answer = ErrorAnswer::new(code, message);
        answer.node_id = Some(self.node.node_id().to_string());
        if let Some(fencing) = fencing {
            answer = answer.with_fencing(fencing);
        }
        Box::new(answer)
    }

    /// The same, with the fencing token read now.
    pub async fn error_now(&self, code: ErrorCode, message: impl Into<String>) -> Box<ErrorAnswer> {
        let fencing = match code {
            // A stranger learns nothing; a stopped node has nothing to read.
            ErrorCode::Unauthorized | ErrorCode::Unavailable => None,
            _ => self.fencing().await,
        };
        self.error(code, message, fencing)
    }

    /// 503 `unavailable`: the node stopped.
    pub fn unavailable(&self, err: &NodeError) -> Box<ErrorAnswer> {
        self.error(ErrorCode::Unavailable, err.to_string(), None)
    }

    // -----------------------------------------------------------------------------------------
    // the way through the log

    /// Proposes `write` with the client's request id and waits until it is applied.
    async fn write(
        &self,
        write: Write,
        request_id: Option<String>,
    ) -> Answer<(WriteOutcome, Fencing)> {
        let mut command = machine::Command::new(write);
        if let Some(id) = request_id {
            command = command.with_request_id(id);
        }
        let demand = command.demand();
        // Encoding checks the command's bounds (once, on this hot path) and names the first
        // one broken.
        let data = match command.encode() {
            Ok(data) => data,
            Err(machine::Error::InvalidCommand(invalid)) => {
                return Err(self.invalid(&invalid).await);
            }
            Err(err) => return Err(self.error_now(ErrorCode::Internal, err.to_string()).await),
        };
        let answer =
            match tokio::time::timeout(APPLY_TIMEOUT, self.node.propose(data, demand)).await {
                Ok(answer) => answer.map_err(|err| self.unavailable(&err))?,
                Err(_) => return Err(self.timed_out().await),
            };
        let fencing = fencing(answer.term, answer.leader);
        match answer.outcome {
            Ok(outcome) => Ok((outcome, fencing)),
            Err(refusal) => Err(self.refused(refusal, fencing)),
        }
    }

    /// Runs `read` on the state machine (linearizable unless `stale`).
    async fn read<T: Send + 'static>(
        &self,
        stale: bool,
        read: impl FnOnce(&machine::ClusterState) -> T + Send + 'static,
    ) -> Answer<Read<T>> {
        let answer = match tokio::time::timeout(APPLY_TIMEOUT, self.node.read(stale, read)).await {
            Ok(answer) => answer.map_err(|err| self.unavailable(&err))?,
            Err(_) => return Err(self.timed_out().await),
        };
        let Fenced {
            outcome,
            term,
            leader,
        } = answer;
        let fencing = fencing(term, leader);
        match outcome {
            Ok(value) => Ok(Read { value, fencing }),
            Err(refusal) => Err(self.refused(refusal, fencing)),
        }
    }

    /// The error of a write or read the node refused.
    fn refused(&self, refusal: LogRefusal, fencing: Fencing) -> Box<ErrorAnswer> {
        let (code, message) = match &refusal {
            LogRefusal::NotLeader {
                leader: Some(leader),
            } => (
                ErrorCode::NotLeader,
                match self.peer_urls.get(leader) {
                    Some(url) => {
                        format!("this node does not lead; {leader} does: send the request to {url}")
                    }
                    None => format!(
                        "this node does not lead; {leader} does: send the request to its admin \
                         API (list it in admin.peer_urls to have it named here)"
                    ),
                },
            ),
            LogRefusal::NotLeader { leader: None } => (
                ErrorCode::NotLeader,
                "this node does not lead and knows no leader now (an election is under way, or \
                 no quorum is reachable); retry shortly"
                    .to_owned(),
            ),
            LogRefusal::Disabled => (
                ErrorCode::LogDisabled,
                "this node runs no replicated log, so it keeps no keys or jobs: start every voter \
                 with log.enabled = true (in the configuration file's [log] section, or \
                 CONCLAVE__LOG__ENABLED=true in the environment); the log needs raft mode with \
                 quorum = \"voters\""
                    .to_owned(),
            ),
            LogRefusal::TooLarge(reason) => {
                (ErrorCode::TooLarge, format!("{reason}. {WRITE_SIZE_LIMIT}"))
            }
            LogRefusal::StoreFull(reason) => (ErrorCode::StoreFull, reason.clone()),
            LogRefusal::Busy => (ErrorCode::Busy, refusal.to_string()),
            LogRefusal::Lost => (ErrorCode::Lost, refusal.to_string()),
            LogRefusal::Unknown => (ErrorCode::OutcomeUnknown, refusal.to_string()),
            LogRefusal::Membership(err) => Self::membership_refusal(err),
        };
        let mut error = self.error(code, message, Some(fencing));
        if let LogRefusal::NotLeader {
            leader: Some(leader),
        } = refusal
        {
            error.leader_admin_url = self.peer_urls.get(&leader);
        }
        error
    }

    /// 504: not applied (or not read) in time.
    pub(super) async fn timed_out(&self) -> Box<ErrorAnswer> {
        self.error_now(
            ErrorCode::Timeout,
            format!(
                "not done within {} s: the cluster may have lost its leader or its quorum; a \
                 write may still be applied later, so retry it with the same request_id",
                APPLY_TIMEOUT.as_secs()
            ),
        )
        .await
    }

    /// A command out of its bounds: 413 for a value or payload too large, else 400.
    async fn invalid(&self, invalid: &InvalidCommand) -> Box<ErrorAnswer> {
        match invalid {
            InvalidCommand::TooLarge { .. } => {
                self.error_now(
                    ErrorCode::TooLarge,
                    format!("{invalid}. {WRITE_SIZE_LIMIT}"),
                )
                .await
            }
            InvalidCommand::Length { field: "key", .. } if is_empty(invalid) => {
                self.invalid_key().await
            }
            _ => {
                self.error_now(ErrorCode::InvalidArgument, invalid.to_string())
                    .await
            }
        }
    }

    async fn invalid_key(&self) -> Box<ErrorAnswer> {
        self.error_now(
            ErrorCode::InvalidArgument,
            "the key is empty: name it in the path, /v1/kv/{key} (GET /v1/kv?prefix= lists keys)",
        )
        .await
    }

    /// A page limit as asked, within 1 and `max`.
    async fn page_limit(&self, asked: Option<usize>, default: usize, max: usize) -> Answer<usize> {
        match asked {
            None => Ok(default),
            Some(limit) if (1..=max).contains(&limit) => Ok(limit),
            Some(limit) => Err(self
                .error_now(
                    ErrorCode::BadQuery,
                    format!("limit must be 1 to {max}, found {limit}"),
                )
                .await),
        }
    }

    /// The answer of a key-value write.
    fn kv_answer(
        &self,
        key: &str,
        outcome: WriteOutcome,
        fencing: Fencing,
        compare: &Compare,
    ) -> Answer<api::KvWriteAnswer> {
        let (outcome, replayed) = match self.outcome(outcome.applied, &fencing)? {
            (Outcome::Kv(outcome), replayed) => (outcome, replayed),
            (Outcome::Sessions(refusal), _) => return Err(self.session_refusal(refusal, fencing)),
            (Outcome::Jobs(_), _) => return Err(self.mismatched(fencing)),
        };
        match outcome {
            KvOutcome::Applied { revision, previous } => Ok(api::KvWriteAnswer {
                key: key.to_owned(),
                revision,
                previous: previous.as_ref().map(convert::key_value),
                replayed,
                fencing,
            }),
            KvOutcome::CompareFailed { current } => {
                let mut error = self.error(
                    ErrorCode::CompareFailed,
                    compare.failure(key, current.as_ref()),
                    Some(fencing),
                );
                error.key = Some(key.to_owned());
                error.current = Some(current.as_ref().map(convert::key_value));
                Err(error)
            }
            KvOutcome::NotFound => {
                let mut error = self.error(
                    ErrorCode::NotFound,
                    format!("no key {key:?}"),
                    Some(fencing),
                );
                error.key = Some(key.to_owned());
                Err(error)
            }
        }
    }

    /// The answer of a job write that answers with a job.
    fn job_answer(
        &self,
        outcome: WriteOutcome,
        fencing: Fencing,
        queue: Option<&str>,
    ) -> Answer<api::JobAnswer> {
        let jobs = outcome.jobs;
        let (outcome, replayed) = match self.outcome(outcome.applied, &fencing)? {
            (Outcome::Jobs(outcome), replayed) => (outcome, replayed),
            (Outcome::Sessions(refusal), _) => return Err(self.session_refusal(refusal, fencing)),
            (Outcome::Kv(_), _) => return Err(self.mismatched(fencing)),
        };
        let answer = |job: &machine::Job| api::JobAnswer {
            job: convert::job(job),
            replayed,
            fencing: fencing.clone(),
        };
        match outcome {
            JobOutcome::Claimed(job) | JobOutcome::Retried(job) => Ok(answer(&job)),
            JobOutcome::Enqueued { job }
            | JobOutcome::Acked { job }
            | JobOutcome::Requeued { job, .. }
            | JobOutcome::DeadLettered { job, .. } => match jobs.iter().find(|j| j.id == job) {
                Some(found) => Ok(answer(found)),
                None => Err(self.job_error(
                    ErrorCode::UnknownJob,
                    job,
                    None,
                    format!(
                        "job {job} was written by this request id before, and is forgotten \
                         since (done long ago, or purged)"
                    ),
                    fencing.clone(),
                )),
            },
            JobOutcome::NoneReady => Err(self.error(
                ErrorCode::NoneReady,
                format!(
                    "no job of queue {:?} is ready",
                    queue.unwrap_or(DEFAULT_QUEUE)
                ),
                Some(fencing),
            )),
            other => self.job_refusal(other, fencing),
        }
    }

    /// The answer of a purge.
    fn purge_answer(&self, outcome: WriteOutcome, fencing: Fencing) -> Answer<api::PurgeAnswer> {
        let (outcome, replayed) = match self.outcome(outcome.applied, &fencing)? {
            (Outcome::Jobs(outcome), replayed) => (outcome, replayed),
            (Outcome::Sessions(refusal), _) => return Err(self.session_refusal(refusal, fencing)),
            (Outcome::Kv(_), _) => return Err(self.mismatched(fencing)),
        };
        match outcome {
            JobOutcome::Purged { jobs } => Ok(api::PurgeAnswer {
                purged: jobs.len(),
                jobs: jobs.iter().map(|job| job.0).collect(),
                replayed,
                fencing,
            }),
            JobOutcome::PurgedMany { count, first } => Ok(api::PurgeAnswer {
                purged: usize::try_from(count).unwrap_or(usize::MAX),
                jobs: first.iter().map(|job| job.0).collect(),
                replayed,
                fencing,
            }),
            other => self.job_refusal(other, fencing),
        }
    }

    /// The refusals of the job queue: a job unknown, not held, not dead.
    fn job_refusal<T>(&self, outcome: JobOutcome, fencing: Fencing) -> Answer<T> {
        Err(match outcome {
            JobOutcome::UnknownJob { job } => self.job_error(
                ErrorCode::UnknownJob,
                job,
                None,
                format!("no job {job}: never enqueued, or done long ago or purged, and forgotten"),
                fencing,
            ),
            JobOutcome::NotHeld { job, state } => self.job_error(
                ErrorCode::NotHeld,
                job,
                Some(&state),
                format!(
                    "this worker does not hold job {job}: {} (its lease was taken back, another \
                     worker holds it, or it is done or dead)",
                    describe_state(&state)
                ),
                fencing,
            ),
            JobOutcome::NotDead { job, state } => self.job_error(
                ErrorCode::NotDead,
                job,
                Some(&state),
                format!(
                    "job {job} is {}, not dead: only a dead job can be retried or purged",
                    convert::job_state(&state)
                ),
                fencing,
            ),
            other => {
                tracing::warn!(?other, "a job write answered what its request cannot");
                self.error(
                    ErrorCode::Internal,
                    "the job queue answered this request with an outcome of another",
                    Some(fencing),
                )
            }
        })
    }

    fn job_error(
        &self,
        code: ErrorCode,
        job: JobId,
        state: Option<&machine::JobState>,
        message: String,
        fencing: Fencing,
    ) -> Box<ErrorAnswer> {
        let mut error = self.error(code, message, Some(fencing));
        error.job_id = Some(job.0);
        error.state = state.map(convert::job_state);
        error
    }

    /// A write's outcome and whether it was replayed, or the error of an entry the state
    /// machine did not apply as a write.
    fn outcome(&self, applied: Applied, fencing: &Fencing) -> Answer<(Outcome, bool)> {
        match applied {
            Applied::Answered(outcome) => Ok((outcome, false)),
            Applied::Replayed(outcome) => Ok((outcome, true)),
            Applied::RequestIdInUse { request_id } => {
                let mut error = self.error(
                    ErrorCode::RequestIdInUse,
                    format!(
                        "request id {request_id:?} was used before for another write; nothing \
                         changed (draw request ids at random, or prefix them with the client's \
                         name)"
                    ),
                    Some(fencing.clone()),
                );
                error.request_id = Some(request_id);
                Err(error)
            }
            Applied::Rejected(err) => Err(self.error(
                ErrorCode::Internal,
                format!("the state machine refused the entry: {err}"),
                Some(fencing.clone()),
            )),
            Applied::Noop | Applied::NotNext { .. } => Err(self.error(
                ErrorCode::Internal,
                "the write's entry was not applied as a command",
                Some(fencing.clone()),
            )),
        }
    }

    fn mismatched(&self, fencing: Fencing) -> Box<ErrorAnswer> {
        self.error(
            ErrorCode::Internal,
            "the state machine answered this write with an outcome of another store",
            Some(fencing),
        )
    }
}

/// A read's value with the fencing token.
struct Read<T> {
    value: T,
    fencing: Fencing,
}

/// The comparisons of a write, to say which one failed.
struct Compare {
    if_revision: Option<u64>,
    if_value: Option<String>,
}

impl Compare {
    /// Why the comparison did not hold, for the 412 answer's message.
    fn failure(&self, key: &str, current: Option<&machine::KeyValue>) -> String {
        let Some(current) = current else {
            return format!("{key:?} does not exist; nothing changed");
        };
        if self.if_revision == Some(0) {
            return format!(
                "{key:?} exists (revision {}) and if_revision = 0 asks that it does not; nothing \
                 changed",
                current.mod_revision
            );
        }
        if let Some(expected) = self.if_revision.filter(|r| *r != current.mod_revision) {
            return format!(
                "{key:?} is at revision {}, not {expected}; nothing changed",
                current.mod_revision
            );
        }
        if self
            .if_value
            .as_ref()
            .is_some_and(|value| *value != current.value)
        {
            let shown = if current.value.chars().count() <= 64 {
                format!(" (it is {:?})", current.value)
            } else {
                String::new()
            };
            return format!(
                "{key:?} does not hold the value if_value gives{shown}; nothing changed"
            );
        }
        format!("the comparison on {key:?} did not hold; nothing changed")
    }
}

fn is_empty(invalid: &InvalidCommand) -> bool {
    matches!(invalid, InvalidCommand::Length { len: 0, .. })
}

/// A job's state for a message: `claimed by w2`, `done`, `dead`, `ready`.
fn describe_state(state: &machine::JobState) -> String {
    match state {
        machine::JobState::Claimed { worker, .. } => format!("it is claimed by {worker}"),
        other => format!("it is {}", convert::job_state(other)),
    }
}

/// The fencing token of `(term, leader)`.
pub fn fencing(term: u64, leader: Option<PeerId>) -> Fencing {
    Fencing {
        term,
        leader: leader.map(|leader| leader.to_string()),
        fencing_token: leader.map(|leader| format!("{term}:{leader}")),
    }
}
