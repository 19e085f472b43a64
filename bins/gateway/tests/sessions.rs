//! Sessions and job leases through three real `conclave run` processes (SESS-0..2), from the
//! README's `config/examples/three-udp` files with this test's own addresses and timings.
//!
//! - A worker's jobs claimed under a 2 s session stay its own while its keepalives run (its
//!   `conclave session keepalive --follow` process), past several TTLs and a 1 s lease, and a
//!   second worker's claim finds none ready; once that process is killed with SIGKILL they
//!   are ready again, each with a `session_ended` failure, while a job it claimed with a
//!   10-minute lease stays claimed.
//! - A key written with a session is deleted when the session is revoked, and a watcher of
//!   the key sees the delete.
//! - A leader whose wall clock runs two minutes ahead (libfaketime; its monotonic clock
//!   untouched) ends no lease early: a job claimed with a 60 s lease from the leader before
//!   it is still held after the new leader took back a 3 s lease of its own.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use support::{ProcessCluster, cli, conclave, example_cluster, example_config, libfaketime, text};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// An HTTP client without the harness's short timeout, for requests that stay open.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// `POST path` with a JSON body on `node`: the status and the answer.
fn post(cluster: &ProcessCluster, node: &str, path: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}{path}", cluster.admin_url(node));
    let mut response = agent().post(&url).send_json(body).unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// A session of `ttl_ms` granted by the leader: its id.
fn grant(cluster: &ProcessCluster, leader: &str, ttl_ms: u64) -> u64 {
    let (status, answer) = post(cluster, leader, "/v1/sessions", &json!({"ttl_ms": ttl_ms}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["ttl_ms"], ttl_ms, "{answer}");
    answer["session"].as_u64().unwrap()
}

/// The job `id` as the leader's linearizable read gives it.
fn job(cluster: &ProcessCluster, leader: &str, id: u64) -> Value {
    let jobs = cluster.get(leader, "/v1/jobs?limit=100").unwrap();
    jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("job {id} is listed: {jobs}"))
}

/// Enqueues a job on `queue` through the leader: its id.
fn enqueue(cluster: &ProcessCluster, leader: &str, queue: &str) -> u64 {
    let (code, answer) = cli(cluster, leader, &["jobs", "add", "work", "--queue", queue]);
    assert_eq!(code, 0, "{answer}");
    answer["job"]["id"].as_u64().unwrap()
}

/// Claims from `queue` through the leader with `extra` in the request: the job's id.
fn claim(cluster: &ProcessCluster, leader: &str, queue: &str, worker: &str, extra: Value) -> u64 {
    let mut request = json!({"worker": worker, "queue": queue});
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    let (status, answer) = post(cluster, leader, "/v1/jobs/claim", &request);
    assert_eq!(status, 200, "{answer}");
    answer["job"]["id"].as_u64().unwrap()
}

