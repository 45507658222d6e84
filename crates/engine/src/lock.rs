//! The conventional architecture, to compare PSPAT against (PSPAT paper section 2.3,
//! Figure 1b): every client runs the scheduler itself, under one lock.
//!
//! This is how Linux TC, FreeBSD dummynet and most software schedulers work. A
//! [`LockClient::submit`] takes ONE `std::sync::Mutex` around the scheduling algorithm,
//! the leaky-bucket [`Link`] and the per-client accounting, and under it:
//!
//! 1. enqueues its packet (or counts the drop, with its reason);
//! 2. if no other thread is transmitting, becomes the *owner*: dequeues, while the
//!    emulated link is idle, up to `tx_batch` packets (of any client) into a private batch.
//!
//! The owner then releases the lock, hands the batch to its own backend sender, takes the
//! lock again and gives up ownership. This is Linux's `__QDISC_STATE_RUNNING` bit
//! (`qdisc_run_begin` / `sch_direct_xmit`, which drops the root lock around
//! `dev_hard_start_xmit` and re-takes it). In detail:
//!
//! - **Transmission happens outside the lock**, by per-client senders (each client, and the
//!   watchdog, opens its own [`pspat_io::Sender`]). Only one thread at a time owns the
//!   transmit side, and ownership passes through the mutex, so batches reach the backend in
//!   the order the scheduler released them: a client's packets are never reordered, and a
//!   client's transmit counters keep a single writer at any time (the mutex orders them).
//! - A client that finds the owner busy only enqueues and leaves: the owner, or whoever
//!   comes next, dequeues its packet (Linux does the same; its packet is "in the qdisc").
//! - **The watchdog** (Linux's `qdisc_watchdog`, an hrtimer) is one thread that releases
//!   packets when no client does: when the link is busy it waits until `link_idle`
//!   (spinning below 200 us, sleeping above, as the PSPAT arbiter does, so both have the
//!   same timer precision), then becomes the owner. With nothing to do it blocks on a
//!   condition variable; an owner that leaves packets behind notifies it, and only when it
//!   is blocked (a flag under the lock), so notifications cost one syscall per idle period.
//!
//! Backpressure: a client may have at most as many packets in the scheduler as a PSPAT
//! client's mailbox holds (`mailbox_entries` less one cache line, the same capacity), so
//! the two architectures buffer the same amount. Past that, `submit` answers
//! [`SubmitError::MailboxFull`] without taking the lock. Scheduler drops are known at once
//! here; they are counted by reason like the arbiter's, and reported by the same
//! `Accepted::dropped_before` (which, unlike PSPAT's, already includes this packet if the
//! scheduler refused it).
//!
//! Counters: the per-client blocks of [`crate::stats`] are single-writer counters; here the
//! "arbiter side" and "transmit side" are written by whichever thread holds the lock or the
//! ownership, and the mutex orders those writes, so load + store stays exact.
//!
//! Sharing the scheduler between threads needs it to be `Send`; the registry's
//! [`SchedulerVisitor`] bound checks that for every registered algorithm at compile time.
//!
//! Nothing on the data path allocates: the batch and the transmitter are preallocated.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use pspat_io::{Backend, Pkt};
use pspat_mailbox::{mailbox, Config as MailboxConfig};
use pspat_sched::registry::{self, SchedulerVisitor};
use pspat_sched::{DropReason, FlowId, Scheduler};

use crate::client::{Accepted, Stamper, SubmitError};
use crate::clock;
use crate::config::EngineConfig;
use crate::engine::{validate, EngineError, EngineReport, EngineSnapshot, SchedSummary};
use crate::latency::LatencyBoard;
use crate::link::Link;
use crate::shared::Shared;
use crate::stall::Stalls;
use crate::stats::{reason_slot, Counter, Padded};
use crate::tx::Transmitter;

/// Link waits shorter than this are spun by the watchdog, longer ones slept (as the
/// arbiter's `SLEEP_MIN_NS`).
const SLEEP_MIN_NS: u64 = 200_000;
/// How much earlier than `link_idle` a watchdog sleep ends (as the arbiter's).
const SLEEP_EARLY_NS: u64 = 100_000;
/// Longest idle block of the watchdog; it re-checks for a stop request this often anyway.
const IDLE_BLOCK: Duration = Duration::from_millis(200);

