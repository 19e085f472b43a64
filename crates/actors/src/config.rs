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
            // RAFT-10's keys are not read yet: preemption stays off.
            ..RaftConfig::new(self.node_id, [])
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
}

impl ElectionMode {
    /// The mode.
    pub fn mode(self) -> Mode {
        match self {
            ElectionMode::Raft => Mode::Raft,
            ElectionMode::Static { .. } => Mode::Static,
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
    /// The API off, no token, no peers known, the default bounds.
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

/// One hook command: a string run by `sh -c`, or an argv array run directly.
#[derive(Debug, Clone, PartialEq, Eq)]
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
