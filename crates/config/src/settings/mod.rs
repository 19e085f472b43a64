//! The configuration file and environment, read and checked (docs/design.md §9).
//!
//! [`Settings`] mirrors the keys of docs/design.md §9 one to one: those keys are part of the interface.
//! [`Settings::load`] layers, with the `config` crate,
//!
//! 1. the built-in defaults, [`defaults_toml`] (the text of `config/default.toml`, written
//!    from the section declarations),
//! 2. the file given with `--config`,
//! 3. environment variables `CONCLAVE__<SECTION>__<KEY>`.
//!
//! [`Settings::validate`] then turns the settings into the typed
//! [`NodeConfig`](crate::NodeConfig) the node runs with, or returns every problem at
//! once, each naming its key (`election.raft.heartbeat_ms: must be less than the minimum
//! election timeout (500ms >= 400ms)`), so that `conclave check-config` shows a config's
//! mistakes in one go rather than one per run. Warnings (valid but probably unintended
//! settings) are logged, or returned by [`Settings::validate_with_warnings`].
//!
//! # Environment variables
//!
//! A variable named `CONCLAVE__` followed by the key path with `__` between its parts sets
//! that key; the parts are lower-cased, so `CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS=200` sets
//! `election.raft.heartbeat_ms`. Values are read by the key's type: numbers and `true`/`false`
//! as such; lists (`cluster.voters`, `link.udp.peers`, the hook lists) as comma-separated items
//! with surrounding spaces trimmed and empty items dropped, so `CONCLAVE__CLUSTER__VOTERS=` is
//! an empty list; a list value that starts with `[` is read as a TOML array instead, which is
//! how a hook given as an argv array is written (`[["logger", "-t", "conclave"]]`). Variables
//! with other prefixes, including the single-underscore `CONCLAVE_NODE_ID` that hooks receive,
//! are ignored.
//!
//! # Problems found while reading
//!
//! Unknown keys (typos are the commonest mistake) and values of the wrong type (a quoted
//! number, a string where a list belongs) do not stop loading: each is recorded with its key,
//! the value is left out so the layer below applies, and [`Settings::validate`] reports them
//! first, together with every other problem. Loading fails only when the file cannot be read or
//! is not TOML at all.
//!
//! # The keys of the election modes
//!
//! `[election.raft]`, `[election.gossip]`, `[election.priority]` and `[election.static]` each
//! belong to the mode of that name: only the section of `election.mode` is used, and a key
//! of another mode's section that the operator set to something other than its default (in
//! the file or the environment; the built-in defaults set them all and do not count, nor does
//! a copy of them) is a problem naming the key, its mode and the configured one (issue 9,
//! item 8). The rules the election cores check themselves (each mode's `validate()`) are
//! reported under the key whose
//! setting they name. `[health]` (the battery and priority readings, `conclave_actors::health`) is
//! read in every mode.
//!
//! # Files named by the configuration
//!
//! Relative paths (`node.data_dir`, `cluster.psk_file`, `admin.token_file`,
//! `admin.tokens_file`) are resolved against the working directory. The pre-shared key file
//! holds exactly 64 hex digits (decoded to 32 bytes; surrounding whitespace and line ends
//! allowed) or exactly 32 raw bytes; anything else is refused with the file's name and length.
//! Without a key, a node may only use links nobody else can reach (UDP on loopback, the memory
//! link, a virtual dongle) unless `cluster.insecure = true` says otherwise. The token file
//! holds the bearer token; surrounding whitespace is trimmed. The tokens file holds named
//! tokens with roles (`crate::tokens`); one that other users may read is refused when it holds
//! a secret in clear.

mod schema;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use conclave_core::MembershipConfig;
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_core::raft::LogConfig;
use conclave_protocol::{DEFAULT_TAG_LEN, PeerId};
use conclave_statemachine::StoreLimits;
use config::{Config, ConfigError, File, FileFormat, Source};
use serde::{Deserialize, Serialize};

use crate::{AdminConfig, HealthConfig, HooksConfig, raft_defaults};

pub use self::schema::{ENV_PREFIX, ENV_SEPARATOR, toml_string};
pub use self::validate::{MAX_ADMIN_CONNECTIONS, MAX_APPEND_BYTES, MAX_MILLIS, admin_url};

