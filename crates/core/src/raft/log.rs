//! The replicated log as one node holds it in memory (LOG-2..4): the entries since the last
//! snapshot, how far they are durable, committed and handed out for applying.
//!
//! [`RaftLog`] is pure bookkeeping; the rules of who may append what live in the raft node
//! (`node/replication.rs`). Its indices keep one order at all times:
//!
//! ```text
//! snapshot.index ≤ applied ≤ commit          applied ≤ persisted < unstable_from ≤ last + 1
//! ```
//!
//! - `persisted`: the last index the driver reported durable (its fsync returned). A leader
//!   counts itself towards a commit only up to it; a follower acknowledges only up to it (LOG-3:
//!   an entry counted by a majority is on a majority's disks).
//! - `unstable_from`: the first entry not yet handed to the driver to write. A follower that
//!   replaces a conflicting suffix moves it (and `persisted`) back to where the suffix began.
//! - `applied`: the last index handed out to the state machine; it never passes what is both
//!   committed and durable here, so an entry is applied at most once per process, in order.
//!
//! # Snapshots (LOG-4)
//!
//! The log keeps the latest snapshot's image (`image`): the driver's state machine bytes at
//! the snapshot's position, kept here because a leader sends them to a follower behind the
//! compaction point, chunk by chunk, and every chunk of one transfer must come from the same
//! image while the machine moves on. Two things move the snapshot forward:
//!
//! - [`RaftLog::compact`]: the driver snapshotted its machine at an applied index; the
//!   entries up to it (applied, hence durable) leave memory.
//! - [`RaftLog::install`]: a follower received a leader's snapshot past its commit index. When
//!   its own entry at the snapshot's index has the snapshot's term, the entries after it are
//!   kept (Raft §7: they follow the same log); otherwise the whole log is dropped. The image
//!   is applied (the driver restores its machine from it) before it is durable, so for a while
//!   `persisted` may be below the snapshot: it stays at what was durable *and* matched
//!   (at most the old commit when the log was dropped), and moves to the snapshot's index once
//!   the driver reports the snapshot saved ([`RaftLog::snapshot_persisted`]), so that an
//!   acknowledgement still only counts what a crash keeps.
//!
//! # Configurations (MEMB-1)
//!
//! The log also knows the cluster's configuration: the latest
//! [`EntryKind::Config`] entry it holds, appended or not yet durable or committed (Raft
//! dissertation §4.1: a node acts on a configuration as soon as it is in its log), and, when
//! no such entry follows the snapshot, the configuration in force at the snapshot's index,
//! which a compaction keeps (`snapshot_config`). A truncation that removes a configuration
//! entry brings the one before it back. An entry whose data does not decode is ignored: only
//! a leader makes these entries, from a [`Configuration`] it encoded.

use std::collections::VecDeque;

use conclave_protocol::{Configuration, ConflictHint, EntryKind, LogEntry};

use crate::raft::state::LogPosition;
use crate::storage::{DurableState, Snapshot};

/// One node's log in memory. See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct RaftLog {
    /// The last entry the snapshot covers (or the restored position of a node started without
    /// entries): everything up to it is committed and gone from memory.
    snapshot: LogPosition,
    /// The snapshot's bytes, when this node has them (none before the first snapshot, or in a
    /// log started at a bare position).
    image: Option<Snapshot>,
    /// `snapshot.index + 1 ..= last`, contiguous.
    entries: VecDeque<LogEntry>,
    persisted: u64,
    unstable_from: u64,
    commit: u64,
    applied: u64,
    /// A write handed out by [`RaftLog::take_next_write`] is not reported yet: the next one
    /// waits, so that one write is with the disk at a time and the next one takes
    /// everything that piled up meanwhile (group commit).
    write_in_flight: bool,
    /// MEMB-1: the configuration in force at the snapshot's index, when one was ever known.
    snapshot_config: Option<Configuration>,
    /// MEMB-1: the configuration entries among `entries`, by index, ascending.
    configs: VecDeque<(u64, Configuration)>,
}

/// Why a follower could not append: the answer's hint (LOG-2).
pub(crate) type Conflict = ConflictHint;

