//! Whole-cluster behaviour of RAFT-7 and RAFT-8 in the simulator: a rejoining node does not
//! depose a healthy leader (pre-vote), an isolated leader steps down (check-quorum), a
//! minority never elects, `SetLeader` in `voters` mode transfers and pins, and a resigning
//! leader, or one stopped gracefully, hands over.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use conclave_core::election::{Command, CommandOutcome, Role};
use conclave_harness::sim::{SimConfig, Simulation};

fn cluster(nodes: usize, seed: u64, pre_vote: bool, check_quorum: bool) -> Simulation {
    let mut config = SimConfig::voters(
        nodes,
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    let raft = config.raft_mut().expect("a raft cluster");
    raft.pre_vote = pre_vote;
    raft.check_quorum = check_quorum;
    Simulation::new(seed, config).unwrap()
}

fn settle(sim: &mut Simulation) -> usize {
    let deadline = sim.now() + Duration::from_secs(5);
    sim.run_until_condition(deadline, |sim| sim.agreed_leader(&sim.alive()).is_some())
        .unwrap()
        .expect("a leader within 5 s");
    sim.agreed_leader(&sim.alive()).unwrap()
}

/// RAFT-7: a follower cut off for a long time and then reconnected does not raise the term
/// or depose the leader when pre-vote is on; without pre-vote and check-quorum it does, which
/// shows what the mechanism prevents.
#[test]
fn raft7_rejoining_node_does_not_depose_the_leader() {
    for seed in 0..10 {
        let mut guarded = cluster(3, seed, true, true);
        let leader = settle(&mut guarded);
        let term = guarded.raft(leader).unwrap().term();
        let follower = (leader + 1) % 3;
        guarded.isolate(follower);
        guarded.run_for(Duration::from_secs(3)).unwrap();
        assert_eq!(
            guarded.raft(follower).unwrap().term(),
            term,
            "pre-vote keeps the term"
        );
        guarded.heal();
        guarded.run_for(Duration::from_secs(2)).unwrap();
        assert_eq!(guarded.leaders(), vec![leader], "seed {seed}");
        assert_eq!(guarded.raft(leader).unwrap().term(), term);

        let mut unguarded = cluster(3, seed, false, false);
        let leader = settle(&mut unguarded);
        let term = unguarded.raft(leader).unwrap().term();
        let follower = (leader + 1) % 3;
        unguarded.isolate(follower);
        unguarded.run_for(Duration::from_secs(3)).unwrap();
        assert!(unguarded.raft(follower).unwrap().term() > term + 3);
        unguarded.heal();
        settle(&mut unguarded);
        assert!(
            unguarded.raft(leader).unwrap().term() > term,
            "the old term was disrupted"
        );
    }
}

/// RAFT-7: a leader cut off from its quorum steps down within an election timeout, so the
/// minority side has no leader; the majority elects one; a minority never elects.
#[test]
fn raft7_isolated_leader_steps_down_and_minority_never_elects() {
    for seed in 0..10 {
        let mut sim = cluster(5, seed, true, true);
        let old = settle(&mut sim);
        let minority = [old, (old + 1) % 5];
        let groups = (0..5).map(|i| u32::from(minority.contains(&i))).collect();
        sim.partition(groups);
        sim.run_for(Duration::from_secs(3)).unwrap();
        for node in minority {
            assert_ne!(sim.raft(node).unwrap().role(), Role::Leader, "seed {seed}");
            assert_eq!(sim.raft(node).unwrap().leader(), None);
        }
        let majority: Vec<usize> = (0..5).filter(|i| !minority.contains(i)).collect();
        assert!(sim.agreed_leader(&majority).is_some(), "seed {seed}");
    }
}

/// RAFT-8 `voters`: `SetLeader` issued on a follower goes to the leader, which transfers to
/// the target; the target wins and is pinned on every node. Losing it clears the pin.
#[test]
fn raft8_voters_set_leader_transfers_and_pins() {
    for seed in 0..10 {
        let mut sim = cluster(3, seed, true, true);
        let leader = settle(&mut sim);
        let target = (leader + 1) % 3;
        let issuer = (leader + 2) % 3;
        let outcome = sim
            .command(issuer, Command::SetLeader(sim.id(target)))
            .unwrap()
            .unwrap();
        assert_eq!(
            outcome,
            Ok(CommandOutcome::Forwarded { to: sim.id(leader) })
        );
        sim.run_for(Duration::from_millis(500)).unwrap();
        assert_eq!(sim.agreed_leader(&[0, 1, 2]), Some(target), "seed {seed}");
        for node in 0..3 {
            assert_eq!(
                sim.raft(node).unwrap().hard_state().manual_override,
                Some(sim.id(target)),
                "seed {seed} node {node}"
            );
        }
        sim.crash(target);
        let next = settle(&mut sim);
        assert_ne!(next, target);
        assert_eq!(sim.raft(next).unwrap().hard_state().manual_override, None);
    }
}

/// Yield (`leader resign`): the leader hands over to another node, and does not take the
/// leadership back while the new leader is healthy.
#[test]
fn resigning_leader_hands_over() {
    for seed in 0..10 {
        let mut sim = cluster(3, seed, true, true);
        let leader = settle(&mut sim);
        let outcome = sim
            .command(leader, Command::Resign)
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(matches!(outcome, CommandOutcome::TransferStarted { .. }));
        sim.run_for(Duration::from_millis(500)).unwrap();
        let next = sim.agreed_leader(&[0, 1, 2]).expect("a successor leads");
        assert_ne!(next, leader, "seed {seed}");
        sim.run_for(Duration::from_secs(5)).unwrap();
        assert_eq!(sim.leaders(), vec![next]);
    }
}

/// CB-2: a leader stopped gracefully hands over before it goes: the two others agree on a
/// successor within the minimum election timeout (150 ms here), which a crash could not give
/// them (they would wait for an election timeout first); the stopped node is down afterwards.
#[test]
fn gracefully_stopped_leader_hands_over() {
    for seed in 0..10 {
        let mut sim = cluster(3, seed, true, true);
        let leader = settle(&mut sim);
        sim.stop_gracefully(leader).unwrap();
        let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
        let deadline = sim.now() + Duration::from_millis(150);
        let handed_over = sim
            .run_until_condition(deadline, |sim| {
                !sim.is_alive(leader) && sim.agreed_leader(&others).is_some()
            })
            .unwrap();
        assert!(handed_over.is_some(), "seed {seed}: no successor in time");
    }
}
