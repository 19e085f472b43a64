//! Snapshots and compaction (LOG-4): when the driver should snapshot its state machine, the
//! log compacted behind the snapshot, and `InstallSnapshot` to a follower behind the
//! compaction point.
//!
//! # Taking a snapshot
//!
//! The core cannot serialize the driver's state machine, so the driver asks
//! ([`ReplicatedLog::snapshot_due`]: once `snapshot_entries` entries were applied since the
//! last snapshot), takes its machine's bytes at that applied index, and hands them back
//! ([`ReplicatedLog::snapshot_taken`]); the log drops the entries up to it from memory at once
//! (they are applied, hence durable), and the driver saves the snapshot to its storage, which
//! deletes the segments behind it. The log keeps the bytes: a leader sends them to followers,
//! and one transfer must read one image from its first chunk to its last while the machine
//! moves on, so some copy has to stay put anyway. (A machine of a few megabytes is the scale
//! this is built for; a larger one would stream the image from the snapshot file instead.)
//!
//! # Sending one
//!
//! A follower whose next index is at or below the leader's snapshot gets the image in chunks
//! of at most `max_append_bytes`, one chunk in flight, each addressed by its byte offset
//! ([`SnapshotTransfer`]). An unanswered chunk is sent again at the next heartbeat, like a
//! probe. The follower answers every chunk but the last with the offset it expects next
//! ([`SnapshotResp`]): a lost chunk is resumed from there, not from the start, and a chunk out
//! of order is answered with the offset it wanted. A new snapshot taken on the leader
//! mid-transfer restarts the transfer with the new image at offset 0.
//!
//! # Installing one
//!
//! With the last chunk the follower holds the whole image: its log restarts after it
//! ([`RaftLog::install`](crate::raft::log::RaftLog::install)), and the driver takes it
//! ([`ReplicatedLog::take_snapshot_to_install`]) to restore its machine from and save. The
//! last chunk is answered only once the driver reported the snapshot durable
//! ([`ReplicatedLog::handle_snapshot_persisted`]), and with an ordinary `AppendResp` at the
//! snapshot's index, so the leader counts it like any durable acknowledgement and goes on with
//! entries from there. A chunk of a snapshot this node already holds committed is answered the
//! same way, as far as it is durable.
//!
//! The image is gathered in memory until its last chunk, so what one follower holds of it is
//! bounded ([`MAX_INCOMING_SNAPSHOT_BYTES`]): past the bound, the follower drops what it
//! holds, says so once at WARN, and refuses the rest of that snapshot, answering each further
//! chunk as a copy of one it has (the leader then sends it again only at heartbeat pace, not
//! in a hot loop). A new snapshot, term or leader is received afresh.

use conclave_protocol::InstallSnapshot;

use super::replication::ReplicatedLog;
use super::*;
use crate::storage::Snapshot;

/// A follower heard from within this many heartbeat intervals before the last heartbeat is
/// answering: a snapshot waits for it while it catches up by entries.
const ANSWERING_HEARTBEATS: u32 = 2;

/// LOG-4: what a follower holds of one snapshot being received, at most: 1 GiB. The leader
/// keeps its whole image in memory to send it (the scale this is built for is a machine of a
/// few megabytes), so an image larger than this is not one a sound leader sends; the bound
/// only keeps a follower from being made to grow without limit by a faulty or hostile
/// sender, and is kept far above any real image, so it is not a setting.
pub(crate) const MAX_INCOMING_SNAPSHOT_BYTES: usize = 1 << 30;

/// A leader's transfer of its snapshot to one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SnapshotTransfer {
    /// The snapshot being sent.
    pub(super) last: LogPosition,
    /// The byte offset of the chunk to send next (or in flight).
    pub(super) offset: u64,
    /// The chunk at `offset` went out and is not answered yet.
    pub(super) sent: bool,
}

/// What the configuration adds to a last chunk beyond its encoded bytes: MessagePack's `bin`
/// header of the optional field (at most 5 bytes), with margin.
const CONFIG_OVERHEAD: usize = 8;

