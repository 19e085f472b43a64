//! The operator's commands (RAFT-8: `SetLeader`, `EnableAutoLeaderElection`, resign) and
//! the graceful stop of CB-2, with the leadership transfer they start.

use super::*;

impl Raft {
    pub(super) fn command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        if self.quarantined {
            return Err(ElectionError::Quarantined);
        }
        match command {
            Command::EnableAutoElection(enabled) => {
                self.auto_election = enabled;
                // RAFT-8: the operator's choice outlives a restart.
                self.outbox.push(Action::PersistAutoElection(enabled));
                if enabled && self.leader.is_none() && self.hard.manual_override.is_some() {
                    // The pinned leader is gone and automatic election is back: lift the pin.
                    info!("automatic election enabled; manual override cleared");
                    self.hard.manual_override = None;
                }
                Ok(CommandOutcome::Applied)
            }
            Command::SetLeader(_) if self.abstention.is_some() => Err(ElectionError::Abstaining),
            Command::SetLeader(target) => match self.electorate() {
                Electorate::Connected => self.assign_leader(now, target),
                Electorate::Voters(_) => self.request_transfer(now, target),
            },
            Command::Resign => self.resign(now),
        }
    }

    /// `connected` mode: broadcast `LeaderAssign { term + 1 }` and adopt it here.
    pub(super) fn assign_leader(
        &mut self,
        now: Instant,
        target: PeerId,
    ) -> Result<CommandOutcome, ElectionError> {
        if target != self.config.id && !self.connected.contains(&target) {
            return Err(ElectionError::UnknownPeer(target));
        }
        let term = self.hard.term + 1;
        self.hard.term = term;
        self.hard.vote = None;
        self.hard.manual_override = Some(target);
        let assign = LeaderAssign {
            term,
            leader: target,
            assigner: self.config.id,
        };
        for peer in self.connected.clone() {
            self.send(peer, RaftMessage::LeaderAssign(assign));
        }
        if target == self.config.id {
            self.become_leader(now, LeaderChangeCause::SetLeader);
        } else {
            self.become_follower(now, term, Some(target), LeaderChangeCause::SetLeader);
        }
        Ok(CommandOutcome::Applied)
    }

    /// `voters` mode: a transfer to `target`, then a pin.
    pub(super) fn request_transfer(
        &mut self,
        now: Instant,
        target: PeerId,
    ) -> Result<CommandOutcome, ElectionError> {
        if !self.is_voter(target) {
            return Err(ElectionError::NotAVoter(target));
        }
        if self.is_leader() {
            if target == self.config.id {
                self.pin_self(now);
                return Ok(CommandOutcome::Applied);
            }
            self.start_transfer(now, target, true, LeaderChangeCause::SetLeader);
            return Ok(CommandOutcome::TransferStarted { target });
        }
        if let Some(leader) = self.leader {
            self.send(
                leader,
                RaftMessage::LeaderAssign(LeaderAssign {
                    term: self.hard.term,
                    leader: target,
                    assigner: self.config.id,
                }),
            );
            return Ok(CommandOutcome::Forwarded { to: leader });
        }
        // No leader to ask: order the target to campaign directly (force master).
        if target == self.config.id {
            self.pin_on_win = true;
            self.campaign(now, Campaign::Transfer);
        } else {
            self.send(
                target,
                RaftMessage::TimeoutNow(TimeoutNow {
                    term: self.hard.term,
                    pin: true,
                }),
            );
        }
        Ok(CommandOutcome::TransferStarted { target })
    }

    pub(super) fn resign(&mut self, now: Instant) -> Result<CommandOutcome, ElectionError> {
        if !self.is_leader() {
            return Err(ElectionError::NotLeader {
                leader: self.leader,
            });
        }
        if self.hard.manual_override == Some(self.config.id) {
            self.hard.manual_override = None;
        }
        // Fabric's Yield: do not propose again until another leader shows up or this passes.
        self.yielded_until = Some(now + self.config.election_timeout_max * 2);
        match self.best_successor() {
            Some(target) => {
                self.start_transfer(now, target, false, LeaderChangeCause::Resign);
                Ok(CommandOutcome::TransferStarted { target })
            }
            None => {
                self.become_follower(now, self.hard.term, None, LeaderChangeCause::Resign);
                Ok(CommandOutcome::SteppedDown)
            }
        }
    }

    /// The electable peer heard from most recently with the longest matching log; ties go to
    /// the smallest id so the choice is deterministic.
    pub(super) fn best_successor(&self) -> Option<PeerId> {
        self.election_peers()
            .into_iter()
            .filter(|peer| {
                self.phase
                    .leadership()
                    .is_some_and(|leading| leading.recent_active.contains(peer))
                    || self.connected.contains(peer)
            })
            .max_by(|a, b| {
                let ma = self.match_index_of(*a);
                let mb = self.match_index_of(*b);
                ma.cmp(&mb).then_with(|| b.cmp(a))
            })
    }

    pub(super) fn start_transfer(
        &mut self,
        now: Instant,
        target: PeerId,
        pin: bool,
        cause: LeaderChangeCause,
    ) {
        info!(%target, pin, "leadership transfer started");
        self.set_transfer(Some(Transfer {
            target,
            deadline: now + self.config.election_timeout_min,
            pin,
            ordered: false,
            cause,
        }));
        self.order_transfer_if_caught_up(target);
        if self.transfer().is_some_and(|transfer| !transfer.ordered) {
            // Ask the target where its log ends; its answer releases `TimeoutNow`.
            self.send_heartbeat(now, target);
        }
    }

    pub(super) fn order_transfer_if_caught_up(&mut self, peer: PeerId) {
        let Some(transfer) = self.transfer() else {
            return;
        };
        let caught_up = self.match_index_of(peer) >= self.log.last().index;
        if transfer.target != peer || transfer.ordered || !caught_up {
            return;
        }
        self.send(
            peer,
            RaftMessage::TimeoutNow(TimeoutNow {
                term: self.hard.term,
                pin: transfer.pin,
            }),
        );
        self.set_transfer(Some(Transfer {
            ordered: true,
            ..transfer
        }));
    }

    /// Pins this leader (RAFT-8) and tells the followers at once: heartbeats carry the pin.
    pub(super) fn pin_self(&mut self, now: Instant) {
        self.hard.manual_override = Some(self.config.id);
        self.broadcast_heartbeat(now);
    }
}
