//! Scoped admin tokens (SEC-2, issue 26 item 2) on actix-web's test service over a real node
//! with the replicated log:
//!
//! - the role matrix: every endpoint × {no token, an unknown token, read, write, admin}, on a
//!   loopback listener (reads open) and on one beyond loopback (reads need a token). A
//!   mutation is sent with a deadline long passed, so one that is admitted is refused with 503
//!   `deadline_passed` after the token's checks and changes nothing; one that is not gets 401
//!   (no token, or one nobody has) or 403 `forbidden` naming the token and the role needed;
//! - a writer limited to key prefixes writes, deletes and compares only keys under them, and
//!   no job;
//! - a writer limited to queues adds, claims, acks, nacks and retries only jobs of those
//!   queues (an ack names a job id: the job's queue is looked up), and writes no key;
//! - every 403 is counted in `conclave_admin_refused_total{reason="forbidden"}`.

use actix_web::App;
use actix_web::dev::ServiceResponse;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use conclave_actors::admin::{AdminOptions, AdminTokens, admin_routes};
use conclave_actors::node::NodeHandle;
use conclave_api::DEADLINE_HEADER;
use conclave_config::{AdminConfig, AdminToken, TokenRole, TokenScope, secret_digest};
use conclave_tests::{MemoryCluster, test_log};
use serde_json::{Value, json};

const READ: &str = "read-secret-1";
const WRITE: &str = "write-secret-2";
const ADMIN: &str = "admin-secret-3";
const KEYS: &str = "keys-secret-4";
const WORKER: &str = "worker-secret-5";

fn token(name: &str, role: TokenRole, secret: &str, scope: Option<TokenScope>) -> AdminToken {
    AdminToken {
        name: name.to_owned(),
        role,
        scope,
        digest: secret_digest(secret.as_bytes()),
    }
}

/// The tokens of every test: one of each role, a writer limited to the key prefix `app/`, and
/// a worker limited to the queue `thumbs`.
fn tokens() -> Vec<AdminToken> {
    vec![
        token("dash", TokenRole::Read, READ, None),
        token("deployer", TokenRole::Write, WRITE, None),
        token("ops", TokenRole::Admin, ADMIN, None),
        token(
            "app-config",
            TokenRole::Write,
            KEYS,
            Some(TokenScope {
                key_prefixes: vec!["app/".to_owned()],
                queues: Vec::new(),
            }),
        ),
        token(
            "worker-1",
            TokenRole::Write,
            WORKER,
            Some(TokenScope {
                key_prefixes: Vec::new(),
                queues: vec!["thumbs".to_owned()],
            }),
        ),
    ]
}

fn routes(
    node: &NodeHandle,
    reads_need_token: bool,
) -> impl Fn(&mut actix_web::web::ServiceConfig) + Clone + Send + 'static {
    admin_routes(
        node.clone(),
        AdminOptions {
            tokens: AdminTokens::new(tokens()),
            reads_need_token,
            ..AdminOptions::new(&AdminConfig::default())
        },
    )
}

/// What an endpoint needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    Read,
    Write,
    Admin,
}

