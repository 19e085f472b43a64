//! The cluster simulator (docs/design.md §10) running gossip (GOS-1..6) and priority (PRI-1..6), the
//! modes that elect without a quorum (issue 9, item 9): thousands of seeds per mode in
//! `cargo test`, more with `CONCLAVE_SIM_SEEDS=N` (which sets every family's count); every
//! failure prints its seed and the command that replays it.
//!
//! Each seed runs a random cluster (1–5 nodes) through crashes, crashes part-way through a
//! node's actions, graceful stops, restarts, partitions, cut links, loss, duplication and
//! reordering, with the mode's own faults (a gossip leader yields, a priority master resigns
//! to a successor or runs its battery down), then heals. Checked after every step: durable
//! state never goes back, no message leaves before the epoch or round it carries is durable,
//! each node's fencing token only grows (across restarts), and every token a node names was
//! declared by that leader itself. After healing, exactly one leader that every live node
//! names must appear within the bound the mode's failover formula gives (`heal_bound`), and
//! keep leading with the same token. The restart flavour kills a settled cluster's leader
//! again and again and restarts it from what it persisted; every failover must fit the
//! formula's bound (`failover_bound`).
//!
//! Most seeds run with tightened timings (gossip at a tenth of Fabric's, priority at a fifth
//! of seed 002's), a smaller set with each mode's defaults.

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::time::Duration;

use conclave_core::election::HardState;
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_harness::sim::invariants::{
    self, FencingTokenMonotonic, Invariant, PersistedBeforeSent, TokenDeclaredByLeader,
};
use conclave_harness::sim::{
    Observation, Scenario, SeedReport, SentKind, SimConfig, Simulation, failover_bound,
    gossip_tightened, heal_bound, node_id, priority_tightened, run_seed, run_seeds, seed_count,
};

/// Seeds per family in a plain `cargo test`.
const TIGHTENED_SEEDS: u64 = 2000;
const DEFAULTS_SEEDS: u64 = 2000;
const RESTART_SEEDS: u64 = 2000;

fn run_many(scenario: Scenario, seeds: u64) -> Vec<SeedReport> {
    let reports = run_seeds(scenario, seeds);
    let worst = reports
        .iter()
        .map(|r| r.convergence)
        .max()
        .unwrap_or_default();
    let steps: u64 = reports.iter().map(|r| r.steps).sum();
    let split = reports.iter().filter(|r| r.leaders_at_heal > 1).count();
    // Written to the stderr handle rather than with `println!`, which the test harness
    // captures: a plain `cargo test` shows how many seeds ran.
    let _ = writeln!(
        std::io::stderr(),
        "simulated {} seeds ({} mode): every invariant held after each of {steps} steps; \
         slowest convergence {worst:?}; {split} healed with several leaders, {} took over half \
         the failover bound",
        reports.len(),
        scenario.name(),
        slow(&reports, scenario)
    );
    reports
}

/// Seeds whose convergence took over half the mode's failover bound: a leader lost just
/// before healing, whose followers waited out most of its alive threshold or master timeout.
fn slow(reports: &[SeedReport], scenario: Scenario) -> usize {
    let bound = match scenario {
        Scenario::Gossip | Scenario::GossipRestart => {
            failover_bound(&SimConfig::gossip(1, gossip_tightened(), HEARTBEAT).election)
        }
        Scenario::GossipDefaults => {
            failover_bound(&SimConfig::gossip(1, GossipConfig::new(node_id(0)), HEARTBEAT).election)
        }
        Scenario::PriorityDefaults => failover_bound(
            &SimConfig::priority(1, PriorityConfig::new(node_id(0)), HEARTBEAT).election,
        ),
        _ => failover_bound(&SimConfig::priority(1, priority_tightened(), HEARTBEAT).election),
    };
    reports.iter().filter(|r| r.convergence > bound / 2).count()
}

const HEARTBEAT: Duration = Duration::from_millis(100);

