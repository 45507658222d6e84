//! The arbiter: the one thread that runs the scheduling algorithm (PSPAT section 3.4).
//!
//! [`Arbiter::scan`] is `do_scan()` of Figure 5:
//!
//! 1. take a timestamp `now`;
//! 2. if Delta_A has passed since the last drain, visit the active clients and move every
//!    packet from their mailboxes into the scheduler, so that everything that arrived before
//!    `now` competes for the link. Mailbox slots stay occupied (extracted, not released)
//!    until the scheduler sends or drops the packet: a client can never have more packets
//!    in the scheduler than its mailbox has slots. A backlog (more than one batch of a
//!    mailbox, arrived 100 us or more before the scan: the arbiter was late, descheduled
//!    or asleep too long) is replayed: before
//!    each further batch joins the queues, the links release what they would have sent by
//!    the latest arrival so far, so that queue limits and the scheduler's choices are
//!    those it would have made on time (the paper's drain-then-release, in the order of
//!    arrival rather than all at once);
//! 3. while the emulated link is idle at `now`, dequeue a packet, charge its transmission
//!    time to the link, release its client's slot and hand it on; when the scheduler runs
//!    dry, pull the link's clock up to the last drain (no credit for idle time). A link
//!    charges a packet from its arrival, so a late arbiter catches up on the time it lost,
//!    but only within `EngineConfig::max_lag_ns`: when the arbiter or its transmitter
//!    cannot keep up with the configured rate for longer, the link loses that time instead
//!    of bursting, and the backlog stays in the scheduler, which keeps deciding (by weight)
//!    what leaves and what is dropped;
//! 4. hand-off: send the batch (arbiter mode), or wake the dispatchers / clients that
//!    received packets, with one fence for all of them.
//!
//! [`Arbiter::run`] loops over `scan` and decides how to wait (section 3.5): spin while the
//! link is about to be idle, sleep until `link_idle` when it is far (a stop or a control
//! ends that sleep early), spin T_w when there is no traffic and then block until a client
//! wakes it.
//!
//! Order: a client's packets enter the scheduler in submission order, and the scheduler
//! keeps each flow FIFO, so a client's packets to one flow leave in order; dispatcher
//! `c % T` and the client's own return mailbox keep that order to the wire.
//!
//! State, one small struct per concern, all held inline in [`Arbiter`] (no pointer to
//! follow on the data path): [`Drain`] (when block 1 runs: Delta_A), [`Deactivation`]
//! (which idle clients leave the scan list, and when), [`Aggregator`] (decision
//! aggregation, `aggregate.rs`), [`Outlet`] (where released packets go), [`ScanTally`]
//! (what a scan moved, settled once at its end) and [`Pacing`] (how much a scan releases
//! and how the loop waits), beside the service, the client ports and the state shared with
//! the other threads.
//!
//! Allocation: [`Arbiter::new`] sizes every buffer of the arbiter's for the most it can
//! ever hold, so none grows on the data path: the lists of clients for one entry per
//! client (a client enters each at most once per drain or scan), the aggregator's members
//! for every slot of every client mailbox (a packet in the scheduler holds its slot).
//! The service may allocate: a dummynet-style configuration creates a scheduler instance
//! when a mask first sees its key (`dummynet.rs`); [`Single`](crate::service::Single)
//! does not.

use std::sync::Arc;
use std::time::Duration;

use crate::aggregate::{Aggregate, Aggregator};
use crate::clock;
use crate::config::EngineConfig;
use crate::control::Pending;
use crate::service::{Service, ServiceSummary};
use crate::shared::Shared;
use crate::tx::Transmitter;
use crate::wake::publish_fence;
use pspat_io::{Backend, Pkt};
use pspat_mailbox::{Config as MailboxConfig, Consumer, Producer};

