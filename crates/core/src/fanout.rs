//! Bounded per-subscriber event queues (MEM-5).
//!
//! Membership events go to several consumers (the election core, the callbacks, the metrics),
//! each at its own pace. Every subscriber gets its own [`SubscriberQueue`] of fixed capacity,
//! so a slow one can neither hold the others back nor make memory grow: when its queue is
//! full, the *oldest* event is dropped and counted. The subscriber learns it on its next
//! [`pop`](SubscriberQueue::pop) as one [`Delivery::Lagged`] carrying the number missed, and
//! [`total_lagged`](SubscriberQueue::total_lagged) keeps the lifetime count for the
//! `events_lagged_total{subscriber}` metric.
//!
//! A lagged subscriber cannot rebuild what it missed from the queue, and should not try: the
//! peer table ([`crate::membership::PeerTable`]) is the truth and can always be read whole.
//! [`drain`] therefore stops at the lag report (the seed's rule: log a warning and leave the
//! current drain loop) so the subscriber re-reads the table before it goes on with the newer
//! events.
//!
//! Nothing here blocks or wakes anyone: the shell decides when a subscriber drains.

use std::collections::{BTreeMap, VecDeque};

/// What a subscriber receives from its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<T> {
    /// The next event, oldest first.
    Event(T),
    /// Events were dropped since the last report because the queue was full; the ones still
    /// queued follow. Re-read the state those events described.
    Lagged {
        /// How many were dropped since the previous report.
        missed: u64,
    },
}

/// A bounded queue of events for one subscriber that drops the oldest when full.
#[derive(Debug, Clone)]
pub struct SubscriberQueue<T> {
    events: VecDeque<T>,
    capacity: usize,
    unreported: u64,
    total_lagged: u64,
}

impl<T> SubscriberQueue<T> {
    /// A queue holding at most `capacity` events (at least one: a queue that can hold nothing
    /// would only count losses).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            events: VecDeque::with_capacity(capacity),
            capacity,
            unreported: 0,
            total_lagged: 0,
        }
    }

    /// Queues `event`; when the queue is full the oldest event is dropped and counted.
    pub fn push(&mut self, event: T) {
        if self.events.len() >= self.capacity {
            self.events.pop_front();
            self.unreported += 1;
            self.total_lagged += 1;
        }
        self.events.push_back(event);
    }

    /// The next delivery: one `Lagged` report first if events were dropped since the last one,
    /// then the queued events oldest first; `None` when nothing is left.
    pub fn pop(&mut self) -> Option<Delivery<T>> {
        if self.unreported > 0 {
            let missed = std::mem::take(&mut self.unreported);
            return Some(Delivery::Lagged { missed });
        }
        self.events.pop_front().map(Delivery::Event)
    }

    /// Events waiting (a pending lag report is not counted).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether nothing is waiting, neither an event nor a lag report.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.unreported == 0
    }

    /// The most events the queue holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Events dropped over the queue's whole life, reported or not; the value of the
    /// `events_lagged_total{subscriber}` counter.
    pub fn total_lagged(&self) -> u64 {
        self.total_lagged
    }
}

/// How a [`drain`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainOutcome {
    /// The queue is empty; this many events were handed over.
    Drained {
        /// Events delivered.
        delivered: usize,
    },
    /// The subscriber had fallen behind and the drain stopped at the report. The surviving,
    /// newer events stay queued for the next drain; re-read the peer table first.
    Lagged {
        /// Events dropped since the previous report.
        missed: u64,
    },
}

/// Hands the events queued for the subscriber `name` to `handle`, oldest first, until the
/// queue is empty. A lag report stops the drain: it is logged as a warning naming the
/// subscriber and the number missed, and returned, so the caller re-reads the peer table
/// before it takes the newer events on a later drain.
pub fn drain<T>(
    queue: &mut SubscriberQueue<T>,
    name: &str,
    mut handle: impl FnMut(T),
) -> DrainOutcome {
    let mut delivered = 0;
    while let Some(delivery) = queue.pop() {
        match delivery {
            Delivery::Event(event) => {
                handle(event);
                delivered += 1;
            }
            Delivery::Lagged { missed } => {
                tracing::warn!(
                    subscriber = name,
                    missed,
                    "subscriber {name} lagged: {missed} oldest events were dropped; \
                     stopping this drain, the peer table holds the current state"
                );
                return DrainOutcome::Lagged { missed };
            }
        }
    }
    DrainOutcome::Drained { delivered }
}

