//! Hooks at the node level (CB-2, CB-5), in real time because hooks are real processes: the
//! leader's `on_leader` hook sees the fencing token the node reports, and a hook that takes
//! half a minute on every node does not hold back a failover.

use std::path::Path;
use std::time::Duration;

use conclave_actors::config::{HookCommand, HooksConfig, Quorum};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};

fn read_env(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("CONCLAVE_"))
        .map(str::to_owned)
        .collect()
}

/// CB-2, CB-5: the leader's `on_leader` hook runs with the node id, role, term, leader and the
/// fencing token that the node itself reports.
#[actix_rt::test]
async fn on_leader_hook_sees_the_fencing_token() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "env | grep ^CONCLAVE_ > {}/$CONCLAVE_NODE_ID.env",
        dir.path().display()
    );
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        on_leader: vec![HookCommand::Shell(script)],
        ..HooksConfig::default()
    };
    let cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let status = cluster.handle(leader).election_status().await.unwrap();
    let token = status.fencing_token.unwrap().to_string();
    let file = dir.path().join(format!("{}.env", cluster.id(leader)));
    let ran = cluster
        .wait_for(Duration::from_secs(10), || async { file.exists() })
        .await;
    assert!(ran, "the on_leader hook ran on the leader");
    // The hook writes as it runs; give it a moment to finish the file.
    let env = {
        let mut env = read_env(&file);
        for _ in 0..100 {
            if env.iter().any(|l| l.starts_with("CONCLAVE_FENCING_TOKEN")) {
                break;
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
            env = read_env(&file);
        }
        env
    };
    for expected in [
        format!("CONCLAVE_NODE_ID={}", cluster.id(leader)),
        "CONCLAVE_HOOK=on_leader".to_owned(),
        "CONCLAVE_ROLE=leader".to_owned(),
        format!("CONCLAVE_LEADER={}", cluster.id(leader)),
        format!("CONCLAVE_TERM={}", status.term),
        format!("CONCLAVE_FENCING_TOKEN={token}"),
    ] {
        assert!(env.contains(&expected), "{expected} missing from {env:?}");
    }
    for follower in (0..3).filter(|&i| i != leader) {
        let path = dir.path().join(format!("{}.env", cluster.id(follower)));
        assert!(!path.exists(), "on_leader ran on a follower");
    }
    cluster.stop().await;
}

/// CB-2: hooks run beside the election, never in its way: with an `on_leader_change` hook
/// that sleeps for 30 s on every node, killing the leader still gives a new leader at once,
/// while the first hooks are still sleeping.
#[actix_rt::test]
async fn slow_hook_does_not_delay_an_election() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hook-finished");
    let started = dir.path().join("hook-started");
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        on_leader_change: vec![HookCommand::Shell(format!(
            // An unusual duration, so that the leftover check below finds this child only.
            "touch {}; sleep 29.75; touch {}",
            started.display(),
            marker.display()
        ))],
        timeout: Duration::from_secs(60),
        ..HooksConfig::default()
    };
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let old = cluster.await_leader(Duration::from_secs(10)).await;
    let hooks_running = cluster
        .wait_for(Duration::from_secs(10), || async { started.exists() })
        .await;
    assert!(hooks_running, "the slow hooks started");
    cluster.kill(old).await;
    let new = cluster.await_leader(Duration::from_secs(10)).await;
    assert_ne!(new, old);
    assert!(
        !marker.exists(),
        "the election finished while the slow hooks were still running"
    );
    cluster.stop().await;
    // Stopping the nodes killed the hooks with their children: nothing is left sleeping.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let leftover = std::process::Command::new("pgrep")
        .args(["-x", "-f", "sleep 29.75"])
        .output()
        .map(|out| out.status.success());
    assert_ne!(leftover.ok(), Some(true), "a hook outlived its node");
}
