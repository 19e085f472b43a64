//! Recovery, durability and compaction of [`WalFile`] on a real file system (WAL-1, WAL-2,
//! WAL-3, PROTO-2, CB-6), inspection and repair, and the data-directory lock. The format
//! itself is tested in `record.rs`, the verdicts on raw bytes in `examine.rs`, the actor in
//! `actor.rs`.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use conclave_core::election::{
    Action, Election, ElectionConfig, ElectionMessage, HardState, LeaderChangeCause, Mode,
};
use conclave_core::{Instant, SeededRng};
use conclave_protocol::{Body, PeerId, RequestVote};
use tracing_subscriber::fmt::MakeWriter;

use super::*;
use crate::record::{MAGIC, RECORD_HEADER_LEN, checksum, encode_seal};

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

fn hard(term: u64, vote: Option<&'static str>) -> HardState {
    HardState {
        term,
        vote: vote.map(PeerId::from_static),
        manual_override: None,
    }
}

fn change(term: u64, leader: Option<&'static str>, cause: LeaderChangeCause) -> HistoryRecord {
    HistoryRecord {
        term,
        leader: leader.map(PeerId::from_static),
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

/// A temporary directory in memory where the system has one (`/dev/shm`), for tests that open
/// a WAL thousands of times: each open fsyncs, which costs milliseconds on a real disk and
/// nothing there. The code under test is the same either way.
fn memory_backed_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
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

/// One record of a test file as it lies on disk: a record, or the seal ending a group commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Record(WalRecord),
    Seal,
}

/// The group commits of the test file, the first being the incarnation `open` writes: several
/// terms, each with a vote, leader changes, a pin, a second incarnation and the operator's
/// automatic-election switch. It ends in term 5 with a vote for gw-b.
fn sample_batches() -> Vec<Vec<WalRecord>> {
    vec![
        vec![WalRecord::Incarnation(1)],
        vec![WalRecord::HardState(hard(1, Some("gw-a")))],
        vec![
            WalRecord::HardState(hard(2, Some("gw-b"))),
            WalRecord::LeaderChange(change(2, Some("gw-b"), LeaderChangeCause::VoteWon)),
        ],
        vec![
            WalRecord::HardState(HardState {
                term: 3,
                vote: Some(PeerId::from_static("gw-c")),
                manual_override: Some(PeerId::from_static("gw-c")),
            }),
            WalRecord::LeaderChange(change(3, None, LeaderChangeCause::ElectionTimeout)),
            WalRecord::LeaderChange(change(3, Some("gw-c"), LeaderChangeCause::SetLeader)),
        ],
        vec![WalRecord::Incarnation(7), WalRecord::AutoElection(false)],
        vec![WalRecord::HardState(hard(4, None))],
        vec![WalRecord::HardState(hard(5, Some("gw-b")))],
    ]
}

/// The final state of [`sample_batches`].
fn sample_final() -> HardState {
    hard(5, Some("gw-b"))
}

/// The test file's records and seals in file order.
fn sample_layout() -> Vec<Entry> {
    let mut layout = Vec::new();
    for batch in sample_batches() {
        layout.extend(batch.into_iter().map(Entry::Record));
        layout.push(Entry::Seal);
    }
    layout
}

/// The records of [`sample_layout`], seals left out.
fn records_of(layout: &[Entry]) -> Vec<WalRecord> {
    layout
        .iter()
        .filter_map(|entry| match entry {
            Entry::Record(record) => Some(*record),
            Entry::Seal => None,
        })
        .collect()
}

/// Writes [`sample_batches`] through the WAL (the first by `open`, the rest one group commit
/// each) and returns the file's bytes.
fn sample_file(dir: &Path) -> Vec<u8> {
    let batches = sample_batches();
    let (mut wal, _) = open_counting(dir).unwrap();
    for batch in &batches[1..] {
        wal.append(batch).unwrap();
    }
    drop(wal);
    let bytes = fs::read(wal_path(dir)).unwrap();
    assert_eq!(record_ends(&bytes).len(), sample_layout().len());
    bytes
}

/// What recovering exactly `records` must yield: hard state, next incarnation, history, and
/// whether it is amnesic.
fn expected_after(records: &[WalRecord]) -> (HardState, u64, Vec<HistoryRecord>, bool) {
    let mut state = HardState::default();
    let mut incarnation = 0;
    let mut history = Vec::new();
    let mut amnesic = true;
    for record in records {
        match record {
            WalRecord::HardState(hard) => {
                state = *hard;
                amnesic = false;
            }
            WalRecord::Incarnation(n) => incarnation = *n,
            WalRecord::LeaderChange(change) => history.push(*change),
            WalRecord::Amnesia { .. } => amnesic = true,
            WalRecord::Genesis { .. } => amnesic = false,
            WalRecord::AutoElection(_) | WalRecord::Mode(_) => {}
        }
    }
    (state, incarnation + 1, history, amnesic)
}

/// Whether a node restarted from `state` grants `RequestVote(state.term, candidate)`: the
/// Raft core decides, as it would in the running node.
fn grants_vote(state: HardState, candidate: &'static str) -> bool {
    let me = PeerId::from_static("gw-z");
    let voters = [
        me,
        PeerId::from_static("gw-a"),
        PeerId::from_static("gw-b"),
        PeerId::from_static("gw-c"),
        PeerId::from_static("gw-d"),
    ];
    let mut election = Election::new(
        ElectionConfig::raft(me, voters),
        state,
        SeededRng::new(7),
        Instant::ZERO,
    )
    .unwrap();
    let candidate = PeerId::from_static(candidate);
    let request = ElectionMessage::try_from(Body::RequestVote(RequestVote {
        term: state.term.max(1),
        candidate,
        last_log_index: 0,
        last_log_term: 0,
        pre_vote: false,
        leadership_transfer: false,
        priority: None,
    }))
    .unwrap();
    election
        .handle_message(
            Instant::ZERO + Duration::from_millis(10),
            candidate,
            request,
        )
        .unwrap();
    std::iter::from_fn(|| election.poll_action()).any(|action| match action {
        Action::Send { message, .. } => {
            matches!(Body::from(message), Body::Vote(vote) if vote.granted)
        }
        _ => false,
    })
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
        vote: Some(PeerId::from_static("gw-a")),
        manual_override: Some(PeerId::from_static("gw-b")),
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

/// WAL-2, CB-6, RAFT-8: the last hard state wins, the history comes back in order across
/// several group commits, and so does the operator's automatic-election switch.
#[test]
fn wal2_recovery_keeps_the_last_hard_state_and_the_history_in_order() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    sample_file(dir.path());

    let (_, recovered) = open_counting(dir.path()).unwrap();
    let (state, incarnation, history, amnesic) = expected_after(&records_of(&sample_layout()));
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.hard_state, sample_final());
    assert_eq!(recovered.incarnation, incarnation);
    assert_eq!(recovered.incarnation, 8);
    assert!(!amnesic && !recovered.amnesic);
    assert_eq!(recovered.auto_election, Some(false));
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
    let now = crate::clock::unix_millis(std::time::SystemTime::now()) / 1000;
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
    assert_eq!(recovered.hard_state.vote, Some(PeerId::from_static("a")));
}