/// Counters of the lock-based engine that the PSPAT snapshot has no field for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Per client: submits that found the lock taken (`try_lock` failed) and waited.
    pub contended: Vec<u64>,
    /// Ownership periods (dequeue + transmit runs), by clients and the watchdog.
    pub runs: u64,
    /// Of those, runs made by the watchdog.
    pub watchdog_runs: u64,
    /// Times an owner had to notify the blocked watchdog.
    pub watchdog_wakeups: u64,
}

/// What the mutex protects.
struct Locked<S> {
    sched: S,
    link: Link,
    flows: Vec<FlowId>,
    /// Someone owns the transmit side (Linux's qdisc running bit).
    running: bool,
    /// The watchdog is blocked on the condition variable with no deadline.
    watchdog_blocked: bool,
}

/// Counters written under the lock (serialized by it) or by the watchdog only.
#[derive(Default)]
struct CoreCounters {
    runs: Counter,
    watchdog_runs: Counter,
    watchdog_wakeups: Counter,
}

/// The scheduler side, generic so that enqueue/dequeue are monomorphised.
struct Core<S> {
    state: Mutex<Locked<S>>,
    watchdog: Condvar,
    shared: Arc<Shared>,
    /// Most packets one ownership period releases (Linux's `dev_tx_weight` quota).
    quota: usize,
    counters: Padded<CoreCounters>,
}

