//! The replicated log through three real `conclave run` processes (LOG-1..8), from the
//! README's `config/examples/three-udp` files (which turn the log on) with this test's own
//! addresses, timings and data directories laid over them.
//!
//! - `conclave kv put` sent to a follower is redirected to the leader and succeeds; 200 writes
//!   spread over the three nodes, with a `kill -9` of the leader half-way, are all readable
//!   afterwards on every node, the restarted one included — every write the CLI reported done
//!   (a write whose answer was lost is sent again with its request id, applied at most once).
//! - `conclave jobs` enqueues, claims and acks across a failover of the leader: no job lost,
//!   none enqueued twice by a retried request id, none claimed again after its ack.
//! - Dead letters: a job nacked on its last attempt is dead; `conclave jobs retry` sent to a
//!   follower is redirected and puts it back, claimable, its attempts from 0; `jobs purge`
//!   refuses a job that is not dead, and `jobs purge --all` deletes every dead one.
//! - Linearizable reads (LOG-7) after an acknowledged write return it and append no entry to
//!   the log (the read index is confirmed by a heartbeat round).
//! - With a snapshot every 20 entries (LOG-4), a follower stopped while 100 keys are written
//!   catches up through the leader's snapshot, and a restarted leader restores its state
//!   machine from its own snapshot file.

#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::{ProcessCluster, cli, conclave, example_config, text};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

fn start(cluster: &mut ProcessCluster, id: &str) {
    cluster.start_from_file(id, &example_config(id));
}

/// Writes `key = value` through `node` until the CLI reports it done, sending it again with
/// the same request id while the cluster has no leader (exit 75) or the node is down (69).
fn put_until_done(cluster: &ProcessCluster, nodes: &[&str], key: &str, value: &str) {
    let request_id = format!("put-{key}");
    cluster.wait_for(&format!("the write of {key} acknowledged"), |c| {
        // Whichever node answers: they redirect to the leader.
        nodes.iter().find_map(|node| {
            let (code, _) = cli(
                c,
                node,
                &["kv", "put", key, value, "--request-id", &request_id],
            );
            (code == 0).then_some(())
        })
    });
}

/// LOG-1, LOG-3, WAL-1: redirected writes, a leader killed mid-way, every acknowledged write
/// on every node afterwards.
#[test]
fn acknowledged_writes_survive_kill_of_the_leader() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();

    // A write sent to a follower is redirected and succeeds.
    let (code, answer) = cli(&cluster, follower, &["kv", "put", "first", "one"]);
    assert_eq!(code, 0, "kv put through a follower: {answer}");
    assert!(answer["revision"].as_u64().is_some(), "{answer}");
    // The follower itself answers 421 with the leader's admin URL.
    let direct = cluster
        .get(follower, "/v1/kv/first")
        .expect("the follower answers");
    assert_eq!(direct["error"], "not_leader", "{direct}");
    assert_eq!(direct["leader"], leader.as_str(), "{direct}");

    for i in 0..100 {
        let node = NODES[i % 3];
        let (code, answer) = cli(
            &cluster,
            node,
            &["kv", "put", &format!("key-{i}"), &format!("value-{i}")],
        );
        assert_eq!(code, 0, "write {i} through {node}: {answer}");
    }
    cluster.kill(&leader);
    let survivors: Vec<&str> = NODES.iter().copied().filter(|id| *id != leader).collect();
    for i in 100..200 {
        let node = survivors[i % 2];
        put_until_done(
            &cluster,
            &[node, survivors[(i + 1) % 2]],
            &format!("key-{i}"),
            &format!("value-{i}"),
        );
    }
    start(&mut cluster, &leader);

    for id in NODES {
        cluster.wait_for(&format!("every acknowledged write on {id}"), |c| {
            let (code, answer) = cli(c, id, &["kv", "list", "key-", "--stale"]);
            let items = answer["items"].as_array()?;
            (code == 0 && items.len() == 200).then_some(())
        });
        for i in [0, 57, 99, 100, 150, 199] {
            let (code, answer) = cli(&cluster, id, &["kv", "get", &format!("key-{i}"), "--stale"]);
            assert_eq!(code, 0, "{id} key-{i}: {answer}");
            assert_eq!(answer["value"], format!("value-{i}"), "{id} key-{i}");
        }
    }
    // A linearizable read through any node sees the last write.
    let (code, answer) = cli(&cluster, &leader, &["kv", "get", "key-199"]);
    assert_eq!((code, answer["value"].clone()), (0, "value-199".into()));
}

