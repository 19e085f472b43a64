//! Whole nodes through the embedding API (EMB-1, CB-1, CB-5): three nodes in this process over
//! UDP on loopback elect one leader, `set_leader` moves leadership, a stopping leader hands
//! over and the others' subscribers see the new leader with a higher term; a single node run
//! from a tokio program leads and says so through its async subscription; a dropped node
//! releases its data directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use conclave::{Event, LeaderChangeCause, Node, PeerId, Role, Subscription};
use support::{PATIENCE, free_udp_addrs, node_toml, start, test_log, wait_event, wait_for};
use tempfile::TempDir;

/// The leader every node agrees on, with its term, when exactly one node says it leads.
fn agreed_leader(nodes: &[&Node]) -> Option<(PeerId, u64)> {
    let token = nodes[0].leader().ok()??;
    for node in nodes {
        if node.leader().ok()?? != token {
            return None;
        }
    }
    let leading: Vec<PeerId> = nodes
        .iter()
        .filter(|node| node.is_leader())
        .map(|node| node.id())
        .collect();
    (leading == [token.leader]).then_some((token.leader, token.term))
}

/// EMB-1, CB-1, CB-5, RAFT-8: one leader of three, moved by `set_leader`, handed over by
/// `stop`, each change seen by subscribers with its fencing token.
#[test]
fn three_nodes_elect_move_and_hand_over() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let names = ["emb-a", "emb-b", "emb-c"];
    let addrs = free_udp_addrs(names.len());
    let mut nodes = Vec::new();
    let mut events = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let peers = addrs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, addr)| addr.clone())
            .collect();
        let node = start(&node_toml(
            name,
            dir.path(),
            &names,
            Some((&addrs[i], peers)),
        ));
        events.push(node.subscribe());
        nodes.push(node);
    }
    let all: Vec<&Node> = nodes.iter().collect();
    let (leader, term) = wait_for("one leader agreed by all three", || agreed_leader(&all));
    let leader_at = nodes.iter().position(|n| n.id() == leader).unwrap();
    wait_event(
        &mut events[leader_at],
        "the leader's own LeaderChanged",
        |event| {
            let Event::LeaderChanged(change) = event else {
                return None;
            };
            (change.leader == Some(leader) && change.role == Role::Leader).then_some(())
        },
    );
    let peers = nodes[leader_at].peers().unwrap();
    assert_eq!(peers.len(), 2, "{peers:?}");

    // set_leader, asked of a follower, goes to the leader and moves leadership.
    let target_at = (leader_at + 1) % nodes.len();
    let asker_at = (leader_at + 2) % nodes.len();
    let target = nodes[target_at].id();
    nodes[asker_at].set_leader(target).unwrap();
    let moved_term = wait_event(&mut events[target_at], "the target taking over", |event| {
        let Event::LeaderChanged(change) = event else {
            return None;
        };
        (change.leader == Some(target) && change.role == Role::Leader).then_some(change.term)
    });
    assert!(moved_term > term, "set_leader kept term {term}");
    let (agreed, _) = wait_for("all three following the target", || agreed_leader(&all));
    assert_eq!(agreed, target);

    // The target stops: it hands over, and the two others see a new leader in a higher term.
    let stopping = nodes.remove(target_at);
    let mut survivors_events: Vec<Subscription> = events
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != target_at)
        .map(|(_, events)| events)
        .collect();
    stopping.stop();
    let mut successors = 0;
    for events in &mut survivors_events {
        // Older events (the first election, the move) are still queued; the hand-over's is
        // the first naming another leader in a term above the target's.
        let change = wait_event(events, "a successor in a higher term", |event| {
            let Event::LeaderChanged(change) = event else {
                return None;
            };
            (change.term > moved_term && change.leader.is_some_and(|l| l != target))
                .then(|| change.clone())
        });
        if change.role == Role::Leader {
            // The successor took over because the stopping leader handed over, not because
            // it missed heartbeats for an election timeout.
            assert_eq!(change.cause, LeaderChangeCause::Transfer, "{change:?}");
            successors += 1;
        }
    }
    assert_eq!(successors, 1, "one survivor must have taken over");
    let survivors: Vec<&Node> = nodes.iter().collect();
    let (successor, _) = wait_for("the survivors agreeing", || agreed_leader(&survivors));
    assert_ne!(successor, target);
}

/// EMB-1: a tokio program starts a single node, awaits its subscription until it leads, and
/// stops it; the node's own actix system runs beside the program's runtime.
#[tokio::test]
async fn a_tokio_program_embeds_a_single_node() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = start(&node_toml("solo", dir.path(), &[], None));
    let mut events = node.subscribe();
    let change = tokio::time::timeout(PATIENCE, async {
        loop {
            match events.recv().await {
                Some(Event::LeaderChanged(change)) if change.role == Role::Leader => {
                    break change;
                }
                Some(_) => {}
                None => panic!("the node stopped"),
            }
        }
    })
    .await
    .expect("the single node never led");
    assert_eq!(change.leader, Some(node.id()));
    assert!(node.is_leader());
    let token = node.leader().unwrap().expect("a leader");
    assert_eq!((token.leader, token.term), (node.id(), change.term));
    let status = node.status().unwrap();
    assert_eq!(status.election.role, Role::Leader);
    assert!(node.peers().unwrap().is_empty());
    node.stop();
    // The leader steps down as it stops (nobody to hand over to), then the stream ends.
    let stepped_down = tokio::time::timeout(PATIENCE, async {
        let mut stepped_down = false;
        while let Some(event) = events.recv().await {
            if let Event::LeaderChanged(change) = event {
                stepped_down |= change.stepped_down;
            }
        }
        stepped_down
    })
    .await
    .expect("the subscription did not end with the node");
    assert!(stepped_down, "no step-down was published at the stop");
}

/// EMB-1: a second node on a data directory in use is refused with the reason; dropping the
/// first stops it and unlocks the directory, so a new node starts there.
#[test]
fn drop_stops_the_node_and_releases_its_data_directory() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let toml = node_toml("solo", dir.path(), &[], None);
    let first = start(&toml);
    let refused = Node::start(conclave::config::from_toml_str(&toml).unwrap()).unwrap_err();
    assert!(matches!(refused, conclave::Error::Node(_)), "{refused}");
    drop(first);
    let again = start(&toml);
    assert_eq!(again.id().to_string(), "solo");
}
