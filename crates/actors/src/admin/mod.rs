//! The admin HTTP API (CB-3, CB-5, CB-6) and the Prometheus endpoint (CB-4).
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/health` | liveness: 200 while the process and its actors run, 503 once one stopped |
//! | GET | `/ready` | readiness: 200 when a leader is known and a quorum of voters is reachable, else 503 |
//! | GET | `/v1/status` | role, term, leader, fencing token, quorum, override, voters, peers |
//! | GET | `/v1/peers` | the peer table |
//! | GET | `/v1/history` | the leadership history with causes and times |
//! | GET | `/v1/events` | server-sent events: leader and peer changes |
//! | POST | `/v1/leader` | `{"peer_id": "gw-b", "wait_ms": 5000}`: SetLeader, optionally waiting for it |
//! | POST | `/v1/leader/resign` | the leader hands over (Yield) |
//! | POST | `/v1/auto-election` | `{"enabled": false}`, on this node |
//!
//! With `[log] enabled`, the replicated log's key-value store and job queue are served here
//! too (`/v1/kv`, `/v1/jobs`; see `log_api.rs`).
//! Requests and answers are the types of [`api`], which the CLI reads back. Every answer but
//! `/health` and a refused authentication carries the fencing token `(term, leader)`. Errors
//! are [`api::ErrorAnswer`] (`{"error": "..."}` and more) with a status that says whose fault
//! it is: 400 a bad request, 401 a missing or wrong token, 404 no such endpoint, 409 the
//! node's state does not allow it (not the leader: the answer names the leader and, when
//! `admin.peer_urls` lists it, `leader_admin_url`, where the CLI sends the request instead),
//! 503 the node cannot act now (stopped, quarantined, a bound reached, a deadline passed),
//! 504 `leader set` with `wait_ms` did not see the new leader in time.
//!
//! # Probes
//!
//! `/health` answers from the process alone (it does not wait on the election), so it suits a
//! liveness probe or a systemd watchdog script: 200 `{"status": "ok"}`, or 503
//! `{"status": "stopped"}` once an actor has stopped (the WAL failed; the node halts). It needs
//! no token, ever. `/ready` suits a load balancer that must send traffic only to a node of a
//! working cluster: 200 when this node knows a leader and reaches a quorum of the voters (itself
//! included), 503 with `reason` otherwise. Neither changes anything.
//!
//! # Who may call what
//!
//! With `admin.token_file` set, every POST needs `Authorization: Bearer <token>` and is refused
//! with 401 otherwise, before its body is looked at (a malformed body is 400 only with the
//! token). When `admin.listen` is not a loopback address (which the configuration
//! only allows with a token) every endpoint but `/health` needs the token, reads included: the
//! peer table and the event stream are not for strangers, and an unauthenticated stream is
//! what once took a node to its descriptor limit.
//!
//! # Bounds (item 4 of issue 8)
//!
//! The API cannot take the node's file descriptors from the WAL, the sockets and the hooks:
//!
//! - At start `conclave run` raises the soft `RLIMIT_NOFILE` to the hard limit and logs both;
//!   [`limits::fit_bounds`] then lowers the bounds below, with a warning, if the limit leaves
//!   fewer than [`limits::RESERVED_DESCRIPTORS`] for everything else.
//! - At most `admin.max_connections` connections are served. Up to
//!   [`limits::OVERFLOW_CONNECTIONS`] more are accepted only to be answered 503 (naming the
//!   key) and closed; past those the server stops accepting, and the kernel queues at most
//!   [`limits::LISTEN_BACKLOG`] more. A connection that sends no request is closed after 5 s.
//! - At most `admin.max_event_streams` (fewer than `max_connections`, so status and commands
//!   always find room) event streams are open; one more is answered 503 naming the key. A
//!   stream whose reader has gone frees its place at the next write, a keep-alive comment
//!   every 15 s at the latest.
//! - Every refusal counts in `conclave_admin_refused_total{reason}`; the open connections and
//!   streams are the gauges `conclave_admin_connections` and `conclave_admin_event_streams`.
//! - The metrics endpoint serves [`limits::METRICS_MAX_CONNECTIONS`] connections at once.
//!
//! # A mutation whose client has gone never runs
//!
//! A request can wait in the kernel's backlog, or behind a full server, long after its client
//! gave up: a resign that runs half a minute late, unasked, is worse than none. So a client
//! sends its deadline with every mutation, in the header `conclave-deadline: <Unix time in
//! ms>` (the CLI sets it to the moment it stops waiting), and the node refuses, with 503 and
//! `conclave_admin_refused_total{reason="deadline"}`, to start a mutation whose deadline has
//! passed by its own clock: nothing is changed. `leader set` waits at most until the deadline
//! too. The deadline compares two machines' clocks, so they must agree to well within the
//! client's timeout (5 s by default; NTP does far better); a request without the header is
//! carried out whenever it arrives, as before. The small accept backlog keeps such waits short
//! in the first place.

