//! The simulated network: messages in flight with seeded delay, loss, duplication and
//! reordering, partitions and cut links. Everything it decides comes from the simulation's
//! RNG, so a seed replays the same deliveries in the same order.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::time::Duration;

use conclave_protocol::Body;

use conclave_core::Instant;
use conclave_core::SeededRng;
use conclave_core::admission::FrameHeader;

/// How the network misbehaves. The defaults describe a healthy LAN.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// Shortest one-way delay.
    pub delay_min: Duration,
    /// Longest one-way delay; delays are uniform in between, which also reorders messages.
    pub delay_max: Duration,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            delay_min: Duration::from_micros(500),
            delay_max: Duration::from_millis(5),
            loss: 0.0,
            duplicate: 0.0,
        }
    }
}

/// One message in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// What the envelope says: sender id, addressee, incarnation and sequence number.
    pub(crate) header: FrameHeader,
    pub(crate) body: Body,
}

/// Ordering key of the in-flight heap: arrival time, then the order of sending, so equal
/// arrival times resolve the same way in every run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    at: Instant,
    sequence: u64,
}

#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) config: NetworkConfig,
    in_flight: BinaryHeap<Reverse<(Slot, usize)>>,
    /// Payloads indexed by the heap entries (kept apart so the heap never compares bodies).
    payloads: Vec<Option<Delivery>>,
    free_slots: Vec<usize>,
    sequence: u64,
    /// Partition group of each node; messages cross only within a group.
    groups: Vec<u32>,
    /// Directed links that drop everything.
    cut: BTreeSet<(usize, usize)>,
    /// Messages handed to the network, delivered or not.
    pub(crate) sent: u64,
}

impl Network {
    pub(crate) fn new(nodes: usize, config: NetworkConfig) -> Self {
        Self {
            config,
            in_flight: BinaryHeap::new(),
            payloads: Vec::new(),
            free_slots: Vec::new(),
            sequence: 0,
            groups: vec![0; nodes],
            cut: BTreeSet::new(),
            sent: 0,
        }
    }

    pub(crate) fn reachable(&self, from: usize, to: usize) -> bool {
        self.groups[from] == self.groups[to] && !self.cut.contains(&(from, to))
    }

    /// Puts a message on the wire; the network decides whether and when it arrives.
    pub(crate) fn send(&mut self, now: Instant, rng: &mut SeededRng, delivery: Delivery) {
        self.sent += 1;
        if !self.reachable(delivery.from, delivery.to) || rng.chance(self.config.loss) {
            return;
        }
        let copies = if rng.chance(self.config.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = rng.duration_between(self.config.delay_min, self.config.delay_max);
            self.enqueue(now + delay, delivery.clone());
        }
    }

    fn enqueue(&mut self, at: Instant, delivery: Delivery) {
        let index = match self.free_slots.pop() {
            Some(index) => {
                self.payloads[index] = Some(delivery);
                index
            }
            None => {
                self.payloads.push(Some(delivery));
                self.payloads.len() - 1
            }
        };
        self.sequence += 1;
        self.in_flight.push(Reverse((
            Slot {
                at,
                sequence: self.sequence,
            },
            index,
        )));
    }

    /// When the next message arrives.
    pub(crate) fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse((slot, _))| slot.at)
    }

    /// The next message due at or before `now`. A partition that formed while it was in
    /// flight still drops it: the link is down when it arrives.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Delivery> {
        loop {
            let Reverse((slot, _)) = self.in_flight.peek()?;
            if slot.at > now {
                return None;
            }
            let Reverse((_, index)) = self.in_flight.pop()?;
            let payload = self.payloads[index].take();
            self.free_slots.push(index);
            let Some(delivery) = payload else {
                // Lost on the way (see `drop_in_flight_to`).
                continue;
            };
            if self.reachable(delivery.from, delivery.to) {
                return Some(delivery);
            }
        }
    }

    /// Loses every message on its way to `to` (its receiver went down for longer than they
    /// were delayed).
    pub(crate) fn drop_in_flight_to(&mut self, to: usize) {
        for payload in &mut self.payloads {
            if payload.as_ref().is_some_and(|delivery| delivery.to == to) {
                // The heap entry stays until it is due; `pop_due` then skips it and frees the
                // slot, so no later message can be delivered through the stale entry.
                *payload = None;
            }
        }
    }

    /// Splits the nodes: `groups[i]` is node `i`'s side.
    pub(crate) fn partition(&mut self, groups: Vec<u32>) {
        self.groups = groups;
    }

    /// Heals every partition and cut link.
    pub(crate) fn heal(&mut self) {
        self.groups.iter_mut().for_each(|group| *group = 0);
        self.cut.clear();
    }

    /// Drops everything from `from` to `to` (one direction).
    pub(crate) fn cut(&mut self, from: usize, to: usize) {
        self.cut.insert((from, to));
    }

    pub(crate) fn group_of(&self, node: usize) -> u32 {
        self.groups[node]
    }

    /// One more node, on the side of everyone who is not partitioned away.
    pub(crate) fn add_node(&mut self) {
        self.groups.push(0);
    }
}
