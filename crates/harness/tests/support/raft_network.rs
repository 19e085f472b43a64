//! [`RaftNetwork`]: a few raft nodes on a lossless network with a fixed one-way latency,
//! driven on virtual time the way the ElectionActor drives one node (inputs in, actions
//! drained, `poll_timeout` for the next wake-up), for scenarios of RAFT-1..10 that need more
//! than one node but not the whole simulator (`conclave_harness::sim`).

use std::collections::BTreeSet;
use std::time::Duration;

use conclave_protocol::PeerId;

use conclave_core::Instant;
use conclave_core::election::{ElectionMessage, Event, LeaderChangeCause};
use conclave_core::raft::{Raft, RaftMessage};
use conclave_core::testing::{Carried, carry};

/// Something a node published, and when.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Published {
    /// When it was published.
    pub(crate) at: Instant,
    /// The index of the node that published it.
    pub(crate) node: usize,
    /// What it published.
    pub(crate) event: Event,
}

/// A message on its way.
#[derive(Debug)]
struct InFlight {
    deliver_at: Instant,
    /// Sending order: of two messages due at once, the one sent first arrives first.
    seq: u64,
    from: usize,
    to: usize,
    message: RaftMessage,
}

/// Raft nodes, indexed from 0 in the order given, on a network where every message arrives
/// after the same latency unless its sender or addressee is crashed or isolated. Each input
/// is followed by draining the node: its messages leave, its events are kept with the time
/// ([`RaftNetwork::published`]); persists are taken as durable at once.
#[derive(Debug)]
pub(crate) struct RaftNetwork {
    ids: Vec<PeerId>,
    /// `None` once crashed.
    nodes: Vec<Option<Raft>>,
    now: Instant,
    latency: Duration,
    in_flight: Vec<InFlight>,
    seq: u64,
    published: Vec<Published>,
    isolated: BTreeSet<usize>,
}

impl RaftNetwork {
    /// A network of `nodes`, all started at time zero, whose messages take `latency`.
    pub(crate) fn new(nodes: Vec<Raft>, latency: Duration) -> Self {
        Self {
            ids: nodes.iter().map(Raft::id).collect(),
            nodes: nodes.into_iter().map(Some).collect(),
            now: Instant::ZERO,
            latency,
            in_flight: Vec::new(),
            seq: 0,
            published: Vec::new(),
            isolated: BTreeSet::new(),
        }
    }

    /// The current virtual time.
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// Node `n`, unless it crashed.
    pub(crate) fn node(&self, n: usize) -> Option<&Raft> {
        self.nodes[n].as_ref()
    }

    /// The index of the node named `id`; panics if there is none.
    pub(crate) fn index(&self, id: PeerId) -> usize {
        self.ids
            .iter()
            .position(|known| *known == id)
            .unwrap_or_else(|| panic!("{id} is not on the network"))
    }

    /// Everything published so far, in order.
    pub(crate) fn published(&self) -> &[Published] {
        &self.published
    }

    /// Feeds node `n` one input at the current time (`input(node, now)`), then carries out
    /// what it queued; panics if the node crashed.
    pub(crate) fn input<R>(&mut self, n: usize, input: impl FnOnce(&mut Raft, Instant) -> R) -> R {
        let now = self.now;
        let raft = self.nodes[n]
            .as_mut()
            .unwrap_or_else(|| panic!("node {n} crashed"));
        let result = input(raft, now);
        self.drain(n);
        result
    }

    /// Node `n` stops at once, as in a crash: it takes no more input, and what was on its way
    /// to it is lost.
    pub(crate) fn crash(&mut self, n: usize) {
        self.nodes[n] = None;
        self.in_flight.retain(|message| message.to != n);
    }

    /// Cuts node `n` off: what it sends and what is sent to it is lost, including what is on
    /// its way now, until [`RaftNetwork::recover`].
    pub(crate) fn isolate(&mut self, n: usize) {
        self.isolated.insert(n);
        self.in_flight
            .retain(|message| message.from != n && message.to != n);
    }

    /// Ends every isolation.
    pub(crate) fn recover(&mut self) {
        self.isolated.clear();
    }

