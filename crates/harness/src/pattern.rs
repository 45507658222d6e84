//! Arrival patterns: which flow the next generated packet belongs to.
//!
//! - **smooth** (dummynet's only pattern; QFQ+ paper section 8): the packet goes to a flow
//!   with the lowest backlog, the one that has waited longest at that backlog. With equal
//!   backlogs this is round robin, so every flow is always backlogged and arrivals are as
//!   evenly spread as they can be.
//! - **bursty** (QFQ+ paper section 8: "generates the packets for each flow in bursts of
//!   random size, ranging from 1 to 16w, where w is the weight of the flow"): the flow is
//!   picked as smooth does, then it gets a burst of `uniform[1, 16w]` packets in a row. A
//!   burst interrupted by a draining phase resumes at the next filling phase.
//!
//! # State
//!
//! dummynet's structure, with indices instead of pointers: one circular doubly linked list
//! per backlog level `0..LEVELS` (flows with `LEVELS - 1` packets or more share the last
//! one) and a bitmask of the non-empty levels. Link `i < flows` is flow `i`'s; link
//! `flows + l` is the sentinel of level `l`. Links (8 bytes, so that an index needs no
//! multiplication) are apart from the rest of the per-flow state: the length of the flow's
//! packets and the counts of packets generated (`enq`) and dequeued (`deq`), whose
//! difference is the backlog and which are the per-flow sequence numbers the harness uses
//! to check per-flow FIFO order.
//!
//! # Invariants
//!
//! - Every flow is on exactly one list, the one of level `min(enq - deq, LEVELS - 1)`;
//!   each list is in the order the flows entered it.
//! - Bit `l` of `levels` is set when level `l`'s list is non-empty (it may also be set for
//!   an empty list: bits are cleared lazily, when the lowest set bit turns out to name an
//!   empty list, which saves a test on every move). As every flow is on some list and
//!   there is at least one flow, some set bit names a non-empty list.
//!
//! # Complexity
//!
//! O(1) per packet: picking a flow is one count-trailing-zeros and one load (amortized:
//! each stale bit is cleared once); moving a flow up or down a level is an unlink and a
//! link. The hot loop borrows the selector as a
//! [`Batch`], whose arrays and scalars stay in registers, with the pattern a compile-time
//! constant so that the smooth loop carries no burst state.

use crate::rng::WyRand;
use crate::slots::{mask, pow2};

/// Number of backlog levels (one bit each in a `u64`).
pub const LEVELS: u32 = 64;

const TOP: u32 = LEVELS - 1;

/// Burst size per unit of weight in the bursty pattern (bursts are `1..=16w` packets).
pub const BURST_PER_WEIGHT: u64 = 16;

/// The largest burst a flow of weight `w` gets in the bursty pattern.
pub const fn max_burst(weight: u32) -> u64 {
    BURST_PER_WEIGHT * weight as u64
}

/// Which arrival pattern.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// One packet at a time to a least-backlogged flow.
    #[default]
    Smooth,
    /// Bursts of `1..=16w` packets to a least-backlogged flow.
    Bursty,
}

impl Kind {
    /// The name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Smooth => "smooth",
            Kind::Bursty => "bursty",
        }
    }
}

/// What the pattern needs to know of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Weight (sets the burst size of the bursty pattern).
    pub weight: u32,
    /// Length of every packet of the flow, in bytes.
    pub len: u32,
}

/// A generated packet: its flow, length and per-flow sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    /// Flow index.
    pub flow: u32,
    /// Length in bytes.
    pub len: u32,
    /// Per-flow sequence number (wrapping).
    pub seq: u32,
    /// Whether the flow was empty before this packet.
    pub first: bool,
}

/// What the pattern knew about a dequeued packet's flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The sequence number the flow's next packet must carry (per-flow FIFO order).
    pub seq: u32,
    /// Whether the flow is now empty.
    pub emptied: bool,
}

/// A node of a level list.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    prev: u32,
    next: u32,
}

/// Per-flow state other than the links.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    enq: u32,
    deq: u32,
    len: u32,
}

