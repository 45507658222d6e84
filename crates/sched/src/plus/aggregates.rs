//! The aggregate table of SCHED+: which flows form which aggregate.
//!
//! # Membership (paper, section 2 and footnote 3)
//!
//! An aggregate holds at most `M` flows, all with the same weight `w` and the same maximum
//! packet length `L`: its key is `(w, L)`. A flow that is created, or whose weight or
//! maximum length changes, joins an aggregate of its key that has room; a new aggregate is
//! made only when none has. A flow that leaves makes room in its aggregate; an aggregate
//! left with no flow is freed and its slot reused. Aggregates are never merged: after many
//! removals a key may have several aggregates with room, and a new flow joins the one that
//! got room last (as in Linux, which keeps a list of non-full aggregates). This costs some
//! amortisation (smaller aggregates), never correctness.
//!
//! # Per-aggregate state
//!
//! With `m` members: weight `m w`, budget `m L` ([`Agg::budget_max`]), and [`Agg::cost`],
//! the reciprocal of `m w` that turns bytes of service into virtual time. The DRR list of
//! backlogged members and the budget left in the current service are kept here for
//! [`super::PlusSched`]; the outer scheduler's state is [`Agg::ent`].
//!
//! # Invariants
//!
//! - Every live flow is a member of exactly one aggregate, whose key is the flow's
//!   `(weight, max_len)`; `members` counts them, `1..=M` for a live aggregate.
//! - `open[(w, L)]` lists exactly the live aggregates of key `(w, L)` with `members < M`.
//! - A freed slot is reset and on `free`; it is in no list and no schedule.
//!
//! # Complexity
//!
//! Joining and leaving are control-path operations: a hash look-up, and on a free a
//! search of the key's short list of aggregates with room. They may allocate (a new
//! aggregate, a new key), as creating a flow does in the flow table; the data path only
//! indexes the table.

use std::collections::HashMap;

use crate::util::flowlist::FlowList;
use crate::util::stamp::Recip;

/// One aggregate.
#[derive(Clone, Debug)]
pub struct Agg<E> {
    /// The outer scheduler's state (timestamps, group...).
    pub ent: E,
    /// Backlogged member flows, in DRR order (the one being served at the front).
    pub active: FlowList,
    /// Budget left in the current service, bytes (may go negative by less than one packet
    /// when a packet longer than `L` is sent, see [`super::PlusSched`]).
    pub budget: i64,
    /// Budget at the start of the current service: `budget_start - budget` bytes served.
    pub budget_start: i64,
    /// `members * max_len`: the budget of one service.
    pub budget_max: u32,
    /// Maximum packet length of the members, `L`: also their DRR quantum.
    pub max_len: u32,
    /// Weight of each member, `w`.
    pub weight: u32,
    /// Number of member flows, `m`.
    pub members: u32,
    /// Virtual cost of a byte at the aggregate's weight `m w`.
    pub cost: Recip,
}

impl<E: Default> Agg<E> {
    fn new(weight: u32, max_len: u32) -> Self {
        Self {
            ent: E::default(),
            active: FlowList::new(),
            budget: 0,
            budget_start: 0,
            budget_max: 0,
            max_len,
            weight,
            members: 0,
            cost: Recip::new(1),
        }
    }

    /// Budget, weight and cost after `members` changed.
    fn resize(&mut self, members: u32) {
        self.members = members;
        self.budget_max = members * self.max_len;
        self.cost = Recip::new(u64::from(members.max(1)) * u64::from(self.weight));
    }

    /// The aggregate weight `m w`.
    pub fn agg_weight(&self) -> u64 {
        u64::from(self.members) * u64::from(self.weight)
    }

    /// Starts a service with a fresh budget.
    #[inline(always)]
    pub fn recharge(&mut self) {
        self.budget = i64::from(self.budget_max);
        self.budget_start = self.budget;
    }

    /// Bytes served in the current service.
    #[inline(always)]
    pub fn served(&self) -> i64 {
        self.budget_start - self.budget
    }
}

/// The aggregates of one scheduler.
#[derive(Debug)]
pub struct Aggregates<E> {
    aggs: Vec<Agg<E>>,
    free: Vec<u32>,
    open: HashMap<(u32, u32), Vec<u32>>,
    max_members: u32,
}

