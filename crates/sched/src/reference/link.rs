//! A deterministic virtual link: drives any scheduler with an arrival sequence on a
//! constant-rate link and records when every packet left.
//!
//! # Model
//!
//! The system of the QFQ+ paper, appendix A.4 (figure A.9 B): arriving packets are enqueued
//! at once; a *dequeue unit* takes packets from the scheduler and puts them in a FIFO
//! *transmit queue* of `txq` packets in front of the wire, as soon as the queue has room;
//! the wire sends the queue's packets in order, back to back, each for `8 len / rate_bps`
//! seconds; with a framing ([`VirtualLink::with_framing`], see [`crate::framing`]), for
//! `8 wire_len(len) / rate_bps`, while the scheduler and the trace keep `len`. The queue's room counts the packets waiting, not the one on the wire: with
//! `txq = 0` the scheduler is asked for a packet exactly when the wire is idle (figure
//! A.9 A, no output queue); with `txq = q` it runs up to `q` packets ahead of the wire.
//!
//! In the paper's terms the bytes handed out by the scheduler, `W-bar(t)`, exceed those the
//! wire has sent, `W(t)` (counted bit by bit), by the `q` queued packets plus the part of
//! the one on the wire not yet sent: `Delta W = max (W-bar - W) <= (q + 1) L`, `L` the
//! largest packet (reached when `q + 1` maximum-size packets are handed out at the instant
//! the first of them starts on the wire). This is the paper's `Q`: "the size of the transmit queue plus the
//! maximum possible packet size" (section 4), `Q_pkts = q + 1` packets (section 3.1).
//!
//! The trace records when each packet was handed out (`dequeue_ns`), when it started on the
//! wire (`start_ns`) and when its last bit left (`finish_ns`): the departure the service
//! metrics of [`super::wfi`] compare against GPS is `finish_ns`, the user's view (QFQ+
//! paper, footnote 13: packets in the transmit queue are not served yet).
//!
//! # Event order
//!
//! At equal times: first the transmission ending at `t` completes and the queue's head
//! starts on the wire, then every arrival with time `<= t` is enqueued, then the dequeue
//! unit fills the queue. A packet arriving exactly when room appears therefore competes for
//! it.
//!
//! # Arrivals
//!
//! [`run_on_link_with_queue`] hands each arrival to the scheduler at its own time (arrivals
//! and completions are the events); schedulers never read a clock, so only the order of
//! calls matters, and the trace records the true times.
//!
//! [`VirtualLink`] is the same machine driven step by step, for callers whose arrivals
//! depend on what the link did (a closed-loop traffic generator).
//!
//! # Schedulers that keep time
//!
//! The link drives any [`LinkScheduler`]: every [`Scheduler`] (which ignores the time), and
//! a tree of classes ([`crate::tree::TreeSched`]), which is told the time at each call
//! (whole nanoseconds: the link's time rounded down) and may hold its packets back, every
//! class that has some being over its ceil, until a time it names. The dequeue unit then
//! asks again at that time: [`VirtualLink::next_wake`] is one more event for the driver,
//! beside the arrivals and [`VirtualLink::next_completion`] ([`VirtualLink::next_event`]
//! is the earlier of the two).
//!
//! Times are `f64` nanoseconds; integer arrival times convert exactly below 2^53 ns
//! (104 days).

use std::collections::VecDeque;

use crate::error::Rejected;
use crate::flow::FlowId;
use crate::framing::Framing;
use crate::packet::Desc;
use crate::scheduler::Scheduler;
use crate::tree::leaves::Leaves;
use crate::tree::{Dequeued, TreeFlow, TreeSched};

use super::trace::{Arrival, DropRecord, Trace, TxRecord};

/// Transmission time of `len` bytes at `rate_bps`, in nanoseconds.
pub fn tx_time_ns(len: u32, rate_bps: f64) -> f64 {
    f64::from(len) * 8e9 / rate_bps
}

