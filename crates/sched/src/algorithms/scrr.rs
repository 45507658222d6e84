//! SCRR: Self-Clocked Round Robin, with its four enhancements, weighted, with start-time or
//! finish-time semantics.
//!
//! E. Sharafzadeh, R. Matson, J. Tourrilhes, P. Sharma, S. Ghorbani, "Self-Clocked
//! Round-Robin Packet Scheduling", NSDI 2025 (`scrr-self-clocked-round-robin.md`), section 3
//! and appendix A; the variant names are those of the authors' Linux qdisc (`sch_scrr.c`).
//!
//! Sub-queues (flows) are visited in round robin, as in DRR, but a visit is not bounded by a
//! quantum. Every packet has a virtual time, its STFQ start tag (or its SCFQ finish tag), and
//! a visit sends the head packet, then keeps sending while the *next* packet's virtual time
//! is not after the global clock `c`. The clock is updated once per scheduling round, to the
//! largest virtual time dequeued (Definitions 4 and 5). A lagging flow catches up within one
//! visit; a leading flow sends one packet and pushes the clock. The effective quantum is the
//! clock advance of the previous round, at most one maximum packet (Theorem 1): there is no
//! parameter to tune, and no visit ends without a packet (DRR's "missed visits").
//!
//! # Virtual time (eq. 1, 2), weighted
//!
//! ```text
//! S(p) = max(F(p'), c)      F(p) = S(p) + l(p) / w_f      v(p) = S(p)  or  F(p)
//! ```
//!
//! `p'` the flow's previous packet, `w_f` its weight. Units are [`crate::vtime`]'s: bytes per
//! unit weight, fixed point, so a packet costs `l / w` ([`InvWeight::cost`]) as in eq. 2 and
//! section 3.1 ("the packet's length is divided by the weight").
//!
//! # Variants and enhancements
//!
//! | name | NPM | SFO | IA | NE | Linux qdisc |
//! |---|---|---|---|---|---|
//! | `scrr-basic` | | | | | `scrr_basic` (Algorithms 1, 2) |
//! | `scrr-npm` | x | x | | | `scrr_npm` |
//! | `scrr-nmia` | x | x | x | | `scrr_nmia` |
//! | `scrr-nmne` | x | x | | x | `scrr_nmne` |
//! | `scrr-neia` | x | x | x | x | `scrr_neia` |
//! | `scrr` | x | x | x | x | (the paper's "SCRR": all enhancements, Algorithms 3, 4) |
//!
//! `scrr` and `scrr-neia` are the same algorithm under its paper name and its qdisc name (No
//! Empty decides between SFO's two lists, so it implies SFO; the qdisc's variants other than
//! basic all have SFO, which is why the names do not mention it).
//!
//! - **No Packet Metadata** (NPM, section 3.2): nothing is stored with a packet; the flow
//!   keeps the finish time of its last *dequeued* packet, and the dequeue computes the
//!   packet's start: that finish time if it is after the previous round's clock `c_prev`
//!   (the flow was backlogged), else the current clock (it was idle). `scrr-basic` instead
//!   stamps each packet at enqueue (the policy's `Tag`, its virtual time).
//! - **Sparse Flow Optimization** (SFO, 3.3.1): a flow joining the schedule goes to the back
//!   of a *new* list, always served before the *old* list; after its visit it moves to the
//!   old list. Without No Empty, a flow that empties stays on the old list until its next
//!   visit, which then finds it empty (an *empty visit*, counted) and drops it.
//! - **Initial Advance** (IA, 3.3.2): the first packet of an idle flow gets the virtual time
//!   `c_prev + l / w` instead of `c`, so the flow sends up to the last clock advance in its
//!   first visit. This is the refinement "previous clock plus packet size times weight": in
//!   our units the size is divided by the weight (the cost of the packet), and with start
//!   semantics it is the packet's start time (so its finish is `c_prev + 2 l / w`), with
//!   finish semantics its finish time (start `c_prev`). Either way a burst of equal packets
//!   sends exactly the advance `c - c_prev` rounded down to whole packets, not the advance
//!   plus one packet (Fig. 6b).
//! - **No Empty** (NE, 3.3.3): a flow leaves the schedule as soon as it empties. When it
//!   comes back it gets SFO (the new list) only if its next packet fits in the current round
//!   (its virtual time is not after `c`) or nothing is scheduled; otherwise it goes to the back
//!   of the old list. No visit is ever empty.
//!
//! # Where the paper leaves a choice, and what is done here
//!
//! 1. *Round accounting.* A round ends when every flow due in it has ended a visit: `left`
//!    counts the visits still due. A flow joining the new list is due in the current round
//!    (it is served before the old list resumes), as Algorithms 1 and 3 count it. A flow
//!    appended to the tail (`scrr-basic`'s single list, or the old list under NE) is behind
//!    the flows already served this round, so it is due in this round only if no visit has
//!    ended in it yet; otherwise it waits for the next round. Algorithm 1 counts every tail
//!    join in the current round, which lets the head flow be visited twice in one round and
//!    the clock advance by two packets: with `A`, `B` backlogged (1000-byte packets) and
//!    `C` joining after `A`'s visit, the round `A, B, A` ends at `c + 2000`
//!    (`a_join_at_the_tail_waits_for_the_next_round` shows the case). The reference qdisc
//!    never counts a No Empty tail join; here it is counted when the round is fresh, which
//!    changes nothing for the guarantees (the flow has had no visit in the round).
//! 2. *Idle test of NPM:* a flow is idle when the virtual time its packet would have as a
//!    continuation of the flow is `<= c_prev` (section 3.2: backlogged when "greater than
//!    previous virtual clock", and the reference qdisc); Algorithm 4 writes `<`. With start
//!    semantics that time is the finish time of the last dequeued packet, as in 3.2; with
//!    finish semantics it is the packet's own finish time (`F + l / w`): testing `F` alone
//!    would call a backlogged flow idle whenever its last visit ended on a packet finishing
//!    before the clock, and reset its virtual time.
//! 3. *A round that does not move the clock* keeps `c_prev` (the reference qdisc does the
//!    same); Algorithm 4 would set `c_prev = c` and disable IA and NPM's idle test for a round.
//! 4. *End of a busy period* (the scheduler empties): the clock becomes the finish time of the
//!    last packet (Algorithms 2 and 4) but never goes backwards (A.1: "SCRR makes sure that the
//!    clock can only go forward"; the last packet may be a lagging one that finishes before
//!    `c`). This clock update starts a new round (Definition 5). It is done in two steps:
//!    the busy period's last round closes like any other (the clock moves to the largest
//!    virtual time dequeued in it), then the clock moves on to the last packet's finish time
//!    if that is later, and `c_prev` to the clock it leaves. Algorithms 2 and 4 jump
//!    straight from `c` to the finish time, and set `c_prev = c`: with start semantics the
//!    last packet can start at `c + M` (a leading flow) and finish at `c + 2 M`, and a flow
//!    arriving next, with Initial Advance, starts at `c_prev + l / w` and sends two clock
//!    advances in its first visit, beyond Theorem 2's `(r_max + 1) M` (`tests/scrr.rs`
//!    found it: a flow of 105-byte packets draining alone, then a burst of 21 to 87-byte
//!    packets of another flow, 264 bytes in one visit against a bound of 254). In two steps
//!    each clock move is at most one packet's cost (the last packet's virtual time is at
//!    most the closed round's clock), so `c - c_prev`, the first visit's credit under
//!    Initial Advance, stays within Theorem 1.
//! 5. *Finish semantics* (B.1): the stay test uses the next packet's own finish time,
//!    `F(p) + l(next) / w` (NPM, one look-up of the next head's length) or its stored tag
//!    (basic). Algorithm 2's `virtual_next = pkt.virtual + pkt.length` is the start-semantics
//!    formula; with start semantics it is used as written (no look-up).
//! 6. *No Empty with finish semantics:* SFO is granted if `F + l(new) / w <= c`, the same test
//!    as staying in a visit; with start semantics `F <= c` (Algorithm 3).
//! 7. *New flows* start with finish time `c_prev` (the reference qdisc): idle for NPM, SFO for
//!    NE. A weight change applies to packets not yet stamped (basic) or dequeued (NPM).
//! 8. *Removing a flow* due in the current round shortens the round, so the clock update
//!    happens exactly when the remaining due flows have been visited (control path: the
//!    lists are walked to find whether the flow is among the `left` due ones).
//! 9. *Stamping a packet that joins a backlogged sub-queue* (`scrr-basic`): `S = F(p')`,
//!    the finish time of the sub-queue's tail; only a packet that finds the sub-queue empty
//!    gets `S = max(F(p'), c)`. This is what section 3.1 states in words ("if the sub-queue
//!    is backlogged, the virtual time of the tail packet plus its size is used [...] if the
//!    sub-queue had been idle, the current global clock"), what NPM computes (3.2), and what
//!    the fairness proof of Theorem 3 needs (a backlogged flow's virtual times are
//!    contiguous). Algorithm 1 and the reference qdisc take eq. 1's `max` for *every*
//!    packet. In STFQ, where eq. 1 comes from, the two readings agree, because the clock
//!    (the start tag in service) never passes a backlogged flow's tail; in SCRR the clock
//!    runs ahead of lagging flows (Definition 2), and the `max` at every enqueue throws away
//!    the lag of a backlogged flow whose queue spans less virtual time than one clock
//!    advance: a flow kept 2 to 4 packets deep with small packets gets a fraction of its
//!    share (flows of weight 1, 2, 4, 1 with 1500, 1000, 200 and 64-byte packets, 4 deep:
//!    Jain's index 0.66, the 200 and 64-byte flows at about 35% of their shares;
//!    `a_shallow_backlog_keeps_its_share` and `tests/scrr.rs` check it).
//! 10. *`scrr-basic` is the paper's, not the qdisc's:* one list, a flow joining at its
//!     tail and leaving it when it empties (Algorithms 1 and 2). The qdisc's `scrr_basic`
//!     stamps packets but also puts a joining flow on a new list and keeps emptied flows
//!     scheduled until their next visit, as its NPM variant does.
//!
//! # State
//!
//! `new`, `old`: [`FlowList`]s (`scrr-basic` uses `old` only); `clock`, `prev` (the previous
//! distinct clock), `dq_max` (largest virtual time dequeued, Algorithm 2's
//! `virtual_dequeue`), wrapping, and `wide`, the clock without wrapping ("Bit budget");
//! `left`, `active` (flows on the lists), `fresh` (no visit ended in this round). Per flow:
//! the finish time (NPM: of the last dequeued packet; basic: of the last enqueued one), the
//! inverse weight, the list link, which list it is on, and the era of the clock when it
//! last left the schedule.
//!
//! The semantics is a run-time parameter; the dequeue is compiled once for each, and
//! chosen by one test per packet.
//!
//! # Invariants
//!
//! - The flows still due in the current round are exactly the first `left` flows of
//!   `new ++ old`; every flow on `new` is due. When `fresh`, `left == active`.
//! - A flow is on a list exactly when it is backlogged, except under SFO without NE, where
//!   a flow that emptied stays on `old` until its next visit.
//! - `prev < clock` once the clock has moved; `clock` never decreases; `dq_max >= clock`
//!   (in the wrapping order of "Bit budget"; without wrapping for `wide`).
//! - Every dequeued packet has `v <= c + L_f / w_f` (`c` the clock when it leaves), and, but
//!   for the first of a visit, `v <= c`. Hence, with `M* = max_f L_f / w_f` (`<= M`, the
//!   largest packet, since `w >= 1`), within a busy period:
//!   - Theorem 1: each round end advances the clock by at most `M*`;
//!   - Theorem 2: a flow sends at most `w_f M* + L_f <= (w_f + 1) M <= (r_max + 1) M`
//!     bytes in one round (its packets after the first span at most one clock advance, each
//!     byte costing `1 / w_f`).
//!
//!   `tests/scrr.rs` checks both on random workloads, for every variant and semantics.
//!
//! # Complexity
//!
//! O(1) per packet: a visit always sends. Variants without No Empty add one step per empty
//! visit. Removing a backlogged flow walks the lists (control path).
//!
//! # Bit budget
//!
//! The unit is [`crate::vtime`]'s (bytes per unit weight, 32 fractional bits), but virtual
//! times are `u64`s that *wrap*, as in QFQ and KPS ([`crate::util::stamp`]): one
//! instruction per addition and comparison, 8 bytes per stored tag (`scrr-basic`), where
//! `u128` arithmetic took two. Every comparison is [`after`], the sign of the wrapped
//! difference, which is right while the two times are less than `2^63` apart. The clock
//! wraps every `2^32` bytes per unit weight (4 GiB at weight 1: a fraction of a second at
//! 100 Gb/s), so the question is which times can be compared, and how far apart they are.
//!
//! - A packet costs `l / w <= 2^20 * 2^32 = 2^52` units (`M*`), exact in a `u64`.
//! - *Scheduled flows.* The invariants below keep every time that is compared near the
//!   clock: the head packet's virtual time and a scheduled flow's finish time are within a
//!   few `M*` of `c` (a backlogged flow ends each visit with its next packet after the clock
//!   of that visit, the clock moves by at most `M*` per round, and the first packet of a
//!   visit is at most `M*` ahead); `prev` and `dq_max` are within `M*` of `c`. A flow that
//!   has just joined may be farther behind, but less than `2^62 + 2^55` (next item). All
//!   below `2^63`. (A `scrr-basic` flow's *tail* tag runs ahead of the clock by its backlog
//!   divided by its weight, without bound, but it is only added to, never compared; it is
//!   compared when it reaches the head.)
//! - *Idle flows.* A flow off the schedule keeps its finish time while the clock runs on:
//!   after `2^63` units its wrapped difference flips and it would look like a leading flow
//!   (or, after `2^64`, just behind or ahead of the clock, as if backlogged). No bounded
//!   window around the clock can tell, because the clock may have wrapped any number of
//!   times. So the clock also counts *eras* of `2^61` units (`wide`, the clock without
//!   wrapping, updated once per round; the era is its bits 61 to 92), and a flow records
//!   the era when it leaves the schedule. When it joins again two or more eras later, the
//!   clock has moved by more than `2^61` units since, and its finish time (then within
//!   `2^55` of the clock) is at least `2^61 - 2^55` behind: it is set to `c - 2^58`, which
//!   every test of the algorithm reads as "idle long ago" (NPM's idle test, the No Empty
//!   test, `scrr-basic`'s `max(F, c)`), exactly as the exact value would be. Within one
//!   era the clock has moved by less than `2^62`, and the wrapped difference is exact.
//!   The era is a `u32`: it wraps after `2^93` units, `2^61` bytes per unit weight, beyond
//!   any link's lifetime (the argument of [`crate::vtime`] for `u128`). The check costs a
//!   subtraction per re-activation, nothing per packet.
//! - The accessors [`SelfClockedRr::clock`] and [`SelfClockedRr::previous_clock`] return
//!   the unwrapped value (a [`VTime`]), so tests compare clocks over any distance.
//!
//! `a_flow_idle_across_a_wrap_restarts_at_the_clock` drives the clock across `2^63` and
//! `2^64` with 1 MiB packets while a flow is idle; `a_wrap_of_the_clock_changes_nothing`
//! runs a workload across a wrap and compares it with the same workload from 0.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use crate::error::ConfigError;
use crate::flow::FlowParams;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, ParamInfo, Params, ServiceClass};
use crate::table::NIL;
use crate::util::flowlist::{FlowList, Linked};
use crate::util::stamp::after;
use crate::vtime::{InvWeight, VTime};

