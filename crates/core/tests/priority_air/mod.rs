//! A shared air for pods running [`Priority`]: virtual time, one radio medium where every
//! broadcast reaches every pod in range, RSSI per pair, and controls for loss, duplication,
//! reordering (random latency), partitions, crashes and restarts. `step` jumps to the next
//! delivery or timer, like raft-rs's harness and the crate's `sim` module.
//!
//! Invariants checked after every action, with the seed in every failure message:
//! - a round is durable before any message that carries it leaves its pod, and the durable
//!   round of a pod never goes back, across restarts too (CB-5);
//! - the fencing token a pod publishes never goes back: the round grows with every change of
//!   master, and stays or grows while the master stays (CB-5);
//! - a pod announces only while it is master, and only its own round.

#![allow(
    dead_code,
    reason = "each test file uses a different part of the harness"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use conclave_core::election::Outputs as _;
use conclave_core::election::{
    Command, CommandOutcome, ElectionError, ElectionMessage, Event, HardState, HealthReading,
    PeerSignal, PriorityMessage,
};
use conclave_core::priority::{Priority, PriorityConfig, PriorityState};
use conclave_core::testing::{Carried, carry};
use conclave_core::{Instant, SeededRng};
use conclave_protocol::PeerId;

/// Faults on every link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Faults {
    /// Probability that a frame is lost.
    pub(crate) loss: f64,
    /// Probability that a frame arrives twice.
    pub(crate) duplicate: f64,
    /// Latency range; a wide range reorders frames.
    pub(crate) latency_min: Duration,
    /// Upper bound (inclusive) of the latency.
    pub(crate) latency_max: Duration,
}

impl Faults {
    /// A perfect radio: 2 ms, nothing lost, duplicated or reordered.
    pub(crate) const NONE: Faults = Faults {
        loss: 0.0,
        duplicate: 0.0,
        latency_min: Duration::from_millis(2),
        latency_max: Duration::from_millis(2),
    };
}

/// One frame in flight.
#[derive(Debug, Clone)]
struct Delivery {
    from: usize,
    to: usize,
    message: PriorityMessage,
}

/// One pod of the air.
pub(crate) struct Pod {
    pub(crate) id: PeerId,
    pub(crate) config: PriorityConfig,
    pub(crate) machine: Option<Priority>,
    /// What its WAL holds.
    pub(crate) durable: HardState,
    pub(crate) battery: u8,
    /// Everything it published, with the time.
    pub(crate) events: Vec<(Instant, Event)>,
    /// Messages it sent, by kind label.
    pub(crate) sent: BTreeMap<&'static str, usize>,
    /// The last fencing token it published.
    last_token: Option<(u64, PeerId)>,
}

impl Pod {
    /// The state machine; panics if the pod is down.
    pub(crate) fn node(&self) -> &Priority {
        self.machine.as_ref().expect("pod is up")
    }

    pub(crate) fn is_up(&self) -> bool {
        self.machine.is_some()
    }

    /// The `LeaderChanged` events it published: (time, term, leader, cause).
    pub(crate) fn leader_changes(
        &self,
    ) -> Vec<(
        Instant,
        u64,
        Option<PeerId>,
        conclave_core::election::LeaderChangeCause,
    )> {
        self.events
            .iter()
            .filter_map(|(at, event)| match event {
                Event::LeaderChanged {
                    term,
                    leader,
                    cause,
                    ..
                } => Some((*at, *term, *leader, *cause)),
                _ => None,
            })
            .collect()
    }
}

/// The air and its pods.
pub(crate) struct Air {
    pub(crate) seed: u64,
    pub(crate) now: Instant,
    pub(crate) pods: Vec<Pod>,
    pub(crate) faults: Faults,
    rng: SeededRng,
    queue: BTreeMap<(Instant, u64), Delivery>,
    next_seq: u64,
    /// Partition group per pod; pods in different groups do not hear each other.
    groups: Vec<usize>,
    rssi: BTreeMap<(usize, usize), f64>,
    steps: u64,
    /// What happened, for the failure message.
    trace: Vec<String>,
}

const MAX_STEPS: u64 = 5_000_000;
const TRACE_KEEP: usize = 200;

fn kind(message: &PriorityMessage) -> &'static str {
    match message {
        PriorityMessage::Discover(_) => "discover",
        PriorityMessage::DiscoverAck(_) => "discover_ack",
        PriorityMessage::Candidate(_) => "candidate",
        PriorityMessage::Vote(_) => "vote",
        PriorityMessage::MasterAnnounce(_) => "master_announce",
        PriorityMessage::MasterResign(_) => "master_resign",
    }
}

