//! Hyperledger Fabric's own election scenarios (`gossip/election/election_test.go`), run at core
//! level on a small deterministic network of [`Gossip`] machines with virtual time, and a
//! randomized run over many seeds (GOS-1..6, CB-5).
//!
//! The network here is the tests' own: messages take 1–5 ms (or what a test sets), may be lost,
//! duplicated and reordered, and cross only within a partition group; each node's membership
//! view follows the nodes that are up and reachable, after a delay a test may set. After every
//! input the harness checks, on every node: a declaration never leaves before its epoch is
//! persisted as this node's leadership; the persisted epoch never goes back; every published
//! leader change carries the persisted term, and `(term, leader)` only ever grows, across
//! restarts too (CB-5).
//!
//! Timings are Fabric's defaults (15 s grace, 1 s sampling, 10 s alive threshold, 5 s
//! election); virtual time makes them free. `CONCLAVE_GOSSIP_SEEDS=N` runs the randomized test
//! over N seeds instead of the default; `CONCLAVE_GOSSIP_SEED=S` replays seed S with the nodes'
//! log.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use conclave_core::election::Outputs;
use conclave_core::election::{
    Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken, GossipMessage,
    HardState, LeaderChangeCause, Role,
};
use conclave_core::gossip::{Gossip, GossipConfig};
use conclave_core::testing::{Carried, carry, id};
use conclave_core::{Instant, SeededRng};
use conclave_protocol::{Declaration, PeerId};

const THRESHOLD: Duration = Duration::from_secs(10);
const ELECTION: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(15);
/// Fabric's `getLeadershipDeclarationInterval`: half the alive threshold.
const DECLARATION_INTERVAL: Duration = Duration::from_secs(5);

/// Sends this test's tracing output to the test harness, so a failure shows the nodes' log.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .without_time()
            .with_test_writer()
            .finish(),
    )
}

// ---------------------------------------------------------------------------------------------
// the harness

/// Something scheduled on the network.
#[derive(Debug, Clone)]
enum Item {
    /// A message arrives.
    Deliver {
        from: usize,
        to: usize,
        message: GossipMessage,
    },
    /// A node's membership view learns that a peer is connected or not.
    View {
        node: usize,
        peer: usize,
        connected: bool,
    },
}

/// One node: its machine, what it persisted, and what it published over its whole life.
#[derive(Debug)]
struct Node {
    id: PeerId,
    config: GossipConfig,
    /// `None` once crashed (or never started).
    machine: Option<Gossip>,
    /// Started and not stopped or crashed: it receives messages and views.
    up: bool,
    persisted: HardState,
    /// Every event it published, across restarts.
    events: Vec<Event>,
    /// The last `(term, leader)` with a leader it published, across restarts.
    last_token: Option<(u64, PeerId)>,
    /// Epochs in which it published itself as the leader.
    led_epochs: Vec<u64>,
    /// Messages it sent after it was stopped (Fabric's `TestStop` wants none).
    sent_while_stopped: u64,
    /// When it last published a leader change.
    last_leader_change: Instant,
}

/// A network of gossip machines with virtual time.
struct Cluster {
    now: Instant,
    rng: SeededRng,
    nodes: Vec<Node>,
    queue: BTreeMap<(Instant, u64), Item>,
    sequence: u64,
    /// Partition group of each node; messages and views cross only within a group.
    groups: Vec<u32>,
    loss: f64,
    duplicate: f64,
    delay: (Duration, Duration),
    /// How long membership takes to report a change of reachability (zero: at once).
    view_delay: (Duration, Duration),
    /// What each node's view has been told (or is scheduled to be told).
    told: Vec<BTreeSet<usize>>,
    /// The latest scheduled view change of each (node, peer), so changes stay in order.
    last_view_at: BTreeMap<(usize, usize), Instant>,
    /// Messages handed to the network.
    sent: u64,
    steps: u64,
}

