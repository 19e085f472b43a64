//! The replicated log (LOG-1..4): a leader's proposals and its AppendEntries with entries, a
//! follower's appends and durable acknowledgements, commit, and [`ReplicatedLog`], the seam a
//! driver reaches the log through.
//!
//! # What may leave before an fsync, and what may not
//!
//! Entries are written apart from the hard state: the driver takes them with
//! [`ReplicatedLog::take_write`], writes them, and reports the last one durable with
//! [`ReplicatedLog::handle_persisted`]. Meanwhile the node goes on:
//!
//! - a **leader** sends its new entries to the followers at once, while its own write is being
//!   fsynced, and counts itself towards a commit only up to what it reported durable;
//! - a **follower** answers an AppendEntries only once the entries it acknowledges are
//!   durable: an acknowledgement waiting for a write is kept ([`PendingAck`]) and sent from
//!   `handle_persisted`. A refusal, and an acknowledgement of what is already durable, leave
//!   at once;
//! - a vote or a new term still leaves only after its [`Action::Persist`], as before.
//!
//! So an entry counted towards a commit is on the disks of a majority (LOG-3), and an
//! acknowledged write survives any crash of a minority.
//!
//! # Replication to one follower
//!
//! The leader keeps a [`Progress`] per follower (`tracker.rs`): the last index known to match
//! (`matched`), the next to send, and one of three states. A follower starts in *probe*: one
//! AppendEntries at a time, resent every heartbeat, until one is accepted; a refusal carries a
//! hint (the first index of the follower's conflicting term, or where its log ends), so the
//! leader backs off a term per round trip, not an entry (LOG-2). Once accepted, the follower is
//! in *replicate*: batches that fit `max_append_bytes` are pipelined up to `max_inflight`
//! unanswered messages; one still unanswered when its retransmission timeout has passed is
//! taken as lost, and the follower is probed again from `matched`. That timeout follows the
//! follower's measured round trips (its smoothed round trip plus four deviations, as TCP's),
//! never under a heartbeat interval and never over the maximum election timeout: on a slow
//! radio where frames queue for the air, a message that is only waiting is not sent again,
//! which would queue more still. A heartbeat to a follower with nothing to send is an
//! AppendEntries at `matched`, which always matches and carries the commit index. A follower
//! whose next entry the leader compacted away is in *snapshot*: it gets the snapshot instead
//! (`snapshot.rs`), and is replicated to from the snapshot's index once it acknowledged the
//! install.
//!
//! # Commit and apply
//!
//! The leader commits the highest index that a majority of the voters hold durably, when that
//! entry is of its own term (LOG-3, Raft §5.4.2); a new leader appends an empty entry first so
//! that it can commit what earlier leaders left. Followers learn the commit index from every
//! AppendEntries, up to what they verified matches. Every node hands out committed, durable
//! entries in order, once ([`ReplicatedLog::take_committed`]); effects happen on apply only.

use conclave_protocol::{Configuration, EntryKind, LogEntry};

use crate::raft::log::entry_wire_size;

use super::chunks::MAX_ENTRY_BYTES;
use super::read_index::READ_ROUND_WIRE_BYTES;
use super::tracker::{Progress, ReplicationState};
use super::*;

/// Messages to one follower left unanswered before a client's write waits to fill a frame
/// (see [`Raft::replicate_proposal`]): one. A write to a follower with nothing unanswered
/// goes at once, so a lone client never waits; writes that come while a message is on its
/// way gather into the next, Nagle's rule for a log. With 2 (measured too, issue 26) a
/// message carried about 3.8 entries under 32 clients on loopback, with 1 about 4.3, and the
/// servers' CPU per commit was lower.
pub(crate) const PARTIAL_FRAMES_IN_FLIGHT: usize = 1;

/// A follower's acknowledgement waiting for its write to become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PendingAck {
    leader: PeerId,
    term: u64,
    /// The last index the acknowledged AppendEntries showed to match the leader's log.
    index: u64,
    /// The highest read round those AppendEntries carried, echoed with the answer (LOG-7).
    read_round: Option<u64>,
}

/// What [`Raft::send_append`] sent a follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AppendSent {
    /// Nothing: the follower has nothing to take now, or its probe is out.
    Nothing,
    /// A frame that carries the pending read round, if one is pending (LOG-7).
    Sent,
    /// Entries that left no room for the pending read round beside them.
    SentWithoutRound,
}

