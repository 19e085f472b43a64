//! One node's WAL file, `conclave.wal` in the data directory: recovery, group-committed
//! appends and compaction (WAL-1, WAL-2, WAL-3), the incarnation bump of every start
//! (PROTO-2) and the in-memory leadership history (CB-6).
//!
//! Every call here blocks on the disk; the WalActor (`conclave-actors`) runs them on a thread
//! of its own (WAL-4).
//!
//! Recovery (WAL-2) reads the whole file and lets [`examine`](crate::examine) judge it: bad
//! bytes with nothing valid after them are a torn tail, the remains of an interrupted write
//! that was never acknowledged, and are cut off so the next append is not hidden behind
//! garbage; a damaged record with valid records after it is corruption, and the file is
//! refused and left untouched ([`WalError::Corrupt`]). Every group commit ends with a seal
//! record so that damage to the newest record is still followed by something valid.
//!
//! The data directory is locked ([`DataDirLock`]) before the file is opened, for as long as
//! the `WalFile` lives.
//!
//! A file that holds no hard state — wiped, deleted, or repaired (no hard state after the
//! repair marker) — is reported as [`Recovered::amnesic`]: the node may have voted in terms it
//! no longer knows, and the election core abstains until those terms are over. A file created
//! for a member of a new cluster starts with a genesis record instead (WAL-5: [`WalFile::init`],
//! or [`WalOptions::genesis`] on the first start in a directory no node used before), which
//! counts as a hard state of term 0: a durable "never voted".

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use conclave_core::election::{HardState, Mode};
use conclave_core::storage::{DurableState, Snapshot, Storage};
use conclave_protocol::LogEntry;
use tracing::{info, warn};

use crate::error::WalError;
use crate::examine::{Examination, RecordContent, Verdict, examine};
use crate::lock::DataDirLock;
use crate::log::{DEFAULT_SEGMENT_SIZE, LOG_DIR_NAME, SegmentedLog};
use crate::record::{
    HistoryRecord, KIND_LOG_ENTRIES, KIND_SNAPSHOT_MARKER, MAGIC, WalRecord, encode_seal,
};

/// The WAL's file name inside `node.data_dir`.
pub const WAL_FILE_NAME: &str = "conclave.wal";
/// Where compaction writes the new file before renaming it over the old one.
const COMPACTION_FILE_NAME: &str = "conclave.wal.tmp";
/// Where `repair` writes the new file before renaming it over the old one.
pub(crate) const REPAIR_FILE_NAME: &str = "conclave.wal.repair.tmp";

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
    /// The election mode of the node opening the file (`election.mode`): a file of another
    /// mode is refused ([`WalError::OtherMode`]), and a file that does not record one yet gets
    /// it. `None` (tools that only read) checks nothing.
    pub mode: Option<Mode>,
    /// `cluster.initial_state = "new"` (WAL-5): when this open creates the WAL in a
    /// directory no node used before, it starts the file with a genesis record, so the node
    /// takes part at once. A directory that shows an earlier node (its lock file, a repair's
    /// backup) gets none: its WAL was lost, and the node abstains.
    pub genesis: bool,
    /// Bytes past which the next sync of log entries starts a new segment file (LOG-4: a
    /// compaction deletes whole segments, so smaller segments free space sooner).
    pub segment_size: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        Self {
            compact_threshold: DEFAULT_COMPACT_THRESHOLD,
            history_limit: DEFAULT_HISTORY_LIMIT,
            incarnation_from_clock: true,
            mode: None,
            genesis: false,
            segment_size: DEFAULT_SEGMENT_SIZE,
        }
    }
}

