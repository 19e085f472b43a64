//! The gossip election state machine of one node (GOS-1..6). See the [module docs](super) for
//! the algorithm, the epochs and where it differs from Fabric.
//!
//! Ordering guarantees the driver relies on:
//! - a changed [`HardState`] is queued as [`Action::Persist`] before the first message that
//!   depends on it (a declaration of a new epoch), and at the end of every input if it changed
//!   without a message;
//! - events are queued after the messages of the same input, and a change of `(term, leader)`
//!   is published once per input, after it was persisted.

use std::collections::{BTreeMap, BTreeSet};

use conclave_protocol::{Declaration, PeerId, Proposal};
use tracing::{debug, info, warn};

use crate::election::{
    Action, Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken,
    GossipMessage, HardState, HealthReading, LeaderChangeCause, Mode, Outbox, PeerSignal,
    Published, Role,
};
use crate::gossip::config::GossipConfig;
use crate::rng::SeededRng;
use crate::time::Instant;

/// Where the node stands, with the deadline that ends the stage.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// GOS-1: waiting for a stable membership view, a declaration or the grace period.
    Starting {
        /// Next look at the view.
        next_sample: Instant,
        /// The grace period ends.
        grace_end: Instant,
        /// The view at the previous look.
        sampled_view: BTreeSet<PeerId>,
    },
    /// GOS-3: following the known leader, or waiting for one. At `deadline` a known leader is
    /// given up and an election starts.
    Following { deadline: Instant },
    /// GOS-2: a proposal went out; collecting until `deadline`.
    Proposing { started: Instant, deadline: Instant },
    /// GOS-3: leading; the next periodic declaration is due at `next_declaration`.
    Leading { next_declaration: Instant },
    /// MEM-3: this node's id is a live duplicate; it takes no part at all.
    Quarantined,
    /// The node stopped; nothing more happens.
    Stopped,
}

/// The gossip election state machine of one node. See the [module docs](super).
#[derive(Debug)]
pub struct Gossip {
    config: GossipConfig,

    /// `term` is the leadership epoch of the leader this node follows or is (the fencing
    /// token's term); `vote` is that epoch's leader as far as this node knows.
    hard: HardState,
    /// The highest epoch any message showed; a new leader takes one above it.
    highest_epoch_seen: u64,

    role: Role,
    phase: Phase,
    leader: Option<PeerId>,
    /// GOS-4: the peers membership reports connected (never this node). Messages from anyone
    /// else are ignored.
    view: BTreeSet<PeerId>,
    /// Proposals collected, with the time the latest one of each peer arrived.
    proposals: BTreeMap<PeerId, Instant>,
    auto_election: bool,
    /// GOS-4: after a `Yield`, no proposal before this time unless another leader shows up.
    yield_until: Option<Instant>,
    /// When the current leaderless stretch began (for `ElectionWon`).
    leaderless_since: Option<Instant>,
    /// Rival leaders this leader has reported as a split brain since it took its epoch.
    rivals_reported: BTreeSet<PeerId>,
    /// Messages ignored because their sender was outside the membership view.
    ignored_outside_view: u64,

    /// What this node decided and its driver has not taken yet (RAFT-1, RAFT-9).
    outbox: Outbox,
    /// The cause of the latest leader change inside the current input.
    leader_cause: LeaderChangeCause,
}

impl Gossip {
    /// A node starting (or restarting) with the hard state it persisted. It queues nothing:
    /// its first deadline ([`Gossip::poll_timeout`]) is the first membership sample, or `now`
    /// for a static leader, which takes leadership in that first [`Gossip::handle_timeout`].
    ///
    /// Fabric's election uses no randomness (the lowest id wins), so the generator is not
    /// used; it is taken for the constructor shape every election mode shares.
    pub fn new(
        config: GossipConfig,
        restored: HardState,
        _rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        config.validate()?;
        let first_sample = if config.use_leader_election {
            now + config.membership_sample_interval
        } else {
            // GOS-5: nothing to wait for; static roles are taken at once.
            now
        };
        let grace_end = if config.use_leader_election {
            now + config.startup_grace_period
        } else {
            now
        };
        let gossip = Self {
            auto_election: config.auto_election,
            hard: restored,
            highest_epoch_seen: restored.term,
            role: Role::Follower,
            phase: Phase::Starting {
                next_sample: first_sample,
                grace_end,
                sampled_view: BTreeSet::new(),
            },
            leader: None,
            view: BTreeSet::new(),
            proposals: BTreeMap::new(),
            yield_until: None,
            leaderless_since: Some(now),
            rivals_reported: BTreeSet::new(),
            ignored_outside_view: 0,
            outbox: Outbox::new(restored, Role::Follower, "starting"),
            leader_cause: LeaderChangeCause::LeaderHeard,
            config,
        };
        Ok(gossip)
    }