fn round_of(message: &PriorityMessage) -> u64 {
    match message {
        PriorityMessage::Discover(m) => m.round,
        PriorityMessage::DiscoverAck(m) => m.round,
        PriorityMessage::Candidate(m) => m.round,
        PriorityMessage::Vote(m) => m.round,
        PriorityMessage::MasterAnnounce(m) => m.round,
        PriorityMessage::MasterResign(m) => m.round,
    }
}

impl Air {
    /// Pods `pod-0`..`pod-{n-1}`, none started; `tune` adjusts each pod's settings.
    pub(crate) fn new(
        seed: u64,
        batteries: &[u8],
        tune: impl Fn(usize, &mut PriorityConfig),
    ) -> Self {
        let pods = batteries
            .iter()
            .enumerate()
            .map(|(index, &battery)| {
                let id = PeerId::new(&format!("pod-{index}")).expect("valid id");
                let mut config = PriorityConfig::new(id);
                config.battery_percent = battery;
                tune(index, &mut config);
                Pod {
                    id,
                    config,
                    machine: None,
                    durable: HardState::default(),
                    battery,
                    events: Vec::new(),
                    sent: BTreeMap::new(),
                    last_token: None,
                }
            })
            .collect::<Vec<_>>();
        let count = pods.len();
        Self {
            seed,
            now: Instant::ZERO,
            pods,
            faults: Faults::NONE,
            rng: SeededRng::new(seed),
            queue: BTreeMap::new(),
            next_seq: 0,
            groups: vec![0; count],
            rssi: BTreeMap::new(),
            steps: 0,
            trace: Vec::new(),
        }
    }

    /// Starts (or restarts, from its WAL) every pod now.
    pub(crate) fn start_all(&mut self) {
        for index in 0..self.pods.len() {
            self.start(index);
        }
    }

    /// Starts pod `index` now from what its WAL holds; it hears its peers at the RSSI set
    /// for each pair and reads its battery.
    pub(crate) fn start(&mut self, index: usize) {
        let pod = &self.pods[index];
        assert!(pod.machine.is_none(), "pod {index} is already up");
        let durable = pod.durable;
        let machine = Priority::new(pod.config.clone(), durable, self.rng.fork(), self.now)
            .unwrap_or_else(|e| panic!("seed {}: pod {index}: {e}", self.seed));
        self.pods[index].machine = Some(machine);
        self.note(format!(
            "start pod-{index} (durable round {})",
            durable.term
        ));
        let now = self.now;
        let battery = self.pods[index].battery;
        let signals: Vec<PeerSignal> = self
            .rssi
            .iter()
            .filter(|((at, _), _)| *at == index)
            .map(|(&(_, peer), &rssi_dbm)| PeerSignal {
                peer: self.pods[peer].id,
                rssi_dbm,
            })
            .collect();
        let machine = self.pods[index].machine.as_mut().expect("just started");
        for signal in signals {
            machine.handle_peer_signal(now, signal);
        }
        machine.handle_health(
            now,
            HealthReading {
                battery_percent: battery,
                priority: None,
            },
        );
        self.carry_out(index);
    }

    /// Pod `index` loses power: no goodbye, frames to it are lost until it restarts.
    pub(crate) fn crash(&mut self, index: usize) {
        self.note(format!("crash pod-{index}"));
        self.pods[index].machine = None;
    }

    /// Pod `index` stops gracefully (a master resigns first), then is down.
    pub(crate) fn shutdown(&mut self, index: usize) {
        self.note(format!("shutdown pod-{index}"));
        let now = self.now;
        if let Some(machine) = self.pods[index].machine.as_mut() {
            machine.handle_shutdown(now);
            self.carry_out(index);
        }
        self.pods[index].machine = None;
    }

    /// The radio signal between two pods, both ways; fed to running pods at once.
    pub(crate) fn set_rssi(&mut self, a: usize, b: usize, rssi_dbm: f64) {
        self.rssi.insert((a, b), rssi_dbm);
        self.rssi.insert((b, a), rssi_dbm);
        let now = self.now;
        for (at, peer) in [(a, b), (b, a)] {
            let peer_id = self.pods[peer].id;
            if let Some(machine) = self.pods[at].machine.as_mut() {
                machine.handle_peer_signal(
                    now,
                    PeerSignal {
                        peer: peer_id,
                        rssi_dbm,
                    },
                );
            }
        }
    }

    /// Pod `index`'s battery now reads `percent`.
    pub(crate) fn set_battery(&mut self, index: usize, percent: u8) {
        self.note(format!("battery pod-{index} {percent}%"));
        self.pods[index].battery = percent;
        let now = self.now;
        if let Some(machine) = self.pods[index].machine.as_mut() {
            machine.handle_health(
                now,
                HealthReading {
                    battery_percent: percent,
                    priority: None,
                },
            );
            self.carry_out(index);
        }
    }

