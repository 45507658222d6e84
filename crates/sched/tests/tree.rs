//! The tree scheduler against the fluid allocation of its tree
//! ([`pspat_sched::reference::fluid::allocate_tree`]), its ceils against their bound, and
//! its state invariants after every operation.

use proptest::prelude::*;
use pspat_sched::reference::class_service::measure_classes;
use pspat_sched::reference::fluid::{allocate_tree, FluidClass};
use pspat_sched::reference::trace::{Arrival, Trace, TxRecord};
use pspat_sched::tree::leaves::Leaves;
use pspat_sched::tree::{ClassSpec, Dequeued, TreeFlow, TreeSched, TreeSpec, TreeVisitor};
use pspat_sched::{Desc, FlowParams};

/// What a leaf offers: `None` greedy, else a constant bit rate.
type Offer = Option<f64>;

/// A departure: start time (ns), bytes, leaf class.
type Departure = (u64, u32, usize);

/// Runs `spec` on a link of `link_bps` for `end_ns`, with one flow per leaf offering what
/// `offers` says (by class index; inner classes `None` and ignored), packets of `len`
/// bytes. Greedy leaves are topped up to 8 packets whenever they send. Returns the
/// departures. Each leaf its own scheduler, or with `shared` as `tree::visit` builds it
/// (one flow table when the leaves run one policy).
fn simulate(
    spec: &TreeSpec,
    link_bps: u64,
    offers: &[Offer],
    len: u32,
    end_ns: u64,
    shared: bool,
) -> Vec<Departure> {
    struct Run<'a> {
        spec: &'a TreeSpec,
        link_bps: u64,
        offers: &'a [Offer],
        len: u32,
        end_ns: u64,
    }
    impl TreeVisitor<Desc> for Run<'_> {
        type Output = Vec<Departure>;
        fn visit<L: Leaves<Desc> + 'static>(self, t: TreeSched<Desc, L>) -> Vec<Departure> {
            simulate_on(
                t,
                self.spec,
                self.link_bps,
                self.offers,
                self.len,
                self.end_ns,
            )
        }
    }
    let run = Run {
        spec,
        link_bps,
        offers,
        len,
        end_ns,
    };
    if shared {
        pspat_sched::tree::visit(spec, run).unwrap()
    } else {
        run.visit(TreeSched::<Desc>::new(spec).unwrap())
    }
}

fn simulate_on<L: Leaves<Desc>>(
    mut t: TreeSched<Desc, L>,
    spec: &TreeSpec,
    link_bps: u64,
    offers: &[Offer],
    len: u32,
    end_ns: u64,
) -> Vec<Departure> {
    let inner = spec.has_children();
    let mut flows: Vec<Option<(TreeFlow, Offer, f64, u32)>> = vec![None; spec.classes.len()];
    for (c, offer) in offers.iter().enumerate() {
        if !inner[c] {
            let f = t
                .add_flow(c, FlowParams::weighted(1).with_limit_pkts(64))
                .unwrap();
            flows[c] = Some((f, *offer, 0.0, 0));
        }
    }
    let gap = |bps: f64| f64::from(len) * 8e9 / bps;
    let mut now = 0u64;
    let mut cookie = 0;
    let mut out = Vec::new();
    let mut link_frac = 0.0;
    while now < end_ns {
        // arrivals up to now
        for (f, offer, next, queued) in flows.iter_mut().flatten() {
            match offer {
                None => {
                    while *queued < 8 {
                        t.enqueue(now, *f, Desc::new(cookie, len))
                            .expect("8 packets fit");
                        cookie += 1;
                        *queued += 1;
                    }
                }
                Some(bps) => {
                    while *next <= now as f64 {
                        // a leaf offering more than it gets fills its queue: drops
                        if t.enqueue(now, *f, Desc::new(cookie, len)).is_ok() {
                            *queued += 1;
                        }
                        cookie += 1;
                        *next += gap(*bps);
                    }
                }
            }
        }
        let next_arrival = flows
            .iter()
            .flatten()
            .filter(|(_, o, _, _)| o.is_some())
            .map(|(_, _, n, _)| n.ceil() as u64)
            .min()
            .unwrap_or(u64::MAX);
        match t.dequeue(now) {
            Dequeued::Packet { flow, pkt } => {
                out.push((now, pkt.len, flow.class()));
                if let Some((_, _, _, q)) = flows[flow.class()].as_mut() {
                    *q -= 1;
                }
                link_frac += f64::from(pkt.len) * 8e9 / link_bps as f64;
                now += link_frac as u64;
                link_frac -= link_frac.floor();
            }
            Dequeued::Wait(w) => {
                assert!(w > now, "wait for a time already past");
                now = w.min(next_arrival);
            }
            Dequeued::Idle => now = next_arrival,
        }
        t.check_invariants().unwrap();
    }
    out
}

/// Throughput of each class (bit/s), inner ones summing their subtree, over `[from, to)`.
fn rates(spec: &TreeSpec, out: &[Departure], from: u64, to: u64) -> Vec<f64> {
    let mut bytes = vec![0.0; spec.classes.len()];
    for &(t, len, leaf) in out {
        if t < from || t >= to {
            continue;
        }
        let mut c = Some(leaf);
        while let Some(i) = c {
            bytes[i] += f64::from(len);
            c = spec.classes[i].parent;
        }
    }
    bytes.iter().map(|b| b * 8e9 / (to - from) as f64).collect()
}

