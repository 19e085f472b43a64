//! `conclave demo --log` (CB-7, LOG-1, issue 16 item 10): the demo's nodes run the replicated
//! log over their virtual ESP-NOW dongles, so the client verbs work against the admin URLs it
//! prints: a write sent to a follower is redirected to the leader, committed, and read back
//! from another node, a 64 KiB value too (sent in chunks over the 250-byte frames); `air`
//! tells what the air carried. With `--air-kbps` the air time is
//! modelled and a write still commits.
//! The leader killed while a 64 KiB write is on the air leaves no node with part of it, and the
//! write, sent again with its request id, is applied once.
//! `--log` outside raft mode is refused with a message naming both options.

#![allow(clippy::unwrap_used)]

mod demo_support;

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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

/// Asks the demo what the air carried: the frames sent and their bytes on the air.
fn air_counts(demo: &mut Demo) -> (u64, u64) {
    demo.send("air");
    let air = demo.wait_line("the reply to air", |l| l.contains("> air: "));
    // "> air: F frames, B bytes on the air (payload + 43 each), …"
    let words: Vec<&str> = air
        .split("> air: ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(
        words.get(1) == Some(&"frames,") && air.contains("bytes on the air (payload + 43 each)"),
        "{air}"
    );
    (words[0].parse().unwrap(), words[2].parse().unwrap())
}

/// Held by each test that writes a 64 KiB value, so that two such demos do not share the
/// machine: on two busy cores, two at once each need longer than the 10 s a write may take.
static LARGE_WRITE: Mutex<()> = Mutex::new(());

/// A 64 KiB value, the largest a write may carry, that no shorter piece of equals.
fn large_value() -> String {
    (0..64 * 1024)
        .map(|n: usize| char::from(b'a' + ((n * 7 + n / 251) % 26) as u8))
        .collect()
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
    let (frames, _) = air_counts(&mut demo);
    assert!(frames > 0);

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
    let _alone = LARGE_WRITE.lock().unwrap_or_else(PoisonError::into_inner);
    write_through_a_follower_and_read_back(&[], &large_value());
}

/// Reads `key` from every node's own copy (`kv get --stale`) round after round until `stop` is
/// set, counting in `whole` the reads that found the whole `value`; a line for each read that
/// found anything else (a node that is down, or does not hold the key yet, finds nothing).
fn watch_copies(
    urls: Vec<String>,
    key: &'static str,
    value: String,
    stop: Arc<AtomicBool>,
    whole: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut partial = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for url in &urls {
                let output = conclave(url, &["kv", "get", key, "--stale"]);
                if !output.status.success() {
                    continue;
                }
                let got = text(&output.stdout);
                if got.trim_end_matches('\n') == value {
                    whole.fetch_add(1, Ordering::Relaxed);
                } else {
                    partial.push(format!("{url}: {} bytes", got.len()));
                }
            }
            // Paces the rounds (a part applied would stay, so a round now and then finds it)
            // and keeps the reads from starving the demo of the machine's time.
            std::thread::sleep(Duration::from_millis(250));
        }
        partial
    })
}

