//! The tree scheduler: classes with rate, ceil, weight and priority over leaf schedulers.
//!
//! # State of a class at its parent
//!
//! A class is *backlogged* when it has packets to send through its parent: a leaf when its
//! scheduler is not empty, an inner class when it has a live child (`live > 0`). A
//! backlogged class is
//! - *red* (over its ceil: its ceil bucket does not conform): **parked**, in no schedule,
//!   with a timer at the time it conforms again;
//! - else *live*, and then either *green* (it has a rate and its rate bucket conforms):
//!   in its parent's guarantee schedule `g`; or borrowing: in its parent's excess schedule
//!   of its band, `e[prio]`, with a timer at the time its rate conforms again (if it has a
//!   rate).
//!
//! A parent serves `g` first, then the lowest non-empty band of `e`; a class served from `g`
//! is charged on its rate bucket (it used its guarantee), from `e` not (it borrowed: HTB's
//! `htb_charge_class` charges the rate tokens of the classes at or above the level that
//! lent). Every class on the path is charged on its ceil. So a class's guarantee is served
//! before any excess at every level, the excess goes band by band and by weight within a
//! band, and no class exceeds its ceil by more than its burst and one packet (see
//! [`super::gcra`]): the semantics of [`crate::reference::fluid`], per packet.
//!
//! # Transitions
//!
//! States worsen (green to borrowing, live to red or idle) only when the class sends, which
//! the dequeue sees on its way back up; they improve (red to live, borrowing to green,
//! idle to backlogged) with time, which the timers see, or with an arrival, which the
//! enqueue sees. So no schedule ever holds a class that cannot be served, with one
//! exception, taken lazily: a borrowing class that turns green moves to `g` and leaves a
//! *stale* entry in `e`, which `e` hands out later and the dequeue skips (or revives, if
//! the class borrows again before that: it keeps its place). Nothing is ever searched for
//! in a schedule on the data path.
//!
//! # Cost
//!
//! An enqueue into a backlogged leaf is the leaf scheduler's enqueue. One into an idle
//! leaf attaches it, and each ancestor that was idle, to its parent: O(depth). A dequeue
//! descends from the root picking one child per level and charges the path on its way
//! back: O(depth) discipline operations (O(1) for drr, O(log n) for wf2q+), bucket updates
//! and at most one timer operation per level, plus the timers that fell due (each paid
//! for by the transition that set it) and the stale entries skipped (each paid for by its
//! promotion). Nothing allocates: schedules, heaps and timers are sized when the tree is
//! built.

use crate::error::{FlowError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::registry;
use crate::stats::{Backlog, DropCounts, DropReason, FlowStats, SchedStats};

use super::discipline::{Disc, Drr, Ent, Qfq, Wf2q};
use super::gcra::Gcra;
use super::leaves::{DynLeaves, Leaves};
use super::spec::{inner_kind, ClassSpec, InnerKind, SpecError, TreeSpec, BANDS, MAX_DEPTH};
use super::timers::Timers;

/// The link's node.
const ROOT: u32 = 0;
const NONE: u32 = u32::MAX;

/// Bits of the weight a rate becomes in a guarantee schedule (QFQ, whose weights are at
/// most `2^16`): rates are scaled by a power of two so that the largest sibling's fits,
/// and a smaller one's is rounded down, at most by `2^-16` of the largest (and at least 1).
/// The weights matter only when the siblings' rates add up to more than the parent gets.
const RATE_WEIGHT_BITS: u32 = 16;

/// A flow of a leaf class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TreeFlow {
    node: u32,
    /// The generation of `node` (its index is reused once its class is removed).
    gen: u32,
    flow: FlowId,
}

impl TreeFlow {
    /// Index of its class in the [`TreeSpec`].
    pub fn class(self) -> usize {
        (self.node - 1) as usize
    }

    /// The flow in its class's scheduler.
    pub fn flow(self) -> FlowId {
        self.flow
    }
}

/// What a dequeue found.
#[derive(Debug, PartialEq, Eq)]
pub enum Dequeued<P> {
    /// A packet to send now.
    Packet {
        /// Its flow.
        flow: TreeFlow,
        /// The packet.
        pkt: P,
    },
    /// Packets are queued, but every class that has them is over its ceil: ask again at
    /// this time (ns).
    Wait(u64),
    /// Nothing is queued.
    Idle,
}

/// Counters of a class (`tc -s class show`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Packets sent through the class.
    pub sent_pkts: u64,
    /// Bytes sent through the class.
    pub sent_bytes: u64,
    /// Bytes its parent served within the class's rate (HTB's `lended`: the class used
    /// its own guarantee).
    pub lent_bytes: u64,
    /// Bytes it borrowed from its parent's excess.
    pub borrowed_bytes: u64,
    /// Times it went over its ceil with packets to send.
    pub overlimits: u64,
    /// Drops by reason in the leaves of its subtree (in [`TreeSched::class_stats`]).
    pub drops: DropCounts,
    /// Packets and bytes queued in the leaves of its subtree (in
    /// [`TreeSched::class_stats`]).
    pub backlog: Backlog,
}

