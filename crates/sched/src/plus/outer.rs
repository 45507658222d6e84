//! What SCHED must provide to schedule aggregates in SCHED+ ([`super::PlusSched`]).
//!
//! The outer scheduler sees each aggregate as one entity whose "head packet" is its budget
//! and whose weight is the sum of its flows' weights (the aggregate's [`super::Agg::cost`] is the
//! reciprocal of that weight). At most one aggregate is *in service*: it is out of the
//! outer schedule from [`Outer::next`] (or [`Outer::activate`] straight into service) until
//! [`Outer::charge`]. Every other backlogged aggregate is in the outer schedule, and no
//! idle one is.
//!
//! `V`, the system virtual time, advances by the bytes served over `W`, the sum of the
//! weights of *all* flows. SCHED+ reports served bytes in batches ([`Outer::advance`]),
//! always before any other call, so `V` is exact whenever the outer scheduler reads it.

use super::aggregates::Aggregates;
use crate::registry::AlgorithmInfo;

/// A timestamp scheduler that SCHED+ can run over aggregates.
pub trait Outer: Default + 'static {
    /// The outer scheduler's state of one aggregate (timestamps, group, heap position).
    type Ent: Copy + Default + std::fmt::Debug;

    /// The SCHED+ algorithm this outer scheduler makes (name, source, guarantee; the
    /// parameters must include [`super::M_PARAM`]).
    const INFO: AlgorithmInfo;

    /// `W`, the sum of all flows' weights, changes by `delta`.
    fn add_weight(&mut self, delta: i64);

    /// `V += bytes / W` (`bytes < 2^31`).
    fn advance(&mut self, bytes: u64);

    /// A new aggregate of flows of weight `weight` and maximum packet `max_len` (idle, not
    /// scheduled): sets what of `ent` depends on them only (QFQ's group), and timestamps
    /// that give it no credit. The aggregate
    /// weight (its members) changes without a call here: it is read from [`super::Agg::cost`].
    fn configure(&self, ent: &mut Self::Ent, weight: u32, max_len: u32);

    /// Aggregate `a`, idle, becomes backlogged with a budget of `budget` bytes: start time by
    /// SCHED's rule for a newly backlogged entity, `F = S + budget / weight`. If
    /// `into_service`, no aggregate is in service nor scheduled: `a` goes straight into
    /// service (`V` moves up to its start if behind); otherwise it joins the schedule.
    fn activate(
        &mut self,
        aggs: &mut Aggregates<Self::Ent>,
        a: u32,
        budget: u64,
        into_service: bool,
    );

    /// Aggregate `a`, in service, received `served` bytes (at most its budget): its finish
    /// time becomes `S + served / weight`. With `Some(budget)` it is still backlogged and
    /// goes back into the schedule with `S = F`, `F = S + budget / weight`.
    fn charge(
        &mut self,
        aggs: &mut Aggregates<Self::Ent>,
        a: u32,
        served: u64,
        requeue: Option<u64>,
    );

    /// Takes the next aggregate out of the schedule into service (after `V = max(V, min
    /// S)` when no aggregate is eligible); `None` if the schedule is empty.
    fn next(&mut self, aggs: &mut Aggregates<Self::Ent>) -> Option<u32>;

    /// Takes aggregate `a`, scheduled and not in service, out of the schedule (its last
    /// flow left or emptied on the control path); its finish time goes back to its start.
    fn remove(&mut self, aggs: &mut Aggregates<Self::Ent>, a: u32);

    /// Counters for [`crate::SchedStats::algorithm`].
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
