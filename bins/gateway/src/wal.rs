//! `conclave wal inspect DIR` and `conclave wal repair DIR --confirm` (WAL-2): what an operator
//! does with a WAL the node refuses. `docs/wal.md` describes the procedure; the work is done by
//! `conclave_storage::{inspect, repair}`, this renders it.
//!
//! Exit codes: `inspect` 0 when a node can start from the file (clean, or a torn tail it cuts
//! off itself), 1 when it is corrupt or cannot be read; `repair` 0 when it repaired the file or
//! there was nothing to repair, 1 when it failed or was refused (a node holds the directory),
//! 64 without `--confirm` (it then only says what it would do). Both exit 66 (sysexits'
//! EX_NOINPUT) when there is no WAL to read: no such file or directory, or none in it.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use conclave_core::election::HardState;
use conclave_protocol::{EntryKind, PeerId};
use conclave_storage::{
    DamagedSpan, Examination, ExaminedRecord, Inspection, LogInspection, LogVerdict, RecordContent,
    RepairOutcome, RepairReport, SegmentContent, SegmentInspection, SnapshotFile, StartState,
    Verdict, WAL_FILE_NAME, WalRecord, inspect, repair,
};
use serde::Serialize;

use crate::EXIT_USAGE;
use crate::output::{err, errln};

/// `conclave wal inspect DIR`.
pub(crate) fn inspect_command(target: &Path, json: bool) -> ExitCode {
    if let Err(missing) = wal_present(target) {
        errln!("error: {missing}");
        return ExitCode::from(crate::EXIT_NOINPUT);
    }
    let inspection = match inspect(target) {
        Ok(inspection) => inspection,
        Err(err) => {
            errln!("error: {err}");
            return ExitCode::from(1);
        }
    };
    if json {
        print_json(&InspectJson::from(&inspection));
    } else {
        print_text(&render_inspection(&inspection));
    }
    if inspection.node_can_start() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `conclave wal repair DIR [--confirm]`.
pub(crate) fn repair_command(dir: &Path, confirm: bool, json: bool) -> ExitCode {
    // Before anything, taking the directory's lock included: that would create a lock file
    // in a directory that holds no WAL.
    if let Err(missing) = wal_present(dir) {
        errln!("error: {missing}");
        return ExitCode::from(crate::EXIT_NOINPUT);
    }
    if !confirm {
        return repair_plan(dir);
    }
    let outcome = match repair(dir, unix_millis_now()) {
        Ok(outcome) => outcome,
        Err(err) => {
            errln!("error: refusing to repair: {err}");
            return ExitCode::from(1);
        }
    };
    if json {
        print_json(&RepairJson::from(&outcome));
        return ExitCode::SUCCESS;
    }
    match outcome {
        RepairOutcome::NotNeeded(verdict) => {
            print_text(&format!("nothing to repair: {}\n", verdict_text(&verdict)));
        }
        RepairOutcome::Repaired(report) => print_text(&render_report(&report)),
    }
    ExitCode::SUCCESS
}

/// `Err` with what to say when `target` (a data directory, or a WAL file) holds no WAL to read.
fn wal_present(target: &Path) -> Result<(), String> {
    let wal = if target.is_dir() {
        target.join(WAL_FILE_NAME)
    } else {
        target.to_path_buf()
    };
    match std::fs::symlink_metadata(&wal) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(if wal == target {
            format!(
                "{}: no such file or directory (give the node's data directory, \
                 node.data_dir, or its WAL file)",
                target.display()
            )
        } else {
            format!(
                "no WAL in {} (no {WAL_FILE_NAME}): is it the node's data directory, \
                 node.data_dir, and has the node started there?",
                target.display()
            )
        }),
        // Anything else (no permission) is for the reading itself to report, in full.
        Err(_) => Ok(()),
    }
}

