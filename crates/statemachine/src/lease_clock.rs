//! The leader's clock for job leases and sessions (SESS-0, SESS-1): when a lease or a session
//! runs out, decided on the leader's monotonic clock and never replicated.
//!
//! The rule: a lease or a session ends only after its full duration has passed on the
//! monotonic clock of one leader, counted from the later of that leader's election and the
//! moment it first saw the claim or the grant applied; a keepalive restarts a session's
//! count. A leader that is elected starts every count afresh (as etcd gives its leases a
//! full TTL on a leader change), so a failover can lengthen a lease or a session, never
//! shorten one. No wall clock is read, so a leader whose clock is minutes ahead or behind
//! ends nothing early or late; a follower counts nothing.
//!
//! [`LeaseClock::due`] compares what it counts with the state the leader has applied: a claim
//! or a session it has not seen yet starts its count now, one that has ended is forgotten,
//! and those whose count has run out come back as the entries to propose
//! ([`JobCommand::ExpireClaims`], [`SessionCommand::Expire`]). Applying those entries skips a
//! claim or a session that ended in the meantime, so a late or repeated expiry is harmless.

use std::collections::BTreeMap;

use crate::command::{Command, JobCommand, MAX_EXPIRE_BATCH, Write};
use crate::jobs::{ClaimRef, JobState};
use crate::sessions::{SessionCommand, SessionId};
use crate::state::{ClusterState, StateMachine};

/// The lease counted for a claim written before claims recorded their lease: the node's
/// default lease, as the API gave it then.
pub const UNRECORDED_LEASE_MS: u64 = 30_000;

/// How long the leader waits for an expiry it proposed to be applied before it proposes it
/// again (the entry may have been lost with a leader change).
pub const EXPIRY_RETRY_MS: u64 = 1_000;

/// The counts of one leader in one term. Times are milliseconds of a monotonic clock the
/// caller reads; the clock's origin does not matter.
#[derive(Debug, Clone, Default)]
pub struct LeaseClock {
    /// The term these counts belong to; a new term starts them afresh.
    term: u64,
    /// When each claim held by a lease runs out.
    claims: BTreeMap<ClaimRef, u64>,
    /// When each live session runs out.
    sessions: BTreeMap<SessionId, u64>,
    /// The applied index the counts were last compared with the state at.
    synced_at: Option<u64>,
}

impl LeaseClock {
    /// A clock that counts nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every count, as a node that stops leading does: the next leader counts
    /// afresh.
    pub fn forget(&mut self) {
        *self = Self::default();
    }

    /// A keepalive of `session` at `now`, on the leader of `term`: its count starts again.
    /// The session's TTL, or `None` if the state has no such live session.
    pub fn keepalive(
        &mut self,
        state: &ClusterState,
        term: u64,
        session: SessionId,
        now: u64,
    ) -> Option<u64> {
        self.enter(term);
        let ttl_ms = state.sessions().get(session)?.ttl_ms;
        self.sessions.insert(session, now.saturating_add(ttl_ms));
        Some(ttl_ms)
    }

    /// The earliest time a count runs out, if this clock counts anything: when the next
    /// [`LeaseClock::due`] has work (a claim or a session made since the last call starts its
    /// count at that call).
    #[must_use]
    pub fn next_deadline(&self) -> Option<u64> {
        self.claims
            .values()
            .chain(self.sessions.values())
            .copied()
            .min()
    }

    /// How long `session` has left at `now`, if this leader counts it.
    #[must_use]
    pub fn session_remaining(&self, session: SessionId, now: u64) -> Option<u64> {
        self.sessions
            .get(&session)
            .map(|deadline| deadline.saturating_sub(now))
    }