/// The earlier of two times, either of which may be absent.
fn earlier(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a [`LinkScheduler`] answers the dequeue unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next<F> {
    /// A packet of this flow, to send now.
    Packet(F, Desc),
    /// Packets are queued but held back: ask again at this time (ns), later than now.
    Wait(u64),
    /// Nothing is queued.
    Idle,
}

/// A scheduler the virtual link can drive: told the time (ns) at each call, it hands out a
/// packet, has none, or holds its packets back until a time it names.
pub trait LinkScheduler {
    /// How it names a flow.
    type Flow: Copy + PartialEq + std::fmt::Debug;

    /// Queues `pkt` on `flow` at `now_ns`, or hands it back with the reason.
    fn enqueue_at(
        &mut self,
        now_ns: u64,
        flow: Self::Flow,
        pkt: Desc,
    ) -> Result<(), Rejected<Desc>>;

    /// The next packet at `now_ns`, or why there is none.
    fn dequeue_at(&mut self, now_ns: u64) -> Next<Self::Flow>;

    /// Whether no packet is queued.
    fn is_empty_now(&self) -> bool;
}

/// A scheduler of the registry: no time, never holds a packet back.
impl<S: Scheduler<Desc> + ?Sized> LinkScheduler for S {
    type Flow = FlowId;

    fn enqueue_at(&mut self, _: u64, flow: FlowId, pkt: Desc) -> Result<(), Rejected<Desc>> {
        self.enqueue(flow, pkt)
    }

    fn dequeue_at(&mut self, _: u64) -> Next<FlowId> {
        self.dequeue()
            .map_or(Next::Idle, |(flow, pkt)| Next::Packet(flow, pkt))
    }

    fn is_empty_now(&self) -> bool {
        self.is_empty()
    }
}

/// A tree of classes: its flows are its leaves'; it holds its packets back while every
/// backlogged class is over its ceil.
impl<L: Leaves<Desc>> LinkScheduler for TreeSched<Desc, L> {
    type Flow = TreeFlow;

    fn enqueue_at(&mut self, now_ns: u64, flow: TreeFlow, pkt: Desc) -> Result<(), Rejected<Desc>> {
        self.enqueue(now_ns, flow, pkt)
    }

    fn dequeue_at(&mut self, now_ns: u64) -> Next<TreeFlow> {
        match self.dequeue(now_ns) {
            Dequeued::Packet { flow, pkt } => Next::Packet(flow, pkt),
            Dequeued::Wait(t) => Next::Wait(t),
            Dequeued::Idle => Next::Idle,
        }
    }

    fn is_empty_now(&self) -> bool {
        self.is_empty()
    }
}

/// A packet handed to the dequeue unit, waiting for the wire.
#[derive(Clone, Copy, Debug)]
struct Queued {
    seq: usize,
    dequeue_ns: f64,
}

/// A packet the dequeue unit took from the scheduler (see [`VirtualLink::fill`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handed {
    /// Index of the packet in the link's arrival sequence.
    pub seq: usize,
    /// Index of its flow.
    pub flow: usize,
    /// Length, bytes.
    pub len: u32,
}

/// The virtual link with a transmit queue, driven one step at a time.
///
/// A driver repeats: [`VirtualLink::advance_to`] the earlier of its next arrival and
/// [`VirtualLink::next_event`]; [`VirtualLink::enqueue`] the arrivals of that instant;
/// [`VirtualLink::fill`]. [`run_on_link_with_queue`] is that loop over a fixed arrival
/// sequence.
///
/// ```
/// use pspat_sched::reference::link::VirtualLink;
/// use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};
///
/// let mut s = registry::build::<Desc>("fifo", &Params::new(), 16).unwrap();
/// let f = s.add_flow(FlowParams::default()).unwrap();
/// // 8 Gbit/s: one byte per ns. One packet of queue: the scheduler runs one packet ahead.
/// let mut link = VirtualLink::new(vec![f], 8e9, 1);
/// for _ in 0..3 {
///     link.enqueue(&mut *s, 0, 0, 100).unwrap(); // at t = 0, flow 0, 100 bytes
/// }
/// let handed = link.fill(&mut *s);
/// assert_eq!(handed.len(), 2); // one on the wire, one waiting
/// assert_eq!(link.next_completion(), Some(100.0));
/// ```
#[derive(Clone, Debug)]
pub struct VirtualLink<F = FlowId> {
    flows: Vec<F>,
    rate_bps: f64,
    /// What the wire charges for a packet.
    framing: Framing,
    txq: usize,
    now_ns: f64,
    /// Finish time of the packet on the wire, if one is.
    wire: Option<f64>,
    /// Packets handed out, not yet on the wire (at most `txq`).
    queue: VecDeque<Queued>,
    arrivals: Vec<Arrival>,
    /// Per arrival: when it was handed out (`NaN`: not yet).
    dequeued_at: Vec<f64>,
    trace: Trace,
    handed: Vec<Handed>,
    /// When the scheduler said, at the last fill, to ask again (ns).
    wake: Option<f64>,
}

