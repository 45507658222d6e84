//! KPS's service guarantees measured on the exact reference link.
//!
//! The bound is the one derived in the header of `algorithms/kps.rs`: KPS is an instance of
//! the approximate WF2Q+ family of the QFQ+ paper (appendix A.3) with timestamp errors
//! `dS- < sigma_k`, `dS+ <= 2 sigma_k` (`sigma_k` the flow's stratum granularity, in bytes
//! per unit weight), so Theorems 4 and 5 (A.21, A.24) give, with `W` the sum of the weights
//! and `DW` the work-function gap (one maximum packet: the packet on the wire is charged at
//! dequeue, as in `tests/guarantees.rs` for WF2Q+):
//!
//! ```text
//! B-WFI_i <= phi_i DW + 3 phi_i sigma_k W + (1 - phi_i) L_i + L
//! T-WFI_i <= L_i / (phi_i R) + (3 sigma_k W + DW + L - L_i) / R
//! ```
//!
//! `L_i` and `L` are the largest packets actually sent (the proofs only use the lengths
//! of the packets served), `sigma_k` comes from the flow's declared maximum (that is what
//! the scheduler rounds with).

mod common;

use common::{
    flow_spec, heavy_behind_light, largest_packet_sent, run_measured, workload, Bounds, FlowSpec,
    Metric, Violation, RATE_BPS,
};
use proptest::prelude::*;
use pspat_sched::algorithms::kps::{granularity, stratum_of};
use pspat_sched::reference::trace::Arrival;
use pspat_sched::reference::wfi::FlowService;
use pspat_sched::util::stamp::FRAC_BITS;
use pspat_sched::Params;

/// KPS's `(B-WFI bytes, T-WFI ns)` bounds for flow `f` of `flows` (module documentation).
fn kps_bounds(flows: &[FlowSpec], f: usize, m: &FlowService, max_all: u32) -> (f64, f64) {
    let w_sum: f64 = flows.iter().map(|x| f64::from(x.weight)).sum();
    let spec = flows[f];
    let sigma =
        granularity(stratum_of(spec.max_len, spec.weight)) as f64 / (1u64 << FRAC_BITS) as f64; // bytes per unit weight
    let ds = 3.0 * sigma * w_sum; // dS- + dS+, bytes (paper units)
    let (phi, li, l) = (m.phi, f64::from(m.max_len), f64::from(max_all));
    let dw = l;
    let b = phi * dw + phi * ds + (1.0 - phi) * li + l;
    let t = (li / phi + ds + dw + l - li) * 8e9 / RATE_BPS;
    (b, t)
}

/// Every bound exceeded (1e-6 relative slack for floating point only).
fn violations(flows: &[FlowSpec], m: &[FlowService]) -> Vec<Violation> {
    let max_all = largest_packet_sent(m);
    common::violations(m, 1e-6, |i, f| {
        let (b, t) = kps_bounds(flows, i, f, max_all);
        Bounds::both(b, t)
    })
}

/// 2..12 flows, weights 1..=64 (several strata apart), largest packets 64..=1500; 50..400
/// arrivals, in bursts and with gaps up to ~2.5 maximum packets, on any flow, lengths up
/// to the flow's maximum (often exactly it) ([`common::workload`]).
fn random_workload() -> impl Strategy<Value = (Vec<FlowSpec>, Vec<Arrival>)> {
    let spec = flow_spec(
        prop_oneof![3 => 1u32..=8, 1 => 9u32..=64],
        prop_oneof![1 => Just(1500u32), 2 => 64u32..=1500],
    );
    workload(prop::collection::vec(spec, 2..12), Just(1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn kps_meets_its_b_wfi_and_t_wfi_bounds((flows, arrivals) in random_workload()) {
        // `run_measured` checks that every packet is sent, none dropped.
        let (_, m) = run_measured("kps", &Params::new(), &flows, &arrivals, 0);
        let v = violations(&flows, &m);
        prop_assert!(v.is_empty(), "violations: {:?}", v);
    }
}

/// Flow 0 of weight 100 and 99 flows of weight 1, 1500-byte packets, all at t = 0; the
/// light flows' packets (one each) are enqueued first, then 50 of the heavy flow.
fn heavy_and_many_light() -> (Vec<FlowSpec>, Vec<Arrival>) {
    heavy_behind_light(100, 99, 1, 50)
}

#[test]
fn the_bound_check_catches_a_scheduler_that_exceeds_it() {
    // phi_0 = 100/199; 1500 bytes take 12 us. KPS's bound for flow 0: 1500 / 100 = 15 B/w
    // rounds up to sigma = 16, so 3 sigma W = 48 * 199 = 9552 bytes, plus L / phi = 2985
    // bytes, plus DW + L - L_i = 1500 bytes: 14 037 bytes, 112.296 us at 1 Gbit/s.
    let (flows, arrivals) = heavy_and_many_light();
    let max_all = 1500;
    let probe = FlowService {
        phi: 100.0 / 199.0,
        max_len: 1500,
        ..FlowService::default()
    };
    let (_, t_bound) = kps_bounds(&flows, 0, &probe, max_all);
    assert!((t_bound - 112_296.0).abs() < 1e-6, "{t_bound}");

    // DRR serves the 99 light packets (enqueued first) before the heavy flow's first one,
    // which completes at 100 * 12 us = 1200 us against an ideal 23.88 us: more than ten
    // times the bound. The check must say so.
    let (_, drr) = run_measured("drr", &Params::new(), &flows, &arrivals, 0);
    assert!(
        drr[0].t_wfi_ns >= 1_200_000.0 - 23_880.0 - 1e-6,
        "{:?}",
        drr[0]
    );
    let v = violations(&flows, &drr);
    assert!(
        v.iter().any(|x| x.flow == 0 && x.metric == Metric::TWfiNs),
        "{v:?}"
    );

    // KPS on the same arrivals stays within it, for every flow.
    let (_, kps) = run_measured("kps", &Params::new(), &flows, &arrivals, 0);
    assert!(
        violations(&flows, &kps).is_empty(),
        "{:?}",
        violations(&flows, &kps)
    );
    assert!(kps[0].t_wfi_ns < t_bound);
}

#[test]
fn kps_serves_heavy_flows_early_unlike_round_robin() {
    // Same arrivals: the heavy flow's packets leave interleaved with the light ones from
    // the start (weight 100 of 199: about every other packet), not after a round of 99.
    let (flows, arrivals) = heavy_and_many_light();
    let (trace, _) = run_measured("kps", &Params::new(), &flows, &arrivals, 0);
    let heavy_in_first_20 = trace.tx[..20].iter().filter(|r| r.flow == 0).count();
    assert!(
        (8..=12).contains(&heavy_in_first_20),
        "heavy flow sent {heavy_in_first_20} of the first 20"
    );
}
