//! Unit tests of the priority election: one input, exact equality on the drained actions.
//! Each test names the requirement it covers. Jitter is off unless a test is about jitter, so
//! every deadline is exact.

use std::time::Duration;

use conclave_protocol::{
    Candidate, Discover, DiscoverAck, MasterAnnounce, MasterResign, PriorityVote, ResignReason,
};

use super::*;
use crate::SeededRng;
use crate::election::{
    Action, Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken,
    HardState, HealthReading, LeaderChangeCause, PeerSignal, PriorityMessage, PrioritySetting,
    Role, Setting,
};
use crate::testing::{drain, id, ms as at};
use crate::time::Instant;

fn config(name: &str) -> PriorityConfig {
    PriorityConfig {
        jitter_max: Duration::ZERO,
        ..PriorityConfig::new(id(name))
    }
}

fn start(config: PriorityConfig, restored: HardState) -> Priority {
    Priority::new(config, restored, SeededRng::new(7), Instant::ZERO).unwrap()
}

fn node(name: &str) -> Priority {
    start(config(name), HardState::default())
}

fn round(term: u64) -> HardState {
    HardState {
        term,
        ..HardState::default()
    }
}

/// The round and the master followed at that round, as a follower persists them (CB-5).
fn following(term: u64, master: &str) -> HardState {
    HardState {
        term,
        vote: Some(id(master)),
        ..HardState::default()
    }
}

fn broadcast(message: PriorityMessage) -> Action {
    Action::Broadcast {
        message: ElectionMessage::Priority(message),
    }
}

fn send(to: &str, message: PriorityMessage) -> Action {
    Action::Send {
        to: id(to),
        message: ElectionMessage::Priority(message),
    }
}

fn role_changed(term: u64, state: PriorityState) -> Action {
    Action::Publish(Event::RoleChanged {
        term,
        role: state.role(),
        phase: state.label(),
    })
}

fn leader_changed(term: u64, leader: Option<&str>, role: Role, cause: LeaderChangeCause) -> Action {
    Action::Publish(Event::LeaderChanged {
        term,
        leader: leader.map(id),
        role,
        cause,
    })
}

/// A score with this battery and nothing else, for peers in messages.
fn score(battery: u8) -> u32 {
    priority_score(battery, 0, 0, 0)
}

fn announce(priority: u32, round: u64, forced: bool) -> PriorityMessage {
    PriorityMessage::MasterAnnounce(MasterAnnounce {
        peer_count: 1,
        uptime_s: 60,
        battery: battery_of(priority),
        priority,
        round,
        forced,
    })
}

/// The announcement `node` sends now.
fn own_announce(node: &Priority, round: u64, peer_count: u16, now: Instant) -> PriorityMessage {
    PriorityMessage::MasterAnnounce(MasterAnnounce {
        peer_count,
        uptime_s: u32::try_from(now.as_millis() / 1000).unwrap(),
        battery: node.status().battery,
        priority: node.score(),
        round,
        forced: node.status().forced,
    })
}

/// Starts `node` and runs its first discovery (at the restored round: it looks for a running
/// master before it opens a round) at time 0.
fn discovering(node: &mut Priority) {
    let deadline = node.poll_timeout().unwrap();
    assert_eq!(
        deadline,
        Instant::ZERO,
        "no jitter: discovery starts at once"
    );
    node.handle_timeout(deadline);
    drain(node);
    assert_eq!(node.state(), PriorityState::Discovering);
}

/// A node that discovered nobody and became master alone, at round 2, at 500 ms.
fn master_alone(name: &str) -> Priority {
    let mut node = node(name);
    discovering(&mut node);
    node.handle_timeout(at(500));
    drain(&mut node);
    assert_eq!(node.state(), PriorityState::Master);
    assert_eq!(node.term(), 2);
    node
}

/// A node following `master` at `master_round`, confirmed by an announcement at 100 ms.
fn follower_of(name: &str, master: &str, master_round: u64, master_battery: u8) -> Priority {
    let mut node = node(name);
    discovering(&mut node);
    node.handle_message(
        at(100),
        id(master),
        announce(score(master_battery), master_round, false),
    );
    drain(&mut node);
    assert_eq!(node.leader(), Some(id(master)));
    node
}

/// A master at round 2 that knows `peers` (name, battery) from their discovery answers.
fn master_with_peers(name: &str, peers: &[(&str, u8)]) -> Priority {
    let mut node = node(name);
    discovering(&mut node);
    for &(peer, battery) in peers {
        node.handle_message(
            at(10),
            id(peer),
            PriorityMessage::DiscoverAck(DiscoverAck {
                priority: score(battery),
                known_master: None,
                round: 1,
            }),
        );
    }
    node.handle_timeout(at(500)); // campaign
    for &(peer, battery) in peers {
        node.handle_message(
            at(510),
            id(peer),
            PriorityMessage::Vote(PriorityVote {
                candidate: id(name),
                voter_priority: score(battery),
                accept: true,
                round: 1,
            }),
        );
    }
    drain(&mut node);
    assert_eq!(node.state(), PriorityState::Master);
    assert_eq!(node.term(), 2);
    node
}

// ---------------------------------------------------------------------------------------------
// PRI-1

/// PRI-1: the score is battery, uptime minutes, inverted mean RSSI and a random byte, each in
/// its own byte; the inputs are the health reading, `now` since start, and the peer signals.
#[test]
fn pri1_score_from_battery_uptime_signal_and_random() {
    let mut node = node("pod-a");
    node.handle_health(
        at(0),
        HealthReading {
            battery_percent: 80,
            priority: None,
        },
    );
    node.handle_peer_signal(
        at(0),
        PeerSignal {
            peer: id("pod-b"),
            rssi_dbm: -40.0,
        },
    );
    node.handle_peer_signal(
        at(0),
        PeerSignal {
            peer: id("pod-c"),
            rssi_dbm: -90.0,
        },
    );
    // A reading that is not a number is no reading.
    node.handle_peer_signal(
        at(0),
        PeerSignal {
            peer: id("pod-d"),
            rssi_dbm: f64::NAN,
        },
    );
    node.handle_timeout(at(7 * 60_000 + 5));
    let status = node.status();
    let random = u8::try_from(status.score & 0xFF).unwrap();
    assert_eq!(status.score, priority_score(80, 7, 190, random));
    assert_eq!(
        (status.battery, status.uptime_minutes, status.signal),
        (80, 7, 190)
    );
    // A battery reading above 100 counts as 100.
    node.handle_health(
        at(7 * 60_000 + 5),
        HealthReading {
            battery_percent: 250,
            priority: None,
        },
    );
    assert_eq!(battery_of(node.score()), 100);
    // Membership reporting a peer gone drops its signal.
    node.handle_peer_status(at(7 * 60_000 + 5), id("pod-c"), false);
    assert_eq!(node.status().signal, 215);
}

