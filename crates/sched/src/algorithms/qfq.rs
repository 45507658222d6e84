//! QFQ: Quick Fair Queueing, O(1) with near-optimal guarantees.
//!
//! F. Checconi, L. Rizzo, P. Valente, "QFQ: Efficient packet scheduling with tight
//! guarantees", IEEE/ACM ToN 21(3), 2013. The per-flow variant here is the one FreeBSD
//! dummynet ships (`dn_sched_qfq.c`); the same group machinery ([`QfqCore`]) schedules
//! aggregates in QFQ+ ([`super::qfq_plus`]), the variant Linux ships (`sch_qfq.c`).
//!
//! QFQ approximates WF2Q+ (see [`super::wf2qp`]): each flow carries the exact WF2Q+ start
//! and finish times `S`, `F`, but the scheduling decisions use rounded values, so that they
//! can be made with a few bit operations instead of heaps.
//!
//! # Groups and slots
//!
//! A flow of weight `w` and maximum packet `L` belongs to *group* `g`, the smallest with a
//! slot size `sigma_g = 2^(MIN_SLOT_SHIFT + g) >= L / w` (timestamp units, below). A flow
//! never advances its `F` past `S + sigma_g` per packet. Within a group, flows are kept in
//! *slots* by their start time rounded down to the slot size, `S^ = floor(S / sigma_g)
//! sigma_g`: slot `i` of the group holds the flows with `S^ = grp.S + i sigma_g`, `grp.S`
//! being the rounded start of the earliest non-empty slot. The group's own timestamps are
//! `grp.S` and `grp.F = grp.S + 2 sigma_g`, an upper bound of the finish time of every flow
//! in its front slot (`F <= S + sigma_g < grp.S + 2 sigma_g`). A slot is a singly linked
//! list through the flows' `next` fields with a head and a tail index, first in first out.
//! Order within a slot is free (the timestamps are equal once rounded); Linux and dummynet
//! push at the head (LIFO), which with thousands of flows in a slot serves them in the
//! reverse of their arrival order, against the order of their flow entries and packets in
//! memory (QFQ+ on 32k flows ran 4 to 40% slower so, docs/PERFORMANCE.md), and makes the
//! entity requeued first in a slot wait for all the others. FIFO serves them in arrival
//! order, for one more store per insertion (the old tail's `next`). `full` has bit `i` set when slot `i` is not empty
//! and, between operations, bit 0 set whenever the group is (the front slot is slot 0).
//! There are `SLOTS = 64` slots (QFQ's analysis needs a handful; the rest absorbs the
//! corner cases below).
//!
//! # Group sets
//!
//! Every non-empty group is in exactly one of four sets, one `u64` bitmap each, bit `g`
//! for group `g`:
//!
//! - eligible (`grp.S <= V`) or ineligible (`grp.S > V`),
//! - *blocked* if the first eligible-ready group with a higher index finishes earlier
//!   (`grp.F > next.F`), *ready* otherwise:
//!
//! ER, IR, EB, IB. The invariants of the paper make the lowest group in ER the one with
//! the smallest `F` among eligible groups (ER is sorted by `F` as by index), so the next
//! flow to serve is the head of the front slot of group `ffs(ER)`: no search. Groups move
//! between sets by masks: when `V` crosses a multiple of `2^(MIN_SLOT_SHIFT + b)`, every
//! ineligible group `g <= b` becomes eligible (an ineligible group's `S` is the first
//! multiple of its slot size after `V`), which is one XOR, one leading-zero count and two
//! mask moves; when the served group's `F` grows, the groups it blocked are unblocked by
//! mask.
//!
//! # Virtual time and timestamps
//!
//! `V` advances by `len / W` per dequeued packet, `W` the sum of the weights of all flows
//! (as in [`super::wf2qp`]), and jumps to the smallest group start when no group is
//! eligible. Timestamps are wrapping `u64` in the unit of [`crate::vtime`] (bytes per unit
//! weight, 32 fractional bits): see [`crate::util::stamp`].
//!
//! **Bit budget.** A flow's slot size is `L / w` with `L` in `1..=2^20` and `w` in
//! `1..=2^16`: from `2^-16` to `2^20` bytes per unit weight, `2^16` to `2^52` units. So
//! `MIN_SLOT_SHIFT = 16` and groups `0..=36` cover every flow the crate accepts, no range
//! is refused, and `V >> MIN_SLOT_SHIFT` (48 bits) indexes the eligibility masks. (Linux
//! uses 30 fractional bits and 25 groups for weights up to 2^10 and `L` from 512 to 2^16;
//! FreeBSD 30 bits and 20 groups for `L` up to 2000. 32 bits and 37 groups cost nothing
//! more here: the bitmaps are `u64` either way.) Live timestamps stay within a few
//! `sigma_36 = 2^52` of `V`, far inside the `2^63` window of wrapping comparison.
//!
//! # Per-flow timestamps (the dummynet variant)
//!
//! - A flow becoming backlogged gets `S = F` if its old `F` is still plausible
//!   (`V < F <= floor(V / sigma) sigma + sigma`), else `S = V` — unless the first ready
//!   group with an index `>= g` finishes before the flow's rounded `F`, in which case `S`
//!   is that group's `F` (or the limit above, if smaller): this keeps ER sorted.
//!   `F = S + len / w`.
//! - On a dequeue `S = F` and `F = S + next_len / w`; the flow moves to another slot only
//!   if its rounded `S` changed.
//!
//! Only `S` is stored ([`QfqEnt::s`]). A scheduled entity's `F` is `S` plus the cost of its
//! head, and nothing reads it before that head is served: the group's own timestamps come
//! from the rounded `S`, and a dequeue's `S = F` is `S + len / w` with `len` the packet
//! just served (the same packet, the same value as storing `F` when it became the head).
//! Once the entity is idle, the stored value is the `F` of its last service, which is all
//! the rule for a newly backlogged entity reads. So the dequeue does not look at the next
//! head's length, and the per-flow state is 8 bytes smaller (24 bytes with the cost:
//! fewer flows' state crosses into a cache line their flow-table entry does not use).
//!
//! # Corner cases
//!
//! The slot window is finite. When `V` jumps ahead by a large packet of a light flow, a
//! group of flows with tiny slots can lag `V` by more slots than the window holds, and a
//! flow joining it then falls outside. As Linux does, the flow's timestamps are then moved
//! back to the last slot (`slot_caps` counts this), or, when it would go before the front
//! and the bits would not fit, forward to the first slot that fits (`rotate_clamps`):
//! nothing is lost or reordered within a flow, only that flow's place among the others
//! changes, by at most the lag. Neither happens when the ratios of packet sizes and weights
//! keep lags within the window (every test workload of this crate but the extreme ones).
//!
//! Control operations (removing a backlogged flow, re-weighting one) recompute the group
//! sets from their definition ([`QfqCore::rebuild`], O(groups)), instead of the
//! incremental updates of the data path.
//!
//! # Complexity and guarantee
//!
//! O(1) per packet: a constant number of bit operations, no loop over flows or groups.
//! Removing a backlogged flow walks its slot (control path).
//!
//! T-WFI (pspat-architecture.md eq. 2, with the transmit queue `Q` of QFQ+ paper eq. 2):
//! `T-WFI <= 6 L_k / (phi_k R) + (Q + L - L_k) / R`, `phi_k = w_k / W`, `Q` the transmit
//! queue plus one maximum packet (the packet on the wire is charged at dequeue).

