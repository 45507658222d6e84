//! Service metrics of a transmission trace, per flow: measured T-WFI and B-WFI, and delay
//! and lag against the fluid GPS system.
//!
//! Definitions follow the QFQ+ paper (`qfq-plus-reducing-execution-time.md`), sections 4.1,
//! 4.2 and appendix A.10, on the model of appendix A.1: one constant-rate link of `R` bit/s,
//! FIFO queues per flow, and shares `phi_i = w_i / sum_j w_j` over *all* flows of the run
//! (so `sum phi = 1`), whether or not they send. Service is counted bit by bit: a packet in
//! flight has transmitted `R (t - start)` of its bits at `t`. Packets the scheduler refused
//! ([`Trace::drops`]) never entered the system and count nowhere (nor in the GPS reference).
//!
//! # T-WFI (eq. 1, A.23)
//!
//! `T-WFI_i = max_p [t_c - (t_a + Q_i(t_a) / (phi_i R))]` over the packets `p` of flow `i`,
//! with `Q_i(t_a)` the bytes of flow `i` arrived up to and including `p` (in arrival order)
//! minus those already transmitted at `t_a`. Computed exactly, one term per packet. It is
//! negative when every packet beats its ideal completion time.
//!
//! # B-WFI (eq. A.20)
//!
//! `B-WFI_i = max phi_i W(t1, t2) - W_i(t1, t2)` over the intervals `[t1, t2]` during which
//! flow `i` is continuously backlogged (has bytes arrived but not fully transmitted), `W`
//! counting the link's bytes and `W_i` flow `i`'s. A packet arriving exactly when the
//! flow's last bit leaves keeps the flow backlogged (the period goes on): at that instant
//! the new packet is there and not transmitted.
//!
//! **Which intervals suffice.** Let `D(t) = phi_i W(t) - W_i(t)`; the quantity is
//! `D(t2) - D(t1)`. `D` is continuous and piecewise linear: slope `(phi_i - 1) R < 0` while
//! the link transmits flow `i`, `phi_i R > 0` while it transmits another flow, `0` while it
//! is idle (never, inside a backlogged period of a work-conserving link; the argument does
//! not need it). Within a period `[b, e]` let `G(t) = D(t) - min_{[b, t]} D`, the best value
//! with `t2 = t`. Where `D` does not decrease, the running minimum is constant and `G` does
//! not decrease; where `D` decreases, the running minimum either stays (and `G` decreases)
//! or follows `D` (and `G = 0`). So `G` peaks where `D` stops rising, that is at the start of
//! one of flow `i`'s own transmissions, or at `e` — but `e` is the end of an own
//! transmission, where `G` is below its value at that transmission's start. Likewise the
//! running minimum of `D` is reached at `b` or where `D` stops falling: at the end of an own
//! transmission. Hence `t2` ranges over the flow's transmission starts and `t1` over the
//! period starts and the flow's transmission ends; one pass in transmission order keeps the
//! running minimum per flow. At transmission boundaries `W` is a prefix sum of the trace,
//! exact in integers.
//!
//! # Delay against GPS
//!
//! `gps_delay_ns = max_p (t_c - t_c^GPS)`, `t_c^GPS` the completion time of `p` in the fluid
//! GPS system ([`super::gps`]) with the same arrivals, weights and rate. Negative when every
//! packet left before its GPS completion.
//!
//! # Lag against GPS
//!
//! `gps_lag_bytes = max_t S_i^GPS(t) - S_i(t)`, fluid service minus packet-system service.
//! `S_i` rises at `R` during flow `i`'s own transmissions and is flat otherwise; `S_i^GPS`
//! rises at `R w_i / sum_{B} w <= R` (flow `i` is in `B` when served) and never falls. So
//! the difference does not increase during an own transmission and does not decrease
//! between two: it peaks at own transmission starts. Before the first one it rises from 0;
//! after the last one `S_i` holds all the flow's bytes, so the difference is `<= 0`. GPS
//! packet completions and arrivals change the slope of `S_i^GPS` but never its sign, so
//! they need no evaluation. The result is at least 0 (at time 0 both are 0).

use super::gps::FluidGps;
use super::trace::{Arrival, Trace};

/// Nanoseconds to send `bytes` at `rate_bps`.
fn ns(bytes: f64, rate_bps: f64) -> f64 {
    bytes * 8e9 / rate_bps
}

/// What one flow received in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowService {
    /// Weight of the flow.
    pub weight: u32,
    /// Share `w_i / sum_j w_j` over all flows of the run.
    pub phi: f64,
    /// Packets transmitted.
    pub packets: u64,
    /// Bytes transmitted.
    pub bytes: u64,
    /// Packets refused by the scheduler.
    pub drops: u64,
    /// Largest packet transmitted, bytes (0 if none).
    pub max_len: u32,
    /// `max_len * 8 / (phi R)`: one maximum-size packet at the flow's reserved rate, ns
    /// (Definition 1 of the QFQ+ paper; the unit it reports T-WFI in).
    pub packet_service_time_ns: f64,
    /// Measured T-WFI, ns (eq. 1; may be negative).
    pub t_wfi_ns: f64,
    /// Measured B-WFI, bytes (eq. A.20; `>= 0`).
    pub b_wfi_bytes: f64,
    /// Largest completion time minus GPS completion time, ns (may be negative).
    pub gps_delay_ns: f64,
    /// Largest fluid GPS service minus packet service, bytes (`>= 0`).
    pub gps_lag_bytes: f64,
}

