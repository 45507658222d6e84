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
//!
//! ## The span of a difference
//!
//! A gap is counted when it ends, whole. The difference of two snapshots therefore counts
//! gaps that began before the earlier one: an arbiter descheduled for 50 ms across the
//! earlier snapshot brings all 50 ms into the difference, and on a loaded machine the
//! gaps of a 100 ms window added up to more than 100 ms. So each snapshot carries the
//! interval its counts belong to: `from_ns`, where the interval still open when it was
//! read began (the last drain, or the end of the last voluntary wait), and `to_ns`, when it
//! was read. Every gap counted in `later.since(earlier)` lies within
//! `[earlier.from_ns, later.to_ns]` ([`Stalls::span_ns`]), which [`Stalls::summary`] takes
//! as the span when it is longer than the one it is given: time in gaps never exceeds
//! the span it is a percentage of. (The reasoning is at [`StallCounters::snapshot`].)

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::clock;
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
    /// Where the interval in progress began, ns on [`clock::now_ns`]: the last drain, or the
    /// end of the last voluntary wait (0 before the first). Written by the arbiter (Release,
    /// after the buckets of the gap that ended there), read by itself (Relaxed) and by
    /// [`StallCounters::snapshot`] (Acquire). Never decreases.
    open_since_ns: AtomicU64,
}

impl StallCounters {
    /// A drain at `now_ns`: counts the interval since the last one (or since the end of
    /// the last voluntary wait) if it is at least [`STALL_MIN_NS`], and opens the next.
    #[inline(always)]
    pub fn drained(&self, now_ns: u64) {
        // ORDERING: Relaxed: only this thread writes `open_since_ns`.
        let since = self.open_since_ns.load(Ordering::Relaxed);
        if now_ns > since {
            self.gap(now_ns - since);
            // ORDERING: Release, after the gap's bucket writes: pairs with the Acquire load
            // in `snapshot`, which then sees the buckets of every gap ended by `now_ns`.
            self.open_since_ns.store(now_ns, Ordering::Release);
        }
    }

    /// The interval in progress starts at `now_ns` without a gap being counted: the end
    /// of a voluntary wait (a link sleep, an idle block), or the start of the loop.
    #[inline]
    pub fn restart(&self, now_ns: u64) {
        // ORDERING: Relaxed: own variable (see `drained`).
        if now_ns > self.open_since_ns.load(Ordering::Relaxed) {
            // ORDERING: Release, as in `drained` (no bucket was written since, but the
            // reader's argument only needs every store of this variable to be one).
            self.open_since_ns.store(now_ns, Ordering::Release);
        }
    }

