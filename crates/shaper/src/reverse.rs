//! The reverse path: frames arriving on the output interface (replies, ARP) are passed to
//! the input interface unshaped, so the shaper is a transparent bump in the wire. One
//! thread, `pspat-reverse`: an AF_PACKET ring on the output, a socket on the input.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pspat_io::afpacket::vnet::VNET_HDR_LEN;
use pspat_io::afpacket::{RxOptions, RxRing, TxOptions, TxSocket};

use crate::counters::{add, ReverseCounters};
use crate::image::write_image;
use crate::link::LinkWatch;

/// The reverse path's interfaces and how to open its sockets again (see `link.rs`).
pub(crate) struct ReverseLinks {
    /// The output, where its ring receives.
    pub output: Arc<LinkWatch>,
    /// The input, where its socket sends.
    pub input: Arc<LinkWatch>,
    /// The ring's options.
    pub rx: RxOptions,
    /// The socket's options.
    pub tx: TxOptions,
    /// The ring and the socket carry a virtio-net header before each frame.
    pub vnet: bool,
    /// How long a deleted interface is waited for.
    pub give_up: Duration,
}

/// What arrives on `ring` goes out of `tx`, unshaped, counted in `counters`, riding
/// through faults of either interface (`links`). Returns the error that stopped it, if
/// any.
///
/// Its buffers grow to the largest batch a ring walk gave and are reused: after the first
/// batches, nothing is allocated per frame.
pub(crate) fn reverse(
    mut ring: RxRing,
    mut tx: TxSocket,
    links: ReverseLinks,
    stop: &AtomicBool,
    counters: &ReverseCounters,
) -> Option<String> {
    let vnet = links.vnet;
    // ORDERING: Relaxed: as the loop's own check.
    let stopping = || stop.load(Ordering::Relaxed);
    // Room for a frame of up to 64 KiB (a GSO super-frame, which the kernel segments when
    // the header says so), its tag and its header.
    const ROOM: usize = 65_536 + 18 + VNET_HDR_LEN;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(64);
    let mut lens: Vec<usize> = Vec::with_capacity(64);
    // ORDERING: Relaxed: a stop request needs no ordering with the frames (pairs with the
    // Relaxed store in `Shaper::stop`; the thread's results are published by join).
    while !stop.load(Ordering::Relaxed) {
        match ring.wait(Duration::from_millis(50)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) if e.is_link_fault() => {
                // The output went down or away: wait for it.
                let open = |name: &str| RxRing::open(name, &links.rx);
                let bound = ring.ifindex();
                match links.output.ride_through(
                    &e,
                    bound,
                    links.give_up,
                    &stopping,
                    &mut || {},
                    open,
                ) {
                    Ok(Some(r)) => ring = r,
                    Ok(None) => {}
                    Err(why) => return why,
                }
                continue;
            }
            Err(e) => return Some(e.to_string()),
        }
        let mut used = 0;
        let mut unsendable = 0u64;
        ring.for_each_frame(|f| {
            if used == batch.len() {
                batch.push(vec![0; ROOM]);
                lens.push(0);
            }
            match write_image(&f, vnet, ROOM, &mut batch[used]) {
                Ok((n, _)) => {
                    lens[used] = n;
                    used += 1;
                }
                Err(_) => unsendable += 1,
            }
        });
        add(&counters.failed, unsendable);
        let sent = match tx.send_batch(used, |i| &batch[i][..lens[i]]) {
            Ok(n) => n,
            Err(e) if e.is_link_fault() => {
                // The input went down or away: this batch is lost (counted); wait for it.
                add(&counters.failed, used as u64);
                let open = |name: &str| TxSocket::open(name, &links.tx);
                let bound = tx.ifindex();
                match links.input.ride_through(
                    &e,
                    bound,
                    links.give_up,
                    &stopping,
                    &mut || {},
                    open,
                ) {
                    Ok(Some(t)) => tx = t,
                    Ok(None) => {}
                    Err(why) => return why,
                }
                continue;
            }
            Err(e) => {
                add(&counters.failed, used as u64);
                return Some(e.to_string());
            }
        };
        add(&counters.frames, sent as u64);
        add(&counters.failed, (used - sent) as u64);
    }
    None
}