/// With the default seed count or more, the runs exercise what the bound is about: at least
/// `split` per mille of the seeds heal a partition with a leader on each side, and `slow` per
/// mille wait out a leader lost just before healing.
fn assert_exercised(reports: &[SeedReport], scenario: Scenario, split: usize, slow_min: usize) {
    if reports.len() < 1000 {
        return;
    }
    let healed_split = reports.iter().filter(|r| r.leaders_at_heal > 1).count();
    let waited = slow(reports, scenario);
    assert!(
        healed_split * 1000 >= split * reports.len(),
        "{}: only {healed_split} of {} seeds healed with several leaders",
        scenario.name(),
        reports.len()
    );
    assert!(
        waited * 1000 >= slow_min * reports.len(),
        "{}: only {waited} of {} seeds waited out a lost leader",
        scenario.name(),
        reports.len()
    );
}

/// GOS-1..6 and CB-5 under random faults, Fabric's timings at a tenth.
#[test]
fn simulated_seeds_gossip_mode() {
    let reports = run_many(Scenario::Gossip, seed_count(TIGHTENED_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::Gossip, 100, 3);
}

/// The same with Fabric's default timings.
#[test]
fn simulated_seeds_gossip_mode_with_defaults() {
    let reports = run_many(Scenario::GossipDefaults, seed_count(DEFAULTS_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::GossipDefaults, 100, 3);
}

/// PRI-1..6 and CB-5 under random faults, seed 002's timings at a fifth.
#[test]
fn simulated_seeds_priority_mode() {
    let reports = run_many(Scenario::Priority, seed_count(TIGHTENED_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::Priority, 100, 3);
}

/// The same with seed 002's own timings.
#[test]
fn simulated_seeds_priority_mode_with_defaults() {
    let reports = run_many(Scenario::PriorityDefaults, seed_count(DEFAULTS_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::PriorityDefaults, 100, 3);
}

/// Gossip: the leader killed and restarted from what it persisted, within the failover
/// formula's bound every time, the fencing token never going back.
#[test]
fn simulated_seeds_gossip_leader_restarts() {
    let reports = run_many(Scenario::GossipRestart, seed_count(RESTART_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::GossipRestart, 0, 500);
}

/// The same in priority mode.
#[test]
fn simulated_seeds_priority_leader_restarts() {
    let reports = run_many(Scenario::PriorityRestart, seed_count(RESTART_SEEDS));
    assert!(!reports.is_empty());
    assert_exercised(&reports, Scenario::PriorityRestart, 0, 500);
}

/// Replays one seed with its full trace: `CONCLAVE_SIM_REPLAY=gossip:1234`.
#[test]
#[ignore = "a tool: run with CONCLAVE_SIM_REPLAY=<scenario>:<seed>"]
fn replay() {
    let spec = std::env::var("CONCLAVE_SIM_REPLAY").expect(
        "set CONCLAVE_SIM_REPLAY=<gossip|gossip-defaults|priority|priority-defaults|\
         gossip-restart|priority-restart>:<seed>",
    );
    let (name, seed) = spec.split_once(':').expect("format is <scenario>:<seed>");
    let scenario = Scenario::from_name(name).expect("a scenario named by `Scenario::name`");
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

/// A printed seed reproduces the same run in these modes too, and another seed another run.
#[test]
fn same_seed_same_trace() {
    for scenario in [
        Scenario::Gossip,
        Scenario::Priority,
        Scenario::PriorityRestart,
    ] {
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

/// The bounds are the formulas plus frame slack, nothing more.
#[test]
fn bounds_follow_the_formulas() {
    let gossip = SimConfig::gossip(3, gossip_tightened(), Duration::from_millis(100)).election;
    assert_eq!(failover_bound(&gossip), Duration::from_millis(1550));
    assert_eq!(heal_bound(&gossip), failover_bound(&gossip));
    let priority =
        SimConfig::priority(3, priority_tightened(), Duration::from_millis(100)).election;
    assert_eq!(failover_bound(&priority), Duration::from_millis(870));
}

/// Counts what the simulator hands the invariants.
#[derive(Default)]
struct Seen {
    gossip_or_priority_sent: u64,
    declared: u64,
    tokens: u64,
}

struct Counter(Rc<RefCell<Seen>>);

impl Invariant for Counter {
    fn name(&self) -> &'static str {
        "counter (never fails)"
    }

    fn check(&mut self, _: &Simulation, observations: &[Observation]) -> Result<(), String> {
        let mut seen = self.0.borrow_mut();
        for observation in observations {
            match observation {
                Observation::Sent { .. } => seen.gossip_or_priority_sent += 1,
                Observation::Declared { .. } => seen.declared += 1,
                Observation::LeaderPublished {
                    leader: Some(_), ..
                } => seen.tokens += 1,
                _ => {}
            }
        }
        Ok(())
    }
}

/// The fencing invariants are fed: in both modes the simulator reports the messages sent
/// (broadcasts to each of the four peers), the leadership claims and the published tokens,
/// and a 5-node cluster agrees on one leader, which only a broadcast reaching every peer
/// allows.
#[test]
fn gossip_and_priority_runs_feed_the_invariants() {
    for config in [
        SimConfig::gossip(5, gossip_tightened(), Duration::from_millis(100)),
        SimConfig::priority(5, priority_tightened(), Duration::from_millis(100)),
    ] {
        let mut checks = invariants::standard(&config.election);
        assert_eq!(
            checks.len(),
            5,
            "vote, durability, persist-before-send, fencing x2"
        );
        let seen = Rc::new(RefCell::new(Seen::default()));
        checks.push(Box::new(Counter(Rc::clone(&seen))));
        let mut sim = Simulation::new(9, config).unwrap();
        sim.set_invariants(checks);
        let all: Vec<usize> = (0..5).collect();
        let agreed = sim
            .run_until_condition(sim.now() + Duration::from_secs(5), |sim| {
                sim.agreed_leader(&all).is_some()
            })
            .unwrap();
        assert!(agreed.is_some(), "{}", invariants::liveness::describe(&sim));
        let seen = seen.borrow();
        assert!(seen.gossip_or_priority_sent >= 4 && seen.declared >= 1 && seen.tokens >= 5);
    }
}

fn a_sim() -> Simulation {
    Simulation::new(
        1,
        SimConfig::gossip(3, gossip_tightened(), Duration::from_millis(100)),
    )
    .unwrap()
}

fn published(node: usize, term: u64, leader: Option<usize>) -> Observation {
    Observation::LeaderPublished {
        node,
        term,
        leader: leader.map(node_id),
    }
}

/// Control: the fencing-token rule fails on a token that goes back, and on another leader at
/// the same term; "no leader" in between and the same leader again at a higher term pass.
#[test]
fn fencing_token_monotonic_catches_a_token_going_back() {
    let sim = a_sim();
    let mut rule = FencingTokenMonotonic::default();
    let fine = [
        published(0, 4, Some(1)),
        published(0, 4, None),
        published(0, 4, Some(1)),
        published(0, 6, Some(1)),
        published(0, 7, Some(2)),
        published(1, 2, Some(2)),
    ];
    assert_eq!(rule.check(&sim, &fine), Ok(()));
    assert!(rule.check(&sim, &[published(0, 6, Some(2))]).is_err());
    let mut rule = FencingTokenMonotonic::default();
    rule.check(&sim, &[published(2, 5, Some(0))]).unwrap();
    let sideways = rule.check(&sim, &[published(2, 5, Some(1))]).unwrap_err();
    assert!(sideways.contains("5:n2 after 5:n1"), "{sideways}");
}

/// Control: a follower naming a leader at a term that leader never declared is caught; the
/// leader's own token, and a declared one, pass.
#[test]
fn token_declared_by_leader_catches_a_made_up_token() {
    let sim = a_sim();
    let mut rule = TokenDeclaredByLeader::default();
    assert_eq!(
        rule.check(
            &sim,
            &[
                Observation::Declared { node: 1, term: 3 },
                published(1, 3, Some(1)),
                published(0, 3, Some(1)),
            ]
        ),
        Ok(())
    );
    let made_up = rule.check(&sim, &[published(2, 4, Some(1))]).unwrap_err();
    assert!(made_up.contains("n3 follows n2 at term 4"), "{made_up}");
    assert!(rule.check(&sim, &[published(2, 3, Some(0))]).is_err());
}

/// Control: an epoch or round sent before it is durable is caught.
#[test]
fn persisted_before_sent_catches_an_undurable_epoch() {
    let sim = a_sim();
    let sent = |term, durable_term| Observation::Sent {
        from: node_id(0),
        to: node_id(1),
        term,
        kind: SentKind::Other,
        durable: HardState {
            term: durable_term,
            ..HardState::default()
        },
    };
    assert_eq!(PersistedBeforeSent.check(&sim, &[sent(3, 3)]), Ok(()));
    assert!(PersistedBeforeSent.check(&sim, &[sent(4, 3)]).is_err());
}
