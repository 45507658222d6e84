//! Hierarchical link sharing: a tree of classes with a guaranteed rate, a ceil, a weight
//! and a priority band each, over leaf classes that are schedulers of flows.
//!
//! The link is the root. An inner class orders its children with one of the
//! [`spec::INNER_ALGORITHMS`]; a leaf class is any scheduler of the registry, holding the
//! flows (a subscriber's fair queueing between its connections). The semantics are those
//! of [`crate::reference::fluid`] (HTB's model with per-sibling priorities): a backlogged
//! class gets its rate if its ancestors allow, its parent's excess goes band by band and by
//! weight within a band, and no class exceeds its ceil. [`sched`] says how, per packet,
//! in O(depth).
//!
//! - [`spec`]: the tree as the user describes it, checked;
//! - [`sched`]: the scheduler;
//! - [`discipline`]: how an inner class orders its children;
//! - [`leaves`]: where the flows live: one scheduler per leaf, or one policy per leaf over
//!   a shared flow table;
//! - [`gcra`]: the rate and ceil buckets;
//! - [`timers`]: when classes over their ceil or rate may go on;
//! - [`live`]: a running tree following its configuration as it changes.

pub mod discipline;
pub mod gcra;
pub mod leaves;
pub mod live;
pub mod sched;
pub mod spec;
pub mod timers;

pub use live::{diff, Edit, LiveTree};
pub use sched::{ClassStats, Dequeued, TreeFlow, TreeFlowError, TreeSched};
pub use spec::{ClassSpec, SpecError, TreeSpec};

use crate::packet::Packet;
use crate::policy::Policy;
use leaves::{DynLeaves, Leaves, SharedLeaves, SharedVisitor};

/// Code run with the concrete type of a tree built by [`visit`], so that its data path
/// is monomorphised.
pub trait TreeVisitor<P> {
    /// What the visit returns.
    type Output;
    /// Called with the tree.
    fn visit<L: Leaves<P> + 'static>(self, tree: TreeSched<P, L>) -> Self::Output;
}

/// Builds the tree `spec` describes and hands it to `visitor`: with [`SharedLeaves`] (one
/// flow table, the leaves' policy monomorphised) when every leaf runs the same policy
/// with the same parameters, with [`DynLeaves`] otherwise.
pub fn visit<P: Packet + Send + 'static, V: TreeVisitor<P>>(
    spec: &TreeSpec,
    visitor: V,
) -> Result<V::Output, SpecError> {
    spec.validate()?;
    let leaves: Vec<&ClassSpec> = sched::leaf_classes(spec).collect();
    let same = leaves.windows(2).all(|w| {
        w[0].params == w[1].params
            && crate::registry::lookup(&w[0].algorithm).map(|a| a.name)
                == crate::registry::lookup(&w[1].algorithm).map(|a| a.name)
    });
    /// Finds out whether an algorithm is a policy, building one and dropping it.
    struct Probe;
    impl crate::registry::PolicyVisitor for Probe {
        type Output = ();
        fn visit<A: Policy + Send>(self, _: A) {}
    }
    let first = leaves.first().filter(|_| same);
    let leaf_error = |c: &ClassSpec| {
        let class = c.name.clone();
        move |source| SpecError::Leaf { class, source }
    };
    let shared = match first {
        Some(c) => crate::registry::visit_policy(&c.algorithm, &c.params, Probe)
            .map_err(leaf_error(c))?
            .is_some(),
        None => false,
    };
    if let (true, Some(first)) = (shared, first) {
        struct Shared<'a, V> {
            spec: &'a TreeSpec,
            visitor: V,
        }
        impl<P: Packet + Send + 'static, V: TreeVisitor<P>> SharedVisitor<P> for Shared<'_, V> {
            type Output = Result<V::Output, SpecError>;
            fn visit<A: Policy + Send>(self, leaves: SharedLeaves<P, A>) -> Self::Output {
                Ok(self
                    .visitor
                    .visit(TreeSched::with_leaves(self.spec, leaves)?))
            }
        }
        let limits: Vec<u32> = leaves.iter().map(|c| c.limit_pkts).collect();
        let capacity = limits
            .iter()
            .map(|&l| u64::from(l))
            .sum::<u64>()
            .min(u64::from(crate::table::MAX_FLOWS)) as u32;
        return leaves::build_shared(
            &first.algorithm,
            &first.params,
            limits,
            capacity,
            Shared { spec, visitor },
        )
        .map_err(leaf_error(first))?
        .expect("the probe found a policy");
    }
    Ok(visitor.visit(TreeSched::<P, DynLeaves<P>>::new(spec)?))
}
