//! [`ClusterState`], the built-in state machine (LOG-5, LOG-6): the key-value store, the job
//! queue and the table of applied request ids, applied entry by entry and snapshotted whole.
//!
//! How it behaves is documented on [`ClusterState`].

use conclave_protocol::{EntryKind, LogEntry};
use serde::{Deserialize, Serialize};

use crate::command::{Command, JobCommand, KvCommand, Write};
use crate::error::{Error, Result};
use crate::jobs::{DONE_JOB_RETENTION, JobOutcome, JobQueue};
use crate::kv::{KvOutcome, KvStore};
use crate::requests::{REQUEST_ID_CAPACITY, RequestLedger, RequestScope};
use crate::sessions::{EndedSession, SessionCommand, SessionId, SessionOutcome, Sessions};

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
            // A configuration entry (MEMB-1) is raft's: the machine only takes its index.
            EntryKind::Noop | EntryKind::Config => self.apply_noop(entry.index),
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
    /// A session write's, or the refusal of a write that named a session (appended).
    Sessions(SessionOutcome),
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
/// table of applied request ids.
///
/// # Applying an entry
///
/// The node hands over every committed entry in log order ([`StateMachine::apply_entry`]):
///
/// 1. an entry that is not the next one (at or below the applied index, or after a gap) is
///    answered [`Applied::NotNext`] and changes nothing;
/// 2. a no-op entry advances the applied index only;
/// 3. data that is not a valid [`Command`] advances the applied index, is counted
///    ([`ClusterState::rejected_entries`]) and answered [`Applied::Rejected`]: every node
///    refuses the same entry the same way, so the replicas stay equal and none panics;
/// 4. a command whose request id was applied already answers the remembered outcome
///    ([`Applied::Replayed`]) and changes nothing (LOG-6), or, when the id came with another
///    kind of write, [`Applied::RequestIdInUse`];
/// 5. otherwise the write is applied to its store and answered [`Applied::Answered`]; its
///    request id, if any, is remembered with the outcome.
///
/// # Request ids (LOG-6)
///
/// A client that retries a write after an ambiguous failure (its leader died before
/// answering) gives the same request id, and the retry answers what the first apply answered
/// instead of applying again: an enqueue retried makes one job, a claim retried returns the
/// same job and lease, an ack retried answers "acked", a purge retried answers the jobs it
/// deleted the first time (not those dead since). The table of ids is replicated state (in
/// snapshots, equal on every node) and bounded: it keeps the last
/// [`REQUEST_ID_CAPACITY`] ids, the oldest forgotten first, so at most once holds for retries
/// that come before that many newer writes with ids. An id is remembered with what it was
/// used for (the key, the queue and worker, the job); a write that reuses it for something
/// else is a client's mistake, refused as [`Applied::RequestIdInUse`]. Ids are global, not
/// per client: clients should draw them at random (a UUID) or prefix them with their name.
///
/// # Snapshots
///
/// A snapshot is one format byte ([`SNAPSHOT_FORMAT`]) followed by the state as compact
/// MessagePack (`rmp_serde::to_vec`): the applied index, the store with its kept history, the
/// jobs, the remembered request ids and the count of rejected entries. Every collection is
/// ordered (no hash maps), so two replicas that applied the same entries write byte-identical
/// snapshots. Indexes derived from that state (ready jobs per queue, leases by end) are not
/// written; restoring rebuilds them after checking that the snapshot is consistent, and
/// refuses it with an error otherwise, leaving the state as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    applied_index: u64,
    kv: KvStore,
    jobs: JobQueue,
    requests: RequestLedger,
    rejected_entries: u64,
    /// Appended with a default: a snapshot of a build without sessions has none.
    #[serde(default)]
    sessions: Sessions,
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
            sessions: Sessions::default(),
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

    /// The live sessions, for reads.
    #[must_use]
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
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

    /// Whether request id `id` is remembered: a write carrying it now would be answered
    /// with its first outcome, changing nothing (SESS-3: a waiting claim retried after its
    /// answer was lost gets that answer at once instead of waiting).
    #[must_use]
    pub fn remembers_request(&self, id: &str) -> bool {
        self.requests.get(id).is_some()
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
        let outcome = self.apply_write(&write);
        if let (Some(id), Some(scope)) = (request_id, scope) {
            self.requests.record(id, scope, outcome.clone());
        }
        Applied::Answered(outcome)
    }

    /// Applies a write at the applied index. A key or a claim that names a session needs it
    /// live (and, for a claim, under its `max_claims`); a session that ends takes its keys
    /// and claims with it, in the same entry (SESS-2).
    fn apply_write(&mut self, write: &Write) -> Outcome {
        let index = self.applied_index;
        match write {
            Write::Kv(command @ KvCommand::Put { session, .. }) => {
                if let Some(refused) = session.and_then(|session| self.refuse_session(session)) {
                    return Outcome::Sessions(refused);
                }
                Outcome::Kv(self.kv.apply(command))
            }
            Write::Kv(command) => Outcome::Kv(self.kv.apply(command)),
            Write::Jobs(command @ JobCommand::Claim { session, .. }) => {
                if let Some(session) = *session {
                    if let Some(refused) = self.refuse_session(session) {
                        return Outcome::Sessions(refused);
                    }
                    let limit = self.sessions.get(session).map_or(0, |s| s.max_claims);
                    if self.jobs.held_by(session) >= limit as usize {
                        return Outcome::Sessions(SessionOutcome::TooManyClaims { session, limit });
                    }
                }
                Outcome::Jobs(self.jobs.apply(index, command))
            }
            Write::Jobs(command) => Outcome::Jobs(self.jobs.apply(index, command)),
            Write::Sessions(command) => Outcome::Sessions(self.apply_session(index, command)),
        }
    }

    fn refuse_session(&self, session: SessionId) -> Option<SessionOutcome> {
        self.sessions
            .get(session)
            .is_none()
            .then_some(SessionOutcome::UnknownSession { session })
    }

    fn apply_session(&mut self, index: u64, command: &SessionCommand) -> SessionOutcome {
        match command {
            SessionCommand::Grant {
                ttl_ms,
                name,
                max_claims,
            } => self
                .sessions
                .grant(index, *ttl_ms, name.clone(), *max_claims),
            SessionCommand::Revoke { session } => match self.end_session(*session) {
                Some(ended) => SessionOutcome::Revoked(ended),
                None => SessionOutcome::UnknownSession { session: *session },
            },
            SessionCommand::Expire { sessions } => SessionOutcome::Expired {
                ended: sessions
                    .iter()
                    .filter_map(|session| self.end_session(*session))
                    .collect(),
            },
        }
    }

    /// Ends a live session: its keys are deleted and its claims taken back.
    fn end_session(&mut self, session: SessionId) -> Option<EndedSession> {
        self.sessions.end(session)?;
        let deleted_keys = self.kv.delete_owned(session);
        let (requeued, dead_lettered) = self.jobs.release_session(session);
        Some(EndedSession {
            session,
            deleted_keys,
            requeued,
            dead_lettered,
        })
    }

    /// Moves the applied index to `index` if it is the next one; otherwise says why not.
    fn advance(&mut self, index: u64) -> Option<Applied> {
        if Some(index) != self.applied_index.checked_add(1) {
            return Some(Applied::NotNext {
                index,
                applied: self.applied_index,
            });
        }
        self.applied_index = index;
        None
    }
}

