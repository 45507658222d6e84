//! The machinery shared by the self-clocked fair queueing algorithms, STFQ and SCFQ.
//!
//! Both stamp each packet `p` of flow `i` with a virtual start and finish tag,
//!
//! ```text
//! S(p) = max(v(a_p), F(p'))      F(p) = S(p) + l(p) / w_i
//! ```
//!
//! (`p'` the previous packet of the flow, `a_p` the arrival time), serve packets in order of
//! one of the tags, and take the system virtual time `v` from the packet in service instead
//! of simulating a fluid system: STFQ (see [`super::stfq`]) serves by start tag and sets `v`
//! to the start tag of the packet in service, SCFQ ([`super::scfq`]) serves by finish tag
//! and sets `v` to its finish tag. When the scheduler empties, `v` becomes the largest
//! finish tag served (Goyal et al., section 2), so a busy period starts after every tag of
//! the previous one.
//!
//! # No per-packet tags
//!
//! While a flow is backlogged, `v` (a tag of a packet already served) never exceeds the
//! finish tag of the flow's last queued packet, so `S(p) = F(p')` for every packet but the
//! first of a backlog period. The tags of the head packet therefore follow from the flow's
//! previous finish tag and the head length alone, and only the head's tags are stored.
//!
//! # State
//!
//! A heap of backlogged flows keyed by their head packet's start (STFQ) or finish (SCFQ)
//! tag; per flow the head's tags (for an idle flow, `f` is the finish tag of its last
//! packet) and the inverse weight.
//!
//! # Invariants
//!
//! - A flow is in the heap exactly when it is backlogged.
//! - Tags served are non-decreasing in the ordering tag, so `v` never decreases.
//!
//! # Complexity
//!
//! O(log N) per packet.

use std::marker::PhantomData;

use crate::error::ConfigError;
use crate::flow::FlowParams;
use crate::packet::Packet;
use crate::policy::{Flows, Policy};
use crate::registry::{AlgorithmInfo, Params};
use crate::util::heap::VHeap;
use crate::vtime::{InvWeight, VTime};

/// Which tag orders service and drives the clock.
pub trait TagRule: 'static {
    /// Description of the algorithm this rule makes.
    const INFO: AlgorithmInfo;
    /// `true`: serve by finish tag (SCFQ); `false`: by start tag (STFQ).
    const BY_FINISH: bool;
}

/// Per-flow tags.
#[derive(Debug)]
pub struct TagFlow {
    s: VTime,
    f: VTime,
    inv_w: InvWeight,
}

impl Default for TagFlow {
    fn default() -> Self {
        Self {
            s: VTime::ZERO,
            f: VTime::ZERO,
            inv_w: InvWeight::new(1),
        }
    }
}

impl TagFlow {
    #[inline(always)]
    fn key<R: TagRule>(&self) -> VTime {
        if R::BY_FINISH {
            self.f
        } else {
            self.s
        }
    }
}

/// A self-clocked fair queueing scheduler with rule `R`.
#[derive(Debug)]
pub struct SelfClocked<R> {
    v: VTime,
    max_finish: VTime,
    heap: VHeap,
    _rule: PhantomData<R>,
}

impl<R> Default for SelfClocked<R> {
    fn default() -> Self {
        Self {
            v: VTime::ZERO,
            max_finish: VTime::ZERO,
            heap: VHeap::new(),
            _rule: PhantomData,
        }
    }
}

impl<R: TagRule> SelfClocked<R> {
    /// The system virtual time.
    pub fn vtime(&self) -> VTime {
        self.v
    }
}

impl<R: TagRule> Policy for SelfClocked<R> {
    type FlowState = TagFlow;
    type Tag = ();

    const INFO: AlgorithmInfo = R::INFO;

    fn from_params(_params: &Params) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }

    fn flow_added<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        let (v, w) = (self.v, flows.weight(f));
        let st = flows.st_mut(f);
        st.inv_w = InvWeight::new(w);
        st.s = v;
        st.f = v;
    }

    fn flow_updated<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32, old: FlowParams) {
        let w = flows.weight(f);
        if w == old.weight {
            return;
        }
        let head = flows.head_len(f);
        let st = flows.st_mut(f);
        st.inv_w = InvWeight::new(w);
        if let Some(len) = head {
            st.f = st.s.plus(st.inv_w.cost(len));
            if R::BY_FINISH {
                let key = st.f;
                self.heap.rekey(f, key);
            }
        }
    }

    fn flow_removing<P: Packet>(&mut self, flows: &mut Flows<P, Self>, f: u32) {
        if flows.is_backlogged(f) {
            self.heap.remove(f);
        }
    }

    #[inline(always)]
    fn enqueued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        len: u32,
        was_empty: bool,
    ) {
        if !was_empty {
            return;
        }
        let v = self.v;
        let st = flows.st_mut(f);
        st.s = st.f.max(v);
        st.f = st.s.plus(st.inv_w.cost(len));
        self.heap.push(st.key::<R>(), f);
    }

    #[inline(always)]
    fn select<P: Packet>(&mut self, _flows: &mut Flows<P, Self>) -> Option<u32> {
        self.heap.peek_flow()
    }

    #[inline(always)]
    fn dequeued<P: Packet>(
        &mut self,
        flows: &mut Flows<P, Self>,
        f: u32,
        _len: u32,
        _tag: (),
        more: bool,
    ) {
        let next = if more { flows.head_len(f) } else { None };
        let st = flows.st_mut(f);
        // The packet just dequeued is the one in service: it sets the clock.
        self.v = if R::BY_FINISH { st.f } else { st.s };
        self.max_finish = self.max_finish.max(st.f);
        st.s = st.f;
        match next {
            Some(next) => {
                st.f = st.s.plus(st.inv_w.cost(next));
                self.heap.rekey_top(st.key::<R>());
            }
            None => {
                self.heap.pop();
                if self.heap.is_empty() {
                    // End of the busy period.
                    self.v = self.max_finish;
                }
            }
        }
    }
}
