//! What the status answer reports about the election, whatever its mode (docs/design.md §9
//! `GET /v1/status`), with the mode's own detail beside it.

use conclave_protocol::PeerId;

use crate::election::{FencingToken, Mode, Role};
use crate::gossip::GossipStatus;
use crate::priority::PriorityStatus;
use crate::raft::RaftStatus;
use crate::static_leader::StaticStatus;

/// A snapshot of one node's election, for the status answer, metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionStatus {
    /// This node.
    pub id: PeerId,
    /// Its mode (`election.mode`).
    pub mode: Mode,
    /// Its role.
    pub role: Role,
    /// The mode's name for where it stands within its role (`pre_candidate`, ...).
    pub phase: &'static str,
    /// Its term: raft's term, static mode's assignment epoch; with `leader`, the fencing token.
    pub term: u64,
    /// The leader it knows.
    pub leader: Option<PeerId>,
    /// `(term, leader)` of the known leader (CB-5).
    pub fencing_token: Option<FencingToken>,
    /// Whether it starts elections by itself (RAFT-8); `false` where nobody elects.
    pub auto_election: bool,
    /// The leader an operator's `leader set` pinned or assigned, while that holds.
    pub manual_override: Option<PeerId>,
    /// Whether its id was refused as a live duplicate, keeping it out (MEM-3).
    pub quarantined: bool,
    /// Whether it abstains after starting without a hard state (WAL-2).
    pub abstaining: bool,
    /// What only its mode reports.
    pub detail: ModeStatus,
}

/// What only one mode reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeStatus {
    /// Raft: vote, quorum, electorate, log position, whom an abstaining node waits for.
    Raft(RaftStatus),
    /// Gossip: the membership view, yielding, static org leadership (GOS-1..6).
    Gossip(GossipStatus),
    /// Priority: state, score and its parts, the master and whom it awaits (PRI-1..6).
    Priority(PriorityStatus),
    /// Static: the configured and the assigned leader, and whether it is reachable.
    Static(StaticStatus),
}

impl ModeStatus {
    /// Raft's quorum rule (`voters` or `connected`); `None` in a mode without a quorum.
    pub fn quorum_mode(&self) -> Option<&'static str> {
        match self {
            ModeStatus::Raft(raft) => Some(raft.quorum_mode),
            ModeStatus::Gossip(_) | ModeStatus::Priority(_) | ModeStatus::Static(_) => None,
        }
    }

    /// The peers an abstaining node still waits to hear (WAL-2); empty when it does not abstain.
    pub fn abstaining_until_heard(&self) -> &[PeerId] {
        match self {
            ModeStatus::Raft(raft) => &raft.abstaining_until_heard,
            ModeStatus::Gossip(_) | ModeStatus::Priority(_) | ModeStatus::Static(_) => &[],
        }
    }
}
