//! Static leadership (STA-1; seed 001's `orgLeader`, seed 004's phase 1), sans-IO.
//!
//! The leader is named in the configuration (`election.static.leader`); nobody elects, and no
//! election message is ever sent. [`StaticLeader`] is one node's view:
//!
//! - the named node leads from its first start: it persists its epoch, then publishes itself
//!   as leader (cause `configured`);
//! - every other node follows it, and tracks its liveness through membership: the leader is
//!   known while membership reports it connected, and lost (leader none, cause `leader_lost`)
//!   when membership reports it gone. Found again, it is published again (cause
//!   `leader_heard`); the first time after a start or a reassignment, with cause `configured`
//!   (or `set_leader`);
//! - `leader set <id>` reassigns leadership **on this node only**. Static mode has no
//!   election protocol to carry an assignment to the others, and a half-delivered broadcast
//!   would leave nodes disagreeing with nothing to repair it; so, as with the configuration
//!   file the leader comes from, the operator applies a reassignment to every node
//!   (`conclave leader set <id> --admin <each node>`), or edits `election.static.leader`
//!   everywhere and restarts. The assignment is persisted (the hard state's
//!   `manual_override`), so it outlives a restart; `leader set` back to the configured leader
//!   clears it;
//! - `leader resign` on the leader is refused ([`ElectionError::StaticLeaderCannotResign`]),
//!   and `auto-election` is refused everywhere ([`ElectionError::StaticModeElectsNobody`]).
//!
//! The term of static mode is the assignment epoch: 1 for the configured leader, one more at
//! every reassignment, persisted before anything depends on it. A node's fencing token
//! `(epoch, leader)` therefore grows with every reassignment, and stays the same while the
//! leader is merely unreachable and found again: it never stopped leading (CB-5).

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use conclave_protocol::PeerId;
use tracing::{info, warn};

use crate::election::{
    Action, Command, CommandOutcome, ElectionError, FencingToken, HardState, HealthReading,
    LeaderChangeCause, Outbox, PeerSignal, Published, Role, SettingProblem, StaticSetting,
};
use crate::rng::SeededRng;
use crate::time::Instant;

/// The settings of static leadership (STA-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticConfig {
    /// This node.
    pub id: PeerId,
    /// `election.static.leader`: the node that leads.
    pub leader: PeerId,
    /// `cluster.voters`: the nodes `leader set` may name; empty allows any node.
    pub members: BTreeSet<PeerId>,
}

impl StaticConfig {
    /// `id` in a cluster led by `leader`, with no member list.
    pub fn new(id: PeerId, leader: PeerId) -> Self {
        Self {
            id,
            leader,
            members: BTreeSet::new(),
        }
    }

    /// Every problem with the settings, each under the setting it concerns.
    pub fn validate(&self) -> Result<(), ElectionError> {
        if !self.members.is_empty() && !self.members.contains(&self.leader) {
            let members: Vec<String> = self.members.iter().map(ToString::to_string).collect();
            return Err(ElectionError::InvalidConfig(vec![SettingProblem::new(
                StaticSetting::Leader,
                format!(
                    "{} is not one of the members, the nodes that may lead ({})",
                    self.leader,
                    members.join(", ")
                ),
            )]));
        }
        Ok(())
    }

    fn may_lead(&self, peer: PeerId) -> bool {
        self.members.is_empty() || self.members.contains(&peer)
    }
}

/// What only static mode reports about itself: the `detail` of the status answer
/// ([`ModeStatus::Static`](crate::election::ModeStatus::Static)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticStatus {
    /// `election.static.leader`.
    pub configured_leader: PeerId,
    /// The leader now assigned on this node: the configured one, or the one `leader set`
    /// named.
    pub assigned_leader: PeerId,
    /// Whether the assigned leader is this node or a peer membership reports connected.
    pub leader_reachable: bool,
}

