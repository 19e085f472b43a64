//! The replicated log's client API (LOG-1, LOG-5..8): the key-value store and the job queue
//! over HTTP and JSON, on the admin listener.
//!
//! | method | path | what |
//! |---|---|---|
//! | PUT | `/v1/kv/{key}` | `{"value", "if_revision"?, "if_value"?, "request_id"?}` → 200 `{"key", "revision", "previous"?}`; a failed compare → 412 with the key as it is |
//! | GET | `/v1/kv/{key}` | 200 `{"key", "value", "revision", "create_revision", "version"}`, 404 absent |
//! | DELETE | `/v1/kv/{key}` | `?if_revision=N&request_id=ID` → 200 `{"key", "revision"}`, 404 absent, 412 a failed compare |
//! | GET | `/v1/kv?prefix=P` | 200 `{"revision", "items": [...]}` |
//! | POST | `/v1/jobs` | `{"payload", "queue"?, "max_attempts"?, "request_id"?}` → 200 `{"job"}` |
//! | POST | `/v1/jobs/claim` | `{"worker", "queue"?, "lease_ms"?, "request_id"?}` → 200 the job, 404 none ready |
//! | POST | `/v1/jobs/{id}/ack` | `{"worker", "request_id"?}` → 200; 409 when the worker does not hold it |
//! | POST | `/v1/jobs/{id}/nack` | `{"worker", "reason"?, "request_id"?}` → 200 requeued or dead-lettered; 409 not held |
//! | POST | `/v1/jobs/{id}/retry` | `{"request_id"?}` → 200 `{"job", "retried"}`: the dead job ready again, its attempts at 0; 409 `not_dead` with its `state`; 404 unknown |
//! | DELETE | `/v1/jobs/{id}` | `?request_id=ID` → 200 `{"purged": 1, "jobs": [id]}`: the dead job deleted; 409 `not_dead`; 404 unknown |
//! | POST | `/v1/jobs/purge` | `{"queue"?, "request_id"?}` → 200 `{"purged", "jobs"}`: every dead job (of the queue) deleted |
//! | GET | `/v1/jobs?state=S` | 200 `{"jobs": [...]}` (ready, claimed, done or dead; all without `state`) |
//! | GET | `/v1/kv/{key}?watch=REV` | server-sent events: `put` (the key as it is) and `delete` (`{"key", "revision"}`) from revision REV on, from this node's copy; `compacted` (`{"oldest"}`) and the end when REV is older than the history kept |
//! | GET | `/v1/log?from=N&limit=M` | 200 `{"commit_index", "entries": [{"index", "term", "kind", "command"}]}`: committed entries from N (at most M, 100 by default), the command decoded |
//!
//! Writes go to the leader only. A node that does not lead answers **421** `{"error":
//! "not_leader", "leader", "leader_admin_url"}` with a `Location` header on the leader's admin
//! API (when `admin.peer_urls` names it) and changes nothing; the CLI follows it. Reads are
//! linearizable by default (LOG-7): the leader serves them at a read index a heartbeat round
//! confirmed, so they see every write acknowledged before they started, and write nothing to
//! the log; `?stale=true` reads this node's copy as it is, on any node.
//!
//! A write that was not answered in time (504) or whose node stopped (503 `unknown`) may still
//! be applied: retry it with the same `request_id`, which is applied at most once (LOG-6). A
//! write the leader lost with its term (503 `lost`) was not applied. Writes need the admin
//! token when one is set, as every mutation does; reads as the other reads.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::web::{self, Data, Json};
use actix_web::{HttpRequest, HttpResponse};
use conclave_statemachine::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobCommand, JobId, JobOutcome, JobState, JobStateKind,
    KvCommand, KvOutcome, Write,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Access, AdminState, error_response, unavailable};
use crate::admin::api::ErrorAnswer;
use crate::election::{LogRefusal, MachineRead};
use crate::events::unix_millis;
use crate::machine::read_cluster;

/// How long a write waits for its entry to be applied, or a linearizable read for its read
/// index to be confirmed and applied, before the client is told the outcome is not known yet
/// (504).
const APPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A claim's lease when the worker asks for none.
const DEFAULT_LEASE_MS: u64 = 30_000;

