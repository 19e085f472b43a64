//! Recovery, durability and compaction of [`WalFile`] on a real file system (WAL-1, WAL-2,
//! WAL-3, PROTO-2, CB-6). The format itself is tested in `record.rs`, the actor in `actor.rs`.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use conclave_core::raft::{HardState, LeaderChangeCause};
use conclave_protocol::PeerId;
use tracing_subscriber::fmt::MakeWriter;

use super::record::{MAGIC, RECORD_HEADER_LEN, checksum};
use super::*;

/// Opens with incarnations counted 1, 2, 3 rather than floored at the clock, so tests can
/// state exact values.
fn open_counting(dir: &std::path::Path) -> Result<(WalFile, Recovered), WalError> {
    WalFile::open_with(
        dir,
        WalOptions {
            incarnation_from_clock: false,
            ..WalOptions::default()
        },
    )
}

fn id(text: &str) -> PeerId {
    PeerId::new(text).unwrap()
}

fn hard(term: u64, vote: Option<&str>) -> HardState {
    HardState {
        term,
        vote: vote.map(id),
        manual_override: None,
    }
}

fn change(term: u64, leader: Option<&str>, cause: LeaderChangeCause) -> HistoryRecord {
    HistoryRecord {
        term,
        leader: leader.map(id),
        cause,
        at_unix_ms: 1_700_000_000_000 + term,
    }
}

fn wal_path(dir: &Path) -> PathBuf {
    dir.join(WAL_FILE_NAME)
}

/// A log sink a test can read back, so it can assert what the WAL warned about.
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Installs this sink as the test thread's subscriber until the guard drops.
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(self.clone())
                .finish(),
        )
    }
}

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // Echo to the test's captured output too, so a failure shows the node's log.
        print!("{}", String::from_utf8_lossy(bytes));
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A record with any kind and payload and a correct checksum, as another version might write.
fn raw_record(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_le_bytes().to_vec();
    bytes.push(kind);
    bytes.extend_from_slice(&checksum(kind, payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn append_raw(dir: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(wal_path(dir)).unwrap();
    file.write_all(bytes).unwrap();
}

/// Where each record of a well-formed file ends, by walking the length fields.
fn record_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let length = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += RECORD_HEADER_LEN + length;
        ends.push(at);
    }
    assert_eq!(at, bytes.len(), "the test file is not well formed");
    ends
}

/// The records a test file is made of, in order, the one `open` writes first.
fn sample_records() -> Vec<WalRecord> {
    vec![
        WalRecord::Incarnation(1),
        WalRecord::HardState(hard(1, Some("gw-a"))),
        WalRecord::LeaderChange(change(1, Some("gw-a"), LeaderChangeCause::VoteWon)),
        WalRecord::HardState(HardState {
            term: 2,
            vote: Some(id("gw-b")),
            manual_override: Some(id("gw-c")),
        }),
        WalRecord::LeaderChange(change(2, None, LeaderChangeCause::ElectionTimeout)),
        WalRecord::LeaderChange(change(2, Some("gw-c"), LeaderChangeCause::SetLeader)),
        WalRecord::Incarnation(7),
        WalRecord::HardState(hard(3, None)),
    ]
}

/// Writes [`sample_records`] through the WAL (the first by `open`, the rest in three group
/// commits) and returns the file's bytes.
fn sample_file(dir: &Path) -> Vec<u8> {
    let records = sample_records();
    let (mut wal, _) = open_counting(dir).unwrap();
    wal.append(&records[1..3]).unwrap();
    wal.append(&records[3..6]).unwrap();
    wal.append(&records[6..]).unwrap();
    drop(wal);
    fs::read(wal_path(dir)).unwrap()
}

/// What recovering exactly `records` must yield.
fn expected_after(records: &[WalRecord]) -> (HardState, u64, Vec<HistoryRecord>) {
    let mut state = HardState::default();
    let mut incarnation = 0;
    let mut history = Vec::new();
    for record in records {
        match record {
            WalRecord::HardState(hard) => state = *hard,
            WalRecord::Incarnation(n) => incarnation = *n,
            WalRecord::LeaderChange(change) => history.push(*change),
        }
    }
    (state, incarnation + 1, history)
}

/// WAL-1, CB-6, PROTO-2: every record kind written through the file comes back after a
/// restart, the history in the order it was written.
#[test]
fn wal1_every_record_kind_survives_a_restart() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, fresh) = open_counting(dir.path()).unwrap();
    assert_eq!(fresh.hard_state, HardState::default());
    assert_eq!(fresh.incarnation, 1);
    assert_eq!(fresh.history, vec![]);
    assert_eq!(fresh.records, 0);

    let mut written = Vec::new();
    for (n, &cause) in LeaderChangeCause::ALL.iter().enumerate() {
        let leader = (n % 3 != 0).then_some("gw-b");
        written.push(change(n as u64 + 1, leader, cause));
    }
    let state = HardState {
        term: 11,
        vote: Some(id("gw-a")),
        manual_override: Some(id("gw-b")),
    };
    let mut records: Vec<WalRecord> = written
        .iter()
        .copied()
        .map(WalRecord::LeaderChange)
        .collect();
    records.push(WalRecord::HardState(state));
    records.push(WalRecord::Incarnation(41));
    wal.append(&records).unwrap();
    assert_eq!(wal.history(), written.as_slice());
    assert_eq!(wal.hard_state(), state);
    drop(wal);

    let (wal, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.incarnation, 42);
    assert_eq!(recovered.history, written);
    assert_eq!(recovered.truncated_bytes, 0);
    assert_eq!(recovered.records, 1 + records.len() as u64);
    assert_eq!(wal.history(), written.as_slice());
    assert_eq!(wal.incarnation(), 42);
}

