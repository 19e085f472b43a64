//! The replicated log on disk behind raft's `Storage` trait (WAL-1..WAL-3, LOG-2, LOG-4):
//! the same writes give the same durable state on disk as in `MemStorage`, across crashes;
//! segments recover to their last complete record whatever a crash or a flipped bit left;
//! truncations survive a restart; compaction deletes whole segment files; snapshots are
//! written whole or refused by name. The WAL's own records are tested in `tests.rs`.

use std::fs;
use std::path::{Path, PathBuf};

use conclave_core::SeededRng;
use conclave_core::election::HardState;
use conclave_core::raft::LogPosition;
use conclave_core::storage::{DurableState, MemStorage, Snapshot, Storage};
use conclave_protocol::{EntryKind, LogEntry, PeerId};

use crate::log::parse_segment_name;
use crate::record::SEGMENT_HEADER_LEN;
use crate::{LOG_DIR_NAME, LogDamage, Recovered, WalError, WalFile, WalOptions};

/// A test's own log sink, so a failure shows the storage's log.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_test_writer()
            .finish(),
    )
}

/// A temporary directory in memory where the system has one: the crash tests reopen the
/// storage thousands of times, and every open fsyncs.
fn memory_backed_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn options(segment_size: u64) -> WalOptions {
    WalOptions {
        incarnation_from_clock: false,
        segment_size,
        ..WalOptions::default()
    }
}

fn open(dir: &Path, segment_size: u64) -> Result<(WalFile, Recovered), WalError> {
    WalFile::open_with(dir, options(segment_size))
}

fn entry(index: u64, term: u64) -> LogEntry {
    LogEntry {
        index,
        term,
        kind: if index % 5 == 0 {
            EntryKind::Noop
        } else {
            EntryKind::Command
        },
        data: format!("entry {index} of term {term}").into_bytes(),
    }
}

fn run(first: u64, last: u64, term: u64) -> Vec<LogEntry> {
    (first..=last).map(|index| entry(index, term)).collect()
}

fn hard(term: u64, vote: Option<&str>) -> HardState {
    HardState {
        term,
        vote: vote.map(|id| PeerId::new(id).unwrap()),
        manual_override: None,
    }
}

fn positions(entries: &[LogEntry]) -> Vec<(u64, u64)> {
    entries.iter().map(|e| (e.index, e.term)).collect()
}

/// What a restart recovered, in the trait's terms.
fn recovered_state(recovered: &Recovered) -> DurableState {
    DurableState {
        hard: recovered.hard_state,
        snapshot: recovered.snapshot.clone(),
        entries: recovered.entries.clone(),
    }
}

fn log_dir(dir: &Path) -> PathBuf {
    dir.join(LOG_DIR_NAME)
}

