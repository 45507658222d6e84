//! A tree of classes as the benchmark's target (`-tree 10:wf2q+/1000:drr`): the classes of
//! [`pspat_sched::tree`] above the flows of the flowsets.
//!
//! # The shape
//!
//! `FANOUT:ALG[/FANOUT:ALG...]`, one term per level from the link down: the link's
//! scheduler `ALG` orders `FANOUT` classes, each of which orders `FANOUT` classes of the
//! next level with that level's `ALG`, and so on; the classes of the last level are the
//! leaves, each a scheduler of the benchmark's algorithm (`-alg`) over its flows. The
//! flowsets' flows go to the leaves in blocks of `ceil(flows / leaves)`, in order: leaf
//! `k` has flows `k b .. (k + 1) b`, as a subscriber's connections. `10:wf2q+/1000:wf2q+` with `-alg drr -flowsets 1::100000`
//! is the 3-level tree: 10 sites, 1000 subscribers each, 10 flows in each
//! subscriber. The classes have weight 1, no rate and no ceil.
//!
//! # Time
//!
//! The tree takes the time at each operation; here it is a virtual clock that advances by
//! one ns per byte dequeued (an 8 Gbit/s link), which a weight-only tree never reads.
//!
//! The tree is built by [`pspat_sched::tree::visit`]: its leaves share one flow table and
//! their policy is monomorphised into the loop when it is a policy (drr, qfq, wf2q+, ...);
//! fifo and prio leaves are schedulers of their own behind trait objects.

use pspat_sched::tree::leaves::Leaves;
use pspat_sched::tree::{ClassSpec, Dequeued, TreeFlow, TreeSched, TreeSpec, TreeVisitor};
use pspat_sched::{Rejected, SchedStats};

use crate::error::{Error, SetupError};
use crate::pool::BenchPkt;
use crate::target::{Queue, Target};

/// Levels of classes, from the link down: `(fanout, algorithm)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeShape {
    /// Each level's fan-out and the algorithm of the nodes above it.
    pub levels: Vec<(u32, String)>,
}

fn bad(value: &str, reason: impl Into<String>) -> Error {
    SetupError::Option {
        option: "-tree",
        value: value.to_owned(),
        reason: reason.into(),
    }
    .into()
}

impl TreeShape {
    /// Parses `FANOUT:ALG[/FANOUT:ALG...]`.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let mut levels = Vec::new();
        for term in s.split('/') {
            let (n, alg) = term
                .split_once(':')
                .ok_or_else(|| bad(s, format!("'{term}' is not FANOUT:ALG")))?;
            let n: u32 = n
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| bad(s, format!("fan-out '{n}' is not a number above 0")))?;
            pspat_sched::tree::spec::inner_kind(alg).map_err(|e| bad(s, e.to_string()))?;
            levels.push((n, alg.to_owned()));
        }
        if levels.len() > pspat_sched::tree::spec::MAX_DEPTH {
            return Err(bad(
                s,
                format!("at most {} levels", pspat_sched::tree::spec::MAX_DEPTH),
            ));
        }
        Ok(Self { levels })
    }

    /// Number of leaf classes.
    pub fn leaves(&self) -> u64 {
        self.levels.iter().map(|&(n, _)| u64::from(n)).product()
    }

    /// The tree: its classes, leaves last, with `leaf_alg` at the leaves, each leaf
    /// holding up to `leaf_limit` packets. Returns the spec and the class index of each
    /// leaf, in leaf order.
    pub fn spec(&self, leaf_alg: &str, leaf_limit: u32) -> (TreeSpec, Vec<usize>) {
        let mut spec = TreeSpec::new(&self.levels[0].1);
        let mut parents: Vec<Option<usize>> = vec![None];
        for (depth, (n, _)) in self.levels.iter().enumerate() {
            let alg = self
                .levels
                .get(depth + 1)
                .map_or(leaf_alg, |(_, a)| a.as_str());
            let mut next = Vec::with_capacity(parents.len() * *n as usize);
            for &p in &parents {
                for i in 0..*n {
                    let name = format!(
                        "{}.{i}",
                        p.map_or("root".to_owned(), |p| spec.classes[p].name.clone())
                    );
                    let mut c = ClassSpec::new(name, p, alg);
                    c.limit_pkts = leaf_limit;
                    next.push(Some(spec.add(c)));
                }
            }
            parents = next;
        }
        (spec, parents.into_iter().flatten().collect())
    }
}

