//! The admin API and the CLI against real `conclave run` processes (CB-3..6, items 4 and 11
//! of issue 8 and its first-hour list): bounded event streams and connections, a busy port,
//! `run` without `--config`, and what an operator types in the first hour — `--admin
//! host:port`, the wrong port, `leader resign` at a follower, `leader set` waiting for its
//! outcome, `cluster status`, `auto-election --cluster`, `history`.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};

use support::{BOUND, ProcessCluster};

/// The defaults of `admin.max_event_streams` and `admin.max_connections`.
const MAX_EVENT_STREAMS: usize = 16;
const MAX_CONNECTIONS: usize = 64;
/// The connections past `admin.max_connections` accepted only to be answered 503.
const OVERFLOW_CONNECTIONS: usize = 16;

/// Sends `GET path` on a new connection to `addr` and reads the answer's head (status line
/// and headers); the connection stays open for the caller.
fn get_head(addr: &str, path: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!(
                "no answer head from {addr}{path}: {other:?} after {:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

/// The rest of an answer whose connection the server closes after it.
fn rest(mut stream: TcpStream) -> String {
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body
}

/// The value of the series `series` (name and labels exactly as exported) in `metrics`.
fn metric(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

/// Item 4: more event-stream subscribers than `admin.max_event_streams` are refused with a
/// 503 naming the bound, and counted, while status and metrics still answer; more connections
/// than `admin.max_connections` are refused the same way; once they close, the API answers
/// again.
#[test]
fn event_streams_and_connections_past_their_bounds_are_refused_and_counted() {
    let mut cluster = ProcessCluster::new(&["solo"]);
    cluster.start("solo");
    cluster.wait_for("the node leading", |c| {
        c.status("solo").filter(|s| s["role"] == "leader")
    });
    let admin = cluster.admin_addr("solo");

    let extra = 4;
    let mut streams = Vec::new();
    let mut refusals = Vec::new();
    for _ in 0..MAX_EVENT_STREAMS + extra {
        let (stream, head) = get_head(&admin, "/v1/events");
        if head.starts_with("HTTP/1.1 200") {
            assert!(head.contains("text/event-stream"), "{head}");
            streams.push(stream);
        } else {
            refusals.push((head, rest(stream)));
        }
    }
    assert_eq!(
        streams.len(),
        MAX_EVENT_STREAMS,
        "subscribers accepted; refusals: {refusals:?}"
    );
    assert_eq!(refusals.len(), extra);
    for (head, body) in &refusals {
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        assert!(body.contains("admin.max_event_streams"), "{body}");
    }
    // The node still answers, status and metrics alike, and has counted the refusals.
    let status = cluster
        .status("solo")
        .expect("status answers beside the streams");
    assert_eq!(status["role"], "leader");
    let metrics = cluster
        .metrics("solo")
        .expect("metrics answer beside the streams");
    assert_eq!(
        metric(
            &metrics,
            "conclave_admin_refused_total{reason=\"event_streams\"}"
        ),
        Some(extra as f64),
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "conclave_admin_event_streams"),
        Some(MAX_EVENT_STREAMS as f64)
    );

    // Fill every connection the API serves with idle ones: the next request is refused,
    // naming the bound, rather than left to wait.
    let idle: Vec<TcpStream> = (streams.len()..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(&admin).unwrap())
        .collect();
    let (stream, head) = get_head(&admin, "/v1/status");
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(rest(stream).contains("admin.max_connections"));
    let metrics = cluster.metrics("solo").unwrap();
    assert_eq!(
        metric(
            &metrics,
            "conclave_admin_refused_total{reason=\"connections\"}"
        ),
        Some(1.0),
        "{metrics}"
    );

    // Past the places kept for those answers as well, a connection is closed as soon as it
    // is accepted, with nothing read or written; the metrics endpoint, which the same worker
    // serves, keeps its own places and still answers.
    let overflow: Vec<TcpStream> = (0..OVERFLOW_CONNECTIONS)
        .map(|_| TcpStream::connect(&admin).unwrap())
        .collect();
    let mut past = TcpStream::connect(&admin).unwrap();
    past.set_read_timeout(Some(BOUND)).unwrap();
    // Written may be refused already: the server may have closed it before this.
    let _ = write!(past, "GET /v1/status HTTP/1.1\r\nHost: {admin}\r\n\r\n");
    let mut byte = [0u8; 1];
    let read = past.read(&mut byte);
    assert!(
        match &read {
            Ok(0) => true,
            Err(err) => err.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        },
        "a connection past every place is closed unanswered, not queued or served: {read:?}"
    );
    assert!(
        cluster.metrics("solo").is_some(),
        "metrics answer while the admin API is full"
    );

    drop(past);
    drop(overflow);
    drop(idle);
    drop(streams);
    cluster.wait_for("the admin API answering once the connections closed", |c| {
        c.status("solo")
    });
}

/// Item 11: a busy admin or metrics port ends `conclave run` with exit code 69 and an error
/// naming the key and the address — not a panic.
#[test]
fn a_busy_admin_or_metrics_port_is_a_clear_error() {
    let mut cluster = ProcessCluster::new(&["solo"]);
    let metrics_addr = cluster
        .metrics_url("solo")
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    for (key, addr) in [
        ("admin.listen", cluster.admin_addr("solo")),
        ("metrics.listen", metrics_addr),
    ] {
        let squatter = TcpListener::bind(&addr).unwrap();
        cluster.start("solo");
        let status = cluster.wait_exit("solo");
        drop(squatter);
        let log = cluster.log("solo");
        assert_eq!(status.code(), Some(69), "{key}: {status:?}\n{log}");
        assert!(
            log.contains(&format!("cannot bind {key} to {addr}")),
            "{key}:\n{log}"
        );
        assert!(!log.contains("panicked"), "{key}:\n{log}");
        std::fs::remove_file(cluster.log_path("solo")).unwrap();
    }
}

/// Kills the process when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `conclave run` without `--config` runs on the built-in defaults (here with its addresses
/// moved by the environment, so it runs beside the README's cluster).
#[test]
fn run_without_a_config_file_uses_the_defaults() {
    let cluster = ProcessCluster::new(&["node-1"]);
    let mut command = cluster.command("node-1");
    command
        .current_dir(cluster.dir())
        .arg("run")
        .env("CONCLAVE__ADMIN__LISTEN", cluster.admin_addr("node-1"))
        .env("CONCLAVE__METRICS__LISTEN", "");
    let _node = Running(command.spawn().unwrap());
    let status = cluster.wait_for("the default node's admin API", |c| {
        c.status("node-1").filter(|s| s["role"] == "leader")
    });
    assert_eq!(status["node_id"], "node-1");
    assert_eq!(status["cluster_id"], "default");
    assert!(cluster.dir().join("conclave-data").is_dir());
}

/// Runs the CLI with `args`; none of the caller's CONCLAVE_* variables leak in.
fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(args)
        .env_remove("CONCLAVE_ADMIN")
        .env_remove("CONCLAVE_ENDPOINTS")
        .env_remove("CONCLAVE_ADMIN_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn show(output: &Output) -> String {
    format!(
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The first hour of an operator, against three processes that know each other's admin API
/// (`admin.peer_urls`).
#[test]
fn an_operators_first_hour() {
    const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
    let cluster = ProcessCluster::new(&NODES);
    let urls = cluster.peer_urls();
    let mut cluster = cluster.with_env("CONCLAVE__ADMIN__PEER_URLS", &urls);
    cluster.start_all();
    let (leader, _) = cluster.wait_for("a leader", ProcessCluster::agreed_leader);
    let follower = NODES.iter().find(|id| **id != leader).unwrap().to_string();

    // `--admin host:port`, no scheme; before the verb, as scripts for earlier versions
    // write it.
    let out = cli(&["--admin", &cluster.admin_addr(&follower), "status"]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stdout(&out).contains(&format!("leader      {leader}")),
        "{}",
        show(&out)
    );

    // The metrics port is not the admin API, and the CLI says so.
    let metrics = cluster.metrics_url(&follower);
    let out = cli(&["status", "--admin", metrics.trim_end_matches("/metrics")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("is not a conclave admin API"),
        "{}",
        show(&out)
    );
    // Nothing listening at all: 69, and what to do.
    let out = cli(&["status", "--admin", "127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(69), "{}", show(&out));
    assert!(stderr(&out).contains("cannot reach the admin API at http://127.0.0.1:1"));

    // `leader resign` sent to a follower reaches the leader.
    let out = cli(&[
        "leader",
        "resign",
        "--admin",
        &cluster.admin_addr(&follower),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stderr(&out).contains(&format!("passing the request on to the leader {leader}")),
        "{}",
        show(&out)
    );
    // Issue 15: it waits for the outcome and prints the state after the change, not the
    // one before it.
    let now = stdout(&out)
        .lines()
        .find_map(|line| line.strip_prefix("now: ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no state after the resign:\n{}", show(&out)));
    assert!(
        now.starts_with(&format!("{leader}: follower in term ")),
        "{now}\n{}",
        show(&out)
    );
    assert!(
        !now.contains(&format!("leader {leader} ")),
        "{}",
        show(&out)
    );
    let (leader, _) = cluster.wait_for("a new leader after the resign", |c| {
        c.agreed_leader().filter(|(new, _)| *new != leader)
    });

    // `leader set` waits for the outcome and shows the state after it.
    let target = NODES.iter().find(|id| **id != leader).unwrap().to_string();
    let asked = NODES
        .iter()
        .find(|id| **id != leader && **id != target)
        .unwrap()
        .to_string();
    let out = cli(&[
        "leader",
        "set",
        &target,
        "--admin",
        &cluster.admin_url(&asked),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stdout(&out).contains(&format!("leader {target} (fencing token")),
        "{}",
        show(&out)
    );

    let out = cli(&["history", "--admin", &cluster.admin_addr(&asked)]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stdout(&out).contains("AT (UTC)") && stdout(&out).contains("AGO"),
        "{}",
        show(&out)
    );

    // The switch on every voter, shown per node by `cluster status`.
    let admin = cluster.admin_addr(&asked);
    let out = cli(&["auto-election", "off", "--cluster", "--admin", &admin]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(stdout(&out).matches("applied").count(), 3, "{}", show(&out));
    for id in NODES {
        assert_eq!(cluster.status(id).unwrap()["auto_election"], false, "{id}");
    }
    let out = cli(&["cluster", "status", "--admin", &admin]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(stdout(&out).matches(" OFF ").count(), 3, "{}", show(&out));
    assert!(
        stdout(&out).contains("automatic election is off on"),
        "{}",
        show(&out)
    );
    let out = cli(&["auto-election", "on", "--cluster", "--admin", &admin]);
    assert!(out.status.success(), "{}", show(&out));

    // A node down: cluster status flags it, a transfer to it does not complete, and the
    // cluster-wide switch reports the voter it could not reach.
    let down = NODES
        .iter()
        .find(|id| **id != target && **id != asked)
        .unwrap()
        .to_string();
    cluster.kill(&down);
    let out = cli(&["cluster", "status", "--admin", &admin]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout(&out).contains(&format!("{down} does not answer")),
        "{}",
        show(&out)
    );
    assert!(stdout(&out).contains("NO ANSWER"), "{}", show(&out));
    let out = cli(&["leader", "set", &down, "--wait", "2", "--admin", &admin]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains(&format!("{down} did not take the lead within 2000 ms")),
        "{}",
        show(&out)
    );
    assert!(stdout(&out).contains("now: "), "{}", show(&out));
    let out = cli(&["auto-election", "off", "--cluster", "--admin", &admin]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout(&out).contains(&format!("{down:<16} FAILED")),
        "{}",
        show(&out)
    );
    assert!(
        stderr(&out).contains(&format!("on 1 of 3 voters: {down}")),
        "{}",
        show(&out)
    );
}

/// The bounds the tests above count on are the documented defaults.
#[test]
fn the_bounds_are_the_documented_defaults() {
    let defaults = include_str!("../../../config/default.toml");
    assert!(defaults.contains(&format!("max_connections = {MAX_CONNECTIONS}\n")));
    assert!(defaults.contains(&format!("max_event_streams = {MAX_EVENT_STREAMS}\n")));
}
