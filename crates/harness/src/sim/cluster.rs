//! The simulated cluster: N nodes, each a [`Membership`] and an [`Election`] (of any mode the
//! enum holds) wired together the way the actors wire them, on a [`Network`] in virtual time.
//!
//! [`Simulation::step`] jumps to the earliest pending thing — a message arrival, a node's timer,
//! or a message waiting in a node's mailbox between membership and the election — and hands it
//! to the node, then carries out the batch of outputs the election hands out
//! ([`Election::take_ready`]) exactly as the actor shell does: its persist becomes the node's
//! durable state, its messages go on the network. (With raft's log, or with
//! [`SimConfig::hard_state_fsync`], a persist becomes durable only when its fsync completes, a
//! disk delay later; the outputs that wait for it are held back until then, as the
//! ElectionActor holds them, and the core is told with [`Election::handle_persisted`]: see
//! `replicated_log.rs`.) Every invariant is checked after every step.
//!
//! # Mailbox hops
//!
//! In the actors, the transport hands an admitted frame to membership and, when it is an
//! election message, to the election directly, while what membership concludes from frames
//! and silence (a peer connected or gone, this node's id refused) reaches the election as a
//! message of its own, through membership's mailbox and then the election's. A frame can thus
//! overtake the reachability it caused, and so can frames that arrive just after it. The
//! simulator models that hop ([`SimConfig::mailbox_delay`]): membership's events for the
//! election wait in a FIFO queue per node and are delivered as steps of their own after a
//! random delay, interleaved with frame deliveries and timers, so the election sees the orders
//! the actors can produce. ([`Observation::ReachabilityOvertaken`] records each time an
//! election message from a peer was handed over while news of that peer still waited.) The
//! other hops keep their order in the actors and need no model: the transport's deliveries to
//! one actor, and an actor's sends to the transport, are FIFO.
//! A crash can strike part-way through a node's actions, so a message sent before the state it
//! depends on was persisted would show up as a double vote after the restart.
//!
//! Every message travels with the header of a real envelope (sender id, addressee,
//! incarnation, sequence number) and passes the receiver's [`Admission`] before membership
//! and the election see it, as in the transport: a restarted node challenges its senders, a
//! duplicated message is a replay, routes follow the address that owns an id. A second node
//! with an existing id ([`Simulation::add_duplicate`]) runs at an address of its own.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use conclave_protocol::{Body, DropReason, PeerId, ReplayGuard};

use crate::sim::invariants::{self, Invariant};
use crate::sim::network::{Delivery, Network, NetworkConfig};
use crate::sim::trace::{Trace, TraceEntry};
use conclave_core::Instant;
use conclave_core::SeededRng;
use conclave_core::admission::{Admission, AdmissionAction, AdmissionConfig, FrameHeader, Verdict};
use conclave_core::driver::{DiskWrite, Driver, Effect, HardRecord, Written};
use conclave_core::election::{
    AmnesiaCause, Command, CommandOutcome, Election, ElectionConfig, ElectionError,
    ElectionMessage, Event, GossipMessage, HardState, HealthReading, Outgoing, PriorityMessage,
    RaftSetting, Role, SettingProblem,
};
use conclave_core::gossip::GossipConfig;
use conclave_core::membership::{
    LinkAddr, Membership, MembershipAction, MembershipConfig, MembershipEvent, PeerStatus,
};
use conclave_core::priority::PriorityConfig;
use conclave_core::raft::{QuorumMode, Raft, RaftConfig, RaftMessage};
use conclave_core::static_leader::StaticConfig;
use conclave_core::storage::DurableState;

mod linearizability;
mod membership_changes;
mod replicated_log;
mod sessions;

pub use replicated_log::LogCounts;
use replicated_log::{LogBook, NodeLog};
use sessions::SessionBook;
pub use sessions::{SessionControl, SessionCounts};

/// The shape of a simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// How many nodes; they are named `n1`, `n2`, ...
    pub nodes: usize,
    /// Election settings shared by every node, in any mode. The id is replaced per node, and
    /// a configured electorate (raft's voters, static's members) by the set of all nodes
    /// ([`ElectionConfig::for_member`]).
    pub election: ElectionConfig,
    /// Membership settings; `None` runs without membership (only possible in `voters` mode,
    /// where the election does not depend on it).
    pub membership: Option<MembershipConfig>,
    /// Network behaviour at the start.
    pub network: NetworkConfig,
    /// Keep a full trace of events (for replays and the determinism test).
    pub record_trace: bool,
    /// What decides which messages reach membership and the election.
    pub admission: AdmissionModel,
    /// The mailbox hop between membership and the election (see the module docs): each event
    /// waits a delay drawn uniformly from zero to this, in FIFO order per node. `None` hands
    /// events over within the step that produced them, as the simulator did before the hop
    /// was modelled (a control: it cannot find the races the hop exposes).
    pub mailbox_delay: Option<Duration>,
    /// With raft's `[log]`, or with [`SimConfig::hard_state_fsync`]: the longest an fsync
    /// takes (each draws a delay up to this); a crash before it completes loses the write (see
    /// `replicated_log.rs`).
    pub disk_delay: Duration,
    /// Whether a hard-state write (any mode's `Persist`) is durable only when its fsync
    /// completes, up to [`SimConfig::disk_delay`] later, the node's actions meanwhile held back
    /// as the ElectionActor holds them. Always so with raft's `[log]`; without it, off by
    /// default: a `Persist` is then durable when carried out.
    pub hard_state_fsync: bool,
    /// With raft's `[log]`: a client writes through a random live node this often; `None`
    /// writes nothing.
    pub client_interval: Option<Duration>,
}

/// What stands between the simulated network and a node's membership and election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionModel {
    /// The node's [`Admission`] state machine, as the transport runs it (the default).
    Full,
    /// A replay window per sender id and nothing else, adopting any newer incarnation: the
    /// transport before admission existed. Kept so that a scenario can run an unguarded
    /// control that shows what admission prevents.
    ReplayWindowOnly,
    /// Nothing: every message reaches membership and the election. For measurements of the
    /// election alone, without the membership traffic that keeps nodes verified.
    Off,
}

impl SimConfig {
    /// `nodes` nodes in `voters` mode with the given election timings, membership on, a healthy
    /// LAN.
    pub fn voters(
        nodes: usize,
        heartbeat: Duration,
        timeout_min: Duration,
        timeout_max: Duration,
    ) -> Self {
        let placeholder = node_id(0);
        Self {
            nodes,
            election: ElectionConfig::Raft(
                RaftConfig::new(placeholder, [placeholder])
                    .with_heartbeat(heartbeat)
                    .with_election_timeout(timeout_min, timeout_max),
            ),
            membership: Some(MembershipConfig {
                heartbeat_interval: heartbeat,
                timeout_multiplier: 3,
                hello_interval: heartbeat * 2,
                announce_interval: heartbeat * 20,
                expected_peers: 0,
            }),
            network: NetworkConfig::default(),
            record_trace: false,
            admission: AdmissionModel::Full,
            mailbox_delay: Some(DEFAULT_MAILBOX_DELAY),
            disk_delay: Duration::from_millis(5),
            hard_state_fsync: false,
            client_interval: None,
        }
    }

    /// Whether the nodes carry raft's replicated log.
    pub fn log_enabled(&self) -> bool {
        matches!(&self.election, ElectionConfig::Raft(raft) if raft.log.is_some())
    }

