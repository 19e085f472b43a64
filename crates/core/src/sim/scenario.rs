//! Randomized fault scenarios, one per seed, as `cargo test` and `CONCLAVE_SIM_SEEDS` run
//! them.
//!
//! Every seed picks a cluster size, the RAFT-7 switches (or, in static mode, the leader) and a
//! fault script, all from the seed: a chaos phase (crashes, crashes part-way through a node's
//! actions, graceful stops with their hand-over, restarts, partitions, isolated nodes, cut links, loss, duplication, long and reordering delays),
//! then — in `connected` mode — a stable partition whose every side must converge on one
//! leader, then healing: no more faults, every node restarted, and every live node must know
//! the same leader within a bound and keep it. Safety invariants are checked after every step
//! throughout. [`Scenario::WalLoss`] adds crashes that lose a node's whole WAL (WAL-2);
//! [`Scenario::Static`] runs the same chaos on static mode (STA-1), where the only leader is
//! the named node and every node must know it again once it is back.

use std::time::Duration;

use crate::rng::SeededRng;
use crate::sim::cluster::{SimConfig, SimFailure, Simulation};
use crate::sim::invariants::liveness::{await_agreed_leader, check_still_agreed};
use crate::sim::invariants::partition_convergence::check_partitions_converged;
use crate::sim::trace::TraceEntry;

/// Which family of randomized runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `voters` quorum, 1–5 nodes.
    Voters,
    /// `connected` quorum (seed 000's rooms), 2–5 nodes, with a stable partition phase.
    Connected,
    /// `voters` quorum, 3–5 nodes, whose chaos also crashes nodes losing their whole WAL, one
    /// node at a time (WAL-2): the one-vote-per-term invariant remembers every vote a node id
    /// cast, across the lost WAL too.
    WalLoss,
    /// Static mode (STA-1), 1–5 nodes, one of them named leader: nobody else ever leads, and
    /// once faults stop every node knows the named one.
    Static,
}

impl Scenario {
    /// The name used on the replay command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Voters => "voters",
            Scenario::Connected => "connected",
            Scenario::WalLoss => "wal-loss",
            Scenario::Static => "static",
        }
    }

    /// The scenario with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "voters" => Some(Scenario::Voters),
            "connected" => Some(Scenario::Connected),
            "wal-loss" => Some(Scenario::WalLoss),
            "static" => Some(Scenario::Static),
            _ => None,
        }
    }

    /// The command that replays `seed` of this scenario with its trace printed.
    pub fn replay_command(self, seed: u64) -> String {
        format!(
            "CONCLAVE_SIM_REPLAY={}:{seed} cargo test -p conclave-core --test simulation replay -- --ignored --nocapture",
            self.name()
        )
    }
}

/// Chaos lasts this long before healing.
const CHAOS: Duration = Duration::from_secs(3);
/// Bound on every convergence once faults stop; election timeouts are 150–300 ms, so this is
/// dozens of election rounds.
const CONVERGENCE_BOUND: Duration = Duration::from_secs(10);
/// After converging, the leader must stay the leader this long.
const SETTLE: Duration = Duration::from_secs(1);

/// What a passing seed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Cluster size.
    pub nodes: usize,
    /// Time from healing to a leader known by every node.
    pub convergence: Duration,
    /// Simulation steps.
    pub steps: u64,
    /// Messages sent.
    pub messages: u64,
    /// Digest of the run's events.
    pub digest: u64,
    /// Crashes that lost a node's whole WAL ([`Scenario::WalLoss`]).
    pub wal_losses: u64,
}

/// A finished run: its result and, when recording was asked for, its trace.
#[derive(Debug)]
pub struct SeedRun {
    /// Passed, or the first broken property.
    pub result: Result<SeedReport, SimFailure>,
    /// Every event of the run, when recorded.
    pub trace: Option<Vec<TraceEntry>>,
}

/// Runs one seed of `scenario`.
pub fn run_seed(scenario: Scenario, seed: u64, record_trace: bool) -> SeedRun {
    run_seed_with(scenario, seed, record_trace, true)
}

/// Runs one seed of [`Scenario::WalLoss`] with a node that lost its WAL voting at once, as it
/// did before abstention existed (WAL-2): the control run that shows the invariant can fail.
pub fn run_seed_without_abstention(seed: u64) -> SeedRun {
    run_seed_with(Scenario::WalLoss, seed, false, false)
}

