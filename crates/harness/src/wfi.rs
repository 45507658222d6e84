//! The measured worst-case fairness index, as dummynet's harness computes it
//! (`gnet_stats_enq`/`gnet_stats_deq` in `test/main.c`).
//!
//! Over each busy period of a flow (from the packet that makes it backlogged to the
//! dequeue that empties it), the flow should have received its share `w / wsum` of what the
//! scheduler sent meanwhile. The shortfall, in bytes,
//!
//! ```text
//! wfi = (sched_bytes_now - sched_bytes_at_start) * w / wsum - flow_bytes_in_period
//! ```
//!
//! is computed when the period ends; the index of a flow is its largest shortfall, and the
//! run's is the largest over flows. As in dummynet, every index starts at 0 (a flow that
//! always got more than its share reports 0), `wsum` is the sum of all flows' weights
//! whether backlogged or not, and the figure is only meaningful for weighted-fair
//! algorithms (for `prio` the weight is a priority).
//!
//! A flow's current [`Period`] is touched on every dequeue, so it lives with the rest of the
//! flow's hot state, in the loop's per-flow table (see [`crate::pattern`]); [`Wfi`] keeps
//! the scheduler's byte count and the cold per-flow figures.
//!
//! Cost: two additions per dequeue, and one multiply and compare when a flow empties.

/// The counters of a flow's current busy period (hot: touched on every dequeue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Period {
    /// Scheduler bytes sent when the period started.
    start: u64,
    /// Bytes the flow sent in the period.
    bytes: u64,
}

/// Worst-case fairness index accounting.
#[derive(Clone, Debug)]
pub struct Wfi {
    /// Per flow `w / wsum` (cold: read when the flow empties).
    share: Vec<f64>,
    /// Per flow largest shortfall so far, in bytes.
    worst: Vec<f64>,
    /// Bytes the scheduler sent.
    sched_bytes: u64,
}

impl Wfi {
    /// Accounting for flows with the given weights.
    pub fn new(weights: &[u32]) -> Self {
        let wsum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        Self {
            share: weights
                .iter()
                .map(|&w| f64::from(w) / wsum.max(1) as f64)
                .collect(),
            worst: vec![0.0; weights.len()],
            sched_bytes: 0,
        }
    }

    /// Borrows the accounting for a batch of operations (see
    /// [`crate::pattern::Pattern::batch`] for the idea).
    #[inline(always)]
    pub fn batch(&mut self) -> Batch<'_> {
        Batch {
            share: &self.share,
            worst: &mut self.worst,
            sched_bytes: self.sched_bytes,
            home: &mut self.sched_bytes,
        }
    }

    /// A flow, whose period is `p`, became backlogged.
    pub fn backlogged(&mut self, p: &mut Period) {
        self.batch().backlogged(p);
    }

    /// A packet of `len` bytes of flow `f`, whose period is `p`, was dequeued; `emptied` if
    /// it was the flow's last.
    pub fn dequeued(&mut self, f: u32, p: &mut Period, len: u32, emptied: bool) {
        self.batch().dequeued(f, p, len, emptied);
    }

    /// Bytes the scheduler sent.
    pub fn sched_bytes(&self) -> u64 {
        self.sched_bytes
    }

    /// The index of flow `f`, in bytes.
    pub fn flow(&self, f: u32) -> f64 {
        self.worst[f as usize]
    }

    /// The largest index and the first flow that has it, or `(0.0, None)` if no flow ever
    /// received less than its share.
    pub fn worst(&self) -> (f64, Option<u32>) {
        let mut best = (0.0, None);
        for (f, &w) in self.worst.iter().enumerate() {
            if w > best.0 {
                best = (w, Some(f as u32));
            }
        }
        best
    }
}

/// The accounting borrowed for a batch of operations (see [`Wfi::batch`]).
pub struct Batch<'a> {
    share: &'a [f64],
    worst: &'a mut [f64],
    sched_bytes: u64,
    home: &'a mut u64,
}

impl Drop for Batch<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.home = self.sched_bytes;
    }
}

impl Batch<'_> {
    /// A flow, whose period is `p`, became backlogged.
    #[inline(always)]
    pub fn backlogged(&mut self, p: &mut Period) {
        *p = Period {
            start: self.sched_bytes,
            bytes: 0,
        };
    }

    /// A packet of `len` bytes of flow `f`, whose period is `p`, was dequeued; `emptied` if
    /// it was the flow's last.
    #[inline(always)]
    pub fn dequeued(&mut self, f: u32, p: &mut Period, len: u32, emptied: bool) {
        self.sched_bytes += u64::from(len);
        p.bytes += u64::from(len);
        if emptied {
            self.ended(f, *p);
        }
    }

    /// Flow `f`'s busy period `p` ended: accounts its shortfall.
    #[inline(always)]
    fn ended(&mut self, f: u32, p: Period) {
        let wfi = (self.sched_bytes - p.start) as f64 * self.share[f as usize] - p.bytes as f64;
        let worst = &mut self.worst[f as usize];
        if wfi > *worst {
            *worst = wfi;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfall_over_a_busy_period() {
        // flows of weight 1 and 3: shares 1/4 and 3/4
        let mut w = Wfi::new(&[1, 3]);
        let mut p = [Period::default(); 2];
        w.backlogged(&mut p[0]);
        w.backlogged(&mut p[1]);
        // flow 1 is served 4 packets of 100 bytes before flow 0's only packet
        for _ in 0..4 {
            w.dequeued(1, &mut p[1], 100, false);
        }
        w.dequeued(0, &mut p[0], 100, true);
        // flow 0: 500 bytes sent in its period, share 1/4: 125 - 100 = 25
        assert_eq!(w.flow(0), 25.0);
        assert_eq!(w.worst(), (25.0, Some(0)));
        // flow 1 empties having had more than its share: index stays 0
        w.dequeued(1, &mut p[1], 100, true);
        assert_eq!(w.flow(1), 0.0);
        assert_eq!(w.sched_bytes(), 600);
        // a new period starts from the current scheduler bytes
        w.backlogged(&mut p[1]);
        w.dequeued(0, &mut p[0], 1000, false);
        w.dequeued(1, &mut p[1], 100, true);
        // 1100 * 3/4 - 100 = 725
        assert_eq!(w.worst(), (725.0, Some(1)));
    }

    #[test]
    fn no_shortfall_reports_zero_and_no_flow() {
        let mut w = Wfi::new(&[1]);
        let mut p = Period::default();
        w.backlogged(&mut p);
        w.dequeued(0, &mut p, 1500, true);
        assert_eq!(w.worst(), (0.0, None));
    }
}
