//! Shares against their targets.
//!
//! Greedy senders 0..M-1 with weights w_i offered d_i packets/s (the generator's rate of
//! each, over its whole run) and the sink counted r_i packets/s of each in its window (all
//! of the same length, so packets are proportional to bytes). What a weighted fair shaper
//! owes them is the weighted max-min fair allocation ([`max_min_fair`], water-filling) of
//! the capacity they actually got, C = sum(r_i), given their demands d_i: a sender that
//! asks for less than its weighted part of C gets what it asks for, and the rest share
//! what it leaves by weight. The target t_i is that allocation's share of the whole,
//! a_i / sum(a), and the sender's share s_i = r_i / sum(r).
//!
//! When every sender asks for more than its weighted part, t_i = w_i / sum(w) (the old
//! target, still given as `target_weight`); when nobody has to lose anything (the senders
//! cannot fill the link), t_i = d_i / sum(d): the shaper is right to pass the offered
//! proportions through. Rates, not counts, are compared: the generator's run and the
//! sink's window differ in length.
//!
//! The error is |s_i / t_i - 1|; [`fairness`] gives the largest over i, and Jain's index of
//! the ratios s_i / t_i. The victim is left out of both sums: it asks for less than its
//! share, and a weighted fair scheduler hands what it leaves to the others in proportion
//! to their weights. With one sender the error is 0 by definition.
//!
//! A caveat the numbers cannot show: d_i is what the sender's socket accepted. A shaper
//! whose queues hold the senders' datagrams (HTB's qdisc: they stay charged to the
//! sockets' send buffers) blocks them, so part of what it refused them is missing from
//! their demand too; `max_share_err_weight` (the error against w_i / sum(w)) shows what
//! the weights alone would say.

use crate::gen_report::GenReport;
use crate::sink_report::SinkReport;
use pspat_sched::reference::fluid::max_min_fair;

/// One greedy sender's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// Its client number.
    pub client: u32,
    /// Its weight.
    pub weight: u32,
    /// Packets the sink counted.
    pub packets: u64,
    /// Packets per second it offered (the generator's rate, over the generator's run).
    pub offered_pps: f64,
    /// Packets per second the sink counted (over the sink's window).
    pub delivered_pps: f64,
    /// Its share of the max-min fair allocation of what the greedy senders got.
    pub target: f64,
    /// Its weight's share of all the weights (the target when everyone is greedy).
    pub target_weight: f64,
    /// Its packets' share of all the greedy senders' (0 when none got through).
    pub share: f64,
}

/// How far the shares are from their targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fairness {
    /// The largest |share/target - 1| (NaN when nothing got through).
    pub max_share_err: f64,
    /// Jain's index of share/target (NaN when nothing got through).
    pub jain: f64,
    /// The largest |share/target_weight - 1| (NaN when nothing got through).
    pub max_share_err_weight: f64,
}

