//! Service guarantees measured on the exact reference link.
//!
//! WF2Q+ must stay within the B-WFI and T-WFI bounds of the QFQ+ paper (Theorems 4 and 5)
//! on random arrival patterns, and the meter must be able to catch a scheduler that does
//! worse (DRR makes a heavy flow wait a whole round).
//!
//! Which bound: the crate's WF2Q+ charges a packet to its virtual time when it is dequeued,
//! i.e. when the link starts sending it, so a flow that becomes backlogged during a
//! transmission is stamped as if the packet on the wire had already left. In the paper's
//! terms the scheduler's work function runs ahead of the link's by up to one packet:
//! `Delta W = L` (A.5; section 4 likewise takes `Q` = transmit queue + one maximum packet).
//! The tighter `Delta W = 0` bounds ([`wf2qp_bounds`]) hold only for a model whose virtual
//! time follows the bits actually sent, which needs a clock inside the algorithm; the
//! crate's WF2Q+ exceeds them on rare patterns, as `four_packet_case_measured_by_hand`
//! shows on the smallest one (127 ns against 120 ns, within the 200 ns of `Delta W = L`).

mod common;

use common::{
    arrival, flow_spec, heavy_behind_light, largest_packet_sent, run_measured, workload, Bounds,
    FlowSpec, Metric, Violation, RATE_BPS,
};
use proptest::prelude::*;
use pspat_sched::reference::trace::Arrival;
use pspat_sched::reference::wfi::{wf2qp_bounds, wf2qp_bounds_with_delta_w, FlowService};
use pspat_sched::Params;

/// Violations of the WF2Q+ bounds for a work-function gap of `delta_w_packets`
/// maximum-size packets. `L_i` and `L` are the largest packets actually sent (the
/// scheduler never looks at the declared maximum, so the theorems hold with the observed
/// one, a tighter test). The only slack is 1e-6 relative, for floating point.
fn violations(m: &[FlowService], delta_w_packets: u64) -> Vec<Violation> {
    let max_all = largest_packet_sent(m);
    let dw = delta_w_packets * u64::from(max_all);
    common::violations(m, 1e-6, |_, f| {
        let (b, t) = wf2qp_bounds_with_delta_w(f.phi, f.max_len, max_all, dw, RATE_BPS);
        Bounds::both(b, t)
    })
}

