//! RAFT-10 scenarios: three `Raft` machines on the harness's lossless network with a fixed latency,
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

mod support;

use std::time::Duration;

use conclave_core::Instant;
use conclave_core::election::{Command, Event, HardState, HealthReading, LeaderChangeCause};
use conclave_core::raft::{LogPosition, RaftConfig};
use conclave_core::testing::{id, raft_node};
use conclave_protocol::PeerId;
use support::RaftNetwork;

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

/// The three nodes on the shared harness's network, with what these scenarios ask of it.
struct Cluster {
    network: RaftNetwork,
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
                raft_node(config, HardState::default(), setup.last_log, n as u64 + 1)
            })
            .collect();
        Self {
            network: RaftNetwork::new(nodes, LATENCY),
        }
    }

    fn now(&self) -> Instant {
        self.network.now()
    }

    fn run_until(&mut self, until: Instant) {
        self.network.run_until(until);
    }

    fn run_for(&mut self, duration: Duration) {
        self.network.run_for(duration);
    }

    fn crash(&mut self, n: usize) {
        self.network.crash(n);
    }

    fn health(&mut self, n: usize, priority: Option<u8>) {
        self.network.input(n, |raft, now| {
            raft.handle_health(
                now,
                HealthReading {
                    battery_percent: 100,
                    priority,
                },
            );
        });
    }

    fn command(&mut self, n: usize, command: Command) {
        self.network
            .input(n, |raft, now| raft.handle_command(now, command))
            .unwrap();
    }

    /// The single leader every live node agrees on, if there is one.
    fn agreed_leader(&self) -> Option<&'static str> {
        self.network.agreed_leader().map(|n| NAMES[n])
    }

    /// Leader changes node `n` published at or after `since`: (time, leader, cause).
    fn leader_changes(
        &self,
        n: usize,
        since: Instant,
    ) -> Vec<(Instant, Option<PeerId>, LeaderChangeCause)> {
        self.network.leader_changes(n, since)
    }

    /// When node `n` first started a campaign (pre-vote or election) at or after `since`.
    fn first_campaign(&self, n: usize, since: Instant) -> Option<Instant> {
        self.network
            .published()
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
        let now = cluster.now();
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
    let lost = cluster.now();
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
    let raised = cluster.now();
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
    let now = cluster.now();
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
    let raised = cluster.now();
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
    let raised = cluster.now();
    cluster.health(0, Some(250));
    cluster.run_for(PREEMPT_DELAY * 4);
    assert_eq!(cluster.agreed_leader(), Some("c"));
    assert!(!cluster.any_leader_change(raised));
    assert_eq!(
        cluster.network.node(0).unwrap().manual_override(),
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
    let lowered = cluster.now();
    cluster.health(0, Some(5));
    cluster.run_for(PREEMPT_DELAY + HEARTBEAT + TIMEOUT_MIN);
    assert_eq!(cluster.agreed_leader(), Some("b"));
    let changes = cluster.leader_changes(0, lowered);
    assert_eq!(changes[0].2, LeaderChangeCause::Priority);
    assert!(changes[0].0 >= lowered + PREEMPT_DELAY);
    // The track script recovers: `a` is back at 200 and takes leadership back.
    let recovered = cluster.now();
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
    let now = cluster.now();
    cluster.run_for(PREEMPT_DELAY * 4);
    assert_eq!(cluster.agreed_leader(), Some("a"));
    assert!(!cluster.any_leader_change(now));
    assert!(
        !cluster
            .network
            .published()
            .iter()
            .any(|p| matches!(p.event, Event::TransferAborted { .. })),
        "a transfer to the lagging voter was tried"
    );
}
