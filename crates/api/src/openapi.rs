//! The OpenAPI 3.1 description of the admin API, generated from the types of this crate
//! (`docs/openapi.json` is this document, and a test keeps the file equal to it).
//!
//! Schemas come from the types themselves (schemars reads their serde attributes), requests
//! as the node reads them and answers as it writes them; the endpoints, their statuses and
//! their error codes are the table [`endpoints`]. A test in the workspace drives a running
//! node through every endpoint and validates each answer against this document.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::*;

/// Where the schemas live in the document.
const COMPONENTS: &str = "/components/schemas";

/// How an endpoint's request or answer is written.
type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// What an endpoint answers on success.
#[derive(Clone, Copy)]
pub enum Success {
    /// 200 with this JSON.
    Json(SchemaOf),
    /// 200 with server-sent events whose `data:` is this JSON (with the `event:` names given).
    Events(SchemaOf, &'static str),
    /// 200 with this JSON, or with server-sent events when the query asks for a watch.
    JsonOrWatch(SchemaOf, SchemaOf),
    /// 200 with a binary body of [`SNAPSHOT_MEDIA_TYPE`], described thus, and the fencing
    /// token in headers.
    Binary(&'static str),
    /// 200 with this JSON, or, when the query asks for a stream, server-sent events whose
    /// `data:` is the second JSON, described thus.
    JsonOrStream(SchemaOf, SchemaOf, &'static str),
}

/// One endpoint of the API.
#[derive(Clone, Copy)]
pub struct Endpoint {
    /// `get`, `put`, `post` or `delete`.
    pub method: &'static str,
    /// The path, with `{key}` or `{id}` where a part varies.
    pub path: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Whether it needs the bearer token when one is set (every mutation; reads need it only
    /// where the API listens beyond loopback).
    pub mutation: bool,
    /// Its JSON body, if it takes one.
    pub body: Option<SchemaOf>,
    /// Its query parameters, if any (a struct whose fields are the parameters).
    pub query: Option<SchemaOf>,
    /// Its answer.
    pub success: Success,
    /// The error codes it may answer, beyond those every endpoint may
    /// ([`COMMON_ERRORS`], and [`MUTATION_ERRORS`] for a mutation).
    pub errors: &'static [ErrorCode],
}

/// Errors any endpoint may answer.
pub const COMMON_ERRORS: &[ErrorCode] = &[
    ErrorCode::Unauthorized,
    ErrorCode::MethodNotAllowed,
    ErrorCode::Unavailable,
    ErrorCode::TooManyConnections,
];

/// Errors any mutation may answer, beyond the common ones.
pub const MUTATION_ERRORS: &[ErrorCode] = &[
    ErrorCode::DeadlinePassed,
    ErrorCode::InvalidArgument,
    ErrorCode::Forbidden,
];

/// Errors of a body read as JSON.
const BODY_ERRORS: &[ErrorCode] = &[
    ErrorCode::BadJson,
    ErrorCode::UnsupportedMediaType,
    ErrorCode::TooLarge,
];

/// What a write through the replicated log may answer, beyond its own outcomes.
const WRITE_ERRORS: &[ErrorCode] = &[
    ErrorCode::NotLeader,
    ErrorCode::LogDisabled,
    ErrorCode::TooLarge,
    ErrorCode::StoreFull,
    ErrorCode::RequestIdInUse,
    ErrorCode::Busy,
    ErrorCode::Lost,
    ErrorCode::OutcomeUnknown,
    ErrorCode::Timeout,
    ErrorCode::Internal,
];

/// What a read of the replicated log may answer.
const READ_ERRORS: &[ErrorCode] = &[
    ErrorCode::NotLeader,
    ErrorCode::LogDisabled,
    ErrorCode::Busy,
    ErrorCode::Timeout,
    ErrorCode::BadQuery,
];

/// What an operator's election command may answer.
const COMMAND_ERRORS: &[ErrorCode] = &[
    ErrorCode::NotLeader,
    ErrorCode::NotAllowed,
    ErrorCode::NotOffered,
    ErrorCode::Quarantined,
    ErrorCode::Abstaining,
];

/// What a membership change may answer, beyond its own outcomes.
const MEMBERSHIP_ERRORS: &[ErrorCode] = &[
    ErrorCode::NotLeader,
    ErrorCode::LogDisabled,
    ErrorCode::NotAllowed,
    ErrorCode::ChangeInProgress,
    ErrorCode::NotReady,
    ErrorCode::Busy,
    ErrorCode::Lost,
    ErrorCode::OutcomeUnknown,
    ErrorCode::Timeout,
];

/// Every endpoint of the admin API.
pub fn endpoints() -> Vec<Endpoint> {
    let mut all = election_endpoints();
    all.extend(kv_endpoints());
    all.extend(job_endpoints());
    all.extend(member_endpoints());
    all.extend(session_endpoints());
    all.push(Endpoint {
        method: "get",
        path: "/v1/log",
        summary: "Committed entries of the replicated log, each command decoded",
        mutation: false,
        body: None,
        query: Some(schema::<LogQuery>),
        success: Success::Json(schema::<LogEntriesAnswer>),
        errors: &[ErrorCode::LogDisabled, ErrorCode::BadQuery],
    });
    all.push(Endpoint {
        method: "get",
        path: "/v1/snapshot",
        summary: "A checksummed image of the replicated state machine at a committed index, \
            as `conclave snapshot save` writes it",
        mutation: false,
        body: None,
        query: Some(schema::<SnapshotQuery>),
        success: Success::Binary(
            "The saved snapshot file: header (magic \"CNCLSNAP\", format version, index, term, \
             time taken, cluster id, image length), the state machine's image, and the SHA-256 \
             of every byte before it (docs/operations.md, \"Backup and restore\"). Headers: \
             conclave-snapshot-index, conclave-snapshot-term, conclave-snapshot-sha256, and the \
             fencing token as conclave-term, conclave-leader and conclave-fencing-token.",
        ),
        errors: &[
            ErrorCode::NotLeader,
            ErrorCode::LogDisabled,
            ErrorCode::Busy,
            ErrorCode::Timeout,
            ErrorCode::BadQuery,
            ErrorCode::Internal,
            ErrorCode::Forbidden,
        ],
    });
    all
}

fn election_endpoints() -> Vec<Endpoint> {
    let read = |path, summary, answer: SchemaOf| Endpoint {
        method: "get",
        path,
        summary,
        mutation: false,
        body: None,
        query: None,
        success: Success::Json(answer),
        errors: &[],
    };
    let command = |path, summary, body| Endpoint {
        method: "post",
        path,
        summary,
        mutation: true,
        body,
        query: None,
        success: Success::Json(schema::<CommandAnswer>),
        errors: COMMAND_ERRORS,
    };
    vec![
        read(
            "/health",
            "Liveness: 200 while the node runs, 503 once it stopped (needs no token)",
            schema::<HealthAnswer>,
        ),
        read(
            "/ready",
            "Readiness: 200 when a leader is known and a quorum of voters is reachable, else 503",
            schema::<ReadyAnswer>,
        ),
        read(
            "/v1/status",
            "The node's role, term, leader, quorum, peers and log positions",
            schema::<StatusAnswer>,
        ),
        read("/v1/peers", "The peer table", schema::<PeersAnswer>),
        read(
            "/v1/history",
            "Every leader change with its cause and time",
            schema::<HistoryAnswer>,
        ),
        Endpoint {
            method: "get",
            path: "/v1/events",
            summary: "Leader and peer changes as server-sent events; resumes from Last-Event-ID",
            mutation: false,
            body: None,
            query: None,
            success: Success::Events(
                schema::<StreamEvent>,
                "leader_changed, peer_status_changed, lagged",
            ),
            errors: &[ErrorCode::TooManyStreams, ErrorCode::InvalidArgument],
        },
        command(
            "/v1/leader",
            "Make a node the leader (assign it, or transfer to it) and pin it",
            Some(schema::<SetLeaderRequest> as SchemaOf),
        ),
        command(
            "/v1/leader/resign",
            "The leader hands over to the best peer, or steps down",
            None,
        ),
        command(
            "/v1/auto-election",
            "Switch automatic elections on or off on this node",
            Some(schema::<AutoElectionRequest> as SchemaOf),
        ),
    ]
}

fn kv_endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint {
            method: "get",
            path: "/v1/kv",
            summary: "One page of the keys starting with a prefix",
            mutation: false,
            body: None,
            query: Some(schema::<KvListQuery>),
            success: Success::Json(schema::<KvListAnswer>),
            errors: READ_ERRORS,
        },
        Endpoint {
            method: "get",
            path: "/v1/kv/{key}",
            summary: "A key's value and revisions; with `watch`, its changes as server-sent events",
            mutation: false,
            body: None,
            query: Some(schema::<KvGetQuery>),
            success: Success::JsonOrWatch(schema::<KvGetAnswer>, schema::<KeyValue>),
            errors: &[
                ErrorCode::NotFound,
                ErrorCode::NotLeader,
                ErrorCode::LogDisabled,
                ErrorCode::Busy,
                ErrorCode::Timeout,
                ErrorCode::BadQuery,
                ErrorCode::InvalidArgument,
                ErrorCode::TooManyStreams,
            ],
        },
        Endpoint {
            method: "put",
            path: "/v1/kv/{key}",
            summary: "Set a key, if the comparisons given hold",
            mutation: true,
            body: Some(schema::<PutRequest>),
            query: None,
            success: Success::Json(schema::<KvWriteAnswer>),
            errors: &[ErrorCode::CompareFailed, ErrorCode::NoSuchSession],
        },
        Endpoint {
            method: "delete",
            path: "/v1/kv/{key}",
            summary: "Delete a key, if the comparison given holds",
            mutation: true,
            body: None,
            query: Some(schema::<KvDeleteQuery>),
            success: Success::Json(schema::<KvWriteAnswer>),
            errors: &[
                ErrorCode::NotFound,
                ErrorCode::CompareFailed,
                ErrorCode::BadQuery,
            ],
        },
    ]
}

fn job_endpoints() -> Vec<Endpoint> {
    let write = |path, summary, body: SchemaOf, errors| Endpoint {
        method: "post",
        path,
        summary,
        mutation: true,
        body: Some(body),
        query: None,
        success: Success::Json(schema::<JobAnswer>),
        errors,
    };
    vec![
        write(
            "/v1/jobs",
            "Put a job in a queue",
            schema::<EnqueueRequest>,
            &[],
        ),
        Endpoint {
            method: "get",
            path: "/v1/jobs",
            summary: "One page of the jobs (of a state), by id",
            mutation: false,
            body: None,
            query: Some(schema::<JobListQuery>),
            success: Success::Json(schema::<JobListAnswer>),
            errors: READ_ERRORS,
        },
        write(
            "/v1/jobs/claim",
            "Give the oldest ready job of a queue to a worker, with a lease or for as long as \
                its session lives",
            schema::<ClaimRequest>,
            &[
                ErrorCode::NoneReady,
                ErrorCode::NoSuchSession,
                ErrorCode::TooManyClaims,
            ],
        ),
        write(
            "/v1/jobs/{id}/ack",
            "The worker finished the job: it is done and never runs again",
            schema::<AckRequest>,
            &[
                ErrorCode::UnknownJob,
                ErrorCode::NotHeld,
                ErrorCode::BadPath,
            ],
        ),
        write(
            "/v1/jobs/{id}/nack",
            "The worker gives the job back: ready again, or dead once its attempts are used up",
            schema::<NackRequest>,
            &[
                ErrorCode::UnknownJob,
                ErrorCode::NotHeld,
                ErrorCode::BadPath,
            ],
        ),
        write(
            "/v1/jobs/{id}/retry",
            "A dead job back in its queue, its attempts reset",
            schema::<RetryRequest>,
            &[
                ErrorCode::UnknownJob,
                ErrorCode::NotDead,
                ErrorCode::BadPath,
            ],
        ),
        Endpoint {
            method: "delete",
            path: "/v1/jobs/{id}",
            summary: "Delete a dead job",
            mutation: true,
            body: None,
            query: Some(schema::<PurgeOneQuery>),
            success: Success::Json(schema::<PurgeAnswer>),
            errors: &[
                ErrorCode::UnknownJob,
                ErrorCode::NotDead,
                ErrorCode::BadPath,
                ErrorCode::BadQuery,
            ],
        },
        Endpoint {
            method: "post",
            path: "/v1/jobs/purge",
            summary: "Delete every dead job (of a queue)",
            mutation: true,
            body: Some(schema::<PurgeRequest>),
            query: None,
            success: Success::Json(schema::<PurgeAnswer>),
            errors: &[],
        },
    ]
}

fn member_endpoints() -> Vec<Endpoint> {
    let change = |method, path, summary, body: Option<SchemaOf>, errors| Endpoint {
        method,
        path,
        summary,
        mutation: true,
        body,
        query: None,
        success: Success::Json(schema::<MembersAnswer>),
        errors,
    };
    vec![
        Endpoint {
            method: "get",
            path: "/v1/members",
            summary: "The voters and learners of the log's cluster, as this node sees them",
            mutation: false,
            body: None,
            query: None,
            success: Success::Json(schema::<MembersAnswer>),
            errors: &[ErrorCode::LogDisabled],
        },
        change(
            "post",
            "/v1/members",
            "Add a learner, answered once the change is committed",
            Some(schema::<AddMemberRequest>),
            &[ErrorCode::AlreadyMember],
        ),
        change(
            "post",
            "/v1/members/{id}/promote",
            "Make a caught-up learner a voter, answered once the change is committed",
            None,
            &[ErrorCode::NoSuchMember, ErrorCode::NotCaughtUp],
        ),
        change(
            "delete",
            "/v1/members/{id}",
            "Remove a voter or a learner, answered once the change is committed",
            None,
            &[ErrorCode::NoSuchMember, ErrorCode::LastVoter],
        ),
    ]
}

fn session_endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint {
            method: "get",
            path: "/v1/sessions",
            summary: "Every live session, with how long each has left on the leader's clock",
            mutation: false,
            body: None,
            query: Some(schema::<SessionListQuery>),
            success: Success::Json(schema::<SessionListAnswer>),
            errors: READ_ERRORS,
        },
        Endpoint {
            method: "post",
            path: "/v1/sessions",
            summary: "Start a session that lives while keepalives reach the leader within its TTL",
            mutation: true,
            body: Some(schema::<SessionGrantRequest>),
            query: None,
            success: Success::Json(schema::<SessionAnswer>),
            errors: &[ErrorCode::TooManySessions],
        },
        Endpoint {
            method: "post",
            path: "/v1/sessions/{id}/keepalive",
            summary: "Keep a session alive: once, or, with `stream`, for as long as the request \
                stays open",
            mutation: true,
            body: None,
            query: Some(schema::<SessionKeepaliveQuery>),
            success: Success::JsonOrStream(
                schema::<SessionAnswer>,
                schema::<SessionStreamEvent>,
                "The session's TTL, counted again from now on the leader's clock; with \
                 `stream`, server-sent events `keepalive` (one every third of the TTL), then \
                 `ended` or `stopped`, the last.",
            ),
            errors: &[
                ErrorCode::NoSuchSession,
                ErrorCode::NotLeader,
                ErrorCode::LogDisabled,
                ErrorCode::Busy,
                ErrorCode::Timeout,
                ErrorCode::BadQuery,
                ErrorCode::BadPath,
                ErrorCode::TooManyStreams,
            ],
        },
        Endpoint {
            method: "delete",
            path: "/v1/sessions/{id}",
            summary: "End a session now: its keys are deleted and its jobs ready again",
            mutation: true,
            body: None,
            query: Some(schema::<SessionRevokeQuery>),
            success: Success::Json(schema::<SessionRevokeAnswer>),
            errors: &[
                ErrorCode::NoSuchSession,
                ErrorCode::BadQuery,
                ErrorCode::BadPath,
            ],
        },
    ]
}