/// The segment files, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(u64, PathBuf)> = fs::read_dir(log_dir(dir))
        .map(|listing| {
            listing
                .map(|entry| entry.unwrap().path())
                .filter_map(|path| {
                    let name = path.file_name()?.to_string_lossy().into_owned();
                    parse_segment_name(&name).map(|(sequence, _)| (sequence, path))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.into_iter().map(|(_, path)| path).collect()
}

/// Where each record of a well-formed segment ends, with its kind, by walking the length
/// fields.
fn segment_records(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut records = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while at < bytes.len() {
        let length = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = bytes[at + 4];
        at += 9 + length;
        records.push((at, kind));
    }
    assert_eq!(at, bytes.len(), "the segment is not well formed");
    records
}

/// Replaces every entry at or after the first of `entries`, as LOG-2 says: the reference the
/// crash tests compare against.
fn splice(log: &mut Vec<LogEntry>, entries: &[LogEntry]) {
    let first = entries[0].index;
    log.retain(|entry| entry.index < first);
    log.extend_from_slice(entries);
}

/// One write a conformance run makes.
#[derive(Debug, Clone)]
enum Step {
    Hard(HardState),
    Append(Vec<LogEntry>),
    Sync,
    Snapshot(u64),
    Crash,
}

/// Drives the same steps through `MemStorage` and the disk, checking after every step that
/// both hold the same durable state, and after every crash that what the disk recovers is
/// exactly what `MemStorage` kept.
fn conform(dir: &Path, segment_size: u64, steps: &[Step]) {
    let mut memory = MemStorage::new();
    let (mut disk, _) = open(dir, segment_size).unwrap();
    for (number, step) in steps.iter().enumerate() {
        match step {
            Step::Hard(state) => {
                memory.save_hard_state(*state).unwrap();
                disk.save_hard_state(*state).unwrap();
            }
            Step::Append(entries) => {
                memory.append_entries(entries).unwrap();
                disk.append_entries(entries).unwrap();
            }
            Step::Sync => {
                memory.sync().unwrap();
                disk.sync().unwrap();
            }
            Step::Snapshot(index) => {
                let state = memory.durable_state().unwrap();
                let term = state
                    .entries
                    .iter()
                    .find(|entry| entry.index == *index)
                    .map(|entry| entry.term)
                    .or(state.snapshot.as_ref().map(|snapshot| snapshot.last.term))
                    .unwrap_or(0);
                let snapshot = Snapshot {
                    last: LogPosition::new(term, *index),
                    data: format!("image at {index}").into_bytes().into(),
                    config: None,
                };
                memory.save_snapshot(snapshot.clone()).unwrap();
                disk.save_snapshot(snapshot).unwrap();
            }
            Step::Crash => {
                memory.crash();
                // A crash: the storage goes away without a sync.
                drop(disk);
                let (reopened, recovered) = open(dir, segment_size)
                    .unwrap_or_else(|error| panic!("step {number}: reopen failed: {error}"));
                assert_eq!(
                    recovered_state(&recovered),
                    memory.durable_state().unwrap(),
                    "step {number}: what a restart recovers"
                );
                disk = reopened;
            }
        }
        assert_eq!(
            disk.durable_state().unwrap(),
            memory.durable_state().unwrap(),
            "step {number} ({step:?})"
        );
    }
}

/// WAL-1, LOG-2, LOG-4: a hand-written sequence — appends, a conflicting suffix replaced,
/// unsynced writes lost in a crash, a snapshot while appends wait, more crashes — leaves the
/// disk with the durable state `MemStorage` has, step by step and after every restart.
#[test]
fn wal1_disk_conforms_to_mem_storage_on_a_scripted_run() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    conform(
        dir.path(),
        200,
        &[
            Step::Hard(hard(1, Some("gw-a"))),
            Step::Append(run(1, 3, 1)),
            Step::Sync,
            Step::Append(run(4, 6, 1)),
            Step::Hard(hard(2, None)),
            Step::Crash,
            Step::Append(run(4, 8, 1)),
            Step::Sync,
            Step::Append(run(6, 7, 2)),
            Step::Hard(hard(2, Some("gw-b"))),
            Step::Sync,
            Step::Crash,
            Step::Append(run(8, 12, 2)),
            Step::Sync,
            Step::Append(run(13, 14, 2)),
            Step::Snapshot(9),
            Step::Sync,
            Step::Crash,
            Step::Append(run(3, 4, 3)),
            Step::Crash,
            Step::Append(run(11, 12, 3)),
            Step::Sync,
            Step::Snapshot(12),
            Step::Crash,
            Step::Append(run(13, 20, 3)),
            Step::Sync,
            Step::Hard(hard(3, Some("gw-c"))),
            Step::Sync,
            Step::Crash,
        ],
    );
}

/// Random steps for [`conform`]: appends that start anywhere from the snapshot's index to one
/// past the last entry (so conflicting suffixes are replaced often), hard states, syncs,
/// snapshots at a durable entry, and crashes.
fn random_steps(rng: &mut SeededRng, count: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut memory = MemStorage::new();
    // One past the last entry written, synced or not: where an append may start at most.
    let mut next = 1u64;
    let mut term = 1u64;
    for _ in 0..count {
        let state = memory.durable_state().unwrap();
        let covered = state.snapshot.as_ref().map_or(0, |s| s.last.index);
        let step = match rng.below(100) {
            0..=39 => {
                let low = covered.max(1);
                let first = rng.between(low, next.max(low) + 1);
                let count = rng.between(1, 6);
                if rng.chance(0.3) {
                    term += 1;
                }
                Step::Append(run(first, first + count - 1, term))
            }
            40..=54 => Step::Hard(hard(term, (rng.below(2) == 0).then_some("gw-a"))),
            55..=79 => Step::Sync,
            80..=89 => match state.entries.last() {
                Some(last) => Step::Snapshot(rng.between(covered.max(1), last.index + 1)),
                None => Step::Sync,
            },
            _ => Step::Crash,
        };
        match &step {
            Step::Hard(state) => memory.save_hard_state(*state).unwrap(),
            Step::Append(entries) => {
                memory.append_entries(entries).unwrap();
                next = entries.last().unwrap().index + 1;
            }
            Step::Sync => memory.sync().unwrap(),
            Step::Snapshot(index) => {
                memory
                    .save_snapshot(Snapshot {
                        last: LogPosition::new(0, *index),
                        data: Vec::<u8>::new().into(),
                        config: None,
                    })
                    .unwrap();
                next = next.max(index + 1);
            }
            Step::Crash => {
                memory.crash();
                let state = memory.durable_state().unwrap();
                next = state.last_log().index + 1;
            }
        }
        steps.push(step);
    }
    steps
}

/// WAL-1, LOG-2, LOG-4: random runs with small segments (rotation, truncation across
/// segments, compaction) end with the disk holding what `MemStorage` holds after every step.
/// A failure names the seed.
#[test]
fn wal1_disk_conforms_to_mem_storage_on_random_runs() {
    let _log = log_to_test_output();
    for seed in 1..=24u64 {
        let dir = memory_backed_tempdir();
        let steps = random_steps(&mut SeededRng::new(seed), 150);
        let outcome = std::panic::catch_unwind(|| conform(dir.path(), 160, &steps));
        assert!(outcome.is_ok(), "seed {seed} failed");
    }
}

/// Builds a log of several segments, one append and one sync each, and returns every append
/// in order.
fn write_appends(dir: &Path, segment_size: u64, appends: &[Vec<LogEntry>]) {
    let (mut wal, _) = open(dir, segment_size).unwrap();
    for append in appends {
        wal.append_entries(append).unwrap();
        wal.sync().unwrap();
    }
}

fn sample_appends() -> Vec<Vec<LogEntry>> {
    vec![
        run(1, 3, 1),
        run(4, 5, 1),
        run(6, 9, 2),
        // Replaces 8 and 9: a conflicting suffix (LOG-2).
        run(8, 8, 3),
        run(9, 11, 3),
        run(12, 12, 3),
        run(10, 13, 4),
    ]
}

/// The entries `appends` leave, replayed by the rule of LOG-2.
fn replayed(appends: &[Vec<LogEntry>]) -> Vec<LogEntry> {
    let mut log = Vec::new();
    for append in appends {
        splice(&mut log, append);
    }
    log
}

/// WAL-2, LOG-2: the newest segment cut at every byte offset — a crash part way through any
/// write — recovers every entries record completed before the cut and nothing of the one the
/// cut went through; the segment is cut back to that record's end, and the log takes appends
/// again.
#[test]
fn wal2_a_segment_cut_anywhere_recovers_its_complete_records() {
    let _log = log_to_test_output();
    let appends = sample_appends();
    let template = memory_backed_tempdir();
    write_appends(template.path(), 120, &appends);
    let files = segments(template.path());
    assert!(
        files.len() >= 2,
        "the test needs several segments: {files:?}"
    );
    let newest = files.last().unwrap();
    let bytes = fs::read(newest).unwrap();
    let records = segment_records(&bytes);
    let in_newest = records.iter().filter(|(_, kind)| *kind == 10).count();
    let earlier = &appends[..appends.len() - in_newest];

    let dir = memory_backed_tempdir();
    for cut in 0..=bytes.len() {
        let _ = fs::remove_dir_all(dir.path());
        copy_dir(template.path(), dir.path());
        let path = log_dir(dir.path()).join(newest.file_name().unwrap());
        fs::write(&path, &bytes[..cut]).unwrap();

        let complete = records
            .iter()
            .filter(|(end, kind)| *kind == 10 && *end <= cut)
            .count();
        let expected = replayed(&appends[..earlier.len() + complete]);
        let (mut wal, recovered) =
            open(dir.path(), 120).unwrap_or_else(|error| panic!("cut at {cut}: {error}"));
        assert_eq!(
            positions(&recovered.entries),
            positions(&expected),
            "cut at {cut}"
        );
        assert_eq!(recovered.entries, expected, "cut at {cut}");
        if complete > 0 {
            let kept = records
                .iter()
                .map(|(end, _)| *end)
                .filter(|end| *end <= cut)
                .max();
            assert_eq!(
                fs::metadata(&path).unwrap().len() as usize,
                kept.unwrap(),
                "cut at {cut}"
            );
        } else {
            assert!(
                !path.exists(),
                "cut at {cut}: a segment without entries is removed"
            );
        }
        // The log goes on from there, and a restart reads it back.
        let next = expected.last().map_or(1, |entry| entry.index + 1);
        wal.append_entries(&run(next, next + 1, 9)).unwrap();
        wal.sync().unwrap();
        let state = wal.durable_state().unwrap();
        drop(wal);
        let (_, again) = open(dir.path(), 120).unwrap();
        assert_eq!(
            recovered_state(&again),
            state,
            "cut at {cut}, after an append"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every file under `dir` with its bytes, to check that a refusal changed nothing.
fn snapshot_of_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else if entry.file_name() != crate::LOCK_FILE_NAME {
                files.push((entry.path(), fs::read(entry.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// WAL-2: a flipped bit anywhere in any segment is refused with the file named and every file
/// left as it was — except in the newest segment's last seal, a torn tail whose loss costs no
/// entry, which is cut off.
#[test]
fn wal2_a_flipped_bit_in_a_segment_is_refused_unless_it_is_the_last_seal() {
    let _log = log_to_test_output();
    let appends = sample_appends();
    let template = memory_backed_tempdir();
    write_appends(template.path(), 120, &appends);
    let files = segments(template.path());
    let everything = replayed(&appends);
    let dir = memory_backed_tempdir();
    for (position, file) in files.iter().enumerate() {
        let newest = position + 1 == files.len();
        let bytes = fs::read(file).unwrap();
        let last_seal = bytes.len() - 9;
        for at in 0..bytes.len() {
            let _ = fs::remove_dir_all(dir.path());
            copy_dir(template.path(), dir.path());
            let path = log_dir(dir.path()).join(file.file_name().unwrap());
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << (at % 8);
            fs::write(&path, &damaged).unwrap();
            let before = snapshot_of_files(dir.path());
            match open(dir.path(), 120) {
                Ok((_, recovered)) => {
                    assert!(
                        newest && at >= last_seal,
                        "{}: byte {at} accepted",
                        path.display()
                    );
                    assert_eq!(recovered.entries, everything);
                    assert_eq!(fs::metadata(&path).unwrap().len() as usize, last_seal);
                }
                Err(error) => {
                    assert!(
                        !(newest && at >= last_seal),
                        "byte {at} of the last seal refused: {error}"
                    );
                    assert!(
                        matches!(&error, WalError::LogDamaged { path: named, .. } if *named == path),
                        "byte {at} of {}: {error:?}",
                        path.display()
                    );
                    assert!(error.to_string().contains(&path.display().to_string()));
                    assert_eq!(
                        snapshot_of_files(dir.path()),
                        before,
                        "byte {at}: files changed"
                    );
                }
            }
        }
    }
}

/// WAL-2: zeros or garbage after the newest segment's last record (a file extended before its
/// data reached the disk) are a torn tail: cut, nothing lost.
#[test]
fn wal2_zero_and_garbage_tails_of_a_segment_are_cut() {
    let _log = log_to_test_output();
    let appends = sample_appends();
    for tail in [vec![0u8; 300], b"not a record at all, just bytes".to_vec()] {
        let dir = memory_backed_tempdir();
        write_appends(dir.path(), 120, &appends);
        let newest = segments(dir.path()).pop().unwrap();
        let len = fs::metadata(&newest).unwrap().len();
        let mut bytes = fs::read(&newest).unwrap();
        bytes.extend_from_slice(&tail);
        fs::write(&newest, &bytes).unwrap();
        let (_, recovered) = open(dir.path(), 120).unwrap();
        assert_eq!(recovered.entries, replayed(&appends));
        assert_eq!(recovered.log_truncated_bytes, tail.len() as u64);
        assert_eq!(fs::metadata(&newest).unwrap().len(), len);
    }
}

/// WAL-2: damage at the end of a segment that is not the newest is not a torn write — every
/// segment is complete and fsynced before the next starts — so it is refused.
#[test]
fn wal2_a_torn_tail_before_a_newer_segment_is_refused() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    write_appends(dir.path(), 120, &sample_appends());
    let oldest = segments(dir.path()).remove(0);
    let bytes = fs::read(&oldest).unwrap();
    fs::write(&oldest, &bytes[..bytes.len() - 3]).unwrap();
    let error = open(dir.path(), 120).unwrap_err();
    assert!(
        matches!(
            &error,
            WalError::LogDamaged { path, damage: LogDamage::TornBeforeNewer { .. } } if *path == oldest
        ),
        "{error:?}"
    );
    assert_eq!(fs::read(&oldest).unwrap(), &bytes[..bytes.len() - 3]);
}

/// LOG-2: a truncation of a conflicting suffix — within the newest segment and reaching back
/// into older ones — is durable once synced and survives restarts; an unsynced one is lost
/// whole, never half.
#[test]
fn log2_truncation_records_survive_reopen() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 100).unwrap();
    for first in (1..=30).step_by(3) {
        wal.append_entries(&run(first, first + 2, 1)).unwrap();
        wal.sync().unwrap();
    }
    assert!(segments(dir.path()).len() >= 3);
    wal.append_entries(&run(28, 29, 2)).unwrap();
    wal.sync().unwrap();
    wal.append_entries(&run(7, 9, 3)).unwrap();
    wal.sync().unwrap();
    // Not synced: lost in the crash below, with its truncation.
    wal.append_entries(&run(5, 5, 4)).unwrap();
    drop(wal);

    let (wal, recovered) = open(dir.path(), 100).unwrap();
    let mut expected = run(1, 6, 1);
    expected.extend(run(7, 9, 3));
    assert_eq!(recovered.entries, expected);
    drop(wal);
    let (_, again) = open(dir.path(), 100).unwrap();
    assert_eq!(again.entries, expected);
}

/// LOG-4: a snapshot deletes the whole segment files whose entries it covers, never the
/// newest, and leaves the rest readable: a restart recovers the snapshot and every entry
/// after it.
#[test]
fn log4_compaction_deletes_whole_segments_and_keeps_the_rest_readable() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 100).unwrap();
    for first in (1..=40).step_by(2) {
        wal.append_entries(&run(first, first + 1, 1)).unwrap();
        wal.sync().unwrap();
    }
    let before = segments(dir.path());
    assert!(before.len() >= 5, "{before:?}");
    // Where each segment starts, from its name.
    let starts: Vec<u64> = before
        .iter()
        .map(|path| {
            parse_segment_name(&path.file_name().unwrap().to_string_lossy())
                .unwrap()
                .1
        })
        .collect();
    let index = 21;
    let snapshot = Snapshot {
        last: LogPosition::new(1, index),
        data: b"state at 21".to_vec().into(),
        config: None,
    };
    wal.save_snapshot(snapshot.clone()).unwrap();
    let after = segments(dir.path());
    // A segment goes when the next one starts at or before index + 1: all it held is covered.
    let kept_from = starts
        .iter()
        .rposition(|start| *start <= index + 1)
        .unwrap();
    assert_eq!(after, before[kept_from..].to_vec());
    assert!(after.len() < before.len());
    let state = wal.durable_state().unwrap();
    assert_eq!(state.snapshot.as_ref(), Some(&snapshot));
    assert_eq!(state.entries, run(22, 40, 1));
    drop(wal);
    let (mut wal, recovered) = open(dir.path(), 100).unwrap();
    assert_eq!(recovered_state(&recovered), state);

    // A snapshot past every entry leaves only the newest segment, and the log goes on after it.
    wal.save_snapshot(Snapshot {
        last: LogPosition::new(1, 50),
        data: b"state at 50".to_vec().into(),
        config: None,
    })
    .unwrap();
    assert_eq!(segments(dir.path()), vec![after.last().unwrap().clone()]);
    wal.append_entries(&run(51, 52, 2)).unwrap();
    wal.sync().unwrap();
    let state = wal.durable_state().unwrap();
    assert_eq!(positions(&state.entries), vec![(51, 2), (52, 2)]);
    drop(wal);
    let (_, recovered) = open(dir.path(), 100).unwrap();
    assert_eq!(recovered_state(&recovered), state);
    let snapshots: Vec<_> = fs::read_dir(log_dir(dir.path()))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("snap-"))
        .collect();
    assert_eq!(
        snapshots,
        vec!["snap-00000000000000000050-00000000000000000001.snap".to_owned()]
    );
}

/// WAL-3, LOG-4: a damaged snapshot file is refused, naming it, and left as it is; a leftover
/// temporary file of an interrupted snapshot is removed and the previous snapshot used.
#[test]
fn wal3_damaged_snapshot_is_refused_and_an_interrupted_one_ignored() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 100).unwrap();
    wal.append_entries(&run(1, 6, 1)).unwrap();
    wal.sync().unwrap();
    let snapshot = Snapshot {
        last: LogPosition::new(1, 4),
        data: b"image".to_vec().into(),
        config: None,
    };
    wal.save_snapshot(snapshot.clone()).unwrap();
    drop(wal);
    let snapshot_path =
        log_dir(dir.path()).join("snap-00000000000000000004-00000000000000000001.snap");
    let temp = log_dir(dir.path()).join("snap-00000000000000000006-00000000000000000001.snap.tmp");
    fs::write(&temp, b"half a snapshot").unwrap();
    let (wal, recovered) = open(dir.path(), 100).unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot));
    assert_eq!(recovered.entries, run(5, 6, 1));
    assert!(!temp.exists());
    drop(wal);

    let mut bytes = fs::read(&snapshot_path).unwrap();
    bytes[30] ^= 0x10;
    fs::write(&snapshot_path, &bytes).unwrap();
    let error = open(dir.path(), 100).unwrap_err();
    assert!(
        matches!(&error, WalError::LogDamaged { path, damage: LogDamage::BadSnapshot(_) } if *path == snapshot_path),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("snap-00000000000000000004"),
        "{error}"
    );
    assert_eq!(fs::read(&snapshot_path).unwrap(), bytes);
}

