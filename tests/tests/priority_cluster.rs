//! Priority mode end to end (PRI-1..6, issue 9 items 8 and 9): whole nodes over the memory
//! link on the paused actix clock, with seed 002's timings (virtual time). One master that
//! every node names; killed, it is replaced in a later round within `master_timeout +
//! discovery + jitter + campaign + votes`; the leader changes carry the fencing token
//! `<round>:<master>` and a cause, and the shared metrics move; a stopping master resigns
//! naming a successor who is master at once (PRI-5); `leader resign` resigns with a
//! successor, `leader set` forces this node master or hands over from the master, and with
//! automatic election off a node never wins an election. A real-time test runs the hooks
//! themselves as processes.

use std::time::Duration;

use conclave_config::{HooksConfig, Quorum};
use conclave_core::election::{
    Command, CommandOutcome, ElectionConfig, ElectionError, LeaderChangeCause, Mode, ModeStatus,
    Role,
};
use conclave_core::priority::{PriorityConfig, PriorityState, PriorityStatus};
use conclave_protocol::PeerId;
use conclave_tests::{
    ClusterOptions, MemoryCluster, assert_change_carries_the_token, assert_failover_metrics,
    assert_hook_env, assert_leader_gauges, assert_published_loss, drain_leader_changes,
    dump_env_hook, hook_ran, leader_changes_total, leader_lost_env, new_leader_env, test_log,
};

/// Seed 002's constants.
fn seed() -> PriorityConfig {
    PriorityConfig::new(PeerId::from_static("a"))
}

fn priority_options() -> ClusterOptions {
    ClusterOptions {
        election: Some(ElectionConfig::Priority(seed())),
        ..ClusterOptions::paused_clock(Quorum::Voters)
    }
}

const SETTLE: Duration = Duration::from_secs(10);

/// What a failover may take on top of the budget: membership and mailbox hops.
const MARGIN: Duration = Duration::from_millis(500);

const NAMES: [&str; 3] = ["a", "b", "c"];

async fn priority_status(cluster: &MemoryCluster, index: usize) -> PriorityStatus {
    let status = cluster
        .handle(index)
        .election_status()
        .await
        .expect("the node answers");
    let ModeStatus::Priority(priority) = status.detail else {
        panic!("node {index} is not in priority mode: {:?}", status.detail);
    };
    priority
}

/// The other two nodes of three.
fn others(index: usize) -> Vec<usize> {
    (0..3).filter(|&i| i != index).collect()
}

/// PRI-2, PRI-3, CB-4, CB-5: three nodes elect one master that all name in the same round;
/// the status reports mode `priority` with the state, score and master; the metrics show the
/// mode, the master and the round. Killed, the master is replaced in a later round within the
/// failover budget (virtual time); a survivor publishes the loss (`election_timeout`) and the
/// new master with the new fencing token, and the metrics follow.
#[actix_rt::test]
async fn pri_elect_kill_the_master_and_reelect_within_the_budget() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&NAMES, priority_options()).await;
    let master = cluster.await_leader(SETTLE).await;
    let first = cluster.handle(master).election_status().await.unwrap();
    for (index, status) in cluster.statuses().await {
        let election = status.election;
        assert_eq!(election.mode, Mode::Priority);
        assert_eq!(election.fencing_token, first.fencing_token, "node {index}");
        let ModeStatus::Priority(priority) = &election.detail else {
            panic!("node {index}: {:?}", election.detail);
        };
        assert_eq!(priority.master, Some(cluster.id(master)));
        assert_eq!(priority.round, first.term);
        assert_eq!(priority.peers, 2, "node {index}");
        assert_eq!(priority.battery, 100);
        let state = if index == master {
            PriorityState::Master
        } else {
            PriorityState::Follower
        };
        assert_eq!(priority.state, state, "node {index}");
        assert_eq!(election.phase, state.label(), "node {index}");
    }
    let metrics = cluster.handle(master).metrics().clone();
    assert_leader_gauges(&metrics, Mode::Priority, "master", first.term);

    let survivors = others(master);
    let watcher = survivors[0];
    let watcher_metrics = cluster.handle(watcher).metrics().clone();
    let changes_before = leader_changes_total(&watcher_metrics);
    let mut events = cluster.handle(watcher).subscribe("test");
    let budget = seed().failover_budget() + MARGIN;
    let successor = cluster
        .kill_leader_and_await_successor(master, budget)
        .await;
    let second = cluster.handle(successor).election_status().await.unwrap();
    assert!(second.term > first.term, "{second:?} after {first:?}");

    let changes = drain_leader_changes(&mut events);
    assert_published_loss(&changes, cluster.id(master));
    let last = changes.last().unwrap();
    assert_change_carries_the_token(last, &second);
    let cause = if successor == watcher {
        LeaderChangeCause::VoteWon
    } else {
        LeaderChangeCause::LeaderHeard
    };
    assert_eq!(last.cause, cause);
    assert_failover_metrics(
        &watcher_metrics,
        successor == watcher,
        second.term,
        changes_before,
        "discovery",
    );
    cluster.stop().await;
}

