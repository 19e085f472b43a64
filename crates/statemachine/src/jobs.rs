//! The job queue of seed 004 (LOG-5): jobs are enqueued, claimed by a worker with a lease,
//! acknowledged, given back (nack), taken back when their lease expires, and dead-lettered
//! once their attempts are used up; an operator retries a dead job (ready again, its attempts
//! reset) or purges dead jobs (deleted).
//!
//! How it behaves is documented on [`JobQueue`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::command::JobCommand;
use crate::error::{Error, Result};
use crate::sessions::SessionId;
use crate::store_bounds::job_weight;

/// Done jobs kept, the oldest forgotten first. A constant of the state machine, not a
/// setting: replicas that kept different numbers would answer a late ack differently.
pub const DONE_JOB_RETENTION: usize = 10_000;

/// A job's id, from 1, in the order jobs were enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Waiting for a worker.
    Ready,
    /// Held by `worker` until its lease runs out on the leader's clock, or for as long as
    /// its session lives.
    Claimed {
        /// The worker holding it.
        worker: String,
        /// When the lease would end on the wall clock of the leader that granted it, had no
        /// leader changed: shown to operators, never compared with a clock (SESS-0). The
        /// largest `u64` for a claim held by a session.
        lease_until_unix_ms: u64,
        // The fields below were added later, with defaults, so older snapshots still read.
        /// The lease asked for; 0 in claims older than this field.
        #[serde(default)]
        lease_ms: u64,
        /// The log index of the claim's entry: which claim of the job this is.
        #[serde(default)]
        claimed_at: u64,
        /// The session that holds the claim, if one does.
        #[serde(default)]
        session: Option<SessionId>,
    },
    /// Acknowledged; it never runs again.
    Done,
    /// Its attempts are used up (the dead-letter queue).
    Dead,
}

impl JobState {
    /// The state without its details, as `list` takes it.
    #[must_use]
    pub fn kind(&self) -> JobStateKind {
        match self {
            Self::Ready => JobStateKind::Ready,
            Self::Claimed { .. } => JobStateKind::Claimed,
            Self::Done => JobStateKind::Done,
            Self::Dead => JobStateKind::Dead,
        }
    }
}

/// A [`JobState`] without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobStateKind {
    /// Waiting for a worker.
    Ready,
    /// Held by a worker.
    Claimed,
    /// Acknowledged.
    Done,
    /// Dead-lettered.
    Dead,
}

/// Why a job's last attempt did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttemptFailure {
    /// The worker's lease ended before it acked.
    LeaseExpired {
        /// The worker that held it.
        worker: String,
    },
    /// The worker gave it back.
    Nacked {
        /// The worker.
        worker: String,
        /// What it said.
        reason: Option<String>,
    },
    /// The session that held the claim ended (appended: outcomes and jobs in snapshots keep
    /// the variants above).
    SessionEnded {
        /// The worker.
        worker: String,
        /// Its session.
        session: SessionId,
    },
}

/// One claim of one job: a claim's job and the index of the entry that made it, so that an
/// expiry decided for a claim never ends a later claim of the same job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClaimRef {
    /// The job.
    pub job: JobId,
    /// The index of the claim's entry.
    pub claimed_at: u64,
}

/// A job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// What it is; opaque to the queue.
    pub payload: String,
    /// Claims it may get before it is dead-lettered.
    pub max_attempts: u32,
    /// Claims it got.
    pub attempts: u32,
    /// Where it is.
    pub state: JobState,
    /// Why its last attempt failed, if one did.
    pub last_failure: Option<AttemptFailure>,
}

/// What a write to the job queue answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobOutcome {
    /// The job was added, ready.
    Enqueued {
        /// Its id.
        job: JobId,
    },
    /// The job given to the worker, with its lease (boxed: outcomes are remembered by the
    /// request-id table, and most are small).
    Claimed(Box<Job>),
    /// No job of the queue is ready; nothing changed.
    NoneReady,
    /// The job is done.
    Acked {
        /// The job.
        job: JobId,
    },
    /// The job was given back and is ready again.
    Requeued {
        /// The job.
        job: JobId,
        /// Claims it got so far.
        attempts: u32,
    },
    /// The job was given back with its attempts used up: it is dead.
    DeadLettered {
        /// The job.
        job: JobId,
        /// Claims it got.
        attempts: u32,
    },
    /// The leases that ended were taken back.
    LeasesExpired {
        /// Jobs ready again, by lease end then id.
        requeued: Vec<JobId>,
        /// Jobs whose attempts are used up, by lease end then id.
        dead_lettered: Vec<JobId>,
    },
    /// No such job (never enqueued, or done and forgotten); nothing changed.
    UnknownJob {
        /// The job asked for.
        job: JobId,
    },
    /// An ack or nack from a worker that does not hold the job (another does, its lease was
    /// taken back, or the job is done or dead); nothing changed.
    NotHeld {
        /// The job.
        job: JobId,
        /// Where the job is.
        state: JobState,
    },
    // Added later, appended: snapshots remember outcomes with their request ids.
    /// The dead job is ready again, at the front of its queue, its attempts reset to 0 (boxed
    /// as [`Claimed`](Self::Claimed) is).
    Retried(Box<Job>),
    /// The dead jobs were deleted, by id (none when there were none).
    Purged {
        /// The jobs deleted.
        jobs: Vec<JobId>,
    },
    /// A retry or purge of a job that is not dead; nothing changed.
    NotDead {
        /// The job.
        job: JobId,
        /// Where the job is.
        state: JobState,
    },
    // Appended after `NotDead`: a purge of every dead job answered with all their ids made an
    // answer (and the outcome kept with its request id, in every snapshot) as large as the
    // dead-letter pile. Older nodes answered such a purge with `Purged`.
    /// The dead jobs of a queue, or of all queues, were deleted: how many, and the ids of
    /// the first [`PURGE_ANSWER_IDS`] of them.
    PurgedMany {
        /// How many were deleted.
        count: u64,
        /// The lowest ids among them, at most [`PURGE_ANSWER_IDS`], ascending.
        first: Vec<JobId>,
    },
}

/// How many ids the answer to a purge of every dead job names: the count covers the rest.
pub const PURGE_ANSWER_IDS: usize = 100;

