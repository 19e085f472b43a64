//! Entries larger than a frame (MEMB-6): a leader sends such an entry in chunks, one entry at
//! a time, and the follower gathers them and appends the entry only once it holds all of it.
//!
//! # Sending one
//!
//! An entry whose wire size exceeds `max_append_bytes` never goes in a batch. When it is next
//! for a follower being replicated to, the follower's progress moves to the *chunks* state
//! ([`ChunkTransfer`](super::tracker::ChunkTransfer)); what was sent before it may still be in
//! flight, since the follower takes a chunk only where its log holds the entry before, and
//! refuses it otherwise. Each AppendEntries carries, in its trailing `chunk` field, the
//! bytes of the entry's data from an offset on, with `prev_index` just before the entry and no
//! `entries`, and up to `max_inflight` of them are in flight at once, as batches are. The
//! follower answers each chunk with how much of the entry it holds ([`ChunkAck`]); it keeps
//! only bytes that continue what it holds, so after a lost chunk its answers stop moving and
//! the leader sends again from there (once per offset: the chunks behind the lost one answer
//! the same). The oldest chunk unanswered past the follower's retransmission timeout sends the
//! chunks again from the offset last acknowledged, and a follower that lost what it had (a
//! restart) says so by asking for an earlier offset. Once the follower says it holds the
//! whole entry (appended, its write under way), the entry waits for its durable
//! acknowledgement as a batch in flight does, and what follows it is sent meanwhile, so that
//! one write on the follower can cover several large entries. Small entries are sent exactly
//! as before, in batches that fit the frame.
//!
//! # Receiving one
//!
//! A follower keeps at most one entry being received ([`IncomingEntry`]), bounded by
//! [`MAX_ENTRY_BYTES`]. A chunk is taken only when the AppendEntries' `prev_index` and
//! `prev_term` match this log, as entries would be; its bytes are kept only when they start
//! where the bytes held end. The entry being received is dropped when the term changes (a new
//! leader may have another entry at that index), when a message from the leader does not match
//! this log, and when a chunk of another entry arrives. With its last chunk the whole entry is
//! appended like a batch of one, said to be received at once, and acknowledged as matching
//! once durable; until then it is in no log, so
//! it is never applied nor counted towards a commit, and a leader change mid-entry leaves
//! nothing behind but a buffer that is dropped. A chunk of an entry this log already holds
//! (same index and term: the same entry) is acknowledged as that entry.

use conclave_protocol::{AppendEntries, ChunkAck, EntryChunk, EntryKind, LogEntry};

use super::replication::AppendSent;
use super::*;

/// The most bytes of data one log entry may carry: room for the largest command of the
/// built-in state machines (a 64 KiB value with a 64 KiB `if_value`, its key and request id).
/// It bounds what a follower holds of an entry being received.
pub const MAX_ENTRY_BYTES: usize = 160 * 1024;

/// What a chunk's own fields add to an AppendEntries frame beside its data, at most: the nil
/// that stands for an absent read round before it, its array header, index and term as u64s,
/// the kind byte, offset and length as u32s, and the data's `bin` header.
pub(crate) const CHUNK_OVERHEAD: usize = 1 + 1 + 9 + 9 + 1 + 5 + 5 + 5;

/// A follower's entry being received in chunks. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IncomingEntry {
    /// The term in which its leader sends it: a leader of another term may send another entry
    /// at the same index.
    leader_term: u64,
    index: u64,
    term: u64,
    kind: EntryKind,
    total_len: u32,
    /// The bytes received so far, from the start.
    data: Vec<u8>,
}

impl IncomingEntry {
    fn starting(leader_term: u64, chunk: &EntryChunk) -> Self {
        Self {
            leader_term,
            index: chunk.index,
            term: chunk.term,
            kind: chunk.kind,
            total_len: chunk.total_len,
            data: Vec::new(),
        }
    }

