//! In-process subscribers of a node's events (CB-1, EMB-1, MEMB-1): leader changes with their
//! fencing token, peer status changes, changes of the log cluster's configuration, and the
//! count of events a slow subscriber lost.
//!
//! A [`Subscription`] reads the node's bounded event bus (seed 000's broadcast channel of 256
//! events). A subscriber that falls further behind than that loses the oldest events and is
//! told how many with [`Event::Lagged`]; it never makes the node hold more. The node's state
//! stays readable whole ([`crate::Node::leader`], [`crate::Node::peers`]), which is what a
//! lagging subscriber re-reads.
//!
//! The same subscription serves an async program (it is a [`Stream`], and has
//! [`Subscription::recv`]) and a program without a runtime ([`Subscription::into_iter`]
//! blocks the calling thread for each event).

use std::pin::Pin;
use std::sync::mpsc::RecvTimeoutError;
use std::task::{Context, Poll};
use std::time::Duration;

use conclave_actors::events::{EventSubscription, NodeEvent, Received};
use futures_util::{Stream, StreamExt, stream};

use crate::block::{block_on, block_on_within};

pub use conclave_actors::events::{LeaderChange, MemberRole, MembershipChange, PeerChange};

/// What a subscriber receives.
///
/// ```no_run
/// # fn demo(node: &conclave::Node) {
/// for event in node.subscribe() {
///     match event {
///         conclave::Event::LeaderChanged(change) => {
///             println!("term {}: leader {:?} ({:?})", change.term, change.leader, change.cause)
///         }
///         conclave::Event::PeerStatusChanged(change) => {
///             println!("{}: {:?} -> {:?}", change.peer, change.old, change.new)
///         }
///         conclave::Event::MembershipChanged(change) => {
///             println!("voters {:?}, learners {:?}", change.voters, change.learners)
///         }
///         conclave::Event::Lagged { missed } => {
///             println!("{missed} events lost; re-reading the node's state");
///             println!("leader now: {:?}", node.leader());
///         }
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The leader this node knows changed; `(term, leader)` is the fencing token (CB-5).
    LeaderChanged(LeaderChange),
    /// A peer joined, left or changed status.
    PeerStatusChanged(PeerChange),
    /// The configuration of the log's cluster this node acts on changed (with `[log]`):
    /// its voters, its learners, and what this node is in it.
    MembershipChanged(MembershipChange),
    /// This subscriber fell behind and lost the `missed` oldest events (also logged and
    /// counted in `conclave_events_lagged_total{subscriber="embedded"}`).
    Lagged {
        /// How many events were lost.
        missed: u64,
    },
}

impl From<Received> for Event {
    fn from(received: Received) -> Self {
        match received {
            Received::Event(NodeEvent::LeaderChanged(change)) => Event::LeaderChanged(change),
            Received::Event(NodeEvent::PeerStatusChanged(change)) => {
                Event::PeerStatusChanged(change)
            }
            Received::Event(NodeEvent::MembershipChanged(change)) => {
                Event::MembershipChanged(change)
            }
            Received::Lagged(missed) => Event::Lagged { missed },
        }
    }
}

/// The events of one node from the moment of [`crate::Node::subscribe`] on, until the node
/// stops.
///
/// As a [`Stream`] (or with [`Subscription::recv`]) in an async program:
///
/// ```no_run
/// use futures_util::StreamExt;
/// # async fn demo(node: &conclave::Node) {
/// let mut events = node.subscribe();
/// while let Some(event) = events.next().await {
///     println!("{event:?}");
/// }
/// # }
/// ```
///
/// As a blocking iterator in a program without a runtime:
///
/// ```no_run
/// # fn demo(node: &conclave::Node) {
/// for event in node.subscribe() {
///     println!("{event:?}");
/// }
/// # }
/// ```
pub struct Subscription {
    events: Pin<Box<dyn Stream<Item = Event> + Send>>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Subscription {
    pub(crate) fn new(subscription: EventSubscription) -> Self {
        let events = stream::unfold(subscription, |mut subscription| async move {
            let received = subscription.recv().await?;
            Some((Event::from(received), subscription))
        });
        Self {
            events: Box::pin(events),
        }
    }

    /// The next event, waiting for it; `None` once the node has stopped.
    ///
    /// ```no_run
    /// # async fn demo(node: &conclave::Node) {
    /// let mut events = node.subscribe();
    /// if let Some(conclave::Event::LeaderChanged(change)) = events.recv().await {
    ///     println!("leader {:?} in term {}", change.leader, change.term);
    /// }
    /// # }
    /// ```
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.next().await
    }

