//! The wall clock, read where a record carries a time people look at (genesis, amnesia
//! markers) and for the incarnation's floor (PROTO-2). Elapsed times use the monotonic clock
//! at their call site.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; zero for a clock set before 1970, `u64::MAX` past the
/// year 584 million.
pub(crate) fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}
