//! What every answer shares: the fencing token (CB-5), the error answer with its stable codes,
//! and the headers of the contract.

use serde::{Deserialize, Serialize};

use crate::jobs::JobState;
use crate::kv::KeyValue;

/// The header a client sets on a mutation: the Unix time in milliseconds after which the node
/// must not carry it out, because the client has stopped waiting by then. A node refuses,
/// with 503 `deadline_passed`, to start a mutation whose deadline has passed by its clock.
pub const DEADLINE_HEADER: &str = "conclave-deadline";

/// The header a client sets on a mutation instead of [`DEADLINE_HEADER`] when the two
/// machines' clocks may disagree: how many milliseconds the client still waits. The node
/// counts it from when it reads the request, on its own clock, so no two clocks are compared.
/// When both are sent, this one decides. The CLI sends this one.
pub const TIMEOUT_HEADER: &str = "conclave-timeout-ms";

/// The largest [`TIMEOUT_HEADER`] a node takes: one day.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// How large a write may be, as the 413 `too_large` answer, `kv put --help`, `jobs add --help`,
/// `conclave defaults` and the documentation all say it.
pub const WRITE_SIZE_LIMIT: &str = "A write's value (a job's payload) may be up to 64 KiB \
    (65,536 bytes), its key up to 512 bytes (a job's queue up to 128) and its request id up to \
    128 bytes; a write larger than one frame travels in pieces, over UDP and ESP-NOW links \
    alike.";

/// The header an EventSource sends when it reconnects: the `id:` of the last event it
/// received, from which the stream resumes.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// How a listener with TLS (`admin.tls`, `metrics.tls`) begins its answer to a request in
/// plain HTTP: a 400 in plain text, not an [`ErrorAnswer`], since the client did not come to
/// the API (ADMIN-TLS). The rest of the line names the `https://` URL and the CA; the CLI
/// knows the answer by this beginning and says to use `https://` with `--cacert`.
pub const HTTPS_ONLY_ANSWER: &str = "this port of conclave speaks HTTPS";

/// The `(term, leader)` fencing token, flattened into every answer (CB-5): whatever a leader
/// drives can refuse a command stamped with a term older than one it has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fencing {
    /// The answering node's current term.
    pub term: u64,
    /// The leader it knows in that term; null while none is known.
    pub leader: Option<String>,
    /// `"<term>:<leader>"`, or null while no leader is known.
    pub fencing_token: Option<String>,
}

