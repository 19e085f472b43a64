//! The admin API (CB-3, CB-5, CB-6) mounted on actix-web's test service over a real
//! single-node cluster: status with its fencing token, history, the bearer token rules of
//! every mutation, error answers, and the event stream.

use std::time::Duration;

use actix_web::App;
use actix_web::body::MessageBody;
use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body_json};
use conclave_actors::admin::admin_routes;
use conclave_actors::config::Quorum;
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::{Value, json};

const TOKEN: &str = "s3cret-admin-token";

/// CB-3, CB-5: status answers with every field of DESIGN §9 and the fencing token; a
/// mutation without the token, or with a wrong one, gets 401 and changes nothing; with the
/// token it runs and answers with the fencing token after it.
#[actix_rt::test]
async fn mutations_need_the_token_and_answers_carry_the_fencing_token() {
    let _log = test_log();
    let cluster = MemoryCluster::start(&["solo"], ClusterOptions::real_time(Quorum::Voters)).await;
    cluster.await_leader(Duration::from_secs(10)).await;
    let app = init_service(App::new().configure(admin_routes(
        cluster.handle(0).clone(),
        Some(TOKEN.to_owned()),
    )))
    .await;

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
    let app =
        init_service(App::new().configure(admin_routes(cluster.handle(follower).clone(), None)))
            .await;

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
    assert!(
        body["error"].as_str().unwrap().contains("peer_id"),
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

    let not_leader = call_service(
        &app,
        TestRequest::post().uri("/v1/leader/resign").to_request(),
    )
    .await;
    assert_eq!(not_leader.status(), StatusCode::CONFLICT);
    let body: Value = read_body_json(not_leader).await;
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
    let app =
        actix_web::test::init_service(App::new().configure(admin_routes(handle.clone(), None)))
            .await;
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
        .command(conclave_core::raft::Command::SetLeader(target))
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