/// Without `--confirm`: what a repair would do, and nothing else.
fn repair_plan(dir: &Path) -> ExitCode {
    let inspection = match inspect(dir) {
        Ok(inspection) => inspection,
        Err(err) => {
            errln!("error: {err}");
            return ExitCode::from(1);
        }
    };
    let examination = &inspection.examination;
    if examination.verdict.allows_start() {
        print_text(&format!(
            "nothing to repair in {}: {}\n",
            inspection.path.display(),
            verdict_text(&examination.verdict)
        ));
        if let Some(LogVerdict::Refused(reason)) = inspection.log.as_ref().map(|log| &log.verdict) {
            errln!(
                "but the replicated log is damaged, and `conclave wal repair` does not rewrite \
                 log segments or snapshots: {reason}"
            );
            return ExitCode::from(1);
        }
        return ExitCode::SUCCESS;
    }
    let kept = examination
        .records
        .iter()
        .filter(|r| {
            !matches!(
                r.content,
                RecordContent::Seal | RecordContent::Unreadable(_)
            )
        })
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} is damaged: {}",
        inspection.path.display(),
        verdict_text(&examination.verdict)
    );
    let _ = writeln!(
        out,
        "`conclave wal repair {} --confirm` would, with no node running on the directory:",
        dir.display()
    );
    let _ = writeln!(
        out,
        "  - copy the file, as it is, to conclave.wal.damaged-<unix ms> beside it;"
    );
    let _ = writeln!(
        out,
        "  - write a new WAL with the {kept} valid records in order, dropping {} damaged \
         span(s) and any unreadable record;",
        examination.damage.len()
    );
    let _ = writeln!(
        out,
        "  - end it with an amnesia marker: at its next start the node abstains (no vote, no \
         campaign) until the other voters show which terms are over, because a dropped record \
         may have held its newest vote (docs/wal.md, \"Amnesia and abstention\")."
    );
    err!("{out}");
    ExitCode::from(EXIT_USAGE)
}

fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => print_text(&format!("{text}\n")),
        Err(err) => errln!("error: cannot encode the answer: {err}"),
    }
}

/// Prints to stdout (see [`crate::output`]).
fn print_text(text: &str) {
    crate::output::out!("{text}");
}

fn unix_millis_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

// ---------------------------------------------------------------------------------------------
// text

fn render_inspection(inspection: &Inspection) -> String {
    let examination = &inspection.examination;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "WAL {}, {} bytes\n",
        inspection.path.display(),
        examination.len
    );
    let _ = writeln!(out, "{:>8}  {:>5}  {:<16} CONTENT", "OFFSET", "#", "KIND");
    record_lines(&mut out, examination, describe);
    let _ = writeln!(out, "\nverdict     {}", verdict_text(&examination.verdict));
    if examination.verdict.allows_start() {
        let _ = writeln!(out, "start state {}", start_text(&inspection.start));
    } else {
        let _ = writeln!(out, "before it   {}", start_text(&inspection.start));
    }
    if !examination.verdict.allows_start() {
        let dir = inspection
            .path
            .parent()
            .unwrap_or(&inspection.path)
            .display();
        let _ = writeln!(
            out,
            "            the node refuses to start from this file; see docs/wal.md, then \
             `conclave wal repair {dir} --confirm`"
        );
    } else if inspection.start.amnesic {
        let _ = writeln!(
            out,
            "            a voter starting from this file abstains (no vote, no campaign) until the \
             other voters show which terms are over (docs/wal.md)"
        );
    }
    if let Some(log) = &inspection.log {
        out.push_str(&render_log(log));
    }
    out
}

