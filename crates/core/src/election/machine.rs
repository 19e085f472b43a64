//! [`Election`]: the closed set of election modes behind one interface (docs/design.md §1, §4).
//!
//! The mode is picked by `election.mode` at start and fixed for the life of the process, so the
//! set is a closed enum, not a trait object: the driver (the ElectionActor, the simulator)
//! holds one `Election` and never names a mode's own types, and no generic parameter leaks
//! into it.
//!
//! Every mode's machine has the same methods, with the same signatures, and [`Election`]
//! forwards to them with [`each_mode!`]:
//!
//! ```text
//! handle_timeout(now)                      poll_action() -> Option<Action>
//! handle_peer_status(now, peer, connected) poll_timeout() -> Option<Instant>
//! handle_peer_signal(now, PeerSignal)      id() role() phase() term() leader()
//! handle_health(now, HealthReading)        fencing_token() hard_state() auto_election()
//! handle_command(now, Command) -> Result   manual_override() is_quarantined()
//! handle_shutdown(now)                     is_abstaining() status() -> the mode's detail
//! handle_id_refused(now)
//! ```
//!
//! What differs per mode is written out: construction ([`ElectionConfig`]), the message type
//! ([`Election::handle_message`] hands each mode its own part of [`ElectionMessage`]), the
//! status detail ([`ModeStatus`]) and raft's abstention after a lost WAL. Adding a mode is a
//! variant in [`Election`], [`ElectionConfig`] and [`ModeStatus`], a line in `each_mode!`, and
//! an arm in each of those written-out places.

use conclave_protocol::PeerId;

use crate::election::{
    Action, AmnesiaCause, Command, CommandOutcome, ElectionError, ElectionMessage, ElectionStatus,
    FencingToken, HardState, HealthReading, Mode, ModeStatus, Outputs, PeerSignal, Persisted,
    Ready, Role,
};
use crate::gossip::{Gossip, GossipConfig};
use crate::priority::{Priority, PriorityConfig};
use crate::raft::{Raft, RaftConfig, ReplicatedLog};
use crate::rng::SeededRng;
use crate::static_leader::{StaticConfig, StaticLeader};
use crate::storage::DurableState;
use crate::time::Instant;

/// Runs `$body` with `$machine` bound to the machine of whichever mode `$election` holds.
macro_rules! each_mode {
    ($election:expr, $machine:ident => $body:expr) => {
        match $election {
            Election::Raft($machine) => $body,
            Election::Gossip($machine) => $body,
            Election::Priority($machine) => $body,
            Election::Static($machine) => $body,
        }
    };
}

/// The settings of one node's election, in its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionConfig {
    /// `election.mode = "raft"`.
    Raft(RaftConfig),
    /// `election.mode = "gossip"`.
    Gossip(GossipConfig),
    /// `election.mode = "priority"`.
    Priority(PriorityConfig),
    /// `election.mode = "static"`.
    Static(StaticConfig),
}

impl ElectionConfig {
    /// Raft with the defaults of docs/design.md §9 (`voters` quorum over `voters`), for node `id`.
    pub fn raft(id: PeerId, voters: impl IntoIterator<Item = PeerId>) -> Self {
        ElectionConfig::Raft(RaftConfig::new(id, voters))
    }

    /// The mode these settings run.
    pub fn mode(&self) -> Mode {
        match self {
            ElectionConfig::Raft(_) => Mode::Raft,
            ElectionConfig::Gossip(_) => Mode::Gossip,
            ElectionConfig::Priority(_) => Mode::Priority,
            ElectionConfig::Static(_) => Mode::Static,
        }
    }

    /// The node they are for.
    pub fn id(&self) -> PeerId {
        match self {
            ElectionConfig::Raft(config) => config.id,
            ElectionConfig::Gossip(config) => config.id,
            ElectionConfig::Priority(config) => config.id,
            ElectionConfig::Static(config) => config.id,
        }
    }

