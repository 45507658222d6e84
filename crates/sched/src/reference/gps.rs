//! The fluid GPS system (Generalized Processor Sharing), exact and event-driven.
//!
//! A. K. Parekh and R. G. Gallager, "A generalized processor sharing approach to flow
//! control in integrated services networks: the single-node case", ToN 1993.
//!
//! At every instant each backlogged flow `i` is served at rate `R w_i / sum_{j in B} w_j`,
//! `B` the set of backlogged flows, FIFO within a flow; the system is work-conserving. This
//! is the ideal the timestamp schedulers approximate; here it is the oracle for the delay
//! and lag metrics of [`super::wfi`], so it favours clarity over speed.
//!
//! # Virtual time
//!
//! `V(t)` grows at `dV/dt = R / sum_{j in B} w_j` (bytes per unit weight per unit time) while
//! the system is busy and is frozen while it is empty; a new busy period continues from the
//! value `V` had when the last one ended. A backlogged flow receives `w_i dV` bytes in
//! `dt`, so a packet `p` of flow `i` arriving at `a_p` has
//!
//! - virtual start `S_p = max(F_prev, V(a_p))`, `F_prev` the virtual finish of the flow's
//!   previous packet (`S_p = F_prev` exactly when the flow is still backlogged: its previous
//!   packet has not finished, so `F_prev > V(a_p)`);
//! - virtual finish `F_p = S_p + len_p / w_i`;
//!
//! and completes at the instant `V` reaches `F_p`. The head packets of the backlogged flows
//! sit in an ordered set keyed by `(F, flow)`; the next event is the smallest `F`. Between
//! events the set of backlogged flows, hence the slope of `V`, is constant, so the instant
//! `V` reaches `F` is `now + (F - V) sum_B w / R`.
//!
//! # Ties and rounding
//!
//! At an event `V` is set to the head's `F` exactly (not accumulated), and every head with
//! `F <= V` completes at that same instant: packets whose finish times are equal complete
//! together, whatever their flows. Advancing to a time short of the next event never lets
//! `V` pass the smallest head `F` (rounding could otherwise), so no completion is skipped.
//! Times and virtual times are `f64`; relative errors are of the order of 1e-15 per event.
//!
//! # Complexity
//!
//! O(log N) per arrival and per completion, N the number of backlogged flows.

use std::cmp::Ordering;
use std::collections::{BTreeSet, VecDeque};

use super::trace::Arrival;

/// A backlogged flow's entry in the event set: its head packet's virtual finish time, then
/// the flow index to make ties deterministic.
#[derive(Clone, Copy, Debug)]
struct Head {
    vfinish: f64,
    flow: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        self.vfinish
            .total_cmp(&other.vfinish)
            .then(self.flow.cmp(&other.flow))
    }
}

/// A packet in the fluid system.
#[derive(Clone, Copy, Debug)]
struct FluidPacket {
    len: u32,
    vstart: f64,
    vfinish: f64,
    finish_ns: Option<f64>,
}

/// A flow in the fluid system.
#[derive(Clone, Debug)]
struct FluidFlow {
    weight: f64,
    /// Packets not yet completed, oldest first.
    queue: VecDeque<usize>,
    /// Virtual finish time of the flow's last packet (0 before any).
    last_vfinish: f64,
    /// Bytes of the flow's completed packets.
    done_bytes: u64,
}

/// The fluid GPS system on a link of constant rate.
///
/// Time only moves forward: [`FluidGps::arrive`] and [`FluidGps::advance_to`] take times no
/// earlier than the current one. Queries ([`FluidGps::service_bytes`],
/// [`FluidGps::finish_ns`]) answer for the current time.
///
/// ```
/// use pspat_sched::reference::gps::FluidGps;
///
/// // 8 Gbit/s is one byte per ns. Weights 3:1, 300 bytes each at t = 0.
/// let mut g = FluidGps::new(&[3, 1], 8e9);
/// let a = g.arrive(0.0, 0, 300);
/// let b = g.arrive(0.0, 1, 300);
/// g.advance_to(200.0);
/// assert!((g.service_bytes(0) - 150.0).abs() < 1e-9); // 3/4 of a byte per ns
/// g.drain();
/// assert_eq!(g.finish_ns(a), Some(400.0));
/// assert_eq!(g.finish_ns(b), Some(600.0)); // alone from 400 on
/// ```
#[derive(Clone, Debug)]
pub struct FluidGps {
    /// Link rate, bytes per nanosecond.
    rate_bytes_per_ns: f64,
    now_ns: f64,
    /// `V(now)`, bytes per unit weight.
    vtime: f64,
    /// Sum of the weights of the backlogged flows (exact: integers).
    active_weight: u64,
    weights: Vec<u32>,
    flows: Vec<FluidFlow>,
    packets: Vec<FluidPacket>,
    heads: BTreeSet<Head>,
}

