//! A leader's view of each follower's log (LOG-2, LOG-4), modelled on etcd-io/raft's
//! `tracker`: how far the follower is known to match ([`Progress::matched`]), what to send it
//! next ([`Progress::next`]), and in which of three ways it is being sent to
//! ([`ReplicationState`]).
//!
//! - **Probe**: where the follower's log matches is not known, so one AppendEntries goes out
//!   at a time and waits for its answer (a refusal's hint moves `next` back a term at a time,
//!   LOG-2); an unanswered probe is sent again at the next heartbeat. Every follower starts
//!   here, and comes back here when a message is refused or the pipeline is taken as lost.
//! - **Replicate**: the follower accepted a message, so its match is known: batches are
//!   pipelined up to `max_inflight` unanswered ones, each remembered with the time it left so
//!   that the follower's round trip can be measured ([`RoundTrip`]) and a message unanswered
//!   past its retransmission timeout taken as lost.
//! - **Snapshot**: the entries the follower needs next were compacted away, so it is sent the
//!   snapshot in chunks (LOG-4, `snapshot.rs`); its acknowledgement of the install moves it to
//!   Replicate from the snapshot's index on.
//! - **Chunks**: the follower's next entry is larger than a frame, so it is sent in chunks,
//!   up to `max_inflight` unanswered ones at a time (MEMB-6, `chunks.rs`): the follower keeps
//!   only bytes that continue what it holds and answers each chunk with how much it holds, so
//!   a lost chunk shows as an answer that does not move, and the leader goes back to that
//!   offset once (go-back-N), or when the oldest chunk is unanswered past the retransmission
//!   timeout. The follower's durable acknowledgement of the whole entry moves it back to
//!   Replicate.
//!
//! Each state carries only what it needs, so a probe with a pipeline behind it, or entries in
//! flight beside a snapshot, cannot be written down. The sending itself (which message, which
//! bytes) stays with the node in `replication.rs` and `snapshot.rs`: this module only says
//! what each event does to one follower's progress.

use std::collections::VecDeque;
use std::time::Duration;

use conclave_protocol::ChunkAck;

use super::snapshot::SnapshotTransfer;
use crate::time::Instant;

/// How a leader sends to one follower now. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReplicationState {
    /// The match is not known: one message at a time until one is accepted.
    Probe {
        /// The probe went out and is not answered yet: nothing more goes until it is, or
        /// until the next heartbeat takes it as lost.
        sent: bool,
    },
    /// The match is known: messages are pipelined up to `max_inflight`.
    Replicate {
        /// The unanswered messages, oldest first: the last index each carried and when it
        /// left.
        inflight: VecDeque<(u64, Instant)>,
    },
    /// The follower is behind the compaction point and gets the snapshot instead of entries.
    Snapshot(SnapshotTransfer),
    /// The follower's next entry is larger than a frame: it is sent in chunks, pipelined up to
    /// `max_inflight` (MEMB-6, `chunks.rs`).
    Chunks(ChunkTransfer),
}

/// A leader's transfer of one entry in chunks to one follower (MEMB-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChunkTransfer {
    /// The entry being sent: always the follower's `next`, just past its match.
    pub(super) index: u64,
    /// What the follower last said it holds: the entry's first `offset` bytes.
    pub(super) offset: u32,
    /// Where the next chunk to send starts: at or past `offset`.
    pub(super) sent_to: u32,
    /// The unanswered chunks, oldest first: where each ends and when it left.
    inflight: VecDeque<(u32, Instant)>,
    /// The offset the leader last went back to after an answer that did not move: the answers
    /// of the chunks already in flight behind a lost one repeat that offset, and only the
    /// first of them means anything. Set, no round trip is measured (Karn's rule).
    went_back_to: Option<u32>,
}

impl ChunkTransfer {
    /// How many chunks are unanswered.
    pub(super) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Sends again from what the follower holds.
    fn go_back(&mut self) {
        self.sent_to = self.offset;
        self.inflight.clear();
    }
}

/// How a leader replicates to one follower. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Progress {
    /// The last index known to match on the follower (durably: it acknowledged it).
    pub(super) matched: u64,
    /// The next index to send.
    pub(super) next: u64,
    state: ReplicationState,
    /// Outlives the state changes: a follower probed again after a loss keeps the backed-off
    /// timeout it earned, so the next pipeline is not taken as lost just as early.
    round_trip: RoundTrip,
    /// When entries last went to it while it was being replicated to (issue 27, item 2).
    entries_sent_at: Option<Instant>,
}

