//! The arbiter's random numbers, for the decisions dummynet makes by chance: emulated loss
//! (`plr`) and RED's early drops. A xorshift64* generator (Vigna 2016): fast, good enough
//! for loss emulation, and seeded, so that a run repeats exactly under the same arrivals
//! and clock (the tests rely on it). Only the arbiter draws, so there is no sharing.

use pspat_config::Probability;

/// A seeded xorshift64* generator.
#[derive(Clone, Debug)]
pub(crate) struct Dice(u64);

impl Dice {
    /// A generator seeded with `seed` (0 is replaced: xorshift's state must not be 0).
    pub(crate) fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    #[inline]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `p`.
    #[inline]
    pub(crate) fn chance(&mut self, p: Probability) -> bool {
        // The high 32 bits scaled to 0..1e9: uniform within one part in 4 (2^32 / 1e9).
        ((self.next() >> 32) * 1_000_000_000) >> 32 < u64::from(p.0)
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_hits_its_probability_and_the_extremes_exactly() {
        let mut d = Dice::new(7);
        let n = 1_000_000;
        let hits = (0..n).filter(|_| d.chance(Probability(10_000_000))).count();
        // 1% of a million: 10 000, standard deviation about 99.
        assert!((9_500..=10_500).contains(&hits), "{hits}");
        assert!((0..10_000).all(|_| !d.chance(Probability(0))));
        assert!((0..10_000).all(|_| d.chance(Probability::ONE)));
        let mean = (0..n).map(|_| d.unit()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.002, "{mean}");
    }
}
