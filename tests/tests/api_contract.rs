//! The admin API as one typed contract (CB-3, CB-5, LOG-1, LOG-5..8), over real HTTP to real
//! nodes: every answer below is checked by [`ApiClient`] against `docs/openapi.json`, against
//! the rule that every JSON answer carries the fencing token, and against Rust variant names.
//!
//! - The store's and the queue's answers are snake_case and tagged, and a job is one object in
//!   every answer (an enqueue, a claim, a nack, a retry, a list, an error).
//! - Every error is a stable code with a message and its status: 415 without JSON, `bad_json`,
//!   `bad_query`, `bad_path`, 405 with `Allow`, a clear 400 for an empty key, 404
//!   `no_such_endpoint`, 413 for a body too large, 401 without the token.
//! - A follower answers a write, a linearizable read and `leader resign` with 421
//!   `not_leader`, the leader's admin API in the body and in `Location`, and the fencing token.
//! - Lists are bounded (100 by default) and paged with `continue`.
//! - Event streams carry `id:` lines and resume after `Last-Event-ID`.

use std::collections::BTreeMap;
use std::time::Duration;

use conclave_config::{AdminConfig, AdminToken, Quorum};
use conclave_tests::api_client::{ApiClient, Body, Event, Reply, serve, stop_server};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::{Value, json};

/// How long a stream is read at most before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

fn json_body(value: Value) -> Body {
    Body::Json(value)
}

#[track_caller]
fn expect(reply: &Reply, status: u16, error: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.body);
    if let Some(code) = error {
        assert_eq!(reply.body["error"], code, "{}", reply.body);
        let message = reply.body["message"].as_str().unwrap_or("");
        assert!(
            !message.is_empty(),
            "an error without a message: {}",
            reply.body
        );
    }
}