/// Which tag is a packet's virtual time (section 3.1, appendix B.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Semantics {
    /// The virtual start time, as STFQ (the paper's default).
    #[default]
    Start,
    /// The virtual finish time, as SCFQ.
    Finish,
}

impl FromStr for Semantics {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "start" => Ok(Self::Start),
            "finish" => Ok(Self::Finish),
            _ => Err("must be start or finish".to_owned()),
        }
    }
}

impl fmt::Display for Semantics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Start => "start",
            Self::Finish => "finish",
        })
    }
}

const SEMANTICS_PARAM: ParamInfo = ParamInfo {
    name: "semantics",
    default: "start",
    help:
        "a packet's virtual time: its start time (start, as STFQ) or finish time (finish, as SCFQ)",
};

/// What SCRR stores with a packet: its virtual time (a wrapping `u64`, see "Bit budget",
/// SCRR-basic) or nothing (`()`, No Packet Metadata).
pub trait PacketTag: Copy + Default + 'static {
    /// Whether the tag holds a time.
    const STORES: bool;
    /// The tag of a packet of virtual time `v`.
    fn stamp(v: u64) -> Self;
    /// The virtual time stamped.
    fn time(self) -> u64;
}

impl PacketTag for () {
    const STORES: bool = false;
    #[inline(always)]
    fn stamp(_: u64) -> Self {}
    #[inline(always)]
    fn time(self) -> u64 {
        0
    }
}