/// LOG-4: a segment deleted by hand while no snapshot covers it leaves a hole, which is
/// refused with the missing indexes rather than read as a shorter log.
#[test]
fn log4_a_missing_segment_is_a_gap_not_a_shorter_log() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    write_appends(
        dir.path(),
        100,
        &[run(1, 4, 1), run(5, 8, 1), run(9, 12, 1), run(13, 16, 1)],
    );
    let files = segments(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    fs::remove_file(&files[1]).unwrap();
    let error = open(dir.path(), 100).unwrap_err();
    assert!(
        matches!(
            error,
            WalError::LogGap {
                missing_from: 5,
                ..
            }
        ),
        "{error:?}"
    );
}

/// LOG-2: appends that would leave a hole, are out of order, or hold an entry larger than a
/// record are refused before anything is held; the storage keeps working.
#[test]
fn log2_bad_appends_are_refused_and_change_nothing() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 1 << 20).unwrap();
    wal.append_entries(&run(1, 2, 1)).unwrap();
    let refused = [
        run(4, 5, 1),
        run(0, 1, 1),
        vec![entry(3, 1), entry(5, 1)],
        vec![LogEntry {
            data: vec![0; 1 << 20],
            ..entry(3, 1)
        }],
    ];
    for append in refused {
        let error = wal.append_entries(&append).unwrap_err();
        assert!(
            matches!(
                error,
                WalError::BadAppend { .. } | WalError::EntryTooLarge { .. }
            ),
            "{error:?}"
        );
    }
    wal.append_entries(&[]).unwrap();
    wal.sync().unwrap();
    assert_eq!(wal.durable_state().unwrap().entries, run(1, 2, 1));
    assert!(!wal.has_unsynced_writes());
}

