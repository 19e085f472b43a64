//! Rotating the cluster key of three real `conclave run` processes with the replicated log
//! (PROTO-9, issue 26 item 3), exactly as `docs/operations.md` ("Rotating the cluster key")
//! tells an operator: edit each node's file and send it SIGHUP, one node at a time, in three
//! steps — every node learns the next key, every node sends under it, every node makes it the
//! current key. Writes through the CLI keep committing between reloads, the leader and its
//! term never change, and no node ever drops a frame that does not open (`bad_tag`).

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{ProcessCluster, cli, openssl};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
const CLUSTER_LINE: &str = "[cluster]\nid = \"process-test\"\n";

/// Node `id`'s configuration with these `[cluster]` key settings.
fn with_keys(cluster: &ProcessCluster, id: &str, keys: &str) -> String {
    let text = cluster.config_text(id);
    assert!(text.contains(CLUSTER_LINE));
    text.replace(CLUSTER_LINE, &format!("{CLUSTER_LINE}{keys}"))
}

fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// `conclave_frames_dropped_total{reason="bad_tag"}` of node `id`.
fn bad_tags(cluster: &ProcessCluster, id: &str) -> f64 {
    cluster
        .metrics(id)
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("conclave_frames_dropped_total{reason=\"bad_tag\"} ")
                .and_then(|value| value.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// Issue 26 item 3: the documented rotation under writes, by SIGHUP, with no leader change.
#[test]
fn proto9_sighup_rotation_under_writes_keeps_the_leader() {
    let mut cluster = ProcessCluster::new(&NODES).with_toml("[log]\nenabled = true\n");
    let current = cluster.dir().join("psk");
    let next = cluster.dir().join("psk.next");
    std::fs::write(&current, format!("{}\n", "3a".repeat(32))).unwrap();
    // The next key made as the guide's step 1 makes it.
    openssl();
    let made = std::process::Command::new("sh")
        .args(["-c", "openssl rand -hex 32 > psk.next"])
        .current_dir(cluster.dir())
        .status()
        .unwrap();
    assert!(made.success() && next.exists());
    let (current, next) = (toml_path(&current), toml_path(&next));

    let start = format!("psk_file = {current}\n");
    for id in NODES {
        let text = with_keys(&cluster, id, &start);
        cluster.start_with_config(id, &text);
    }
    let (leader, term) = cluster.wait_for("a leader agreed by all", ProcessCluster::agreed_leader);

    let steps = [
        format!("psk_file = {current}\npsk_next_file = {next}\n"),
        format!("psk_file = {current}\npsk_next_file = {next}\npsk_send = \"next\"\n"),
        format!("psk_file = {next}\n"),
    ];
    let mut written = 0;
    for (step, keys) in steps.iter().enumerate() {
        for id in NODES {
            std::fs::write(cluster.config_path(id), with_keys(&cluster, id, keys)).unwrap();
            let mark = cluster.log(id).len();
            cluster.signal(id, 1);
            cluster.wait_for(&format!("{id} to reload step {step}"), |c| {
                c.log(id)
                    .get(mark..)?
                    .lines()
                    .find(|line| line.contains("configuration reloaded"))
                    .map(str::to_owned)
            });
            let log = cluster.log(id);
            assert!(
                !log[mark..].contains("reload refused") && !log[mark..].contains("takes a restart"),
                "{id} at step {step}: {}",
                &log[mark..]
            );
            written += 1;
            let (code, answer) = cli(
                &cluster,
                &leader,
                &["kv", "put", &format!("k{written}"), &format!("step {step}")],
            );
            assert_eq!(code, 0, "write after {id}'s step {step}: {answer}");
        }
    }
    assert!(
        cluster.log(&leader).contains("frame keys replaced"),
        "the leader logged its keys"
    );
    assert_eq!(
        cluster.wait_for("all three agreeing", ProcessCluster::agreed_leader),
        (leader.clone(), term),
        "the rotation cost the leader its leadership"
    );
    for id in NODES {
        assert_eq!(
            bad_tags(&cluster, id),
            0.0,
            "{id} dropped frames that do not open"
        );
    }
    let (code, answer) = cli(&cluster, &leader, &["kv", "get", "k9"]);
    assert_eq!(code, 0, "{answer}");
    for id in NODES {
        assert_eq!(cluster.stop(id).code(), Some(0));
    }
}
