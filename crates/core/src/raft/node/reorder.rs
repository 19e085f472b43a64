//! A follower's reorder buffer for AppendEntries (LOG-2): pipelined messages from the leader
//! of this term that arrived before their predecessor, on a link that reorders frames, held
//! until the gap before them is filled instead of refused.
//!
//! A refusal would send the leader back to probing and make it send the window again, about
//! twice the frames per commit on such a link. Holding is safe because nothing held is ever
//! appended or acknowledged as it is: once the log reaches a held message's `prev_index`, the
//! message goes through [`Raft::accept_append`] like any other, with its `prev_index` and
//! `prev_term` checked, and is acknowledged only once durable (LOG-3).
//!
//! Only a leader that this follower has already accepted entries from, in this term, is
//! buffered for: before that, a message past the log's end is most likely the leader's probe
//! from the end of its own log, and only a refusal with its hint moves that leader back
//! quickly. A message sent again while a copy of it is held is refused too: the leader is
//! waiting for its answer (a probe is resent every heartbeat), so holding it could stall the
//! follower for good. The buffer holds at most `max_inflight` messages and `max_inflight` frames' worth
//! of entries (what the leader may have in flight to this follower anyway); a message that
//! does not fit empties it and is refused as before. A new term, another leader, and a
//! snapshot install empty it too.

use conclave_protocol::AppendEntries;

use crate::raft::log::entry_wire_size;

use super::*;

/// The messages held for one leader in one term, ordered by `prev_index`.
#[derive(Debug, Clone)]
pub(super) struct ReorderBuffer {
    leader: PeerId,
    term: u64,
    held: Vec<AppendEntries>,
    /// The held entries' wire size, bounded with the count.
    bytes: usize,
}

/// What became of a message past the log's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Held until the gap before it is filled.
    Held,
    /// The buffer has no room for it.
    Full,
    /// One with the same `prev_index` is held already: the leader sent it again, so it is
    /// waiting for an answer (a probe resent every heartbeat, say) and must get one.
    SentAgain,
}

impl ReorderBuffer {
    fn new(leader: PeerId, term: u64) -> Self {
        Self {
            leader,
            term,
            held: Vec::new(),
            bytes: 0,
        }
    }

    fn is_for(&self, leader: PeerId, term: u64) -> bool {
        self.leader == leader && self.term == term
    }

    /// Holds `append` when it fits the bounds and is not one held already.
    fn hold(&mut self, append: &AppendEntries, max_messages: usize, max_bytes: usize) -> Hold {
        let size: usize = append.entries.iter().map(entry_wire_size).sum();
        let position = self
            .held
            .partition_point(|held| held.prev_index < append.prev_index);
        if self
            .held
            .get(position)
            .is_some_and(|held| held.prev_index == append.prev_index)
        {
            return Hold::SentAgain;
        }
        if self.held.len() >= max_messages || self.bytes + size > max_bytes {
            return Hold::Full;
        }
        self.bytes += size;
        self.held.insert(position, append.clone());
        Hold::Held
    }

    /// The first held message the log now reaches (its `prev_index` at or before `last`).
    fn take_ready(&mut self, last: u64) -> Option<AppendEntries> {
        let first = self.held.first()?;
        if first.prev_index > last {
            return None;
        }
        let append = self.held.remove(0);
        let size: usize = append.entries.iter().map(entry_wire_size).sum();
        self.bytes = self.bytes.saturating_sub(size);
        Some(append)
    }
}

impl Raft {
    /// An AppendEntries from `from` whose `prev_index` is past this log's end: held, when
    /// `from` is a leader this log already follows in this term and the buffer has room.
    /// False when it was not held: the caller refuses it, as without a buffer.
    pub(super) fn hold_overtaking(&mut self, from: PeerId, append: &AppendEntries) -> bool {
        let Some(log_config) = self.config.log else {
            return false;
        };
        if append.entries.is_empty() || append.prev_index <= self.log.last().index {
            return false;
        }
        let term = self.hard.term;
        let Some(buffer) = self
            .reorder
            .as_mut()
            .filter(|buffer| buffer.is_for(from, term))
        else {
            return false;
        };
        let max_messages = log_config.max_inflight.max(1);
        let max_bytes = max_messages.saturating_mul(log_config.max_append_bytes);
        let outcome = buffer.hold(append, max_messages, max_bytes);
        if outcome == Hold::Held {
            debug!(
                %from,
                prev_index = append.prev_index,
                last = self.log.last().index,
                "AppendEntries overtook its predecessor; held until the gap is filled"
            );
            return true;
        }
        debug!(
            %from,
            prev_index = append.prev_index,
            ?outcome,
            "reorder buffer emptied; the message is refused"
        );
        *buffer = ReorderBuffer::new(from, term);
        false
    }

    /// `from`'s AppendEntries was accepted: the held ones that the log reaches now are
    /// applied, in order, each through the usual match check. One that carried entries
    /// starts the buffer for `from` in this term: the leader now pipelines to this follower.
    /// (A heartbeat at the leader's match is accepted even before its probe, which must
    /// still be refused to move the leader back.)
    pub(super) fn release_held(&mut self, from: PeerId, carried_entries: bool) {
        let term = self.hard.term;
        if !self
            .reorder
            .as_ref()
            .is_some_and(|buffer| buffer.is_for(from, term))
        {
            if !carried_entries {
                return;
            }
            self.reorder = Some(ReorderBuffer::new(from, term));
        }
        loop {
            let last = self.log.last().index;
            let Some(append) = self.reorder.as_mut().and_then(|b| b.take_ready(last)) else {
                return;
            };
            let prev = LogPosition::new(append.prev_term, append.prev_index);
            if !self.accept_append(
                from,
                prev,
                &append.entries,
                append.commit,
                append.read_round,
                append.entries.is_empty(),
            ) {
                // Refused (and answered): the leader backs off, and what is held after this
                // message cannot follow the log any more either.
                self.reorder = None;
                return;
            }
        }
    }

    /// How many AppendEntries the reorder buffer holds; `None` when there is no buffer (no
    /// leader accepted from in this term).
    #[cfg(test)]
    pub(crate) fn held_appends(&self) -> Option<usize> {
        self.reorder.as_ref().map(|buffer| buffer.held.len())
    }

    /// Forgets every held message: a new term, another leader, or a snapshot install.
    pub(super) fn drop_reorder_buffer(&mut self) {
        self.reorder = None;
    }
}
