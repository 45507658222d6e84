//! A shaper's way out: [`FrameTx`], a [`Backend`] whose senders copy each scheduled frame
//! out of a [`FramePool`] (the descriptor's `client` and `seq` name its slot, see
//! `pspat_engine::keyring`) and transmit it on the output interface with a [`TxSocket`].
//!
//! Each sender copies up to [`BATCH`] frames out of the pool into its own buffer (which
//! frees their slots at once) and hands them to one sendmmsg(2); it allocates nothing per
//! frame. Through [`Sender::send_each`] (what the engine uses) a frame the kernel refuses
//! for what it is (EMSGSIZE after the output's MTU was lowered, EINVAL), or one missing
//! from the pool, is left out alone and the frames after it still go; only a failure of
//! the socket or the device ends the batch, and [`Sender::discard`] then frees just the
//! slots that were not copied out already. (A frame too long for the output's MTU at start
//! never gets here: the shaper counts it `too_long` on arrival, by the kernel's own rule.)
//! A link that goes down or away is ridden through (see [`FrameTx::with_link_events`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_mailbox::{FrameError, FramePool};

use crate::link::{is_link_error, link_state, LinkEvents, LinkState};

use super::tx::{frame_error, frame_refused};
use super::{AfterRefusal, BatchSent, TxOptions, TxSocket, BATCH};
use crate::{Backend, Pkt, SendError, Sender};

/// The `afpacket-frames` backend: opens one AF_PACKET socket on `ifname` per transmitting
/// thread and sends the frames a [`FramePool`] holds.
pub struct FrameTx {
    pool: Arc<FramePool>,
    ifname: String,
    opts: TxOptions,
    events: Option<Arc<dyn LinkEvents>>,
}

impl FrameTx {
    /// Transmits frames of `pool` on `ifname`.
    pub fn new(pool: Arc<FramePool>, ifname: &str, opts: TxOptions) -> Self {
        Self {
            pool,
            ifname: ifname.to_string(),
            opts,
            events: None,
        }
    }

    /// Tells `events` when a sender finds the interface down or gone and when it sends
    /// again. Either way a sender rides through the fault: what it cannot send meanwhile
    /// fails (and is counted by the engine), and when the interface comes back under a
    /// new index (deleted and created again) it opens its socket again, looking at most
    /// every [`RECHECK`].
    pub fn with_link_events(mut self, events: Arc<dyn LinkEvents>) -> Self {
        self.events = Some(events);
        self
    }
}

/// How often a sender whose link is down looks whether the interface came back under a
/// new index.
pub const RECHECK: Duration = Duration::from_millis(100);

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
            pos: [0; BATCH],
            rejects: Vec::with_capacity(BATCH),
            link: LinkFault {
                ifname: self.ifname.clone(),
                opts: self.opts,
                events: self.events.clone(),
                down: false,
                next_check: Instant::now(),
            },
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
    link: LinkFault,
    /// [`Sender::send_each`]: the chunk's index of each frame copied into `buf`.
    pos: [usize; BATCH],
    /// [`Sender::send_each`]: the chunk's frames left out alone (capacity `BATCH`).
    rejects: Vec<(usize, Reject)>,
}

/// A sender's view of its interface's faults (the error path only: nothing here runs
/// while frames go out).
struct LinkFault {
    ifname: String,
    opts: TxOptions,
    events: Option<Arc<dyn LinkEvents>>,
    /// The last send failed for the link.
    down: bool,
    /// When to look at the interface again while down.
    next_check: Instant,
}

impl LinkFault {
    /// After a send that stopped at `failed` (if it did) and sent something or not: a
    /// link fault is recorded (and the socket maybe opened again), frames out again end
    /// a fault.
    fn after_send(&mut self, failed: Option<&std::io::Error>, sent_any: bool, sock: &mut TxSocket) {
        match failed {
            Some(e) if is_link_error(e) => self.failed(e, sock),
            _ if sent_any => self.back(false),
            _ => {}
        }
    }

