//! Seed 000's verification list ("Verification" in `seeds/000_*.txt`), one test per item,
//! through the public API of conclave-core: the election state machine's transitions, a
//! 3-node automatic election, the 2-node threshold, manual `SetLeader`, re-election after the
//! leader is lost, leader unification after a partition heals (higher term first, then the
//! byte-wise larger id), heartbeat send/receive/timeout, RTT accuracy, the lagging subscriber,
//! and `majority_threshold` for 1, 2, 3, 5 and 7 nodes.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use conclave_core::election::{Command, Event, HardState, LeaderChangeCause, Role};
use conclave_core::raft::{LogPosition, RaftConfig, RaftMessage, majority_threshold};
use conclave_core::testing::{drain, drain as drain_membership, id, ms, published, raft_node};
use conclave_core::{
    DrainOutcome, Instant, LinkAddr, Membership, MembershipAction, MembershipConfig,
    MembershipEvent, PeerStatus, SubscriberQueue,
};
use conclave_harness::sim::{SimConfig, Simulation};
use conclave_protocol::{Body, Hello, Pong, Vote};

/// Heartbeat 50 ms, election timeout 150–300 ms: the seed's 500 / 1500–3000 ms scaled down
/// ten times so the simulated runs stay short; the ratios are the seed's.
fn timings() -> (Duration, Duration, Duration) {
    (
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    )
}

fn connected_cluster(nodes: usize, seed: u64) -> Simulation {
    let (heartbeat, min, max) = timings();
    Simulation::new(seed, SimConfig::connected(nodes, heartbeat, min, max)).unwrap()
}

fn voters_cluster(nodes: usize, seed: u64) -> Simulation {
    let (heartbeat, min, max) = timings();
    Simulation::new(seed, SimConfig::voters(nodes, heartbeat, min, max)).unwrap()
}

/// Runs until every live node knows the same leader; returns its index.
fn settle(sim: &mut Simulation, within: Duration) -> usize {
    let deadline = sim.now() + within;
    sim.run_until_condition(deadline, |sim| sim.agreed_leader(&sim.alive()).is_some())
        .unwrap()
        .unwrap_or_else(|| panic!("no agreed leader within {within:?}"));
    sim.agreed_leader(&sim.alive()).unwrap()
}

/// Seed 000 verification 1, RAFT-1..4: Follower → Candidate → Leader, with the role and
/// leader changes published in order.
#[test]
fn seed000_election_state_machine_follower_candidate_leader() {
    let (a, b, c) = (id("a"), id("b"), id("c"));
    let mut config = RaftConfig::new(a, [a, b, c]);
    config.pre_vote = false;
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 1);
    assert_eq!(raft.role(), Role::Follower);

    let deadline = raft.poll_timeout().unwrap();
    raft.handle_timeout(deadline);
    assert_eq!(raft.role(), Role::Candidate);
    assert_eq!(raft.term(), 1);
    assert_eq!(raft.hard_state().vote, Some(a));
    let events = published(&drain(&mut raft));
    assert!(events.contains(&Event::RoleChanged {
        term: 1,
        role: Role::Candidate,
        phase: "candidate",
    }));

    raft.handle_message(
        deadline,
        b,
        RaftMessage::Vote(Vote {
            term: 1,
            granted: true,
            pre_vote: false,
            priority: None,
        }),
    );
    assert_eq!(raft.role(), Role::Leader);
    assert_eq!(raft.leader(), Some(a));
    let events = published(&drain(&mut raft));
    let role_at = events
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::RoleChanged {
                    role: Role::Leader,
                    ..
                }
            )
        })
        .unwrap();
    let leader_at = events
        .iter()
        .position(|e| {
            matches!(e, Event::LeaderChanged { term: 1, leader: Some(l), role: Role::Leader, cause: LeaderChangeCause::VoteWon } if *l == a)
        })
        .unwrap();
    assert!(role_at < leader_at);
}

