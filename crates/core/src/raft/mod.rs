//! Raft leader election (RAFT-1..9), sans-IO.
//!
//! [`Raft`] is one node's election state machine: roles, randomized election timeouts from an
//! injected [`SeededRng`](crate::SeededRng), pre-vote and check-quorum, the two quorum modes,
//! manual `SetLeader`, `EnableAutoLeaderElection`, and leader-change events. Votes compare log
//! positions already; the replicated log itself arrives with LOG-1..5.

mod action;
mod config;
mod error;
mod message;
mod node;
mod state;

#[cfg(test)]
mod tests;

pub use action::{Action, Event, LeaderChangeCause};
pub use config::{QuorumMode, RaftConfig, majority_threshold};
pub use error::RaftError;
pub use message::RaftMessage;
pub use node::{Command, CommandOutcome, Raft};
pub use state::{FencingToken, HardState, LogPosition, RaftStatus, Role};