/// How much earlier than `link_idle` a link sleep ends (at most), to absorb wake-up
/// latency. Waits shorter than `EngineConfig::link_spin_ns` are spun instead.
const SLEEP_EARLY_NS: u64 = 100_000;
/// A drain replays a backlog ([`Arbiter::catch_up`]) when the newest packet it entered so
/// far arrived at least this long before the scan: the arbiter was late (descheduled, a
/// wake-up missed), not merely busy with greedy clients.
const REPLAY_LATE_NS: u64 = 100_000;
/// Longest block when idle; the arbiter re-checks for a stop request this often anyway.
const IDLE_BLOCK: Duration = Duration::from_millis(200);
/// While it has work, the arbiter deactivates idle clients only when this many are
/// waiting for it, or ...
const DEACTIVATE_BATCH: usize = 64;
/// ... when this long has passed since its last deactivation (and always before it
/// sleeps). Deactivating costs a heavy fence, a `membarrier` system call that interrupts
/// every other CPU running the process and waits for them: under a microsecond when they
/// are idle, but on this project's VM with the other vCPU busy p50 3.6 us, p99 10-22 us,
/// up to 1.1 ms (`crates/io/examples/membarrier_cost.rs`; docs/PERFORMANCE.md, "drain
/// gaps, and what sets the victim's p99"), all of it time the link is not served. A
/// client left active costs one read of its mailbox's head per drain (a line nobody
/// writes while it is idle), so up to `DEACTIVATE_BATCH - 1` of them cost far less.
const DEACTIVATE_EVERY_NS: u64 = 100_000_000;
/// Packets a drain takes from a mailbox at a time (`Consumer::extract_batch`).
const DRAIN_BATCH: usize = 32;

/// When a drain deactivates the idle clients it found ([`Arbiter::scan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deactivate {
    /// While busy: with [`DEACTIVATE_BATCH`] of them, or [`DEACTIVATE_EVERY_NS`] after the
    /// last time; otherwise they stay active until a later drain.
    WhenDue,
    /// Before a sleep: all of them.
    Now,
}

/// The arbiter's view of one client.
pub(crate) struct ClientPort {
    /// Consumer end of the client's mailbox.
    pub(crate) mailbox: Consumer<Pkt>,
    /// Client hand-off mode: producer end of the client's return mailbox.
    pub(crate) cleared: Option<Producer<Pkt>>,
    /// Client hand-off mode: the client's `drained` counter when last read.
    drained_seen: u64,
    /// Last time the mailbox had something, ns.
    last_busy_ns: u64,
    /// Client hand-off mode: already in this scan's [`Output::Clients`] list.
    touched: bool,
    /// Packets (and their bytes) that left the scheduler in this scan: their slots are
    /// given back and the client's `scheduled` counters published at the scan's end
    /// ([`Arbiter::release_slots`]), once per client per scan, not per packet.
    departed: u32,
    departed_bytes: u64,
    /// Arbiter hand-off: of those, the ones the backend refused (so not sent).
    failed: u32,
    failed_bytes: u64,
}

impl ClientPort {
    pub(crate) fn new(mailbox: Consumer<Pkt>, cleared: Option<Producer<Pkt>>) -> Self {
        Self {
            mailbox,
            cleared,
            drained_seen: 0,
            last_busy_ns: 0,
            touched: false,
            departed: 0,
            departed_bytes: 0,
            failed: 0,
            failed_bytes: 0,
        }
    }
}

/// Where cleared packets go.
pub(crate) enum Output {
    /// The arbiter sends them itself.
    Arbiter(Transmitter),
    /// TX mailboxes of the dispatchers, and which ones received packets in this scan.
    Dispatchers {
        mailboxes: Vec<Producer<Pkt>>,
        touched: Vec<bool>,
    },
    /// Each client's return mailbox (in [`ClientPort::cleared`]); which were touched in
    /// this scan, each once ([`ClientPort::touched`]).
    Clients { touched: Vec<u32> },
}

/// What one scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Packets moved from mailboxes into the scheduler (including the ones it dropped).
    pub drained: u32,
    /// Packets released onto the link.
    pub sent: u32,
}

/// Block 1's timing (Delta_A, PSPAT section 3.4) and its batch buffer.
struct Drain {
    /// Delta_A: the mailboxes are drained at most this often, ns.
    delta_a_ns: u64,
    /// Earliest time of the next drain, ns; 0 makes the next scan drain (before a sleep).
    /// (When the last drain started, moved past voluntary waits, is the stall counters'
    /// `open_since_ns`: the drain gaps are counted in [`crate::stall`].)
    next_ns: u64,
    /// Packets taken from one mailbox and not yet entered ([`DRAIN_BATCH`] of them; lent
    /// to the drain, which puts it back).
    buf: Vec<Pkt>,
}

/// Deactivation of idle clients: a client whose mailbox stayed empty long enough leaves
/// the scan list ([`crate::activity`]), in batches because each batch costs a heavy fence
/// (see [`DEACTIVATE_EVERY_NS`]).
struct Deactivation {
    /// A client whose mailbox was empty this long is idle, ns.
    idle_ns: u64,
    /// Clients a drain found idle, deactivated together at its end (one heavy fence for
    /// all of them), as [`Deactivate`] says. Capacity: every client, so no allocation.
    found: Vec<u32>,
    /// Earliest time of the next deactivation while busy, ns.
    next_ns: u64,
}