/// The flow selector.
#[derive(Clone, Debug)]
pub struct Pattern {
    /// Flows then sentinels, in a power-of-two array (see `slots.rs`).
    links: Box<[Link]>,
    /// Per flow, a power-of-two array.
    counts: Box<[Counts]>,
    flows: u32,
    /// Bit `l` set when level `l` may be non-empty (see the invariants).
    levels: u64,
    kind: Kind,
    /// Per flow, for bursty: the largest burst, `16 w`.
    burst_max: Box<[u64]>,
    burst_flow: u32,
    burst_left: u64,
    rng: WyRand,
}

impl Pattern {
    /// A selector over `flows` (at least one), all empty.
    pub fn new(kind: Kind, flows: &[FlowSpec], seed: u64) -> Self {
        let n = flows.len() as u32;
        assert!(n > 0, "a pattern needs at least one flow");
        let mut links = pow2((n + LEVELS) as usize, Link::default());
        for s in n..n + LEVELS {
            links[s as usize] = Link { prev: s, next: s };
        }
        let mut counts = pow2(n as usize, Counts::default());
        for (c, f) in counts.iter_mut().zip(flows) {
            c.len = f.len;
        }
        let mut p = Self {
            links,
            counts,
            flows: n,
            levels: 0,
            kind,
            burst_max: flows.iter().map(|f| max_burst(f.weight)).collect(),
            burst_flow: 0,
            burst_left: 0,
            rng: WyRand::new(seed),
        };
        let mut b = p.batch::<false>();
        for f in 0..n {
            b.link_tail(f, 0);
        }
        drop(b);
        p
    }

    /// The pattern.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Packets generated and not yet dequeued for flow `f`.
    pub fn backlog(&self, f: u32) -> u32 {
        let c = &self.counts[f as usize];
        c.enq.wrapping_sub(c.deq)
    }

    /// Borrows the selector for a batch of operations: arrays and scalars are held in
    /// locals (registers) until the batch is dropped, which writes the scalars back.
    /// `BURSTY` must be `self.kind() == Kind::Bursty`.
    #[inline(always)]
    pub fn batch<const BURSTY: bool>(&mut self) -> Batch<'_, BURSTY> {
        debug_assert!(!BURSTY || self.kind == Kind::Bursty);
        Batch {
            m: mask(&self.links),
            cm: mask(&self.counts),
            flows: self.flows,
            levels: self.levels,
            burst_flow: self.burst_flow,
            burst_left: self.burst_left,
            rng: self.rng,
            links: &mut self.links,
            counts: &mut self.counts,
            burst_max: &self.burst_max,
            home: Home {
                levels: &mut self.levels,
                burst_flow: &mut self.burst_flow,
                burst_left: &mut self.burst_left,
                rng: &mut self.rng,
            },
        }
    }

    /// Picks the flow of the next packet and counts the packet as pending.
    pub fn generate(&mut self) -> Generated {
        match self.kind {
            Kind::Smooth => self.batch::<false>().generate(),
            Kind::Bursty => self.batch::<true>().generate(),
        }
    }

    /// Forgets the last packet generated for `f` (the scheduler refused it).
    pub fn refused(&mut self, f: u32) {
        self.batch::<false>().refused(f);
    }

    /// A packet of flow `f` left the scheduler.
    pub fn dequeued(&mut self, f: u32) -> Served {
        self.batch::<false>().dequeued(f)
    }

    /// Checks the invariants (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut seen = vec![false; self.flows as usize];
        for l in 0..LEVELS {
            let s = self.flows + l;
            let mut x = self.links[s as usize].next;
            assert!(x == s || self.levels >> l & 1 == 1, "mask bit {l}");
            let mut prev = s;
            while x != s {
                assert!(x < self.flows);
                assert!(!seen[x as usize], "flow {x} on two lists");
                seen[x as usize] = true;
                assert_eq!(self.backlog(x).min(TOP), l, "flow {x} on the wrong level");
                assert_eq!(self.links[x as usize].prev, prev);
                prev = x;
                x = self.links[x as usize].next;
            }
        }
        assert!(seen.iter().all(|&s| s), "a flow is on no list");
    }
}

/// Where a [`Batch`] writes its scalars back.
struct Home<'a> {
    levels: &'a mut u64,
    burst_flow: &'a mut u32,
    burst_left: &'a mut u64,
    rng: &'a mut WyRand,
}

