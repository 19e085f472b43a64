//! Linearizable reads by a read index (LOG-7; the Raft thesis §6.4, etcd's `ReadOnlySafe`).
//!
//! A read on the leader must see every write acknowledged before it started, without writing
//! anything to the log. The leader takes the read with [`ReplicatedLog::request_read`] and
//! answers it through [`ReplicatedLog::take_read_results`] with a *read index*: the driver
//! serves the read once its state machine has applied that index. Two conditions make the
//! index safe:
//!
//! - **The leader has committed an entry of its own term** (the no-op at the start of its
//!   term). Before that, its commit index may lag what an earlier leader committed; a read
//!   taken then waits, and gets the commit index of the moment the no-op commits.
//! - **A heartbeat round confirms it still leads.** Each AppendEntries carries the leader's
//!   latest *read round* while reads wait for one, and a follower that takes the sender as the
//!   leader of its term echoes the round in its AppendResp. Once a majority of the voters, the
//!   leader counting itself, have echoed a round at or after the one a read waits for, in the
//!   leader's current term, no other leader can have committed anything before that round
//!   left: a leader of a higher term needs a majority in that term, and each of these voters
//!   was still in this term after the round was sent. The read is ready at its index.
//!
//! Rounds are numbered by a counter that only grows while the process lives, so an echo of an
//! earlier term's round can never pass for a later one; and an echo only counts when its
//! AppendResp is of the current term.
//!
//! **Batching.** At most one round is in flight. A read taken while none is starts one at
//! once: an AppendEntries to every follower (what it would get at a heartbeat). A read taken
//! while one is in flight waits for the next round, which starts as soon as the one in flight
//! is confirmed, or at the next heartbeat if that comes first (a round lost with its messages
//! is thereby sent again). So under load one broadcast per round trip confirms every read that
//! arrived during the previous one, and a quiet leader's heartbeats carry no round at all.
//! A single voter confirms its own rounds: its reads are ready at once.
//!
//! **Failure.** A leader that steps down, or whose term changes, fails every read still
//! waiting with [`ReadError::NotLeader`] (the driver answers as it does a refused proposal:
//! the client asks the leader again). A read that was ready stays ready: it was confirmed while
//! this node led. Reads are never served from a follower's own view: a follower refuses them.

use std::collections::{BTreeMap, VecDeque};

use super::*;

/// Reads waiting for a round or for the leader's first commit of its term, at most. Past it a
/// read is refused: a client flood must not grow the leader's memory without bound.
pub(crate) const MAX_PENDING_READS: usize = 4096;

/// The most an AppendEntries grows by when it carries a read round: a MessagePack u64 (its
/// trailing field adds no array header byte). A leader puts a round on a batch of entries only
/// where the batch leaves this much of `max_append_bytes` free.
pub(super) const READ_ROUND_WIRE_BYTES: usize = 9;

/// The driver's name for one read; the core hands it back with the read's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadId(pub u64);

/// Why a linearizable read was refused, or failed while it waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Only the leader serves linearizable reads; the leader known, if any (LOG-1's redirect).
    /// Also the outcome of a read still waiting when the leader stepped down.
    #[error("not the leader")]
    NotLeader {
        /// The leader this node knows in its term.
        leader: Option<PeerId>,
    },
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// Too many reads wait for confirmation already.
    #[error("{max} reads are waiting for a heartbeat round already; retry")]
    TooMany {
        /// How many may wait.
        max: usize,
    },
}

/// A read the leader took and has not answered yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PendingRead {
    id: ReadId,
    /// The round whose confirmation it waits for: one that had not started when it was taken.
    round: u64,
    /// Its read index, once the leader has committed an entry of its term.
    index: Option<u64>,
}

/// The leader's reads and rounds. See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct ReadQueue {
    /// The term the waiting reads and the echoes belong to: the one this node led in when it
    /// took them.
    term: u64,
    /// The last round started. Never reset while the process lives.
    last_round: u64,
    /// The highest round a majority confirmed in `term`.
    confirmed: u64,
    /// The highest round each peer echoed in `term`.
    echoed: BTreeMap<PeerId, u64>,
    /// Reads waiting, oldest first. Their rounds never descend: each is the round after the
    /// last one started when the read was taken, and `last_round` only grows.
    pending: VecDeque<PendingRead>,
    /// Outcomes the driver has not taken yet: the read index, or why the read failed.
    results: Vec<(ReadId, Result<u64, ReadError>)>,
}

impl ReadQueue {
    /// The round an AppendEntries carries now: the last one started, while reads wait for a
    /// confirmation; `None` otherwise, so a quiet leader's heartbeats stay as small as before.
    pub(super) fn round_to_carry(&self) -> Option<u64> {
        // Rounds never descend along the queue: the newest read waits for the latest round.
        self.pending
            .back()
            .is_some_and(|read| read.round > self.confirmed)
            .then_some(self.last_round)
    }

    /// A read waits for a round not started yet.
    fn round_wanted(&self) -> bool {
        self.pending
            .back()
            .is_some_and(|read| read.round > self.last_round)
    }

    /// A round is out and not yet confirmed by a majority.
    fn round_in_flight(&self) -> bool {
        self.last_round > self.confirmed
    }
}

