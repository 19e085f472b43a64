//! Gossip mode end to end (GOS-1..6, issue 9 items 8 and 9): whole nodes over the memory link
//! on the paused actix clock, with Fabric's default timings (virtual time). The lowest id
//! leads and every node names it; a killed leader is replaced by the lowest survivor in a
//! later epoch within `leader_alive_threshold + leader_election_duration`; the leader changes
//! carry the fencing token `<epoch>:<leader>` and a cause, and the shared metrics move; a
//! stopping leader steps down (`shutdown`); `leader resign` is Fabric's Yield; `leader set`
//! is refused with a reason; with automatic election off a node never wins an election. A
//! real-time test runs the hooks themselves as processes.

use std::time::Duration;

use conclave_config::{HooksConfig, Quorum};
use conclave_core::election::{
    Command, CommandOutcome, ElectionConfig, ElectionError, LeaderChangeCause, Mode, ModeStatus,
    Role,
};
use conclave_core::gossip::GossipConfig;
use conclave_protocol::PeerId;
use conclave_tests::{
    ClusterOptions, MemoryCluster, admin_refusal, assert_change_carries_the_token,
    assert_failover_metrics, assert_hook_env, assert_leader_gauges, assert_published_loss,
    drain_leader_changes, dump_env_hook, hook_ran, leader_changes_total, leader_lost_env,
    new_leader_env, test_log,
};

/// Fabric's defaults: 15 s start-up grace, 1 s sampling, 10 s alive threshold, 5 s election.
fn fabric() -> GossipConfig {
    GossipConfig::new(PeerId::from_static("a"))
}

fn gossip_options() -> ClusterOptions {
    ClusterOptions {
        election: Some(ElectionConfig::Gossip(fabric())),
        ..ClusterOptions::paused_clock(Quorum::Voters)
    }
}

/// Long enough for a start (the view is stable after two samples, then one election).
const SETTLE: Duration = Duration::from_secs(30);

/// What the failover may take on top of the budget: membership and mailbox hops.
const MARGIN: Duration = Duration::from_millis(500);

/// GOS-1..3, CB-4, CB-5: three nodes started together elect the lowest id, which every node
/// names in the same epoch; the status reports mode `gossip` with the view; the metrics show
/// the mode, the leader and the epoch. Killed, the leader is replaced by the lowest survivor
/// in a later epoch within the failover budget (virtual time); the survivors publish the loss
/// and the win with their causes and the new fencing token, and the metrics follow.
#[actix_rt::test]
async fn gos_elect_kill_the_leader_and_reelect_within_the_budget() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0, "the lowest id wins");
    let first = cluster.handle(0).election_status().await.unwrap();
    for (index, status) in cluster.statuses().await {
        let election = status.election;
        assert_eq!(election.mode, Mode::Gossip);
        assert_eq!(election.fencing_token, first.fencing_token, "node {index}");
        let ModeStatus::Gossip(gossip) = &election.detail else {
            panic!("node {index}: {:?}", election.detail);
        };
        assert_eq!(gossip.view_size, 2, "node {index}");
        assert_eq!(gossip.term, first.term);
        let phase = if index == 0 { "leading" } else { "following" };
        assert_eq!(election.phase, phase, "node {index}");
    }
    let leader_metrics = cluster.handle(0).metrics().clone();
    assert_leader_gauges(&leader_metrics, Mode::Gossip, "leading", first.term);
    // The scrape explains the term in every mode's words, not raft's alone.
    let help = leader_metrics
        .render()
        .lines()
        .find(|line| line.starts_with("# HELP conclave_election_term "))
        .map(str::to_owned)
        .expect("conclave_election_term is described");
    assert!(
        help.contains("gossip leadership epoch") && !help.contains("Raft term"),
        "{help}"
    );
    let b_metrics = cluster.handle(1).metrics().clone();
    let b_changes_before = leader_changes_total(&b_metrics);
    assert!(b_changes_before >= 1.0);
    assert_eq!(
        b_metrics.value("conclave_election_is_leader", &[]),
        Some(0.0)
    );

    let mut b_events = cluster.handle(1).subscribe("test");
    let budget = fabric().failover_budget() + MARGIN;
    let successor = cluster.kill_leader_and_await_successor(0, budget).await;
    assert_eq!(successor, 1, "the lowest survivor takes over");
    let second = cluster.handle(1).election_status().await.unwrap();
    assert!(second.term > first.term, "{second:?} after {first:?}");

    let changes = drain_leader_changes(&mut b_events);
    assert_published_loss(&changes, PeerId::from_static("a"));
    let won = changes.last().expect("b published its win");
    assert_eq!(
        (won.leader, won.role, won.cause),
        (
            Some(PeerId::from_static("b")),
            Role::Leader,
            LeaderChangeCause::VoteWon
        )
    );
    assert_change_carries_the_token(won, &second);
    let c = cluster.handle(2).election_status().await.unwrap();
    assert_eq!(c.fencing_token, second.fencing_token);

    assert_failover_metrics(&b_metrics, true, second.term, b_changes_before, "proposal");
    cluster.stop().await;
}

