//! Where a node stands in the priority election (PRI-2) and what it reports.

use std::fmt;

use conclave_protocol::PeerId;

use crate::election::{FencingToken, Role};

/// Seed 002's `MasterElectionState` (PRI-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PriorityState {
    /// No election in progress: just started (waiting out the start jitter), just resigned
    /// (sitting one election out), automatic election off, quarantined or stopped.
    Idle,
    /// Looking for peers and a master (`Discover`, 500 ms).
    Discovering,
    /// Broadcasting candidacy (`Candidate`, 200 ms).
    Campaigning,
    /// Collecting the last votes (300 ms).
    WaitingForVotes,
    /// Elected master: announces every second.
    Master,
    /// Follows a master, or waits for a candidate that outranks it to become one.
    Follower,
    /// Master by configuration or command, regardless of score (PRI-6).
    ForcedMaster,
}

impl PriorityState {
    /// Every state.
    pub const ALL: &'static [PriorityState] = &[
        PriorityState::Idle,
        PriorityState::Discovering,
        PriorityState::Campaigning,
        PriorityState::WaitingForVotes,
        PriorityState::Master,
        PriorityState::Follower,
        PriorityState::ForcedMaster,
    ];

    /// The phase label of events, the status answer and the demo's live view.
    pub fn label(self) -> &'static str {
        match self {
            PriorityState::Idle => "idle",
            PriorityState::Discovering => "discovering",
            PriorityState::Campaigning => "campaigning",
            PriorityState::WaitingForVotes => "waiting_for_votes",
            PriorityState::Master => "master",
            PriorityState::Follower => "follower",
            PriorityState::ForcedMaster => "forced_master",
        }
    }

    /// The role every mode shares: discovering and campaigning are the candidate-like
    /// phases, both masters lead, idle and follower follow.
    pub fn role(self) -> Role {
        match self {
            PriorityState::Idle | PriorityState::Follower => Role::Follower,
            PriorityState::Discovering
            | PriorityState::Campaigning
            | PriorityState::WaitingForVotes => Role::Candidate,
            PriorityState::Master | PriorityState::ForcedMaster => Role::Leader,
        }
    }
}

impl fmt::Display for PriorityState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A snapshot of one node's priority election, for the status answer, metrics and the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityStatus {
    /// This node.
    pub id: PeerId,
    /// Its state.
    pub state: PriorityState,
    /// Its role.
    pub role: Role,
    /// The highest round it has seen or used (its persisted term).
    pub round: u64,
    /// The master it follows or is.
    pub master: Option<PeerId>,
    /// Whether it has heard that master itself (not only from another node's `DiscoverAck`).
    pub master_confirmed: bool,
    /// The candidate it accepted and waits for, while there is no master.
    pub awaiting: Option<PeerId>,
    /// `(round, master)` of the master it knows (CB-5).
    pub fencing_token: Option<FencingToken>,
    /// Its priority score now (PRI-1).
    pub score: u32,
    /// Its battery, 0–100.
    pub battery: u8,
    /// Its uptime in minutes, capped at 255 as in the score.
    pub uptime_minutes: u8,
    /// Its signal component: the inverted mean RSSI of its peers.
    pub signal: u8,
    /// Peers it knows.
    pub peers: usize,
    /// Campaign retries in the current election.
    pub retries: u8,
    /// Forced master by configuration or command.
    pub forced: bool,
    /// Whether it campaigns by itself.
    pub auto_election: bool,
    /// Kept out of the election because its id is a live duplicate (MEM-3).
    pub quarantined: bool,
}
