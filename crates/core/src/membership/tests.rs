//! Tests of the membership state machine (MEM-2..5, TR-1). Each fires one input and compares
//! the drained actions exactly.

use std::time::Duration;

use conclave_protocol::{Body, DUPLICATE_PEER_ID, Goodbye, Hello, HelloAck, Ping, Pong, Vote};

use super::*;
use crate::fanout::tests::{CapturedLog, capturing_subscriber};
use crate::testing::{drain as drain_actions, id, ms};

// ---------------------------------------------------------------------------------------------
// helpers

fn addr(text: &str) -> LinkAddr {
    LinkAddr::new(text)
}

/// Shows the node's log when a test fails, as CONVENTIONS.md asks.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_test_writer()
            .finish(),
    )
}

/// Everything the machine has queued, in order.
fn hello() -> Body {
    Body::Hello(Hello {})
}

fn ack_ok() -> Body {
    Body::HelloAck(HelloAck {
        success: true,
        error_reason: None,
    })
}

fn ack_duplicate() -> Body {
    Body::HelloAck(HelloAck {
        success: false,
        error_reason: Some(DUPLICATE_PEER_ID.to_owned()),
    })
}

fn ping(timestamp_ms: u64) -> Body {
    Body::Ping(Ping { timestamp_ms })
}

fn pong(timestamp_ms: u64) -> Body {
    Body::Pong(Pong { timestamp_ms })
}

fn goodbye() -> Body {
    Body::Goodbye(Goodbye {})
}

/// A body membership knows nothing about, standing for raft traffic.
fn raft_vote() -> Body {
    Body::Vote(Vote {
        term: 7,
        granted: true,
        pre_vote: false,
        priority: None,
    })
}

fn send(to: &str, body: Body) -> MembershipAction {
    MembershipAction::Send { to: id(to), body }
}

fn reply(to: &str, origin: &str, body: Body) -> MembershipAction {
    MembershipAction::Reply {
        to: id(to),
        origin: addr(origin),
        body,
    }
}

fn broadcast(body: Body) -> MembershipAction {
    MembershipAction::Broadcast { body }
}

fn joined(peer: &str) -> MembershipAction {
    MembershipAction::Publish(MembershipEvent::Joined { peer: id(peer) })
}

fn left(peer: &str) -> MembershipAction {
    MembershipAction::Publish(MembershipEvent::Left {
        peer: id(peer),
        last: PeerStatus::Connected,
    })
}

fn changed(peer: &str, old: PeerStatus, new: PeerStatus) -> MembershipAction {
    MembershipAction::Publish(MembershipEvent::StatusChanged {
        peer: id(peer),
        old,
        new,
    })
}

fn went_silent(peer: &str) -> MembershipAction {
    changed(peer, PeerStatus::Connected, PeerStatus::Disconnected)
}

fn came_back(peer: &str) -> MembershipAction {
    changed(peer, PeerStatus::Disconnected, PeerStatus::Connected)
}

/// A node `local` started at time zero with its opening `Hello` already drained, that has heard
/// a `Hello` from each `(peer, address)` at time zero.
fn node_knowing(local: &str, peers: &[(&str, &str)]) -> Membership {
    let mut node = Membership::new(id(local), MembershipConfig::default(), ms(0));
    for (peer, at) in peers {
        node.handle_frame(ms(0), id(peer), &addr(at), &hello());
    }
    drain_actions(&mut node);
    node
}

/// Fires the timer at every instant `poll_timeout` asks for, up to and including `until`,
/// and returns all actions.
fn run_timers_until(node: &mut Membership, until: Instant) -> Vec<MembershipAction> {
    let mut actions = Vec::new();
    while let Some(at) = node.poll_timeout() {
        if at > until {
            break;
        }
        node.handle_timeout(at);
        actions.extend(drain_actions(node));
    }
    actions
}

// ---------------------------------------------------------------------------------------------
// MEM-2 discovery

/// MEM-2: a node announces itself with a broadcast `Hello` the moment it starts.
#[test]
fn mem2_start_broadcasts_hello_at_once() {
    let _log = log_to_test_output();
    let mut node = Membership::new(id("gw-a"), MembershipConfig::default(), ms(0));
    assert_eq!(drain_actions(&mut node), vec![broadcast(hello())]);
    assert_eq!(node.poll_timeout(), Some(ms(500)));
    assert_eq!(node.local(), id("gw-a"));
    assert!(node.peers().is_empty());
    assert!(!node.is_refused());
}

