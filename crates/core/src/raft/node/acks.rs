//! Answers shared out among the followers on a broadcast link (issue 27, item 2; LOG-2,
//! LOG-3): with [`LogConfig::shared_acks`](crate::raft::LogConfig::shared_acks), a voter
//! answers an AppendEntries with entries at once only when the index it acknowledges is its
//! turn; the others leave their answer to the next one they send, which says as much.
//!
//! On ESP-NOW every frame takes the air from every other, and the answers of followers that
//! all received one broadcast are most of what a commit costs there: three nodes send one
//! AppendEntries and two answers per write, where the commit needs one answer. Turns are dealt
//! by index among the voters other than the leader that this node hears (itself included,
//! in id order): index `i` is the turn of the followers at positions `p` with
//! `(i + p) mod F < Q`, `F` of them and `Q` the answers a commit needs beside the leader's own.
//! So every index is answered at once by as many followers as its commit needs (when their
//! views of who is connected agree), and each follower answers about every `F / Q`-th.
//!
//! An answer not sent is not lost: acknowledgements are cumulative, and a follower reports
//! the highest index it verified against this leader's log in this term
//! ([`Raft::note_leader_match`]) with whichever answer it sends next: its next turn, the
//! answer to a heartbeat, which it always sends while it has something unreported, or the
//! answer to a message that shows nothing new (the leader sent it again, not having heard),
//! which it also always sends. Learners, refusals and answers that carry a read round (LOG-7)
//! go at once too.
//!
//! A heartbeat that finds nothing to report — everything verified was reported, no read
//! round — is answered only every second or third time, as the minimum election timeout
//! leaves room for: answers at most one heartbeat interval short of it apart, so that the
//! leader's check-quorum hears the follower in every window (at the defaults, 250 and 1500
//! ms, and at the demo's, 100 and 400 ms, every third). This holds on every link whenever
//! the log is on, shared answers or not: an idle leader wakes for fewer answers, which pays
//! for the shorter heartbeat that faster failure detection needs (issue 27). Membership looks
//! two ticks back for such frames before it pings (MEM-4).
//!
//! The leader's side (`replication.rs`): an answer frees room in the windows of every
//! follower in step, and they take the next message together; a follower that was sent
//! entries within the heartbeat interval gets no heartbeat beside them; and since an answer
//! may wait for the heartbeat after next, a message is taken as lost no earlier than two
//! heartbeat intervals after it left.

use super::*;

impl Raft {
    /// The highest index known to match `leader`'s log in `term`, now that an AppendEntries
    /// of its showed `matched`: entries this follower took from the leader of its term match
    /// that leader's log (one leader per term, whose log only grows), so an answer may report
    /// them all, whichever message it answers.
    ///
    /// Also whether that moved it: a message that shows nothing new is one the leader sent
    /// again, not having heard the answer, and is answered at once.
    pub(super) fn note_leader_match(
        &mut self,
        leader: PeerId,
        term: u64,
        matched: u64,
    ) -> (u64, bool) {
        let known = match self.leader_match {
            Some((known_leader, known_term, index))
                if known_leader == leader && known_term == term =>
            {
                Some(index)
            }
            _ => None,
        };
        // Never beyond this log's end: a snapshot install may have replaced the log.
        let best = known
            .unwrap_or(0)
            .max(matched)
            .min(self.log.last().index)
            .max(matched);
        self.leader_match = Some((leader, term, best));
        (best, known.is_none_or(|index| best > index))
    }

    /// Notes that an answer reporting `matched` went to `leader` in `term`.
    pub(super) fn note_answer_sent(&mut self, leader: PeerId, term: u64, matched: u64) {
        self.answered = Some((leader, term, matched, 0));
    }

    /// Whether this follower leaves the answer to a heartbeat out (see the module docs):
    /// nothing new to report since its last answer, no read round, and fewer heartbeats left
    /// unanswered since then than the check-quorum window leaves room for.
    pub(super) fn skips_heartbeat_answer(
        &mut self,
        leader: PeerId,
        term: u64,
        matched: u64,
        read_round: Option<u64>,
    ) -> bool {
        if self.config.log.is_none() {
            return false;
        }
        let Some((to, in_term, reported, skipped)) = self.answered else {
            return false;
        };
        // Answers at most one interval short of the minimum election timeout apart, so that
        // check-quorum hears this follower in every window; at most every third heartbeat.
        let interval = self.config.heartbeat_interval.as_micros().max(1);
        let beats_per_window = self.config.election_timeout_min.as_micros() / interval;
        let may_skip = beats_per_window.saturating_sub(2).min(2) as u32;
        let quiet = read_round.is_none()
            && to == leader
            && in_term == term
            && matched <= reported
            && skipped < may_skip;
        if quiet {
            self.answered = Some((to, in_term, reported, skipped + 1));
        }
        quiet
    }

    /// Whether the answer acknowledging `matched` after an AppendEntries with entries waits
    /// for this follower's next answer (see the module docs).
    pub(super) fn leaves_answer_to_later(&self, matched: u64, read_round: Option<u64>) -> bool {
        let Some(log_config) = self.config.log else {
            return false;
        };
        if !log_config.shared_acks || read_round.is_some() {
            return false;
        }
        let Electorate::Voters(voters) = self.electorate() else {
            return false;
        };
        let me = self.config.id;
        let followers: Vec<PeerId> = voters
            .iter()
            .copied()
            .filter(|peer| Some(*peer) != self.leader)
            .filter(|peer| *peer == me || self.connected.contains(peer))
            .collect();
        let Some(position) = followers.iter().position(|peer| *peer == me) else {
            // A learner counts for no commit: it answers everything, so that it catches up.
            return false;
        };
        let needed = (self.quorum_size().saturating_sub(1)) as u64;
        let count = followers.len() as u64;
        (matched + position as u64) % count >= needed
    }
}
