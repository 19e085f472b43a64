//! Claims that wait for a ready job (SESS-3), over real HTTP to real nodes, every answer checked
//! against `docs/openapi.json` by [`ApiClient`]. Each test waits on what the node shows — the
//! gauge `conclave_log_claims_waiting`, an answer — never on the clock.
//!
//! - A waiting claim is answered by the enqueue that follows it, and writes nothing to the
//!   log while it waits.
//! - An enqueue to another queue does not answer it; once its wait has passed it answers
//!   `none_ready`, having written nothing.
//! - Several claims waiting on one queue: one enqueue writes one claim, which gets the job;
//!   the others go on waiting and get the next jobs.
//! - A leader change answers a waiting claim with 421 `not_leader`; a node that stops, with
//!   503 `unavailable`.
//! - A waiting claim whose client hangs up stops waiting at once.
//! - `wait_ms` above the bound is refused, naming the field and the bound.

use std::io::Write;
use std::time::Duration;

use conclave_actors::node::NodeHandle;
use conclave_api::MAX_CLAIM_WAIT_MS;
use conclave_config::AdminConfig;
use conclave_core::election::Command;
use conclave_tests::api_client::{ApiClient, Body, Reply, serve, stop_server};
use conclave_tests::{MemoryCluster, test_log};
use serde_json::{Value, json};

/// How long what the tests wait for may take on a loaded machine before it counts as never.
const PATIENCE: Duration = Duration::from_secs(20);

/// A wait no test reaches: a claim with it that answers was answered by something else.
const LONG_WAIT_MS: u64 = 60_000;

/// The claims waiting on the node now (`conclave_log_claims_waiting`).
fn claims_waiting(node: &NodeHandle) -> f64 {
    node.metrics()
        .value("conclave_log_claims_waiting", &[])
        .unwrap_or(0.0)
}

/// Waits until `count` claims wait on `node`; panics if they never do.
async fn await_waiting(cluster: &MemoryCluster, node: &NodeHandle, count: f64) {
    let reached = cluster
        .wait_for(PATIENCE, || async { claims_waiting(node) == count })
        .await;
    assert!(
        reached,
        "{count} claims never waited (now {})",
        claims_waiting(node)
    );
}

/// The highest index the node knows committed, once a write of the test's own is applied: the
/// leader's entry of its term is committed by then, so the index moves only with the test's
/// writes.
async fn settled_commit_index(api: &ApiClient, node: &NodeHandle) -> u64 {
    let put = api
        .call("PUT", "/v1/kv/settled", Body::Json(json!({"value": "1"})))
        .await;
    assert_eq!(put.status, 200, "{}", put.body);
    commit_index(node).await
}

/// The highest index the node knows committed.
async fn commit_index(node: &NodeHandle) -> u64 {
    let read = node.committed_entries(1, 1).await.expect("the node runs");
    read.outcome.expect("the node runs the log").commit
}

/// A claim of `queue` by `worker` waiting up to `wait_ms`, sent now and answered later.
fn claim(
    api: &ApiClient,
    worker: &str,
    queue: &str,
    wait_ms: u64,
) -> actix_rt::task::JoinHandle<Reply> {
    let api = api.clone();
    let body = json!({"worker": worker, "queue": queue, "wait_ms": wait_ms});
    actix_rt::spawn(async move { api.call("POST", "/v1/jobs/claim", Body::Json(body)).await })
}

/// Enqueues `payload` in `queue`; the job's id.
async fn enqueue(api: &ApiClient, queue: &str, payload: &str) -> u64 {
    let added = api
        .call(
            "POST",
            "/v1/jobs",
            Body::Json(json!({"payload": payload, "queue": queue})),
        )
        .await;
    assert_eq!(added.status, 200, "{}", added.body);
    added.body["job"]["id"].as_u64().expect("a job id")
}

