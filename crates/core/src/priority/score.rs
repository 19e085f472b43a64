//! The priority score of seed 002 (PRI-1) and the order in which candidates and masters rank
//! (PRI-2, PRI-6).

use conclave_protocol::PeerId;

/// PRI-1: `battery% << 24 | min(uptime minutes, 255) << 16 | signal << 8 | random`.
///
/// Battery dominates, then how long the node has been up (a stable node makes a better
/// master), then how well it hears its peers, then a random byte that breaks most ties.
/// `battery_percent` above 100 counts as 100.
pub fn priority_score(battery_percent: u8, uptime_minutes: u64, signal: u8, random: u8) -> u32 {
    let battery = u32::from(battery_percent.min(100));
    // Capped at 255 first, so the conversion cannot fail.
    let uptime = u32::try_from(uptime_minutes.min(255)).unwrap_or(255);
    (battery << 24) | (uptime << 16) | (u32::from(signal) << 8) | u32::from(random)
}

/// The battery percentage a score carries (its top byte).
pub fn battery_of(score: u32) -> u8 {
    // The top byte of a u32 always fits a u8.
    u8::try_from(score >> 24).unwrap_or(u8::MAX)
}

/// PRI-1's signal component: the mean RSSI this node hears its peers at, inverted so that a
/// stronger signal is a larger number: `255 + mean dBm`, clamped to `0..=255` (−40 dBm gives
/// 215, −90 dBm gives 165). With no reading (no radio, or no peer heard yet) it is 0, so a
/// gateway on IP links never outranks one that hears the pods well.
pub fn signal_strength(rssi_dbm: impl IntoIterator<Item = f64>) -> u8 {
    let (sum, count) = rssi_dbm
        .into_iter()
        .filter(|dbm| dbm.is_finite())
        .fold((0.0, 0u32), |(sum, count), dbm| (sum + dbm, count + 1));
    if count == 0 {
        return 0;
    }
    let mean = sum / f64::from(count);
    let inverted = (255.0 + mean).round().clamp(0.0, 255.0);
    // In 0..=255 after the clamp, so the cast is exact.
    inverted as u8
}

/// How a candidate or a master ranks against another: a forced master first (PRI-6), then
/// the higher score, then the byte-wise larger id, so that two different nodes never tie
/// (the seed leaves an exact tie of scores undecided; an id order decides it the same way on
/// every node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Claim {
    /// Forced by configuration or command (PRI-6): wins regardless of score.
    pub forced: bool,
    /// The priority score (PRI-1).
    pub priority: u32,
    /// The node.
    pub id: PeerId,
}

impl Claim {
    /// The claim of a node campaigning with `priority` (candidates are never forced).
    pub fn candidate(priority: u32, id: PeerId) -> Self {
        Self {
            forced: false,
            priority,
            id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PRI-1: each component lands in its own byte, battery on top.
    #[test]
    fn pri1_score_layout() {
        assert_eq!(priority_score(100, 3, 200, 7), 0x64_03_C8_07);
        assert_eq!(priority_score(0, 0, 0, 0), 0);
        // Uptime is capped at 255 minutes, battery at 100 %.
        assert_eq!(priority_score(150, 10_000, 0, 0), 0x64_FF_00_00);
        assert_eq!(battery_of(priority_score(15, 9, 9, 9)), 15);
        // Battery dominates everything below it.
        assert!(priority_score(51, 0, 0, 0) > priority_score(50, 255, 255, 255));
    }

    /// PRI-1: the signal is the inverted mean RSSI, clamped; no reading is 0.
    #[test]
    fn pri1_signal_is_inverted_mean_rssi() {
        assert_eq!(signal_strength([-40.0]), 215);
        assert_eq!(signal_strength([-40.0, -90.0]), 190);
        assert_eq!(signal_strength([]), 0);
        assert_eq!(signal_strength([f64::NAN]), 0);
        assert_eq!(signal_strength([10.0]), 255);
        assert_eq!(signal_strength([-300.0]), 0);
        assert!(signal_strength([-30.0]) > signal_strength([-80.0]));
    }

    /// PRI-6: forced beats any score; then score; then id.
    #[test]
    fn pri6_claim_order() {
        let a = PeerId::new("a").unwrap();
        let b = PeerId::new("b").unwrap();
        let forced_low = Claim {
            forced: true,
            priority: 1,
            id: a,
        };
        assert!(forced_low > Claim::candidate(u32::MAX, b));
        assert!(Claim::candidate(2, a) > Claim::candidate(1, b));
        assert!(Claim::candidate(1, b) > Claim::candidate(1, a));
    }
}
