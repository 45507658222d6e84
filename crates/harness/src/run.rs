//! The benchmark loop, compiled once per algorithm.
//!
//! [`prepare`] builds the scheduler through [`registry::visit`], whose visitor receives the
//! concrete scheduler type: the loop is monomorphised for it (and for the arrival pattern
//! and the width of flow indices), and the only dynamic call is the one that starts a
//! batch of iterations ([`Prepared::run`]). The `none` baseline runs the same loop over the
//! harness's own FIFO.
//!
//! # One iteration (dummynet's `mainloop()`)
//!
//! The [`Controller`] says whether to enqueue or dequeue.
//!
//! - Enqueue: the [`Pattern`] picks the flow, a buffer is taken from the [`Pool`] and its
//!   header written, the handle is enqueued. If the scheduler refuses it, the drop is
//!   counted by reason, the buffer freed, and the iteration dequeues instead (as dummynet).
//! - Dequeue: the header is read back and checked against the flow the scheduler named and
//!   the flow's next sequence number, the buffer is freed, the pattern and the [`Wfi`]
//!   accounting are updated. A scheduler with nothing to give while packets are pending
//!   has lost them: the loop stops (dummynet's "ouch").
//!
//! # Keeping it lean
//!
//! Nothing in the loop allocates, hashes or calls through a pointer. Each run of
//! enqueues or dequeues that the controller asks for is one call with a plain counted
//! loop inside ([`Ops`]; the controller keeps the counts, per run), so each of the two
//! loops has the registers to itself. For the length of a run each component is borrowed
//! as a `Batch` (its arrays as local slices, its scalars as locals written back on drop),
//! so the compiler keeps them in registers instead of reloading them after every store.
//! Everything the loop touches of a flow is in the [`Pattern`]'s per-flow tables, one
//! base pointer for all of it; the target's key for the flow is kept there too. Arrays are
//! indexed without bounds checks and without `unsafe` ([`crate::slots`]): by `u16`
//! indices into `2^16`-entry tables when there are few enough flows, through a mask
//! otherwise. Each packet's pattern work is split around the rest of its work
//! ([`pattern::Batch::pick`], [`pattern::Batch::commit`]) so that few values are live at
//! once; checks that never fail in a correct run sit behind a cold branch.

use std::time::{Duration, Instant};

use pspat_sched::registry::{self, SchedulerVisitor};
use pspat_sched::{DropCounts, DropReason, SchedStats, Scheduler};

use crate::controller::{Controller, Ops};
use crate::error::{Error, SetupError};
use crate::pattern::{FlowSpec, Kind, Pattern, NARROW_FLOWS};
use crate::pool::{BenchPkt, PktHdr, Pool};
use crate::report::BenchReport;
use crate::scenario::{BenchSpec, Scenario};
use crate::slots::Width;
use crate::target::{NoneFifo, Queue, SchedTarget, Target};
use crate::wfi::Wfi;
use crate::{pattern, pool, wfi};

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Loop iterations executed.
    pub loops: u64,
    /// Packets generated and offered to the scheduler (dummynet's `_enqueue`: the divisor of
    /// the time per pair).
    pub enqueue_attempts: u64,
    /// Packets the scheduler accepted.
    pub enqueued: u64,
    /// Packets the scheduler gave back.
    pub dequeued: u64,
    /// Refused packets, by reason.
    pub drops: DropCounts,
    /// Dequeued packets whose header names another flow (or length) than the scheduler's.
    pub mismatches: u64,
    /// Dequeued packets out of their flow's FIFO order.
    pub order_errors: u64,
    /// Packets pending when the scheduler had nothing to give (the loop stopped there).
    pub lost: u64,
}

/// The state at the end of a batch of iterations.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Counters.
    pub counters: Counters,
    /// Packets pending by the harness's count.
    pub pending: u64,
    /// Packets the scheduler says it holds.
    pub target_backlog: u64,
    /// Largest fairness shortfall in bytes, and the flow that had it.
    pub wfi: (f64, Option<u32>),
    /// Bytes dequeued.
    pub sched_bytes: u64,
    /// The scheduler's own counters (none for the baseline).
    pub stats: Option<SchedStats>,
}

/// The state of a benchmark over target `T`, with flows named by `I`.
struct Bench<T: Target, I> {
    ctl: Controller,
    state: State<T, I>,
}

/// What the loop works on.
struct State<T: Target, I> {
    target: T,
    /// The flow selector, which also holds the loop's per-flow state.
    pattern: Pattern<T::Key, I>,
    pool: Pool,
    wfi: Wfi,
    c: Counters,
}