/// WAL-2: a crash can cut the file anywhere. For every cut, recovery succeeds with exactly
/// the records wholly before it — a prefix of the file's records: every group commit before
/// the cut, and the complete records of the one it interrupted — drops the rest, reports how
/// much it dropped, never panics, and the WAL takes appends afterwards. A cut before the first
/// hard state leaves the node amnesic. Cuts inside the 4-byte magic are a file whose creation
/// was interrupted: it starts afresh.
#[test]
fn wal2_every_truncation_point_recovers_a_prefix_of_the_records() {
    let source = tempfile::tempdir().unwrap();
    let bytes = sample_file(source.path());
    let ends = record_ends(&bytes);
    let layout = sample_layout();
    let dir = memory_backed_tempdir();

    for cut in 0..=bytes.len() {
        let log = CapturedLog::default();
        let _log = log.install();
        fs::write(wal_path(dir.path()), &bytes[..cut]).unwrap();

        let whole = ends.iter().filter(|&&end| end <= cut).count();
        let kept = match whole {
            0 if cut < MAGIC.len() => 0,
            0 => MAGIC.len(),
            n => ends[n - 1],
        };
        let prefix = records_of(&layout[..whole]);
        let (state, incarnation, history, amnesic) = expected_after(&prefix);

        let (mut wal, recovered) =
            open_counting(dir.path()).unwrap_or_else(|error| panic!("cut at {cut}: {error}"));
        assert_eq!(recovered.hard_state, state, "cut at {cut}");
        assert_eq!(recovered.amnesic, amnesic, "cut at {cut}");
        assert_eq!(recovered.incarnation, incarnation, "cut at {cut}");
        assert_eq!(recovered.history, history, "cut at {cut}");
        assert_eq!(recovered.records, prefix.len() as u64, "cut at {cut}");
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
        assert!(!again.amnesic, "cut at {cut}");
        assert_eq!(again.incarnation, incarnation + 1, "cut at {cut}");
        assert_eq!(again.history, history, "cut at {cut}");
        assert_eq!(again.truncated_bytes, 0, "cut at {cut}");
        assert_eq!(again.records, prefix.len() as u64 + 2, "cut at {cut}");
    }
}

