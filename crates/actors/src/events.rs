//! What a node tells the world (CB-1, CB-5, MEM-5, MEMB-1): leader changes, peer status
//! changes and changes of the log's cluster configuration, published on an [`EventBus`] that
//! in-process subscribers, the hook runner and the admin API's event stream read.
//!
//! The bus is bounded: a subscriber that falls behind loses the oldest events, the loss is
//! logged and counted in `conclave_events_lagged_total{subscriber}`, and the subscriber goes
//! on with the newest. The node's state (status, peer table) stays the truth and can always be
//! read whole, so a lagging subscriber re-reads it rather than relying on every event.
//!
//! Every event gets a sequence number, from 1 in each run of the node, and the bus keeps the
//! last [`EVENT_BUS_CAPACITY`] of them, so that a reader who reconnects (the admin API's event
//! stream with `Last-Event-ID`) resumes after the last event it saw
//! ([`EventBus::subscribe_after`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use conclave_core::PeerStatus;
use conclave_core::election::{LeaderChangeCause, Role};
use conclave_protocol::PeerId;
use tokio::sync::broadcast;
use tracing::warn;

use crate::metrics::NodeMetrics;

/// Events a slow subscriber may fall behind by before it loses the oldest.
pub const EVENT_BUS_CAPACITY: usize = 256;

/// Milliseconds since the Unix epoch, for timestamps that leave the process.
pub fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The known leader changed (RAFT-9). `(term, leader)` is the fencing token (CB-5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderChange {
    /// The node's term.
    pub term: u64,
    /// The new leader, if any.
    pub leader: Option<PeerId>,
    /// The last leader this node knew before this change, kept through leaderless stretches
    /// and across restarts (from the leadership history): `None` only when it never knew one.
    pub previous: Option<PeerId>,
    /// This node led until this change: a transition out of leader (quorum lost, higher
    /// term, resignation, transfer, quarantine, shutdown), whatever the new leader is.
    pub stepped_down: bool,
    /// This node's role now.
    pub role: Role,
    /// Why (CB-6).
    pub cause: LeaderChangeCause,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// A peer joined, left, or changed status (MEM-5). `None` means "not in the table".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerChange {
    /// The peer.
    pub peer: PeerId,
    /// Status before (`None`: it just joined).
    pub old: Option<PeerStatus>,
    /// Status now (`None`: it left).
    pub new: Option<PeerStatus>,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// What a node is in a configuration of the log's cluster (MEMB-1, MEMB-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberRole {
    /// It votes and counts toward commit.
    Voter,
    /// It receives the log and neither votes nor counts.
    Learner,
    /// It is not in the configuration: never added, or removed.
    None,
}

impl MemberRole {
    /// What `node` is in a configuration of `voters` and `learners`.
    pub fn of(node: PeerId, voters: &[PeerId], learners: &[PeerId]) -> Self {
        if voters.contains(&node) {
            Self::Voter
        } else if learners.contains(&node) {
            Self::Learner
        } else {
            Self::None
        }
    }

    /// The name the event stream and `CONCLAVE_MEMBERSHIP` give it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Voter => "voter",
            Self::Learner => "learner",
            Self::None => "none",
        }
    }
}

/// The configuration of the log's cluster this node acts on changed (MEMB-1): a configuration
/// entry reached its log (acted on at once, committed or not), or a truncation took one away
/// and the one before it is back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipChange {
    /// The index of the entry that carries it; the snapshot's when it came with one, 0 for the
    /// configuration `cluster.voters` seeds.
    pub index: u64,
    /// Its voters, ascending.
    pub voters: Vec<PeerId>,
    /// Its learners, ascending.
    pub learners: Vec<PeerId>,
    /// What this node is in it.
    pub role: MemberRole,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

/// Something a node publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    /// The known leader changed.
    LeaderChanged(LeaderChange),
    /// A peer's status changed.
    PeerStatusChanged(PeerChange),
    /// The configuration of the log's cluster changed.
    MembershipChanged(MembershipChange),
}