/// What [`WalFile::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The last hard state in the file; the default (term 0, no vote) on a fresh node.
    pub hard_state: HardState,
    /// The file holds no hard state (a new or wiped node), or none after an amnesia marker: the
    /// node may have voted in terms it no longer knows, so it must abstain (WAL-2).
    pub amnesic: bool,
    /// The operator's last automatic-election switch, if one was ever recorded (RAFT-8); it
    /// wins over `election.auto`.
    pub auto_election: Option<bool>,
    /// This start's incarnation, already durable (PROTO-2): the stored one plus one, or the
    /// Unix time in seconds when that is larger (see [`WalOptions::incarnation_from_clock`]).
    pub incarnation: u64,
    /// The newest leadership history records, oldest first (CB-6).
    pub history: Vec<HistoryRecord>,
    /// Bytes of torn or corrupt tail that were cut off (WAL-2).
    pub truncated_bytes: u64,
    /// Valid records read from the file, skipped unknown kinds included, seals not counted, nor
    /// the records `open` itself appends (incarnation, mode).
    pub records: u64,
    /// The election mode the file's state belongs to once `open` is done: the recorded one
    /// (opened for a mode, always that mode), raft for a file with election state written
    /// before modes were recorded, `None` for a file without any opened for no mode.
    pub mode: Option<Mode>,
    /// When the file's genesis record was written (WAL-5), if it has one: the node was
    /// created for a new cluster.
    pub genesis_at_unix_ms: Option<u64>,
    /// This open created the WAL in a directory no node had used before. With
    /// [`Recovered::amnesic`] it means the node was started without `conclave init` or
    /// `cluster.initial_state = "new"`: the start says how a new cluster is created.
    pub fresh_directory: bool,
    /// The latest snapshot of the replicated log (LOG-4), if one was saved.
    pub snapshot: Option<Snapshot>,
    /// The replicated log's entries after the snapshot, in order and contiguous (LOG-2).
    pub entries: Vec<LogEntry>,
    /// Bytes of a torn tail cut off the newest log segment (WAL-2).
    pub log_truncated_bytes: u64,
}

/// The leadership history, newest last, bounded to a limit. It holds up to twice the limit
/// and trims in one go, so that a push is amortised O(1) while [`Self::as_slice`] stays a
/// plain slice.
#[derive(Debug)]
pub(crate) struct BoundedHistory {
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

    pub(crate) fn as_slice(&self) -> &[HistoryRecord] {
        &self.records[self.records.len().saturating_sub(self.limit)..]
    }
}

/// The state the records add up to.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) hard_state: HardState,
    /// A hard state record was seen.
    has_hard_state: bool,
    /// No hard state since the start of the file or the last amnesia marker.
    pub(crate) amnesic: bool,
    pub(crate) incarnation: u64,
    pub(crate) auto_election: Option<bool>,
    /// The mode record, if any.
    pub(crate) mode: Option<Mode>,
    /// When the last amnesia marker was written.
    amnesia_at_unix_ms: u64,
    /// When the genesis record was written, if the file has one (WAL-5).
    pub(crate) genesis_at_unix_ms: Option<u64>,
    pub(crate) history: BoundedHistory,
}

