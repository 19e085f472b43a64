//! The admin HTTP API (CB-3, CB-5, CB-6, LOG-1, LOG-8) and the Prometheus endpoint (CB-4).
//!
//! The API's requests, answers, error codes and events are the types of `conclave-api`
//! (re-exported here as [`api`]), which the CLI and the Rust façade share; `docs/api.md`
//! documents every endpoint and `docs/openapi.json` describes them. The election's endpoints
//! are in `election_api.rs`, the replicated log's (`/v1/kv`, `/v1/jobs`, `/v1/log`) in
//! `log_api.rs` on top of [`crate::log_service`], the log cluster's membership (`/v1/members`,
//! MEMB-3) in `members_api.rs`, sessions (`/v1/sessions`, SESS-1) in `sessions_api.rs`, the
//! event streams in `streams.rs`.
//!
//! # One contract for every answer
//!
//! - Every error is `{"error": CODE, "message": …}` with the status of its code; the web
//!   framework's own texts never reach a client: bodies and queries are read here, a body
//!   that is not `application/json` is 415 `unsupported_media_type`, one that is not the
//!   object the endpoint takes 400 `bad_json`, a query that does not parse 400 `bad_query`, a
//!   method a path does not take 405 `method_not_allowed` with `Allow`, a path that is no
//!   endpoint 404 `no_such_endpoint`.
//! - Every JSON answer carries the fencing token `(term, leader)` (CB-5), errors included,
//!   but `/health`, a 401 and a 503 `unavailable` (the election has stopped).
//! - A node that does not lead answers a write, a linearizable read or `leader resign` with
//!   421 `not_leader`, naming the leader and, when `admin.peer_urls` lists it, its admin API
//!   in `leader_admin_url` and `Location`; the CLI follows it.
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
//! With tokens set (`admin.token_file`, `admin.tokens_file`: SEC-2, issue 26 item 2,
//! `tokens.rs`) every mutation needs `Authorization: Bearer <token>` of a role that covers it,
//! checked before its body is looked at (a malformed body is 400 only with such a token):
//!
//! - `read`: every GET, the event stream and watches;
//! - `write`: also the key-value store's, the job queue's (add, claim, ack, nack, retry) and
//!   the sessions' mutations; a write token limited to key prefixes or queues only those keys
//!   and those queues' jobs (an ack, nack or retry by its job's queue);
//! - `admin`: everything: `leader set`, `leader resign`, `auto-election`, membership changes,
//!   job purges, and `GET /v1/snapshot`, the whole store at once.
//!
//! No token, or one nobody has, is 401 `unauthorized`; a known token whose role or limits do
//! not cover the request is 403 `forbidden`, naming the token and the role needed, never the
//! secret. Both are counted in `conclave_admin_refused_total`. When `admin.listen` is not a
//! loopback address (which the configuration only allows with a token) every endpoint but
//! `/health` needs a token, reads included: the peer table and the event stream are not for
//! strangers, and an unauthenticated stream is what once took a node to its descriptor limit.
//! With tokens set, every mutation's answer is logged with the method, the path, the token's
//! name and the outcome.
//!
//! # Bounds
//!
//! The API cannot take the node's file descriptors from the WAL, the sockets and the hooks:
//!
//! - At start `conclave run` raises the soft `RLIMIT_NOFILE` to the hard limit and logs both;
//!   [`limits::fit_bounds`] then lowers the bounds below, with a warning, if the limit leaves
//!   fewer than [`limits::RESERVED_DESCRIPTORS`] for everything else.
//! - At most `admin.max_connections` connections are served. Up to
//!   [`limits::OVERFLOW_CONNECTIONS`] more are accepted only to be answered 503
//!   `too_many_connections` (naming the key) and closed; one past those is closed as soon as
//!   it is accepted, unanswered. A connection that sends no request is closed after 5 s.
//! - At most `admin.max_event_streams` (fewer than `max_connections`, so status and commands
//!   always find room) event streams are open; one more is answered 503 `too_many_streams`. A
//!   stream whose reader has gone frees its place at the next write, a keep-alive comment
//!   every 15 s at the latest.
//! - A request body is read up to [`MAX_BODY_BYTES`]; a larger one is 413 `too_large`.
//! - Every refusal counts in `conclave_admin_refused_total{reason}`; the open connections and
//!   streams are the gauges `conclave_admin_connections` and `conclave_admin_event_streams`.
//! - The metrics endpoint serves [`limits::METRICS_MAX_CONNECTIONS`] connections at once,
//!   whatever the admin API's are doing: the two share one worker thread, not their places.
//!   Only when both are full does the server stop accepting, and the kernel queues at most
//!   [`limits::LISTEN_BACKLOG`] more on each.
//!
//! # A request whose client has gone ends
//!
//! A connection the client closes while its request runs ends that request: its handler is
//! dropped, whatever it waited for. A claim waiting for a job (`wait_ms`) stops waiting at
//! once, rather than take a job for a worker that is gone. (A client that only closes its
//! sending side to wait for the answer is cut off too; HTTP clients do not do that.)
//!
//! # A mutation whose client has gone never runs
//!
//! A request can wait in the kernel's backlog, or behind a full server, long after its client
//! gave up: a resign that runs half a minute late, unasked, is worse than none. So a client
//! sends its deadline with every mutation, and the node refuses, with 503 `deadline_passed`
//! and `conclave_admin_refused_total{reason="deadline"}`, to start a mutation whose deadline
//! has passed: nothing is changed. `leader set` waits at most until the deadline too. The
//! deadline comes in one of two headers:
//!
//! - `conclave-timeout-ms: <ms>`, what the CLI sends: the time the client still waits,
//!   counted by the node from when it reads the request. Only the node's clock is read, so a
//!   gateway whose clock is wrong (device fleets often run without NTP) still takes every
//!   command; the time a request spent in the kernel's backlog is not counted, and the small
//!   accept backlog keeps that short.
//! - `conclave-deadline: <Unix time in ms>`: the moment the client stops waiting, on its
//!   clock, compared with the node's, so the two must agree to well within the timeout.
//!
//! A request with neither is carried out whenever it arrives.