/// LOG-5, LOG-8: the store's and the queue's answers, one shape per object, no Rust names.
#[actix_rt::test]
async fn answers_are_snake_case_and_a_job_has_one_shape() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);

    let put = api
        .call(
            "PUT",
            "/v1/kv/cfg/db%20url",
            json_body(json!({"value": "pg://1", "request_id": "r1"})),
        )
        .await;
    expect(&put, 200, None);
    assert_eq!(put.body["key"], "cfg/db url");
    assert_eq!(put.body["previous"], Value::Null);
    assert_eq!(put.body["replayed"], false);
    let revision = put.body["revision"].as_u64().unwrap();
    let again = api
        .call(
            "PUT",
            "/v1/kv/cfg/db%20url",
            json_body(json!({"value": "pg://1", "request_id": "r1"})),
        )
        .await;
    assert_eq!(
        (
            again.body["replayed"].clone(),
            again.body["revision"].as_u64()
        ),
        (json!(true), Some(revision))
    );

    // LOG-8's read: the value and its revision.
    let got = api.call("GET", "/v1/kv/cfg/db%20url", Body::Empty).await;
    expect(&got, 200, None);
    assert_eq!(
        (got.body["value"].clone(), got.body["revision"].as_u64()),
        (json!("pg://1"), Some(revision))
    );

    // A failed compare says which one failed, with the key as it is.
    let wrong_value = api
        .call(
            "PUT",
            "/v1/kv/cfg/db%20url",
            json_body(json!({"value": "pg://2", "if_value": "pg://0"})),
        )
        .await;
    expect(&wrong_value, 412, Some("compare_failed"));
    let message = wrong_value.body["message"].as_str().unwrap();
    assert!(
        message.contains("if_value") && message.contains("pg://1"),
        "{message}"
    );
    assert_eq!(wrong_value.body["current"]["value"], "pg://1");
    let wrong_revision = api
        .call(
            "PUT",
            "/v1/kv/cfg/db%20url",
            json_body(json!({"value": "pg://2", "if_revision": revision + 7})),
        )
        .await;
    expect(&wrong_revision, 412, Some("compare_failed"));
    assert!(
        wrong_revision.body["message"]
            .as_str()
            .unwrap()
            .contains(&format!("not {}", revision + 7)),
        "{}",
        wrong_revision.body
    );
    expect(
        &api.call("GET", "/v1/kv/none", Body::Empty).await,
        404,
        Some("not_found"),
    );
    expect(
        &api.call("DELETE", "/v1/kv/none", Body::Empty).await,
        404,
        Some("not_found"),
    );

    // A job is the same object in every answer.
    let added = api
        .call(
            "POST",
            "/v1/jobs",
            json_body(json!({"payload": "p1", "max_attempts": 1})),
        )
        .await;
    expect(&added, 200, None);
    let id = added.body["job"]["id"].as_u64().unwrap();
    assert_eq!(added.body["job"]["state"], "ready");
    let claimed = api
        .call("POST", "/v1/jobs/claim", json_body(json!({"worker": "w1"})))
        .await;
    expect(&claimed, 200, None);
    assert_eq!(claimed.body["job"]["id"].as_u64(), Some(id));
    assert_eq!(
        (
            claimed.body["job"]["state"].clone(),
            claimed.body["job"]["worker"].clone()
        ),
        (json!("claimed"), json!("w1"))
    );
    let not_held = api
        .call(
            "POST",
            &format!("/v1/jobs/{id}/ack"),
            json_body(json!({"worker": "w2"})),
        )
        .await;
    expect(&not_held, 409, Some("not_held"));
    assert_eq!(
        (
            not_held.body["job_id"].as_u64(),
            not_held.body["state"].clone()
        ),
        (Some(id), json!("claimed"))
    );
    let nacked = api
        .call(
            "POST",
            &format!("/v1/jobs/{id}/nack"),
            json_body(json!({"worker": "w1", "reason": "disk full"})),
        )
        .await;
    expect(&nacked, 200, None);
    assert_eq!(nacked.body["job"]["state"], "dead");
    assert_eq!(
        nacked.body["job"]["last_failure"],
        json!({"kind": "nacked", "worker": "w1", "reason": "disk full"})
    );
    let dead = api.call("GET", "/v1/jobs?state=dead", Body::Empty).await;
    expect(&dead, 200, None);
    assert_eq!(dead.body["jobs"], json!([nacked.body["job"]]));
    let retried = api
        .call(
            "POST",
            &format!("/v1/jobs/{id}/retry"),
            json_body(json!({})),
        )
        .await;
    expect(&retried, 200, None);
    assert_eq!(
        (
            retried.body["job"]["state"].clone(),
            retried.body["job"]["attempts"].as_u64()
        ),
        (json!("ready"), Some(0))
    );
    let not_dead = api
        .call(
            "POST",
            &format!("/v1/jobs/{id}/retry"),
            json_body(json!({})),
        )
        .await;
    expect(&not_dead, 409, Some("not_dead"));
    assert_eq!(not_dead.body["state"], "ready");

    // The log's commands are tagged by type.
    let log = api.call("GET", "/v1/log?from=1", Body::Empty).await;
    expect(&log, 200, None);
    let commands: Vec<&str> = log.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["command"]["type"].as_str())
        .collect();
    // Every write is an entry, those refused by a compare or by the queue included.
    assert_eq!(
        commands,
        [
            "kv_put",
            "kv_put",
            "kv_put",
            "kv_put",
            "kv_delete",
            "job_enqueue",
            "job_claim",
            "job_ack",
            "job_nack",
            "job_retry",
            "job_retry",
        ],
        "{}",
        log.body
    );
    stop_server(&server).await;
    cluster.stop().await;
}