/// WAL-2, CB-6: the last hard state wins, and the history comes back in order across
/// several group commits.
#[test]
fn wal2_recovery_keeps_the_last_hard_state_and_the_history_in_order() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let bytes = sample_file(dir.path());
    assert_eq!(record_ends(&bytes).len(), sample_records().len());

    let (_, recovered) = open_counting(dir.path()).unwrap();
    let (state, incarnation, history) = expected_after(&sample_records());
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.hard_state, hard(3, None));
    assert_eq!(recovered.incarnation, incarnation);
    assert_eq!(recovered.incarnation, 8);
    assert_eq!(recovered.history, history);
    assert_eq!(
        recovered
            .history
            .iter()
            .map(|h| h.cause)
            .collect::<Vec<_>>(),
        [
            LeaderChangeCause::VoteWon,
            LeaderChangeCause::ElectionTimeout,
            LeaderChangeCause::SetLeader
        ]
    );
}

/// PROTO-2: the incarnation grows at every start, and each start's value is durable before
/// `open` returns.
#[test]
fn proto2_incarnation_grows_at_every_open() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let counting = WalOptions {
        incarnation_from_clock: false,
        ..WalOptions::default()
    };
    for expected in 1..=3 {
        let (wal, recovered) = WalFile::open_with(dir.path(), counting).unwrap();
        assert_eq!(recovered.incarnation, expected);
        assert_eq!(wal.incarnation(), expected);
    }
}

/// PROTO-2, PROTO-5: by default an incarnation never starts below the Unix time in seconds,
/// so a node whose data directory was wiped is still newer than its old self to its peers'
/// replay windows; a stored value ahead of the clock still grows by one.
#[test]
fn proto2_incarnation_never_starts_below_the_clock() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let now = crate::events::unix_millis(std::time::SystemTime::now()) / 1000;
    let (wal, first) = WalFile::open(dir.path()).unwrap();
    assert!(first.incarnation >= now, "{} < {now}", first.incarnation);
    drop(wal);
    let (wal, second) = WalFile::open(dir.path()).unwrap();
    assert!(second.incarnation > first.incarnation);
    drop(wal);

    // A wiped node starts again above what its peers saw from it before.
    let wiped = tempfile::tempdir().unwrap();
    let (_, fresh) = WalFile::open(wiped.path()).unwrap();
    assert!(fresh.incarnation > 1_000);

    // A stored incarnation far ahead of the clock keeps growing by one.
    let ahead = tempfile::tempdir().unwrap();
    let (mut wal, _) = WalFile::open(ahead.path()).unwrap();
    wal.append(&[WalRecord::Incarnation(u64::MAX / 2)]).unwrap();
    drop(wal);
    let (_, next) = WalFile::open(ahead.path()).unwrap();
    assert_eq!(next.incarnation, u64::MAX / 2 + 1);
}