impl<T: Target, I: Width> Bench<T, I> {
    fn new(target: T, sc: &Scenario) -> Self {
        let flows: Vec<FlowSpec> = sc
            .flow_params
            .iter()
            .map(|p| FlowSpec {
                weight: p.weight,
                len: p.max_len,
            })
            .collect();
        let weights: Vec<u32> = flows.iter().map(|f| f.weight).collect();
        let pattern = Pattern::with_keys(sc.spec.pattern, &flows, |f| target.key(f), sc.spec.seed);
        Self {
            ctl: Controller::new(sc.qmin, sc.qmax),
            state: State {
                target,
                pattern,
                // One buffer more than the scheduler holds: a full scheduler refuses a
                // packet (counted by reason) before the pool runs dry.
                pool: Pool::new(sc.capacity + 1),
                wfi: Wfi::new(&weights),
                c: Counters::default(),
            },
        }
    }

    /// Runs `loops` iterations, or fewer if the scheduler loses packets.
    fn run(&mut self, loops: u64) {
        if self.state.c.lost > 0 {
            return;
        }
        let d = match self.state.pattern.kind() {
            Kind::Smooth => self
                .ctl
                .drive(&mut Phases::<T, I, false>(&mut self.state), loops),
            Kind::Bursty => self
                .ctl
                .drive(&mut Phases::<T, I, true>(&mut self.state), loops),
        };
        let c = &mut self.state.c;
        c.loops += d.loops;
        c.enqueue_attempts += d.enqueues;
        c.enqueued += d.enqueues - d.refused;
        c.dequeued += d.dequeued;
        if d.stalled {
            c.lost = self.ctl.pending();
        }
    }
}

/// The state driven by the controller, with the arrival pattern a compile-time constant.
struct Phases<'a, T: Target, I, const BURSTY: bool>(&'a mut State<T, I>);

impl<T: Target, I: Width, const BURSTY: bool> Phases<'_, T, I, BURSTY> {
    /// Borrows everything the loop touches for one run of packets.
    #[inline(always)]
    fn hot(&mut self) -> Hot<'_, T::Batch<'_>, I, BURSTY> {
        let s = &mut *self.0;
        Hot {
            target: s.target.batch(),
            pattern: s.pattern.batch::<BURSTY>(),
            pool: s.pool.batch(),
            wfi: s.wfi.batch(),
            c: &mut s.c,
        }
    }
}

/// Each run of packets is one call, compiled once per target, width and pattern, whose
/// loop has the registers to itself.
impl<T: Target, I: Width, const BURSTY: bool> Ops for Phases<'_, T, I, BURSTY> {
    #[inline(never)]
    fn enqueue(&mut self, n: u64) -> u64 {
        let mut hot = self.hot();
        // Counts down: one register for the loop.
        let mut left = n;
        while left > 0 {
            left -= 1;
            if !hot.enqueue() {
                return n - left - 1;
            }
        }
        n
    }

    #[inline(never)]
    fn dequeue(&mut self, n: u64) -> u64 {
        let mut hot = self.hot();
        let mut left = n;
        while left > 0 {
            left -= 1;
            if !hot.dequeue() {
                return n - left - 1;
            }
        }
        n
    }
}

/// Everything the loop touches, borrowed for one run of packets: arrays and scalars in
/// locals. (The controller counts packets; mismatches, order errors and drops go straight
/// to memory on a branch never taken in a correct run: they need no register.)
struct Hot<'a, Q: Queue, I: Width, const BURSTY: bool> {
    target: Q,
    pattern: pattern::Batch<'a, Q::Key, I, BURSTY>,
    pool: pool::Batch<'a>,
    wfi: wfi::Batch<'a>,
    c: &'a mut Counters,
}

