//! The per-sender replay window (PROTO-5).
//!
//! For each sender a [`ReplayWindow`] keeps its newest incarnation, the highest sequence number
//! accepted in it and a bitmap of the [`WINDOW`] sequence numbers below that. A frame is admitted when it
//! opens a newer incarnation, moves the sequence forward, or fills a hole inside the window (a
//! frame overtaken in flight, accepted exactly once). Everything else is a replay. The table
//! holds at most a fixed number of senders, evicting the one heard from least recently, so a
//! flood of invented sender ids cannot grow memory.
//!
//! [`ReplayGuard`] is the self-contained form (decode, authenticate, check) that
//! [`FrameReceiver`](crate::FrameReceiver) uses; a node keeps one [`ReplayWindow`] per sender
//! inside its admission state machine (`conclave_core::admission`), which also decides when a
//! window may start at all after the node restarts.

use std::collections::BTreeMap;

use crate::error::FrameError;
use crate::ids::PeerId;

/// How many sequence numbers below the highest one may still arrive late.
pub const WINDOW: u64 = 64;

/// Default bound on the number of senders tracked.
pub const DEFAULT_MAX_SENDERS: usize = 1024;

/// What one sender has had accepted: its newest incarnation, the highest sequence number
/// accepted in it, and which of the [`WINDOW`] sequence numbers below that were accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayWindow {
    incarnation: u64,
    highest_seq: u64,
    /// Bit `i` set: `highest_seq - i` was accepted (bit 0 is `highest_seq` itself).
    seen: u64,
}

impl ReplayWindow {
    /// The window of a sender whose first accepted frame is `(incarnation, seq)`.
    pub fn starting_at(incarnation: u64, seq: u64) -> Self {
        Self {
            incarnation,
            highest_seq: seq,
            seen: 1,
        }
    }

    /// The window of a sender that proved with `(incarnation, seq)` that it is live now: that
    /// frame and every earlier one count as seen, so nothing captured before it is accepted,
    /// not even a frame that would otherwise fill a hole of the reorder window.
    pub fn floor_at(incarnation: u64, seq: u64) -> Self {
        Self {
            incarnation,
            highest_seq: seq,
            seen: u64::MAX,
        }
    }

    /// The newest `(incarnation, seq)` accepted.
    pub fn newest(&self) -> (u64, u64) {
        (self.incarnation, self.highest_seq)
    }

    /// Whether `(incarnation, seq)` would be accepted, without recording it.
    pub fn would_admit(&self, incarnation: u64, seq: u64) -> bool {
        let mut copy = *self;
        copy.admit(incarnation, seq)
    }

    /// Accepts `(incarnation, seq)` and records it, or returns `false` for a replay: an older
    /// incarnation, a sequence number [`WINDOW`] or more below the highest, or one already
    /// accepted.
    pub fn admit(&mut self, incarnation: u64, seq: u64) -> bool {
        if incarnation < self.incarnation {
            return false;
        }
        if incarnation > self.incarnation {
            *self = Self::starting_at(incarnation, seq);
            return true;
        }
        if seq > self.highest_seq {
            let shift = seq - self.highest_seq;
            self.seen = if shift >= WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.highest_seq = seq;
            return true;
        }
        let age = self.highest_seq - seq;
        if age >= WINDOW {
            return false;
        }
        let bit = 1u64 << age;
        if self.seen & bit != 0 {
            return false;
        }
        self.seen |= bit;
        true
    }
}

#[derive(Debug, Clone, Copy)]
struct SenderWindow {
    window: ReplayWindow,
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
        let Some(sender) = self.senders.get_mut(&from) else {
            self.evict_if_full();
            self.senders.insert(
                from,
                SenderWindow {
                    window: ReplayWindow::starting_at(incarnation, seq),
                    last_used: now,
                },
            );
            return Ok(());
        };
        if !sender.window.admit(incarnation, seq) {
            return Err(FrameError::Replay {
                from,
                incarnation,
                seq,
            });
        }
        sender.last_used = now;
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

