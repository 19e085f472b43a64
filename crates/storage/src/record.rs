//! The WAL's on-disk format: what a record is and how it is laid out byte by byte (WAL-1),
//! including the leadership history records of CB-6 and the incarnation of PROTO-2.
//! `docs/wal.md` is the full specification, with recovery and repair; this is its summary,
//! and a test holds the document's worked examples to this encoder.
//!
//! # File
//!
//! ```text
//! offset 0   4 bytes   magic b"CWL1" ("conclave WAL, layout 1")
//! offset 4   records, back to back, until the end of the file
//! ```
//!
//! A file whose first bytes are not the magic is not ours: opening it is an error
//! ([`WalError::ForeignFile`](crate::WalError::ForeignFile)) and the file is left untouched.
//!
//! # Record
//!
//! ```text
//! +0  length  u32 LE   bytes of payload (what follows this 9-byte header), at most 1 MiB
//! +4  kind    u8       what the payload is (table below)
//! +5  crc     u32 LE   CRC-32 (IEEE, as crc32fast computes it) over `kind` then the payload
//! +9  payload `length` bytes
//! ```
//!
//! The length is outside the checksum on purpose: a corrupt length makes the reader checksum the
//! wrong span, which fails like any other corruption, and a length over 1 MiB is refused before
//! anything is allocated for it.
//!
//! # Payloads (all integers little-endian)
//!
//! Two building blocks:
//!
//! ```text
//! id          len u8 (1..=32), then `len` bytes of [A-Za-z0-9._-]      (a PeerId, PROTO-1)
//! option<id>  presence u8: 0 = none (nothing follows), 1 = some (an `id` follows)
//! ```
//!
//! | kind | record | payload |
//! |-----:|--------|---------|
//! | 1 | hard state (RAFT-1) | `term u64`, `vote option<id>`, `manual_override option<id>` |
//! | 2 | incarnation (PROTO-2) | `incarnation u64` |
//! | 3 | leader change (CB-6) | `term u64`, `leader option<id>`, `cause u8`, `at_unix_ms u64` |
//! | 4 | seal: the end of a group commit (WAL-2) | empty |
//! | 5 | amnesia marker (WAL-2): votes may be missing before it; abstain until a hard state follows | `at_unix_ms u64` |
//! | 6 | automatic election switch (RAFT-8) | `enabled u8` (0 or 1) |
//! | 7 | election mode (issue 9): the mode the file's election state belongs to | `mode u8`: 0 raft, 1 gossip, 2 priority, 3 static |
//! | 10 | log entries (LOG-2), in log segments only | see below |
//! | 11 | *reserved*: snapshot marker (LOG-4) | not written: a snapshot is a file of its own |
//!
//! Every group commit ends with a seal, and so do a compacted and a repaired file. A record
//! damaged in place is therefore always followed by a valid record (at least its batch's seal),
//! which is how recovery tells corruption (refuse to start) from a torn tail (cut it off);
//! see [`crate::examine`]. Files written before seals existed still open.
//!
//! `cause` is the position of the cause in [`LeaderChangeCause::ALL`], which only ever grows
//! at the end, so an index written by any version means the same cause forever.
//!
//! A payload must be consumed exactly: a layout never grows in place. A new layout gets a new
//! kind, and a version that does not know a kind skips its records with a warning (their
//! checksum still proves they were written whole), so an older binary can read a newer file.
//!
//! # Log segments
//!
//! The replicated log's entries live in segment files of their own (`log/<first index>.seg`),
//! framed exactly like the records above, after a 16-byte header:
//!
//! ```text
//! offset 0   4 bytes   magic b"CLS1" ("conclave log segment, layout 1")
//! offset 4   u64 LE    the index of the first entry the segment was started with
//! offset 12  u32 LE    CRC-32 of the 12 bytes before it
//! offset 16  records: kind 10 (entries) and kind 4 (seal) only
//! ```
//!
//! A kind-10 payload is one contiguous run of entries, and replaces every entry kept at or
//! after its first index (LOG-2: a follower's conflicting suffix is dropped by the very record
//! that brings its replacement, so the two are durable, or lost, together):
//!
//! ```text
//! first_index u64      index of the first entry (every kept entry from here on is dropped)
//! count       u32      entries that follow, at least 1
//! count times: term u64, kind u8 (0 noop, 1 command), len u32, then `len` bytes of data
//! ```
//!
//! A segment's records of any other kind are refused, not skipped: a skipped entry would leave
//! a hole in the log.
//!
//! # Worked example
//!
//! `Incarnation(1)` is the 17 bytes
//! `08 00 00 00 | 02 | crc32(02 01 00 00 00 00 00 00 00) as u32 LE | 01 00 00 00 00 00 00 00`.