/// WAL-1: the hard state saved through the trait is durable only after a sync, and then in
/// `conclave.wal`, where the election's records are; a failed storage refuses every write.
#[test]
fn wal1_hard_state_is_durable_after_sync_only() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 1 << 20).unwrap();
    wal.save_hard_state(hard(3, Some("gw-b"))).unwrap();
    assert!(wal.has_unsynced_writes());
    assert_eq!(wal.durable_state().unwrap().hard, HardState::default());
    drop(wal);
    let (mut wal, recovered) = open(dir.path(), 1 << 20).unwrap();
    assert_eq!(recovered.hard_state, HardState::default());
    wal.save_hard_state(hard(4, Some("gw-c"))).unwrap();
    wal.sync().unwrap();
    assert_eq!(wal.durable_state().unwrap().hard, hard(4, Some("gw-c")));
    drop(wal);
    let (mut wal, recovered) = open(dir.path(), 1 << 20).unwrap();
    assert_eq!(recovered.hard_state, hard(4, Some("gw-c")));
    assert!(!recovered.amnesic);

    wal.fail_for_test();
    assert!(matches!(
        wal.append_entries(&run(1, 1, 1)),
        Err(WalError::Failed { .. })
    ));
    assert!(matches!(
        wal.save_hard_state(hard(5, None)),
        Err(WalError::Failed { .. })
    ));
    assert!(matches!(wal.sync(), Err(WalError::Failed { .. })));
}