impl<F: Copy + PartialEq + std::fmt::Debug> VirtualLink<F> {
    /// An idle link at time 0 of `rate_bps` bit/s with a transmit queue of `txq` packets,
    /// over the scheduler flows `flows` (the flow index of [`VirtualLink::enqueue`] is a
    /// position in it).
    ///
    /// # Panics
    ///
    /// If the rate is not positive and finite.
    pub fn new(flows: Vec<F>, rate_bps: f64, txq: usize) -> Self {
        assert!(
            rate_bps.is_finite() && rate_bps > 0.0,
            "link rate must be positive and finite, got {rate_bps}"
        );
        Self {
            flows,
            rate_bps,
            framing: Framing::PLAIN,
            txq,
            now_ns: 0.0,
            wire: None,
            queue: VecDeque::with_capacity(txq),
            arrivals: Vec::new(),
            dequeued_at: Vec::new(),
            trace: Trace {
                rate_bps,
                tx: Vec::new(),
                drops: Vec::new(),
            },
            handed: Vec::new(),
            wake: None,
        }
    }

    /// This link, its wire charging each packet its framed length: a packet of `len` bytes
    /// takes `8 framing.wire_len(len) / rate_bps` seconds.
    pub fn with_framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// Current time, ns.
    pub fn now_ns(&self) -> f64 {
        self.now_ns
    }

    /// Size of the transmit queue, packets.
    pub fn txq(&self) -> usize {
        self.txq
    }

    /// Packets handed out and not yet completely sent (waiting, plus the one on the wire).
    pub fn in_device(&self) -> usize {
        self.queue.len() + usize::from(self.wire.is_some())
    }

    /// When the packet on the wire finishes, if one is: the next instant room appears.
    pub fn next_completion(&self) -> Option<f64> {
        self.wire
    }

    /// When the dequeue unit asks the scheduler again although nothing arrived and no
    /// room appeared: the time its last [`VirtualLink::fill`] was told to wait for (a tree
    /// whose classes with packets are all over their ceils), if it was.
    pub fn next_wake(&self) -> Option<f64> {
        self.wake
    }

    /// The earlier of [`VirtualLink::next_completion`] and [`VirtualLink::next_wake`]: the
    /// link's next event.
    pub fn next_event(&self) -> Option<f64> {
        earlier(self.wire, self.wake)
    }

    /// The next event of a driver whose next arrival is at `arrival` (ns), if it has one:
    /// the earlier of it and [`VirtualLink::next_event`]; `None` when nothing is left.
    pub fn next_event_with(&self, arrival: Option<f64>) -> Option<f64> {
        earlier(arrival, self.next_event())
    }

    /// Whether the dequeue unit would take a packet now: the wire is idle (then the queue
    /// is empty) or the queue has fewer than `txq` packets.
    pub fn has_room(&self) -> bool {
        self.wire.is_none() || self.queue.len() < self.txq
    }

    /// Moves time forward to `t_ns`. If the packet on the wire finishes at `t_ns`, it
    /// completes and the queue's head starts on the wire. The scheduler is not called.
    ///
    /// # Panics
    ///
    /// If `t_ns` is earlier than now or later than [`VirtualLink::next_completion`] (the
    /// dequeue unit would have been asked for a packet in between).
    pub fn advance_to(&mut self, t_ns: f64) {
        assert!(
            t_ns >= self.now_ns,
            "time goes backwards: {t_ns} < {}",
            self.now_ns
        );
        if let Some(end) = self.wire {
            assert!(
                t_ns <= end,
                "advancing to {t_ns} skips the completion at {end}"
            );
            if t_ns == end {
                self.wire = None;
                if let Some(q) = self.queue.pop_front() {
                    self.start(q, end);
                }
            }
        }
        self.now_ns = t_ns;
    }

    /// Puts `q` on the wire at `t`.
    fn start(&mut self, q: Queued, t: f64) {
        let a = self.arrivals[q.seq];
        let tx_ns = if self.framing.is_plain() {
            tx_time_ns(a.len, self.rate_bps)
        } else {
            self.framing.wire_len(a.len) as f64 * 8e9 / self.rate_bps
        };
        let finish = t + tx_ns;
        self.trace.tx.push(TxRecord {
            seq: q.seq,
            flow: a.flow,
            len: a.len,
            arrival_ns: a.time_ns as f64,
            dequeue_ns: q.dequeue_ns,
            start_ns: t,
            finish_ns: finish,
        });
        self.wire = Some(finish);
    }