use conclave_core::election::{HardState, LeaderChangeCause, Mode};
use conclave_protocol::{EntryKind, LogEntry, PeerId};

/// The first four bytes of every WAL file.
pub(crate) const MAGIC: [u8; 4] = *b"CWL1";
/// Bytes before a record's payload: length, kind, crc.
pub(crate) const RECORD_HEADER_LEN: usize = 9;
/// The largest payload a reader accepts; anything longer is a corrupt length field. Real
/// records are under a hundred bytes; the headroom is for the reserved log-entry kind.
pub(crate) const MAX_PAYLOAD_LEN: u32 = 1 << 20;

const KIND_HARD_STATE: u8 = 1;
const KIND_INCARNATION: u8 = 2;
const KIND_LEADER_CHANGE: u8 = 3;
/// Ends every group commit, the compacted file and the repaired file (see `docs/wal.md`).
pub(crate) const KIND_SEAL: u8 = 4;
const KIND_AMNESIA: u8 = 5;
const KIND_AUTO_ELECTION: u8 = 6;
const KIND_MODE: u8 = 7;
const KIND_GENESIS: u8 = 8;
/// The replicated log's entries (LOG-2), in log segments only; skipped in `conclave.wal`.
pub(crate) const KIND_LOG_ENTRIES: u8 = 10;
/// Reserved for a snapshot marker (LOG-4); not written, since a snapshot is a file of its own
/// whose header carries its position. Skipped by this version.
pub(crate) const KIND_SNAPSHOT_MARKER: u8 = 11;

/// The first four bytes of every log segment.
pub(crate) const SEGMENT_MAGIC: [u8; 4] = *b"CLS1";
/// A segment's header: magic, first index, checksum.
pub(crate) const SEGMENT_HEADER_LEN: usize = 16;
/// Bytes of an entries payload before its first entry: first index and count.
const ENTRIES_PREFIX_LEN: usize = 12;
/// Bytes of one entry before its data: term, kind, data length.
const ENTRY_OVERHEAD: usize = 13;

/// One entry of the leadership history (CB-6): who led from when, and why the leader changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryRecord {
    /// The term of the change.
    pub term: u64,
    /// The new leader; `None` when the node lost its leader.
    pub leader: Option<PeerId>,
    /// Why the leader changed.
    pub cause: LeaderChangeCause,
    /// When, in milliseconds since the Unix epoch (wall clock: it is shown to people).
    pub at_unix_ms: u64,
}

/// What the WAL stores (WAL-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalRecord {
    /// The election state; the last one in the file is the node's state after a restart.
    HardState(HardState),
    /// The node's incarnation (PROTO-2); the last one wins.
    Incarnation(u64),
    /// A leader change, appended to the leadership history (CB-6).
    LeaderChange(HistoryRecord),
    /// Votes may be missing before this point (WAL-2): written by `conclave wal repair` after
    /// the records it kept, and after a hard state persisted at the end of an abstention, whose
    /// term the node may have voted in before it lost its WAL. The node abstains at its next
    /// start, as if its WAL had been wiped, until a hard state is recorded after this marker.
    Amnesia {
        /// When it was written, in milliseconds since the Unix epoch.
        at_unix_ms: u64,
    },
    /// The operator's automatic-election switch (RAFT-8 `EnableAutoLeaderElection`); the last
    /// one wins over `election.auto` at the next start.
    AutoElection(bool),
    /// The election mode the file's terms, votes and history belong to (`election.mode`),
    /// written at the first start in that mode. A node of another mode refuses the file. A
    /// file without it was written before modes were recorded: raft's.
    Mode(Mode),
    /// The file was created for a member of a new cluster (WAL-5: `conclave init`, or the
    /// first start with `cluster.initial_state = "new"` in a directory no node used before):
    /// the node had voted in no term before it. It counts as a hard state of term 0 with no
    /// vote, so the node does not abstain.
    Genesis {
        /// When it was written, in milliseconds since the Unix epoch.
        at_unix_ms: u64,
    },
}

