//! What an operator does with a WAL the node refuses (WAL-2): look at it ([`inspect`]) and,
//! knowingly, repair it ([`repair`]). `conclave wal inspect` and `conclave wal repair` are thin
//! wrappers around these; `docs/wal.md` walks through the procedure.
//!
//! Inspecting reads the file without the data-directory lock and changes nothing, so it works
//! on the WAL of a running node. Repairing takes the lock (it refuses while a node runs on the
//! directory), copies the damaged file aside byte for byte, and writes a new WAL holding every
//! valid record in order, the damaged spans dropped, followed by an amnesia marker. The marker
//! makes the node abstain at its next start exactly like a node whose WAL was wiped: a dropped
//! span may have held the node's newest vote, so it must not vote until the terms it could have
//! voted in are over. That is why a repair can never produce a second vote in a term.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use conclave_core::election::{HardState, Mode};
use conclave_core::raft::LogPosition;
use conclave_protocol::LogEntry;

use crate::error::WalError;
use crate::examine::{DamagedSpan, Examination, RecordContent, Verdict, examine};
use crate::file::{
    DEFAULT_HISTORY_LIMIT, REPAIR_FILE_NAME, State, WAL_FILE_NAME, has_magic, io_error,
    replace_file, sync_dir,
};
use crate::lock::DataDirLock;
use crate::log::{LOG_DIR_NAME, judge, read_segments};
use crate::record::SegmentContent;
use crate::record::{HistoryRecord, MAGIC, WalRecord, encode_seal};
use crate::snapshot::{self, SnapshotFile};

/// The state a node would start from: what the trusted records add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartState {
    /// The last hard state.
    pub hard_state: HardState,
    /// No hard state (after the last amnesia marker): the node abstains (WAL-2).
    pub amnesic: bool,
    /// The last incarnation recorded (the next start uses a larger one).
    pub incarnation: u64,
    /// The operator's automatic-election switch, if recorded.
    pub auto_election: Option<bool>,
    /// The newest leadership history records, oldest first.
    pub history: Vec<HistoryRecord>,
    /// The election mode the state belongs to (raft for a file written before modes were
    /// recorded); `None` without any election state.
    pub mode: Option<Mode>,
}

/// Everything `conclave wal inspect` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The file.
    pub path: PathBuf,
    /// Its records, damaged spans and verdict.
    pub examination: Examination,
    /// The state the trusted records add up to.
    pub start: StartState,
    /// The replicated log beside it (LOG-2, LOG-4), when the data directory has one.
    pub log: Option<LogInspection>,
}

impl Inspection {
    /// Whether a node can start from the data directory: `conclave.wal` is clean or ends in a
    /// torn tail, and so does the log.
    pub fn node_can_start(&self) -> bool {
        self.examination.verdict.allows_start()
            && self
                .log
                .as_ref()
                .is_none_or(|log| matches!(log.verdict, LogVerdict::Starts { .. }))
    }
}

/// The replicated log as `conclave wal inspect` shows it: every segment with its records
/// (those after damage too), every snapshot file, and what a starting node would make of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogInspection {
    /// The log directory.
    pub dir: PathBuf,
    /// The segments, oldest first.
    pub segments: Vec<SegmentInspection>,
    /// The snapshot files.
    pub snapshots: Vec<SnapshotFile>,
    /// What recovery would do.
    pub verdict: LogVerdict,
}

/// One segment file as `conclave wal inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInspection {
    /// The file.
    pub path: PathBuf,
    /// Its sequence number (from its name).
    pub sequence: u64,
    /// The first index its name says.
    pub first_index: u64,
    /// Its size.
    pub size_bytes: u64,
    /// The first index its header says, or why the header is not one.
    pub header: Result<u64, &'static str>,
    /// Its records, damaged spans and verdict (nothing when the header is bad).
    pub examination: Examination<SegmentContent>,
}

/// What a starting node would make of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogVerdict {
    /// It starts from it.
    Starts {
        /// The snapshot's position, if there is one.
        snapshot: Option<LogPosition>,
        /// The first and last entry after it, if any.
        entries: Option<(LogPosition, LogPosition)>,
        /// How many entries follow the snapshot.
        count: u64,
        /// Bytes of a torn tail the node cuts off the newest segment.
        torn_tail_bytes: u64,
        /// The newest segment holds no entry (an interrupted creation): the node removes it.
        removes_newest: bool,
    },
    /// It refuses to start; the message is the one the node would print.
    Refused(String),
}

/// Reads the log in `dir` as `conclave wal inspect` shows it, changing nothing; `None` when
/// there is no log directory.
fn inspect_log(data_dir: &Path) -> Result<Option<LogInspection>, WalError> {
    let dir = data_dir.join(LOG_DIR_NAME);
    if !dir.is_dir() {
        return Ok(None);
    }
    let segments = read_segments(&dir)?
        .into_iter()
        .map(|segment| SegmentInspection {
            size_bytes: segment.bytes.len() as u64,
            path: segment.path,
            sequence: segment.sequence,
            first_index: segment.named_first,
            header: segment.header,
            examination: segment.examination,
        })
        .collect();
    let verdict = match judge(&dir) {
        Ok(judgement) => {
            let position = |entry: &LogEntry| LogPosition::new(entry.term, entry.index);
            LogVerdict::Starts {
                snapshot: judgement.snapshot.as_ref().map(|snapshot| snapshot.last),
                entries: judgement
                    .entries
                    .first()
                    .zip(judgement.entries.last())
                    .map(|(first, last)| (position(first), position(last))),
                count: judgement.entries.len() as u64,
                torn_tail_bytes: judgement
                    .cut
                    .as_ref()
                    .map_or(0, |(_, keep, len)| len.saturating_sub(*keep)),
                removes_newest: judgement.torn_creation.is_some(),
            }
        }
        Err(error) => LogVerdict::Refused(error.to_string()),
    };
    Ok(Some(LogInspection {
        snapshots: snapshot::list(&dir)?,
        dir,
        segments,
        verdict,
    }))
}

