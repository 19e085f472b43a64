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
//! # Where each concern lives
//!
//! - this file: the state, its construction, the inputs and outputs, queries, timers and role
//!   changes;
//! - `messages.rs`: what each Raft message does (RAFT-2..7);
//! - `commands.rs`: the operator's commands (RAFT-8) and the graceful stop (CB-2);
//! - `priority.rs`: priorities and preemption (RAFT-10);
//! - `membership.rs`: membership changes, one server at a time (MEMB-1, MEMB-2);
//! - `abstention.rs`: the abstention of a node that lost its WAL (WAL-2, WAL-5);
//! - `replication.rs`: the replicated log (LOG-1..3): proposals, AppendEntries with entries,
//!   durable acknowledgements, commit, and the [`ReplicatedLog`] seam its driver uses;
//! - `acks.rs`: a follower's answers shared out among the followers on a broadcast link
//!   (issue 27, item 2);
//! - `tracker.rs`: a leader's progress per follower (probe, replicate, snapshot; LOG-2, LOG-4);
//! - `read_index.rs`: linearizable reads by a read index confirmed by a heartbeat round (LOG-7);
//! - `snapshot.rs`: snapshots and compaction (LOG-4): when one is due, `InstallSnapshot` in
//!   chunks to a follower behind the compaction point, and the follower's install;
//! - `chunks.rs`: entries larger than a frame, sent in chunks and gathered by the follower
//!   (MEMB-6);
//! - `suspicion.rs`: failure detection that adapts to the link: a follower's estimate of its
//!   leader's beats, which the election timer and the leader lease below read (RAFT-2, RAFT-7).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use conclave_protocol::{
    AppendEntries, AppendResp, Configuration, ConflictHint, LeaderAssign, PeerId, RequestVote,
    SnapshotResp, TimeoutNow, Vote,
};
use tracing::{debug, info, warn};

use crate::election::{
    Action, AmnesiaCause, Command, CommandOutcome, ElectionError, ElectionMessage, Event,
    FencingToken, HardState, HealthReading, LeaderChangeCause, Outbox, PeerSignal, Published, Role,
};
use crate::raft::config::{QuorumMode, RaftConfig, majority_threshold};
use crate::raft::log::RaftLog;
use crate::raft::message::RaftMessage;
use crate::raft::state::{LogPosition, RaftStatus};
use crate::rng::SeededRng;
use crate::storage::DurableState;
use crate::time::Instant;

mod abstention;
mod acks;
mod chunks;
mod commands;
mod membership;
mod messages;
mod priority;
mod read_index;
mod reorder;
mod replication;
mod snapshot;
mod suspicion;
mod tracker;

#[cfg(test)]
pub(crate) use chunks::CHUNK_OVERHEAD;
use chunks::IncomingEntry;
pub use chunks::MAX_ENTRY_BYTES;
pub use membership::{MembershipChange, MembershipError};
use read_index::ReadQueue;
pub use read_index::{ReadError, ReadId};
use reorder::ReorderBuffer;
use replication::PendingAck;
pub use replication::{LogStatus, LogWrite, ProposeError, ReplicatedLog};
use snapshot::IncomingSnapshot;
use suspicion::{LeaderBeats, SuspicionRule};
use tracker::Progress;

/// Where a node stands in Raft (RAFT-1): [`Role`] with the pre-vote round of RAFT-7 told
/// apart. It is the mode's phase label of [`Event::RoleChanged`].
///
/// A leader's own state travels inside its variant: it is made at the win and dropped with
/// the step-down, so "leads" and "has a leader's state" are one fact, and nothing of one term
/// of leadership can be read in another role or carried into the next term.
#[derive(Debug, Clone)]
enum Phase {
    /// Follows a leader, or waits for one.
    Follower,
    /// Asks whether it could win before disturbing anyone's term.
    PreCandidate,
    /// Campaigns in a new term.
    Candidate,
    /// Leads, with what only a leader keeps (boxed: it is large, and most nodes follow).
    Leader(Box<Leadership>),
}

impl Phase {
    /// The role every mode shares: a pre-candidate is a candidate.
    fn role(&self) -> Role {
        match self {
            Phase::Follower => Role::Follower,
            Phase::PreCandidate | Phase::Candidate => Role::Candidate,
            Phase::Leader(_) => Role::Leader,
        }
    }

