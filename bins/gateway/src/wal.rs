//! `conclave wal inspect DIR` and `conclave wal repair DIR --confirm` (WAL-2): what an operator
//! does with a WAL the node refuses. `docs/wal.md` describes the procedure; the work is done by
//! `conclave_storage::{inspect, repair}`, this renders it.
//!
//! Exit codes: `inspect` 0 when a node can start from the file (clean, or a torn tail it cuts
//! off itself), 1 when it is corrupt or cannot be read; `repair` 0 when it repaired the file or
//! there was nothing to repair, 1 when it failed or was refused (a node holds the directory),
//! 64 without `--confirm` (it then only says what it would do).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use conclave_core::election::HardState;
use conclave_protocol::PeerId;
use conclave_storage::{
    DamagedSpan, ExaminedRecord, Inspection, RecordContent, RepairOutcome, RepairReport,
    StartState, Verdict, WalRecord, inspect, repair,
};
use serde::Serialize;

use crate::EXIT_USAGE;
use crate::output::{err, errln};

/// `conclave wal inspect DIR`.
pub(crate) fn inspect_command(target: &Path, json: bool) -> ExitCode {
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
    if inspection.examination.verdict.allows_start() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `conclave wal repair DIR [--confirm]`.
pub(crate) fn repair_command(dir: &Path, confirm: bool, json: bool) -> ExitCode {
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
    out
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

/// A UTC time for people: `2023-11-14T22:13:20.123Z`.
fn utc_text(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        unix_ms % 1000
    )
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
            node_can_start: examination.verdict.allows_start(),
            start: StartJson::from(&inspection.start),
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

    #[test]
    fn utc_text_is_iso_8601() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_text(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