impl WalRecord {
    fn kind(&self) -> u8 {
        match self {
            WalRecord::HardState(_) => KIND_HARD_STATE,
            WalRecord::Incarnation(_) => KIND_INCARNATION,
            WalRecord::LeaderChange(_) => KIND_LEADER_CHANGE,
            WalRecord::Amnesia { .. } => KIND_AMNESIA,
            WalRecord::AutoElection(_) => KIND_AUTO_ELECTION,
            WalRecord::Mode(_) => KIND_MODE,
            WalRecord::Genesis { .. } => KIND_GENESIS,
        }
    }

    /// Appends the record, header included, to `out`.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        // Header placeholder; length and crc are known once the payload is written.
        out.extend_from_slice(&[0; RECORD_HEADER_LEN]);
        match self {
            WalRecord::HardState(state) => {
                put_u64(out, state.term);
                put_peer(out, state.vote);
                put_peer(out, state.manual_override);
            }
            WalRecord::Incarnation(incarnation) => put_u64(out, *incarnation),
            WalRecord::LeaderChange(change) => {
                put_u64(out, change.term);
                put_peer(out, change.leader);
                out.push(cause_index(change.cause));
                put_u64(out, change.at_unix_ms);
            }
            WalRecord::Amnesia { at_unix_ms } => put_u64(out, *at_unix_ms),
            WalRecord::AutoElection(enabled) => out.push(u8::from(*enabled)),
            WalRecord::Mode(mode) => out.push(mode_index(*mode)),
            WalRecord::Genesis { at_unix_ms } => put_u64(out, *at_unix_ms),
        }
        finish_header(out, start, self.kind());
    }

    /// The record with its header, as it is written to the file.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}

/// Appends a seal record (kind 4, empty payload): the end of one group commit. A damaged record
/// is then always followed by a valid seal, which tells corruption apart from a torn tail.
pub(crate) fn encode_seal(out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_HEADER_LEN]);
    finish_header(out, start, KIND_SEAL);
}

/// A log segment's header for a segment whose first entry is `first_index`.
pub(crate) fn segment_header(first_index: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut header = [0; SEGMENT_HEADER_LEN];
    header[..4].copy_from_slice(&SEGMENT_MAGIC);
    header[4..12].copy_from_slice(&first_index.to_le_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The first index a segment header names, or why the bytes are not one.
pub(crate) fn parse_segment_header(bytes: &[u8]) -> Result<u64, &'static str> {
    let Some(header) = bytes.first_chunk::<SEGMENT_HEADER_LEN>() else {
        return Err("shorter than a segment header");
    };
    if header[..4] != SEGMENT_MAGIC {
        return Err("not a conclave log segment (bad magic)");
    }
    let mut crc = [0; 4];
    crc.copy_from_slice(&header[12..]);
    if crc32fast::hash(&header[..12]) != u32::from_le_bytes(crc) {
        return Err("segment header checksum mismatch");
    }
    let mut index = [0; 8];
    index.copy_from_slice(&header[4..12]);
    Ok(u64::from_le_bytes(index))
}

/// Bytes `entry` takes in an entries payload.
pub(crate) fn encoded_entry_len(entry: &LogEntry) -> usize {
    ENTRY_OVERHEAD + entry.data.len()
}

/// The largest run of `entries`, from the first, that fits one entries record. Zero only when
/// the first entry alone is too large for a record.
pub(crate) fn entries_fitting_one_record(entries: &[LogEntry]) -> usize {
    let mut size = ENTRIES_PREFIX_LEN;
    entries
        .iter()
        .take_while(|entry| {
            size += encoded_entry_len(entry);
            size <= MAX_PAYLOAD_LEN as usize
        })
        .count()
}

/// Appends one entries record (kind 10) holding `entries`, which are contiguous, at least one,
/// and fit one record ([`entries_fitting_one_record`]).
pub(crate) fn encode_entries(out: &mut Vec<u8>, entries: &[LogEntry]) {
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_HEADER_LEN]);
    put_u64(out, entries.first().map_or(0, |entry| entry.index));
    // Cannot truncate: a record of at most 1 MiB holds fewer than 2^32 entries.
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for entry in entries {
        put_u64(out, entry.term);
        out.push(u8::from(entry.kind));
        // Cannot truncate: the record fits 1 MiB.
        out.extend_from_slice(&(entry.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&entry.data);
    }
    finish_header(out, start, KIND_LOG_ENTRIES);
}