/// 2..12 flows with weights 1..=20 and largest packets 64..=1500 bytes; 50..400 arrivals
/// in bursts (gap 0) and gaps up to ~2.5 maximum-size packet times, on any flow, with
/// lengths 1..=max_len of the flow, often exactly max_len ([`common::workload`]).
fn random_workload() -> impl Strategy<Value = (Vec<FlowSpec>, Vec<Arrival>)> {
    let flows = prop::collection::vec(flow_spec(1u32..=20, 64u32..=1500), 2..12);
    workload(flows, Just(1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Theorems 4 and 5 with the packet on the wire counted as served (`Delta W = L`).
    #[test]
    fn wf2qp_meets_its_b_wfi_and_t_wfi_bounds((flows, arrivals) in random_workload()) {
        // `run_measured` checks that every packet is sent, none dropped.
        let (_, m) = run_measured("wf2q+", &Params::new(), &flows, &arrivals, 0);
        let v = violations(&m, 1);
        prop_assert!(v.is_empty(), "violations: {:?}", v);
    }
}

/// Three flows of weight 1 (phi = 1/3), 8 ns per byte. Flow 2 sends 10 bytes at t = 0,
/// on the wire over [0, 80]; at t = 1 flow 1 gets two 1-byte packets and flow 0 one of
/// 10 bytes.
fn four_packets() -> (Vec<FlowSpec>, Vec<Arrival>) {
    let flows = vec![FlowSpec::new(1, 1500); 3];
    (
        flows,
        vec![
            arrival(0, 2, 10),
            arrival(1, 1, 1),
            arrival(1, 1, 1),
            arrival(1, 0, 10),
        ],
    )
}

#[test]
fn four_packet_case_measured_by_hand() {
    // WF2Q+ charges flow 2's packet at dequeue: V = 10/3 from t = 0. The flows becoming
    // backlogged at t = 1 get S = max(F, V) = 10/3: flow 1 F = 13/3, flow 0 F = 40/3.
    // At 80 flow 1 goes first ([80, 88], V = 11/3); its next packet has S = 13/3 > V, not
    // eligible, so flow 0 goes ([88, 168], V = 7), then flow 1 ([168, 176]).
    // T-WFI of flow 1's second packet: Q = 2 bytes at t_a = 1, ideal 1 + 2 * 8 * 3 = 49,
    // completion 176: 127 ns. Its first: 88 - (1 + 24) = 63.
    // Bounds for flow 1 (L_1 = 1, L = 10): Delta W = 0: (2 * 1 * 3 + 9) * 8 = 120 ns;
    // Delta W = L = 10 bytes: 200 ns. (Had V followed the bits sent, V(1) = 1/24, S = 1/24,
    // flow 1's packets would leave at 88 and 96: T-WFI 63 ns.)
    let (flows, arrivals) = four_packets();
    let (trace, m) = run_measured("wf2q+", &Params::new(), &flows, &arrivals, 0);
    let order: Vec<_> = trace.tx.iter().map(|r| (r.seq, r.finish_ns)).collect();
    assert_eq!(order, [(0, 80.0), (1, 88.0), (3, 168.0), (2, 176.0)]);
    assert!((m[1].t_wfi_ns - 127.0).abs() < 1e-9, "{:?}", m[1]);
    let (_, t0) = wf2qp_bounds(m[1].phi, 1, 10, RATE_BPS);
    let (_, t1) = wf2qp_bounds_with_delta_w(m[1].phi, 1, 10, 10, RATE_BPS);
    assert!(
        (t0 - 120.0).abs() < 1e-9 && (t1 - 200.0).abs() < 1e-9,
        "{t0} {t1}"
    );
    assert!(violations(&m, 1).is_empty());
    // Pins the model: V is charged when a packet is dequeued, so the Delta W = 0 bound is
    // exceeded here. A change that makes V follow the bits on the wire would fail this line
    // and must update the documented contract of wf2qp.rs.
    let over = violations(&m, 0);
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!((over[0].flow, over[0].metric), (1, Metric::TWfiNs));
}

#[test]
fn drr_exceeds_the_wf2qp_t_wfi_bound_and_the_meter_sees_it() {
    // phi_0 = 10/19, L = L_0 = 1500 bytes, 12 us per packet at 1 Gbit/s. WF2Q+'s bound:
    // 2 L / (phi R) = 2 * 12 * 1.9 = 45.6 us.
    //
    // DRR visits the light flows first (they joined first): 9 packets, then flow 0's
    // quantum of 10 packets, round after round. Flow 0's first packet (Q = 1500 bytes at
    // t = 0, ideal 1.9 * 12 = 22.8 us) completes at 10 * 12 = 120 us: T-WFI 97.2 us, more
    // than twice the bound. The following packets of the burst catch up (each 12 us apart
    // against 22.8 us of ideal time), then wait a round again.
    // Ten flows, flow 0 of weight 10 and nine of weight 1, all backlogged from t = 0 with
    // 1500-byte packets; four rounds of the light flows' packets are enqueued first.
    let (flows, arrivals) = heavy_behind_light(10, 9, 4, 40);
    let (_, drr) = run_measured("drr", &Params::new(), &flows, &arrivals, 0);
    let heavy = drr[0];
    let (_, t_bound) = wf2qp_bounds(heavy.phi, 1500, 1500, RATE_BPS);
    assert!((t_bound - 45_600.0).abs() < 1e-6, "{t_bound}");
    assert!(
        (heavy.t_wfi_ns - 97_200.0).abs() < 1e-6,
        "DRR heavy flow T-WFI {} ns",
        heavy.t_wfi_ns
    );
    assert!(heavy.t_wfi_ns > 2.0 * t_bound);
    // It exceeds the looser Delta W = L bound too (45.6 + 12 = 57.6 us).
    assert!(violations(&drr, 1)
        .iter()
        .any(|v| v.flow == 0 && v.metric == Metric::TWfiNs));

    // WF2Q+ on the same arrivals stays within even the Delta W = 0 bounds.
    let (_, wf2q) = run_measured("wf2q+", &Params::new(), &flows, &arrivals, 0);
    assert!(
        violations(&wf2q, 0).is_empty(),
        "{:?}",
        violations(&wf2q, 0)
    );
    assert!(wf2q[0].t_wfi_ns < t_bound);
}