/// The replicated log's part of `conclave wal inspect`: each segment with a summary line and
/// its records, the snapshot files, and what a starting node makes of them.
fn render_log(log: &LogInspection) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nlog {}, {} segment(s), {} snapshot file(s)",
        log.dir.display(),
        log.segments.len(),
        log.snapshots.len()
    );
    for segment in &log.segments {
        let name = segment
            .path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let _ = writeln!(
            out,
            "\nsegment {name}, {} bytes: {}",
            segment.size_bytes,
            segment_summary(segment)
        );
        if let Err(reason) = segment.header {
            let _ = writeln!(out, "  BAD HEADER: {reason}");
            continue;
        }
        let _ = writeln!(out, "{:>8}  {:>5}  {:<16} CONTENT", "OFFSET", "#", "KIND");
        let examination = &segment.examination;
        record_lines(&mut out, examination, |record| {
            describe_segment_record(&record.content, record.kind)
        });
        let _ = writeln!(out, "verdict     {}", verdict_text(&examination.verdict));
    }
    for snapshot in &log.snapshots {
        let _ = writeln!(
            out,
            "\nsnapshot {}, {} bytes: {}",
            snapshot.path.display(),
            snapshot.size_bytes,
            match snapshot.content {
                Ok(last) => format!(
                    "covers the log up to index {}, term {}",
                    last.index, last.term
                ),
                Err(reason) => format!("DAMAGED: {reason}"),
            }
        );
    }
    let _ = writeln!(out, "\nlog verdict {}", log_verdict_text(&log.verdict));
    out
}

/// First and last entry written in a segment, and how many: what it holds at a glance.
fn segment_summary(segment: &SegmentInspection) -> String {
    let written = segment
        .examination
        .records
        .iter()
        .filter_map(|record| match &record.content {
            SegmentContent::Entries(entries) => Some(entries),
            _ => None,
        });
    let mut count = 0usize;
    let mut first = None;
    let mut last = None;
    for entries in written {
        count += entries.len();
        first = first.or_else(|| entries.first());
        last = entries.last().or(last);
    }
    match (first, last) {
        (Some(first), Some(last)) => format!(
            "sequence {}, entries written {count}: first {} (term {}), last {} (term {})",
            segment.sequence, first.index, first.term, last.index, last.term
        ),
        _ => format!("sequence {}, no entries", segment.sequence),
    }
}

fn describe_segment_record(content: &SegmentContent, kind: u8) -> (&'static str, String) {
    match content {
        SegmentContent::Entries(entries) => match (entries.first(), entries.last()) {
            (Some(first), Some(last)) => (
                "entries",
                format!(
                    "{}..={} (terms {}..={}), {} bytes of data; replaces every entry from {} on",
                    first.index,
                    last.index,
                    first.term,
                    last.term,
                    entries.iter().map(|entry| entry.data.len()).sum::<usize>(),
                    first.index
                ),
            ),
            _ => ("entries", "none".to_owned()),
        },
        SegmentContent::Seal => ("seal", String::new()),
        SegmentContent::Unreadable(reason) => (
            "UNREADABLE",
            format!("kind {kind}: {reason} (the checksum matches)"),
        ),
    }
}

fn log_verdict_text(verdict: &LogVerdict) -> String {
    match verdict {
        LogVerdict::Starts {
            snapshot,
            entries,
            count,
            torn_tail_bytes,
            removes_newest,
        } => {
            let mut text = match snapshot {
                Some(last) => format!("snapshot at index {}, term {}; ", last.index, last.term),
                None => "no snapshot; ".to_owned(),
            };
            match entries {
                Some((first, last)) => {
                    let _ = write!(
                        text,
                        "entries {} (term {}) to {} (term {}), {count} in all",
                        first.index, first.term, last.index, last.term
                    );
                }
                None => text.push_str("no entries after it"),
            }
            if *torn_tail_bytes > 0 {
                let _ = write!(
                    text,
                    "; a starting node cuts a torn tail of {torn_tail_bytes} bytes off the \
                     newest segment"
                );
            }
            if *removes_newest {
                text.push_str(
                    "; a starting node removes the newest segment, whose creation was \
                     interrupted before it held an entry",
                );
            }
            text
        }
        LogVerdict::Refused(reason) => format!("REFUSED: {reason}"),
    }
}

