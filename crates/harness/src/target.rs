//! What the hot loop drives: a registered scheduler, or `none`, the harness's own global
//! FIFO (dummynet's `NONE` column, run when no `-alg` is given: the harness overhead
//! baseline, to subtract from every other figure).
//!
//! The loop is generic over [`Target`], so each target gets its own monomorphised copy and
//! no call in the loop is dynamic. Like the harness's own state, a target is borrowed as a
//! [`Target::Batch`] for the length of a batch of iterations, so that what it can keep in
//! registers stays there.

use pspat_sched::{DropReason, FlowId, Rejected, SchedStats, Scheduler};

use crate::pool::BenchPkt;
use crate::slots::{masked, pow2};

/// Name of the no-scheduler baseline.
pub const NONE: &str = "none";

/// A packet queue driven by the harness. Flows are dense indices `0..flows`.
pub trait Target {
    /// The target's name for a flow, kept in the harness's per-flow table (which the loop
    /// reads anyway) so that enqueueing needs no lookup of the harness's own.
    type Key: Copy;

    /// The target borrowed for a batch of operations.
    type Batch<'a>: Queue<Key = Self::Key>
    where
        Self: 'a;

    /// Canonical name of the algorithm (`none` for the baseline).
    fn name(&self) -> &'static str;

    /// The key of flow `flow` (`0..flows`).
    fn key(&self, flow: u32) -> Self::Key;

    /// Borrows the target for a batch of operations.
    fn batch(&mut self) -> Self::Batch<'_>;

    /// Packets the target holds, by its own count.
    fn backlog_pkts(&self) -> u64;

    /// The scheduler's counters, when there is a scheduler.
    fn stats(&self) -> Option<SchedStats>;
}

/// The data path of a target.
pub trait Queue {
    /// See [`Target::Key`].
    type Key: Copy;

    /// Queues `pkt` on flow `flow`, whose key is `key`, or hands it back with the reason.
    fn enqueue(
        &mut self,
        key: Self::Key,
        flow: u32,
        pkt: BenchPkt,
    ) -> Result<(), Rejected<BenchPkt>>;

    /// The next packet and the index of the flow the target says it belongs to.
    fn dequeue(&mut self) -> Option<(u32, BenchPkt)>;
}

impl<Q: Queue + ?Sized> Queue for &mut Q {
    type Key = Q::Key;

    #[inline(always)]
    fn enqueue(&mut self, key: Q::Key, flow: u32, pkt: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
        (**self).enqueue(key, flow, pkt)
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
        (**self).dequeue()
    }
}

/// A registered scheduler whose flow `i` is `ids[i]`.
pub struct SchedTarget<S> {
    sched: S,
    ids: Vec<FlowId>,
}

impl<S: Scheduler<BenchPkt>> SchedTarget<S> {
    /// Wraps `sched`, whose flow `i` is `ids[i]`; each `ids[i].index()` must be `i`, so
    /// that a dequeued packet's flow index needs no lookup.
    pub fn new(sched: S, ids: &[FlowId]) -> Self {
        assert!(!ids.is_empty(), "at least one flow");
        debug_assert!(ids
            .iter()
            .enumerate()
            .all(|(i, id)| id.index() as usize == i));
        Self {
            sched,
            ids: ids.to_vec(),
        }
    }
}

/// A [`SchedTarget`] borrowed for a batch.
pub struct SchedBatch<'a, S>(&'a mut S);

impl<S: Scheduler<BenchPkt>> Target for SchedTarget<S> {
    type Key = FlowId;

    type Batch<'a>
        = SchedBatch<'a, S>
    where
        S: 'a;

    fn name(&self) -> &'static str {
        self.sched.info().name
    }

    fn key(&self, flow: u32) -> FlowId {
        self.ids[flow as usize]
    }

    #[inline(always)]
    fn batch(&mut self) -> SchedBatch<'_, S> {
        SchedBatch(&mut self.sched)
    }

    fn backlog_pkts(&self) -> u64 {
        self.sched.backlog().pkts
    }

    fn stats(&self) -> Option<SchedStats> {
        Some(self.sched.stats())
    }
}

impl<S: Scheduler<BenchPkt>> Queue for SchedBatch<'_, S> {
    type Key = FlowId;

    #[inline(always)]
    fn enqueue(&mut self, key: FlowId, _: u32, pkt: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
        self.0.enqueue(key, pkt)
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
        self.0.dequeue().map(|(id, pkt)| (id.index(), pkt))
    }
}