/// `PUT /v1/kv/{key}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PutRequest {
    value: String,
    #[serde(default)]
    if_revision: Option<u64>,
    #[serde(default)]
    if_value: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
}

/// The query of `GET` and `DELETE /v1/kv/{key}` and `GET /v1/kv`.
#[derive(Debug, Deserialize)]
pub(super) struct KvQuery {
    #[serde(default)]
    stale: bool,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    if_revision: Option<u64>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    watch: Option<u64>,
}

/// `POST /v1/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnqueueRequest {
    payload: String,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    request_id: Option<String>,
}

/// `POST /v1/jobs/claim`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClaimRequest {
    worker: String,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    lease_ms: Option<u64>,
    #[serde(default)]
    request_id: Option<String>,
}

/// `POST /v1/jobs/{id}/ack` and `/nack`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SettleRequest {
    worker: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
}

/// `POST /v1/jobs/{id}/retry`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryRequest {
    #[serde(default)]
    request_id: Option<String>,
}

/// `POST /v1/jobs/purge`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PurgeRequest {
    /// Only this queue's dead jobs; every queue's without it.
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
}

/// The query of `DELETE /v1/jobs/{id}`: a DELETE carries no body, so its request id comes
/// here, as for `DELETE /v1/kv/{key}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PurgeQuery {
    #[serde(default)]
    request_id: Option<String>,
}

/// The query of `GET /v1/log`.
#[derive(Debug, Deserialize)]
pub(super) struct LogQuery {
    #[serde(default)]
    from: u64,
    #[serde(default)]
    limit: Option<usize>,
}

/// The query of `GET /v1/jobs`.
#[derive(Debug, Deserialize)]
pub(super) struct JobsQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    stale: bool,
}

/// The routes of this API, added to the admin API's.
pub(super) fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/v1/kv", web::get().to(kv_list))
        .route("/v1/kv/{key:.+}", web::get().to(kv_get))
        .route("/v1/kv/{key:.+}", web::put().to(kv_put))
        .route("/v1/kv/{key:.+}", web::delete().to(kv_delete))
        .route("/v1/jobs", web::post().to(jobs_add))
        .route("/v1/jobs", web::get().to(jobs_list))
        .route("/v1/jobs/claim", web::post().to(jobs_claim))
        .route("/v1/jobs/{id}/ack", web::post().to(jobs_ack))
        .route("/v1/jobs/{id}/nack", web::post().to(jobs_nack))
        .route("/v1/jobs/{id}/retry", web::post().to(jobs_retry))
        .route("/v1/jobs/{id}", web::delete().to(jobs_purge_one))
        .route("/v1/jobs/purge", web::post().to(jobs_purge))
        .route("/v1/log", web::get().to(log_entries));
}

// ---------------------------------------------------------------------------------------------
// key-value store

async fn kv_put(
    state: Data<AdminState>,
    request: HttpRequest,
    key: web::Path<String>,
    body: Json<PutRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let key = key.into_inner();
    let body = body.into_inner();
    let write = Write::Kv(KvCommand::Put {
        key: key.clone(),
        value: body.value,
        if_revision: body.if_revision,
        if_value: body.if_value,
    });
    match write_through(&state, &request, write, body.request_id).await {
        Ok(answer) => kv_answer(&key, &answer),
        Err(response) => response,
    }
}

async fn kv_delete(
    state: Data<AdminState>,
    request: HttpRequest,
    key: web::Path<String>,
    query: web::Query<KvQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let key = key.into_inner();
    let query = query.into_inner();
    let write = Write::Kv(KvCommand::Delete {
        key: key.clone(),
        if_revision: query.if_revision,
    });
    match write_through(&state, &request, write, query.request_id).await {
        Ok(answer) => kv_answer(&key, &answer),
        Err(response) => response,
    }
}

