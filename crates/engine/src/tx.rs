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
    /// The indices of the packets of the batch being flushed that the backend refused
    /// alone (capacity `max_batch`: no growth on the data path).
    refused: Vec<usize>,
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
            refused: Vec::with_capacity(max_batch),
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

    /// Sends what is queued. Every packet ends up counted as sent or as failed: a packet
    /// the backend refuses alone ([`Sender::send_each`]) costs only itself.
    pub fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.refused.clear();
        let (refused, last_error) = (&mut self.refused, &mut self.last_error);
        let end = match self.sender.send_each(&self.batch, &mut |i, e| {
            refused.push(i);
            *last_error = Some(e.to_string());
        }) {
            Ok(n) => n.min(self.batch.len()),
            Err(e) => {
                self.last_error = Some(e.to_string());
                0
            }
        };
        if end < self.batch.len() {
            self.sender.discard(&self.batch[end..]);
        }
        let now = clock::now_ns();
        // Runs of packets sent, between the ones refused alone; then the rest failed.
        let mut from = 0;
        for k in 0..self.refused.len() {
            let r = self.refused[k];
            if r < from || r >= end {
                continue;
            }
            self.sent(from, r, now);
            self.failed(r, r + 1);
            from = r + 1;
        }
        self.sent(from, end, now);
        self.failed(end, self.batch.len());
        self.batch.clear();
        self.latency.maybe_publish(now, false);
    }

    /// Counts `batch[from..to]` as sent at `now`.
    fn sent(&mut self, from: usize, to: usize, now: u64) {
        let ok = &self.batch[from..to];
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
    }

    /// Counts `batch[from..to]` as send failures.
    fn failed(&mut self, from: usize, to: usize) {
        for p in &self.batch[from..to] {
            if let Some(c) = self.counters.get(p.client as usize) {
                c.tx.0.send_failed.add(1);
            }
            if !self.count_sent {
                self.failures.push((p.client, p.len));
            }
        }
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pspat_io::SendError;
    use std::sync::Mutex;

    /// Refuses alone the packets whose `seq` is odd, and the whole rest from `fail_from`.
    struct Picky {
        fail_from: usize,
        discarded: Arc<Mutex<Vec<u32>>>,
    }

    impl Sender for Picky {
        fn send(&mut self, _batch: &[Pkt]) -> Result<usize, SendError> {
            unreachable!("the transmitter uses send_each")
        }
        fn send_each(
            &mut self,
            batch: &[Pkt],
            refused: &mut dyn FnMut(usize, &SendError),
        ) -> Result<usize, SendError> {
            let end = batch.len().min(self.fail_from);
            for (i, p) in batch[..end].iter().enumerate() {
                if p.seq % 2 == 1 {
                    refused(i, &SendError::Config(format!("packet {}", p.seq)));
                }
            }
            Ok(end)
        }
        fn discard(&mut self, pkts: &[Pkt]) {
            self.discarded
                .lock()
                .unwrap()
                .extend(pkts.iter().map(|p| p.seq));
        }
    }

    fn pkt(seq: u32) -> Pkt {
        Pkt {
            len: 100,
            client: 0,
            flow: 0,
            seq,
            submit_ns: 0,
            depart_ns: 0,
        }
    }

    #[test]
    fn a_packet_refused_alone_costs_no_other() {
        let counters: Arc<[ClientCounters]> = vec![ClientCounters::default()].into();
        let discarded = Arc::new(Mutex::new(Vec::new()));
        let sender = Picky {
            fail_from: 8,
            discarded: Arc::clone(&discarded),
        };
        let board = Arc::new(LatencyBoard::new(&[false]));
        let mut tx = Transmitter::new(Box::new(sender), 64, Arc::clone(&counters), board);
        for seq in 0..10 {
            tx.push(pkt(seq));
        }
        tx.flush();
        let t = &counters[0].tx.0;
        // 0, 2, 4, 6 sent; 1, 3, 5, 7 refused alone; 8 and 9 failed with the rest.
        assert_eq!(t.sent.get(), 4);
        assert_eq!(t.sent_bytes.get(), 400);
        assert_eq!(t.send_failed.get(), 6);
        assert_eq!(
            *discarded.lock().unwrap(),
            [8, 9],
            "only the rest is discarded"
        );
        assert_eq!(tx.last_error.as_deref(), Some("packet 7"));
    }
}