/// No scheduler: one global FIFO of fixed capacity, a ring of `(flow, packet)`.
pub struct NoneFifo {
    /// A power-of-two array (see `slots.rs`); entries `head..tail` (wrapping) are
    /// queued.
    ring: Box<[(u32, BenchPkt)]>,
    head: u32,
    tail: u32,
    capacity: u32,
}

impl NoneFifo {
    /// A FIFO holding at most `capacity` packets (`< 2^31`), allocated now.
    pub fn new(capacity: u32) -> Self {
        assert!(capacity < 1 << 31, "capacity too large");
        let fill = (
            0,
            BenchPkt {
                buf: std::num::NonZeroU32::MIN,
                len: 0,
            },
        );
        Self {
            ring: pow2(capacity as usize, fill),
            head: 0,
            tail: 0,
            capacity,
        }
    }
}

/// A [`NoneFifo`] borrowed for a batch: indices in registers, written back on drop.
pub struct NoneBatch<'a> {
    ring: &'a mut [(u32, BenchPkt)],
    m: usize,
    head: u32,
    tail: u32,
    /// `head + capacity` (wrapping): the FIFO is full when `tail` is there. Kept rather
    /// than the capacity because it is constant while only enqueueing: one value for the
    /// check instead of two.
    limit: u32,
    home: (&'a mut u32, &'a mut u32),
}

impl Drop for NoneBatch<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.home.0 = self.head;
        *self.home.1 = self.tail;
    }
}

impl Target for NoneFifo {
    type Key = ();

    type Batch<'a> = NoneBatch<'a>;

    fn name(&self) -> &'static str {
        NONE
    }

    fn key(&self, _: u32) {}

    #[inline(always)]
    fn batch(&mut self) -> NoneBatch<'_> {
        let (ring, m) = masked(&mut self.ring);
        NoneBatch {
            ring,
            m,
            head: self.head,
            tail: self.tail,
            limit: self.head.wrapping_add(self.capacity),
            home: (&mut self.head, &mut self.tail),
        }
    }

    fn backlog_pkts(&self) -> u64 {
        u64::from(self.tail.wrapping_sub(self.head))
    }

    fn stats(&self) -> Option<SchedStats> {
        None
    }
}

impl Queue for NoneBatch<'_> {
    type Key = ();

    #[inline(always)]
    fn enqueue(&mut self, (): (), flow: u32, pkt: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
        // `tail - head <= capacity` always, so this is `tail - head >= capacity`.
        if self.tail == self.limit {
            return Err(Rejected {
                pkt,
                reason: DropReason::SchedulerFull,
            });
        }
        self.ring[self.tail as usize & self.m] = (flow, pkt);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
        if self.head == self.tail {
            return None;
        }
        let (flow, pkt) = &self.ring[self.head as usize & self.m];
        // Field by field, so that the compiler knows `buf` is not 0 and the caller's
        // `Some` needs no test.
        let pkt = BenchPkt {
            buf: pkt.buf,
            len: pkt.len,
        };
        let flow = *flow;
        self.head = self.head.wrapping_add(1);
        self.limit = self.limit.wrapping_add(1);
        Some((flow, pkt))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn pkt(b: u32) -> BenchPkt {
        BenchPkt {
            buf: NonZeroU32::new(b).unwrap(),
            len: 100,
        }
    }

    #[test]
    fn none_is_a_bounded_fifo() {
        let mut q = NoneFifo::new(2);
        let mut b = q.batch();
        b.enqueue((), 3, pkt(1)).unwrap();
        b.enqueue((), 0, pkt(2)).unwrap();
        let e = b.enqueue((), 1, pkt(3)).unwrap_err();
        assert_eq!((e.pkt, e.reason), (pkt(3), DropReason::SchedulerFull));
        drop(b);
        assert_eq!(q.backlog_pkts(), 2);
        let mut b = q.batch();
        assert_eq!(b.dequeue(), Some((3, pkt(1))));
        drop(b);
        assert_eq!(q.backlog_pkts(), 1);
        let mut b = q.batch();
        assert_eq!(b.dequeue(), Some((0, pkt(2))));
        assert_eq!(b.dequeue(), None);
        // wraps around
        for i in 1..=5 {
            b.enqueue((), i, pkt(i)).unwrap();
            assert_eq!(b.dequeue(), Some((i, pkt(i))));
        }
        drop(b);
        assert_eq!(q.name(), "none");
        assert!(q.stats().is_none());
    }
}
