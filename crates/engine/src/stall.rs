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
//! Invariant: the gaps of `later.since(earlier)` add up to no more than the span
//! [`Stalls::summary`] divides them by, so that `stalled_pct` is at most 100 and the wait
//! quantiles are not inflated.
//!
//! The snapshots' distance alone does not keep it: a gap is counted when it ends, whole,
//! so one in progress at the earlier snapshot began before it. So each snapshot carries an
//! interval: `to_ns`, the clock after its counts were read (each gap in them had ended),
//! and `from_ns`, a time no gap counted after the snapshot begins before: where the
//! interval still open began (the arbiter's last drain), or, when the arbiter was in a
//! voluntary wait, the snapshot's own time (the next interval opens when the wait ends,
//! never before the last snapshot's time: [`StallCounters::wait_ends`]). Every gap of the
//! difference then lies within `[earlier.from_ns, later.to_ns]` ([`Stalls::span_ns`]),
//! and `summary(span)` divides by the longer of `span` and that: the caller's span is
//! widened by the part of the interval in progress at the earlier snapshot that came
//! before it (a gap, or the microseconds since a drain), and not at all when the arbiter
//! was waiting then. (The reasoning is at [`StallCounters::snapshot`].)

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

/// Set in `open_since_ns` while the arbiter is in a voluntary wait (no interval is open);
/// the clock never reaches it (2^63 ns is 292 years).
const WAITING: u64 = 1 << 63;

/// The arbiter's drain-gap counters (arbiter-written).
#[derive(Debug, Default)]
pub struct StallCounters {
    count: [Counter; BUCKETS],
    ns: [Counter; BUCKETS],
    /// Where the interval in progress began, ns on [`clock::now_ns`]: the last drain, or
    /// the end of the last voluntary wait (0 before the first); during a voluntary wait,
    /// its start with [`WAITING`] set. Written by the arbiter only: Release stores after
    /// the bucket writes of the gap that ended there, and one SeqCst store as a wait ends
    /// ([`StallCounters::wait_ends`]); read by itself (Relaxed) and by
    /// [`StallCounters::snapshot`] (SeqCst). Its time never decreases.
    open_since_ns: AtomicU64,
    /// The clock reading of the latest [`StallCounters::snapshot`], ns: where the interval
    /// after a wait opens at the earliest. Raised by every snapshot (SeqCst `fetch_max`,
    /// any thread), read by the arbiter as a wait ends (SeqCst).
    read_ns: AtomicU64,
}

impl StallCounters {
    /// A drain at `now_ns`: counts the interval since the last one (or since the end of
    /// the last voluntary wait) if it is at least [`STALL_MIN_NS`], and opens the next.
    #[inline(always)]
    pub fn drained(&self, now_ns: u64) {
        // ORDERING: Relaxed: only this thread writes `open_since_ns`.
        let since = self.open_since_ns.load(Ordering::Relaxed);
        debug_assert_eq!(since & WAITING, 0, "a drain inside a voluntary wait");
        if now_ns > since {
            self.gap(now_ns - since);
            // ORDERING: Release, after the gap's bucket writes: pairs with the SeqCst (so
            // at least Acquire) load in `snapshot`, which then sees the buckets of every
            // gap ended by `now_ns`.
            self.open_since_ns.store(now_ns, Ordering::Release);
        }
    }

    /// The interval in progress starts at `now_ns` without a gap being counted: the
    /// start of the arbiter's loop (or of floor mode's spinner).
    #[inline]
    pub fn restart(&self, now_ns: u64) {
        // ORDERING: Relaxed: own variable (see `drained`).
        if now_ns > self.open_since_ns.load(Ordering::Relaxed) {
            // ORDERING: Release, as in `drained` (no bucket was written since, but the
            // reader's argument only needs every store of this variable to be one).
            self.open_since_ns.store(now_ns, Ordering::Release);
        }
    }