/// The errors `endpoint` may answer, each once, in the order of [`ErrorCode::status`].
pub fn errors_of(endpoint: &Endpoint) -> Vec<ErrorCode> {
    let mut codes: Vec<ErrorCode> = COMMON_ERRORS.to_vec();
    if endpoint.mutation {
        codes.extend_from_slice(MUTATION_ERRORS);
    }
    if endpoint.body.is_some() {
        codes.extend_from_slice(BODY_ERRORS);
    }
    if endpoint.mutation
        && (endpoint.path.starts_with("/v1/kv")
            || endpoint.path.starts_with("/v1/jobs")
            || endpoint.path.starts_with("/v1/sessions"))
    {
        codes.extend_from_slice(WRITE_ERRORS);
    }
    if endpoint.mutation && endpoint.path.starts_with("/v1/members") {
        codes.extend_from_slice(MEMBERSHIP_ERRORS);
    }
    codes.extend_from_slice(endpoint.errors);
    let mut unique = Vec::new();
    for code in codes {
        if !unique.contains(&code) {
            unique.push(code);
        }
    }
    unique.sort_by_key(|code| (code.status(), code.as_str()));
    unique
}

/// The whole OpenAPI 3.1 document.
pub fn document() -> Value {
    let mut requests = generator(SchemaSettings::draft2020_12().for_deserialize());
    let mut answers = generator(SchemaSettings::draft2020_12().for_serialize());
    let error = answers.subschema_for::<ErrorAnswer>();
    let mut paths = Map::new();
    for endpoint in endpoints() {
        let operation = operation(&endpoint, &mut requests, &mut answers, &error);
        let item = paths
            .entry(endpoint.path.to_owned())
            .or_insert_with(|| json!({}));
        if let Some(parameter) = path_parameter(endpoint.path) {
            item["parameters"] = json!([parameter]);
        }
        item[endpoint.method] = operation;
    }
    let mut schemas = requests.take_definitions(true);
    for (name, schema) in answers.take_definitions(true) {
        schemas.entry(name).or_insert(schema);
    }
    for query in query_type_names() {
        schemas.remove(query);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "conclave admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The admin HTTP API of a conclave node: the election's status and \
                commands, the replicated key-value store and job queue, and the event streams. \
                JSON is snake_case; every error is {\"error\": CODE, \"message\": …}; every \
                JSON answer but /health, a 401 and a 503 `unavailable` carries the fencing \
                token (term, leader, fencing_token). docs/api.md explains each endpoint with \
                examples.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An admin token (admin.token_file, or a named token of \
                        admin.tokens_file with its role): needed by every mutation when one is \
                        set, and by reads too where admin.listen is not a loopback address. \
                        A read token may read; a write token may also change keys, jobs and \
                        sessions (within its key prefixes and queues, when it names them); an \
                        admin token may do everything, including the election's commands, \
                        membership, purges and /v1/snapshot. A known token whose role does not \
                        cover the request is answered 403 forbidden.",
                },
            },
        },
    })
}