#[derive(Clone, Debug)]
struct Node {
    parent: u32,
    /// Index in `leaves` or `inner`.
    slot: u32,
    is_leaf: bool,
    band: u8,
    has_rate: bool,
    rate: Gcra,
    ceil: Gcra,
    /// In its parent's guarantee schedule.
    in_g: bool,
    /// In its parent's excess schedule of its band (live, or `stale`).
    in_e: bool,
    /// Its entry in `e` is not live (it moved to `g`, went red or idle).
    stale: bool,
    /// Backlogged and red.
    parked: bool,
    /// Its weight in its parent's guarantee schedule (0: no rate).
    g_w: u32,
    /// Removed ([`TreeSched::remove_class`]); its index goes to the next class added.
    dead: bool,
    /// Bumped when the class is removed: a flow handle of an earlier class at this index
    /// is refused.
    gen: u32,
}

impl Node {
    /// Class `c` under node `parent`, at `slot` of the leaves or inner nodes, idle.
    fn new(c: &ClassSpec, parent: u32, slot: u32, is_leaf: bool, mtu: u32) -> Self {
        Self {
            parent,
            slot,
            is_leaf,
            band: c.prio,
            has_rate: c.rate_bps > 0,
            rate: bucket(c.rate_bps, c.burst, mtu),
            ceil: c
                .ceil_bps
                .map_or(Gcra::UNLIMITED, |b| bucket(b, c.cburst, mtu)),
            in_g: false,
            in_e: false,
            stale: false,
            parked: false,
            g_w: 0,
            dead: false,
            gen: 0,
        }
    }

    fn is_live(&self) -> bool {
        self.in_g || (self.in_e && !self.stale)
    }
}

#[derive(Clone, Debug)]
struct Inner {
    /// How it orders its children in each band.
    kind: InnerKind,
    /// The shift that turns a child's rate into its weight in `g` (`RATE_WEIGHT_BITS`).
    g_shift: u32,
    g: Disc,
    e: Vec<Disc>,
    /// Bands whose `e` holds entries.
    mask: u8,
    /// Live children.
    live: u32,
}

impl Inner {
    /// Band `b`'s discipline, made real if it was a placeholder (control path).
    fn band(&mut self, b: usize) -> &mut Disc {
        if self.kind != InnerKind::Drr && matches!(self.e[b], Disc::Drr(_)) {
            self.e[b] = disc(self.kind);
        }
        &mut self.e[b]
    }

    /// The guarantee schedule, made real if it was a placeholder (control path).
    fn guarantee(&mut self) -> &mut Disc {
        if matches!(self.g, Disc::Drr(_)) {
            self.g = Disc::Qfq(Box::<Qfq>::default());
        }
        &mut self.g
    }

    /// Whether a child of rate `bps` gets its weight in `g` at the current scale.
    fn g_fits(&self, bps: u64) -> bool {
        bps >> self.g_shift < 1 << RATE_WEIGHT_BITS
    }

    /// The weight of a child of rate `bps` in `g`.
    fn g_weight(&self, bps: u64) -> u32 {
        let max = (1u64 << RATE_WEIGHT_BITS) - 1;
        (bps >> self.g_shift).clamp(1, max) as u32
    }

    /// A node of `kind` whose children use the bands of `bands` (a bit each) and, if
    /// `rated`, rates: a discipline for each of those, an empty placeholder (no memory)
    /// for the others.
    fn new(kind: InnerKind, bands: u8, rated: bool) -> Self {
        let placeholder = || Disc::Drr(Drr::default());
        Self {
            kind,
            g_shift: 0,
            g: if rated {
                Disc::Qfq(Box::<Qfq>::default())
            } else {
                placeholder()
            },
            e: (0..BANDS)
                .map(|b| {
                    if bands & (1 << b) != 0 {
                        disc(kind)
                    } else {
                        placeholder()
                    }
                })
                .collect(),
            mask: 0,
            live: 0,
        }
    }
}

/// A tree of classes over a link (see the module documentation), its flows in leaves `L`
/// ([`super::leaves`]).
pub struct TreeSched<P, L = DynLeaves<P>> {
    nodes: Vec<Node>,
    names: Vec<String>,
    g_ents: Vec<Ent>,
    e_ents: Vec<Ent>,
    inner: Vec<Inner>,
    leaves: L,
    timers: Timers,
    stats: Vec<ClassStats>,
    /// Each class as configured (node `i + 1` is `specs[i]`): what changes start from.
    specs: Vec<ClassSpec>,
    /// Packets queued in all leaves.
    queued: u64,
    /// Removed classes' nodes, and their leaf or inner slots, for the next classes added.
    free_nodes: Vec<u32>,
    free_leaves: Vec<u32>,
    free_inner: Vec<u32>,
    /// Packets refused for a flow of a removed class (a stale handle): counted here, as no
    /// leaf has that flow any more.
    stale_drops: u64,
    mtu: u32,
    _packets: std::marker::PhantomData<fn(P) -> P>,
}

fn disc(kind: InnerKind) -> Disc {
    match kind {
        InnerKind::Wf2q => Disc::Wf2q(Wf2q::default()),
        InnerKind::Qfq => Disc::Qfq(Box::<Qfq>::default()),
        InnerKind::Drr => Disc::Drr(Drr::default()),
    }
}

fn bucket(bps: u64, burst: Option<u64>, mtu: u32) -> Gcra {
    if bps == 0 {
        Gcra::UNLIMITED
    } else {
        Gcra::new(bps, ClassSpec::burst_bytes(bps, burst, mtu))
    }
}