impl State {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            hard_state: HardState::default(),
            has_hard_state: false,
            amnesic: true,
            incarnation: 0,
            auto_election: None,
            mode: None,
            amnesia_at_unix_ms: 0,
            genesis_at_unix_ms: None,
            history: BoundedHistory::new(history_limit),
        }
    }

    pub(crate) fn apply(&mut self, record: &WalRecord) {
        match record {
            WalRecord::HardState(state) => {
                self.hard_state = *state;
                self.has_hard_state = true;
                self.amnesic = false;
            }
            WalRecord::Incarnation(incarnation) => self.incarnation = *incarnation,
            WalRecord::LeaderChange(change) => self.history.push(*change),
            WalRecord::Amnesia { at_unix_ms } => {
                self.amnesic = true;
                self.amnesia_at_unix_ms = *at_unix_ms;
            }
            WalRecord::AutoElection(enabled) => self.auto_election = Some(*enabled),
            WalRecord::Mode(mode) => self.mode = Some(*mode),
            WalRecord::Genesis { at_unix_ms } => {
                // A durable "never voted": as good as a hard state of term 0 (WAL-5).
                self.genesis_at_unix_ms = Some(*at_unix_ms);
                self.amnesic = false;
            }
        }
    }

    /// The mode the election state belongs to: the recorded one; raft for election state
    /// written before modes were recorded (every file of earlier versions is raft's); `None`
    /// when there is no election state at all.
    pub(crate) fn mode(&self) -> Option<Mode> {
        let holds_election_state = self.has_hard_state
            || self.auto_election.is_some()
            || !self.history.as_slice().is_empty();
        self.mode
            .or_else(|| holds_election_state.then_some(Mode::Raft))
    }

    /// The records a compacted file holds: the same state in as few records as possible. The
    /// amnesia marker stays after the hard state while the node is amnesic, so that a
    /// compaction never ends an abstention.
    fn compacted(&self) -> Vec<WalRecord> {
        let mut records = Vec::new();
        if let Some(mode) = self.mode {
            records.push(WalRecord::Mode(mode));
        }
        if let Some(at_unix_ms) = self.genesis_at_unix_ms {
            records.push(WalRecord::Genesis { at_unix_ms });
        }
        if self.has_hard_state {
            records.push(WalRecord::HardState(self.hard_state));
        }
        if self.amnesic && (self.has_hard_state || self.genesis_at_unix_ms.is_some()) {
            records.push(WalRecord::Amnesia {
                at_unix_ms: self.amnesia_at_unix_ms,
            });
        }
        records.push(WalRecord::Incarnation(self.incarnation));
        if let Some(enabled) = self.auto_election {
            records.push(WalRecord::AutoElection(enabled));
        }
        records.extend(
            self.history
                .as_slice()
                .iter()
                .copied()
                .map(WalRecord::LeaderChange),
        );
        records
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
    /// The replicated log's segments and snapshot (LOG-2, LOG-4), in `log/`.
    log: SegmentedLog,
    /// The hard state saved through [`Storage::save_hard_state`], written at the next sync.
    pending_hard_state: Option<HardState>,
    /// Held as long as the file is open (WAL-2: one process per data directory).
    _lock: DataDirLock,
}

impl WalFile {
    /// Opens (or creates) `dir/conclave.wal` with the default options; see
    /// [`WalFile::open_with`].
    pub fn open(dir: &Path) -> Result<(WalFile, Recovered), WalError> {
        Self::open_with(dir, WalOptions::default())
    }

    /// Opens (or creates) `dir/conclave.wal` for a node running election `mode`, with the
    /// default options otherwise: a file of another mode is refused
    /// ([`WalError::OtherMode`]), untouched; see [`WalFile::open_with`].
    pub fn open_for_mode(dir: &Path, mode: Mode) -> Result<(WalFile, Recovered), WalError> {
        Self::open_with(
            dir,
            WalOptions {
                mode: Some(mode),
                ..WalOptions::default()
            },
        )
    }

