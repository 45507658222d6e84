//! A running tree that follows its configuration: when the configuration's tree changes,
//! the running one is changed in place, class by class, and no queued packet is lost.
//!
//! Classes are matched by name between the tree in force and the new one ([`diff`]):
//!
//! - a class in both keeps its place and its packets, and takes its new rate, ceil,
//!   bursts, weight and band ([`TreeSched::change_class`]);
//! - a class only in the new tree is added, parents before children
//!   ([`TreeSched::add_class`]);
//! - a class only in the old tree stops being part of the configuration at once (nothing
//!   new can reach it: the flowsets on it went with it), but it leaves the running tree
//!   only once it is empty ([`TreeSched::remove_class`]): its packets drain at its rate and
//!   ceil, under its parent, as `tc class del` would not let a class with packets go
//!   either. [`LiveTree::drain`] removes what has drained, children before parents.
//!
//! What cannot change in place is refused, naming the class, before anything changes: a
//! class moving to another parent, changing its algorithm, its parameters or its packet
//! limit, or turning from a leaf into an inner class or back (its state is built around
//! them; a user removes it and adds one under a new name).
//!
//! Indices: the running tree numbers its classes in the order they were added (the first
//! tree's, then each addition); a removed class's index and memory go to the next class
//! added, so subscribers coming and going do not grow the tree, and a flow handle
//! ([`super::TreeFlow`]) of a removed class is refused (it carries its class's
//! generation). The configuration in force numbers the classes its own way:
//! [`LiveTree::index`] maps one to the other.

use std::collections::HashMap;

use super::leaves::{DynLeaves, Leaves};
use super::sched::{ClassStats, TreeSched};
use super::spec::{SpecError, TreeSpec};
use crate::packet::Packet;

/// One step from a tree to the next ([`diff`]); indices into the old and the new
/// [`TreeSpec::classes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are the indices the doc names
pub enum Edit {
    /// The class is in both trees (its values may differ).
    Keep { old: usize, new: usize },
    /// The class is new.
    Add { new: usize },
    /// The class is gone.
    Remove { old: usize },
}

/// How to turn `old` into `new` in place: removals children first, then the classes kept,
/// then additions parents first. Refuses a change that cannot be made in place (see the
/// module docs), naming the class, and a new tree that is not valid.
pub fn diff(old: &TreeSpec, new: &TreeSpec) -> Result<Vec<Edit>, SpecError> {
    new.validate()?;
    if old.algorithm != new.algorithm {
        return Err(SpecError::Change {
            class: "the link".into(),
            field: "algorithm",
        });
    }
    // Names are unique in a valid tree.
    let by_name = |t: &TreeSpec| -> HashMap<String, usize> {
        t.classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect()
    };
    let (old_at, new_at) = (by_name(old), by_name(new));
    let (old_inner, new_inner) = (old.has_children(), new.has_children());
    let mut edits = Vec::new();
    for i in depth_order(old).into_iter().rev() {
        if !new_at.contains_key(&old.classes[i].name) {
            edits.push(Edit::Remove { old: i });
        }
    }
    for (n, c) in new.classes.iter().enumerate() {
        let Some(&o) = old_at.get(&c.name) else {
            continue;
        };
        let was = &old.classes[o];
        let field = if parent_name(old, was.parent) != parent_name(new, c.parent) {
            Some("parent")
        } else if was.algorithm != c.algorithm || was.params != c.params {
            Some("algorithm")
        } else if old_inner[o] != new_inner[n] {
            Some("kind (leaf or inner class)")
        } else if !new_inner[n] && was.limit_pkts != c.limit_pkts {
            Some("packet limit")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(SpecError::Change {
                class: c.name.clone(),
                field,
            });
        }
        edits.push(Edit::Keep { old: o, new: n });
    }
    for n in depth_order(new) {
        if !old_at.contains_key(&new.classes[n].name) {
            edits.push(Edit::Add { new: n });
        }
    }
    Ok(edits)
}

fn parent_name(t: &TreeSpec, p: Option<usize>) -> Option<&str> {
    p.map(|p| t.classes[p].name.as_str())
}

/// The classes of a valid tree, parents before children (by depth, then index).
fn depth_order(t: &TreeSpec) -> Vec<usize> {
    let depth = |mut i: usize| {
        let mut d = 0;
        while let Some(p) = t.classes[i].parent {
            d += 1;
            i = p;
        }
        d
    };
    let mut order: Vec<usize> = (0..t.classes.len()).collect();
    order.sort_by_key(|&i| (depth(i), i));
    order
}

/// A tree scheduler and the configuration it follows; see the module docs.
pub struct LiveTree<P, L = DynLeaves<P>> {
    sched: TreeSched<P, L>,
    /// Per class of the configuration in force: its index in `sched`.
    index: Vec<usize>,
    /// Classes removed from the configuration that still hold packets or classes, by
    /// their index in `sched`, children before parents.
    draining: Vec<usize>,
}

