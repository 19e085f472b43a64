//! The configuration file and environment, read and checked (DESIGN §9).
//!
//! [`Settings`] mirrors the keys of DESIGN §9 one to one: those keys are part of the interface.
//! [`Settings::load`] layers, with the `config` crate,
//!
//! 1. the built-in defaults, [`DEFAULTS_TOML`] (`config/default.toml`, compiled in),
//! 2. the file given with `--config`,
//! 3. environment variables `CONCLAVE__<SECTION>__<KEY>`.
//!
//! [`Settings::validate`] then turns the settings into the typed
//! [`NodeConfig`](crate::config::NodeConfig) the node runs with, or returns every problem at
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
//! of another mode's section that the operator set (in the file or the environment; the
//! built-in defaults set them all and do not count) is a problem naming the key, its mode and
//! the configured one (issue 9, item 8). The rules the election cores check themselves
//! (each mode's `validate()`) are reported under the key whose
//! setting they name. `[health]` (the battery and priority readings, [`crate::health`]) is
//! read in every mode.
//!
//! # Files named by the configuration
//!
//! Relative paths (`node.data_dir`, `cluster.psk_file`, `admin.token_file`) are resolved
//! against the working directory. The pre-shared key file holds exactly 64 hex digits (decoded
//! to 32 bytes; surrounding whitespace and line ends allowed) or exactly 32 raw bytes; anything
//! else is refused with the file's name and length. Without a key, a node may only use links
//! nobody else can reach (UDP on loopback, the memory link, a virtual dongle) unless
//! `cluster.insecure = true` says otherwise. The token file holds the bearer token; surrounding
//! whitespace is trimmed.

mod schema;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use config::{Config, ConfigError, File, FileFormat, Source};
use serde::{Deserialize, Serialize};

pub use self::schema::{ENV_PREFIX, ENV_SEPARATOR};
pub use self::validate::{MAX_ADMIN_CONNECTIONS, MAX_MILLIS, admin_url};

/// The built-in defaults: `config/default.toml`, compiled in so the binary runs without it.
pub const DEFAULTS_TOML: &str = include_str!("../../../../config/default.toml");

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
    #[error("built-in defaults (config/default.toml) are not valid TOML: {0}")]
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

// The sections and their keys; not indented, so that a key added here stays a one-line diff.
schema::sections! {
/// Every key of DESIGN §9, as read from the layers and not yet checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `[node]`.
    pub node: NodeSection,
    /// `[cluster]`.
    pub cluster: ClusterSection,
    /// `[election]` and `[election.raft]`.
    pub election: ElectionSection,
    /// `[membership]`.
    pub membership: MembershipSection,
    /// `[link.*]`.
    #[serde(default)]
    pub link: LinkSection,
    /// `[admin]`.
    pub admin: AdminSection,
    /// `[metrics]`.
    pub metrics: MetricsSection,
    /// `[hooks]`.
    pub hooks: HooksSection,
    /// `[health]`. (The order of the sections is the order `check-config` lists them in.)
    pub health: HealthSection,
    /// `[log]`: read by the binary, which owns the log (not part of [`NodeConfig`](crate::config::NodeConfig)).
    pub log: LogSection,
    @unread
    /// Unknown keys and mistyped values met while reading; reported by `validate`.
    read_problems: Vec<ConfigProblem>,
    /// The keys the operator set, in the file or the environment (not the built-in
    /// defaults): a key of another election mode is refused only when set.
    operator_keys: BTreeSet<String>,
}

/// `[node]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// `id`: this node's `PeerId`.
    pub id: String,
    /// `data_dir`: where the WAL and snapshots live.
    pub data_dir: PathBuf,
}

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// `id`: the `ClusterId`.
    pub id: String,
    /// `voters`: the peer ids of `quorum = "voters"`; empty means just `node.id`.
    pub voters: Vec<String>,
    /// `psk_file`: the pre-shared key; empty runs unauthenticated.
    pub psk_file: PathBuf,
    /// `insecure`: run without `psk_file` on a link others can reach (non-loopback UDP, an
    /// ESP-NOW dongle), on purpose.
    pub insecure: bool,
    /// `tag_bytes`: length of the truncated frame tag (not in DESIGN §9; default 16).
    pub tag_bytes: u64,
}

/// `[election]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElectionSection {
    /// `mode`: `raft | gossip | priority | static`.
    pub mode: String,
    /// `auto`: automatic election on at start.
    pub auto: bool,
    /// `[election.raft]`.
    pub raft: RaftSection,
    /// `[election.static]`.
    pub static_leader as "static": StaticSection,
    /// `[election.gossip]`.
    pub gossip: GossipSection,
    /// `[election.priority]`.
    pub priority: PrioritySection,
}

/// `[election.gossip]` (GOS-1..5): Fabric's `peer.gossip.election` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipSection {
    /// `startup_grace_period_ms`.
    pub startup_grace_period_ms: u64,
    /// `membership_sample_interval_ms`.
    pub membership_sample_interval_ms: u64,
    /// `leader_alive_threshold_ms`.
    pub leader_alive_threshold_ms: u64,
    /// `leader_election_duration_ms`.
    pub leader_election_duration_ms: u64,
    /// `use_leader_election`.
    pub use_leader_election: bool,
    /// `org_leader`.
    pub org_leader: bool,
}

/// `[election.priority]` (PRI-2..6): seed 002's constants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritySection {
    /// `discovery_timeout_ms`.
    pub discovery_timeout_ms: u64,
    /// `campaign_timeout_ms`.
    pub campaign_timeout_ms: u64,
    /// `vote_timeout_ms`.
    pub vote_timeout_ms: u64,
    /// `jitter_max_ms`.
    pub jitter_max_ms: u64,
    /// `max_retries`.
    pub max_retries: u64,
    /// `announce_interval_ms`.
    pub announce_interval_ms: u64,
    /// `master_timeout_ms`.
    pub master_timeout_ms: u64,
    /// `low_battery_percent`.
    pub low_battery_percent: u64,
    /// `force_master`.
    pub force_master: bool,
}