impl FluidGps {
    /// An empty system at time 0 with one flow per weight, on a link of `rate_bps` bit/s.
    ///
    /// # Panics
    ///
    /// If a weight is zero or the rate is not positive and finite.
    pub fn new(weights: &[u32], rate_bps: f64) -> Self {
        assert!(
            rate_bps.is_finite() && rate_bps > 0.0,
            "link rate must be positive and finite, got {rate_bps}"
        );
        assert!(weights.iter().all(|&w| w > 0), "weights must be positive");
        Self {
            rate_bytes_per_ns: rate_bps / 8e9,
            now_ns: 0.0,
            vtime: 0.0,
            active_weight: 0,
            weights: weights.to_vec(),
            flows: weights
                .iter()
                .map(|&w| FluidFlow {
                    weight: f64::from(w),
                    queue: VecDeque::new(),
                    last_vfinish: 0.0,
                    done_bytes: 0,
                })
                .collect(),
            packets: Vec::new(),
            heads: BTreeSet::new(),
        }
    }

    /// Current time, ns.
    pub fn now_ns(&self) -> f64 {
        self.now_ns
    }

    /// Current GPS virtual time, bytes per unit weight.
    pub fn vtime(&self) -> f64 {
        self.vtime
    }

    /// Weights of the flows.
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// Whether no packet is in the system.
    pub fn is_idle(&self) -> bool {
        self.heads.is_empty()
    }

    /// A packet of `len` bytes arrives on `flow` at `t_ns` (no earlier than the current
    /// time; the system first advances to it). Returns the packet's id: 0, 1, 2... in
    /// arrival order.
    ///
    /// # Panics
    ///
    /// If `t_ns` is earlier than the current time, `flow` does not exist or `len` is zero.
    pub fn arrive(&mut self, t_ns: f64, flow: usize, len: u32) -> usize {
        assert!(flow < self.flows.len(), "no flow {flow}");
        assert!(len > 0, "zero-length packet");
        self.advance_to(t_ns);
        let id = self.packets.len();
        let fl = &mut self.flows[flow];
        let vstart = fl.last_vfinish.max(self.vtime);
        let vfinish = vstart + f64::from(len) / fl.weight;
        fl.last_vfinish = vfinish;
        if fl.queue.is_empty() {
            self.heads.insert(Head { vfinish, flow });
            self.active_weight += u64::from(self.weights[flow]);
        }
        fl.queue.push_back(id);
        self.packets.push(FluidPacket {
            len,
            vstart,
            vfinish,
            finish_ns: None,
        });
        id
    }

    /// The instant `V` reaches `vfinish` at the current slope (never before now).
    fn time_of(&self, vfinish: f64) -> f64 {
        let dt = (vfinish - self.vtime) * self.active_weight as f64 / self.rate_bytes_per_ns;
        self.now_ns + dt.max(0.0)
    }

    /// Moves time forward to `t_ns`, completing every packet whose fluid service ends by
    /// then (at its exact completion instant).
    ///
    /// # Panics
    ///
    /// If `t_ns` is earlier than the current time.
    pub fn advance_to(&mut self, t_ns: f64) {
        assert!(
            t_ns >= self.now_ns,
            "time goes backwards: {t_ns} < {}",
            self.now_ns
        );
        while let Some(&first) = self.heads.first() {
            let at = self.time_of(first.vfinish);
            if at > t_ns {
                break;
            }
            self.now_ns = at;
            self.vtime = self.vtime.max(first.vfinish);
            self.complete_heads();
        }
        if let Some(first) = self.heads.first() {
            let v = self.vtime
                + (t_ns - self.now_ns) * self.rate_bytes_per_ns / self.active_weight as f64;
            // Mathematically `v < first.vfinish` (the event is after `t_ns`); do not let
            // rounding say otherwise.
            self.vtime = v.min(first.vfinish);
        }
        self.now_ns = t_ns;
    }