/// PRI-5 (seed 002: "shutting down"): a master that stops gracefully resigns naming its best
/// successor, which is master at once — long before a follower would declare the master dead
/// (`master_timeout`) — in a later round, with the cause `resign`; the stopped master
/// publishes its step-down with the cause `shutdown`.
#[actix_rt::test]
async fn pri5_a_stopping_master_hands_over_to_a_successor_at_once() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&NAMES, priority_options()).await;
    let master = cluster.await_leader(SETTLE).await;
    let first = cluster.handle(master).election_status().await.unwrap().term;
    let mut events = cluster.handle(master).subscribe("test");
    cluster.stop_node(master).await;
    let stopped_at = tokio::time::Instant::now();
    let last = drain_leader_changes(&mut events)
        .pop()
        .expect("the master published its step-down");
    assert_eq!(
        (last.leader, last.stepped_down, last.cause),
        (None, true, LeaderChangeCause::Shutdown)
    );
    let within = seed().master_timeout / 2;
    let handed_over = cluster
        .wait_for(within, || async {
            cluster
                .agreed_leader()
                .await
                .is_some_and(|leader| leader != master)
        })
        .await;
    assert!(
        handed_over,
        "no successor within {within:?}: {:?}",
        cluster.statuses().await
    );
    assert!(stopped_at.elapsed() < seed().master_timeout);
    let successor = cluster.agreed_leader().await.unwrap();
    let status = cluster.handle(successor).election_status().await.unwrap();
    assert!(status.term > first);
    let history = cluster.handle(successor).history().await.unwrap();
    let won = history.last().unwrap();
    assert_eq!(
        (won.leader, won.cause),
        (Some(cluster.id(successor)), LeaderChangeCause::Resign),
        "{history:?}"
    );
    cluster.stop().await;
}

/// PRI-5, issue 9 item 8: `leader resign` on the master is MasterResign naming the best
/// successor, which becomes master; on a follower it is refused, naming the master.
#[actix_rt::test]
async fn pri5_resign_names_a_successor_who_takes_over() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&NAMES, priority_options()).await;
    let master = cluster.await_leader(SETTLE).await;
    let first = cluster.handle(master).election_status().await.unwrap().term;
    let follower = others(master)[0];
    assert_eq!(
        cluster
            .handle(follower)
            .command(Command::Resign)
            .await
            .unwrap(),
        Err(ElectionError::NotLeader {
            leader: Some(cluster.id(master))
        })
    );
    let outcome = cluster
        .handle(master)
        .command(Command::Resign)
        .await
        .unwrap()
        .unwrap();
    let CommandOutcome::TransferStarted { target } = outcome else {
        panic!("resign named no successor: {outcome:?}");
    };
    assert_ne!(target, cluster.id(master));
    let successor = NAMES
        .iter()
        .position(|&n| PeerId::from_static(n) == target)
        .unwrap();
    assert!(
        cluster
            .leader_becomes(successor, seed().master_timeout / 2)
            .await,
        "{:?}",
        cluster.statuses().await
    );
    let status = cluster.handle(successor).election_status().await.unwrap();
    assert!(status.term > first);
    let history = cluster.handle(master).history().await.unwrap();
    assert!(
        history
            .iter()
            .any(|r| r.leader.is_none() && r.cause == LeaderChangeCause::Resign),
        "{history:?}"
    );
    cluster.stop().await;
}

