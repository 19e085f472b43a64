//! Three gateways on the reference dongle firmware (issue 10; ESP-1..5, RAFT-2..4): each node
//! — every actor, a WAL on disk — opens its own firmware process's pseudo-terminal by path
//! with tokio-serial, as it would open `/dev/ttyACM0`, and the firmware processes
//! (`firmware/micropython/host_dongle.py` under CPython, the board's protocol logic unchanged)
//! share one simulated air. They elect a leader; `kill -9` of the leader's firmware process —
//! its dongle pulled out — makes the other two elect another, while the dongle-less node
//! learns its dongle is gone.
//!
//! Skipped, with a message, when `python3` is not installed.

#[path = "../../crates/espnow/tests/firmware_support/mod.rs"]
mod firmware_support;

use std::time::Duration;

use conclave_actors::node::{Node, NodeBuilder, NodeHandle};
use conclave_config::{DonglePort, EspNowLinkConfig, Quorum};
use conclave_core::election::Role;
use conclave_tests::{ClusterOptions, node_config, test_log};
use firmware_support::{AirAddress, Firmware, skip_without_python};

/// Bound on every wait: generous against a loaded machine; an election over the radio takes
/// a few hundred milliseconds with the test timings.
const BOUND: Duration = Duration::from_secs(20);

const NAMES: [&str; 3] = ["a", "b", "c"];

/// The index of the node all of `group` name as leader in one term, when exactly one of them
/// leads and it is that one.
async fn agreed_leader(nodes: &[Option<Node>], group: &[usize]) -> Option<usize> {
    let mut agreed = None;
    let mut leaders = 0;
    for &index in group {
        let status = handle(nodes, index).election_status().await.ok()?;
        if status.role == Role::Leader {
            leaders += 1;
        }
        let claim = (status.leader?, status.term);
        if agreed.is_some_and(|seen| seen != claim) {
            return None;
        }
        agreed = Some(claim);
    }
    let (leader, _) = agreed?;
    let index = NAMES.iter().position(|name| *name == leader.as_str())?;
    (leaders == 1 && group.contains(&index)).then_some(index)
}

async fn await_leader(nodes: &[Option<Node>], group: &[usize]) -> usize {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        if let Some(leader) = agreed_leader(nodes, group).await {
            return leader;
        }
        if tokio::time::Instant::now() >= deadline {
            let mut summary = Vec::new();
            for &index in group {
                if let Ok(status) = handle(nodes, index).status().await {
                    summary.push(format!(
                        "{}: {} term {} leader {:?} dongle {:?}",
                        NAMES[index],
                        status.election.role,
                        status.election.term,
                        status.election.leader,
                        status.dongle.map(|dongle| dongle.status.connected)
                    ));
                }
            }
            panic!("no agreed leader within {BOUND:?}: {}", summary.join("; "));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn handle(nodes: &[Option<Node>], index: usize) -> &NodeHandle {
    nodes[index].as_ref().map(Node::handle).expect("running")
}

#[actix_rt::test]
async fn three_gateways_on_firmware_survive_the_leaders_dongle_killed() {
    if skip_without_python("three_gateways_on_firmware_survive_the_leaders_dongle_killed") {
        return;
    }
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let options = ClusterOptions::real_time(Quorum::Voters);
    let mut firmware = Vec::new();
    let mut nodes = Vec::new();
    for (index, name) in NAMES.iter().enumerate() {
        let dongle = Firmware::start(
            &air,
            &format!("02:00:00:00:01:{:02x}", index + 1),
            &dir.path().join(format!("tty-{name}")),
            &[],
        );
        let mut config = node_config(name, &NAMES, &options, &dir.path().join(name));
        config.espnow = Some(EspNowLinkConfig {
            port: DonglePort::Device(dongle.link.clone()),
            baud: 921_600,
            channel: 6,
            pmk: None,
            lmk: None,
            peer_lmks: Default::default(),
        });
        firmware.push(dongle);
        nodes.push(Some(
            NodeBuilder::new(config)
                .start()
                .await
                .expect("a radio node starts"),
        ));
    }

    let all = [0, 1, 2];
    let old = await_leader(&nodes, &all).await;
    for index in all {
        let dongle = handle(&nodes, index).dongle().await.unwrap().unwrap();
        let info = dongle.status.info.expect("connected: INFO known");
        assert!(
            info.firmware.starts_with("conclave-dongle-py"),
            "node {index} runs on the reference firmware: {}",
            info.firmware
        );
        assert_eq!(info.channel, 6);
    }

    firmware[old].kill9();
    let others: Vec<usize> = all.into_iter().filter(|&index| index != old).collect();
    let new = await_leader(&nodes, &others).await;
    assert_ne!(new, old, "the survivors elected one of their own");
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let dongle = handle(&nodes, old).dongle().await.unwrap().unwrap();
        if !dongle.status.connected {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {old} never noticed its dongle was gone"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    for node in nodes.iter_mut() {
        if let Some(node) = node.take() {
            node.stop().await;
        }
    }
}
