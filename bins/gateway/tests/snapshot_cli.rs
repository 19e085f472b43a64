//! `conclave snapshot status` and `conclave snapshot restore` on files, without a node
//! (MEMB-6): a whole saved snapshot is described (index, term, checksum, what the store holds);
//! a truncated, damaged or foreign file is refused with exit 1 and a message that names the
//! problem, never a panic; a missing file is exit 66. `restore` seeds an empty data directory
//! so that a node starts from the snapshot, and refuses — changing nothing — a damaged file, a
//! configuration without the replicated log, and a data directory that is not empty.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use conclave_actors::machine::ClusterMachine;
use conclave_core::election::Mode;
use conclave_core::raft::LogPosition;
use conclave_protocol::{ClusterId, EntryKind, LogEntry};
use conclave_statemachine::{Command, KvCommand, Write};
use conclave_storage::{SnapshotBackup, WalFile};
use serde_json::Value;
use support::{conclave, text};

const INDEX: u64 = 4;
const TERM: u64 = 2;

/// The image of a state machine that applied a leader's no-op and three puts (index 4).
fn image() -> Vec<u8> {
    let mut machine = ClusterMachine::new();
    machine.apply(&LogEntry {
        index: 1,
        term: TERM,
        kind: EntryKind::Noop,
        data: Vec::new(),
    });
    for (index, key) in (2..=INDEX).zip(["config/db", "config/cache", "leader/lease"]) {
        let put = Command::new(Write::Kv(KvCommand::Put {
            key: key.to_owned(),
            value: format!("value of {key}"),
            if_revision: None,
            if_value: None,
            session: None,
        }));
        machine.apply(&LogEntry {
            index,
            term: TERM,
            kind: EntryKind::Command,
            data: put.encode().unwrap(),
        });
    }
    machine.snapshot().unwrap()
}

