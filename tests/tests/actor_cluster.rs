//! Whole nodes — every actor, a real WAL — in one process over the memory link, on the actix
//! test runtime with the tokio clock paused: elections, failover, manual override, automatic
//! election off, restart from the WAL, a lagging subscriber, and bad frames.

use std::time::Duration;

use conclave_actors::events::Received;
use conclave_config::Quorum;
use conclave_core::election::{Command, CommandOutcome, Role};
use conclave_protocol::{AuthKey, ClusterId, Envelope, FrameCodec, PeerId, RequestVote};
use conclave_tests::{ClusterOptions, MemoryCluster, TEST_PSK, test_log};

const SETTLE: Duration = Duration::from_secs(10);

/// RAFT-2..4, RAFT-6: three nodes elect exactly one leader that all of them know.
#[actix_rt::test]
async fn three_nodes_elect_one_leader() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let statuses = cluster.statuses().await;
    let leaders: Vec<usize> = statuses
        .iter()
        .filter(|(_, s)| s.election.role == Role::Leader)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(leaders, vec![leader]);
    for (_, status) in &statuses {
        assert_eq!(status.election.leader, Some(cluster.id(leader)));
        assert_eq!(status.peers.len(), 2, "every node knows both others");
    }
    cluster.stop().await;
}

/// RAFT-6: five nodes elect exactly one leader, in `voters` and in `connected` mode.
#[actix_rt::test]
async fn five_nodes_elect_one_leader_in_both_modes() {
    let _log = test_log();
    tokio::time::pause();
    for quorum in [Quorum::Voters, Quorum::Connected] {
        let names = ["a", "b", "c", "d", "e"];
        let cluster = MemoryCluster::start(&names, ClusterOptions::paused_clock(quorum)).await;
        let leader = cluster.await_leader(SETTLE).await;
        // And it stays: ten seconds later nobody has campaigned against it.
        let term = cluster.handle(leader).election_status().await.unwrap().term;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cluster.agreed_leader().await, Some(leader), "{quorum:?}");
        let later = cluster.handle(leader).election_status().await.unwrap().term;
        assert_eq!(
            later, term,
            "{quorum:?}: no election while the leader is healthy"
        );
        cluster.stop().await;
    }
}

/// RAFT-2/3: when the leader's actors are killed, the survivors elect another in a higher
/// term; the history records the change with its cause.
#[actix_rt::test]
async fn killing_the_leader_elects_another() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let old = cluster.await_leader(SETTLE).await;
    let old_term = cluster.handle(old).election_status().await.unwrap().term;
    cluster.kill(old).await;
    let new = cluster.await_leader(SETTLE).await;
    assert_ne!(new, old);
    let status = cluster.handle(new).election_status().await.unwrap();
    assert!(status.term > old_term);
    let history = cluster.handle(new).history().await.unwrap();
    let last = history.last().expect("the new leader recorded its win");
    assert_eq!(last.leader, Some(cluster.id(new)));
    assert_eq!(last.cause.label(), "vote_won");
    cluster.stop().await;
}

/// RAFT-8 `voters`: `SetLeader` issued on a follower is forwarded to the leader, which
/// transfers leadership to the target; every node then reports the target pinned.
#[actix_rt::test]
async fn set_leader_transfers_and_pins() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let target = (leader + 1) % 3;
    let issuer = (leader + 2) % 3;
    let outcome = cluster
        .handle(issuer)
        .command(Command::SetLeader(cluster.id(target)))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Ok(CommandOutcome::Forwarded {
            to: cluster.id(leader)
        })
    );
    let moved = cluster.leader_becomes(target, SETTLE).await;
    assert!(moved, "leadership moved to the target");
    let pinned = cluster
        .wait_for(SETTLE, || async {
            let mut all = true;
            for index in 0..3 {
                let status = cluster.handle(index).election_status().await.unwrap();
                all &= status.manual_override == Some(cluster.id(target));
            }
            all
        })
        .await;
    assert!(pinned, "every node reports the pin");
    cluster.stop().await;
}

/// RAFT-8 `connected`: `SetLeader` assigns the leader at once in term + 1 on every node.
#[actix_rt::test]
async fn set_leader_assigns_in_connected_mode() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Connected),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let term = cluster.handle(leader).election_status().await.unwrap().term;
    let target = (leader + 1) % 3;
    let outcome = cluster
        .handle(leader)
        .command(Command::SetLeader(cluster.id(target)))
        .await
        .unwrap();
    assert_eq!(outcome, Ok(CommandOutcome::Applied));
    let assigned = cluster.leader_becomes(target, SETTLE).await;
    assert!(assigned);
    let status = cluster.handle(target).election_status().await.unwrap();
    assert_eq!(status.term, term + 1);
    assert_eq!(status.manual_override, Some(cluster.id(target)));
    cluster.stop().await;
}

