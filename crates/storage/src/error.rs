//! What can go wrong with the WAL (WAL-1, WAL-2). Every message names the file, because the
//! operator reading it has to find that file.

use std::path::PathBuf;

/// A WAL failure.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The file's election state belongs to another mode than the node's `election.mode`
    /// (issue 9): its terms, votes and history mean something else there. Refused before
    /// anything is written to it.
    #[error(
        "WAL {}: written in {recorded} mode, but election.mode = \"{configured}\"; switching \
         mode needs a restart with a WAL of that mode: set election.mode = \"{recorded}\" \
         again, or move {} away (its terms, votes and leadership history belong to {recorded} \
         mode) and start afresh",
        path.display(),
        path.display()
    )]
    OtherMode {
        /// The file.
        path: PathBuf,
        /// The mode the file records (raft for a file written before modes were recorded).
        recorded: conclave_core::election::Mode,
        /// `election.mode`.
        configured: conclave_core::election::Mode,
    },
    /// `conclave init` on a data directory a node has used before (WAL-5): its WAL is there,
    /// or was there (the lock file or a repair's backup remains). A genesis record says the
    /// node never voted, which only a directory no node ever ran in can say.
    #[error(
        "cannot initialise {}: {reason}; `conclave init` is only for a node of a cluster being \
         created. A node that lost its WAL must not be initialised: start it as it is and it \
         abstains until the other voters show which terms are over (docs/wal.md)",
        dir.display()
    )]
    NotNew {
        /// The data directory.
        dir: PathBuf,
        /// What shows an earlier node.
        reason: String,
    },
    /// Reading, writing, syncing or renaming failed.
    #[error("WAL {}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The data directory's lock file could not be created or written (a full disk, a
    /// read-only file system, no permission): named as the data directory's problem, since
    /// the lock file is the first thing a node writes there.
    #[error(
        "data directory {}: cannot write its lock file {}: {source}",
        dir.display(),
        crate::lock::LOCK_FILE_NAME
    )]
    LockFile {
        /// The data directory.
        dir: PathBuf,
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
    /// A record is damaged and valid records follow it (WAL-2). It is not a torn tail: cutting
    /// there would drop durable records, perhaps the vote of the current term, and a node that
    /// forgot its vote could vote twice. The file is left byte for byte as it was.
    #[error(
        "WAL {}: corrupt: record {record} at byte {offset} is damaged ({reason}) and a valid \
         record follows at byte {next_valid}, so this is not a torn tail; refusing to start and \
         leaving the file untouched. `conclave wal inspect {}` shows every record; \
         `conclave wal repair {} --confirm` keeps the valid records and makes the node abstain \
         from voting until the other voters show which terms are over (docs/wal.md)",
        path.display(),
        dir_of(path).display(),
        dir_of(path).display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where the damaged record starts.
        offset: u64,
        /// Its number, counting the file's records from 1.
        record: u64,
        /// What is wrong with it.
        reason: &'static str,
        /// Where the next valid record starts.
        next_valid: u64,
    },
    /// Another process (or another open in this one) holds the data directory (WAL-2: one
    /// process per data directory). Nothing in the directory was read or written.
    #[error(
        "data directory {} is in use by {}; refusing to touch its WAL (another conclave with \
         the same node.data_dir?)",
        dir.display(),
        pid.map_or("another process".to_owned(), |pid| format!("process {pid}"))
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it into the lock file.
        pid: Option<u32>,
    },
    /// The WAL was closed (the node is stopping); nothing more is written.
    #[error("WAL {}: closed", path.display())]
    Closed {
        /// The file.
        path: PathBuf,
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

/// The data directory a WAL file lives in, for the commands an error suggests.
fn dir_of(path: &std::path::Path) -> &std::path::Path {
    path.parent().unwrap_or(path)
}