impl FlowService {
    /// T-WFI in packet service times (how the QFQ+ paper plots it); 0 for a silent flow.
    pub fn t_wfi_in_service_times(&self) -> f64 {
        if self.packet_service_time_ns > 0.0 {
            self.t_wfi_ns / self.packet_service_time_ns
        } else {
            0.0
        }
    }
}

/// WF2Q+'s guarantees for a flow of share `phi` and largest packet `max_len_i` bytes, when
/// the largest packet of any flow is `max_len_all` bytes, on a link of `rate_bps` bit/s:
/// `(B-WFI bytes, T-WFI ns)`.
///
/// QFQ+ paper, Theorem 4 (A.21) and Theorem 5 (A.24) with no output queue (`Delta W = 0`)
/// and WF2Q+'s exact timestamps (`Delta S^- = 0`, `Delta S^+ = L_i / phi_i`, appendix A.3):
///
/// - B-WFI `<= phi_i (L_i / phi_i) + (1 - phi_i) L_i + L = (2 - phi_i) L_i + L`;
/// - T-WFI `<= L_i / (phi_i R) + (L_i / phi_i + L - L_i) / R = 2 L_i / (phi_i R) + (L - L_i) / R`.
///
/// `Delta W = 0` is the system of figure A.9 A, whose virtual time follows the bits the link
/// has actually sent. A scheduler that charges a packet to its virtual time when the packet
/// is dequeued, before the link has sent it (this crate's WF2Q+, as dummynet and Linux do),
/// counts the packet on the wire as served: `Delta W` is then the largest packet, see
/// [`wf2qp_bounds_with_delta_w`].
pub fn wf2qp_bounds(phi: f64, max_len_i: u32, max_len_all: u32, rate_bps: f64) -> (f64, f64) {
    wf2qp_bounds_with_delta_w(phi, max_len_i, max_len_all, 0, rate_bps)
}

/// [`wf2qp_bounds`] when the bytes handed out by the scheduler may exceed those sent by
/// the link by up to `delta_w_bytes` (`Delta W`, eq. A.5: an output queue, or the packet
/// being transmitted when the scheduler's virtual time is charged at dequeue):
///
/// - B-WFI `<= phi_i Delta W + (2 - phi_i) L_i + L`;
/// - T-WFI `<= 2 L_i / (phi_i R) + (Delta W + L - L_i) / R`.
pub fn wf2qp_bounds_with_delta_w(
    phi: f64,
    max_len_i: u32,
    max_len_all: u32,
    delta_w_bytes: u64,
    rate_bps: f64,
) -> (f64, f64) {
    let li = f64::from(max_len_i);
    let l = f64::from(max_len_all);
    let dw = delta_w_bytes as f64;
    let b_wfi = phi * dw + (2.0 - phi) * li + l;
    let t_wfi = ns(2.0 * li / phi + dw + (l - li), rate_bps);
    (b_wfi, t_wfi)
}

/// What the T-WFI bounds of the QFQ family depend on, for one flow.
///
/// The papers assume `sum phi <= 1`; here `phi` is the flow's share of the sum of all
/// weights (as [`FlowService::phi`]), which is the same thing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundInputs {
    /// The flow's share `phi_k`.
    pub phi: f64,
    /// `L_k`: the flow's largest packet, bytes (the declared maximum: QFQ sizes the flow's
    /// group from it).
    pub max_len_i: u32,
    /// `L`: the largest packet of any flow, bytes.
    pub max_len_all: u32,
    /// `Q` (`Delta W`): how far the bytes handed out by the scheduler may run ahead of the
    /// bytes sent on the wire. On [`super::link::VirtualLink`] with a transmit queue of `q`
    /// packets, `(q + 1) L`: the queue plus the packet on the wire, which schedulers that
    /// charge their virtual time at dequeue count as served before it is sent.
    pub delta_w_bytes: u64,
    /// Link rate, bit/s.
    pub rate_bps: f64,
}

impl BoundInputs {
    /// Inputs for a link with a transmit queue of `txq` packets: `Q = (txq + 1) L`.
    pub fn with_txq(phi: f64, max_len_i: u32, max_len_all: u32, txq: u64, rate_bps: f64) -> Self {
        Self {
            phi,
            max_len_i,
            max_len_all,
            delta_w_bytes: (txq + 1) * u64::from(max_len_all),
            rate_bps,
        }
    }

    /// The flow's packet service time `L_k / (phi_k R)`, ns (QFQ+ paper, Definition 1).
    pub fn service_time_ns(&self) -> f64 {
        ns(f64::from(self.max_len_i), self.rate_bps) / self.phi
    }
}