impl RaftLog {
    /// A log that starts after `base`: a restart from a snapshot at `base`, or an empty log
    /// at `LogPosition::default()`. What it holds is durable.
    pub(crate) fn starting_after(base: LogPosition) -> Self {
        Self {
            snapshot: base,
            image: None,
            entries: VecDeque::new(),
            persisted: base.index,
            unstable_from: base.index + 1,
            commit: base.index,
            applied: base.index,
            write_in_flight: false,
            snapshot_config: None,
            configs: VecDeque::new(),
        }
    }

    /// The log a restart recovers from `state`: durable, nothing known committed beyond the
    /// snapshot (the leader says how far the rest is).
    pub(crate) fn restored(state: &DurableState) -> Self {
        let base = state
            .snapshot
            .as_ref()
            .map_or_else(LogPosition::default, |s| s.last);
        let mut log = Self::starting_after(base);
        log.image = state.snapshot.clone();
        log.snapshot_config = state.snapshot.as_ref().and_then(|s| s.config.clone());
        for (expected, entry) in (base.index + 1..).zip(&state.entries) {
            if entry.index != expected {
                // Storage hands over a contiguous run; anything else would be a gap in the
                // log, and the entries before it are all that can be trusted.
                break;
            }
            log.entries.push_back(entry.clone());
            log.note_config(entry);
        }
        log.persisted = log.last().index;
        log.unstable_from = log.persisted + 1;
        log
    }

    // -----------------------------------------------------------------------------------------
    // positions

    /// The last entry (the snapshot's position when no entry follows it).
    pub(crate) fn last(&self) -> LogPosition {
        self.entries.back().map_or(self.snapshot, |entry| {
            LogPosition::new(entry.term, entry.index)
        })
    }

