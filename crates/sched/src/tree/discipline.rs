//! How an inner class orders its children: the disciplines of a node.
//!
//! A node's discipline schedules *children*, not packets, so it must not depend on a
//! child's head packet, which changes whenever a packet arrives anywhere in the child's
//! subtree (the head-packet independence of SCHED+, QFQ+ paper section 2; pspat's
//! [`crate::plus`] schedules aggregates the same way). A child is scheduled with a
//! *budget* (the largest packet of its subtree, the tree's `mtu`), taken out of the
//! schedule by [`Disc::next`] to send one packet, and charged what it actually sent by
//! [`Disc::charge`], which puts it back if it is still eligible.
//!
//! - [`Wf2q`]: WF2Q+ (Bennett and Zhang 1997) over the children as entities of weight
//!   `w_c`: newly backlogged `S = max(V, F)`, `F = S + budget / w_c`; after a service
//!   `F = S + served / w_c`, and if still eligible `S = F`, `F = S + budget / w_c`; pick
//!   the smallest `F` among the children with `S <= V`, after `V = max(V, min S)` when
//!   none has. `V` advances by the bytes served over the sum of the weights of all the
//!   discipline's children. O(log n) a packet. Its T-WFI against the node's service is
//!   `5 L / (phi_c R_node)` with `L` the budget, as `wf2q++` with `m = 1`
//!   ([`crate::algorithms::wf2qpp`]).
//! - [`Qfq`]: QFQ (Checconi, Rizzo, Valente 2013) over the children, head-independent as
//!   in QFQ+ ([`crate::algorithms::qfq_plus`], with `m = 1`): the same timestamps as
//!   WF2Q+, rounded so that every decision is a few bit operations on the groups of
//!   [`crate::algorithms::qfq::QfqCore`]. O(1) a packet, whatever the fan-out; T-WFI
//!   `10 L / (phi_c R_node)` (QFQ+ paper eq. 22 with `m = M = 1`). A node's QFQ costs
//!   about 35 KB (its groups), so a node has one only for the bands its children use.
//! - [`Drr`]: deficit round robin with quantum `w_c * budget`: the child at the front is
//!   served while its deficit is positive, then goes to the back with one more quantum.
//!   O(1) a packet; its T-WFI is O(n) quanta.
//!
//! The children's state lives in a slice owned by the tree ([`Ent`], one per class and
//! discipline kind), as a flow's policy state lives in the flow table.

use crate::algorithms::qfq::{group_of, Entities, QfqCore, QfqEnt};
use crate::util::heap::VHeap;
use crate::util::stamp::Recip;
use crate::vtime::{SystemClock, VTime};

const NONE: u32 = u32::MAX;

/// What a discipline keeps of one child.
#[derive(Clone, Copy, Debug)]
pub struct Ent {
    /// WF2Q+: virtual start and finish times.
    s: VTime,
    f: VTime,
    /// WF2Q+: the cost of a byte, `1 / w_c`.
    inv: Recip,
    /// DRR: bytes the child may still send in this round.
    deficit: i64,
    /// DRR: `w_c * budget`.
    quantum: i64,
    /// DRR: the next child in the round.
    next: u32,
    /// QFQ: group, slot link and `S` (the last `F` while idle).
    q: QfqEnt,
}

impl Default for Ent {
    fn default() -> Self {
        Self {
            s: VTime::ZERO,
            f: VTime::ZERO,
            inv: Recip::new(1),
            deficit: 0,
            quantum: 0,
            next: NONE,
            q: QfqEnt::default(),
        }
    }
}

/// The discipline of one node, or one priority band of a node.
#[derive(Clone, Debug)]
pub enum Disc {
    /// WF2Q+ over the children.
    Wf2q(Wf2q),
    /// QFQ over the children.
    Qfq(Box<Qfq>),
    /// Deficit round robin over the children.
    Drr(Drr),
}

