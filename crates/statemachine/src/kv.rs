//! The key-value store of cluster facts (LOG-5): one revision for the whole store, as etcd's,
//! compare-and-set on a key's revision or value, and a bounded history of changes that a watch
//! reads from a revision.
//!
//! How it behaves is documented on [`KvStore`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::command::KvCommand;
use crate::error::{Error, Result};
use crate::sessions::SessionId;
use crate::store_bounds::key_weight;

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
    /// The session it goes with (SESS-2), if any: it is deleted when that session ends.
    /// Appended with a default, so older snapshots and outcomes still read.
    #[serde(default)]
    pub session: Option<SessionId>,
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
    #[serde(default)]
    session: Option<SessionId>,
}

/// The key-value store of cluster facts.
///
/// Every write that changes something takes the next store-wide revision; each key keeps the
/// revision that created it (`create_revision`), the one that last changed it
/// (`mod_revision`) and how many times it was put since it was created (`version`). A write
/// whose comparison fails, and a delete of an absent key, change nothing and take no revision,
/// so revisions count changes and each revision is exactly one [`Change`].
///
/// Reads ([`KvStore::get`], [`KvStore::list`], [`KvStore::changes_from`]) are not log entries:
/// the node serves them from its own copy once that copy has applied the read index (LOG-7).
/// The history keeps the last changes only (its length is set by
/// [`StateConfig::watch_history`](crate::StateConfig)); a watch from an older revision is told
/// where the kept history starts, as etcd answers a watch below its compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvStore {
    revision: u64,
    entries: BTreeMap<String, StoredValue>,
    /// The last changes, oldest first, their revisions consecutive and ending at `revision`.
    history: VecDeque<Change>,
    /// A setting of this node, not replicated state: kept out of snapshots.
    #[serde(skip)]
    history_limit: usize,
    /// Keys by the session they go with; derived from `entries`, rebuilt on restore.
    #[serde(skip)]
    owned: BTreeMap<SessionId, BTreeSet<String>>,
    /// STORE-1: what `entries` weigh; derived from them, rebuilt on restore.
    #[serde(skip)]
    weight: u64,
}