/// QFQ's T-WFI bound, ns: pspat-architecture.md eq. (2), `6 L_k / (phi_k R) + (L - L_k) / R`,
/// plus the transmit-queue term `Q / R` of QFQ+ paper eq. (2) (Theorem 5 with
/// `Delta W = Q`):
///
/// `T-WFI_k <= 6 L_k / (phi_k R) + (Q + L - L_k) / R`.
///
/// (Instantiating Theorem 5 with the timestamp errors the QFQ+ paper gives for QFQ in
/// section 6, `Delta S^- = 2 L_k / phi_k` and `Delta S^+ = 4 L_k / phi_k`, gives `7` where
/// the pspat paper, quoting the QFQ paper, has `6`; this is the tighter of the two.)
pub fn qfq_t_wfi_bound(b: &BoundInputs) -> f64 {
    let li = f64::from(b.max_len_i);
    let l = f64::from(b.max_len_all);
    ns(
        6.0 * li / b.phi + b.delta_w_bytes as f64 + l - li,
        b.rate_bps,
    )
}

/// QFQ+'s T-WFI bound, ns, for a flow in an aggregate of `m_k` flows when aggregates hold
/// at most `big_m` flows: QFQ+ paper eq. (3) with QFQ's timestamp errors
/// (`Delta S^k = 6 L_k / phi_k`, section 6), which is eq. (22) before `M = min(8, Q_pkts)`
/// is substituted:
///
/// `T-WFI_k <= (11 - 1/m_k) L_k / (phi_k R) + (Q + M L - m_k L_k) / R`.
///
/// # Panics
///
/// If `m_k` is 0 or above `big_m`.
pub fn qfq_plus_t_wfi_bound(b: &BoundInputs, m_k: u32, big_m: u32) -> f64 {
    assert!(
        (1..=big_m).contains(&m_k),
        "aggregate size {m_k} not in 1..={big_m}"
    );
    let li = f64::from(b.max_len_i);
    let l = f64::from(b.max_len_all);
    let m = f64::from(m_k);
    ns(
        (11.0 - 1.0 / m) * li / b.phi + b.delta_w_bytes as f64 + f64::from(big_m) * l - m * li,
        b.rate_bps,
    )
}

/// [`qfq_plus_t_wfi_bound`] for a flow whose aggregate size is not known: the largest over
/// `m_k` in `1..=big_m`.
pub fn qfq_plus_t_wfi_bound_any_aggregate(b: &BoundInputs, big_m: u32) -> f64 {
    (1..=big_m)
        .map(|m| qfq_plus_t_wfi_bound(b, m, big_m))
        .fold(f64::NEG_INFINITY, f64::max)
}

/// DRR's T-WFI bound, ns, for a flow of share `phi_k` among `n` flows whose smallest share
/// is `phi_min`, all packets at most `L` bytes and quanta proportional to the weights with
/// the smallest flow's quantum `L`: QFQ+ paper eq. (15) (pspat-architecture.md eq. 3) plus
/// the transmit-queue term:
///
/// `T-WFI_k <= (1/phi_min + 1/phi_k + n - 1) L / R + Q / R`.
///
/// The QFQ+ paper's section 6 example (`n = 1000`, `phi_min = 0.75e-3`, `phi_k = 0.25`)
/// gives `2336.3 L / R + Q / R`.
pub fn drr_t_wfi_bound(b: &BoundInputs, phi_min: f64, n: u64) -> f64 {
    let l = f64::from(b.max_len_all);
    ns(
        (1.0 / phi_min + 1.0 / b.phi + n as f64 - 1.0) * l + b.delta_w_bytes as f64,
        b.rate_bps,
    )
}

