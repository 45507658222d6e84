//! Service metrics of a transmission trace per class of a tree: T-WFI with the class's
//! share, and delay against hierarchical GPS ([`super::hgps`]). The per-class counterpart of
//! [`super::wfi`], which measures flows against flat GPS.
//!
//! # The tree and the shares
//!
//! Node `i` of the tree is `(parent, weight)` (`None`: a child of the link), and each flow
//! of the trace belongs to a leaf. A node's share is the product, along its path from the
//! link, of its weight over the sum of its siblings' weights, all of them whether they send
//! or not: `phi_c`, what H-GPS gives the class when every class is busy (for a flat tree,
//! the flows' `phi` of [`super::wfi`]).
//!
//! # T-WFI of a class (eq. 1 of the QFQ+ paper, for an aggregate)
//!
//! `T-WFI_c = max_p [t_c - (t_a + Q_c(t_a) / (phi_c R))]` over the packets `p` of the flows
//! in `c`'s subtree, `Q_c(t_a)` the bytes of the subtree arrived up to and including `p` (in
//! arrival order) minus those transmitted by `t_a`, counted bit by bit. With a leaf's single
//! flow it is the flow's T-WFI of [`super::wfi`] at share `phi_c`. For H-WF2Q+, Bennett and
//! Zhang bound a class's worst-case fairness by a sum over the nodes on its path of each
//! node's own WF2Q+ index (each at that node's guaranteed rate).
//!
//! # Delay against H-GPS
//!
//! `hgps_delay_ns = max_p (t_c - t_c^HGPS)` over the same packets, `t_c^HGPS` the packet's
//! completion in H-GPS with the same arrivals, tree and rate.

use super::hgps::HierGps;
use super::trace::{Arrival, Trace};

/// What one class (any node of the tree) received in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassService {
    /// Share of the link: the product of the weight ratios on the path from the link.
    pub phi: f64,
    /// Packets transmitted by the flows of its subtree.
    pub packets: u64,
    /// Bytes transmitted by them.
    pub bytes: u64,
    /// Measured T-WFI, ns (may be negative; negative infinity when nothing was sent).
    pub t_wfi_ns: f64,
    /// Largest completion time minus H-GPS completion time, ns (may be negative).
    pub hgps_delay_ns: f64,
}

/// Measures every node of `tree` on `trace`, where flow `f` of the arrivals belongs to leaf
/// `leaf_of_flow[f]`. Dropped packets count nowhere, as in [`super::wfi::measure`].
///
/// # Panics
///
/// If a flow has no leaf or its leaf has children, if the trace names a packet that never
/// arrived, if the arrivals are not sorted, or as [`HierGps::new`] does on a bad tree.
pub fn measure_classes(
    trace: &Trace,
    arrivals: &[Arrival],
    tree: &[(Option<usize>, u32)],
    leaf_of_flow: &[usize],
) -> Vec<ClassService> {
    let rate = trace.rate_bps;
    let mut hgps = HierGps::new(tree, rate);
    assert!(
        arrivals.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "arrivals must be sorted by time"
    );
    let n = tree.len();
    let path = |leaf: usize| {
        let mut nodes = vec![leaf];
        while let Some(p) = tree[*nodes.last().expect("starts with the leaf")].0 {
            nodes.push(p);
        }
        nodes
    };
    let leaf_path: Vec<Vec<usize>> = leaf_of_flow.iter().map(|&l| path(l)).collect();
    let phi = shares(tree);
    let mut out: Vec<ClassService> = (0..n)
        .map(|c| ClassService {
            phi: phi[c],
            t_wfi_ns: f64::NEG_INFINITY,
            hgps_delay_ns: f64::NEG_INFINITY,
            ..ClassService::default()
        })
        .collect();
    let mut tx_of = vec![None; arrivals.len()];
    for (k, r) in trace.tx.iter().enumerate() {
        assert!(
            r.seq < arrivals.len(),
            "transmitted packet {} never arrived",
            r.seq
        );
        tx_of[r.seq] = Some(k);
        for &c in &leaf_path[r.flow] {
            out[c].packets += 1;
            out[c].bytes += u64::from(r.len);
        }
    }

    // Arrivals in time order with a cursor on the trace, as in `wfi`: Q_c(t_a) for every
    // ancestor of the packet's leaf; the same arrivals feed H-GPS.
    let bytes_per_ns = rate / 8e9;
    let mut arrived = vec![0u64; n];
    let mut done = vec![0u64; n];
    let mut cursor = 0;
    let mut hgps_id = vec![usize::MAX; arrivals.len()];
    for (seq, a) in arrivals.iter().enumerate() {
        let Some(k) = tx_of[seq] else { continue };
        let t = a.time_ns as f64;
        hgps_id[seq] = hgps.arrive(t, leaf_of_flow[a.flow], a.len);
        let tx = &trace.tx;
        while cursor < tx.len() && tx[cursor].finish_ns <= t {
            for &c in &leaf_path[tx[cursor].flow] {
                done[c] += u64::from(tx[cursor].len);
            }
            cursor += 1;
        }
        let in_flight = tx.get(cursor).filter(|r| r.start_ns < t).map(|r| {
            (
                r.flow,
                ((t - r.start_ns) * bytes_per_ns).min(f64::from(r.len)),
            )
        });
        for &c in &leaf_path[a.flow] {
            arrived[c] += u64::from(a.len);
            let partial = match in_flight {
                Some((f, bytes)) if leaf_path[f].contains(&c) => bytes,
                _ => 0.0,
            };
            let backlog = arrived[c] as f64 - done[c] as f64 - partial;
            let ideal = t + backlog / (out[c].phi * bytes_per_ns);
            out[c].t_wfi_ns = out[c].t_wfi_ns.max(tx[k].finish_ns - ideal);
        }
    }
    hgps.drain();
    for (seq, a) in arrivals.iter().enumerate() {
        let Some(k) = tx_of[seq] else { continue };
        let fluid = hgps.finish_ns(hgps_id[seq]).expect("drained");
        for &c in &leaf_path[a.flow] {
            let d = trace.tx[k].finish_ns - fluid;
            out[c].hgps_delay_ns = out[c].hgps_delay_ns.max(d);
        }
    }
    out
}

