//! Helpers for the unit tests of the algorithms: draining a scheduler into the order it
//! served, in the form each test compares against.

use crate::{Desc, FlowId, Scheduler};

/// Dequeues until empty; the cookies in service order.
pub(crate) fn drain_cookies<S: Scheduler<Desc> + ?Sized>(s: &mut S) -> Vec<u64> {
    std::iter::from_fn(|| s.dequeue())
        .map(|(_, d)| d.cookie)
        .collect()
}

/// Dequeues until empty; `(flow, cookie)` in service order.
pub(crate) fn drain_pairs<S: Scheduler<Desc> + ?Sized>(s: &mut S) -> Vec<(FlowId, u64)> {
    std::iter::from_fn(|| s.dequeue())
        .map(|(f, d)| (f, d.cookie))
        .collect()
}

/// Dequeues until empty; the served flows in order, each as its letter in `names`.
///
/// # Panics
///
/// If a packet comes from a flow `names` does not list.
pub(crate) fn drain_names<S: Scheduler<Desc> + ?Sized>(
    s: &mut S,
    names: &[(FlowId, char)],
) -> String {
    std::iter::from_fn(|| s.dequeue())
        .map(|(f, _)| {
            names
                .iter()
                .find(|n| n.0 == f)
                .unwrap_or_else(|| panic!("{f:?} is not in {names:?}"))
                .1
        })
        .collect()
}
