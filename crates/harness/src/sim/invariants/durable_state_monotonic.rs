//! RAFT-1, WAL-2: what a node persisted only moves forward. Its term never decreases, and
//! within one term its vote, once given, never changes — so after any restart it cannot vote
//! again in a term it already voted in. A node whose WAL was lost starts over; that it still
//! casts no second vote is what [`OneVotePerTerm`](super::OneVotePerTerm) checks.

use std::collections::BTreeMap;

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, Simulation};
use crate::sim::invariants::Invariant;
use conclave_core::election::HardState;

/// Remembers each node's last persisted hard state.
#[derive(Debug, Default)]
pub struct DurableStateMonotonic {
    last: BTreeMap<PeerId, HardState>,
}

impl Invariant for DurableStateMonotonic {
    fn name(&self) -> &'static str {
        "durable state monotonic"
    }

    fn check(&mut self, _: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            let (node, state) = match observation {
                Observation::Persisted { node, state } => (node, state),
                Observation::WalLost { node } => {
                    self.last.remove(node);
                    continue;
                }
                Observation::Sent { .. }
                | Observation::Declared { .. }
                | Observation::LeaderPublished { .. }
                | Observation::Applied { .. }
                | Observation::Dropped { .. }
                | Observation::ReachabilityOvertaken { .. } => continue,
            };
            if let Some(previous) = self.last.get(node) {
                if state.term < previous.term {
                    return Err(format!(
                        "{node} persisted term {} after term {}",
                        state.term, previous.term
                    ));
                }
                if state.term == previous.term
                    && previous.vote.is_some()
                    && state.vote != previous.vote
                {
                    return Err(format!(
                        "{node} changed its persisted vote in term {} from {:?} to {:?}",
                        state.term, previous.vote, state.vote
                    ));
                }
            }
            self.last.insert(*node, *state);
        }
        Ok(())
    }
}