impl<E: Default + Clone> Aggregates<E> {
    /// An empty table for aggregates of at most `max_members` flows (`>= 1`).
    pub fn new(max_members: u32) -> Self {
        assert!(max_members >= 1);
        Self {
            aggs: Vec::new(),
            free: Vec::new(),
            open: HashMap::new(),
            max_members,
        }
    }

    /// `M`.
    pub fn max_members(&self) -> u32 {
        self.max_members
    }

    /// Room for `n` aggregates without reallocation.
    pub fn reserve(&mut self, n: usize) {
        self.aggs.reserve(n);
    }

    /// Aggregate `a`.
    #[inline(always)]
    pub fn get(&self, a: u32) -> &Agg<E> {
        &self.aggs[a as usize]
    }

    /// Mutable aggregate `a`.
    #[inline(always)]
    pub fn get_mut(&mut self, a: u32) -> &mut Agg<E> {
        &mut self.aggs[a as usize]
    }

    /// Number of live aggregates.
    pub fn live(&self) -> usize {
        self.aggs.len() - self.free.len()
    }

    /// Adds a flow of `(weight, max_len)` to an aggregate with room, made if needed.
    /// Returns the aggregate and whether it is new (its outer state must be configured).
    pub fn join(&mut self, weight: u32, max_len: u32) -> (u32, bool) {
        let list = self.open.entry((weight, max_len)).or_default();
        let (a, new) = match list.last() {
            Some(&a) => (a, false),
            None => {
                let a = match self.free.pop() {
                    Some(a) => {
                        self.aggs[a as usize] = Agg::new(weight, max_len);
                        a
                    }
                    None => {
                        self.aggs.push(Agg::new(weight, max_len));
                        u32::try_from(self.aggs.len() - 1).expect("aggregate index")
                    }
                };
                list.push(a);
                (a, true)
            }
        };
        let agg = &mut self.aggs[a as usize];
        agg.resize(agg.members + 1);
        if agg.members == self.max_members {
            list.pop(); // `a` is the last of the list
            if list.is_empty() {
                self.open.remove(&(weight, max_len));
            }
        }
        (a, new)
    }

    /// Removes a flow from aggregate `a`. Returns whether `a` was freed (no member left;
    /// it must be idle and out of every schedule by then).
    pub fn leave(&mut self, a: u32) -> bool {
        let max = self.max_members;
        let agg = &mut self.aggs[a as usize];
        debug_assert!(agg.members > 0);
        let key = (agg.weight, agg.max_len);
        let was_full = agg.members == max;
        agg.resize(agg.members - 1);
        if agg.members == 0 {
            debug_assert!(agg.active.is_empty());
            if !was_full {
                // (with M = 1 a full aggregate empties at once and was never listed)
                let list = self
                    .open
                    .get_mut(&key)
                    .expect("a non-full aggregate is listed");
                let i = list.iter().position(|&x| x == a).expect("listed");
                list.swap_remove(i);
                if list.is_empty() {
                    self.open.remove(&key);
                }
            }
            self.aggs[a as usize] = Agg::new(0, 0);
            self.free.push(a);
            return true;
        }
        if was_full {
            self.open.entry(key).or_default().push(a);
        }
        false
    }

    /// Checks the invariants (tests): member counts against `members_of`, the open lists.
    pub fn check(&self, members_of: &HashMap<u32, u32>) {
        for (i, agg) in self.aggs.iter().enumerate() {
            let a = i as u32;
            let freed = self.free.contains(&a);
            let want = members_of.get(&a).copied().unwrap_or(0);
            assert_eq!(agg.members, want, "aggregate {a} members");
            assert_eq!(freed, want == 0, "aggregate {a} freed");
            assert!(agg.members <= self.max_members);
            let listed = self
                .open
                .get(&(agg.weight, agg.max_len))
                .is_some_and(|l| l.contains(&a));
            assert_eq!(
                listed,
                !freed && agg.members < self.max_members,
                "aggregate {a} open"
            );
            if !freed {
                assert_eq!(agg.budget_max, agg.members * agg.max_len);
            }
        }
        assert!(!self.open.values().any(Vec::is_empty));
    }
}
