//! Randomized simulation of whole clusters (docs/design.md §10): thousands of seeds in `cargo test`,
//! more with `CONCLAVE_SIM_SEEDS=N`; every failure prints its seed and the command that
//! replays it.

use conclave_harness::sim::{Scenario, SeedReport, run_seed, run_seeds_reporting, seed_count};

/// Seeds per scenario in a plain `cargo test`: 6,000 in all, a few seconds on two cores.
const DEFAULT_VOTERS_SEEDS: u64 = 2000;
const DEFAULT_CONNECTED_SEEDS: u64 = 2000;
const DEFAULT_STATIC_SEEDS: u64 = 2000;

fn run_many(scenario: Scenario, seeds: u64) -> Vec<SeedReport> {
    run_seeds_reporting(scenario, seeds, "convergence after healing")
}

/// RAFT-1..7 in `voters` mode under crashes, partial crashes, partitions, loss, duplication
/// and reordering: one leader per term, one vote per term, monotonic durable state, and a
/// leader known by all once faults stop.
#[test]
fn simulated_seeds_voters_mode() {
    let reports = run_many(Scenario::Voters, seed_count(DEFAULT_VOTERS_SEEDS));
    assert!(!reports.is_empty());
}

/// RAFT-6 `connected` mode: every side of a partition converges to one leader; after healing
/// exactly one leader remains.
#[test]
fn simulated_seeds_connected_mode() {
    let reports = run_many(Scenario::Connected, seed_count(DEFAULT_CONNECTED_SEEDS));
    assert!(!reports.is_empty());
}

/// STA-1 in static mode under the same faults: nobody but the named node ever leads (one
/// leader per term), durable state never goes back, and once faults stop every live node
/// knows the named leader and keeps it.
#[test]
fn simulated_seeds_static_mode() {
    let reports = run_many(Scenario::Static, seed_count(DEFAULT_STATIC_SEEDS));
    assert!(!reports.is_empty());
}

/// Replays one seed with its full trace: `CONCLAVE_SIM_REPLAY=voters:1234`.
#[test]
#[ignore = "a tool: run with CONCLAVE_SIM_REPLAY=<scenario>:<seed>"]
fn replay() {
    let spec = std::env::var("CONCLAVE_SIM_REPLAY")
        .expect("set CONCLAVE_SIM_REPLAY=<voters|connected|wal-loss|static>:<seed>");
    let (name, seed) = spec.split_once(':').expect("format is <scenario>:<seed>");
    let scenario =
        Scenario::from_name(name).expect("scenario is voters, connected, wal-loss or static");
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

/// A printed seed reproduces the same run: two runs of one seed give identical traces, and
/// another seed gives a different one.
#[test]
fn same_seed_same_trace() {
    for scenario in [Scenario::Voters, Scenario::Connected, Scenario::Static] {
        let first = run_seed(scenario, 4242, true);
        let second = run_seed(scenario, 4242, true);
        let other = run_seed(scenario, 4243, true);
        let (first_trace, second_trace) = (first.trace.unwrap(), second.trace.unwrap());
        assert!(first_trace.len() > 50, "a run publishes many events");
        assert_eq!(first_trace, second_trace);
        assert_eq!(first.result, second.result);
        assert_ne!(first_trace, other.trace.unwrap());
    }
}
