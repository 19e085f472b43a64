//! `conclave demo` (CB-7) as a script and a user would use it. `--duration`: the real binary
//! runs five gateways on virtual ESP-NOW dongles behind pseudo-terminals, kills the leader
//! halfway, and must exit 0 — every live node knowing the same leader at the end — with one
//! line per event on stdout, among them a leader elected after the kill, and no escape codes
//! anywhere when the output is not a terminal. Interactive, over a pipe: `kill leader`,
//! `kill 1,2`, `revive` of a running node, a line that is no command, and Ctrl-C ending it at
//! once though stdin is still open. The nodes' log is kept in both ways of running it.

#![allow(clippy::unwrap_used)]

mod demo_support;

use std::process::Command;

use demo_support::Demo;

#[test]
fn unattended_demo_survives_the_leader_killed_halfway() {
    // The demo keeps its log in the temporary directory: the test's own, not the machine's.
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["demo", "--nodes", "5", "--duration", "8", "--seed", "4"])
        .env("TMPDIR", tmp.path())
        // Logs on stderr, to show they carry no colour codes either.
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "demo failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    // Not a terminal: no colour, no cursor movement, in the lines or the logs.
    assert!(
        !stdout.contains('\x1b'),
        "escape codes on stdout:\n{stdout}"
    );
    assert!(!stderr.is_empty(), "RUST_LOG=info shows logs on stderr");
    assert!(
        !stderr.contains('\x1b'),
        "escape codes on stderr:\n{stderr}"
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

    // The nodes' log is kept unattended too, where the demo says, in the temporary directory.
    let kept = stdout
        .lines()
        .find_map(|line| line.strip_prefix("logs kept in "))
        .unwrap_or_else(|| panic!("the demo names no log it kept:\n{stdout}"));
    let log = std::path::Path::new(kept.trim());
    assert_eq!(log.parent(), Some(tmp.path()), "{stdout}");
    let logged = std::fs::read_to_string(log).unwrap();
    assert!(logged.contains(" INFO "), "{logged}");
}

/// An interactive demo over pipes, with a fixed seed.
struct Interactive;

impl Interactive {
    fn start(nodes: &str) -> Demo {
        Self::start_in(nodes, "raft")
    }

    fn start_in(nodes: &str, mode: &str) -> Demo {
        Demo::start(None, &["--nodes", nodes, "--seed", "7", "--mode", mode])
    }
}