fn generator(settings: SchemaSettings) -> SchemaGenerator {
    let mut settings = settings;
    settings.definitions_path = COMPONENTS.into();
    settings.meta_schema = None;
    settings.into_generator()
}

/// The query structs, whose fields become parameters rather than schemas of their own.
fn query_type_names() -> [&'static str; 10] {
    [
        "SessionListQuery",
        "SessionKeepaliveQuery",
        "SessionRevokeQuery",
        "KvListQuery",
        "KvGetQuery",
        "KvDeleteQuery",
        "JobListQuery",
        "PurgeOneQuery",
        "LogQuery",
        "SnapshotQuery",
    ]
}

fn path_parameter(path: &str) -> Option<Value> {
    if path.starts_with("/v1/members/") {
        Some(json!({
            "name": "id", "in": "path", "required": true,
            "description": "The member's node id.",
            "schema": {"type": "string", "minLength": 1},
        }))
    } else if path.contains("{key}") {
        Some(json!({
            "name": "key", "in": "path", "required": true,
            "description": "The key, percent-encoded; it may contain `/` and any UTF-8 text, \
                and must not be empty.",
            "schema": {"type": "string", "minLength": 1},
        }))
    } else if path.starts_with("/v1/sessions/") {
        Some(json!({
            "name": "id", "in": "path", "required": true,
            "description": "The session's id.",
            "schema": {"type": "integer", "format": "uint64", "minimum": 1},
        }))
    } else if path.contains("{id}") {
        Some(json!({
            "name": "id", "in": "path", "required": true,
            "description": "The job's id.",
            "schema": {"type": "integer", "format": "uint64", "minimum": 1},
        }))
    } else {
        None
    }
}

