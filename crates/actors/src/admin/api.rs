//! The admin API's requests and answers as types, shared by the server (which serializes
//! them) and the `conclave` CLI (which deserializes them), so neither side spells a field
//! name the other might not (CONVENTIONS: "API answers are typed structs shared by server and
//! client").
//!
//! The JSON field names are a contract with every script written against the API: fields
//! are only ever added (each new one `#[serde(default)]`, so a newer CLI still reads an older
//! node), never renamed or removed. Peer and cluster ids travel as strings.
//!
//! CB-5: every answer of a node that can read its election state carries the fencing token
//! `(term, leader)`, flattened into the answer as `term`, `leader` and `fencing_token`
//! (`"<term>:<leader>"`, or null while no leader is known). Two kinds of answer do not: a
//! refusal of authentication (it tells a stranger nothing) and `/health` (liveness must not
//! wait on the election's mailbox).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The header a client sets on a mutation: the Unix time in milliseconds after which the node
/// must not carry it out, because the client has given up waiting by then (item 4 of
/// issue 8). See the [admin module docs](super) for the whole rule.
pub const DEADLINE_HEADER: &str = "conclave-deadline";

/// The `(term, leader)` fencing token, as every answer carries it (CB-5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fencing {
    /// The node's current term.
    pub term: u64,
    /// The leader it knows in that term; null while none is known.
    pub leader: Option<String>,
    /// `"<term>:<leader>"`, or null while no leader is known.
    pub fencing_token: Option<String>,
}

/// One peer of the peer table (`/v1/status`, `/v1/peers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
pub struct UnansweredAnswer {
    /// The address (`udp:10.0.0.3:7946`).
    pub address: String,
    /// Milliseconds since this node started sending to it.
    pub silent_ms: u64,
}

/// The ESP-NOW dongle (`/v1/status`, when the node has that link).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// `GET /v1/status` (docs/design.md §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Kept out of elections because another live node uses its id (MEM-3).
    pub quarantined: bool,
    /// Abstaining after it started without a term or vote (WAL-2, `docs/wal.md`): no vote, no
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
    /// The replicated log's positions (LOG-1..3), with `log.enabled`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogAnswer>,
    /// What only priority mode reports (PRI-1..6); absent in other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityAnswer>,
    /// What only gossip mode reports (GOS-1..6); absent in other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gossip: Option<GossipAnswer>,
    /// What only static mode reports (STA-1); absent in other modes.
    #[serde(default, rename = "static", skip_serializing_if = "Option::is_none")]
    pub static_leader: Option<StaticAnswer>,
}

/// The replicated log's part of the status answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogAnswer {
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
}

/// One follower as the leader sees its replication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowerAnswer {
    /// The follower.
    pub peer_id: String,
    /// The last index known to match the leader's log.
    pub match_index: u64,
    /// Entries it is behind the leader's last.
    pub lag: u64,
}

/// Priority mode's part of the status answer: the state and the score with its parts (PRI-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityAnswer {
    /// `idle`, `discovering`, `campaigning`, `waiting_for_votes`, `master`, `follower` or
    /// `forced_master` (PRI-2).
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
pub struct GossipAnswer {
    /// `election.gossip.use_leader_election`: false is static org leadership (GOS-5).
    pub use_leader_election: bool,
    /// `election.gossip.org_leader`.
    pub org_leader: bool,
    /// Peers in the membership view (GOS-4).
    pub view_size: usize,
    /// It yielded and proposes nothing until another leader shows up or the period ends.
    pub yielding: bool,
    /// The highest epoch any message showed.
    pub highest_epoch_seen: u64,
    /// Messages ignored because their sender was outside the membership view (GOS-4).
    pub ignored_outside_view: u64,
}

/// Static mode's part of the status answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// One leader change (CB-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct HistoryAnswer {
    /// Oldest first.
    pub history: Vec<HistoryEntry>,
    /// The fencing token now.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// What a command did on the node that took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct CommandAnswer {
    /// What the command did.
    pub outcome: Outcome,
    /// The peer concerned: the leader forwarded to, or the transfer's target.
    pub peer_id: Option<String>,
    /// The node that answered.
    #[serde(default)]
    pub node_id: String,
    /// `leader set` with `wait_ms`: whether the requested leader now leads (only ever `true`
    /// in a 200 answer; a wait that ran out is a 504 [`ErrorAnswer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    /// The fencing token after the command.
    #[serde(flatten)]
    pub fencing: Fencing,
}