/// PRI-1: the random byte is drawn again for every election, so two pods tied on battery,
/// uptime and signal do not stay tied.
#[test]
fn pri1_random_byte_is_drawn_per_election() {
    let mut node = node("pod-a");
    let mut bytes = std::collections::BTreeSet::new();
    let mut now = Instant::ZERO;
    for _ in 0..8 {
        node.handle_timeout(now); // Idle → Discovering, or Follower timeout → Discovering
        drain(&mut node);
        assert_eq!(node.state(), PriorityState::Discovering);
        bytes.insert(node.score() & 0xFF);
        // A master appears, then falls silent: the next election draws again.
        now += Duration::from_millis(10);
        node.handle_message(
            now,
            id("pod-m"),
            announce(score(99), node.term() + 1, false),
        );
        drain(&mut node);
        now = node.poll_timeout().unwrap();
    }
    assert!(bytes.len() > 1, "{bytes:?}");
}

// ---------------------------------------------------------------------------------------------
// PRI-2

/// PRI-2, PRI-4: a node starts idle, waits out a random delay below `jitter_max`, then
/// broadcasts `Discover` at the round it has (it looks for a running master first) and
/// discovers for 500 ms plus jitter; finding no master, it opens round 1 (persisted first)
/// and campaigns in it.
#[test]
fn pri2_start_jitter_then_discovery_then_a_new_round() {
    let mut jittered = Priority::new(
        PriorityConfig::new(id("pod-a")),
        HardState::default(),
        SeededRng::new(3),
        Instant::ZERO,
    )
    .unwrap();
    assert_eq!(jittered.state(), PriorityState::Idle);
    let start = jittered.poll_timeout().unwrap();
    assert!(start < at(100), "{start:?}");
    jittered.handle_timeout(start);
    drain(&mut jittered);
    let deadline = jittered.poll_timeout().unwrap();
    assert!(
        deadline >= start + Duration::from_millis(500)
            && deadline < start + Duration::from_millis(600),
        "{deadline:?}"
    );

    let mut node = node("pod-a");
    assert_eq!(drain(&mut node), vec![], "nothing before the first input");
    assert_eq!(node.poll_timeout(), Some(Instant::ZERO));
    node.handle_timeout(Instant::ZERO);
    assert_eq!(
        drain(&mut node),
        vec![
            broadcast(PriorityMessage::Discover(Discover {
                protocol_version: PRIORITY_PROTOCOL_VERSION,
                priority: node.score(),
                round: 0,
            })),
            role_changed(0, PriorityState::Discovering),
        ]
    );
    assert_eq!(node.poll_timeout(), Some(at(500)));
    node.handle_message(
        at(20),
        id("pod-b"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(40),
            known_master: None,
            round: 0,
        }),
    );
    drain(&mut node);
    node.handle_timeout(at(500));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(1)),
            broadcast(PriorityMessage::Candidate(Candidate {
                priority: node.score(),
                round: 1,
            })),
            Action::Publish(Event::ElectionStarted {
                term: 1,
                phase: "discovery"
            }),
            role_changed(1, PriorityState::Campaigning),
        ]
    );
}

/// PRI-2: a peer that membership finds during a discovery is asked too — it may have missed
/// the broadcast, its socket bound a few milliseconds after this node's — so that three
/// nodes started together do not leave the first one master alone; a peer found outside a
/// discovery is not.
#[test]
fn pri2_a_peer_found_during_discovery_is_asked_too() {
    let mut node = node("pod-a");
    discovering(&mut node);
    node.handle_peer_status(at(30), id("pod-b"), true);
    assert_eq!(
        drain(&mut node),
        vec![send(
            "pod-b",
            PriorityMessage::Discover(Discover {
                protocol_version: PRIORITY_PROTOCOL_VERSION,
                priority: node.score(),
                round: 0,
            })
        )]
    );
    node.handle_message(
        at(40),
        id("pod-b"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(40),
            known_master: None,
            round: 0,
        }),
    );
    drain(&mut node);
    node.handle_timeout(at(500));
    drain(&mut node);
    assert_eq!(
        node.state(),
        PriorityState::Campaigning,
        "pod-b was heard: not master alone"
    );

    let mut master = master_alone("pod-c");
    master.handle_peer_status(at(600), id("pod-d"), true);
    assert_eq!(drain(&mut master), vec![]);
}

/// PRI-2: after discovery a node that heard peers campaigns (200 ms) with its score and
/// round, waits for votes (300 ms), and wins at once when every peer heard has accepted.
#[test]
fn pri2_candidate_wins_once_every_peer_heard_accepts() {
    let mut node = node("pod-a");
    discovering(&mut node);
    node.handle_message(
        at(20),
        id("pod-b"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(40),
            known_master: None,
            round: 1,
        }),
    );
    // The peer's round is above its own: kept, and it campaigns in that round.
    assert_eq!(drain(&mut node), vec![Action::Persist(round(1))]);
    node.handle_timeout(at(500));
    assert_eq!(
        drain(&mut node),
        vec![
            broadcast(PriorityMessage::Candidate(Candidate {
                priority: node.score(),
                round: 1,
            })),
            Action::Publish(Event::ElectionStarted {
                term: 1,
                phase: "discovery"
            }),
            role_changed(1, PriorityState::Campaigning),
        ]
    );
    assert_eq!(node.poll_timeout(), Some(at(700)));
    node.handle_timeout(at(700));
    assert_eq!(
        drain(&mut node),
        vec![role_changed(1, PriorityState::WaitingForVotes)]
    );
    assert_eq!(node.poll_timeout(), Some(at(1000)));
    // A vote for an earlier round does not count.
    node.handle_message(
        at(710),
        id("pod-b"),
        PriorityMessage::Vote(PriorityVote {
            candidate: id("pod-a"),
            voter_priority: score(40),
            accept: true,
            round: 0,
        }),
    );
    assert_eq!(drain(&mut node), vec![]);
    node.handle_message(
        at(720),
        id("pod-b"),
        PriorityMessage::Vote(PriorityVote {
            candidate: id("pod-a"),
            voter_priority: score(40),
            accept: true,
            round: 1,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(2)),
            broadcast(own_announce(&node, 2, 1, at(720))),
            Action::Publish(Event::ElectionWon {
                term: 2,
                duration: Duration::from_millis(720),
            }),
            role_changed(2, PriorityState::Master),
            leader_changed(2, Some("pod-a"), Role::Leader, LeaderChangeCause::VoteWon),
        ]
    );
    assert_eq!(node.poll_timeout(), Some(at(1720)));
}