fn operation(
    endpoint: &Endpoint,
    requests: &mut SchemaGenerator,
    answers: &mut SchemaGenerator,
    error: &Schema,
) -> Value {
    let mut operation = json!({
        "summary": endpoint.summary,
        "operationId": operation_id(endpoint),
        "responses": responses(endpoint, answers, error),
    });
    if endpoint.mutation {
        operation["security"] = json!([{"bearer": []}]);
    } else if endpoint.path != "/health" {
        operation["security"] = json!([{}, {"bearer": []}]);
    }
    if let Some(body) = endpoint.body {
        operation["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": body(requests)}},
        });
    }
    if let Some(query) = endpoint.query {
        operation["parameters"] = Value::Array(query_parameters(query, requests));
    }
    operation
}

fn operation_id(endpoint: &Endpoint) -> String {
    let words: Vec<&str> = endpoint
        .path
        .split('/')
        .filter(|part| !part.is_empty() && *part != "v1")
        .map(|part| part.trim_matches(|c| c == '{' || c == '}'))
        .collect();
    format!("{}_{}", endpoint.method, words.join("_").replace('-', "_"))
}

fn responses(endpoint: &Endpoint, answers: &mut SchemaGenerator, error: &Schema) -> Value {
    let mut responses = Map::new();
    let ok = match endpoint.success {
        Success::Json(answer) => json!({
            "description": "Done.",
            "content": {"application/json": {"schema": answer(answers)}},
        }),
        Success::Events(data, names) => json!({
            "description": format!(
                "A stream of server-sent events ({names}); each `data:` line is this JSON and \
                 each event carries an `id:` to resume from with Last-Event-ID."
            ),
            "content": {"text/event-stream": {"schema": data(answers)}},
        }),
        Success::JsonOrWatch(answer, event) => json!({
            "description": "The key; with `watch`, a stream of server-sent events `put` (this \
                key's KeyValue), `delete` (KvDeleted) and `compacted` (Compacted, the last), \
                each with the change's revision as its `id:`.",
            "content": {
                "application/json": {"schema": answer(answers)},
                "text/event-stream": {"schema": {"oneOf": [
                    event(answers),
                    answers.subschema_for::<KvDeleted>(),
                    answers.subschema_for::<Compacted>(),
                ]}},
            },
        }),
        Success::Binary(description) => binary_response(description),
        Success::JsonOrStream(answer, event, description) => json!({
            "description": description,
            "content": {
                "application/json": {"schema": answer(answers)},
                "text/event-stream": {"schema": event(answers)},
            },
        }),
    };
    responses.insert("200".to_owned(), ok);
    let mut by_status: Vec<(u16, Vec<&'static str>)> = Vec::new();
    for code in errors_of(endpoint) {
        match by_status.last_mut() {
            Some((status, codes)) if *status == code.status() => codes.push(code.as_str()),
            _ => by_status.push((code.status(), vec![code.as_str()])),
        }
    }
    if matches!(endpoint.path, "/health" | "/ready") {
        responses.insert(
            "503".to_owned(),
            json!({
                "description": "Not alive, or not ready: the same object as the 200 answer.",
                "content": {"application/json": {"schema": match endpoint.success {
                    Success::Json(answer) => answer(answers),
                    _ => error.clone(),
                }}},
            }),
        );
        by_status.retain(|(status, _)| *status != 503);
    }
    for (status, codes) in by_status {
        responses.insert(
            status.to_string(),
            json!({
                "description": format!("error: {}", codes.join(", ")),
                "content": {"application/json": {"schema": error.clone()}},
            }),
        );
    }
    Value::Object(responses)
}

/// The 200 answer of a binary endpoint (a saved snapshot): its media type, and the headers
/// that carry its position, checksum and the fencing token.
fn binary_response(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {
            SNAPSHOT_INDEX_HEADER: response_header(
                "The index of the last entry the image covers.",
                json!({"type": "integer", "minimum": 0}),
            ),
            SNAPSHOT_TERM_HEADER: response_header(
                "The term of that entry.",
                json!({"type": "integer", "minimum": 0}),
            ),
            SNAPSHOT_SHA256_HEADER: response_header(
                "The checksum the file ends with, in hex.",
                json!({"type": "string", "pattern": "^[0-9a-f]{64}$"}),
            ),
            TERM_HEADER: response_header(
                "The answering node's current term.",
                json!({"type": "integer", "minimum": 0}),
            ),
            LEADER_HEADER: response_header(
                "The leader it knows; absent while none is known.",
                json!({"type": "string"}),
            ),
            FENCING_TOKEN_HEADER: response_header(
                "TERM:LEADER; absent while no leader is known.",
                json!({"type": "string"}),
            ),
        },
        "content": {SNAPSHOT_MEDIA_TYPE: {"schema": {
            "type": "string",
            "contentMediaType": SNAPSHOT_MEDIA_TYPE,
        }}},
    })
}

