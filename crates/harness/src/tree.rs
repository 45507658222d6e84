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
//! Unlike the flat targets, a leaf's scheduler is called through a trait object (the
//! tree's leaves may be of any algorithm): that call is part of the tree's cost.

use pspat_sched::tree::{ClassSpec, Dequeued, TreeFlow, TreeSched, TreeSpec};
use pspat_sched::{FlowParams, Rejected, SchedStats};

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
pub struct TreeTarget {
    tree: TreeSched<BenchPkt>,
    keys: Vec<TreeFlow>,
    /// Leaf ordinal of each class (`u32::MAX` for inner classes).
    leaf_of_class: Vec<u32>,
    /// Flows in each leaf (the last ones may have fewer).
    per_leaf: u32,
    now: u64,
}

impl TreeTarget {
    /// Builds `shape` with `leaf_alg` leaves and gives them `flows` in blocks.
    pub fn new(shape: &TreeShape, leaf_alg: &str, flows: &[FlowParams]) -> Result<Self, Error> {
        let leaves = shape.leaves();
        if leaves > flows.len() as u64 {
            return Err(bad(
                &format!("{shape:?}"),
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
        let mut tree = TreeSched::new(&spec).map_err(|e| bad("tree", e.to_string()))?;
        let mut leaf_of_class = vec![u32::MAX; spec.classes.len()];
        for (l, &c) in leaf_classes.iter().enumerate() {
            leaf_of_class[c] = l as u32;
        }
        let mut keys = Vec::with_capacity(flows.len());
        for (i, p) in flows.iter().enumerate() {
            let leaf = leaf_classes[i / per_leaf];
            let f = tree
                .add_flow(leaf, *p)
                .map_err(|e| bad("tree", e.to_string()))?;
            debug_assert_eq!((i / per_leaf) * per_leaf + f.flow().index() as usize, i);
            keys.push(f);
        }
        Ok(Self {
            tree,
            keys,
            leaf_of_class,
            per_leaf: per_leaf as u32,
            now: 0,
        })
    }
}

/// A [`TreeTarget`] borrowed for a batch.
pub struct TreeBatch<'a>(&'a mut TreeTarget);

impl Target for TreeTarget {
    type Key = TreeFlow;
    type Batch<'a> = TreeBatch<'a>;

    fn name(&self) -> &'static str {
        "tree"
    }

    fn key(&self, flow: u32) -> TreeFlow {
        self.keys[flow as usize]
    }

    fn batch(&mut self) -> TreeBatch<'_> {
        TreeBatch(self)
    }

    fn backlog_pkts(&self) -> u64 {
        self.tree.backlog().pkts
    }

    fn stats(&self) -> Option<SchedStats> {
        None
    }
}

impl Queue for TreeBatch<'_> {
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
                let leaf = t.leaf_of_class[flow.class()];
                Some((leaf * t.per_leaf + flow.flow().index(), pkt))
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
