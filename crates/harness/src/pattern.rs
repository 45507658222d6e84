//! Arrival patterns: which flow the next generated packet belongs to; and the loop's
//! per-flow state.
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
//! one) and a bitmask of the non-empty levels. Each flow has the counts of packets
//! generated (`enq`) and dequeued (`deq`), whose difference is its backlog and which are
//! the per-flow sequence numbers the harness uses to check per-flow FIFO order.
//!
//! The pattern also holds the rest of the loop's per-flow state, whoever uses it, so that
//! a packet finds all of its flow's in one place: the packet length, the target's key for
//! the flow (`K`, see [`crate::target::Target::Key`]) and the flow's fairness [`Period`]
//! (see [`crate::wfi`]), 32 bytes with the counts (64 with a scheduler's key).
//!
//! Two tables of the same length, indexed by node: the links (`Link`, 4 or 8 bytes,
//! which an x86 address scales for free) and the rest (`Flow`). Node `i < flows` is flow
//! `i`; the sentinels of the level lists are the last `LEVELS` entries, named by
//! `sentinel` from the level alone. Nodes are [`Width`] `I`: `u16` for up to
//! [`NARROW_FLOWS`] flows, so that the tables have `2^16` entries and an index costs
//! nothing (see `slots.rs`), `u32` otherwise.
//!
//! # Invariants
//!
//! - Every flow is on exactly one list, the one of level `min(enq - deq, LEVELS - 1)`;
//!   each list is in the order the flows entered it.
//! - Bit `l` of `levels` is set when level `l`'s list is non-empty: a flow moving onto an
//!   empty list sets it (onto a non-empty one, it is set already). It may also be set for
//!   an empty list: a pick that empties the lowest list clears its bit, other moves leave
//!   it to be cleared lazily, when the lowest set bit turns out to name an empty list,
//!   which saves a test on every move. As every flow is on some list and there is at
//!   least one flow, some set bit names a non-empty list.
//!
//! # Complexity
//!
//! O(1) per packet: picking a flow is one count-trailing-zeros and one load (amortized:
//! each stale bit is cleared once); moving a flow up or down a level is an unlink and a
//! link. The hot loop borrows the selector as a [`Batch`], whose arrays and scalars stay
//! in registers, with the pattern a compile-time constant so that the smooth loop carries
//! no burst state. It splits each packet's work in two ([`Batch::pick`] then
//! [`Batch::commit`]; [`Batch::count_out`] then [`Batch::move_down`]), so that the
//! harness does the rest of the packet's work in between with few values to hold.

use crate::rng::WyRand;
use crate::slots::Width;
use crate::wfi::Period;

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

/// The most flows with `u16` nodes: the sentinels take the last `LEVELS` of `2^16`.
pub const NARROW_FLOWS: usize = (1 << 16) - LEVELS as usize;

/// A flow picked for the next packet (see [`Batch::pick`]).
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    /// The packet generated.
    pub packet: Generated,
    /// The level whose list the flow heads, if it was picked as a head.
    head_of: Option<u32>,
    /// Packets pending on the flow before this one.
    pending: u32,
}

/// A packet counted out of its flow (see [`Batch::count_out`]).
#[derive(Clone, Copy, Debug)]
pub struct Out<I = u32> {
    /// What the pattern knew of the flow.
    pub served: Served,
    flow: I,
    /// Packets pending on the flow before this one left.
    pending: u32,
}

/// A node of a level list: a flow's or a sentinel's.
#[derive(Clone, Copy, Debug, Default)]
struct Link<I> {
    prev: I,
    next: I,
}

/// A flow's state other than its links.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Flow<K> {
    /// Packets generated (wrapping): the sequence number of the next one.
    enq: u32,
    /// Packets dequeued (wrapping): the sequence number the next one must carry.
    deq: u32,
    /// Length of the flow's packets.
    len: u32,
    /// The target's name for the flow.
    key: K,
    /// The fairness accounting of the flow's busy period.
    period: Period,
}

