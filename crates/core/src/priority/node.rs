//! One node's priority election (PRI-1..6): [`Priority`].
//!
//! Ordering guarantees the driver relies on (the same as [`crate::raft::Raft`]'s):
//! - a changed [`HardState`] (the round, the forced-master pin) is queued as
//!   [`Action::Persist`] before the first message that carries it, and at the end of every
//!   input that changed it without a message;
//! - events follow the messages of the same input; a change of master (or of its round) is
//!   published once per input as [`Event::LeaderChanged`], after the persist it depends on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use conclave_protocol::{
    Candidate, Discover, DiscoverAck, MasterAnnounce, MasterResign, PeerId, PriorityVote,
    ResignReason,
};
use tracing::{debug, info, warn};

use crate::election::{
    Action, Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken,
    HardState, HealthReading, LeaderChangeCause, Outbox, PeerSignal, PriorityMessage, Published,
    Role,
};
use crate::priority::config::PriorityConfig;
use crate::priority::score::{Claim, battery_of, priority_score, signal_strength};
use crate::priority::state::{PriorityState, PriorityStatus};
use crate::rng::SeededRng;
use crate::time::Instant;

/// The version of the priority election this node speaks, sent in every `Discover`; a
/// `Discover` of another version is ignored.
pub const PRIORITY_PROTOCOL_VERSION: u8 = 1;

/// Peers remembered at most; past it the one heard longest ago is forgotten. Admission
/// bounds the peers that can reach the election long before this.
const MAX_PEERS: usize = 256;

/// What this node knows of a peer.
#[derive(Debug, Clone, Copy)]
struct PeerEntry {
    /// Its last priority score, if it sent one.
    score: Option<u32>,
    /// When it was last heard.
    heard: Instant,
}

/// The master this node follows or is.
#[derive(Debug, Clone, Copy)]
struct KnownMaster {
    id: PeerId,
    /// Its round: with `id`, the fencing token.
    round: u64,
    /// What it claimed in its last announcement (forced, score); `None` until one is heard.
    claim: Option<Claim>,
    /// Heard from the master itself, not only named by another node's `DiscoverAck`.
    confirmed: bool,
}

/// One election attempt of this node: from its `Discover` to a master.
#[derive(Debug, Clone, Default)]
struct Attempt {
    /// The round of the `Candidate` it broadcast (votes must echo it).
    round: u64,
    /// Peers heard during this attempt: every one of them is expected to accept.
    heard: BTreeSet<PeerId>,
    /// Peers that accepted its candidacy in `round`.
    accepted: BTreeSet<PeerId>,
    /// Campaigns repeated after a round without every accept.
    retries: u8,
    /// A discovery that only looks for the running master (at start-up, or with automatic
    /// election off): it went out at the round the node already had, and a round is opened
    /// only if it finds no master (PRI-4).
    looking: bool,
}

/// One node's priority election state machine (PRI-1..6). See the [module
/// docs](crate::priority) for the algorithm.
#[derive(Debug)]
pub struct Priority {
    config: PriorityConfig,
    rng: SeededRng,
    /// When this incarnation started: uptime counts from here.
    started: Instant,
    /// The latest input's time, for queries that need the score.
    last_now: Instant,
    /// `term` is the round: the highest this node has seen or used. `manual_override` is
    /// `Some(self)` while a `SetLeader` command forces this node.
    hard: HardState,
    state: PriorityState,
    /// When the current state's timer fires (not used by a master).
    deadline: Option<Instant>,
    /// When a master announces next.
    next_announce: Instant,
    battery: u8,
    rssi: BTreeMap<PeerId, f64>,
    /// PRI-1's random byte, drawn again for every election.
    random: u8,
    peers: BTreeMap<PeerId, PeerEntry>,
    master: Option<KnownMaster>,
    /// The highest fencing token this node has held, `(round, master)`. A different master
    /// is taken only above that round, so the token never goes sideways (CB-5). When its
    /// round is the node's round, its master is persisted (as `HardState::vote`), so that a
    /// restarted follower can take its master again at the same round; otherwise a restart
    /// starts from the persisted round with no master.
    token_floor: (u64, Option<PeerId>),
    /// The candidate this node accepted and waits for, while it has no master.
    awaiting: Option<Claim>,
    attempt: Option<Attempt>,
    /// Forced master (configuration or command).
    forced: bool,
    auto_election: bool,
    /// Just resigned: takes no part as a candidate until its idle timer runs out.
    sitting_out: bool,
    /// When the last master was lost, for `ElectionWon`'s duration.
    lost_at: Option<Instant>,
    quarantined: bool,
    stopped: bool,
    /// The last split brain reported, so that one conflict is counted once.
    reported_split: Option<(PeerId, u64)>,
    /// The low-battery resignation found no successor; said once, not every reading.
    low_battery_noted: bool,
    /// What this node decided and its driver has not taken yet (RAFT-1, RAFT-9).
    outbox: Outbox,
    leader_cause: LeaderChangeCause,
}