impl ReplicatedLog<'_> {
    /// LOG-7: a linearizable read on this leader. Its outcome comes in a later
    /// [`Ready::reads`](crate::election::Ready::reads): the read index to serve it at once the state
    /// machine applied it, or a failure. On a single voter the outcome is there at once.
    pub fn request_read(&mut self, now: Instant, id: ReadId) -> Result<(), ReadError> {
        let raft = &mut *self.raft;
        if raft.shutdown.is_some() {
            return Err(ReadError::ShuttingDown);
        }
        raft.settle_reads();
        if !raft.is_leader() {
            return Err(ReadError::NotLeader {
                leader: raft.leader,
            });
        }
        if raft.reads.pending.len() >= MAX_PENDING_READS {
            return Err(ReadError::TooMany {
                max: MAX_PENDING_READS,
            });
        }
        let round = raft.reads.last_round + 1;
        let index = raft.own_term_committed().then(|| raft.log.commit());
        raft.reads
            .pending
            .push_back(PendingRead { id, round, index });
        if !raft.reads.round_in_flight() {
            raft.start_read_round(now);
        }
        raft.release_confirmed_reads(now);
        raft.finish();
        Ok(())
    }

    /// LOG-7: the outcomes of reads since the last call: the read index of each read that is
    /// ready, and the reads that failed (their leader stepped down). Each is handed out once.
    #[must_use]
    pub(crate) fn take_read_results(&mut self) -> Vec<(ReadId, Result<u64, ReadError>)> {
        self.raft.settle_reads();
        std::mem::take(&mut self.raft.reads.results)
    }
}

impl Raft {
    /// Whether this leader has committed an entry of its own term: only then does its commit
    /// index cover everything any earlier leader committed (Raft §5.4.2, §6.4).
    fn own_term_committed(&self) -> bool {
        self.log.term_at(self.log.commit()) == Some(self.hard.term)
    }

    /// Fails the waiting reads once this node no longer leads in the term it took them in,
    /// and starts a fresh book of echoes for a new term of leadership.
    pub(super) fn settle_reads(&mut self) {
        let leading_in = self.is_leader().then_some(self.hard.term);
        if leading_in == Some(self.reads.term) {
            return;
        }
        let leader = self.leader.filter(|leader| *leader != self.config.id);
        let reads = &mut self.reads;
        if !reads.pending.is_empty() {
            debug!(
                term = reads.term,
                reads = reads.pending.len(),
                "no longer leading: waiting reads fail"
            );
        }
        for read in reads.pending.drain(..) {
            reads
                .results
                .push((read.id, Err(ReadError::NotLeader { leader })));
        }
        reads.echoed.clear();
        reads.confirmed = reads.last_round;
        reads.term = leading_in.unwrap_or(0);
    }

    /// Starts the next round: every follower gets an AppendEntries carrying it now.
    fn start_read_round(&mut self, now: Instant) {
        self.reads.last_round += 1;
        if self.quorum_size() <= 1 && self.counts_for_quorum(&self.config.id) {
            // Alone in the electorate: this node's own word is the majority. (A leader that
            // removed itself is not in it, MEMB-1: the remaining voter must answer.)
            self.reads.confirmed = self.reads.last_round;
            return;
        }
        for peer in self.replication_peers() {
            self.send_append_with_round(now, peer);
        }
    }

    /// Before a heartbeat: reads that wait for a round not started yet get it now, on the
    /// heartbeat itself (which also sends again a round whose messages were lost).
    pub(super) fn start_read_round_on_heartbeat(&mut self) {
        self.settle_reads();
        if self.reads.round_wanted() {
            self.reads.last_round += 1;
        }
    }

    /// A follower echoed a read round in an AppendResp of this term (handled only by a leader).
    pub(super) fn read_round_echoed(&mut self, now: Instant, from: PeerId, round: Option<u64>) {
        self.settle_reads();
        let Some(round) = round else {
            return;
        };
        if !self.is_leader() || !self.counts_for_quorum(&from) {
            return;
        }
        // An echo of a round this node never started is not evidence of anything.
        let round = round.min(self.reads.last_round);
        let echoed = self.reads.echoed.entry(from).or_default();
        *echoed = (*echoed).max(round);
        let mut rounds: Vec<u64> = self
            .reads
            .echoed
            .iter()
            .filter(|(peer, _)| self.counts_for_quorum(peer))
            .map(|(_, &round)| round)
            // MEMB-1: a leader that removed itself leads until the removal commits, but its
            // own word is no longer part of any majority.
            .chain(
                self.counts_for_quorum(&self.config.id)
                    .then_some(self.reads.last_round),
            )
            .collect();
        rounds.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(&majority) = rounds.get(self.quorum_size().saturating_sub(1)) {
            self.reads.confirmed = self.reads.confirmed.max(majority);
        }
        self.release_confirmed_reads(now);
    }

    /// The commit index moved: reads waiting for this leader's first commit of its term get it.
    pub(super) fn read_index_committed(&mut self, now: Instant) {
        self.settle_reads();
        if self.reads.pending.is_empty() || !self.own_term_committed() {
            return;
        }
        let commit = self.log.commit();
        for read in &mut self.reads.pending {
            read.index.get_or_insert(commit);
        }
        self.release_confirmed_reads(now);
    }

    /// Hands out every read whose round is confirmed and whose index is known, and starts the
    /// round the rest wait for if none is in flight.
    fn release_confirmed_reads(&mut self, now: Instant) {
        let reads = &mut self.reads;
        let confirmed = reads.confirmed;
        let mut waiting = VecDeque::with_capacity(reads.pending.len());
        for read in reads.pending.drain(..) {
            match read.index {
                Some(index) if read.round <= confirmed => {
                    reads.results.push((read.id, Ok(index)));
                }
                _ => waiting.push_back(read),
            }
        }
        reads.pending = waiting;
        if self.is_leader() && self.reads.round_wanted() && !self.reads.round_in_flight() {
            self.start_read_round(now);
            // A single voter confirmed it at once.
            if !self.reads.round_in_flight() {
                self.release_confirmed_reads(now);
            }
        }
    }
}