/// MEM-2: a `Hello` from an unknown id adds it (Connected, at the frame's address), publishes
/// `Joined` and is answered with `HelloAck{success: true}`.
#[test]
fn mem2_hello_from_unknown_id_is_added_and_accepted() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);
    node.handle_frame(ms(30), id("gw-b"), &addr("udp:10.0.0.2:7946"), &hello());
    assert_eq!(
        drain_actions(&mut node),
        vec![joined("gw-b"), reply("gw-b", "udp:10.0.0.2:7946", ack_ok())]
    );
    let peer = node.peers().get(&id("gw-b")).unwrap();
    assert_eq!(peer.addr, addr("udp:10.0.0.2:7946"));
    assert_eq!(peer.status, PeerStatus::Connected);
    assert_eq!(peer.joined_at, ms(30));
}

/// MEM-2: A's broadcast `Hello` reaches B, B answers, and both know each other afterwards.
#[test]
fn mem2_discovery_both_ways() {
    let _log = log_to_test_output();
    let (addr_a, addr_b) = (addr("mem:1"), addr("mem:2"));
    let mut a = Membership::new(id("gw-a"), MembershipConfig::default(), ms(0));
    let mut b = Membership::new(id("gw-b"), MembershipConfig::default(), ms(0));
    // B's own announcement is lost, so only A's Hello and B's answer make the link.
    assert_eq!(drain_actions(&mut b), vec![broadcast(hello())]);

    let MembershipAction::Broadcast { body } = drain_actions(&mut a).remove(0) else {
        panic!("a starting node broadcasts first");
    };
    b.handle_frame(ms(2), id("gw-a"), &addr_a, &body);
    let answer = drain_actions(&mut b);
    assert_eq!(
        answer,
        vec![joined("gw-a"), reply("gw-a", "mem:1", ack_ok())]
    );

    let MembershipAction::Reply { to, body, .. } = &answer[1] else {
        unreachable!("checked above");
    };
    assert_eq!(*to, a.local());
    a.handle_frame(ms(4), id("gw-b"), &addr_b, body);
    assert_eq!(drain_actions(&mut a), vec![joined("gw-b")]);

    assert_eq!(a.peers().connected_peers(), vec![id("gw-b")]);
    assert_eq!(b.peers().connected_peers(), vec![id("gw-a")]);
    assert_eq!(a.peers().get(&id("gw-b")).unwrap().addr, addr_b);
    assert_eq!(b.peers().get(&id("gw-a")).unwrap().addr, addr_a);
}

/// MEM-2: when both announcements cross, each side adds the other once and the acks that
/// follow change nothing.
#[test]
fn mem2_crossing_hellos_join_once() {
    let _log = log_to_test_output();
    let mut a = node_knowing("gw-a", &[]);
    let mut b = node_knowing("gw-b", &[]);
    a.handle_frame(ms(1), id("gw-b"), &addr("mem:2"), &hello());
    b.handle_frame(ms(1), id("gw-a"), &addr("mem:1"), &hello());
    assert_eq!(
        drain_actions(&mut a),
        vec![joined("gw-b"), reply("gw-b", "mem:2", ack_ok())]
    );
    assert_eq!(
        drain_actions(&mut b),
        vec![joined("gw-a"), reply("gw-a", "mem:1", ack_ok())]
    );
    a.handle_frame(ms(2), id("gw-b"), &addr("mem:2"), &ack_ok());
    b.handle_frame(ms(2), id("gw-a"), &addr("mem:1"), &ack_ok());
    assert_eq!(drain_actions(&mut a), vec![]);
    assert_eq!(drain_actions(&mut b), vec![]);
    assert_eq!(a.peers().len(), 1);
    assert_eq!(b.peers().len(), 1);
}

/// MEM-2: a `HelloAck` from an unknown node adds it; from a Disconnected one, revives it.
#[test]
fn mem2_hello_ack_adds_or_revives_the_sender() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);
    node.handle_frame(ms(10), id("gw-b"), &addr("mem:2"), &ack_ok());
    assert_eq!(drain_actions(&mut node), vec![joined("gw-b")]);

    run_timers_until(&mut node, ms(2_000));
    assert_eq!(
        node.peers().status(&id("gw-b")),
        Some(PeerStatus::Disconnected)
    );
    node.handle_frame(ms(2_100), id("gw-b"), &addr("mem:2"), &ack_ok());
    assert_eq!(drain_actions(&mut node), vec![came_back("gw-b")]);
    assert_eq!(node.peers().get(&id("gw-b")).unwrap().last_seen, ms(2_100));
}