/// Every error answer: `{"error": "..."}` and whatever the node could add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// What went wrong and what to do, for people.
    pub error: String,
    /// The node that answered, when it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// The configuration key of the bound that refused the request (a 503 past
    /// `admin.max_connections` or `admin.max_event_streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// The leader's admin API, when this node is not the leader and knows it
    /// (`admin.peer_urls`): where to send the request instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_admin_url: Option<String>,
    /// The fencing token, when the node could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<u64>,
    /// The leader, when the node could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// `"<term>:<leader>"`, when the node could read it and knows a leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<String>,
}

impl ErrorAnswer {
    /// An error with nothing but its message.
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            ..Self::default()
        }
    }

    /// The same with the fencing token added.
    pub fn with_fencing(mut self, fencing: Fencing) -> Self {
        self.term = Some(fencing.term);
        self.leader = fencing.leader;
        self.fencing_token = fencing.fencing_token;
        self
    }
}

/// `GET /health`: liveness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthAnswer {
    /// `ok` while the process and its actors run; `stopped` once any actor has stopped.
    pub status: String,
    /// The node.
    pub node_id: String,
}

/// `GET /ready`: readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[serde(deny_unknown_fields)]
pub struct AutoElectionRequest {
    /// Automatic elections on or off, on this node.
    pub enabled: bool,
}

/// A round trip in milliseconds to the microsecond, so JSON shows `0.42`, not
/// `0.41999999999999998`.
pub fn rtt_millis(rtt: std::time::Duration) -> f64 {
    // Microseconds of any RTT a peer table holds fit f64 exactly.
    rtt.as_micros() as f64 / 1000.0
}

/// `at_unix_ms` as RFC 3339 in UTC, to the millisecond: `2024-05-01T12:34:56.789Z`.
pub fn rfc3339_utc(at_unix_ms: u64) -> String {
    let seconds = at_unix_ms / 1000;
    let (year, month, day) = civil_date(seconds / 86_400);
    let in_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        (in_day / 60) % 60,
        in_day % 60,
        at_unix_ms % 1000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01. Works in 400-year eras of 146,097
/// days, with years starting on 1 March so the leap day falls at the end.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Days since 0000-03-01.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March: 0 = March … 11 = February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A duration for people, two units at most: `850 ms`, `12 s`, `3 min 4 s`, `2 h 5 min`,
/// `3 d 4 h`.
pub fn human_duration(millis: u64) -> String {
    let seconds = millis / 1000;
    let mut out = String::new();
    let _ = match seconds {
        0 => write!(out, "{millis} ms"),
        1..60 => write!(out, "{seconds} s"),
        60..3600 => write!(out, "{} min {} s", seconds / 60, seconds % 60),
        3600..86_400 => write!(out, "{} h {} min", seconds / 3600, (seconds / 60) % 60),
        _ => write!(out, "{} d {} h", seconds / 86_400, (seconds / 3600) % 24),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_gregorian() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        // A leap day, and the end of a leap year.
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_utc(978_307_199_999), "2000-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        // 2100 is not a leap year.
        assert_eq!(rfc3339_utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(850), "850 ms");
        assert_eq!(human_duration(12_400), "12 s");
        assert_eq!(human_duration(184_000), "3 min 4 s");
        assert_eq!(human_duration(7_500_000), "2 h 5 min");
        assert_eq!(human_duration(3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
    }

    #[test]
    fn round_trips_have_no_float_noise() {
        let rtt = std::time::Duration::from_nanos(420_123);
        assert_eq!(
            serde_json::to_string(&rtt_millis(rtt)).unwrap_or_default(),
            "0.42"
        );
    }

    /// The JSON field names are a contract: the fencing token is flattened into the answer.
    #[test]
    fn fencing_is_flattened_into_answers() {
        let answer = PeersAnswer {
            peers: Vec::new(),
            unanswered: Vec::new(),
            fencing: Fencing {
                term: 7,
                leader: Some("gw-b".to_owned()),
                fencing_token: Some("7:gw-b".to_owned()),
            },
        };
        let json = serde_json::to_value(&answer).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"peers": [], "unanswered": [], "term": 7, "leader": "gw-b", "fencing_token": "7:gw-b"})
        );
        let back: PeersAnswer = serde_json::from_value(json).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(back, answer);
    }
}
