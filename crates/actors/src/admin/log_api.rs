//! The replicated log's endpoints (LOG-1, LOG-5..8) on the admin listener: each reads its path,
//! query and body as conclave-api's types, runs the typed operation of
//! [`crate::log_service::LogService`] and writes its answer or error. What the answers hold
//! and why is documented there and in `docs/api.md`.
//!
//! | method | path | request | answer |
//! |---|---|---|---|
//! | PUT | `/v1/kv/{key}` | `PutRequest` | `KvWriteAnswer`; 412 `compare_failed` |
//! | GET | `/v1/kv/{key}` | `?stale`, `?watch=REV` | `KvGetAnswer`, 404 `not_found`; with `watch`, server-sent events |
//! | DELETE | `/v1/kv/{key}` | `?if_revision&request_id` | `KvWriteAnswer`; 404, 412 |
//! | GET | `/v1/kv` | `?prefix&limit&continue&stale` | `KvListAnswer` |
//! | POST | `/v1/jobs` | `EnqueueRequest` | `JobAnswer` |
//! | GET | `/v1/jobs` | `?state&limit&continue&stale` | `JobListAnswer` |
//! | POST | `/v1/jobs/claim` | `ClaimRequest` | `JobAnswer`; 404 `none_ready` |
//! | POST | `/v1/jobs/{id}/ack` | `AckRequest` | `JobAnswer`; 404 `unknown_job`, 409 `not_held` |
//! | POST | `/v1/jobs/{id}/nack` | `NackRequest` | `JobAnswer`; 404, 409 `not_held` |
//! | POST | `/v1/jobs/{id}/retry` | `RetryRequest` | `JobAnswer`; 404, 409 `not_dead` |
//! | DELETE | `/v1/jobs/{id}` | `?request_id` | `PurgeAnswer`; 404, 409 `not_dead` |
//! | POST | `/v1/jobs/purge` | `PurgeRequest` | `PurgeAnswer` |
//! | GET | `/v1/log` | `?from&limit` | `LogEntriesAnswer` |
//! | GET | `/v1/snapshot` | `?stale` | the saved-snapshot file (binary); 421 as a read |
//!
//! With tokens set (SEC-2), writes of keys and jobs need a `write` token, and one limited to
//! key prefixes or queues only touches those: an ack, nack or retry is checked against its
//! job's queue. Purges need `admin`, and so does `/v1/snapshot`: it reads nothing `kv list`
//! and `jobs list` do not show, but it is the whole store at once, a backup. Other reads are
//! as the other reads.

use actix_web::http::header;
use actix_web::web::{self, Data};
use actix_web::{HttpRequest, HttpResponse};
use conclave_api as api;
use conclave_api::{ErrorAnswer, ErrorCode};

use conclave_statemachine::DEFAULT_QUEUE;

use super::{Access, AdminState, resource};
use crate::log_service::SnapshotImage;

/// The routes of this API, added to the admin API's. `/v1/jobs/claim` and `/v1/jobs/purge`
/// come before `/v1/jobs/{id}`, which would take them for job ids.
pub(super) fn routes(config: &mut web::ServiceConfig) {
    config
        .service(resource("/v1/kv", "GET").route(web::get().to(kv_list)))
        .service(
            resource("/v1/kv/{key:.*}", "GET, PUT, DELETE")
                .route(web::get().to(kv_get))
                .route(web::put().to(kv_put))
                .route(web::delete().to(kv_delete)),
        )
        .service(resource("/v1/jobs/claim", "POST").route(web::post().to(jobs_claim)))
        .service(resource("/v1/jobs/purge", "POST").route(web::post().to(jobs_purge)))
        .service(
            resource("/v1/jobs", "GET, POST")
                .route(web::get().to(jobs_list))
                .route(web::post().to(jobs_add)),
        )
        .service(resource("/v1/jobs/{id}/ack", "POST").route(web::post().to(jobs_ack)))
        .service(resource("/v1/jobs/{id}/nack", "POST").route(web::post().to(jobs_nack)))
        .service(resource("/v1/jobs/{id}/retry", "POST").route(web::post().to(jobs_retry)))
        .service(resource("/v1/jobs/{id}", "DELETE").route(web::delete().to(jobs_purge_one)))
        .service(resource("/v1/log", "GET").route(web::get().to(log_entries)))
        .service(resource("/v1/snapshot", "GET").route(web::get().to(snapshot)));
}

/// A path's key, or job id, as the handler takes it; an error is answered by the handler.
type PathPart<T> = Result<web::Path<T>, actix_web::Error>;

/// The key of a `/v1/kv/{key}` path, percent-decoded.
fn key_of(path: PathPart<String>) -> Result<String, Box<ErrorAnswer>> {
    path.map(web::Path::into_inner).map_err(|err| {
        Box::new(ErrorAnswer::new(
            ErrorCode::BadPath,
            format!("the key in the path does not decode as UTF-8 text: {err}"),
        ))
    })
}