/// Every endpoint of the API: method, path, body, and the role it needs.
fn endpoints() -> Vec<(&'static str, &'static str, Option<Value>, Needs)> {
    use Needs::*;
    vec![
        ("GET", "/health", None, Nothing),
        ("GET", "/ready", None, Read),
        ("GET", "/v1/status", None, Read),
        ("GET", "/v1/peers", None, Read),
        ("GET", "/v1/history", None, Read),
        ("GET", "/v1/events", None, Read),
        ("GET", "/v1/kv", None, Read),
        ("GET", "/v1/kv/app/x", None, Read),
        ("GET", "/v1/kv/app/x?watch=1", None, Read),
        ("GET", "/v1/jobs", None, Read),
        ("GET", "/v1/log", None, Read),
        ("GET", "/v1/members", None, Read),
        ("GET", "/v1/sessions", None, Read),
        ("GET", "/v1/no-such-endpoint", None, Read),
        ("PATCH", "/v1/status", None, Read),
        ("GET", "/v1/snapshot", None, Admin),
        ("PUT", "/v1/kv/app/x", Some(json!({"value": "v"})), Write),
        ("DELETE", "/v1/kv/app/x", None, Write),
        (
            "POST",
            "/v1/jobs",
            Some(json!({"payload": "p", "queue": "thumbs"})),
            Write,
        ),
        (
            "POST",
            "/v1/jobs/claim",
            Some(json!({"worker": "w", "queue": "thumbs"})),
            Write,
        ),
        (
            "POST",
            "/v1/jobs/1/ack",
            Some(json!({"worker": "w"})),
            Write,
        ),
        (
            "POST",
            "/v1/jobs/1/nack",
            Some(json!({"worker": "w"})),
            Write,
        ),
        ("POST", "/v1/jobs/1/retry", Some(json!({})), Write),
        (
            "POST",
            "/v1/sessions",
            Some(json!({"ttl_ms": 10000})),
            Write,
        ),
        ("POST", "/v1/sessions/1/keepalive", None, Write),
        ("DELETE", "/v1/sessions/1", None, Write),
        ("DELETE", "/v1/jobs/1", None, Admin),
        ("POST", "/v1/jobs/purge", Some(json!({})), Admin),
        (
            "POST",
            "/v1/leader",
            Some(json!({"peer_id": "solo"})),
            Admin,
        ),
        ("POST", "/v1/leader/resign", None, Admin),
        (
            "POST",
            "/v1/auto-election",
            Some(json!({"enabled": false})),
            Admin,
        ),
        (
            "POST",
            "/v1/members",
            Some(json!({"id": "gw-x", "address": "127.0.0.1:1"})),
            Admin,
        ),
        ("POST", "/v1/members/gw-x/promote", None, Admin),
        ("DELETE", "/v1/members/gw-x", None, Admin),
    ]
}

/// The request, with `secret` as its bearer token and, on a mutation, a deadline long passed.
fn request(method: &str, path: &str, body: Option<&Value>, secret: Option<&str>) -> TestRequest {
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = TestRequest::default().method(method.clone()).uri(path);
    if let Some(secret) = secret {
        request = request.insert_header(("Authorization", format!("Bearer {secret}")));
    }
    if method != actix_web::http::Method::GET {
        request = request.insert_header((DEADLINE_HEADER, "1"));
    }
    match body {
        Some(body) => request.set_json(body),
        None => request,
    }
}

/// The status and, for an error answer, its JSON (`Null` for a stream or a binary answer).
async fn answer(response: ServiceResponse) -> (u16, Value) {
    let status = response.status().as_u16();
    let json = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if !json || status < 400 {
        return (status, Value::Null);
    }
    let body = read_body(response).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// SEC-2: the role matrix, with reads open (loopback) and with reads needing a token.
#[actix_rt::test]
async fn sec2_every_endpoint_needs_its_role() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    for reads_need_token in [false, true] {
        let app = init_service(App::new().configure(routes(&node, reads_need_token))).await;
        let callers: [(&str, Option<&str>, Option<TokenRole>); 5] = [
            ("no token", None, None),
            ("an unknown token", Some("not-a-token"), None),
            ("dash", Some(READ), Some(TokenRole::Read)),
            ("deployer", Some(WRITE), Some(TokenRole::Write)),
            ("ops", Some(ADMIN), Some(TokenRole::Admin)),
        ];
        for (method, path, body, needs) in endpoints() {
            for (caller, secret, role) in callers {
                let response = call_service(
                    &app,
                    request(method, path, body.as_ref(), secret).to_request(),
                )
                .await;
                let (status, error) = answer(response).await;
                let what = format!(
                    "{method} {path} with {caller} (reads need a token: {reads_need_token}): \
                     {status} {error}"
                );
                let needed = match needs {
                    Needs::Nothing => None,
                    Needs::Read => reads_need_token.then_some(TokenRole::Read),
                    Needs::Write => Some(TokenRole::Write),
                    Needs::Admin => Some(TokenRole::Admin),
                };
                match (needed, role) {
                    (Some(_), None) => {
                        assert_eq!(status, 401, "{what}");
                        assert_eq!(error["error"], "unauthorized", "{what}");
                    }
                    (Some(needed), Some(role)) if role < needed => {
                        assert_eq!(status, 403, "{what}");
                        assert_eq!(error["error"], "forbidden", "{what}");
                        let message = error["message"].as_str().unwrap();
                        let expected = format!(
                            "token {caller:?} has role {role}; {method} {} needs {needed}",
                            path.split('?').next().unwrap()
                        );
                        assert_eq!(message, expected, "{what}");
                        assert!(!message.contains("secret"), "{what}");
                    }
                    _ => {
                        assert!(status != 401 && status != 403, "{what}");
                        if method != "GET" && path != "/v1/status" {
                            // Admitted, then refused for its deadline: nothing was changed.
                            assert_eq!(error["error"], "deadline_passed", "{what}");
                        }
                    }
                }
            }
        }
    }
    let status = node.election_status().await.unwrap();
    assert!(status.auto_election, "an admitted mutation ran: {status:?}");
    let metrics = node.metrics().render();
    assert!(
        metrics.lines().any(|line| line
            .starts_with("conclave_admin_refused_total{reason=\"forbidden\"}")
            && !line.ends_with(" 0")),
        "403s are not counted:\n{metrics}"
    );
    cluster.stop().await;
}