/// WAL-5: a data directory holding a replicated log shows an earlier node, so `init`
/// refuses it even without `conclave.wal`.
#[test]
fn wal5_a_log_directory_is_the_trace_of_an_earlier_node() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    fs::create_dir(log_dir(dir.path())).unwrap();
    let error = WalFile::init(dir.path(), conclave_core::election::Mode::Raft).unwrap_err();
    assert!(matches!(error, WalError::NotNew { .. }), "{error:?}");
}

/// WAL-2: whatever bytes a segment holds, opening answers with a recovery or an error, never
/// a panic; a refused log is left as it was.
#[test]
fn wal2_segment_garbage_never_panics() {
    let _log = log_to_test_output();
    let appends = sample_appends();
    let template = memory_backed_tempdir();
    write_appends(template.path(), 120, &appends);
    let newest = segments(template.path()).pop().unwrap();
    let bytes = fs::read(&newest).unwrap();
    let mut rng = SeededRng::new(16);
    let dir = memory_backed_tempdir();
    for round in 0..300 {
        let _ = fs::remove_dir_all(dir.path());
        copy_dir(template.path(), dir.path());
        let path = log_dir(dir.path()).join(newest.file_name().unwrap());
        let mut damaged = bytes.clone();
        for _ in 0..rng.between(1, 8) {
            let at = rng.below(damaged.len() as u64) as usize;
            damaged[at] = rng.next_u64() as u8;
        }
        let cut = rng.between(0, damaged.len() as u64 + 1) as usize;
        damaged.truncate(cut);
        if rng.chance(0.3) {
            damaged.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8));
        }
        fs::write(&path, &damaged).unwrap();
        let before = snapshot_of_files(dir.path());
        match open(dir.path(), 120) {
            Ok((wal, recovered)) => {
                // Whatever was kept is a log LOG-2 could have produced, and reads back the same.
                let state = wal.durable_state().unwrap();
                assert_eq!(recovered_state(&recovered), state, "round {round}");
                drop(wal);
                let (_, again) = open(dir.path(), 120).unwrap();
                assert_eq!(recovered_state(&again), state, "round {round}");
            }
            Err(_) => assert_eq!(snapshot_of_files(dir.path()), before, "round {round}"),
        }
    }
}

