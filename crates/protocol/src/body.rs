//! Every message body that travels inside an [`Envelope`](crate::Envelope) (PROTO-3).
//!
//! Bodies are grouped by the subsystem that owns them: membership, admission, raft, gossip,
//! priority and client. On the wire a body is a two-element MessagePack array `[kind, fields]`, where `kind`
//! is the one-byte [`BodyKind`] number and `fields` is the body's struct in compact array form.
//! Numbering kinds by hand (instead of serde's variant names) keeps heartbeats small and makes
//! the format independent of Rust identifiers; `docs/wire-protocol.md` lists the numbers.

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::configuration::Configuration;
use crate::ids::PeerId;

/// The `error_reason` a node puts in a refused [`HelloAck`] when the id is already live (MEM-3).
pub const DUPLICATE_PEER_ID: &str = "duplicate_peer_id";

// ---------------------------------------------------------------------------------------------
// membership (MEM-2..4)

/// Announces a node to the cluster; broadcast at start and until the node has peers (MEM-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {}

/// The answer to a [`Hello`]: accepted, or refused with a reason such as [`DUPLICATE_PEER_ID`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAck {
    /// Whether the sender of the `Hello` was added to the peer table.
    pub success: bool,
    /// Why it was refused; `None` on success.
    pub error_reason: Option<String>,
}

/// A liveness probe; the receiver echoes `timestamp_ms` back in a [`Pong`] (MEM-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// The sender's own clock, in milliseconds; only the sender interprets it.
    pub timestamp_ms: u64,
}

/// The answer to a [`Ping`], carrying its timestamp back so the pinger can measure RTT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The `timestamp_ms` of the ping being answered.
    pub timestamp_ms: u64,
}

/// A node leaves the cluster on purpose (graceful shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goodbye {}

// ---------------------------------------------------------------------------------------------
// admission (PROTO-5)

/// Asks the addressee to prove that its frames were made after the challenger started: a
/// node that has not yet heard a sender since it started sends this to the address the
/// sender's frame came from, and admits nothing from that sender until the matching
/// [`ChallengeAck`] arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// A random number the challenger has not used since it started.
    pub nonce: u64,
}

/// The answer to a [`Challenge`], sent to the address the challenge came from. Only the
/// challenger can have asked for this nonce, so the answer is newer than the challenger's
/// start, and so is every frame of the answering sender that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChallengeAck {
    /// The nonce of the challenge being answered.
    pub nonce: u64,
}

// ---------------------------------------------------------------------------------------------
// raft (RAFT-*, LOG-*)

/// A candidate asks for a vote, or a pre-candidate for a pre-vote (RAFT-3, RAFT-5, RAFT-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestVote {
    /// The candidate's term; for a pre-vote, the term it would campaign in.
    pub term: u64,
    /// Who asks.
    pub candidate: PeerId,
    /// Index of the candidate's last log entry.
    pub last_log_index: u64,
    /// Term of the candidate's last log entry.
    pub last_log_term: u64,
    /// A pre-vote (no term change on either side) rather than a real vote.
    pub pre_vote: bool,
    /// The campaign was started by `TimeoutNow` (leadership transfer), so voters must not
    /// refuse it because they still hear a leader.
    pub leadership_transfer: bool,
    /// RAFT-10: the sender's election priority (higher is preferred), when it has one. The
    /// last field, and left out entirely when `None`: a node without a priority sends the same
    /// bytes as before the field existed, and a frame without it decodes as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
}

/// The answer to a [`RequestVote`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// The request's term when granted; the voter's own (higher) term when refused for it.
    pub term: u64,
    /// Whether the vote is granted.
    pub granted: bool,
    /// Answers a pre-vote.
    pub pre_vote: bool,
    /// RAFT-10: the sender's election priority (higher is preferred), when it has one. The
    /// last field, and left out entirely when `None`: a node without a priority sends the same
    /// bytes as before the field existed, and a frame without it decodes as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
}

/// What a log entry carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum EntryKind {
    /// The empty entry a new leader appends to commit its term.
    Noop,
    /// An application command for the replicated state machine.
    Command,
    /// MEMB-1: a new configuration of the cluster ([`Configuration`](crate::Configuration)
    /// encoded); raft acts on it as soon as it is appended, the state machine ignores it.
    Config,
}