/// The selector borrowed for a batch of operations (see [`Pattern::batch`]).
pub struct Batch<'a, const BURSTY: bool> {
    links: &'a mut [Link],
    /// Index mask of `links`.
    m: usize,
    counts: &'a mut [Counts],
    /// Index mask of `counts`.
    cm: usize,
    flows: u32,
    levels: u64,
    burst_max: &'a [u64],
    burst_flow: u32,
    burst_left: u64,
    rng: WyRand,
    home: Home<'a>,
}

impl<const BURSTY: bool> Drop for Batch<'_, BURSTY> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.home.levels = self.levels;
        if BURSTY {
            *self.home.burst_flow = self.burst_flow;
            *self.home.burst_left = self.burst_left;
            *self.home.rng = self.rng;
        }
    }
}

impl<const BURSTY: bool> Batch<'_, BURSTY> {
    #[inline(always)]
    fn at(&self, i: u32) -> usize {
        i as usize & self.m
    }

    #[inline(always)]
    fn counts(&mut self, f: u32) -> &mut Counts {
        &mut self.counts[f as usize & self.cm]
    }

    /// Picks the flow of the next packet and counts the packet as pending.
    #[inline(always)]
    pub fn generate(&mut self) -> Generated {
        let f = if BURSTY && self.burst_left > 0 {
            self.burst_left -= 1;
            self.burst_flow
        } else {
            let f = self.lowest();
            if BURSTY {
                let max = self.burst_max[f as usize];
                (self.rng, self.burst_left) = new_burst(self.rng, max);
                self.burst_flow = f;
            }
            f
        };
        let c = self.counts(f);
        let seq = c.enq;
        let len = c.len;
        let pending = seq.wrapping_sub(c.deq);
        c.enq = seq.wrapping_add(1);
        // Up one level; a flow already on the top level goes to its tail, so that flows
        // beyond it are still picked in turn.
        self.relink(f, if pending < TOP { pending + 1 } else { TOP });
        Generated {
            flow: f,
            len,
            seq,
            first: pending == 0,
        }
    }

    /// The first flow of the lowest non-empty level.
    #[inline(always)]
    fn lowest(&mut self) -> u32 {
        loop {
            // Some set bit names a non-empty list (see the invariants), so `levels != 0`.
            let s = self.flows + self.levels.trailing_zeros();
            let f = self.links[self.at(s)].next;
            if f != s {
                return f;
            }
            // A stale bit: the list is empty.
            self.levels &= self.levels - 1;
        }
    }

    /// Forgets the last packet generated for `f` (the scheduler refused it).
    #[inline(always)]
    pub fn refused(&mut self, f: u32) {
        let c = self.counts(f);
        c.enq = c.enq.wrapping_sub(1);
        let pending = c.enq.wrapping_sub(c.deq);
        if pending < TOP {
            self.relink(f, pending);
        }
    }

    /// A packet of flow `f` left the scheduler.
    #[inline(always)]
    pub fn dequeued(&mut self, f: u32) -> Served {
        let c = self.counts(f);
        let seq = c.deq;
        let pending = c.enq.wrapping_sub(seq);
        c.deq = seq.wrapping_add(1);
        // Only a flow below the top level changes list (and never one that had nothing
        // pending: `pending == 0` means a duplicated packet, caught by the sequence check).
        if pending.wrapping_sub(1) < TOP {
            self.relink(f, pending - 1);
        }
        Served {
            seq,
            emptied: pending == 1,
        }
    }

    /// Moves flow `f` from its list to the tail of level `to`'s.
    #[inline(always)]
    fn relink(&mut self, f: u32, to: u32) {
        let Link { prev, next } = self.links[self.at(f)];
        let (ip, inx) = (self.at(prev), self.at(next));
        self.links[ip].next = next;
        self.links[inx].prev = prev;
        self.link_tail(f, to);
    }

    #[inline(always)]
    fn link_tail(&mut self, f: u32, level: u32) {
        let s = self.flows + level;
        let is = self.at(s);
        let tail = self.links[is].prev;
        let (i, it) = (self.at(f), self.at(tail));
        self.links[i] = Link {
            prev: tail,
            next: s,
        };
        self.links[it].next = f;
        self.links[is].prev = f;
        self.levels |= 1u64 << level;
    }
}

