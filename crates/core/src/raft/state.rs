//! What the election core persists, what it reports, and the fencing token (RAFT-1, CB-5).

use std::cmp::Ordering;

use conclave_protocol::PeerId;

use crate::election::{FencingToken, Role};

/// The position of the last entry of a log: votes compare it (RAFT-5, Raft §5.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct LogPosition {
    /// Term of the last entry (0 for an empty log).
    pub term: u64,
    /// Index of the last entry (0 for an empty log).
    pub index: u64,
}

impl LogPosition {
    /// A position.
    pub const fn new(term: u64, index: u64) -> Self {
        Self { term, index }
    }
}

impl PartialOrd for LogPosition {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LogPosition {
    /// "Up to date" order of Raft §5.4.1: the later last term wins; with equal last terms, the
    /// longer log.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.term, self.index).cmp(&(other.term, other.index))
    }
}

/// A snapshot of the election state, for the status answer and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftStatus {
    /// This node.
    pub id: PeerId,
    /// Its role.
    pub role: Role,
    /// Where it stands within its role (`pre_candidate` is RAFT-7's pre-vote round).
    pub phase: &'static str,
    /// Its current term.
    pub term: u64,
    /// The leader it knows in this term.
    pub leader: Option<PeerId>,
    /// Its vote in this term.
    pub vote: Option<PeerId>,
    /// `"voters"` or `"connected"`.
    pub quorum_mode: &'static str,
    /// Votes needed to win now.
    pub quorum_size: usize,
    /// Nodes that count towards the quorum now (self included).
    pub electorate: usize,
    /// Whether this node starts elections by itself.
    pub auto_election: bool,
    /// The leader pinned by a manual override.
    pub manual_override: Option<PeerId>,
    /// The fencing token of the known leader.
    pub fencing_token: Option<FencingToken>,
    /// Last log position.
    pub last_log: LogPosition,
    /// Whether the node is kept out of elections because its id is a duplicate (MEM-3).
    pub quarantined: bool,
    /// Whether the node abstains because it started without a hard state (WAL-2): it neither
    /// votes nor campaigns until it has heard every other voter.
    pub abstaining: bool,
    /// While abstaining: the peers it has not heard yet, whose terms it waits for.
    pub abstaining_until_heard: Vec<PeerId>,
}