    /// At `now`, on the leader of `term` whose state is `state`: the entries that end the
    /// claims and sessions whose count has run out, at most [`MAX_EXPIRE_BATCH`] of each per
    /// entry. Each one proposed is counted again from `now` for [`EXPIRY_RETRY_MS`], so an
    /// entry lost with a leader change is proposed again, and one in flight is not.
    pub fn due(&mut self, state: &ClusterState, term: u64, now: u64) -> Vec<Command> {
        self.enter(term);
        if self.synced_at != Some(state.applied_index()) {
            self.sync(state, now);
        }
        let mut commands = Vec::new();
        let claims = take_due(&mut self.claims, now);
        for batch in claims.chunks(MAX_EXPIRE_BATCH) {
            commands.push(Command::new(Write::Jobs(JobCommand::ExpireClaims {
                claims: batch.to_vec(),
            })));
        }
        let sessions = take_due(&mut self.sessions, now);
        for batch in sessions.chunks(MAX_EXPIRE_BATCH) {
            commands.push(Command::new(Write::Sessions(SessionCommand::Expire {
                sessions: batch.to_vec(),
            })));
        }
        commands
    }

    fn enter(&mut self, term: u64) {
        if self.term != term {
            self.forget();
            self.term = term;
        }
    }

    /// Starts counting what the state holds and this clock does not, from `now`; forgets
    /// what the state no longer holds.
    fn sync(&mut self, state: &ClusterState, now: u64) {
        let mut claims = BTreeMap::new();
        for job in state.jobs().leased() {
            if let JobState::Claimed {
                lease_ms,
                claimed_at,
                session: None,
                ..
            } = &job.state
            {
                let claim = ClaimRef {
                    job: job.id,
                    claimed_at: *claimed_at,
                };
                let lease_ms = if *lease_ms == 0 {
                    UNRECORDED_LEASE_MS
                } else {
                    *lease_ms
                };
                let deadline = self
                    .claims
                    .get(&claim)
                    .copied()
                    .unwrap_or_else(|| now.saturating_add(lease_ms));
                claims.insert(claim, deadline);
            }
        }
        self.claims = claims;
        let mut sessions = BTreeMap::new();
        for session in state.sessions().iter() {
            let deadline = self
                .sessions
                .get(&session.id)
                .copied()
                .unwrap_or_else(|| now.saturating_add(session.ttl_ms));
            sessions.insert(session.id, deadline);
        }
        self.sessions = sessions;
        self.synced_at = Some(state.applied_index());
    }
}