/// WAL-2, LOG-2: `inspect` shows a log with a torn tail as one a node starts from, with the
/// bytes it would cut, and changes nothing; a refused log is named in its verdict.
#[test]
fn wal2_inspect_judges_the_log_without_changing_it() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    write_appends(dir.path(), 120, &sample_appends());
    let newest = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&newest).unwrap();
    bytes.extend_from_slice(&[0; 40]);
    fs::write(&newest, &bytes).unwrap();
    let before = snapshot_of_files(dir.path());

    let inspection = crate::inspect(dir.path()).unwrap();
    assert!(inspection.node_can_start());
    let log = inspection.log.unwrap();
    assert_eq!(log.segments.len(), segments(dir.path()).len());
    let expected = replayed(&sample_appends());
    match log.verdict {
        crate::LogVerdict::Starts {
            snapshot: None,
            entries: Some((first, last)),
            count,
            torn_tail_bytes: 40,
            removes_newest: false,
        } => {
            assert_eq!(first.index, 1);
            assert_eq!(last.index, expected.last().unwrap().index);
            assert_eq!(count, expected.len() as u64);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot_of_files(dir.path()), before);

    let oldest = segments(dir.path()).remove(0);
    fs::remove_file(&oldest).unwrap();
    let inspection = crate::inspect(dir.path()).unwrap();
    assert!(!inspection.node_can_start());
    assert!(
        matches!(&inspection.log.unwrap().verdict, crate::LogVerdict::Refused(reason) if reason.contains("missing")),
    );
}