/// The first lines of the defaults file, before the sections.
const DEFAULTS_HEADER: &str = "\
# conclave built-in defaults: every key with its default; a configuration file needs only the
# keys it changes.
#
# The binary carries this text (`conclave defaults` prints it; it is written from the key
# declarations in crates/config): it is the bottom layer of every configuration, so conclave
# starts without it on disk. On top of it come the file given with `--config`, then
# environment variables. An unknown key anywhere is reported as a problem, so a typo never
# passes silently.
#
# Environment: CONCLAVE__<SECTION>__<KEY>, with double underscores between the parts of the
# key path and any case (the key is lower-cased):
#     CONCLAVE__NODE__ID=gw-b
#     CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS=200
#     CONCLAVE__CLUSTER__VOTERS=gw-a,gw-b,gw-c       lists: comma-separated, \"\" = empty list
#     CONCLAVE__HOOKS__ON_LEADER='[[\"logger\", \"-t\", \"conclave\"]]'   or a TOML array
#
# Relative paths (data_dir, psk_file, token_file, tokens_file) are resolved against the working
# directory of the process, not against the directory of the configuration file.
#
# These defaults serve a single node on loopback: it elects itself and needs no link.
";

/// `node.id`'s default; the election cores' defaults are built for it too.
const DEFAULT_NODE_ID: &str = "node-1";

/// The built-in defaults as TOML: every key with its default and its doc lines, written from
/// the section declarations. It is the bottom layer of every configuration, so the binary runs
/// without a file; `config/default.toml` is this text (`conclave check-config
/// --print-defaults` prints it, and a test keeps the two equal).
pub fn defaults_toml() -> String {
    let mut file = schema::DefaultsFile::default();
    schema::Schema::render(&Settings::default(), None, &[], &mut file);
    file.finish(DEFAULTS_HEADER)
}

/// `duration` in whole milliseconds, as the `_ms` keys hold it.
fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The node id of the defaults, for the cores' default configurations.
fn default_id() -> PeerId {
    // A literal that the id rules accept (the defaults tests load it as `node.id`).
    PeerId::new(DEFAULT_NODE_ID).expect("the default node id is a valid peer id")
}

/// `[election.gossip]`'s defaults: the gossip core's.
fn gossip_defaults() -> GossipConfig {
    GossipConfig::new(default_id())
}

/// `[election.priority]`'s defaults: the priority core's.
fn priority_defaults() -> PriorityConfig {
    PriorityConfig::new(default_id())
}

/// Why settings could not be loaded at all. Everything short of that is a [`ConfigProblem`].
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The configuration file is missing or unreadable.
    #[error("cannot read config file {}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is not TOML.
    #[error("config file {} is not valid TOML: {message}", path.display())]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parser's explanation, with line and column.
        message: String,
    },
    /// The built-in defaults do not parse: a build defect, caught by the tests.
    #[error("built-in defaults are not valid TOML: {0}")]
    Defaults(String),
    /// The checked layers could not be merged or read into [`Settings`]; a defect of this
    /// module, since every value was type-checked before.
    #[error("cannot assemble settings: {0}")]
    Assemble(#[from] ConfigError),
}

/// One mistake in the configuration, with the key it concerns.
///
/// Displayed as `key: message`, e.g. `cluster.voters[2]: "gw-a" is listed twice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The dotted key, with `[i]` for list items: `link.udp.peers[1]`.
    pub key: String,
    /// What is wrong, lowercase, with the offending value.
    pub message: String,
}

impl ConfigProblem {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigProblem {}

/// Something valid but probably unintended, with the key it concerns; logged at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The dotted key.
    pub key: String,
    /// What may be wrong.
    pub message: String,
}

