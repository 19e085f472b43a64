//! Errors of the state machines: a command that cannot be encoded or decoded, one that breaks
//! a bound, a snapshot that cannot be restored, and a watch that asks for history already
//! dropped (LOG-5).
//!
//! An error about an entry's data is never a panic: the entry is applied as a no-op and the
//! error comes back in [`Applied::Rejected`](crate::Applied::Rejected), identically on every
//! node, so the replicas stay equal.

/// A field of a command outside its bounds. Checked when a command is encoded (so the leader
/// refuses it before proposing) and again when it is decoded (so every node refuses the same
/// entries, whoever wrote them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidCommand {
    /// A string field is empty or too long.
    #[error("{field} is {len} bytes long, it must be 1 to {max}")]
    Length {
        /// Which field: "request id", "key", "worker", "queue".
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// A value or payload larger than an entry may carry.
    #[error("{field} is {len} bytes long, at most {max} are allowed")]
    TooLarge {
        /// "value", "if_value" or "payload".
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// A number outside its range.
    #[error("{field} is {value}, it must be {min} to {max}")]
    OutOfRange {
        /// "lease_ms" or "max_attempts".
        field: &'static str,
        /// The value given.
        value: u64,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
    },
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command could not be encoded (MessagePack); not expected for valid commands.
    #[error("encoding a command")]
    EncodeCommand(#[source] rmp_serde::encode::Error),
    /// An entry's data is empty or not in a command format this build knows.
    #[error("command format {found:?} is unknown, this build reads format {expected}")]
    CommandFormat {
        /// The first byte of the data, if any.
        found: Option<u8>,
        /// The format this build writes and reads.
        expected: u8,
    },
    /// An entry's data is not a MessagePack command.
    #[error("decoding a command of {len} bytes")]
    DecodeCommand {
        /// The data's length.
        len: usize,
        /// Why it did not decode.
        #[source]
        source: rmp_serde::decode::Error,
    },
    /// A command breaks a bound.
    #[error("invalid command")]
    InvalidCommand(#[from] InvalidCommand),
    /// The state could not be encoded as a snapshot; not expected.
    #[error("encoding a snapshot")]
    EncodeSnapshot(#[source] rmp_serde::encode::Error),
    /// A snapshot that is empty or of a format this build does not read.
    #[error("snapshot format {found:?} is unknown, this build reads format {expected}")]
    SnapshotFormat {
        /// The first byte of the snapshot, if any.
        found: Option<u8>,
        /// The format this build writes and reads.
        expected: u8,
    },
    /// A snapshot that is not MessagePack of the expected shape.
    #[error("decoding a snapshot of {len} bytes")]
    DecodeSnapshot {
        /// The snapshot's length.
        len: usize,
        /// Why it did not decode.
        #[source]
        source: rmp_serde::decode::Error,
    },
    /// A snapshot that decodes but contradicts itself (say, a claimed job without a lease, or a
    /// history whose revisions have a hole); restoring it would break the state's invariants.
    #[error("inconsistent snapshot: {0}")]
    InconsistentSnapshot(&'static str),
    /// A watch from a revision whose changes are no longer kept.
    #[error("revisions before {oldest} are compacted")]
    Compacted {
        /// The oldest revision whose change is still kept; a watch may start there.
        oldest: u64,
    },
}

/// Result of state machine operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
