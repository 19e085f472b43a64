//! What raft compares votes by, and what only raft reports (RAFT-5, RAFT-6, RAFT-10, WAL-2).

use std::cmp::Ordering;

use conclave_protocol::PeerId;

use crate::raft::LogStatus;

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

/// What only raft reports about itself: the `detail` of the status answer in raft mode
/// ([`ModeStatus::Raft`](crate::election::ModeStatus::Raft)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftStatus {
    /// Its vote in this term.
    pub vote: Option<PeerId>,
    /// `"voters"` or `"connected"`.
    pub quorum_mode: &'static str,
    /// Votes needed to win now.
    pub quorum_size: usize,
    /// Nodes that count towards the quorum now (self included).
    pub electorate: usize,
    /// Last log position.
    pub last_log: LogPosition,
    /// The replicated log's commit, applied and durable indices, with `[log]` (LOG-1).
    pub log: Option<LogStatus>,
    /// While abstaining after starting without a hard state (WAL-2): the peers it has not
    /// heard yet, whose terms it waits for.
    pub abstaining_until_heard: Vec<PeerId>,
    /// RAFT-10: its election priority now (configured, or from the latest health reading
    /// that carried one); `None` without one.
    pub priority: Option<u8>,
}