impl NodeEvent {
    /// The event's name in the event stream and in `CONCLAVE_EVENT`.
    pub fn name(&self) -> &'static str {
        match self {
            NodeEvent::LeaderChanged(_) => "leader_changed",
            NodeEvent::PeerStatusChanged(_) => "peer_status_changed",
            NodeEvent::MembershipChanged(_) => "membership_changed",
        }
    }

    /// The event as the admin API's event stream sends it.
    pub fn to_api(&self) -> conclave_api::StreamEvent {
        match self {
            NodeEvent::LeaderChanged(change) => {
                conclave_api::StreamEvent::LeaderChanged(conclave_api::LeaderChangedEvent {
                    term: change.term,
                    leader: change.leader.map(|l| l.to_string()),
                    previous_leader: change.previous.map(|l| l.to_string()),
                    stepped_down: change.stepped_down,
                    role: change.role.label().to_owned(),
                    cause: change.cause.label().to_owned(),
                    fencing_token: change.leader.map(|l| format!("{}:{l}", change.term)),
                    at_unix_ms: change.at_unix_ms,
                })
            }
            NodeEvent::PeerStatusChanged(change) => {
                conclave_api::StreamEvent::PeerStatusChanged(conclave_api::PeerStatusChangedEvent {
                    peer_id: change.peer.to_string(),
                    old: change.old.map(|status| status.label().to_owned()),
                    new: change.new.map(|status| status.label().to_owned()),
                    at_unix_ms: change.at_unix_ms,
                })
            }
            NodeEvent::MembershipChanged(change) => {
                let names = |ids: &[PeerId]| ids.iter().map(ToString::to_string).collect();
                conclave_api::StreamEvent::MembershipChanged(conclave_api::MembershipChangedEvent {
                    index: change.index,
                    voters: names(&change.voters),
                    learners: names(&change.learners),
                    member: change.role != MemberRole::None,
                    membership: change.role.label().to_owned(),
                    at_unix_ms: change.at_unix_ms,
                })
            }
        }
    }
}

/// An event with its sequence number on the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Numbered {
    /// From 1 in each run of the node.
    pub seq: u64,
    /// The event.
    pub event: NodeEvent,
}

/// The node's event bus: a bounded broadcast, with the last events kept for readers that
/// resume.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Numbered>,
    metrics: NodeMetrics,
    /// Events published so far, so that a subscriber can tell whether it has seen them all;
    /// also the last sequence number given.
    published: Arc<AtomicU64>,
    /// The last events, oldest first. Publishing holds the lock while it numbers, keeps and
    /// sends an event, so that a reader who subscribes under it misses and repeats nothing.
    kept: Arc<Mutex<VecDeque<Numbered>>>,
}

/// What a reader who resumes after an event gets: the kept events after it, how many it
/// missed beyond those, and its subscription to what comes next.
#[derive(Debug)]
pub struct Resumed {
    /// Kept events after the one asked for, oldest first.
    pub backlog: Vec<Numbered>,
    /// Events after the one asked for that are no longer kept.
    pub missed: u64,
    /// Events from after the backlog on.
    pub subscription: EventSubscription,
}

impl EventBus {
    /// A bus of [`EVENT_BUS_CAPACITY`] events.
    pub fn new(metrics: NodeMetrics) -> Self {
        let (sender, _) = broadcast::channel(EVENT_BUS_CAPACITY);
        Self {
            sender,
            metrics,
            published: Arc::new(AtomicU64::new(0)),
            kept: Arc::new(Mutex::new(VecDeque::with_capacity(EVENT_BUS_CAPACITY))),
        }
    }