/// Seed 000 verification 2, RAFT-6: three nodes elect one leader by themselves, in both quorum
/// modes.
#[test]
fn seed000_three_node_auto_election() {
    for seed in 0..20 {
        for mut sim in [connected_cluster(3, seed), voters_cluster(3, seed)] {
            let leader = settle(&mut sim, Duration::from_secs(5));
            assert_eq!(sim.leaders(), vec![leader]);
            let term = sim.raft(leader).unwrap().term();
            for node in 0..3 {
                let raft = sim.raft(node).unwrap();
                assert_eq!(raft.leader(), Some(sim.id(leader)));
                assert_eq!(raft.term(), term);
            }
        }
    }
}

/// Seed 000 verification 3, RAFT-6 `connected`: with one or two nodes the threshold is 1, so a
/// node alone elects itself with its own vote, and the survivor of a pair leads on its own.
#[test]
fn seed000_two_nodes_threshold_is_one() {
    assert_eq!(majority_threshold(2), 1);
    let mut single = connected_cluster(1, 7);
    assert_eq!(settle(&mut single, Duration::from_secs(2)), 0);

    for seed in 0..10 {
        let mut pair = connected_cluster(2, seed);
        let leader = settle(&mut pair, Duration::from_secs(5));
        let survivor = 1 - leader;
        let old_term = pair.raft(survivor).unwrap().term();
        pair.crash(leader);
        let new_leader = settle(&mut pair, Duration::from_secs(5));
        assert_eq!(new_leader, survivor, "seed {seed}");
        assert!(pair.raft(survivor).unwrap().term() > old_term);
        assert_eq!(pair.raft(survivor).unwrap().quorum_size(), 1);
    }
}

/// Seed 000 verification 4, RAFT-8: `SetLeader` broadcasts `LeaderAssign{term + 1}`; every
/// node adopts the term and the leader and stops electing while the pinned leader lives; once
/// it is lost, automatic election clears the override and elects another.
#[test]
fn seed000_manual_set_leader_overrides_auto_election() {
    let mut sim = connected_cluster(3, 11);
    let elected = settle(&mut sim, Duration::from_secs(5));
    let term = sim.raft(elected).unwrap().term();
    let chosen = (elected + 1) % 3;
    let assigner = (elected + 2) % 3;

    let outcome = sim
        .command(assigner, Command::SetLeader(sim.id(chosen)))
        .unwrap()
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    sim.run_for(Duration::from_millis(50)).unwrap();
    for node in 0..3 {
        let raft = sim.raft(node).unwrap();
        assert_eq!(raft.leader(), Some(sim.id(chosen)), "node {node}");
        assert_eq!(raft.term(), term + 1);
        assert_eq!(raft.hard_state().manual_override, Some(sim.id(chosen)));
    }
    // Ten seconds, dozens of election timeouts: nobody campaigns against the pinned leader.
    sim.run_for(Duration::from_secs(10)).unwrap();
    assert_eq!(sim.leaders(), vec![chosen]);
    assert_eq!(sim.raft(chosen).unwrap().term(), term + 1);

    sim.crash(chosen);
    let next = settle(&mut sim, Duration::from_secs(5));
    assert_ne!(next, chosen);
    for node in sim.alive() {
        assert_eq!(sim.raft(node).unwrap().hard_state().manual_override, None);
    }
}

/// Seed 000 verification 4, RAFT-8: with automatic election off, losing the pinned leader
/// leaves the cluster without one until `EnableAutoLeaderElection(true)`.
#[test]
fn seed000_auto_election_off_waits_for_the_operator() {
    let mut sim = connected_cluster(3, 12);
    let elected = settle(&mut sim, Duration::from_secs(5));
    for node in 0..3 {
        sim.command(node, Command::EnableAutoElection(false))
            .unwrap()
            .unwrap()
            .unwrap();
    }
    sim.crash(elected);
    sim.run_for(Duration::from_secs(5)).unwrap();
    assert!(sim.leaders().is_empty());
    for node in sim.alive() {
        assert_eq!(sim.raft(node).unwrap().leader(), None);
    }
    let survivor = sim.alive()[0];
    sim.command(survivor, Command::EnableAutoElection(true))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(settle(&mut sim, Duration::from_secs(5)), survivor);
}

