//! Shares against weights.
//!
//! Greedy senders 0..M-1 with weights w_i delivered n_i packets (all of the same length,
//! so packets are proportional to bytes). The share is s_i = n_i / sum(n), the target
//! t_i = w_i / sum(w), and the error |s_i / t_i - 1|; [`fairness`] gives the largest over
//! i, and Jain's index of the ratios s_i / t_i. The victim is left out of both sums: it
//! asks for less than its share, and a weighted fair scheduler hands what it leaves to the
//! others in proportion to their weights. With one sender the error is 0 by definition.

use crate::sink_report::SinkReport;

/// One greedy sender's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// Its client number.
    pub client: u32,
    /// Its weight.
    pub weight: u32,
    /// Packets the sink counted.
    pub packets: u64,
    /// Its weight's share of all the weights.
    pub target: f64,
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
}

/// Shares of the greedy senders `0..m` (sender i has weight `weights[i % len]`; `weights`
/// must not be empty), from the sink's counts.
pub fn shares(m: u32, weights: &[u32], sink: &SinkReport) -> Vec<Share> {
    let w = |i: u32| weights[i as usize % weights.len()];
    let packets = |i: u32| sink.client(i).map_or(0, |c| c.packets);
    let total_w: u64 = (0..m).map(|i| u64::from(w(i))).sum();
    let total_n: u64 = (0..m).map(packets).sum();
    (0..m)
        .map(|i| Share {
            client: i,
            weight: w(i),
            packets: packets(i),
            target: f64::from(w(i)) / total_w as f64,
            share: if total_n > 0 {
                packets(i) as f64 / total_n as f64
            } else {
                0.0
            },
        })
        .collect()
}

/// The largest share error and Jain's index of share/target.
pub fn fairness(s: &[Share]) -> Fairness {
    if s.iter().all(|x| x.packets == 0) {
        return Fairness {
            max_share_err: f64::NAN,
            jain: f64::NAN,
        };
    }
    let ratios: Vec<f64> = s.iter().map(|x| x.share / x.target).collect();
    let max_share_err = ratios.iter().map(|r| (r - 1.0).abs()).fold(0.0, f64::max);
    let sum: f64 = ratios.iter().sum();
    let sq: f64 = ratios.iter().map(|r| r * r).sum();
    Fairness {
        max_share_err,
        jain: sum * sum / (ratios.len() as f64 * sq),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sink;

    #[test]
    fn exact_weighted_shares_have_no_error() {
        // Weights 1,2,3,4 repeating over 6 senders: 1,2,3,4,1,2 (sum 13). The victim
        // (client 6) is left out of the shares.
        let s = sink(&[
            (0, 100),
            (1, 200),
            (2, 300),
            (3, 400),
            (4, 100),
            (5, 200),
            (6, 77),
        ]);
        let sh = shares(6, &[1, 2, 3, 4], &s);
        assert_eq!(
            sh.iter().map(|x| x.weight).collect::<Vec<_>>(),
            [1, 2, 3, 4, 1, 2]
        );
        assert!((sh[3].target - 4.0 / 13.0).abs() < 1e-12);
        let f = fairness(&sh);
        assert!(f.max_share_err < 1e-12, "{f:?}");
        assert!((f.jain - 1.0).abs() < 1e-12);
    }

    #[test]
    fn equal_counts_under_unequal_weights_are_wrong_by_the_weight_ratio() {
        // Weights 1 and 3 want 25% / 75%; 50/50 is +100% for the first, -33% for the
        // second.
        let f = fairness(&shares(2, &[1, 3], &sink(&[(0, 500), (1, 500)])));
        assert!((f.max_share_err - 1.0).abs() < 1e-12, "{f:?}");
        // Ratios 2 and 2/3: (8/3)^2 / (2 * (4 + 4/9)) = 0.8.
        assert!((f.jain - 0.8).abs() < 1e-12, "{f:?}");
        // A sender that got nothing is -100%; nothing at all is no value.
        let f = fairness(&shares(2, &[1, 1], &sink(&[(0, 10)])));
        assert!((f.max_share_err - 1.0).abs() < 1e-12);
        assert!(fairness(&shares(2, &[1, 1], &sink(&[])))
            .max_share_err
            .is_nan());
    }
}