/// What clients and the engine see of a [`Core`], whatever its scheduler type.
trait LockCore: Send + Sync {
    fn submit(&self, me: &mut Local, pkt: Pkt) -> Result<(), SubmitError>;
    fn run_watchdog(&self, me: Local) -> Option<String>;
    fn wake_watchdog(&self);
    fn summary(&self) -> (&'static str, pspat_sched::SchedStats, pspat_sched::Backlog);
    /// Ownership periods, of which by the watchdog, and watchdog notifications.
    fn runs(&self) -> (u64, u64, u64);
}

/// A transmitting thread's private state: its sender and its batch.
struct Local {
    tx: Transmitter,
    batch: Vec<Pkt>,
    contended: Arc<Padded<Counter>>,
}

impl Local {
    fn new(
        sender: Box<dyn pspat_io::Sender>,
        cfg: &EngineConfig,
        shared: &Shared,
        contended: Arc<Padded<Counter>>,
    ) -> Self {
        Self {
            tx: Transmitter::new(
                sender,
                cfg.tx_batch,
                Arc::clone(&shared.counters),
                Arc::clone(&shared.latency),
            ),
            batch: Vec::with_capacity(cfg.tx_batch),
            contended,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Scheduler<Pkt> + Send> Core<S> {
    /// Under the lock: queues `p`, or counts its drop.
    #[inline]
    fn enqueue(&self, g: &mut Locked<S>, p: Pkt) {
        let counters = &self.shared.counters[p.client as usize];
        let result = match g.flows.get(p.flow as usize) {
            Some(&f) => g.sched.enqueue(f, p).map_err(|r| r.reason),
            None => Err(DropReason::UnknownFlow),
        };
        match result {
            Ok(()) => {
                counters.arbiter.0.enqueued.add(1);
                self.shared.arbiter_counters.0.sched_backlog.add(1);
            }
            Err(reason) => {
                counters.arbiter.0.dropped[reason_slot(reason)].add(1);
                counters.signal.0.drops.add(1);
            }
        }
    }

    /// Under the lock, by the owner: releases up to `quota` packets while the link is idle
    /// at `now` into `batch`. When the scheduler runs dry the link keeps no credit.
    #[inline]
    fn dequeue_batch(&self, g: &mut Locked<S>, batch: &mut Vec<Pkt>, now: u64) {
        while batch.len() < self.quota && g.link.is_idle(now) {
            let Some((_, mut p)) = g.sched.dequeue() else {
                g.link.reset(now);
                break;
            };
            p.depart_ns = g.link.transmit(p.len);
            self.shared.arbiter_counters.0.sched_backlog.sub(1);
            let a = &self.shared.counters[p.client as usize].arbiter.0;
            a.scheduled.add(1);
            a.scheduled_bytes.add(u64::from(p.len));
            batch.push(p);
        }
    }

    /// Called with the lock held and `running` clear: one ownership period. Returns with
    /// the lock released.
    fn own_and_transmit(&self, mut g: MutexGuard<'_, Locked<S>>, me: &mut Local) {
        let now = clock::now_ns();
        self.dequeue_batch(&mut g, &mut me.batch, now);
        if me.batch.is_empty() {
            self.leave(&mut g);
            return;
        }
        g.running = true;
        self.counters.0.runs.add(1);
        drop(g);
        // Outside the lock: only the owner transmits, so batches leave in release order.
        for p in me.batch.drain(..) {
            me.tx.push(p);
        }
        me.tx.flush();
        let mut g = lock(&self.state);
        g.running = false;
        self.leave(&mut g);
    }

    /// An owner (or a client that released nothing) leaves: if packets are left behind and
    /// the watchdog is blocked with no deadline, wake it (it will wait for `link_idle`, or
    /// run at once when the quota, not the link, stopped us).
    #[inline]
    fn leave(&self, g: &mut Locked<S>) {
        if g.watchdog_blocked && !g.sched.is_empty() {
            g.watchdog_blocked = false;
            self.counters.0.watchdog_wakeups.add(1);
            self.watchdog.notify_one();
        }
    }
}

impl<S: Scheduler<Pkt> + Send> LockCore for Core<S> {
    fn submit(&self, me: &mut Local, pkt: Pkt) -> Result<(), SubmitError> {
        let mut g = match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                me.contended.0.add(1);
                lock(&self.state)
            }
        };
        self.enqueue(&mut g, pkt);
        if g.running {
            // The owner, or whoever comes after it, releases our packet.
            return Ok(());
        }
        self.own_and_transmit(g, me);
        Ok(())
    }

    fn run_watchdog(&self, mut me: Local) -> Option<String> {
        let c = &self.shared.arbiter_counters.0;
        loop {
            let mut g = lock(&self.state);
            if let Some(drain) = self.shared.stopping() {
                if !drain || (g.sched.is_empty() && !g.running) {
                    break;
                }
            }
            let now = clock::now_ns();
            if !g.running && !g.sched.is_empty() && g.link.is_idle(now) {
                self.counters.0.watchdog_runs.add(1);
                self.own_and_transmit(g, &mut me);
                continue;
            }
            if g.running || g.sched.is_empty() {
                // Nothing for us: the owner notifies us if it leaves packets behind.
                g.watchdog_blocked = true;
                c.idle_sleeps.add(1);
                let t0 = clock::now_ns();
                let (mut g, _) = self
                    .watchdog
                    .wait_timeout(g, IDLE_BLOCK)
                    .unwrap_or_else(PoisonError::into_inner);
                g.watchdog_blocked = false;
                c.slept_ns.add(clock::now_ns() - t0);
                continue;
            }
            // Packets wait for the link: wait until it is idle, never holding the lock. A
            // long wait is on the condition variable, which releases the lock meanwhile, so
            // that a stop ends it (at 1 bit/s a 64 KB packet keeps the link busy for six
            // days): `wake_watchdog` notifies under the lock, and the stop flag was checked
            // under this same hold of it, so the notification cannot be missed. Owners do
            // not notify this wait (`watchdog_blocked` is false): a packet they leave
            // behind cannot go before the link is free either.
            let idle_at = g.link.idle_at_ns();
            let wait = idle_at.saturating_sub(now);
            if wait >= SLEEP_MIN_NS {
                c.link_sleeps.add(1);
                let t0 = clock::now_ns();
                let timeout = Duration::from_nanos(wait - SLEEP_EARLY_NS);
                drop(
                    self.watchdog
                        .wait_timeout(g, timeout)
                        .unwrap_or_else(PoisonError::into_inner),
                );
                c.slept_ns.add(clock::now_ns() - t0);
            } else {
                drop(g);
                while clock::now_ns() < idle_at && self.shared.stopping() != Some(false) {
                    std::hint::spin_loop();
                }
            }
        }
        me.tx.finish();
        me.tx.last_error.take()
    }

    fn wake_watchdog(&self) {
        // Under the lock: the watchdog checks the stop flag under it before blocking, so
        // this notification cannot fall between its check and its wait.
        let _g = lock(&self.state);
        self.watchdog.notify_all();
    }

    fn summary(&self) -> (&'static str, pspat_sched::SchedStats, pspat_sched::Backlog) {
        let g = lock(&self.state);
        (g.sched.info().name, g.sched.stats(), g.sched.backlog())
    }

    fn runs(&self) -> (u64, u64, u64) {
        let c = &self.counters.0;
        (
            c.runs.get(),
            c.watchdog_runs.get(),
            c.watchdog_wakeups.get(),
        )
    }
}

/// One sending thread's handle on a [`LockedEngine`]. `Send`, not `Sync`.
pub struct LockClient {
    stamp: Stamper,
    core: Arc<dyn LockCore>,
    shared: Arc<Shared>,
    local: Local,
    /// Most packets of this client in the scheduler (a PSPAT mailbox's capacity).
    limit: u64,
}

impl LockClient {
    /// This client's index (the `client` field of its packets, and its row in reports).
    pub fn id(&self) -> u32 {
        self.stamp.id
    }

