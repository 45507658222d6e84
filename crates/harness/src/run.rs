//! The benchmark loop, compiled once per algorithm.
//!
//! [`prepare`] builds the scheduler through [`registry::visit`], whose visitor receives the
//! concrete scheduler type: the loop is monomorphised for it (and for the arrival
//! pattern), and the only dynamic call is the one that starts a batch of iterations
//! ([`Prepared::run`]). The `none` baseline runs the same loop over the harness's own FIFO.
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
//! Nothing in the loop allocates, hashes or calls through a pointer. For the length of a
//! batch each component is borrowed as a `Batch` (its arrays as local slices, its scalars
//! as locals written back on drop), so the compiler keeps them in registers instead of
//! reloading them after every store; per-flow and per-buffer arrays have power-of-two
//! lengths and are indexed through a mask, which removes their bounds checks without
//! `unsafe` (`slots.rs`); the controller runs each phase as a counted loop
//! ([`Controller::drive`]); checks that never fail in a correct run sit behind a cold
//! branch.

use std::time::{Duration, Instant};

use pspat_sched::registry::{self, SchedulerVisitor};
use pspat_sched::{DropCounts, DropReason, SchedStats, Scheduler};

use crate::controller::{Controller, Ops};
use crate::error::{Error, SetupError};
use crate::pattern::{FlowSpec, Kind, Pattern};
use crate::pool::{BenchPkt, PktHdr, Pool};
use crate::report::BenchReport;
use crate::scenario::{BenchSpec, Scenario};
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

/// The state of a benchmark over target `T`.
struct Bench<T> {
    target: T,
    ctl: Controller,
    pattern: Pattern,
    pool: Pool,
    wfi: Wfi,
    pending: u64,
    c: Counters,
}

/// The counters the loop updates on every packet, kept in registers during a batch and
/// added to [`Counters`] at its end. (Mismatches and order errors go straight to memory
/// on a branch never taken in a correct run: they need no register.)
#[derive(Default)]
struct Tally {
    pending: u64,
    attempts: u64,
    dequeued: u64,
}

impl<T: Target> Bench<T> {
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
        Self {
            target,
            ctl: Controller::new(sc.qmin, sc.qmax),
            pattern: Pattern::new(sc.spec.pattern, &flows, sc.spec.seed),
            // One buffer more than the scheduler holds: a full scheduler refuses a packet
            // (counted by reason) before the pool runs dry.
            pool: Pool::new(sc.capacity + 1),
            wfi: Wfi::new(&weights),
            pending: 0,
            c: Counters::default(),
        }
    }

    /// Runs `loops` iterations, or fewer if the scheduler loses packets.
    fn run(&mut self, loops: u64) {
        if self.c.lost > 0 {
            return;
        }
        match self.pattern.kind() {
            Kind::Smooth => self.run_as::<false>(loops),
            Kind::Bursty => self.run_as::<true>(loops),
        }
    }

    /// The loop, compiled once per pattern.
    #[inline(never)]
    fn run_as<const BURSTY: bool>(&mut self, loops: u64) {
        let mut hot = Hot {
            target: self.target.batch(),
            pattern: self.pattern.batch::<BURSTY>(),
            pool: self.pool.batch(),
            wfi: self.wfi.batch(),
            c: &mut self.c,
            t: Tally {
                pending: self.pending,
                ..Tally::default()
            },
        };
        let driven = self.ctl.drive(&mut hot, loops);
        let t = std::mem::take(&mut hot.t);
        drop(hot);
        // pending_end = pending_start + accepted - dequeued
        let accepted = t.pending + t.dequeued - self.pending;
        let c = &mut self.c;
        c.loops += driven.loops;
        c.enqueue_attempts += t.attempts;
        c.enqueued += accepted;
        c.dequeued += t.dequeued;
        if driven.stalled {
            c.lost = t.pending;
        }
        self.pending = t.pending;
    }
}

/// Everything the loop touches, borrowed for one batch: arrays and counters in locals.
struct Hot<'a, Q, const BURSTY: bool> {
    target: Q,
    pattern: pattern::Batch<'a, BURSTY>,
    pool: pool::Batch<'a>,
    wfi: wfi::Batch<'a>,
    c: &'a mut Counters,
    t: Tally,
}

