//! Static mode end to end (STA-1): whole nodes over the memory link on the paused actix clock.
//! The configured leader leads at once; the followers know it while membership hears it,
//! report it lost when it dies, and found again when it returns; `leader set` reassigns on
//! the node it is sent to; `leader resign` on the leader is refused; the status and the
//! metrics name the mode.

use std::time::Duration;

use conclave_actors::node::NodeBuilder;
use conclave_config::Quorum;
use conclave_core::election::{
    Command, CommandOutcome, ElectionConfig, ElectionError, LeaderChangeCause, Mode, ModeStatus,
    Role,
};
use conclave_core::static_leader::StaticConfig;
use conclave_protocol::PeerId;
use conclave_tests::{ClusterOptions, MemoryCluster, admin_refusal, node_config, test_log};

const SETTLE: Duration = Duration::from_secs(10);

fn static_options() -> ClusterOptions {
    ClusterOptions {
        // Led by `a`; a member list, which each node gets as the cluster's names.
        election: Some(ElectionConfig::Static(StaticConfig {
            members: [PeerId::from_static("a")].into_iter().collect(),
            ..StaticConfig::new(PeerId::from_static("a"), PeerId::from_static("a"))
        })),
        ..ClusterOptions::paused_clock(Quorum::Voters)
    }
}

/// STA-1: the configured leader leads, in epoch 1, with no election; every node reports mode
/// `static` and knows it once membership hears it.
#[actix_rt::test]
async fn sta1_configured_leader_leads_and_everyone_knows_it() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], static_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    for (_, status) in cluster.statuses().await {
        assert_eq!(status.election.mode, Mode::Static);
        assert_eq!(status.election.term, 1);
        assert!(matches!(status.election.detail, ModeStatus::Static(_)));
    }
    let metrics = cluster.handle(1).metrics();
    assert_eq!(
        metrics.value("conclave_election_mode", &[("mode", "static")]),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("conclave_elections_started_total", &[("kind", "election")]),
        Some(0.0),
        "nobody elects"
    );
    cluster.stop().await;
}

/// STA-1: when the leader dies the followers report it lost (leader none, cause
/// `leader_lost`) and nobody replaces it; when it comes back they find it again (cause
/// `leader_heard`), in the same epoch.
#[actix_rt::test]
async fn sta1_followers_report_the_leader_lost_and_found() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], static_options()).await;
    cluster.await_leader(SETTLE).await;
    cluster.kill(0).await;
    let lost = cluster
        .wait_for(SETTLE, || async {
            let mut all = true;
            for index in [1, 2] {
                let status = cluster.handle(index).election_status().await.unwrap();
                all &= status.leader.is_none() && status.role == Role::Follower;
            }
            all
        })
        .await;
    assert!(lost, "{:?}", cluster.statuses().await);
    let history = cluster.handle(1).history().await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.leader, last.cause),
        (None, LeaderChangeCause::LeaderLost)
    );

    cluster.restart(0).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let history = cluster.handle(1).history().await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.term, last.leader, last.cause),
        (
            1,
            Some(PeerId::from_static("a")),
            LeaderChangeCause::LeaderHeard
        )
    );
    cluster.stop().await;
}

/// STA-1: `leader resign` on the static leader is refused; `leader set` reassigns on the node
/// it is sent to only, so the operator sends it to every node; then `b` leads in epoch 2.
#[actix_rt::test]
async fn sta1_resign_refused_and_set_leader_reassigns_per_node() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], static_options()).await;
    cluster.await_leader(SETTLE).await;
    assert_eq!(
        cluster.handle(0).command(Command::Resign).await.unwrap(),
        Err(ElectionError::StaticLeaderCannotResign {
            leader: PeerId::from_static("a")
        })
    );
    assert_eq!(
        cluster
            .handle(2)
            .command(Command::SetLeader(PeerId::from_static("b")))
            .await
            .unwrap(),
        Ok(CommandOutcome::Applied)
    );
    let only_c = cluster.handle(2).election_status().await.unwrap();
    assert_eq!(
        (only_c.term, only_c.leader),
        (2, Some(PeerId::from_static("b")))
    );
    let a = cluster.handle(0).election_status().await.unwrap();
    assert_eq!(
        (a.term, a.leader, a.role),
        (1, Some(PeerId::from_static("a")), Role::Leader),
        "the other nodes keep their assignment"
    );
    for index in [0, 1] {
        cluster
            .handle(index)
            .command(Command::SetLeader(PeerId::from_static("b")))
            .await
            .unwrap()
            .unwrap();
    }
    assert!(cluster.leader_becomes(1, SETTLE).await);
    let b = cluster.handle(1).election_status().await.unwrap();
    assert_eq!(
        (b.term, b.manual_override),
        (2, Some(PeerId::from_static("b")))
    );
    cluster.stop().await;
}