/// WAL-2, RAFT-1: a node that voted for `a` in term 5 and restarts still knows it voted for
/// `a` in term 5, so it cannot grant a second vote in that term.
#[test]
fn wal2_never_votes_twice_after_restart() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    wal.append(&[WalRecord::HardState(hard(5, Some("a")))])
        .unwrap();
    drop(wal);

    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state.term, 5);
    assert_eq!(recovered.hard_state.vote, Some(id("a")));
}

/// WAL-2: a crash can cut the file anywhere. For every cut, recovery returns exactly the
/// records wholly before it, drops the rest, reports how much it dropped, never panics, and
/// the WAL takes appends afterwards. Cuts inside the 4-byte magic are a file whose creation
/// was interrupted: it starts afresh.
#[test]
fn wal2_every_truncation_point_recovers_the_records_before_it() {
    let source = tempfile::tempdir().unwrap();
    let bytes = sample_file(source.path());
    let ends = record_ends(&bytes);
    let records = sample_records();

    for cut in 0..=bytes.len() {
        let log = CapturedLog::default();
        let _log = log.install();
        let dir = tempfile::tempdir().unwrap();
        fs::write(wal_path(dir.path()), &bytes[..cut]).unwrap();

        let whole = ends.iter().filter(|&&end| end <= cut).count();
        let kept = match whole {
            0 if cut < MAGIC.len() => 0,
            0 => MAGIC.len(),
            n => ends[n - 1],
        };
        let (state, incarnation, history) = expected_after(&records[..whole]);

        let (mut wal, recovered) = open_counting(dir.path()).unwrap();
        assert_eq!(recovered.hard_state, state, "cut at {cut}");
        assert_eq!(recovered.incarnation, incarnation, "cut at {cut}");
        assert_eq!(recovered.history, history, "cut at {cut}");
        assert_eq!(recovered.records, whole as u64, "cut at {cut}");
        assert_eq!(
            recovered.truncated_bytes,
            (cut - kept) as u64,
            "cut at {cut}"
        );
        if cut > kept {
            let text = log.text();
            assert!(text.contains("WARN"), "cut at {cut}: {text}");
            assert!(
                text.contains(&format!("dropped_bytes={}", cut - kept)),
                "cut at {cut}: {text}"
            );
        }

        wal.append(&[WalRecord::HardState(hard(99, Some("gw-z")))])
            .unwrap();
        drop(wal);
        let (_, again) = open_counting(dir.path()).unwrap();
        assert_eq!(again.hard_state, hard(99, Some("gw-z")), "cut at {cut}");
        assert_eq!(again.incarnation, incarnation + 1, "cut at {cut}");
        assert_eq!(again.history, history, "cut at {cut}");
        assert_eq!(again.truncated_bytes, 0, "cut at {cut}");
        assert_eq!(again.records, whole as u64 + 2, "cut at {cut}");
    }
}

/// WAL-2: a flipped bit in the last record's payload fails its checksum; the record is cut
/// off, the ones before it are kept, and the warning says how many bytes were dropped.
#[test]
fn wal2_flipped_byte_in_the_last_record_is_caught_and_cut_off() {
    let log = CapturedLog::default();
    let _log = log.install();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let ends = record_ends(&bytes);
    let last_start = ends[ends.len() - 2];
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(wal_path(dir.path()), &bytes).unwrap();

    let records = sample_records();
    let (state, incarnation, history) = expected_after(&records[..records.len() - 1]);
    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.incarnation, incarnation);
    assert_eq!(recovered.history, history);
    let dropped = (bytes.len() - last_start) as u64;
    assert_eq!(recovered.truncated_bytes, dropped);
    let text = log.text();
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(text.contains(&format!("dropped_bytes={dropped}")), "{text}");
}

/// WAL-2: a corrupt record in the middle ends what is trusted. The log is only trusted up to
/// its first bad record, so the good-looking records after it are dropped too: they were
/// written after a write that did not complete, and nothing may hide behind garbage.
#[test]
fn wal2_flipped_byte_in_a_middle_record_cuts_from_there() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let ends = record_ends(&bytes);
    // The fourth record (the second hard state): flip a byte of its payload.
    let start = ends[2];
    bytes[start + RECORD_HEADER_LEN + 3] ^= 0x80;
    fs::write(wal_path(dir.path()), &bytes).unwrap();

    let (state, incarnation, history) = expected_after(&sample_records()[..3]);
    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.incarnation, incarnation);
    assert_eq!(recovered.history, history);
    assert_eq!(recovered.records, 3);
    assert_eq!(recovered.truncated_bytes, (bytes.len() - start) as u64);
}