/// MEM-2: the `Hello` broadcast repeats every `hello_interval` while no peer is Connected,
/// stops while one is, and resumes when the last one goes silent.
#[test]
fn mem2_hello_repeats_only_while_no_peer_is_connected() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);

    node.handle_timeout(ms(500));
    assert_eq!(drain_actions(&mut node), vec![]);
    assert_eq!(node.poll_timeout(), Some(ms(1_000)));
    node.handle_timeout(ms(1_000));
    assert_eq!(drain_actions(&mut node), vec![broadcast(hello())]);

    node.handle_frame(ms(1_200), id("gw-b"), &addr("mem:2"), &hello());
    assert_eq!(
        drain_actions(&mut node),
        vec![joined("gw-b"), reply("gw-b", "mem:2", ack_ok())]
    );
    // The hello timer is dormant while a peer is connected.
    assert_eq!(node.poll_timeout(), Some(ms(1_500)));
    for (at, then) in [(1_500, 2_000), (2_000, 2_500), (2_500, 3_000)] {
        node.handle_timeout(ms(at));
        assert_eq!(drain_actions(&mut node), vec![send("gw-b", ping(at))]);
        assert_eq!(node.poll_timeout(), Some(ms(then)));
    }

    // Silent since 1.2 s: more than 1.5 s at the 3.0 s tick. Announcing resumes in that tick.
    node.handle_timeout(ms(3_000));
    assert_eq!(
        drain_actions(&mut node),
        vec![
            went_silent("gw-b"),
            send("gw-b", ping(3_000)),
            broadcast(hello())
        ]
    );
    node.handle_timeout(ms(3_500));
    assert_eq!(drain_actions(&mut node), vec![send("gw-b", ping(3_500))]);
    node.handle_timeout(ms(4_000));
    assert_eq!(
        drain_actions(&mut node),
        vec![send("gw-b", ping(4_000)), broadcast(hello())]
    );
}

/// MEM-2: when the last peer says goodbye, an overdue `Hello` goes out at once.
#[test]
fn mem2_losing_the_last_peer_makes_hello_due_at_once() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    run_timers_until(&mut node, ms(1_500));
    node.handle_frame(ms(1_900), id("gw-b"), &addr("mem:2"), &raft_vote());
    run_timers_until(&mut node, ms(2_000));
    node.handle_frame(ms(2_100), id("gw-b"), &addr("mem:2"), &goodbye());
    assert_eq!(drain_actions(&mut node), vec![left("gw-b")]);
    assert_eq!(node.poll_timeout(), Some(ms(1_000)));
    node.handle_timeout(ms(2_100));
    assert_eq!(drain_actions(&mut node), vec![broadcast(hello())]);
    assert_eq!(node.poll_timeout(), Some(ms(2_500)));
}

// ---------------------------------------------------------------------------------------------
// MEM-3 duplicate ids

/// MEM-3: a `Hello` with a live id from another address is refused with
/// `duplicate_peer_id`, the table is left alone, and a warning is logged.
#[test]
fn mem3_hello_with_live_id_from_another_address_is_refused() {
    let log = CapturedLog::default();
    let _log = tracing::subscriber::set_default(capturing_subscriber(&log));
    let mut node = node_knowing("gw-a", &[("gw-b", "udp:10.0.0.2:7946")]);
    let before = node.peers().clone();

    node.handle_frame(ms(100), id("gw-b"), &addr("udp:10.0.0.9:7946"), &hello());
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-b", "udp:10.0.0.9:7946", ack_duplicate())]
    );
    assert_eq!(node.peers(), &before);
    let text = log.text();
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("the id is live at another address"), "{text}");
}

/// MEM-3: the node told its id is taken logs an error, publishes `IdRefused`, and from then on
/// sends nothing at all: no pongs, no pings, no hellos, no goodbye.
#[test]
fn mem3_refused_node_stays_silent() {
    let log = CapturedLog::default();
    let _log = tracing::subscriber::set_default(capturing_subscriber(&log));
    let mut impostor = node_knowing("gw-b", &[]);

    impostor.handle_frame(ms(5), id("gw-a"), &addr("mem:1"), &ack_duplicate());
    assert_eq!(
        drain_actions(&mut impostor),
        vec![
            joined("gw-a"),
            MembershipAction::Publish(MembershipEvent::IdRefused {
                by: id("gw-a"),
                reason: DUPLICATE_PEER_ID.to_owned(),
            }),
        ]
    );
    assert!(impostor.is_refused());
    let text = log.text();
    assert!(text.contains("ERROR"), "{text}");
    assert!(text.contains("this node's id was refused"), "{text}");

    impostor.handle_frame(ms(10), id("gw-a"), &addr("mem:1"), &ping(10));
    impostor.handle_frame(ms(20), id("gw-c"), &addr("mem:3"), &hello());
    assert_eq!(drain_actions(&mut impostor), vec![joined("gw-c")]);

    let later = run_timers_until(&mut impostor, ms(10_000));
    assert!(
        later
            .iter()
            .all(|action| matches!(action, MembershipAction::Publish(_))),
        "a refused node must send nothing: {later:?}"
    );
    impostor.handle_shutdown(ms(10_000));
    assert_eq!(drain_actions(&mut impostor), vec![]);
}

