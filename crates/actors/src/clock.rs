//! The bridge between actix time and the core's virtual [`Instant`](conclave_core::Instant).
//!
//! Every actor of a node shares one [`NodeClock`] whose origin is the node's start. Actor time
//! is `actix::clock::Instant` (tokio's), never the standard library's, so that tests can pause
//! and advance it (CONVENTIONS: time in actors).

use std::time::Duration;

use actix::clock::Instant;

/// Converts between actix instants and the core's microseconds since the node started.
#[derive(Debug, Clone, Copy)]
pub struct NodeClock {
    origin: Instant,
}

impl NodeClock {
    /// A clock whose origin is now.
    pub fn start() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// The core's "now".
    pub fn now(&self) -> conclave_core::Instant {
        self.to_core(Instant::now())
    }

    /// An actix instant as core time.
    pub fn to_core(&self, at: Instant) -> conclave_core::Instant {
        let micros = at.saturating_duration_since(self.origin).as_micros();
        conclave_core::Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// How long from now until the core instant `at` (zero if it has passed).
    pub fn until(&self, at: conclave_core::Instant) -> Duration {
        at.saturating_duration_since(self.now())
    }
}
