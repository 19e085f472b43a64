//! A cluster of real `conclave run` processes for the multi-process tests (docs/design.md §10).
//!
//! Every cluster lives on a loopback address of its own, drawn at random from 127.0.0.0/8
//! (never 127.0.0.1), so its fixed ports (UDP 7946+i, admin 7070+i, metrics 9464+i) collide
//! neither with another test running at the same time nor with the README's example cluster
//! on 127.0.0.1. Each node gets a configuration file written into the cluster's temporary
//! directory, its data directory there, and its log there (printed when a wait fails).
//! Waits poll the nodes' admin APIs with a generous bound; nothing sleeps and then asserts.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::collections::BTreeMap;
use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, SystemTime};

use conclave_storage::{WalRecord, read_records};
use serde_json::Value;

/// Bound on every wait: generous against a loaded CI machine, far above what a failover
/// takes with the harness's timings.
pub(crate) const BOUND: Duration = Duration::from_secs(30);

/// The first UDP, admin and metrics ports; node `i` (from 0) adds `i`.
const UDP_BASE: u16 = 7946;
const ADMIN_BASE: u16 = 7070;
const METRICS_BASE: u16 = 9464;

/// A loopback address no other test is likely to use: 127.x.y.z with x, y, z in 1..=254.
pub(crate) fn random_loopback() -> Ipv4Addr {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    let bits = hasher.finish().to_le_bytes();
    let octet = |byte: u8| 1 + byte % 254;
    Ipv4Addr::new(127, octet(bits[0]), octet(bits[1]), octet(bits[2]))
}

/// One node of a [`ProcessCluster`].
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    /// Its peer id, such as `gw-a`.
    pub(crate) id: String,
    /// Its position: ports are the bases plus this.
    pub(crate) index: u16,
}

/// A cluster of `conclave run` processes on one random loopback address.
pub(crate) struct ProcessCluster {
    dir: tempfile::TempDir,
    ip: Ipv4Addr,
    nodes: Vec<NodeSpec>,
    /// Extra TOML appended to every node's configuration (after the generated keys, so it may
    /// add keys in sections the harness does not write, or whole sections).
    extra_toml: String,
    /// The `[election…]` part of every node's configuration: raft with fast timings unless
    /// [`Self::with_election`] replaced it (a key of another mode is an error).
    election_toml: String,
    /// Environment set on every process.
    env: Vec<(String, String)>,
    children: BTreeMap<String, Child>,
    agent: ureq::Agent,
}