/// RAFT-8: with automatic election off everywhere, losing the leader leaves the cluster
/// without one, however long it waits; switching it back on elects one.
#[actix_rt::test]
async fn auto_election_off_waits_for_the_operator() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    for index in 0..3 {
        let outcome = cluster
            .handle(index)
            .command(Command::EnableAutoElection(false))
            .await
            .unwrap();
        assert_eq!(outcome, Ok(CommandOutcome::Applied));
    }
    cluster.kill(leader).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    for index in cluster.running() {
        let status = cluster.handle(index).election_status().await.unwrap();
        assert_eq!(status.leader, None);
        assert_ne!(status.role, Role::Leader);
        assert!(!status.auto_election);
    }
    let survivor = cluster.running()[0];
    cluster
        .handle(survivor)
        .command(Command::EnableAutoElection(true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cluster.await_leader(SETTLE).await, survivor);
    cluster.stop().await;
}

/// WAL-2, PROTO-2, RAFT-7: a follower killed and restarted from its WAL comes back with a new
/// incarnation and its term, rejoins as a follower, and does not disturb the leader.
#[actix_rt::test]
async fn restarted_node_rejoins_from_its_wal() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let follower = (leader + 1) % 3;
    let before = cluster.handle(follower).status().await.unwrap();
    cluster.kill(follower).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.restart(follower).await;
    let after = cluster.handle(follower).status().await.unwrap();
    assert!(
        after.incarnation > before.incarnation,
        "the incarnation grows at every start"
    );
    assert_eq!(
        after.election.term, before.election.term,
        "the term came back from the WAL"
    );
    assert_eq!(cluster.await_leader(SETTLE).await, leader);
    let leader_term = cluster.handle(leader).election_status().await.unwrap().term;
    assert_eq!(
        leader_term, before.election.term,
        "the rejoining node did not raise the term"
    );
    cluster.stop().await;
}

/// MEM-5: a subscriber that never reads loses the oldest events, the loss is counted under its
/// name, and the node goes on: elections and commands do not wait for it.
#[actix_rt::test]
async fn lagging_subscriber_is_counted_not_blocking() {
    let _log = test_log();
    tokio::time::pause();
    let cluster =
        MemoryCluster::start(&["a", "b"], ClusterOptions::paused_clock(Quorum::Connected)).await;
    cluster.await_leader(SETTLE).await;
    let mut slow = cluster.handle(0).subscribe("slow");
    // Every assignment is a leader change on node a: 300 events, more than the bus holds.
    for round in 0..300 {
        let target = cluster.id(round % 2);
        let outcome = cluster
            .handle(0)
            .command(Command::SetLeader(target))
            .await
            .unwrap();
        assert_eq!(outcome, Ok(CommandOutcome::Applied));
    }
    let Some(Received::Lagged(missed)) = slow.recv().await else {
        panic!("the slow subscriber is told it lagged");
    };
    assert!(missed >= 300 - 256, "{missed}");
    let counted = cluster
        .handle(0)
        .metrics()
        .value("conclave_events_lagged_total", &[("subscriber", "slow")]);
    assert_eq!(counted, Some(missed as f64));
    // The subscriber then reads the newest events, and the cluster still agrees.
    assert!(matches!(slow.recv().await, Some(Received::Event(_))));
    assert!(cluster.await_leader(SETTLE).await < 2);
    cluster.stop().await;
}