use crate::error::ConfigError;
use crate::flow::FlowParams;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, Params, ServiceClass};
use crate::table::{FlowTable, NIL};
use crate::util::stamp::{after, round_down, Clock, Recip, FRAC_BITS};

/// Slot size of group 0 is `2^MIN_SLOT_SHIFT` timestamp units (`2^-16` bytes per unit
/// weight).
pub const MIN_SLOT_SHIFT: u32 = 16;

/// Number of groups: group 36 has slots of `2^52` units, `2^20` bytes per unit weight.
pub const GROUPS: usize = 37;

/// Slots per group.
pub const SLOTS: u32 = 64;

/// The last slot a newly inserted entity may occupy (one spare for a later rotation).
const LAST_SLOT: u64 = SLOTS as u64 - 2;

/// Group sets, as indices into the bitmaps.
const ER: usize = 0;
const IR: usize = 1;
const EB: usize = 2;
const IB: usize = 3;

/// The group whose slots are the smallest that hold a packet of `len` bytes at weight
/// `weight`: the smallest `g` with `2^(MIN_SLOT_SHIFT + g) >= len / weight`, computed
/// exactly (so every rounded-down cost of this crate fits).
pub fn group_of(len: u32, weight: u64) -> u8 {
    let exact = (u128::from(len) << FRAC_BITS).div_ceil(u128::from(weight.max(1)));
    let bits = 128 - (exact.max(1) - 1).leading_zeros(); // ceil(log2(exact))
    let g = bits.saturating_sub(MIN_SLOT_SHIFT) as usize;
    assert!(g < GROUPS, "slot size {exact} beyond the bit budget");
    g as u8
}

/// Slot shift of group `g`.
#[inline(always)]
pub fn shift_of(g: u8) -> u32 {
    MIN_SLOT_SHIFT + u32::from(g)
}

/// The QFQ state of a scheduled entity (a flow in QFQ, an aggregate in QFQ+).
#[derive(Clone, Copy, Debug)]
pub struct QfqEnt {
    /// While the entity is scheduled (or in service, QFQ+): its exact virtual start time
    /// `S`. While it is idle: the exact virtual finish time `F` of its last service. (A
    /// scheduled entity's `F` is `S` plus the cost of its head; see the module
    /// documentation.)
    pub s: u64,
    /// Next entity in the same slot.
    pub next: u32,
    /// Group index.
    pub grp: u8,
}

impl Default for QfqEnt {
    fn default() -> Self {
        Self {
            s: 0,
            next: NIL,
            grp: 0,
        }
    }
}

/// Where [`QfqCore`] finds the state of entity `e`.
pub trait Entities {
    /// The QFQ state of entity `e`.
    fn ent(&mut self, e: u32) -> &mut QfqEnt;
}

/// One group: its timestamps and its slots.
#[derive(Clone, Debug)]
struct Group {
    /// Rounded start of the front slot (slot 0).
    s: u64,
    /// `s + 2 sigma`.
    f: u64,
    /// Bit `i`: slot `i` (from the front) is not empty.
    full: u64,
    /// Index in `heads` of slot 0.
    front: u32,
    /// First entity of each slot (`NIL`: empty), indexed modulo [`SLOTS`].
    heads: [u32; SLOTS as usize],
    /// Last entity of each slot (meaningful only when the slot is not empty).
    tails: [u32; SLOTS as usize],
}

impl Default for Group {
    fn default() -> Self {
        Self {
            s: 0,
            f: 0,
            full: 0,
            front: 0,
            heads: [NIL; SLOTS as usize],
            tails: [NIL; SLOTS as usize],
        }
    }
}

impl Group {
    /// Links entity `e` at the tail of the slot at index `i` of `heads`/`tails`
    /// (`occupied`: the slot already holds entities). The caller keeps `full` and `e.next`.
    #[inline(always)]
    fn link_tail<E: Entities>(&mut self, store: &mut E, i: usize, e: u32, occupied: bool) {
        if occupied {
            store.ent(self.tails[i]).next = e;
        } else {
            self.heads[i] = e;
        }
        self.tails[i] = e;
    }
}

/// The group machinery of QFQ over entities stored elsewhere: slots, group sets and the
/// system virtual time. Shared by [`Qfq`] (entities are flows) and QFQ+ (aggregates).
#[derive(Clone, Debug)]
pub struct QfqCore {
    clock: Clock,
    /// ER, IR, EB, IB.
    sets: [u64; 4],
    /// 64 entries so that any bit index is a valid index; `GROUPS` are used.
    groups: Box<[Group; 64]>,
    slot_caps: u64,
    rotate_clamps: u64,
    rebuilds: u64,
}