/// CB-3: every error is a stable code with a message and its status, never the framework's
/// words; a mutation without the token is 401 and carries nothing of the node's state.
#[actix_rt::test]
async fn errors_are_stable_codes_with_messages() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);

    let no_type = api
        .call(
            "PUT",
            "/v1/kv/a",
            Body::Raw(None, br#"{"value": "x"}"#.to_vec()),
        )
        .await;
    expect(&no_type, 415, Some("unsupported_media_type"));
    let form = api
        .call(
            "PUT",
            "/v1/kv/a",
            Body::Raw(
                Some("application/x-www-form-urlencoded"),
                b"value=x".to_vec(),
            ),
        )
        .await;
    expect(&form, 415, Some("unsupported_media_type"));
    let garbled = api
        .call(
            "PUT",
            "/v1/kv/a",
            Body::Raw(Some("application/json"), b"{value".to_vec()),
        )
        .await;
    expect(&garbled, 400, Some("bad_json"));
    assert!(
        !garbled.body["message"]
            .as_str()
            .unwrap()
            .contains("Json deserialize error")
    );
    let misspelt = api
        .call("PUT", "/v1/kv/a", json_body(json!({"valu": "x"})))
        .await;
    expect(&misspelt, 400, Some("bad_json"));
    assert!(
        misspelt.body["message"].as_str().unwrap().contains("valu"),
        "{}",
        misspelt.body
    );
    let empty = api
        .call(
            "POST",
            "/v1/jobs",
            Body::Raw(Some("application/json"), Vec::new()),
        )
        .await;
    expect(&empty, 400, Some("bad_json"));

    let patch = api.call("PATCH", "/v1/kv/a", json_body(json!({}))).await;
    expect(&patch, 405, Some("method_not_allowed"));
    assert_eq!(patch.header("allow"), Some("GET, PUT, DELETE"));
    let delete_status = api.call("DELETE", "/v1/status", Body::Empty).await;
    expect(&delete_status, 405, Some("method_not_allowed"));
    assert_eq!(delete_status.header("allow"), Some("GET"));

    let no_key = api
        .call("PUT", "/v1/kv/", json_body(json!({"value": "x"})))
        .await;
    expect(&no_key, 400, Some("invalid_argument"));
    assert!(
        no_key.body["message"]
            .as_str()
            .unwrap()
            .contains("key is empty")
    );
    expect(
        &api.call("GET", "/v1/nope", Body::Empty).await,
        404,
        Some("no_such_endpoint"),
    );
    expect(
        &api.call("GET", "/v1/kv?stal=true", Body::Empty).await,
        400,
        Some("bad_query"),
    );
    expect(
        &api.call("GET", "/v1/kv?limit=0", Body::Empty).await,
        400,
        Some("bad_query"),
    );
    expect(
        &api.call("GET", "/v1/kv?limit=5000", Body::Empty).await,
        400,
        Some("bad_query"),
    );
    expect(
        &api.call("GET", "/v1/jobs?continue=zz", Body::Empty).await,
        400,
        Some("bad_query"),
    );
    expect(
        &api.call("GET", "/v1/jobs?state=Dead", Body::Empty).await,
        400,
        Some("bad_query"),
    );
    expect(
        &api.call(
            "POST",
            "/v1/jobs/abc/ack",
            json_body(json!({"worker": "w"})),
        )
        .await,
        400,
        Some("bad_path"),
    );
    let huge = vec![b'x'; 2 << 20];
    expect(
        &api.call(
            "POST",
            "/v1/jobs",
            Body::Raw(Some("application/json"), huge),
        )
        .await,
        413,
        Some("too_large"),
    );
    let big = api
        .call(
            "PUT",
            "/v1/kv/big",
            json_body(json!({"value": "v".repeat(64 * 1024 + 1)})),
        )
        .await;
    expect(&big, 413, Some("too_large"));
    assert!(
        big.body["message"]
            .as_str()
            .unwrap()
            .contains(conclave_api::WRITE_SIZE_LIMIT),
        "{}",
        big.body
    );
    stop_server(&server).await;

    let token = "contract-token";
    let (addr, server) = serve(
        cluster.handle(leader),
        AdminConfig {
            tokens: vec![AdminToken::from_token_file(token)],
            ..AdminConfig::default()
        },
    );
    let stranger = ApiClient::new(addr);
    let refused = stranger
        .call("POST", "/v1/jobs", json_body(json!({"payload": "x"})))
        .await;
    expect(&refused, 401, Some("unauthorized"));
    assert_eq!(
        refused.body.get("term"),
        None,
        "a 401 tells a stranger nothing"
    );
    let allowed = ApiClient::new(addr)
        .with_token(token)
        .call("POST", "/v1/jobs", json_body(json!({"payload": "x"})))
        .await;
    expect(&allowed, 200, None);
    stop_server(&server).await;
    cluster.stop().await;
}

