//! `conclave demo` (CB-7): a whole cluster on one machine, with no hardware and no
//! configuration.
//!
//! N gateway nodes (5 by default) run in this process. Each has a virtual ESP32 dongle behind
//! its own pseudo-terminal, which the node opens with tokio-serial by path exactly as it would
//! open `/dev/ttyACM0`; the dongles share one simulated air (ESP-7). Every node has its own
//! admin API and metrics endpoint, printed at start, so `conclave status --admin ...` and a
//! Prometheus scrape work against the demo as against real nodes.
//!
//! Interactive (the default): commands typed on stdin kill, revive and partition nodes
//! (`kill 3`, `kill 1,2`, `kill leader`, `revive 3`, `partition 1,2 3,4,5`, `heal`, `quit`;
//! `air` tells what the simulated air carried).
//! On a terminal a live view of every node — role, term, leader, dongle, peers' round-trip
//! times, its admin and metrics URLs — and the recent events is redrawn twice a second above a
//! prompt line that the redraw never touches, so what the user is typing stays on screen.
//! Elsewhere (a pipe) events and replies are printed as lines and `view` prints the table.
//! Stdin is read on a thread of its own, so a signal ends the demo at once even while a read
//! is pending. `quit`, SIGINT (Ctrl-C), SIGTERM, SIGHUP and the end of standard input all stop
//! every node gracefully and remove the demo's temporary directory (data directories, dongle
//! links, battery files). With `--duration SECS` it runs unattended instead: one line per
//! event, the leader is killed once halfway, and the exit code says whether every live node
//! knew the same leader at the end (0) or not (1). Either way the nodes' log, a file of each
//! demo's own in the temporary directory, is named at start and kept when the demo ends
//! (unattended, the warnings also go to stderr).
//!
//! `--mode raft|gossip|priority` picks the election (raft by default), with timings scaled down
//! so that a failover is quick to watch. Each node's configuration is written as TOML in the
//! keys operators use and read through the same settings and checks as `conclave run`'s.
//! Every node reads its battery from a file of its own
//! (`health.source = "file"`, read every 200 ms), and `battery N PCT` writes node N's file: in
//! priority mode (PRI-1, PRI-5) the live view shows each node's state, score and battery, and a
//! master drained to the low-battery level resigns to the best successor.
//!
//! `--log` (raft only) turns on the replicated log (LOG-1..5) on every node, with the same
//! checks as `conclave run`'s, which cut `log.max_append_bytes` to what one 250-byte radio
//! frame holds: `conclave kv` and `conclave jobs` then work against any node's admin URL, a
//! follower redirecting to the leader's. For that redirect each node's configuration names
//! the others' admin URLs (`admin.peer_urls`), so with `--log` the admin ports are reserved
//! before the nodes start instead of being left to each node's bind.
//!
//! `--air-kbps RATE` models air time on the simulated air (off by default): frames on one
//! channel take turns at that bit rate (ESP-NOW's is about 214 kbit/s), so that what a
//! client measures against the demo, commits a second above all, reflects the radio.
//!
//! Colour (the leader's row in bold, the logs on stderr) only on a terminal, and never with
//! `NO_COLOR` set.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_actors::events::{NodeEvent, Received};
use conclave_actors::node::{Node, NodeBuilder, virtual_mac};
use conclave_config::NodeConfig;
use conclave_config::settings::{Settings, toml_string};
use conclave_core::election::{Mode, ModeStatus, Role};
use conclave_espnow::{Air, AirConfig, Mac, VirtualDongleConfig, VirtualSerialPort};
use conclave_protocol::PeerId;
use tokio::sync::mpsc;

use crate::output::{errln, out, outln};
use crate::render::colour;

/// Recent events kept for the live view.
const RECENT_EVENTS: usize = 12;

/// The commands, as the view and a wrong command show them.
const COMMANDS: &str = "kill N[,M..] | kill leader | revive N[,M..] | partition 1,2 3,4,5 | \
     heal | battery N PCT | air | view | quit";

/// Where a table row's peers continue when the row wraps: under the ROLE column (the PEERS
/// column itself starts past an 80-column terminal's half).
const PEERS_INDENT: usize = 10;

/// How often each node reads its battery file: a `battery` command shows within this.
const BATTERY_READ_INTERVAL: Duration = Duration::from_millis(200);

/// What the demo was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct DemoOptions {
    pub(crate) nodes: usize,
    pub(crate) duration: Option<Duration>,
    pub(crate) seed: Option<u64>,
    /// `--mode`: raft, gossip or priority.
    pub(crate) mode: Mode,
    /// `--log`: the replicated log on every node (raft only).
    pub(crate) log: bool,
    /// `--air-kbps`, in bits a second: air time modelled at this rate; `None` leaves it out.
    pub(crate) air_bit_rate: Option<NonZeroU32>,
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
    /// Where the nodes' logs go, when to a file.
    log_file: Option<PathBuf>,
    /// The election mode every node runs.
    mode: Mode,
    /// Whether the nodes run the replicated log.
    log: bool,
    /// The air's bit rate when air time is modelled.
    air_bit_rate: Option<NonZeroU32>,
    _dir: tempfile::TempDir,
}

/// What the nodes of one demo share, from which each node's configuration is written.
struct DemoPlan<'a> {
    /// Every node's name, in order.
    names: &'a [String],
    /// The demo's temporary directory: data directories, dongle links, battery files.
    dir: &'a Path,
    mode: Mode,
    /// `[log] enabled = true` on every node.
    log: bool,
    /// Each node's admin address, in the order of `names`, when reserved beforehand (with
    /// the log, so that every node can name the others' in `admin.peer_urls`); empty: each
    /// node binds port 0.
    admin: &'a [SocketAddr],
}

fn peer_id(name: &str) -> PeerId {
    PeerId::new(name).unwrap_or_else(|err| panic!("demo node names are valid ids: {err}"))
}

/// Peer ids separated by spaces, `none` for no peer.
fn peer_list(peers: &[PeerId]) -> String {
    if peers.is_empty() {
        return "none".to_owned();
    }
    peers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
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

/// Node `name`'s battery file, which `battery N PCT` writes and its health source reads.
fn battery_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("battery-{name}"))
}