/// What a valid record of a log segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentContent {
    /// Contiguous entries; every entry kept at or after the first one's index is dropped
    /// before they are added (LOG-2).
    Entries(Vec<LogEntry>),
    /// The seal that ends a group commit.
    Seal,
    /// The checksum matches but the payload does not follow the kind's layout, or the kind is
    /// not one a segment holds.
    Unreadable(&'static str),
}

impl crate::examine::RecordMeaning for SegmentContent {
    fn decode(kind: u8, payload: &[u8]) -> Result<Self, &'static str> {
        match kind {
            KIND_SEAL if payload.is_empty() => Ok(SegmentContent::Seal),
            KIND_SEAL => Err("trailing bytes after the payload"),
            KIND_LOG_ENTRIES => decode_entries(payload).map(SegmentContent::Entries),
            _ => Err("record kind that a log segment does not hold"),
        }
    }

    fn unreadable(reason: &'static str) -> Self {
        SegmentContent::Unreadable(reason)
    }
}

fn decode_entries(payload: &[u8]) -> Result<Vec<LogEntry>, &'static str> {
    let mut input = Cursor { rest: payload };
    let first_index = input.u64()?;
    let count = input.u32()?;
    if first_index == 0 {
        return Err("log entry index 0");
    }
    if count == 0 {
        return Err("entries record without entries");
    }
    if first_index.checked_add(u64::from(count) - 1).is_none() {
        return Err("log entry index overflows");
    }
    // Each entry takes at least ENTRY_OVERHEAD bytes, which bounds the allocation by the
    // payload's size whatever the count claims.
    let mut entries = Vec::with_capacity((count as usize).min(payload.len() / ENTRY_OVERHEAD));
    for index in (first_index..).take(count as usize) {
        let term = input.u64()?;
        let kind = EntryKind::try_from(input.u8()?).map_err(|_| "log entry kind unknown")?;
        let len = input.u32()?;
        let data = input.take(len as usize)?.to_vec();
        entries.push(LogEntry {
            index,
            term,
            kind,
            data,
        });
    }
    input.finish()?;
    Ok(entries)
}

/// Fills in the header of the record that starts at `start` and runs to the end of `out`.
fn finish_header(out: &mut [u8], start: usize, kind: u8) {
    let payload = &out[start + RECORD_HEADER_LEN..];
    // Cannot truncate: every payload is at most MAX_PAYLOAD_LEN bytes (entries records are cut
    // to fit; the others are under a hundred bytes).
    let length = payload.len() as u32;
    let crc = checksum(kind, payload);
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4] = kind;
    out[start + 5..start + RECORD_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// The header of one record, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    /// Payload bytes that follow the header.
    pub(crate) length: u32,
    /// The record kind.
    pub(crate) kind: u8,
    /// The stored checksum.
    pub(crate) crc: u32,
}

impl RecordHeader {
    pub(crate) fn parse(bytes: &[u8; RECORD_HEADER_LEN]) -> Self {
        let [l0, l1, l2, l3, kind, c0, c1, c2, c3] = *bytes;
        Self {
            length: u32::from_le_bytes([l0, l1, l2, l3]),
            kind,
            crc: u32::from_le_bytes([c0, c1, c2, c3]),
        }
    }
}

/// CRC-32 over the kind byte then the payload: covering the kind means a flipped kind cannot
/// make a record be read as another kind.
pub(crate) fn checksum(kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

/// The meaning of one record whose checksum matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// A record this version understands.
    Record(WalRecord),
    /// The seal that ends a group commit.
    Seal,
    /// A kind this version does not know (a newer writer, or a reserved kind): skipped.
    UnknownKind(u8),
    /// A history record naming a cause added by a newer version: skipped, because the history
    /// is informational and refusing to start over it would be worse than losing the line.
    UnknownCause(u8),
}

