//! Drain gaps: how long the arbiter went without reading the client mailboxes.
//!
//! While it has work, the arbiter drains the mailboxes every Delta_A (1 us by default) or
//! as soon as the scan in progress ends. When the interval between two drains is much
//! longer than that, something kept it away, and a packet that reached a mailbox meanwhile
//! waited for it: one scan did a lot of work (with an unlimited link, `scan_batch`
//! dequeues), a system call of its own took long (a `membarrier` waits for every other CPU
//! of the process), or the operating system or the hypervisor did not run the arbiter's
//! CPU (another thread, an interrupt, a virtual CPU descheduled). Eq. 1 of the PSPAT paper
//! counts Delta_A but none of these. Voluntary waits (link sleeps, idle blocks) are not
//! gaps.
//!
//! The arbiter counts intervals of at least [`STALL_MIN_NS`] in power-of-two buckets
//! (count and total time per bucket): a branch per drain, a record only for the long ones.
//! [`Stalls`] turns two snapshots into the figure that matters for latency: the wait a
//! packet arriving at a uniformly random instant would have at a given quantile because
//! of the gaps alone ([`Stalls::wait_quantile_ns`]), a floor under any packet's latency
//! at that quantile.

use serde::Serialize;

use crate::stats::Counter;

/// Shortest gap counted, ns (2^12: about 4 us, four times the default Delta_A).
pub const STALL_MIN_NS: u64 = 1 << STALL_MIN_SHIFT;
const STALL_MIN_SHIFT: u32 = 12;
/// Buckets: `[2^(12 + k), 2^(13 + k))` ns for `k < BUCKETS - 1`, the last one open-ended
/// (from about 134 ms).
pub const BUCKETS: usize = 16;

fn bucket(gap_ns: u64) -> usize {
    let k = (63 - gap_ns.leading_zeros()).saturating_sub(STALL_MIN_SHIFT) as usize;
    k.min(BUCKETS - 1)
}

/// The arbiter's drain-gap counters (arbiter-written).
#[derive(Debug, Default)]
pub struct StallCounters {
    count: [Counter; BUCKETS],
    ns: [Counter; BUCKETS],
}

impl StallCounters {
    /// Counts the interval between two drains if it is at least [`STALL_MIN_NS`].
    #[inline(always)]
    pub fn gap(&self, gap_ns: u64) {
        if gap_ns >= STALL_MIN_NS {
            self.record(gap_ns);
        }
    }

    #[cold]
    #[inline(never)]
    fn record(&self, gap_ns: u64) {
        let k = bucket(gap_ns);
        self.count[k].add(1);
        self.ns[k].add(gap_ns);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Stalls {
        Stalls {
            count: std::array::from_fn(|k| self.count[k].get()),
            ns: std::array::from_fn(|k| self.ns[k].get()),
        }
    }
}

/// What the gaps of a span amount to ([`Stalls::summary`]), as the tools report it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StallSummary {
    /// Gaps of at least [`STALL_MIN_NS`].
    pub gaps: u64,
    /// Percent of the span spent in them.
    pub stalled_pct: f64,
    /// p99 of the wait they alone impose on a packet arriving at a random instant.
    pub wait_p99_ns: f64,
    /// The longest gap's bucket floor (power of two), ns.
    pub longest_at_least_ns: u64,
}

/// Drain-gap counts and times, per bucket (a snapshot, or the difference of two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stalls {
    /// Gaps per bucket.
    pub count: [u64; BUCKETS],
    /// Their total length per bucket, ns.
    pub ns: [u64; BUCKETS],
}