impl StateMachine for ClusterState {
    type Output = Applied;

    fn apply(&mut self, index: u64, data: &[u8]) -> Applied {
        if let Some(not_next) = self.advance(index) {
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
        self.advance(index).unwrap_or(Applied::Noop)
    }

    fn snapshot(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![SNAPSHOT_FORMAT];
        rmp_serde::encode::write(&mut bytes, self).map_err(Error::EncodeSnapshot)?;
        // Grown by doubling, the buffer can be half spare; the image is kept until the next
        // snapshot (the log sends it to followers), so it keeps only its own bytes.
        bytes.shrink_to_fit();
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let Some((&SNAPSHOT_FORMAT, body)) = snapshot.split_first() else {
            return Err(Error::SnapshotFormat {
                found: snapshot.first().copied(),
                expected: SNAPSHOT_FORMAT,
            });
        };
        let decoded: Self = crate::codec::decode(body).map_err(|source| Error::DecodeSnapshot {
            len: snapshot.len(),
            source,
        })?;
        let restored = Self {
            applied_index: decoded.applied_index,
            kv: decoded.kv.restored(self.config.watch_history)?,
            jobs: decoded.jobs.restored(self.capacities.done_jobs)?,
            requests: decoded.requests.restored(self.capacities.request_ids)?,
            rejected_entries: decoded.rejected_entries,
            sessions: decoded.sessions.restored()?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{COMMAND_FORMAT, DEFAULT_QUEUE, JobCommand, KvCommand};
    use crate::jobs::{JobId, JobState, JobStateKind};
    use crate::kv::KeyFilter;

    fn put(key: &str, value: &str) -> Command {
        Command::new(Write::Kv(KvCommand::Put {
            key: key.into(),
            value: value.into(),
            if_revision: None,
            if_value: None,
            session: None,
        }))
    }

    fn enqueue(payload: &str) -> Command {
        Command::new(Write::Jobs(JobCommand::Enqueue {
            queue: DEFAULT_QUEUE.into(),
            payload: payload.into(),
            max_attempts: 3,
        }))
    }

    fn claim(worker: &str, now_unix_ms: u64) -> Command {
        Command::new(Write::Jobs(JobCommand::Claim {
            queue: DEFAULT_QUEUE.into(),
            worker: worker.into(),
            lease_ms: 1_000,
            now_unix_ms,
            session: None,
        }))
    }

    fn ack(job: JobId, worker: &str) -> Command {
        Command::new(Write::Jobs(JobCommand::Ack {
            job,
            worker: worker.into(),
        }))
    }

    fn expire(now_unix_ms: u64) -> Command {
        Command::new(Write::Jobs(JobCommand::ExpireLeases { now_unix_ms }))
    }

    fn retry(job: JobId) -> Command {
        Command::new(Write::Jobs(JobCommand::Retry { job }))
    }

    fn purge(job: JobId) -> Command {
        Command::new(Write::Jobs(JobCommand::Purge { job }))
    }

    fn purge_dead(queue: Option<&str>) -> Command {
        Command::new(Write::Jobs(JobCommand::PurgeDead {
            queue: queue.map(str::to_owned),
        }))
    }

    /// Claims and nacks the lowest ready job of the default queue until it is dead (the
    /// `enqueue` helper gives 3 attempts); returns it.
    fn kill_next(state: &mut ClusterState) -> JobId {
        loop {
            let Outcome::Jobs(JobOutcome::Claimed(job)) = answered(write(state, &claim("w", 0)))
            else {
                panic!("nothing to claim");
            };
            let nack = Command::new(Write::Jobs(JobCommand::Nack {
                job: job.id,
                worker: "w".into(),
                reason: None,
            }));
            if let Outcome::Jobs(JobOutcome::DeadLettered { job, .. }) =
                answered(write(state, &nack))
            {
                return job;
            }
        }
    }

    /// Applies `command` as the next committed entry.
    fn write(state: &mut ClusterState, command: &Command) -> Applied {
        let index = state.applied_index() + 1;
        state.apply(index, &command.encode().unwrap())
    }

    fn answered(applied: Applied) -> Outcome {
        match applied {
            Applied::Answered(outcome) => outcome,
            other => panic!("expected a first answer, got {other:?}"),
        }
    }

    fn replayed(applied: Applied) -> Outcome {
        match applied {
            Applied::Replayed(outcome) => outcome,
            other => panic!("expected a replayed answer, got {other:?}"),
        }
    }

    fn snapshot(state: &ClusterState) -> Vec<u8> {
        state.snapshot().unwrap()
    }

    /// LOG-6: an enqueue retried with the same request id (its leader died before answering)
    /// makes one job, and the retry answers what the first apply answered.
    #[test]
    fn a_retried_enqueue_makes_one_job() {
        let mut state = ClusterState::default();
        let command = enqueue("send invoice 12").with_request_id("client-7/42");
        let first = answered(write(&mut state, &command));
        let before_retry = snapshot(&state);
        let retry = replayed(write(&mut state, &command));
        assert_eq!(retry, first);
        assert_eq!(state.jobs().list(JobStateKind::Ready).len(), 1);
        // Nothing changed but the applied index.
        let mut expected = ClusterState::default();
        expected.restore(&before_retry).unwrap();
        expected.apply_noop(state.applied_index());
        assert_eq!(state, expected);
    }

    /// LOG-6: a retried claim answers the same job and lease; the job is not claimed twice.
    #[test]
    fn a_retried_claim_returns_the_same_job() {
        let mut state = ClusterState::default();
        write(&mut state, &enqueue("a"));
        write(&mut state, &enqueue("b"));
        let command = claim("worker-1", 5_000).with_request_id("claim-1");
        let first = answered(write(&mut state, &command));
        // The leader stamps a later time into the retry; the answer is still the first one.
        let retry = claim("worker-1", 9_000).with_request_id("claim-1");
        assert_eq!(replayed(write(&mut state, &retry)), first);
        let Outcome::Jobs(JobOutcome::Claimed(job)) = first else {
            panic!("not claimed: {first:?}");
        };
        assert_eq!(state.jobs().get(job.id).unwrap().attempts, 1);
        assert_eq!(state.jobs().list(JobStateKind::Ready).len(), 1);
    }

    /// LOG-6: an ack retried after an ambiguous failure answers "acked" again, and the job
    /// never runs again, whatever leases expire after.
    #[test]
    fn a_retried_ack_is_acked_and_the_job_never_runs_again() {
        let mut state = ClusterState::default();
        write(&mut state, &enqueue("once"));
        let job = JobId(1);
        write(&mut state, &claim("w", 0));
        let command = ack(job, "w").with_request_id("ack-1");
        let first = answered(write(&mut state, &command));
        assert_eq!(first, Outcome::Jobs(JobOutcome::Acked { job }));
        assert_eq!(replayed(write(&mut state, &command)), first);
        write(&mut state, &expire(u64::MAX));
        assert_eq!(
            answered(write(&mut state, &claim("w", 1))),
            Outcome::Jobs(JobOutcome::NoneReady)
        );
        assert_eq!(state.jobs().get(job).unwrap().state, JobState::Done);
    }

    /// LOG-6: a retry or purge sent again with its request id answers what it answered the
    /// first time and changes nothing: a job that died again after its retry stays dead, and
    /// a purge does not delete the jobs that died since.
    #[test]
    fn retries_and_purges_with_a_request_id_are_applied_once() {
        let mut state = ClusterState::default();
        write(&mut state, &enqueue("poison"));
        let job = kill_next(&mut state);
        let command = retry(job).with_request_id("retry-1");
        let first = answered(write(&mut state, &command));
        let Outcome::Jobs(JobOutcome::Retried(retried)) = &first else {
            panic!("not retried: {first:?}");
        };
        assert_eq!((retried.id, retried.attempts), (job, 0));
        assert_eq!(kill_next(&mut state), job);
        assert_eq!(replayed(write(&mut state, &command)), first);
        assert_eq!(state.jobs().get(job).unwrap().state, JobState::Dead);
        // The id names the retry of this job; for another job it is a client's mistake.
        assert!(matches!(
            write(&mut state, &retry(JobId(9)).with_request_id("retry-1")),
            Applied::RequestIdInUse { .. }
        ));

        let purge_all = purge_dead(None).with_request_id("purge-1");
        let first = answered(write(&mut state, &purge_all));
        assert_eq!(
            first,
            Outcome::Jobs(JobOutcome::PurgedMany {
                count: 1,
                first: vec![job]
            })
        );
        write(&mut state, &enqueue("poison too"));
        let second = kill_next(&mut state);
        assert_eq!(replayed(write(&mut state, &purge_all)), first);
        assert_eq!(state.jobs().get(second).unwrap().state, JobState::Dead);
        // Purging of one queue is another write than purging of all.
        assert!(matches!(
            write(
                &mut state,
                &purge_dead(Some("mail")).with_request_id("purge-1")
            ),
            Applied::RequestIdInUse { .. }
        ));

        let purge_one = purge(second).with_request_id("purge-2");
        let first = answered(write(&mut state, &purge_one));
        assert_eq!(
            first,
            Outcome::Jobs(JobOutcome::Purged { jobs: vec![second] })
        );
        assert_eq!(replayed(write(&mut state, &purge_one)), first);
    }

    /// LOG-5, LOG-6: a state snapshotted after retries and purges restores equal, with the
    /// retried job claimable, the purged ones unknown, and the retry's request id remembered.
    #[test]
    fn a_state_restored_after_retry_and_purge_answers_as_the_original() {
        let mut original = ClusterState::default();
        for payload in ["retried", "purged", "kept"] {
            write(&mut original, &enqueue(payload));
        }
        let retried = kill_next(&mut original);
        let purged = kill_next(&mut original);
        let kept = kill_next(&mut original);
        write(&mut original, &enqueue("fresh"));
        let retry_command = retry(retried).with_request_id("r1");
        answered(write(&mut original, &retry_command));
        answered(write(&mut original, &purge(purged)));

        let mut restored = ClusterState::default();
        restored.restore(&snapshot(&original)).unwrap();
        assert_eq!(restored, original);
        assert_eq!(snapshot(&restored), snapshot(&original));

        let later = [
            retry_command.clone(),
            claim("w", 10),
            retry(purged),
            purge(retried),
            claim("w", 10),
            purge_dead(Some(DEFAULT_QUEUE)),
            claim("w", 10),
        ];
        let mut answers = Vec::new();
        for command in &later {
            let expected = format!("{:?}", write(&mut original, command));
            let applied = write(&mut restored, command);
            assert_eq!(format!("{applied:?}"), expected);
            answers.push(applied);
        }
        assert_eq!(snapshot(&restored), snapshot(&original));
        // The retry is remembered across the restore; the retried job is claimed first, its
        // attempts counted from 0, then the job enqueued after it died; the purged job is
        // unknown; the kept one goes with its queue's purge.
        assert!(
            matches!(answers[0], Applied::Replayed(_)),
            "{:?}",
            answers[0]
        );
        let claimed = |applied: &Applied| match applied.outcome() {
            Some(Outcome::Jobs(JobOutcome::Claimed(job))) => (job.id, job.attempts),
            other => panic!("not claimed: {other:?}"),
        };
        assert_eq!(claimed(&answers[1]), (retried, 1));
        assert_eq!(
            answers[2].outcome(),
            Some(&Outcome::Jobs(JobOutcome::UnknownJob { job: purged }))
        );
        assert!(matches!(
            answers[3].outcome(),
            Some(Outcome::Jobs(JobOutcome::NotDead { job, .. })) if *job == retried
        ));
        assert_eq!(claimed(&answers[4]).0, JobId(4));
        assert_eq!(
            answers[5].outcome(),
            Some(&Outcome::Jobs(JobOutcome::PurgedMany {
                count: 1,
                first: vec![kept]
            }))
        );
        assert_eq!(
            answers[6].outcome(),
            Some(&Outcome::Jobs(JobOutcome::NoneReady))
        );
    }

    /// LOG-6: a request id reused for another write is refused, not answered with the other
    /// write's outcome, and changes nothing.
    #[test]
    fn a_request_id_reused_for_another_write_is_refused() {
        let mut state = ClusterState::default();
        answered(write(&mut state, &put("a", "1").with_request_id("r")));
        let other = put("b", "1").with_request_id("r");
        assert!(matches!(
            write(&mut state, &other),
            Applied::RequestIdInUse { request_id } if request_id == "r"
        ));
        let job = enqueue("x").with_request_id("r");
        assert!(matches!(
            write(&mut state, &job),
            Applied::RequestIdInUse { .. }
        ));
        assert_eq!(state.kv().get("b"), None);
        assert!(state.jobs().list(JobStateKind::Ready).is_empty());
    }

    /// LOG-6: the table is bounded; an id forgotten after that many newer ids is applied as a
    /// new write, as the docs say.
    #[test]
    fn request_ids_are_remembered_up_to_the_capacity() {
        let capacities = Capacities {
            request_ids: 2,
            done_jobs: DONE_JOB_RETENTION,
        };
        let mut state = ClusterState::with_capacities(StateConfig::default(), capacities);
        let oldest = enqueue("1").with_request_id("r1");
        write(&mut state, &oldest);
        write(&mut state, &enqueue("2").with_request_id("r2"));
        replayed(write(&mut state, &oldest));
        write(&mut state, &enqueue("3").with_request_id("r3"));
        assert_eq!(state.remembered_requests(), 2);
        // SESS-3: what a waiting claim asks before it proposes.
        assert!(state.remembers_request("r2") && state.remembers_request("r3"));
        assert!(!state.remembers_request("r1"));
        assert_eq!(
            answered(write(&mut state, &oldest)),
            Outcome::Jobs(JobOutcome::Enqueued { job: JobId(4) })
        );
    }

    /// LOG-5, LOG-6: snapshot → restore gives an equal state (request ids included) whose
    /// answers to the same later entries are the same, and whose snapshot is byte-identical.
    #[test]
    fn a_restored_state_answers_as_the_original() {
        let mut original = ClusterState::default();
        write(&mut original, &put("leader", "a").with_request_id("p1"));
        write(&mut original, &enqueue("j1").with_request_id("e1"));
        write(&mut original, &enqueue("j2"));
        write(&mut original, &claim("w", 100).with_request_id("c1"));
        original.apply_noop(original.applied_index() + 1);

        let mut restored = ClusterState::default();
        restored.restore(&snapshot(&original)).unwrap();
        assert_eq!(restored, original);
        assert_eq!(snapshot(&restored), snapshot(&original));
        assert_eq!(restored.applied_index(), 5);

        let later = [
            put("leader", "a").with_request_id("p1"),
            claim("w", 200).with_request_id("c1"),
            claim("v", 200),
            ack(JobId(1), "w"),
            expire(10_000),
            put("leader", "b"),
        ];
        for command in &later {
            let expected = format!("{:?}", write(&mut original, command));
            assert_eq!(format!("{:?}", write(&mut restored, command)), expected);
        }
        assert_eq!(snapshot(&restored), snapshot(&original));
        assert_eq!(
            restored
                .kv()
                .changes_from(1, KeyFilter::Prefix(""))
                .unwrap(),
            original
                .kv()
                .changes_from(1, KeyFilter::Prefix(""))
                .unwrap()
        );
    }

    /// LOG-5: two replicas fed the same entries write byte-identical snapshots.
    #[test]
    fn replicas_fed_the_same_entries_are_byte_identical() {
        let mut one = ClusterState::default();
        let mut other = ClusterState::default();
        let commands = [
            put("b", "1"),
            put("a", "1"),
            enqueue("x").with_request_id("z"),
            enqueue("y").with_request_id("a"),
            claim("w2", 10),
            claim("w1", 10),
            expire(2_000),
        ];
        for command in &commands {
            write(&mut one, command);
            write(&mut other, command);
        }
        assert_eq!(snapshot(&one), snapshot(&other));
    }

    /// LOG-5: data that is not a command is applied as a no-op with its error, counted, on
    /// every node alike; it never panics.
    #[test]
    fn garbage_entries_are_rejected_as_no_ops() {
        let mut state = ClusterState::default();
        let garbage: [&[u8]; 4] = [
            &[],
            &[0xff, 0x00],
            &[COMMAND_FORMAT, 0x93, 0x01],
            &[
                COMMAND_FORMAT,
                0x81,
                0xa5,
                b'w',
                b'r',
                b'i',
                b't',
                b'e',
                0xc0,
            ],
        ];
        for (n, data) in (1..).zip(garbage) {
            assert!(matches!(state.apply(n, data), Applied::Rejected(_)));
        }
        assert_eq!(state.applied_index(), 4);
        assert_eq!(state.rejected_entries(), 4);
        assert_eq!(state.kv().revision(), 0);
        // A command that breaks a bound, written by a build that did not check it.
        let mut data = vec![COMMAND_FORMAT];
        rmp_serde::encode::write_named(&mut data, &put("", "v")).unwrap();
        assert!(matches!(
            state.apply(5, &data),
            Applied::Rejected(Error::InvalidCommand(_))
        ));
        assert_eq!(state.rejected_entries(), 5);
    }

    /// LOG-5: a snapshot that is empty, of another format, truncated, or noise is refused
    /// with an error and the state is left as it was.
    #[test]
    fn bad_snapshots_are_refused_and_change_nothing() {
        let mut source = ClusterState::default();
        write(&mut source, &put("k", "v"));
        write(&mut source, &enqueue("j").with_request_id("r"));
        let good = snapshot(&source);

        let mut state = ClusterState::default();
        write(&mut state, &put("mine", "1"));
        let before = state.clone();
        assert!(matches!(
            state.restore(&[]),
            Err(Error::SnapshotFormat { found: None, .. })
        ));
        assert!(matches!(
            state.restore(&[SNAPSHOT_FORMAT + 1]),
            Err(Error::SnapshotFormat { found: Some(2), .. })
        ));
        for cut in 1..good.len() {
            assert!(state.restore(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut deep = vec![SNAPSHOT_FORMAT];
        deep.extend(std::iter::repeat_n(0x91, 100_000));
        assert!(state.restore(&deep).is_err());
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200 {
            let mut noise = vec![SNAPSHOT_FORMAT];
            noise.extend((0..64).map(|_| next_random(&mut rng) as u8));
            assert!(state.restore(&noise).is_err());
        }
        assert_eq!(state, before);
        state.restore(&good).unwrap();
        assert_eq!(state, source);
    }

    /// LOG-3, LOG-5: an entry is applied once, in order: one applied already, or one after a
    /// gap, changes nothing; a no-op entry moves the applied index only.
    #[test]
    fn entries_apply_once_in_order() {
        let mut state = ClusterState::default();
        let data = put("k", "v").encode().unwrap();
        let noop = LogEntry {
            index: 1,
            term: 1,
            kind: EntryKind::Noop,
            data: vec![],
        };
        assert!(matches!(state.apply_entry(&noop), Applied::Noop));
        let entry = LogEntry {
            index: 2,
            term: 1,
            kind: EntryKind::Command,
            data: data.clone(),
        };
        assert!(matches!(state.apply_entry(&entry), Applied::Answered(_)));
        assert!(matches!(
            state.apply_entry(&entry),
            Applied::NotNext {
                index: 2,
                applied: 2
            }
        ));
        assert!(matches!(
            state.apply(4, &data),
            Applied::NotNext {
                index: 4,
                applied: 2
            }
        ));
        assert!(matches!(
            state.apply_entry(&noop),
            Applied::NotNext { index: 1, .. }
        ));
        assert_eq!(state.applied_index(), 2);
        assert_eq!(state.kv().revision(), 1);
    }

    /// xorshift64*: the tests' own seeded generator, so a failure replays from its seed.
    fn next_random(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Random committed entries: commands of every kind, some carrying request ids, some of
    /// them true retries (the same command again), some ids reused; no-ops and garbage.
    struct RandomLog {
        rng: u64,
        clock: u64,
        with_ids: Vec<Command>,
        next_id: u64,
    }

    impl RandomLog {
        const KEYS: [&str; 4] = ["a", "a/b", "a/c", "b"];
        const WORKERS: [&str; 2] = ["w1", "w2"];
        const QUEUES: [&str; 2] = ["default", "mail"];

        fn pick(&mut self, n: u64) -> u64 {
            next_random(&mut self.rng) % n
        }

        /// No session half the time; otherwise one of the first few, live or not.
        fn session(&mut self) -> Option<SessionId> {
            [None, Some(SessionId(1 + self.pick(4)))][self.pick(2) as usize]
        }

        fn one_of<T: Clone>(&mut self, items: &[T]) -> T {
            items[self.pick(items.len() as u64) as usize].clone()
        }

        fn write(&mut self) -> Write {
            self.clock += self.pick(400);
            match self.pick(13) {
                0 | 1 => Write::Kv(KvCommand::Put {
                    key: self.one_of(&Self::KEYS).into(),
                    value: self.pick(3).to_string(),
                    if_revision: [None, None, Some(0), Some(self.pick(20))][self.pick(4) as usize],
                    if_value: [None, None, Some(self.pick(3).to_string())][self.pick(3) as usize]
                        .clone(),
                    session: self.session(),
                }),
                2 => Write::Kv(KvCommand::Delete {
                    key: self.one_of(&Self::KEYS).into(),
                    if_revision: [None, Some(self.pick(20))][self.pick(2) as usize],
                }),
                3 => Write::Jobs(JobCommand::Enqueue {
                    queue: self.one_of(&Self::QUEUES).into(),
                    payload: self.pick(100).to_string(),
                    max_attempts: 1 + self.pick(3) as u32,
                }),
                4 | 5 => Write::Jobs(JobCommand::Claim {
                    queue: self.one_of(&Self::QUEUES).into(),
                    worker: self.one_of(&Self::WORKERS).into(),
                    lease_ms: 1 + self.pick(1_000),
                    now_unix_ms: self.clock,
                    session: self.session(),
                }),
                11 => match self.pick(3) {
                    0 => Write::Sessions(SessionCommand::Grant {
                        ttl_ms: 1_000,
                        name: None,
                        max_claims: 1 + self.pick(2) as u32,
                    }),
                    1 => Write::Sessions(SessionCommand::Revoke {
                        session: SessionId(1 + self.pick(4)),
                    }),
                    _ => Write::Sessions(SessionCommand::Expire {
                        sessions: vec![SessionId(1 + self.pick(4)), SessionId(1 + self.pick(4))],
                    }),
                },
                12 => Write::Jobs(JobCommand::ExpireClaims {
                    claims: vec![crate::ClaimRef {
                        job: JobId(1 + self.pick(12)),
                        claimed_at: self.pick(200),
                    }],
                }),
                6 => Write::Jobs(JobCommand::Ack {
                    job: JobId(1 + self.pick(12)),
                    worker: self.one_of(&Self::WORKERS).into(),
                }),
                7 => Write::Jobs(JobCommand::Nack {
                    job: JobId(1 + self.pick(12)),
                    worker: self.one_of(&Self::WORKERS).into(),
                    reason: None,
                }),
                8 => Write::Jobs(JobCommand::ExpireLeases {
                    now_unix_ms: self.clock,
                }),
                9 => Write::Jobs(JobCommand::Retry {
                    job: JobId(1 + self.pick(12)),
                }),
                _ => match self.pick(3) {
                    0 => Write::Jobs(JobCommand::Purge {
                        job: JobId(1 + self.pick(12)),
                    }),
                    1 => Write::Jobs(JobCommand::PurgeDead { queue: None }),
                    _ => Write::Jobs(JobCommand::PurgeDead {
                        queue: Some(self.one_of(&Self::QUEUES).into()),
                    }),
                },
            }
        }

        fn command(&mut self) -> Command {
            match self.pick(6) {
                // A retry of a recent write with an id.
                0 if !self.with_ids.is_empty() => {
                    let recent = self.with_ids.len().min(6) as u64;
                    let back = 1 + self.pick(recent) as usize;
                    self.with_ids[self.with_ids.len() - back].clone()
                }
                // A new write with a new id, or (rarely) a reused one.
                1 | 2 => {
                    self.next_id += 1;
                    let id = if self.pick(8) == 0 {
                        self.pick(self.next_id)
                    } else {
                        self.next_id
                    };
                    let command = Command::new(self.write()).with_request_id(format!("r{id}"));
                    self.with_ids.push(command.clone());
                    command
                }
                _ => Command::new(self.write()),
            }
        }

        fn entry(&mut self, index: u64) -> LogEntry {
            let (kind, data) = match self.pick(20) {
                0 => (EntryKind::Noop, vec![]),
                1 => {
                    let len = self.pick(12);
                    let noise = (0..len).map(|_| self.pick(256) as u8).collect();
                    (EntryKind::Command, noise)
                }
                _ => (EntryKind::Command, self.command().encode().unwrap()),
            };
            LogEntry {
                index,
                term: 1,
                kind,
                data,
            }
        }
    }

    /// LOG-5, LOG-6: random entries applied to one replica, and to another that is
    /// snapshotted and restored into a fresh state midway, give the same answers and
    /// byte-identical snapshots; small bounds make eviction and compaction happen.
    #[test]
    fn random_histories_survive_a_snapshot_midway() {
        let config = StateConfig { watch_history: 5 };
        let capacities = Capacities {
            request_ids: 4,
            done_jobs: 3,
        };
        for seed in 1..=200u64 {
            let mut log = RandomLog {
                rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                clock: 0,
                with_ids: Vec::new(),
                next_id: 0,
            };
            let entries: Vec<LogEntry> = (1..=120).map(|index| log.entry(index)).collect();
            let cut = 1 + (seed as usize * 7) % (entries.len() - 1);

            let mut straight = ClusterState::with_capacities(config, capacities);
            let mut interrupted = ClusterState::with_capacities(config, capacities);
            for entry in &entries[..cut] {
                let one = straight.apply_entry(entry);
                let other = interrupted.apply_entry(entry);
                assert_eq!(
                    format!("{one:?}"),
                    format!("{other:?}"),
                    "seed {seed}, entry {}",
                    entry.index
                );
            }
            let mut resumed = ClusterState::with_capacities(config, capacities);
            resumed.restore(&snapshot(&interrupted)).unwrap();
            assert_eq!(resumed, interrupted, "seed {seed}: restore at {cut}");
            for entry in &entries[cut..] {
                let one = straight.apply_entry(entry);
                let other = resumed.apply_entry(entry);
                assert_eq!(
                    format!("{one:?}"),
                    format!("{other:?}"),
                    "seed {seed}, entry {}",
                    entry.index
                );
            }
            assert_eq!(resumed, straight, "seed {seed}");
            assert_eq!(snapshot(&resumed), snapshot(&straight), "seed {seed}");
        }
    }

    /// LOG-5, LOG-6: over random histories with retries, no claim hands out a job that was
    /// acked or purged before, and no job is acked twice.
    #[test]
    fn random_histories_never_run_an_acked_job_again() {
        for seed in 1..=200u64 {
            let mut log = RandomLog {
                rng: seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1,
                clock: 0,
                with_ids: Vec::new(),
                next_id: 0,
            };
            let mut state = ClusterState::default();
            let mut acked = std::collections::BTreeSet::new();
            let mut purged = std::collections::BTreeSet::new();
            for index in 1..=300 {
                match state.apply_entry(&log.entry(index)) {
                    Applied::Answered(Outcome::Jobs(JobOutcome::Acked { job })) => {
                        assert!(acked.insert(job), "seed {seed}: {job} acked twice");
                    }
                    Applied::Answered(Outcome::Jobs(JobOutcome::Claimed(job))) => {
                        assert!(
                            !acked.contains(&job.id) && !purged.contains(&job.id),
                            "seed {seed}: acked or purged {} claimed",
                            job.id
                        );
                    }
                    Applied::Answered(Outcome::Jobs(
                        JobOutcome::Purged { jobs } | JobOutcome::PurgedMany { first: jobs, .. },
                    )) => {
                        purged.extend(jobs);
                    }
                    _ => {}
                }
            }
        }
    }
}