impl<Q: Queue, I: Width, const BURSTY: bool> Hot<'_, Q, I, BURSTY> {
    /// Generates and enqueues one packet; `false` if it was refused.
    #[inline(always)]
    fn enqueue(&mut self) -> bool {
        let p = self.pattern.pick();
        let g = p.packet;
        if g.first {
            // Before the scheduler accepts the packet, so that the loop need not keep the
            // flow's state until then. If it refuses, the flow stays empty and its period
            // is started again by its next accepted packet, before anything reads it.
            self.wfi.backlogged(self.pattern.period(g.flow));
        }
        let hdr = PktHdr {
            flow: g.flow,
            len: g.len,
            seq: g.seq,
        };
        let Some(pkt) = self.pool.alloc(hdr) else {
            // Unreachable while the pool outsizes the scheduler; counted, not assumed.
            cold();
            self.c.drops.add(DropReason::SchedulerFull, 1);
            self.pattern.refuse(p);
            return false;
        };
        let key = self.pattern.key(g.flow);
        match self.target.enqueue(key, g.flow, pkt) {
            Ok(()) => {
                self.pattern.commit(p);
                true
            }
            Err(rejected) => {
                cold();
                self.c.drops.add(rejected.reason, 1);
                self.pool.release(rejected.pkt);
                self.pattern.refuse(p);
                false
            }
        }
    }

    /// Dequeues and checks one packet; `false` if the scheduler had none to give.
    #[inline(always)]
    fn dequeue(&mut self) -> bool {
        let Some((flow, pkt)) = self.target.dequeue() else {
            return false;
        };
        let hdr = self.pool.release(pkt);
        // Account against the flow the packet was generated for: that is the harness's
        // own state, whatever the scheduler said. When the two agree (always, in a
        // correct run) the scheduler's index is used: it is known as soon as the
        // scheduler has read its flow's entry, before the packet's buffer arrives, so
        // the loads of the harness's per-flow state overlap with the buffer's, and the
        // buffer's header feeds only tests (a branch is a guess the processor makes, not
        // a value it waits for: with 4k flows this took DRR from 18.0 to 14.4 ns a pair).
        let (f, len) = if hdr.flow == flow && hdr.len == pkt.len {
            (flow, pkt.len)
        } else {
            cold();
            self.c.mismatches += 1;
            (hdr.flow, hdr.len)
        };
        let out = self.pattern.count_out(f);
        let served = out.served;
        if served.seq != hdr.seq {
            cold();
            self.c.order_errors += 1;
        }
        let period = self.pattern.period(f);
        self.wfi.dequeued(f, period, len, served.emptied);
        // Last, with nothing else left to hold.
        self.pattern.move_down(out);
        true
    }
}

/// Marks the branch that calls it as unlikely. Takes nothing, so that the loop's state
/// does not escape to memory for it.
#[cold]
#[inline(never)]
fn cold() {}

/// A benchmark built for one algorithm, run in batches behind one dynamic call each.
pub trait Runner {
    /// Runs `loops` more iterations.
    fn run(&mut self, loops: u64);
    /// The state now.
    fn outcome(&self) -> Outcome;
}

impl<T: Target, I: Width> Runner for Bench<T, I> {
    fn run(&mut self, loops: u64) {
        Bench::run(self, loops);
    }

    fn outcome(&self) -> Outcome {
        let s = &self.state;
        Outcome {
            counters: s.c.clone(),
            pending: self.ctl.pending(),
            target_backlog: s.target.backlog_pkts(),
            wfi: s.wfi.worst(),
            sched_bytes: s.wfi.sched_bytes(),
            stats: s.target.stats(),
        }
    }
}

/// The benchmark of `target`, its flows named by the narrowest width that holds them.
pub(crate) fn bench<T: Target + 'static>(target: T, sc: &Scenario) -> Box<dyn Runner> {
    if sc.flow_params.len() <= NARROW_FLOWS {
        Box::new(Bench::<T, u16>::new(target, sc))
    } else {
        Box::new(Bench::<T, u32>::new(target, sc))
    }
}

/// Builds the benchmark of a registered scheduler: adds the flows, checks their indices.
struct Build<'a>(&'a Scenario);

impl SchedulerVisitor<BenchPkt> for Build<'_> {
    type Output = Result<Box<dyn Runner>, SetupError>;

    fn visit<S: Scheduler<BenchPkt> + Send + 'static>(self, mut sched: S) -> Self::Output {
        let sc = self.0;
        let map = sc.flowsets.flow_map();
        let mut ids = Vec::with_capacity(sc.flow_params.len());
        for (i, p) in sc.flow_params.iter().enumerate() {
            let flow = i as u32;
            let id = sched.add_flow(*p).map_err(|source| SetupError::Flow {
                flow,
                flowset: sc.flowsets.sets[map[i] as usize].spec.clone(),
                source,
            })?;
            if id.index() != flow {
                return Err(SetupError::FlowIndex {
                    alg: sched.info().name,
                    flow,
                    index: id.index(),
                });
            }
            ids.push(id);
        }
        Ok(bench(SchedTarget::new(sched, &ids), sc))
    }
}