/// LOG-5, LOG-6: the job queue across a failover of the leader.
#[test]
fn jobs_survive_a_failover_exactly_once() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let any = NODES[0];
    let mut ids = Vec::new();
    for n in 0..4 {
        let (code, answer) = cli(
            &cluster,
            any,
            &[
                "jobs",
                "add",
                &format!("job-{n}"),
                "--request-id",
                &format!("add-{n}"),
            ],
        );
        assert_eq!(code, 0, "{answer}");
        ids.push(answer["job"]["id"].as_u64().unwrap());
    }
    // A retried enqueue (its answer lost, say) is applied once: the same job, not a new one.
    let (code, answer) = cli(
        &cluster,
        any,
        &["jobs", "add", "job-3", "--request-id", "add-3"],
    );
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["job"]["id"].as_u64(), Some(ids[3]), "{answer}");
    assert_eq!(answer["replayed"], true, "{answer}");

    let (code, claimed) = cli(&cluster, any, &["jobs", "claim", "--worker", "w1"]);
    assert_eq!(code, 0, "{claimed}");
    let first = claimed["job"]["id"].as_u64().unwrap();
    let (code, answer) = cli(
        &cluster,
        any,
        &["jobs", "ack", &first.to_string(), "--worker", "w1"],
    );
    assert_eq!(code, 0, "{answer}");
    let (code, claimed) = cli(&cluster, any, &["jobs", "claim", "--worker", "w2"]);
    assert_eq!(code, 0, "{claimed}");
    let second = claimed["job"]["id"].as_u64().unwrap();

    cluster.kill(&leader);
    let survivor = NODES.iter().copied().find(|id| *id != leader).unwrap();
    cluster.wait_for("a new leader", |c| {
        c.agreed_leader().filter(|(new, _)| *new != leader)
    });

    // The worker that claimed before the failover acks on the new leader.
    let (code, answer) = cli(
        &cluster,
        survivor,
        &["jobs", "ack", &second.to_string(), "--worker", "w2"],
    );
    assert_eq!(code, 0, "{answer}");
    // The jobs left are claimed; none of the acked ones comes back.
    let mut later = Vec::new();
    loop {
        let (code, claimed) = cli(&cluster, survivor, &["jobs", "claim", "--worker", "w3"]);
        if code != 0 {
            assert_eq!(claimed["error"], "none_ready", "{claimed}");
            break;
        }
        later.push(claimed["job"]["id"].as_u64().unwrap());
    }
    later.sort_unstable();
    let mut expected: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|id| *id != first && *id != second)
        .collect();
    expected.sort_unstable();
    assert_eq!(later, expected, "the jobs not acked, each once");
    let (code, listed) = cli(&cluster, survivor, &["jobs", "list"]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(
        listed["jobs"].as_array().unwrap().len(),
        4,
        "no job lost, none twice: {listed}"
    );
    let (code, done) = cli(&cluster, survivor, &["jobs", "list", "--state", "done"]);
    assert_eq!(code, 0);
    let done: Vec<u64> = done["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .collect();
    let mut acked = vec![first, second];
    acked.sort_unstable();
    assert_eq!(done, acked);
}

/// Claims the next job of the default queue through `node` and nacks it, expecting it to be
/// `job` and to die of it (its last attempt).
fn claim_and_kill(cluster: &ProcessCluster, node: &str, job: u64, attempts: u64) {
    let (code, claimed) = cli(cluster, node, &["jobs", "claim", "--worker", "w"]);
    assert_eq!(code, 0, "{claimed}");
    assert_eq!(claimed["job"]["id"].as_u64(), Some(job), "{claimed}");
    assert_eq!(
        claimed["job"]["attempts"].as_u64(),
        Some(attempts),
        "{claimed}"
    );
    let (code, nacked) = cli(
        cluster,
        node,
        &["jobs", "nack", &job.to_string(), "--worker", "w"],
    );
    assert_eq!(code, 0, "{nacked}");
    assert_eq!(nacked["job"]["state"], "dead", "{nacked}");
}

/// The ids of the jobs `node` lists in `state`.
fn listed(cluster: &ProcessCluster, node: &str, state: &str) -> Vec<u64> {
    let (code, answer) = cli(cluster, node, &["jobs", "list", "--state", state]);
    assert_eq!(code, 0, "{answer}");
    answer["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .collect()
}

/// LOG-5: dead letters retried and purged by an operator, through a follower.
#[test]
fn dead_letters_are_retried_and_purged_through_a_follower() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();

    let add = |payload: &str| {
        let (code, answer) = cli(
            &cluster,
            follower,
            &["jobs", "add", payload, "--max-attempts", "1"],
        );
        assert_eq!(code, 0, "{answer}");
        answer["job"]["id"].as_u64().unwrap()
    };
    let poison = add("poison");
    claim_and_kill(&cluster, follower, poison, 1);
    assert_eq!(listed(&cluster, follower, "dead"), [poison]);
    let waiting = add("waiting");

    // Only a dead job is retried: a ready one is refused with its state, an unknown one is
    // unknown, and neither changes anything.
    let (code, refused) = cli(&cluster, follower, &["jobs", "retry", &waiting.to_string()]);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["error"], "not_dead", "{refused}");
    assert_eq!(refused["state"], "ready", "{refused}");
    assert_eq!(refused["job_id"].as_u64(), Some(waiting), "{refused}");
    let (code, unknown) = cli(&cluster, follower, &["jobs", "retry", "999"]);
    assert_eq!(
        (code, &unknown["error"]),
        (1, &"unknown_job".into()),
        "{unknown}"
    );

    // The retry, sent to a follower, is redirected to the leader and applied.
    let (code, retried) = cli(&cluster, follower, &["jobs", "retry", &poison.to_string()]);
    assert_eq!(code, 0, "{retried}");
    assert_eq!(retried["job"]["id"].as_u64(), Some(poison), "{retried}");
    assert_eq!(retried["job"]["attempts"].as_u64(), Some(0), "{retried}");
    assert_eq!(retried["job"]["payload"], "poison", "{retried}");
    assert_eq!(retried["job"]["state"], "ready", "{retried}");
    assert!(listed(&cluster, follower, "dead").is_empty());
    // Claimed again before the job enqueued after it, its attempts counted from 0, and
    // dead-lettered again on its (new) last attempt.
    claim_and_kill(&cluster, follower, poison, 1);
    let second = add("poison too");
    let (code, claimed) = cli(&cluster, follower, &["jobs", "claim", "--worker", "w"]);
    assert_eq!(
        (code, claimed["job"]["id"].as_u64()),
        (0, Some(waiting)),
        "{claimed}"
    );
    claim_and_kill(&cluster, follower, second, 1);

    // A purge by id refuses a job that is not dead; --all deletes every dead one.
    let (code, refused) = cli(&cluster, follower, &["jobs", "purge", &waiting.to_string()]);
    assert_eq!(
        (code, &refused["error"]),
        (1, &"not_dead".into()),
        "{refused}"
    );
    let (code, purged) = cli(&cluster, follower, &["jobs", "purge", "--all"]);
    assert_eq!(code, 0, "{purged}");
    assert_eq!(purged["purged"].as_u64(), Some(2), "{purged}");
    assert_eq!(
        purged["jobs"],
        serde_json::json!([poison, second]),
        "{purged}"
    );
    assert!(listed(&cluster, follower, "dead").is_empty());
    assert_eq!(listed(&cluster, follower, "claimed"), [waiting]);
    // Without --json, a purge says how many it deleted: none are left.
    let admin = cluster.admin_url(follower);
    let output = conclave(&[
        "jobs", "purge", "--all", "--queue", "default", "--admin", &admin,
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "purged 0");

    // A payload read from a file (`@FILE`, bytes as they are); a nack and an ack say what
    // became of the job.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload.json");
    std::fs::write(&file, "{\"to\": \"ops\"}\n").unwrap();
    let human = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--admin", &admin]);
        let output = conclave(&all);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        text(&output.stdout).trim().to_owned()
    };
    let added = human(&[
        "jobs",
        "add",
        &format!("@{}", file.display()),
        "--max-attempts",
        "2",
    ]);
    let job = added.strip_prefix("job ").unwrap().to_owned();
    let (code, claimed) = cli(&cluster, follower, &["jobs", "claim", "--worker", "w"]);
    assert_eq!(code, 0, "{claimed}");
    assert_eq!(
        claimed["job"]["payload"], "{\"to\": \"ops\"}\n",
        "{claimed}"
    );
    let nacked = human(&["jobs", "nack", &job, "--worker", "w"]);
    assert!(
        nacked == format!("job {job} ready again (attempt 2 of 2)"),
        "{nacked}"
    );
    let (code, claimed) = cli(&cluster, follower, &["jobs", "claim", "--worker", "w"]);
    assert_eq!(
        (code, claimed["job"]["id"].to_string()),
        (0, job.clone()),
        "{claimed}"
    );
    assert_eq!(
        human(&["jobs", "ack", &job, "--worker", "w"]),
        format!("job {job} done")
    );
}