/// The flow selector, and the loop's per-flow state; `K` is the target's key of a flow,
/// `I` names the nodes (see the module's documentation).
#[derive(Clone, Debug)]
pub struct Pattern<K = (), I = u32> {
    /// Flows, then unused nodes, then the `LEVELS` sentinels (see `slots.rs` for the
    /// length).
    links: Box<[Link<I>]>,
    /// By node, as long as `links`; only flows' entries are used.
    flow: Box<[Flow<K>]>,
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
    /// A selector over `flows` (at least one), all empty, with no keys.
    pub fn new(kind: Kind, flows: &[FlowSpec], seed: u64) -> Self {
        Self::with_keys(kind, flows, |_| (), seed)
    }
}

impl<K: Copy, I: Width> Pattern<K, I> {
    /// A selector over `flows` (at least one, and few enough for `I`: at most
    /// [`NARROW_FLOWS`] for `u16`, fewer than `2^31` for `u32`), all empty; flow `i`'s key
    /// is `key(i)`.
    pub fn with_keys(kind: Kind, flows: &[FlowSpec], key: impl Fn(u32) -> K, seed: u64) -> Self {
        assert!(!flows.is_empty(), "a pattern needs at least one flow");
        assert!(flows.len() < 1 << 31, "too many flows");
        let n = flows.len() as u32;
        let len = I::table_len(flows.len() + LEVELS as usize);
        let mut links = vec![Link::default(); len].into_boxed_slice();
        for l in 0..LEVELS {
            let s = sentinel::<I>(l);
            links[len - LEVELS as usize + l as usize] = Link { prev: s, next: s };
        }
        let fill = Flow {
            enq: 0,
            deq: 0,
            len: 0,
            key: key(0),
            period: Period::default(),
        };
        let mut flow = vec![fill; len].into_boxed_slice();
        for (i, (s, f)) in flow.iter_mut().zip(flows).enumerate() {
            s.len = f.len;
            s.key = key(i as u32);
        }
        let mut p = Self {
            links,
            flow,
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
            b.link_tail(I::new(f), 0);
        }
        drop(b);
        p
    }

    /// The pattern.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Packets generated and not yet dequeued for flow `f`.
    pub fn backlog(&self, f: u32) -> u32 {
        let s = &self.flow[f as usize];
        s.enq.wrapping_sub(s.deq)
    }

    /// The fairness accounting of flow `f`'s busy period.
    pub fn period(&self, f: u32) -> &Period {
        &self.flow[f as usize].period
    }