    /// The same settings for node `id` of a cluster of `members` (the simulator runs one
    /// configuration on every node): the id replaced, and the configured electorate (raft's
    /// voters, static's members) replaced by `members` where the settings have one.
    pub fn for_member(&self, id: PeerId, members: &[PeerId]) -> Self {
        match self {
            ElectionConfig::Raft(config) => {
                let mut config = config.clone();
                config.id = id;
                if let crate::raft::QuorumMode::Voters(voters) = &mut config.quorum {
                    *voters = members.iter().copied().collect();
                }
                ElectionConfig::Raft(config)
            }
            ElectionConfig::Gossip(config) => {
                let mut config = config.clone();
                config.id = id;
                ElectionConfig::Gossip(config)
            }
            ElectionConfig::Priority(config) => {
                let mut config = config.clone();
                config.id = id;
                ElectionConfig::Priority(config)
            }
            ElectionConfig::Static(config) => {
                let mut config = config.clone();
                config.id = id;
                if !config.members.is_empty() {
                    config.members = members.iter().copied().collect();
                }
                ElectionConfig::Static(config)
            }
        }
    }

    /// Whether the node starts elections by itself (`election.auto`); `false` in a mode where
    /// nobody elects.
    pub fn auto_election(&self) -> bool {
        match self {
            ElectionConfig::Raft(config) => config.auto_election,
            ElectionConfig::Gossip(config) => config.auto_election,
            ElectionConfig::Priority(config) => config.auto_election,
            ElectionConfig::Static(_) => false,
        }
    }

    /// Sets what [`Self::auto_election`] says, where the mode has the switch (RAFT-8: the
    /// operator's last `auto-election` recorded in the WAL wins over the configuration).
    pub fn set_auto_election(&mut self, enabled: bool) {
        match self {
            ElectionConfig::Raft(config) => config.auto_election = enabled,
            ElectionConfig::Gossip(config) => config.auto_election = enabled,
            ElectionConfig::Priority(config) => config.auto_election = enabled,
            ElectionConfig::Static(_) => {}
        }
    }

    /// Every problem with the settings.
    pub fn validate(&self) -> Result<(), ElectionError> {
        match self {
            ElectionConfig::Raft(config) => config.validate(),
            ElectionConfig::Gossip(config) => config.validate(),
            ElectionConfig::Priority(config) => config.validate(),
            ElectionConfig::Static(config) => config.validate(),
        }
    }
}

/// One node's election, in the mode its configuration picked. See the module docs.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "a node holds one Election for its whole life and never moves it in a hot path"
)]
pub enum Election {
    /// Raft (RAFT-1..9).
    Raft(Raft),
    /// Fabric's gossip election (GOS-1..6).
    Gossip(Gossip),
    /// The ESP-NOW pod's priority election (PRI-1..6).
    Priority(Priority),
    /// A statically named leader (STA-1).
    Static(StaticLeader),
}

impl Election {
    /// A node starting (or restarting) with the hard state its WAL recovered.
    pub fn new(
        config: ElectionConfig,
        restored: HardState,
        rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        Ok(match config {
            ElectionConfig::Raft(config) => Election::Raft(Raft::new(config, restored, rng, now)?),
            ElectionConfig::Gossip(config) => {
                Election::Gossip(Gossip::new(config, restored, rng, now)?)
            }
            ElectionConfig::Priority(config) => {
                Election::Priority(Priority::new(config, restored, rng, now)?)
            }
            ElectionConfig::Static(config) => {
                Election::Static(StaticLeader::new(config, restored, rng, now)?)
            }
        })
    }

    /// A node restarting from what its storage recovered (hard state, snapshot, entries): the
    /// log is raft's alone; every other mode takes the hard state.
    pub fn restored(
        config: ElectionConfig,
        durable: &DurableState,
        rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        match config {
            ElectionConfig::Raft(config) => {
                Ok(Election::Raft(Raft::restored(config, durable, rng, now)?))
            }
            other => Self::new(other, durable.hard, rng, now),
        }
    }