/// GOS-3, issue 9 item 4: a leader that stops gracefully steps down on the way out (cause
/// `shutdown`, stepped down, no leader), and the lowest survivor takes over.
#[actix_rt::test]
async fn gos_a_stopping_leader_steps_down() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let mut a_events = cluster.handle(0).subscribe("test");
    cluster.stop_node(0).await;
    let changes = drain_leader_changes(&mut a_events);
    let last = changes.last().expect("a published its step-down");
    assert_eq!(
        (last.leader, last.stepped_down, last.cause, last.role),
        (None, true, LeaderChangeCause::Shutdown, Role::Follower)
    );
    let budget = fabric().failover_budget() + MARGIN;
    assert!(cluster.leader_becomes(1, budget).await);
    cluster.stop().await;
}

/// GOS-4 (Fabric's `TestLeadershipYield`): `leader resign` on the leader is a Yield: it steps
/// down at once, another node takes over, and the old leader does not reclaim leadership
/// although its id is the lowest. On a follower it is refused, naming the leader.
#[actix_rt::test]
async fn gos_resign_is_a_yield_and_the_old_leader_does_not_reclaim() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let first = cluster.handle(0).election_status().await.unwrap();
    assert_eq!(
        cluster.handle(1).command(Command::Resign).await.unwrap(),
        Err(ElectionError::NotLeader {
            leader: Some(PeerId::from_static("a"))
        })
    );
    assert_eq!(
        cluster.handle(0).command(Command::Resign).await.unwrap(),
        Ok(CommandOutcome::SteppedDown)
    );
    let a = cluster.handle(0).election_status().await.unwrap();
    assert_eq!((a.role, a.leader), (Role::Follower, None));
    let ModeStatus::Gossip(gossip) = a.detail else {
        panic!("gossip expected");
    };
    assert!(gossip.yielding);

    let config = fabric();
    let budget = config.failover_budget() + MARGIN;
    assert!(cluster.leader_becomes(1, budget).await);
    let b = cluster.handle(1).election_status().await.unwrap();
    assert!(b.term > first.term);
    let history = cluster.handle(0).history().await.unwrap();
    assert!(
        history
            .iter()
            .any(|record| record.leader.is_none() && record.cause == LeaderChangeCause::Yield),
        "{history:?}"
    );
    // Longer than the yield period: b keeps leading, a follows it.
    tokio::time::sleep(config.yield_duration() + config.failover_budget()).await;
    assert_eq!(cluster.agreed_leader().await, Some(1));
    let b_now = cluster.handle(1).election_status().await.unwrap();
    assert_eq!(b_now.term, b.term, "no election while b leads");
    cluster.stop().await;
}

/// Issue 9 item 8: `leader set` has no meaning in gossip mode (the lowest id wins every
/// election) and is refused on every node with a reason that names the alternatives;
/// leadership does not move.
#[actix_rt::test]
async fn gos_set_leader_is_refused_with_a_reason() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    for index in 0..3 {
        let refused = cluster
            .handle(index)
            .command(Command::SetLeader(PeerId::from_static("c")))
            .await
            .unwrap()
            .unwrap_err();
        let message = refused.to_string();
        for part in ["leader set c", "election.mode = gossip", "leader resign"] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
    }
    tokio::time::sleep(fabric().failover_budget()).await;
    assert_eq!(cluster.agreed_leader().await, Some(0));
    cluster.stop().await;
}

