//! The sessions family's script (SESS-0..2, [`Scenario::Sessions`]): 3 to 5 nodes on raft's
//! replicated log, each applying the entries to the built-in state machine and running the
//! leader's lease clock, with holders that grant sessions and keep them alive (see
//! `cluster/sessions.rs` for the model and the invariants, checked at every proposal and
//! apply). After a calm first second the chaos kills leaders, isolates them, partitions the
//! rest, cuts links, loses and duplicates messages and delays them; keepalives are lost on
//! top of that at a rate drawn per seed. Then faults stop, every node restarts, a leader
//! must be agreed, and the run goes on for a few TTLs, so that dead holders' sessions expire
//! and live ones outlive the failovers.

use std::time::Duration;

use conclave_core::SeededRng;
use conclave_core::raft::LogConfig;

use crate::sim::cluster::{SessionControl, SimConfig, SimFailure, Simulation};
use crate::sim::invariants::liveness::await_agreed_leader;
use crate::sim::scenario::{CONVERGENCE_BOUND, Scenario, SeedRun, calm, inject_fault};

/// The chaos lasts this long, after a calm first second.
const SESSIONS_CHAOS: Duration = Duration::from_millis(2_500);
/// After faults stop and a leader is agreed, the run goes on this long: more than a TTL, so
/// that what the chaos left to expire does.
const SESSIONS_AFTER: Duration = Duration::from_millis(2_000);

/// Runs one seed of the sessions family, with `control`'s safeguard switched off (or none).
pub fn run_sessions_seed(seed: u64, record_trace: bool, control: SessionControl) -> SeedRun {
    run_sessions_seed_with(seed, record_trace, control, true)
}

/// [`run_sessions_seed`] without invariant 1 (a), the proposer's view: a control of
/// invariant 1 must then be found from the holder's view, (b).
pub fn run_sessions_seed_checking_holders_only(seed: u64, control: SessionControl) -> SeedRun {
    run_sessions_seed_with(seed, false, control, false)
}

fn run_sessions_seed_with(
    seed: u64,
    record_trace: bool,
    control: SessionControl,
    proposer_check: bool,
) -> SeedRun {
    let mut plan = SeededRng::new(seed ^ 0x5e55_1045_5e55_1045);
    let sizes = [3, 3, 4, 5];
    let nodes = sizes[plan.below(sizes.len() as u64) as usize];
    let mut config = SimConfig::voters(
        nodes,
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    if let Some(raft) = config.raft_mut() {
        raft.log = Some(LogConfig {
            max_append_entries: 1 + plan.below(16) as usize,
            max_inflight: 1 + plan.below(8) as usize,
            // No raft snapshots: a replica that restarts without its saved state machine
            // applies the log from the start.
            snapshot_entries: 0,
            shared_acks: false,
            ..LogConfig::default()
        });
        raft.pre_vote = plan.chance(0.75);
        // A node's default; a deposed leader that cannot hear the majority steps down.
        raft.check_quorum = true;
    }
    // Without membership (voters mode elects without it): its traffic would be most of the
    // steps, and sessions do not depend on it.
    config.membership = None;
    config.disk_delay = Duration::from_millis(plan.between(0, 10));
    config.record_trace = record_trace;
    let scenario = Scenario::Sessions;
    let mut sim = match Simulation::new(seed, config) {
        Ok(sim) => sim,
        Err(err) => return SeedRun::refused(seed, err, scenario.replay_command(seed)),
    };
    sim.set_replay_hint(scenario.replay_command(seed));
    let holders = plan.between(4, 9) as usize;
    sim.enable_sessions(holders, SESSIONS_CHAOS, control);
    sim.set_session_proposer_check(proposer_check);
    let outcome = sessions_script(&mut sim, &mut plan);
    SeedRun::of(&sim, seed, nodes, outcome)
}

/// The faults, then calm and an agreed leader, then a few TTLs more.
fn sessions_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    sim.run_for(Duration::from_millis(500))?;
    let end = sim.now() + SESSIONS_CHAOS;
    sim.set_crash_mid_step(0.002);
    loop {
        let next = sim.now() + Duration::from_millis(plan.between(150, 900));
        if next >= end {
            sim.run_until(end)?;
            break;
        }
        sim.run_until(next)?;
        leader_fault(sim, plan)?;
    }
    calm(sim)?;
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    sim.run_for(SESSIONS_AFTER)?;
    Ok(convergence)
}

/// One fault: the leader killed or isolated more often than not, else any of the chaos's.
fn leader_fault(sim: &mut Simulation, plan: &mut SeededRng) -> Result<(), SimFailure> {
    let leaders = sim.leaders();
    let leader = (!leaders.is_empty()).then(|| leaders[plan.below(leaders.len() as u64) as usize]);
    match (plan.below(5), leader) {
        (0, Some(leader)) => sim.crash(leader),
        (1, Some(leader)) => sim.isolate(leader),
        (2, _) => {
            let crashed: Vec<usize> = (0..sim.len()).filter(|&i| !sim.is_alive(i)).collect();
            if !crashed.is_empty() {
                sim.restart(crashed[plan.below(crashed.len() as u64) as usize]);
            }
        }
        _ => inject_fault(sim, plan)?,
    }
    Ok(())
}