    /// The replicated log's API (LOG-1..3): raft with `[log]` only. The log is not part of the
    /// vocabulary every mode answers: its writes, durability reports and applied entries go
    /// through this seam, and its messages are raft's own.
    pub fn replicated_log(&mut self) -> Option<ReplicatedLog<'_>> {
        match self {
            Election::Raft(raft) => raft.replicated_log(),
            Election::Gossip(_) | Election::Priority(_) | Election::Static(_) => None,
        }
    }

    /// Its mode.
    pub fn mode(&self) -> Mode {
        match self {
            Election::Raft(_) => Mode::Raft,
            Election::Gossip(_) => Mode::Gossip,
            Election::Priority(_) => Mode::Priority,
            Election::Static(_) => Mode::Static,
        }
    }

    /// The node's WAL held no hard state (WAL-2), for the reason `cause`: call right after
    /// [`Election::new`]. A mode that votes may have voted in terms it no longer knows, and
    /// abstains until those are over (raft: see [`Raft::begin_abstention`]). Returns whether
    /// it abstains.
    pub fn begin_abstention(&mut self, now: Instant, cause: AmnesiaCause) -> bool {
        match self {
            Election::Raft(raft) => raft.begin_abstention(now, cause),
            // Cast no durable vote, so they forgot none.
            Election::Gossip(_) | Election::Priority(_) | Election::Static(_) => false,
        }
    }

    // -----------------------------------------------------------------------------------------
    // inputs

    /// An election message from `from` (already authenticated by the transport). A message of
    /// another mode changes nothing and comes back as [`ElectionError::OtherMode`], for the
    /// driver to count as a drop.
    pub fn handle_message(
        &mut self,
        now: Instant,
        from: PeerId,
        message: ElectionMessage,
    ) -> Result<(), ElectionError> {
        match (self, message) {
            (Election::Raft(raft), ElectionMessage::Raft(message)) => {
                raft.handle_message(now, from, message);
                Ok(())
            }
            (Election::Gossip(gossip), ElectionMessage::Gossip(message)) => {
                gossip.handle_message(now, from, message);
                Ok(())
            }
            (Election::Priority(priority), ElectionMessage::Priority(message)) => {
                priority.handle_message(now, from, message);
                Ok(())
            }
            (election, message) => Err(ElectionError::OtherMode {
                ours: election.mode(),
                theirs: message.mode(),
            }),
        }
    }

    /// Time passed; call at [`Election::poll_timeout`] (calling early is harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        each_mode!(self, machine => machine.handle_timeout(now))
    }

    /// Membership reports `peer` connected or disconnected (MEM-5).
    pub fn handle_peer_status(&mut self, now: Instant, peer: PeerId, connected: bool) {
        each_mode!(self, machine => machine.handle_peer_status(now, peer, connected))
    }

    /// The radio reports how well this node hears a peer (PRI-1's signal).
    pub fn handle_peer_signal(&mut self, now: Instant, signal: PeerSignal) {
        each_mode!(self, machine => machine.handle_peer_signal(now, signal))
    }

    /// This node's health source gave a reading (PRI-1's battery, RAFT-10's priority).
    pub fn handle_health(&mut self, now: Instant, reading: HealthReading) {
        each_mode!(self, machine => machine.handle_health(now, reading))
    }

    /// An operator's command (`leader set`, `leader resign`, `auto-election`).
    pub fn handle_command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        each_mode!(self, machine => machine.handle_command(now, command))
    }

    /// The node is stopping (CB-2): a leader hands over or steps down, as its mode does it.
    pub fn handle_shutdown(&mut self, now: Instant) {
        each_mode!(self, machine => machine.handle_shutdown(now))
    }

    /// Membership learned that this node's id is a live duplicate (MEM-3): leave the election
    /// for good.
    pub fn handle_id_refused(&mut self, now: Instant) {
        each_mode!(self, machine => machine.handle_id_refused(now))
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    /// The next action for a synchronous driver that makes each write durable before the
    /// next action (the tests): the mode's part of [`Election::take_ready`], taken whole and
    /// counted durable at once ([`Outputs::poll_action`]). The replicated log's parts are not
    /// in it: a node with a log is driven by [`crate::driver::Driver`].
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        each_mode!(self, machine => machine.poll_action())
    }

    /// Everything decided since the last call, as one typed batch (see [`Ready`]): the
    /// writes to make durable, what may leave now and what waits for those writes; with
    /// raft's replicated log, also a snapshot to install, entries to write, committed entries
    /// to apply and read outcomes. This is the core's one output contract; the
    /// [`Driver`](crate::driver::Driver) carries it out for the actor and the simulator.
    #[must_use]
    pub fn take_ready(&mut self) -> Ready {
        let mut ready = each_mode!(self, machine => machine.take_ready());
        if let Election::Raft(raft) = self {
            raft.take_log_ready(&mut ready);
        }
        ready
    }

    /// The driver made something durable: a persist batch (and with it every earlier one),
    /// the log's entries up to a position, or a snapshot. What waited for it may go now, in
    /// the next [`Election::take_ready`].
    pub fn handle_persisted(&mut self, now: Instant, persisted: Persisted) {
        match persisted {
            Persisted::Hard(seq) => each_mode!(self, machine => machine.handle_persisted(seq)),
            Persisted::Entries(last) => {
                if let Some(mut log) = self.replicated_log() {
                    log.handle_persisted(now, last);
                }
            }
            Persisted::Snapshot(last) => {
                if let Some(mut log) = self.replicated_log() {
                    log.handle_snapshot_persisted(now, last);
                }
            }
        }
    }

    /// A persist batch handed out by [`Election::take_ready`] is not yet reported durable: the
    /// state in memory is ahead of the disk.
    #[must_use]
    pub fn is_persisting(&self) -> bool {
        each_mode!(self, machine => machine.is_persisting())
    }

    /// When [`Election::handle_timeout`] must be called next; `None` when nothing is pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        each_mode!(self, machine => machine.poll_timeout())
    }

    // -----------------------------------------------------------------------------------------
    // queries

    /// This node.
    pub fn id(&self) -> PeerId {
        each_mode!(self, machine => machine.id())
    }

    /// Its role.
    pub fn role(&self) -> Role {
        each_mode!(self, machine => machine.role())
    }

    /// The mode's name for where it stands within its role.
    pub fn phase(&self) -> &'static str {
        each_mode!(self, machine => machine.phase())
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        self.role() == Role::Leader
    }

    /// Its term (raft's term, static mode's assignment epoch).
    pub fn term(&self) -> u64 {
        each_mode!(self, machine => machine.term())
    }

    /// The leader it knows.
    pub fn leader(&self) -> Option<PeerId> {
        each_mode!(self, machine => machine.leader())
    }

    /// `(term, leader)` of the known leader (CB-5).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        each_mode!(self, machine => machine.fencing_token())
    }

    /// The state it must persist.
    pub fn hard_state(&self) -> HardState {
        each_mode!(self, machine => machine.hard_state())
    }

    /// Whether it abstains after starting without a hard state (WAL-2).
    pub fn is_abstaining(&self) -> bool {
        each_mode!(self, machine => machine.is_abstaining())
    }

    /// Whether its id was refused as a live duplicate (MEM-3).
    pub fn is_quarantined(&self) -> bool {
        each_mode!(self, machine => machine.is_quarantined())
    }

    /// A snapshot for the status answer: what every mode reports, and the mode's own detail.
    pub fn status(&self) -> ElectionStatus {
        let detail = match self {
            Election::Raft(raft) => ModeStatus::Raft(raft.status()),
            Election::Gossip(gossip) => ModeStatus::Gossip(gossip.status()),
            Election::Priority(priority) => ModeStatus::Priority(priority.status()),
            Election::Static(node) => ModeStatus::Static(node.status()),
        };
        each_mode!(self, machine => ElectionStatus {
            id: machine.id(),
            mode: self.mode(),
            role: machine.role(),
            phase: machine.phase(),
            term: machine.term(),
            leader: machine.leader(),
            fencing_token: machine.fencing_token(),
            auto_election: machine.auto_election(),
            manual_override: machine.manual_override(),
            quarantined: machine.is_quarantined(),
            abstaining: machine.is_abstaining(),
            detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use conclave_protocol::Proposal;

    use super::*;
    use crate::election::{GossipMessage, LeaderChangeCause};
    use crate::testing::{drain, id};

    /// The seam drives raft as raft drives itself: a single voter elects itself at its first
    /// timeout, and the status reports mode `raft`, the common fields and raft's detail.
    #[test]
    fn seam_drives_raft() {
        let me = id("a");
        let mut election = Election::new(
            ElectionConfig::Raft(RaftConfig::new(me, [me])),
            HardState::default(),
            SeededRng::new(3),
            Instant::ZERO,
        )
        .unwrap();
        assert_eq!(election.mode(), Mode::Raft);
        let deadline = election.poll_timeout().unwrap();
        election.handle_timeout(deadline);
        let actions = drain(&mut election);
        assert_eq!(
            actions.last(),
            Some(&Action::Publish(crate::election::Event::LeaderChanged {
                term: 1,
                leader: Some(me),
                role: Role::Leader,
                cause: LeaderChangeCause::VoteWon,
            }))
        );
        let status = election.status();
        assert_eq!(
            (status.mode, status.role, status.phase, status.term),
            (Mode::Raft, Role::Leader, "leader", 1)
        );
        assert_eq!(status.detail.quorum_mode(), Some("voters"));
        let ModeStatus::Raft(raft) = status.detail else {
            panic!("raft detail expected");
        };
        assert_eq!(raft.vote, Some(me));
    }

    /// A message of another mode changes nothing and is reported, for the driver to count.
    #[test]
    fn seam_refuses_another_modes_message() {
        let me = id("a");
        let mut election = Election::new(
            ElectionConfig::Raft(RaftConfig::new(me, [me, id("b")])),
            HardState::default(),
            SeededRng::new(3),
            Instant::ZERO,
        )
        .unwrap();
        let proposal = ElectionMessage::Gossip(GossipMessage::Proposal(Proposal {
            epoch: 0,
            leader: None,
        }));
        assert_eq!(
            election.handle_message(Instant::ZERO, id("b"), proposal),
            Err(ElectionError::OtherMode {
                ours: Mode::Raft,
                theirs: Mode::Gossip
            })
        );
        assert_eq!(election.poll_action(), None);
    }

    /// The simulator's per-node settings: the id and the electorate replaced, the rest kept.
    #[test]
    fn config_for_member() {
        let members = [id("n1"), id("n2")];
        let raft = ElectionConfig::Raft(RaftConfig::new(id("x"), [id("x")]));
        let ElectionConfig::Raft(config) = raft.for_member(id("n2"), &members) else {
            panic!("raft stays raft");
        };
        assert_eq!(config.id, id("n2"));
        assert_eq!(
            config.quorum,
            crate::raft::QuorumMode::Voters(members.into_iter().collect())
        );
        let static_config = ElectionConfig::Static(StaticConfig::new(id("x"), id("n1")));
        assert_eq!(static_config.for_member(id("n2"), &members).id(), id("n2"));
        assert_eq!(static_config.mode(), Mode::Static);
        assert!(!static_config.auto_election());
    }
}
