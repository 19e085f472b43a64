//! The election state machine of one node (RAFT-1..10).
//!
//! [`Raft`] owns term, vote, role, the known leader and the timers; it never reads a clock
//! and never sends anything itself. Inputs arrive through `handle_*` methods with the current
//! time; outputs are queued [`Action`]s the driver drains with [`Raft::poll_action`], and
//! [`Raft::poll_timeout`] says when to call [`Raft::handle_timeout`] next.
//!
//! Ordering guarantees the driver relies on:
//! - a changed [`HardState`] is queued as [`Action::Persist`] before the first message that
//!   depends on it (a vote, a request of a new term), and again at the end of every input if it
//!   changed without a message;
//! - events are queued after the messages of the same input, and a leader change is published
//!   once per input, after its state was persisted (RAFT-9): a follower that learns a new
//!   leader of a higher term publishes that leader, not an intermediate "no leader".
//!
//! # Priority and preemption (RAFT-10)
//!
//! keepalived's priorities and preemption, made quorum-safe: a preemption is only ever an
//! ordinary leadership transfer (RAFT-8), so one leader per term and one vote per term are
//! never at stake.
//!
//! - A node may have a priority, 0–255, higher preferred ([`RaftConfig::priority`]). It sends
//!   it on its vote requests, votes and heartbeat answers, and remembers what each peer last
//!   sent. A node without one sends none, and a peer not heard yet counts as one without.
//! - Lower priority campaigns later: the ranked election timeouts order the electable nodes by
//!   priority first, then by the larger id, and the pre-vote stand-aside rule agrees (the more
//!   up-to-date log first, then priority, then id). With no priority anywhere, both are the id
//!   rule they were before. A node that has not heard a peer's priority ranks it as having
//!   none, so right after start every node with a priority may time out first; the pre-vote
//!   stand-aside then lets the highest go on alone.
//! - Preemption: a leader with a priority that, continuously for `preempt_delay`, has a voter
//!   of higher priority that is caught up (its log matches the leader's) and answered within
//!   the minimum election timeout, transfers leadership to the highest such voter (then the
//!   larger id), with the cause [`LeaderChangeCause::Priority`]. Not with `nopreempt`, not while
//!   an operator's pin holds (`manual_override`), not while automatic election is off, not
//!   while stopping. A transfer that times out leaves it leading, like RAFT-8's; the next
//!   attempt comes no sooner than `preempt_delay` later.
//! - A health reading with a priority ([`HealthReading::priority`], keepalived's track
//!   scripts) replaces the node's priority while it runs; one without brings back the
//!   configured priority. The new value goes out with the next messages, so a leader whose
//!   priority drops below a caught-up voter's is preempted `preempt_delay` later, and a voter
//!   whose priority rises above the leader's preempts it once the leader has heard it.
//!
//! # Abstention after a lost hard state (WAL-2, WAL-5)
//!
//! A node whose WAL holds no hard state — deleted, wiped, or repaired — may have voted,
//! before it lost its WAL, in terms it no longer knows. Voting again in one of them could
//! give a term two leaders. (A node created for a new cluster is different: its WAL starts
//! with a genesis record, a durable "never voted", and it takes part at once; the driver
//! tells the two apart, WAL-5.) Its driver calls [`Raft::begin_abstention`] right after
//! [`Raft::new`], and a voter of a cluster with other voters then abstains:
//!
//! - it grants no vote and no pre-vote, does not campaign, follows no leader, and does not
//!   adopt the terms it hears, so it persists nothing: a restart during the abstention
//!   abstains again;
//! - it records, for every other voter, the highest term that voter's messages showed, and
//!   asks the voters it still needs for their term every heartbeat interval with a pre-vote
//!   request for term 0 — a term below every real one, which every node answers with a
//!   refusal carrying its current term, and which changes nothing on either side;
//! - the abstention ends at the first of two moments: when every other voter has been
//!   heard, or, once a *settling time* of two maximum election timeouts has passed since it
//!   began, when `ceil(n / 2)` of the other voters (of `n` voters in all) have been heard
//!   after the settling time. The node then adopts the highest term heard (or its own, if
//!   higher), refuses every vote in that term and the ones before, and takes part as usual
//!   from the next term on. It persists the adopted term with [`Action::PersistAmnesic`]:
//!   the WAL records no vote the node did not cast, and stays amnesic — a restart abstains
//!   again — until a later term is persisted.
//!
//! Why either moment is enough. Say the node voted for candidate C in term V before losing
//! its WAL. C made term V durable before asking, and a node's term never goes back.
//!
//! - Every voter heard: C's answer carries a term of at least V, so the adopted term is at
//!   least V, and every term the node votes in afterwards is one it never voted in.
//! - A settled majority heard, C perhaps not among them: C's campaign for term V began
//!   before the node lost its WAL, and a campaign lasts one election timeout at most, so by
//!   the end of the settling time C has either given term V up (then no one can ever win V
//!   with the forgotten vote: a candidate counts only the votes of its current campaign) or
//!   won it with the votes of a majority `S` of the voters, the node among them. Each member
//!   of `S` had made term V durable before C won. The voters heard after the settling time,
//!   `Q`, are `ceil(n / 2)` of the `n - 1` others; `S` without the node holds at least
//!   `floor(n / 2)` of those same `n - 1`, and `ceil(n / 2) + floor(n / 2) = n > n - 1`, so a
//!   member of `S` is in `Q` and its answer, sent after C's win, carries a term of at least V.
//!   The adopted term is again at least V. With three voters `ceil(3 / 2) = 2` is both
//!   others: a wiped voter of three waits for both, whatever the clock says, because a
//!   majority of the others is both of them.
//!
//! The argument needs the other voters to have kept their WALs (one node at a time
//! abstaining or down with a lost WAL) and messages not to be delayed longer than the node
//! was down (so that what it hears after its start was sent after it lost its WAL, and what
//! it hears after the settling time was sent after every campaign it voted in had ended); it
//! holds across partitions and message loss, which only make the wait longer.
//!
//! Hearing a leader does not end the abstention, and neither does a timer alone. A timer can
//! run out while the candidate this node voted for is cut off from it; the simulator's
//! `wal-loss` scenario with a rule of two maximum election timeouts finds two leaders in one
//! term. A leader heard is no proof either: with five voters, `c` can win term 6 with the
//! votes of this node and `e` while a stale leader `d` of term 5 still holds `a`; if this node
//! then loses its WAL and hears only `d` and `a`, ending at term 5 lets it vote for `a` in
//! term 6, and term 6 gets a second leader — two of four others is less than `ceil(5 / 2)`.
//!
//! What it costs: a node that lost its WAL takes part again a round trip after it has heard
//! every other voter, or two maximum election timeouts after its start when a voter is down
//! and enough others answer. With three voters and one down for good, a wiped voter stays out
//! until that voter returns or is removed from `cluster.voters`. A non-voter and the only
//! voter of a cluster never abstain. In `connected` mode, where there is no configured
//! electorate, the node abstains for at least two maximum election timeouts and until it has
//! heard every peer membership reports connected; that mode promises no single leader per
//! term across partitions anyway.

use std::collections::{BTreeMap, BTreeSet};

use conclave_protocol::{
    AppendEntries, AppendResp, ConflictHint, LeaderAssign, PeerId, RequestVote, TimeoutNow, Vote,
};
use tracing::{debug, info, warn};

use crate::election::{
    Action, Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken,
    HardState, HealthReading, LeaderChangeCause, Outbox, PeerSignal, Published, Role,
};
use crate::raft::config::{QuorumMode, RaftConfig, majority_threshold};
use crate::raft::message::RaftMessage;
use crate::raft::state::{LogPosition, RaftStatus};
use crate::rng::SeededRng;
use crate::time::Instant;

/// Where a node stands in Raft (RAFT-1): [`Role`] with the pre-vote round of RAFT-7 told
/// apart. It is the mode's phase label of [`Event::RoleChanged`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Follows a leader, or waits for one.
    Follower,
    /// Asks whether it could win before disturbing anyone's term.
    PreCandidate,
    /// Campaigns in a new term.
    Candidate,
    /// Leads.
    Leader,
}

impl Phase {
    /// The role every mode shares: a pre-candidate is a candidate.
    fn role(self) -> Role {
        match self {
            Phase::Follower => Role::Follower,
            Phase::PreCandidate | Phase::Candidate => Role::Candidate,
            Phase::Leader => Role::Leader,
        }
    }

    /// The phase label of events, logs and the status answer.
    fn label(self) -> &'static str {
        match self {
            Phase::Follower => "follower",
            Phase::PreCandidate => "pre_candidate",
            Phase::Candidate => "candidate",
            Phase::Leader => "leader",
        }
    }
}