/// One line per record of a WAL file or a log segment, in file order, with the damaged spans
/// between them where they lie: what `wal inspect` prints for each file.
fn record_lines<C>(
    out: &mut String,
    examination: &Examination<C>,
    describe: impl Fn(&ExaminedRecord<C>) -> (&'static str, String),
) {
    let mut damage = examination.damage.iter().peekable();
    for record in &examination.records {
        while let Some(span) = damage.next_if(|span| span.offset < record.offset) {
            out.push_str(&damage_line(span));
        }
        let (kind, content) = describe(record);
        let after = if record.after_damage {
            " (after damage)"
        } else {
            ""
        };
        let body = if content.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind:<16} {content}")
        };
        let _ = writeln!(
            out,
            "{:>8}  {:>5}  {body}{after}",
            record.offset, record.number
        );
    }
    for span in damage {
        out.push_str(&damage_line(span));
    }
}

fn damage_line(span: &DamagedSpan) -> String {
    format!(
        "{:>8}  {:>5}  {:<16} {} bytes: {}\n",
        span.offset,
        span.record,
        "DAMAGED",
        span.end - span.offset,
        span.reason
    )
}

/// The kind's name and the decoded content of one record.
fn describe(record: &ExaminedRecord) -> (&'static str, String) {
    match &record.content {
        RecordContent::Record(WalRecord::HardState(state)) => ("hard state", hard_text(state)),
        RecordContent::Record(WalRecord::Incarnation(incarnation)) => {
            ("incarnation", incarnation.to_string())
        }
        RecordContent::Record(WalRecord::LeaderChange(change)) => (
            "leader change",
            format!(
                "term {}, leader {}, {}, {}",
                change.term,
                peer_text(change.leader),
                change.cause.label(),
                utc_text(change.at_unix_ms)
            ),
        ),
        RecordContent::Record(WalRecord::Amnesia { at_unix_ms }) => (
            "amnesia marker",
            format!(
                "{}: votes may be missing before this; a voter abstains until a hard state \
                 follows",
                utc_text(*at_unix_ms)
            ),
        ),
        RecordContent::Record(WalRecord::AutoElection(enabled)) => (
            "auto-election",
            if *enabled { "on" } else { "off" }.to_owned(),
        ),
        RecordContent::Record(WalRecord::Mode(mode)) => ("election mode", mode.label().to_owned()),
        RecordContent::Record(WalRecord::Genesis { at_unix_ms }) => (
            "genesis",
            format!(
                "{}: created for a new cluster; the node had voted in no term before",
                utc_text(*at_unix_ms)
            ),
        ),
        RecordContent::Seal => ("seal", String::new()),
        RecordContent::UnknownKind => (
            "unknown",
            format!(
                "kind {}, {} bytes (a newer version's; skipped)",
                record.kind, record.length
            ),
        ),
        RecordContent::UnknownCause(index) => (
            "leader change",
            format!("cause {index} unknown to this version (skipped)"),
        ),
        RecordContent::Unreadable(reason) => (
            "UNREADABLE",
            format!("kind {}: {reason} (the checksum matches)", record.kind),
        ),
    }
}

fn hard_text(state: &HardState) -> String {
    format!(
        "term {}, vote {}, pinned {}",
        state.term,
        peer_text(state.vote),
        peer_text(state.manual_override)
    )
}

fn peer_text(peer: Option<PeerId>) -> String {
    peer.map_or_else(|| "none".to_owned(), |peer| peer.to_string())
}

fn verdict_text(verdict: &Verdict) -> String {
    match *verdict {
        Verdict::Clean => "clean".to_owned(),
        Verdict::TornTail {
            offset,
            bytes,
            reason,
        } => format!(
            "torn tail of {bytes} bytes at byte {offset} ({reason}); a starting node cuts it off"
        ),
        Verdict::Corrupt {
            offset,
            record,
            reason,
            next_valid,
        } => format!(
            "CORRUPT at byte {offset}: record {record} is damaged ({reason}); the next valid \
             record is at byte {next_valid}"
        ),
        Verdict::Unreadable {
            offset,
            record,
            kind,
            reason,
        } => format!(
            "CORRUPT at byte {offset}: record {record} (kind {kind}) has a valid checksum but \
             cannot be read ({reason})"
        ),
    }
}

