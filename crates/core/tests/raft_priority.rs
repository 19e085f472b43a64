//! RAFT-10 scenarios: three `Raft` machines on a small lossless network with a fixed latency,
//! driven on virtual time the way the ElectionActor drives one (inputs in, actions drained,
//! `poll_timeout` for the next wake-up). Each scenario checks where leadership ends up and
//! when it moved: the highest priority leads after start, a lower priority campaigns later,
//! preemption after `preempt_delay` and not before, `nopreempt`, an operator's pin, a health
//! reading that lowers the leader's priority, a lagging voter of higher priority, and the
//! same cluster without priorities (the control: the id rule alone, as before RAFT-10).
//!
//! The network is three nodes `a`, `b`, `c`, all voters, with the default pre-vote,
//! check-quorum and ranked timeouts; heartbeat 50 ms, election timeout 150–300 ms, one-way
//! latency 5 ms, `preempt_delay` 1 s.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use conclave_core::election::{
    Action, Command, ElectionMessage, Event, HardState, HealthReading, LeaderChangeCause,
};
use conclave_core::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use conclave_core::{Instant, SeededRng};
use conclave_protocol::PeerId;

const HEARTBEAT: Duration = Duration::from_millis(50);
const TIMEOUT_MIN: Duration = Duration::from_millis(150);
const TIMEOUT_MAX: Duration = Duration::from_millis(300);
const LATENCY: Duration = Duration::from_millis(5);
const PREEMPT_DELAY: Duration = Duration::from_secs(1);
const NAMES: [&str; 3] = ["a", "b", "c"];

/// Sends this test's tracing output to the test harness, so a failure shows the nodes' logs.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_test_writer()
            .finish(),
    )
}

fn id(name: &str) -> PeerId {
    PeerId::new(name).unwrap()
}

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// How one node starts.
#[derive(Clone, Copy, Default)]
struct NodeSetup {
    priority: Option<u8>,
    nopreempt: bool,
    last_log: LogPosition,
}

fn prio(priority: u8) -> NodeSetup {
    NodeSetup {
        priority: Some(priority),
        ..NodeSetup::default()
    }
}

/// Something a node published, and when.
#[derive(Debug, Clone)]
struct Published {
    at: Instant,
    node: usize,
    event: Event,
}

struct InFlight {
    deliver_at: Instant,
    seq: u64,
    from: usize,
    to: usize,
    message: RaftMessage,
}

struct Cluster {
    nodes: Vec<Option<Raft>>,
    now: Instant,
    in_flight: Vec<InFlight>,
    seq: u64,
    published: Vec<Published>,
}

impl Cluster {
    fn start(setups: [NodeSetup; 3]) -> Self {
        let nodes = setups
            .iter()
            .enumerate()
            .map(|(n, setup)| {
                let mut config = RaftConfig::new(id(NAMES[n]), NAMES.iter().map(|v| id(v)))
                    .with_heartbeat(HEARTBEAT)
                    .with_election_timeout(TIMEOUT_MIN, TIMEOUT_MAX);
                config.priority = setup.priority;
                config.nopreempt = setup.nopreempt;
                config.preempt_delay = PREEMPT_DELAY;
                Some(
                    Raft::with_last_log(
                        config,
                        HardState::default(),
                        setup.last_log,
                        SeededRng::new(n as u64 + 1),
                        at(0),
                    )
                    .unwrap(),
                )
            })
            .collect();
        Self {
            nodes,
            now: at(0),
            in_flight: Vec::new(),
            seq: 0,
            published: Vec::new(),
        }
    }

    fn index(name: PeerId) -> usize {
        NAMES.iter().position(|n| id(n) == name).unwrap()
    }

    /// Carries out what node `n` asked for: messages leave with the latency, events are kept.
    fn drain(&mut self, n: usize) {
        let Some(raft) = self.nodes[n].as_mut() else {
            return;
        };
        let actions: Vec<Action> = std::iter::from_fn(|| raft.poll_action()).collect();
        for action in actions {
            match action {
                Action::Send {
                    to,
                    message: ElectionMessage::Raft(message),
                } => {
                    self.seq += 1;
                    self.in_flight.push(InFlight {
                        deliver_at: self.now + LATENCY,
                        seq: self.seq,
                        from: n,
                        to: Self::index(to),
                        message,
                    });
                }
                Action::Publish(event) => self.published.push(Published {
                    at: self.now,
                    node: n,
                    event,
                }),
                Action::Send { .. } | Action::Broadcast { .. } => {
                    panic!("raft sent a message of another mode: {action:?}")
                }
                Action::Persist(_)
                | Action::PersistAmnesic(_)
                | Action::PersistAutoElection(_)
                | Action::Stopped => {}
            }
        }
    }