fn fluid(spec: &TreeSpec, offers: &[Offer]) -> Vec<FluidClass> {
    let offered: Vec<f64> = offers.iter().map(|o| o.unwrap_or(f64::INFINITY)).collect();
    FluidClass::of_tree(spec, &offered)
}

/// Checks every class's throughput after a warm-up against the fluid allocation: within
/// `tol` of it, relative, or 0.05% of the link for small allocations.
fn check_against_fluid(spec: &TreeSpec, link: u64, offers: &[Offer], len: u32, secs: u64) {
    let want = allocate_tree(link as f64, &fluid(spec, offers)).unwrap();
    let end = secs * 1_000_000_000;
    // with one flow per leaf, the leaves' algorithm changes nothing: the shared run makes
    // them all DRR, so that `tree::visit` builds one flow table for them
    let mut drr_leaves = spec.clone();
    let inner = spec.has_children();
    for (i, c) in drr_leaves.classes.iter_mut().enumerate() {
        if !inner[i] {
            c.algorithm = "drr".into();
        }
    }
    for (spec, shared) in [(spec, false), (&drr_leaves, true)] {
        let out = simulate(spec, link, offers, len, end, shared);
        let got = rates(spec, &out, end / 5, end);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let err = (g - w).abs();
            assert!(
                err <= 0.005 * w + 0.0005 * link as f64,
                "class {} ({i}, shared {shared}): {g:.0} bit/s, fluid {w:.0}\nall: {got:?}\nwant: \
                 {want:?}\n{spec:#?}",
                spec.classes[i].name
            );
        }
    }
}

const M: u64 = 1_000_000;

/// The parent of one more class of a random tree of at most 3 levels: one of the classes
/// so far (whose levels `level` holds) above the third level, or the link; records the new
/// class's level.
fn random_parent(rnd: &mut impl FnMut(u64) -> u64, level: &mut Vec<usize>) -> Option<usize> {
    let candidates: Vec<usize> = (0..level.len()).filter(|&p| level[p] < 2).collect();
    let parent = if candidates.is_empty() || rnd(3) == 0 {
        None
    } else {
        Some(candidates[rnd(candidates.len() as u64) as usize])
    };
    level.push(parent.map_or(0, |p| level[p] + 1));
    parent
}

/// A xorshift generator from `seed`: `rnd(n)` is in `0..n`.
fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed | 1;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

#[test]
fn two_sites_with_guarantees_ceils_and_bands() {
    // 100 Mbit/s: site A (30 guaranteed, ceil 60) with a 10 Mbit/s leaf, a weight-2 leaf
    // and a paced 3 Mbit/s leaf; site B (20 guaranteed) with two greedy leaves in bands 0
    // and 1. The excess of 50 goes half and half: A 55 (under its ceil), B 45, all of
    // B's to its band-0 leaf.
    let mut s = TreeSpec::new("wf2q+");
    let a = s.add(ClassSpec::new("A", None, "wf2q+").rate(30 * M).ceil(60 * M));
    let b = s.add(ClassSpec::new("B", None, "drr").rate(20 * M));
    s.add(ClassSpec::new("a1", Some(a), "fifo").rate(10 * M));
    s.add(ClassSpec::new("a2", Some(a), "fifo").weight(2));
    s.add(ClassSpec::new("a3", Some(a), "fifo"));
    s.add(ClassSpec::new("b1", Some(b), "fifo"));
    s.add(ClassSpec::new("b2", Some(b), "fifo").prio(1));
    let offers = [None, None, None, None, Some(3e6), None, None];
    check_against_fluid(&s, 100 * M, &offers, 1000, 10);
}

#[test]
fn oversubscribed_rates_share_by_rate() {
    // Guarantees of 30 + 60 + 90 on a 90 Mbit/s link: shared 1:2:3.
    let mut s = TreeSpec::new("drr");
    for (i, r) in [30, 60, 90].into_iter().enumerate() {
        s.add(ClassSpec::new(format!("c{i}"), None, "fifo").rate(r * M));
    }
    check_against_fluid(&s, 90 * M, &[None; 3], 1500, 10);
}

#[test]
fn three_levels_with_weights_and_a_paced_leaf_below_its_rate() {
    let mut s = TreeSpec::new("qfq");
    let site = s.add(ClassSpec::new("site", None, "drr").ceil(80 * M));
    let other = s.add(ClassSpec::new("other", None, "fifo").weight(1));
    let sub1 = s.add(
        ClassSpec::new("sub1", Some(site), "wf2q+")
            .rate(10 * M)
            .ceil(50 * M),
    );
    let sub2 = s.add(ClassSpec::new("sub2", Some(site), "wf2q+").weight(3));
    s.add(ClassSpec::new("f1", Some(sub1), "fifo"));
    s.add(ClassSpec::new("f2", Some(sub1), "fifo").weight(4));
    s.add(ClassSpec::new("f3", Some(sub2), "drr").rate(2 * M));
    s.add(ClassSpec::new("f4", Some(sub2), "drr"));
    let _ = other;
    let offers = [None, None, None, None, None, None, Some(1e6), None];
    check_against_fluid(&s, 100 * M, &offers, 1000, 10);
}