/// TR-2, PROTO-5, PROTO-6: garbage, a forged tag, another cluster's frame, a replayed frame
/// and a frame for someone else are each dropped and counted under their own reason; none of
/// them changes the term, the leader or the peer table.
#[actix_rt::test]
async fn bad_frames_are_counted_and_change_nothing() {
    let _log = test_log();
    tokio::time::pause();
    let mut options = ClusterOptions::paused_clock(Quorum::Voters);
    options.authenticated = true;
    let cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let leader = cluster.await_leader(SETTLE).await;
    let term = cluster.handle(leader).election_status().await.unwrap().term;
    let target = (leader + 1) % 3;
    let slot = u32::try_from(target).unwrap();
    let cluster_id = ClusterId::new(conclave_tests::CLUSTER).unwrap();
    let key = AuthKey::new(TEST_PSK, 16).unwrap();
    let disruptive = |cluster: ClusterId, from: PeerId, seq: u64, to: Option<PeerId>| {
        Envelope::new(
            cluster,
            from,
            1,
            seq,
            to,
            RequestVote {
                term: term + 100,
                candidate: from,
                last_log_index: 1000,
                last_log_term: term + 99,
                pre_vote: false,
                leadership_transfer: true,
                priority: None,
            },
        )
    };
    let good = FrameCodec::new(cluster_id, Some(key.clone()));
    let forger = FrameCodec::new(
        cluster_id,
        Some(AuthKey::new(b"a guess at the cluster key", 16).unwrap()),
    );
    let foreign_id = ClusterId::new("other-cluster").unwrap();
    let stranger = FrameCodec::new(foreign_id, Some(key));
    let other = (leader + 2) % 3;
    let other_id = cluster.id(other);
    let other_slot = u32::try_from(other).unwrap();
    // (bytes, reason, the slot they seem to come from)
    let frames = [
        (b"\x00\x01 not a frame at all".to_vec(), "malformed", 9),
        (
            forger
                .encode(&disruptive(cluster_id, other_id, 1_000_000, None), 1452)
                .unwrap(),
            "bad_tag",
            9,
        ),
        (
            stranger
                .encode(&disruptive(foreign_id, other_id, 1_000_001, None), 1452)
                .unwrap(),
            "foreign_cluster",
            9,
        ),
        // A real peer's old frame again, from its own address: a replay, although its tag is
        // valid. From anywhere else it would not even get that far (`duplicate_id`).
        (
            good.encode(&disruptive(cluster_id, other_id, 1, None), 1452)
                .unwrap(),
            "replay",
            other_slot,
        ),
        (
            good.encode(
                &disruptive(
                    cluster_id,
                    PeerId::from_static("intruder"),
                    1,
                    Some(PeerId::from_static("nobody")),
                ),
                1452,
            )
            .unwrap(),
            "misaddressed",
            9,
        ),
    ];
    for (bytes, _, from) in &frames {
        assert!(cluster.hub.inject(*from, slot, bytes.clone()));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;

    let metrics = cluster.handle(target).metrics();
    for (_, reason, _) in &frames {
        let dropped = metrics.value("conclave_frames_dropped_total", &[("reason", reason)]);
        assert_eq!(dropped, Some(1.0), "{reason}");
    }
    assert_eq!(cluster.agreed_leader().await, Some(leader));
    for index in 0..3 {
        let status = cluster.handle(index).status().await.unwrap();
        assert_eq!(status.election.term, term, "node {index}");
        assert_eq!(status.peers.len(), 2, "no intruder in the peer table");
    }
    cluster.stop().await;
}

/// Graceful shutdown of the leader hands leadership over: the successor wins by transfer,
/// without waiting for an election timeout, and the stopped node left the peer tables.
#[actix_rt::test]
async fn stopping_the_leader_hands_leadership_over() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let old = cluster.await_leader(SETTLE).await;
    cluster.stop_node(old).await;
    let new = cluster.await_leader(SETTLE).await;
    assert_ne!(new, old);
    let history = cluster.handle(new).history().await.unwrap();
    let won = history.last().unwrap();
    assert_eq!(won.leader, Some(cluster.id(new)));
    assert_eq!(won.cause.label(), "transfer", "{history:?}");
    let left = cluster
        .wait_for(SETTLE, || async {
            let peers = cluster.handle(new).peers().await.unwrap();
            peers.iter().all(|peer| peer.id != cluster.id(old))
        })
        .await;
    assert!(left, "the stopped node said goodbye");
    cluster.stop().await;
}

/// `NodeHandle::election_stopped`, which `conclave run` waits on instead of polling: pending
/// while the election runs, resolved once it has stopped.
#[actix_rt::test]
async fn election_stopped_resolves_once_the_election_stops() {
    let _log = test_log();
    let mut cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(20)).await;
    let follower = (leader + 1) % 3;
    let handle = cluster.handle(follower).clone();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), handle.election_stopped())
            .await
            .is_err(),
        "resolved while the election runs"
    );
    cluster.stop_node(follower).await;
    tokio::time::timeout(Duration::from_secs(20), handle.election_stopped())
        .await
        .expect("resolved once the election stopped");
    assert!(!handle.is_running());
    cluster.stop().await;
}
