//! A node on the UDP link, against sockets the test holds (TR-1, TR-2): a configured peer
//! address that never answers is reported, with how long, until a frame comes from it; a
//! configured peer's datagrams reach the node through the socket of its own that the
//! transport gives it, while a stranger's go through the shared one, and both are admitted by
//! the same rules.

use std::net::SocketAddr;
use std::time::Duration;

use conclave_actors::node::{Node, NodeBuilder};
use conclave_config::{Quorum, UdpLinkConfig};
use conclave_core::LinkAddr;
use conclave_protocol::{Body, ClusterId, Envelope, FrameCodec, Hello, PeerId};
use conclave_tests::{CLUSTER, ClusterOptions, node_config, test_log};
use tokio::net::UdpSocket;

const BOUND: Duration = Duration::from_secs(30);

/// A node `a` listening on an ephemeral loopback port, with `peers` configured.
async fn node_with_peers(dir: &std::path::Path, peers: Vec<SocketAddr>) -> Node {
    let options = ClusterOptions::real_time(Quorum::Voters);
    let mut config = node_config("a", &["a"], &options, dir);
    config.udp = Some(UdpLinkConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        peers,
    });
    NodeBuilder::new(config)
        .rng_seed(1)
        .start()
        .await
        .expect("test node starts")
}

/// A frame from `from`, as a peer without a key would send it.
fn hello(from: &str, seq: u64) -> Vec<u8> {
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).expect("test cluster id"), None);
    let envelope = Envelope::new(
        codec.cluster(),
        PeerId::new(from).expect("test peer id"),
        1_700_000_000,
        seq,
        None,
        Body::Hello(Hello {}),
    );
    codec.encode(&envelope, 1452).expect("a hello fits")
}

/// The address the node's first frame to `socket` came from: its UDP port.
async fn node_address(socket: &UdpSocket) -> SocketAddr {
    let mut buffer = [0u8; 2048];
    let (_, from) = tokio::time::timeout(BOUND, socket.recv_from(&mut buffer))
        .await
        .expect("the node announces itself to its configured peers")
        .expect("loopback receive");
    from
}

/// Issue 15: a configured peer address that never answers (a wrong port) is listed with how
/// long it has been silent; once a frame comes from one, it no longer is.
#[actix_rt::test]
async fn tr1_configured_addresses_that_never_answered_are_reported() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let answering = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let answering_addr = answering.local_addr().unwrap();
    let node = node_with_peers(dir.path(), vec![silent_addr, answering_addr]).await;
    let handle = node.handle().clone();

    let unanswered = handle.unanswered().await.unwrap();
    let listed: Vec<&LinkAddr> = unanswered.iter().map(|(addr, _)| addr).collect();
    assert_eq!(
        listed,
        vec![
            &LinkAddr::new(format!("udp:{silent_addr}")),
            &LinkAddr::new(format!("udp:{answering_addr}"))
        ]
    );

    let node_addr = node_address(&answering).await;
    answering.send_to(&hello("b", 1), node_addr).await.unwrap();
    let start = tokio::time::Instant::now();
    loop {
        let unanswered = handle.unanswered().await.unwrap();
        if unanswered.len() == 1 {
            assert_eq!(unanswered[0].0, LinkAddr::new(format!("udp:{silent_addr}")));
            break;
        }
        assert!(start.elapsed() < BOUND, "still unanswered: {unanswered:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    node.stop().await;
}

/// TR-2: a configured peer and a stranger both say hello; each is challenged at the address
/// it sent from (the peer's datagram came through its own socket, the stranger's through the
/// shared one), and the node sends from its one port to both.
#[actix_rt::test]
async fn tr2_configured_peer_and_stranger_are_both_heard() {
    let _log = test_log();
    let dir = tempfile::tempdir().unwrap();
    let member = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let node = node_with_peers(dir.path(), vec![member.local_addr().unwrap()]).await;
    let node_addr = node_address(&member).await;
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), None);
    for (socket, id) in [(&member, "b"), (&stranger, "x")] {
        socket.send_to(&hello(id, 1), node_addr).await.unwrap();
        let mut buffer = [0u8; 2048];
        let challenged = tokio::time::timeout(BOUND, async {
            loop {
                let (len, from) = socket.recv_from(&mut buffer).await.unwrap();
                assert_eq!(from, node_addr, "sent from the node's one port");
                let envelope = codec.decode(&buffer[..len]).unwrap();
                if matches!(envelope.body, Body::Challenge(_)) {
                    return envelope.to;
                }
            }
        })
        .await
        .expect("challenged");
        assert_eq!(challenged, Some(PeerId::new(id).unwrap()));
    }
    node.stop().await;
}
