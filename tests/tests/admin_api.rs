//! The admin API (CB-3, CB-5, CB-6) mounted on actix-web's test service over real nodes:
//! status with its fencing token, history, the bearer token rules of every mutation, error
//! answers, the event stream, the probes, the deadline of a mutation, and `leader set`
//! waiting for its outcome.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use actix_web::App;
use actix_web::body::MessageBody;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body_json};
use conclave_actors::admin::{AdminOptions, AdminTokens, admin_routes};
use conclave_actors::events::unix_millis;
use conclave_actors::node::NodeHandle;
use conclave_api::{
    CommandAnswer, DEADLINE_HEADER, ErrorAnswer, ErrorCode, HealthAnswer, HistoryAnswer,
    MAX_TIMEOUT_MS, PeersAnswer, ReadyAnswer, StatusAnswer, TIMEOUT_HEADER,
};
use conclave_config::{AdminConfig, AdminToken, Quorum};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::{Value, json};

const TOKEN: &str = "s3cret-admin-token";

/// The routes of `node` on a loopback listener (reads open), with `token` for mutations.
fn routes(
    node: &NodeHandle,
    token: Option<&str>,
) -> impl Fn(&mut actix_web::web::ServiceConfig) + Clone + Send + 'static {
    admin_routes(
        node.clone(),
        AdminOptions {
            tokens: AdminTokens::new(token.map(AdminToken::from_token_file).into_iter().collect()),
            ..AdminOptions::new(&AdminConfig::default())
        },
    )
}

/// CB-3, CB-5: status answers with every field of docs/design.md §9 and the fencing token; a
/// mutation without the token, or with a wrong one, gets 401 and changes nothing; with the
/// token it runs and answers with the fencing token after it.
#[actix_rt::test]
async fn mutations_need_the_token_and_answers_carry_the_fencing_token() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    cluster.await_leader(Duration::from_secs(10)).await;
    let app = init_service(App::new().configure(routes(cluster.handle(0), Some(TOKEN)))).await;

    let status: Value =
        read_body_json(call_service(&app, TestRequest::get().uri("/v1/status").to_request()).await)
            .await;
    for key in [
        "node_id",
        "cluster_id",
        "mode",
        "quorum",
        "role",
        "term",
        "leader",
        "fencing_token",
        "auto_election",
        "manual_override",
        "peers",
    ] {
        assert!(status.get(key).is_some(), "status lacks {key}: {status}");
    }
    assert_eq!(status["role"], "leader");
    assert_eq!(status["leader"], "solo");
    let term = status["term"].as_u64().unwrap();
    assert_eq!(status["fencing_token"], format!("{term}:solo"));

    let switch_off = || {
        TestRequest::post()
            .uri("/v1/auto-election")
            .set_json(json!({ "enabled": false }))
    };
    let denied = call_service(&app, switch_off().to_request()).await;
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    let wrong = call_service(
        &app,
        switch_off()
            .insert_header(("Authorization", "Bearer not-the-token"))
            .to_request(),
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let unchanged = cluster.handle(0).election_status().await.unwrap();
    assert!(unchanged.auto_election, "a refused request changed nothing");

    let allowed = call_service(
        &app,
        switch_off()
            .insert_header(("Authorization", format!("Bearer {TOKEN}")))
            .to_request(),
    )
    .await;
    assert_eq!(allowed.status(), StatusCode::OK);
    let answer: Value = read_body_json(allowed).await;
    assert_eq!(answer["outcome"], "applied");
    assert_eq!(answer["fencing_token"], format!("{term}:solo"));
    assert!(
        !cluster
            .handle(0)
            .election_status()
            .await
            .unwrap()
            .auto_election
    );

    // Reads need no token.
    let history: Value = read_body_json(
        call_service(&app, TestRequest::get().uri("/v1/history").to_request()).await,
    )
    .await;
    let records = history["history"].as_array().unwrap();
    assert_eq!(records.last().unwrap()["leader"], "solo");
    assert_eq!(records.last().unwrap()["cause"], "vote_won");
    cluster.stop().await;
}