/// Why a proposal was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader takes writes; the leader known, if any (LOG-1's redirect).
    #[error("not the leader")]
    NotLeader {
        /// The leader this node knows in its term.
        leader: Option<PeerId>,
    },
    /// The leader is handing over; the successor takes the write.
    #[error("leadership is being transferred")]
    Transferring,
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The entry's data is larger than an entry may carry ([`MAX_ENTRY_BYTES`]), the bound
    /// of what a follower holds of an entry it receives in chunks (MEMB-6).
    #[error("the entry carries {size} bytes; at most {max} fit one entry")]
    TooLarge {
        /// Its data's size.
        size: usize,
        /// What fits.
        max: usize,
    },
}

/// Entries the driver writes to its storage, then reports with
/// [`Persisted::Entries`](crate::election::Persisted::Entries). Writing them replaces every stored entry at and after
/// the first one's index ([`Storage::append_entries`](crate::storage::Storage::append_entries)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogWrite {
    /// The entries, contiguous and ascending; never empty.
    pub entries: Vec<LogEntry>,
}

impl LogWrite {
    /// The last entry's position: what to report once the write is durable.
    pub fn last(&self) -> LogPosition {
        self.entries
            .last()
            .map_or_else(LogPosition::default, |entry| {
                LogPosition::new(entry.term, entry.index)
            })
    }
}

/// Where the log stands on one node, for the status answer and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogStatus {
    /// The highest index known committed.
    pub commit: u64,
    /// The highest index handed out for applying.
    pub applied: u64,
    /// The highest index durable here.
    pub persisted: u64,
    /// The snapshot's position (everything up to it is compacted).
    pub snapshot: LogPosition,
    /// On a leader: each follower's last matching index.
    pub followers: Vec<(PeerId, u64)>,
    /// MEMB-1: the configuration in force (`cluster.voters` until the log holds one).
    pub configuration: Configuration,
    /// MEMB-1: the index of the entry that carries it (the snapshot's when it came with the
    /// snapshot, 0 when `cluster.voters` seeds it); committed once `commit` reaches it.
    pub configuration_index: u64,
    /// MEMB-2: on a leader, how many entries each learner is behind its last entry.
    pub learner_lag: Vec<(PeerId, u64)>,
}

/// The log's API for the driver of a raft node with `[log]` (see the module docs).
/// After every call that takes `now`, drain the node's actions: messages may be queued.
#[derive(Debug)]
pub struct ReplicatedLog<'a> {
    pub(super) raft: &'a mut Raft,
}

impl ReplicatedLog<'_> {
    /// A write from a client (LOG-1): appended to this leader's log and sent to the
    /// followers; the answer is its position. It is committed when a
    /// [`Ready::committed`](crate::election::Ready::committed) hands out an entry at that
    /// position; an entry of
    /// another term at that index means it was lost with this leader's term.
    pub fn propose(&mut self, now: Instant, data: Vec<u8>) -> Result<LogPosition, ProposeError> {
        let raft = &mut *self.raft;
        if raft.shutdown.is_some() {
            return Err(ProposeError::ShuttingDown);
        }
        if !raft.is_leader() {
            return Err(ProposeError::NotLeader {
                leader: raft.leader,
            });
        }
        if raft.transfer().is_some() {
            return Err(ProposeError::Transferring);
        }
        // MEMB-6: an entry larger than a frame travels in chunks, up to this bound.
        if data.len() > MAX_ENTRY_BYTES {
            return Err(ProposeError::TooLarge {
                size: data.len(),
                max: MAX_ENTRY_BYTES,
            });
        }
        let term = raft.hard.term;
        let index = raft.log.append_new(term, EntryKind::Command, data);
        raft.replicate_proposal(now);
        raft.finish();
        Ok(LogPosition::new(term, index))
    }

    /// The entries to write now, if any; each is handed out once. (Drivers get them through
    /// [`Ready::entries`](crate::election::Ready::entries); the tests take them here.)
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn take_write(&mut self) -> Option<LogWrite> {
        let entries = self.raft.log.take_unstable();
        (!entries.is_empty()).then_some(LogWrite { entries })
    }

    /// The write that ended at `last` is durable (and every write before it); drivers report
    /// it with [`Persisted::Entries`](crate::election::Persisted::Entries).
    pub(crate) fn handle_persisted(&mut self, now: Instant, last: LogPosition) {
        let raft = &mut *self.raft;
        if raft.log.persisted_to(last) {
            raft.durable_moved(now);
        }
        raft.finish();
    }

    /// Committed, durable entries not yet applied, in order, at most `max`; each is handed
    /// out once.
    #[cfg(test)]
    pub(crate) fn take_committed(&mut self, max: usize) -> Vec<LogEntry> {
        self.raft.log.take_committed(max)
    }

    /// Committed entries from `index` on, at most `max` (fewer when the ones before the
    /// snapshot are asked for: those are compacted; the first one returned says where it starts).
    pub fn committed_from(&self, index: u64, max: usize) -> Vec<LogEntry> {
        self.raft.log.committed_from(index, max)
    }

    /// Where the log stands.
    pub fn status(&self) -> LogStatus {
        self.raft.log_status().unwrap_or_default()
    }

    /// The last entry's position.
    pub fn last(&self) -> LogPosition {
        self.raft.log.last()
    }
}