/// WAL-2, RAFT-1, RAFT-5: a flipped bit anywhere in the file never rolls back the term or the
/// vote. For every byte offset of a WAL of several terms, votes, incarnations, leader changes
/// and seals, and for every bit of that byte, the node either refuses the file and leaves it
/// byte for byte as it was, or recovers exactly the final hard state — and a Raft core started
/// from what it recovered refuses `RequestVote(last term, another candidate)`. Only a flip in
/// the final seal can be recovered from: that seal is a torn tail, cut without losing state.
#[test]
fn wal2_a_flipped_bit_at_any_offset_never_rolls_back_term_or_vote() {
    let _log = CapturedLog::default().install();
    let source = tempfile::tempdir().unwrap();
    let bytes = sample_file(source.path());
    let final_state = sample_final();
    assert!(
        !grants_vote(final_state, "gw-c"),
        "the final state voted for gw-b"
    );
    let last_seal = record_ends(&bytes)[sample_layout().len() - 2];

    let dir = memory_backed_tempdir();
    let path = wal_path(dir.path());
    let (mut refused, mut recovered_files, mut rollbacks, mut second_votes) = (0, 0, 0, 0);
    let mut unexpected = Vec::new();
    for offset in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[offset] ^= 1 << bit;
            fs::write(&path, &damaged).unwrap();
            match open_counting(dir.path()) {
                Ok((wal, recovered)) => {
                    drop(wal);
                    recovered_files += 1;
                    if recovered.hard_state != final_state || recovered.amnesic {
                        rollbacks += 1;
                        unexpected.push(format!(
                            "offset {offset} bit {bit}: recovered {:?}",
                            recovered.hard_state
                        ));
                    }
                    if grants_vote(recovered.hard_state, "gw-c") {
                        second_votes += 1;
                    }
                    if offset < last_seal {
                        unexpected.push(format!("offset {offset} bit {bit}: not refused"));
                    }
                }
                Err(error) => {
                    refused += 1;
                    assert_eq!(
                        fs::read(&path).unwrap(),
                        damaged,
                        "offset {offset} bit {bit}: {error} changed the file"
                    );
                    let expected_kind = if offset < MAGIC.len() {
                        matches!(error, WalError::ForeignFile { .. })
                    } else {
                        matches!(error, WalError::Corrupt { .. })
                    };
                    if !expected_kind || offset >= last_seal {
                        unexpected.push(format!("offset {offset} bit {bit}: {error}"));
                    }
                }
            }
        }
    }
    println!(
        "{} flips: {refused} refused with the file untouched, {recovered_files} recovered; \
         {rollbacks} rollbacks, {second_votes} second votes",
        bytes.len() * 8
    );
    assert_eq!((rollbacks, second_votes), (0, 0), "{unexpected:#?}");
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    assert_eq!(recovered_files, (bytes.len() - last_seal) * 8);
}

/// WAL-2: a flipped bit in the newest real record is caught: its batch's seal follows it, so
/// the file is refused, untouched, with an error naming the file, the offset and number of the
/// damaged record, what is wrong and where the next valid record is.
#[test]
fn wal2_flipped_bit_in_the_newest_record_is_refused_with_offset_and_record() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let ends = record_ends(&bytes);
    let count = ends.len();
    // The newest hard state, then its seal.
    let (start, seal) = (ends[count - 3], ends[count - 2]);
    bytes[start + RECORD_HEADER_LEN + 2] ^= 0x10;
    fs::write(wal_path(dir.path()), &bytes).unwrap();

    let error = open_counting(dir.path()).unwrap_err();
    let WalError::Corrupt {
        path,
        offset,
        record,
        reason,
        next_valid,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(*path, wal_path(dir.path()));
    assert_eq!(
        (*offset, *record, *reason, *next_valid),
        (
            start as u64,
            count as u64 - 1,
            "checksum mismatch",
            seal as u64
        )
    );
    let text = error.to_string();
    for needed in [
        wal_path(dir.path()).display().to_string(),
        format!("record {}", count - 1),
        format!("byte {start}"),
        format!("byte {seal}"),
        "conclave wal repair".to_owned(),
    ] {
        assert!(text.contains(&needed), "{needed:?} missing from: {text}");
    }
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), bytes);
}

/// WAL-2: a flipped bit in the final seal is a torn tail: the seal is cut off, nothing else,
/// and the warning says how many bytes were dropped and why.
#[test]
fn wal2_flipped_bit_in_the_last_seal_is_cut_off_without_losing_state() {
    let log = CapturedLog::default();
    let _log = log.install();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(wal_path(dir.path()), &bytes).unwrap();

    let (state, incarnation, history, _) = expected_after(&records_of(&sample_layout()));
    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert_eq!(recovered.hard_state, state);
    assert_eq!(recovered.incarnation, incarnation);
    assert_eq!(recovered.history, history);
    assert_eq!(recovered.truncated_bytes, RECORD_HEADER_LEN as u64);
    let text = log.text();
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(text.contains("dropped_bytes=9"), "{text}");
}

/// WAL-2: a corrupt record in the middle is not a torn tail: the valid records after it were
/// durable and may hold the current vote, so the node refuses the file and does not change a
/// byte of it.
#[test]
fn wal2_flipped_byte_in_a_middle_record_is_refused_and_left_untouched() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let ends = record_ends(&bytes);
    // The second hard state: flip a byte of its payload.
    let start = ends[3];
    bytes[start + RECORD_HEADER_LEN + 3] ^= 0x80;
    fs::write(wal_path(dir.path()), &bytes).unwrap();

    let error = open_counting(dir.path()).unwrap_err();
    assert!(
        matches!(error, WalError::Corrupt { offset, record: 5, next_valid, .. }
            if offset == start as u64 && next_valid == ends[4] as u64),
        "{error:?}"
    );
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), bytes);
    assert!(matches!(
        read_records(dir.path()),
        Err(WalError::Corrupt { .. })
    ));
}