/// How a campaign starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Campaign {
    /// A pre-vote round: asks at `term + 1` without changing any term (RAFT-7).
    PreVote,
    /// A real election: `term + 1`, vote for self.
    Election,
    /// A real election ordered by `TimeoutNow`; voters set aside their leader lease.
    Transfer,
}

/// Where a campaign stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tally {
    Won,
    Lost,
    Pending,
}

/// A leadership transfer in progress at the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transfer {
    target: PeerId,
    deadline: Instant,
    /// Pin the target once it wins (SetLeader in voters mode).
    pin: bool,
    /// `TimeoutNow` already went out; it is sent once.
    ordered: bool,
    /// What the history records when the target takes over.
    cause: LeaderChangeCause,
}

/// Where a stopping node is (CB-2; see [`Raft::handle_shutdown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    /// Asked to stop: a leader hands over (or steps down); the others stop at once. A leader
    /// whose successor's campaign reached it stays until it hears that successor lead, or
    /// until `deadline`, still answering votes: its vote may have been lost, and the
    /// successor's next campaign needs it (a successor alone with a stopped node can never
    /// win a majority).
    Leaving {
        /// When it stops waiting for the successor.
        deadline: Instant,
    },
    /// Its part is over: `Action::Stopped` went out; every input is ignored.
    Stopped,
}

/// What an abstaining node knows (see the module docs on abstention, WAL-2, WAL-5).
#[derive(Debug, Clone)]
struct Abstention {
    /// When it began.
    since: Instant,
    /// When the settling time is over: every campaign this node could have voted in before it
    /// lost its WAL has ended by then.
    settled_at: Instant,
    /// The highest term each peer was heard at since the start.
    heard: BTreeMap<PeerId, u64>,
    /// The voters heard since the settling time was over.
    heard_settled: BTreeSet<PeerId>,
    /// When the peers not heard yet are asked for their term again.
    next_probe: Instant,
}

/// The election state machine of one node. See the [module docs](self).
#[derive(Debug)]
pub struct Raft {
    config: RaftConfig,
    rng: SeededRng,

    hard: HardState,

    /// Where it stands; [`Phase::role`] is the role every mode shares.
    phase: Phase,
    leader: Option<PeerId>,
    last_log: LogPosition,
    commit: u64,
    /// Peers membership reports connected (never this node).
    connected: BTreeSet<PeerId>,
    auto_election: bool,
    /// MEM-3: this node's id is a live duplicate; it takes no part at all.
    quarantined: bool,

    /// Answers of the current (pre-)campaign, this node's own included.
    votes: BTreeMap<PeerId, bool>,
    election_deadline: Instant,
    /// When the current leaderless stretch's first campaign started (for `ElectionWon`).
    election_started_at: Option<Instant>,
    /// Win `TimeoutNow { pin: true }`'s campaign and pin this node.
    pin_on_win: bool,
    /// After a resignation, do not campaign before this time unless another leader appears.
    yielded_until: Option<Instant>,
    /// The last pre-candidate this node stood aside for, and when (see `should_stand_aside`).
    stood_aside_for: Option<(PeerId, Instant)>,

    /// Last time the current leader was heard (the lease of RAFT-7).
    leader_contact: Option<Instant>,
    /// The last leader this node knew, kept after it is lost: the ranking of election
    /// timeouts leaves it out, so every survivor ranks the same way.
    last_leader: Option<PeerId>,

    heartbeat_deadline: Instant,
    quorum_check_deadline: Instant,
    /// Peers heard from since the last check-quorum.
    recent_active: BTreeSet<PeerId>,
    /// Highest log index known to match on each follower.
    match_index: BTreeMap<PeerId, u64>,
    transfer: Option<Transfer>,

    /// What this node decided and its driver has not taken yet (RAFT-1, RAFT-9).
    outbox: Outbox,
    /// The cause of the latest leader change inside the current input.
    leader_cause: LeaderChangeCause,
    /// While handling one input: the peer this leader was handing over to, and why, so the
    /// history records a completed transfer or resignation rather than "higher term".
    handover: Option<(PeerId, LeaderChangeCause)>,
    /// The current campaign was ordered by `TimeoutNow`.
    transfer_campaign: bool,
    /// Set while the node abstains after starting without a hard state (WAL-2).
    abstention: Option<Abstention>,
    /// After an abstention: the term adopted at its end. No vote is granted in it or before
    /// it, and hard states of it are persisted as amnesic (WAL-2).
    vote_floor: Option<u64>,
    /// Set once the driver asked the node to stop (CB-2).
    shutdown: Option<Shutdown>,

    /// RAFT-10: this node's priority now: the configured one, or the one the latest health
    /// reading asked for.
    priority: Option<u8>,
    /// RAFT-10: the priority each peer last sent (a peer that sent none is absent).
    peer_priorities: BTreeMap<PeerId, u8>,
    /// RAFT-10, at the leader: when each peer last answered it.
    last_heard: BTreeMap<PeerId, Instant>,
    /// RAFT-10, at the leader: since when a caught-up, connected voter of higher priority has
    /// been there without a break.
    outranked_since: Option<Instant>,
    /// RAFT-10, at the leader: when it last started a preemption transfer; the next one waits
    /// `preempt_delay` after it.
    last_preemption: Option<Instant>,
}

impl Raft {
    /// A node starting (or restarting) as a follower with the hard state it persisted and an
    /// empty log.
    pub fn new(
        config: RaftConfig,
        restored: HardState,
        rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        Self::with_last_log(config, restored, LogPosition::default(), rng, now)
    }

    /// A node starting (or restarting) as a follower with the hard state it persisted and the
    /// position of its last log entry.
    pub fn with_last_log(
        config: RaftConfig,
        restored: HardState,
        last_log: LogPosition,
        rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        config.validate()?;
        let auto_election = config.auto_election;
        let priority = config.priority;
        let mut raft = Self {
            config,
            rng,
            hard: restored,
            phase: Phase::Follower,
            leader: None,
            last_log,
            commit: 0,
            connected: BTreeSet::new(),
            auto_election,
            quarantined: false,
            votes: BTreeMap::new(),
            election_deadline: now,
            election_started_at: None,
            pin_on_win: false,
            yielded_until: None,
            stood_aside_for: None,
            leader_contact: None,
            last_leader: None,
            heartbeat_deadline: now,
            quorum_check_deadline: now,
            recent_active: BTreeSet::new(),
            match_index: BTreeMap::new(),
            transfer: None,
            outbox: Outbox::new(restored, Phase::Follower.role(), Phase::Follower.label()),
            leader_cause: LeaderChangeCause::ElectionTimeout,
            handover: None,
            transfer_campaign: false,
            abstention: None,
            vote_floor: None,
            shutdown: None,
            priority,
            peer_priorities: BTreeMap::new(),
            last_heard: BTreeMap::new(),
            outranked_since: None,
            last_preemption: None,
        };
        raft.reset_election_timer(now);
        Ok(raft)
    }

    /// The node's WAL held no hard state (WAL-2): it may have voted in terms it no longer
    /// knows. Call right after [`Raft::new`]. A voter with other voters (or any node in
    /// `connected` mode) then abstains until it has heard every other voter; see the module
    /// docs. Returns whether it abstains: a non-voter and a single voter need not.
    pub fn begin_abstention(&mut self, now: Instant) -> bool {
        if self.abstention.is_some() {
            return true;
        }
        let others = match &self.config.quorum {
            QuorumMode::Voters(voters) => {
                if !voters.contains(&self.config.id) {
                    return false;
                }
                voters.len() - 1
            }
            QuorumMode::Connected => usize::MAX,
        };
        if others == 0 {
            return false;
        }
        self.abstention = Some(Abstention {
            since: now,
            settled_at: now + self.config.election_timeout_max * 2,
            heard: BTreeMap::new(),
            heard_settled: BTreeSet::new(),
            next_probe: now,
        });
        self.phase = Phase::Follower;
        self.leader = None;
        self.leader_contact = None;
        self.votes.clear();
        let waiting: Vec<String> = self
            .abstention_waiting_for()
            .iter()
            .map(PeerId::to_string)
            .collect();
        warn!(
            term = self.hard.term,
            waiting_for = %waiting.join(","),
            "no term or vote recovered (lost or repaired WAL): this node may have voted in \
             terms it no longer knows, so it grants no vote and does not campaign until it has \
             heard every other voter, or a majority of the voters after two election timeouts \
             (docs/wal.md)"
        );
        true
    }
    // -----------------------------------------------------------------------------------------
    // inputs

    /// A message from `from` (already authenticated by the transport).
    pub fn handle_message(&mut self, now: Instant, from: PeerId, message: RaftMessage) {
        if from == self.config.id || self.quarantined || self.is_stopped() {
            return;
        }
        self.note_peer_priority(from, &message);
        if self.abstention.is_some() {
            self.abstaining_step(now, from, message);
        } else {
            self.step(now, from, message);
        }
        self.finish();
    }

