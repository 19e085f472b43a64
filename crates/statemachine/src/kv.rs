//! The key-value store of cluster facts (LOG-5): one revision for the whole store, as etcd's,
//! compare-and-set on a key's revision or value, and a bounded history of changes that a watch
//! reads from a revision.
//!
//! Every write that changes something takes the next store-wide revision; each key keeps the
//! revision that created it (`create_revision`), the one that last changed it
//! (`mod_revision`) and how many times it was put since it was created (`version`). A write
//! whose comparison fails, and a delete of an absent key, change nothing and take no revision,
//! so revisions count changes and each revision is exactly one [`Change`].
//!
//! Reads ([`KvStore::get`], [`KvStore::list`], [`KvStore::changes_from`]) are not log entries:
//! the node serves them from its own copy once that copy has applied the read index (LOG-7).
//! The history keeps the last changes only (its length is set by
//! [`StateConfig::watch_history`](crate::StateConfig)); a watch from an older revision is told
//! where the kept history starts, as etcd answers a watch below its compaction.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::command::KvCommand;
use crate::error::{Error, Result};

/// A key and its value as a read sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// The revision that created the key (since it last did not exist).
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// Puts since it was created, from 1.
    pub version: u64,
}

/// What a write to the store answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvOutcome {
    /// The write took effect at `revision`; the key as it was before, if it existed.
    Applied {
        /// The store's revision after the write.
        revision: u64,
        /// The key before the write.
        previous: Option<KeyValue>,
    },
    /// A comparison did not hold; nothing changed. The key as it is, if it exists.
    CompareFailed {
        /// The key now.
        current: Option<KeyValue>,
    },
    /// A delete of a key that does not exist; nothing changed.
    NotFound,
}

/// One change in the store's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// The key was put; it is now this.
    Put(KeyValue),
    /// The key was deleted at `revision`.
    Delete {
        /// The key.
        key: String,
        /// The revision of the delete.
        revision: u64,
    },
}

impl Change {
    /// The revision of this change.
    #[must_use]
    pub fn revision(&self) -> u64 {
        match self {
            Self::Put(kv) => kv.mod_revision,
            Self::Delete { revision, .. } => *revision,
        }
    }

    /// The key this change is about.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            Self::Put(kv) => &kv.key,
            Self::Delete { key, .. } => key,
        }
    }
}

/// Which keys a watch follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFilter<'a> {
    /// This key only.
    Exact(&'a str),
    /// Every key starting with this; `Prefix("")` is every key.
    Prefix(&'a str),
}

impl KeyFilter<'_> {
    fn matches(self, key: &str) -> bool {
        match self {
            Self::Exact(wanted) => key == wanted,
            Self::Prefix(prefix) => key.starts_with(prefix),
        }
    }
}

/// A key's value and revisions; the key itself is the map's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredValue {
    value: String,
    create_revision: u64,
    mod_revision: u64,
    version: u64,
}

/// The key-value store. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvStore {
    revision: u64,
    entries: BTreeMap<String, StoredValue>,
    /// The last changes, oldest first, their revisions consecutive and ending at `revision`.
    history: VecDeque<Change>,
    /// A setting of this node, not replicated state: kept out of snapshots.
    #[serde(skip)]
    history_limit: usize,
}