#[track_caller]
fn assert_claimed(reply: &Reply, job: u64, worker: &str) {
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        (
            reply.body["job"]["id"].as_u64(),
            reply.body["job"]["state"].clone(),
            reply.body["job"]["worker"].clone()
        ),
        (Some(job), json!("claimed"), json!(worker)),
        "{}",
        reply.body
    );
}

/// SESS-3: a claim that finds no job ready waits on the leader, writing nothing, and the
/// enqueue that follows answers it with that job.
#[actix_rt::test]
async fn a_waiting_claim_is_answered_by_the_enqueue_that_follows_it() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let before = settled_commit_index(&api, &node).await;
    let waiting = claim(&api, "w1", "photos", LONG_WAIT_MS);
    await_waiting(&cluster, &node, 1.0).await;
    assert_eq!(commit_index(&node).await, before, "a waiting claim wrote");
    let job = enqueue(&api, "photos", "resize 7").await;
    let answer = waiting.await.expect("the claim's task ends");
    assert_claimed(&answer, job, "w1");
    assert_eq!(claims_waiting(&node), 0.0);
    // The enqueue and the one claim it woke.
    assert_eq!(commit_index(&node).await, before + 2);
    stop_server(&server).await;
    cluster.stop().await;
}

/// SESS-3: a job of another queue does not answer a waiting claim, which answers `none_ready`
/// once its wait has passed; it wrote nothing, and the other queue's job is still ready.
#[actix_rt::test]
async fn a_waiting_claim_answers_none_ready_when_its_wait_passes() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let waiting = claim(&api, "w1", "photos", 1_000);
    // Waiting, or already answered on a slow machine: either way the claim wrote nothing.
    let seen = cluster
        .wait_for(PATIENCE, || async {
            claims_waiting(&node) == 1.0 || waiting.is_finished()
        })
        .await;
    assert!(seen, "the claim neither waited nor answered");
    let other = enqueue(&api, "mail", "send invoice").await;
    let after_enqueue = commit_index(&node).await;
    let answer = waiting.await.expect("the claim's task ends");
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert_eq!(answer.body["error"], "none_ready", "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|message| message.contains("photos")),
        "{}",
        answer.body
    );
    assert_eq!(
        commit_index(&node).await,
        after_enqueue,
        "a waiting claim wrote"
    );
    let ready = api.call("GET", "/v1/jobs?state=ready", Body::Empty).await;
    let ids: Vec<u64> = ready.body["jobs"]
        .as_array()
        .expect("a list of jobs")
        .iter()
        .filter_map(|job| job["id"].as_u64())
        .collect();
    assert_eq!(ids, [other]);
    assert_eq!(claims_waiting(&node), 0.0);
    stop_server(&server).await;
    cluster.stop().await;
}

/// SESS-3: three claims wait on one queue; one enqueue writes one claim, which takes the job,
/// and the other two go on waiting until the next enqueues give them a job each.
#[actix_rt::test]
async fn one_enqueue_answers_one_of_several_waiting_claims() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let before = settled_commit_index(&api, &node).await;
    let mut waiting: Vec<_> = ["w1", "w2", "w3"]
        .iter()
        .map(|worker| (*worker, claim(&api, worker, "render", LONG_WAIT_MS)))
        .collect();
    await_waiting(&cluster, &node, 3.0).await;
    let mut claimed = Vec::new();
    for (round, left) in [(1, 2.0), (2, 1.0), (3, 0.0)] {
        let job = enqueue(&api, "render", &format!("frame {round}")).await;
        await_waiting(&cluster, &node, left).await;
        let answered = cluster
            .wait_for(PATIENCE, || async {
                waiting.iter().any(|(_, task)| task.is_finished())
            })
            .await;
        assert!(answered, "no claim answered job {job}");
        let done: Vec<usize> = (0..waiting.len())
            .filter(|index| waiting[*index].1.is_finished())
            .collect();
        assert_eq!(done.len(), 1, "one job answered several claims");
        let (worker, task) = waiting.remove(done[0]);
        assert_claimed(&task.await.expect("the claim's task ends"), job, worker);
        claimed.push(job);
    }
    assert_eq!(claimed.len(), 3);
    // Three enqueues and three claims: no claim was written that found nothing.
    assert_eq!(commit_index(&node).await, before + 6);
    stop_server(&server).await;
    cluster.stop().await;
}