/// PRI-6, issue 9 item 8 (seed 002: "force master via BLE"): `leader set X` sent to X forces
/// X master at once, whatever its score, and everyone follows it in a later round; sent to a
/// follower naming another node it is refused, naming the master; sent to the master naming
/// another node it hands over to that node (MasterResign with that successor).
#[actix_rt::test]
async fn pri6_set_leader_forces_master_or_hands_over() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(&NAMES, priority_options()).await;
    let master = cluster.await_leader(SETTLE).await;
    let first = cluster.handle(master).election_status().await.unwrap().term;
    let forced = others(master)[0];
    let bystander = others(master)[1];
    assert_eq!(
        cluster
            .handle(bystander)
            .command(Command::SetLeader(cluster.id(forced)))
            .await
            .unwrap(),
        Err(ElectionError::NotLeader {
            leader: Some(cluster.id(master))
        })
    );
    assert_eq!(
        cluster
            .handle(forced)
            .command(Command::SetLeader(cluster.id(forced)))
            .await
            .unwrap(),
        Ok(CommandOutcome::Applied)
    );
    assert!(
        cluster.leader_becomes(forced, SETTLE).await,
        "{:?}",
        cluster.statuses().await
    );
    let status = cluster.handle(forced).election_status().await.unwrap();
    assert!(status.term > first);
    assert_eq!(status.manual_override, Some(cluster.id(forced)));
    let priority = priority_status(&cluster, forced).await;
    assert_eq!(
        (priority.state, priority.forced),
        (PriorityState::ForcedMaster, true)
    );
    let history = cluster.handle(forced).history().await.unwrap();
    assert_eq!(history.last().unwrap().cause, LeaderChangeCause::SetLeader);

    // From the (forced) master, naming another node: a hand-over to it.
    assert_eq!(
        cluster
            .handle(forced)
            .command(Command::SetLeader(cluster.id(bystander)))
            .await
            .unwrap(),
        Ok(CommandOutcome::TransferStarted {
            target: cluster.id(bystander)
        })
    );
    assert!(
        cluster.leader_becomes(bystander, SETTLE).await,
        "{:?}",
        cluster.statuses().await
    );
    assert!(!priority_status(&cluster, forced).await.forced);
    cluster.stop().await;
}

/// RAFT-8's switch in priority mode: with automatic election off, the survivor with the best
/// score — the one that would win the next election — only votes and follows: when the master
/// dies, the other survivor becomes master, and the switched-off node never leads.
#[actix_rt::test]
async fn pri_auto_election_off_never_wins_an_election() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster = MemoryCluster::start(&NAMES, priority_options()).await;
    let master = cluster.await_leader(SETTLE).await;
    let survivors = others(master);
    let mut best = survivors[0];
    let mut other = survivors[1];
    if priority_status(&cluster, other).await.score > priority_status(&cluster, best).await.score {
        std::mem::swap(&mut best, &mut other);
    }
    assert_eq!(
        cluster
            .handle(best)
            .command(Command::EnableAutoElection(false))
            .await
            .unwrap(),
        Ok(CommandOutcome::Applied)
    );
    let mut events = cluster.handle(best).subscribe("test");
    cluster.kill(master).await;
    let budget = seed().failover_budget() + MARGIN;
    assert!(
        cluster.leader_becomes(other, budget).await,
        "{:?}",
        cluster.statuses().await
    );
    // Several more master timeouts: still the same master, and the switched-off node follows.
    tokio::time::sleep(seed().master_timeout * 3).await;
    assert_eq!(cluster.agreed_leader().await, Some(other));
    let status = cluster.handle(best).election_status().await.unwrap();
    assert!(!status.auto_election);
    assert_eq!(status.role, Role::Follower);
    assert!(
        drain_leader_changes(&mut events)
            .iter()
            .all(|change| change.leader != Some(cluster.id(best))),
        "the switched-off node never led"
    );
    cluster.stop().await;
}