/// A follower's snapshot being received, chunk by chunk.
#[derive(Debug, Clone)]
pub(super) struct IncomingSnapshot {
    /// Who sends it, in which term: another leader's image of the same position need not be
    /// the same bytes, so chunks are never mixed across leaders.
    leader: PeerId,
    term: u64,
    last: LogPosition,
    data: Vec<u8>,
    /// It grew past the bound: `data` was dropped, and its further chunks are refused.
    refused: bool,
}

impl ReplicatedLog<'_> {
    /// LOG-4: the applied position the driver should snapshot its machine at now, if one is
    /// due (`snapshot_entries` applied since the last snapshot). The driver takes its machine's
    /// bytes there and calls [`ReplicatedLog::snapshot_taken`].
    ///
    /// A leader waits while a follower is catching up by entries — it answers, it holds the
    /// current snapshot but not yet what was applied — up to `2 × snapshot_entries` since the
    /// last snapshot: compacting now would make it take the whole machine image, in chunks,
    /// instead of the few entries it lacks (on an ESP-NOW radio, hundreds of frames instead of
    /// a few). A follower being probed again counts as catching up as long as it answers (on a
    /// link that reorders frames, a follower whose reorder buffer is full refuses a message
    /// that overtook its predecessor and is probed again). One silent for the last `ANSWERING_HEARTBEATS`
    /// heartbeat intervals delays nothing; one that answers but falls ever further behind
    /// delays compaction by that bound at most.
    #[must_use]
    pub fn snapshot_due(&self) -> Option<LogPosition> {
        let raft = &*self.raft;
        let every = raft.config.log?.snapshot_entries;
        let applied = raft.log.applied();
        let since = applied.saturating_sub(raft.log.snapshot().index);
        if every == 0 || raft.snapshot_to_install.is_some() || since < every {
            return None;
        }
        let lately = raft.config.heartbeat_interval * (ANSWERING_HEARTBEATS + 1);
        let follower_catching_up = raft.phase.leadership().is_some_and(|leading| {
            leading.progress.iter().any(|(peer, progress)| {
                let answering = leading.last_heard.get(peer).is_some_and(|&heard| {
                    // The next heartbeat is due one interval after the last one went out.
                    leading.heartbeat_deadline.saturating_duration_since(heard) <= lately
                });
                answering
                    && progress.snapshot().is_none()
                    && progress.matched >= raft.log.snapshot().index
                    && progress.matched < applied
            })
        });
        if follower_catching_up && since < every.saturating_mul(2) {
            return None;
        }
        Some(LogPosition::new(raft.log.term_at(applied)?, applied))
    }

    /// The driver's machine image at `snapshot.last`, an applied position (normally the one
    /// [`ReplicatedLog::snapshot_due`] named): the log is compacted behind it and keeps the
    /// bytes to send to followers. The driver then saves it to its storage. Whether it was
    /// taken: one at or behind the current snapshot, past what was applied, or of another
    /// term than the log holds there is refused and changes nothing.
    pub fn snapshot_taken(&mut self, now: Instant, snapshot: Snapshot) -> bool {
        let raft = &mut *self.raft;
        let last = snapshot.last;
        let taken = raft.log.compact(snapshot);
        if taken {
            debug!(
                index = last.index,
                term = last.term,
                "log compacted behind a snapshot"
            );
            // Followers whose next entry is gone now get the snapshot instead.
            if raft.is_leader() {
                raft.replicate_to_all(now);
            }
        }
        raft.finish();
        taken
    }

    /// LOG-4: a leader's snapshot this follower received whole and installed in its log, if
    /// the driver has not taken it yet: the driver restores its machine from it (before it
    /// applies anything [`ReplicatedLog::take_committed`] hands out after it), saves it, and
    /// reports it with [`ReplicatedLog::handle_snapshot_persisted`].
    #[must_use]
    #[cfg(test)]
    pub(crate) fn take_snapshot_to_install(&mut self) -> Option<Snapshot> {
        self.raft.snapshot_to_install.take()
    }

    /// The snapshot ending at `last` is durable in the driver's storage (an installed one, or
    /// one this node took): its acknowledgement may leave now.
    pub(crate) fn handle_snapshot_persisted(&mut self, now: Instant, last: LogPosition) {
        let raft = &mut *self.raft;
        if raft.log.snapshot_persisted(last.index) {
            raft.durable_moved(now);
        }
        raft.finish();
    }
}

