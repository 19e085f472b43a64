//! The injected source of randomness (RAFT-2's randomized timeouts, the simulator's faults).
//!
//! The core never asks the operating system for randomness: whoever drives a state machine
//! gives it a [`SeededRng`], so a run replays exactly from its seed. The generator is
//! xoshiro256++ (Blackman and Vigna), seeded through SplitMix64; both are public-domain
//! algorithms chosen for being small, fast and statistically sound for timeouts and fault
//! injection. It is not a cryptographic generator and is never used for keys.

use std::time::Duration;

/// A small deterministic pseudo-random generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeededRng {
    state: [u64; 4],
}

/// One step of SplitMix64, used to spread a 64-bit seed over the generator's 256-bit state.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SeededRng {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let state = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Self { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = &mut self.state;
        let result = s0.wrapping_add(*s3).rotate_left(23).wrapping_add(*s0);
        let t = *s1 << 17;
        *s2 ^= *s0;
        *s3 ^= *s1;
        *s1 ^= *s2;
        *s0 ^= *s3;
        *s2 ^= t;
        *s3 = s3.rotate_left(45);
        result
    }

    /// A uniform number in `0..bound` (0 when `bound` is 0), without modulo bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // Lemire's multiply-and-reject: the high half of a 128-bit product is uniform once the
        // few biased low values are rejected.
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// A uniform number in `low..high` (`low` when the range is empty).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low))
    }

    /// A uniform duration in `[low, high)`, at microsecond resolution (`low` when empty).
    pub fn duration_between(&mut self, low: Duration, high: Duration) -> Duration {
        let low_us = u64::try_from(low.as_micros()).unwrap_or(u64::MAX);
        let high_us = u64::try_from(high.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(self.between(low_us, high_us))
    }

    /// `true` with probability `p` (clamped to 0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        // 53 random bits make an exact f64 in [0, 1).
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }

    /// An independent generator derived from this one, for a sub-component that needs its own
    /// stream (one per simulated node) without disturbing the parent's sequence more than once.
    pub fn fork(&mut self) -> SeededRng {
        SeededRng::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = SeededRng::new(42);
        let mut b = SeededRng::new(42);
        let mut c = SeededRng::new(43);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn ranges_hold_and_cover() {
        let mut rng = SeededRng::new(7);
        let mut hits = [0u32; 10];
        for _ in 0..10_000 {
            let x = rng.between(10, 20);
            assert!((10..20).contains(&x));
            hits[(x - 10) as usize] += 1;
        }
        // Every value of a uniform range shows up about 1,000 times in 10,000 draws.
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.between(5, 5), 5);
        let d = rng.duration_between(Duration::from_millis(150), Duration::from_millis(300));
        assert!(d >= Duration::from_millis(150) && d < Duration::from_millis(300));
    }

    #[test]
    fn chance_matches_probability() {
        let mut rng = SeededRng::new(9);
        let hits = (0..20_000).filter(|_| rng.chance(0.25)).count();
        assert!((4_500..5_500).contains(&hits), "{hits}");
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
