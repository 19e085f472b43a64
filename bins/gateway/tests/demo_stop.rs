//! How `conclave demo` ends (CB-7, issue 15 item 6): SIGTERM (`kill`, `timeout`), SIGHUP and
//! the end of its standard input stop it as `quit` does — every node stopped gracefully, the
//! demo's directory (`$TMPDIR/conclave-demo-*/`: data directories, dongle links, battery
//! files) removed — and each demo writes a log file of its own, so two demos at once do not
//! write over each other's. Unattended (`--duration`), a SIGTERM stops the nodes too, and the
//! exit code (128 + 15) says the run did not reach its verdict.

#![allow(clippy::unwrap_used)]

mod demo_support;

use std::path::{Path, PathBuf};

use demo_support::Demo;

/// The log file a demo names on its `logs in PATH` line.
fn log_file(line: &str) -> PathBuf {
    let path = line
        .trim()
        .strip_prefix("logs in ")
        .and_then(|rest| rest.split(" (").next())
        .unwrap_or_else(|| panic!("not a log line: {line}"));
    PathBuf::from(path)
}

/// What a demo left in `tmp`: the names of its entries.
fn left_in(tmp: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Two interactive demos at once, each with a log file of its own: one stopped by SIGTERM,
/// the other by the end of its input (its stdin closed, nothing typed). Each stops every node
/// gracefully, exits 0 and removes its directory; only the log files stay.
#[test]
fn sigterm_and_end_of_input_stop_the_demo_and_remove_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut terminated = Demo::start(Some(tmp.path()), &["--nodes", "2", "--seed", "3"]);
    let mut ended = Demo::start(Some(tmp.path()), &["--nodes", "2", "--seed", "5"]);
    let logs = [&mut terminated, &mut ended].map(|demo| {
        let line = demo.wait_line("the log file", |l| l.trim_start().starts_with("logs in "));
        log_file(&line)
    });
    assert_ne!(logs[0], logs[1], "two demos share a log file");
    for log in &logs {
        assert_eq!(log.parent(), Some(tmp.path()), "{}", log.display());
    }
    for demo in [&mut terminated, &mut ended] {
        demo.wait_line("a leader", |l| {
            l.contains(" leader node-") && l.contains("vote_won")
        });
    }
    assert_eq!(
        left_in(tmp.path())
            .iter()
            .filter(|name| !name.ends_with(".log"))
            .count(),
        2,
        "each demo has its directory: {:?}",
        left_in(tmp.path())
    );

    terminated.signal("TERM");
    ended.stdin = None;
    for (demo, why) in [(&mut terminated, "SIGTERM"), (&mut ended, "end of input")] {
        demo.wait_line("the demo stopping", |l| {
            l.contains(&format!("{why}: stopping the demo"))
        });
        assert_eq!(demo.wait_exit(), Some(0), "{}", demo.output());
        assert!(demo.output().contains("logs kept in "), "{}", demo.output());
    }
    let left = left_in(tmp.path());
    let expected: Vec<String> = {
        let mut names: Vec<String> = logs
            .iter()
            .map(|log| log.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(left, expected, "the demos left more than their logs");
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(text.contains("node-1"), "{}: {text}", log.display());
    }
}

/// SIGHUP (the terminal closed) stops the interactive demo gracefully too.
#[test]
fn sighup_stops_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let mut demo = Demo::start(Some(tmp.path()), &["--nodes", "2", "--seed", "9"]);
    demo.wait_line("a leader", |l| {
        l.contains(" leader node-") && l.contains("vote_won")
    });
    demo.signal("HUP");
    demo.wait_line("the demo stopping", |l| {
        l.contains("SIGHUP: stopping the demo")
    });
    assert_eq!(demo.wait_exit(), Some(0), "{}", demo.output());
    assert!(
        left_in(tmp.path())
            .iter()
            .all(|name| name.ends_with(".log")),
        "{:?}",
        left_in(tmp.path())
    );
}

/// Unattended (`--duration`), a SIGTERM before the verdict stops every node and removes the
/// directory, keeping the nodes' log; the exit code, 143, says the verdict was not reached.
#[test]
fn sigterm_stops_the_unattended_demo_before_its_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let mut demo = Demo::start(
        Some(tmp.path()),
        &["--nodes", "2", "--seed", "11", "--duration", "600"],
    );
    demo.wait_line("a leader", |l| {
        l.contains(" leader node-") && l.contains("vote_won")
    });
    demo.signal("TERM");
    demo.wait_line("the demo stopping", |l| {
        l.contains("SIGTERM: stopping the demo before its verdict")
    });
    assert_eq!(demo.wait_exit(), Some(128 + 15), "{}", demo.output());
    // Only the nodes' log, which the demo keeps unattended too.
    let left = left_in(tmp.path());
    assert!(
        left.len() == 1 && left[0].starts_with("conclave-demo-") && left[0].ends_with(".log"),
        "{left:?}"
    );
}
