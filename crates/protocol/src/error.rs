//! Errors of the wire protocol: invalid identities, bad keys and every reason a frame is
//! refused (PROTO-4..6, TR-2). Each refusal maps to a [`DropReason`], the `reason` label of
//! `conclave_frames_dropped_total`.

use crate::ids::{ClusterId, PeerId};

/// An identity that breaks PROTO-1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Zero bytes.
    #[error("{what} is empty")]
    Empty {
        /// "peer id" or "cluster id".
        what: &'static str,
    },
    /// More than 32 bytes.
    #[error("{what} is {len} bytes long, at most 32 are allowed")]
    TooLong {
        /// "peer id" or "cluster id".
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A byte outside `[A-Za-z0-9._-]`.
    #[error(
        "{what} has byte {byte:#04x} at position {position}; only A-Z a-z 0-9 . _ - are allowed"
    )]
    InvalidByte {
        /// "peer id" or "cluster id".
        what: &'static str,
        /// The offending byte.
        byte: u8,
        /// Where it is.
        position: usize,
    },
}

/// A pre-shared key or tag length that cannot be used (PROTO-5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is too short to resist guessing.
    #[error("pre-shared key is {len} bytes, at least {min} are required")]
    TooShort {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// A tag length other than the sealed frames' 16 bytes.
    #[error(
        "authentication tag length {len} is not supported: sealed frames carry a {expected}-byte tag"
    )]
    TagLength {
        /// The requested length.
        len: usize,
        /// The only length sealing has.
        expected: usize,
    },
}

/// Why a frame could not be encoded, or why a received frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The encoded frame does not fit the link (PROTO-4); nothing is truncated.
    #[error("frame of {len} bytes exceeds the link MTU of {mtu} bytes")]
    Oversize {
        /// Encoded size, tag included.
        len: usize,
        /// The link's limit.
        mtu: usize,
    },
    /// Fewer bytes than an envelope and its tag need.
    #[error("frame of {len} bytes is too short to hold an envelope and a {tag_len}-byte tag")]
    Truncated {
        /// Received size.
        len: usize,
        /// Tag size expected.
        tag_len: usize,
    },
    /// Not a valid MessagePack envelope (PROTO-6).
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// A protocol version this node does not speak.
    #[error("unsupported protocol version {got}; this node speaks version {supported}")]
    UnsupportedVersion {
        /// Version in the frame.
        got: u8,
        /// Version of this node.
        supported: u8,
    },
    /// The frame belongs to another cluster (PROTO-5).
    #[error("frame is for cluster {got}, this node belongs to {expected}")]
    ForeignCluster {
        /// Cluster named by the frame.
        got: ClusterId,
        /// This node's cluster.
        expected: ClusterId,
    },
    /// The frame does not open: its tag does not match its header and sealed body (PROTO-5,
    /// PROTO-9).
    #[error(
        "frame does not open: forged, corrupted, or sealed under a key this node does not hold"
    )]
    BadTag,
    /// `(incarnation, seq)` is not newer than what was accepted from this sender (PROTO-5).
    #[error(
        "replayed frame from {from}: incarnation {incarnation}, seq {seq} was already seen or is too old"
    )]
    Replay {
        /// Claimed sender.
        from: PeerId,
        /// Its incarnation.
        incarnation: u64,
        /// Its sequence number.
        seq: u64,
    },
    /// The envelope could not be serialised (a bug, reported rather than panicking).
    #[error("cannot encode envelope: {0}")]
    Encode(String),
}

/// Why a received frame was dropped: the `reason` label of `conclave_frames_dropped_total`
/// (TR-2). Kept small and fixed so the label's cardinality is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Undecodable or truncated.
    Malformed,
    /// Unsupported protocol version.
    Version,
    /// Another cluster's frame.
    ForeignCluster,
    /// Authentication failed.
    BadTag,
    /// Replay or duplicate.
    Replay,
    /// Larger than the link allows.
    Oversize,
    /// Addressed to another node.
    Misaddressed,
    /// Authenticated, but from a sender that has not yet proven its frames are newer than
    /// this node's start: it is challenged instead (PROTO-5).
    Unverified,
    /// From an address that does not own the sender's id on that link while the owner is live
    /// (MEM-3): a second node with the same id, or someone replaying from elsewhere.
    DuplicateId,
    /// From a new sender while the table of peers is full (PROTO-5: the peer table is bounded).
    PeerLimit,
    /// An incarnation far ahead of this node's clock (PROTO-5).
    IncarnationAhead,
    /// A queue between a socket and the node's core was full (TR-2).
    QueueFull,
    /// An election message of another mode than this node's (`election.mode` differs between
    /// nodes): the election refused it.
    OtherMode,
}

impl DropReason {
    /// Every reason, for pre-registering metric labels.
    pub const ALL: &'static [DropReason] = &[
        DropReason::Malformed,
        DropReason::Version,
        DropReason::ForeignCluster,
        DropReason::BadTag,
        DropReason::Replay,
        DropReason::Oversize,
        DropReason::Misaddressed,
        DropReason::Unverified,
        DropReason::DuplicateId,
        DropReason::PeerLimit,
        DropReason::IncarnationAhead,
        DropReason::QueueFull,
        DropReason::OtherMode,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Version => "version",
            DropReason::ForeignCluster => "foreign_cluster",
            DropReason::BadTag => "bad_tag",
            DropReason::Replay => "replay",
            DropReason::Oversize => "oversize",
            DropReason::Misaddressed => "misaddressed",
            DropReason::Unverified => "unverified",
            DropReason::DuplicateId => "duplicate_id",
            DropReason::PeerLimit => "peer_limit",
            DropReason::IncarnationAhead => "incarnation_ahead",
            DropReason::QueueFull => "queue_full",
            DropReason::OtherMode => "other_mode",
        }
    }
}

impl FrameError {
    /// The drop reason a received frame refused with this error is counted under.
    pub fn drop_reason(&self) -> DropReason {
        match self {
            FrameError::Oversize { .. } => DropReason::Oversize,
            FrameError::Truncated { .. } | FrameError::Malformed(_) | FrameError::Encode(_) => {
                DropReason::Malformed
            }
            FrameError::UnsupportedVersion { .. } => DropReason::Version,
            FrameError::ForeignCluster { .. } => DropReason::ForeignCluster,
            FrameError::BadTag => DropReason::BadTag,
            FrameError::Replay { .. } => DropReason::Replay,
        }
    }
}
