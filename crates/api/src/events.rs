//! The data of `GET /v1/events`, the node's server-sent event stream (CB-1, CB-5, MEM-5,
//! MEMB-1):
//! each event's `event:` line names its kind and its `data:` line is the [`StreamEvent`]
//! object, tagged by the same name.

use serde::{Deserialize, Serialize};

/// One event of `/v1/events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The known leader changed (to none included).
    LeaderChanged(LeaderChangedEvent),
    /// A peer joined, left or changed status.
    PeerStatusChanged(PeerStatusChangedEvent),
    /// The configuration of the log's cluster this node acts on changed.
    MembershipChanged(MembershipChangedEvent),
    /// Events were lost: the reader fell behind, or asked to resume from an event the node
    /// no longer has. Read `/v1/status` again if completeness matters.
    Lagged(LaggedEvent),
}

impl StreamEvent {
    /// The event's name, as the `event:` line carries it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::LeaderChanged(_) => "leader_changed",
            Self::PeerStatusChanged(_) => "peer_status_changed",
            Self::MembershipChanged(_) => "membership_changed",
            Self::Lagged(_) => "lagged",
        }
    }
}

/// The known leader changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LeaderChangedEvent {
    /// The node's term.
    pub term: u64,
    /// The new leader; null when none is known.
    pub leader: Option<String>,
    /// The last leader the node knew before; null when it never knew one.
    pub previous_leader: Option<String>,
    /// This node led until this change.
    pub stepped_down: bool,
    /// This node's role now: `follower`, `candidate` or `leader`.
    pub role: String,
    /// Why: `vote_won`, `set_leader`, `transfer`, `quorum_lost`, …
    pub cause: String,
    /// `"<term>:<leader>"`, or null without a leader.
    pub fencing_token: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// A peer joined, left or changed status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeerStatusChangedEvent {
    /// The peer.
    pub peer_id: String,
    /// Its status before: `connected`, `disconnected`, or null when it just joined.
    pub old: Option<String>,
    /// Its status now, or null when it left.
    pub new: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// The configuration of the log's cluster this node acts on changed: a configuration entry
/// reached its log (it acts on it at once, before it commits: `/v1/status` says when it has),
/// or a truncation took one away and the one before it is back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MembershipChangedEvent {
    /// The index of the entry that carries the configuration; 0 for the one `cluster.voters`
    /// seeds.
    pub index: u64,
    /// Its voters, ascending.
    pub voters: Vec<String>,
    /// Its learners, ascending.
    pub learners: Vec<String>,
    /// Whether this node is in it, as a voter or a learner.
    pub member: bool,
    /// What this node is in it: `voter`, `learner` or `none`.
    pub membership: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// Events were lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LaggedEvent {
    /// How many; null when the node cannot tell (it restarted since the event the reader
    /// resumes from).
    pub missed: Option<u64>,
}