/// SESS-3: a leader change answers a claim waiting on the old leader with 421 `not_leader`
/// (naming the new leader when the old one knows it already), so its client waits there.
#[actix_rt::test]
async fn a_leader_change_answers_a_waiting_claim_with_not_leader() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["a", "b", "c"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let waiting = claim(&api, "w1", "photos", LONG_WAIT_MS);
    await_waiting(&cluster, &node, 1.0).await;
    let target = (leader + 1) % 3;
    node.command(Command::SetLeader(cluster.id(target)))
        .await
        .expect("the node runs")
        .expect("the transfer starts");
    let answer = waiting.await.expect("the claim's task ends");
    assert_eq!(answer.status, 421, "{}", answer.body);
    assert_eq!(answer.body["error"], "not_leader", "{}", answer.body);
    let named = &answer.body["leader"];
    assert!(
        *named == Value::Null || *named == json!(cluster.id(target).to_string()),
        "{}",
        answer.body
    );
    assert_eq!(claims_waiting(&node), 0.0);
    stop_server(&server).await;
    cluster.stop().await;
}

/// SESS-3: a claim waiting on a node that stops answers 503 `unavailable` at once.
#[actix_rt::test]
async fn a_waiting_claim_on_a_node_that_stops_answers_unavailable() {
    let _log = test_log();
    let (mut cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let waiting = claim(&api, "w1", "photos", LONG_WAIT_MS);
    await_waiting(&cluster, &node, 1.0).await;
    cluster.kill(leader).await;
    let answer = waiting.await.expect("the claim's task ends");
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.body["error"], "unavailable", "{}", answer.body);
    assert_eq!(claims_waiting(&node), 0.0);
    stop_server(&server).await;
}

/// SESS-3: a claim whose client hangs up while it waits stops waiting (its HTTP request is
/// dropped, and its place with it), long before its wait would have passed.
#[actix_rt::test]
async fn a_waiting_claim_whose_client_hangs_up_stops_waiting() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());

    let body = json!({"worker": "w1", "wait_ms": LONG_WAIT_MS}).to_string();
    let mut client = std::net::TcpStream::connect(addr).expect("the admin API accepts");
    write!(
        client,
        "POST /v1/jobs/claim HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("the request is sent");
    await_waiting(&cluster, &node, 1.0).await;
    drop(client);
    await_waiting(&cluster, &node, 0.0).await;
    stop_server(&server).await;
    cluster.stop().await;
}

/// SESS-3: `wait_ms` above the bound is refused with 400 `invalid_argument`, naming the field
/// and the bound; the bound itself is taken.
#[actix_rt::test]
async fn a_wait_above_the_bound_is_refused() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let (addr, server) = serve(&node, AdminConfig::default());
    let api = ApiClient::new(addr);

    let refused = claim(&api, "w1", "photos", MAX_CLAIM_WAIT_MS + 1)
        .await
        .expect("the claim's task ends");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.body["error"], "invalid_argument",
        "{}",
        refused.body
    );
    let message = refused.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("wait_ms") && message.contains(&MAX_CLAIM_WAIT_MS.to_string()),
        "{message}"
    );
    let job = enqueue(&api, "photos", "resize 8").await;
    let taken = claim(&api, "w1", "photos", MAX_CLAIM_WAIT_MS)
        .await
        .expect("the claim's task ends");
    assert_claimed(&taken, job, "w1");
    stop_server(&server).await;
    cluster.stop().await;
}