/// WAL-2: zeros and random garbage after the last record — what a crash can leave when the
/// file's size was extended before its data reached the disk — are torn tails, cut off.
#[test]
fn wal2_zero_and_garbage_tails_are_cut() {
    let _log = CapturedLog::default().install();
    let source = tempfile::tempdir().unwrap();
    let valid = sample_file(source.path());
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Garbage(0x7a11_0000_0000_0001);
    let mut tails = vec![vec![0u8; 1], vec![0u8; 9], vec![0u8; 4096]];
    for len in [1, 8, 9, 17, 100, 4096] {
        tails.push(rng.bytes(len));
    }
    for tail in tails {
        let mut content = valid.clone();
        content.extend_from_slice(&tail);
        fs::write(wal_path(dir.path()), &content).unwrap();
        let (wal, recovered) = open_counting(dir.path())
            .unwrap_or_else(|error| panic!("{} bytes of tail: {error}", tail.len()));
        drop(wal);
        assert_eq!(recovered.hard_state, sample_final(), "{} bytes", tail.len());
        assert_eq!(recovered.truncated_bytes, tail.len() as u64);
    }
}

/// WAL-2: a file written before seals existed (records without seals) still opens; a damaged
/// record in its middle is still refused.
#[test]
fn wal2_files_without_seals_still_open() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let records = records_of(&sample_layout());
    let mut bytes = MAGIC.to_vec();
    for record in &records {
        record.encode_into(&mut bytes);
    }
    fs::write(wal_path(dir.path()), &bytes).unwrap();
    let (wal, recovered) = open_counting(dir.path()).unwrap();
    drop(wal);
    assert_eq!(recovered.hard_state, sample_final());
    assert_eq!(recovered.truncated_bytes, 0);

    bytes[MAGIC.len() + RECORD_HEADER_LEN] ^= 0x01;
    fs::write(wal_path(dir.path()), &bytes).unwrap();
    assert!(matches!(
        open_counting(dir.path()),
        Err(WalError::Corrupt {
            offset: 4,
            record: 1,
            ..
        })
    ));
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
    let (mut recovered_files, mut refused_foreign, mut refused_damaged) = (0, 0, 0);

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
            Err(
                error @ (WalError::ForeignFile { .. }
                | WalError::BadRecord { .. }
                | WalError::Corrupt { .. }),
            ) => {
                assert_eq!(fs::read(&path).unwrap(), content, "round {round}: {error}");
                match error {
                    WalError::ForeignFile { .. } => refused_foreign += 1,
                    _ => refused_damaged += 1,
                }
            }
            Err(WalError::IncarnationExhausted { .. }) => {}
            Err(error) => panic!("round {round}: unexpected error {error}"),
        }
    }
    // The shapes reach every outcome, so the loop exercises more than one path.
    assert!(recovered_files > 0 && refused_foreign > 0 && refused_damaged > 0);
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
        mode: None,
        genesis: false,
        ..WalOptions::default()
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
        text.contains("log entries, which belong in log segments"),
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
        mode: None,
        genesis: false,
        ..WalOptions::default()
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

/// WAL-1, WAL-2: an empty group commit writes nothing; a group of records grows the file by
/// exactly their encodings and one seal.
#[test]
fn wal1_group_commit_writes_the_records_at_once() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_counting(dir.path()).unwrap();
    let before = wal.size_bytes();
    wal.append(&[]).unwrap();
    assert_eq!(wal.size_bytes(), before);

    let records = records_of(&sample_layout());
    wal.append(&records).unwrap();
    let mut encoded = Vec::new();
    for record in &records {
        record.encode_into(&mut encoded);
    }
    encode_seal(&mut encoded);
    assert_eq!(wal.size_bytes(), before + encoded.len() as u64);
    let written = fs::read(wal_path(dir.path())).unwrap();
    assert_eq!(&written[before as usize..], encoded.as_slice());
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

/// WAL-2: a WAL without a hard state — a new node, or one whose WAL was deleted — is amnesic,
/// and stays amnesic across restarts until a hard state is written; after that it is not.
#[test]
fn wal2_no_hard_state_means_amnesic_until_one_is_written() {
    let log = CapturedLog::default();
    let _log = log.install();
    let dir = tempfile::tempdir().unwrap();
    let (wal, fresh) = open_counting(dir.path()).unwrap();
    assert!(fresh.amnesic);
    drop(wal);
    // A first start is said as such, not as a WAL that lost its state.
    assert!(
        log.text()
            .contains("first start of a node in this directory; its new WAL holds no term"),
        "{}",
        log.text()
    );
    assert!(!log.text().contains("WAL recovered"), "{}", log.text());
    let (mut wal, again) = open_counting(dir.path()).unwrap();
    assert!(again.amnesic, "incarnations alone do not end amnesia");
    assert!(
        log.text()
            .contains("WAL recovered; it holds no term or vote"),
        "{}",
        log.text()
    );
    wal.append(&[WalRecord::HardState(hard(4, Some("gw-b")))])
        .unwrap();
    drop(wal);
    let (_, whole) = open_counting(dir.path()).unwrap();
    assert!(!whole.amnesic);

    // Deleting the file makes it amnesic again, and that is no first start: the lock file
    // shows an earlier node.
    fs::remove_file(wal_path(dir.path())).unwrap();
    let starts = log.text().matches("first start").count();
    let (_, wiped) = open_counting(dir.path()).unwrap();
    assert!(wiped.amnesic);
    assert!(!wiped.fresh_directory);
    assert_eq!(wiped.hard_state, HardState::default());
    assert_eq!(
        log.text().matches("first start").count(),
        starts,
        "{}",
        log.text()
    );
}

