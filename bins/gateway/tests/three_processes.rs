//! Three real `conclave run` processes over UDP on loopback, from the ready-made
//! `config/examples/three-udp` files (with faster timings and a temporary data directory
//! given through `CONCLAVE__...` environment variables, which also exercises the layering of
//! DESIGN §9). The leader is found through the admin API, killed with SIGKILL, a new leader
//! must be agreed on within a bound, and the killed node, restarted from its WAL, rejoins as a
//! follower. At the end every node's WAL is read back to check that no node ever recorded two
//! different votes in one term, across the restart too (RAFT-1, WAL-2).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use conclave_actors::wal::{WalRecord, read_records};
use conclave_protocol::PeerId;
use serde_json::Value;

const NODES: [(&str, u16); 3] = [("a", 7070), ("b", 7071), ("c", 7072)];
/// Bound on every wait: generous against a loaded CI machine, far above the ~300 ms a
/// failover takes with these timings.
const BOUND: Duration = Duration::from_secs(30);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Cluster {
    dir: tempfile::TempDir,
    children: BTreeMap<&'static str, Child>,
    agent: ureq::Agent,
}

impl Cluster {
    fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(500)))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            dir: tempfile::tempdir().unwrap(),
            children: BTreeMap::new(),
            agent,
        }
    }

    fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("gw-{name}"))
    }

    fn start(&mut self, name: &'static str) {
        let config = repo_root().join(format!("config/examples/three-udp/node-{name}.toml"));
        let log = File::create(self.dir.path().join(format!("gw-{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_conclave"))
            .args(["run", "--config"])
            .arg(&config)
            .env("CONCLAVE__NODE__DATA_DIR", self.data_dir(name))
            .env("CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS", "50")
            .env("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MIN_MS", "250")
            .env("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MAX_MS", "500")
            .env("CONCLAVE__MEMBERSHIP__HEARTBEAT_MS", "50")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.insert(name, child);
    }

    fn kill(&mut self, name: &str) {
        if let Some(mut child) = self.children.remove(name) {
            // SIGKILL: no goodbye, no chance to flush anything — a crash.
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn status(&self, port: u16) -> Option<Value> {
        let mut response = self
            .agent
            .get(&format!("http://127.0.0.1:{port}/v1/status"))
            .call()
            .ok()?;
        response.body_mut().read_json().ok()
    }

    /// The leader (and term) every running node names, when they agree.
    fn agreed_leader(&self) -> Option<(String, u64)> {
        let mut agreed: Option<(String, u64)> = None;
        for (name, port) in NODES {
            if !self.children.contains_key(name) {
                continue;
            }
            let status = self.status(port)?;
            let claim = (
                status["leader"].as_str()?.to_owned(),
                status["term"].as_u64()?,
            );
            if agreed.as_ref().is_some_and(|seen| *seen != claim) {
                return None;
            }
            agreed = Some(claim);
        }
        agreed
    }

    fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = std::time::SystemTime::now() + BOUND;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            if std::time::SystemTime::now() > deadline {
                self.dump_logs();
                panic!("{what} within {BOUND:?}");
            }
            sleep(Duration::from_millis(20));
        }
    }

    fn dump_logs(&self) {
        for (name, _) in NODES {
            let log = std::fs::read_to_string(self.dir.path().join(format!("gw-{name}.log")))
                .unwrap_or_default();
            eprintln!("----- gw-{name} -----\n{log}");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let names: Vec<&str> = self.children.keys().copied().collect();
        for name in names {
            self.kill(name);
        }
    }
}

/// Every term in which the node's WAL recorded a vote maps to one candidate only.
fn assert_one_vote_per_term(name: &str, data_dir: &Path) {
    let mut votes: BTreeMap<u64, PeerId> = BTreeMap::new();
    for record in read_records(data_dir).unwrap() {
        if let WalRecord::HardState(state) = record {
            if let Some(vote) = state.vote {
                let first = *votes.entry(state.term).or_insert(vote);
                assert_eq!(
                    first, vote,
                    "gw-{name} voted for {first} and {vote} in term {}",
                    state.term
                );
            }
        }
    }
}

/// RAFT-1..4, WAL-2, CB-3: kill -9 of the leader, a new leader, the old one back as a
/// follower from its WAL, one vote per term throughout.
#[test]
fn kill_the_leader_and_restart_it_from_its_wal() {
    let mut cluster = Cluster::new();
    for (name, _) in NODES {
        cluster.start(name);
    }
    let (leader, term) = cluster.wait_for("a first leader agreed by all", Cluster::agreed_leader);
    let leader_name: &'static str = NODES
        .iter()
        .map(|(name, _)| *name)
        .find(|name| format!("gw-{name}") == leader)
        .unwrap();

    cluster.kill(leader_name);
    let (new_leader, new_term) = cluster.wait_for("a new leader agreed by the survivors", |c| {
        c.agreed_leader()
            .filter(|(candidate, t)| *candidate != leader && *t > term)
    });

    cluster.start(leader_name);
    let port = NODES.iter().find(|(n, _)| *n == leader_name).unwrap().1;
    cluster.wait_for("the restarted node following the new leader", |c| {
        let status = c.status(port)?;
        (status["role"] == "follower" && status["leader"] == new_leader.as_str()).then_some(())
    });
    let (still, still_term) = cluster.wait_for("all three agreeing", Cluster::agreed_leader);
    assert_eq!(
        still, new_leader,
        "the rejoining node did not depose the new leader"
    );
    assert_eq!(still_term, new_term, "nor raise the term");

    let names: Vec<&str> = NODES.iter().map(|(n, _)| *n).collect();
    for name in &names {
        cluster.kill(name);
    }
    for name in names {
        assert_one_vote_per_term(name, &cluster.data_dir(name));
    }
}
