//! Reading a WAL's bytes without changing them (WAL-2): every record with its offset, every
//! damaged span, and the verdict that recovery, `conclave wal inspect` and `conclave wal repair`
//! act on.
//!
//! Records are read one after the other from the magic on. At the first place that is not a
//! valid record (too short, a length over 1 MiB or past the end of the file, a checksum
//! mismatch), the reader looks for **any** valid record further on: a position where a header
//! with a sane length that fits the file is followed by a payload whose checksum matches.
//!
//! - Nothing valid follows: the bad bytes are a **torn tail**, the remains of a write that a
//!   crash interrupted. Nothing after them was ever acknowledged, so recovery cuts them off.
//!   Zeros and garbage after the last record are torn tails too: the checksum of an all-zero
//!   header never matches (`crc32([0]) = 0xd202ef8d`), and random bytes match with a
//!   probability of 2^-32 per position.
//! - A valid record follows: the file was damaged in place (a flipped bit, a bad sector).
//!   Cutting there would drop durable records, among them perhaps the vote of the current
//!   term, so the file is **corrupt**: the node refuses to start and the file stays as it is.
//!   Every group commit ends with a seal record, so even damage inside the newest record is
//!   followed by a valid record (its seal), while a damaged seal is a tail that can be cut
//!   without losing state.
//!
//! A record whose checksum matches but whose payload does not follow its kind's layout was
//! written whole by something else; it is **unreadable**, and the node refuses it too.
//!
//! After damage the reader carries on from the next valid record, so that `inspect` can show
//! everything that is still readable and `repair` can keep it.
//!
//! The same judgement applies to `conclave.wal` and to every log segment (LOG-2): only what a
//! record means differs, which [`RecordMeaning`] says for each kind of file.

use crate::record::{
    Decoded, MAGIC, MAX_PAYLOAD_LEN, RECORD_HEADER_LEN, RecordHeader, WalRecord, checksum, decode,
};

/// How the records of one kind of file are read once their checksum matched: the meaning of a
/// payload, or why it has none.
pub(crate) trait RecordMeaning: Sized {
    /// Decodes a record whose checksum matched. An error means the bytes were written whole
    /// but do not follow their kind's layout.
    fn decode(kind: u8, payload: &[u8]) -> Result<Self, &'static str>;
    /// What an undecodable record is listed as.
    fn unreadable(reason: &'static str) -> Self;
}

/// What a valid record of `conclave.wal` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordContent {
    /// A record this version reads.
    Record(WalRecord),
    /// The seal that ends a group commit.
    Seal,
    /// A kind this version does not know (a newer version's, or a reserved kind): skipped.
    UnknownKind,
    /// A leadership history record with a cause this version does not know: skipped.
    UnknownCause(u8),
    /// The checksum matches but the payload does not follow the kind's layout.
    Unreadable(&'static str),
}

impl RecordMeaning for RecordContent {
    fn decode(kind: u8, payload: &[u8]) -> Result<Self, &'static str> {
        Ok(match decode(kind, payload)? {
            Decoded::Record(record) => RecordContent::Record(record),
            Decoded::Seal => RecordContent::Seal,
            Decoded::UnknownKind(_) => RecordContent::UnknownKind,
            Decoded::UnknownCause(index) => RecordContent::UnknownCause(index),
        })
    }

    fn unreadable(reason: &'static str) -> Self {
        RecordContent::Unreadable(reason)
    }
}

/// One valid record (its checksum matches), where it is and what it holds: a record of
/// `conclave.wal` ([`RecordContent`]) or of a log segment ([`SegmentContent`](crate::SegmentContent)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExaminedRecord<C = RecordContent> {
    /// Byte offset of its header in the file.
    pub offset: u64,
    /// Its number in the file, counting from 1, seals included.
    pub number: u64,
    /// Payload bytes.
    pub length: u32,
    /// Its kind byte.
    pub kind: u8,
    /// What it holds.
    pub content: C,
    /// Whether it lies after damage (found by looking past it). Recovery never uses those.
    pub after_damage: bool,
}

impl<C> ExaminedRecord<C> {
    /// Bytes the record takes in the file, header included.
    pub fn size(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.length)
    }
}

/// A span of the file that is not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamagedSpan {
    /// Where it starts.
    pub offset: u64,
    /// The number the record expected there has, counting from 1: the damaged span counts as
    /// one record, so the records after it keep their numbers.
    pub record: u64,
    /// Where the next valid record starts, or the end of the file.
    pub end: u64,
    /// Why the record expected at `offset` is not valid.
    pub reason: &'static str,
}

