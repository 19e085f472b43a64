//! `conclave lock` and `conclave session` against three real `conclave run` processes with the
//! replicated log (SESS-1, SESS-4), started from the README's `config/examples/three-udp`
//! files as the replicated log's tests start them.
//!
//! - One holder at a time: while `conclave lock L -- CMD` runs CMD, a second `conclave lock L`
//!   waits and its command does not start (each command leaves a marker file); `--wait`
//!   gives up with its own exit code. When CMD exits, the waiter's command runs, with a
//!   larger `CONCLAVE_LOCK_TOKEN`, and the key is gone once both are done.
//! - A holder killed with SIGKILL stops its keepalives; the leader ends its session within
//!   the TTL, which deletes the key, and the waiter takes the lock.
//! - SIGTERM to `conclave lock` reaches CMD, whose exit code it exits with, and the lock is
//!   released; a session revoked under a running CMD is the lock lost: CMD gets SIGTERM and
//!   `conclave lock` exits 125.
//! - The fencing script of docs/operations.md runs as written: holders write with growing
//!   tokens, and a late holder with an older token is refused.
//! - `conclave session grant`, `keepalive` (once and `--follow`), `list` and `revoke` in one
//!   small flow, with a key tied to the session deleted with it.
//!
//! Every wait is for something observable (a file, a line of output, an exit), bounded by
//! the harness's generous bound; nothing asserts on time.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::{ProcessCluster, conclave, example_cluster, text};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// `conclave lock NAME --admin URL [extra] -- sh -c SCRIPT`, running in the background, its
/// output in `<dir>/<tag>.out` and `<dir>/<tag>.err`.
fn spawn_lock(dir: &Path, admin: &str, tag: &str, extra: &[&str], script: &str) -> Child {
    let file = |ext: &str| std::fs::File::create(dir.join(format!("{tag}.{ext}"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["lock", "build", "--admin", admin])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .env("MARKS", dir)
        .stdin(Stdio::null())
        .stdout(file("out"))
        .stderr(file("err"))
        .spawn()
        .unwrap()
}

/// A command that records its token and that it started, then waits for `<tag>.go`.
fn holding_script(tag: &str) -> String {
    format!(
        "echo \"$CONCLAVE_LOCK_TOKEN $CONCLAVE_LOCK_KEY $CONCLAVE_SESSION\" > \"$MARKS/{tag}.token\"; \
         touch \"$MARKS/{tag}.started\"; \
         while [ ! -e \"$MARKS/{tag}.go\" ]; do sleep 0.05; done"
    )
}

/// A command that records its token and that it started, and exits 3.
fn quick_script(tag: &str) -> String {
    format!(
        "echo \"$CONCLAVE_LOCK_TOKEN $CONCLAVE_LOCK_KEY $CONCLAVE_SESSION\" > \"$MARKS/{tag}.token\"; \
         touch \"$MARKS/{tag}.started\"; exit 3"
    )
}

/// The token a command recorded, with the key and session it saw.
fn token(dir: &Path, tag: &str) -> (u64, String, u64) {
    let line = std::fs::read_to_string(dir.join(format!("{tag}.token"))).unwrap();
    let mut words = line.split_whitespace();
    let mut next = || words.next().unwrap_or_default().to_owned();
    (
        next().parse().unwrap(),
        next(),
        next().parse().unwrap_or_default(),
    )
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits (bounded) for `child` to exit; its exit code.
fn exit_code(cluster: &ProcessCluster, what: &str, child: &mut Child) -> i32 {
    cluster.wait_for(what, |_| {
        child
            .try_wait()
            .unwrap()
            .map(|status| status.code().unwrap_or(-1))
    })
}

/// SESS-4: one holder at a time, the waiter after it with a larger token, `--wait` giving up
/// with 124, CMD's exit code passed on, the key gone after the last holder.
#[test]
fn sess4_a_waiter_runs_only_after_the_holder_with_a_larger_token() {
    let (cluster, leader) = example_cluster(&NODES);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path();
    // Through a follower: the CLI follows the redirect to the leader.
    let admin = cluster.admin_url(follower);
    let mut holder = spawn_lock(marks, &admin, "a", &[], &holding_script("a"));
    cluster.wait_for("the holder's command to start", |_| {
        marks.join("a.started").exists().then_some(())
    });
    let mut waiter = spawn_lock(marks, &admin, "b", &[], &quick_script("b"));
    cluster.wait_for("the second lock to say it waits", |_| {
        read(marks.join("b.err")).contains("waiting").then_some(())
    });
    assert!(
        !marks.join("b.started").exists(),
        "the waiter's command started while the holder held the lock"
    );
    let impatient = conclave(&[
        "lock",
        "build",
        "--wait",
        "1",
        "--admin",
        &admin,
        "--",
        "touch",
        &marks.join("c.started").display().to_string(),
    ]);
    assert_eq!(
        impatient.status.code(),
        Some(124),
        "{}",
        text(&impatient.stderr)
    );
    assert!(text(&impatient.stderr).contains("still held"));
    assert!(!marks.join("c.started").exists());
    assert!(!marks.join("b.started").exists());

    std::fs::write(marks.join("a.go"), "").unwrap();
    assert_eq!(exit_code(&cluster, "the holder to exit", &mut holder), 0);
    assert_eq!(exit_code(&cluster, "the waiter to exit", &mut waiter), 3);
    let (first, key, first_session) = token(marks, "a");
    let (second, second_key, second_session) = token(marks, "b");
    assert_eq!(key, "conclave/locks/build");
    assert_eq!(second_key, key);
    assert!(second > first, "tokens {first} then {second}");
    assert_ne!(first_session, second_session);
    // Released by the last holder: the key is gone.
    let get = conclave(&["kv", "get", &key, "--admin", &cluster.admin_url(&leader)]);
    assert_eq!(get.status.code(), Some(1), "{}", text(&get.stdout));
}

/// SESS-4: a holder killed with SIGKILL lets go when its session's TTL runs out on the
/// leader, and the waiter takes the lock with a larger token.
#[test]
fn sess4_a_killed_holder_lets_go_within_its_ttl() {
    let (cluster, leader) = example_cluster(&NODES);
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path();
    let admin = cluster.admin_url(&leader);
    let ttl = ["--ttl", "1000"];
    let mut holder = spawn_lock(marks, &admin, "a", &ttl, &holding_script("a"));
    cluster.wait_for("the holder's command to start", |_| {
        marks.join("a.started").exists().then_some(())
    });
    let mut waiter = spawn_lock(marks, &admin, "b", &ttl, &quick_script("b"));
    cluster.wait_for("the second lock to say it waits", |_| {
        read(marks.join("b.err")).contains("waiting").then_some(())
    });
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(
        exit_code(
            &cluster,
            "the waiter to take the lock and exit",
            &mut waiter
        ),
        3,
        "{}",
        read(marks.join("b.err"))
    );
    assert!(token(marks, "b").0 > token(marks, "a").0);
    // The killed holder's command outlived it (nothing stops it): let it end.
    std::fs::write(marks.join("a.go"), "").unwrap();
}

/// `conclave ARGS --admin URL`: exit code and standard output.
fn cli(admin: &str, args: &[&str]) -> (i32, String) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--admin", admin]);
    let output = conclave(&all);
    (output.status.code().unwrap_or(-1), text(&output.stdout))
}

/// SESS-1: grant, keepalive once and followed, list, revoke; a key written with the session
/// is deleted with it, and the followed keepalive ends (exit 1) when the session does.
#[test]
fn sess1_session_verbs_grant_keepalive_list_revoke() {
    let (cluster, leader) = example_cluster(&NODES);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();
    let admin = cluster.admin_url(follower);
    let (code, id) = cli(
        &admin,
        &["session", "grant", "--ttl", "3000", "--name", "flow"],
    );
    assert_eq!(code, 0, "{id}");
    let id = id.trim().to_owned();
    assert!(id.parse::<u64>().is_ok(), "{id}");
    let (code, out) = cli(&admin, &["kv", "put", "flow/k", "v", "--session", &id]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&admin, &["session", "keepalive", &id]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("session {id}: kept alive for 3000 ms").as_str())
    );

    let mut follow = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["session", "keepalive", &id, "--follow", "--admin", &admin])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its lines, read on a thread so that the test waits for each with a bound.
    let (line_sender, lines) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if line_sender.send(line).is_err() {
                return;
            }
        }
    });
    // The first keepalive (sent the ordinary way) and the leader's stream's first two.
    for _ in 0..3 {
        let line = lines.recv_timeout(support::BOUND).unwrap();
        assert_eq!(line, format!("session {id}: kept alive for 3000 ms"));
    }

    let (code, out) = cli(&admin, &["session", "list", "--json"]);
    assert_eq!(code, 0, "{out}");
    let list: Value = serde_json::from_str(out.trim()).unwrap();
    let session = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"].as_u64() == id.parse().ok())
        .unwrap_or_else(|| panic!("session {id} not listed: {list}"))
        .clone();
    assert_eq!(session["name"], "flow");
    assert_eq!(session["keys"], 1);
    let (code, table) = cli(&admin, &["session", "list"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("ID  NAME"), "{table}");

    let (code, out) = cli(&admin, &["session", "revoke", &id]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("session {id} revoked: 1 key deleted").as_str())
    );
    assert_eq!(cli(&admin, &["kv", "get", "flow/k"]).0, 1);
    assert_eq!(cli(&admin, &["session", "keepalive", &id]).0, 1);
    assert_eq!(
        exit_code(&cluster, "the followed keepalive to end", &mut follow),
        1
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut follow.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains(&format!("session {id} ended")), "{err}");
}

