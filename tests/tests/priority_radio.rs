//! Priority mode over ESP-NOW (PRI-1, issue 9 item 4): the transport hands each peer's
//! smoothed radio signal strength to the election, whose score carries it as the signal
//! component. Two gateways on virtual dongles over pseudo-terminals, sharing one simulated
//! air whose signal strength between them the test sets; real time. Three pods replace a
//! master whose dongle is unplugged, and keep one master when it comes back.

use std::time::Duration;

use conclave_config::{HealthConfig, HealthSource, NodeConfig, Quorum};
use conclave_core::election::{ElectionConfig, ModeStatus};
use conclave_core::priority::PriorityConfig;
use conclave_tests::{RadioCluster, test_log};

const BOUND: Duration = Duration::from_secs(15);

/// Priority mode with seed 002's settings, as `[election.priority]` has them by default,
/// starting from the battery of the node's `[health]`.
fn priority_mode(config: &mut NodeConfig) {
    config.election = ElectionConfig::Priority(PriorityConfig {
        battery_percent: config.health.battery_percent,
        ..PriorityConfig::new(config.node_id)
    });
}

/// Node `index`'s signal component, as its status shows it.
async fn signal(cluster: &RadioCluster, index: usize) -> u8 {
    let status = cluster
        .handle(index)
        .election_status()
        .await
        .expect("the node answers");
    let ModeStatus::Priority(priority) = status.detail else {
        panic!("node {index} is not in priority mode: {:?}", status.detail);
    };
    priority.signal
}

/// Waits until node `index`'s signal component is within `range`.
async fn await_signal(cluster: &RadioCluster, index: usize, range: std::ops::RangeInclusive<u8>) {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let now = signal(cluster, index).await;
        if range.contains(&now) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {index}'s signal stayed {now}, not in {range:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// PRI-1: a priority node's status shows the signal component of the RSSI its dongle reports
/// for its peer (-40 dBm is 215 as the score counts it, the air adding up to 2 dB of jitter),
/// and follows it when the signal weakens (-80 dBm: 175). Without the transport's hand-over
/// the component stays 0.
#[actix_rt::test]
async fn pri1_status_shows_the_signal_of_frames_heard_over_the_radio() {
    let _log = test_log();
    let cluster = RadioCluster::start_with(&["a", "b"], Quorum::Voters, 11, |config| {
        priority_mode(config);
    })
    .await;
    cluster.air.set_rssi(cluster.mac(0), cluster.mac(1), -40);
    // Both nodes count: the hand-over works whichever way frames go.
    for index in [0, 1] {
        await_signal(&cluster, index, 210..=220).await;
    }
    cluster.await_leader_among(&[0, 1], BOUND).await;

    cluster.air.set_rssi(cluster.mac(0), cluster.mac(1), -80);
    for index in [0, 1] {
        await_signal(&cluster, index, 170..=180).await;
    }
    cluster.stop().await;
}

/// PRI-1, PRI-5, issue 9 item 6: each node's battery comes from its `[health]` file; the node
/// with the fuller battery becomes master, and when its file drops to the low-battery level it
/// resigns to the other, which its status and the metric show.
#[actix_rt::test]
async fn pri5_battery_from_a_health_file_drives_the_master() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| dir.path().join(format!("{name}.battery"));
    std::fs::write(file("a"), "battery=90\n").unwrap();
    std::fs::write(file("b"), "80\n").unwrap();
    let cluster = RadioCluster::start_with(&["a", "b"], Quorum::Voters, 12, |config| {
        config.health = HealthConfig {
            source: HealthSource::File(file(config.node_id.as_str())),
            battery_percent: 50,
            interval: Duration::from_millis(100),
            timeout: Duration::from_millis(100),
        };
        priority_mode(config);
    })
    .await;
    assert_eq!(cluster.await_leader_among(&[0, 1], BOUND).await, 0);
    let status = cluster.handle(0).election_status().await.unwrap();
    let ModeStatus::Priority(priority) = status.detail else {
        panic!("priority mode expected");
    };
    assert_eq!(priority.battery, 90);

    std::fs::write(file("a"), "battery=10\n").unwrap();
    let deadline = tokio::time::Instant::now() + BOUND;
    while cluster.agreed_leader_among(&[0, 1]).await != Some(1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "node a did not resign to b on a low battery"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = cluster.handle(0).metrics();
    assert_eq!(metrics.value("conclave_battery_percent", &[]), Some(10.0));
    assert!(
        metrics
            .value("conclave_health_readings_total", &[("result", "ok")])
            .unwrap_or(0.0)
            >= 2.0
    );
    cluster.stop().await;
}

/// PRI-3, PRI-6, issue 9 item 9 (seed 002's "sudden power loss" and "partition heal"): three
/// pods in priority mode over their dongles elect one master; its dongle is unplugged (the
/// pty closed) and the two others elect a new master in a later round; the dongle comes back
/// and, whatever the lone node made of itself meanwhile, the three end with one master in a
/// round above the first.
#[actix_rt::test]
async fn pri3_pods_replace_a_master_whose_dongle_is_unplugged() {
    let _log = test_log();
    let mut cluster = RadioCluster::start_with(&["a", "b", "c"], Quorum::Voters, 13, |config| {
        priority_mode(config);
    })
    .await;
    let all = [0, 1, 2];
    let old = cluster.await_leader_among(&all, BOUND).await;
    let first = cluster.handle(old).election_status().await.unwrap().term;

    cluster.ports[old].unplug().await.unwrap();
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != old).collect();
    let new = cluster.await_leader_among(&others, BOUND).await;
    assert_ne!(new, old);
    let status = cluster.handle(new).election_status().await.unwrap();
    assert!(status.term > first, "{status:?} after round {first}");

    cluster.ports[old].replug().unwrap();
    let deadline = tokio::time::Instant::now() + BOUND;
    let healed = loop {
        if let Some(master) = cluster.agreed_leader_among(&all).await {
            break master;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no single master after the dongle came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let status = cluster.handle(healed).election_status().await.unwrap();
    assert!(status.term > first);
    cluster.stop().await;
}
