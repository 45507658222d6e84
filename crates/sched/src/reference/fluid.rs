//! Fluid allocations: what each flow, or each class of a tree, is owed in steady state when
//! the offered rates are constant. The oracle for the throughput of the flat schedulers
//! (weighted max-min fairness, [`max_min_fair`]) and of the hierarchy ([`allocate_tree`]).
//!
//! # The tree's semantics
//!
//! A tree of classes hangs from a link of rate `R`. A class has a guaranteed `rate`, a
//! `ceil` (a maximum, `rate <= ceil`), a `weight` and a priority band among its siblings
//! (`prio`, strict priority between bands, lowest first); a leaf class offers some rate
//! (infinite for a greedy one), an inner class what its children take. Rates are in any
//! unit, the link's. This is HTB's model (`net/sched/sch_htb.c`: assured rate, ceil,
//! borrowing by priority then by quantum), stated as a fluid allocation:
//!
//! 1. **Demand**, bottom up: a leaf's demand is `min(ceil, offered)`; an inner class's is
//!    `min(ceil, sum of its children's demands)`.
//! 2. **Allocation**, top down: the link gives its children `min(R, sum of their demands)`,
//!    and every class divides what it receives, `A`, among its children:
//!    - first their guarantees, `g_c = min(rate_c, demand_c)`: a backlogged class gets its
//!      rate if its ancestors' allocations allow. If the guarantees add up to more than `A`
//!      (rates oversubscribed), `A` is shared in proportion to the rates, each child
//!      getting at most its `g_c` (max-min fairness weighted by rate);
//!    - then the excess `A - sum g_c`, band by band, lowest band first: within a band,
//!      max-min fairly in proportion to the weights, each child up to its demand (so never
//!      above its ceil); what a band leaves goes to the next.
//!
//! Every class then gets at least `min(rate, demand)` when its siblings' guarantees fit in
//! its parent's allocation, never more than its demand (so never more than its ceil), and
//! the tree is work-conserving under the ceils: a class's allocation is the sum of its
//! children's, and the link carries `min(R, sum of the top classes' demands)`.
//!
//! **Against HTB.** Where HTB differs, the difference is in the priorities: an HTB leaf's
//! `prio` orders it against every leaf borrowing from the same ancestor, wherever they are
//! in its subtree, and an inner class has no `prio` of its own; here a band orders siblings,
//! and an inner class's band holds for its whole subtree. The two agree when the leaves
//! that compete for an ancestor's excess with different priorities are its children, and
//! when all leaves share one priority. HTB's shares between greedy siblings of one band
//! follow their quanta, which pspat derives from the weights.
//!
//! # Exactness
//!
//! `f64` arithmetic: each allocation is exact up to rounding, about 1e-15 relative per
//! class on the path from the link.

use thiserror::Error;

use crate::tree::{ClassSpec, TreeSpec};

/// The weighted max-min fair allocation (water-filling) of `capacity` among senders of
/// `weights` (each above 0) and `demands` (in the unit of `capacity`, infinite for a greedy
/// sender; negative or NaN demands count as 0), in the order given.
///
/// Water level L: sender i gets min(d_i, L w_i), with L the level at which the
/// allocations add up to `capacity`, or everyone gets their demand when the demands add
/// up to less. Found by visiting the senders in order of d_i / w_i: each one whose demand
/// is within its weighted part of what is left is satisfied and leaves (the level can only
/// rise when it does: it took at most its part); the first that is not, and every later
/// one (larger d/w), gets its weighted part of what is left.
///
/// # Panics
/// If the two slices differ in length.
pub fn max_min_fair(capacity: f64, weights: &[f64], demands: &[f64]) -> Vec<f64> {
    assert_eq!(weights.len(), demands.len(), "one weight per demand");
    let demand = |i: usize| if demands[i] > 0.0 { demands[i] } else { 0.0 };
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| (demand(a) / weights[a]).total_cmp(&(demand(b) / weights[b])));
    let mut got = vec![0.0; weights.len()];
    let mut left = capacity.max(0.0);
    let mut w_left: f64 = weights.iter().sum();
    for (k, &i) in order.iter().enumerate() {
        if demand(i) <= left * weights[i] / w_left {
            got[i] = demand(i);
            left -= demand(i);
            w_left -= weights[i];
            continue;
        }
        for &j in &order[k..] {
            got[j] = left * weights[j] / w_left;
        }
        break;
    }
    got
}