impl Disc {
    /// Child `c`, of weight `weight`, joins this discipline's children (idle).
    pub fn add_child(&mut self, ents: &mut [Ent], c: u32, weight: u32, budget: u32) {
        let e = &mut ents[c as usize];
        match self {
            Disc::Wf2q(w) => {
                w.clock.add_weight(weight);
                // a child is in one heap at most once: no push ever allocates
                w.children += 1;
                w.eligible.reserve(w.children);
                w.ineligible.reserve(w.children);
                e.inv = Recip::new(u64::from(weight));
                e.s = w.clock.now();
                e.f = e.s;
            }
            Disc::Qfq(q) => {
                q.core.add_weight(i64::from(weight));
                e.inv = Recip::new(u64::from(weight));
                e.q = QfqEnt {
                    grp: group_of(budget, u64::from(weight)),
                    // as the last finish time: the first activation starts at V
                    s: q.core.vtime(),
                    ..QfqEnt::default()
                };
            }
            Disc::Drr(_) => {
                e.quantum = i64::from(weight) * i64::from(budget);
                e.deficit = 0;
            }
        }
    }

    /// Child `c`, of weight `weight`, idle (not scheduled), leaves this discipline's
    /// children (a class removed, re-weighted or moved to another band: control path).
    pub fn remove_child(&mut self, weight: u32) {
        match self {
            Disc::Wf2q(w) => {
                w.clock.remove_weight(weight);
                w.children -= 1;
            }
            Disc::Qfq(q) => q.core.add_weight(-i64::from(weight)),
            Disc::Drr(_) => {}
        }
    }

    /// Takes child `c` out of the schedule wherever it is, keeping what it was owed as a
    /// child that left after a service (control path: O(children) for WF2Q+'s heaps and
    /// DRR's round, O(slot) for QFQ).
    pub fn remove(&mut self, ents: &mut [Ent], c: u32) {
        match self {
            Disc::Wf2q(w) => {
                if !w.eligible.remove(c) {
                    w.ineligible.remove(c);
                }
                let e = &mut ents[c as usize];
                e.f = e.s;
            }
            Disc::Qfq(q) => {
                q.core.remove(&mut QfqView(ents), c, false);
                q.old_v = q.core.vtime();
            }
            Disc::Drr(d) => d.unlink(ents, c),
        }
    }

    /// Whether no child is scheduled.
    #[inline]
    pub fn is_empty(&self) -> bool {
        match self {
            Disc::Wf2q(w) => w.eligible.is_empty() && w.ineligible.is_empty(),
            Disc::Qfq(q) => q.core.is_empty(),
            Disc::Drr(d) => d.head == NONE,
        }
    }

    /// Child `c` becomes eligible for service (it is not scheduled).
    #[inline]
    pub fn activate(&mut self, ents: &mut [Ent], c: u32, budget: u32) {
        match self {
            Disc::Wf2q(w) => w.activate(ents, c, budget),
            Disc::Qfq(q) => q.activate(ents, c),
            Disc::Drr(d) => d.activate(ents, c),
        }
    }

    /// Child `c` becomes eligible again after a pause its ceil imposed on it or on the
    /// subtree it serves: as [`Disc::activate`] for WF2Q+, whose `S = max(V, F)` keeps
    /// the child's place if the pause was short and gives it no credit for a long one.
    /// DRR does the same with the round: a child that left with deficit to spare finishes
    /// its turn first, one that had used it waits for its next turn. (Sent to the back
    /// with a fresh quantum, a class held by its ceil would wait for every sibling's
    /// quantum and fall short of its ceil whenever that wait exceeds the `cburst` it can
    /// save; sent to the front with a fresh quantum, it would take more than its share.)
    #[inline]
    pub fn resume(&mut self, ents: &mut [Ent], c: u32, budget: u32) {
        match self {
            Disc::Wf2q(w) => w.activate(ents, c, budget),
            Disc::Qfq(q) => q.activate(ents, c),
            Disc::Drr(d) => {
                let e = &mut ents[c as usize];
                if e.deficit > 0 {
                    d.push_front(ents, c);
                } else {
                    e.deficit += e.quantum;
                    d.push_back(ents, c);
                }
            }
        }
    }

