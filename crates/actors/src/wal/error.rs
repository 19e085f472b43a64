//! What can go wrong with the WAL (WAL-1, WAL-2). Every message names the file, because the
//! operator reading it has to find that file.

use std::path::PathBuf;

/// A WAL failure.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// Reading, writing, syncing or renaming failed.
    #[error("WAL {}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file does not start with the WAL magic: it is not ours, and it is left untouched.
    #[error(
        "WAL {}: not a conclave WAL (starts with {found:02x?}, expected \"CWL1\"); refusing to \
         touch it — move it away or point node.data_dir elsewhere",
        path.display()
    )]
    ForeignFile {
        /// The file.
        path: PathBuf,
        /// Its first bytes (at most four).
        found: Vec<u8>,
    },
    /// A record with a valid checksum does not follow its kind's layout. It was written whole,
    /// so it is not a torn tail; dropping it (and everything after it) could drop a vote, so
    /// the node refuses to start instead.
    #[error(
        "WAL {}: record of kind {kind} at byte {offset} has a valid checksum but cannot be read: \
         {reason}",
        path.display()
    )]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// Its kind.
        kind: u8,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The stored incarnation is `u64::MAX`, so it cannot grow (PROTO-2).
    #[error("WAL {}: the incarnation counter is exhausted", path.display())]
    IncarnationExhausted {
        /// The file.
        path: PathBuf,
    },
    /// An earlier write or fsync failed. After a failed fsync the kernel may have dropped the
    /// dirty pages and a retry can "succeed" without the data being on disk, and a half
    /// written record would hide every later one from recovery, so the WAL takes no more
    /// writes; restarting the node recovers to the last good record.
    #[error(
        "WAL {}: an earlier write or fsync failed; no further writes are accepted until restart",
        path.display()
    )]
    Failed {
        /// The file.
        path: PathBuf,
    },
}
