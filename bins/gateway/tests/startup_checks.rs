//! What `conclave check-config` and `conclave run` say about a node that cannot start, and the
//! exit codes that tell a service manager whether restarting can help (issue 15, items 4 and
//! 5; docs/design.md §9, WAL-2):
//!
//! - check-config prints every problem in one pass, an unknown quorum and a heartbeat above
//!   the election timeout together; it warns, as `run` does, when `node.id` is not among
//!   `cluster.voters`;
//! - it says what `run` will refuse in `node.data_dir`: a damaged WAL, a WAL of another mode, a
//!   directory that cannot be created or written;
//! - `run` exits 65 (EX_DATAERR) on a damaged WAL, a code the systemd unit lists in
//!   `RestartPreventExitStatus=`, 73 (EX_CANTCREAT) when the data directory cannot be created,
//!   77 (EX_NOPERM) when this user may not write it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use conclave_core::election::Mode;
use conclave_storage::{RecordContent, WAL_FILE_NAME, WalFile, WalRecord, inspect};

/// Bound on every wait: generous against a loaded machine.
const BOUND: Duration = Duration::from_secs(30);

/// Runs `command` to its end (bounded) and returns what it printed and how it exited.
fn finish(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = SystemTime::now() + BOUND;
    while child.try_wait().unwrap().is_none() {
        if SystemTime::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "{command:?} did not exit within {BOUND:?}\n{}",
                said(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn conclave(args: &[&str], config: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_conclave"));
    command.args(args).arg(config);
    finish(command)
}

/// `conclave check-config CONFIG`.
fn check_config(config: &Path) -> Output {
    conclave(&["check-config"], config)
}

/// `conclave run --config CONFIG`, expected to refuse to start.
fn run(config: &Path) -> Output {
    conclave(&["run", "--config"], config)
}

fn said(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// A configuration of node gw-a with its data directory `data_dir`, the lines `extra` added
/// (sections after `[node]`), its endpoints on ports the system picks.
fn config(dir: &Path, data_dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("conclave.toml");
    std::fs::write(
        &path,
        format!(
            "[node]\nid = \"gw-a\"\ndata_dir = {:?}\n{extra}\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [metrics]\nlisten = \"127.0.0.1:0\"\n",
            data_dir.display().to_string()
        ),
    )
    .unwrap();
    path
}

/// A WAL of `mode` in `data_dir`, opened twice, so that it holds records after its first ones.
fn make_wal(data_dir: &Path, mode: Mode) {
    for _ in 0..2 {
        let (wal, _) = WalFile::open_for_mode(data_dir, mode).unwrap();
        drop(wal);
    }
}

/// Flips a bit in the last byte of the WAL's first incarnation record: valid records follow,
/// so the file is corrupt, not torn.
fn damage_wal(data_dir: &Path) {
    let inspection = inspect(data_dir).unwrap();
    let record = inspection
        .examination
        .records
        .iter()
        .find(|r| matches!(r.content, RecordContent::Record(WalRecord::Incarnation(_))))
        .unwrap();
    let at = usize::try_from(record.offset + record.size() - 1).unwrap();
    let wal = data_dir.join(WAL_FILE_NAME);
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&wal, bytes).unwrap();
    assert!(
        !inspect(data_dir)
            .unwrap()
            .examination
            .verdict
            .allows_start()
    );
}

/// The exit codes listed in the unit's `RestartPreventExitStatus=` lines.
fn codes_systemd_does_not_restart() -> Vec<i32> {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/systemd/conclave.service"),
    )
    .unwrap();
    unit.lines()
        .filter_map(|line| line.trim().strip_prefix("RestartPreventExitStatus="))
        .flat_map(|codes| codes.split_whitespace().map(|code| code.parse().unwrap()))
        .collect()
}

/// Item 4, docs/design.md §9: every problem in one pass — an unknown quorum does not hide the
/// heartbeat that exceeds the election timeout, nor the admin token.
#[test]
fn check_config_prints_every_problem_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        &dir.path().join("data"),
        "[election.raft]\nquorum = \"sometimes\"\nheartbeat_ms = 5000\n\
         election_timeout_min_ms = 100\nelection_timeout_max_ms = 200\n",
    );
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("127.0.0.1:0\"\n[metrics]", "0.0.0.0:7070\"\n[metrics]");
    std::fs::write(&path, text).unwrap();
    let output = check_config(&path);
    let said = said(&output);
    assert_eq!(output.status.code(), Some(64), "{said}");
    for key in [
        "election.raft.quorum:",
        "election.raft.heartbeat_ms:",
        "admin.token_file:",
    ] {
        assert!(said.contains(key), "{key} missing:\n{said}");
    }
}