impl From<EntryKind> for u8 {
    fn from(kind: EntryKind) -> u8 {
        match kind {
            EntryKind::Noop => 0,
            EntryKind::Command => 1,
            EntryKind::Config => 2,
        }
    }
}

impl TryFrom<u8> for EntryKind {
    type Error = String;
    fn try_from(value: u8) -> Result<Self, String> {
        match value {
            0 => Ok(Self::Noop),
            1 => Ok(Self::Command),
            2 => Ok(Self::Config),
            other => Err(format!("unknown log entry kind {other}")),
        }
    }
}

/// One entry of the replicated log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Position in the log, from 1.
    pub index: u64,
    /// Term of the leader that created it.
    pub term: u64,
    /// What it carries.
    pub kind: EntryKind,
    /// The command, opaque to raft; encoded as MessagePack `bin`.
    #[serde(with = "wire_bytes")]
    pub data: Vec<u8>,
}

/// One piece of a log entry too large for one frame (MEMB-6): the entry at `index`, of
/// `term` and `kind`, whose data is `total_len` bytes long, of which this carries the bytes
/// from `offset` on. A follower gathers the pieces of one entry in order and appends the entry
/// only once it holds all of its data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryChunk {
    /// The entry's position in the log: always just after the AppendEntries' `prev_index`.
    pub index: u64,
    /// The term of the leader that created the entry.
    pub term: u64,
    /// What the entry carries.
    pub kind: EntryKind,
    /// The byte offset of `data` in the entry's data.
    pub offset: u32,
    /// The length of the entry's whole data.
    pub total_len: u32,
    /// This piece of the entry's data; encoded as MessagePack `bin`.
    #[serde(with = "wire_bytes")]
    pub data: Vec<u8>,
}

/// A follower's progress on an entry sent in chunks (MEMB-6): it holds the first
/// `next_offset` bytes of the data of the entry at `index` and wants the bytes from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkAck {
    /// The entry being received.
    pub index: u64,
    /// The offset of the next bytes wanted.
    pub next_offset: u32,
}

/// Log replication and the leader's heartbeat (an empty `entries`) (RAFT-4, LOG-2).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AppendEntries {
    /// The leader's term.
    pub term: u64,
    /// The leader.
    pub leader: PeerId,
    /// Index of the entry just before `entries`.
    pub prev_index: u64,
    /// Term of that entry.
    pub prev_term: u64,
    /// Entries to append; empty for a heartbeat.
    #[serde(deserialize_with = "bounded_seq::deserialize")]
    pub entries: Vec<LogEntry>,
    /// The leader's commit index.
    pub commit: u64,
    /// The leader is pinned by a manual override (RAFT-8). Carried on every heartbeat so that
    /// every follower reports the same override, even one that missed the assignment.
    pub pinned: bool,
    /// LOG-7: the leader's latest read round while linearizable reads wait for it, echoed in
    /// the [`AppendResp`]: a majority echoing a round confirms the leader still led after the
    /// reads were taken. Left out when it and `chunk` are `None`, as `priority` is.
    #[serde(default)]
    pub read_round: Option<u64>,
    /// MEMB-6: a piece of the entry just after `prev_index`, when that entry alone does not
    /// fit a frame; `entries` is then empty. The last field, left out when `None`. Boxed, so
    /// that every other body stays as small as it was.
    #[serde(default)]
    pub chunk: Option<Box<EntryChunk>>,
}

impl Serialize for AppendEntries {
    /// Optional trailing fields are left out from the last `None` backwards; one before a
    /// present field is written as nil, so every field stays at its place in the array.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let trailing = if self.chunk.is_some() {
            2
        } else {
            usize::from(self.read_round.is_some())
        };
        let mut fields = serializer.serialize_struct("AppendEntries", 7 + trailing)?;
        fields.serialize_field("term", &self.term)?;
        fields.serialize_field("leader", &self.leader)?;
        fields.serialize_field("prev_index", &self.prev_index)?;
        fields.serialize_field("prev_term", &self.prev_term)?;
        fields.serialize_field("entries", &self.entries)?;
        fields.serialize_field("commit", &self.commit)?;
        fields.serialize_field("pinned", &self.pinned)?;
        if trailing >= 1 {
            fields.serialize_field("read_round", &self.read_round)?;
        } else {
            fields.skip_field("read_round")?;
        }
        if trailing == 2 {
            fields.serialize_field("chunk", &self.chunk)?;
        } else {
            fields.skip_field("chunk")?;
        }
        fields.end()
    }
}