impl PacketTag for u64 {
    const STORES: bool = true;
    #[inline(always)]
    fn stamp(v: u64) -> Self {
        v
    }
    #[inline(always)]
    fn time(self) -> u64 {
        self
    }
}

/// A set of enhancements: one registered variant of SCRR.
pub trait Variant: 'static {
    /// Description of the variant.
    const INFO: AlgorithmInfo;
    /// No Packet Metadata.
    const NPM: bool;
    /// Sparse Flow Optimization.
    const SFO: bool;
    /// Initial Advance (implemented in NPM's dequeue, so it requires NPM).
    const IA: bool;
    /// No Empty (chooses between SFO's lists, so it requires SFO).
    const NE: bool;
    /// `()` with NPM, `u64` (the virtual time) without.
    type Tag: PacketTag;
}

const fn info(
    name: &'static str,
    aliases: &'static [&'static str],
    summary: &'static str,
    complexity: &'static str,
) -> AlgorithmInfo {
    AlgorithmInfo {
        name,
        aliases,
        summary,
        complexity,
        guarantee: "weighted shares; clock advance <= M per round, burst <= (w+1) M (Thm 1, 2)",
        source: "Sharafzadeh et al., NSDI 2025 (SCRR), appendix A",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::WeightedFair,
        params: &[SEMANTICS_PARAM],
    }
}

const O1_EMPTY: &str = "O(1) (plus one step per empty visit)";

/// SCRR-basic: per-packet virtual times, one round-robin list (Algorithms 1 and 2).
#[derive(Debug)]
pub struct Basic;
/// No Packet Metadata, with SFO (the qdisc's `scrr_npm`).
#[derive(Debug)]
pub struct Npm;
/// NPM + Initial Advance, with SFO (`scrr_nmia`).
#[derive(Debug)]
pub struct Nmia;
/// NPM + No Empty, with SFO (`scrr_nmne`).
#[derive(Debug)]
pub struct Nmne;
/// NPM + No Empty + Initial Advance, with SFO (`scrr_neia`): the same as [`All`].
#[derive(Debug)]
pub struct Neia;
/// Every enhancement (the paper's "SCRR", Algorithms 3 and 4).
#[derive(Debug)]
pub struct All;

macro_rules! variant {
    ($v:ident, $npm:expr, $sfo:expr, $ia:expr, $ne:expr, $tag:ty, $info:expr) => {
        impl Variant for $v {
            const INFO: AlgorithmInfo = $info;
            const NPM: bool = $npm;
            const SFO: bool = $sfo;
            const IA: bool = $ia;
            const NE: bool = $ne;
            type Tag = $tag;
        }
    };
}

variant!(
    All,
    true,
    true,
    true,
    true,
    (),
    info(
        "scrr",
        &[],
        "self-clocked round robin, all enhancements (NPM, SFO, initial advance, no empty)",
        "O(1)",
    )
);
variant!(
    Basic,
    false,
    false,
    false,
    false,
    u64,
    info(
        "scrr-basic",
        &["scrr_basic"],
        "self-clocked round robin: per-packet virtual times, one list",
        "O(1)",
    )
);
variant!(
    Npm,
    true,
    true,
    false,
    false,
    (),
    info(
        "scrr-npm",
        &["scrr_npm"],
        "SCRR, no packet metadata, sparse flow optimization",
        O1_EMPTY,
    )
);
variant!(
    Nmia,
    true,
    true,
    true,
    false,
    (),
    info(
        "scrr-nmia",
        &["scrr_nmia"],
        "SCRR, no packet metadata + initial advance (with SFO)",
        O1_EMPTY,
    )
);
variant!(
    Nmne,
    true,
    true,
    false,
    true,
    (),
    info(
        "scrr-nmne",
        &["scrr_nmne"],
        "SCRR, no packet metadata + no empty (with SFO)",
        "O(1)",
    )
);
variant!(
    Neia,
    true,
    true,
    true,
    true,
    (),
    info(
        "scrr-neia",
        &["scrr_neia"],
        "SCRR, no packet metadata + no empty + initial advance (with SFO; = scrr)",
        "O(1)",
    )
);

/// SCRR with every enhancement.
pub type Scrr = SelfClockedRr<All>;
/// SCRR-basic.
pub type ScrrBasic = SelfClockedRr<Basic>;
/// SCRR with No Packet Metadata.
pub type ScrrNpm = SelfClockedRr<Npm>;
/// SCRR with NPM and Initial Advance.
pub type ScrrNmia = SelfClockedRr<Nmia>;
/// SCRR with NPM and No Empty.
pub type ScrrNmne = SelfClockedRr<Nmne>;
/// SCRR with NPM, No Empty and Initial Advance.
pub type ScrrNeia = SelfClockedRr<Neia>;

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum On {
    #[default]
    None,
    New,
    Old,
}

/// Virtual time has a new era every `2^ERA_SHIFT` units ("Bit budget").
const ERA_SHIFT: u32 = 61;

/// Where a stale finish time is put back: this far behind the clock, farther than any
/// scheduled flow's tags can be, so every decision treats it as idle ("Bit budget").
const STALE_BEHIND: u64 = 1 << 58;

/// Per-flow SCRR state.
#[derive(Debug)]
pub struct ScrrFlow {
    /// NPM: finish time of the last dequeued packet (the start of the next one while the
    /// flow is backlogged); basic: of the last enqueued packet. Wrapping.
    finish: u64,
    inv_w: InvWeight,
    next: u32,
    /// The clock's era when the flow last left the schedule.
    era: u32,
    on: On,
}

impl Default for ScrrFlow {
    fn default() -> Self {
        Self {
            finish: 0,
            inv_w: InvWeight::new(1),
            next: NIL,
            era: 0,
            on: On::None,
        }
    }
}

impl Linked for ScrrFlow {
    fn link(&mut self) -> &mut u32 {
        &mut self.next
    }
}

/// Self-Clocked Round Robin, variant `V`.
#[derive(Debug)]
pub struct SelfClockedRr<V> {
    new: FlowList,
    old: FlowList,
    /// The clock, `prev` and `dq_max`: wrapping (see "Bit budget").
    clock: u64,
    prev: u64,
    dq_max: u64,
    /// The clock without wrapping, updated when it moves (once per round): for the
    /// accessors and the era of the clock.
    wide: u128,
    /// Visits still due in the current round.
    left: u32,
    /// Flows on the lists.
    active: u32,
    /// No visit has ended in the current round.
    fresh: bool,
    by_finish: bool,
    visits: u64,
    empty_visits: u64,
    rounds: u64,
    _v: PhantomData<V>,
}

