//! The command-line verbs write their standard output without panicking when the reader has
//! gone away (`conclave defaults | head -1`): the rest is dropped and the command ends as it
//! would have; a standard output that fails otherwise (a full disk behind a redirection) is
//! said on standard error and the command exits 74 (EX_IOERR), since its output is incomplete.
//! Standard error closed the same way loses the messages, not the exit code.

#![allow(clippy::unwrap_used)]

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn conclave() -> Command {
    Command::new(env!("CARGO_BIN_EXE_conclave"))
}

fn example(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/examples")
        .join(file)
        .display()
        .to_string()
}

/// Runs `command` with a standard output whose reader is already closed: its first write
/// fails with a broken pipe (a socket pair stands in for the pipe, its other end closed).
fn with_closed_reader(mut command: Command) -> Output {
    let (writer, reader) = UnixStream::pair().unwrap();
    drop(reader);
    command
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_reader_that_went_away_ends_nothing_but_the_output() {
    let mut defaults = conclave();
    defaults.arg("defaults");
    let mut check = conclave();
    check
        .arg("check-config")
        .arg(example("three-udp/node-a.toml"));
    let mut refused = conclave();
    refused
        .arg("check-config")
        .arg(example("three-udp/node-a.toml"))
        .env("CONCLAVE__ELECTION__MODE", "nonsense");
    for (command, expected) in [(defaults, 0), (check, 0), (refused, 64)] {
        let output = with_closed_reader(command);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(output.status.code(), Some(expected), "{stderr}");
    }
}

/// `conclave check-config bad.toml 2>&1 | head -1`: the problems go to standard error, whose
/// reader went away too; the command still exits 64, not with a panic (101).
#[test]
fn a_closed_standard_error_does_not_panic_either() {
    let (writer, reader) = UnixStream::pair().unwrap();
    drop(reader);
    let status = conclave()
        .arg("check-config")
        .arg(example("three-udp/node-a.toml"))
        .env("CONCLAVE__ELECTION__MODE", "nonsense")
        .env("CONCLAVE__NODE__ID", "not an id")
        .stdout(Stdio::from(OwnedFd::from(writer.try_clone().unwrap())))
        .stderr(Stdio::from(OwnedFd::from(writer)))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(64));
}

#[test]
fn a_standard_output_that_fails_is_said_and_exits_74() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full on this machine");
        return;
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let output = conclave()
        .arg("defaults")
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(74), "{stderr}");
}