    /// Whether it is being sent by the leader of `term`.
    pub(super) fn is_of_term(&self, term: u64) -> bool {
        self.leader_term == term
    }

    /// Whether `chunk` is a piece of this entry, sent in `leader_term`.
    fn is_same(&self, leader_term: u64, chunk: &EntryChunk) -> bool {
        self.leader_term == leader_term
            && self.index == chunk.index
            && self.term == chunk.term
            && self.kind == chunk.kind
            && self.total_len == chunk.total_len
    }

    fn next_offset(&self) -> u32 {
        // Never truncates: the data is at most `total_len` bytes, a u32.
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }
}

/// Whether `chunk`, carried by `append`, is one a leader could have sent: it follows
/// `prev_index` with no entries beside it, and its bytes lie within an entry of at most
/// [`MAX_ENTRY_BYTES`].
fn is_well_formed(append: &AppendEntries, chunk: &EntryChunk) -> bool {
    let end = u64::from(chunk.offset) + chunk.data.len() as u64;
    append.entries.is_empty()
        && append.prev_index.checked_add(1) == Some(chunk.index)
        && chunk.total_len as usize <= MAX_ENTRY_BYTES
        && end <= u64::from(chunk.total_len)
}

impl Raft {
    // -----------------------------------------------------------------------------------------
    // leader

    /// Whether the entry at `index` is too large for one AppendEntries of `budget` bytes.
    pub(super) fn needs_chunks(&self, index: u64, budget: usize) -> bool {
        self.log
            .entry_at(index)
            .is_some_and(|entry| crate::raft::log::entry_wire_size(entry) > budget)
    }

    /// Sends `peer` the next chunks of the entry its progress is sending in chunks, as many
    /// as `max_inflight` allows; what went.
    pub(super) fn send_entry_chunks(
        &mut self,
        now: Instant,
        peer: PeerId,
        budget: usize,
        max_inflight: usize,
    ) -> AppendSent {
        let mut sent = AppendSent::Nothing;
        loop {
            match self.send_entry_chunk(now, peer, budget, max_inflight) {
                AppendSent::Nothing => return sent,
                more => sent = more,
            }
        }
    }

    /// Sends `peer` the next chunk of the entry its progress is sending in chunks, if the
    /// window allows one; what went.
    fn send_entry_chunk(
        &mut self,
        now: Instant,
        peer: PeerId,
        budget: usize,
        max_inflight: usize,
    ) -> AppendSent {
        let Some((index, offset, in_flight)) = self
            .progress_of(peer)
            .and_then(|progress| progress.chunks())
            .map(|transfer| (transfer.index, transfer.sent_to, transfer.in_flight()))
        else {
            return AppendSent::Nothing;
        };
        let all_sent = self
            .log
            .entry_at(index)
            .is_some_and(|entry| offset as usize >= entry.data.len());
        if in_flight >= max_inflight || all_sent {
            return AppendSent::Nothing;
        }
        let (Some(entry), Some(prev_term)) =
            (self.log.entry_at(index), self.log.term_at(index - 1))
        else {
            // Compacted away since (committed by the others): the snapshot goes instead, from
            // a probe.
            if let Some(progress) = self.progress_of(peer) {
                let next = progress.next.max(progress.matched + 1);
                progress.become_probe(next);
            }
            return AppendSent::Nothing;
        };
        let room = budget.saturating_sub(CHUNK_OVERHEAD).max(1);
        let start = (offset as usize).min(entry.data.len());
        let end = (start + room).min(entry.data.len());
        let chunk = EntryChunk {
            index,
            term: entry.term,
            kind: entry.kind,
            offset: u32::try_from(start).unwrap_or(u32::MAX),
            total_len: u32::try_from(entry.data.len()).unwrap_or(u32::MAX),
            data: entry.data[start..end].to_vec(),
        };
        let append = AppendEntries {
            prev_index: index - 1,
            prev_term,
            commit: self.log.commit(),
            pinned: self.hard.manual_override == Some(self.config.id),
            chunk: Some(Box::new(chunk)),
            ..AppendEntries::new(self.hard.term, self.config.id)
        };
        if let Some(progress) = self.progress_of(peer) {
            progress.sent_chunk(u32::try_from(end).unwrap_or(u32::MAX), now);
        }
        self.send(peer, RaftMessage::AppendEntries(append));
        // LOG-7: the chunk fills the frame; a pending read round goes on a heartbeat.
        if self.reads.round_to_carry().is_some() {
            AppendSent::SentWithoutRound
        } else {
            AppendSent::Sent
        }
    }