    /// Whether `dir` is one [`WalFile::init`] would take: refused ([`WalError::NotNew`]) when
    /// a node has used it before (see `init`). Checks, writes nothing.
    pub fn check_new(dir: &Path) -> Result<(), WalError> {
        match earlier_node(dir)? {
            Some(reason) => Err(WalError::NotNew {
                dir: dir.to_path_buf(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Creates the WAL of a member of a new cluster (WAL-5, `conclave init`): `dir/conclave.wal`
    /// starting with the election mode and a genesis record, so the node takes part in
    /// elections from its first start. Refused ([`WalError::NotNew`]) for a directory a node
    /// has used before: a genesis there would make a node that lost its WAL vote again in
    /// terms it may have voted in. Returns what a start would recover from it.
    pub fn init(dir: &Path, mode: Mode) -> Result<Recovered, WalError> {
        Self::check_new(dir)?;
        let (_wal, recovered) = Self::open_with(
            dir,
            WalOptions {
                mode: Some(mode),
                genesis: true,
                ..WalOptions::default()
            },
        )?;
        Ok(recovered)
    }

    /// Opens (or creates) `dir/conclave.wal`, recovers it and starts a new incarnation.
    ///
    /// Creates `dir` if needed and locks it before reading a byte ([`WalError::Locked`] if
    /// another process holds it). Reads the whole file and judges it (WAL-2): a torn tail is cut
    /// off, fsynced and logged; a damaged record followed by valid ones is corruption, refused
    /// with the file left untouched. Then the incarnation is advanced, appended and fsynced
    /// before this returns (PROTO-2), so two starts never share an incarnation.
    ///
    /// Errors: the directory is locked ([`WalError::Locked`]); a file that is not a conclave
    /// WAL ([`WalError::ForeignFile`]), a corrupt file ([`WalError::Corrupt`]) or a
    /// checksummed record that cannot be read ([`WalError::BadRecord`]), all left untouched;
    /// I/O.
    pub fn open_with(dir: &Path, options: WalOptions) -> Result<(WalFile, Recovered), WalError> {
        // Looked at before the lock file is created: that file is one of the traces.
        let fresh_directory = earlier_node(dir)?.is_none();
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
        let lock = DataDirLock::acquire(dir)?;

        let path = dir.join(WAL_FILE_NAME);
        let (mut file, created) = match OpenOptions::new()
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
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_error(&path))?;
        let file_len = bytes.len() as u64;

        let mut state = State::new(options.history_limit);
        let (good_end, records, holds_unknown_kinds) = if has_magic(&path, &bytes)? {
            let examination = examine(&bytes);
            refuse_damage(&path, &examination)?;
            let mut records = 0;
            let mut holds_unknown_kinds = false;
            for record in examination.trusted() {
                match &record.content {
                    RecordContent::Record(record) => state.apply(record),
                    RecordContent::UnknownKind => holds_unknown_kinds = true,
                    RecordContent::Seal
                    | RecordContent::UnknownCause(_)
                    | RecordContent::Unreadable(_) => {}
                }
                if record.content != RecordContent::Seal {
                    records += 1;
                }
            }
            warn_about_skipped(&path, &examination);
            if let Verdict::TornTail { offset, reason, .. } = examination.verdict {
                warn!(
                    path = %path.display(),
                    offset,
                    reason,
                    "WAL ends with a torn write: nothing valid follows the bad bytes"
                );
            }
            (examination.trusted_end(), records, holds_unknown_kinds)
        } else {
            // Empty, or a prefix of the magic: a file whose creation was cut short.
            (0, 0, false)
        };

        // The log is judged once the WAL is, and before either is changed: a damaged segment
        // refuses the start with every file as it was, the WAL's torn tail included.
        let (log, recovered_log) = SegmentedLog::open(dir, options.segment_size)?;

        // Saturating: the file could only be shorter than what was read if something else cut it
        // meanwhile, and that must not become a panic.
        let truncated_bytes = file_len.saturating_sub(good_end);
        if truncated_bytes > 0 {
            warn!(
                path = %path.display(),
                dropped_bytes = truncated_bytes,
                kept_bytes = good_end,
                "WAL has a torn tail; cutting it off (it was never acknowledged)"
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
            log,
            pending_hard_state: None,
            _lock: lock,
        };
        if wal.len == 0 {
            wal.write_durably(&MAGIC)?;
            wal.len = MAGIC.len() as u64;
        }
        if created {
            // The file's name must survive a crash as well as its contents.
            sync_dir(&wal.dir)?;
        }
        remove_leftover(
            &wal.dir,
            COMPACTION_FILE_NAME,
            "an interrupted WAL compaction",
        )?;
        remove_leftover(&wal.dir, REPAIR_FILE_NAME, "an interrupted WAL repair")?;

        // A file of another mode is refused before anything is written to it.
        let mut first_records = Vec::new();
        if let Some(mode) = wal.options.mode {
            match wal.state.mode() {
                Some(recorded) if recorded != mode => {
                    return Err(WalError::OtherMode {
                        path: wal.path.clone(),
                        recorded,
                        configured: mode,
                    });
                }
                _ if wal.state.mode == Some(mode) => {}
                _ => first_records.push(WalRecord::Mode(mode)),
            }
        }
        let write_genesis = wal.options.genesis && created && fresh_directory;
        if write_genesis {
            first_records.push(WalRecord::Genesis {
                at_unix_ms: crate::clock::unix_millis(std::time::SystemTime::now()),
            });
        }
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
            next.max(crate::clock::unix_millis(std::time::SystemTime::now()) / 1000)
        } else {
            next
        };
        first_records.push(WalRecord::Incarnation(incarnation));
        wal.append(&first_records)?;

        let amnesic = wal.state.amnesic;
        let first_start = created && fresh_directory;
        if write_genesis {
            info!(
                path = %wal.path.display(),
                incarnation,
                "WAL created with a genesis record: a member of a new cluster, which has voted in \
                 no term yet (cluster.initial_state = \"new\")"
            );
        } else if amnesic && first_start {
            // Told apart from a lost WAL so that a first start does not read like a fault.
            // The election core says whether the node abstains for it (a voter of a cluster
            // does, until it has heard the others).
            info!(
                path = %wal.path.display(),
                incarnation,
                "no WAL in {}: first start of a node in this directory; its new WAL holds no \
                 term or vote yet",
                wal.dir.display()
            );
        } else if amnesic {
            // The election core decides what that means (a voter of a cluster abstains) and
            // says so at WARN.
            info!(
                path = %wal.path.display(),
                records,
                incarnation,
                term = wal.state.hard_state.term,
                "WAL recovered; it holds no term or vote (a wiped or deleted WAL, a repaired \
                 one, or one an earlier start created without `conclave init`)"
            );
        } else {
            info!(
                path = %wal.path.display(),
                records,
                incarnation,
                term = wal.state.hard_state.term,
                "WAL recovered"
            );
        }
        let recovered = Recovered {
            hard_state: wal.state.hard_state,
            amnesic,
            auto_election: wal.state.auto_election,
            incarnation,
            history: wal.history().to_vec(),
            truncated_bytes,
            records,
            mode: wal.state.mode(),
            genesis_at_unix_ms: wal.state.genesis_at_unix_ms,
            fresh_directory: first_start,
            snapshot: wal.log.snapshot().cloned(),
            entries: wal.log.entries().to_vec(),
            log_truncated_bytes: recovered_log.truncated_bytes,
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
        let mut bytes = Vec::with_capacity(64 * records.len() + 16);
        for record in records {
            record.encode_into(&mut bytes);
        }
        // The seal ends the batch, so damage to any record of it is followed by something
        // valid and is recognised as corruption, not cut off as a torn tail (WAL-2).
        encode_seal(&mut bytes);
        // The OS monotonic clock: this runs on the WAL's own thread, outside any runtime whose
        // clock a test could pause, and the fsync it times is real.
        #[expect(
            clippy::disallowed_types,
            reason = "synchronous storage times a real fsync; no test controls this clock"
        )]
        let started = std::time::Instant::now();
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

    /// Rewrites the file as the current hard state (with the amnesia marker after it while the
    /// node is amnesic), incarnation, automatic-election switch and newest history records,
    /// then a seal (WAL-3): written to `conclave.wal.tmp`, fsynced, renamed over `conclave.wal`, and the
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
        for record in self.state.compacted() {
            record.encode_into(&mut bytes);
        }
        encode_seal(&mut bytes);

        let file = replace_file(&self.dir.join(COMPACTION_FILE_NAME), &self.path, &bytes)?;
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
    #[cfg(any(test, feature = "test-support"))]
    pub fn fail_for_test(&mut self) {
        self.failed = true;
        self.log.fail_for_test();
    }

    /// Whether writes wait for a [`Storage::sync`].
    pub fn has_unsynced_writes(&self) -> bool {
        self.pending_hard_state.is_some() || self.log.has_pending()
    }

    fn refuse_if_failed(&self) -> Result<(), WalError> {
        if self.failed {
            return Err(WalError::Failed {
                path: self.path.clone(),
            });
        }
        Ok(())
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

/// The node's durable state behind raft's storage trait (WAL-1, LOG-2, LOG-4): the hard state
/// in `conclave.wal`, the entries in log segments, the snapshot in its own file.
///
/// Group commit: [`Storage::save_hard_state`] and [`Storage::append_entries`] only hold their
/// writes; [`Storage::sync`] writes them all and fsyncs once per file, the segment first and
/// `conclave.wal` last, so that when the hard state a node restarts from is durable, so is
/// every entry saved with it. Whatever order a crash cuts them in, nothing that depends on
/// either was released, since that waits for `sync` to return.
impl Storage for WalFile {
    type Error = WalError;

    fn save_hard_state(&mut self, hard: HardState) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        // Only the last one matters once the batch is durable.
        self.pending_hard_state = Some(hard);
        Ok(())
    }

    fn append_entries(&mut self, entries: &[LogEntry]) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        self.log.append(entries)
    }

    fn sync(&mut self) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        self.log.sync()?;
        if let Some(hard) = self.pending_hard_state.take() {
            self.append(&[WalRecord::HardState(hard)])?;
        }
        Ok(())
    }

    fn save_snapshot(&mut self, snapshot: Snapshot) -> Result<(), WalError> {
        self.refuse_if_failed()?;
        self.log.save_snapshot(snapshot)
    }

    fn durable_state(&self) -> Result<DurableState, WalError> {
        Ok(DurableState {
            hard: self.state.hard_state,
            snapshot: self.log.snapshot().cloned(),
            entries: self.log.entries().to_vec(),
        })
    }
}

/// Every record of `dir/conclave.wal` that recovery would use, in order (seals left out),
/// read without the lock and without changing the file: for diagnostics and tests (for
/// example, checking that no term ever held two different votes). A torn tail ends the list,
/// as it ends recovery; a corrupt or unreadable record is an error, as it is for recovery.
pub fn read_records(dir: &Path) -> Result<Vec<WalRecord>, WalError> {
    let path = dir.join(WAL_FILE_NAME);
    let bytes = fs::read(&path).map_err(io_error(&path))?;
    if !has_magic(&path, &bytes)? {
        return Ok(Vec::new());
    }
    let examination = examine(&bytes);
    refuse_damage(&path, &examination)?;
    Ok(examination
        .trusted()
        .filter_map(|record| match &record.content {
            RecordContent::Record(record) => Some(*record),
            _ => None,
        })
        .collect())
}

/// Whether `bytes` start with the magic. A file shorter than the magic that is a prefix of it
/// is our own creation cut short (`Ok(false)`); anything else is not ours.
pub(crate) fn has_magic(path: &Path, bytes: &[u8]) -> Result<bool, WalError> {
    if bytes.starts_with(&MAGIC) {
        return Ok(true);
    }
    if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
        return Ok(false);
    }
    Err(WalError::ForeignFile {
        path: path.to_path_buf(),
        found: bytes[..bytes.len().min(MAGIC.len())].to_vec(),
    })
}

/// The error for a verdict a node must not start from.
pub(crate) fn refuse_damage(path: &Path, examination: &Examination) -> Result<(), WalError> {
    match examination.verdict {
        Verdict::Clean | Verdict::TornTail { .. } => Ok(()),
        Verdict::Corrupt {
            offset,
            record,
            reason,
            next_valid,
        } => Err(WalError::Corrupt {
            path: path.to_path_buf(),
            offset,
            record,
            reason,
            next_valid,
        }),
        Verdict::Unreadable {
            offset,
            kind,
            reason,
            ..
        } => Err(WalError::BadRecord {
            path: path.to_path_buf(),
            offset,
            kind,
            reason,
        }),
    }
}

/// Warns about records recovery skipped: kinds and causes this version does not know.
fn warn_about_skipped(path: &Path, examination: &Examination) {
    let mut skipped_kinds: Vec<(u8, u64)> = Vec::new();
    let mut skipped_causes = 0u64;
    for record in examination.trusted() {
        match record.content {
            RecordContent::UnknownKind => {
                match skipped_kinds
                    .iter_mut()
                    .find(|(seen, _)| *seen == record.kind)
                {
                    Some((_, count)) => *count += 1,
                    None => skipped_kinds.push((record.kind, 1)),
                }
            }
            RecordContent::UnknownCause(_) => skipped_causes += 1,
            _ => {}
        }
    }
    for (kind, count) in &skipped_kinds {
        let what = match *kind {
            KIND_LOG_ENTRIES => "log entries, which belong in log segments",
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
}

/// Writes `bytes` to `temp`, fsyncs it, renames it over `path` and returns the new file open
/// for appending; the directory is not synced here. On failure the old file is intact and the
/// temp file removed.
pub(crate) fn replace_file(temp: &Path, path: &Path, bytes: &[u8]) -> Result<File, WalError> {
    remove_if_present(temp)?;
    let written = OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .open(temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            // sync_all, not sync_data: the new file's size and existence are metadata.
            file.sync_all()?;
            Ok(file)
        })
        .and_then(|file| fs::rename(temp, path).map(|()| file));
    written.map_err(|source| {
        // The old file is intact; the half-made one is only clutter.
        let _ = fs::remove_file(temp);
        WalError::Io {
            path: temp.to_path_buf(),
            source,
        }
    })
}

/// A compaction or repair that crashed before its rename leaves its temp file behind; the old
/// WAL is still whole, so the leftover is dropped.
fn remove_leftover(dir: &Path, name: &str, what: &str) -> Result<(), WalError> {
    let temp = dir.join(name);
    if temp.exists() {
        warn!(path = %temp.display(), "removing the leftover of {what}");
        remove_if_present(&temp)?;
    }
    Ok(())
}

pub(crate) fn remove_if_present(path: &Path) -> Result<(), WalError> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(io_error(path)(error)),
        _ => Ok(()),
    }
}

/// Makes the directory's entries (a new or renamed file) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), WalError> {
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

pub(crate) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What shows that a node has used `dir` before, if anything does (WAL-5): its WAL, the lock
/// file every start leaves behind, or a file named after the WAL (a repair's backup, an
/// interrupted compaction). `None` for a directory that
/// does not exist or holds none of them.
fn earlier_node(dir: &Path) -> Result<Option<String>, WalError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error(dir)(error)),
    };
    for entry in entries {
        let name = entry.map_err(io_error(dir))?.file_name();
        let name = name.to_string_lossy();
        let reason = if name == WAL_FILE_NAME {
            format!("it holds a WAL ({WAL_FILE_NAME})")
        } else if name == LOG_DIR_NAME {
            format!("it holds a replicated log ({LOG_DIR_NAME}/)")
        } else if name == crate::lock::LOCK_FILE_NAME {
            format!("a node ran here ({name} is there) but its WAL ({WAL_FILE_NAME}) is gone")
        } else if name.starts_with(WAL_FILE_NAME) {
            format!("it holds {name}, left by an earlier node, but no {WAL_FILE_NAME}")
        } else {
            continue;
        };
        return Ok(Some(reason));
    }
    Ok(None)
}
