//! The shaper's own counters, beyond the engine's: what each receiving thread and the
//! reverse path saw ([`RxCounters`], [`ReverseCounters`], written by one thread each), and
//! their sums at one instant ([`RxTotals`], [`ReverseTotals`]), with the engine's counters
//! summed over clients ([`EngineTotals`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pspat_engine::stats::{ArbiterDrop, Filtered};
use pspat_engine::EngineSnapshot;

/// Why a received frame never reached the scheduler, beyond what the engine counts itself
/// (rule drops, malformed frames and full mailboxes are counted by the engine).
///
/// Each field is written by its receiving thread only (`fetch_add`, Relaxed) and read by
/// whoever takes a snapshot (Relaxed): statistics, ordered with nothing. A snapshot taken
/// while frames arrive may see one counter of a frame and not yet another.
#[derive(Debug, Default)]
pub(crate) struct RxCounters {
    /// Frames taken from the ring.
    pub frames: AtomicU64,
    /// Their bytes.
    pub bytes: AtomicU64,
    /// Frames whose TCP/UDP checksum the shaper completed (sent by a local socket through
    /// checksum offload, see `pspat_io::afpacket::csum`), without a virtio-net header.
    pub csum_completed: AtomicU64,
    /// Frames whose checksum was still partial and went on partial, with their offload
    /// state in the virtio-net header (see `pspat_io::afpacket::vnet`).
    pub csum_passed: AtomicU64,
    /// Captured shorter than on the wire (the ring's frames are too small).
    pub truncated: AtomicU64,
    /// Shorter than an Ethernet header.
    pub runt: AtomicU64,
    /// Longer than the output interface can send (its MTU and Ethernet header, and 4
    /// bytes more when the outermost tag is 802.1Q: see `image.rs`).
    pub too_long: AtomicU64,
    /// No free frame slot (every slot holds a queued frame).
    pub pool_full: AtomicU64,
    /// Refused by the engine because it is stopping.
    pub stopped: AtomicU64,
    /// The kernel's count of frames the ring had no room for (PACKET_STATISTICS).
    pub ring_drops: AtomicU64,
}

/// Adds `n` to a counter its thread owns.
pub(crate) fn add(c: &AtomicU64, n: u64) {
    // ORDERING: Relaxed: statistics; pairs with the Relaxed load in `get`, nothing else
    // is published through it.
    c.fetch_add(n, Ordering::Relaxed);
}

/// Reads a counter.
pub(crate) fn get(c: &AtomicU64) -> u64 {
    // ORDERING: Relaxed: statistics; pairs with the Relaxed `fetch_add` in `add`.
    c.load(Ordering::Relaxed)
}

/// What the reverse path passed. Written by the reverse thread, read by snapshots; both
/// Relaxed (statistics).
#[derive(Debug, Default)]
pub(crate) struct ReverseCounters {
    /// Frames passed back.
    pub frames: AtomicU64,
    /// Frames that could not be sent.
    pub failed: AtomicU64,
}

/// The receiving threads' counters summed, at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxTotals {
    /// Frames taken from the rings.
    pub frames: u64,
    /// Their bytes (as on the wire).
    pub bytes: u64,
    /// Captured shorter than on the wire.
    pub truncated: u64,
    /// Shorter than an Ethernet header.
    pub runt: u64,
    /// Checksums finished in software.
    pub csum_completed: u64,
    /// Checksums passed on partial (in the virtio-net header).
    pub csum_passed: u64,
    /// Longer than the output sends.
    pub too_long: u64,
    /// No free frame slot.
    pub pool_full: u64,
    /// Refused because the engine was stopping.
    pub stopped: u64,
    /// Lost in the kernel's ring (PACKET_STATISTICS).
    pub ring_drops: u64,
}

impl RxTotals {
    pub(crate) fn of(counters: &[Arc<RxCounters>]) -> Self {
        let mut t = RxTotals::default();
        for c in counters {
            t.frames += get(&c.frames);
            t.bytes += get(&c.bytes);
            t.truncated += get(&c.truncated);
            t.runt += get(&c.runt);
            t.csum_completed += get(&c.csum_completed);
            t.csum_passed += get(&c.csum_passed);
            t.too_long += get(&c.too_long);
            t.pool_full += get(&c.pool_full);
            t.stopped += get(&c.stopped);
            t.ring_drops += get(&c.ring_drops);
        }
        t
    }
}

/// The reverse path's counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReverseTotals {
    /// Frames passed from the output interface back to the input one.
    pub frames: u64,
    /// Frames that could not be passed.
    pub failed: u64,
}

impl ReverseTotals {
    pub(crate) fn of(c: &ReverseCounters) -> Self {
        ReverseTotals {
            frames: get(&c.frames),
            failed: get(&c.failed),
        }
    }
}

/// The engine's counters summed over clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineTotals {
    /// Frames accepted into the mailboxes.
    pub submitted: u64,
    /// Frames refused by full mailboxes.
    pub mailbox_full: u64,
    /// Frames the rules dropped, by [`Filtered::slot`].
    pub filtered: [u64; Filtered::COUNT],
    /// Frames the arbiter dropped, by [`ArbiterDrop::slot`].
    pub dropped: [u64; ArbiterDrop::COUNT],
    /// Frames sent.
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Frames the output refused.
    pub send_failed: u64,
}

impl EngineTotals {
    /// Sums `s` over its clients.
    pub fn of(s: &EngineSnapshot) -> Self {
        let mut t = EngineTotals::default();
        for c in &s.clients {
            t.submitted += c.submitted;
            t.mailbox_full += c.mailbox_full;
            for i in 0..Filtered::COUNT {
                t.filtered[i] += c.filtered[i];
            }
            for i in 0..ArbiterDrop::COUNT {
                t.dropped[i] += c.dropped[i];
            }
            t.sent += c.sent;
            t.sent_bytes += c.sent_bytes;
            t.send_failed += c.send_failed;
        }
        t
    }
}
