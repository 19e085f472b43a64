//! What every election mode persists, and the fencing token it hands out (RAFT-1, WAL-1,
//! CB-5).

use std::fmt;

use conclave_protocol::PeerId;

/// The state that must be durable before any message that depends on it leaves the node
/// (RAFT-1, WAL-1). Emitted as [`Action::Persist`](crate::election::Action::Persist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HardState {
    /// The latest term this node has seen.
    pub term: u64,
    /// Whom it voted for in `term`.
    pub vote: Option<PeerId>,
    /// The leader pinned by a manual `SetLeader` (RAFT-8), while the override holds.
    pub manual_override: Option<PeerId>,
}

/// Why a node starts without a hard state (WAL-2, WAL-5), for what its abstention says: the
/// rule is the same either way, but a first start is no fault and is logged as news, while a
/// lost WAL is a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmnesiaCause {
    /// Its data directory held no WAL and no trace of an earlier node: the node's first start
    /// there, as far as the directory shows (without `conclave init`, which would have given
    /// it a hard state).
    FirstStart,
    /// Its WAL holds no hard state: deleted or wiped (an earlier node's traces remain),
    /// repaired, or left so by an earlier start without `conclave init`.
    Lost,
    /// Its data directory held nothing and `cluster.initial_state = "new"` says its cluster is
    /// being created (WAL-5). Before it takes part as a member that never voted, it asks the
    /// voters: once every other voter answered, all at term 0, the cluster is new and it
    /// records a genesis; if any shows a term above 0, the cluster exists, and it abstains as
    /// a node that lost its WAL does (MEMB-5).
    NewCluster,
}

/// `(term, leader)`: whatever a leader drives keeps the highest token it has seen and refuses
/// commands carrying a lower one, so a deposed leader's late commands are rejected (CB-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FencingToken {
    /// The leader's term; tokens compare by it.
    pub term: u64,
    /// The leader of that term.
    pub leader: PeerId,
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.term, self.leader)
    }
}