/// LOG-8: a watch streams a key's changes as they are applied, `/v1/log` reads the committed
/// entries back decoded, and the status answer shows the log's positions and each follower's
/// lag on the leader. LOG-7: linearizable reads see the last acknowledged write and append
/// nothing to the log.
#[test]
fn watch_log_and_status_follow_the_writes() {
    use std::io::BufRead;

    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    let mut watcher = std::process::Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args([
            "kv",
            "watch",
            "color",
            "--from",
            "1",
            "--admin",
            &cluster.admin_url(follower),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let writes: [&[&str]; 4] = [
        &["kv", "put", "color", "red"],
        &["kv", "put", "color", "blue"],
        &["kv", "del", "color"],
        &["kv", "put", "shape", "round"],
    ];
    for args in writes {
        let (code, answer) = cli(&cluster, follower, args);
        assert_eq!(code, 0, "{args:?}: {answer}");
    }
    let mut lines = std::io::BufReader::new(watcher.stdout.take().unwrap()).lines();
    let seen: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert_eq!(seen, ["put red @1", "put blue @2", "delete @3"]);

    // LOG-7: linearizable reads right after the acknowledged write see it, through the
    // follower (redirected) and the leader alike, and write nothing to the log: the read index
    // is confirmed by a heartbeat round, not by an entry.
    for node in [follower, leader.as_str(), follower] {
        let (code, answer) = cli(&cluster, node, &["kv", "get", "shape"]);
        assert_eq!(
            (code, &answer["value"]),
            (0, &Value::from("round")),
            "{answer}"
        );
    }
    let served = sample(
        &cluster.metrics(&leader).unwrap_or_default(),
        "conclave_log_reads_total{result=\"served\"}",
    );
    assert_eq!(served, Some(3.0));

    // A write over the limit (a value one byte past 64 KiB) is refused whole, and nothing
    // changes.
    let big = "v".repeat(64 * 1024 + 1);
    let (code, answer) = cli(&cluster, follower, &["kv", "put", "big", &big]);
    assert_eq!(code, 1, "{answer}");
    assert_eq!(answer["error"], "too_large", "{answer}");

    let log = cluster.get(&leader, "/v1/log?from=1").unwrap();
    let entries = log["entries"].as_array().unwrap();
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["noop", "command", "command", "command", "command"],
        "{log}"
    );
    // A command is one object tagged by its type, no Rust variant names.
    assert_eq!(entries[1]["command"]["type"], "kv_put", "{log}");
    assert_eq!(entries[1]["command"]["key"], "color", "{log}");
    assert_eq!(entries[1]["command"]["value"], "red", "{log}");
    assert_eq!(entries[3]["command"]["type"], "kv_delete", "{log}");
    assert_eq!(log["commit_index"], 5, "{log}");

    let status = cluster.wait_for("the followers caught up", |c| {
        let status = c.status(&leader)?;
        let followers = status["log"]["followers"].as_array()?.clone();
        (followers.len() == 2 && followers.iter().all(|f| f["lag"] == 0)).then_some(status)
    });
    assert_eq!(status["log"]["commit_index"], 5, "{status}");
    let follower_status = cluster.status(follower).unwrap();
    assert!(
        follower_status["log"]["followers"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// SESS-3: `conclave jobs claim --wait`, sent to a follower, waits on the leader until a job
/// of its queue is added, then prints it; with nothing added it exits 1 (`none_ready`) once
/// its wait has passed.
#[test]
fn a_waiting_claim_gets_the_job_added_after_it() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    let claim = [
        "jobs", "claim", "--worker", "w", "--queue", "mail", "--wait",
    ];
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| cli(&cluster, follower, &[&claim[..], &["30"]].concat()));
        cluster.wait_for("the claim waiting on the leader", |c| {
            let waiting = sample(&c.metrics(&leader)?, "conclave_log_claims_waiting")?;
            (waiting == 1.0).then_some(())
        });
        let (code, added) = cli(
            &cluster,
            follower,
            &["jobs", "add", "hello", "--queue", "mail"],
        );
        assert_eq!(code, 0, "{added}");
        let (code, claimed) = waiting.join().unwrap();
        assert_eq!(code, 0, "{claimed}");
        assert_eq!(claimed["job"]["id"], added["job"]["id"], "{claimed}");
        assert_eq!(claimed["job"]["worker"], "w", "{claimed}");
    });
    let (code, nothing) = cli(&cluster, follower, &[&claim[..], &["1"]].concat());
    assert_eq!(
        (code, &nothing["error"]),
        (1, &"none_ready".into()),
        "{nothing}"
    );
}

