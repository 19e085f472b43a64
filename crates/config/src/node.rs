//! The validated configuration a node runs with.
//!
//! [`NodeConfig`] is what [`crate::settings`] produces once every key of docs/design.md §9 has been
//! read and checked: identities are `PeerId`s, durations are `Duration`s, addresses are
//! parsed. The election's part is the core's own configuration
//! ([`conclave_core::election::ElectionConfig`], in its mode), built once by the settings and
//! checked by the core's own `validate()`; nothing here holds a second copy of it. The node
//! builder trusts the result and never re-validates; tests build it directly.
//!
//! This is the one module outside the core that names raft's own types ([`raft_config`], and
//! `raft_defaults`, which `[election.raft]`'s defaults are read from): raft's configuration is
//! built here from `[election.raft]` (issue 9's "Done when").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use conclave_core::MembershipConfig;
use conclave_core::election::ElectionConfig;
use conclave_core::raft::{LogConfig, QuorumMode, RaftConfig};
use conclave_protocol::{AuthKey, ClusterId, KeyRing, PeerId, SendKey};
use conclave_statemachine::StoreLimits;

use crate::tls::TlsFiles;

use crate::settings::RaftSection;

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
    /// `[election]` with the section of its mode: the election core's configuration for this
    /// node (its id is `node_id`), `election.auto` included; in priority mode, the battery
    /// assumed until the first reading is `health.battery_percent`.
    pub election: ElectionConfig,
    /// `cluster.voters` as listed (in raft's `voters` quorum, an empty list is this node
    /// alone): the ids membership reserves for them, and the peers a node expects.
    pub voters: Vec<PeerId>,
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
    /// `cluster.initial_state` (WAL-5): whether a first start in an unused data directory
    /// writes a genesis record.
    pub initial_state: InitialState,
    /// `log.max_store_bytes` and `log.max_jobs` (STORE-1, STORE-2): the bounds the leader
    /// holds the state machine to.
    pub store_limits: StoreLimits,
    /// The next frame key from `cluster.psk_next_file`, during a key rotation (PROTO-9).
    pub next_key: Option<AuthKey>,
    /// `cluster.psk_send`: which key frames are sealed under.
    pub send_key: SendKey,
}

impl NodeConfig {
    /// The keys frames are sealed and opened with: `cluster.psk_file`'s, the next one during a
    /// rotation, and which of them to send under; `None` without a key.
    pub fn key_ring(&self) -> Option<KeyRing> {
        self.auth_key
            .clone()
            .map(|current| KeyRing::new(current, self.next_key.clone(), self.send_key))
    }
}

/// `cluster.initial_state` (WAL-5): how a node that finds no WAL starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialState {
    /// A member of a cluster being created: in a data directory no node used before, the WAL
    /// begins with a genesis record and the node votes at once.
    New,
    /// A node without a WAL may have lost one: it abstains (WAL-2).
    #[default]
    Existing,
}

/// `election.raft.quorum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quorum {
    /// A majority of `cluster.voters`.
    Voters,
    /// Seed 000's rooms: this node plus the connected peers.
    Connected,
}

/// Raft's configuration for node `id` from `[election.raft]`, as the settings checked it:
/// `quorum` and `priority` parsed from their text, every `*_ms` key within range, and in the
/// `voters` quorum `voters` the electorate. Raft's own rules (the heartbeat below the minimum
/// election timeout, the maximum not below the minimum) are `RaftConfig::validate`'s, run on
/// the result.
pub fn raft_config(
    id: PeerId,
    quorum: Quorum,
    voters: &[PeerId],
    section: &RaftSection,
    priority: Option<u8>,
    auto_election: bool,
    log: Option<LogConfig>,
) -> ElectionConfig {
    ElectionConfig::Raft(RaftConfig {
        id,
        quorum: match quorum {
            Quorum::Voters => QuorumMode::Voters(voters.iter().copied().collect()),
            Quorum::Connected => QuorumMode::Connected,
        },
        heartbeat_interval: Duration::from_millis(section.heartbeat_ms),
        election_timeout_min: Duration::from_millis(section.election_timeout_min_ms),
        election_timeout_max: Duration::from_millis(section.election_timeout_max_ms),
        pre_vote: section.pre_vote,
        check_quorum: section.check_quorum,
        auto_election,
        ranked_timeouts: section.ranked_timeouts,
        adaptive_timeout: section.adaptive_timeout,
        suspicion_floor: section.suspicion_floor_ms.map(Duration::from_millis),
        priority,
        preempt_delay: Duration::from_millis(section.preempt_delay_ms),
        nopreempt: section.nopreempt,
        log,
    })
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
    /// The tokens of `token_file` (one admin token named `token_file`, first) and
    /// `tokens_file` (SEC-2); when there is any, mutations need one whose role covers them, and
    /// every endpoint but `/health` needs one when `listen` is not a loopback address.
    pub tokens: Vec<crate::AdminToken>,
    /// `peer_urls`: the admin API of other nodes (`http://host:port`), so that a follower can
    /// name the leader's, and `conclave cluster status` can ask every node.
    pub peer_urls: BTreeMap<PeerId, String>,
    /// `max_connections`: open admin connections served at once; past it, a request is
    /// refused with 503 and counted.
    pub max_connections: usize,
    /// `max_event_streams`: `GET /v1/events` subscribers at once; past it, refused with 503
    /// and counted.
    pub max_event_streams: usize,
    /// `[admin.tls]`: HTTPS only, with these files; `None` serves plain HTTP.
    pub tls: Option<TlsFiles>,
}

impl AdminConfig {
    /// Default of `admin.max_connections`.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
    /// Default of `admin.max_event_streams`.
    pub const DEFAULT_MAX_EVENT_STREAMS: usize = 16;
}

impl Default for AdminConfig {
    /// The API off, no token, no peers known, the default bounds (which the settings declare
    /// as `[admin]`'s defaults).
    fn default() -> Self {
        Self {
            listen: None,
            tokens: Vec::new(),
            peer_urls: BTreeMap::new(),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_event_streams: Self::DEFAULT_MAX_EVENT_STREAMS,
            tls: None,
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `listen`; `None` turns the metrics endpoint off.
    pub listen: Option<SocketAddr>,
    /// `[metrics.tls]`: HTTPS only, with these files; `None` serves plain HTTP.
    pub tls: Option<TlsFiles>,
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
    /// Run when the configuration of the log's cluster changes (MEMB-1).
    pub on_membership_change: Vec<HookCommand>,
    /// `timeout_ms`: a hook still running after this is killed.
    pub timeout: Duration,
}

impl Default for HooksConfig {
    /// No hooks, and the timeout the settings declare as `hooks.timeout_ms`'s default.
    fn default() -> Self {
        Self {
            on_leader: Vec::new(),
            on_follower: Vec::new(),
            on_leader_change: Vec::new(),
            on_peer_status: Vec::new(),
            on_membership_change: Vec::new(),
            timeout: Duration::from_millis(5000),
        }
    }
}

/// `[health]`: where this node's own health readings come from (PRI-1's battery, RAFT-10's
/// priority). See `conclave_actors::health` for what a file or a command's output holds.
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
    /// A fixed 100 %: a gateway on mains; the settings declare these as `[health]`'s
    /// defaults.
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