/// RAFT-8's switch in gossip mode: with automatic election off, `a` — the lowest id, which
/// would win any election — proposes nothing: when the leader after it dies, `c` is elected
/// and `a` follows it; `a` never leads.
#[actix_rt::test]
async fn gos_auto_election_off_never_wins_an_election() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    assert_eq!(
        cluster
            .handle(0)
            .command(Command::EnableAutoElection(false))
            .await
            .unwrap(),
        Ok(CommandOutcome::Applied)
    );
    cluster
        .handle(0)
        .command(Command::Resign)
        .await
        .unwrap()
        .unwrap();
    let budget = fabric().failover_budget() + MARGIN;
    assert!(cluster.leader_becomes(1, budget).await);

    let proposals = |cluster: &MemoryCluster| {
        cluster
            .handle(0)
            .metrics()
            .value("conclave_elections_started_total", &[("kind", "proposal")])
            .unwrap_or(0.0)
    };
    let proposed_before = proposals(&cluster);
    let mut a_events = cluster.handle(0).subscribe("test");
    cluster.kill(1).await;
    let c_leads = cluster
        .wait_for(budget, || async {
            cluster.agreed_leader().await == Some(2)
        })
        .await;
    assert!(c_leads, "{:?}", cluster.statuses().await);
    let a = cluster.handle(0).election_status().await.unwrap();
    assert!(!a.auto_election);
    assert_eq!(proposals(&cluster), proposed_before, "a proposed nothing");
    assert!(
        drain_leader_changes(&mut a_events)
            .iter()
            .all(|change| change.leader != Some(PeerId::from_static("a"))),
        "a never led again"
    );
    cluster.stop().await;
}

/// CB-2, CB-5 with real hook processes (real time, Fabric's timings scaled down a hundred
/// times): the elected leader's `on_leader` and, after it is killed, its successor's run with
/// `CONCLAVE_FENCING_TOKEN=<epoch>:<leader>`, the gossip epoch as `CONCLAVE_TERM` and the
/// cause `vote_won`; the survivor that lost its leader runs `on_leader_change` with the cause
/// `election_timeout` and no token.
#[actix_rt::test]
async fn gos_hooks_run_with_the_epoch_as_fencing_token() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let fast = fabric().with_timings(
        Duration::from_millis(300),
        Duration::from_millis(30),
        Duration::from_millis(200),
        Duration::from_millis(100),
    );
    let hook = dump_env_hook(dir.path());
    let options = ClusterOptions {
        election: Some(ElectionConfig::Gossip(fast)),
        hooks: HooksConfig {
            on_leader: vec![hook.clone()],
            on_leader_change: vec![hook],
            ..HooksConfig::default()
        },
        ..ClusterOptions::real_time(Quorum::Voters)
    };
    let bound = Duration::from_secs(10);
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    assert_eq!(cluster.await_leader(bound).await, 0);
    let first = cluster.handle(0).election_status().await.unwrap().term;
    let ran = cluster
        .wait_for(bound, || async {
            hook_ran(dir.path(), "a", "on_leader", first, "vote_won")
        })
        .await;
    assert!(ran, "a's on_leader ran");
    assert_hook_env(
        dir.path(),
        "a",
        "on_leader",
        first,
        "vote_won",
        &[format!("CONCLAVE_FENCING_TOKEN={first}:a")],
    );

    cluster.kill(0).await;
    assert_eq!(cluster.await_leader(bound).await, 1);
    let second = cluster.handle(1).election_status().await.unwrap().term;
    assert!(second > first);
    let ran = cluster
        .wait_for(bound, || async {
            hook_ran(dir.path(), "b", "on_leader", second, "vote_won")
                && hook_ran(
                    dir.path(),
                    "c",
                    "on_leader_change",
                    first,
                    "election_timeout",
                )
        })
        .await;
    assert!(ran, "b's on_leader and c's on_leader_change ran");
    assert_hook_env(
        dir.path(),
        "b",
        "on_leader",
        second,
        "vote_won",
        &new_leader_env(second, "b", "a"),
    );
    assert_hook_env(
        dir.path(),
        "c",
        "on_leader_change",
        first,
        "election_timeout",
        &leader_lost_env("a"),
    );
    cluster.stop().await;
}