impl<P: Packet + Send + 'static> TreeSched<P> {
    /// Builds the tree `spec` describes, each leaf its own scheduler ([`DynLeaves`]), or
    /// says what is wrong with it. [`super::visit`] builds shared leaves when it can.
    pub fn new(spec: &TreeSpec) -> Result<Self, SpecError> {
        let mut scheds = Vec::new();
        for c in leaf_classes(spec) {
            scheds.push(
                registry::build::<P>(&c.algorithm, &c.params, c.limit_pkts).map_err(|source| {
                    SpecError::Leaf {
                        class: c.name.clone(),
                        source,
                    }
                })?,
            );
        }
        Self::with_leaves(spec, DynLeaves::new(scheds))
    }
}

/// The leaf classes of `spec`, in order (leaf `i` of a tree is the `i`-th).
pub fn leaf_classes(spec: &TreeSpec) -> impl Iterator<Item = &ClassSpec> {
    let inner = spec.has_children();
    spec.classes
        .iter()
        .enumerate()
        .filter(move |&(i, _)| !inner[i])
        .map(|(_, c)| c)
}

impl<P: Packet, L: Leaves<P>> TreeSched<P, L> {
    /// Builds the tree `spec` describes over `leaves`, whose leaf `i` is the `i`-th leaf
    /// class of `spec` ([`leaf_classes`]).
    pub fn with_leaves(spec: &TreeSpec, leaves: L) -> Result<Self, SpecError> {
        spec.validate()?;
        let n = spec.classes.len() + 1;
        let has_children = spec.has_children();
        let mut nodes = Vec::with_capacity(n);
        let mut names = vec!["root".to_owned()];
        // What each node's children use: bands, and rates (class i is node i + 1).
        let mut bands_used = vec![0u8; n];
        let mut rated = vec![false; n];
        for c in &spec.classes {
            let p = c.parent.map_or(0, |p| p + 1);
            bands_used[p] |= 1 << c.prio;
            rated[p] |= c.rate_bps > 0;
        }
        let mut inner = vec![Inner::new(
            inner_kind(&spec.algorithm)?,
            bands_used[0],
            rated[0],
        )];
        let mut n_leaves = 0;
        // The link: no rate, no ceil, no parent.
        nodes.push(Node::new(
            &ClassSpec::new("root", None, ""),
            NONE,
            0,
            false,
            spec.mtu,
        ));
        for (i, c) in spec.classes.iter().enumerate() {
            let slot = if has_children[i] {
                inner.push(Inner::new(
                    inner_kind(&c.algorithm)?,
                    bands_used[i + 1],
                    rated[i + 1],
                ));
                inner.len() - 1
            } else {
                n_leaves += 1;
                n_leaves - 1
            };
            names.push(c.name.clone());
            nodes.push(Node::new(
                c,
                c.parent.map_or(ROOT, |p| (p + 1) as u32),
                slot as u32,
                !has_children[i],
                spec.mtu,
            ));
        }
        // Each parent's guarantee schedule weighs its children by rate, scaled so that the
        // largest sibling's fits RATE_WEIGHT_BITS.
        let mut max_rate = vec![0u64; n];
        for (i, c) in spec.classes.iter().enumerate() {
            let p = nodes[i + 1].parent as usize;
            max_rate[p] = max_rate[p].max(c.rate_bps);
        }
        let mut g_ents = vec![Ent::default(); n];
        let mut e_ents = vec![Ent::default(); n];
        for (i, c) in spec.classes.iter().enumerate() {
            let node = i + 1;
            let p = nodes[node].parent as usize;
            let pi = nodes[p].slot as usize;
            if c.rate_bps > 0 {
                inner[pi].g_shift =
                    (64 - max_rate[p].leading_zeros()).saturating_sub(RATE_WEIGHT_BITS);
                let w = inner[pi].g_weight(c.rate_bps);
                inner[pi].g.add_child(&mut g_ents, node as u32, w, spec.mtu);
                nodes[node].g_w = w;
            }
            inner[pi].e[usize::from(c.prio)].add_child(
                &mut e_ents,
                node as u32,
                c.weight,
                spec.mtu,
            );
        }
        Ok(Self {
            timers: Timers::new(n),
            stats: vec![ClassStats::default(); n],
            nodes,
            names,
            g_ents,
            e_ents,
            inner,
            leaves,
            specs: spec.classes.clone(),
            queued: 0,
            free_nodes: Vec::new(),
            free_leaves: Vec::new(),
            free_inner: Vec::new(),
            stale_drops: 0,
            mtu: spec.mtu,
            _packets: std::marker::PhantomData,
        })
    }

    /// How many classes it has had: the first tree's and those added since, removed ones
    /// included (indices are never reused).
    pub fn spec_len(&self) -> usize {
        self.specs.len()
    }

    /// The values of class `class`, as its tree and its changes gave them (its parent as
    /// an index here), unless it was removed.
    pub fn spec_of(&self, class: usize) -> Option<&ClassSpec> {
        let c = self.node_of(class).ok()?;
        self.specs.get(c as usize - 1)
    }

    /// Whether class `class` is a leaf (holds flows), unless it was removed.
    pub fn is_leaf(&self, class: usize) -> Option<bool> {
        let c = self.node_of(class).ok()?;
        Some(self.nodes[c as usize].is_leaf)
    }

