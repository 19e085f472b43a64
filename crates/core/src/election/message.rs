//! The election messages of every mode: a typed subset of the wire
//! [`Body`](conclave_protocol::Body) (PROTO-3). The transport hands the election every body
//! that converts; membership gets the rest.

use conclave_protocol::{
    Body, Candidate, Declaration, Discover, DiscoverAck, MasterAnnounce, MasterResign,
    PriorityVote, Proposal,
};

use crate::election::Mode;
use crate::raft::RaftMessage;

/// A message of the election, whatever its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionMessage {
    /// Raft (RAFT-*).
    Raft(RaftMessage),
    /// Fabric's gossip election (GOS-*).
    Gossip(GossipMessage),
    /// The pod master election (PRI-*).
    Priority(PriorityMessage),
}

/// A message of the gossip election (GOS-2, GOS-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GossipMessage {
    /// "I could lead": gossiped by a node without a known leader.
    Proposal(Proposal),
    /// "I lead": sent by the leader, periodically.
    Declaration(Declaration),
}

/// A message of the priority election (PRI-2..6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityMessage {
    /// Looking for peers and a master.
    Discover(Discover),
    /// The answer to `Discover`.
    DiscoverAck(DiscoverAck),
    /// Campaigning with a score.
    Candidate(Candidate),
    /// A vote on a candidate.
    Vote(PriorityVote),
    /// The master's periodic announcement.
    MasterAnnounce(MasterAnnounce),
    /// The master resigns, naming a successor.
    MasterResign(MasterResign),
}

impl ElectionMessage {
    /// The mode whose election exchanges this message.
    pub fn mode(&self) -> Mode {
        match self {
            ElectionMessage::Raft(_) => Mode::Raft,
            ElectionMessage::Gossip(_) => Mode::Gossip,
            ElectionMessage::Priority(_) => Mode::Priority,
        }
    }
}

impl From<RaftMessage> for ElectionMessage {
    fn from(message: RaftMessage) -> Self {
        ElectionMessage::Raft(message)
    }
}

impl From<ElectionMessage> for Body {
    fn from(message: ElectionMessage) -> Body {
        match message {
            ElectionMessage::Raft(m) => m.into(),
            ElectionMessage::Gossip(GossipMessage::Proposal(m)) => Body::Proposal(m),
            ElectionMessage::Gossip(GossipMessage::Declaration(m)) => Body::Declaration(m),
            ElectionMessage::Priority(m) => match m {
                PriorityMessage::Discover(m) => Body::Discover(m),
                PriorityMessage::DiscoverAck(m) => Body::DiscoverAck(m),
                PriorityMessage::Candidate(m) => Body::Candidate(m),
                PriorityMessage::Vote(m) => Body::PriorityVote(m),
                PriorityMessage::MasterAnnounce(m) => Body::MasterAnnounce(m),
                PriorityMessage::MasterResign(m) => Body::MasterResign(m),
            },
        }
    }
}

impl TryFrom<Body> for ElectionMessage {
    /// A body that is not an election message comes back unchanged.
    type Error = Body;
    fn try_from(body: Body) -> Result<Self, Body> {
        let body = match RaftMessage::try_from(body) {
            Ok(message) => return Ok(ElectionMessage::Raft(message)),
            Err(body) => body,
        };
        Ok(match body {
            Body::Proposal(m) => ElectionMessage::Gossip(GossipMessage::Proposal(m)),
            Body::Declaration(m) => ElectionMessage::Gossip(GossipMessage::Declaration(m)),
            Body::Discover(m) => ElectionMessage::Priority(PriorityMessage::Discover(m)),
            Body::DiscoverAck(m) => ElectionMessage::Priority(PriorityMessage::DiscoverAck(m)),
            Body::Candidate(m) => ElectionMessage::Priority(PriorityMessage::Candidate(m)),
            Body::PriorityVote(m) => ElectionMessage::Priority(PriorityMessage::Vote(m)),
            Body::MasterAnnounce(m) => {
                ElectionMessage::Priority(PriorityMessage::MasterAnnounce(m))
            }
            Body::MasterResign(m) => ElectionMessage::Priority(PriorityMessage::MasterResign(m)),
            other => return Err(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use conclave_protocol::{Hello, Ping, ResignReason};

    use super::*;

    /// PROTO-3: every election body converts to an election message and back unchanged; a
    /// membership body stays a body.
    #[test]
    fn election_bodies_round_trip() {
        let bodies = [
            Body::Proposal(Proposal {
                epoch: 3,
                leader: None,
            }),
            Body::Declaration(Declaration { epoch: 4 }),
            Body::Discover(Discover {
                protocol_version: 1,
                priority: 7,
                round: 3,
            }),
            Body::DiscoverAck(DiscoverAck {
                priority: 7,
                known_master: None,
                round: 3,
            }),
            Body::Candidate(Candidate {
                priority: 9,
                round: 2,
            }),
            Body::MasterResign(MasterResign {
                reason: ResignReason::UserRequest,
                successor: None,
                round: 4,
            }),
        ];
        for body in bodies {
            let message = ElectionMessage::try_from(body.clone()).expect("an election body");
            assert_eq!(Body::from(message), body);
        }
        for body in [Body::Hello(Hello {}), Body::Ping(Ping { timestamp_ms: 1 })] {
            assert_eq!(ElectionMessage::try_from(body.clone()), Err(body));
        }
    }
}
