//! The replicated log on disk (LOG-2, LOG-4, WAL-1..WAL-3): entries in segment files, the
//! latest snapshot, recovery of both, and compaction that deletes whole segment files.
//!
//! The log lives in `log/` in the data directory, created by its first write:
//!
//! - `<sequence>-<first index>.seg` — segments, numbers in 20 decimal digits. Each has a
//!   16-byte header (see [`crate::record`]) and then records framed like `conclave.wal`'s:
//!   entries records (kind 10) and a seal ending every group commit. The sequence number orders
//!   them; the first index is the first entry the segment was started with. A new segment is
//!   started by the first sync after the current one passed [`WalOptions::segment_size`]
//!   (crate::WalOptions), so a segment is complete and fsynced before the next one gets a
//!   byte, and only the newest can end in a torn write.
//! - `snap-<index>-<term>.snap` — the latest snapshot ([`crate::snapshot`]).
//!
//! An entries record replaces every entry kept at or after its first index (LOG-2), so a
//! follower's conflicting suffix is truncated by the record that brings its replacement, and
//! both are durable — or lost in a crash — together. Recovery replays the records of every
//! segment in order, judging each segment like `conclave.wal` (WAL-2): a torn tail of the
//! newest segment is cut, any other damage refuses the start and leaves the files as they are.
//! Entries the snapshot covers are then dropped, and what remains must follow the snapshot
//! without a hole.
//!
//! Compaction runs after a snapshot is durable: it deletes the oldest segments, up to (not
//! including) the first one still holding an entry after the snapshot, and never the newest.
//! Entries a deleted segment held are covered by the snapshot or were replaced by records of a
//! later segment, which stay, so a restart reads the same log.
//!
//! Appends are held in memory until [`SegmentedLog::sync`] writes them with one write and one
//! fsync; a crash before it loses them, as it loses any write never fsynced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use conclave_core::storage::Snapshot;
use conclave_protocol::LogEntry;
use tracing::{info, warn};

use crate::error::{LogDamage, WalError};
use crate::examine::{Examination, Verdict, examine_from};
use crate::file::{io_error, remove_if_present, sync_dir};
use crate::record::{
    SEGMENT_HEADER_LEN, SegmentContent, encode_entries, encode_seal, entries_fitting_one_record,
    parse_segment_header, segment_header,
};
use crate::snapshot::{self, SnapshotWriteError};

/// The log's directory inside `node.data_dir`.
pub const LOG_DIR_NAME: &str = "log";
/// Default size past which the next sync starts a new segment.
pub const DEFAULT_SEGMENT_SIZE: u64 = 8 << 20;
const SEGMENT_SUFFIX: &str = ".seg";

/// The file name of a segment.
pub(crate) fn segment_file_name(sequence: u64, first_index: u64) -> String {
    format!("{sequence:020}-{first_index:020}{SEGMENT_SUFFIX}")
}

/// The sequence number and first index a segment's file name carries, if it is one's.
pub(crate) fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let (sequence, first) = name.strip_suffix(SEGMENT_SUFFIX)?.split_once('-')?;
    Some((sequence.parse().ok()?, first.parse().ok()?))
}

/// One segment file.
#[derive(Debug)]
struct Segment {
    sequence: u64,
    path: PathBuf,
    /// Bytes in the file, all of them synced.
    len: u64,
}

/// One segment as read from disk: its name, bytes and what they hold.
#[derive(Debug)]
pub(crate) struct ReadSegment {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its sequence number, from its name.
    pub(crate) sequence: u64,
    /// The first index its name says.
    pub(crate) named_first: u64,
    /// The file's bytes.
    pub(crate) bytes: Vec<u8>,
    /// Its header's first index, or why the header is not one.
    pub(crate) header: Result<u64, &'static str>,
    /// The records after the header (nothing when the header is bad).
    pub(crate) examination: Examination<SegmentContent>,
}