pub mod api;
mod limits;
mod log_api;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, SystemTime};

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::web::{self, Bytes, Data, Json};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use conclave_config::AdminConfig;
use conclave_core::PeerInfo;
use conclave_core::election::{Command, CommandOutcome, ElectionError, ElectionStatus, ModeStatus};
use conclave_protocol::PeerId;
use conclave_storage::HistoryRecord;
use tracing::{info, warn};

use self::api::{
    AutoElectionRequest, CommandAnswer, DEADLINE_HEADER, DongleAnswer, ErrorAnswer, Fencing,
    FollowerAnswer, GossipAnswer, HealthAnswer, HistoryAnswer, HistoryEntry, LogAnswer, Outcome,
    PeerAnswer, PeersAnswer, PriorityAnswer, ReadyAnswer, SetLeaderRequest, StaticAnswer,
    StatusAnswer, UnansweredAnswer,
};
pub use self::limits::{
    AdminBounds, LISTEN_BACKLOG, METRICS_MAX_CONNECTIONS, OVERFLOW_CONNECTIONS, OpenFilesLimit,
    RESERVED_DESCRIPTORS, bind_listener, fit_bounds, open_files_soft_limit, raise_open_files_limit,
};
use self::limits::{OpenCount, Refusal, Slot};
use crate::events::{Received, unix_millis};
use crate::metrics::NodeMetrics;
use crate::node::{NodeError, NodeHandle, NodeStatus};

/// How often the event stream sends a comment line so proxies keep it open, and so a stream
/// whose reader has gone is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// How often `leader set` with `wait_ms` looks whether the new leader leads.
const WAIT_POLL: Duration = Duration::from_millis(10);

/// How the admin API is set up: the parts of `[admin]` the routes need.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// The bearer token; mutations need it when set.
    pub token: Option<String>,
    /// Whether reads need the token too (`admin.listen` is not loopback).
    pub reads_need_token: bool,
    /// `admin.max_connections`, as fitted to the descriptors there are.
    pub max_connections: usize,
    /// `admin.max_event_streams`, as fitted.
    pub max_event_streams: usize,
    /// `admin.peer_urls`.
    pub peer_urls: BTreeMap<PeerId, String>,
}

impl AdminOptions {
    /// The options of `config`, with its bounds as configured.
    pub fn new(config: &AdminConfig) -> Self {
        Self {
            token: config.token.clone(),
            reads_need_token: config
                .listen
                .is_some_and(|listen| !listen.ip().to_canonical().is_loopback()),
            max_connections: config.max_connections,
            max_event_streams: config.max_event_streams,
            peer_urls: config.peer_urls.clone(),
        }
    }
}

#[derive(Clone)]
struct AdminState {
    node: NodeHandle,
    options: AdminOptions,
    streams: OpenCount,
}

/// What a request needs before it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Anyone (`/health`).
    Open,
    /// Reads: the token when `reads_need_token`.
    Read,
    /// Mutations: the token when one is set, and a deadline not passed.
    Mutate,
}

/// Starts the admin API on `listener` (bound beforehand with [`bind_listener`], so a busy
/// port is found before any actor starts), spawned on the current actix system.
pub fn serve_admin(
    node: NodeHandle,
    listener: TcpListener,
    config: &AdminConfig,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    let addr = local_addr(&listener, "admin.listen", config.listen)?;
    let mut options = AdminOptions::new(config);
    let (bounds, warning) = fit_bounds(
        AdminBounds {
            max_connections: options.max_connections,
            max_event_streams: options.max_event_streams,
        },
        open_files_soft_limit(),
    );
    if let Some(warning) = warning {
        warn!("{warning}");
    }
    options.max_connections = bounds.max_connections;
    options.max_event_streams = bounds.max_event_streams;
    let metrics = node.metrics().clone();
    metrics.preregister_admin(&Refusal::ALL.map(Refusal::label));
    let connections = OpenCount::new(metrics, "conclave_admin_connections");
    let max_connections = options.max_connections;
    let routes = admin_routes(node, options);
    let server = HttpServer::new(move || App::new().configure(routes.clone()))
        .workers(1)
        .max_connections(max_connections + OVERFLOW_CONNECTIONS)
        .on_connect(move |_, extensions| {
            extensions.insert(connections.open(max_connections));
        })
        // A stopping node finishes requests in flight but does not wait long for idle
        // connections (an event-stream reader keeps one open).
        .shutdown_timeout(1)
        .disable_signals()
        .listen(listener)
        .map_err(|source| NodeError::Bind {
            what: "admin.listen",
            addr,
            source,
        })?
        .run();
    Ok(spawn_server(server))
}