/// Named subscriber queues that all receive every published event (MEM-5).
#[derive(Debug, Clone)]
pub struct Fanout<T> {
    capacity: usize,
    subscribers: BTreeMap<String, SubscriberQueue<T>>,
}

impl<T: Clone> Fanout<T> {
    /// No subscribers yet; each one added gets a queue of `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            subscribers: BTreeMap::new(),
        }
    }

    /// Adds a subscriber called `name`, which receives events published from now on. Returns
    /// `false`, keeping the existing queue, when the name is taken.
    pub fn subscribe(&mut self, name: impl Into<String>) -> bool {
        let name = name.into();
        if self.subscribers.contains_key(&name) {
            return false;
        }
        self.subscribers
            .insert(name, SubscriberQueue::new(self.capacity));
        true
    }

    /// Removes the subscriber `name` and its queue; returns whether it existed.
    pub fn unsubscribe(&mut self, name: &str) -> bool {
        self.subscribers.remove(name).is_some()
    }

    /// Queues a copy of `event` for every subscriber.
    pub fn publish(&mut self, event: &T) {
        for queue in self.subscribers.values_mut() {
            queue.push(event.clone());
        }
    }

    /// The queue of subscriber `name`.
    pub fn queue_mut(&mut self, name: &str) -> Option<&mut SubscriberQueue<T>> {
        self.subscribers.get_mut(name)
    }

    /// [`drain`]s the queue of subscriber `name`; `None` if there is no such subscriber.
    pub fn drain(&mut self, name: &str, handle: impl FnMut(T)) -> Option<DrainOutcome> {
        let queue = self.subscribers.get_mut(name)?;
        Some(drain(queue, name, handle))
    }

    /// Every subscriber with its lifetime drop count, by name; what the
    /// `events_lagged_total{subscriber}` metric reports.
    pub fn lagged_totals(&self) -> impl Iterator<Item = (&str, u64)> {
        self.subscribers
            .iter()
            .map(|(name, queue)| (name.as_str(), queue.total_lagged()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects formatted log output so a test can assert what was logged.
    #[derive(Clone, Default)]
    pub(crate) struct CapturedLog(Arc<Mutex<Vec<u8>>>);

    impl CapturedLog {
        pub(crate) fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    impl io::Write for CapturedLog {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A subscriber that writes every event, at any level, into `log`.
    pub(crate) fn capturing_subscriber(
        log: &CapturedLog,
    ) -> impl tracing::Subscriber + Send + Sync {
        let log = log.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || log.clone())
            .finish()
    }

    fn drained<T>(queue: &mut SubscriberQueue<T>) -> Vec<Delivery<T>> {
        std::iter::from_fn(|| queue.pop()).collect()
    }

    /// MEM-5: a subscriber that fell behind is warned about, by name and count, and its drain
    /// stops there; the next drain delivers the newest events that survived.
    #[test]
    fn lagged_subscriber_warns_and_stops_drain() {
        let log = CapturedLog::default();
        tracing::subscriber::with_default(capturing_subscriber(&log), || {
            let mut queue = SubscriberQueue::new(4);
            for n in 0..10 {
                queue.push(n);
            }

            let mut seen = Vec::new();
            let outcome = drain(&mut queue, "election", |n| seen.push(n));
            assert_eq!(outcome, DrainOutcome::Lagged { missed: 6 });
            assert!(seen.is_empty(), "the drain must stop at the lag report");

            let text = log.text();
            assert!(text.contains("WARN"), "{text}");
            assert!(
                text.contains("subscriber election lagged: 6 oldest events were dropped"),
                "{text}"
            );

            let outcome = drain(&mut queue, "election", |n| seen.push(n));
            assert_eq!(outcome, DrainOutcome::Drained { delivered: 4 });
            assert_eq!(seen, vec![6, 7, 8, 9]);
            assert_eq!(queue.total_lagged(), 6);
        });
    }

    /// MEM-5: without drops a queue delivers in order and reports no lag.
    #[test]
    fn mem5_queue_delivers_oldest_first() {
        let mut queue = SubscriberQueue::new(256);
        queue.push("joined");
        queue.push("left");
        assert_eq!(queue.len(), 2);
        assert_eq!(
            drained(&mut queue),
            vec![Delivery::Event("joined"), Delivery::Event("left")]
        );
        assert!(queue.is_empty());
        assert_eq!(queue.total_lagged(), 0);
        let mut count = 0;
        assert_eq!(
            drain(&mut queue, "metrics", |_| count += 1),
            DrainOutcome::Drained { delivered: 0 }
        );
    }

    /// MEM-5: the lag is reported once per episode, counting only drops since the last report,
    /// while the lifetime total keeps growing.
    #[test]
    fn mem5_lag_is_reported_once_and_totalled() {
        let mut queue = SubscriberQueue::new(2);
        for n in 0..5 {
            queue.push(n);
        }
        assert!(!queue.is_empty());
        assert_eq!(
            drained(&mut queue),
            vec![
                Delivery::Lagged { missed: 3 },
                Delivery::Event(3),
                Delivery::Event(4)
            ]
        );
        queue.push(5);
        queue.push(6);
        queue.push(7);
        assert_eq!(
            drained(&mut queue),
            vec![
                Delivery::Lagged { missed: 1 },
                Delivery::Event(6),
                Delivery::Event(7)
            ]
        );
        assert_eq!(queue.total_lagged(), 4);
    }

    /// MEM-5: a queue asked to hold nothing still holds the newest event.
    #[test]
    fn mem5_zero_capacity_is_raised_to_one() {
        let mut queue = SubscriberQueue::new(0);
        assert_eq!(queue.capacity(), 1);
        queue.push('a');
        queue.push('b');
        assert_eq!(
            drained(&mut queue),
            vec![Delivery::Lagged { missed: 1 }, Delivery::Event('b')]
        );
    }

    /// MEM-5: every subscriber gets every event, and one falling behind costs the others
    /// nothing.
    #[test]
    fn mem5_fanout_reaches_every_subscriber_independently() {
        let log = CapturedLog::default();
        tracing::subscriber::with_default(capturing_subscriber(&log), || {
            let mut fanout = Fanout::new(3);
            assert!(fanout.subscribe("election"));
            assert!(fanout.subscribe("callbacks"));
            assert!(!fanout.subscribe("election"));

            fanout.publish(&1);
            let mut election = Vec::new();
            assert_eq!(
                fanout.drain("election", |n| election.push(n)),
                Some(DrainOutcome::Drained { delivered: 1 })
            );
            for n in 2..=4 {
                fanout.publish(&n);
            }
            assert_eq!(
                fanout.drain("election", |n| election.push(n)),
                Some(DrainOutcome::Drained { delivered: 3 })
            );
            assert_eq!(election, vec![1, 2, 3, 4]);

            let mut callbacks = Vec::new();
            assert_eq!(
                fanout.drain("callbacks", |n| callbacks.push(n)),
                Some(DrainOutcome::Lagged { missed: 1 })
            );
            assert_eq!(
                fanout.drain("callbacks", |n| callbacks.push(n)),
                Some(DrainOutcome::Drained { delivered: 3 })
            );
            assert_eq!(callbacks, vec![2, 3, 4]);
            assert!(log.text().contains("subscriber callbacks lagged: 1"));

            assert_eq!(
                fanout.lagged_totals().collect::<Vec<_>>(),
                vec![("callbacks", 1), ("election", 0)]
            );
            assert_eq!(fanout.drain("nobody", |_| {}), None);
            assert!(fanout.queue_mut("election").is_some());
            assert!(fanout.unsubscribe("callbacks"));
            assert!(!fanout.unsubscribe("callbacks"));
        });
    }
}
