//! Frame pools: where a packet's bytes wait while its descriptor is scheduled.
//!
//! The engine moves 4-word descriptors, never payloads. A shaper that forwards real frames
//! (`pspat shape`) must keep each received frame somewhere from the moment a receiving
//! thread (a PSPAT client) submits it until the thread that transmits it (the arbiter, a
//! dispatcher or the client itself) copies it out, or until the scheduler drops it. That
//! time is unbounded and out of order: a frame of a low-weight queue can wait while many
//! later frames of the same client leave. So the storage is a pool of fixed-size slots
//! with a state per slot, not a ring indexed by sequence number.
//!
//! # Protocol
//!
//! Each client (receiving thread) owns a region of `slots` slots and a [`FrameWriter`] for
//! it; only the writer ever takes a free slot. A slot's state word is one of
//!
//! - `FREE`: the writer may take it;
//! - `WRITING`: the writer is copying a frame in;
//! - `READY | len << 2`: the frame is complete; its slot index travels in the descriptor.
//!
//! The writer looks for a `FREE` slot (Acquire load), marks it `WRITING`, copies the frame
//! and publishes `READY` with a Release store. The transmitting side, holding the slot
//! index from a descriptor, copies the frame out ([`FramePool::take_into`]: Acquire load,
//! copy, then a compare-exchange `READY -> FREE` with Release), or gives it up unread
//! ([`FramePool::discard`]) when the scheduler dropped the packet. The writer's Acquire
//! load that sees `FREE` therefore happens after the last reader's copy: a slot is never
//! rewritten while it is being read.
//!
//! # Safe Rust
//!
//! Frame bytes are stored in `AtomicU64` words accessed with `Relaxed` (ordered by the
//! state word), so the pool has no `unsafe` and runs under loom (`tests/loom.rs`). A copy
//! costs one plain load or store per 8 bytes on x86-64 and aarch64, which for the 64-byte
//! frames that bound packet rates is 8 moves; frames are copied once in and once out.
//!
//! The states make misuse visible instead of silently corrupting frames: taking a slot
//! that is not `READY` (twice, or after a discard) is an error, never a torn frame.

use crate::sync::{Arc, AtomicU64, Ordering};

const FREE: u64 = 0;
const WRITING: u64 = 1;
const READY: u64 = 2;
const STATE_MASK: u64 = 3;