/// One class of a tree, for [`allocate_tree`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidClass {
    /// Index of the parent class in the slice; `None` for a child of the link.
    pub parent: Option<usize>,
    /// Guaranteed rate (at least 0).
    pub rate: f64,
    /// Maximum rate (at least `rate`; infinite for none).
    pub ceil: f64,
    /// Weight among the siblings of its band (above 0).
    pub weight: f64,
    /// Priority band among its siblings, lowest first.
    pub prio: u8,
    /// For a leaf, the rate it offers (infinite: greedy); `None` for an inner class.
    pub offered: Option<f64>,
}

impl FluidClass {
    /// The classes of the tree `spec` (rate, ceil, weight, band), each leaf `i` offering
    /// `offered[i]` (infinite: greedy; the inner classes' entries are not read).
    ///
    /// # Panics
    ///
    /// If `offered` has fewer entries than `spec` has classes.
    pub fn of_tree(spec: &TreeSpec, offered: &[f64]) -> Vec<FluidClass> {
        let inner = spec.has_children();
        spec.classes
            .iter()
            .enumerate()
            .map(|(i, c)| FluidClass::of_class(c, (!inner[i]).then_some(offered[i])))
            .collect()
    }

    /// A greedy leaf under `parent` with `rate`, no ceil, weight 1, band 0.
    pub fn leaf(parent: Option<usize>, rate: f64) -> Self {
        Self {
            parent,
            rate,
            ceil: f64::INFINITY,
            weight: 1.0,
            prio: 0,
            offered: Some(f64::INFINITY),
        }
    }

    /// An inner class under `parent` with `rate`, no ceil, weight 1, band 0.
    pub fn inner(parent: Option<usize>, rate: f64) -> Self {
        Self {
            offered: None,
            ..Self::leaf(parent, rate)
        }
    }

    /// The same class with ceil `ceil`.
    pub fn with_ceil(self, ceil: f64) -> Self {
        Self { ceil, ..self }
    }

    /// The same class with weight `weight`.
    pub fn with_weight(self, weight: f64) -> Self {
        Self { weight, ..self }
    }

    /// The same class in band `prio`.
    pub fn with_prio(self, prio: u8) -> Self {
        Self { prio, ..self }
    }

    /// The same leaf offering `offered`.
    pub fn offering(self, offered: f64) -> Self {
        Self {
            offered: Some(offered),
            ..self
        }
    }

    /// Class `c` of a tree spec (its parent, rate, ceil, weight and band; no ceil is an
    /// infinite one), offering `offered` if it is a leaf (`None` for an inner class).
    pub fn of_class(c: &ClassSpec, offered: Option<f64>) -> Self {
        Self {
            parent: c.parent,
            rate: c.rate_bps as f64,
            ceil: c.ceil_bps.map_or(f64::INFINITY, |b| b as f64),
            weight: f64::from(c.weight),
            prio: c.prio,
            offered,
        }
    }
}

/// A tree [`allocate_tree`] refuses, naming the class (its index) and the value.
#[derive(Clone, Debug, PartialEq, Error)]
#[allow(missing_docs)] // variant fields are the values the message names
pub enum TreeError {
    #[error("link rate {rate} is not a number at least 0")]
    LinkRate { rate: f64 },
    #[error("class {class}: parent {parent} is not a class (there are {classes})")]
    NoParent {
        class: usize,
        parent: usize,
        classes: usize,
    },
    #[error("class {class} is its own ancestor")]
    Cycle { class: usize },
    #[error("class {class}: rate {rate} is not a number at least 0")]
    Rate { class: usize, rate: f64 },
    #[error("class {class}: ceil {ceil} is below its rate {rate}")]
    Ceil { class: usize, ceil: f64, rate: f64 },
    #[error("class {class}: weight {weight} is not a number above 0")]
    Weight { class: usize, weight: f64 },
    #[error("class {class} has children and offers {offered}: only a leaf offers traffic")]
    InnerOffers { class: usize, offered: f64 },
    #[error("class {class} is a leaf without an offered rate")]
    LeafOffersNothing { class: usize },
}