impl Cluster {
    /// Nodes named `names`, none started yet, on a healthy 1–5 ms network with instant views.
    fn new(seed: u64, names: &[&str], config: impl Fn(PeerId) -> GossipConfig) -> Self {
        let nodes = names
            .iter()
            .map(|name| Node {
                id: id(name),
                config: config(id(name)),
                machine: None,
                up: false,
                persisted: HardState::default(),
                events: Vec::new(),
                last_token: None,
                led_epochs: Vec::new(),
                sent_while_stopped: 0,
                last_leader_change: Instant::ZERO,
            })
            .collect::<Vec<_>>();
        let count = nodes.len();
        Self {
            now: Instant::ZERO,
            rng: SeededRng::new(seed),
            nodes,
            queue: BTreeMap::new(),
            sequence: 0,
            groups: vec![0; count],
            loss: 0.0,
            duplicate: 0.0,
            delay: (Duration::from_millis(1), Duration::from_millis(5)),
            view_delay: (Duration::ZERO, Duration::ZERO),
            told: vec![BTreeSet::new(); count],
            last_view_at: BTreeMap::new(),
            sent: 0,
            steps: 0,
        }
    }

    /// Fabric's defaults.
    fn fabric(seed: u64, names: &[&str]) -> Self {
        Self::new(seed, names, GossipConfig::new)
    }