impl KvStore {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            revision: 0,
            entries: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit,
            owned: BTreeMap::new(),
            weight: 0,
        }
    }

    /// STORE-1: what the keys weigh, as the store's bounds count it.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// How many keys go with `session`.
    #[must_use]
    pub fn owned_by(&self, session: SessionId) -> usize {
        self.owned.get(&session).map_or(0, BTreeSet::len)
    }

    /// The store's revision: the number of changes ever applied.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// How many keys exist.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key exists.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, stored)| key_value(key, stored))
            .collect()
    }

    /// One page of the keys starting with `prefix`, in key order: at most `limit` of those
    /// after `after` (from the first without it), and whether more follow.
    #[must_use]
    pub fn page(&self, prefix: &str, after: Option<&str>, limit: usize) -> (Vec<KeyValue>, bool) {
        let start = match after {
            // A continuation before the prefix starts at the prefix all the same.
            Some(after) if after >= prefix => std::ops::Bound::Excluded(after),
            _ => std::ops::Bound::Included(prefix),
        };
        let mut keys = self
            .entries
            .range::<str, _>((start, std::ops::Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, stored)| key_value(key, stored));
        let page: Vec<KeyValue> = keys.by_ref().take(limit).collect();
        let more = keys.next().is_some();
        (page, more)
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
                session,
            } => self.put(key, value, (*if_revision, if_value.as_deref()), *session),
            KvCommand::Delete { key, if_revision } => self.delete(key, *if_revision),
        }
    }

    fn put(
        &mut self,
        key: &str,
        value: &str,
        (if_revision, if_value): (Option<u64>, Option<&str>),
        session: Option<SessionId>,
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
                session,
            },
            None => StoredValue {
                value: value.to_owned(),
                create_revision: revision,
                mod_revision: revision,
                version: 1,
                session,
            },
        };
        if let Some(before) = previous.as_ref().and_then(|before| before.session) {
            self.disown(before, key);
        }
        if let Some(session) = session {
            self.owned
                .entry(session)
                .or_default()
                .insert(key.to_owned());
        }
        let now = key_value(key, &stored);
        self.weight = self.weight.saturating_add(key_weight(key, value));
        if let Some(before) = &previous {
            self.weight = self.weight.saturating_sub(key_weight(key, &before.value));
        }
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
        self.remove(key);
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

    /// Deletes every key that goes with `session`, because it ended (SESS-2): one change, and
    /// one revision, per key, in key order, so watchers see each delete. Returns how many.
    pub(crate) fn delete_owned(&mut self, session: SessionId) -> u64 {
        let keys = self.owned.remove(&session).unwrap_or_default();
        let mut deleted = 0;
        for key in keys {
            let Some(stored) = self.entries.remove(&key) else {
                continue;
            };
            self.weight = self.weight.saturating_sub(key_weight(&key, &stored.value));
            let revision = self.next_revision();
            self.record(Change::Delete { key, revision });
            deleted += 1;
        }
        deleted
    }

    /// Removes a key and its place in the index of session keys.
    fn remove(&mut self, key: &str) {
        let Some(stored) = self.entries.remove(key) else {
            return;
        };
        self.weight = self.weight.saturating_sub(key_weight(key, &stored.value));
        if let Some(session) = stored.session {
            self.disown(session, key);
        }
    }

    fn disown(&mut self, session: SessionId, key: &str) {
        if let Some(keys) = self.owned.get_mut(&session) {
            keys.remove(key);
            if keys.is_empty() {
                self.owned.remove(&session);
            }
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
        self.owned.clear();
        self.weight = 0;
        for (key, stored) in &self.entries {
            self.weight = self.weight.saturating_add(key_weight(key, &stored.value));
            if let Some(session) = stored.session {
                self.owned.entry(session).or_default().insert(key.clone());
            }
        }
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
fn compare(
    current: Option<&StoredValue>,
    if_revision: Option<u64>,
    if_value: Option<&str>,
) -> bool {
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
        session: stored.session,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &mut KvStore, key: &str, value: &str) -> KvOutcome {
        store.apply(&KvCommand::Put {
            key: key.into(),
            value: value.into(),
            if_revision: None,
            if_value: None,
            session: None,
        })
    }

    fn put_if(
        store: &mut KvStore,
        key: &str,
        value: &str,
        if_revision: Option<u64>,
        if_value: Option<&str>,
    ) -> KvOutcome {
        store.apply(&KvCommand::Put {
            key: key.into(),
            value: value.into(),
            if_revision,
            if_value: if_value.map(str::to_owned),
            session: None,
        })
    }

    fn delete(store: &mut KvStore, key: &str, if_revision: Option<u64>) -> KvOutcome {
        store.apply(&KvCommand::Delete {
            key: key.into(),
            if_revision,
        })
    }

    fn kv(key: &str, value: &str, create: u64, modified: u64, version: u64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
            create_revision: create,
            mod_revision: modified,
            version,
            session: None,
        }
    }

    /// LOG-8: a list is read a page at a time, in key order: each page holds at most the
    /// limit, says whether more follow, and the next page starts after the last key given,
    /// however the keys were written between pages.
    #[test]
    fn a_prefix_is_listed_a_page_at_a_time() {
        let mut store = KvStore::new(100);
        for key in ["a", "cfg/1", "cfg/2", "cfg/3", "cfg/4", "cfg/5", "d"] {
            put(&mut store, key, "v");
        }
        let keys = |page: &[KeyValue]| page.iter().map(|kv| kv.key.clone()).collect::<Vec<_>>();
        let (first, more) = store.page("cfg/", None, 2);
        assert_eq!(
            (keys(&first), more),
            (vec!["cfg/1".into(), "cfg/2".into()], true)
        );
        // A key written before the page's start is not seen; one after it is.
        put(&mut store, "cfg/0", "v");
        put(&mut store, "cfg/45", "v");
        let (second, more) = store.page("cfg/", Some("cfg/2"), 3);
        assert_eq!(
            (keys(&second), more),
            (vec!["cfg/3".into(), "cfg/4".into(), "cfg/45".into()], true)
        );
        let (last, more) = store.page("cfg/", Some("cfg/45"), 3);
        assert_eq!((keys(&last), more), (vec!["cfg/5".into()], false));
        // Exactly the limit left: no further page is promised.
        let (exact, more) = store.page("cfg/", Some("cfg/4"), 2);
        assert_eq!((exact.len(), more), (2, false));
        // A continuation from before the prefix starts at the prefix; the whole store pages too.
        assert_eq!(keys(&store.page("cfg/", Some("a"), 1).0), ["cfg/0"]);
        assert_eq!(store.page("", None, 100).0.len(), 9);
        assert_eq!(store.page("zz", None, 5), (Vec::new(), false));
    }

    /// LOG-5: one revision for the whole store; each key keeps its create and mod revisions
    /// and its version, as etcd's; a delete ends the key's life and a new put starts another.
    #[test]
    fn every_change_takes_the_next_store_wide_revision() {
        let mut store = KvStore::new(100);
        assert_eq!(store.revision(), 0);
        assert_eq!(
            put(&mut store, "a", "1"),
            KvOutcome::Applied {
                revision: 1,
                previous: None
            }
        );
        assert_eq!(
            put(&mut store, "b", "1"),
            KvOutcome::Applied {
                revision: 2,
                previous: None
            }
        );
        assert_eq!(
            put(&mut store, "a", "2"),
            KvOutcome::Applied {
                revision: 3,
                previous: Some(kv("a", "1", 1, 1, 1))
            }
        );
        assert_eq!(store.get("a"), Some(kv("a", "2", 1, 3, 2)));
        assert_eq!(store.get("b"), Some(kv("b", "1", 2, 2, 1)));
        assert_eq!(
            delete(&mut store, "a", None),
            KvOutcome::Applied {
                revision: 4,
                previous: Some(kv("a", "2", 1, 3, 2))
            }
        );
        assert_eq!(store.get("a"), None);
        put(&mut store, "a", "3");
        assert_eq!(store.get("a"), Some(kv("a", "3", 5, 5, 1)));
        assert_eq!(store.revision(), 5);
    }

    /// LOG-5: compare-and-set on a key's revision; `Some(0)` means "must not exist"; a failed
    /// compare answers the key as it is and takes no revision.
    #[test]
    fn compare_and_set_on_revision() {
        let mut store = KvStore::new(100);
        assert!(matches!(
            put_if(&mut store, "lock", "node-a", Some(0), None),
            KvOutcome::Applied { revision: 1, .. }
        ));
        assert_eq!(
            put_if(&mut store, "lock", "node-b", Some(0), None),
            KvOutcome::CompareFailed {
                current: Some(kv("lock", "node-a", 1, 1, 1))
            }
        );
        assert_eq!(
            put_if(&mut store, "lock", "node-b", Some(7), None),
            KvOutcome::CompareFailed {
                current: Some(kv("lock", "node-a", 1, 1, 1))
            }
        );
        assert_eq!(store.revision(), 1);
        assert!(matches!(
            put_if(&mut store, "lock", "node-b", Some(1), None),
            KvOutcome::Applied { revision: 2, .. }
        ));
        // A revision asked of a key that does not exist fails.
        assert_eq!(
            put_if(&mut store, "other", "x", Some(2), None),
            KvOutcome::CompareFailed { current: None }
        );
    }

    /// LOG-5: compare-and-set on a key's value, alone and with a revision (both must hold).
    #[test]
    fn compare_and_set_on_value() {
        let mut store = KvStore::new(100);
        assert_eq!(
            put_if(&mut store, "mode", "on", None, Some("off")),
            KvOutcome::CompareFailed { current: None }
        );
        put(&mut store, "mode", "off");
        assert_eq!(
            put_if(&mut store, "mode", "on", None, Some("on")),
            KvOutcome::CompareFailed {
                current: Some(kv("mode", "off", 1, 1, 1))
            }
        );
        assert!(matches!(
            put_if(&mut store, "mode", "on", None, Some("off")),
            KvOutcome::Applied { revision: 2, .. }
        ));
        // The value holds but the revision does not.
        assert!(matches!(
            put_if(&mut store, "mode", "off", Some(1), Some("on")),
            KvOutcome::CompareFailed { .. }
        ));
        assert!(matches!(
            put_if(&mut store, "mode", "off", Some(2), Some("on")),
            KvOutcome::Applied { revision: 3, .. }
        ));
    }

    /// LOG-5: a delete of an absent key is not found and takes no revision; a conditional
    /// delete checks the revision.
    #[test]
    fn delete_answers_not_found_or_compare_failed() {
        let mut store = KvStore::new(100);
        assert_eq!(delete(&mut store, "gone", None), KvOutcome::NotFound);
        assert_eq!(store.revision(), 0);
        put(&mut store, "k", "v");
        assert_eq!(
            delete(&mut store, "k", Some(9)),
            KvOutcome::CompareFailed {
                current: Some(kv("k", "v", 1, 1, 1))
            }
        );
        assert!(matches!(
            delete(&mut store, "k", Some(1)),
            KvOutcome::Applied { revision: 2, .. }
        ));
        assert_eq!(delete(&mut store, "k", None), KvOutcome::NotFound);
        assert_eq!(store.revision(), 2);
    }

    /// LOG-5: listing by prefix returns exactly the keys that start with it, in key order.
    #[test]
    fn list_by_prefix() {
        let mut store = KvStore::new(100);
        for key in ["b", "a/2", "ab", "a/1", "a", "a/"] {
            put(&mut store, key, "v");
        }
        let keys = |prefix: &str| -> Vec<String> {
            store.list(prefix).into_iter().map(|kv| kv.key).collect()
        };
        assert_eq!(keys("a/"), ["a/", "a/1", "a/2"]);
        assert_eq!(keys("a"), ["a", "a/", "a/1", "a/2", "ab"]);
        assert_eq!(keys(""), ["a", "a/", "a/1", "a/2", "ab", "b"]);
        assert!(keys("c").is_empty());
    }

    /// LOG-5: a watch from a revision sees every later change of its key or prefix, in order,
    /// starting at that revision (inclusive); a revision in the future answers nothing yet.
    #[test]
    fn watch_from_a_revision() {
        let mut store = KvStore::new(100);
        put(&mut store, "nodes/a", "up"); // 1
        put(&mut store, "config", "x"); // 2
        put(&mut store, "nodes/b", "up"); // 3
        delete(&mut store, "nodes/a", None); // 4
        let revisions = |from, filter| -> Vec<u64> {
            store
                .changes_from(from, filter)
                .unwrap()
                .iter()
                .map(Change::revision)
                .collect()
        };
        assert_eq!(revisions(0, KeyFilter::Prefix("")), [1, 2, 3, 4]);
        assert_eq!(revisions(1, KeyFilter::Prefix("nodes/")), [1, 3, 4]);
        assert_eq!(revisions(3, KeyFilter::Prefix("nodes/")), [3, 4]);
        assert_eq!(revisions(1, KeyFilter::Exact("nodes/a")), [1, 4]);
        assert_eq!(revisions(5, KeyFilter::Prefix("")), Vec::<u64>::new());
        assert_eq!(
            store.changes_from(4, KeyFilter::Exact("nodes/a")).unwrap(),
            [Change::Delete {
                key: "nodes/a".into(),
                revision: 4
            }]
        );
        assert_eq!(
            store.changes_from(3, KeyFilter::Exact("nodes/b")).unwrap(),
            [Change::Put(kv("nodes/b", "up", 3, 3, 1))]
        );
    }

    /// LOG-5: the history keeps the last changes only; a watch from before them is told the
    /// oldest revision it may start from, and one from there succeeds.
    #[test]
    fn a_watch_older_than_the_history_is_compacted() {
        let mut store = KvStore::new(3);
        for value in ["1", "2", "3", "4", "5"] {
            put(&mut store, "k", value);
        }
        assert!(matches!(
            store.changes_from(2, KeyFilter::Prefix("")),
            Err(Error::Compacted { oldest: 3 })
        ));
        assert!(matches!(
            store.changes_from(0, KeyFilter::Prefix("")),
            Err(Error::Compacted { oldest: 3 })
        ));
        assert_eq!(
            store.changes_from(3, KeyFilter::Prefix("")).unwrap().len(),
            3
        );

        // Without any history, only the future can be watched.
        let mut forgetful = KvStore::new(0);
        put(&mut forgetful, "k", "v");
        assert!(matches!(
            forgetful.changes_from(1, KeyFilter::Prefix("")),
            Err(Error::Compacted { oldest: 2 })
        ));
        assert!(
            forgetful
                .changes_from(2, KeyFilter::Prefix(""))
                .unwrap()
                .is_empty()
        );
    }

    /// LOG-5: a restored store whose history has a hole, or whose key claims a revision from
    /// the future, is refused; a good one adopts this node's history length.
    #[test]
    fn restoring_checks_the_store() {
        let mut store = KvStore::new(10);
        for value in ["1", "2", "3"] {
            put(&mut store, "k", value);
        }
        assert_eq!(store.clone().restored(2).unwrap().history.len(), 2);

        let mut holed = store.clone();
        holed.history.remove(1);
        assert!(matches!(
            holed.restored(10),
            Err(Error::InconsistentSnapshot(_))
        ));
        let mut future = store.clone();
        if let Some(stored) = future.entries.get_mut("k") {
            stored.mod_revision = 9;
        }
        assert!(matches!(
            future.restored(10),
            Err(Error::InconsistentSnapshot(_))
        ));
    }
}