/// PRI-2: a node still electing accepts a candidate that outranks it and waits for it to
/// announce (a follower without a master yet); it refuses one it outranks.
#[test]
fn pri2_vote_accepts_a_higher_candidate_and_refuses_a_lower_one() {
    let mut node = node("pod-a"); // battery 100
    discovering(&mut node);
    node.handle_message(
        at(10),
        id("pod-low"),
        PriorityMessage::Candidate(Candidate {
            priority: score(30),
            round: 1,
        }),
    );
    let mine = node.score();
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(1)),
            send(
                "pod-low",
                PriorityMessage::Vote(PriorityVote {
                    candidate: id("pod-low"),
                    voter_priority: mine,
                    accept: false,
                    round: 1,
                })
            ),
            Action::Publish(Event::VoteCast {
                term: 1,
                candidate: id("pod-low"),
                granted: false,
                pre_vote: false,
            }),
        ]
    );
    let higher = mine + 1;
    node.handle_message(
        at(20),
        id("pod-high"),
        PriorityMessage::Candidate(Candidate {
            priority: higher,
            round: 1,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            send(
                "pod-high",
                PriorityMessage::Vote(PriorityVote {
                    candidate: id("pod-high"),
                    voter_priority: mine,
                    accept: true,
                    round: 1,
                })
            ),
            Action::Publish(Event::VoteCast {
                term: 1,
                candidate: id("pod-high"),
                granted: true,
                pre_vote: false,
            }),
            role_changed(1, PriorityState::Follower),
        ]
    );
    assert_eq!(node.status().awaiting, Some(id("pod-high")));
    assert_eq!(node.leader(), None);
    // Having accepted pod-high, it refuses a candidate between itself and pod-high.
    node.handle_message(
        at(30),
        id("pod-mid"),
        PriorityMessage::Candidate(Candidate {
            priority: higher - 1,
            round: 1,
        }),
    );
    assert!(matches!(
        drain(&mut node)[0],
        Action::Send {
            message: ElectionMessage::Priority(PriorityMessage::Vote(PriorityVote {
                accept: false,
                ..
            })),
            ..
        }
    ));
    // The accepted candidate announces: followed, confirmed.
    node.handle_message(at(600), id("pod-high"), announce(higher, 2, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(following(2, "pod-high")),
            leader_changed(
                2,
                Some("pod-high"),
                Role::Follower,
                LeaderChangeCause::LeaderHeard
            ),
        ]
    );
    assert_eq!(node.poll_timeout(), Some(at(3600)));
}

/// PRI-2: the candidate a node waits for is accepted again when it campaigns in a later
/// election with a lower score (a new random byte), without the wait growing; a different
/// candidate below the awaited score is still refused.
#[test]
fn pri2_awaited_candidate_is_accepted_again_with_a_new_score() {
    let mut node = node("pod-a");
    discovering(&mut node);
    let higher = node.score() + 100;
    node.handle_message(
        at(10),
        id("pod-b"),
        PriorityMessage::Candidate(Candidate {
            priority: higher,
            round: 1,
        }),
    );
    drain(&mut node);
    assert_eq!(node.status().awaiting, Some(id("pod-b")));
    assert_eq!(node.poll_timeout(), Some(at(3010)));
    node.handle_message(
        at(2000),
        id("pod-b"),
        PriorityMessage::Candidate(Candidate {
            priority: higher - 50,
            round: 2,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(2)),
            send(
                "pod-b",
                PriorityMessage::Vote(PriorityVote {
                    candidate: id("pod-b"),
                    voter_priority: node.score(),
                    accept: true,
                    round: 2,
                })
            ),
            Action::Publish(Event::VoteCast {
                term: 2,
                candidate: id("pod-b"),
                granted: true,
                pre_vote: false,
            }),
        ]
    );
    assert_eq!(
        node.poll_timeout(),
        Some(at(3010)),
        "the wait does not grow"
    );
    node.handle_message(
        at(2010),
        id("pod-c"),
        PriorityMessage::Candidate(Candidate {
            priority: higher - 60,
            round: 2,
        }),
    );
    assert!(matches!(
        drain(&mut node)[0],
        Action::Send {
            message: ElectionMessage::Priority(PriorityMessage::Vote(PriorityVote {
                accept: false,
                ..
            })),
            ..
        }
    ));
}

/// PRI-2: a candidate refused by a voter that outranks it ("I have higher priority") stops
/// campaigning and waits for that voter.
#[test]
fn pri2_refusal_from_a_higher_voter_makes_the_candidate_wait() {
    let mut node = node("pod-a");
    discovering(&mut node);
    node.handle_message(
        at(10),
        id("pod-b"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: 0,
            known_master: None,
            round: 1,
        }),
    );
    node.handle_timeout(at(500));
    drain(&mut node);
    node.handle_message(
        at(510),
        id("pod-b"),
        PriorityMessage::Vote(PriorityVote {
            candidate: id("pod-a"),
            voter_priority: u32::MAX,
            accept: false,
            round: 1,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![role_changed(1, PriorityState::Follower)]
    );
    assert_eq!(node.status().awaiting, Some(id("pod-b")));
    // It waits a master timeout for the announcement, then starts a new round.
    assert_eq!(node.poll_timeout(), Some(at(3510)));
}

/// PRI-2: without every accept, a candidate campaigns again (at most `max_retries` times, with
/// jitter), then falls back to the seed's rule: nobody it heard outranks it, so it is master.
#[test]
fn pri2_at_most_three_retries_then_highest_known_wins() {
    let mut node = node("pod-a");
    discovering(&mut node);
    node.handle_message(
        at(10),
        id("pod-silent"),
        PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: 0,
            round: 1,
        }),
    );
    drain(&mut node);
    let mut now = at(500);
    let mut candidates = 0;
    loop {
        node.handle_timeout(now);
        for action in drain(&mut node) {
            if matches!(
                action,
                Action::Broadcast {
                    message: ElectionMessage::Priority(PriorityMessage::Candidate(_))
                }
            ) {
                candidates += 1;
            }
        }
        if node.is_leader() {
            break;
        }
        now = node.poll_timeout().unwrap();
    }
    assert_eq!(candidates, 1 + 3, "the first campaign and three retries");
    // Four rounds of 200 + 300 ms after the 500 ms discovery.
    assert_eq!(now, at(500 + 4 * 500));
    assert_eq!(node.term(), 2);
}