/// The `[election]` part of the demo's configuration for `mode`, with timings scaled down so
/// that a failover is quick to watch: raft fails over in well under a second, gossip in about
/// 1.5 s (Fabric's defaults take 15 s), priority in about 1.3 s (seed 002's take 3–4 s).
/// Static mode is not offered by `--mode`; it runs raft.
fn election_toml(mode: Mode) -> &'static str {
    match mode {
        Mode::Gossip => {
            r#"
[election]
mode = "gossip"
[election.gossip]
startup_grace_period_ms = 1500
membership_sample_interval_ms = 300
leader_alive_threshold_ms = 1000
leader_election_duration_ms = 500
"#
        }
        Mode::Priority => {
            r#"
[election]
mode = "priority"
[election.priority]
discovery_timeout_ms = 300
campaign_timeout_ms = 150
vote_timeout_ms = 200
jitter_max_ms = 100
announce_interval_ms = 300
master_timeout_ms = 900
"#
        }
        Mode::Raft | Mode::Static => {
            r#"
[election]
mode = "raft"
[election.raft]
# The default timings scaled down: a failover is over in well under a second.
heartbeat_ms = 100
election_timeout_min_ms = 400
election_timeout_max_ms = 800
"#
        }
    }
}

/// A path as a TOML string; the demo's paths are its own temporary directory's, so UTF-8.
fn toml_path(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(toml_string)
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

/// The `[admin]` section of node `name`: port 0 (the system picks a free port when the node
/// binds it, and the node's first start fixes it for the demo's lifetime: a port found free
/// beforehand could be taken meanwhile), or the address reserved for it with every other
/// node's URL, so that a follower names the leader's when it redirects a write (LOG-1).
fn admin_toml(name: &str, plan: &DemoPlan<'_>) -> String {
    let Some(index) = plan.names.iter().position(|n| n == name) else {
        return "[admin]\nlisten = \"127.0.0.1:0\"\n".to_owned();
    };
    let Some(listen) = plan.admin.get(index) else {
        return "[admin]\nlisten = \"127.0.0.1:0\"\n".to_owned();
    };
    let peer_urls: Vec<String> = plan
        .names
        .iter()
        .zip(plan.admin)
        .filter(|(peer, _)| *peer != name)
        .map(|(peer, addr)| toml_string(&format!("{peer}=http://{addr}")))
        .collect();
    format!(
        "[admin]\nlisten = {}\npeer_urls = [{}]\n",
        toml_string(&listen.to_string()),
        peer_urls.join(", ")
    )
}

/// Node `name`'s configuration, written as an operator would write it (the keys of
/// `config/default.toml`) and read through the same settings and checks as `conclave run`'s.
fn demo_toml(name: &str, port: &Path, plan: &DemoPlan<'_>) -> Result<String, String> {
    let voters: Vec<String> = plan.names.iter().map(|name| toml_string(name)).collect();
    let dir = plan.dir;
    // LOG-1: check-config lowers log.max_append_bytes to what one radio frame holds.
    let log = if plan.log {
        "\n# The replicated log: conclave kv and conclave jobs against any node.\n[log]\nenabled = true\n"
    } else {
        ""
    };
    Ok(format!(
        r#"
[node]
id = {id}
data_dir = {data_dir}

[cluster]
id = "demo"
voters = [{voters}]
# A cluster created here and now: each node records a genesis once every voter answered.
initial_state = "new"
# No pre-shared key: every node's radio is a virtual dongle on this process's simulated air.
insecure = true
{election}
[membership]
heartbeat_ms = 200
timeout_multiplier = 3
hello_interval_ms = 500
announce_interval_ms = 5000

[link.espnow]
port = {port}
baud = 921600
channel = 1

{admin}
[metrics]
listen = "127.0.0.1:0"

# `battery N PCT` writes the file.
[health]
source = "file"
file = {battery}
battery_percent = 100
interval_ms = {interval}
timeout_ms = {interval}
{log}"#,
        id = toml_string(name),
        data_dir = toml_path(&dir.join(name))?,
        voters = voters.join(", "),
        election = election_toml(plan.mode),
        admin = admin_toml(name, plan),
        port = toml_path(port)?,
        battery = toml_path(&battery_file(dir, name))?,
        interval = BATTERY_READ_INTERVAL.as_millis(),
    ))
}

/// Node `name`'s validated configuration. The one warning expected is that frames are not
/// authenticated over the "radio", which is this process's simulated air; any other problem or
/// warning is a defect of [`demo_toml`], refused rather than run.
fn demo_config(name: &str, port: &Path, plan: &DemoPlan<'_>) -> Result<NodeConfig, String> {
    let toml = demo_toml(name, port, plan)?;
    let settings = Settings::from_toml_str(&toml)
        .map_err(|err| format!("the demo's configuration of {name}: {err}"))?;
    let (config, warnings) = settings.validate_with_warnings().map_err(|problems| {
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        format!(
            "the demo's configuration of {name} is refused: {}",
            problems.join("; ")
        )
    })?;
    if let Some(warning) = warnings.iter().find(|w| w.key != "cluster.insecure") {
        return Err(format!(
            "the demo's configuration of {name}: unexpected warning {warning}"
        ));
    }
    Ok(config)
}

/// A listener on a free loopback port for each of `count` nodes' admin API, held until that
/// node starts so that nothing else takes the port meanwhile.
fn reserve_admin_ports(count: usize) -> Result<Vec<TcpListener>, String> {
    (0..count)
        .map(|_| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(|err| format!("cannot reserve a port for an admin API: {err}"))
        })
        .collect()
}

