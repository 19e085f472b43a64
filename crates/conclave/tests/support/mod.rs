//! What the embedding tests share: a node's TOML with fast timings, free loopback UDP
//! addresses, and waiting on observable state or events with a deadline.

#![allow(clippy::unwrap_used, dead_code)]

use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use conclave::{Event, Node, Subscription};

/// How long anything the tests wait for may take on a loaded machine before it counts as
/// never (elections here take a few hundred milliseconds).
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Election and membership timings ten times faster than the defaults, as the workspace's
/// other cluster tests use, with the HTTP servers off (three nodes share the process).
pub(crate) fn node_toml(
    id: &str,
    dir: &Path,
    voters: &[&str],
    udp: Option<(&str, Vec<String>)>,
) -> String {
    let voters: Vec<String> = voters.iter().map(|v| format!("{v:?}")).collect();
    let mut toml = format!(
        r#"
[node]
id = "{id}"
data_dir = {dir:?}
[cluster]
id = "embedding-test"
voters = [{voters}]
[election.raft]
heartbeat_ms = 50
election_timeout_min_ms = 300
election_timeout_max_ms = 600
[membership]
heartbeat_ms = 100
[admin]
listen = ""
[metrics]
listen = ""
"#,
        dir = dir.join(id).display().to_string(),
        voters = voters.join(", "),
    );
    if let Some((listen, peers)) = udp {
        let peers: Vec<String> = peers.iter().map(|p| format!("{p:?}")).collect();
        toml.push_str(&format!(
            "[link.udp]\nlisten = {listen:?}\npeers = [{}]\n",
            peers.join(", ")
        ));
    }
    toml
}

/// Installs a log subscriber for this test that writes through the test harness; the nodes
/// it starts log there too, so a failing test shows their logs. Keep the guard alive.
pub(crate) fn test_log() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_test_writer()
            .finish(),
    )
}

/// `n` UDP addresses free a moment ago, on a loopback address of this test's own.
pub(crate) fn free_udp_addrs(n: usize) -> Vec<String> {
    let seed = std::process::id() ^ u32::try_from(n).unwrap();
    let ip = Ipv4Addr::new(
        127,
        1 + (seed % 250) as u8,
        1 + ((seed >> 8) % 250) as u8,
        7,
    );
    let sockets: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind((ip, 0)).unwrap()).collect();
    sockets
        .iter()
        .map(|socket| socket.local_addr().unwrap().to_string())
        .collect()
}

pub(crate) fn start(toml: &str) -> Node {
    Node::start(conclave::config::from_toml_str(toml).unwrap()).unwrap()
}

/// Polls `check` until it answers, or fails the test after [`PATIENCE`].
pub(crate) fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `events` until one satisfies `wanted`, failing the test after [`PATIENCE`].
pub(crate) fn wait_event<T>(
    events: &mut Subscription,
    what: &str,
    mut wanted: impl FnMut(&Event) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(event) => {
                if let Some(found) = wanted(&event) {
                    return found;
                }
            }
            Err(RecvTimeoutError::Timeout) => panic!("never saw {what}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the node stopped before {what}"),
        }
    }
}

/// The addresses in `addrs` other than the `i`-th: node `i`'s UDP peers.
pub(crate) fn others(addrs: &[String], i: usize) -> Vec<String> {
    addrs
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, addr)| addr.clone())
        .collect()
}