/// MEM-3: the same node restarting from the address it is known at is welcomed back, with no
/// event, because nobody else holds its id.
#[test]
fn mem3_restart_from_the_same_address_is_accepted() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_frame(ms(300), id("gw-b"), &addr("mem:2"), &hello());
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-b", "mem:2", ack_ok())]
    );
    let peer = node.peers().get(&id("gw-b")).unwrap();
    assert_eq!(peer.last_seen, ms(300));
    assert_eq!(peer.joined_at, ms(0));
}

/// MEM-3: an id whose holder went silent may come back from another address: the node moved,
/// nobody live is impersonated.
#[test]
fn mem3_disconnected_id_may_come_back_from_another_address() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "udp:10.0.0.2:7946")]);
    run_timers_until(&mut node, ms(2_000));
    assert_eq!(
        node.peers().status(&id("gw-b")),
        Some(PeerStatus::Disconnected)
    );

    node.handle_frame(
        ms(2_200),
        id("gw-b"),
        &addr("espnow:aa:bb:cc:dd:ee:ff"),
        &hello(),
    );
    assert_eq!(
        drain_actions(&mut node),
        vec![
            came_back("gw-b"),
            reply("gw-b", "espnow:aa:bb:cc:dd:ee:ff", ack_ok())
        ]
    );
    let peer = node.peers().get(&id("gw-b")).unwrap();
    assert_eq!(peer.addr, addr("espnow:aa:bb:cc:dd:ee:ff"));
    assert_eq!(peer.last_seen, ms(2_200));
}

/// MEM-3, TR-1: the same node heard over a second link (UDP and ESP-NOW at once) is one node:
/// its `Hello` there is accepted, and the address it is known at stays.
#[test]
fn mem3_same_node_over_a_second_link_is_accepted() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "udp:10.0.0.2:7946")]);
    node.handle_frame(
        ms(100),
        id("gw-b"),
        &addr("espnow:02:00:00:00:00:0b"),
        &hello(),
    );
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-b", "espnow:02:00:00:00:00:0b", ack_ok())]
    );
    let peer = node.peers().get(&id("gw-b")).unwrap();
    assert_eq!(peer.addr, addr("udp:10.0.0.2:7946"));
    assert_eq!(peer.last_seen, ms(100));
}

/// MEM-3: a `Hello` that admission found contested (another address owns the id on its link)
/// is refused through a reply to its origin, whatever link the id is known on here, and
/// changes nothing: no proof of life, no new address.
#[test]
fn mem3_contested_hello_is_refused_and_changes_nothing() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "espnow:02:00:00:00:00:0b")]);
    let before = node.peers().clone();
    node.handle_contested_hello(ms(100), id("gw-b"), &addr("udp:10.0.0.9:7946"));
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-b", "udp:10.0.0.9:7946", ack_duplicate())]
    );
    assert_eq!(node.peers(), &before);
    // An id this node does not know yet is refused the same way: admission knows its owner.
    node.handle_contested_hello(ms(100), id("gw-c"), &addr("mem:9"));
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-c", "mem:9", ack_duplicate())]
    );
    assert_eq!(node.peers(), &before);
}

/// MEM-2, PROTO-5: a sender that just proved its frames fresh is greeted with a `Hello` at
/// once, through the address it answered from (its own `Hello` was dropped while it was
/// unverified); its answer makes it a member. A node that left greets nobody.
#[test]
fn mem2_verified_sender_is_greeted_at_once() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);
    node.handle_verified(ms(10), id("gw-b"), &addr("mem:2"));
    assert_eq!(
        drain_actions(&mut node),
        vec![reply("gw-b", "mem:2", hello())]
    );
    node.handle_frame(ms(11), id("gw-b"), &addr("mem:2"), &ack_ok());
    assert_eq!(drain_actions(&mut node), vec![joined("gw-b")]);

    node.handle_shutdown(ms(20));
    drain_actions(&mut node);
    node.handle_verified(ms(21), id("gw-c"), &addr("mem:3"));
    assert_eq!(drain_actions(&mut node), vec![]);
}

// ---------------------------------------------------------------------------------------------
// MEM-4 liveness

/// MEM-4: a ping is answered with a pong carrying the same timestamp.
#[test]
fn mem4_ping_is_answered_with_the_same_timestamp() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_frame(ms(40), id("gw-b"), &addr("mem:2"), &ping(987_654));
    assert_eq!(drain_actions(&mut node), vec![send("gw-b", pong(987_654))]);
    assert_eq!(node.peers().get(&id("gw-b")).unwrap().last_seen, ms(40));
}

