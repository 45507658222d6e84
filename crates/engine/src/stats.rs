//! Per-client counters, shared between the threads of an engine without false sharing.
//!
//! Each block of counters has exactly one writer thread, so a counter is bumped with a
//! plain load + store (no read-modify-write), and lives on its own cache lines:
//!
//! - [`ClientSide`]: written by the client (submissions, full mailbox);
//! - [`ArbiterSide`]: written by the arbiter (enqueued, scheduled, drops by reason);
//! - [`DropSignal`]: written by the arbiter on a drop only, read by the client on every
//!   submit (the backpressure flag of PSPAT section 3.1), so its line stays shared-clean;
//! - [`TxSide`]: written by the one thread that transmits this client's packets (the
//!   arbiter, dispatcher `client % T`, or the client itself).
//!
//! Readers (the live table, the final report) load with `Relaxed`: a snapshot is a set of
//! monotonic counters taken at slightly different instants, which is what `tc -s` shows.

use std::sync::atomic::{AtomicU64, Ordering};

use pspat_sched::DropReason;

/// A counter with a single writer thread.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning thread may call this.
    #[inline(always)]
    pub fn add(&self, n: u64) {
        // ORDERING: Relaxed load + store: one writer, so no update is lost; readers only
        // need some recent value.
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
    /// Subtracts `n` (for gauges). Only the owning thread may call this.
    #[inline(always)]
    pub fn sub(&self, n: u64) {
        // ORDERING: as in `add`.
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_sub(n),
            Ordering::Relaxed,
        );
    }
    /// The current value.
    #[inline(always)]
    pub fn get(&self) -> u64 {
        // ORDERING: Relaxed, see the module docs.
        self.0.load(Ordering::Relaxed)
    }
}

/// Keeps its content on its own pair of cache lines (the adjacent-line prefetcher pulls
/// lines in pairs on x86, hence 128 bytes, as crossbeam's `CachePadded`).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Padded<T>(pub T);

/// Written by the client.
#[derive(Debug, Default)]
pub struct ClientSide {
    /// Packets accepted into the mailbox.
    pub submitted: Counter,
    /// Bytes accepted into the mailbox.
    pub submitted_bytes: Counter,
    /// Submissions refused because the mailbox was full (immediate backpressure).
    pub mailbox_full: Counter,
    /// Client hand-off mode: cleared packets this client transmitted (the arbiter reads it
    /// to give the mailbox slots back).
    pub drained: Counter,
    /// Dummynet-style configurations: packets the classifier dropped on this client, by
    /// [`Filtered::slot`].
    pub filtered: [Counter; Filtered::COUNT],
}

/// Why a client's classifier (stage 1) dropped a packet before it reached the mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Filtered {
    /// The frame did not parse.
    Malformed,
    /// A `deny` rule matched.
    Denied,
    /// No rule matched and the default action is `deny`.
    NoRule,
    /// A `tablearg` rule found a table value that names no flowset or pipe.
    BadTablearg,
    /// `one_pass 0`: the rules sent it through more pipes and queues than a packet may
    /// cross (`pspat_config::classify::MAX_HOPS`).
    TooManyHops,
}

impl Filtered {
    /// Number of reasons.
    pub const COUNT: usize = 5;
    /// Every reason, in slot order.
    pub const ALL: [Filtered; Filtered::COUNT] = [
        Filtered::Malformed,
        Filtered::Denied,
        Filtered::NoRule,
        Filtered::BadTablearg,
        Filtered::TooManyHops,
    ];
    /// Its counter slot.
    pub fn slot(self) -> usize {
        self as usize
    }
    /// A short name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Filtered::Malformed => "malformed",
            Filtered::Denied => "denied",
            Filtered::NoRule => "no_rule",
            Filtered::BadTablearg => "bad_tablearg",
            Filtered::TooManyHops => "too_many_hops",
        }
    }
    /// The reason of a stage-1 drop.
    pub fn of(cause: pspat_config::classify::DropCause) -> Self {
        use pspat_config::classify::DropCause as C;
        match cause {
            C::Malformed(_) => Filtered::Malformed,
            C::DeniedByRule(_) => Filtered::Denied,
            C::NoRuleMatched => Filtered::NoRule,
            C::TableargUnknown { .. } => Filtered::BadTablearg,
            C::TooManyHops { .. } => Filtered::TooManyHops,
        }
    }
}

/// Written by the arbiter: `enqueued` once per client per drain, `scheduled` and
/// `scheduled_bytes` once per client per scan, the drops per packet.
#[derive(Debug, Default)]
pub struct ArbiterSide {
    /// Packets taken from the mailbox into the scheduler, less those it dropped later (at a
    /// later hop of a chained pipe: they count in `dropped`).
    pub enqueued: Counter,
    /// Packets released by the scheduler onto the emulated link.
    pub scheduled: Counter,
    /// Bytes released by the scheduler onto the emulated link.
    pub scheduled_bytes: Counter,
    /// Packets the arbiter refused, by [`ArbiterDrop::slot`].
    pub dropped: [Counter; ArbiterDrop::COUNT],
}

/// Written by the arbiter when it drops a packet of this client; read by the client.
#[derive(Debug, Default)]
pub struct DropSignal {
    /// Total drops decided by the scheduler for this client.
    pub drops: Counter,
}

/// Written by the thread that transmits this client's packets.
#[derive(Debug, Default)]
pub struct TxSide {
    /// Packets handed to the backend.
    pub sent: Counter,
    /// Bytes handed to the backend.
    pub sent_bytes: Counter,
    /// Packets the backend refused (each counted once, as a drop with reason `send_error`).
    pub send_failed: Counter,
}