    /// The next event, blocking the calling thread until it comes; `None` once the node has
    /// stopped. Works on any thread, inside an async runtime or not (it blocks that thread).
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) {
    /// let mut events = node.subscribe();
    /// while let Some(event) = events.recv_blocking() {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn recv_blocking(&mut self) -> Option<Event> {
        block_on(self.events.next())
    }

    /// The next event, blocking the calling thread for at most `timeout`: `Timeout` when none
    /// came in time, `Disconnected` once the node has stopped.
    ///
    /// ```no_run
    /// use std::sync::mpsc::RecvTimeoutError;
    /// use std::time::Duration;
    /// # fn demo(node: &conclave::Node) {
    /// let mut events = node.subscribe();
    /// loop {
    ///     match events.recv_timeout(Duration::from_secs(1)) {
    ///         Ok(event) => println!("{event:?}"),
    ///         Err(RecvTimeoutError::Timeout) => println!("quiet second"),
    ///         Err(RecvTimeoutError::Disconnected) => break,
    ///     }
    /// }
    /// # }
    /// ```
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Event, RecvTimeoutError> {
        match block_on_within(self.events.next(), timeout) {
            Some(Some(event)) => Ok(event),
            Some(None) => Err(RecvTimeoutError::Disconnected),
            None => Err(RecvTimeoutError::Timeout),
        }
    }
}

impl Stream for Subscription {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// The blocking iterator over a [`Subscription`]: each `next` waits on the calling thread.
///
/// ```no_run
/// # fn demo(node: &conclave::Node) {
/// let leaders = node
///     .subscribe()
///     .into_iter()
///     .filter_map(|event| match event {
///         conclave::Event::LeaderChanged(change) => change.leader,
///         _ => None,
///     });
/// for leader in leaders {
///     println!("{leader} leads");
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct BlockingEvents(Subscription);

impl Iterator for BlockingEvents {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.0.recv_blocking()
    }
}

impl IntoIterator for Subscription {
    type Item = Event;
    type IntoIter = BlockingEvents;

    /// The events as a blocking iterator, for a program without an async runtime.
    fn into_iter(self) -> BlockingEvents {
        BlockingEvents(self)
    }
}

#[cfg(test)]
mod tests {
    use conclave_actors::events::{EVENT_BUS_CAPACITY, EventBus};
    use conclave_actors::metrics::NodeMetrics;
    use conclave_core::PeerStatus;

    use super::*;

    fn peer_change(n: u64) -> NodeEvent {
        NodeEvent::PeerStatusChanged(PeerChange {
            peer: "peer".parse().unwrap(),
            old: None,
            new: Some(PeerStatus::Connected),
            at_unix_ms: n,
        })
    }

    /// CB-1, EMB-1: a subscriber that falls behind by more than the bus holds is told how
    /// many events it lost, then gets the newest ones; the bus holds no more than its
    /// capacity for it.
    #[test]
    fn a_slow_subscriber_gets_a_counted_lag() {
        let bus = EventBus::new(NodeMetrics::new());
        let mut subscription = Subscription::new(bus.subscribe("slow"));
        let published = EVENT_BUS_CAPACITY as u64 + 44;
        for n in 0..published {
            bus.publish(peer_change(n));
        }
        assert_eq!(
            subscription.recv_timeout(Duration::ZERO),
            Ok(Event::Lagged { missed: 44 })
        );
        let mut kept = 0;
        while let Ok(event) = subscription.recv_timeout(Duration::ZERO) {
            let Event::PeerStatusChanged(change) = event else {
                panic!("{event:?}")
            };
            assert_eq!(change.at_unix_ms, 44 + kept, "out of order or missing");
            kept += 1;
        }
        assert_eq!(kept, EVENT_BUS_CAPACITY as u64);
    }

    /// CB-1: events come in the order they were published, through the blocking form too.
    #[test]
    fn events_arrive_in_order() {
        let bus = EventBus::new(NodeMetrics::new());
        let subscription = Subscription::new(bus.subscribe("in-order"));
        for n in 0..3 {
            bus.publish(peer_change(n));
        }
        drop(bus);
        let seen: Vec<u64> = subscription
            .into_iter()
            .map(|event| match event {
                Event::PeerStatusChanged(change) => change.at_unix_ms,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seen, [0, 1, 2]);
    }
}
