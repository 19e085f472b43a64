//! `conclave demo` (CB-7): a whole cluster on one machine, with no hardware and no
//! configuration.
//!
//! N gateway nodes (5 by default) run in this process. Each has a virtual ESP32 dongle behind
//! its own pseudo-terminal, which the node opens with tokio-serial by path exactly as it would
//! open `/dev/ttyACM0`; the dongles share one simulated air (ESP-7). Every node has its own
//! admin API and metrics endpoint, printed at start, so `conclave status --admin ...` and a
//! Prometheus scrape work against the demo as against real nodes.
//!
//! Interactive (the default): a live view of every node — role, term, leader, dongle, peers'
//! round-trip times — and the recent events, redrawn twice a second; commands typed on stdin
//! kill, revive and partition nodes. With `--duration SECS` it runs unattended instead: one
//! line per event, the leader is killed once halfway, and the exit code says whether every
//! live node knew the same leader at the end (0) or not (1).

use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_actors::config::{
    AdminConfig, DonglePort, ElectionConfig, EspNowLinkConfig, HooksConfig, MetricsConfig,
    NodeConfig, Quorum, RaftSettings,
};
use conclave_actors::events::{NodeEvent, Received};
use conclave_actors::node::{Node, NodeBuilder, virtual_mac};
use conclave_core::MembershipConfig;
use conclave_core::raft::Role;
use conclave_espnow::{Air, Mac, VirtualDongleConfig, VirtualSerialPort};
use conclave_protocol::{ClusterId, PeerId};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// Recent events kept for the live view.
const RECENT_EVENTS: usize = 12;

/// What the demo was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct DemoOptions {
    pub(crate) nodes: usize,
    pub(crate) duration: Option<Duration>,
    pub(crate) seed: Option<u64>,
}

/// One demo node: its configuration, its dongle's serial port, and the node while it runs.
struct DemoNode {
    config: NodeConfig,
    mac: Mac,
    port: VirtualSerialPort,
    node: Option<Node>,
}

struct Demo {
    air: Air,
    nodes: Vec<DemoNode>,
    /// Every node's events, with its name, for the printer and the live view.
    events_tx: mpsc::UnboundedSender<String>,
    _dir: tempfile::TempDir,
}

fn peer_id(name: &str) -> PeerId {
    PeerId::new(name).unwrap_or_else(|err| panic!("demo node names are valid ids: {err}"))
}

/// A free loopback port, found by binding port 0 and letting the OS choose.
fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

fn clock() -> String {
    let millis = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let seconds = (millis / 1000) % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60,
        millis % 1000
    )
}

fn demo_config(
    name: &str,
    names: &[String],
    dir: &Path,
    port: &Path,
) -> std::io::Result<NodeConfig> {
    let id = peer_id(name);
    Ok(NodeConfig {
        node_id: id,
        data_dir: dir.join(name),
        cluster_id: ClusterId::new("demo").unwrap_or_else(|err| panic!("{err}")),
        // A demo needs no key; the node logs that frames are unauthenticated.
        auth_key: None,
        election: ElectionConfig {
            voters: names.iter().map(|n| peer_id(n)).collect(),
            auto: true,
            raft: RaftSettings {
                quorum: Quorum::Voters,
                // DESIGN's defaults scaled down: a failover is over in well under a second.
                heartbeat: Duration::from_millis(100),
                election_timeout_min: Duration::from_millis(400),
                election_timeout_max: Duration::from_millis(800),
                pre_vote: true,
                check_quorum: true,
                ranked_timeouts: true,
            },
        },
        membership: MembershipConfig {
            heartbeat_interval: Duration::from_millis(200),
            timeout_multiplier: 3,
            hello_interval: Duration::from_millis(500),
            announce_interval: Duration::from_secs(5),
            expected_peers: 0,
        },
        udp: None,
        espnow: Some(EspNowLinkConfig {
            port: DonglePort::Device(port.to_path_buf()),
            baud: 921_600,
            channel: 1,
            pmk: None,
            lmk: None,
            peer_lmks: Default::default(),
        }),
        admin: AdminConfig {
            listen: Some(free_port()?),
            ..AdminConfig::default()
        },
        metrics: MetricsConfig {
            listen: Some(free_port()?),
        },
        hooks: HooksConfig::default(),
    })
}