fn start_text(start: &StartState) -> String {
    let auto = match start.auto_election {
        Some(true) => "on (set by the operator)",
        Some(false) => "off (set by the operator)",
        None => "from the configuration",
    };
    let amnesic = if start.amnesic {
        "; amnesic: no hard state since the file began or its last amnesia marker"
    } else {
        ""
    };
    let mode = start.mode.map_or("none yet", |mode| mode.label());
    format!(
        "mode {}; {}; incarnation {}; automatic election {auto}; {} history records{amnesic}",
        mode,
        hard_text(&start.hard_state),
        start.incarnation,
        start.history.len()
    )
}

fn render_report(report: &RepairReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "repaired    {}", report.path.display());
    let _ = writeln!(out, "was         {}", verdict_text(&report.verdict));
    let _ = writeln!(
        out,
        "backup      {} (the damaged file, unchanged)",
        report.backup.display()
    );
    let _ = writeln!(out, "kept        {} records", report.kept);
    let spans: Vec<String> = report
        .dropped
        .iter()
        .map(|span| format!("bytes {}..{} ({})", span.offset, span.end, span.reason))
        .collect();
    let _ = writeln!(
        out,
        "dropped     {} damaged span(s){}{}, {} unreadable record(s)",
        spans.len(),
        if spans.is_empty() { "" } else { ": " },
        spans.join(", "),
        report.unreadable
    );
    let _ = writeln!(
        out,
        "next start  {}; the node abstains (no vote, no campaign) until the other voters \
         show which terms are over (docs/wal.md)",
        hard_text(&report.start.hard_state)
    );
    out
}

/// A UTC time for people: `2023-11-14T22:13:20.123Z`, as the admin API writes times.
fn utc_text(unix_ms: u64) -> String {
    conclave_api::rfc3339_utc(unix_ms)
}

// ---------------------------------------------------------------------------------------------
// JSON

#[derive(Debug, Serialize)]
struct InspectJson {
    path: String,
    size_bytes: u64,
    records: Vec<RecordJson>,
    damage: Vec<DamageJson>,
    verdict: VerdictJson,
    node_can_start: bool,
    start: StartJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    log: Option<LogJson>,
}

impl From<&Inspection> for InspectJson {
    fn from(inspection: &Inspection) -> Self {
        let examination = &inspection.examination;
        Self {
            path: inspection.path.display().to_string(),
            size_bytes: examination.len,
            records: examination.records.iter().map(RecordJson::from).collect(),
            damage: examination.damage.iter().map(DamageJson::from).collect(),
            verdict: VerdictJson::from(examination.verdict),
            node_can_start: inspection.node_can_start(),
            start: StartJson::from(&inspection.start),
            log: inspection.log.as_ref().map(LogJson::from),
        }
    }
}

#[derive(Debug, Serialize)]
struct LogJson {
    dir: String,
    segments: Vec<SegmentJson>,
    snapshots: Vec<SnapshotJson>,
    verdict: LogVerdictJson,
}

impl From<&LogInspection> for LogJson {
    fn from(log: &LogInspection) -> Self {
        Self {
            dir: log.dir.display().to_string(),
            segments: log.segments.iter().map(SegmentJson::from).collect(),
            snapshots: log.snapshots.iter().map(SnapshotJson::from).collect(),
            verdict: LogVerdictJson::from(&log.verdict),
        }
    }
}

#[derive(Debug, Serialize)]
struct SegmentJson {
    path: String,
    sequence: u64,
    first_index: u64,
    size_bytes: u64,
    bad_header: Option<&'static str>,
    records: Vec<SegmentRecordJson>,
    damage: Vec<DamageJson>,
    verdict: VerdictJson,
}

impl From<&SegmentInspection> for SegmentJson {
    fn from(segment: &SegmentInspection) -> Self {
        let examination = &segment.examination;
        Self {
            path: segment.path.display().to_string(),
            sequence: segment.sequence,
            first_index: segment.first_index,
            size_bytes: segment.size_bytes,
            bad_header: segment.header.err(),
            records: examination
                .records
                .iter()
                .map(|record| SegmentRecordJson {
                    offset: record.offset,
                    number: record.number,
                    kind: record.kind,
                    length: record.length,
                    after_damage: record.after_damage,
                    content: SegmentContentJson::from(&record.content),
                })
                .collect(),
            damage: examination.damage.iter().map(DamageJson::from).collect(),
            verdict: VerdictJson::from(examination.verdict),
        }
    }
}