/// A saved snapshot of `image` at `index`.
fn saved(image: Vec<u8>, index: u64) -> (Vec<u8>, String) {
    let (bytes, checksum) = SnapshotBackup {
        cluster: Some(ClusterId::new("backup-test").unwrap()),
        last: LogPosition::new(TERM, index),
        taken_at_unix_ms: 1_764_316_800_000,
        image,
    }
    .encode();
    (bytes, checksum.to_string())
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// `conclave ARGS`: exit code, standard output, standard error.
fn run(args: &[&str]) -> (i32, String, String) {
    let output = conclave(args);
    (
        output.status.code().unwrap_or(-1),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// MEMB-6: `status` on a whole file says what it holds, as text and as JSON, exit 0.
#[test]
fn memb6_status_describes_a_whole_saved_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, checksum) = saved(image(), INDEX);
    let file = write(dir.path(), "good.snapshot", &bytes);

    let (code, stdout, stderr) = run(&["snapshot", "status", &file]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for expected in [
        "a whole saved snapshot",
        "backup-test",
        "index      4 (term 2)",
        "2025-11-28T08:00:00",
        &checksum,
        "3 keys at revision 3",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in {stdout}");
    }

    let (code, stdout, _) = run(&["snapshot", "status", &file, "--json"]);
    assert_eq!(code, 0);
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["valid"], true);
    assert_eq!(
        (answer["index"].as_u64(), answer["term"].as_u64()),
        (Some(INDEX), Some(TERM))
    );
    assert_eq!(answer["sha256"], checksum.as_str());
    assert_eq!(answer["size_bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(
        (answer["keys"].as_u64(), answer["revision"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(answer["cluster_id"], "backup-test");
}

/// MEMB-6: truncated, damaged and foreign files are refused with exit 1, the problem named on
/// standard error (and, with --json, in `problem`); a missing file is exit 66.
#[test]
fn memb6_status_refuses_damaged_files_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = saved(image(), INDEX);
    let mut flipped = bytes.clone();
    let in_image = bytes.len() - 40;
    flipped[in_image] ^= 0x10;
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"\n");
    let (garbage_image, _) = saved(b"\x01not messagepack".to_vec(), INDEX);
    let (wrong_index, _) = saved(image(), INDEX + 1);
    let cases: [(&str, Vec<u8>, &str); 9] = [
        ("empty", Vec::new(), "empty"),
        ("cut-in-magic", bytes[..5].to_vec(), "truncated"),
        ("cut-in-header", bytes[..30].to_vec(), "truncated"),
        (
            "cut-in-image",
            bytes[..bytes.len() - 50].to_vec(),
            "truncated",
        ),
        (
            "cut-in-checksum",
            bytes[..bytes.len() - 1].to_vec(),
            "truncated",
        ),
        ("flipped", flipped, "checksum mismatch"),
        ("longer", longer, "1 bytes after the end"),
        ("garbage-image", garbage_image, "image does not decode"),
        ("wrong-index", wrong_index, "stands at log index 4"),
    ];
    for (name, content, problem) in cases {
        let file = write(dir.path(), name, &content);
        let (code, stdout, stderr) = run(&["snapshot", "status", &file]);
        assert_eq!(code, 1, "{name}: {stdout}{stderr}");
        assert!(
            stderr.contains("is not a whole saved snapshot") && stderr.contains(problem),
            "{name}: {problem:?} in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        let (code, stdout, _) = run(&["snapshot", "status", &file, "--json"]);
        assert_eq!(code, 1);
        let answer: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(answer["valid"], false, "{name}");
        assert!(
            answer["problem"].as_str().unwrap().contains(problem),
            "{name}: {answer}"
        );
    }

    let readme = write(dir.path(), "notes.txt", b"not a snapshot at all\n");
    let (code, _, stderr) = run(&["snapshot", "status", &readme]);
    assert_eq!(code, 1);
    assert!(stderr.contains("not a saved conclave snapshot"), "{stderr}");

    let missing = dir.path().join("missing.snapshot");
    let (code, _, stderr) = run(&["snapshot", "status", &missing.display().to_string()]);
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
}

/// A node's configuration with its data directory at `data_dir`, with the replicated log or
/// without.
fn config(dir: &Path, data_dir: &Path, log: bool) -> String {
    let text = format!(
        "[node]\nid = \"gw-a\"\ndata_dir = {:?}\n\n[cluster]\nid = \"restored\"\nvoters = \
         [\"gw-a\", \"gw-b\", \"gw-c\"]\n\n[log]\nenabled = {log}\n",
        data_dir.display().to_string()
    );
    write(dir, &format!("node-{log}.toml"), text.as_bytes())
}

/// MEMB-6: `restore` seeds an empty data directory that a node starts from; it refuses a
/// damaged file, a configuration without the log and a directory that is not empty, and
/// writes nothing then.
#[test]
fn memb6_restore_seeds_an_empty_directory_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir: PathBuf = dir.path().join("gw-a.data");
    let (bytes, _) = saved(image(), INDEX);
    let good = write(dir.path(), "good.snapshot", &bytes);
    let damaged = write(dir.path(), "cut.snapshot", &bytes[..bytes.len() / 2]);
    let with_log = config(dir.path(), &data_dir, true);
    let without_log = config(dir.path(), &data_dir, false);

    let (code, _, stderr) = run(&["snapshot", "restore", &damaged, "--config", &with_log]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("truncated"), "{stderr}");
    let (code, _, stderr) = run(&["snapshot", "restore", &good, "--config", &without_log]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("log.enabled = true"), "{stderr}");
    let (code, _, stderr) = run(&["snapshot", "restore", &good]);
    assert_eq!(code, 64, "--config is required: {stderr}");
    assert!(!data_dir.exists(), "a refused restore wrote nothing");

    let (code, stdout, stderr) = run(&["snapshot", "restore", &good, "--config", &with_log]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("restored") && stdout.contains("gw-a, gw-b, gw-c"),
        "{stdout}"
    );
    // The snapshot came from another cluster: no warning about a shared id.
    assert!(!stderr.contains("warning"), "{stderr}");
    {
        let (_wal, recovered) = WalFile::open_for_mode(&data_dir, Mode::Raft).unwrap();
        let snapshot = recovered.snapshot.unwrap();
        assert_eq!(snapshot.last, LogPosition::new(TERM, INDEX));
        assert_eq!(snapshot.data, image());
        assert_eq!(
            (recovered.hard_state.term, recovered.amnesic),
            (TERM, false)
        );
    }

    let (code, _, stderr) = run(&["snapshot", "restore", &good, "--config", &with_log]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");
}