/// One node's view of a statically assigned leader. See the [module docs](self).
#[derive(Debug)]
pub struct StaticLeader {
    config: StaticConfig,
    hard: HardState,
    /// Peers membership reports connected (never this node).
    connected: BTreeSet<PeerId>,
    /// MEM-3: this node's id is a live duplicate; it takes no part.
    quarantined: bool,
    /// Stopped (`handle_shutdown`): it leads nobody and follows nobody any more.
    stopped: bool,
    /// The assigned leader was seen since the start or the last reassignment: finding it again
    /// is `leader_heard`, not `configured`.
    found_before: bool,
    /// Why the leader changed, for the next publication.
    cause: LeaderChangeCause,
    outbox: Outbox,
}

impl StaticLeader {
    /// A node starting (or restarting) with the hard state it persisted: its epoch and, in
    /// `manual_override`, a reassignment made with `leader set`. The assigned leader publishes
    /// itself at once (after persisting its first epoch). Static mode draws no random numbers
    /// and sets no timer; `rng` and `now` are taken for the shape every mode shares.
    pub fn new(
        config: StaticConfig,
        restored: HardState,
        _rng: SeededRng,
        _now: Instant,
    ) -> Result<Self, ElectionError> {
        config.validate()?;
        let mut hard = HardState {
            term: restored.term.max(1),
            vote: None,
            manual_override: restored.manual_override,
        };
        if hard.manual_override == Some(config.leader) {
            hard.manual_override = None;
        }
        if let Some(assigned) = hard.manual_override {
            warn!(
                %assigned,
                configured = %config.leader,
                "leadership was reassigned with `conclave leader set {assigned}`, recorded in \
                 the WAL, and that overrides election.static.leader = {}; \
                 `conclave leader set {}` switches back",
                config.leader,
                config.leader
            );
        }
        let mut node = Self {
            config,
            hard,
            connected: BTreeSet::new(),
            quarantined: false,
            stopped: false,
            found_before: false,
            cause: LeaderChangeCause::Configured,
            outbox: Outbox::new(restored, Role::Follower, Role::Follower.label()),
        };
        node.finish();
        Ok(node)
    }

    // -----------------------------------------------------------------------------------------
    // inputs

    /// Static mode sets no timer; calling it changes nothing.
    pub fn handle_timeout(&mut self, _now: Instant) {}

    /// Membership reports `peer` connected or disconnected (MEM-5): the assigned leader is
    /// found or lost.
    pub fn handle_peer_status(&mut self, _now: Instant, peer: PeerId, connected: bool) {
        if peer == self.config.id {
            return;
        }
        let changed = if connected {
            self.connected.insert(peer)
        } else {
            self.connected.remove(&peer)
        };
        if !changed || peer != self.assigned() || self.quarantined || self.stopped {
            return;
        }
        if connected {
            if std::mem::replace(&mut self.found_before, true) {
                self.cause = LeaderChangeCause::LeaderHeard;
            }
            info!(leader = %peer, "static leader reachable");
        } else {
            self.cause = LeaderChangeCause::LeaderLost;
            warn!(leader = %peer, "static leader unreachable; nobody elects a replacement");
        }
        self.finish();
    }

    /// A peer's radio signal strength: static mode does not use it.
    pub fn handle_peer_signal(&mut self, _now: Instant, _signal: PeerSignal) {}

    /// This node's health reading: static mode does not use it.
    pub fn handle_health(&mut self, _now: Instant, _reading: HealthReading) {}

    /// An operator's command: `SetLeader` reassigns on this node; `Resign` and
    /// `EnableAutoElection` are refused (see the module docs).
    pub fn handle_command(
        &mut self,
        _now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        if self.stopped {
            return Err(ElectionError::ShuttingDown);
        }
        if self.quarantined {
            return Err(ElectionError::Quarantined);
        }
        match command {
            Command::EnableAutoElection(_) => Err(ElectionError::StaticModeElectsNobody),
            Command::Resign if self.leader() == Some(self.config.id) => {
                Err(ElectionError::StaticLeaderCannotResign {
                    leader: self.config.id,
                })
            }
            Command::Resign => Err(ElectionError::NotLeader {
                leader: self.leader(),
            }),
            Command::SetLeader(target) => {
                if !self.config.may_lead(target) {
                    return Err(ElectionError::NotAVoter(target));
                }
                if target != self.assigned() {
                    info!(leader = %target, previous = %self.assigned(), "static leader reassigned on this node");
                    self.hard.term += 1;
                    self.hard.manual_override = (target != self.config.leader).then_some(target);
                    self.found_before = false;
                    self.cause = LeaderChangeCause::SetLeader;
                    self.finish();
                }
                Ok(CommandOutcome::Applied)
            }
        }
    }