impl Stalls {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Stalls) -> Stalls {
        Stalls {
            count: std::array::from_fn(|k| self.count[k] - earlier.count[k]),
            ns: std::array::from_fn(|k| self.ns[k] - earlier.ns[k]),
        }
    }

    /// Number of gaps.
    pub fn gaps(&self) -> u64 {
        self.count.iter().sum()
    }

    /// Total time in gaps, ns.
    pub fn stalled_ns(&self) -> u64 {
        self.ns.iter().sum()
    }

    /// The figures of these gaps over a span of `span_ns` (at least 1).
    pub fn summary(&self, span_ns: u64) -> StallSummary {
        let span_ns = span_ns.max(1);
        StallSummary {
            gaps: self.gaps(),
            stalled_pct: self.stalled_ns() as f64 * 100.0 / span_ns as f64,
            wait_p99_ns: self.wait_quantile_ns(0.99, span_ns),
            longest_at_least_ns: self.longest_at_least_ns(),
        }
    }

    /// Longest gap's bucket floor, ns (0 if none).
    pub fn longest_at_least_ns(&self) -> u64 {
        (0..BUCKETS)
            .rev()
            .find(|&k| self.count[k] > 0)
            .map_or(0, |k| STALL_MIN_NS << k)
    }

    /// Over a span of `span_ns`, the time during which a packet arriving then would wait at
    /// least `x_ns` for the arbiter: the sum over gaps `g` of `max(0, g - x)` (gaps taken at
    /// their bucket's mean length).
    fn waiting_at_least(&self, x_ns: f64) -> f64 {
        (0..BUCKETS)
            .filter(|&k| self.count[k] > 0)
            .map(|k| (self.ns[k] as f64 - self.count[k] as f64 * x_ns).max(0.0))
            .sum()
    }

    /// The `q`-quantile (e.g. 0.99) of the wait that the gaps alone impose on a packet
    /// arriving at a uniformly random instant of a span of `span_ns`: the smallest `x` such
    /// that a fraction of at most `1 - q` of the span is spent at least `x` before a gap's
    /// end. 0 when the gaps cover less than that fraction. Each gap is taken at its
    /// bucket's mean length, so the result is an estimate within that bucket.
    pub fn wait_quantile_ns(&self, q: f64, span_ns: u64) -> f64 {
        let budget = (1.0 - q).max(0.0) * span_ns as f64;
        if self.waiting_at_least(0.0) <= budget {
            return 0.0;
        }
        // waiting_at_least is continuous and non-increasing in x, zero beyond the
        // longest mean: bisect.
        let (mut lo, mut hi) = (0.0f64, 0.0f64);
        for k in 0..BUCKETS {
            if self.count[k] > 0 {
                hi = hi.max(self.ns[k] as f64 / self.count[k] as f64);
            }
        }
        for _ in 0..64 {
            let mid = (lo + hi) / 2.0;
            if self.waiting_at_least(mid) > budget {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn short_gaps_are_not_counted_and_long_ones_are_bucketed() {
        let c = StallCounters::default();
        c.gap(STALL_MIN_NS - 1);
        c.gap(500);
        assert_eq!(c.snapshot().gaps(), 0);
        c.gap(STALL_MIN_NS);
        c.gap(2 * STALL_MIN_NS - 1);
        c.gap(2 * STALL_MIN_NS);
        c.gap(u64::MAX / 2);
        let s = c.snapshot();
        assert_eq!(s.count[0], 2);
        assert_eq!(s.count[1], 1);
        assert_eq!(s.count[BUCKETS - 1], 1);
        assert_eq!(s.ns[0], 3 * STALL_MIN_NS - 1);
        assert_eq!(s.longest_at_least_ns(), STALL_MIN_NS << (BUCKETS - 1));
    }

    #[test]
    fn differences_count_what_happened_in_between() {
        let c = StallCounters::default();
        c.gap(10_000);
        let a = c.snapshot();
        c.gap(10_000);
        c.gap(1_000_000);
        let d = c.snapshot().since(&a);
        assert_eq!(d.gaps(), 2);
        assert_eq!(d.stalled_ns(), 1_010_000);
    }

    /// Records `n` gaps of `ns` each.
    fn record(c: &StallCounters, n: usize, ns: u64) {
        for _ in 0..n {
            c.gap(ns);
        }
    }

    #[test]
    fn the_wait_quantile_matches_a_hand_computed_case() {
        // One second with 100 gaps of exactly 20 us (2 ms in all): a random arrival
        // waits at least x with probability 100 * (20 us - x) / 1 s. For the 1% tail
        // that is 10 ms: more than the 2 ms covered, so p99 is 0; for the 0.1% tail,
        // 1 ms = 100 * (20 us - x) gives x = 10 us.
        let c = StallCounters::default();
        record(&c, 100, 20_000);
        let s = c.snapshot();
        assert_eq!(s.wait_quantile_ns(0.99, 1_000_000_000), 0.0);
        let p999 = s.wait_quantile_ns(0.999, 1_000_000_000);
        assert!((p999 - 10_000.0).abs() < 1.0, "{p999}");
        // Longer gaps in the same span move the tail out.
        record(&c, 10, 2_000_000);
        let s = c.snapshot();
        // 10 * (2 ms - x) + (at x >= 20 us, nothing from the short ones) = 10 ms
        // gives x = 1 ms.
        let p99 = s.wait_quantile_ns(0.99, 1_000_000_000);
        assert!((p99 - 1_000_000.0).abs() < 1.0, "{p99}");
    }

    #[test]
    fn the_summary_matches_its_parts() {
        let c = StallCounters::default();
        record(&c, 10, 2_000_000);
        let s = c.snapshot();
        let sum = s.summary(1_000_000_000);
        assert_eq!(sum.gaps, 10);
        assert!((sum.stalled_pct - 2.0).abs() < 1e-9, "{sum:?}");
        assert_eq!(sum.wait_p99_ns, s.wait_quantile_ns(0.99, 1_000_000_000));
        assert_eq!(sum.longest_at_least_ns, 1 << 20);
    }

    #[test]
    fn no_gaps_no_wait() {
        let s = Stalls::default();
        assert_eq!(s.wait_quantile_ns(0.99, 1_000_000_000), 0.0);
        assert_eq!(s.longest_at_least_ns(), 0);
    }
}