impl Progress {
    /// A follower first met: probed from `next`, nothing known to match yet.
    pub(super) fn new(next: u64) -> Self {
        Self {
            matched: 0,
            next,
            state: ReplicationState::Probe { sent: false },
            round_trip: RoundTrip::default(),
            entries_sent_at: None,
        }
    }

    /// How it is being sent to.
    pub(super) fn state(&self) -> &ReplicationState {
        &self.state
    }

    /// Whether entries went to it, pipelined, within `interval` before `now`: a follower that
    /// hears from its leader that often needs no heartbeat beside them.
    pub(super) fn sent_entries_within(&self, now: Instant, interval: Duration) -> bool {
        matches!(self.state, ReplicationState::Replicate { .. })
            && self
                .entries_sent_at
                .is_some_and(|at| now.saturating_duration_since(at) < interval)
    }

    /// How many messages are in its pipeline, when it is being replicated to.
    pub(super) fn inflight(&self) -> Option<usize> {
        match &self.state {
            ReplicationState::Replicate { inflight } => Some(inflight.len()),
            _ => None,
        }
    }

    /// Whether one message at a time goes to it.
    pub(super) fn is_probing(&self) -> bool {
        matches!(self.state, ReplicationState::Probe { .. })
    }

    /// The snapshot transfer under way, in the Snapshot state.
    pub(super) fn snapshot(&self) -> Option<&SnapshotTransfer> {
        match &self.state {
            ReplicationState::Snapshot(transfer) => Some(transfer),
            _ => None,
        }
    }

    /// The snapshot transfer under way, to move it on.
    pub(super) fn snapshot_mut(&mut self) -> Option<&mut SnapshotTransfer> {
        match &mut self.state {
            ReplicationState::Snapshot(transfer) => Some(transfer),
            _ => None,
        }
    }

    /// Back to one message at a time, from `next`. Whatever was pipelined is forgotten: its
    /// answers may still come and are counted, but nothing waits for them any more.
    pub(super) fn become_probe(&mut self, next: u64) {
        self.next = next;
        self.state = ReplicationState::Probe { sent: false };
    }

    /// The match is known: pipeline from just past it.
    pub(super) fn become_replicate(&mut self) {
        self.next = self.matched + 1;
        self.state = ReplicationState::Replicate {
            inflight: VecDeque::new(),
        };
    }

    /// The entry being sent in chunks, in the Chunks state.
    pub(super) fn chunks(&self) -> Option<&ChunkTransfer> {
        match &self.state {
            ReplicationState::Chunks(transfer) => Some(transfer),
            _ => None,
        }
    }

    /// Send the entry at `next` in chunks, from its start (MEMB-6).
    pub(super) fn become_chunks(&mut self) {
        self.state = ReplicationState::Chunks(ChunkTransfer {
            index: self.next,
            offset: 0,
            sent_to: 0,
            inflight: VecDeque::new(),
            went_back_to: None,
        });
    }

    /// The chunk of the transfer's entry that ends at `end` went out `now`.
    pub(super) fn sent_chunk(&mut self, end: u32, now: Instant) {
        if let ReplicationState::Chunks(transfer) = &mut self.state {
            transfer.sent_to = end;
            transfer.inflight.push_back((end, now));
        }
    }

