//! Messages between the actors of one node. Actors hold `Recipient`s of these, never the
//! concrete address of a neighbour, so a test can put a fake in any place.

use actix::Message;
use conclave_core::LinkAddr;
use conclave_core::election::{ElectionMessage, HealthReading, PeerSignal};
use conclave_protocol::{Body, PeerId};

/// Where an outgoing body goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// One peer, by the route the transport learned (or to every known address if none yet).
    Peer(PeerId),
    /// One peer, through the link address a frame of its came from (MEM-3 refusals).
    Reply {
        /// The peer.
        peer: PeerId,
        /// The address its frame came from.
        origin: LinkAddr,
    },
    /// Several peers, the same body: one radio broadcast for those the radio reaches (when
    /// two or more do), a frame each for the others (issue 27, item 1).
    Peers(Vec<PeerId>),
    /// Everyone reachable on every link.
    Broadcast,
}

/// Send a body (to the transport).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Transmit {
    /// Where to.
    pub to: Destination,
    /// What.
    pub body: Body,
}

/// An authenticated frame arrived (from the transport to membership): every frame, whatever
/// its body, since any frame proves its sender alive.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct FrameArrived {
    /// The sender.
    pub from: PeerId,
    /// The link address it came from.
    pub origin: LinkAddr,
    /// The body when it is membership's own (`Hello`, `Ping`, ...). `None` for an election
    /// message: the election gets that body, and here it only proves the sender alive.
    pub body: Option<Body>,
}

/// Admission's view of a sender changed (from the transport to membership, PROTO-5).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub enum PeerAdmission {
    /// The sender proved its frames fresh at `origin`: membership greets it (MEM-2).
    Verified {
        /// The sender.
        peer: PeerId,
        /// Where it answered from.
        origin: LinkAddr,
    },
    /// The sender, not a configured voter, was silent long enough for its place to go to a
    /// newcomer: membership forgets it too, so its table stays bounded.
    Forgotten {
        /// The sender.
        peer: PeerId,
    },
}

/// A `Hello` claimed an id that another address owns on that link while the owner is live
/// (from the transport to membership, which refuses it: MEM-3).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct HelloContested {
    /// The id claimed.
    pub from: PeerId,
    /// Where the `Hello` came from: the refusal goes there.
    pub origin: LinkAddr,
}

/// An election message arrived (from the transport to the election), of whatever mode: the
/// election refuses, and counts, a message of a mode other than its own.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ElectionArrived {
    /// The sender.
    pub from: PeerId,
    /// The message.
    pub message: ElectionMessage,
}

/// Membership's view of a peer changed (from membership to the election, reliably: the
/// election's electorate depends on it).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct PeerReachability {
    /// The peer.
    pub peer: PeerId,
    /// Connected (heard recently) or not (silent, or gone).
    pub connected: bool,
}

/// Another live node holds this node's id (MEM-3): leave the election.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct IdRefused;

/// This node's health source gave a good reading (from the health reader to the election:
/// PRI-1's battery, RAFT-10's priority).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct HealthUpdate(pub HealthReading);

/// A peer's smoothed signal strength changed (from the transport to the election: PRI-1's
/// signal component).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct PeerSignalUpdate(pub PeerSignal);
