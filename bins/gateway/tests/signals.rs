//! Signals and systemd at the process level (issue 8, item 8), on real `conclave run`
//! processes of the harness: SIGHUP reloads a leader's configuration without costing its
//! leadership (a changed hook applies, a key that needs a restart is refused by name, a
//! broken file is refused whole); SIGUSR1 to a leader is a graceful stop with a hand-over,
//! not a crash; under `Type=notify` the node reports READY, RELOADING, STOPPING and pings the
//! watchdog, on a socket the test binds.

#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use support::{BOUND, ProcessCluster};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// The lines of `path`, or none yet.
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until node `id`'s log has grown a line containing every one of `needles` past byte
/// `from`; returns that line.
fn wait_for_log(cluster: &ProcessCluster, id: &str, from: usize, needles: &[&str]) -> String {
    cluster.wait_for(&format!("{id} to log {needles:?}"), |c| {
        let log = c.log(id);
        log.get(from..)?
            .lines()
            .find(|line| needles.iter().all(|needle| line.contains(needle)))
            .map(str::to_owned)
    })
}

/// Item 8: SIGHUP to the leader re-reads its file: the changed `on_peer_status` hook runs from
/// then on, a changed `membership.heartbeat_ms` is refused at WARN by name, and the leader
/// keeps leading in the same term. A broken file on a second SIGHUP is refused with its
/// problem and changes nothing.
#[test]
fn sighup_keeps_the_leader_and_applies_a_changed_hook() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("peer-hook");
    let mut cluster = ProcessCluster::new(&NODES).with_toml(&format!(
        "[hooks]\non_peer_status = [\"echo BEFORE-$CONCLAVE_PEER_ID-$CONCLAVE_PEER_CHANGE \
         >> '{}'-$CONCLAVE_NODE_ID\"]\n",
        trace.display()
    ));
    cluster.start_all();
    let (leader, term) = cluster.wait_for("a leader agreed by all", ProcessCluster::agreed_leader);
    let leader_trace = dir.path().join(format!("peer-hook-{leader}"));
    let follower = NODES.iter().find(|id| **id != leader).unwrap().to_string();

    // The file now says AFTER, and a heartbeat the running node cannot change.
    let edited = cluster
        .config_text(&leader)
        .replace("BEFORE", "AFTER")
        .replace(
            "[membership]\nheartbeat_ms = 50",
            "[membership]\nheartbeat_ms = 60",
        );
    assert!(edited.contains("AFTER") && edited.contains("heartbeat_ms = 60"));
    std::fs::write(cluster.config_path(&leader), &edited).unwrap();
    let mark = cluster.log(&leader).len();
    cluster.signal(&leader, 1);
    let applied = wait_for_log(&cluster, &leader, mark, &["configuration reloaded"]);
    assert!(applied.contains("INFO"), "{applied}");
    assert!(applied.contains("hooks.on_peer_status"), "{applied}");
    let refused = wait_for_log(
        &cluster,
        &leader,
        mark,
        &["membership.heartbeat_ms changed"],
    );
    assert!(
        refused.contains("WARN") && refused.contains("takes a restart"),
        "{refused}"
    );
    wait_for_log(
        &cluster,
        &leader,
        mark,
        &["hooks.on_peer_status reloaded", "INFO"],
    );

    // A follower leaves and comes back: the leader's hook runs the new command.
    let before = lines(&leader_trace).len();
    assert_eq!(cluster.stop(&follower).code(), Some(0));
    cluster.start(&follower);
    cluster.wait_for("the leader's reloaded hook to run", |_| {
        lines(&leader_trace)[before..]
            .iter()
            .any(|line| line.starts_with(&format!("AFTER-{follower}-")))
            .then_some(())
    });
    assert!(
        lines(&leader_trace)[before..]
            .iter()
            .all(|line| line.starts_with("AFTER-")),
        "the old command ran after the reload: {:?}",
        lines(&leader_trace)
    );
    assert_eq!(
        cluster.wait_for("all three agreeing again", ProcessCluster::agreed_leader),
        (leader.clone(), term),
        "the reload cost the leader its leadership"
    );

    // A broken file: refused, named, nothing changes.
    std::fs::write(cluster.config_path(&leader), "[node\nid = ").unwrap();
    let mark = cluster.log(&leader).len();
    cluster.signal(&leader, 1);
    let broken = wait_for_log(&cluster, &leader, mark, &["reload refused"]);
    assert!(
        broken.contains("ERROR") && broken.contains("not valid TOML"),
        "{broken}"
    );
    let before = lines(&leader_trace).len();
    assert_eq!(cluster.stop(&follower).code(), Some(0));
    cluster.wait_for("the hook to run for the leaving follower", |_| {
        lines(&leader_trace)[before..]
            .iter()
            .any(|line| line.starts_with(&format!("AFTER-{follower}-left")))
            .then_some(())
    });
    let status = cluster.status(&leader).unwrap();
    assert_eq!(status["role"], "leader");
    assert_eq!(status["term"], term);
}

