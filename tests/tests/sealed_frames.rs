//! Sealed frames between whole nodes (PROTO-9, SEC-3; issue 26 item 3): a value written through
//! the admin API never travels in clear, neither in a UDP datagram nor on the radio, and a
//! running cluster moves to a new key under writes without a leader change.
//!
//! The UDP capture puts a relay between every pair of nodes: each node's configured peers are
//! relays, each relay forwards between its two nodes and keeps a copy of every datagram, so
//! everything the nodes say to each other passes through a tap. The radio capture is the
//! simulated air's monitor, which hears every frame sent, unicast or not. Each capture runs
//! once without a key as a control: the value must then be found in clear, or the tap would
//! prove nothing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use conclave_actors::node::{Node, NodeBuilder, NodeHandle};
use conclave_config::{AdminConfig, NodeConfig, Quorum, UdpLinkConfig};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::RaftConfig;
use conclave_protocol::{AuthKey, ClusterId, FrameCodec, KeyRing, PeerId, SendKey};
use conclave_tests::api_client::{ApiClient, Body, put_value, serve, stop_server};
use conclave_tests::{
    CLUSTER, ClusterOptions, MemoryCluster, RadioCluster, TEST_PSK, node_config, test_log,
};
use tokio::net::UdpSocket;

const PATIENCE: Duration = Duration::from_secs(20);

/// What is written through the API: distinctive enough never to occur by chance.
const VALUE: &str = "sealed-capture-7f3a9c41-the-distinctive-value";

/// The key the rotation moves to.
const NEXT_PSK: &[u8] = b"conclave-test-next-pre-shared-key";

fn key(secret: &[u8]) -> AuthKey {
    AuthKey::new(secret, 16).expect("the test keys are long enough")
}

fn with_log(config: &mut NodeConfig) {
    if let ElectionConfig::Raft(raft) = &mut config.election {
        raft.log = Some(conclave_core::raft::LogConfig::default());
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The leader every handle names in one term, once they agree.
async fn await_agreed_leader(handles: &[NodeHandle]) -> usize {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut claims = Vec::new();
        for handle in handles {
            if let Ok(status) = handle.election_status().await {
                claims.push(status.leader.map(|leader| (leader, status.term)));
            }
        }
        if let [Some(first), ..] = claims.as_slice() {
            if claims.len() == handles.len() && claims.iter().all(|c| c == &Some(*first)) {
                if let Some(index) = handles.iter().position(|h| h.node_id() == first.0) {
                    return index;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no agreed leader: {claims:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every datagram the relays carried.
type Capture = Arc<Mutex<Vec<Vec<u8>>>>;

/// A relay between nodes `pair`: whatever one sends it goes to the other, and is kept. It
/// learns each node's address from the sender id of its frames (the header is in clear).
async fn relay(pair: [PeerId; 2], codec: FrameCodec, capture: Capture) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = socket.local_addr().expect("bound");
    actix_rt::spawn(async move {
        let mut addresses: HashMap<PeerId, SocketAddr> = HashMap::new();
        let mut buffer = vec![0u8; 2048];
        loop {
            let Ok((len, from)) = socket.recv_from(&mut buffer).await else {
                continue;
            };
            let frame = buffer[..len].to_vec();
            capture
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(frame.clone());
            let Ok(envelope) = codec.decode(&frame) else {
                continue;
            };
            addresses.insert(envelope.from, from);
            let other = if envelope.from == pair[0] {
                pair[1]
            } else {
                pair[0]
            };
            if let Some(to) = addresses.get(&other) {
                let _ = socket.send_to(&frame, to).await;
            }
        }
    });
    addr
}

/// Three nodes with the replicated log on UDP through relays, a value written through the
/// API; every datagram the relays carried.
async fn udp_capture(sealed: bool) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let names = ["a", "b", "c"];
    let ids: Vec<PeerId> = names
        .iter()
        .map(|n| PeerId::new(n).expect("valid ids"))
        .collect();
    let options = ClusterOptions {
        authenticated: sealed,
        ..ClusterOptions::real_time(Quorum::Voters)
    };
    let codec = FrameCodec::new(
        ClusterId::new(CLUSTER).expect("the test cluster id"),
        sealed.then(|| key(TEST_PSK)),
    );
    let capture = Capture::default();
    let mut peers: Vec<Vec<SocketAddr>> = vec![Vec::new(); names.len()];
    for i in 0..names.len() {
        for j in i + 1..names.len() {
            let addr = relay([ids[i], ids[j]], codec.clone(), capture.clone()).await;
            peers[i].push(addr);
            peers[j].push(addr);
        }
    }
    let mut nodes: Vec<Node> = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let mut config = node_config(name, &names, &options, &dir.path().join(name));
        with_log(&mut config);
        config.udp = Some(UdpLinkConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            peers: peers[index].clone(),
        });
        let node = NodeBuilder::new(config)
            .rng_seed(index as u64 + 1)
            .start()
            .await
            .expect("test node starts");
        nodes.push(node);
    }
    let handles: Vec<NodeHandle> = nodes.iter().map(|n| n.handle().clone()).collect();
    let leader = await_agreed_leader(&handles).await;
    put_value(&handles[leader], "secret", VALUE).await;
    for node in nodes {
        node.stop().await;
    }
    let captured = capture
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(!captured.is_empty());
    captured
}

/// Issue 26 item 3, PROTO-9: with a key, a value written through the API appears in no UDP
/// datagram between the nodes, although the datagrams carried it (they open to it); without
/// a key (the control), the same capture finds it in clear.
#[actix_rt::test]
async fn proto9_a_written_value_never_travels_in_clear_over_udp() {
    let _log = test_log();
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), Some(key(TEST_PSK)));
    let plain = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), None);
    let sealed = udp_capture(true).await;
    let in_clear = sealed
        .iter()
        .filter(|d| contains(d, VALUE.as_bytes()))
        .count();
    assert_eq!(in_clear, 0, "of {} datagrams", sealed.len());
    let carried = sealed.iter().any(|datagram| {
        codec.decode(datagram).is_ok_and(|envelope| {
            plain
                .encode(&envelope, usize::MAX)
                .is_ok_and(|bytes| contains(&bytes, VALUE.as_bytes()))
        })
    });
    assert!(carried, "no captured datagram carried the value");

    let control = udp_capture(false).await;
    assert!(
        control.iter().any(|d| contains(d, VALUE.as_bytes())),
        "the control run without a key should show the value in clear"
    );
}