    /// The follower holds the first `ack.next_offset` bytes of the entry at `ack.index`, heard
    /// `now`. An answer about another entry (an old one) changes nothing. One that moves the
    /// offset on answers the chunks that end there or before. One that repeats the known
    /// offset while chunks past it are in flight says a chunk was lost (the follower keeps
    /// only bytes that continue what it holds): the leader goes back to it, once per offset. A
    /// lower offset than known means the follower lost what it had, and is believed.
    pub(super) fn chunk_answered(&mut self, ack: ChunkAck, len: Option<usize>, now: Instant) {
        let ReplicationState::Chunks(transfer) = &mut self.state else {
            return;
        };
        if transfer.index != ack.index {
            return;
        }
        let held = ack.next_offset;
        if len == Some(held as usize) {
            // The follower appended the whole entry: it waits for its durable acknowledgement
            // like a batch in flight, and what follows it can go meanwhile.
            let sent = transfer.inflight.back().map_or(now, |&(_, sent)| sent);
            let index = transfer.index;
            self.next = index + 1;
            self.state = ReplicationState::Replicate {
                inflight: VecDeque::from([(index, sent)]),
            };
            return;
        }
        if held > transfer.offset {
            transfer.offset = held;
            transfer.sent_to = transfer.sent_to.max(held);
            let mut answered = None;
            while transfer
                .inflight
                .front()
                .is_some_and(|&(end, _)| end <= held)
            {
                answered = transfer.inflight.pop_front();
            }
            if let (Some((_, sent)), None) = (answered, transfer.went_back_to) {
                self.round_trip.sample(now.saturating_duration_since(sent));
            }
        } else if held < transfer.offset {
            transfer.offset = held;
            transfer.went_back_to = Some(held);
            transfer.go_back();
        } else if transfer.sent_to > held && transfer.went_back_to != Some(held) {
            transfer.went_back_to = Some(held);
            transfer.go_back();
        }
    }

    /// Send `transfer`'s snapshot instead of entries. `next` is left alone: entries resume
    /// from the acknowledged install, not from it.
    pub(super) fn become_snapshot(&mut self, transfer: SnapshotTransfer) {
        self.state = ReplicationState::Snapshot(transfer);
    }

    /// An AppendEntries whose entries end at `last` went out `now`: a probe now waits for its
    /// answer; a pipelined message is remembered until it is answered.
    pub(super) fn sent_entries(&mut self, last: u64, now: Instant) {
        match &mut self.state {
            ReplicationState::Probe { sent } => *sent = true,
            ReplicationState::Replicate { inflight } => {
                self.next = last + 1;
                inflight.push_back((last, now));
                self.entries_sent_at = Some(now);
            }
            // Entries never go beside a snapshot (`send_append` sends a chunk instead), nor
            // beside an entry sent in chunks.
            ReplicationState::Snapshot(_) | ReplicationState::Chunks(_) => {}
        }
    }

    /// The follower acknowledged that its log matches through `match_index`, heard `now`. An
    /// answer older than what is known moves nothing back.
    pub(super) fn acknowledged(&mut self, match_index: u64, now: Instant) {
        self.matched = self.matched.max(match_index);
        self.next = self.next.max(self.matched + 1);
        let matched = self.matched;
        match &mut self.state {
            ReplicationState::Replicate { inflight } => {
                let mut answered = None;
                while inflight.front().is_some_and(|&(last, _)| last <= matched) {
                    answered = inflight.pop_front();
                }
                if let Some((_, sent)) = answered {
                    // The newest message this answer covers: its round trip. Earlier ones
                    // were answered by it too, later than their own answer would have come.
                    self.round_trip.sample(now.saturating_duration_since(sent));
                }
            }
            // An accepted probe: the match is known. A probe was resent at every heartbeat,
            // so its answer may be to any copy and is not measured (Karn's rule).
            ReplicationState::Probe { .. } => self.become_replicate(),
            // LOG-4: the install is durable there; entries follow from the snapshot on. An
            // acknowledgement short of it (an entry it held before) changes nothing.
            ReplicationState::Snapshot(transfer) if matched >= transfer.last.index => {
                self.become_replicate();
            }
            ReplicationState::Snapshot(_) => {}
            // MEMB-6: the whole entry is durable there; back to batches after it.
            ReplicationState::Chunks(transfer) if matched >= transfer.index => {
                self.become_replicate();
            }
            ReplicationState::Chunks(_) => {}
        }
    }

    /// Whether a refusal of the AppendEntries that followed index `refused_prev` answers
    /// something this leader sent this follower and has not heard back about: a heartbeat at
    /// its match, the probe out, a message in the pipeline, or a chunk. An AppendEntries sent once to
    /// several followers is heard by every peer in the radio's range (issue 27, item 1); the
    /// refusal of one that was meant for others, or an old refusal that arrives late, must
    /// not send this follower back to probing or restart its chunks. `0` is a refusal that
    /// does not say (a node older than that): taken, as it always was.
    pub(super) fn refusal_is_current(&self, refused_prev: u64) -> bool {
        if refused_prev == 0 || refused_prev == self.matched {
            return true;
        }
        match &self.state {
            ReplicationState::Probe { .. } => refused_prev + 1 == self.next,
            ReplicationState::Replicate { inflight } => {
                // Each message in flight followed the one before it, the first one the match.
                let len = inflight.len();
                inflight
                    .iter()
                    .take(len.saturating_sub(1))
                    .any(|(last, _)| *last == refused_prev)
            }
            // Every chunk follows the entry before the one it carries.
            ReplicationState::Chunks(transfer) => refused_prev + 1 == transfer.index,
            ReplicationState::Snapshot(_) => false,
        }
    }