    /// Completes, at the current time, every head packet with `F <= V`.
    fn complete_heads(&mut self) {
        while let Some(&head) = self.heads.first() {
            if head.vfinish > self.vtime {
                break;
            }
            self.heads.pop_first();
            let fl = &mut self.flows[head.flow];
            let id = fl
                .queue
                .pop_front()
                .expect("a head belongs to a backlogged flow");
            let p = &mut self.packets[id];
            p.finish_ns = Some(self.now_ns);
            fl.done_bytes += u64::from(p.len);
            match fl.queue.front() {
                Some(&next) => {
                    // Its F is the previous one plus len / w > V: it completes later.
                    self.heads.insert(Head {
                        vfinish: self.packets[next].vfinish,
                        flow: head.flow,
                    });
                }
                None => self.active_weight -= u64::from(self.weights[head.flow]),
            }
        }
    }

    /// Runs until every packet in the system has completed; time stops at the last
    /// completion (or stays put when already idle).
    pub fn drain(&mut self) {
        while let Some(&first) = self.heads.first() {
            let at = self.time_of(first.vfinish);
            self.advance_to(at);
        }
    }

    /// Cumulative fluid service of `flow` up to the current time, bytes: its completed
    /// packets plus the part of its head packet served so far.
    pub fn service_bytes(&self, flow: usize) -> f64 {
        let fl = &self.flows[flow];
        let partial = fl.queue.front().map_or(0.0, |&id| {
            let p = &self.packets[id];
            // The head started at its `vstart <= V` and is served at `w dV`.
            ((self.vtime - p.vstart) * fl.weight).clamp(0.0, f64::from(p.len))
        });
        fl.done_bytes as f64 + partial
    }

    /// Bytes of `flow` arrived and not yet served in the fluid system.
    pub fn backlog_bytes(&self, flow: usize) -> f64 {
        let fl = &self.flows[flow];
        let queued: u64 = fl
            .queue
            .iter()
            .map(|&id| u64::from(self.packets[id].len))
            .sum();
        (queued + fl.done_bytes) as f64 - self.service_bytes(flow)
    }

    /// Completion time of packet `id`, ns, if it has completed by now.
    pub fn finish_ns(&self, id: usize) -> Option<f64> {
        self.packets.get(id).and_then(|p| p.finish_ns)
    }

    /// Virtual start and finish times of packet `id` (bytes per unit weight).
    pub fn virtual_times(&self, id: usize) -> Option<(f64, f64)> {
        self.packets.get(id).map(|p| (p.vstart, p.vfinish))
    }
}

