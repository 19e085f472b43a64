//! One node's WAL file, `conclave.wal` in the data directory: recovery, group-committed
//! appends and compaction (WAL-1, WAL-2, WAL-3), the incarnation bump of every start
//! (PROTO-2) and the in-memory leadership history (CB-6).
//!
//! Every call here blocks on the disk; [`WalActor`](super::WalActor) runs them on a thread of
//! their own (WAL-4).
//!
//! Recovery trusts the log only up to its first bad record: a record is appended after all
//! records before it were made durable, so the first record that is short or fails its
//! checksum is where the last write was torn, and nothing after it was ever acknowledged.
//! Everything from there on is cut off, so that the next append is not hidden behind garbage.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::clock::Instant;
use conclave_core::raft::HardState;
use tracing::{info, warn};

use super::error::WalError;
use super::record::{
    Decoded, HistoryRecord, KIND_LOG_ENTRIES, KIND_SNAPSHOT_MARKER, MAGIC, MAX_PAYLOAD_LEN,
    RECORD_HEADER_LEN, RecordHeader, WalRecord, checksum, decode,
};

/// The WAL's file name inside `node.data_dir`.
pub const WAL_FILE_NAME: &str = "conclave.wal";
/// Where compaction writes the new file before renaming it over the old one.
const COMPACTION_FILE_NAME: &str = "conclave.wal.tmp";

/// Default size above which an append compacts the file (WAL-3).
pub const DEFAULT_COMPACT_THRESHOLD: u64 = 1 << 20;
/// Default number of leadership history records kept, in memory and through compaction (CB-6).
pub const DEFAULT_HISTORY_LIMIT: usize = 1000;

/// Tuning of a [`WalFile`]; the defaults suit production, tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// File size in bytes above which [`WalFile::append`] compacts.
    pub compact_threshold: u64,
    /// Newest history records kept.
    pub history_limit: usize,
    /// Never start an incarnation below the wall clock's Unix seconds (see
    /// [`WalFile::open_with`]); off only in tests that count incarnations.
    pub incarnation_from_clock: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        Self {
            compact_threshold: DEFAULT_COMPACT_THRESHOLD,
            history_limit: DEFAULT_HISTORY_LIMIT,
            incarnation_from_clock: true,
        }
    }
}

/// What [`WalFile::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The last hard state in the file; the default (term 0, no vote) on a fresh node.
    pub hard_state: HardState,
    /// This start's incarnation, already durable (PROTO-2): the stored one plus one, or the
    /// Unix time in seconds when that is larger (see [`WalOptions::incarnation_from_clock`]).
    pub incarnation: u64,
    /// The newest leadership history records, oldest first (CB-6).
    pub history: Vec<HistoryRecord>,
    /// Bytes of torn or corrupt tail that were cut off (WAL-2).
    pub truncated_bytes: u64,
    /// Valid records read from the file, skipped unknown kinds included, not counting the
    /// incarnation record `open` itself appends.
    pub records: u64,
}

/// The leadership history, newest last, bounded to a limit. It holds up to twice the limit
/// and trims in one go, so that a push is amortised O(1) while [`Self::as_slice`] stays a
/// plain slice.
#[derive(Debug)]
struct BoundedHistory {
    records: Vec<HistoryRecord>,
    limit: usize,
}

impl BoundedHistory {
    fn new(limit: usize) -> Self {
        Self {
            records: Vec::new(),
            limit,
        }
    }

    fn push(&mut self, record: HistoryRecord) {
        self.records.push(record);
        if self.records.len() > self.limit.saturating_mul(2).max(1) {
            let excess = self.records.len() - self.limit;
            self.records.drain(..excess);
        }
    }

    fn as_slice(&self) -> &[HistoryRecord] {
        &self.records[self.records.len().saturating_sub(self.limit)..]
    }
}

/// The state the records add up to.
#[derive(Debug)]
struct State {
    hard_state: HardState,
    incarnation: u64,
    history: BoundedHistory,
}

