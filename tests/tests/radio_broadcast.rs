//! One AppendEntries for every follower on the radio (issue 27, item 1): over virtual dongles
//! with the log, each written value reaches the air in a broadcast frame that every follower
//! takes, instead of in one unicast frame per follower. The simulated air's monitor hears
//! every frame; frames are sealed, so the test opens them with the cluster's key.

use std::collections::BTreeMap;
use std::time::Duration;

use conclave_actors::node::NodeHandle;
use conclave_config::{NodeConfig, Quorum};
use conclave_core::election::{ElectionConfig, ModeStatus};
use conclave_espnow::Mac;
use conclave_protocol::{AuthKey, Body, ClusterId, FrameCodec};
use conclave_tests::api_client::put_value;
use conclave_tests::{CLUSTER, RadioCluster, TEST_PSK, test_log};

const PATIENCE: Duration = Duration::from_secs(20);
const WRITES: usize = 6;

/// Waits until the leader knows that both followers hold its whole log, its term's first entry
/// included. Until then it is still probing a follower, and a follower being probed is sent a
/// message of its own: the broadcast path is for followers in step, which is what this test
/// is about (on a loaded machine the first write could otherwise come before that).
async fn await_followers_in_step(leader: &NodeHandle) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = leader
            .election_status()
            .await
            .expect("a running node answers");
        if let ModeStatus::Raft(raft) = &status.detail {
            let in_step = raft.log.as_ref().is_some_and(|log| {
                log.followers.len() == 2
                    && log
                        .followers
                        .iter()
                        .all(|(_, matched)| *matched == raft.last_log.index)
            });
            if in_step {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the followers never caught up with the leader: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn with_log(config: &mut NodeConfig) {
    if let ElectionConfig::Raft(raft) = &mut config.election {
        raft.log = Some(conclave_core::raft::LogConfig::default());
    }
}

#[actix_rt::test]
async fn each_written_value_goes_out_once_for_both_followers() {
    let _log = test_log();
    let key = || AuthKey::new(TEST_PSK, 16).expect("the test key is long enough");
    let cluster = RadioCluster::start_with(&["a", "b", "c"], Quorum::Voters, 31, |config| {
        with_log(config);
        config.auth_key = Some(key());
    })
    .await;
    let monitor = cluster.air.monitor();
    let leader = cluster.await_leader_among(&[0, 1, 2], PATIENCE).await;
    await_followers_in_step(cluster.handle(leader)).await;
    let values: Vec<String> = (0..WRITES).map(|n| format!("broadcast-{n}")).collect();
    for (n, value) in values.iter().enumerate() {
        put_value(cluster.handle(leader), &format!("k{n}"), value).await;
    }
    cluster.stop().await;
    assert_eq!(monitor.missed(), 0);

    // Per value: the frames whose AppendEntries carried it, broadcast or unicast.
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), Some(key()));
    let mut carried: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for frame in monitor.frames() {
        let Ok(envelope) = codec.decode(&frame.payload) else {
            continue;
        };
        let Body::AppendEntries(append) = &envelope.body else {
            continue;
        };
        for entry in &append.entries {
            for value in &values {
                if entry
                    .data
                    .windows(value.len())
                    .any(|w| w == value.as_bytes())
                {
                    let counts = carried.entry(value.as_str()).or_default();
                    if frame.dst == Mac::BROADCAST && envelope.to.is_none() {
                        counts.0 += 1;
                    } else {
                        counts.1 += 1;
                    }
                }
            }
        }
    }
    for value in &values {
        let (broadcast, _unicast) = carried.get(value.as_str()).copied().unwrap_or_default();
        assert!(
            broadcast >= 1,
            "{value} never went out as one broadcast for both followers: {carried:?}"
        );
    }
    let unicast: usize = carried.values().map(|counts| counts.1).sum();
    assert!(
        unicast < WRITES,
        "most values should reach the followers in one broadcast: {carried:?}"
    );
}