    /// The same in `connected` mode.
    pub fn connected(
        nodes: usize,
        heartbeat: Duration,
        timeout_min: Duration,
        timeout_max: Duration,
    ) -> Self {
        let mut config = Self::voters(nodes, heartbeat, timeout_min, timeout_max);
        if let Some(raft) = config.raft_mut() {
            raft.quorum = QuorumMode::Connected;
        }
        config
    }

    /// `nodes` nodes in static mode (STA-1) led by node `leader` (0-based), with membership
    /// pinging every `heartbeat`, a healthy LAN.
    pub fn static_leader(nodes: usize, leader: usize, heartbeat: Duration) -> Self {
        let raft_like = Self::voters(nodes, heartbeat, heartbeat * 3, heartbeat * 6);
        let members = (0..nodes).map(node_id).collect();
        Self {
            election: ElectionConfig::Static(StaticConfig {
                id: node_id(0),
                leader: node_id(leader),
                members,
            }),
            ..raft_like
        }
    }

    /// `nodes` nodes in gossip mode (GOS-1..6) with `gossip`'s timings (its id is replaced per
    /// node), membership pinging every `heartbeat`, a healthy LAN. Gossip ignores messages
    /// from peers outside its membership view (GOS-4), so membership is what lets it hear
    /// anyone: its view follows membership's events through the mailbox hop.
    pub fn gossip(nodes: usize, gossip: GossipConfig, heartbeat: Duration) -> Self {
        Self {
            election: ElectionConfig::Gossip(gossip),
            ..Self::voters(nodes, heartbeat, heartbeat * 3, heartbeat * 6)
        }
    }

    /// `nodes` nodes in priority mode (PRI-1..6) with `priority`'s timings (its id is replaced
    /// per node), membership pinging every `heartbeat`, a healthy LAN. Every node reports a
    /// full battery and no radio signal, so scores differ by uptime and the random byte.
    pub fn priority(nodes: usize, priority: PriorityConfig, heartbeat: Duration) -> Self {
        Self {
            election: ElectionConfig::Priority(priority),
            ..Self::voters(nodes, heartbeat, heartbeat * 3, heartbeat * 6)
        }
    }

    /// Gossip's settings, when the cluster runs gossip.
    pub fn gossip_mut(&mut self) -> Option<&mut GossipConfig> {
        match &mut self.election {
            ElectionConfig::Gossip(gossip) => Some(gossip),
            ElectionConfig::Raft(_) | ElectionConfig::Priority(_) | ElectionConfig::Static(_) => {
                None
            }
        }
    }

    /// Priority's settings, when the cluster runs priority.
    pub fn priority_mut(&mut self) -> Option<&mut PriorityConfig> {
        match &mut self.election {
            ElectionConfig::Priority(priority) => Some(priority),
            ElectionConfig::Raft(_) | ElectionConfig::Gossip(_) | ElectionConfig::Static(_) => None,
        }
    }

    /// Raft's settings, when the cluster runs raft.
    pub fn raft_mut(&mut self) -> Option<&mut RaftConfig> {
        match &mut self.election {
            ElectionConfig::Raft(raft) => Some(raft),
            ElectionConfig::Gossip(_) | ElectionConfig::Priority(_) | ElectionConfig::Static(_) => {
                None
            }
        }
    }

    fn is_connected_mode(&self) -> bool {
        matches!(
            &self.election,
            ElectionConfig::Raft(RaftConfig {
                quorum: QuorumMode::Connected,
                ..
            })
        )
    }
}

/// The default of [`SimConfig::mailbox_delay`]: of the order of the network's delays, so that
/// frames sent around the same time can overtake a reachability change, as a busy node's
/// actors let them.
pub const DEFAULT_MAILBOX_DELAY: Duration = Duration::from_millis(2);

/// What membership tells the election, through the mailbox hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    /// `PeerReachability`.
    Reachability { peer: PeerId, connected: bool },
    /// `IdRefused` (MEM-3).
    IdRefused,
}

/// The id of node `index` (0-based): `n1`, `n2`, ...
pub fn node_id(index: usize) -> PeerId {
    PeerId::new(&format!("n{}", index + 1)).expect("n<number> is a valid peer id")
}

/// What kind of election message a node sent, as far as invariants care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentKind {
    /// A pre-vote request or answer: it speaks of a term nobody has entered yet.
    PreVote,
    /// A granted real vote.
    VoteGranted,
    /// Anything else: it speaks of the sender's current term.
    Other,
}

/// Something the simulation saw during one step, for invariants that need more than states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A node handed an election message to the network.
    Sent {
        /// The sender.
        from: PeerId,
        /// The addressee (the candidate, for a vote).
        to: PeerId,
        /// The term the message carries.
        term: u64,
        /// What it is.
        kind: SentKind,
        /// The sender's durable state at that moment.
        durable: HardState,
    },
    /// A node claimed leadership of a term on the wire: a gossip `Declaration` of its epoch, a
    /// priority `MasterAnnounce` of its round. Followers may only ever name a leader with a
    /// term it claimed ([`TokenDeclaredByLeader`](super::invariants::TokenDeclaredByLeader)).
    Declared {
        /// The node's index.
        node: usize,
        /// The epoch or round claimed.
        term: u64,
    },
    /// A node published [`Event::LeaderChanged`]: its fencing token `(term, leader)` (CB-5),
    /// or that it knows no leader.
    LeaderPublished {
        /// The node's index (a restarted node keeps its index).
        node: usize,
        /// The term published.
        term: u64,
        /// The leader published.
        leader: Option<PeerId>,
    },
    /// A node applied a committed log entry (LOG-3).
    Applied {
        /// The node's index.
        node: usize,
        /// The entry's index.
        index: u64,
    },
    /// A node's hard state became durable.
    Persisted {
        /// The node.
        node: PeerId,
        /// What it persisted.
        state: HardState,
    },
    /// A node crashed and lost its whole WAL (WAL-2): what it persisted before is gone, but
    /// the votes it sent before are not forgotten by the invariants.
    WalLost {
        /// The node.
        node: PeerId,
    },
    /// An election message from `peer` was handed to node `node`'s election while a
    /// reachability change about `peer` still waited in its mailbox (see the module docs): the
    /// race the actors can have, found.
    ReachabilityOvertaken {
        /// The receiving node's index.
        node: usize,
        /// The sender.
        peer: PeerId,
    },
    /// A node's admission dropped a message.
    Dropped {
        /// The receiving node's index.
        node: usize,
        /// The sending node's index (a duplicate has an index of its own).
        from: usize,
        /// Why.
        reason: DropReason,
    },
}

/// The simulated wall clock at virtual time zero, in Unix seconds: incarnations start here.
pub const SIM_UNIX_EPOCH: u64 = 1_700_000_000;

/// A failed run: which invariant broke, when, and how to replay it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimFailure {
    /// The seed of the run.
    pub seed: u64,
    /// Virtual time of the failure.
    pub at: Instant,
    /// The invariant (or check) that failed.
    pub invariant: &'static str,
    /// What was wrong.
    pub detail: String,
    /// A command that replays the run, when the caller knows one.
    pub replay: Option<String>,
}

