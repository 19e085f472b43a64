//! The validated configuration a node runs with.
//!
//! [`NodeConfig`] is what [`crate::settings`] produces once every key of DESIGN §9 has been
//! read and checked: identities are `PeerId`s, durations are `Duration`s, addresses are
//! parsed. The node builder trusts it and never re-validates; tests build it directly.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use conclave_core::MembershipConfig;
use conclave_core::election::{ElectionConfig as ModeConfig, Mode};
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
// The one place outside the core that names raft's own types: raft's settings are built here.
use conclave_core::raft::{QuorumMode, RaftConfig};
use conclave_core::static_leader::StaticConfig;
use conclave_protocol::{AuthKey, ClusterId, PeerId};

/// Everything one node needs to run.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `node.id`.
    pub node_id: PeerId,
    /// `node.data_dir`: the WAL lives here.
    pub data_dir: PathBuf,
    /// `cluster.id`.
    pub cluster_id: ClusterId,
    /// The frame key from `cluster.psk_file`; `None` runs unauthenticated (logged as a warning).
    pub auth_key: Option<AuthKey>,
    /// `[election]`.
    pub election: ElectionConfig,
    /// `[membership]`.
    pub membership: MembershipConfig,
    /// `[link.udp]`, when configured.
    pub udp: Option<UdpLinkConfig>,
    /// `[link.espnow]`, when configured.
    pub espnow: Option<EspNowLinkConfig>,
    /// `[admin]`.
    pub admin: AdminConfig,
    /// `[metrics]`.
    pub metrics: MetricsConfig,
    /// `[hooks]`.
    pub hooks: HooksConfig,
    /// `[health]`: where this node's battery and priority readings come from.
    pub health: HealthConfig,
}

impl NodeConfig {
    /// The election core's settings for this node, in its mode.
    pub fn election_config(&self) -> ModeConfig {
        match self.election.mode {
            ElectionMode::Raft => ModeConfig::Raft(self.raft_config()),
            ElectionMode::Static { leader } => ModeConfig::Static(StaticConfig {
                id: self.node_id,
                leader,
                members: self.election.voters.iter().copied().collect(),
            }),
            ElectionMode::Gossip(gossip) => {
                ModeConfig::Gossip(gossip.core(self.node_id, self.election.auto))
            }
            ElectionMode::Priority(priority) => ModeConfig::Priority(priority.core(
                self.node_id,
                self.election.auto,
                self.health.battery_percent,
            )),
        }
    }

    /// Raft's settings for this node (`[election.raft]`), whatever the mode.
    fn raft_config(&self) -> RaftConfig {
        let raft = &self.election.raft;
        RaftConfig {
            id: self.node_id,
            quorum: match raft.quorum {
                Quorum::Voters => {
                    QuorumMode::Voters(self.election.voters.iter().copied().collect())
                }
                Quorum::Connected => QuorumMode::Connected,
            },
            heartbeat_interval: raft.heartbeat,
            election_timeout_min: raft.election_timeout_min,
            election_timeout_max: raft.election_timeout_max,
            pre_vote: raft.pre_vote,
            check_quorum: raft.check_quorum,
            auto_election: self.election.auto,
            ranked_timeouts: raft.ranked_timeouts,
            priority: raft.priority,
            preempt_delay: raft.preempt_delay,
            nopreempt: raft.nopreempt,
        }
    }
}

/// `election.raft.quorum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quorum {
    /// A majority of `cluster.voters`.
    Voters,
    /// Seed 000's rooms: this node plus the connected peers.
    Connected,
}

/// `[election]` and `[election.raft]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// `election.mode`, with what only that mode needs.
    pub mode: ElectionMode,
    /// `cluster.voters`.
    pub voters: Vec<PeerId>,
    /// `election.auto`: start with automatic election on.
    pub auto: bool,
    /// `[election.raft]`.
    pub raft: RaftSettings,
}

/// `election.mode`, with the settings of a mode beyond `[election.raft]`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionMode {
    /// `"raft"`: `[election.raft]`.
    Raft,
    /// `"static"`: the leader named by `election.static.leader` (STA-1).
    Static {
        /// `election.static.leader`.
        leader: PeerId,
    },
    /// `"gossip"`: `[election.gossip]` (GOS-1..6).
    Gossip(GossipSettings),
    /// `"priority"`: `[election.priority]` (PRI-1..6).
    Priority(PrioritySettings),
}

impl ElectionMode {
    /// The mode.
    pub fn mode(self) -> Mode {
        match self {
            ElectionMode::Raft => Mode::Raft,
            ElectionMode::Static { .. } => Mode::Static,
            ElectionMode::Gossip(_) => Mode::Gossip,
            ElectionMode::Priority(_) => Mode::Priority,
        }
    }
}