impl Demo {
    async fn start(
        options: &DemoOptions,
        seed: u64,
        events_tx: mpsc::UnboundedSender<String>,
    ) -> Result<Self, String> {
        let count = options.nodes;
        let dir = tempfile::Builder::new()
            .prefix("conclave-demo-")
            .tempdir()
            .map_err(|err| format!("cannot create the demo's directory: {err}"))?;
        let air = Air::with_config(AirConfig {
            seed,
            bit_rate: options.air_bit_rate,
            ..AirConfig::default()
        });
        let names: Vec<String> = (1..=count).map(|i| format!("node-{i}")).collect();
        let mut reserved: Vec<Option<TcpListener>> = if options.log {
            reserve_admin_ports(count)?.into_iter().map(Some).collect()
        } else {
            Vec::new()
        };
        let admin = reserved
            .iter()
            .flatten()
            .map(|listener| {
                listener
                    .local_addr()
                    .map_err(|err| format!("cannot read a reserved admin port: {err}"))
            })
            .collect::<Result<Vec<SocketAddr>, String>>()?;
        let plan = DemoPlan {
            names: &names,
            dir: dir.path(),
            mode: options.mode,
            log: options.log,
            admin: &admin,
        };
        let mut nodes = Vec::new();
        for name in &names {
            let mac = virtual_mac(peer_id(name));
            let link = dir.path().join(format!("tty-{name}"));
            let port = VirtualSerialPort::create(&link, &air, VirtualDongleConfig::new(mac))
                .map_err(|err| format!("cannot create {name}'s virtual dongle: {err}"))?;
            let config = demo_config(name, port.path(), &plan)?;
            let battery = battery_file(dir.path(), name);
            std::fs::write(&battery, "100\n").map_err(|err| {
                format!(
                    "cannot write {name}'s battery file {}: {err}",
                    battery.display()
                )
            })?;
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
            log_file: None,
            mode: options.mode,
            log: options.log,
            air_bit_rate: options.air_bit_rate,
            _dir: dir,
        };
        for index in 0..count {
            // The node binds its admin port itself: free it just before.
            drop(reserved.get_mut(index).and_then(Option::take));
            if let Err(err) = demo.revive(index).await {
                // The nodes already running must stop before the runtime goes.
                demo.stop().await;
                return Err(err);
            }
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
        // Keep the ports the system chose, so a revived node has the same URLs.
        let config = &mut self.nodes[index].config;
        config.admin.listen = node.admin_addr().or(config.admin.listen);
        config.metrics.listen = node.metrics_addr().or(config.metrics.listen);
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
                    Received::Event(NodeEvent::MembershipChanged(change)) => format!(
                        "{name:<8} members: voters {}; learners {}",
                        peer_list(&change.voters),
                        peer_list(&change.learners)
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

    /// Whether node `index` runs.
    fn is_running(&self, index: usize) -> bool {
        self.nodes[index].node.is_some()
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

    /// The leader: the one every live node names, else one that says it leads.
    async fn current_leader(&self) -> Option<usize> {
        if let Some(leader) = self.agreed_leader().await {
            return Some(leader);
        }
        for index in self.live() {
            let node = self.nodes[index].node.as_ref()?;
            if node
                .handle()
                .election_status()
                .await
                .is_ok_and(|status| status.role == Role::Leader)
            {
                return Some(index);
            }
        }
        None
    }

    /// `kill …`: the nodes named (numbers from 1, or `leader`), abruptly; the reply.
    async fn kill_command(&mut self, targets: &[Target]) -> String {
        let mut replies = Vec::new();
        for target in targets {
            let index = match *target {
                Target::Node(n) => n - 1,
                Target::Leader => match self.current_leader().await {
                    Some(index) => index,
                    None => {
                        replies.push("no node leads right now".to_owned());
                        continue;
                    }
                },
            };
            let name = self.name(index);
            if !self.is_running(index) {
                replies.push(format!("{name} is not running"));
                continue;
            }
            self.kill(index).await;
            replies.push(match target {
                Target::Leader => format!("killed {name} (the leader)"),
                Target::Node(_) => format!("killed {name}"),
            });
        }
        replies.join("; ")
    }

    /// `revive …`: the nodes named, from their WAL; the reply.
    async fn revive_command(&mut self, targets: &[Target]) -> String {
        let mut replies = Vec::new();
        for target in targets {
            let Target::Node(n) = *target else {
                replies.push("revive takes node numbers: a leader is never down".to_owned());
                continue;
            };
            let name = self.name(n - 1);
            if self.is_running(n - 1) {
                replies.push(format!("{name} is already running"));
                continue;
            }
            replies.push(match self.revive(n - 1).await {
                Ok(()) => format!("revived {name}"),
                Err(err) => err,
            });
        }
        replies.join("; ")
    }

    /// Splits the air into groups of node numbers (1-based); nodes in no group are cut off.
    /// `battery N PCT`: writes node N's battery file, which its health source reads within
    /// [`BATTERY_READ_INTERVAL`].
    fn battery_command(&self, node: &str, percent: &str) -> String {
        let index = match node.parse::<usize>() {
            Ok(n) if (1..=self.nodes.len()).contains(&n) => n - 1,
            _ => return format!("no node {node:?}: nodes are 1 to {}", self.nodes.len()),
        };
        let percent = match percent.trim_end_matches('%').parse::<u8>() {
            Ok(p) if p <= 100 => p,
            _ => return format!("battery must be 0 to 100, not {percent:?}"),
        };
        let name = self.name(index);
        let file = battery_file(self._dir.path(), &name);
        match std::fs::write(&file, format!("{percent}\n")) {
            Ok(()) if self.mode == Mode::Priority => format!("{name}'s battery is now {percent}%"),
            Ok(()) => {
                format!("{name}'s battery is now {percent}% (only priority mode elects by battery)")
            }
            Err(err) => format!("cannot write {}: {err}", file.display()),
        }
    }

    /// `air`: what the simulated air carried since the demo started, every node's frames
    /// added up, in the bytes a real radio would have sent (payload and ESP-NOW's framing), so
    /// that a client's measurement can be set against the bytes a second the air allows.
    fn air_command(&self) -> String {
        let total = self.air.total_counters();
        format!(
            "{} frames, {} bytes on the air (payload + {} each), {} lost, {} dropped by a full \
             receive queue{}",
            total.sent,
            total.air_bytes,
            conclave_espnow::AIR_FRAME_OVERHEAD,
            total.lost,
            total.rx_overflow,
            self.air_time_note()
        )
    }

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
        outln!(
            "conclave demo: {} nodes on virtual ESP-NOW dongles sharing one simulated air{}",
            self.nodes.len(),
            self.air_time_note()
        );
        for line in self.endpoint_lines() {
            outln!("{line}");
        }
        if self.log {
            outln!("{}", self.log_note());
        }
    }

    /// How the title names the air-time model, when it is on.
    fn air_time_note(&self) -> String {
        self.air_bit_rate.map_or_else(String::new, |rate| {
            format!(" (air time at {} kbit/s)", rate.get() / 1000)
        })
    }

    /// The line that says the log is on and how to use it.
    fn log_note(&self) -> String {
        let admin = self.nodes.first().and_then(|node| node.config.admin.listen);
        format!(
            "  replicated log on: conclave kv put KEY VALUE --admin {} (any node; a follower \
             redirects to the leader), conclave kv get, conclave jobs",
            admin.map_or("URL".to_owned(), |a| format!("http://{a}"))
        )
    }

    /// The live view, line by line: the nodes' endpoints, one line per node, the recent
    /// events (`events` of them, padded, so the view's height stays put).
    async fn view(&self, recent: &VecDeque<String>, events: usize) -> Vec<ViewLine> {
        let mut lines = vec![
            ViewLine::plain(format!(
                "conclave demo: {} nodes on virtual ESP-NOW dongles, one simulated air{}",
                self.nodes.len(),
                self.air_time_note()
            )),
            ViewLine::indented(format!("commands: {COMMANDS}"), "commands: ".len()),
            ViewLine::plain(String::new()),
        ];
        lines.extend(self.endpoint_lines().into_iter().map(ViewLine::plain));
        if self.log {
            lines.push(ViewLine::plain(self.log_note()));
        }
        if let Some(path) = &self.log_file {
            lines.push(ViewLine::plain(format!("  logs in {}", path.display())));
        }
        lines.push(ViewLine::plain(String::new()));
        lines.extend(self.table().await);
        lines.push(ViewLine::plain(String::new()));
        lines.push(ViewLine::plain("recent events:".to_owned()));
        let skip = recent.len().saturating_sub(events);
        for i in 0..events {
            let line = recent
                .get(skip + i)
                .map_or_else(String::new, |l| format!("  {l}"));
            lines.push(ViewLine::plain(line));
        }
        lines.push(ViewLine::plain(String::new()));
        lines
    }

    /// Each node's admin API and metrics endpoint (they stay the same across revivals).
    fn endpoint_lines(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| {
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
                format!(
                    "  {:<8} admin {admin}  metrics {metrics}  dongle {} on {}",
                    node.config.node_id,
                    node.mac,
                    node.port.path().display()
                )
            })
            .collect()
    }

    /// The table: one line per node, the leader's in bold.
    async fn table(&self) -> Vec<ViewLine> {
        let mut lines = vec![ViewLine::indented(
            format!(
                "{:<9} {:<14} {:>5}  {:<9} {:<7} {:<28} {}",
                "NODE",
                "ROLE",
                "TERM",
                "LEADER",
                "DONGLE",
                match self.mode {
                    Mode::Priority => "STATE (SCORE, BATTERY)",
                    _ => "PHASE",
                },
                "PEERS (RTT)"
            ),
            PEERS_INDENT,
        )];
        for node in &self.nodes {
            let name = node.config.node_id.to_string();
            let Some(running) = &node.node else {
                lines.push(ViewLine::plain(format!("{name:<9} killed")));
                continue;
            };
            let Ok(status) = running.handle().status().await else {
                lines.push(ViewLine::plain(format!("{name:<9} stopping")));
                continue;
            };
            let dongle = match &status.dongle {
                Some(dongle) if dongle.status.connected => "up",
                Some(_) => "DOWN",
                None => "-",
            };
            let peers: Vec<String> = status
                .peers
                .iter()
                .map(|peer| match (peer.status, peer.rtt) {
                    (conclave_core::PeerStatus::Connected, Some(rtt)) => format!(
                        "{} {}",
                        peer.id,
                        crate::render::rtt(Some(conclave_api::rtt_millis(rtt)))
                    ),
                    (status, _) => format!("{} {}", peer.id, status.label()),
                })
                .collect();
            let detail = match &status.election.detail {
                ModeStatus::Priority(priority) => format!(
                    "{} ({:#010x}, {}%)",
                    priority.state.label(),
                    priority.score,
                    priority.battery
                ),
                _ => status.election.phase.to_owned(),
            };
            lines.push(ViewLine {
                indent: PEERS_INDENT,
                text: format!(
                    "{name:<9} {:<14} {:>5}  {:<9} {dongle:<7} {detail:<28} {}",
                    status.election.role.label(),
                    status.election.term,
                    status
                        .election
                        .leader
                        .map_or("-".to_owned(), |l| l.to_string()),
                    peers.join(", ")
                ),
                bold: status.election.role == Role::Leader,
            });
        }
        lines
    }
}

/// One line of the live view.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ViewLine {
    text: String,
    /// Drawn in bold when colour is allowed.
    bold: bool,
    /// Where the rows it wraps onto start (at most half the width), so that a continued
    /// list stays under its column.
    indent: usize,
}

impl ViewLine {
    fn plain(text: String) -> Self {
        Self {
            text,
            bold: false,
            indent: 4,
        }
    }

