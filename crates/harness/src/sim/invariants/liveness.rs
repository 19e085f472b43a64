//! RAFT-2..4 liveness: once faults stop, every live node knows the same leader within a
//! bounded virtual time, and it stays that way.

use std::time::Duration;

use crate::sim::cluster::{SimFailure, Simulation};

/// Runs until every live node names the same live leader of the same term, or fails after
/// `bound`. Returns how long it took.
pub fn await_agreed_leader(sim: &mut Simulation, bound: Duration) -> Result<Duration, SimFailure> {
    let start = sim.now();
    let deadline = start + bound;
    let reached = sim.run_until_condition(deadline, |sim| {
        let alive = sim.alive();
        !alive.is_empty() && sim.agreed_leader(&alive).is_some()
    })?;
    match reached {
        Some(at) => Ok(at - start),
        None => Err(sim.failure(
            "liveness",
            format!(
                "no leader known by all live nodes within {bound:?} after faults stopped; {}",
                describe(sim)
            ),
        )),
    }
}

/// Runs for `settle` and checks the agreed leader is still agreed at the end: exactly one
/// leader remains.
pub fn check_still_agreed(sim: &mut Simulation, settle: Duration) -> Result<usize, SimFailure> {
    sim.run_for(settle)?;
    let alive = sim.alive();
    let leaders = sim.leaders();
    match sim.agreed_leader(&alive) {
        Some(leader) if leaders == [leader] => Ok(leader),
        _ => Err(sim.failure(
            "liveness",
            format!(
                "leadership did not stay settled for {settle:?}; {}",
                describe(sim)
            ),
        )),
    }
}

/// One line per node: role, term and known leader.
pub fn describe(sim: &Simulation) -> String {
    (0..sim.len())
        .map(|i| match sim.election(i) {
            Some(election) => {
                let mut line = format!(
                    "{}: {} ({}) term {} leader {}",
                    sim.id(i),
                    election.role(),
                    election.phase(),
                    election.term(),
                    election.leader().map_or("-".to_owned(), |l| l.to_string())
                );
                if election.is_abstaining() {
                    line.push_str(" abstaining");
                }
                if let Some(raft) = sim.raft(i) {
                    if raft.config().log.is_some() {
                        let last = raft.log_last();
                        line.push_str(&format!(" log {}:{}", last.term, last.index));
                        if raft.is_catching_up() {
                            line.push_str(" catching up");
                        }
                    }
                }
                line
            }
            None => format!("{}: crashed", sim.id(i)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
