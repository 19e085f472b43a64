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
    /// `conclave snapshot restore` into a data directory that holds anything (MEMB-6): a
    /// restored node starts a new cluster from the snapshot alone, so nothing may be there to
    /// mix with it, least of all a WAL whose votes it would forget.
    #[error(
        "cannot restore into {}: it is not empty (it holds {entry}); a snapshot is restored only \
         into an empty or absent data directory, one per node of a new cluster: point \
         node.data_dir at a new directory, or move this one away",
        dir.display()
    )]
    NotEmpty {
        /// The data directory.
        dir: PathBuf,
        /// One of the names found in it.
        entry: String,
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
    /// A log segment or snapshot file is damaged (LOG-2, LOG-4, WAL-2). Like a corrupt WAL,
    /// it is refused and left untouched: the entries it holds may have been acknowledged.
    #[error(
        "log file {}: {damage}; refusing to start and leaving the file untouched. `conclave wal \
         inspect {}` shows the log's segments and records (docs/wal.md, \"Recovery of the \
         log\")",
        path.display(),
        data_dir_of_log_file(path).display()
    )]
    LogDamaged {
        /// The segment or snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        damage: LogDamage,
    },
    /// The log read back has a hole: entries after the snapshot are missing (a segment file
    /// deleted by hand, or a snapshot older than the compaction that followed it).
    #[error(
        "log {}: entries {missing_from}..={missing_to} are missing (neither a snapshot nor a \
         segment holds them); refusing to start",
        dir.display()
    )]
    LogGap {
        /// The log directory.
        dir: PathBuf,
        /// The first missing index.
        missing_from: u64,
        /// The last missing index.
        missing_to: u64,
    },
    /// An append that would leave a hole in the log or is not one contiguous run: a bug in the
    /// caller, refused before anything is written.
    #[error(
        "log {}: refused an append of entries {first}..={last}: {reason} (the next index is \
         {next_index})",
        dir.display()
    )]
    BadAppend {
        /// The log directory.
        dir: PathBuf,
        /// The first entry's index.
        first: u64,
        /// The last entry's index.
        last: u64,
        /// The index an append may start at, at most.
        next_index: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// One entry does not fit a record (1 MiB).
    #[error("log {}: entry {index} holds {bytes} bytes, more than a record holds", dir.display())]
    EntryTooLarge {
        /// The log directory.
        dir: PathBuf,
        /// The entry's index.
        index: u64,
        /// Its data's size.
        bytes: usize,
    },
    /// A snapshot older than the one kept: its entries were already compacted away.
    #[error(
        "log {}: refused a snapshot at index {index}, older than the kept one at {kept}",
        dir.display()
    )]
    SnapshotBehind {
        /// The log directory.
        dir: PathBuf,
        /// The refused snapshot's last index.
        index: u64,
        /// The kept snapshot's last index.
        kept: u64,
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

/// What is wrong with a log segment or a snapshot file (LOG-2, LOG-4, WAL-2): the file is
/// refused as it is, never cut or rewritten, except a torn tail of the newest segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogDamage {
    /// A damaged record with a valid record after it: damage in place, not a torn write.
    #[error(
        "corrupt: record {record} at byte {offset} is damaged ({reason}) and a valid record \
         follows at byte {next_valid}, so this is not a torn tail"
    )]
    Corrupt {
        /// Where the damaged record starts.
        offset: u64,
        /// Its number in the segment, counting from 1.
        record: u64,
        /// What is wrong with it.
        reason: &'static str,
        /// Where the next valid record starts.
        next_valid: u64,
    },
    /// Bad bytes at the end of a segment that is not the newest. A segment is complete and
    /// fsynced before the next one is started, so this is damage, not an interrupted write.
    #[error(
        "damaged end at byte {offset} ({reason}), but a newer segment follows, so this is not \
         a torn tail"
    )]
    TornBeforeNewer {
        /// Where the bad bytes start.
        offset: u64,
        /// What is wrong with the record expected there.
        reason: &'static str,
    },
    /// A record whose checksum matches but which cannot be read as a segment's record.
    #[error(
        "record of kind {kind} at byte {offset} has a valid checksum but cannot be read: {reason}"
    )]
    Unreadable {
        /// Where it starts.
        offset: u64,
        /// Its kind.
        kind: u8,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The segment's header is not one.
    #[error("bad segment header: {0}")]
    BadHeader(&'static str),
    /// The header, the file name and the first record disagree on where the segment starts:
    /// a file renamed or copied in from elsewhere.
    #[error("the segment starts at index {found}, but its {by} says {expected}")]
    WrongStart {
        /// Where the segment really starts (its header, or its first record).
        found: u64,
        /// What said otherwise: "file name" or "header".
        by: &'static str,
        /// What that said.
        expected: u64,
    },
    /// Two segments carry the same sequence number.
    #[error("another segment has the same sequence number {0}")]
    DuplicateSequence(u64),
    /// A snapshot file that is not whole: snapshots are renamed into place only once complete
    /// and fsynced (WAL-3), so this is damage.
    #[error("bad snapshot: {0}")]
    BadSnapshot(&'static str),
}

/// The data directory a WAL file lives in, for the commands an error suggests.
fn dir_of(path: &std::path::Path) -> &std::path::Path {
    path.parent().unwrap_or(path)
}

/// The data directory of a file in its `log` directory, for the command an error suggests.
fn data_dir_of_log_file(path: &std::path::Path) -> &std::path::Path {
    path.parent()
        .and_then(std::path::Path::parent)
        .unwrap_or(path)
}
