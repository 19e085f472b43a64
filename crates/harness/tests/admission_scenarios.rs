//! Admission in the simulator (PROTO-5, MEM-3): a restarted node verifies its peers before it
//! trusts them and rejoins; and a second node started with a live node's id (a copied
//! configuration) joins, is refused and leaves, in both quorum modes. Throughout, the real
//! node's messages are never dropped as replays or as the duplicate's, and no two nodes lead at
//! once; after the duplicate stops, the cluster still has its one leader.
//!
//! The control run models the transport before admission existed (one replay window per
//! sender id, adopting any newer incarnation): the duplicate's newer incarnation moves the
//! window and the real node's messages are refused as replays from then on. It must fail, which
//! shows the scenario can see the defect.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use conclave_harness::sim::invariants::{Invariant, PersistedBeforeSent};
use conclave_harness::sim::{AdmissionModel, Observation, SimConfig, SimFailure, Simulation};
use conclave_protocol::DropReason;

const NODES: usize = 3;
const SEEDS: u64 = 20;
const BOUND: Duration = Duration::from_secs(5);

/// No two live nodes lead at once, and no term is led by two nodes. Counted by node, not by
/// id: the duplicate shares the id of the node it copies.
#[derive(Debug, Default)]
struct OneLeaderByNode {
    leaders: BTreeMap<u64, usize>,
}

impl Invariant for OneLeaderByNode {
    fn name(&self) -> &'static str {
        "one leader at a time"
    }

    fn check(&mut self, sim: &Simulation, _: &[Observation]) -> Result<(), String> {
        let leading = sim.leaders();
        if leading.len() > 1 {
            return Err(format!("nodes {leading:?} lead at once"));
        }
        for index in leading {
            let term = sim.raft(index).map_or(0, |raft| raft.term());
            let first = *self.leaders.entry(term).or_insert(index);
            if first != index {
                return Err(format!("nodes {first} and {index} both led term {term}"));
            }
        }
        Ok(())
    }
}

/// The real node's messages are never refused as replays, nor as a duplicate's.
#[derive(Debug)]
struct RealNodeNeverRefused {
    real: usize,
}

impl Invariant for RealNodeNeverRefused {
    fn name(&self) -> &'static str {
        "real node never refused"
    }

    fn check(&mut self, _: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            if let Observation::Dropped { node, from, reason } = observation {
                if *from == self.real
                    && matches!(reason, DropReason::Replay | DropReason::DuplicateId)
                {
                    return Err(format!(
                        "node {node} dropped a message of the real node {from} as {}",
                        reason.label()
                    ));
                }
            }
        }
        Ok(())
    }
}

fn config(connected: bool, admission: AdmissionModel) -> SimConfig {
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
    config.admission = admission;
    config
}

/// Runs the scenario: settle, start a duplicate of node `seed % 3`, wait for its refusal, let
/// it run, stop it, and check the cluster kept one leader. Returns the first broken property.
fn scenario(seed: u64, connected: bool, admission: AdmissionModel) -> Result<(), SimFailure> {
    let mut sim = Simulation::new(seed, config(connected, admission)).unwrap();
    let originals: Vec<usize> = (0..NODES).collect();
    let settled = sim.run_until_condition(sim.now() + BOUND, |sim| {
        sim.agreed_leader(&originals).is_some()
    })?;
    if settled.is_none() {
        return Err(sim.failure("setup", "no leader before the duplicate".to_owned()));
    }
    // More than a second, so the duplicate's incarnation (Unix seconds at its start) is newer
    // than the real node's, as it is for a copy started later.
    sim.run_for(Duration::from_millis(1_500))?;
    let real = (seed % NODES as u64) as usize;
    sim.set_invariants(vec![
        Box::new(PersistedBeforeSent),
        Box::new(OneLeaderByNode::default()),
        Box::new(RealNodeNeverRefused { real }),
    ]);

    let duplicate = sim.add_duplicate(real);
    assert!(sim.incarnation(duplicate) > sim.incarnation(real));
    let refused = sim.run_until_condition(sim.now() + BOUND, |sim| {
        sim.membership(duplicate).is_some_and(|m| m.is_refused())
    })?;
    if refused.is_none() {
        return Err(sim.failure("MEM-3", "the duplicate was never refused".to_owned()));
    }
    sim.run_for(Duration::from_secs(3))?;
    if sim.agreed_leader(&originals).is_none() {
        return Err(sim.failure(
            "liveness",
            "the cluster lost its leader while the duplicate ran".to_owned(),
        ));
    }

    sim.crash(duplicate);
    sim.run_for(Duration::from_secs(3))?;
    match sim.agreed_leader(&originals) {
        Some(leader) if sim.leaders() == [leader] => Ok(()),
        _ => Err(sim.failure(
            "liveness",
            "no single agreed leader after the duplicate stopped".to_owned(),
        )),
    }
}