impl Default for QfqCore {
    fn default() -> Self {
        Self::new()
    }
}

impl QfqCore {
    /// No entities, `V = 0`.
    pub fn new() -> Self {
        let groups: Box<[Group; 64]> = vec![Group::default(); 64]
            .into_boxed_slice()
            .try_into()
            .expect("64 groups");
        Self {
            clock: Clock::new(),
            sets: [0; 4],
            groups,
            slot_caps: 0,
            rotate_clamps: 0,
            rebuilds: 0,
        }
    }

    /// The system virtual time.
    #[inline(always)]
    pub fn vtime(&self) -> u64 {
        self.clock.now()
    }

    /// Adds `delta` to the weight sum `V` divides by.
    pub fn add_weight(&mut self, delta: i64) {
        self.clock.add_weight(delta);
    }

    /// `V += len / W`.
    #[inline(always)]
    pub fn advance(&mut self, len: u32) {
        self.clock.advance(len);
    }

    /// `V += bytes / W` for several packets at once (QFQ+: once per aggregate service).
    #[inline(always)]
    pub fn advance_bytes(&mut self, bytes: u64) {
        self.clock.advance_bytes(bytes);
    }

    /// `V = max(V, t)`.
    #[inline(always)]
    pub fn catch_up(&mut self, t: u64) {
        if after(t, self.clock.now()) {
            self.clock.set(t);
        }
    }