/// GPS completion time of every arrival, ns, in arrival order, on a link of `rate_bps`
/// bit/s with flow `i` of weight `weights[i]`.
///
/// # Panics
///
/// If `arrivals` is not sorted by time, names a flow without a weight, or has a zero
/// length.
pub fn gps_finish_times(arrivals: &[Arrival], weights: &[u32], rate_bps: f64) -> Vec<f64> {
    assert!(
        arrivals.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "arrivals must be sorted by time"
    );
    let mut g = FluidGps::new(weights, rate_bps);
    for a in arrivals {
        g.arrive(a.time_ns as f64, a.flow, a.len);
    }
    g.drain();
    (0..arrivals.len())
        .map(|id| g.finish_ns(id).expect("drained"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 Gbit/s: one byte per nanosecond, so the hand computations are in bytes.
    const R: f64 = 8e9;

    fn arr(time_ns: u64, flow: usize, len: u32) -> Arrival {
        Arrival { time_ns, flow, len }
    }

    fn assert_times(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn one_flow_alone_gets_the_whole_link() {
        // finish = a + 8 l / R: 1500 bytes at 1 Gbit/s take 12000 ns.
        let f = gps_finish_times(&[arr(1000, 0, 1500)], &[7], 1e9);
        assert_times(&f, &[13_000.0]);
        // Back to back on the same flow: FIFO, each after the previous one.
        let f = gps_finish_times(
            &[arr(100, 0, 500), arr(100, 0, 200), arr(300, 0, 10)],
            &[1],
            R,
        );
        assert_times(&f, &[600.0, 800.0, 810.0]);
    }

    #[test]
    fn two_equal_flows_arriving_together_share_the_link() {
        // Each at R/2 = 0.5 B/ns: 1000 bytes take 2000 ns; both complete at once.
        let f = gps_finish_times(&[arr(0, 0, 1000), arr(0, 1, 1000)], &[1, 1], R);
        assert_times(&f, &[2000.0, 2000.0]);
        // Two short packets of flow 0 (100 + 100) against 400 of flow 1: at 0.5 B/ns flow
        // 0's packets finish at 200 and 400 (V = 100, 200); flow 1 has then received 200
        // and sends its other 200 alone, finishing at 600.
        let f = gps_finish_times(
            &[arr(0, 0, 100), arr(0, 0, 100), arr(0, 1, 400)],
            &[1, 1],
            R,
        );
        assert_times(&f, &[200.0, 400.0, 600.0]);
    }

    #[test]
    fn weights_three_to_one_and_the_survivor_speeds_up() {
        // w = 3 and 1, 300 bytes each at 0: rates 0.75 and 0.25 B/ns. Flow 0 finishes at
        // 300 / 0.75 = 400 (V = 100 = 300/3); flow 1 has received 100 by then and sends
        // the remaining 200 at the full rate: 600 (V = 300).
        let mut g = FluidGps::new(&[3, 1], R);
        let a = g.arrive(0.0, 0, 300);
        let b = g.arrive(0.0, 1, 300);
        g.advance_to(200.0);
        assert!((g.service_bytes(0) - 150.0).abs() < 1e-9);
        assert!((g.service_bytes(1) - 50.0).abs() < 1e-9);
        assert!((g.vtime() - 50.0).abs() < 1e-9);
        g.advance_to(500.0);
        assert_eq!(g.finish_ns(a), Some(400.0));
        assert_eq!(g.finish_ns(b), None);
        assert!((g.service_bytes(0) - 300.0).abs() < 1e-9);
        assert!((g.service_bytes(1) - 200.0).abs() < 1e-9); // 100 + 100 alone
        g.drain();
        assert_eq!(g.finish_ns(b), Some(600.0));
        assert_eq!(g.now_ns(), 600.0);
        assert!(g.is_idle());
    }

    #[test]
    fn idle_gap_then_a_new_busy_period_continues_from_v() {
        // 100 bytes at 0: done at 100 with V = 100. Idle until 500, V frozen at 100. Then
        // 200 bytes on each of two equal flows: F = 100 + 200 = 300 for both (flow 0's old
        // F = 100 <= V), reached at 500 + 200 * 2 = 900.
        let mut g = FluidGps::new(&[1, 1], R);
        let p0 = g.arrive(0.0, 0, 100);
        g.advance_to(450.0);
        assert!(g.is_idle());
        assert_eq!(g.finish_ns(p0), Some(100.0));
        assert_eq!(g.vtime(), 100.0);
        let p1 = g.arrive(500.0, 0, 200);
        let p2 = g.arrive(500.0, 1, 200);
        assert_eq!(g.virtual_times(p1), Some((100.0, 300.0)));
        assert_eq!(g.virtual_times(p2), Some((100.0, 300.0)));
        g.drain();
        assert_eq!(g.finish_ns(p1), Some(900.0));
        assert_eq!(g.finish_ns(p2), Some(900.0));
    }

    #[test]
    fn simultaneous_completions_then_a_late_packet() {
        // Weights 1, 2, 3 with 100, 200, 300 bytes: all have F = 100, reached at
        // 100 * 6 = 600: the three complete together. A packet arriving at 600 on flow 1
        // finds the system empty and leaves at 650.
        let a = [
            arr(0, 0, 100),
            arr(0, 1, 200),
            arr(0, 2, 300),
            arr(600, 1, 50),
        ];
        let f = gps_finish_times(&a, &[1, 2, 3], R);
        assert_times(&f, &[600.0, 600.0, 600.0, 650.0]);
        let mut g = FluidGps::new(&[1, 2, 3], R);
        for x in &a[..3] {
            g.arrive(x.time_ns as f64, x.flow, x.len);
        }
        g.advance_to(600.0);
        assert!(g.is_idle(), "all three completed at 600");
        assert_eq!(g.active_weight, 0);
    }

    #[test]
    fn late_arrival_joins_a_busy_system() {
        // Flow 0: 1000 bytes at 0, alone until 400 (V = 400, 400 bytes served). Flow 1:
        // 200 bytes at 400, F = 400 + 200 = 600; both at 0.5 B/ns, V reaches 600 at 800:
        // flow 1 done. Flow 0 has 600 by then and finishes its last 400 alone at 1200.
        let mut g = FluidGps::new(&[1, 1], R);
        let a = g.arrive(0.0, 0, 1000);
        let b = g.arrive(400.0, 1, 200);
        assert!((g.service_bytes(0) - 400.0).abs() < 1e-9);
        g.advance_to(600.0);
        assert!((g.service_bytes(0) - 500.0).abs() < 1e-9);
        assert!((g.service_bytes(1) - 100.0).abs() < 1e-9);
        assert!((g.backlog_bytes(0) - 500.0).abs() < 1e-9);
        g.drain();
        assert_eq!(g.finish_ns(b), Some(800.0));
        assert_eq!(g.finish_ns(a), Some(1200.0));
    }

    #[test]
    fn arrival_at_the_instant_the_flow_empties() {
        // Flow 0's packet completes at 100 exactly when its next one arrives: the new one
        // starts at V = 100 and takes 50 more.
        let f = gps_finish_times(&[arr(0, 0, 100), arr(100, 0, 50)], &[1], R);
        assert_times(&f, &[100.0, 150.0]);
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn time_only_moves_forward() {
        let mut g = FluidGps::new(&[1], R);
        g.advance_to(10.0);
        g.advance_to(9.0);
    }

    /// A small deterministic pseudo-random generator (xorshift), to avoid a dependency.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn conservation_total_service_is_the_work_of_any_work_conserving_link() {
        // All work-conserving systems on the same arrivals do the same work. The link work
        // by t is A(t) - Q(t), with Q the backlog of one FIFO queue fed by the arrivals:
        // Q(t) = max(0, Q(t_k) + bytes arriving at t_k - R (t - t_k)) between arrivals.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let weights = [1, 5, 2, 9, 3];
        let mut arrivals = Vec::new();
        let mut t = 0;
        for _ in 0..300 {
            let r = xorshift(&mut seed);
            t += if r % 3 == 0 { r % 5000 } else { 0 };
            arrivals.push(arr(t, (r >> 8) as usize % 5, 1 + (r >> 20) as u32 % 1500));
        }
        let rate = 1e9; // 0.125 B/ns
        let mut g = FluidGps::new(&weights, rate);
        let mut fifo_backlog = 0.0_f64;
        let mut fifo_t = 0.0_f64;
        let mut arrived = 0.0_f64;
        let mut per_flow_arrived = [0.0_f64; 5];
        let mut next = 0;
        let end = t as f64 + 4e6; // 300 x 1500 bytes take at most 3.6e6 ns
        let mut q = 0.0;
        while q < end {
            while next < arrivals.len() && arrivals[next].time_ns as f64 <= q {
                let a = arrivals[next];
                let at = a.time_ns as f64;
                fifo_backlog = (fifo_backlog - (at - fifo_t) * 0.125).max(0.0);
                fifo_t = at;
                fifo_backlog += f64::from(a.len);
                arrived += f64::from(a.len);
                per_flow_arrived[a.flow] += f64::from(a.len);
                g.arrive(at, a.flow, a.len);
                next += 1;
            }
            g.advance_to(q);
            let link_work = arrived - (fifo_backlog - (q - fifo_t) * 0.125).max(0.0);
            let total: f64 = (0..5).map(|i| g.service_bytes(i)).sum();
            assert!(
                (total - link_work).abs() < 1e-6 * arrived.max(1.0),
                "at {q}: GPS served {total}, a work-conserving link {link_work}"
            );
            for (i, &arrived_i) in per_flow_arrived.iter().enumerate() {
                let s = g.service_bytes(i);
                assert!(s <= arrived_i + 1e-6, "flow {i} served beyond arrivals");
                assert!((s + g.backlog_bytes(i) - arrived_i).abs() < 1e-6);
            }
            q += 997.0 + (xorshift(&mut seed) % 3000) as f64;
        }
        assert!(g.is_idle());
        assert_eq!(next, arrivals.len());
    }

    #[test]
    fn backlogged_flows_share_in_proportion_to_weights() {
        // While flows 0..3 are all backlogged, their service increments are proportional
        // to their weights, whatever their packet sizes.
        let weights = [1, 2, 7];
        let mut g = FluidGps::new(&weights, 1e9);
        for (i, len) in [(0usize, 1500u32), (1, 64), (2, 999)] {
            for _ in 0..50 {
                g.arrive(0.0, i, len);
            }
        }
        g.advance_to(10_000.0);
        let s0: Vec<_> = (0..3).map(|i| g.service_bytes(i)).collect();
        g.advance_to(50_000.0);
        let d: Vec<_> = (0..3).map(|i| g.service_bytes(i) - s0[i]).collect();
        let total: f64 = d.iter().sum();
        assert!((total - 40_000.0 * 0.125).abs() < 1e-6);
        for i in 0..3 {
            assert!(
                (d[i] / total - f64::from(weights[i]) / 10.0).abs() < 1e-9,
                "{d:?}"
            );
        }
    }
}
