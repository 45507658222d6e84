//! The shaper's receiving threads: each is a PSPAT client. It takes the frames an
//! AF_PACKET ring received on the input interface, copies each into its region of the
//! frame pool, classifies it with the configuration and submits it (tagged with its frame
//! slot); with client hand-off it also transmits what the arbiter cleared for it.
//!
//! And the reverse path: frames arriving on the output interface (replies, ARP) are
//! passed to the input interface unshaped, so the shaper is a transparent bump in the wire.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pspat_config::Direction;
use pspat_engine::{Client, SubmitError};
use pspat_io::afpacket::{Frame, RxRing, RxStats, TxSocket};
use pspat_mailbox::{FrameError, FrameWriter};

/// Why a received frame never reached the scheduler, beyond what the engine counts itself
/// (rule drops, malformed frames and full mailboxes are counted by the engine).
#[derive(Debug, Default)]
pub struct RxCounters {
    /// Frames taken from the ring.
    pub frames: AtomicU64,
    /// Their bytes.
    pub bytes: AtomicU64,
    /// Frames whose TCP/UDP checksum the shaper completed (sent by a local socket through
    /// checksum offload, see `csum.rs`).
    pub csum_completed: AtomicU64,
    /// Captured shorter than on the wire (the ring's frames are too small).
    pub truncated: AtomicU64,
    /// Shorter than an Ethernet header.
    pub runt: AtomicU64,
    /// Longer than the output interface can send.
    pub too_long: AtomicU64,
    /// No free frame slot (every slot holds a queued frame).
    pub pool_full: AtomicU64,
    /// Refused by the engine because it is stopping.
    pub stopped: AtomicU64,
    /// The kernel's count of frames the ring had no room for (PACKET_STATISTICS).
    pub ring_drops: AtomicU64,
}

impl RxCounters {
    fn add(c: &AtomicU64, n: u64) {
        // ORDERING: Relaxed: statistics, read by the reporting thread only.
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        // ORDERING: Relaxed: statistics.
        c.load(Ordering::Relaxed)
    }
}

/// One receiving thread's state.
pub struct Forwarder {
    pub ring: RxRing,
    pub client: Client,
    pub frames: FrameWriter,
    pub counters: Arc<RxCounters>,
    /// The longest frame the output interface sends.
    pub max_frame: usize,
    /// The direction rules see these frames in.
    pub dir: Direction,
}

impl Forwarder {
    /// Runs until `stop`; returns the last ring error, if any.
    pub fn run(mut self, stop: &AtomicBool) -> Option<String> {
        let mut scratch = vec![0u8; self.frames.pool().slot_bytes()];
        let mut error = None;
        let mut last_stats = RxStats::default();
        let mut polls = 0u32;
        // ORDERING: Relaxed: a stop request needs no ordering with the frames.
        while !stop.load(Ordering::Relaxed) {
            // Client hand-off: the arbiter's cleared frames go out between receptions.
            self.client.drain();
            let timeout = if self.client.transmits_itself() {
                Duration::from_micros(50)
            } else {
                Duration::from_millis(50)
            };
            match self.ring.wait(timeout) {
                Ok(false) => {}
                Ok(true) => {
                    let (client, frames, counters, max_frame, dir) = (
                        &mut self.client,
                        &mut self.frames,
                        &*self.counters,
                        self.max_frame,
                        self.dir,
                    );
                    self.ring.for_each_frame(|f| {
                        forward(client, frames, counters, max_frame, dir, &f, &mut scratch)
                    });
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
            polls = polls.wrapping_add(1);
            if polls % 64 == 0 {
                if let Ok(s) = self.ring.stats() {
                    RxCounters::add(&self.counters.ring_drops, s.drops - last_stats.drops);
                    last_stats = s;
                }
            }
        }
        if let Ok(s) = self.ring.stats() {
            RxCounters::add(&self.counters.ring_drops, s.drops - last_stats.drops);
        }
        error
    }
}

/// One received frame: into the pool, classified, submitted; or counted.
fn forward(
    client: &mut Client,
    frames: &mut FrameWriter,
    counters: &RxCounters,
    max_frame: usize,
    dir: Direction,
    f: &Frame<'_>,
    scratch: &mut [u8],
) {
    RxCounters::add(&counters.frames, 1);
    RxCounters::add(&counters.bytes, u64::from(f.wire_len));
    if (f.data.len() as u64) < u64::from(f.wire_len) {
        RxCounters::add(&counters.truncated, 1);
        return;
    }
    // The kernel may have moved an 802.1Q tag out of the frame (put it back), or left its
    // checksum unfinished (finish it): both need a copy of the frame to edit.
    let tag = if f.vlan_tci.is_some() { 4 } else { 0 };
    if f.data.len() < 14 {
        RxCounters::add(&counters.runt, 1);
        return;
    }
    if f.data.len() + tag > max_frame || f.data.len() + tag > scratch.len() {
        RxCounters::add(&counters.too_long, 1);
        return;
    }
    let data: &[u8] = if tag == 0 && !f.csum_not_ready {
        f.data
    } else {
        let n = f.data.len() + tag;
        let out = &mut scratch[..n];
        out[..12].copy_from_slice(&f.data[..12]);
        if let Some(tci) = f.vlan_tci {
            out[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            out[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        out[12 + tag..].copy_from_slice(&f.data[12..]);
        if f.csum_not_ready && super::csum::complete(out) {
            RxCounters::add(&counters.csum_completed, 1);
        }
        out
    };
    let slot = match frames.put(data) {
        Ok(s) => s,
        Err(FrameError::TooLong { .. }) => {
            RxCounters::add(&counters.too_long, 1);
            return;
        }
        Err(_) => {
            RxCounters::add(&counters.pool_full, 1);
            return;
        }
    };
    match client.submit_frame_tagged(data, data.len() as u32, dir, slot) {
        Ok(_) => {}
        Err(e) => {
            // The engine counted rule drops, malformed frames and full mailboxes.
            if matches!(e, SubmitError::Stopped) {
                RxCounters::add(&counters.stopped, 1);
            }
            frames.cancel(slot);
        }
    }
}

/// The reverse path: what arrives on the output interface goes back out of the input
/// one, unshaped, counted in `counters`. Returns the error that stopped it, if any.
pub fn reverse(
    mut ring: RxRing,
    mut tx: TxSocket,
    stop: &AtomicBool,
    counters: &ReverseCounters,
) -> Option<String> {
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(64);
    // ORDERING: Relaxed: a stop request needs no ordering with the frames.
    while !stop.load(Ordering::Relaxed) {
        match ring.wait(Duration::from_millis(50)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => return Some(e.to_string()),
        }
        let mut used = 0;
        ring.for_each_frame(|f| {
            if used == batch.len() {
                batch.push(Vec::with_capacity(2048));
            }
            let b = &mut batch[used];
            b.clear();
            b.extend_from_slice(f.data);
            used += 1;
        });
        let sent = match tx.send_batch(used, |i| batch[i].as_slice()) {
            Ok(n) => n,
            Err(e) => {
                counters.failed.fetch_add(used as u64, Ordering::Relaxed);
                return Some(e.to_string());
            }
        };
        // ORDERING: Relaxed: statistics.
        counters.frames.fetch_add(sent as u64, Ordering::Relaxed);
        counters
            .failed
            .fetch_add((used - sent) as u64, Ordering::Relaxed);
    }
    None
}

/// What the reverse path passed.
#[derive(Debug, Default)]
pub struct ReverseCounters {
    /// Frames passed back.
    pub frames: AtomicU64,
    /// Frames that could not be sent.
    pub failed: AtomicU64,
}
