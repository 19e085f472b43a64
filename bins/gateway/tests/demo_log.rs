//! `conclave demo --log` (CB-7, LOG-1, issue 16 item 10): the demo's nodes run the replicated
//! log over their virtual ESP-NOW dongles, so the client verbs work against the admin URLs it
//! prints: a write sent to a follower is redirected to the leader, committed, and read back
//! from another node, a 64 KiB value too (sent in chunks over the 250-byte frames); `air`
//! tells what the air carried. With `--air-kbps` the air time is
//! modelled and a write still commits.
//! `--log` outside raft mode is refused with a message naming both options.

#![allow(clippy::unwrap_used)]

mod demo_support;

use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use demo_support::{BOUND, Demo};

/// `conclave ARGS --admin URL`.
fn conclave(admin: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(args)
        .args(["--admin", admin])
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The admin URL the demo printed for `node`.
fn admin_url(demo: &mut Demo, node: &str) -> String {
    let line = demo.wait_line(&format!("{node}'s admin URL"), |l| {
        l.trim_start().starts_with(&format!("{node} ")) && l.contains("admin http://")
    });
    line.split_whitespace()
        .skip_while(|word| *word != "admin")
        .nth(1)
        .unwrap()
        .to_owned()
}

/// Runs `conclave ARGS --admin URL` until it exits 0 (a write retried with its request id
/// while a leader settles), bounded; its stdout.
fn until_done(admin: &str, args: &[&str]) -> String {
    let deadline = SystemTime::now() + BOUND;
    loop {
        let output = conclave(admin, args);
        if output.status.success() {
            return text(&output.stdout);
        }
        assert!(
            SystemTime::now() < deadline,
            "conclave {args:?} against {admin} did not succeed within {BOUND:?}: {:?}\n{}{}",
            output.status,
            text(&output.stdout),
            text(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts a three-node demo with the log and these extra options; writes `value` through a
/// follower (the CLI follows its redirect), reads it back through another node, then `quit`s.
fn write_through_a_follower_and_read_back(extra: &[&str], value: &str) {
    let mut args = vec!["--nodes", "3", "--seed", "7", "--log"];
    args.extend_from_slice(extra);
    let mut demo = Demo::start(None, &args);
    let urls: Vec<String> = (1..=3)
        .map(|n| admin_url(&mut demo, &format!("node-{n}")))
        .collect();
    demo.wait_line("the line about the log", |l| {
        l.contains("replicated log on: conclave kv put")
    });
    let elected = demo.wait_line("a leader", |l| {
        l.contains(" leader node-") && l.contains("vote_won")
    });
    // "HH:MM:SS.mmm node-N   leader node-N (term T, leader, vote_won)"
    let leader = elected
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_start_matches("node-")
        .parse::<usize>()
        .unwrap();
    let follower = &urls[leader % 3];
    let other = &urls[(leader + 1) % 3];

    let put = until_done(
        follower,
        &["kv", "put", "greeting", value, "--request-id", "demo-1"],
    );
    assert!(put.contains("revision"), "{put}");
    let got = until_done(other, &["kv", "get", "greeting"]);
    assert!(got.trim() == value, "read back {} bytes", got.trim().len());

    // `air` says what the air carried: frames and their bytes on the air.
    demo.send("air");
    let air = demo.wait_line("the reply to air", |l| l.contains("> air: "));
    let frames: u64 = air
        .split("> air: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        frames > 0 && air.contains("bytes on the air (payload + 43 each)"),
        "{air}"
    );

    demo.send("quit");
    demo.wait_line("the demo stopping", |l| l.contains("stopping the demo"));
    assert_eq!(demo.wait_exit(), Some(0));
}

#[test]
fn demo_with_the_log_commits_a_write_sent_to_a_follower() {
    write_through_a_follower_and_read_back(&[], "hello");
}

/// MEMB-6: a 64 KiB value, the largest a write may carry, goes over the virtual ESP-NOW air's
/// 250-byte frames in chunks, commits, and reads back through another node.
#[test]
fn demo_with_the_log_commits_a_64_kib_value_over_esp_now() {
    let value: String = (0..64 * 1024)
        .map(|n: usize| char::from(b'a' + ((n * 7 + n / 251) % 26) as u8))
        .collect();
    write_through_a_follower_and_read_back(&[], &value);
}

/// The same over an air whose time is modelled at ESP-NOW's rate: frames take turns, and the
/// write still commits.
#[test]
fn demo_with_the_log_commits_over_a_timed_air() {
    write_through_a_follower_and_read_back(&["--air-kbps", "214"], "hello");
}

/// `--log` is raft's only: with another mode the demo refuses at once, with the usage exit
/// code and a message naming `--log`, `--mode` and the mode given.
#[test]
fn demo_refuses_the_log_outside_raft_mode() {
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["demo", "--nodes", "2", "--log", "--mode", "gossip"])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("--log needs --mode raft") && stderr.contains("gossip"),
        "{stderr}"
    );
}