/// LOG-1, CB-5: a follower sends writes, linearizable reads and `leader resign` to the leader
/// with 421, naming its admin API in the body and in `Location`, with the fencing token; a
/// stale read it serves itself.
#[actix_rt::test]
async fn a_follower_sends_clients_to_the_leader() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["a", "b", "c"]).await;
    let follower = (leader + 1) % 3;
    let leader_url = "http://leader.example:7070".to_owned();
    let (addr, server) = serve(
        cluster.handle(follower),
        AdminConfig {
            peer_urls: BTreeMap::from([(cluster.id(leader), leader_url.clone())]),
            ..AdminConfig::default()
        },
    );
    let api = ApiClient::new(addr);
    let leader_id = cluster.id(leader).to_string();
    for (method, path, body) in [
        ("PUT", "/v1/kv/x", json_body(json!({"value": "1"}))),
        ("GET", "/v1/kv/x", Body::Empty),
        ("POST", "/v1/jobs/claim", json_body(json!({"worker": "w"}))),
        ("POST", "/v1/leader/resign", Body::Empty),
    ] {
        let refused = api.call(method, path, body).await;
        expect(&refused, 421, Some("not_leader"));
        assert_eq!(
            refused.body["leader"],
            leader_id.as_str(),
            "{method} {path}"
        );
        assert_eq!(refused.body["leader_admin_url"], leader_url.as_str());
        assert_eq!(
            refused.header("location"),
            Some(format!("{leader_url}{path}").as_str()),
            "{method} {path}"
        );
    }
    let stale = api.call("GET", "/v1/kv/x?stale=true", Body::Empty).await;
    expect(&stale, 404, Some("not_found"));
    stop_server(&server).await;
    cluster.stop().await;
}

