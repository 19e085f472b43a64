//! The per-sender replay window (PROTO-5).
//!
//! For each sender the guard keeps its newest incarnation, the highest sequence number accepted
//! in it and a bitmap of the [`WINDOW`] sequence numbers below that. A frame is admitted when it
//! opens a newer incarnation, moves the sequence forward, or fills a hole inside the window (a
//! frame overtaken in flight, accepted exactly once). Everything else is a replay. The table
//! holds at most a fixed number of senders, evicting the one heard from least recently, so a
//! flood of invented sender ids cannot grow memory.

use std::collections::BTreeMap;

use crate::error::FrameError;
use crate::ids::PeerId;

/// How many sequence numbers below the highest one may still arrive late.
pub const WINDOW: u64 = 64;

/// Default bound on the number of senders tracked.
pub const DEFAULT_MAX_SENDERS: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct SenderWindow {
    incarnation: u64,
    highest_seq: u64,
    /// Bit `i` set: `highest_seq - i` was accepted (bit 0 is `highest_seq` itself).
    seen: u64,
    /// Logical time of the last admission, for eviction.
    last_used: u64,
}

/// Remembers what each sender has already had accepted.
#[derive(Debug, Clone)]
pub struct ReplayGuard {
    senders: BTreeMap<PeerId, SenderWindow>,
    max_senders: usize,
    clock: u64,
}

impl Default for ReplayGuard {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_SENDERS)
    }
}

impl ReplayGuard {
    /// A guard tracking at most `max_senders` senders (at least one).
    pub fn new(max_senders: usize) -> Self {
        Self {
            senders: BTreeMap::new(),
            max_senders: max_senders.max(1),
            clock: 0,
        }
    }

    /// Admits `(incarnation, seq)` from `from`, or refuses it as a replay. Call it only for a
    /// frame whose tag verified, or a forger could move a sender's window forward.
    pub fn admit(&mut self, from: PeerId, incarnation: u64, seq: u64) -> Result<(), FrameError> {
        self.clock += 1;
        let now = self.clock;
        let replay = || FrameError::Replay {
            from,
            incarnation,
            seq,
        };
        let Some(window) = self.senders.get_mut(&from) else {
            self.evict_if_full();
            self.senders.insert(
                from,
                SenderWindow {
                    incarnation,
                    highest_seq: seq,
                    seen: 1,
                    last_used: now,
                },
            );
            return Ok(());
        };
        if incarnation < window.incarnation {
            return Err(replay());
        }
        if incarnation > window.incarnation {
            *window = SenderWindow {
                incarnation,
                highest_seq: seq,
                seen: 1,
                last_used: now,
            };
            return Ok(());
        }
        if seq > window.highest_seq {
            let shift = seq - window.highest_seq;
            window.seen = if shift >= WINDOW {
                0
            } else {
                window.seen << shift
            };
            window.seen |= 1;
            window.highest_seq = seq;
            window.last_used = now;
            return Ok(());
        }
        let age = window.highest_seq - seq;
        if age >= WINDOW {
            return Err(replay());
        }
        let bit = 1u64 << age;
        if window.seen & bit != 0 {
            return Err(replay());
        }
        window.seen |= bit;
        window.last_used = now;
        Ok(())
    }

    /// Forgets a sender (for example after it said goodbye).
    pub fn forget(&mut self, from: &PeerId) {
        self.senders.remove(from);
    }

    /// Senders currently tracked.
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// Whether no sender is tracked.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    fn evict_if_full(&mut self) {
        if self.senders.len() < self.max_senders {
            return;
        }
        let oldest = self
            .senders
            .iter()
            .min_by_key(|(_, window)| window.last_used)
            .map(|(id, _)| *id);
        if let Some(id) = oldest {
            self.senders.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str) -> PeerId {
        PeerId::new(name).unwrap()
    }

    /// PROTO-5: the same `(incarnation, seq)` is accepted once.
    #[test]
    fn exact_replay_is_refused() {
        let mut guard = ReplayGuard::default();
        assert!(guard.admit(peer("a"), 1, 10).is_ok());
        assert_eq!(
            guard.admit(peer("a"), 1, 10),
            Err(FrameError::Replay {
                from: peer("a"),
                incarnation: 1,
                seq: 10
            })
        );
    }

    /// PROTO-5: a frame overtaken in flight is accepted once inside the window, never twice,
    /// and frames older than the window are refused.
    #[test]
    fn reordered_frames_inside_the_window_are_accepted_once() {
        let mut guard = ReplayGuard::default();
        guard.admit(peer("a"), 1, 100).unwrap();
        guard.admit(peer("a"), 1, 103).unwrap();
        assert!(guard.admit(peer("a"), 1, 101).is_ok());
        assert!(guard.admit(peer("a"), 1, 102).is_ok());
        assert!(guard.admit(peer("a"), 1, 101).is_err());
        assert!(guard.admit(peer("a"), 1, 100).is_err());
        guard.admit(peer("a"), 1, 103 + WINDOW).unwrap();
        assert!(
            guard.admit(peer("a"), 1, 103).is_err(),
            "fell out of the window"
        );
        assert!(
            guard.admit(peer("a"), 1, 104).is_ok(),
            "still inside, never seen"
        );
    }

    /// PROTO-2, PROTO-5: a new incarnation restarts the sequence; old incarnations are refused.
    #[test]
    fn incarnation_orders_before_seq() {
        let mut guard = ReplayGuard::default();
        guard.admit(peer("a"), 1, 500).unwrap();
        assert!(guard.admit(peer("a"), 2, 1).is_ok());
        assert!(guard.admit(peer("a"), 1, 501).is_err());
        assert!(guard.admit(peer("a"), 2, 2).is_ok());
    }

    /// PROTO-5: senders are independent.
    #[test]
    fn senders_are_independent() {
        let mut guard = ReplayGuard::default();
        guard.admit(peer("a"), 1, 5).unwrap();
        assert!(guard.admit(peer("b"), 1, 5).is_ok());
    }

    /// The table is bounded and evicts the sender heard from least recently.
    #[test]
    fn table_is_bounded() {
        let mut guard = ReplayGuard::new(2);
        guard.admit(peer("a"), 1, 1).unwrap();
        guard.admit(peer("b"), 1, 1).unwrap();
        guard.admit(peer("a"), 1, 2).unwrap();
        guard.admit(peer("c"), 1, 1).unwrap();
        assert_eq!(guard.len(), 2);
        // "b" was evicted, "a" kept its window.
        assert!(guard.admit(peer("a"), 1, 2).is_err());
    }
}