/// The HTTP answer of a key-value write's outcome.
fn kv_answer(key: &str, answer: &Value) -> HttpResponse {
    let replayed = answer.get("replayed").cloned();
    let outcome = answer
        .get("kv")
        .cloned()
        .and_then(|kv| serde_json::from_value::<KvOutcome>(kv).ok());
    match outcome {
        Some(KvOutcome::Applied { revision, previous }) => {
            let mut body = json!({ "key": key, "revision": revision });
            if let Some(previous) = previous {
                body["previous"] = json!(previous);
            }
            if let Some(replayed) = replayed {
                body["replayed"] = replayed;
            }
            HttpResponse::Ok().json(body)
        }
        Some(KvOutcome::CompareFailed { current }) => {
            HttpResponse::PreconditionFailed().json(json!({
                "error": "compare_failed",
                "message": match &current {
                    Some(kv) => format!(
                        "the comparison did not hold: {key} is at revision {}; nothing changed",
                        kv.mod_revision
                    ),
                    None => format!(
                        "the comparison did not hold: {key} does not exist; nothing changed"
                    ),
                },
                "key": key,
                "current": current,
                "value": current.as_ref().map(|kv| kv.value.clone()),
                "revision": current.as_ref().map(|kv| kv.mod_revision),
            }))
        }
        Some(KvOutcome::NotFound) => HttpResponse::NotFound().json(json!({
            "error": "not_found",
            "message": format!("no key {key}"),
            "key": key,
        })),
        None => refused_entry(answer),
    }
}

async fn kv_get(
    state: Data<AdminState>,
    request: HttpRequest,
    key: web::Path<String>,
    query: web::Query<KvQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let key = key.into_inner();
    if let Some(from) = query.watch {
        return watch(&state, key, from);
    }
    let lookup = key.clone();
    let read: MachineRead =
        Box::new(move |machine| read_cluster(machine, |cluster| json!(cluster.kv().get(&lookup))));
    match read_through(&state, &request, query.stale, read).await {
        Ok(Value::Null) => HttpResponse::NotFound().json(json!({
            "error": "not_found",
            "message": format!("no key {key}"),
            "key": key,
        })),
        Ok(found) => {
            let mut body = found;
            body["revision"] = body["mod_revision"].clone();
            HttpResponse::Ok().json(body)
        }
        Err(response) => response,
    }
}

async fn kv_list(
    state: Data<AdminState>,
    request: HttpRequest,
    query: web::Query<KvQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let prefix = query.prefix.clone().unwrap_or_default();
    let read: MachineRead = Box::new(move |machine| {
        read_cluster(machine, |cluster| {
            let kv = cluster.kv();
            json!({ "revision": kv.revision(), "items": kv.list(&prefix) })
        })
    });
    match read_through(&state, &request, query.stale, read).await {
        Ok(body) => HttpResponse::Ok().json(body),
        Err(response) => response,
    }
}

/// How often a watch looks for new changes in this node's copy.
const WATCH_POLL: Duration = Duration::from_millis(50);

/// What a watch carries from one step to the next.
struct Watching {
    node: crate::node::NodeHandle,
    key: String,
    /// The next revision to look for.
    next: u64,
    /// Events not yet sent.
    queue: std::collections::VecDeque<String>,
    /// The history no longer holds `next`: the stream ends once the queue is sent.
    finished: bool,
    /// When something was last sent (for the keep-alive comment).
    last_sent: tokio::time::Instant,
    /// Holds the stream's place among `admin.max_event_streams`.
    _permit: super::limits::Slot,
}

