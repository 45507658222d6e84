//! State shared by every thread of one engine.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;
use pspat_config::classify::Classifier;

use crate::activity::Activity;
use crate::client::OwnTx;
use crate::control::ControlBox;
use crate::keyring::KeyRings;
use crate::latency::LatencyBoard;
use crate::stall::StallCounters;
use crate::stats::{ClientCounters, Counter, Padded};
use crate::wake::Parker;

/// Arbiter-wide counters (arbiter-written).
#[derive(Debug, Default)]
pub struct ArbiterCounters {
    /// Calls of `do_scan`.
    pub scans: Counter,
    /// Scans that read the client mailboxes (at most one per Delta_A).
    pub drains: Counter,
    /// Times the arbiter blocked because it had no work (after spinning T_w).
    pub idle_sleeps: Counter,
    /// Times the arbiter slept until the emulated link was idle.
    pub link_sleeps: Counter,
    /// Packets currently in the scheduler.
    pub sched_backlog: Counter,
    /// Scans that could not hand a packet to a full dispatcher mailbox.
    pub tx_stalls: Counter,
    /// Nanoseconds the arbiter spent blocked (idle sleeps and link sleeps).
    pub slept_ns: Counter,
    /// Clients whose activity bit was cleared after an idle period.
    pub deactivations: Counter,
    /// Heavy fences paid for those deactivations (one per batch).
    pub deactivation_fences: Counter,
    /// Long intervals between two mailbox drains (see [`crate::stall`]).
    pub stalls: StallCounters,
}

/// Client hand-off mode: the transmit ends (return mailbox and sender) of clients dropped
/// while the arbiter may still clear packets to them, kept for the engine's stop to
/// transmit what came after their last drain. Taken under a lock, which is off the data
/// path: once per client drop and once per engine stop.
#[derive(Default)]
pub(crate) struct Departed {
    /// The arbiter thread has been joined: nothing more is cleared to anyone.
    arbiter_stopped: bool,
    /// The ends of the clients dropped before that.
    ends: Vec<OwnTx>,
}

/// Everything the threads of an engine share.
pub struct Shared {
    /// Which clients the arbiter must visit.
    pub activity: Activity,
    /// The arbiter's sleep flag.
    pub arbiter: Padded<Parker>,
    /// Per-client sleep flags (client hand-off mode: clients wait for cleared packets).
    pub clients: Box<[Padded<Parker>]>,
    /// Per-dispatcher sleep flags.
    pub dispatchers: Box<[Padded<Parker>]>,
    /// Per-client counters.
    pub counters: Arc<[ClientCounters]>,
    /// Per-arbiter counters.
    pub arbiter_counters: Padded<ArbiterCounters>,
    /// Latency histograms of tracked clients.
    pub latency: Arc<LatencyBoard>,
    /// Run-time changes waiting for the arbiter.
    pub(crate) control: ControlBox,
    /// Dummynet-style configurations: the classifier clients run (stage 1), swapped on a
    /// reconfiguration, and its generation (clients reload when it moves).
    pub(crate) classifier: ArcSwapOption<Classifier>,
    pub(crate) classifier_gen: AtomicU64,
    /// Dummynet-style configurations: every client's key ring.
    pub(crate) keys: Arc<KeyRings>,
    /// Client hand-off: the transmit ends of departed clients.
    departed: Mutex<Departed>,
    /// Set to stop every thread.
    stop: AtomicBool,
    /// Set with `stop` when the arbiter must first send everything queued.
    drain_on_stop: AtomicBool,
}

impl Shared {
    pub(crate) fn new(
        clients: usize,
        dispatchers: usize,
        tracked: &[bool],
        classifier: Option<Arc<Classifier>>,
        key_entries: usize,
    ) -> Self {
        Self {
            activity: Activity::new(clients),
            arbiter: Padded(Parker::new()),
            clients: (0..clients).map(|_| Padded(Parker::new())).collect(),
            dispatchers: (0..dispatchers).map(|_| Padded(Parker::new())).collect(),
            counters: (0..clients).map(|_| ClientCounters::default()).collect(),
            arbiter_counters: Padded(ArbiterCounters::default()),
            latency: Arc::new(LatencyBoard::new(tracked)),
            control: ControlBox::default(),
            classifier: ArcSwapOption::new(classifier),
            classifier_gen: AtomicU64::new(0),
            keys: Arc::new(KeyRings::new(clients, key_entries)),
            departed: Mutex::new(Departed::default()),
            stop: AtomicBool::new(false),
            drain_on_stop: AtomicBool::new(false),
        }
    }

    /// Client hand-off: takes the transmit end of a client being dropped, which has just
    /// transmitted what was cleared to it. While the arbiter runs, it may clear more to
    /// it: the end is kept for [`Shared::transmit_departed`]. Once the arbiter has stopped
    /// nothing more comes, except what it cleared between the client's last look and its
    /// exit: transmitted here, at once.
    pub(crate) fn adopt(&self, mut own: OwnTx) {
        let mut departed = self.departed.lock().unwrap_or_else(PoisonError::into_inner);
        if departed.arbiter_stopped {
            drop(departed);
            own.transmit_waiting();
            own.tx.finish();
        } else {
            departed.ends.push(own);
        }
    }

    /// Client hand-off: after the arbiter thread was joined, transmits what it cleared to
    /// clients already dropped, on their own senders, so that everything the link released
    /// is sent or counted as failed. The join orders the arbiter's last pushes before the
    /// pops here; clients dropped later transmit their own ([`Shared::adopt`]).
    pub(crate) fn transmit_departed(&self) {
        let ends = {
            let mut departed = self.departed.lock().unwrap_or_else(PoisonError::into_inner);
            departed.arbiter_stopped = true;
            std::mem::take(&mut departed.ends)
        };
        for mut own in ends {
            own.transmit_waiting();
            own.tx.finish();
        }
    }

    /// Asks every thread to stop; with `drain`, the arbiter first sends what is queued.
    pub(crate) fn request_stop(&self, drain: bool) {
        // ORDERING: Relaxed for the mode, published by the Release store of `stop`.
        self.drain_on_stop.store(drain, Ordering::Relaxed);
        // ORDERING: Release pairs with the Acquire in `stopping`.
        self.stop.store(true, Ordering::Release);
        self.arbiter.0.unpark();
        for p in self.dispatchers.iter().chain(self.clients.iter()) {
            p.0.unpark();
        }
    }

    /// Publishes a new classifier to the clients (after the arbiter accepted its plan).
    pub(crate) fn publish_classifier(&self, c: Arc<Classifier>) {
        self.classifier.store(Some(c));
        // ORDERING: Release after the store: a client that sees the new generation
        // (Acquire) then loads the new classifier.
        self.classifier_gen.fetch_add(1, Ordering::Release);
    }

    /// Whether a stop was requested, and whether it asks to drain first.
    #[inline]
    pub(crate) fn stopping(&self) -> Option<bool> {
        // ORDERING: Acquire pairs with the Release in `request_stop`.
        if self.stop.load(Ordering::Acquire) {
            // ORDERING: Relaxed, ordered by the Acquire above.
            Some(self.drain_on_stop.load(Ordering::Relaxed))
        } else {
            None
        }
    }
}