/// The tree, its flows by benchmark index, and the way back from a tree flow to it.
pub struct TreeTarget<L> {
    tree: TreeSched<BenchPkt, L>,
    keys: Vec<TreeFlow>,
    /// Leaf ordinal of each class (`u32::MAX` for inner classes).
    leaf_of_class: Vec<u32>,
    /// Flows in each leaf (the last ones may have fewer) when the leaves number their own
    /// flows; 0 when the tree numbers them (shared leaves).
    per_leaf: u32,
    now: u64,
}

/// Builds the benchmark of `shape` with `leaf_alg` leaves over the scenario's flows,
/// given to the leaves in blocks.
pub(crate) fn prepare(
    shape: &TreeShape,
    leaf_alg: &str,
    sc: &crate::Scenario,
) -> Result<Box<dyn crate::run::Runner>, Error> {
    let flows = &sc.flow_params;
    let leaves = shape.leaves();
    if leaves > flows.len() as u64 {
        return Err(bad(
            &sc.spec.tree.clone().unwrap_or_default(),
            format!(
                "{leaves} leaves for {} flows: every leaf needs one",
                flows.len()
            ),
        ));
    }
    let per_leaf = flows.len().div_ceil(leaves as usize);
    let limit: u64 = flows
        .iter()
        .map(|p| u64::from(p.limit_pkts))
        .max()
        .unwrap_or(1)
        * per_leaf as u64;
    let (spec, leaf_classes) = shape.spec(leaf_alg, limit.min(1 << 30) as u32);

    struct Build<'a> {
        sc: &'a crate::Scenario,
        leaf_classes: Vec<usize>,
        per_leaf: usize,
    }
    impl TreeVisitor<BenchPkt> for Build<'_> {
        type Output = Result<Box<dyn crate::run::Runner>, Error>;
        fn visit<L: Leaves<BenchPkt> + 'static>(
            self,
            mut tree: TreeSched<BenchPkt, L>,
        ) -> Self::Output {
            let mut leaf_of_class =
                vec![u32::MAX; self.leaf_classes.iter().max().map_or(0, |m| m + 1)];
            for (l, &c) in self.leaf_classes.iter().enumerate() {
                leaf_of_class[c] = l as u32;
            }
            let mut keys = Vec::with_capacity(self.sc.flow_params.len());
            for (i, p) in self.sc.flow_params.iter().enumerate() {
                let leaf = self.leaf_classes[i / self.per_leaf];
                let f = tree
                    .add_flow(leaf, *p)
                    .map_err(|e| bad("tree", e.to_string()))?;
                keys.push(f);
            }
            // Shared leaves number the flows across the tree (flow i is index i), leaves of
            // their own within each leaf; the way back must hold for every flow.
            let global = keys
                .iter()
                .enumerate()
                .all(|(i, k)| k.flow().index() as usize == i);
            let target = TreeTarget {
                tree,
                keys,
                leaf_of_class,
                per_leaf: if global { 0 } else { self.per_leaf as u32 },
                now: 0,
            };
            for (i, k) in target.keys.iter().enumerate() {
                let back = target.back(*k);
                if back as usize != i {
                    return Err(bad("tree", format!("flow {i} maps back to {back}")));
                }
            }
            Ok(crate::run::bench(target, self.sc))
        }
    }
    pspat_sched::tree::visit(
        &spec,
        Build {
            sc,
            leaf_classes,
            per_leaf,
        },
    )
    .map_err(|e| bad("tree", e.to_string()))?
}

