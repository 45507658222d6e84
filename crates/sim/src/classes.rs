//! A tree's classes measured (a scenario with `[[classes]]`).
//!
//! # Throughput against the fluid allocation
//!
//! Every class, leaves and inner ones, over a window that starts after a warm-up
//! (`warmup_ms`, default a fifth of the traffic's span) and ends when the traffic stops: the
//! bytes whose last bit left the wire in the window, against
//! [`allocate_tree`] of the tree for the rates its leaves offered. A leaf
//! with a backlogged flow offers an infinite rate (it takes what it is given); any other
//! leaf offers what its flows brought in the window (the packets that reached their queue,
//! those the queue refused included), so a random source is compared with what it did
//! send rather than with its nominal mean. The error is `throughput / fluid - 1`.
//!
//! # T-WFI against hierarchical GPS
//!
//! When weights alone share the link (every class without rate and ceil, all in band 0),
//! the tree is H-GPS's ([`pspat_sched::reference::hgps`]) and each class is measured by
//! [`pspat_sched::reference::class_service::measure_classes`]: its T-WFI against its share
//! `phi` of the link, and its delay behind H-GPS. Beside a leaf's T-WFI is the bound the
//! tree's design claims (notes/hier-design.md section 4.4, checked by
//! `crates/sched/tests/tree.rs`): the sum over the classes `a` of the leaf's path of its
//! parent's index at `a`'s share, `5 L / (phi_a R)` under a WF2Q+ parent and `10 L /
//! (phi_a R)` under a QFQ one (QFQ+ eq. 22 with `m = M = 1`), plus `(txq + 1) L / R` for the
//! transmit queue and the packet on the wire, `L` the largest packet (the classes' budget).
//! The bound is for a leaf whose packets leave in arrival order (one flow, or `fifo`): a
//! leaf's own scheduler reordering its flows adds its index, and an inner class's T-WFI
//! counts the order among its leaves, which the composition does not bound. DRR parents
//! have none either (their index grows with the number of children).

use pspat_sched::reference::class_service::{self, shares};
use pspat_sched::reference::fluid::{allocate_tree, FluidClass};
use pspat_sched::tree::spec::{inner_kind, InnerKind};
use pspat_sched::tree::TreeSpec;

use crate::error::SimError;
use crate::metrics::{ClassReport, TreeReport};
use crate::run::Outcome;
use crate::scenario::Scenario;
use crate::traffic::ArrivalSpec;

/// The T-WFI index of a parent that orders its children with `kind`, in units of
/// `L / (phi R)` of the child: `None` for DRR, whose index grows with the children.
fn node_index(kind: InnerKind) -> Option<f64> {
    match kind {
        InnerKind::Wf2q => Some(5.0),
        InnerKind::Qfq => Some(10.0),
        InnerKind::Drr => None,
    }
}

/// The leaf class of each flow of `sc`, flow by flow, from each group's (`leaf_of`).
pub(crate) fn flow_leaves(sc: &Scenario, leaf_of: &[usize]) -> Vec<usize> {
    sc.flows
        .iter()
        .zip(leaf_of)
        .flat_map(|(g, &l)| std::iter::repeat(l).take(g.count as usize))
        .collect()
}

/// Each flow's share of the link by weights alone: its leaf's share times its weight over
/// the weights of its leaf's flows (what H-GPS gives it when everything is busy, with its
/// leaf sharing by weight).
pub(crate) fn flow_shares(sc: &Scenario, spec: &TreeSpec, leaf_of: &[usize]) -> Vec<f64> {
    let phi = shares(&weights(spec));
    let mut in_leaf = vec![0u64; spec.classes.len()];
    for (g, &l) in sc.flows.iter().zip(leaf_of) {
        in_leaf[l] += u64::from(g.count) * u64::from(g.weight);
    }
    sc.flows
        .iter()
        .zip(leaf_of)
        .flat_map(|(g, &l)| {
            let each = phi[l] * f64::from(g.weight) / in_leaf[l] as f64;
            std::iter::repeat(each).take(g.count as usize)
        })
        .collect()
}

/// The tree as `(parent, weight)` pairs, the shape of the references.
fn weights(spec: &TreeSpec) -> Vec<(Option<usize>, u32)> {
    spec.classes.iter().map(|c| (c.parent, c.weight)).collect()
}

/// Whether weights alone share the link: no class has a rate or a ceil, all are in band 0.
pub fn weight_only(spec: &TreeSpec) -> bool {
    spec.classes
        .iter()
        .all(|c| c.rate_bps == 0 && c.ceil_bps.is_none() && c.prio == 0)
}

/// The T-WFI bound of leaf `leaf` (see the module documentation), ns, given every class's
/// share `phi`, on a link of `rate_bps` with a transmit queue of `txq` packets; `None` under
/// a DRR parent.
pub fn t_wfi_bound_ns(
    spec: &TreeSpec,
    leaf: usize,
    phi: &[f64],
    rate_bps: f64,
    txq: u32,
) -> Option<f64> {
    let l_ns = f64::from(spec.mtu) * 8e9 / rate_bps;
    let mut bound = f64::from(txq + 1) * l_ns;
    let mut a = Some(leaf);
    while let Some(i) = a {
        let parent = spec.classes[i].parent;
        let alg = parent.map_or(&spec.algorithm, |p| &spec.classes[p].algorithm);
        let index = node_index(inner_kind(alg).ok()?)?;
        bound += index * l_ns / phi[i];
        a = parent;
    }
    Some(bound)
}