    /// The node is stopping: the leader steps down (cause `shutdown`), so that its hooks stop
    /// what they started; there is nobody to hand over to, since nobody elects. A follower
    /// publishes nothing. Either way [`Action::Stopped`] ends it at once, and every input after
    /// is ignored.
    pub fn handle_shutdown(&mut self, _now: Instant) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.cause = LeaderChangeCause::Shutdown;
        self.finish();
        self.outbox.push(Action::Stopped);
    }

    /// Membership learned that this node's id is a live duplicate (MEM-3): leave for good.
    pub fn handle_id_refused(&mut self, _now: Instant) {
        if self.quarantined || self.stopped {
            return;
        }
        warn!(id = %self.config.id, "peer id refused as a duplicate; leaving the election");
        self.quarantined = true;
        self.cause = LeaderChangeCause::Quarantined;
        self.finish();
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    /// Static mode sets no timer.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    // -----------------------------------------------------------------------------------------
    // queries

    /// This node.
    pub fn id(&self) -> PeerId {
        self.config.id
    }

    /// Its role: leader if it is the assigned leader (and takes part), else follower.
    pub fn role(&self) -> Role {
        if !self.quarantined && !self.stopped && self.assigned() == self.config.id {
            Role::Leader
        } else {
            Role::Follower
        }
    }

    /// Its phase: static mode has no phase beyond the role.
    pub fn phase(&self) -> &'static str {
        self.role().label()
    }

    /// Its assignment epoch.
    pub fn term(&self) -> u64 {
        self.hard.term
    }

    /// The leader, while it is this node or a peer membership reports connected. A stopping
    /// follower keeps the leader it knows (it publishes nothing on the way out).
    pub fn leader(&self) -> Option<PeerId> {
        let assigned = self.assigned();
        if self.quarantined {
            None
        } else if assigned == self.config.id {
            (!self.stopped).then_some(assigned)
        } else {
            self.connected.contains(&assigned).then_some(assigned)
        }
    }

    /// `(epoch, leader)` of the known leader (CB-5).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.leader().map(|leader| FencingToken {
            term: self.hard.term,
            leader,
        })
    }

    /// The state it must persist.
    pub fn hard_state(&self) -> HardState {
        self.hard
    }

    /// Static mode elects nobody: never.
    pub fn auto_election(&self) -> bool {
        false
    }

    /// The leader `leader set` assigned over the configured one.
    pub fn manual_override(&self) -> Option<PeerId> {
        self.hard.manual_override
    }

    /// Whether its id was refused as a live duplicate (MEM-3).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }

    /// Static mode never abstains: it casts no vote it could have forgotten.
    pub fn is_abstaining(&self) -> bool {
        false
    }

    /// What only static mode reports.
    pub fn status(&self) -> StaticStatus {
        let assigned = self.assigned();
        StaticStatus {
            configured_leader: self.config.leader,
            assigned_leader: assigned,
            leader_reachable: assigned == self.config.id || self.connected.contains(&assigned),
        }
    }

    // -----------------------------------------------------------------------------------------
    // helpers

    fn assigned(&self) -> PeerId {
        self.hard.manual_override.unwrap_or(self.config.leader)
    }

    /// Ends an input: persist, then publish what changed, once.
    fn finish(&mut self) {
        self.outbox.persist(self.hard);
        let role = self.role();
        let leader = self.leader();
        if leader.is_some() && self.assigned() == self.config.id {
            self.found_before = true;
        }
        self.outbox.finish(Published {
            term: self.hard.term,
            role,
            phase: role.label(),
            leader,
            cause: self.cause,
        });
    }
}

crate::election::has_outbox!(StaticLeader);
