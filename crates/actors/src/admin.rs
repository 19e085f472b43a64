//! The admin HTTP API (CB-3, CB-5, CB-6) and the Prometheus endpoint (CB-4).
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/v1/status` | role, term, leader, fencing token, quorum, override, peers |
//! | GET | `/v1/peers` | the peer table |
//! | GET | `/v1/history` | the leadership history with causes |
//! | GET | `/v1/events` | server-sent events: leader and peer changes |
//! | POST | `/v1/leader` | `{"peer_id": "gw-b"}`: SetLeader |
//! | POST | `/v1/leader/resign` | the leader hands over (Yield) |
//! | POST | `/v1/auto-election` | `{"enabled": false}` |
//!
//! Every answer carries the fencing token `(term, leader)`. With a token configured, every
//! POST needs `Authorization: Bearer <token>` and is refused with 401 otherwise; the API
//! refuses to listen on a non-loopback address without a token. Errors are JSON
//! `{"error": "..."}` with a status that says whose fault it is: 400 for a bad request, 409
//! when the node's state does not allow it (not the leader), 503 when the node cannot act.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::web::{self, Bytes, Data, Json};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use conclave_core::PeerInfo;
use conclave_core::raft::{Command, CommandOutcome, RaftError, RaftStatus};
use conclave_protocol::PeerId;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::events::Received;
use crate::metrics::NodeMetrics;
use crate::node::{NodeError, NodeHandle, NodeStatus};
use crate::wal::HistoryRecord;

/// How often the event stream sends a comment line so proxies keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);

#[derive(Clone)]
struct AdminState {
    node: NodeHandle,
    token: Option<String>,
}

/// Starts the admin API on `listen`.
pub fn serve_admin(
    node: NodeHandle,
    listen: SocketAddr,
    token: Option<String>,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(NodeError::Bind {
            what: "admin.listen",
            addr: listen,
            source: std::io::Error::other(
                "refusing to serve the admin API on a non-loopback address without admin.token_file",
            ),
        });
    }
    start_server(admin_routes(node, token), listen, "admin.listen")
}

/// Starts an HTTP server for `routes` on `listen`, spawned on the current actix system.
fn start_server(
    routes: impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
    listen: SocketAddr,
    what: &'static str,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    let server = HttpServer::new(move || App::new().configure(routes.clone()))
        .workers(1)
        // A stopping node finishes requests in flight but does not wait long for idle
        // connections (a Prometheus scraper or an event-stream reader keeps one open).
        .shutdown_timeout(1)
        .disable_signals()
        .bind(listen)
        .map_err(|source| NodeError::Bind {
            what,
            addr: listen,
            source,
        })?
        .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    Ok(handle)
}

/// The admin API's routes for `node`, requiring `token` on mutations when set; what
/// [`serve_admin`] serves, and what tests mount on actix-web's test service.
pub fn admin_routes(
    node: NodeHandle,
    token: Option<String>,
) -> impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static {
    let state = AdminState { node, token };
    move |config: &mut web::ServiceConfig| {
        config
            .app_data(Data::new(state.clone()))
            .app_data(web::JsonConfig::default().error_handler(|err, _| {
                let message = err.to_string();
                actix_web::error::InternalError::from_response(
                    err,
                    error_response(StatusCode::BAD_REQUEST, &message),
                )
                .into()
            }))
            .route("/v1/status", web::get().to(status))
            .route("/v1/peers", web::get().to(peers))
            .route("/v1/history", web::get().to(history))
            .route("/v1/events", web::get().to(events))
            .route("/v1/leader", web::post().to(set_leader))
            .route("/v1/leader/resign", web::post().to(resign))
            .route("/v1/auto-election", web::post().to(auto_election));
    }
}

/// Starts the Prometheus endpoint (`GET /metrics`) on `listen`.
pub fn serve_metrics(
    metrics: NodeMetrics,
    listen: SocketAddr,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    let routes = move |config: &mut web::ServiceConfig| {
        let metrics = metrics.clone();
        config.route(
            "/metrics",
            web::get().to(move || {
                let body = metrics.render();
                async move {
                    HttpResponse::Ok()
                        .content_type("text/plain; version=0.0.4")
                        .body(body)
                }
            }),
        );
    };
    start_server(routes, listen, "metrics.listen")
}

fn error_response(status: StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "error": message }))
}

fn unavailable(err: &NodeError) -> HttpResponse {
    error_response(StatusCode::SERVICE_UNAVAILABLE, &err.to_string())
}

/// Whether a mutation carries the configured bearer token.
fn authorized(state: &AdminState, request: &HttpRequest) -> bool {
    let Some(expected) = &state.token else {
        return true;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    constant_time_eq(presented.as_bytes(), expected.as_bytes())
}

/// Compares without stopping at the first difference, so response time says nothing about
/// how much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header((header::WWW_AUTHENTICATE, "Bearer"))
        .json(json!({ "error": "this request needs the admin bearer token (Authorization: Bearer <token>)" }))
}

/// `"<term>:<leader>"` or null.
fn fencing_token(status: &RaftStatus) -> Value {
    status
        .fencing_token
        .map_or(Value::Null, |token| Value::from(token.to_string()))
}

fn peer_json(peer: &PeerInfo, now: conclave_core::Instant) -> Value {
    json!({
        "peer_id": peer.id.to_string(),
        "status": peer.status.label(),
        "rtt_ms": peer.rtt.map(|rtt| rtt.as_secs_f64() * 1000.0),
        "last_seen_ms_ago": now.saturating_duration_since(peer.last_seen).as_millis() as u64,
        "address": peer.addr.as_str(),
    })
}

/// The status answer (DESIGN §9).
pub fn status_json(status: &NodeStatus, now: conclave_core::Instant) -> Value {
    let election = &status.election;
    json!({
        "node_id": status.node_id.to_string(),
        "cluster_id": status.cluster_id.to_string(),
        "mode": "raft",
        "quorum": election.quorum_mode,
        "quorum_size": election.quorum_size,
        "electorate": election.electorate,
        "role": election.role.label(),
        "term": election.term,
        "leader": election.leader.map(|l| l.to_string()),
        "fencing_token": fencing_token(election),
        "voted_for": election.vote.map(|v| v.to_string()),
        "auto_election": election.auto_election,
        "manual_override": election.manual_override.is_some(),
        "pinned_leader": election.manual_override.map(|l| l.to_string()),
        "quarantined": election.quarantined,
        "abstaining": election.abstaining,
        "abstaining_until_heard": election
            .abstaining_until_heard
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        "incarnation": status.incarnation,
        "authenticated": status.authenticated,
        "peers": status.peers.iter().map(|p| peer_json(p, now)).collect::<Vec<_>>(),
        "dongle": status.dongle.as_ref().map(dongle_json),
    })
}

/// The ESP-NOW dongle's state as the status answer shows it.
fn dongle_json(report: &crate::transport::DongleReport) -> Value {
    let status = &report.status;
    json!({
        "port": report.port,
        "connected": status.connected,
        "mac": status.info.as_ref().map(|info| info.mac.to_string()),
        "firmware": status.info.as_ref().map(|info| info.firmware.clone()),
        "channel": status.info.as_ref().map(|info| info.channel),
        "max_payload": status.info.as_ref().map(|info| info.max_payload),
        "credits_free": status.credits_free,
        "queue_len": status.queue_len,
        "tx_frames": status.tx_frames,
        "rx_frames": status.rx_frames,
        "tx_failures": status.tx_failures,
        "crc_errors": status.crc_errors,
        "dropped_from_queue": status.dropped_droppable,
        "refused": status.refused,
        "reconnects": status.reconnects,
        "last_error": status.last_error,
        "rssi_dbm": report
            .rssi
            .iter()
            .map(|(peer, rssi)| (peer.to_string(), json!((rssi * 10.0).round() / 10.0)))
            .collect::<serde_json::Map<String, Value>>(),
    })
}

/// One history record as JSON.
pub fn history_json(record: &HistoryRecord) -> Value {
    json!({
        "term": record.term,
        "leader": record.leader.map(|l| l.to_string()),
        "cause": record.cause.label(),
        "at_unix_ms": record.at_unix_ms,
    })
}

async fn status(state: Data<AdminState>) -> HttpResponse {
    match state.node.status().await {
        Ok(status) => HttpResponse::Ok().json(status_json(&status, state.node.now())),
        Err(err) => unavailable(&err),
    }
}

async fn peers(state: Data<AdminState>) -> HttpResponse {
    match state.node.peers().await {
        Ok(peers) => {
            let now = state.node.now();
            HttpResponse::Ok().json(json!({
                "peers": peers.iter().map(|p| peer_json(p, now)).collect::<Vec<_>>(),
            }))
        }
        Err(err) => unavailable(&err),
    }
}

async fn history(state: Data<AdminState>) -> HttpResponse {
    match state.node.history().await {
        Ok(history) => HttpResponse::Ok().json(json!({
            "history": history.iter().map(history_json).collect::<Vec<_>>(),
        })),
        Err(err) => unavailable(&err),
    }
}

async fn events(state: Data<AdminState>) -> HttpResponse {
    let subscription = state.node.subscribe("admin_events");
    let stream = futures_util::stream::unfold(subscription, |mut subscription| async move {
        let chunk = match tokio::time::timeout(KEEPALIVE, subscription.recv()).await {
            Err(_) => ": keepalive\n\n".to_owned(),
            Ok(None) => return None,
            Ok(Some(Received::Event(event))) => {
                format!("event: {}\ndata: {}\n\n", event.name(), event.to_json())
            }
            Ok(Some(Received::Lagged(missed))) => {
                format!("event: lagged\ndata: {{\"missed\":{missed}}}\n\n")
            }
        };
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), subscription))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(stream)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetLeaderRequest {
    peer_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AutoElectionRequest {
    enabled: bool,
}

fn outcome_label(outcome: CommandOutcome) -> (&'static str, Option<PeerId>) {
    match outcome {
        CommandOutcome::Applied => ("applied", None),
        CommandOutcome::Forwarded { to } => ("forwarded_to_leader", Some(to)),
        CommandOutcome::TransferStarted { target } => ("transfer_started", Some(target)),
        CommandOutcome::SteppedDown => ("stepped_down", None),
    }
}

/// Runs a command and answers with its outcome and the fencing token after it.
async fn run_command(state: &AdminState, command: Command) -> HttpResponse {
    let outcome = match state.node.command(command).await {
        Ok(outcome) => outcome,
        Err(err) => return unavailable(&err),
    };
    let status = match state.node.election_status().await {
        Ok(status) => status,
        Err(err) => return unavailable(&err),
    };
    match outcome {
        Ok(outcome) => {
            let (label, peer) = outcome_label(outcome);
            HttpResponse::Ok().json(json!({
                "outcome": label,
                "peer_id": peer.map(|p| p.to_string()),
                "term": status.term,
                "leader": status.leader.map(|l| l.to_string()),
                "fencing_token": fencing_token(&status),
            }))
        }
        Err(err) => {
            let code = match err {
                RaftError::NotLeader { .. } => StatusCode::CONFLICT,
                RaftError::Quarantined | RaftError::Abstaining => StatusCode::SERVICE_UNAVAILABLE,
                RaftError::NotAVoter(_)
                | RaftError::UnknownPeer(_)
                | RaftError::InvalidConfig(_) => StatusCode::BAD_REQUEST,
            };
            HttpResponse::build(code).json(json!({
                "error": err.to_string(),
                "term": status.term,
                "leader": status.leader.map(|l| l.to_string()),
                "fencing_token": fencing_token(&status),
            }))
        }
    }
}

async fn set_leader(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<SetLeaderRequest>,
) -> HttpResponse {
    if !authorized(&state, &request) {
        return unauthorized();
    }
    match PeerId::new(&body.peer_id) {
        Ok(peer) => run_command(&state, Command::SetLeader(peer)).await,
        Err(err) => error_response(StatusCode::BAD_REQUEST, &format!("peer_id: {err}")),
    }
}

async fn resign(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if !authorized(&state, &request) {
        return unauthorized();
    }
    run_command(&state, Command::Resign).await
}

async fn auto_election(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<AutoElectionRequest>,
) -> HttpResponse {
    if !authorized(&state, &request) {
        return unauthorized();
    }
    run_command(&state, Command::EnableAutoElection(body.enabled)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secre"));
    }
}