/// Over every interval between two departures of a class, the bytes it sent are at most
/// `ceil * interval + cburst + mtu`.
#[test]
fn ceils_hold_over_every_interval() {
    let mut s = TreeSpec::new("wf2q+");
    let a = s.add(ClassSpec::new("A", None, "drr").ceil(7 * M));
    s.add(ClassSpec::new("a1", Some(a), "fifo").ceil(3 * M));
    s.add(ClassSpec::new("a2", Some(a), "fifo"));
    s.add(
        ClassSpec::new("b", None, "fifo")
            .rate(M)
            .ceil(2 * M)
            .prio(1),
    );
    let offers = [None; 4];
    let end = 5_000_000_000;
    let out = simulate(&s, 100 * M, &offers, 1200, end, false);
    for (c, class) in s.classes.iter().enumerate() {
        let Some(ceil) = class.ceil_bps else { continue };
        let cburst = ClassSpec::burst_bytes(ceil, class.cburst, s.mtu) as f64;
        // max over i <= j of bytes(i..=j) - ceil (t_j - t_i), in one pass
        let mut best_start = f64::NEG_INFINITY;
        let mut sent = 0.0;
        let mut worst = f64::NEG_INFINITY;
        let mut n = 0;
        for &(t, len, leaf) in &out {
            let mut up = Some(leaf);
            let mut mine = false;
            while let Some(i) = up {
                mine |= i == c;
                up = s.classes[i].parent;
            }
            if !mine {
                continue;
            }
            n += 1;
            let credit = ceil as f64 * t as f64 / 8e9;
            best_start = best_start.max(credit - sent);
            sent += f64::from(len);
            worst = worst.max(sent - credit + best_start);
        }
        assert!(n > 1000, "class {} sent {n} packets", class.name);
        assert!(
            worst <= cburst + f64::from(s.mtu),
            "class {}: {worst} bytes above its ceil over some interval (bound {})",
            class.name,
            cburst + f64::from(s.mtu)
        );
        // and it is held to it: within 1% over the last second
        let r = rates(&s, &out, end - 1_000_000_000, end)[c];
        assert!(r <= ceil as f64 * 1.01, "class {}: {r} bit/s", class.name);
    }
}

/// A random tree of up to 3 levels and 12 classes on a 100 Mbit/s link: rates, ceils,
/// weights, bands, greedy and paced leaves, drr and wf2q+ nodes, from `seed`.
fn random_tree(seed: u64, algs: &[&str]) -> (TreeSpec, Vec<Offer>) {
    let mut rnd = rng(seed);
    let pick = |r: u64| algs[r as usize % algs.len()];
    let mut s = TreeSpec::new(pick(rnd(2)));
    let mut level = Vec::new();
    let n = 2 + rnd(11) as usize;
    for i in 0..n {
        let parent = random_parent(&mut rnd, &mut level);
        let mut c = ClassSpec::new(format!("c{i}"), parent, pick(rnd(2)))
            .weight(1 + rnd(5) as u32)
            .prio(rnd(3) as u8);
        if rnd(2) == 0 {
            c = c.rate((1 + rnd(40)) * M);
        }
        if rnd(3) == 0 {
            let ceil = c.rate_bps.max(M) + rnd(60) * M;
            c = c.ceil(ceil);
        }
        s.add(c);
    }
    let inner = s.has_children();
    let offers = (0..n)
        .map(|i| (!inner[i] && rnd(3) == 0).then(|| ((1 + rnd(30)) * M) as f64))
        .collect();
    (s, offers)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random trees: every class's throughput within 0.5% of the fluid allocation.
    #[test]
    fn random_trees_get_the_fluid_allocation(seed in any::<u64>()) {
        let (spec, offers) = random_tree(seed, &["wf2q+", "qfq"]);
        check_against_fluid(&spec, 100 * M, &offers, 1000, 4);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random trees with DRR nodes as well. A DRR node sends a child's quantum (weight
    /// times the mtu) back to back, and a grandchild whose rate burst is smaller than that
    /// runs out of guarantee inside the burst and lets a sibling of a lower band borrow:
    /// the shares depart from the fluid ones by up to a few percent of the link (2.4% in
    /// 1500 random trees). WF2Q+ nodes, whose service is smooth, stay within 0.5%.
    #[test]
    fn random_trees_with_drr_nodes_stay_near_the_fluid_allocation(seed in any::<u64>()) {
        let (spec, offers) = random_tree(seed, &["drr", "wf2q+", "qfq"]);
        let want = allocate_tree(1e8, &fluid(&spec, &offers)).unwrap();
        let out = simulate(&spec, 100 * M, &offers, 1000, 4_000_000_000, seed % 2 == 0);
        let got = rates(&spec, &out, 800_000_000, 4_000_000_000);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 0.03e8, "{got:?}\n{want:?}");
        }
    }
}