/// The fluid allocation of a link of rate `link` among a tree of `classes` (see the module
/// documentation): the rate each class gets, in the order given, inner classes included.
pub fn allocate_tree(link: f64, classes: &[FluidClass]) -> Result<Vec<f64>, TreeError> {
    if link.is_nan() || link < 0.0 {
        return Err(TreeError::LinkRate { rate: link });
    }
    let n = classes.len();
    // children[n] are the link's.
    let mut children = vec![Vec::new(); n + 1];
    for (i, c) in classes.iter().enumerate() {
        check_class(i, c, n)?;
        children[c.parent.unwrap_or(n)].push(i);
    }
    for (i, c) in classes.iter().enumerate() {
        match (children[i].is_empty(), c.offered) {
            (false, Some(offered)) => return Err(TreeError::InnerOffers { class: i, offered }),
            (true, None) => return Err(TreeError::LeafOffersNothing { class: i }),
            _ => {}
        }
    }
    let order = top_down(&children, n)?;
    let mut demand = vec![0.0; n];
    for &i in order.iter().rev() {
        let c = &classes[i];
        let wanted = match c.offered {
            Some(offered) => offered.max(0.0),
            None => children[i].iter().map(|&k| demand[k]).sum(),
        };
        demand[i] = wanted.min(c.ceil);
    }
    let mut got = vec![0.0; n];
    let top: f64 = children[n].iter().map(|&k| demand[k]).sum();
    divide(link.min(top), &children[n], classes, &demand, &mut got);
    for &i in &order {
        divide(got[i], &children[i], classes, &demand, &mut got);
    }
    Ok(got)
}

fn check_class(i: usize, c: &FluidClass, n: usize) -> Result<(), TreeError> {
    if let Some(parent) = c.parent.filter(|&p| p >= n) {
        return Err(TreeError::NoParent {
            class: i,
            parent,
            classes: n,
        });
    }
    if c.rate.is_nan() || c.rate < 0.0 {
        return Err(TreeError::Rate {
            class: i,
            rate: c.rate,
        });
    }
    if c.ceil.is_nan() || c.ceil < c.rate {
        return Err(TreeError::Ceil {
            class: i,
            ceil: c.ceil,
            rate: c.rate,
        });
    }
    if !(c.weight > 0.0 && c.weight.is_finite()) {
        return Err(TreeError::Weight {
            class: i,
            weight: c.weight,
        });
    }
    Ok(())
}

/// The classes in an order where each comes after its parent (breadth first from the
/// link); a class never reached is on a cycle.
fn top_down(children: &[Vec<usize>], n: usize) -> Result<Vec<usize>, TreeError> {
    let mut order = children[n].clone();
    let mut next = 0;
    while next < order.len() {
        let i = order[next];
        order.extend_from_slice(&children[i]);
        next += 1;
    }
    if order.len() < n {
        let mut seen = vec![false; n];
        for &i in &order {
            seen[i] = true;
        }
        let class = seen.iter().position(|&s| !s).unwrap_or(0);
        return Err(TreeError::Cycle { class });
    }
    Ok(order)
}

