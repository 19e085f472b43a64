//! Gateways over ESP-NOW only (ESP-1..8, TR-1): each node opens its own virtual dongle's
//! pseudo-terminal by path with tokio-serial, as it would open a real `/dev/ttyACM0`, and the
//! dongles share one simulated air. Three gateways elect a leader; the leader's dongle is
//! unplugged (its pty closed) and the others elect a new one; the dongle comes back and the
//! node rejoins without restarting the process. Five gateways split 3+2 on the air keep one
//! leader on the majority side, and one leader once healed.

use std::time::Duration;

use conclave_actors::events::{EventSubscription, NodeEvent, Received};
use conclave_config::Quorum;
use conclave_core::election::Role;
use conclave_protocol::PeerId;
use conclave_tests::{RadioCluster, test_log};

const BOUND: Duration = Duration::from_secs(15);

/// ESP-5, RAFT-2..4: unplugging the leader's dongle makes the others elect a new leader; the
/// replugged dongle is set up again by the driver and its node rejoins as a follower, in the
/// same process.
#[actix_rt::test]
async fn three_gateways_survive_the_leaders_dongle_unplugged_and_replugged() {
    let _log = test_log();
    let mut cluster = RadioCluster::start(&["a", "b", "c"], Quorum::Voters, 7).await;
    let all = [0, 1, 2];
    let old = cluster.await_leader_among(&all, BOUND).await;
    for index in all {
        let dongle = cluster.handle(index).dongle().await.unwrap().unwrap();
        assert!(dongle.status.connected, "node {index}'s dongle is set up");
    }

    cluster.ports[old].unplug().await.unwrap();
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != old).collect();
    let new = cluster.await_leader_among(&others, BOUND).await;
    assert_ne!(new, old);
    let unplugged = cluster.handle(old).dongle().await.unwrap().unwrap();
    assert!(
        !unplugged.status.connected,
        "the unplugged node knows its dongle is gone"
    );

    cluster.ports[old].replug().unwrap();
    let back = cluster.await_leader_among(&all, BOUND).await;
    assert_eq!(back, new, "the returning node follows the new leader");
    let status = cluster.handle(old).election_status().await.unwrap();
    assert_eq!(status.role, Role::Follower);
    let dongle = cluster.handle(old).dongle().await.unwrap().unwrap();
    assert!(dongle.status.connected);
    assert!(dongle.status.reconnects >= 1);
    cluster.stop().await;
}

/// Pre-vote campaigns node `index` has started so far.
fn pre_votes(cluster: &RadioCluster, index: usize) -> f64 {
    cluster
        .handle(index)
        .metrics()
        .value("conclave_elections_started_total", &[("kind", "pre_vote")])
        .unwrap_or(0.0)
}

/// RAFT-6 `voters`, ESP-7: split 3+2 on the air, the majority side keeps (or elects) one
/// leader and the minority none; healed, exactly one leader remains.
#[actix_rt::test]
async fn five_gateways_split_three_two_on_the_air() {
    let _log = test_log();
    let cluster = RadioCluster::start(&["a", "b", "c", "d", "e"], Quorum::Voters, 11).await;
    let all = [0, 1, 2, 3, 4];
    cluster.await_leader_among(&all, BOUND).await;
    let (majority, minority) = ([0usize, 1, 2], [3usize, 4]);
    // Everything the minority nodes publish from the split on, and where their campaign
    // counts stand.
    let mut watched: Vec<(usize, EventSubscription, f64)> = minority
        .iter()
        .map(|&index| {
            let events = cluster.handle(index).subscribe("test");
            (index, events, pre_votes(&cluster, index))
        })
        .collect();
    let macs = |group: &[usize]| group.iter().map(|&i| cluster.mac(i)).collect::<Vec<_>>();
    cluster.air.partition(&[&macs(&majority), &macs(&minority)]);

    let leader = cluster.await_leader_among(&majority, BOUND).await;
    assert!(majority.contains(&leader));
    // The minority cannot elect: a quorum needs three of five. Wait until each of its nodes
    // has started two campaigns since the split — its first one ended without a win when the
    // second began — then check that none of them ever led meanwhile.
    let deadline = tokio::time::Instant::now() + BOUND;
    while watched
        .iter()
        .any(|(index, _, before)| pre_votes(&cluster, *index) < before + 2.0)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the minority nodes did not campaign twice within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (index, events, _) in &mut watched {
        let me = cluster.id(*index);
        while let Some(received) = events.try_recv() {
            match received {
                Received::Event(NodeEvent::LeaderChanged(change)) => assert_ne!(
                    change.leader,
                    Some(me),
                    "node {index} led a minority: {change:?}"
                ),
                Received::Event(
                    NodeEvent::PeerStatusChanged(_) | NodeEvent::MembershipChanged(_),
                ) => {}
                Received::Lagged(missed) => panic!("node {index}: {missed} events lost"),
            }
        }
        let status = cluster.handle(*index).election_status().await.unwrap();
        assert_ne!(status.role, Role::Leader, "node {index} leads a minority");
    }
    assert_eq!(
        cluster.agreed_leader_among(&majority).await,
        Some(leader),
        "the majority side kept its leader"
    );

    cluster.air.heal();
    let healed = cluster.await_leader_among(&all, BOUND).await;
    let leaders = {
        let mut n = 0;
        for index in all {
            if cluster.handle(index).election_status().await.unwrap().role == Role::Leader {
                n += 1;
            }
        }
        n
    };
    assert_eq!(leaders, 1, "healed: one leader, {healed}, known by all");
    cluster.stop().await;
}