/// Decodes the payload of a record whose checksum matched. An error means the bytes were
/// written whole but do not follow the layout of their kind: a bug or a foreign writer, not a
/// torn write, so the caller must not silently drop it.
pub(crate) fn decode(kind: u8, payload: &[u8]) -> Result<Decoded, &'static str> {
    let mut input = Cursor { rest: payload };
    let decoded = match kind {
        KIND_HARD_STATE => Decoded::Record(WalRecord::HardState(HardState {
            term: input.u64()?,
            vote: input.peer()?,
            manual_override: input.peer()?,
        })),
        KIND_INCARNATION => Decoded::Record(WalRecord::Incarnation(input.u64()?)),
        KIND_SEAL => Decoded::Seal,
        KIND_AMNESIA => Decoded::Record(WalRecord::Amnesia {
            at_unix_ms: input.u64()?,
        }),
        KIND_AUTO_ELECTION => match input.u8()? {
            0 => Decoded::Record(WalRecord::AutoElection(false)),
            1 => Decoded::Record(WalRecord::AutoElection(true)),
            _ => return Err("auto-election flag is neither 0 nor 1"),
        },
        KIND_GENESIS => Decoded::Record(WalRecord::Genesis {
            at_unix_ms: input.u64()?,
        }),
        KIND_MODE => match Mode::ALL.get(usize::from(input.u8()?)) {
            Some(&mode) => Decoded::Record(WalRecord::Mode(mode)),
            None => return Err("election mode unknown to this version"),
        },
        KIND_LEADER_CHANGE => {
            let term = input.u64()?;
            let leader = input.peer()?;
            let index = input.u8()?;
            let at_unix_ms = input.u64()?;
            match LeaderChangeCause::ALL.get(usize::from(index)) {
                Some(&cause) => Decoded::Record(WalRecord::LeaderChange(HistoryRecord {
                    term,
                    leader,
                    cause,
                    at_unix_ms,
                })),
                None => Decoded::UnknownCause(index),
            }
        }
        other => return Ok(Decoded::UnknownKind(other)),
    };
    input.finish()?;
    Ok(decoded)
}

fn cause_index(cause: LeaderChangeCause) -> u8 {
    // Every cause is in ALL by construction (a test checks it); ALL is far below 256 entries.
    LeaderChangeCause::ALL
        .iter()
        .position(|&candidate| candidate == cause)
        .map_or(u8::MAX, |index| index as u8)
}