    /// A send failed with `e` for the link: says so once per fault, and opens `sock`
    /// again if the interface is back under a new index.
    fn failed(&mut self, e: &std::io::Error, sock: &mut TxSocket) {
        if !self.down {
            self.down = true;
            if let Some(ev) = &self.events {
                ev.went_down(&format!("sendmmsg on {}: {e}", self.ifname));
            }
        }
        let now = Instant::now();
        if now < self.next_check {
            return;
        }
        self.next_check = now + RECHECK;
        if let Ok(LinkState::Present { index, up: true }) = link_state(&self.ifname) {
            if index != sock.ifindex() {
                if let Ok(s) = TxSocket::open(&self.ifname, &self.opts) {
                    *sock = s;
                    self.back(true);
                }
            }
        }
    }

    /// Frames went out again.
    fn back(&mut self, reopened: bool) {
        if std::mem::take(&mut self.down) {
            if let Some(ev) = &self.events {
                ev.came_back(reopened);
            }
        }
    }
}

impl Sender for FrameSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        self.skip = 0;
        let mut done = 0;
        for chunk in batch.chunks(BATCH) {
            // Copy the chunk's frames out of the pool (which frees their slots), up to one
            // that is not there.
            let mut copied = 0;
            let mut missing = None;
            for (i, p) in chunk.iter().enumerate() {
                let out = &mut self.buf[i * self.slot..(i + 1) * self.slot];
                match self.pool.take_into(p.client, p.seq, out) {
                    Ok(len) => {
                        self.lens[i] = len;
                        copied += 1;
                    }
                    Err(e) => {
                        missing = Some(e);
                        break;
                    }
                }
            }
            let (buf, lens, slot) = (&self.buf, &self.lens, self.slot);
            let mut refusal = None;
            let sent = self.sock.send_frames(
                copied,
                |i| &buf[i * slot..i * slot + lens[i]],
                |i, e| {
                    refusal = Some((i, e));
                    AfterRefusal::Stop
                },
            );
            let failed = refusal.as_ref().map(|(_, e)| e);
            self.link.after_send(failed, sent.sent > 0, &mut self.sock);
            let c = settle(copied, missing.is_some(), sent);
            done += c.sent;
            self.skip = c.skip;
            if c.whole {
                continue;
            }
            if done > 0 {
                return Ok(done);
            }
            // Nothing of the batch went: say why (a device that stayed busy is no error).
            if let Some((i, source)) = refusal {
                return Err(frame_refused(self.sock.ifname(), lens[i], source));
            }
            if let Some(e) = missing {
                return Err(SendError::Config(format!("frame pool: {e}")));
            }
            return Ok(0);
        }
        Ok(done)
    }

    fn send_each(
        &mut self,
        batch: &[Pkt],
        refused: &mut dyn FnMut(usize, &SendError),
    ) -> Result<usize, SendError> {
        self.skip = 0;
        let mut base = 0;
        for chunk in batch.chunks(BATCH) {
            // Copy every frame of the chunk out of the pool (which frees their slots): one
            // that is not there is refused alone.
            self.rejects.clear();
            let mut copied = 0;
            for (i, p) in chunk.iter().enumerate() {
                let out = &mut self.buf[copied * self.slot..(copied + 1) * self.slot];
                match self.pool.take_into(p.client, p.seq, out) {
                    Ok(len) => {
                        self.lens[copied] = len;
                        self.pos[copied] = i;
                        copied += 1;
                    }
                    Err(e) => self.rejects.push((i, Reject::Missing(e))),
                }
            }
            let (buf, lens, slot, pos) = (&self.buf, &self.lens, self.slot, &self.pos);
            let rejects = &mut self.rejects;
            let mut stop = None;
            let sent = self.sock.send_frames(
                copied,
                |k| &buf[k * slot..k * slot + lens[k]],
                |k, e| {
                    if frame_error(&e) {
                        // Refused for what it is (too long, a bad header): only it.
                        rejects.push((pos[k], Reject::Refused(e, lens[k])));
                        AfterRefusal::Skip
                    } else {
                        stop = Some((k, e));
                        AfterRefusal::Stop
                    }
                },
            );
            let failed = stop.as_ref().map(|(_, e)| e);
            self.link.after_send(failed, sent.sent > 0, &mut self.sock);
            // Where the chunk ended: at a frame whose socket or device failed, at the
            // first frame not offered (the device stayed busy), or after its last frame.
            let ended = match &stop {
                Some((k, _)) => Some(*k),
                None if sent.end < copied => Some(sent.end),
                None => None,
            };
            let end = ended.map_or(chunk.len(), |k| pos[k]);
            // Those refused alone before that, in order.
            self.rejects.sort_unstable_by_key(|r| r.0);
            for (i, r) in self.rejects.drain(..) {
                if i < end {
                    refused(base + i, &r.into_error(self.sock.ifname()));
                }
            }
            if ended.is_none() {
                base += chunk.len();
                continue;
            }
            // Every frame of the chunk was taken out of the pool: `discard` leaves them.
            self.skip = chunk.len() - end;
            let end = base + end;
            if end > 0 {
                return Ok(end);
            }
            return match stop {
                Some((k, source)) => Err(frame_refused(self.sock.ifname(), self.lens[k], source)),
                None => Ok(0),
            };
        }
        Ok(batch.len())
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

/// Why a frame of a batch was left out alone ([`Sender::send_each`]).
enum Reject {
    /// Its slot held no frame.
    Missing(FrameError),
    /// The kernel refused it for what it is; its length.
    Refused(std::io::Error, usize),
}

impl Reject {
    fn into_error(self, ifname: &str) -> SendError {
        match self {
            Reject::Missing(e) => SendError::Config(format!("frame pool: {e}")),
            Reject::Refused(source, len) => frame_refused(ifname, len, source),
        }
    }
}

/// What became of one chunk of a batch, in [`Sender::send`]'s terms.
#[derive(Debug, PartialEq, Eq)]
struct Chunk {
    /// Its first `sent` packets went out.
    sent: usize,
    /// Of the packets after those, how many had their frames taken out of the pool
    /// already (copied, or found missing): [`Sender::discard`] must leave their slots.
    skip: usize,
    /// Every packet of the chunk went out: go on with the next one.
    whole: bool,
}

/// Settles a chunk whose first `copied` frames were copied out of the pool (then one was
/// missing from it, when `missing`) and given to [`TxSocket::send_frames`], which stopped
/// at the first refusal: so the frames it sent are the first `sent.sent`.
fn settle(copied: usize, missing: bool, sent: BatchSent) -> Chunk {
    debug_assert!(sent.end <= copied && sent.refused <= 1);
    debug_assert_eq!(sent.sent + sent.refused, sent.end);
    Chunk {
        sent: sent.sent,
        skip: copied - sent.sent + usize::from(missing),
        whole: sent.sent == copied && !missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(sent: usize, refused: usize, end: usize) -> BatchSent {
        BatchSent { sent, refused, end }
    }

    #[test]
    fn a_whole_chunk_goes_on_and_leaves_nothing_to_skip() {
        let c = settle(64, false, sent(64, 0, 64));
        assert_eq!(
            c,
            Chunk {
                sent: 64,
                skip: 0,
                whole: true
            }
        );
        assert!(settle(0, false, sent(0, 0, 0)).whole, "an empty chunk");
    }

    #[test]
    fn a_refused_frame_ends_the_batch_and_its_copied_frames_are_not_discarded() {
        // Frame 5 of 10 refused: 0..5 sent, 5..10 were copied out (their slots are free).
        assert_eq!(
            settle(10, false, sent(5, 1, 6)),
            Chunk {
                sent: 5,
                skip: 5,
                whole: false
            }
        );
        // The first refused: nothing sent, every frame copied out.
        assert_eq!(
            settle(10, false, sent(0, 1, 1)),
            Chunk {
                sent: 0,
                skip: 10,
                whole: false
            }
        );
    }

    #[test]
    fn a_frame_missing_from_the_pool_ends_the_batch_after_the_ones_before_it() {
        // Frames 0..3 copied and sent, the 4th missing: it is skipped too (not ours).
        assert_eq!(
            settle(3, true, sent(3, 0, 3)),
            Chunk {
                sent: 3,
                skip: 1,
                whole: false
            }
        );
        // Missing, and the device stayed busy after 1 of the 3 copied.
        assert_eq!(
            settle(3, true, sent(1, 0, 1)),
            Chunk {
                sent: 1,
                skip: 3,
                whole: false
            }
        );
    }

    #[test]
    fn a_device_that_stays_busy_ends_the_batch() {
        assert_eq!(
            settle(8, false, sent(2, 0, 2)),
            Chunk {
                sent: 2,
                skip: 6,
                whole: false
            }
        );
    }
}
