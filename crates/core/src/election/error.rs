//! What the election refuses, whatever its mode: settings that cannot work (each problem
//! under the [`Setting`](crate::election::Setting) it concerns), and commands it will not carry
//! out.

use conclave_protocol::PeerId;

use crate::election::{Mode, SettingProblem};

/// What the election core refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// The settings cannot work; every problem is listed, each with the setting it concerns.
    #[error("invalid election settings: {}", join(.0))]
    InvalidConfig(Vec<SettingProblem>),
    /// The command is not one this mode offers, or not one this node's configuration of it
    /// offers (gossip's `leader set`; `leader resign` on a gossip org leader). The settings are
    /// fine; nothing changed.
    #[error("refused by the {mode} election: {reason}")]
    NotOffered {
        /// This node's mode.
        mode: Mode,
        /// Why, and what to use instead.
        reason: String,
    },
    /// `SetLeader` named a node that cannot lead in `voters` mode.
    #[error("{0} is not a voter and cannot lead")]
    NotAVoter(PeerId),
    /// `SetLeader` named a node this node cannot reach in `connected` mode.
    #[error("{0} is not a connected peer")]
    UnknownPeer(PeerId),
    /// The command needs the leader.
    #[error("this node is not the leader (leader: {})", .leader.map_or("unknown".to_owned(), |l| l.to_string()))]
    NotLeader {
        /// The leader, if known.
        leader: Option<PeerId>,
    },
    /// This node abstains after starting without a hard state (WAL-2, WAL-5): it takes no
    /// part in elections until the other voters show which terms are over.
    #[error(
        "this node is abstaining: its WAL held no term or vote (lost, repaired, or started \
         without `conclave init`), so it neither votes nor campaigns until the other voters \
         show which terms are over (docs/wal.md, \"Amnesia and abstention\")"
    )]
    Abstaining,
    /// This node's id was refused as a duplicate (MEM-3); it takes no part in elections.
    #[error("this node's id is used by another live node; it takes no part in elections")]
    Quarantined,
    /// The node is stopping (`handle_shutdown`): it takes no more commands.
    #[error("this node is stopping; it takes no more election commands")]
    ShuttingDown,
    /// A message of another mode's election reached this node (`election.mode` differs
    /// between nodes): dropped.
    #[error(
        "an election message of {theirs} mode reached this node, which runs {ours} mode \
         (election.mode differs between the nodes of the cluster)"
    )]
    OtherMode {
        /// This node's mode.
        ours: Mode,
        /// The message's mode.
        theirs: Mode,
    },
    /// `auto-election` in static mode, where nobody elects (STA-1).
    #[error(
        "static mode elects nobody, so automatic election cannot be switched: the leader is \
         the node election.static.leader names, or the one `conclave leader set` assigned"
    )]
    StaticModeElectsNobody,
    /// `leader resign` on the static leader (STA-1).
    #[error(
        "{leader} is the static leader (election.static.leader, or `conclave leader set`) and \
         cannot resign in static mode; `conclave leader set <id>` on each node reassigns \
         leadership"
    )]
    StaticLeaderCannotResign {
        /// This node, the static leader.
        leader: PeerId,
    },
    /// `leader resign` on a gossip org leader (GOS-5): its leadership is configuration, as
    /// the static leader's is, and is refused the same way.
    #[error(
        "{leader} leads because gossip org_leader = true with use_leader_election = false, and          cannot resign; leadership moves only by changing that configuration"
    )]
    OrgLeaderCannotResign {
        /// This node, the org leader.
        leader: PeerId,
    },
}

/// The problems, each as `setting: message`, joined with `; `.
fn join(problems: &[SettingProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