impl Demo {
    async fn start(
        count: usize,
        seed: u64,
        events_tx: mpsc::UnboundedSender<String>,
    ) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("conclave-demo-")
            .tempdir()
            .map_err(|err| format!("cannot create the demo's directory: {err}"))?;
        let air = Air::new(seed);
        let names: Vec<String> = (1..=count).map(|i| format!("node-{i}")).collect();
        let mut nodes = Vec::new();
        for name in &names {
            let mac = virtual_mac(peer_id(name));
            let link = dir.path().join(format!("tty-{name}"));
            let port = VirtualSerialPort::create(&link, &air, VirtualDongleConfig::new(mac))
                .map_err(|err| format!("cannot create {name}'s virtual dongle: {err}"))?;
            let config = demo_config(name, &names, dir.path(), port.path())
                .map_err(|err| format!("cannot find free ports: {err}"))?;
            nodes.push(DemoNode {
                config,
                mac,
                port,
                node: None,
            });
        }
        let mut demo = Self {
            air,
            nodes,
            events_tx,
            _dir: dir,
        };
        for index in 0..count {
            demo.revive(index).await?;
        }
        Ok(demo)
    }

    fn name(&self, index: usize) -> String {
        self.nodes[index].config.node_id.to_string()
    }

    async fn revive(&mut self, index: usize) -> Result<(), String> {
        if self.nodes[index].node.is_some() {
            return Ok(());
        }
        let config = self.nodes[index].config.clone();
        let name = config.node_id.to_string();
        let node = NodeBuilder::new(config)
            .start()
            .await
            .map_err(|err| format!("{name} cannot start: {err}"))?;
        let mut events = node.handle().subscribe("demo");
        let tx = self.events_tx.clone();
        actix_rt::spawn(async move {
            while let Some(received) = events.recv().await {
                let line = match received {
                    Received::Event(NodeEvent::LeaderChanged(change)) => format!(
                        "{name:<8} leader {} (term {}, {}, {})",
                        change.leader.map_or("none".to_owned(), |l| l.to_string()),
                        change.term,
                        change.role.label(),
                        change.cause.label()
                    ),
                    Received::Event(NodeEvent::PeerStatusChanged(change)) => format!(
                        "{name:<8} peer {} {}",
                        change.peer,
                        change.new.map_or("left", |s| s.label())
                    ),
                    Received::Lagged(missed) => format!("{name:<8} missed {missed} events"),
                };
                if tx.send(format!("{} {line}", clock())).is_err() {
                    return;
                }
            }
        });
        self.nodes[index].node = Some(node);
        Ok(())
    }

    /// Kills node `index` abruptly, as a crash or a power cut would.
    async fn kill(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].node.take() {
            node.kill().await;
            let _ = self
                .events_tx
                .send(format!("{} {:<8} killed", clock(), self.name(index)));
        }
    }

    /// The running nodes.
    fn live(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].node.is_some())
            .collect()
    }

    /// The leader every live node names in the same term, if they agree.
    async fn agreed_leader(&self) -> Option<usize> {
        let mut agreed = None;
        for index in self.live() {
            let node = self.nodes[index].node.as_ref()?;
            let status = node.handle().election_status().await.ok()?;
            let claim = (status.leader?, status.term);
            if agreed.is_some_and(|seen| seen != claim) {
                return None;
            }
            agreed = Some(claim);
        }
        let (leader, _) = agreed?;
        self.nodes.iter().position(|n| n.config.node_id == leader)
    }

    /// Splits the air into groups of node numbers (1-based); nodes in no group are cut off.
    fn partition(&self, groups: &[Vec<usize>]) {
        let macs: Vec<Vec<Mac>> = groups
            .iter()
            .map(|group| group.iter().map(|&n| self.nodes[n - 1].mac).collect())
            .collect();
        let slices: Vec<&[Mac]> = macs.iter().map(Vec::as_slice).collect();
        self.air.partition(&slices);
    }

    /// Stops every node gracefully: the followers first, together, then the leader, so that
    /// no leader hands over to a node that is itself on its way out.
    async fn stop(mut self) {
        let leader = self.agreed_leader().await;
        let mut stopping = Vec::new();
        for (index, node) in self.nodes.iter_mut().enumerate() {
            if Some(index) == leader {
                continue;
            }
            if let Some(running) = node.node.take() {
                stopping.push(actix_rt::spawn(running.stop()));
            }
        }
        for stop in stopping {
            let _ = stop.await;
        }
        if let Some(running) = leader.and_then(|index| self.nodes[index].node.take()) {
            running.stop().await;
        }
        for node in &mut self.nodes {
            let _ = node.port.unplug().await;
        }
    }

    fn print_endpoints(&self) {
        println!(
            "conclave demo: {} nodes on virtual ESP-NOW dongles sharing one simulated air",
            self.nodes.len()
        );
        for node in &self.nodes {
            let admin = node
                .config
                .admin
                .listen
                .map_or("-".to_owned(), |a| format!("http://{a}"));
            let metrics = node
                .config
                .metrics
                .listen
                .map_or("-".to_owned(), |a| format!("http://{a}/metrics"));
            println!(
                "  {:<8} dongle {} on {}  admin {admin}  metrics {metrics}",
                node.config.node_id,
                node.mac,
                node.port.path().display()
            );
        }
    }

    /// The live view: one line per node, then the recent events.
    async fn render(&self, recent: &VecDeque<String>) -> String {
        let mut out = String::from("\x1b[2J\x1b[H");
        out.push_str(
            "conclave demo — commands: kill N | revive N | partition 1,2 3,4,5 | heal | quit\n\n",
        );
        out.push_str(&format!(
            "{:<9} {:<14} {:>5}  {:<9} {:<10} {}\n",
            "NODE", "ROLE", "TERM", "LEADER", "DONGLE", "PEERS (RTT)"
        ));
        for node in &self.nodes {
            let name = node.config.node_id.to_string();
            let Some(running) = &node.node else {
                out.push_str(&format!("{name:<9} {:<14}\n", "killed"));
                continue;
            };
            let Ok(status) = running.handle().status().await else {
                out.push_str(&format!("{name:<9} {:<14}\n", "stopping"));
                continue;
            };
            let role = status.election.role;
            let role = if role == Role::Leader {
                format!("\x1b[1m{:<14}\x1b[0m", role.label())
            } else {
                format!("{:<14}", role.label())
            };
            let dongle = match &status.dongle {
                Some(dongle) if dongle.status.connected => "up",
                Some(_) => "DOWN",
                None => "-",
            };
            let peers: Vec<String> = status
                .peers
                .iter()
                .map(|peer| match (peer.status.label(), peer.rtt) {
                    ("connected", Some(rtt)) => {
                        format!("{} {:.1}ms", peer.id, rtt.as_secs_f64() * 1000.0)
                    }
                    (label, _) => format!("{} {label}", peer.id),
                })
                .collect();
            out.push_str(&format!(
                "{name:<9} {role} {:>5}  {:<9} {dongle:<10} {}\n",
                status.election.term,
                status
                    .election
                    .leader
                    .map_or("-".to_owned(), |l| l.to_string()),
                peers.join(", ")
            ));
        }
        out.push_str("\nrecent events:\n");
        for line in recent {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("\n> ");
        out
    }
}

