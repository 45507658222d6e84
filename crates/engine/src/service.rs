//! What the arbiter schedules packets onto: the algorithm and the emulated link(s).
//!
//! The arbiter ([`crate::arbiter`]) drains mailboxes, releases packets and hands them on;
//! a [`Service`] decides which packet goes next and when. Two implementations:
//!
//! - [`Single`]: one scheduling algorithm on one link (the PSPAT paper's setting): a
//!   packet's `flow` is an index into the engine's flow list.
//! - `Dummynet` (`dummynet.rs`): a dummynet-style configuration: scheduler instances each
//!   with their own link, queues created by masks; a packet's `flow` names its class.
//!
//! Generic, not a trait object: the arbiter is monomorphised over the service and, for
//! [`Single`], over the algorithm, so the hot loop has no indirect call.

use pspat_io::Pkt;
use pspat_sched::{Backlog, FlowId, SchedStats, Scheduler};

use crate::control::Change;
use crate::dnstats::DummynetStats;
use crate::link::Link;
use crate::stats::ArbiterDrop;

/// The algorithm(s) and link(s) behind the arbiter.
pub(crate) trait Service {
    /// Takes a packet drained from a client's mailbox, or refuses it with a reason.
    fn enqueue(&mut self, p: Pkt, now: u64) -> Result<(), ArbiterDrop>;
    /// The next packet a link is free to send at `now`, if any. The caller charges it
    /// (and any member packets behind an aggregate) with [`Service::charge`] right away.
    fn dequeue(&mut self, now: u64) -> Option<Pkt>;
    /// Charges the packet just dequeued to its link and sets its `depart_ns`.
    fn charge(&mut self, p: &mut Pkt);
    /// When a link holding back queued packets is free again (ns); meaningful only when
    /// not [`Service::is_empty`].
    fn wake_at_ns(&self) -> u64;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool;
    /// Whether a packet arriving while the arbiter waits for [`Service::wake_at_ns`] may
    /// leave before then (another instance's link is free, or it only needs to enter a
    /// delay line): the arbiter then waits so that a client's push wakes it, rather than
    /// napping through arrivals as it does for one link, where nothing can leave earlier.
    fn arrivals_may_leave_sooner(&self) -> bool {
        false
    }
    /// The largest packet flow `flow` accepts (decision aggregation sizes aggregates by it).
    fn max_len(&self, flow: u32) -> u32;
    /// The links start now: no credit for the time before the engine ran.
    fn start(&mut self, now: u64);
    /// Set at the start of every scan: no transmission starts before `floor_ns`
    /// (`EngineConfig::max_lag_ns` before the scan's clock reading; a packet that arrived
    /// earlier is charged from then), and the mailboxes were last drained at `drained_ns`
    /// (a link whose scheduler runs dry restarts from then, not later: what arrived since
    /// may still be in a mailbox).
    fn set_clock(&mut self, floor_ns: u64, drained_ns: u64);
    /// Housekeeping between scans (expiry of idle dynamic queues); cheap when nothing is
    /// due.
    fn tick(&mut self, _now: u64) {}
    /// Applies a run-time change; the error names what was refused.
    fn apply(&mut self, change: Change, now: u64) -> Result<(), String>;
    /// The final state, for the engine's report.
    fn summary(&self) -> ServiceSummary;
    /// A packet [`Service::enqueue`] refused, as the backend must see it to release what
    /// it keeps for the packet (the dummynet service gives it its client's tag, see
    /// `keyring.rs`). The refused packet itself by default.
    fn refused(&self, p: Pkt) -> Pkt {
        p
    }
    /// A packet that had entered the scheduler and was dropped inside it since this was
    /// last asked (a later hop of a chained pipe, `one_pass 0`), with its reason, as the
    /// backend must see it. None by default.
    #[inline(always)]
    fn late_drop(&mut self) -> Option<(Pkt, ArbiterDrop)> {
        None
    }
    /// Per-scheduler, per-instance and per-queue statistics of a dummynet-style
    /// configuration ([`crate::dnstats`]), taken at `now`; the error says why there are
    /// none.
    fn dummynet_stats(&self, _now: u64) -> Result<DummynetStats, String> {
        Err(NOT_DUMMYNET.into())
    }
}

