//! What each Raft message does to a node (RAFT-2..7): the higher-term rule, votes and
//! pre-votes, heartbeats and their answers, leadership assignment and `TimeoutNow`; the
//! log's messages go on to `replication.rs` and `snapshot.rs`.

use super::*;

impl Raft {
    pub(super) fn step(&mut self, now: Instant, from: PeerId, message: RaftMessage) {
        let term = message.term();
        self.handover = self
            .transfer()
            .filter(|transfer| transfer.target == from)
            .map(|transfer| (from, transfer.cause));
        if term > self.hard.term {
            match &message {
                RaftMessage::RequestVote(request) => {
                    if !request.leadership_transfer && self.in_lease(now) {
                        // RAFT-7: a node that hears its leader ignores a disruptive candidate
                        // (for example one rejoining after a partition).
                        debug!(%from, term, "vote request ignored: leader lease holds");
                        return;
                    }
                    if !request.pre_vote {
                        // Raft §5.2: only a leader heard or a vote granted restarts a
                        // follower's election timer, not a higher term alone. A candidate
                        // whose log is behind is refused, and if its term reset every timer
                        // it would time out first again and again (ranked timeouts put the
                        // same node first every round) while nobody else ever campaigns.
                        let running =
                            matches!(self.phase, Phase::Follower).then_some(self.election_deadline);
                        self.become_follower(now, term, None, LeaderChangeCause::HigherTerm);
                        if let Some(deadline) = running {
                            self.election_deadline = deadline;
                        }
                    }
                }
                // A granted pre-vote echoes the term this node would campaign in.
                RaftMessage::Vote(vote) if vote.pre_vote && vote.granted => {}
                _ => self.become_follower(now, term, None, LeaderChangeCause::HigherTerm),
            }
        } else if term < self.hard.term {
            self.answer_stale(from, &message);
            return;
        }

        match message {
            RaftMessage::RequestVote(request) => self.handle_request_vote(now, from, request),
            RaftMessage::Vote(vote) => self.handle_vote(now, from, vote),
            RaftMessage::AppendEntries(append) => self.handle_append(now, from, &append),
            RaftMessage::AppendResp(response) => self.handle_append_resp(now, from, response),
            RaftMessage::InstallSnapshot(chunk) => self.handle_install_snapshot(now, from, chunk),
            RaftMessage::SnapshotResp(response) => {
                self.handle_snapshot_resp(now, from, response);
            }
            RaftMessage::LeaderAssign(assign) => self.handle_leader_assign(now, from, assign),
            RaftMessage::TimeoutNow(order) => self.handle_timeout_now(now, from, order),
        }
    }

    /// Raft §5.1: a message of an older term is refused with the current term, so a stale
    /// leader or candidate learns it is behind and steps down.
    pub(super) fn answer_stale(&mut self, from: PeerId, message: &RaftMessage) {
        match message {
            RaftMessage::AppendEntries(_) => self.send(
                from,
                RaftMessage::AppendResp(AppendResp {
                    term: self.hard.term,
                    success: false,
                    match_index: 0,
                    hint: None,
                    priority: self.priority,
                    read_round: None,
                    chunk: None,
                }),
            ),
            RaftMessage::RequestVote(request) => {
                self.send(
                    from,
                    RaftMessage::Vote(Vote {
                        term: self.hard.term,
                        granted: false,
                        pre_vote: request.pre_vote,
                        priority: self.priority,
                    }),
                );
                self.outbox.publish(Event::VoteCast {
                    term: request.term,
                    candidate: request.candidate,
                    granted: false,
                    pre_vote: request.pre_vote,
                });
            }
            RaftMessage::InstallSnapshot(chunk) => self.send(
                from,
                RaftMessage::SnapshotResp(SnapshotResp {
                    term: self.hard.term,
                    last_index: chunk.last_index,
                    next_offset: 0,
                    success: false,
                }),
            ),
            _ => debug!(%from, term = message.term(), "stale message ignored"),
        }
    }