/// The job queue of seed 004.
///
/// ```text
///            Enqueue          Claim (attempts += 1)          Ack
///   (new) ──────────▶ Ready ─────────────────────▶ Claimed ──────▶ Done
///                       ▲                            │
///                       ├── Nack / ExpireLeases ─────┤ attempts < max_attempts
///                       │                            └──────────────────────▶ Dead ──▶ (gone)
///                       │                              attempts = max_attempts  │  Purge,
///                       └── Retry (attempts = 0) ───────────────────────────────┘  PurgeDead
/// ```
///
/// Time never comes from this node's clock, nor from any wall clock: a claim records how long
/// its lease is (`lease_ms`) and which entry made it (`claimed_at`), and a lease ends only when
/// the leader writes [`JobCommand::ExpireClaims`] for it into the log, once the lease has run
/// on the leader's monotonic clock (see [`LeaseClock`](crate::LeaseClock)). A worker whose
/// lease has run out may still ack until that entry is applied, everywhere at the same point
/// of the log. A claim made with a session is the worker's until the session ends
/// (see [`SessionCommand`](crate::SessionCommand)). Delivery is at least once (a worker slower than its lease
/// may see its job given to another); what never happens is a job running again once it is
/// acked: a done job is never ready again, and an ack or a nack from a worker that no longer
/// holds the job is refused.
///
/// Job ids come from a counter in the state, so every replica numbers jobs alike. A claim
/// takes the ready job with the lowest id in its queue: a job given back keeps its place at
/// the front. Done jobs are kept for [`DONE_JOB_RETENTION`] acks so that `list` can show them
/// and a late ack is told the job is done; older ones are forgotten (a late ack of one is
/// answered [`JobOutcome::UnknownJob`], and it still cannot run again).
///
/// Dead jobs are kept, for an operator to look at (`list`), until an operator acts on them:
/// [`JobCommand::Retry`] makes one ready again with its attempts reset to 0 (it keeps its id,
/// payload, queue, attempt limit and last failure, and as the lowest id it goes to the front
/// of its queue, as a job given back does); [`JobCommand::Purge`] deletes one, and
/// [`JobCommand::PurgeDead`] every one of a queue or of all queues. Both are refused
/// ([`JobOutcome::NotDead`]) for a job in any other state: a job a worker may still hold or
/// finish is not the operator's to restart or delete. A purged job is forgotten like an old
/// done job: asked for again, it is unknown, and its id is never given to another job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQueue {
    /// The id the next enqueued job gets.
    next_id: u64,
    jobs: BTreeMap<JobId, Job>,
    /// Done jobs, in the order they were acked: the first is forgotten first.
    done_order: VecDeque<JobId>,
    /// Ready jobs per queue; derived from `jobs`, rebuilt on restore.
    #[serde(skip)]
    ready: BTreeMap<String, BTreeSet<JobId>>,
    /// Claimed jobs without a session, by wall-clock lease end (what an older leader's
    /// [`JobCommand::ExpireLeases`] compares); derived from `jobs`, rebuilt on restore.
    #[serde(skip)]
    leases: BTreeSet<(u64, JobId)>,
    /// Claimed jobs by the session holding them; derived from `jobs`, rebuilt on restore.
    #[serde(skip)]
    held: BTreeMap<SessionId, BTreeSet<JobId>>,
    #[serde(skip)]
    done_retention: usize,
    /// STORE-1, STORE-2: what the jobs not done weigh, and how many they are; derived from
    /// `jobs`, rebuilt on restore.
    #[serde(skip)]
    live: LiveJobs,
}

/// The jobs not done (ready, claimed or dead), as the store's bounds count them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LiveJobs {
    count: u64,
    weight: u64,
}

impl LiveJobs {
    fn add(&mut self, job: &Job) {
        self.count = self.count.saturating_add(1);
        self.weight = self
            .weight
            .saturating_add(job_weight(&job.queue, &job.payload));
    }

    fn remove(&mut self, job: &Job) {
        self.count = self.count.saturating_sub(1);
        self.weight = self
            .weight
            .saturating_sub(job_weight(&job.queue, &job.payload));
    }
}

impl JobQueue {
    pub(crate) fn new(done_retention: usize) -> Self {
        Self {
            next_id: 1,
            jobs: BTreeMap::new(),
            done_order: VecDeque::new(),
            ready: BTreeMap::new(),
            leases: BTreeSet::new(),
            held: BTreeMap::new(),
            done_retention,
            live: LiveJobs::default(),
        }
    }