impl Priority {
    /// A node starting at `now` with the hard state its WAL held. It starts idle and begins
    /// its first discovery after a random delay below `jitter_max`, or, forced by
    /// configuration or by a command it persisted, becomes master at its first timeout
    /// (`poll_timeout` is `now`). Nothing is queued until the first input.
    pub fn new(
        config: PriorityConfig,
        restored: HardState,
        mut rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        config.validate()?;
        let me = config.id;
        let mut hard = restored;
        // A pin names this node or nothing: priority mode never pins another node.
        if hard.manual_override.is_some_and(|pinned| pinned != me) {
            hard.manual_override = None;
        }
        let forced = config.force_master || hard.manual_override == Some(me);
        let start_delay = if forced {
            Duration::ZERO
        } else {
            jitter(&mut rng, config.jitter_max)
        };
        let random = random_byte(&mut rng);
        Ok(Self {
            battery: config.battery_percent.min(100),
            auto_election: config.auto_election,
            rng,
            started: now,
            last_now: now,
            hard,
            state: PriorityState::Idle,
            deadline: Some(now + start_delay),
            next_announce: now,
            rssi: BTreeMap::new(),
            random,
            peers: BTreeMap::new(),
            master: None,
            // The vote is the master of the token held at the persisted round.
            token_floor: (restored.term, restored.vote),
            awaiting: None,
            attempt: None,
            forced,
            sitting_out: false,
            lost_at: Some(now),
            quarantined: false,
            stopped: false,
            reported_split: None,
            low_battery_noted: false,
            outbox: Outbox::new(
                restored,
                PriorityState::Idle.role(),
                PriorityState::Idle.label(),
            ),
            leader_cause: LeaderChangeCause::ElectionTimeout,
            config,
        })
    }

    // -----------------------------------------------------------------------------------------
    // inputs

    /// A priority message from `from` (already authenticated by the transport).
    pub fn handle_message(&mut self, now: Instant, from: PeerId, message: PriorityMessage) {
        self.last_now = now;
        if from == self.config.id || self.quarantined || self.stopped {
            return;
        }
        match message {
            PriorityMessage::Discover(discover) => self.on_discover(now, from, discover),
            PriorityMessage::DiscoverAck(ack) => self.on_discover_ack(now, from, ack),
            PriorityMessage::Candidate(candidate) => self.on_candidate(now, from, candidate),
            PriorityMessage::Vote(vote) => self.on_vote(now, from, vote),
            PriorityMessage::MasterAnnounce(announce) => self.on_announce(now, from, announce),
            PriorityMessage::MasterResign(resign) => self.on_resign(now, from, resign),
        }
        self.finish();
    }