    fn index(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|node| node.id == id(name))
            .unwrap()
    }

    fn machine(&self, name: &str) -> &Gossip {
        self.nodes[self.index(name)].machine.as_ref().unwrap()
    }

    fn node(&self, name: &str) -> &Node {
        &self.nodes[self.index(name)]
    }

    // --- topology -----------------------------------------------------------------------------

    /// Starts (or restarts) a node from what it persisted.
    fn start(&mut self, name: &str) {
        let i = self.index(name);
        self.start_index(i);
    }

    fn start_index(&mut self, i: usize) {
        let rng = self.rng.fork();
        let node = &mut self.nodes[i];
        node.machine =
            Some(Gossip::new(node.config.clone(), node.persisted, rng, self.now).unwrap());
        node.up = true;
        tracing::info!(node = %node.id, at = ?self.now, "started");
        // A new machine's view is empty.
        self.told[i].clear();
        self.drain(i);
        self.update_views();
    }

    fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.start_index(i);
        }
    }

    /// Fabric's `Stop`: the node shuts down (a leader yields first) and leaves the network; its
    /// machine is kept, to show it does nothing more.
    fn stop(&mut self, name: &str) {
        let i = self.index(name);
        self.call(i, |machine, now| machine.handle_shutdown(now));
        self.nodes[i].up = false;
        self.update_views();
    }

    /// The node dies without a word.
    fn crash(&mut self, i: usize) {
        self.nodes[i].machine = None;
        self.nodes[i].up = false;
        self.update_views();
    }

    fn partition(&mut self, groups: Vec<u32>) {
        self.groups = groups;
        self.update_views();
    }

    fn heal(&mut self) {
        self.groups = vec![0; self.nodes.len()];
        self.update_views();
    }

    fn reachable(&self, from: usize, to: usize) -> bool {
        self.groups[from] == self.groups[to]
    }

    /// Tells every view what changed: a node sees the peers that are up and reachable.
    fn update_views(&mut self) {
        for node in 0..self.nodes.len() {
            if !self.nodes[node].up {
                continue;
            }
            for peer in 0..self.nodes.len() {
                if peer == node {
                    continue;
                }
                let connected = self.nodes[peer].up && self.reachable(node, peer);
                if self.told[node].contains(&peer) == connected {
                    continue;
                }
                if connected {
                    self.told[node].insert(peer);
                } else {
                    self.told[node].remove(&peer);
                }
                let delay = self
                    .rng
                    .duration_between(self.view_delay.0, self.view_delay.1);
                if delay.is_zero() {
                    self.apply_view(node, peer, connected);
                } else {
                    let last = self.last_view_at.get(&(node, peer)).copied();
                    let mut at = self.now + delay;
                    if let Some(last) = last {
                        at = at.max(last + Duration::from_micros(1));
                    }
                    self.last_view_at.insert((node, peer), at);
                    self.schedule(
                        at,
                        Item::View {
                            node,
                            peer,
                            connected,
                        },
                    );
                }
            }
        }
    }

    fn apply_view(&mut self, node: usize, peer: usize, connected: bool) {
        if !self.nodes[node].up {
            return;
        }
        let peer_id = self.nodes[peer].id;
        self.call(node, |machine, now| {
            machine.handle_peer_status(now, peer_id, connected)
        });
    }

    fn schedule(&mut self, at: Instant, item: Item) {
        self.sequence += 1;
        self.queue.insert((at, self.sequence), item);
    }

    // --- inputs -------------------------------------------------------------------------------

    fn command(&mut self, name: &str, command: Command) -> Result<CommandOutcome, ElectionError> {
        let i = self.index(name);
        self.call(i, |machine, now| machine.handle_command(now, command))
            .unwrap()
    }

    /// Feeds node `i`'s machine one input inside a span naming the node and the virtual time,
    /// then carries out what it queued.
    fn call<R>(&mut self, i: usize, input: impl FnOnce(&mut Gossip, Instant) -> R) -> Option<R> {
        let now = self.now;
        let node = &mut self.nodes[i];
        let span = tracing::debug_span!("node", id = %node.id, at = ?now);
        let result = span.in_scope(|| node.machine.as_mut().map(|machine| input(machine, now)));
        self.drain(i);
        result
    }

    /// Carries out everything node `i` queued, checking the fencing invariants on the way.
    fn drain(&mut self, i: usize) {
        let now = self.now;
        loop {
            let Some(action) = self.nodes[i].machine.as_mut().and_then(Gossip::poll_action) else {
                return;
            };
            let node = &mut self.nodes[i];
            match carry(action) {
                Carried::Durable {
                    hard: state,
                    amnesic: false,
                } => {
                    assert!(
                        state.term >= node.persisted.term,
                        "{}: persisted epoch went back from {} to {}",
                        node.id,
                        node.persisted.term,
                        state.term
                    );
                    node.persisted = state;
                }
                Carried::Local(_) => {}
                Carried::Durable { amnesic: true, .. } => {
                    panic!("{}: gossip persisted amnesic state", node.id)
                }
                // The harness keeps a stopped machine to ask it about itself; it ignores inputs.
                Carried::Stopped => {}
                Carried::Message {
                    to: Some(to),
                    message,
                } => {
                    let message = self.checked_gossip(i, message);
                    let to = self.nodes.iter().position(|n| n.id == to).unwrap();
                    self.transmit(i, to, message);
                }
                Carried::Message { to: None, message } => {
                    let message = self.checked_gossip(i, message);
                    for to in 0..self.nodes.len() {
                        if to != i {
                            self.transmit(i, to, message.clone());
                        }
                    }
                }
                Carried::Event(event) => {
                    if let Event::LeaderChanged {
                        term, leader, role, ..
                    } = &event
                    {
                        record_leader_change(node, *term, *leader, *role);
                        node.last_leader_change = now;
                    }
                    node.events.push(event);
                }
            }
        }
    }

    /// The gossip message of an action, after checking that a declaration's epoch is this
    /// node's durable leadership (CB-5: persisted before the declaration leaves).
    fn checked_gossip(&mut self, i: usize, message: ElectionMessage) -> GossipMessage {
        let ElectionMessage::Gossip(message) = message else {
            panic!(
                "{}: gossip sent a message of another mode",
                self.nodes[i].id
            );
        };
        let node = &mut self.nodes[i];
        if let GossipMessage::Declaration(Declaration { epoch }) = message {
            assert_eq!(
                (node.persisted.term, node.persisted.vote),
                (epoch, Some(node.id)),
                "{}: declaration of epoch {epoch} left before it was persisted",
                node.id
            );
        }
        if !node.up {
            node.sent_while_stopped += 1;
        }
        message
    }

    fn transmit(&mut self, from: usize, to: usize, message: GossipMessage) {
        self.sent += 1;
        if !self.nodes[from].up
            || !self.nodes[to].up
            || !self.reachable(from, to)
            || self.rng.chance(self.loss)
        {
            return;
        }
        let copies = if self.rng.chance(self.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = self.rng.duration_between(self.delay.0, self.delay.1);
            self.schedule(
                self.now + delay,
                Item::Deliver {
                    from,
                    to,
                    message: message.clone(),
                },
            );
        }
    }

    // --- time ---------------------------------------------------------------------------------

    /// The earliest timer of any machine: (when, node).
    fn next_timer(&self) -> Option<(Instant, usize)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, node)| Some((node.machine.as_ref()?.poll_timeout()?, i)))
            .min()
    }

    /// Handles the next scheduled thing if it is due by `until`; false if nothing is.
    fn step(&mut self, until: Instant) -> bool {
        self.steps += 1;
        assert!(self.steps < 5_000_000, "livelock at {:?}", self.now);
        let item_at = self.queue.keys().next().map(|(at, _)| *at);
        let timer = self.next_timer();
        let take_item = match (item_at, timer) {
            (Some(at), Some((timer_at, _))) => at <= timer_at,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return false,
        };
        if take_item {
            let at = item_at.unwrap();
            if at > until {
                return false;
            }
            let (_, item) = self.queue.pop_first().unwrap();
            self.now = self.now.max(at);
            match item {
                Item::Deliver { from, to, message } => {
                    if !self.nodes[to].up {
                        return true;
                    }
                    let from_id = self.nodes[from].id;
                    self.call(to, |machine, now| {
                        machine.handle_message(now, from_id, message)
                    });
                }
                Item::View {
                    node,
                    peer,
                    connected,
                } => self.apply_view(node, peer, connected),
            }
        } else {
            let (at, i) = timer.unwrap();
            if at > until {
                return false;
            }
            self.now = self.now.max(at);
            self.call(i, |machine, now| machine.handle_timeout(now));
            let next = self.nodes[i].machine.as_ref().unwrap().poll_timeout();
            assert!(
                next.is_none_or(|next| next > at),
                "{}: deadline {at:?} did not move on",
                self.nodes[i].id
            );
        }
        true
    }

    fn run_until(&mut self, until: Instant) {
        while self.step(until) {}
        self.now = self.now.max(until);
    }

    fn run_for(&mut self, duration: Duration) {
        self.run_until(self.now + duration);
    }

    /// Runs until `condition` holds, checked after every step, or `limit` passes; returns the
    /// time it first held.
    fn run_until_condition(
        &mut self,
        limit: Duration,
        condition: impl Fn(&Cluster) -> bool,
    ) -> Option<Instant> {
        let until = self.now + limit;
        loop {
            if condition(self) {
                return Some(self.now);
            }
            if !self.step(until) {
                self.now = until;
                return condition(self).then_some(self.now);
            }
        }
    }

    // --- observations -------------------------------------------------------------------------

    /// The nodes that are up and lead, by name.
    fn leaders(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| node.up)
            .filter(|node| node.machine.as_ref().is_some_and(Gossip::is_leader))
            .map(|node| node.id.to_string())
            .collect()
    }

    /// Exactly one node leads, and every node that is up follows it with the same token.
    fn agreed_leader(&self) -> Option<FencingToken> {
        let [leader] = self.leaders().try_into().ok()?;
        let token = self.machine(&leader).fencing_token()?;
        self.nodes
            .iter()
            .filter(|node| node.up)
            .all(|node| node.machine.as_ref().unwrap().fencing_token() == Some(token))
            .then_some(token)
    }

    /// Runs until a single leader is agreed on (at most `limit`), and returns its name.
    fn settle(&mut self, limit: Duration) -> String {
        self.run_until_condition(limit, |c| c.agreed_leader().is_some())
            .unwrap_or_else(|| panic!("no agreed leader within {limit:?}: {:?}", self.leaders()));
        self.agreed_leader().unwrap().leader.to_string()
    }

    /// The leader changes a node published, as `(leader, cause)`.
    fn leader_changes(&self, name: &str) -> Vec<(Option<String>, LeaderChangeCause)> {
        self.node(name)
            .events
            .iter()
            .filter_map(|event| match event {
                Event::LeaderChanged { leader, cause, .. } => {
                    Some((leader.map(|l| l.to_string()), *cause))
                }
                _ => None,
            })
            .collect()
    }

    /// Names of the nodes that ever published themselves as leader.
    fn ever_led(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| !node.led_epochs.is_empty())
            .map(|node| node.id.to_string())
            .collect()
    }
}

