//! What raft keeps durable, behind one trait (WAL-1..3, LOG-2..4), and its in-memory twin
//! for the simulator.
//!
//! The raft core never touches a file: it hands its driver the hard state and the log entries
//! to keep, and learns back which of them are durable. [`Storage`] is what the driver writes
//! them to. Two implementations exist: the data directory on disk (the `conclave-storage`
//! crate, driven by the WalActor on its own thread, WAL-4) and [`MemStorage`] here, which the
//! simulator uses. Both keep the same rule, the one a crash test checks: **a write is durable
//! only once a [`Storage::sync`] after it has returned**. `MemStorage` models it literally — a
//! crash ([`MemStorage::crash`]) loses every write not yet synced — so that the simulator finds
//! every place where the core counted on a write before its fsync.
//!
//! Writes are ordered: a later sync makes every earlier write durable, so a driver that
//! syncs once for many writes (group commit) keeps the order the core gave them in.

use bytes::Bytes;
use conclave_protocol::{Configuration, LogEntry};

use crate::election::HardState;
use crate::raft::LogPosition;

/// Everything a node starting now would recover: the hard state, the latest snapshot and
/// the log entries after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableState {
    /// The term, the vote and the pin (WAL-1).
    pub hard: HardState,
    /// The latest snapshot: the log position it covers and the state machine's bytes.
    pub snapshot: Option<Snapshot>,
    /// The entries after the snapshot (or from index 1 without one), in order and contiguous.
    pub entries: Vec<LogEntry>,
}

impl DurableState {
    /// The position of the last entry kept, the snapshot's when no entry follows it.
    pub fn last_log(&self) -> LogPosition {
        match (self.entries.last(), &self.snapshot) {
            (Some(entry), _) => LogPosition::new(entry.term, entry.index),
            (None, Some(snapshot)) => snapshot.last,
            (None, None) => LogPosition::default(),
        }
    }
}

/// A state machine's image at one log position (LOG-4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The last entry it covers.
    pub last: LogPosition,
    /// The state machine's bytes, opaque to raft. Shared: the log keeps them to send to
    /// followers while the driver saves them, and an image is as large as the whole store.
    pub data: Bytes,
    /// MEMB-1: the cluster's configuration in force at `last`, which the compacted entries
    /// carried; `None` when the log never held one (`cluster.voters` is then in force).
    pub config: Option<Configuration>,
}

/// Where raft's durable state is kept. See the [module docs](self).
pub trait Storage {
    /// Why a write or a sync failed (a full disk, an I/O error); the node stops acknowledging
    /// and says so.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Records the hard state. Not durable until the next [`Storage::sync`].
    fn save_hard_state(&mut self, hard: HardState) -> Result<(), Self::Error>;

    /// Records `entries` (contiguous, ascending): every kept entry at or after the first one's
    /// index is dropped first, so a follower's conflicting suffix is replaced (LOG-2). Not
    /// durable until the next [`Storage::sync`]. An empty slice changes nothing.
    fn append_entries(&mut self, entries: &[LogEntry]) -> Result<(), Self::Error>;

    /// Makes every earlier write durable (one fsync for all of them: group commit).
    fn sync(&mut self) -> Result<(), Self::Error>;

    /// Keeps `snapshot` as the latest and drops the entries it covers (LOG-4). Durable when it
    /// returns (on disk: temp file, fsync, rename, directory fsync, WAL-3); an entry after the
    /// snapshot that was kept stays kept.
    fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), Self::Error>;

    /// What a node starting now would recover: only what a sync made durable.
    fn durable_state(&self) -> Result<DurableState, Self::Error>;
}

/// One write [`MemStorage`] holds until a sync.
#[derive(Debug, Clone)]
enum PendingWrite {
    HardState(HardState),
    Entries(Vec<LogEntry>),
}

/// The simulator's storage: durable state in memory, and the writes since the last sync,
/// which a [`MemStorage::crash`] loses.
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    durable: DurableState,
    pending: Vec<PendingWrite>,
}

/// `MemStorage` never fails: memory is not a disk that fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("in-memory storage cannot fail")]
pub struct Infallible;

impl MemStorage {
    /// Empty storage: a node that never ran.
    pub fn new() -> Self {
        Self::default()
    }

    /// Storage whose durable content is `state` (a node restarted from it).
    pub fn from_durable(state: DurableState) -> Self {
        Self {
            durable: state,
            pending: Vec::new(),
        }
    }

    /// The power went out: every write since the last sync is lost.
    pub fn crash(&mut self) {
        self.pending.clear();
    }

    /// The disk was lost or wiped (WAL-2's amnesia): nothing survives.
    pub fn wipe(&mut self) {
        *self = Self::default();
    }

