//! The election's endpoints (CB-3, CB-5, CB-6): status, peers, history, the probes and the
//! operator's commands (`leader set`, `leader resign`, `auto-election`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::common::Fencing;

/// One peer of the peer table (`/v1/status`, `/v1/peers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeerAnswer {
    /// The peer's id.
    pub peer_id: String,
    /// `connected` or `disconnected`.
    pub status: String,
    /// The last ping round trip in milliseconds, to the microsecond; null while unknown: before
    /// the first pong, and while the peer is disconnected (an old figure would mislead).
    pub rtt_ms: Option<f64>,
    /// Milliseconds since any frame came from it.
    pub last_seen_ms_ago: u64,
    /// The link address its frames come from (`udp:10.0.0.2:7946`, `espnow:…`).
    pub address: String,
}

/// A configured peer address (`link.udp.peers`) from which no frame has come since this node
/// started (`/v1/status`, `/v1/peers`): a wrong port or host, a peer that is down, or one
/// with another cluster id or key, whose frames are dropped before they count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UnansweredAnswer {
    /// The address (`udp:10.0.0.3:7946`).
    pub address: String,
    /// Milliseconds since this node started sending to it.
    pub silent_ms: u64,
}

/// The ESP-NOW dongle (`/v1/status`, when the node has that link).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DongleAnswer {
    /// The serial device.
    pub port: String,
    /// A dongle is connected and set up.
    pub connected: bool,
    /// Its radio's MAC address, while connected.
    pub mac: Option<String>,
    /// Its firmware, while connected.
    pub firmware: Option<String>,
    /// Its Wi-Fi channel, while connected.
    pub channel: Option<u8>,
    /// Largest payload its radio carries, while connected.
    pub max_payload: Option<u16>,
    /// Sends that may still be written before a credit comes back.
    pub credits_free: u64,
    /// Frames waiting in the send queue.
    pub queue_len: u64,
    /// Frames written to the dongle.
    pub tx_frames: u64,
    /// Frames received from the dongle.
    pub rx_frames: u64,
    /// Sends the radio reported as not delivered.
    pub tx_failures: u64,
    /// Frames from the dongle dropped for a bad CRC.
    pub crc_errors: u64,
    /// Droppable frames dropped from a full queue.
    pub dropped_from_queue: u64,
    /// Frames refused: queue full of essentials, or payload too large.
    pub refused: u64,
    /// Times the dongle was connected again.
    pub reconnects: u64,
    /// The last problem, until the next successful connection.
    pub last_error: Option<String>,
    /// Signal strength of each peer heard, dBm, to a tenth.
    pub rssi_dbm: BTreeMap<String, f64>,
}

/// `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusAnswer {
    /// This node.
    pub node_id: String,
    /// Its cluster.
    pub cluster_id: String,
    /// `election.mode`: `raft`, `gossip`, `priority` or `static`.
    pub mode: String,
    /// `voters` or `connected`; `none` in a mode without a quorum (gossip, priority, static).
    pub quorum: String,
    /// Votes needed to win now (0 without a quorum).
    pub quorum_size: usize,
    /// Nodes that count towards the quorum now (0 without a quorum).
    pub electorate: usize,
    /// `follower`, `candidate` or `leader` (a raft pre-candidate is a candidate).
    pub role: String,
    /// The mode's name for where the node stands within its role (raft: `pre_candidate`
    /// during a pre-vote round; otherwise the role).
    #[serde(default)]
    pub phase: String,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
    /// Its vote in this term.
    pub voted_for: Option<String>,
    /// Whether this node starts elections by itself (per node).
    pub auto_election: bool,
    /// Whether a leader is pinned by `leader set`.
    pub manual_override: bool,
    /// The pinned leader.
    pub pinned_leader: Option<String>,
    /// Kept out of elections because another live node uses its id.
    pub quarantined: bool,
    /// Abstaining after it started without a term or vote: no vote, no
    /// campaign until the other voters show which terms are over.
    #[serde(default)]
    pub abstaining: bool,
    /// While abstaining: the voters it has not heard yet.
    #[serde(default)]
    pub abstaining_until_heard: Vec<String>,
    /// Grows at every start.
    pub incarnation: u64,
    /// Whether frames are authenticated.
    pub authenticated: bool,
    /// The peer table.
    pub peers: Vec<PeerAnswer>,
    /// Configured peer addresses nothing has come from since this node started.
    #[serde(default)]
    pub unanswered: Vec<UnansweredAnswer>,
    /// The ESP-NOW dongle, when the node has that link.
    pub dongle: Option<DongleAnswer>,
    /// `cluster.voters` (this node alone when empty).
    #[serde(default)]
    pub voters: Vec<String>,
    /// Voters this node reaches now, itself included when it is one.
    #[serde(default)]
    pub reachable_voters: usize,
    /// What `/ready` answers: a leader known and a quorum reachable.
    #[serde(default)]
    pub ready: bool,
    /// `admin.peer_urls`: the admin API of the other nodes, by id.
    #[serde(default)]
    pub peer_admin_urls: BTreeMap<String, String>,
    /// The replicated log's positions, with `log.enabled`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogStatus>,
    /// What only priority mode reports; absent in other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityAnswer>,
    /// What only gossip mode reports; absent in other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gossip: Option<GossipAnswer>,
    /// What only static mode reports; absent in other modes.
    #[serde(default, rename = "static", skip_serializing_if = "Option::is_none")]
    pub static_leader: Option<StaticAnswer>,
}

