//! The envelope that carries every body between nodes (PROTO-2).
//!
//! `(incarnation, seq)` orders everything one sender ever sends: the incarnation grows at every
//! start of a node (it is persisted), the sequence number within an incarnation. The replay
//! guard in [`crate::replay`] relies on that order.

use serde::{Deserialize, Serialize};

use crate::body::Body;
use crate::ids::{ClusterId, PeerId};

/// The protocol version this build speaks; the first field of every envelope.
///
/// Version 2 added the `Challenge` / `ChallengeAck` handshake: a version-2 node admits a
/// sender's frames only once the sender has answered a challenge, which a version-1 node cannot
/// do, so the two refuse each other plainly (`version`) rather than half-working.
///
/// Version 3 seals the body with a key (PROTO-9): a version-2 node could not open it, and would
/// take the AEAD tag for an HMAC tag and drop every frame as forged, so the version says it
/// first. Without a key the bytes are those of version 2 but for the version number.
pub const PROTOCOL_VERSION: u8 = 3;

/// One message between nodes, as it is encoded on the wire (a seven-element MessagePack array,
/// fields in this order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub version: u8,
    /// The cluster the sender belongs to.
    pub cluster: ClusterId,
    /// The sender.
    pub from: PeerId,
    /// The sender's incarnation: grows at each start of the sender.
    pub incarnation: u64,
    /// Per-sender sequence number, strictly increasing within an incarnation.
    pub seq: u64,
    /// The addressee; `None` is a broadcast.
    pub to: Option<PeerId>,
    /// The message.
    pub body: Body,
}

impl Envelope {
    /// An envelope of the current protocol version.
    pub fn new(
        cluster: ClusterId,
        from: PeerId,
        incarnation: u64,
        seq: u64,
        to: Option<PeerId>,
        body: impl Into<Body>,
    ) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            cluster,
            from,
            incarnation,
            seq,
            to,
            body: body.into(),
        }
    }
}