/// Measures every flow of a run: one [`FlowService`] per entry of `weights` (flows that sent
/// nothing get zeros). `trace` must be the complete run of `arrivals` on one link (every
/// arrival transmitted or dropped once), as [`super::link::run_on_link`] produces.
///
/// O(P log P) for P packets (the GPS reference); the WFI metrics are one pass each.
///
/// # Panics
///
/// If the trace does not match the arrivals (a packet missing, duplicated, on another flow,
/// with another length or arrival time, sent before it arrived), if transmissions overlap,
/// if a flow's packets leave out of arrival order, if the arrivals are not sorted, or if a
/// weight is zero.
pub fn measure(trace: &Trace, arrivals: &[Arrival], weights: &[u32]) -> Vec<FlowService> {
    let rate = trace.rate_bps;
    assert!(
        rate.is_finite() && rate > 0.0,
        "link rate must be positive, got {rate}"
    );
    assert!(weights.iter().all(|&w| w > 0), "weights must be positive");
    assert!(
        arrivals.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "arrivals must be sorted by time"
    );
    let n = weights.len();
    let total_weight: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let mut out: Vec<FlowService> = weights
        .iter()
        .map(|&w| FlowService {
            weight: w,
            phi: f64::from(w) / total_weight as f64,
            ..FlowService::default()
        })
        .collect();
    let tx = &trace.tx;

    // Every arrival is transmitted once or dropped once.
    let mut tx_of: Vec<Option<usize>> = vec![None; arrivals.len()];
    let mut dropped = vec![false; arrivals.len()];
    for (k, r) in tx.iter().enumerate() {
        let a = arrivals
            .get(r.seq)
            .unwrap_or_else(|| panic!("transmitted packet {} never arrived", r.seq));
        assert!(a.flow < n, "arrival {} names flow {} of {n}", r.seq, a.flow);
        assert!(
            r.flow == a.flow && r.len == a.len && r.arrival_ns == a.time_ns as f64,
            "transmission {r:?} does not match arrival {a:?}"
        );
        assert!(
            r.dequeue_ns >= r.arrival_ns && r.start_ns >= r.dequeue_ns && r.finish_ns > r.start_ns,
            "bad transmission times {r:?}"
        );
        if k > 0 {
            assert!(
                r.start_ns >= tx[k - 1].finish_ns,
                "transmissions overlap: {:?} then {r:?}",
                tx[k - 1]
            );
        }
        assert!(tx_of[r.seq].is_none(), "packet {} sent twice", r.seq);
        tx_of[r.seq] = Some(k);
        let fs = &mut out[r.flow];
        fs.packets += 1;
        fs.bytes += u64::from(r.len);
        fs.max_len = fs.max_len.max(r.len);
    }
    for d in &trace.drops {
        assert!(
            tx_of[d.seq].is_none() && !dropped[d.seq],
            "packet {} dropped twice or dropped and sent",
            d.seq
        );
        dropped[d.seq] = true;
        out[arrivals[d.seq].flow].drops += 1;
    }
    if let Some(seq) = (0..arrivals.len()).find(|&s| tx_of[s].is_none() && !dropped[s]) {
        panic!("packet {seq} neither transmitted nor dropped: incomplete trace");
    }

    let mut t_wfi = vec![f64::NEG_INFINITY; n];
    let mut b_wfi = vec![0.0_f64; n];
    let mut delay = vec![f64::NEG_INFINITY; n];
    let mut lag = vec![0.0_f64; n];

    // Pass 1, arrivals in time order with a cursor on the trace: the link's and the flow's
    // transmitted bytes at each arrival give Q_i(t_a) (T-WFI), and tell whether the packet
    // opens a backlogged period (then D at its arrival starts the running minimum of the
    // B-WFI pass).
    let bytes_per_ns = rate / 8e9;
    let mut arrived = vec![0u64; n]; // bytes of the flow arrived so far
    let mut done = vec![0u64; n]; // bytes of the flow whose transmission ended
    let mut last_finish = vec![f64::NEG_INFINITY; n];
    let mut work_done = 0u64;
    let mut cursor = 0; // first transmission not ended by the current arrival
    let mut opens: Vec<Option<f64>> = vec![None; arrivals.len()];
    for (seq, a) in arrivals.iter().enumerate() {
        let Some(k) = tx_of[seq] else { continue };
        let t = a.time_ns as f64;
        let i = a.flow;
        while cursor < tx.len() && tx[cursor].finish_ns <= t {
            let r = &tx[cursor];
            work_done += u64::from(r.len);
            done[r.flow] += u64::from(r.len);
            last_finish[r.flow] = r.finish_ns;
            cursor += 1;
        }
        let (partial, partial_flow) = match tx.get(cursor) {
            Some(r) if r.start_ns < t => (
                ((t - r.start_ns) * bytes_per_ns).min(f64::from(r.len)),
                Some(r.flow),
            ),
            _ => (0.0, None),
        };
        let sent_i = done[i] as f64
            + if partial_flow == Some(i) {
                partial
            } else {
                0.0
            };
        let phi = out[i].phi;
        // Idle before this arrival: everything earlier is out, and not just now (a packet
        // arriving as the last bit leaves continues the period).
        if done[i] == arrived[i] && last_finish[i] < t {
            opens[seq] = Some(phi * (work_done as f64 + partial) - sent_i);
        }
        arrived[i] += u64::from(a.len);
        let backlog = arrived[i] as f64 - sent_i;
        let ideal = t + ns(backlog, rate) / phi;
        t_wfi[i] = t_wfi[i].max(tx[k].finish_ns - ideal);
    }

    // Pass 2, transmissions in order: B-WFI at own starts against the running minimum of D
    // (reset at period starts, lowered at own ends), and GPS lag at own starts.
    let mut gps = FluidGps::new(weights, rate);
    let mut gps_id = vec![usize::MAX; arrivals.len()];
    let mut fed = 0; // arrivals handed to the GPS system
    let mut feed = |gps: &mut FluidGps, upto: f64, gps_id: &mut [usize]| {
        while let Some(a) = arrivals.get(fed) {
            if a.time_ns as f64 > upto {
                break;
            }
            if tx_of[fed].is_some() {
                gps_id[fed] = gps.arrive(a.time_ns as f64, a.flow, a.len);
            }
            fed += 1;
        }
    };
    let mut work_before = 0u64;
    let mut sent_before = vec![0u64; n];
    let mut min_d = vec![0.0_f64; n];
    let mut last_seq: Vec<Option<usize>> = vec![None; n];
    for r in tx {
        let i = r.flow;
        let phi = out[i].phi;
        assert!(
            last_seq[i].map_or(true, |s| s < r.seq),
            "flow {i} sent packet {} after packet {:?}: not FIFO",
            r.seq,
            last_seq[i]
        );
        last_seq[i] = Some(r.seq);
        if let Some(d_b) = opens[r.seq] {
            min_d[i] = d_b;
        }
        let d_start = phi * work_before as f64 - sent_before[i] as f64;
        b_wfi[i] = b_wfi[i].max(d_start - min_d[i]);

        feed(&mut gps, r.start_ns, &mut gps_id);
        gps.advance_to(r.start_ns);
        lag[i] = lag[i].max(gps.service_bytes(i) - sent_before[i] as f64);

        work_before += u64::from(r.len);
        sent_before[i] += u64::from(r.len);
        let d_end = phi * work_before as f64 - sent_before[i] as f64;
        min_d[i] = min_d[i].min(d_end);
    }
    feed(&mut gps, f64::INFINITY, &mut gps_id);
    gps.drain();
    for r in tx {
        let gps_finish = gps.finish_ns(gps_id[r.seq]).expect("drained");
        delay[r.flow] = delay[r.flow].max(r.finish_ns - gps_finish);
    }

    for (i, fs) in out.iter_mut().enumerate() {
        if fs.packets == 0 {
            continue; // zeros
        }
        fs.packet_service_time_ns = ns(f64::from(fs.max_len), rate) / fs.phi;
        fs.t_wfi_ns = t_wfi[i];
        fs.b_wfi_bytes = b_wfi[i];
        fs.gps_delay_ns = delay[i];
        fs.gps_lag_bytes = lag[i];
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn drr_bound_matches_the_papers_worked_examples() {
        // QFQ+ paper section 6: n = 1000, phi_min = 0.75e-3, phi_k = 0.25, L = 1, R = 8 bit/ns
        // (1 byte/ns): (1000/0.75 + 4 + 999) L/R = 2336.33 ns without a transmit queue.
        let b = BoundInputs {
            phi: 0.25,
            max_len_i: 1,
            max_len_all: 1,
            delta_w_bytes: 0,
            rate_bps: 8e9,
        };
        assert!((drr_t_wfi_bound(&b, 0.75e-3, 1000) - 2336.333).abs() < 1e-2);
        // pspat paper section 5.2: phi_k = 0.5, phi_min = 0.005, 25 clients: 226 L/B;
        // 100 clients: 301 L/B.
        let b = BoundInputs { phi: 0.5, ..b };
        assert!((drr_t_wfi_bound(&b, 0.005, 25) - 226.0).abs() < 1e-9);
        assert!((drr_t_wfi_bound(&b, 0.005, 100) - 301.0).abs() < 1e-9);
    }
    use super::*;
    use crate::packet::Desc;
    use crate::reference::gps::gps_finish_times;
    use crate::reference::link::run_on_link;
    use crate::reference::trace::{DropRecord, TxRecord};
    use crate::registry::{build, Params};
    use crate::stats::DropReason;
    use crate::testing::{random_run_on_link, xorshift};
    use crate::FlowParams;

    /// 8 Gbit/s: one byte per nanosecond.
    const R: f64 = 8e9;

    fn arr(time_ns: u64, flow: usize, len: u32) -> Arrival {
        Arrival { time_ns, flow, len }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// A trace that sends `order` (arrival indices) back to back from `t0`, each starting
    /// no earlier than its arrival.
    fn serial_trace(arrivals: &[Arrival], order: &[usize], rate_bps: f64) -> Trace {
        let mut t = 0.0_f64;
        let tx = order
            .iter()
            .map(|&seq| {
                let a = arrivals[seq];
                let start = t.max(a.time_ns as f64);
                t = start + ns(f64::from(a.len), rate_bps);
                TxRecord {
                    seq,
                    flow: a.flow,
                    len: a.len,
                    arrival_ns: a.time_ns as f64,
                    dequeue_ns: start,
                    start_ns: start,
                    finish_ns: t,
                }
            })
            .collect();
        Trace {
            rate_bps,
            tx,
            drops: Vec::new(),
        }
    }

    #[test]
    fn hand_made_trace_with_a_burst_ahead_of_a_flow() {
        // Two flows of weight 1 (phi = 1/2), 100-byte packets, 1 B/ns:
        //   seq: 0    1    2    3    4    5    6    7
        //   t_a: 0    0    0    0    400  400  400  400
        //   flow 1    0    0    1    1    0    0    0
        // sent: 0 [0,100], 1 [100,200], 2 [200,300], 3 [300,400], 5 [400,500],
        //       6 [500,600], 7 [600,700], 4 [700,800].
        // Flow 1's packet 4 arrives as packet 3 leaves: one period [0, 800].
        let a = [
            arr(0, 1, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 1, 100),
            arr(400, 1, 100),
            arr(400, 0, 100),
            arr(400, 0, 100),
            arr(400, 0, 100),
        ];
        let trace = serial_trace(&a, &[0, 1, 2, 3, 5, 6, 7, 4], R);
        let m = measure(&trace, &a, &[1, 1]);
        let (f0, f1) = (m[0], m[1]);
        assert_eq!((f1.packets, f1.bytes, f1.max_len), (3, 300, 100));
        assert_eq!((f0.packets, f0.bytes), (5, 500));
        assert!(close(f1.phi, 0.5));
        assert!(close(f1.packet_service_time_ns, 200.0)); // 100 B at 0.5 B/ns

        // T-WFI, flow 1 (ideal = t_a + Q / 0.5):
        //   seq 0: Q = 100, ideal 200, t_c 100: -100
        //   seq 3: Q = 200 (0 and 3), ideal 400, t_c 400: 0
        //   seq 4: at 400 both earlier packets are out, Q = 100: ideal 600, t_c 800: 200
        assert!(close(f1.t_wfi_ns, 200.0), "{f1:?}");
        // Flow 0: seq 1, 2: 200 - 200 = 0, 300 - 400; seq 5, 6, 7 (Q = 100, 200, 300):
        //   500 - 600, 600 - 800, 700 - 1000. Max 0.
        assert!(close(f0.t_wfi_ns, 0.0), "{f0:?}");

        // B-WFI, D = W / 2 - W_1 for flow 1: D(0) = 0; own end 100: -50 (the minimum);
        // own start 300: 150 - 100 = 50; own end 400: 200 - 200 = 0; own start 700:
        // 350 - 200 = 150. Max D(t2) - min D(t1 <= t2) = 150 - (-50) = 200 (t1 = 100, an
        // own transmission end; t1 = 0 would give 150, and splitting the period at 400
        // would give 150 - 0 = 150).
        assert!(close(f1.b_wfi_bytes, 200.0), "{f1:?}");
        // Flow 0, period [0, 300]: D(0) = 0, own start 100: 50, own end 200: 0, own start
        // 200: 0, end 300: -50. Period [400, 700] (idle 300..400): D(400) = 200 - 200 = 0,
        // then only own transmissions: D falls. Max 50.
        assert!(close(f0.b_wfi_bytes, 50.0), "{f0:?}");

        // GPS (0.5 B/ns each while both are backlogged): seq 0, 1 end at 200 (V = 100),
        // seq 2, 3 at 400 (V = 200); at 400 seq 4, 5 get F = 300, reached at 600; flow 0
        // alone: seq 6 at 700, seq 7 at 800.
        let g = gps_finish_times(&a, &[1, 1], R);
        let want = [200.0, 200.0, 400.0, 400.0, 600.0, 600.0, 700.0, 800.0];
        assert!(g.iter().zip(want).all(|(x, y)| close(*x, y)), "{g:?}");
        // Delay, flow 1: 100 - 200, 400 - 400, 800 - 600: 200. Flow 0: 200 - 200,
        // 300 - 400, 500 - 600, 600 - 700, 700 - 800: 0.
        assert!(close(f1.gps_delay_ns, 200.0), "{f1:?}");
        assert!(close(f0.gps_delay_ns, 0.0), "{f0:?}");
        // Lag at own starts, flow 1: t = 0: 0; t = 300: GPS 150 - 100 = 50; t = 700: GPS
        // 300 (seq 4 done at 600) - 200 = 100. Flow 0: t = 100: 50 - 0; t = 200: 100 - 100;
        // t = 400: 200 - 200; t = 500: 250 - 300; t = 600: 300 - 400. Max 50.
        assert!(close(f1.gps_lag_bytes, 100.0), "{f1:?}");
        assert!(close(f0.gps_lag_bytes, 50.0), "{f0:?}");
    }

    #[test]
    fn partial_transmissions_count_bit_by_bit() {
        // Flow 0 sends 1000 bytes [0, 1000]; flow 1's 100 bytes arrive at 250 and wait.
        // Flow 0's second packet arrives at 400, when 400 bytes of the first are out:
        // Q = 1000 + 200 - 400 = 800, phi = 1/2: ideal 400 + 1600 = 2000; it leaves at
        // 1100 + 200 = 1300: -700. The first: Q = 1000, ideal 2000, t_c 1000: -1000.
        // Flow 1: Q = 100, ideal 250 + 200 = 450, t_c 1100: 650.
        let a = [arr(0, 0, 1000), arr(250, 1, 100), arr(400, 0, 200)];
        let trace = serial_trace(&a, &[0, 1, 2], R);
        let m = measure(&trace, &a, &[1, 1]);
        assert!(close(m[0].t_wfi_ns, -700.0), "{:?}", m[0]);
        assert!(close(m[1].t_wfi_ns, 650.0), "{:?}", m[1]);
        // Flow 1's period starts at 250 mid-transmission: D(250) = 125 - 0; its own start
        // at 1000: D = 500. B-WFI = 375.
        assert!(close(m[1].b_wfi_bytes, 375.0), "{:?}", m[1]);
    }

    #[test]
    fn single_flow_on_an_idle_link_matches_gps_exactly() {
        // Alone (phi = 1) the packet system is the fluid one: no delay, no lag, and T-WFI 0
        // (every packet leaves exactly when its backlog is sent at R), bursts included.
        let mut s = build::<Desc>("wf2q+", &Params::new(), 64).unwrap();
        let f = s.add_flow(FlowParams::default()).unwrap();
        let a = [
            arr(0, 0, 1500),
            arr(3000, 0, 64),
            arr(3001, 0, 1500),
            arr(3001, 0, 700),
            arr(90_000, 0, 1),
        ];
        let trace = run_on_link(&mut s, &[f], &a, 1e9);
        let m = measure(&trace, &a, &[5]);
        assert_eq!(m.len(), 1);
        let f0 = m[0];
        assert!(f0.gps_delay_ns.abs() < 1e-6, "{f0:?}");
        assert!(f0.gps_lag_bytes.abs() < 1e-6, "{f0:?}");
        assert!(f0.t_wfi_ns.abs() < 1e-6, "{f0:?}");
        assert!(f0.b_wfi_bytes.abs() < 1e-6, "{f0:?}");
        assert!(close(f0.packet_service_time_ns, 12_000.0));
    }

    #[test]
    fn silent_flows_get_zeros_and_drops_are_counted() {
        let a = [arr(0, 0, 100), arr(0, 0, 100)];
        let mut trace = serial_trace(&a, &[0], R);
        trace.drops.push(DropRecord {
            seq: 1,
            flow: 0,
            reason: DropReason::FlowPacketLimit,
        });
        let m = measure(&trace, &a, &[1, 3]);
        assert_eq!((m[0].packets, m[0].drops), (1, 1));
        assert_eq!(
            m[1],
            FlowService {
                weight: 3,
                phi: 0.75,
                ..FlowService::default()
            }
        );
        // The dropped packet is not in flow 0's backlog: Q = 100, ideal 400, t_c 100.
        assert!(close(m[0].t_wfi_ns, -300.0), "{:?}", m[0]);
        // Nor in the GPS reference: alone, the packet finishes at 100 there too.
        assert!(close(m[0].gps_delay_ns, 0.0), "{:?}", m[0]);
    }

    #[test]
    #[should_panic(expected = "incomplete trace")]
    fn an_incomplete_trace_is_refused() {
        let a = [arr(0, 0, 100), arr(0, 0, 100)];
        let trace = serial_trace(&a, &[0], R);
        measure(&trace, &a, &[1]);
    }

    #[test]
    #[should_panic(expected = "not FIFO")]
    fn out_of_order_service_within_a_flow_is_refused() {
        let a = [arr(0, 0, 100), arr(0, 0, 100)];
        let trace = serial_trace(&a, &[1, 0], R);
        measure(&trace, &a, &[1]);
    }

    #[test]
    fn wf2qp_bound_formulas() {
        // phi = 1/2, L_i = 1000, L = 1500, 1 B/ns: B = 1.5 * 1000 + 1500 = 3000 bytes;
        // T = 2 * 1000 / 0.5 + 500 = 4500 ns.
        let (b, t) = wf2qp_bounds(0.5, 1000, 1500, R);
        assert!(close(b, 3000.0) && close(t, 4500.0), "{b} {t}");
        // At 1 Gbit/s times are 8 times longer.
        let (_, t) = wf2qp_bounds(0.5, 1000, 1500, 1e9);
        assert!(close(t, 36_000.0));
        // Delta W = 1500: B + 0.5 * 1500 = 3750 bytes, T + 1500 ns.
        let (b, t) = wf2qp_bounds_with_delta_w(0.5, 1000, 1500, 1500, R);
        assert!(close(b, 3750.0) && close(t, 6000.0), "{b} {t}");
    }

    #[test]
    fn qfq_family_bounds_against_the_papers_numbers() {
        // QFQ+ paper section 6, the 1k-highw example: phi = 1/4, every packet L bytes, so
        // one packet service time is 4 L / R. At 8 Gbit/s and L = 1000 bytes: 500 ns.
        let l = 1000;
        let st = 4.0 * 1000.0;
        // Transmit queue of 10 packets: Q = 11 L (Q_pkts = 10 + 1).
        let b = BoundInputs::with_txq(0.25, l, l, 10, R);
        assert!(close(b.service_time_ns(), st));
        // QFQ+ with m = 1, M = min(8, 11) = 8: (39 L + Q + 8 L) / R = 58 L / R = 14.5
        // service times (Table 2, column 10).
        assert!(close(qfq_plus_t_wfi_bound(&b, 1, 8) / st, 14.5));
        // Column 100: (39 + 101 + 8) / 4 = 37.
        let b100 = BoundInputs::with_txq(0.25, l, l, 100, R);
        assert!(close(qfq_plus_t_wfi_bound(&b100, 1, 8) / st, 37.0));
        // QFQ, pspat eq. (2) plus Q: 6 * 4 + 11 = 35 L / R = 8.75 service times (the QFQ+
        // paper's Table 2 has 9.7 from its coefficient 7: (28 + 11) / 4 = 9.75).
        assert!(close(qfq_t_wfi_bound(&b) / st, 8.75));
        // No queue: Q = L, 25 L / R.
        let b0 = BoundInputs::with_txq(0.25, l, l, 0, R);
        assert!(close(qfq_t_wfi_bound(&b0), 25.0 * 1000.0));
        // Unknown aggregate: m = 2 is the worst here: (11 - 1/2) 4 + 11 + 8 - 2 = 59 L/R.
        assert!(close(
            qfq_plus_t_wfi_bound_any_aggregate(&b, 8) / st,
            59.0 / 4.0
        ));
    }

    #[test]
    #[should_panic(expected = "aggregate size")]
    fn an_empty_aggregate_has_no_bound() {
        qfq_plus_t_wfi_bound(&BoundInputs::with_txq(0.5, 1, 1, 0, R), 0, 8);
    }

    // ---- brute-force checks of the evaluation-point arguments ----

    /// Bytes the link sent by `t`, and bytes of `flow` (`None`: all flows), bit by bit.
    fn sent_by(trace: &Trace, t: f64, flow: Option<usize>) -> f64 {
        trace
            .tx
            .iter()
            .filter(|r| flow.map_or(true, |f| r.flow == f))
            .map(|r| {
                ((t - r.start_ns) / (r.finish_ns - r.start_ns)).clamp(0.0, 1.0) * f64::from(r.len)
            })
            .sum()
    }

    fn random_run(alg: &str, seed: u64) -> (Trace, Vec<Arrival>, Vec<u32>) {
        let mut st = seed;
        let weights: Vec<u32> = (0..4).map(|_| 1 + (xorshift(&mut st) % 6) as u32).collect();
        let (trace, a) = random_run_on_link(alg, &weights, 70, &mut st);
        (trace, a, weights)
    }

    /// Every arrival, start and end, the GPS completions and midpoints between them.
    fn sample_points(trace: &Trace, a: &[Arrival], weights: &[u32]) -> Vec<f64> {
        let mut pts: Vec<f64> = a.iter().map(|x| x.time_ns as f64).collect();
        for r in &trace.tx {
            pts.push(r.start_ns);
            pts.push(r.finish_ns);
        }
        pts.extend(gps_finish_times(a, weights, trace.rate_bps));
        pts.sort_by(f64::total_cmp);
        pts.dedup();
        let mids: Vec<f64> = pts.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
        pts.extend(mids);
        pts.sort_by(f64::total_cmp);
        pts
    }

    #[test]
    fn b_wfi_and_lag_equal_brute_force_over_all_event_points() {
        for (alg, seed) in [
            ("wf2q+", 1),
            ("drr", 2),
            ("fifo", 3),
            ("wf2q+", 4),
            ("scfq", 5),
        ] {
            let (trace, a, weights) = random_run(alg, seed * 0x2545_f491_4f6c_dd1d);
            assert!(trace.drops.is_empty());
            let m = measure(&trace, &a, &weights);
            let pts = sample_points(&trace, &a, &weights);
            let total_w: u32 = weights.iter().sum();
            for (i, fs) in m.iter().enumerate() {
                let phi = f64::from(weights[i]) / f64::from(total_w);
                // B-WFI over all pairs of sample points inside one backlogged stretch.
                let d: Vec<f64> = pts
                    .iter()
                    .map(|&t| phi * sent_by(&trace, t, None) - sent_by(&trace, t, Some(i)))
                    .collect();
                let backlogged: Vec<bool> = pts
                    .iter()
                    .map(|&t| {
                        let arrived: u64 = a
                            .iter()
                            .filter(|x| x.flow == i && x.time_ns as f64 <= t)
                            .map(|x| u64::from(x.len))
                            .sum();
                        arrived as f64 > sent_by(&trace, t, Some(i)) + 1e-9
                    })
                    .collect();
                let mut brute = 0.0_f64;
                for s in 0..pts.len() {
                    if !backlogged[s] {
                        continue;
                    }
                    for e in s..pts.len() {
                        if e > s && !backlogged[e - 1] {
                            break;
                        }
                        brute = brute.max(d[e] - d[s]);
                    }
                }
                assert!(
                    (brute - fs.b_wfi_bytes).abs() < 1e-6,
                    "{alg} flow {i}: B-WFI brute {brute} vs measured {}",
                    fs.b_wfi_bytes
                );
                // GPS lag over all sample points.
                let mut g = FluidGps::new(&weights, trace.rate_bps);
                let mut next = 0;
                let mut brute = 0.0_f64;
                for &t in &pts {
                    while next < a.len() && a[next].time_ns as f64 <= t {
                        g.arrive(a[next].time_ns as f64, a[next].flow, a[next].len);
                        next += 1;
                    }
                    g.advance_to(t);
                    brute = brute.max(g.service_bytes(i) - sent_by(&trace, t, Some(i)));
                }
                assert!(
                    (brute - fs.gps_lag_bytes).abs() < 1e-6,
                    "{alg} flow {i}: lag brute {brute} vs measured {}",
                    fs.gps_lag_bytes
                );
                // T-WFI with Q recomputed from scratch for every packet.
                let mut brute = f64::NEG_INFINITY;
                for (seq, x) in a.iter().enumerate().filter(|(_, x)| x.flow == i) {
                    let t = x.time_ns as f64;
                    let upto: u64 = a[..=seq]
                        .iter()
                        .filter(|y| y.flow == i)
                        .map(|y| u64::from(y.len))
                        .sum();
                    let q = upto as f64 - sent_by(&trace, t, Some(i));
                    let tc = trace.tx.iter().find(|r| r.seq == seq).unwrap().finish_ns;
                    brute = brute.max(tc - t - ns(q, trace.rate_bps) / phi);
                }
                if fs.packets > 0 {
                    assert!(
                        (brute - fs.t_wfi_ns).abs() < 1e-6,
                        "{alg} flow {i}: T-WFI brute {brute} vs measured {}",
                        fs.t_wfi_ns
                    );
                }
            }
        }
    }
}
