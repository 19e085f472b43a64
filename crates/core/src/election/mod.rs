//! The election seam: what every election mode shares (docs/design.md §1, §4; issue 9).
//!
//! conclave elects its leader in one of four modes, picked by `election.mode` at start and
//! fixed for the life of the process: [`Mode::Raft`] (seeds 000 and 004), [`Mode::Gossip`]
//! (Hyperledger Fabric's election, seeds 001 and 003), [`Mode::Priority`] (the ESP-NOW pod
//! "master election" of seed 002) and [`Mode::Static`] (a leader named in the configuration).
//! Whatever the mode, the rest of the node speaks one vocabulary, defined here:
//!
//! - who a node is in the election: [`Role`] (follower, candidate-like, leader) with a
//!   mode-specific phase label for the detail (`pre_candidate`, `discovering`, `proposing`);
//! - what it persists ([`HardState`]: every mode defines its term — Raft's term, the gossip
//!   leadership epoch, the priority round — so that [`FencingToken`] `(term, leader)` grows
//!   with every change of leader in every mode, CB-5);
//! - why a leader changed ([`LeaderChangeCause`], CB-6), what it tells the world ([`Event`]),
//!   what it asks its driver to do ([`Action`]);
//! - what an operator asks of it ([`Command`], [`CommandOutcome`], [`ElectionError`]);
//! - which setting a configuration problem concerns ([`Setting`], [`SettingProblem`]), so that
//!   whoever reads the settings from a file names its own key for each;
//! - the messages it exchanges ([`ElectionMessage`], a typed subset of the wire
//!   [`Body`](conclave_protocol::Body));
//! - inputs any mode may need besides messages and time: peer reachability from membership,
//!   a peer's signal strength from the radio ([`PeerSignal`]), this node's own health reading
//!   ([`HealthReading`]: battery or priority source), operator commands, and shutdown.
//!
//! Every mode's state machine is driven the same way as the rest of this crate: inputs are
//! `handle_*(now, ...)`, outputs are taken as one typed batch ([`Election::take_ready`],
//! [`Ready`]) and carried out by the [`Driver`](crate::driver::Driver), and `poll_timeout()`
//! says when to call `handle_timeout` next. Every mode queues its outputs through one
//! [`Outbox`], which puts a message after the persist of the hard state it depends on and
//! publishes an input's events, then any change of role and of leader, once at its end; the
//! [`Outputs`] trait hands them out, the same for every mode.
//!
//! [`Election`] is the closed set of modes behind that one interface, built from an
//! [`ElectionConfig`]; [`ElectionStatus`] is what every mode reports, with the mode's own
//! detail in [`ModeStatus`]. Drivers (the ElectionActor, the simulator) hold an `Election` and
//! name no mode's own types.

mod cause;
mod command;
mod error;
mod machine;
mod message;
mod outbox;
mod ready;
mod setting;
mod state;
mod status;

use std::fmt;
use std::time::Duration;

use conclave_protocol::PeerId;

pub use cause::LeaderChangeCause;
pub use command::{Command, CommandOutcome};
pub use error::ElectionError;
pub use machine::{Election, ElectionConfig};
pub use message::{ElectionMessage, GossipMessage, PriorityMessage};
pub(crate) use outbox::Published;
pub(crate) use outbox::has_outbox;
pub(crate) use outbox::sealed::Sealed as SealedOutbox;
pub use outbox::{HasOutbox, Outbox, Outputs};
pub use ready::{AfterPersist, DurableWrite, Outgoing, PersistBatch, PersistSeq, Persisted, Ready};
pub use setting::{
    GossipSetting, PrioritySetting, RaftSetting, Setting, SettingProblem, StaticSetting, millis,
};
pub use state::{AmnesiaCause, FencingToken, HardState};
pub use status::{ElectionStatus, ModeStatus};

/// Which election a node runs (`election.mode`). Switching needs a restart, and the WAL
/// records the mode so that a node never starts with another mode's durable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Raft leader election with pre-vote and check-quorum (RAFT-1..10).
    Raft,
    /// Hyperledger Fabric's gossip election: proposals, declarations, lowest id wins (GOS-1..6).
    Gossip,
    /// The ESP-NOW pod master election by priority score (PRI-1..6).
    Priority,
    /// A leader named in the configuration; nobody elects (STA-1).
    Static,
}

impl Mode {
    /// Every mode.
    pub const ALL: &'static [Mode] = &[Mode::Raft, Mode::Gossip, Mode::Priority, Mode::Static];

    /// The name used by `election.mode`, the status answer and the `mode` metric label.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Raft => "raft",
            Mode::Gossip => "gossip",
            Mode::Priority => "priority",
            Mode::Static => "static",
        }
    }

    /// The mode named `label`.
    pub fn from_label(label: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|mode| mode.label() == label)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A node's part in the election, in words every mode shares. The mode-specific detail is a
/// phase label next to it (see [`Event::RoleChanged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Follows a leader, or waits for one.
    Follower,
    /// Trying to become leader: a Raft (pre-)candidate, a gossip proposer, a priority
    /// candidate waiting for votes.
    Candidate,
    /// Leads.
    Leader,
}

impl Role {
    /// Every role, for pre-registering the `role` metric label.
    pub const ALL: &'static [Role] = &[Role::Follower, Role::Candidate, Role::Leader];