impl std::fmt::Display for SimFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant `{}` violated at {} (seed {}): {}",
            self.invariant, self.at, self.seed, self.detail
        )?;
        if let Some(replay) = &self.replay {
            write!(f, "\nreplay with: {replay}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimFailure {}

/// One simulated node: what survives a crash (`durable`, the incarnation) and what does not.
#[derive(Debug)]
struct SimNode {
    id: PeerId,
    addr: LinkAddr,
    driver: Option<Driver>,
    membership: Option<Membership>,
    /// Membership's events waiting for the election, with the time each is delivered; FIFO.
    mailbox: VecDeque<(Instant, Hop)>,
    /// Told to stop gracefully; still running until its election says it stopped.
    stopping: bool,
    durable: HardState,
    /// The operator's automatic-election switch as the WAL keeps it (RAFT-8).
    durable_auto_election: Option<bool>,
    /// The node lost its WAL and has persisted no plain hard state since (WAL-2): its WAL is
    /// amnesic, so it abstains whenever it starts.
    amnesic: bool,
    /// Its whole data directory was lost and it has not started since.
    wiped: bool,
    restarts: u32,
    /// Grows at every start, never below the simulated Unix seconds (as the WAL does it).
    incarnation: u64,
    next_seq: u64,
    admission: Option<Admission>,
    /// [`AdmissionModel::ReplayWindowOnly`]'s replay windows.
    replay_guard: Option<ReplayGuard>,
    /// The node each peer id is reached at, learned from admitted frames.
    routes: BTreeMap<PeerId, usize>,
    /// Its replicated log's storage and pending fsyncs.
    log: NodeLog,
    /// Removed from the cluster and decommissioned: it never restarts.
    retired: bool,
    /// `cluster.voters` of its own, instead of the simulation's (a control's misconfigured
    /// node).
    seed_voters: Option<Vec<PeerId>>,
}

impl SimNode {
    fn new(id: PeerId, addr: LinkAddr) -> Self {
        Self {
            id,
            addr,
            driver: None,
            membership: None,
            mailbox: VecDeque::new(),
            stopping: false,
            durable: HardState::default(),
            durable_auto_election: None,
            amnesic: false,
            wiped: false,
            restarts: 0,
            incarnation: 0,
            next_seq: 0,
            admission: None,
            replay_guard: None,
            routes: BTreeMap::new(),
            log: NodeLog::default(),
            retired: false,
            seed_voters: None,
        }
    }
}

/// What a node is handed in one step.
#[derive(Debug)]
enum Input {
    Message {
        from: usize,
        header: FrameHeader,
        body: Body,
    },
    Timeout,
    Command(Command),
    /// The head of the node's mailbox between membership and the election.
    Hop,
    /// A graceful stop (CB-2).
    Shutdown,
    /// A reading of the node's health source (PRI-1's battery).
    Health(HealthReading),
}

/// A deterministic simulated cluster. See the module docs.
pub struct Simulation {
    seed: u64,
    now: Instant,
    config: SimConfig,
    rng: SeededRng,
    nodes: Vec<SimNode>,
    network: Network,
    invariants: Vec<Box<dyn Invariant>>,
    observations: Vec<Observation>,
    trace: Trace,
    /// Probability that a node crashes part-way through the actions of one input.
    crash_mid_step: f64,
    /// Whether a node that lost its WAL abstains at its restart, as the node's driver makes
    /// it (WAL-2); off only for the control run that shows what abstention prevents.
    abstain_after_wal_loss: bool,
    /// Whether a node that lost its whole data directory restarts as `cluster.initial_state =
    /// "new"` makes it (WAL-5, issue 24 item 2).
    restart_wiped_as_new_cluster: bool,
    steps: u64,
    raft_messages: u64,
    wal_losses: u64,
    /// Election messages handed over while news of their sender waited in the mailbox.
    overtaken: u64,
    replay_hint: Option<String>,
    /// Messages admission dropped, by receiver, sender and reason.
    drops: BTreeMap<(usize, usize, DropReason), u64>,
    /// Live leaders when a scenario stopped its faults ([`Simulation::note_leaders_at_heal`]).
    leaders_at_heal: usize,
    /// What the replicated log's properties remember.
    log_book: LogBook,
    /// The sessions family's state machines, holders and checks, when it runs.
    session_book: Option<Box<SessionBook>>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// A cluster whose every random choice derives from `seed`, all nodes started at time zero,
    /// with the standard invariants for its quorum mode.
    pub fn new(seed: u64, config: SimConfig) -> Result<Self, ElectionError> {
        config.election.validate()?;
        if config.membership.is_none() && config.is_connected_mode() {
            return Err(ElectionError::InvalidConfig(vec![SettingProblem::new(
                RaftSetting::Quorum,
                "connected quorum mode needs membership in the simulation",
            )]));
        }
        let rng = SeededRng::new(seed);
        let network = Network::new(config.nodes, config.network.clone());
        let invariants = invariants::standard(&config.election);
        let nodes = (0..config.nodes)
            .map(|index| SimNode::new(node_id(index), LinkAddr::new(format!("sim:{}", index + 1))))
            .collect();
        let trace = Trace::new(config.record_trace);
        let mut sim = Self {
            seed,
            now: Instant::ZERO,
            config,
            rng,
            nodes,
            network,
            invariants,
            observations: Vec::new(),
            trace,
            crash_mid_step: 0.0,
            abstain_after_wal_loss: true,
            restart_wiped_as_new_cluster: false,
            steps: 0,
            raft_messages: 0,
            wal_losses: 0,
            overtaken: 0,
            replay_hint: None,
            drops: BTreeMap::new(),
            leaders_at_heal: 0,
            log_book: LogBook::default(),
            session_book: None,
        };
        for index in 0..sim.nodes.len() {
            sim.boot(index);
        }
        Ok(sim)
    }

    /// Replaces the invariants checked after every step.
    pub fn set_invariants(&mut self, invariants: Vec<Box<dyn Invariant>>) {
        self.invariants = invariants;
    }

    /// The command printed with a failure.
    pub fn set_replay_hint(&mut self, hint: impl Into<String>) {
        self.replay_hint = Some(hint.into());
    }

    // -----------------------------------------------------------------------------------------
    // running

    /// Carries out the next pending thing. `Ok(false)` when nothing is pending at all.
    pub fn step(&mut self) -> Result<bool, SimFailure> {
        let next_message = self.network.next_arrival();
        let next_timer = self.next_timer();
        let (at, timer_node) = match (next_message, next_timer) {
            (None, None) => (None, None),
            (Some(m), Some((t, node))) if t < m => (Some(t), Some(node)),
            (Some(m), _) => (Some(m), None),
            (None, Some((t, node))) => (Some(t), Some(node)),
        };
        // A log event (an fsync completing, a client write) due before anything else.
        if let Some((due, node)) = self.next_log_event() {
            if at.is_none_or(|at| due < at) && self.next_hop().is_none_or(|(hop, _)| due < hop) {
                self.now = self.now.max(due);
                self.log_event(node);
                self.steps += 1;
                self.check_invariants()?;
                return Ok(true);
            }
        }
        // A mailbox hop due no later than anything else goes first: it was queued before.
        if let Some((due, node)) = self.next_hop() {
            if at.is_none_or(|at| due <= at) {
                self.now = self.now.max(due);
                self.input(node, Input::Hop);
                self.steps += 1;
                self.check_invariants()?;
                return Ok(true);
            }
        }
        let Some(at) = at else {
            return Ok(false);
        };
        self.now = self.now.max(at);
        match timer_node {
            Some(node) => {
                self.input(node, Input::Timeout);
            }
            None => {
                if let Some(delivery) = self.network.pop_due(self.now) {
                    let Delivery {
                        from,
                        to,
                        header,
                        body,
                    } = delivery;
                    self.input(to, Input::Message { from, header, body });
                }
            }
        }
        self.steps += 1;
        self.check_invariants()?;
        Ok(true)
    }

    /// Runs every step due up to `deadline`, then sets the clock to it.
    pub fn run_until(&mut self, deadline: Instant) -> Result<(), SimFailure> {
        while self.next_event().is_some_and(|at| at <= deadline) {
            self.step()?;
        }
        self.now = self.now.max(deadline);
        Ok(())
    }

    /// Runs for `duration` of virtual time.
    pub fn run_for(&mut self, duration: Duration) -> Result<(), SimFailure> {
        self.run_until(self.now + duration)
    }

    /// Runs until `condition` holds (checked before the first step and after each one) or
    /// `deadline` passes. Returns when it held, `None` if it never did.
    pub fn run_until_condition(
        &mut self,
        deadline: Instant,
        mut condition: impl FnMut(&Simulation) -> bool,
    ) -> Result<Option<Instant>, SimFailure> {
        if condition(self) {
            return Ok(Some(self.now));
        }
        while self.next_event().is_some_and(|at| at <= deadline) {
            self.step()?;
            if condition(self) {
                return Ok(Some(self.now));
            }
        }
        self.now = self.now.max(deadline);
        Ok(None)
    }

    fn next_event(&self) -> Option<Instant> {
        [
            self.network.next_arrival(),
            self.next_timer().map(|(at, _)| at),
            self.next_hop().map(|(at, _)| at),
            self.next_log_event().map(|(at, _)| at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The earliest mailbox delivery of any live node; ties go to the lowest index.
    fn next_hop(&self) -> Option<(Instant, usize)> {
        let mut best: Option<(Instant, usize)> = None;
        for (index, node) in self.nodes.iter().enumerate() {
            if let Some(&(due, _)) = node.mailbox.front() {
                if best.is_none_or(|(at, _)| due < at) {
                    best = Some((due, index));
                }
            }
        }
        best
    }

    /// The earliest timer of any live node; ties go to the lowest index.
    fn next_timer(&self) -> Option<(Instant, usize)> {
        let mut best: Option<(Instant, usize)> = None;
        for (index, node) in self.nodes.iter().enumerate() {
            let raft = node
                .driver
                .as_ref()
                .and_then(|driver| driver.election().poll_timeout());
            let membership = node.membership.as_ref().and_then(Membership::poll_timeout);
            let due = match (raft, membership) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(due) = due {
                if best.is_none_or(|(at, _)| due < at) {
                    best = Some((due, index));
                }
            }
        }
        best
    }

    fn check_invariants(&mut self) -> Result<(), SimFailure> {
        if let Some(detail) = self.take_log_violation() {
            return Err(self.failure("replicated log (Figure 3)", detail));
        }
        if let Some(detail) = self.take_session_violation() {
            return Err(self.failure("sessions (SESS-0..2)", detail));
        }
        let observations = std::mem::take(&mut self.observations);
        let mut invariants = std::mem::take(&mut self.invariants);
        let mut result = Ok(());
        for invariant in &mut invariants {
            if let Err(detail) = invariant.check(self, &observations) {
                result = Err(self.failure(invariant.name(), detail));
                break;
            }
        }
        self.invariants = invariants;
        result
    }

    /// A failure report for this run.
    pub fn failure(&self, invariant: &'static str, detail: String) -> SimFailure {
        SimFailure {
            seed: self.seed,
            at: self.now,
            invariant,
            detail,
            replay: self.replay_hint.clone(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // node inputs

    fn boot(&mut self, index: usize) {
        let id = self.nodes[index].id;
        let members: Vec<PeerId> = self.nodes[index]
            .seed_voters
            .clone()
            .unwrap_or_else(|| (0..self.config.nodes).map(node_id).collect());
        let mut election_config = self.config.election.for_member(id, &members);
        let node_rng = self.rng.fork();
        let durable = self.nodes[index].durable;
        if let Some(enabled) = self.nodes[index].durable_auto_election {
            election_config.set_auto_election(enabled);
        }
        let restored = DurableState {
            hard: durable,
            ..self.nodes[index].log.storage.durable().clone()
        };
        // `new` validated the shared settings; only the id differs per node.
        let mut election = Election::restored(election_config, &restored, node_rng, self.now)
            .expect("settings validated when the simulation was created");
        if self.nodes[index].amnesic && self.abstain_after_wal_loss {
            // A node whose whole data directory was lost, restarted with
            // `cluster.initial_state = "new"` still set, asks the voters first; a later
            // restart finds its WAL and is a node that lost its hard state.
            let cause = if self.nodes[index].wiped && self.restart_wiped_as_new_cluster {
                AmnesiaCause::NewCluster
            } else {
                AmnesiaCause::Lost
            };
            election.begin_abstention(self.now, cause);
        }
        self.nodes[index].wiped = false;
        let membership = self
            .config
            .membership
            .map(|config| Membership::new(id, config, self.now));
        let restarts = self.nodes[index].restarts;
        let incarnation = self.nodes[index]
            .incarnation
            .saturating_add(1)
            .max(self.unix_secs());
        let mut admission_config = AdmissionConfig::new(id, incarnation);
        if let ElectionConfig::Raft(RaftConfig {
            quorum: QuorumMode::Voters(voters),
            ..
        }) = &self.config.election
        {
            admission_config.reserved = voters.iter().copied().collect();
        }
        if let Some(membership) = &self.config.membership {
            admission_config.owner_timeout = AdmissionConfig::owner_timeout_for(membership);
        }
        // Its own stream, derived without drawing from the simulation's RNG: nonces only have
        // to differ between starts.
        let admission_rng = SeededRng::new(
            self.seed ^ ((index as u64) << 40) ^ (u64::from(restarts) << 20) ^ 0xad31_5510,
        );
        self.restore_machine_at_boot(index);
        self.session_boot(index);
        let node = &mut self.nodes[index];
        node.driver = Some(Driver::new(election));
        node.membership = membership;
        node.mailbox.clear();
        node.incarnation = incarnation;
        node.next_seq = 0;
        node.admission = (self.config.admission == AdmissionModel::Full)
            .then(|| Admission::new(admission_config, admission_rng));
        node.replay_guard =
            (self.config.admission == AdmissionModel::ReplayWindowOnly).then(ReplayGuard::default);
        node.routes.clear();
        self.trace.record(self.now, id, || "boot".to_owned(), 1);
        self.pump(index, None);
    }

    fn input(
        &mut self,
        index: usize,
        input: Input,
    ) -> Option<Result<CommandOutcome, ElectionError>> {
        let now = self.now;
        let unix_secs = self.unix_secs();
        let origin = match &input {
            Input::Message { from, .. } => Some(self.nodes[*from].addr.clone()),
            _ => None,
        };
        let node = &mut self.nodes[index];
        let (Some(election), membership) = (
            node.driver.as_mut().map(Driver::election_mut),
            node.membership.as_mut(),
        ) else {
            return None;
        };
        let mut outcome = None;
        match input {
            Input::Message {
                from: sender,
                header,
                body,
            } => {
                let origin = origin?;
                let verdict = match (node.admission.as_mut(), node.replay_guard.as_mut()) {
                    (Some(admission), _) => {
                        admission.handle_frame(now, unix_secs, &origin, &header, &body)
                    }
                    (None, Some(guard)) => legacy_verdict(guard, node.id, &header),
                    (None, None) => Verdict::Accept,
                };
                let from = header.from;
                match verdict {
                    Verdict::Accept => {
                        node.routes.insert(from, sender);
                        if let Some(membership) = membership {
                            membership.handle_frame(now, from, &origin, &body);
                        }
                        if let Ok(message) = ElectionMessage::try_from(body) {
                            let waiting = node.mailbox.iter().any(|(_, hop)| {
                                matches!(hop, Hop::Reachability { peer, .. } if *peer == from)
                            });
                            if waiting {
                                self.overtaken += 1;
                                self.observations.push(Observation::ReachabilityOvertaken {
                                    node: index,
                                    peer: from,
                                });
                            }
                            if election.handle_message(now, from, message).is_err() {
                                *self
                                    .drops
                                    .entry((index, sender, DropReason::OtherMode))
                                    .or_default() += 1;
                            }
                        }
                    }
                    Verdict::Contested => {
                        if let Some(membership) = membership {
                            membership.handle_contested_hello(now, from, &origin);
                        }
                    }
                    Verdict::Consumed | Verdict::Ignore => {}
                    Verdict::Drop(reason) => {
                        *self.drops.entry((index, sender, reason)).or_default() += 1;
                        self.observations.push(Observation::Dropped {
                            node: index,
                            from: sender,
                            reason,
                        });
                    }
                }
            }
            Input::Timeout => {
                if let Some(membership) = membership {
                    if membership.poll_timeout().is_some_and(|at| at <= now) {
                        membership.handle_timeout(now);
                    }
                }
                if election.poll_timeout().is_some_and(|at| at <= now) {
                    election.handle_timeout(now);
                }
            }
            Input::Command(command) => outcome = Some(election.handle_command(now, command)),
            Input::Shutdown => election.handle_shutdown(now),
            Input::Health(reading) => election.handle_health(now, reading),
            Input::Hop => {
                if let Some((_, hop)) = node.mailbox.pop_front() {
                    hand_over(election, now, hop);
                }
            }
        }
        let crash_after = if self.crash_mid_step > 0.0 && self.rng.chance(self.crash_mid_step) {
            Some(self.rng.below(8) as usize)
        } else {
            None
        };
        self.pump(index, crash_after);
        outcome
    }

    /// Carries out a node's actions until it has none left. With `crash_after`, the node
    /// crashes after that many election outputs (messages, events, hard-state writes), losing
    /// the rest.
    fn pump(&mut self, index: usize, mut crash_after: Option<usize>) {
        loop {
            let mut progressed = false;
            while let Some(action) = self.nodes[index]
                .admission
                .as_mut()
                .and_then(Admission::poll_action)
            {
                progressed = true;
                self.carry_out_admission(index, action);
            }
            while let Some(action) = self.nodes[index]
                .membership
                .as_mut()
                .and_then(Membership::poll_action)
            {
                progressed = true;
                self.carry_out_membership(index, action);
            }
            while let Some(effect) = self.nodes[index]
                .driver
                .as_mut()
                .and_then(Driver::poll_effect)
            {
                progressed = true;
                if matches!(
                    effect,
                    Effect::Send(_) | Effect::Publish(_) | Effect::Write(DiskWrite::Hard { .. })
                ) {
                    if let Some(remaining) = crash_after.as_mut() {
                        if *remaining == 0 {
                            self.crash(index);
                            return;
                        }
                        *remaining -= 1;
                    }
                }
                self.carry_out(index, effect);
                if self.nodes[index].driver.is_none() {
                    return;
                }
            }
            if self.take_due_snapshot(index) {
                progressed = true;
            }
            if !progressed {
                self.note_log_caught_up(index);
                return;
            }
        }
    }

    /// Carries out one of node `index`'s driver effects, as the ElectionActor does: messages
    /// go on the network, events are observed, writes go to the node's storage — durable at
    /// once, or when their fsync completes, a disk delay later — and the log's effects reach
    /// the node's machine.
    fn carry_out(&mut self, index: usize, effect: Effect) {
        match effect {
            Effect::Send(message) => self.send_out(index, message),
            Effect::Publish(event) => self.publish(index, event),
            Effect::Write(write) => self.write(index, write),
            Effect::Restore(snapshot) => self.install(index, &snapshot),
            Effect::Apply(entries) => self.apply(index, entries),
            Effect::Read { id, outcome } => self.answer_read(index, id, outcome.is_ok()),
            Effect::Stopped => {
                // The node's part is over: its process ends, as `conclave run` does once the
                // election stopped (the goodbye that follows is not modelled: peers time it
                // out).
                let id = self.nodes[index].id;
                self.trace.record(self.now, id, || "stopped".to_owned(), 6);
                self.crash(index);
            }
        }
    }

    fn send_out(&mut self, index: usize, outgoing: Outgoing) {
        match outgoing {
            Outgoing::Send { to, message } => {
                self.observe_sent(index, to, &message);
                if let ElectionMessage::Raft(raft_message) = &message {
                    self.note_snapshot_message(raft_message);
                }
                self.raft_messages += 1;
                if let Some(target) = self.route(index, to) {
                    self.transmit(index, target, Some(to), message.into());
                }
            }
            Outgoing::Multicast { to, message } => {
                // One frame heard by every other node, as the radio's broadcast is: the peers
                // it was not meant for take it too, and must come to no harm (issue 27, item 1).
                for peer in to {
                    self.observe_sent(index, peer, &message);
                }
                if let ElectionMessage::Raft(raft_message) = &message {
                    self.note_snapshot_message(raft_message);
                }
                self.raft_messages += 1;
                self.broadcast(index, message.into());
            }
            Outgoing::Broadcast { message } => {
                // One observation per peer it is meant for: every other node, as `broadcast`
                // hands it to the network for every other node.
                let peers: Vec<PeerId> = (0..self.nodes.len())
                    .filter(|&other| other != index)
                    .map(|other| self.nodes[other].id)
                    .collect();
                for peer in peers {
                    self.observe_sent(index, peer, &message);
                }
                self.raft_messages += 1;
                self.broadcast(index, message.into());
            }
        }
    }

    fn publish(&mut self, index: usize, event: Event) {
        let id = self.nodes[index].id;
        if let Event::LeaderChanged { term, leader, .. } = &event {
            self.observations.push(Observation::LeaderPublished {
                node: index,
                term: *term,
                leader: *leader,
            });
            if *leader == Some(id) && self.has_log() {
                self.check_new_leader_log(index);
            }
        }
        let hash = event_hash(&event);
        self.trace
            .record(self.now, id, || format!("{event:?}"), hash);
    }

    /// Tells node `index`'s driver that a write is durable.
    pub(super) fn report_written(&mut self, index: usize, written: Written) {
        let now = self.now;
        if let Some(driver) = self.nodes[index].driver.as_mut() {
            driver.handle_written(now, written);
        }
    }

    /// Whether a hard-state write waits for a simulated fsync.
    pub(super) fn hard_state_takes_time(&self) -> bool {
        (self.has_log() || self.config.hard_state_fsync) && !self.config.disk_delay.is_zero()
    }

    /// Hard-state records of node `index` are on disk.
    pub(super) fn make_durable(&mut self, index: usize, records: Vec<HardRecord>) {
        let id = self.nodes[index].id;
        for record in records {
            match record {
                HardRecord::HardState(state) => {
                    self.nodes[index].durable = state;
                    self.nodes[index].amnesic = false;
                    self.observations
                        .push(Observation::Persisted { node: id, state });
                }
                HardRecord::Amnesic(state) => {
                    // The WAL keeps its amnesia marker after this state.
                    self.nodes[index].durable = state;
                    self.observations
                        .push(Observation::Persisted { node: id, state });
                }
                HardRecord::Genesis => {
                    // A durable "never voted": as good as a hard state of term 0.
                    self.nodes[index].durable = HardState::default();
                    self.nodes[index].amnesic = false;
                }
                HardRecord::AutoElection(enabled) => {
                    self.nodes[index].durable_auto_election = Some(enabled);
                }
                // The leadership history is not modelled.
                HardRecord::LeaderChange { .. } => {}
            }
        }
    }

    /// Records an election message node `index` hands to the network for `to`, with the term
    /// it carries (raft's term, the gossip epoch, the priority round) and the sender's durable
    /// state at that moment; a leadership claim is recorded once more as
    /// [`Observation::Declared`].
    fn observe_sent(&mut self, index: usize, to: PeerId, message: &ElectionMessage) {
        let (term, kind, declares) = match message {
            ElectionMessage::Raft(raft_message) => {
                let kind = match raft_message {
                    RaftMessage::RequestVote(request) if request.pre_vote => SentKind::PreVote,
                    RaftMessage::Vote(vote) if vote.pre_vote => SentKind::PreVote,
                    RaftMessage::Vote(vote) if vote.granted => SentKind::VoteGranted,
                    _ => SentKind::Other,
                };
                (raft_message.term(), kind, false)
            }
            ElectionMessage::Gossip(GossipMessage::Proposal(proposal)) => {
                (proposal.epoch, SentKind::Other, false)
            }
            ElectionMessage::Gossip(GossipMessage::Declaration(declaration)) => {
                (declaration.epoch, SentKind::Other, true)
            }
            ElectionMessage::Priority(priority) => match priority {
                PriorityMessage::Discover(m) => (m.round, SentKind::Other, false),
                PriorityMessage::DiscoverAck(m) => (m.round, SentKind::Other, false),
                PriorityMessage::Candidate(m) => (m.round, SentKind::Other, false),
                PriorityMessage::Vote(m) => (m.round, SentKind::Other, false),
                PriorityMessage::MasterAnnounce(m) => (m.round, SentKind::Other, true),
                PriorityMessage::MasterResign(m) => (m.round, SentKind::Other, false),
            },
        };
        let node = &self.nodes[index];
        self.observations.push(Observation::Sent {
            from: node.id,
            to,
            term,
            kind,
            durable: node.durable,
        });
        if declares {
            self.observations
                .push(Observation::Declared { node: index, term });
        }
    }

    /// Hands one message to the network, which decides whether and when it arrives. It is
    /// stamped as the transport stamps an envelope: the sender's id and incarnation, its next
    /// sequence number, the addressee (`None`: broadcast).
    fn transmit(&mut self, from: usize, to: usize, addressee: Option<PeerId>, body: Body) {
        let sender = &mut self.nodes[from];
        sender.next_seq += 1;
        let header = FrameHeader {
            from: sender.id,
            to: addressee,
            incarnation: sender.incarnation,
            seq: sender.next_seq,
        };
        self.network.send(
            self.now,
            &mut self.rng,
            Delivery {
                from,
                to,
                header,
                body,
            },
        );
    }

    /// Hands one message to the network for every other node: one envelope, one sequence
    /// number, heard by everyone, as over a radio.
    fn broadcast(&mut self, from: usize, body: Body) {
        let sender = &mut self.nodes[from];
        sender.next_seq += 1;
        let header = FrameHeader {
            from: sender.id,
            to: None,
            incarnation: sender.incarnation,
            seq: sender.next_seq,
        };
        for target in (0..self.nodes.len()).filter(|&target| target != from) {
            self.network.send(
                self.now,
                &mut self.rng,
                Delivery {
                    from,
                    to: target,
                    header,
                    body: body.clone(),
                },
            );
        }
    }

    /// Where node `from` sends a message for `to`: the node its admitted frames came from, or
    /// (no route yet) the first node with that id, as a configured address would.
    fn route(&self, from: usize, to: PeerId) -> Option<usize> {
        self.nodes[from]
            .routes
            .get(&to)
            .copied()
            .or_else(|| self.index_of(to))
    }

    /// The node at `addr`.
    fn node_at(&self, addr: &LinkAddr) -> Option<usize> {
        self.nodes.iter().position(|node| node.addr == *addr)
    }

    fn carry_out_admission(&mut self, index: usize, action: AdmissionAction) {
        match action {
            AdmissionAction::Reply { to, origin, body } => {
                if let Some(target) = self.node_at(&origin) {
                    self.transmit(index, target, Some(to), body);
                }
            }
            AdmissionAction::Verified { peer, origin } => {
                let now = self.now;
                if let Some(target) = self.node_at(&origin) {
                    self.nodes[index].routes.insert(peer, target);
                }
                if let Some(membership) = self.nodes[index].membership.as_mut() {
                    membership.handle_verified(now, peer, &origin);
                }
            }
            AdmissionAction::Forgotten { peer } => {
                let now = self.now;
                self.nodes[index].routes.remove(&peer);
                if let Some(membership) = self.nodes[index].membership.as_mut() {
                    membership.handle_forgotten(now, peer);
                }
            }
            AdmissionAction::Notice(notice) => {
                let id = self.nodes[index].id;
                self.trace.record(self.now, id, || format!("{notice:?}"), 8);
            }
        }
    }

    /// The simulated wall clock, in Unix seconds.
    fn unix_secs(&self) -> u64 {
        SIM_UNIX_EPOCH + self.now.as_micros() / 1_000_000
    }

    fn carry_out_membership(&mut self, index: usize, action: MembershipAction) {
        let now = self.now;
        match action {
            MembershipAction::Send { to, body } => {
                if let Some(target) = self.route(index, to) {
                    self.transmit(index, target, Some(to), body);
                }
            }
            MembershipAction::Reply { to, origin, body } => {
                if let Some(target) = self.node_at(&origin) {
                    self.transmit(index, target, Some(to), body);
                }
            }
            MembershipAction::Broadcast { body } => self.broadcast(index, body),
            MembershipAction::Publish(event) => {
                let id = self.nodes[index].id;
                self.trace.record(now, id, || format!("{event:?}"), 7);
                let hop = match event {
                    MembershipEvent::Joined { peer } => Hop::Reachability {
                        peer,
                        connected: true,
                    },
                    MembershipEvent::Left { peer, .. } => Hop::Reachability {
                        peer,
                        connected: false,
                    },
                    MembershipEvent::StatusChanged { peer, new, .. } => Hop::Reachability {
                        peer,
                        connected: new == PeerStatus::Connected,
                    },
                    MembershipEvent::IdRefused { .. } => Hop::IdRefused,
                };
                match self.config.mailbox_delay {
                    Some(max) => {
                        // FIFO: never before the event queued ahead of it.
                        let drawn = now + self.rng.duration_between(Duration::ZERO, max);
                        let node = &mut self.nodes[index];
                        let due = node
                            .mailbox
                            .back()
                            .map_or(drawn, |&(last, _)| last.max(drawn));
                        node.mailbox.push_back((due, hop));
                    }
                    None => {
                        if let Some(election) =
                            self.nodes[index].driver.as_mut().map(Driver::election_mut)
                        {
                            hand_over(election, now, hop);
                        }
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // faults and commands

    /// Stops node `index` gracefully (CB-2), as `conclave run` does on SIGTERM: its election is
    /// told (`handle_shutdown`) and the node keeps running — a raft leader handing over — until
    /// the election answers that it stopped; then it is down, as after a crash. Called again
    /// while the node is still stopping, it cuts the hand-over short, as the ElectionActor's
    /// backstop does.
    pub fn stop_gracefully(&mut self, index: usize) -> Result<(), SimFailure> {
        if self.nodes[index].driver.is_none() {
            return Ok(());
        }
        self.nodes[index].stopping = true;
        let id = self.nodes[index].id;
        self.trace
            .record(self.now, id, || "stopping".to_owned(), 10);
        self.input(index, Input::Shutdown);
        self.check_invariants()
    }

    /// Stops node `index` at once; only its durable state survives.
    pub fn crash(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        if node.driver.is_none() {
            return;
        }
        node.driver = None;
        node.membership = None;
        // What waited in its mailboxes dies with the process.
        node.mailbox.clear();
        node.stopping = false;
        node.admission = None;
        node.routes.clear();
        // A write not yet durable is lost, and what waited for it never left (with the
        // driver).
        node.log.crash();
        let id = node.id;
        self.trace.record(self.now, id, || "crash".to_owned(), 2);
        self.session_crash(index);
    }

    /// Stops node `index` at once and loses its whole WAL, as a wiped or deleted data directory
    /// would (WAL-2): it restarts with no hard state, and abstains unless the control switch
    /// [`Simulation::set_abstain_after_wal_loss`] is off. Messages on their way to it are lost
    /// with it: a node is down longer than any message is delayed, so nothing it receives after
    /// its restart was sent before it went down.
    pub fn crash_losing_wal(&mut self, index: usize) {
        self.crash(index);
        let node = &mut self.nodes[index];
        node.durable = HardState::default();
        node.durable_auto_election = None;
        node.amnesic = true;
        node.wiped = true;
        node.log.wipe();
        node.log.lost = self.config.log_enabled();
        let id = node.id;
        self.wal_losses += 1;
        self.network.drop_in_flight_to(index);
        self.observations.push(Observation::WalLost { node: id });
        self.trace.record(self.now, id, || "WAL lost".to_owned(), 5);
    }

    /// Whether node `index` is without its memory of votes: it lost its WAL (or its WAL is
    /// still amnesic) and it is down or abstaining. Once its abstention is over it knows a term
    /// at least as high as any it voted in, even while its WAL stays amnesic. With a log, it
    /// also lost its entries, and stays without them until its log has caught up with a
    /// leader's.
    pub fn is_amnesic(&self, index: usize) -> bool {
        let node = &self.nodes[index];
        let wal_amnesic = if self.config.log_enabled() {
            // With a log the WAL stays amnesic until the log caught up (see `Raft`).
            node.amnesic
        } else {
            node.amnesic
                && node
                    .driver
                    .as_ref()
                    .is_none_or(|driver| driver.election().is_abstaining())
        };
        wal_amnesic || node.log.lost
    }

    /// Whether a node that lost its WAL abstains at its restart (on by default, as in a real
    /// node); the control run switches it off to show the double vote it prevents.
    pub fn set_abstain_after_wal_loss(&mut self, abstain: bool) {
        self.abstain_after_wal_loss = abstain;
    }

    /// Whether a node that lost its whole data directory restarts with
    /// `cluster.initial_state = "new"` still set (asking the voters whether the cluster exists
    /// before it takes part) instead of as a node that lost its WAL.
    pub fn set_restart_wiped_as_new_cluster(&mut self, on: bool) {
        self.restart_wiped_as_new_cluster = on;
    }

    /// Starts a crashed node again from its durable state.
    pub fn restart(&mut self, index: usize) {
        if self.nodes[index].driver.is_some() || self.nodes[index].retired {
            return;
        }
        self.nodes[index].restarts += 1;
        self.boot(index);
    }

    /// Starts a second node with node `of`'s id at an address of its own — the copied
    /// configuration of MEM-3 — with a fresh durable state; returns its index. It stays in the
    /// simulation like any node (crash it to stop it).
    pub fn add_duplicate(&mut self, of: usize) -> usize {
        let index = self.nodes.len();
        let id = self.nodes[of].id;
        self.nodes.push(SimNode::new(
            id,
            LinkAddr::new(format!("sim:{}", index + 1)),
        ));
        self.network.add_node();
        self.trace.record(
            self.now,
            id,
            || format!("duplicate of node {of} started"),
            9,
        );
        self.boot(index);
        index
    }

    /// Splits the cluster: `groups[i]` is node `i`'s side.
    pub fn partition(&mut self, groups: Vec<u32>) {
        self.trace
            .record(self.now, node_id(0), || format!("partition {groups:?}"), 3);
        self.network.partition(groups);
    }

    /// Cuts node `index` off from everyone.
    pub fn isolate(&mut self, index: usize) {
        let groups = (0..self.nodes.len())
            .map(|i| if i == index { 1 } else { 0 })
            .collect();
        self.partition(groups);
    }

    /// Drops everything from `from` to `to`.
    pub fn cut(&mut self, from: usize, to: usize) {
        self.network.cut(from, to);
    }

    /// Heals all partitions and cut links.
    pub fn heal(&mut self) {
        self.trace
            .record(self.now, node_id(0), || "heal".to_owned(), 4);
        self.network.heal();
    }

    /// Sets the loss probability.
    pub fn set_loss(&mut self, loss: f64) {
        self.network.config.loss = loss;
    }

    /// Sets the duplication probability.
    pub fn set_duplicate(&mut self, duplicate: f64) {
        self.network.config.duplicate = duplicate;
    }

    /// Sets the one-way delay range.
    pub fn set_delay(&mut self, min: Duration, max: Duration) {
        self.network.config.delay_min = min;
        self.network.config.delay_max = max;
    }

    /// Sets the probability of a crash part-way through one input's actions.
    pub fn set_crash_mid_step(&mut self, probability: f64) {
        self.crash_mid_step = probability;
    }

    /// Gives node `index` an operator command and carries out what follows. The outer error
    /// is a broken invariant, the inner one the command's own answer; a crashed node answers
    /// `None`.
    pub fn command(
        &mut self,
        index: usize,
        command: Command,
    ) -> Result<Option<Result<CommandOutcome, ElectionError>>, SimFailure> {
        let outcome = self.input(index, Input::Command(command));
        self.check_invariants()?;
        Ok(outcome)
    }

    /// Node `index`'s health source reads `battery_percent` (PRI-1, PRI-5: a priority master
    /// at or below its threshold resigns), as the shell hands over each reading.
    pub fn set_battery(&mut self, index: usize, battery_percent: u8) -> Result<(), SimFailure> {
        self.input(
            index,
            Input::Health(HealthReading {
                battery_percent,
                priority: None,
            }),
        );
        self.check_invariants()
    }

    /// The simulation's own RNG, for scenario scripts that need choices from the same seed.
    pub fn rng(&mut self) -> &mut SeededRng {
        &mut self.rng
    }

    // -----------------------------------------------------------------------------------------
    // observation

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Number of nodes, live or crashed.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `index`'s id.
    pub fn id(&self, index: usize) -> PeerId {
        self.nodes[index].id
    }

    /// The index of a node id.
    pub fn index_of(&self, id: PeerId) -> Option<usize> {
        self.nodes.iter().position(|node| node.id == id)
    }

    /// Whether node `index` was told to stop gracefully and still runs (handing over).
    pub fn is_stopping(&self, index: usize) -> bool {
        self.nodes[index].stopping
    }

    /// Whether node `index` is running.
    pub fn is_alive(&self, index: usize) -> bool {
        self.nodes[index].driver.is_some()
    }

    /// Node `index`'s election, while it runs.
    pub fn election(&self, index: usize) -> Option<&Election> {
        self.nodes[index].driver.as_ref().map(Driver::election)
    }

    /// Node `index`'s raft state machine, while it runs raft.
    pub fn raft(&self, index: usize) -> Option<&Raft> {
        match self.nodes[index].driver.as_ref()?.election() {
            Election::Raft(raft) => Some(raft),
            Election::Gossip(_) | Election::Priority(_) | Election::Static(_) => None,
        }
    }

    /// Node `index`'s membership state machine, while it runs.
    pub fn membership(&self, index: usize) -> Option<&Membership> {
        self.nodes[index].membership.as_ref()
    }

    /// What node `index` has persisted.
    pub fn durable(&self, index: usize) -> HardState {
        self.nodes[index].durable
    }

    /// How many messages from node `from` node `node`'s admission dropped for `reason`.
    pub fn dropped(&self, node: usize, from: usize, reason: DropReason) -> u64 {
        self.drops.get(&(node, from, reason)).copied().unwrap_or(0)
    }

    /// Node `index`'s admission state machine, while it runs.
    pub fn admission(&self, index: usize) -> Option<&Admission> {
        self.nodes[index].admission.as_ref()
    }

    /// Node `index`'s current incarnation.
    pub fn incarnation(&self, index: usize) -> u64 {
        self.nodes[index].incarnation
    }

    /// How often node `index` was restarted.
    pub fn restarts(&self, index: usize) -> u32 {
        self.nodes[index].restarts
    }

    /// Indices of the live nodes.
    pub fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.is_alive(i))
            .collect()
    }

    /// Indices of live nodes that are leaders.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.election(i).is_some_and(|e| e.role() == Role::Leader))
            .collect()
    }

    /// The leader every node of `group` names, if they all name the same live node that leads in
    /// the same term, and no other node of the group leads.
    pub fn agreed_leader(&self, group: &[usize]) -> Option<usize> {
        let first = *group.first()?;
        let election = self.election(first)?;
        let (leader, term) = (election.leader()?, election.term());
        let leader_index = self.index_of(leader)?;
        if !group.contains(&leader_index) {
            return None;
        }
        let leader_election = self.election(leader_index)?;
        if leader_election.role() != Role::Leader || leader_election.term() != term {
            return None;
        }
        let all_agree = group.iter().all(|&i| {
            self.election(i).is_some_and(|r| {
                r.leader() == Some(leader)
                    && r.term() == term
                    && (i == leader_index || r.role() != Role::Leader)
            })
        });
        all_agree.then_some(leader_index)
    }

    /// The partition group of node `index`.
    pub fn group_of(&self, index: usize) -> u32 {
        self.network.group_of(index)
    }

    /// Records how many live nodes lead right now, for a scenario about to heal its faults.
    pub fn note_leaders_at_heal(&mut self) {
        self.leaders_at_heal = self.leaders().len();
    }

    /// Live leaders when [`Simulation::note_leaders_at_heal`] was last called.
    pub fn leaders_at_heal(&self) -> usize {
        self.leaders_at_heal
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Crashes that lost a node's whole WAL so far.
    pub fn wal_losses(&self) -> u64 {
        self.wal_losses
    }

    /// Election messages handed to an election while a reachability change about their
    /// sender still waited in its mailbox ([`Observation::ReachabilityOvertaken`]).
    pub fn reachability_overtaken(&self) -> u64 {
        self.overtaken
    }

    /// Election messages sent so far (delivered or not).
    pub fn raft_messages_sent(&self) -> u64 {
        self.raft_messages
    }

    /// All messages handed to the network so far.
    pub fn messages_sent(&self) -> u64 {
        self.network.sent
    }

    /// The recorded trace, when recording is on.
    pub fn trace(&self) -> Option<&[TraceEntry]> {
        self.trace.entries()
    }

    /// A digest of everything published during the run, recorded or not.
    pub fn digest(&self) -> u64 {
        self.trace.digest()
    }

    /// The election settings every node runs (with its own id).
    pub fn election_mode(&self) -> &ElectionConfig {
        &self.config.election
    }

    /// Whether the cluster runs in `connected` quorum mode.
    pub fn is_connected_mode(&self) -> bool {
        self.config.is_connected_mode()
    }
}

/// Delivers one of membership's events to the election, as the ElectionActor's handlers of
/// `PeerReachability` and `IdRefused` do.
fn hand_over(election: &mut Election, now: Instant, hop: Hop) {
    match hop {
        Hop::Reachability { peer, connected } => election.handle_peer_status(now, peer, connected),
        Hop::IdRefused => election.handle_id_refused(now),
    }
}

/// What the transport decided before admission existed: its own echo ignored, a frame for
/// another node dropped, then one replay window per sender id.
fn legacy_verdict(guard: &mut ReplayGuard, local: PeerId, header: &FrameHeader) -> Verdict {
    if header.from == local {
        return Verdict::Ignore;
    }
    if header.to.is_some_and(|to| to != local) {
        return Verdict::Drop(DropReason::Misaddressed);
    }
    match guard.admit(header.from, header.incarnation, header.seq) {
        Ok(()) => Verdict::Accept,
        Err(_) => Verdict::Drop(DropReason::Replay),
    }
}

/// A cheap fingerprint of a label.
fn label_hash(label: &str) -> u64 {
    label
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
}

/// A cheap fingerprint of an event for the run digest.
fn event_hash(event: &Event) -> u64 {
    match event {
        Event::LeaderChanged {
            term, leader, role, ..
        } => {
            let leader = leader.map_or(0, |l| label_hash(l.as_str()));
            10 ^ term.wrapping_mul(1_000_003) ^ leader ^ (*role as u64) << 60
        }
        Event::RoleChanged { term, role, phase } => {
            20 ^ term.wrapping_mul(1_000_033) ^ (*role as u64) << 58 ^ label_hash(phase)
        }
        Event::ElectionStarted { term, phase } => 30 ^ term.wrapping_mul(7) ^ label_hash(phase),
        Event::ElectionWon { term, duration } => 40 ^ term ^ duration.as_micros() as u64,
        Event::VoteCast { term, granted, .. } => 50 ^ term.wrapping_mul(13) ^ u64::from(*granted),
        Event::SplitBrain { term, .. } => 60 ^ term,
        Event::TransferAborted { .. } => 70,
        Event::ConfigurationChanged { index, .. } => 80 ^ index.wrapping_mul(17),
    }
}
