//! Virtual time for the sans-IO core.
//!
//! The core never reads a clock: every input carries `now`, an [`Instant`] counted in
//! microseconds from an origin the driver chooses (the start of the process for the actors,
//! zero for the simulator). Durations are `std::time::Duration`.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in microseconds since the driver's origin.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Self { micros }
    }

    /// `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Self {
            micros: millis.saturating_mul(1_000),
        }
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds since the origin.
    pub const fn as_millis(self) -> u64 {
        self.micros / 1_000
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

fn duration_micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, duration: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(duration_micros(duration)),
        }
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, duration: Duration) {
        *self = *self + duration;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: a later `rhs` gives zero rather than panicking.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(2), Instant::from_millis(7));
        assert_eq!(Instant::from_millis(7) - t, Duration::from_millis(2));
        assert_eq!(t - Instant::from_millis(7), Duration::ZERO);
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
        assert_eq!(
            format!("{:?}", Instant::from_micros(1_500_000)),
            "1.500000s"
        );
    }
}