    /// Whether no entity is scheduled.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        (self.sets[ER] | self.sets[IR] | self.sets[EB] | self.sets[IB]) == 0
    }

    #[inline(always)]
    fn grp(&self, g: usize) -> &Group {
        &self.groups[g & 63]
    }

    #[inline(always)]
    fn grp_mut(&mut self, g: usize) -> &mut Group {
        &mut self.groups[g & 63]
    }

    /// The entity to serve next: the head of the front slot of the first ER group.
    #[inline(always)]
    pub fn first(&self) -> Option<u32> {
        let er = self.sets[ER];
        if er == 0 {
            return None;
        }
        let grp = self.grp(er.trailing_zeros() as usize);
        Some(grp.heads[(grp.front & (SLOTS - 1)) as usize])
    }

    /// Counters: (slot caps, rotation clamps, set rebuilds).
    pub fn counters(&self) -> [(&'static str, u64); 3] {
        [
            ("slot_caps", self.slot_caps),
            ("rotate_clamps", self.rotate_clamps),
            ("set_rebuilds", self.rebuilds),
        ]
    }

    /// The set group `g` belongs in, from its timestamps and the current ER set (which must
    /// not contain `g`).
    #[inline(always)]
    fn state_of(&self, g: usize) -> usize {
        let grp = self.grp(g);
        let mut state = usize::from(after(grp.s, self.clock.now())); // IR if S > V
        let higher = self.sets[ER] & !((1u64 << g) - 1);
        if higher != 0 {
            let next = self.grp(higher.trailing_zeros() as usize);
            if after(grp.f, next.f) {
                state |= EB; // EB = ER | 2, IB = IR | 2
            }
        }
        state
    }

    #[inline(always)]
    fn move_groups(&mut self, mask: u64, src: usize, dst: usize) {
        self.sets[dst] |= self.sets[src] & mask;
        self.sets[src] &= !mask;
    }

    /// Group `g`, the first ER group, left ER or increased its `F` from `old_f`: the
    /// groups below it that it was blocking are blocked no more, unless the next ER group
    /// above it finishes no later than `old_f` (then it blocks them all the same).
    #[inline(always)]
    fn unblock(&mut self, g: usize, old_f: u64) {
        let below = (1u64 << g) - 1;
        if (self.sets[EB] | self.sets[IB]) & below == 0 {
            return; // nothing below is blocked (always so with one group)
        }
        let above = self.sets[ER] & !((2u64 << g) - 1);
        if above != 0 && !after(self.grp(above.trailing_zeros() as usize).f, old_f) {
            return;
        }
        self.move_groups(below, EB, ER);
        self.move_groups(below, IB, IR);
    }

    /// `V` moved from `old_v`: the ineligible groups whose start it passed become eligible.
    /// An ineligible group's start is the first multiple of its slot size after `V`, so it
    /// was passed exactly when `V` crossed a multiple of `2^(MIN_SLOT_SHIFT + g)`: when the
    /// highest bit in which `V >> MIN_SLOT_SHIFT` changed is at least `g`. (A wrap of `V`
    /// changes the top bit: a crossing of every boundary, which it is, modulo `2^64`.)
    #[inline(always)]
    pub fn make_eligible(&mut self, old_v: u64) {
        let flips = (self.clock.now() >> MIN_SLOT_SHIFT) ^ (old_v >> MIN_SLOT_SHIFT);
        if flips != 0 {
            let top = 63 - flips.leading_zeros();
            let mask = (2u64 << top).wrapping_sub(1);
            self.move_groups(mask, IR, ER);
            self.move_groups(mask, IB, EB);
        }
    }

    /// After `V` moved from `old_v`: `V = max(V, min S)` if no group is eligible (the
    /// smallest start is that of the lowest ineligible group: the next multiple of its slot
    /// size after `V` is the smallest), then the groups passed become eligible.
    #[inline(always)]
    pub fn update_eligible(&mut self, old_v: u64) {
        let ineligible = self.sets[IR] | self.sets[IB];
        if ineligible != 0 {
            if self.sets[ER] == 0 {
                let s = self.grp(ineligible.trailing_zeros() as usize).s;
                self.catch_up(s);
            }
            self.make_eligible(old_v);
        }
    }

    /// The start time of entity `e` (group `g`), idle and becoming backlogged, `e.s`
    /// being the finish time of its last service (the dummynet/Linux rule, see the module
    /// documentation).
    #[inline(always)]
    pub fn start_of(&self, e: &QfqEnt) -> u64 {
        let g = usize::from(e.grp);
        let shift = shift_of(e.grp);
        let v = self.clock.now();
        let last_f = e.s;
        let rounded_f = round_down(last_f, shift);
        let limit = round_down(v, shift).wrapping_add(1u64 << shift);
        if after(last_f, v) && !after(rounded_f, limit) {
            return last_f; // still plausible: no credit lost, none gained
        }
        let higher = self.sets[ER] & !((1u64 << g) - 1);
        if higher != 0 {
            let next_f = self.grp(higher.trailing_zeros() as usize).f;
            if after(rounded_f, next_f) {
                return if after(limit, next_f) { next_f } else { limit };
            }
        }
        v
    }

    /// Puts entity `e` (stamped, not scheduled) in its group's slots, updating the group's
    /// timestamps and set. `may_jump`: nothing is in service outside the groups, so `V`
    /// may jump to the entity's start if no group is eligible (QFQ+ keeps an aggregate in
    /// service outside the groups, and then `V` must not move).
    #[inline(always)]
    pub fn schedule<E: Entities>(&mut self, store: &mut E, e: u32, may_jump: bool) {
        let ent = *store.ent(e);
        let g = usize::from(ent.grp);
        let shift = shift_of(ent.grp);
        let mut rs = round_down(ent.s, shift);
        let (full, gs) = {
            let grp = self.grp(g);
            (grp.full, grp.s)
        };
        if full != 0 {
            if !after(gs, ent.s) {
                // Behind the front: the group's timestamps and set stay.
                self.insert(store, g, e, rs);
                return;
            }
            // Before the front: the front moves back to the entity's slot. The group was
            // in some set: take it out of all of them and recompute.
            let mut d = gs.wrapping_sub(rs) >> shift;
            let room = u64::from(full.leading_zeros());
            if d > room {
                // The occupied slots would leave the window: the entity starts later, in
                // the earliest slot that fits.
                d = room;
                let new_rs = gs.wrapping_sub(d << shift);
                let delta = new_rs.wrapping_sub(rs);
                let en = store.ent(e);
                en.s = en.s.wrapping_add(delta); // and F with it, implicitly
                rs = new_rs;
                self.rotate_clamps += 1;
            }
            let grp = self.grp_mut(g);
            grp.full <<= d;
            grp.front = grp.front.wrapping_sub(d as u32) & (SLOTS - 1);
            let keep = !(1u64 << g);
            for set in &mut self.sets {
                *set &= keep;
            }
        } else if may_jump && self.sets[ER] == 0 && after(rs, self.clock.now()) {
            // Nothing eligible: V = max(V, min S), and this is the smallest S.
            self.clock.set(rs);
        }
        let grp = self.grp_mut(g);
        grp.s = rs;
        grp.f = rs.wrapping_add(2u64 << shift);
        let state = self.state_of(g);
        self.sets[state] |= 1u64 << g;
        self.insert(store, g, e, rs);
    }

    /// Links `e`, whose rounded start is `rs >= grp.s`, at the tail of its slot of group
    /// `g`.
    #[inline(always)]
    fn insert<E: Entities>(&mut self, store: &mut E, g: usize, e: u32, rs: u64) {
        let shift = shift_of(g as u8);
        let grp = &mut self.groups[g & 63];
        let mut slot = rs.wrapping_sub(grp.s) >> shift;
        if slot > LAST_SLOT {
            // Beyond the window: move the entity back to the last slot.
            let delta = rs.wrapping_sub(grp.s).wrapping_sub(LAST_SLOT << shift);
            let en = store.ent(e);
            en.s = en.s.wrapping_sub(delta); // and F with it, implicitly
            slot = LAST_SLOT;
            self.slot_caps += 1;
        }
        let i = ((u64::from(grp.front) + slot) & u64::from(SLOTS - 1)) as usize;
        store.ent(e).next = NIL;
        let occupied = grp.heads[i] != NIL;
        grp.link_tail(store, i, e, occupied);
        grp.full |= 1u64 << slot;
    }

    /// Unlinks the head of the front slot of group `g` (which must be `e`).
    #[inline(always)]
    fn remove_front<E: Entities>(&mut self, store: &mut E, g: usize, e: u32) {
        let grp = &mut self.groups[g & 63];
        let i = (grp.front & (SLOTS - 1)) as usize;
        debug_assert_eq!(grp.heads[i], e);
        let next = store.ent(e).next;
        grp.heads[i] = next;
        if next == NIL {
            grp.full &= !1;
        }
    }

    /// Makes the first non-empty slot of group `g` its front; returns its head.
    #[inline(always)]
    fn scan(&mut self, g: usize) -> Option<u32> {
        let grp = &mut self.groups[g & 63];
        if grp.full == 0 {
            return None;
        }
        let i = grp.full.trailing_zeros();
        grp.front = (grp.front + i) & (SLOTS - 1);
        grp.full >>= i;
        Some(grp.heads[grp.front as usize])
    }

    /// The front entity `e` of group `g`, the first ER group, has left its slot (it was
    /// served or moved to a later slot): the group's front, timestamps and set follow,
    /// and the groups it blocked may be unblocked.
    #[inline(always)]
    fn front_changed<E: Entities>(&mut self, store: &mut E, g: usize) {
        let old_f = self.grp(g).f;
        match self.scan(g) {
            None => {
                self.sets[ER] &= !(1u64 << g);
                self.unblock(g, old_f);
            }
            Some(head) => {
                let rs = round_down(store.ent(head).s, shift_of(g as u8));
                if rs == self.grp(g).s {
                    return; // same front slot: nothing moved
                }
                let grp = self.grp_mut(g);
                grp.s = rs;
                grp.f = rs.wrapping_add(2u64 << shift_of(g as u8));
                self.regroup_first(g, old_f);
            }
        }
    }

    /// Takes `e`, the entity [`QfqCore::first`] returned, out of the schedule (QFQ+: it
    /// goes into service). `V` is not updated.
    #[inline(always)]
    pub fn take_first<E: Entities>(&mut self, store: &mut E, e: u32) {
        let g = usize::from(store.ent(e).grp);
        self.remove_front(store, g, e);
        self.front_changed(store, g);
    }

    /// `e`, the entity [`QfqCore::first`] returned, was served and its timestamp advanced
    /// (`e.s = F` already updated; `more`: still backlogged). Moves it to its new slot,
    /// or out of the schedule, and updates `V`'s consequences (`old_v`: `V` before this
    /// packet was charged).
    ///
    /// `ent` is `e`'s state as the caller just wrote it, so that the common cases read
    /// nothing back from `store`: the caller has the entity at hand, and every look-up
    /// into a flow table costs a masked index and a multiplication.
    #[inline(always)]
    pub fn served<E: Entities>(
        &mut self,
        store: &mut E,
        e: u32,
        ent: QfqEnt,
        more: bool,
        old_v: u64,
    ) {
        self.reslot_served(store, e, ent, more);
        self.update_eligible(old_v);
        self.ensure_ready(true);
    }

    /// The slot and group part of [`QfqCore::served`]. Four cases avoid the generic
    /// remove/insert/rescan sequence, by what the front slot holds besides `e` (its head):
    ///
    /// - `e` stays in the front slot (its rounded start did not change): nothing moves.
    /// - Others follow `e` in the front slot: the slot keeps its rounded start, so the
    ///   group's front, timestamps and set stay; `e` leaves, or joins the tail of its new
    ///   slot.
    /// - `e` was alone and moves to slot `k` with no non-empty slot between: slot `k`
    ///   becomes the front and the group's new start is `e`'s own rounded start, known
    ///   without reading the new head (with one flow: every packet of a flow whose slot
    ///   is at most one packet long).
    /// - Otherwise (`e` alone and leaving, or an earlier slot becomes the front): the
    ///   generic path, which reads the new front head's start.
    #[inline(always)]
    fn reslot_served<E: Entities>(&mut self, store: &mut E, e: u32, ent: QfqEnt, more: bool) {
        let g = usize::from(ent.grp);
        let shift = shift_of(ent.grp);
        let grp = &mut self.groups[g & 63];
        let front = (grp.front & (SLOTS - 1)) as usize;
        debug_assert_eq!(grp.heads[front], e);
        if !more {
            if ent.next != NIL {
                grp.heads[front] = ent.next; // the front slot stays non-empty
                return;
            }
            self.remove_front(store, g, e);
            self.front_changed(store, g);
            return;
        }
        let rs = round_down(ent.s, shift);
        let slot = rs.wrapping_sub(grp.s) >> shift;
        if slot == 0 {
            return; // same slot: nothing moves
        }
        if slot <= LAST_SLOT {
            if ent.next != NIL {
                // The front slot keeps its other entities (and its rounded start).
                grp.heads[front] = ent.next;
                let i = ((front as u64 + slot) & u64::from(SLOTS - 1)) as usize;
                let occupied = grp.full & (1u64 << slot) != 0;
                grp.link_tail(store, i, e, occupied);
                grp.full |= 1u64 << slot;
                store.ent(e).next = NIL;
                return;
            }
            let rest = grp.full & !1;
            if u64::from(rest.trailing_zeros()) >= slot {
                // `e` was alone: its new slot becomes the front (behind the entities
                // already there, if any), with `e`'s rounded start. `e.next` is NIL.
                let i = ((front as u64 + slot) & u64::from(SLOTS - 1)) as usize;
                grp.heads[front] = NIL;
                grp.link_tail(store, i, e, rest & (1u64 << slot) != 0);
                grp.full = (rest | (1u64 << slot)) >> slot;
                grp.front = i as u32;
                let old_f = grp.f;
                grp.s = rs;
                grp.f = rs.wrapping_add(2u64 << shift);
                self.regroup_first(g, old_f);
                return;
            }
        }
        self.remove_front(store, g, e);
        self.insert(store, g, e, rs);
        self.front_changed(store, g);
    }

    /// Group `g`, the first ER group, has a new front slot with a later start (`old_f`:
    /// its finish before): its set follows, and the groups it blocked may be unblocked.
    ///
    /// The common outcome is that the group stays in ER (with one group, always): the sets
    /// are then not written at all, which keeps the next `first()` off a store-to-load
    /// chain through `sets[ER]`.
    #[inline(always)]
    fn regroup_first(&mut self, g: usize, old_f: u64) {
        let grp = self.grp(g);
        let ineligible = after(grp.s, self.clock.now());
        let higher = self.sets[ER] & !((2u64 << g) - 1);
        let blocked = higher != 0 && after(grp.f, self.grp(higher.trailing_zeros() as usize).f);
        if ineligible | blocked {
            self.sets[ER] &= !(1u64 << g);
            let state = usize::from(ineligible) | if blocked { EB } else { ER };
            self.sets[state] |= 1u64 << g;
        }
        self.unblock(g, old_f);
    }

    /// Every backlogged entity is in a group and some group is in ER, by the invariants.
    /// Should a corner case (a capped or clamped timestamp) have broken them, recompute the
    /// sets rather than stall: a scheduler with packets must always name one.
    #[inline(always)]
    pub fn ensure_ready(&mut self, may_jump: bool) {
        if self.sets[ER] == 0 && !self.is_empty() {
            self.rebuild(may_jump);
        }
    }

    /// Takes entity `e` out of the schedule, wherever it is (control path: walks its slot),
    /// with `F = S` (its head was not served: `e.s` now reads as the finish of its last
    /// service and keeps its value) and recomputes the group sets.
    pub fn remove<E: Entities>(&mut self, store: &mut E, e: u32, may_jump: bool) {
        let ent = *store.ent(e);
        let g = usize::from(ent.grp);
        let shift = shift_of(ent.grp);
        let grp = &mut self.groups[g & 63];
        let slot = round_down(ent.s, shift).wrapping_sub(grp.s) >> shift;
        let i = ((u64::from(grp.front) + slot) & u64::from(SLOTS - 1)) as usize;
        if grp.heads[i] == e {
            grp.heads[i] = ent.next;
        } else {
            let mut prev = grp.heads[i];
            loop {
                assert!(prev != NIL, "entity {e} not in its slot");
                let next = store.ent(prev).next;
                if next == e {
                    store.ent(prev).next = ent.next;
                    if grp.tails[i] == e {
                        grp.tails[i] = prev;
                    }
                    break;
                }
                prev = next;
            }
        }
        if grp.heads[i] == NIL {
            grp.full &= !(1u64 << slot);
        }
        // Idle now, `e.s` reads as the last finish time: F = S.
        store.ent(e).next = NIL;
        if let Some(head) = self.scan(g) {
            let rs = round_down(store.ent(head).s, shift);
            let grp = self.grp_mut(g);
            grp.s = rs;
            grp.f = rs.wrapping_add(2u64 << shift);
        }
        self.rebuild(may_jump);
    }

    /// Recomputes the group sets from their definition, after `V = max(V, min S)` if no
    /// group is eligible and `may_jump`: groups from the highest index down, each eligible
    /// if `S <= V`, blocked if the first ER group above it finishes earlier. O(groups).
    pub fn rebuild(&mut self, may_jump: bool) {
        self.rebuilds += 1;
        let v = self.clock.now();
        let mut nonempty = 0u64;
        let mut earliest: Option<u64> = None;
        let mut any_eligible = false;
        for g in 0..GROUPS {
            let grp = self.grp(g);
            if grp.full != 0 {
                nonempty |= 1u64 << g;
                any_eligible |= !after(grp.s, v);
                if earliest.map_or(true, |m| m.wrapping_sub(v) > grp.s.wrapping_sub(v)) {
                    earliest = Some(grp.s);
                }
            }
        }
        if may_jump && !any_eligible {
            if let Some(s) = earliest {
                self.clock.set(s);
            }
        }
        self.sets = [0; 4];
        for g in (0..GROUPS).rev() {
            if nonempty & (1u64 << g) != 0 {
                let state = self.state_of(g);
                self.sets[state] |= 1u64 << g;
            }
        }
    }
}

