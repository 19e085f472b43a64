//! A bounded store (STORE-1..3), over real HTTP to real nodes, every answer checked against
//! `docs/openapi.json` by [`ApiClient`]:
//!
//! - a store filled to `log.max_store_bytes` refuses the next put with 507 `store_full`
//!   before appending it, still serves reads and deletes, and takes writes again once
//!   deletes made room; a replacement that adds nothing passes while it is full;
//! - a queue at `log.max_jobs` refuses the next enqueue with 507, while claims and acks work,
//!   and takes jobs again once one is done;
//! - the alarm (`conclave_log_store_full`, and `store_full` in `/health`) is raised while the
//!   store is at its bounds, and cleared once room is freed.

use std::time::Duration;

use conclave_actors::node::NodeHandle;
use conclave_config::{AdminConfig, Quorum};
use conclave_core::election::ElectionConfig;
use conclave_statemachine::{JOB_OVERHEAD, KV_ENTRY_OVERHEAD, MAX_KEY_WEIGHT, StoreLimits};
use conclave_tests::api_client::{ApiClient, Body, Reply, serve, stop_server};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::json;

/// How long what the tests wait for may take on a loaded machine before it counts as never.
const PATIENCE: Duration = Duration::from_secs(20);

/// One node running the log, its store held to `max_bytes` and `max_jobs`.
async fn bounded_node(max_bytes: u64, max_jobs: u64) -> (MemoryCluster, NodeHandle) {
    let limits = StoreLimits {
        max_bytes,
        max_jobs,
    };
    let cluster = MemoryCluster::start_with(
        &["solo"],
        ClusterOptions::real_time(Quorum::Voters),
        move |config| {
            if let ElectionConfig::Raft(raft) = &mut config.election {
                raft.log = Some(conclave_core::raft::LogConfig::default());
            }
            config.store_limits = limits;
        },
    )
    .await;
    let leader = cluster.await_leader(PATIENCE).await;
    let node = cluster.handle(leader).clone();
    (cluster, node)
}

async fn put(api: &ApiClient, key: &str, value: &str) -> Reply {
    api.call(
        "PUT",
        &format!("/v1/kv/{key}"),
        Body::Json(json!({ "value": value })),
    )
    .await
}

#[track_caller]
fn assert_store_full(reply: &Reply, bound: &str) {
    assert_eq!(reply.status, 507, "{}", reply.body);
    assert_eq!(reply.body["error"], "store_full", "{}", reply.body);
    let message = reply.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(bound), "{message}");
}

/// Whether the node raises the alarm now: in its metric, and in its `/health`.
async fn alarm(api: &ApiClient, node: &NodeHandle) -> (bool, bool) {
    let metric = node.metrics().value("conclave_log_store_full", &[]) == Some(1.0);
    let health = api.call("GET", "/health", Body::Empty).await;
    assert_eq!(health.status, 200, "{}", health.body);
    let listed = health.body["alarms"]
        .as_array()
        .is_some_and(|alarms| alarms.contains(&json!("store_full")));
    (metric, listed)
}

/// Waits until the metric and `/health` both show the alarm `raised` (they are updated
/// together, every second); panics if they never do.
async fn await_alarm(cluster: &MemoryCluster, api: &ApiClient, node: &NodeHandle, raised: bool) {
    let reached = cluster
        .wait_for(PATIENCE, || async {
            alarm(api, node).await == (raised, raised)
        })
        .await;
    assert!(reached, "the store_full alarm never became {raised}");
}