/// CB-5 on one node: a published leader change carries the persisted term, and `(term, leader)`
/// only grows: a later epoch, or the same leader again.
fn record_leader_change(node: &mut Node, term: u64, leader: Option<PeerId>, role: Role) {
    assert_eq!(
        term, node.persisted.term,
        "{}: published term {term} is not the persisted one",
        node.id
    );
    assert_eq!(
        role == Role::Leader,
        leader == Some(node.id),
        "{}: role {role:?} with leader {leader:?}",
        node.id
    );
    let Some(leader) = leader else {
        return;
    };
    if let Some((last_term, last_leader)) = node.last_token {
        assert!(
            term > last_term || (term == last_term && leader == last_leader),
            "{}: fencing token went from ({last_term}, {last_leader}) to ({term}, {leader})",
            node.id
        );
    }
    node.last_token = Some((term, leader));
    if leader == node.id {
        node.led_epochs.push(term);
    }
}

/// The invariant check can fail: a token that goes back to a lower epoch, or to another leader
/// of the same epoch, is caught.
#[test]
#[should_panic(expected = "fencing token went from (3, b) to (3, c)")]
fn harness_catches_a_fencing_token_that_does_not_grow() {
    let mut cluster = Cluster::fabric(0, &["a"]);
    let node = &mut cluster.nodes[0];
    node.persisted.term = 3;
    record_leader_change(node, 3, Some(id("b")), Role::Follower);
    record_leader_change(node, 3, Some(id("b")), Role::Follower);
    record_leader_change(node, 3, Some(id("c")), Role::Follower);
}