/// Shares of the greedy senders `0..m` (sender i has weight `weights[i % len]`; `weights`
/// must not be empty, nor hold a 0), from the generator's and the sink's reports.
pub fn shares(m: u32, weights: &[u32], gen: &GenReport, sink: &SinkReport) -> Vec<Share> {
    let w = |i: u32| weights[i as usize % weights.len()];
    let packets = |i: u32| sink.client(i).map_or(0, |c| c.packets);
    let delivered = |i: u32| sink.client(i).map_or(0.0, |c| c.pps);
    let offered = |i: u32| {
        gen.flows
            .iter()
            .find(|f| f.client == i && !f.victim)
            .map_or(0.0, |f| f.pps)
    };
    let weights_f: Vec<f64> = (0..m).map(|i| f64::from(w(i))).collect();
    let demands: Vec<f64> = (0..m).map(offered).collect();
    let capacity: f64 = (0..m).map(delivered).sum();
    let alloc = max_min_fair(capacity, &weights_f, &demands);
    let total_alloc: f64 = alloc.iter().sum();
    let total_w: f64 = weights_f.iter().sum();
    let total_n: u64 = (0..m).map(packets).sum();
    (0..m)
        .map(|i| {
            let k = i as usize;
            Share {
                client: i,
                weight: w(i),
                packets: packets(i),
                offered_pps: demands[k],
                delivered_pps: delivered(i),
                target: if total_alloc > 0.0 {
                    alloc[k] / total_alloc
                } else {
                    0.0
                },
                target_weight: weights_f[k] / total_w,
                share: if total_n > 0 {
                    packets(i) as f64 / total_n as f64
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// The largest share error and Jain's index of share/target, and the largest error
/// against the weights alone.
pub fn fairness(s: &[Share]) -> Fairness {
    if s.iter().all(|x| x.packets == 0) {
        return Fairness {
            max_share_err: f64::NAN,
            jain: f64::NAN,
            max_share_err_weight: f64::NAN,
        };
    }
    let ratios: Vec<f64> = s.iter().map(|x| ratio(x.share, x.target)).collect();
    let max_err = |r: &[f64]| r.iter().map(|r| (r - 1.0).abs()).fold(0.0, f64::max);
    let by_weight: Vec<f64> = s.iter().map(|x| ratio(x.share, x.target_weight)).collect();
    let sum: f64 = ratios.iter().sum();
    let sq: f64 = ratios.iter().map(|r| r * r).sum();
    Fairness {
        max_share_err: max_err(&ratios),
        jain: sum * sum / (ratios.len() as f64 * sq),
        max_share_err_weight: max_err(&by_weight),
    }
}

/// share / target, where a target of 0 (a sender that offered nothing) is met exactly by
/// a share of 0 (ratio 1) and missed without bound by anything more.
fn ratio(share: f64, target: f64) -> f64 {
    match (share, target) {
        (s, t) if t > 0.0 => s / t,
        (s, _) if s > 0.0 => f64::INFINITY,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sink;

    /// A generator report where sender i offered `pps[i]` packets/s, and a victim.
    fn gen(pps: &[f64]) -> GenReport {
        let mut g = crate::fixtures::gen(pps.len() as u32, true, 100, 1, 1.0);
        for (f, &p) in g.flows.iter_mut().zip(pps) {
            f.pps = p;
        }
        g
    }

    #[test]
    fn saturated_senders_are_held_to_their_weights() {
        // Weights 1,2,3,4 repeating over 6 senders: 1,2,3,4,1,2 (sum 13), each offering
        // 1000/s, far more than the 1300/s they got. The victim (client 6) is left out.
        let counts = [(0, 100), (1, 200), (2, 300), (3, 400), (4, 100), (5, 200)];
        let s = sink(&[counts.as_slice(), &[(6, 77)]].concat());
        let sh = shares(6, &[1, 2, 3, 4], &gen(&[1000.0; 6]), &s);
        assert_eq!(
            sh.iter().map(|x| x.weight).collect::<Vec<_>>(),
            [1, 2, 3, 4, 1, 2]
        );
        assert!((sh[3].target - 4.0 / 13.0).abs() < 1e-12);
        assert!((sh[3].target_weight - 4.0 / 13.0).abs() < 1e-12);
        assert_eq!((sh[3].offered_pps, sh[3].delivered_pps), (1000.0, 400.0));
        let f = fairness(&sh);
        assert!(f.max_share_err < 1e-12, "{f:?}");
        assert!(f.max_share_err_weight < 1e-12, "{f:?}");
        assert!((f.jain - 1.0).abs() < 1e-12);
    }

    #[test]
    fn senders_that_cannot_fill_the_link_are_owed_what_they_offered() {
        // Weights 1 and 3, each offering 500/s, and all of it got through: nobody had to
        // lose anything, so 50/50 is right (the weights alone would call it +100%).
        let sh = shares(
            2,
            &[1, 3],
            &gen(&[500.0, 500.0]),
            &sink(&[(0, 500), (1, 500)]),
        );
        let f = fairness(&sh);
        assert!(f.max_share_err < 1e-12, "{f:?}");
        assert!((f.max_share_err_weight - 1.0).abs() < 1e-12, "{f:?}");
        // One light sender (100/s of its 250 part) and a heavy one: the light one gets
        // its 100, the heavy one the other 900 of the 1000 delivered.
        let sh = shares(
            2,
            &[1, 3],
            &gen(&[1000.0, 100.0]),
            &sink(&[(0, 900), (1, 100)]),
        );
        assert!((sh[0].target - 0.9).abs() < 1e-12, "{sh:?}");
        assert!(fairness(&sh).max_share_err < 1e-12);
        // The same demands, and the shaper let the light one through at 50/s and gave
        // the heavy one 950: the light one is -50%.
        let sh = shares(
            2,
            &[1, 3],
            &gen(&[1000.0, 100.0]),
            &sink(&[(0, 950), (1, 50)]),
        );
        let f = fairness(&sh);
        assert!((sh[1].target - 0.1).abs() < 1e-12, "{sh:?}");
        assert!((f.max_share_err - 0.5).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn equal_counts_under_unequal_weights_are_wrong_by_the_weight_ratio() {
        // Weights 1 and 3, both greedy, want 25% / 75%; 50/50 is +100% for the first,
        // -33% for the second.
        let g = gen(&[1e6, 1e6]);
        let f = fairness(&shares(2, &[1, 3], &g, &sink(&[(0, 500), (1, 500)])));
        assert!((f.max_share_err - 1.0).abs() < 1e-12, "{f:?}");
        // Ratios 2 and 2/3: (8/3)^2 / (2 * (4 + 4/9)) = 0.8.
        assert!((f.jain - 0.8).abs() < 1e-12, "{f:?}");
        // A sender that got nothing is -100%; nothing at all is no value.
        let f = fairness(&shares(2, &[1, 1], &g, &sink(&[(0, 10)])));
        assert!((f.max_share_err - 1.0).abs() < 1e-12);
        assert!(fairness(&shares(2, &[1, 1], &g, &sink(&[])))
            .max_share_err
            .is_nan());
        // A sender that offered nothing is owed nothing: 0 of it is exact, and the other
        // is owed everything.
        let f = fairness(&shares(2, &[1, 1], &gen(&[0.0, 10.0]), &sink(&[(1, 10)])));
        assert!(f.max_share_err < 1e-12, "{f:?}");
        assert_eq!(ratio(0.5, 0.0), f64::INFINITY);
    }
}