    fn node_of(&self, class: usize) -> Result<u32, SpecError> {
        if class + 1 >= self.nodes.len() || self.nodes[class + 1].dead {
            return Err(SpecError::NoClass {
                index: class,
                classes: self.nodes.len() - 1,
            });
        }
        Ok((class + 1) as u32)
    }

    /// Creates a flow in leaf class `class` (its index in the [`TreeSpec`]).
    pub fn add_flow(
        &mut self,
        class: usize,
        params: FlowParams,
    ) -> Result<TreeFlow, TreeFlowError> {
        let node = self.node_of(class)?;
        let n = &self.nodes[node as usize];
        if !n.is_leaf {
            return Err(SpecError::NotALeaf {
                class: self.names[node as usize].clone(),
            }
            .into());
        }
        let flow = self.leaves.add_flow(n.slot, params)?;
        Ok(TreeFlow {
            node,
            gen: n.gen,
            flow,
        })
    }

    /// The node of `flow` if its class is still the one it was made in.
    #[inline]
    fn node_of_flow(&self, flow: TreeFlow) -> Result<&Node, FlowError> {
        match self.nodes.get(flow.node as usize) {
            Some(n) if n.gen == flow.gen && !n.dead => Ok(n),
            _ => Err(FlowError::UnknownFlow(flow.flow)),
        }
    }

    /// Changes a flow's parameters (its weight in its leaf, its limits); its packets stay.
    pub fn update_flow(&mut self, flow: TreeFlow, params: FlowParams) -> Result<(), FlowError> {
        let leaf = self.node_of_flow(flow)?.slot;
        self.leaves.update_flow(leaf, flow.flow, params)
    }

    /// Removes a flow, handing back its queued packets, oldest first, counted
    /// by its leaf as drops with reason `flow_removed`. A leaf left empty leaves its
    /// parent's schedules.
    pub fn remove_flow(&mut self, flow: TreeFlow) -> Result<Vec<P>, FlowError> {
        let c = flow.node;
        let leaf = self.node_of_flow(flow)?.slot;
        let was_backlogged = !self.leaves.is_empty(leaf);
        let pkts = self.leaves.remove_flow(leaf, flow.flow)?;
        self.queued -= pkts.len() as u64;
        if was_backlogged && self.leaves.is_empty(leaf) {
            let was_live = self.nodes[c as usize].is_live();
            self.unschedule(c);
            if was_live {
                self.lost_live(self.nodes[c as usize].parent);
            }
        }
        Ok(pkts)
    }

    /// Parameters of a flow.
    pub fn flow_params(&self, flow: TreeFlow) -> Option<FlowParams> {
        let n = self.node_of_flow(flow).ok()?;
        self.leaves.flow_params(n.slot, flow.flow)
    }

    /// Counters of a flow.
    pub fn flow_stats(&self, flow: TreeFlow) -> Option<FlowStats> {
        let n = self.node_of_flow(flow).ok()?;
        self.leaves.flow_stats(n.slot, flow.flow)
    }

    /// Queues `pkt` on `flow` at `now` (ns), or hands it back with the reason it was
    /// dropped (counted by the leaf's scheduler; a flow of a removed class, `unknown_flow`,
    /// by the tree).
    pub fn enqueue(&mut self, now: u64, flow: TreeFlow, pkt: P) -> Result<(), Rejected<P>> {
        let Ok(n) = self.node_of_flow(flow) else {
            self.stale_drops += 1;
            return Err(Rejected {
                pkt,
                reason: DropReason::UnknownFlow,
            });
        };
        let leaf = n.slot;
        let was_empty = self.leaves.enqueue(leaf, flow.flow, pkt)?;
        self.queued += 1;
        if was_empty {
            self.attach(flow.node, now, false);
        }
        Ok(())
    }

    /// The next packet to send at `now` (ns), or when to ask again.
    pub fn dequeue(&mut self, now: u64) -> Dequeued<P> {
        while let Some(c) = self.timers.pop_due(now) {
            self.wake(c, now);
        }
        if self.inner[0].live == 0 {
            return match self.timers.peek() {
                Some((t, _)) => Dequeued::Wait(t),
                None => Dequeued::Idle,
            };
        }
        // Down: one child per level, guarantees first, then the lowest band's excess.
        let mut path = [(0u32, false); MAX_DEPTH];
        let mut depth = 0;
        let mut n = ROOT;
        while !self.nodes[n as usize].is_leaf {
            let (c, from_g) = self.pick(n);
            path[depth] = (c, from_g);
            depth += 1;
            n = c;
        }
        let (flow, pkt) = self.leaves.dequeue(self.nodes[n as usize].slot);
        self.queued -= 1;
        let len = pkt.wire_len();
        // Up: charge every class of the path and move it where its new state says.
        for &(c, from_g) in path[..depth].iter().rev() {
            self.charge(c, from_g, len, now);
        }
        Dequeued::Packet {
            flow: TreeFlow {
                node: n,
                gen: self.nodes[n as usize].gen,
                flow,
            },
            pkt,
        }
    }