    /// A packet of `len` bytes arrives on flow index `flow` at time `time_ns` (now, or a
    /// later instant: time moves to it first, as [`VirtualLink::advance_to`]). It is
    /// enqueued at once, not handed out ([`VirtualLink::fill`] does that). Returns its
    /// index in the arrival sequence, or the scheduler's refusal, also recorded in the
    /// trace.
    ///
    /// # Panics
    ///
    /// If `flow` is out of range, or as [`VirtualLink::advance_to`].
    pub fn enqueue<S: LinkScheduler<Flow = F> + ?Sized>(
        &mut self,
        sched: &mut S,
        time_ns: u64,
        flow: usize,
        len: u32,
    ) -> Result<usize, DropRecord> {
        let seq = self.arrivals.len();
        assert!(
            flow < self.flows.len(),
            "arrival {seq} names flow {flow} of {}",
            self.flows.len()
        );
        if time_ns as f64 > self.now_ns {
            self.advance_to(time_ns as f64);
        }
        assert!(
            time_ns as f64 >= self.now_ns,
            "arrival {seq} at {time_ns} is before now ({})",
            self.now_ns
        );
        self.arrivals.push(Arrival { time_ns, flow, len });
        self.dequeued_at.push(f64::NAN);
        match sched.enqueue_at(time_ns, self.flows[flow], Desc::new(seq as u64, len)) {
            Ok(()) => Ok(seq),
            Err(rej) => {
                let d = DropRecord {
                    seq,
                    flow,
                    reason: rej.reason,
                };
                self.trace.drops.push(d);
                Err(d)
            }
        }
    }

    /// The dequeue unit: while there is room, takes a packet from the scheduler into the
    /// queue (onto the wire if it is idle), telling it the time rounded down to whole
    /// nanoseconds. Returns the packets taken, in order (valid until the next call); when
    /// the scheduler holds its packets back, [`VirtualLink::next_wake`] says until when.
    ///
    /// # Panics
    ///
    /// If the scheduler returns a packet the link did not give it, twice, on another flow
    /// than it came in, or with another length, or asks to wait for a time already past.
    pub fn fill<S: LinkScheduler<Flow = F> + ?Sized>(&mut self, sched: &mut S) -> &[Handed] {
        self.handed.clear();
        self.wake = None;
        while self.has_room() {
            // Whole nanoseconds, rounded down: the time a tree is told never goes back.
            let now = self.now_ns as u64;
            let (fid, pkt) = match sched.dequeue_at(now) {
                Next::Packet(f, p) => (f, p),
                Next::Wait(t) => {
                    assert!(
                        t > now,
                        "the scheduler waits for {t}, not after now ({now})"
                    );
                    self.wake = Some(t as f64);
                    break;
                }
                Next::Idle => break,
            };
            let seq = usize::try_from(pkt.cookie).expect("cookie is an arrival index");
            assert!(
                seq < self.arrivals.len(),
                "scheduler returned unknown packet {seq}"
            );
            assert!(
                self.dequeued_at[seq].is_nan(),
                "scheduler returned packet {seq} twice"
            );
            let a = self.arrivals[seq];
            assert_eq!(
                fid, self.flows[a.flow],
                "packet {seq} left on another flow than it came in"
            );
            assert_eq!(pkt.len, a.len, "packet {seq} changed length");
            self.dequeued_at[seq] = self.now_ns;
            let q = Queued {
                seq,
                dequeue_ns: self.now_ns,
            };
            if self.wire.is_none() {
                self.start(q, self.now_ns);
            } else {
                self.queue.push_back(q);
            }
            self.handed.push(Handed {
                seq,
                flow: a.flow,
                len: a.len,
            });
        }
        &self.handed
    }

    /// The arrivals so far, in order (drops included).
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    /// The trace so far: transmissions started, drops.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Sends what the device holds (the scheduler is not asked again) and returns the
    /// arrivals and the trace.
    pub fn finish(mut self) -> (Vec<Arrival>, Trace) {
        while let Some(end) = self.wire {
            self.advance_to(end);
        }
        (self.arrivals, self.trace)
    }
}

/// Runs `arrivals` through `sched` on a link of `rate_bps` bit/s without a transmit queue
/// (`txq = 0`: the scheduler is asked for a packet exactly when the wire is idle) until
/// every packet is transmitted or dropped. See [`run_on_link_with_queue`].
pub fn run_on_link<S: LinkScheduler + ?Sized>(
    sched: &mut S,
    flows: &[S::Flow],
    arrivals: &[Arrival],
    rate_bps: f64,
) -> Trace {
    run_on_link_with_queue(sched, flows, arrivals, rate_bps, 0)
}

