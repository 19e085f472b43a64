//! The `memory` link (TR-1): an in-process network for tests and the demo.
//!
//! Nodes attach to a [`MemoryHub`] under a slot number and exchange raw frames — the same
//! encoded, authenticated bytes a UDP datagram or an ESP-NOW payload carries, so everything
//! above the link is exercised for real. The hub can partition the slots, cut a node off,
//! inject arbitrary bytes (garbage, forged or replayed frames) as if they came from a slot, and
//! capture what a slot sends, so that a test can play it back.
//!
//! Each slot receives through a bounded queue, as a socket has a bounded receive buffer: a
//! frame that finds it full is dropped and counted ([`MemoryHub::dropped`]), never queued
//! without bound (TR-2). Frames are [`Bytes`]: sending one frame to every slot shares one
//! buffer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

/// Frames a slot's queue holds by default: about what a UDP socket's default receive buffer
/// holds of small datagrams.
pub const DEFAULT_SLOT_CAPACITY: usize = 256;
/// Frames a capture keeps at most; later ones are not recorded.
pub const MAX_CAPTURED: usize = 100_000;

/// One frame on the memory link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFrame {
    /// The sending slot.
    pub from: u32,
    /// The frame's bytes.
    pub bytes: Bytes,
}

#[derive(Debug)]
struct Endpoint {
    sender: mpsc::Sender<MemoryFrame>,
    /// Frames dropped because the queue was full.
    dropped: u64,
}

#[derive(Debug, Default)]
struct HubState {
    endpoints: BTreeMap<u32, Endpoint>,
    /// Directed pairs that drop everything.
    blocked: BTreeSet<(u32, u32)>,
    /// Slots whose sent frames are recorded, with what was recorded: (to, bytes).
    captures: BTreeMap<u32, Vec<(u32, Bytes)>>,
}

/// The shared medium of the memory link. Cheap to clone; clones are the same hub.
#[derive(Debug, Clone)]
pub struct MemoryHub {
    state: Arc<Mutex<HubState>>,
    capacity: usize,
}

impl Default for MemoryHub {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_SLOT_CAPACITY)
    }
}

impl MemoryHub {
    /// An empty hub whose slots queue [`DEFAULT_SLOT_CAPACITY`] frames each.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty hub whose slots queue `capacity` frames each (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            state: Arc::default(),
            capacity: capacity.max(1),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HubState> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches `slot` (replacing an earlier attachment, as a restarted node does) and returns
    /// what arrives for it.
    pub fn attach(&self, slot: u32) -> mpsc::Receiver<MemoryFrame> {
        let (sender, receiver) = mpsc::channel(self.capacity);
        self.state()
            .endpoints
            .insert(slot, Endpoint { sender, dropped: 0 });
        receiver
    }

    /// Detaches `slot`: frames to it are lost, as to a powered-off node.
    pub fn detach(&self, slot: u32) {
        self.state().endpoints.remove(&slot);
    }

    /// Slots currently attached.
    pub fn slots(&self) -> Vec<u32> {
        self.state().endpoints.keys().copied().collect()
    }

    /// Delivers `bytes` from `from` to `to` unless the link between them is down or `to`'s
    /// queue is full. Returns whether it was queued.
    pub fn send(&self, from: u32, to: u32, bytes: Bytes) -> bool {
        let mut state = self.state();
        if from == to || state.blocked.contains(&(from, to)) {
            return false;
        }
        if let Some(capture) = state.captures.get_mut(&from) {
            if capture.len() < MAX_CAPTURED {
                capture.push((to, bytes.clone()));
            }
        }
        deliver(&mut state, from, to, bytes)
    }

    /// Delivers `bytes` from `from` to every other attached slot it can reach.
    pub fn broadcast(&self, from: u32, bytes: &Bytes) {
        for to in self.slots() {
            self.send(from, to, bytes.clone());
        }
    }

    /// Delivers `bytes` to `to` as if `from` had sent them, whatever the partitions: for tests
    /// that forge, replay or garble frames. Returns whether it was queued.
    pub fn inject(&self, from: u32, to: u32, bytes: impl Into<Bytes>) -> bool {
        deliver(&mut self.state(), from, to, bytes.into())
    }

    /// Starts recording every frame `slot` sends that the hub carries (not those a partition
    /// stops; at most [`MAX_CAPTURED`]), forgetting any earlier recording of it.
    pub fn capture(&self, slot: u32) {
        self.state().captures.insert(slot, Vec::new());
    }

    /// Stops recording `slot` and returns what it sent since [`capture`](Self::capture), in
    /// order, with the slot each frame went to.
    pub fn captured(&self, slot: u32) -> Vec<(u32, Bytes)> {
        self.state().captures.remove(&slot).unwrap_or_default()
    }