/// The job id of a `/v1/jobs/{id}` path.
fn job_of(request: &HttpRequest) -> Result<u64, Box<ErrorAnswer>> {
    let id = request.match_info().get("id").unwrap_or_default();
    id.parse::<u64>().map_err(|_| {
        Box::new(ErrorAnswer::new(
            ErrorCode::BadPath,
            format!("{id:?} is no job id: job ids are whole numbers from 1"),
        ))
    })
}

// ---------------------------------------------------------------------------------------------
// key-value store

async fn kv_put(
    state: Data<AdminState>,
    request: HttpRequest,
    key: PathPart<String>,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let key = attempt!(state, request, key_of(key));
    within!(state, request, caller.may_write_key("PUT", &key));
    let body: api::PutRequest = attempt!(state, request, state.json_body(&request, payload).await);
    let answer = state.service.kv_put(&key, body).await;
    state.respond(&request, answer).await
}

async fn kv_delete(
    state: Data<AdminState>,
    request: HttpRequest,
    key: PathPart<String>,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let key = attempt!(state, request, key_of(key));
    within!(state, request, caller.may_write_key("DELETE", &key));
    let query: api::KvDeleteQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.kv_delete(&key, query).await;
    state.respond(&request, answer).await
}

async fn kv_get(
    state: Data<AdminState>,
    request: HttpRequest,
    key: PathPart<String>,
) -> HttpResponse {
    admit!(state, request, Access::Read);
    let key = attempt!(state, request, key_of(key));
    let query: api::KvGetQuery = attempt!(state, request, state.query(&request));
    if let Some(from) = query.watch {
        return super::streams::watch(&state, &request, key, from).await;
    }
    let answer = state.service.kv_get(&key, query.stale).await;
    state.respond(&request, answer).await
}

async fn kv_list(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let query: api::KvListQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.kv_list(&query).await;
    state.respond(&request, answer).await
}

// ---------------------------------------------------------------------------------------------
// job queue

async fn jobs_add(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let body: api::EnqueueRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let queue = body.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
    within!(state, request, caller.may_use_queue("adding a job", queue));
    let answer = state.service.enqueue(body).await;
    state.respond(&request, answer).await
}

async fn jobs_claim(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let body: api::ClaimRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let queue = body.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
    within!(state, request, caller.may_use_queue("a claim", queue));
    let answer = state.service.claim(body).await;
    state.respond(&request, answer).await
}

async fn jobs_ack(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let job = attempt!(state, request, job_of(&request));
    let body: api::AckRequest = attempt!(state, request, state.json_body(&request, payload).await);
    attempt!(state, request, state.may_act_on_job(&caller, job).await);
    let answer = state.service.ack(job, body).await;
    state.respond(&request, answer).await
}

async fn jobs_nack(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let job = attempt!(state, request, job_of(&request));
    let body: api::NackRequest = attempt!(state, request, state.json_body(&request, payload).await);
    attempt!(state, request, state.may_act_on_job(&caller, job).await);
    let answer = state.service.nack(job, body).await;
    state.respond(&request, answer).await
}

async fn jobs_retry(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let caller = admit!(state, request, Access::Write);
    let job = attempt!(state, request, job_of(&request));
    let body: api::RetryRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    attempt!(state, request, state.may_act_on_job(&caller, job).await);
    let answer = state.service.retry(job, body).await;
    state.respond(&request, answer).await
}

async fn jobs_purge_one(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let job = attempt!(state, request, job_of(&request));
    let query: api::PurgeOneQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.purge_one(job, query).await;
    state.respond(&request, answer).await
}

async fn jobs_purge(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let body: api::PurgeRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let answer = state.service.purge(body).await;
    state.respond(&request, answer).await
}

async fn jobs_list(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let query: api::JobListQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.jobs_list(&query).await;
    state.respond(&request, answer).await
}

// ---------------------------------------------------------------------------------------------
// the log

async fn log_entries(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let query: api::LogQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.log_entries(&query).await;
    state.respond(&request, answer).await
}

// ---------------------------------------------------------------------------------------------
// backup

async fn snapshot(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let query: api::SnapshotQuery = attempt!(state, request, state.query(&request));
    let image = attempt!(state, request, state.service.snapshot(query.stale).await);
    snapshot_response(image)
}

/// 200 with the saved-snapshot file; its position, checksum and the fencing token in headers.
fn snapshot_response(image: SnapshotImage) -> HttpResponse {
    let SnapshotImage {
        bytes,
        last,
        checksum,
        fencing,
    } = image;
    let mut response = HttpResponse::Ok();
    response
        .content_type(api::SNAPSHOT_MEDIA_TYPE)
        .insert_header((api::SNAPSHOT_INDEX_HEADER, last.index.to_string()))
        .insert_header((api::SNAPSHOT_TERM_HEADER, last.term.to_string()))
        .insert_header((api::SNAPSHOT_SHA256_HEADER, checksum.to_string()))
        .insert_header((api::TERM_HEADER, fencing.term.to_string()))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"conclave-{}.snapshot\"", last.index),
        ));
    if let Some(leader) = fencing.leader {
        response.insert_header((api::LEADER_HEADER, leader));
    }
    if let Some(token) = fencing.fencing_token {
        response.insert_header((api::FENCING_TOKEN_HEADER, token));
    }
    response.body(bytes)
}