/// WAL-2: a length field claiming more than 1 MiB is corruption, cut off without allocating.
#[test]
fn wal2_absurd_length_is_a_corrupt_tail() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    drop(open_counting(dir.path()).unwrap());
    let mut bogus = u32::MAX.to_le_bytes().to_vec();
    bogus.extend_from_slice(&[1, 0, 0, 0, 0, 9, 9, 9]);
    append_raw(dir.path(), &bogus);

    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.truncated_bytes, bogus.len() as u64);
    assert_eq!(recovered.incarnation, 2);
}

/// A small deterministic generator (xorshift64), so the garbage test replays from its seed
/// without a new dependency.
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// WAL-2: whatever the file holds, `open` answers with a recovery or an error, never a panic.
/// Files it refuses are left as they were; files it accepts are clean afterwards (a second
/// open drops nothing and sees the same state). Shapes: random bytes, the magic then random
/// bytes, a valid file with flipped bytes and a random cut, and records with correct
/// checksums around random payloads (which reach the payload decoder).
#[test]
fn wal2_garbage_never_panics() {
    let _log = CapturedLog::default().install();
    let source = tempfile::tempdir().unwrap();
    let valid = sample_file(source.path());
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Garbage(0x5eed_0000_c0c1_a7e5);
    let (mut recovered_files, mut refused_foreign, mut refused_unreadable) = (0, 0, 0);

    for round in 0..400 {
        let content = match round % 4 {
            0 => {
                let len = rng.below(64);
                rng.bytes(len)
            }
            1 => {
                let len = rng.below(200);
                let mut content = MAGIC.to_vec();
                content.extend(rng.bytes(len));
                content
            }
            2 => {
                let mut content = valid.clone();
                for _ in 0..=rng.below(3) {
                    let at = MAGIC.len() + rng.below(content.len() - MAGIC.len());
                    content[at] ^= 1 << rng.below(8);
                }
                let len = MAGIC.len() + rng.below(content.len() - MAGIC.len() + 1);
                content.truncate(len);
                content
            }
            _ => {
                let mut content = MAGIC.to_vec();
                for _ in 0..=rng.below(4) {
                    let kind = [1, 2, 3, 10, 11, rng.next() as u8][rng.below(6)];
                    let len = rng.below(40);
                    let payload = rng.bytes(len);
                    content.extend(raw_record(kind, &payload));
                }
                content
            }
        };
        let path = wal_path(dir.path());
        fs::write(&path, &content).unwrap();

        match open_counting(dir.path()) {
            Ok((wal, recovered)) => {
                drop(wal);
                let (_, again) = open_counting(dir.path())
                    .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
                assert_eq!(again.truncated_bytes, 0, "round {round}");
                assert_eq!(again.hard_state, recovered.hard_state, "round {round}");
                assert_eq!(
                    again.incarnation,
                    recovered.incarnation + 1,
                    "round {round}"
                );
                recovered_files += 1;
            }
            Err(error @ (WalError::ForeignFile { .. } | WalError::BadRecord { .. })) => {
                assert_eq!(fs::read(&path).unwrap(), content, "round {round}: {error}");
                match error {
                    WalError::ForeignFile { .. } => refused_foreign += 1,
                    _ => refused_unreadable += 1,
                }
            }
            Err(WalError::IncarnationExhausted { .. }) => {}
            Err(error) => panic!("round {round}: unexpected error {error}"),
        }
    }
    // The shapes reach every outcome, so the loop exercises more than one path.
    assert!(recovered_files > 0 && refused_foreign > 0 && refused_unreadable > 0);
}

