//! The fluid allocation of a class tree against the properties that define it (see
//! `pspat_sched::reference::fluid`): conservation, ceils, guarantees, priority bands and
//! weighted max-min fairness within a band, on random trees.

use proptest::prelude::*;
use pspat_sched::reference::fluid::{allocate_tree, FluidClass};

const EPS: f64 = 1e-6;

/// Random trees: each class's parent is an earlier class or the link; rates, ceils (some
/// infinite), weights, bands and offered rates (some greedy) at random.
fn trees() -> impl Strategy<Value = (f64, Vec<FluidClass>)> {
    let class = (
        any::<prop::sample::Index>(),
        0u32..4,
        0.0f64..400.0,
        prop_oneof![Just(f64::INFINITY), 0.0f64..600.0],
        1u32..8,
        0u8..3,
        prop_oneof![Just(f64::INFINITY), 0.0f64..500.0],
    );
    (1.0f64..2000.0, prop::collection::vec(class, 1..14)).prop_map(|(link, raw)| {
        let mut classes: Vec<FluidClass> = raw
            .iter()
            .enumerate()
            .map(|(i, &(p, top, rate, extra, w, prio, offered))| FluidClass {
                // a third of the classes hang from the link
                parent: (i > 0 && top != 0).then(|| p.index(i)),
                rate,
                ceil: rate + extra,
                weight: f64::from(w),
                prio,
                offered: Some(offered),
            })
            .collect();
        for i in 0..classes.len() {
            if let Some(p) = classes[i].parent {
                classes[p].offered = None;
            }
        }
        (link, classes)
    })
}

fn children(classes: &[FluidClass], parent: Option<usize>) -> Vec<usize> {
    (0..classes.len())
        .filter(|&i| classes[i].parent == parent)
        .collect()
}

/// Demand, restated: a leaf's offered rate or an inner class's children's, under its ceil.
fn demand(classes: &[FluidClass], i: usize) -> f64 {
    let wanted = match classes[i].offered {
        Some(o) => o,
        None => children(classes, Some(i))
            .iter()
            .map(|&k| demand(classes, k))
            .sum(),
    };
    wanted.min(classes[i].ceil)
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= EPS * (1.0 + a.abs().max(b.abs()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_allocation_has_the_properties_that_define_it((link, classes) in trees()) {
        let got = allocate_tree(link, &classes).unwrap();
        let d: Vec<f64> = (0..classes.len()).map(|i| demand(&classes, i)).collect();
        // what each parent divides: the link carries what its children can take
        let top: f64 = children(&classes, None).iter().map(|&k| d[k]).sum();
        let mut parents: Vec<(Option<usize>, f64)> = vec![(None, link.min(top))];
        parents.extend(
            (0..classes.len())
                .filter(|&i| classes[i].offered.is_none())
                .map(|i| (Some(i), got[i])),
        );
        for (i, &g) in got.iter().enumerate() {
            prop_assert!(g >= -EPS, "class {i} got {g}");
            prop_assert!(g <= d[i] + EPS * (1.0 + d[i]), "class {i} got {g} above its demand {}", d[i]);
        }
        for (parent, amount) in parents {
            let kids = children(&classes, parent);
            let sum: f64 = kids.iter().map(|&k| got[k]).sum();
            // conservation: a class's allocation is its children's
            prop_assert!(near(sum, amount), "{parent:?}: children {sum} of {amount}");
            let guarantee = |k: usize| classes[k].rate.min(d[k]);
            let guaranteed: f64 = kids.iter().map(|&k| guarantee(k)).sum();
            if guaranteed > amount + EPS * (1.0 + amount) {
                // oversubscribed rates: no more than the guarantees, max-min by rate
                for &a in &kids {
                    prop_assert!(got[a] <= guarantee(a) + EPS * (1.0 + got[a]));
                    if got[a] >= guarantee(a) - EPS * (1.0 + got[a]) {
                        continue;
                    }
                    for &b in &kids {
                        let (level_a, level_b) = (got[a] / classes[a].rate, got[b] / classes[b].rate);
                        prop_assert!(classes[b].rate == 0.0 || level_b <= level_a + EPS * (1.0 + level_a),
                            "class {b} at {level_b} of its rate above short class {a} at {level_a}");
                    }
                }
                continue;
            }
            for &a in &kids {
                // every class gets its guarantee when its siblings' fit
                prop_assert!(got[a] >= guarantee(a) - EPS * (1.0 + got[a]),
                    "class {a} got {} below its guarantee {}", got[a], guarantee(a));
                let unsatisfied = got[a] < d[a] - EPS * (1.0 + d[a]);
                if !unsatisfied {
                    continue;
                }
                for &b in &kids {
                    let excess_b = got[b] - guarantee(b);
                    if excess_b <= EPS * (1.0 + got[b]) {
                        continue;
                    }
                    // a higher band gets excess only when the lower bands are satisfied
                    prop_assert!(classes[b].prio <= classes[a].prio,
                        "class {b} (band {}) got excess while class {a} (band {}) wants more",
                        classes[b].prio, classes[a].prio);
                    // within a band, nobody's excess per weight is above an unsatisfied one's
                    if classes[b].prio == classes[a].prio {
                        let level_a = (got[a] - guarantee(a)) / classes[a].weight;
                        let level_b = excess_b / classes[b].weight;
                        prop_assert!(level_b <= level_a + EPS * (1.0 + level_a),
                            "class {b} at level {level_b} above unsatisfied class {a} at {level_a}");
                    }
                }
            }
        }
    }
}