    /// Runs every input due up to `until`, in time order, and leaves the clock at `until`.
    fn run_until(&mut self, until: Instant) {
        loop {
            let next_message = self.in_flight.iter().map(|m| (m.deliver_at, m.seq)).min();
            let next_timer = self
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(n, raft)| Some((raft.as_ref()?.poll_timeout()?, n)))
                .min();
            match (next_message, next_timer) {
                (Some((deliver_at, seq)), timer)
                    if deliver_at <= until && timer.is_none_or(|(t, _)| deliver_at <= t) =>
                {
                    self.now = deliver_at;
                    let position = self.in_flight.iter().position(|m| m.seq == seq).unwrap();
                    let message = self.in_flight.swap_remove(position);
                    let from = id(NAMES[message.from]);
                    if let Some(raft) = self.nodes[message.to].as_mut() {
                        raft.handle_message(self.now, from, message.message);
                        self.drain(message.to);
                    }
                }
                (_, Some((t, n))) if t <= until => {
                    self.now = self.now.max(t);
                    let now = self.now;
                    if let Some(raft) = self.nodes[n].as_mut() {
                        raft.handle_timeout(now);
                    }
                    self.drain(n);
                }
                _ => break,
            }
        }
        self.now = until;
    }

    fn run_for(&mut self, duration: Duration) {
        self.run_until(self.now + duration);
    }

    fn crash(&mut self, n: usize) {
        self.nodes[n] = None;
        self.in_flight.retain(|m| m.to != n);
    }

    fn health(&mut self, n: usize, priority: Option<u8>) {
        let now = self.now;
        self.nodes[n].as_mut().unwrap().handle_health(
            now,
            HealthReading {
                battery_percent: 100,
                priority,
            },
        );
        self.drain(n);
    }

    fn command(&mut self, n: usize, command: Command) {
        let now = self.now;
        self.nodes[n]
            .as_mut()
            .unwrap()
            .handle_command(now, command)
            .unwrap();
        self.drain(n);
    }

    /// The single leader every live node agrees on, if there is one.
    fn agreed_leader(&self) -> Option<&'static str> {
        let live: Vec<&Raft> = self.nodes.iter().flatten().collect();
        let leaders: Vec<&Raft> = live.iter().copied().filter(|r| r.is_leader()).collect();
        let [leader] = leaders.as_slice() else {
            return None;
        };
        live.iter()
            .all(|r| r.leader() == Some(leader.id()) && r.term() == leader.term())
            .then(|| NAMES[Self::index(leader.id())])
    }

    /// Leader changes node `n` published at or after `since`: (time, leader, cause).
    fn leader_changes(
        &self,
        n: usize,
        since: Instant,
    ) -> Vec<(Instant, Option<PeerId>, LeaderChangeCause)> {
        self.published
            .iter()
            .filter(|p| p.node == n && p.at >= since)
            .filter_map(|p| match p.event {
                Event::LeaderChanged { leader, cause, .. } => Some((p.at, leader, cause)),
                _ => None,
            })
            .collect()
    }

    /// When node `n` first started a campaign (pre-vote or election) at or after `since`.
    fn first_campaign(&self, n: usize, since: Instant) -> Option<Instant> {
        self.published
            .iter()
            .find(|p| {
                p.node == n && p.at >= since && matches!(p.event, Event::ElectionStarted { .. })
            })
            .map(|p| p.at)
    }

    /// Whether any node published a leader change at or after `since`.
    fn any_leader_change(&self, since: Instant) -> bool {
        (0..3).any(|n| !self.leader_changes(n, since).is_empty())
    }
}

/// Starts a cluster and runs it until it has settled (a few preempt delays).
fn settled(setups: [NodeSetup; 3]) -> Cluster {
    let mut cluster = Cluster::start(setups);
    cluster.run_for(PREEMPT_DELAY * 4);
    cluster
}

/// RAFT-10 control: without priorities the id rule alone decides, as before RAFT-10: the
/// largest id leads after start, and the larger survivor after it is lost.
#[test]
fn raft10_control_without_priorities_the_id_rule_decides() {
    let _log = log_to_test_output();
    let mut cluster = settled([NodeSetup::default(); 3]);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    cluster.crash(2);
    cluster.run_for(PREEMPT_DELAY * 3);
    assert_eq!(cluster.agreed_leader(), Some("b"));
}

/// RAFT-10: the highest priority ends up leading after start, whatever the ids say, and stays.
#[test]
fn raft10_highest_priority_leads_after_start() {
    let _log = log_to_test_output();
    for (priorities, expected) in [([200, 100, 50], "a"), ([10, 250, 30], "b")] {
        let mut cluster = settled(priorities.map(prio));
        assert_eq!(cluster.agreed_leader(), Some(expected), "{priorities:?}");
        let now = cluster.now;
        cluster.run_for(PREEMPT_DELAY * 4);
        assert_eq!(cluster.agreed_leader(), Some(expected), "{priorities:?}");
        assert!(
            !cluster.any_leader_change(now),
            "{priorities:?}: leadership moved"
        );
    }
}