/// The keys whose deadline is at or before `now`, each counted again for
/// [`EXPIRY_RETRY_MS`].
fn take_due<K: Ord + Copy>(deadlines: &mut BTreeMap<K, u64>, now: u64) -> Vec<K> {
    let mut due = Vec::new();
    for (key, deadline) in deadlines.iter_mut() {
        if *deadline <= now {
            due.push(*key);
            *deadline = now.saturating_add(EXPIRY_RETRY_MS);
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::KvCommand;
    use crate::jobs::{AttemptFailure, JobId};
    use crate::sessions::SessionOutcome;
    use crate::state::{Applied, Outcome};

    /// A state and the index of its last entry, written through the log's front door.
    struct Log {
        state: ClusterState,
    }

    impl Log {
        fn new() -> Self {
            Self {
                state: ClusterState::default(),
            }
        }

        fn write(&mut self, write: Write) -> Applied {
            let index = self.state.applied_index() + 1;
            let data = Command::new(write).encode().unwrap();
            self.state.apply(index, &data)
        }

        fn command(&mut self, command: Command) -> Applied {
            let index = self.state.applied_index() + 1;
            self.state.apply(index, &command.encode().unwrap())
        }

        fn enqueue(&mut self) -> JobId {
            match self.write(Write::Jobs(JobCommand::Enqueue {
                queue: "q".into(),
                payload: "p".into(),
                max_attempts: 5,
            })) {
                Applied::Answered(Outcome::Jobs(crate::JobOutcome::Enqueued { job })) => job,
                other => panic!("{other:?}"),
            }
        }

        fn claim(&mut self, lease_ms: u64, session: Option<SessionId>) -> Applied {
            self.write(Write::Jobs(JobCommand::Claim {
                queue: "q".into(),
                worker: "w".into(),
                lease_ms,
                // A wall clock far ahead: it must not matter.
                now_unix_ms: u64::MAX / 2,
                session,
            }))
        }

        fn grant(&mut self, ttl_ms: u64) -> SessionId {
            match self.write(Write::Sessions(SessionCommand::Grant {
                ttl_ms,
                name: None,
                max_claims: 2,
            })) {
                Applied::Answered(Outcome::Sessions(SessionOutcome::Granted(session))) => {
                    session.id
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// SESS-0: a lease ends once its duration has passed on the leader's clock, counted from
    /// when the leader saw the claim, not before, whatever wall time the claim carries.
    #[test]
    fn a_lease_ends_after_its_duration_on_the_leaders_clock() {
        let mut log = Log::new();
        let job = log.enqueue();
        log.claim(1_000, None);
        let mut clock = LeaseClock::new();
        assert!(clock.due(&log.state, 1, 5_000).is_empty());
        assert!(clock.due(&log.state, 1, 5_999).is_empty());
        assert_eq!(clock.next_deadline(), Some(6_000));
        let due = clock.due(&log.state, 1, 6_000);
        assert_eq!(due.len(), 1, "{due:?}");
        // Proposed once; not again while it is in flight.
        assert!(clock.due(&log.state, 1, 6_500).is_empty());
        let applied = log.command(due[0].clone());
        assert!(
            matches!(
                applied,
                Applied::Answered(Outcome::Jobs(crate::JobOutcome::LeasesExpired { ref requeued, .. }))
                    if requeued == &[job]
            ),
            "{applied:?}"
        );
        assert!(clock.due(&log.state, 1, 10_000).is_empty());
        let failure = log.state.jobs().get(job).unwrap().last_failure.clone();
        assert!(matches!(failure, Some(AttemptFailure::LeaseExpired { .. })));
    }

    /// SESS-0: a new term (a new leader) counts every lease afresh from its election, so a
    /// failover lengthens a lease and never shortens it.
    #[test]
    fn a_new_leader_gives_every_lease_its_full_duration() {
        let mut log = Log::new();
        log.enqueue();
        log.claim(1_000, None);
        let mut clock = LeaseClock::new();
        assert!(clock.due(&log.state, 1, 0).is_empty());
        // Leadership moves at 900: the next leader's clock starts over.
        clock.forget();
        assert!(clock.due(&log.state, 2, 900).is_empty());
        assert!(clock.due(&log.state, 2, 1_899).is_empty());
        assert_eq!(clock.due(&log.state, 2, 1_900).len(), 1);
    }

    /// An expiry decided for one claim never ends a later claim of the same job.
    #[test]
    fn a_late_expiry_skips_a_job_claimed_again() {
        let mut log = Log::new();
        let job = log.enqueue();
        log.claim(1_000, None);
        let mut clock = LeaseClock::new();
        clock.due(&log.state, 1, 0);
        let due = clock.due(&log.state, 1, 1_000);
        assert_eq!(due.len(), 1);
        // The worker nacks, and the job is claimed again before the expiry is applied.
        log.write(Write::Jobs(JobCommand::Nack {
            job,
            worker: "w".into(),
            reason: None,
        }));
        log.claim(1_000, None);
        let applied = log.command(due[0].clone());
        assert!(
            matches!(
                applied,
                Applied::Answered(Outcome::Jobs(crate::JobOutcome::LeasesExpired { ref requeued, .. }))
                    if requeued.is_empty()
            ),
            "{applied:?}"
        );
        assert!(matches!(
            log.state.jobs().get(job).unwrap().state,
            JobState::Claimed { .. }
        ));
    }

    /// SESS-1, SESS-2: a session without keepalives ends after its TTL, and its key and its
    /// claim end with it in the same entry; keepalives keep it, and its claim, alive past
    /// the claim's lease.
    #[test]
    fn a_session_ends_without_keepalives_and_takes_its_key_and_claims() {
        let mut log = Log::new();
        let job = log.enqueue();
        let session = log.grant(2_000);
        log.claim(500, Some(session));
        log.write(Write::Kv(KvCommand::Put {
            key: "svc/a".into(),
            value: "up".into(),
            if_revision: None,
            if_value: None,
            session: Some(session),
        }));
        let mut clock = LeaseClock::new();
        assert!(clock.due(&log.state, 1, 0).is_empty());
        // Keepalives every second: nothing ends, the claim's 500 ms lease notwithstanding.
        for now in (1_000..10_000).step_by(1_000) {
            assert_eq!(clock.keepalive(&log.state, 1, session, now), Some(2_000));
            assert!(clock.due(&log.state, 1, now).is_empty(), "at {now}");
        }
        assert!(clock.due(&log.state, 1, 10_999).is_empty());
        let due = clock.due(&log.state, 1, 11_000);
        assert_eq!(due.len(), 1, "{due:?}");
        let applied = log.command(due[0].clone());
        let Applied::Answered(Outcome::Sessions(SessionOutcome::Expired { ended })) = applied
        else {
            panic!("{applied:?}");
        };
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].deleted_keys, 1);
        assert_eq!(ended[0].requeued, vec![job]);
        assert!(log.state.kv().get("svc/a").is_none());
        assert!(log.state.sessions().get(session).is_none());
        assert_eq!(clock.keepalive(&log.state, 1, session, 11_001), None);
    }

    /// SESS-2: a session holds at most its `max_claims`, and a write naming an ended session
    /// is refused and changes nothing.
    #[test]
    fn a_session_bounds_its_claims_and_an_ended_one_is_refused() {
        let mut log = Log::new();
        for _ in 0..3 {
            log.enqueue();
        }
        let session = log.grant(1_000);
        assert!(matches!(
            log.claim(1_000, Some(session)),
            Applied::Answered(Outcome::Jobs(_))
        ));
        assert!(matches!(
            log.claim(1_000, Some(session)),
            Applied::Answered(Outcome::Jobs(_))
        ));
        assert!(matches!(
            log.claim(1_000, Some(session)),
            Applied::Answered(Outcome::Sessions(SessionOutcome::TooManyClaims {
                limit: 2,
                ..
            }))
        ));
        let revoked = log.write(Write::Sessions(SessionCommand::Revoke { session }));
        assert!(
            matches!(
                revoked,
                Applied::Answered(Outcome::Sessions(SessionOutcome::Revoked(ref ended)))
                    if ended.requeued.len() == 2
            ),
            "{revoked:?}"
        );
        assert!(matches!(
            log.claim(1_000, Some(session)),
            Applied::Answered(Outcome::Sessions(SessionOutcome::UnknownSession { .. }))
        ));
        assert_eq!(log.state.jobs().list(crate::JobStateKind::Ready).len(), 3);
    }

    /// A snapshot written by the build before sessions (a key, a job claimed with a 5 s lease
    /// at wall time 1,000,000 ms, a ready job, a request id) still restores: the claim has no
    /// recorded lease or entry, so the leader counts [`UNRECORDED_LEASE_MS`] for it, and no
    /// session is live.
    #[test]
    fn a_snapshot_from_before_sessions_restores_and_its_lease_is_counted() {
        const OLD_SNAPSHOT_HEX: [&str; 4] = [
            "019504930181a16b94a1760101019181a350757495a16ba176010101930382019701a171a170030181a7436c",
            "61696d656492a177ce000f55c8c0029702a171a270320300a55265616479c090919193a2723181a5436c6169",
            "6d92a171a17781a44a6f627381a7436c61696d65649701a171a170030181a7436c61696d656492a177ce000f",
            "55c8c000",
        ];
        let hex: String = OLD_SNAPSHOT_HEX.concat();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
            .collect();
        let mut state = ClusterState::default();
        state.restore(&bytes).unwrap();
        assert_eq!(state.applied_index(), 4);
        assert_eq!(state.kv().get("k").unwrap().session, None);
        assert!(state.sessions().is_empty());
        let claimed = state.jobs().get(JobId(1)).unwrap();
        assert!(
            matches!(
                claimed.state,
                JobState::Claimed {
                    lease_until_unix_ms: 1_005_000,
                    lease_ms: 0,
                    claimed_at: 0,
                    session: None,
                    ..
                }
            ),
            "{claimed:?}"
        );
        let mut clock = LeaseClock::new();
        assert!(clock.due(&state, 1, 0).is_empty());
        assert!(clock.due(&state, 1, UNRECORDED_LEASE_MS - 1).is_empty());
        assert_eq!(clock.due(&state, 1, UNRECORDED_LEASE_MS).len(), 1);
    }
}