/// Runs the steps of a handler that may each fail with an error answer.
macro_rules! attempt {
    ($state:expr, $request:expr, $step:expr) => {
        match $step {
            Ok(value) => value,
            Err(error) => return $state.error_response(&$request, error).await,
        }
    };
}

/// Refuses the request when it may not run (token, role, bounds, deadline); otherwise gives
/// who it comes from.
macro_rules! admit {
    ($state:expr, $request:expr, $access:expr) => {
        match $state.refuse(&$request, $access) {
            Ok(caller) => caller,
            Err(refusal) => return $state.error_response(&$request, refusal).await,
        }
    };
}

/// Refuses, with 403 `forbidden`, a step of a handler that the caller's limits do not cover.
macro_rules! within {
    ($state:expr, $request:expr, $check:expr) => {
        if let Err(message) = $check {
            return $state
                .error_response(&$request, $state.forbidden(message))
                .await;
        }
    };
}

mod election_api;
mod limits;
mod listener;
mod log_api;
mod members_api;
mod sessions_api;
mod streams;
mod tokens;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::time::SystemTime;

use actix_web::dev::Extensions;
use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::web::{self, Bytes, BytesMut, Data};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse};
pub use conclave_api as api;
use conclave_api::{DEADLINE_HEADER, ErrorAnswer, ErrorCode, MAX_TIMEOUT_MS, TIMEOUT_HEADER};
use conclave_config::{AdminConfig, TokenRole};
use conclave_protocol::PeerId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

pub use self::limits::{
    AdminBounds, LISTEN_BACKLOG, METRICS_MAX_CONNECTIONS, OVERFLOW_CONNECTIONS, OpenFilesLimit,
    RESERVED_DESCRIPTORS, bind_listener, fit_bounds, open_files_soft_limit, raise_open_files_limit,
};
use self::limits::{OpenCount, Refusal, Slot};
use self::listener::{HttpsOnly, Listener, Listeners};
pub use self::tokens::AdminTokens;
use self::tokens::Caller;
use crate::events::unix_millis;
use crate::log_service::{Answer, LogService};
use crate::metrics::NodeMetrics;
use crate::node::{NodeError, NodeHandle};
use crate::tls::ListenerTls;

/// The largest request body the API reads: far above any write that fits a log entry, so
/// that what is refused for its size is refused by the log's own rule, with its message.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// How the admin API is set up: the parts of `[admin]` the routes need.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// The tokens in force (SEC-2); with any, mutations need one whose role covers them.
    pub tokens: AdminTokens,
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
            tokens: AdminTokens::new(config.tokens.clone()),
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
    service: LogService,
}