impl ConfigWarning {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

// The sections and their keys, each declared once: its type, its default and its doc lines,
// which are also its comment in `config/default.toml` (written from here by
// `defaults_toml`). Not indented, so that a key added here stays a one-line diff. The
// election sections' defaults are the election cores' own.
schema::sections! {
/// Every key of docs/design.md §9, as read from the layers and not yet checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// This node.
    pub node: NodeSection,
    /// The cluster this node belongs to.
    pub cluster: ClusterSection,
    /// How the leader is chosen.
    pub election: ElectionSection,
    /// Which peers are alive: heartbeats between the nodes.
    pub membership: MembershipSection,
    /// No link by default: a single node needs none.
    #[serde(default)]
    pub link: LinkSection,
    /// The admin HTTP API (conclave status, leader, auto-election; /health, /ready).
    pub admin: AdminSection,
    /// Prometheus metrics.
    pub metrics: MetricsSection,
    /// Commands run on events, one at a time per hook, in order. Each item is a string
    /// run with /bin/sh -c, or an array: the program and its arguments, run without a shell.
    ///   on_leader = ["systemctl start my-service", ["/usr/bin/logger", "-t", "conclave", "leader"]]
    /// SIGHUP applies changes to every key of this section at once.
    pub hooks: HooksSection,
    /// This node's own health: its battery (part of priority mode's score) and optionally its
    /// raft priority (election.raft.priority), as keepalived's track scripts adjust a priority.
    /// "fixed": battery_percent below, once at start (a gateway on mains says 100).
    /// "file": the file below, read every interval_ms.
    /// "command": the command below (a string run with /bin/sh -c, or an argv array), run every
    /// interval_ms; its standard output is the reading. Killed after timeout_ms.
    /// What a file or a command's output holds: either a bare integer 0-100, the battery
    /// ("87"), or lines `battery=NN` (0-100) and/or `priority=NN` (0-255), e.g.
    ///   battery=87
    ///   priority=150
    /// Blank lines and surrounding spaces are ignored. A reading without battery= counts as
    /// battery_percent; one without priority= leaves election.raft.priority in force. At most 4096
    /// bytes are read. Anything else, an unreadable file, or a command that fails or times out is
    /// a reading error: logged at WARN with the file or command and the text, counted in
    /// conclave_health_readings_total{result="error"}, and the last good reading is kept.
    /// conclave_battery_percent shows the last good battery. SIGHUP re-reads this section: the new
    /// source is read at once.
    pub health: HealthSection,
    /// What the node logs, and where (read by the binary, which owns the log).
    pub log: LogSection,
    @unread
    /// Unknown keys and mistyped values met while reading; reported by `validate`.
    read_problems: Vec<ConfigProblem>,
    /// The keys the operator set, in the file or the environment, to a value other than the
    /// built-in default: a key of another election mode is refused only when set.
    operator_keys: BTreeSet<String>,
}

/// `[node]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// This node's peer id: 1 to 32 bytes of A-Z a-z 0-9 . _ -
    pub id: String = DEFAULT_NODE_ID.to_owned(),
    /// The WAL and snapshots live here (relative to the working directory). One process at a time:
    /// a node locks the directory (conclave.lock), and a second one on it refuses to start.
    pub data_dir: PathBuf = PathBuf::from("./conclave-data"),
}

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The cluster id, same rules as a peer id; frames from another cluster are dropped.
    pub id: String = "default".to_owned(),
    /// The voters of `quorum = "voters"`. Empty means a single-node cluster made of `node.id`.
    /// A node whose id is not listed follows the leader but never campaigns or votes.
    pub voters: Vec<String>,
    /// File holding the cluster's pre-shared key, which seals (encrypts and authenticates) every
    /// frame; the same on every node: exactly 64 hex digits (surrounding whitespace and a
    /// trailing newline allowed), or exactly 32 raw bytes.
    /// Anything else is refused. Generate one with:  openssl rand -hex 32 > psk
    /// Empty = no key: frames are not authenticated. That is allowed only while every link is one
    /// nobody else can reach (UDP on loopback addresses, a virtual dongle); see `insecure`.
    pub psk_file: PathBuf,
    /// Run without psk_file although a link others can reach is configured (a non-loopback UDP
    /// listen or peer address, an ESP-NOW dongle): anyone there can then forge and replay frames.
    /// Without this, conclave refuses to start in that case, and check-config says why.
    pub insecure: bool,
    /// Length of the tag on every frame. With a key, frames are sealed (encrypted and
    /// authenticated) and carry a 16-byte tag: 16 is the only value accepted.
    pub tag_bytes: u64 = DEFAULT_TAG_LEN as u64,
    /// During a key rotation, a file holding the next pre-shared key, in the same form as
    /// psk_file and a different key. Frames sealed under either key are accepted; psk_send names
    /// the one this node sends under. Empty = no rotation under way. Applied on SIGHUP, as is
    /// psk_send and a change of psk_file while a key is set (docs/operations.md, "Rotating the
    /// cluster key").
    pub psk_next_file: PathBuf,
    /// The key this node seals its frames under: "current" (psk_file) or "next" (psk_next_file).
    pub psk_send: String = "current".to_owned(),
    /// "new": this node is a member of a cluster being created. At its first start in a data
    /// directory no node used before, it asks the voters whether the cluster exists: once
    /// every other voter answered, none past term 0, its WAL records a genesis and it takes
    /// part; if a voter is past term 0, the cluster exists and the node abstains as one that
    /// lost its WAL (so the key is safe to leave set). "existing": a node that starts without a
    /// WAL abstains until the other voters show which terms are over (docs/wal.md). Either way
    /// a node whose WAL exists ignores this key. `conclave init` records a genesis unasked.
    pub initial_state: String = "existing".to_owned(),
}