    /// Takes the next child out of the schedule, to send one packet.
    #[inline]
    pub fn next(&mut self, ents: &mut [Ent]) -> Option<u32> {
        match self {
            Disc::Wf2q(w) => w.next(ents),
            Disc::Qfq(q) => q.next(ents),
            Disc::Drr(d) => d.next(ents),
        }
    }

    /// Child `c`, taken by [`Disc::next`], sent `served` bytes; with `Some(budget)` it is
    /// still eligible and goes back into the schedule. A child that leaves keeps what it
    /// was owed ([`Disc::resume`] may use it; [`Disc::activate`] starts afresh).
    #[inline]
    pub fn charge(&mut self, ents: &mut [Ent], c: u32, served: u32, requeue: Option<u32>) {
        match self {
            Disc::Wf2q(w) => w.charge(ents, c, served, requeue),
            Disc::Qfq(q) => q.charge(ents, c, served, requeue.is_some()),
            Disc::Drr(d) => d.charge(ents, c, served, requeue.is_some()),
        }
    }

    /// Child `c`, taken by [`Disc::next`], is dropped from the schedule without having
    /// sent anything (it had become ineligible meanwhile): it keeps no credit and loses
    /// none.
    #[inline]
    pub fn skip(&mut self, ents: &mut [Ent], c: u32) {
        let e = &mut ents[c as usize];
        match self {
            Disc::Wf2q(_) => e.f = e.s,
            // taken out, `s` is its start: read as the last finish, it served nothing
            Disc::Qfq(_) => {}
            Disc::Drr(_) => e.deficit = 0,
        }
    }
}

/// WF2Q+ over a node's children (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Wf2q {
    clock: SystemClock,
    /// Children with `S <= V`, by `F`.
    eligible: VHeap,
    /// Children with `S > V`, by `S`.
    ineligible: VHeap,
    /// Children configured.
    children: usize,
}

impl Wf2q {
    fn place(&mut self, e: &Ent, c: u32) {
        if e.s <= self.clock.now() {
            self.eligible.push(e.f, c);
        } else {
            self.ineligible.push(e.s, c);
        }
    }

    fn activate(&mut self, ents: &mut [Ent], c: u32, budget: u32) {
        let e = &mut ents[c as usize];
        e.s = e.f.max(self.clock.now());
        e.f = e.s.plus(e.inv.cost(u64::from(budget)));
        let e = *e;
        self.place(&e, c);
    }

    fn next(&mut self, ents: &mut [Ent]) -> Option<u32> {
        if self.eligible.is_empty() {
            let (s, _) = self.ineligible.peek()?;
            self.clock.catch_up(s);
        }
        let now = self.clock.now();
        while let Some((s, c)) = self.ineligible.peek() {
            if s > now {
                break;
            }
            self.ineligible.pop();
            self.eligible.push(ents[c as usize].f, c);
        }
        self.eligible.pop().map(|(_, c)| c)
    }

    fn charge(&mut self, ents: &mut [Ent], c: u32, served: u32, requeue: Option<u32>) {
        self.clock.advance_bytes(u64::from(served));
        let e = &mut ents[c as usize];
        e.f = e.s.plus(e.inv.cost(u64::from(served)));
        if let Some(budget) = requeue {
            e.s = e.f;
            e.f = e.s.plus(e.inv.cost(u64::from(budget)));
            let e = *e;
            self.place(&e, c);
        }
    }
}

/// The children's QFQ state, as [`QfqCore`] reads it.
struct QfqView<'a>(&'a mut [Ent]);

impl Entities for QfqView<'_> {
    #[inline(always)]
    fn ent(&mut self, e: u32) -> &mut QfqEnt {
        &mut self.0[e as usize].q
    }
}

/// QFQ over a node's children (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Qfq {
    core: QfqCore,
    /// `V` at the last update of the eligibility sets.
    old_v: u64,
}

impl Qfq {
    /// Brings the eligibility sets up to the current `V` (no jump of `V`).
    #[inline(always)]
    fn refresh(&mut self) {
        self.core.make_eligible(self.old_v);
        self.old_v = self.core.vtime();
    }