fn run_seed_with(scenario: Scenario, seed: u64, record_trace: bool, abstain: bool) -> SeedRun {
    let mut plan = SeededRng::new(seed ^ 0x5ced_5ced_5ced_5ced);
    let sizes: &[usize] = match scenario {
        Scenario::Voters => &[1, 2, 3, 3, 4, 5, 5, 5],
        Scenario::Connected => &[2, 3, 3, 4, 5, 5],
        Scenario::WalLoss => &[3, 3, 3, 4, 5],
        Scenario::Static => &[1, 2, 3, 3, 4, 5],
    };
    let nodes = sizes[plan.below(sizes.len() as u64) as usize];
    let heartbeat = Duration::from_millis(50);
    let (min, max) = (Duration::from_millis(150), Duration::from_millis(300));
    let mut config = match scenario {
        Scenario::Voters | Scenario::WalLoss => SimConfig::voters(nodes, heartbeat, min, max),
        Scenario::Connected => SimConfig::connected(nodes, heartbeat, min, max),
        Scenario::Static => {
            let leader = plan.below(nodes as u64) as usize;
            SimConfig::static_leader(nodes, leader, heartbeat)
        }
    };
    if let Some(raft) = config.raft_mut() {
        raft.pre_vote = plan.chance(0.75);
        raft.check_quorum = plan.chance(0.75);
        raft.ranked_timeouts = plan.chance(0.5);
    }
    if let Some(membership) = &mut config.membership {
        membership.heartbeat_interval = Duration::from_millis(100);
    }
    config.record_trace = record_trace;

    let mut sim = match Simulation::new(seed, config) {
        Ok(sim) => sim,
        Err(err) => {
            return SeedRun {
                result: Err(SimFailure {
                    seed,
                    at: crate::Instant::ZERO,
                    invariant: "configuration",
                    detail: err.to_string(),
                    replay: Some(scenario.replay_command(seed)),
                }),
                trace: None,
            };
        }
    };
    sim.set_replay_hint(scenario.replay_command(seed));
    sim.set_abstain_after_wal_loss(abstain);
    let result = script(scenario, &mut sim, &mut plan).map(|convergence| SeedReport {
        seed,
        nodes,
        convergence,
        steps: sim.steps(),
        messages: sim.messages_sent(),
        digest: sim.digest(),
        wal_losses: sim.wal_losses(),
    });
    SeedRun {
        result,
        trace: sim.trace().map(<[TraceEntry]>::to_vec),
    }
}

fn script(
    scenario: Scenario,
    sim: &mut Simulation,
    plan: &mut SeededRng,
) -> Result<Duration, SimFailure> {
    if scenario == Scenario::WalLoss {
        chaos_with_wal_loss(sim, plan, CHAOS)?;
    } else {
        chaos(sim, plan, CHAOS)?;
    }
    if scenario == Scenario::Connected && sim.len() >= 2 {
        calm(sim)?;
        let groups = random_split(sim.len(), plan);
        sim.partition(groups);
        check_partitions_converged(sim, CONVERGENCE_BOUND)?;
        // A few more rounds so both sides have settled their terms before they meet.
        sim.run_for(Duration::from_millis(plan.between(0, 500)))?;
    }
    calm(sim)?;
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    check_still_agreed(sim, SETTLE)?;
    Ok(convergence)
}

/// Faults at random moments for `duration`.
fn chaos(sim: &mut Simulation, plan: &mut SeededRng, duration: Duration) -> Result<(), SimFailure> {
    let end = sim.now() + duration;
    sim.set_crash_mid_step(0.002);
    loop {
        let next = sim.now() + Duration::from_millis(plan.between(20, 600));
        if next >= end {
            sim.run_until(end)?;
            return Ok(());
        }
        sim.run_until(next)?;
        inject_fault(sim, plan)?;
    }
}