/// MEM-4: each tick pings every peer in the table, Disconnected ones too, in id order.
#[test]
fn mem4_tick_pings_every_peer_including_disconnected() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-c", "mem:3"), ("gw-b", "mem:2")]);
    node.handle_timeout(ms(500));
    assert_eq!(
        drain_actions(&mut node),
        vec![send("gw-b", ping(500)), send("gw-c", ping(500))]
    );

    // gw-c keeps answering, gw-b falls silent.
    for at in [1_000, 1_500, 2_000] {
        node.handle_frame(ms(at - 10), id("gw-c"), &addr("mem:3"), &pong(at - 500));
        node.handle_timeout(ms(at));
    }
    let actions = drain_actions(&mut node);
    assert_eq!(
        actions[actions.len() - 3..],
        [
            went_silent("gw-b"),
            send("gw-b", ping(2_000)),
            send("gw-c", ping(2_000))
        ]
    );
    node.handle_timeout(ms(2_500));
    assert_eq!(
        drain_actions(&mut node),
        vec![send("gw-b", ping(2_500)), send("gw-c", ping(2_500))]
    );
}

/// MEM-4, quiet air (issue 27): a Connected peer whose election frames arrive between two
/// ticks is pinged only every `RTT_REFRESH_TICKS` ticks, for its round-trip time, and stays
/// Connected; a peer that sends nothing else is pinged every tick; once the other frames stop,
/// the next tick pings again.
#[test]
fn mem4_a_peer_heard_through_election_frames_is_pinged_only_for_its_rtt() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2"), ("gw-c", "mem:3")]);
    let pings_to = |actions: &[MembershipAction], peer: &str| {
        actions
            .iter()
            .filter(|action| {
                matches!(action, MembershipAction::Send { to, body: Body::Ping(_) } if *to == id(peer))
            })
            .count()
    };
    node.handle_timeout(ms(500));
    let first = drain_actions(&mut node);
    assert_eq!((pings_to(&first, "gw-b"), pings_to(&first, "gw-c")), (1, 1));

    // gw-b sends election frames every heartbeat; gw-c only answers pings.
    let refresh = u64::from(RTT_REFRESH_TICKS) * 500;
    let mut pinged_b = Vec::new();
    for at in (1_000..=500 + 2 * refresh).step_by(500) {
        node.handle_frame(ms(at - 10), id("gw-b"), &addr("mem:2"), &raft_vote());
        node.handle_frame(ms(at - 10), id("gw-c"), &addr("mem:3"), &pong(at - 500));
        node.handle_timeout(ms(at));
        let actions = drain_actions(&mut node);
        assert_eq!(pings_to(&actions, "gw-c"), 1, "gw-c is pinged at {at}");
        if pings_to(&actions, "gw-b") == 1 {
            pinged_b.push(at);
        }
        for peer in ["gw-b", "gw-c"] {
            assert_eq!(
                node.peers().status(&id(peer)),
                Some(PeerStatus::Connected),
                "{peer} at {at}"
            );
        }
    }
    assert_eq!(pinged_b, vec![500 + refresh, 500 + 2 * refresh]);

    // gw-b's election frames stop: frames of the last two ticks still count (a follower on a
    // radio answers every other heartbeat), so the second tick after them pings it.
    let mut pinged = Vec::new();
    for at in [500 + 2 * refresh + 500, 500 + 2 * refresh + 1_000] {
        node.handle_frame(ms(at - 10), id("gw-c"), &addr("mem:3"), &pong(at - 500));
        node.handle_timeout(ms(at));
        let actions = drain_actions(&mut node);
        pinged.push((pings_to(&actions, "gw-b"), pings_to(&actions, "gw-c")));
    }
    assert_eq!(pinged, vec![(0, 1), (1, 1)]);
}