    /// The child of `n` to serve, and whether from its guarantee schedule.
    #[inline]
    fn pick(&mut self, n: u32) -> (u32, bool) {
        let inner = &mut self.inner[self.nodes[n as usize].slot as usize];
        if !inner.g.is_empty() {
            let c = inner.g.next(&mut self.g_ents).expect("g is not empty");
            self.nodes[c as usize].in_g = false;
            return (c, true);
        }
        loop {
            debug_assert!(inner.mask != 0, "a live node has a live child");
            let b = inner.mask.trailing_zeros() as usize;
            match inner.e[b].next(&mut self.e_ents) {
                None => inner.mask &= !(1 << b),
                Some(c) => {
                    let node = &mut self.nodes[c as usize];
                    node.in_e = false;
                    if !node.stale {
                        return (c, false);
                    }
                    node.stale = false;
                    inner.e[b].skip(&mut self.e_ents, c);
                }
            }
        }
    }

    /// Whether class `c` has packets to send through its parent.
    #[inline]
    fn backlogged(&self, c: u32) -> bool {
        let node = &self.nodes[c as usize];
        if node.is_leaf {
            !self.leaves.is_empty(node.slot)
        } else {
            self.inner[node.slot as usize].live > 0
        }
    }

    /// Class `c` sent `len` bytes at `now`, served by its parent from `g` (`from_g`) or
    /// from its band of `e`.
    #[inline]
    fn charge(&mut self, c: u32, from_g: bool, len: u32, now: u64) {
        let backlogged = self.backlogged(c);
        let node = &mut self.nodes[c as usize];
        let st = &mut self.stats[c as usize];
        st.sent_pkts += 1;
        st.sent_bytes += u64::from(len);
        node.ceil.charge(now, len);
        if from_g {
            node.rate.charge(now, len);
            st.lent_bytes += u64::from(len);
        } else {
            st.borrowed_bytes += u64::from(len);
        }
        let red = backlogged && !node.ceil.conforms(now);
        let live = backlogged && !red;
        let green = live && node.has_rate && node.rate.conforms(now);
        let band = usize::from(node.band);
        let p = node.parent;
        let pi = self.nodes[p as usize].slot as usize;
        let budget = self.mtu;
        let parent = &mut self.inner[pi];
        if from_g {
            parent
                .g
                .charge(&mut self.g_ents, c, len, green.then_some(budget));
        } else {
            let requeue = (live && !green).then_some(budget);
            parent.e[band].charge(&mut self.e_ents, c, len, requeue);
            if requeue.is_some() {
                self.nodes[c as usize].in_e = true;
                parent.mask |= 1 << band;
            }
        }
        let node = &mut self.nodes[c as usize];
        if green {
            if !from_g {
                parent.g.activate(&mut self.g_ents, c, budget);
            }
            node.in_g = true;
            self.timers.cancel(c);
        } else if live {
            if from_g {
                // back to borrowing: revive its stale entry, or join the band
                if node.in_e {
                    node.stale = false;
                } else {
                    parent.e[band].activate(&mut self.e_ents, c, budget);
                    parent.mask |= 1 << band;
                    node.in_e = true;
                }
            }
            if node.has_rate {
                self.timers.set(c, node.rate.conforming_at());
            }
        } else {
            if node.in_e {
                node.stale = true;
            }
            parent.live -= 1;
            if red {
                node.parked = true;
                self.stats[c as usize].overlimits += 1;
                self.timers.set(c, node.ceil.conforming_at());
            } else {
                self.timers.cancel(c);
            }
        }
    }

    /// Puts class `c`, backlogged and in no schedule, where its state at `now` says: parked
    /// if red, else in its parent's `g` if green, else in its band of `e` (reviving a
    /// stale entry; [`Disc::resume`] if `unparked`) with a promotion timer. Returns whether
    /// it is live. Leaves the parent's count of live children to the caller.
    fn place(&mut self, c: u32, now: u64, unparked: bool) -> bool {
        let node = &mut self.nodes[c as usize];
        if !node.ceil.conforms(now) {
            node.parked = true;
            self.stats[c as usize].overlimits += 1;
            self.timers.set(c, node.ceil.conforming_at());
            return false;
        }
        let green = node.has_rate && node.rate.conforms(now);
        let band = usize::from(node.band);
        let p = node.parent;
        let parent = &mut self.inner[self.nodes[p as usize].slot as usize];
        let node = &mut self.nodes[c as usize];
        if green {
            parent.g.activate(&mut self.g_ents, c, self.mtu);
            node.in_g = true;
        } else {
            if node.in_e {
                node.stale = false;
            } else {
                let e = &mut parent.e[band];
                if unparked {
                    e.resume(&mut self.e_ents, c, self.mtu);
                } else {
                    e.activate(&mut self.e_ents, c, self.mtu);
                }
                parent.mask |= 1 << band;
                node.in_e = true;
            }
            if node.has_rate {
                self.timers.set(c, node.rate.conforming_at());
            }
        }
        true
    }

    /// Class `c` became backlogged at `now` (or is no longer red: `unparked`): joins its
    /// parent's schedules, and so on up while the parent was idle. A class coming back from
    /// its ceil, and the ancestors that were idle only for it, are served first in a DRR
    /// round if their turn was not over ([`Disc::resume`]).
    fn attach(&mut self, mut c: u32, now: u64, unparked: bool) {
        while c != ROOT {
            if !self.place(c, now, unparked) {
                return;
            }
            let p = self.nodes[c as usize].parent;
            let parent = &mut self.inner[self.nodes[p as usize].slot as usize];
            parent.live += 1;
            if parent.live > 1 {
                return;
            }
            c = p;
        }
    }