// ---------------------------------------------------------------------------------------------
// PRI-3

/// PRI-3: the master announces every second with its score, round and battery.
#[test]
fn pri3_master_announces_every_second() {
    let mut node = master_alone("pod-a");
    assert_eq!(node.poll_timeout(), Some(at(1500)));
    node.handle_timeout(at(1500));
    assert_eq!(
        drain(&mut node),
        vec![broadcast(own_announce(&node, 2, 0, at(1500)))]
    );
    assert_eq!(node.poll_timeout(), Some(at(2500)));
    // Early calls do nothing.
    node.handle_timeout(at(2000));
    assert_eq!(drain(&mut node), vec![]);
}

/// PRI-3: a follower declares its master dead after 3 s of silence and starts a new round
/// (the round increments and is persisted before the `Discover` that carries it).
#[test]
fn pri3_master_dead_after_three_seconds_new_round() {
    let mut node = follower_of("pod-a", "pod-m", 4, 90);
    // Announcements keep it alive.
    node.handle_message(at(2000), id("pod-m"), announce(score(90), 4, false));
    assert_eq!(drain(&mut node), vec![]);
    assert_eq!(node.poll_timeout(), Some(at(5000)));
    node.handle_timeout(at(4999));
    assert_eq!(drain(&mut node), vec![]);
    node.handle_timeout(at(5000));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(5)),
            broadcast(PriorityMessage::Discover(Discover {
                protocol_version: PRIORITY_PROTOCOL_VERSION,
                priority: node.score(),
                round: 5,
            })),
            Action::Publish(Event::ElectionStarted {
                term: 5,
                phase: "discovery"
            }),
            role_changed(5, PriorityState::Discovering),
            leader_changed(5, None, Role::Candidate, LeaderChangeCause::ElectionTimeout),
        ]
    );
}

/// PRI-3: an announcement older than the last one heard (reordered) neither moves the round
/// back nor keeps a dead master alive.
#[test]
fn pri3_reordered_older_announcement_is_ignored() {
    let mut node = follower_of("pod-a", "pod-m", 4, 90);
    node.handle_message(at(2000), id("pod-m"), announce(score(90), 3, false));
    assert_eq!(drain(&mut node), vec![]);
    assert_eq!(node.poll_timeout(), Some(at(3100)));
    assert_eq!(node.term(), 4);
}

// ---------------------------------------------------------------------------------------------
// PRI-4

/// PRI-4: a single node becomes master when its discovery times out with no answer.
#[test]
fn pri4_single_node_master_after_discovery() {
    let mut node = node("pod-a");
    discovering(&mut node);
    assert_eq!(node.poll_timeout(), Some(at(500)));
    node.handle_timeout(at(500));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(2)),
            broadcast(own_announce(&node, 2, 0, at(500))),
            Action::Publish(Event::ElectionStarted {
                term: 1,
                phase: "discovery"
            }),
            Action::Publish(Event::ElectionWon {
                term: 2,
                duration: Duration::from_millis(500),
            }),
            role_changed(2, PriorityState::Master),
            leader_changed(2, Some("pod-a"), Role::Leader, LeaderChangeCause::VoteWon),
        ]
    );
}

/// PRI-4: a late joiner adopts the master a `DiscoverAck` names, without an election, and
/// takes the master's round as its fencing token.
#[test]
fn pri4_late_joiner_adopts_the_master_from_discover_ack() {
    let mut node = node("pod-j");
    discovering(&mut node);
    node.handle_message(
        at(15),
        id("pod-f"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(50),
            known_master: Some(id("pod-m")),
            round: 6,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(following(6, "pod-m")),
            role_changed(6, PriorityState::Follower),
            leader_changed(
                6,
                Some("pod-m"),
                Role::Follower,
                LeaderChangeCause::LeaderHeard
            ),
        ]
    );
    assert_eq!(
        node.fencing_token(),
        Some(FencingToken {
            term: 6,
            leader: id("pod-m")
        })
    );
    assert!(!node.status().master_confirmed);
    // No campaign follows: the next timer is the master's silence, not the discovery end.
    assert_eq!(node.poll_timeout(), Some(at(3015)));
    node.handle_message(at(900), id("pod-m"), announce(score(90), 6, false));
    assert_eq!(drain(&mut node), vec![]);
    assert!(node.status().master_confirmed);
}

/// PRI-4, CB-5: a follower that stopped and starts again from its WAL (round 2, master
/// pod-m) looks for the master at the round it persisted, not a new one, and takes pod-m back
/// from its answer: nothing is persisted, no round above the master's leaves, and the
/// fencing token is the one it had, so the master has no reason to move.
#[test]
fn pri4_restarted_follower_takes_its_master_back_at_the_same_round() {
    let mut node = start(config("pod-f"), following(2, "pod-m"));
    node.handle_timeout(Instant::ZERO);
    assert_eq!(
        drain(&mut node),
        vec![
            broadcast(PriorityMessage::Discover(Discover {
                protocol_version: PRIORITY_PROTOCOL_VERSION,
                priority: node.score(),
                round: 2,
            })),
            role_changed(2, PriorityState::Discovering),
        ]
    );
    node.handle_message(
        at(4),
        id("pod-m"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(100),
            known_master: Some(id("pod-m")),
            round: 2,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            role_changed(2, PriorityState::Follower),
            leader_changed(
                2,
                Some("pod-m"),
                Role::Follower,
                LeaderChangeCause::LeaderHeard
            ),
        ]
    );
    assert_eq!(
        node.fencing_token(),
        Some(FencingToken {
            term: 2,
            leader: id("pod-m")
        })
    );
    assert!(node.status().master_confirmed);
    assert_eq!(node.hard_state(), following(2, "pod-m"));
}