/// The value of `series` (name and labels, as printed) in a metrics text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// SESS-1, SESS-2: jobs claimed under a session are the worker's while its keepalives flow,
/// and ready again once they stop, long before a lease would have ended.
#[test]
fn a_dead_workers_session_jobs_are_ready_again_at_once() {
    let (cluster, leader) = example_cluster(&NODES);
    let jobs: Vec<u64> = (0..3).map(|_| enqueue(&cluster, &leader, "work")).collect();
    let session = grant(&cluster, &leader, 2_000);
    let held: Vec<u64> = (0..2)
        .map(|_| {
            let extra = json!({"session": session, "lease_ms": 1_000});
            claim(&cluster, &leader, "work", "w1", extra)
        })
        .collect();
    let leased = claim(
        &cluster,
        &leader,
        "work",
        "w1",
        json!({"lease_ms": 600_000}),
    );
    assert_eq!(held, jobs[..2], "the oldest jobs first");
    assert_eq!(leased, jobs[2]);
    assert_eq!(job(&cluster, &leader, held[0])["session"], session);

    // The worker's keepalives, as their own process: `conclave session keepalive --follow`,
    // one line per keepalive the leader counted.
    let mut worker = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["session", "keepalive", &session.to_string(), "--follow"])
        .args(["--admin", &cluster.admin_url(&leader)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, received) = mpsc::channel::<String>();
    let stdout = worker.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // Seven keepalives, a third of the TTL apart: the session has lived past its TTL twice
    // over on the leader's clock, and its jobs are still held — one was claimed with a 1 s
    // lease, which a session claim does not count.
    for _ in 0..7 {
        let line = received.recv_timeout(support::BOUND).unwrap();
        assert!(line.contains("kept alive for 2000 ms"), "{line}");
    }
    for id in &held {
        let job = job(&cluster, &leader, *id);
        assert_eq!(
            (job["state"].as_str(), job["worker"].as_str()),
            (Some("claimed"), Some("w1"))
        );
    }
    let (status, answer) = post(
        &cluster,
        &leader,
        "/v1/jobs/claim",
        &json!({"worker": "w2", "queue": "work"}),
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (404, Some("none_ready")),
        "{answer}"
    );
    let listed = cluster.get(&leader, "/v1/sessions").unwrap();
    assert_eq!(listed["sessions"][0]["claims"], 2, "{listed}");

    // The worker dies: kill -9 of its keepalive process.
    worker.kill().unwrap();
    worker.wait().unwrap();
    cluster.wait_for("the dead worker's session jobs ready again", |c| {
        held.iter()
            .all(|id| job(c, &leader, *id)["state"] == "ready")
            .then_some(())
    });
    for id in &held {
        let failure = &job(&cluster, &leader, *id)["last_failure"];
        assert_eq!(
            failure,
            &json!({"kind": "session_ended", "worker": "w1", "session": session})
        );
    }
    // The leader says what it did: one session expired; none is live (the gauge follows
    // within its upkeep).
    let metrics = cluster.metrics(&leader).unwrap();
    assert_eq!(
        sample(&metrics, "conclave_log_expiries_total{kind=\"session\"}"),
        Some(1.0),
        "{metrics}"
    );
    cluster.wait_for("the leader's gauge of live sessions at 0", |c| {
        let metrics = c.metrics(&leader)?;
        (sample(&metrics, "conclave_log_sessions") == Some(0.0)).then_some(())
    });
    let lease = job(&cluster, &leader, leased);
    assert_eq!(
        (lease["state"].as_str(), lease["worker"].as_str()),
        (Some("claimed"), Some("w1"))
    );
    let (status, answer) = post(
        &cluster,
        &leader,
        &format!("/v1/sessions/{session}/keepalive"),
        &json!({}),
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (404, Some("no_such_session")),
        "{answer}"
    );
}

/// A session's holder: keeps `session` alive with streaming keepalives to whichever node
/// leads, opening a new stream when one ends, and reports each keepalive with the node that
/// counted it, until `stop` says so.
fn holder(
    urls: Vec<(String, String)>,
    session: u64,
    events: mpsc::Sender<String>,
    stop: mpsc::Receiver<()>,
) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(std::time::Duration::from_millis(200)))
        .build()
        .into();
    loop {
        for (node, url) in &urls {
            if stop.try_recv().is_ok() {
                return;
            }
            let url = format!("{url}/v1/sessions/{session}/keepalive?stream=true");
            let Ok(response) = agent.post(&url).send_empty() else {
                continue;
            };
            if response.status() != 200 {
                continue;
            }
            let lines = BufReader::new(response.into_body().into_reader()).lines();
            for line in lines.map_while(Result::ok) {
                if stop.try_recv().is_ok() {
                    return;
                }
                if line == "event: keepalive" && events.send(node.clone()).is_err() {
                    return;
                }
            }
        }
    }
}

