//! `GET /v1/snapshot`: a consistent, checksummed image of the replicated state machine at a
//! committed index, for `conclave snapshot save` (MEMB-6). The answer is binary — the saved
//! snapshot file whose layout `docs/operations.md` ("Backup and restore") and
//! conclave-storage's `SnapshotBackup` describe — so the fencing token and the image's
//! position travel in headers; errors are JSON, as everywhere.

use serde::{Deserialize, Serialize};

/// The media type of the answer: the saved snapshot file, byte for byte.
pub const SNAPSHOT_MEDIA_TYPE: &str = "application/octet-stream";

/// Header of the answer: the index of the last entry the image covers.
pub const SNAPSHOT_INDEX_HEADER: &str = "conclave-snapshot-index";
/// Header of the answer: the term of that entry.
pub const SNAPSHOT_TERM_HEADER: &str = "conclave-snapshot-term";
/// Header of the answer: the SHA-256 checksum the file ends with, in hex.
pub const SNAPSHOT_SHA256_HEADER: &str = "conclave-snapshot-sha256";

/// Header of a binary answer: the answering node's current term (the JSON answers' `term`).
pub const TERM_HEADER: &str = "conclave-term";
/// Header of a binary answer: the leader the node knows, absent while none is known (the
/// JSON answers' `leader`).
pub const LEADER_HEADER: &str = "conclave-leader";
/// Header of a binary answer: `TERM:LEADER`, absent while no leader is known (the JSON
/// answers' `fencing_token`).
pub const FENCING_TOKEN_HEADER: &str = "conclave-fencing-token";

/// The query of `GET /v1/snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SnapshotQuery {
    /// Take the image from this node's copy as it is, on any node, instead of on the leader
    /// after a linearizable read barrier: still a consistent image at a committed index, but
    /// perhaps without the latest acknowledged writes.
    #[serde(default)]
    pub stale: bool,
}