/// Reads `key` from the node at `admin`'s own copy until it is the whole `value`, bounded; a
/// copy that is there but not whole fails at once.
fn until_whole_copy(admin: &str, key: &str, value: &str) {
    let deadline = SystemTime::now() + BOUND;
    loop {
        let output = conclave(admin, &["kv", "get", key, "--stale"]);
        if output.status.success() {
            let got = text(&output.stdout);
            assert!(
                got.trim_end_matches('\n') == value,
                "{admin} holds {} bytes of the {}-byte value",
                got.len(),
                value.len()
            );
            return;
        }
        assert!(
            SystemTime::now() < deadline,
            "{admin} did not hold {key} within {BOUND:?}: {}",
            text(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `N` of a `KEY: revision N` line of `kv put`.
fn revision_of(put: &str) -> u64 {
    put.split("revision ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {put:?}"))
}

/// MEMB-6, LOG-5: the leader is killed while a 64 KiB write travels in chunks over the air to
/// its followers (or, when the air was quicker than the look, right after). A survivor is
/// elected, the write sent again with its request id is applied once — the store's first and
/// only revision, answered as a replay when the first attempt had been acknowledged — and the
/// value reads back whole through the new leader and from every node's own copy, the killed
/// node revived too. No node's copy ever holds part of the value.
#[test]
fn a_64_kib_write_survives_its_leader_killed_mid_transfer() {
    let _alone = LARGE_WRITE.lock().unwrap_or_else(PoisonError::into_inner);
    let value = large_value();
    let mut demo = Demo::start(None, &["--nodes", "3", "--seed", "7", "--log"]);
    let urls: Vec<String> = (1..=3)
        .map(|n| admin_url(&mut demo, &format!("node-{n}")))
        .collect();
    demo.wait_line("the line about the log", |l| {
        l.contains("replicated log on: conclave kv put")
    });
    demo.wait_line("a leader", |l| l.contains(", leader, vote_won)"));
    let stop = Arc::new(AtomicBool::new(false));
    let whole = Arc::new(AtomicUsize::new(0));
    let watcher = watch_copies(
        urls.clone(),
        "big",
        value.clone(),
        Arc::clone(&stop),
        Arc::clone(&whole),
    );

    let (_, quiet) = air_counts(&mut demo);
    let mut first = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["kv", "put", "big", &value, "--request-id", "big-1"])
        .args(["--admin", &urls[0]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // In flight: the air has carried half a copy of the value more than it had.
    let deadline = SystemTime::now() + BOUND;
    loop {
        let (_, carried) = air_counts(&mut demo);
        if carried >= quiet + value.len() as u64 / 2 || first.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            SystemTime::now() < deadline,
            "the write did not get on the air within {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    demo.send("kill leader");
    let killed = demo.wait_line("the leader killed", |l| l.contains("> kill leader: "));
    let killed: usize = killed
        .split("killed node-")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no leader was killed: {killed}"));
    let first = first.wait_with_output().unwrap();
    demo.wait_line("a survivor elected", |l| {
        l.contains(", leader, vote_won)") && !l.contains(&format!(" node-{killed} "))
    });
    let survivors: Vec<&String> = (1..=3)
        .filter(|n| *n != killed)
        .map(|n| &urls[n - 1])
        .collect();

    // Acknowledged or not, the same request id makes it one write.
    let again = until_done(
        survivors[0],
        &["kv", "put", "big", &value, "--request-id", "big-1"],
    );
    assert_eq!(revision_of(&again), 1, "{again}");
    if first.status.success() {
        let first = text(&first.stdout);
        assert_eq!(revision_of(&first), 1, "{first}");
        assert!(
            again.contains("applied before with this request id"),
            "{again}"
        );
    }
    let read = until_done(survivors[1], &["kv", "get", "big"]);
    assert!(
        read.trim_end_matches('\n') == value,
        "read back {} bytes through {}",
        read.len(),
        survivors[1]
    );
    for survivor in &survivors {
        until_whole_copy(survivor, "big", &value);
    }
    demo.send(&format!("revive {killed}"));
    demo.wait_line("the killed leader revived", |l| {
        l.contains(&format!("revived node-{killed}"))
    });
    until_whole_copy(&urls[killed - 1], "big", &value);

    // The watcher reads too: it has found the value whole once before it stops.
    let deadline = SystemTime::now() + BOUND;
    while whole.load(Ordering::Relaxed) == 0 {
        assert!(
            SystemTime::now() < deadline,
            "the watcher never read the value"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let partial = watcher.join().unwrap();
    assert!(partial.is_empty(), "partial values read: {partial:?}");
    demo.send("quit");
    demo.wait_line("the demo stopping", |l| l.contains("stopping the demo"));
    assert_eq!(demo.wait_exit(), Some(0));
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