/// All counters of one client.
#[derive(Debug, Default)]
pub struct ClientCounters {
    /// Client-written.
    pub client: Padded<ClientSide>,
    /// Arbiter-written, per packet.
    pub arbiter: Padded<ArbiterSide>,
    /// Arbiter-written, on drops.
    pub signal: Padded<DropSignal>,
    /// Transmitter-written.
    pub tx: Padded<TxSide>,
}

/// A consistent-enough copy of one client's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientSnapshot {
    /// Packets accepted into the mailbox.
    pub submitted: u64,
    /// Bytes accepted into the mailbox.
    pub submitted_bytes: u64,
    /// Submissions refused because the mailbox was full.
    pub mailbox_full: u64,
    /// Packets the client's classifier dropped, by [`Filtered::slot`].
    pub filtered: [u64; Filtered::COUNT],
    /// Packets moved into the scheduler.
    pub enqueued: u64,
    /// Packets released onto the emulated link.
    pub scheduled: u64,
    /// Bytes released onto the emulated link.
    pub scheduled_bytes: u64,
    /// Arbiter drops, by [`ArbiterDrop::slot`].
    pub dropped: [u64; ArbiterDrop::COUNT],
    /// Packets handed to the backend.
    pub sent: u64,
    /// Bytes handed to the backend.
    pub sent_bytes: u64,
    /// Packets the backend refused.
    pub send_failed: u64,
}

impl ClientSnapshot {
    /// Scheduler drops, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
    /// Scheduler drops for one reason.
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        self.dropped[ArbiterDrop::Sched(reason).slot()]
    }
    /// Arbiter drops for one cause.
    pub fn dropped_by(&self, cause: ArbiterDrop) -> u64 {
        self.dropped[cause.slot()]
    }
}

impl ClientCounters {
    /// Reads every counter. Each read is exact, but the counters are read one after the
    /// other while their writers run: a live snapshot may count what is being published
    /// in one counter of a pair (`scheduled`, `scheduled_bytes`) and not yet in the other:
    /// one packet under the lock-based baseline, one scan's worth (at most
    /// `EngineConfig::scan_batch` packets) for the arbiter, which publishes per scan.
    /// Once the engine has stopped, the snapshot is exact.
    pub fn snapshot(&self) -> ClientSnapshot {
        let (c, a, t) = (&self.client.0, &self.arbiter.0, &self.tx.0);
        ClientSnapshot {
            submitted: c.submitted.get(),
            submitted_bytes: c.submitted_bytes.get(),
            mailbox_full: c.mailbox_full.get(),
            filtered: std::array::from_fn(|i| c.filtered[i].get()),
            enqueued: a.enqueued.get(),
            scheduled: a.scheduled.get(),
            scheduled_bytes: a.scheduled_bytes.get(),
            dropped: std::array::from_fn(|i| a.dropped[i].get()),
            sent: t.sent.get(),
            sent_bytes: t.sent_bytes.get(),
            send_failed: t.send_failed.get(),
        }
    }
}

/// Why the arbiter dropped a packet: the scheduler refused it, or (dummynet-style
/// configurations) the queue or scheduler instance it needed could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArbiterDrop {
    /// The scheduling algorithm refused it (queue full, too long, ...).
    Sched(DropReason),
    /// Its flowset already has `max_queues` queues in this instance.
    QueueLimit,
    /// Its scheduler already has `max_instances` instances.
    InstanceLimit,
    /// Its class (flowset or pipe) is not in the current configuration (removed by a
    /// reconfiguration while the packet was in a mailbox).
    NoClass,
    /// Lost on purpose: its queue emulates random loss (dummynet's `plr`).
    Plr,
    /// Dropped early by its queue's RED or GRED.
    Red,
}

impl ArbiterDrop {
    /// Number of causes (counter slots).
    pub const COUNT: usize = DropReason::COUNT + 5;

    /// Every cause, in slot order.
    pub fn all() -> [ArbiterDrop; ArbiterDrop::COUNT] {
        std::array::from_fn(|i| match i.checked_sub(DropReason::COUNT) {
            None => ArbiterDrop::Sched(DropReason::ALL[i]),
            Some(0) => ArbiterDrop::QueueLimit,
            Some(1) => ArbiterDrop::InstanceLimit,
            Some(2) => ArbiterDrop::NoClass,
            Some(3) => ArbiterDrop::Plr,
            Some(_) => ArbiterDrop::Red,
        })
    }

    /// Its counter slot.
    pub fn slot(self) -> usize {
        match self {
            ArbiterDrop::Sched(r) => reason_slot(r),
            ArbiterDrop::QueueLimit => DropReason::COUNT,
            ArbiterDrop::InstanceLimit => DropReason::COUNT + 1,
            ArbiterDrop::NoClass => DropReason::COUNT + 2,
            ArbiterDrop::Plr => DropReason::COUNT + 3,
            ArbiterDrop::Red => DropReason::COUNT + 4,
        }
    }

    /// A short name for tables and JSON (`queue_limit`, ...).
    pub fn name(self) -> String {
        match self {
            ArbiterDrop::Sched(r) => r.to_string(),
            ArbiterDrop::QueueLimit => "queue_limit".into(),
            ArbiterDrop::InstanceLimit => "instance_limit".into(),
            ArbiterDrop::NoClass => "no_class".into(),
            ArbiterDrop::Plr => "plr".into(),
            ArbiterDrop::Red => "red".into(),
        }
    }
}

/// Index of a drop reason in [`ArbiterSide::dropped`].
pub fn reason_slot(reason: DropReason) -> usize {
    DropReason::ALL
        .iter()
        .position(|r| *r == reason)
        .expect("every DropReason is in ALL")
}