    /// PROTO-5: the same `(incarnation, seq)` is accepted once.
    #[test]
    fn exact_replay_is_refused() {
        let mut guard = ReplayGuard::default();
        assert!(guard.admit(PeerId::from_static("a"), 1, 10).is_ok());
        assert_eq!(
            guard.admit(PeerId::from_static("a"), 1, 10),
            Err(FrameError::Replay {
                from: PeerId::from_static("a"),
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
        guard.admit(PeerId::from_static("a"), 1, 100).unwrap();
        guard.admit(PeerId::from_static("a"), 1, 103).unwrap();
        assert!(guard.admit(PeerId::from_static("a"), 1, 101).is_ok());
        assert!(guard.admit(PeerId::from_static("a"), 1, 102).is_ok());
        assert!(guard.admit(PeerId::from_static("a"), 1, 101).is_err());
        assert!(guard.admit(PeerId::from_static("a"), 1, 100).is_err());
        guard
            .admit(PeerId::from_static("a"), 1, 103 + WINDOW)
            .unwrap();
        assert!(
            guard.admit(PeerId::from_static("a"), 1, 103).is_err(),
            "fell out of the window"
        );
        assert!(
            guard.admit(PeerId::from_static("a"), 1, 104).is_ok(),
            "still inside, never seen"
        );
    }

    /// PROTO-2, PROTO-5: a new incarnation restarts the sequence; old incarnations are refused.
    #[test]
    fn incarnation_orders_before_seq() {
        let mut guard = ReplayGuard::default();
        guard.admit(PeerId::from_static("a"), 1, 500).unwrap();
        assert!(guard.admit(PeerId::from_static("a"), 2, 1).is_ok());
        assert!(guard.admit(PeerId::from_static("a"), 1, 501).is_err());
        assert!(guard.admit(PeerId::from_static("a"), 2, 2).is_ok());
    }

    /// PROTO-5: senders are independent.
    #[test]
    fn senders_are_independent() {
        let mut guard = ReplayGuard::default();
        guard.admit(PeerId::from_static("a"), 1, 5).unwrap();
        assert!(guard.admit(PeerId::from_static("b"), 1, 5).is_ok());
    }

    /// The table is bounded and evicts the sender heard from least recently.
    #[test]
    fn table_is_bounded() {
        let mut guard = ReplayGuard::new(2);
        guard.admit(PeerId::from_static("a"), 1, 1).unwrap();
        guard.admit(PeerId::from_static("b"), 1, 1).unwrap();
        guard.admit(PeerId::from_static("a"), 1, 2).unwrap();
        guard.admit(PeerId::from_static("c"), 1, 1).unwrap();
        assert_eq!(guard.len(), 2);
        // "b" was evicted, "a" kept its window.
        assert!(guard.admit(PeerId::from_static("a"), 1, 2).is_err());
    }

    /// PROTO-5: a window floored at a frame refuses that frame and everything before it, the
    /// holes of the reorder window included, and accepts what follows.
    #[test]
    fn floored_window_refuses_everything_up_to_the_floor() {
        let mut window = ReplayWindow::floor_at(3, 100);
        assert_eq!(window.newest(), (3, 100));
        for seq in [100, 99, 98, 100 - (WINDOW - 1), 100 - WINDOW, 0] {
            assert!(!window.would_admit(3, seq), "seq {seq}");
            assert!(!window.admit(3, seq), "seq {seq}");
        }
        assert!(!window.admit(2, 500), "an older incarnation");
        assert!(window.admit(3, 101));
        assert!(!window.admit(3, 101));
        assert!(window.admit(4, 1), "a newer incarnation");
        assert_eq!(window.newest(), (4, 1));
    }

    /// PROTO-5: a window started at a frame still accepts frames overtaken in flight.
    #[test]
    fn started_window_keeps_its_holes_open() {
        let mut window = ReplayWindow::starting_at(3, 100);
        assert!(window.would_admit(3, 99));
        assert!(window.admit(3, 99));
        assert!(!window.admit(3, 99));
        assert!(!window.admit(3, 100));
    }
}