/// A response header: what it says, and its schema.
fn response_header(description: &str, schema: Value) -> Value {
    json!({"description": description, "schema": schema})
}

/// The parameters of a query struct: one per property of its schema.
fn query_parameters(query: SchemaOf, requests: &mut SchemaGenerator) -> Vec<Value> {
    let reference = query(requests);
    let name = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|path| path.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let Some(definition) = requests.definitions().get(&name).cloned() else {
        return Vec::new();
    };
    let required: Vec<&str> = definition
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = definition.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut schema = schema.clone();
            let description = schema
                .as_object_mut()
                .and_then(|object| object.remove("description"))
                .unwrap_or(Value::Null);
            json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "description": description,
                "schema": schema,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error code an endpoint lists has the status its response is filed under.
    #[test]
    fn every_error_is_filed_under_its_status() {
        let document = document();
        for endpoint in endpoints() {
            let responses = &document["paths"][endpoint.path][endpoint.method]["responses"];
            for code in errors_of(&endpoint) {
                let described = responses[code.status().to_string()]["description"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    described.contains(code.as_str())
                        || matches!(endpoint.path, "/health" | "/ready"),
                    "{} {}: {code} not under {}",
                    endpoint.method,
                    endpoint.path,
                    code.status()
                );
            }
        }
    }

    /// Every `$ref` points at a schema the document holds.
    #[test]
    fn every_reference_resolves() {
        let document = document();
        let text = document.to_string();
        let schemas = document["components"]["schemas"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = piece.split('"').next().unwrap_or_default();
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("a reference outside the components: {target}"));
            assert!(schemas.contains_key(name), "no schema {name}");
        }
    }
}