    /// The `role` label of metrics, hooks and the status answer.
    pub fn label(self) -> &'static str {
        match self {
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::Leader => "leader",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The signal strength at which this node hears a peer over the radio, smoothed by the
/// transport (PRI-1: the priority score's signal component).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeerSignal {
    /// The peer.
    pub peer: PeerId,
    /// Received signal strength, dBm (negative; closer to 0 is stronger).
    pub rssi_dbm: f64,
}

/// This node's own health, as its configured source reports it (a fixed value, a file, or a
/// command: PRI-1's battery, RAFT-10's priority that follows a health check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthReading {
    /// Battery charge, 0–100 (a gateway on mains reports 100).
    pub battery_percent: u8,
    /// A priority the source asks for (RAFT-10, keepalived's track scripts); `None` keeps the
    /// configured one.
    pub priority: Option<u8>,
}

/// Something the world may want to know, published once, in order, after the state it reports
/// is durable (RAFT-9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The known leader changed: to another node, to a new term of the same node, or to none.
    LeaderChanged {
        /// This node's term; with `leader`, the fencing token (CB-5).
        term: u64,
        /// The new leader, if any.
        leader: Option<PeerId>,
        /// This node's role now.
        role: Role,
        /// Why.
        cause: LeaderChangeCause,
    },
    /// This node's role or phase changed.
    RoleChanged {
        /// Its term.
        term: u64,
        /// The new role.
        role: Role,
        /// The mode's own name for where it stands (`pre_candidate`, `discovering`, ...).
        phase: &'static str,
    },
    /// This node started trying to become leader.
    ElectionStarted {
        /// The term (epoch, round) campaigned for.
        term: u64,
        /// The mode's name for the attempt (`pre_vote`, `election`, `proposal`, `campaign`).
        phase: &'static str,
    },
    /// This node won.
    ElectionWon {
        /// The term won.
        term: u64,
        /// From the first attempt after the leader was lost to the win.
        duration: Duration,
    },
    /// This node answered a request for its vote.
    VoteCast {
        /// The term (round) of the request.
        term: u64,
        /// The candidate.
        candidate: PeerId,
        /// Granted or refused.
        granted: bool,
        /// A Raft pre-vote.
        pre_vote: bool,
    },
    /// Two different nodes claimed leadership of one term (`conclave_split_brain_total`).
    SplitBrain {
        /// The term.
        term: u64,
        /// The leader this node knew.
        known: PeerId,
        /// The other claimant.
        other: PeerId,
    },
    /// A hand-over this leader started ended without the target taking over in time.
    TransferAborted {
        /// The target.
        target: PeerId,
    },
    /// MEMB-1: the configuration this node acts on changed: a configuration entry was
    /// appended to its log (acted on at once, committed or not), or a truncation removed one
    /// and the one before it is back.
    ConfigurationChanged {
        /// The index of the entry that carries it; the snapshot's index when it came with a
        /// snapshot, 0 for the configuration `cluster.voters` seeds.
        index: u64,
        /// Its voters, ascending.
        voters: Vec<PeerId>,
        /// Its learners, ascending.
        learners: Vec<PeerId>,
    },
}

/// One output of an election mode, as [`Election::poll_action`] hands them out. The driver
/// carries actions out **in order**: a persist action is durable before any later action is
/// carried out (RAFT-1). A driver that persists in the background takes them as a typed batch
/// instead ([`Election::take_ready`], [`Ready`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Make this hard state durable (fsync) before going on.
    Persist(HardState),
    /// Make this hard state durable (fsync) before going on, and keep the WAL amnesic (WAL-2):
    /// after an abstention the node is in a term it may have voted in before it lost its WAL,
    /// with no vote recorded for it. It refuses every vote in that term, and a restart must
    /// abstain again, so the driver writes an amnesia marker after it. The next plain
    /// [`Action::Persist`] (of a later term) ends that.
    PersistAmnesic(HardState),
    /// Make the operator's automatic-election switch durable (RAFT-8), so that it wins over
    /// the configuration at the next start. Emitted for every `EnableAutoElection` command.
    PersistAutoElection(bool),
    /// Make a genesis durable (WAL-5): a node started for a new cluster found that the cluster
    /// is new (see [`AmnesiaCause::NewCluster`]); its WAL records that it never voted, and it
    /// takes part at once from now on, restarts included.
    PersistGenesis,
    /// Send a message to one peer.
    Send {
        /// The addressee.
        to: PeerId,
        /// The message.
        message: ElectionMessage,
    },
    /// Send a message to every peer reachable on every link.
    Broadcast {
        /// The message.
        message: ElectionMessage,
    },
    /// Tell subscribers, hooks and metrics.
    Publish(Event),
    /// The answer to `handle_shutdown`: this node's part in the election is over. Any
    /// hand-over it started has ended and it leads no more; what it had to persist and
    /// publish on the way out came before this. Nothing follows it: the driver stops feeding
    /// the machine once it has carried out the actions before this one.
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mode and role has a distinct label that maps back to it.
    #[test]
    fn mode_labels_round_trip() {
        for &mode in Mode::ALL {
            assert_eq!(Mode::from_label(mode.label()), Some(mode));
        }
        assert_eq!(Mode::from_label("paxos"), None);
        let labels: std::collections::BTreeSet<_> = Role::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(labels.len(), Role::ALL.len());
    }
}
