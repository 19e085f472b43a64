//! The key-value store's endpoints (LOG-5, LOG-6, LOG-7, LOG-8): `PUT`, `GET` and `DELETE
//! /v1/kv/{key}`, `GET /v1/kv?prefix=` (paged) and the watch stream of a key.

use serde::{Deserialize, Serialize};

use crate::common::Fencing;

/// A key as it is: the one shape of a key everywhere it appears (a read, a list, a watch's
/// `put` event, a write's `previous`, a failed compare's `current`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// The store revision that last changed it (what `if_revision` compares with).
    pub revision: u64,
    /// The store revision that created it (since it last did not exist).
    pub create_revision: u64,
    /// Puts since it was created, from 1.
    pub version: u64,
    /// The session it goes with: it is deleted when that session ends; null for a key of
    /// its own.
    pub session: Option<u64>,
}

/// `PUT /v1/kv/{key}`: set the key, if the comparisons given hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PutRequest {
    /// The new value (UTF-8 text).
    pub value: String,
    /// Only if the key's `revision` is this; 0: only if the key does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_revision: Option<u64>,
    /// Only if the key exists with this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_value: Option<String>,
    /// Tie the key to this live session: it is deleted when the session ends. A put without
    /// it unties the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// The client's id for this write: sent again (after an answer that did not arrive) it is
    /// applied at most once, and answers what the first one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The query of `GET /v1/kv/{key}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KvGetQuery {
    /// Read this node's copy as it is, on any node, instead of a linearizable read on the
    /// leader.
    #[serde(default)]
    pub stale: bool,
    /// Instead of reading: stream the key's changes from this store revision on, as
    /// server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<u64>,
}

/// The query of `DELETE /v1/kv/{key}` (a DELETE has no body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KvDeleteQuery {
    /// Only if the key's `revision` is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_revision: Option<u64>,
    /// The client's id for this write (applied at most once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The query of `GET /v1/kv`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KvListQuery {
    /// Only keys starting with this; every key without it.
    #[serde(default)]
    pub prefix: String,
    /// Keys per page, 1 to 1000; 100 without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The `continue` of the previous page, to read the next one.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_from: Option<String>,
    /// Read this node's copy as it is.
    #[serde(default)]
    pub stale: bool,
}

/// The answer of `PUT` and `DELETE /v1/kv/{key}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KvWriteAnswer {
    /// The key written.
    pub key: String,
    /// The store revision after the write (the key's `revision` after a put).
    pub revision: u64,
    /// The key as it was before the write; null when it did not exist.
    pub previous: Option<KeyValue>,
    /// The request id was applied before: this is what the first write answered, and nothing
    /// changed now.
    pub replayed: bool,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The answer of `GET /v1/kv/{key}`: the key, and the fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KvGetAnswer {
    /// The key as it is.
    #[serde(flatten)]
    pub kv: KeyValue,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The answer of `GET /v1/kv`: one page of keys, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KvListAnswer {
    /// The store revision this page was read at (each page is read at its own).
    pub revision: u64,
    /// The keys, in byte order of the key.
    pub items: Vec<KeyValue>,
    /// Pass this as `continue` to read the next page; null on the last page.
    #[serde(rename = "continue")]
    pub continue_from: Option<String>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// The data of a watch's `delete` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KvDeleted {
    /// The key deleted.
    pub key: String,
    /// The store revision of the delete.
    pub revision: u64,
}

/// The data of a watch's `compacted` event, its last: the revision asked for is older than the
/// history the node keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Compacted {
    /// The oldest revision a watch can start from now.
    pub oldest: u64,
}

/// One event of a key's watch stream (`GET /v1/kv/{key}?watch=REV`): its `event:` line is
/// [`KvWatchEvent::name`], its `id:` line the change's revision, its `data:` line the object.
/// The stream's last event, when the history no longer reaches back far enough, is
/// `compacted` ([`Compacted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvWatchEvent {
    /// The key was put; it is now this.
    Put(KeyValue),
    /// The key was deleted.
    Delete(KvDeleted),
}

impl KvWatchEvent {
    /// The event's name: `put` or `delete`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Put(_) => "put",
            Self::Delete(_) => "delete",
        }
    }

    /// The store revision of the change, the event's `id:`.
    pub fn revision(&self) -> u64 {
        match self {
            Self::Put(kv) => kv.revision,
            Self::Delete(deleted) => deleted.revision,
        }
    }
}