/// Item 4: a node.id missing from cluster.voters (a typo) makes a non-voter; check-config
/// warns as `run` does, instead of a bare `ok`.
#[test]
fn check_config_warns_of_a_node_that_is_not_a_voter() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        &dir.path().join("data"),
        "[cluster]\nvoters = [\"gw-aa\", \"gw-b\", \"gw-c\"]\n\
         [link.udp]\nlisten = \"127.0.0.1:0\"\n",
    );
    let output = check_config(&path);
    let said = said(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(
        said.contains("warning: cluster.voters: node.id gw-a is not listed"),
        "{said}"
    );
}

/// Items 4 and 5, WAL-2: a damaged WAL is named by check-config; `run` refuses it with exit
/// code 65, which the systemd unit does not restart (a restart cannot repair it), while 64
/// stays there too.
#[test]
fn a_damaged_wal_exits_65_which_systemd_does_not_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    make_wal(&data_dir, Mode::Raft);
    damage_wal(&data_dir);
    let path = config(dir.path(), &data_dir, "");

    let output = check_config(&path);
    let said_check = said(&output);
    assert_eq!(output.status.code(), Some(64), "{said_check}");
    assert!(
        said_check.contains("node.data_dir: the WAL"),
        "{said_check}"
    );
    assert!(said_check.contains("is damaged"), "{said_check}");
    assert!(said_check.contains("conclave wal repair"), "{said_check}");

    let output = run(&path);
    let said_run = said(&output);
    assert_eq!(output.status.code(), Some(65), "{said_run}");
    assert!(said_run.contains("corrupt"), "{said_run}");
    let kept = codes_systemd_does_not_restart();
    assert!(kept.contains(&65), "RestartPreventExitStatus: {kept:?}");
    assert!(kept.contains(&64), "RestartPreventExitStatus: {kept:?}");
}

/// Item 4: a data directory holding a WAL of another election mode passes no longer: the
/// check names both modes, as `run` does.
#[test]
fn check_config_refuses_a_wal_of_another_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    make_wal(&data_dir, Mode::Static);
    let path = config(dir.path(), &data_dir, "");
    let output = check_config(&path);
    let said = said(&output);
    assert_eq!(output.status.code(), Some(64), "{said}");
    assert!(said.contains("written in static mode"), "{said}");
    assert!(said.contains("election.mode = \"raft\""), "{said}");
    let output = run(&path);
    assert_eq!(output.status.code(), Some(64), "{}", self::said(&output));
}

/// Item 4: a data directory that cannot be created (a file stands where its parent should
/// be) is named by check-config, and `run` exits 73 (EX_CANTCREAT), not 70.
#[test]
fn a_data_dir_that_cannot_be_created_exits_73() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let path = config(dir.path(), &file.join("data"), "");
    let output = check_config(&path);
    let said_check = said(&output);
    assert_eq!(output.status.code(), Some(64), "{said_check}");
    assert!(
        said_check.contains(&format!(
            "node.data_dir: {} cannot be created: {} is not a directory",
            file.join("data").display(),
            file.display()
        )),
        "{said_check}"
    );
    let output = run(&path);
    assert_eq!(output.status.code(), Some(73), "{}", said(&output));
    // A configuration meant for another host is checked without this machine's directory.
    let output = conclave(&["check-config", "--file-only"], &path);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
}

/// Item 4: a data directory this user may not write is named by check-config, and `run`
/// exits 77 (EX_NOPERM). Root may write anywhere, so as root both run as `nobody` (through
/// setpriv); without setpriv, root skips the test, saying so.
#[test]
fn a_data_dir_this_user_may_not_write_exits_77() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let path = config(dir.path(), &data_dir, "");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_root = rustix::process::geteuid().is_root();
    let command = |args: &[&str]| {
        let mut command = if as_root {
            let mut command = Command::new("setpriv");
            command
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(env!("CARGO_BIN_EXE_conclave"));
            command
        } else {
            Command::new(env!("CARGO_BIN_EXE_conclave"))
        };
        command.args(args).arg(&path);
        command
    };
    if as_root && Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: running as root without setpriv, every directory is writable");
        return;
    }
    let output = finish(command(&["check-config"]));
    let said_check = said(&output);
    assert_eq!(output.status.code(), Some(64), "{said_check}");
    assert!(
        said_check.contains(&format!(
            "node.data_dir: {} is not writable by this user",
            data_dir.display()
        )),
        "{said_check}"
    );
    let output = finish(command(&["run", "--config"]));
    assert_eq!(output.status.code(), Some(77), "{}", said(&output));
}
