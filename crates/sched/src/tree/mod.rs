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
//! - [`gcra`]: the rate and ceil buckets;
//! - [`timers`]: when classes over their ceil or rate may go on.

pub mod discipline;
pub mod gcra;
pub mod sched;
pub mod spec;
pub mod timers;

pub use sched::{ClassStats, Dequeued, TreeFlow, TreeFlowError, TreeSched};
pub use spec::{ClassSpec, SpecError, TreeSpec};