/// `[election.gossip]`: Fabric's four timings and its static leadership switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GossipSettings {
    /// `startup_grace_period_ms`.
    pub startup_grace_period: Duration,
    /// `membership_sample_interval_ms`.
    pub membership_sample_interval: Duration,
    /// `leader_alive_threshold_ms`.
    pub leader_alive_threshold: Duration,
    /// `leader_election_duration_ms`.
    pub leader_election_duration: Duration,
    /// `use_leader_election`.
    pub use_leader_election: bool,
    /// `org_leader`.
    pub org_leader: bool,
}

impl GossipSettings {
    /// The gossip core's settings for node `id`.
    pub fn core(self, id: PeerId, auto_election: bool) -> GossipConfig {
        GossipConfig {
            use_leader_election: self.use_leader_election,
            org_leader: self.org_leader,
            auto_election,
            ..GossipConfig::new(id).with_timings(
                self.startup_grace_period,
                self.membership_sample_interval,
                self.leader_alive_threshold,
                self.leader_election_duration,
            )
        }
    }
}

/// `[election.priority]`: seed 002's timings and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrioritySettings {
    /// `discovery_timeout_ms`.
    pub discovery_timeout: Duration,
    /// `campaign_timeout_ms`.
    pub campaign_timeout: Duration,
    /// `vote_timeout_ms`.
    pub vote_timeout: Duration,
    /// `jitter_max_ms` (0: no jitter).
    pub jitter_max: Duration,
    /// `max_retries`.
    pub max_retries: u8,
    /// `announce_interval_ms`.
    pub announce_interval: Duration,
    /// `master_timeout_ms`.
    pub master_timeout: Duration,
    /// `low_battery_percent`.
    pub low_battery_percent: u8,
    /// `force_master`.
    pub force_master: bool,
}

impl PrioritySettings {
    /// The priority core's settings for node `id`, assuming `battery_percent` until the
    /// first health reading.
    pub fn core(self, id: PeerId, auto_election: bool, battery_percent: u8) -> PriorityConfig {
        PriorityConfig {
            id,
            discovery_timeout: self.discovery_timeout,
            campaign_timeout: self.campaign_timeout,
            vote_timeout: self.vote_timeout,
            jitter_max: self.jitter_max,
            max_retries: self.max_retries,
            announce_interval: self.announce_interval,
            master_timeout: self.master_timeout,
            battery_percent,
            low_battery_percent: self.low_battery_percent,
            force_master: self.force_master,
            auto_election,
        }
    }
}

/// `[election.raft]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftSettings {
    /// `quorum`.
    pub quorum: Quorum,
    /// `heartbeat_ms`.
    pub heartbeat: Duration,
    /// `election_timeout_min_ms`.
    pub election_timeout_min: Duration,
    /// `election_timeout_max_ms`.
    pub election_timeout_max: Duration,
    /// `pre_vote`.
    pub pre_vote: bool,
    /// `check_quorum`.
    pub check_quorum: bool,
    /// `ranked_timeouts`: stagger the followers' election timeouts by rank (see
    /// raft's `RaftConfig::ranked_timeouts` in conclave-core).
    pub ranked_timeouts: bool,
    /// `priority` (RAFT-10): `None` takes no part in preemption.
    pub priority: Option<u8>,
    /// `preempt_delay_ms` (RAFT-10).
    pub preempt_delay: Duration,
    /// `nopreempt` (RAFT-10, keepalived's).
    pub nopreempt: bool,
}

/// `[link.udp]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpLinkConfig {
    /// `listen`: the socket this node receives on and sends from.
    pub listen: SocketAddr,
    /// `peers`: where to broadcast before peers are known.
    pub peers: Vec<SocketAddr>,
}

/// Where the ESP-NOW dongle is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DonglePort {
    /// A serial device, such as `/dev/ttyACM0` (or a pseudo-terminal standing in for one).
    Device(std::path::PathBuf),
    /// `"virtual"`: the built-in virtual dongle, on a simulated air of its own.
    Virtual,
}