/// MEM-4: a peer whose ping arrived since the last tick is not pinged back (its ping and the
/// pong that answers it prove both sides alive) but for its round-trip time; two followers
/// that send each other nothing else settle on one of them pinging.
#[test]
fn mem4_a_peer_that_pings_is_not_pinged_back() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    let ping = Body::Ping(Ping { timestamp_ms: 1 });
    node.handle_timeout(ms(500));
    drain_actions(&mut node);
    let mut pings = Vec::new();
    for at in (1_000..=4_000).step_by(500) {
        node.handle_frame(ms(at - 10), id("gw-b"), &addr("mem:2"), &ping);
        node.handle_timeout(ms(at));
        let actions = drain_actions(&mut node);
        let pongs = actions
            .iter()
            .filter(|action| {
                matches!(
                    action,
                    MembershipAction::Send {
                        body: Body::Pong(_),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(pongs, 1, "gw-b's ping at {at} is answered");
        let pinged = actions.iter().any(|action| {
            matches!(
                action,
                MembershipAction::Send {
                    body: Body::Ping(_),
                    ..
                }
            )
        });
        pings.push(pinged);
        assert_eq!(
            node.peers().status(&id("gw-b")),
            Some(PeerStatus::Connected)
        );
    }
    assert!(pings.iter().all(|pinged| !pinged), "{pings:?}");
    // Its pings stop: the next tick pings it.
    node.handle_timeout(ms(4_500));
    let actions = drain_actions(&mut node);
    assert!(
        actions
            .iter()
            .any(|action| matches!(action, MembershipAction::Send { to, body: Body::Ping(_) } if *to == id("gw-b")))
    );
}

/// MEM-4: a Connected peer becomes Disconnected when silent for more than exactly
/// `heartbeat_interval × timeout_multiplier` (1.5 s), not a microsecond before.
#[test]
fn mem4_silence_timeout_is_exact() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2"), ("gw-c", "mem:3")]);
    node.handle_frame(
        Instant::from_micros(499_999),
        id("gw-b"),
        &addr("mem:2"),
        &raft_vote(),
    );
    node.handle_frame(
        Instant::from_micros(500_000),
        id("gw-c"),
        &addr("mem:3"),
        &raft_vote(),
    );

    for at in [500, 1_000, 1_500] {
        node.handle_timeout(ms(at));
    }
    drain_actions(&mut node);
    assert_eq!(node.peers().connected_count(), 2);

    // At 2.0 s gw-b has been silent 1.500001 s, gw-c exactly 1.5 s.
    node.handle_timeout(ms(2_000));
    assert_eq!(
        drain_actions(&mut node),
        vec![
            went_silent("gw-b"),
            send("gw-b", ping(2_000)),
            send("gw-c", ping(2_000))
        ]
    );
    assert_eq!(node.peers().connected_peers(), vec![id("gw-c")]);

    node.handle_timeout(ms(2_500));
    assert_eq!(
        drain_actions(&mut node),
        vec![
            went_silent("gw-c"),
            send("gw-b", ping(2_500)),
            send("gw-c", ping(2_500)),
            broadcast(hello())
        ]
    );
    assert_eq!(node.peers().connected_count(), 0);
}

/// MEM-4: the timeout follows the configuration: interval × multiplier.
#[test]
fn mem4_silence_timeout_follows_the_configuration() {
    let _log = log_to_test_output();
    let config = MembershipConfig {
        heartbeat_interval: Duration::from_millis(100),
        timeout_multiplier: 5,
        hello_interval: Duration::from_secs(1),
        announce_interval: Duration::from_secs(10),
        expected_peers: 0,
    };
    assert_eq!(config.silence_timeout(), Duration::from_millis(500));
    let mut node = Membership::new(id("gw-a"), config, ms(0));
    node.handle_frame(ms(0), id("gw-b"), &addr("mem:2"), &hello());
    for at in (100..=500).step_by(100) {
        node.handle_timeout(ms(at));
    }
    assert_eq!(
        node.peers().status(&id("gw-b")),
        Some(PeerStatus::Connected)
    );
    node.handle_timeout(ms(600));
    assert_eq!(
        node.peers().status(&id("gw-b")),
        Some(PeerStatus::Disconnected)
    );
}

/// MEM-4: any frame, raft traffic included, refreshes last-seen, and a Disconnected peer heard
/// again becomes Connected.
#[test]
fn mem4_disconnected_peer_heard_again_is_connected() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    run_timers_until(&mut node, ms(2_000));
    drain_actions(&mut node);
    assert_eq!(
        node.peers().status(&id("gw-b")),
        Some(PeerStatus::Disconnected)
    );

    node.handle_frame(ms(2_300), id("gw-b"), &addr("mem:2"), &raft_vote());
    assert_eq!(drain_actions(&mut node), vec![came_back("gw-b")]);
    assert_eq!(node.peers().get(&id("gw-b")).unwrap().last_seen, ms(2_300));

    node.handle_frame(ms(2_400), id("gw-b"), &addr("mem:2"), &raft_vote());
    assert_eq!(drain_actions(&mut node), vec![]);
    assert_eq!(node.peers().get(&id("gw-b")).unwrap().last_seen, ms(2_400));
}

/// MEM-4: a healed partition reconnects through the probes: the pong to a ping sent while the
/// peer was Disconnected brings it back and measures it.
#[test]
fn mem4_pong_from_disconnected_peer_reconnects_it() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    run_timers_until(&mut node, ms(2_000));
    node.handle_frame(ms(2_003), id("gw-b"), &addr("mem:2"), &pong(2_000));
    assert_eq!(drain_actions(&mut node), vec![came_back("gw-b")]);
    assert_eq!(
        node.peers().rtt(&id("gw-b")),
        Some(Duration::from_millis(3))
    );
}