    /// The term of the entry at `index`: known for the snapshot's last entry and every entry
    /// after it, `Some(0)` at index 0.
    pub(crate) fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.snapshot.index {
            return Some(self.snapshot.term);
        }
        self.entry(index).map(|entry| entry.term)
    }

    /// The entry at `index`, when held (not compacted, not past the end).
    pub(crate) fn entry_at(&self, index: u64) -> Option<&LogEntry> {
        self.entry(index)
    }

    /// Whether this log holds the leader's entry at `prev` (LOG-2's consistency check, as
    /// [`RaftLog::append_from_leader`] makes it): one behind the snapshot is committed, so it
    /// matches.
    pub(crate) fn holds(&self, prev: LogPosition) -> bool {
        prev.index < self.snapshot.index || self.term_at(prev.index) == Some(prev.term)
    }

    fn entry(&self, index: u64) -> Option<&LogEntry> {
        let offset = index.checked_sub(self.snapshot.index + 1)?;
        self.entries.get(usize::try_from(offset).ok()?)
    }

    /// The snapshot's position.
    pub(crate) fn snapshot(&self) -> LogPosition {
        self.snapshot
    }

    /// The snapshot's bytes, when this node has them.
    pub(crate) fn image(&self) -> Option<&Snapshot> {
        self.image.as_ref()
    }

    /// The last durable index.
    pub(crate) fn persisted(&self) -> u64 {
        self.persisted
    }

    /// The commit index.
    pub(crate) fn commit(&self) -> u64 {
        self.commit
    }

    /// The last index handed out for applying.
    pub(crate) fn applied(&self) -> u64 {
        self.applied
    }

    // -----------------------------------------------------------------------------------------
    // changes

    /// A leader's new entry at the end, of `term`.
    pub(crate) fn append_new(&mut self, term: u64, kind: EntryKind, data: Vec<u8>) -> u64 {
        let index = self.last().index + 1;
        let entry = LogEntry {
            index,
            term,
            kind,
            data,
        };
        self.note_config(&entry);
        self.entries.push_back(entry);
        index
    }

    /// MEMB-1: the configuration this node acts on: the latest configuration entry in the
    /// log, or the one in force at the snapshot; `None` when the log never held one (then
    /// `cluster.voters` is the configuration).
    pub(crate) fn configuration(&self) -> Option<&Configuration> {
        self.configs
            .back()
            .map(|(_, config)| config)
            .or(self.snapshot_config.as_ref())
    }

    /// MEMB-1: the index of the latest configuration entry held after the snapshot.
    pub(crate) fn configuration_index(&self) -> Option<u64> {
        self.configs.back().map(|(index, _)| *index)
    }

    /// MEMB-1: the configuration in force at `index` (at or after the snapshot's): the latest
    /// configuration entry at or before it, or the snapshot's.
    pub(crate) fn configuration_at(&self, index: u64) -> Option<&Configuration> {
        self.configs
            .iter()
            .rev()
            .find(|(at, _)| *at <= index)
            .map(|(_, config)| config)
            .or(self.snapshot_config.as_ref())
    }

    /// Records `entry` when it is a configuration entry that decodes; entries arrive in
    /// index order after every truncation.
    fn note_config(&mut self, entry: &LogEntry) {
        if entry.kind != EntryKind::Config {
            return;
        }
        if let Ok(config) = Configuration::decode(&entry.data) {
            self.configs.push_back((entry.index, config));
        }
    }

    /// Appends entries already known to follow the last one.
    fn extend_entries(&mut self, entries: &[LogEntry]) {
        for entry in entries {
            self.note_config(entry);
            self.entries.push_back(entry.clone());
        }
    }

    /// A follower's append (LOG-2): `entries` follow the leader's entry at `(prev_term,
    /// prev_index)`. When this log holds that entry, conflicting entries are replaced and new
    /// ones appended, and the answer is the last index now known to match the leader's log.
    /// Otherwise nothing changes and the answer says where the leader should try next.
    pub(crate) fn append_from_leader(
        &mut self,
        prev: LogPosition,
        entries: &[LogEntry],
    ) -> Result<u64, Conflict> {
        let last_sent = prev.index + entries.len() as u64;
        if prev.index < self.snapshot.index {
            // Entries the snapshot covers are committed, so they match the leader's: skip them.
            let skip = (self.snapshot.index - prev.index) as usize;
            if skip >= entries.len() {
                return Ok(last_sent.min(self.snapshot.index).max(prev.index));
            }
            let rest = &entries[skip..];
            let first = &rest[0];
            if first.index != self.snapshot.index + 1 {
                return Err(self.conflict_at(self.snapshot.index + 1));
            }
            let prev = LogPosition::new(self.snapshot.term, self.snapshot.index);
            return self.append_from_leader(prev, rest);
        }
        match self.term_at(prev.index) {
            Some(term) if term == prev.term => {}
            _ => return Err(self.conflict_at(prev.index)),
        }
        for (offset, entry) in entries.iter().enumerate() {
            if entry.index != prev.index + 1 + offset as u64 {
                // A malformed batch: keep what matched so far.
                return Ok(prev.index + offset as u64);
            }
            match self.term_at(entry.index) {
                Some(term) if term == entry.term => continue,
                Some(_) => {
                    // LOG-2: a conflicting suffix is replaced. It was never committed: the
                    // leader holds every committed entry (leader completeness).
                    if entry.index <= self.commit {
                        return Err(self.conflict_at(entry.index));
                    }
                    self.truncate_from(entry.index);
                    self.extend_entries(&entries[offset..]);
                    return Ok(last_sent);
                }
                None => {
                    self.extend_entries(&entries[offset..]);
                    return Ok(last_sent);
                }
            }
        }
        Ok(last_sent)
    }

    /// The hint of a refusal at `index`: past the end, where the log ends; otherwise the first
    /// index of the conflicting term, so that the leader backs off one term per round trip.
    fn conflict_at(&self, index: u64) -> Conflict {
        let last = self.last();
        if index > last.index {
            return ConflictHint {
                index: last.index + 1,
                term: 0,
            };
        }
        let term = self.term_at(index).unwrap_or(0);
        let floor = self.snapshot.index.max(self.commit) + 1;
        let mut first = index;
        while first > floor && self.term_at(first - 1) == Some(term) {
            first -= 1;
        }
        ConflictHint { index: first, term }
    }

    /// Drops `index` and everything after it.
    fn truncate_from(&mut self, index: u64) {
        let keep = index.saturating_sub(self.snapshot.index + 1) as usize;
        self.entries.truncate(keep);
        // MEMB-1: a configuration whose entry is gone is no longer the node's.
        self.configs.retain(|(at, _)| *at < index);
        self.unstable_from = self.unstable_from.min(index);
        self.persisted = self.persisted.min(index - 1);
    }

    /// The entries not yet handed to the driver to write, in order; they are handed out now.
    pub(crate) fn take_unstable(&mut self) -> Vec<LogEntry> {
        let from = self.unstable_from;
        let taken: Vec<LogEntry> = self.entries_from(from, usize::MAX);
        self.unstable_from = self.last().index + 1;
        taken
    }

    /// The entries to write next, unless a write is still with the disk (then none: they
    /// go with the next one).
    pub(crate) fn take_next_write(&mut self) -> Vec<LogEntry> {
        if self.write_in_flight {
            return Vec::new();
        }
        let taken = self.take_unstable();
        self.write_in_flight = !taken.is_empty();
        taken
    }

    /// The driver made the write that ended at `last` durable. Ignored when that entry has
    /// since been replaced (a later truncation); earlier writes are durable with it.
    pub(crate) fn persisted_to(&mut self, last: LogPosition) -> bool {
        self.write_in_flight = false;
        if last.index <= self.persisted || last.index >= self.unstable_from {
            return false;
        }
        if self.term_at(last.index) != Some(last.term) {
            return false;
        }
        self.persisted = last.index;
        true
    }

    /// Raises the commit index to `index` (never lowers it, never past the last entry).
    pub(crate) fn commit_to(&mut self, index: u64) -> bool {
        let index = index.min(self.last().index);
        if index > self.commit {
            self.commit = index;
            true
        } else {
            false
        }
    }

    /// The committed, durable entries not yet applied, at most `max`; they count as applied
    /// from now on.
    pub(crate) fn take_committed(&mut self, max: usize) -> Vec<LogEntry> {
        let upto = self.commit.min(self.persisted);
        if upto <= self.applied {
            return Vec::new();
        }
        let taken = self.entries_from(self.applied + 1, max);
        let taken: Vec<LogEntry> = taken.into_iter().take_while(|e| e.index <= upto).collect();
        if let Some(last) = taken.last() {
            self.applied = last.index;
        }
        taken
    }

    /// The driver's machine image at `snapshot.last`, an applied index: it becomes the
    /// snapshot and the entries up to it leave memory. Refused (`false`) unless it is past the
    /// current snapshot, applied, and of the term this log holds there.
    pub(crate) fn compact(&mut self, snapshot: Snapshot) -> bool {
        let last = snapshot.last;
        if last.index <= self.snapshot.index
            || last.index > self.applied
            || self.term_at(last.index) != Some(last.term)
        {
            return false;
        }
        let mut snapshot = snapshot;
        if snapshot.config.is_none() {
            snapshot.config = self.configuration_at(last.index).cloned();
        }
        self.drop_through(last.index);
        self.snapshot = last;
        self.image = Some(snapshot);
        true
    }

    /// Drops the entries up to `index` from memory.
    fn drop_through(&mut self, index: u64) {
        let count = index.saturating_sub(self.snapshot.index) as usize;
        self.entries.drain(..count.min(self.entries.len()));
        // MEMB-1: the latest configuration at or before the new snapshot stays in force there.
        while self.configs.front().is_some_and(|(at, _)| *at <= index) {
            if let Some((_, config)) = self.configs.pop_front() {
                self.snapshot_config = Some(config);
            }
        }
    }

    /// A leader's snapshot, received whole by a follower whose commit index is below it: the
    /// log restarts after it (keeping the entries that follow it when this log holds its last
    /// entry, Raft §7), and it counts as committed and applied. Whether it was taken: a
    /// snapshot at or below the commit index brings nothing and is refused.
    pub(crate) fn install(&mut self, snapshot: Snapshot) -> bool {
        let last = snapshot.last;
        if last.index <= self.commit {
            return false;
        }
        if self.term_at(last.index) == Some(last.term) {
            self.drop_through(last.index);
        } else {
            self.entries.clear();
            // The leader's snapshot says which configuration was in force at its index; the
            // dropped log's entries no longer do.
            self.configs.clear();
            // What was durable and matched the leader's log: the committed prefix.
            self.persisted = self.persisted.min(self.commit);
        }
        if snapshot.config.is_some() {
            // The leader's word on the configuration at its snapshot's index.
            self.snapshot_config = snapshot.config.clone();
        }
        self.snapshot = last;
        self.image = Some(snapshot);
        self.unstable_from = self.unstable_from.max(last.index + 1);
        self.commit = last.index.max(self.commit);
        self.applied = last.index;
        true
    }

    /// The driver saved a snapshot ending at `index`: everything up to it is durable. Whether
    /// that moved `persisted`.
    pub(crate) fn snapshot_persisted(&mut self, index: u64) -> bool {
        // A snapshot covers committed entries only, so an older one saved while a newer one
        // is held still says the same of the entries up to its index.
        if index <= self.persisted || index > self.snapshot.index {
            return false;
        }
        self.persisted = index;
        true
    }

    /// Up to `max` entries from `index` on.
    fn entries_from(&self, index: u64, max: usize) -> Vec<LogEntry> {
        let Some(offset) = index.checked_sub(self.snapshot.index + 1) else {
            return Vec::new();
        };
        self.entries
            .iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(max)
            .cloned()
            .collect()
    }

    /// Committed entries from `index` on (never before the snapshot), at most `max`.
    pub(crate) fn committed_from(&self, index: u64, max: usize) -> Vec<LogEntry> {
        let from = index.max(self.snapshot.index + 1);
        let mut entries = self.entries_from(from, max);
        entries.retain(|entry| entry.index <= self.commit);
        entries
    }

    /// Entries from `index` on whose encoded data fits `budget` bytes, at most `max`; none
    /// when the first is larger than the budget (it travels in chunks, MEMB-6).
    pub(crate) fn batch_from(&self, index: u64, budget: usize, max: usize) -> Vec<LogEntry> {
        let (offset, frame) = self.frame_from(index, budget, max);
        self.entries
            .iter()
            .skip(offset)
            .take(frame.entries)
            .cloned()
            .collect()
    }

    /// Whether the entries from `index` on fill a frame of `budget` bytes and `max` entries:
    /// as many as `max`, or one that would pass `budget` after those that fit (an entry
    /// larger than the budget alone included: it travels in chunks).
    pub(crate) fn fills_frame(&self, index: u64, budget: usize, max: usize) -> bool {
        self.frame_from(index, budget, max).1.full
    }

    /// Where `index` sits in the entries held, and the frame that starts there: the entries
    /// that fit `budget` bytes and `max`, and whether the frame is full.
    fn frame_from(&self, index: u64, budget: usize, max: usize) -> (usize, Frame) {
        let Some(offset) = index
            .checked_sub(self.snapshot.index + 1)
            .and_then(|offset| usize::try_from(offset).ok())
        else {
            return (0, Frame::default());
        };
        let mut used = 0;
        let mut frame = Frame::default();
        for entry in self.entries.iter().skip(offset) {
            let size = entry_wire_size(entry);
            // MEMB-6: an entry larger than the budget alone goes in chunks, not here.
            if frame.entries >= max || used + size > budget {
                frame.full = true;
                break;
            }
            used += size;
            frame.entries += 1;
        }
        frame.full |= frame.entries >= max;
        (offset, frame)
    }
}

