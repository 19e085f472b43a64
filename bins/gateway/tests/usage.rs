//! The command line as a script sees it, without any node running: every usage error exits
//! 64, clap's own included, with its message on standard error, while `--help` exits 0; the
//! client options are refused, by name, by the commands they do not affect, and taken after
//! the verb (or before it, as earlier versions took them) by those they do; a missing input
//! (a WAL, a value's `@FILE`) exits 66; `check-config` takes `--config` as `run` does;
//! `init --join` refuses a configuration that cannot join a cluster before it asks one; a
//! redirect to a leader that does not answer exits 75, not 69.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{conclave, text};

/// Exit code and standard error of `conclave ARGS`.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = conclave(args);
    (output.status.code(), text(&output.stderr))
}

#[test]
fn every_usage_error_exits_64() {
    for (args, said) in [
        (&["--bogus"][..], "'--bogus'"),
        (&["kv", "put", "K"], "<VALUE>"),
        (&["demo", "--mode", "foo"], "'foo'"),
        (&["jobs", "ack", "abc", "--worker", "w"], "'abc'"),
        (&["demo", "--duration", "0"], "--duration"),
        (&["run", "--admin", "127.0.0.1:17999"], "'--admin'"),
        (&["--admin", "127.0.0.1:17999", "run"], "'--admin'"),
        (&["defaults", "--json"], "'--json'"),
        (&["demo", "--token", "t"], "'--token'"),
        (&["jobs", "add", "@"], "@@"),
        (&["lock", "build"], "<CMD>"),
        (&["lock", "build", "--json", "--", "true"], "'--json'"),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    let help = conclave(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).contains("Usage: conclave"), "{help:?}");
}

/// After the verb or before it, the client options reach the command: nothing listens at
/// 127.0.0.1:1, so the command got as far as asking it (69), past the parsing (64).
#[test]
fn client_options_reach_the_commands_that_take_them() {
    for args in [
        &["kv", "put", "K", "V", "--admin", "127.0.0.1:1"][..],
        &["kv", "--admin", "127.0.0.1:1", "put", "K", "V"],
        &["--admin", "127.0.0.1:1", "status"],
        &["status", "--admin", "127.0.0.1:1", "--json"],
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(69), "{args:?}: {stderr}");
        assert!(stderr.contains("http://127.0.0.1:1"), "{args:?}: {stderr}");
    }
}

/// sysexits' EX_NOINPUT for an input that is not there: a WAL, a value's file. `wal repair`
/// leaves a directory without a WAL as it found it.
#[test]
fn a_missing_input_exits_66() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let missing = path("nonexistent");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.display().to_string();
    for (args, said) in [
        (
            vec!["wal", "inspect", &missing],
            "no such file or directory".to_owned(),
        ),
        (
            vec!["wal", "repair", &empty, "--confirm"],
            format!("no WAL in {empty}"),
        ),
        (vec!["wal", "repair", &empty], format!("no WAL in {empty}")),
        (
            vec![
                "kv",
                "put",
                "K",
                &format!("@{missing}"),
                "--admin",
                "127.0.0.1:1",
            ],
            format!("VALUE @{missing}: cannot read"),
        ),
    ] {
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(66), "{args:?}: {stderr}");
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "wal repair left files in a directory without a WAL"
    );
}

#[test]
fn check_config_takes_the_file_as_run_does() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/examples/three-udp/node-a.toml")
        .display()
        .to_string();
    for args in [
        &["check-config", "--file-only", &file][..],
        &["check-config", "--file-only", "--config", &file],
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}

/// `init --join` refuses, before it asks any cluster or writes anything, a configuration that
/// cannot join one: another election mode, no replicated log, its own id among
/// `cluster.voters` (64); and a data directory a node has used (1). The client options it
/// takes are refused without `--join`.
#[test]
fn init_join_refuses_what_cannot_join() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = |name: &str, voters: &str, extra: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "[node]\nid = \"gw-d\"\ndata_dir = {:?}\n[cluster]\nvoters = [{voters}]\n\
                 [link.udp]\nlisten = \"127.0.0.1:1\"\npeers = [\"127.0.0.1:2\"]\n{extra}",
                data.display().to_string()
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    // Nothing listens at this URL: each refusal comes before any request.
    let join = ["init", "--join", "http://127.0.0.1:1", "--config"];
    let cases = [
        (
            config("no-log", "\"gw-a\", \"gw-b\"", ""),
            "[log] enabled = true",
        ),
        (
            config(
                "gossip",
                "\"gw-a\", \"gw-b\"",
                "[election]\nmode = \"gossip\"\n",
            ),
            "election.mode = \"raft\"",
        ),
        (
            config("listed", "\"gw-a\", \"gw-d\"", "[log]\nenabled = true\n"),
            "node.id gw-d is listed in cluster.voters",
        ),
    ];
    for (file, said) in cases {
        let (code, stderr) = run(&[&join[..], &[file.as_str()]].concat());
        assert_eq!(code, Some(64), "{said}: {stderr}");
        assert!(stderr.contains(said), "{said}: {stderr}");
        assert!(!data.exists(), "{said}: a data directory was created");
    }
    // A used data directory: refused before the cluster is asked.
    let file = config("used-dir", "\"gw-a\", \"gw-b\"", "[log]\nenabled = true\n");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("conclave.wal"), b"").unwrap();
    let (code, stderr) = run(&[&join[..], &[file.as_str()]].concat());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("holds a WAL"), "{stderr}");
    let (code, stderr) = run(&["init", "--token", "x", "--config", &file]);
    assert_eq!(code, Some(64), "{stderr}");
}

/// A node that names a leader which does not answer (it just died, say) is not "no node
/// answered" (69) but a moment to run the command again (75), and the message says which node
/// named which leader.
#[test]
fn a_redirect_to_a_leader_that_does_not_answer_exits_75() {
    use std::io::{Read, Write};
    // A port nothing listens on: bound, then closed.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let follower = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let follower_url = format!("http://{}", follower.local_addr().unwrap());
    let body = format!(
        "{{\"error\":\"not_leader\",\"message\":\"this node is not the leader\",\
         \"term\":3,\"leader\":\"gw-c\",\"fencing_token\":\"3:gw-c\",\
         \"leader_admin_url\":\"{dead_url}\"}}"
    );
    let location = format!("{dead_url}/v1/kv/k");
    let server = std::thread::spawn(move || {
        // Answers the one request the CLI sends it.
        let (mut stream, _) = follower.accept().unwrap();
        let mut request = [0u8; 4096];
        let _ = stream.read(&mut request).unwrap();
        let answer = format!(
            "HTTP/1.1 421 Misdirected Request\r\nContent-Type: application/json\r\n\
             Location: {location}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
    });
    let (code, stderr) = run(&["kv", "put", "k", "v", "--admin", &follower_url]);
    server.join().unwrap();
    assert_eq!(code, Some(75), "{stderr}");
    assert!(
        stderr.contains(&format!("{follower_url} names {dead_url} as the leader")),
        "{stderr}"
    );
    assert!(stderr.contains("run the command again"), "{stderr}");
}