/// A benchmark ready to run.
pub struct Prepared {
    scenario: Scenario,
    runner: Box<dyn Runner>,
}

/// Builds the scheduler and the harness state for `scenario`.
pub fn prepare(scenario: Scenario) -> Result<Prepared, Error> {
    let runner = match (scenario.info, &scenario.tree) {
        (Some(info), Some(shape)) => crate::tree::prepare(shape, info.name, &scenario)?,
        (None, _) => bench(NoneFifo::new(scenario.capacity), &scenario),
        (Some(info), None) => registry::visit(
            info.name,
            &scenario.params,
            scenario.capacity,
            Build(&scenario),
        )
        .map_err(SetupError::Config)??,
    };
    Ok(Prepared { scenario, runner })
}

impl Prepared {
    /// The scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Runs `loops` more iterations (one dynamic call; the loop inside is monomorphised).
    pub fn run(&mut self, loops: u64) {
        self.runner.run(loops);
    }

    /// Runs `loops` iterations under the wall clock.
    pub fn timed(&mut self, loops: u64) -> Duration {
        let start = Instant::now();
        self.runner.run(loops);
        start.elapsed()
    }

    /// The state now.
    pub fn outcome(&self) -> Outcome {
        self.runner.outcome()
    }

    /// The report of a run of `elapsed` (see [`Prepared::timed`]).
    pub fn report(&self, elapsed: Duration) -> BenchReport {
        BenchReport::new(&self.scenario, &self.outcome(), elapsed)
    }
}

/// Resolves, builds and runs `spec` (`spec.loops` iterations, timed) and reports. The
/// report may show a failed run: see [`BenchReport::check`].
pub fn run(spec: &BenchSpec) -> Result<BenchReport, Error> {
    let mut p = prepare(Scenario::resolve(spec)?)?;
    let elapsed = p.timed(spec.loops);
    Ok(p.report(elapsed))
}

#[cfg(test)]
mod tests {
    use pspat_sched::Rejected;

    use super::*;
    use crate::number::Num;

    fn spec(alg: &str, flowsets: &str, loops: u64) -> BenchSpec {
        BenchSpec {
            alg: alg.into(),
            flowsets: Some(flowsets.into()),
            loops,
            qmin: Num::PerFlow(4),
            qmax: Num::PerFlow(30),
            ..BenchSpec::default()
        }
    }

    #[test]
    fn a_run_counts_like_dummynet() {
        // one flow, qmin 4, qmax 30: 30 enqueues, then 26 dequeues and 26 enqueues per cycle
        let r = run(&spec("fifo", "1::1", 30 + 26 * 2)).unwrap();
        r.check().unwrap();
        assert_eq!((r.enqueue_attempts, r.enqueued, r.dequeued), (56, 56, 26));
        assert_eq!((r.pending_end, r.sched_backlog_end), (30, 30));
        assert_eq!(r.drops_total, 0);
        assert_eq!(r.sched, "fifo");
        let r = run(&spec("none", "1::1", 30 + 26 * 2)).unwrap();
        assert_eq!((r.enqueued, r.dequeued, r.sched), (56, 26, "none".into()));
    }

    #[test]
    fn a_small_capacity_drops_and_says_why() {
        let mut s = spec("drr", "1::4", 1000);
        s.capacity = Some(10);
        let r = run(&s).unwrap();
        r.check().unwrap();
        assert!(r.drops["scheduler_full"] > 0, "{r:?}");
        assert_eq!(r.drops_total, r.enqueue_attempts - r.enqueued);
        assert!(r.pending_end <= 10);
        // so does the baseline
        s.alg = "none".into();
        let r = run(&s).unwrap();
        assert!(r.drops["scheduler_full"] > 0, "{r:?}");
    }

    #[test]
    fn wfi_of_a_fair_and_an_unfair_scheduler() {
        // 1 flow of weight 8 and 8 of weight 1: FIFO serves them in arrival order, which
        // smooth arrivals make one packet each, far from 8:1 for the heavy flow.
        let mut s = spec("fifo", "8::1,1::8", 200_000);
        s.qmin = Num::Abs(0);
        let fifo = run(&s).unwrap();
        s.alg = "wf2q+".into();
        let wf2q = run(&s).unwrap();
        assert!(
            fifo.wfi_bytes > 4.0 * wf2q.wfi_bytes.max(1000.0),
            "{fifo} {wf2q}"
        );
        assert_eq!(fifo.wfi_flow, Some(0));
    }