    /// Takes class `c` out of its parent's schedules and timers, stale entry included,
    /// keeping what it is owed (control path). Leaves the parent's count of live children
    /// to the caller.
    fn unschedule(&mut self, c: u32) {
        let node = &mut self.nodes[c as usize];
        let p = node.parent;
        let parent = &mut self.inner[self.nodes[p as usize].slot as usize];
        let node = &mut self.nodes[c as usize];
        if node.in_g {
            parent.g.remove(&mut self.g_ents, c);
            node.in_g = false;
        }
        if node.in_e {
            parent.e[usize::from(node.band)].remove(&mut self.e_ents, c);
            node.in_e = false;
            node.stale = false;
        }
        node.parked = false;
        self.timers.cancel(c);
    }

    /// Node `p` lost a live child on the control path: if it has none left, it leaves its
    /// own parent's schedules, and so on up.
    fn lost_live(&mut self, mut p: u32) {
        loop {
            let slot = self.nodes[p as usize].slot as usize;
            self.inner[slot].live -= 1;
            if self.inner[slot].live > 0 || p == ROOT {
                return;
            }
            let was_live = self.nodes[p as usize].is_live();
            self.unschedule(p);
            if !was_live {
                return;
            }
            p = self.nodes[p as usize].parent;
        }
    }

    /// Class `c`'s timer fell due at `now`.
    fn wake(&mut self, c: u32, now: u64) {
        let node = &mut self.nodes[c as usize];
        if node.parked {
            node.parked = false;
            // parked classes are backlogged: nothing below them was served
            self.attach(c, now, true);
            return;
        }
        debug_assert!(node.is_live() && !node.in_g && node.has_rate);
        if !node.rate.conforms(now) {
            self.timers.set(c, node.rate.conforming_at());
            return;
        }
        // promotion: to g, leaving a stale entry in e
        node.stale = true;
        node.in_g = true;
        let p = node.parent;
        let parent = &mut self.inner[self.nodes[p as usize].slot as usize];
        parent.g.activate(&mut self.g_ents, c, self.mtu);
    }