    fn indented(text: String, indent: usize) -> Self {
        Self {
            indent,
            ..Self::plain(text)
        }
    }
}

/// `text` as rows of at most `width` characters: broken after a list's `, ` or ` | ` where one
/// fits, else at a space, else anywhere; the rows after the first start with `indent` spaces
/// (at most half the width). Nothing is cut: on a narrow terminal every command and every peer
/// stays on screen.
fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(8);
    let indent = indent.min(width / 2);
    let mut rows = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    let mut prefix = String::new();
    loop {
        let room = width - prefix.chars().count();
        if rest.len() <= room {
            rows.push(format!("{prefix}{}", rest.iter().collect::<String>()));
            return rows;
        }
        // The end of the row: after the last separator that fits, else the last space.
        let fits = &rest[..=room];
        let after = |pattern: &[char]| {
            fits.windows(pattern.len())
                .rposition(|window| window == pattern)
                .map(|at| at + pattern.len())
                .filter(|&end| end > 1 && end <= room + 1)
        };
        let end = after(&[',', ' '])
            .or_else(|| after(&[' ', '|', ' ']))
            .or_else(|| after(&[' ']))
            .unwrap_or(room);
        let row: String = rest[..end].iter().collect();
        rows.push(format!("{prefix}{}", row.trim_end()));
        let skip = rest[end..].iter().take_while(|c| **c == ' ').count();
        rest.drain(..end + skip);
        if rest.is_empty() {
            return rows;
        }
        prefix = " ".repeat(indent);
    }
}

