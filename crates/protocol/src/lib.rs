//! The conclave wire protocol.
//!
//! Everything two conclave nodes say to each other, whatever the link (UDP, ESP-NOW through
//! the serial dongle, or in-memory in tests), is one [`Envelope`] encoded as a compact
//! MessagePack array; when the cluster has a pre-shared key the body is sealed (AES-256-GCM-SIV,
//! the header in clear as associated data) and the frame ends with the 16-byte tag:
//!
//! - [`PeerId`] and [`ClusterId`]: validated identities (PROTO-1);
//! - [`Envelope`] and every [`Body`] (PROTO-2, PROTO-3);
//! - [`FrameCodec`]: encoding with an explicit MTU check (PROTO-4) and total decoding
//!   (PROTO-6);
//! - [`AuthKey`] and [`KeyRing`] (sealing, key rotation: PROTO-9) and [`ReplayGuard`],
//!   combined in [`FrameReceiver`] (PROTO-5).
//!
//! The byte-level layout is documented in `docs/wire-protocol.md`. This crate does no I/O.

#![deny(missing_docs)]

mod auth;
mod body;
mod configuration;
mod envelope;
mod error;
mod frame;
mod ids;
mod keyring;
mod replay;

pub use auth::{
    AuthKey, DEFAULT_TAG_LEN, MAX_TAG_LEN, MIN_KEY_LEN, MIN_TAG_LEN, SEALED_TAG_LEN, first_seq,
    frame_nonce,
};
pub use body::{
    AppendEntries, AppendResp, Body, BodyKind, Candidate, Challenge, ChallengeAck, ChunkAck,
    ConflictHint, DUPLICATE_PEER_ID, Declaration, Discover, DiscoverAck, EntryChunk, EntryKind,
    Goodbye, Hello, HelloAck, InstallSnapshot, LeaderAssign, LogEntry, MasterAnnounce,
    MasterResign, NotLeader, Ping, Pong, PriorityVote, Proposal, RequestVote, ResignReason,
    SnapshotResp, TimeoutNow, Vote,
};
pub use configuration::{Configuration, ConfigurationError, MemberAddress};
pub use envelope::{Envelope, PROTOCOL_VERSION};
pub use error::{DropReason, FrameError, IdError, KeyError};
pub use frame::{ESPNOW_V1_MTU, ESPNOW_V2_MTU, FrameCodec, FrameReceiver, UDP_MTU};
pub use ids::{ClusterId, MAX_ID_LEN, PeerId};
pub use keyring::{KeyRing, SendKey};
pub use replay::{DEFAULT_MAX_SENDERS, ReplayGuard, ReplayWindow, WINDOW as REPLAY_WINDOW};

/// Result of protocol operations.
pub type Result<T, E = FrameError> = std::result::Result<T, E>;
