//! Adaptive failure detection (RAFT-2, RAFT-7) in the simulator: every node suspects its
//! leader by what the link has shown rather than after a fixed timeout, and its leader lease
//! shrinks with that suspicion. Through randomized chaos and then on a link that stays lossy
//! and jittery while the leader is killed again and again, one leader per term, one vote per
//! term and every other safety invariant hold after every step, and each kill is followed by
//! a new leader known by every live node. `CONCLAVE_SIM_SEEDS=N` runs more seeds; a failure
//! prints the command that replays it.

use std::time::Duration;

use conclave_harness::sim::invariants::liveness::await_agreed_leader;
use conclave_harness::sim::{
    Scenario, SimConfig, Simulation, run_seed, run_seeds_reporting, seed_count,
};

/// Seeds in a plain `cargo test`; `CONCLAVE_SIM_SEEDS=2000` (or more) for a long run.
const DEFAULT_SEEDS: u64 = 500;

/// RAFT-2, RAFT-7, RAFT-5, RAFT-6: with adaptive detection on, the safety invariants hold
/// under chaos and on a lossy, jittery link, and elections still follow the leader's death.
#[test]
fn adaptive_detection_keeps_safety_and_elects_on_lossy_links() {
    let reports = run_seeds_reporting(
        Scenario::AdaptiveLossy,
        seed_count(DEFAULT_SEEDS),
        "failover after a kill on the lossy link",
    );
    assert!(!reports.is_empty());
}

/// How long after the leader of a settled three-node cluster is killed, on a steady link,
/// the first survivor starts campaigning (heartbeat 50 ms, election timeout 150–300 ms, with
/// adaptive detection a floor of 125 ms).
fn first_campaign_after_kill(seed: u64, adaptive: bool) -> Duration {
    let ms = Duration::from_millis;
    let mut config = SimConfig::voters(3, ms(50), ms(150), ms(300));
    if let Some(raft) = config.raft_mut() {
        raft.adaptive_timeout = adaptive;
        raft.suspicion_floor = Some(ms(125));
    }
    let mut sim = Simulation::new(seed, config).expect("valid settings");
    await_agreed_leader(&mut sim, Duration::from_secs(10)).expect("a first leader");
    // Two seconds of heartbeats to learn the link from, the kill anywhere in the rhythm.
    sim.run_for(ms(2000 + seed % 50)).expect("a steady cluster");
    let leader = sim.leaders()[0];
    sim.crash(leader);
    let killed = sim.now();
    let campaigning = sim
        .run_until_condition(killed + ms(1000), |sim| {
            sim.alive().into_iter().any(|node| {
                sim.election(node)
                    .is_some_and(|election| election.phase() != "follower")
            })
        })
        .expect("no invariant broken")
        .expect("a survivor campaigns within a second");
    campaigning - killed
}

/// RAFT-2: on a steady link the survivors of a killed leader campaign sooner with adaptive
/// detection than with the fixed minimum, seed for seed, and never later than the fixed
/// minimum after the kill. The fixed runs are the control: their campaigns come later.
#[test]
fn adaptive_detection_campaigns_sooner_after_a_kill_on_a_steady_link() {
    for seed in 0..20 {
        let fixed = first_campaign_after_kill(seed, false);
        let adaptive = first_campaign_after_kill(seed, true);
        assert!(
            adaptive < fixed,
            "seed {seed}: adaptive {adaptive:?}, fixed {fixed:?}"
        );
        assert!(
            adaptive < Duration::from_millis(150),
            "seed {seed}: {adaptive:?}"
        );
    }
}

/// Replays one seed with its full trace: `CONCLAVE_SIM_REPLAY=adaptive-lossy:1234`.
#[test]
#[ignore = "a tool: run with CONCLAVE_SIM_REPLAY=adaptive-lossy:<seed>"]
fn replay() {
    let spec = std::env::var("CONCLAVE_SIM_REPLAY")
        .expect("set CONCLAVE_SIM_REPLAY=adaptive-lossy:<seed>");
    let (name, seed) = spec.split_once(':').expect("format is <scenario>:<seed>");
    let scenario = Scenario::from_name(name).expect("scenario is adaptive-lossy");
    let seed: u64 = seed.parse().expect("seed is a number");
    let run = run_seed(scenario, seed, true);
    for entry in run.trace.unwrap_or_default() {
        println!("{entry}");
    }
    match run.result {
        Ok(report) => println!("passed: {report:?}"),
        Err(failure) => panic!("{failure}"),
    }
}