/// The rows `lines` take on a terminal `width` columns wide (the last column left free, so
/// that no row wraps by itself), each with its line's boldness.
fn rows(lines: &[ViewLine], width: usize) -> Vec<(String, bool)> {
    lines
        .iter()
        .flat_map(|line| {
            wrap(&line.text, width.saturating_sub(1), line.indent)
                .into_iter()
                .map(|row| (row, line.bold))
        })
        .collect()
}

/// What redraws the view on a terminal: each row at its own place from the top, cleared to
/// its end, between saving and restoring the cursor. Nothing else on the screen is touched:
/// not the prompt line below the view, where the user is typing (no clearing of the screen,
/// no clearing below a line). Long lines are wrapped, never cut ([`wrap`]).
fn redraw(rows: &[(String, bool)], bold: bool) -> String {
    let mut out = String::from("\x1b7");
    for (number, (text, is_bold)) in rows.iter().enumerate() {
        let _ = if bold && *is_bold {
            write!(out, "\x1b[{};1H\x1b[1m{text}\x1b[0m\x1b[K", number + 1)
        } else {
            write!(out, "\x1b[{};1H{text}\x1b[K", number + 1)
        };
    }
    out.push_str("\x1b8");
    out
}

/// The prompt on row `row`, everything below it cleared (the echo of the last command).
fn prompt(row: usize) -> String {
    format!("\x1b[{row};1H\x1b[J> ")
}

/// The terminal's size (columns, rows), when stdout is one.
fn terminal_size() -> Option<(usize, usize)> {
    let size = rustix::termios::tcgetwinsize(std::io::stdout()).ok()?;
    (size.ws_col > 0 && size.ws_row > 0)
        .then(|| (usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// What a `kill` or `revive` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Node `n`, from 1.
    Node(usize),
    /// Whichever node leads.
    Leader,
}

/// Parses `3`, `1,2`, `1 2`, `leader`: node numbers from 1 to `count`, or `leader`.
fn parse_targets(words: &[&str], count: usize) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for part in words
        .iter()
        .flat_map(|word| word.split(','))
        .filter(|part| !part.is_empty())
    {
        if part == "leader" {
            targets.push(Target::Leader);
            continue;
        }
        let n: usize = part
            .parse()
            .map_err(|_| format!("{part:?} is not a node number (1 to {count}) nor `leader`"))?;
        if n == 0 || n > count {
            return Err(format!("there is no node {n}; nodes are 1 to {count}"));
        }
        targets.push(Target::Node(n));
    }
    if targets.is_empty() {
        return Err("name nodes: `kill 3`, `kill 1,2`, `kill leader`".to_owned());
    }
    Ok(targets)
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

/// The reply to a line that is no command, or a command with the wrong arguments.
fn not_understood(word: &str) -> String {
    let known = [
        "kill",
        "k",
        "revive",
        "r",
        "partition",
        "p",
        "heal",
        "h",
        "battery",
        "b",
        "air",
        "a",
        "view",
        "v",
        "quit",
        "q",
        "exit",
    ];
    if known.contains(&word) {
        format!("wrong arguments for {word}; commands: {COMMANDS}")
    } else {
        format!("unknown command {word:?}; commands: {COMMANDS}")
    }
}

/// `conclave demo`.
pub(crate) fn run(options: DemoOptions) -> ExitCode {
    // Wrong options are refused before a log file is made for a demo that never runs.
    if options.nodes == 0 || options.nodes > 19 {
        errln!("error: --nodes must be 1 to 19 (an ESP-NOW radio holds 20 peers)");
        return ExitCode::from(crate::EXIT_USAGE);
    }
    if options.log && options.mode != Mode::Raft {
        errln!(
            "error: --log needs --mode raft: the replicated log runs in raft mode only, and \
             --mode is {}",
            options.mode.label()
        );
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let log_file = match init_logging(options.duration.is_none()) {
        Ok(path) => Some(path),
        Err(err) => {
            errln!("error: {err}");
            return ExitCode::from(1);
        }
    };
    let seed = options.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    // Every node has its HTTP endpoints: the demo needs descriptors like a gateway does.
    conclave_actors::admin::log_open_files_limit(&conclave_actors::admin::raise_open_files_limit());
    let system = actix_rt::System::new();
    system.block_on(async move {
        // Before any node starts: a signal during the start-up must stop them too.
        let mut signals = StopSignals::watch();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let start = Demo::start(&options, seed, events_tx);
        let mut demo = tokio::select! {
            started = start => match started {
                Ok(demo) => demo,
                Err(err) => {
                    errln!("error: {err}");
                    return ExitCode::from(1);
                }
            },
            number = signals.recv() => {
                // Dropping the start stops the nodes it had started with the runtime, and
                // removes the demo's directory.
                outln!("{}: the demo stops before it started", signal_name(number));
                if let Some(path) = &log_file {
                    outln!("logs kept in {}", path.display());
                }
                return if options.duration.is_some() {
                    ExitCode::from(signal_exit(number))
                } else {
                    ExitCode::SUCCESS
                };
            }
        };
        demo.print_endpoints();
        if let Some(path) = &log_file {
            outln!("  logs in {} (RUST_LOG sets the level)", path.display());
        }
        demo.log_file.clone_from(&log_file);
        let code = match options.duration {
            Some(duration) => unattended(demo, events_rx, duration, &mut signals).await,
            None => interactive_loop(demo, events_rx, &mut signals).await,
        };
        if let Some(path) = &log_file {
            outln!("logs kept in {}", path.display());
        }
        code
    })
}

/// Where the nodes' logs go: a file of this demo's own in the temporary directory, in both
/// ways of running it, kept when the demo ends (its path is returned, to be printed). The live
/// view owns the terminal, so there the file is all; unattended, warnings and errors go to
/// stderr as well. `RUST_LOG` overrides the level of both.
fn init_logging(interactive: bool) -> Result<PathBuf, String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = |default: &str| {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    // One per demo: two demos at once must not write over each other's log. It is kept when
    // the demo ends (the demo says where), unlike the demo's directory.
    let path = std::env::temp_dir().join(format!("conclave-demo-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).map_err(|err| {
        format!(
            "cannot create the demo's log file {}: {err} (TMPDIR chooses the directory)",
            path.display()
        )
    })?;
    let to_file = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .with_filter(filter("info"));
    let to_stderr = (!interactive).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(colour(&std::io::stderr()))
            .with_writer(std::io::stderr)
            .with_filter(filter("warn"))
    });
    tracing_subscriber::registry()
        .with(to_file)
        .with(to_stderr)
        .init();
    Ok(path)
}

/// `--duration`: events as lines, the leader killed halfway, the verdict as the exit code.
async fn unattended(
    mut demo: Demo,
    mut events: mpsc::UnboundedReceiver<String>,
    duration: Duration,
    signals: &mut StopSignals,
) -> ExitCode {
    outln!(
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
                    outln!("{line}");
                }
            }
            () = tokio::time::sleep_until(halfway), if !killed => {
                killed = true;
                match demo.agreed_leader().await {
                    Some(leader) => {
                        outln!("{} killing the leader, {}", clock(), demo.name(leader));
                        demo.kill(leader).await;
                    }
                    None => outln!("{} no agreed leader halfway; nothing to kill", clock()),
                }
            }
            () = tokio::time::sleep_until(end) => break,
            number = signals.recv() => {
                outln!("{}: stopping the demo before its verdict", signal_name(number));
                demo.stop().await;
                return ExitCode::from(signal_exit(number));
            }
        }
    }
    while let Ok(line) = events.try_recv() {
        outln!("{line}");
    }
    let verdict = demo.agreed_leader().await;
    let live = demo.live().len();
    let code = match verdict {
        Some(leader) => {
            outln!(
                "result: every live node ({live}) knows the leader {}",
                demo.name(leader)
            );
            ExitCode::SUCCESS
        }
        None => {
            outln!("result: the {live} live nodes do not agree on a leader");
            ExitCode::from(1)
        }
    };
    demo.stop().await;
    code
}