/// RAFT-10, RAFT-2: after the leader is lost, the survivor of higher priority campaigns first
/// and leads, though the other has the larger id (which alone would make it campaign first,
/// as the control shows); the lower priority does not campaign at all.
#[test]
fn raft10_lower_priority_campaigns_later() {
    let _log = log_to_test_output();
    let mut cluster = settled([prio(200), prio(100), prio(50)]);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    let lost = cluster.now;
    cluster.crash(0);
    cluster.run_for(PREEMPT_DELAY * 3);
    let b = cluster.first_campaign(1, lost).expect("b campaigns");
    assert!(
        cluster.first_campaign(2, lost).is_none_or(|c| c > b),
        "c campaigned before b"
    );
    assert_eq!(cluster.agreed_leader(), Some("b"));
    // The ranked slot of `b` is the first: right at the minimum timeout after its last
    // heartbeat, so within one heartbeat interval plus the minimum of the loss.
    assert!(b.saturating_duration_since(lost) <= HEARTBEAT + TIMEOUT_MIN + LATENCY);
}

/// RAFT-10: a voter whose priority rises above the leader's takes over after `preempt_delay`,
/// not before; the old leader publishes the cause `priority`.
#[test]
fn raft10_preempts_after_the_delay_not_before() {
    let _log = log_to_test_output();
    let mut cluster = settled([prio(10), prio(20), prio(30)]);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    let raised = cluster.now;
    cluster.health(0, Some(250));
    // Until a whole delay after the raise, nothing moves.
    cluster.run_until(raised + PREEMPT_DELAY);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    assert!(
        !cluster.any_leader_change(raised),
        "preempted before the delay"
    );
    // Within a heartbeat round trip after the delay the transfer is ordered, and `a` wins.
    cluster.run_for(HEARTBEAT + TIMEOUT_MIN);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    let changes = cluster.leader_changes(2, raised);
    assert_eq!(changes[0].1, None);
    assert_eq!(changes[0].2, LeaderChangeCause::Priority);
    assert!(changes[0].0 >= raised + PREEMPT_DELAY);
    assert_eq!(changes.last().unwrap().1, Some(id("a")));
    // And it stays there.
    let now = cluster.now;
    cluster.run_for(PREEMPT_DELAY * 3);
    assert!(!cluster.any_leader_change(now));
}

/// RAFT-10: with `nopreempt`, the leader keeps leading when a voter's priority rises above
/// its own.
#[test]
fn raft10_nopreempt_keeps_the_leader() {
    let _log = log_to_test_output();
    let keeper = NodeSetup {
        nopreempt: true,
        ..prio(30)
    };
    let mut cluster = settled([prio(10), prio(20), keeper]);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    let raised = cluster.now;
    cluster.health(0, Some(250));
    cluster.run_for(PREEMPT_DELAY * 4);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    assert!(!cluster.any_leader_change(raised));
}

/// RAFT-10, RAFT-8: while an operator's `leader set` pin holds, a higher priority does not
/// move leadership.
#[test]
fn raft10_pin_blocks_preemption() {
    let _log = log_to_test_output();
    let mut cluster = settled([prio(10), prio(20), prio(30)]);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    cluster.command(2, Command::SetLeader(id("c")));
    let raised = cluster.now;
    cluster.health(0, Some(250));
    cluster.run_for(PREEMPT_DELAY * 4);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    assert!(!cluster.any_leader_change(raised));
    assert_eq!(
        cluster.nodes[0].as_ref().unwrap().manual_override(),
        Some(id("c"))
    );
}

/// RAFT-10 (keepalived's track script): a health reading that lowers the leader's priority
/// below a voter's moves leadership there after `preempt_delay`, to the highest voter.
#[test]
fn raft10_health_reading_lowering_the_leader_moves_leadership() {
    let _log = log_to_test_output();
    let mut cluster = settled([prio(200), prio(100), prio(50)]);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    let lowered = cluster.now;
    cluster.health(0, Some(5));
    cluster.run_for(PREEMPT_DELAY + HEARTBEAT + TIMEOUT_MIN);
    assert_eq!(cluster.agreed_leader(), Some("b"));
    let changes = cluster.leader_changes(0, lowered);
    assert_eq!(changes[0].2, LeaderChangeCause::Priority);
    assert!(changes[0].0 >= lowered + PREEMPT_DELAY);
    // The track script recovers: `a` is back at 200 and takes leadership back.
    let recovered = cluster.now;
    cluster.health(0, None);
    cluster.run_for(PREEMPT_DELAY + HEARTBEAT + TIMEOUT_MIN);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    assert_eq!(
        cluster.leader_changes(1, recovered)[0].2,
        LeaderChangeCause::Priority
    );
}

/// RAFT-10: a voter of higher priority whose log lags the leader's is never handed
/// leadership (nothing here can bring it up to date), and no transfer is even tried.
#[test]
fn raft10_lagging_voter_is_not_handed_leadership() {
    let _log = log_to_test_output();
    let log = LogPosition::new(1, 5);
    let with_log = |priority| NodeSetup {
        last_log: log,
        ..prio(priority)
    };
    let mut cluster = settled([with_log(20), prio(250), with_log(10)]);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    let now = cluster.now;
    cluster.run_for(PREEMPT_DELAY * 4);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    assert!(!cluster.any_leader_change(now));
    assert!(
        !cluster
            .published
            .iter()
            .any(|p| matches!(p.event, Event::TransferAborted { .. })),
        "a transfer to the lagging voter was tried"
    );
}
