//! Three real `conclave run` processes over UDP on loopback, from the ready-made
//! `config/examples/three-udp` files. The harness lays a loopback address of the test's own,
//! faster timings and a temporary data directory over them through `CONCLAVE__...`
//! environment variables (which also exercises the layering of docs/design.md §9), so the test runs
//! beside the README's example cluster. The leader is found through the admin API, killed
//! with SIGKILL, a new leader must be agreed on within a bound, and the killed node,
//! restarted from its WAL, rejoins as a follower. At the end every node's WAL is read back to
//! check that no node ever recorded two different votes in one term, across the restart too
//! (RAFT-1, WAL-2).

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use conclave_protocol::PeerId;
use conclave_storage::{WalRecord, read_records};

use support::{ProcessCluster, example_config};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// Every term in which the node's WAL recorded a vote maps to one candidate only.
fn assert_one_vote_per_term(id: &str, data_dir: &Path) {
    let mut votes: BTreeMap<u64, PeerId> = BTreeMap::new();
    for record in read_records(data_dir).unwrap() {
        if let WalRecord::HardState(state) = record {
            if let Some(vote) = state.vote {
                let first = *votes.entry(state.term).or_insert(vote);
                assert_eq!(
                    first, vote,
                    "{id} voted for {first} and {vote} in term {}",
                    state.term
                );
            }
        }
    }
}

/// RAFT-1..4, WAL-2, CB-3: kill -9 of the leader, a new leader, the old one back as a
/// follower from its WAL, one vote per term throughout.
#[test]
fn kill_the_leader_and_restart_it_from_its_wal() {
    let mut cluster = ProcessCluster::new(&NODES);
    for id in NODES {
        cluster.start_from_file(id, &example_config(id));
    }
    let (leader, term) = cluster.wait_for(
        "a first leader agreed by all",
        ProcessCluster::agreed_leader,
    );

    cluster.kill(&leader);
    let (new_leader, new_term) = cluster.wait_for("a new leader agreed by the survivors", |c| {
        c.agreed_leader()
            .filter(|(candidate, t)| *candidate != leader && *t > term)
    });

    cluster.start_from_file(&leader, &example_config(&leader));
    cluster.wait_for("the restarted node following the new leader", |c| {
        let status = c.status(&leader)?;
        (status["role"] == "follower" && status["leader"] == new_leader.as_str()).then_some(())
    });
    let (still, still_term) = cluster.wait_for("all three agreeing", ProcessCluster::agreed_leader);
    assert_eq!(
        still, new_leader,
        "the rejoining node did not depose the new leader"
    );
    assert_eq!(still_term, new_term, "nor raise the term");

    for id in NODES {
        cluster.kill(id);
    }
    for id in NODES {
        assert_one_vote_per_term(id, &cluster.data_dir(id));
    }
}