/// Divides `amount` among the classes `kids` (siblings): their guarantees, then the excess
/// band by band (see the module documentation), writing each one's share into `got`.
fn divide(amount: f64, kids: &[usize], classes: &[FluidClass], demand: &[f64], got: &mut [f64]) {
    let guarantee: Vec<f64> = kids
        .iter()
        .map(|&k| classes[k].rate.min(demand[k]))
        .collect();
    let guaranteed: f64 = guarantee.iter().sum();
    if guaranteed >= amount {
        // Oversubscribed rates: shared in proportion to them, each up to its guarantee.
        let owed: Vec<usize> = (0..kids.len()).filter(|&j| guarantee[j] > 0.0).collect();
        let weights: Vec<f64> = owed.iter().map(|&j| classes[kids[j]].rate).collect();
        let caps: Vec<f64> = owed.iter().map(|&j| guarantee[j]).collect();
        for (&j, share) in owed.iter().zip(max_min_fair(amount, &weights, &caps)) {
            got[kids[j]] = share;
        }
        for (j, &k) in kids.iter().enumerate() {
            if guarantee[j] <= 0.0 {
                got[k] = 0.0;
            }
        }
        return;
    }
    for (j, &k) in kids.iter().enumerate() {
        got[k] = guarantee[j];
    }
    let mut excess = amount - guaranteed;
    let mut bands: Vec<u8> = kids.iter().map(|&k| classes[k].prio).collect();
    bands.sort_unstable();
    bands.dedup();
    for band in bands {
        let members: Vec<usize> = (0..kids.len())
            .filter(|&j| classes[kids[j]].prio == band)
            .collect();
        let weights: Vec<f64> = members.iter().map(|&j| classes[kids[j]].weight).collect();
        let room: Vec<f64> = members
            .iter()
            .map(|&j| demand[kids[j]] - guarantee[j])
            .collect();
        for (&j, extra) in members.iter().zip(max_min_fair(excess, &weights, &room)) {
            got[kids[j]] += extra;
            excess -= extra;
        }
        if excess <= 0.0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn water_filling_against_hand_computed_allocations() {
        // (capacity, weights, demands, the allocation worked out by hand)
        type Case<'a> = (f64, &'a [f64], &'a [f64], &'a [f64]);
        let cases: [Case; 7] = [
            // Everyone asks for more than its part: the capacity splits by weight.
            (
                100.0,
                &[1.0, 2.0, 3.0, 4.0],
                &[100.0; 4],
                &[10.0, 20.0, 30.0, 40.0],
            ),
            // One light sender gets its demand; the other two split the 90 left 1:2.
            (
                100.0,
                &[1.0, 1.0, 2.0],
                &[10.0, 100.0, 100.0],
                &[10.0, 30.0, 60.0],
            ),
            // Nobody is saturated: demands (30 of the capacity is left unused).
            (
                100.0,
                &[1.0, 2.0, 3.0],
                &[10.0, 20.0, 40.0],
                &[10.0, 20.0, 40.0],
            ),
            // A cascade: 5 leaves (level 25), then 20 (level 95/3), the last two split 75.
            (
                100.0,
                &[1.0, 1.0, 1.0, 1.0],
                &[5.0, 20.0, 50.0, 50.0],
                &[5.0, 20.0, 37.5, 37.5],
            ),
            // The heavy sender asks little: 10 of its 80; the light one gets the other 90
            // though its weight alone would give it 20.
            (100.0, &[4.0, 1.0], &[10.0, 500.0], &[10.0, 90.0]),
            // Demands exactly at the level: everyone gets their demand, nothing is left.
            (60.0, &[1.0, 2.0], &[20.0, 40.0], &[20.0, 40.0]),
            // No capacity, and negative or NaN demands: nothing for anyone.
            (
                0.0,
                &[1.0, 1.0, 1.0],
                &[5.0, -1.0, f64::NAN],
                &[0.0, 0.0, 0.0],
            ),
        ];
        for (capacity, w, d, want) in cases {
            let got = max_min_fair(capacity, w, d);
            assert!(close(&got, want), "C={capacity} w={w:?} d={d:?}: {got:?}");
        }
        assert!(max_min_fair(10.0, &[], &[]).is_empty());
    }

    #[test]
    fn siblings_get_their_rates_then_share_the_excess_by_weight() {
        let l = FluidClass::leaf;
        // rates 10 and 20, weights 1:1: the excess 70 halves
        let got = allocate_tree(100.0, &[l(None, 10.0), l(None, 20.0)]).unwrap();
        assert!(close(&got, &[45.0, 55.0]), "{got:?}");
        // weights 1:3
        let got = allocate_tree(100.0, &[l(None, 10.0), l(None, 10.0).with_weight(3.0)]).unwrap();
        assert!(close(&got, &[30.0, 70.0]), "{got:?}");
    }

    #[test]
    fn a_ceil_holds_a_class_and_its_excess_goes_to_the_others() {
        let l = FluidClass::leaf;
        let got = allocate_tree(100.0, &[l(None, 10.0).with_ceil(20.0), l(None, 10.0)]).unwrap();
        assert!(close(&got, &[20.0, 80.0]), "{got:?}");
        // a ceil on an inner class holds its subtree; its children share what it gets
        let classes = [
            FluidClass::inner(None, 10.0).with_ceil(30.0),
            l(Some(0), 5.0),
            l(Some(0), 5.0),
            l(None, 10.0).offering(40.0),
        ];
        let got = allocate_tree(100.0, &classes).unwrap();
        assert!(close(&got, &[30.0, 15.0, 15.0, 40.0]), "{got:?}");
    }

    #[test]
    fn the_lowest_band_takes_the_excess_first() {
        let l = FluidClass::leaf;
        let classes = [
            l(None, 10.0).with_prio(1),
            l(None, 10.0).with_prio(0).with_ceil(50.0),
            l(None, 10.0).with_prio(0).offering(15.0),
        ];
        // band 0 takes 40 more for the first, 5 more for the paced one; band 1 the rest
        let got = allocate_tree(100.0, &classes).unwrap();
        assert!(close(&got, &[35.0, 50.0, 15.0]), "{got:?}");
    }

    #[test]
    fn oversubscribed_rates_are_shared_in_proportion_to_them() {
        let l = FluidClass::leaf;
        let got = allocate_tree(60.0, &[l(None, 40.0), l(None, 80.0)]).unwrap();
        assert!(close(&got, &[20.0, 40.0]), "{got:?}");
        // one of them offers less than its part: the other takes the rest of its rate
        let got = allocate_tree(60.0, &[l(None, 40.0).offering(5.0), l(None, 80.0)]).unwrap();
        assert!(close(&got, &[5.0, 55.0]), "{got:?}");
    }

    #[test]
    fn a_three_level_tree_by_hand() {
        // link 1000: site A (rate 600, ceil 700) with subscribers a1 (100, ceil 500) and a2
        // (100, ceil 200), site B (rate 400) with b1 greedy and b2 offering 50.
        let i = FluidClass::inner;
        let l = FluidClass::leaf;
        let classes = [
            i(None, 600.0).with_ceil(700.0),    // 0: A
            i(None, 400.0),                     // 1: B
            l(Some(0), 100.0).with_ceil(500.0), // 2: a1
            l(Some(0), 100.0).with_ceil(200.0), // 3: a2
            l(Some(1), 100.0),                  // 4: b1
            l(Some(1), 100.0).offering(50.0),   // 5: b2
        ];
        let got = allocate_tree(1000.0, &classes).unwrap();
        // demands: A min(700, 700) = 700, B inf; guarantees 600 + 400 = 1000: no excess.
        // A: 600 = 100 + 100 + 400 excess split 1:1 up to room 400 and 100: a2 200, a1 400.
        // B: 400 = 100 + 50 + 250 to b1.
        assert!(
            close(&got, &[600.0, 400.0, 400.0, 200.0, 350.0, 50.0]),
            "{got:?}"
        );
    }

    #[test]
    fn bad_trees_are_refused_naming_the_class() {
        let l = FluidClass::leaf;
        let e = allocate_tree(1.0, &[l(Some(3), 1.0)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "class 0: parent 3 is not a class (there are 1)"
        );
        let i = FluidClass::inner;
        let e = allocate_tree(1.0, &[i(Some(1), 1.0), i(Some(0), 1.0), l(None, 1.0)]);
        assert!(matches!(e, Err(TreeError::Cycle { .. })), "{e:?}");
        let e = allocate_tree(1.0, &[l(None, 2.0).with_ceil(1.0)]).unwrap_err();
        assert_eq!(e.to_string(), "class 0: ceil 1 is below its rate 2");
        let e = allocate_tree(1.0, &[l(None, 1.0).with_weight(0.0)]).unwrap_err();
        assert!(e.to_string().contains("weight 0"), "{e}");
        let e = allocate_tree(1.0, &[FluidClass::inner(None, 1.0)]).unwrap_err();
        assert_eq!(e, TreeError::LeafOffersNothing { class: 0 });
        let e = allocate_tree(1.0, &[l(None, 1.0), l(Some(0), 1.0)]).unwrap_err();
        assert!(
            matches!(e, TreeError::InnerOffers { class: 0, .. }),
            "{e:?}"
        );
        let e = allocate_tree(f64::NAN, &[l(None, 1.0)]).unwrap_err();
        assert!(e.to_string().starts_with("link rate NaN"), "{e}");
    }
}
