//! Helpers for the unit tests of the algorithms and the references: draining a scheduler
//! into the order it served, in the form each test compares against, and random runs on a
//! link.

use crate::flow::FlowParams;
use crate::reference::link::run_on_link;
use crate::reference::trace::{Arrival, Trace};
use crate::registry::{build, Params};
use crate::{Desc, FlowId, Scheduler};

/// The next number of a xorshift64 sequence (`state` not 0).
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `n` random arrivals on flows of `weights`, drawn from `state` (bursts of arrivals at one
/// instant, gaps of up to 20 us, a third of the packets 1500 bytes, the others 1 to 1500),
/// run through `alg` on a 1 Gbit/s link without a transmit queue.
pub(crate) fn random_run_on_link(
    alg: &str,
    weights: &[u32],
    n: usize,
    state: &mut u64,
) -> (Trace, Vec<Arrival>) {
    let mut s = build::<Desc>(alg, &Params::new(), 1024).unwrap();
    let ids: Vec<_> = weights
        .iter()
        .map(|&w| s.add_flow(FlowParams::weighted(w)).unwrap())
        .collect();
    let mut a = Vec::new();
    let mut t = 0;
    for _ in 0..n {
        let r = xorshift(state);
        t += if r % 4 == 0 { r % 20_000 } else { 0 };
        let flow = (r >> 8) as usize % weights.len();
        let len = if (r >> 16) % 3 == 0 {
            1500
        } else {
            1 + ((r >> 24) % 1500) as u32
        };
        a.push(Arrival {
            time_ns: t,
            flow,
            len,
        });
    }
    (run_on_link(&mut s, &ids, &a, 1e9), a)
}

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