/// `[election]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElectionSection {
    /// "raft": Raft leader election ([election.raft]).
    /// "gossip": Hyperledger Fabric's gossip election, lowest id wins ([election.gossip]).
    /// "priority": the ESP-NOW pods' master election by battery, uptime and signal
    /// (`[election.priority]`, with the battery from `[health]`).
    /// "static": the leader is election.static.leader; nobody elects, the others track its liveness
    /// ([election.static]).
    /// The keys of one mode's section belong to that mode: setting a key of another mode's section
    /// to other than its default (in a file or with CONCLAVE__…) is refused, naming the key.
    /// Switching mode needs a restart,
    /// and a node refuses to start with a WAL written in another mode.
    pub mode: String = "raft".to_owned(),
    /// Start with automatic leader election on (EnableAutoLeaderElection). Once an operator has run
    /// `conclave auto-election on|off` on this node, the switch recorded in its WAL wins at start.
    pub auto: bool = true,
    /// Used when mode = "raft"; the defaults are Raft's own.
    pub raft: RaftSection,
    /// Used when mode = "static".
    pub static_leader as "static": StaticSection,
    /// Used when mode = "gossip", with Hyperledger Fabric's defaults (peer.gossip.election).
    pub gossip: GossipSection,
    /// Used when mode = "priority", with the ESP-NOW pods' defaults. A node's score is battery,
    /// uptime, signal and a random byte; the highest score becomes master.
    pub priority: PrioritySection,
}

/// `[election.raft]`: the defaults are `RaftConfig::new`'s, in conclave-core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaftSection {
    /// "voters": a majority of cluster.voters, at most one leader per term.
    /// "connected": this node plus the connected peers; every partition may elect a leader.
    pub quorum: String = raft_defaults(default_id()).quorum.label().to_owned(),
    /// Leader heartbeat period; must be less than election_timeout_min_ms.
    pub heartbeat_ms: u64 = ms(raft_defaults(default_id()).heartbeat_interval),
    /// A follower that hears no leader for a while in [min, max) starts an election.
    pub election_timeout_min_ms: u64 = ms(raft_defaults(default_id()).election_timeout_min),
    pub election_timeout_max_ms: u64 = ms(raft_defaults(default_id()).election_timeout_max),
    /// Ask for pre-votes before raising the term: a node rejoining after a partition cannot
    /// depose a healthy leader.
    pub pre_vote: bool = raft_defaults(default_id()).pre_vote,
    /// A leader that hears no quorum for election_timeout_min_ms steps down.
    pub check_quorum: bool = raft_defaults(default_id()).check_quorum,
    /// Stagger the followers' timeouts by rank (larger node id first, the lost leader left out)
    /// instead of spreading them at random: the first survivor campaigns right at the minimum
    /// and nobody splits the vote, so failover takes about election_timeout_min_ms. false gives
    /// the Raft paper's uniform random timeouts.
    pub ranked_timeouts: bool = raft_defaults(default_id()).ranked_timeouts,
    /// Failure detection that adapts to the link: a follower learns how regularly its leader's
    /// heartbeats arrive and suspects the leader once it is overdue for this link (the average
    /// gap, four times its average deviation and one heartbeat), which on a steady link is
    /// sooner than election_timeout_min_ms. It never suspects sooner than suspicion_floor_ms nor
    /// later than election_timeout_max_ms, and waits the fixed timeout until it has heard six
    /// gaps of its current leader. The ranked (or random) spread stays on top of that.
    pub adaptive_timeout: bool = raft_defaults(default_id()).adaptive_timeout,
    /// With adaptive_timeout: the earliest a follower suspects its leader after last hearing
    /// it. At least two heartbeats (so one lost heartbeat is never a dead leader), at most
    /// election_timeout_max_ms. Absent (the default): two and a half heartbeats (625 ms at
    /// the default heartbeat), capped at election_timeout_max_ms.
    pub suspicion_floor_ms: Option<u64> = raft_defaults(default_id()).suspicion_floor.map(ms), example Some(625),
    /// Priority inside a safe election (keepalived's preemption): this node's priority, 0-255,
    /// higher preferred. A lower-priority node waits longer before it campaigns, and a
    /// leader hands leadership over to a caught-up voter of higher priority after
    /// preempt_delay_ms. Absent (the default): this node takes no part in preemption. A
    /// `[health]` file or command that reports `priority=NN` replaces it while the node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u64> = raft_defaults(default_id()).priority.map(u64::from), example Some(100),
    pub preempt_delay_ms: u64 = ms(raft_defaults(default_id()).preempt_delay),
    /// keepalived's nopreempt: when this node leads, it never hands over only because another
    /// voter's priority is higher.
    pub nopreempt: bool = raft_defaults(default_id()).nopreempt,
}