/// CB-5: the restarted follower takes no other master at its persisted round (its token would
/// go sideways): it raises its round and tells that master, as any node would.
#[test]
fn cb5_restarted_follower_takes_no_other_master_at_the_same_round() {
    let mut node = start(config("pod-f"), following(2, "pod-m"));
    discovering(&mut node);
    node.handle_message(at(4), id("pod-x"), announce(score(90), 2, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(3)),
            send(
                "pod-x",
                PriorityMessage::DiscoverAck(DiscoverAck {
                    priority: node.score(),
                    known_master: None,
                    round: 3,
                })
            ),
        ]
    );
    assert_eq!(node.leader(), None);
}

/// PRI-4, CB-5: a `DiscoverAck` naming a master at a round below this node's (the master it
/// just declared dead, as a peer that has not noticed yet still says) is not followed.
#[test]
fn pri4_ack_naming_a_master_below_the_known_round_is_ignored() {
    let mut node = follower_of("pod-a", "pod-m", 4, 90);
    node.handle_timeout(at(3100)); // pod-m silent: round 5
    drain(&mut node);
    node.handle_message(
        at(3110),
        id("pod-f"),
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: score(50),
            known_master: Some(id("pod-m")),
            round: 4,
        }),
    );
    assert_eq!(drain(&mut node), vec![]);
    assert_eq!(node.state(), PriorityState::Discovering);
}

/// PRI-4: a follower of a live master answers a `Discover` with its score, the master and
/// the master's round; a master names itself.
#[test]
fn pri4_discover_is_answered_with_the_known_master() {
    let mut follower = follower_of("pod-f", "pod-m", 4, 90);
    let discover = PriorityMessage::Discover(Discover {
        protocol_version: PRIORITY_PROTOCOL_VERSION,
        priority: score(10),
        round: 1,
    });
    follower.handle_message(at(200), id("pod-j"), discover.clone());
    assert_eq!(
        drain(&mut follower),
        vec![send(
            "pod-j",
            PriorityMessage::DiscoverAck(DiscoverAck {
                priority: follower.score(),
                known_master: Some(id("pod-m")),
                round: 4,
            })
        )]
    );
    let mut master = master_alone("pod-m");
    master.handle_message(at(600), id("pod-j"), discover);
    assert_eq!(
        drain(&mut master),
        vec![send(
            "pod-j",
            PriorityMessage::DiscoverAck(DiscoverAck {
                priority: master.score(),
                known_master: Some(id("pod-m")),
                round: 2,
            })
        )]
    );
    // A Discover of another protocol version is ignored.
    master.handle_message(
        at(700),
        id("pod-x"),
        PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION + 1,
            priority: 0,
            round: 1,
        }),
    );
    assert_eq!(drain(&mut master), vec![]);
}

/// PRI-4: a master is not deposed by a candidate: it answers with its announcement; a
/// follower of a live master answers with a `DiscoverAck` naming it instead of voting.
#[test]
fn pri4_live_master_is_not_deposed_by_a_candidate() {
    let candidate = PriorityMessage::Candidate(Candidate {
        priority: u32::MAX,
        round: 2,
    });
    let mut master = master_alone("pod-m");
    master.handle_message(at(600), id("pod-x"), candidate.clone());
    assert_eq!(
        drain(&mut master),
        vec![send("pod-x", own_announce(&master, 2, 1, at(600)))]
    );
    let mut follower = follower_of("pod-f", "pod-m", 4, 90);
    follower.handle_message(at(200), id("pod-x"), candidate);
    assert_eq!(
        drain(&mut follower),
        vec![send(
            "pod-x",
            PriorityMessage::DiscoverAck(DiscoverAck {
                priority: follower.score(),
                known_master: Some(id("pod-m")),
                round: 4,
            })
        )]
    );
    assert_eq!(follower.leader(), Some(id("pod-m")));
}

/// PRI-3: followers give up at once on a master that restarted (it discovers again).
#[test]
fn pri3_followers_notice_a_restarted_master_at_once() {
    let mut node = follower_of("pod-a", "pod-m", 4, 90);
    node.handle_message(
        at(500),
        id("pod-m"),
        PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: score(90),
            round: 5,
        }),
    );
    let actions = drain(&mut node);
    assert_eq!(node.state(), PriorityState::Discovering);
    assert_eq!(node.leader(), None);
    assert!(actions.contains(&leader_changed(
        5,
        None,
        Role::Candidate,
        LeaderChangeCause::HigherTerm
    )));
}

/// PRI-2, PRI-3: a node waiting for a candidate it accepted gives that candidate up at once
/// when it discovers again (it restarted, or started over), and joins the new election, as a
/// follower does with a restarted master. Found by the simulator (`priority-defaults` seed
/// 16373): the candidate's announcement was lost, it crashed and restarted; the nodes still
/// waiting for it refused every other candidate for the rest of their master timeout, and each
/// candidate they refused waited for them in turn, so no master appeared for over 4 s after
/// the faults stopped.
#[test]
fn pri2_awaited_candidate_that_discovers_again_is_given_up() {
    let mut node = node("pod-a");
    discovering(&mut node);
    let higher = node.score() + 100;
    node.handle_message(
        at(10),
        id("pod-b"),
        PriorityMessage::Candidate(Candidate {
            priority: higher,
            round: 1,
        }),
    );
    drain(&mut node);
    assert_eq!(node.status().awaiting, Some(id("pod-b")));
    node.handle_message(
        at(1500),
        id("pod-b"),
        PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: higher,
            round: 1,
        }),
    );
    let actions = drain(&mut node);
    assert_eq!(node.state(), PriorityState::Discovering);
    assert_eq!(node.status().awaiting, None);
    assert_eq!(node.term(), 2);
    assert_eq!(
        actions[..2],
        [
            Action::Persist(round(2)),
            broadcast(PriorityMessage::Discover(Discover {
                protocol_version: PRIORITY_PROTOCOL_VERSION,
                priority: node.score(),
                round: 2,
            })),
        ]
    );
    // It still answers the discovery.
    assert!(actions.contains(&send(
        "pod-b",
        PriorityMessage::DiscoverAck(DiscoverAck {
            priority: node.score(),
            known_master: None,
            round: 2,
        })
    )));
}

// ---------------------------------------------------------------------------------------------
// PRI-5