    /// Borrows the selector for a batch of operations: arrays and scalars are held in
    /// locals (registers) until the batch is dropped, which writes the scalars back.
    /// `BURSTY` must be `self.kind() == Kind::Bursty`.
    #[inline(always)]
    pub fn batch<const BURSTY: bool>(&mut self) -> Batch<'_, K, I, BURSTY> {
        debug_assert!(!BURSTY || self.kind == Kind::Bursty);
        let links = &mut self.links[..];
        // As long as `links`, which the compiler sees here.
        let flow = &mut self.flow[..links.len()];
        Batch {
            links: I::table(links),
            flow: I::table(flow),
            levels: self.levels,
            burst_flow: self.burst_flow,
            burst_left: self.burst_left,
            rng: self.rng,
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
        let at = |x: I| x.get() as usize & (self.links.len() - 1);
        for l in 0..LEVELS {
            let s = sentinel::<I>(l);
            let mut x = self.links[at(s)].next;
            assert!(x == s || self.levels >> l & 1 == 1, "mask bit {l}");
            let mut prev = s;
            while x != s {
                let f = x.get();
                assert!(f < self.flows);
                assert!(!seen[f as usize], "flow {f} on two lists");
                seen[f as usize] = true;
                assert_eq!(self.backlog(f).min(TOP), l, "flow {f} on the wrong level");
                assert_eq!(self.links[at(x)].prev, prev);
                prev = x;
                x = self.links[at(x)].next;
            }
            assert_eq!(self.links[at(s)].prev, prev);
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
pub struct Batch<'a, K: 'a, I: Width, const BURSTY: bool> {
    links: I::Table<'a, Link<I>>,
    flow: I::Table<'a, Flow<K>>,
    levels: u64,
    burst_max: &'a [u64],
    burst_flow: u32,
    burst_left: u64,
    rng: WyRand,
    home: Home<'a>,
}

impl<K, I: Width, const BURSTY: bool> Drop for Batch<'_, K, I, BURSTY> {
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

impl<'a, K: Copy + 'a, I: Width, const BURSTY: bool> Batch<'a, K, I, BURSTY> {
    /// The links of node `i` (a flow or a sentinel).
    #[inline(always)]
    fn link(&mut self, i: I) -> &mut Link<I> {
        I::at(&mut self.links, i)
    }

    /// The state of flow `f`.
    #[inline(always)]
    fn flow(&mut self, f: I) -> &mut Flow<K> {
        I::at(&mut self.flow, f)
    }

    /// The target's key of flow `f`.
    #[inline(always)]
    pub fn key(&mut self, f: u32) -> K {
        self.flow(I::new(f)).key
    }

    /// The fairness accounting of flow `f`'s busy period.
    #[inline(always)]
    pub fn period(&mut self, f: u32) -> &mut Period {
        &mut self.flow(I::new(f)).period
    }

    /// Picks the flow of the next packet and counts the packet as pending.
    #[inline(always)]
    pub fn generate(&mut self) -> Generated {
        let p = self.pick();
        self.commit(p);
        p.packet
    }

    /// Picks the flow of the next packet and counts the packet as pending, leaving the
    /// flow where it is until [`Batch::commit`] (the scheduler took the packet) or
    /// [`Batch::refuse`] (it did not). Split so that the loop does the rest of the
    /// packet's work first, then the move, each with only its own values in registers.
    #[inline(always)]
    pub fn pick(&mut self) -> Pick {
        let (f, head_of) = if BURSTY && self.burst_left > 0 {
            self.burst_left -= 1;
            (I::new(self.burst_flow), None)
        } else {
            let (level, f) = self.lowest();
            if BURSTY {
                let max = self.burst_max[f.get() as usize];
                (self.rng, self.burst_left) = new_burst(self.rng, max);
                self.burst_flow = f.get();
            }
            (f, Some(level))
        };
        let c = self.flow(f);
        let seq = c.enq;
        let pending = seq.wrapping_sub(c.deq);
        c.enq = seq.wrapping_add(1);
        Pick {
            packet: Generated {
                flow: f.get(),
                len: c.len,
                seq,
                first: pending == 0,
            },
            head_of,
            pending,
        }
    }

    /// The scheduler took the packet of `p`: its flow goes up one level (a flow already
    /// on the top level goes to its tail, so that flows beyond it are still picked in
    /// turn).
    #[inline(always)]
    pub fn commit(&mut self, p: Pick) {
        let f = I::new(p.packet.flow);
        self.take(p);
        match p.head_of {
            // The flow headed level `l`'s list, so `min(pending, TOP) == l` (see the
            // invariants): below the top it goes to `l + 1`, known from `levels` alone,
            // early, which keeps the next pick from waiting for the loads of the flow's
            // counts (the test, true unless a broken scheduler made the counts
            // inconsistent, is a branch: a guess the processor makes rather than a value
            // it waits for).
            Some(l) if l < TOP && p.pending == l => self.link_tail(f, l + 1),
            // The top level, a flow that was not a head (in a burst), or inconsistent
            // counts.
            _ => {
                branch();
                self.link_tail(f, up(p.pending));
            }
        }
    }

    /// The scheduler refused the packet of `p`: uncounted, and its flow goes to the tail of
    /// its level (where generating and forgetting the packet would put it).
    #[inline(always)]
    pub fn refuse(&mut self, p: Pick) {
        let f = I::new(p.packet.flow);
        let c = self.flow(f);
        c.enq = c.enq.wrapping_sub(1);
        self.take(p);
        self.link_tail(f, p.pending.min(TOP));
    }

    /// Takes the flow of `p` off its list.
    #[inline(always)]
    fn take(&mut self, p: Pick) {
        let f = I::new(p.packet.flow);
        match p.head_of {
            // The head of level `l`'s list: its predecessor is the sentinel.
            Some(l) => self.unlink_head(sentinel(l), f),
            None => self.unlink(f),
        }
    }

    /// The lowest non-empty level, and the first flow on its list.
    #[inline(always)]
    fn lowest(&mut self) -> (u32, I) {
        loop {
            // Some set bit names a non-empty list (see the invariants), so `levels != 0`.
            let l = self.levels.trailing_zeros();
            let s = sentinel::<I>(l);
            let f = self.link(s).next;
            if f != s {
                return (l, f);
            }
            // A stale bit: the list is empty.
            self.levels &= self.levels - 1;
        }
    }

    /// Forgets the last packet generated for `f` (the scheduler refused it).
    #[inline(always)]
    pub fn refused(&mut self, f: u32) {
        let f = I::new(f);
        let c = self.flow(f);
        c.enq = c.enq.wrapping_sub(1);
        let pending = c.enq.wrapping_sub(c.deq);
        if pending < TOP {
            self.unlink(f);
            self.link_tail(f, pending);
        }
    }

    /// A packet of flow `f` left the scheduler.
    #[inline(always)]
    pub fn dequeued(&mut self, f: u32) -> Served {
        let out = self.count_out(f);
        self.move_down(out);
        out.served
    }

    /// Counts a packet of flow `f` out, leaving the flow where it is until
    /// [`Batch::move_down`] (split as [`Batch::pick`] is).
    #[inline(always)]
    pub fn count_out(&mut self, f: u32) -> Out<I> {
        let f = I::new(f);
        let c = self.flow(f);
        let seq = c.deq;
        let pending = c.enq.wrapping_sub(seq);
        c.deq = seq.wrapping_add(1);
        Out {
            served: Served {
                seq,
                emptied: pending == 1,
            },
            flow: f,
            pending,
        }
    }

    /// The flow of `out` goes down one level.
    #[inline(always)]
    pub fn move_down(&mut self, out: Out<I>) {
        // Only a flow below the top level changes list (and never one that had nothing
        // pending: `pending == 0` means a duplicated packet, caught by the sequence check).
        if out.pending.wrapping_sub(1) < TOP {
            self.unlink(out.flow);
            self.link_tail(out.flow, out.pending - 1);
        }
    }

    /// Takes node `f` off its list.
    #[inline(always)]
    fn unlink(&mut self, f: I) {
        let Link { prev, next } = *self.link(f);
        self.link(prev).next = next;
        self.link(next).prev = prev;
    }

    /// Takes node `f`, the first on sentinel `s`'s list, off it; `s`'s level must be the
    /// lowest set bit of `levels` (as [`Batch::lowest`] found it).
    #[inline(always)]
    fn unlink_head(&mut self, s: I, f: I) {
        let next = self.link(f).next;
        self.link(s).next = next;
        self.link(next).prev = s;
        if next == s {
            // The list is now empty: its bit is cleared here rather than found stale by
            // the next pick, which with few flows would be nearly every pick.
            branch();
            self.levels &= self.levels - 1;
        }
    }

    /// Puts node `f` (on no list) at the tail of level `level`'s list.
    #[inline(always)]
    fn link_tail(&mut self, f: I, level: u32) {
        let s = sentinel::<I>(level);
        let tail = self.link(s).prev;
        *self.link(f) = Link {
            prev: tail,
            next: s,
        };
        self.link(tail).next = f;
        self.link(s).prev = f;
        if tail == s {
            // The list was empty. (A non-empty one has its bit set already: the common
            // case costs no update, and the loop's copy of `levels` no dependency.)
            branch();
            self.levels |= 1u64 << level;
        }
    }
}

/// The level above a flow with `pending` packets (the top one for the top level).
#[inline(always)]
fn up(pending: u32) -> u32 {
    if pending < TOP {
        pending + 1
    } else {
        branch();
        TOP
    }
}

/// Keeps the branch that calls it a branch: the compiler may not turn it into
/// branch-free code (conditional moves), which costs on every packet what a
/// well-predicted branch costs only when taken. An empty opaque statement: no
/// instruction.
#[inline(always)]
fn branch() {
    std::hint::black_box(());
}

/// The node of level `l`'s sentinel: `l - LEVELS`, wrapping. Tables are indexed modulo
/// their length, a power of two of at most [`Width::MAX_LEN`], so this names entry
/// `len - LEVELS + l` whatever the length: the loop needs no value of its own for it, nor
/// an operation to bring it in range.
#[inline(always)]
fn sentinel<I: Width>(l: u32) -> I {
    I::new(l.wrapping_sub(LEVELS))
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

    #[test]
    fn tables_are_as_small_as_documented() {
        use std::mem::size_of;
        assert_eq!((size_of::<Link<u16>>(), size_of::<Link<u32>>()), (4, 8));
        assert_eq!(size_of::<Flow<()>>(), 32);
        assert_eq!(size_of::<Flow<pspat_sched::FlowId>>(), 64);
    }

    /// The smooth pattern as specified, by brute force: a flow with the lowest backlog
    /// (backlogs from `TOP` up count as `TOP`), the one that has been at that level
    /// longest; a flow picked on the top level starts waiting there again.
    struct Model {
        backlog: Vec<u32>,
        since: Vec<u64>,
        now: u64,
    }

    impl Model {
        fn level(&self, f: usize) -> u32 {
            self.backlog[f].min(TOP)
        }

        fn moved(&mut self, f: usize) {
            self.now += 1;
            self.since[f] = self.now;
        }

        fn generate(&mut self) -> u32 {
            let f = (0..self.backlog.len())
                .min_by_key(|&f| (self.level(f), self.since[f]))
                .unwrap();
            self.backlog[f] += 1;
            self.moved(f);
            f as u32
        }

        fn refused(&mut self, f: u32) {
            self.backlog[f as usize] -= 1;
            self.moved(f as usize);
        }

        fn dequeued(&mut self, f: u32) {
            let f = f as usize;
            let before = self.level(f);
            self.backlog[f] -= 1;
            if self.level(f) != before {
                self.moved(f);
            }
        }
    }

    /// Random generations, refusals and dequeues (of any backlogged flow, as a scheduler
    /// may choose), with backlogs beyond the top level: both widths pick as the model.
    fn follows_the_model<I: Width>(n: usize, max_pending: u32, seed: u64) {
        let mut p = Pattern::<(), I>::with_keys(Kind::Smooth, &flows(&vec![1; n]), |_| (), 0);
        let mut m = Model {
            backlog: vec![0; n],
            since: (0..n as u64).collect(),
            now: n as u64,
        };
        let mut rng = WyRand::new(seed);
        let mut pending = 0;
        for step in 0..20_000 {
            if pending < max_pending && (pending == 0 || rng.below(100) < 55) {
                let refuse = rng.below(10) == 0;
                // as the loop does (pick, then commit or refuse), or in one call
                let g = if rng.below(2) == 0 {
                    let mut b = p.batch::<false>();
                    let pick = b.pick();
                    if refuse {
                        b.refuse(pick);
                    } else {
                        b.commit(pick);
                    }
                    pick.packet
                } else {
                    let g = p.generate();
                    if refuse {
                        p.refused(g.flow);
                    }
                    g
                };
                assert_eq!(g.flow, m.generate(), "step {step}");
                assert_eq!(g.first, m.backlog[g.flow as usize] == 1);
                pending += 1;
                if refuse {
                    m.refused(g.flow);
                    pending -= 1;
                }
            } else {
                // any backlogged flow
                let mut f = rng.below(n as u64) as u32;
                while m.backlog[f as usize] == 0 {
                    f = (f + 1) % n as u32;
                }
                let served = p.dequeued(f);
                m.dequeued(f);
                assert_eq!(served.emptied, m.backlog[f as usize] == 0, "step {step}");
                pending -= 1;
            }
            if step % 997 == 0 {
                p.check();
            }
        }
        p.check();
    }

    #[test]
    fn both_widths_pick_as_the_model() {
        for (n, max_pending, seed) in [(1, 200, 1), (3, 400, 2), (10, 50, 3), (300, 3000, 4)] {
            follows_the_model::<u16>(n, max_pending, seed);
            follows_the_model::<u32>(n, max_pending, seed);
        }
    }

    #[test]
    fn narrow_tables_hold_the_most_flows() {
        let n = NARROW_FLOWS;
        let mut p = Pattern::<(), u16>::with_keys(Kind::Smooth, &flows(&vec![1; n]), |_| (), 0);
        let order: Vec<u32> = (0..n + 2).map(|_| p.generate().flow).collect();
        assert_eq!(order[n - 1..], [n as u32 - 1, 0, 1]);
        p.dequeued(n as u32 - 1);
        assert_eq!(p.generate().flow, n as u32 - 1);
        p.check();
    }
}