impl State {
    fn apply(&mut self, record: &WalRecord) {
        match record {
            WalRecord::HardState(state) => self.hard_state = *state,
            WalRecord::Incarnation(incarnation) => self.incarnation = *incarnation,
            WalRecord::LeaderChange(change) => self.history.push(*change),
        }
    }
}

/// One node's open WAL. Appends are durable when they return.
#[derive(Debug)]
pub struct WalFile {
    dir: PathBuf,
    path: PathBuf,
    /// Opened in append mode: every write lands at the end whatever a reader did before.
    file: File,
    /// Bytes in the file, header included.
    len: u64,
    /// Size right after the last compaction; the next one waits until the file doubled, so a
    /// history that alone exceeds the threshold cannot make every append compact.
    compacted_len: u64,
    options: WalOptions,
    state: State,
    /// Records of kinds this version does not know were found. Compaction would drop them, so
    /// it is off: they may be a newer version's log entries.
    holds_unknown_kinds: bool,
    /// A write or fsync failed; see [`WalError::Failed`].
    failed: bool,
}

impl WalFile {
    /// Opens (or creates) `dir/conclave.wal` with the default options; see
    /// [`WalFile::open_with`].
    pub fn open(dir: &Path) -> Result<(WalFile, Recovered), WalError> {
        Self::open_with(dir, WalOptions::default())
    }