/// The frames a radio in monitor mode heard while three nodes over virtual dongles took a
/// write through the API.
async fn radio_capture(sealed: bool, seed: u64) -> Vec<Vec<u8>> {
    let cluster = RadioCluster::start_with(&["a", "b", "c"], Quorum::Voters, seed, |config| {
        with_log(config);
        config.auth_key = sealed.then(|| key(TEST_PSK));
    })
    .await;
    let monitor = cluster.air.monitor();
    let leader = cluster.await_leader_among(&[0, 1, 2], PATIENCE).await;
    put_value(cluster.handle(leader), "secret", VALUE).await;
    cluster.stop().await;
    assert_eq!(monitor.missed(), 0);
    monitor
        .frames()
        .into_iter()
        .map(|frame| frame.payload)
        .collect()
}

/// Issue 26 item 3, PROTO-9: with a key, a value written through the API appears in no frame
/// on the virtual radio, unicast or broadcast; without a key (the control), it does.
#[actix_rt::test]
async fn proto9_a_written_value_never_travels_in_clear_on_the_radio() {
    let _log = test_log();
    let sealed = radio_capture(true, 26).await;
    let in_clear = sealed
        .iter()
        .filter(|f| contains(f, VALUE.as_bytes()))
        .count();
    assert_eq!(in_clear, 0, "of {} radio frames", sealed.len());
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), Some(key(TEST_PSK)));
    assert!(sealed.iter().any(|frame| codec.decode(frame).is_ok()));

    let control = radio_capture(false, 27).await;
    assert!(
        control.iter().any(|f| contains(f, VALUE.as_bytes())),
        "the control run without a key should show the value in clear"
    );
}

/// Term and leader as every node of `cluster` reports them.
async fn terms_and_leaders(cluster: &MemoryCluster) -> Vec<(u64, Option<PeerId>)> {
    let mut out = Vec::new();
    for index in cluster.running() {
        let status = cluster
            .handle(index)
            .election_status()
            .await
            .expect("a running node answers");
        out.push((status.term, status.leader));
    }
    out
}

fn dropped(cluster: &MemoryCluster, reason: &str) -> f64 {
    cluster
        .running()
        .iter()
        .map(|&index| {
            cluster
                .handle(index)
                .metrics()
                .value("conclave_frames_dropped_total", &[("reason", reason)])
                .unwrap_or(0.0)
        })
        .sum()
}

/// Three sealed nodes with the replicated log over the memory link, a leader elected.
async fn sealed_cluster() -> (MemoryCluster, usize) {
    // Real time, so timings loose enough that a loaded machine (the suite runs tests side by
    // side on two cores) does not move the leader: the rotation test's "no leader change" is
    // about keys, and with the scaled-down timings of the other tests (an election timeout of
    // 150 ms) a busy minute could make a leader miss a quorum.
    let template = PeerId::from_static("template");
    let raft = RaftConfig::new(template, [template])
        .with_heartbeat(Duration::from_millis(100))
        .with_election_timeout(Duration::from_millis(1000), Duration::from_millis(2000));
    let options = ClusterOptions {
        authenticated: true,
        election: Some(ElectionConfig::Raft(raft)),
        ..ClusterOptions::real_time(Quorum::Voters)
    };
    let cluster = MemoryCluster::start_with(&["a", "b", "c"], options, with_log).await;
    let leader = cluster.await_leader(PATIENCE).await;
    (cluster, leader)
}