/// Runs weight-only `spec` (one flow per leaf, flow `k` in leaf `leaves[k]`) on a link of
/// `rate_bps` with `arrivals`: the transmission trace.
fn run_trace(spec: &TreeSpec, leaves: &[usize], arrivals: &[Arrival], rate_bps: f64) -> Trace {
    let mut t = TreeSched::<Desc>::new(spec).unwrap();
    let flows: Vec<TreeFlow> = leaves
        .iter()
        .map(|&l| {
            t.add_flow(l, FlowParams::weighted(1).with_limit_pkts(1 << 16))
                .unwrap()
        })
        .collect();
    let mut trace = Trace {
        rate_bps,
        tx: Vec::new(),
        drops: Vec::new(),
    };
    let mut now = 0.0f64;
    let mut i = 0;
    loop {
        while i < arrivals.len() && arrivals[i].time_ns as f64 <= now {
            let a = arrivals[i];
            t.enqueue(a.time_ns, flows[a.flow], Desc::new(i as u64, a.len))
                .unwrap();
            i += 1;
        }
        match t.dequeue(now as u64) {
            Dequeued::Packet { pkt, .. } => {
                let a = arrivals[pkt.cookie as usize];
                let finish = now + f64::from(a.len) * 8e9 / rate_bps;
                trace.tx.push(TxRecord {
                    seq: pkt.cookie as usize,
                    flow: a.flow,
                    len: a.len,
                    arrival_ns: a.time_ns as f64,
                    dequeue_ns: now,
                    start_ns: now,
                    finish_ns: finish,
                });
                now = finish;
            }
            Dequeued::Idle if i == arrivals.len() => {
                assert_eq!(t.backlog().pkts, 0, "idle with packets queued");
                return trace;
            }
            Dequeued::Idle => {
                assert_eq!(t.backlog().pkts, 0, "idle with packets queued");
                now = arrivals[i].time_ns as f64;
            }
            Dequeued::Wait(w) => panic!("a weight-only tree waits until {w}"),
        }
        t.check_invariants().unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Weight-only trees (no rate, no ceil, one band) with bursty arrivals of 64 to 1500
    /// bytes: every leaf's T-WFI, measured against its share
    /// (`reference::class_service`), is within the sum over its path of each node's index
    /// at its share of the link `phi_a R`: `5 L / (phi_a R)` for WF2Q+ nodes (`wf2q++` with
    /// `m = 1`), `10 L / (phi_a R)` for QFQ nodes (QFQ+ eq. 22 with `m = M = 1`), plus the
    /// transmission of one packet: the H-WF2Q+ composition (Bennett and Zhang 1997) with
    /// head-independent budgets. (An inner class's T-WFI, one FIFO index over packets of
    /// several leaves, also counts the order among its leaves, which no bound of this
    /// form covers; the composition bounds sessions, the leaves.)
    #[test]
    fn weight_only_trees_meet_the_summed_wfi(seed in any::<u64>(), qfq in any::<bool>()) {
        let (alg, index) = if qfq { ("qfq", 10.0) } else { ("wf2q+", 5.0) };
        let mut rnd = rng(seed);
        let mut spec = TreeSpec::new(alg);
        let mut level = Vec::new();
        let n = 2 + rnd(9) as usize;
        for i in 0..n {
            let parent = random_parent(&mut rnd, &mut level);
            spec.add(ClassSpec::new(format!("c{i}"), parent, "fifo").weight(1 + rnd(8) as u32));
        }
        let inner = spec.has_children();
        // inner classes schedule with `alg`; one flow per leaf
        for (i, c) in spec.classes.iter_mut().enumerate() {
            if inner[i] {
                c.algorithm = alg.into();
            }
        }
        let leaves: Vec<usize> = (0..n).filter(|&i| !inner[i]).collect();
        let rate = 10e6;
        let mut arrivals = Vec::new();
        for (f, _) in leaves.iter().enumerate() {
            let mut t = rnd(1_000_000);
            for _ in 0..(5 + rnd(20)) {
                // a burst, then a pause
                for _ in 0..(1 + rnd(12)) {
                    arrivals.push(Arrival { time_ns: t, flow: f, len: 64 + rnd(1437) as u32 });
                    t += rnd(200_000);
                }
                t += rnd(20_000_000);
            }
        }
        arrivals.sort_by_key(|a| (a.time_ns, a.flow));
        let trace = run_trace(&spec, &leaves, &arrivals, rate);
        prop_assert_eq!(trace.tx.len(), arrivals.len());
        let tree: Vec<(Option<usize>, u32)> = spec.classes.iter().map(|c| (c.parent, c.weight)).collect();
        let got = measure_classes(&trace, &arrivals, &tree, &leaves);
        let l = 1500.0 * 8e9 / rate;
        for &c in &leaves {
            let svc = &got[c];
            let mut bound = l;
            let mut a = Some(c);
            while let Some(i) = a {
                bound += index * l / got[i].phi;
                a = spec.classes[i].parent;
            }
            prop_assert!(
                svc.t_wfi_ns <= bound,
                "class {c}: T-WFI {} ns above {bound} (phi {})\n{:#?}", svc.t_wfi_ns, svc.phi, spec
            );
        }
    }
}

/// Trees the change test runs.
const SEEDS: u64 = 60;

/// Thousands of changes while traffic flows: rates, ceils, weights and bands of random
/// classes change every few packets and leaves are added with flows of their own. After
/// every step the state invariants hold; nothing is lost (every accepted packet leaves, the
/// only refusals are queue limits, counted); and once the changes stop, the classes get
/// the fluid allocation of the tree as it then is.
#[test]
fn changes_under_load_lose_nothing() {
    let mut total_changes = 0;
    let mut total_removed = 0;
    for seed in 1..=SEEDS {
        let mut rnd = rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (mut spec, mut offers) = random_tree(rnd(u64::MAX), &["wf2q+", "qfq"]);
        let mut t = TreeSched::<Desc>::new(&spec).unwrap();
        let mut inner = spec.has_children();
        let mut flows: Vec<Option<TreeFlow>> = vec![None; spec.classes.len()];
        for c in 0..spec.classes.len() {
            if !inner[c] {
                flows[c] = Some(
                    t.add_flow(c, FlowParams::weighted(1).with_limit_pkts(64))
                        .unwrap(),
                );
            }
        }
        let link = 100 * M;
        let len = 1000u32;
        let mut queued = vec![0u32; spec.classes.len()];
        let mut next = vec![0.0f64; spec.classes.len()];
        let (mut accepted, mut refused, mut sent, mut handed_back) = (0u64, 0u64, 0u64, 0u64);
        let mut refused_stale = 0u64;
        let mut removed = 0;
        let mut now = 0u64;
        let mut rates_from = 0;
        let mut bytes = vec![0.0; spec.classes.len()];
        let changes_end = 2_000_000_000u64;
        let end = 6_000_000_000u64;
        let mut changes = 0;
        let mut step = 0u64;
        while now < end {
            step += 1;
            // arrivals
            for c in 0..spec.classes.len() {
                let Some(f) = flows[c] else { continue };
                let want = match offers[c] {
                    None => 8u32.saturating_sub(queued[c]),
                    Some(bps) => {
                        let mut k = 0;
                        while next[c] <= now as f64 {
                            k += 1;
                            next[c] += f64::from(len) * 8e9 / bps;
                        }
                        k
                    }
                };
                for _ in 0..want {
                    match t.enqueue(now, f, Desc::new(0, len)) {
                        Ok(()) => {
                            accepted += 1;
                            queued[c] += 1;
                        }
                        Err(r) => {
                            assert_eq!(r.reason, pspat_sched::DropReason::FlowPacketLimit);
                            refused += 1;
                        }
                    }
                }
            }
            // changes
            if now < changes_end && step % 20 == 0 {
                let alive: Vec<usize> = (0..spec.classes.len())
                    .filter(|&c| offers[c] != Some(0.0))
                    .collect();
                let c = alive[rnd(alive.len() as u64) as usize];
                let mut new = spec.classes[c].clone();
                new.weight = 1 + rnd(5) as u32;
                new.prio = rnd(3) as u8;
                new.rate_bps = if rnd(2) == 0 { 0 } else { (1 + rnd(40)) * M };
                new.ceil_bps = (rnd(3) == 0).then(|| new.rate_bps.max(M) + rnd(60) * M);
                t.change_class(now, c, &new).unwrap();
                spec.classes[c] = new;
                changes += 1;
                if step % 2000 == 0 {
                    // a new greedy leaf under a random inner class or the link
                    let parents: Vec<usize> =
                        (0..spec.classes.len()).filter(|&i| inner[i]).collect();
                    let parent = (!parents.is_empty() && rnd(2) == 0)
                        .then(|| parents[rnd(parents.len() as u64) as usize]);
                    let leaf = ClassSpec::new(format!("n{step}"), parent, "fifo")
                        .weight(1 + rnd(3) as u32);
                    let i = t.add_class(&leaf, false).unwrap();
                    if i == spec.classes.len() {
                        spec.add(leaf);
                        inner.push(false);
                        offers.push(None);
                        queued.push(0);
                        next.push(0.0);
                        bytes.push(0.0);
                        flows.push(None);
                    } else {
                        // the index of a class removed before
                        assert_eq!(offers[i], Some(0.0), "{i} was removed");
                        spec.classes[i] = leaf;
                        offers[i] = None;
                    }
                    flows[i] = Some(
                        t.add_flow(i, FlowParams::weighted(1).with_limit_pkts(64))
                            .unwrap(),
                    );
                }
                if step % 3000 == 0 {
                    // an added leaf goes: its flow (packets handed back), then the class
                    if let Some(c) = (0..spec.classes.len())
                        .find(|&c| spec.classes[c].name.starts_with('n') && flows[c].is_some())
                    {
                        let f = flows[c].take().unwrap();
                        let back = t.remove_flow(f).unwrap();
                        handed_back += back.len() as u64;
                        queued[c] = 0;
                        t.remove_class(c).unwrap();
                        assert!(
                            t.add_flow(c, FlowParams::weighted(1)).is_err(),
                            "a removed class takes no flow"
                        );
                        // its flow's handle is refused, and counted so, even once the
                        // index is a new class's
                        let stale = t.enqueue(now, f, Desc::new(0, len)).unwrap_err();
                        assert_eq!(stale.reason, pspat_sched::DropReason::UnknownFlow);
                        refused_stale += 1;
                        offers[c] = Some(0.0);
                        removed += 1;
                    }
                }
                t.check_invariants().unwrap();
            }
            if rates_from == 0 && now >= changes_end + 1_000_000_000 {
                rates_from = now;
            }
            let next_arrival = (0..spec.classes.len())
                .filter(|&c| flows[c].is_some() && offers[c].is_some())
                .map(|c| next[c].ceil() as u64)
                .min()
                .unwrap_or(u64::MAX);
            match t.dequeue(now) {
                Dequeued::Packet { flow, pkt } => {
                    sent += 1;
                    queued[flow.class()] -= 1;
                    if rates_from > 0 {
                        let mut up = Some(flow.class());
                        while let Some(i) = up {
                            bytes[i] += f64::from(pkt.len);
                            up = spec.classes[i].parent;
                        }
                    }
                    now += u64::from(pkt.len) * 8_000_000_000 / link;
                }
                Dequeued::Wait(w) => now = w.min(next_arrival),
                Dequeued::Idle => now = next_arrival,
            }
            t.check_invariants().unwrap();
        }
        assert!(changes > 300, "seed {seed}: {changes} changes");
        total_changes += changes;
        // drain: everything accepted leaves
        loop {
            match t.dequeue(now) {
                Dequeued::Packet { .. } => sent += 1,
                Dequeued::Wait(w) => now = w,
                Dequeued::Idle => break,
            }
        }
        assert_eq!(
            sent + handed_back,
            accepted,
            "seed {seed}: {refused} refused"
        );
        total_removed += removed;
        // the tree's totals: a removed leaf's counters stay there once its place is a
        // new leaf's
        let drops = |reason| -> u64 { t.stats().drops.get(reason) };
        assert_eq!(
            drops(pspat_sched::DropReason::FlowPacketLimit),
            refused,
            "every refusal is counted by its leaf"
        );
        assert_eq!(
            drops(pspat_sched::DropReason::FlowRemoved),
            handed_back,
            "packets of removed flows are counted so"
        );
        assert_eq!(
            t.stats().drops.get(pspat_sched::DropReason::UnknownFlow),
            refused_stale,
            "packets for a removed class's flow are counted by the tree"
        );
        // after the changes, the fluid allocation of the tree as it is
        let want = allocate_tree(link as f64, &fluid(&spec, &offers)).unwrap();
        let secs = (end - rates_from) as f64 / 1e9;
        for (i, w) in want.iter().enumerate() {
            let g = bytes[i] * 8.0 / secs;
            assert!(
                (g - w).abs() <= 0.005 * w + 0.001 * link as f64,
                "seed {seed} class {i}: {g:.0} against {w:.0}\n{spec:#?}"
            );
        }
    }
    assert!(total_changes > 1000 * SEEDS, "{total_changes} changes");
    assert!(total_removed > SEEDS, "{total_removed} classes removed");
}

/// A class's counters: what went through it, and the drops and backlog of the leaves below.
#[test]
fn class_counters_add_up_over_the_subtree() {
    let mut s = TreeSpec::new("wf2q+");
    let site = s.add(ClassSpec::new("site", None, "drr").ceil(10 * M));
    let a = s.add(ClassSpec::new("a", Some(site), "fifo").rate(2 * M));
    let b = s.add(ClassSpec::new("b", Some(site), "fifo"));
    let mut t = TreeSched::<Desc>::new(&s).unwrap();
    let fa = t
        .add_flow(a, FlowParams::weighted(1).with_limit_pkts(4))
        .unwrap();
    let fb = t
        .add_flow(b, FlowParams::weighted(1).with_limit_pkts(4))
        .unwrap();
    for i in 0..6 {
        let _ = t.enqueue(0, fa, Desc::new(i, 1000));
        let _ = t.enqueue(0, fb, Desc::new(i, 500));
    }
    // 4 + 4 queued, 2 + 2 refused
    for _ in 0..3 {
        assert!(matches!(t.dequeue(0), Dequeued::Packet { .. }));
    }
    let (sa, sb, ss) = (
        t.class_stats(a).unwrap(),
        t.class_stats(b).unwrap(),
        t.class_stats(site).unwrap(),
    );
    assert_eq!(ss.sent_pkts, 3);
    assert_eq!(sa.sent_pkts + sb.sent_pkts, 3);
    assert_eq!(ss.sent_bytes, sa.sent_bytes + sb.sent_bytes);
    assert_eq!(ss.drops.total(), 4);
    assert_eq!(ss.backlog.pkts, 5);
    assert_eq!(ss.backlog.bytes, sa.backlog.bytes + sb.backlog.bytes);
    // a's rate burst (two packets' worth, 3000 B) is served first, from its guarantee
    assert_eq!((sa.lent_bytes, sb.sent_pkts), (3000, 0));
    assert!(!t.is_empty());
    assert_eq!(t.stats().backlog.pkts, 5);
}

/// A new configuration from `spec`: a few classes re-rated, re-weighted and moved between
/// bands; sometimes a class and everything under it gone (never leaving its parent without
/// children: that would turn it into a leaf); sometimes a new leaf, or a new inner class
/// with two leaves, under an inner class or the link. New classes are named `n{tag}...`;
/// their offers (greedy, or a constant rate) go into `offers`, by name.
fn mutate(
    spec: &TreeSpec,
    offers: &mut std::collections::HashMap<String, Offer>,
    rnd: &mut impl FnMut(u64) -> u64,
    tag: u64,
) -> TreeSpec {
    let mut new = spec.clone();
    for _ in 0..1 + rnd(3) {
        let c = &mut new.classes[rnd(spec.classes.len() as u64) as usize];
        c.weight = 1 + rnd(5) as u32;
        c.prio = rnd(3) as u8;
        c.rate_bps = if rnd(2) == 0 { 0 } else { (1 + rnd(40)) * M };
        c.ceil_bps = (rnd(3) == 0).then(|| c.rate_bps.max(M) + rnd(60) * M);
    }
    if rnd(3) == 0 && new.classes.len() > 2 {
        let gone = rnd(new.classes.len() as u64) as usize;
        let under = |mut i: usize| loop {
            if i == gone {
                break true;
            }
            match new.classes[i].parent {
                Some(p) => i = p,
                None => break false,
            }
        };
        let siblings = (0..new.classes.len())
            .filter(|&i| i != gone && new.classes[i].parent == new.classes[gone].parent)
            .count();
        if siblings > 0 {
            let keep: Vec<usize> = (0..new.classes.len()).filter(|&i| !under(i)).collect();
            let at = |old: usize| keep.iter().position(|&k| k == old).unwrap();
            let classes = keep
                .iter()
                .map(|&i| {
                    let mut c = new.classes[i].clone();
                    c.parent = c.parent.map(at);
                    c
                })
                .collect();
            new.classes = classes;
        }
    }
    if rnd(3) == 0 {
        let inner = new.has_children();
        let parents: Vec<usize> = (0..new.classes.len()).filter(|&i| inner[i]).collect();
        let parent = (!parents.is_empty() && rnd(2) == 0)
            .then(|| parents[rnd(parents.len() as u64) as usize]);
        let one = rnd(2) == 0;
        let mut leaf = |new: &mut TreeSpec, name: String, parent| {
            let offer = (rnd(3) == 0).then(|| ((1 + rnd(30)) * M) as f64);
            offers.insert(name.clone(), offer);
            new.add(
                ClassSpec::new(name, parent, "fifo")
                    .weight(1 + rnd(3) as u32)
                    .prio(rnd(2) as u8),
            );
        };
        if one {
            leaf(&mut new, format!("n{tag}"), parent);
        } else {
            let mid = new.add(ClassSpec::new(format!("n{tag}"), parent, "qfq").rate(5 * M));
            leaf(&mut new, format!("n{tag}a"), Some(mid));
            leaf(&mut new, format!("n{tag}b"), Some(mid));
        }
    }
    new
}

/// A leaf's traffic in [`configuration_changes_reshape_a_running_tree`].
struct Source {
    flow: TreeFlow,
    offer: Offer,
    /// Next arrival of a paced one (ns).
    next: f64,
    queued: u32,
    /// Its class is in the configuration in force (else it sends no more).
    configured: bool,
}

/// Configurations changing under load, through `tree::diff` and `LiveTree::reshape`:
/// classes re-rated, added and removed with packets queued. Nothing is lost (a removed
/// class drains, then leaves the tree), the invariants hold after every step, what
/// cannot change in place is refused, and once the changes stop and the removed classes
/// have drained, the classes get the fluid allocation of the configuration in force.
#[test]
fn configuration_changes_reshape_a_running_tree() {
    use pspat_sched::tree::{diff, Edit, LiveTree};
    use std::collections::HashMap;
    let (mut reshapes, mut added, mut drained, mut refusals) = (0, 0, 0, 0);
    for seed in 1..=30u64 {
        let mut rnd = rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let (mut spec, offers0) = random_tree(rnd(u64::MAX), &["wf2q+", "qfq", "drr"]);
        let mut offers: HashMap<String, Offer> = spec
            .classes
            .iter()
            .zip(&offers0)
            .map(|(c, o)| (c.name.clone(), *o))
            .collect();
        let mut live = LiveTree::<Desc>::new(&spec).unwrap();
        // By class index in the running tree.
        let mut sources: HashMap<usize, Source> = HashMap::new();
        let attach = |live: &mut LiveTree<Desc>,
                      spec: &TreeSpec,
                      offers: &HashMap<String, Offer>,
                      sources: &mut HashMap<usize, Source>,
                      now: u64| {
            let inner = spec.has_children();
            for (i, c) in spec.classes.iter().enumerate() {
                let at = live.index(i).unwrap();
                if inner[i] || sources.contains_key(&at) {
                    continue;
                }
                let flow = live
                    .sched_mut()
                    .add_flow(at, FlowParams::weighted(1).with_limit_pkts(64))
                    .unwrap();
                let offer = offers[&c.name];
                let (next, queued, configured) = (now as f64, 0, true);
                sources.insert(
                    at,
                    Source {
                        flow,
                        offer,
                        next,
                        queued,
                        configured,
                    },
                );
            }
        };
        attach(&mut live, &spec, &offers, &mut sources, 0);
        let (link, len) = (100 * M, 1000u32);
        let (mut accepted, mut sent) = (0u64, 0u64);
        let (mut now, mut step) = (0u64, 0u64);
        let changes_end = 2_000_000_000u64;
        let mut end = u64::MAX;
        let mut rates_from = 0;
        let mut bytes: HashMap<usize, f64> = HashMap::new();
        while now < end {
            step += 1;
            // After the changes, the sources pause until the removed classes have drained
            // (a removed class keeps its band: one under greedy siblings of a better band,
            // with no rate of its own, drains only when they pause).
            let paused = now >= changes_end && rates_from == 0;
            for s in sources.values_mut().filter(|s| s.configured && !paused) {
                let want = match s.offer {
                    None => 8u32.saturating_sub(s.queued),
                    Some(bps) => {
                        let mut k = 0;
                        while s.next <= now as f64 {
                            k += 1;
                            s.next += f64::from(len) * 8e9 / bps;
                        }
                        k
                    }
                };
                for _ in 0..want {
                    if live
                        .sched_mut()
                        .enqueue(now, s.flow, Desc::new(0, len))
                        .is_ok()
                    {
                        accepted += 1;
                        s.queued += 1;
                    }
                }
            }
            if now < changes_end && step % 400 == 0 {
                let new = mutate(&spec, &mut offers, &mut rnd, step);
                let edits = diff(&spec, &new).unwrap();
                live.reshape(now, &spec, &new, &edits).unwrap();
                reshapes += 1;
                added += edits
                    .iter()
                    .filter(|e| matches!(e, Edit::Add { .. }))
                    .count();
                // a removed class is still in the tree only while it drains
                for e in &edits {
                    if let Edit::Remove { old } = *e {
                        let name = &spec.classes[old].name;
                        if let Some(at) = (0..live.sched().spec_len())
                            .find(|&c| live.sched().spec_of(c).map(|s| &s.name) == Some(name))
                        {
                            assert!(live.draining().contains(&at), "{name} drains");
                        }
                    }
                }
                let still: Vec<usize> = (0..new.classes.len())
                    .map(|i| live.index(i).unwrap())
                    .collect();
                // a class that left the tree took its flow with it (its index may be a
                // new class's already); one that drains keeps it
                sources.retain(|_, s| live.sched().flow_stats(s.flow).is_some());
                for (at, s) in sources.iter_mut() {
                    s.configured &= still.contains(at);
                }
                spec = new;
                attach(&mut live, &spec, &offers, &mut sources, now);
                // a move is refused (a class whose parent keeps another child, so that
                // the parent stays inner)
                let siblings = |c: usize| {
                    let p = spec.classes[c].parent;
                    spec.classes.iter().filter(|x| x.parent == p).count()
                };
                if let Some(c) = (0..spec.classes.len())
                    .find(|&c| spec.classes[c].parent.is_some() && siblings(c) > 1)
                {
                    let mut moved = spec.clone();
                    moved.classes[c].parent = None;
                    let e = diff(&spec, &moved).unwrap_err();
                    assert!(e.to_string().contains("parent cannot change"), "{e}");
                    refusals += 1;
                }
            }
            let before = live.draining().len();
            live.drain();
            drained += before - live.draining().len();
            if before > live.draining().len() {
                sources.retain(|_, s| live.sched().flow_stats(s.flow).is_some());
            }
            if paused && live.draining().is_empty() {
                // measured after a second of warm-up
                for s in sources.values_mut() {
                    s.next = s.next.max(now as f64);
                }
                rates_from = now + 1_000_000_000;
                end = rates_from + 2_000_000_000;
            }
            let paused = now >= changes_end && rates_from == 0;
            let next_arrival = sources
                .values()
                .filter(|s| s.configured && !paused && s.offer.is_some())
                .map(|s| s.next.ceil() as u64)
                .min()
                .unwrap_or(u64::MAX);
            match live.sched_mut().dequeue(now) {
                Dequeued::Packet { flow, pkt } => {
                    sent += 1;
                    sources.get_mut(&flow.class()).unwrap().queued -= 1;
                    if rates_from > 0 && now >= rates_from {
                        *bytes.entry(flow.class()).or_default() += f64::from(pkt.len);
                    }
                    now += u64::from(pkt.len) * 8_000_000_000 / link;
                }
                Dequeued::Wait(w) => now = w.min(next_arrival),
                // (greedy sources that paused send at the next step)
                Dequeued::Idle => now = next_arrival.min(now + 1_000),
            }
            live.sched().check_invariants().unwrap();
        }
        loop {
            match live.sched_mut().dequeue(now) {
                Dequeued::Packet { .. } => sent += 1,
                Dequeued::Wait(w) => now = w,
                Dequeued::Idle => break,
            }
        }
        assert_eq!(sent, accepted, "seed {seed}: every accepted packet left");
        live.drain();
        assert!(
            live.draining().is_empty(),
            "seed {seed}: removed classes drained"
        );
        // the configuration in force gets its fluid allocation
        let offered: Vec<Offer> = spec
            .classes
            .iter()
            .map(|c| offers.get(&c.name).copied().flatten())
            .collect();
        let want = allocate_tree(link as f64, &fluid(&spec, &offered)).unwrap();
        let mut got = vec![0.0; spec.classes.len()];
        for i in 0..spec.classes.len() {
            let b = bytes.get(&live.index(i).unwrap()).copied().unwrap_or(0.0);
            let mut up = Some(i);
            while let Some(c) = up {
                got[c] += b * 8e9 / (end - rates_from) as f64;
                up = spec.classes[c].parent;
            }
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 0.005 * w + 0.001 * link as f64,
                "seed {seed} class {}: {g:.0} against {w:.0}\n{spec:#?}",
                spec.classes[i].name
            );
        }
    }
    assert!(reshapes > 30 * 50, "{reshapes} reshapes");
    assert!(
        added > 100 && drained > 30 && refusals > 100,
        "{added} added, {drained} drained, {refusals} refused"
    );
}
