//! Random early detection of a queue as dummynet does it (`red` and `gred`; FreeBSD's
//! `ip_dn_io.c`, after Floyd and Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", 1993).
//!
//! Per queue: `avg`, an exponentially weighted moving average of the queue's length with
//! weight `w_q`, updated on every arrival. After the queue was empty for a while, `avg`
//! decays as if `m` empty samples had been taken, `m` being the idle time over the time the
//! link takes to send an average packet (dummynet's `lookup_step`, 512 bytes), and drops
//! to 0 past 256 of them (`lookup_depth`); on an unlimited link it drops to 0. Then:
//! - `avg <= min_th`: no drop;
//! - `min_th < avg < max_th`: probability `p_b` rising linearly from 0 to `max_p`;
//! - `avg >= max_th`: drop (`red`); with `gred`, `p_b` keeps rising linearly from `max_p`
//!   at `max_th` to 1 at `2 max_th`.
//!
//! As dummynet, the drop is spread evenly between drops: after a drop (or on entering the
//! drop zone) a uniform number `R` is drawn, and the `count`-th packet after it is dropped
//! once `count * p_b > R`. The average is kept in floating point where dummynet uses 16
//! fractional bits; decisions differ only where the two roundings straddle a threshold.
//! The time the queue became empty is taken as the last arrival to it (what the engine
//! records per queue), so the decay can only be larger than dummynet's.

use pspat_config::Red;

use crate::dice::Dice;

/// dummynet's average packet size for the idle decay, bytes.
const AVG_PKT_BYTES: u32 = 512;
/// Past this many average packets of idle time the average is 0 (dummynet's
/// `lookup_depth`).
const LOOKUP_DEPTH: u64 = 256;

/// One queue's RED state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RedQueue {
    avg: f64,
    /// Packets since the last drop, -1 outside the drop zone.
    count: i64,
    random: f64,
}

impl Default for RedQueue {
    fn default() -> Self {
        Self {
            avg: 0.0,
            count: -1,
            random: 0.0,
        }
    }
}

impl RedQueue {
    /// Whether to drop a packet arriving at a queue of `q_size` (packets, or bytes when the
    /// thresholds are bytes). `idle_ns` is how long the queue has been empty when it is;
    /// `byte_ns` the link's transmission time per byte (0: unlimited).
    pub(crate) fn drops(
        &mut self,
        r: &Red,
        q_size: u64,
        idle_ns: Option<u64>,
        byte_ns: f64,
        dice: &mut Dice,
    ) -> bool {
        let w = r.w_q.as_f64();
        match idle_ns {
            None => self.avg += (q_size as f64 - self.avg) * w,
            Some(t) => {
                let step = byte_ns * f64::from(AVG_PKT_BYTES);
                let m = if step > 0.0 {
                    (t as f64 / step) as u64
                } else {
                    u64::MAX
                };
                self.avg = if m > LOOKUP_DEPTH {
                    0.0
                } else {
                    self.avg * (1.0 - w).powi(m as i32)
                };
            }
        }
        let (min, max, max_p) = (r.min_th as f64, r.max_th as f64, r.max_p.as_f64());
        let p_b = if self.avg >= max {
            if !r.gentle {
                self.count = -1;
                return true;
            }
            max_p + (1.0 - max_p) * (self.avg - max) / max
        } else if self.avg > min {
            max_p * (self.avg - min) / (max - min)
        } else {
            self.count = -1;
            return false;
        };
        self.count += 1;
        if self.count == 0 {
            self.random = dice.unit();
            return false;
        }
        if p_b * self.count as f64 > self.random {
            self.count = 0;
            self.random = dice.unit();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pspat_config::Probability;

    fn red(gentle: bool) -> Red {
        Red {
            w_q: Probability(1_000_000_000), // the average is the sample
            min_th: 10,
            max_th: 20,
            max_p: Probability(100_000_000), // 0.1
            gentle,
        }
    }

    /// Drop fraction at a steady queue length.
    fn fraction(r: &Red, q: u64) -> f64 {
        let mut st = RedQueue::default();
        let mut dice = Dice::new(3);
        let n = 200_000;
        let d = (0..n)
            .filter(|_| st.drops(r, q, None, 1.0, &mut dice))
            .count();
        d as f64 / n as f64
    }

    #[test]
    fn drop_probability_follows_the_thresholds() {
        let r = red(false);
        assert_eq!(fraction(&r, 10), 0.0, "at min_th: none");
        assert_eq!(fraction(&r, 20), 1.0, "at max_th: all");
        // Halfway, p_b = 0.05; spreading drops uniformly gives about 2 p_b / (1 + p_b)
        // (Floyd and Jacobson's "uniform" method): between p_b and 2 p_b.
        let f = fraction(&r, 15);
        assert!((0.05..0.1).contains(&f), "{f}");
        let g = red(true);
        let f = fraction(&g, 30); // p_b = 0.1 + 0.9 * 0.5 = 0.55
        assert!((0.55..1.0).contains(&f), "{f}");
        // At 2 max_th, p_b = 1: all but the packet that enters the drop zone (as dummynet,
        // which draws R on it and drops from the next one).
        let f = fraction(&g, 40);
        assert!(f > 0.9999 && f < 1.0, "{f}");
    }

    #[test]
    fn an_idle_queue_forgets_its_average() {
        let r = Red {
            w_q: Probability(500_000_000),
            ..red(false)
        };
        let mut st = RedQueue::default();
        let mut dice = Dice::new(1);
        for _ in 0..50 {
            st.drops(&r, 100, None, 1.0, &mut dice);
        }
        assert!(st.avg > 99.0);
        // 512 ns per average packet: 2 packets' time halves it twice.
        st.drops(&r, 0, Some(1024), 1.0, &mut dice);
        assert!(
            (st.avg - st.avg.clamp(24.0, 26.0)).abs() < 1e-9,
            "{}",
            st.avg
        );
        st.drops(&r, 0, Some(512 * 257), 1.0, &mut dice);
        assert_eq!(st.avg, 0.0);
    }
}