    /// RAFT-5 and Raft §5.2, §5.4.1: one vote per term, first come first served, only for a
    /// candidate whose log is at least as up to date. A pre-vote changes nothing here.
    pub(super) fn handle_request_vote(&mut self, now: Instant, from: PeerId, request: RequestVote) {
        let candidate_log = LogPosition::new(request.last_log_term, request.last_log_index);
        if request.pre_vote
            && matches!(self.phase, Phase::PreCandidate)
            && request.term == self.hard.term + 1
            && request.candidate == from
            && self.should_stand_aside(now, from, request.priority, candidate_log)
        {
            debug!(%from, term = request.term, "standing aside for a higher-ranked pre-candidate");
            self.stood_aside_for = Some((from, now));
            self.become_follower(
                now,
                self.hard.term,
                None,
                LeaderChangeCause::ElectionTimeout,
            );
        }
        let free_to_vote = self.hard.vote == Some(request.candidate)
            || (self.hard.vote.is_none() && self.leader.is_none())
            || (request.pre_vote && request.term > self.hard.term);
        // WAL-2: after an abstention, the node may have voted in the terms up to the floor
        // before it lost its WAL.
        let forgotten = self.vote_floor.is_some_and(|floor| request.term <= floor);
        // MEMB-1, MEMB-2: once the configuration is replicated state, a node answers whatever
        // its own configuration says of it (dissertation §4.1; etcd's learners do the same,
        // etcd-io/etcd#10998): the candidate's configuration may be newer — a promotion this
        // learner has not received, the removal of a leader that still needs this vote — and
        // a vote counts only where the candidate's configuration names a voter. With a static
        // `cluster.voters`, a node outside it never votes, as before.
        let may_vote = self.is_voter(self.config.id) || self.log.configuration().is_some();
        let granted = request.candidate == from
            && may_vote
            && self.is_voter(from)
            && free_to_vote
            && !forgotten
            && !self.log_catch_up
            && candidate_log >= self.log.last();
        if granted && !request.pre_vote {
            self.hard.vote = Some(from);
            self.reset_election_timer(now);
        }
        let answer_term = if granted {
            request.term
        } else {
            self.hard.term
        };
        self.send(
            from,
            RaftMessage::Vote(Vote {
                term: answer_term,
                granted,
                pre_vote: request.pre_vote,
                priority: self.priority,
            }),
        );
        self.outbox.publish(Event::VoteCast {
            term: request.term,
            candidate: request.candidate,
            granted,
            pre_vote: request.pre_vote,
        });
    }

    pub(super) fn handle_vote(&mut self, now: Instant, from: PeerId, vote: Vote) {
        let counts = match &self.phase {
            Phase::PreCandidate => {
                vote.pre_vote && (!vote.granted || vote.term == self.hard.term + 1)
            }
            Phase::Candidate => !vote.pre_vote && vote.term == self.hard.term,
            Phase::Follower | Phase::Leader(_) => false,
        };
        if !counts {
            return;
        }
        self.votes.insert(from, vote.granted);
        self.evaluate_campaign(now);
    }

    /// Two followers whose timeouts fire close together both start pre-vote rounds; if both
    /// went on to real campaigns they would split the vote and the cluster would wait another
    /// election timeout. A pre-vote commits nothing, so the lower-ranked of two pre-candidates
    /// can simply stand aside when it hears the other's request: the one with the more up-to-date
    /// log, or with an equal log the byte-wise larger id, goes on alone. To rule out a livelock
    /// behind a candidate that cannot win (say it reaches this node but not a majority), a node
    /// stands aside for the same peer at most once per two maximum election timeouts.
    pub(super) fn should_stand_aside(
        &self,
        now: Instant,
        candidate: PeerId,
        candidate_priority: Option<u8>,
        candidate_log: LogPosition,
    ) -> bool {
        // RAFT-10: with equal logs, priority first, as the ranked timeouts order them.
        let outranked = candidate_log > self.log.last()
            || (candidate_log == self.log.last()
                && (candidate_priority, candidate) > (self.priority, self.config.id));
        let recently = self.stood_aside_for.is_some_and(|(peer, at)| {
            peer == candidate
                && now.saturating_duration_since(at) < self.config.election_timeout_max * 2
        });
        outranked && !recently
    }

    /// Moves a campaign on once its outcome is decided.
    pub(super) fn evaluate_campaign(&mut self, now: Instant) {
        let candidate = matches!(self.phase, Phase::Candidate);
        match (&self.phase, self.tally()) {
            (Phase::PreCandidate, Tally::Won) => self.campaign(now, Campaign::Election),
            (Phase::Candidate, Tally::Won) => self.become_leader(now, LeaderChangeCause::VoteWon),
            (Phase::PreCandidate | Phase::Candidate, Tally::Lost) => {
                debug!(term = self.hard.term, "campaign lost");
                self.become_follower(
                    now,
                    self.hard.term,
                    None,
                    LeaderChangeCause::ElectionTimeout,
                );
                if candidate && self.config.ranked_timeouts {
                    // A lost election retries on the paper's uniform spread, not on the ranked
                    // timeout: two nodes that both rank first and split the vote lose at the
                    // same moment, and a ranked timeout carries no jitter, so they would meet
                    // again every round for as long as each one's RequestVote takes longer
                    // than their offset to arrive — its fsync included (found by the log's
                    // simulator once a hard state's fsync took time; seed 5024).
                    let (min, max) = (
                        self.config.election_timeout_min,
                        self.config.election_timeout_max,
                    );
                    self.election_deadline = now + self.rng.duration_between(min, max);
                }
            }
            _ => {}
        }
    }