/// Issue 9 item 8, through the admin API the CLI calls: `POST /v1/leader` in gossip mode is
/// refused with 400 and an error that says the gossip election refuses the verb and what to
/// use instead, not that the node's settings are invalid (which sent operators to a
/// configuration that was fine).
#[actix_rt::test]
async fn gos_admin_leader_set_refusal_names_the_mode_not_the_settings() {
    use actix_web::http::StatusCode;

    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&["a", "b", "c"], gossip_options()).await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let (status, answer) = admin_refusal(
        cluster.handle(1),
        "/v1/leader",
        serde_json::json!({ "peer_id": "c" }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.error, conclave_api::ErrorCode::NotOffered);
    let message = answer.message;
    for part in [
        "b: ",
        "refused by the gossip election",
        "leader set c",
        "leader resign",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert!(
        !message.contains("invalid election settings"),
        "the settings are fine: {message}"
    );
    assert_eq!(
        answer
            .fencing
            .and_then(|fencing| fencing.fencing_token)
            .as_deref(),
        Some("1:a")
    );
    cluster.stop().await;
}

/// GOS-5, issue 9 item 8, through the admin API the CLI calls: with `use_leader_election =
/// false`, the org leader (`org_leader = true`, here `a`) refuses `leader resign` — its
/// leadership is configuration, so the core refuses the Yield — and the admin API answers 409
/// (as static mode's leader's refusal is answered) naming both settings, with the fencing
/// token; a
/// follower's `leader resign` is refused with 409 naming `a`. Past a whole failover budget
/// afterwards `a` still leads in the same epoch, and neither `a` nor a follower published any
/// leader change.
#[actix_rt::test]
async fn gos5_static_org_leader_refuses_resign_and_keeps_leading() {
    use actix_web::http::StatusCode;

    let _log = test_log();
    tokio::time::pause();
    let options = ClusterOptions {
        election: Some(ElectionConfig::Gossip(GossipConfig::static_leadership(
            PeerId::from_static("a"),
            false,
        ))),
        ..ClusterOptions::paused_clock(Quorum::Voters)
    };
    let cluster = MemoryCluster::start_with(&["a", "b", "c"], options, |config| {
        if let ElectionConfig::Gossip(gossip) = &mut config.election {
            gossip.org_leader = config.node_id == PeerId::from_static("a");
        }
    })
    .await;
    assert_eq!(cluster.await_leader(SETTLE).await, 0);
    let first = cluster.handle(0).election_status().await.unwrap();
    let ModeStatus::Gossip(gossip) = &first.detail else {
        panic!("gossip expected: {:?}", first.detail);
    };
    assert!(gossip.org_leader && !gossip.use_leader_election);
    let token = first.fencing_token.unwrap().to_string();
    assert_eq!(token, format!("{}:a", first.term));
    let b_history = cluster.handle(1).history().await.unwrap().len();
    let mut a_events = cluster.handle(0).subscribe("test");
    let mut b_events = cluster.handle(1).subscribe("test");

    // The core's refusal, as the election actor returns it.
    let refused = cluster
        .handle(0)
        .command(Command::Resign)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        refused,
        ElectionError::OrgLeaderCannotResign {
            leader: PeerId::from_static("a")
        }
    );
    // The admin API's answer to it.
    let (status, refusal) = admin_refusal(
        cluster.handle(0),
        "/v1/leader/resign",
        serde_json::json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refusal:?}");
    assert_eq!(refusal.error, conclave_api::ErrorCode::NotAllowed);
    for part in [
        "a: a leads because gossip",
        "org_leader = true",
        "use_leader_election = false",
    ] {
        assert!(
            refusal.message.contains(part),
            "{part:?} missing from: {}",
            refusal.message
        );
    }
    assert_eq!(refusal.node_id.as_deref(), Some("a"));
    assert_eq!(
        refusal.fencing.and_then(|fencing| fencing.fencing_token),
        Some(token.clone())
    );
    let (status, refusal) = admin_refusal(
        cluster.handle(1),
        "/v1/leader/resign",
        serde_json::json!({}),
    )
    .await;
    // A follower asked to resign sends the client to the leader.
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{refusal:?}");
    assert_eq!(refusal.error, conclave_api::ErrorCode::NotLeader);
    assert_eq!(
        refusal
            .fencing
            .and_then(|fencing| fencing.leader)
            .as_deref(),
        Some("a")
    );

    tokio::time::sleep(fabric().failover_budget() + MARGIN).await;
    assert_eq!(cluster.agreed_leader().await, Some(0));
    let a = cluster.handle(0).election_status().await.unwrap();
    assert_eq!((a.role, a.term), (Role::Leader, first.term));
    let b = cluster.handle(1).election_status().await.unwrap();
    assert_eq!(
        (b.role, b.leader, b.fencing_token),
        (
            Role::Follower,
            Some(PeerId::from_static("a")),
            first.fencing_token
        )
    );
    assert_eq!(drain_leader_changes(&mut a_events), vec![]);
    assert_eq!(
        drain_leader_changes(&mut b_events),
        vec![],
        "b saw no change"
    );
    assert_eq!(cluster.handle(1).history().await.unwrap().len(), b_history);
    cluster.stop().await;
}
