//! The properties every simulated run must keep, one per file.
//!
//! Safety invariants implement [`Invariant`] and are checked after every step:
//! - [`OneLeaderPerTerm`] (`voters` mode): at most one leader per term, anywhere, ever;
//! - [`ElectoratesIntersect`] (`voters` mode with the log, MEMB-1): every leader was elected
//!   by a majority of the voters it counted, and no two elections of one term were won by
//!   disjoint sets of voters, however the configuration changed;
//! - [`OneVotePerTerm`]: no node grants its vote to two candidates in one term, across
//!   restarts too;
//! - [`DurableStateMonotonic`]: a node's persisted term never goes back, and its persisted
//!   vote never changes within a term;
//! - [`PersistedBeforeSent`]: no election message leaves a node before the term and vote it
//!   depends on are durable (raft's term, the gossip epoch, the priority round);
//! - [`FencingTokenMonotonic`] (gossip, priority): the fencing token a node publishes never
//!   goes back, and grows with every change of leader, across restarts (CB-5);
//! - [`TokenDeclaredByLeader`] (gossip, priority): a node names a leader only with a term that
//!   leader claimed on the wire itself (CB-5).
//!
//! Progress properties are checked at the end of a phase, once faults stop:
//! - [`liveness::await_agreed_leader`]: within a bounded virtual time every live node knows
//!   the same leader;
//! - [`partition_convergence::check_partitions_converged`] (`connected` mode): every side of a
//!   stable partition has exactly one leader that all its members know.

mod durable_state_monotonic;
mod electorates_intersect;
mod fencing_token_monotonic;
pub mod liveness;
mod one_leader_per_term;
mod one_vote_per_term;
pub mod partition_convergence;
mod persisted_before_sent;
mod token_declared_by_leader;

pub use durable_state_monotonic::DurableStateMonotonic;
pub use electorates_intersect::ElectoratesIntersect;
pub use fencing_token_monotonic::FencingTokenMonotonic;
pub use one_leader_per_term::OneLeaderPerTerm;
pub use one_vote_per_term::OneVotePerTerm;
pub use persisted_before_sent::PersistedBeforeSent;
pub use token_declared_by_leader::TokenDeclaredByLeader;

use crate::sim::cluster::{Observation, Simulation};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::{QuorumMode, RaftConfig};

/// A safety property checked after every step of a simulation.
pub trait Invariant {
    /// Its name, printed when it fails.
    fn name(&self) -> &'static str;
    /// Checks the cluster after one step; `observations` are what happened during that step.
    fn check(&mut self, sim: &Simulation, observations: &[Observation]) -> Result<(), String>;
}

/// The invariants that hold for `election`. Raft's `connected` mode allows one leader per
/// partition, and so do gossip and priority (they elect without a quorum, docs/design.md §4.3–4.4,
/// and two partitions may pick the same next epoch or round), so the one-leader rule is for
/// raft's `voters` mode, and for static mode, where only the named node ever leads. What
/// fences gossip's and priority's leaders instead — each node's token only grows, and every
/// token is its leader's own — is checked for those two.
pub fn standard(election: &ElectionConfig) -> Vec<Box<dyn Invariant>> {
    let mut invariants: Vec<Box<dyn Invariant>> = vec![
        Box::new(OneVotePerTerm::default()),
        Box::new(DurableStateMonotonic::default()),
        Box::new(PersistedBeforeSent),
    ];
    let one_leader = match election {
        ElectionConfig::Raft(RaftConfig { quorum, .. }) => {
            matches!(quorum, QuorumMode::Voters(_))
        }
        ElectionConfig::Static(_) => true,
        ElectionConfig::Gossip(_) | ElectionConfig::Priority(_) => false,
    };
    if one_leader {
        invariants.push(Box::new(OneLeaderPerTerm::default()));
    }
    if matches!(
        election,
        ElectionConfig::Raft(RaftConfig {
            quorum: QuorumMode::Voters(_),
            log: Some(_),
            ..
        })
    ) {
        invariants.push(Box::new(ElectoratesIntersect::default()));
    }
    if matches!(
        election,
        ElectionConfig::Gossip(_) | ElectionConfig::Priority(_)
    ) {
        invariants.push(Box::new(FencingTokenMonotonic::default()));
        invariants.push(Box::new(TokenDeclaredByLeader::default()));
    }
    invariants
}