/// Seed 000 verification 5, RAFT-2/3: when the leader drops out, the others elect a new one in
/// a higher term.
#[test]
fn seed000_leader_loss_triggers_reelection() {
    for seed in 0..10 {
        for mut sim in [connected_cluster(3, seed), voters_cluster(3, seed)] {
            let old = settle(&mut sim, Duration::from_secs(5));
            let old_term = sim.raft(old).unwrap().term();
            sim.crash(old);
            let new = settle(&mut sim, Duration::from_secs(5));
            assert_ne!(new, old);
            assert!(sim.raft(new).unwrap().term() > old_term);
        }
    }
}

/// Seed 000 verification 6, RAFT-6 `connected`: after a partition heals, the leader with the
/// higher term wins and everyone follows it.
#[test]
fn seed000_partition_heal_higher_term_wins() {
    let mut different_terms = 0;
    for seed in 0..10 {
        let mut sim = connected_cluster(5, seed);
        settle(&mut sim, Duration::from_secs(5));
        sim.partition(vec![0, 0, 1, 1, 1]);
        // Each side elects its own leader; the side that needed more elections is ahead.
        sim.run_for(Duration::from_secs(3)).unwrap();
        let left = sim.agreed_leader(&[0, 1]).expect("left side has a leader");
        let right = sim
            .agreed_leader(&[2, 3, 4])
            .expect("right side has a leader");
        let (left_term, right_term) = (
            sim.raft(left).unwrap().term(),
            sim.raft(right).unwrap().term(),
        );
        // Usually only the side that lost the old leader elects, so the terms differ; when the
        // old leader also lost its quorum and won again on its side, the id decides.
        let expected = match left_term.cmp(&right_term) {
            std::cmp::Ordering::Greater => left,
            std::cmp::Ordering::Less => right,
            std::cmp::Ordering::Equal if sim.id(left) > sim.id(right) => left,
            std::cmp::Ordering::Equal => right,
        };
        different_terms += usize::from(left_term != right_term);
        sim.heal();
        let winner = settle(&mut sim, Duration::from_secs(5));
        assert_eq!(
            sim.id(winner),
            sim.id(expected),
            "seed {seed}: terms {left_term} vs {right_term}"
        );
        assert_eq!(sim.leaders(), vec![winner]);
    }
    assert!(
        different_terms >= 5,
        "the higher-term rule decided only {different_terms} runs"
    );
}

/// Seed 000 verification 6, RAFT-6 `connected`: two leaders of the same term meet; the
/// byte-wise larger id stays leader at once, without a new election.
#[test]
fn seed000_partition_heal_equal_term_larger_id_wins() {
    let mut sim = connected_cluster(2, 3);
    // Apart from the start: each node is alone, needs only its own vote, and leads term 1.
    sim.partition(vec![0, 1]);
    sim.run_for(Duration::from_secs(2)).unwrap();
    assert_eq!(sim.leaders(), vec![0, 1]);
    assert_eq!(sim.raft(0).unwrap().term(), 1);
    assert_eq!(sim.raft(1).unwrap().term(), 1);

    sim.heal();
    let winner = settle(&mut sim, Duration::from_secs(5));
    assert_eq!(sim.id(winner), id("n2"), "n2 > n1 byte-wise");
    assert_eq!(sim.raft(0).unwrap().term(), 1, "no new election was needed");
    assert_eq!(sim.raft(1).unwrap().term(), 1);
}

