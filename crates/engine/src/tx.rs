//! The transmit end shared by all hand-off modes: batches packets into a backend
//! [`Sender`], and accounts each packet as sent or as a send failure, with its latency.

use std::sync::Arc;

use pspat_io::{Pkt, Sender};

use crate::clock;
use crate::latency::{LatencyBoard, LatencyRecorder};
use crate::stats::ClientCounters;

/// One transmitting thread's output: a backend sender and a batch buffer.
pub struct Transmitter {
    sender: Box<dyn Sender>,
    batch: Vec<Pkt>,
    max_batch: usize,
    counters: Arc<[ClientCounters]>,
    latency: LatencyRecorder,
    /// Whether `flush` counts every packet sent (`sent`, `sent_bytes`). Off: the owner
    /// counts them per client from its own tallies, less what [`Self::take_failures`]
    /// reports (the arbiter, which already counts each client's departures per scan).
    count_sent: bool,
    /// With `count_sent` off, the packets the backend refused since the last
    /// [`Self::take_failures`]: (client, bytes).
    failures: Vec<(u32, u32)>,
    /// Last send error, kept for the report (the error itself is not on the data path).
    pub last_error: Option<String>,
}

impl Transmitter {
    /// A transmitter flushing every `max_batch` packets (at least 1).
    pub fn new(
        sender: Box<dyn Sender>,
        max_batch: usize,
        counters: Arc<[ClientCounters]>,
        board: Arc<LatencyBoard>,
    ) -> Self {
        let max_batch = max_batch.max(1);
        Self {
            sender,
            batch: Vec::with_capacity(max_batch),
            max_batch,
            counters,
            latency: LatencyRecorder::new(board),
            count_sent: true,
            failures: Vec::new(),
            last_error: None,
        }
    }

    /// Leaves the counting of sent packets to the caller: `flush` no longer counts each
    /// one, and the caller adds, per client, what it handed over less what
    /// [`Self::take_failures`] reports, after each flush of its own.
    pub fn leave_sent_counts_to_caller(&mut self) {
        self.count_sent = false;
        // Room for a few scans of refusals before the first growth.
        self.failures.reserve(4 * self.max_batch);
    }

    /// With the sent counts left to the caller: the packets refused since the last call,
    /// as (client, bytes). (Each is counted in `send_failed` too.)
    pub fn take_failures(&mut self) -> std::vec::Drain<'_, (u32, u32)> {
        self.failures.drain(..)
    }

    /// Queues a packet; sends the batch when it is full.
    #[inline]
    pub fn push(&mut self, pkt: Pkt) {
        self.batch.push(pkt);
        if self.batch.len() >= self.max_batch {
            self.flush();
        }
    }

    /// Sends what is queued. Every packet ends up counted as sent or as failed.
    pub fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let sent = match self.sender.send(&self.batch) {
            Ok(n) => n.min(self.batch.len()),
            Err(e) => {
                self.last_error = Some(e.to_string());
                0
            }
        };
        if sent < self.batch.len() {
            self.sender.discard(&self.batch[sent..]);
        }
        let now = clock::now_ns();
        let (ok, failed) = self.batch.split_at(sent);
        if self.count_sent {
            for p in ok {
                if let Some(c) = self.counters.get(p.client as usize) {
                    let tx = &c.tx.0;
                    tx.sent.add(1);
                    tx.sent_bytes.add(u64::from(p.len));
                }
            }
        }
        if self.latency.tracks_any() {
            for p in ok {
                self.latency
                    .record(p.client, now.saturating_sub(p.submit_ns));
            }
        }
        for p in failed {
            if let Some(c) = self.counters.get(p.client as usize) {
                c.tx.0.send_failed.add(1);
            }
            if !self.count_sent {
                self.failures.push((p.client, p.len));
            }
        }
        self.batch.clear();
        self.latency.maybe_publish(now, false);
    }

    /// Flushes the batch and the backend, and publishes latency; for shutdown. Counts
    /// what it sends itself: the caller will not flush again.
    pub fn finish(&mut self) {
        self.count_sent = true;
        self.flush();
        if let Err(e) = self.sender.flush() {
            self.last_error = Some(e.to_string());
        }
        self.latency.maybe_publish(clock::now_ns(), true);
    }
}
