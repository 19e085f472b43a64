//! Priority and preemption (RAFT-10).
//!
//! keepalived's priorities and preemption, made quorum-safe: a preemption is only ever an
//! ordinary leadership transfer (RAFT-8), so one leader per term and one vote per term are
//! never at stake.
//!
//! - A node may have a priority, 0–255, higher preferred ([`RaftConfig::priority`]). It sends
//!   it on its vote requests, votes and heartbeat answers, and remembers what each peer last
//!   sent. A node without one sends none, and a peer not heard yet counts as one without.
//! - Lower priority campaigns later: the ranked election timeouts order the electable nodes by
//!   priority first, then by the larger id, and the pre-vote stand-aside rule agrees (the more
//!   up-to-date log first, then priority, then id). With no priority anywhere, both are the id
//!   rule they were before. A node that has not heard a peer's priority ranks it as having
//!   none, so right after start every node with a priority may time out first; the pre-vote
//!   stand-aside then lets the highest go on alone.
//! - Preemption: a leader with a priority that, continuously for `preempt_delay`, has a voter
//!   of higher priority that is caught up (its log matches the leader's) and answered within
//!   the minimum election timeout, transfers leadership to the highest such voter (then the
//!   larger id), with the cause [`LeaderChangeCause::Priority`]. Not with `nopreempt`, not while
//!   an operator's pin holds (`manual_override`), not while automatic election is off, not
//!   while stopping. A transfer that times out leaves it leading, like RAFT-8's; the next
//!   attempt comes no sooner than `preempt_delay` later.
//! - A health reading with a priority ([`HealthReading::priority`], keepalived's track
//!   scripts) replaces the node's priority while it runs; one without brings back the
//!   configured priority. The new value goes out with the next messages, so a leader whose
//!   priority drops below a caught-up voter's is preempted `preempt_delay` later, and a voter
//!   whose priority rises above the leader's preempts it once the leader has heard it.
//!

use super::*;

impl Raft {
    /// Remembers the priority `from` sent with a vote request, a vote or a heartbeat answer.
    pub(super) fn note_peer_priority(&mut self, from: PeerId, message: &RaftMessage) {
        let priority = match message {
            RaftMessage::RequestVote(request) if request.candidate == from => request.priority,
            RaftMessage::Vote(vote) => vote.priority,
            RaftMessage::AppendResp(response) => response.priority,
            _ => return,
        };
        match priority {
            Some(priority) => {
                self.peer_priorities.insert(from, priority);
            }
            None => {
                self.peer_priorities.remove(&from);
            }
        }
    }

    /// The priority of `peer` as far as this node knows; `None` for a peer that sent none or
    /// was not heard yet, which ranks below every priority.
    pub(super) fn priority_of(&self, peer: PeerId) -> Option<u8> {
        if peer == self.config.id {
            self.priority
        } else {
            self.peer_priorities.get(&peer).copied()
        }
    }

    /// The voter this leader would hand over to now: of the voters with a higher priority than
    /// its own that are caught up and answered within the minimum election timeout, the one
    /// with the highest priority (then the larger id, as the ranked timeouts order them).
    /// `None` when this node must not be preempted: it does not lead, it has no priority of its
    /// own, `nopreempt` is set, an operator's pin holds, automatic election is off, or it is
    /// stopping.
    pub(super) fn preemption_target(&self, now: Instant) -> Option<PeerId> {
        if !self.is_leader()
            || self.config.nopreempt
            || self.hard.manual_override.is_some()
            || !self.auto_election
            || self.shutdown.is_some()
        {
            return None;
        }
        let own = self.priority?;
        let leading = self.phase.leadership()?;
        self.election_peers()
            .into_iter()
            .filter_map(|peer| {
                let priority = self.peer_priorities.get(&peer).copied()?;
                let caught_up = self.match_index_of(peer) >= self.log.last().index;
                let connected = leading.last_heard.get(&peer).is_some_and(|heard| {
                    now.saturating_duration_since(*heard) < self.config.election_timeout_min
                });
                (priority > own && caught_up && connected).then_some((priority, peer))
            })
            .max()
            .map(|(_, peer)| peer)
    }

    /// When the next preemption may start: `preempt_delay` after a better voter appeared, and
    /// no sooner than `preempt_delay` after the last attempt. `None` while none is pending or a
    /// transfer is under way.
    pub(super) fn preemption_due(&self) -> Option<Instant> {
        let leading = self.phase.leadership()?;
        if leading.transfer.is_some() {
            return None;
        }
        let delay = self.config.preempt_delay;
        let mut due = leading.outranked_since? + delay;
        if let Some(last) = leading.last_preemption {
            due = due.max(last + delay);
        }
        Some(due)
    }

    /// A leader checks whether a better voter has been there for `preempt_delay`, and if so
    /// hands leadership over to it with an ordinary transfer (RAFT-8): the target campaigns in
    /// a new term and must win a normal election, so no term ever gets two leaders. A transfer
    /// that times out leaves this node leading; it tries again `preempt_delay` later if the
    /// better voter is still there.
    pub(super) fn consider_preemption(&mut self, now: Instant) {
        if self
            .phase
            .leadership()
            .is_none_or(|leading| leading.transfer.is_some())
        {
            return;
        }
        let Some(target) = self.preemption_target(now) else {
            if let Some(leading) = self.phase.leadership_mut() {
                leading.outranked_since = None;
            }
            return;
        };
        if let Some(leading) = self.phase.leadership_mut() {
            leading.outranked_since.get_or_insert(now);
        }
        if self.preemption_due().is_none_or(|due| now < due) {
            return;
        }
        info!(
            %target,
            own = ?self.priority,
            target_priority = ?self.priority_of(target),
            "a caught-up voter of higher priority: handing leadership over (preemption)"
        );
        if let Some(leading) = self.phase.leadership_mut() {
            leading.last_preemption = Some(now);
        }
        self.start_transfer(now, target, false, LeaderChangeCause::Priority);
    }
}