/// The verdict on a WAL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte after the magic is a valid record.
    Clean,
    /// The file ends with bytes that are not a valid record and nothing valid follows them: a
    /// write interrupted by a crash. Recovery cuts them off.
    TornTail {
        /// Where the bad bytes start.
        offset: u64,
        /// How many there are.
        bytes: u64,
        /// What is wrong with the record expected there.
        reason: &'static str,
    },
    /// A record is damaged and valid records follow it: the node refuses to start.
    Corrupt {
        /// Where the damaged record starts.
        offset: u64,
        /// Its number, counting records from 1.
        record: u64,
        /// What is wrong with it.
        reason: &'static str,
        /// Where the next valid record starts.
        next_valid: u64,
    },
    /// A record's checksum matches but its payload cannot be read: the node refuses to start.
    Unreadable {
        /// Where it starts.
        offset: u64,
        /// Its number, counting records from 1.
        record: u64,
        /// Its kind.
        kind: u8,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl Verdict {
    /// Whether a node can start from the file (after cutting a torn tail).
    pub fn allows_start(&self) -> bool {
        matches!(self, Verdict::Clean | Verdict::TornTail { .. })
    }
}

/// Everything found in a WAL file's (or a log segment's) bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Examination<C = RecordContent> {
    /// The file's size in bytes.
    pub len: u64,
    /// Every valid record, in file order, including those after damage.
    pub records: Vec<ExaminedRecord<C>>,
    /// Every span that is not a valid record, in file order.
    pub damage: Vec<DamagedSpan>,
    /// The first problem in file order decides.
    pub verdict: Verdict,
}

impl<C> Examination<C> {
    /// The records recovery uses: those before the first problem.
    pub fn trusted(&self) -> impl Iterator<Item = &ExaminedRecord<C>> {
        let limit = match self.verdict {
            Verdict::Clean => u64::MAX,
            Verdict::TornTail { offset, .. } | Verdict::Corrupt { offset, .. } => offset,
            Verdict::Unreadable { offset, .. } => offset,
        };
        self.records
            .iter()
            .filter(move |record| record.offset < limit)
    }

    /// Where the trusted records end: the file's length once a torn tail is cut off.
    pub fn trusted_end(&self) -> u64 {
        match self.verdict {
            Verdict::Clean => self.len,
            Verdict::TornTail { offset, .. } | Verdict::Corrupt { offset, .. } => offset,
            Verdict::Unreadable { offset, .. } => offset,
        }
    }
}

/// Examines `bytes`, a whole WAL file that starts with the magic (the caller checks it).
pub(crate) fn examine(bytes: &[u8]) -> Examination {
    examine_from(bytes, MAGIC.len())
}

/// Examines the records of `bytes` from `start` on, the file's header before it being the
/// caller's to check.
pub(crate) fn examine_from<C: RecordMeaning>(bytes: &[u8], start: usize) -> Examination<C> {
    let len = bytes.len();
    let mut records = Vec::new();
    let mut damage = Vec::new();
    let mut verdict = None;
    let mut number = 0u64;
    let mut position = start.min(len);
    let mut after_damage = false;
    while position < len {
        match frame_at(bytes, position) {
            Ok((header, payload)) => {
                number += 1;
                let content = match C::decode(header.kind, payload) {
                    Ok(content) => content,
                    Err(reason) => {
                        verdict.get_or_insert(Verdict::Unreadable {
                            offset: position as u64,
                            record: number,
                            kind: header.kind,
                            reason,
                        });
                        C::unreadable(reason)
                    }
                };
                records.push(ExaminedRecord {
                    offset: position as u64,
                    number,
                    length: header.length,
                    kind: header.kind,
                    content,
                    after_damage,
                });
                position += RECORD_HEADER_LEN + payload.len();
            }
            Err(reason) => {
                number += 1;
                let next = (position + 1..len).find(|&at| frame_at(bytes, at).is_ok());
                let end = next.unwrap_or(len);
                damage.push(DamagedSpan {
                    offset: position as u64,
                    record: number,
                    end: end as u64,
                    reason,
                });
                verdict.get_or_insert(match next {
                    Some(next) => Verdict::Corrupt {
                        offset: position as u64,
                        record: number,
                        reason,
                        next_valid: next as u64,
                    },
                    None => Verdict::TornTail {
                        offset: position as u64,
                        bytes: (len - position) as u64,
                        reason,
                    },
                });
                after_damage = true;
                position = end;
            }
        }
    }
    Examination {
        len: len as u64,
        records,
        damage,
        verdict: verdict.unwrap_or(Verdict::Clean),
    }
}

