//! What an operator asks of the election, whatever its mode, and what came of it (RAFT-8,
//! CB-3): `conclave leader set`, `conclave leader resign`, `conclave auto-election`.

use conclave_protocol::PeerId;

/// An operator's request to the election (RAFT-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Make this node the leader: `LeaderAssign` in `connected` mode, a leadership transfer
    /// followed by a pin in `voters` mode.
    SetLeader(PeerId),
    /// Switch automatic elections on or off (`EnableAutoLeaderElection`).
    EnableAutoElection(bool),
    /// The leader hands over to the best caught-up peer, or steps down (Yield).
    Resign,
}

/// What a successful [`Command`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// The command took effect on this node.
    Applied,
    /// This node is not the leader; the request went to the leader it knows.
    Forwarded {
        /// The leader the request was sent to.
        to: PeerId,
    },
    /// A leadership transfer to `target` started; it completes when `target` wins.
    TransferStarted {
        /// The node that will campaign.
        target: PeerId,
    },
    /// The leader stepped down without a successor (nobody was reachable).
    SteppedDown,
}
