//! Raft leader election (RAFT-1..9), sans-IO.
//!
//! [`Raft`] is one node's election state machine: roles, randomized election timeouts from an
//! injected [`SeededRng`](crate::SeededRng), pre-vote and check-quorum, the two quorum modes,
//! manual `SetLeader`, `EnableAutoLeaderElection`, and leader-change events. Votes compare log
//! positions already; the replicated log itself arrives with LOG-1..5.

mod action;
mod config;
mod message;
mod node;
mod state;

#[cfg(test)]
mod tests;

pub use action::{Action, Event};
pub use config::{QuorumMode, RaftConfig, majority_threshold};
pub use message::RaftMessage;
pub use node::Raft;
pub use state::{LogPosition, RaftStatus, Role};

// The vocabulary every mode shares lives in `crate::election`; these names stay here while the
// shell still speaks Raft (issue 9 moves every caller to `crate::election`).
pub use crate::election::{
    Command, CommandOutcome, ElectionError as RaftError, FencingToken, HardState, LeaderChangeCause,
};