/// PRI-5: a master whose battery drops to the threshold resigns, naming the best successor
/// (the highest score it knows), and sits the next election out.
#[test]
fn pri5_low_battery_master_resigns_to_the_best_successor() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 80), ("pod-c", 50)]);
    node.handle_health(
        at(900),
        HealthReading {
            battery_percent: 16,
            priority: None,
        },
    );
    assert_eq!(drain(&mut node), vec![], "16 % is above the threshold");
    node.handle_health(
        at(1000),
        HealthReading {
            battery_percent: 15,
            priority: None,
        },
    );
    assert_eq!(
        drain(&mut node),
        vec![
            broadcast(PriorityMessage::MasterResign(MasterResign {
                reason: ResignReason::LowBattery,
                successor: Some(id("pod-b")),
                round: 2,
            })),
            role_changed(2, PriorityState::Idle),
            leader_changed(2, None, Role::Follower, LeaderChangeCause::Resign),
        ]
    );
    // Sitting out: it accepts any candidate rather than running.
    node.handle_message(
        at(1100),
        id("pod-c"),
        PriorityMessage::Candidate(Candidate {
            priority: score(50),
            round: 3,
        }),
    );
    assert!(drain(&mut node).contains(&Action::Publish(Event::VoteCast {
        term: 3,
        candidate: id("pod-c"),
        granted: true,
        pre_vote: false,
    })));
}

/// PRI-5: with no peer above the threshold, a low-battery master stays master, so a pod of
/// flat batteries does not hand the role around forever.
#[test]
fn pri5_low_battery_without_a_better_peer_stays_master() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 10)]);
    node.handle_health(
        at(1000),
        HealthReading {
            battery_percent: 5,
            priority: None,
        },
    );
    assert_eq!(drain(&mut node), vec![]);
    assert_eq!(node.state(), PriorityState::Master);
}

/// PRI-5: the named successor becomes master at once, with a round above the resigning
/// master's.
#[test]
fn pri5_named_successor_is_master_at_once() {
    let mut node = follower_of("pod-b", "pod-a", 4, 90);
    node.handle_message(
        at(1000),
        id("pod-a"),
        PriorityMessage::MasterResign(MasterResign {
            reason: ResignReason::LowBattery,
            successor: Some(id("pod-b")),
            round: 4,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(5)),
            broadcast(own_announce(&node, 5, 1, at(1000))),
            role_changed(5, PriorityState::Master),
            leader_changed(5, Some("pod-b"), Role::Leader, LeaderChangeCause::Resign),
        ]
    );
}

/// PRI-5: every other follower of the resigning master starts a new election; the
/// successor's announcement ends it.
#[test]
fn pri5_other_followers_start_a_new_election() {
    let mut node = follower_of("pod-c", "pod-a", 4, 90);
    node.handle_message(
        at(1000),
        id("pod-a"),
        PriorityMessage::MasterResign(MasterResign {
            reason: ResignReason::UserRequest,
            successor: Some(id("pod-b")),
            round: 4,
        }),
    );
    let actions = drain(&mut node);
    assert_eq!(actions[0], Action::Persist(round(5)));
    assert_eq!(node.state(), PriorityState::Discovering);
    assert!(actions.contains(&leader_changed(
        5,
        None,
        Role::Candidate,
        LeaderChangeCause::Resign
    )));
    node.handle_message(at(1005), id("pod-b"), announce(score(80), 5, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(following(5, "pod-b")),
            role_changed(5, PriorityState::Follower),
            leader_changed(
                5,
                Some("pod-b"),
                Role::Follower,
                LeaderChangeCause::LeaderHeard
            ),
        ]
    );
}

/// PRI-5: `conclave leader resign` on the master hands over to the best successor; on a
/// follower it is refused, naming the master.
#[test]
fn pri5_user_request_resign_names_the_successor() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 80)]);
    assert_eq!(
        node.handle_command(at(1000), Command::Resign),
        Ok(CommandOutcome::TransferStarted {
            target: id("pod-b")
        })
    );
    assert_eq!(
        drain(&mut node)[0],
        broadcast(PriorityMessage::MasterResign(MasterResign {
            reason: ResignReason::UserRequest,
            successor: Some(id("pod-b")),
            round: 2,
        }))
    );
    let mut follower = follower_of("pod-f", "pod-m", 4, 90);
    assert_eq!(
        follower.handle_command(at(200), Command::Resign),
        Err(ElectionError::NotLeader {
            leader: Some(id("pod-m"))
        })
    );
    // Alone, a master steps down without a successor.
    let mut alone = master_alone("pod-z");
    assert_eq!(
        alone.handle_command(at(600), Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
}

/// PRI-5: a master that shuts down resigns with reason "shutting down" and its successor,
/// publishes that it no longer leads, and stops.
#[test]
fn pri5_shutdown_resigns_with_successor() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 80)]);
    node.handle_shutdown(at(1000));
    assert_eq!(
        drain(&mut node),
        vec![
            broadcast(PriorityMessage::MasterResign(MasterResign {
                reason: ResignReason::Shutdown,
                successor: Some(id("pod-b")),
                round: 2,
            })),
            role_changed(2, PriorityState::Idle),
            leader_changed(2, None, Role::Follower, LeaderChangeCause::Shutdown),
            Action::Stopped,
        ]
    );
    assert_eq!(node.poll_timeout(), None);
    // A follower only stops.
    let mut follower = follower_of("pod-f", "pod-m", 4, 90);
    follower.handle_shutdown(at(200));
    assert_eq!(
        drain(&mut follower),
        vec![role_changed(4, PriorityState::Idle), Action::Stopped]
    );
}

/// PRI-5: membership reporting a peer gone removes it from the successors.
#[test]
fn pri5_disconnected_peer_is_no_successor() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 80), ("pod-c", 50)]);
    node.handle_peer_status(at(900), id("pod-b"), false);
    assert_eq!(
        node.handle_command(at(1000), Command::Resign),
        Ok(CommandOutcome::TransferStarted {
            target: id("pod-c")
        })
    );
}

// ---------------------------------------------------------------------------------------------
// PRI-6