/// `GET /v1/kv/{key}?watch=REV`: the key's changes from revision `from` on, as server-sent
/// events, from this node's copy (any node serves it, as etcd's watch does).
fn watch(state: &AdminState, key: String, from: u64) -> HttpResponse {
    let permit = state.streams.open(state.options.max_event_streams);
    if permit.over() {
        return state.busy(
            super::Refusal::EventStreams,
            "admin.max_event_streams",
            state.options.max_event_streams,
            "event streams",
        );
    }
    let watching = Watching {
        node: state.node.clone(),
        key,
        next: from,
        queue: std::collections::VecDeque::new(),
        finished: false,
        last_sent: tokio::time::Instant::now(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(watching, |mut watching| async move {
        loop {
            if let Some(chunk) = watching.queue.pop_front() {
                watching.last_sent = tokio::time::Instant::now();
                return Some((
                    Ok::<_, std::convert::Infallible>(web::Bytes::from(chunk)),
                    watching,
                ));
            }
            if watching.finished {
                return None;
            }
            let wanted = watching.key.clone();
            let next = watching.next;
            let read: MachineRead = Box::new(move |machine| {
                read_cluster(machine, |cluster| {
                    match cluster
                        .kv()
                        .changes_from(next, conclave_statemachine::KeyFilter::Exact(&wanted))
                    {
                        Ok(changes) => json!({ "changes": changes }),
                        Err(conclave_statemachine::Error::Compacted { oldest }) => {
                            json!({ "compacted": oldest })
                        }
                        Err(other) => json!({ "error": other.to_string() }),
                    }
                })
            });
            let Ok(Ok(answer)) = watching.node.read(true, read).await else {
                // The node stopped, or runs no log: the stream ends.
                return None;
            };
            if let Some(oldest) = answer.get("compacted") {
                watching.queue.push_back(format!(
                    "event: compacted\ndata: {}\n\n",
                    json!({ "oldest": oldest })
                ));
                watching.finished = true;
                continue;
            }
            for change in answer["changes"].as_array().into_iter().flatten() {
                if let Some(kv) = change.get("Put") {
                    let revision = kv["mod_revision"].as_u64().unwrap_or(0);
                    watching.next = watching.next.max(revision + 1);
                    watching
                        .queue
                        .push_back(format!("event: put\ndata: {kv}\n\n"));
                } else if let Some(deleted) = change.get("Delete") {
                    let revision = deleted["revision"].as_u64().unwrap_or(0);
                    watching.next = watching.next.max(revision + 1);
                    watching
                        .queue
                        .push_back(format!("event: delete\ndata: {deleted}\n\n"));
                }
            }
            if !watching.queue.is_empty() {
                continue;
            }
            if watching.last_sent.elapsed() >= super::KEEPALIVE {
                watching.queue.push_back(": keepalive\n\n".to_owned());
                continue;
            }
            tokio::time::sleep(WATCH_POLL).await;
        }
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(stream)
}

// ---------------------------------------------------------------------------------------------
// the log

/// Entries `GET /v1/log` returns when the client names no limit.
const LOG_PAGE: usize = 100;
/// Entries `GET /v1/log` returns at most.
const LOG_PAGE_MAX: usize = 1000;

async fn log_entries(
    state: Data<AdminState>,
    request: HttpRequest,
    query: web::Query<LogQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let limit = query.limit.unwrap_or(LOG_PAGE).clamp(1, LOG_PAGE_MAX);
    let entries = match state.node.committed_entries(query.from, limit).await {
        Ok(Ok(entries)) => entries,
        Ok(Err(refusal)) => {
            return match settle_answer(&state, &request, Ok(Ok(Err(refusal)))) {
                Err(response) => response,
                Ok(_) => HttpResponse::InternalServerError().finish(),
            };
        }
        Err(err) => return unavailable(&err),
    };
    let commit = state
        .node
        .status()
        .await
        .ok()
        .and_then(|status| match status.election.detail {
            conclave_core::election::ModeStatus::Raft(raft) => raft.log.map(|log| log.commit),
            _ => None,
        });
    let entries: Vec<Value> = entries
        .iter()
        .map(|entry| {
            let command = conclave_statemachine::Command::decode(&entry.data)
                .ok()
                .map(|command| json!(command));
            json!({
                "index": entry.index,
                "term": entry.term,
                "kind": match entry.kind {
                    conclave_protocol::EntryKind::Noop => "noop",
                    // Read barriers: older versions wrote one per linearizable read, and logs
                    // and snapshots written then still hold them.
                    conclave_protocol::EntryKind::Command if entry.data.is_empty() => "barrier",
                    conclave_protocol::EntryKind::Command => "command",
                },
                "command": command,
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "commit_index": commit, "entries": entries }))
}

// ---------------------------------------------------------------------------------------------
// job queue

async fn jobs_add(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<EnqueueRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let body = body.into_inner();
    let write = Write::Jobs(JobCommand::Enqueue {
        queue: body.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
        payload: body.payload,
        max_attempts: body.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
    });
    match write_through(&state, &request, write, body.request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

async fn jobs_claim(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<ClaimRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let body = body.into_inner();
    let write = Write::Jobs(JobCommand::Claim {
        queue: body.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
        worker: body.worker,
        lease_ms: body.lease_ms.unwrap_or(DEFAULT_LEASE_MS),
        // LOG-5: the lease runs on the leader's clock, written into the entry.
        now_unix_ms: unix_millis(std::time::SystemTime::now()),
    });
    match write_through(&state, &request, write, body.request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

async fn jobs_ack(
    state: Data<AdminState>,
    request: HttpRequest,
    id: web::Path<u64>,
    body: Json<SettleRequest>,
) -> HttpResponse {
    settle(state, request, id.into_inner(), body.into_inner(), true).await
}

async fn jobs_nack(
    state: Data<AdminState>,
    request: HttpRequest,
    id: web::Path<u64>,
    body: Json<SettleRequest>,
) -> HttpResponse {
    settle(state, request, id.into_inner(), body.into_inner(), false).await
}

async fn settle(
    state: Data<AdminState>,
    request: HttpRequest,
    id: u64,
    body: SettleRequest,
    ack: bool,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let job = JobId(id);
    let write = if ack {
        Write::Jobs(JobCommand::Ack {
            job,
            worker: body.worker,
        })
    } else {
        Write::Jobs(JobCommand::Nack {
            job,
            worker: body.worker,
            reason: body.reason,
        })
    };
    match write_through(&state, &request, write, body.request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

async fn jobs_retry(
    state: Data<AdminState>,
    request: HttpRequest,
    id: web::Path<u64>,
    body: Json<RetryRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let write = Write::Jobs(JobCommand::Retry {
        job: JobId(id.into_inner()),
    });
    match write_through(&state, &request, write, body.into_inner().request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

async fn jobs_purge_one(
    state: Data<AdminState>,
    request: HttpRequest,
    id: web::Path<u64>,
    query: web::Query<PurgeQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let write = Write::Jobs(JobCommand::Purge {
        job: JobId(id.into_inner()),
    });
    match write_through(&state, &request, write, query.into_inner().request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

async fn jobs_purge(
    state: Data<AdminState>,
    request: HttpRequest,
    body: Json<PurgeRequest>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Mutate) {
        return refusal;
    }
    let body = body.into_inner();
    // No queue means every queue: the leader does not fill in DEFAULT_QUEUE here, as a purge
    // of "default" only would delete less than the operator asked for.
    let write = Write::Jobs(JobCommand::PurgeDead { queue: body.queue });
    match write_through(&state, &request, write, body.request_id).await {
        Ok(answer) => jobs_answer(&answer),
        Err(response) => response,
    }
}

/// A job state as the admin API names it in words (`list --state` takes the same).
fn state_name(state: &JobState) -> &'static str {
    match state.kind() {
        JobStateKind::Ready => "ready",
        JobStateKind::Claimed => "claimed",
        JobStateKind::Done => "done",
        JobStateKind::Dead => "dead",
    }
}

/// The HTTP answer of a job-queue write's outcome.
fn jobs_answer(answer: &Value) -> HttpResponse {
    let replayed = answer
        .get("replayed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let outcome = answer
        .get("jobs")
        .cloned()
        .and_then(|jobs| serde_json::from_value::<JobOutcome>(jobs).ok());
    let (status, mut body) = match outcome {
        Some(JobOutcome::Enqueued { job }) => (StatusCode::OK, json!({ "job": job })),
        Some(JobOutcome::Claimed(job)) => {
            (StatusCode::OK, json!({ "job": job.id, "claimed": job }))
        }
        Some(JobOutcome::NoneReady) => (
            StatusCode::NOT_FOUND,
            json!({ "error": "none_ready", "message": "no job of the queue is ready" }),
        ),
        Some(JobOutcome::Acked { job }) => (StatusCode::OK, json!({ "job": job, "state": "done" })),
        Some(JobOutcome::Requeued { job, attempts }) => (
            StatusCode::OK,
            json!({ "job": job, "state": "ready", "attempts": attempts }),
        ),
        Some(JobOutcome::DeadLettered { job, attempts }) => (
            StatusCode::OK,
            json!({ "job": job, "state": "dead", "attempts": attempts }),
        ),
        Some(JobOutcome::UnknownJob { job }) => (
            StatusCode::NOT_FOUND,
            json!({
                "error": "unknown_job",
                "job": job,
                "message": format!(
                    "no job {job}: never enqueued, or done long ago or purged, and forgotten"
                ),
            }),
        ),
        Some(JobOutcome::NotHeld { job, state }) => (
            StatusCode::CONFLICT,
            json!({
                "error": "not_held",
                "job": job,
                "state": state,
                "message": "this worker does not hold the job (its lease was taken back, \
                            another worker holds it, or it is done or dead)",
            }),
        ),
        Some(other @ JobOutcome::LeasesExpired { .. }) => (StatusCode::OK, json!(other)),
        Some(JobOutcome::Retried(job)) => (
            StatusCode::OK,
            json!({ "job": job.id, "state": "ready", "retried": job }),
        ),
        Some(JobOutcome::Purged { jobs }) => (
            StatusCode::OK,
            json!({ "purged": jobs.len(), "jobs": jobs }),
        ),
        // A refused state transition, as an ack or nack of a job the worker does not hold is.
        Some(JobOutcome::NotDead { job, state }) => (
            StatusCode::CONFLICT,
            json!({
                "error": "not_dead",
                "job": job,
                "state": state,
                "message": format!(
                    "job {job} is {}, not dead: only a dead job can be retried or purged",
                    state_name(&state)
                ),
            }),
        ),
        None => return refused_entry(answer),
    };
    if replayed {
        body["replayed"] = Value::Bool(true);
    }
    HttpResponse::build(status).json(body)
}

async fn jobs_list(
    state: Data<AdminState>,
    request: HttpRequest,
    query: web::Query<JobsQuery>,
) -> HttpResponse {
    if let Some(refusal) = state.refuse(&request, Access::Read) {
        return refusal;
    }
    let wanted = match query.state.as_deref() {
        None | Some("") => None,
        Some("ready") => Some(JobStateKind::Ready),
        Some("claimed") => Some(JobStateKind::Claimed),
        Some("done") => Some(JobStateKind::Done),
        Some("dead") => Some(JobStateKind::Dead),
        Some(other) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                ErrorAnswer::new(format!(
                    "state must be ready, claimed, done or dead, found {other:?}"
                )),
            );
        }
    };
    let read: MachineRead = Box::new(move |machine| {
        read_cluster(machine, |cluster| {
            let kinds = match wanted {
                Some(kind) => vec![kind],
                None => vec![
                    JobStateKind::Ready,
                    JobStateKind::Claimed,
                    JobStateKind::Done,
                    JobStateKind::Dead,
                ],
            };
            let mut jobs: Vec<_> = kinds
                .into_iter()
                .flat_map(|kind| cluster.jobs().list(kind))
                .collect();
            jobs.sort_by_key(|job| job.id);
            json!({ "jobs": jobs })
        })
    });
    match read_through(&state, &request, query.stale, read).await {
        Ok(body) => HttpResponse::Ok().json(body),
        Err(response) => response,
    }
}

// ---------------------------------------------------------------------------------------------
// through the log

/// Proposes `write` (with the client's request id) and waits for it to be applied.
async fn write_through(
    state: &AdminState,
    request: &HttpRequest,
    write: Write,
    request_id: Option<String>,
) -> Result<Value, HttpResponse> {
    let mut command = conclave_statemachine::Command::new(write);
    if let Some(id) = request_id {
        command = command.with_request_id(id);
    }
    if let Err(invalid) = command.validate() {
        return Err(error_response(
            StatusCode::BAD_REQUEST,
            ErrorAnswer::new(invalid.to_string()),
        ));
    }
    let data = command.encode().map_err(|err| {
        error_response(StatusCode::BAD_REQUEST, ErrorAnswer::new(err.to_string()))
    })?;
    let answer = tokio::time::timeout(APPLY_TIMEOUT, state.node.propose(data)).await;
    settle_answer(state, request, answer)
}

/// Reads on the leader at a confirmed read index, or this node's copy when `stale`.
async fn read_through(
    state: &AdminState,
    request: &HttpRequest,
    stale: bool,
    read: MachineRead,
) -> Result<Value, HttpResponse> {
    let answer = tokio::time::timeout(APPLY_TIMEOUT, state.node.read(stale, read)).await;
    settle_answer(state, request, answer)
}

/// The answer of a write or read that went to the ElectionActor, or the HTTP refusal.
fn settle_answer(
    state: &AdminState,
    request: &HttpRequest,
    answer: Result<
        Result<Result<Value, LogRefusal>, crate::node::NodeError>,
        tokio::time::error::Elapsed,
    >,
) -> Result<Value, HttpResponse> {
    let refusal = match answer {
        Err(_) => {
            return Err(error_response(
                StatusCode::GATEWAY_TIMEOUT,
                ErrorAnswer::new(format!(
                    "not applied within {} s: the cluster may have lost its leader or its \
                     quorum; a write may still be applied later, so retry it with the same \
                     request_id",
                    APPLY_TIMEOUT.as_secs()
                )),
            ));
        }
        Ok(Err(err)) => return Err(unavailable(&err)),
        Ok(Ok(Ok(value))) => return Ok(value),
        Ok(Ok(Err(refusal))) => refusal,
    };
    Err(match refusal {
        LogRefusal::NotLeader { leader } => not_leader(state, request, leader),
        LogRefusal::Disabled => error_response(
            StatusCode::CONFLICT,
            ErrorAnswer::new(
                "this node runs no replicated log: set log.enabled = true on every voter \
                 (raft mode, quorum = \"voters\")",
            ),
        ),
        LogRefusal::TooLarge(reason) => HttpResponse::PayloadTooLarge().json(json!({
            "error": "too_large",
            "message": format!(
                "{reason}: every write must fit one frame of the smallest link; shorten the \
                 value or raise log.max_append_bytes (UDP fits up to about 1300)"
            ),
        })),
        LogRefusal::Busy | LogRefusal::Lost | LogRefusal::Unknown => {
            let code = match refusal {
                LogRefusal::Lost => "lost",
                LogRefusal::Unknown => "unknown",
                _ => "busy",
            };
            HttpResponse::ServiceUnavailable()
                .insert_header((header::RETRY_AFTER, "1"))
                .json(json!({ "error": code, "message": refusal.to_string() }))
        }
    })
}

/// 421: this node does not lead; where the leader is (LOG-1).
fn not_leader(
    state: &AdminState,
    request: &HttpRequest,
    leader: Option<conclave_protocol::PeerId>,
) -> HttpResponse {
    let url = state.admin_url(leader);
    let mut response = HttpResponse::build(StatusCode::MISDIRECTED_REQUEST);
    if let Some(url) = &url {
        let target = match request.uri().query() {
            Some(query) => format!("{}{}?{query}", url.trim_end_matches('/'), request.path()),
            None => format!("{}{}", url.trim_end_matches('/'), request.path()),
        };
        response.insert_header((header::LOCATION, target));
    }
    response.json(json!({
        "error": "not_leader",
        "leader": leader.map(|leader| leader.to_string()),
        "leader_admin_url": url,
        "message": match leader {
            Some(_) => "this node does not lead; send the request to the leader",
            None => "this node knows no leader now; retry shortly",
        },
    }))
}

/// An entry the state machine refused: a request it could not have been (bad data).
fn refused_entry(answer: &Value) -> HttpResponse {
    let status = match answer.get("error").and_then(Value::as_str) {
        Some("request_id_in_use") => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    };
    HttpResponse::build(status).json(answer)
}