    /// STORE-1: what the jobs not done weigh, as the store's bounds count it.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.live.weight
    }

    /// STORE-2: how many jobs are not done (ready, claimed or dead).
    #[must_use]
    pub fn live(&self) -> u64 {
        self.live.count
    }

    /// How many jobs are known, in any state (done jobs as long as they are kept).
    #[must_use]
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether no job is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The job, if it is known.
    #[must_use]
    pub fn get(&self, job: JobId) -> Option<&Job> {
        self.jobs.get(&job)
    }

    /// Whether a job of `queue` is ready, so that a claim of it now would get one (SESS-3: a
    /// waiting claim looks before it proposes).
    #[must_use]
    pub fn has_ready(&self, queue: &str) -> bool {
        self.ready.get(queue).is_some_and(|ready| !ready.is_empty())
    }

    /// The jobs in `state`, by id.
    #[must_use]
    pub fn list(&self, state: JobStateKind) -> Vec<&Job> {
        self.jobs
            .values()
            .filter(|job| job.state.kind() == state)
            .collect()
    }

    /// One page of the jobs (in `state`, or all), by id: at most `limit` of those after
    /// `after` (from the first without it), and whether more follow.
    #[must_use]
    pub fn page(
        &self,
        state: Option<JobStateKind>,
        after: Option<JobId>,
        limit: usize,
    ) -> (Vec<&Job>, bool) {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut jobs = self
            .jobs
            .range((start, std::ops::Bound::Unbounded))
            .map(|(_, job)| job)
            .filter(|job| state.is_none_or(|state| job.state.kind() == state));
        let page: Vec<&Job> = jobs.by_ref().take(limit).collect();
        let more = jobs.next().is_some();
        (page, more)
    }

    /// The jobs claimed without a session (their leases run on the leader's clock), by
    /// wall-clock lease end.
    pub fn leased(&self) -> impl Iterator<Item = &Job> {
        self.leases.iter().filter_map(|(_, id)| self.jobs.get(id))
    }

    /// How many claims `session` holds.
    #[must_use]
    pub fn held_by(&self, session: SessionId) -> usize {
        self.held.get(&session).map_or(0, BTreeSet::len)
    }

    /// Applies `command`, carried by the entry at `index`.
    pub(crate) fn apply(&mut self, index: u64, command: &JobCommand) -> JobOutcome {
        match command {
            JobCommand::Enqueue {
                queue,
                payload,
                max_attempts,
            } => self.enqueue(queue, payload, *max_attempts),
            JobCommand::Claim {
                queue,
                worker,
                lease_ms,
                now_unix_ms,
                session,
            } => {
                let lease_until_unix_ms = match session {
                    Some(_) => u64::MAX,
                    None => now_unix_ms.saturating_add(*lease_ms),
                };
                let claim = JobState::Claimed {
                    worker: worker.clone(),
                    lease_until_unix_ms,
                    lease_ms: *lease_ms,
                    claimed_at: index,
                    session: *session,
                };
                self.claim(queue, claim)
            }
            JobCommand::Ack { job, worker } => self.ack(*job, worker),
            JobCommand::Nack {
                job,
                worker,
                reason,
            } => self.nack(*job, worker, reason.clone()),
            JobCommand::ExpireLeases { now_unix_ms } => self.expire_leases(*now_unix_ms),
            JobCommand::Retry { job } => self.retry(*job),
            JobCommand::Purge { job } => self.purge(*job),
            JobCommand::PurgeDead { queue } => self.purge_dead(queue.as_deref()),
            JobCommand::ExpireClaims { claims } => self.expire_claims(claims),
        }
    }

    fn enqueue(&mut self, queue: &str, payload: &str, max_attempts: u32) -> JobOutcome {
        let id = JobId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        let job = Job {
            id,
            queue: queue.to_owned(),
            payload: payload.to_owned(),
            max_attempts,
            attempts: 0,
            state: JobState::Ready,
            last_failure: None,
        };
        self.live.add(&job);
        self.jobs.insert(id, job);
        self.ready.entry(queue.to_owned()).or_default().insert(id);
        JobOutcome::Enqueued { job: id }
    }

    /// Gives the oldest ready job of `queue` the `claim` (a [`JobState::Claimed`]).
    fn claim(&mut self, queue: &str, claim: JobState) -> JobOutcome {
        let Some(ready) = self.ready.get_mut(queue) else {
            return JobOutcome::NoneReady;
        };
        let next = ready.pop_first();
        if ready.is_empty() {
            self.ready.remove(queue);
        }
        let Some(job) = next.and_then(|id| self.jobs.get_mut(&id)) else {
            return JobOutcome::NoneReady;
        };
        job.attempts = job.attempts.saturating_add(1);
        match &claim {
            JobState::Claimed {
                session: Some(session),
                ..
            } => {
                self.held.entry(*session).or_default().insert(job.id);
            }
            JobState::Claimed {
                lease_until_unix_ms,
                ..
            } => {
                self.leases.insert((*lease_until_unix_ms, job.id));
            }
            _ => {}
        }
        job.state = claim;
        JobOutcome::Claimed(Box::new(job.clone()))
    }

    fn ack(&mut self, id: JobId, worker: &str) -> JobOutcome {
        if let Err(refusal) = self.release_claim(id, worker) {
            return refusal;
        }
        if let Some(job) = self.jobs.get_mut(&id) {
            self.live.remove(job);
            job.state = JobState::Done;
        }
        self.done_order.push_back(id);
        while self.done_order.len() > self.done_retention {
            if let Some(forgotten) = self.done_order.pop_front() {
                self.jobs.remove(&forgotten);
            }
        }
        JobOutcome::Acked { job: id }
    }

    fn nack(&mut self, id: JobId, worker: &str, reason: Option<String>) -> JobOutcome {
        if let Err(refusal) = self.release_claim(id, worker) {
            return refusal;
        }
        let failure = AttemptFailure::Nacked {
            worker: worker.to_owned(),
            reason,
        };
        match self.give_back(id, failure) {
            Some((attempts, true)) => JobOutcome::DeadLettered { job: id, attempts },
            Some((attempts, false)) => JobOutcome::Requeued { job: id, attempts },
            None => JobOutcome::UnknownJob { job: id },
        }
    }

    fn expire_leases(&mut self, now_unix_ms: u64) -> JobOutcome {
        let ended: Vec<(u64, JobId)> = self
            .leases
            .range(..=(now_unix_ms, JobId(u64::MAX)))
            .copied()
            .collect();
        let mut requeued = Vec::new();
        let mut dead_lettered = Vec::new();
        for lease in ended {
            self.leases.remove(&lease);
            let (_, id) = lease;
            let worker = match self.jobs.get(&id).map(|job| &job.state) {
                Some(JobState::Claimed { worker, .. }) => worker.clone(),
                _ => continue,
            };
            match self.give_back(id, AttemptFailure::LeaseExpired { worker }) {
                Some((_, true)) => dead_lettered.push(id),
                Some((_, false)) => requeued.push(id),
                None => {}
            }
        }
        JobOutcome::LeasesExpired {
            requeued,
            dead_lettered,
        }
    }

    /// The leader's expiry of the claims named (SESS-0): each that still stands (same
    /// `claimed_at`, no session) is taken back.
    fn expire_claims(&mut self, claims: &[ClaimRef]) -> JobOutcome {
        let mut requeued = Vec::new();
        let mut dead_lettered = Vec::new();
        for claim in claims {
            let worker = match self.jobs.get(&claim.job).map(|job| &job.state) {
                Some(JobState::Claimed {
                    worker,
                    claimed_at,
                    session: None,
                    ..
                }) if *claimed_at == claim.claimed_at => worker.clone(),
                _ => continue,
            };
            self.forget_claim(claim.job);
            match self.give_back(claim.job, AttemptFailure::LeaseExpired { worker }) {
                Some((_, true)) => dead_lettered.push(claim.job),
                Some((_, false)) => requeued.push(claim.job),
                None => {}
            }
        }
        JobOutcome::LeasesExpired {
            requeued,
            dead_lettered,
        }
    }

    /// Takes back every job `session` holds, because it ended (SESS-2): each is ready again,
    /// or dead if its attempts are used up; the claim counts as a failed attempt. Returns
    /// the jobs requeued and those dead-lettered, by id.
    pub(crate) fn release_session(&mut self, session: SessionId) -> (Vec<JobId>, Vec<JobId>) {
        let mut requeued = Vec::new();
        let mut dead_lettered = Vec::new();
        for id in self.held.remove(&session).unwrap_or_default() {
            let worker = match self.jobs.get(&id).map(|job| &job.state) {
                Some(JobState::Claimed { worker, .. }) => worker.clone(),
                _ => continue,
            };
            match self.give_back(id, AttemptFailure::SessionEnded { worker, session }) {
                Some((_, true)) => dead_lettered.push(id),
                Some((_, false)) => requeued.push(id),
                None => {}
            }
        }
        (requeued, dead_lettered)
    }

    /// Drops a claimed job from the indexes of claims (its lease or its session's).
    fn forget_claim(&mut self, id: JobId) {
        let Some(JobState::Claimed {
            lease_until_unix_ms,
            session,
            ..
        }) = self.jobs.get(&id).map(|job| &job.state)
        else {
            return;
        };
        match session {
            Some(session) => {
                if let Some(held) = self.held.get_mut(session) {
                    held.remove(&id);
                    if held.is_empty() {
                        self.held.remove(session);
                    }
                }
            }
            None => {
                self.leases.remove(&(*lease_until_unix_ms, id));
            }
        }
    }

    fn retry(&mut self, id: JobId) -> JobOutcome {
        if let Err(refusal) = self.check_dead(id) {
            return refusal;
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return JobOutcome::UnknownJob { job: id };
        };
        // A dead job is in neither index (no lease, not ready), so only `ready` gains it.
        job.attempts = 0;
        job.state = JobState::Ready;
        self.ready.entry(job.queue.clone()).or_default().insert(id);
        JobOutcome::Retried(Box::new(job.clone()))
    }

    fn purge(&mut self, id: JobId) -> JobOutcome {
        if let Err(refusal) = self.check_dead(id) {
            return refusal;
        }
        if let Some(job) = self.jobs.remove(&id) {
            self.live.remove(&job);
        }
        JobOutcome::Purged { jobs: vec![id] }
    }

    fn purge_dead(&mut self, queue: Option<&str>) -> JobOutcome {
        let doomed: Vec<JobId> = self
            .jobs
            .values()
            .filter(|job| job.state == JobState::Dead)
            .filter(|job| queue.is_none_or(|queue| job.queue == queue))
            .map(|job| job.id)
            .collect();
        for id in &doomed {
            if let Some(job) = self.jobs.remove(id) {
                self.live.remove(&job);
            }
        }
        JobOutcome::PurgedMany {
            count: doomed.len() as u64,
            first: doomed.into_iter().take(PURGE_ANSWER_IDS).collect(),
        }
    }

    /// Says why the job is not dead, if it is not.
    fn check_dead(&self, id: JobId) -> Result<(), JobOutcome> {
        match self.jobs.get(&id).map(|job| &job.state) {
            None => Err(JobOutcome::UnknownJob { job: id }),
            Some(JobState::Dead) => Ok(()),
            Some(state) => Err(JobOutcome::NotDead {
                job: id,
                state: state.clone(),
            }),
        }
    }

    /// Ends `worker`'s claim on the job, or says why it holds none.
    fn release_claim(&mut self, id: JobId, worker: &str) -> Result<(), JobOutcome> {
        let Some(job) = self.jobs.get(&id) else {
            return Err(JobOutcome::UnknownJob { job: id });
        };
        match &job.state {
            JobState::Claimed { worker: holder, .. } if holder == worker => {
                self.forget_claim(id);
                Ok(())
            }
            state => Err(JobOutcome::NotHeld {
                job: id,
                state: state.clone(),
            }),
        }
    }

    /// Makes a job whose claim ended ready again, or dead when its attempts are used up.
    /// Returns its attempts and whether it died.
    fn give_back(&mut self, id: JobId, failure: AttemptFailure) -> Option<(u32, bool)> {
        let job = self.jobs.get_mut(&id)?;
        job.last_failure = Some(failure);
        let dead = job.attempts >= job.max_attempts;
        if dead {
            job.state = JobState::Dead;
        } else {
            job.state = JobState::Ready;
            self.ready.entry(job.queue.clone()).or_default().insert(id);
        }
        Some((job.attempts, dead))
    }

    /// Checks a queue decoded from a snapshot, rebuilds its indexes and adopts this build's
    /// retention.
    pub(crate) fn restored(mut self, done_retention: usize) -> Result<Self> {
        self.ready.clear();
        self.leases.clear();
        self.held.clear();
        self.live = LiveJobs::default();
        let mut done = 0;
        for (id, job) in &self.jobs {
            if job.id != *id || id.0 == 0 || id.0 >= self.next_id {
                return Err(Error::InconsistentSnapshot("a job's id is out of place"));
            }
            if job.state != JobState::Done {
                self.live.add(job);
            }
            match &job.state {
                JobState::Ready => {
                    self.ready.entry(job.queue.clone()).or_default().insert(*id);
                }
                JobState::Claimed {
                    session: Some(session),
                    ..
                } => {
                    self.held.entry(*session).or_default().insert(*id);
                }
                JobState::Claimed {
                    lease_until_unix_ms,
                    ..
                } => {
                    self.leases.insert((*lease_until_unix_ms, *id));
                }
                JobState::Done => done += 1,
                JobState::Dead => {}
            }
        }
        let listed: BTreeSet<JobId> = self.done_order.iter().copied().collect();
        let all_done = listed.len() == self.done_order.len()
            && listed.len() == done
            && listed
                .iter()
                .all(|id| self.jobs.get(id).map(|job| &job.state) == Some(&JobState::Done));
        if !all_done {
            return Err(Error::InconsistentSnapshot(
                "the done jobs and their order disagree",
            ));
        }
        self.done_retention = done_retention;
        while self.done_order.len() > self.done_retention {
            if let Some(forgotten) = self.done_order.pop_front() {
                self.jobs.remove(&forgotten);
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE_MS: u64 = 500;

    fn enqueue(queue: &mut JobQueue, payload: &str, max_attempts: u32) -> JobId {
        match queue.apply(
            0,
            &JobCommand::Enqueue {
                queue: "default".into(),
                payload: payload.into(),
                max_attempts,
            },
        ) {
            JobOutcome::Enqueued { job } => job,
            other => panic!("enqueue answered {other:?}"),
        }
    }

    fn claim(queue: &mut JobQueue, worker: &str, now_unix_ms: u64) -> JobOutcome {
        queue.apply(
            0,
            &JobCommand::Claim {
                queue: "default".into(),
                worker: worker.into(),
                lease_ms: LEASE_MS,
                now_unix_ms,
                session: None,
            },
        )
    }

    fn claimed_id(outcome: JobOutcome) -> JobId {
        match outcome {
            JobOutcome::Claimed(job) => job.id,
            other => panic!("claim answered {other:?}"),
        }
    }

    fn ack(queue: &mut JobQueue, job: JobId, worker: &str) -> JobOutcome {
        queue.apply(
            0,
            &JobCommand::Ack {
                job,
                worker: worker.into(),
            },
        )
    }

    fn nack(queue: &mut JobQueue, job: JobId, worker: &str, reason: &str) -> JobOutcome {
        queue.apply(
            0,
            &JobCommand::Nack {
                job,
                worker: worker.into(),
                reason: Some(reason.into()),
            },
        )
    }

    fn expire(queue: &mut JobQueue, now_unix_ms: u64) -> JobOutcome {
        queue.apply(0, &JobCommand::ExpireLeases { now_unix_ms })
    }

    fn ids(jobs: Vec<&Job>) -> Vec<JobId> {
        jobs.into_iter().map(|job| job.id).collect()
    }

    /// LOG-8: jobs are listed a page at a time by id, all of them or those of one state, and
    /// a page says whether more follow.
    #[test]
    fn jobs_are_listed_a_page_at_a_time() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        for n in 0..5 {
            enqueue(&mut queue, &format!("job {n}"), 1);
        }
        let first = claimed_id(claim(&mut queue, "w", 0));
        assert_eq!(
            ack(&mut queue, first, "w"),
            JobOutcome::Acked { job: first }
        );
        let (page, more) = queue.page(None, None, 2);
        assert_eq!((ids(page), more), (vec![JobId(1), JobId(2)], true));
        let (page, more) = queue.page(None, Some(JobId(2)), 2);
        assert_eq!((ids(page), more), (vec![JobId(3), JobId(4)], true));
        let (page, more) = queue.page(None, Some(JobId(4)), 2);
        assert_eq!((ids(page), more), (vec![JobId(5)], false));
        let (ready, more) = queue.page(Some(JobStateKind::Ready), None, 3);
        assert_eq!(
            (ids(ready), more),
            (vec![JobId(2), JobId(3), JobId(4)], true)
        );
        let (done, more) = queue.page(Some(JobStateKind::Done), None, 3);
        assert_eq!((ids(done), more), (vec![first], false));
        assert_eq!(
            queue.page(Some(JobStateKind::Dead), None, 3),
            (Vec::new(), false)
        );
    }

    /// LOG-5: enqueue → claim (a lease from the leader's clock, one attempt) → ack; a done
    /// job is listed as done and no claim returns it.
    #[test]
    fn a_job_is_enqueued_claimed_and_acked() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "resize image 7", 3);
        assert_eq!(id, JobId(1));
        assert_eq!(ids(queue.list(JobStateKind::Ready)), [id]);

        let JobOutcome::Claimed(job) = claim(&mut queue, "worker-1", 10_000) else {
            panic!("nothing claimed");
        };
        assert_eq!(
            *job,
            Job {
                id,
                queue: "default".into(),
                payload: "resize image 7".into(),
                max_attempts: 3,
                attempts: 1,
                state: JobState::Claimed {
                    worker: "worker-1".into(),
                    lease_until_unix_ms: 10_000 + LEASE_MS,
                    lease_ms: LEASE_MS,
                    claimed_at: 0,
                    session: None,
                },
                last_failure: None,
            }
        );
        assert_eq!(claim(&mut queue, "worker-2", 10_001), JobOutcome::NoneReady);
        assert_eq!(
            ack(&mut queue, id, "worker-1"),
            JobOutcome::Acked { job: id }
        );
        assert_eq!(queue.get(id).map(|job| &job.state), Some(&JobState::Done));
        assert_eq!(ids(queue.list(JobStateKind::Done)), [id]);
        assert_eq!(claim(&mut queue, "worker-2", 10_002), JobOutcome::NoneReady);
    }

    /// LOG-5: a lease ends only by the leader's ExpireLeases; one that ends at `now` is taken
    /// back, one that ends a millisecond later is not (both sides of the edge).
    #[test]
    fn expire_leases_requeues_at_the_lease_end_not_before() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "p", 3);
        claimed_id(claim(&mut queue, "w1", 1_000));
        assert_eq!(
            expire(&mut queue, 1_000 + LEASE_MS - 1),
            JobOutcome::LeasesExpired {
                requeued: vec![],
                dead_lettered: vec![]
            }
        );
        assert_eq!(ids(queue.list(JobStateKind::Claimed)), [id]);
        assert_eq!(
            expire(&mut queue, 1_000 + LEASE_MS),
            JobOutcome::LeasesExpired {
                requeued: vec![id],
                dead_lettered: vec![]
            }
        );
        let job = queue.get(id).unwrap();
        assert_eq!(job.state, JobState::Ready);
        assert_eq!(
            job.last_failure,
            Some(AttemptFailure::LeaseExpired {
                worker: "w1".into()
            })
        );
        // The worker that lost the lease can no longer ack; the next claim counts attempt 2.
        assert_eq!(
            ack(&mut queue, id, "w1"),
            JobOutcome::NotHeld {
                job: id,
                state: JobState::Ready
            }
        );
        let JobOutcome::Claimed(again) = claim(&mut queue, "w2", 2_000) else {
            panic!("not claimed again");
        };
        assert_eq!(again.attempts, 2);
    }

    /// LOG-5: until the expiry is applied, the holder of a lease that has run out on some
    /// clock may still ack: no node decides expiry on its own clock.
    #[test]
    fn a_late_ack_before_the_expiry_entry_is_accepted() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "p", 3);
        claimed_id(claim(&mut queue, "w1", 1_000));
        assert_eq!(ack(&mut queue, id, "w1"), JobOutcome::Acked { job: id });
        assert_eq!(
            expire(&mut queue, u64::MAX),
            JobOutcome::LeasesExpired {
                requeued: vec![],
                dead_lettered: vec![]
            }
        );
    }

    /// LOG-5: a job whose attempts are used up is dead-lettered when its last lease expires,
    /// listed as dead, and never claimed again.
    #[test]
    fn dead_letter_after_max_attempts() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "poison", 2);
        claimed_id(claim(&mut queue, "w1", 0));
        assert!(matches!(
            expire(&mut queue, LEASE_MS),
            JobOutcome::LeasesExpired { ref requeued, .. } if requeued == &[id]
        ));
        claimed_id(claim(&mut queue, "w2", 1_000));
        assert_eq!(
            expire(&mut queue, 1_000 + LEASE_MS),
            JobOutcome::LeasesExpired {
                requeued: vec![],
                dead_lettered: vec![id]
            }
        );
        assert_eq!(ids(queue.list(JobStateKind::Dead)), [id]);
        assert_eq!(queue.get(id).unwrap().attempts, 2);
        assert_eq!(claim(&mut queue, "w3", 2_000), JobOutcome::NoneReady);
    }

    /// LOG-5: a nack gives the job back with its reason, ready again, or dead on its last
    /// attempt.
    #[test]
    fn nack_requeues_then_dead_letters() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "p", 2);
        claimed_id(claim(&mut queue, "w1", 0));
        assert_eq!(
            nack(&mut queue, id, "w1", "disk full"),
            JobOutcome::Requeued {
                job: id,
                attempts: 1
            }
        );
        assert_eq!(
            queue.get(id).unwrap().last_failure,
            Some(AttemptFailure::Nacked {
                worker: "w1".into(),
                reason: Some("disk full".into())
            })
        );
        claimed_id(claim(&mut queue, "w1", 10));
        assert_eq!(
            nack(&mut queue, id, "w1", "still full"),
            JobOutcome::DeadLettered {
                job: id,
                attempts: 2
            }
        );
        // Its lease is gone with the claim: a later expiry does not touch it.
        assert_eq!(
            expire(&mut queue, u64::MAX),
            JobOutcome::LeasesExpired {
                requeued: vec![],
                dead_lettered: vec![]
            }
        );
        assert_eq!(ids(queue.list(JobStateKind::Dead)), [id]);
    }

    /// LOG-5: an ack or nack from a worker that does not hold the job, of a done job, or of
    /// an unknown job is refused with the job's state and changes nothing.
    #[test]
    fn acks_from_the_wrong_worker_or_twice_are_refused() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "p", 3);
        assert_eq!(
            ack(&mut queue, id, "w1"),
            JobOutcome::NotHeld {
                job: id,
                state: JobState::Ready
            }
        );
        claimed_id(claim(&mut queue, "w1", 0));
        let held = JobState::Claimed {
            worker: "w1".into(),
            lease_until_unix_ms: LEASE_MS,
            lease_ms: LEASE_MS,
            claimed_at: 0,
            session: None,
        };
        assert_eq!(
            ack(&mut queue, id, "w2"),
            JobOutcome::NotHeld {
                job: id,
                state: held.clone()
            }
        );
        assert_eq!(
            nack(&mut queue, id, "w2", "not mine"),
            JobOutcome::NotHeld {
                job: id,
                state: held
            }
        );
        assert_eq!(ack(&mut queue, id, "w1"), JobOutcome::Acked { job: id });
        assert_eq!(
            ack(&mut queue, id, "w1"),
            JobOutcome::NotHeld {
                job: id,
                state: JobState::Done
            }
        );
        assert_eq!(
            nack(&mut queue, id, "w1", "oops"),
            JobOutcome::NotHeld {
                job: id,
                state: JobState::Done
            }
        );
        assert_eq!(
            ack(&mut queue, JobId(99), "w1"),
            JobOutcome::UnknownJob { job: JobId(99) }
        );
    }

    /// LOG-5: whatever leases expire, an acked job never runs again: claims return only the
    /// jobs not done, oldest first, then nothing.
    #[test]
    fn a_claim_never_returns_an_acked_job() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let first = enqueue(&mut queue, "1", 5);
        let second = enqueue(&mut queue, "2", 5);
        let third = enqueue(&mut queue, "3", 5);
        assert_eq!(claimed_id(claim(&mut queue, "w", 0)), first);
        assert_eq!(claimed_id(claim(&mut queue, "w", 0)), second);
        assert_eq!(claimed_id(claim(&mut queue, "w", 0)), third);
        ack(&mut queue, second, "w");
        assert!(matches!(
            expire(&mut queue, 10 * LEASE_MS),
            JobOutcome::LeasesExpired { ref requeued, .. } if requeued == &[first, third]
        ));
        assert_eq!(claimed_id(claim(&mut queue, "v", 20 * LEASE_MS)), first);
        assert_eq!(claimed_id(claim(&mut queue, "v", 20 * LEASE_MS)), third);
        assert_eq!(claim(&mut queue, "v", 20 * LEASE_MS), JobOutcome::NoneReady);
    }

    /// LOG-5: queues are apart: a claim takes from its own queue only.
    #[test]
    fn claims_take_from_their_own_queue() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let mail = queue.apply(
            0,
            &JobCommand::Enqueue {
                queue: "mail".into(),
                payload: "send".into(),
                max_attempts: 1,
            },
        );
        assert_eq!(claim(&mut queue, "w", 0), JobOutcome::NoneReady);
        let claimed = queue.apply(
            0,
            &JobCommand::Claim {
                queue: "mail".into(),
                worker: "w".into(),
                lease_ms: 1,
                now_unix_ms: 0,
                session: None,
            },
        );
        assert!(
            matches!((mail, claimed), (JobOutcome::Enqueued { job }, JobOutcome::Claimed(got)) if got.id == job)
        );
    }

    /// SESS-3: a queue has a ready job from its enqueue until it is claimed, and again once
    /// it is given back; another queue's jobs do not count.
    #[test]
    fn a_queue_has_a_ready_job_while_a_claim_would_get_one() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        assert!(!queue.has_ready("default"));
        let id = enqueue(&mut queue, "resize", 3);
        assert!(queue.has_ready("default"));
        assert!(!queue.has_ready("mail"));
        assert_eq!(claimed_id(claim(&mut queue, "w", 0)), id);
        assert!(!queue.has_ready("default"));
        nack(&mut queue, id, "w", "busy");
        assert!(queue.has_ready("default"));
    }

    /// LOG-5: done jobs are kept up to the retention, then forgotten oldest first; a late ack
    /// of a forgotten job is unknown, and it still never runs again.
    #[test]
    fn done_jobs_are_forgotten_beyond_the_retention() {
        let mut queue = JobQueue::new(2);
        let jobs: Vec<JobId> = (0..3)
            .map(|n| enqueue(&mut queue, &n.to_string(), 1))
            .collect();
        for &job in &jobs {
            claimed_id(claim(&mut queue, "w", 0));
            ack(&mut queue, job, "w");
        }
        assert_eq!(ids(queue.list(JobStateKind::Done)), jobs[1..]);
        assert_eq!(queue.get(jobs[0]), None);
        assert_eq!(
            ack(&mut queue, jobs[0], "w"),
            JobOutcome::UnknownJob { job: jobs[0] }
        );
        assert_eq!(claim(&mut queue, "w", 0), JobOutcome::NoneReady);
    }

    fn retry(queue: &mut JobQueue, job: JobId) -> JobOutcome {
        queue.apply(0, &JobCommand::Retry { job })
    }

    fn purge(queue: &mut JobQueue, job: JobId) -> JobOutcome {
        queue.apply(0, &JobCommand::Purge { job })
    }

    fn purge_dead(queue: &mut JobQueue, of: Option<&str>) -> JobOutcome {
        queue.apply(
            0,
            &JobCommand::PurgeDead {
                queue: of.map(str::to_owned),
            },
        )
    }

    /// Claims the next job of the default queue and nacks it, `times` times.
    fn claim_and_nack(queue: &mut JobQueue, times: u32) -> JobOutcome {
        let mut last = JobOutcome::NoneReady;
        for _ in 0..times {
            let id = claimed_id(claim(queue, "w", 0));
            last = nack(queue, id, "w", "fails");
        }
        last
    }

    /// A dead job of `queue_name` with one attempt.
    fn dead_job(queue: &mut JobQueue, queue_name: &str) -> JobId {
        let JobOutcome::Enqueued { job } = queue.apply(
            0,
            &JobCommand::Enqueue {
                queue: queue_name.into(),
                payload: format!("dies in {queue_name}"),
                max_attempts: 1,
            },
        ) else {
            panic!("not enqueued");
        };
        let claimed = queue.apply(
            0,
            &JobCommand::Claim {
                queue: queue_name.into(),
                worker: "w".into(),
                lease_ms: LEASE_MS,
                now_unix_ms: 0,
                session: None,
            },
        );
        assert_eq!(claimed_id(claimed), job);
        assert!(matches!(
            nack(queue, job, "w", "poison"),
            JobOutcome::DeadLettered { .. }
        ));
        job
    }

    /// A retried dead job is ready again with its attempts at 0, claimed before the jobs
    /// enqueued after it, and dead-lettered again once it uses up its attempts anew.
    #[test]
    fn a_retried_dead_job_runs_again_and_can_die_again() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let id = enqueue(&mut queue, "poison", 2);
        assert_eq!(
            claim_and_nack(&mut queue, 2),
            JobOutcome::DeadLettered {
                job: id,
                attempts: 2
            }
        );
        let later = enqueue(&mut queue, "later", 2);

        let JobOutcome::Retried(retried) = retry(&mut queue, id) else {
            panic!("not retried");
        };
        assert_eq!(retried.id, id);
        assert_eq!(retried.payload, "poison");
        assert_eq!(retried.queue, "default");
        assert_eq!((retried.attempts, retried.max_attempts), (0, 2));
        assert_eq!(retried.state, JobState::Ready);
        assert_eq!(Some(&*retried), queue.get(id));
        assert!(queue.list(JobStateKind::Dead).is_empty());
        assert_eq!(ids(queue.list(JobStateKind::Ready)), [id, later]);

        // The front of the queue: claimed before the job enqueued after it died.
        let JobOutcome::Claimed(again) = claim(&mut queue, "w", 0) else {
            panic!("not claimed again");
        };
        assert_eq!((again.id, again.attempts), (id, 1));
        nack(&mut queue, id, "w", "fails again");
        let JobOutcome::Claimed(last) = claim(&mut queue, "w", 0) else {
            panic!("not claimed a last time");
        };
        assert_eq!((last.id, last.attempts), (id, 2));
        assert_eq!(
            nack(&mut queue, id, "w", "still"),
            JobOutcome::DeadLettered {
                job: id,
                attempts: 2
            }
        );
        assert_eq!(ids(queue.list(JobStateKind::Dead)), [id]);
    }

    /// Only a dead job is retried or purged: a ready, claimed or done one is refused with its
    /// state and left as it was; an unknown one is answered unknown.
    #[test]
    fn retry_and_purge_refuse_a_job_that_is_not_dead() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let done = enqueue(&mut queue, "done", 3);
        let claimed = enqueue(&mut queue, "claimed", 3);
        let ready = enqueue(&mut queue, "ready", 3);
        claimed_id(claim(&mut queue, "w", 0));
        ack(&mut queue, done, "w");
        claimed_id(claim(&mut queue, "w", 0));
        let held = JobState::Claimed {
            worker: "w".into(),
            lease_until_unix_ms: LEASE_MS,
            lease_ms: LEASE_MS,
            claimed_at: 0,
            session: None,
        };
        let before = queue.clone();
        for (job, state) in [
            (ready, JobState::Ready),
            (claimed, held),
            (done, JobState::Done),
        ] {
            let refused = JobOutcome::NotDead { job, state };
            assert_eq!(retry(&mut queue, job), refused);
            assert_eq!(purge(&mut queue, job), refused);
        }
        assert_eq!(queue, before);
        assert_eq!(
            retry(&mut queue, JobId(99)),
            JobOutcome::UnknownJob { job: JobId(99) }
        );
        assert_eq!(
            purge(&mut queue, JobId(99)),
            JobOutcome::UnknownJob { job: JobId(99) }
        );
        // The claim still holds: its lease is still taken back by an expiry.
        assert_eq!(
            expire(&mut queue, LEASE_MS),
            JobOutcome::LeasesExpired {
                requeued: vec![claimed],
                dead_lettered: vec![]
            }
        );
    }

    /// Purging deletes dead jobs only: one by id, those of one queue, or all; the rest stay,
    /// a purged job is unknown afterwards, and its id is not given again.
    #[test]
    fn purge_one_of_a_queue_and_all() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let mail_1 = dead_job(&mut queue, "mail");
        let default_1 = dead_job(&mut queue, "default");
        let mail_2 = dead_job(&mut queue, "mail");
        let default_2 = dead_job(&mut queue, "default");
        let alive = enqueue(&mut queue, "alive", 1);

        assert_eq!(
            purge(&mut queue, default_1),
            JobOutcome::Purged {
                jobs: vec![default_1]
            }
        );
        assert_eq!(queue.get(default_1), None);
        assert_eq!(
            purge(&mut queue, default_1),
            JobOutcome::UnknownJob { job: default_1 }
        );
        assert_eq!(
            retry(&mut queue, default_1),
            JobOutcome::UnknownJob { job: default_1 }
        );

        assert_eq!(
            purge_dead(&mut queue, Some("mail")),
            JobOutcome::PurgedMany {
                count: 2,
                first: vec![mail_1, mail_2]
            }
        );
        assert_eq!(ids(queue.list(JobStateKind::Dead)), [default_2]);
        assert_eq!(
            purge_dead(&mut queue, Some("mail")),
            JobOutcome::PurgedMany {
                count: 0,
                first: vec![]
            }
        );
        assert_eq!(
            purge_dead(&mut queue, None),
            JobOutcome::PurgedMany {
                count: 1,
                first: vec![default_2]
            }
        );
        assert!(queue.list(JobStateKind::Dead).is_empty());
        assert_eq!(ids(queue.list(JobStateKind::Ready)), [alive]);
        assert_eq!(enqueue(&mut queue, "new", 1), JobId(alive.0 + 1));
    }

    /// A purge of every dead job answers with their count and only the first ids: the
    /// outcome kept with its request id stays small however many dead letters there were.
    #[test]
    fn a_purge_of_many_dead_jobs_names_only_the_first() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let dead: Vec<JobId> = (0..PURGE_ANSWER_IDS + 50)
            .map(|_| dead_job(&mut queue, "mail"))
            .collect();
        let JobOutcome::PurgedMany { count, first } = purge_dead(&mut queue, None) else {
            panic!("a purge of every dead job answers PurgedMany");
        };
        assert_eq!(count, dead.len() as u64);
        assert_eq!(first, dead[..PURGE_ANSWER_IDS]);
        assert!(queue.list(JobStateKind::Dead).is_empty());
    }

    /// A restored queue rebuilds its indexes from the jobs as retry and purge left them: the
    /// retried job is claimable after the restore, the purged ones are gone.
    #[test]
    fn a_queue_restored_after_retry_and_purge_claims_the_retried_job() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let kept = dead_job(&mut queue, "default");
        let purged = dead_job(&mut queue, "default");
        let retried = dead_job(&mut queue, "default");
        let other = enqueue(&mut queue, "other", 1);
        purge(&mut queue, purged);
        retry(&mut queue, retried);

        let mut bare = queue.clone();
        bare.ready.clear();
        bare.leases.clear();
        let mut restored = bare.restored(DONE_JOB_RETENTION).unwrap();
        assert_eq!(restored, queue);
        assert_eq!(restored.get(purged), None);
        assert_eq!(ids(restored.list(JobStateKind::Dead)), [kept]);
        let JobOutcome::Claimed(job) = claim(&mut restored, "w", 0) else {
            panic!("the retried job is not claimable after a restore");
        };
        assert_eq!((job.id, job.attempts), (retried, 1));
        assert_eq!(claimed_id(claim(&mut restored, "w", 0)), other);
        assert_eq!(claim(&mut restored, "w", 0), JobOutcome::NoneReady);
    }

    /// LOG-5: a restored queue whose done jobs disagree with their order, or whose job sits
    /// under another id, is refused; a good one gets its ready and lease indexes back.
    #[test]
    fn restoring_checks_the_queue_and_rebuilds_its_indexes() {
        let mut queue = JobQueue::new(DONE_JOB_RETENTION);
        let done = enqueue(&mut queue, "done", 1);
        let held = enqueue(&mut queue, "held", 1);
        enqueue(&mut queue, "ready", 1);
        claimed_id(claim(&mut queue, "w", 0));
        ack(&mut queue, done, "w");
        claimed_id(claim(&mut queue, "w", 0));

        let mut bare = queue.clone();
        bare.ready.clear();
        bare.leases.clear();
        assert_eq!(bare.restored(DONE_JOB_RETENTION).unwrap(), queue);

        let mut unordered = queue.clone();
        unordered.done_order.clear();
        assert!(matches!(
            unordered.restored(DONE_JOB_RETENTION),
            Err(Error::InconsistentSnapshot(_))
        ));
        let mut misplaced = queue.clone();
        if let Some(job) = misplaced.jobs.get_mut(&held) {
            job.id = JobId(77);
        }
        assert!(matches!(
            misplaced.restored(DONE_JOB_RETENTION),
            Err(Error::InconsistentSnapshot(_))
        ));
    }
}