/// Starts the Prometheus endpoint (`GET /metrics`) on `listener`.
pub fn serve_metrics(
    metrics: NodeMetrics,
    listener: TcpListener,
    listen: Option<SocketAddr>,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    let addr = local_addr(&listener, "metrics.listen", listen)?;
    let routes = move |config: &mut web::ServiceConfig| {
        let metrics = metrics.clone();
        config
            .route(
                "/metrics",
                web::get().to(move || {
                    let body = metrics.render();
                    async move {
                        HttpResponse::Ok()
                            .content_type("text/plain; version=0.0.4")
                            .body(body)
                    }
                }),
            )
            // Someone who points the CLI here instead of at the admin API learns so.
            .default_service(web::to(|| async {
                HttpResponse::NotFound().content_type("text/plain").body(
                    "this is conclave's Prometheus endpoint: GET /metrics; the admin API \
                     listens on admin.listen\n",
                )
            }));
    };
    let server = HttpServer::new(move || App::new().configure(routes.clone()))
        .workers(1)
        .max_connections(METRICS_MAX_CONNECTIONS)
        // A Prometheus scraper keeps its connection open; a stopping node does not wait.
        .shutdown_timeout(1)
        .disable_signals()
        .listen(listener)
        .map_err(|source| NodeError::Bind {
            what: "metrics.listen",
            addr,
            source,
        })?
        .run();
    Ok(spawn_server(server))
}

fn local_addr(
    listener: &TcpListener,
    what: &'static str,
    configured: Option<SocketAddr>,
) -> Result<SocketAddr, NodeError> {
    listener.local_addr().map_err(|source| NodeError::Bind {
        what,
        addr: configured.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        source,
    })
}

/// Spawns a running server on the current actix system.
fn spawn_server(server: actix_web::dev::Server) -> actix_web::dev::ServerHandle {
    let handle = server.handle();
    actix_rt::spawn(server);
    handle
}

/// The admin API's routes for `node`; what [`serve_admin`] serves, and what tests mount on
/// actix-web's test service.
pub fn admin_routes(
    node: NodeHandle,
    options: AdminOptions,
) -> impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static {
    let streams = OpenCount::new(node.metrics().clone(), "conclave_admin_event_streams");
    let state = AdminState {
        node,
        options,
        streams,
    };
    move |config: &mut web::ServiceConfig| {
        config
            .app_data(Data::new(state.clone()))
            .app_data(web::JsonConfig::default().error_handler(|err, request| {
                // The body is read before the handler runs: a request that may not mutate is
                // refused as such (401 without the token, 503 past a bound) before anything
                // about its body is said, so a client without the token learns nothing of
                // what the API accepts.
                let refusal = request
                    .app_data::<Data<AdminState>>()
                    .and_then(|state| state.refuse(request, Access::Mutate));
                let response = refusal.unwrap_or_else(|| {
                    error_response(StatusCode::BAD_REQUEST, ErrorAnswer::new(err.to_string()))
                });
                actix_web::error::InternalError::from_response(err, response).into()
            }))
            // A path or query that does not parse is a bad request, said in JSON like every
            // other error of this API.
            .app_data(web::PathConfig::default().error_handler(|err, _| {
                let response = error_response(
                    StatusCode::BAD_REQUEST,
                    ErrorAnswer::new(format!("bad path: {err}")),
                );
                actix_web::error::InternalError::from_response(err, response).into()
            }))
            .app_data(web::QueryConfig::default().error_handler(|err, _| {
                let response = error_response(
                    StatusCode::BAD_REQUEST,
                    ErrorAnswer::new(format!("bad query: {err}")),
                );
                actix_web::error::InternalError::from_response(err, response).into()
            }))
            .route("/health", web::get().to(health))
            .route("/ready", web::get().to(ready))
            .route("/v1/status", web::get().to(status))
            .route("/v1/peers", web::get().to(peers))
            .route("/v1/history", web::get().to(history))
            .route("/v1/events", web::get().to(events))
            .route("/v1/leader", web::post().to(set_leader))
            .route("/v1/leader/resign", web::post().to(resign))
            .route("/v1/auto-election", web::post().to(auto_election))
            .configure(log_api::routes)
            .default_service(web::to(not_found));
    }
}