    /// Time passed; call at [`Raft::poll_timeout`] (calling early is harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.quarantined || self.is_stopped() {
            return;
        }
        if let Some(Shutdown::Leaving { deadline }) = self.shutdown {
            if self.phase != Phase::Leader && now >= deadline {
                info!("the successor was not heard leading in time; stopping");
                self.finish();
                self.stop_leaving();
                return;
            }
        }
        if self.abstention.is_some() {
            self.abstention_tick(now);
        } else if self.phase == Phase::Leader {
            self.leader_tick(now);
        } else if now >= self.election_deadline {
            self.election_timeout(now);
        }
        self.finish();
    }

    /// Membership reports `peer` connected or disconnected (MEM-5). In `connected` mode this
    /// changes the electorate; in both modes it decides who gets heartbeats.
    pub fn handle_peer_status(&mut self, now: Instant, peer: PeerId, connected: bool) {
        if peer == self.config.id || self.is_stopped() {
            return;
        }
        let changed = if connected {
            self.connected.insert(peer)
        } else {
            // What membership knows is newer than the last answer: a peer that left is no
            // longer evidence of a quorum, nor a successor to hand leadership to. A later
            // answer from it counts again.
            self.recent_active.remove(&peer);
            self.connected.remove(&peer)
        };
        if changed && self.abstention.is_some() {
            // In `connected` mode the peers to hear are the connected ones.
            self.end_abstention_if_heard(now);
        } else if changed && !self.quarantined {
            match self.phase {
                Phase::PreCandidate | Phase::Candidate => self.evaluate_campaign(now),
                Phase::Leader if connected => {
                    // Tell a newcomer who leads without waiting for the next heartbeat.
                    self.send_heartbeat(peer);
                }
                _ => {}
            }
        }
        self.finish();
    }

    /// Membership learned that this node's id is a live duplicate (MEM-3): leave the election
    /// for good; the node must not act as that id.
    pub fn handle_id_refused(&mut self, now: Instant) {
        if self.quarantined || self.is_stopped() {
            return;
        }
        warn!(id = %self.config.id, "peer id refused as a duplicate; leaving the election");
        self.quarantined = true;
        self.become_follower(now, self.hard.term, None, LeaderChangeCause::Quarantined);
        self.finish();
    }

    /// The node is stopping (CB-2). A leader hands leadership over, as a resignation does: to
    /// the best caught-up voter it hears, which then campaigns at once (RAFT-8 transfer), so
    /// the cluster is not leaderless for an election timeout. It keeps handling messages and
    /// time meanwhile. Once it no longer leads — the successor's campaign reached it (cause
    /// `resign`), the transfer ran out after the minimum election timeout, or nobody could take
    /// over (both cause `shutdown`, so the last change it publishes says it no longer leads) —
    /// it emits [`Action::Stopped`] and ignores every input after. A node that does not lead
    /// stops at once, publishing nothing.
    ///
    /// Called again while a hand-over is under way (the driver cannot wait any longer, or its
    /// WAL failed), it steps down at once.
    pub fn handle_shutdown(&mut self, now: Instant) {
        match self.shutdown {
            Some(Shutdown::Stopped) => return,
            Some(Shutdown::Leaving { .. }) => {
                if self.phase == Phase::Leader {
                    info!(term = self.hard.term, "hand-over cut short; stepping down");
                    self.become_follower(now, self.hard.term, None, LeaderChangeCause::Shutdown);
                }
                // Cut short: no more waiting for the successor either. What the step-down
                // publishes goes out before the stop.
                self.finish();
                self.stop_leaving();
            }
            None => {
                self.shutdown = Some(Shutdown::Leaving {
                    deadline: now + self.config.election_timeout_max * 2,
                });
                if self.phase == Phase::Leader {
                    if self.hard.manual_override == Some(self.config.id) {
                        self.hard.manual_override = None;
                    }
                    match self.best_successor() {
                        Some(target) => {
                            info!(%target, "stopping while leading; handing leadership over");
                            self.start_transfer(now, target, false, LeaderChangeCause::Resign);
                        }
                        None => {
                            info!(
                                term = self.hard.term,
                                "stopping while leading, with nobody to hand over to; stepping down"
                            );
                            self.become_follower(
                                now,
                                self.hard.term,
                                None,
                                LeaderChangeCause::Shutdown,
                            );
                        }
                    }
                }
            }
        }
        self.finish();
    }

    /// A peer's radio signal strength: raft elects on terms and logs alone, so it is ignored.
    pub fn handle_peer_signal(&mut self, _now: Instant, _signal: PeerSignal) {}

    /// This node's health reading (RAFT-10, keepalived's track scripts): a reading with a
    /// priority makes it this node's priority while it runs; a reading without one brings back
    /// the configured priority. The battery charge is not used in raft mode. The new priority
    /// goes out on the next vote requests, votes and heartbeat answers; a leader whose priority
    /// drops below a caught-up voter's starts counting its `preempt_delay` at once.
    pub fn handle_health(&mut self, now: Instant, reading: HealthReading) {
        if self.quarantined || self.is_stopped() {
            return;
        }
        let priority = reading.priority.or(self.config.priority);
        if priority != self.priority {
            info!(
                old = ?self.priority,
                new = ?priority,
                "election priority changed by a health reading"
            );
            self.priority = priority;
            if self.phase == Phase::Leader {
                self.consider_preemption(now);
            }
        }
        self.finish();
    }

    /// An operator's command (RAFT-8).
    pub fn handle_command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        if self.shutdown.is_some() {
            return Err(ElectionError::ShuttingDown);
        }
        let outcome = self.command(now, command);
        self.finish();
        outcome
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    /// The next thing the driver must do, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.outbox.poll()
    }

    /// When [`Raft::handle_timeout`] must be called next; `None` when nothing is pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.quarantined || self.is_stopped() {
            return None;
        }
        if let Some(abstention) = &self.abstention {
            // Every tick also checks whether the abstention may end (in `connected` mode, at
            // most one heartbeat interval after its earliest end).
            return Some(abstention.next_probe);
        }
        if self.phase != Phase::Leader {
            return Some(match self.shutdown {
                // A stopping node never campaigns; it only waits for its successor.
                Some(Shutdown::Leaving { deadline }) => deadline,
                _ => self.election_deadline,
            });
        }
        let mut next = self.heartbeat_deadline;
        if self.config.check_quorum {
            next = next.min(self.quorum_check_deadline);
        }
        if let Some(transfer) = &self.transfer {
            next = next.min(transfer.deadline);
        }
        if let Some(due) = self.preemption_due() {
            next = next.min(due);
        }
        Some(next)
    }

    // -----------------------------------------------------------------------------------------
    // queries

    /// This node.
    pub fn id(&self) -> PeerId {
        self.config.id
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.phase.role()
    }

    /// Where it stands within its role: `follower`, `pre_candidate` (RAFT-7's pre-vote
    /// round), `candidate` or `leader`.
    pub fn phase(&self) -> &'static str {
        self.phase.label()
    }

    /// Its current term.
    pub fn term(&self) -> u64 {
        self.hard.term
    }

    /// The leader it knows in its current term.
    pub fn leader(&self) -> Option<PeerId> {
        self.leader
    }

    /// When this leader sends its next heartbeat; `None` unless it leads.
    pub fn next_heartbeat(&self) -> Option<Instant> {
        (self.phase == Phase::Leader).then_some(self.heartbeat_deadline)
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        self.phase == Phase::Leader
    }

    /// Whether it abstains after starting without a hard state (WAL-2).
    pub fn is_abstaining(&self) -> bool {
        self.abstention.is_some()
    }

    /// Whether its part in the election is over after [`Raft::handle_shutdown`].
    pub fn is_stopped(&self) -> bool {
        self.shutdown == Some(Shutdown::Stopped)
    }

    /// Whether its id was refused as a live duplicate, keeping it out of the election (MEM-3).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }

    /// Whether it starts elections by itself (RAFT-8 `EnableAutoLeaderElection`).
    pub fn auto_election(&self) -> bool {
        self.auto_election
    }

    /// Its election priority now (RAFT-10): the configured one, or the one of the latest health
    /// reading that carried one.
    pub fn priority(&self) -> Option<u8> {
        self.priority
    }

    /// The leader pinned by a manual `SetLeader` (RAFT-8), while the override holds.
    pub fn manual_override(&self) -> Option<PeerId> {
        self.hard.manual_override
    }

    /// The state it must persist.
    pub fn hard_state(&self) -> HardState {
        self.hard
    }

    /// The settings it runs with.
    pub fn config(&self) -> &RaftConfig {
        &self.config
    }

    /// `(term, leader)` of the known leader (CB-5).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.leader.map(|leader| FencingToken {
            term: self.hard.term,
            leader,
        })
    }

    /// Votes needed to win an election now.
    pub fn quorum_size(&self) -> usize {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.len() / 2 + 1,
            QuorumMode::Connected => majority_threshold(self.electorate_size()),
        }
    }

    /// What only raft has to report, for the status answer (the common part comes from
    /// [`Election::status`](crate::election::Election::status)).
    pub fn status(&self) -> RaftStatus {
        RaftStatus {
            vote: self.hard.vote,
            quorum_mode: self.config.quorum.label(),
            quorum_size: self.quorum_size(),
            electorate: self.electorate_size(),
            last_log: self.last_log,
            abstaining_until_heard: self.abstention_waiting_for(),
            priority: self.priority,
        }
    }

    // -----------------------------------------------------------------------------------------
    // message handling

    fn step(&mut self, now: Instant, from: PeerId, message: RaftMessage) {
        let term = message.term();
        self.handover = self
            .transfer
            .filter(|transfer| transfer.target == from)
            .map(|transfer| (from, transfer.cause));
        if term > self.hard.term {
            match &message {
                RaftMessage::RequestVote(request) => {
                    if !request.leadership_transfer && self.in_lease(now) {
                        // RAFT-7: a node that hears its leader ignores a disruptive candidate
                        // (for example one rejoining after a partition).
                        debug!(%from, term, "vote request ignored: leader lease holds");
                        return;
                    }
                    if !request.pre_vote {
                        self.become_follower(now, term, None, LeaderChangeCause::HigherTerm);
                    }
                }
                // A granted pre-vote echoes the term this node would campaign in.
                RaftMessage::Vote(vote) if vote.pre_vote && vote.granted => {}
                _ => self.become_follower(now, term, None, LeaderChangeCause::HigherTerm),
            }
        } else if term < self.hard.term {
            self.answer_stale(from, &message);
            return;
        }

        match message {
            RaftMessage::RequestVote(request) => self.handle_request_vote(now, from, request),
            RaftMessage::Vote(vote) => self.handle_vote(now, from, vote),
            RaftMessage::AppendEntries(append) => self.handle_append(now, from, &append),
            RaftMessage::AppendResp(response) => self.handle_append_resp(now, from, response),
            RaftMessage::LeaderAssign(assign) => self.handle_leader_assign(now, from, assign),
            RaftMessage::TimeoutNow(order) => self.handle_timeout_now(now, from, order),
        }
    }

    /// Raft §5.1: a message of an older term is refused with the current term, so a stale
    /// leader or candidate learns it is behind and steps down.
    fn answer_stale(&mut self, from: PeerId, message: &RaftMessage) {
        match message {
            RaftMessage::AppendEntries(_) => self.send(
                from,
                RaftMessage::AppendResp(AppendResp {
                    term: self.hard.term,
                    success: false,
                    match_index: 0,
                    hint: None,
                    priority: self.priority,
                }),
            ),
            RaftMessage::RequestVote(request) => {
                self.send(
                    from,
                    RaftMessage::Vote(Vote {
                        term: self.hard.term,
                        granted: false,
                        pre_vote: request.pre_vote,
                        priority: self.priority,
                    }),
                );
                self.outbox.publish(Event::VoteCast {
                    term: request.term,
                    candidate: request.candidate,
                    granted: false,
                    pre_vote: request.pre_vote,
                });
            }
            _ => debug!(%from, term = message.term(), "stale message ignored"),
        }
    }

    /// RAFT-5 and Raft §5.2, §5.4.1: one vote per term, first come first served, only for a
    /// candidate whose log is at least as up to date. A pre-vote changes nothing here.
    fn handle_request_vote(&mut self, now: Instant, from: PeerId, request: RequestVote) {
        let candidate_log = LogPosition::new(request.last_log_term, request.last_log_index);
        if request.pre_vote
            && self.phase == Phase::PreCandidate
            && request.term == self.hard.term + 1
            && request.candidate == from
            && self.should_stand_aside(now, from, request.priority, candidate_log)
        {
            debug!(%from, term = request.term, "standing aside for a higher-ranked pre-candidate");
            self.stood_aside_for = Some((from, now));
            self.become_follower(
                now,
                self.hard.term,
                None,
                LeaderChangeCause::ElectionTimeout,
            );
        }
        let free_to_vote = self.hard.vote == Some(request.candidate)
            || (self.hard.vote.is_none() && self.leader.is_none())
            || (request.pre_vote && request.term > self.hard.term);
        // WAL-2: after an abstention, the node may have voted in the terms up to the floor
        // before it lost its WAL.
        let forgotten = self.vote_floor.is_some_and(|floor| request.term <= floor);
        let granted = request.candidate == from
            && self.is_voter(self.config.id)
            && self.is_voter(from)
            && free_to_vote
            && !forgotten
            && candidate_log >= self.last_log;
        if granted && !request.pre_vote {
            self.hard.vote = Some(from);
            self.reset_election_timer(now);
        }
        let answer_term = if granted {
            request.term
        } else {
            self.hard.term
        };
        self.send(
            from,
            RaftMessage::Vote(Vote {
                term: answer_term,
                granted,
                pre_vote: request.pre_vote,
                priority: self.priority,
            }),
        );
        self.outbox.publish(Event::VoteCast {
            term: request.term,
            candidate: request.candidate,
            granted,
            pre_vote: request.pre_vote,
        });
    }

    fn handle_vote(&mut self, now: Instant, from: PeerId, vote: Vote) {
        let counts = match self.phase {
            Phase::PreCandidate => {
                vote.pre_vote && (!vote.granted || vote.term == self.hard.term + 1)
            }
            Phase::Candidate => !vote.pre_vote && vote.term == self.hard.term,
            Phase::Follower | Phase::Leader => false,
        };
        if !counts {
            return;
        }
        self.votes.insert(from, vote.granted);
        self.evaluate_campaign(now);
    }

    /// Two followers whose timeouts fire close together both start pre-vote rounds; if both
    /// went on to real campaigns they would split the vote and the cluster would wait another
    /// election timeout. A pre-vote commits nothing, so the lower-ranked of two pre-candidates
    /// can simply stand aside when it hears the other's request: the one with the more up-to-date
    /// log, or with an equal log the byte-wise larger id, goes on alone. To rule out a livelock
    /// behind a candidate that cannot win (say it reaches this node but not a majority), a node
    /// stands aside for the same peer at most once per two maximum election timeouts.
    fn should_stand_aside(
        &self,
        now: Instant,
        candidate: PeerId,
        candidate_priority: Option<u8>,
        candidate_log: LogPosition,
    ) -> bool {
        // RAFT-10: with equal logs, priority first, as the ranked timeouts order them.
        let outranked = candidate_log > self.last_log
            || (candidate_log == self.last_log
                && (candidate_priority, candidate) > (self.priority, self.config.id));
        let recently = self.stood_aside_for.is_some_and(|(peer, at)| {
            peer == candidate
                && now.saturating_duration_since(at) < self.config.election_timeout_max * 2
        });
        outranked && !recently
    }

    /// Moves a campaign on once its outcome is decided.
    fn evaluate_campaign(&mut self, now: Instant) {
        match (self.phase, self.tally()) {
            (Phase::PreCandidate, Tally::Won) => self.campaign(now, Campaign::Election),
            (Phase::Candidate, Tally::Won) => self.become_leader(now, LeaderChangeCause::VoteWon),
            (Phase::PreCandidate | Phase::Candidate, Tally::Lost) => {
                debug!(term = self.hard.term, "campaign lost");
                self.become_follower(
                    now,
                    self.hard.term,
                    None,
                    LeaderChangeCause::ElectionTimeout,
                );
            }
            _ => {}
        }
    }

    fn handle_append(&mut self, now: Instant, from: PeerId, append: &AppendEntries) {
        let term = self.hard.term;
        match self.phase {
            Phase::Leader => {
                // Two leaders in one term: expected in `connected` mode after a partition
                // heals, impossible in `voters` mode. Either way the larger id stays, so
                // every node converges on the same leader.
                self.outbox.publish(Event::SplitBrain {
                    term,
                    known: self.config.id,
                    other: from,
                });
                if from < self.config.id {
                    return;
                }
                self.become_follower(now, term, Some(from), LeaderChangeCause::TieBreak);
            }
            Phase::PreCandidate | Phase::Candidate => {
                // Raft §5.2: a candidate that hears a leader of its term returns to follower.
                self.become_follower(now, term, Some(from), LeaderChangeCause::LeaderHeard);
            }
            Phase::Follower => match self.leader {
                Some(known) if known != from => {
                    self.outbox.publish(Event::SplitBrain {
                        term,
                        known,
                        other: from,
                    });
                    if from < known {
                        return;
                    }
                    self.set_leader(now, from, LeaderChangeCause::TieBreak);
                }
                Some(_) => self.set_leader(now, from, LeaderChangeCause::LeaderHeard),
                None => self.set_leader(now, from, LeaderChangeCause::LeaderHeard),
            },
        }
        self.reset_election_timer(now);
        self.commit = self.commit.max(append.commit.min(self.last_log.index));
        // RAFT-8: every follower mirrors the leader's pin, so all of them report the same
        // override, even one that missed the assignment or the pin's removal.
        if append.pinned {
            self.hard.manual_override = Some(from);
        } else if self.hard.manual_override == Some(from) {
            self.hard.manual_override = None;
        }

        // The replicated log (LOG-2) extends this check to entries; for heartbeats it tells
        // the leader whether this follower's log ends where the leader's does.
        let matches = append.prev_index == 0
            || LogPosition::new(append.prev_term, append.prev_index) == self.last_log;
        let response = if matches {
            AppendResp {
                term,
                success: true,
                match_index: append.prev_index,
                hint: None,
                priority: self.priority,
            }
        } else {
            AppendResp {
                term,
                success: false,
                match_index: 0,
                hint: Some(ConflictHint {
                    index: append.prev_index.min(self.last_log.index + 1),
                    term: if self.last_log.index >= append.prev_index {
                        self.last_log.term
                    } else {
                        0
                    },
                }),
                priority: self.priority,
            }
        };
        self.send(from, RaftMessage::AppendResp(response));
    }

    fn handle_append_resp(&mut self, now: Instant, from: PeerId, response: AppendResp) {
        if self.phase != Phase::Leader {
            return;
        }
        self.recent_active.insert(from);
        self.last_heard.insert(from, now);
        if response.success {
            let matched = self.match_index.entry(from).or_insert(0);
            *matched = (*matched).max(response.match_index);
        }
        self.order_transfer_if_caught_up(from);
        self.consider_preemption(now);
    }

    /// RAFT-8. In `connected` mode an assignment is authoritative: adopt its term and leader.
    /// In `voters` mode it is a request to the leader to transfer leadership (or to pin itself);
    /// followers learn the pin from the leader's heartbeats.
    fn handle_leader_assign(&mut self, now: Instant, from: PeerId, assign: LeaderAssign) {
        match &self.config.quorum {
            QuorumMode::Connected => {
                if let Some(current) = self.leader {
                    if current != assign.leader && current > assign.leader {
                        // Two claims in one term resolve to the larger id everywhere.
                        return;
                    }
                }
                info!(leader = %assign.leader, assigner = %assign.assigner, term = assign.term, "leader assigned");
                self.hard.manual_override = Some(assign.leader);
                if assign.leader == self.config.id {
                    self.become_leader(now, LeaderChangeCause::SetLeader);
                } else {
                    self.become_follower(
                        now,
                        assign.term,
                        Some(assign.leader),
                        LeaderChangeCause::SetLeader,
                    );
                }
            }
            QuorumMode::Voters(_) => {
                if self.phase == Phase::Leader && assign.term == self.hard.term {
                    if assign.leader == self.config.id {
                        self.pin_self(now);
                    } else if self.is_voter(assign.leader) {
                        self.start_transfer(now, assign.leader, true, LeaderChangeCause::SetLeader);
                    } else {
                        warn!(target = %assign.leader, "leader assignment to a non-voter ignored");
                    }
                } else {
                    debug!(%from, "leader assignment ignored: this node is not its leader");
                }
            }
        }
    }

    /// RAFT-8 leadership transfer: campaign now, without pre-vote, telling voters to set their
    /// lease aside.
    fn handle_timeout_now(&mut self, now: Instant, from: PeerId, order: TimeoutNow) {
        if self.phase == Phase::Leader || !self.is_voter(self.config.id) {
            return;
        }
        info!(%from, pin = order.pin, "ordered to campaign now");
        self.pin_on_win = order.pin;
        self.campaign(now, Campaign::Transfer);
    }

    // -----------------------------------------------------------------------------------------
    // priority and preemption (RAFT-10; see the module docs)

    /// Remembers the priority `from` sent with a vote request, a vote or a heartbeat answer.
    fn note_peer_priority(&mut self, from: PeerId, message: &RaftMessage) {
        let priority = match message {
            RaftMessage::RequestVote(request) if request.candidate == from => request.priority,
            RaftMessage::Vote(vote) => vote.priority,
            RaftMessage::AppendResp(response) => response.priority,
            _ => return,
        };
        match priority {
            Some(priority) => {
                self.peer_priorities.insert(from, priority);
            }
            None => {
                self.peer_priorities.remove(&from);
            }
        }
    }

    /// The priority of `peer` as far as this node knows; `None` for a peer that sent none or
    /// was not heard yet, which ranks below every priority.
    fn priority_of(&self, peer: PeerId) -> Option<u8> {
        if peer == self.config.id {
            self.priority
        } else {
            self.peer_priorities.get(&peer).copied()
        }
    }

    /// The voter this leader would hand over to now: of the voters with a higher priority than
    /// its own that are caught up and answered within the minimum election timeout, the one
    /// with the highest priority (then the larger id, as the ranked timeouts order them).
    /// `None` when this node must not be preempted: it does not lead, it has no priority of its
    /// own, `nopreempt` is set, an operator's pin holds, automatic election is off, or it is
    /// stopping.
    fn preemption_target(&self, now: Instant) -> Option<PeerId> {
        if self.phase != Phase::Leader
            || self.config.nopreempt
            || self.hard.manual_override.is_some()
            || !self.auto_election
            || self.shutdown.is_some()
        {
            return None;
        }
        let own = self.priority?;
        self.election_peers()
            .into_iter()
            .filter_map(|peer| {
                let priority = self.peer_priorities.get(&peer).copied()?;
                let caught_up =
                    self.match_index.get(&peer).copied().unwrap_or(0) >= self.last_log.index;
                let connected = self.last_heard.get(&peer).is_some_and(|heard| {
                    now.saturating_duration_since(*heard) < self.config.election_timeout_min
                });
                (priority > own && caught_up && connected).then_some((priority, peer))
            })
            .max()
            .map(|(_, peer)| peer)
    }

    /// When the next preemption may start: `preempt_delay` after a better voter appeared, and
    /// no sooner than `preempt_delay` after the last attempt. `None` while none is pending or a
    /// transfer is under way.
    fn preemption_due(&self) -> Option<Instant> {
        if self.phase != Phase::Leader || self.transfer.is_some() {
            return None;
        }
        let delay = self.config.preempt_delay;
        let mut due = self.outranked_since? + delay;
        if let Some(last) = self.last_preemption {
            due = due.max(last + delay);
        }
        Some(due)
    }

    /// A leader checks whether a better voter has been there for `preempt_delay`, and if so
    /// hands leadership over to it with an ordinary transfer (RAFT-8): the target campaigns in
    /// a new term and must win a normal election, so no term ever gets two leaders. A transfer
    /// that times out leaves this node leading; it tries again `preempt_delay` later if the
    /// better voter is still there.
    fn consider_preemption(&mut self, now: Instant) {
        if self.phase != Phase::Leader || self.transfer.is_some() {
            return;
        }
        let Some(target) = self.preemption_target(now) else {
            self.outranked_since = None;
            return;
        };
        self.outranked_since.get_or_insert(now);
        if self.preemption_due().is_none_or(|due| now < due) {
            return;
        }
        info!(
            %target,
            own = ?self.priority,
            target_priority = ?self.priority_of(target),
            "a caught-up voter of higher priority: handing leadership over (preemption)"
        );
        self.last_preemption = Some(now);
        self.start_transfer(now, target, false, LeaderChangeCause::Priority);
    }

    // -----------------------------------------------------------------------------------------
    // abstention after a lost hard state (WAL-2; see the module docs)

    /// A message while abstaining: note the sender's term, refuse votes, follow nobody.
    fn abstaining_step(&mut self, now: Instant, from: PeerId, message: RaftMessage) {
        let counts = match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.contains(&from),
            QuorumMode::Connected => true,
        };
        if let (true, Some(term), Some(abstention)) =
            (counts, evidence_term(&message), self.abstention.as_mut())
        {
            let highest = abstention.heard.entry(from).or_insert(term);
            *highest = (*highest).max(term);
            if now >= abstention.settled_at {
                abstention.heard_settled.insert(from);
            }
        }
        match &message {
            RaftMessage::RequestVote(request) => {
                debug!(%from, term = request.term, pre_vote = request.pre_vote, "vote refused: abstaining");
                // A refusal with this node's own term: it commits to nothing.
                self.answer_stale(from, &message);
            }
            RaftMessage::AppendEntries(_) if message.term() < self.hard.term => {
                // Its own term is durable and real: a stale leader learns it is behind.
                self.answer_stale(from, &message);
            }
            _ => {}
        }
        self.end_abstention_if_heard(now);
    }

    /// Asks the peers not heard yet for their term, and ends the abstention when it may.
    fn abstention_tick(&mut self, now: Instant) {
        let due = self
            .abstention
            .as_ref()
            .is_some_and(|abstention| now >= abstention.next_probe);
        if due {
            if let Some(abstention) = self.abstention.as_mut() {
                abstention.next_probe = now + self.config.heartbeat_interval;
            }
            // Term 0 is below every real term: the answer is a refusal carrying the peer's
            // current term, and neither side changes anything.
            let probe = RequestVote {
                term: 0,
                candidate: self.config.id,
                last_log_index: self.last_log.index,
                last_log_term: self.last_log.term,
                pre_vote: true,
                leadership_transfer: false,
                priority: self.priority,
            };
            for peer in self.abstention_probe_targets(now) {
                self.send(peer, RaftMessage::RequestVote(probe));
            }
        }
        self.end_abstention_if_heard(now);
    }

    /// In `connected` mode, the earliest end of an abstention: two maximum election timeouts
    /// after it began, so that membership has found the peers there are to hear.
    fn abstention_min_end(&self) -> Option<Instant> {
        let abstention = self.abstention.as_ref()?;
        match self.config.quorum {
            QuorumMode::Voters(_) => None,
            QuorumMode::Connected => Some(abstention.since + self.config.election_timeout_max * 2),
        }
    }

    /// The peers an abstaining node still waits for: the other voters (in `connected` mode,
    /// the connected peers) it has not heard since it started.
    fn abstention_waiting_for(&self) -> Vec<PeerId> {
        let Some(abstention) = &self.abstention else {
            return Vec::new();
        };
        self.abstention_peers()
            .into_iter()
            .filter(|peer| !abstention.heard.contains_key(peer))
            .collect()
    }

    /// Every peer whose term an abstaining node may need: the other voters (in `connected`
    /// mode, the connected peers).
    fn abstention_peers(&self) -> Vec<PeerId> {
        let peers: Vec<PeerId> = match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.iter().copied().collect(),
            QuorumMode::Connected => self.connected.iter().copied().collect(),
        };
        peers
            .into_iter()
            .filter(|peer| *peer != self.config.id)
            .collect()
    }

    /// The peers the next probe asks: before the settling time, those not heard at all; after
    /// it, the other voters not heard since, whose answers can make up the settled majority.
    fn abstention_probe_targets(&self, now: Instant) -> Vec<PeerId> {
        let Some(abstention) = &self.abstention else {
            return Vec::new();
        };
        let settled = now >= abstention.settled_at && self.settled_need().is_some();
        self.abstention_peers()
            .into_iter()
            .filter(|peer| {
                if settled {
                    !abstention.heard_settled.contains(peer)
                } else {
                    !abstention.heard.contains_key(peer)
                }
            })
            .collect()
    }

    /// How many other voters, heard after the settling time, end an abstention: `ceil(n/2)`
    /// of `n` voters (see the module docs). `None` where that is every other voter (three
    /// voters or fewer: hearing them all needs no settling time) and in `connected` mode,
    /// which has no electorate to count.
    fn settled_need(&self) -> Option<usize> {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => {
                let need = voters.len().div_ceil(2);
                (need < voters.len().saturating_sub(1)).then_some(need)
            }
            QuorumMode::Connected => None,
        }
    }

    /// Why an abstention may end now, if it may: every other voter heard, or a settled
    /// majority (see the module docs).
    fn abstention_end_reason(&self, now: Instant) -> Option<&'static str> {
        let abstention = self.abstention.as_ref()?;
        if self.abstention_waiting_for().is_empty() {
            if self.abstention_min_end().is_some_and(|end| now < end) {
                return None;
            }
            return Some("every other voter was heard");
        }
        let need = self.settled_need()?;
        (now >= abstention.settled_at && abstention.heard_settled.len() >= need)
            .then_some("a majority of the voters was heard after the settling time")
    }

    fn end_abstention_if_heard(&mut self, now: Instant) {
        if let Some(reason) = self.abstention_end_reason(now) {
            self.end_abstention(now, reason);
        }
    }

    /// Every peer that matters was heard: adopt the highest term heard, refuse every vote up
    /// to it, and persist it without ending the WAL's amnesia (see the module docs).
    fn end_abstention(&mut self, now: Instant, reason: &'static str) {
        let Some(abstention) = self.abstention.take() else {
            return;
        };
        let heard = abstention.heard.values().copied().max().unwrap_or(0);
        if heard > self.hard.term {
            self.hard.term = heard;
            self.hard.vote = None;
        }
        let term = self.hard.term;
        if term == 0 {
            // Nobody votes in term 0: nothing can have been forgotten.
            self.outbox.persist_again(self.hard, Action::Persist);
        } else {
            self.vote_floor = Some(term);
            self.outbox.persist_again(self.hard, Action::PersistAmnesic);
        }
        self.reset_election_timer(now);
        info!(
            term,
            heard = abstention.heard.len(),
            "abstention over: {reason}; no vote in this term or before it, taking part as usual \
             from the next term on"
        );
    }

    // -----------------------------------------------------------------------------------------
    // commands

    fn command(&mut self, now: Instant, command: Command) -> Result<CommandOutcome, ElectionError> {
        if self.quarantined {
            return Err(ElectionError::Quarantined);
        }
        match command {
            Command::EnableAutoElection(enabled) => {
                self.auto_election = enabled;
                // RAFT-8: the operator's choice outlives a restart.
                self.outbox.push(Action::PersistAutoElection(enabled));
                if enabled && self.leader.is_none() && self.hard.manual_override.is_some() {
                    // The pinned leader is gone and automatic election is back: lift the pin.
                    info!("automatic election enabled; manual override cleared");
                    self.hard.manual_override = None;
                }
                Ok(CommandOutcome::Applied)
            }
            Command::SetLeader(_) if self.abstention.is_some() => Err(ElectionError::Abstaining),
            Command::SetLeader(target) => match &self.config.quorum {
                QuorumMode::Connected => self.assign_leader(now, target),
                QuorumMode::Voters(_) => self.request_transfer(now, target),
            },
            Command::Resign => self.resign(now),
        }
    }

    /// `connected` mode: broadcast `LeaderAssign { term + 1 }` and adopt it here.
    fn assign_leader(
        &mut self,
        now: Instant,
        target: PeerId,
    ) -> Result<CommandOutcome, ElectionError> {
        if target != self.config.id && !self.connected.contains(&target) {
            return Err(ElectionError::UnknownPeer(target));
        }
        let term = self.hard.term + 1;
        self.hard.term = term;
        self.hard.vote = None;
        self.hard.manual_override = Some(target);
        let assign = LeaderAssign {
            term,
            leader: target,
            assigner: self.config.id,
        };
        for peer in self.connected.clone() {
            self.send(peer, RaftMessage::LeaderAssign(assign));
        }
        if target == self.config.id {
            self.become_leader(now, LeaderChangeCause::SetLeader);
        } else {
            self.become_follower(now, term, Some(target), LeaderChangeCause::SetLeader);
        }
        Ok(CommandOutcome::Applied)
    }

    /// `voters` mode: a transfer to `target`, then a pin.
    fn request_transfer(
        &mut self,
        now: Instant,
        target: PeerId,
    ) -> Result<CommandOutcome, ElectionError> {
        if !self.is_voter(target) {
            return Err(ElectionError::NotAVoter(target));
        }
        if self.phase == Phase::Leader {
            if target == self.config.id {
                self.pin_self(now);
                return Ok(CommandOutcome::Applied);
            }
            self.start_transfer(now, target, true, LeaderChangeCause::SetLeader);
            return Ok(CommandOutcome::TransferStarted { target });
        }
        if let Some(leader) = self.leader {
            self.send(
                leader,
                RaftMessage::LeaderAssign(LeaderAssign {
                    term: self.hard.term,
                    leader: target,
                    assigner: self.config.id,
                }),
            );
            return Ok(CommandOutcome::Forwarded { to: leader });
        }
        // No leader to ask: order the target to campaign directly (force master).
        if target == self.config.id {
            self.pin_on_win = true;
            self.campaign(now, Campaign::Transfer);
        } else {
            self.send(
                target,
                RaftMessage::TimeoutNow(TimeoutNow {
                    term: self.hard.term,
                    pin: true,
                }),
            );
        }
        Ok(CommandOutcome::TransferStarted { target })
    }

    fn resign(&mut self, now: Instant) -> Result<CommandOutcome, ElectionError> {
        if self.phase != Phase::Leader {
            return Err(ElectionError::NotLeader {
                leader: self.leader,
            });
        }
        if self.hard.manual_override == Some(self.config.id) {
            self.hard.manual_override = None;
        }
        // Fabric's Yield: do not propose again until another leader shows up or this passes.
        self.yielded_until = Some(now + self.config.election_timeout_max * 2);
        match self.best_successor() {
            Some(target) => {
                self.start_transfer(now, target, false, LeaderChangeCause::Resign);
                Ok(CommandOutcome::TransferStarted { target })
            }
            None => {
                self.become_follower(now, self.hard.term, None, LeaderChangeCause::Resign);
                Ok(CommandOutcome::SteppedDown)
            }
        }
    }

    /// The electable peer heard from most recently with the longest matching log; ties go to
    /// the smallest id so the choice is deterministic.
    fn best_successor(&self) -> Option<PeerId> {
        self.election_peers()
            .into_iter()
            .filter(|peer| self.recent_active.contains(peer) || self.connected.contains(peer))
            .max_by(|a, b| {
                let ma = self.match_index.get(a).copied().unwrap_or(0);
                let mb = self.match_index.get(b).copied().unwrap_or(0);
                ma.cmp(&mb).then_with(|| b.cmp(a))
            })
    }

    fn start_transfer(
        &mut self,
        now: Instant,
        target: PeerId,
        pin: bool,
        cause: LeaderChangeCause,
    ) {
        info!(%target, pin, "leadership transfer started");
        self.transfer = Some(Transfer {
            target,
            deadline: now + self.config.election_timeout_min,
            pin,
            ordered: false,
            cause,
        });
        self.order_transfer_if_caught_up(target);
        if self.transfer.is_some_and(|transfer| !transfer.ordered) {
            // Ask the target where its log ends; its answer releases `TimeoutNow`.
            self.send_heartbeat(target);
        }
    }

    fn order_transfer_if_caught_up(&mut self, peer: PeerId) {
        let Some(transfer) = self.transfer else {
            return;
        };
        let caught_up = self.match_index.get(&peer).copied().unwrap_or(0) >= self.last_log.index;
        if transfer.target != peer || transfer.ordered || !caught_up {
            return;
        }
        self.send(
            peer,
            RaftMessage::TimeoutNow(TimeoutNow {
                term: self.hard.term,
                pin: transfer.pin,
            }),
        );
        self.transfer = Some(Transfer {
            ordered: true,
            ..transfer
        });
    }

    /// Pins this leader (RAFT-8) and tells the followers at once: heartbeats carry the pin.
    fn pin_self(&mut self, now: Instant) {
        self.hard.manual_override = Some(self.config.id);
        self.broadcast_heartbeat(now);
    }

    // -----------------------------------------------------------------------------------------
    // timers

    fn leader_tick(&mut self, now: Instant) {
        if now >= self.heartbeat_deadline {
            self.broadcast_heartbeat(now);
        }
        if self.config.check_quorum && now >= self.quorum_check_deadline {
            let active = 1 + self
                .recent_active
                .iter()
                .filter(|peer| self.counts_for_quorum(peer))
                .count();
            if active < self.quorum_size() {
                warn!(
                    term = self.hard.term,
                    active,
                    quorum = self.quorum_size(),
                    "leader cannot hear a quorum; stepping down"
                );
                self.become_follower(now, self.hard.term, None, LeaderChangeCause::QuorumLost);
                return;
            }
            self.recent_active.clear();
            self.quorum_check_deadline = now + self.config.election_timeout_min;
        }
        if let Some(transfer) = self.transfer {
            if now >= transfer.deadline {
                warn!(target = %transfer.target, "leadership transfer timed out");
                self.transfer = None;
                self.outbox.publish(Event::TransferAborted {
                    target: transfer.target,
                });
                if self.shutdown.is_some() {
                    // Stopping: nobody took over in time; step down rather than wait more.
                    self.become_follower(now, self.hard.term, None, LeaderChangeCause::Shutdown);
                    return;
                }
            }
        }
        self.consider_preemption(now);
    }

    fn election_timeout(&mut self, now: Instant) {
        if self.can_campaign(now) {
            if self.hard.manual_override.is_some() {
                info!("pinned leader lost and automatic election enabled; manual override cleared");
                self.hard.manual_override = None;
            }
            let kind = if self.config.pre_vote {
                Campaign::PreVote
            } else {
                Campaign::Election
            };
            self.campaign(now, kind);
        } else {
            if self.leader.is_some() {
                info!(
                    term = self.hard.term,
                    "leader lost; not campaigning (automatic election off or not electable)"
                );
                self.leader_cause = LeaderChangeCause::ElectionTimeout;
            }
            self.phase = Phase::Follower;
            self.leader = None;
            self.leader_contact = None;
            self.votes.clear();
            self.reset_election_timer(now);
        }
    }

    fn can_campaign(&self, now: Instant) -> bool {
        self.auto_election
            && !self.quarantined
            && self.is_voter(self.config.id)
            && self.yielded_until.is_none_or(|until| now >= until)
    }

    // -----------------------------------------------------------------------------------------
    // role changes

    fn campaign(&mut self, now: Instant, kind: Campaign) {
        if self.leader.is_some() {
            self.leader_cause = if kind == Campaign::Transfer {
                LeaderChangeCause::Transfer
            } else {
                LeaderChangeCause::ElectionTimeout
            };
        }
        if self.election_started_at.is_none() {
            self.election_started_at = Some(now);
        }
        self.leader = None;
        self.leader_contact = None;
        self.transfer = None;
        self.transfer_campaign = kind == Campaign::Transfer;
        self.votes.clear();
        let (term, pre_vote) = match kind {
            Campaign::PreVote => {
                self.phase = Phase::PreCandidate;
                (self.hard.term + 1, true)
            }
            Campaign::Election | Campaign::Transfer => {
                self.phase = Phase::Candidate;
                self.hard.term += 1;
                self.hard.vote = Some(self.config.id);
                (self.hard.term, false)
            }
        };
        self.reset_election_timer(now);
        debug!(term, pre_vote, "campaign started");
        self.outbox.publish(Event::ElectionStarted {
            term,
            phase: if pre_vote { "pre_vote" } else { "election" },
        });
        self.votes.insert(self.config.id, true);
        if self.tally() == Tally::Won {
            // Alone in the electorate: nobody to ask.
            self.evaluate_campaign(now);
            return;
        }
        let request = RequestVote {
            term,
            candidate: self.config.id,
            last_log_index: self.last_log.index,
            last_log_term: self.last_log.term,
            pre_vote,
            leadership_transfer: kind == Campaign::Transfer,
            priority: self.priority,
        };
        for peer in self.election_peers() {
            self.send(peer, RaftMessage::RequestVote(request));
        }
    }

    fn become_leader(&mut self, now: Instant, cause: LeaderChangeCause) {
        // The driver logs the win and the leader change from the events, after the campaign
        // they belong to; an info line here would come out before "campaign started".
        debug!(term = self.hard.term, "became leader");
        let cause = if self.transfer_campaign {
            LeaderChangeCause::Transfer
        } else {
            cause
        };
        self.phase = Phase::Leader;
        let term = self.hard.term;
        if let Some(started) = self.election_started_at {
            self.outbox.publish(Event::ElectionWon {
                term,
                duration: now.saturating_duration_since(started),
            });
        }
        self.set_leader(now, self.config.id, cause);
        // RAFT-7: the voters that just granted their vote were heard moments ago. Counting them
        // keeps the first check-quorum from deposing a new leader whose heartbeats cannot be
        // answered within one minimum election timeout (a round trip near the timeout).
        self.recent_active = self
            .votes
            .iter()
            .filter(|&(peer, &granted)| granted && *peer != self.config.id)
            .map(|(peer, _)| *peer)
            .collect();
        self.votes.clear();
        self.transfer = None;
        self.match_index.clear();
        self.last_heard.clear();
        self.outranked_since = None;
        self.last_preemption = None;
        self.quorum_check_deadline = now + self.config.election_timeout_min;
        if std::mem::take(&mut self.pin_on_win) {
            self.hard.manual_override = Some(self.config.id);
        }
        self.broadcast_heartbeat(now);
    }

    fn become_follower(
        &mut self,
        now: Instant,
        term: u64,
        leader: Option<PeerId>,
        cause: LeaderChangeCause,
    ) {
        if term > self.hard.term {
            self.hard.term = term;
            self.hard.vote = None;
        }
        self.phase = Phase::Follower;
        self.votes.clear();
        self.transfer = None;
        self.pin_on_win = false;
        match leader {
            Some(leader) => self.set_leader(now, leader, cause),
            None => {
                if self.leader.is_some() {
                    // A leader handing over learns its successor's term before its name: the
                    // step-down is the hand-over's (resign, transfer), not a stray higher term.
                    self.leader_cause = self.handover.map_or(cause, |(_, why)| why);
                }
                self.leader = None;
                self.leader_contact = None;
            }
        }
        self.reset_election_timer(now);
    }

    /// Records `leader` as the leader of the current term.
    fn set_leader(&mut self, now: Instant, leader: PeerId, cause: LeaderChangeCause) {
        let cause = match self.handover {
            Some((target, handover_cause)) if target == leader => handover_cause,
            _ => cause,
        };
        if self.leader != Some(leader)
            || self.outbox.published_leader() != Some((self.hard.term, leader))
        {
            self.leader_cause = cause;
        }
        self.leader = Some(leader);
        self.last_leader = Some(leader);
        self.leader_contact = Some(now);
        self.election_started_at = None;
        self.yielded_until = None;
        if self
            .hard
            .manual_override
            .is_some_and(|pinned| pinned != leader)
        {
            // Another node leads now: the pin no longer describes the cluster.
            self.hard.manual_override = None;
        }
    }

    // -----------------------------------------------------------------------------------------
    // helpers

    fn in_lease(&self, now: Instant) -> bool {
        if !self.config.check_quorum {
            return false;
        }
        if self.phase == Phase::Leader {
            // Check-quorum steps a leader down once it stops hearing a quorum.
            return true;
        }
        // A healthy leader is heard every heartbeat interval, so a lease one interval shorter
        // than the minimum election timeout still refuses every disruptive candidate, and it
        // has surely run out when the first-ranked follower campaigns at that minimum: their
        // last heartbeats arrived moments apart, not a whole interval.
        let lease = self
            .config
            .election_timeout_min
            .saturating_sub(self.config.heartbeat_interval);
        self.leader.is_some()
            && self
                .leader_contact
                .is_some_and(|heard| now.saturating_duration_since(heard) < lease)
    }

    fn is_voter(&self, peer: PeerId) -> bool {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.contains(&peer),
            QuorumMode::Connected => true,
        }
    }

    /// Whether `peer`'s vote or activity counts towards the quorum now.
    fn counts_for_quorum(&self, peer: &PeerId) -> bool {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.contains(peer),
            QuorumMode::Connected => *peer == self.config.id || self.connected.contains(peer),
        }
    }

    fn electorate_size(&self) -> usize {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.len(),
            QuorumMode::Connected => 1 + self.connected.len(),
        }
    }

    fn tally(&self) -> Tally {
        let quorum = self.quorum_size();
        let electorate = self.electorate_size();
        let (mut granted, mut refused) = (0, 0);
        for (peer, &answer) in &self.votes {
            if self.counts_for_quorum(peer) {
                if answer {
                    granted += 1;
                } else {
                    refused += 1;
                }
            }
        }
        if granted >= quorum {
            Tally::Won
        } else if electorate.saturating_sub(refused) < quorum {
            Tally::Lost
        } else {
            Tally::Pending
        }
    }

    /// Peers asked for votes.
    fn election_peers(&self) -> Vec<PeerId> {
        match &self.config.quorum {
            QuorumMode::Voters(voters) => voters
                .iter()
                .copied()
                .filter(|peer| *peer != self.config.id)
                .collect(),
            QuorumMode::Connected => self.connected.iter().copied().collect(),
        }
    }

    /// Peers that get heartbeats: the voters plus whoever is connected (non-voting followers).
    fn replication_peers(&self) -> Vec<PeerId> {
        let mut peers: BTreeSet<PeerId> = self.connected.clone();
        if let QuorumMode::Voters(voters) = &self.config.quorum {
            peers.extend(voters.iter().copied());
        }
        peers.remove(&self.config.id);
        peers.into_iter().collect()
    }

    fn broadcast_heartbeat(&mut self, now: Instant) {
        for peer in self.replication_peers() {
            self.send_heartbeat(peer);
        }
        self.heartbeat_deadline = now + self.config.heartbeat_interval;
    }

    fn send_heartbeat(&mut self, peer: PeerId) {
        let heartbeat = AppendEntries {
            term: self.hard.term,
            leader: self.config.id,
            prev_index: self.last_log.index,
            prev_term: self.last_log.term,
            entries: Vec::new(),
            commit: self.commit,
            pinned: self.hard.manual_override == Some(self.config.id),
        };
        self.send(peer, RaftMessage::AppendEntries(heartbeat));
    }

    fn reset_election_timer(&mut self, now: Instant) {
        let (min, max) = (
            self.config.election_timeout_min,
            self.config.election_timeout_max,
        );
        // Ranking decides who campaigns first once the leader is lost; a node already
        // campaigning retries on the paper's uniform spread, so that a round trip longer than
        // the minimum timeout cannot make the first-ranked node restart every round too soon.
        let ranked = self.config.ranked_timeouts && self.phase == Phase::Follower;
        let timeout = match self.election_rank() {
            // No jitter: two nodes that both believe they rank first (their views of the lost
            // leader differ) are settled by the pre-vote stand-aside rule, and any jitter
            // would only delay the first survivor.
            Some((rank, electable)) if ranked => min + max.saturating_sub(min) / electable * rank,
            _ => self.rng.duration_between(min, max),
        };
        self.election_deadline = now + timeout;
    }

    /// This node's rank among the electable nodes, without the current or last leader, larger
    /// ids first; and how many there are. `None` when it is not electable itself.
    fn election_rank(&self) -> Option<(u32, u32)> {
        let mut electable: Vec<PeerId> = match &self.config.quorum {
            QuorumMode::Voters(voters) => voters.iter().copied().collect(),
            QuorumMode::Connected => self
                .connected
                .iter()
                .copied()
                .chain(std::iter::once(self.config.id))
                .collect(),
        };
        let lost = self.leader.or(self.last_leader);
        electable.retain(|peer| Some(*peer) != lost || *peer == self.config.id);
        // RAFT-10: priority first (a peer whose priority is unknown ranks as one without),
        // then the larger id. Without any priority this is the id order alone.
        electable.sort_unstable_by_key(|peer| std::cmp::Reverse((self.priority_of(*peer), *peer)));
        let rank = electable.iter().position(|peer| *peer == self.config.id)?;
        Some((
            u32::try_from(rank).ok()?,
            u32::try_from(electable.len()).ok()?,
        ))
    }

    fn send(&mut self, to: PeerId, message: RaftMessage) {
        // RAFT-1: whatever this message says about term or vote is durable first.
        self.flush_hard_state();
        self.outbox.push(Action::Send {
            to,
            message: ElectionMessage::Raft(message),
        });
    }

    fn flush_hard_state(&mut self) {
        // An abstaining node persists nothing: a hard state in the WAL would end its
        // abstention at the next start. `end_abstention` persists once it is over.
        if self.abstention.is_some() {
            return;
        }
        let kind = if self.vote_floor.is_some_and(|floor| self.hard.term <= floor) {
            Action::PersistAmnesic
        } else {
            Action::Persist
        };
        self.outbox.persist_as(self.hard, kind);
    }

    /// Ends an input: persist, then publish what changed, once (RAFT-9).
    fn finish(&mut self) {
        self.handover = None;
        self.flush_hard_state();
        self.outbox.finish(Published {
            term: self.hard.term,
            role: self.phase.role(),
            phase: self.phase.label(),
            leader: self.leader,
            cause: self.leader_cause,
        });
        if matches!(self.shutdown, Some(Shutdown::Leaving { .. })) && self.phase != Phase::Leader {
            // Stepped down because the successor's campaign reached it: stay (answering its
            // votes) until it is heard leading; any other way out stops at once.
            let awaiting_successor = self.leader_cause == LeaderChangeCause::Resign
                && self.leader.is_none_or(|leader| leader == self.config.id);
            if !awaiting_successor {
                self.stop_leaving();
            }
        }
    }

    /// Ends the stop: whatever it persisted and published on the way out went first.
    fn stop_leaving(&mut self) {
        if matches!(self.shutdown, Some(Shutdown::Leaving { .. })) {
            self.shutdown = Some(Shutdown::Stopped);
            self.outbox.push(Action::Stopped);
        }
    }
}

/// What `message` shows of its sender's term, for an abstaining node: a term no lower than the
/// sender's current one. A pre-vote request asks for the term after the sender's, and the
/// abstention probe (a pre-vote for term 0) says nothing about its sender.
fn evidence_term(message: &RaftMessage) -> Option<u64> {
    match message {
        RaftMessage::RequestVote(request) if request.pre_vote => request.term.checked_sub(1),
        other => Some(other.term()),
    }
}