/// The value of the sample `series` (name and labels, as exposed) in a metrics text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.trim();
        value.parse().ok()
    })
}

/// The snapshot files in node `id`'s log directory (docs/wal.md).
fn snapshot_files(cluster: &ProcessCluster, id: &str) -> Vec<String> {
    std::fs::read_dir(cluster.data_dir(id).join("log"))
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with("snap-") && name.ends_with(".snap"))
                .collect()
        })
        .unwrap_or_default()
}

/// LOG-4: a follower stopped while the leader wrote 100 keys and snapshotted every 20 entries
/// is behind the compaction point when it comes back: it gets the leader's snapshot
/// (installed, saved in its own data directory) and then the entries after it, and reads every
/// key locally. The leader, restarted, restores its machine from its own snapshot.
#[test]
fn a_follower_behind_the_compaction_point_catches_up_through_a_snapshot() {
    let mut cluster = ProcessCluster::new(&NODES).with_env("CONCLAVE__LOG__SNAPSHOT_ENTRIES", "20");
    for id in NODES {
        start(&mut cluster, id);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    cluster.stop(follower);
    for i in 0..100 {
        let (code, answer) = cli(
            &cluster,
            &leader,
            &["kv", "put", &format!("key-{i}"), &format!("value-{i}")],
        );
        assert_eq!(code, 0, "write {i}: {answer}");
    }
    cluster.wait_for("the leader's snapshots saved", |c| {
        let metrics = c.metrics(&leader)?;
        let taken = sample(&metrics, "conclave_log_snapshots_total{origin=\"taken\"}")?;
        (taken >= 4.0).then_some(())
    });
    assert!(
        !snapshot_files(&cluster, &leader).is_empty(),
        "the leader keeps a snapshot file"
    );

    start(&mut cluster, follower);
    cluster.wait_for(&format!("every key on {follower}"), |c| {
        let (code, answer) = cli(c, follower, &["kv", "list", "key-", "--stale"]);
        let items = answer["items"].as_array()?;
        (code == 0 && items.len() == 100).then_some(())
    });
    for i in [0, 19, 57, 99] {
        let (code, answer) = cli(
            &cluster,
            follower,
            &["kv", "get", &format!("key-{i}"), "--stale"],
        );
        assert_eq!(code, 0, "{follower} key-{i}: {answer}");
        assert_eq!(answer["value"], format!("value-{i}"), "{follower} key-{i}");
    }
    let metrics = cluster.metrics(follower).unwrap_or_default();
    let installed = sample(
        &metrics,
        "conclave_log_snapshots_total{origin=\"installed\"}",
    );
    assert!(
        installed.is_some_and(|count| count >= 1.0),
        "{follower} caught up through the leader's snapshot: {installed:?}"
    );
    assert!(
        sample(&metrics, "conclave_log_snapshot_bytes").is_some_and(|bytes| bytes > 0.0),
        "the snapshot's size is exposed"
    );
    assert!(
        !snapshot_files(&cluster, follower).is_empty(),
        "{follower} saved the installed snapshot"
    );

    // The leader, restarted, starts from its own snapshot and the entries after it.
    cluster.stop(&leader);
    start(&mut cluster, &leader);
    cluster.wait_for(&format!("every key on the restarted {leader}"), |c| {
        let (code, answer) = cli(c, &leader, &["kv", "list", "key-", "--stale"]);
        let items = answer["items"].as_array()?;
        (code == 0 && items.len() == 100).then_some(())
    });
    let log = std::fs::read_to_string(cluster.log_path(&leader)).unwrap_or_default();
    assert!(
        log.contains("state machine restored from the snapshot"),
        "{leader} restored its machine from its snapshot at the restart"
    );
}