    /// Submits a packet of `len` bytes for `flow`, stamped now: same contract as
    /// [`crate::Client::submit`], see the module docs for the one difference in
    /// `dropped_before`.
    #[inline]
    pub fn submit(&mut self, flow: u32, len: u32) -> Result<Accepted, SubmitError> {
        self.submit_at(flow, len, clock::now_ns())
    }

    /// Submits a packet stamped `now_ns` (a reading of [`clock::now_ns`]).
    #[inline]
    pub fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        if len == 0 {
            return Err(SubmitError::ZeroLength);
        }
        let counters = &self.shared.counters[self.stamp.id as usize];
        if self.shared.stopping().is_some() {
            return Err(SubmitError::Stopped);
        }
        if self.in_flight() >= self.limit {
            counters.client.0.mailbox_full.add(1);
            return Err(SubmitError::MailboxFull);
        }
        let pkt = self.stamp.pkt(flow, len, now_ns);
        self.stamp.accepted(counters, len);
        self.core.submit(&mut self.local, pkt)?;
        Ok(Accepted {
            dropped_before: self.stamp.new_drops(counters),
        })
    }

    /// Packets the scheduler dropped for this client so far (all reasons).
    pub fn drops(&self) -> u64 {
        self.shared.counters[self.stamp.id as usize]
            .signal
            .0
            .drops
            .get()
    }

    /// Packets submitted and neither dropped nor released onto the link yet.
    pub fn in_flight(&self) -> u64 {
        let c = &self.shared.counters[self.stamp.id as usize];
        c.client.0.submitted.get() - c.signal.0.drops.get() - c.arbiter.0.scheduled.get()
    }

    /// Whether the next `submit` would be refused with `MailboxFull` right now.
    pub fn is_full(&self) -> bool {
        self.in_flight() >= self.limit
    }
}

impl Drop for LockClient {
    fn drop(&mut self) {
        // Publish the latency samples this client recorded as an owner.
        self.local.tx.finish();
    }
}

/// A running lock-based engine: the watchdog thread and the shared counters. The client
/// handles are returned separately by [`LockedEngine::start`].
pub struct LockedEngine {
    core: Arc<dyn LockCore>,
    shared: Arc<Shared>,
    watchdog: Option<JoinHandle<Option<String>>>,
    contended: Vec<Arc<Padded<Counter>>>,
}

impl LockedEngine {
    /// Builds the scheduler and its flows, starts the watchdog, and returns the engine with
    /// one client handle per configured client. `handoff`, `delta_a_ns`, `spin_ns`,
    /// `client_idle_ns` and `aggregate_ns` do not apply and are ignored; `tx_batch` is the
    /// owner's quota and batch.
    pub fn start(
        cfg: &EngineConfig,
        backend: Arc<dyn Backend>,
    ) -> Result<(LockedEngine, Vec<LockClient>), EngineError> {
        validate(cfg)?;
        let n = cfg.clients.len();
        // The same per-client buffering as a PSPAT client: its mailbox's capacity (this
        // also checks the mailbox geometry the same way).
        let (probe, _) = mailbox::<Pkt>(MailboxConfig {
            entries: cfg.mailbox_entries,
            line_bytes: cfg.line_bytes,
        })?;
        let limit = probe.capacity() as u64;
        let tracked: Vec<bool> = cfg.clients.iter().map(|c| c.track_latency).collect();
        let shared = Arc::new(Shared::new(n, 0, &tracked, None, 0));
        let capacity = u32::try_from(n.saturating_mul(cfg.mailbox_entries)).unwrap_or(u32::MAX);
        let build = Build {
            cfg,
            shared: Arc::clone(&shared),
        };
        let core = registry::visit::<Pkt, _>(&cfg.algorithm, &cfg.params, capacity, build)??;
        let mut contended = Vec::with_capacity(n);
        let mut clients = Vec::with_capacity(n);
        for id in 0..n {
            let counter = Arc::new(Padded(Counter::default()));
            contended.push(Arc::clone(&counter));
            clients.push(LockClient {
                stamp: Stamper::new(id as u32),
                core: Arc::clone(&core),
                shared: Arc::clone(&shared),
                local: Local::new(backend.open(id)?, cfg, &shared, counter),
                limit,
            });
        }
        let me = Local::new(
            backend.open(n)?,
            cfg,
            &shared,
            Arc::new(Padded(Counter::default())),
        );
        let wd = Arc::clone(&core);
        let watchdog = std::thread::Builder::new()
            .name("pspat-lock-watchdog".into())
            .spawn(move || wd.run_watchdog(me))
            .map_err(|source| EngineError::Spawn {
                what: "watchdog".into(),
                source,
            })?;
        Ok((
            LockedEngine {
                core,
                shared,
                watchdog: Some(watchdog),
                contended,
            },
            clients,
        ))
    }