impl AppendEntries {
    /// A heartbeat of `leader` in `term` at the start of the log: nothing to append, nothing
    /// committed, no pin, no read round. Set the rest with struct update syntax, so that a
    /// field added later does not change every place that builds one.
    pub fn new(term: u64, leader: PeerId) -> Self {
        Self {
            term,
            leader,
            prev_index: 0,
            prev_term: 0,
            entries: Vec::new(),
            commit: 0,
            pinned: false,
            read_round: None,
            chunk: None,
        }
    }
}

/// Where a follower's log diverges, so the leader can skip back a whole term at once (LOG-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictHint {
    /// First index the leader should try next.
    pub index: u64,
    /// Term of the follower's entry at the conflict, 0 when the follower's log is too short.
    pub term: u64,
}

/// A follower's answer to [`AppendEntries`]. `AppendResp::default()` is a refusal in term 0
/// with nothing else set, the base of struct update syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct AppendResp {
    /// The follower's term.
    pub term: u64,
    /// Whether the entries (or heartbeat) were accepted.
    pub success: bool,
    /// Accepted: the highest index known to match the leader's log. Refused: the index the
    /// refused AppendEntries followed (its `prev_index`), so that the leader can tell which of
    /// its messages was refused; `0` from nodes that did not say.
    pub match_index: u64,
    /// On a refusal, where to retry from.
    pub hint: Option<ConflictHint>,
    /// RAFT-10: the sender's election priority (higher is preferred), when it has one. Left
    /// out when it and every field after it are `None`: a node without a priority sends the
    /// same bytes as before the field existed, and a frame without it decodes as `None`.
    #[serde(default)]
    pub priority: Option<u8>,
    /// LOG-7: the read round of the AppendEntries answered, echoed; only a follower that took
    /// its sender as the leader of this term echoes one. Left out when it and every field
    /// after it are `None`.
    #[serde(default)]
    pub read_round: Option<u64>,
    /// MEMB-6: how much of an entry sent in chunks the follower holds, answering a chunk it
    /// has not yet the whole entry from. The last field, left out when `None`.
    #[serde(default)]
    pub chunk: Option<ChunkAck>,
}

impl Serialize for AppendResp {
    /// Optional trailing fields are left out from the last `None` backwards; one before a
    /// present field is written as nil, so every field stays at its place in the array.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let trailing = if self.chunk.is_some() {
            3
        } else if self.read_round.is_some() {
            2
        } else {
            usize::from(self.priority.is_some())
        };
        let mut fields = serializer.serialize_struct("AppendResp", 4 + trailing)?;
        fields.serialize_field("term", &self.term)?;
        fields.serialize_field("success", &self.success)?;
        fields.serialize_field("match_index", &self.match_index)?;
        fields.serialize_field("hint", &self.hint)?;
        if trailing >= 1 {
            fields.serialize_field("priority", &self.priority)?;
        } else {
            fields.skip_field("priority")?;
        }
        if trailing >= 2 {
            fields.serialize_field("read_round", &self.read_round)?;
        } else {
            fields.skip_field("read_round")?;
        }
        if trailing == 3 {
            fields.serialize_field("chunk", &self.chunk)?;
        } else {
            fields.skip_field("chunk")?;
        }
        fields.end()
    }
}

/// One chunk of a snapshot sent to a follower behind the compaction point (LOG-4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallSnapshot {
    /// The leader's term.
    pub term: u64,
    /// The leader.
    pub leader: PeerId,
    /// Last log index the snapshot covers.
    pub last_index: u64,
    /// Term of that entry.
    pub last_term: u64,
    /// Byte offset of this chunk in the snapshot.
    pub offset: u64,
    /// The chunk, cut to the link MTU; encoded as MessagePack `bin`.
    #[serde(with = "wire_bytes")]
    pub data: Vec<u8>,
    /// This is the last chunk.
    pub done: bool,
    /// MEMB-1: on the last chunk, the cluster's configuration in force at `last_index`, when
    /// the leader's log ever held one. The last field, and left out entirely when `None`: a
    /// snapshot of a cluster that never changed its configuration is sent in the same bytes as
    /// before the field existed, and a frame without it decodes as `None`.
    /// Boxed: it is rare, and every other body stays as small as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Box<Configuration>>,
}