impl<P: Packet + Send + 'static> LiveTree<P> {
    /// The tree `spec` describes (each leaf its own scheduler).
    pub fn new(spec: &TreeSpec) -> Result<Self, SpecError> {
        Ok(Self::of(TreeSched::new(spec)?))
    }
}

impl<P: Packet, L: Leaves<P>> LiveTree<P, L> {
    /// Follows the configuration `sched` was just built from.
    pub fn of(sched: TreeSched<P, L>) -> Self {
        let n = sched.spec_len();
        Self {
            sched,
            index: (0..n).collect(),
            draining: Vec::new(),
        }
    }

    /// The scheduler.
    #[inline]
    pub fn sched(&self) -> &TreeSched<P, L> {
        &self.sched
    }

    /// The scheduler, to queue and send.
    #[inline]
    pub fn sched_mut(&mut self) -> &mut TreeSched<P, L> {
        &mut self.sched
    }

    /// Where class `class` of the configuration in force is in [`Self::sched`].
    #[inline]
    pub fn index(&self, class: usize) -> Option<usize> {
        self.index.get(class).copied()
    }

    /// Classes removed from the configuration that are still draining, as indices in
    /// [`Self::sched`].
    pub fn draining(&self) -> &[usize] {
        &self.draining
    }

    /// Applies `edits` ([`diff`] of `old`, the configuration in force, and `new`) at
    /// `now` (ns): `new` is in force after it. A refusal here (a leaf's algorithm that
    /// cannot be built, say) leaves the changes before it applied: build the tree `new`
    /// describes first to know it cannot happen.
    pub fn reshape(
        &mut self,
        now: u64,
        old: &TreeSpec,
        new: &TreeSpec,
        edits: &[Edit],
    ) -> Result<(), SpecError> {
        debug_assert_eq!(
            old.classes.len(),
            self.index.len(),
            "old is the tree in force"
        );
        let inner = new.has_children();
        let mut index = vec![usize::MAX; new.classes.len()];
        for e in edits {
            match *e {
                Edit::Remove { old: o } => {
                    let c = self.index[o];
                    match self.sched.remove_class(c) {
                        Ok(()) => {}
                        Err(SpecError::Busy { .. }) => self.draining.push(c),
                        Err(e) => return Err(e),
                    }
                }
                Edit::Keep { old: o, new: n } => {
                    let c = self.index[o];
                    index[n] = c;
                    let mut spec = new.classes[n].clone();
                    // The parent is the same class (checked), under its running index.
                    spec.parent = self.sched.spec_of(c).and_then(|s| s.parent);
                    if self.sched.spec_of(c) != Some(&spec) {
                        self.sched.change_class(now, c, &spec)?;
                    }
                }
                Edit::Add { new: n } => {
                    let mut spec = new.classes[n].clone();
                    // Parents come first: theirs is known.
                    spec.parent = spec.parent.map(|p| index[p]);
                    index[n] = self.sched.add_class(&spec, inner[n])?;
                }
            }
        }
        debug_assert!(index.iter().all(|&i| i != usize::MAX), "every class placed");
        self.index = index;
        // A draining class whose children were all removed may go now.
        self.drain();
        Ok(())
    }

    /// Removes the draining classes that are empty now (children first); returns how many
    /// are still draining. O(draining x classes); free when nothing drains.
    pub fn drain(&mut self) -> usize {
        if self.draining.is_empty() {
            return 0;
        }
        let sched = &mut self.sched;
        self.draining.retain(|&c| sched.remove_class(c).is_err());
        self.draining.len()
    }

