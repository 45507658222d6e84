//! Run-time reconfiguration: changes handed to a running arbiter without stopping it.
//!
//! The controller (any thread holding the [`crate::Engine`]) queues a [`Change`] with a
//! reply channel, raises a flag and wakes the arbiter; the arbiter looks at the flag once
//! per scan (one Acquire load on the data path: no lock) and applies the queued changes
//! between two scans, so a change never lands in the middle of a decision. Only the
//! controller side and the arbiter's rare take of the queue touch the mutex, which guards
//! the queue of changes, never packets.
//!
//! The same queue carries requests for statistics only the arbiter can build (the
//! per-instance and per-queue counters of a dummynet-style configuration,
//! [`crate::dnstats`]): answered between two scans as well, on the request's own channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use pspat_sched::FlowParams;

use crate::dnstats::DummynetStats;

/// A change to a running engine.
#[derive(Clone, Debug)]
pub enum Change {
    /// The emulated link's new rate, bit/s (0 = unlimited). Packets already charged to the
    /// link keep their departure times; the next one is charged at the new rate.
    Rate(u64),
    /// New parameters (weight, limits, maximum length) for a flow, by its index in
    /// [`crate::EngineConfig::flows`]. Packets already queued stay queued.
    Flow {
        /// Index in the engine's flow list.
        index: usize,
        /// The new parameters.
        params: FlowParams,
    },
    /// A new dummynet-style configuration (rates, weights, masks, rules and tables), for an
    /// engine started with one; see `dummynet.rs` for what may change.
    /// [`crate::Engine::reconfigure`] compiles it on the caller's thread and hands the
    /// arbiter a [`Change::Plan`].
    Config(Arc<pspat_config::Config>),
    /// A compiled dummynet-style configuration.
    Plan(Arc<pspat_config::classify::Classifier>),
}

/// A queued request and where its answer goes.
pub(crate) enum Pending {
    /// A change to apply; its outcome.
    Change(Change, mpsc::Sender<Result<(), String>>),
    /// A snapshot of a dummynet-style configuration's statistics.
    DummynetStats(mpsc::Sender<Result<DummynetStats, String>>),
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pending::Change(c, _) => f.debug_tuple("Change").field(c).finish(),
            Pending::DummynetStats(_) => f.write_str("DummynetStats"),
        }
    }
}

/// The queue of changes between the controller and the arbiter.
#[derive(Debug, Default)]
pub(crate) struct ControlBox {
    /// Set when `queue` holds something.
    flag: AtomicBool,
    queue: Mutex<Vec<Pending>>,
}

impl ControlBox {
    /// Queues a change; the caller then wakes the arbiter.
    pub(crate) fn push(&self, change: Change) -> mpsc::Receiver<Result<(), String>> {
        let (tx, rx) = mpsc::channel();
        self.enqueue(Pending::Change(change, tx));
        rx
    }

    /// Queues a request for the dummynet statistics; the caller then wakes the arbiter.
    pub(crate) fn push_stats_request(&self) -> mpsc::Receiver<Result<DummynetStats, String>> {
        let (tx, rx) = mpsc::channel();
        self.enqueue(Pending::DummynetStats(tx));
        rx
    }

    fn enqueue(&self, p: Pending) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push(p);
        // ORDERING: Release, under the lock: the arbiter's Acquire load that sees the flag
        // then takes the lock and finds the change (the lock orders the queue itself; the
        // flag only spares the arbiter the lock when nothing is queued).
        self.flag.store(true, Ordering::Release);
    }

    /// The arbiter's per-scan check: whether anything is queued.
    #[inline]
    pub(crate) fn pending(&self) -> bool {
        // ORDERING: Acquire pairs with the Release in `push`. A change queued just after
        // this load returned false is seen on the next scan (the controller also wakes
        // the arbiter, so a sleeping arbiter does not delay it).
        self.flag.load(Ordering::Acquire)
    }

    /// Takes every queued request (arbiter side, when `pending`).
    pub(crate) fn take(&self) -> Vec<Pending> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        // ORDERING: Relaxed under the lock: a `push` after this take sets it again.
        self.flag.store(false, Ordering::Relaxed);
        std::mem::take(&mut *q)
    }
}
