//! Hooks at the node level (CB-2, CB-5), in real time because hooks are real processes: the
//! leader's `on_leader` hook sees the fencing token the node reports; a leader cut off until
//! it steps down on `quorum_lost` runs `on_follower` with that cause, and a stopping leader
//! runs it before it is gone; a hook that takes half a minute on every node does not hold
//! back a failover, and a stopped node leaves no hook process behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use conclave_config::{HookCommand, HooksConfig, Quorum};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};

const BOUND: Duration = Duration::from_secs(10);

fn read_env(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("CONCLAVE_"))
        .map(str::to_owned)
        .collect()
}

/// A hook command that writes its `CONCLAVE_*` variables to `dir/<node>-<hook>-<term>-<cause>`
/// through a temporary name, so a file that exists is complete.
fn dump_env(dir: &Path) -> HookCommand {
    HookCommand::Shell(format!(
        "f='{}'/\"$CONCLAVE_NODE_ID-$CONCLAVE_HOOK-$CONCLAVE_TERM-$CONCLAVE_CAUSE\"; \
         env | grep ^CONCLAVE_ > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"",
        dir.display()
    ))
}

/// The files `dump_env` wrote for `node`'s `hook`.
fn dumps(dir: &Path, node: &str, hook: &str) -> Vec<PathBuf> {
    let prefix = format!("{node}-{hook}-");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| name.starts_with(&prefix) && !name.ends_with(".tmp"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// CB-2, CB-5: the leader's `on_leader` hook runs with the node id, role, term, leader and the
/// fencing token that the node itself reports.
#[actix_rt::test]
async fn on_leader_hook_sees_the_fencing_token() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        on_leader: vec![dump_env(dir.path())],
        ..HooksConfig::default()
    };
    let cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let leader = cluster.await_leader(BOUND).await;
    let status = cluster.handle(leader).election_status().await.unwrap();
    let token = status.fencing_token.unwrap().to_string();
    let name = cluster.id(leader).to_string();
    let ran = cluster
        .wait_for(BOUND, || async {
            !dumps(dir.path(), &name, "on_leader").is_empty()
        })
        .await;
    assert!(ran, "the on_leader hook ran on the leader");
    let env = read_env(&dumps(dir.path(), &name, "on_leader")[0]);
    for expected in [
        format!("CONCLAVE_NODE_ID={name}"),
        "CONCLAVE_HOOK=on_leader".to_owned(),
        "CONCLAVE_ROLE=leader".to_owned(),
        format!("CONCLAVE_LEADER={name}"),
        format!("CONCLAVE_TERM={}", status.term),
        format!("CONCLAVE_FENCING_TOKEN={token}"),
    ] {
        assert!(env.contains(&expected), "{expected} missing from {env:?}");
    }
    for follower in (0..3).filter(|&i| i != leader) {
        let follower = cluster.id(follower).to_string();
        assert!(
            dumps(dir.path(), &follower, "on_leader").is_empty(),
            "on_leader ran on {follower}"
        );
    }
    cluster.stop().await;
}

/// CB-2 (issue 8, item 6): a leader cut off from every peer steps down when check-quorum
/// finds no quorum, and runs `on_follower` with `CONCLAVE_CAUSE=quorum_lost`, no leader and
/// itself as the previous leader. Before the fix it ran only `on_leader_change`, so a
/// keepalived-style `on_follower` never stopped the service the ex-leader had started.
#[actix_rt::test]
async fn an_isolated_leader_runs_on_follower_when_it_loses_quorum() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        on_follower: vec![dump_env(dir.path())],
        ..HooksConfig::default()
    };
    let cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let leader = cluster.await_leader(BOUND).await;
    let name = cluster.id(leader).to_string();
    let term = cluster.handle(leader).election_status().await.unwrap().term;

    cluster
        .hub
        .isolate(u32::try_from(leader).expect("three nodes"));
    let stepped_down = cluster
        .wait_for(BOUND, || async {
            dumps(dir.path(), &name, "on_follower")
                .iter()
                .any(|path| path.to_string_lossy().ends_with("-quorum_lost"))
        })
        .await;
    assert!(
        stepped_down,
        "the isolated ex-leader {name} ran no on_follower with cause quorum_lost; ran: {:?}",
        dumps(dir.path(), &name, "on_follower")
    );
    let file = dir
        .path()
        .join(format!("{name}-on_follower-{term}-quorum_lost"));
    let mut env = read_env(&file);
    env.sort();
    let mut expected = vec![
        format!("CONCLAVE_NODE_ID={name}"),
        "CONCLAVE_HOOK=on_follower".to_owned(),
        "CONCLAVE_EVENT=leader_changed".to_owned(),
        "CONCLAVE_ROLE=follower".to_owned(),
        format!("CONCLAVE_TERM={term}"),
        "CONCLAVE_LEADER=".to_owned(),
        format!("CONCLAVE_PREVIOUS_LEADER={name}"),
        "CONCLAVE_STEPPED_DOWN=true".to_owned(),
        "CONCLAVE_CAUSE=quorum_lost".to_owned(),
        "CONCLAVE_FENCING_TOKEN=".to_owned(),
    ];
    expected.sort();
    env.retain(|line| !line.starts_with("CONCLAVE_AT_UNIX_MS="));
    assert_eq!(env, expected);
    cluster.stop().await;
}