/// Why a request failed: a stable code, each with one HTTP status.
///
/// Codes are only ever added. A client that meets a code it does not know reads it as
/// [`ErrorCode::Unknown`] and goes by the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the body is not JSON, or not the object the endpoint takes (a missing, unknown or
    /// mistyped field).
    BadJson,
    /// 400: the query string does not parse, or names a parameter the endpoint does not take.
    BadQuery,
    /// 400: a part of the path does not parse (a job id that is not a number).
    BadPath,
    /// 400: a value breaks a rule: an empty or too long key, a lease out of range, an unknown
    /// peer, a malformed deadline header, a continuation from another list.
    InvalidArgument,
    /// 400: the election mode does not offer this command (gossip's `leader set`).
    NotOffered,
    /// 401: the request needs the bearer token and did not carry it, or carried another.
    Unauthorized,
    /// 403: the request carried a known token whose role, or whose key prefixes or queues,
    /// do not cover it; the message names the token (never its secret) and the role needed.
    Forbidden,
    /// 404: the key does not exist.
    NotFound,
    /// 404: no such job (never enqueued, or done long ago or purged, and forgotten).
    UnknownJob,
    /// 404: a claim found no ready job in the queue.
    NoneReady,
    /// 404: no endpoint at this path.
    NoSuchEndpoint,
    /// 404: the id is no member of the log's cluster (a promote or removal of a stranger).
    NoSuchMember,
    /// 404: no such live session (never granted, revoked, or expired): a keepalive, a
    /// revoke, or a key or claim that names it.
    NoSuchSession,
    /// 405: the path exists but not for this method; the `Allow` header lists those it takes.
    MethodNotAllowed,
    /// 409: an ack or nack from a worker that does not hold the job.
    NotHeld,
    /// 409: a retry or purge of a job that is not dead.
    NotDead,
    /// 409: the request id was used before for another write.
    RequestIdInUse,
    /// 409: the node runs no replicated log (`log.enabled = false`).
    LogDisabled,
    /// 409: the node's configuration does not allow this (a leader by configuration cannot
    /// resign, a cluster without a voter set has no members to change).
    NotAllowed,
    /// 409: another membership change is not committed yet; one change at a time.
    ChangeInProgress,
    /// 409: the learner does not hold the log through the commit index yet; the message says
    /// how many entries behind it is.
    NotCaughtUp,
    /// 409: the member is the cluster's last voter, which it cannot do without.
    LastVoter,
    /// 409: the id is a voter already (adding it as a learner would demote it).
    AlreadyMember,
    /// 409: as many sessions as the cluster keeps are live (100000); nothing changed.
    TooManySessions,
    /// 409: the session holds as many claims as its `max_claims`; nothing changed.
    TooManyClaims,
    /// 412: a compare-and-set did not hold; nothing changed.
    CompareFailed,
    /// 413: the write does not fit one log entry (`log.max_append_bytes`), or the body is
    /// larger than the API reads.
    TooLarge,
    /// 415: a body that is not `application/json`.
    UnsupportedMediaType,
    /// 507: the write would take the store past `log.max_store_bytes`, or the job queue past
    /// `log.max_jobs` (STORE-1, STORE-2); nothing changed. Reads, deletes, acks and purges
    /// still work: free room, then write again.
    StoreFull,
    /// 421: this node does not lead; the answer names the leader and, when `admin.peer_urls`
    /// lists it, its admin API (also in `Location`). Nothing was changed.
    NotLeader,
    /// 500: the node failed in a way it should not; its log says more.
    Internal,
    /// 503: the node has stopped, or is stopping.
    Unavailable,
    /// 503: the leader is handing over, or has too many reads or claims waiting; retry
    /// shortly.
    Busy,
    /// 503: the write was not committed (its leader lost its term) and was not applied; retry
    /// it with the same request id.
    Lost,
    /// 503: the node stopped before it knew the write's outcome; retry with the same request
    /// id, which is applied at most once.
    OutcomeUnknown,
    /// 503: the request's deadline (`conclave-deadline`, or `conclave-timeout-ms` counted from
    /// when the node read it) passed before the node got to it; nothing was changed.
    DeadlinePassed,
    /// 503: `admin.max_connections` connections are open.
    TooManyConnections,
    /// 503: `admin.max_event_streams` event streams are open.
    TooManyStreams,
    /// 503: another live node uses this node's id; it takes no part in elections.
    Quarantined,
    /// 503: the node abstains after starting without a term or vote, until the other voters
    /// show which terms are over.
    Abstaining,
    /// 503: the leader was elected moments ago and has not committed an entry of its term,
    /// which a membership change waits for; retry shortly.
    NotReady,
    /// 504: the cluster did not answer in time (no leader, no quorum); a write may still be
    /// applied later: retry it with the same request id.
    Timeout,
    /// A code this version does not know (a newer node's).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The HTTP status this code always comes with.
    pub fn status(self) -> u16 {
        match self {
            Self::BadJson
            | Self::BadQuery
            | Self::BadPath
            | Self::InvalidArgument
            | Self::NotOffered => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::NotFound
            | Self::UnknownJob
            | Self::NoneReady
            | Self::NoSuchEndpoint
            | Self::NoSuchMember
            | Self::NoSuchSession => 404,
            Self::MethodNotAllowed => 405,
            Self::NotHeld
            | Self::NotDead
            | Self::RequestIdInUse
            | Self::LogDisabled
            | Self::NotAllowed
            | Self::ChangeInProgress
            | Self::NotCaughtUp
            | Self::LastVoter
            | Self::AlreadyMember
            | Self::TooManySessions
            | Self::TooManyClaims => 409,
            Self::CompareFailed => 412,
            Self::TooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::StoreFull => 507,
            Self::NotLeader => 421,
            Self::Internal | Self::Unknown => 500,
            Self::Unavailable
            | Self::Busy
            | Self::Lost
            | Self::OutcomeUnknown
            | Self::DeadlinePassed
            | Self::TooManyConnections
            | Self::TooManyStreams
            | Self::Quarantined
            | Self::Abstaining
            | Self::NotReady => 503,
            Self::Timeout => 504,
        }
    }

    /// The code as the JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadJson => "bad_json",
            Self::BadQuery => "bad_query",
            Self::BadPath => "bad_path",
            Self::InvalidArgument => "invalid_argument",
            Self::NotOffered => "not_offered",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::UnknownJob => "unknown_job",
            Self::NoneReady => "none_ready",
            Self::NoSuchEndpoint => "no_such_endpoint",
            Self::NoSuchMember => "no_such_member",
            Self::NoSuchSession => "no_such_session",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::NotHeld => "not_held",
            Self::NotDead => "not_dead",
            Self::RequestIdInUse => "request_id_in_use",
            Self::LogDisabled => "log_disabled",
            Self::NotAllowed => "not_allowed",
            Self::ChangeInProgress => "change_in_progress",
            Self::NotCaughtUp => "not_caught_up",
            Self::LastVoter => "last_voter",
            Self::AlreadyMember => "already_member",
            Self::TooManySessions => "too_many_sessions",
            Self::TooManyClaims => "too_many_claims",
            Self::CompareFailed => "compare_failed",
            Self::TooLarge => "too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::StoreFull => "store_full",
            Self::NotLeader => "not_leader",
            Self::Internal => "internal",
            Self::Unavailable => "unavailable",
            Self::Busy => "busy",
            Self::Lost => "lost",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::DeadlinePassed => "deadline_passed",
            Self::TooManyConnections => "too_many_connections",
            Self::TooManyStreams => "too_many_streams",
            Self::Quarantined => "quarantined",
            Self::Abstaining => "abstaining",
            Self::NotReady => "not_ready",
            Self::Timeout => "timeout",
            Self::Unknown => "unknown",
        }
    }

    /// Whether the same request may simply be sent again later (with its request id, for a
    /// write): the cluster could not act now, but nothing says it will not.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Self::NotLeader
                | Self::Busy
                | Self::Lost
                | Self::OutcomeUnknown
                | Self::Timeout
                | Self::TooManyConnections
                | Self::TooManyStreams
                | Self::Abstaining
                | Self::NotReady
                | Self::ChangeInProgress
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error answer: `{"error": CODE, "message": …}`, the fencing token where the node could
/// read it, and the details the code names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorAnswer {
    /// What went wrong, as a stable code.
    pub error: ErrorCode,
    /// What went wrong and what to do about it, for people.
    pub message: String,
    /// The node that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// The fencing token: `term`, `leader` and `fencing_token`, flat in the answer (absent
    /// only from the errors that carry none: see the crate docs).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub fencing: Option<Fencing>,
    /// `not_leader`: the leader's admin API, when `admin.peer_urls` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_admin_url: Option<String>,
    /// `too_many_connections`, `too_many_streams`: the setting of the bound that refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// Key-value errors: the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `compare_failed`: the key as it is; null when it does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Option<KeyValue>>,
    /// Job errors: the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<u64>,
    /// `not_held`, `not_dead`: where the job is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// `request_id_in_use`: the request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ErrorAnswer {
    /// An error with its code and message and nothing else.
    pub fn new(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            message: message.into(),
            node_id: None,
            fencing: None,
            leader_admin_url: None,
            bound: None,
            key: None,
            current: None,
            job_id: None,
            state: None,
            request_id: None,
        }
    }

    /// The HTTP status of its code.
    pub fn status(&self) -> u16 {
        self.error.status()
    }

    /// The same with the fencing token added.
    #[must_use]
    pub fn with_fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = Some(fencing);
        self
    }
}

