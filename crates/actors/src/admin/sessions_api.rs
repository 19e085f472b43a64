//! The sessions' endpoints (SESS-1) on the admin listener: each reads its path, query and
//! body as conclave-api's types, runs the typed operation of
//! [`crate::log_service::LogService`] and writes its answer or error.
//!
//! | method | path | request | answer |
//! |---|---|---|---|
//! | POST | `/v1/sessions` | `SessionGrantRequest` | `SessionAnswer` |
//! | GET | `/v1/sessions` | `?stale=` | `SessionListAnswer` |
//! | POST | `/v1/sessions/{id}/keepalive` | `?stream=` | `SessionAnswer`, or server-sent `SessionStreamEvent`s |
//! | DELETE | `/v1/sessions/{id}` | `?request_id=` | `SessionRevokeAnswer` |
//!
//! A grant, a keepalive and a revoke are mutations (a `write` token of any limits when tokens
//! are set, SEC-2; the deadline) that only the leader answers; a follower redirects with 421 `not_leader`. A streaming keepalive
//! takes a place among `admin.max_event_streams`.

use std::convert::Infallible;

use actix_web::web::{self, Bytes, Data};
use actix_web::{HttpRequest, HttpResponse};
use conclave_api::{self as api, ErrorAnswer, ErrorCode};
use futures_util::StreamExt;

use super::{Access, AdminState, resource};

/// The routes of this API, added to the admin API's.
pub(super) fn routes(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/v1/sessions", "GET, POST")
                .route(web::get().to(list))
                .route(web::post().to(grant)),
        )
        .service(resource("/v1/sessions/{id}/keepalive", "POST").route(web::post().to(keepalive)))
        .service(resource("/v1/sessions/{id}", "DELETE").route(web::delete().to(revoke)));
}

/// The session id of a `/v1/sessions/{id}` path.
fn session_of(request: &HttpRequest) -> Result<u64, Box<ErrorAnswer>> {
    let id = request.match_info().get("id").unwrap_or_default();
    id.parse::<u64>().map_err(|_| {
        Box::new(ErrorAnswer::new(
            ErrorCode::BadPath,
            format!("{id:?} is no session id: session ids are whole numbers from 1"),
        ))
    })
}

async fn grant(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    admit!(state, request, Access::Write);
    let body: api::SessionGrantRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let answer = state.service.session_grant(body).await;
    state.respond(&request, answer).await
}

async fn list(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let query: api::SessionListQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.sessions_list(&query).await;
    state.respond(&request, answer).await
}

async fn keepalive(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Write);
    let session = attempt!(state, request, session_of(&request));
    let query: api::SessionKeepaliveQuery = attempt!(state, request, state.query(&request));
    if !query.stream {
        let answer = state.service.session_keepalive(session).await;
        return state.respond(&request, answer).await;
    }
    let permit = match super::streams::stream_slot(&state) {
        Ok(permit) => permit,
        Err(error) => return state.error_response(&request, error).await,
    };
    // The first keepalive is answered before the stream starts: a follower redirects and an
    // unknown session is 404, as for a single keepalive.
    let stream = match state.service.session_stream(session).await {
        Ok(stream) => stream,
        Err(error) => return state.error_response(&request, error).await,
    };
    let events = stream.map(move |event| {
        // The permit lives as long as the stream does.
        let _held = &permit;
        let name = match &event {
            api::SessionStreamEvent::Keepalive { .. } => "keepalive",
            api::SessionStreamEvent::Ended { .. } => "ended",
            api::SessionStreamEvent::Stopped { .. } => "stopped",
        };
        Ok::<_, Infallible>(Bytes::from(super::streams::sse(None, name, &event)))
    });
    state.log_mutation(&request, 200, None);
    super::streams::event_stream(events)
}

async fn revoke(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Write);
    let session = attempt!(state, request, session_of(&request));
    let query: api::SessionRevokeQuery = attempt!(state, request, state.query(&request));
    let answer = state.service.session_revoke(session, query).await;
    state.respond(&request, answer).await
}