impl Raft {
    /// The replicated log's part of a batch (see [`Ready`](crate::election::Ready)): none
    /// while a hard-state write is in flight, so that on disk the log's writes follow the hard
    /// state they come after, and the entries only when no log write is in flight.
    pub(crate) fn take_log_ready(&mut self, ready: &mut crate::election::Ready) {
        use crate::election::Outputs as _;
        if self.config.log.is_none() || self.is_persisting() {
            return;
        }
        ready.install = self.snapshot_to_install.take();
        let entries = self.log.take_next_write();
        ready.entries = (!entries.is_empty()).then_some(LogWrite { entries });
        ready.committed = self.log.take_committed(usize::MAX);
        ready.reads = ReplicatedLog { raft: self }.take_read_results();
    }

    /// The replicated log's API, when this node carries one.
    pub fn replicated_log(&mut self) -> Option<ReplicatedLog<'_>> {
        self.config.log?;
        Some(ReplicatedLog { raft: self })
    }

    /// Where the log stands, when this node carries one.
    pub fn log_status(&self) -> Option<LogStatus> {
        self.config.log?;
        let followers = self
            .phase
            .leadership()
            .map(|leading| {
                leading
                    .progress
                    .iter()
                    .map(|(peer, progress)| (*peer, progress.matched))
                    .collect()
            })
            .unwrap_or_default();
        Some(LogStatus {
            commit: self.log.commit(),
            applied: self.log.applied(),
            persisted: self.log.persisted(),
            snapshot: self.log.snapshot(),
            followers,
            configuration: self.configuration().unwrap_or_default(),
            configuration_index: self.configuration_in_force().map_or(0, |(index, _)| index),
            learner_lag: self.learner_lag(),
        })
    }

    // -----------------------------------------------------------------------------------------
    // leader

    /// A new leader's first act on the log: an empty entry of its term, so that it can commit
    /// what earlier leaders left (Raft §5.4.2), and every follower probed from the end.
    pub(super) fn start_replication(&mut self) {
        let term = self.hard.term;
        self.log.append_new(term, EntryKind::Noop, Vec::new());
        let next = self.log.last().index;
        let peers = self.replication_peers();
        if let Some(leading) = self.phase.leadership_mut() {
            for peer in peers {
                leading.progress.insert(peer, Progress::new(next));
            }
        }
    }

    /// After a client's write: sends every follower what it can take now, but for a
    /// follower that already has [`PARTIAL_FRAMES_IN_FLIGHT`] message unanswered, to which
    /// the write goes only once it fills a frame with the others not yet sent
    /// ([`Raft::holds_partial_frame`]); otherwise it rides on the message that the next answer
    /// of that follower, or the next heartbeat, sends it. A follower in step with one that is
    /// sent the write now is sent it too, in the same message.
    ///
    /// Writes that arrive while the pipeline is busy so travel in fuller frames. Without the
    /// rule, on loopback, every write went to each follower in a frame of its own at 8 clients
    /// (1.95 messages per commit for two followers; 0.72 with it), and a message carried 2.25
    /// entries at 32 (0.91 per commit; 0.47 with it), every frame costing both ends a system
    /// call, its coding and, with a key, its sealing and opening (issue 26). The window still
    /// fills with full frames when writes outrun it; with shared answers (a broadcast link)
    /// the rule of [`Raft::replicate_to_all`] applies alone.
    pub(super) fn replicate_proposal(&mut self, now: Instant) {
        match self.config.log {
            Some(log_config) if !log_config.shared_acks => {
                let peers = self.replication_peers();
                let held: Vec<bool> = peers
                    .iter()
                    .map(|&peer| self.holds_partial_frame(peer, log_config))
                    .collect();
                // Followers in step (the same next index) are sent one message together, one
                // frame on a radio: one that goes now takes the others in step with it, so a
                // follower whose answer is late does not split that message in two.
                let going: BTreeSet<u64> = peers
                    .iter()
                    .zip(&held)
                    .filter(|(_, held)| !**held)
                    .filter_map(|(&peer, _)| self.progress_of(peer).map(|progress| progress.next))
                    .collect();
                for (peer, held) in peers.into_iter().zip(held) {
                    let in_step_with_one_going = self
                        .progress_of(peer)
                        .is_some_and(|progress| going.contains(&progress.next));
                    if !held || in_step_with_one_going {
                        self.send_append(now, peer);
                    }
                }
            }
            _ => self.replicate_to_all(now),
        }
    }

    /// Whether what `peer` would be sent now is a frame not yet full while
    /// [`PARTIAL_FRAMES_IN_FLIGHT`] messages to it are unanswered (see
    /// [`Raft::replicate_proposal`]). A follower being probed, sent a snapshot or an entry in
    /// chunks is never held: those have rules of their own.
    fn holds_partial_frame(&mut self, peer: PeerId, log_config: crate::raft::LogConfig) -> bool {
        let Some(progress) = self.progress_of(peer) else {
            return false;
        };
        if progress.chunks().is_some() || progress.snapshot().is_some() {
            return false;
        }
        if progress
            .inflight()
            .is_none_or(|n| n < PARTIAL_FRAMES_IN_FLIGHT)
        {
            return false;
        }
        let next = progress.next;
        !self.log.fills_frame(
            next,
            log_config.max_append_bytes,
            log_config.max_append_entries,
        )
    }

    /// Sends every follower what it can take now.
    ///
    /// Issue 27, item 2: with shared answers (a broadcast link), followers in step — being
    /// replicated to from the same next index — take the message together whenever one of
    /// them has room in its window: the others hear that broadcast anyway, and counting it
    /// keeps them in step, so the next message is one frame again rather than one each. A
    /// window may then hold up to twice `max_inflight` messages.
    pub(super) fn replicate_to_all(&mut self, now: Instant) {
        let peers = self.replication_peers();
        let Some(log_config) = self.config.log.filter(|log| log.shared_acks) else {
            for peer in peers {
                self.send_append(now, peer);
            }
            return;
        };
        let window = log_config.max_inflight;
        let in_step_with_room: BTreeSet<u64> = self
            .phase
            .leadership()
            .map(|leading| {
                leading
                    .progress
                    .values()
                    .filter(|progress| progress.inflight().is_some_and(|n| n < window))
                    .map(|progress| progress.next)
                    .collect()
            })
            .unwrap_or_default();
        for peer in peers {
            let rides_along = self
                .phase
                .leadership()
                .and_then(|leading| leading.progress.get(&peer))
                .is_some_and(|progress| {
                    progress.inflight().is_some() && in_step_with_room.contains(&progress.next)
                });
            let window = if rides_along { 2 * window } else { window };
            self.send_append_within(now, peer, window);
        }
    }

    /// The heartbeat to one follower: a lost probe or pipeline is sent again, and a follower
    /// with nothing to take gets an AppendEntries at its match, carrying the commit index.
    pub(super) fn heartbeat_with_log(&mut self, now: Instant, peer: PeerId) {
        let interval = self.config.heartbeat_interval;
        let ceiling = self.config.election_timeout_max;
        let shared = self.config.log.is_some_and(|log| log.shared_acks);
        // With shared answers a follower may leave its answer to the one after the next
        // heartbeat (`acks.rs`): its message is not lost before two intervals have passed.
        let floor = if shared { 2 * interval } else { interval };
        let Some(progress) = self.progress_of(peer) else {
            return;
        };
        if progress.heartbeat(now, floor.min(ceiling), ceiling) {
            debug!(%peer, matched = progress.matched, "replication stalled; probing again");
        }
        let busy = progress.sent_entries_within(now, interval);
        if shared && busy && self.reads.round_to_carry().is_none() {
            // Issue 27, item 2: on a broadcast link every frame takes the air from the
            // others; a follower that was sent entries within the interval heard from its
            // leader (and learns the commit index) without a heartbeat and its answers.
            self.send_append(now, peer);
            return;
        }
        self.send_append_with_round(now, peer);
    }

    /// Sends `peer` what it can take now and, when that did not carry the pending read round
    /// (nothing to take, or entries that left no room for it), an AppendEntries at its match
    /// that does (LOG-7).
    pub(super) fn send_append_with_round(&mut self, now: Instant, peer: PeerId) {
        if self.send_append(now, peer) != AppendSent::Sent {
            self.send_commit_heartbeat(peer);
        }
    }

    /// Sends `peer` the entries it can take now; what went.
    pub(super) fn send_append(&mut self, now: Instant, peer: PeerId) -> AppendSent {
        let Some(log_config) = self.config.log else {
            return AppendSent::Nothing;
        };
        self.send_append_within(now, peer, log_config.max_inflight)
    }

    /// [`Raft::send_append`] with a pipeline of at most `window` unanswered messages.
    fn send_append_within(&mut self, now: Instant, peer: PeerId, window: usize) -> AppendSent {
        let Some(log_config) = self.config.log else {
            return AppendSent::Nothing;
        };
        let last = self.log.last().index;
        let compacted = self.log.snapshot().index;
        let Some(progress) = self.progress_of(peer) else {
            return AppendSent::Nothing;
        };
        if progress.chunks().is_some() {
            return self.send_entry_chunks(
                now,
                peer,
                log_config.max_append_bytes,
                log_config.max_inflight,
            );
        }
        if progress.snapshot().is_some() || progress.next <= compacted {
            // LOG-4: the entries it needs next are gone behind the snapshot.
            // An InstallSnapshot carries no read round; the follower could not confirm one
            // before it holds the snapshot anyway.
            return if self.send_snapshot_chunk(peer, log_config.max_append_bytes) {
                AppendSent::Sent
            } else {
                AppendSent::Nothing
            };
        }
        match progress.state() {
            // One probe at a time.
            ReplicationState::Probe { sent: true } => return AppendSent::Nothing,
            ReplicationState::Replicate { inflight }
                if inflight.len() >= window || progress.next > last =>
            {
                return AppendSent::Nothing;
            }
            _ => {}
        }
        let next = progress.next;
        let probing = progress.is_probing();
        if !probing && self.needs_chunks(next, log_config.max_append_bytes) {
            // MEMB-6: an entry larger than a frame goes in chunks after what was sent before
            // it. The follower takes a chunk only where its log holds the entry before (in
            // flight to its disk or not), and refuses it otherwise, which sends it back to
            // probing as any refusal does.
            if let Some(progress) = self.progress_of(peer) {
                progress.become_chunks();
            }
            return self.send_entry_chunks(
                now,
                peer,
                log_config.max_append_bytes,
                log_config.max_inflight,
            );
        }
        let prev_index = next - 1;
        let Some(prev_term) = self.log.term_at(prev_index) else {
            // Unreachable while `next` stays past the snapshot (checked above); kept as the
            // safe answer: probe at the snapshot.
            let snapshot = self.log.snapshot();
            if let Some(progress) = self.progress_of(peer) {
                progress.next = snapshot.index + 1;
            }
            return AppendSent::Nothing;
        };
        self.send_entry_batch(now, peer, (prev_index, prev_term), probing, log_config)
    }

    /// Sends `peer` the entries after `prev` that fit one frame (none for a probe at the end
    /// of the log), with the commit index and, where it fits, the pending read round.
    fn send_entry_batch(
        &mut self,
        now: Instant,
        peer: PeerId,
        (prev_index, prev_term): (u64, u64),
        probing: bool,
        log_config: crate::raft::LogConfig,
    ) -> AppendSent {
        let entries = self.log.batch_from(
            prev_index + 1,
            log_config.max_append_bytes,
            log_config.max_append_entries,
        );
        if !probing && entries.is_empty() {
            return AppendSent::Nothing;
        }
        let sent_last = prev_index + entries.len() as u64;
        let commit = self.log.commit();
        // LOG-7: a pending read round rides along only where it fits beside the entries; a
        // batch that fills the frame leaves it to the heartbeats the round started with.
        let entry_bytes: usize = entries.iter().map(entry_wire_size).sum();
        let read_round = self
            .reads
            .round_to_carry()
            .filter(|_| entry_bytes + READ_ROUND_WIRE_BYTES <= log_config.max_append_bytes);
        if let Some(progress) = self.progress_of(peer) {
            progress.sent_entries(sent_last, now);
        }
        let append = AppendEntries {
            term: self.hard.term,
            leader: self.config.id,
            prev_index,
            prev_term,
            entries,
            commit,
            pinned: self.hard.manual_override == Some(self.config.id),
            read_round,
            chunk: None,
        };
        self.send(peer, RaftMessage::AppendEntries(append));
        if read_round.is_none() && self.reads.round_to_carry().is_some() {
            AppendSent::SentWithoutRound
        } else {
            AppendSent::Sent
        }
    }

    /// An AppendEntries at `peer`'s match with no entries: it always matches, and tells the
    /// follower the commit index (never beyond what it holds).
    pub(super) fn send_commit_heartbeat(&mut self, peer: PeerId) {
        let matched = self.match_index_of(peer);
        let Some(prev_term) = self.log.term_at(matched) else {
            return;
        };
        let append = AppendEntries {
            term: self.hard.term,
            leader: self.config.id,
            prev_index: matched,
            prev_term,
            entries: Vec::new(),
            commit: self.log.commit().min(matched),
            pinned: self.hard.manual_override == Some(self.config.id),
            read_round: self.reads.round_to_carry(),
            chunk: None,
        };
        self.send(peer, RaftMessage::AppendEntries(append));
    }

    /// More of the log is durable here: a leader may commit further, a follower may send the
    /// acknowledgement that waited, and a catch-up may end.
    pub(super) fn durable_moved(&mut self, now: Instant) {
        if self.is_leader() {
            self.advance_commit(now);
        } else {
            self.send_pending_ack();
            self.end_catch_up_if_durable();
        }
    }

    /// A follower answered an AppendEntries (LOG-2).
    pub(super) fn replication_answered(
        &mut self,
        now: Instant,
        from: PeerId,
        response: AppendResp,
    ) {
        self.read_round_echoed(now, from, response.read_round);
        let Some(progress) = self.progress_of(from) else {
            return;
        };
        if response.success {
            progress.acknowledged(response.match_index, now);
            if let Some(ack) = response.chunk {
                let len = self.log.entry_at(ack.index).map(|entry| entry.data.len());
                if let Some(progress) = self.progress_of(from) {
                    progress.chunk_answered(ack, len, now);
                }
            }
            self.advance_commit(now);
            if self.config.log.is_some_and(|log| log.shared_acks) {
                // Issue 27, item 2: followers answer in turns, so an answer frees room in
                // the windows of the others in step too; what goes to them all now is one
                // message, one broadcast on the radio, where sending to `from` alone would
                // leave the others a message of their own later.
                self.replicate_to_all(now);
                return;
            }
        } else if let Some(hint) = response.hint {
            if progress.refusal_is_current(response.match_index) {
                progress.refused(hint.index);
            } else {
                // Issue 27, item 1: the refusal of an AppendEntries meant for others, or of
                // one already answered: nothing this follower was sent is in question.
                return;
            }
        }
        self.send_append(now, from);
    }

    /// LOG-3: commits the highest index a majority of the voters hold durably, if it is of
    /// this leader's term.
    pub(super) fn advance_commit(&mut self, now: Instant) {
        if !self.is_leader() || self.config.log.is_none() {
            return;
        }
        let Electorate::Voters(voters) = self.electorate() else {
            return;
        };
        let mut held: Vec<u64> = voters
            .iter()
            .map(|voter| {
                if *voter == self.config.id {
                    self.log.persisted()
                } else {
                    self.match_index_of(*voter)
                }
            })
            .collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        let quorum = voters.len() / 2 + 1;
        let Some(&candidate) = held.get(quorum - 1) else {
            return;
        };
        if candidate > self.log.commit() && self.log.term_at(candidate) == Some(self.hard.term) {
            self.log.commit_to(candidate);
            self.read_index_committed(now);
        }
        self.step_down_if_removed(now);
    }

    /// MEMB-1: a leader that its latest configuration leaves out of the voters led until that
    /// configuration committed (counting the others only, above), so that the change took
    /// effect; now that it has, a leader outside the electorate steps down. The remaining
    /// voters elect a successor once their election timeouts pass.
    fn step_down_if_removed(&mut self, now: Instant) {
        if !self.is_leader() || self.is_voter(self.config.id) {
            return;
        }
        let committed = self
            .log
            .configuration_index()
            .is_none_or(|index| index <= self.log.commit());
        if committed {
            info!(
                term = self.hard.term,
                "the configuration that removes this leader committed; stepping down"
            );
            self.become_follower(now, self.hard.term, None, LeaderChangeCause::Resign);
        }
    }

    /// `peer`'s progress while leading; a peer first met now (a follower that connected
    /// after the win) is probed from the end of the log.
    pub(super) fn progress_of(&mut self, peer: PeerId) -> Option<&mut Progress> {
        if peer == self.config.id {
            return None;
        }
        let next = self.log.last().index + 1;
        self.phase.leadership_mut().map(|leading| {
            leading
                .progress
                .entry(peer)
                .or_insert_with(|| Progress::new(next))
        })
    }

    // -----------------------------------------------------------------------------------------
    // follower

    /// An AppendEntries from the leader of this term (LOG-2): entries appended, the commit
    /// index learned, and the answer sent now or once the entries are durable.
    pub(super) fn follow_append(&mut self, from: PeerId, append: &AppendEntries) {
        if self
            .incoming_entry
            .as_ref()
            .is_some_and(|incoming| !incoming.is_of_term(self.hard.term))
        {
            // MEMB-6: a new leader may have another entry at that index.
            self.incoming_entry = None;
        }
        if let Some(chunk) = &append.chunk {
            self.follow_chunk(from, append, chunk);
            return;
        }
        // LOG-2: a pipelined message that overtook its predecessor waits for it.
        if self.hold_overtaking(from, append) {
            return;
        }
        let prev = LogPosition::new(append.prev_term, append.prev_index);
        if self.accept_append(
            from,
            prev,
            &append.entries,
            append.commit,
            append.read_round,
            append.entries.is_empty(),
        ) {
            self.release_held(from, !append.entries.is_empty());
        }
    }

    /// Appends `entries` after the leader's entry at `prev` when this log holds that entry:
    /// the commit index learned and the answer sent now or once durable; otherwise refused
    /// with a hint (LOG-2). Whether it was accepted. A `heartbeat` (no entries and no chunk)
    /// that shows nothing new may go unanswered (`acks.rs`).
    pub(super) fn accept_append(
        &mut self,
        from: PeerId,
        prev: LogPosition,
        entries: &[LogEntry],
        commit: u64,
        read_round: Option<u64>,
        heartbeat: bool,
    ) -> bool {
        let term = self.hard.term;
        match self.log.append_from_leader(prev, entries) {
            Ok(verified) => {
                self.log.commit_to(commit.min(verified));
                let (matched, moved) = self.note_leader_match(from, term, verified);
                if self.log_catch_up
                    && commit > 0
                    && commit <= matched
                    && self.log.term_at(commit) == Some(term)
                {
                    // The leader committed an entry of its own term, so its log through that
                    // entry holds every entry committed before; this log matches it there.
                    self.catch_up_target = Some(commit);
                }
                self.end_catch_up_if_durable();
                let answer = if heartbeat {
                    !self.skips_heartbeat_answer(from, term, matched, read_round)
                } else {
                    !moved || !self.leaves_answer_to_later(matched, read_round)
                };
                if answer {
                    self.ack_when_durable(from, matched, read_round);
                }
                true
            }
            Err(hint) => {
                if hint.term != 0 {
                    // MEMB-6: this log conflicts with the leader's, so an entry being received
                    // may no longer follow it. (A log only too short for the message, as for
                    // one sent to others that this node overheard, changes nothing here.)
                    self.incoming_entry = None;
                }
                // LOG-7: a refusal still says this node follows `from` in this term. The
                // index the refused message followed tells the leader which message it was
                // (issue 27, item 1).
                let response = AppendResp {
                    term,
                    success: false,
                    match_index: prev.index,
                    hint: Some(hint),
                    priority: self.priority,
                    read_round,
                    chunk: None,
                };
                self.send(from, RaftMessage::AppendResp(response));
                false
            }
        }
    }

    /// A message during a catch-up: a voter's request shows its log. When every other voter
    /// has shown an empty log and this one is empty, no entry was ever committed (a committed
    /// entry is on a majority), so there is nothing to catch up with: the catch-up ends. This is
    /// what lets a cluster whose nodes all started without a WAL elect at all.
    pub(super) fn note_catch_up_evidence(&mut self, from: PeerId, message: &RaftMessage) {
        let RaftMessage::RequestVote(request) = message else {
            return;
        };
        if !self.is_voter(from) || request.candidate != from {
            return;
        }
        if request.last_log_index == 0 {
            self.catch_up_empty_peers.insert(from);
        } else {
            self.catch_up_empty_peers.remove(&from);
        }
        let Electorate::Voters(voters) = self.electorate() else {
            return;
        };
        let everyone_empty = voters
            .iter()
            .filter(|voter| **voter != self.config.id)
            .all(|voter| self.catch_up_empty_peers.contains(voter));
        if everyone_empty && self.log.last() == LogPosition::default() {
            self.log_catch_up = false;
            self.catch_up_target = None;
            info!(
                "every other voter's log is empty as well: nothing was ever committed, so \
                 there is nothing to catch up with; voting again"
            );
        }
    }

    /// Acknowledges to the leader `from` that this log matches its own through `matched`: now
    /// when that is durable, otherwise once it is (LOG-3: a follower acknowledges only what a
    /// crash keeps).
    /// `read_round` is the AppendEntries' round, echoed with the acknowledgement (LOG-7).
    pub(super) fn ack_when_durable(&mut self, from: PeerId, matched: u64, read_round: Option<u64>) {
        let term = self.hard.term;
        if self.log.persisted() >= matched {
            self.send_append_ack(from, term, matched, read_round);
        } else {
            let (index, read_round) = match self.pending_ack {
                Some(pending) if pending.leader == from && pending.term == term => (
                    pending.index.max(matched),
                    pending.read_round.max(read_round),
                ),
                _ => (matched, read_round),
            };
            self.pending_ack = Some(PendingAck {
                leader: from,
                term,
                index,
                read_round,
            });
            if read_round.is_some() {
                // LOG-7: the leader's reads need the echo, not the new entries: it goes now,
                // with the part of the match that is durable already (what a pending ack sends
                // part-way too), rather than after the fsync.
                let durable = self.log.persisted().min(matched);
                self.send_append_ack(from, term, durable, read_round);
            }
        }
    }

    /// Ends a catch-up after a lost WAL once the log is durable through the leader's commit
    /// it matched: it holds every entry ever committed before, on disk, and may vote again.
    pub(super) fn end_catch_up_if_durable(&mut self) {
        let Some(target) = self.catch_up_target else {
            return;
        };
        if self.log_catch_up && self.log.persisted() >= target {
            self.log_catch_up = false;
            self.catch_up_target = None;
            info!(
                term = self.hard.term,
                commit = target,
                "log caught up with the leader after a lost WAL; voting again"
            );
        }
    }

    /// Sends the acknowledgement that waited for a write, as far as the log is durable now.
    pub(super) fn send_pending_ack(&mut self) {
        let Some(pending) = self.pending_ack else {
            return;
        };
        if pending.term != self.hard.term || self.leader != Some(pending.leader) {
            self.pending_ack = None;
            return;
        }
        let durable = self.log.persisted().min(pending.index);
        if durable >= pending.index {
            self.pending_ack = None;
        }
        self.send_append_ack(pending.leader, pending.term, durable, pending.read_round);
    }

    fn send_append_ack(
        &mut self,
        leader: PeerId,
        term: u64,
        matched: u64,
        read_round: Option<u64>,
    ) {
        let response = AppendResp {
            term,
            success: true,
            match_index: matched,
            hint: None,
            priority: self.priority,
            read_round,
            chunk: None,
        };
        self.note_answer_sent(leader, term, matched);
        self.send(leader, RaftMessage::AppendResp(response));
    }
}