/// Every segment in `log_dir`, oldest first, read but not judged. A directory that does not
/// exist holds none.
pub(crate) fn read_segments(log_dir: &Path) -> Result<Vec<ReadSegment>, WalError> {
    let listing = match fs::read_dir(log_dir) {
        Ok(listing) => listing,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error(log_dir)(error)),
    };
    let mut named = Vec::new();
    for entry in listing {
        let entry = entry.map_err(io_error(log_dir))?;
        if let Some((sequence, first)) = parse_segment_name(&entry.file_name().to_string_lossy()) {
            named.push((sequence, first, entry.path()));
        }
    }
    named.sort_by_key(|(sequence, _, _)| *sequence);
    let mut segments = Vec::with_capacity(named.len());
    for (sequence, named_first, path) in named {
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            // Compacted away since the listing: `inspect` reads a running node's log without
            // its lock. Recovery holds the lock, so nothing vanishes under it.
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(io_error(&path)(error)),
        };
        let header = parse_segment_header(&bytes);
        let examination = if header.is_ok() {
            examine_from(&bytes, SEGMENT_HEADER_LEN)
        } else {
            examine_from(&[], 0)
        };
        segments.push(ReadSegment {
            path,
            sequence,
            named_first,
            bytes,
            header,
            examination,
        });
    }
    Ok(segments)
}

/// Replaces every entry of `kept` at or after the first of `entries` with `entries`, noting
/// the segment each comes from. `kept` is sorted by index (every splice keeps it so), though
/// not always contiguous while segments a compaction deleted are replayed.
fn splice(kept: &mut Vec<LogEntry>, segments: &mut Vec<u64>, entries: &[LogEntry], sequence: u64) {
    let Some(first) = entries.first() else {
        return;
    };
    let keep = kept.partition_point(|entry| entry.index < first.index);
    kept.truncate(keep);
    segments.truncate(keep);
    kept.extend_from_slice(entries);
    segments.extend(std::iter::repeat_n(sequence, entries.len()));
}

/// Drops the entries `snapshot` covers.
fn drop_covered(kept: &mut Vec<LogEntry>, segments: &mut Vec<u64>, covered: u64) {
    let covered_count = kept.partition_point(|entry| entry.index <= covered);
    kept.drain(..covered_count);
    segments.drain(..covered_count);
}

/// The replicated log of one node. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct SegmentedLog {
    data_dir: PathBuf,
    dir: PathBuf,
    segment_size: u64,
    /// Oldest first; the last one is appended to.
    segments: Vec<Segment>,
    /// The newest segment, open for appending, once this run wrote to it.
    current: Option<File>,
    snapshot: Option<Snapshot>,
    /// The entries a restart would recover: after the snapshot, contiguous.
    entries: Vec<LogEntry>,
    /// The sequence number of the segment holding each of `entries`.
    entry_segments: Vec<u64>,
    /// Appends not yet written, in order.
    pending: Vec<Vec<LogEntry>>,
    /// The highest index an append may start at: one past the last entry, pending ones
    /// included, or past the snapshot.
    next_index: u64,
    /// A write or fsync failed; see [`WalError::Failed`].
    failed: bool,
}

/// What [`SegmentedLog::open`] recovered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RecoveredLog {
    /// Bytes of a torn tail cut off the newest segment.
    pub(crate) truncated_bytes: u64,
}