/// Every node's share of the link, `phi` (see the module documentation): the product,
/// along its path from the link, of each node's weight over the sum of its siblings'.
///
/// # Panics
///
/// If a parent is not a node of `tree`, or the parents make a cycle.
pub fn shares(tree: &[(Option<usize>, u32)]) -> Vec<f64> {
    let mut siblings = vec![0u64; tree.len() + 1];
    for &(p, w) in tree {
        siblings[p.unwrap_or(tree.len())] += u64::from(w);
    }
    (0..tree.len())
        .map(|c| {
            let mut phi = 1.0;
            let mut up = Some(c);
            for _ in 0..=tree.len() {
                let Some(i) = up else { return phi };
                let (p, w) = tree[i];
                phi *= f64::from(w) / siblings[p.unwrap_or(tree.len())] as f64;
                up = p;
            }
            panic!("node {c} is its own ancestor")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::wfi::measure;
    use crate::testing::random_run_on_link;

    fn run(alg: &str, weights: &[u32], seed: u64) -> (Trace, Vec<Arrival>) {
        random_run_on_link(alg, weights, 80, &mut { seed })
    }

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn on_a_flat_tree_classes_are_the_flows() {
        let weights = [3, 1, 2, 5];
        for (alg, seed) in [("wf2q+", 7), ("drr", 11), ("qfq", 13)] {
            let (trace, a) = run(alg, &weights, seed);
            let tree: Vec<_> = weights.iter().map(|&w| (None, w)).collect();
            let classes = measure_classes(&trace, &a, &tree, &[0, 1, 2, 3]);
            let flows = measure(&trace, &a, &weights);
            for (c, f) in classes.iter().zip(&flows) {
                assert!(near(c.phi, f.phi), "{alg}: {c:?} {f:?}");
                assert_eq!((c.packets, c.bytes), (f.packets, f.bytes));
                assert!(near(c.t_wfi_ns, f.t_wfi_ns), "{alg}: {c:?} {f:?}");
                assert!(near(c.hgps_delay_ns, f.gps_delay_ns), "{alg}: {c:?} {f:?}");
            }
        }
    }

    #[test]
    fn a_class_of_one_leaf_is_measured_as_its_leaf() {
        // classes 0 (w 2) and 2 (w 1), each with one leaf (1, 3); class 4 with leaves 5, 6
        let tree = [
            (None, 2),
            (Some(0), 7),
            (None, 1),
            (Some(2), 1),
            (None, 1),
            (Some(4), 1),
            (Some(4), 3),
        ];
        let (trace, a) = run("wf2q+", &[1, 1, 1, 1], 17);
        let m = measure_classes(&trace, &a, &tree, &[1, 3, 5, 6]);
        assert!(near(m[0].phi, 0.5) && near(m[5].phi, 0.0625) && near(m[6].phi, 0.1875));
        for (class, leaf) in [(0, 1), (2, 3)] {
            assert_eq!(m[class].phi, m[leaf].phi);
            assert_eq!(m[class].t_wfi_ns, m[leaf].t_wfi_ns);
            assert_eq!(m[class].hgps_delay_ns, m[leaf].hgps_delay_ns);
        }
        // a class counts its subtree
        assert_eq!(m[4].packets, m[5].packets + m[6].packets);
        let total: u64 = [0, 2, 4].iter().map(|&c| m[c].bytes).sum();
        assert_eq!(
            total,
            trace.tx.iter().map(|r| u64::from(r.len)).sum::<u64>()
        );
    }
}
