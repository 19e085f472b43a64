//! What the election core asks its driver to do, and what it tells the world (RAFT-1, RAFT-9,
//! CB-6).

use std::time::Duration;

use conclave_protocol::PeerId;

use crate::election::{HardState, LeaderChangeCause};
use crate::raft::message::RaftMessage;
use crate::raft::state::Role;

/// One output of the election core. The driver carries actions out **in order**: a
/// [`Action::Persist`] must be durable before any later action is carried out, because the
/// messages after it (a vote, a new term's requests) depend on it (RAFT-1).
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
    /// Send a message to one peer.
    Send {
        /// The addressee.
        to: PeerId,
        /// The message.
        message: RaftMessage,
    },
    /// Tell subscribers, hooks and metrics.
    Publish(Event),
}

/// Something subscribers may want to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The known leader changed, to another node, to a new term of the same node, or to none
    /// (RAFT-9). Published once per change, in order, after the state it reports is persisted.
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
    /// This node's role changed.
    RoleChanged {
        /// Its term.
        term: u64,
        /// The new role.
        role: Role,
    },
    /// This node started a (pre-)election.
    ElectionStarted {
        /// The term campaigned for.
        term: u64,
        /// A pre-vote round.
        pre_vote: bool,
    },
    /// This node won an election.
    ElectionWon {
        /// The term won.
        term: u64,
        /// From the first (pre-)campaign after the leader was lost to the win.
        duration: Duration,
    },
    /// This node answered a vote request.
    VoteCast {
        /// The term of the request.
        term: u64,
        /// The candidate.
        candidate: PeerId,
        /// Granted or refused.
        granted: bool,
        /// A pre-vote.
        pre_vote: bool,
    },
    /// Two different nodes claimed leadership of one term (`conclave_split_brain_total`).
    /// Expected in `connected` mode when partitions heal; a bug in `voters` mode.
    SplitBrain {
        /// The term.
        term: u64,
        /// The leader this node knew.
        known: PeerId,
        /// The other claimant.
        other: PeerId,
    },
    /// A leadership transfer started by this leader ended without the target winning in time.
    TransferAborted {
        /// The target.
        target: PeerId,
    },
}