/// Where released packets go, and what did not go yet (blocks 2 and 3).
struct Outlet {
    /// The hand-off mode's transmitter or mailboxes.
    to: Output,
    /// A packet dequeued but refused by a full TX or return mailbox; sent first on the
    /// next scan.
    stash: Option<Pkt>,
}

/// What the current scan moved, settled once at its end ([`Arbiter::release_slots`])
/// instead of per packet.
struct ScanTally {
    /// Clients with `departed > 0` in this scan. Capacity: every client, so no
    /// allocation.
    departing: Vec<u32>,
    /// Scheduler packets entered into / taken out of the scheduler in this scan: the
    /// shared `sched_backlog` counter moves once per scan by the difference.
    entered: u64,
    left: u64,
}

/// How much one scan releases and how the arbiter waits between scans (section 3.5).
struct Pacing {
    /// Most packets released per scan (the rest go on the next scan, after a look at the
    /// mailboxes).
    scan_batch: u32,
    /// T_w: how long the arbiter spins without traffic before it blocks, ns.
    spin_ns: u64,
    /// Waits for the link at least this long are slept, shorter ones spun, ns.
    link_spin_ns: u64,
    /// `EngineConfig::max_lag_ns`.
    max_lag_ns: u64,
    /// Packets a drain's catch-up released (counted in the scan's `sent`).
    caught_up: u32,
}

/// The arbiter state, generic over the service (and through it the scheduler) so that
/// the hot loop is monomorphised.
pub(crate) struct Arbiter<V: Service> {
    /// The algorithm and link(s).
    svc: V,
    /// One per client, by client index.
    ports: Vec<ClientPort>,
    shared: Arc<Shared>,
    /// Told about every packet the service refuses (frame buffers to free).
    backend: Arc<dyn Backend>,
    drain: Drain,
    idle: Deactivation,
    agg: Aggregator,
    out: Outlet,
    tally: ScanTally,
    pace: Pacing,
}

impl<V: Service> Arbiter<V> {
    pub(crate) fn new(
        svc: V,
        cfg: &EngineConfig,
        ports: Vec<ClientPort>,
        shared: Arc<Shared>,
        mut out: Output,
        backend: Arc<dyn Backend>,
    ) -> Self {
        if let Output::Arbiter(tx) = &mut out {
            // Counted per client per scan instead (`release_slots`).
            tx.leave_sent_counts_to_caller();
        }
        let n_clients = ports.len();
        // What all the clients can have in the scheduler at once: every packet in it holds
        // a slot of its client's mailbox until it is sent or dropped.
        let mailbox_slots = n_clients.saturating_mul(
            MailboxConfig {
                entries: cfg.mailbox_entries,
                line_bytes: cfg.line_bytes,
            }
            .capacity::<Pkt>(),
        );
        Self {
            svc,
            ports,
            shared,
            backend,
            drain: Drain {
                delta_a_ns: cfg.delta_a_ns,
                next_ns: 0,
                buf: vec![Pkt::default(); DRAIN_BATCH],
            },
            idle: Deactivation {
                idle_ns: cfg.client_idle_ns,
                found: Vec::with_capacity(n_clients),
                next_ns: 0,
            },
            agg: Aggregator::new(cfg.aggregate_bytes(), cfg.flows.len(), mailbox_slots),
            out: Outlet {
                to: out,
                stash: None,
            },
            tally: ScanTally {
                departing: Vec::with_capacity(n_clients),
                entered: 0,
                left: 0,
            },
            pace: Pacing {
                scan_batch: cfg.scan_batch.max(1),
                spin_ns: cfg.spin_ns,
                link_spin_ns: cfg.link_spin_ns,
                max_lag_ns: cfg.max_lag_ns,
                caught_up: 0,
            },
        }
    }

    /// `do_scan()`: see the module docs. `idle` says when the clients a drain finds idle
    /// leave the scan list.
    pub(crate) fn scan(&mut self, now: u64, idle: Deactivate) -> ScanOutcome {
        if self.shared.control.pending() {
            self.apply_changes(now);
        }
        let counters = &self.shared.arbiter_counters.0;
        counters.scans.add(1);
        let mut outcome = ScanOutcome::default();
        let drains = now >= self.drain.next_ns;
        let drained_ns = if drains {
            now
        } else {
            self.drain.next_ns - self.drain.delta_a_ns
        };
        self.svc
            .set_clock(now.saturating_sub(self.pace.max_lag_ns), drained_ns);
        if drains {
            self.drain.next_ns = now + self.drain.delta_a_ns;
            counters.drains.add(1);
            counters.stalls.drained(now);
            outcome.drained = self.drain_clients(now, idle);
            self.svc.tick(now);
        }
        outcome.sent =
            self.release(now, self.pace.scan_batch) + std::mem::take(&mut self.pace.caught_up);
        while let Some((p, reason)) = self.svc.late_drop() {
            self.dropped_inside(p, reason);
        }
        self.release_slots();
        self.out.hand_off(&self.shared, &mut self.ports);
        outcome
    }