impl SegmentedLog {
    /// Recovers the log in `data_dir/log` (WAL-2, LOG-2, LOG-4): the newest snapshot, then
    /// every segment's records in order; cuts a torn tail off the newest segment and removes
    /// a newest segment left without entries by a torn creation. Creates nothing when the
    /// directory does not exist.
    ///
    /// Errors: a damaged segment or snapshot ([`WalError::LogDamaged`]) or a hole in the log
    /// ([`WalError::LogGap`]), with every file left as it was; I/O.
    pub(crate) fn open(
        data_dir: &Path,
        segment_size: u64,
    ) -> Result<(SegmentedLog, RecoveredLog), WalError> {
        let dir = data_dir.join(LOG_DIR_NAME);
        let mut log = SegmentedLog {
            data_dir: data_dir.to_path_buf(),
            dir: dir.clone(),
            segment_size,
            segments: Vec::new(),
            current: None,
            snapshot: None,
            entries: Vec::new(),
            entry_segments: Vec::new(),
            pending: Vec::new(),
            next_index: 1,
            failed: false,
        };
        let mut recovered = RecoveredLog::default();
        if !dir.is_dir() {
            return Ok((log, recovered));
        }
        let Judgement {
            segments,
            snapshot,
            entries,
            entry_segments,
            leftovers,
            torn_creation,
            cut,
        } = judge(&dir)?;
        let covered = snapshot.as_ref().map_or(0, |snapshot| snapshot.last.index);
        log.segments = segments;

        // The log is sound: now the files may change.
        snapshot::remove_leftovers(&leftovers)?;
        if let Some(path) = torn_creation {
            warn!(
                path = %path.display(),
                "removing a log segment whose creation was interrupted (it holds no entries)"
            );
            remove_if_present(&path)?;
            sync_dir(&dir)?;
        }
        if let Some((path, keep, len)) = cut {
            warn!(
                path = %path.display(),
                dropped_bytes = len - keep,
                kept_bytes = keep,
                "log segment has a torn tail; cutting it off (it was never acknowledged)"
            );
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io_error(&path))?;
            file.set_len(keep)
                .and_then(|()| file.sync_all())
                .map_err(io_error(&path))?;
            recovered.truncated_bytes = len - keep;
        }
        log.next_index = entries
            .last()
            .map_or(covered, |entry| entry.index)
            .saturating_add(1);
        log.snapshot = snapshot;
        log.entries = entries;
        log.entry_segments = entry_segments;
        if !log.entries.is_empty() || log.snapshot.is_some() {
            info!(
                dir = %log.dir.display(),
                segments = log.segments.len(),
                entries = log.entries.len(),
                snapshot_index = covered,
                "log recovered"
            );
        }
        Ok((log, recovered))
    }

    /// The latest snapshot, durable.
    pub(crate) fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// The durable entries after the snapshot.
    pub(crate) fn entries(&self) -> &[LogEntry] {
        &self.entries
    }

    /// Holds `entries` for the next [`Self::sync`]: every entry at or after the first one's
    /// index is replaced (LOG-2). Refuses, before holding anything, an append that would leave
    /// a hole, is not contiguous, or holds an entry too large for a record.
    pub(crate) fn append(&mut self, entries: &[LogEntry]) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(());
        };
        let refuse = |reason| WalError::BadAppend {
            dir: self.dir.clone(),
            first: first.index,
            last: last.index,
            next_index: self.next_index,
            reason,
        };
        if first.index == 0 {
            return Err(refuse("log indexes start at 1"));
        }
        if first.index > self.next_index {
            return Err(refuse("it would leave a hole before its first entry"));
        }
        if entries
            .windows(2)
            .any(|pair| pair[0].index.checked_add(1) != Some(pair[1].index))
        {
            return Err(refuse("its indexes do not follow one another"));
        }
        if let Some(large) = entries
            .iter()
            .find(|entry| entries_fitting_one_record(std::slice::from_ref(*entry)) == 0)
        {
            return Err(WalError::EntryTooLarge {
                dir: self.dir.clone(),
                index: large.index,
                bytes: large.data.len(),
            });
        }
        self.next_index = last.index.saturating_add(1);
        self.pending.push(entries.to_vec());
        Ok(())
    }

    /// Whether appends wait for a sync.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes every held append with one write and one fsync (WAL-1), into the newest segment
    /// or, once that passed the segment size, a new one (created, fsynced, and its directory
    /// fsynced). A failure leaves the log refusing every later write ([`WalError::Failed`]).
    pub(crate) fn sync(&mut self) -> Result<(), WalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.refuse_if_failed()?;
        let pending = std::mem::take(&mut self.pending);
        let first_index = pending
            .first()
            .and_then(|append| append.first())
            .map_or(1, |entry| entry.index);
        let rotate = self
            .segments
            .last()
            .is_none_or(|segment| segment.len >= self.segment_size);
        let mut bytes = Vec::new();
        if rotate {
            bytes.extend_from_slice(&segment_header(first_index));
        }
        for append in &pending {
            let mut rest = append.as_slice();
            while !rest.is_empty() {
                // At least one: `append` refused entries too large for a record.
                let fitting = entries_fitting_one_record(rest).max(1);
                encode_entries(&mut bytes, &rest[..fitting]);
                rest = &rest[fitting..];
            }
        }
        // As in conclave.wal: damage to any record of this batch is followed by something
        // valid, so it is told from a torn tail (WAL-2).
        encode_seal(&mut bytes);

        let written = if rotate {
            self.start_segment(first_index, &bytes)
        } else {
            self.write_current(&bytes)
        };
        if let Err(error) = written {
            self.failed = true;
            return Err(error);
        }
        let Some(segment) = self.segments.last() else {
            return Ok(());
        };
        let sequence = segment.sequence;
        let covered = self.covered();
        for append in &pending {
            splice(
                &mut self.entries,
                &mut self.entry_segments,
                append,
                sequence,
            );
        }
        drop_covered(&mut self.entries, &mut self.entry_segments, covered);
        Ok(())
    }

    /// Creates the next segment holding `bytes` (its header first), durably: the file is
    /// fsynced, then the directory, so its name survives a crash too.
    fn start_segment(&mut self, first_index: u64, bytes: &[u8]) -> Result<(), WalError> {
        self.create_dir()?;
        let sequence = match self.segments.last() {
            None => 1,
            Some(segment) => segment
                .sequence
                .checked_add(1)
                .ok_or_else(|| WalError::Io {
                    path: segment.path.clone(),
                    source: io::Error::other("segment sequence numbers are exhausted"),
                })?,
        };
        let path = self.dir.join(segment_file_name(sequence, first_index));
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                file.sync_all()?;
                Ok(file)
            })
            .map_err(io_error(&path))?;
        sync_dir(&self.dir)?;
        self.current = Some(file);
        self.segments.push(Segment {
            sequence,
            path,
            len: bytes.len() as u64,
        });
        Ok(())
    }

    /// Appends `bytes` to the newest segment and fsyncs it.
    fn write_current(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        let Some(segment) = self.segments.last_mut() else {
            return Ok(());
        };
        let file = match &mut self.current {
            Some(file) => file,
            slot => slot.insert(
                OpenOptions::new()
                    .append(true)
                    .open(&segment.path)
                    .map_err(io_error(&segment.path))?,
            ),
        };
        // sync_data: the new size is the only metadata needed to read the bytes back.
        file.write_all(bytes)
            .and_then(|()| file.sync_data())
            .map_err(io_error(&segment.path))?;
        segment.len += bytes.len() as u64;
        Ok(())
    }

    /// Makes `snapshot` the latest, durably (WAL-3), then drops the entries it covers and
    /// deletes the segments left holding none of the log after it. Held appends stay held.
    pub(crate) fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        if let Some(kept) = &self.snapshot {
            if snapshot.last.index < kept.last.index {
                return Err(WalError::SnapshotBehind {
                    dir: self.dir.clone(),
                    index: snapshot.last.index,
                    kept: kept.last.index,
                });
            }
        }
        self.create_dir()?;
        let path = match snapshot::write(&self.dir, &snapshot) {
            Ok(path) => path,
            Err(SnapshotWriteError::BeforeRename(error)) => return Err(error),
            Err(SnapshotWriteError::AfterRename(error)) => {
                self.failed = true;
                return Err(error);
            }
        };
        let covered = snapshot.last.index;
        self.snapshot = Some(snapshot);
        self.next_index = self.next_index.max(covered.saturating_add(1));
        drop_covered(&mut self.entries, &mut self.entry_segments, covered);
        // The new snapshot is durable; what follows only frees space, and a leftover is
        // harmless (an older snapshot is never read while a newer one exists, and a segment
        // replays to entries the snapshot covers), so failures are logged, not returned.
        if let Err(error) = snapshot::remove_others(&self.dir, &path) {
            warn!(%error, "could not remove an older snapshot; it is removed at the next start");
        }
        if let Err(error) = self.compact() {
            warn!(%error, "log compaction failed; the segments stay until the next snapshot");
        }
        Ok(())
    }

    /// Deletes the oldest segments, up to the first one holding an entry after the snapshot,
    /// never the newest.
    fn compact(&mut self) -> Result<(), WalError> {
        let first_needed = self.entry_segments.first().copied().unwrap_or(u64::MAX);
        let deletable = self
            .segments
            .iter()
            .take(self.segments.len().saturating_sub(1))
            .take_while(|segment| segment.sequence < first_needed)
            .count();
        if deletable == 0 {
            return Ok(());
        }
        // Oldest first: a crash part way leaves a prefix deleted, which replays the same.
        for segment in self.segments.drain(..deletable) {
            remove_if_present(&segment.path)?;
        }
        sync_dir(&self.dir)?;
        info!(
            dir = %self.dir.display(),
            deleted_segments = deletable,
            kept_segments = self.segments.len(),
            "log compacted behind the snapshot"
        );
        Ok(())
    }

    /// The index the snapshot covers up to.
    fn covered(&self) -> u64 {
        self.snapshot
            .as_ref()
            .map_or(0, |snapshot| snapshot.last.index)
    }

    fn create_dir(&self) -> Result<(), WalError> {
        if self.dir.is_dir() {
            return Ok(());
        }
        fs::create_dir(&self.dir).map_err(io_error(&self.dir))?;
        // The directory's entry lives in the data directory.
        sync_dir(&self.data_dir)
    }

    fn refuse_if_failed(&self) -> Result<(), WalError> {
        if self.failed {
            return Err(WalError::Failed {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Puts the log in the state a failed write leaves it in.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn fail_for_test(&mut self) {
        self.failed = true;
    }
}

/// What recovery finds in a log directory and would change: see [`judge`].
#[derive(Debug)]
pub(crate) struct Judgement {
    /// The segments kept, oldest first.
    segments: Vec<Segment>,
    /// The newest snapshot.
    pub(crate) snapshot: Option<Snapshot>,
    /// The entries after it, contiguous.
    pub(crate) entries: Vec<LogEntry>,
    /// The sequence number of the segment holding each entry.
    entry_segments: Vec<u64>,
    /// Interrupted or superseded snapshot files, to remove.
    leftovers: Vec<PathBuf>,
    /// The newest segment, when its creation was interrupted before any entry was in it.
    pub(crate) torn_creation: Option<PathBuf>,
    /// The newest segment's torn tail: the file, where its last complete record ends and
    /// its length.
    pub(crate) cut: Option<(PathBuf, u64, u64)>,
}

/// Judges the log in `dir` as recovery does (WAL-2, LOG-2, LOG-4), changing nothing: every
/// segment in order, with a torn tail allowed only at the end of the newest, and the newest
/// snapshot; then replays the entries records and checks that what remains after the
/// snapshot has no hole.
///
/// Errors: a damaged segment or snapshot ([`WalError::LogDamaged`]), a hole
/// ([`WalError::LogGap`]); I/O.
pub(crate) fn judge(dir: &Path) -> Result<Judgement, WalError> {
    let read = read_segments(dir)?;
    // Judge every segment before changing any file, so a refusal leaves all untouched.
    let mut cut: Option<(PathBuf, u64, u64)> = None;
    let mut torn_creation: Option<PathBuf> = None;
    let count = read.len();
    for (position, segment) in read.iter().enumerate() {
        let newest = position + 1 == count;
        if let Some(earlier) = read[..position]
            .iter()
            .find(|earlier| earlier.sequence == segment.sequence)
        {
            return Err(damaged(
                &earlier.path,
                LogDamage::DuplicateSequence(segment.sequence),
            ));
        }
        let header = match segment.header {
            Ok(first) => first,
            // A newest segment whose header is bad and in which nothing valid can be
            // found was being created when the node stopped: nothing in it was synced.
            Err(_)
                if newest
                    && examine_from::<SegmentContent>(&segment.bytes, 0)
                        .records
                        .is_empty() =>
            {
                torn_creation = Some(segment.path.clone());
                continue;
            }
            Err(reason) => return Err(damaged(&segment.path, LogDamage::BadHeader(reason))),
        };
        if header != segment.named_first {
            return Err(damaged(
                &segment.path,
                LogDamage::WrongStart {
                    found: header,
                    by: "file name",
                    expected: segment.named_first,
                },
            ));
        }
        check_segment(&segment.path, &segment.examination, newest)?;
        let first_entries =
            segment
                .examination
                .trusted()
                .find_map(|record| match &record.content {
                    SegmentContent::Entries(entries) => entries.first().map(|entry| entry.index),
                    _ => None,
                });
        match first_entries {
            Some(found) if found != header => {
                return Err(damaged(
                    &segment.path,
                    LogDamage::WrongStart {
                        found,
                        by: "header",
                        expected: header,
                    },
                ));
            }
            Some(_) => {}
            None if newest => torn_creation = Some(segment.path.clone()),
            // An older segment always holds entries: it was started by a sync of some.
            None => {
                return Err(damaged(
                    &segment.path,
                    LogDamage::TornBeforeNewer {
                        offset: SEGMENT_HEADER_LEN as u64,
                        reason: "a segment without entries",
                    },
                ));
            }
        }
        if torn_creation.is_none() && segment.examination.trusted_end() < segment.bytes.len() as u64
        {
            cut = Some((
                segment.path.clone(),
                segment.examination.trusted_end(),
                segment.bytes.len() as u64,
            ));
        }
    }

    let (snapshot, leftovers) = snapshot::recover(dir)?;
    let covered = snapshot.as_ref().map_or(0, |snapshot| snapshot.last.index);
    let mut kept = Vec::new();
    let mut kept_segments = Vec::new();
    let mut segments = Vec::new();
    for segment in &read {
        if torn_creation.as_ref() == Some(&segment.path) {
            continue;
        }
        for record in segment.examination.trusted() {
            if let SegmentContent::Entries(entries) = &record.content {
                splice(&mut kept, &mut kept_segments, entries, segment.sequence);
            }
        }
        segments.push(Segment {
            sequence: segment.sequence,
            path: segment.path.clone(),
            len: segment.examination.trusted_end(),
        });
    }
    drop_covered(&mut kept, &mut kept_segments, covered);
    // `kept` is sorted, so a hole is between the snapshot and the first entry or between two
    // neighbours.
    let gap = |missing_from: u64, next: u64| WalError::LogGap {
        dir: dir.to_path_buf(),
        missing_from,
        missing_to: next.saturating_sub(1),
    };
    if let Some(first) = kept.first() {
        if first.index != covered.saturating_add(1) {
            return Err(gap(covered.saturating_add(1), first.index));
        }
    }
    if let Some(pair) = kept
        .windows(2)
        .find(|pair| pair[0].index.saturating_add(1) != pair[1].index)
    {
        return Err(gap(pair[0].index.saturating_add(1), pair[1].index));
    }

    Ok(Judgement {
        segments,
        snapshot,
        entries: kept,
        entry_segments: kept_segments,
        leftovers,
        torn_creation,
        cut,
    })
}

/// The error for a damaged segment or snapshot file.
fn damaged(path: &Path, damage: LogDamage) -> WalError {
    WalError::LogDamaged {
        path: path.to_path_buf(),
        damage,
    }
}

/// Refuses a segment whose examination a node must not start from: any damage but a torn tail
/// of the newest segment.
pub(crate) fn check_segment(
    path: &Path,
    examination: &Examination<SegmentContent>,
    newest: bool,
) -> Result<(), WalError> {
    let damage = match examination.verdict {
        Verdict::Clean => return Ok(()),
        Verdict::TornTail { .. } if newest => return Ok(()),
        Verdict::TornTail { offset, reason, .. } => LogDamage::TornBeforeNewer { offset, reason },
        Verdict::Corrupt {
            offset,
            record,
            reason,
            next_valid,
        } => LogDamage::Corrupt {
            offset,
            record,
            reason,
            next_valid,
        },
        Verdict::Unreadable {
            offset,
            kind,
            reason,
            ..
        } => LogDamage::Unreadable {
            offset,
            kind,
            reason,
        },
    };
    Err(damaged(path, damage))
}