/// The signals that end the demo gracefully — SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`),
/// SIGHUP (the terminal closed) — watched from creation on: a signal made afresh in each turn
/// of a loop misses one that arrives between two turns, and one that arrives before the watch
/// takes its default action, which leaves the nodes' directory behind.
struct StopSignals {
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
    hang_up: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn watch() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let watch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(err) => {
                errln!("cannot watch {name}: {err}; type quit to stop");
                None
            }
        };
        Self {
            interrupt: watch(SignalKind::interrupt(), "SIGINT (Ctrl-C)"),
            terminate: watch(SignalKind::terminate(), "SIGTERM"),
            hang_up: watch(SignalKind::hangup(), "SIGHUP"),
        }
    }

    /// The number of the next signal received; never, for a signal that cannot be watched.
    async fn recv(&mut self) -> i32 {
        async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = next(self.interrupt.as_mut()) => libc::SIGINT,
            () = next(self.terminate.as_mut()) => libc::SIGTERM,
            () = next(self.hang_up.as_mut()) => libc::SIGHUP,
        }
    }
}

/// The exit code of a demo that signal `number` stopped before its end: 128 + the number, as
/// a shell reports a process the signal ended, though every node was stopped first.
fn signal_exit(number: i32) -> u8 {
    u8::try_from(128 + number).unwrap_or(u8::MAX)
}

/// A signal's name, for the line the demo prints when it stops.
fn signal_name(number: i32) -> &'static str {
    match number {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Lines typed on stdin, read on a thread of its own: a read pending on the runtime's blocking
/// pool would hold the process at exit until the user pressed Enter. The thread ends with the
/// process.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(16);
    let reader = std::thread::Builder::new()
        .name("demo-stdin".to_owned())
        .spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
    if let Err(err) = reader {
        errln!("cannot read commands from stdin: {err}");
    }
    rx
}

/// How the interactive demo shows itself.
struct Screen {
    /// On a terminal: the live view is redrawn; elsewhere lines are printed.
    terminal: bool,
    /// Bold for the leader.
    colour: bool,
    /// The row of the prompt, below the view, while on a terminal.
    prompt_row: usize,
}

impl Screen {
    /// Events kept in the view so that it and the prompt fit the terminal's height.
    /// `notes` is the lines under the endpoints (where the logs go, the log's usage).
    fn events_that_fit(&self, nodes: usize, notes: usize) -> usize {
        let fixed = 9 + 2 * nodes + notes;
        terminal_size().map_or(RECENT_EVENTS, |(_, rows)| {
            rows.saturating_sub(fixed + 1).clamp(2, RECENT_EVENTS)
        })
    }

    /// Redraws the view; moves the prompt when the view's height changed.
    async fn draw(&mut self, demo: &Demo, recent: &VecDeque<String>) {
        let notes = usize::from(demo.log_file.is_some()) + usize::from(demo.log);
        let mut events = self.events_that_fit(demo.nodes.len(), notes);
        let (width, height) = terminal_size().unwrap_or((200, usize::MAX));
        let mut rows = rows(&demo.view(recent, events).await, width);
        // Wrapped lines take more rows: fewer events then, so that the prompt stays on screen.
        let over = (rows.len() + 1).saturating_sub(height);
        if over > 0 && events > 0 {
            events = events.saturating_sub(over);
            rows = self::rows(&demo.view(recent, events).await, width);
        }
        let mut out = redraw(&rows, self.colour);
        if self.prompt_row != rows.len() + 1 {
            self.prompt_row = rows.len() + 1;
            out.push_str(&prompt(self.prompt_row));
        }
        out!("{out}");
        let _ = std::io::stdout().flush();
    }
}