    fn activate(&mut self, ents: &mut [Ent], c: u32) {
        self.refresh();
        let s = self.core.start_of(&ents[c as usize].q);
        ents[c as usize].q.s = s;
        // V moves only in `next` (`update_eligible`), as in QFQ+: a jump here to this
        // child's start would pass over groups that are eligible but blocked
        self.core.schedule(&mut QfqView(ents), c, false);
    }

    fn next(&mut self, ents: &mut [Ent]) -> Option<u32> {
        self.core.update_eligible(self.old_v);
        self.core.ensure_ready(true);
        self.old_v = self.core.vtime();
        let c = self.core.first()?;
        self.core.take_first(&mut QfqView(ents), c);
        Some(c)
    }

    fn charge(&mut self, ents: &mut [Ent], c: u32, served: u32, requeue: bool) {
        self.core.advance(served);
        let e = &mut ents[c as usize];
        e.q.s = e.q.s.wrapping_add(e.inv.cost(u64::from(served)));
        if requeue {
            self.refresh();
            self.core.schedule(&mut QfqView(ents), c, false);
        }
    }
}

/// Deficit round robin over a node's children (see the module documentation).
#[derive(Clone, Debug)]
pub struct Drr {
    head: u32,
    tail: u32,
}

impl Default for Drr {
    fn default() -> Self {
        Self {
            head: NONE,
            tail: NONE,
        }
    }
}

impl Drr {
    fn push_back(&mut self, ents: &mut [Ent], c: u32) {
        ents[c as usize].next = NONE;
        if self.tail == NONE {
            self.head = c;
        } else {
            ents[self.tail as usize].next = c;
        }
        self.tail = c;
    }

    fn push_front(&mut self, ents: &mut [Ent], c: u32) {
        ents[c as usize].next = self.head;
        if self.head == NONE {
            self.tail = c;
        }
        self.head = c;
    }

    /// Takes `c` out of the round, wherever it is (control path).
    fn unlink(&mut self, ents: &mut [Ent], c: u32) {
        let mut prev = NONE;
        let mut cur = self.head;
        while cur != NONE && cur != c {
            prev = cur;
            cur = ents[cur as usize].next;
        }
        if cur == NONE {
            return;
        }
        let next = ents[c as usize].next;
        if prev == NONE {
            self.head = next;
        } else {
            ents[prev as usize].next = next;
        }
        if self.tail == c {
            self.tail = prev;
        }
        ents[c as usize].next = NONE;
    }

    fn pop_front(&mut self, ents: &mut [Ent]) -> Option<u32> {
        let c = self.head;
        if c == NONE {
            return None;
        }
        self.head = ents[c as usize].next;
        if self.head == NONE {
            self.tail = NONE;
        }
        Some(c)
    }

    fn activate(&mut self, ents: &mut [Ent], c: u32) {
        let e = &mut ents[c as usize];
        e.deficit = e.quantum;
        self.push_back(ents, c);
    }

    fn next(&mut self, ents: &mut [Ent]) -> Option<u32> {
        loop {
            let c = self.pop_front(ents)?;
            let e = &mut ents[c as usize];
            if e.deficit > 0 {
                return Some(c);
            }
            // a packet larger than the budget overdrew more than a quantum: its next round
            e.deficit += e.quantum;
            self.push_back(ents, c);
        }
    }