/// `[election.static]` (STA-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticSection {
    /// The node that leads (one of cluster.voters when that list is set). Every
    /// node names the same one. `conclave leader set <id>` reassigns leadership on the node it is
    /// sent to only (and persists it there): send it to every node.
    pub leader: String,
}

/// `[election.gossip]` (GOS-1..5): Fabric's `peer.gossip.election` settings; the defaults are
/// `GossipConfig::new`'s, in conclave-core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipSection {
    /// A starting node waits until its membership view is the same in two samples this far apart,
    /// a leader declares itself, or startup_grace_period_ms passes.
    pub startup_grace_period_ms: u64 = ms(gossip_defaults().startup_grace_period),
    pub membership_sample_interval_ms: u64 = ms(gossip_defaults().membership_sample_interval),
    /// A follower that hears no declaration from its leader for this long forgets it and runs an
    /// election; a leader declares itself every half of it. At least 2.
    pub leader_alive_threshold_ms: u64 = ms(gossip_defaults().leader_alive_threshold),
    /// How long a proposer collects proposals and declarations before it declares itself. A dead
    /// leader is replaced after about leader_alive_threshold_ms + leader_election_duration_ms.
    pub leader_election_duration_ms: u64 = ms(gossip_defaults().leader_election_duration),
    /// false: nobody elects; the node with org_leader = true leads (Fabric's static leader).
    pub use_leader_election: bool = gossip_defaults().use_leader_election,
    /// With use_leader_election = false only: this node is the leader.
    pub org_leader: bool = gossip_defaults().org_leader,
}

/// `[election.priority]` (PRI-2..6): seed 002's constants; the defaults are
/// `PriorityConfig::new`'s, in conclave-core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritySection {
    /// Discovery: how long a node collects answers before it campaigns.
    pub discovery_timeout_ms: u64 = ms(priority_defaults().discovery_timeout),
    /// How long a candidate campaigns, then how long it waits for the last votes.
    pub campaign_timeout_ms: u64 = ms(priority_defaults().campaign_timeout),
    pub vote_timeout_ms: u64 = ms(priority_defaults().vote_timeout),
    /// Random delay, below this, before discovery and each campaign retry; 0 = none.
    pub jitter_max_ms: u64 = ms(priority_defaults().jitter_max),
    /// Campaigns repeated before a candidate settles for "the highest priority I know of wins".
    pub max_retries: u64 = u64::from(priority_defaults().max_retries),
    /// The master announces itself this often; followers declare it dead after master_timeout_ms
    /// of silence (must be more than announce_interval_ms) and elect again.
    pub announce_interval_ms: u64 = ms(priority_defaults().announce_interval),
    pub master_timeout_ms: u64 = ms(priority_defaults().master_timeout),
    /// A master whose battery (`[health]`) is at or below this resigns, naming a successor whose
    /// battery is above it. Below 100.
    pub low_battery_percent: u64 = u64::from(priority_defaults().low_battery_percent),
    /// This node is master regardless of score (`conclave leader set` does it at run time).
    pub force_master: bool = priority_defaults().force_master,
}

/// `[health]`: this node's battery and priority readings (`conclave_actors::health`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSection {
    pub source: String = "fixed".to_owned(),
    /// The fixed battery; with a file or a command, the battery until the first reading and
    /// whenever a reading gives none.
    pub battery_percent: u64 = u64::from(HealthConfig::default().battery_percent),
    pub file: PathBuf,
    pub command: HookEntry = HookEntry::Shell(String::new()),
    pub interval_ms: u64 = ms(HealthConfig::DEFAULT_INTERVAL),
    /// At most interval_ms.
    pub timeout_ms: u64 = ms(HealthConfig::DEFAULT_TIMEOUT),
}

/// `[membership]`: the defaults are `MembershipConfig::default`'s, in conclave-core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembershipSection {
    /// Ping period; a peer silent for heartbeat_ms × timeout_multiplier is Disconnected. A peer
    /// whose election frames arrive anyway is pinged only every tenth period (for its RTT).
    pub heartbeat_ms: u64 = ms(MembershipConfig::default().heartbeat_interval),
    /// At least 2.
    pub timeout_multiplier: u64 = u64::from(MembershipConfig::default().timeout_multiplier),
    /// Hello broadcast period while no peer is connected.
    pub hello_interval_ms: u64 = ms(MembershipConfig::default().hello_interval),
    /// Hello broadcast period while peers are connected, so nodes that missed each other meet.
    pub announce_interval_ms: u64 = ms(MembershipConfig::default().announce_interval),
}