impl<Q: Queue, const BURSTY: bool> Ops for Hot<'_, Q, BURSTY> {
    #[inline(always)]
    fn pending(&self) -> u64 {
        self.t.pending
    }

    /// Generates and enqueues one packet; `false` if it was refused.
    #[inline(always)]
    fn enqueue(&mut self) -> bool {
        let g = self.pattern.generate();
        self.t.attempts += 1;
        let hdr = PktHdr {
            flow: g.flow,
            len: g.len,
            seq: g.seq,
        };
        let Some(pkt) = self.pool.alloc(hdr) else {
            // Unreachable while the pool outsizes the scheduler; counted, not assumed.
            cold();
            self.c.drops.add(DropReason::SchedulerFull, 1);
            self.pattern.refused(g.flow);
            return false;
        };
        match self.target.enqueue(g.flow, pkt) {
            Ok(()) => {
                self.t.pending += 1;
                if g.first {
                    self.wfi.backlogged(g.flow);
                }
                true
            }
            Err(rejected) => {
                cold();
                self.c.drops.add(rejected.reason, 1);
                self.pool.release(rejected.pkt);
                self.pattern.refused(g.flow);
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
        // own state, whatever the scheduler said.
        let served = self.pattern.dequeued(hdr.flow);
        if (hdr.flow != flow) | (hdr.len != pkt.len) | (served.seq != hdr.seq) {
            cold();
            self.c.mismatches += u64::from((hdr.flow != flow) | (hdr.len != pkt.len));
            self.c.order_errors += u64::from(served.seq != hdr.seq);
        }
        self.wfi.dequeued(hdr.flow, hdr.len, served.emptied);
        self.t.pending -= 1;
        self.t.dequeued += 1;
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

impl<T: Target> Runner for Bench<T> {
    fn run(&mut self, loops: u64) {
        Bench::run(self, loops);
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            counters: self.c.clone(),
            pending: self.pending,
            target_backlog: self.target.backlog_pkts(),
            wfi: self.wfi.worst(),
            sched_bytes: self.wfi.sched_bytes(),
            stats: self.target.stats(),
        }
    }
}

/// Builds the benchmark of a registered scheduler: adds the flows, checks their indices.
struct Build<'a>(&'a Scenario);

impl SchedulerVisitor<BenchPkt> for Build<'_> {
    type Output = Result<Box<dyn Runner>, SetupError>;

    fn visit<S: Scheduler<BenchPkt> + 'static>(self, mut sched: S) -> Self::Output {
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
        Ok(Box::new(Bench::new(SchedTarget::new(sched, &ids), sc)))
    }
}

/// A benchmark ready to run.
pub struct Prepared {
    scenario: Scenario,
    runner: Box<dyn Runner>,
}

/// Builds the scheduler and the harness state for `scenario`.
pub fn prepare(scenario: Scenario) -> Result<Prepared, Error> {
    let runner = match scenario.info {
        None => Box::new(Bench::new(NoneFifo::new(scenario.capacity), &scenario)),
        Some(info) => registry::visit(
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

    /// A scheduler that swaps the flows of every other packet: the harness must notice.
    #[test]
    fn a_lying_scheduler_fails_the_run() {
        struct Liar(NoneFifo, bool);
        impl Target for Liar {
            type Batch<'a> = &'a mut Self;
            fn name(&self) -> &'static str {
                "liar"
            }
            fn batch(&mut self) -> &mut Self {
                self
            }
            fn backlog_pkts(&self) -> u64 {
                self.0.backlog_pkts()
            }
            fn stats(&self) -> Option<SchedStats> {
                None
            }
        }
        impl Queue for Liar {
            fn enqueue(&mut self, f: u32, p: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
                self.0.batch().enqueue(f, p)
            }
            fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
                self.1 = !self.1;
                let liar = self.1;
                self.0
                    .batch()
                    .dequeue()
                    .map(|(f, p)| (if liar { f ^ 1 } else { f }, p))
            }
        }
        let sc = Scenario::resolve(&spec("none", "1::2", 1000)).unwrap();
        let mut b = Bench::new(Liar(NoneFifo::new(sc.capacity), false), &sc);
        b.run(1000);
        let r = BenchReport::new(&sc, &Runner::outcome(&b), Duration::from_millis(1));
        assert!(r.mismatches > 0);
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("flow mismatches"), "{e}");
    }

    /// A scheduler that drops packets silently: the loop stops and the run fails.
    #[test]
    fn a_leaking_scheduler_fails_the_run() {
        struct Leak(NoneFifo);
        impl Target for Leak {
            type Batch<'a> = &'a mut Self;
            fn name(&self) -> &'static str {
                "leak"
            }
            fn batch(&mut self) -> &mut Self {
                self
            }
            fn backlog_pkts(&self) -> u64 {
                self.0.backlog_pkts()
            }
            fn stats(&self) -> Option<SchedStats> {
                None
            }
        }
        impl Queue for Leak {
            fn enqueue(&mut self, f: u32, p: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
                if p.buf.get() % 7 == 0 {
                    return Ok(()); // swallowed
                }
                self.0.batch().enqueue(f, p)
            }
            fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
                self.0.batch().dequeue()
            }
        }
        let mut s = spec("none", "1::4", 10_000);
        s.qmin = Num::Abs(0);
        let sc = Scenario::resolve(&s).unwrap();
        let mut b = Bench::new(Leak(NoneFifo::new(sc.capacity)), &sc);
        b.run(10_000);
        let r = BenchReport::new(&sc, &Runner::outcome(&b), Duration::from_millis(1));
        assert!(r.lost > 0 && r.loops_run < 10_000, "{r:?}");
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("lost"), "{e}");
    }
}