/// WAL-1: a file that does not start with the magic is not ours: `open` refuses it with an
/// error naming it and does not change a byte, whether it is long or shorter than the magic.
/// (Only a prefix of the magic itself, like `CW`, is taken for our own interrupted creation;
/// the truncation test covers that.)
#[test]
fn wal1_foreign_file_is_refused_and_left_untouched() {
    let _log = CapturedLog::default().install();
    for content in [&b"#!/bin/sh\necho not a wal\n"[..], b"CWL2", b"CX", b"x"] {
        let dir = tempfile::tempdir().unwrap();
        let path = wal_path(dir.path());
        fs::write(&path, content).unwrap();

        let error = open_counting(dir.path()).unwrap_err();
        assert!(
            matches!(&error, WalError::ForeignFile { path: p, .. } if *p == path),
            "{error:?}"
        );
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
        assert_eq!(fs::read(&path).unwrap(), content);
    }
}

/// WAL-1: a record whose checksum is valid but whose payload does not follow its kind's
/// layout was written whole by something else; dropping it could drop a vote, so the node
/// refuses to start and leaves the file as it is.
#[test]
fn wal1_checksummed_but_unreadable_record_is_an_error() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    drop(open_counting(dir.path()).unwrap());
    let offset = fs::metadata(wal_path(dir.path())).unwrap().len();
    append_raw(dir.path(), &raw_record(1, &[5, 0, 0, 0, 0, 0, 0, 0, 7]));
    let before = fs::read(wal_path(dir.path())).unwrap();

    let error = open_counting(dir.path()).unwrap_err();
    assert!(
        matches!(error, WalError::BadRecord { offset: o, kind: 1, .. } if o == offset),
        "{error:?}"
    );
    assert!(error.to_string().contains(WAL_FILE_NAME), "{error}");
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), before);
}

/// PROTO-2: an incarnation that cannot grow any more is an error, not an overflow panic or a
/// wrapped-around incarnation that peers would take for a replay.
#[test]
fn proto2_exhausted_incarnation_is_an_error() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    wal.append(&[WalRecord::Incarnation(u64::MAX)]).unwrap();
    drop(wal);
    assert!(matches!(
        open_counting(dir.path()),
        Err(WalError::IncarnationExhausted { .. })
    ));
}

/// WAL-1 (forward compatibility): records of a kind this version does not know — the kinds
/// reserved for the replicated log among them — are skipped with a warning, the records
/// after them are still read, and compaction leaves them alone rather than drop them. A
/// history record with a cause from a newer version is skipped the same way.
#[test]
fn wal1_unknown_kinds_are_skipped_and_kept() {
    let log = CapturedLog::default();
    let _log = log.install();
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions {
        compact_threshold: 256,
        history_limit: 4,
        incarnation_from_clock: false,
    };
    drop(WalFile::open_with(dir.path(), options).unwrap());
    let entries = raw_record(10, b"a future log entry");
    let mut unknown_cause = 4u64.to_le_bytes().to_vec();
    unknown_cause.extend_from_slice(&[0, 250]);
    unknown_cause.extend_from_slice(&0u64.to_le_bytes());
    append_raw(dir.path(), &entries);
    append_raw(dir.path(), &raw_record(11, b"snapshot"));
    append_raw(dir.path(), &raw_record(3, &unknown_cause));
    append_raw(
        dir.path(),
        &WalRecord::HardState(hard(4, Some("gw-d"))).encode(),
    );

    let (mut wal, recovered) = WalFile::open_with(dir.path(), options).unwrap();
    assert_eq!(recovered.records, 5);
    assert_eq!(recovered.hard_state, hard(4, Some("gw-d")));
    assert_eq!(recovered.history, vec![]);
    assert_eq!(recovered.truncated_bytes, 0);
    let text = log.text();
    assert!(
        text.contains("reserved for replicated log entries"),
        "{text}"
    );
    assert!(text.contains("reserved for snapshot markers"), "{text}");
    assert!(text.contains("cause this version does not know"), "{text}");

    for term in 5..40 {
        wal.append(&[WalRecord::HardState(hard(term, Some("gw-d")))])
            .unwrap();
    }
    assert!(wal.size_bytes() > options.compact_threshold);
    drop(wal);
    let bytes = fs::read(wal_path(dir.path())).unwrap();
    assert!(
        bytes
            .windows(entries.len())
            .any(|w| w == entries.as_slice())
    );
}