fn error_response(status: StatusCode, answer: ErrorAnswer) -> HttpResponse {
    HttpResponse::build(status).json(answer)
}

fn unavailable(err: &NodeError) -> HttpResponse {
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorAnswer::new(err.to_string()),
    )
}

async fn not_found(request: HttpRequest) -> HttpResponse {
    error_response(
        StatusCode::NOT_FOUND,
        ErrorAnswer::new(format!(
            "no such endpoint: {} {} (this is conclave's admin API; see `conclave --help`)",
            request.method(),
            request.path()
        )),
    )
}

impl AdminState {
    /// The answer refusing `request`, or `None` when it may run.
    fn refuse(&self, request: &HttpRequest, access: Access) -> Option<HttpResponse> {
        if request.conn_data::<Slot>().is_some_and(Slot::over) {
            return Some(self.busy(
                Refusal::Connections,
                "admin.max_connections",
                self.options.max_connections,
                "connections",
            ));
        }
        let needs_token = match access {
            Access::Open => false,
            Access::Read => self.options.reads_need_token,
            Access::Mutate => true,
        };
        if needs_token && !self.authorized(request) {
            return Some(unauthorized());
        }
        if access == Access::Mutate {
            if let Err(refusal) = self.deadline(request) {
                return Some(refusal);
            }
        }
        None
    }

    /// 503 for a request past a bound, counted; the connection is closed after it.
    fn busy(&self, refusal: Refusal, key: &str, bound: usize, what: &str) -> HttpResponse {
        self.node.metrics().admin_refused(refusal.label());
        let mut answer = ErrorAnswer::new(format!(
            "too many admin {what}: {key} = {bound} are open; try again later (refusals are \
             counted in conclave_admin_refused_total)"
        ));
        answer.bound = Some(key.to_owned());
        answer.node_id = Some(self.node.node_id().to_string());
        HttpResponse::ServiceUnavailable()
            .force_close()
            .insert_header((header::RETRY_AFTER, "1"))
            .json(answer)
    }