/// The replicated log's part of the status answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogStatus {
    /// The last entry's index.
    pub last_index: u64,
    /// The highest index known committed.
    pub commit_index: u64,
    /// The highest index applied to the state machine.
    pub applied_index: u64,
    /// The highest index durable on this node's disk.
    pub persisted_index: u64,
    /// The last index the snapshot covers (0 without one).
    pub snapshot_index: u64,
    /// On the leader: each follower's last matching index and how far behind it is.
    #[serde(default)]
    pub followers: Vec<FollowerAnswer>,
    /// The cluster's membership this node acts on; absent from nodes of versions without
    /// online membership changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<ConfigurationAnswer>,
}

/// The configuration of the log's cluster in force on one node: who votes, who only
/// receives the log, and which log entry says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConfigurationAnswer {
    /// Members that vote and count toward commit, ascending.
    pub voters: Vec<String>,
    /// Members that receive the log and neither vote nor count, ascending.
    pub learners: Vec<String>,
    /// The index of the log entry that carries it (a snapshot's index when it came with one);
    /// 0 for the configuration `cluster.voters` seeds.
    pub index: u64,
    /// Whether that entry is committed. A node acts on a configuration as soon as it has the
    /// entry, so an uncommitted one may still be replaced.
    pub committed: bool,
    /// On the leader: how many entries each learner is behind its last one; empty elsewhere.
    #[serde(default)]
    pub learner_lag: Vec<LearnerLagAnswer>,
}

/// How far one learner is behind the leader's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LearnerLagAnswer {
    /// The learner.
    pub peer_id: String,
    /// Entries it is behind the leader's last.
    pub lag: u64,
}

/// One follower as the leader sees its replication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FollowerAnswer {
    /// The follower.
    pub peer_id: String,
    /// The last index known to match the leader's log.
    pub match_index: u64,
    /// Entries it is behind the leader's last.
    pub lag: u64,
}

/// Priority mode's part of the status answer: the state and the score with its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PriorityAnswer {
    /// `idle`, `discovering`, `campaigning`, `waiting_for_votes`, `master`, `follower` or
    /// `forced_master`.
    pub state: String,
    /// The score now: battery << 24 | uptime minutes << 16 | signal << 8 | random.
    pub score: u32,
    /// Battery, 0–100, as the health source last read it.
    pub battery_percent: u8,
    /// Uptime in minutes, capped at 255 as in the score.
    pub uptime_minutes: u8,
    /// The signal component: the inverted mean RSSI of the peers.
    pub signal: u8,
    /// The highest round seen or used.
    pub round: u64,
    /// Whether this node heard the master itself (not only from a `DiscoverAck`).
    pub master_confirmed: bool,
    /// The candidate it accepted and waits for, while there is no master.
    pub awaiting: Option<String>,
    /// Forced master by configuration or `leader set`.
    pub forced: bool,
    /// Peers it knows.
    pub peers: usize,
}

