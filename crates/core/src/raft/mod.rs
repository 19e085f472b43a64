//! Raft leader election (RAFT-1..10), sans-IO.
//!
//! [`Raft`] is one node's election state machine: roles, randomized election timeouts from an
//! injected [`SeededRng`](crate::SeededRng), pre-vote and check-quorum, the two quorum modes,
//! manual `SetLeader`, `EnableAutoLeaderElection`, leader-change events, and RAFT-10's
//! priorities with preemption by leadership transfer (see [`Raft`]'s module docs), failure
//! detection that adapts to the link ([`RaftConfig::adaptive_timeout`]), and, with
//! `[log]`, the replicated log of LOG-1..4 and its read index (LOG-7) reached through
//! [`ReplicatedLog`] ([`Raft::replicated_log`]).
//!
//! It speaks the vocabulary of [`crate::election`]: its outputs are
//! [`election::Action`](crate::election::Action)s carrying
//! [`ElectionMessage::Raft`](crate::election::ElectionMessage::Raft), its roles are
//! [`election::Role`](crate::election::Role) with the phase label `pre_candidate` for RAFT-7's
//! pre-vote round, and it is driven through [`Election`](crate::election::Election) like every
//! other mode.

mod config;
mod log;
mod message;
mod node;
mod state;

#[cfg(test)]
mod acks_tests;
#[cfg(test)]
mod chunk_tests;
#[cfg(test)]
mod membership_tests;
#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod priority_tests;
#[cfg(test)]
mod read_index_tests;
#[cfg(test)]
mod reorder_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod suspicion_tests;
#[cfg(test)]
mod tests;

pub use config::{LogConfig, QuorumMode, RaftConfig, majority_threshold};
pub use message::RaftMessage;
pub use node::{
    LogStatus, LogWrite, MAX_ENTRY_BYTES, MembershipChange, MembershipError, ProposeError, Raft,
    ReadError, ReadId, ReplicatedLog,
};
pub use state::{LogPosition, RaftStatus};