    /// Changes class `class` (its index in the [`TreeSpec`], or as [`Self::add_class`]
    /// returned it) to `new` at `now` (ns): rate, ceil, bursts, weight and band. Its packets
    /// stay queued; it keeps its position against its rate and ceil (what it was ahead or
    /// behind), and what its parent's schedules owed it. The parent and the algorithm do
    /// not change this way (`SpecError::Change` names the field).
    pub fn change_class(
        &mut self,
        now: u64,
        class: usize,
        new: &ClassSpec,
    ) -> Result<(), SpecError> {
        let c = self.node_of(class)?;
        let old = self.specs[class].clone();
        let name = || old.name.clone();
        if new.parent != old.parent {
            return Err(SpecError::Change {
                class: name(),
                field: "parent",
            });
        }
        if new.algorithm != old.algorithm || new.params != old.params {
            return Err(SpecError::Change {
                class: name(),
                field: "algorithm",
            });
        }
        new.check_values()?;
        let p = self.nodes[c as usize].parent;
        let pi = self.nodes[p as usize].slot as usize;
        let was_live = self.nodes[c as usize].is_live();
        self.unschedule(c);
        // its membership of the parent's schedules
        if (old.prio, old.weight) != (new.prio, new.weight) {
            self.inner[pi].e[usize::from(old.prio)].remove_child(old.weight);
            let mtu = self.mtu;
            self.inner[pi].band(usize::from(new.prio)).add_child(
                &mut self.e_ents,
                c,
                new.weight,
                mtu,
            );
        }
        if old.rate_bps != new.rate_bps {
            let w = self.nodes[c as usize].g_w;
            if w > 0 {
                self.inner[pi].g.remove_child(w);
                self.nodes[c as usize].g_w = 0;
            }
            self.specs[class].rate_bps = new.rate_bps;
            self.join_g(p, c);
        }
        let node = &mut self.nodes[c as usize];
        node.band = new.prio;
        node.has_rate = new.rate_bps > 0;
        node.rate = node.rate.rerated(
            new.rate_bps,
            ClassSpec::burst_bytes(new.rate_bps, new.burst, self.mtu),
        );
        node.ceil = match new.ceil_bps {
            Some(b) => node
                .ceil
                .rerated(b, ClassSpec::burst_bytes(b, new.cburst, self.mtu)),
            None => Gcra::UNLIMITED,
        };
        self.specs[class] = new.clone();
        // back where its state says
        let live = self.backlogged(c) && self.place(c, now, false);
        match (was_live, live) {
            (true, false) => self.lost_live(p),
            (false, true) => {
                let parent = &mut self.inner[pi];
                parent.live += 1;
                if parent.live == 1 && p != ROOT {
                    self.attach(p, now, false);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Adds a class at `now` (ns) under `spec.parent` (the link, or an inner class): a leaf
    /// (its scheduler `spec.algorithm`), or with `inner` a class that orders children to be
    /// added under it. Returns its index, for [`Self::add_flow`] and the changes. In a tree
    /// whose leaves share one flow table, a new leaf runs the same policy.
    pub fn add_class(&mut self, spec: &ClassSpec, inner: bool) -> Result<usize, SpecError> {
        let name = || spec.name.clone();
        spec.check_values()?;
        let p = match spec.parent {
            None => ROOT,
            Some(i) => self.node_of(i)?,
        };
        if self.nodes[p as usize].is_leaf {
            return Err(SpecError::NotInner {
                class: name(),
                parent: self.names[p as usize].clone(),
            });
        }
        let mut depth = 1;
        let mut up = p;
        while up != ROOT {
            depth += 1;
            up = self.nodes[up as usize].parent;
        }
        if depth > MAX_DEPTH {
            return Err(SpecError::Depth {
                class: name(),
                depth,
            });
        }
        // A removed class's node and slot if there is one (so that classes coming and
        // going keep the tree's size), else new ones.
        let slot = if inner {
            let kind = inner_kind(&spec.algorithm).map_err(|e| SpecError::Class {
                class: name(),
                source: Box::new(e),
            })?;
            let node = Inner::new(kind, 0, false);
            match self.free_inner.pop() {
                Some(i) => {
                    self.inner[i as usize] = node;
                    i
                }
                None => {
                    self.inner.push(node);
                    self.inner.len() as u32 - 1
                }
            }
        } else {
            match self.free_leaves.last() {
                Some(&l) => {
                    self.leaves.replace_leaf(l, spec)?;
                    self.free_leaves.pop();
                    l
                }
                None => self.leaves.add_leaf(spec)?,
            }
        };
        let node = Node::new(spec, p, slot, !inner, self.mtu);
        let c = match self.free_nodes.pop() {
            Some(c) => {
                let i = c as usize;
                let gen = self.nodes[i].gen;
                self.nodes[i] = Node { gen, ..node };
                self.names[i] = spec.name.clone();
                self.g_ents[i] = Ent::default();
                self.e_ents[i] = Ent::default();
                self.stats[i] = ClassStats::default();
                self.specs[i - 1] = spec.clone();
                c
            }
            None => {
                self.nodes.push(node);
                self.names.push(spec.name.clone());
                self.g_ents.push(Ent::default());
                self.e_ents.push(Ent::default());
                self.stats.push(ClassStats::default());
                self.timers.grow();
                self.specs.push(spec.clone());
                self.nodes.len() as u32 - 1
            }
        };
        let pi = self.nodes[p as usize].slot as usize;
        let mtu = self.mtu;
        self.inner[pi].band(usize::from(spec.prio)).add_child(
            &mut self.e_ents,
            c,
            spec.weight,
            mtu,
        );
        self.join_g(p, c);
        Ok(c as usize - 1)
    }

    /// Class `c` (not in `p`'s guarantee schedule's children) joins it with the weight of
    /// its configured rate, if it has one. If that rate is beyond the schedule's scale, the
    /// scale grows (four times the largest rate) and every rated sibling is weighed again:
    /// O(children), rare (each growth at least quadruples the range).
    fn join_g(&mut self, p: u32, c: u32) {
        let bps = self.specs[c as usize - 1].rate_bps;
        if bps == 0 {
            return;
        }
        let pi = self.nodes[p as usize].slot as usize;
        if !self.inner[pi].g_fits(bps) {
            self.rescale_g(p, bps);
        }
        let w = self.inner[pi].g_weight(bps);
        let mtu = self.mtu;
        self.inner[pi]
            .guarantee()
            .add_child(&mut self.g_ents, c, w, mtu);
        self.nodes[c as usize].g_w = w;
    }

    /// `p`'s guarantee schedule takes rates up to `4 max(bps, its children's rates)`:
    /// every rated child leaves it and joins again at the new scale (a scheduled one is
    /// taken out and put back, keeping its place as [`Disc::remove`] does).
    fn rescale_g(&mut self, p: u32, bps: u64) {
        let children: Vec<u32> = (1..self.nodes.len() as u32)
            .filter(|&c| {
                let n = &self.nodes[c as usize];
                n.parent == p && n.g_w > 0 && !n.dead
            })
            .collect();
        let max = children
            .iter()
            .map(|&c| self.specs[c as usize - 1].rate_bps)
            .fold(bps, u64::max)
            .saturating_mul(4);
        let pi = self.nodes[p as usize].slot as usize;
        self.inner[pi].g_shift = (64 - max.leading_zeros()).saturating_sub(RATE_WEIGHT_BITS);
        let mtu = self.mtu;
        for c in children {
            let node = &mut self.nodes[c as usize];
            let was_in = node.in_g;
            let inner = &mut self.inner[pi];
            if was_in {
                inner.g.remove(&mut self.g_ents, c);
            }
            inner.g.remove_child(node.g_w);
            let w = inner.g_weight(self.specs[c as usize - 1].rate_bps);
            inner.g.add_child(&mut self.g_ents, c, w, mtu);
            node.g_w = w;
            if was_in {
                inner.g.activate(&mut self.g_ents, c, mtu);
            }
        }
    }

    /// Removes class `class`, which has no classes under it and no packets queued (else
    /// `SpecError::Busy`: remove it once it drained, as a tc user deletes an idle class).
    /// Its flows go with it: their handles are refused from now on (`unknown_flow`), and
    /// its index and memory go to the next class added.
    pub fn remove_class(&mut self, class: usize) -> Result<(), SpecError> {
        let c = self.node_of(class)?;
        let name = || self.names[c as usize].clone();
        let children = (1..self.nodes.len())
            .filter(|&i| self.nodes[i].parent == c && !self.nodes[i].dead)
            .count();
        let queued = if self.nodes[c as usize].is_leaf {
            self.leaves.stats(self.nodes[c as usize].slot).backlog.pkts
        } else {
            0
        };
        if children > 0 || queued > 0 {
            return Err(SpecError::Busy {
                class: name(),
                children,
                packets: queued,
            });
        }
        self.unschedule(c);
        let node = &self.nodes[c as usize];
        let (p, band, g_w, slot, is_leaf) =
            (node.parent, node.band, node.g_w, node.slot, node.is_leaf);
        let pi = self.nodes[p as usize].slot as usize;
        self.inner[pi].e[usize::from(band)].remove_child(self.specs[class].weight);
        if g_w > 0 {
            self.inner[pi].g.remove_child(g_w);
        }
        if is_leaf {
            self.leaves.remove_leaf(slot);
            self.free_leaves.push(slot);
        } else {
            self.free_inner.push(slot);
        }
        let node = &mut self.nodes[c as usize];
        node.dead = true;
        node.g_w = 0;
        node.gen = node.gen.wrapping_add(1);
        self.free_nodes.push(c);
        Ok(())
    }

    /// When the next timer falls due (ns): the earliest time a dequeue may find a
    /// packet that the last one did not.
    pub fn next_event(&self) -> Option<u64> {
        self.timers.peek().map(|(t, _)| t)
    }

    /// Counters of class `class` (`tc -s class show`), with the drops and backlog of the
    /// leaves below it: O(leaves x depth) (control path).
    pub fn class_stats(&self, class: usize) -> Option<ClassStats> {
        self.all_class_stats().get(class).copied().flatten()
    }

    /// [`Self::class_stats`] of every class at once, by index (`None` for a removed one):
    /// O(leaves x depth), for a statistics snapshot (control path).
    pub fn all_class_stats(&self) -> Vec<Option<ClassStats>> {
        let mut all = self.stats.clone();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if !n.is_leaf || n.dead {
                continue;
            }
            let l = self.leaves.stats(n.slot);
            let mut up = i as u32;
            while up != ROOT {
                let st = &mut all[up as usize];
                st.drops.add_all(&l.drops);
                st.backlog.pkts += l.backlog.pkts;
                st.backlog.bytes += l.backlog.bytes;
                up = self.nodes[up as usize].parent;
            }
        }
        all.into_iter()
            .zip(&self.nodes)
            .skip(1)
            .map(|(st, n)| (!n.dead).then_some(st))
            .collect()
    }

    /// Whether no packet is queued anywhere in the tree: O(1).
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Counters of the whole tree: the sums over its leaves (O(leaves)).
    pub fn stats(&self) -> SchedStats {
        let mut s = self.leaves.total_stats();
        s.drops.add(DropReason::UnknownFlow, self.stale_drops);
        s
    }

    /// Counters of leaf class `class`'s scheduler (drops by reason, backlog, flows).
    pub fn leaf_stats(&self, class: usize) -> Option<SchedStats> {
        let n = self.nodes.get(class + 1)?;
        n.is_leaf.then(|| self.leaves.stats(n.slot))
    }

    /// Packets and bytes queued in the whole tree (O(leaves)).
    pub fn backlog(&self) -> Backlog {
        self.leaves.backlog()
    }

    /// Checks the state invariants of the module documentation (for tests; O(classes)).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut live = vec![0u32; self.inner.len()];
        for c in 1..self.nodes.len() as u32 {
            let node = &self.nodes[c as usize];
            if node.dead {
                continue;
            }
            let name = &self.names[c as usize];
            let backlogged = self.backlogged(c);
            if node.parked && (!backlogged || self.timers.get(c).is_none()) {
                return Err(format!(
                    "class {name} is parked, backlogged {backlogged}, timer {:?}",
                    self.timers.get(c)
                ));
            }
            if node.is_live() != (backlogged && !node.parked) {
                return Err(format!(
                    "class {name}: live {} but backlogged {backlogged}, parked {}",
                    node.is_live(),
                    node.parked
                ));
            }
            if node.in_g && node.in_e && !node.stale {
                return Err(format!("class {name} is live in both g and e"));
            }
            if node.is_live() && !node.in_g && node.has_rate && self.timers.get(c).is_none() {
                return Err(format!("class {name} borrows with no promotion timer"));
            }
            if node.is_live() {
                live[self.nodes[node.parent as usize].slot as usize] += 1;
            }
        }
        let b = self.leaves.backlog().pkts;
        if self.queued != b {
            return Err(format!(
                "{} packets counted queued, {b} in the leaves",
                self.queued
            ));
        }
        for (i, inner) in self.inner.iter().enumerate() {
            if inner.live != live[i] {
                return Err(format!(
                    "inner node {i}: {} live children counted, {} found",
                    inner.live, live[i]
                ));
            }
        }
        Ok(())
    }
}

/// Failure to create a flow in a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeFlowError {
    /// No such class, or not a leaf.
    #[error(transparent)]
    Class(#[from] SpecError),
    /// The leaf's scheduler refused it.
    #[error(transparent)]
    Flow(#[from] FlowError),
}