/// WAL-3: past the threshold, appends compact the file to the current hard state, the
/// incarnation and the newest history records; the file shrinks, nothing current is lost,
/// and no temp file is left behind.
#[test]
fn wal3_compaction_keeps_state_incarnation_and_newest_history() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions {
        compact_threshold: 2048,
        history_limit: 10,
        incarnation_from_clock: false,
    };
    let (mut wal, _) = WalFile::open_with(dir.path(), options).unwrap();
    let mut written = Vec::new();
    let mut largest = 0;
    for term in 1..=300 {
        let leader = if term % 2 == 0 { "gw-a" } else { "gw-b" };
        let record = change(term, Some(leader), LeaderChangeCause::VoteWon);
        written.push(record);
        wal.append(&[
            WalRecord::HardState(hard(term, Some(leader))),
            WalRecord::LeaderChange(record),
        ])
        .unwrap();
        largest = largest.max(wal.size_bytes());
    }
    let newest = &written[written.len() - 10..];
    assert_eq!(wal.history(), newest);
    let size = fs::metadata(wal_path(dir.path())).unwrap().len();
    assert_eq!(size, wal.size_bytes());
    // Without compaction, 300 pairs of records would take over 15 KB.
    assert!(largest < 2048 + 128, "the file grew to {largest} bytes");
    assert!(!dir.path().join("conclave.wal.tmp").exists());
    drop(wal);

    let (_, recovered) = WalFile::open_with(dir.path(), options).unwrap();
    assert_eq!(recovered.hard_state, hard(300, Some("gw-a")));
    assert_eq!(recovered.incarnation, 2);
    assert_eq!(recovered.history, newest);
    assert_eq!(recovered.truncated_bytes, 0);
}

/// WAL-3: an explicit compaction shrinks the file to its live records; the leftover temp file
/// of a compaction interrupted before its rename is removed at the next open, and the old file
/// it was meant to replace is still whole.
#[test]
fn wal3_explicit_compaction_and_interrupted_compaction() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    for term in 1..=50 {
        wal.append(&[WalRecord::HardState(hard(term, Some("gw-a")))])
            .unwrap();
    }
    let before = wal.size_bytes();
    wal.compact().unwrap();
    assert!(
        wal.size_bytes() < before / 10,
        "{} of {before}",
        wal.size_bytes()
    );
    wal.append(&[WalRecord::HardState(hard(51, None))]).unwrap();
    drop(wal);

    fs::write(dir.path().join("conclave.wal.tmp"), b"CWL1 half written").unwrap();
    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state, hard(51, None));
    assert_eq!(recovered.incarnation, 2);
    assert!(!dir.path().join("conclave.wal.tmp").exists());
}

/// WAL-1: an empty group commit writes nothing; a group of records grows the file by exactly
/// their encodings.
#[test]
fn wal1_group_commit_writes_the_records_at_once() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    let before = wal.size_bytes();
    wal.append(&[]).unwrap();
    assert_eq!(wal.size_bytes(), before);

    let records = &sample_records()[1..];
    wal.append(records).unwrap();
    let encoded: usize = records.iter().map(|r| r.encode().len()).sum();
    assert_eq!(wal.size_bytes(), before + encoded as u64);
    assert_eq!(
        fs::metadata(wal_path(dir.path())).unwrap().len(),
        wal.size_bytes()
    );
}

/// WAL-1: `open` creates a missing data directory (and its parents).
#[test]
fn wal1_open_creates_the_data_directory() {
    let _log = CapturedLog::default().install();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("var").join("conclave");
    let (wal, recovered) = open_counting(&dir).unwrap();
    assert_eq!(recovered.incarnation, 1);
    assert_eq!(wal.path(), wal_path(&dir));
    assert!(wal_path(&dir).is_file());
}

/// WAL-1: `read_records` returns every valid record in order without changing the file.
#[test]
fn wal1_read_records_lists_everything_in_order() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    wal.append(&[WalRecord::HardState(hard(3, Some("a")))])
        .unwrap();
    wal.append(&[WalRecord::HardState(hard(4, Some("b")))])
        .unwrap();
    drop(wal);
    let size = fs::metadata(dir.path().join(WAL_FILE_NAME)).unwrap().len();
    let records = read_records(dir.path()).unwrap();
    assert_eq!(
        records,
        vec![
            WalRecord::Incarnation(1),
            WalRecord::HardState(hard(3, Some("a"))),
            WalRecord::HardState(hard(4, Some("b"))),
        ]
    );
    assert_eq!(
        fs::metadata(dir.path().join(WAL_FILE_NAME)).unwrap().len(),
        size
    );
}