    /// The arbiter starts a voluntary wait (a link sleep, an idle block) at `now_ns`:
    /// the interval in progress closes without a gap, and none opens until
    /// [`StallCounters::wait_ends`].
    #[inline]
    pub fn wait_begins(&self, now_ns: u64) {
        // ORDERING: Relaxed: own variable (see `drained`).
        let since = self.open_since_ns.load(Ordering::Relaxed) & !WAITING;
        // ORDERING: Release, as in `drained`: a snapshot that reads the flag sees every
        // gap counted before the wait.
        self.open_since_ns
            .store(now_ns.max(since) | WAITING, Ordering::Release);
    }

    /// The voluntary wait ends at `now_ns`: the next interval opens then, or at the last
    /// snapshot's time if that is later (a snapshot taken during the wait may have read
    /// the clock after this thread did; the few nanoseconds between are not counted).
    #[inline]
    pub fn wait_ends(&self, now_ns: u64) {
        // ORDERING: Relaxed: own variable (see `drained`).
        let start = self.open_since_ns.load(Ordering::Relaxed) & !WAITING;
        // ORDERING: SeqCst store (the flag cleared, the time a lower bound of every later
        // gap), then SeqCst load of `read_ns`: with the SeqCst `fetch_max` and load in
        // `snapshot`, a snapshot that still saw the flag raised `read_ns` before this load
        // reads it (the argument is at `snapshot`).
        self.open_since_ns.store(start, Ordering::SeqCst);
        // ORDERING: SeqCst, see above.
        let read = self.read_ns.load(Ordering::SeqCst);
        // ORDERING: Release, as in `drained`.
        self.open_since_ns
            .store(now_ns.max(read).max(start), Ordering::Release);
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
    /// `to_ns` is read from the clock after the buckets: each gap in them had ended (it is
    /// counted at its end) before they were read. `from_ns` bounds from below where any
    /// gap not yet in the buckets begins, read (SeqCst, so at least Acquire) before them:
    ///
    /// - `open_since_ns` holds a time `t`: the store that wrote it came after the bucket
    ///   writes of every gap that ended by `t`, and those are visible in the buckets read
    ///   next. A gap not in them ends later, and begins at or after `t`, since
    ///   `open_since_ns`'s time never decreases. `from_ns` is `t`.
    /// - it holds the wait flag: every gap counted before the wait is in the buckets, and
    ///   the next begins where the wait's end opens the next interval. This thread read the
    ///   clock (`now`) and raised `read_ns` to it before its load; the load read a value
    ///   earlier than the SeqCst store that clears the flag, so it precedes that store in
    ///   the single total order of SeqCst operations, and the arbiter's SeqCst load of
    ///   `read_ns` after that store follows the raise and reads `now` or more. The interval
    ///   opens at or after it: `from_ns` is `now` (or the wait's start if later).
    ///
    /// So a difference `later.since(earlier)` counts only gaps inside
    /// `[earlier.from_ns, later.to_ns]`.
    pub fn snapshot(&self) -> Stalls {
        let now = clock::now_ns();
        // ORDERING: SeqCst, before the SeqCst load below: pairs with the SeqCst store and
        // load in `wait_ends` (see above).
        self.read_ns.fetch_max(now, Ordering::SeqCst);
        // ORDERING: SeqCst (at least Acquire: pairs with the Release stores in `drained`,
        // `restart`, `wait_begins` and `wait_ends`; SeqCst for the wait case above).
        let open = self.open_since_ns.load(Ordering::SeqCst);
        let from_ns = if open & WAITING != 0 {
            now.max(open & !WAITING)
        } else {
            open
        };
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
    /// in progress when it was read began (its own time if the arbiter was in a voluntary
    /// wait); for a difference, the earlier one's.
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

    /// The span [`Stalls::summary`] divides by when given `span_ns`: `span_ns` widened to
    /// the counters' own [`Stalls::span_ns`] when that is longer, at least 1 ns.
    pub fn widened_span_ns(&self, span_ns: u64) -> u64 {
        span_ns.max(self.span_ns()).max(1)
    }

    /// The figures of these gaps over a span of `span_ns`, widened to their own
    /// [`Stalls::span_ns`] when that is longer ([`Stalls::widened_span_ns`]: a gap in
    /// progress at the earlier snapshot is counted from its start, before the caller's
    /// window), so that the time in gaps never exceeds the span it is set against.
    pub fn summary(&self, span_ns: u64) -> StallSummary {
        let span_ns = self.widened_span_ns(span_ns);
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
    use std::time::Duration;

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

    /// The invariant of the module docs when a gap is in progress at the earlier
    /// snapshot: it is counted whole in the difference, so the span divided by reaches
    /// back to where it began, and the time in gaps stays within it however much of the
    /// gap fell before the caller's window.
    #[test]
    fn a_gap_across_the_earlier_snapshot_stays_inside_the_span() {
        let c = StallCounters::default();
        c.restart(clock::now_ns());
        // The "arbiter" is away 30 ms before the earlier snapshot and 5 ms after it.
        std::thread::sleep(Duration::from_millis(30));
        let a = c.snapshot();
        std::thread::sleep(Duration::from_millis(5));
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

    /// A snapshot taken while the arbiter waits (no gap in progress) starts its interval
    /// at its own time, not at the drain before the wait: the gaps after the wait are set
    /// against the caller's window, not against a span widened by the wait.
    #[test]
    fn a_snapshot_inside_a_wait_does_not_widen_the_span() {
        let c = StallCounters::default();
        c.restart(clock::now_ns());
        c.drained(clock::now_ns());
        c.wait_begins(clock::now_ns());
        std::thread::sleep(Duration::from_millis(30));
        let before_a = clock::now_ns();
        let a = c.snapshot();
        assert!(a.from_ns >= before_a, "{a:?} read after {before_a}");
        c.wait_ends(clock::now_ns());
        // Away 5 ms after the wait.
        std::thread::sleep(Duration::from_millis(5));
        c.drained(clock::now_ns());
        let b = c.snapshot();
        let d = b.since(&a);
        assert_eq!(d.gaps(), 1);
        assert!(d.stalled_ns() <= d.span_ns(), "{d:?}");
        assert!(
            d.span_ns() <= b.to_ns - before_a,
            "widened by the wait: {d:?}"
        );
    }

    /// An arbiter that read the clock to end its wait before a snapshot did, but cleared
    /// the wait after that snapshot read the flag, opens its next interval no earlier than
    /// the snapshot's time: the gap that follows stays inside the snapshot's span.
    #[test]
    fn a_wait_ended_across_a_snapshot_opens_after_it() {
        let c = StallCounters::default();
        c.restart(clock::now_ns());
        c.wait_begins(clock::now_ns());
        let woke = clock::now_ns();
        std::thread::sleep(Duration::from_millis(2));
        let a = c.snapshot();
        c.wait_ends(woke);
        std::thread::sleep(Duration::from_millis(5));
        c.drained(clock::now_ns());
        let b = c.snapshot();
        let d = b.since(&a);
        assert_eq!(d.gaps(), 1);
        assert!(d.stalled_ns() <= d.span_ns(), "{d:?}");
    }

    #[test]
    fn voluntary_waits_and_repeated_times_count_no_gap() {
        let c = StallCounters::default();
        c.restart(1_000);
        c.restart(1_000_000_000);
        c.drained(1_000_000_000);
        // A second of waiting is no gap, and neither is what is left of the drain
        // interval before it.
        c.wait_begins(1_000_050_000);
        c.wait_ends(2_000_000_000);
        c.drained(2_000_000_100);
        c.wait_begins(2_000_000_200);
        c.wait_ends(2_000_000_300);
        c.drained(2_000_000_400);
        let s = c.snapshot();
        assert_eq!(s.gaps(), 0);
        assert_eq!(s.from_ns, 2_000_000_400);
        // An earlier time never moves the interval back.
        c.restart(5);
        c.drained(7);
        assert_eq!(c.snapshot().from_ns, 2_000_000_400);
    }

    #[test]
    fn no_gaps_no_wait() {
        let s = Stalls::default();
        assert_eq!(s.wait_quantile_ns(0.99, 1_000_000_000), 0.0);
        assert_eq!(s.longest_at_least_ns(), 0);
    }
}