    /// An operator's command to pod `index`.
    pub(crate) fn command(
        &mut self,
        index: usize,
        command: Command,
    ) -> Result<CommandOutcome, ElectionError> {
        self.note(format!("command pod-{index} {command:?}"));
        let now = self.now;
        let outcome = self.pods[index]
            .machine
            .as_mut()
            .expect("pod is up")
            .handle_command(now, command);
        self.carry_out(index);
        outcome
    }

    /// Splits the air: `groups[i]` is pod i's group; pods of different groups do not hear
    /// each other.
    pub(crate) fn partition(&mut self, groups: &[usize]) {
        assert_eq!(groups.len(), self.pods.len());
        self.note(format!("partition {groups:?}"));
        self.groups = groups.to_vec();
    }

    /// Everyone hears everyone again.
    pub(crate) fn heal_partition(&mut self) {
        self.note("heal partition".to_owned());
        self.groups = vec![0; self.pods.len()];
    }

    /// Runs until `deadline`.
    pub(crate) fn run_until(&mut self, deadline: Instant) {
        while self.step_before(deadline) {}
        self.now = self.now.max(deadline);
    }

    /// Runs for `duration`.
    pub(crate) fn run_for(&mut self, duration: Duration) {
        let deadline = self.now + duration;
        self.run_until(deadline);
    }

    /// Runs until `condition` holds (checked after every step) or `deadline`; the time it
    /// first held.
    pub(crate) fn run_until_condition(
        &mut self,
        deadline: Instant,
        mut condition: impl FnMut(&Air) -> bool,
    ) -> Option<Instant> {
        loop {
            if condition(self) {
                return Some(self.now);
            }
            if !self.step_before(deadline) {
                self.now = self.now.max(deadline);
                return condition(self).then_some(self.now);
            }
        }
    }

    /// Pods that are up and master.
    pub(crate) fn masters(&self) -> Vec<usize> {
        (0..self.pods.len())
            .filter(|&i| self.pods[i].machine.as_ref().is_some_and(|m| m.is_leader()))
            .collect()
    }

    /// The one master every pod that is up follows or is, if there is one.
    pub(crate) fn agreed_master(&self) -> Option<usize> {
        let masters = self.masters();
        let [master] = masters[..] else {
            return None;
        };
        let master_id = self.pods[master].id;
        self.pods
            .iter()
            .filter_map(|pod| pod.machine.as_ref())
            .all(|machine| machine.leader() == Some(master_id))
            .then_some(master)
    }

    /// The index of the pod with this id.
    pub(crate) fn index_of(&self, id: PeerId) -> usize {
        self.pods
            .iter()
            .position(|pod| pod.id == id)
            .expect("a pod of the air")
    }

    /// The last lines of what happened, for a failure message.
    pub(crate) fn report(&self) -> String {
        let mut out = format!("seed {} at {:?}\n", self.seed, self.now);
        for (index, pod) in self.pods.iter().enumerate() {
            match &pod.machine {
                Some(machine) => {
                    let status = machine.status();
                    let _ = writeln!(
                        out,
                        "  pod-{index}: {} master={:?} round={} token={:?} score={:#010x} durable={}",
                        status.state,
                        status.master.map(|m| m.to_string()),
                        status.round,
                        status.fencing_token.map(|t| t.to_string()),
                        status.score,
                        pod.durable.term
                    );
                }
                None => {
                    let _ = writeln!(out, "  pod-{index}: down (durable {})", pod.durable.term);
                }
            }
        }
        for line in &self.trace {
            let _ = writeln!(out, "  | {line}");
        }
        out
    }

    // -----------------------------------------------------------------------------------------

    fn note(&mut self, line: String) {
        if self.trace.len() >= TRACE_KEEP {
            self.trace.remove(0);
        }
        let stamped = format!("{:?} {line}", self.now);
        self.trace.push(stamped);
    }