/// LOG-8: lists are bounded, 100 items by default, and read page by page with `continue`.
#[actix_rt::test]
async fn lists_are_bounded_and_paged() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);
    for n in 0..101 {
        let put = api
            .call(
                "PUT",
                &format!("/v1/kv/p/{n:03}"),
                json_body(json!({"value": "v"})),
            )
            .await;
        expect(&put, 200, None);
    }
    let first = api.call("GET", "/v1/kv?prefix=p/", Body::Empty).await;
    expect(&first, 200, None);
    assert_eq!(first.body["items"].as_array().unwrap().len(), 100);
    let token = first.body["continue"]
        .as_str()
        .expect("more follow")
        .to_owned();
    let last = api
        .call(
            "GET",
            &format!("/v1/kv?prefix=p/&continue={token}"),
            Body::Empty,
        )
        .await;
    assert_eq!(last.body["items"][0]["key"], "p/100");
    assert_eq!(last.body["continue"], Value::Null);

    for n in 0..5 {
        api.call(
            "POST",
            "/v1/jobs",
            json_body(json!({"payload": format!("j{n}")})),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let path = match &next {
            Some(token) => format!("/v1/jobs?limit=2&continue={token}"),
            None => "/v1/jobs?limit=2".to_owned(),
        };
        let page = api.call("GET", &path, Body::Empty).await;
        expect(&page, 200, None);
        let jobs = page.body["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 2, "{}", page.body);
        seen.extend(jobs.iter().map(|job| job["id"].as_u64().unwrap()));
        match page.body["continue"].as_str() {
            Some(token) => next = Some(token.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, [1, 2, 3, 4, 5]);
    stop_server(&server).await;
    cluster.stop().await;
}

/// CB-1, LOG-5: event streams carry ids, and a reader that reconnects with `Last-Event-ID`
/// resumes after the last event it got — in `/v1/events` within the node's run, from the
/// start of the run (with a `lagged` event) across a restart; in a watch by revision.
#[actix_rt::test]
async fn event_streams_resume_from_last_event_id() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["a", "b", "c"]).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);
    let incarnation = api.call("GET", "/v1/status", Body::Empty).await.body["incarnation"]
        .as_u64()
        .unwrap();

    // Everything kept since the start: peers joining, the leader elected.
    let from_start = format!("{incarnation}.0");
    let all = api
        .events(
            "/v1/events",
            &[("Last-Event-ID", &from_start)],
            PATIENCE,
            |events| events.len() >= 3,
        )
        .await;
    let ids: Vec<String> = all.iter().map(|event| event.id.clone().unwrap()).collect();
    assert_eq!(
        ids[..3],
        [1, 2, 3].map(|seq| format!("{incarnation}.{seq}")),
        "{all:?}"
    );
    let resumed = api
        .events(
            "/v1/events",
            &[("Last-Event-ID", &ids[1])],
            PATIENCE,
            |events| !events.is_empty(),
        )
        .await;
    assert_eq!(resumed[0], all[2], "resumed after the second event");
    let other_run = format!("{}.7", incarnation + 1);
    let restarted = api
        .events(
            "/v1/events",
            &[("Last-Event-ID", &other_run)],
            PATIENCE,
            |events| events.len() >= 2,
        )
        .await;
    assert_eq!(restarted[0].name, "lagged");
    assert_eq!(restarted[0].data, r#"{"event":"lagged","missed":null}"#);
    assert_eq!(restarted[1], all[0]);
    let garbled = api
        .call_with(
            "GET",
            "/v1/events",
            Body::Empty,
            &[("Last-Event-ID", "soon")],
        )
        .await;
    assert_eq!(garbled.status, 400);

    // A watch's ids are the changes' revisions.
    for body in [json!({"value": "red"}), json!({"value": "blue"})] {
        expect(
            &api.call("PUT", "/v1/kv/color", json_body(body)).await,
            200,
            None,
        );
    }
    expect(
        &api.call("DELETE", "/v1/kv/color", Body::Empty).await,
        200,
        None,
    );
    let watched: Vec<Event> = api
        .events("/v1/kv/color?watch=1", &[], PATIENCE, |events| {
            events.len() >= 3
        })
        .await;
    let names: Vec<&str> = watched.iter().map(|event| event.name.as_str()).collect();
    assert_eq!(names, ["put", "put", "delete"]);
    let first_id = watched[0].id.clone().unwrap();
    let resumed = api
        .events(
            "/v1/kv/color?watch=1",
            &[("Last-Event-ID", &first_id)],
            PATIENCE,
            |events| events.len() >= 2,
        )
        .await;
    assert_eq!(resumed, watched[1..]);
    stop_server(&server).await;
    cluster.stop().await;
}

/// A node that runs no replicated log says so, and how to turn it on, as a 409 `log_disabled`.
#[actix_rt::test]
async fn a_node_without_the_log_says_how_to_turn_it_on() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);
    let refused = api
        .call("PUT", "/v1/kv/a", json_body(json!({"value": "1"})))
        .await;
    expect(&refused, 409, Some("log_disabled"));
    let message = refused.body["message"].as_str().unwrap();
    assert!(
        message.contains("log.enabled = true") && message.contains("CONCLAVE__LOG__ENABLED=true"),
        "{message}"
    );
    stop_server(&server).await;
    cluster.stop().await;
}