/// LOG-2, LOG-4: the segment and snapshot examples in `docs/wal.md` are what the encoders
/// write, byte for byte.
#[test]
fn log2_docs_segment_and_snapshot_examples_match_the_encoder() {
    let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/wal.md"));
    let block = doc
        .split("### Worked example: a segment")
        .nth(1)
        .and_then(|rest| rest.split("```text").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("docs/wal.md has a segment example");
    let hex = |text: &str| -> Vec<u8> {
        text.split_whitespace()
            .map(|byte| u8::from_str_radix(byte, 16).unwrap())
            .collect()
    };
    let documented: Vec<Vec<u8>> = block
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(_, bytes)| hex(bytes))
        .collect();

    let mut seal = Vec::new();
    crate::record::encode_seal(&mut seal);
    let first = vec![
        LogEntry {
            index: 1,
            term: 1,
            kind: EntryKind::Command,
            data: b"hi".to_vec(),
        },
        LogEntry {
            index: 2,
            term: 1,
            kind: EntryKind::Noop,
            data: Vec::new(),
        },
    ];
    let mut entries = Vec::new();
    crate::record::encode_entries(&mut entries, &first);
    let mut replacement = Vec::new();
    crate::record::encode_entries(
        &mut replacement,
        &[LogEntry {
            index: 2,
            term: 2,
            kind: EntryKind::Command,
            data: b"x".to_vec(),
        }],
    );
    assert_eq!(
        documented,
        vec![
            crate::record::segment_header(1).to_vec(),
            entries,
            seal.clone(),
            replacement,
            seal,
        ]
    );

    let snapshot_text = doc
        .split("whose data is `ok`:\n`")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("docs/wal.md has a snapshot example");
    let snapshot = Snapshot {
        last: LogPosition::new(2, 2),
        data: b"ok".to_vec().into(),
        config: None,
    };
    assert_eq!(hex(snapshot_text), crate::snapshot::encode(&snapshot));
    assert!(doc.contains("magic \"CLS1\" (43 4c 53 31)"));
    assert!(doc.contains("magic \"CSN1\" (43 53 4e 31)"));
}