impl<V: Variant> SelfClockedRr<V> {
    /// The switches are consistent (checked at compile time when a variant is built).
    const VALID: () = assert!(
        (!V::NE || V::SFO) && (!V::IA || V::NPM) && (V::NPM != V::Tag::STORES),
        "inconsistent SCRR variant"
    );

    /// Flows that empty stay scheduled until their next visit (SFO without No Empty).
    const KEEPS_EMPTY: bool = V::SFO && !V::NE;

    /// An empty scheduler with the given semantics.
    pub fn new(semantics: Semantics) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        Self {
            new: FlowList::new(),
            old: FlowList::new(),
            clock: 0,
            prev: 0,
            dq_max: 0,
            wide: 0,
            left: 0,
            active: 0,
            fresh: true,
            by_finish: semantics == Semantics::Finish,
            visits: 0,
            empty_visits: 0,
            rounds: 0,
            _v: PhantomData,
        }
    }

    /// The virtual time semantics.
    pub fn semantics(&self) -> Semantics {
        if self.by_finish {
            Semantics::Finish
        } else {
            Semantics::Start
        }
    }

    /// The global virtual clock (as if it never wrapped).
    pub fn clock(&self) -> VTime {
        VTime::from_raw(self.wide)
    }

    /// The clock before its last advance (as if it never wrapped).
    pub fn previous_clock(&self) -> VTime {
        VTime::from_raw(self.wide - u128::from(self.clock.wrapping_sub(self.prev)))
    }

    /// The era of the clock: its value without wrapping divided by `2^ERA_SHIFT`, modulo
    /// `2^32`.
    #[inline(always)]
    fn era(&self) -> u32 {
        (self.wide >> ERA_SHIFT) as u32
    }

    /// The clock moves forward to `to` (at most one packet's cost ahead).
    #[inline(always)]
    fn move_clock(&mut self, to: u64) {
        self.wide += u128::from(to.wrapping_sub(self.clock));
        self.prev = self.clock;
        self.clock = to;
    }

    /// `f` leaves the schedule: remember the era, so that its finish time can be told
    /// stale when it comes back.
    #[inline(always)]
    fn leave(era: u32, st: &mut ScrrFlow) {
        st.era = era;
        st.on = On::None;
    }

    /// `f` comes back after at least two eras: its finish time is at least `2^61 - 2^55`
    /// behind the clock, but the wrapping difference may say anything. Put it where every
    /// test treats it as what it is, long idle.
    #[inline(always)]
    fn refresh(&self, st: &mut ScrrFlow) {
        if self.era().wrapping_sub(st.era) > 1 {
            st.finish = self.clock.wrapping_sub(STALE_BEHIND);
        }
    }

    /// Rounds completed (clock updates, including those that did not move it).
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// A flow that was empty gets a packet of `len` bytes.
    #[inline(always)]
    fn join<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, len: u32) {
        if Self::KEEPS_EMPTY && flows.st(f).on != On::None {
            // Emptied during this or the last round and still scheduled: nothing to do.
            return;
        }
        if V::NE {
            self.schedule_out_of_line(flows, f, len);
        } else {
            self.schedule(flows, f, len);
        }
    }

    /// [`Self::schedule`], not inlined. A flow joins once per busy period, not per packet;
    /// with No Empty the join is long enough (the round test) that keeping it out of the
    /// enqueue path lets that path keep the flow's entry in registers: 3 to 5 instructions
    /// per packet fewer on `scrr` and `scrr-nmne`. Without No Empty the join is short and
    /// the call costs more than it saves (4 to 7 more), so those variants inline it
    /// (callgrind, docs/PERFORMANCE.md "SCRR against DRR").
    #[inline(never)]
    fn schedule_out_of_line<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, len: u32) {
        self.schedule(flows, f, len);
    }

    /// The empty flow `f`, off the schedule, gets a packet of `len` bytes and joins a list.
    #[inline(always)]
    fn schedule<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, len: u32) {
        let (clock, by_finish, nothing_scheduled) = (self.clock, self.by_finish, self.active == 0);
        let st = flows.st_mut(f);
        if V::NPM {
            self.refresh(st);
        }
        let to_new = V::SFO
            && (!V::NE || nothing_scheduled || {
                // No Empty: SFO only if the packet would be sent in the current round.
                let v = if by_finish {
                    st.finish.wrapping_add(st.inv_w.cost(len))
                } else {
                    st.finish
                };
                !after(v, clock)
            });
        self.active += 1;
        if to_new {
            st.on = On::New;
            // Served before the old list resumes: due in this round.
            self.left += 1;
            self.new.push_back(flows, f);
        } else {
            st.on = On::Old;
            // Behind the flows served this round, unless there are none yet.
            if self.fresh {
                self.left += 1;
            }
            self.old.push_back(flows, f);
        }
    }

    /// A visit ended (the flow was rotated, moved or dropped by the caller).
    #[inline(always)]
    fn end_visit(&mut self) {
        self.visits += 1;
        if self.left > 1 {
            self.left -= 1;
            self.fresh = false;
        } else {
            self.close_round();
        }
    }

    /// The last due visit of the round ended: the clock moves to the largest virtual time
    /// dequeued, and every scheduled flow is due in the new round.
    #[inline(always)]
    fn close_round(&mut self) {
        self.rounds += 1;
        if after(self.dq_max, self.clock) {
            self.move_clock(self.dq_max);
        }
        self.left = self.active;
        self.fresh = true;
    }

    /// Drops the empty flow `f` at the front of its list (SFO without No Empty).
    fn empty_visit<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, on_new: bool) {
        if on_new {
            self.new.pop_front(flows);
        } else {
            self.old.pop_front(flows);
        }
        Self::leave(self.era(), flows.st_mut(f));
        self.active -= 1;
        self.empty_visits += 1;
        self.end_visit();
    }

    /// With finish semantics, the finish time of `f`'s next packet, `fin` being the finish
    /// time of the packet just sent. Out of line, so that the start-semantics path does
    /// not load the next packet speculatively.
    #[inline(never)]
    fn next_finish<P: Packet>(flows: &Flows<P, Self>, f: u32, fin: u64, inv_w: InvWeight) -> u64 {
        if V::NPM {
            fin.wrapping_add(inv_w.cost(flows.head_len(f).unwrap_or(0)))
        } else {
            flows.head_tag(f).unwrap_or_default().time()
        }
    }

    #[inline(always)]
    /// [`Policy::dequeued`] with the semantics `BY_FINISH` fixed at compile time.
    fn dequeued_as<P: Packet, const BY_FINISH: bool>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        tag: V::Tag,
        more: bool,
    ) {
        let by_finish = BY_FINISH;
        let (clock, prev) = (self.clock, self.prev);
        let st = flows.st_mut(f);
        let inv_w = st.inv_w;
        // The flow's successor on its list, for the end of the visit (read now, while its
        // state is at hand, instead of looking the flow up again there).
        let next = st.next;
        let cost = inv_w.cost(len);
        // v: this packet's virtual time; fin: its finish time.
        let (v, fin) = if V::NPM {
            // The packet's virtual time if it continues the flow's last visit.
            let cont = if by_finish {
                st.finish.wrapping_add(cost)
            } else {
                st.finish
            };
            let start = if !after(cont, prev) {
                // Idle since before the previous round.
                if !V::IA {
                    clock
                } else if by_finish {
                    prev
                } else {
                    prev.wrapping_add(cost)
                }
            } else {
                st.finish
            };
            let fin = start.wrapping_add(cost);
            st.finish = fin;
            (if by_finish { fin } else { start }, fin)
        } else {
            let v = tag.time();
            (v, if by_finish { v } else { v.wrapping_add(cost) })
        };
        // The next packet's virtual time: with start semantics this packet's finish; with
        // finish semantics it depends on the next packet (looked up only then).
        if more && {
            let next_v = if by_finish {
                Self::next_finish(flows, f, fin, inv_w)
            } else {
                fin
            };
            !after(next_v, clock)
        } {
            // The next packet belongs to this round: the visit goes on. This packet is not
            // after the clock (`v <= next_v <= c <= dq_max`): nothing else to record.
            return;
        }
        if after(v, self.dq_max) {
            self.dq_max = v;
        }
        let busy_end = !more && flows.queued() == 0;
        let on_new = !self.new.is_empty();
        if more || Self::KEEPS_EMPTY {
            if on_new {
                self.new.pop_front(flows);
                self.old.push_back(flows, f);
                flows.st_mut(f).on = On::Old;
            } else {
                // `f` is the front of `old` (select takes `new` first): its link is the
                // next flow.
                debug_assert_eq!(self.old.front(), Some(f));
                self.old.rotate_to(next);
            }
        } else {
            if on_new {
                self.new.pop_front(flows);
            } else {
                self.old.pop_front(flows);
            }
            Self::leave(self.era(), flows.st_mut(f));
            self.active -= 1;
        }
        if busy_end {
            // End of the busy period (choice 4): the round closes, then the idle system's
            // clock moves on to this packet's finish time, if later, as a step of its own.
            self.visits += 1;
            self.close_round();
            if after(fin, self.clock) {
                self.move_clock(fin);
                self.dq_max = fin;
            }
        } else {
            self.end_visit();
        }
    }

    /// Whether `f` is among the first `left` flows of `new ++ old` (walks the lists).
    fn is_due<P: Packet>(&self, flows: &Flows<P, Self>, f: u32) -> bool {
        let mut budget = self.left;
        for list in [self.new, self.old] {
            let Some(head) = list.front() else { continue };
            let mut cur = head;
            loop {
                if budget == 0 {
                    return false;
                }
                if cur == f {
                    return true;
                }
                budget -= 1;
                cur = flows.st(cur).next;
                if cur == head {
                    break;
                }
            }
        }
        false
    }
}