/// MEM-3, PROTO-5, `voters` mode: the duplicate is refused and leaves; the real node is never
/// refused and there is never a second leader.
#[test]
fn mem3_duplicate_id_is_refused_and_leaves_voters_mode() {
    for seed in 0..SEEDS {
        if let Err(failure) = scenario(seed, false, AdmissionModel::Full) {
            panic!("{failure}");
        }
    }
}

/// MEM-3, PROTO-5, `connected` mode: the same.
#[test]
fn mem3_duplicate_id_is_refused_and_leaves_connected_mode() {
    for seed in 0..SEEDS {
        if let Err(failure) = scenario(seed, true, AdmissionModel::Full) {
            panic!("{failure}");
        }
    }
}

/// The unguarded control: with only a replay window per id, the duplicate's newer incarnation
/// makes every node refuse the real node's messages as replays. Every seed fails.
#[test]
fn control_without_admission_refuses_the_real_node() {
    for connected in [false, true] {
        for seed in 0..SEEDS {
            let failure = scenario(seed, connected, AdmissionModel::ReplayWindowOnly)
                .expect_err("the control must break a property");
            assert_eq!(
                failure.invariant, "real node never refused",
                "seed {seed}, connected {connected}: {failure}"
            );
        }
    }
}

/// PROTO-5: a restarted node drops its peers' messages as `unverified` until each has answered
/// its challenge, then takes part again: the cluster agrees on a leader that includes it.
#[test]
fn proto5_restarted_node_verifies_its_peers_and_rejoins() {
    for connected in [false, true] {
        for seed in 0..SEEDS {
            let mut sim = Simulation::new(seed, config(connected, AdmissionModel::Full)).unwrap();
            let all: Vec<usize> = (0..NODES).collect();
            let settled = sim
                .run_until_condition(sim.now() + BOUND, |sim| sim.agreed_leader(&all).is_some())
                .unwrap();
            assert!(settled.is_some(), "seed {seed}");
            let restarted = (seed % NODES as u64) as usize;
            sim.crash(restarted);
            sim.run_for(Duration::from_millis(500)).unwrap();
            sim.restart(restarted);
            let rejoined = sim
                .run_until_condition(sim.now() + BOUND, |sim| sim.agreed_leader(&all).is_some())
                .unwrap();
            assert!(rejoined.is_some(), "seed {seed}, connected {connected}");
            let unverified: u64 = all
                .iter()
                .map(|&peer| sim.dropped(restarted, peer, DropReason::Unverified))
                .sum();
            assert!(
                unverified > 0,
                "seed {seed}: the restarted node trusted nobody at first"
            );
            // Agreeing needs only the leader's frames; every other peer is verified as soon as
            // its own frames (membership's pings) answered a challenge.
            let every_peer_verified = |sim: &Simulation| {
                all.iter().filter(|&&peer| peer != restarted).all(|&peer| {
                    sim.admission(restarted)
                        .is_some_and(|admission| admission.is_verified(&sim.id(peer)))
                })
            };
            let verified = sim
                .run_until_condition(sim.now() + BOUND, every_peer_verified)
                .unwrap();
            assert!(verified.is_some(), "seed {seed}, connected {connected}");
        }
    }
}