/// WAL-2 (one process per data directory): while a WAL is open, a second open of the same
/// directory is refused with an error naming the directory and the holder's pid, and the WAL's
/// bytes are not touched; once the first is closed, the directory opens again.
#[test]
fn wal2_second_open_of_a_data_directory_is_refused() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = open_counting(dir.path()).unwrap();
    let before = fs::read(wal_path(dir.path())).unwrap();

    let error = open_counting(dir.path()).unwrap_err();
    assert!(
        matches!(&error, WalError::Locked { dir: d, pid: Some(pid) }
            if d == dir.path() && *pid == std::process::id()),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains(&dir.path().display().to_string()), "{text}");
    assert!(
        text.contains(&format!("process {}", std::process::id())),
        "{text}"
    );
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), before);
    // Reading does not need the lock.
    assert_eq!(read_records(dir.path()).unwrap().len(), 1);
    assert!(inspect(dir.path()).is_ok());

    drop(first);
    open_counting(dir.path()).unwrap();
}

/// RAFT-8: the operator's automatic-election switch comes back after a restart, the last one
/// written wins, and compaction keeps it.
#[test]
fn raft8_auto_election_switch_survives_restart_and_compaction() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, fresh) = open_counting(dir.path()).unwrap();
    assert_eq!(fresh.auto_election, None);
    wal.append(&[WalRecord::AutoElection(false)]).unwrap();
    drop(wal);
    let (mut wal, off) = open_counting(dir.path()).unwrap();
    assert_eq!(off.auto_election, Some(false));
    wal.append(&[WalRecord::AutoElection(true)]).unwrap();
    wal.append(&[WalRecord::AutoElection(false)]).unwrap();
    wal.compact().unwrap();
    drop(wal);
    let (_, compacted) = open_counting(dir.path()).unwrap();
    assert_eq!(compacted.auto_election, Some(false));
}

/// Damages the newest hard state of the sample file in `dir` and returns the damaged bytes.
fn damage_newest_hard_state(dir: &Path) -> Vec<u8> {
    let mut bytes = sample_file(dir);
    let ends = record_ends(&bytes);
    let start = ends[ends.len() - 3];
    bytes[start + RECORD_HEADER_LEN] ^= 0x04;
    fs::write(wal_path(dir), &bytes).unwrap();
    bytes
}

/// WAL-2: `inspect` reads a corrupt file without changing it and lists every record with its
/// offset — the ones after the damage too — the damaged span, the verdict and the state the
/// trusted records add up to.
#[test]
fn wal2_inspect_lists_records_damage_and_verdict_without_changing_anything() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let bytes = damage_newest_hard_state(dir.path());
    let ends = record_ends(&bytes);
    let (start, seal) = (ends[ends.len() - 3] as u64, ends[ends.len() - 2] as u64);

    let inspection = inspect(dir.path()).unwrap();
    assert_eq!(inspection.path, wal_path(dir.path()));
    let examination = &inspection.examination;
    assert_eq!(examination.len, bytes.len() as u64);
    assert!(matches!(
        examination.verdict,
        Verdict::Corrupt { offset, next_valid, .. } if offset == start && next_valid == seal
    ));
    assert_eq!(examination.damage.len(), 1);
    assert_eq!(examination.records.len(), ends.len() - 1);
    let seals_after: Vec<_> = examination
        .records
        .iter()
        .filter(|r| r.after_damage)
        .collect();
    assert_eq!(seals_after.len(), 1);
    assert_eq!(seals_after[0].content, RecordContent::Seal);
    // What the records before the damage add up to: term 4, no vote.
    assert_eq!(inspection.start.hard_state, hard(4, None));
    assert_eq!(inspection.start.auto_election, Some(false));
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), bytes);
    // A file path works as well as its directory.
    assert_eq!(inspect(&wal_path(dir.path())).unwrap(), inspection);
}