/// [`chaos`] with crashes that lose a node's whole WAL among the faults. Only one node at a
/// time is without its WAL (lost, or abstaining since): the abstention's guarantee rests on
/// the other voters' memories. A node that voted for someone else is the likeliest victim,
/// since a forgotten vote is what abstention protects.
fn chaos_with_wal_loss(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    duration: Duration,
) -> Result<(), SimFailure> {
    let end = sim.now() + duration;
    sim.set_crash_mid_step(0.002);
    loop {
        let next = sim.now() + Duration::from_millis(plan.between(20, 300));
        if next >= end {
            sim.run_until(end)?;
            return Ok(());
        }
        sim.run_until(next)?;
        let n = sim.len();
        let lost = (0..n).find(|&i| sim.is_amnesic(i));
        match lost {
            Some(index) if !sim.is_alive(index) => {
                if plan.chance(0.5) {
                    sim.restart(index);
                }
            }
            Some(_) => inject_fault(sim, plan)?,
            None if plan.chance(0.4) => {
                let alive = sim.alive();
                let voted_for_another: Vec<usize> = alive
                    .iter()
                    .copied()
                    .filter(|&i| {
                        sim.raft(i)
                            .and_then(|raft| raft.hard_state().vote)
                            .is_some_and(|vote| vote != sim.id(i))
                    })
                    .collect();
                let pool = if voted_for_another.is_empty() {
                    alive
                } else {
                    voted_for_another
                };
                if !pool.is_empty() {
                    sim.crash_losing_wal(pool[plan.below(pool.len() as u64) as usize]);
                }
            }
            None => inject_fault(sim, plan)?,
        }
    }
}

fn inject_fault(sim: &mut Simulation, plan: &mut SeededRng) -> Result<(), SimFailure> {
    let n = sim.len();
    match plan.below(11) {
        0 | 1 => {
            let alive = sim.alive();
            if !alive.is_empty() {
                sim.crash(alive[plan.below(alive.len() as u64) as usize]);
            }
        }
        2 | 3 => {
            let crashed: Vec<usize> = (0..n).filter(|&i| !sim.is_alive(i)).collect();
            if !crashed.is_empty() {
                sim.restart(crashed[plan.below(crashed.len() as u64) as usize]);
            }
        }
        4 => {
            let groups = random_split(n, plan);
            sim.partition(groups);
        }
        5 => sim.isolate(plan.below(n as u64) as usize),
        6 => sim.heal(),
        7 => {
            let loss = plan.below(30) as f64 / 100.0;
            let duplicate = plan.below(20) as f64 / 100.0;
            sim.set_loss(loss);
            sim.set_duplicate(duplicate);
        }
        8 => {
            if n >= 2 {
                let from = plan.below(n as u64) as usize;
                let to = (from + 1 + plan.below(n as u64 - 1) as usize) % n;
                sim.cut(from, to);
            }
        }
        9 => {
            if plan.chance(0.5) {
                // Long and widely spread delays reorder messages heavily.
                sim.set_delay(Duration::from_millis(1), Duration::from_millis(40));
            } else {
                sim.set_delay(Duration::from_micros(500), Duration::from_millis(5));
            }
        }
        _ => {
            // A graceful stop, of the leader when there is one: its hand-over runs amid
            // whatever else goes wrong (CB-2).
            let leaders = sim.leaders();
            let pool = if leaders.is_empty() {
                sim.alive()
            } else {
                leaders
            };
            if !pool.is_empty() {
                sim.stop_gracefully(pool[plan.below(pool.len() as u64) as usize])?;
            }
        }
    }
    Ok(())
}

/// Stops every fault: healed network, no loss, nominal delays, every node running (a node
/// still handing over from a graceful stop finishes stopping first, then starts again).
fn calm(sim: &mut Simulation) -> Result<(), SimFailure> {
    for index in 0..sim.len() {
        if sim.is_stopping(index) {
            sim.stop_gracefully(index)?;
        }
    }
    sim.set_crash_mid_step(0.0);
    sim.heal();
    sim.set_loss(0.0);
    sim.set_duplicate(0.0);
    sim.set_delay(Duration::from_micros(500), Duration::from_millis(5));
    for index in 0..sim.len() {
        sim.restart(index);
    }
    Ok(())
}

/// Two non-empty sides (for two or more nodes).
fn random_split(n: usize, plan: &mut SeededRng) -> Vec<u32> {
    loop {
        let groups: Vec<u32> = (0..n).map(|_| plan.below(2) as u32).collect();
        let ones = groups.iter().filter(|&&g| g == 1).count();
        if n < 2 || (ones > 0 && ones < n) {
            return groups;
        }
    }
}

/// Seeds to run: `CONCLAVE_SIM_SEEDS` when set to a number, else `default`.
pub fn seed_count(default: u64) -> u64 {
    std::env::var("CONCLAVE_SIM_SEEDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(default)
}