impl ProcessCluster {
    /// A cluster whose voters are `ids`, with fast timings (heartbeat 50 ms, election timeout
    /// 250–500 ms, membership heartbeat 50 ms). Nothing runs until [`Self::start`].
    pub(crate) fn new(ids: &[&str]) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(500)))
            .http_status_as_error(false)
            .build()
            .into();
        let nodes = ids
            .iter()
            .enumerate()
            .map(|(index, id)| NodeSpec {
                id: (*id).to_owned(),
                index: u16::try_from(index).expect("a handful of nodes"),
            })
            .collect();
        Self {
            dir: tempfile::tempdir().expect("temporary directory"),
            ip: random_loopback(),
            nodes,
            extra_toml: String::new(),
            election_toml: "[election.raft]\nheartbeat_ms = 50\nelection_timeout_min_ms = 250\n\
                            election_timeout_max_ms = 500\n"
                .to_owned(),
            env: vec![("RUST_LOG".to_owned(), "info".to_owned())],
            children: BTreeMap::new(),
            agent,
        }
    }

    /// Appends `toml` to every node's configuration file (written at each start).
    pub(crate) fn with_toml(mut self, toml: &str) -> Self {
        self.extra_toml.push_str(toml);
        self.extra_toml.push('\n');
        self
    }

    /// Replaces the `[election…]` part of every node's configuration (by default raft with fast
    /// timings): another mode's sections.
    pub(crate) fn with_election(mut self, toml: &str) -> Self {
        toml.clone_into(&mut self.election_toml);
        self
    }

    /// Sets an environment variable on every process started from now on.
    pub(crate) fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The loopback address every node of this cluster listens on.
    pub(crate) fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The cluster's temporary directory.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The node ids, in order.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.nodes.iter().map(|node| node.id.clone()).collect()
    }

    fn spec(&self, id: &str) -> &NodeSpec {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    /// `ip:port` of a node's UDP link.
    pub(crate) fn udp_addr(&self, id: &str) -> String {
        format!("{}:{}", self.ip, UDP_BASE + self.spec(id).index)
    }

    /// `ip:port` of a node's admin API.
    pub(crate) fn admin_addr(&self, id: &str) -> String {
        format!("{}:{}", self.ip, ADMIN_BASE + self.spec(id).index)
    }

    /// The admin API's base URL of a node.
    pub(crate) fn admin_url(&self, id: &str) -> String {
        format!("http://{}", self.admin_addr(id))
    }

    /// `admin.peer_urls` naming every node of this cluster: `gw-a=http://…,gw-b=…`.
    pub(crate) fn peer_urls(&self) -> String {
        self.ids()
            .iter()
            .map(|id| format!("{id}={}", self.admin_url(id)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The metrics endpoint of a node.
    pub(crate) fn metrics_url(&self, id: &str) -> String {
        format!(
            "http://{}:{}/metrics",
            self.ip,
            METRICS_BASE + self.spec(id).index
        )
    }

    /// A node's data directory.
    pub(crate) fn data_dir(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("{id}.data"))
    }

    /// A node's configuration file (written by [`Self::write_config`]).
    pub(crate) fn config_path(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("{id}.toml"))
    }

    /// A node's log file: stdout and stderr of every process started for it, appended.
    pub(crate) fn log_path(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("{id}.log"))
    }

    /// Everything a node has logged so far.
    pub(crate) fn log(&self, id: &str) -> String {
        std::fs::read_to_string(self.log_path(id)).unwrap_or_default()
    }

    /// The configuration the harness gives node `id`.
    pub(crate) fn config_text(&self, id: &str) -> String {
        let spec = self.spec(id);
        let voters: Vec<String> = self.nodes.iter().map(|n| format!("{:?}", n.id)).collect();
        let peers: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.id != spec.id)
            .map(|n| format!("{:?}", self.udp_addr(&n.id)))
            .collect();
        format!(
            "[node]\nid = {id:?}\ndata_dir = {data:?}\n\n\
             [cluster]\nid = \"process-test\"\nvoters = [{voters}]\n\n\
             {election}\n\
             [membership]\nheartbeat_ms = 50\n\n\
             [link.udp]\nlisten = {udp:?}\npeers = [{peers}]\n\n\
             [admin]\nlisten = {admin:?}\n\n\
             [metrics]\nlisten = \"{ip}:{metrics}\"\n\n{extra}",
            id = spec.id,
            data = self.data_dir(id).display().to_string(),
            voters = voters.join(", "),
            udp = self.udp_addr(id),
            peers = peers.join(", "),
            admin = self.admin_addr(id),
            ip = self.ip,
            metrics = METRICS_BASE + spec.index,
            extra = self.extra_toml,
            election = self.election_toml,
        )
    }

    /// Writes node `id`'s configuration file and returns its path.
    pub(crate) fn write_config(&self, id: &str) -> PathBuf {
        let path = self.config_path(id);
        std::fs::write(&path, self.config_text(id)).expect("write the node's configuration");
        path
    }

    /// A `conclave` command with the cluster's environment and node `id`'s log as output; the
    /// caller adds the arguments.
    pub(crate) fn command(&self, id: &str) -> Command {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(id))
            .expect("open the node's log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_conclave"));
        command
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log);
        command
    }

    /// Starts `conclave run` for node `id` with its (re)written configuration.
    pub(crate) fn start(&mut self, id: &str) {
        self.start_with(id, &[]);
    }

    /// Starts node `id` with extra environment variables for this process only.
    pub(crate) fn start_with(&mut self, id: &str, env: &[(&str, &str)]) {
        assert!(
            !self.children.contains_key(id),
            "node {id} is already running"
        );
        let config = self.write_config(id);
        let child = self
            .command(id)
            .args(["run", "--config"])
            .arg(&config)
            .envs(env.iter().copied())
            .spawn()
            .expect("spawn conclave run");
        self.children.insert(id.to_owned(), child);
    }

    /// Starts node `id` with `text` as its whole configuration file, for a test that shapes a
    /// node's configuration itself (a node added at runtime names only the voters it joins).
    pub(crate) fn start_with_config(&mut self, id: &str, text: &str) {
        assert!(
            !self.children.contains_key(id),
            "node {id} is already running"
        );
        let path = self.config_path(id);
        std::fs::write(&path, text).expect("write the node's configuration");
        let child = self
            .command(id)
            .args(["run", "--config"])
            .arg(&path)
            .spawn()
            .expect("spawn conclave run");
        self.children.insert(id.to_owned(), child);
    }

    /// Starts node `id` from a configuration file of the user's (such as the README's
    /// `config/examples/three-udp/node-a.toml`) with this cluster's addresses, data directory
    /// and fast timings laid over it through `CONCLAVE__...` environment variables, which
    /// also exercises the layering of docs/design.md §9. The file's `node.id` must be `id`.
    pub(crate) fn start_from_file(&mut self, id: &str, config: &Path) {
        self.start_over_file(
            id,
            config,
            &[
                ("CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS", "50"),
                ("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MIN_MS", "250"),
                ("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MAX_MS", "500"),
                ("CONCLAVE__MEMBERSHIP__HEARTBEAT_MS", "50"),
            ],
        );
    }

    /// [`Self::start_from_file`] with extra environment variables for this process only
    /// (such as a preloaded library that shifts its wall clock).
    pub(crate) fn start_from_file_with(&mut self, id: &str, config: &Path, env: &[(&str, &str)]) {
        let mut all = vec![
            ("CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS", "50"),
            ("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MIN_MS", "250"),
            ("CONCLAVE__ELECTION__RAFT__ELECTION_TIMEOUT_MAX_MS", "500"),
            ("CONCLAVE__MEMBERSHIP__HEARTBEAT_MS", "50"),
        ];
        all.extend_from_slice(env);
        self.start_over_file(id, config, &all);
    }

    /// Starts node `id` from an example file of a mode other than raft (such as
    /// `config/examples/three-priority/node-a.toml`) with this cluster's addresses and data
    /// directory laid over it, like [`Self::start_from_file`], but with the file's own timings:
    /// raft's settings would be refused in another mode's file.
    pub(crate) fn start_from_example(&mut self, id: &str, config: &Path) {
        self.start_over_file(id, config, &[]);
    }

    /// Starts node `id` from `config` with this cluster's addresses and data directory laid
    /// over it, and `env` on top.
    fn start_over_file(&mut self, id: &str, config: &Path, env: &[(&str, &str)]) {
        assert!(
            !self.children.contains_key(id),
            "node {id} is already running"
        );
        let peers: Vec<String> = self
            .ids()
            .iter()
            .filter(|other| *other != id)
            .map(|other| self.udp_addr(other))
            .collect();
        let metrics = self
            .metrics_url(id)
            .trim_start_matches("http://")
            .trim_end_matches("/metrics")
            .to_owned();
        let child = self
            .command(id)
            .args(["run", "--config"])
            .arg(config)
            .env("CONCLAVE__NODE__DATA_DIR", self.data_dir(id))
            .env("CONCLAVE__LINK__UDP__LISTEN", self.udp_addr(id))
            .env("CONCLAVE__LINK__UDP__PEERS", peers.join(","))
            .env("CONCLAVE__ADMIN__LISTEN", self.admin_addr(id))
            // The file's peer_urls name the README's cluster; these name this one's.
            .env("CONCLAVE__ADMIN__PEER_URLS", self.peer_urls())
            .env("CONCLAVE__METRICS__LISTEN", metrics)
            .envs(env.iter().copied())
            .spawn()
            .expect("spawn conclave run");
        self.children.insert(id.to_owned(), child);
    }

    /// Starts every node.
    pub(crate) fn start_all(&mut self) {
        for id in self.ids() {
            self.start(&id);
        }
    }

    /// Whether the harness started node `id` and has not stopped it.
    pub(crate) fn is_running(&self, id: &str) -> bool {
        self.children.contains_key(id)
    }

    /// SIGKILL: no goodbye, no chance to flush anything — a crash.
    pub(crate) fn kill(&mut self, id: &str) {
        if let Some(mut child) = self.children.remove(id) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (a number, such as 15 for SIGTERM) to node `id`'s process.
    pub(crate) fn signal(&self, id: &str, signal: i32) {
        let child = self
            .children
            .get(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {id} failed");
    }

    /// The process id of node `id`, which must be running.
    pub(crate) fn pid(&self, id: &str) -> u32 {
        self.children
            .get(id)
            .unwrap_or_else(|| panic!("node {id} is not running"))
            .id()
    }

    /// SIGTERM, then waits (bounded) for the process to exit; returns how it exited.
    pub(crate) fn stop(&mut self, id: &str) -> ExitStatus {
        self.signal(id, 15);
        self.wait_exit(id)
    }

    /// Waits (bounded) for node `id`'s process to exit on its own; returns how it exited.
    pub(crate) fn wait_exit(&mut self, id: &str) -> ExitStatus {
        let mut child = self
            .children
            .remove(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        let deadline = SystemTime::now() + BOUND;
        loop {
            if let Some(status) = child.try_wait().expect("poll the child") {
                return status;
            }
            if SystemTime::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.dump_logs();
                panic!("node {id} did not exit within {BOUND:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// GET `path` on node `id`'s admin API, as JSON; `None` when it does not answer.
    pub(crate) fn get(&self, id: &str, path: &str) -> Option<Value> {
        let url = format!("{}{path}", self.admin_url(id));
        let mut response = self.agent.get(&url).call().ok()?;
        response.body_mut().read_json().ok()
    }

    /// GET `/v1/status` on node `id`.
    pub(crate) fn status(&self, id: &str) -> Option<Value> {
        self.get(id, "/v1/status")
    }

    /// The metrics text of node `id`.
    pub(crate) fn metrics(&self, id: &str) -> Option<String> {
        let mut response = self.agent.get(&self.metrics_url(id)).call().ok()?;
        response.body_mut().read_to_string().ok()
    }

    /// The leader (and term) every running node names, when they all answer and agree.
    pub(crate) fn agreed_leader(&self) -> Option<(String, u64)> {
        let mut agreed: Option<(String, u64)> = None;
        for id in self.children.keys() {
            let status = self.status(id)?;
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

    /// The leader (and term) every running node names, when they all agree and none of them
    /// abstains (WAL-2).
    pub(crate) fn agreed_leader_none_abstaining(&self) -> Option<(String, u64)> {
        let agreed = self.agreed_leader()?;
        self.children
            .keys()
            .all(|id| self.status(id).is_some_and(|s| s["abstaining"] == false))
            .then_some(agreed)
    }

    /// Polls `check` until it gives a value; panics with every node's log after [`BOUND`].
    pub(crate) fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = SystemTime::now() + BOUND;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            if SystemTime::now() > deadline {
                self.dump_logs();
                panic!("{what} within {BOUND:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Prints every node's log to stderr (the test's output).
    pub(crate) fn dump_logs(&self) {
        for id in self.ids() {
            eprintln!("----- {id} -----\n{}", self.log(&id));
        }
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        let ids: Vec<String> = self.children.keys().cloned().collect();
        for id in ids {
            self.kill(&id);
        }
    }
}

/// Every `(term, vote)` the WAL in `data_dir` records.
pub(crate) fn votes(data_dir: &Path) -> Vec<(u64, String)> {
    read_records(data_dir)
        .expect("read the WAL's records")
        .into_iter()
        .filter_map(|record| match record {
            WalRecord::HardState(state) => state.vote.map(|vote| (state.term, vote.to_string())),
            _ => None,
        })
        .collect()
}

/// Panics if a term holds two different votes.
pub(crate) fn assert_one_vote_per_term(id: &str, votes: &[(u64, String)]) {
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for (term, vote) in votes {
        let first = *seen.entry(*term).or_insert(vote);
        assert_eq!(
            first, vote,
            "{id} voted for {first} and {vote} in term {term}"
        );
    }
}

/// The README's example file of node `id` (`gw-a` → `config/examples/three-udp/node-a.toml`).
pub(crate) fn example_config(id: &str) -> PathBuf {
    let file = id.replace("gw-", "node-");
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../config/examples/three-udp/{file}.toml"))
}

/// `conclave ARGS --admin <node> --json` against node `node` of `cluster`: the exit code and
/// the JSON answer (null when it printed none).
pub(crate) fn cli(cluster: &ProcessCluster, node: &str, args: &[&str]) -> (i32, Value) {
    let admin = cluster.admin_url(node);
    let mut all = args.to_vec();
    all.extend_from_slice(&["--admin", admin.as_str(), "--json"]);
    let output = conclave(&all);
    let code = output.status.code().unwrap_or(-1);
    let answer = serde_json::from_str(text(&output.stdout).trim()).unwrap_or(Value::Null);
    (code, answer)
}

/// A cluster of `ids`, each started from the README's example file of its name (with the
/// replicated log), and the leader once all agree on one.
pub(crate) fn example_cluster(ids: &[&str]) -> (ProcessCluster, String) {
    let mut cluster = ProcessCluster::new(ids);
    for id in ids {
        cluster.start_from_file(id, &example_config(id));
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    (cluster, leader)
}

/// Runs `conclave ARGS` to its end (bounded) and returns what it printed and how it exited.
pub(crate) fn conclave(args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn conclave");
    // Drained while it runs: an answer larger than a pipe holds (a 64 KiB value) would
    // otherwise block it before it exits.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    let deadline = SystemTime::now() + BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll conclave") {
            break status;
        }
        if SystemTime::now() > deadline {
            let _ = child.kill();
            panic!("conclave {args:?} did not exit within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Installs the Debian package `package` with apt when `present` says what it brings is
/// missing and the tests run where apt-get works (as root, the CI machine); then asserts it is
/// there, saying what to install otherwise. `why` says what the test needs it for.
pub(crate) fn apt_install(package: &str, why: &str, present: impl Fn() -> bool) {
    if present() {
        return;
    }
    let script = format!(
        "command -v apt-get >/dev/null && {{ DEBIAN_FRONTEND=noninteractive apt-get install -y \
         -qq --no-install-recommends {package} >/dev/null 2>&1 || {{ apt-get update -qq \
         >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         --no-install-recommends {package} >/dev/null 2>&1; }}; }}"
    );
    let _ = Command::new("sh").args(["-c", &script]).status();
    assert!(
        present(),
        "{why}: install the Debian package {package} (apt-get install {package})"
    );
}

/// Whether `program --version`-like `args` runs and succeeds.
fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The `openssl` program, installed from Debian's package when missing.
pub(crate) fn openssl() -> &'static str {
    apt_install(
        "openssl",
        "this test makes certificates with openssl",
        || runs("openssl", &["version"]),
    );
    "openssl"
}

/// The path of libfaketime's shared library (Debian's `libfaketime`), installed when missing.
pub(crate) fn libfaketime() -> PathBuf {
    let arch = std::env::consts::ARCH;
    let path = PathBuf::from(format!(
        "/usr/lib/{arch}-linux-gnu/faketime/libfaketime.so.1"
    ));
    apt_install(
        "libfaketime",
        "this test runs a node under libfaketime",
        || path.exists(),
    );
    path
}

/// Bytes a process printed, as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