/// SESS-1: a failover ends no session whose holder keeps it alive: the new leader counts a
/// full TTL from its election, the holder's keepalives reach it, and the session, its key
/// and its claim outlive the old leader by several TTLs.
#[test]
fn a_session_outlives_a_leader_kill_while_its_holder_keeps_it_alive() {
    let (mut cluster, leader) = example_cluster(&NODES);
    let session = grant(&cluster, &leader, 2_000);
    let job_id = enqueue(&cluster, &leader, "work");
    claim(&cluster, &leader, "work", "w1", json!({"session": session}));
    let put = cli(
        &cluster,
        &leader,
        &[
            "kv",
            "put",
            "svc/w1",
            "up",
            "--session",
            &session.to_string(),
        ],
    );
    assert_eq!(put.0, 0, "{}", put.1);

    let urls: Vec<(String, String)> = NODES
        .iter()
        .map(|id| ((*id).to_owned(), cluster.admin_url(id)))
        .collect();
    let (events, counted) = mpsc::channel::<String>();
    let (stop, stopped) = mpsc::channel::<()>();
    let holding = std::thread::spawn(move || holder(urls, session, events, stopped));
    for _ in 0..2 {
        assert_eq!(counted.recv_timeout(support::BOUND).unwrap(), leader);
    }

    cluster.kill(&leader);
    // The survivors name the killed leader until they notice: wait for another.
    let (next, _) = cluster.wait_for("a new leader", |c| {
        c.agreed_leader().filter(|(id, _)| *id != leader)
    });
    // Six keepalives counted by the new leader: two TTLs and more under its lead.
    let mut by_next = 0;
    while by_next < 6 {
        let node = counted.recv_timeout(support::BOUND).unwrap();
        if node == next {
            by_next += 1;
        }
    }
    let listed = cluster.get(&next, "/v1/sessions").unwrap();
    assert_eq!(listed["sessions"][0]["session"], session, "{listed}");
    assert_eq!(listed["sessions"][0]["keys"], 1, "{listed}");
    assert_eq!(listed["sessions"][0]["claims"], 1, "{listed}");
    let held = job(&cluster, &next, job_id);
    assert_eq!(
        (held["state"].as_str(), held["session"].as_u64()),
        (Some("claimed"), Some(session))
    );
    stop.send(()).unwrap();
    drop(counted);
    holding.join().unwrap();
}

/// SESS-2: a key written with a session goes when the session is revoked, and its watcher
/// sees the delete.
#[test]
fn a_session_key_is_deleted_with_its_session_and_watched_going() {
    let (cluster, leader) = example_cluster(&NODES);
    let session = grant(&cluster, &leader, 10_000);
    let session_text = session.to_string();
    let (code, answer) = cli(
        &cluster,
        &leader,
        &["kv", "put", "svc/printer", "up", "--session", &session_text],
    );
    assert_eq!(code, 0, "{answer}");
    let (code, answer) = cli(&cluster, &leader, &["kv", "get", "svc/printer"]);
    assert_eq!(
        (code, answer["session"].as_u64()),
        (0, Some(session)),
        "{answer}"
    );

    let mut watcher = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["kv", "watch", "svc/printer", "--from", "1"])
        .args(["--admin", &cluster.admin_url(&leader)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, watched) = mpsc::channel::<String>();
    let stdout = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let first = watched.recv_timeout(support::BOUND).unwrap();
    assert!(first.starts_with("put up @"), "{first}");

    let url = format!("{}/v1/sessions/{session}", cluster.admin_url(&leader));
    let mut response = agent().delete(&url).call().unwrap();
    let revoked: Value = response.body_mut().read_json().unwrap();
    assert_eq!(revoked["deleted_keys"], 1, "{revoked}");
    let deleted = watched.recv_timeout(support::BOUND).unwrap();
    assert!(deleted.starts_with("delete @"), "{deleted}");
    let _ = watcher.kill();
    let _ = watcher.wait();
    let (code, _) = cli(&cluster, &leader, &["kv", "get", "svc/printer"]);
    assert_eq!(code, 1, "the key is gone");
    let (status, answer) = post(
        &cluster,
        &leader,
        "/v1/jobs/claim",
        &json!({"worker": "w", "session": session}),
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (404, Some("no_such_session")),
        "{answer}"
    );
    // A streaming keepalive is refused as a single one is, before any stream starts: the
    // ended session is 404 on the leader, and a follower redirects.
    let (status, answer) = post(
        &cluster,
        &leader,
        &format!("/v1/sessions/{session}/keepalive?stream=true"),
        &json!({}),
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (404, Some("no_such_session")),
        "{answer}"
    );
    let live = grant(&cluster, &leader, 10_000);
    let follower = NODES.iter().find(|id| **id != leader).unwrap();
    let (status, answer) = post(
        &cluster,
        follower,
        &format!("/v1/sessions/{live}/keepalive?stream=true"),
        &json!({}),
    );
    assert_eq!(
        (status, answer["leader"].as_str()),
        (421, Some(leader.as_str())),
        "{answer}"
    );
}