/// The demo's commands over a pipe: `kill leader` kills the leader, `revive` of a running
/// node says so instead of claiming success, `kill 1,2` kills both; the replies are lines
/// without escape codes, and the admin URLs are printed.
#[test]
fn interactive_commands_over_a_pipe() {
    let mut demo = Interactive::start("3");
    demo.wait_line("node-1's admin URL", |l| {
        l.trim_start().starts_with("node-1 ") && l.contains("admin http://127.0.0.1:")
    });
    let elected = demo.wait_line("a leader", |l| {
        l.contains(" leader node-") && l.contains("vote_won")
    });
    assert!(!elected.contains('\x1b'), "{elected}");

    demo.send("kill leader");
    let reply = demo.wait_line("the reply to kill leader", |l| {
        l.contains("> kill leader: ")
    });
    let killed = reply
        .split("killed ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" (the leader)"))
        .unwrap_or_else(|| panic!("{reply}"))
        .to_owned();
    let number = killed.trim_start_matches("node-").to_owned();

    demo.send(&format!("revive {number}"));
    demo.wait_line("the revival", |l| l.ends_with(&format!("revived {killed}")));
    demo.send(&format!("revive {number}"));
    demo.wait_line("the refusal to revive a running node", |l| {
        l.ends_with(&format!("{killed} is already running"))
    });

    // A line that is no command says so before it lists the commands.
    demo.send("xyz 3");
    demo.wait_line("the reply to an unknown command", |l| {
        l.ends_with(
            "> xyz 3: unknown command \"xyz\"; commands: kill N[,M..] | kill leader | \
                     revive N[,M..] | partition 1,2 3,4,5 | heal | battery N PCT | air | view | \
                     quit",
        )
    });

    demo.send("kill 1,2");
    demo.wait_line("both killed", |l| {
        l.ends_with("killed node-1; killed node-2")
    });

    demo.send("quit");
    demo.wait_line("the demo stopping", |l| l.contains("stopping the demo"));
    assert_eq!(demo.wait_exit(), Some(0));
    let all = demo.output();
    assert!(!all.contains('\x1b'), "escape codes over a pipe:\n{all}");
}

/// Issue 9 item 10: `--mode priority`: the view shows each node's state, score and battery;
/// `battery N PCT` draining the master to the low-battery level makes it resign (PRI-5) to
/// the node with the best battery, which every node then follows.
#[test]
fn priority_demo_battery_drain_makes_the_master_resign() {
    let mut demo = Interactive::start_in("3", "priority");
    let elected = demo.wait_line("a master", |l| {
        l.contains(" leader node-") && l.contains(", leader, ")
    });
    // "HH:MM:SS.mmm node-N   leader node-N (term T, leader, cause)"
    let master = elected
        .split(" leader ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    let number = |name: &str| name.trim_start_matches("node-").to_owned();
    let others: Vec<String> = (1..=3)
        .map(|n| format!("node-{n}"))
        .filter(|name| *name != master)
        .collect();
    // The best successor has the fullest battery.
    demo.send(&format!("battery {} 40", number(&others[0])));
    demo.send(&format!("battery {} 90", number(&others[1])));
    demo.wait_line("the second battery set", |l| {
        l.ends_with(&format!("{}'s battery is now 90%", others[1]))
    });
    demo.send("view");
    demo.wait_line("the master's row with its score and battery", |l| {
        l.starts_with(&master) && l.contains("master (0x") && l.contains(", 100%)")
    });
    demo.send(&format!("battery {} 10", number(&master)));
    let successor = &others[1];
    demo.wait_line("the old master resigning", |l| {
        l.contains(&format!("{master}   leader none")) && l.contains("resign")
    });
    // The two lines come in either order.
    let mut following: Vec<&String> = vec![&others[0], &master];
    while !following.is_empty() {
        let line = demo.wait_line("every node following the successor", |l| {
            following
                .iter()
                .any(|name| l.contains(&format!("{name}   leader {successor} ")))
        });
        following.retain(|name| !line.contains(&format!("{name}   leader {successor} ")));
    }
    demo.send("battery 9 50");
    demo.wait_line("the refusal of a node that does not exist", |l| {
        l.contains("no node \"9\": nodes are 1 to 3")
    });
    demo.send("quit");
    assert_eq!(demo.wait_exit(), Some(0));
}

/// Issue 9 item 10: `--mode gossip` runs Fabric's election: a leader is declared, and after
/// `kill leader` the survivors agree on another.
#[test]
fn gossip_demo_replaces_a_killed_leader() {
    let mut demo = Interactive::start_in("3", "gossip");
    let elected = demo.wait_line("a gossip leader", |l| {
        l.contains(" leader node-") && l.contains(", leader, ")
    });
    let first = elected
        .split(" leader ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    demo.send("kill leader");
    demo.wait_line("the reply to kill leader", |l| {
        l.contains(&format!("killed {first} (the leader)"))
    });
    demo.wait_line("a new leader", |l| {
        l.contains(" leader node-") && l.contains(", leader, ") && !l.contains(&first)
    });
    demo.send("quit");
    assert_eq!(demo.wait_exit(), Some(0));
}

/// Ctrl-C (SIGINT) ends the interactive demo at once, though stdin is still open and nothing
/// was typed: no waiting for an Enter.
#[test]
fn ctrl_c_ends_the_interactive_demo_at_once() {
    let mut demo = Interactive::start("2");
    demo.wait_line("a leader", |l| {
        l.contains(" leader node-") && l.contains("vote_won")
    });
    demo.signal("INT");
    demo.wait_line("the demo stopping", |l| l.contains("stopping the demo"));
    assert_eq!(demo.wait_exit(), Some(0));
}
