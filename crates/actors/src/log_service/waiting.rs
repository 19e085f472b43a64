//! Claims that wait for a ready job (SESS-3): `POST /v1/jobs/claim` with `wait_ms`, on the
//! leader.
//!
//! - **Look, then propose.** A waiting claim reads the leader's applied state (a local read:
//!   nothing is written to the log) and proposes its claim only when a job of its queue is
//!   ready, or when its request id is remembered (a retried claim: the state machine answers
//!   what it answered the first time). Otherwise it waits for a wake-up from the ElectionActor
//!   ([`crate::job_wakeups`]), to which it subscribed before its first look, so a job made
//!   ready between the look and the wait is not missed.
//! - **One at a time per queue.** Woken together, the claims waiting on one queue propose one
//!   after another ([`WaitingClaims::turn`]), each looking again once it has its turn, so that
//!   one enqueue writes one claim and the others wait on instead of each writing a claim that
//!   finds nothing. The claim itself stays the state machine's decision: a claim that still
//!   finds nothing (a claim without `wait_ms` took the job first) goes back to waiting, unless
//!   it carries a request id, which that claim has then spent: it answers `none_ready` at once.
//! - **Bounded.** At most [`MAX_WAITING_CLAIMS`] claims wait on a node at once; one more is
//!   refused with 503 `busy`. Their number is the gauge `conclave_log_claims_waiting`. A claim
//!   waits at most [`api::MAX_CLAIM_WAIT_MS`]; `wait_ms` above it is refused with 400
//!   `invalid_argument`.
//! - **Ends.** A claim answers the job it got; `none_ready` once `wait_ms` has passed;
//!   `not_leader` (naming the new leader when known) as soon as this node no longer leads,
//!   so that the client waits on the new leader; `unavailable` once the node stops. A claim
//!   whose client has gone is dropped with its HTTP request: its place, its subscription and
//!   its turn go with it ([`WaitSlot`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use conclave_api::{self as api, ErrorCode};
use conclave_statemachine::DEFAULT_QUEUE;
use metrics::Gauge;

use super::{Answer, LogService, fencing};
use crate::election::LogRefusal;
use crate::job_wakeups::JobWakeups;
use crate::metrics::NodeMetrics;

/// How many claims may wait on one node at once.
pub const MAX_WAITING_CLAIMS: usize = 10_000;

/// The claims waiting on one node: their number, the wake-ups they listen to, and each
/// queue's turn to propose. The node keeps one, shared by its admin API and the Rust façade.
#[derive(Debug)]
pub(crate) struct WaitingClaims {
    wakeups: JobWakeups,
    /// How many wait now, at most [`MAX_WAITING_CLAIMS`].
    waiting: Mutex<usize>,
    /// `conclave_log_claims_waiting`.
    gauge: Gauge,
    /// Each queue's turn, while a claim of it holds or waits for it; an entry whose turn
    /// nobody holds any more is swept when a new queue's is made.
    turns: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl WaitingClaims {
    /// No claim waiting yet; `wakeups` is what the node's ElectionActor bumps.
    pub(crate) fn new(wakeups: JobWakeups, metrics: &NodeMetrics) -> Self {
        Self {
            wakeups,
            waiting: Mutex::new(0),
            gauge: metrics.claims_waiting(),
            turns: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more waiting claim; `None` when [`MAX_WAITING_CLAIMS`] wait already.
    fn enter(&self) -> Option<WaitSlot<'_>> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if *waiting >= MAX_WAITING_CLAIMS {
            return None;
        }
        *waiting += 1;
        self.gauge.increment(1.0);
        Some(WaitSlot { claims: self })
    }

    /// The turn of `queue`'s waiting claims to propose: one at a time.
    fn turn(&self, queue: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(turn) = turns.get(queue).and_then(Weak::upgrade) {
            return turn;
        }
        turns.retain(|_, turn| turn.strong_count() > 0);
        let turn = Arc::new(tokio::sync::Mutex::new(()));
        turns.insert(queue.to_owned(), Arc::downgrade(&turn));
        turn
    }
}

/// One waiting claim's place: given back when the claim ends or is dropped (its client gone).
#[derive(Debug)]
struct WaitSlot<'a> {
    claims: &'a WaitingClaims,
}

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .claims
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *waiting = waiting.saturating_sub(1);
        self.claims.gauge.decrement(1.0);
    }
}