/// SESS-0: leases run on the leader's monotonic clock. A node whose wall clock is two
/// minutes ahead takes over the lead: it takes back the lease that ran out (3 s) and not the
/// one that did not (60 s), though by its wall clock that one ended a minute ago.
#[test]
fn a_leader_whose_clock_runs_ahead_ends_no_lease_early() {
    let faketime = libfaketime();
    let mut cluster = ProcessCluster::new(&NODES);
    for id in ["gw-a", "gw-b"] {
        cluster.start_from_file(id, &example_config(id));
    }
    let preload = faketime.display().to_string();
    cluster.start_from_file_with(
        "gw-c",
        &example_config("gw-c"),
        &[
            ("LD_PRELOAD", preload.as_str()),
            ("FAKETIME", "+2m"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let (mut leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    if leader == "gw-c" {
        // The CLI's mutations carry how long it waits, not a wall-clock time, so gw-c, two
        // minutes ahead, takes them.
        let admin = cluster.admin_url("gw-c");
        let moved = conclave(&["leader", "set", "gw-a", "--wait", "10", "--admin", &admin]);
        assert!(moved.status.success(), "{}", text(&moved.stderr));
        leader = cluster.wait_for("gw-a leading", |c| {
            c.agreed_leader()
                .filter(|(id, _)| id == "gw-a")
                .map(|(id, _)| id)
        });
    }
    let long = enqueue(&cluster, &leader, "q");
    claim(
        &cluster,
        &leader,
        "q",
        "w-long",
        json!({"lease_ms": 60_000}),
    );

    let admin = cluster.admin_url(&leader);
    let moved = conclave(&["leader", "set", "gw-c", "--wait", "10", "--admin", &admin]);
    assert!(moved.status.success(), "{}", text(&moved.stderr));
    cluster.wait_for("gw-c leading", |c| {
        c.agreed_leader().filter(|(id, _)| id == "gw-c")
    });
    // gw-c's wall clock is indeed ahead: a claim it grants shows its lease ending about three
    // minutes from now (60 s lease + 2 min), not one. The job goes in through the CLI, which
    // a node whose clock disagrees with the client's serves all the same.
    let (code, added) = cli(&cluster, "gw-c", &["jobs", "add", "--queue", "probe", "p"]);
    assert_eq!(code, 0, "{added}");
    let probe = added["job"]["id"].as_u64().expect("the added job's id");
    claim(
        &cluster,
        "gw-c",
        "probe",
        "w-probe",
        json!({"lease_ms": 60_000}),
    );
    let now_ms = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let until = job(&cluster, "gw-c", probe)["lease_until_unix_ms"]
        .as_u64()
        .unwrap();
    assert!(
        until > now_ms + 150_000,
        "gw-c's wall clock runs ahead: {until} vs {now_ms}"
    );

    // A 3 s lease granted by gw-c itself: once gw-c takes it back, gw-c has been leading for
    // at least 3 s on its own clock, long enough for a wall-clock expiry to have ended the
    // 60 s lease two minutes early.
    let (status, answer) = post(
        &cluster,
        "gw-c",
        "/v1/jobs",
        &json!({"payload": "p", "queue": "q"}),
    );
    assert_eq!(status, 200, "{answer}");
    let short = answer["job"]["id"].as_u64().unwrap();
    claim(&cluster, "gw-c", "q", "w-short", json!({"lease_ms": 3_000}));
    cluster.wait_for("the 3 s lease taken back by gw-c", |c| {
        (job(c, "gw-c", short)["state"] == "ready").then_some(())
    });
    let held = job(&cluster, "gw-c", long);
    assert_eq!(
        (held["state"].as_str(), held["worker"].as_str()),
        (Some("claimed"), Some("w-long")),
        "{held}"
    );
    assert_eq!(
        job(&cluster, "gw-c", short)["last_failure"],
        json!({"kind": "lease_expired", "worker": "w-short"})
    );
}