/// Why an engine without a dummynet-style configuration has no per-instance statistics.
pub(crate) const NOT_DUMMYNET: &str =
    "this engine runs one scheduler on one link, not a dummynet-style configuration: it has \
     no scheduler instances or dynamic queues to report (use Engine::snapshot for its \
     per-client counters)";

/// What a service reports when the arbiter stops.
#[derive(Clone, Debug)]
pub(crate) struct ServiceSummary {
    pub(crate) algorithm: &'static str,
    pub(crate) stats: SchedStats,
    pub(crate) backlog: Backlog,
    /// Dummynet-style configurations: the final per-instance and per-queue statistics.
    pub(crate) dummynet: Option<DummynetStats>,
}

/// One algorithm on one link.
pub(crate) struct Single<S> {
    sched: S,
    link: Link,
    /// See [`Service::set_clock`].
    floor_ns: u64,
    drained_ns: u64,
    /// The scheduler kept packets when the last one was charged: the link has been busy
    /// since then (`Link::transmit_wire_backlogged`).
    backlogged: bool,
    flows: Vec<FlowId>,
    max_len: Vec<u32>,
}

impl<S: Scheduler<Pkt>> Single<S> {
    pub(crate) fn new(sched: S, rate_bps: u64, flows: Vec<FlowId>, max_len: Vec<u32>) -> Self {
        Self {
            sched,
            link: Link::new(rate_bps),
            floor_ns: 0,
            drained_ns: 0,
            backlogged: false,
            flows,
            max_len,
        }
    }
}

impl<S: Scheduler<Pkt>> Service for Single<S> {
    #[inline(always)]
    fn enqueue(&mut self, p: Pkt, _now: u64) -> Result<(), ArbiterDrop> {
        match self.flows.get(p.flow as usize) {
            Some(&f) => self
                .sched
                .enqueue(f, p)
                .map_err(|r| ArbiterDrop::Sched(r.reason)),
            None => Err(ArbiterDrop::Sched(pspat_sched::DropReason::UnknownFlow)),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, now: u64) -> Option<Pkt> {
        if !self.link.is_idle(now) {
            return None;
        }
        match self.sched.dequeue() {
            Some((_, p)) => Some(p),
            None => {
                self.backlogged = false;
                self.link.reset(now.min(self.drained_ns));
                None
            }
        }
    }

    #[inline(always)]
    fn charge(&mut self, p: &mut Pkt) {
        let arrived = p.submit_ns.max(self.floor_ns);
        let wire = self.link.wire_len(p.len);
        p.depart_ns = self
            .link
            .charge_wire(wire, arrived, self.floor_ns, self.backlogged);
        self.backlogged = !self.sched.is_empty();
    }

    fn wake_at_ns(&self) -> u64 {
        self.link.idle_at_ns()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.sched.is_empty()
    }

    fn max_len(&self, flow: u32) -> u32 {
        self.max_len.get(flow as usize).copied().unwrap_or(0)
    }

    fn start(&mut self, now: u64) {
        self.link.reset(now);
    }

    #[inline(always)]
    fn set_clock(&mut self, floor_ns: u64, drained_ns: u64) {
        self.floor_ns = floor_ns;
        self.drained_ns = drained_ns;
    }

    fn apply(&mut self, change: Change, now: u64) -> Result<(), String> {
        match change {
            Change::Rate(bps) => {
                // The new link continues from where the old one is busy until.
                let busy_until = self.link.idle_at_ns().max(now);
                self.link = Link::new(bps);
                self.link.reset(busy_until);
                Ok(())
            }
            Change::Flow { index, params } => {
                let Some(&f) = self.flows.get(index) else {
                    return Err(format!(
                        "flow {index}: no such flow (the engine has {})",
                        self.flows.len()
                    ));
                };
                self.sched
                    .update_flow(f, params)
                    .map_err(|e| format!("flow {index}: {e}"))?;
                self.max_len[index] = params.max_len;
                Ok(())
            }
            Change::Config(_) | Change::Plan(_) => Err(
                "this engine runs one scheduler with a fixed flow list, not a dummynet-style \
                 configuration: change its rate or flows instead"
                    .into(),
            ),
        }
    }

    fn summary(&self) -> ServiceSummary {
        ServiceSummary {
            algorithm: self.sched.info().name,
            stats: self.sched.stats(),
            backlog: self.sched.backlog(),
            dummynet: None,
        }
    }
}
