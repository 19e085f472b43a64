//! The sessions' endpoints (SESS-1, SESS-2): grant, keepalive (one request, or one streaming
//! request that keeps the session alive for as long as it stays open), revoke and list.
//!
//! A session is a client's proof of life: the leader ends it when no keepalive came for its
//! TTL, on the leader's own clock, and the keys written and the jobs claimed with it end
//! with it.

use serde::{Deserialize, Serialize};

use crate::common::{ErrorAnswer, Fencing};

/// `POST /v1/sessions`: start a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionGrantRequest {
    /// How long the leader waits for a keepalive before it ends the session, in milliseconds
    /// (500 to 86400000).
    pub ttl_ms: u64,
    /// What to call it, for operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The jobs it may hold claimed at once (1 to 10000); 64 without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_claims: Option<u32>,
    /// The client's id for this write (applied at most once: a retried grant answers the
    /// same session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// A live session: the one shape of a session wherever it appears.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Session {
    /// Its id, from 1, never given twice.
    pub session: u64,
    /// What its client called it; null if nothing.
    pub name: Option<String>,
    /// Its time to live, in milliseconds.
    pub ttl_ms: u64,
    /// The jobs it may hold claimed at once.
    pub max_claims: u32,
    /// The log index of the entry that granted it.
    pub granted_at_index: u64,
    /// How long it has left on the leader's clock before it ends without a keepalive; null
    /// in a list read from a node that does not lead (`stale`).
    pub expires_in_ms: Option<u64>,
    /// Keys written with it.
    pub keys: u64,
    /// Jobs it holds claimed.
    pub claims: u64,
}

/// The answer of `POST /v1/sessions` and `POST /v1/sessions/{id}/keepalive`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionAnswer {
    /// The session's id.
    pub session: u64,
    /// Its time to live: the next keepalive is due within it.
    pub ttl_ms: u64,
    /// The request id was applied before: this is the session it granted then.
    pub replayed: bool,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The answer of `DELETE /v1/sessions/{id}`: what ended with the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionRevokeAnswer {
    /// The session.
    pub session: u64,
    /// Keys deleted with it.
    pub deleted_keys: u64,
    /// Jobs it held, ready again, by id.
    pub requeued: Vec<u64>,
    /// Jobs it held whose attempts were used up, dead now, by id.
    pub dead_lettered: Vec<u64>,
    /// The request id was applied before: this is what it ended then.
    pub replayed: bool,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The query of `DELETE /v1/sessions/{id}` (a DELETE has no body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionRevokeQuery {
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The query of `POST /v1/sessions/{id}/keepalive`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionKeepaliveQuery {
    /// Keep the session alive for as long as this request stays open: the answer is a
    /// stream of server-sent events ([`SessionStreamEvent`]), one keepalive every third of
    /// the TTL.
    #[serde(default)]
    pub stream: bool,
}

/// The query of `GET /v1/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionListQuery {
    /// Read this node's copy as it is, on any node (without `expires_in_ms`).
    #[serde(default)]
    pub stale: bool,
}

/// The answer of `GET /v1/sessions`: every live session, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionListAnswer {
    /// The sessions, by id.
    pub sessions: Vec<Session>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// An event of the streaming keepalive (`POST /v1/sessions/{id}/keepalive?stream=true`),
/// sent as a server-sent event whose `event:` is the `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionStreamEvent {
    /// The leader counted a keepalive: the session has `ttl_ms` again from now.
    Keepalive {
        /// The session.
        session: u64,
        /// Its time to live.
        ttl_ms: u64,
    },
    /// The session is no longer live (revoked, or expired before the stream kept it); the
    /// stream ends after this event.
    Ended {
        /// The session.
        session: u64,
    },
    /// The keepalives stopped: this node no longer leads (`not_leader`, naming the leader
    /// when it knows one) or could not reach its quorum in time. The stream ends after this
    /// event; the session lives on until its TTL runs out on the leader, so open a stream
    /// there.
    Stopped {
        /// Why, in the one error shape.
        error: Box<ErrorAnswer>,
    },
}
