//! What a node tells the world (CB-1, CB-5, MEM-5): leader changes and peer status changes,
//! published on an [`EventBus`] that in-process subscribers, the hook runner and the admin
//! API's event stream read.
//!
//! The bus is bounded: a subscriber that falls behind loses the oldest events, the loss is
//! logged and counted in `conclave_events_lagged_total{subscriber}`, and the subscriber goes
//! on with the newest. The node's state (status, peer table) stays the truth and can always be
//! read whole, so a lagging subscriber re-reads it rather than relying on every event.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use conclave_core::PeerStatus;
use conclave_core::election::{LeaderChangeCause, Role};
use conclave_protocol::PeerId;
use serde_json::{Value, json};
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

/// Something a node publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    /// The known leader changed.
    LeaderChanged(LeaderChange),
    /// A peer's status changed.
    PeerStatusChanged(PeerChange),
}

fn status_label(status: Option<PeerStatus>) -> Value {
    status.map_or(Value::Null, |s| Value::from(s.label()))
}

impl NodeEvent {
    /// The event's name in the event stream and in `CONCLAVE_EVENT`.
    pub fn name(&self) -> &'static str {
        match self {
            NodeEvent::LeaderChanged(_) => "leader_changed",
            NodeEvent::PeerStatusChanged(_) => "peer_status_changed",
        }
    }

    /// The event as JSON, as the admin API's event stream sends it.
    pub fn to_json(&self) -> Value {
        match self {
            NodeEvent::LeaderChanged(change) => json!({
                "event": self.name(),
                "term": change.term,
                "leader": change.leader.map(|l| l.to_string()),
                "previous_leader": change.previous.map(|l| l.to_string()),
                "stepped_down": change.stepped_down,
                "role": change.role.label(),
                "cause": change.cause.label(),
                "fencing_token": change.leader.map(|l| format!("{}:{l}", change.term)),
                "at_unix_ms": change.at_unix_ms,
            }),
            NodeEvent::PeerStatusChanged(change) => json!({
                "event": self.name(),
                "peer_id": change.peer.to_string(),
                "old": status_label(change.old),
                "new": status_label(change.new),
                "at_unix_ms": change.at_unix_ms,
            }),
        }
    }
}

/// The node's event bus: a bounded broadcast.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<NodeEvent>,
    metrics: NodeMetrics,
    /// Events published so far, so that a subscriber can tell whether it has seen them all.
    published: Arc<AtomicU64>,
}

impl EventBus {
    /// A bus of [`EVENT_BUS_CAPACITY`] events.
    pub fn new(metrics: NodeMetrics) -> Self {
        let (sender, _) = broadcast::channel(EVENT_BUS_CAPACITY);
        Self {
            sender,
            metrics,
            published: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Publishes to every current subscriber; nobody listening is fine.
    pub fn publish(&self, event: NodeEvent) {
        // Counted before the send: a subscriber that sees the event also sees the count.
        self.published.fetch_add(1, Ordering::SeqCst);
        let _ = self.sender.send(event);
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
    receiver: broadcast::Receiver<NodeEvent>,
    metrics: NodeMetrics,
    progress: BusProgress,
}

impl EventSubscription {
    /// The next event, or the news that some were lost; `None` once the node stopped.
    pub async fn recv(&mut self) -> Option<Received> {
        match self.receiver.recv().await {
            Ok(event) => Some(Received::Event(event)),
            Err(broadcast::error::RecvError::Lagged(missed)) => Some(self.lagged(missed)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next event if one is already there, without waiting; `None` when there is none
    /// yet or the node stopped.
    pub fn try_recv(&mut self) -> Option<Received> {
        match self.receiver.try_recv() {
            Ok(event) => Some(Received::Event(event)),
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
