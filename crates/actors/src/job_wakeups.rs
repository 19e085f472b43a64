//! The wake-ups of claims that wait for a ready job (SESS-3). The ElectionActor, which applies
//! the replicated log, bumps one counter whenever something a waiting claim must look at again
//! happened: an applied entry made a job ready (an enqueue, a nack, a lease expiry, a retry of
//! a dead job), a leader's snapshot replaced the state, this node's leader changed, or the
//! actor stopped. Each waiting claim holds a receiver and, woken, reads the leader's applied
//! state again: a job of its queue ready means it proposes its claim; another leader means it
//! answers `not_leader`; a stopped node, `unavailable`. Nothing is written to the log while a
//! claim waits.
//!
//! A `tokio::sync::watch` keeps only the latest count, so a burst of entries wakes a waiter
//! once, and a waiter that subscribes before it looks at the state misses nothing that changes
//! after its look. The counter says only "look again", not which queue: a claim woken for
//! another queue's job reads the state (one message to the ElectionActor, no log entry) and
//! waits on; the number of waiting claims is bounded, and so is that work.

use std::sync::Arc;

use conclave_statemachine::{Applied, JobOutcome, Outcome, SessionOutcome};
use tokio::sync::watch;

/// The sending side of the wake-ups: kept by the ElectionActor, which bumps it, and by the
/// node's waiting claims, which subscribe to it. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct JobWakeups(Arc<watch::Sender<u64>>);

impl JobWakeups {
    /// Wake-ups nobody listens to yet.
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    /// Every waiting claim looks at the state again.
    pub(crate) fn wake(&self) {
        // `send_modify` stores the change even while no claim waits; `send` would not.
        self.0.send_modify(|count| *count = count.wrapping_add(1));
    }

    /// A receiver that counts what happens from now on as unseen.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// Whether applying an entry may have made a job ready. A replayed write changed nothing.
pub(crate) fn makes_job_ready(applied: &Applied) -> bool {
    match applied {
        Applied::Answered(Outcome::Jobs(outcome)) => match outcome {
            JobOutcome::Enqueued { .. } | JobOutcome::Requeued { .. } | JobOutcome::Retried(_) => {
                true
            }
            JobOutcome::LeasesExpired { requeued, .. } => !requeued.is_empty(),
            _ => false,
        },
        // SESS-2: a session that ends gives back the jobs it held.
        Applied::Answered(Outcome::Sessions(SessionOutcome::Revoked(ended))) => {
            !ended.requeued.is_empty()
        }
        Applied::Answered(Outcome::Sessions(SessionOutcome::Expired { ended })) => {
            ended.iter().any(|ended| !ended.requeued.is_empty())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_statemachine::JobId;

    /// SESS-3: the outcomes that make a job ready wake the waiting claims; a claim, an ack, a
    /// dead letter, a lease expiry that requeued nothing and a replay do not.
    #[test]
    fn only_outcomes_that_make_a_job_ready_wake_waiting_claims() {
        let answered = |outcome| Applied::Answered(Outcome::Jobs(outcome));
        let job = JobId(1);
        for ready in [
            JobOutcome::Enqueued { job },
            JobOutcome::Requeued { job, attempts: 1 },
            JobOutcome::LeasesExpired {
                requeued: vec![job],
                dead_lettered: Vec::new(),
            },
        ] {
            assert!(makes_job_ready(&answered(ready.clone())), "{ready:?}");
        }
        for quiet in [
            JobOutcome::NoneReady,
            JobOutcome::Acked { job },
            JobOutcome::DeadLettered { job, attempts: 3 },
            JobOutcome::LeasesExpired {
                requeued: Vec::new(),
                dead_lettered: vec![job],
            },
        ] {
            assert!(!makes_job_ready(&answered(quiet.clone())), "{quiet:?}");
        }
        let replayed = Applied::Replayed(Outcome::Jobs(JobOutcome::Enqueued { job }));
        assert!(!makes_job_ready(&replayed));
    }

    /// SESS-3: a receiver taken before a wake-up sees it, however many came.
    #[actix_rt::test]
    async fn a_wake_up_after_subscribing_is_seen() {
        let wakeups = JobWakeups::new();
        let mut receiver = wakeups.subscribe();
        assert!(!receiver.has_changed().unwrap_or(false));
        wakeups.wake();
        wakeups.wake();
        assert!(receiver.changed().await.is_ok());
        assert!(!receiver.has_changed().unwrap_or(true));
    }

    /// SESS-2, SESS-3: a session that ends with jobs wakes the waiting claims; one that held
    /// none does not.
    #[test]
    fn a_session_ending_with_jobs_wakes_waiting_claims() {
        use conclave_statemachine::{EndedSession, SessionId};
        let ended = |requeued: Vec<JobId>| EndedSession {
            session: SessionId(1),
            deleted_keys: 0,
            requeued,
            dead_lettered: Vec::new(),
        };
        let answered = |outcome| Applied::Answered(Outcome::Sessions(outcome));
        assert!(makes_job_ready(&answered(SessionOutcome::Revoked(ended(
            vec![JobId(3)]
        )))));
        assert!(makes_job_ready(&answered(SessionOutcome::Expired {
            ended: vec![ended(Vec::new()), ended(vec![JobId(4)])],
        })));
        assert!(!makes_job_ready(&answered(SessionOutcome::Revoked(ended(
            Vec::new()
        )))));
    }
}