fn mode_index(mode: Mode) -> u8 {
    // Every mode is in ALL by construction; ALL only grows at its end, and is tiny.
    Mode::ALL
        .iter()
        .position(|&candidate| candidate == mode)
        .map_or(u8::MAX, |index| index as u8)
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_peer(out: &mut Vec<u8>, peer: Option<PeerId>) {
    match peer {
        None => out.push(0),
        Some(peer) => {
            let bytes = peer.as_bytes();
            out.push(1);
            // Cannot truncate: a PeerId is at most MAX_ID_LEN (32) bytes.
            out.push(bytes.len() as u8);
            out.extend_from_slice(bytes);
        }
    }
}

/// Reads a payload front to back; every read is checked, so any byte string is handled.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], &'static str> {
        if self.rest.len() < count {
            return Err("payload ends early");
        }
        let (head, tail) = self.rest.split_at(count);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        let bytes = self.take(1)?;
        Ok(bytes[0])
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        let bytes = self.take(4)?;
        let mut array = [0; 4];
        array.copy_from_slice(bytes);
        Ok(u32::from_le_bytes(array))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        let bytes = self.take(8)?;
        let mut array = [0; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(array))
    }

    fn peer(&mut self) -> Result<Option<PeerId>, &'static str> {
        match self.u8()? {
            0 => Ok(None),
            1 => {
                let len = self.u8()?;
                let bytes = self.take(usize::from(len))?;
                let text = std::str::from_utf8(bytes).map_err(|_| "peer id is not UTF-8")?;
                PeerId::new(text)
                    .map(Some)
                    .map_err(|_| "peer id is not a valid id")
            }
            _ => Err("presence byte is neither 0 nor 1"),
        }
    }

    fn finish(self) -> Result<(), &'static str> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err("trailing bytes after the payload")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits an encoded record into its header and payload, checking the framing.
    fn reread(bytes: &[u8]) -> Decoded {
        let header: [u8; RECORD_HEADER_LEN] = bytes[..RECORD_HEADER_LEN].try_into().unwrap();
        let header = RecordHeader::parse(&header);
        let payload = &bytes[RECORD_HEADER_LEN..];
        assert_eq!(header.length as usize, payload.len());
        assert_eq!(header.crc, checksum(header.kind, payload));
        decode(header.kind, payload).unwrap()
    }

    fn every_record_kind() -> Vec<WalRecord> {
        let longest = PeerId::new(&"z".repeat(32)).expect("32 bytes is the longest valid id");
        let mut records = vec![
            WalRecord::HardState(HardState::default()),
            WalRecord::HardState(HardState {
                term: u64::MAX,
                vote: Some(PeerId::from_static("gw-a")),
                manual_override: Some(longest),
            }),
            WalRecord::HardState(HardState {
                term: 7,
                vote: None,
                manual_override: Some(PeerId::from_static("x")),
            }),
            WalRecord::Incarnation(0),
            WalRecord::Incarnation(u64::MAX),
            WalRecord::Genesis { at_unix_ms: 0 },
            WalRecord::Genesis {
                at_unix_ms: 1_700_000_000_000,
            },
            WalRecord::Amnesia { at_unix_ms: 0 },
            WalRecord::Amnesia {
                at_unix_ms: u64::MAX,
            },
            WalRecord::AutoElection(false),
            WalRecord::AutoElection(true),
        ];
        records.extend(Mode::ALL.iter().map(|&mode| WalRecord::Mode(mode)));
        for (n, &cause) in LeaderChangeCause::ALL.iter().enumerate() {
            records.push(WalRecord::LeaderChange(HistoryRecord {
                term: n as u64,
                leader: (n % 2 == 0).then(|| PeerId::from_static("node_1.site-2")),
                cause,
                at_unix_ms: 1_700_000_000_000 + n as u64,
            }));
        }
        records
    }

    /// WAL-1, CB-6, PROTO-2: every record kind, every cause and both option states survive an
    /// encode/decode round trip with their framing intact.
    #[test]
    fn every_record_kind_round_trips() {
        for record in every_record_kind() {
            assert_eq!(reread(&record.encode()), Decoded::Record(record));
        }
    }

    /// WAL-1: the layout is the documented one, byte for byte.
    #[test]
    fn layout_matches_the_module_docs() {
        let bytes = WalRecord::Incarnation(1).encode();
        let payload = [1, 0, 0, 0, 0, 0, 0, 0];
        let mut expected = vec![8, 0, 0, 0, 2];
        expected.extend_from_slice(&checksum(2, &payload).to_le_bytes());
        expected.extend_from_slice(&payload);
        assert_eq!(bytes, expected);

        let state = WalRecord::HardState(HardState {
            term: 5,
            vote: Some(PeerId::from_static("ab")),
            manual_override: None,
        });
        let bytes = state.encode();
        assert_eq!(bytes[4], 1);
        assert_eq!(&bytes[9..], &[5, 0, 0, 0, 0, 0, 0, 0, 1, 2, b'a', b'b', 0]);

        let change = WalRecord::LeaderChange(HistoryRecord {
            term: 3,
            leader: None,
            cause: LeaderChangeCause::SetLeader,
            at_unix_ms: 258,
        });
        let bytes = change.encode();
        assert_eq!(bytes[4], 3);
        assert_eq!(
            &bytes[9..],
            &[3, 0, 0, 0, 0, 0, 0, 0, 0, 4, 2, 1, 0, 0, 0, 0, 0, 0]
        );
    }

    /// Issue 9: the mode record is kind 7 with one byte, the mode's documented number; a
    /// number no mode has is a record that cannot be read, not a mode.
    #[test]
    fn mode_record_layout() {
        for (byte, mode) in [
            (0, Mode::Raft),
            (1, Mode::Gossip),
            (2, Mode::Priority),
            (3, Mode::Static),
        ] {
            let bytes = WalRecord::Mode(mode).encode();
            assert_eq!(&bytes[..5], &[1, 0, 0, 0, 7]);
            assert_eq!(&bytes[9..], &[byte]);
        }
        assert_eq!(
            decode(7, &[4]),
            Err("election mode unknown to this version")
        );
        assert_eq!(decode(7, &[]), Err("payload ends early"));
    }

    /// WAL-5: the genesis record is kind 8 with the Unix time in milliseconds, like the
    /// amnesia marker's payload.
    #[test]
    fn genesis_record_layout() {
        let bytes = WalRecord::Genesis { at_unix_ms: 258 }.encode();
        assert_eq!(&bytes[..5], &[8, 0, 0, 0, 8]);
        assert_eq!(&bytes[9..], &[2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode(8, &[1, 2, 3]), Err("payload ends early"));
    }

    /// WAL-2: the seal is the 9 bytes of an empty kind-4 record, and decodes as a seal; the
    /// amnesia marker and the automatic-election switch follow their documented layouts.
    #[test]
    fn seal_repair_marker_and_switch_layouts() {
        let mut seal = Vec::new();
        encode_seal(&mut seal);
        let mut expected = vec![0, 0, 0, 0, 4];
        expected.extend_from_slice(&checksum(4, &[]).to_le_bytes());
        assert_eq!(seal, expected);
        assert_eq!(reread(&seal), Decoded::Seal);

        let marker = WalRecord::Amnesia { at_unix_ms: 258 }.encode();
        assert_eq!(marker[4], 5);
        assert_eq!(&marker[9..], &[2, 1, 0, 0, 0, 0, 0, 0]);
        let switch = WalRecord::AutoElection(false).encode();
        assert_eq!(switch[4], 6);
        assert_eq!(&switch[9..], &[0]);
    }

    /// CB-6: causes are stored by their position in `LeaderChangeCause::ALL`.
    #[test]
    fn causes_are_stored_by_index() {
        for (index, &cause) in LeaderChangeCause::ALL.iter().enumerate() {
            assert_eq!(usize::from(cause_index(cause)), index);
        }
    }

    /// WAL-1: kinds this version does not know, the reserved log kinds among them, decode as
    /// "skip", not as an error; a cause index from a newer version skips the history line.
    #[test]
    fn unknown_kinds_and_causes_are_skipped() {
        for kind in [0, 9, KIND_LOG_ENTRIES, KIND_SNAPSHOT_MARKER, 255] {
            assert_eq!(decode(kind, b"whatever"), Ok(Decoded::UnknownKind(kind)));
        }
        let mut payload = vec![0; 8];
        payload.push(0);
        payload.push(200);
        payload.extend_from_slice(&[0; 8]);
        assert_eq!(
            decode(KIND_LEADER_CHANGE, &payload),
            Ok(Decoded::UnknownCause(200))
        );
    }

    /// WAL-2: a checksummed payload that does not follow its layout is an error with a reason,
    /// never a panic.
    #[test]
    fn malformed_payloads_are_errors() {
        let cases: &[(u8, &[u8])] = &[
            (KIND_INCARNATION, &[1, 2, 3]),
            (KIND_INCARNATION, &[0; 9]),
            (KIND_HARD_STATE, &[0; 8]),
            (KIND_HARD_STATE, &[0, 0, 0, 0, 0, 0, 0, 0, 2, 0]),
            (KIND_HARD_STATE, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]),
            (KIND_HARD_STATE, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b' ', 0]),
            (KIND_HARD_STATE, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0xff, 0]),
            (KIND_HARD_STATE, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 5, b'a', 0]),
            (KIND_SEAL, &[0]),
            (KIND_AMNESIA, &[1, 2, 3]),
            (KIND_AUTO_ELECTION, &[2]),
            (KIND_AUTO_ELECTION, &[]),
            (KIND_AUTO_ELECTION, &[1, 0]),
        ];
        for (kind, payload) in cases {
            assert!(decode(*kind, payload).is_err(), "{kind} {payload:?}");
        }
    }
}
