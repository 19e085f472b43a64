//! `GET /v1/snapshot` over real HTTP to whole in-process nodes (MEMB-6, LOG-4, LOG-7, CB-5),
//! every answer checked against `docs/openapi.json` by [`ApiClient`]:
//!
//! - the leader answers a saved-snapshot file: it decodes and checks out, its image restores
//!   at the index the header and `conclave-snapshot-index` name, with every write acknowledged
//!   before the request; its term is that entry's, also when the log was compacted right up
//!   to it; the fencing token is in the headers;
//! - a follower answers 421 `not_leader` (JSON, with the token), and with `?stale=true` its
//!   own image at a committed index;
//! - an unknown query parameter is 400 `bad_query`, another method 405, a node without the
//!   replicated log 409 `log_disabled`.

use std::time::Duration;

use conclave_actors::machine::ClusterMachine;
use conclave_config::{AdminConfig, Quorum};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::LogConfig;
use conclave_storage::SnapshotBackup;
use conclave_tests::api_client::{ApiClient, Body, Reply, serve, stop_server};
use conclave_tests::{CLUSTER, ClusterOptions, MemoryCluster, test_log};
use serde_json::json;

/// Entries between two snapshots of the log (LOG-4): small, so the log is compacted up to the
/// image's index at times.
const SNAPSHOT_ENTRIES: u64 = 4;

/// Three nodes running the replicated log, with a leader elected.
async fn cluster_with_log() -> (MemoryCluster, usize) {
    let cluster = MemoryCluster::start_with(
        &["gw-a", "gw-b", "gw-c"],
        ClusterOptions::real_time(Quorum::Voters),
        |config| {
            if let ElectionConfig::Raft(raft) = &mut config.election {
                raft.log = Some(LogConfig {
                    snapshot_entries: SNAPSHOT_ENTRIES,
                    shared_acks: false,
                    ..LogConfig::default()
                });
            }
        },
    )
    .await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    (cluster, leader)
}

/// The saved snapshot of a 200 answer, checked against its headers; the state it restores.
fn checked(reply: &Reply) -> (SnapshotBackup, ClusterMachine) {
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/octet-stream")
    );
    let (backup, checksum) = SnapshotBackup::decode(&reply.bytes).expect("a whole snapshot");
    let header = |name: &str| reply.header(name).map(str::to_owned);
    assert_eq!(
        header("conclave-snapshot-index"),
        Some(backup.last.index.to_string())
    );
    assert_eq!(
        header("conclave-snapshot-term"),
        Some(backup.last.term.to_string())
    );
    assert_eq!(
        header("conclave-snapshot-sha256"),
        Some(checksum.to_string())
    );
    assert_eq!(
        backup.cluster.map(|id| id.to_string()).as_deref(),
        Some(CLUSTER)
    );
    let machine = ClusterMachine::restored(&backup.image).expect("the image restores");
    assert_eq!(machine.applied_index(), backup.last.index);
    (backup, machine)
}

/// MEMB-6, LOG-7: the leader's image holds every acknowledged write, at a committed index
/// whose term it names, with the fencing token in headers.
#[actix_rt::test]
async fn memb6_the_leader_serves_a_checksummed_image_of_every_acknowledged_write() {
    let _log = test_log();
    let (cluster, leader) = cluster_with_log().await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);

    // A no-op and seven writes: the log is compacted up to index 8, where the image stands.
    for n in 0..7 {
        let put = api
            .call(
                "PUT",
                &format!("/v1/kv/fact-{n}"),
                Body::Json(json!({"value": format!("value {n}")})),
            )
            .await;
        assert_eq!(put.status, 200, "{}", put.text);
    }
    let reply = api.call("GET", "/v1/snapshot", Body::Empty).await;
    let (backup, machine) = checked(&reply);
    for n in 0..7 {
        let kv = machine
            .state()
            .kv()
            .get(&format!("fact-{n}"))
            .expect("every write");
        assert_eq!(kv.value, format!("value {n}"));
    }
    // One leader, one term: every entry's term is the leader's.
    let term = reply.header("conclave-term").unwrap();
    assert_eq!(backup.last.term.to_string(), term);
    assert_eq!(
        reply.header("conclave-leader"),
        Some(cluster.id(leader).to_string().as_str())
    );
    assert_eq!(
        reply.header("conclave-fencing-token"),
        Some(format!("{term}:{}", cluster.id(leader)).as_str())
    );
    assert!(backup.last.index >= 8, "{:?}", backup.last);

    // A write after the image is in the next one, at a later index.
    let put = api
        .call("PUT", "/v1/kv/later", Body::Json(json!({"value": "x"})))
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    let (next, machine) = checked(&api.call("GET", "/v1/snapshot", Body::Empty).await);
    assert!(next.last.index > backup.last.index);
    assert!(machine.state().kv().get("later").is_some());

    let bad = api.call("GET", "/v1/snapshot?fresh=1", Body::Empty).await;
    assert_eq!(
        (bad.status, bad.body["error"].as_str()),
        (400, Some("bad_query"))
    );
    let post = api.call("POST", "/v1/snapshot", Body::Empty).await;
    assert_eq!(post.status, 405, "{}", post.text);
    assert_eq!(post.header("allow"), Some("GET"));

    stop_server(&server).await;
    cluster.stop().await;
}

/// MEMB-6, LOG-1: a follower redirects a snapshot as it does a linearizable read, and serves
/// its own copy with `stale`.
#[actix_rt::test]
async fn memb6_a_follower_redirects_or_serves_its_own_copy_when_stale() {
    let _log = test_log();
    let (cluster, leader) = cluster_with_log().await;
    let follower = (leader + 1) % 3;
    let (leader_addr, leader_server) = serve(cluster.handle(leader), AdminConfig::default());
    let (addr, server) = serve(cluster.handle(follower), AdminConfig::default());
    let put = ApiClient::new(leader_addr)
        .call("PUT", "/v1/kv/fact", Body::Json(json!({"value": "v"})))
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    let api = ApiClient::new(addr);

    let refused = api.call("GET", "/v1/snapshot", Body::Empty).await;
    assert_eq!(refused.status, 421, "{}", refused.text);
    assert_eq!(refused.body["error"], "not_leader");
    assert_eq!(refused.body["leader"], cluster.id(leader).to_string());

    // Its own copy, at a committed index: the write is there once the follower applied it.
    let applied = cluster
        .wait_for(Duration::from_secs(10), || async {
            let reply = api
                .call("GET", "/v1/snapshot?stale=true", Body::Empty)
                .await;
            let (_, machine) = checked(&reply);
            machine.state().kv().get("fact").is_some()
        })
        .await;
    assert!(applied, "the follower's image never held the write");

    stop_server(&server).await;
    stop_server(&leader_server).await;
    cluster.stop().await;
}

/// A node without the replicated log has no state to save: 409 `log_disabled`.
#[actix_rt::test]
async fn without_the_log_there_is_no_snapshot() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let reply = ApiClient::new(addr)
        .call("GET", "/v1/snapshot", Body::Empty)
        .await;
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(reply.body["error"], "log_disabled");
    stop_server(&server).await;
    cluster.stop().await;
}