    /// Frames waiting in `slot`'s queue.
    pub fn queued(&self, slot: u32) -> usize {
        self.state().endpoints.get(&slot).map_or(0, |endpoint| {
            endpoint.sender.max_capacity() - endpoint.sender.capacity()
        })
    }

    /// Frames dropped at `slot`'s full queue since it was attached.
    pub fn dropped(&self, slot: u32) -> u64 {
        self.state()
            .endpoints
            .get(&slot)
            .map_or(0, |endpoint| endpoint.dropped)
    }

    /// Splits the slots into groups that cannot reach each other; slots in no group are cut off
    /// from everyone.
    pub fn partition(&self, groups: &[&[u32]]) {
        let mut state = self.state();
        let slots: Vec<u32> = state.endpoints.keys().copied().collect();
        let group_of = |slot: u32| groups.iter().position(|group| group.contains(&slot));
        state.blocked.clear();
        for &a in &slots {
            for &b in &slots {
                if a != b && (group_of(a).is_none() || group_of(a) != group_of(b)) {
                    state.blocked.insert((a, b));
                }
            }
        }
    }

    /// Cuts `slot` off from every other slot, both ways.
    pub fn isolate(&self, slot: u32) {
        let mut state = self.state();
        let others: Vec<u32> = state
            .endpoints
            .keys()
            .copied()
            .filter(|s| *s != slot)
            .collect();
        for other in others {
            state.blocked.insert((slot, other));
            state.blocked.insert((other, slot));
        }
    }

    /// Heals every partition.
    pub fn heal(&self) {
        self.state().blocked.clear();
    }
}

/// Queues `bytes` for `to`, or counts it dropped when the queue is full.
fn deliver(state: &mut HubState, from: u32, to: u32, bytes: Bytes) -> bool {
    let Some(endpoint) = state.endpoints.get_mut(&to) else {
        return false;
    };
    match endpoint.sender.try_send(MemoryFrame { from, bytes }) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            endpoint.dropped += 1;
            false
        }
        Err(TrySendError::Closed(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &'static [u8]) -> Bytes {
        Bytes::from_static(text)
    }

    #[tokio::test]
    async fn delivery_partitions_and_injection() {
        let hub = MemoryHub::new();
        let mut one = hub.attach(1);
        let mut two = hub.attach(2);
        let mut three = hub.attach(3);
        hub.broadcast(1, &bytes(b"hi"));
        assert_eq!(two.recv().await.unwrap().bytes, bytes(b"hi"));
        assert_eq!(three.recv().await.unwrap().bytes, bytes(b"hi"));
        assert!(one.try_recv().is_err(), "no echo to the sender");

        hub.partition(&[&[1, 2], &[3]]);
        assert!(hub.send(1, 2, bytes(b"a")));
        assert!(!hub.send(1, 3, bytes(b"b")));
        assert!(hub.inject(1, 3, b"forged".to_vec()));
        assert_eq!(three.recv().await.unwrap().bytes, bytes(b"forged"));

        hub.isolate(2);
        assert!(!hub.send(1, 2, bytes(b"c")));
        hub.heal();
        hub.detach(3);
        assert!(!hub.send(1, 3, bytes(b"d")));
        assert_eq!(two.recv().await.unwrap().bytes, bytes(b"a"));
    }

    /// TR-2: a slot's queue is bounded; what finds it full is dropped and counted, and the
    /// slot receives again once it has read.
    #[tokio::test]
    async fn full_queue_drops_and_counts() {
        let hub = MemoryHub::with_capacity(2);
        let mut two = hub.attach(2);
        assert!(hub.send(1, 2, bytes(b"a")));
        assert!(hub.inject(9, 2, b"b".to_vec()));
        assert_eq!(hub.queued(2), 2);
        assert!(!hub.send(1, 2, bytes(b"c")));
        assert!(!hub.inject(9, 2, b"d".to_vec()));
        assert_eq!(hub.dropped(2), 2);
        assert_eq!(two.recv().await.unwrap().bytes, bytes(b"a"));
        assert!(hub.send(1, 2, bytes(b"e")));
        assert_eq!(hub.dropped(2), 2);
    }

    /// A capture records what a slot sends, in order, with each frame's destination.
    #[tokio::test]
    async fn capture_records_what_a_slot_sends() {
        let hub = MemoryHub::new();
        let _two = hub.attach(2);
        let _three = hub.attach(3);
        hub.send(1, 2, bytes(b"before"));
        hub.capture(1);
        hub.broadcast(1, &bytes(b"x"));
        hub.send(3, 2, bytes(b"not 1's"));
        assert_eq!(hub.captured(1), vec![(2, bytes(b"x")), (3, bytes(b"x"))]);
        assert_eq!(hub.captured(1), vec![], "the capture ended");
    }
}
