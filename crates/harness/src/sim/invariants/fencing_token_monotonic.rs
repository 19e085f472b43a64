//! CB-5 in the modes that elect without a quorum (gossip's leadership epoch, GOS-6; priority's
//! round, PRI-6): the fencing token `(term, leader)` a node publishes never goes back, across
//! its restarts too. While the leader stays, the term stays or grows; a different leader comes
//! only with a higher term. This is the rule each core's docs state ("the token grows with
//! every change of leader on every node, across restarts too"), checked on the
//! `LeaderChanged` events actually published; "no leader" in between changes nothing.
//!
//! Two partitions may well take the same term with different leaders (neither mode has a
//! quorum), so the rule is per node, not across the cluster.

use std::collections::BTreeMap;

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, Simulation};
use crate::sim::invariants::Invariant;

/// Remembers the last token each node published.
#[derive(Debug, Default)]
pub struct FencingTokenMonotonic {
    last: BTreeMap<usize, (u64, PeerId)>,
}

impl Invariant for FencingTokenMonotonic {
    fn name(&self) -> &'static str {
        "fencing token monotonic"
    }

    fn check(&mut self, sim: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            let Observation::LeaderPublished {
                node,
                term,
                leader: Some(leader),
            } = observation
            else {
                continue;
            };
            if let Some(&(last_term, last_leader)) = self.last.get(node) {
                let grows = if *leader == last_leader {
                    *term >= last_term
                } else {
                    *term > last_term
                };
                if !grows {
                    return Err(format!(
                        "{} published the fencing token {term}:{leader} after {last_term}:{last_leader}",
                        sim.id(*node)
                    ));
                }
            }
            self.last.insert(*node, (*term, *leader));
        }
        Ok(())
    }
}