// ---------------------------------------------------------------------------------------------
// Fabric's scenarios (election_test.go)

/// `TestInitPeersAtSameTime`, GOS-1, GOS-2: ten peers start together; the lowest id is the
/// only leader, and no other peer ever led.
#[test]
fn fabric_init_peers_at_same_time() {
    let _log = log_to_test_output();
    let names = ["p9", "p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1", "p0"];
    let mut cluster = Cluster::fabric(1, &names);
    cluster.start_all();
    cluster.run_for(GRACE + ELECTION);
    assert_eq!(cluster.leaders(), vec!["p0"]);
    assert_eq!(cluster.settle(Duration::ZERO), "p0");
    assert_eq!(cluster.ever_led(), vec!["p0"]);
    assert_eq!(
        cluster.leader_changes("p0"),
        vec![(Some("p0".to_owned()), LeaderChangeCause::VoteWon)]
    );
    // Two samples to see a stable view, then one election.
    assert_eq!(cluster.node("p0").led_epochs, vec![1]);
    for name in &names[..9] {
        assert_eq!(
            cluster.leader_changes(name),
            vec![(Some("p0".to_owned()), LeaderChangeCause::LeaderHeard)],
            "{name}"
        );
    }
}

/// `TestInitPeersStartAtIntervals`, GOS-1, GOS-3: peers start one by one, a grace period and a
/// declaration interval apart; the first keeps leadership although its id is the highest.
#[test]
fn fabric_init_peers_start_at_intervals() {
    let _log = log_to_test_output();
    let names = ["p3", "p2", "p1", "p0"];
    let mut cluster = Cluster::fabric(2, &names);
    for name in names {
        cluster.start(name);
        cluster.run_for(GRACE + DECLARATION_INTERVAL);
    }
    assert_eq!(cluster.settle(Duration::ZERO), "p3");
    cluster.run_for(THRESHOLD * 5);
    assert_eq!(cluster.settle(Duration::ZERO), "p3");
    assert_eq!(cluster.ever_led(), vec!["p3"]);
}

/// `TestStop`: peers that stop send nothing afterwards, and have no deadline left.
#[test]
fn fabric_stop() {
    let _log = log_to_test_output();
    let names = ["p3", "p2", "p1", "p0"];
    let mut cluster = Cluster::fabric(3, &names);
    cluster.start_all();
    cluster.settle(GRACE + ELECTION * 2);
    for name in names {
        cluster.stop(name);
    }
    let sent = cluster.sent;
    cluster.run_for(THRESHOLD * 5);
    assert_eq!(cluster.sent, sent);
    for name in names {
        assert_eq!(cluster.node(name).sent_while_stopped, 0, "{name}");
        assert_eq!(cluster.machine(name).poll_timeout(), None, "{name}");
    }
    // The leader yielded before stopping.
    assert_eq!(
        cluster.leader_changes("p0").last(),
        Some(&(None, LeaderChangeCause::Shutdown))
    );
}

/// `TestConvergence`, GOS-6, CB-5: two groups elect a leader each; when their views merge only
/// the leader with the lower id is left, and its token is above every epoch the other led in.
#[test]
fn fabric_convergence() {
    let _log = log_to_test_output();
    let names = ["p3", "p2", "p1", "p0", "p4", "p5", "p6", "p7"];
    let mut cluster = Cluster::fabric(4, &names);
    cluster.partition(vec![0, 0, 0, 0, 1, 1, 1, 1]);
    cluster.start_all();
    cluster.run_until_condition(GRACE + ELECTION * 2, |c| c.leaders().len() == 2);
    // Let the declarations reach each group's followers.
    cluster.run_for(Duration::from_secs(1));
    assert_eq!(cluster.leaders(), vec!["p0", "p4"]);

    cluster.heal();
    cluster.run_for(THRESHOLD * 5);
    assert_eq!(cluster.settle(Duration::ZERO), "p0");
    let token = cluster.agreed_leader().unwrap();
    assert!(token.term > *cluster.node("p4").led_epochs.iter().max().unwrap());
    // p4 stepped down for the lower id; p4's old followers follow p0.
    assert!(
        cluster
            .leader_changes("p4")
            .contains(&(Some("p0".to_owned()), LeaderChangeCause::TieBreak))
            || cluster
                .leader_changes("p4")
                .contains(&(None, LeaderChangeCause::TieBreak)),
        "{:?}",
        cluster.leader_changes("p4")
    );
    for name in ["p5", "p6", "p7"] {
        let changes = cluster.leader_changes(name);
        assert_eq!(changes.first().unwrap().0.as_deref(), Some("p4"), "{name}");
        assert_eq!(changes.last().unwrap().0.as_deref(), Some("p0"), "{name}");
    }
}

