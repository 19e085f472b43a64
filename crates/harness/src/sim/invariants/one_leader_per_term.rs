//! RAFT-6 (`voters` mode), Raft §5.2 Election Safety: at most one leader can be elected in a
//! given term, across the whole run.

use std::collections::BTreeMap;

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, Simulation};
use crate::sim::invariants::Invariant;
use conclave_core::election::Role;

/// Remembers who led each term and fails when a second node leads the same term.
#[derive(Debug, Default)]
pub struct OneLeaderPerTerm {
    leaders: BTreeMap<u64, PeerId>,
}

impl Invariant for OneLeaderPerTerm {
    fn name(&self) -> &'static str {
        "one leader per term"
    }

    fn check(&mut self, sim: &Simulation, _: &[Observation]) -> Result<(), String> {
        for index in sim.alive() {
            // Any mode's election: static mode is held to this rule as well as raft's `voters`.
            let Some(election) = sim.election(index) else {
                continue;
            };
            if election.role() != Role::Leader {
                continue;
            }
            let id = election.id();
            let first = *self.leaders.entry(election.term()).or_insert(id);
            if first != id {
                return Err(format!(
                    "{first} and {id} both led term {}",
                    election.term()
                ));
            }
        }
        Ok(())
    }
}
