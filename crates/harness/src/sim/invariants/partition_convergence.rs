//! RAFT-6 `connected` mode: every side of a stable partition converges to exactly one leader
//! that all its members know (seed 000's room semantics), within a bounded virtual time.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::sim::cluster::{SimFailure, Simulation};
use crate::sim::invariants::liveness::describe;

/// The live nodes of each partition group.
pub fn live_groups(sim: &Simulation) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for index in sim.alive() {
        groups.entry(sim.group_of(index)).or_default().push(index);
    }
    groups.into_values().collect()
}

/// Runs until every side of the current partition has one leader known by all its members,
/// or fails after `bound`. Returns how long it took.
pub fn check_partitions_converged(
    sim: &mut Simulation,
    bound: Duration,
) -> Result<Duration, SimFailure> {
    let start = sim.now();
    let reached = sim.run_until_condition(start + bound, |sim| {
        live_groups(sim).iter().all(|group| {
            sim.agreed_leader(group).is_some()
                && group
                    .iter()
                    .filter(|&&i| sim.election(i).is_some_and(|e| e.is_leader()))
                    .count()
                    == 1
        })
    })?;
    match reached {
        Some(at) => Ok(at - start),
        None => Err(sim.failure(
            "partition convergence",
            format!(
                "a side of the partition {:?} has no single agreed leader after {bound:?}; {}",
                live_groups(sim)
                    .iter()
                    .map(|g| g.iter().map(|&i| sim.id(i).to_string()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                describe(sim)
            ),
        )),
    }
}