/// CB-3: malformed requests are 400 with a JSON error; a command the node's state does not
/// allow is 409 and names the leader.
#[actix_rt::test]
async fn bad_requests_and_refusals_are_explained() {
    let _log = test_log();
    let cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let follower = (leader + 1) % 3;
    let app = init_service(App::new().configure(routes(cluster.handle(follower), None))).await;

    let bad_id = call_service(
        &app,
        TestRequest::post()
            .uri("/v1/leader")
            .set_json(json!({ "peer_id": "no spaces allowed" }))
            .to_request(),
    )
    .await;
    assert_eq!(bad_id.status(), StatusCode::BAD_REQUEST);
    let body: Value = read_body_json(bad_id).await;
    assert_eq!(body["error"], "invalid_argument", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("peer_id"),
        "{body}"
    );

    let bad_json = call_service(
        &app,
        TestRequest::post()
            .uri("/v1/auto-election")
            .insert_header(("Content-Type", "application/json"))
            .set_payload("{\"enabled\": \"maybe\"}")
            .to_request(),
    )
    .await;
    assert_eq!(bad_json.status(), StatusCode::BAD_REQUEST);
    let body: Value = read_body_json(bad_json).await;
    assert_eq!(body["error"], "bad_json", "{body}");

    let not_leader = call_service(
        &app,
        TestRequest::post().uri("/v1/leader/resign").to_request(),
    )
    .await;
    assert_eq!(not_leader.status(), StatusCode::MISDIRECTED_REQUEST);
    let body: Value = read_body_json(not_leader).await;
    assert_eq!(body["error"], "not_leader", "{body}");
    assert_eq!(body["leader"], cluster.id(leader).to_string());
    cluster.stop().await;
}