    fn charge(&mut self, ents: &mut [Ent], c: u32, served: u32, requeue: bool) {
        let e = &mut ents[c as usize];
        e.deficit -= i64::from(served);
        if !requeue {
            return;
        }
        if e.deficit > 0 {
            self.push_front(ents, c);
        } else {
            e.deficit += e.quantum;
            self.push_back(ents, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `n` packets of `len` bytes from always-backlogged children; returns the
    /// bytes each got.
    fn shares(mut d: Disc, weights: &[u32], len: u32, n: usize) -> Vec<u64> {
        let mut ents = vec![Ent::default(); weights.len()];
        for (c, &w) in weights.iter().enumerate() {
            d.add_child(&mut ents, c as u32, w, 1500);
        }
        for c in 0..weights.len() {
            d.activate(&mut ents, c as u32, 1500);
        }
        let mut got = vec![0; weights.len()];
        for _ in 0..n {
            let c = d.next(&mut ents).expect("backlogged");
            got[c as usize] += u64::from(len);
            d.charge(&mut ents, c, len, Some(1500));
        }
        got
    }

    #[test]
    fn both_share_by_weight() {
        for d in [
            Disc::Wf2q(Wf2q::default()),
            Disc::Qfq(Box::default()),
            Disc::Drr(Drr::default()),
        ] {
            let got = shares(d, &[1, 2, 5], 1000, 8000);
            let total: u64 = got.iter().sum();
            for (g, w) in got.iter().zip([1.0, 2.0, 5.0]) {
                let share = *g as f64 / total as f64;
                assert!((share - w / 8.0).abs() < 0.01, "{got:?}");
            }
        }
    }

    #[test]
    fn wf2q_interleaves_where_drr_sends_its_quantum() {
        // weights 1 and 3, 500-byte packets: WF2Q+ never lets the light child wait more
        // than a few packets; DRR sends the heavy one's 4500-byte quantum in one go.
        let mut ents = vec![Ent::default(); 2];
        let mut d = Disc::Wf2q(Wf2q::default());
        d.add_child(&mut ents, 0, 1, 1500);
        d.add_child(&mut ents, 1, 3, 1500);
        d.activate(&mut ents, 0, 1500);
        d.activate(&mut ents, 1, 1500);
        let mut order = Vec::new();
        for _ in 0..16 {
            let c = d.next(&mut ents).unwrap();
            order.push(c);
            d.charge(&mut ents, c, 500, Some(1500));
        }
        let heavy_runs = order.split(|&c| c == 0).map(<[u32]>::len).max();
        assert!(heavy_runs <= Some(4), "{order:?}");
        assert_eq!(order.iter().filter(|&&c| c == 0).count(), 4, "{order:?}");
    }

    #[test]
    fn a_skipped_child_keeps_its_place_in_time() {
        let mut ents = vec![Ent::default(); 2];
        let mut d = Disc::Wf2q(Wf2q::default());
        d.add_child(&mut ents, 0, 1, 1000);
        d.add_child(&mut ents, 1, 1, 1000);
        d.activate(&mut ents, 0, 1000);
        let c = d.next(&mut ents).unwrap();
        d.skip(&mut ents, c);
        assert!(d.is_empty());
        d.activate(&mut ents, 1, 1000);
        d.activate(&mut ents, 0, 1000);
        assert_eq!(d.next(&mut ents), Some(0), "equal start, lower index first");
    }

    /// With the timestamp disciplines, a child that leaves its schedule every other
    /// service and comes straight back keeps its weight's share: `S = max(V, F)` neither
    /// credits nor penalises it. (With QFQ, a `V` that jumped on a child's return skipped
    /// eligible groups and starved them.) DRR starts a returning child on a new turn, as
    /// DRR does with a flow that emptied.
    #[test]
    fn leaving_and_returning_keeps_the_share() {
        for mut d in [Disc::Wf2q(Wf2q::default()), Disc::Qfq(Box::default())] {
            let mut ents = vec![Ent::default(); 3];
            for (c, w) in [(0u32, 4u32), (1, 2), (2, 3)] {
                d.add_child(&mut ents, c, w, 1500);
            }
            d.activate(&mut ents, 0, 1500);
            d.activate(&mut ents, 1, 1500);
            let mut got = [0u32; 2];
            for i in 0..3000 {
                let c = d.next(&mut ents).unwrap();
                got[c as usize] += 1;
                let leave = c == 1 && i % 2 == 0;
                d.charge(&mut ents, c, 1000, (!leave).then_some(1500));
                if leave {
                    d.activate(&mut ents, 1, 1500);
                }
            }
            let share = f64::from(got[0]) / 3000.0;
            assert!((share - 2.0 / 3.0).abs() < 0.01, "{d:?}: {got:?}");
        }
    }
}