    /// Runs every input due up to `until`, in time order, and leaves the clock at `until`. A
    /// message due at the same time as a timer is delivered first.
    pub(crate) fn run_until(&mut self, until: Instant) {
        loop {
            let next_message = self
                .in_flight
                .iter()
                .map(|message| (message.deliver_at, message.seq))
                .min();
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
                    let Some(position) = self.in_flight.iter().position(|m| m.seq == seq) else {
                        unreachable!("the earliest message is in flight");
                    };
                    let message = self.in_flight.swap_remove(position);
                    let from = self.ids[message.from];
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

    /// Runs for `duration` of virtual time.
    pub(crate) fn run_for(&mut self, duration: Duration) {
        self.run_until(self.now + duration);
    }

    /// The index of the single leader every live node agrees on (same leader, same term), if
    /// there is one.
    pub(crate) fn agreed_leader(&self) -> Option<usize> {
        let live: Vec<&Raft> = self.nodes.iter().flatten().collect();
        let leaders: Vec<&Raft> = live.iter().copied().filter(|r| r.is_leader()).collect();
        let [leader] = leaders.as_slice() else {
            return None;
        };
        live.iter()
            .all(|r| r.leader() == Some(leader.id()) && r.term() == leader.term())
            .then(|| self.index(leader.id()))
    }

    /// Leader changes node `n` published at or after `since`: (time, leader, cause).
    pub(crate) fn leader_changes(
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

    /// Carries out what node `n` queued: messages leave with the latency, events are kept.
    fn drain(&mut self, n: usize) {
        let Some(raft) = self.nodes[n].as_mut() else {
            return;
        };
        let actions = conclave_core::testing::drain(raft);
        for action in actions {
            match carry(action) {
                Carried::Message {
                    to: Some(to),
                    message: ElectionMessage::Raft(message),
                } => {
                    let to = self.index(to);
                    self.transmit(n, to, message);
                }
                Carried::Message { to, message } => {
                    panic!("raft sent a message of another mode (to {to:?}): {message:?}")
                }
                Carried::Event(event) => self.published.push(Published {
                    at: self.now,
                    node: n,
                    event,
                }),
                Carried::Durable { .. } | Carried::Stopped | Carried::Local(_) => {}
            }
        }
    }

    fn transmit(&mut self, from: usize, to: usize, message: RaftMessage) {
        if self.isolated.contains(&from) || self.isolated.contains(&to) {
            return;
        }
        self.seq += 1;
        self.in_flight.push(InFlight {
            deliver_at: self.now + self.latency,
            seq: self.seq,
            from,
            to,
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_core::election::HardState;
    use conclave_core::raft::LogPosition;
    use conclave_core::testing::{raft_config, raft_node};

    const NAMES: [&str; 3] = ["a", "b", "c"];

    fn three() -> RaftNetwork {
        let nodes = NAMES
            .iter()
            .zip(1..)
            .map(|(me, seed)| {
                raft_node(
                    raft_config(me, &NAMES),
                    HardState::default(),
                    LogPosition::default(),
                    seed,
                )
            })
            .collect();
        RaftNetwork::new(nodes, Duration::from_millis(5))
    }

    /// RAFT-2, RAFT-5: the harness's own check: three nodes agree on a leader; with the leader
    /// isolated, the other two elect another in a later term; after recovery all three agree
    /// again.
    #[test]
    fn isolating_the_leader_moves_leadership_and_recovery_reunites() {
        let mut network = three();
        network.run_for(Duration::from_secs(2));
        let first = network.agreed_leader().expect("a leader after start");
        let first_term = network.node(first).map(Raft::term);

        network.isolate(first);
        network.run_for(Duration::from_secs(2));
        let others: Vec<&Raft> = (0..3)
            .filter(|n| *n != first)
            .filter_map(|n| network.node(n))
            .collect();
        let second = others[0].leader().expect("the majority elects a leader");
        assert_ne!(second, network.ids[first]);
        assert_eq!(others[1].leader(), Some(second));
        assert!(Some(others[0].term()) > first_term);

        network.recover();
        network.run_for(Duration::from_secs(2));
        assert!(network.agreed_leader().is_some());
    }
}