/// `[link]`: each link is optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    /// Uncomment to reach other gateways over IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSection> = None, example Some(UdpSection {
        listen: "127.0.0.1:7946".to_owned(),
        peers: vec!["127.0.0.1:7947".to_owned()],
    }),
    /// Uncomment to reach gateways over ESP-NOW radio through a USB ESP32 dongle
    /// (docs/dongle-protocol.md).
    /// Frames are authenticated by cluster.psk_file whatever the radio does; ESP-NOW broadcast is
    /// never encrypted by the radio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub espnow: Option<EspNowSection> = None, example Some(EspNowSection {
        port: "/dev/ttyACM0".to_owned(),
        baud: 921_600,
        channel: 1,
        ..EspNowSection::default()
    }),
}

/// `[link.udp]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpSection {
    /// The ip:port this node receives on and sends from; required when the section is present.
    #[serde(default)]
    pub listen: String,
    /// Where to send before peers are known: ip:port or host:port each (names are resolved
    /// once, at start).
    #[serde(default)]
    pub peers: Vec<String>,
}

/// `[link.espnow]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EspNowSection {
    /// The dongle's serial device, or "virtual". With packaging/udev/99-conclave-dongle.rules
    /// installed, "/dev/conclave-dongle" (firmware/micropython/README.md).
    #[serde(default)]
    pub port: String,
    /// USB-UART boards; native USB ignores it.
    #[serde(default)]
    pub baud: u64,
    /// Wi-Fi channel 1-14, the same on every node.
    #[serde(default)]
    pub channel: u64,
    /// 32 hex characters: radio encryption's primary key, or empty.
    #[serde(default)]
    pub pmk: String,
    /// 32 hex characters: encrypt unicast frames to peers, or empty.
    #[serde(default)]
    pub lmk: String,
    /// `"<peer id>=<32 hex characters>"` each: a peer's own key instead of lmk.
    #[serde(default)]
    pub peer_lmks: Vec<String>,
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    /// Admin HTTP API address (ip:port); "" turns the API off.
    pub listen: String = "127.0.0.1:7070".to_owned(),
    /// File holding the bearer token for mutations (surrounding whitespace trimmed). Required when
    /// listen is not a loopback address; there every endpoint but /health needs it. "" = no token.
    pub token_file: PathBuf,
    /// File of named tokens with roles (TOML, one [[token]] table each: name, role = "read",
    /// "write" or "admin", secret_sha256 = the output of `printf %s SECRET | sha256sum`, or
    /// secret in clear; a write token may be limited with the lists key_prefixes and queues).
    /// Read tokens may read, write tokens may also change keys, jobs and sessions, admin tokens
    /// everything. With token_file too, that token is one more admin token, named "token_file".
    /// Either one is required when listen is not a loopback address. Both files are read again
    /// on SIGHUP. "" = none.
    pub tokens_file: PathBuf,
    /// The admin API of the other nodes, `"<peer id>=<http://host:port>"` each (the scheme may be
    /// left out). A follower names the leader's in its answers, so `conclave leader resign` can
    /// be sent to any node; `conclave cluster status` and `auto-election --cluster` ask them all.
    ///   peer_urls = ["gw-b=http://10.0.0.2:7070", "gw-c=http://10.0.0.3:7070"]
    #[serde(default)]
    pub peer_urls: Vec<String>,
    /// Connections served at once. Past it a request is answered 503 (naming this key) and
    /// counted in conclave_admin_refused_total{reason="connections"}. Lowered at start, with a
    /// warning, when the open-files limit leaves too few descriptors for it.
    pub max_connections: u64 = AdminConfig::DEFAULT_MAX_CONNECTIONS as u64,
    /// Event-stream (GET /v1/events) subscribers at once, fewer than max_connections so that
    /// status and commands always find room. Past it: 503 and
    /// conclave_admin_refused_total{reason="event_streams"}.
    pub max_event_streams: u64 = AdminConfig::DEFAULT_MAX_EVENT_STREAMS as u64,
    /// HTTPS for the admin API; the CLI then takes https:// URLs with --cacert.
    pub tls: TlsSection,
}

