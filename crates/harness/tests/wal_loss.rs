//! WAL-2 and WAL-5 in the simulator: nodes crash and lose their whole WAL (one at a time) in
//! the middle of randomized chaos — crashes, partial crashes, partitions, loss, duplication,
//! reordering — and come back with no term and no vote, in a full cluster and in one with a
//! voter down throughout. The one-vote-per-term invariant remembers every vote a node id ever
//! cast, across the lost WAL too, and is checked after every step. With abstention no seed
//! breaks it; the control run, with abstention switched off, must find a double vote, which
//! shows the guarded run can fail. A new cluster — every node's WAL starting with its genesis
//! record, as `conclave init` or `cluster.initial_state = "new"` write it — elects with a
//! voter never started, where nodes that start without a WAL do not. `CONCLAVE_SIM_SEEDS=N`
//! runs more seeds; a failure prints the command that replays it.

use std::io::Write;

use std::time::Duration;

use conclave_harness::sim::{
    Scenario, SimConfig, Simulation, run_seed, run_seed_restarting_wiped_as_new_cluster,
    run_seed_without_abstention, seed_count,
};

/// Seeds in a plain `cargo test`: a few seconds on two cores.
const DEFAULT_SEEDS: u64 = 2000;
/// The control run stops at its first double vote; it must find one within this many seeds.
const CONTROL_SEEDS: u64 = 300;

/// Runs seeds `0..seeds` of `scenario`, panicking with the replay command of the first that
/// fails; how many crashes lost a whole WAL.
fn run_family(scenario: Scenario, seeds: u64) -> u64 {
    let (mut losses, mut steps) = (0, 0);
    for seed in 0..seeds {
        match run_seed(scenario, seed, false).result {
            Ok(report) => {
                losses += report.wal_losses;
                steps += report.steps;
            }
            Err(failure) => panic!("simulation seed failed: {failure}"),
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "simulated {seeds} seeds ({}): {losses} crashes lost a whole WAL; every invariant \
         held after each of {steps} steps",
        scenario.name()
    );
    losses
}

/// WAL-2, RAFT-1, RAFT-5: a node that lost its WAL never grants a second vote in a term, one
/// leader per term holds, and the cluster still converges on one leader once faults stop
/// (every abstention ends once its node has heard the others).
#[test]
fn wal2_simulated_wal_loss_never_votes_twice() {
    let seeds = seed_count(DEFAULT_SEEDS);
    let losses = run_family(Scenario::WalLoss, seeds);
    assert!(
        losses > seeds,
        "the scenario loses WALs: {losses} in {seeds} seeds"
    );
}

/// Issue 24 item 2, WAL-5: a node whose whole data directory was lost, restarted with
/// `cluster.initial_state = "new"` still set, asks the voters before it takes part; in the
/// same chaos, with a voter down throughout too, it never grants a second vote in a term.
#[test]
fn wal5_wiped_node_restarted_as_new_cluster_never_votes_twice() {
    for (scenario, seeds) in [
        (Scenario::WalLoss, seed_count(DEFAULT_SEEDS)),
        (Scenario::WalLossVoterDown, seed_count(VOTER_DOWN_SEEDS)),
    ] {
        let mut losses = 0;
        for seed in 0..seeds {
            match run_seed_restarting_wiped_as_new_cluster(scenario, seed).result {
                Ok(report) => losses += report.wal_losses,
                Err(failure) => panic!("simulation seed failed: {failure}"),
            }
        }
        assert!(
            losses > seeds / 2,
            "the scenario loses data directories: {losses} in {seeds} seeds"
        );
    }
}

/// The control: the same scenario with abstention switched off lets a node that lost its WAL
/// vote at once, and the invariant catches a second vote in a term it had voted in.
#[test]
fn wal2_control_without_abstention_finds_a_double_vote() {
    let found = (0..CONTROL_SEEDS).find_map(|seed| {
        run_seed_without_abstention(seed)
            .result
            .err()
            .filter(|failure| failure.invariant == "one vote per term")
    });
    let failure = found.unwrap_or_else(|| {
        panic!("no double vote in {CONTROL_SEEDS} seeds without abstention: the test is blind")
    });
    let _ = writeln!(std::io::stderr(), "control without abstention: {failure}");
}

/// Seeds of the voter-down family in a plain `cargo test`.
const VOTER_DOWN_SEEDS: u64 = 1000;

/// WAL-5, WAL-2: with one voter down from the start to the end, a node that lost its WAL
/// still never grants a second vote in a term, and — with four or five voters — the live
/// nodes, the one that lost its WAL among them, agree on a leader without the missing voter:
/// its abstention ends on a settled majority of the voters instead of waiting for the one
/// that never answers. (Before WAL-5 the abstention waited for every voter, and the live
/// nodes of four, one of them abstaining, never agreed.)
#[test]
fn wal5_wal_loss_with_a_voter_down_never_votes_twice_and_converges() {
    let seeds = seed_count(VOTER_DOWN_SEEDS);
    let losses = run_family(Scenario::WalLossVoterDown, seeds);
    assert!(
        losses > seeds / 2,
        "the scenario loses WALs: {losses} in {seeds} seeds"
    );
}

/// A three-voter simulation in which node `never` is down from the first instant, and every
/// other node starts either from its genesis record (`genesis`) or without any WAL.
fn new_cluster(seed: u64, never: usize, genesis: bool) -> Simulation {
    let config = SimConfig::voters(
        3,
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    let mut sim = Simulation::new(seed, config).expect("valid simulation");
    sim.crash(never);
    if !genesis {
        for index in (0..3).filter(|&index| index != never) {
            sim.crash_losing_wal(index);
            sim.restart(index);
        }
    }
    sim
}

/// WAL-5: a new three-voter cluster whose third voter is never started elects a leader when
/// its nodes start from a genesis record (a durable "never voted"); started without one, as
/// before WAL-5, the two abstain for good waiting for the third.
#[test]
fn wal5_new_cluster_with_a_voter_never_started_elects_from_genesis() {
    for seed in 0..50 {
        let never = (seed % 3) as usize;
        let mut sim = new_cluster(seed, never, true);
        sim.run_for(Duration::from_secs(5))
            .unwrap_or_else(|failure| panic!("{failure}"));
        let alive = sim.alive();
        assert_eq!(alive.len(), 2);
        assert!(
            sim.agreed_leader(&alive).is_some(),
            "seed {seed}: no leader agreed by the two started voters"
        );

        let mut without = new_cluster(seed, never, false);
        without
            .run_for(Duration::from_secs(5))
            .unwrap_or_else(|failure| panic!("{failure}"));
        assert!(
            without.leaders().is_empty(),
            "seed {seed}: nodes without a WAL elected without hearing every voter"
        );
    }
}