/// Runs `arrivals` through `sched` on a link of `rate_bps` bit/s with a transmit queue of
/// `txq` packets until every packet is transmitted or dropped.
///
/// Packet `k` of `arrivals` is enqueued as `Desc::new(k as u64, len)` on
/// `flows[arrivals[k].flow]`; refused packets are recorded in [`Trace::drops`] with the
/// scheduler's reason. A scheduler that holds its packets back is asked again when it
/// said ([`VirtualLink::next_wake`]). The scheduler must be empty on entry.
///
/// # Panics
///
/// If `arrivals` is not sorted by time, if an arrival names a flow outside `flows`, if the
/// rate is not positive and finite, or if the scheduler returns a packet this function did
/// not give it, or on a flow other than the one it was enqueued on.
pub fn run_on_link_with_queue<S: LinkScheduler + ?Sized>(
    sched: &mut S,
    flows: &[S::Flow],
    arrivals: &[Arrival],
    rate_bps: f64,
    txq: usize,
) -> Trace {
    assert!(
        arrivals.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "arrivals must be sorted by time"
    );
    assert!(
        sched.is_empty_now(),
        "the scheduler must be empty before the run"
    );
    let mut link = VirtualLink::new(flows.to_vec(), rate_bps, txq);
    link.trace.tx.reserve(arrivals.len());
    link.arrivals.reserve(arrivals.len());
    let mut next = 0; // first arrival not yet handed to the scheduler
    loop {
        // Arrivals up to now (the completion at now, if any, is done), then the decision.
        while let Some(a) = arrivals.get(next) {
            if a.time_ns as f64 > link.now_ns() {
                break;
            }
            let _refused_or_seq = link.enqueue(sched, a.time_ns, a.flow, a.len);
            next += 1;
        }
        link.fill(sched);
        let Some(t) = link.next_event_with(arrivals.get(next).map(|a| a.time_ns as f64)) else {
            break;
        };
        link.advance_to(t);
    }
    assert!(
        sched.is_empty_now(),
        "the scheduler kept packets on an idle link"
    );
    link.finish().1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{build, Params};
    use crate::stats::DropReason;
    use crate::FlowParams;

    /// 8 Gbit/s: one byte per nanosecond, so times read as byte counts.
    const R: f64 = 8e9;

    fn arr(time_ns: u64, flow: usize, len: u32) -> Arrival {
        Arrival { time_ns, flow, len }
    }

    #[test]
    fn a_framed_wire_takes_the_framed_length() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        let atm = Framing::new(0, 0, crate::framing::LinkLayer::Atm);
        let mut link = VirtualLink::new(ids, R, 0).with_framing(atm);
        for _ in 0..3 {
            link.enqueue(&mut *s, 0, 0, 40).unwrap();
        }
        link.fill(&mut *s);
        let mut finishes = Vec::new();
        while let Some(t) = link.next_completion() {
            finishes.push(t);
            link.advance_to(t);
            link.fill(&mut *s);
        }
        // 40 bytes are one 53-byte ATM cell: 53 ns each at one byte per ns.
        assert_eq!(finishes, vec![53.0, 106.0, 159.0]);
        // The trace keeps the packets' own length.
        assert!(link.trace().tx.iter().all(|r| r.len == 40));
    }

    fn sched_with(alg: &str, params: &[FlowParams]) -> (Box<dyn Scheduler<Desc>>, Vec<FlowId>) {
        let mut s = build::<Desc>(alg, &Params::new(), 1024).unwrap();
        let ids = params.iter().map(|p| s.add_flow(*p).unwrap()).collect();
        (s, ids)
    }

    #[test]
    fn single_flow_on_an_idle_link_is_never_queued() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        // 1 Gbit/s: 1500 bytes take 12 us; arrivals 20 us apart never wait.
        let a = [arr(0, 0, 1500), arr(20_000, 0, 1500), arr(40_000, 0, 100)];
        let t = run_on_link(&mut s, &ids, &a, 1e9);
        assert_eq!(t.tx.len(), 3);
        assert!(t.drops.is_empty());
        for (r, a) in t.tx.iter().zip(&a) {
            assert_eq!(r.start_ns, a.time_ns as f64, "{r:?}");
            assert_eq!(r.arrival_ns, r.start_ns);
            assert!((r.finish_ns - r.start_ns - f64::from(a.len) * 8.0).abs() < 1e-9);
        }
        assert_eq!(t.tx[2].finish_ns, 40_800.0);
        assert!(s.is_empty());
    }

    #[test]
    fn back_to_back_packets_start_when_the_previous_finishes() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        let a = [
            arr(5, 0, 100),
            arr(5, 0, 300),
            arr(50, 0, 200),
            arr(1000, 0, 10),
        ];
        let t = run_on_link(&mut s, &ids, &a, R);
        let times: Vec<_> =
            t.tx.iter()
                .map(|r| (r.seq, r.start_ns, r.finish_ns))
                .collect();
        // 5..105, 105..405, then the packet that arrived at 50 waits until 405; the link
        // is idle from 605 to 1000.
        assert_eq!(
            times,
            [
                (0, 5.0, 105.0),
                (1, 105.0, 405.0),
                (2, 405.0, 605.0),
                (3, 1000.0, 1010.0)
            ]
        );
    }

    #[test]
    fn arrival_at_the_instant_the_link_frees_competes() {
        // Low-priority flow 0 has two packets; high-priority flow 1's packet arrives exactly
        // when the first one finishes (t = 100), and must go before flow 0's second one.
        let (mut s, ids) = sched_with(
            "prio",
            &[
                FlowParams::default().with_priority(1),
                FlowParams::default().with_priority(0),
            ],
        );
        let a = [arr(0, 0, 100), arr(0, 0, 100), arr(100, 1, 50)];
        let t = run_on_link(&mut s, &ids, &a, R);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(order, [(0, 0.0), (2, 100.0), (1, 150.0)]);
        // One nanosecond later it would have missed the decision.
        let (mut s, ids) = sched_with(
            "prio",
            &[
                FlowParams::default().with_priority(1),
                FlowParams::default().with_priority(0),
            ],
        );
        let a = [arr(0, 0, 100), arr(0, 0, 100), arr(101, 1, 50)];
        let t = run_on_link(&mut s, &ids, &a, R);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(order, [(0, 0.0), (1, 100.0), (2, 200.0)]);
    }

    #[test]
    fn refusals_are_recorded_with_their_reason() {
        let (mut s, ids) = sched_with(
            "fifo",
            &[
                FlowParams::default().with_limit_pkts(1),
                FlowParams::default().with_max_len(100),
            ],
        );
        // At t = 0 the three packets of flow 0 are all enqueued before the link picks one,
        // so the second and third find the queue full. Flow 1's 101-byte packet is too
        // long; its next one is fine.
        let a = [
            arr(0, 0, 10),
            arr(0, 0, 10),
            arr(0, 0, 10),
            arr(3, 1, 101),
            arr(20, 1, 100),
            arr(500, 0, 10),
        ];
        let t = run_on_link(&mut s, &ids, &a, R);
        assert_eq!(
            t.drops,
            [
                DropRecord {
                    seq: 1,
                    flow: 0,
                    reason: DropReason::FlowPacketLimit
                },
                DropRecord {
                    seq: 2,
                    flow: 0,
                    reason: DropReason::FlowPacketLimit
                },
                DropRecord {
                    seq: 3,
                    flow: 1,
                    reason: DropReason::PacketTooLong
                },
            ]
        );
        let sent: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(sent, [(0, 0.0), (4, 20.0), (5, 500.0)]);
        assert_eq!(s.stats().drops.total(), 3);
    }

    #[test]
    fn all_refused_then_more_arrivals() {
        // Every packet of the first instant is refused: the link stays idle and the run
        // goes on with later arrivals.
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default().with_max_len(10)]);
        let a = [arr(0, 0, 11), arr(0, 0, 0), arr(7, 0, 10)];
        let t = run_on_link(&mut s, &ids, &a, R);
        assert_eq!(t.drops.len(), 2);
        assert_eq!(t.drops[1].reason, DropReason::EmptyPacket);
        assert_eq!(t.tx.len(), 1);
        assert_eq!((t.tx[0].start_ns, t.tx[0].finish_ns), (7.0, 17.0));
    }

    #[test]
    fn empty_run_is_an_empty_trace() {
        let (mut s, ids) = sched_with("wf2q+", &[FlowParams::default()]);
        let t = run_on_link(&mut s, &ids, &[], 1e9);
        assert!(t.tx.is_empty() && t.drops.is_empty());
        assert_eq!(t.rate_bps, 1e9);
    }

    /// (seq, dequeue, start, finish) of every transmission.
    fn times(t: &Trace) -> Vec<(usize, f64, f64, f64)> {
        t.tx.iter()
            .map(|r| (r.seq, r.dequeue_ns, r.start_ns, r.finish_ns))
            .collect()
    }

    #[test]
    fn the_scheduler_runs_up_to_txq_packets_ahead_of_the_wire() {
        // Four 100-byte packets at t = 0 on one flow, 1 B/ns: the wire sends them over
        // [0, 100], [100, 200], [200, 300], [300, 400] whatever the queue. The dequeue unit
        // takes a packet when the wire is idle or fewer than q wait: with q = 0 each one is
        // handed out as it starts; with q = 1 one ahead (the second at 0, the third when
        // the second starts at 100, ...); with q = 2 two ahead; with q = 3 all at 0.
        let a = [
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
        ];
        let want_dequeue: [[f64; 4]; 4] = [
            [0.0, 100.0, 200.0, 300.0],
            [0.0, 0.0, 100.0, 200.0],
            [0.0, 0.0, 0.0, 100.0],
            [0.0, 0.0, 0.0, 0.0],
        ];
        for (q, want) in want_dequeue.iter().enumerate() {
            let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
            let t = run_on_link_with_queue(&mut s, &ids, &a, R, q);
            let got = times(&t);
            let expect: Vec<_> = (0..4)
                .map(|k| (k, want[k], 100.0 * k as f64, 100.0 * (k + 1) as f64))
                .collect();
            assert_eq!(got, expect, "q = {q}");
        }
    }

    #[test]
    fn a_late_urgent_packet_waits_behind_the_queue() {
        // Low-priority flow 0 has three packets at t = 0; high-priority flow 1's arrives
        // at 50, while packet 0 is on the wire [0, 100].
        // q = 0: the wire picks at 100: 3 [100, 150], then 1 [150, 250], 2 [250, 350].
        // q = 1: 1 was handed out at 0; at 50 the queue is full; at 100 packet 1 starts
        //        and 3 takes its place: 1 [100, 200], 3 [200, 250], 2 [250, 350].
        // q = 2: 1 and 2 were handed out at 0; at 100 room appears and 3 queues behind
        //        2: 1 [100, 200], 2 [200, 300], 3 [300, 350].
        let a = [
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(50, 1, 50),
        ];
        let want: [Vec<(usize, f64, f64, f64)>; 3] = [
            vec![
                (0, 0.0, 0.0, 100.0),
                (3, 100.0, 100.0, 150.0),
                (1, 150.0, 150.0, 250.0),
                (2, 250.0, 250.0, 350.0),
            ],
            vec![
                (0, 0.0, 0.0, 100.0),
                (1, 0.0, 100.0, 200.0),
                (3, 100.0, 200.0, 250.0),
                (2, 200.0, 250.0, 350.0),
            ],
            vec![
                (0, 0.0, 0.0, 100.0),
                (1, 0.0, 100.0, 200.0),
                (2, 0.0, 200.0, 300.0),
                (3, 100.0, 300.0, 350.0),
            ],
        ];
        for (q, want) in want.iter().enumerate() {
            let (mut s, ids) = sched_with(
                "prio",
                &[
                    FlowParams::default().with_priority(1),
                    FlowParams::default().with_priority(0),
                ],
            );
            let t = run_on_link_with_queue(&mut s, &ids, &a, R, q);
            assert_eq!(&times(&t), want, "q = {q}");
        }
    }

    #[test]
    fn an_arrival_when_room_appears_competes_for_it() {
        // q = 1, flow 0 (low priority) has three packets at 0: 0 on the wire, 1 queued.
        // At 100 packet 0 completes and 1 starts; flow 1's packet arriving at 100 is
        // enqueued before the dequeue unit fills the room, and goes before packet 2.
        let prio = || {
            sched_with(
                "prio",
                &[
                    FlowParams::default().with_priority(1),
                    FlowParams::default().with_priority(0),
                ],
            )
        };
        let (mut s, ids) = prio();
        let a = [
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(100, 1, 50),
        ];
        let t = run_on_link_with_queue(&mut s, &ids, &a, R, 1);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.dequeue_ns)).collect();
        assert_eq!(order, [(0, 0.0), (1, 0.0), (3, 100.0), (2, 200.0)]);
        // One nanosecond later, packet 2 took the room at 100.
        let (mut s, ids) = prio();
        let a = [
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(0, 0, 100),
            arr(101, 1, 50),
        ];
        let t = run_on_link_with_queue(&mut s, &ids, &a, R, 1);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.dequeue_ns)).collect();
        assert_eq!(order, [(0, 0.0), (1, 0.0), (2, 100.0), (3, 200.0)]);
    }

    #[test]
    fn bytes_handed_out_stay_within_q_plus_one_packets_of_the_wire() {
        // Delta W <= (q + 1) L on a random run (the bound the guarantee tests rely on):
        // just after each hand-out, bytes handed out minus bytes sent bit by bit.
        let mut st = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = || {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            st
        };
        let mut a = Vec::new();
        let mut t = 0;
        for _ in 0..300 {
            let r = rnd();
            t += if r % 3 == 0 { r % 3000 } else { 0 };
            a.push(arr(t, (r >> 8) as usize % 3, 1 + ((r >> 16) % 1500) as u32));
        }
        for q in [0, 1, 4] {
            let (mut s, ids) = sched_with("drr", &[FlowParams::default(); 3]);
            let tr = run_on_link_with_queue(&mut s, &ids, &a, R, q);
            assert_eq!(tr.tx.len(), a.len());
            let mut worst = 0.0_f64;
            for r in &tr.tx {
                let t = r.dequeue_ns;
                let handed: f64 = tr
                    .tx
                    .iter()
                    .filter(|x| x.dequeue_ns <= t)
                    .map(|x| f64::from(x.len))
                    .sum();
                let sent: f64 = tr
                    .tx
                    .iter()
                    .map(|x| {
                        ((t - x.start_ns) / (x.finish_ns - x.start_ns)).clamp(0.0, 1.0)
                            * f64::from(x.len)
                    })
                    .sum();
                worst = worst.max(handed - sent);
            }
            let l = f64::from(a.iter().map(|x| x.len).max().unwrap());
            assert!(worst <= (q as f64 + 1.0) * l + 1e-9, "q = {q}: {worst}");
            // and the queue was used: more than q packets' worth of a small one ahead
            if q > 0 {
                assert!(worst > q as f64 * 100.0, "q = {q}: {worst}");
            }
        }
    }

    #[test]
    fn stepping_by_hand_matches_the_batch_run() {
        // The closed-loop interface: enqueue, fill, advance to the next event.
        let a = [
            arr(0, 0, 300),
            arr(10, 1, 100),
            arr(10, 0, 50),
            arr(700, 1, 10),
        ];
        let (mut s, ids) = sched_with("drr", &[FlowParams::default(); 2]);
        let batch = run_on_link_with_queue(&mut s, &ids, &a, R, 1);
        let (mut s, ids) = sched_with("drr", &[FlowParams::default(); 2]);
        let mut link = VirtualLink::new(ids, R, 1);
        link.enqueue(&mut *s, 0, 0, 300).unwrap();
        assert_eq!(link.fill(&mut *s).len(), 1);
        assert_eq!(link.next_completion(), Some(300.0));
        link.enqueue(&mut *s, 10, 1, 100).unwrap();
        link.enqueue(&mut *s, 10, 0, 50).unwrap();
        let handed = link.fill(&mut *s).to_vec();
        assert_eq!(handed.len(), 1, "{handed:?}"); // one waits, one stays in the scheduler
        assert_eq!((link.in_device(), link.has_room()), (2, false));
        link.advance_to(300.0);
        link.fill(&mut *s);
        link.advance_to(link.next_completion().unwrap());
        link.fill(&mut *s);
        link.advance_to(link.next_completion().unwrap());
        link.fill(&mut *s);
        link.enqueue(&mut *s, 700, 1, 10).unwrap();
        link.fill(&mut *s);
        let (arrivals, trace) = link.finish();
        assert_eq!(arrivals, a);
        assert_eq!(trace, batch);
    }

    #[test]
    fn a_tree_held_by_its_ceil_is_asked_again_when_it_said() {
        // One leaf with a ceil of 8 Mbit/s (a byte per us) and a burst of one byte, on a
        // link of a byte per ns: the first 1000-byte packet leaves at 0 and puts the leaf
        // 1 ms ahead of its ceil; the tree then waits until it is within its burst of it
        // again (1 ms - 1 us), and so on. The wire is idle in between.
        use crate::tree::{ClassSpec, TreeSched, TreeSpec};
        let mut spec = TreeSpec::new("drr");
        let mut leaf = ClassSpec::new("a", None, "fifo").ceil(8_000_000);
        leaf.cburst = Some(1);
        spec.add(leaf);
        let mut t = TreeSched::<Desc>::new(&spec).unwrap();
        let f = t.add_flow(0, FlowParams::default()).unwrap();
        let a = [arr(0, 0, 1000), arr(0, 0, 1000), arr(0, 0, 1000)];
        let trace = run_on_link(&mut t, &[f], &a, R);
        let starts: Vec<f64> = trace.tx.iter().map(|r| r.start_ns).collect();
        assert_eq!(starts, [0.0, 999_000.0, 1_999_000.0]);
        // stepping by hand: the wait is the link's next event while the wire is idle
        let mut t = TreeSched::<Desc>::new(&spec).unwrap();
        let f = t.add_flow(0, FlowParams::default()).unwrap();
        let mut link = VirtualLink::new(vec![f], R, 0);
        link.enqueue(&mut t, 0, 0, 1000).unwrap();
        link.enqueue(&mut t, 0, 0, 1000).unwrap();
        assert_eq!(link.fill(&mut t).len(), 1);
        assert_eq!((link.next_wake(), link.next_event()), (None, Some(1000.0)));
        link.advance_to(1000.0);
        assert!(link.fill(&mut t).is_empty());
        assert_eq!(link.next_wake(), Some(999_000.0));
        assert_eq!(link.next_event(), Some(999_000.0));
    }

    #[test]
    #[should_panic(expected = "skips the completion")]
    fn advancing_past_a_completion_is_refused() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        let mut link = VirtualLink::new(ids, R, 0);
        link.enqueue(&mut *s, 0, 0, 100).unwrap();
        link.fill(&mut *s);
        link.advance_to(101.0);
    }

    #[test]
    #[should_panic(expected = "sorted")]
    fn unsorted_arrivals_are_refused() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        run_on_link(&mut s, &ids, &[arr(10, 0, 1), arr(9, 0, 1)], R);
    }
}