impl KvStore {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            revision: 0,
            entries: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit,
        }
    }

    /// The store's revision: the number of changes ever applied.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The key, if it exists.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<KeyValue> {
        self.entries.get(key).map(|stored| key_value(key, stored))
    }

    /// Every key starting with `prefix`, in key order; `""` lists the whole store.
    #[must_use]
    pub fn list(&self, prefix: &str) -> Vec<KeyValue> {
        self.entries
            .range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, stored)| key_value(key, stored))
            .collect()
    }

    /// The changes at `from_revision` and after (inclusive, as etcd's watch start revision)
    /// of the keys `filter` selects, oldest first. Empty when nothing changed since; a watcher
    /// asks again from the last revision it saw plus one. A revision whose change is no longer
    /// kept answers [`Error::Compacted`] with the oldest one that is.
    pub fn changes_from(&self, from_revision: u64, filter: KeyFilter<'_>) -> Result<Vec<Change>> {
        let oldest = self.oldest_kept_revision();
        // Revision 0 is before the first change: a watch "from the beginning".
        let from = from_revision.max(1);
        if from < oldest {
            return Err(Error::Compacted { oldest });
        }
        let skip = usize::try_from(from - oldest).unwrap_or(usize::MAX);
        Ok(self
            .history
            .iter()
            .skip(skip)
            .filter(|change| filter.matches(change.key()))
            .cloned()
            .collect())
    }

    /// The oldest revision whose change is kept; one past the store's revision when none is.
    fn oldest_kept_revision(&self) -> u64 {
        (self.revision + 1).saturating_sub(self.history.len() as u64)
    }

    pub(crate) fn apply(&mut self, command: &KvCommand) -> KvOutcome {
        match command {
            KvCommand::Put {
                key,
                value,
                if_revision,
                if_value,
            } => self.put(key, value, *if_revision, if_value.as_deref()),
            KvCommand::Delete { key, if_revision } => self.delete(key, *if_revision),
        }
    }

    fn put(
        &mut self,
        key: &str,
        value: &str,
        if_revision: Option<u64>,
        if_value: Option<&str>,
    ) -> KvOutcome {
        let current = self.entries.get(key);
        if !compare(current, if_revision, if_value) {
            return KvOutcome::CompareFailed {
                current: self.get(key),
            };
        }
        let previous = self.get(key);
        let revision = self.next_revision();
        let stored = match previous.as_ref() {
            Some(before) => StoredValue {
                value: value.to_owned(),
                create_revision: before.create_revision,
                mod_revision: revision,
                version: before.version.saturating_add(1),
            },
            None => StoredValue {
                value: value.to_owned(),
                create_revision: revision,
                mod_revision: revision,
                version: 1,
            },
        };
        let now = key_value(key, &stored);
        self.entries.insert(key.to_owned(), stored);
        self.record(Change::Put(now));
        KvOutcome::Applied { revision, previous }
    }

    fn delete(&mut self, key: &str, if_revision: Option<u64>) -> KvOutcome {
        let current = self.entries.get(key);
        if !compare(current, if_revision, None) {
            return KvOutcome::CompareFailed {
                current: self.get(key),
            };
        }
        let Some(previous) = self.get(key) else {
            return KvOutcome::NotFound;
        };
        self.entries.remove(key);
        let revision = self.next_revision();
        self.record(Change::Delete {
            key: key.to_owned(),
            revision,
        });
        KvOutcome::Applied {
            revision,
            previous: Some(previous),
        }
    }

    fn next_revision(&mut self) -> u64 {
        self.revision = self.revision.saturating_add(1);
        self.revision
    }

    fn record(&mut self, change: Change) {
        self.history.push_back(change);
        self.trim_history();
    }

    fn trim_history(&mut self) {
        while self.history.len() > self.history_limit {
            self.history.pop_front();
        }
    }

    /// Checks a store decoded from a snapshot and adopts this node's history length.
    pub(crate) fn restored(mut self, history_limit: usize) -> Result<Self> {
        for stored in self.entries.values() {
            let ordered = 1 <= stored.create_revision
                && stored.create_revision <= stored.mod_revision
                && stored.mod_revision <= self.revision
                && stored.version >= 1;
            if !ordered {
                return Err(Error::InconsistentSnapshot(
                    "a key's revisions are out of order",
                ));
            }
        }
        if self.history.len() as u64 > self.revision {
            return Err(Error::InconsistentSnapshot(
                "more changes than revisions in the history",
            ));
        }
        let first = self.oldest_kept_revision();
        let consecutive = self
            .history
            .iter()
            .zip(first..)
            .all(|(change, expected)| change.revision() == expected);
        if !consecutive {
            return Err(Error::InconsistentSnapshot(
                "the history's revisions are not consecutive up to the store's",
            ));
        }
        self.history_limit = history_limit;
        self.trim_history();
        Ok(self)
    }
}

/// Whether a write's comparisons hold for the key as it is. `if_revision: Some(0)` asks that
/// the key does not exist; `if_value` asks that it exists with that value.
fn compare(current: Option<&StoredValue>, if_revision: Option<u64>, if_value: Option<&str>) -> bool {
    let revision_holds = match (if_revision, current) {
        (None, _) => true,
        (Some(0), current) => current.is_none(),
        (Some(wanted), Some(stored)) => stored.mod_revision == wanted,
        (Some(_), None) => false,
    };
    let value_holds = match (if_value, current) {
        (None, _) => true,
        (Some(wanted), Some(stored)) => stored.value == wanted,
        (Some(_), None) => false,
    };
    revision_holds && value_holds
}

fn key_value(key: &str, stored: &StoredValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: stored.value.clone(),
        create_revision: stored.create_revision,
        mod_revision: stored.mod_revision,
        version: stored.version,
    }
}