/// `method path` with `body` (none when `Null`) and the bearer `secret`, no deadline.
fn with_token(method: &str, path: &str, body: Value, secret: &str) -> actix_web::test::TestRequest {
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("a method");
    let request = TestRequest::default()
        .method(method)
        .uri(path)
        .insert_header(("Authorization", format!("Bearer {secret}")));
    if body.is_null() {
        request
    } else {
        request.set_json(body)
    }
}

/// Sends `method path` with `body` and the bearer `secret` to `app`; the status and JSON.
macro_rules! call {
    ($app:expr, $method:expr, $path:expr, $body:expr, $secret:expr) => {{
        let response = call_service(
            $app,
            with_token($method, $path, $body, $secret).to_request(),
        )
        .await;
        let status = response.status().as_u16();
        let body = read_body(response).await;
        (
            status,
            serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
        )
    }};
}

#[track_caller]
fn forbidden(answer: &(u16, Value), name: &str, gist: &str) {
    assert_eq!(answer.0, 403, "{}", answer.1);
    assert_eq!(answer.1["error"], "forbidden", "{}", answer.1);
    let message = answer.1["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("token {name:?}")) && message.contains(gist),
        "{message}"
    );
}

/// SEC-2: a writer limited to `app/` puts, compares and deletes keys there only, and adds no
/// job; what it may not do is 403 and changes nothing.
#[actix_rt::test]
async fn sec2_a_prefix_limited_writer_writes_only_its_keys() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let app = init_service(App::new().configure(routes(&node, false))).await;

    let put = call!(&app, "PUT", "/v1/kv/app/x", json!({"value": "1"}), KEYS);
    assert_eq!(put.0, 200, "{}", put.1);
    let revision = put.1["revision"].as_u64().unwrap();
    let compared = json!({"value": "2", "if_revision": revision});
    let cas = call!(&app, "PUT", "/v1/kv/app/x", compared, KEYS);
    assert_eq!(cas.0, 200, "{}", cas.1);

    let outside = call!(&app, "PUT", "/v1/kv/other", json!({"value": "1"}), KEYS);
    forbidden(&outside, "app-config", "\"other\"");
    // A key that only starts like the prefix is outside it.
    let near = call!(&app, "PUT", "/v1/kv/app", json!({"value": "1"}), KEYS);
    forbidden(&near, "app-config", "[\"app/\"]");
    let by_admin = call!(&app, "PUT", "/v1/kv/other", json!({"value": "0"}), ADMIN);
    assert_eq!(by_admin.0, 200, "{}", by_admin.1);
    let delete = call!(&app, "DELETE", "/v1/kv/other", Value::Null, KEYS);
    forbidden(&delete, "app-config", "DELETE");
    let job = call!(&app, "POST", "/v1/jobs", json!({"payload": "p"}), KEYS);
    forbidden(&job, "app-config", "queues none");

    let other = call!(&app, "GET", "/v1/kv/other", Value::Null, KEYS);
    assert_eq!(other.0, 200, "limits apply to writes only: {}", other.1);
    assert_eq!(other.1["value"], "0", "a refused write changed the key");
    let delete = call!(&app, "DELETE", "/v1/kv/app/x", Value::Null, KEYS);
    assert_eq!(delete.0, 200, "{}", delete.1);
    cluster.stop().await;
}