/// The packets left in a new burst of at most `max` (`uniform[1, max]` minus the one being
/// generated). Out of line and by value, so that the loop's state stays in registers.
#[inline(never)]
fn new_burst(mut rng: WyRand, max: u64) -> (WyRand, u64) {
    let left = rng.below(max);
    (rng, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flows of the given weights, each sending 100-byte packets plus its index.
    fn flows(weights: &[u32]) -> Vec<FlowSpec> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| FlowSpec {
                weight,
                len: 100 + i as u32,
            })
            .collect()
    }

    #[test]
    fn smooth_fills_round_robin() {
        let mut p = Pattern::new(Kind::Smooth, &flows(&[1, 5, 1, 2]), 0);
        let order: Vec<u32> = (0..12).map(|_| p.generate().flow).collect();
        assert_eq!(order, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
        p.check();
        // a dequeued flow has the lowest backlog and is picked next
        assert_eq!(
            p.dequeued(2),
            Served {
                seq: 0,
                emptied: false
            }
        );
        assert_eq!(p.generate().flow, 2);
        // then round robin resumes at level 3
        assert_eq!(p.generate().flow, 0);
        p.check();
    }

    #[test]
    fn sequence_numbers_and_emptiness() {
        let mut p = Pattern::new(Kind::Smooth, &flows(&[1]), 0);
        assert_eq!(
            p.generate(),
            Generated {
                flow: 0,
                len: 100,
                seq: 0,
                first: true
            }
        );
        assert_eq!(
            p.generate(),
            Generated {
                flow: 0,
                len: 100,
                seq: 1,
                first: false
            }
        );
        assert_eq!(
            p.dequeued(0),
            Served {
                seq: 0,
                emptied: false
            }
        );
        assert_eq!(
            p.dequeued(0),
            Served {
                seq: 1,
                emptied: true
            }
        );
        assert_eq!(
            p.generate(),
            Generated {
                flow: 0,
                len: 100,
                seq: 2,
                first: true
            }
        );
        p.refused(0);
        assert_eq!(p.backlog(0), 0);
        assert_eq!(
            p.generate(),
            Generated {
                flow: 0,
                len: 100,
                seq: 2,
                first: true
            }
        );
        p.check();
    }

    #[test]
    fn flows_beyond_the_top_level_share_it() {
        let mut p = Pattern::new(Kind::Smooth, &flows(&[1, 1]), 0);
        for _ in 0..2 * (LEVELS + 10) {
            p.generate();
        }
        // still round robin on the top level
        assert_eq!((p.backlog(0), p.backlog(1)), (LEVELS + 10, LEVELS + 10));
        p.check();
        for _ in 0..LEVELS + 10 {
            p.dequeued(1);
            p.check();
        }
        assert_eq!(p.generate().flow, 1);
        p.check();
    }

    #[test]
    fn bursts_stay_within_one_to_sixteen_w() {
        let weights = [1, 3, 8];
        // Two bursts of one flow may follow each other, so burst starts are read from the
        // pattern's state rather than guessed from runs of the same flow.
        let mut p = Pattern::new(Kind::Bursty, &flows(&weights), 42);
        assert_eq!(max_burst(8), 128);
        let mut sizes = vec![Vec::new(); 3];
        let mut cur: Option<(u32, u64)> = None;
        for i in 0..20_000 {
            let starts = p.burst_left == 0;
            let g = p.generate();
            if starts {
                if let Some((f, n)) = cur.take() {
                    sizes[f as usize].push(n);
                }
                cur = Some((g.flow, 0));
            }
            cur.as_mut().unwrap().1 += 1;
            // drain now and then, as the controller would
            if i % 64 == 63 {
                for f in 0..3 {
                    while p.backlog(f) > 0 {
                        p.dequeued(f);
                    }
                }
            }
        }
        for (f, s) in sizes.iter().enumerate() {
            let max = 16 * u64::from(weights[f]);
            assert!(s.len() > 20, "flow {f} got {} bursts", s.len());
            assert!(s.iter().all(|&n| (1..=max).contains(&n)), "flow {f}: {s:?}");
            // the whole range is used: small and large bursts both occur
            assert!(s.iter().any(|&n| n <= max / 4), "flow {f}: {s:?}");
            assert!(s.iter().any(|&n| n > 3 * max / 4), "flow {f}: {s:?}");
        }
        p.check();
    }

    #[test]
    fn same_seed_same_bursts() {
        let run = |seed| {
            let mut p = Pattern::new(Kind::Bursty, &flows(&[1, 2, 3, 4]), seed);
            (0..500).map(|_| p.generate().flow).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }
}