/// `[health]`: this node's battery and priority readings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSection {
    /// `source`: `fixed | file | command`.
    pub source: String,
    /// `battery_percent`: the fixed battery, and the one assumed before the first reading.
    pub battery_percent: u64,
    /// `file`: read with `source = "file"`.
    pub file: PathBuf,
    /// `command`: run with `source = "command"`.
    pub command: HookEntry,
    /// `interval_ms`.
    pub interval_ms: u64,
    /// `timeout_ms`.
    pub timeout_ms: u64,
}

/// `[election.static]` (STA-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticSection {
    /// `leader`: the node that leads in static mode.
    pub leader: String,
}

/// `[election.raft]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaftSection {
    /// `quorum`: `voters | connected`.
    pub quorum: String,
    /// `heartbeat_ms`.
    pub heartbeat_ms: u64,
    /// `election_timeout_min_ms`.
    pub election_timeout_min_ms: u64,
    /// `election_timeout_max_ms`.
    pub election_timeout_max_ms: u64,
    /// `pre_vote`.
    pub pre_vote: bool,
    /// `check_quorum`.
    pub check_quorum: bool,
    /// `ranked_timeouts`.
    pub ranked_timeouts: bool,
    /// `priority` (RAFT-10): 0–255; absent takes no part in preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u64>,
    /// `preempt_delay_ms` (RAFT-10).
    pub preempt_delay_ms: u64,
    /// `nopreempt` (RAFT-10).
    pub nopreempt: bool,
}

/// `[membership]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembershipSection {
    /// `heartbeat_ms`: ping period.
    pub heartbeat_ms: u64,
    /// `timeout_multiplier`: heartbeats of silence before a peer is Disconnected.
    pub timeout_multiplier: u64,
    /// `hello_interval_ms`: `Hello` period while alone (not in DESIGN §9).
    pub hello_interval_ms: u64,
    /// `announce_interval_ms`: `Hello` period while peers are connected (not in DESIGN §9).
    pub announce_interval_ms: u64,
}

/// `[link]`: each link is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    /// `[link.udp]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSection>,
    /// `[link.espnow]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub espnow: Option<EspNowSection>,
}

/// `[link.udp]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpSection {
    /// `listen`: `ip:port`; required when the section is present.
    #[serde(default)]
    pub listen: String,
    /// `peers`: `ip:port` each.
    #[serde(default)]
    pub peers: Vec<String>,
}

/// `[link.espnow]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EspNowSection {
    /// `port`: serial device or `"virtual"`.
    #[serde(default)]
    pub port: String,
    /// `baud`.
    #[serde(default)]
    pub baud: u64,
    /// `channel`.
    #[serde(default)]
    pub channel: u64,
    /// `pmk`: 32 hex characters, or empty.
    #[serde(default)]
    pub pmk: String,
    /// `lmk`: 32 hex characters, or empty.
    #[serde(default)]
    pub lmk: String,
    /// `peer_lmks`: `"<peer id>=<32 hex characters>"` each, a key of its own for a peer.
    #[serde(default)]
    pub peer_lmks: Vec<String>,
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    /// `listen`: `ip:port`, or empty to turn the API off.
    pub listen: String,
    /// `token_file`: bearer token; empty = none.
    pub token_file: PathBuf,
    /// `peer_urls`: `"<peer id>=<admin URL>"` each, the admin API of other nodes.
    #[serde(default)]
    pub peer_urls: Vec<String>,
    /// `max_connections`: admin connections served at once.
    pub max_connections: u64,
    /// `max_event_streams`: `GET /v1/events` subscribers at once.
    pub max_event_streams: u64,
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `listen`: `ip:port`, or empty to turn the endpoint off.
    pub listen: String,
}

/// `[hooks]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSection {
    /// `on_leader`.
    pub on_leader: Vec<HookEntry>,
    /// `on_follower`.
    pub on_follower: Vec<HookEntry>,
    /// `on_leader_change`.
    pub on_leader_change: Vec<HookEntry>,
    /// `on_peer_status`.
    pub on_peer_status: Vec<HookEntry>,
    /// `timeout_ms`.
    pub timeout_ms: u64,
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// `level`: a log filter, as in `RUST_LOG` (`info`, `conclave_actors=debug,info`).
    pub level: String,
    /// `file`: append the log to this file (reopened on SIGHUP); empty = standard output.
    pub file: PathBuf,
}
}

/// One item of a hook list (and `health.command`), as written: the very type the node runs,
/// [`HookCommand`](crate::config::HookCommand), read untagged (a string or an array);
/// validation refuses the empty ones.
pub use crate::config::HookCommand as HookEntry;

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
        let defaults = parse_toml(DEFAULTS_TOML).map_err(SettingsError::Defaults)?;
        let defaults = schema::check_table(&defaults, None, &mut problems);
        let file = file.map(|table| schema::check_table(&table, None, &mut problems));
        // Later variables of the same name win, as they would in a real environment; sorting
        // makes the order of problems independent of the caller's iteration order.
        let env: BTreeMap<String, String> = env.into_iter().collect();
        let env = schema::check_env(&env, &mut problems);
        let mut operator_keys = BTreeSet::new();
        if let Some(file) = &file {
            schema::leaf_keys(file, None, &mut operator_keys);
        }
        operator_keys.extend(env.iter().map(|(key, _)| key.clone()));

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
