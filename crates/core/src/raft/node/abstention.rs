//! Abstention after a lost hard state (WAL-2, WAL-5), and the question a node of a new cluster
//! asks before it records a genesis (MEMB-5).
//!
//! A node whose WAL holds no hard state — deleted, wiped, or repaired — may have voted,
//! before it lost its WAL, in terms it no longer knows. Voting again in one of them could
//! give a term two leaders. (A node created for a new cluster is different: its WAL starts
//! with a genesis record, a durable "never voted", and it takes part at once; the driver
//! tells the two apart, WAL-5.) Its driver calls [`Raft::begin_abstention`] right after
//! [`Raft::new`], and a voter of a cluster with other voters then abstains:
//!
//! - it grants no vote and no pre-vote, does not campaign, follows no leader, and does not
//!   adopt the terms it hears, so it persists nothing: a restart during the abstention
//!   abstains again;
//! - it records, for every other voter, the highest term that voter's messages showed, and
//!   asks the voters it still needs for their term every heartbeat interval with a pre-vote
//!   request for term 0 — a term below every real one, which every node answers with a
//!   refusal carrying its current term, and which changes nothing on either side;
//! - the abstention ends at the first of two moments: when every other voter has been
//!   heard, or, once a *settling time* of two maximum election timeouts has passed since it
//!   began, when `ceil(n / 2)` of the other voters (of `n` voters in all) have been heard
//!   after the settling time. The node then adopts the highest term heard (or its own, if
//!   higher), refuses every vote in that term and the ones before, and takes part as usual
//!   from the next term on. It persists the adopted term with [`Action::PersistAmnesic`]:
//!   the WAL records no vote the node did not cast, and stays amnesic — a restart abstains
//!   again — until a later term is persisted.
//!
//! Why either moment is enough. Say the node voted for candidate C in term V before losing
//! its WAL. C made term V durable before asking, and a node's term never goes back.
//!
//! - Every voter heard: C's answer carries a term of at least V, so the adopted term is at
//!   least V, and every term the node votes in afterwards is one it never voted in.
//! - A settled majority heard, C perhaps not among them: C's campaign for term V began
//!   before the node lost its WAL, and a campaign lasts one election timeout at most, so by
//!   the end of the settling time C has either given term V up (then no one can ever win V
//!   with the forgotten vote: a candidate counts only the votes of its current campaign) or
//!   won it with the votes of a majority `S` of the voters, the node among them. Each member
//!   of `S` had made term V durable before C won. The voters heard after the settling time,
//!   `Q`, are `ceil(n / 2)` of the `n - 1` others; `S` without the node holds at least
//!   `floor(n / 2)` of those same `n - 1`, and `ceil(n / 2) + floor(n / 2) = n > n - 1`, so a
//!   member of `S` is in `Q` and its answer, sent after C's win, carries a term of at least V.
//!   The adopted term is again at least V. With three voters `ceil(3 / 2) = 2` is both
//!   others: a wiped voter of three waits for both, whatever the clock says, because a
//!   majority of the others is both of them.
//!
//! The argument needs the other voters to have kept their WALs (one node at a time
//! abstaining or down with a lost WAL) and messages not to be delayed longer than the node
//! was down (so that what it hears after its start was sent after it lost its WAL, and what
//! it hears after the settling time was sent after every campaign it voted in had ended); it
//! holds across partitions and message loss, which only make the wait longer.
//!
//! Hearing a leader does not end the abstention, and neither does a timer alone. A timer can
//! run out while the candidate this node voted for is cut off from it; the simulator's
//! `wal-loss` scenario with a rule of two maximum election timeouts finds two leaders in one
//! term. A leader heard is no proof either: with five voters, `c` can win term 6 with the
//! votes of this node and `e` while a stale leader `d` of term 5 still holds `a`; if this node
//! then loses its WAL and hears only `d` and `a`, ending at term 5 lets it vote for `a` in
//! term 6, and term 6 gets a second leader — two of four others is less than `ceil(5 / 2)`.
//!
//! What it costs: a node that lost its WAL takes part again a round trip after it has heard
//! every other voter, or two maximum election timeouts after its start when a voter is down
//! and enough others answer. With three voters and one down for good, a wiped voter stays out
//! until that voter returns or is removed from `cluster.voters`. A non-voter and the only
//! voter of a cluster never abstain. In `connected` mode, where there is no configured
//! electorate, the node abstains for at least two maximum election timeouts and until it has
//! heard every peer membership reports connected; that mode promises no single leader per
//! term across partitions anyway.