/// The valid record at `position`, or why there is none: a header that fits, a sane length
/// whose payload fits the file, and a matching checksum.
fn frame_at(bytes: &[u8], position: usize) -> Result<(RecordHeader, &[u8]), &'static str> {
    let rest = &bytes[position..];
    let Some(header) = rest.first_chunk::<RECORD_HEADER_LEN>() else {
        return Err("short record header");
    };
    let header = RecordHeader::parse(header);
    if header.length > MAX_PAYLOAD_LEN {
        return Err("record length over 1 MiB");
    }
    // Bounded by MAX_PAYLOAD_LEN, so this cannot overflow.
    let end = RECORD_HEADER_LEN + header.length as usize;
    let Some(payload) = rest.get(RECORD_HEADER_LEN..end) else {
        return Err("record runs past the end of the file");
    };
    if checksum(header.kind, payload) != header.crc {
        return Err("checksum mismatch");
    }
    Ok((header, payload))
}

#[cfg(test)]
mod tests {
    use conclave_core::election::HardState;
    use conclave_protocol::PeerId;

    use super::*;
    use crate::record::encode_seal;

    fn file(records: &[&[WalRecord]]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        for batch in records {
            for record in *batch {
                record.encode_into(&mut bytes);
            }
            encode_seal(&mut bytes);
        }
        bytes
    }

    fn state(term: u64, vote: &str) -> WalRecord {
        WalRecord::HardState(HardState {
            term,
            vote: Some(PeerId::new(vote).unwrap()),
            manual_override: None,
        })
    }

    /// WAL-2: the checksum of an all-zero header never matches, which is what lets a
    /// zero-filled tail be told from a record.
    #[test]
    fn wal2_an_all_zero_header_never_has_a_matching_checksum() {
        assert_ne!(checksum(0, &[]), 0);
        assert_eq!(checksum(0, &[]), 0xd202_ef8d);
        let mut bytes = file(&[&[state(1, "a")]]);
        bytes.extend_from_slice(&[0; 64]);
        assert!(matches!(
            examine(&bytes).verdict,
            Verdict::TornTail { bytes: 64, .. }
        ));
    }

    /// WAL-2: a clean file lists every record with its offset and number, seals included.
    #[test]
    fn wal2_clean_file_lists_every_record() {
        let bytes = file(&[&[WalRecord::Incarnation(1)], &[state(2, "b")]]);
        let examination = examine(&bytes);
        assert_eq!(examination.verdict, Verdict::Clean);
        assert!(examination.damage.is_empty());
        let found: Vec<(u64, u64, &RecordContent)> = examination
            .records
            .iter()
            .map(|r| (r.offset, r.number, &r.content))
            .collect();
        assert_eq!(
            found,
            vec![
                (4, 1, &RecordContent::Record(WalRecord::Incarnation(1))),
                (21, 2, &RecordContent::Seal),
                (30, 3, &RecordContent::Record(state(2, "b"))),
                (51, 4, &RecordContent::Seal),
            ]
        );
        assert_eq!(examination.trusted_end(), bytes.len() as u64);
    }

    /// WAL-2: damage inside the newest record is followed by its batch's seal, so it is
    /// corruption, named with its offset, number and the next valid record; the records after
    /// it are still listed, marked as found after damage.
    #[test]
    fn wal2_damage_before_a_valid_record_is_corruption() {
        let mut bytes = file(&[&[WalRecord::Incarnation(1)], &[state(2, "b")]]);
        bytes[30 + 9] ^= 0x01;
        let examination = examine(&bytes);
        assert_eq!(
            examination.verdict,
            Verdict::Corrupt {
                offset: 30,
                record: 3,
                reason: "checksum mismatch",
                next_valid: 51,
            }
        );
        assert_eq!(
            examination.damage,
            vec![DamagedSpan {
                offset: 30,
                record: 3,
                end: 51,
                reason: "checksum mismatch"
            }]
        );
        let last = examination.records.last().unwrap();
        assert_eq!(
            (last.offset, last.number, last.after_damage, &last.content),
            (51, 4, true, &RecordContent::Seal)
        );
        assert_eq!(examination.trusted().count(), 2);
        assert!(!examination.verdict.allows_start());
    }

    /// WAL-2: a damaged seal at the end is a tail that can be cut without losing state.
    #[test]
    fn wal2_damaged_last_seal_is_a_torn_tail() {
        let mut bytes = file(&[&[state(2, "b")]]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let examination = examine(&bytes);
        assert_eq!(
            examination.verdict,
            Verdict::TornTail {
                offset: 25,
                bytes: 9,
                reason: "checksum mismatch"
            }
        );
        assert_eq!(
            examination
                .trusted()
                .map(|r| r.content.clone())
                .collect::<Vec<_>>(),
            vec![RecordContent::Record(state(2, "b"))]
        );
        assert!(examination.verdict.allows_start());
    }
}