/// Issue 26 item 3, PROTO-9: the documented rotation — every node learns the next key, then
/// every node sends under it, then every node drops the old one — moves a cluster to a new
/// key while writes keep committing, with no leader change and no frame that failed to open.
#[actix_rt::test]
async fn proto9_key_rotation_under_writes_keeps_the_leader() {
    let _log = test_log();
    let (cluster, leader) = sealed_cluster().await;
    let before = terms_and_leaders(&cluster).await;
    // One admin server for the 27 writes rather than one each: the rotation is what is
    // under test, not starting and stopping HTTP servers.
    let (api, server) = serve(cluster.handle(leader), AdminConfig::default());
    let client = ApiClient::new(api);
    let (current, next) = (key(TEST_PSK), key(NEXT_PSK));
    let steps = [
        KeyRing::new(current.clone(), Some(next.clone()), SendKey::Current),
        KeyRing::new(current.clone(), Some(next.clone()), SendKey::Next),
        KeyRing::single(next.clone()),
    ];
    let mut written = 0;
    for (step, ring) in steps.iter().enumerate() {
        // One node at a time, with writes in between: every mixed state a rolling reload
        // passes through is exercised.
        for index in cluster.running() {
            cluster
                .handle(index)
                .replace_keys(ring.clone())
                .await
                .expect("a sealed node takes new keys");
            for _ in 0..3 {
                written += 1;
                let reply = client
                    .call(
                        "PUT",
                        &format!("/v1/kv/k{written}"),
                        Body::Json(serde_json::json!({ "value": format!("step {step}") })),
                    )
                    .await;
                assert_eq!(reply.status, 200, "{}", reply.body);
            }
        }
    }
    stop_server(&server).await;
    assert_eq!(written, 27);
    assert_eq!(
        terms_and_leaders(&cluster).await,
        before,
        "no leader change"
    );
    assert_eq!(dropped(&cluster, "bad_tag"), 0.0, "every frame opened");

    // The old key is gone: a node still on it alone is no longer understood, and its frames
    // count as frames that do not open.
    cluster
        .handle(leader)
        .replace_keys(KeyRing::single(current))
        .await
        .unwrap();
    assert!(
        cluster
            .wait_for(PATIENCE, || async { dropped(&cluster, "bad_tag") > 0.0 })
            .await
    );
    cluster.stop().await;
}

/// The control of the rotation test: switching one node to send under a key the others do not
/// have yet (skipping the first step) makes its frames fail to open, which the rotation test
/// proves does not happen in the documented order.
#[actix_rt::test]
async fn proto9_sending_under_a_key_others_lack_is_refused() {
    let _log = test_log();
    let (cluster, leader) = sealed_cluster().await;
    cluster
        .handle(leader)
        .replace_keys(KeyRing::new(
            key(TEST_PSK),
            Some(key(NEXT_PSK)),
            SendKey::Next,
        ))
        .await
        .unwrap();
    assert!(
        cluster
            .wait_for(PATIENCE, || async { dropped(&cluster, "bad_tag") > 0.0 })
            .await
    );
    cluster.stop().await;
}

/// A node without a key cannot be given one by a reload: sealing is switched on by a restart.
#[actix_rt::test]
async fn proto9_a_node_without_a_key_refuses_keys() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    let refused = cluster
        .handle(0)
        .replace_keys(KeyRing::single(key(NEXT_PSK)))
        .await;
    assert!(refused.is_err());
    cluster.stop().await;
}

/// Issue 26 item 3, PROTO-9: a frame of protocol version 2 (HMAC-tagged, in clear) reaching a
/// node of version 3 is refused and counted as `version`, not taken for a forgery.
#[actix_rt::test]
async fn proto9_a_version_2_frame_is_refused_as_another_version() {
    let _log = test_log();
    let options = ClusterOptions {
        authenticated: true,
        ..ClusterOptions::real_time(Quorum::Voters)
    };
    let cluster = MemoryCluster::start(&["solo"], options).await;
    let unsealed = FrameCodec::new(ClusterId::new(CLUSTER).expect("the test cluster id"), None);
    let envelope = conclave_protocol::Envelope::new(
        unsealed.cluster(),
        PeerId::from_static("old"),
        1_764_000_000,
        1,
        None,
        conclave_protocol::Hello {},
    );
    let mut frame = unsealed.encode(&envelope, 1452).expect("a hello fits");
    // What a node of version 2 sends: the same envelope, version 2, a 16-byte HMAC tag.
    frame[1] = 2;
    frame.extend_from_slice(&[0xa5; 16]);
    // The node's slot is there once its transport runs.
    let hub = &cluster.hub;
    assert!(
        cluster
            .wait_for(PATIENCE, || {
                let frame = frame.clone();
                async move { hub.inject(7, 0, frame) }
            })
            .await
    );
    assert!(
        cluster
            .wait_for(PATIENCE, || async { dropped(&cluster, "version") > 0.0 })
            .await
    );
    assert_eq!(dropped(&cluster, "bad_tag"), 0.0);
    cluster.stop().await;
}