/// WAL-2: `repair` refuses while the data directory is locked, and leaves a file alone when
/// the node could start from it by itself (clean, or a torn tail).
#[test]
fn wal2_repair_refuses_a_locked_directory_and_leaves_startable_files_alone() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let bytes = damage_newest_hard_state(dir.path());
    let held = DataDirLock::acquire(dir.path()).unwrap();
    assert!(matches!(
        repair(dir.path(), 1),
        Err(WalError::Locked { pid: Some(_), .. })
    ));
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), bytes);
    drop(held);

    let clean = tempfile::tempdir().unwrap();
    let good = sample_file(clean.path());
    assert_eq!(
        repair(clean.path(), 1).unwrap(),
        RepairOutcome::NotNeeded(Verdict::Clean)
    );
    let mut torn = good.clone();
    torn.extend_from_slice(&[0; 5]);
    fs::write(wal_path(clean.path()), &torn).unwrap();
    assert!(matches!(
        repair(clean.path(), 1).unwrap(),
        RepairOutcome::NotNeeded(Verdict::TornTail { bytes: 5, .. })
    ));
    assert_eq!(fs::read(wal_path(clean.path())).unwrap(), torn);
}

/// WAL-2: `repair` keeps an exact copy of the damaged file, writes a new WAL with every valid
/// record (the damaged one dropped, the ones after it kept) and an amnesia marker, after which
/// the node opens the WAL as amnesic — it abstains, as a wiped node does — at the last valid
/// hard state; a hard state written afterwards ends that, and a compaction before it does not.
#[test]
fn wal2_repair_keeps_valid_records_and_makes_the_node_abstain() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let bytes = damage_newest_hard_state(dir.path());

    let RepairOutcome::Repaired(report) = repair(dir.path(), 1_700_000_000_123).unwrap() else {
        panic!("expected a repair");
    };
    assert_eq!(report.path, wal_path(dir.path()));
    assert_eq!(
        report.backup,
        dir.path().join("conclave.wal.damaged-1700000000123")
    );
    assert_eq!(fs::read(&report.backup).unwrap(), bytes);
    assert!(matches!(report.verdict, Verdict::Corrupt { .. }));
    let records = records_of(&sample_layout());
    assert_eq!(report.kept, records.len() as u64 - 1);
    assert_eq!(report.dropped.len(), 1);
    assert!(report.start.amnesic);
    assert_eq!(report.start.hard_state, hard(4, None));

    let repaired = read_records(dir.path()).unwrap();
    let mut expected = records[..records.len() - 1].to_vec();
    expected.push(WalRecord::Amnesia {
        at_unix_ms: 1_700_000_000_123,
    });
    assert_eq!(repaired, expected);
    assert_eq!(
        inspect(dir.path()).unwrap().examination.verdict,
        Verdict::Clean
    );

    // The node starts, amnesic, and stays so across restarts and compaction...
    let (mut wal, recovered) = open_counting(dir.path()).unwrap();
    assert!(recovered.amnesic);
    assert_eq!(recovered.hard_state, hard(4, None));
    wal.compact().unwrap();
    drop(wal);
    let (mut wal, again) = open_counting(dir.path()).unwrap();
    assert!(again.amnesic, "compaction keeps the amnesia marker");
    // ...until the election records a hard state after the marker.
    wal.append(&[WalRecord::HardState(hard(6, Some("gw-z")))])
        .unwrap();
    drop(wal);
    let (_, whole) = open_counting(dir.path()).unwrap();
    assert!(!whole.amnesic);
}

/// WAL-2: a record whose checksum matches but whose payload cannot be read is dropped by a
/// repair as well, and the records after it are kept.
#[test]
fn wal2_repair_drops_an_unreadable_record() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    drop(open_counting(dir.path()).unwrap());
    append_raw(dir.path(), &raw_record(1, &[5, 0, 0, 0, 0, 0, 0, 0, 7]));
    let mut tail = Vec::new();
    WalRecord::HardState(hard(2, Some("gw-a"))).encode_into(&mut tail);
    encode_seal(&mut tail);
    append_raw(dir.path(), &tail);
    assert!(matches!(
        open_counting(dir.path()),
        Err(WalError::BadRecord { .. })
    ));

    let RepairOutcome::Repaired(report) = repair(dir.path(), 5).unwrap() else {
        panic!("expected a repair");
    };
    assert_eq!((report.kept, report.unreadable), (2, 1));
    let (_, recovered) = open_counting(dir.path()).unwrap();
    assert!(recovered.amnesic);
    assert_eq!(recovered.hard_state, hard(2, Some("gw-a")));
}