impl<L> TreeTarget<L> {
    /// The harness's index of a tree flow.
    #[inline(always)]
    fn back(&self, flow: TreeFlow) -> u32 {
        if self.per_leaf == 0 {
            flow.flow().index()
        } else {
            self.leaf_of_class[flow.class()] * self.per_leaf + flow.flow().index()
        }
    }
}

/// A [`TreeTarget`] borrowed for a batch.
pub struct TreeBatch<'a, L>(&'a mut TreeTarget<L>);

impl<L: Leaves<BenchPkt>> Target for TreeTarget<L> {
    type Key = TreeFlow;
    type Batch<'a>
        = TreeBatch<'a, L>
    where
        L: 'a;

    fn name(&self) -> &'static str {
        "tree"
    }

    fn key(&self, flow: u32) -> TreeFlow {
        self.keys[flow as usize]
    }

    fn batch(&mut self) -> TreeBatch<'_, L> {
        TreeBatch(self)
    }

    fn backlog_pkts(&self) -> u64 {
        self.tree.backlog().pkts
    }

    fn stats(&self) -> Option<SchedStats> {
        None
    }
}

impl<L: Leaves<BenchPkt>> Queue for TreeBatch<'_, L> {
    type Key = TreeFlow;

    #[inline(always)]
    fn enqueue(&mut self, key: TreeFlow, _: u32, pkt: BenchPkt) -> Result<(), Rejected<BenchPkt>> {
        self.0.tree.enqueue(self.0.now, key, pkt)
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(u32, BenchPkt)> {
        let t = &mut *self.0;
        match t.tree.dequeue(t.now) {
            Dequeued::Packet { flow, pkt } => {
                t.now += u64::from(pkt.len);
                Some((t.back(flow), pkt))
            }
            Dequeued::Wait(_) | Dequeued::Idle => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_name_their_errors() {
        let s = TreeShape::parse("10:wf2q+/1000:drr").unwrap();
        assert_eq!(s.leaves(), 10_000);
        let (spec, leaves) = s.spec("qfq", 100);
        assert_eq!(spec.classes.len(), 10_010);
        assert_eq!(leaves.len(), 10_000);
        assert_eq!(spec.classes[leaves[0]].algorithm, "qfq");
        assert_eq!(
            spec.classes[0].algorithm, "drr",
            "a site orders its subscribers by drr"
        );
        for (bad, why) in [
            ("10", "not FANOUT:ALG"),
            ("0:drr", "fan-out '0'"),
            ("4:fifo", "cannot schedule the children"),
        ] {
            let e = TreeShape::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// A tree run gives every packet back in its flow's order, to the flow it came from
    /// (the harness checks each header), and loses none: the way back from a tree flow to
    /// the harness's index holds, with uneven blocks too.
    #[test]
    fn a_tree_run_checks_out() {
        for (tree, flowsets) in [
            ("3:qfq/4:drr", "1::60"),
            ("5:wf2q+", "1::7,3::4"),
            ("2:drr/2:qfq/2:qfq", "1::9"),
        ] {
            for pattern in [crate::pattern::Kind::Smooth, crate::pattern::Kind::Bursty] {
                let spec = crate::BenchSpec {
                    alg: "drr".into(),
                    flowsets: Some(flowsets.into()),
                    loops: 200_000,
                    qmin: crate::Num::PerFlow(4),
                    qmax: crate::Num::PerFlow(30),
                    pattern,
                    tree: Some(tree.into()),
                    ..crate::BenchSpec::default()
                };
                let r = crate::run::run(&spec).unwrap();
                r.check()
                    .unwrap_or_else(|e| panic!("{tree} {flowsets}: {e}"));
                assert!(r.dequeued > 50_000, "{tree}: {r:?}");
                assert_eq!((r.mismatches, r.order_errors, r.lost), (0, 0, 0), "{tree}");
            }
        }
        let spec = crate::BenchSpec {
            alg: "none".into(),
            tree: Some("2:drr".into()),
            ..crate::BenchSpec::default()
        };
        assert!(crate::run::run(&spec)
            .unwrap_err()
            .to_string()
            .contains("-tree"));
    }
}
