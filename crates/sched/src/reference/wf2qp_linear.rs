//! WF2Q+ by linear scan: the oracle for [`crate::algorithms::wf2qp`].
//!
//! The same equations (QFQ+ paper, appendix A.2) and the same fixed-point arithmetic
//! ([`crate::vtime`]), but every decision looks at every flow: among the backlogged flows
//! with `S <= V` take the smallest `F` (ties: lowest index); if there is none, first move
//! `V` to the smallest `S`. No heaps, no eligibility bookkeeping, no truncated keys, so any
//! difference in departure order is a bug in the fast implementation.

use std::collections::VecDeque;

use crate::vtime::{InvWeight, SystemClock, VTime};

#[derive(Debug, Clone)]
struct LinearFlow {
    weight: u32,
    inv_w: InvWeight,
    s: VTime,
    f: VTime,
    queue: VecDeque<(u64, u32)>,
}

/// WF2Q+ with O(N) decisions.
#[derive(Debug, Clone, Default)]
pub struct Wf2qLinear {
    clock: SystemClock,
    flows: Vec<LinearFlow>,
}

impl Wf2qLinear {
    /// No flows.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a flow; flows are numbered 0, 1, ... in creation order.
    pub fn add_flow(&mut self, weight: u32) -> usize {
        self.clock.add_weight(weight);
        let now = self.clock.now();
        self.flows.push(LinearFlow {
            weight,
            inv_w: InvWeight::new(weight),
            s: now,
            f: now,
            queue: VecDeque::new(),
        });
        self.flows.len() - 1
    }

    /// Changes a flow's weight; a queued head packet is re-costed from its start time.
    pub fn set_weight(&mut self, i: usize, weight: u32) {
        let fl = &mut self.flows[i];
        self.clock.remove_weight(fl.weight);
        self.clock.add_weight(weight);
        fl.weight = weight;
        fl.inv_w = InvWeight::new(weight);
        if let Some(&(_, len)) = fl.queue.front() {
            fl.f = fl.s.plus(fl.inv_w.cost(len));
        }
    }

    /// Queues a packet (`cookie` identifies it in [`Self::dequeue`]'s answer).
    pub fn enqueue(&mut self, i: usize, cookie: u64, len: u32) {
        let now = self.clock.now();
        let fl = &mut self.flows[i];
        if fl.queue.is_empty() {
            fl.s = fl.f.max(now);
            fl.f = fl.s.plus(fl.inv_w.cost(len));
        }
        fl.queue.push_back((cookie, len));
    }

    /// The next packet as `(flow, cookie)`.
    pub fn dequeue(&mut self) -> Option<(usize, u64)> {
        let backlogged = || {
            self.flows
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.queue.is_empty())
        };
        let min_s = backlogged().map(|(_, f)| f.s).min()?;
        self.clock.catch_up(min_s);
        let now = self.clock.now();
        let (i, _) = backlogged()
            .filter(|(_, f)| f.s <= now)
            .min_by_key(|(i, f)| (f.f, *i))
            .expect("the flow with the smallest S is eligible");
        let fl = &mut self.flows[i];
        let (cookie, len) = fl.queue.pop_front().expect("backlogged");
        fl.s = fl.f;
        if let Some(&(_, next)) = fl.queue.front() {
            fl.f = fl.s.plus(fl.inv_w.cost(next));
        }
        self.clock.advance(len);
        Some((i, cookie))
    }
}
