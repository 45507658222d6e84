//! A small deterministic random number generator (wyrand, Wang Yi's `wyhash` family), so
//! that a seed reproduces a bursty run exactly on every machine and Rust version.

/// wyrand: 64 bits of state, one multiply per number; passes BigCrush and PractRand.
#[derive(Clone, Copy, Debug)]
pub struct WyRand {
    state: u64,
}

impl WyRand {
    /// A generator seeded with `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift (Lemire); the bias, below
    /// `n / 2^64`, is irrelevant here.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_per_seed() {
        let a: Vec<u64> = {
            let mut r = WyRand::new(7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let mut r = WyRand::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        let mut r = WyRand::new(8);
        assert_ne!(a[0], r.next_u64());
    }

    #[test]
    fn below_covers_the_range_and_stays_in_it() {
        let mut r = WyRand::new(1);
        let mut seen = [0u32; 16];
        for _ in 0..16_000 {
            seen[r.below(16) as usize] += 1;
        }
        // each value about 1000 times
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(r.below(1), 0);
    }
}