    /// One delivery or timer no later than `deadline`; `false` when there is none.
    fn step_before(&mut self, deadline: Instant) -> bool {
        self.steps += 1;
        assert!(
            self.steps < MAX_STEPS,
            "livelock: {MAX_STEPS} steps\n{}",
            self.report()
        );
        let next_delivery = self.queue.keys().next().map(|&(at, _)| at);
        let next_timer = self
            .pods
            .iter()
            .enumerate()
            .filter_map(|(i, pod)| {
                pod.machine
                    .as_ref()
                    .and_then(|m| m.poll_timeout())
                    .map(|at| (at, i))
            })
            .min();
        let delivery_first = match (next_delivery, next_timer) {
            (None, None) => return false,
            (Some(d), Some((t, _))) => d <= t,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        if delivery_first {
            let (&key, _) = self.queue.iter().next().expect("a delivery");
            if key.0 > deadline {
                return false;
            }
            let delivery = self.queue.remove(&key).expect("a delivery");
            self.now = self.now.max(key.0);
            self.deliver(delivery);
        } else {
            let (at, index) = next_timer.expect("a timer");
            if at > deadline {
                return false;
            }
            self.now = self.now.max(at);
            let now = self.now;
            self.pods[index]
                .machine
                .as_mut()
                .expect("up")
                .handle_timeout(now);
            self.carry_out(index);
        }
        true
    }

    fn deliver(&mut self, delivery: Delivery) {
        let from = self.pods[delivery.from].id;
        let now = self.now;
        let Some(machine) = self.pods[delivery.to].machine.as_mut() else {
            return;
        };
        machine.handle_message(now, from, delivery.message);
        self.carry_out(delivery.to);
    }

    /// Carries out everything pod `index` queued, checking the invariants.
    fn carry_out(&mut self, index: usize) {
        loop {
            let Some(action) = self.pods[index]
                .machine
                .as_mut()
                .and_then(|m| m.poll_action())
            else {
                return;
            };
            match carry(action) {
                Carried::Durable { hard, .. } => {
                    let durable = self.pods[index].durable;
                    assert!(
                        hard.term >= durable.term,
                        "CB-5: pod-{index} persisted round {} after {}\n{}",
                        hard.term,
                        durable.term,
                        self.report()
                    );
                    self.pods[index].durable = hard;
                }
                Carried::Local(_) => {}
                Carried::Message {
                    to: Some(to),
                    message,
                } => {
                    let ElectionMessage::Priority(message) = message else {
                        panic!("pod-{index} sent a non-priority message");
                    };
                    self.check_sent(index, &message);
                    let to = self.index_of(to);
                    self.transmit(index, to, message);
                }
                Carried::Message { to: None, message } => {
                    let ElectionMessage::Priority(message) = message else {
                        panic!("pod-{index} broadcast a non-priority message");
                    };
                    self.check_sent(index, &message);
                    for to in 0..self.pods.len() {
                        if to != index {
                            self.transmit(index, to, message.clone());
                        }
                    }
                }
                Carried::Event(event) => self.publish(index, event),
                Carried::Stopped => {
                    self.pods[index].machine = None;
                    return;
                }
            }
        }
    }

    fn check_sent(&mut self, index: usize, message: &PriorityMessage) {
        let round = round_of(message);
        let durable = self.pods[index].durable.term;
        assert!(
            round <= durable,
            "CB-5: pod-{index} sent {} with round {round} before persisting it (durable {durable})\n{}",
            kind(message),
            self.report()
        );
        if let PriorityMessage::MasterAnnounce(announce) = message {
            let machine = self.pods[index].node();
            assert!(
                machine.is_leader() && machine.term() == announce.round,
                "pod-{index} announced round {} while not master of it\n{}",
                announce.round,
                self.report()
            );
        }
        *self.pods[index].sent.entry(kind(message)).or_default() += 1;
        self.note(format!("pod-{index} sends {message:?}"));
    }

    fn publish(&mut self, index: usize, event: Event) {
        let now = self.now;
        if let Event::LeaderChanged { term, leader, .. } = &event {
            self.note(format!("pod-{index} {event:?}"));
            if let Some(leader) = *leader {
                if let Some((last_term, last_leader)) = self.pods[index].last_token {
                    let grows = if leader == last_leader {
                        *term >= last_term
                    } else {
                        *term > last_term
                    };
                    assert!(
                        grows,
                        "CB-5: pod-{index}'s fencing token went from {last_term}:{last_leader} to \
                         {term}:{leader}\n{}",
                        self.report()
                    );
                }
                self.pods[index].last_token = Some((*term, leader));
            }
        }
        self.pods[index].events.push((now, event));
    }

    fn transmit(&mut self, from: usize, to: usize, message: PriorityMessage) {
        if self.groups[from] != self.groups[to] || self.rng.chance(self.faults.loss) {
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let latency = self.rng.duration_between(
                self.faults.latency_min,
                self.faults.latency_max + Duration::from_micros(1),
            );
            let key = (self.now + latency, self.next_seq);
            self.next_seq += 1;
            self.queue.insert(
                key,
                Delivery {
                    from,
                    to,
                    message: message.clone(),
                },
            );
        }
    }
}

/// The pods in `state`, among those up.
pub(crate) fn in_state(air: &Air, state: PriorityState) -> BTreeSet<usize> {
    (0..air.pods.len())
        .filter(|&i| {
            air.pods[i]
                .machine
                .as_ref()
                .is_some_and(|m| m.state() == state)
        })
        .collect()
}
