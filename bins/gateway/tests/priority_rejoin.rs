//! Issue 15 item 2 (PRI-4, CB-5) with real processes: in `config/examples/three-priority`
//! (batteries 80, 100 and 60, so gw-b leads; announce every 500 ms, master dead after 1.5 s),
//! a follower stopped with SIGTERM and started again from its WAL rejoins as a late joiner:
//! it follows gw-b again at gw-b's round, and gw-b's round, fencing token and leadership
//! history do not change, so clients that fenced on the token need not start again. The
//! example's files run as they are, with this test's loopback address, ports and temporary
//! data directories laid over them.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::ProcessCluster;

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

fn example(id: &str) -> PathBuf {
    let node = id.trim_start_matches("gw-");
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/examples/three-priority")
        .join(format!("node-{node}.toml"))
}

/// gw-b's leadership history, as its admin API answers it.
fn history(cluster: &ProcessCluster) -> Vec<Value> {
    cluster
        .get("gw-b", "/v1/history")
        .and_then(|answer| answer["history"].as_array().cloned())
        .unwrap()
}

/// Stops `follower` with SIGTERM, starts it again, and checks that it takes gw-b back at
/// `term` while gw-b keeps its round and history.
fn restart_follower(cluster: &mut ProcessCluster, follower: &str, term: u64) {
    let before = history(cluster);
    let token = format!("{term}:gw-b");
    let status = cluster.stop(follower);
    assert!(status.success(), "{follower} stopped with {status}");
    cluster.start_from_example(follower, &example(follower));
    let rejoined = cluster.wait_for("the restarted follower to hear the master", |c| {
        c.status(follower)
            .filter(|status| status["priority"]["master_confirmed"] == true)
    });
    assert_eq!(rejoined["leader"], "gw-b", "{rejoined}");
    assert_eq!(
        rejoined["fencing_token"], token,
        "the master's round moved for a node that rejoined: {rejoined}"
    );
    for id in NODES {
        let status = cluster.status(id).unwrap();
        assert_eq!(status["fencing_token"], token, "{id}: {status}");
    }
    assert_eq!(history(cluster), before, "gw-b's history changed");
}

#[test]
fn a_restarted_follower_leaves_the_masters_round_and_token_unchanged() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        cluster.start_from_example(id, &example(id));
    }
    let (leader, term) = cluster.wait_for("one master all three name", |c| c.agreed_leader());
    assert_eq!(leader, "gw-b", "the fullest battery leads");
    cluster.wait_for("every follower to hear the master", |c| {
        NODES
            .iter()
            .all(|id| {
                c.status(id)
                    .is_some_and(|status| status["priority"]["master_confirmed"] == true)
            })
            .then_some(())
    });
    for follower in ["gw-a", "gw-c"] {
        restart_follower(&mut cluster, follower, term);
    }
    for id in NODES {
        cluster.stop(id);
    }
}