/// MEM-2 over the radio: a gateway that stops says `Goodbye`, and the dongle sends it before
/// the driver stops, so its peers drop it from the table at once instead of waiting for its
/// silence; a stopping leader first hands leadership to the gateway left standing.
#[actix_rt::test]
async fn a_stopping_gateway_says_goodbye_over_the_air_and_hands_over() {
    let _log = test_log();
    let mut cluster = RadioCluster::start(&["a", "b", "c"], Quorum::Voters, 5).await;
    let all = [0, 1, 2];
    let leader = cluster.await_leader_among(&all, BOUND).await;
    let follower = all.into_iter().find(|&i| i != leader).unwrap();
    let remaining = all
        .into_iter()
        .find(|&i| i != leader && i != follower)
        .unwrap();
    let gone = cluster.id(follower);
    let mut events = cluster.handle(leader).subscribe("test");

    cluster.stop_node(follower).await;
    let change = loop {
        let received = tokio::time::timeout(BOUND, events.recv())
            .await
            .expect("the leader heard of the stopped follower")
            .expect("the leader's events continue");
        if let Received::Event(NodeEvent::PeerStatusChanged(change)) = received
            && change.peer == gone
        {
            break change;
        }
    };
    assert_eq!(
        change.new, None,
        "the follower's Goodbye removed it; it did not merely fall silent"
    );
    let peers = cluster.handle(leader).status().await.unwrap().peers;
    assert!(peers.iter().all(|peer| peer.id != gone), "{peers:?}");

    // Two of three voters remain: the leader can hand over to the other before it goes.
    // Alone, it could never win a vote of three voters: leading proves the handover.
    cluster.stop_node(leader).await;
    let successor = cluster.await_leader_among(&[remaining], BOUND).await;
    assert_eq!(successor, remaining);
    cluster.stop().await;
}

/// ESP-NOW keys: every radio peer a gateway learns is added to its dongle for unicast,
/// encrypted with the peer's own key from `peer_lmks`, or else with `lmk`.
#[actix_rt::test]
async fn radio_peers_get_their_own_key_or_the_common_one() {
    const COMMON: [u8; 16] = [0x11; 16];
    const FOR_B: [u8; 16] = [0xb0; 16];
    let _log = test_log();
    let cluster = RadioCluster::start_with(&["a", "b", "c"], Quorum::Voters, 3, |config| {
        if config.node_id.as_str() == "a" {
            let espnow = config.espnow.as_mut().unwrap();
            espnow.lmk = Some(COMMON);
            espnow.peer_lmks.insert(PeerId::from_static("b"), FOR_B);
        }
    })
    .await;
    cluster.await_leader_among(&[0, 1, 2], BOUND).await;
    // Each node learns the others' MACs from their first frames (the `Hello` at start).
    let deadline = tokio::time::Instant::now() + BOUND;
    let table = loop {
        let table = cluster.ports[0].dongle().unwrap().state().peers;
        if table.len() >= 2 || tokio::time::Instant::now() >= deadline {
            break table;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let entry = |index: usize| {
        table
            .iter()
            .find(|peer| peer.mac == cluster.mac(index))
            .unwrap_or_else(|| panic!("node {index} is not in a's dongle: {table:?}"))
    };
    assert!(entry(1).encrypt && entry(1).key == FOR_B, "{table:?}");
    assert!(entry(2).encrypt && entry(2).key == COMMON, "{table:?}");
    // b has no keys at all: its unicasts go out in the clear.
    let table_b = cluster.ports[1].dongle().unwrap().state().peers;
    assert!(table_b.iter().all(|peer| !peer.encrypt), "{table_b:?}");
    cluster.stop().await;
}