/// PRI-6: a master that meets a master of higher priority at a higher round yields to it.
#[test]
fn pri6_lower_master_yields_to_a_higher_one() {
    let mut node = master_alone("pod-a"); // round 2
    node.handle_message(at(600), id("pod-b"), announce(u32::MAX >> 1, 3, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(following(3, "pod-b")),
            Action::Publish(Event::SplitBrain {
                term: 3,
                known: id("pod-a"),
                other: id("pod-b"),
            }),
            role_changed(3, PriorityState::Follower),
            leader_changed(
                3,
                Some("pod-b"),
                Role::Follower,
                LeaderChangeCause::Priority
            ),
        ]
    );
}

/// PRI-6, CB-5: a master of lower priority but a higher round does not yield yet: it tells
/// the winner its round, so the winner moves above it and the token never goes back.
#[test]
fn pri6_loser_with_higher_round_tells_the_winner_first() {
    let mut node = master_alone("pod-a"); // round 2
    node.handle_message(at(600), id("pod-b"), announce(u32::MAX >> 1, 1, false));
    let actions = drain(&mut node);
    assert_eq!(
        actions[0],
        send("pod-b", own_announce(&node, 2, 1, at(600)))
    );
    assert!(node.is_leader());
}

/// PRI-6, CB-5: the higher master moves to a round above both and announces at once; the
/// conflict is reported once.
#[test]
fn pri6_winner_moves_above_both_rounds() {
    let mut node = master_alone("pod-z"); // round 2
    node.handle_message(at(600), id("pod-b"), announce(score(1), 7, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(8)),
            broadcast(own_announce(&node, 8, 1, at(600))),
            Action::Publish(Event::SplitBrain {
                term: 7,
                known: id("pod-z"),
                other: id("pod-b"),
            }),
            leader_changed(8, Some("pod-z"), Role::Leader, LeaderChangeCause::Priority),
        ]
    );
    // The loser repeats itself before it hears: the winner answers, no second report.
    node.handle_message(at(700), id("pod-b"), announce(score(1), 7, false));
    assert_eq!(
        drain(&mut node),
        vec![broadcast(own_announce(&node, 8, 1, at(700)))]
    );
}

/// PRI-6: a follower moves to another master only if it outranks its own and has moved to a
/// higher round; a lower master at a higher round does not take it.
#[test]
fn pri6_follower_moves_only_to_the_winner() {
    let mut node = follower_of("pod-f", "pod-m", 4, 60);
    node.handle_message(at(200), id("pod-low"), announce(score(20), 9, false));
    assert_eq!(drain(&mut node), vec![Action::Persist(round(9))]);
    assert_eq!(node.leader(), Some(id("pod-m")));
    node.handle_message(at(300), id("pod-high"), announce(score(90), 10, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(following(10, "pod-high")),
            leader_changed(
                10,
                Some("pod-high"),
                Role::Follower,
                LeaderChangeCause::Priority
            ),
        ]
    );
}

/// PRI-6: force master by configuration: master at the first timeout, before any discovery,
/// announcing itself as forced.
#[test]
fn pri6_force_master_by_config() {
    let mut node = start(
        PriorityConfig {
            force_master: true,
            battery_percent: 1,
            ..config("pod-a")
        },
        round(3),
    );
    assert_eq!(node.poll_timeout(), Some(Instant::ZERO));
    node.handle_timeout(Instant::ZERO);
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(4)),
            broadcast(own_announce(&node, 4, 0, Instant::ZERO)),
            role_changed(4, PriorityState::ForcedMaster),
            leader_changed(
                4,
                Some("pod-a"),
                Role::Leader,
                LeaderChangeCause::Configured
            ),
        ]
    );
    // It wins over a master of any score.
    node.handle_message(at(10), id("pod-b"), announce(u32::MAX, 4, false));
    assert_eq!(node.state(), PriorityState::ForcedMaster);
    assert_eq!(node.term(), 5);
}

/// PRI-6: `conclave leader set <self>` forces this node master at once, whatever its score;
/// the pin is persisted with the new round, and a restart comes back forced.
#[test]
fn pri6_force_master_by_command_persists() {
    let mut node = follower_of("pod-a", "pod-m", 4, 100);
    assert_eq!(
        node.handle_command(at(200), Command::SetLeader(id("pod-a"))),
        Ok(CommandOutcome::Applied)
    );
    let pinned = HardState {
        term: 5,
        vote: None,
        manual_override: Some(id("pod-a")),
    };
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(pinned),
            broadcast(own_announce(&node, 5, 1, at(200))),
            role_changed(5, PriorityState::ForcedMaster),
            leader_changed(5, Some("pod-a"), Role::Leader, LeaderChangeCause::SetLeader),
        ]
    );
    let mut restarted = start(config("pod-a"), pinned);
    restarted.handle_timeout(Instant::ZERO);
    assert_eq!(restarted.state(), PriorityState::ForcedMaster);
    assert_eq!(restarted.term(), 6);
    assert_eq!(
        drain(&mut restarted).last(),
        Some(&leader_changed(
            6,
            Some("pod-a"),
            Role::Leader,
            LeaderChangeCause::SetLeader
        ))
    );
    // Resigning clears the pin.
    assert_eq!(
        restarted.handle_command(at(10), Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
    assert_eq!(restarted.hard_state().manual_override, None);
}

/// PRI-6: `conclave leader set <other>` on the master hands over to that peer; on a follower
/// it is refused naming the master; an unknown peer is refused.
#[test]
fn pri6_set_leader_other_on_master_hands_over() {
    let mut node = master_with_peers("pod-a", &[("pod-b", 20), ("pod-c", 80)]);
    assert_eq!(
        node.handle_command(at(1000), Command::SetLeader(id("pod-x"))),
        Err(ElectionError::UnknownPeer(id("pod-x")))
    );
    assert_eq!(
        node.handle_command(at(1000), Command::SetLeader(id("pod-b"))),
        Ok(CommandOutcome::TransferStarted {
            target: id("pod-b")
        })
    );
    assert_eq!(
        drain(&mut node)[0],
        broadcast(PriorityMessage::MasterResign(MasterResign {
            reason: ResignReason::UserRequest,
            successor: Some(id("pod-b")),
            round: 2,
        }))
    );
    let mut follower = follower_of("pod-f", "pod-m", 4, 90);
    assert_eq!(
        follower.handle_command(at(200), Command::SetLeader(id("pod-b"))),
        Err(ElectionError::NotLeader {
            leader: Some(id("pod-m"))
        })
    );
}

// ---------------------------------------------------------------------------------------------
// CB-5 fencing

/// CB-5: a restarted node's first master round is above the round it persisted, and the
/// persist comes before the announcement that carries it; it looks for a master at the
/// persisted round first, which needs no persist.
#[test]
fn cb5_master_round_above_the_persisted_round() {
    let mut node = start(config("pod-a"), round(41));
    node.handle_timeout(Instant::ZERO);
    assert_eq!(
        drain(&mut node)[0],
        broadcast(PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: node.score(),
            round: 41,
        }))
    );
    node.handle_timeout(at(500));
    let actions = drain(&mut node);
    assert_eq!(actions[0], Action::Persist(round(43)));
    assert_eq!(actions[1], broadcast(own_announce(&node, 43, 0, at(500))));
}