    /// Whether `request` carries the configured bearer token (always, when none is set).
    fn authorized(&self, request: &HttpRequest) -> bool {
        let Some(expected) = &self.options.token else {
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

    /// The client's deadline (Unix ms) of a mutation, when it set one: `Err` with the answer
    /// when it is malformed or has passed.
    fn deadline(&self, request: &HttpRequest) -> Result<Option<u64>, HttpResponse> {
        let Some(value) = request.headers().get(DEADLINE_HEADER) else {
            return Ok(None);
        };
        let Some(deadline) = value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
        else {
            return Err(error_response(
                StatusCode::BAD_REQUEST,
                ErrorAnswer::new(format!(
                    "the {DEADLINE_HEADER} header must be a Unix time in milliseconds, found \
                     {value:?}"
                )),
            ));
        };
        let now = unix_millis(SystemTime::now());
        if now > deadline {
            self.node.metrics().admin_refused(Refusal::Deadline.label());
            let mut answer = ErrorAnswer::new(format!(
                "the request's deadline passed {} ms before this node could run it, so the \
                 client has stopped waiting; nothing was changed (if every request is refused \
                 so, this machine's clock and the client's disagree)",
                now - deadline
            ));
            answer.node_id = Some(self.node.node_id().to_string());
            return Err(error_response(StatusCode::SERVICE_UNAVAILABLE, answer));
        }
        Ok(Some(deadline))
    }

    /// The admin URL of `peer`, when `admin.peer_urls` names it.
    fn admin_url(&self, peer: Option<PeerId>) -> Option<String> {
        peer.and_then(|peer| self.options.peer_urls.get(&peer).cloned())
    }
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
        .json(ErrorAnswer::new(
            "this request needs the admin bearer token (Authorization: Bearer <token>; the CLI \
             takes --token or CONCLAVE_ADMIN_TOKEN)",
        ))
}

/// The fencing token of `status` (CB-5).
fn fencing(status: &ElectionStatus) -> Fencing {
    Fencing {
        term: status.term,
        leader: status.leader.map(|leader| leader.to_string()),
        fencing_token: status.fencing_token.map(|token| token.to_string()),
    }
}

fn peer_answer(peer: &PeerInfo, now: conclave_core::Instant) -> PeerAnswer {
    let connected = peer.status == conclave_core::PeerStatus::Connected;
    PeerAnswer {
        peer_id: peer.id.to_string(),
        status: peer.status.label().to_owned(),
        rtt_ms: peer.rtt.filter(|_| connected).map(api::rtt_millis),
        last_seen_ms_ago: u64::try_from(now.saturating_duration_since(peer.last_seen).as_millis())
            .unwrap_or(u64::MAX),
        address: peer.addr.as_str().to_owned(),
    }
}

/// Configured peer addresses that never answered, as the status and peers answers list them.
fn unanswered_answers(
    unanswered: &[(conclave_core::LinkAddr, std::time::Duration)],
) -> Vec<UnansweredAnswer> {
    unanswered
        .iter()
        .map(|(address, silent)| UnansweredAnswer {
            address: address.as_str().to_owned(),
            silent_ms: u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
        })
        .collect()
}

/// What only a mode with a quorum reports: the quorum rule (`none` without one), the votes
/// a quorum needs and the nodes that count now (0 without one), and this node's vote.
fn quorum_of(election: &ElectionStatus) -> (&'static str, usize, usize, Option<PeerId>) {
    match &election.detail {
        ModeStatus::Raft(raft) => (
            raft.quorum_mode,
            raft.quorum_size,
            raft.electorate,
            raft.vote,
        ),
        ModeStatus::Gossip(_) | ModeStatus::Priority(_) | ModeStatus::Static(_) => {
            ("none", 0, 0, None)
        }
    }
}

/// Voters this node reaches (itself included when it is one), the votes a quorum needs, and
/// why the node is not ready, if it is not.
fn readiness(status: &NodeStatus) -> (usize, usize, Option<String>) {
    let election = &status.election;
    let (quorum_mode, quorum, electorate, _) = quorum_of(election);
    let reachable = if quorum_mode == "connected" {
        electorate
    } else {
        status
            .voters
            .iter()
            .filter(|voter| {
                **voter == status.node_id
                    || status.peers.iter().any(|peer| {
                        peer.id == **voter && peer.status == conclave_core::PeerStatus::Connected
                    })
            })
            .count()
    };
    let reason = if election.quarantined {
        Some("this node's id is used by another live node; it takes no part in elections".into())
    } else if election.abstaining {
        let waiting: Vec<String> = election
            .detail
            .abstaining_until_heard()
            .iter()
            .map(ToString::to_string)
            .collect();
        Some(format!(
            "abstaining after starting without a term or vote (docs/wal.md); waiting to hear {}",
            waiting.join(", ")
        ))
    } else if election.leader.is_none() {
        Some(format!("no leader is known in term {}", election.term))
    } else if reachable < quorum {
        Some(format!(
            "reaches {reachable} of the {quorum} voters a quorum needs"
        ))
    } else {
        None
    };
    (reachable, quorum, reason)
}

/// The status answer (docs/design.md §9).
fn status_answer(
    status: &NodeStatus,
    now: conclave_core::Instant,
    peer_urls: &BTreeMap<PeerId, String>,
) -> StatusAnswer {
    let election = &status.election;
    let (reachable_voters, _, not_ready) = readiness(status);
    let (quorum, quorum_size, electorate, vote) = quorum_of(election);
    StatusAnswer {
        node_id: status.node_id.to_string(),
        cluster_id: status.cluster_id.to_string(),
        mode: election.mode.label().to_owned(),
        quorum: quorum.to_owned(),
        quorum_size,
        electorate,
        role: election.role.label().to_owned(),
        phase: election.phase.to_owned(),
        fencing: fencing(election),
        voted_for: vote.map(|vote| vote.to_string()),
        auto_election: election.auto_election,
        manual_override: election.manual_override.is_some(),
        pinned_leader: election.manual_override.map(|leader| leader.to_string()),
        quarantined: election.quarantined,
        abstaining: election.abstaining,
        abstaining_until_heard: election
            .detail
            .abstaining_until_heard()
            .iter()
            .map(ToString::to_string)
            .collect(),
        incarnation: status.incarnation,
        authenticated: status.authenticated,
        peers: status.peers.iter().map(|p| peer_answer(p, now)).collect(),
        unanswered: Vec::new(),
        dongle: status.dongle.as_ref().map(dongle_answer),
        voters: status.voters.iter().map(ToString::to_string).collect(),
        reachable_voters,
        ready: not_ready.is_none(),
        peer_admin_urls: peer_urls
            .iter()
            .map(|(peer, url)| (peer.to_string(), url.clone()))
            .collect(),
        log: match &election.detail {
            ModeStatus::Raft(raft) => raft.log.as_ref().map(|log| LogAnswer {
                last_index: raft.last_log.index,
                commit_index: log.commit,
                applied_index: log.applied,
                persisted_index: log.persisted,
                snapshot_index: log.snapshot.index,
                followers: log
                    .followers
                    .iter()
                    .map(|(peer, matched)| FollowerAnswer {
                        peer_id: peer.to_string(),
                        match_index: *matched,
                        lag: raft.last_log.index.saturating_sub(*matched),
                    })
                    .collect(),
            }),
            _ => None,
        },
        priority: match &election.detail {
            ModeStatus::Priority(priority) => Some(PriorityAnswer {
                state: priority.state.label().to_owned(),
                score: priority.score,
                battery_percent: priority.battery,
                uptime_minutes: priority.uptime_minutes,
                signal: priority.signal,
                round: priority.round,
                master_confirmed: priority.master_confirmed,
                awaiting: priority.awaiting.map(|peer| peer.to_string()),
                forced: priority.forced,
                peers: priority.peers,
            }),
            _ => None,
        },
        gossip: match &election.detail {
            ModeStatus::Gossip(gossip) => Some(GossipAnswer {
                use_leader_election: gossip.use_leader_election,
                org_leader: gossip.org_leader,
                view_size: gossip.view_size,
                yielding: gossip.yielding,
                highest_epoch_seen: gossip.highest_epoch_seen,
                ignored_outside_view: gossip.ignored_outside_view,
            }),
            _ => None,
        },
        static_leader: match &election.detail {
            ModeStatus::Static(detail) => Some(StaticAnswer {
                configured_leader: detail.configured_leader.to_string(),
                assigned_leader: detail.assigned_leader.to_string(),
                leader_reachable: detail.leader_reachable,
            }),
            _ => None,
        },
    }
}

/// The ESP-NOW dongle's state as the status answer shows it.
fn dongle_answer(report: &crate::transport::DongleReport) -> DongleAnswer {
    let status = &report.status;
    let info = status.info.as_ref();
    DongleAnswer {
        port: report.port.clone(),
        connected: status.connected,
        mac: info.map(|info| info.mac.to_string()),
        firmware: info.map(|info| info.firmware.clone()),
        channel: info.map(|info| info.channel),
        max_payload: info.map(|info| info.max_payload),
        credits_free: u64::from(status.credits_free),
        queue_len: status.queue_len as u64,
        tx_frames: status.tx_frames,
        rx_frames: status.rx_frames,
        tx_failures: status.tx_failures,
        crc_errors: status.crc_errors,
        dropped_from_queue: status.dropped_droppable,
        refused: status.refused,
        reconnects: status.reconnects,
        last_error: status.last_error.clone(),
        rssi_dbm: report
            .rssi
            .iter()
            .map(|(peer, rssi)| (peer.to_string(), (rssi * 10.0).round() / 10.0))
            .collect(),
    }
}

/// One history record as the API shows it.
fn history_entry(record: &HistoryRecord) -> HistoryEntry {
    HistoryEntry {
        term: record.term,
        leader: record.leader.map(|leader| leader.to_string()),
        cause: record.cause.label().to_owned(),
        at_unix_ms: record.at_unix_ms,
        at: api::rfc3339_utc(record.at_unix_ms),
    }
}

async fn health(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Open) {
        return refusal;
    }
    let alive = state.node.is_alive();
    let answer = HealthAnswer {
        status: if alive { "ok" } else { "stopped" }.to_owned(),
        node_id: state.node.node_id().to_string(),
    };
    if alive {
        HttpResponse::Ok().json(answer)
    } else {
        HttpResponse::ServiceUnavailable().json(answer)
    }
}

async fn ready(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let status = match state.node.status().await {
        Ok(status) => status,
        Err(err) => return unavailable(&err),
    };
    let (reachable_voters, quorum_size, reason) = readiness(&status);
    let answer = ReadyAnswer {
        ready: reason.is_none(),
        reason,
        reachable_voters,
        quorum_size,
        fencing: fencing(&status.election),
    };
    if answer.ready {
        HttpResponse::Ok().json(answer)
    } else {
        HttpResponse::ServiceUnavailable().json(answer)
    }
}

async fn status(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let (status, unanswered) = match (state.node.status().await, state.node.unanswered().await) {
        (Ok(status), Ok(unanswered)) => (status, unanswered),
        (Err(err), _) | (_, Err(err)) => return unavailable(&err),
    };
    let mut answer = status_answer(&status, state.node.now(), &state.options.peer_urls);
    answer.unanswered = unanswered_answers(&unanswered);
    HttpResponse::Ok().json(answer)
}

async fn peers(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let (peers, election, unanswered) = match (
        state.node.peers().await,
        state.node.election_status().await,
        state.node.unanswered().await,
    ) {
        (Ok(peers), Ok(election), Ok(unanswered)) => (peers, election, unanswered),
        (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => return unavailable(&err),
    };
    let now = state.node.now();
    HttpResponse::Ok().json(PeersAnswer {
        peers: peers.iter().map(|p| peer_answer(p, now)).collect(),
        unanswered: unanswered_answers(&unanswered),
        fencing: fencing(&election),
    })
}

async fn history(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let (history, election) = match (
        state.node.history().await,
        state.node.election_status().await,
    ) {
        (Ok(history), Ok(election)) => (history, election),
        (Err(err), _) | (_, Err(err)) => return unavailable(&err),
    };
    HttpResponse::Ok().json(HistoryAnswer {
        history: history.iter().map(history_entry).collect(),
        fencing: fencing(&election),
    })
}

async fn events(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let permit = state.streams.open(state.options.max_event_streams);
    if permit.over() {
        return state.busy(
            Refusal::EventStreams,
            "admin.max_event_streams",
            state.options.max_event_streams,
            "event streams",
        );
    }
    let subscription = state.node.subscribe("admin_events");
    // The permit lives as long as the stream: dropping the stream frees the place.
    let stream = futures_util::stream::unfold(
        (subscription, permit),
        |(mut subscription, permit)| async move {
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
            Some((
                Ok::<_, Infallible>(Bytes::from(chunk)),
                (subscription, permit),
            ))
        },
    );
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(stream)
}

fn outcome_answer(outcome: CommandOutcome) -> (Outcome, Option<PeerId>) {
    match outcome {
        CommandOutcome::Applied => (Outcome::Applied, None),
        CommandOutcome::Forwarded { to } => (Outcome::ForwardedToLeader, Some(to)),
        CommandOutcome::TransferStarted { target } => (Outcome::TransferStarted, Some(target)),
        CommandOutcome::SteppedDown => (Outcome::SteppedDown, None),
    }
}

/// Runs a command: the answer with its outcome and the fencing token after it, or the error
/// answer.
async fn run_command(state: &AdminState, command: Command) -> Result<CommandAnswer, HttpResponse> {
    let outcome = state
        .node
        .command(command)
        .await
        .map_err(|err| unavailable(&err))?;
    let status = state
        .node
        .election_status()
        .await
        .map_err(|err| unavailable(&err))?;
    let node_id = state.node.node_id().to_string();
    match outcome {
        Ok(outcome) => {
            let (outcome, peer) = outcome_answer(outcome);
            Ok(CommandAnswer {
                outcome,
                peer_id: peer.map(|p| p.to_string()),
                node_id,
                completed: None,
                fencing: fencing(&status),
            })
        }
        Err(err) => {
            let code = match err {
                ElectionError::NotLeader { .. }
                | ElectionError::StaticLeaderCannotResign { .. }
                | ElectionError::OrgLeaderCannotResign { .. } => StatusCode::CONFLICT,
                ElectionError::Quarantined
                | ElectionError::Abstaining
                | ElectionError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
                ElectionError::NotAVoter(_)
                | ElectionError::UnknownPeer(_)
                | ElectionError::InvalidConfig(_)
                | ElectionError::NotOffered { .. }
                | ElectionError::OtherMode { .. }
                | ElectionError::StaticModeElectsNobody => StatusCode::BAD_REQUEST,
            };
            // A verb the mode does not offer (gossip's `leader set`) is `NotOffered` (400),
            // which says so by the mode's name; a leader by configuration (static, a gossip
            // org leader) refusing `leader resign` is a conflict with this node's state (409),
            // as a follower's refusal is.
            let message = format!("{node_id}: {err}");
            let mut answer = ErrorAnswer::new(message);
            if let ElectionError::NotLeader { leader } = err {
                answer.leader_admin_url = state.admin_url(leader);
                if let (Some(leader), None) = (leader, &answer.leader_admin_url) {
                    answer.error.push_str(&format!(
                        "; send the request to {leader}'s admin API (list it in \
                         admin.peer_urls to have it named here)"
                    ));
                }
            }
            answer.node_id = Some(node_id);
            Err(error_response(code, answer.with_fencing(fencing(&status))))
        }
    }
}

async fn set_leader(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<SetLeaderRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let target = match PeerId::new(&body.peer_id) {
        Ok(target) => target,
        Err(err) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                ErrorAnswer::new(format!("peer_id {:?}: {err}", body.peer_id)),
            );
        }
    };
    // The deadline was checked by `refuse`; here it also ends the wait.
    let deadline = state.deadline(&request).ok().flatten();
    let mut answer = match run_command(&state, Command::SetLeader(target)).await {
        Ok(answer) => answer,
        Err(refusal) => return refusal,
    };
    let Some(wait_ms) = body.wait_ms else {
        return HttpResponse::Ok().json(answer);
    };
    let mut wait = Duration::from_millis(wait_ms);
    if let Some(deadline) = deadline {
        let left = deadline.saturating_sub(unix_millis(SystemTime::now()));
        wait = wait.min(Duration::from_millis(left));
    }
    match wait_for_leader(&state.node, target, wait).await {
        Ok(status) => {
            answer.completed = Some(true);
            answer.fencing = fencing(&status);
            HttpResponse::Ok().json(answer)
        }
        Err(Some(status)) => {
            let leader = status
                .leader
                .map_or_else(|| "unknown".to_owned(), |leader| leader.to_string());
            let mut refusal = ErrorAnswer::new(format!(
                "{target} did not take the lead within {} ms: the leader is {leader} in term {} \
                 (is {target} running and connected? `conclave peers` shows what this node \
                 hears)",
                wait.as_millis(),
                status.term
            ));
            refusal.node_id = Some(state.node.node_id().to_string());
            error_response(
                StatusCode::GATEWAY_TIMEOUT,
                refusal.with_fencing(fencing(&status)),
            )
        }
        Err(None) => unavailable(&NodeError::Stopped),
    }
}

