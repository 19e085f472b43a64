//! A harness for whole-node tests: N real nodes — every actor, a real WAL on disk — in one
//! process, connected by a [`MemoryHub`], with helpers to kill, restart and partition them, to
//! wait for agreement and to drive the admin API as the CLI does; and the assertions of what
//! every election mode keeps the same (issue 9 item 8: metric names, leader changes, the hook
//! environment with its fencing token), shared by the mode tests.
//!
//! Tests that pause the tokio clock must build nodes with the WAL on the event loop
//! ([`ClusterOptions::paused_clock`]): a paused clock jumps ahead whenever the runtime waits
//! on another thread, and the WAL thread is one.

pub mod api_client;
pub mod openapi_check;

use std::path::Path;
use std::time::Duration;

use conclave_actors::events::LeaderChange;
use conclave_actors::memory::MemoryHub;
use conclave_actors::metrics::NodeMetrics;
use conclave_actors::node::{Node, NodeBuilder, NodeHandle, NodeStatus};
use conclave_config::{
    AdminConfig, HealthConfig, HooksConfig, InitialState, MetricsConfig, NodeConfig, Quorum,
};
use conclave_core::MembershipConfig;
use conclave_core::election::{ElectionConfig, ElectionStatus, LeaderChangeCause, Mode, Role};
use conclave_core::raft::{QuorumMode, RaftConfig};
use conclave_protocol::{AuthKey, ClusterId, PeerId, SendKey};
use conclave_statemachine::StoreLimits;
use tempfile::TempDir;

/// The cluster id every test node uses.
pub const CLUSTER: &str = "test-cluster";

/// A pre-shared key for tests that authenticate frames.
pub const TEST_PSK: &[u8] = b"conclave-test-pre-shared-key";

/// Installs a per-test log subscriber that writes through the test harness, so a failing test
/// shows its nodes' logs. Keep the guard alive for the test's duration.
pub fn test_log() -> tracing::subscriber::DefaultGuard {
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

/// How a test cluster is set up.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Quorum mode.
    pub quorum: Quorum,
    /// Authenticate frames with [`TEST_PSK`].
    pub authenticated: bool,
    /// Run the WAL on the event loop (required with a paused clock).
    pub paused_clock: bool,
    /// Hooks, the same for every node.
    pub hooks: HooksConfig,
    /// The election every node runs, as a template: each node gets it with its own id and,
    /// where the mode has one, the cluster's names as its electorate
    /// ([`ElectionConfig::for_member`]). `None`: raft in `quorum` mode with the timings of docs/design.md §9
    /// scaled down ten times.
    pub election: Option<ElectionConfig>,
}

impl ClusterOptions {
    /// `voters` mode, unauthenticated, for a paused clock.
    pub fn paused_clock(quorum: Quorum) -> Self {
        Self {
            quorum,
            authenticated: false,
            paused_clock: true,
            hooks: HooksConfig::default(),
            election: None,
        }
    }

    /// The same for real time (hooks run real processes, which a paused clock cannot wait for).
    pub fn real_time(quorum: Quorum) -> Self {
        Self {
            paused_clock: false,
            ..Self::paused_clock(quorum)
        }
    }
}

/// Raft with the timings of docs/design.md §9 scaled down ten times (heartbeat 50 ms, election timeout
/// 150–300 ms), for [`ElectionConfig::for_member`] to give each node its id and voters.
pub fn raft_election(quorum: Quorum) -> ElectionConfig {
    let template = PeerId::from_static("template");
    let raft = RaftConfig::new(template, [template])
        .with_heartbeat(Duration::from_millis(50))
        .with_election_timeout(Duration::from_millis(150), Duration::from_millis(300));
    ElectionConfig::Raft(match quorum {
        Quorum::Voters => raft,
        Quorum::Connected => RaftConfig {
            quorum: QuorumMode::Connected,
            ..raft
        },
    })
}