    /// A message from `from` as the leader of this term (AppendEntries, InstallSnapshot):
    /// a candidate steps down, two leaders of one term resolve to the larger id, and the
    /// election timer restarts. Whether the message is to be followed.
    pub(super) fn hear_leader(&mut self, now: Instant, from: PeerId) -> bool {
        let term = self.hard.term;
        match self.phase {
            Phase::Leader(_) => {
                // Two leaders in one term: expected in `connected` mode after a partition
                // heals, impossible in `voters` mode. Either way the larger id stays, so
                // every node converges on the same leader.
                self.outbox.publish(Event::SplitBrain {
                    term,
                    known: self.config.id,
                    other: from,
                });
                if from < self.config.id {
                    return false;
                }
                self.become_follower(now, term, Some(from), LeaderChangeCause::TieBreak);
            }
            Phase::PreCandidate | Phase::Candidate => {
                // Raft §5.2: a candidate that hears a leader of its term returns to follower.
                self.become_follower(now, term, Some(from), LeaderChangeCause::LeaderHeard);
            }
            Phase::Follower => match self.leader {
                Some(known) if known != from => {
                    self.outbox.publish(Event::SplitBrain {
                        term,
                        known,
                        other: from,
                    });
                    if from < known {
                        return false;
                    }
                    self.set_leader(now, from, LeaderChangeCause::TieBreak);
                }
                Some(_) => self.set_leader(now, from, LeaderChangeCause::LeaderHeard),
                None => self.set_leader(now, from, LeaderChangeCause::LeaderHeard),
            },
        }
        self.reset_election_timer(now);
        true
    }

    pub(super) fn handle_append(&mut self, now: Instant, from: PeerId, append: &AppendEntries) {
        let term = self.hard.term;
        if !self.hear_leader(now, from) {
            return;
        }
        // RAFT-8: every follower mirrors the leader's pin, so all of them report the same
        // override, even one that missed the assignment or the pin's removal.
        if append.pinned {
            self.hard.manual_override = Some(from);
        } else if self.hard.manual_override == Some(from) {
            self.hard.manual_override = None;
        }
        if self.config.log.is_some() {
            self.follow_append(from, append);
            return;
        }

        // Without a log, a heartbeat only tells the leader whether this follower's log ends
        // where the leader's does.
        let matches = append.prev_index == 0
            || LogPosition::new(append.prev_term, append.prev_index) == self.log.last();
        let response = if matches {
            AppendResp {
                term,
                success: true,
                match_index: append.prev_index,
                hint: None,
                priority: self.priority,
                read_round: None,
                chunk: None,
            }
        } else {
            AppendResp {
                term,
                success: false,
                match_index: 0,
                hint: Some(ConflictHint {
                    index: append.prev_index.min(self.log.last().index + 1),
                    term: if self.log.last().index >= append.prev_index {
                        self.log.last().term
                    } else {
                        0
                    },
                }),
                priority: self.priority,
                read_round: None,
                chunk: None,
            }
        };
        self.send(from, RaftMessage::AppendResp(response));
    }

    pub(super) fn handle_append_resp(&mut self, now: Instant, from: PeerId, response: AppendResp) {
        let Some(leading) = self.phase.leadership_mut() else {
            return;
        };
        leading.recent_active.insert(from);
        leading.last_heard.insert(from, now);
        if self.config.log.is_some() {
            self.replication_answered(now, from, response);
        } else if response.success {
            // Without a log only the match counts: it is what a transfer waits for.
            if let Some(progress) = self.progress_of(from) {
                progress.matched = progress.matched.max(response.match_index);
            }
        }
        self.order_transfer_if_caught_up(from);
        self.consider_preemption(now);
    }

    /// RAFT-8. In `connected` mode an assignment is authoritative: adopt its term and leader.
    /// In `voters` mode it is a request to the leader to transfer leadership (or to pin itself);
    /// followers learn the pin from the leader's heartbeats.
    pub(super) fn handle_leader_assign(
        &mut self,
        now: Instant,
        from: PeerId,
        assign: LeaderAssign,
    ) {
        match self.electorate() {
            Electorate::Connected => {
                if let Some(current) = self.leader {
                    if current != assign.leader && current > assign.leader {
                        // Two claims in one term resolve to the larger id everywhere.
                        return;
                    }
                }
                info!(leader = %assign.leader, assigner = %assign.assigner, term = assign.term, "leader assigned");
                self.hard.manual_override = Some(assign.leader);
                if assign.leader == self.config.id {
                    self.become_leader(now, LeaderChangeCause::SetLeader);
                } else {
                    self.become_follower(
                        now,
                        assign.term,
                        Some(assign.leader),
                        LeaderChangeCause::SetLeader,
                    );
                }
            }
            Electorate::Voters(_) => {
                if self.is_leader() && assign.term == self.hard.term {
                    if assign.leader == self.config.id {
                        self.pin_self(now);
                    } else if self.is_voter(assign.leader) {
                        self.start_transfer(now, assign.leader, true, LeaderChangeCause::SetLeader);
                    } else {
                        warn!(target = %assign.leader, "leader assignment to a non-voter ignored");
                    }
                } else {
                    debug!(%from, "leader assignment ignored: this node is not its leader");
                }
            }
        }
    }

    /// RAFT-8 leadership transfer: campaign now, without pre-vote, telling voters to set their
    /// lease aside.
    pub(super) fn handle_timeout_now(&mut self, now: Instant, from: PeerId, order: TimeoutNow) {
        if self.is_leader() || !self.is_voter(self.config.id) {
            return;
        }
        info!(%from, pin = order.pin, "ordered to campaign now");
        self.pin_on_win = order.pin;
        self.campaign(now, Campaign::Transfer);
    }
}
