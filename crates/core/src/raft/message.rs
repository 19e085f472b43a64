//! The election messages, a typed subset of the wire [`Body`](conclave_protocol::Body).

use conclave_protocol::{
    AppendEntries, AppendResp, Body, InstallSnapshot, LeaderAssign, RequestVote, SnapshotResp,
    TimeoutNow, Vote,
};

/// A message the election core sends or receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaftMessage {
    /// Vote or pre-vote request.
    RequestVote(RequestVote),
    /// Vote or pre-vote answer.
    Vote(Vote),
    /// Heartbeat (empty entries) or replication.
    AppendEntries(AppendEntries),
    /// Answer to `AppendEntries`.
    AppendResp(AppendResp),
    /// One chunk of a snapshot, to a follower behind the compaction point (LOG-4).
    InstallSnapshot(InstallSnapshot),
    /// Answer to a chunk that was not the last: the offset the follower expects next.
    SnapshotResp(SnapshotResp),
    /// Manual assignment or transfer request.
    LeaderAssign(LeaderAssign),
    /// Campaign at once.
    TimeoutNow(TimeoutNow),
}

impl RaftMessage {
    /// The term the message carries.
    pub fn term(&self) -> u64 {
        match self {
            RaftMessage::RequestVote(m) => m.term,
            RaftMessage::Vote(m) => m.term,
            RaftMessage::AppendEntries(m) => m.term,
            RaftMessage::AppendResp(m) => m.term,
            RaftMessage::InstallSnapshot(m) => m.term,
            RaftMessage::SnapshotResp(m) => m.term,
            RaftMessage::LeaderAssign(m) => m.term,
            RaftMessage::TimeoutNow(m) => m.term,
        }
    }
}

impl From<RaftMessage> for Body {
    fn from(message: RaftMessage) -> Body {
        match message {
            RaftMessage::RequestVote(m) => Body::RequestVote(m),
            RaftMessage::Vote(m) => Body::Vote(m),
            RaftMessage::AppendEntries(m) => Body::AppendEntries(m),
            RaftMessage::AppendResp(m) => Body::AppendResp(m),
            RaftMessage::InstallSnapshot(m) => Body::InstallSnapshot(m),
            RaftMessage::SnapshotResp(m) => Body::SnapshotResp(m),
            RaftMessage::LeaderAssign(m) => Body::LeaderAssign(m),
            RaftMessage::TimeoutNow(m) => Body::TimeoutNow(m),
        }
    }
}

impl TryFrom<Body> for RaftMessage {
    /// A body that is not an election message comes back unchanged.
    type Error = Body;
    fn try_from(body: Body) -> Result<Self, Body> {
        match body {
            Body::RequestVote(m) => Ok(RaftMessage::RequestVote(m)),
            Body::Vote(m) => Ok(RaftMessage::Vote(m)),
            Body::AppendEntries(m) => Ok(RaftMessage::AppendEntries(m)),
            Body::AppendResp(m) => Ok(RaftMessage::AppendResp(m)),
            Body::InstallSnapshot(m) => Ok(RaftMessage::InstallSnapshot(m)),
            Body::SnapshotResp(m) => Ok(RaftMessage::SnapshotResp(m)),
            Body::LeaderAssign(m) => Ok(RaftMessage::LeaderAssign(m)),
            Body::TimeoutNow(m) => Ok(RaftMessage::TimeoutNow(m)),
            other => Err(other),
        }
    }
}