/// A follower's answer to [`InstallSnapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotResp {
    /// The follower's term.
    pub term: u64,
    /// Last log index of the snapshot being installed.
    pub last_index: u64,
    /// The offset the follower expects next.
    pub next_offset: u64,
    /// Whether the chunk was accepted.
    pub success: bool,
}

/// A manual leader assignment (RAFT-8). In `connected` quorum mode every receiver adopts `term`
/// and `leader`; in `voters` mode it asks the current leader to transfer leadership to
/// `leader` and pin it (followers then see the pin in the heartbeats' `pinned`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderAssign {
    /// The term of the assignment.
    pub term: u64,
    /// The node that is to lead.
    pub leader: PeerId,
    /// The node where the operator issued the command.
    pub assigner: PeerId,
}

/// Tells a caught-up follower to campaign at once (leadership transfer, RAFT-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutNow {
    /// The sender's term.
    pub term: u64,
    /// The new leader is to be pinned (manual override) once it wins.
    pub pin: bool,
}

// ---------------------------------------------------------------------------------------------
// gossip (GOS-*). Who proposes or declares, and in which order, comes from the envelope (from,
// incarnation, seq), as Fabric's leadership message carries the sender's PKI id and timestamp.
// The epochs are conclave's addition: gossip has no term, so a leader takes a leadership epoch
// above every one it has seen, and `(epoch, leader)` is the fencing token (CB-5).

/// A node without a leader proposes itself (GOS-2). It also goes, addressed to one node, to a
/// leader whose declaration the sender could not adopt because its epoch was too old, so that
/// the leader renews its epoch above the sender's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The epoch of the last leader the proposer followed or was (0 if none).
    pub epoch: u64,
    /// That leader, if the proposer knows it: a leader that receives a proposal of its own
    /// epoch naming itself needs no new epoch.
    pub leader: Option<PeerId>,
}

/// A leader declares itself (GOS-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// The leadership epoch: above every epoch the leader had seen when it took it, and
    /// durable at the leader before the declaration left.
    pub epoch: u64,
}

// ---------------------------------------------------------------------------------------------
// priority (PRI-*). Every priority body carries a round: the round is the priority mode's
// term, and a node that hears a higher one keeps it, so a new master can always pick a round
// above every round it has heard of (CB-5 fencing; `core::priority` explains the rules).

/// A node looks for peers and a master (PRI-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discover {
    /// The priority election protocol version the sender speaks.
    pub protocol_version: u8,
    /// The sender's priority score (PRI-1), so that a master knows every pod that joined as a
    /// possible successor (PRI-5).
    pub priority: u32,
    /// The sender's round: the highest it has seen, just incremented for this election.
    pub round: u64,
}

/// The answer to [`Discover`]: the responder's priority and the master it knows, if any (PRI-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoverAck {
    /// The responder's priority score (PRI-1).
    pub priority: u32,
    /// The master the responder follows and has heard itself.
    pub known_master: Option<PeerId>,
    /// The round of `known_master`; without one, the highest round the responder has seen.
    pub round: u64,
}

/// A node campaigns with its priority score (PRI-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The candidate's priority score.
    pub priority: u32,
    /// The election round; it grows when a master is declared dead (PRI-3).
    pub round: u64,
}

/// A vote in the priority election (named `Vote` in PRI-2; `PriorityVote` here to keep it
/// apart from the raft [`Vote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityVote {
    /// The candidate voted on.
    pub candidate: PeerId,
    /// The voter's own priority score.
    pub voter_priority: u32,
    /// Whether the voter accepts the candidate.
    pub accept: bool,
    /// The round of the [`Candidate`] answered, so that a late vote is not counted in a later
    /// round.
    pub round: u64,
}

/// The master's periodic announcement (PRI-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterAnnounce {
    /// How many peers the master sees.
    pub peer_count: u16,
    /// The master's uptime, in seconds.
    pub uptime_s: u32,
    /// The master's battery level, 0–100.
    pub battery: u8,
    /// The master's priority score now (PRI-1); two masters compare it (PRI-6).
    pub priority: u32,
    /// The master's round: with the master's id, the fencing token (CB-5).
    pub round: u64,
    /// The master is forced (by configuration or command) and wins over any score (PRI-6).
    pub forced: bool,
}