/// Reads the WAL at `target` — a data directory, or the file itself — without locking or
/// changing anything.
///
/// Errors: the file cannot be read; it is not a conclave WAL ([`WalError::ForeignFile`]).
pub fn inspect(target: &Path) -> Result<Inspection, WalError> {
    let path = if target.is_dir() {
        target.join(WAL_FILE_NAME)
    } else {
        target.to_path_buf()
    };
    let bytes = fs::read(&path).map_err(io_error(&path))?;
    let examination = if has_magic(&path, &bytes)? {
        examine(&bytes)
    } else {
        examine(&[])
    };
    let start = start_state(&examination);
    // The log beside the WAL, not beside a backup copy the operator passed.
    let log = match path.parent() {
        Some(dir) if target.is_dir() || path.file_name() == Some(WAL_FILE_NAME.as_ref()) => {
            inspect_log(dir)?
        }
        _ => None,
    };
    Ok(Inspection {
        path,
        examination,
        start,
        log,
    })
}

fn start_state(examination: &Examination) -> StartState {
    let mut state = State::new(DEFAULT_HISTORY_LIMIT);
    for record in examination.trusted() {
        if let RecordContent::Record(record) = &record.content {
            state.apply(record);
        }
    }
    StartState {
        hard_state: state.hard_state,
        amnesic: state.amnesic,
        incarnation: state.incarnation,
        auto_election: state.auto_election,
        history: state.history.as_slice().to_vec(),
        mode: state.mode(),
    }
}

/// What [`repair`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepairOutcome {
    /// The node starts from this file by itself (it is clean, or ends with a torn tail that the
    /// node cuts off): nothing was changed.
    NotNeeded(Verdict),
    /// The file was rewritten.
    Repaired(Box<RepairReport>),
}

/// A repair that was carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// The repaired WAL.
    pub path: PathBuf,
    /// The untouched copy of the damaged file.
    pub backup: PathBuf,
    /// What the file was judged before the repair.
    pub verdict: Verdict,
    /// Records copied into the new file (seals not counted).
    pub kept: u64,
    /// Records whose checksum matched but whose payload could not be read: dropped.
    pub unreadable: u64,
    /// Spans of the old file that were not valid records: dropped.
    pub dropped: Vec<DamagedSpan>,
    /// The state the node starts from now; it abstains, because of the amnesia marker.
    pub start: StartState,
}

/// Repairs the WAL of the data directory `dir`, stamping the amnesia marker with `at_unix_ms`.
///
/// Takes the data-directory lock first and refuses ([`WalError::Locked`]) while a node holds
/// it. Does nothing when the node could start from the file by itself. Otherwise copies the
/// file to `conclave.wal.damaged-<at_unix_ms>` (fsynced), then writes the new WAL through a
/// temporary file, fsync, rename and directory fsync, so a crash leaves either the old file or
/// the new one.
pub fn repair(dir: &Path, at_unix_ms: u64) -> Result<RepairOutcome, WalError> {
    let _lock = DataDirLock::acquire(dir)?;
    let path = dir.join(WAL_FILE_NAME);
    let bytes = fs::read(&path).map_err(io_error(&path))?;
    if !has_magic(&path, &bytes)? {
        return Ok(RepairOutcome::NotNeeded(Verdict::Clean));
    }
    let examination = examine(&bytes);
    if examination.verdict.allows_start() {
        return Ok(RepairOutcome::NotNeeded(examination.verdict));
    }

    let backup = dir.join(format!("{WAL_FILE_NAME}.damaged-{at_unix_ms}"));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&backup)
        .and_then(|mut file| {
            file.write_all(&bytes)?;
            file.sync_all()
        })
        .map_err(io_error(&backup))?;
    sync_dir(dir)?;

    let mut repaired = MAGIC.to_vec();
    let (mut kept, mut unreadable) = (0, 0);
    for record in &examination.records {
        match record.content {
            RecordContent::Seal => {}
            RecordContent::Unreadable(_) => unreadable += 1,
            RecordContent::Record(_)
            | RecordContent::UnknownKind
            | RecordContent::UnknownCause(_) => {
                // Copied as they are, so records of kinds this version does not know survive.
                let start = usize::try_from(record.offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(usize::try_from(record.size()).unwrap_or(0));
                if let Some(raw) = bytes.get(start..end) {
                    repaired.extend_from_slice(raw);
                    kept += 1;
                }
            }
        }
    }
    WalRecord::Amnesia { at_unix_ms }.encode_into(&mut repaired);
    encode_seal(&mut repaired);
    drop(replace_file(&dir.join(REPAIR_FILE_NAME), &path, &repaired)?);
    sync_dir(dir)?;

    let after = examine(&repaired);
    Ok(RepairOutcome::Repaired(Box::new(RepairReport {
        path,
        backup,
        verdict: examination.verdict,
        kept,
        unreadable,
        dropped: examination.damage.clone(),
        start: start_state(&after),
    })))
}