    // -----------------------------------------------------------------------------------------
    // inputs

    /// A proposal or declaration arrived from `from`. Ignored (and counted) unless `from` is in
    /// the membership view (GOS-4).
    pub fn handle_message(&mut self, now: Instant, from: PeerId, message: GossipMessage) {
        if !self.takes_part() || from == self.config.id {
            return;
        }
        if !self.view.contains(&from) {
            self.ignored_outside_view += 1;
            debug!(%from, "gossip message from a peer outside the membership view ignored");
            return;
        }
        match message {
            GossipMessage::Proposal(proposal) => self.on_proposal(now, from, proposal),
            GossipMessage::Declaration(declaration) => self.on_declaration(now, from, declaration),
        }
        self.finish();
    }

    /// A deadline from [`Gossip::poll_timeout`] passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.takes_part() {
            return;
        }
        let mut yield_ended = false;
        if self.yield_until.is_some_and(|until| now >= until) {
            info!("yield period over; this node may propose again");
            self.yield_until = None;
            yield_ended = true;
        }
        match self.phase.clone() {
            Phase::Starting {
                next_sample,
                grace_end,
                sampled_view,
            } => {
                if now >= grace_end {
                    debug!("startup grace period over");
                    self.end_startup(now);
                } else if now >= next_sample {
                    if sampled_view == self.view {
                        debug!(peers = self.view.len(), "membership view stable");
                        self.end_startup(now);
                    } else {
                        self.phase = Phase::Starting {
                            next_sample: now + self.config.membership_sample_interval,
                            grace_end,
                            sampled_view: self.view.clone(),
                        };
                    }
                }
            }
            Phase::Following { deadline } if now >= deadline => {
                if let Some(leader) = self.leader.take() {
                    info!(%leader, term = self.hard.term, "no declaration within the alive threshold; leader given up");
                    self.leader_cause = LeaderChangeCause::ElectionTimeout;
                    self.leaderless_since = Some(now);
                }
                self.start_election(now);
            }
            Phase::Following { .. } if yield_ended && self.leader.is_none() => {
                self.start_election(now);
            }
            Phase::Proposing { started, deadline } if now >= deadline => {
                self.conclude_election(now, started);
            }
            Phase::Leading { next_declaration } if now >= next_declaration => {
                self.declare(now);
            }
            _ => {}
        }
        self.finish();
    }

    /// Membership's view changed: `peer` is now connected or not (GOS-4). A leader tells a
    /// newcomer at once who leads, and a proposer sends it its proposal (so that a leader it
    /// could not hear before answers), whichever side's view learns of the other last. A
    /// leader that leaves the view is not given up before the alive threshold (its
    /// declarations are ignored meanwhile), as in Fabric.
    pub fn handle_peer_status(&mut self, now: Instant, peer: PeerId, connected: bool) {
        if peer == self.config.id {
            return;
        }
        let _ = now;
        if connected {
            if self.view.insert(peer) && self.takes_part() {
                match self.phase {
                    Phase::Leading { .. } => self.send(
                        peer,
                        GossipMessage::Declaration(Declaration {
                            epoch: self.hard.term,
                        }),
                    ),
                    Phase::Proposing { .. } => self.send(peer, self.own_proposal()),
                    _ => {}
                }
            }
        } else {
            self.view.remove(&peer);
            self.proposals.remove(&peer);
        }
        self.finish();
    }

    /// The radio's signal strength of a peer: not an input of the gossip election.
    pub fn handle_peer_signal(&mut self, now: Instant, signal: PeerSignal) {
        let _ = (now, signal);
    }

    /// This node's health reading: not an input of the gossip election.
    pub fn handle_health(&mut self, now: Instant, reading: HealthReading) {
        let _ = (now, reading);
    }

    /// An operator's command:
    /// - `Resign` is Fabric's `Yield` (GOS-4): the leader steps down and proposes nothing until
    ///   another leader is seen or [`GossipConfig::yield_duration`] passes; refused unless this
    ///   node leads, and refused for a static leader, whose leadership is configuration;
    /// - `EnableAutoElection(on)` switches proposing on or off (persisted by the driver);
    /// - `SetLeader` is refused: the lowest id wins every gossip election, so no node can be
    ///   made leader by command.
    pub fn handle_command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        if matches!(self.phase, Phase::Quarantined) {
            return Err(ElectionError::Quarantined);
        }
        let outcome = match command {
            Command::Resign => self.yield_leadership(now),
            Command::EnableAutoElection(enabled) => {
                self.auto_election = enabled;
                self.outbox.push(Action::PersistAutoElection(enabled));
                Ok(CommandOutcome::Applied)
            }
            Command::SetLeader(target) => Err(ElectionError::NotOffered {
                mode: Mode::Gossip,
                reason: format!(
                    "`leader set {target}` is not available with election.mode = gossip: the \
                     lowest id wins every election; use `leader resign` on the leader to make it \
                     yield, or election.mode = static / gossip org_leader to name the leader in \
                     the configuration"
                ),
            }),
        };
        self.finish();
        outcome
    }

    /// The node is stopping: a leader yields first, so the last leader change it publishes
    /// says it no longer leads (cause `Shutdown`). Nothing happens afterwards.
    pub fn handle_shutdown(&mut self, now: Instant) {
        let _ = now;
        if matches!(self.phase, Phase::Stopped) {
            return;
        }
        if matches!(self.phase, Phase::Quarantined) {
            // Out of the election already: nothing to hand over, only the answer.
            self.phase = Phase::Stopped;
            self.outbox.push(Action::Stopped);
            return;
        }
        if self.role == Role::Leader {
            info!(
                term = self.hard.term,
                "stopping while leading; stepping down"
            );
            self.leader = None;
            self.leader_cause = LeaderChangeCause::Shutdown;
        }
        self.role = Role::Follower;
        self.phase = Phase::Stopped;
        self.finish();
        // Gossip hands nothing over: the step-down above is all there is, so it is done.
        self.outbox.push(Action::Stopped);
    }

    /// Membership learned that this node's id is a live duplicate (MEM-3): leave the election
    /// for good; the node must not act as that id.
    pub fn handle_id_refused(&mut self, now: Instant) {
        let _ = now;
        if !self.takes_part() {
            return;
        }
        warn!(id = %self.config.id, "peer id refused as a duplicate; leaving the election");
        self.role = Role::Follower;
        self.leader = None;
        self.leader_cause = LeaderChangeCause::Quarantined;
        self.phase = Phase::Quarantined;
        self.finish();
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    /// When [`Gossip::handle_timeout`] must be called next; `None` when nothing is pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Starting {
                next_sample,
                grace_end,
                ..
            } => Some((*next_sample).min(*grace_end)),
            Phase::Following { deadline } => Some(match self.yield_until {
                Some(until) => until.min(*deadline),
                None => *deadline,
            }),
            Phase::Proposing { deadline, .. } => Some(*deadline),
            Phase::Leading { next_declaration } => Some(*next_declaration),
            Phase::Quarantined | Phase::Stopped => None,
        }
    }

    // -----------------------------------------------------------------------------------------
    // queries

    /// This node.
    pub fn id(&self) -> PeerId {
        self.config.id
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The mode's own name for where it stands: `starting`, `following`, `leaderless`,
    /// `yielding`, `proposing`, `leading`, `quarantined` or `stopped`.
    pub fn phase(&self) -> &'static str {
        match &self.phase {
            Phase::Starting { .. } => "starting",
            Phase::Following { .. } if self.leader.is_some() => "following",
            Phase::Following { .. } if self.yield_until.is_some() => "yielding",
            Phase::Following { .. } => "leaderless",
            Phase::Proposing { .. } => "proposing",
            Phase::Leading { .. } => "leading",
            Phase::Quarantined => "quarantined",
            Phase::Stopped => "stopped",
        }
    }

    /// The leadership epoch of the leader it follows or is (its term, CB-5).
    pub fn term(&self) -> u64 {
        self.hard.term
    }

    /// The leader it knows.
    pub fn leader(&self) -> Option<PeerId> {
        self.leader
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The state it must persist.
    pub fn hard_state(&self) -> HardState {
        self.hard
    }

    /// The settings it runs with.
    pub fn config(&self) -> &GossipConfig {
        &self.config
    }

    /// `(epoch, leader)` of the known leader (CB-5).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.leader.map(|leader| FencingToken {
            term: self.hard.term,
            leader,
        })
    }

    /// Whether it proposes by itself (the operator's `auto-election` switch).
    pub fn auto_election(&self) -> bool {
        self.auto_election
    }

    /// Gossip has no pin: `leader set` is refused in this mode, so nothing overrides.
    pub fn manual_override(&self) -> Option<PeerId> {
        None
    }

    /// Whether its id was refused as a live duplicate (MEM-3).
    pub fn is_quarantined(&self) -> bool {
        matches!(self.phase, Phase::Quarantined)
    }

    /// Gossip casts no votes, so a lost WAL forgets none: it never abstains.
    pub fn is_abstaining(&self) -> bool {
        false
    }

    /// A snapshot for the status answer.
    pub fn status(&self) -> GossipStatus {
        GossipStatus {
            id: self.config.id,
            role: self.role,
            phase: self.phase(),
            term: self.hard.term,
            leader: self.leader,
            fencing_token: self.fencing_token(),
            use_leader_election: self.config.use_leader_election,
            org_leader: self.config.org_leader,
            auto_election: self.auto_election,
            view_size: self.view.len(),
            yielding: self.yield_until.is_some(),
            quarantined: matches!(self.phase, Phase::Quarantined),
            highest_epoch_seen: self.highest_epoch_seen,
            ignored_outside_view: self.ignored_outside_view,
        }
    }

    // -----------------------------------------------------------------------------------------
    // message handling

    fn on_proposal(&mut self, now: Instant, from: PeerId, proposal: Proposal) {
        self.highest_epoch_seen = self.highest_epoch_seen.max(proposal.epoch);
        self.proposals.insert(from, now);
        if self.role != Role::Leader {
            return;
        }
        // The proposer has no leader. If its epoch is not below this leader's (and it is not
        // this leader's own epoch), it could not adopt this leader's declarations: take a new
        // epoch above it. Otherwise tell it who leads, without waiting for the next round.
        let behind = proposal.epoch > self.hard.term
            || (proposal.epoch == self.hard.term && proposal.leader != Some(self.config.id));
        if behind {
            info!(%from, epoch = proposal.epoch, "a proposer is at this leader's epoch or later; renewing the epoch");
            self.take_epoch(now, LeaderChangeCause::HigherTerm);
        } else {
            self.send(
                from,
                GossipMessage::Declaration(Declaration {
                    epoch: self.hard.term,
                }),
            );
        }
    }

    fn on_declaration(&mut self, now: Instant, from: PeerId, declaration: Declaration) {
        let epoch = declaration.epoch;
        self.highest_epoch_seen = self.highest_epoch_seen.max(epoch);
        if self.yield_until.take().is_some() {
            // GOS-4: another leader is seen; the yield is over.
            info!(%from, "another leader declared itself; yield over");
        }
        if self.role == Role::Leader {
            self.on_rival_declaration(now, from, epoch);
            return;
        }
        if self.adoptable(from, epoch) {
            self.adopt(now, from, epoch, LeaderChangeCause::LeaderHeard);
            return;
        }
        if self.leader == Some(from) {
            // An old declaration of the leader followed now (reordered or duplicated).
            return;
        }
        // A leader exists (which ends the start-up wait and an election, as in Fabric), but its
        // epoch is not above this node's: following it would move the fencing token back.
        if matches!(self.phase, Phase::Starting { .. } | Phase::Proposing { .. }) {
            self.enter_following(now);
        }
        if self.leader.is_none() {
            // Ask it for a newer epoch: a proposal carrying this node's epoch makes a leader
            // take one above it.
            debug!(%from, epoch, own = self.hard.term, "declaration of an older epoch; asking for a newer one");
            self.send(from, self.own_proposal());
        }
    }

    /// This node leads and `from` declared itself too (GOS-3, GOS-6).
    fn on_rival_declaration(&mut self, now: Instant, from: PeerId, epoch: u64) {
        if self.rivals_reported.insert(from) {
            warn!(%from, epoch, own = self.hard.term, "another leader declared itself");
            self.outbox.publish(Event::SplitBrain {
                term: self.hard.term,
                known: self.config.id,
                other: from,
            });
        }
        if !self.config.use_leader_election {
            // GOS-5: a static leader leads by configuration and does not contest.
            return;
        }
        if from < self.config.id {
            info!(%from, "a leader with a lower id declared itself; stepping down");
            self.role = Role::Follower;
            self.leader = None;
            self.leader_cause = LeaderChangeCause::TieBreak;
            self.leaderless_since = Some(now);
            if self.adoptable(from, epoch) {
                self.adopt(now, from, epoch, LeaderChangeCause::TieBreak);
            } else {
                self.enter_following(now);
                self.send(from, self.own_proposal());
            }
        } else if epoch >= self.hard.term {
            // The rival steps down when it hears this leader; its followers can only follow
            // an epoch above theirs.
            self.take_epoch(now, LeaderChangeCause::TieBreak);
        } else {
            // Fabric's leader is woken by any declaration and declares again at once.
            self.declare(now);
        }
    }

    /// Whether following `from` at `epoch` keeps this node's fencing token growing: a later
    /// epoch, or the epoch and leader it already knows.
    fn adoptable(&self, from: PeerId, epoch: u64) -> bool {
        epoch > self.hard.term || (epoch == self.hard.term && self.hard.vote == Some(from))
    }

    /// Follow `leader` at `epoch` (GOS-3). A declaration of the same leader and epoch only
    /// refreshes its liveness.
    fn adopt(&mut self, now: Instant, leader: PeerId, epoch: u64, cause: LeaderChangeCause) {
        if epoch > self.hard.term {
            self.hard.term = epoch;
            self.hard.vote = Some(leader);
        }
        if self.leader != Some(leader) {
            info!(%leader, epoch, "following");
            // Fabric clears the proposals whenever it settles as a follower.
            self.proposals.clear();
        }
        self.leader = Some(leader);
        self.leader_cause = cause;
        self.leaderless_since = None;
        self.role = Role::Follower;
        self.phase = Phase::Following {
            deadline: now + self.config.leader_alive_threshold,
        };
    }

    // -----------------------------------------------------------------------------------------
    // transitions

    /// Enough time passed, the view is stable, or this is a static node (GOS-1, GOS-5).
    fn end_startup(&mut self, now: Instant) {
        if !self.config.use_leader_election {
            if self.config.org_leader {
                self.become_leader(now, LeaderChangeCause::Configured);
            } else {
                self.enter_following(now);
            }
            return;
        }
        self.start_election(now);
    }

    /// Follower without a leader until a declaration arrives or the alive threshold passes.
    fn enter_following(&mut self, now: Instant) {
        self.role = Role::Follower;
        self.phase = Phase::Following {
            deadline: now + self.config.leader_alive_threshold,
        };
    }

    fn may_propose(&self) -> bool {
        self.config.use_leader_election && self.auto_election && self.yield_until.is_none()
    }

    /// GOS-2: gossip a proposal and collect for `leader_election_duration`.
    fn start_election(&mut self, now: Instant) {
        if !self.may_propose() {
            self.enter_following(now);
            return;
        }
        self.leaderless_since.get_or_insert(now);
        let epoch = self.hard.term.max(self.highest_epoch_seen) + 1;
        debug!(epoch, "proposing");
        self.role = Role::Candidate;
        self.phase = Phase::Proposing {
            started: now,
            deadline: now + self.config.leader_election_duration,
        };
        self.broadcast(self.own_proposal());
        self.outbox.publish(Event::ElectionStarted {
            term: epoch,
            phase: "proposal",
        });
    }

    /// GOS-2: the collection time is over. A declaration would have ended it earlier; a
    /// proposal of a lower id, collected during it or within one election duration before it,
    /// makes this node wait as a follower; otherwise it declares itself.
    fn conclude_election(&mut self, now: Instant, started: Instant) {
        if !self.may_propose() {
            self.enter_following(now);
            return;
        }
        let window = self.config.leader_election_duration;
        let me = self.config.id;
        let better = self
            .proposals
            .iter()
            .find(|(peer, at)| **peer < me && **at + window >= started)
            .map(|(peer, _)| *peer);
        if let Some(better) = better {
            debug!(%better, "a lower id proposed; waiting for its declaration");
            self.enter_following(now);
            return;
        }
        self.become_leader(now, LeaderChangeCause::VoteWon);
    }

    /// Lead with a new epoch: persisted, then declared.
    fn become_leader(&mut self, now: Instant, cause: LeaderChangeCause) {
        info!(
            epoch = self.hard.term.max(self.highest_epoch_seen) + 1,
            ?cause,
            "becoming leader"
        );
        let won_after = self.leaderless_since.take().map(|since| now - since);
        self.role = Role::Leader;
        self.leader = Some(self.config.id);
        self.proposals.clear();
        self.take_epoch(now, cause);
        if cause == LeaderChangeCause::VoteWon {
            self.outbox.publish(Event::ElectionWon {
                term: self.hard.term,
                duration: won_after.unwrap_or_default(),
            });
        }
    }

    /// CB-5: a leadership epoch above every epoch seen, durable before the declaration that
    /// carries it leaves.
    fn take_epoch(&mut self, now: Instant, cause: LeaderChangeCause) {
        let epoch = self.hard.term.max(self.highest_epoch_seen) + 1;
        self.hard.term = epoch;
        self.hard.vote = Some(self.config.id);
        self.highest_epoch_seen = epoch;
        self.rivals_reported.clear();
        self.leader_cause = cause;
        self.declare(now);
    }

    /// GOS-3: broadcast a declaration now and again every declaration interval.
    fn declare(&mut self, now: Instant) {
        self.phase = Phase::Leading {
            next_declaration: now + self.config.declaration_interval(),
        };
        self.broadcast(GossipMessage::Declaration(Declaration {
            epoch: self.hard.term,
        }));
    }

    /// GOS-4: Fabric's `Yield`.
    fn yield_leadership(&mut self, now: Instant) -> Result<CommandOutcome, ElectionError> {
        if self.role != Role::Leader || !self.takes_part() {
            return Err(ElectionError::NotLeader {
                leader: self.leader,
            });
        }
        if !self.config.use_leader_election {
            return Err(ElectionError::OrgLeaderCannotResign {
                leader: self.config.id,
            });
        }
        info!(
            term = self.hard.term,
            "yielding leadership; no proposal until another leader is seen or the yield period ends"
        );
        self.yield_until = Some(now + self.config.yield_duration());
        self.leader = None;
        self.leader_cause = LeaderChangeCause::Yield;
        self.leaderless_since = Some(now);
        self.enter_following(now);
        Ok(CommandOutcome::SteppedDown)
    }

    // -----------------------------------------------------------------------------------------
    // plumbing

    /// This node's proposal: its epoch and the leader it knows of it.
    fn own_proposal(&self) -> GossipMessage {
        GossipMessage::Proposal(Proposal {
            epoch: self.hard.term,
            leader: self.hard.vote,
        })
    }

    fn takes_part(&self) -> bool {
        !matches!(self.phase, Phase::Quarantined | Phase::Stopped)
    }

    fn send(&mut self, to: PeerId, message: GossipMessage) {
        self.outbox
            .send(self.hard, to, ElectionMessage::Gossip(message));
    }

    fn broadcast(&mut self, message: GossipMessage) {
        self.outbox
            .broadcast(self.hard, ElectionMessage::Gossip(message));
    }

    /// Ends every input: what changed is persisted, then published.
    fn finish(&mut self) {
        self.outbox.persist(self.hard);
        self.outbox.finish(Published {
            term: self.hard.term,
            role: self.role,
            phase: self.phase(),
            leader: self.leader,
            cause: self.leader_cause,
        });
    }
}

/// A snapshot of the gossip election, for the status answer and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipStatus {
    /// This node.
    pub id: PeerId,
    /// Its role.
    pub role: Role,
    /// Where it stands (see [`Gossip::phase`]).
    pub phase: &'static str,
    /// The leadership epoch of the leader it follows or is.
    pub term: u64,
    /// The leader it knows.
    pub leader: Option<PeerId>,
    /// `(term, leader)` (CB-5).
    pub fencing_token: Option<FencingToken>,
    /// GOS-5: dynamic election (false: static leadership).
    pub use_leader_election: bool,
    /// GOS-5: this node is the static leader.
    pub org_leader: bool,
    /// The operator's automatic-election switch.
    pub auto_election: bool,
    /// Peers in the membership view (GOS-4).
    pub view_size: usize,
    /// It yielded and proposes nothing until another leader shows up or the period ends.
    pub yielding: bool,
    /// Its id is a live duplicate; it takes no part (MEM-3).
    pub quarantined: bool,
    /// The highest epoch any message showed.
    pub highest_epoch_seen: u64,
    /// Messages ignored because their sender was outside the membership view (GOS-4).
    pub ignored_outside_view: u64,
}

crate::election::has_outbox!(Gossip);
