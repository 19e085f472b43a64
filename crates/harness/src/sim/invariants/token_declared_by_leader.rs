//! CB-5 in gossip and priority mode: a node names a leader only with a term that leader
//! claimed itself on the wire — a gossip `Declaration` of that epoch, a priority
//! `MasterAnnounce` of that round. A follower never makes up a token, re-labels a leader
//! with someone else's term, or keeps a token from hearsay that the leader never held, so
//! every token in the cluster is one leader's own (two leaders may hold the same term on two
//! sides of a partition, each with its own id).

use std::collections::BTreeSet;

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, Simulation};
use crate::sim::invariants::Invariant;

/// Remembers every `(term, leader)` claimed on the wire.
#[derive(Debug, Default)]
pub struct TokenDeclaredByLeader {
    claimed: BTreeSet<(u64, PeerId)>,
}

impl Invariant for TokenDeclaredByLeader {
    fn name(&self) -> &'static str {
        "token declared by its leader"
    }

    fn check(&mut self, sim: &Simulation, observations: &[Observation]) -> Result<(), String> {
        // Claims first: a claim and a follower's adoption can fall in one step only in that
        // order (a claim is sent before anyone can hear it).
        for observation in observations {
            if let Observation::Declared { node, term } = observation {
                self.claimed.insert((*term, sim.id(*node)));
            }
        }
        for observation in observations {
            let Observation::LeaderPublished {
                node,
                term,
                leader: Some(leader),
            } = observation
            else {
                continue;
            };
            if *leader == sim.id(*node) {
                continue;
            }
            if !self.claimed.contains(&(*term, *leader)) {
                return Err(format!(
                    "{} follows {leader} at term {term}, which {leader} never declared",
                    sim.id(*node)
                ));
            }
        }
        Ok(())
    }
}
