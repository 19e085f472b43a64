//! `conclave demo --duration` (CB-7) as a script would use it: the real binary runs five
//! gateways on virtual ESP-NOW dongles behind pseudo-terminals, kills the leader halfway, and
//! must exit 0 — every live node knowing the same leader at the end — with one line per event
//! on stdout, among them a leader elected after the kill.

#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn unattended_demo_survives_the_leader_killed_halfway() {
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["demo", "--nodes", "5", "--duration", "8", "--seed", "4"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "demo failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );

    // Every node's admin and metrics endpoints are printed at start.
    for n in 1..=5 {
        let line = stdout
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("node-{n} ")))
            .unwrap_or_else(|| panic!("no endpoint line for node-{n}:\n{stdout}"));
        assert!(line.contains("admin http://127.0.0.1:"), "{line}");
        assert!(line.contains("metrics http://127.0.0.1:"), "{line}");
    }

    let killed = stdout
        .lines()
        .find_map(|line| line.split("killing the leader, ").nth(1))
        .unwrap_or_else(|| panic!("the leader was not killed:\n{stdout}"))
        .trim()
        .to_owned();
    let after_kill = stdout
        .split_once("killing the leader")
        .map(|(_, rest)| rest)
        .unwrap();
    assert!(
        after_kill.lines().any(|line| line.contains("vote_won")),
        "no leader elected after the kill:\n{stdout}"
    );
    let verdict = stdout
        .lines()
        .find_map(|line| line.strip_prefix("result: every live node (4) knows the leader "))
        .unwrap_or_else(|| panic!("no agreement among the four survivors:\n{stdout}"));
    assert_ne!(verdict.trim(), killed, "{stdout}");
}