    /// The follower refused an AppendEntries: its log conflicts from `hint_index` on (the
    /// first index of its conflicting term, or where its log ends). Back to probing from there,
    /// unless it is being sent the snapshot, which goes on.
    pub(super) fn refused(&mut self, hint_index: u64) {
        if hint_index <= self.matched {
            // The follower no longer holds what it acknowledged: it lost its WAL (WAL-2) and
            // came back empty. (Or this refusal is older than its acknowledgements; then the
            // entries are only sent again.) Commit never goes back.
            self.matched = hint_index.saturating_sub(1);
        }
        // Back off to where the follower's conflicting term starts (or its log ends), never
        // below what is known to match, never forward.
        let next = hint_index.max(self.matched + 1).min(self.next);
        if self.snapshot().is_some() {
            self.next = next;
        } else {
            self.become_probe(next);
        }
    }

    /// A heartbeat is due `now`: what is in flight may have been lost. An unanswered snapshot
    /// chunk or probe is sent again; a pipeline whose oldest message is unanswered past the
    /// retransmission timeout (within `[floor, ceiling]`) is taken as lost, and the follower
    /// probed again from its match. Whether that happened.
    pub(super) fn heartbeat(&mut self, now: Instant, floor: Duration, ceiling: Duration) -> bool {
        match &mut self.state {
            ReplicationState::Snapshot(transfer) => {
                // The chunk or its answer may be lost: send it again, like a probe.
                transfer.sent = false;
                false
            }
            ReplicationState::Probe { sent } => {
                *sent = false;
                false
            }
            ReplicationState::Chunks(transfer) => {
                // MEMB-6: the oldest chunk (or its answer) unanswered past the timeout is
                // taken as lost; the chunks go again from what the follower holds.
                let timeout = self.round_trip.loss_timeout(floor, ceiling);
                let lost = transfer
                    .inflight
                    .front()
                    .is_some_and(|&(_, sent)| now.saturating_duration_since(sent) >= timeout);
                if lost {
                    self.round_trip.lost(floor, ceiling);
                    transfer.went_back_to = None;
                    transfer.go_back();
                }
                false
            }
            ReplicationState::Replicate { inflight } => {
                let timeout = self.round_trip.loss_timeout(floor, ceiling);
                let stalled = inflight
                    .front()
                    .is_some_and(|&(_, sent)| now.saturating_duration_since(sent) >= timeout);
                if stalled {
                    // Lost, or its answer was: start again from what is known to match.
                    self.round_trip.lost(floor, ceiling);
                    self.become_probe(self.matched + 1);
                }
                stalled
            }
        }
    }
}

/// A follower's round trip as the leader measures it on acknowledged pipelined messages: a
/// smoothed mean and mean deviation (RFC 6298's estimator), from which a message unanswered
/// for longer is taken as lost. Probes and resent messages are not measured (Karn's rule:
/// their answer may be to an earlier copy); instead each loss doubles the timeout until a
/// message is answered in time to be measured, so a round trip longer than the first guess
/// is learnt all the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RoundTrip {
    /// The smoothed round trip and its mean deviation, once one was measured.
    estimate: Option<(Duration, Duration)>,
    /// The timeout doubled after a loss, until the next measurement.
    backoff: Option<Duration>,
}

impl RoundTrip {
    /// Takes in one measured round trip.
    fn sample(&mut self, measured: Duration) {
        self.backoff = None;
        self.estimate = Some(match self.estimate {
            None => (measured, measured / 2),
            Some((smoothed, deviation)) => {
                let error = smoothed.abs_diff(measured);
                (
                    smoothed * 7 / 8 + measured / 8,
                    deviation * 3 / 4 + error / 4,
                )
            }
        });
    }