/// Item 8: SIGUSR1 to the leader is a graceful stop: it hands over (the new leader's history
/// records a transfer, not an election after a timeout), the survivors agree on the new
/// leader, and the process exits 0 — where it used to die like `kill -9`.
#[test]
fn sigusr1_to_the_leader_hands_over_and_exits_0() {
    let mut cluster = ProcessCluster::new(&NODES);
    cluster.start_all();
    let (leader, term) = cluster.wait_for("a leader agreed by all", ProcessCluster::agreed_leader);

    cluster.signal(&leader, 10);
    let status = cluster.wait_exit(&leader);
    assert_eq!(status.code(), Some(0), "{leader} exited with {status}");
    let log = cluster.log(&leader);
    assert!(
        log.contains("SIGUSR1: stopping gracefully"),
        "no graceful stop in the log:\n{log}"
    );
    assert!(
        log.contains("stopping while leading; handing leadership over"),
        "{log}"
    );

    let (successor, new_term) = cluster.wait_for("the survivors to agree on a new leader", |c| {
        c.agreed_leader()
            .filter(|(candidate, t)| *candidate != leader && *t > term)
    });
    let history = cluster.get(&successor, "/v1/history").unwrap();
    let took_over = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["term"] == new_term && record["leader"] == successor.as_str())
        .unwrap_or_else(|| panic!("no record of {successor} in term {new_term}: {history}"));
    assert_eq!(took_over["cause"], "transfer", "{history}");
}

/// A datagram received on `socket`, bounded by the harness's wait.
fn next_notification(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 512];
    let n = socket
        .recv(&mut buf)
        .unwrap_or_else(|err| panic!("no notification within {BOUND:?}: {err}"));
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Packaging: under `Type=notify` the node says READY once it runs, pings the watchdog every
/// half `WATCHDOG_USEC` while healthy, brackets a reload with RELOADING and READY, and says
/// STOPPING when SIGTERM stops it; hooks do not inherit the variables.
#[test]
fn systemd_notifications_reach_the_notify_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(BOUND)).unwrap();
    let hook_env = dir.path().join("hook-env");
    let mut cluster = ProcessCluster::new(&["gw-a"])
        .with_env("NOTIFY_SOCKET", socket_path.to_str().unwrap())
        .with_env("WATCHDOG_USEC", "300000")
        .with_toml(&format!(
            "[hooks]\non_leader = [\"env > '{}.tmp' && mv '{0}.tmp' '{0}'\"]\n",
            hook_env.display()
        ));
    cluster.start("gw-a");

    let ready = next_notification(&socket);
    assert!(ready.starts_with("READY=1\n"), "{ready:?}");
    assert!(ready.contains("STATUS=node gw-a running"), "{ready:?}");
    let mut pings = 0;
    while pings < 3 {
        let state = next_notification(&socket);
        assert_eq!(state, "WATCHDOG=1");
        pings += 1;
    }

    cluster.signal("gw-a", 1);
    let reloading = loop {
        let state = next_notification(&socket);
        if state != "WATCHDOG=1" {
            break state;
        }
    };
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    let usec = reloading.trim_start_matches("RELOADING=1\nMONOTONIC_USEC=");
    assert!(
        usec.parse::<u64>().is_ok_and(|usec| usec > 0),
        "{reloading:?}"
    );
    let after = loop {
        let state = next_notification(&socket);
        if state != "WATCHDOG=1" {
            break state;
        }
    };
    assert!(after.starts_with("READY=1\n"), "{after:?}");

    cluster.wait_for("the single node's on_leader hook", |_| {
        hook_env.exists().then_some(())
    });
    let environment = std::fs::read_to_string(&hook_env).unwrap();
    for variable in ["NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID="] {
        assert!(
            !environment.lines().any(|line| line.starts_with(variable)),
            "a hook inherited {variable}"
        );
    }

    cluster.signal("gw-a", 15);
    let stopping = loop {
        let state = next_notification(&socket);
        if state != "WATCHDOG=1" {
            break state;
        }
    };
    assert_eq!(stopping, "STOPPING=1");
    assert_eq!(cluster.wait_exit("gw-a").code(), Some(0));
}
