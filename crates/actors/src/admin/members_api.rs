//! The membership endpoints of the log's cluster (MEMB-1, MEMB-2, MEMB-3) on the admin
//! listener: each reads its path and body as conclave-api's types, runs the typed operation of
//! [`crate::log_service::LogService`] and writes its answer or error.
//!
//! | method | path | request | answer |
//! |---|---|---|---|
//! | GET | `/v1/members` | | `MembersAnswer`, this node's view, on any node |
//! | POST | `/v1/members` | `AddMemberRequest` | `MembersAnswer`; 409 `already_member` for a voter |
//! | POST | `/v1/members/{id}/promote` | | `MembersAnswer`; 409 `not_caught_up`, 404 `no_such_member` |
//! | DELETE | `/v1/members/{id}` | | `MembersAnswer`; 404 `no_such_member`, 409 `last_voter` |
//!
//! Changes are mutations (an `admin` token when tokens are set, SEC-2; the deadline), answered
//! by the leader once their configuration entry is committed; a follower redirects with 421
//! `not_leader`, and a change while another is pending is 409 `change_in_progress`. The list
//! is a read.

use actix_web::web::{self, Data};
use actix_web::{HttpRequest, HttpResponse};
use conclave_api as api;

use super::{Access, AdminState, resource};

/// The routes of this API, added to the admin API's.
pub(super) fn routes(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/v1/members", "GET, POST")
                .route(web::get().to(list))
                .route(web::post().to(add)),
        )
        .service(resource("/v1/members/{id}/promote", "POST").route(web::post().to(promote)))
        .service(resource("/v1/members/{id}", "DELETE").route(web::delete().to(remove)));
}

/// The member id of a `/v1/members/{id}` path, as given (the operation checks it).
fn member_of(request: &HttpRequest) -> String {
    request
        .match_info()
        .get("id")
        .unwrap_or_default()
        .to_owned()
}

async fn list(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let answer = state.service.members().await;
    state.respond(&request, answer).await
}

async fn add(state: Data<AdminState>, request: HttpRequest, payload: web::Payload) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let body: api::AddMemberRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let answer = state.service.add_member(body).await;
    state.respond(&request, answer).await
}

async fn promote(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let answer = state.service.promote_member(&member_of(&request)).await;
    state.respond(&request, answer).await
}

async fn remove(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let answer = state.service.remove_member(&member_of(&request)).await;
    state.respond(&request, answer).await
}