/// Waits (at most `wait`) until this node sees `target` lead; the election status then, or
/// at the end of the wait (`None` if the node stopped).
async fn wait_for_leader(
    node: &NodeHandle,
    target: PeerId,
    wait: Duration,
) -> Result<ElectionStatus, Option<ElectionStatus>> {
    let end = actix::clock::Instant::now() + wait;
    loop {
        let status = node.election_status().await.map_err(|_| None)?;
        if status.leader == Some(target) {
            return Ok(status);
        }
        if actix::clock::Instant::now() >= end {
            return Err(Some(status));
        }
        actix::clock::sleep(WAIT_POLL).await;
    }
}

async fn resign(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    match run_command(&state, Command::Resign).await {
        Ok(answer) => HttpResponse::Ok().json(answer),
        Err(refusal) => refusal,
    }
}

async fn auto_election(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<AutoElectionRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    match run_command(&state, Command::EnableAutoElection(body.enabled)).await {
        Ok(answer) => HttpResponse::Ok().json(answer),
        Err(refusal) => refusal,
    }
}

/// Logs the open-files limit as [`raise_open_files_limit`] left it.
pub fn log_open_files_limit(limit: &std::io::Result<OpenFilesLimit>) {
    let show = |value: Option<u64>| value.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
    match limit {
        Ok(limit) => info!(
            soft_before = %show(limit.before),
            soft = %show(limit.soft),
            hard = %show(limit.hard),
            "open-files limit"
        ),
        Err(err) => warn!(
            "cannot raise the open-files limit (RLIMIT_NOFILE) to the hard limit: {err}; the \
             admin API's bounds are fitted to the current one"
        ),
    }
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
