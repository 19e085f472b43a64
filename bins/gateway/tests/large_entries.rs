//! Writes larger than a frame through three real `conclave run` processes over UDP, at the
//! default `log.max_append_bytes` (MEMB-6): a 64 KiB value, the largest a write may carry,
//! travels to the followers in chunks, commits, and reads back on every node; after a
//! `kill -9` of the leader a new leader takes another 64 KiB value, both read back through
//! the survivors, and the killed node catches up with both once restarted.

#![allow(clippy::unwrap_used)]

mod support;

use support::{ProcessCluster, cli, example_config};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// The largest value a write may carry.
const VALUE_LEN: usize = 64 * 1024;

/// A 64 KiB value of printable text that differs from `seed` to `seed`, so that a chunk put
/// at the wrong place cannot read back as the right value.
fn large_value(seed: usize) -> String {
    (0..VALUE_LEN)
        .map(|n| char::from(b'a' + ((n * 7 + seed * 13 + n / 251) % 26) as u8))
        .collect()
}

/// Writes `key = value` through whichever of `nodes` answers until the CLI reports it done,
/// with one request id, so a write whose answer was lost is applied once.
fn put_until_done(cluster: &ProcessCluster, nodes: &[&str], key: &str, value: &str) {
    let request_id = format!("put-{key}");
    cluster.wait_for(&format!("the write of {key} acknowledged"), |c| {
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

/// Waits until `node`'s own copy holds `key = value`.
fn wait_stale_read(cluster: &ProcessCluster, node: &str, key: &str, value: &str) {
    cluster.wait_for(&format!("{key} on {node}"), |c| {
        let (code, answer) = cli(c, node, &["kv", "get", key, "--stale"]);
        (code == 0 && answer["value"].as_str() == Some(value)).then_some(())
    });
}

/// MEMB-6: a 64 KiB value commits over UDP at the defaults, reads back on every node, and
/// survives a kill of the leader; a new leader takes another one.
#[test]
fn a_64_kib_value_commits_and_survives_a_leader_kill() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        cluster.start_from_file(id, &example_config(id));
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let first = large_value(1);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    // Through a follower: redirected to the leader.
    let (code, answer) = cli(&cluster, follower, &["kv", "put", "large-1", &first]);
    assert_eq!(code, 0, "a 64 KiB write: {answer}");
    for id in NODES {
        wait_stale_read(&cluster, id, "large-1", &first);
    }
    // One byte more is refused, naming the limit.
    let too_large = format!("{first}x");
    let (code, answer) = cli(&cluster, &leader, &["kv", "put", "large-x", &too_large]);
    assert_ne!(code, 0, "{answer}");

    cluster.kill(&leader);
    let survivors: Vec<&str> = NODES.iter().copied().filter(|id| *id != leader).collect();
    let second = large_value(2);
    put_until_done(&cluster, &survivors, "large-2", &second);
    for id in &survivors {
        // Linearizable reads through the new leader.
        let (code, answer) = cli(&cluster, id, &["kv", "get", "large-1"]);
        assert_eq!(code, 0, "{id}: {answer}");
        assert_eq!(
            answer["value"].as_str(),
            Some(first.as_str()),
            "{id} large-1"
        );
        wait_stale_read(&cluster, id, "large-2", &second);
    }
    cluster.start_from_file(&leader, &example_config(&leader));
    wait_stale_read(&cluster, &leader, "large-1", &first);
    wait_stale_read(&cluster, &leader, "large-2", &second);
}