/// Gossip mode's part of the status answer (Fabric's election).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GossipAnswer {
    /// `election.gossip.use_leader_election`: false is static org leadership.
    pub use_leader_election: bool,
    /// `election.gossip.org_leader`.
    pub org_leader: bool,
    /// Peers in the membership view.
    pub view_size: usize,
    /// It yielded and proposes nothing until another leader shows up or the period ends.
    pub yielding: bool,
    /// The highest epoch any message showed.
    pub highest_epoch_seen: u64,
    /// Messages ignored because their sender was outside the membership view.
    pub ignored_outside_view: u64,
}

/// Static mode's part of the status answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StaticAnswer {
    /// `election.static.leader`.
    pub configured_leader: String,
    /// The leader assigned now: the configured one or the one `leader set` named.
    pub assigned_leader: String,
    /// Whether the assigned leader is this node or a connected peer.
    pub leader_reachable: bool,
}

/// `GET /v1/peers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeersAnswer {
    /// The peer table.
    pub peers: Vec<PeerAnswer>,
    /// Configured peer addresses nothing has come from since this node started.
    #[serde(default)]
    pub unanswered: Vec<UnansweredAnswer>,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// One leader change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryEntry {
    /// The term of the change.
    pub term: u64,
    /// The new leader; null when the leader was lost.
    pub leader: Option<String>,
    /// Why: `vote_won`, `set_leader`, `transfer`, `quorum_lost`, …
    pub cause: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The same instant for people: RFC 3339 in UTC, to the millisecond.
    #[serde(default)]
    pub at: String,
}

/// `GET /v1/history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryAnswer {
    /// Oldest first.
    pub history: Vec<HistoryEntry>,
    /// The fencing token now.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// What a command did on the node that took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It took effect on this node.
    Applied,
    /// This node is not the leader; it sent the request on to the leader it knows.
    ForwardedToLeader,
    /// A leadership transfer started.
    TransferStarted,
    /// The leader stepped down without a successor.
    SteppedDown,
}

impl Outcome {
    /// The outcome as the answer spells it, with spaces for people.
    pub fn describe(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::ForwardedToLeader => "forwarded to leader",
            Outcome::TransferStarted => "transfer started",
            Outcome::SteppedDown => "stepped down",
        }
    }
}

/// The answer to `POST /v1/leader`, `/v1/leader/resign`, `/v1/auto-election`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandAnswer {
    /// What the command did.
    pub outcome: Outcome,
    /// The peer concerned: the leader forwarded to, or the transfer's target.
    pub peer_id: Option<String>,
    /// The node that answered.
    #[serde(default)]
    pub node_id: String,
    /// `leader set` with `wait_ms`: whether the requested leader now leads (only ever `true`
    /// in a 200 answer; a wait that ran out is a 504 [`ErrorAnswer`](crate::ErrorAnswer) `timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    /// The fencing token after the command.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// `GET /health`: liveness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HealthAnswer {
    /// `ok` while the process and its actors run; `stopped` once any actor has stopped.
    pub status: String,
    /// The node.
    pub node_id: String,
    /// Conditions an operator must act on, while they last; absent when there are none.
    /// `store_full` (STORE-3): the replicated store is at `log.max_store_bytes` or
    /// `log.max_jobs`, and writes that add to it may be refused with 507 until room is freed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<String>,
}

/// `GET /ready`: readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReadyAnswer {
    /// A leader is known and this node reaches a quorum of voters.
    pub ready: bool,
    /// Why not, when not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Voters reached now, this node included when it is one.
    pub reachable_voters: usize,
    /// Votes needed for a quorum.
    pub quorum_size: usize,
    /// The fencing token.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// `POST /v1/leader`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SetLeaderRequest {
    /// The node that is to lead.
    pub peer_id: String,
    /// Wait up to this many milliseconds for `peer_id` to lead before answering; 200 when it
    /// does, 504 when the wait runs out. Absent: answer as soon as the change started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// `POST /v1/auto-election`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AutoElectionRequest {
    /// Automatic elections on or off, on this node.
    pub enabled: bool,
}