/// What a request needs before it may run (SEC-2: the role of each endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Anyone (`/health`).
    Open,
    /// Reads: a token of any role when `reads_need_token`.
    Read,
    /// Changes of keys, jobs and sessions: a `write` token (within its limits) when tokens
    /// are set, and a deadline not passed.
    Write,
    /// The operator's commands (election, membership, purges, snapshots): an `admin` token
    /// when tokens are set, and a deadline not passed.
    Admin,
}

impl Access {
    /// The role a token needs, when the request needs one at all.
    fn role(self, reads_need_token: bool) -> Option<TokenRole> {
        match self {
            Access::Open => None,
            Access::Read => reads_need_token.then_some(TokenRole::Read),
            Access::Write => Some(TokenRole::Write),
            Access::Admin => Some(TokenRole::Admin),
        }
    }

    /// Whether requests of this kind change something, and so carry a deadline and are
    /// logged. `GET /v1/snapshot` needs `admin` but changes nothing.
    fn mutates(self, request: &HttpRequest) -> bool {
        matches!(self, Access::Write | Access::Admin)
            && request.method() != actix_web::http::Method::GET
    }
}

/// Marks a mutation's request with who sent it, so that its answer's log line names them.
#[derive(Debug, Clone)]
struct Mutation {
    caller: String,
    /// Whether tokens are configured: without them there is nobody to name, and an open API's
    /// every write at INFO would only cost (a busy node commits thousands a second).
    audited: bool,
}

/// Starts the admin API on `listener` (bound beforehand with [`bind_listener`], so a busy
/// port is found before any actor starts), spawned on the current actix system.
/// With `admin.tls` it speaks HTTPS, the files read once here (a node keeps its
/// [`ListenerTls`] to reload them: [`serve_admin_with`]).
pub fn serve_admin(
    node: NodeHandle,
    listener: TcpListener,
    config: &AdminConfig,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    let tls = config
        .tls
        .as_ref()
        .map(ListenerTls::load)
        .transpose()
        .map_err(|problem| NodeError::Tls {
            section: "admin.tls",
            problem,
        })?;
    serve_admin_with(
        node,
        listener,
        config.listen,
        AdminOptions::new(config),
        tls.as_ref(),
    )
}

/// [`serve_admin`] with the options given: a node serves its own [`AdminTokens`], which a
/// reload replaces, and its own [`ListenerTls`] (ADMIN-TLS), which a reload reads again.
/// Without `tls` it speaks plain HTTP; with it, a plain-HTTP request is answered 400, naming
/// `https://` and the CA (`listener.rs`).
pub fn serve_admin_with(
    node: NodeHandle,
    listener: TcpListener,
    listen: Option<SocketAddr>,
    options: AdminOptions,
    tls: Option<&ListenerTls>,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    HttpEndpoints::new()
        .admin(node, listener, listen, options, tls)
        .map(HttpEndpoints::serve)
}

/// Starts the Prometheus endpoint (`GET /metrics`) on `listener`, over `tls` when given
/// (ADMIN-TLS).
pub fn serve_metrics(
    metrics: NodeMetrics,
    listener: TcpListener,
    listen: Option<SocketAddr>,
    tls: Option<&ListenerTls>,
) -> Result<actix_web::dev::ServerHandle, NodeError> {
    HttpEndpoints::new()
        .metrics(metrics, listener, listen, tls)
        .map(HttpEndpoints::serve)
}

/// The admin API and the metrics endpoint of a node, served together by one HTTP worker
/// thread (an idle worker costs wake-ups: `listener.rs`), each on its own listener with its
/// own TLS and its own bound on connections.
pub struct HttpEndpoints(Listeners);

impl Default for HttpEndpoints {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpEndpoints {
    /// Nothing served yet.
    pub fn new() -> Self {
        Self(Listeners::new())
    }