impl<P: Packet> Entities for FlowTable<P, QfqFlow, ()> {
    #[inline(always)]
    fn ent(&mut self, e: u32) -> &mut QfqEnt {
        &mut self.st_mut(e).ent
    }
}

/// Per-flow QFQ state.
#[derive(Clone, Copy, Debug, Default)]
pub struct QfqFlow {
    ent: QfqEnt,
    /// Cost of a byte at the flow's weight.
    cost: Recip,
}

/// QFQ, per flow (FreeBSD dummynet's variant).
#[derive(Debug, Default)]
pub struct Qfq {
    core: QfqCore,
}

impl Qfq {
    /// An empty QFQ scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// The system virtual time (timestamp units, see [`crate::util::stamp`]).
    pub fn vtime(&self) -> u64 {
        self.core.vtime()
    }

    /// Sets the flow's cost and group from its parameters.
    fn configure<P: Packet>(flows: &mut Flows<P, Self>, f: u32) {
        let p = flows.params(f);
        let st = flows.st_mut(f);
        st.cost = Recip::new(u64::from(p.weight));
        st.ent.grp = group_of(p.max_len, u64::from(p.weight));
    }

    /// Flow `f` becomes backlogged (its `F`, the start plus its head's cost, is implicit).
    #[inline(always)]
    fn activate<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let st = flows.st_mut(f);
        st.ent.s = self.core.start_of(&st.ent);
        self.core.schedule(flows, f, true);
    }
}