/// Measures every class of the tree `spec` run by `sc` (flow group `g` in leaf
/// `leaf_of[g]`), from the run's outcome `out`.
pub(crate) fn measure(
    sc: &Scenario,
    spec: &TreeSpec,
    leaf_of: &[usize],
    out: &Outcome,
) -> Result<(TreeReport, Vec<ClassReport>), SimError> {
    let n = spec.classes.len();
    let end = out.stop_ns;
    let start = sc.warmup_ms.map_or(end / 5.0, |w| w * 1e6);
    if start >= end {
        return Err(SimError::Scenario(format!(
            "warmup_ms {} is not before the end of the traffic ({} ms)",
            start / 1e6,
            end / 1e6
        )));
    }
    let in_window = |t: f64| t >= start && t < end;
    let per_s = 8e9 / (end - start);
    let flow_leaf = flow_leaves(sc, leaf_of);
    // The classes on each class's path from the link, itself first.
    let path =
        |c: usize| std::iter::successors(Some(c), |&i| spec.classes[i].parent).collect::<Vec<_>>();
    let paths: Vec<Vec<usize>> = (0..n).map(path).collect();
    let mut sent = vec![0u64; n];
    for r in out.trace.tx.iter().filter(|r| in_window(r.finish_ns)) {
        for &c in &paths[flow_leaf[r.flow]] {
            sent[c] += u64::from(r.len);
        }
    }
    let mut brought = vec![0u64; n];
    for a in out.arrivals.iter().filter(|a| in_window(a.time_ns as f64)) {
        brought[flow_leaf[a.flow]] += u64::from(a.len);
    }
    let mut greedy = vec![false; n];
    let mut flows = vec![0u32; n];
    for (g, &l) in sc.flows.iter().zip(leaf_of) {
        for &c in &paths[l] {
            greedy[c] |= matches!(g.arrival, ArrivalSpec::Backlogged { .. });
            flows[c] += g.count;
        }
    }
    let inner = spec.has_children();
    let leaf_offers: Vec<f64> = (0..n)
        .map(|i| {
            if greedy[i] {
                f64::INFINITY
            } else {
                brought[i] as f64 * per_s
            }
        })
        .collect();
    let fluid_classes = FluidClass::of_tree(spec, &leaf_offers);
    let fluid = allocate_tree(sc.rate_bps, &fluid_classes)
        .map_err(|e| SimError::Scenario(format!("classes: the fluid allocation: {e}")))?;
    let tree = weights(spec);
    let phi = shares(&tree);
    let only_weights = weight_only(spec);
    let service = (only_weights && sc.wfi)
        .then(|| class_service::measure_classes(&out.trace, &out.arrivals, &tree, &flow_leaf));
    let mut offered = vec![0.0; n];
    for (i, &b) in brought.iter().enumerate() {
        if !inner[i] {
            for &c in &paths[i] {
                offered[c] += b as f64 * per_s;
            }
        }
    }
    let mut classes = Vec::with_capacity(n);
    for (i, c) in spec.classes.iter().enumerate() {
        let st = out.classes[i];
        let throughput = sent[i] as f64 * per_s;
        let in_order = c.algorithm == "fifo" || flows[i] == 1;
        let svc = service.as_ref().map(|s| s[i]);
        classes.push(ClassReport {
            name: c.name.clone(),
            parent: c.parent.map(|p| spec.classes[p].name.clone()),
            alg: c.algorithm.clone(),
            leaf: !inner[i],
            rate_bps: c.rate_bps,
            ceil_bps: c.ceil_bps,
            weight: c.weight,
            prio: c.prio,
            flows: flows[i],
            packets: st.sent_pkts,
            bytes: st.sent_bytes,
            lent_bytes: st.lent_bytes,
            borrowed_bytes: st.borrowed_bytes,
            overlimits: st.overlimits,
            offered_bps: (!greedy[i]).then_some(offered[i]),
            throughput_bps: throughput,
            fluid_bps: fluid[i],
            fluid_error: (fluid[i] > 0.0).then(|| throughput / fluid[i] - 1.0),
            phi: phi[i],
            t_wfi_ns: svc.filter(|s| s.packets > 0).map(|s| s.t_wfi_ns),
            t_wfi_bound_ns: svc
                .filter(|_| !inner[i] && in_order)
                .and_then(|_| t_wfi_bound_ns(spec, i, &phi, sc.rate_bps, sc.txq)),
            hgps_delay_ns: svc.filter(|s| s.packets > 0).map(|s| s.hgps_delay_ns),
        });
    }
    let worst_fluid_error = classes
        .iter()
        .filter_map(|c| c.fluid_error)
        .fold(0.0, |w: f64, e| w.max(e.abs()));
    let worst_t_wfi_over_bound = classes
        .iter()
        .filter_map(|c| Some(c.t_wfi_ns? / c.t_wfi_bound_ns?))
        .reduce(f64::max);
    Ok((
        TreeReport {
            window_start_ns: start,
            window_end_ns: end,
            weight_only: only_weights,
            mtu: spec.mtu,
            worst_fluid_error,
            worst_t_wfi_over_bound,
        },
        classes,
    ))
}