/// `[admin.tls]` and `[metrics.tls]`: with cert_file and key_file the listener speaks HTTPS
/// only (TLS 1.2 and 1.3, rustls); a plain-HTTP request to it is answered 400, naming https://.
/// SIGHUP reads the files again without dropping the node. All "" serves plain HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// Certificate chain (PEM), the listener's own certificate first. Checked at start, by
    /// check-config and on SIGHUP: readable, valid now (not expired), and key_file's.
    pub cert_file: PathBuf,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1; RSA, ECDSA or Ed25519).
    pub key_file: PathBuf,
    /// CA certificates (PEM): a client must present a certificate that chains to one of them
    /// (mutual TLS), or its connection ends in the handshake, before any request is read.
    /// "" asks clients for no certificate.
    pub client_ca_file: PathBuf,
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// Prometheus endpoint address (ip:port), served at /metrics; "" turns it off.
    pub listen: String = "127.0.0.1:9464".to_owned(),
    /// HTTPS for /metrics (Prometheus scrapes it with scheme: https and a tls_config).
    pub tls: TlsSection,
}

/// `[hooks]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSection {
    /// This node became the leader.
    pub on_leader: Vec<HookEntry>,
    /// This node stopped leading, for any reason (quorum lost, higher term, resign,
    /// transfer, quarantine, shutdown; CONCLAVE_CAUSE says which, CONCLAVE_STEPPED_DOWN=true),
    /// even with no new leader known yet; and another node became the leader
    /// (CONCLAVE_STEPPED_DOWN=false). Pair it with on_leader to stop what on_leader started; it
    /// may run twice in a row, so make it idempotent.
    pub on_follower: Vec<HookEntry>,
    /// Every change of the known leader, to none included.
    pub on_leader_change: Vec<HookEntry>,
    /// A peer joined, left, connected or disconnected.
    pub on_peer_status: Vec<HookEntry>,
    /// The replicated log's cluster configuration changed: a member was added, promoted or
    /// removed (CONCLAVE_VOTERS, CONCLAVE_LEARNERS; CONCLAVE_MEMBER=false on a node removed).
    pub on_membership_change: Vec<HookEntry>,
    /// A hook still running after this many milliseconds is killed. A node that stops gracefully
    /// waits up to twice this for the hooks of its last events (its on_follower above all).
    pub timeout_ms: u64 = ms(HooksConfig::default().timeout),
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// What to log, as in RUST_LOG: a level (error, warn, info, debug, trace) or per-module
    /// directives such as "info,conclave_actors=debug". --log or RUST_LOG given at start win at
    /// start; a changed level here applies on SIGHUP all the same (it is what was just edited).
    pub level: String = "info".to_owned(),
    /// Append the log to this file instead of standard error (journald collects standard
    /// error under systemd). SIGHUP reopens it, so logrotate can move it away first.
    pub file: PathBuf,
    /// The replicated log, not the diagnostic log above: the leader replicates an
    /// ordered log of writes (a key-value store and a job queue) to the voters, committed once a
    /// majority has it on disk. Raft mode with quorum = "voters" only. Every voter sets the same.
    pub enabled: bool = false,
    /// Bytes of log entries in one AppendEntries frame at most, 64-1237: 1237 is what one UDP
    /// datagram holds beside the envelope with the longest ids and tag, and an ESP-NOW link
    /// lowers it to what one 250-byte radio frame holds. A write's value (a job's payload) may be
    /// up to 64 KiB (65,536 bytes), its key up to 512 bytes (a job's queue up to 128) and its
    /// request id up to 128 bytes; a write larger than one frame travels in pieces, over UDP and
    /// ESP-NOW links alike.
    pub max_append_bytes: u64 = LogConfig::default().max_append_bytes as u64,
    /// Log entries in one AppendEntries frame at most, 1-4096.
    pub max_append_entries: u64 = LogConfig::default().max_append_entries as u64,
    /// AppendEntries frames sent to one follower and not yet answered, at most (the pipeline's
    /// window), 1-256. Only full frames fill it: a write to a follower with a frame unanswered
    /// waits for the answer unless it fills a frame with the writes not yet sent.
    pub max_inflight: u64 = LogConfig::default().max_inflight as u64,
    /// Take a snapshot of the state machine once this many entries were applied since the
    /// last one, and drop the log behind it from memory and disk; a follower too far behind
    /// then gets the snapshot instead of the entries. 0, or 10-1000000000; 0 never snapshots.
    pub snapshot_entries: u64 = LogConfig::default().snapshot_entries,
    /// Bytes the key-value store and the jobs not done may weigh together, 1048576 (1 MiB) to
    /// 1099511627776 (1 TiB): a key weighs its key and value plus 128, a job its queue and
    /// payload plus 128. The leader refuses a write that would pass it with 507 store_full,
    /// before appending it; reads, deletes, acks and purges keep working. Every replica holds
    /// the whole store in memory, so set the same on every voter, well within the smallest
    /// one's RAM (a node needs about six times what its store weighs).
    pub max_store_bytes: u64 = StoreLimits::DEFAULT_MAX_BYTES,
    /// Jobs not done (ready, claimed or dead) the queue may hold, 1-100000000; an enqueue past
    /// it is refused with 507 store_full.
    pub max_jobs: u64 = StoreLimits::DEFAULT_MAX_JOBS,
}
}