/// Seed 000 verification 7, MEM-4 and RAFT-4: pings are answered, a silent peer becomes
/// Disconnected after `heartbeat × multiplier`, and a leader's heartbeats hold followers back
/// from campaigning while they flow.
#[test]
fn seed000_heartbeat_send_receive_and_timeout() {
    let config = MembershipConfig::default();
    let (a, b) = (id("gw-a"), id("gw-b"));
    let mut node = Membership::new(a, config, ms(0));
    node.handle_frame(ms(0), b, &LinkAddr::new("mem:2"), &Body::Hello(Hello {}));
    drain_membership(&mut node);

    // Pings go out every 500 ms; gw-b answers until 1 s and then falls silent.
    let mut status_changes = Vec::new();
    for at in (500..=3_000).step_by(500) {
        node.handle_timeout(ms(at));
        for action in drain_membership(&mut node) {
            match action {
                MembershipAction::Send {
                    to,
                    body: Body::Ping(ping),
                } if at <= 1_000 => {
                    assert_eq!(to, b);
                    node.handle_frame(
                        ms(at + 1),
                        b,
                        &LinkAddr::new("mem:2"),
                        &Body::Pong(Pong {
                            timestamp_ms: ping.timestamp_ms,
                        }),
                    );
                }
                MembershipAction::Publish(MembershipEvent::StatusChanged { new, .. }) => {
                    status_changes.push((at, new));
                }
                _ => {}
            }
        }
    }
    // Last heard at 1.001 s; silent for more than 1.5 s at the 3.0 s tick, not at 2.5 s.
    assert_eq!(status_changes, vec![(3_000, PeerStatus::Disconnected)]);

    // Heartbeats keep a 3-node cluster's term stable for a long time.
    let mut sim = voters_cluster(3, 5);
    let leader = settle(&mut sim, Duration::from_secs(5));
    let term = sim.raft(leader).unwrap().term();
    let next = sim.raft(leader).unwrap().next_heartbeat().unwrap();
    sim.run_until(next).unwrap();
    let after = sim.raft(leader).unwrap().next_heartbeat().unwrap();
    assert_eq!(after - next, Duration::from_millis(50));
    sim.run_for(Duration::from_secs(20)).unwrap();
    assert_eq!(sim.leaders(), vec![leader]);
    assert_eq!(sim.raft(leader).unwrap().term(), term);
}

/// Seed 000 verification 8, MEM-4: the RTT is the time from the ping to its pong, to the
/// microsecond.
#[test]
fn seed000_rtt_calculation_accuracy() {
    let (a, b) = (id("gw-a"), id("gw-b"));
    let mut node = Membership::new(a, MembershipConfig::default(), ms(0));
    node.handle_frame(ms(0), b, &LinkAddr::new("mem:2"), &Body::Hello(Hello {}));
    drain_membership(&mut node);
    node.handle_timeout(ms(500));
    let ping = drain_membership(&mut node)
        .into_iter()
        .find_map(|action| match action {
            MembershipAction::Send {
                body: Body::Ping(ping),
                ..
            } => Some(ping),
            _ => None,
        })
        .unwrap();
    let answered = Instant::from_micros(500_000 + 12_345);
    node.handle_frame(
        answered,
        b,
        &LinkAddr::new("mem:2"),
        &Body::Pong(Pong {
            timestamp_ms: ping.timestamp_ms,
        }),
    );
    assert_eq!(node.peers().rtt(&b), Some(Duration::from_micros(12_345)));
}

/// A `tracing` writer that keeps what was logged, to check the warning.
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Seed 000 verification 9, MEM-5: a subscriber that falls behind loses the oldest events;
/// draining it logs a warning with the count and stops that drain; the next drain carries on
/// with the newest events.
#[test]
fn seed000_lagged_subscriber_logs_warning_and_stops_drain() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let mut queue = SubscriberQueue::new(4);
        for event in 0..10 {
            queue.push(event);
        }
        let mut seen = Vec::new();
        let first = conclave_core::fanout::drain(&mut queue, "election", |e| seen.push(e));
        assert_eq!(first, DrainOutcome::Lagged { missed: 6 });
        assert!(seen.is_empty());
        let second = conclave_core::fanout::drain(&mut queue, "election", |e| seen.push(e));
        assert_eq!(second, DrainOutcome::Drained { delivered: 4 });
        assert_eq!(seen, vec![6, 7, 8, 9]);
        assert_eq!(queue.total_lagged(), 6);
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("election"), "{text}");
    assert!(text.contains('6'), "{text}");
}

/// Seed 000 verification 10, RAFT-6: `majority_threshold` for 1, 2, 3, 5 and 7 nodes.
#[test]
fn seed000_majority_threshold_1_2_3_5_7() {
    let cases = [(1, 1), (2, 1), (3, 2), (5, 3), (7, 4)];
    for (nodes, threshold) in cases {
        assert_eq!(majority_threshold(nodes), threshold, "{nodes} nodes");
    }
}
