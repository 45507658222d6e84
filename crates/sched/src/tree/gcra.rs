//! A rate limit as a virtual scheduling clock (GCRA, ITU-T I.371): the `rate` and `ceil`
//! buckets of a class.
//!
//! A bucket of rate `r` and burst `b` bytes keeps `tat`, the *theoretical arrival time*:
//! when the bytes charged so far would have finished at rate `r`. It *conforms* at `now`
//! while `tat <= now + tau`, `tau = b / r`: the class is at most `b` bytes ahead of its
//! rate. Charging a packet of `len` bytes moves `tat` to `max(tat, now) + len / r`, so an
//! idle class gains no more than `b` bytes of credit (the `max`), and a conforming class
//! may overdraw by the one packet it was allowed to start (HTB's tokens going negative,
//! `sch_htb.c`'s `htb_accnt_ctokens`). Hence, over any interval `[t1, t2]`, the bytes
//! charged are at most `r (t2 - t1) + b + L` (`L` the largest packet): every packet charged
//! conformed, so the last one at `t <= t2` found `tat <= t + tau`, and `tat` grew by at
//! least `len / r` for every byte charged after `t1` from a value of at least `t1`.
//!
//! Time is in 2^-31 ns in a `u128`, as the engine's link: a byte at 100 Gbit/s (0.08 ns)
//! is exact to 2^-31 ns, so the rate does not drift with rounding at any speed from
//! 1 bit/s up. The caller gives the time (ns); the bucket never reads a clock.

/// Fractional bits of the internal unit.
const FRAC: u32 = 31;

/// A rate and burst, and the class's position against them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gcra {
    /// Cost of a byte in 2^-31 ns; 0 for no limit (always conforms).
    byte_cost: u64,
    /// `tau`, the burst's transmission time, in 2^-31 ns.
    tau: u128,
    /// Theoretical arrival time, in 2^-31 ns.
    tat: u128,
}

impl Gcra {
    /// No limit: every packet conforms.
    pub const UNLIMITED: Gcra = Gcra {
        byte_cost: 0,
        tau: 0,
        tat: 0,
    };

    /// A limit of `rate_bps` bits per second (above 0) with a burst of `burst` bytes.
    pub fn new(rate_bps: u64, burst: u64) -> Self {
        assert!(rate_bps > 0, "a rate limit of 0 is no limit: use UNLIMITED");
        // 8e9 ns * 2^31 / rate, rounded up (never faster than the rate); at most 8e9 * 2^31
        // < 2^64 at 1 bit/s.
        let byte_cost = ((8_000_000_000u128) << FRAC).div_ceil(u128::from(rate_bps));
        let byte_cost = u64::try_from(byte_cost).expect("a byte costs under 2^64 units");
        Self {
            byte_cost,
            tau: u128::from(byte_cost) * u128::from(burst),
            tat: 0,
        }
    }

    /// The same limit with a new rate and burst, keeping the class's position (`tat`): a
    /// re-rated class neither gains nor loses what it was ahead or behind.
    pub fn rerated(self, rate_bps: u64, burst: u64) -> Self {
        let fresh = if rate_bps == 0 {
            Self::UNLIMITED
        } else {
            Self::new(rate_bps, burst)
        };
        Self {
            tat: self.tat,
            ..fresh
        }
    }

    /// Whether this is [`Gcra::UNLIMITED`] (of any position).
    pub fn is_unlimited(&self) -> bool {
        self.byte_cost == 0
    }

    /// Whether a packet may start at `now_ns`.
    #[inline]
    pub fn conforms(&self, now_ns: u64) -> bool {
        self.tat <= (u128::from(now_ns) << FRAC) + self.tau
    }

    /// Charges `bytes` sent at `now_ns`.
    #[inline]
    pub fn charge(&mut self, now_ns: u64, bytes: u32) {
        if self.byte_cost == 0 {
            return;
        }
        let now = u128::from(now_ns) << FRAC;
        self.tat = self.tat.max(now) + u128::from(self.byte_cost) * u128::from(bytes);
    }

    /// The first whole ns at which it conforms again (at most `now` if it conforms).
    #[inline]
    pub fn conforming_at(&self) -> u64 {
        let t = self.tat.saturating_sub(self.tau);
        u64::try_from(t.div_ceil(1 << FRAC)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        // 8 Mbit/s: 1 us per byte. Burst 3000 bytes: two 1500-byte packets at once, a third
        // (the overdraft) too, then one per 1.5 ms.
        let mut g = Gcra::new(8_000_000, 3000);
        let mut sent = 0;
        while g.conforms(0) {
            g.charge(0, 1500);
            sent += 1;
        }
        assert_eq!(sent, 3, "burst of two packets plus the one that overdraws");
        assert_eq!(g.conforming_at(), 1_500_000);
        assert!(!g.conforms(1_499_999));
        assert!(g.conforms(1_500_000));
    }

    #[test]
    fn idle_time_earns_at_most_the_burst() {
        let mut g = Gcra::new(8_000_000, 1500);
        g.charge(0, 1500);
        // a second later: the credit is one burst, not a second's worth
        let t = 1_000_000_000;
        let mut sent = 0;
        while g.conforms(t) {
            g.charge(t, 1500);
            sent += 1;
        }
        assert_eq!(sent, 2);
    }

    #[test]
    fn no_drift_at_100_gbit() {
        // 100 Gbit/s: 0.08 ns a byte, rounded up to a whole 2^-31 ns. A billion 1500-byte
        // packets back to back take 120 s, never less, and late by at most 1e-9 of it.
        let mut g = Gcra::new(100_000_000_000, 0);
        for _ in 0..1000 {
            g.charge(0, 1500);
        }
        let per_1000 = g.tat;
        assert_eq!(per_1000 >> FRAC, 120_000, "1000 packets take 120 us");
        let err = (per_1000 * 1_000_000) as f64 / (1u128 << FRAC) as f64 - 120e9;
        assert!(
            (0.0..120.0).contains(&err),
            "drift {err} ns over a billion packets"
        );
    }

    #[test]
    fn unlimited_always_conforms_and_rerating_keeps_the_position() {
        let mut u = Gcra::UNLIMITED;
        u.charge(0, 1 << 20);
        assert!(u.conforms(0) && u.is_unlimited());
        let mut g = Gcra::new(8_000_000, 0);
        g.charge(0, 1000); // tat = 1 ms
        let r = g.rerated(16_000_000, 0);
        assert_eq!(r.conforming_at(), 1_000_000, "the debt stays");
        assert!(g.rerated(0, 0).is_unlimited());
    }
}
