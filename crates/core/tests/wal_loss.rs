//! WAL-2 in the simulator: nodes crash and lose their whole WAL (one at a time) in the middle of
//! randomized chaos — crashes, partial crashes, partitions, loss, duplication, reordering —
//! and come back with no term and no vote. The one-vote-per-term invariant remembers every
//! vote a node id ever cast, across the lost WAL too, and is checked after every step. With
//! abstention no seed breaks it; the control run, with abstention switched off, must find a
//! double vote, which shows the guarded run can fail. `CONCLAVE_SIM_SEEDS=N` runs more seeds;
//! a failure prints the command that replays it.

use std::io::Write;

use conclave_core::sim::{Scenario, run_seed, run_seed_without_abstention, seed_count};

/// Seeds in a plain `cargo test`: a few seconds on two cores.
const DEFAULT_SEEDS: u64 = 1500;
/// The control run stops at its first double vote; it must find one within this many seeds.
const CONTROL_SEEDS: u64 = 300;

/// WAL-2, RAFT-1, RAFT-5: a node that lost its WAL never grants a second vote in a term, one
/// leader per term holds, and the cluster still converges on one leader once faults stop
/// (every abstention ends once its node has heard the others).
#[test]
fn wal2_simulated_wal_loss_never_votes_twice() {
    let seeds = seed_count(DEFAULT_SEEDS);
    let (mut losses, mut steps) = (0, 0);
    for seed in 0..seeds {
        match run_seed(Scenario::WalLoss, seed, false).result {
            Ok(report) => {
                losses += report.wal_losses;
                steps += report.steps;
            }
            Err(failure) => panic!("simulation seed failed: {failure}"),
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "simulated {seeds} seeds (wal-loss): {losses} crashes lost a whole WAL; every \
         invariant held after each of {steps} steps"
    );
    assert!(
        losses > seeds,
        "the scenario loses WALs: {losses} in {seeds} seeds"
    );
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