    /// End of a scan's releases: publishes each client's scheduled packets and bytes,
    /// gives back the mailbox slots of every packet that left the scheduler (oldest slots
    /// first: a slot only bounds how many packets a client has in the scheduler, its
    /// content was copied out when extracted; in the client hand-off mode the client gives
    /// them back), and moves the shared backlog counter by the scan's net change.
    fn release_slots(&mut self) {
        // Arbiter hand-off: this thread sends, and counts the sent packets here per client
        // rather than per packet in the transmitter. Flushing first hands every packet that
        // departed in this scan to the backend; the refusals come back per client.
        let count_sent = if let Output::Arbiter(tx) = &mut self.out.to {
            tx.flush();
            for (c, len) in tx.take_failures() {
                let port = &mut self.ports[c as usize];
                port.failed += 1;
                port.failed_bytes += u64::from(len);
            }
            true
        } else {
            false
        };
        for &c in &self.tally.departing {
            let port = &mut self.ports[c as usize];
            let counters = &self.shared.counters[c as usize];
            let a = &counters.arbiter.0;
            a.scheduled.add(u64::from(port.departed));
            a.scheduled_bytes.add(port.departed_bytes);
            if count_sent {
                let tx = &counters.tx.0;
                tx.sent.add(u64::from(port.departed - port.failed));
                tx.sent_bytes.add(port.departed_bytes - port.failed_bytes);
                port.failed = 0;
                port.failed_bytes = 0;
            }
            if !self.out.client_mode() {
                port.mailbox.release(port.departed as usize);
            }
            port.departed = 0;
            port.departed_bytes = 0;
        }
        self.tally.departing.clear();
        let backlog = &self.shared.arbiter_counters.0.sched_backlog;
        let (entered, left) = (self.tally.entered, self.tally.left);
        if entered != left {
            if entered > left {
                backlog.add(entered - left);
            } else {
                backlog.sub(left - entered);
            }
        }
        self.tally.entered = 0;
        self.tally.left = 0;
    }

    /// Run-time changes and statistics requests queued by the controller, served between
    /// two scans.
    fn apply_changes(&mut self, now: u64) {
        for request in self.shared.control.take() {
            match request {
                Pending::Change(change, reply) => {
                    let _ = reply.send(self.svc.apply(change, now));
                }
                Pending::DummynetStats(reply) => {
                    let _ = reply.send(self.svc.dummynet_stats(now));
                }
            }
        }
    }

    /// Block 1: mailboxes into the scheduler.
    fn drain_clients(&mut self, now: u64, idle: Deactivate) -> u32 {
        let shared = Arc::clone(&self.shared);
        let mut drained = 0u32;
        let mut buf = std::mem::take(&mut self.drain.buf);
        // The latest arrival among the packets this drain entered: a catch-up releases up
        // to it, so that no packet leaves before it arrived.
        let mut newest = 0u64;
        shared.activity.for_each_active(|c| {
            let mut got = 0u32;
            if self.out.client_mode() {
                self.release_drained(c);
            }
            if self.agg.enabled() {
                got = self.drain_aggregating(c, now);
            } else {
                let mut accepted = 0;
                loop {
                    // A batch at a time: see `Consumer::extract_batch`.
                    let n = self.ports[c].mailbox.extract_batch(&mut buf);
                    for &p in &buf[..n] {
                        newest = newest.max(p.submit_ns);
                        accepted += u64::from(self.enqueue_one(p, now));
                    }
                    got += n as u32;
                    if n < buf.len() {
                        break;
                    }
                    if now.saturating_sub(newest) < REPLAY_LATE_NS {
                        // On time (a greedy client keeps a backlog of fresh packets):
                        // entered as they are, released at the scan's time.
                        continue;
                    }
                    // A backlog (the arbiter was late): before the next batch joins the
                    // queues, release what the links would have sent by the latest
                    // arrival entered so far, so that queue limits and the scheduler's
                    // choices see the queues about as they would have been then. (With
                    // several clients, one drained later may hold packets that arrived
                    // earlier: they compete from when they are drained, within the lag
                    // window.)
                    self.catch_up(newest, now);
                }
                if accepted > 0 {
                    self.shared.counters[c].arbiter.0.enqueued.add(accepted);
                    self.tally.entered += accepted;
                }
            }
            drained += got;
            let port = &mut self.ports[c];
            if got > 0 {
                port.last_busy_ns = now;
            } else if now.saturating_sub(port.last_busy_ns) > self.idle.idle_ns {
                // Idle for a while: stop visiting it (below, once the visit is over).
                self.idle.found.push(c as u32);
            }
        });
        self.drain.buf = buf;
        if !self.idle.found.is_empty() {
            self.settle_idle(now, idle);
        }
        drained
    }