    /// Adds the admin API on `listener` (bound beforehand with [`bind_listener`], so a busy
    /// port is found before any actor starts); `listen` is what the configuration asked for,
    /// for the error that names it.
    pub fn admin(
        self,
        node: NodeHandle,
        listener: TcpListener,
        listen: Option<SocketAddr>,
        mut options: AdminOptions,
        tls: Option<&ListenerTls>,
    ) -> Result<Self, NodeError> {
        let addr = local_addr(&listener, "admin.listen", listen)?;
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
        self.add(
            "admin.listen",
            addr,
            listener,
            tls,
            Listener {
                routes,
                on_connect: move |extensions: &mut Extensions| {
                    extensions.insert(connections.open(max_connections));
                },
                max_connections: max_connections + OVERFLOW_CONNECTIONS,
                // SESS-3: a client that hangs up ends its request: a claim waiting for a job
                // stops waiting (and cannot take a job nobody will work on). HTTP clients do
                // not half-close a connection to wait for the answer, so none is refused an
                // answer by this.
                allow_half_closed: false,
                https_only: HttpsOnly::ADMIN,
            },
        )
    }

    /// Adds the Prometheus endpoint (`GET /metrics`) on `listener`, over `tls` when given.
    pub fn metrics(
        self,
        metrics: NodeMetrics,
        listener: TcpListener,
        listen: Option<SocketAddr>,
        tls: Option<&ListenerTls>,
    ) -> Result<Self, NodeError> {
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
        self.add(
            "metrics.listen",
            addr,
            listener,
            tls,
            Listener {
                routes,
                on_connect: |_: &mut Extensions| {},
                max_connections: METRICS_MAX_CONNECTIONS,
                // actix-web's default: a scraper is not expected to half-close.
                allow_half_closed: true,
                https_only: HttpsOnly::METRICS,
            },
        )
    }

    /// Adds `setup` on `listener`; a failure names the configuration key `what` and `addr`.
    fn add<R, C>(
        self,
        what: &'static str,
        addr: SocketAddr,
        listener: TcpListener,
        tls: Option<&ListenerTls>,
        setup: Listener<R, C>,
    ) -> Result<Self, NodeError>
    where
        R: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
        C: Fn(&mut Extensions) + Clone + Send + Sync + 'static,
    {
        self.0
            .add(listener, tls, setup)
            .map(Self)
            .map_err(|source| NodeError::Bind { what, addr, source })
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Starts serving what was added, on the current actix system. Stopping the handle
    /// stops every listener.
    pub fn serve(self) -> actix_web::dev::ServerHandle {
        let server = self.0.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        handle
    }
}

/// How long [`stop_server`] waits for an HTTP server to finish its requests (its own shutdown
/// timeout is one second) before stopping it at once.
pub const SERVER_STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(3);

/// Stops an HTTP server: gracefully, letting its requests finish, for at most
/// [`SERVER_STOP_BOUND`], then at once. Bounded because a graceful stop of actix's server can
/// wait for ever on a response still streaming (an event stream a client keeps open;
/// actix-web#2759), and a node that never finishes stopping is worse than a cut stream.
pub async fn stop_server(server: &actix_web::dev::ServerHandle) {
    if actix_rt::time::timeout(SERVER_STOP_BOUND, server.stop(true))
        .await
        .is_err()
    {
        warn!(
            "an HTTP server did not finish its requests within {SERVER_STOP_BOUND:?}; \
             stopping it at once"
        );
        let _ = actix_rt::time::timeout(SERVER_STOP_BOUND, server.stop(false)).await;
    }
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

/// The admin API's routes for `node`; what [`serve_admin`] serves, and what tests mount on
/// actix-web's test service.
pub fn admin_routes(
    node: NodeHandle,
    options: AdminOptions,
) -> impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static {
    let streams = OpenCount::new(node.metrics().clone(), "conclave_admin_event_streams");
    let service = LogService::new(node.clone(), options.peer_urls.clone());
    let state = AdminState {
        node,
        options,
        streams,
        service,
    };
    move |config: &mut web::ServiceConfig| {
        config.app_data(Data::new(state.clone()));
        election_api::routes(config);
        log_api::routes(config);
        members_api::routes(config);
        sessions_api::routes(config);
        config.default_service(web::to(no_such_endpoint));
    }
}

/// A resource at `path` whose other methods are answered 405 with `Allow: allow`.
fn resource(path: &str, allow: &'static str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(
        move |state: Data<AdminState>, request: HttpRequest| async move {
            admit!(state, request, Access::Read);
            let error = state
                .service
                .error_now(
                    ErrorCode::MethodNotAllowed,
                    format!("{} takes {allow}, not {}", request.path(), request.method()),
                )
                .await;
            let mut response = state.error_response(&request, error).await;
            if let Ok(value) = header::HeaderValue::from_str(allow) {
                response.headers_mut().insert(header::ALLOW, value);
            }
            response
        },
    ))
}

async fn no_such_endpoint(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let hint = if request.path() == "/v1/kv/" || request.path() == "/v1/kv//" {
        " (a key goes after /v1/kv/; GET /v1/kv?prefix= lists keys)"
    } else {
        " (this is conclave's admin API; docs/api.md lists its endpoints)"
    };
    let error = Box::new(ErrorAnswer::new(
        ErrorCode::NoSuchEndpoint,
        format!(
            "no such endpoint: {} {}{hint}",
            request.method(),
            request.path()
        ),
    ));
    state.error_response(&request, error).await
}

impl AdminState {
    /// Who `request` comes from, or its refusal: too many connections, a missing or unknown
    /// token (401), a token whose role does not cover it (403), a deadline passed.
    fn refuse(&self, request: &HttpRequest, access: Access) -> Result<Caller, Box<ErrorAnswer>> {
        if request.conn_data::<Slot>().is_some_and(Slot::over) {
            return Err(self.busy(
                Refusal::Connections,
                ErrorCode::TooManyConnections,
                "admin.max_connections",
                self.options.max_connections,
                "connections",
            ));
        }
        let tokens = self.options.tokens.set();
        let caller = match tokens.authenticate(bearer(request).as_bytes()) {
            Some(token) => Caller::token(token),
            None => Caller::anonymous(),
        };
        if access.mutates(request) {
            request.extensions_mut().insert(Mutation {
                caller: caller.name().to_owned(),
                audited: !tokens.is_empty(),
            });
        }
        let needed = access.role(self.options.reads_need_token);
        if let (Some(needed), false) = (needed, tokens.is_empty()) {
            match caller.role() {
                None => {
                    self.node
                        .metrics()
                        .admin_refused(Refusal::Unauthorized.label());
                    return Err(Box::new(ErrorAnswer::new(
                        ErrorCode::Unauthorized,
                        "this request needs an admin API token (Authorization: Bearer <token>; \
                         the CLI takes --token or CONCLAVE_ADMIN_TOKEN)",
                    )));
                }
                Some(role) if role < needed => {
                    return Err(self.forbidden(format!(
                        "token {:?} has role {role}; {} {} needs {needed}",
                        caller.name(),
                        request.method(),
                        request.path()
                    )));
                }
                Some(_) => {}
            }
        }
        if access.mutates(request) {
            self.deadline(request)?;
        }
        Ok(caller)
    }

