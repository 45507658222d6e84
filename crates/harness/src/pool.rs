//! Packet buffers: dummynet's mbuf freelist, modelled honestly.
//!
//! dummynet's harness keeps a freelist of `struct mbuf` linked through `m_nextpkt`;
//! generating a packet pops one and writes its header (flow id, length), and a dequeued
//! packet is read back and pushed onto the freelist. The same work happens here: a pool of
//! buffers allocated once, a LIFO freelist linked through the buffers themselves (the most
//! recently freed buffer, still in cache, is reused first), and a small `Copy` handle,
//! [`BenchPkt`], that the scheduler queues.
//!
//! # Invariants
//!
//! - Buffer `b` (`1..=size`) is either on the freelist or held by exactly one queued
//!   packet; index 0 is never used, so a handle fits a `NonZeroU32`, `Option<BenchPkt>` is
//!   8 bytes, and 0 ends the freelist.

use std::num::NonZeroU32;

use pspat_sched::Packet;

use crate::slots::{masked, pow2};

/// The handle a scheduler queues: a buffer index and the packet's length (what a
/// scheduler reads on every operation, kept in the handle so that it need not touch the
/// buffer, as a descriptor ring would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchPkt {
    /// Buffer holding the packet's header.
    pub buf: NonZeroU32,
    /// Length in bytes.
    pub len: u32,
}

impl Packet for BenchPkt {
    #[inline]
    fn wire_len(&self) -> u32 {
        self.len
    }
}

/// The header written into a buffer when a packet is generated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PktHdr {
    /// Flow index the packet was generated for.
    pub flow: u32,
    /// Length in bytes.
    pub len: u32,
    /// Per-flow sequence number.
    pub seq: u32,
}

/// A buffer: its header, and the next free buffer while it is free (`m_nextpkt`).
#[derive(Clone, Copy, Debug, Default)]
struct Buf {
    hdr: PktHdr,
    next_free: u32,
}

/// A fixed pool of packet buffers.
#[derive(Clone, Debug)]
pub struct Pool {
    /// Buffers by index (index 0 unused), a power-of-two array (see `slots.rs`).
    bufs: Box<[Buf]>,
    /// First free buffer, 0 when none is.
    free: u32,
    size: u32,
}

impl Pool {
    /// A pool of `size` buffers (`size < u32::MAX`), all free.
    pub fn new(size: u32) -> Self {
        assert!(size < u32::MAX, "pool too large");
        let mut bufs = pow2(size as usize + 1, Buf::default());
        // Buffer 1 first, then 2, ...; the last one ends the list with 0.
        for b in 1..size {
            bufs[b as usize].next_free = b + 1;
        }
        Self {
            bufs,
            free: u32::from(size > 0),
            size,
        }
    }

    /// Buffers in the pool.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Buffers free now (walks the freelist: for tests and reports).
    pub fn available(&self) -> u32 {
        let mut n = 0;
        let mut b = self.free;
        while b != 0 && n <= self.size {
            n += 1;
            b = self.bufs[b as usize].next_free;
        }
        n
    }

    /// Borrows the pool for a batch of operations (see [`crate::pattern::Pattern::batch`]
    /// for the idea): the array and the freelist head are held in locals until the batch
    /// is dropped.
    #[inline(always)]
    pub fn batch(&mut self) -> Batch<'_> {
        let (bufs, m) = masked(&mut self.bufs);
        Batch {
            bufs,
            m,
            free: self.free,
            home: &mut self.free,
        }
    }

    /// Takes a free buffer and writes `hdr` into it, or `None` if every buffer is in use.
    pub fn alloc(&mut self, hdr: PktHdr) -> Option<BenchPkt> {
        self.batch().alloc(hdr)
    }

    /// Reads the header of `pkt` and returns its buffer to the pool.
    pub fn release(&mut self, pkt: BenchPkt) -> PktHdr {
        self.batch().release(pkt)
    }
}

/// The pool borrowed for a batch of operations (see [`Pool::batch`]).
pub struct Batch<'a> {
    bufs: &'a mut [Buf],
    m: usize,
    free: u32,
    home: &'a mut u32,
}

impl Drop for Batch<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.home = self.free;
    }
}

impl Batch<'_> {
    /// Takes a free buffer and writes `hdr` into it, or `None` if every buffer is in use.
    #[inline(always)]
    pub fn alloc(&mut self, hdr: PktHdr) -> Option<BenchPkt> {
        let buf = NonZeroU32::new(self.free)?;
        let b = &mut self.bufs[buf.get() as usize & self.m];
        self.free = b.next_free;
        b.hdr = hdr;
        Some(BenchPkt { buf, len: hdr.len })
    }

    /// Reads the header of `pkt` and returns its buffer to the pool.
    #[inline(always)]
    pub fn release(&mut self, pkt: BenchPkt) -> PktHdr {
        let b = &mut self.bufs[pkt.buf.get() as usize & self.m];
        // A buffer released twice (a scheduler duplicating packets) makes a cycle in the
        // freelist: later packets share buffers, which the header checks report; nothing
        // unsafe happens.
        b.next_free = self.free;
        self.free = pkt.buf.get();
        b.hdr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_round_trip_lifo() {
        let mut pool = Pool::new(2);
        assert_eq!(std::mem::size_of::<Option<BenchPkt>>(), 8);
        let h = |flow| PktHdr {
            flow,
            len: 100 + flow,
            seq: 7,
        };
        let a = pool.alloc(h(1)).unwrap();
        let b = pool.alloc(h(2)).unwrap();
        assert_ne!(a.buf, b.buf);
        assert_eq!((a.len, b.len), (101, 102));
        assert_eq!(pool.alloc(h(3)), None);
        assert_eq!(pool.release(a), h(1));
        assert_eq!(pool.available(), 1);
        let c = pool.alloc(h(4)).unwrap();
        assert_eq!(c.buf, a.buf, "the last freed buffer is reused first");
        assert_eq!(pool.release(b), h(2));
        assert_eq!(pool.release(c), h(4));
        assert_eq!((pool.available(), pool.size()), (2, 2));
        assert_eq!(c.wire_len(), 104);
    }
}