    /// Reads every counter now. Fields that have no meaning here are 0: `scans` counts
    /// ownership periods, `idle_sleeps` and `link_sleeps` the watchdog's,
    /// `arbiter_wakeups` the notifications of the watchdog.
    pub fn snapshot(&self) -> EngineSnapshot {
        let a = &self.shared.arbiter_counters.0;
        let (runs, _, wakeups) = self.core.runs();
        EngineSnapshot {
            at_ns: clock::now_ns(),
            clients: self.shared.counters.iter().map(|c| c.snapshot()).collect(),
            scans: runs,
            idle_sleeps: a.idle_sleeps.get(),
            link_sleeps: a.link_sleeps.get(),
            arbiter_slept_ns: a.slept_ns.get(),
            sched_backlog: a.sched_backlog.get(),
            tx_stalls: 0,
            arbiter_wakeups: wakeups,
            deactivations: 0,
            deactivation_fences: 0,
            stalls: Stalls::default(),
        }
    }

    /// Counters of the lock itself.
    pub fn lock_stats(&self) -> LockStats {
        let (runs, watchdog_runs, watchdog_wakeups) = self.core.runs();
        LockStats {
            contended: self.contended.iter().map(|c| c.0.get()).collect(),
            runs,
            watchdog_runs,
            watchdog_wakeups,
        }
    }

    /// The latency histogram (ns, submit to transmit) of a tracked client, as published so
    /// far (every 50 ms by each transmitting thread, and when a client handle is dropped).
    pub fn latency(&self, client: usize) -> Option<Histogram<u64>> {
        self.shared.latency.snapshot(client)
    }

    /// The latency histograms, to read after [`LockedEngine::stop`].
    pub fn latency_board(&self) -> Arc<LatencyBoard> {
        Arc::clone(&self.shared.latency)
    }

    /// Stops the engine. With `drain`, the watchdog first releases everything queued (at
    /// the link rate); otherwise what is left is reported as queued. Clients still alive
    /// get `SubmitError::Stopped`.
    pub fn stop(mut self, drain: bool) -> EngineReport {
        let send_error = self.halt(drain);
        let (algorithm, stats, backlog) = self.core.summary();
        EngineReport {
            snapshot: self.snapshot(),
            sched: Some(SchedSummary {
                algorithm,
                stats,
                backlog,
                members_left: 0,
                stashed: false,
                send_error,
                dummynet: None,
            }),
            dispatcher_errors: Vec::new(),
        }
    }

    fn halt(&mut self, drain: bool) -> Option<String> {
        self.shared.request_stop(drain);
        self.core.wake_watchdog();
        self.watchdog.take().and_then(|h| h.join().ok().flatten())
    }
}

impl Drop for LockedEngine {
    fn drop(&mut self) {
        if self.watchdog.is_some() {
            self.halt(false);
        }
    }
}

/// Builds the core around the scheduler the registry made, with the configured flows.
struct Build<'a> {
    cfg: &'a EngineConfig,
    shared: Arc<Shared>,
}

impl SchedulerVisitor<Pkt> for Build<'_> {
    type Output = Result<Arc<dyn LockCore>, EngineError>;

    fn visit<S: Scheduler<Pkt> + Send + 'static>(self, mut sched: S) -> Self::Output {
        let mut flows = Vec::with_capacity(self.cfg.flows.len());
        for (index, p) in self.cfg.flows.iter().enumerate() {
            flows.push(
                sched
                    .add_flow(*p)
                    .map_err(|source| EngineError::Flow { index, source })?,
            );
        }
        let mut link = Link::new(self.cfg.rate_bps);
        link.reset(clock::now_ns());
        Ok(Arc::new(Core {
            state: Mutex::new(Locked {
                sched,
                link,
                flows,
                running: false,
                watchdog_blocked: false,
            }),
            watchdog: Condvar::new(),
            shared: self.shared,
            quota: self.cfg.tx_batch,
            counters: Padded(CoreCounters::default()),
        }))
    }
}
