//! What a frame may do to a node, with whole nodes over the memory link (PROTO-5, MEM-3, TR-2):
//! frames captured before a node restarted are refused after it, by a restarted receiver that
//! trusts nobody until they answered its challenge; and a follower flooded with replays,
//! forgeries and garbage through the same path as its leader's heartbeats keeps its leader,
//! with every dropped frame counted by reason; and a leader flooded with one captured `Hello`
//! refuses it once and counts every other copy as a replay: no reply, no log line per frame.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use conclave_actors::memory::{MemoryFrame, MemoryHub};
use conclave_actors::node::{Node, NodeBuilder};
use conclave_config::Quorum;
use conclave_core::LinkAddr;
use conclave_core::admission::{CHALLENGES_PER_ORIGIN, DEFAULT_CHALLENGE_INTERVAL};
use conclave_core::election::{ElectionConfig, Role};
use conclave_protocol::{
    AuthKey, Body, ChallengeAck, ClusterId, Envelope, FrameCodec, Hello, PeerId, RequestVote,
};
use conclave_tests::{CLUSTER, ClusterOptions, MemoryCluster, node_config, test_log};

const SETTLE: Duration = Duration::from_secs(10);
/// The slot an attacker sends from; no node is attached there.
const ATTACKER: u32 = 9;
/// Frames in one burst of the flood.
const BURST: usize = 50_000;