/// Why a frame could not be stored or taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Every slot of this client holds a frame not yet transmitted or dropped.
    Full,
    /// The frame is longer than a slot.
    TooLong {
        /// The frame's length.
        len: usize,
        /// The slot size.
        max: usize,
    },
    /// The slot does not hold a complete frame (never written, already taken or
    /// discarded): a descriptor was used twice, or a stale one.
    NotReady {
        /// Client region.
        client: u32,
        /// Slot within it.
        slot: u32,
    },
    /// The output buffer is shorter than the frame.
    BufferTooShort {
        /// The frame's length.
        len: usize,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Full => f.write_str("frame pool full: every slot holds a queued frame"),
            FrameError::TooLong { len, max } => {
                write!(
                    f,
                    "frame of {len} bytes is longer than a pool slot ({max} bytes)"
                )
            }
            FrameError::NotReady { client, slot } => write!(
                f,
                "frame slot {slot} of client {client} holds no complete frame (taken twice?)"
            ),
            FrameError::BufferTooShort { len } => {
                write!(f, "output buffer shorter than the {len}-byte frame")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Fixed-size frame slots for `clients` writers, shared by every thread of an engine.
#[derive(Debug)]
pub struct FramePool {
    /// `clients * slots * words_per_slot` words of frame bytes (little-endian).
    words: Box<[AtomicU64]>,
    /// `clients * slots` state words.
    state: Box<[AtomicU64]>,
    clients: usize,
    slots: usize,
    words_per_slot: usize,
}

impl FramePool {
    /// A pool of `slots` slots of `slot_bytes` bytes (rounded up to 8) for each of
    /// `clients` writers. Panics if a dimension is zero or the total overflows.
    pub fn new(clients: usize, slots: usize, slot_bytes: usize) -> Arc<Self> {
        assert!(
            clients > 0 && slots > 0 && slot_bytes > 0,
            "empty frame pool"
        );
        assert!(slots <= u32::MAX as usize, "slot indices travel in 32 bits");
        let words_per_slot = slot_bytes.div_ceil(8);
        let n = clients
            .checked_mul(slots)
            .and_then(|s| s.checked_mul(words_per_slot))
            .expect("frame pool size overflows");
        Arc::new(Self {
            words: (0..n).map(|_| AtomicU64::new(0)).collect(),
            state: (0..clients * slots).map(|_| AtomicU64::new(FREE)).collect(),
            clients,
            slots,
            words_per_slot,
        })
    }

    /// The writer of client `client`'s region. Give each client thread its own; two
    /// writers of one region would take the same free slots (the pool then reports their
    /// frames as not ready or hands out a mix, never unsafety).
    pub fn writer(pool: &Arc<Self>, client: u32) -> FrameWriter {
        assert!(
            (client as usize) < pool.clients,
            "client {client} has no region"
        );
        FrameWriter {
            pool: Arc::clone(pool),
            client,
            cursor: 0,
            window: FIRST_WINDOW.min(pool.slots),
            skipped: false,
        }
    }

    /// Bytes a slot holds.
    pub fn slot_bytes(&self) -> usize {
        self.words_per_slot * 8
    }

    /// Slots per client.
    pub fn slots(&self) -> usize {
        self.slots
    }

    #[inline]
    fn index(&self, client: u32, slot: u32) -> Option<usize> {
        ((client as usize) < self.clients && (slot as usize) < self.slots)
            .then(|| client as usize * self.slots + slot as usize)
    }

    /// Copies the frame in `client`'s slot `slot` into `out` and frees the slot; returns
    /// the frame's length.
    pub fn take_into(&self, client: u32, slot: u32, out: &mut [u8]) -> Result<usize, FrameError> {
        let not_ready = FrameError::NotReady { client, slot };
        let i = self.index(client, slot).ok_or(not_ready)?;
        // ORDERING: Acquire pairs with the writer's Release store of READY: the frame's
        // words written before it are visible to the copy below.
        let s = self.state[i].load(Ordering::Acquire);
        if s & STATE_MASK != READY {
            return Err(not_ready);
        }
        let len = (s >> 2) as usize;
        if out.len() < len {
            return Err(FrameError::BufferTooShort { len });
        }
        let base = i * self.words_per_slot;
        let words = &self.words[base..base + len.div_ceil(8)];
        // Whole words, then the tail: each whole word is one load and one store (a copy of
        // a length the compiler cannot see would be a call to memcpy per word).
        let (full, tail) = out[..len].split_at_mut(len & !7);
        for (w, chunk) in words.iter().zip(full.chunks_exact_mut(8)) {
            // ORDERING: Relaxed; ordered by the state word (module docs).
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        if let Some(w) = words.get(full.len() / 8).filter(|_| !tail.is_empty()) {
            // ORDERING: Relaxed; as above.
            tail.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes()[..tail.len()]);
        }
        // ORDERING: Release: the copy above happens before the writer's Acquire load that
        // sees FREE and rewrites the words. AcqRel is not needed on success (nothing read
        // after); Relaxed on failure (we only report it).
        self.state[i]
            .compare_exchange(s, FREE, Ordering::Release, Ordering::Relaxed)
            .map_err(|_| not_ready)?;
        Ok(len)
    }

    /// Frees `client`'s slot `slot` without reading it (its packet was dropped). Returns
    /// false if the slot held no complete frame.
    pub fn discard(&self, client: u32, slot: u32) -> bool {
        let Some(i) = self.index(client, slot) else {
            return false;
        };
        // ORDERING: Relaxed load (we read no frame words); the Release in the exchange
        // orders nothing of ours but keeps the hand-back uniform with `take_into`.
        let s = self.state[i].load(Ordering::Relaxed);
        s & STATE_MASK == READY
            && self.state[i]
                .compare_exchange(s, FREE, Ordering::Release, Ordering::Relaxed)
                .is_ok()
    }

    /// Slots of `client` holding a frame (ready or being written); racy, for reports.
    pub fn in_use(&self, client: u32) -> usize {
        let Some(first) = self.index(client, 0) else {
            return 0;
        };
        self.state[first..first + self.slots]
            .iter()
            // ORDERING: Relaxed: a statistic.
            .filter(|s| s.load(Ordering::Relaxed) != FREE)
            .count()
    }
}

/// The first window of slots a writer cycles through (see [`FrameWriter::put`]).
const FIRST_WINDOW: usize = 256;

/// One client's way into its region of a [`FramePool`]. `Send`, not shared.
#[derive(Debug)]
pub struct FrameWriter {
    pool: Arc<FramePool>,
    client: u32,
    cursor: usize,
    /// Slots `0..window` are the ones cycled through; doubled when all of them are busy,
    /// halved after a cycle through it in which every slot was free at the first look.
    window: usize,
    /// A busy slot was skipped during the current cycle.
    skipped: bool,
}

impl FrameWriter {
    /// The client region this writer fills.
    pub fn client(&self) -> u32 {
        self.client
    }

    /// Copies `frame` into a free slot and returns the slot's index, to be carried by
    /// the packet's descriptor. The search starts after the slot taken last, so with
    /// frames leaving roughly in order it finds a free slot at the first look.
    ///
    /// Cache: it cycles through a window of the first slots only, doubled (up to the
    /// whole region) when every slot of the window holds a frame, halved again after a
    /// whole cycle that never met a busy slot. A pool is sized for the
    /// worst case (a mailbox's worth of frames in flight, megabytes), but the frames in
    /// flight at a time are usually far fewer; sweeping the whole region would make every
    /// copy in and out a cache miss (measured: 80% of the receiving thread's time on
    /// the first store into each slot with a 25 MB region), while a window the size of
    /// the peak in flight stays in cache.
    pub fn put(&mut self, frame: &[u8]) -> Result<u32, FrameError> {
        let pool = &*self.pool;
        let max = pool.slot_bytes();
        if frame.len() > max {
            return Err(FrameError::TooLong {
                len: frame.len(),
                max,
            });
        }
        let first = self.client as usize * pool.slots;
        loop {
            let w = self.window;
            for probe in 0..w {
                // `cursor < w` and `probe < w`: one subtraction instead of a modulo.
                let mut slot = self.cursor + probe;
                if slot >= w {
                    slot -= w;
                }
                let st = &pool.state[first + slot];
                // ORDERING: Acquire pairs with the Release that freed the slot: the
                // reader's copy of the previous frame is complete before we overwrite it.
                if st.load(Ordering::Acquire) != FREE {
                    self.skipped = true;
                    continue;
                }
                // ORDERING: Relaxed; only this writer moves a slot out of FREE, and nobody
                // reads the words of a WRITING slot.
                st.store(WRITING, Ordering::Relaxed);
                let base = (first + slot) * pool.words_per_slot;
                let words = &pool.words[base..base + frame.len().div_ceil(8)];
                // Whole words, then the tail padded with zeros (see `take_into`).
                let (full, tail) = frame.split_at(frame.len() & !7);
                for (w, chunk) in words.iter().zip(full.chunks_exact(8)) {
                    let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                    // ORDERING: Relaxed; published by the READY store below.
                    w.store(v, Ordering::Relaxed);
                }
                if !tail.is_empty() {
                    let mut b = [0u8; 8];
                    b[..tail.len()].copy_from_slice(tail);
                    // ORDERING: Relaxed; as above.
                    words[full.len() / 8].store(u64::from_le_bytes(b), Ordering::Relaxed);
                }
                // ORDERING: Release publishes the words to the reader's Acquire load.
                st.store(READY | (frame.len() as u64) << 2, Ordering::Release);
                if slot + 1 == w {
                    // A cycle ends. Nothing in the way all along: the frames in flight
                    // fit in half the window (a burst that widened it is over).
                    if !self.skipped && w > FIRST_WINDOW {
                        self.window = w / 2;
                    }
                    self.skipped = false;
                    self.cursor = 0;
                } else {
                    self.cursor = slot + 1;
                }
                return Ok(slot as u32);
            }
            if w == pool.slots {
                return Err(FrameError::Full);
            }
            // Every slot of the window holds a frame: widen it, starting in the new part.
            self.cursor = w;
            self.window = (w * 2).min(pool.slots);
            self.skipped = false;
        }
    }

    /// Takes back a frame that was stored but whose packet was never handed on (the
    /// engine refused it): the slot is free again.
    pub fn cancel(&mut self, slot: u32) -> bool {
        self.pool.discard(self.client, slot)
    }

    /// The pool this writer fills.
    pub fn pool(&self) -> &Arc<FramePool> {
        &self.pool
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn put_take_round_trip_every_length() {
        let pool = FramePool::new(2, 4, 20);
        assert_eq!(pool.slot_bytes(), 24);
        let mut w = FramePool::writer(&pool, 1);
        for len in 0..=24usize {
            let frame: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let s = w.put(&frame).unwrap();
            let mut out = [0xAAu8; 32];
            assert_eq!(pool.take_into(1, s, &mut out), Ok(len));
            assert_eq!(&out[..len], &frame[..]);
            assert!(
                out[len..].iter().all(|&b| b == 0xAA),
                "no write past the frame"
            );
        }
        assert_eq!(
            w.put(&[0; 25]),
            Err(FrameError::TooLong { len: 25, max: 24 })
        );
    }

    #[test]
    fn full_then_freed_out_of_order() {
        let pool = FramePool::new(1, 3, 8);
        let mut w = FramePool::writer(&pool, 0);
        let a = w.put(b"a").unwrap();
        let b = w.put(b"b").unwrap();
        let c = w.put(b"c").unwrap();
        assert_eq!(w.put(b"d"), Err(FrameError::Full));
        assert_eq!(pool.in_use(0), 3);
        // The middle one leaves first (a lower-weight queue holds the others).
        let mut out = [0u8; 8];
        assert_eq!(pool.take_into(0, b, &mut out), Ok(1));
        assert_eq!(out[0], b'b');
        let d = w.put(b"d").unwrap();
        assert_eq!(d, b, "the only free slot is reused");
        assert!(pool.discard(0, a));
        assert!(!pool.discard(0, a), "a second discard finds nothing");
        assert_eq!(
            pool.take_into(0, a, &mut out),
            Err(FrameError::NotReady { client: 0, slot: a })
        );
        assert_eq!(pool.take_into(0, c, &mut out), Ok(1));
        assert_eq!(out[0], b'c');
        assert_eq!(pool.take_into(0, d, &mut out), Ok(1));
        assert_eq!(out[0], b'd');
        assert_eq!(pool.in_use(0), 0);
    }

    #[test]
    fn the_window_stays_small_until_it_is_full_then_grows() {
        let pool = FramePool::new(1, 4 * FIRST_WINDOW, 8);
        let mut w = FramePool::writer(&pool, 0);
        let mut out = [0u8; 8];
        // Frames leaving as fast as they come: only the first window's slots are used.
        for i in 0..10 * FIRST_WINDOW {
            let s = w.put(&[i as u8]).unwrap();
            assert!(
                (s as usize) < FIRST_WINDOW,
                "slot {s} outside the first window"
            );
            assert_eq!(pool.take_into(0, s, &mut out), Ok(1));
        }
        // Hold every slot: the window grows to the whole region, each slot used once.
        let held: Vec<u32> = (0..4 * FIRST_WINDOW)
            .map(|_| w.put(b"x").unwrap())
            .collect();
        let mut sorted = held.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4 * FIRST_WINDOW);
        assert_eq!(w.put(b"y"), Err(FrameError::Full));
        assert!(pool.discard(0, held[3 * FIRST_WINDOW + 5]));
        assert_eq!(w.put(b"z"), Ok(held[3 * FIRST_WINDOW + 5]));
        // The burst is over: everything leaves; after a few clean cycles the writer is
        // back in the first window.
        for s in 0..4 * FIRST_WINDOW as u32 {
            let _ = pool.take_into(0, s, &mut out);
        }
        let mut last = 0;
        for _ in 0..16 * FIRST_WINDOW {
            last = w.put(b"q").unwrap();
            assert_eq!(pool.take_into(0, last, &mut out), Ok(1));
        }
        assert!(
            (last as usize) < FIRST_WINDOW,
            "window shrank back ({last})"
        );
        assert_eq!(w.window, FIRST_WINDOW);
    }

    #[test]
    fn regions_are_separate_and_bad_indices_refused() {
        let pool = FramePool::new(2, 2, 8);
        let (mut w0, mut w1) = (FramePool::writer(&pool, 0), FramePool::writer(&pool, 1));
        let s0 = w0.put(b"zero").unwrap();
        let s1 = w1.put(b"one").unwrap();
        let mut out = [0u8; 8];
        assert_eq!(pool.take_into(1, s1, &mut out), Ok(3));
        assert_eq!(&out[..3], b"one");
        assert_eq!(pool.take_into(0, s0, &mut out), Ok(4));
        assert_eq!(&out[..4], b"zero");
        assert!(pool.take_into(2, 0, &mut out).is_err());
        assert!(pool.take_into(0, 2, &mut out).is_err());
        assert!(!pool.discard(5, 0));
        let s = w0.put(b"longer!").unwrap();
        assert_eq!(
            pool.take_into(0, s, &mut out[..3]),
            Err(FrameError::BufferTooShort { len: 7 })
        );
        assert!(w0.cancel(s));
    }
}