use super::*;

impl Raft {
    /// A message while abstaining: note the sender's term, refuse votes, follow nobody.
    pub(super) fn abstaining_step(&mut self, now: Instant, from: PeerId, message: RaftMessage) {
        let counts = match self.electorate() {
            Electorate::Voters(voters) => voters.contains(&from),
            Electorate::Connected => true,
        };
        if let (true, Some(term), Some(abstention)) =
            (counts, evidence_term(&message), self.abstention.as_mut())
        {
            let highest = abstention.heard.entry(from).or_insert(term);
            *highest = (*highest).max(term);
            if now >= abstention.settled_at {
                abstention.heard_settled.insert(from);
            }
        }
        match &message {
            RaftMessage::RequestVote(request) => {
                debug!(%from, term = request.term, pre_vote = request.pre_vote, "vote refused: abstaining");
                // A refusal with this node's own term: it commits to nothing.
                self.answer_stale(from, &message);
            }
            RaftMessage::AppendEntries(_) if message.term() < self.hard.term => {
                // Its own term is durable and real: a stale leader learns it is behind.
                self.answer_stale(from, &message);
            }
            _ => {}
        }
        self.end_abstention_if_heard(now);
    }

    /// Asks the peers not heard yet for their term, and ends the abstention when it may.
    pub(super) fn abstention_tick(&mut self, now: Instant) {
        let due = self
            .abstention
            .as_ref()
            .is_some_and(|abstention| now >= abstention.next_probe);
        if due {
            if let Some(abstention) = self.abstention.as_mut() {
                abstention.next_probe = now + self.config.heartbeat_interval;
            }
            // Term 0 is below every real term: the answer is a refusal carrying the peer's
            // current term, and neither side changes anything.
            let probe = RequestVote {
                term: 0,
                candidate: self.config.id,
                last_log_index: self.log.last().index,
                last_log_term: self.log.last().term,
                pre_vote: true,
                leadership_transfer: false,
                priority: self.priority,
            };
            for peer in self.abstention_probe_targets(now) {
                self.send(peer, RaftMessage::RequestVote(probe));
            }
        }
        self.end_abstention_if_heard(now);
    }

    /// In `connected` mode, the earliest end of an abstention: two maximum election timeouts
    /// after it began, so that membership has found the peers there are to hear.
    pub(super) fn abstention_min_end(&self) -> Option<Instant> {
        let abstention = self.abstention.as_ref()?;
        match self.electorate() {
            Electorate::Voters(_) => None,
            Electorate::Connected => Some(abstention.since + self.config.election_timeout_max * 2),
        }
    }

    /// The peers an abstaining node still waits for: the other voters (in `connected` mode,
    /// the connected peers) it has not heard since it started.
    pub(super) fn abstention_waiting_for(&self) -> Vec<PeerId> {
        let Some(abstention) = &self.abstention else {
            return Vec::new();
        };
        self.abstention_peers()
            .into_iter()
            .filter(|peer| !abstention.heard.contains_key(peer))
            .collect()
    }

    /// Every peer whose term an abstaining node may need: the other voters (in `connected`
    /// mode, the connected peers).
    pub(super) fn abstention_peers(&self) -> Vec<PeerId> {
        let peers: Vec<PeerId> = match self.electorate() {
            Electorate::Voters(voters) => voters.iter().copied().collect(),
            Electorate::Connected => self.connected.iter().copied().collect(),
        };
        peers
            .into_iter()
            .filter(|peer| *peer != self.config.id)
            .collect()
    }

    /// The peers the next probe asks: before the settling time, those not heard at all; after
    /// it, the other voters not heard since, whose answers can make up the settled majority.
    pub(super) fn abstention_probe_targets(&self, now: Instant) -> Vec<PeerId> {
        let Some(abstention) = &self.abstention else {
            return Vec::new();
        };
        let settled = now >= abstention.settled_at && self.settled_need().is_some();
        self.abstention_peers()
            .into_iter()
            .filter(|peer| {
                if settled {
                    !abstention.heard_settled.contains(peer)
                } else {
                    !abstention.heard.contains_key(peer)
                }
            })
            .collect()
    }

    /// How many other voters, heard after the settling time, end an abstention: `ceil(n/2)`
    /// of `n` voters (see the module docs). `None` where that is every other voter (three
    /// voters or fewer: hearing them all needs no settling time) and in `connected` mode,
    /// which has no electorate to count.
    pub(super) fn settled_need(&self) -> Option<usize> {
        match self.electorate() {
            Electorate::Voters(voters) => {
                let need = voters.len().div_ceil(2);
                (need < voters.len().saturating_sub(1)).then_some(need)
            }
            Electorate::Connected => None,
        }
    }