/// Why a master resigns (PRI-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum ResignReason {
    /// The battery is low.
    LowBattery,
    /// An operator asked.
    UserRequest,
    /// The node is shutting down.
    Shutdown,
}

impl From<ResignReason> for u8 {
    fn from(reason: ResignReason) -> u8 {
        match reason {
            ResignReason::LowBattery => 0,
            ResignReason::UserRequest => 1,
            ResignReason::Shutdown => 2,
        }
    }
}

impl TryFrom<u8> for ResignReason {
    type Error = String;
    fn try_from(value: u8) -> Result<Self, String> {
        match value {
            0 => Ok(Self::LowBattery),
            1 => Ok(Self::UserRequest),
            2 => Ok(Self::Shutdown),
            other => Err(format!("unknown resign reason {other}")),
        }
    }
}

/// The master steps down and names its successor (PRI-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterResign {
    /// Why.
    pub reason: ResignReason,
    /// The best successor, which becomes master at once.
    pub successor: Option<PeerId>,
    /// The resigning master's round; the successor leads with a higher one.
    pub round: u64,
}

// ---------------------------------------------------------------------------------------------
// client (LOG-1)

/// A follower tells a client where the leader is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotLeader {
    /// The leader, when known.
    pub leader: Option<PeerId>,
    /// How to reach it (for example its admin URL), when known.
    pub addr: Option<String>,
}

// ---------------------------------------------------------------------------------------------