/// CB-3: the event stream sends a leader change as a server-sent event with its fencing
/// token.
#[actix_rt::test]
async fn event_stream_carries_leader_changes() {
    let _log = test_log();
    let cluster =
        MemoryCluster::start(&["a", "b"], ClusterOptions::real_time(Quorum::Connected)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let other = 1 - leader;
    let handle = cluster.handle(leader).clone();
    let app = init_service(App::new().configure(routes(&handle, None))).await;
    let events = call_service(&app, TestRequest::get().uri("/v1/events").to_request()).await;
    assert_eq!(events.status(), StatusCode::OK);
    assert_eq!(
        events.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    // The stream never ends while the node runs: read chunks as they come until the change
    // shows up.
    let target = cluster.id(other);
    handle
        .command(conclave_core::election::Command::SetLeader(target))
        .await
        .unwrap()
        .unwrap();
    let mut body = std::pin::pin!(events.into_body());
    let mut text = String::new();
    while !text.contains(&format!("\"leader\":\"{target}\"")) {
        let chunk = tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| body.as_mut().poll_next(cx)),
        )
        .await
        .expect("an event within 5 s");
        match chunk {
            Some(Ok(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
            other => panic!("the stream ended early: {other:?}\n{text}"),
        }
    }
    assert!(text.contains("event: leader_changed"), "{text}");
    assert!(text.contains("\"fencing_token\""), "{text}");
    cluster.stop().await;
}

/// `Unix time now + offset` in milliseconds, as a client's deadline.
fn deadline_in(offset_ms: i64) -> String {
    let now = unix_millis(SystemTime::now());
    now.saturating_add_signed(offset_ms).to_string()
}

/// CB-5: the fencing token is on every answer — peers and history included, which once
/// lacked it — and on a refusal of the node's state.
#[actix_rt::test]
async fn every_answer_carries_the_fencing_token() {
    let _log = test_log();
    let cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let follower = (leader + 1) % 3;
    let leader_id = cluster.id(leader).to_string();
    let app = init_service(App::new().configure(routes(cluster.handle(follower), None))).await;
    let status = cluster.handle(follower).election_status().await.unwrap();
    let token = format!("{}:{leader_id}", status.term);

    let peers: PeersAnswer =
        read_body_json(call_service(&app, TestRequest::get().uri("/v1/peers").to_request()).await)
            .await;
    assert_eq!(peers.fencing.fencing_token.as_deref(), Some(token.as_str()));
    assert_eq!(peers.fencing.leader.as_deref(), Some(leader_id.as_str()));
    assert_eq!(peers.peers.len(), 2);

    let history: HistoryAnswer = read_body_json(
        call_service(&app, TestRequest::get().uri("/v1/history").to_request()).await,
    )
    .await;
    assert_eq!(
        history.fencing.fencing_token.as_deref(),
        Some(token.as_str())
    );
    let last = history.history.last().unwrap();
    assert!(last.at.ends_with('Z') && last.at.contains('T'), "{last:?}");

    let status: StatusAnswer =
        read_body_json(call_service(&app, TestRequest::get().uri("/v1/status").to_request()).await)
            .await;
    assert_eq!(
        status.fencing.fencing_token.as_deref(),
        Some(token.as_str())
    );
    assert_eq!(status.voters, ["a", "b", "c"]);
    assert!(status.ready, "{status:?}");

    let refused = call_service(
        &app,
        TestRequest::post().uri("/v1/leader/resign").to_request(),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::MISDIRECTED_REQUEST);
    let refused: ErrorAnswer = read_body_json(refused).await;
    assert_eq!(
        refused.fencing.and_then(|fencing| fencing.fencing_token),
        Some(token.clone())
    );
    cluster.stop().await;
}

/// `/health` answers 200 while the node runs; `/ready` 200 with a leader and a reachable
/// quorum, 503 with the reason once the quorum is gone.
#[actix_rt::test]
async fn health_and_readiness_probes() {
    let _log = test_log();
    let mut cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let survivor = (leader + 1) % 3;
    let app = init_service(App::new().configure(routes(cluster.handle(survivor), None))).await;
    let get = |uri: &'static str| TestRequest::get().uri(uri).to_request();

    let health = call_service(&app, get("/health")).await;
    assert_eq!(health.status(), StatusCode::OK);
    let health: HealthAnswer = read_body_json(health).await;
    assert_eq!(health.status, "ok");
    let ready = call_service(&app, get("/ready")).await;
    assert_eq!(ready.status(), StatusCode::OK);
    let ready: ReadyAnswer = read_body_json(ready).await;
    assert!(ready.ready && ready.reachable_voters == 3 && ready.quorum_size == 2);

    // Both others gone: this node can reach no quorum.
    cluster.kill(leader).await;
    cluster.kill((leader + 2) % 3).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let last = loop {
        let answer = call_service(&app, get("/ready")).await;
        let code = answer.status();
        let body: ReadyAnswer = read_body_json(answer).await;
        if code == StatusCode::SERVICE_UNAVAILABLE && body.reachable_voters == 1 {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready: {body:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!last.ready);
    let reason = last.reason.unwrap_or_default();
    assert!(
        reason.contains("no leader") || reason.contains("reaches 1 of the 2"),
        "{reason}"
    );
    // Alive all the same.
    assert_eq!(
        call_service(&app, get("/health")).await.status(),
        StatusCode::OK
    );
    cluster.stop().await;
}

/// Item 4: where the API listens beyond loopback every endpoint but `/health` needs the token.
#[actix_rt::test]
async fn reads_need_the_token_beyond_loopback() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    cluster.await_leader(Duration::from_secs(10)).await;
    let options = AdminOptions {
        tokens: AdminTokens::new(vec![AdminToken::from_token_file(TOKEN)]),
        reads_need_token: true,
        ..AdminOptions::new(&AdminConfig::default())
    };
    let app =
        init_service(App::new().configure(admin_routes(cluster.handle(0).clone(), options))).await;
    for uri in [
        "/ready",
        "/v1/status",
        "/v1/peers",
        "/v1/history",
        "/v1/events",
    ] {
        let denied = call_service(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(denied.status(), StatusCode::UNAUTHORIZED, "{uri}");
    }
    let allowed = call_service(
        &app,
        TestRequest::get()
            .uri("/v1/status")
            .insert_header(("Authorization", format!("Bearer {TOKEN}")))
            .to_request(),
    )
    .await;
    assert_eq!(allowed.status(), StatusCode::OK);
    let health = call_service(&app, TestRequest::get().uri("/health").to_request()).await;
    assert_eq!(health.status(), StatusCode::OK);
    cluster.stop().await;
}

/// Item 4: a mutation that reaches the node after its client's deadline is refused and
/// changes nothing; one within its deadline runs.
#[actix_rt::test]
async fn a_mutation_past_its_deadline_is_not_carried_out() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    cluster.await_leader(Duration::from_secs(10)).await;
    let handle = cluster.handle(0).clone();
    let app = init_service(App::new().configure(routes(&handle, None))).await;
    let switch_off = |deadline: String| {
        TestRequest::post()
            .uri("/v1/auto-election")
            .insert_header((DEADLINE_HEADER, deadline))
            .set_json(json!({ "enabled": false }))
            .to_request()
    };

    let late = call_service(&app, switch_off(deadline_in(-2000))).await;
    assert_eq!(late.status(), StatusCode::SERVICE_UNAVAILABLE);
    let late: ErrorAnswer = read_body_json(late).await;
    assert_eq!(late.error, ErrorCode::DeadlinePassed, "{late:?}");
    assert!(late.message.contains("deadline passed"), "{late:?}");
    assert!(handle.election_status().await.unwrap().auto_election);
    assert_eq!(
        handle
            .metrics()
            .value("conclave_admin_refused_total", &[("reason", "deadline")]),
        Some(1.0)
    );

    let garbled = call_service(&app, switch_off("soon".to_owned())).await;
    assert_eq!(garbled.status(), StatusCode::BAD_REQUEST);

    let in_time = call_service(&app, switch_off(deadline_in(5000))).await;
    assert_eq!(in_time.status(), StatusCode::OK);
    assert!(!handle.election_status().await.unwrap().auto_election);
    cluster.stop().await;
}

/// A `conclave-timeout-ms` is counted from when the node reads the request, on the node's
/// clock: it decides over a `conclave-deadline` that a disagreeing clock has put in the past,
/// and a malformed or too long one is refused without changing anything.
#[actix_rt::test]
async fn a_relative_timeout_needs_no_agreement_of_clocks() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    cluster.await_leader(Duration::from_secs(10)).await;
    let handle = cluster.handle(0).clone();
    let app = init_service(App::new().configure(routes(&handle, None))).await;
    let switch = |enabled: bool, timeout: String| {
        TestRequest::post()
            .uri("/v1/auto-election")
            // The client's clock two minutes behind this node's.
            .insert_header((DEADLINE_HEADER, deadline_in(-120_000)))
            .insert_header((TIMEOUT_HEADER, timeout))
            .set_json(json!({ "enabled": enabled }))
            .to_request()
    };

    for garbled in [
        "soon".to_owned(),
        "-5".to_owned(),
        (MAX_TIMEOUT_MS + 1).to_string(),
    ] {
        let answer = call_service(&app, switch(false, garbled.clone())).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{garbled}");
        let answer: ErrorAnswer = read_body_json(answer).await;
        assert_eq!(answer.error, ErrorCode::InvalidArgument, "{answer:?}");
        assert!(answer.message.contains(TIMEOUT_HEADER), "{answer:?}");
        assert!(handle.election_status().await.unwrap().auto_election);
    }

    let in_time = call_service(&app, switch(false, "5000".to_owned())).await;
    assert_eq!(in_time.status(), StatusCode::OK);
    assert!(!handle.election_status().await.unwrap().auto_election);
    assert_eq!(
        handle
            .metrics()
            .value("conclave_admin_refused_total", &[("reason", "deadline")])
            .unwrap_or(0.0),
        0.0
    );
    cluster.stop().await;
}

/// `leader set` with `wait_ms` answers once the new leader leads (completed), and 504 naming
/// the target when it cannot take over (it is down).
#[actix_rt::test]
async fn leader_set_waits_for_its_outcome() {
    let _log = test_log();
    let mut cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let target = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let app = init_service(App::new().configure(routes(cluster.handle(other), None))).await;
    let set = |peer: String, wait_ms: u64| {
        TestRequest::post()
            .uri("/v1/leader")
            .set_json(json!({ "peer_id": peer, "wait_ms": wait_ms }))
            .to_request()
    };

    let done = call_service(&app, set(cluster.id(target).to_string(), 10_000)).await;
    assert_eq!(done.status(), StatusCode::OK);
    let done: CommandAnswer = read_body_json(done).await;
    assert_eq!(done.completed, Some(true));
    assert_eq!(
        done.fencing.leader.as_deref(),
        Some(cluster.id(target).to_string().as_str())
    );

    // The old leader is down now: a transfer to it cannot complete.
    cluster.kill(leader).await;
    let failed = call_service(&app, set(cluster.id(leader).to_string(), 1_000)).await;
    assert_eq!(failed.status(), StatusCode::GATEWAY_TIMEOUT);
    let failed: ErrorAnswer = read_body_json(failed).await;
    assert!(
        failed.message.contains(&format!(
            "{} did not take the lead within 1000 ms",
            cluster.id(leader)
        )),
        "{failed:?}"
    );
    cluster.stop().await;
}

/// A follower refusing a resign names the leader's admin API when `admin.peer_urls` lists it,
/// so the CLI can pass the request on; an unknown path is a JSON 404 that says whose it is.
#[actix_rt::test]
async fn a_follower_names_the_leaders_admin_api() {
    let _log = test_log();
    let cluster =
        MemoryCluster::start(&["a", "b", "c"], ClusterOptions::real_time(Quorum::Voters)).await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    let follower = (leader + 1) % 3;
    let url = "http://10.1.2.3:7070".to_owned();
    let options = AdminOptions {
        peer_urls: BTreeMap::from([(cluster.id(leader), url.clone())]),
        ..AdminOptions::new(&AdminConfig::default())
    };
    let app =
        init_service(App::new().configure(admin_routes(cluster.handle(follower).clone(), options)))
            .await;
    let refused = call_service(
        &app,
        TestRequest::post().uri("/v1/leader/resign").to_request(),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(
        refused.headers().get("location").unwrap(),
        "http://10.1.2.3:7070/v1/leader/resign"
    );
    let refused: ErrorAnswer = read_body_json(refused).await;
    assert_eq!(refused.leader_admin_url, Some(url));
    assert_eq!(
        refused.fencing.and_then(|fencing| fencing.leader),
        Some(cluster.id(leader).to_string())
    );

    let missing = call_service(&app, TestRequest::get().uri("/v1/nope").to_request()).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let missing: ErrorAnswer = read_body_json(missing).await;
    assert!(
        missing.message.contains("conclave's admin API"),
        "{missing:?}"
    );
    cluster.stop().await;
}
