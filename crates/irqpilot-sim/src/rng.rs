//! Named, explicitly seeded random streams.
//!
//! Every consumer of randomness (each workload, each drive) draws from its own ChaCha8 stream
//! derived from the run's seed and the consumer's name, so adding a consumer or changing how often
//! one draws never perturbs the others, and the same seed gives the same bytes on every platform
//! (ChaCha8 is a named, specified generator; `rand`'s `StdRng` is not stable across versions).

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// A random stream.
#[derive(Clone, Debug)]
pub struct Stream {
    rng: ChaCha8Rng,
}

/// FNV-1a, to turn a stream name into seed material deterministically.
fn fnv1a(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Stream {
    /// The stream called `name` of the run seeded with `seed`.
    pub fn new(seed: u64, name: &str) -> Stream {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&fnv1a(name).to_le_bytes());
        key[16..24].copy_from_slice(&(name.len() as u64).to_le_bytes());
        Stream {
            rng: ChaCha8Rng::from_seed(key),
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        // Multiply-shift: unbiased enough for simulation purposes and branch-free.
        ((self.rng.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponentially distributed with the given mean (ns), as an integer number of ns.
    pub fn exp_ns(&mut self, mean_ns: f64) -> u64 {
        if !(mean_ns.is_finite() && mean_ns > 0.0) {
            return 0;
        }
        let u = self.unit();
        (-(1.0 - u).ln() * mean_ns).round() as u64
    }

    /// A raw 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_names_independent() {
        let mut a = Stream::new(7, "nic0.rx");
        let mut b = Stream::new(7, "nic0.rx");
        let mut c = Stream::new(7, "nic0.tx");
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert_ne!(
            xa,
            (0..8)
                .map(|_| Stream::new(8, "nic0.rx").next_u64())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn distributions() {
        let mut s = Stream::new(1, "t");
        let n = 200_000;
        let mean: f64 = (0..n).map(|_| s.exp_ns(1000.0) as f64).sum::<f64>() / n as f64;
        assert!((mean - 1000.0).abs() < 15.0, "{mean}");
        let u: f64 = (0..n).map(|_| s.unit()).sum::<f64>() / n as f64;
        assert!((u - 0.5).abs() < 0.01);
        assert!((0..1000).all(|_| s.below(7) < 7));
        assert_eq!(s.below(1), 0);
    }
}