/// A command that records its token, that it started, and SIGTERM when it comes (then exits
/// 7); otherwise it runs until `<tag>.go`.
fn terminable_script(tag: &str) -> String {
    format!(
        "trap 'touch \"$MARKS/{tag}.term\"; exit 7' TERM; {}",
        holding_script(tag)
    )
}

/// SESS-4: SIGTERM to `conclave lock` is passed on to CMD, `conclave lock` exits with CMD's
/// exit code, and the lock is released (the key is gone).
#[test]
fn sess4_a_signal_is_passed_to_the_command_and_the_lock_released() {
    let (cluster, leader) = example_cluster(&NODES);
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path();
    let admin = cluster.admin_url(&leader);
    let mut holder = spawn_lock(marks, &admin, "a", &[], &terminable_script("a"));
    cluster.wait_for("the holder's command to start", |_| {
        marks.join("a.started").exists().then_some(())
    });
    let kill = Command::new("kill")
        .args(["-TERM", &holder.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(
        exit_code(&cluster, "the holder to exit", &mut holder),
        7,
        "{}",
        read(marks.join("a.err"))
    );
    assert!(marks.join("a.term").exists(), "CMD did not get SIGTERM");
    let (_, key, _) = token(marks, "a");
    let get = conclave(&["kv", "get", &key, "--admin", &admin]);
    assert_eq!(get.status.code(), Some(1), "{}", text(&get.stdout));
}

/// SESS-4: a session that ends under a running CMD (revoked here by an operator) is the lock
/// lost: `conclave lock` says so, sends CMD SIGTERM and exits 125.
#[test]
fn sess4_a_lost_lock_stops_the_command_and_exits_125() {
    let (cluster, leader) = example_cluster(&NODES);
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path();
    let admin = cluster.admin_url(&leader);
    let ttl = ["--ttl", "1500"];
    let mut holder = spawn_lock(marks, &admin, "a", &ttl, &terminable_script("a"));
    cluster.wait_for("the holder's command to start", |_| {
        marks.join("a.started").exists().then_some(())
    });
    let (_, _, session) = token(marks, "a");
    let revoked = conclave(&["session", "revoke", &session.to_string(), "--admin", &admin]);
    assert_eq!(revoked.status.code(), Some(0), "{}", text(&revoked.stderr));
    assert_eq!(
        exit_code(&cluster, "the holder to notice and exit", &mut holder),
        125
    );
    assert!(marks.join("a.term").exists(), "CMD did not get SIGTERM");
    let err = read(marks.join("a.err"));
    assert!(err.contains("lost conclave/locks/build"), "{err}");
}

/// SESS-4: the fencing script of docs/operations.md, as written there (its slow part made a
/// no-op), under `conclave lock`: each holder writes the key with its token, a later holder's
/// write replaces an earlier one, and a holder with an older token than the last written is
/// refused and changes nothing.
#[test]
fn sess4_the_fencing_script_of_the_operators_guide_works() {
    if !Command::new("jq")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
    {
        eprintln!("skipped: no jq, which the script of docs/operations.md uses");
        return;
    }
    let (cluster, leader) = example_cluster(&NODES);
    let dir = tempfile::tempdir().unwrap();
    let guide = read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"));
    let opening = "#!/bin/sh\n# publish.sh";
    let body = guide
        .split_once(&format!("```sh\n{opening}"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(body, _)| body)
        .expect("docs/operations.md shows publish.sh");
    let script = format!("{opening}{body}").replace("build-and-upload \"$1\"", "true");
    assert!(script.contains("--if-revision"), "{script}");
    let path = dir.path().join("publish.sh");
    std::fs::write(&path, script).unwrap();
    let binaries = Path::new(env!("CARGO_BIN_EXE_conclave")).parent().unwrap();
    let search = format!(
        "{}:{}",
        binaries.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let admin = cluster.admin_url(&leader);
    let run = |command: &mut Command| {
        let output = command
            .env("PATH", &search)
            .env("CONCLAVE_ADMIN", &admin)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (output.status.code(), text(&output.stderr))
    };
    let current = || {
        let (code, value) = cli(&admin, &["kv", "get", "site/current"]);
        assert_eq!(code, 0);
        value.trim().to_owned()
    };
    let publish = |version: &str| {
        run(Command::new(env!("CARGO_BIN_EXE_conclave"))
            .args(["lock", "publish", "--"])
            .args(["sh", &path.display().to_string(), version]))
    };
    assert_eq!(publish("2.4"), (Some(0), String::new()));
    let first = current();
    assert!(first.ends_with(" 2.4"), "{first}");
    assert_eq!(publish("2.5"), (Some(0), String::new()));
    let second = current();
    let token_of = |value: &str| value.split(' ').next().unwrap().parse::<u64>().unwrap();
    assert!(second.ends_with(" 2.5"), "{second}");
    assert!(
        token_of(&second) > token_of(&first),
        "{first} then {second}"
    );
    // A late holder, its token older than the last written.
    let (code, stderr) = run(Command::new("sh")
        .arg(&path)
        .arg("2.3")
        .env("CONCLAVE_LOCK_TOKEN", token_of(&first).to_string()));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
    assert_eq!(current(), second);
}