    /// Deactivates the clients the drain found idle if `when` says it is time to; otherwise
    /// leaves them active, to be found idle again by a later drain.
    fn settle_idle(&mut self, now: u64, when: Deactivate) {
        let idle = &self.idle;
        if when == Deactivate::Now || idle.found.len() >= DEACTIVATE_BATCH || now >= idle.next_ns {
            self.idle.next_ns = now + DEACTIVATE_EVERY_NS;
            let activity = &self.shared.activity;
            // The re-check after the (one) heavy fence catches a packet pushed or sent
            // meanwhile (see Activity::deactivate and `owes_a_visit`).
            activity.deactivate_all(&self.idle.found);
            let counters = &self.shared.arbiter_counters.0;
            counters.deactivations.add(self.idle.found.len() as u64);
            counters.deactivation_fences.add(1);
            for &c in &self.idle.found {
                if self.owes_a_visit(c as usize) {
                    activity.mark(c as usize);
                }
            }
        }
        self.idle.found.clear();
    }

    /// Whether client `c` has something for the arbiter: a packet in its mailbox or, in the
    /// client hand-off mode, packets it sent whose mailbox slots the arbiter has not given
    /// back yet. Read after a deactivation's heavy fence, this is the Dekker re-check of
    /// [`Activity::deactivate`] for both ways a client marks itself (`Client::submit` and
    /// `Client::drain` each publish, fence, then mark): a client deactivated between its
    /// drain and its mark would otherwise keep a full mailbox whose slots nobody releases.
    fn owes_a_visit(&self, c: usize) -> bool {
        let port = &self.ports[c];
        port.mailbox.has_message()
            || (self.out.client_mode()
                && self.shared.counters[c].client.0.drained.get() != port.drained_seen)
    }

    /// Client hand-off mode: give back the mailbox slots of packets the client sent.
    fn release_drained(&mut self, c: usize) {
        let drained = self.shared.counters[c].client.0.drained.get();
        let port = &mut self.ports[c];
        let n = drained - port.drained_seen;
        if n > 0 {
            port.drained_seen = drained;
            port.mailbox.release(n as usize);
        }
    }

    /// Decision aggregation: consecutive packets of one client and flow, up to the
    /// aggregation budget, become one scheduler packet (see [`crate::aggregate`]).
    fn drain_aggregating(&mut self, c: usize, now: u64) -> u32 {
        let mut got = 0;
        let mut open: Option<Aggregate> = None;
        while let Some(p) = self.ports[c].mailbox.extract() {
            got += 1;
            if let Some(agg) = open.as_mut() {
                if self.agg.join(agg, p, self.svc.max_len(p.flow)) {
                    continue;
                }
                let done = *agg;
                self.enqueue_aggregate(done, now);
            }
            open = Some(self.agg.open(p));
        }
        if let Some(done) = open {
            self.enqueue_aggregate(done, now);
        }
        got
    }

    /// Enqueues one packet (no aggregation); returns whether the scheduler took it. The
    /// caller counts accepted packets per client; a refusal is handled by [`Self::refused`].
    #[inline(always)]
    fn enqueue_one(&mut self, p: Pkt, now: u64) -> bool {
        match self.svc.enqueue(p, now) {
            Ok(()) => true,
            Err(reason) => {
                self.refused(p, 1, reason, None);
                false
            }
        }
    }

    /// Enqueues an aggregate (its head packet, standing for its members). A refusal is
    /// counted against the client, signalled to it, and its slots released.
    fn enqueue_aggregate(&mut self, agg: Aggregate, now: u64) {
        match self.svc.enqueue(agg.head, now) {
            Ok(()) => {
                self.agg.accepted(&agg);
                self.shared.counters[agg.head.client as usize]
                    .arbiter
                    .0
                    .enqueued
                    .add(u64::from(agg.members));
                self.tally.entered += 1;
            }
            Err(reason) => self.refused(agg.head, agg.members, reason, Some(&agg)),
        }
    }