    /// The phase label of events, logs and the status answer.
    fn label(&self) -> &'static str {
        match self {
            Phase::Follower => "follower",
            Phase::PreCandidate => "pre_candidate",
            Phase::Candidate => "candidate",
            Phase::Leader(_) => "leader",
        }
    }

    /// The leader's state, while leading.
    fn leadership(&self) -> Option<&Leadership> {
        match self {
            Phase::Leader(leadership) => Some(leadership),
            _ => None,
        }
    }

    /// The leader's state, while leading, to change it.
    fn leadership_mut(&mut self) -> Option<&mut Leadership> {
        match self {
            Phase::Leader(leadership) => Some(leadership),
            _ => None,
        }
    }
}

/// Who elects and counts now: in `voters` mode the voters of the configuration in force
/// (MEMB-1: the latest in the log, `cluster.voters` until the log holds one); in `connected`
/// mode whoever membership reports connected.
#[derive(Debug, Clone, Copy)]
enum Electorate<'a> {
    /// The voters of the configuration in force.
    Voters(&'a BTreeSet<PeerId>),
    /// Whoever is connected.
    Connected,
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

/// A leader's own state (RAFT-4, RAFT-7, RAFT-8, RAFT-10), for one term of leadership: it
/// lives in [`Phase::Leader`], so none of it can be read stale after a step-down.
#[derive(Debug, Clone)]
struct Leadership {
    /// When the next heartbeat goes out.
    heartbeat_deadline: Instant,
    /// When check-quorum next counts the peers heard (RAFT-7).
    quorum_check_deadline: Instant,
    /// Peers heard from since the last check-quorum.
    recent_active: BTreeSet<PeerId>,
    /// Each follower's replication: how far its log is known to match, and what to send it
    /// next (LOG-2).
    progress: BTreeMap<PeerId, Progress>,
    /// A leadership transfer under way (RAFT-8).
    transfer: Option<Transfer>,
    /// RAFT-10: when each peer last answered this leader.
    last_heard: BTreeMap<PeerId, Instant>,
    /// RAFT-10: since when a caught-up, connected voter of higher priority has been there
    /// without a break.
    outranked_since: Option<Instant>,
    /// RAFT-10: when this leader last started a preemption transfer; the next one waits
    /// `preempt_delay` after it.
    last_preemption: Option<Instant>,
    /// MEMB-1: the voters whose granted votes elected it (itself included), as its
    /// configuration counted them; empty for a leader assigned without a vote.
    electors: BTreeSet<PeerId>,
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

/// What an abstaining node knows (WAL-2, WAL-5; the rule and its argument are in `abstention.rs`).
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
    /// Started for a cluster being created ([`AmnesiaCause::NewCluster`]), and no voter has
    /// shown a term above 0 yet.
    new_cluster: bool,
}

/// The election state machine of one node. See the module docs.
#[derive(Debug)]
pub struct Raft {
    config: RaftConfig,
    rng: SeededRng,

    hard: HardState,

    /// Where it stands, with a leader's own state while it leads; [`Phase::role`] is the role
    /// every mode shares.
    phase: Phase,
    leader: Option<PeerId>,
    /// The replicated log; without `[log]`, only the position votes compare (RAFT-5).
    log: RaftLog,
    /// A follower's acknowledgement that waits for its entries to be durable (LOG-3).
    pending_ack: Option<PendingAck>,
    /// A follower's highest index verified against its leader's log in that leader's term
    /// (`acks.rs`): `(leader, term, index)`.
    leader_match: Option<(PeerId, u64, u64)>,
    /// A follower's last answer (`acks.rs`): `(leader, term, index reported, heartbeats
    /// left unanswered since)`.
    answered: Option<(PeerId, u64, u64, u32)>,
    /// LOG-4: the chunks of a leader's snapshot received so far.
    incoming_snapshot: Option<IncomingSnapshot>,
    /// LOG-4: what `incoming_snapshot` may hold, at most ([`snapshot::MAX_INCOMING_SNAPSHOT_BYTES`];
    /// lowered by unit tests only).
    incoming_snapshot_limit: usize,
    /// MEMB-6: the chunks of an entry larger than a frame received so far.
    incoming_entry: Option<IncomingEntry>,
    /// LOG-2: AppendEntries from the leader that overtook their predecessors.
    reorder: Option<ReorderBuffer>,
    /// LOG-4: a snapshot installed in the log that the driver has not taken yet (to restore
    /// its machine from and save).
    snapshot_to_install: Option<crate::storage::Snapshot>,
    /// LOG-7: a leader's linearizable reads waiting for a heartbeat round, and their outcomes.
    reads: ReadQueue,
    /// WAL-2 with a log: after a lost WAL the node may also have lost entries it had
    /// acknowledged, so a vote from it could elect a leader without a committed entry. It
    /// grants no vote and does not campaign until its log matches a leader's through an entry
    /// that leader committed in its own term (`replication.rs`).
    log_catch_up: bool,
    /// The leader's commit index its log was seen to match through, during a catch-up: the
    /// catch-up is over once the log is durable up to it.
    catch_up_target: Option<u64>,
    /// During a catch-up: the other voters whose requests showed an empty log. When every one
    /// of them did and this log is empty too, nothing was ever committed that could be lost
    /// (a cluster whose every node started without a WAL), and the catch-up ends.
    catch_up_empty_peers: BTreeSet<PeerId>,
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
    /// How far apart the current leader's beats arrive, for adaptive detection (RAFT-2).
    leader_beats: LeaderBeats,
    /// The last leader this node knew, kept after it is lost: the ranking of election
    /// timeouts leaves it out, so every survivor ranks the same way.
    last_leader: Option<PeerId>,

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
    /// MEMB-1: the configuration in force at the end of the last input, with the index of the
    /// entry that carries it, so that a change is published once.
    observed_config: Option<(u64, Configuration)>,
    /// MEMB-3: whether this node was a member of a configuration it acted on, and whether it
    /// has said that its removal committed: said once, when it did.
    self_membership: SelfMembership,
}

/// MEMB-3: this node's place in the configurations it has acted on, so that a removal is
/// announced once, and a node that was never a member (one not added yet, catching up on
/// configurations from before its time) announces nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SelfMembership {
    /// Not in any configuration it acted on.
    Never,
    /// In the configuration it last acted on, or in one before.
    Member,
    /// Its removal is committed and was announced.
    Removed,
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

    /// A node restarting from what its storage recovered: hard state, snapshot and entries.
    pub fn restored(
        config: RaftConfig,
        durable: &DurableState,
        rng: SeededRng,
        now: Instant,
    ) -> Result<Self, ElectionError> {
        let mut raft = Self::with_last_log(config, durable.hard, LogPosition::default(), rng, now)?;
        raft.log = RaftLog::restored(durable);
        // What a restart recovers is where it starts, not a change.
        raft.observed_config = raft.configuration_in_force();
        raft.self_membership = raft.initial_self_membership();
        Ok(raft)
    }

    /// A node starting (or restarting) as a follower with the hard state it persisted and the
    /// position of its last log entry, as if a snapshot covered everything up to it.
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
            log: RaftLog::starting_after(last_log),
            pending_ack: None,
            leader_match: None,
            answered: None,
            incoming_snapshot: None,
            incoming_snapshot_limit: snapshot::MAX_INCOMING_SNAPSHOT_BYTES,
            incoming_entry: None,
            reorder: None,
            snapshot_to_install: None,
            reads: ReadQueue::default(),
            log_catch_up: false,
            catch_up_target: None,
            catch_up_empty_peers: BTreeSet::new(),
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
            leader_beats: LeaderBeats::default(),
            last_leader: None,
            outbox: Outbox::new(restored, Phase::Follower.role(), Phase::Follower.label()),
            leader_cause: LeaderChangeCause::ElectionTimeout,
            handover: None,
            transfer_campaign: false,
            abstention: None,
            vote_floor: None,
            shutdown: None,
            priority,
            peer_priorities: BTreeMap::new(),
            observed_config: None,
            self_membership: SelfMembership::Never,
        };
        raft.observed_config = raft.configuration_in_force();
        raft.self_membership = raft.initial_self_membership();
        raft.reset_election_timer(now);
        Ok(raft)
    }

    /// The node's WAL held no hard state (WAL-2), for the reason `cause`: it may have voted
    /// in terms it no longer knows. Call right after [`Raft::new`]. A voter with other voters
    /// (or any node in `connected` mode) then abstains until it has heard every other voter;
    /// see the module docs. Returns whether it abstains: a non-voter and a single voter need
    /// not. A lost WAL is said at WARN; a first start, where the same rule holds but nothing
    /// went wrong, at INFO (the driver says how a new cluster is created).
    pub fn begin_abstention(&mut self, now: Instant, cause: AmnesiaCause) -> bool {
        if self.abstention.is_some() {
            return true;
        }
        let others = match self.electorate() {
            Electorate::Voters(voters) => {
                if !voters.contains(&self.config.id) {
                    return false;
                }
                voters.len() - 1
            }
            Electorate::Connected if cause == AmnesiaCause::NewCluster => {
                // No electorate to ask: a new cluster in `connected` mode, which promises no
                // single leader per term across partitions anyway, starts from its genesis.
                self.outbox.push(Action::PersistGenesis);
                return false;
            }
            Electorate::Connected => usize::MAX,
        };
        if others == 0 {
            if cause == AmnesiaCause::NewCluster {
                // The only voter: nobody else can have counted a vote of it.
                self.outbox.push(Action::PersistGenesis);
            }
            return false;
        }
        self.abstention = Some(Abstention {
            since: now,
            settled_at: now + self.config.election_timeout_max * 2,
            heard: BTreeMap::new(),
            heard_settled: BTreeSet::new(),
            next_probe: now,
            new_cluster: cause == AmnesiaCause::NewCluster,
        });
        self.phase = Phase::Follower;
        self.leader = None;
        self.leader_contact = None;
        self.votes.clear();
        // Its log may have been lost with the WAL, or be what was rebuilt of it before a crash
        // cut the catch-up short: the WAL stays amnesic until the log caught up, so every
        // restart in between catches up again.
        self.log_catch_up = self.config.log.is_some();
        self.catch_up_target = None;
        self.catch_up_empty_peers.clear();
        let waiting: Vec<String> = self
            .abstention_waiting_for()
            .iter()
            .map(PeerId::to_string)
            .collect();
        match cause {
            AmnesiaCause::FirstStart => info!(
                waiting_for = %waiting.join(","),
                "first start in this data directory, so no term or vote yet: this node grants \
                 no vote and does not campaign until it has heard every other voter, or a \
                 majority of the voters after two election timeouts (docs/wal.md, \"Amnesia \
                 and abstention\")"
            ),
            AmnesiaCause::Lost => warn!(
                term = self.hard.term,
                waiting_for = %waiting.join(","),
                "no term or vote recovered (lost or repaired WAL): this node may have voted in \
                 terms it no longer knows, so it grants no vote and does not campaign until it \
                 has heard every other voter, or a majority of the voters after two election \
                 timeouts (docs/wal.md)"
            ),
            AmnesiaCause::NewCluster => info!(
                waiting_for = %waiting.join(","),
                "first start of a node of a new cluster (cluster.initial_state = \"new\"): \
                 asking the voters whether the cluster exists before this node votes; it takes \
                 part once every other voter answered, none past term 0 (`conclave init` \
                 creates a node of a new cluster without asking)"
            ),
        }
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
        if self.log_catch_up {
            self.note_catch_up_evidence(from, &message);
        }
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
            if !self.is_leader() && now >= deadline {
                info!("the successor was not heard leading in time; stopping");
                self.finish();
                self.stop_leaving();
                return;
            }
        }
        if self.abstention.is_some() {
            self.abstention_tick(now);
        } else if self.is_leader() {
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
            if let Some(leading) = self.phase.leadership_mut() {
                leading.recent_active.remove(&peer);
            }
            self.connected.remove(&peer)
        };
        if changed && self.abstention.is_some() {
            // In `connected` mode the peers to hear are the connected ones.
            self.end_abstention_if_heard(now);
        } else if changed && !self.quarantined {
            match self.phase {
                Phase::PreCandidate | Phase::Candidate => self.evaluate_campaign(now),
                Phase::Leader(_) if connected => {
                    // Tell a newcomer who leads without waiting for the next heartbeat.
                    self.send_heartbeat(now, peer);
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
                if self.is_leader() {
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
                if self.is_leader() {
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
            if self.is_leader() {
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
        let Phase::Leader(leading) = &self.phase else {
            return Some(match self.shutdown {
                // A stopping node never campaigns; it only waits for its successor.
                Some(Shutdown::Leaving { deadline }) => deadline,
                _ => self.election_deadline,
            });
        };
        let mut next = leading.heartbeat_deadline;
        if self.config.check_quorum {
            next = next.min(leading.quorum_check_deadline);
        }
        if let Some(transfer) = &leading.transfer {
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
        self.phase
            .leadership()
            .map(|leading| leading.heartbeat_deadline)
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        matches!(self.phase, Phase::Leader(_))
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

    /// The term of its log entry at `index`, when it holds it (the simulator's log checks).
    pub fn log_term_at(&self, index: u64) -> Option<u64> {
        self.log.term_at(index)
    }

    /// Whether it waits, after a lost WAL, for its log to match a leader's before it votes.
    pub fn is_catching_up(&self) -> bool {
        self.log_catch_up
    }

    /// Its last log entry's position.
    pub fn log_last(&self) -> LogPosition {
        self.log.last()
    }

    /// The first index whose term it knows: the snapshot's last (0 without one).
    pub fn log_first_index(&self) -> u64 {
        self.log.snapshot().index
    }

    /// MEMB-1: while it leads, the voters whose granted votes elected it, itself included
    /// (what a check that two elections of one term share a voter reads).
    pub fn electors(&self) -> Option<&BTreeSet<PeerId>> {
        self.phase.leadership().map(|leading| &leading.electors)
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
        match self.electorate() {
            Electorate::Voters(voters) => voters.len() / 2 + 1,
            Electorate::Connected => majority_threshold(self.electorate_size()),
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
            last_log: self.log.last(),
            log: self.log_status(),
            abstaining_until_heard: self.abstention_waiting_for(),
            priority: self.priority,
        }
    }

    // -----------------------------------------------------------------------------------------
    // timers

    fn leader_tick(&mut self, now: Instant) {
        let Some(leading) = self.phase.leadership() else {
            return;
        };
        if now >= leading.heartbeat_deadline {
            self.broadcast_heartbeat(now);
        }
        let Some(leading) = self.phase.leadership() else {
            return;
        };
        if self.config.check_quorum && now >= leading.quorum_check_deadline {
            // MEMB-1: a leader that removed itself does not count itself.
            let active = usize::from(self.counts_for_quorum(&self.config.id))
                + leading
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
            if let Some(leading) = self.phase.leadership_mut() {
                leading.recent_active.clear();
                leading.quorum_check_deadline = now + self.config.election_timeout_min;
            }
        }
        if let Some(transfer) = self.transfer() {
            if now >= transfer.deadline {
                warn!(target = %transfer.target, "leadership transfer timed out");
                self.set_transfer(None);
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
            && !self.log_catch_up
            && self.may_stand()
            && self.yielded_until.is_none_or(|until| now >= until)
    }

    /// MEMB-1: whether this node may stand for election: a voter of its latest configuration,
    /// or a voter of the one before while the latest, which removes it, is not known committed
    /// (dissertation §4.2.2). Until then it may hold the only copy of that entry — a leader
    /// that removed itself and crashed before the removal committed — and the remaining voters
    /// refuse every candidate whose log lacks it. It never counts its own vote then: the tally
    /// counts the voters of its latest configuration only.
    fn may_stand(&self) -> bool {
        if self.is_voter(self.config.id) {
            return true;
        }
        let Some(index) = self.log.configuration_index() else {
            return false;
        };
        if index <= self.log.commit() {
            return false;
        }
        match (self.log.configuration_at(index - 1), &self.config.quorum) {
            (Some(config), _) => config.voters.contains(&self.config.id),
            (None, QuorumMode::Voters(seed)) => seed.contains(&self.config.id),
            (None, QuorumMode::Connected) => false,
        }
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
            last_log_index: self.log.last().index,
            last_log_term: self.log.last().term,
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
        let recent_active = self
            .votes
            .iter()
            .filter(|&(peer, &granted)| granted && *peer != self.config.id)
            .map(|(peer, _)| *peer)
            .collect();
        let electors = self
            .votes
            .iter()
            .filter(|&(peer, &granted)| granted && self.counts_for_quorum(peer))
            .map(|(peer, _)| *peer)
            .collect();
        self.votes.clear();
        self.phase = Phase::Leader(Box::new(Leadership {
            heartbeat_deadline: now,
            quorum_check_deadline: now + self.config.election_timeout_min,
            recent_active,
            progress: BTreeMap::new(),
            transfer: None,
            last_heard: BTreeMap::new(),
            outranked_since: None,
            last_preemption: None,
            electors,
        }));
        if std::mem::take(&mut self.pin_on_win) {
            self.hard.manual_override = Some(self.config.id);
        }
        self.pending_ack = None;
        self.drop_reorder_buffer();
        if self.config.log.is_some() {
            self.start_replication();
        }
        self.broadcast_heartbeat(now);
        if self.config.log.is_some() {
            // A single voter's no-op commits once its own write is durable.
            self.advance_commit(now);
        }
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
            // MEMB-6: the next leader may have another entry at that index.
            self.incoming_entry = None;
            // LOG-2: what the old leader pipelined is no use to the next one.
            self.drop_reorder_buffer();
        }
        self.phase = Phase::Follower;
        self.votes.clear();
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
        if let Some(rule) = SuspicionRule::of(&self.config) {
            if leader != self.config.id {
                self.leader_beats.observe(now, self.hard.term, leader, rule);
            }
        }
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
        if self.is_leader() {
            // Check-quorum steps a leader down once it stops hearing a quorum.
            return true;
        }
        // A healthy leader is heard every heartbeat interval, so a lease one interval shorter
        // than the minimum election timeout still refuses every disruptive candidate, and it
        // has surely run out when the first-ranked follower campaigns at that minimum: their
        // last heartbeats arrived moments apart, not a whole interval. With adaptive detection
        // the first-ranked follower campaigns at its own suspicion, so the lease is this node's
        // suspicion less one interval: the interval absorbs what tells two followers'
        // estimates of one leader apart. Never longer than the fixed lease.
        let base = self
            .adaptive_suspicion()
            .map_or(self.config.election_timeout_min, |suspicion| {
                suspicion.min(self.config.election_timeout_min)
            });
        let lease = base.saturating_sub(self.config.heartbeat_interval);
        self.leader.is_some()
            && self
                .leader_contact
                .is_some_and(|heard| now.saturating_duration_since(heard) < lease)
    }

    /// Who elects and counts now (MEMB-1). See [`Electorate`].
    fn electorate(&self) -> Electorate<'_> {
        match &self.config.quorum {
            QuorumMode::Voters(seed) => Electorate::Voters(
                self.log
                    .configuration()
                    .map_or(seed, |config| &config.voters),
            ),
            QuorumMode::Connected => Electorate::Connected,
        }
    }

    /// MEMB-1: the configuration in force in `voters` mode: the latest in the log, or the one
    /// `cluster.voters` seeds; `None` in `connected` mode.
    pub fn configuration(&self) -> Option<Configuration> {
        match &self.config.quorum {
            QuorumMode::Voters(seed) => Some(
                self.log
                    .configuration()
                    .cloned()
                    .unwrap_or_else(|| Configuration::with_voters(seed.iter().copied())),
            ),
            QuorumMode::Connected => None,
        }
    }

    /// MEMB-1: the configuration in force with the index of the entry that carries it (the
    /// snapshot's index when it came with the snapshot, 0 when `cluster.voters` seeds it).
    fn configuration_in_force(&self) -> Option<(u64, Configuration)> {
        let index = match (self.log.configuration_index(), self.log.configuration()) {
            (Some(index), _) => index,
            (None, Some(_)) => self.log.snapshot().index,
            (None, None) => 0,
        };
        self.configuration().map(|config| (index, config))
    }

    /// MEMB-1: after an input, publishes a change of the configuration in force, says once
    /// when this node is no voter of it (it does not campaign), and forgets the replication
    /// of members it no longer has.
    fn observe_configuration(&mut self) {
        let current = self.configuration_in_force();
        if current == self.observed_config {
            self.notice_removal();
            return;
        }
        let previous = std::mem::replace(&mut self.observed_config, current.clone());
        let Some((index, config)) = current else {
            return;
        };
        info!(
            index,
            voters = ?config.voters,
            learners = ?config.learners,
            "cluster configuration changed"
        );
        if !config.voters.contains(&self.config.id) {
            let role = if config.learners.contains(&self.config.id) {
                "a learner"
            } else {
                "not a member"
            };
            if self.may_stand() {
                info!(
                    index,
                    "this node is {role} in the cluster's latest configuration: it campaigns \
                     only until that configuration commits, without counting its own vote"
                );
            } else {
                info!(
                    index,
                    "this node is {role} in the cluster's configuration: it does not campaign"
                );
            }
        }
        if let (Some((_, old)), Some(leading)) = (previous, self.phase.leadership_mut()) {
            for gone in old.members().filter(|peer| !config.contains(peer)) {
                leading.progress.remove(gone);
                leading.recent_active.remove(gone);
            }
        }
        self.outbox.publish(Event::ConfigurationChanged {
            index,
            voters: config.voters.iter().copied().collect(),
            learners: config.learners.iter().copied().collect(),
        });
        self.notice_removal();
    }

    /// MEMB-3: where this node stands at start: a member when the configuration in force
    /// names it.
    fn initial_self_membership(&self) -> SelfMembership {
        match &self.observed_config {
            Some((_, config)) if config.contains(&self.config.id) => SelfMembership::Member,
            _ => SelfMembership::Never,
        }
    }

    /// MEMB-3: says once, in one line, that this node was removed, when the configuration
    /// that leaves it out is known committed here: from then on it neither campaigns nor
    /// counts (`may_stand`), and the operator learns why a node that still runs does nothing.
    fn notice_removal(&mut self) {
        let Some((index, config)) = &self.observed_config else {
            return;
        };
        if config.contains(&self.config.id) {
            self.self_membership = SelfMembership::Member;
            return;
        }
        if self.self_membership == SelfMembership::Member && *index <= self.log.commit() {
            self.self_membership = SelfMembership::Removed;
            info!(
                index = *index,
                "this node was removed from the cluster (the configuration at index {index} \
                 that leaves it out is committed): it no longer campaigns; stop it, or add it \
                 again as a learner"
            );
        }
    }

    /// MEMB-2: the learners of the configuration in force (none before the log holds one).
    fn learners(&self) -> impl Iterator<Item = PeerId> + '_ {
        self.log
            .configuration()
            .into_iter()
            .flat_map(|config| config.learners.iter().copied())
    }

    fn is_voter(&self, peer: PeerId) -> bool {
        match self.electorate() {
            Electorate::Voters(voters) => voters.contains(&peer),
            Electorate::Connected => true,
        }
    }

    /// Whether `peer`'s vote or activity counts towards the quorum now.
    fn counts_for_quorum(&self, peer: &PeerId) -> bool {
        match self.electorate() {
            Electorate::Voters(voters) => voters.contains(peer),
            Electorate::Connected => *peer == self.config.id || self.connected.contains(peer),
        }
    }

    fn electorate_size(&self) -> usize {
        match self.electorate() {
            Electorate::Voters(voters) => voters.len(),
            Electorate::Connected => 1 + self.connected.len(),
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
        match self.electorate() {
            Electorate::Voters(voters) => voters
                .iter()
                .copied()
                .filter(|peer| *peer != self.config.id)
                .collect(),
            Electorate::Connected => self.connected.iter().copied().collect(),
        }
    }

    /// Peers that get heartbeats: the voters and learners (MEMB-2) plus whoever is connected
    /// (non-voting followers).
    fn replication_peers(&self) -> Vec<PeerId> {
        let mut peers: BTreeSet<PeerId> = self.connected.clone();
        if let Electorate::Voters(voters) = self.electorate() {
            peers.extend(voters.iter().copied());
            peers.extend(self.learners());
        }
        peers.remove(&self.config.id);
        peers.into_iter().collect()
    }

    /// The leadership transfer under way, if this node leads and started one.
    fn transfer(&self) -> Option<Transfer> {
        self.phase.leadership().and_then(|leading| leading.transfer)
    }

    /// Starts, updates or ends this leader's transfer; nothing when it does not lead.
    fn set_transfer(&mut self, transfer: Option<Transfer>) {
        if let Some(leading) = self.phase.leadership_mut() {
            leading.transfer = transfer;
        }
    }

    /// How far `peer`'s log is known to match this leader's; 0 when unknown or not leading.
    fn match_index_of(&self, peer: PeerId) -> u64 {
        self.phase
            .leadership()
            .and_then(|leading| leading.progress.get(&peer))
            .map(|progress| progress.matched)
            .unwrap_or(0)
    }

    fn broadcast_heartbeat(&mut self, now: Instant) {
        if self.config.log.is_some() {
            self.start_read_round_on_heartbeat();
        }
        for peer in self.replication_peers() {
            if self.config.log.is_some() {
                self.heartbeat_with_log(now, peer);
            } else {
                self.send_heartbeat(now, peer);
            }
        }
        if let Some(leading) = self.phase.leadership_mut() {
            leading.heartbeat_deadline = now + self.config.heartbeat_interval;
        }
    }

    /// A heartbeat without the log: it says where this leader's log ends, and the answer
    /// whether the follower's ends there too (a leadership transfer's "caught up").
    fn send_heartbeat(&mut self, now: Instant, peer: PeerId) {
        if self.config.log.is_some() {
            self.send_append(now, peer);
            return;
        }
        let last_log = self.log.last();
        let heartbeat = AppendEntries {
            term: self.hard.term,
            leader: self.config.id,
            prev_index: last_log.index,
            prev_term: last_log.term,
            entries: Vec::new(),
            // Without a log nothing is ever committed.
            commit: 0,
            pinned: self.hard.manual_override == Some(self.config.id),
            read_round: None,
            chunk: None,
        };
        self.send(peer, RaftMessage::AppendEntries(heartbeat));
    }

    fn reset_election_timer(&mut self, now: Instant) {
        let max = self.config.election_timeout_max;
        // RAFT-2: a follower that learned its leader's beats suspects it once it is overdue
        // on this link; that suspicion is the base, and the rank slots or the random spread
        // stay above it, so the first-ranked still goes first and no deadline passes `max`.
        let min = match self.phase {
            Phase::Follower => self.adaptive_suspicion(),
            _ => None,
        }
        .unwrap_or(self.config.election_timeout_min);
        // Ranking decides who campaigns first once the leader is lost; a node already
        // campaigning retries on the paper's uniform spread, so that a round trip longer than
        // the minimum timeout cannot make the first-ranked node restart every round too soon.
        let ranked = self.config.ranked_timeouts && matches!(self.phase, Phase::Follower);
        let timeout = match self.election_rank() {
            // No jitter: two nodes that both believe they rank first (their views of the lost
            // leader differ) are settled by the pre-vote stand-aside rule, and any jitter
            // would only delay the first survivor.
            Some((rank, electable)) if ranked => min + max.saturating_sub(min) / electable * rank,
            _ => self.rng.duration_between(min, max),
        };
        self.election_deadline = now + timeout;
    }

    /// With adaptive detection, how long after its last contact the current leader is overdue
    /// on this link (`suspicion.rs`); `None` without a leader, with detection off, or while
    /// too few of its beats were seen, when the fixed timeout holds.
    fn adaptive_suspicion(&self) -> Option<Duration> {
        let rule = SuspicionRule::of(&self.config)?;
        self.leader_beats
            .suspicion(self.hard.term, self.leader?, rule)
    }

    /// This node's rank among the electable nodes, without the current or last leader, larger
    /// ids first; and how many there are. `None` when it is not electable itself.
    fn election_rank(&self) -> Option<(u32, u32)> {
        let mut electable: Vec<PeerId> = match self.electorate() {
            Electorate::Voters(voters) => voters.iter().copied().collect(),
            Electorate::Connected => self
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
        // While its log catches up after a lost WAL the WAL stays amnesic, so that a restart
        // abstains and catches up again.
        let kind =
            if self.vote_floor.is_some_and(|floor| self.hard.term <= floor) || self.log_catch_up {
                Action::PersistAmnesic
            } else {
                Action::Persist
            };
        self.outbox.persist_as(self.hard, kind);
    }

    /// Ends an input: persist, then publish what changed, once (RAFT-9).
    fn finish(&mut self) {
        self.observe_configuration();
        self.handover = None;
        self.flush_hard_state();
        self.outbox.finish(Published {
            term: self.hard.term,
            role: self.phase.role(),
            phase: self.phase.label(),
            leader: self.leader,
            cause: self.leader_cause,
        });
        if matches!(self.shutdown, Some(Shutdown::Leaving { .. })) && !self.is_leader() {
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

crate::election::has_outbox!(Raft);