/// Generates [`Body`], [`BodyKind`] and their wire numbering from one table, so the three can
/// never disagree.
macro_rules! bodies {
    ($($(#[$doc:meta])* $variant:ident($ty:ty) = $kind:literal, $label:literal;)*) => {
        /// Any message that travels in an envelope.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Body {
            $($(#[$doc])* $variant($ty),)*
        }

        /// The kind of a [`Body`], without its fields; the first element of a body on the wire.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum BodyKind {
            $($(#[$doc])* $variant,)*
        }

        impl BodyKind {
            /// Every kind, in wire-number order.
            pub const ALL: &'static [BodyKind] = &[$(BodyKind::$variant,)*];

            /// The one-byte number that identifies this kind on the wire.
            pub fn wire_number(self) -> u8 {
                match self { $(BodyKind::$variant => $kind,)* }
            }

            /// The kind with this wire number, if any.
            pub fn from_wire_number(number: u8) -> Option<Self> {
                match number { $($kind => Some(BodyKind::$variant),)* _ => None }
            }

            /// A short snake_case name, used in logs and as the `kind` metric label.
            pub fn label(self) -> &'static str {
                match self { $(BodyKind::$variant => $label,)* }
            }
        }

        impl Body {
            /// This body's kind.
            pub fn kind(&self) -> BodyKind {
                match self { $(Body::$variant(_) => BodyKind::$variant,)* }
            }
        }

        $(
            impl From<$ty> for Body {
                fn from(body: $ty) -> Body {
                    Body::$variant(body)
                }
            }
        )*

        impl Serialize for Body {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut pair = serializer.serialize_tuple(2)?;
                pair.serialize_element(&self.kind().wire_number())?;
                match self { $(Body::$variant(fields) => pair.serialize_element(fields)?,)* }
                pair.end()
            }
        }

        impl<'de> Deserialize<'de> for Body {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct BodyVisitor;
                impl<'de> Visitor<'de> for BodyVisitor {
                    type Value = Body;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a message body [kind, fields]")
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Body, A::Error> {
                        let number: u8 = seq
                            .next_element()?
                            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                        let kind = BodyKind::from_wire_number(number).ok_or_else(|| {
                            de::Error::custom(format_args!("unknown body kind {number}"))
                        })?;
                        let body = match kind {
                            $(BodyKind::$variant => Body::$variant(
                                seq.next_element()?
                                    .ok_or_else(|| de::Error::invalid_length(1, &self))?,
                            ),)*
                        };
                        Ok(body)
                    }
                }
                deserializer.deserialize_tuple(2, BodyVisitor)
            }
        }
    };
}

bodies! {
    /// MEM-2 announce.
    Hello(Hello) = 0, "hello";
    /// MEM-2/MEM-3 answer to `Hello`.
    HelloAck(HelloAck) = 1, "hello_ack";
    /// MEM-4 probe.
    Ping(Ping) = 2, "ping";
    /// MEM-4 probe answer.
    Pong(Pong) = 3, "pong";
    /// Graceful leave.
    Goodbye(Goodbye) = 4, "goodbye";
    /// PROTO-5 freshness challenge.
    Challenge(Challenge) = 5, "challenge";
    /// PROTO-5 answer to a challenge.
    ChallengeAck(ChallengeAck) = 6, "challenge_ack";
    /// RAFT-3 vote or pre-vote request.
    RequestVote(RequestVote) = 16, "request_vote";
    /// RAFT-5 vote answer.
    Vote(Vote) = 17, "vote";
    /// RAFT-4 heartbeat, LOG-2 replication.
    AppendEntries(AppendEntries) = 18, "append_entries";
    /// LOG-2 replication answer.
    AppendResp(AppendResp) = 19, "append_resp";
    /// LOG-4 snapshot chunk.
    InstallSnapshot(InstallSnapshot) = 20, "install_snapshot";
    /// LOG-4 snapshot answer.
    SnapshotResp(SnapshotResp) = 21, "snapshot_resp";
    /// RAFT-8 manual assignment.
    LeaderAssign(LeaderAssign) = 22, "leader_assign";
    /// RAFT-8 leadership transfer.
    TimeoutNow(TimeoutNow) = 23, "timeout_now";
    /// GOS-2 proposal.
    Proposal(Proposal) = 32, "proposal";
    /// GOS-3 declaration.
    Declaration(Declaration) = 33, "declaration";
    /// PRI-2 discovery.
    Discover(Discover) = 48, "discover";
    /// PRI-4 discovery answer.
    DiscoverAck(DiscoverAck) = 49, "discover_ack";
    /// PRI-2 candidacy.
    Candidate(Candidate) = 50, "candidate";
    /// PRI-2 vote.
    PriorityVote(PriorityVote) = 51, "priority_vote";
    /// PRI-3 master heartbeat.
    MasterAnnounce(MasterAnnounce) = 52, "master_announce";
    /// PRI-5 resignation.
    MasterResign(MasterResign) = 53, "master_resign";
    /// LOG-1 redirect.
    NotLeader(NotLeader) = 64, "not_leader";
}

/// Opaque byte strings as MessagePack `bin`, read without trusting a length field beyond the
/// bytes actually present (PROTO-6).
mod wire_bytes {
    use std::fmt;

    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
                Ok(bytes.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(bytes)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                // Some encoders write small byte strings as arrays; accept them, growing as
                // elements actually arrive rather than trusting the declared length.
                let mut out = Vec::new();
                while let Some(byte) = seq.next_element::<u8>()? {
                    out.push(byte);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_bytes(BytesVisitor)
    }
}

/// A sequence read without pre-allocating from the declared length (PROTO-6): a forged array
/// header claiming four billion entries costs nothing until the entries are really there.
mod bounded_seq {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::Deserialize;
    use serde::de::{Deserializer, SeqAccess, Visitor};

    /// Entries reserved up front at most; a frame never holds more than a handful.
    const INITIAL_CAPACITY_LIMIT: usize = 8;

    pub(super) fn deserialize<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        struct SeqVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for SeqVisitor<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
                let hint = seq.size_hint().unwrap_or(0);
                let mut out = Vec::with_capacity(hint.min(INITIAL_CAPACITY_LIMIT));
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(SeqVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PROTO-3: wire numbers are unique and round-trip through `from_wire_number`.
    #[test]
    fn body_kind_numbers_are_unique_and_reversible() {
        let mut seen = std::collections::BTreeSet::new();
        for &kind in BodyKind::ALL {
            assert!(seen.insert(kind.wire_number()), "{kind:?} reuses a number");
            assert_eq!(BodyKind::from_wire_number(kind.wire_number()), Some(kind));
            // Positive fixints keep the kind to one byte on the wire.
            assert!(kind.wire_number() < 128);
        }
        assert_eq!(BodyKind::from_wire_number(127), None);
    }

    /// PROTO-3: a body is `[kind, [fields...]]` on the wire.
    #[test]
    fn ping_body_layout() {
        let bytes = rmp_serde::to_vec(&Body::Ping(Ping { timestamp_ms: 5 })).unwrap();
        assert_eq!(bytes, vec![0x92, 0x02, 0x91, 0x05]);
    }

    /// PROTO-3, GOS-2, GOS-3: the gossip bodies carry the leadership epoch (and a proposal the
    /// proposer's last leader); the sizes `docs/wire-protocol.md` states.
    #[test]
    fn gossip_body_layout() {
        let declaration = rmp_serde::to_vec(&Body::Declaration(Declaration { epoch: 5 })).unwrap();
        assert_eq!(declaration, vec![0x92, 0x21, 0x91, 0x05]);
        let wide = rmp_serde::to_vec(&Body::Declaration(Declaration { epoch: u64::MAX })).unwrap();
        assert_eq!(wide.len(), 12);
        let proposal = rmp_serde::to_vec(&Body::Proposal(Proposal {
            epoch: 0,
            leader: None,
        }))
        .unwrap();
        assert_eq!(proposal, vec![0x92, 0x20, 0x92, 0x00, 0xc0]);
        let leader = PeerId::new("gw-a").unwrap();
        let named = rmp_serde::to_vec(&Body::Proposal(Proposal {
            epoch: 7,
            leader: Some(leader),
        }))
        .unwrap();
        assert_eq!(
            named,
            vec![0x92, 0x20, 0x92, 0x07, 0xa4, b'g', b'w', b'-', b'a']
        );
        let longest = PeerId::new(&"x".repeat(crate::MAX_ID_LEN)).unwrap();
        let worst = rmp_serde::to_vec(&Body::Proposal(Proposal {
            epoch: u64::MAX,
            leader: Some(longest),
        }))
        .unwrap();
        assert_eq!(worst.len(), 3 + 9 + 2 + crate::MAX_ID_LEN);
    }

    /// RAFT-10: `priority` is a trailing field written only when present, so a node without a
    /// priority sends the bytes it sent before the field existed, a frame without it decodes as
    /// `None`, and a frame with it round-trips.
    #[test]
    fn raft10_priority_is_an_optional_trailing_field() {
        let without = Vote {
            term: 7,
            granted: true,
            pre_vote: false,
            priority: None,
        };
        let bytes = rmp_serde::to_vec(&Body::Vote(without)).unwrap();
        // [17, [term 7, true, false]]: three fields, exactly as before RAFT-10.
        assert_eq!(bytes, vec![0x92, 0x11, 0x93, 0x07, 0xc3, 0xc2]);
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::Vote(without)
        );

        let with = Vote {
            priority: Some(200),
            ..without
        };
        let bytes = rmp_serde::to_vec(&Body::Vote(with)).unwrap();
        assert_eq!(bytes, vec![0x92, 0x11, 0x94, 0x07, 0xc3, 0xc2, 0xcc, 200]);
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::Vote(with)
        );

        let resp = AppendResp {
            term: 3,
            success: true,
            match_index: 0,
            priority: Some(5),
            ..AppendResp::default()
        };
        let bytes = rmp_serde::to_vec(&Body::AppendResp(resp)).unwrap();
        assert_eq!(bytes, vec![0x92, 0x13, 0x95, 0x03, 0xc3, 0x00, 0xc0, 0x05]);
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendResp(resp)
        );
        // A nil in its place is no priority.
        let nil = [0x92, 0x13, 0x95, 0x03, 0xc3, 0x00, 0xc0, 0xc0];
        assert_eq!(
            rmp_serde::from_slice::<Body>(&nil).unwrap(),
            Body::AppendResp(AppendResp {
                priority: None,
                ..resp
            })
        );
        // A priority past 255 is refused, not truncated.
        let wide = [0x92, 0x13, 0x95, 0x03, 0xc3, 0x00, 0xc0, 0xcd, 0x01, 0x00];
        assert!(rmp_serde::from_slice::<Body>(&wide).is_err());
    }

    /// LOG-7: `read_round` is a trailing field of `AppendEntries` and `AppendResp`, written only
    /// when present; behind a `priority` of `None` that priority is written as nil, so the round
    /// keeps its place, and frames without a round are the bytes sent before it existed.
    #[test]
    fn log7_read_round_is_an_optional_trailing_field() {
        let leader = PeerId::new("a").unwrap();
        let beat = AppendEntries {
            prev_index: 4,
            prev_term: 2,
            commit: 4,
            ..AppendEntries::new(2, leader)
        };
        let bytes = rmp_serde::to_vec(&Body::AppendEntries(beat.clone())).unwrap();
        // [18, [2, "a", 4, 2, [], 4, false]]: seven fields, as before the round.
        assert_eq!(
            bytes,
            vec![
                0x92, 0x12, 0x97, 0x02, 0xa1, b'a', 0x04, 0x02, 0x90, 0x04, 0xc2
            ]
        );
        let with = AppendEntries {
            read_round: Some(9),
            ..beat
        };
        let bytes = rmp_serde::to_vec(&Body::AppendEntries(with.clone())).unwrap();
        assert_eq!(bytes[2], 0x98);
        assert_eq!(bytes.last(), Some(&0x09));
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendEntries(with)
        );

        let plain = AppendResp {
            term: 3,
            success: true,
            match_index: 1,
            ..AppendResp::default()
        };
        let bytes = rmp_serde::to_vec(&Body::AppendResp(plain)).unwrap();
        assert_eq!(bytes, vec![0x92, 0x13, 0x94, 0x03, 0xc3, 0x01, 0xc0]);
        let echo = AppendResp {
            read_round: Some(9),
            ..plain
        };
        let bytes = rmp_serde::to_vec(&Body::AppendResp(echo)).unwrap();
        // No priority: nil in its place, then the round.
        assert_eq!(
            bytes,
            vec![0x92, 0x13, 0x96, 0x03, 0xc3, 0x01, 0xc0, 0xc0, 0x09]
        );
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendResp(echo)
        );
        let both = AppendResp {
            priority: Some(5),
            ..echo
        };
        let bytes = rmp_serde::to_vec(&Body::AppendResp(both)).unwrap();
        assert_eq!(
            bytes,
            vec![0x92, 0x13, 0x96, 0x03, 0xc3, 0x01, 0xc0, 0x05, 0x09]
        );
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendResp(both)
        );
    }

    /// MEMB-6: `chunk` is the last trailing field of `AppendEntries` and `AppendResp`; the
    /// fields before it are written as nil when absent, and a frame without it is the bytes
    /// sent before it existed.
    #[test]
    fn memb6_chunk_is_an_optional_trailing_field() {
        let leader = PeerId::new("a").unwrap();
        let piece = AppendEntries {
            prev_index: 4,
            prev_term: 2,
            commit: 4,
            chunk: Some(Box::new(EntryChunk {
                index: 5,
                term: 2,
                kind: EntryKind::Command,
                offset: 3,
                total_len: 6,
                data: vec![7, 8, 9],
            })),
            ..AppendEntries::new(2, leader)
        };
        let bytes = rmp_serde::to_vec(&Body::AppendEntries(piece.clone())).unwrap();
        // [18, [2, "a", 4, 2, [], 4, false, nil, [5, 2, 1, 3, 6, bin 7 8 9]]]
        assert_eq!(
            bytes,
            vec![
                0x92, 0x12, 0x99, 0x02, 0xa1, b'a', 0x04, 0x02, 0x90, 0x04, 0xc2, 0xc0, 0x96, 0x05,
                0x02, 0x01, 0x03, 0x06, 0xc4, 0x03, 0x07, 0x08, 0x09
            ]
        );
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendEntries(piece)
        );
        let ack = AppendResp {
            term: 3,
            success: true,
            match_index: 4,
            chunk: Some(ChunkAck {
                index: 5,
                next_offset: 6,
            }),
            ..AppendResp::default()
        };
        let bytes = rmp_serde::to_vec(&Body::AppendResp(ack)).unwrap();
        assert_eq!(
            bytes,
            vec![
                0x92, 0x13, 0x97, 0x03, 0xc3, 0x04, 0xc0, 0xc0, 0xc0, 0x92, 0x05, 0x06
            ]
        );
        assert_eq!(
            rmp_serde::from_slice::<Body>(&bytes).unwrap(),
            Body::AppendResp(ack)
        );
    }

    /// PROTO-6: an unknown kind is a decode error.
    #[test]
    fn unknown_kind_is_an_error() {
        let bytes = [0x92, 0x7f, 0x90];
        let err = rmp_serde::from_slice::<Body>(&bytes).unwrap_err();
        assert!(err.to_string().contains("unknown body kind 127"), "{err}");
    }
}