/// The configuration of one test node: the timings of docs/design.md §9 scaled down ten times (heartbeat
/// 50 ms, election timeout 150–300 ms), no HTTP servers, no UDP.
pub fn node_config(
    name: &str,
    names: &[&str],
    options: &ClusterOptions,
    data_dir: &Path,
) -> NodeConfig {
    let voters: Vec<PeerId> = names
        .iter()
        .map(|n| PeerId::new(n).expect("test node names are valid peer ids"))
        .collect();
    let node_id = PeerId::new(name).expect("test node names are valid peer ids");
    NodeConfig {
        node_id,
        data_dir: data_dir.to_path_buf(),
        cluster_id: ClusterId::new(CLUSTER).expect("valid cluster id"),
        auth_key: options
            .authenticated
            .then(|| AuthKey::new(TEST_PSK, 16).expect("the test key is long enough")),
        election: options
            .election
            .as_ref()
            .unwrap_or(&raft_election(options.quorum))
            .for_member(node_id, &voters),
        voters,
        membership: MembershipConfig {
            heartbeat_interval: Duration::from_millis(50),
            timeout_multiplier: 3,
            hello_interval: Duration::from_millis(100),
            announce_interval: Duration::from_secs(1),
            expected_peers: names.len() - 1,
        },
        udp: None,
        espnow: None,
        admin: AdminConfig::default(),
        metrics: MetricsConfig {
            listen: None,
            tls: None,
        },
        hooks: options.hooks.clone(),
        health: HealthConfig::default(),
        initial_state: InitialState::default(),
        store_limits: StoreLimits::default(),
        next_key: None,
        send_key: SendKey::Current,
    }
}

/// N nodes on one memory hub.
pub struct MemoryCluster {
    /// The shared medium; partition it, or inject frames into it.
    pub hub: MemoryHub,
    options: ClusterOptions,
    configs: Vec<NodeConfig>,
    nodes: Vec<Option<Node>>,
    starts: u64,
    _dir: TempDir,
}

impl MemoryCluster {
    /// Starts nodes named `names`; node `i` is attached to hub slot `i`.
    pub async fn start(names: &[&str], options: ClusterOptions) -> Self {
        Self::start_with(names, options, |_| {}).await
    }

    /// The same, with each node's configuration changed by `customize` before it starts (a
    /// setting that differs between nodes); a restarted node keeps its changed configuration.
    pub async fn start_with(
        names: &[&str],
        options: ClusterOptions,
        customize: impl Fn(&mut NodeConfig),
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let configs: Vec<NodeConfig> = names
            .iter()
            .map(|name| {
                let mut config = node_config(name, names, &options, &dir.path().join(name));
                customize(&mut config);
                config
            })
            .collect();
        let mut cluster = Self {
            hub: MemoryHub::new(),
            options,
            nodes: configs.iter().map(|_| None).collect(),
            configs,
            starts: 0,
            _dir: dir,
        };
        for index in 0..names.len() {
            cluster.restart(index).await;
        }
        cluster
    }

    /// Nodes named `names` running the replicated log, in real time, with a leader elected;
    /// the cluster and the leader's index.
    pub async fn start_with_log(names: &[&str]) -> (Self, usize) {
        let cluster =
            Self::start_with(names, ClusterOptions::real_time(Quorum::Voters), |config| {
                if let ElectionConfig::Raft(raft) = &mut config.election {
                    raft.log = Some(conclave_core::raft::LogConfig::default());
                }
            })
            .await;
        let leader = cluster.await_leader(Duration::from_secs(10)).await;
        (cluster, leader)
    }

    /// The number of nodes, running or not.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `index`'s id.
    pub fn id(&self, index: usize) -> PeerId {
        self.configs[index].node_id
    }

    /// Node `index`'s handle; panics if it is not running.
    pub fn handle(&self, index: usize) -> &NodeHandle {
        self.nodes[index]
            .as_ref()
            .map(Node::handle)
            .unwrap_or_else(|| panic!("node {index} is not running"))
    }

