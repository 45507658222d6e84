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
            last_error: None,
        }
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
        for p in ok {
            if let Some(c) = self.counters.get(p.client as usize) {
                let tx = &c.tx.0;
                tx.sent.add(1);
                tx.sent_bytes.add(u64::from(p.len));
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
        }
        self.batch.clear();
        self.latency.maybe_publish(now, false);
    }

    /// Flushes the batch and the backend, and publishes latency; for shutdown.
    pub fn finish(&mut self) {
        self.flush();
        if let Err(e) = self.sender.flush() {
            self.last_error = Some(e.to_string());
        }
        self.latency.maybe_publish(clock::now_ns(), true);
    }
}