/// MEM-4: RTT accuracy. A pong echoing the last ping 12.345 ms after it was sent gives exactly
/// 12.345 ms, at microsecond precision, and refreshes last-seen.
#[test]
fn mem4_rtt_of_matching_pong_is_exact_to_the_microsecond() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_timeout(ms(500));
    assert_eq!(drain_actions(&mut node), vec![send("gw-b", ping(500))]);

    let arrival = Instant::from_micros(512_345);
    node.handle_frame(arrival, id("gw-b"), &addr("mem:2"), &pong(500));
    assert_eq!(drain_actions(&mut node), vec![]);
    let peer = node.peers().get(&id("gw-b")).unwrap();
    assert_eq!(peer.rtt, Some(Duration::from_micros(12_345)));
    assert_eq!(peer.last_seen, arrival);
}

/// MEM-4: RTT accuracy when the pong does not echo the last ping (an older ping, or a ping of
/// a previous life): whole milliseconds from the echoed timestamp, never negative.
#[test]
fn mem4_rtt_of_stale_pong_falls_back_to_milliseconds() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_timeout(ms(500));
    drain_actions(&mut node);

    node.handle_frame(
        Instant::from_micros(512_345),
        id("gw-b"),
        &addr("mem:2"),
        &pong(400),
    );
    assert_eq!(
        node.peers().rtt(&id("gw-b")),
        Some(Duration::from_millis(112))
    );

    node.handle_frame(ms(520), id("gw-b"), &addr("mem:2"), &pong(9_999));
    assert_eq!(node.peers().rtt(&id("gw-b")), Some(Duration::ZERO));
}

/// MEM-4: a duplicated pong is measured once against the ping's send time; the copy falls back
/// to millisecond arithmetic instead of reusing it.
#[test]
fn mem4_duplicated_pong_is_measured_once() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_timeout(Instant::from_micros(500_000));
    drain_actions(&mut node);
    node.handle_frame(
        Instant::from_micros(502_500),
        id("gw-b"),
        &addr("mem:2"),
        &pong(500),
    );
    assert_eq!(
        node.peers().rtt(&id("gw-b")),
        Some(Duration::from_micros(2_500))
    );
    node.handle_frame(
        Instant::from_micros(504_900),
        id("gw-b"),
        &addr("mem:2"),
        &pong(500),
    );
    assert_eq!(
        node.peers().rtt(&id("gw-b")),
        Some(Duration::from_millis(4))
    );
}

/// MEM-4: a late driver does not get a burst of missed ticks, only one, and the schedule
/// moves on from the late instant.
#[test]
fn mem4_late_timer_runs_one_tick() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_frame(ms(1_700), id("gw-b"), &addr("mem:2"), &raft_vote());
    node.handle_timeout(ms(1_750));
    assert_eq!(drain_actions(&mut node), vec![send("gw-b", ping(1_750))]);
    assert_eq!(node.poll_timeout(), Some(ms(2_250)));
}

/// MEM-4: zero intervals are raised to 1 ms so the driver never spins on `poll_timeout`.
#[test]
fn mem4_zero_intervals_are_raised() {
    let config = MembershipConfig {
        heartbeat_interval: Duration::ZERO,
        timeout_multiplier: 3,
        hello_interval: Duration::ZERO,
        announce_interval: Duration::ZERO,
        expected_peers: 0,
    };
    let node = Membership::new(id("gw-a"), config, ms(10));
    assert_eq!(node.config().heartbeat_interval, Duration::from_millis(1));
    assert_eq!(node.poll_timeout(), Some(ms(11)));
}

// ---------------------------------------------------------------------------------------------
// MEM-5 events, TR-1 implicit members, goodbye, shutdown

/// MEM-5: `Goodbye` removes the peer and publishes `Left`; from an unknown id it does nothing.
#[test]
fn mem5_goodbye_removes_the_peer() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2"), ("gw-c", "mem:3")]);
    node.handle_frame(ms(50), id("gw-b"), &addr("mem:2"), &goodbye());
    assert_eq!(drain_actions(&mut node), vec![left("gw-b")]);
    assert!(!node.peers().has(&id("gw-b")));
    node.handle_frame(ms(60), id("gw-x"), &addr("mem:9"), &goodbye());
    assert_eq!(drain_actions(&mut node), vec![]);
    assert_eq!(node.peers().len(), 1);
}