impl Raft {
    /// Sends `peer` the next chunk of the snapshot, unless one is in flight; whether the
    /// follower is being sent the snapshot (so that no commit heartbeat goes out beside it).
    pub(super) fn send_snapshot_chunk(&mut self, peer: PeerId, max_bytes: usize) -> bool {
        let Some((last, len)) = self
            .log
            .image()
            .map(|image| (image.last, image.data.len() as u64))
        else {
            // A log started at a bare position has no image to send; probe at the snapshot.
            let compacted = self.log.snapshot().index;
            if let Some(progress) = self.progress_of(peer) {
                let next = progress.next.max(compacted + 1);
                if progress.snapshot().is_some() {
                    progress.become_probe(next);
                } else {
                    progress.next = next;
                }
            }
            return false;
        };
        let Some(progress) = self.progress_of(peer) else {
            return false;
        };
        let transfer = match progress.snapshot() {
            Some(&transfer) if transfer.last == last => transfer,
            _ => {
                debug!(%peer, index = last.index, bytes = len, "sending the snapshot");
                SnapshotTransfer {
                    last,
                    offset: 0,
                    sent: false,
                }
            }
        };
        // Whatever was pipelined is void: the follower starts over from the snapshot.
        progress.become_snapshot(SnapshotTransfer {
            sent: true,
            ..transfer
        });
        if transfer.sent {
            return true;
        }
        let offset = transfer.offset.min(len);
        // MEMB-1: the last chunk carries the configuration in force at the snapshot; every
        // chunk leaves room for it, so that whichever is last still fits the frame.
        let config = self.log.image().and_then(|image| image.config.clone());
        let room = config
            .as_ref()
            .map_or(0, |config| config.encode().len() + CONFIG_OVERHEAD);
        let budget = (max_bytes as u64).saturating_sub(room as u64).max(1);
        let end = offset.saturating_add(budget).min(len);
        let data = self
            .log
            .image()
            .map(|image| image.data[offset as usize..end as usize].to_vec())
            .unwrap_or_default();
        let chunk = InstallSnapshot {
            term: self.hard.term,
            leader: self.config.id,
            last_index: last.index,
            last_term: last.term,
            offset,
            data,
            done: end == len,
            config: config.filter(|_| end == len).map(Box::new),
        };
        self.send(peer, RaftMessage::InstallSnapshot(chunk));
        true
    }

    /// A follower answered a chunk that was not the last: resume from the offset it expects.
    pub(super) fn handle_snapshot_resp(
        &mut self,
        now: Instant,
        from: PeerId,
        response: SnapshotResp,
    ) {
        let Some(leading) = self.phase.leadership_mut() else {
            return;
        };
        leading.recent_active.insert(from);
        leading.last_heard.insert(from, now);
        let Some(len) = self.log.image().map(|image| image.data.len() as u64) else {
            return;
        };
        let Some(progress) = self.progress_of(from) else {
            return;
        };
        let Some(transfer) = progress.snapshot_mut() else {
            return;
        };
        if transfer.last.index != response.last_index {
            // About an earlier transfer.
            return;
        }
        let next = response.next_offset.min(len);
        if response.success && next <= transfer.offset {
            // A duplicate, or the answer to a chunk sent again: the newer answer is in hand.
            return;
        }
        transfer.offset = next;
        transfer.sent = false;
        self.send_append(now, from);
    }