    /// Publishes to every current subscriber; nobody listening is fine.
    pub fn publish(&self, event: NodeEvent) {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        // Counted before the send: a subscriber that sees the event also sees the count.
        let seq = self.published.fetch_add(1, Ordering::SeqCst) + 1;
        let numbered = Numbered { seq, event };
        if kept.len() == EVENT_BUS_CAPACITY {
            kept.pop_front();
        }
        kept.push_back(numbered.clone());
        let _ = self.sender.send(numbered);
    }

    /// A new subscriber named `name` that resumes after event `after`: the kept events after
    /// it first, then those published from now on, none twice and none left out between.
    pub fn subscribe_after(&self, name: impl Into<String>, after: u64) -> Resumed {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let subscription = self.subscribe(name);
        let backlog: Vec<Numbered> = kept.iter().filter(|e| e.seq > after).cloned().collect();
        let last = self.published.load(Ordering::SeqCst);
        let missed = last
            .saturating_sub(after)
            .saturating_sub(backlog.len() as u64);
        Resumed {
            backlog,
            missed,
            subscription,
        }
    }

    /// The sequence number of the last event published; 0 before any.
    pub fn last_seq(&self) -> u64 {
        self.published.load(Ordering::SeqCst)
    }

    /// A new subscriber named `name` (the `subscriber` label of lag metrics), seeing events
    /// published from now on.
    pub fn subscribe(&self, name: impl Into<String>) -> EventSubscription {
        let receiver = self.sender.subscribe();
        EventSubscription {
            name: name.into(),
            receiver,
            metrics: self.metrics.clone(),
            progress: BusProgress {
                base: self.published.load(Ordering::SeqCst),
                published: Arc::clone(&self.published),
            },
        }
    }
}

/// How many events were published on a bus since one subscription was made: what that
/// subscriber has to have received (or been told it lost) to be caught up.
#[derive(Debug, Clone)]
pub(crate) struct BusProgress {
    base: u64,
    published: Arc<AtomicU64>,
}

impl BusProgress {
    /// Events published since the subscription was made.
    pub(crate) fn published_since(&self) -> u64 {
        self.published
            .load(Ordering::SeqCst)
            .saturating_sub(self.base)
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// The next event.
    Event(NodeEvent),
    /// The subscriber fell behind and lost this many of the oldest events; already logged
    /// and counted. Re-read the node's state if completeness matters.
    Lagged(u64),
}

/// One subscriber's end of the bus.
#[derive(Debug)]
pub struct EventSubscription {
    name: String,
    receiver: broadcast::Receiver<Numbered>,
    metrics: NodeMetrics,
    progress: BusProgress,
}

impl EventSubscription {
    /// The next event, or the news that some were lost; `None` once the node stopped.
    pub async fn recv(&mut self) -> Option<Received> {
        self.recv_numbered().await.map(|(_, received)| received)
    }

    /// The same with the event's sequence number (`None` for a loss).
    pub async fn recv_numbered(&mut self) -> Option<(Option<u64>, Received)> {
        match self.receiver.recv().await {
            Ok(numbered) => Some((Some(numbered.seq), Received::Event(numbered.event))),
            Err(broadcast::error::RecvError::Lagged(missed)) => Some((None, self.lagged(missed))),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next event if one is already there, without waiting; `None` when there is none
    /// yet or the node stopped.
    pub fn try_recv(&mut self) -> Option<Received> {
        match self.receiver.try_recv() {
            Ok(numbered) => Some(Received::Event(numbered.event)),
            Err(broadcast::error::TryRecvError::Lagged(missed)) => Some(self.lagged(missed)),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed) => {
                None
            }
        }
    }

    fn lagged(&self, missed: u64) -> Received {
        warn!(
            subscriber = %self.name,
            missed,
            "event subscriber fell behind; the oldest events were dropped"
        );
        self.metrics.events_lagged(&self.name, missed);
        Received::Lagged(missed)
    }

    /// What this subscriber must have received to be caught up with the bus.
    pub(crate) fn progress(&self) -> BusProgress {
        self.progress.clone()
    }

    /// The subscriber's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