    /// 403 `forbidden` with `message` (which names the token and what was needed), counted.
    fn forbidden(&self, message: String) -> Box<ErrorAnswer> {
        self.node
            .metrics()
            .admin_refused(Refusal::Forbidden.label());
        Box::new(ErrorAnswer::new(ErrorCode::Forbidden, message))
    }

    /// Whether a caller whose queues are limited may act on `job`, by the job's queue: read
    /// from this node's copy first, then linearizably (a leader elected moments ago may not
    /// have applied the claim yet). A job nobody knows is refused: its queue cannot be checked.
    async fn may_act_on_job(&self, caller: &Caller, job: u64) -> Result<(), Box<ErrorAnswer>> {
        if !caller.queues_limited() {
            return Ok(());
        }
        let mut queue = self.service.job_queue(job, true).await?;
        if queue.is_none() {
            queue = self.service.job_queue(job, false).await?;
        }
        let Some(queue) = queue else {
            return Err(self.forbidden(format!(
                "token {:?} is limited to some queues, and job {job} is not known here, so its \
                 queue cannot be checked",
                caller.name()
            )));
        };
        caller
            .may_use_queue(&format!("job {job}"), &queue)
            .map_err(|message| self.forbidden(message))
    }

    /// Logs the answer to a mutation: method, path, the token's name (never its secret) and
    /// the outcome; nothing for a read. At DEBUG rather than INFO: session keepalives, which
    /// change no replicated state and come every few seconds from every session; 401s, which
    /// name no token and which a stranger could fill the log with (they are counted); and
    /// every mutation of an API without tokens, which has nobody to name.
    fn log_mutation(&self, request: &HttpRequest, status: u16, code: Option<ErrorCode>) {
        let Some(mutation) = request.extensions().get::<Mutation>().cloned() else {
            return;
        };
        let outcome = code.map_or_else(|| status.to_string(), |code| format!("{status} {code}"));
        let (method, path, token) = (request.method(), request.path(), &mutation.caller);
        if !mutation.audited
            || path.ends_with("/keepalive")
            || code == Some(ErrorCode::Unauthorized)
        {
            debug!(%method, path, token, outcome, "admin mutation");
        } else {
            info!(%method, path, token, outcome, "admin mutation");
        }
    }