    /// Time passed; call at [`Priority::poll_timeout`] (calling early is harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        if self.quarantined || self.stopped {
            return;
        }
        if self.is_master() {
            if now >= self.next_announce {
                self.broadcast_announce(now);
            }
        } else if self.deadline.is_some_and(|deadline| now >= deadline) {
            self.deadline_passed(now);
        }
        self.finish();
    }

    /// Membership reports `peer` connected or disconnected (MEM-5). A disconnected peer is
    /// forgotten: it is no successor, no expected voter and no signal reading.
    pub fn handle_peer_status(&mut self, now: Instant, peer: PeerId, connected: bool) {
        self.last_now = now;
        if peer == self.config.id {
            return;
        }
        if connected {
            if self.state == PriorityState::Discovering && !self.quarantined && !self.stopped {
                // PRI-2: a peer that came up during this discovery may have missed its
                // broadcast (nodes started together bind their sockets a few milliseconds
                // apart): ask it too, so that it is heard before the round is decided rather
                // than found a master alone.
                let discover = self.discover_message(now);
                self.send(peer, PriorityMessage::Discover(discover));
                self.finish();
            }
            return;
        }
        self.peers.remove(&peer);
        self.rssi.remove(&peer);
        if let Some(attempt) = &mut self.attempt {
            attempt.heard.remove(&peer);
            attempt.accepted.remove(&peer);
        }
        if !self.quarantined && !self.stopped {
            self.check_votes(now);
        }
        self.finish();
    }

    /// The radio's smoothed signal strength for `peer` (PRI-1's signal component). A reading
    /// that is not a number is ignored.
    pub fn handle_peer_signal(&mut self, now: Instant, signal: PeerSignal) {
        self.last_now = now;
        if signal.peer == self.config.id || !signal.rssi_dbm.is_finite() {
            return;
        }
        if self.rssi.len() >= MAX_PEERS && !self.rssi.contains_key(&signal.peer) {
            return;
        }
        self.rssi.insert(signal.peer, signal.rssi_dbm);
    }

    /// This node's battery reading (PRI-1; fixed, file or command, read by the shell). An
    /// elected master at or below `low_battery_percent` resigns to the best successor whose
    /// battery is above it (PRI-5); without such a successor it stays master.
    pub fn handle_health(&mut self, now: Instant, reading: HealthReading) {
        self.last_now = now;
        self.battery = reading.battery_percent.min(100);
        if self.battery > self.config.low_battery_percent {
            self.low_battery_noted = false;
        }
        if self.quarantined || self.stopped {
            return;
        }
        // Seed 002 resigns from `kMaster` only: a forced master stays where it was put.
        if self.state == PriorityState::Master && self.battery <= self.config.low_battery_percent {
            match self.best_successor() {
                Some((successor, score)) if battery_of(score) > self.config.low_battery_percent => {
                    info!(
                        battery = self.battery,
                        %successor,
                        "battery low; resigning as master"
                    );
                    self.resign(now, ResignReason::LowBattery, Some(successor));
                }
                _ if !self.low_battery_noted => {
                    self.low_battery_noted = true;
                    warn!(
                        battery = self.battery,
                        "battery low, but no peer has more; staying master"
                    );
                }
                _ => {}
            }
        }
        self.finish();
    }

    /// An operator's command (CB-3): `SetLeader(self)` forces this node master at once and
    /// persists the pin; `SetLeader(other)` on the master hands over to `other`; `Resign` on
    /// the master hands over to the best successor (PRI-5, reason "user request");
    /// `EnableAutoElection` switches campaigning.
    pub fn handle_command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        self.last_now = now;
        let outcome = self.command(now, command);
        self.finish();
        outcome
    }

    /// The node is stopping: a master resigns with reason "shutting down", naming its best
    /// successor, so the pod keeps a master without waiting 3 s (PRI-5). The node then stops
    /// taking part; the driver feeds nothing more. A follower only stops.
    pub fn handle_shutdown(&mut self, now: Instant) {
        self.last_now = now;
        if self.stopped {
            return;
        }
        if self.is_master() && !self.quarantined {
            let successor = self.best_successor().map(|(peer, _)| peer);
            info!(successor = ?successor, "stopping while master; resigning");
            self.resign(now, ResignReason::Shutdown, successor);
        }
        self.stopped = true;
        self.state = PriorityState::Idle;
        self.deadline = None;
        self.attempt = None;
        self.awaiting = None;
        self.finish();
        // The MasterResign naming the successor went out above; priority mode waits for no
        // answer to it (PRI-5), so the node is done.
        self.outbox.push(Action::Stopped);
    }

    /// Membership learned that this node's id is a live duplicate (MEM-3): leave the
    /// election for good, silently, since a message under this id would speak for the other
    /// node.
    pub fn handle_id_refused(&mut self, now: Instant) {
        self.last_now = now;
        if self.quarantined {
            return;
        }
        warn!(id = %self.config.id, "peer id refused as a duplicate; leaving the election");
        self.quarantined = true;
        if self.master.is_some() {
            self.leader_cause = LeaderChangeCause::Quarantined;
        }
        self.master = None;
        self.awaiting = None;
        self.attempt = None;
        self.state = PriorityState::Idle;
        self.deadline = None;
        self.finish();
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    /// When [`Priority::handle_timeout`] must be called next; `None` when nothing is pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.quarantined || self.stopped {
            None
        } else if self.is_master() {
            Some(self.next_announce)
        } else {
            self.deadline
        }
    }

    // -----------------------------------------------------------------------------------------
    // queries

    /// This node.
    pub fn id(&self) -> PeerId {
        self.config.id
    }

    /// The settings it runs with.
    pub fn config(&self) -> &PriorityConfig {
        &self.config
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.state.role()
    }

    /// Its state (PRI-2).
    pub fn state(&self) -> PriorityState {
        self.state
    }

    /// The term of its fencing token: the round of the master it knows, or, with no master,
    /// the highest round it has seen. A follower that started an election while its master
    /// lived (a lost announcement) may have seen a higher round than its master's; it keeps
    /// reporting its master's round until the master moves above it.
    pub fn term(&self) -> u64 {
        self.master.map_or(self.hard.term, |master| master.round)
    }

    /// The master it follows or is.
    pub fn leader(&self) -> Option<PeerId> {
        self.master.map(|master| master.id)
    }

    /// Whether it is master (elected or forced).
    pub fn is_leader(&self) -> bool {
        self.is_master()
    }

    /// `(round, master)` of the master it knows (CB-5).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.master.map(|master| FencingToken {
            term: master.round,
            leader: master.id,
        })
    }

    /// The state it must persist: the round, the forced-master pin and, as the vote, the
    /// master it followed at that round (none when it was master itself, or followed none at
    /// that round).
    pub fn hard_state(&self) -> HardState {
        let (round, master) = self.token_floor;
        HardState {
            vote: master.filter(|&master| round == self.hard.term && master != self.config.id),
            ..self.hard
        }
    }

    /// Its priority score at its latest input (PRI-1).
    pub fn score(&self) -> u32 {
        self.score_at(self.last_now)
    }

    /// The mode's own name for where it stands: its PRI-2 state.
    pub fn phase(&self) -> &'static str {
        self.state.label()
    }

    /// Whether it campaigns by itself (the operator's `auto-election` switch).
    pub fn auto_election(&self) -> bool {
        self.auto_election
    }

    /// This node when it was forced master by `leader set`; priority mode pins nobody else.
    pub fn manual_override(&self) -> Option<PeerId> {
        self.hard.manual_override
    }

    /// Whether its id was refused as a live duplicate (MEM-3).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }

    /// Priority mode's acceptances are not durable votes, so a lost WAL forgets none: it never
    /// abstains.
    pub fn is_abstaining(&self) -> bool {
        false
    }

    /// A snapshot for the status answer, metrics and the demo, as of its latest input.
    pub fn status(&self) -> PriorityStatus {
        let now = self.last_now;
        PriorityStatus {
            id: self.config.id,
            state: self.state,
            role: self.state.role(),
            round: self.hard.term,
            master: self.leader(),
            master_confirmed: self.master.is_some_and(|master| master.confirmed),
            awaiting: self.awaiting.map(|claim| claim.id),
            fencing_token: self.fencing_token(),
            score: self.score_at(now),
            battery: self.battery,
            uptime_minutes: u8::try_from(self.uptime_minutes(now).min(255)).unwrap_or(255),
            signal: self.signal(),
            peers: self.peers.len(),
            retries: self.attempt.as_ref().map_or(0, |attempt| attempt.retries),
            forced: self.forced,
            auto_election: self.auto_election,
            quarantined: self.quarantined,
        }
    }

    // -----------------------------------------------------------------------------------------
    // messages

    fn on_discover(&mut self, now: Instant, from: PeerId, discover: Discover) {
        if discover.protocol_version != PRIORITY_PROTOCOL_VERSION {
            debug!(
                %from,
                version = discover.protocol_version,
                "ignoring a Discover of another priority protocol version"
            );
            return;
        }
        self.note_peer(now, from, Some(discover.priority));
        if self.follows(from) {
            // Its own master is looking for a master: it restarted or stepped down.
            self.lose_master(now, LeaderChangeCause::HigherTerm);
        } else if !self.is_master() && self.awaiting.is_some_and(|awaited| awaited.id == from) {
            // The candidate it accepted is looking again (it restarted, or gave its campaign
            // up): it will not announce for that campaign. Waiting out the master timeout
            // would refuse every other candidate meanwhile, and each of them would wait for
            // this node in turn; join the new election instead.
            self.lose_master(now, LeaderChangeCause::ElectionTimeout);
        }
        self.absorb_round(now, discover.round);
        if let Some(attempt) = &mut self.attempt {
            attempt.heard.insert(from);
        }
        let ack = self.discover_ack(now);
        self.send(from, PriorityMessage::DiscoverAck(ack));
    }

    fn on_discover_ack(&mut self, now: Instant, from: PeerId, ack: DiscoverAck) {
        self.note_peer(now, from, Some(ack.priority));
        if let Some(attempt) = &mut self.attempt {
            attempt.heard.insert(from);
        }
        self.absorb_round(now, ack.round);
        let Some(known) = ack.known_master else {
            return;
        };
        // PRI-4: a late joiner follows the master its peers know, without an election. Only
        // a master at the highest round this node knows: a lower round is one this node has
        // already given up on (declared dead, or resigned). A node that is itself the master
        // named is proof it lives; another node's word is checked by the master timeout.
        if known != self.config.id && self.may_adopt() && self.may_take(known, ack.round) {
            let confirmed = known == from;
            if self.leader() != Some(known) || confirmed {
                info!(master = %known, round = ack.round, %from, "a peer knows the master; following it");
                self.follow(
                    now,
                    known,
                    ack.round,
                    None,
                    confirmed,
                    LeaderChangeCause::LeaderHeard,
                );
            }
        }
    }

    fn on_candidate(&mut self, now: Instant, from: PeerId, candidate: Candidate) {
        self.note_peer(now, from, Some(candidate.priority));
        if self.follows(from) {
            // Its own master campaigns: it restarted and lost its mastership.
            self.lose_master(now, LeaderChangeCause::HigherTerm);
        }
        self.absorb_round(now, candidate.round);
        if self.is_master() {
            // A master is not deposed by a candidate: it tells the candidate it exists.
            let announce = self.announce(now);
            self.send(from, PriorityMessage::MasterAnnounce(announce));
        } else if self.master.is_some_and(|master| master.confirmed) {
            // A follower of a live master names it instead of voting.
            let ack = self.discover_ack(now);
            self.send(from, PriorityMessage::DiscoverAck(ack));
        } else {
            self.vote_on(now, from, candidate);
        }
    }

    fn vote_on(&mut self, now: Instant, from: PeerId, candidate: Candidate) {
        if let Some(attempt) = &mut self.attempt {
            attempt.heard.insert(from);
        }
        let theirs = Claim::candidate(candidate.priority, from);
        // Accept a candidate that outranks this node (or any, if this node is not running),
        // unless it already accepted a better one. The candidate it waits for is accepted
        // again whatever its score now: a new election draws a new random byte.
        let accept = match self.awaiting {
            Some(awaited) if awaited.id == from => true,
            Some(awaited) if awaited > theirs => false,
            _ => !self.competing() || theirs > self.own_candidate_claim(now),
        };
        let vote = PriorityVote {
            candidate: from,
            voter_priority: self.score_at(now),
            accept,
            round: candidate.round,
        };
        self.send(from, PriorityMessage::Vote(vote));
        self.outbox.publish(Event::VoteCast {
            term: candidate.round,
            candidate: from,
            granted: accept,
            pre_vote: false,
        });
        if accept {
            self.await_candidate(now, theirs);
        }
    }

    fn on_vote(&mut self, now: Instant, from: PeerId, vote: PriorityVote) {
        self.note_peer(now, from, Some(vote.voter_priority));
        if vote.candidate != self.config.id
            || !matches!(
                self.state,
                PriorityState::Campaigning | PriorityState::WaitingForVotes
            )
        {
            return;
        }
        let mine = self.own_candidate_claim(now);
        let Some(attempt) = &mut self.attempt else {
            return;
        };
        if vote.round != attempt.round {
            return; // an answer to an earlier campaign
        }
        attempt.heard.insert(from);
        if vote.accept {
            attempt.accepted.insert(from);
        } else {
            attempt.accepted.remove(&from);
            let theirs = Claim::candidate(vote.voter_priority, from);
            if theirs > mine {
                // Seed 002: "I have higher priority" — the voter will lead; wait for it.
                self.await_candidate(now, theirs);
                return;
            }
        }
        self.check_votes(now);
    }

    fn on_announce(&mut self, now: Instant, from: PeerId, announce: MasterAnnounce) {
        self.note_peer(now, from, Some(announce.priority));
        let theirs = Claim {
            forced: announce.forced,
            priority: announce.priority,
            id: from,
        };
        if self.is_master() {
            self.resolve_split_brain(now, theirs, announce.round);
            return;
        }
        match self.master {
            Some(master) if master.id == from => {
                if announce.round < master.round {
                    return; // reordered: an older announcement
                }
                self.absorb_round(now, announce.round);
                self.master = Some(KnownMaster {
                    id: from,
                    round: announce.round,
                    claim: Some(theirs),
                    confirmed: true,
                });
                if announce.round > master.round {
                    self.leader_cause = LeaderChangeCause::LeaderHeard;
                }
                if announce.round >= self.token_floor.0 {
                    self.token_floor = (announce.round, Some(from));
                }
                self.deadline = Some(now + self.config.master_timeout);
            }
            Some(master) if master.confirmed => {
                // Two masters (a healed partition): this follower moves only to one that
                // outranks its own and has already moved above its round; the masters settle
                // it between themselves, and the winner's next round brings everyone over.
                self.absorb_round(now, announce.round);
                let outranks = master.claim.is_none_or(|claim| theirs > claim);
                if announce.round > master.round && outranks && self.may_take(from, announce.round)
                {
                    self.follow(
                        now,
                        from,
                        announce.round,
                        Some(theirs),
                        true,
                        LeaderChangeCause::Priority,
                    );
                }
            }
            _ => {
                self.absorb_round(now, announce.round);
                if !self.may_adopt() {
                    return;
                }
                if self.may_take(from, announce.round) {
                    self.follow(
                        now,
                        from,
                        announce.round,
                        Some(theirs),
                        true,
                        LeaderChangeCause::LeaderHeard,
                    );
                } else {
                    // A live master below the round this node is at (it declared that master
                    // dead, or heard a later election), or at the round of a token this node
                    // held with another master: tell it a round above, so it moves above it
                    // and can be followed without this node's token going back.
                    if announce.round >= self.hard.term {
                        self.hard.term = announce.round + 1;
                    }
                    let ack = self.discover_ack(now);
                    self.send(from, PriorityMessage::DiscoverAck(ack));
                }
            }
        }
    }

    /// PRI-6: this master heard another master. The lower claim yields, but only to a round
    /// above its own, so the fencing token it hands to its followers grows: the winner moves
    /// to a round above both before the loser follows it.
    fn resolve_split_brain(&mut self, now: Instant, theirs: Claim, round: u64) {
        let mine = self.own_master_claim(now);
        if self.reported_split != Some((theirs.id, round)) {
            self.reported_split = Some((theirs.id, round));
            warn!(other = %theirs.id, round, "another master announces; resolving by priority");
            self.outbox.publish(Event::SplitBrain {
                term: round,
                known: self.config.id,
                other: theirs.id,
            });
        }
        if mine.forced && theirs.forced {
            warn!(other = %theirs.id, "two forced masters; the higher score stays");
        }
        if mine > theirs {
            if round >= self.hard.term {
                self.hard.term = round;
                self.new_master_round(now, LeaderChangeCause::Priority);
            } else {
                self.broadcast_announce(now);
            }
        } else if round > self.hard.term {
            info!(master = %theirs.id, round, "yielding to a master of higher priority");
            self.hard.term = round;
            self.follow(
                now,
                theirs.id,
                round,
                Some(theirs),
                true,
                LeaderChangeCause::Priority,
            );
        } else {
            // It outranks this node but has not seen this node's round yet: tell it, so it
            // moves above it; this node yields to that.
            let announce = self.announce(now);
            self.send(theirs.id, PriorityMessage::MasterAnnounce(announce));
        }
    }

    fn on_resign(&mut self, now: Instant, from: PeerId, resign: MasterResign) {
        self.absorb_round(now, resign.round);
        let from_my_master = self.follows(from);
        let free = !self.master.is_some_and(|master| master.confirmed);
        if resign.successor == Some(self.config.id) && (from_my_master || free) {
            if !self.is_master() {
                info!(%from, reason = ?resign.reason, "named successor; master at once");
                self.become_master(now, LeaderChangeCause::Resign);
            }
        } else if from_my_master {
            // PRI-5: everyone but the successor starts a new election; the successor's
            // announcement usually ends it at once.
            info!(%from, reason = ?resign.reason, successor = ?resign.successor, "master resigned");
            self.start_election(now, LeaderChangeCause::Resign);
        }
    }

    // -----------------------------------------------------------------------------------------
    // timers

    fn deadline_passed(&mut self, now: Instant) {
        match self.state {
            PriorityState::Idle => {
                let resigned = std::mem::take(&mut self.sitting_out);
                if self.forced {
                    let cause = if self.config.force_master {
                        LeaderChangeCause::Configured
                    } else {
                        LeaderChangeCause::SetLeader
                    };
                    self.become_master(now, cause);
                } else if resigned {
                    // It gave its own mastership up: the others are electing in a new round.
                    self.start_election(now, LeaderChangeCause::ElectionTimeout);
                } else {
                    self.look_for_master(now);
                }
            }
            PriorityState::Discovering => self.discovery_done(now),
            PriorityState::Campaigning => {
                self.state = PriorityState::WaitingForVotes;
                self.deadline = Some(now + self.config.vote_timeout);
            }
            PriorityState::WaitingForVotes => self.votes_done(now),
            PriorityState::Follower => {
                match self.master {
                    Some(master) => {
                        warn!(master = %master.id, round = master.round, "master silent; declaring it dead")
                    }
                    None => debug!("the accepted candidate never announced"),
                }
                self.lose_master(now, LeaderChangeCause::ElectionTimeout);
            }
            PriorityState::Master | PriorityState::ForcedMaster => {}
        }
    }

    fn discovery_done(&mut self, now: Instant) {
        if !self.auto_election {
            // Discovery found no master; this node does not run, so it looks again later.
            self.idle(now, false);
            return;
        }
        self.open_round_after_looking();
        let alone = self
            .attempt
            .as_ref()
            .is_none_or(|attempt| attempt.heard.is_empty());
        if alone {
            // PRI-4: nobody answered; a single node is master (it keeps announcing, so pods
            // that appear later find it).
            info!("no peers answered discovery; master alone");
            self.become_master(now, LeaderChangeCause::VoteWon);
        } else {
            self.campaign(now, false);
        }
    }

    fn campaign(&mut self, now: Instant, retry: bool) {
        let round = self.hard.term;
        let attempt = self.attempt.get_or_insert_with(Attempt::default);
        if attempt.round != round {
            attempt.round = round;
            attempt.accepted.clear();
        }
        let mut phase = self.config.campaign_timeout;
        if retry {
            attempt.retries += 1;
            phase += jitter(&mut self.rng, self.config.jitter_max);
        }
        self.state = PriorityState::Campaigning;
        self.deadline = Some(now + phase);
        let candidate = Candidate {
            priority: self.score_at(now),
            round,
        };
        self.broadcast(PriorityMessage::Candidate(candidate));
    }

    fn votes_done(&mut self, now: Instant) {
        if self.check_votes(now) {
            return;
        }
        let retries = self.attempt.as_ref().map_or(0, |attempt| attempt.retries);
        if retries < self.config.max_retries {
            self.campaign(now, true);
        } else {
            // Nobody that answered outranks this node (it would be awaiting it otherwise):
            // the seed's rule, "I have the highest priority", decides. A master it could not
            // hear is met later and settled by PRI-6.
            info!(
                retries,
                "not every peer answered; highest known priority wins"
            );
            self.become_master(now, LeaderChangeCause::VoteWon);
        }
    }

    /// Wins once every peer heard in this attempt accepted; `true` if it did.
    fn check_votes(&mut self, now: Instant) -> bool {
        if !matches!(
            self.state,
            PriorityState::Campaigning | PriorityState::WaitingForVotes
        ) {
            return false;
        }
        // Every peer heard in this attempt accepted (none left, when membership reported
        // all of them gone).
        let won = self
            .attempt
            .as_ref()
            .is_some_and(|attempt| attempt.heard.is_subset(&attempt.accepted));
        if won {
            self.become_master(now, LeaderChangeCause::VoteWon);
        }
        won
    }

    // -----------------------------------------------------------------------------------------
    // commands

    fn command(&mut self, now: Instant, command: Command) -> Result<CommandOutcome, ElectionError> {
        if self.quarantined {
            return Err(ElectionError::Quarantined);
        }
        if self.stopped {
            return Err(ElectionError::NotLeader { leader: None });
        }
        match command {
            Command::SetLeader(target) if target == self.config.id => {
                // Seed 002's "force master via BLE": master at once, regardless of score; the
                // pin is persisted so a restart comes back forced.
                self.forced = true;
                self.hard.manual_override = Some(self.config.id);
                if self.is_master() {
                    self.state = PriorityState::ForcedMaster;
                    self.broadcast_announce(now);
                } else {
                    self.become_master(now, LeaderChangeCause::SetLeader);
                }
                Ok(CommandOutcome::Applied)
            }
            Command::SetLeader(target) => {
                if !self.is_master() {
                    return Err(ElectionError::NotLeader {
                        leader: self.leader(),
                    });
                }
                if !self.peers.contains_key(&target) {
                    return Err(ElectionError::UnknownPeer(target));
                }
                self.resign(now, ResignReason::UserRequest, Some(target));
                Ok(CommandOutcome::TransferStarted { target })
            }
            Command::Resign => {
                if !self.is_master() {
                    return Err(ElectionError::NotLeader {
                        leader: self.leader(),
                    });
                }
                let successor = self.best_successor().map(|(peer, _)| peer);
                self.resign(now, ResignReason::UserRequest, successor);
                Ok(match successor {
                    Some(target) => CommandOutcome::TransferStarted { target },
                    None => CommandOutcome::SteppedDown,
                })
            }
            Command::EnableAutoElection(enabled) => {
                self.auto_election = enabled;
                self.outbox.push(Action::PersistAutoElection(enabled));
                if !enabled
                    && matches!(
                        self.state,
                        PriorityState::Discovering
                            | PriorityState::Campaigning
                            | PriorityState::WaitingForVotes
                    )
                {
                    self.idle(now, false);
                }
                Ok(CommandOutcome::Applied)
            }
        }
    }

    /// PRI-5: a master steps down, naming `successor`, and sits the next election out.
    fn resign(&mut self, now: Instant, reason: ResignReason, successor: Option<PeerId>) {
        let resign = MasterResign {
            reason,
            successor,
            round: self.hard.term,
        };
        self.broadcast(PriorityMessage::MasterResign(resign));
        self.forced = false;
        self.hard.manual_override = None;
        self.master = None;
        self.leader_cause = match reason {
            ResignReason::Shutdown => LeaderChangeCause::Shutdown,
            ResignReason::LowBattery | ResignReason::UserRequest => LeaderChangeCause::Resign,
        };
        self.lost_at = Some(now);
        self.idle(now, true);
    }

    /// The best successor: the known peer with the highest score.
    fn best_successor(&self) -> Option<(PeerId, u32)> {
        self.peers
            .iter()
            .filter_map(|(&peer, entry)| entry.score.map(|score| Claim::candidate(score, peer)))
            .max()
            .map(|claim| (claim.id, claim.priority))
    }

    // -----------------------------------------------------------------------------------------
    // transitions

    /// Becomes master with a round above every round it has seen, persisted before the
    /// announcement that carries it (CB-5).
    fn become_master(&mut self, now: Instant, cause: LeaderChangeCause) {
        if cause == LeaderChangeCause::VoteWon {
            let since = self.lost_at.unwrap_or(now);
            self.outbox.publish(Event::ElectionWon {
                term: self.hard.term + 1,
                duration: now.saturating_duration_since(since),
            });
        }
        self.state = if self.forced {
            PriorityState::ForcedMaster
        } else {
            PriorityState::Master
        };
        self.awaiting = None;
        self.attempt = None;
        self.sitting_out = false;
        self.lost_at = None;
        self.deadline = None;
        self.low_battery_noted = false;
        self.new_master_round(now, cause);
    }

    /// A master moves to the round after the highest it has seen and announces it at once.
    fn new_master_round(&mut self, now: Instant, cause: LeaderChangeCause) {
        self.hard.term += 1;
        self.master = Some(KnownMaster {
            id: self.config.id,
            round: self.hard.term,
            claim: None,
            confirmed: true,
        });
        self.token_floor = (self.hard.term, Some(self.config.id));
        self.leader_cause = cause;
        info!(round = self.hard.term, state = %self.state, ?cause, "master");
        self.broadcast_announce(now);
    }

    fn follow(
        &mut self,
        now: Instant,
        master: PeerId,
        round: u64,
        claim: Option<Claim>,
        confirmed: bool,
        cause: LeaderChangeCause,
    ) {
        self.state = PriorityState::Follower;
        self.master = Some(KnownMaster {
            id: master,
            round,
            claim,
            confirmed,
        });
        if round >= self.token_floor.0 {
            self.token_floor = (round, Some(master));
        }
        self.awaiting = None;
        self.attempt = None;
        self.sitting_out = false;
        self.lost_at = None;
        self.leader_cause = cause;
        self.deadline = Some(now + self.config.master_timeout);
    }

    /// Accepts `candidate` and waits for it to announce, as a follower without a master.
    fn await_candidate(&mut self, now: Instant, candidate: Claim) {
        let waiting = self.state == PriorityState::Follower
            && self
                .awaiting
                .is_some_and(|awaited| awaited.id == candidate.id);
        if self.master.is_some() {
            // Only an unconfirmed master (named by a peer) can be dropped for a candidate: a
            // live candidate means some node lost it.
            self.leader_cause = LeaderChangeCause::ElectionTimeout;
            self.master = None;
        }
        self.awaiting = Some(candidate);
        self.attempt = None;
        self.state = PriorityState::Follower;
        if !waiting {
            self.deadline = Some(now + self.config.master_timeout);
        }
    }

    /// The master is gone (silent, restarted, or the awaited candidate never announced): a
    /// forced node takes over, any other starts a new round (PRI-3).
    fn lose_master(&mut self, now: Instant, cause: LeaderChangeCause) {
        if self.forced {
            self.become_master(now, LeaderChangeCause::Configured);
        } else {
            self.start_election(now, cause);
        }
    }

    /// PRI-2, PRI-3: a new round: increment it, look for peers and a master.
    fn start_election(&mut self, now: Instant, cause: LeaderChangeCause) {
        if self.master.take().is_some() {
            self.leader_cause = cause;
        }
        self.hard.term += 1;
        self.outbox.publish(Event::ElectionStarted {
            term: self.hard.term,
            phase: "discovery",
        });
        self.discover(now, false);
    }

    /// PRI-4: a node that lost no master (it just started, from its WAL or new, or does not
    /// campaign) looks for the running one at the round it has. A `Discover` above the
    /// master's round would make the master move above it (CB-5) and change the fencing token
    /// of every client for a node that merely rejoined; at its own round nobody moves, and
    /// the master's answer is followed at once. The round is opened only if no master
    /// answers ([`Priority::open_round_after_looking`]).
    fn look_for_master(&mut self, now: Instant) {
        self.discover(now, true);
    }

    /// A discovery that found no master opens its round, as an election would have at its
    /// start, unless an election of a higher round was heard meanwhile: the node campaigns
    /// in that one. A master alone then moves to the round after, like any master.
    fn open_round_after_looking(&mut self) {
        let Some(attempt) = self.attempt.as_mut() else {
            return;
        };
        if !std::mem::take(&mut attempt.looking) {
            return;
        }
        if self.hard.term == attempt.round {
            self.hard.term += 1;
        }
        attempt.round = self.hard.term;
        self.outbox.publish(Event::ElectionStarted {
            term: self.hard.term,
            phase: "discovery",
        });
    }

    /// Broadcasts `Discover` at the current round and collects answers for 500 ms plus
    /// jitter (PRI-2).
    fn discover(&mut self, now: Instant, looking: bool) {
        self.awaiting = None;
        self.sitting_out = false;
        self.lost_at.get_or_insert(now);
        self.random = random_byte(&mut self.rng);
        self.state = PriorityState::Discovering;
        self.attempt = Some(Attempt {
            round: self.hard.term,
            looking,
            ..Attempt::default()
        });
        let delay = self.config.discovery_timeout + jitter(&mut self.rng, self.config.jitter_max);
        self.deadline = Some(now + delay);
        let discover = self.discover_message(now);
        self.broadcast(PriorityMessage::Discover(discover));
    }

    /// The `Discover` of this node's current discovery.
    fn discover_message(&self, now: Instant) -> Discover {
        Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: self.score_at(now),
            round: self.hard.term,
        }
    }

    /// No election in progress: after a resignation (sitting the next one out) or with
    /// automatic election off. Looks again after a master timeout.
    fn idle(&mut self, now: Instant, sitting_out: bool) {
        self.state = PriorityState::Idle;
        self.attempt = None;
        self.awaiting = None;
        self.sitting_out = sitting_out;
        self.deadline = Some(now + self.config.master_timeout);
    }

    /// Keeps the highest round heard. A master that hears a round above its own moves above
    /// it at once, so that it stays the holder of the highest round (CB-5).
    fn absorb_round(&mut self, now: Instant, round: u64) {
        if round <= self.hard.term {
            return;
        }
        self.hard.term = round;
        if self.is_master() {
            debug!(round, "a higher round was heard; moving above it");
            self.new_master_round(now, LeaderChangeCause::HigherTerm);
        }
    }

    // -----------------------------------------------------------------------------------------
    // helpers

    fn is_master(&self) -> bool {
        matches!(
            self.state,
            PriorityState::Master | PriorityState::ForcedMaster
        )
    }

    /// Whether `peer` is the master this node follows.
    fn follows(&self, peer: PeerId) -> bool {
        !self.is_master() && self.leader() == Some(peer)
    }

    /// Whether this node may take a master it is told of: it has none it has heard itself.
    fn may_adopt(&self) -> bool {
        !self.is_master() && !self.master.is_some_and(|master| master.confirmed)
    }

    /// Whether `master` at `round` may be this node's master without its fencing token going
    /// back or sideways: the round is the highest it knows, and above every token it held
    /// with another master (CB-5).
    fn may_take(&self, master: PeerId, round: u64) -> bool {
        let (floor, floor_master) = self.token_floor;
        round >= self.hard.term && (round > floor || floor_master == Some(master))
    }

    /// Whether this node runs for master in the current election.
    fn competing(&self) -> bool {
        self.auto_election
            && !self.sitting_out
            && matches!(
                self.state,
                PriorityState::Idle
                    | PriorityState::Discovering
                    | PriorityState::Campaigning
                    | PriorityState::WaitingForVotes
            )
    }

    fn own_candidate_claim(&self, now: Instant) -> Claim {
        Claim::candidate(self.score_at(now), self.config.id)
    }

    fn own_master_claim(&self, now: Instant) -> Claim {
        Claim {
            forced: self.forced,
            priority: self.score_at(now),
            id: self.config.id,
        }
    }

    fn uptime_minutes(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.started).as_secs() / 60
    }

    fn signal(&self) -> u8 {
        signal_strength(self.rssi.values().copied())
    }

    fn score_at(&self, now: Instant) -> u32 {
        priority_score(
            self.battery,
            self.uptime_minutes(now),
            self.signal(),
            self.random,
        )
    }

    fn note_peer(&mut self, now: Instant, peer: PeerId, score: Option<u32>) {
        if !self.peers.contains_key(&peer) && self.peers.len() >= MAX_PEERS {
            let oldest = self
                .peers
                .iter()
                .min_by_key(|(_, entry)| entry.heard)
                .map(|(&id, _)| id);
            if let Some(oldest) = oldest {
                self.peers.remove(&oldest);
            }
        }
        let entry = self.peers.entry(peer).or_insert(PeerEntry {
            score: None,
            heard: now,
        });
        entry.heard = now;
        if score.is_some() {
            entry.score = score;
        }
    }

    fn discover_ack(&self, now: Instant) -> DiscoverAck {
        let (known_master, round) = match self.master {
            Some(master) if master.confirmed => (Some(master.id), master.round),
            _ => (None, self.hard.term),
        };
        DiscoverAck {
            priority: self.score_at(now),
            known_master,
            round,
        }
    }

    fn announce(&self, now: Instant) -> MasterAnnounce {
        MasterAnnounce {
            peer_count: u16::try_from(self.peers.len()).unwrap_or(u16::MAX),
            uptime_s: u32::try_from(now.saturating_duration_since(self.started).as_secs())
                .unwrap_or(u32::MAX),
            battery: self.battery,
            priority: self.score_at(now),
            round: self.hard.term,
            forced: self.forced,
        }
    }

    fn broadcast_announce(&mut self, now: Instant) {
        let announce = self.announce(now);
        self.broadcast(PriorityMessage::MasterAnnounce(announce));
        self.next_announce = now + self.config.announce_interval;
    }

    fn send(&mut self, to: PeerId, message: PriorityMessage) {
        // Whatever round the message carries is durable first (CB-5).
        self.outbox
            .send(self.hard_state(), to, ElectionMessage::Priority(message));
    }

    fn broadcast(&mut self, message: PriorityMessage) {
        self.outbox
            .broadcast(self.hard_state(), ElectionMessage::Priority(message));
    }

    /// Ends an input: persist, then publish what changed, once.
    fn finish(&mut self) {
        self.outbox.persist(self.hard_state());
        self.outbox.finish(Published {
            term: self.term(),
            role: self.state.role(),
            phase: self.state.label(),
            leader: self.leader(),
            cause: self.leader_cause,
        });
    }
}

/// A uniform delay in `[0, max)`.
fn jitter(rng: &mut SeededRng, max: Duration) -> Duration {
    rng.duration_between(Duration::ZERO, max)
}

/// PRI-1's random tie-breaker.
fn random_byte(rng: &mut SeededRng) -> u8 {
    // `below(256)` is below 256.
    u8::try_from(rng.below(256)).unwrap_or(0)
}

crate::election::has_outbox!(Priority);