/// WAL-1: the worked examples of `docs/wal.md` are what the encoder writes, byte for byte, so
/// the document cannot drift from the format.
#[test]
fn wal1_docs_worked_examples_match_the_encoder() {
    let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/wal.md"));
    let section = doc
        .split("### Worked examples")
        .nth(1)
        .and_then(|rest| rest.split("```text").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("docs/wal.md has a worked examples block");
    let documented: Vec<Vec<u8>> = section
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(_, hex)| {
            hex.split_whitespace()
                .map(|byte| u8::from_str_radix(byte, 16).unwrap())
                .collect()
        })
        .collect();

    let mut seal = Vec::new();
    encode_seal(&mut seal);
    let expected = vec![
        WalRecord::Incarnation(1).encode(),
        seal,
        WalRecord::HardState(hard(5, Some("gw-b"))).encode(),
        WalRecord::LeaderChange(HistoryRecord {
            term: 5,
            leader: Some(PeerId::from_static("gw-b")),
            cause: LeaderChangeCause::VoteWon,
            at_unix_ms: 1_700_000_000_000,
        })
        .encode(),
        WalRecord::AutoElection(false).encode(),
        WalRecord::Amnesia {
            at_unix_ms: 1_700_000_000_000,
        }
        .encode(),
        WalRecord::Mode(Mode::Static).encode(),
        WalRecord::Genesis {
            at_unix_ms: 1_700_000_000_000,
        }
        .encode(),
    ];
    assert_eq!(documented, expected);
    assert!(doc.contains("magic \"CWL1\" (43 57 4c 31)"));
    assert_eq!(MAGIC, [0x43, 0x57, 0x4c, 0x31]);
}

fn mode_records(dir: &Path) -> Vec<Mode> {
    read_records(dir)
        .unwrap()
        .into_iter()
        .filter_map(|record| match record {
            WalRecord::Mode(mode) => Some(mode),
            _ => None,
        })
        .collect()
}

/// Issue 9: the first start records the node's election mode once; a node of another mode is
/// refused with an error naming both modes and the file, and the file is left byte for byte
/// as it was; the same mode opens it again without recording the mode twice.
#[test]
fn wal_of_another_mode_is_refused() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, recovered) = WalFile::open_for_mode(dir.path(), Mode::Static).unwrap();
    assert_eq!(
        recovered.mode,
        Some(Mode::Static),
        "recorded at the first open"
    );
    wal.append(&[WalRecord::HardState(HardState {
        term: 1,
        vote: None,
        manual_override: None,
    })])
    .unwrap();
    drop(wal);
    assert_eq!(mode_records(dir.path()), vec![Mode::Static]);

    let before = fs::read(wal_path(dir.path())).unwrap();
    let err = WalFile::open_for_mode(dir.path(), Mode::Raft).unwrap_err();
    assert!(
        matches!(
            err,
            WalError::OtherMode {
                recorded: Mode::Static,
                configured: Mode::Raft,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    for part in [
        "written in static mode",
        "election.mode = \"raft\"",
        &wal_path(dir.path()).display().to_string(),
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), before);

    let (_wal, recovered) = WalFile::open_for_mode(dir.path(), Mode::Static).unwrap();
    assert_eq!(recovered.mode, Some(Mode::Static));
    assert_eq!(recovered.hard_state.term, 1);
    assert_eq!(mode_records(dir.path()), vec![Mode::Static]);
}

/// Issue 9: a file written before modes were recorded is raft's: a static node refuses it, a
/// raft node opens it and records the mode from then on. A file with no election state at all
/// (a node that never persisted anything) belongs to no mode yet.
#[test]
fn wal_without_a_mode_record_reads_as_raft() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = WalFile::open(dir.path()).unwrap();
    wal.append(&[WalRecord::HardState(HardState {
        term: 4,
        vote: Some(PeerId::from_static("gw-a")),
        manual_override: None,
    })])
    .unwrap();
    drop(wal);
    assert!(mode_records(dir.path()).is_empty());
    assert!(matches!(
        WalFile::open_for_mode(dir.path(), Mode::Static),
        Err(WalError::OtherMode {
            recorded: Mode::Raft,
            configured: Mode::Static,
            ..
        })
    ));
    let (_wal, recovered) = WalFile::open_for_mode(dir.path(), Mode::Raft).unwrap();
    assert_eq!(recovered.mode, Some(Mode::Raft));
    assert_eq!(recovered.hard_state.term, 4);
    drop(_wal);
    assert_eq!(mode_records(dir.path()), vec![Mode::Raft]);

    let fresh = tempfile::tempdir().unwrap();
    let (_wal, recovered) = WalFile::open(fresh.path()).unwrap();
    assert_eq!(recovered.mode, None);
    drop(_wal);
    let (_wal, recovered) = WalFile::open_for_mode(fresh.path(), Mode::Static).unwrap();
    assert_eq!(recovered.mode, Some(Mode::Static));
}

/// WAL-3, issue 9: compaction keeps the mode record.
#[test]
fn compaction_keeps_the_mode() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = WalFile::open_for_mode(dir.path(), Mode::Static).unwrap();
    wal.compact().unwrap();
    drop(wal);
    assert_eq!(mode_records(dir.path()), vec![Mode::Static]);
    assert!(WalFile::open_for_mode(dir.path(), Mode::Raft).is_err());
}

/// Opens `dir` as a node with `cluster.initial_state = "new"` does, incarnations counted.
fn open_new_member(dir: &Path) -> Result<(WalFile, Recovered), WalError> {
    WalFile::open_with(
        dir,
        WalOptions {
            incarnation_from_clock: false,
            mode: Some(Mode::Raft),
            genesis: true,
            ..WalOptions::default()
        },
    )
}