    /// Writes waiting for a sync.
    pub fn pending_writes(&self) -> usize {
        self.pending.len()
    }

    /// The durable state, borrowed (what [`Storage::durable_state`] clones).
    pub fn durable(&self) -> &DurableState {
        &self.durable
    }
}

/// Replaces every entry of `kept` at or after the first of `entries` with `entries`.
fn splice(kept: &mut Vec<LogEntry>, snapshot: Option<&Snapshot>, entries: &[LogEntry]) {
    let Some(first) = entries.first() else {
        return;
    };
    // Entries the snapshot already covers are state machine content, not log.
    let after = snapshot.map_or(0, |snapshot| snapshot.last.index);
    kept.retain(|entry| entry.index < first.index);
    kept.extend(entries.iter().filter(|entry| entry.index > after).cloned());
}

impl Storage for MemStorage {
    type Error = Infallible;

    fn save_hard_state(&mut self, hard: HardState) -> Result<(), Infallible> {
        self.pending.push(PendingWrite::HardState(hard));
        Ok(())
    }

    fn append_entries(&mut self, entries: &[LogEntry]) -> Result<(), Infallible> {
        if !entries.is_empty() {
            self.pending.push(PendingWrite::Entries(entries.to_vec()));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), Infallible> {
        for write in std::mem::take(&mut self.pending) {
            match write {
                PendingWrite::HardState(hard) => self.durable.hard = hard,
                PendingWrite::Entries(entries) => splice(
                    &mut self.durable.entries,
                    self.durable.snapshot.as_ref(),
                    &entries,
                ),
            }
        }
        Ok(())
    }

    fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), Infallible> {
        // The entries it covers may still be pending: they are in the snapshot either way.
        self.durable
            .entries
            .retain(|entry| entry.index > snapshot.last.index);
        self.durable.snapshot = Some(snapshot);
        Ok(())
    }

    fn durable_state(&self) -> Result<DurableState, Infallible> {
        Ok(self.durable.clone())
    }
}

#[cfg(test)]
mod tests {
    use conclave_protocol::EntryKind;

    use super::*;

    fn entry(index: u64, term: u64) -> LogEntry {
        LogEntry {
            index,
            term,
            kind: EntryKind::Command,
            data: vec![index as u8],
        }
    }

    fn positions(state: &DurableState) -> Vec<(u64, u64)> {
        state.entries.iter().map(|e| (e.index, e.term)).collect()
    }

    /// A crash loses exactly the writes after the last sync.
    #[test]
    fn a_crash_loses_what_was_not_synced() {
        let mut storage = MemStorage::new();
        storage.append_entries(&[entry(1, 1), entry(2, 1)]).unwrap();
        storage.sync().unwrap();
        storage.append_entries(&[entry(3, 1)]).unwrap();
        storage
            .save_hard_state(HardState {
                term: 2,
                ..HardState::default()
            })
            .unwrap();
        storage.crash();
        let state = storage.durable_state().unwrap();
        assert_eq!(positions(&state), vec![(1, 1), (2, 1)]);
        assert_eq!(state.hard.term, 0);
        assert_eq!(state.last_log(), LogPosition::new(1, 2));
    }

    /// LOG-2: appending at an index replaces that entry and everything after it.
    #[test]
    fn an_append_replaces_the_conflicting_suffix() {
        let mut storage = MemStorage::new();
        storage
            .append_entries(&[entry(1, 1), entry(2, 1), entry(3, 1)])
            .unwrap();
        storage.append_entries(&[entry(2, 2)]).unwrap();
        storage.sync().unwrap();
        assert_eq!(
            positions(&storage.durable_state().unwrap()),
            vec![(1, 1), (2, 2)]
        );
    }

    /// LOG-4: a snapshot drops the entries it covers and keeps the ones after it.
    #[test]
    fn a_snapshot_compacts_the_entries_it_covers() {
        let mut storage = MemStorage::new();
        storage
            .append_entries(&[entry(1, 1), entry(2, 1), entry(3, 2)])
            .unwrap();
        storage.sync().unwrap();
        storage
            .save_snapshot(Snapshot {
                last: LogPosition::new(1, 2),
                data: Bytes::from_static(b"image"),
                config: None,
            })
            .unwrap();
        storage.crash();
        let state = storage.durable_state().unwrap();
        assert_eq!(positions(&state), vec![(3, 2)]);
        assert_eq!(state.snapshot.unwrap().last, LogPosition::new(1, 2));
        storage.wipe();
        assert_eq!(storage.durable_state().unwrap(), DurableState::default());
    }
}