/// `TestLeadershipTakeover`, GOS-3: peers start one by one in descending id order; the first
/// leads; when it stops, the lowest remaining id takes over within the alive threshold plus
/// an election (the failover formula) after its last declaration.
#[test]
fn fabric_leadership_takeover() {
    let _log = log_to_test_output();
    let names = ["p5", "p4", "p3", "p2"];
    let mut cluster = Cluster::fabric(5, &names);
    for name in names {
        cluster.start(name);
        cluster.run_for(GRACE + DECLARATION_INTERVAL);
    }
    assert_eq!(cluster.settle(Duration::ZERO), "p5");
    let stopped_at = cluster.now;
    cluster.stop("p5");
    let took_over = cluster
        .run_until_condition(DECLARATION_INTERVAL + THRESHOLD * 3, |c| {
            c.leaders() == vec!["p2"]
        })
        .expect("p2 takes over");
    let budget = GossipConfig::new(id("p2")).failover_budget();
    assert!(
        took_over - stopped_at <= budget,
        "took over after {:?}, budget {budget:?}",
        took_over - stopped_at
    );
    cluster.run_for(THRESHOLD * 3);
    assert_eq!(cluster.settle(Duration::ZERO), "p2");
    assert_eq!(cluster.ever_led(), vec!["p5", "p2"]);
}

