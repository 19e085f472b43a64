//! MEM-3, PROTO-5 with real processes: gw-a and gw-2 run, then a copy of gw-a's configuration
//! is started on other ports with a data directory of its own — the realistic mistake. The
//! copy is refused and stands down; throughout, neither real node drops a frame of the other
//! as a replay, there is never a second leader, and after the copy stops the two still agree on
//! the leader they had. In both quorum modes.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use support::{BOUND, ProcessCluster};

const NODES: [&str; 2] = ["gw-a", "gw-2"];
/// The copy's name in the test's files; its configuration says `gw-a`.
const COPY: &str = "gw-a-copy";
/// How long the cluster is watched with the copy running, and after it stopped.
const WATCH: Duration = Duration::from_secs(3);

/// The copy of gw-a: its process and its admin address.
struct Copy {
    child: Child,
    admin: String,
}

impl Copy {
    /// Starts `conclave run` with gw-a's configuration moved to the ports of a third node.
    fn start(cluster: &ProcessCluster) -> Self {
        let ip = cluster.ip();
        let (udp, admin, metrics) = (
            format!("{ip}:7948"),
            format!("{ip}:7072"),
            format!("{ip}:9466"),
        );
        let data: PathBuf = cluster.dir().join(format!("{COPY}.data"));
        let text = cluster
            .config_text("gw-a")
            .replace(&cluster.udp_addr("gw-a"), &udp)
            .replace(&cluster.admin_addr("gw-a"), &admin)
            .replace(&format!("{ip}:9464"), &metrics)
            .replace(
                &cluster.data_dir("gw-a").display().to_string(),
                &data.display().to_string(),
            );
        assert!(text.contains("id = \"gw-a\""));
        let path = cluster.dir().join(format!("{COPY}.toml"));
        std::fs::write(&path, text).unwrap();
        let child = cluster
            .command(COPY)
            .args(["run", "--config"])
            .arg(&path)
            .spawn()
            .unwrap();
        Self { child, admin }
    }

    fn status(&self) -> Option<Value> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(500)))
            .build()
            .into();
        let mut response = agent
            .get(&format!("http://{}/v1/status", self.admin))
            .call()
            .ok()?;
        response.body_mut().read_json().ok()
    }

    fn stop(mut self) {
        let status = std::process::Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = SystemTime::now() + BOUND;
        while self.child.try_wait().unwrap().is_none() {
            assert!(SystemTime::now() < deadline, "the copy did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `conclave_frames_dropped_total{reason}` on node `id`.
fn dropped(cluster: &ProcessCluster, id: &str, reason: &str) -> f64 {
    let text = cluster.metrics(id).expect("metrics answer");
    let series = format!("conclave_frames_dropped_total{{reason=\"{reason}\"}}");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{id} exports no {series}"))
}

/// For `WATCH`: gw-a and gw-2 keep agreeing on `(leader, term)`, nobody else leads (the copy,
/// when `copy` is given, never does), and neither real node drops a frame as a replay.
fn watch(cluster: &ProcessCluster, copy: Option<&Copy>, expected: &(String, u64)) {
    let end = SystemTime::now() + WATCH;
    while SystemTime::now() < end {
        let agreed = cluster.agreed_leader();
        if agreed.as_ref() != Some(expected) {
            cluster.dump_logs();
            panic!("gw-a and gw-2 agree on {agreed:?}, not on {expected:?}");
        }
        let leading: Vec<&str> = NODES
            .into_iter()
            .filter(|id| cluster.status(id).is_some_and(|s| s["role"] == "leader"))
            .collect();
        assert_eq!(leading, vec![expected.0.as_str()], "one leader");
        if let Some(status) = copy.and_then(Copy::status) {
            assert_ne!(status["role"], "leader", "the copy leads: {status}");
        }
        for id in NODES {
            if dropped(cluster, id, "replay") != 0.0 {
                cluster.dump_logs();
                panic!("{id} dropped a frame as a replay");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn duplicate_is_refused_and_leaves(quorum: &str) {
    let mut cluster =
        ProcessCluster::new(&NODES).with_env("CONCLAVE__ELECTION__RAFT__QUORUM", quorum);
    cluster.start_all();
    let expected = cluster.wait_for(
        "a leader agreed by gw-a and gw-2",
        ProcessCluster::agreed_leader,
    );

    let copy = Copy::start(&cluster);
    let refused = SystemTime::now() + BOUND;
    loop {
        let status = copy.status();
        if status.as_ref().is_some_and(|s| s["quarantined"] == true) {
            break;
        }
        if SystemTime::now() > refused {
            cluster.dump_logs();
            eprintln!("----- {COPY} -----\n{}", cluster.log(COPY));
            panic!("the copy was not refused within {BOUND:?}: {status:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cluster.log(COPY).contains("this node's id was refused"));
    watch(&cluster, Some(&copy), &expected);

    copy.stop();
    watch(&cluster, None, &expected);
}

/// MEM-3, `quorum = "connected"`: the setting in which the copy split the cluster for good.
#[test]
fn duplicate_id_is_refused_and_leaves_connected_mode() {
    duplicate_is_refused_and_leaves("connected");
}

/// MEM-3, `quorum = "voters"`.
#[test]
fn duplicate_id_is_refused_and_leaves_voters_mode() {
    duplicate_is_refused_and_leaves("voters");
}