    /// 503 for a request past a bound, counted; the connection is closed after it.
    fn busy(
        &self,
        refusal: Refusal,
        code: ErrorCode,
        key: &str,
        bound: usize,
        what: &str,
    ) -> Box<ErrorAnswer> {
        self.node.metrics().admin_refused(refusal.label());
        let mut answer = ErrorAnswer::new(
            code,
            format!(
                "too many admin {what}: {key} = {bound} are open; try again later (refusals are \
                 counted in conclave_admin_refused_total)"
            ),
        );
        answer.bound = Some(key.to_owned());
        Box::new(answer)
    }

    /// The client's deadline (Unix ms on this node's clock) of a mutation, when it set one:
    /// `Err` with the refusal when it is malformed or has passed. A `conclave-timeout-ms`
    /// counts from now, so only this node's clock is read; a `conclave-deadline` is the
    /// client's clock, compared with this one's.
    fn deadline(&self, request: &HttpRequest) -> Result<Option<u64>, Box<ErrorAnswer>> {
        let now = unix_millis(SystemTime::now());
        if let Some(value) = request.headers().get(TIMEOUT_HEADER) {
            return match value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .filter(|timeout| *timeout <= MAX_TIMEOUT_MS)
            {
                Some(timeout) => Ok(Some(now.saturating_add(timeout))),
                None => Err(Box::new(ErrorAnswer::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "the {TIMEOUT_HEADER} header must be the milliseconds the client still \
                         waits, at most {MAX_TIMEOUT_MS}, found {value:?}"
                    ),
                ))),
            };
        }
        let Some(value) = request.headers().get(DEADLINE_HEADER) else {
            return Ok(None);
        };
        let Some(deadline) = value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
        else {
            return Err(Box::new(ErrorAnswer::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the {DEADLINE_HEADER} header must be a Unix time in milliseconds, found \
                     {value:?}"
                ),
            )));
        };
        if now > deadline {
            self.node.metrics().admin_refused(Refusal::Deadline.label());
            return Err(Box::new(ErrorAnswer::new(
                ErrorCode::DeadlinePassed,
                format!(
                    "the request's deadline passed {} ms before this node could run it, so the \
                     client has stopped waiting; nothing was changed (if every request is \
                     refused so, this machine's clock and the client's disagree: send \
                     {TIMEOUT_HEADER} instead, as the CLI does)",
                    now - deadline
                ),
            )));
        }
        Ok(Some(deadline))
    }

    /// The admin URL of `peer`, when `admin.peer_urls` or the replicated configuration
    /// (MEMB-3) names it.
    fn admin_url(&self, peer: Option<PeerId>) -> Option<String> {
        peer.and_then(|peer| self.service.admin_urls().get(&peer))
    }

    /// The HTTP answer of `error`: its status, this node's id and the fencing token (read now
    /// if the error does not carry it yet), and the headers its code calls for.
    async fn error_response(
        &self,
        request: &HttpRequest,
        mut error: Box<ErrorAnswer>,
    ) -> HttpResponse {
        if error.node_id.is_none() {
            error.node_id = Some(self.node.node_id().to_string());
        }
        let fenced = !matches!(
            error.error,
            ErrorCode::Unauthorized | ErrorCode::Unavailable
        );
        if fenced && error.fencing.is_none() {
            if let Some(fencing) = self.service.fencing().await {
                error = Box::new(error.with_fencing(fencing));
            }
        }
        let status =
            StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = HttpResponse::build(status);
        match error.error {
            ErrorCode::Unauthorized => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            ErrorCode::TooManyConnections => {
                response.force_close();
            }
            ErrorCode::NotLeader => {
                if let Some(url) = &error.leader_admin_url {
                    let base = url.trim_end_matches('/');
                    let target = match request.uri().query() {
                        Some(query) => format!("{base}{}?{query}", request.path()),
                        None => format!("{base}{}", request.path()),
                    };
                    response.insert_header((header::LOCATION, target));
                }
            }
            _ => {}
        }
        if error.status() == 503 && error.error.is_transient() {
            response.insert_header((header::RETRY_AFTER, "1"));
        }
        self.log_mutation(request, error.status(), Some(error.error));
        response.json(error)
    }

    /// The HTTP answer of an operation: 200 with its JSON, or its error.
    async fn respond<T: Serialize>(
        &self,
        request: &HttpRequest,
        answer: Answer<T>,
    ) -> HttpResponse {
        match answer {
            Ok(answer) => self.ok(request, &answer),
            Err(error) => self.error_response(request, error).await,
        }
    }

    /// 200 with `answer`'s JSON, logged when it answers a mutation.
    fn ok<T: Serialize>(&self, request: &HttpRequest, answer: &T) -> HttpResponse {
        self.log_mutation(request, 200, None);
        HttpResponse::Ok().json(answer)
    }

    /// The JSON body of `request`, as `T`: 415 when it is not `application/json`, 413 past
    /// [`MAX_BODY_BYTES`], 400 `bad_json` when it is not the object `T` is.
    async fn json_body<T: DeserializeOwned>(
        &self,
        request: &HttpRequest,
        payload: web::Payload,
    ) -> Result<T, Box<ErrorAnswer>> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        let media = content_type.split(';').next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("application/json") {
            let found = if content_type.is_empty() {
                "none".to_owned()
            } else {
                format!("{content_type:?}")
            };
            return Err(Box::new(ErrorAnswer::new(
                ErrorCode::UnsupportedMediaType,
                format!(
                    "{} {} takes a JSON body: send Content-Type: application/json (found {found})",
                    request.method(),
                    request.path()
                ),
            )));
        }
        let body = match read_body(payload).await {
            Ok(Some(body)) => body,
            Ok(None) => {
                return Err(Box::new(ErrorAnswer::new(
                    ErrorCode::TooLarge,
                    format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
                )));
            }
            Err(err) => {
                return Err(Box::new(ErrorAnswer::new(
                    ErrorCode::BadJson,
                    format!("the request body could not be read: {err}"),
                )));
            }
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Box::new(ErrorAnswer::new(
                ErrorCode::BadJson,
                format!(
                    "the body is empty: {} {} takes a JSON object",
                    request.method(),
                    request.path()
                ),
            )));
        }
        serde_json::from_slice(&body).map_err(|err| {
            Box::new(ErrorAnswer::new(
                ErrorCode::BadJson,
                format!("the body is not the JSON object this endpoint takes: {err}"),
            ))
        })
    }

    /// The query string of `request`, as `T`: 400 `bad_query` when it does not parse or names
    /// a parameter `T` does not have.
    fn query<T: DeserializeOwned>(&self, request: &HttpRequest) -> Result<T, Box<ErrorAnswer>> {
        match web::Query::<T>::from_query(request.query_string()) {
            Ok(query) => Ok(query.into_inner()),
            Err(err) => {
                let reason = match &err {
                    actix_web::error::QueryPayloadError::Deserialize(inner) => inner.to_string(),
                    other => other.to_string(),
                };
                Err(Box::new(ErrorAnswer::new(
                    ErrorCode::BadQuery,
                    format!(
                        "the query {:?} does not parse: {reason}",
                        request.query_string()
                    ),
                )))
            }
        }
    }
}

/// A body too large is still read, and dropped, up to this much, so that its client gets the
/// 413 answer on a connection left clean instead of a reset while it is still sending; a
/// larger one is answered at once and the connection closed.
const DRAIN_BODY_BYTES: usize = 16 << 20;

/// The request body, or `None` when it is larger than [`MAX_BODY_BYTES`] (what follows the
/// limit is read and dropped, up to [`DRAIN_BODY_BYTES`]).
async fn read_body(
    mut payload: web::Payload,
) -> Result<Option<Bytes>, actix_web::error::PayloadError> {
    use futures_util::StreamExt as _;
    let mut body = BytesMut::new();
    let mut seen = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk?;
        seen = seen.saturating_add(chunk.len());
        if seen <= MAX_BODY_BYTES {
            body.extend_from_slice(&chunk);
        } else if seen > DRAIN_BODY_BYTES {
            return Ok(None);
        }
    }
    Ok((seen <= MAX_BODY_BYTES).then(|| body.freeze()))
}

/// The bearer token `request` carries; empty when none.
fn bearer(request: &HttpRequest) -> &str {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("")
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