    /// A message was taken as lost after [`RoundTrip::loss_timeout`]: wait twice as long next
    /// time.
    fn lost(&mut self, floor: Duration, ceiling: Duration) {
        self.backoff = Some(self.loss_timeout(floor, ceiling).saturating_mul(2));
    }

    /// How long a message may stay unanswered before it is taken as lost: the smoothed round
    /// trip plus four deviations (a heartbeat interval before anything was measured), or the
    /// backed-off timeout when longer, within `[floor, ceiling]`.
    fn loss_timeout(&self, floor: Duration, ceiling: Duration) -> Duration {
        let measured = self
            .estimate
            .map_or(floor, |(smoothed, deviation)| smoothed + deviation * 4);
        measured
            .max(self.backoff.unwrap_or_default())
            .clamp(floor, ceiling.max(floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::LogPosition;

    const FLOOR: Duration = Duration::from_millis(50);
    const CEILING: Duration = Duration::from_millis(300);

    fn at(millis: u64) -> Instant {
        Instant::from_millis(millis)
    }

    fn transfer(index: u64) -> SnapshotTransfer {
        SnapshotTransfer {
            last: LogPosition::new(1, index),
            offset: 0,
            sent: true,
        }
    }

    /// A follower that accepted a probe at `matched` and is being pipelined to.
    fn replicating(matched: u64) -> Progress {
        let mut progress = Progress::new(matched + 1);
        progress.acknowledged(matched, at(0));
        progress
    }

    fn inflight(progress: &Progress) -> Vec<u64> {
        match progress.state() {
            ReplicationState::Replicate { inflight } => {
                inflight.iter().map(|&(last, _)| last).collect()
            }
            other => panic!("not replicating: {other:?}"),
        }
    }

    /// LOG-2: a follower first met is probed from the end of the leader's log; one probe goes
    /// at a time, and the heartbeat sends it again.
    #[test]
    fn a_new_follower_is_probed_one_message_at_a_time() {
        let mut progress = Progress::new(8);
        assert_eq!((progress.matched, progress.next), (0, 8));
        assert_eq!(progress.state(), &ReplicationState::Probe { sent: false });
        progress.sent_entries(8, at(1));
        assert_eq!(progress.state(), &ReplicationState::Probe { sent: true });
        assert_eq!(progress.next, 8, "a probe does not move next");
        assert!(!progress.heartbeat(at(500), FLOOR, CEILING));
        assert_eq!(progress.state(), &ReplicationState::Probe { sent: false });
    }

    /// LOG-2: an accepted probe makes the match known, and the follower is pipelined to from
    /// just past it.
    #[test]
    fn an_accepted_probe_starts_the_pipeline() {
        let mut progress = Progress::new(8);
        progress.sent_entries(8, at(1));
        progress.acknowledged(5, at(2));
        assert_eq!((progress.matched, progress.next), (5, 6));
        assert!(inflight(&progress).is_empty());
        progress.sent_entries(7, at(3));
        progress.sent_entries(9, at(4));
        assert_eq!(inflight(&progress), [7, 9]);
        assert_eq!(progress.next, 10);
    }

    /// LOG-2: an acknowledgement answers every pipelined message it covers; an older one
    /// moves nothing back.
    #[test]
    fn an_acknowledgement_answers_what_it_covers() {
        let mut progress = replicating(3);
        progress.sent_entries(5, at(10));
        progress.sent_entries(7, at(20));
        progress.sent_entries(9, at(30));
        progress.acknowledged(7, at(40));
        assert_eq!(inflight(&progress), [9]);
        assert_eq!((progress.matched, progress.next), (7, 10));
        progress.acknowledged(4, at(50));
        assert_eq!(inflight(&progress), [9]);
        assert_eq!((progress.matched, progress.next), (7, 10));
    }

    /// LOG-2: a refusal sends the follower back to probing from its hint, never below its
    /// match nor forward; a hint at or below the match (a follower that lost its WAL) lowers
    /// the match.
    #[test]
    fn a_refusal_probes_again_from_the_hint() {
        let mut progress = replicating(3);
        progress.sent_entries(6, at(10));
        progress.refused(5);
        assert_eq!(progress.state(), &ReplicationState::Probe { sent: false });
        assert_eq!((progress.matched, progress.next), (3, 5));
        progress.refused(9);
        assert_eq!(progress.next, 5, "never forward");
        progress.refused(1);
        assert_eq!((progress.matched, progress.next), (0, 1));
    }

    /// Issue 27, item 1: only the refusal of a message this follower was sent and has not
    /// answered moves it back; the refusal of an AppendEntries meant for others (overheard on
    /// the radio) or a late one changes nothing. A refusal that does not say (0) is taken.
    #[test]
    fn only_a_refusal_of_what_the_follower_was_sent_counts() {
        let mut progress = replicating(3);
        progress.sent_entries(5, at(10));
        progress.sent_entries(7, at(20));
        // Sent: a heartbeat at 3 and messages after 3 and after 5.
        for sent in [3, 5] {
            assert!(progress.refusal_is_current(sent), "after {sent}");
        }
        for overheard in [2, 4, 7, 12] {
            assert!(!progress.refusal_is_current(overheard), "after {overheard}");
        }
        assert!(progress.refusal_is_current(0));
        progress.refused(4);
        // Probing from 4: the probe follows 3, which is also the match.
        assert!(progress.refusal_is_current(3));
        assert!(!progress.refusal_is_current(5));
        let mut probing = Progress::new(8);
        probing.sent_entries(8, at(1));
        assert!(probing.refusal_is_current(7));
        assert!(!probing.refusal_is_current(9));
    }

    /// LOG-2: a pipeline unanswered past the retransmission timeout is taken as lost at the
    /// heartbeat: probing again from the match, with the timeout doubled.
    #[test]
    fn a_stalled_pipeline_is_probed_again() {
        let mut progress = replicating(3);
        progress.sent_entries(6, at(100));
        assert!(
            !progress.heartbeat(at(149), FLOOR, CEILING),
            "within the floor"
        );
        assert_eq!(inflight(&progress), [6]);
        assert!(progress.heartbeat(at(150), FLOOR, CEILING));
        assert_eq!(progress.state(), &ReplicationState::Probe { sent: false });
        assert_eq!((progress.matched, progress.next), (3, 4));
        assert_eq!(progress.round_trip.loss_timeout(FLOOR, CEILING), FLOOR * 2);
    }

    /// LOG-2: a measured round trip sets the retransmission timeout; a probe's answer is not
    /// measured.
    #[test]
    fn pipelined_answers_are_measured_and_probes_are_not() {
        let mut progress = Progress::new(4);
        progress.sent_entries(4, at(0));
        progress.acknowledged(3, at(200));
        assert_eq!(progress.round_trip, RoundTrip::default());
        progress.sent_entries(6, at(300));
        progress.acknowledged(6, at(420));
        // 120 ms plus four deviations of 60 ms.
        assert_eq!(
            progress
                .round_trip
                .loss_timeout(FLOOR, Duration::from_secs(1)),
            Duration::from_millis(360)
        );
    }

    /// LOG-4: a follower sent the snapshot drops its pipeline; a chunk is resent at the
    /// heartbeat; a refusal keeps the transfer going.
    #[test]
    fn a_snapshot_transfer_replaces_the_pipeline() {
        let mut progress = replicating(3);
        progress.sent_entries(6, at(10));
        progress.become_snapshot(transfer(20));
        assert_eq!(progress.snapshot(), Some(&transfer(20)));
        assert!(!progress.heartbeat(at(1_000), FLOOR, CEILING));
        assert_eq!(
            progress.snapshot().map(|transfer| transfer.sent),
            Some(false)
        );
        progress.refused(2);
        assert!(progress.snapshot().is_some(), "the transfer goes on");
        assert_eq!(progress.matched, 1);
    }

    /// LOG-4: the acknowledged install moves the follower to the pipeline from the snapshot's
    /// index; an acknowledgement short of it does not.
    #[test]
    fn an_acknowledged_install_ends_the_transfer() {
        let mut progress = Progress::new(30);
        progress.become_snapshot(transfer(20));
        progress.acknowledged(12, at(1));
        assert!(progress.snapshot().is_some());
        assert_eq!(progress.matched, 12);
        progress.acknowledged(20, at(2));
        assert_eq!((progress.matched, progress.next), (20, 21));
        assert!(inflight(&progress).is_empty());
    }
}