/// STORE-1, STORE-3: a full store refuses the next put with 507 and appends nothing; reads,
/// deletes and same-size replacements still work; after a delete the put goes through, and
/// the alarm clears once the largest write fits again.
#[actix_rt::test]
async fn a_full_store_refuses_puts_serves_reads_and_deletes_and_takes_writes_after_deletes() {
    let _log = test_log();
    let value = "v".repeat(1000);
    let one_key = 2 + 1000 + KV_ENTRY_OVERHEAD;
    // Room for the largest single write and then 3 keys of the test's size.
    let max_bytes = MAX_KEY_WEIGHT + 3 * one_key;
    let (cluster, node) = bounded_node(max_bytes, 100).await;
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);
    await_alarm(&cluster, &api, &node, false).await;

    let big = "b".repeat(64 * 1024);
    assert_eq!(put(&api, "big", &big).await.status, 200);
    for key in ["k1", "k2", "k3"] {
        let reply = put(&api, key, &value).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let applied = node.metrics().value("conclave_log_applied_index", &[]);
    let refused = put(&api, "k4", &value).await;
    assert_store_full(&refused, "log.max_store_bytes");
    assert_eq!(
        node.metrics()
            .value("conclave_log_proposals_total", &[("result", "store_full")]),
        Some(1.0)
    );
    await_alarm(&cluster, &api, &node, true).await;
    assert_eq!(
        node.metrics().value("conclave_log_applied_index", &[]),
        applied,
        "a refused write was appended"
    );

    let read = api.call("GET", "/v1/kv/k1", Body::Empty).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body["value"], json!(value));
    let listed = api.call("GET", "/v1/kv", Body::Empty).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    // A replacement no larger than what it replaces adds nothing, and passes.
    assert_eq!(put(&api, "k1", &"w".repeat(1000)).await.status, 200);
    assert_store_full(&put(&api, "k1", &"w".repeat(1600)).await, "max_store_bytes");

    let deleted = api.call("DELETE", "/v1/kv/k2", Body::Empty).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let again = put(&api, "k4", &value).await;
    assert_eq!(again.status, 200, "{}", again.body);
    // The largest write fits again only once the big key is gone.
    await_alarm(&cluster, &api, &node, true).await;
    let deleted = api.call("DELETE", "/v1/kv/big", Body::Empty).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    await_alarm(&cluster, &api, &node, false).await;
    stop_server(&server).await;
    cluster.stop().await;
}

/// STORE-1: writes in flight together cannot pass the bound between them. Twenty puts sent
/// at once to a store with room for five: five are stored and fifteen refused with 507,
/// whichever arrive first, however many are appended before the first is applied.
#[actix_rt::test]
async fn puts_in_flight_together_cannot_pass_the_bound() {
    let _log = test_log();
    let value = "v".repeat(1000);
    let one_key = 3 + 1000 + KV_ENTRY_OVERHEAD;
    let (cluster, node) = bounded_node(5 * one_key, 100).await;
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);
    let sent: Vec<_> = (0..20)
        .map(|i| {
            let (api, value) = (api.clone(), value.clone());
            let key = format!("k{i:02}");
            actix_rt::spawn(async move { (put(&api, &key, &value).await.status, key) })
        })
        .collect();
    let mut stored = Vec::new();
    let mut refused = 0;
    for answer in sent {
        match answer.await.expect("the put's task ends") {
            (200, key) => stored.push(key),
            (507, _) => refused += 1,
            (status, key) => panic!("put {key}: {status}"),
        }
    }
    assert_eq!((stored.len(), refused), (5, 15), "stored {stored:?}");
    for key in &stored {
        let read = api.call("GET", &format!("/v1/kv/{key}"), Body::Empty).await;
        assert_eq!(read.status, 200, "{key}: {}", read.body);
    }
    stop_server(&server).await;
    cluster.stop().await;
}

/// STORE-2: a queue holding `log.max_jobs` jobs not done refuses the next enqueue with 507;
/// claims and acks still work, and an acked job makes room for the next.
#[actix_rt::test]
async fn a_full_queue_refuses_enqueues_until_a_job_is_done() {
    let _log = test_log();
    let (cluster, node) = bounded_node(1 << 20, 2).await;
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);
    let enqueue = |payload: &'static str| {
        let api = api.clone();
        async move {
            api.call(
                "POST",
                "/v1/jobs",
                Body::Json(json!({"payload": payload, "queue": "q"})),
            )
            .await
        }
    };
    for payload in ["a", "b"] {
        let reply = enqueue(payload).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_store_full(&enqueue("c").await, "log.max_jobs = 2");
    await_alarm(&cluster, &api, &node, true).await;
    assert_eq!(
        node.metrics().value("conclave_log_store_jobs", &[]),
        Some(2.0)
    );
    assert_eq!(
        node.metrics().value("conclave_log_store_bytes", &[]),
        Some((2 * (1 + 1 + JOB_OVERHEAD)) as f64)
    );

    let claimed = api
        .call(
            "POST",
            "/v1/jobs/claim",
            Body::Json(json!({"worker": "w", "queue": "q"})),
        )
        .await;
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    let job = claimed.body["job"]["id"].as_u64().expect("a job id");
    let acked = api
        .call(
            "POST",
            &format!("/v1/jobs/{job}/ack"),
            Body::Json(json!({"worker": "w"})),
        )
        .await;
    assert_eq!(acked.status, 200, "{}", acked.body);
    let reply = enqueue("c").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    stop_server(&server).await;
    cluster.stop().await;
}