    /// A chunk of the leader's snapshot (LOG-4).
    pub(super) fn handle_install_snapshot(
        &mut self,
        now: Instant,
        from: PeerId,
        chunk: InstallSnapshot,
    ) {
        if !self.hear_leader(now, from) || self.config.log.is_none() {
            return;
        }
        let term = self.hard.term;
        if chunk.last_index <= self.log.commit() {
            // Held already, committed: acknowledge it as far as it is durable (the answer to
            // a last chunk sent again while the install was being saved, or a late chunk).
            self.incoming_snapshot = None;
            self.ack_when_durable(from, chunk.last_index, None);
            return;
        }
        let last = LogPosition::new(chunk.last_term, chunk.last_index);
        let held = self
            .incoming_snapshot
            .take()
            .filter(|held| held.leader == from && held.term == term && held.last == last);
        let mut incoming = match held {
            Some(held) if held.refused => {
                self.incoming_snapshot = Some(held);
                // Answered as a copy of a chunk it has: the leader waits for the heartbeat to
                // send again rather than resending at once.
                self.send_snapshot_resp(from, chunk.last_index, chunk.offset, true);
                return;
            }
            _ if chunk.offset == 0 => IncomingSnapshot {
                leader: from,
                term,
                last,
                data: Vec::new(),
                refused: false,
            },
            Some(held) if held.data.len() as u64 == chunk.offset => held,
            held => {
                let expected = held.as_ref().map_or(0, |held| held.data.len() as u64);
                debug!(
                    %from,
                    offset = chunk.offset,
                    expected,
                    "snapshot chunk out of order; asking for the expected offset"
                );
                self.incoming_snapshot = held;
                self.send_snapshot_resp(from, chunk.last_index, expected, false);
                return;
            }
        };
        if incoming.data.len().saturating_add(chunk.data.len()) > self.incoming_snapshot_limit {
            self.refuse_oversized_snapshot(from, incoming, &chunk);
            return;
        }
        incoming.data.extend_from_slice(&chunk.data);
        if !chunk.done {
            let next = incoming.data.len() as u64;
            self.incoming_snapshot = Some(incoming);
            self.send_snapshot_resp(from, chunk.last_index, next, true);
            return;
        }
        self.install_incoming(from, incoming, chunk.config.map(|config| *config));
    }

    /// The last chunk of `incoming`, from leader `from`, arrived: the log takes the snapshot
    /// (the driver restores its machine from it and saves it), acknowledged once durable.
    fn install_incoming(
        &mut self,
        from: PeerId,
        incoming: IncomingSnapshot,
        config: Option<Configuration>,
    ) {
        let last = incoming.last;
        let snapshot = Snapshot {
            last,
            data: incoming.data.into(),
            config,
        };
        info!(
            %from,
            index = last.index,
            term = last.term,
            bytes = snapshot.data.len(),
            "installing the leader's snapshot"
        );
        if self.log.install(snapshot.clone()) {
            self.snapshot_to_install = Some(snapshot);
        }
        // LOG-2: held messages were placed against the log the snapshot replaced.
        self.drop_reorder_buffer();
        // The install counts once it is durable (handle_snapshot_persisted).
        self.ack_when_durable(from, last.index, None);
    }

    /// LOG-4: the snapshot `incoming` would grow past the bound with `chunk`: what it holds is
    /// dropped, and it is remembered as refused so that its further chunks are too.
    fn refuse_oversized_snapshot(
        &mut self,
        from: PeerId,
        incoming: IncomingSnapshot,
        chunk: &InstallSnapshot,
    ) {
        let size = incoming.data.len().saturating_add(chunk.data.len());
        warn!(
            %from,
            index = incoming.last.index,
            term = incoming.last.term,
            size,
            bound = self.incoming_snapshot_limit,
            "the leader's snapshot grows past the {} bytes a follower holds of one ({size} \
             bytes with this chunk); dropped, and its further chunks refused",
            self.incoming_snapshot_limit
        );
        self.incoming_snapshot = Some(IncomingSnapshot {
            data: Vec::new(),
            refused: true,
            ..incoming
        });
        self.send_snapshot_resp(from, chunk.last_index, chunk.offset, true);
    }

    /// Lowers the bound of what this follower holds of a snapshot being received.
    #[cfg(test)]
    pub(crate) fn limit_incoming_snapshot(&mut self, bytes: usize) {
        self.incoming_snapshot_limit = bytes;
    }

    fn send_snapshot_resp(&mut self, to: PeerId, last_index: u64, next_offset: u64, success: bool) {
        let response = SnapshotResp {
            term: self.hard.term,
            last_index,
            next_offset,
            success,
        };
        self.send(to, RaftMessage::SnapshotResp(response));
    }
}