/// Parses `partition 1,2 3,4,5` groups.
fn parse_groups(words: &[&str], count: usize) -> Result<Vec<Vec<usize>>, String> {
    let mut groups = Vec::new();
    for word in words {
        let mut group = Vec::new();
        for part in word.split(',') {
            let n: usize = part
                .parse()
                .map_err(|_| format!("{part:?} is not a node number"))?;
            if n == 0 || n > count {
                return Err(format!("there is no node {n}; nodes are 1 to {count}"));
            }
            group.push(n);
        }
        groups.push(group);
    }
    if groups.is_empty() {
        return Err("partition needs groups, e.g. `partition 1,2 3,4,5`".to_owned());
    }
    Ok(groups)
}

/// `conclave demo`.
pub(crate) fn run(options: DemoOptions) -> ExitCode {
    let log_file = match init_logging(options.duration.is_none()) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(1);
        }
    };
    if options.nodes == 0 || options.nodes > 19 {
        eprintln!("error: --nodes must be 1 to 19 (an ESP-NOW radio holds 20 peers)");
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let seed = options.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let system = actix_rt::System::new();
    system.block_on(async move {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let demo = match Demo::start(options.nodes, seed, events_tx).await {
            Ok(demo) => demo,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(1);
            }
        };
        demo.print_endpoints();
        if let Some(path) = &log_file {
            println!("  logs in {} (RUST_LOG sets the level)", path.display());
        }
        match options.duration {
            Some(duration) => unattended(demo, events_rx, duration).await,
            None => interactive_loop(demo, events_rx).await,
        }
    })
}

