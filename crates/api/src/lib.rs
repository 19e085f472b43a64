//! conclave's admin HTTP API as types (CB-3, CB-5, CB-6, LOG-1, LOG-8): every request body,
//! query, answer, error and server-sent event the node speaks, in one crate that the node
//! (which serializes answers and reads requests), the `conclave` CLI (which does the
//! opposite) and the Rust façade share, so that no side spells a field the other does not.
//!
//! # The contract
//!
//! - JSON is snake_case, values included (`"state": "dead"`); a sum type is an internally
//!   tagged object (`{"kind": "nacked", "worker": …}`, `{"type": "kv_put", …}`), never a Rust
//!   variant name. One object has one shape wherever it appears: a [`Job`] is the same object
//!   in a claim, an ack, a list and an error.
//! - Every error is an [`ErrorAnswer`]: `{"error": CODE, "message": …}` with a stable
//!   [`ErrorCode`] and the status that code always has ([`ErrorCode::status`]).
//! - Every JSON answer carries the fencing token ([`Fencing`]: `term`, `leader`,
//!   `fencing_token`), errors included, except three: `/health` (it must not wait on the
//!   election), a 401 (the caller proved nothing) and a 503 `unavailable` from a node whose
//!   election has stopped (there is no state to read). The one binary answer, a saved
//!   snapshot from `GET /v1/snapshot`, carries it in headers ([`TERM_HEADER`],
//!   [`LEADER_HEADER`], [`FENCING_TOKEN_HEADER`]).
//! - Fields are only ever added, never renamed or removed; a client ignores fields it does
//!   not know and reads an unknown error code as [`ErrorCode::Unknown`].
//!
//! `docs/api.md` documents every endpoint with examples; `docs/openapi.json` is generated
//! from these types (feature `schema`) and a test holds a running node to both.

mod common;
mod election;
mod events;
mod format;
mod jobs;
mod kv;
mod log;
mod members;
#[cfg(feature = "schema")]
pub mod openapi;
mod paging;
mod sessions;
mod snapshot;

pub use common::{
    DEADLINE_HEADER, ErrorAnswer, ErrorCode, Fencing, HTTPS_ONLY_ANSWER, LAST_EVENT_ID_HEADER,
    MAX_TIMEOUT_MS, TIMEOUT_HEADER, WRITE_SIZE_LIMIT,
};
pub use election::{
    AutoElectionRequest, CommandAnswer, DongleAnswer, FollowerAnswer, GossipAnswer, HealthAnswer,
    HistoryAnswer, HistoryEntry, LogStatus, Outcome, PeerAnswer, PeersAnswer, PriorityAnswer,
    ReadyAnswer, SetLeaderRequest, StaticAnswer, StatusAnswer, UnansweredAnswer,
};
pub use election::{ConfigurationAnswer, LearnerLagAnswer};
pub use events::{
    LaggedEvent, LeaderChangedEvent, MembershipChangedEvent, PeerStatusChangedEvent, StreamEvent,
};
pub use format::{human_duration, rfc3339_utc, rtt_millis};
pub use jobs::{
    AckRequest, AttemptFailure, ClaimRequest, EnqueueRequest, Job, JobAnswer, JobListAnswer,
    JobListQuery, JobState, MAX_CLAIM_WAIT_MS, NackRequest, PurgeAnswer, PurgeOneQuery,
    PurgeRequest, RetryRequest,
};
pub use kv::{
    Compacted, KeyValue, KvDeleteQuery, KvDeleted, KvGetAnswer, KvGetQuery, KvListAnswer,
    KvListQuery, KvWatchEvent, KvWriteAnswer, PutRequest,
};
pub use log::{
    ExpiredClaim, LogCommand, LogEntriesAnswer, LogEntry, LogEntryKind, LogQuery, LogWrite,
};
pub use members::{AddMemberRequest, Member, MemberRole, MembersAnswer};
pub use paging::{
    Continuation, ContinuationError, DEFAULT_PAGE_LIMIT, LOG_DEFAULT_LIMIT, LOG_MAX_LIMIT,
    MAX_PAGE_LIMIT,
};
pub use sessions::{
    Session, SessionAnswer, SessionGrantRequest, SessionKeepaliveQuery, SessionListAnswer,
    SessionListQuery, SessionRevokeAnswer, SessionRevokeQuery, SessionStreamEvent,
};
pub use snapshot::{
    FENCING_TOKEN_HEADER, LEADER_HEADER, SNAPSHOT_INDEX_HEADER, SNAPSHOT_MEDIA_TYPE,
    SNAPSHOT_SHA256_HEADER, SNAPSHOT_TERM_HEADER, SnapshotQuery, TERM_HEADER,
};