impl LogService {
    /// `POST /v1/jobs/claim` with `wait_ms`: see the [module docs](self).
    pub(super) async fn claim_waiting(
        &self,
        request: api::ClaimRequest,
        wait: Duration,
    ) -> Answer<api::JobAnswer> {
        let claims = self.node.waiting_claims();
        let Some(_slot) = claims.enter() else {
            return Err(self
                .error_now(
                    ErrorCode::Busy,
                    format!(
                        "{MAX_WAITING_CLAIMS} claims are waiting on this node already, the most \
                         it keeps; claim again shortly, or without wait_ms"
                    ),
                )
                .await);
        };
        let deadline = tokio::time::Instant::now() + wait;
        let queue = request
            .queue
            .clone()
            .unwrap_or_else(|| DEFAULT_QUEUE.to_owned());
        // Subscribed before the first look: whatever is applied after it wakes this claim.
        let mut wakeups = claims.wakeups.subscribe();
        loop {
            wakeups.borrow_and_update();
            if self.claimable(&queue, &request).await? {
                if let Some(answer) = self.claim_in_turn(&queue, &request, deadline).await? {
                    return Ok(answer);
                }
            }
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(deadline) => {
                    return Err(self.none_became_ready(&queue, wait).await);
                }
                changed = wakeups.changed() => {
                    if changed.is_err() {
                        return Err(self.unavailable(&crate::node::NodeError::Stopped));
                    }
                }
            }
        }
    }

    /// Whether proposing the claim now would get an answer other than `none_ready`: a job of
    /// `queue` is ready in the leader's applied state, or the claim's request id is remembered.
    /// `not_leader` when this node does not lead.
    async fn claimable(&self, queue: &str, request: &api::ClaimRequest) -> Answer<bool> {
        let wanted = queue.to_owned();
        let request_id = request.request_id.clone();
        let read = tokio::time::timeout(
            super::APPLY_TIMEOUT,
            self.node.read(true, move |state| {
                state.jobs().has_ready(&wanted)
                    || request_id.is_some_and(|id| state.remembers_request(&id))
            }),
        )
        .await;
        let answer = match read {
            Ok(answer) => answer.map_err(|err| self.unavailable(&err))?,
            Err(_) => return Err(self.timed_out().await),
        };
        let token = fencing(answer.term, answer.leader);
        match answer.outcome {
            Err(refusal) => Err(self.refused(refusal, token)),
            Ok(_) if answer.leader != Some(self.node.node_id()) => Err(self.refused(
                LogRefusal::NotLeader {
                    leader: answer.leader,
                },
                token,
            )),
            Ok(claimable) => Ok(claimable),
        }
    }

    /// Proposes the claim in its queue's turn, after looking again: another waiting claim may
    /// have taken the job meanwhile. `None`: nothing to claim after all (or the wait passed
    /// before the turn came), wait on.
    async fn claim_in_turn(
        &self,
        queue: &str,
        request: &api::ClaimRequest,
        deadline: tokio::time::Instant,
    ) -> Answer<Option<api::JobAnswer>> {
        let turn = self.node.waiting_claims().turn(queue);
        let Ok(_turn) = tokio::time::timeout_at(deadline, turn.lock()).await else {
            return Ok(None);
        };
        if !self.claimable(queue, request).await? {
            return Ok(None);
        }
        match self.claim_now(request.clone()).await {
            // A claim without `wait_ms` came first; a request id is spent now, and answers so.
            Err(error) if error.error == ErrorCode::NoneReady && request.request_id.is_none() => {
                Ok(None)
            }
            answer => answer.map(Some),
        }
    }

    /// 404 `none_ready` once the wait has passed.
    async fn none_became_ready(&self, queue: &str, wait: Duration) -> Box<api::ErrorAnswer> {
        self.error_now(
            ErrorCode::NoneReady,
            format!(
                "no job of queue {queue:?} became ready within {} ms",
                wait.as_millis()
            ),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting_claims() -> (WaitingClaims, NodeMetrics) {
        let metrics = NodeMetrics::new();
        (WaitingClaims::new(JobWakeups::new(), &metrics), metrics)
    }

    fn gauge(metrics: &NodeMetrics) -> Option<f64> {
        metrics.value("conclave_log_claims_waiting", &[])
    }

    /// SESS-3: at most [`MAX_WAITING_CLAIMS`] claims wait at once; a place given back (a claim
    /// answered, or dropped with its request) takes one more; the gauge follows.
    #[test]
    fn waiting_claims_are_bounded_and_counted() {
        let (claims, metrics) = waiting_claims();
        let mut slots: Vec<WaitSlot<'_>> = (0..MAX_WAITING_CLAIMS)
            .map(|_| claims.enter().expect("a place below the bound"))
            .collect();
        assert!(claims.enter().is_none());
        assert_eq!(gauge(&metrics), Some(MAX_WAITING_CLAIMS as f64));
        slots.pop();
        assert!(claims.enter().is_some());
        drop(slots);
        assert_eq!(gauge(&metrics), Some(0.0));
    }

    /// SESS-3: the claims of one queue share a turn while any holds it; another queue's is
    /// another, and a turn nobody holds is swept when a new one is made.
    #[test]
    fn claims_of_one_queue_share_a_turn() {
        let (claims, _metrics) = waiting_claims();
        let photos = claims.turn("photos");
        assert!(Arc::ptr_eq(&photos, &claims.turn("photos")));
        assert!(!Arc::ptr_eq(&photos, &claims.turn("mail")));
        drop(photos);
        let _videos = claims.turn("videos");
        let turns = claims.turns.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(turns.keys().collect::<Vec<_>>(), ["videos"]);
    }
}