/// Where the nodes' logs go. The live view owns the terminal, so there they go to a file
/// (returned, to be printed); unattended, warnings and errors go to stderr. `RUST_LOG`
/// overrides the level in both cases.
fn init_logging(interactive: bool) -> Result<Option<PathBuf>, String> {
    let filter = |default: &str| {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    if !interactive {
        tracing_subscriber::fmt()
            .with_env_filter(filter("warn"))
            .with_writer(std::io::stderr)
            .init();
        return Ok(None);
    }
    let path = std::env::temp_dir().join("conclave-demo.log");
    let file = std::fs::File::create(&path).map_err(|err| {
        format!(
            "cannot create the demo's log file {}: {err}",
            path.display()
        )
    })?;
    tracing_subscriber::fmt()
        .with_env_filter(filter("info"))
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .init();
    Ok(Some(path))
}

/// `--duration`: events as lines, the leader killed halfway, the verdict as the exit code.
async fn unattended(
    mut demo: Demo,
    mut events: mpsc::UnboundedReceiver<String>,
    duration: Duration,
) -> ExitCode {
    println!(
        "running for {duration:?}; the leader is killed at {:?}",
        duration / 2
    );
    let start = tokio::time::Instant::now();
    let halfway = start + duration / 2;
    let end = start + duration;
    let mut killed = false;
    loop {
        tokio::select! {
            line = events.recv() => {
                if let Some(line) = line {
                    println!("{line}");
                }
            }
            () = tokio::time::sleep_until(halfway), if !killed => {
                killed = true;
                match demo.agreed_leader().await {
                    Some(leader) => {
                        println!("{} killing the leader, {}", clock(), demo.name(leader));
                        demo.kill(leader).await;
                    }
                    None => println!("{} no agreed leader halfway; nothing to kill", clock()),
                }
            }
            () = tokio::time::sleep_until(end) => break,
            _ = tokio::signal::ctrl_c() => {
                println!("interrupted");
                demo.stop().await;
                return ExitCode::from(130);
            }
        }
    }
    while let Ok(line) = events.try_recv() {
        println!("{line}");
    }
    let verdict = demo.agreed_leader().await;
    let live = demo.live().len();
    let code = match verdict {
        Some(leader) => {
            println!(
                "result: every live node ({live}) knows the leader {}",
                demo.name(leader)
            );
            ExitCode::SUCCESS
        }
        None => {
            println!("result: the {live} live nodes do not agree on a leader");
            ExitCode::from(1)
        }
    };
    demo.stop().await;
    code
}

/// The live view and its commands.
async fn interactive_loop(mut demo: Demo, mut events: mpsc::UnboundedReceiver<String>) -> ExitCode {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut redraw = tokio::time::interval(Duration::from_millis(500));
    let mut stdin_open = true;
    loop {
        tokio::select! {
            _ = redraw.tick() => {
                let view = demo.render(&recent).await;
                print!("{view}");
                let _ = std::io::stdout().flush();
            }
            line = events.recv() => {
                if let Some(line) = line {
                    recent.push_back(line);
                    while recent.len() > RECENT_EVENTS {
                        recent.pop_front();
                    }
                }
            }
            line = lines.next_line(), if stdin_open => {
                let line = match line {
                    Ok(Some(line)) => line,
                    // Stdin closed: keep showing the view until Ctrl-C.
                    _ => { stdin_open = false; continue; }
                };
                let words: Vec<&str> = line.split_whitespace().collect();
                let reply = match words.as_slice() {
                    ["quit" | "q" | "exit"] => break,
                    ["kill", n] | ["k", n] => match n.parse::<usize>() {
                        Ok(n) if (1..=demo.nodes.len()).contains(&n) => {
                            demo.kill(n - 1).await;
                            format!("killed node-{n}")
                        }
                        _ => format!("no node {n}"),
                    },
                    ["revive", n] | ["r", n] => match n.parse::<usize>() {
                        Ok(n) if (1..=demo.nodes.len()).contains(&n) => {
                            match demo.revive(n - 1).await {
                                Ok(()) => format!("revived node-{n}"),
                                Err(err) => err,
                            }
                        }
                        _ => format!("no node {n}"),
                    },
                    ["partition" | "p", groups @ ..] => {
                        match parse_groups(groups, demo.nodes.len()) {
                            Ok(groups) => {
                                demo.partition(&groups);
                                format!("air partitioned: {groups:?}")
                            }
                            Err(err) => err,
                        }
                    }
                    ["heal" | "h"] => {
                        demo.air.heal();
                        "air healed".to_owned()
                    }
                    [] => continue,
                    _ => "commands: kill N | revive N | partition 1,2 3,4,5 | heal | quit".to_owned(),
                };
                recent.push_back(format!("{} > {line}: {reply}", clock()));
                while recent.len() > RECENT_EVENTS {
                    recent.pop_front();
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    println!("\nstopping the demo");
    demo.stop().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_groups_parse() {
        assert_eq!(
            parse_groups(&["1,2", "3,4,5"], 5).unwrap(),
            vec![vec![1, 2], vec![3, 4, 5]]
        );
        assert!(parse_groups(&["1,9"], 5).is_err());
        assert!(parse_groups(&["a"], 5).is_err());
        assert!(parse_groups(&[], 5).is_err());
    }
}