impl<V: Variant> Policy for SelfClockedRr<V> {
    type FlowState = ScrrFlow;
    type Tag = V::Tag;

    const INFO: AlgorithmInfo = V::INFO;

    fn from_params(params: &Params) -> Result<Self, ConfigError> {
        let semantics = params
            .get::<Semantics>(&Self::INFO, "semantics")?
            .unwrap_or_default();
        Ok(Self::new(semantics))
    }

    fn flow_added<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let (prev, w, era) = (self.prev, flows.weight(f), self.era());
        let st = flows.st_mut(f);
        st.inv_w = InvWeight::new(w);
        st.finish = prev;
        Self::leave(era, st);
    }

    fn flow_updated<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, old: FlowParams) {
        let w = flows.weight(f);
        if w != old.weight {
            flows.st_mut(f).inv_w = InvWeight::new(w);
        }
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let on = flows.st(f).on;
        if on == On::None {
            return;
        }
        let due = self.is_due(flows, f);
        match on {
            On::New => self.new.remove(flows, f),
            _ => self.old.remove(flows, f),
        };
        flows.st_mut(f).on = On::None;
        self.active -= 1;
        if due {
            self.left -= 1;
            if self.left == 0 {
                self.close_round();
            }
        }
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        was_empty: bool,
    ) -> V::Tag {
        let mut tag = V::Tag::default();
        if !V::NPM {
            // Eq. 1, 2 as section 3.1 states them: S = F(p') while the flow is backlogged,
            // S = max(c, F(p')) when it was idle; F(p) = S + l / w. (Choice 9.)
            let clock = self.clock;
            let st = flows.st_mut(f);
            let s = if was_empty {
                self.refresh(st);
                if after(st.finish, clock) {
                    st.finish
                } else {
                    clock
                }
            } else {
                st.finish
            };
            let fin = s.wrapping_add(st.inv_w.cost(len));
            st.finish = fin;
            tag = V::Tag::stamp(if self.by_finish { fin } else { s });
        }
        if was_empty {
            self.join(flows, f, len);
        }
        tag
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, flows: &mut Flows<P, Self>) -> Option<u32> {
        loop {
            let (f, on_new) = match self.new.front() {
                Some(f) => (f, true),
                None => (self.old.front()?, false),
            };
            if !Self::KEEPS_EMPTY || flows.is_backlogged(f) {
                debug_assert!(flows.is_backlogged(f), "scheduled flow {f} is empty");
                return Some(f);
            }
            self.empty_visit(flows, f, on_new);
        }
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        tag: V::Tag,
        more: bool,
    ) {
        // One test of the semantics per packet, the rest compiled for each.
        if self.by_finish {
            self.dequeued_as::<P, true>(flows, f, len, tag, more);
        } else {
            self.dequeued_as::<P, false>(flows, f, len, tag, more);
        }
    }

    /// The counters of every round-robin scheduler, defined in [`super::drr`], and
    /// `rounds`. `missed_visits` is always 0 (every visit of a backlogged flow sends its head
    /// packet, section 3.1); it is listed so that reports compare with DRR's.
    /// `empty_visits` is 0 but for SFO without No Empty (`scrr-npm`, `scrr-nmia`).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("visits", self.visits),
            ("missed_visits", 0),
            ("empty_visits", self.empty_visits),
            ("rounds", self.rounds),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Desc, FlowId, FlowParams, Sched, Scheduler};

    /// NPM alone, without SFO (not registered): to compare with SCRR-basic.
    #[derive(Debug)]
    struct NpmOnly;
    variant!(
        NpmOnly,
        true,
        false,
        false,
        false,
        (),
        info("scrr-test-npm-only", &[], "", "")
    );

    type S<V> = Sched<SelfClockedRr<V>, Desc>;

    fn sched<V: Variant>(semantics: Semantics) -> S<V> {
        Sched::new(SelfClockedRr::new(semantics), 1024).unwrap()
    }

    fn flow<V: Variant>(s: &mut S<V>, weight: u32) -> FlowId {
        s.add_flow(FlowParams::weighted(weight).with_max_len(9000))
            .unwrap()
    }

    /// Enqueues `n` packets of `len` bytes with cookies `first..`.
    fn put<V: Variant>(s: &mut S<V>, f: FlowId, first: u64, n: u64, len: u32) {
        for c in first..first + n {
            s.enqueue(f, Desc::new(c, len)).unwrap();
        }
    }

    fn drain<V: Variant>(s: &mut S<V>) -> Vec<u64> {
        crate::testing::drain_cookies(s)
    }

    fn counter<V: Variant>(s: &S<V>, name: &str) -> u64 {
        s.stats().algorithm.iter().find(|c| c.0 == name).unwrap().1
    }

    fn vt(bytes: u64) -> VTime {
        VTime::from_bytes(bytes)
    }

    /// The order of the first workload: `A` 8 x 500 bytes (cookies 0..8), `B` 4 x 1500
    /// (cookies 10..14), all queued at time 0, weights 1.
    fn workload_ab<V: Variant>(semantics: Semantics) -> (S<V>, Vec<u64>) {
        let mut s = sched::<V>(semantics);
        let a = flow(&mut s, 1);
        let b = flow(&mut s, 1);
        put(&mut s, a, 0, 8, 500);
        put(&mut s, b, 10, 4, 1500);
        let out = drain(&mut s);
        (s, out)
    }

    // Start tags: a_i = 500 i, b_i = 1500 i; both join at c = 0, due in round 1.
    // round 1 (c = 0):    a0 (0; next 500 > 0), b0 (0)          -> c = 0 (no advance)
    // round 2 (c = 0):    a1 (500), b1 (1500)                   -> c = 1500
    // round 3 (c = 1500): a2 (1000; next 1500 <= c, stays), a3 (1500; next 2000 > c),
    //                     b2 (3000)                             -> c = 3000
    // round 4 (c = 3000): a4, a5, a6 (2000, 2500, 3000: A catches up), b3 (4500, B empties)
    //                                                           -> c = 4500
    // round 5:            a7 (3500, lagging); busy period ends at its finish 4000 < c: the
    //                     clock stays at 4500.
    const AB_START: [u64; 12] = [0, 10, 1, 11, 2, 3, 12, 4, 5, 6, 13, 7];

    #[test]
    fn basic_clocks_once_per_round_and_lagging_flows_catch_up() {
        let (s, out) = workload_ab::<Basic>(Semantics::Start);
        assert_eq!(out, AB_START);
        let p = s.policy();
        assert_eq!(
            p.clock(),
            vt(4500),
            "never moved back to the last finish 4000"
        );
        assert_eq!(p.previous_clock(), vt(3000));
        assert_eq!(p.rounds(), 5);
        assert_eq!(counter(&s, "missed_visits"), 0);
        assert_eq!(counter(&s, "empty_visits"), 0);
        // visits: 2 + 2 + 2 + 2 + 1
        assert_eq!(counter(&s, "visits"), 9);
    }

    #[test]
    fn no_packet_metadata_gives_the_same_order_on_a_common_start() {
        // Section 3.2: the idle test (finish <= previous clock) finds the same start times
        // as the stamps when flows start together; with SFO the order is also the same,
        // since flows that join together are served in arrival order on either list.
        for semantics in [Semantics::Start, Semantics::Finish] {
            let (_, basic) = workload_ab::<Basic>(semantics);
            assert_eq!(workload_ab::<NpmOnly>(semantics).1, basic, "{semantics}");
            assert_eq!(workload_ab::<Npm>(semantics).1, basic, "{semantics}");
            assert_eq!(workload_ab::<Nmne>(semantics).1, basic, "{semantics}");
        }
        // and a weighted, continuously backlogged case
        let run = |npm: bool| {
            let mut out = Vec::new();
            macro_rules! go {
                ($v:ty) => {{
                    let mut s = sched::<$v>(Semantics::Start);
                    let ids: Vec<_> = (1..=4).map(|w| flow(&mut s, w)).collect();
                    for (i, &id) in ids.iter().enumerate() {
                        put(&mut s, id, 100 * i as u64, 40, 64 + 700 * i as u32);
                    }
                    for _ in 0..120 {
                        out.push(s.dequeue().unwrap().1.cookie);
                    }
                }};
            }
            if npm {
                go!(NpmOnly)
            } else {
                go!(Basic)
            }
            out
        };
        assert_eq!(run(true), run(false));
    }

    #[test]
    fn weights_scale_the_clock_advance() {
        // A (weight 2) and B (weight 1), 1000-byte packets: costs 500 and 1000.
        // Start tags a_i = 500 i, b_i = 1000 i.
        // round 1 (c = 0):    a0, b0              -> c = 0
        // round 2 (c = 0):    a1 (500), b1 (1000) -> c = 1000
        // round 3 (c = 1000): a2 (1000), b2       -> c = 2000
        // round 4 (c = 2000): a3 (1500; next 2000 stays), a4, b3 -> c = 3000
        // round 5 (c = 3000): a5, a6, b4 ...: two packets of A per packet of B.
        let mut s = sched::<Basic>(Semantics::Start);
        let a = flow(&mut s, 2);
        let b = flow(&mut s, 1);
        put(&mut s, a, 0, 20, 1000);
        put(&mut s, b, 100, 20, 1000);
        let out: Vec<u64> = (0..12).map(|_| s.dequeue().unwrap().1.cookie).collect();
        assert_eq!(out, [0, 100, 1, 101, 2, 102, 3, 4, 103, 5, 6, 104]);
        assert_eq!(s.policy().clock(), vt(4000));
    }

    #[test]
    fn start_and_finish_semantics_differ() {
        // A: 1000-byte packets, B: 100-byte packets, basic.
        // Start:  round 1 a0 (0), b0 (0) -> c = 0; round 2 a1 (1000), b1 (100) -> c = 1000;
        //         round 3 a2 (2000, leading), then b2..b10 (200..1000).
        // Finish: round 1 a0 (1000), b0 (100) -> c = 1000 (the finish times are dequeued);
        //         round 2 a1 (2000), then B catches up at once: b1..b9 (200..1000); a2 after.
        let run = |semantics| {
            let mut s = sched::<Basic>(semantics);
            let a = flow(&mut s, 1);
            let b = flow(&mut s, 1);
            put(&mut s, a, 0, 10, 1000);
            put(&mut s, b, 100, 40, 100);
            (0..14)
                .map(|_| s.dequeue().unwrap().1.cookie)
                .collect::<Vec<_>>()
        };
        let start = run(Semantics::Start);
        let finish = run(Semantics::Finish);
        assert_eq!(
            start,
            [0, 100, 1, 101, 2, 102, 103, 104, 105, 106, 107, 108, 109, 110]
        );
        assert_eq!(
            finish,
            [0, 100, 1, 101, 102, 103, 104, 105, 106, 107, 108, 109, 2, 110]
        );
        // NPM computes the same times at dequeue.
        for semantics in [Semantics::Start, Semantics::Finish] {
            let mut s = sched::<NpmOnly>(semantics);
            let a = flow(&mut s, 1);
            let b = flow(&mut s, 1);
            put(&mut s, a, 0, 10, 1000);
            put(&mut s, b, 100, 40, 100);
            let out: Vec<u64> = (0..14).map(|_| s.dequeue().unwrap().1.cookie).collect();
            assert_eq!(out, run(semantics), "{semantics}");
        }
    }

    /// `H1`, `H2` backlogged with 1500-byte packets (cookies 0.., 100..); after two
    /// dequeues (one round, clock 0), `S` queues one 100-byte packet (cookie 200).
    fn sparse_arrival<V: Variant>() -> Vec<u64> {
        let mut s = sched::<V>(Semantics::Start);
        let h1 = flow(&mut s, 1);
        let h2 = flow(&mut s, 1);
        let sp = flow(&mut s, 1);
        put(&mut s, h1, 0, 4, 1500);
        put(&mut s, h2, 100, 4, 1500);
        let mut out: Vec<u64> = (0..2).map(|_| s.dequeue().unwrap().1.cookie).collect();
        put(&mut s, sp, 200, 1, 100);
        out.extend((0..4).map(|_| s.dequeue().unwrap().1.cookie));
        out
    }

    #[test]
    fn sparse_flow_optimization_serves_a_new_flow_first() {
        // SFO: S joins the new list and goes next.
        for out in [
            sparse_arrival::<Npm>(),
            sparse_arrival::<Nmne>(),
            sparse_arrival::<All>(),
        ] {
            assert_eq!(out, [0, 100, 200, 1, 101, 2]);
        }
        // basic: S joins the tail of the round (fresh: counted in it) behind H1 and H2.
        assert_eq!(sparse_arrival::<Basic>(), [0, 100, 1, 101, 200, 2]);
    }

    /// `H1`, `H2` backlogged with 1500-byte packets; after four dequeues (two rounds) `N`
    /// queues a burst of four 500-byte packets (cookies 200..204). Returns the order.
    fn burst_arrival<V: Variant>() -> Vec<u64> {
        let mut s = sched::<V>(Semantics::Start);
        let h1 = flow(&mut s, 1);
        let h2 = flow(&mut s, 1);
        let n = flow(&mut s, 1);
        put(&mut s, h1, 0, 6, 1500);
        put(&mut s, h2, 100, 6, 1500);
        let mut out: Vec<u64> = (0..4).map(|_| s.dequeue().unwrap().1.cookie).collect();
        put(&mut s, n, 200, 4, 500);
        out.extend((0..6).map(|_| s.dequeue().unwrap().1.cookie));
        out
    }

    #[test]
    fn initial_advance_sends_several_packets_in_the_first_visit() {
        // With IA the heavy flows' first packets are at c_prev + 1500 = 1500, so after two
        // rounds c = 3000, c_prev = 1500. N starts at c_prev + 500 = 2000: n0 (2000),
        // n1 (2500), n2 (3000) fit under c = 3000, n3 (3500) does not. A burst of exactly
        // the advance, 1500 bytes, in the first visit.
        for out in [burst_arrival::<Nmia>(), burst_arrival::<All>()] {
            assert_eq!(out[4..8], [200, 201, 202, 2]);
        }
        // Without IA, N starts at the clock (1500) and sends one packet; the rest waits a
        // round behind H1 and H2: n1..n3 (2000..3000) all fit under the next clock, 3000.
        for out in [burst_arrival::<Npm>(), burst_arrival::<Nmne>()] {
            assert_eq!(out[4..10], [200, 2, 102, 201, 202, 203]);
        }
    }

    /// A heavy flow and a flow that sends one packet every fifth dequeue (so that it is
    /// empty at its next visit); returns the scheduler after 60 dequeues.
    fn dripping<V: Variant>() -> S<V> {
        let mut s = sched::<V>(Semantics::Start);
        let h = flow(&mut s, 1);
        let d = flow(&mut s, 1);
        put(&mut s, h, 0, 100, 1500);
        let mut cookie = 1000;
        for step in 0..60 {
            if step % 5 == 0 && s.flow_stats(d).unwrap().backlog.pkts == 0 {
                put(&mut s, d, cookie, 1, 300);
                cookie += 1;
            }
            s.dequeue().unwrap();
        }
        s
    }

    #[test]
    fn no_empty_never_visits_an_empty_flow() {
        assert_eq!(counter(&dripping::<Nmne>(), "empty_visits"), 0);
        assert_eq!(counter(&dripping::<All>(), "empty_visits"), 0);
        assert_eq!(counter(&dripping::<Basic>(), "empty_visits"), 0);
        // SFO without No Empty keeps the emptied flow for a round and finds it empty.
        assert!(counter(&dripping::<Npm>(), "empty_visits") > 0);
        assert!(counter(&dripping::<Nmia>(), "empty_visits") > 0);
        // and the workload of AB_START: both flows end empty on the old list.
        let (mut s, out) = workload_ab::<Npm>(Semantics::Start);
        assert_eq!(out, AB_START);
        assert!(s.dequeue().is_none());
        assert_eq!(counter(&s, "empty_visits"), 2);
        let (s, _) = workload_ab::<All>(Semantics::Start);
        assert_eq!(counter(&s, "empty_visits"), 0);
    }

    #[test]
    fn no_empty_sends_a_flow_that_used_its_share_to_the_old_list() {
        // H backlogged (1500), D sends 1500-byte packets one at a time. Round 1 (c = 0):
        // h0 (0), d0 (0; D empties and leaves the schedule) -> c = 0. D's finish 1500 > c:
        // it has had its share of the round, so its next packet goes to the back of the
        // old list, behind H, instead of the new list (which would serve it first).
        let mut s = sched::<Nmne>(Semantics::Start);
        let h = flow(&mut s, 1);
        let d = flow(&mut s, 1);
        put(&mut s, h, 0, 10, 1500);
        put(&mut s, d, 100, 1, 1500);
        assert_eq!(s.dequeue().unwrap().1.cookie, 0);
        assert_eq!(s.dequeue().unwrap().1.cookie, 100);
        put(&mut s, d, 101, 1, 1500);
        assert_eq!(
            s.dequeue().unwrap().1.cookie,
            1,
            "D denied SFO: finish 1500 > c 0"
        );
        assert_eq!(s.dequeue().unwrap().1.cookie, 101);
        // A flow whose finish is not after the clock gets SFO again.
        let mut s = sched::<Nmne>(Semantics::Start);
        let h = flow(&mut s, 1);
        let d = flow(&mut s, 1);
        put(&mut s, h, 0, 10, 1500);
        for _ in 0..4 {
            s.dequeue().unwrap(); // rounds of H alone: c = 4500
        }
        put(&mut s, d, 100, 1, 100);
        assert_eq!(
            s.dequeue().unwrap().1.cookie,
            100,
            "D's finish 0 <= c: new list"
        );
    }

    /// Bytes sent by each of `flows` (weight, length, depth) after `n` dequeues, each flow
    /// kept `depth` packets deep (a dequeued packet is replaced at once: never empty).
    fn refilled<V: Variant>(semantics: Semantics, flows: &[(u32, u32, u64)], n: usize) -> Vec<u64> {
        let mut s = sched::<V>(semantics);
        let ids: Vec<_> = flows.iter().map(|&(w, _, _)| flow(&mut s, w)).collect();
        for (&id, &(_, len, depth)) in ids.iter().zip(flows) {
            put(&mut s, id, 0, depth, len);
        }
        let mut bytes = vec![0; flows.len()];
        for _ in 0..n {
            let (id, d) = s.dequeue().unwrap();
            let i = ids.iter().position(|&x| x == id).unwrap();
            bytes[i] += u64::from(d.len);
            put(&mut s, id, 0, 1, d.len);
        }
        bytes
    }

    #[test]
    fn a_shallow_backlog_keeps_its_share() {
        // Choice 9. A (1500 bytes, 8 deep) and B (64 bytes, 2 deep: 128 bytes of virtual
        // time queued, less than A's 1500 of clock advance per round). B is never empty, so
        // its virtual times stay contiguous and it catches up in every visit: equal bytes
        // within one round's worth. Stamping B's arrivals at max(F, c) would reset it to
        // the clock in every round: B then gets under a tenth of A's bytes.
        for semantics in [Semantics::Start, Semantics::Finish] {
            let b = refilled::<Basic>(semantics, &[(1, 1500, 8), (1, 64, 2)], 20_000);
            let (a, b) = (b[0] as f64, b[1] as f64);
            assert!((a - b).abs() / a < 0.01, "{semantics}: A {a} B {b}");
        }
    }

    #[test]
    fn a_join_at_the_tail_waits_for_the_next_round() {
        // Basic, A and B backlogged with 1000-byte packets (start tags 0, 1000, 2000).
        // round 1 (c = 0): a0, b0 -> c = 0. Round 2: a1 (1000, leading; A to the tail).
        // C joins now (stamped 0, 1000), behind A. Algorithm 1 would count C in this round,
        // so the round would end after A's *second* visit: a2 (2000) -> c = 2000, two
        // packets of advance. Here C waits: the round ends after b1 at c = 1000.
        let mut s = sched::<Basic>(Semantics::Start);
        let a = flow(&mut s, 1);
        let b = flow(&mut s, 1);
        let c = flow(&mut s, 1);
        put(&mut s, a, 0, 3, 1000);
        put(&mut s, b, 10, 3, 1000);
        let mut out: Vec<u64> = (0..3).map(|_| s.dequeue().unwrap().1.cookie).collect();
        put(&mut s, c, 20, 2, 1000);
        let mut clock = s.policy().clock();
        while let Some((_, d)) = s.dequeue() {
            out.push(d.cookie);
            let now = s.policy().clock();
            if !s.is_empty() {
                assert!(
                    now <= clock.plus(1000 << 32),
                    "advance {now:?} from {clock:?}"
                );
            }
            clock = now;
        }
        // round 3 (c = 1000): a2 (2000), c0, c1 (0, 1000: C catches up), b2 (2000)
        assert_eq!(out, [0, 10, 1, 11, 2, 20, 21, 12]);
    }

    #[test]
    fn removing_a_due_flow_shortens_the_round() {
        let mut s = sched::<Basic>(Semantics::Start);
        let ids: Vec<_> = (0..3).map(|_| flow(&mut s, 1)).collect();
        for (i, &id) in ids.iter().enumerate() {
            put(&mut s, id, 10 * i as u64, 5, 1000);
        }
        // round 1: f0, f1, f2
        for _ in 0..3 {
            s.dequeue().unwrap();
        }
        assert_eq!(s.policy().rounds(), 1);
        s.dequeue().unwrap(); // f0 (1000)
        s.remove_flow(ids[2]).unwrap(); // due: the round is now f0, f1
        s.dequeue().unwrap(); // f1 ends the round
        assert_eq!(s.policy().rounds(), 2);
        assert_eq!(s.policy().clock(), vt(1000));
        // a removed flow that was already served does not shorten the round
        s.dequeue().unwrap(); // f0 (2000)
        s.remove_flow(ids[0]).unwrap();
        assert_eq!(s.policy().rounds(), 2);
        s.dequeue().unwrap(); // f1 (2000) ends the round
        assert_eq!(s.policy().rounds(), 3);
        assert_eq!(s.policy().clock(), vt(2000));
        // removing the last due flow closes the round at once
        let mut s = sched::<Nmne>(Semantics::Start);
        let a = flow(&mut s, 1);
        let b = flow(&mut s, 1);
        put(&mut s, a, 0, 3, 1000);
        put(&mut s, b, 10, 3, 1000);
        s.dequeue().unwrap();
        s.remove_flow(b).unwrap();
        assert_eq!(s.policy().rounds(), 1);
        assert_eq!(s.dequeue().unwrap().1.cookie, 1);
    }

    #[test]
    fn scrr_is_scrr_neia() {
        // The same switches under the paper's name and the qdisc's.
        let run = |all: bool, semantics| {
            let mut out = Vec::new();
            macro_rules! go {
                ($v:ty) => {{
                    let mut s = sched::<$v>(semantics);
                    let ids: Vec<_> = (1..=3).map(|w| flow(&mut s, w)).collect();
                    let mut cookie = 0;
                    for step in 0..400u32 {
                        let f = ids[(step * 7 % 3) as usize];
                        if step % 3 != 0 {
                            put(
                                &mut s,
                                f,
                                cookie,
                                u64::from(step % 4),
                                64 + step * 37 % 3000,
                            );
                            cookie += 4;
                        }
                        if let Some((_, d)) = s.dequeue() {
                            out.push(d.cookie);
                        }
                    }
                }};
            }
            if all {
                go!(All)
            } else {
                go!(Neia)
            }
            out
        };
        for semantics in [Semantics::Start, Semantics::Finish] {
            assert_eq!(run(true, semantics), run(false, semantics));
        }
    }

    /// A scheduler whose clock starts at `origin` (raw units, wrapping) instead of 0.
    fn sched_at<V: Variant>(semantics: Semantics, origin: u64) -> S<V> {
        let mut p = SelfClockedRr::<V>::new(semantics);
        (p.clock, p.prev, p.dq_max, p.wide) = (origin, origin, origin, u128::from(origin));
        Sched::new(p, 1024).unwrap()
    }

    /// A mixed workload (three flows of weights 1..3, sizes 64..3064, queues filled and
    /// drained unevenly): the order of the dequeues and the clock advance they saw.
    fn mixed<V: Variant>(mut s: S<V>) -> (Vec<u64>, VTime) {
        let ids: Vec<_> = (1..=3).map(|w| flow(&mut s, w)).collect();
        let c0 = s.policy().clock();
        let mut out = Vec::new();
        let mut cookie = 0;
        for step in 0..3000u32 {
            let f = ids[(step * 7 % 3) as usize];
            if step % 3 != 0 {
                put(
                    &mut s,
                    f,
                    cookie,
                    u64::from(step % 4),
                    64 + step * 37 % 3000,
                );
                cookie += 4;
            }
            if let Some((_, d)) = s.dequeue() {
                out.push(d.cookie);
            }
        }
        out.extend(drain(&mut s));
        let advance = VTime::from_raw(s.policy().clock().raw() - c0.raw());
        (out, advance)
    }

    #[test]
    fn a_wrap_of_the_clock_changes_nothing() {
        // The same workload from clock 0 and from a clock that wraps in the middle of it
        // (the run advances the clock by about 2^20 bytes, 2^52 units).
        macro_rules! check {
            ($($v:ty),*) => {$(
                for semantics in [Semantics::Start, Semantics::Finish] {
                    let from_zero = mixed(sched::<$v>(semantics));
                    assert!(from_zero.1 > vt(1 << 18), "the run moves the clock");
                    for origin in [u64::MAX - (1 << 50), 1 << 63, (1 << 63) - (1 << 51)] {
                        let wrapped = mixed(sched_at::<$v>(semantics, origin));
                        assert_eq!(from_zero, wrapped, "{} {semantics} {origin:#x}", <$v>::INFO.name);
                    }
                }
            )*};
        }
        check!(Basic, Npm, Nmia, Nmne, Neia, All);
    }

    /// `A` (cookies 0..) sends one 1000-byte packet and goes idle while `B` (cookies
    /// 1000..), alone and never empty, sends `n` packets of 1 MiB, moving the clock by
    /// `2^52` units each (one round per packet: `B` leads), so 4096 of them are one wrap of
    /// the 64-bit clock. Then `A` queues 8 packets of 1000 bytes (cookies 1..=8). Returns
    /// the next 20 dequeues (A's cookies, 1000 for a packet of B) and the largest clock
    /// advance of a round among them.
    fn idle_across<V: Variant>(semantics: Semantics, n: u64) -> (Vec<u64>, u128) {
        const MIB: u32 = crate::MAX_PACKET_LEN;
        let mut s = sched::<V>(semantics);
        let a = flow(&mut s, 1);
        let b = s
            .add_flow(FlowParams::weighted(1).with_max_len(MIB))
            .unwrap();
        put(&mut s, a, 0, 1, 1000);
        put(&mut s, b, 1000, 2, MIB);
        let mut cookie = 1002;
        let mut step = |s: &mut S<V>| {
            let (id, d) = s.dequeue().unwrap();
            if id == b {
                put(s, b, cookie, 1, MIB);
                cookie += 1;
                return 1000;
            }
            d.cookie
        };
        assert_eq!(step(&mut s), 0);
        for _ in 0..n {
            assert_eq!(step(&mut s), 1000, "A is idle");
        }
        put(&mut s, a, 1, 8, 1000);
        let mut clock = s.policy().clock().raw();
        let mut max_advance = 0;
        let out = (0..20)
            .map(|_| {
                let c = step(&mut s);
                let now = s.policy().clock().raw();
                max_advance = max_advance.max(now - clock);
                clock = now;
                c
            })
            .collect();
        (out, max_advance)
    }

    #[test]
    fn a_flow_idle_across_a_wrap_restarts_at_the_clock() {
        // After 64 packets of B (2^58 units, far below 2^63) A's finish time is compared
        // exactly: A is long idle. After 2^63 or 2^64 units the wrapped difference says A
        // is far ahead, or just ahead, or just behind the clock (a naive reading would
        // take A for a leading or lagging backlogged flow); A must restart as after 64.
        // B keeps its own state relative to the clock in every run, so the orders agree.
        macro_rules! check {
            ($($v:ty),*) => {$(
                for semantics in [Semantics::Start, Semantics::Finish] {
                    let name = <$v>::INFO.name;
                    let (oracle, advance) = idle_across::<$v>(semantics, 64);
                    assert!(oracle.iter().filter(|&&c| c < 1000).count() >= 8, "{name}: A sent");
                    assert!(advance <= 1 << 52, "{name}: Theorem 1");
                    for n in [2046, 2047, 2048, 2049, 4094, 4095, 4096, 4097, 6144, 8191] {
                        let (out, advance) = idle_across::<$v>(semantics, n);
                        assert_eq!(out, oracle, "{name} {semantics} n = {n}");
                        assert!(advance <= 1 << 52, "{name} {semantics} n = {n}: Theorem 1");
                    }
                }
            )*};
        }
        check!(Basic, Npm, Nmia, Nmne, Neia, All);
    }

    #[test]
    fn the_semantics_parameter_is_parsed_and_checked() {
        let p = Params::new().set("semantics", "finish");
        assert_eq!(
            ScrrBasic::from_params(&p).unwrap().semantics(),
            Semantics::Finish
        );
        assert_eq!(
            Scrr::from_params(&Params::new()).unwrap().semantics(),
            Semantics::Start
        );
        let e = Scrr::from_params(&Params::new().set("semantics", "middle"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'middle'") && e.contains("semantics"), "{e}");
    }
}