/// Plays `frames` back into `to` as if they came from `from`, in batches that leave room in the
/// slot's queue, so that every frame reaches the node rather than the hub's drop counter.
async fn replay(hub: &MemoryHub, from: u32, to: u32, frames: &[Bytes]) {
    // A node that has just started attaches to its slot when its transport first runs.
    while !hub.slots().contains(&to) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for batch in frames.chunks(64) {
        while hub.queued(to) > 128 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for frame in batch {
            assert!(hub.inject(from, to, frame.clone()), "room in the queue");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn drops(cluster: &MemoryCluster, index: usize, reason: &str) -> f64 {
    cluster
        .handle(index)
        .metrics()
        .value("conclave_frames_dropped_total", &[("reason", reason)])
        .unwrap_or(0.0)
}

/// PROTO-5: every frame a node sent before another node restarted — votes, heartbeats, pings,
/// hellos, answers — is refused by the restarted node, whether it is played back from another
/// address or from the sender's own, before the restarted node has verified anyone and after:
/// the sender never appears in its peer table or its routes. The cluster itself re-forms after
/// the restart, and the live peer is known at its own address only.
#[actix_rt::test]
async fn proto5_frames_captured_before_a_restart_are_refused_after_it() {
    let _log = test_log();
    tokio::time::pause();
    let mut options = ClusterOptions::paused_clock(Quorum::Voters);
    options.authenticated = true;
    let mut cluster = MemoryCluster::start(&["a", "b", "c"], options).await;
    cluster.await_leader(SETTLE).await;
    cluster.hub.capture(1);
    cluster.hub.capture(2);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let of = |captured: Vec<(u32, Bytes)>| -> Vec<Bytes> {
        captured.into_iter().map(|(_, bytes)| bytes).collect()
    };
    let from_b = of(cluster.hub.captured(1));
    let from_c = of(cluster.hub.captured(2));
    assert!(from_c.len() > 50, "{} frames of c captured", from_c.len());

    // c is gone for good; a restarts and is played everything back at once.
    cluster.kill(2).await;
    cluster.restart(0).await;
    for (from, frames) in [(ATTACKER, &from_c), (2, &from_c), (ATTACKER, &from_b)] {
        replay(&cluster.hub, from, 0, frames).await;
    }
    assert!(drops(&cluster, 0, "unverified") > 0.0);

    let leader = cluster.await_leader(SETTLE).await;
    // Once a has verified b, the same frames again, from everywhere.
    for (from, frames) in [
        (ATTACKER, &from_c),
        (2, &from_c),
        (ATTACKER, &from_b),
        (1, &from_b),
    ] {
        replay(&cluster.hub, from, 0, frames).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let c = cluster.id(2);
    let peers = cluster.handle(0).peers().await.unwrap();
    assert!(
        peers.iter().all(|peer| peer.id != c),
        "a frame of c was accepted: {peers:?}"
    );
    let b = peers
        .iter()
        .find(|peer| peer.id == cluster.id(1))
        .expect("b is a member again");
    assert_eq!(b.addr, LinkAddr::new("mem:1"));
    let routes = cluster.handle(0).routes().await.unwrap();
    assert_eq!(routes, vec![(cluster.id(1), LinkAddr::new("mem:1"))]);
    for reason in ["unverified", "replay", "duplicate_id"] {
        assert!(drops(&cluster, 0, reason) > 0.0, "{reason}");
    }
    assert_eq!(cluster.agreed_leader().await, Some(leader));
    cluster.stop().await;
}

/// Three authenticated nodes on `hub` with election timeouts of 300–600 ms: room for a loaded
/// test machine, still far below what a burst of the flood costs a node that queues it all.
async fn flood_cluster(hub: &MemoryHub, dir: &std::path::Path) -> Vec<Node> {
    let names = ["a", "b", "c"];
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.authenticated = true;
    let mut nodes = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let mut config = node_config(name, &names, &options, &dir.join(name));
        let ElectionConfig::Raft(raft) = &mut config.election else {
            panic!("raft mode expected");
        };
        raft.election_timeout_min = Duration::from_millis(300);
        raft.election_timeout_max = Duration::from_millis(600);
        let node = NodeBuilder::new(config)
            .memory_link(hub.clone(), u32::try_from(index).expect("three slots"))
            .rng_seed(index as u64 + 1)
            .start()
            .await
            .expect("test node starts");
        nodes.push(node);
    }
    nodes
}

/// The leader all `nodes` name in one term, once they agree.
async fn agreed_leader(nodes: &[Node]) -> Option<usize> {
    let mut claims = Vec::new();
    for node in nodes {
        let status = node.handle().election_status().await.ok()?;
        claims.push((status.leader?, status.term, status.role));
    }
    let (leader, term, _) = claims[0];
    let agreed = claims.iter().all(|(l, t, _)| (*l, *t) == (leader, term));
    let leaders = claims
        .iter()
        .filter(|(_, _, role)| *role == Role::Leader)
        .count();
    (agreed && leaders == 1).then(|| nodes.iter().position(|n| n.handle().node_id() == leader))?
}

/// TR-2, PROTO-5: a follower flooded with garbage, forged frames and played-back frames of its
/// leader and of the other follower — from the attacker's address and from theirs, through the
/// same link as the leader's heartbeats, in bursts far larger than its link queue — keeps its
/// leader and term throughout: at most one queue's worth of frames ever waits in front of a
/// heartbeat. Every kind of dropped frame is counted under its own reason, and the link
/// queue's overflow too.
#[actix_rt::test]
async fn tr2_flooded_follower_keeps_its_leader() {
    let _log = test_log();
    let hub = MemoryHub::new();
    let dir = tempfile::tempdir().unwrap();
    let nodes = flood_cluster(&hub, dir.path()).await;
    let start = tokio::time::Instant::now();
    let leader = loop {
        if let Some(leader) = agreed_leader(&nodes).await {
            break leader;
        }
        assert!(start.elapsed() < SETTLE, "no leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let slot = |index: usize| u32::try_from(index).unwrap();
    let handle = |index: usize| nodes[index].handle().clone();
    let term = handle(follower).election_status().await.unwrap().term;
    hub.capture(slot(leader));
    hub.capture(slot(other));
    tokio::time::sleep(Duration::from_secs(1)).await;

    // (bytes, the slot they are injected from)
    let mut flood: Vec<(Bytes, u32)> = Vec::new();
    for source in [leader, other] {
        for (_, bytes) in hub.captured(slot(source)) {
            flood.push((bytes.clone(), slot(source)));
            flood.push((bytes, ATTACKER));
        }
    }
    let cluster_id = ClusterId::new(CLUSTER).unwrap();
    let forger = FrameCodec::new(
        cluster_id,
        Some(AuthKey::new(b"a guess at the cluster key", 16).unwrap()),
    );
    let other_id = handle(other).node_id();
    let coup = Envelope::new(
        cluster_id,
        other_id,
        u64::MAX / 2,
        1,
        None,
        RequestVote {
            term: term + 100,
            candidate: other_id,
            last_log_index: 1_000,
            last_log_term: term + 99,
            pre_vote: false,
            leadership_transfer: true,
            priority: None,
        },
    );
    flood.push((Bytes::from(forger.encode(&coup, 1452).unwrap()), ATTACKER));
    flood.push((Bytes::from_static(b"\x97\x02 garbage"), ATTACKER));
    assert!(flood.len() > 50);

    let target = slot(follower);
    let leader_id = handle(leader).node_id();
    let start = tokio::time::Instant::now();
    let mut injected = 0u64;
    let mut cursor = 0;
    while start.elapsed() < Duration::from_secs(3) {
        // A burst far larger than the follower's link queue, then a pause: what a flooded
        // socket sees, and the shape that stretches the gap between two heartbeats when the
        // frames of the burst wait in front of them.
        for _ in 0..BURST {
            let (bytes, from) = &flood[cursor % flood.len()];
            cursor += 1;
            if hub.inject(*from, target, bytes.clone()) {
                injected += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = handle(follower).election_status().await.unwrap();
        assert_eq!(
            (status.role, status.leader, status.term),
            (Role::Follower, Some(leader_id), term),
            "the follower lost its leader after {:?} of the flood ({injected} frames queued)",
            start.elapsed()
        );
    }
    assert!(
        hub.dropped(target) > 0,
        "the link queue overflowed and counted it"
    );
    let metrics = handle(follower).metrics().clone();
    for reason in ["malformed", "bad_tag", "replay", "duplicate_id"] {
        let dropped = metrics.value("conclave_frames_dropped_total", &[("reason", reason)]);
        assert!(dropped.unwrap_or(0.0) > 0.0, "{reason}");
    }
    assert_eq!(agreed_leader(&nodes).await, Some(leader));
    for node in nodes {
        node.stop().await;
    }
}

/// PROTO-5, secure by default, on a cluster without a key (as with `cluster.insecure`):
/// 2,000 made-up ids say hello from one address. That address is challenged a few times per
/// interval, not once per id. Those that never answer the challenge sent to their address
/// never enter the peer table; of those that do answer, at most 64 besides the configured
/// voters are admitted and the rest are refused as `peer_limit`. A frame with a real member's
/// id and an incarnation of 2^64 − 1, even from that member's own address, is refused as
/// `incarnation_ahead` and cuts nobody off. The cluster keeps its leader throughout.
#[actix_rt::test]
async fn proto5_strangers_without_a_key_are_bounded() {
    let _log = test_log();
    tokio::time::pause();
    let cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let term = cluster.handle(0).election_status().await.unwrap().term;
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), None);
    let target = cluster.id(0);
    let stranger = |n: usize| PeerId::new(&format!("x{n}")).unwrap();
    let frame = |from: PeerId, seq: u64, body: Body| -> Bytes {
        let envelope = Envelope::new(
            codec.cluster(),
            from,
            1_700_000_000,
            seq,
            Some(target),
            body,
        );
        Bytes::from(codec.encode(&envelope, 1452).unwrap())
    };
    let mut attacker = cluster.hub.attach(ATTACKER);

    // Silent strangers: their challenges go unanswered.
    let silent: Vec<Bytes> = (0..1_000)
        .map(|n| frame(stranger(n), 1, Hello {}.into()))
        .collect();
    replay(&cluster.hub, ATTACKER, 0, &silent).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(cluster.handle(0).peers().await.unwrap().len(), 2);
    // One address claiming a thousand ids is not challenged a thousand times: at most a few
    // times per challenge interval, the flood taking less than two intervals here.
    let mut challenges = 0;
    while let Ok(MemoryFrame { bytes, .. }) = attacker.try_recv() {
        if codec
            .decode(&bytes)
            .is_ok_and(|envelope| matches!(envelope.body, Body::Challenge(_)))
        {
            challenges += 1;
        }
    }
    assert!(
        (1..=2 * CHALLENGES_PER_ORIGIN).contains(&challenges),
        "{challenges} challenges to one address"
    );

    // Strangers that answer: hello, answer the challenge, hello again; as many at a time as
    // one address is challenged per interval.
    let per_interval = CHALLENGES_PER_ORIGIN as usize;
    for batch in (1_000..2_000).collect::<Vec<_>>().chunks(per_interval) {
        let hellos: Vec<Bytes> = batch
            .iter()
            .map(|&n| frame(stranger(n), 1, Hello {}.into()))
            .collect();
        replay(&cluster.hub, ATTACKER, 0, &hellos).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut answers = Vec::new();
        while let Ok(MemoryFrame { bytes, .. }) = attacker.try_recv() {
            let Ok(envelope) = codec.decode(&bytes) else {
                continue;
            };
            if let (Body::Challenge(challenge), Some(to)) = (envelope.body, envelope.to) {
                answers.push(frame(
                    to,
                    2,
                    ChallengeAck {
                        nonce: challenge.nonce,
                    }
                    .into(),
                ));
                answers.push(frame(to, 3, Hello {}.into()));
            }
        }
        replay(&cluster.hub, ATTACKER, 0, &answers).await;
        tokio::time::sleep(DEFAULT_CHALLENGE_INTERVAL).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let peers = cluster.handle(0).peers().await.unwrap();
    assert_eq!(
        peers.len(),
        2 + conclave_core::admission::DEFAULT_MAX_PEERS,
        "the voters and as many strangers as the bound allows"
    );
    assert!(drops(&cluster, 0, "peer_limit") >= 900.0);
    assert!(drops(&cluster, 0, "unverified") >= 1_000.0);

    // One frame of b from the future, from b's own address.
    let b = cluster.id(1);
    let future = Envelope::new(codec.cluster(), b, u64::MAX, 1, None, Hello {});
    assert!(
        cluster
            .hub
            .inject(1, 0, codec.encode(&future, 1452).unwrap())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(drops(&cluster, 0, "incarnation_ahead"), 1.0);
    let status = cluster.handle(0).status().await.unwrap();
    let b_entry = status.peers.iter().find(|peer| peer.id == b).unwrap();
    assert_eq!(b_entry.status, conclave_core::PeerStatus::Connected);
    assert_eq!(cluster.agreed_leader().await, Some(leader));
    assert_eq!(status.election.term, term);
    cluster.hub.detach(ATTACKER);
    cluster.stop().await;
}

/// What a test's nodes log, kept to be read back: a log line per dropped frame is what the
/// replay flood of issue 15 bought, so the test counts lines.
#[derive(Clone, Default)]
struct LogLines(Arc<Mutex<Vec<u8>>>);

impl LogLines {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        let lines = self.clone();
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
                .with_ansi(false)
                .with_writer(move || lines.clone())
                .finish(),
        )
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// TR-2, PROTO-5, MEM-3: one `Hello` of a follower, captured and played back to the leader
/// from another address 20,000 times: the first copy is refused (MEM-3, once), every other is
/// dropped as a replay before membership sees it, counted in
/// `conclave_frames_dropped_total{reason="replay"}` (or as `queue_full` when it found the link
/// queue full), neither answered nor logged on its own — a summary line says how many were
/// dropped — and the leader keeps its term and its followers.
#[actix_rt::test]
async fn tr2_replayed_hello_flood_is_dropped_as_a_replay_before_membership() {
    let log = LogLines::default();
    let _log = log.install();
    tokio::time::pause();
    let cluster = MemoryCluster::start(
        &["a", "b", "c"],
        ClusterOptions::paused_clock(Quorum::Voters),
    )
    .await;
    let leader = cluster.await_leader(SETTLE).await;
    let term = cluster.handle(leader).election_status().await.unwrap().term;
    let follower = (leader + 1) % 3;
    let slot = |index: usize| u32::try_from(index).unwrap();
    let codec = FrameCodec::new(ClusterId::new(CLUSTER).unwrap(), None);

    // A follower announces itself every few seconds while connected; wait for one.
    cluster.hub.capture(slot(follower));
    let mut hello = None;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        hello = cluster
            .hub
            .captured(slot(follower))
            .into_iter()
            .map(|(_, bytes)| bytes)
            .find(|bytes| {
                codec
                    .decode(bytes)
                    .is_ok_and(|envelope| matches!(envelope.body, Body::Hello(_)))
            });
        if hello.is_some() {
            break;
        }
    }
    let hello = hello.expect("the follower announced itself");
    // The leader heard that Hello from the follower itself before the flood starts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = drops(&cluster, leader, "replay") + drops(&cluster, leader, "queue_full");

    let mut attacker = cluster.hub.attach(ATTACKER);
    let copies = 20_000;
    let flood = vec![hello; copies];
    replay(&cluster.hub, ATTACKER, slot(leader), &flood).await;
    // Long enough for the transport's summary of the drops to be logged.
    tokio::time::sleep(Duration::from_secs(12)).await;

    let after = drops(&cluster, leader, "replay") + drops(&cluster, leader, "queue_full");
    assert_eq!(
        after - before,
        (copies - 1) as f64,
        "every copy but the first counted as a replay (or as queue_full)"
    );
    assert!(drops(&cluster, leader, "replay") >= (copies / 2) as f64);
    // The memory link's broadcasts reach every slot; what matters is that nothing is
    // addressed to the id the flood claims.
    let claimed = cluster.id(follower);
    let mut answers = Vec::new();
    while let Ok(MemoryFrame { bytes, .. }) = attacker.try_recv() {
        if let Ok(envelope) = codec.decode(&bytes) {
            if envelope.to == Some(claimed) {
                answers.push(envelope.body.kind().label());
            }
        }
    }
    assert_eq!(
        answers,
        vec!["hello_ack"],
        "the first copy is refused, no other"
    );
    let text = log.text();
    let refusals = text.matches("refusing hello").count();
    assert_eq!(refusals, 1, "one refusal logged:\n{text}");
    let summaries: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("received frames dropped"))
        .collect();
    assert!(
        !summaries.is_empty() && summaries.len() <= 6,
        "a summary of the drops, not a line per frame: {summaries:#?}"
    );
    assert!(
        summaries.iter().any(|line| line.contains("replay=")),
        "{summaries:#?}"
    );
    assert!(
        text.lines().count() < 200,
        "{} log lines",
        text.lines().count()
    );

    assert_eq!(cluster.agreed_leader().await, Some(leader));
    let status = cluster.handle(leader).status().await.unwrap();
    assert_eq!(status.election.term, term);
    cluster.hub.detach(ATTACKER);
    cluster.stop().await;
}
