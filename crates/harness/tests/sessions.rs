//! SESS-0..2 in the simulator: 3 to 5 nodes on raft's replicated log, each applying the
//! committed entries to the built-in state machine and running the leader's lease clock on
//! its own monotonic clock, while its wall clock is minutes off and steps. Holders grant
//! sessions through whoever leads, tie a key and a job claim to them and send keepalives
//! every TTL/3; some die, some revoke. Leaders are killed and isolated, the network
//! partitions, cuts, loses and reorders, and keepalives are lost. Checked at every proposal
//! and apply: no session ends while its keepalives reach the leader in time (invariant 1),
//! an ended session's keys and jobs are released exactly once by the entry that ends it,
//! alike on every replica (2), every job held under a session is held by a live one (3), and
//! replicas at one index write byte-identical snapshots (4). Each invariant has a control
//! that must fail. `CONCLAVE_SIM_SEEDS=N` runs more seeds; a failure prints the command that
//! replays it.

use std::io::Write;

use conclave_harness::sim::{
    Scenario, SessionControl, SessionCounts, run_seed, run_sessions_seed,
    run_sessions_seed_checking_holders_only, seed_count,
};

/// Seeds in a plain `cargo test`.
const DEFAULT_SEEDS: u64 = 2000;

/// SESS-0, SESS-1, SESS-2: the four invariants hold under every fault, and the run is not
/// vacuous: sessions expire, are revoked, and outlive leader changes.
#[test]
fn sessions_simulated_hold_their_rules_under_every_fault() {
    let seeds = seed_count(DEFAULT_SEEDS);
    let mut total = SessionCounts::default();
    let mut steps = 0;
    for seed in 0..seeds {
        match run_seed(Scenario::Sessions, seed, false).result {
            Ok(report) => {
                let c = report.sessions;
                total.granted += c.granted;
                total.expired += c.expired;
                total.revoked += c.revoked;
                total.keepalives += c.keepalives;
                total.keepalives_failed += c.keepalives_failed;
                total.keepalives_unknown_live += c.keepalives_unknown_live;
                total.leader_changes += c.leader_changes;
                total.survived_failover += c.survived_failover;
                total.leases_expired += c.leases_expired;
                total.restored += c.restored;
                steps += report.steps;
            }
            Err(failure) => panic!("simulation seed failed: {failure}"),
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "simulated {seeds} seeds (sessions): {} sessions granted, {} expired, {} revoked; \
         {} keepalives accepted, {} refused or lost ({} of live sessions called unknown by a \
         leader that had not applied their grant); {} leader changes; {} sessions lived \
         three TTLs through a leader change; {} plain leases expired; {} replicas restored \
         from a saved state machine; every invariant held after each of {steps} steps",
        total.granted,
        total.expired,
        total.revoked,
        total.keepalives,
        total.keepalives_failed,
        total.keepalives_unknown_live,
        total.leader_changes,
        total.survived_failover,
        total.leases_expired,
        total.restored,
    );
    assert!(total.granted > seeds * 3, "sessions granted: {total:?}");
    assert!(total.expired > seeds / 2, "sessions expire: {total:?}");
    assert!(total.revoked > seeds / 2, "sessions are revoked: {total:?}");
    assert!(
        total.survived_failover > seeds / 4,
        "sessions outlive leader changes: {total:?}"
    );
    assert!(total.leases_expired > 0, "plain leases expire: {total:?}");
    assert!(
        total.restored > seeds / 4,
        "saved machines restored: {total:?}"
    );
    // SESS-1: a newly elected leader that has not yet applied a session's grant (a restarted
    // node re-applying its log, a follower that lagged in applying) never calls that live
    // session unknown: until its machine has applied an entry of its own term it answers
    // busy. (Found by this family: seed 769, where n3, restarted without its saved state
    // machine, won term 3 and called a live session unknown with nothing applied.)
    assert_eq!(
        total.keepalives_unknown_live, 0,
        "keepalives of live sessions answered as unknown: {total:?}"
    );
}

/// Control seeds: each control stops at its first failure and must find one within these.
const CONTROL_SEEDS: u64 = 600;

/// Runs `control` over seeds until one fails, and returns the failure's text.
fn first_failure(control: SessionControl) -> String {
    first_failure_of(control, |seed| run_sessions_seed(seed, false, control))
}

/// The same with invariant 1 (a) off: the holder's view must find the control.
fn first_failure_seen_by_holders(control: SessionControl) -> String {
    first_failure_of(control, |seed| {
        run_sessions_seed_checking_holders_only(seed, control)
    })
}

fn first_failure_of(
    control: SessionControl,
    run: impl Fn(u64) -> conclave_harness::sim::SeedRun,
) -> String {
    let found = (0..CONTROL_SEEDS)
        .find_map(|seed| run(seed).result.err())
        .unwrap_or_else(|| {
            panic!("{control:?} broke nothing in {CONTROL_SEEDS} seeds: the check is blind")
        });
    let _ = writeln!(std::io::stderr(), "control {control:?}: {found}");
    assert_eq!(found.invariant, "sessions (SESS-0..2)", "{found}");
    found.to_string()
}

/// The control of invariant 1: a lease clock that keeps its counts across leadership changes
/// (never forgotten, told one term) ends a session on a node that was elected again, counting
/// from its earlier term, though the keepalives went to the leader in between.
#[test]
fn sessions_control_counts_kept_across_terms_end_a_live_session() {
    let failure = first_failure(SessionControl::KeepCountsAcrossTerms);
    assert!(failure.contains("invariant 1 (SESS-1)"), "{failure}");
}

/// The control of invariant 1: a lease clock fed the wall clock ends sessions when the wall
/// clock steps ahead. Found by the proposer's view (a), and, with (a) off, by the holder's
/// view (b): a holder whose keepalives the current leader all accepted sees its session end.
/// (A count kept across terms is rarely seen by a holder: it takes a leader deposed without
/// a crash and elected again while the holder's keepalives went to the leader in between.)
#[test]
fn sessions_control_counting_on_the_wall_clock_ends_a_live_session() {
    let failure = first_failure(SessionControl::CountOnWallClock);
    assert!(failure.contains("invariant 1 (SESS-1)"), "{failure}");
    let failure = first_failure_seen_by_holders(SessionControl::CountOnWallClock);
    assert!(failure.contains("were all accepted"), "{failure}");
}

/// The control of invariant 2: a replica that applies only the expiries it proposed keeps a
/// session the others ended.
#[test]
fn sessions_control_skipping_others_expiries_releases_differently() {
    let failure = first_failure(SessionControl::SkipOthersExpiries);
    assert!(failure.contains("invariant 2"), "{failure}");
}

/// The control of invariant 3: a saved state machine written without its sessions table (as
/// a build before sessions wrote it) restores claims held by sessions that are not live.
#[test]
fn sessions_control_saving_without_sessions_leaves_orphan_claims() {
    let failure = first_failure(SessionControl::SaveWithoutSessions);
    assert!(failure.contains("invariant 3"), "{failure}");
}

/// The control of invariant 4: a replica that stamps plain claims with its own wall clock on
/// apply holds another state than the others at the same index.
#[test]
fn sessions_control_stamping_on_apply_makes_replicas_differ() {
    let failure = first_failure(SessionControl::StampOnApply);
    assert!(failure.contains("invariant 4"), "{failure}");
}

/// Replays one seed with its trace: `CONCLAVE_SIM_REPLAY=sessions:<seed>`.
#[test]
#[ignore = "run by hand with CONCLAVE_SIM_REPLAY=sessions:<seed>"]
fn replay() {
    let spec =
        std::env::var("CONCLAVE_SIM_REPLAY").expect("set CONCLAVE_SIM_REPLAY=sessions:<seed>");
    let (name, seed) = spec.split_once(':').expect("format is sessions:<seed>");
    let scenario = Scenario::from_name(name).expect("scenario is sessions");
    let run = run_seed(scenario, seed.parse().expect("seed is a number"), true);
    for entry in run.trace.unwrap_or_default() {
        println!("{entry}");
    }
    match run.result {
        Ok(report) => println!("passed: {report:?}"),
        Err(failure) => panic!("{failure}"),
    }
}
