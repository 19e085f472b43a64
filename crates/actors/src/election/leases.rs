//! The leader's half of job leases and sessions in the ElectionActor (SESS-0, SESS-1): the
//! [`LeaseClock`](conclave_statemachine::LeaseClock) counted on the node's monotonic clock,
//! keepalives answered from it, and the expiry entries it says are due proposed like any
//! write.
//!
//! Only a leader counts. A node that is not leading forgets its counts at the next upkeep, so
//! when it leads again (in a later term) it counts every lease and session afresh from then:
//! a failover lengthens a lease or a session and never shortens one. No wall clock is read
//! here; the node's clock is actix's monotonic one.

use actix::prelude::*;
use conclave_statemachine::{JobCommand, SessionCommand, SessionId, Write};

use std::time::Duration;

use super::ElectionActor;
use super::replication::{Fenced, LogRefusal};

/// The shortest wait between two looks at the lease clock: counts that run out together are
/// expired in one look.
const LOG_UPKEEP_FLOOR: Duration = Duration::from_millis(10);

/// A session's keepalive (`POST /v1/sessions/{id}/keepalive`): answered by the leader with
/// the session's TTL, counted again from now, or `None` when no such session is live.
#[derive(Message)]
#[rtype(result = "Fenced<Option<u64>>")]
pub struct SessionKeepalive {
    /// The session.
    pub session: SessionId,
}

/// How long each live session has left on the leader's clock, by session (`GET
/// /v1/sessions`); a node that does not lead refuses.
#[derive(Message)]
#[rtype(result = "Fenced<std::collections::BTreeMap<SessionId, u64>>")]
pub struct SessionsRemaining;

impl ElectionActor {
    /// The node's monotonic clock in milliseconds, as the lease clock counts.
    fn lease_now(&self) -> u64 {
        self.clock.now().as_millis()
    }

    /// Looks at the lease clock after `delay`, and then again when the next count runs out
    /// (within [`LOG_UPKEEP_INTERVAL`](super::LOG_UPKEEP_INTERVAL)).
    pub(super) fn schedule_log_upkeep(&mut self, ctx: &mut Context<Self>, delay: Duration) {
        ctx.run_later(delay, |actor, ctx| {
            let _span = actor.span.clone().entered();
            actor.log_upkeep(ctx);
            let next = actor.next_log_upkeep();
            actor.schedule_log_upkeep(ctx, next);
        });
    }

    /// How long until the lease clock's earliest count runs out, within
    /// [`LOG_UPKEEP_FLOOR`] and [`LOG_UPKEEP_INTERVAL`](super::LOG_UPKEEP_INTERVAL).
    fn next_log_upkeep(&self) -> Duration {
        let now_ms = self.lease_now();
        let due_in = self
            .log
            .as_ref()
            .and_then(|driver| driver.lease_clock.next_deadline())
            .map(|deadline| Duration::from_millis(deadline.saturating_sub(now_ms)));
        due_in
            .unwrap_or(super::LOG_UPKEEP_INTERVAL)
            .clamp(LOG_UPKEEP_FLOOR, super::LOG_UPKEEP_INTERVAL)
    }

    /// At every look: a leader proposes the expiries its lease clock says are due; a node
    /// that does not lead forgets its counts.
    pub(super) fn log_upkeep(&mut self, ctx: &mut Context<Self>) {
        let now_ms = self.lease_now();
        let leading = self.driver.election().is_leader();
        let term = self.driver.election().term();
        let Some(driver) = self.log.as_mut() else {
            return;
        };
        self.metrics
            .set_sessions(driver.machine.state().sessions().len());
        let (used, limits) = driver.machine.store_use();
        self.metrics.set_store(used, limits);
        if !leading {
            driver.lease_clock.forget();
            return;
        }
        let due = driver.lease_clock.due(driver.machine.state(), term, now_ms);
        if due.is_empty() {
            return;
        }
        let now = self.clock.now();
        for command in &due {
            match &command.write {
                Write::Jobs(JobCommand::ExpireClaims { claims }) => {
                    self.metrics.expiries_proposed("lease", claims.len());
                }
                Write::Sessions(SessionCommand::Expire { sessions }) => {
                    self.metrics.expiries_proposed("session", sessions.len());
                }
                _ => {}
            }
        }
        if let Some(mut log) = self.driver.election_mut().replicated_log() {
            for command in due {
                match command.encode() {
                    // Refused while handing over: the next leader counts afresh.
                    Ok(data) => {
                        let _ = log.propose(now, data);
                    }
                    Err(err) => tracing::warn!(%err, "an expiry entry does not encode"),
                }
            }
        }
        self.pump(ctx);
    }
}

impl Handler<SessionKeepalive> for ElectionActor {
    type Result = MessageResult<SessionKeepalive>;

    fn handle(&mut self, keepalive: SessionKeepalive, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let fence = self.fence();
        let now_ms = self.lease_now();
        let leading = self.driver.election().is_leader();
        let term = self.driver.election().term();
        let leader = self.driver.election().leader();
        MessageResult(fence.wrap(match self.log.as_mut() {
            None => Err(LogRefusal::Disabled),
            Some(_) if !leading => Err(LogRefusal::NotLeader { leader }),
            Some(driver) => match driver.lease_clock.keepalive(
                driver.machine.state(),
                term,
                keepalive.session,
                now_ms,
            ) {
                Some(ttl) => Ok(Some(ttl)),
                // A leader elected moments ago may not have applied the grant yet, though it
                // is committed: until it applies an entry of its own term, ask again.
                None if driver.applied_term < term => Err(LogRefusal::Busy),
                None => Ok(None),
            },
        }))
    }
}

impl Handler<SessionsRemaining> for ElectionActor {
    type Result = MessageResult<SessionsRemaining>;

    fn handle(&mut self, _: SessionsRemaining, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let fence = self.fence();
        let now_ms = self.lease_now();
        let leading = self.driver.election().is_leader();
        let leader = self.driver.election().leader();
        MessageResult(
            fence.wrap(match self.log.as_ref() {
                None => Err(LogRefusal::Disabled),
                Some(_) if !leading => Err(LogRefusal::NotLeader { leader }),
                Some(driver) => Ok(driver
                    .machine
                    .state()
                    .sessions()
                    .iter()
                    .filter_map(|session| {
                        driver
                            .lease_clock
                            .session_remaining(session.id, now_ms)
                            .map(|left| (session.id, left))
                    })
                    .collect()),
            }),
        )
    }
}