/// `[link.espnow]` (ESP-1..8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspNowLinkConfig {
    /// `port`.
    pub port: DonglePort,
    /// `baud` (921600 on USB-UART boards; ignored by native USB).
    pub baud: u32,
    /// `channel`, 1–14: every node of a cluster must use the same one.
    pub channel: u8,
    /// `pmk`: the radio's primary master key, when frames to peers are to be encrypted.
    pub pmk: Option<[u8; 16]>,
    /// `lmk`: the local master key for unicast peers without one of their own in
    /// `peer_lmks`; frames to them are encrypted when set.
    pub lmk: Option<[u8; 16]>,
    /// `peer_lmks`: a local master key of its own for some peers; frames to those are
    /// encrypted with it whatever `lmk` says.
    pub peer_lmks: BTreeMap<PeerId, [u8; 16]>,
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// `listen`; `None` turns the admin API off.
    pub listen: Option<SocketAddr>,
    /// The bearer token read from `token_file`; mutations need it when set, and every
    /// endpoint but `/health` does when `listen` is not a loopback address.
    pub token: Option<String>,
    /// `peer_urls`: the admin API of other nodes (`http://host:port`), so that a follower can
    /// name the leader's, and `conclave cluster status` can ask every node.
    pub peer_urls: BTreeMap<PeerId, String>,
    /// `max_connections`: open admin connections served at once; past it, a request is
    /// refused with 503 and counted.
    pub max_connections: usize,
    /// `max_event_streams`: `GET /v1/events` subscribers at once; past it, refused with 503
    /// and counted.
    pub max_event_streams: usize,
}

impl AdminConfig {
    /// Default of `admin.max_connections`.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
    /// Default of `admin.max_event_streams`.
    pub const DEFAULT_MAX_EVENT_STREAMS: usize = 16;
}

impl Default for AdminConfig {
    /// The API off, no token, no peers known, the default bounds (those of
    /// `config/default.toml`: `settings::tests::code_defaults_equal_the_built_in_defaults`).
    fn default() -> Self {
        Self {
            listen: None,
            token: None,
            peer_urls: BTreeMap::new(),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_event_streams: Self::DEFAULT_MAX_EVENT_STREAMS,
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `listen`; `None` turns the metrics endpoint off.
    pub listen: Option<SocketAddr>,
}

/// One hook command: a string run by `sh -c`, or an argv array run directly. Read from the
/// settings as written there (untagged: a TOML string or array), so the hook lists have one
/// type from the file to the runner.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum HookCommand {
    /// `"notify.sh --flag"`: run with `/bin/sh -c`.
    Shell(String),
    /// `["/usr/bin/logger", "-t", "conclave"]`: program and arguments, no shell.
    Argv(Vec<String>),
}

/// `[hooks]` (CB-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksConfig {
    /// Run when this node becomes leader.
    pub on_leader: Vec<HookCommand>,
    /// Run when this node follows a (new) leader.
    pub on_follower: Vec<HookCommand>,
    /// Run on every leader change, including to none.
    pub on_leader_change: Vec<HookCommand>,
    /// Run when a peer joins, leaves, connects or disconnects.
    pub on_peer_status: Vec<HookCommand>,
    /// `timeout_ms`: a hook still running after this is killed.
    pub timeout: Duration,
}

impl Default for HooksConfig {
    /// No hooks and `config/default.toml`'s timeout (a settings test keeps the two equal).
    fn default() -> Self {
        Self {
            on_leader: Vec::new(),
            on_follower: Vec::new(),
            on_leader_change: Vec::new(),
            on_peer_status: Vec::new(),
            timeout: Duration::from_millis(5000),
        }
    }
}

/// `[health]`: where this node's own health readings come from (PRI-1's battery, RAFT-10's
/// priority). See `crate::health` for what a file or a command's output holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// `source`, with its `file` or `command`.
    pub source: HealthSource,
    /// `battery_percent`: the fixed source's battery, and the battery assumed until a file
    /// or a command first gives one.
    pub battery_percent: u8,
    /// `interval_ms`: how often a file or a command is read.
    pub interval: Duration,
    /// `timeout_ms`: a command still running after this is killed, and the reading counted
    /// as an error.
    pub timeout: Duration,
}

/// `health.source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthSource {
    /// `"fixed"`: `battery_percent`, read once at start (a gateway on mains: 100).
    Fixed,
    /// `"file"`: the file `health.file`, read every interval.
    File(PathBuf),
    /// `"command"`: the command `health.command`, run every interval; its standard output is
    /// the reading.
    Command(HookCommand),
}

impl HealthConfig {
    /// Default of `health.interval_ms`.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(5000);
    /// Default of `health.timeout_ms`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2000);
}

impl Default for HealthConfig {
    /// A fixed 100 %: a gateway on mains; `config/default.toml`'s `[health]` (a settings
    /// test keeps the two equal).
    fn default() -> Self {
        Self {
            source: HealthSource::Fixed,
            battery_percent: 100,
            interval: Self::DEFAULT_INTERVAL,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

/// Raft's defaults ([`RaftConfig::new`]) for node `id`: the settings declare no number of their
/// own for `[election.raft]`, they read these.
pub(crate) fn raft_defaults(id: PeerId) -> RaftConfig {
    RaftConfig::new(id, [])
}