#[derive(Debug, Serialize)]
struct SegmentRecordJson {
    offset: u64,
    number: u64,
    kind: u8,
    length: u32,
    after_damage: bool,
    content: SegmentContentJson,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum SegmentContentJson {
    Entries { entries: Vec<EntryJson> },
    Seal,
    Unreadable { reason: &'static str },
}

#[derive(Debug, Serialize)]
struct EntryJson {
    index: u64,
    term: u64,
    kind: &'static str,
    data_bytes: usize,
}

impl From<&SegmentContent> for SegmentContentJson {
    fn from(content: &SegmentContent) -> Self {
        match content {
            SegmentContent::Entries(entries) => SegmentContentJson::Entries {
                entries: entries
                    .iter()
                    .map(|entry| EntryJson {
                        index: entry.index,
                        term: entry.term,
                        kind: match entry.kind {
                            EntryKind::Noop => "noop",
                            EntryKind::Command => "command",
                            EntryKind::Config => "config",
                        },
                        data_bytes: entry.data.len(),
                    })
                    .collect(),
            },
            SegmentContent::Seal => SegmentContentJson::Seal,
            SegmentContent::Unreadable(reason) => SegmentContentJson::Unreadable { reason },
        }
    }
}

#[derive(Debug, Serialize)]
struct SnapshotJson {
    path: String,
    size_bytes: u64,
    last_index: Option<u64>,
    last_term: Option<u64>,
    damaged: Option<&'static str>,
}

impl From<&SnapshotFile> for SnapshotJson {
    fn from(snapshot: &SnapshotFile) -> Self {
        let last = snapshot.content.ok();
        Self {
            path: snapshot.path.display().to_string(),
            size_bytes: snapshot.size_bytes,
            last_index: last.map(|last| last.index),
            last_term: last.map(|last| last.term),
            damaged: snapshot.content.err(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
enum LogVerdictJson {
    Starts {
        snapshot_index: Option<u64>,
        snapshot_term: Option<u64>,
        first_index: Option<u64>,
        last_index: Option<u64>,
        last_term: Option<u64>,
        entries: u64,
        torn_tail_bytes: u64,
        removes_newest_segment: bool,
    },
    Refused {
        reason: String,
    },
}

impl From<&LogVerdict> for LogVerdictJson {
    fn from(verdict: &LogVerdict) -> Self {
        match verdict {
            LogVerdict::Starts {
                snapshot,
                entries,
                count,
                torn_tail_bytes,
                removes_newest,
            } => LogVerdictJson::Starts {
                snapshot_index: snapshot.map(|last| last.index),
                snapshot_term: snapshot.map(|last| last.term),
                first_index: entries.map(|(first, _)| first.index),
                last_index: entries.map(|(_, last)| last.index),
                last_term: entries.map(|(_, last)| last.term),
                entries: *count,
                torn_tail_bytes: *torn_tail_bytes,
                removes_newest_segment: *removes_newest,
            },
            LogVerdict::Refused(reason) => LogVerdictJson::Refused {
                reason: reason.clone(),
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct RecordJson {
    offset: u64,
    number: u64,
    kind: u8,
    length: u32,
    after_damage: bool,
    content: ContentJson,
}

impl From<&ExaminedRecord> for RecordJson {
    fn from(record: &ExaminedRecord) -> Self {
        Self {
            offset: record.offset,
            number: record.number,
            kind: record.kind,
            length: record.length,
            after_damage: record.after_damage,
            content: ContentJson::from(&record.content),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentJson {
    HardState {
        term: u64,
        vote: Option<String>,
        manual_override: Option<String>,
    },
    Incarnation {
        incarnation: u64,
    },
    LeaderChange {
        term: u64,
        leader: Option<String>,
        cause: &'static str,
        at_unix_ms: u64,
    },
    RepairMarker {
        at_unix_ms: u64,
    },
    Genesis {
        at_unix_ms: u64,
    },
    AutoElection {
        enabled: bool,
    },
    ElectionMode {
        mode: &'static str,
    },
    Seal,
    UnknownKind,
    UnknownCause {
        cause_index: u8,
    },
    Unreadable {
        reason: &'static str,
    },
}

fn peer_json(peer: Option<PeerId>) -> Option<String> {
    peer.map(|peer| peer.to_string())
}

impl From<&RecordContent> for ContentJson {
    fn from(content: &RecordContent) -> Self {
        match content {
            RecordContent::Record(WalRecord::HardState(state)) => ContentJson::HardState {
                term: state.term,
                vote: peer_json(state.vote),
                manual_override: peer_json(state.manual_override),
            },
            RecordContent::Record(WalRecord::Incarnation(incarnation)) => {
                ContentJson::Incarnation {
                    incarnation: *incarnation,
                }
            }
            RecordContent::Record(WalRecord::LeaderChange(change)) => ContentJson::LeaderChange {
                term: change.term,
                leader: peer_json(change.leader),
                cause: change.cause.label(),
                at_unix_ms: change.at_unix_ms,
            },
            RecordContent::Record(WalRecord::Amnesia { at_unix_ms }) => ContentJson::RepairMarker {
                at_unix_ms: *at_unix_ms,
            },
            RecordContent::Record(WalRecord::Genesis { at_unix_ms }) => ContentJson::Genesis {
                at_unix_ms: *at_unix_ms,
            },
            RecordContent::Record(WalRecord::AutoElection(enabled)) => {
                ContentJson::AutoElection { enabled: *enabled }
            }
            RecordContent::Record(WalRecord::Mode(mode)) => {
                ContentJson::ElectionMode { mode: mode.label() }
            }
            RecordContent::Seal => ContentJson::Seal,
            RecordContent::UnknownKind => ContentJson::UnknownKind,
            RecordContent::UnknownCause(index) => ContentJson::UnknownCause {
                cause_index: *index,
            },
            RecordContent::Unreadable(reason) => ContentJson::Unreadable { reason },
        }
    }
}

#[derive(Debug, Serialize)]
struct DamageJson {
    offset: u64,
    record: u64,
    end: u64,
    reason: &'static str,
}

impl From<&DamagedSpan> for DamageJson {
    fn from(span: &DamagedSpan) -> Self {
        Self {
            offset: span.offset,
            record: span.record,
            end: span.end,
            reason: span.reason,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
enum VerdictJson {
    Clean,
    TornTail {
        offset: u64,
        bytes: u64,
        reason: &'static str,
    },
    Corrupt {
        offset: u64,
        record: u64,
        reason: &'static str,
        next_valid: u64,
    },
    Unreadable {
        offset: u64,
        record: u64,
        kind: u8,
        reason: &'static str,
    },
}

impl From<Verdict> for VerdictJson {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Clean => VerdictJson::Clean,
            Verdict::TornTail {
                offset,
                bytes,
                reason,
            } => VerdictJson::TornTail {
                offset,
                bytes,
                reason,
            },
            Verdict::Corrupt {
                offset,
                record,
                reason,
                next_valid,
            } => VerdictJson::Corrupt {
                offset,
                record,
                reason,
                next_valid,
            },
            Verdict::Unreadable {
                offset,
                record,
                kind,
                reason,
            } => VerdictJson::Unreadable {
                offset,
                record,
                kind,
                reason,
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct StartJson {
    term: u64,
    vote: Option<String>,
    manual_override: Option<String>,
    amnesic: bool,
    incarnation: u64,
    auto_election: Option<bool>,
    history_records: usize,
}

impl From<&StartState> for StartJson {
    fn from(start: &StartState) -> Self {
        Self {
            term: start.hard_state.term,
            vote: peer_json(start.hard_state.vote),
            manual_override: peer_json(start.hard_state.manual_override),
            amnesic: start.amnesic,
            incarnation: start.incarnation,
            auto_election: start.auto_election,
            history_records: start.history.len(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum RepairJson {
    NotNeeded {
        verdict: VerdictJson,
    },
    Repaired {
        path: String,
        backup: String,
        was: VerdictJson,
        kept: u64,
        unreadable: u64,
        dropped: Vec<DamageJson>,
        start: StartJson,
    },
}

impl From<&RepairOutcome> for RepairJson {
    fn from(outcome: &RepairOutcome) -> Self {
        match outcome {
            RepairOutcome::NotNeeded(verdict) => RepairJson::NotNeeded {
                verdict: VerdictJson::from(*verdict),
            },
            RepairOutcome::Repaired(report) => RepairJson::Repaired {
                path: report.path.display().to_string(),
                backup: report.backup.display().to_string(),
                was: VerdictJson::from(report.verdict),
                kept: report.kept,
                unreadable: report.unreadable,
                dropped: report.dropped.iter().map(DamageJson::from).collect(),
                start: StartJson::from(&report.start),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(first: u64, last: u64, term: u64) -> Vec<conclave_protocol::LogEntry> {
        (first..=last)
            .map(|index| conclave_protocol::LogEntry {
                index,
                term,
                kind: EntryKind::Command,
                data: vec![7; 3],
            })
            .collect()
    }

    /// LOG-2, LOG-4: `conclave wal inspect` shows each segment with its first and last entry,
    /// its entries records, the snapshot and what a node starts from; a damaged segment makes
    /// the log's verdict a refusal, named, and the exit code 1.
    #[test]
    fn inspect_shows_the_log_segments_entries_and_snapshot() {
        use conclave_core::raft::LogPosition;
        use conclave_core::storage::{Snapshot, Storage};

        let dir = tempfile::tempdir().unwrap();
        let options = conclave_storage::WalOptions {
            segment_size: 64,
            ..conclave_storage::WalOptions::default()
        };
        let (mut wal, _) = conclave_storage::WalFile::open_with(dir.path(), options).unwrap();
        for (first, last) in [(1, 3), (4, 6), (7, 9)] {
            wal.append_entries(&entries(first, last, 2)).unwrap();
            wal.sync().unwrap();
        }
        wal.append_entries(&entries(8, 8, 3)).unwrap();
        wal.sync().unwrap();
        wal.save_snapshot(Snapshot {
            last: LogPosition::new(2, 5),
            data: b"image".to_vec().into(),
            config: None,
        })
        .unwrap();
        drop(wal);

        let inspection = inspect(dir.path()).unwrap();
        assert!(inspection.node_can_start());
        let text = render_inspection(&inspection);
        assert!(text.contains("log "), "{text}");
        assert!(
            text.contains("entries written 1: first 8 (term 3), last 8 (term 3)"),
            "{text}"
        );
        assert!(
            text.contains("8..=8 (terms 3..=3), 3 bytes of data; replaces every entry from 8 on"),
            "{text}"
        );
        assert!(
            text.contains("covers the log up to index 5, term 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "log verdict snapshot at index 5, term 2; entries 6 (term 2) to 8 (term 3), 3 in all"
            ),
            "{text}"
        );
        let json = serde_json::to_value(InspectJson::from(&inspection)).unwrap();
        assert_eq!(json["log"]["verdict"]["last_index"], 8);

        let log = inspection.log.unwrap();
        let newest = &log.segments.last().unwrap().path;
        let mut bytes = std::fs::read(newest).unwrap();
        bytes[20] ^= 1;
        std::fs::write(newest, &bytes).unwrap();
        let inspection = inspect(dir.path()).unwrap();
        assert!(!inspection.node_can_start());
        let text = render_inspection(&inspection);
        assert!(text.contains("log verdict REFUSED: log file"), "{text}");
        assert!(text.contains(&newest.display().to_string()), "{text}");
    }

    #[test]
    fn utc_text_is_iso_8601() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_text(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