impl Policy for Qfq {
    type FlowState = QfqFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "qfq",
        aliases: &["quick-fair"],
        summary: "Quick Fair Queueing: WF2Q+ by rounded timestamps, flow groups and bitmaps",
        complexity: "O(1)",
        guarantee:
            "T-WFI <= 6 L_k/(phi_k R) + (Q + L - L_k)/R (pspat paper eq. 2, Q = tx queue + L)",
        source: "Checconi, Rizzo, Valente, ToN 2013; dummynet dn_sched_qfq.c",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[],
    };

    fn from_params(_params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::new())
    }

    fn flow_added<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        self.core.add_weight(i64::from(flows.weight(f)));
        Self::configure(flows, f);
        let v = self.core.vtime();
        // As the last finish time: not after V, stale, the first packet starts at V.
        flows.st_mut(f).ent.s = v;
    }

    fn flow_updated<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, old: FlowParams) {
        let new = flows.params(f);
        if new.weight == old.weight && new.max_len == old.max_len {
            return;
        }
        let backlogged = flows.is_backlogged(f);
        if backlogged {
            // Out of the schedule with F = S (the head is re-costed), back in as newly
            // backlogged: S = max(V, F) with the new weight and group.
            self.core.remove(flows, f, true);
        }
        self.core
            .add_weight(i64::from(new.weight) - i64::from(old.weight));
        Self::configure(flows, f);
        if backlogged {
            self.activate(flows, f);
            self.core.ensure_ready(true);
        }
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        if flows.is_backlogged(f) {
            self.core.remove(flows, f, true);
        }
        self.core.add_weight(-i64::from(flows.weight(f)));
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        was_empty: bool,
    ) {
        if was_empty {
            self.activate(flows, f);
        }
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, _flows: &mut Flows<P, Self>) -> Option<u32> {
        self.core.first()
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        _tag: (),
        more: bool,
    ) {
        debug_assert_eq!(self.core.first(), Some(f));
        let old_v = self.core.vtime();
        self.core.advance(len);
        // S = F = S + len / w (the next head's F is implicit, see the module documentation).
        // `ent` is handed to the core, which then reads nothing of this flow back.
        let st = flows.st_mut(f);
        st.ent.s = st.ent.s.wrapping_add(st.cost.cost(u64::from(len)));
        let ent = st.ent;
        self.core.served(flows, f, ent, more, old_v);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.core.counters().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowParams, Sched, Scheduler};

    /// One byte per unit weight, in timestamp units.
    const B: u64 = 1 << FRAC_BITS;

    #[test]
    fn group_assignment() {
        // sigma_g = 2^(16 + g) units = 2^(g - 16) bytes per unit weight.
        // 1500 bytes at weight 1: 1500 B/w <= 2048 = 2^11, so g = 11 + 16 = 27.
        assert_eq!(group_of(1500, 1), 27);
        // exactly a power of two stays in its group: 2048 / 1 -> 2^11 -> 27; 2049 -> 28.
        assert_eq!(group_of(2048, 1), 27);
        assert_eq!(group_of(2049, 1), 28);
        // weight 2 halves the slot: 1500 / 2 = 750 <= 1024 -> 26.
        assert_eq!(group_of(1500, 2), 26);
        // the extremes of the ranges: 1 byte at weight 2^16 is 2^-16 -> group 0; 1 MiB at
        // weight 1 is 2^20 -> group 36, the last.
        assert_eq!(group_of(1, 1 << 16), 0);
        assert_eq!(group_of(1 << 20, 1), 36);
        // 1 byte at weight 3: 1/3 B/w, between 2^-2 and 2^-1: g = 15.
        assert_eq!(group_of(1, 3), 15);
    }

    fn sched() -> Sched<Qfq, Desc> {
        Sched::<Qfq, Desc>::with_defaults(256).unwrap()
    }

    #[test]
    fn equal_flows_alternate_by_slot() {
        // Two weight-1 flows, 1024-byte packets: L/w = 1024 = 2^10 bytes, group 26, slot
        // size exactly one packet. W = 2, so V advances 512 B/w per packet.
        //
        // Both start at V = 0 (b's old F = 0 is not after V): a (enqueued first) and b
        // share slot 0, a ahead of b (FIFO). a is served: V = 512, S_a = 1024 -> slot 1,
        // the front stays (b still there). b is served: V = 1024, S_b = 1024 -> slot 1
        // behind a; slot 0 is empty, the group's S becomes 1024 <= V: eligible, and slot 1
        // holds a then b. The pattern repeats: a b a b ...
        let mut s = sched();
        let a = s
            .add_flow(FlowParams::default().with_max_len(1024))
            .unwrap();
        let b = s
            .add_flow(FlowParams::default().with_max_len(1024))
            .unwrap();
        for i in 0..4 {
            s.enqueue(a, Desc::new(i, 1024)).unwrap();
        }
        for i in 0..4 {
            s.enqueue(b, Desc::new(10 + i, 1024)).unwrap();
        }
        let who: String = crate::testing::drain_names(&mut s, &[(a, 'a'), (b, 'b')]);
        assert_eq!(who, "abababab");
    }

    #[test]
    fn slot_rounding_keeps_a_flow_in_place_until_its_slot_changes() {
        // One flow of weight 1 with max_len 1024 (group 26, slot 1024 B/w) sending 100-byte
        // packets: S advances by 100 per packet, so the flow stays in slot 0 (front) for
        // packets starting at 0, 100, ..., 1000, and moves to slot 1 when S = 1100.
        let mut s = sched();
        let a = s
            .add_flow(FlowParams::default().with_max_len(1024))
            .unwrap();
        for i in 0..12 {
            s.enqueue(a, Desc::new(i, 100)).unwrap();
        }
        let g = 26;
        for k in 0..11u64 {
            assert_eq!(s.policy().core.grp(g).s, 0, "packet {k}");
            s.dequeue().unwrap();
        }
        // the 12th packet starts at S = 1100 B/w: rounded to 1024
        assert_eq!(s.policy().core.grp(g).s, 1024 * B);
        assert_eq!(s.policy().core.grp(g).f, 3 * 1024 * B);
        s.dequeue().unwrap();
        assert!(s.policy().core.is_empty());
    }

    #[test]
    fn bitmap_transitions_er_ir() {
        // h: weight 4, max_len 1024: 256 B/w, group 24 (sigma 256 B/w). l: weight 1,
        // max_len 1024: group 26 (sigma 1024). W = 5: V advances 204.8 per 1024-byte packet.
        let mut s = sched();
        let h = s
            .add_flow(FlowParams::weighted(4).with_max_len(1024))
            .unwrap();
        let l = s
            .add_flow(FlowParams::weighted(1).with_max_len(1024))
            .unwrap();
        let sets = |s: &Sched<Qfq, Desc>| s.policy().core.sets;
        // l alone at V = 0: S = 0 <= V, no ER group above: ER.
        s.enqueue(l, Desc::new(0, 1024)).unwrap();
        s.enqueue(l, Desc::new(1, 1024)).unwrap();
        assert_eq!(sets(&s), [1 << 26, 0, 0, 0]);
        // h joins at V = 0: S = 0, group F = 2 * 256 = 512 < l's group F = 2048: ER.
        s.enqueue(h, Desc::new(2, 1024)).unwrap();
        s.enqueue(h, Desc::new(3, 1024)).unwrap();
        assert_eq!(sets(&s), [1 << 24 | 1 << 26, 0, 0, 0]);
        // h goes first (lowest ER group). Then S_h = 256 > V = 204.8: its group is IR
        // (group F 768 < 2048: not blocked).
        assert_eq!(s.dequeue().unwrap().0, h);
        assert_eq!(sets(&s), [1 << 26, 1 << 24, 0, 0]);
        // l goes (the only ER group): S_l = 1024 > V = 409.6, IR. V passed 256, a multiple
        // of 2^(16 + 24) units: groups up to 24 become eligible, h's is ER again.
        assert_eq!(s.dequeue().unwrap().0, l);
        assert_eq!(sets(&s), [1 << 24, 1 << 26, 0, 0]);
        // h's last packet; l's group (S = 1024 > V = 614.4) is left alone and ineligible:
        // V jumps to 1024 (V = max(V, min S)) and it becomes ER.
        assert_eq!(s.dequeue().unwrap().0, h);
        assert_eq!(sets(&s), [1 << 26, 0, 0, 0]);
        assert_eq!(s.policy().vtime(), 1024 * B);
        assert_eq!(s.dequeue().unwrap().0, l);
        assert_eq!(sets(&s), [0; 4]);
    }

    impl Entities for Vec<QfqEnt> {
        fn ent(&mut self, e: u32) -> &mut QfqEnt {
            &mut self[e as usize]
        }
    }

    #[test]
    fn blocked_groups_eb_ib_are_released_when_the_blocker_leaves() {
        // The core alone, with hand-set timestamps, at V = 1900 B/w.
        //   L: group 26 (sigma 1024), S = 1000: rounded 0, group F = 2048. ER.
        //   H: group 24 (sigma 256), S = 1900: rounded 1792 <= V, eligible, group F =
        //      1792 + 512 = 2304 > 2048 (L's group, the first ER group above): EB.
        //   I: group 25 (sigma 512), S = 2100: rounded 2048 > V, ineligible, group F =
        //      2048 + 1024 = 3072 > 2048: IB.
        let mut core = QfqCore::new();
        core.add_weight(6);
        core.catch_up(1900 * B);
        let ent = |s: u64, grp: u8| QfqEnt { s, next: NIL, grp };
        let mut store = vec![ent(1000 * B, 26), ent(1900 * B, 24), ent(2100 * B, 25)];
        for e in 0..3 {
            core.schedule(&mut store, e, true);
        }
        assert_eq!(core.sets, [1 << 26, 0, 1 << 24, 1 << 25]);
        // L is served first, although H's S is earlier: H's group would finish later.
        assert_eq!(core.first(), Some(0));
        // L leaves (QFQ+ takes it into service): nothing above 24 and 25 blocks them.
        core.take_first(&mut store, 0);
        assert_eq!(core.sets, [1 << 24, 1 << 25, 0, 0]);
        assert_eq!(core.first(), Some(1));
        // V passes 2048 (a multiple of 2^(16 + 27) units): I's group becomes eligible.
        let old_v = core.vtime();
        core.catch_up(2100 * B);
        core.update_eligible(old_v);
        assert_eq!(core.sets, [1 << 24 | 1 << 25, 0, 0, 0]);
        // Removal on the control path recomputes the sets.
        core.remove(&mut store, 1, true);
        assert_eq!(core.sets, [1 << 25, 0, 0, 0]);
        assert_eq!(store[1].s, 1900 * B, "F = S: the head was not served");
        assert_eq!(core.first(), Some(2));
    }

    #[test]
    fn a_slot_is_first_in_first_out_also_after_removing_its_tail() {
        // Four entities of group 0 with equal starts, S = 0: one slot. a, b, c go in in
        // that order; c, the tail, is removed on the control path; d goes in after. FIFO
        // order is a, b, d: d must follow b (the new tail), not the removed c.
        let mut core = QfqCore::new();
        core.add_weight(4);
        let e = QfqEnt {
            s: 0,
            next: NIL,
            grp: 0,
        };
        let mut store = vec![e; 4];
        for x in 0..3 {
            core.schedule(&mut store, x, true);
        }
        core.remove(&mut store, 2, true);
        core.schedule(&mut store, 3, true);
        let mut order = Vec::new();
        while let Some(x) = core.first() {
            core.take_first(&mut store, x);
            order.push(x);
        }
        assert_eq!(order, [0, 1, 3]);
        assert!(core.is_empty());
    }

    #[test]
    fn a_slot_beyond_the_window_is_capped() {
        // Group 0 (sigma 2^16 units). A first entity at S = 0, then one 100 slots later:
        // it goes to the last slot (62) and its timestamps move back by 38 slots.
        let mut core = QfqCore::new();
        core.add_weight(1);
        let sigma = 1u64 << MIN_SLOT_SHIFT;
        let mut store = vec![
            QfqEnt {
                s: 0,
                next: NIL,
                grp: 0,
            },
            QfqEnt {
                s: 100 * sigma,
                next: NIL,
                grp: 0,
            },
        ];
        core.schedule(&mut store, 0, true);
        core.schedule(&mut store, 1, true);
        assert_eq!(store[1].s, 62 * sigma);
        assert_eq!(core.counters()[0], ("slot_caps", 1));
        // and the slots stay consistent: both come out, the first one first
        assert_eq!(core.first(), Some(0));
        core.take_first(&mut store, 0);
        // the group's front is now slot 62, ahead of V = 0: V jumps there
        core.update_eligible(core.vtime());
        assert_eq!(core.vtime(), 62 * sigma);
        assert_eq!(core.first(), Some(1));
        core.take_first(&mut store, 1);
        assert!(core.is_empty());
    }

    #[test]
    fn removing_and_reweighting_backlogged_flows() {
        let mut s = sched();
        let a = s.add_flow(FlowParams::default()).unwrap();
        let b = s.add_flow(FlowParams::default()).unwrap();
        let c = s.add_flow(FlowParams::default()).unwrap();
        for i in 0..20 {
            for f in [a, b, c] {
                s.enqueue(f, Desc::new(i, 1500)).unwrap();
            }
        }
        assert_eq!(s.remove_flow(b).unwrap().len(), 20);
        s.update_flow(c, FlowParams::weighted(3)).unwrap();
        // c (weight 3 of 4) gets about 3/4 of the next 16 packets
        let c_sent = (0..16).filter(|_| s.dequeue().unwrap().0 == c).count();
        assert!((11..=13).contains(&c_sent), "c got {c_sent} of 16");
        while s.dequeue().is_some() {}
        assert!(s.policy().core.is_empty());
    }
}