    /// The scheduler refused `p` (standing for `k` packets, the members of `agg` when it
    /// is an aggregate): counted against the client, signalled to it, each packet's buffer
    /// discarded once, slots given back.
    #[cold]
    #[inline(never)]
    fn refused(
        &mut self,
        p: Pkt,
        k: u32,
        reason: crate::stats::ArbiterDrop,
        agg: Option<&Aggregate>,
    ) {
        let c = p.client as usize;
        let counters = &self.shared.counters[c];
        counters.arbiter.0.dropped[reason.slot()].add(u64::from(k));
        counters.signal.0.drops.add(u64::from(k));
        let backend = &self.backend;
        // An aggregate's members are discarded one by one (its head stands for all of them,
        // with their summed length); a packet the aggregator stored nothing for (a flow
        // index the engine does not have) is its own only member.
        let handed = match agg {
            Some(agg) => self.agg.refused(agg, |member| backend.discard(&[member])),
            None => 0,
        };
        if handed == 0 {
            debug_assert_eq!(k, 1, "an aggregate of {k} with no stored members");
            backend.discard(&[self.svc.refused(p)]);
        }
        debug_assert!(handed == 0 || handed == k, "{handed} of {k} members");
        self.ports[c].mailbox.release(k as usize);
    }

    /// A packet the scheduler dropped after taking it (a later hop of a chained pipe): as
    /// [`Self::refused`], and it leaves the scheduler's backlog. It no longer counts as
    /// `enqueued`, so that what is in the mailboxes stays `submitted - enqueued - dropped`.
    #[cold]
    #[inline(never)]
    fn dropped_inside(&mut self, p: Pkt, reason: crate::stats::ArbiterDrop) {
        let c = p.client as usize;
        let counters = &self.shared.counters[c];
        counters.arbiter.0.dropped[reason.slot()].add(1);
        counters.arbiter.0.enqueued.sub(1);
        counters.signal.0.drops.add(1);
        self.backend.discard(&[p]);
        self.ports[c].mailbox.release(1);
        self.tally.left += 1;
    }

    /// A drain found a backlog, the latest of it arrived at `t` (before the scan's `now`):
    /// releases what the links would have sent by then, within the lag window (see
    /// `EngineConfig::max_lag_ns`: the floor holds the links' clocks within it). The
    /// release's time may be earlier than an earlier scan's: each link's clock only moves
    /// forward, so a link that already sent past `t` just sends nothing, and a delay line
    /// keeps its packets in order (`DelayLines::push`).
    #[cold]
    fn catch_up(&mut self, t: u64, now: u64) {
        let t = t.min(now).max(now.saturating_sub(self.pace.max_lag_ns));
        let sent = self.release(t, u32::MAX);
        self.pace.caught_up += sent;
    }

    /// Block 2: release packets onto the emulated link while it is idle at `now`, at most
    /// `scan_batch` of them (the rest go on the next scan, after a look at the mailboxes).
    /// A drain's catch-up releases without that bound: what it releases is what the links
    /// would have sent over the scans the arbiter missed.
    fn release(&mut self, now: u64, scan_batch: u32) -> u32 {
        let mut sent = 0;
        if let Some(p) = self.out.stash.take() {
            if !self.out.push(p, &mut self.ports) {
                self.shared.arbiter_counters.0.tx_stalls.add(1);
                return 0;
            }
        }
        if !self.release_members(&mut sent) {
            return sent;
        }
        if !self.agg.enabled() {
            if let Output::Arbiter(tx) = &mut self.out.to {
                // The common case, one packet per decision and this thread sends: the
                // loop below without its per-packet tests of the mode.
                let first = sent;
                while sent < scan_batch {
                    let Some(mut p) = self.svc.dequeue(now) else {
                        break;
                    };
                    sent += 1;
                    self.svc.charge(&mut p);
                    count_departure(&mut self.ports, &mut self.tally.departing, &p);
                    tx.push(p);
                }
                self.tally.left += u64::from(sent - first);
                return sent;
            }
        }
        while sent < scan_batch {
            let Some(p) = self.svc.dequeue(now) else {
                break;
            };
            self.tally.left += 1;
            if self.agg.enabled() {
                // One decision, all of its members: they leave now, back to back.
                self.agg.dequeued(p.flow);
                if !self.release_members(&mut sent) {
                    break;
                }
            } else {
                sent += 1;
                if !self.depart(p) {
                    self.shared.arbiter_counters.0.tx_stalls.add(1);
                    break;
                }
            }
        }
        sent
    }