    /// Why an abstention may end now, if it may: every other voter heard, or a settled
    /// majority (see the module docs).
    pub(super) fn abstention_end_reason(&self, now: Instant) -> Option<&'static str> {
        let abstention = self.abstention.as_ref()?;
        if self.abstention_waiting_for().is_empty() {
            if self.abstention_min_end().is_some_and(|end| now < end) {
                return None;
            }
            return Some("every other voter was heard");
        }
        let need = self.settled_need()?;
        (now >= abstention.settled_at && abstention.heard_settled.len() >= need)
            .then_some("a majority of the voters was heard after the settling time")
    }

    pub(super) fn end_abstention_if_heard(&mut self, now: Instant) {
        if self.end_as_new_cluster(now) {
            return;
        }
        if let Some(reason) = self.abstention_end_reason(now) {
            self.end_abstention(now, reason);
        }
    }

    /// WAL-5, MEMB-5: a node started for a new cluster takes part as a member that
    /// never voted once every other voter answered, none past term 0; a voter past term 0
    /// shows that the cluster exists, and the node goes on abstaining as a node that lost its
    /// WAL does. Whether it ended the abstention.
    ///
    /// Every other voter, not a majority: a node whose data directory was emptied cannot tell
    /// itself from a new one, and the candidate it voted for may be the voter not heard while
    /// the others are still at term 0 (early in a cluster's life, or with a voter that never
    /// started). The simulator finds that double vote within a few seeds of the `wal-loss`
    /// family when a majority is taken as enough. With five voters or more, the lost-WAL
    /// rule's settled majority still ends the wait with a voter down.
    fn end_as_new_cluster(&mut self, now: Instant) -> bool {
        if !matches!(self.electorate(), Electorate::Voters(_)) {
            return false;
        }
        let all_heard = self.abstention_waiting_for().is_empty();
        let Some(abstention) = self.abstention.as_mut() else {
            return false;
        };
        if !abstention.new_cluster {
            return false;
        }
        if let Some((&voter, &term)) = abstention.heard.iter().find(|&(_, &term)| term > 0) {
            abstention.new_cluster = false;
            warn!(
                %voter,
                term,
                "cluster.initial_state = \"new\", but voter {voter} is at term {term}: the \
                 cluster exists, so this node, whose data directory is empty, abstains as a node \
                 that lost its WAL does (docs/wal.md); set cluster.initial_state = \"existing\""
            );
            return false;
        }
        if !all_heard {
            return false;
        }
        let heard = abstention.heard.len();
        self.abstention = None;
        // Every log heard is empty: there is nothing to catch up.
        self.log_catch_up = false;
        self.catch_up_target = None;
        self.outbox.push(Action::PersistGenesis);
        self.reset_election_timer(now);
        info!(
            heard,
            "a new cluster: every other voter answered, none past term 0; genesis recorded, \
             taking part"
        );
        true
    }

    /// Every peer that matters was heard: adopt the highest term heard, refuse every vote up
    /// to it, and persist it without ending the WAL's amnesia (see the module docs).
    pub(super) fn end_abstention(&mut self, now: Instant, reason: &'static str) {
        let Some(abstention) = self.abstention.take() else {
            return;
        };
        let heard = abstention.heard.values().copied().max().unwrap_or(0);
        if heard > self.hard.term {
            self.hard.term = heard;
            self.hard.vote = None;
        }
        let term = self.hard.term;
        if term == 0 {
            // Nobody votes in term 0: nothing can have been forgotten.
            self.outbox.persist_again(self.hard, Action::Persist);
        } else {
            self.vote_floor = Some(term);
            self.outbox.persist_again(self.hard, Action::PersistAmnesic);
        }
        self.reset_election_timer(now);
        info!(
            term,
            heard = abstention.heard.len(),
            "abstention over: {reason}; no vote in this term or before it, taking part as usual \
             from the next term on"
        );
    }
}

/// What `message` shows of its sender's term, for an abstaining node: a term no lower than the
/// sender's current one. A pre-vote request asks for the term after the sender's, and the
/// abstention probe (a pre-vote for term 0) says nothing about its sender.
fn evidence_term(message: &RaftMessage) -> Option<u64> {
    match message {
        RaftMessage::RequestVote(request) if request.pre_vote => request.term.checked_sub(1),
        other => Some(other.term()),
    }
}