/// CB-5: a master that hears a higher round (a node that declared it dead) moves above it at
/// once and announces, so that node can follow it without its token going back.
#[test]
fn cb5_master_moves_above_a_higher_round_it_hears() {
    let mut node = master_alone("pod-m"); // round 2
    node.handle_message(
        at(700),
        id("pod-f"),
        PriorityMessage::Discover(Discover {
            protocol_version: PRIORITY_PROTOCOL_VERSION,
            priority: score(10),
            round: 5,
        }),
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(6)),
            broadcast(own_announce(&node, 6, 1, at(700))),
            send(
                "pod-f",
                PriorityMessage::DiscoverAck(DiscoverAck {
                    priority: node.score(),
                    known_master: Some(id("pod-m")),
                    round: 6,
                })
            ),
            leader_changed(
                6,
                Some("pod-m"),
                Role::Leader,
                LeaderChangeCause::HigherTerm
            ),
        ]
    );
}

/// CB-5: a node electing at a round above a live master's does not follow it (its token
/// would go back) but tells it its round; it follows once the master moved above.
#[test]
fn cb5_electing_node_nudges_a_lower_round_master() {
    let mut node = start(config("pod-a"), round(6));
    discovering(&mut node); // round 6
    node.handle_message(at(100), id("pod-m"), announce(score(90), 3, false));
    assert_eq!(
        drain(&mut node),
        vec![send(
            "pod-m",
            PriorityMessage::DiscoverAck(DiscoverAck {
                priority: node.score(),
                known_master: None,
                round: 6,
            })
        )]
    );
    node.handle_message(at(110), id("pod-m"), announce(score(90), 8, false));
    assert_eq!(node.fencing_token().map(|t| t.term), Some(8));
}

/// CB-5: a master that resigned (its token `2:pod-a`) and then hears another master of the
/// same round 2 (from another partition) does not take it, since its token would go sideways;
/// it raises its round and tells that master, and follows it once it moved above.
#[test]
fn cb5_token_never_goes_sideways_after_resign() {
    let mut node = master_alone("pod-a"); // round 2
    assert_eq!(
        node.handle_command(at(600), Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
    drain(&mut node);
    node.handle_message(at(700), id("pod-b"), announce(score(50), 2, false));
    assert_eq!(
        drain(&mut node),
        vec![
            Action::Persist(round(3)),
            send(
                "pod-b",
                PriorityMessage::DiscoverAck(DiscoverAck {
                    priority: node.score(),
                    known_master: None,
                    round: 3,
                })
            ),
        ]
    );
    assert_eq!(node.leader(), None);
    node.handle_message(at(710), id("pod-b"), announce(score(50), 4, false));
    assert_eq!(
        node.fencing_token(),
        Some(FencingToken {
            term: 4,
            leader: id("pod-b")
        })
    );
}

// ---------------------------------------------------------------------------------------------
// the other inputs

/// MEM-3: a node whose id is refused leaves the election silently: a master steps down
/// without a message, commands are refused, and no timer is armed.
#[test]
fn id_refused_leaves_the_election() {
    let mut node = master_alone("pod-a");
    node.handle_id_refused(at(600));
    assert_eq!(
        drain(&mut node),
        vec![
            role_changed(2, PriorityState::Idle),
            leader_changed(2, None, Role::Follower, LeaderChangeCause::Quarantined),
        ]
    );
    assert_eq!(node.poll_timeout(), None);
    assert_eq!(
        node.handle_command(at(700), Command::SetLeader(id("pod-a"))),
        Err(ElectionError::Quarantined)
    );
    node.handle_message(at(800), id("pod-b"), announce(1, 9, false));
    assert_eq!(drain(&mut node), vec![]);
    assert!(node.status().quarantined);
}

/// RAFT-8's switch in priority mode: with automatic election off the node persists the
/// switch and stops campaigning; it still follows.
#[test]
fn auto_election_off_stops_campaigning() {
    let mut node = node("pod-a");
    discovering(&mut node);
    assert_eq!(
        node.handle_command(at(10), Command::EnableAutoElection(false)),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(
        drain(&mut node),
        vec![
            Action::PersistAutoElection(false),
            role_changed(0, PriorityState::Idle),
        ]
    );
    // Its idle timer leads to discovery, never to a campaign or a mastership.
    let mut now = node.poll_timeout().unwrap();
    for _ in 0..4 {
        node.handle_timeout(now);
        for action in drain(&mut node) {
            assert!(
                !matches!(
                    action,
                    Action::Broadcast {
                        message: ElectionMessage::Priority(
                            PriorityMessage::Candidate(_) | PriorityMessage::MasterAnnounce(_)
                        )
                    }
                ),
                "{action:?}"
            );
        }
        now = node.poll_timeout().unwrap();
    }
    node.handle_message(now, id("pod-m"), announce(1, 50, false));
    assert_eq!(node.leader(), Some(id("pod-m")));
}

/// Construction refuses bad settings, naming them: a master timeout no longer than the
/// announce interval is the announce interval's problem.
#[test]
fn new_refuses_bad_settings() {
    let bad = PriorityConfig {
        master_timeout: Duration::from_millis(500),
        ..config("pod-a")
    };
    let err =
        Priority::new(bad, HardState::default(), SeededRng::new(1), Instant::ZERO).unwrap_err();
    let ElectionError::InvalidConfig(problems) = &err else {
        panic!("expected InvalidConfig, got {err}");
    };
    assert_eq!(
        problems.iter().map(|p| p.setting).collect::<Vec<_>>(),
        [Setting::Priority(PrioritySetting::AnnounceInterval)]
    );
    assert!(err.to_string().contains("master timeout"), "{err}");
}