/// The live view (on a terminal) or the event lines (elsewhere), and the commands.
async fn interactive_loop(
    mut demo: Demo,
    mut events: mpsc::UnboundedReceiver<String>,
    signals: &mut StopSignals,
) -> ExitCode {
    let stdout = std::io::stdout();
    let mut screen = Screen {
        terminal: stdout.is_terminal(),
        colour: colour(&stdout),
        prompt_row: 0,
    };
    let mut lines = stdin_lines();
    let mut recent: VecDeque<String> = VecDeque::new();
    // Why the demo stops, when not by `quit`.
    let mut stopping = String::new();
    let mut redraw_tick = tokio::time::interval(Duration::from_millis(500));
    if screen.terminal {
        out!("\x1b[2J");
    } else {
        outln!("commands: {COMMANDS}");
    }
    loop {
        tokio::select! {
            _ = redraw_tick.tick(), if screen.terminal => screen.draw(&demo, &recent).await,
            line = events.recv() => {
                if let Some(line) = line {
                    if !screen.terminal {
                        outln!("{line}");
                    }
                    recent.push_back(line);
                    while recent.len() > RECENT_EVENTS {
                        recent.pop_front();
                    }
                }
            }
            line = lines.recv() => {
                // End of input (Ctrl-D, or the end of a script piped in) ends the demo, as
                // `quit` does: nothing could be typed any more.
                let Some(line) = line else {
                    stopping = "end of input".to_owned();
                    break;
                };
                let words: Vec<&str> = line.split_whitespace().collect();
                let reply = match words.as_slice() {
                    ["quit" | "q" | "exit"] => break,
                    [] => String::new(),
                    ["kill" | "k", targets @ ..] => match parse_targets(targets, demo.nodes.len()) {
                        Ok(targets) => demo.kill_command(&targets).await,
                        Err(err) => err,
                    },
                    ["revive" | "r", targets @ ..] => {
                        match parse_targets(targets, demo.nodes.len()) {
                            Ok(targets) => demo.revive_command(&targets).await,
                            Err(err) => err,
                        }
                    }
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
                    ["battery" | "b", node, percent] => demo.battery_command(node, percent),
                    ["air" | "a"] => demo.air_command(),
                    ["view" | "v"] => {
                        if !screen.terminal {
                            for line in demo.table().await {
                                outln!("{}", line.text);
                            }
                        }
                        String::new()
                    }
                    [word, ..] => not_understood(word),
                };
                if !reply.is_empty() {
                    let line = format!("{} > {line}: {reply}", clock());
                    if !screen.terminal {
                        outln!("{line}");
                    }
                    recent.push_back(line);
                    while recent.len() > RECENT_EVENTS {
                        recent.pop_front();
                    }
                }
                if screen.terminal {
                    // Enter moved the cursor below the prompt: put a fresh prompt back.
                    out!("{}", prompt(screen.prompt_row));
                    screen.draw(&demo, &recent).await;
                }
            }
            number = signals.recv() => {
                stopping = signal_name(number).to_owned();
                break;
            }
        }
    }
    if screen.terminal {
        out!("{}", prompt(screen.prompt_row).trim_end_matches("> "));
    }
    if stopping.is_empty() {
        outln!("stopping the demo");
    } else {
        outln!("{stopping}: stopping the demo");
    }
    demo.stop().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_config::{DonglePort, HealthSource};
    use conclave_core::election::ElectionConfig;
    use conclave_core::gossip::GossipConfig;
    use conclave_core::priority::PriorityConfig;

    /// CB-7, issue 9 item 7: the demo's nodes are configured in the operators' language and
    /// pass the same checks (a path with a quote in it included): each mode with its
    /// scaled-down timings, every node a voter, its own dongle, battery file and data directory.
    #[test]
    fn demo_configuration_is_read_and_checked_as_an_operators() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("a \"quoted\" dir");
        let names: Vec<String> = (1..=3).map(|i| format!("node-{i}")).collect();
        let port = dir.join("tty-node-2");
        let config = |mode| {
            let plan = DemoPlan {
                names: &names,
                dir: &dir,
                mode,
                log: false,
                admin: &[],
            };
            demo_config("node-2", &port, &plan).unwrap()
        };
        let me = peer_id("node-2");

        let raft = config(Mode::Raft);
        assert_eq!(raft.node_id, me);
        assert_eq!(raft.data_dir, dir.join("node-2"));
        assert_eq!(
            raft.voters,
            names.iter().map(|n| peer_id(n)).collect::<Vec<_>>()
        );
        let ElectionConfig::Raft(core) = &raft.election else {
            panic!("raft expected: {:?}", raft.election);
        };
        assert_eq!(core.id, me);
        assert_eq!(core.quorum.label(), "voters");
        assert_eq!(core.heartbeat_interval, Duration::from_millis(100));
        assert_eq!(core.election_timeout_min, Duration::from_millis(400));
        assert_eq!(core.election_timeout_max, Duration::from_millis(800));
        assert_eq!(
            raft.espnow.as_ref().map(|espnow| &espnow.port),
            Some(&DonglePort::Device(port.clone()))
        );
        assert_eq!(
            raft.health.source,
            HealthSource::File(battery_file(&dir, "node-2"))
        );
        assert_eq!(raft.health.interval, BATTERY_READ_INTERVAL);
        assert_eq!(raft.admin.listen.map(|a| a.port()), Some(0));
        assert_eq!(raft.metrics.listen.map(|a| a.port()), Some(0));

        assert_eq!(
            config(Mode::Gossip).election,
            ElectionConfig::Gossip(GossipConfig::new(me).with_timings(
                Duration::from_millis(1500),
                Duration::from_millis(300),
                Duration::from_millis(1000),
                Duration::from_millis(500),
            ))
        );
        assert_eq!(
            config(Mode::Priority).election,
            ElectionConfig::Priority(PriorityConfig {
                discovery_timeout: Duration::from_millis(300),
                campaign_timeout: Duration::from_millis(150),
                vote_timeout: Duration::from_millis(200),
                jitter_max: Duration::from_millis(100),
                announce_interval: Duration::from_millis(300),
                master_timeout: Duration::from_millis(900),
                ..PriorityConfig::new(me)
            })
        );
    }

    /// LOG-1, PROTO-4, issue 16 item 10: `--log` turns the replicated log on through the
    /// operators' keys, `log.max_append_bytes` cut by the same checks to what one 250-byte
    /// radio frame holds, and every node names the others' reserved admin URLs so that a
    /// follower can redirect a write to the leader; without `--log` the log is off and the
    /// admin port left to the node's bind.
    #[test]
    fn demo_with_the_log_enables_it_and_names_every_admin_url() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (1..=3).map(|i| format!("node-{i}")).collect();
        let port = dir.path().join("tty-node-2");
        let admin: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from((Ipv4Addr::LOCALHOST, 7070 + i)))
            .collect();
        let plan = DemoPlan {
            names: &names,
            dir: dir.path(),
            mode: Mode::Raft,
            log: true,
            admin: &admin,
        };
        let config = demo_config("node-2", &port, &plan).unwrap();
        let ElectionConfig::Raft(core) = &config.election else {
            panic!("raft expected: {:?}", config.election);
        };
        let log = core.log.as_ref().expect("the log is on");
        let defaults = demo_config(
            "node-2",
            &port,
            &DemoPlan {
                log: false,
                admin: &[],
                ..plan
            },
        )
        .unwrap();
        let ElectionConfig::Raft(without) = &defaults.election else {
            panic!("raft expected");
        };
        assert_eq!(without.log, None);
        assert_eq!(defaults.admin.listen.map(|a| a.port()), Some(0));
        assert!(defaults.admin.peer_urls.is_empty());
        // Cut from the 1024-byte default to what a radio frame holds beside its envelope.
        assert!(
            (64..250).contains(&log.max_append_bytes),
            "{}",
            log.max_append_bytes
        );
        assert_eq!(config.admin.listen, Some(admin[1]));
        let urls: Vec<(String, String)> = config
            .admin
            .peer_urls
            .iter()
            .map(|(peer, url)| (peer.to_string(), url.clone()))
            .collect();
        assert_eq!(
            urls,
            [
                ("node-1".to_owned(), "http://127.0.0.1:7070".to_owned()),
                ("node-3".to_owned(), "http://127.0.0.1:7072".to_owned()),
            ]
        );
    }

    /// `kill 1,2`, `kill 1 2` and `kill leader` name what they say.
    /// A line the demo does not understand says so before listing the commands; a known
    /// command with the wrong arguments is told apart.
    #[test]
    fn a_line_that_is_no_command_is_said_to_be_unknown() {
        assert_eq!(
            not_understood("xyz"),
            format!("unknown command \"xyz\"; commands: {COMMANDS}")
        );
        assert_eq!(
            not_understood("battery"),
            format!("wrong arguments for battery; commands: {COMMANDS}")
        );
    }

    #[test]
    fn kill_and_revive_targets_parse() {
        assert_eq!(
            parse_targets(&["1,2"], 5).unwrap(),
            [Target::Node(1), Target::Node(2)]
        );
        assert_eq!(
            parse_targets(&["1", "3"], 5).unwrap(),
            [Target::Node(1), Target::Node(3)]
        );
        assert_eq!(parse_targets(&["leader"], 5).unwrap(), [Target::Leader]);
        assert!(parse_targets(&["6"], 5).is_err());
        assert!(parse_targets(&["x"], 5).is_err());
        assert!(parse_targets(&[], 5).is_err());
    }

    /// The redraw never clears the screen nor anything below the view, and leaves the
    /// cursor where it was: what the user types on the prompt line stays.
    #[test]
    fn the_redraw_leaves_the_prompt_line_alone() {
        let lines = vec![
            ViewLine::plain("title".to_owned()),
            ViewLine {
                bold: true,
                ..ViewLine::plain("node-1    leader".to_owned())
            },
            ViewLine::plain("x".repeat(100)),
        ];
        let out = redraw(&rows(&lines, 80), true);
        assert!(
            out.starts_with("\x1b7") && out.ends_with("\x1b8"),
            "{out:?}"
        );
        assert!(
            !out.contains("\x1b[2J") && !out.contains("\x1b[J"),
            "{out:?}"
        );
        // Rows 1 to 4 only (the long line takes two): the prompt, on row 5, is not touched.
        assert!(
            out.contains("\x1b[4;1H") && !out.contains("\x1b[5;"),
            "{out:?}"
        );
        // Long lines wrap within the width, the last column left free.
        assert!(
            out.contains(&format!("\x1b[3;1H{}\x1b[K", "x".repeat(79))),
            "{out:?}"
        );
        assert!(
            out.contains(&format!("\x1b[4;1H    {}\x1b[K", "x".repeat(21))),
            "{out:?}"
        );
        assert!(out.contains("\x1b[1mnode-1    leader\x1b[0m"), "{out:?}");
        // Without colour, no bold.
        assert!(!redraw(&rows(&lines, 80), false).contains("\x1b[1m"));
    }

    /// Issue 15: on an 80-column terminal every command stays visible (`heal`, `battery`,
    /// `view` and `quit` included) and every peer of a table row, each list wrapped at its
    /// separators onto rows that fit, none cut.
    #[test]
    fn an_80_column_terminal_shows_every_command_and_every_peer() {
        let commands = ViewLine::indented(format!("commands: {COMMANDS}"), "commands: ".len());
        let peers = (2..=5)
            .map(|n| format!("node-{n} 8.{n}0 ms"))
            .collect::<Vec<_>>()
            .join(", ");
        let row = ViewLine {
            indent: PEERS_INDENT,
            ..ViewLine::plain(format!(
                "{:<9} {:<14} {:>5}  {:<9} {:<7} {:<28} {peers}",
                "node-1", "follower", 2, "node-3", "up", "follower"
            ))
        };
        let drawn = rows(&[commands, row], 80);
        for (text, _) in &drawn {
            assert!(text.chars().count() <= 79, "{text:?} is too wide");
        }
        let all: Vec<&str> = drawn.iter().map(|(text, _)| text.as_str()).collect();
        let joined = all.join("\n");
        for command in [
            "heal",
            "battery N PCT",
            "view",
            "quit",
            "partition 1,2 3,4,5",
        ] {
            assert!(joined.contains(command), "{command} missing:\n{joined}");
        }
        for n in 2..=5 {
            assert!(
                joined.contains(&format!("node-{n} 8.{n}0 ms")),
                "node-{n} cut or split:\n{joined}"
            );
        }
        // Continued rows are indented, and a list breaks after its separator.
        assert!(all[1].starts_with("          "), "{joined}");
        assert!(all[0].ends_with('|'), "{joined}");
    }

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