    /// Aggregation: hands on the members of the aggregate being released. Returns false
    /// if a full dispatcher mailbox stopped it (the rest stay pending).
    fn release_members(&mut self, sent: &mut u32) -> bool {
        while let Some(m) = self.agg.next_member() {
            *sent += 1;
            if !self.depart(m) {
                self.shared.arbiter_counters.0.tx_stalls.add(1);
                return false;
            }
        }
        true
    }

    /// One packet leaves the scheduler: charge the link, count it for its client (slots and
    /// counters settle at the scan's end), hand it on. Returns false if it was stashed.
    #[inline(always)]
    fn depart(&mut self, mut p: Pkt) -> bool {
        self.svc.charge(&mut p);
        count_departure(&mut self.ports, &mut self.tally.departing, &p);
        self.out.push(p, &mut self.ports)
    }

    /// Whether anything is waiting in the scheduler, the stash or an aggregate's release.
    fn has_backlog(&self) -> bool {
        !self.svc.is_empty() || self.out.stash.is_some() || self.agg.releasing()
    }

    /// The arbiter thread's loop, until a stop is requested (and, when asked, until
    /// everything queued is sent). Returns what the final report needs.
    pub(crate) fn run(mut self) -> ArbiterExit {
        let shared = Arc::clone(&self.shared);
        let parker = &shared.arbiter.0;
        parker.register_current();
        // The link starts now: no credit for the time before the engine ran.
        self.svc.start(clock::now_ns());
        let mut idle_since: Option<u64> = None;
        let stalls = &shared.arbiter_counters.0.stalls;
        stalls.restart(clock::now_ns());
        loop {
            let now = clock::now_ns();
            let outcome = self.scan(now, Deactivate::WhenDue);
            if let Some(drain) = self.shared.stopping() {
                if !drain || (!self.has_backlog() && self.mailboxes_empty()) {
                    break;
                }
            }
            if outcome.drained > 0 || outcome.sent > 0 {
                idle_since = None;
            }
            if self.has_backlog() {
                if self.out.stash.is_some() {
                    std::hint::spin_loop();
                    continue;
                }
                let wait = self.svc.wake_at_ns().saturating_sub(clock::now_ns());
                if wait >= self.pace.link_spin_ns && wait > 0 {
                    let ns = wait - SLEEP_EARLY_NS.min(wait / 2);
                    if self.svc.arrivals_may_leave_sooner() {
                        self.sleep_or_arrival(ns);
                    } else {
                        self.sleep_link(ns);
                    }
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let since = *idle_since.get_or_insert(now);
            if now - since < self.pace.spin_ns {
                std::hint::spin_loop();
                continue;
            }
            // Idle for T_w: announce the sleep, look once more, block.
            parker.prepare();
            self.drain.next_ns = 0;
            let again = self.scan(clock::now_ns(), Deactivate::Now);
            if again.drained > 0 || self.has_backlog() || self.shared.stopping().is_some() {
                parker.cancel();
                idle_since = None;
                continue;
            }
            let t0 = clock::now_ns();
            let c = &self.shared.arbiter_counters.0;
            c.idle_sleeps.add(1);
            // A voluntary wait is not a drain gap.
            stalls.wait_begins(t0);
            parker.sleep(Some(IDLE_BLOCK));
            let t1 = clock::now_ns();
            stalls.wait_ends(t1);
            c.slept_ns.add(t1 - t0);
            idle_since = None;
        }
        if let Output::Arbiter(tx) = &mut self.out.to {
            tx.finish();
        }
        ArbiterExit {
            service: self.svc.summary(),
            stashed: self.out.stash.is_some(),
            members_left: self.agg.members_left(),
            send_error: match &self.out.to {
                Output::Arbiter(tx) => tx.last_error.clone(),
                _ => None,
            },
        }
    }

    /// Waits `ns` for the link to be free, or less if a stop request or a control
    /// unparks the arbiter: at 1 bit/s a 64 KB packet keeps the link busy for six days,
    /// which no stop, reconfiguration or statistics request may wait for. A nap, not an
    /// announced sleep: a client's packet cannot leave before the link is free, so
    /// clients' wake-ups need not (and do not) end it. The caller's loop checks for a
    /// stop after every scan, and the stop's unpark comes after its flag, so a stop
    /// requested after that check ends the nap at once (`Parker::nap`, loom-checked). A
    /// nap cut short by an unpark meant for an earlier sleep only costs a scan.
    fn sleep_link(&self, ns: u64) {
        let t0 = clock::now_ns();
        let c = &self.shared.arbiter_counters.0;
        c.link_sleeps.add(1);
        // A voluntary wait is not a drain gap.
        c.stalls.wait_begins(t0);
        self.shared.arbiter.0.nap(Duration::from_nanos(ns));
        let t1 = clock::now_ns();
        c.stalls.wait_ends(t1);
        c.slept_ns.add(t1 - t0);
    }

    /// Waits up to `ns` for a link or a delay line to be due, or until a client pushes a
    /// packet (which may leave sooner: [`Service::arrivals_may_leave_sooner`]): an
    /// announced sleep (`wake.rs`), with the re-check a scan that drains and releases.
    fn sleep_or_arrival(&mut self, ns: u64) {
        let shared = Arc::clone(&self.shared);
        let parker = &shared.arbiter.0;
        parker.prepare();
        self.drain.next_ns = 0;
        let again = self.scan(clock::now_ns(), Deactivate::WhenDue);
        if again.drained > 0 || again.sent > 0 || self.shared.stopping().is_some() {
            parker.cancel();
            return;
        }
        let t0 = clock::now_ns();
        let c = &shared.arbiter_counters.0;
        c.link_sleeps.add(1);
        // A voluntary wait is not a drain gap.
        c.stalls.wait_begins(t0);
        parker.sleep(Some(Duration::from_nanos(ns)));
        let t1 = clock::now_ns();
        c.stalls.wait_ends(t1);
        c.slept_ns.add(t1 - t0);
    }

    /// Whether every client mailbox is empty (for a draining stop).
    fn mailboxes_empty(&self) -> bool {
        self.ports.iter().all(|p| !p.mailbox.has_message())
    }
}

impl Outlet {
    /// Client hand-off mode: clients give their mailbox slots back themselves, after
    /// sending.
    #[inline(always)]
    fn client_mode(&self) -> bool {
        matches!(self.to, Output::Clients { .. })
    }

    /// Hands a packet to its output; stashes it if a dispatcher or return mailbox is full
    /// (returns false then).
    #[inline(always)]
    fn push(&mut self, p: Pkt, ports: &mut [ClientPort]) -> bool {
        match &mut self.to {
            Output::Arbiter(tx) => {
                tx.push(p);
                true
            }
            Output::Dispatchers { mailboxes, touched } => {
                let d = p.client as usize % mailboxes.len();
                touched[d] = true;
                match mailboxes[d].push(p) {
                    Ok(()) => true,
                    Err(p) => {
                        self.stash = Some(p);
                        false
                    }
                }
            }
            Output::Clients { touched } => {
                let c = p.client as usize;
                let port = &mut ports[c];
                let cleared = port
                    .cleared
                    .as_mut()
                    .expect("client mode has return mailboxes");
                // Cannot fail: the return mailbox is twice the client mailbox, and a
                // client has at most a mailbox's worth of packets not yet drained.
                if cleared.push(p).is_err() {
                    self.stash = Some(p);
                    return false;
                }
                if !port.touched {
                    // Once per client per scan: within the capacity reserved.
                    port.touched = true;
                    touched.push(p.client);
                }
                true
            }
        }
    }

    /// Block 3: send, or notify the dispatchers / clients that received packets.
    fn hand_off(&mut self, shared: &Shared, ports: &mut [ClientPort]) {
        match &mut self.to {
            Output::Arbiter(tx) => tx.flush(),
            Output::Dispatchers { touched, .. } => {
                if touched.iter().any(|&t| t) {
                    publish_fence();
                    for (d, t) in touched.iter_mut().enumerate() {
                        if std::mem::take(t) {
                            shared.dispatchers[d].0.wake();
                        }
                    }
                }
            }
            Output::Clients { touched } => {
                if !touched.is_empty() {
                    publish_fence();
                    for c in touched.drain(..) {
                        ports[c as usize].touched = false;
                        shared.clients[c as usize].0.wake();
                    }
                }
            }
        }
    }
}

/// Counts a packet that left the scheduler against its client; the client's slots and
/// counters settle at the scan's end ([`Arbiter::release_slots`]).
#[inline(always)]
fn count_departure(ports: &mut [ClientPort], departing: &mut Vec<u32>, p: &Pkt) {
    let port = &mut ports[p.client as usize];
    if port.departed == 0 {
        // At most once per client per scan: within the capacity reserved.
        departing.push(p.client);
    }
    port.departed += 1;
    port.departed_bytes += u64::from(p.len);
}

/// What the arbiter thread returns.
pub(crate) struct ArbiterExit {
    pub(crate) service: ServiceSummary,
    pub(crate) stashed: bool,
    pub(crate) members_left: u64,
    pub(crate) send_error: Option<String>,
}