/// `TestYield`, GOS-4: the leader yields (the leadership callback fires once: a second yield is
/// refused and publishes nothing); another peer is elected, and the old leader does not take
/// leadership back, even long after the yield period.
#[test]
fn fabric_yield() {
    let _log = log_to_test_output();
    let names = ["p0", "p1", "p2", "p3", "p4", "p5"];
    let mut cluster = Cluster::fabric(6, &names);
    cluster.start_all();
    assert_eq!(cluster.settle(GRACE + ELECTION * 2), "p0");

    assert_eq!(
        cluster.command("p0", Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
    let changes = cluster.leader_changes("p0");
    assert_eq!(
        changes.last(),
        Some(&(None, LeaderChangeCause::Yield)),
        "{changes:?}"
    );
    let events = cluster.node("p0").events.len();
    assert_eq!(
        cluster.command("p0", Command::Resign),
        Err(ElectionError::NotLeader { leader: None })
    );
    assert_eq!(cluster.node("p0").events.len(), events);

    assert_eq!(cluster.settle(THRESHOLD + ELECTION * 2), "p1");
    cluster.run_for(THRESHOLD * 20);
    assert_eq!(cluster.settle(Duration::ZERO), "p1");
    assert_eq!(cluster.node("p0").led_epochs, vec![1]);
}

/// `TestYieldSinglePeer` (and `TestMetrics`), GOS-4: a lone leader that yields is no longer
/// leader, and regains leadership once the yield period is over.
#[test]
fn fabric_yield_single_peer() {
    let _log = log_to_test_output();
    let mut cluster = Cluster::fabric(7, &["p0"]);
    cluster.start_all();
    assert_eq!(cluster.settle(GRACE + ELECTION), "p0");
    cluster.command("p0", Command::Resign).unwrap();
    assert!(cluster.leaders().is_empty());
    let yield_period = GossipConfig::new(id("p0")).yield_duration();
    cluster.run_for(yield_period - Duration::from_millis(1));
    assert!(cluster.leaders().is_empty());
    assert_eq!(cluster.settle(ELECTION + Duration::from_millis(1)), "p0");
    assert_eq!(
        cluster.leader_changes("p0"),
        vec![
            (Some("p0".to_owned()), LeaderChangeCause::VoteWon),
            (None, LeaderChangeCause::Yield),
            (Some("p0".to_owned()), LeaderChangeCause::VoteWon),
        ]
    );
    assert_eq!(cluster.node("p0").led_epochs, vec![1, 2]);
}

/// `TestYieldAllPeers`, GOS-4: two peers; the leader yields and the other leads; that one
/// yields in turn and the first leads again.
#[test]
fn fabric_yield_all_peers() {
    let _log = log_to_test_output();
    let mut cluster = Cluster::fabric(8, &["p0", "p1"]);
    cluster.start_all();
    assert_eq!(cluster.settle(GRACE + ELECTION * 2), "p0");
    cluster.command("p0", Command::Resign).unwrap();
    assert_eq!(cluster.settle(THRESHOLD + ELECTION * 2), "p1");
    cluster.command("p1", Command::Resign).unwrap();
    assert_eq!(cluster.settle(THRESHOLD + ELECTION * 2), "p0");
    let token = cluster.agreed_leader().unwrap();
    assert_eq!(token.term, 3);
}

/// `TestPartition`, GOS-6, CB-5: six peers elect p0; a partition isolates every peer, and each
/// becomes a leader; once healed, p0 is the only leader again, every other peer published
/// that it stepped down, and p0's token is above every epoch they led in.
#[test]
fn fabric_partition() {
    let _log = log_to_test_output();
    let names = ["p5", "p4", "p3", "p2", "p1", "p0"];
    let mut cluster = Cluster::fabric(9, &names);
    cluster.start_all();
    assert_eq!(cluster.settle(GRACE + ELECTION * 2), "p0");

    cluster.partition(vec![0, 1, 2, 3, 4, 5]);
    cluster.run_for(DECLARATION_INTERVAL + THRESHOLD * 2);
    assert_eq!(cluster.leaders().len(), 6, "{:?}", cluster.leaders());
    for name in names {
        assert!(cluster.machine(name).is_leader(), "{name}");
    }

    cluster.heal();
    cluster.run_for(DECLARATION_INTERVAL + THRESHOLD * 2);
    assert_eq!(cluster.settle(Duration::ZERO), "p0");
    let token = cluster.agreed_leader().unwrap();
    for name in &names[..5] {
        let led = cluster.node(name).led_epochs.clone();
        assert!(
            !led.is_empty() && token.term > *led.iter().max().unwrap(),
            "{name}"
        );
        let changes = cluster.leader_changes(name);
        assert_eq!(changes.last().unwrap().0.as_deref(), Some("p0"), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// randomized

/// How many seeds the randomized run covers: `CONCLAVE_GOSSIP_SEEDS`, or a quick default.
fn seeds() -> u64 {
    std::env::var("CONCLAVE_GOSSIP_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2000)
}

/// GOS-6, CB-5: under loss, duplication, reordering, partitions, crashes with restarts, slow
/// membership views and yields, once the network heals (every node up, no partition, no more
/// loss; duplication and reordering go on) the last leader change anywhere happens within
/// `leader_alive_threshold + leader_election_duration` plus the membership delay and one
/// second of slack; from then on exactly one leader is agreed on by every node, for three
/// alive thresholds; and its token is above every epoch any other node ever led in. The
/// per-step invariants (declaration after persist, tokens only grow) hold throughout.
#[test]
fn gossip_randomized_heals_to_one_leader() {
    const VIEW_DELAY_MAX: Duration = Duration::from_secs(3);
    const SLACK: Duration = Duration::from_secs(1);
    let budget = GossipConfig::new(id("x")).failover_budget() + VIEW_DELAY_MAX + SLACK;
    let mut worst = Duration::ZERO;
    let seeds = match std::env::var("CONCLAVE_GOSSIP_SEED") {
        // Replays one seed with the nodes' log.
        Ok(seed) => {
            let seed: u64 = seed.parse().expect("CONCLAVE_GOSSIP_SEED is a number");
            seed..seed + 1
        }
        Err(_) => 0..seeds(),
    };
    let _log = (seeds.end - seeds.start == 1).then(log_to_test_output);
    for seed in seeds {
        worst = worst.max(randomized_run(seed, VIEW_DELAY_MAX, budget));
    }
    eprintln!("slowest settling after healing: {worst:?} (budget {budget:?})");
}

/// One randomized run; returns how long after healing the last leader change happened.
fn randomized_run(seed: u64, view_delay_max: Duration, budget: Duration) -> Duration {
    let mut plan = SeededRng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    let size = plan.between(1, 8) as usize;
    let mut names = BTreeSet::new();
    while names.len() < size {
        names.insert(format!("g{}", plan.below(100)));
    }
    let names: Vec<String> = names.into_iter().collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut cluster = Cluster::fabric(seed, &refs);
    cluster.loss = plan.below(30) as f64 / 100.0;
    cluster.duplicate = plan.below(20) as f64 / 100.0;
    let delay_max = Duration::from_millis(plan.between(2, 300));
    cluster.delay = (Duration::from_millis(1), delay_max);
    cluster.view_delay = (Duration::ZERO, view_delay_max);
    let mut report = format!(
        "{size} nodes {names:?}, loss {}, duplicate {}, delay up to {delay_max:?}",
        cluster.loss, cluster.duplicate
    );

    // Staggered starts within 20 s.
    let mut starts: Vec<(Duration, usize)> = (0..size)
        .map(|i| (Duration::from_millis(plan.below(20_000)), i))
        .collect();
    starts.sort();
    for (at, i) in starts {
        cluster.run_until(Instant::ZERO + at);
        cluster.start_index(i);
    }

    // Chaos; yields only early enough that every yield period is over before the heal.
    let chaos = Duration::from_secs(plan.between(20, 200));
    let heal_at = cluster.now + chaos;
    let last_yield = Instant::from_micros(heal_at.as_micros().saturating_sub(75_000_000));
    while cluster.now < heal_at {
        let wait = Duration::from_millis(plan.between(500, 20_000));
        cluster.run_until((cluster.now + wait).min(heal_at));
        if cluster.now >= heal_at {
            break;
        }
        match plan.below(5) {
            0 => {
                let groups: Vec<u32> = (0..size).map(|_| plan.below(3) as u32).collect();
                report += &format!("\n{:?}: partition {groups:?}", cluster.now);
                cluster.partition(groups);
            }
            1 => {
                report += &format!("\n{:?}: heal", cluster.now);
                cluster.heal();
            }
            2 => {
                let i = plan.below(size as u64) as usize;
                if cluster.nodes[i].machine.is_some() {
                    report += &format!("\n{:?}: crash {}", cluster.now, names[i]);
                    cluster.crash(i);
                }
            }
            3 => {
                let i = plan.below(size as u64) as usize;
                if cluster.nodes[i].machine.is_none() {
                    report += &format!("\n{:?}: restart {}", cluster.now, names[i]);
                    cluster.start_index(i);
                }
            }
            _ => {
                if cluster.now < last_yield {
                    if let Some(leader) = cluster.leaders().first().cloned() {
                        report += &format!("\n{:?}: {leader} yields", cluster.now);
                        cluster.command(&leader, Command::Resign).unwrap();
                    }
                }
            }
        }
    }

    // Heal everything.
    report += &format!("\n{:?}: heal all", cluster.now);
    cluster.loss = 0.0;
    for i in 0..size {
        if cluster.nodes[i].machine.is_none() {
            cluster.start_index(i);
        }
    }
    cluster.heal();
    let healed = cluster.now;
    cluster.run_until(healed + budget);
    let replay = format!("seed {seed} (replay with CONCLAVE_GOSSIP_SEED={seed})");
    let Some(token) = cluster.agreed_leader() else {
        panic!(
            "{replay}: no agreed leader {budget:?} after healing, leaders {:?}\n{report}",
            cluster.leaders()
        );
    };
    let settled = cluster
        .nodes
        .iter()
        .map(|node| node.last_leader_change)
        .max()
        .unwrap()
        .max(healed);

    // It holds, and nobody publishes another leader change.
    cluster.run_for(THRESHOLD * 3);
    assert_eq!(
        cluster.agreed_leader(),
        Some(token),
        "{replay}: the leader did not hold\n{report}"
    );
    for node in &cluster.nodes {
        assert!(
            node.last_leader_change <= healed + budget,
            "{replay}: {} changed leader at {:?}, healed at {healed:?}\n{report}",
            node.id,
            node.last_leader_change
        );
    }
    // Fencing: above every epoch any other node led in.
    for node in &cluster.nodes {
        if node.id != token.leader {
            if let Some(max) = node.led_epochs.iter().max() {
                assert!(
                    token.term > *max,
                    "{replay}: {} led in epoch {max}, final token {token}\n{report}",
                    node.id
                );
            }
        }
    }
    settled - healed
}
