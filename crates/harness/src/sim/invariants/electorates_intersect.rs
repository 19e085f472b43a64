//! MEMB-1 (Raft dissertation §4.1): however the configuration changes, no two disjoint sets of
//! nodes can each elect a leader in one term. When a node takes office, the voters whose votes
//! elected it must be a majority of the voters it counted (its configuration at the win), and
//! any two elections of one term must share a voter.

use std::collections::{BTreeMap, BTreeSet};

use conclave_protocol::PeerId;

use crate::sim::cluster::{Observation, Simulation};
use crate::sim::invariants::Invariant;

/// Remembers, per term, who won with which voters' votes.
#[derive(Debug, Default)]
pub struct ElectoratesIntersect {
    winners: BTreeMap<u64, Vec<(PeerId, BTreeSet<PeerId>)>>,
}

impl Invariant for ElectoratesIntersect {
    fn name(&self) -> &'static str {
        "electorates intersect"
    }

    fn check(&mut self, sim: &Simulation, _: &[Observation]) -> Result<(), String> {
        for index in sim.alive() {
            let Some(raft) = sim.raft(index) else {
                continue;
            };
            let Some(electors) = raft.electors() else {
                continue;
            };
            let (term, id) = (raft.term(), raft.id());
            let winners = self.winners.entry(term).or_default();
            if winners.iter().any(|(winner, _)| *winner == id) {
                continue;
            }
            // Checked at the win: the configuration may change while it leads.
            let voters = raft
                .configuration()
                .map(|config| config.voters)
                .unwrap_or_default();
            if electors.len() * 2 <= voters.len() || !electors.is_subset(&voters) {
                return Err(format!(
                    "{id} took office in term {term} with the votes of {electors:?}, not a \
                     majority of its voters {voters:?}"
                ));
            }
            if let Some((other, theirs)) = winners
                .iter()
                .find(|(_, theirs)| theirs.is_disjoint(electors))
            {
                return Err(format!(
                    "{other} (votes of {theirs:?}) and {id} (votes of {electors:?}) were both \
                     elected in term {term} by disjoint sets of voters"
                ));
            }
            winners.push((id, electors.clone()));
        }
        Ok(())
    }
}