    /// Indices of the running nodes.
    pub fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_some())
            .collect()
    }

    /// Stops node `index` abruptly, as a crash (no goodbye).
    pub async fn kill(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].take() {
            node.kill().await;
        }
    }

    /// Stops node `index` gracefully (a leader hands over first, peers are told goodbye).
    pub async fn stop_node(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].take() {
            node.stop().await;
        }
    }

    /// Starts node `index` (again) from its WAL.
    pub async fn restart(&mut self, index: usize) {
        self.kill(index).await;
        self.starts += 1;
        let mut builder = NodeBuilder::new(self.configs[index].clone())
            .memory_link(self.hub.clone(), u32::try_from(index).expect("few nodes"))
            .rng_seed(self.starts * 7919 + index as u64);
        if self.options.paused_clock {
            builder = builder.wal_on_event_loop();
        }
        let node = builder.start().await.expect("test node starts");
        self.nodes[index] = Some(node);
    }

    /// Every running node's status.
    pub async fn statuses(&self) -> Vec<(usize, NodeStatus)> {
        let mut out = Vec::new();
        for index in self.running() {
            if let Ok(status) = self.handle(index).status().await {
                out.push((index, status));
            }
        }
        out
    }

    /// The leader every running node of `group` names in the same term, if they agree and it
    /// leads; `None` otherwise.
    pub async fn agreed_leader_among(&self, group: &[usize]) -> Option<usize> {
        let members: Vec<(usize, NodeHandle)> = group
            .iter()
            .map(|&index| (index, self.handle(index).clone()))
            .collect();
        agreed_leader_of(&members, &self.configs).await
    }

    /// The leader all running nodes agree on.
    pub async fn agreed_leader(&self) -> Option<usize> {
        self.agreed_leader_among(&self.running()).await
    }

    /// Waits up to `within` for every running node to agree that node `target` leads.
    pub async fn leader_becomes(&self, target: usize, within: Duration) -> bool {
        self.wait_for(within, || async {
            self.agreed_leader().await == Some(target)
        })
        .await
    }

    /// Waits, polling every 10 ms, until `check` holds or `within` passes (virtual time when
    /// the clock is paused). Returns whether it held.
    pub async fn wait_for<F, Fut>(&self, within: Duration, mut check: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if check().await {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for a leader all running nodes agree on; panics with every status if none comes.
    pub async fn await_leader(&self, within: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(leader) = self.agreed_leader().await {
                return leader;
            }
            if tokio::time::Instant::now() >= deadline {
                let statuses = self.statuses().await;
                let summary: Vec<String> = statuses
                    .iter()
                    .map(|(i, s)| {
                        format!(
                            "{}: {} term {} leader {:?}",
                            self.id(*i),
                            s.election.role,
                            s.election.term,
                            s.election.leader
                        )
                    })
                    .collect();
                panic!("no agreed leader within {within:?}: {}", summary.join("; "));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Kills node `leader` (a crash) and waits up to `budget` (virtual time when the clock is
    /// paused) for the survivors to agree on another leader; panics with every status if they
    /// do not, or if the wait took longer than `budget`. The new leader's index.
    pub async fn kill_leader_and_await_successor(
        &mut self,
        leader: usize,
        budget: Duration,
    ) -> usize {
        self.kill(leader).await;
        let killed_at = tokio::time::Instant::now();
        let replaced = self
            .wait_for(budget, || async {
                self.agreed_leader()
                    .await
                    .is_some_and(|successor| successor != leader)
            })
            .await;
        assert!(
            replaced,
            "{} was not replaced within {budget:?}: {:?}",
            self.id(leader),
            self.statuses().await
        );
        assert!(killed_at.elapsed() <= budget);
        self.agreed_leader()
            .await
            .expect("the survivors agreed on a leader")
    }

    /// Stops every node gracefully.
    pub async fn stop(mut self) {
        for node in self.nodes.iter_mut() {
            if let Some(node) = node.take() {
                node.stop().await;
            }
        }
    }
}

/// The leader every node of `members` (index and handle) names in the same term, if exactly
/// one of them leads and it is that one; its index in `configs`.
async fn agreed_leader_of(
    members: &[(usize, NodeHandle)],
    configs: &[NodeConfig],
) -> Option<usize> {
    let mut agreed: Option<(PeerId, u64)> = None;
    let mut leaders = 0;
    for (_, handle) in members {
        let status = handle.election_status().await.ok()?;
        if status.role == Role::Leader {
            leaders += 1;
        }
        let claim = (status.leader?, status.term);
        if agreed.is_some_and(|seen| seen != claim) {
            return None;
        }
        agreed = Some(claim);
    }
    let (leader, _) = agreed?;
    let index = configs.iter().position(|c| c.node_id == leader)?;
    (leaders == 1 && members.iter().any(|(member, _)| *member == index)).then_some(index)
}

/// N nodes talking ESP-NOW only, each through its own virtual dongle behind a
/// pseudo-terminal that the node opens with tokio-serial by path, exactly as it would open
/// `/dev/ttyACM0`; the dongles share one simulated air. Real time: the serial path and the
/// driver's reconnects are real I/O.
pub struct RadioCluster {
    /// The simulated air: partition it, power nodes off, change loss.
    pub air: conclave_espnow::Air,
    /// Each node's virtual serial port: unplug and replug its dongle.
    pub ports: Vec<conclave_espnow::VirtualSerialPort>,
    configs: Vec<NodeConfig>,
    nodes: Vec<Option<Node>>,
    _dir: TempDir,
}

impl RadioCluster {
    /// Starts nodes named `names` in `quorum` mode, on a seeded air.
    pub async fn start(names: &[&str], quorum: Quorum, seed: u64) -> Self {
        Self::start_with(names, quorum, seed, |_| {}).await
    }

    /// The same, with each node's configuration changed by `customize` before it starts.
    pub async fn start_with(
        names: &[&str],
        quorum: Quorum,
        seed: u64,
        customize: impl Fn(&mut NodeConfig),
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let air = conclave_espnow::Air::new(seed);
        let options = ClusterOptions::real_time(quorum);
        let mut ports = Vec::new();
        let mut configs = Vec::new();
        for name in names {
            let mac = conclave_actors::node::virtual_mac(
                PeerId::new(name).expect("test node names are valid peer ids"),
            );
            let port = conclave_espnow::VirtualSerialPort::create(
                dir.path().join(format!("tty-{name}")),
                &air,
                conclave_espnow::VirtualDongleConfig::new(mac),
            )
            .expect("a virtual serial port");
            let mut config = node_config(name, names, &options, &dir.path().join(name));
            config.espnow = Some(conclave_config::EspNowLinkConfig {
                port: conclave_config::DonglePort::Device(port.path().to_path_buf()),
                baud: 921_600,
                channel: 1,
                pmk: None,
                lmk: None,
                peer_lmks: Default::default(),
            });
            customize(&mut config);
            ports.push(port);
            configs.push(config);
        }
        let mut nodes = Vec::new();
        for config in &configs {
            let node = NodeBuilder::new(config.clone())
                .start()
                .await
                .expect("radio node starts");
            nodes.push(Some(node));
        }
        Self {
            air,
            ports,
            configs,
            nodes,
            _dir: dir,
        }
    }

    /// Node `index`'s id.
    pub fn id(&self, index: usize) -> PeerId {
        self.configs[index].node_id
    }

    /// Node `index`'s dongle MAC.
    pub fn mac(&self, index: usize) -> conclave_espnow::Mac {
        conclave_actors::node::virtual_mac(self.id(index))
    }

    /// Node `index`'s handle.
    pub fn handle(&self, index: usize) -> &NodeHandle {
        self.nodes[index]
            .as_ref()
            .map(Node::handle)
            .unwrap_or_else(|| panic!("node {index} is not running"))
    }

    /// The leader every node of `group` names in the same term, if they agree and it leads.
    pub async fn agreed_leader_among(&self, group: &[usize]) -> Option<usize> {
        let members: Vec<(usize, NodeHandle)> = group
            .iter()
            .map(|&index| (index, self.handle(index).clone()))
            .collect();
        agreed_leader_of(&members, &self.configs).await
    }

    /// Waits for a leader the nodes of `group` agree on; panics with their statuses if none.
    pub async fn await_leader_among(&self, group: &[usize], within: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(leader) = self.agreed_leader_among(group).await {
                return leader;
            }
            if tokio::time::Instant::now() >= deadline {
                let mut summary = Vec::new();
                for &index in group {
                    if let Ok(s) = self.handle(index).status().await {
                        summary.push(format!(
                            "{}: {} term {} leader {:?} dongle {:?}",
                            self.id(index),
                            s.election.role,
                            s.election.term,
                            s.election.leader,
                            s.dongle.map(|d| d.status.connected)
                        ));
                    }
                }
                panic!("no agreed leader within {within:?}: {}", summary.join("; "));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops node `index` gracefully: a leader hands over first, and its `Goodbye` goes out
    /// over its dongle before the driver stops.
    pub async fn stop_node(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].take() {
            node.stop().await;
        }
    }

    /// Stops every node gracefully.
    pub async fn stop(mut self) {
        for node in self.nodes.iter_mut() {
            if let Some(node) = node.take() {
                node.stop().await;
            }
        }
    }
}

/// Every `LeaderChanged` event already waiting on `subscription`, in order, without waiting
/// for more (a gap the bus dropped shows as nothing: tests subscribe before they act).
pub fn drain_leader_changes(
    subscription: &mut conclave_actors::events::EventSubscription,
) -> Vec<conclave_actors::events::LeaderChange> {
    use conclave_actors::events::{NodeEvent, Received};
    let mut changes = Vec::new();
    while let Some(received) = subscription.try_recv() {
        if let Received::Event(NodeEvent::LeaderChanged(change)) = received {
            changes.push(change);
        }
    }
    changes
}

/// A hook command that writes its `CONCLAVE_*` variables to
/// `dir/<node>-<hook>-<term>-<cause>` through a temporary name, so a file that exists is
/// complete.
pub fn dump_env_hook(dir: &Path) -> conclave_config::HookCommand {
    conclave_config::HookCommand::Shell(format!(
        "f='{}'/\"$CONCLAVE_NODE_ID-$CONCLAVE_HOOK-$CONCLAVE_TERM-$CONCLAVE_CAUSE\"; \
         env | grep ^CONCLAVE_ > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"",
        dir.display()
    ))
}

/// The `CONCLAVE_*` lines of the file [`dump_env_hook`] wrote for `node`'s `hook` in `term`
/// with `cause`; empty while it does not exist.
pub fn dumped_hook_env(dir: &Path, node: &str, hook: &str, term: u64, cause: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(format!("{node}-{hook}-{term}-{cause}")))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("CONCLAVE_"))
        .map(str::to_owned)
        .collect()
}

/// What the admin API answered a mutation: the command's answer (200), or the HTTP status and
/// the error answer.
pub type AdminAnswer =
    Result<conclave_api::CommandAnswer, (actix_web::http::StatusCode, conclave_api::ErrorAnswer)>;

/// Sends `POST path` with the JSON `body` to `node`'s admin API, the routes `conclave run`
/// serves and the CLI calls (mounted on actix-web's test service, default `[admin]`), and
/// returns what it answered, parsed into the typed answers the CLI reads.
pub async fn admin_post(node: &NodeHandle, path: &str, body: serde_json::Value) -> AdminAnswer {
    use actix_web::test::{TestRequest, call_service, init_service, read_body_json};
    let app = init_service(
        actix_web::App::new().configure(conclave_actors::admin::admin_routes(
            node.clone(),
            conclave_actors::admin::AdminOptions::new(&AdminConfig::default()),
        )),
    )
    .await;
    let answer = call_service(
        &app,
        TestRequest::post().uri(path).set_json(body).to_request(),
    )
    .await;
    let status = answer.status();
    if status.is_success() {
        Ok(read_body_json(answer).await)
    } else {
        Err((status, read_body_json(answer).await))
    }
}

/// The same for a mutation the node must refuse: the HTTP status and the error answer; panics
/// if the node carried it out.
pub async fn admin_refusal(
    node: &NodeHandle,
    path: &str,
    body: serde_json::Value,
) -> (actix_web::http::StatusCode, conclave_api::ErrorAnswer) {
    match admin_post(node, path, body).await {
        Ok(answer) => panic!(
            "{}: POST {path} was carried out: {answer:?}",
            node.node_id()
        ),
        Err(refusal) => refusal,
    }
}

// ---------------------------------------------------------------------------------------------
// The contracts every election mode keeps (issue 9 item 8): the same metric names (docs/design.md §8),
// the same leader changes, the same hook environment with the fencing token. One assertion of
// each, shared by the mode tests.

/// `conclave_leader_changes_total` of a node: how many leader changes it published so far.
pub fn leader_changes_total(metrics: &NodeMetrics) -> f64 {
    metrics
        .value("conclave_leader_changes_total", &[])
        .expect("conclave_leader_changes_total is exported")
}

/// Asserts a leader's gauges: `conclave_election_mode{mode}` is 1, `conclave_election_is_leader`
/// is 1, `conclave_election_phase{phase}` is 1 and `conclave_election_term` is `term`.
#[track_caller]
pub fn assert_leader_gauges(metrics: &NodeMetrics, mode: Mode, phase: &str, term: u64) {
    assert_eq!(
        metrics.value("conclave_election_mode", &[("mode", mode.label())]),
        Some(1.0),
        "mode gauge"
    );
    assert_eq!(
        metrics.value("conclave_election_is_leader", &[]),
        Some(1.0),
        "is_leader gauge"
    );
    assert_eq!(
        metrics.value("conclave_election_phase", &[("phase", phase)]),
        Some(1.0),
        "phase gauge"
    );
    assert_eq!(
        metrics.value("conclave_election_term", &[]),
        Some(term as f64),
        "term gauge"
    );
}

/// Asserts what a survivor's metrics show after its leader died and `term`'s leader took
/// over: `conclave_election_is_leader` says whether it `leads`, `conclave_election_term` is
/// `term`, `conclave_leader_changes_total` grew by at least two since `changes_before` (the
/// loss and the new leader) and `conclave_elections_started_total{kind}` counted at least one.
#[track_caller]
pub fn assert_failover_metrics(
    metrics: &NodeMetrics,
    leads: bool,
    term: u64,
    changes_before: f64,
    started_kind: &str,
) {
    assert_eq!(
        metrics.value("conclave_election_is_leader", &[]),
        Some(if leads { 1.0 } else { 0.0 }),
        "is_leader gauge"
    );
    assert_eq!(
        metrics.value("conclave_election_term", &[]),
        Some(term as f64),
        "term gauge"
    );
    assert!(
        leader_changes_total(metrics) >= changes_before + 2.0,
        "the loss and the new leader count: {} after {changes_before}",
        leader_changes_total(metrics)
    );
    assert!(
        metrics
            .value(
                "conclave_elections_started_total",
                &[("kind", started_kind)]
            )
            .unwrap_or(0.0)
            >= 1.0,
        "no election of kind {started_kind} counted"
    );
}

/// Asserts that a survivor published the loss of its leader `previous` when it died: a change
/// to no leader with the cause `election_timeout`, naming `previous`. That change.
#[track_caller]
pub fn assert_published_loss(changes: &[LeaderChange], previous: PeerId) -> &LeaderChange {
    let lost = changes
        .iter()
        .find(|change| change.leader.is_none())
        .unwrap_or_else(|| panic!("no loss of {previous} published: {changes:?}"));
    assert_eq!(lost.cause, LeaderChangeCause::ElectionTimeout, "{lost:?}");
    assert_eq!(lost.previous, Some(previous), "{lost:?}");
    lost
}

/// Asserts that `change` names the leader and term of `status` (a node's status after the
/// change) and that the fencing token the hooks get from it, `<term>:<leader>`, is the one
/// the node reports.
#[track_caller]
pub fn assert_change_carries_the_token(change: &LeaderChange, status: &ElectionStatus) {
    assert_eq!((change.leader, change.term), (status.leader, status.term));
    let leader = change.leader.expect("a change to a leader");
    assert_eq!(
        format!("{}:{leader}", change.term),
        status
            .fencing_token
            .expect("a node that knows its leader has a fencing token")
            .to_string(),
        "the hooks' CONCLAVE_FENCING_TOKEN is the token the node reports"
    );
}

/// Whether the file [`dump_env_hook`] writes for `node`'s `hook` in `term` with `cause` exists.
pub fn hook_ran(dir: &Path, node: &str, hook: &str, term: u64, cause: &str) -> bool {
    !dumped_hook_env(dir, node, hook, term, cause).is_empty()
}

/// Asserts that `node`'s `hook` in `term` with `cause` ran with every line of `expected` in
/// its environment (as [`dump_env_hook`] recorded it).
#[track_caller]
pub fn assert_hook_env(
    dir: &Path,
    node: &str,
    hook: &str,
    term: u64,
    cause: &str,
    expected: &[String],
) {
    let env = dumped_hook_env(dir, node, hook, term, cause);
    for line in expected {
        assert!(
            env.contains(line),
            "{line} missing from {node}'s {hook} ({term}, {cause}): {env:?}"
        );
    }
}

/// The environment of a new leader's `on_leader` (CB-2, CB-5): its role, its term, itself as
/// leader, the leader before it and the fencing token `<term>:<leader>`.
pub fn new_leader_env(term: u64, leader: &str, previous: &str) -> Vec<String> {
    vec![
        "CONCLAVE_ROLE=leader".to_owned(),
        format!("CONCLAVE_TERM={term}"),
        format!("CONCLAVE_LEADER={leader}"),
        format!("CONCLAVE_PREVIOUS_LEADER={previous}"),
        format!("CONCLAVE_FENCING_TOKEN={term}:{leader}"),
    ]
}

/// The environment of `on_leader_change` on a node that lost its leader `previous`: no
/// leader and no fencing token.
pub fn leader_lost_env(previous: &str) -> Vec<String> {
    vec![
        "CONCLAVE_LEADER=".to_owned(),
        format!("CONCLAVE_PREVIOUS_LEADER={previous}"),
        "CONCLAVE_FENCING_TOKEN=".to_owned(),
    ]
}