/// WAL-5: a node of a new cluster (`cluster.initial_state = "new"`) starting in a directory no
/// node used gets a genesis record: it is not amnesic, at that start, at the next, and after a
/// compaction that keeps the genesis; the directory was fresh only the first time.
#[test]
fn wal5_genesis_in_a_fresh_directory_ends_amnesia_for_good() {
    let _log = CapturedLog::default().install();
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let (wal, first) = open_new_member(&dir).unwrap();
    assert!(!first.amnesic);
    assert!(first.fresh_directory);
    assert!(first.genesis_at_unix_ms.is_some());
    assert_eq!(first.hard_state, HardState::default());
    drop(wal);

    let (mut wal, again) = open_new_member(&dir).unwrap();
    assert!(!again.amnesic);
    assert!(!again.fresh_directory);
    assert_eq!(again.genesis_at_unix_ms, first.genesis_at_unix_ms);
    wal.compact().unwrap();
    drop(wal);
    let (_, compacted) = open_new_member(&dir).unwrap();
    assert!(!compacted.amnesic, "compaction keeps the genesis");
    let genesis_records = read_records(&dir)
        .unwrap()
        .into_iter()
        .filter(|record| matches!(record, WalRecord::Genesis { .. }))
        .count();
    assert_eq!(genesis_records, 1);
}

/// WAL-5: the key is no way around a lost WAL. A directory whose WAL was deleted but whose
/// lock file remains — or which holds a repair's backup — gets no genesis: the node is
/// amnesic and abstains. Without the key, a fresh directory gets none either.
#[test]
fn wal5_no_genesis_where_an_earlier_node_ran_or_without_the_key() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = open_new_member(dir.path()).unwrap();
    wal.append(&[WalRecord::HardState(hard(3, Some("gw-b")))])
        .unwrap();
    drop(wal);
    fs::remove_file(wal_path(dir.path())).unwrap();
    let (_, wiped) = open_new_member(dir.path()).unwrap();
    assert!(wiped.amnesic);
    assert!(!wiped.fresh_directory);
    assert_eq!(wiped.genesis_at_unix_ms, None);

    let backup = tempfile::tempdir().unwrap();
    fs::write(
        backup.path().join("conclave.wal.damaged-1700000000000"),
        b"CWL1",
    )
    .unwrap();
    let (_, repaired) = open_new_member(backup.path()).unwrap();
    assert!(repaired.amnesic);
    assert_eq!(repaired.genesis_at_unix_ms, None);

    let plain = tempfile::tempdir().unwrap();
    let (_, existing) = open_counting(plain.path()).unwrap();
    assert!(existing.amnesic);
    assert!(existing.fresh_directory);
}

/// WAL-5: `conclave init` writes the mode and the genesis into a fresh directory and refuses
/// one a node has used — its WAL is there, or only its lock file is left — naming what it
/// found, without changing a byte.
#[test]
fn wal5_init_writes_a_genesis_and_refuses_a_used_directory() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let recovered = WalFile::init(dir.path(), Mode::Raft).unwrap();
    assert!(!recovered.amnesic);
    assert_eq!(recovered.mode, Some(Mode::Raft));
    let (_, started) = WalFile::open_for_mode(dir.path(), Mode::Raft).unwrap();
    assert!(!started.amnesic);

    let before = fs::read(wal_path(dir.path())).unwrap();
    let again = WalFile::init(dir.path(), Mode::Raft).unwrap_err();
    assert!(matches!(again, WalError::NotNew { .. }), "{again}");
    assert!(again.to_string().contains("it holds a WAL"), "{again}");
    assert_eq!(fs::read(wal_path(dir.path())).unwrap(), before);

    fs::remove_file(wal_path(dir.path())).unwrap();
    let lost = WalFile::init(dir.path(), Mode::Raft).unwrap_err();
    assert!(
        lost.to_string().contains("its WAL (conclave.wal) is gone"),
        "{lost}"
    );
    assert!(!wal_path(dir.path()).exists());
}

/// WAL-5, WAL-2: a repair of a WAL that began with a genesis makes the node amnesic like any
/// other repair, and a compaction keeps it so (the genesis no longer vouches for the votes).
#[test]
fn wal5_repair_after_a_genesis_is_amnesic_through_compaction() {
    let _log = CapturedLog::default().install();
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open_new_member(dir.path()).unwrap();
    drop(wal);
    let mut file = OpenOptions::new()
        .append(true)
        .open(wal_path(dir.path()))
        .unwrap();
    // An amnesia marker after the genesis, as `conclave wal repair` appends one.
    let mut marker = Vec::new();
    WalRecord::Amnesia { at_unix_ms: 7 }.encode_into(&mut marker);
    encode_seal(&mut marker);
    file.write_all(&marker).unwrap();
    drop(file);

    let (mut wal, recovered) = open_new_member(dir.path()).unwrap();
    assert!(recovered.amnesic);
    wal.compact().unwrap();
    drop(wal);
    let (_, compacted) = open_new_member(dir.path()).unwrap();
    assert!(
        compacted.amnesic,
        "compaction keeps the amnesia marker after the genesis"
    );
}