/// WAL-3, LOG-4: a crash between a new snapshot's rename and the removal of the old one leaves
/// both; the next start uses the newer and removes the older.
#[test]
fn wal3_an_older_snapshot_left_by_a_crash_is_superseded() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 100).unwrap();
    wal.append_entries(&run(1, 8, 1)).unwrap();
    wal.sync().unwrap();
    let older = Snapshot {
        last: LogPosition::new(1, 3),
        data: b"at 3".to_vec().into(),
        config: None,
    };
    wal.save_snapshot(older.clone()).unwrap();
    let older_path = log_dir(dir.path()).join(crate::snapshot::snapshot_file_name(older.last));
    let older_bytes = fs::read(&older_path).unwrap();
    let newer = Snapshot {
        last: LogPosition::new(1, 6),
        data: b"at 6".to_vec().into(),
        config: None,
    };
    wal.save_snapshot(newer.clone()).unwrap();
    assert!(!older_path.exists());
    drop(wal);
    fs::write(&older_path, older_bytes).unwrap();

    let (_, recovered) = open(dir.path(), 100).unwrap();
    assert_eq!(recovered.snapshot, Some(newer));
    assert_eq!(recovered.entries, run(7, 8, 1));
    assert!(!older_path.exists());
}

/// WAL-1, LOG-2: an append larger than one record is written as several records in one group
/// commit and reads back whole; an empty sync writes nothing.
#[test]
fn wal1_an_append_larger_than_a_record_spans_several_records() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    let (mut wal, _) = open(dir.path(), 1 << 30).unwrap();
    let large: Vec<LogEntry> = (1..=3)
        .map(|index| LogEntry {
            data: vec![index as u8; 400 << 10],
            ..entry(index, 1)
        })
        .collect();
    wal.append_entries(&large).unwrap();
    wal.sync().unwrap();
    let newest = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&newest).unwrap().len();
    wal.sync().unwrap();
    assert_eq!(fs::metadata(&newest).unwrap().len(), len);
    let records = segment_records(&fs::read(&newest).unwrap());
    assert_eq!(
        records.iter().map(|(_, kind)| *kind).collect::<Vec<_>>(),
        vec![10, 10, 4]
    );
    drop(wal);
    let (_, recovered) = open(dir.path(), 1 << 30).unwrap();
    assert_eq!(recovered.entries, large);
}

/// WAL-2: a damaged log refuses the start before `conclave.wal` is changed, even where the WAL
/// has a torn tail the start would otherwise cut.
#[test]
fn wal2_a_damaged_log_leaves_a_torn_wal_untouched() {
    let _log = log_to_test_output();
    let dir = memory_backed_tempdir();
    write_appends(dir.path(), 1 << 20, &sample_appends());
    let wal_path = dir.path().join(crate::WAL_FILE_NAME);
    let mut wal_bytes = fs::read(&wal_path).unwrap();
    wal_bytes.extend_from_slice(&[0; 7]);
    fs::write(&wal_path, &wal_bytes).unwrap();
    let segment = segments(dir.path()).remove(0);
    let mut bytes = fs::read(&segment).unwrap();
    bytes[SEGMENT_HEADER_LEN + 12] ^= 0x01;
    fs::write(&segment, &bytes).unwrap();
    let before = snapshot_of_files(dir.path());
    let error = open(dir.path(), 1 << 20).unwrap_err();
    assert!(matches!(error, WalError::LogDamaged { .. }), "{error:?}");
    assert_eq!(snapshot_of_files(dir.path()), before);
}