/// MEM-5: events of one tick come out in the order they happened: the silence of every peer
/// (in id order), then the probes.
#[test]
fn mem5_events_are_published_in_order() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-c", "mem:3"), ("gw-b", "mem:2")]);
    run_timers_until(&mut node, ms(1_500));
    node.handle_timeout(ms(2_000));
    assert_eq!(
        drain_actions(&mut node),
        vec![
            went_silent("gw-b"),
            went_silent("gw-c"),
            send("gw-b", ping(2_000)),
            send("gw-c", ping(2_000)),
            broadcast(hello()),
        ]
    );
}

/// TR-1: a frame of any kind from an unknown, authenticated sender makes it a member at the
/// address the frame came from.
#[test]
fn tr1_frame_from_unknown_sender_adds_it() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);
    node.handle_frame(ms(70), id("gw-c"), &addr("udp:10.0.0.3:7946"), &raft_vote());
    assert_eq!(drain_actions(&mut node), vec![joined("gw-c")]);
    node.handle_frame(ms(80), id("gw-d"), &addr("mem:4"), &ping(80));
    assert_eq!(
        drain_actions(&mut node),
        vec![joined("gw-d"), send("gw-d", pong(80))]
    );
    assert_eq!(
        node.peers().get(&id("gw-c")).unwrap().addr,
        addr("udp:10.0.0.3:7946")
    );
    assert_eq!(node.peers().connected_count(), 2);
}

/// MEM-4, TR-1: `handle_heard` (an election message the driver did not copy) has exactly the
/// effect of `handle_frame` with that body: an unknown sender joins, a Disconnected one comes
/// back, a Connected one is touched; our own echo and anything after leaving are ignored.
#[test]
fn mem4_heard_without_the_body_is_the_same_as_the_frame() {
    let _log = log_to_test_output();
    let mut by_frame = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    let mut by_heard = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    let inputs = [
        (5, "gw-a", "mem:1"),
        (70, "gw-c", "mem:3"),
        (2_300, "gw-b", "mem:2"),
        (2_400, "gw-b", "mem:2"),
    ];
    for (at, from, origin) in inputs {
        let timers = run_timers_until(&mut by_frame, ms(at));
        assert_eq!(timers, run_timers_until(&mut by_heard, ms(at)));
        by_frame.handle_frame(ms(at), id(from), &addr(origin), &raft_vote());
        by_heard.handle_heard(ms(at), id(from), &addr(origin));
        assert_eq!(
            drain_actions(&mut by_frame),
            drain_actions(&mut by_heard),
            "actions after {from} at {at} ms"
        );
        assert_eq!(
            by_frame.peers().list().collect::<Vec<_>>(),
            by_heard.peers().list().collect::<Vec<_>>()
        );
    }
    assert_eq!(
        by_heard.peers().status(&id("gw-b")),
        Some(PeerStatus::Connected)
    );
    assert_eq!(
        by_heard.peers().get(&id("gw-b")).unwrap().last_seen,
        ms(2_400)
    );
    assert!(by_heard.peers().has(&id("gw-c")));
    assert!(!by_heard.peers().has(&id("gw-a")));

    by_heard.handle_shutdown(ms(2_500));
    drain_actions(&mut by_heard);
    by_heard.handle_heard(ms(2_600), id("gw-d"), &addr("mem:4"));
    assert_eq!(drain_actions(&mut by_heard), vec![]);
    assert!(!by_heard.peers().has(&id("gw-d")));
}

/// MEM-1: frames claiming to come from the local node itself (an echo of its own broadcast)
/// change nothing; the node is never its own peer.
#[test]
fn mem1_frames_from_self_are_ignored() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[]);
    for body in [hello(), ack_duplicate(), ping(1), raft_vote(), goodbye()] {
        node.handle_frame(ms(5), id("gw-a"), &addr("mem:1"), &body);
    }
    assert_eq!(drain_actions(&mut node), vec![]);
    assert!(node.peers().is_empty());
    assert!(!node.is_refused());
}

/// MEM-2: shutdown broadcasts `Goodbye`, once, and afterwards the node is inert: no timer, no
/// answers, no table changes.
#[test]
fn mem2_shutdown_says_goodbye_then_goes_quiet() {
    let _log = log_to_test_output();
    let mut node = node_knowing("gw-a", &[("gw-b", "mem:2")]);
    node.handle_shutdown(ms(100));
    assert_eq!(drain_actions(&mut node), vec![broadcast(goodbye())]);
    assert_eq!(node.poll_timeout(), None);
    node.handle_shutdown(ms(110));
    node.handle_frame(ms(120), id("gw-c"), &addr("mem:3"), &ping(120));
    node.handle_timeout(ms(5_000));
    assert_eq!(drain_actions(&mut node), vec![]);
    assert!(!node.peers().has(&id("gw-c")));
}