/// CB-2, CB-5 with real hook processes (real time, seed 002's timings scaled down): the
/// master's `on_leader` runs with the round as `CONCLAVE_TERM` and
/// `CONCLAVE_FENCING_TOKEN=<round>:<master>`; after it is killed, its successor's runs with
/// the later round, and the survivors' `on_leader_change` reports the loss with the cause
/// `election_timeout`, no leader and no token, in the round of the discovery it opened.
#[actix_rt::test]
async fn pri_hooks_run_with_the_round_as_fencing_token() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let fast = PriorityConfig {
        discovery_timeout: Duration::from_millis(100),
        campaign_timeout: Duration::from_millis(40),
        vote_timeout: Duration::from_millis(60),
        jitter_max: Duration::from_millis(20),
        announce_interval: Duration::from_millis(100),
        master_timeout: Duration::from_millis(300),
        ..seed()
    };
    let hook = dump_env_hook(dir.path());
    let options = ClusterOptions {
        election: Some(ElectionConfig::Priority(fast)),
        hooks: HooksConfig {
            on_leader: vec![hook.clone()],
            on_leader_change: vec![hook],
            ..HooksConfig::default()
        },
        ..ClusterOptions::real_time(Quorum::Voters)
    };
    let bound = Duration::from_secs(10);
    let mut cluster = MemoryCluster::start(&NAMES, options).await;
    let master = cluster.await_leader(bound).await;
    let name = NAMES[master];
    let first = cluster.handle(master).election_status().await.unwrap();
    let cause = first_cause(&cluster, master).await;
    let ran = cluster
        .wait_for(bound, || async {
            hook_ran(dir.path(), name, "on_leader", first.term, &cause)
        })
        .await;
    assert!(ran, "{name}'s on_leader ran");
    assert_hook_env(
        dir.path(),
        name,
        "on_leader",
        first.term,
        &cause,
        &[format!("CONCLAVE_FENCING_TOKEN={}:{name}", first.term)],
    );

    cluster.kill(master).await;
    let successor = cluster.await_leader(bound).await;
    assert_ne!(successor, master);
    let next = NAMES[successor];
    let second = cluster.handle(successor).election_status().await.unwrap();
    assert!(second.term > first.term);
    let cause = first_cause(&cluster, successor).await;
    let bystander = others(master)
        .into_iter()
        .find(|&i| i != successor)
        .unwrap();
    let ran = cluster
        .wait_for(bound, || async {
            hook_ran(dir.path(), next, "on_leader", second.term, &cause)
                && loss_term(dir.path(), NAMES[bystander]).is_some()
        })
        .await;
    assert!(
        ran,
        "{next}'s on_leader and {}'s on_leader_change ran: {:?}",
        NAMES[bystander],
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    assert_hook_env(
        dir.path(),
        next,
        "on_leader",
        second.term,
        &cause,
        &new_leader_env(second.term, next, name),
    );
    // The loss is published in the round the survivor's new discovery opened.
    let lost_in = loss_term(dir.path(), NAMES[bystander]).unwrap();
    assert!(lost_in > first.term);
    assert_hook_env(
        dir.path(),
        NAMES[bystander],
        "on_leader_change",
        lost_in,
        "election_timeout",
        &leader_lost_env(name),
    );
    cluster.stop().await;
}

/// The term of the `on_leader_change` run with cause `election_timeout` that `node`'s hook
/// recorded, if it ran.
fn loss_term(dir: &std::path::Path, node: &str) -> Option<u64> {
    let prefix = format!("{node}-on_leader_change-");
    std::fs::read_dir(dir).ok()?.find_map(|entry| {
        let name = entry.ok()?.file_name().into_string().ok()?;
        name.strip_prefix(&prefix)?
            .strip_suffix("-election_timeout")?
            .parse()
            .ok()
    })
}

/// The cause node `index` recorded when it became master last (the hook file names it).
async fn first_cause(cluster: &MemoryCluster, index: usize) -> String {
    let history = cluster
        .handle(index)
        .history()
        .await
        .expect("the node answers");
    let record = history
        .iter()
        .rev()
        .find(|r| r.leader == Some(cluster.id(index)))
        .expect("the master recorded its win");
    record.cause.label().to_owned()
}