/// STA-1, issue 9 item 8, through the admin API the CLI calls: `POST /v1/auto-election`, on
/// or off, on the leader or a follower, is refused with 400 and the reason
/// (`ElectionError::StaticModeElectsNobody`) after the node's id, with the fencing token; the
/// node's switch, the leader, the epoch and the leadership history stay as they were.
#[actix_rt::test]
async fn sta1_admin_auto_election_is_refused_and_the_leader_stays() {
    use actix_web::http::StatusCode;

    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], static_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let mut before = Vec::new();
    for index in 0..3 {
        let handle = cluster.handle(index);
        let status = handle.election_status().await.unwrap();
        before.push((status.auto_election, handle.history().await.unwrap().len()));
    }
    for index in [0, 1] {
        for enabled in [false, true] {
            let (status, refusal) = admin_refusal(
                cluster.handle(index),
                "/v1/auto-election",
                serde_json::json!({ "enabled": enabled }),
            )
            .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal:?}");
            let node = cluster.id(index);
            assert_eq!(refusal.error, conclave_api::ErrorCode::NotOffered);
            assert_eq!(
                refusal.message,
                format!("{node}: {}", ElectionError::StaticModeElectsNobody)
            );
            assert_eq!(refusal.node_id, Some(node.to_string()));
            let fencing = refusal.fencing.unwrap_or_default();
            assert_eq!(
                (fencing.fencing_token.as_deref(), fencing.term),
                (Some("1:a"), 1)
            );
        }
    }
    assert_eq!(cluster.agreed_leader().await, Some(0));
    for (index, before) in before.into_iter().enumerate() {
        let handle = cluster.handle(index);
        let status = handle.election_status().await.unwrap();
        assert_eq!(
            (status.term, status.leader),
            (1, Some(PeerId::from_static("a")))
        );
        let after = (status.auto_election, handle.history().await.unwrap().len());
        assert_eq!(after, before, "node {index}: switch and history");
    }
    cluster.stop().await;
}

/// Issue 9: switching mode needs a restart, and a node refuses to start on a WAL written in
/// another mode, naming both modes and the file; started again in its own mode, it runs.
#[actix_rt::test]
async fn a_node_refuses_a_wal_of_another_mode() {
    let _log = test_log();
    tokio::time::pause();
    let dir = tempfile::tempdir().unwrap();
    let raft_options = ClusterOptions::paused_clock(Quorum::Voters);
    let raft = node_config("a", &["a"], &raft_options, dir.path());
    let node = NodeBuilder::new(raft.clone())
        .wal_on_event_loop()
        .start()
        .await
        .unwrap();
    node.stop().await;

    let static_config = node_config("a", &["a"], &static_options(), dir.path());
    let err = NodeBuilder::new(static_config)
        .wal_on_event_loop()
        .start()
        .await
        .unwrap_err();
    let message = err.to_string();
    for part in [
        "written in raft mode",
        "election.mode = \"static\"",
        "conclave.wal",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    let node = NodeBuilder::new(raft)
        .wal_on_event_loop()
        .start()
        .await
        .unwrap();
    assert_eq!(
        node.handle().election_status().await.unwrap().mode,
        Mode::Raft
    );
    node.stop().await;
}