/// CB-2: a leader that stops hands over, and its `on_follower` for the step-down has run
/// to the end by the time the stop returns: the node waits for it rather than killing it.
#[actix_rt::test]
async fn a_stopping_leader_runs_on_follower_before_it_is_gone() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        // Slow enough that a stop which did not wait would kill it half-way.
        on_follower: vec![HookCommand::Shell(format!(
            "sleep 0.3; f='{}'/\"$CONCLAVE_NODE_ID-$CONCLAVE_STEPPED_DOWN\"; \
             env | grep ^CONCLAVE_ > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"",
            dir.path().display()
        ))],
        ..HooksConfig::default()
    };
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let leader = cluster.await_leader(BOUND).await;
    let name = cluster.id(leader).to_string();

    cluster.stop_node(leader).await;
    let file = dir.path().join(format!("{name}-true"));
    let env = read_env(&file);
    assert!(
        env.contains(&"CONCLAVE_STEPPED_DOWN=true".to_owned()),
        "no complete on_follower run of the stopped leader {name}: {env:?}"
    );
    assert!(
        env.contains(&"CONCLAVE_CAUSE=resign".to_owned()),
        "the step-down of a hand-over is a resignation: {env:?}"
    );
    cluster.stop().await;
}

/// Whether any process of process group `group` is still alive (zombies count as gone: they
/// wait for their parent to reap them, and run nothing).
fn group_alive(group: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // No procfs: ask the kernel whether the group still has members.
        return std::process::Command::new("kill")
            .args(["-0", "--", &format!("-{group}")])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
    };
    entries.filter_map(Result::ok).any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // After the command's name in parentheses: state, ppid, pgrp, ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[2] == group && !matches!(fields[0], "Z" | "X")
    })
}

/// CB-2: hooks run beside the election, never in its way: with an `on_leader_change` hook
/// that would sleep for 30 s on every node, killing the leader still gives a new leader at
/// once, while the first hooks are still running. Stopping the nodes ends every hook with its
/// children (the stop lets them run up to two hook timeouts, then kills them): every process
/// group a hook ran in is empty afterwards, and no hook ran to its end.
#[actix_rt::test]
async fn slow_hook_does_not_delay_an_election() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hook-finished");
    let groups = dir.path().join("groups");
    std::fs::create_dir(&groups).unwrap();
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        // Each run leads a process group of its own (its shell's pid): it records that group,
        // then sleeps in a child of the shell, until the timeout kills the group.
        on_leader_change: vec![HookCommand::Shell(format!(
            "touch '{groups}'/$$; sleep 30; touch '{marker}'",
            groups = groups.display(),
            marker = marker.display()
        ))],
        timeout: Duration::from_secs(3),
        ..HooksConfig::default()
    };
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    let old = cluster.await_leader(BOUND).await;
    let recorded = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let hooks_running = cluster
        .wait_for(BOUND, || async { recorded(&groups).len() >= 3 })
        .await;
    assert!(hooks_running, "the slow hooks started on every node");
    let first_runs = recorded(&groups);
    cluster.kill(old).await;
    let new = cluster.await_leader(BOUND).await;
    assert_ne!(new, old);
    let still_running = first_runs.iter().filter(|group| group_alive(group)).count();
    assert!(
        still_running > 0,
        "the new leader was elected while the first hooks were still running"
    );
    cluster.stop().await;

    let started = recorded(&groups);
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut alive: Vec<String> = started.clone();
    while !alive.is_empty() && tokio::time::Instant::now() < deadline {
        alive.retain(|group| group_alive(group));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        alive.is_empty(),
        "hook process groups {alive:?} (of {started:?}) outlived their nodes"
    );
    assert!(!marker.exists(), "a hook ran to its end");
}
