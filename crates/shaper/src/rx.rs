//! The shaper's receiving threads: each is a PSPAT client. It takes the frames an
//! AF_PACKET ring received on the input interface, copies each into its region of the
//! frame pool, classifies it with the configuration and submits it (tagged with its frame
//! slot); with client hand-off it also transmits what the arbiter cleared for it.
//!
//! Per frame: the counters' `fetch_add`s, at most one copy into a scratch buffer (only
//! when a tag is put back or a checksum finished, see `image.rs`), one copy into the pool,
//! one classification and one mailbox push. No lock, no allocation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pspat_config::Direction;
use pspat_engine::{Client, SubmitError};
use pspat_io::afpacket::{Frame, RxOptions, RxRing, RxStats};
use pspat_io::link::{link_state, LinkState};
use pspat_mailbox::{FrameError, FrameWriter};

use crate::counters::{add, RxCounters};
use crate::image::{image, Unsendable};
use crate::link::LinkWatch;

/// One receiving thread's state.
pub(crate) struct Forwarder {
    pub ring: RxRing,
    pub client: Client,
    pub frames: FrameWriter,
    pub counters: Arc<RxCounters>,
    /// Where and how the frames go on.
    pub out: Out,
    /// The input's faults, and how to open its ring again (see `link.rs`).
    pub link: Arc<LinkWatch>,
    pub reopen: Reopen,
}

/// How a receiving thread opens its ring again when the input comes back under a new
/// index (deleted and created again).
#[derive(Clone, Debug)]
pub(crate) struct Reopen {
    /// The ring's options (a fanout group is replaced: see [`Reopen::open`]).
    pub opts: RxOptions,
    /// How long a deleted input is waited for.
    pub give_up: Duration,
}

impl Reopen {
    /// Opens the ring on `ifname` again. The threads of a fanout group join a new group
    /// named after the new index: the old group stays bound to the deleted interface
    /// until every old ring has closed, and the kernel refuses to mix devices in a group.
    pub fn open(&self, ifname: &str) -> Result<RxRing, String> {
        let mut opts = self.opts;
        if let (Some(f), LinkState::Present { index, .. }) = (
            opts.fanout.as_mut(),
            link_state(ifname).map_err(|e| format!("looking up {ifname}: {e}"))?,
        ) {
            f.group ^= (index as u16).rotate_left(8) | 1;
        }
        RxRing::open(ifname, &opts).map_err(|e| e.to_string())
    }
}

impl Forwarder {
    /// Runs until `stop`; returns the last ring error, if any.
    pub fn run(mut self, stop: &AtomicBool) -> Option<String> {
        let mut scratch = vec![0u8; self.frames.pool().slot_bytes()];
        let mut error = None;
        let mut last_stats = RxStats::default();
        let mut polls = 0u32;
        // ORDERING: Relaxed: a stop request needs no ordering with the frames (pairs with
        // the Relaxed store in `Shaper::stop`; the thread's results are published by join).
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
                    let (client, frames, counters, out) = (
                        &mut self.client,
                        &mut self.frames,
                        &*self.counters,
                        self.out,
                    );
                    // Every frame in the ring arrived before now.
                    let clock = pspat_io::clock::now_and_realtime_offset();
                    self.ring.for_each_frame(|f| {
                        forward(client, frames, counters, out, &f, &mut scratch, clock)
                    });
                }
                Err(e) => {
                    if !e.is_link_fault() {
                        error = Some(e.to_string());
                        break;
                    }
                    // The input went down or away: wait for it, keep transmitting.
                    add(
                        &self.counters.ring_drops,
                        ring_drops(&mut self.ring, &last_stats),
                    );
                    let (client, reopen) = (&mut self.client, &self.reopen);
                    let recovery = self.link.ride_through(
                        &e,
                        self.ring.ifindex(),
                        reopen.give_up,
                        // ORDERING: Relaxed: as the loop's own check.
                        &|| stop.load(Ordering::Relaxed),
                        &mut || {
                            client.drain();
                        },
                        |name| reopen.open(name),
                    );
                    match recovery {
                        Ok(Some(ring)) => self.ring = ring,
                        Ok(None) => {}
                        Err(why) => {
                            error = why;
                            break;
                        }
                    }
                    last_stats = RxStats::default();
                    continue;
                }
            }
            polls = polls.wrapping_add(1);
            if polls % 64 == 0 {
                if let Ok(s) = self.ring.stats() {
                    add(&self.counters.ring_drops, s.drops - last_stats.drops);
                    last_stats = s;
                }
            }
        }
        add(
            &self.counters.ring_drops,
            ring_drops(&mut self.ring, &last_stats),
        );
        error
    }
}

/// The ring's overruns since `last` (0 if its statistics do not read).
fn ring_drops(ring: &mut RxRing, last: &RxStats) -> u64 {
    ring.stats()
        .map_or(0, |s| s.drops.saturating_sub(last.drops))
}

/// Where and how received frames go on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Out {
    /// The longest frame the output interface sends.
    pub max_frame: usize,
    /// The direction rules see the frames in.
    pub dir: Direction,
    /// The ring and the output socket carry a virtio-net header before each frame.
    pub vnet: bool,
}

/// One received frame: into the pool, classified, submitted (stamped with when the kernel
/// received it, on the engine clock: `(now, realtime offset)` in `clock`); or counted.
fn forward(
    client: &mut Client,
    frames: &mut FrameWriter,
    counters: &RxCounters,
    out: Out,
    f: &Frame<'_>,
    scratch: &mut [u8],
    (now, offset): (u64, u64),
) {
    add(&counters.frames, 1);
    add(&counters.bytes, u64::from(f.wire_len));
    let img = match image(f, out.vnet, out.max_frame, scratch) {
        Ok((img, completed)) => {
            if completed {
                add(&counters.csum_completed, 1);
            } else if out.vnet && f.csum_not_ready {
                add(&counters.csum_passed, 1);
            }
            img
        }
        Err(why) => {
            let c = match why {
                Unsendable::Truncated => &counters.truncated,
                Unsendable::Runt => &counters.runt,
                Unsendable::TooLong => &counters.too_long,
            };
            add(c, 1);
            return;
        }
    };
    let slot = match frames.put(img.bytes) {
        Ok(s) => s,
        Err(FrameError::TooLong { .. }) => {
            add(&counters.too_long, 1);
            return;
        }
        Err(_) => {
            add(&counters.pool_full, 1);
            return;
        }
    };
    let data = img.frame();
    // The kernel's receive timestamp, so that time a frame spent in the ring (the thread
    // descheduled) counts as the arbiter's lateness: its link may make up for it. A frame
    // with no timestamp, or one from the future (a wall clock set back), arrived now.
    let arrived = match f.ts_ns.wrapping_sub(offset) {
        t if f.ts_ns == 0 || t > now => now,
        t => t,
    };
    match client.submit_frame_tagged_at(data, data.len() as u32, out.dir, slot, arrived) {
        Ok(_) => {}
        Err(e) => {
            // The engine counted rule drops, malformed frames and full mailboxes.
            if matches!(e, SubmitError::Stopped) {
                add(&counters.stopped, 1);
            }
            frames.cancel(slot);
        }
    }
}