impl std::fmt::Display for ErrorAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code's JSON spelling is the one `as_str` gives, and reads back as itself.
    #[test]
    fn codes_are_snake_case_and_round_trip() {
        for code in [
            ErrorCode::BadJson,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::MethodNotAllowed,
            ErrorCode::NotLeader,
            ErrorCode::OutcomeUnknown,
            ErrorCode::TooManyStreams,
            ErrorCode::StoreFull,
        ] {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, serde_json::Value::from(code.as_str()));
            let back: ErrorCode = serde_json::from_value(json).unwrap_or(ErrorCode::Unknown);
            assert_eq!(back, code);
        }
    }

    /// A newer node's code reads as `unknown`, so an older client still gets the message.
    #[test]
    fn an_unknown_code_is_read_as_unknown() {
        let answer: ErrorAnswer =
            serde_json::from_str(r#"{"error": "quota_exceeded", "message": "full"}"#)
                .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(answer.error, ErrorCode::Unknown);
        assert_eq!(answer.message, "full");
    }

    /// The fencing token of an error is flat, with null for an unknown leader.
    #[test]
    fn an_error_carries_the_fencing_token_flat() {
        let answer = ErrorAnswer::new(ErrorCode::NotLeader, "no").with_fencing(Fencing {
            term: 3,
            leader: None,
            fencing_token: None,
        });
        assert_eq!(
            serde_json::to_value(&answer).unwrap_or_default(),
            serde_json::json!({
                "error": "not_leader", "message": "no",
                "term": 3, "leader": null, "fencing_token": null
            })
        );
        let back: ErrorAnswer = serde_json::from_value(serde_json::to_value(&answer).unwrap())
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(back.fencing, answer.fencing);
        let bare: ErrorAnswer =
            serde_json::from_str(r#"{"error": "unauthorized", "message": "token"}"#)
                .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(bare.fencing, None);
    }
}
