//! The simulator drives the election as the actors do, mailbox hops included (issue 9): what
//! membership concludes reaches the election as a message of its own, so an election message
//! can overtake the reachability change its own frame caused. These tests show the simulator
//! produces that order — and that without the hop (the control) it never could — and that the
//! cluster still converges when it happens.

#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use conclave_harness::sim::invariants::{self, Invariant};
use conclave_harness::sim::{DEFAULT_MAILBOX_DELAY, Observation, SimConfig, Simulation};

const NODES: usize = 3;
const SEEDS: u64 = 40;
const BOUND: Duration = Duration::from_secs(5);

fn config(connected: bool, mailbox_delay: Option<Duration>) -> SimConfig {
    let (heartbeat, min, max) = (
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    let mut config = if connected {
        SimConfig::connected(NODES, heartbeat, min, max)
    } else {
        SimConfig::voters(NODES, heartbeat, min, max)
    };
    config.mailbox_delay = mailbox_delay;
    config
}

/// Counts the [`Observation::ReachabilityOvertaken`] of each step, checking that they name a
/// real receiver and sender.
struct Overtakings(Rc<Cell<u64>>);

impl Invariant for Overtakings {
    fn name(&self) -> &'static str {
        "overtakings observed"
    }

    fn check(&mut self, sim: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            if let Observation::ReachabilityOvertaken { node, peer } = observation {
                if *node >= sim.len() || sim.index_of(*peer).is_none() {
                    return Err(format!("{observation:?} names no node"));
                }
                self.0.set(self.0.get() + 1);
            }
        }
        Ok(())
    }
}

/// Settles, restarts node `seed % 3` (its peers' first frames race its membership's news of
/// them), and settles again; returns how often an election message overtook the reachability
/// change about its sender.
fn restart_and_count(seed: u64, connected: bool, mailbox_delay: Option<Duration>) -> u64 {
    let config = config(connected, mailbox_delay);
    let mut checks = invariants::standard(&config.election);
    let mut sim = Simulation::new(seed, config).unwrap();
    let observed = Rc::new(Cell::new(0));
    checks.push(Box::new(Overtakings(Rc::clone(&observed))));
    sim.set_invariants(checks);
    let all: Vec<usize> = (0..NODES).collect();
    let settled = sim
        .run_until_condition(sim.now() + BOUND, |sim| sim.agreed_leader(&all).is_some())
        .unwrap();
    assert!(settled.is_some(), "seed {seed}: no first leader");
    let restarted = (seed % NODES as u64) as usize;
    sim.crash(restarted);
    sim.run_for(Duration::from_millis(400)).unwrap();
    sim.restart(restarted);
    sim.run_for(Duration::from_millis(300)).unwrap();
    let rejoined = sim
        .run_until_condition(sim.now() + BOUND, |sim| sim.agreed_leader(&all).is_some())
        .unwrap();
    assert!(
        rejoined.is_some(),
        "seed {seed}, connected {connected}: no agreed leader after the restart"
    );
    assert_eq!(
        observed.get(),
        sim.reachability_overtaken(),
        "seed {seed}: every overtaking is observed"
    );
    sim.reachability_overtaken()
}

/// Issue 9: with the mailbox hop, election messages do reach an election before membership's
/// news of their sender, in both quorum modes, and every run still converges on one leader.
#[test]
fn election_messages_overtake_reachability_with_the_hop() {
    for connected in [false, true] {
        let overtaken: u64 = (0..SEEDS)
            .map(|seed| restart_and_count(seed, connected, Some(DEFAULT_MAILBOX_DELAY)))
            .sum();
        assert!(
            overtaken > 0,
            "connected {connected}: the hop never let a message overtake reachability"
        );
    }
}

/// The control: handing membership's news over within the step that produced it, the order
/// the actors can produce never happens.
#[test]
fn control_without_the_hop_never_overtakes() {
    for connected in [false, true] {
        for seed in 0..SEEDS {
            assert_eq!(restart_and_count(seed, connected, None), 0, "seed {seed}");
        }
    }
}
