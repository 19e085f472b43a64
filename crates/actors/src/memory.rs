//! The `memory` link (TR-1): an in-process network for tests and the demo.
//!
//! Nodes attach to a [`MemoryHub`] under a slot number and exchange raw frames — the same
//! encoded, authenticated bytes a UDP datagram or an ESP-NOW payload carries, so everything
//! above the link is exercised for real. The hub can partition the slots, cut a node off and
//! inject arbitrary bytes (garbage, forged or replayed frames) as if they came from a slot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

/// One frame on the memory link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFrame {
    /// The sending slot.
    pub from: u32,
    /// The frame's bytes.
    pub bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct HubState {
    endpoints: BTreeMap<u32, mpsc::UnboundedSender<MemoryFrame>>,
    /// Directed pairs that drop everything.
    blocked: BTreeSet<(u32, u32)>,
}

/// The shared medium of the memory link. Cheap to clone; clones are the same hub.
#[derive(Debug, Clone, Default)]
pub struct MemoryHub {
    state: Arc<Mutex<HubState>>,
}

impl MemoryHub {
    /// An empty hub.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HubState> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches `slot` (replacing an earlier attachment, as a restarted node does) and returns
    /// what arrives for it.
    pub fn attach(&self, slot: u32) -> mpsc::UnboundedReceiver<MemoryFrame> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.state().endpoints.insert(slot, sender);
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

    /// Delivers `bytes` from `from` to `to` unless the link between them is down. Returns
    /// whether it was delivered.
    pub fn send(&self, from: u32, to: u32, bytes: Vec<u8>) -> bool {
        let state = self.state();
        if from == to || state.blocked.contains(&(from, to)) {
            return false;
        }
        match state.endpoints.get(&to) {
            Some(endpoint) => endpoint.send(MemoryFrame { from, bytes }).is_ok(),
            None => false,
        }
    }

    /// Delivers `bytes` from `from` to every other attached slot it can reach.
    pub fn broadcast(&self, from: u32, bytes: &[u8]) {
        let targets: Vec<u32> = self.slots();
        for to in targets {
            self.send(from, to, bytes.to_vec());
        }
    }

    /// Delivers `bytes` to `to` as if `from` had sent them, whatever the partitions: for tests
    /// that forge, replay or garble frames.
    pub fn inject(&self, from: u32, to: u32, bytes: Vec<u8>) -> bool {
        self.state()
            .endpoints
            .get(&to)
            .is_some_and(|endpoint| endpoint.send(MemoryFrame { from, bytes }).is_ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivery_partitions_and_injection() {
        let hub = MemoryHub::new();
        let mut one = hub.attach(1);
        let mut two = hub.attach(2);
        let mut three = hub.attach(3);
        hub.broadcast(1, b"hi");
        assert_eq!(two.recv().await.unwrap().bytes, b"hi");
        assert_eq!(three.recv().await.unwrap().bytes, b"hi");
        assert!(one.try_recv().is_err(), "no echo to the sender");

        hub.partition(&[&[1, 2], &[3]]);
        assert!(hub.send(1, 2, b"a".to_vec()));
        assert!(!hub.send(1, 3, b"b".to_vec()));
        assert!(hub.inject(1, 3, b"forged".to_vec()));
        assert_eq!(three.recv().await.unwrap().bytes, b"forged");

        hub.isolate(2);
        assert!(!hub.send(1, 2, b"c".to_vec()));
        hub.heal();
        hub.detach(3);
        assert!(!hub.send(1, 3, b"d".to_vec()));
        assert_eq!(two.recv().await.unwrap().bytes, b"a");
    }
}