/// One item of a hook list (and `health.command`), as written: the very type the node runs,
/// [`HookCommand`](crate::HookCommand), read untagged (a string or an array);
/// validation refuses the empty ones.
pub use crate::HookCommand as HookEntry;

impl Settings {
    /// Defaults, then `file` if given, then the process environment (`CONCLAVE__…`).
    pub fn load(file: Option<&Path>) -> Result<Settings, SettingsError> {
        // Names or values that are not Unicode cannot be config keys or values of ours.
        let env = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        Self::load_with_env(file, env)
    }

    /// Defaults, then `file` if given, then `env` (name, value) pairs in place of the process
    /// environment; pairs without the `CONCLAVE__` prefix are ignored.
    pub fn load_with_env(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let file = match file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| SettingsError::ReadFile {
                        path: path.to_path_buf(),
                        source,
                    })?;
                let table = parse_toml(&text).map_err(|message| SettingsError::ParseFile {
                    path: path.to_path_buf(),
                    message,
                })?;
                Some(table)
            }
            None => None,
        };
        Self::layered(file, env)
    }

    /// Defaults, then the TOML text `toml` (as if it were the `--config` file); no environment.
    pub fn from_toml_str(toml: &str) -> Result<Settings, SettingsError> {
        let table = parse_toml(toml).map_err(|message| SettingsError::ParseFile {
            path: PathBuf::from("<string>"),
            message,
        })?;
        Self::layered(Some(table), std::iter::empty())
    }

    /// Unknown keys and mistyped values met while loading; [`Settings::validate`] reports
    /// them too.
    pub fn read_problems(&self) -> &[ConfigProblem] {
        &self.read_problems
    }

    fn layered(
        file: Option<config::Map<String, config::Value>>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let mut problems = Vec::new();
        let defaults = parse_toml(&defaults_toml()).map_err(SettingsError::Defaults)?;
        let defaults = schema::check_table(&defaults, None, &mut problems);
        let file = file.map(|table| schema::check_table(&table, None, &mut problems));
        // Later variables of the same name win, as they would in a real environment; sorting
        // makes the order of problems independent of the caller's iteration order.
        let env: BTreeMap<String, String> = env.into_iter().collect();
        let env = schema::check_env(&env, &mut problems);
        // The keys the operator set: in the file or the environment, to a value other than
        // the default (a copy of the defaults file, `conclave defaults`, sets none).
        let mut set = Vec::new();
        if let Some(file) = &file {
            schema::leaf_values(file, None, &mut set);
        }
        set.extend(env.iter().cloned());
        let operator_keys = set
            .into_iter()
            .filter(|(key, value)| {
                schema::lookup(&defaults, key)
                    .is_none_or(|default| !schema::same_value(&default.kind, &value.kind))
            })
            .map(|(key, _)| key)
            .collect();

        let mut builder = Config::builder().add_source(Layer(defaults));
        if let Some(file) = file {
            builder = builder.add_source(Layer(file));
        }
        for (key, value) in env {
            builder = builder.set_override(key, value)?;
        }
        let mut settings: Settings = builder.build()?.try_deserialize()?;
        settings.read_problems = problems;
        settings.operator_keys = operator_keys;
        Ok(settings)
    }
}

/// A TOML document as a `config` table, or the parser's message.
fn parse_toml(text: &str) -> Result<config::Map<String, config::Value>, String> {
    File::from_str(text, FileFormat::Toml)
        .collect()
        .map_err(|error| error.to_string())
}

/// One layer whose keys and value types have been checked against the schema.
#[derive(Debug, Clone)]
struct Layer(config::Map<String, config::Value>);

impl Source for Layer {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<config::Map<String, config::Value>, ConfigError> {
        Ok(self.0.clone())
    }
}