    /// Counters of every class of the configuration in force, by its index there (see
    /// [`TreeSched::all_class_stats`]), then of every draining one.
    pub fn class_stats(&self) -> (Vec<ClassStats>, Vec<(usize, ClassStats)>) {
        let all = self.sched.all_class_stats();
        let live = self
            .index
            .iter()
            .map(|&c| all[c].unwrap_or_default())
            .collect();
        let draining = self
            .draining
            .iter()
            .filter_map(|&c| Some((c, all[c]?)))
            .collect();
        (live, draining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::ClassSpec;

    fn tree() -> TreeSpec {
        let mut t = TreeSpec::new("qfq");
        let site = t.add(ClassSpec::new("site", None, "drr").ceil(10_000_000));
        // a leaf whose algorithm could also order children
        t.add(ClassSpec::new("a", Some(site), "drr").rate(1_000_000));
        t.add(ClassSpec::new("b", Some(site), "fifo"));
        t
    }

    #[test]
    fn removals_go_children_first_and_additions_parents_first() {
        let old = tree();
        let mut new = TreeSpec::new("qfq");
        let x = new.add(ClassSpec::new("x", None, "wf2q+"));
        // listed before its parent: still added after it
        new.classes.push(ClassSpec::new("y", Some(2), "fifo"));
        new.add(ClassSpec::new("z", Some(x), "drr"));
        new.classes[1].parent = Some(2);
        new.classes[2].parent = Some(0);
        let e = diff(&old, &new).unwrap();
        assert_eq!(
            e,
            vec![
                Edit::Remove { old: 2 },
                Edit::Remove { old: 1 },
                Edit::Remove { old: 0 },
                Edit::Add { new: 0 },
                Edit::Add { new: 2 },
                Edit::Add { new: 1 },
            ]
        );
    }

    #[test]
    fn what_cannot_change_in_place_is_refused_naming_the_class() {
        let old = tree();
        let refused = |new: TreeSpec| diff(&old, &new).unwrap_err().to_string();
        let mut moved = tree();
        moved.classes[2].parent = None;
        assert_eq!(
            refused(moved),
            "class b: its parent cannot change while the tree runs"
        );
        let mut alg = tree();
        alg.classes[1].algorithm = "fifo".into();
        assert_eq!(
            refused(alg),
            "class a: its algorithm cannot change while the tree runs"
        );
        let mut turned = tree();
        turned.add(ClassSpec::new("c", Some(1), "fifo"));
        assert_eq!(
            refused(turned),
            "class a: its kind (leaf or inner class) cannot change while the tree runs"
        );
        let mut limit = tree();
        limit.classes[2].limit_pkts = 5;
        assert_eq!(
            refused(limit),
            "class b: its packet limit cannot change while the tree runs"
        );
        let mut link = tree();
        link.algorithm = "wf2q+".into();
        assert_eq!(
            refused(link),
            "class the link: its algorithm cannot change while the tree runs"
        );
        let mut twice = tree();
        twice.classes[2].name = "a".into();
        assert_eq!(refused(twice), "two classes are named a");
    }

    #[test]
    fn a_removed_class_drains_before_it_leaves_and_indices_follow() {
        use crate::{Desc, FlowParams};
        let old = tree();
        let mut t = LiveTree::<Desc>::new(&old).unwrap();
        let f = t
            .sched_mut()
            .add_flow(2, FlowParams::weighted(1).with_limit_pkts(8))
            .unwrap();
        t.sched_mut().enqueue(0, f, Desc::new(1, 100)).unwrap();
        // b goes, c comes
        let mut new = TreeSpec::new("qfq");
        let site = new.add(ClassSpec::new("site", None, "drr").ceil(20_000_000));
        new.add(ClassSpec::new("c", Some(site), "fifo"));
        new.add(ClassSpec::new("a", Some(site), "drr").rate(2_000_000));
        let e = diff(&old, &new).unwrap();
        t.reshape(0, &old, &new, &e).unwrap();
        assert_eq!(t.draining(), &[2]);
        assert_eq!(
            (t.index(0), t.index(1), t.index(2)),
            (Some(0), Some(3), Some(1))
        );
        assert_eq!(t.sched().spec_of(1).unwrap().rate_bps, 2_000_000);
        assert_eq!(t.sched().spec_of(0).unwrap().ceil_bps, Some(20_000_000));
        assert_eq!(t.drain(), 1, "b has a packet");
        assert!(matches!(
            t.sched_mut().dequeue(0),
            crate::tree::Dequeued::Packet { .. }
        ));
        assert_eq!(t.drain(), 0);
        assert!(t.sched().spec_of(2).is_none(), "b is gone");
        let (live, draining) = t.class_stats();
        assert_eq!(live[0].sent_pkts, 1, "the site keeps what b sent");
        assert!(draining.is_empty());
        // b's packet was refused once its index went to another class
        assert!(t.sched_mut().enqueue(0, f, Desc::new(2, 100)).is_err());
    }

    #[test]
    fn classes_coming_and_going_keep_the_tree_its_size() {
        use crate::{Desc, FlowParams};
        let mut spec = tree();
        let mut t = LiveTree::<Desc>::new(&spec).unwrap();
        for i in 0..1000 {
            // b's successor: a leaf of a new name each time, with a packet sent through
            let mut new = spec.clone();
            new.classes[2].name = format!("b{i}");
            let e = diff(&spec, &new).unwrap();
            let now = i * 1_000_000; // 100 bytes a ms: within every rate
            t.reshape(now, &spec, &new, &e).unwrap();
            spec = new;
            let at = t.index(2).unwrap();
            let f = t
                .sched_mut()
                .add_flow(at, FlowParams::weighted(1).with_limit_pkts(4))
                .unwrap();
            t.sched_mut().enqueue(now, f, Desc::new(i, 100)).unwrap();
            assert!(matches!(
                t.sched_mut().dequeue(now),
                crate::tree::Dequeued::Packet { .. }
            ));
        }
        assert_eq!(
            t.sched().spec_len(),
            3,
            "the removed classes' places were reused"
        );
        assert_eq!(t.sched().stats().sent_pkts, 1000, "and their counters kept");
    }
}