    /// Counts a gap of `gap_ns` if it is at least [`STALL_MIN_NS`] (without moving the
    /// interval in progress: [`StallCounters::drained`] does both).
    #[inline(always)]
    fn gap(&self, gap_ns: u64) {
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

    /// The counters now, with the interval they belong to.
    ///
    /// `from_ns` is read first: its Acquire load pairs with the Release store of the
    /// drain that wrote it, so the buckets read next hold at least every gap that ended by
    /// then; a gap not yet in them ends later, and so begins at or after `from_ns`
    /// (`open_since_ns` never decreases). `to_ns` is read from the clock after the buckets:
    /// each gap in them had ended (it is counted at its end) before they were read. So a
    /// difference `later.since(earlier)` counts only gaps inside
    /// `[earlier.from_ns, later.to_ns]`.
    pub fn snapshot(&self) -> Stalls {
        // ORDERING: Acquire, pairs with the Release stores in `drained` and `restart`.
        let from_ns = self.open_since_ns.load(Ordering::Acquire);
        let count = std::array::from_fn(|k| self.count[k].get());
        let ns = std::array::from_fn(|k| self.ns[k].get());
        Stalls {
            count,
            ns,
            from_ns,
            to_ns: clock::now_ns(),
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

/// Drain-gap counts and times, per bucket (a snapshot, or the difference of two), and
/// the interval they were counted over (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stalls {
    /// Gaps per bucket.
    pub count: [u64; BUCKETS],
    /// Their total length per bucket, ns.
    pub ns: [u64; BUCKETS],
    /// Start of the interval, ns on [`clock::now_ns`]: for a snapshot, where the interval
    /// in progress when it was read began; for a difference, the earlier one's.
    pub from_ns: u64,
    /// End of the interval: when the snapshot was read (the later one's, for a
    /// difference).
    pub to_ns: u64,
}

impl Stalls {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Stalls) -> Stalls {
        Stalls {
            count: std::array::from_fn(|k| self.count[k] - earlier.count[k]),
            ns: std::array::from_fn(|k| self.ns[k] - earlier.ns[k]),
            from_ns: earlier.from_ns,
            to_ns: self.to_ns,
        }
    }

    /// Length of the interval every gap counted here lies in, ns (of a difference; for a
    /// single snapshot, of the interval in progress).
    pub fn span_ns(&self) -> u64 {
        self.to_ns.saturating_sub(self.from_ns)
    }

    /// Number of gaps.
    pub fn gaps(&self) -> u64 {
        self.count.iter().sum()
    }

    /// Total time in gaps, ns.
    pub fn stalled_ns(&self) -> u64 {
        self.ns.iter().sum()
    }

    /// The span [`Stalls::summary`] divides by when given `span_ns`: the longer of it and
    /// the counters' own span, at least 1 ns.
    pub fn summary_span_ns(&self, span_ns: u64) -> u64 {
        span_ns.max(self.span_ns()).max(1)
    }

    /// The figures of these gaps over a span of `span_ns`, or over their own
    /// [`Stalls::span_ns`] when that is longer (a gap in progress at the earlier snapshot
    /// is counted from its start, before the caller's window), and at least 1 ns.
    pub fn summary(&self, span_ns: u64) -> StallSummary {
        let span_ns = self.summary_span_ns(span_ns);
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
        let b = c.snapshot();
        let d = b.since(&a);
        assert_eq!(d.gaps(), 2);
        assert_eq!(d.stalled_ns(), 1_010_000);
        assert_eq!((d.from_ns, d.to_ns), (a.from_ns, b.to_ns));
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
        // Gaps recorded by hand, with no interval of their own: the span given is used.
        let s = Stalls {
            from_ns: 0,
            to_ns: 0,
            ..c.snapshot()
        };
        let sum = s.summary(1_000_000_000);
        assert_eq!(sum.gaps, 10);
        assert!((sum.stalled_pct - 2.0).abs() < 1e-9, "{sum:?}");
        assert_eq!(sum.wait_p99_ns, s.wait_quantile_ns(0.99, 1_000_000_000));
        assert_eq!(sum.longest_at_least_ns, 1 << 20);
    }

    /// The case that gave `bench arch` a stalled_pct of 106 on a loaded machine: a gap in
    /// progress at the earlier snapshot is counted whole in the difference, so its time
    /// must be set against a span that holds all of it, not the snapshots' distance.
    #[test]
    fn a_gap_across_the_earlier_snapshot_stays_inside_the_span() {
        let c = StallCounters::default();
        c.restart(clock::now_ns());
        // The "arbiter" is away 30 ms before the earlier snapshot and 5 ms after it.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let a = c.snapshot();
        std::thread::sleep(std::time::Duration::from_millis(5));
        c.drained(clock::now_ns());
        let b = c.snapshot();
        let d = b.since(&a);
        assert_eq!(d.gaps(), 1);
        let window = b.to_ns - a.to_ns;
        assert!(d.stalled_ns() > window, "the gap began before the window");
        assert!(d.stalled_ns() <= d.span_ns(), "{d:?}");
        let sum = d.summary(window);
        assert!(
            sum.stalled_pct > 50.0 && sum.stalled_pct <= 100.0,
            "{sum:?}"
        );
        // A window longer than the counters' own span is kept.
        let long = d.summary(10 * d.span_ns());
        assert!(
            (long.stalled_pct - sum.stalled_pct / 10.0).abs() < 1e-9,
            "{long:?}"
        );
    }

    #[test]
    fn voluntary_waits_and_repeated_times_count_no_gap() {
        let c = StallCounters::default();
        c.restart(1_000);
        c.restart(1_000_000_000);
        c.drained(1_000_000_000);
        c.drained(1_000_000_100);
        let s = c.snapshot();
        assert_eq!(s.gaps(), 0);
        assert_eq!(s.from_ns, 1_000_000_100);
        // An earlier time never moves the interval back.
        c.restart(5);
        c.drained(7);
        assert_eq!(c.snapshot().from_ns, 1_000_000_100);
    }

    #[test]
    fn no_gaps_no_wait() {
        let s = Stalls::default();
        assert_eq!(s.wait_quantile_ns(0.99, 1_000_000_000), 0.0);
        assert_eq!(s.longest_at_least_ns(), 0);
    }
}
