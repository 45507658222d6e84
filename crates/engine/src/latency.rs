//! Submit-to-transmit latency of chosen clients (the "victims"), as HDR histograms.
//!
//! The thread that transmits a client's packets records into its own histogram (no sharing
//! on the data path) and every [`PUBLISH_NS`] adds it into the client's shared histogram,
//! which readers (the live table, the final report) lock. The lock is taken a few times per
//! second per transmitting thread, never per packet.

use std::sync::{Arc, Mutex, PoisonError};

use hdrhistogram::Histogram;

/// How often a recorder publishes into the shared histograms, in ns.
pub const PUBLISH_NS: u64 = 50_000_000;

/// Highest latency recorded exactly: 100 s (larger values saturate).
const MAX_NS: u64 = 100_000_000_000;

/// Precision: two significant digits (values within 1%). Three made each histogram about
/// 400 KB, and the arbiter, which publishes its own every [`PUBLISH_NS`], spent about
/// 230,000 instructions zeroing and adding it each time: a stall of the mailbox drains on
/// every publish (docs/PERFORMANCE.md, "drain gaps, and what sets the victim's p99").
const SIGNIFICANT_DIGITS: u8 = 2;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Shared, per-client histograms; `None` for clients whose latency is not tracked.
pub struct LatencyBoard {
    slots: Vec<Option<Mutex<Histogram<u64>>>>,
}

impl LatencyBoard {
    /// Histograms for the clients where `tracked[c]` is true.
    pub fn new(tracked: &[bool]) -> Self {
        Self {
            slots: tracked
                .iter()
                .map(|&t| t.then(|| Mutex::new(histogram())))
                .collect(),
        }
    }

    /// A copy of client `c`'s published histogram, if its latency is tracked.
    pub fn snapshot(&self, c: usize) -> Option<Histogram<u64>> {
        let m = self.slots.get(c)?.as_ref()?;
        Some(m.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// Whether client `c`'s latency is tracked.
    pub fn is_tracked(&self, c: usize) -> bool {
        matches!(self.slots.get(c), Some(Some(_)))
    }
}

/// One transmitting thread's private histograms.
pub struct LatencyRecorder {
    board: Arc<LatencyBoard>,
    local: Vec<Option<Histogram<u64>>>,
    any: bool,
    next_publish_ns: u64,
}

impl LatencyRecorder {
    /// A recorder for every tracked client of `board`.
    pub fn new(board: Arc<LatencyBoard>) -> Self {
        let local: Vec<_> = board
            .slots
            .iter()
            .map(|s| s.as_ref().map(|_| histogram()))
            .collect();
        let any = local.iter().any(Option::is_some);
        Self {
            board,
            local,
            any,
            next_publish_ns: 0,
        }
    }

    /// Whether any client's latency is tracked (else [`Self::record`] does nothing).
    #[inline]
    pub fn tracks_any(&self) -> bool {
        self.any
    }

    /// Records `ns` for client `c` if it is tracked.
    #[inline]
    pub fn record(&mut self, c: u32, ns: u64) {
        if !self.any {
            return;
        }
        if let Some(Some(h)) = self.local.get_mut(c as usize) {
            h.saturating_record(ns.max(1));
        }
    }

    /// Publishes into the board if [`PUBLISH_NS`] passed since the last time (or `force`).
    #[inline]
    pub fn maybe_publish(&mut self, now_ns: u64, force: bool) {
        if !self.any || (!force && now_ns < self.next_publish_ns) {
            return;
        }
        self.next_publish_ns = now_ns + PUBLISH_NS;
        for (local, shared) in self.local.iter_mut().zip(&self.board.slots) {
            if let (Some(l), Some(s)) = (local, shared) {
                if !l.is_empty() {
                    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
                    // Same bounds on both sides: `add` cannot fail.
                    let _ = s.add(&*l);
                    l.reset();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_tracked_clients_and_publishes() {
        let board = Arc::new(LatencyBoard::new(&[false, true]));
        let mut r = LatencyRecorder::new(Arc::clone(&board));
        r.record(0, 500);
        r.record(1, 1_000);
        r.record(1, 3_000);
        r.record(7, 3_000); // unknown client: ignored
        assert_eq!(board.snapshot(1).unwrap().len(), 0, "not published yet");
        r.maybe_publish(0, false);
        let h = board.snapshot(1).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h.equivalent(h.max(), 3_000), "max {}", h.max());
        assert!(board.snapshot(0).is_none());
        r.record(1, 2_000);
        r.maybe_publish(1, false); // too soon
        assert_eq!(board.snapshot(1).unwrap().len(), 2);
        r.maybe_publish(1, true);
        assert_eq!(board.snapshot(1).unwrap().len(), 3);
    }
}