/// The entries a frame takes from some index on, and whether it has room for no more.
#[derive(Debug, Default, Clone, Copy)]
struct Frame {
    entries: usize,
    full: bool,
}

/// What an entry adds to an AppendEntries frame, an upper bound: MessagePack's array header,
/// index and term as u64s, the kind byte, and the data with its `bin` header.
pub(crate) fn entry_wire_size(entry: &LogEntry) -> usize {
    wire_size_of(entry.data.len())
}

/// [`entry_wire_size`] of an entry carrying `data` bytes.
pub(crate) fn wire_size_of(data: usize) -> usize {
    1 + 9 + 9 + 1 + 5 + data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> LogEntry {
        LogEntry {
            index,
            term,
            kind: EntryKind::Command,
            data: vec![index as u8],
        }
    }

    fn log_of(terms: &[u64]) -> RaftLog {
        let mut log = RaftLog::starting_after(LogPosition::default());
        for &term in terms {
            log.append_new(term, EntryKind::Command, Vec::new());
        }
        log
    }

    /// LOG-2: a follower replaces a conflicting suffix and reports the last matching index.
    #[test]
    fn a_conflicting_suffix_is_replaced() {
        let mut log = log_of(&[1, 1, 2, 2]);
        log.take_unstable();
        log.persisted_to(LogPosition::new(2, 4));
        let matched = log
            .append_from_leader(LogPosition::new(1, 2), &[entry(3, 3)])
            .unwrap();
        assert_eq!(matched, 3);
        assert_eq!(log.last(), LogPosition::new(3, 3));
        // The replaced entries were durable; the new one is not yet.
        assert_eq!(log.persisted(), 2);
        assert_eq!(log.take_unstable(), vec![entry(3, 3)]);
    }

    /// LOG-2: the refusal's hint points at the first entry of the conflicting term, or past
    /// the end of a short log.
    #[test]
    fn a_refusal_hints_a_term_at_a_time() {
        let mut log = log_of(&[1, 2, 2, 2]);
        let hint = log
            .append_from_leader(LogPosition::new(3, 4), &[])
            .unwrap_err();
        assert_eq!(hint, ConflictHint { index: 2, term: 2 });
        let hint = log
            .append_from_leader(LogPosition::new(3, 9), &[])
            .unwrap_err();
        assert_eq!(hint, ConflictHint { index: 5, term: 0 });
    }

    /// Entries already held are not rewritten, and a late batch never cuts a longer log.
    #[test]
    fn a_repeated_batch_changes_nothing() {
        let mut log = log_of(&[1, 1, 1]);
        log.take_unstable();
        let matched = log
            .append_from_leader(LogPosition::new(1, 1), &[entry(2, 1)])
            .unwrap();
        assert_eq!(matched, 2);
        assert_eq!(log.last().index, 3);
        assert!(log.take_unstable().is_empty());
    }

    /// A durable report for an entry replaced since does not count.
    #[test]
    fn a_durable_report_for_a_replaced_entry_is_ignored() {
        let mut log = log_of(&[1, 1, 1]);
        log.take_unstable();
        log.append_from_leader(LogPosition::new(1, 1), &[entry(2, 2)])
            .unwrap();
        assert!(!log.persisted_to(LogPosition::new(1, 3)));
        assert_eq!(log.persisted(), 0);
        log.take_unstable();
        assert!(log.persisted_to(LogPosition::new(2, 2)));
    }

    /// Only what is both committed and durable is applied, once, in order.
    #[test]
    fn applying_waits_for_commit_and_durability() {
        let mut log = log_of(&[1, 1, 1]);
        log.commit_to(3);
        assert!(log.take_committed(10).is_empty());
        log.take_unstable();
        log.persisted_to(LogPosition::new(1, 2));
        let applied: Vec<u64> = log.take_committed(10).iter().map(|e| e.index).collect();
        assert_eq!(applied, vec![1, 2]);
        log.persisted_to(LogPosition::new(1, 3));
        let applied: Vec<u64> = log.take_committed(10).iter().map(|e| e.index).collect();
        assert_eq!(applied, vec![3]);
        assert!(log.take_committed(10).is_empty());
    }

    /// A batch fits its byte budget; an entry larger than the budget is left out of batches,
    /// to travel in chunks (MEMB-6).
    #[test]
    fn batches_fit_the_budget() {
        let mut log = RaftLog::starting_after(LogPosition::default());
        for _ in 0..4 {
            log.append_new(1, EntryKind::Command, vec![0; 100]);
        }
        assert_eq!(log.batch_from(1, 200, 64).len(), 1);
        assert_eq!(log.batch_from(1, 250, 64).len(), 2);
        assert_eq!(log.batch_from(1, 1000, 64).len(), 4);
        assert_eq!(log.batch_from(1, 1000, 2).len(), 2);
        assert!(log.batch_from(1, 10, 64).is_empty());
        assert!(log.batch_from(5, 1000, 64).is_empty());
    }

    /// Issue 26: a frame is full when the next entry would pass its budget or it holds its
    /// most entries, and not while the entries not yet sent leave it room.
    #[test]
    fn a_frame_is_full_at_its_budget_or_its_count() {
        let mut log = RaftLog::starting_after(LogPosition::default());
        for _ in 0..4 {
            log.append_new(1, EntryKind::Command, vec![0; 100]);
        }
        assert!(
            log.fills_frame(1, 250, 64),
            "a third entry would pass 250 bytes"
        );
        assert!(!log.fills_frame(1, 1000, 64), "four entries leave room");
        assert!(log.fills_frame(1, 1000, 4), "four entries of at most four");
        assert!(!log.fills_frame(2, 1000, 4), "three of at most four");
        assert!(
            log.fills_frame(4, 10, 64),
            "larger than a frame: it goes in chunks"
        );
        assert!(!log.fills_frame(5, 1000, 64), "nothing to send");
    }

    fn image(term: u64, index: u64) -> Snapshot {
        Snapshot {
            last: LogPosition::new(term, index),
            data: vec![7; 3].into(),
            config: None,
        }
    }

    /// LOG-4: compaction keeps what it must: only applied entries go, the ones after the
    /// snapshot stay with their terms, and nothing durable or unwritten is lost track of.
    #[test]
    fn compaction_drops_only_applied_entries() {
        let mut log = log_of(&[1, 1, 2, 2, 2]);
        log.take_unstable();
        log.persisted_to(LogPosition::new(2, 5));
        log.commit_to(4);
        assert_eq!(log.take_committed(3).len(), 3);
        assert!(!log.compact(image(2, 4)), "index 4 is not applied yet");
        assert!(!log.compact(image(1, 3)), "index 3 is of term 2");
        assert!(log.compact(image(2, 3)));
        assert_eq!(log.snapshot(), LogPosition::new(2, 3));
        assert_eq!(log.term_at(2), None);
        assert_eq!(log.term_at(3), Some(2));
        assert_eq!(log.last(), LogPosition::new(2, 5));
        assert_eq!((log.persisted(), log.commit(), log.applied()), (5, 4, 3));
        let next: Vec<u64> = log.take_committed(10).iter().map(|e| e.index).collect();
        assert_eq!(next, vec![4]);
        assert_eq!(log.batch_from(4, 1000, 10).len(), 2);
        assert!(log.batch_from(3, 1000, 10).is_empty());
    }

    /// LOG-4, Raft §7: an installed snapshot whose last entry this log holds keeps the entries
    /// after it; otherwise the log is dropped and only the committed prefix still counts as
    /// durable until the snapshot is saved.
    #[test]
    fn an_install_keeps_a_matching_suffix_and_drops_a_conflicting_log() {
        let mut log = log_of(&[1, 1, 1, 1]);
        log.take_unstable();
        log.persisted_to(LogPosition::new(1, 4));
        log.commit_to(1);
        assert!(log.install(image(1, 3)));
        assert_eq!(log.last(), LogPosition::new(1, 4));
        assert_eq!((log.persisted(), log.commit(), log.applied()), (4, 3, 3));

        let mut log = log_of(&[1, 1, 2, 2]);
        log.take_unstable();
        log.persisted_to(LogPosition::new(2, 4));
        log.commit_to(2);
        assert!(
            !log.install(image(1, 2)),
            "at the commit index: nothing to install"
        );
        assert!(log.install(image(3, 6)));
        assert_eq!(log.last(), LogPosition::new(3, 6));
        assert_eq!((log.persisted(), log.commit(), log.applied()), (2, 6, 6));
        assert!(log.take_committed(10).is_empty());
        assert!(log.take_unstable().is_empty());
        assert!(log.snapshot_persisted(6));
        assert_eq!(log.persisted(), 6);
        assert!(!log.snapshot_persisted(7), "past the snapshot");
    }

    /// MEMB-1: the configuration outlives the entry that carried it: a compaction keeps the
    /// one in force at the snapshot in the snapshot, a later entry still wins, a restart from
    /// the snapshot has it back, and a leader's snapshot that replaces the log brings its own.
    #[test]
    fn memb1_the_configuration_survives_compaction_restart_and_install() {
        use conclave_protocol::{Configuration, PeerId};
        let id = |name: &str| PeerId::new(name).unwrap();
        let first = Configuration::with_voters([id("a"), id("b")]);
        let second = Configuration::with_voters([id("a")]);
        let mut log = RaftLog::starting_after(LogPosition::default());
        log.append_new(1, EntryKind::Noop, Vec::new());
        log.append_new(1, EntryKind::Config, first.encode());
        log.append_new(1, EntryKind::Command, vec![1]);
        log.append_new(1, EntryKind::Config, second.encode());
        log.take_unstable();
        log.persisted_to(LogPosition::new(1, 4));
        log.commit_to(4);
        log.take_committed(3);
        assert!(log.compact(image(1, 3)));
        assert_eq!(log.configuration(), Some(&second));
        assert_eq!(log.configuration_at(3), Some(&first));
        assert_eq!(
            log.image().and_then(|i| i.config.clone()),
            Some(first.clone())
        );
        log.truncate_from(4);
        assert_eq!(log.configuration(), Some(&first), "the snapshot's is back");

        let restarted = RaftLog::restored(&DurableState {
            snapshot: log.image().cloned(),
            ..DurableState::default()
        });
        assert_eq!(restarted.configuration(), Some(&first));

        let mut follower = log_of(&[1, 1]);
        let leaders = Snapshot {
            config: Some(second.clone()),
            ..image(2, 9)
        };
        assert!(follower.install(leaders));
        assert_eq!(follower.configuration(), Some(&second));
    }
}