    #[test]
    fn batches_continue_where_they_stopped() {
        let mut p = prepare(Scenario::resolve(&spec("wf2q+", "1::3,2::2", 0)).unwrap()).unwrap();
        p.run(500);
        p.run(700);
        let o = p.outcome();
        let mut q = prepare(Scenario::resolve(&spec("wf2q+", "1::3,2::2", 0)).unwrap()).unwrap();
        q.run(1200);
        let o2 = q.outcome();
        assert_eq!(o.counters, o2.counters);
        assert_eq!(o.counters.loops, 1200);
        assert_eq!((o.pending, o.sched_bytes), (o2.pending, o2.sched_bytes));
    }

    #[test]
    fn bursty_runs_are_reproducible() {
        let mut s = spec("drr", "1::4,4::4", 50_000);
        s.pattern = Kind::Bursty;
        s.seed = 3;
        let a = run(&s).unwrap();
        let b = run(&s).unwrap();
        a.check().unwrap();
        assert_eq!((a.wfi_bytes, a.dequeued), (b.wfi_bytes, b.dequeued));
        assert_eq!(a.pattern, "bursty");
    }

    /// The harness's own FIFO with its queue operations bent by a test, to play a broken
    /// scheduler.
    struct Bent<F> {
        q: NoneFifo,
        flip: bool,
        bend: F,
    }

    /// How a [`Bent`] queue misbehaves: it may swallow a packet on enqueue (returns
    /// `false`), and may relabel the flow of a dequeued packet (`flip` alternates).
    trait Bend {
        fn swallow(&self, _p: &BenchPkt) -> bool {
            false
        }
        fn relabel(&self, f: u32, _flip: bool) -> u32 {
            f
        }
    }

    impl<F: Bend> Target for Bent<F> {
        type Key = ();
        type Batch<'a>
            = &'a mut Self
        where
            F: 'a;
        fn name(&self) -> &'static str {
            "bent"
        }
        fn key(&self, _: u32) {}
        fn batch(&mut self) -> &mut Self {
            self
        }
        fn backlog_pkts(&self) -> u64 {
            self.q.backlog_pkts()
        }
        fn stats(&self) -> Option<SchedStats> {
            None
        }
    }

    impl<F: Bend> Queue for Bent<F> {
        type Key = ();
        fn enqueue(&mut self, (): (), f: u32, p: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
            if self.bend.swallow(&p) {
                return Ok(());
            }
            self.q.batch().enqueue((), f, p)
        }
        fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
            self.flip = !self.flip;
            let (f, p) = self.q.batch().dequeue()?;
            Some((self.bend.relabel(f, self.flip), p))
        }
    }

    fn bent<F: Bend>(capacity: u32, bend: F) -> Bent<F> {
        Bent {
            q: NoneFifo::new(capacity),
            flip: false,
            bend,
        }
    }

    /// A scheduler that swaps the flows of every other packet: the harness must notice.
    #[test]
    fn a_lying_scheduler_fails_the_run() {
        struct Liar;
        impl Bend for Liar {
            fn relabel(&self, f: u32, flip: bool) -> u32 {
                if flip {
                    f ^ 1
                } else {
                    f
                }
            }
        }
        let sc = Scenario::resolve(&spec("none", "1::2", 1000)).unwrap();
        let mut b = bench(bent(sc.capacity, Liar), &sc);
        b.run(1000);
        let r = BenchReport::new(&sc, &b.outcome(), Duration::from_millis(1));
        assert!(r.mismatches > 0);
        // Accounted against the flow each packet was generated for, not the one the
        // liar named: the per-flow sequence checks still pass.
        assert_eq!(r.order_errors, 0);
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("flow mismatches"), "{e}");
    }

    /// A scheduler that drops packets silently: the loop stops and the run fails.
    #[test]
    fn a_leaking_scheduler_fails_the_run() {
        struct Leak;
        impl Bend for Leak {
            fn swallow(&self, p: &BenchPkt) -> bool {
                p.buf.get() % 7 == 0
            }
        }
        let mut s = spec("none", "1::4", 10_000);
        s.qmin = Num::Abs(0);
        let sc = Scenario::resolve(&s).unwrap();
        let mut b = bench(bent(sc.capacity, Leak), &sc);
        b.run(10_000);
        let r = BenchReport::new(&sc, &b.outcome(), Duration::from_millis(1));
        assert!(r.lost > 0 && r.loops_run < 10_000, "{r:?}");
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("lost"), "{e}");
    }
}
