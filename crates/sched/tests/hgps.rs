//! Hierarchical GPS against flat GPS where the two must agree: a flat tree, a tree whose
//! classes each hold one leaf (a class with one busy child passes its whole rate down,
//! whatever the child's weight), and, on any tree, the instant the last packet leaves (both
//! are work-conserving).

use proptest::prelude::*;
use pspat_sched::reference::gps::FluidGps;
use pspat_sched::reference::hgps::HierGps;

/// Arrivals: (time ns, flow, length bytes), sorted by time.
type Arrivals = Vec<(u64, usize, u32)>;

fn arrivals(flows: usize) -> impl Strategy<Value = Arrivals> {
    prop::collection::vec((0u64..20_000, 0..flows, 1u32..1500), 1..40).prop_map(|mut v| {
        v.sort_by_key(|a| a.0);
        v
    })
}

/// Class weights, the weights of their single leaves, and arrivals.
fn case() -> impl Strategy<Value = (Vec<u32>, Vec<u32>, Arrivals)> {
    (1usize..6).prop_flat_map(|n| {
        (
            prop::collection::vec(1u32..10, n),
            prop::collection::vec(1u32..10, n),
            arrivals(n),
        )
    })
}

fn compare(
    h: &mut HierGps,
    leaf: impl Fn(usize) -> usize,
    weights: &[u32],
    arr: &[(u64, usize, u32)],
) {
    let mut g = FluidGps::new(weights, 1e9);
    let ids: Vec<_> = arr
        .iter()
        .map(|&(t, f, len)| (h.arrive(t as f64, leaf(f), len), g.arrive(t as f64, f, len)))
        .collect();
    h.drain();
    g.drain();
    for (a, b) in ids {
        let (x, y) = (h.finish_ns(a).unwrap(), g.finish_ns(b).unwrap());
        assert!(
            (x - y).abs() <= 1e-6 * y.max(1.0),
            "packet {a}: {x} against GPS {y}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_flat_tree_is_gps((weights, _, arr) in case()) {
        let tree: Vec<_> = weights.iter().map(|&w| (None, w)).collect();
        compare(&mut HierGps::new(&tree, 1e9), |f| f, &weights, &arr);
    }

    #[test]
    fn classes_of_one_leaf_are_gps_of_the_classes((weights, inner, arr) in case()) {
        // class i at index 2i with weight weights[i], its leaf at 2i + 1 with any weight
        let tree: Vec<_> = weights
            .iter()
            .zip(&inner)
            .enumerate()
            .flat_map(|(i, (&w, &v))| [(None, w), (Some(2 * i), v)])
            .collect();
        compare(&mut HierGps::new(&tree, 1e9), |f| 2 * f + 1, &weights, &arr);
    }
}

/// Node `i` as `(parent, weight)`, as `HierGps::new` takes it.
type Tree = Vec<(Option<usize>, u32)>;

/// A random tree of up to 10 nodes (each node's parent an earlier node or the link), its
/// leaves, and arrivals on them.
fn any_tree() -> impl Strategy<Value = (Tree, Vec<usize>, Arrivals)> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<bool>(), 1u32..10),
        1..10,
    )
    .prop_flat_map(|raw| {
        let tree: Vec<(Option<usize>, u32)> = raw
            .iter()
            .enumerate()
            .map(|(i, &(p, top, w))| ((i > 0 && !top).then(|| p.index(i)), w))
            .collect();
        let leaves: Vec<usize> = (0..tree.len())
            .filter(|&n| tree.iter().all(|&(p, _)| p != Some(n)))
            .collect();
        let n = leaves.len();
        (Just(tree), Just(leaves), arrivals(n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_tree_is_work_conserving((tree, leaves, arr) in any_tree()) {
        let mut h = HierGps::new(&tree, 1e9);
        let mut g = FluidGps::new(&vec![1; leaves.len()], 1e9);
        for &(t, f, len) in &arr {
            h.arrive(t as f64, leaves[f], len);
            g.arrive(t as f64, f, len);
        }
        h.drain();
        g.drain();
        prop_assert!((h.now_ns() - g.now_ns()).abs() <= 1e-6 * g.now_ns().max(1.0),
            "last completion {} against {}", h.now_ns(), g.now_ns());
        // every class served exactly what arrived below it
        for (n, _) in tree.iter().enumerate() {
            let below: u64 = arr
                .iter()
                .filter(|&&(_, f, _)| {
                    let mut at = Some(leaves[f]);
                    while let Some(x) = at {
                        if x == n {
                            return true;
                        }
                        at = tree[x].0;
                    }
                    false
                })
                .map(|&(_, _, len)| u64::from(len))
                .sum();
            prop_assert_eq!(h.service_bytes(n), below as f64);
        }
    }
}
