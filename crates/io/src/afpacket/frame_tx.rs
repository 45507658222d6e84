//! A shaper's way out: [`FrameTx`], a [`Backend`] whose senders copy each scheduled frame
//! out of a [`FramePool`] (the descriptor's `client` and `seq` name its slot, see
//! `pspat_engine::keyring`) and transmit it on the output interface with a [`TxSocket`].
//!
//! Each sender copies up to [`BATCH`] frames out of the pool into its own buffer (which
//! frees their slots at once) and hands them to one sendmmsg(2); it allocates nothing per
//! frame. A frame missing from the pool, or refused by the device, ends the batch there:
//! the engine counts it and the rest as send failures, and [`Sender::discard`] frees only
//! the slots that were not copied out already.

use std::sync::Arc;

use pspat_mailbox::FramePool;

use super::{TxOptions, TxSocket, BATCH};
use crate::{Backend, Pkt, SendError, Sender};

/// The `afpacket-frames` backend: opens one AF_PACKET socket on `ifname` per transmitting
/// thread and sends the frames a [`FramePool`] holds.
pub struct FrameTx {
    pool: Arc<FramePool>,
    ifname: String,
    opts: TxOptions,
}

impl FrameTx {
    /// Transmits frames of `pool` on `ifname`.
    pub fn new(pool: Arc<FramePool>, ifname: &str, opts: TxOptions) -> Self {
        Self {
            pool,
            ifname: ifname.to_string(),
            opts,
        }
    }
}

impl Backend for FrameTx {
    fn name(&self) -> &'static str {
        "afpacket-frames"
    }

    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        let sock = TxSocket::open(&self.ifname, &self.opts)
            .map_err(|e| SendError::Config(e.to_string()))?;
        let slot = self.pool.slot_bytes();
        Ok(Box::new(FrameSender {
            sock,
            pool: Arc::clone(&self.pool),
            buf: vec![0; BATCH * slot],
            lens: [0; BATCH],
            slot,
            skip: 0,
        }))
    }

    fn discard(&self, pkts: &[Pkt]) {
        for p in pkts {
            self.pool.discard(p.client, p.seq);
        }
    }
}

/// One transmitting thread's socket and its batch of frames copied out of the pool.
struct FrameSender {
    sock: TxSocket,
    pool: Arc<FramePool>,
    /// `BATCH` slots of `slot` bytes.
    buf: Vec<u8>,
    lens: [usize; BATCH],
    slot: usize,
    /// After a partial send: how many of the unsent packets already had their frames
    /// copied out (their slots are free, maybe refilled: `discard` must not touch them).
    skip: usize,
}

impl Sender for FrameSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        self.skip = 0;
        let mut done = 0;
        for chunk in batch.chunks(BATCH) {
            // Copy the chunk's frames out of the pool (which frees their slots). A frame
            // that is not there stops the batch: it and the rest count as send failures.
            let mut n = 0;
            let mut bad = None;
            for (i, p) in chunk.iter().enumerate() {
                let out = &mut self.buf[i * self.slot..(i + 1) * self.slot];
                match self.pool.take_into(p.client, p.seq, out) {
                    Ok(len) => {
                        self.lens[i] = len;
                        n += 1;
                    }
                    Err(e) => {
                        bad = Some(e);
                        break;
                    }
                }
            }
            let (buf, lens, slot) = (&self.buf, &self.lens, self.slot);
            // Copied out but not sent (and the missing frame itself): not to be discarded.
            let taken = n + usize::from(bad.is_some());
            let sent = match self
                .sock
                .send_batch(n, |i| &buf[i * slot..i * slot + lens[i]])
            {
                Ok(s) => s,
                Err(e) => {
                    self.skip = taken;
                    if done == 0 {
                        return Err(SendError::Config(e.to_string()));
                    }
                    return Ok(done);
                }
            };
            done += sent;
            if sent < n || bad.is_some() {
                self.skip = taken - sent;
            }
            if sent < n {
                return Ok(done);
            }
            if let Some(e) = bad {
                if done == 0 {
                    return Err(SendError::Config(format!("frame pool: {e}")));
                }
                return Ok(done);
            }
        }
        Ok(done)
    }

    fn discard(&mut self, pkts: &[Pkt]) {
        // Frames already copied out were freed then (and their slots may hold new frames
        // now); this frees the others.
        let skip = std::mem::take(&mut self.skip).min(pkts.len());
        for p in &pkts[skip..] {
            self.pool.discard(p.client, p.seq);
        }
    }
}