    /// Opens (or creates) `dir/conclave.wal`, recovers it and starts a new incarnation.
    ///
    /// Creates `dir` if needed. Reads records up to the last valid one; a torn or corrupt tail
    /// is cut off, fsynced and logged (WAL-2). Then the incarnation is advanced, appended and
    /// fsynced before this returns (PROTO-2), so two starts never share an incarnation.
    ///
    /// Errors: a file that is not a conclave WAL ([`WalError::ForeignFile`], left untouched),
    /// a checksummed record that cannot be read ([`WalError::BadRecord`]), I/O.
    pub fn open_with(dir: &Path, options: WalOptions) -> Result<(WalFile, Recovered), WalError> {
        let dir_existed = dir.is_dir();
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        if !dir_existed {
            // The new directory's entry lives in its parent; without this a crash could lose
            // the directory and the vote inside it.
            if let Some(parent) = dir.parent() {
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                sync_dir(parent)?;
            }
        }

        let path = dir.join(WAL_FILE_NAME);
        let (file, created) = match OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => (file, true),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                let file = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .open(&path)
                    .map_err(io_error(&path))?;
                (file, false)
            }
            Err(error) => return Err(io_error(&path)(error)),
        };
        let file_len = file.metadata().map_err(io_error(&path))?.len();

        let mut reader = BufReader::new(&file);
        let mut found = [0u8; 4];
        let found_len = read_full(&mut reader, &mut found).map_err(io_error(&path))?;
        let found = &found[..found_len];
        if found != MAGIC && !(file_len < 4 && MAGIC.starts_with(found)) {
            return Err(WalError::ForeignFile {
                path,
                found: found.to_vec(),
            });
        }

        let mut state = State {
            hard_state: HardState::default(),
            incarnation: 0,
            history: BoundedHistory::new(options.history_limit),
        };
        let (good_end, records, holds_unknown_kinds) = if found == MAGIC {
            let scan = scan(&mut reader, &path, &mut |record| state.apply(record))?;
            (scan.good_end, scan.records, scan.holds_unknown_kinds)
        } else {
            // Empty, or a prefix of the magic: a file whose creation was cut short.
            (0, 0, false)
        };
        drop(reader);

        // Saturating: the file could only be shorter than what was read if something else cut it
        // meanwhile, and that must not become a panic.
        let truncated_bytes = file_len.saturating_sub(good_end);
        if truncated_bytes > 0 {
            warn!(
                path = %path.display(),
                dropped_bytes = truncated_bytes,
                kept_bytes = good_end,
                "WAL has a torn or corrupt tail; cutting it off (the log is trusted up to its \
                 first bad record)"
            );
            file.set_len(good_end).map_err(io_error(&path))?;
            file.sync_all().map_err(io_error(&path))?;
        }

        let mut wal = WalFile {
            dir: dir.to_path_buf(),
            path,
            file,
            len: good_end,
            compacted_len: 0,
            options,
            state,
            holds_unknown_kinds,
            failed: false,
        };
        if wal.len == 0 {
            wal.write_durably(&MAGIC)?;
            wal.len = MAGIC.len() as u64;
        }
        if created {
            // The file's name must survive a crash as well as its contents.
            sync_dir(&wal.dir)?;
        }
        remove_leftover_compaction(&wal.dir)?;

        let next =
            wal.state
                .incarnation
                .checked_add(1)
                .ok_or_else(|| WalError::IncarnationExhausted {
                    path: wal.path.clone(),
                })?;
        // Peers refuse a sender's frames whose (incarnation, seq) is not newer than what they
        // accepted (PROTO-5). A node whose data directory was wiped would start again at 1 and
        // be refused as a replay until every peer restarted. Starting no lower than the Unix
        // time in seconds keeps a wiped node newer than its old self, as long as the clock did
        // not go back; the stored value plus one still guarantees growth when it did.
        let incarnation = if wal.options.incarnation_from_clock {
            next.max(crate::events::unix_millis(std::time::SystemTime::now()) / 1000)
        } else {
            next
        };
        wal.append(&[WalRecord::Incarnation(incarnation)])?;

        info!(
            path = %wal.path.display(),
            records,
            incarnation,
            term = wal.state.hard_state.term,
            "WAL recovered"
        );
        let recovered = Recovered {
            hard_state: wal.state.hard_state,
            incarnation,
            history: wal.history().to_vec(),
            truncated_bytes,
            records,
        };
        Ok((wal, recovered))
    }

    /// Appends `records` with one write and one fsync (group commit, WAL-1), and returns how
    /// long the write and fsync took. The records are durable when this returns `Ok`; an empty
    /// slice does nothing. May compact afterwards (WAL-3); a failed compaction is logged and
    /// does not fail the append, whose records are already durable.
    ///
    /// After an error the WAL refuses further appends ([`WalError::Failed`]).
    pub fn append(&mut self, records: &[WalRecord]) -> Result<Duration, WalError> {
        if records.is_empty() {
            return Ok(Duration::ZERO);
        }
        let mut bytes = Vec::with_capacity(64 * records.len());
        for record in records {
            record.encode_into(&mut bytes);
        }
        // tokio's clock: outside a runtime (this runs on a SyncArbiter thread) it reads the
        // OS monotonic clock, even while a test has paused the runtime's clock.
        let started = Instant::now();
        self.write_durably(&bytes)?;
        let elapsed = started.elapsed();
        self.len += bytes.len() as u64;
        for record in records {
            self.state.apply(record);
        }
        if self.should_compact() {
            if let Err(error) = self.compact() {
                warn!(%error, "WAL compaction failed; the file keeps growing until one succeeds");
            }
        }
        Ok(elapsed)
    }

    /// Rewrites the file as the current hard state, incarnation and newest history records
    /// (WAL-3): written to `conclave.wal.tmp`, fsynced, renamed over `conclave.wal`, and the
    /// directory fsynced. A crash at any point leaves either the old file or the new one.
    ///
    /// Does nothing (and logs why) while the file holds records of kinds this version does not
    /// know, because compaction would drop them. History records skipped for an unknown cause
    /// are dropped by compaction.
    pub fn compact(&mut self) -> Result<(), WalError> {
        if self.failed {
            return Err(WalError::Failed {
                path: self.path.clone(),
            });
        }
        if self.holds_unknown_kinds {
            warn!(
                path = %self.path.display(),
                "WAL not compacted: it holds records of kinds this version does not know"
            );
            return Ok(());
        }
        let mut bytes = MAGIC.to_vec();
        WalRecord::HardState(self.state.hard_state).encode_into(&mut bytes);
        WalRecord::Incarnation(self.state.incarnation).encode_into(&mut bytes);
        for change in self.history() {
            WalRecord::LeaderChange(*change).encode_into(&mut bytes);
        }

        let temp = self.dir.join(COMPACTION_FILE_NAME);
        remove_if_present(&temp)?;
        let written = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| {
                file.write_all(&bytes)?;
                // sync_all, not sync_data: the new file's size and existence are metadata.
                file.sync_all()?;
                Ok(file)
            })
            .and_then(|file| fs::rename(&temp, &self.path).map(|()| file));
        let file = match written {
            Ok(file) => file,
            Err(source) => {
                // The old file is intact; the half-made one is only clutter.
                let _ = fs::remove_file(&temp);
                return Err(WalError::Io { path: temp, source });
            }
        };
        let before = self.len;
        // The path now names the new file, whose handle stays valid across the rename.
        self.file = file;
        self.len = bytes.len() as u64;
        self.compacted_len = self.len;
        if let Err(error) = sync_dir(&self.dir) {
            // The rename may not survive a crash, and records appended to the new file would
            // then vanish with it: take no more writes.
            self.failed = true;
            return Err(error);
        }
        info!(
            path = %self.path.display(),
            before_bytes = before,
            after_bytes = self.len,
            "WAL compacted"
        );
        Ok(())
    }

    /// The newest leadership history records, oldest first (CB-6).
    pub fn history(&self) -> &[HistoryRecord] {
        self.state.history.as_slice()
    }

    /// The last hard state written.
    pub fn hard_state(&self) -> HardState {
        self.state.hard_state
    }

    /// This start's incarnation (PROTO-2).
    pub fn incarnation(&self) -> u64 {
        self.state.incarnation
    }

    /// The WAL file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.len
    }

    /// Puts the WAL in the state a failed write or fsync leaves it in, which a test cannot
    /// otherwise provoke on a healthy disk.
    #[cfg(test)]
    pub(super) fn fail_for_test(&mut self) {
        self.failed = true;
    }

    fn should_compact(&self) -> bool {
        !self.holds_unknown_kinds
            && self.len > self.options.compact_threshold
            && self.len >= self.compacted_len.saturating_mul(2)
    }

    /// Writes and fsyncs, or marks the WAL failed.
    fn write_durably(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        if self.failed {
            return Err(WalError::Failed {
                path: self.path.clone(),
            });
        }
        // sync_data is enough for appends: it also flushes the file size, which is the only
        // metadata needed to read the new bytes back.
        let result = self
            .file
            .write_all(bytes)
            .and_then(|()| self.file.sync_data());
        result.map_err(|source| {
            self.failed = true;
            WalError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

/// Every valid record of `dir/conclave.wal` in order, read without changing the file: for
/// diagnostics and tests (for example, checking that no term ever held two different votes).
/// Reading stops at a torn or corrupt tail, as recovery does.
pub fn read_records(dir: &Path) -> Result<Vec<WalRecord>, WalError> {
    let path = dir.join(WAL_FILE_NAME);
    let file = File::open(&path).map_err(io_error(&path))?;
    let mut reader = BufReader::new(file);
    let mut found = [0u8; 4];
    let found_len = read_full(&mut reader, &mut found).map_err(io_error(&path))?;
    if found[..found_len] != MAGIC[..] {
        return Err(WalError::ForeignFile {
            path,
            found: found[..found_len].to_vec(),
        });
    }
    let mut records = Vec::new();
    scan(&mut reader, &path, &mut |record| records.push(*record))?;
    Ok(records)
}

/// What [`scan`] found.
struct Scan {
    /// End of the last valid record: everything after it is torn or corrupt.
    good_end: u64,
    records: u64,
    holds_unknown_kinds: bool,
}

/// Reads records after the magic until the end or the first bad one, applying them to `state`.
/// Only I/O errors and checksummed-but-unreadable records are errors: a bad tail is the
/// expected result of a crash, and ends the scan.
fn scan(
    reader: &mut impl Read,
    path: &Path,
    on_record: &mut dyn FnMut(&WalRecord),
) -> Result<Scan, WalError> {
    let mut offset = MAGIC.len() as u64;
    let mut records = 0u64;
    let mut skipped_kinds: Vec<(u8, u64)> = Vec::new();
    let mut skipped_causes = 0u64;
    let mut payload = Vec::new();
    let tail = loop {
        let mut header = [0u8; RECORD_HEADER_LEN];
        match read_full(reader, &mut header).map_err(io_error(path))? {
            0 => break None,
            RECORD_HEADER_LEN => {}
            _ => break Some("short record header"),
        }
        let header = RecordHeader::parse(&header);
        if header.length > MAX_PAYLOAD_LEN {
            break Some("record length over 1 MiB");
        }
        // Bounded by MAX_PAYLOAD_LEN just above, so a corrupt length cannot exhaust memory.
        payload.resize(header.length as usize, 0);
        if read_full(reader, &mut payload).map_err(io_error(path))? < payload.len() {
            break Some("short record payload");
        }
        if checksum(header.kind, &payload) != header.crc {
            break Some("checksum mismatch");
        }
        match decode(header.kind, &payload) {
            Ok(Decoded::Record(record)) => on_record(&record),
            Ok(Decoded::UnknownKind(kind)) => {
                match skipped_kinds.iter_mut().find(|(seen, _)| *seen == kind) {
                    Some((_, count)) => *count += 1,
                    None => skipped_kinds.push((kind, 1)),
                }
            }
            Ok(Decoded::UnknownCause(_)) => skipped_causes += 1,
            Err(reason) => {
                return Err(WalError::BadRecord {
                    path: path.to_path_buf(),
                    offset,
                    kind: header.kind,
                    reason,
                });
            }
        }
        records += 1;
        offset += (RECORD_HEADER_LEN + payload.len()) as u64;
    };
    if let Some(reason) = tail {
        warn!(path = %path.display(), offset, reason, "WAL record at this offset is torn or corrupt");
    }
    for (kind, count) in &skipped_kinds {
        let what = match *kind {
            KIND_LOG_ENTRIES => "reserved for replicated log entries",
            KIND_SNAPSHOT_MARKER => "reserved for snapshot markers",
            _ => "unknown",
        };
        warn!(
            path = %path.display(),
            kind, count, what,
            "skipped WAL records of a kind this version does not read (written by a newer \
             version?); compaction is off while they are in the file"
        );
    }
    if skipped_causes > 0 {
        warn!(
            path = %path.display(),
            count = skipped_causes,
            "skipped leadership history records with a cause this version does not know"
        );
    }
    Ok(Scan {
        good_end: offset,
        records,
        holds_unknown_kinds: !skipped_kinds.is_empty(),
    })
}

/// Fills `buf` as far as the input goes; returns how much was read (less only at the end).
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// A compaction that crashed before its rename leaves its temp file behind; the old WAL is
/// still whole, so the leftover is dropped.
fn remove_leftover_compaction(dir: &Path) -> Result<(), WalError> {
    let temp = dir.join(COMPACTION_FILE_NAME);
    if temp.exists() {
        warn!(path = %temp.display(), "removing the leftover of an interrupted WAL compaction");
        remove_if_present(&temp)?;
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), WalError> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(io_error(path)(error)),
        _ => Ok(()),
    }
}

/// Makes the directory's entries (a new or renamed file) durable.
fn sync_dir(dir: &Path) -> Result<(), WalError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|handle| handle.sync_all())
            .map_err(io_error(dir))
    }
    // Other platforms cannot open a directory as a file; the gateway targets Linux.
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}