    // -----------------------------------------------------------------------------------------
    // follower

    /// An AppendEntries from the leader of this term that carries a chunk: gathered, and the
    /// entry appended once whole. See the [module docs](self).
    pub(super) fn follow_chunk(
        &mut self,
        from: PeerId,
        append: &AppendEntries,
        chunk: &EntryChunk,
    ) {
        let term = self.hard.term;
        if !is_well_formed(append, chunk) {
            warn!(%from, index = chunk.index, "dropped a malformed entry chunk");
            return;
        }
        let snapshot = self.log.snapshot().index;
        if chunk.index <= snapshot || self.log.term_at(chunk.index) == Some(chunk.term) {
            // Held already (a resent last chunk, or committed behind the snapshot): the same
            // entry, acknowledged as such.
            self.incoming_entry = None;
            let held = LogPosition::new(chunk.term, chunk.index);
            self.accept_append(from, held, &[], append.commit, append.read_round, false);
            return;
        }
        let prev = LogPosition::new(append.prev_term, append.prev_index);
        if !self.log.holds(prev) {
            self.incoming_entry = None;
            self.accept_append(from, prev, &[], append.commit, append.read_round, false);
            return;
        }
        let mut incoming = match self.incoming_entry.take() {
            Some(incoming) if incoming.is_same(term, chunk) => incoming,
            _ => IncomingEntry::starting(term, chunk),
        };
        if chunk.offset == incoming.next_offset() {
            incoming.data.extend_from_slice(&chunk.data);
        }
        // Otherwise a piece resent or out of order: answered with the offset wanted.
        if incoming.data.len() == incoming.total_len as usize {
            let received = ChunkAck {
                index: incoming.index,
                next_offset: incoming.total_len,
            };
            let entry = LogEntry {
                index: incoming.index,
                term: incoming.term,
                kind: incoming.kind,
                data: incoming.data,
            };
            if self.accept_append(
                from,
                prev,
                &[entry],
                append.commit,
                append.read_round,
                false,
            ) {
                // Appended whole; its durable acknowledgement follows once it is written.
                // Saying now that it arrived lets the leader send the next entry meanwhile,
                // so that one write here can cover several large entries.
                self.send_chunk_ack(from, prev.index, received);
            }
            return;
        }
        let ack = ChunkAck {
            index: incoming.index,
            next_offset: incoming.next_offset(),
        };
        self.incoming_entry = Some(incoming);
        self.log.commit_to(append.commit.min(prev.index));
        self.send_chunk_ack_with_round(from, prev.index, ack, append.read_round);
    }

    /// Tells the leader how much of the entry after `prev_index` this node holds.
    fn send_chunk_ack(&mut self, to: PeerId, prev_index: u64, ack: ChunkAck) {
        self.send_chunk_ack_with_round(to, prev_index, ack, None);
    }

    fn send_chunk_ack_with_round(
        &mut self,
        to: PeerId,
        prev_index: u64,
        ack: ChunkAck,
        read_round: Option<u64>,
    ) {
        let response = AppendResp {
            term: self.hard.term,
            success: true,
            // Only what is durable is acknowledged as matching (LOG-3).
            match_index: self.log.persisted().min(prev_index),
            hint: None,
            priority: self.priority,
            read_round,
            chunk: Some(ack),
        };
        self.send(to, RaftMessage::AppendResp(response));
    }
}