/// SEC-2: a worker limited to the queue `thumbs` adds, claims, acks and nacks its jobs only:
/// an ack of another queue's job is refused by the job's queue, looked up; it writes no key.
#[actix_rt::test]
async fn sec2_a_queue_limited_worker_works_only_its_queues() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let node = cluster.handle(leader).clone();
    let app = init_service(App::new().configure(routes(&node, false))).await;

    let thumbs = json!({"payload": "t", "queue": "thumbs"});
    let added = call!(&app, "POST", "/v1/jobs", thumbs.clone(), WORKER);
    assert_eq!(added.0, 200, "{}", added.1);
    let default_queue = call!(&app, "POST", "/v1/jobs", json!({"payload": "d"}), WORKER);
    forbidden(&default_queue, "worker-1", "queue \"default\"");
    let mail = json!({"payload": "m", "queue": "mail"});
    let added_mail = call!(&app, "POST", "/v1/jobs", mail, ADMIN);
    assert_eq!(added_mail.0, 200, "{}", added_mail.1);

    let claim_mail = json!({"worker": "w", "queue": "mail"});
    let refused = call!(&app, "POST", "/v1/jobs/claim", claim_mail.clone(), WORKER);
    forbidden(&refused, "worker-1", "queue \"mail\"");
    // The operator claims the mail job as worker "w": the worker may not ack it in that name.
    let mail_job = call!(&app, "POST", "/v1/jobs/claim", claim_mail, ADMIN);
    assert_eq!(mail_job.0, 200, "{}", mail_job.1);
    let mail_id = mail_job.1["job"]["id"].as_u64().unwrap();
    let w = json!({"worker": "w"});
    for verb in ["ack", "nack"] {
        let path = format!("/v1/jobs/{mail_id}/{verb}");
        let refused = call!(&app, "POST", &path, w.clone(), WORKER);
        forbidden(&refused, "worker-1", "queue \"mail\"");
    }
    let retry = call!(
        &app,
        "POST",
        &format!("/v1/jobs/{mail_id}/retry"),
        json!({}),
        WORKER
    );
    forbidden(&retry, "worker-1", "queue \"mail\"");
    let unknown = call!(&app, "POST", "/v1/jobs/999/ack", w.clone(), WORKER);
    forbidden(&unknown, "worker-1", "not known");

    let claim = json!({"worker": "w", "queue": "thumbs"});
    let claimed = call!(&app, "POST", "/v1/jobs/claim", claim.clone(), WORKER);
    assert_eq!(claimed.0, 200, "{}", claimed.1);
    let id = claimed.1["job"]["id"].as_u64().unwrap();
    let nack = json!({"worker": "w", "reason": "busy"});
    let nacked = call!(&app, "POST", &format!("/v1/jobs/{id}/nack"), nack, WORKER);
    assert_eq!(nacked.0, 200, "{}", nacked.1);
    let again = call!(&app, "POST", "/v1/jobs/claim", claim, WORKER);
    assert_eq!(again.0, 200, "{}", again.1);
    let acked = call!(&app, "POST", &format!("/v1/jobs/{id}/ack"), w, WORKER);
    assert_eq!(acked.0, 200, "{}", acked.1);

    let session = call!(
        &app,
        "POST",
        "/v1/sessions",
        json!({"ttl_ms": 10000}),
        WORKER
    );
    assert_eq!(session.0, 200, "sessions are any writer's: {}", session.1);
    let key = call!(&app, "PUT", "/v1/kv/x", json!({"value": "1"}), WORKER);
    forbidden(&key, "worker-1", "key_prefixes");
    let purge = call!(&app, "POST", "/v1/jobs/purge", json!({}), WORKER);
    forbidden(&purge, "worker-1", "needs admin");

    let mail_state = call!(&app, "GET", "/v1/jobs", Value::Null, READ);
    let mail_job = mail_state.1["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["id"] == mail_id)
        .cloned()
        .unwrap();
    assert_eq!(
        (mail_job["state"].as_str(), mail_job["worker"].as_str()),
        (Some("claimed"), Some("w")),
        "a refused ack changed the job: {mail_job}"
    );
    cluster.stop().await;
}
