//! Hierarchical GPS (H-GPS): the fluid system of a tree of weighted classes, exact and
//! event-driven. The oracle for the service of every class of a hierarchical scheduler
//! (its T-WFI per class), as [`super::gps`] is for the flows of a flat one.
//!
//! J. C. R. Bennett and H. Zhang, "Hierarchical packet fair queueing algorithms", ToN 1997.
//!
//! A tree hangs from a link of rate `R`. At every instant each node that is busy (a leaf
//! with a packet, an inner node with a busy child) is served at its parent's rate times its
//! weight over the sum of its busy siblings' weights, the link's children sharing `R`: GPS
//! at every node. A leaf serves its packets in FIFO order; the system is work-conserving.
//!
//! # Events
//!
//! Between two events (an arrival, a completion) the set of busy nodes, hence every rate,
//! is constant, and each busy leaf's head packet is served at its constant rate. The next
//! completion is the least `remaining / rate` over the busy leaves; the system advances
//! every head by `rate dt`, and completes at that instant every head whose remaining bytes
//! are within `1e-9` of its length of zero (so that heads due at the same instant complete
//! together, however the rounding fell). Times are `f64` ns.
//!
//! # Complexity
//!
//! O(nodes) per event: slow and plain, as a reference should be.

use std::collections::VecDeque;

/// One node of the tree.
#[derive(Clone, Debug)]
struct Node {
    parent: Option<usize>,
    weight: f64,
    children: Vec<usize>,
    /// Leaves: queued packet ids, oldest first.
    queue: VecDeque<usize>,
    /// Leaves: bytes of the head packet served so far.
    head_served: f64,
    /// Bytes of completed packets, this node's subtree.
    done_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
struct Packet {
    leaf: usize,
    len: u32,
    finish_ns: Option<f64>,
}

/// The H-GPS system of a tree of classes; see the module documentation.
///
/// ```
/// use pspat_sched::reference::hgps::HierGps;
///
/// // 8 Gbit/s: one byte per ns. Class 0 with leaves 1 and 2, leaf 3 beside it, weights 1.
/// let mut g = HierGps::new(&[(None, 1), (Some(0), 1), (Some(0), 1), (None, 1)], 8e9);
/// let a = g.arrive(0.0, 1, 300);
/// let b = g.arrive(0.0, 2, 300);
/// let c = g.arrive(0.0, 3, 300);
/// g.drain();
/// assert_eq!(g.finish_ns(c), Some(600.0)); // half the link
/// assert_eq!(g.finish_ns(a), Some(900.0)); // a quarter, then half
/// assert_eq!(g.finish_ns(b), Some(900.0));
/// ```
#[derive(Clone, Debug)]
pub struct HierGps {
    rate_bytes_per_ns: f64,
    now_ns: f64,
    nodes: Vec<Node>,
    /// The link's children.
    top: Vec<usize>,
    packets: Vec<Packet>,
}

impl HierGps {
    /// An empty system at time 0 on a link of `rate_bps` bit/s, node `i` being
    /// `(parent, weight)` of `tree[i]` (`None`: a child of the link). Packets arrive at the
    /// leaves, the nodes without children.
    ///
    /// # Panics
    ///
    /// If the rate is not positive and finite, a weight is zero, a parent does not exist,
    /// or the parents form a cycle.
    pub fn new(tree: &[(Option<usize>, u32)], rate_bps: f64) -> Self {
        assert!(
            rate_bps.is_finite() && rate_bps > 0.0,
            "link rate must be positive and finite, got {rate_bps}"
        );
        let mut nodes: Vec<Node> = tree
            .iter()
            .map(|&(parent, w)| {
                assert!(w > 0, "weights must be positive");
                Node {
                    parent,
                    weight: f64::from(w),
                    children: Vec::new(),
                    queue: VecDeque::new(),
                    head_served: 0.0,
                    done_bytes: 0,
                }
            })
            .collect();
        let mut top = Vec::new();
        for (i, &(parent, _)) in tree.iter().enumerate() {
            match parent {
                Some(p) => {
                    assert!(p < tree.len(), "node {i}: no parent {p}");
                    nodes[p].children.push(i);
                }
                None => top.push(i),
            }
        }
        for i in 0..nodes.len() {
            let mut at = i;
            for _ in 0..=nodes.len() {
                match nodes[at].parent {
                    Some(p) => at = p,
                    None => break,
                }
            }
            assert!(nodes[at].parent.is_none(), "node {i} is its own ancestor");
        }
        Self {
            rate_bytes_per_ns: rate_bps / 8e9,
            now_ns: 0.0,
            nodes,
            top,
            packets: Vec::new(),
        }
    }

    /// Current time, ns.
    pub fn now_ns(&self) -> f64 {
        self.now_ns
    }

    /// Whether no packet is in the system.
    pub fn is_idle(&self) -> bool {
        self.top.iter().all(|&n| !self.busy(n))
    }

    fn busy(&self, n: usize) -> bool {
        let node = &self.nodes[n];
        !node.queue.is_empty() || node.children.iter().any(|&c| self.busy(c))
    }

    /// A packet of `len` bytes arrives at leaf `leaf` at `t_ns` (no earlier than the
    /// current time; the system first advances to it). Returns its id: 0, 1, 2... in
    /// arrival order.
    ///
    /// # Panics
    ///
    /// If `t_ns` is earlier than the current time, `leaf` is not a leaf or `len` is zero.
    pub fn arrive(&mut self, t_ns: f64, leaf: usize, len: u32) -> usize {
        assert!(
            leaf < self.nodes.len() && self.nodes[leaf].children.is_empty(),
            "no leaf {leaf}"
        );
        assert!(len > 0, "zero-length packet");
        self.advance_to(t_ns);
        let id = self.packets.len();
        self.packets.push(Packet {
            leaf,
            len,
            finish_ns: None,
        });
        self.nodes[leaf].queue.push_back(id);
        id
    }

    /// The service rate of every node now, bytes per ns (0 for an idle one).
    fn rates(&self) -> Vec<f64> {
        let mut rate = vec![0.0; self.nodes.len()];
        let mut stack = vec![(self.top.clone(), self.rate_bytes_per_ns)];
        while let Some((kids, r)) = stack.pop() {
            let busy: Vec<usize> = kids.into_iter().filter(|&k| self.busy(k)).collect();
            let sum: f64 = busy.iter().map(|&k| self.nodes[k].weight).sum();
            for k in busy {
                rate[k] = r * self.nodes[k].weight / sum;
                stack.push((self.nodes[k].children.clone(), rate[k]));
            }
        }
        rate
    }

    /// Moves time forward to `t_ns`, completing every packet whose fluid service ends by
    /// then (at its completion instant).
    ///
    /// # Panics
    ///
    /// If `t_ns` is earlier than the current time.
    pub fn advance_to(&mut self, t_ns: f64) {
        assert!(
            t_ns >= self.now_ns,
            "time goes backwards: {t_ns} < {}",
            self.now_ns
        );
        loop {
            let rate = self.rates();
            let leaves: Vec<usize> = (0..self.nodes.len())
                .filter(|&n| !self.nodes[n].queue.is_empty())
                .collect();
            let next = leaves
                .iter()
                .map(|&n| (self.head_left(n) / rate[n], n))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((dt, first)) = next else {
                self.now_ns = t_ns;
                return;
            };
            // Compared as instants, as `drain` computes them, so that a drain reaches them.
            let at = self.now_ns + dt;
            if at > t_ns {
                let step = t_ns - self.now_ns;
                for &n in &leaves {
                    self.nodes[n].head_served += rate[n] * step;
                }
                self.now_ns = t_ns;
                return;
            }
            for &n in &leaves {
                self.nodes[n].head_served += rate[n] * dt;
            }
            self.now_ns = at;
            // The head that set the step completes exactly; others due within rounding too.
            let len = self.packets[self.nodes[first].queue[0]].len;
            self.nodes[first].head_served = f64::from(len);
            for &n in &leaves {
                let len = f64::from(self.packets[self.nodes[n].queue[0]].len);
                if self.head_left(n) <= 1e-9 * len {
                    self.complete_head(n);
                }
            }
        }
    }

    fn head_left(&self, leaf: usize) -> f64 {
        let node = &self.nodes[leaf];
        f64::from(self.packets[node.queue[0]].len) - node.head_served
    }

    fn complete_head(&mut self, leaf: usize) {
        let id = self.nodes[leaf]
            .queue
            .pop_front()
            .expect("a busy leaf has a head");
        self.nodes[leaf].head_served = 0.0;
        let p = &mut self.packets[id];
        p.finish_ns = Some(self.now_ns);
        let mut at = Some(leaf);
        while let Some(n) = at {
            self.nodes[n].done_bytes += u64::from(p.len);
            at = self.nodes[n].parent;
        }
    }

    /// Runs until every packet in the system has completed; time stops at the last
    /// completion.
    pub fn drain(&mut self) {
        while !self.is_idle() {
            let rate = self.rates();
            let dt = (0..self.nodes.len())
                .filter(|&n| !self.nodes[n].queue.is_empty())
                .map(|n| self.head_left(n) / rate[n])
                .fold(f64::INFINITY, f64::min);
            let at = self.now_ns + dt;
            self.advance_to(at);
        }
    }

    /// Cumulative fluid service of node `n`'s subtree up to now, bytes: completed packets
    /// plus the served parts of the heads below it.
    pub fn service_bytes(&self, n: usize) -> f64 {
        let node = &self.nodes[n];
        let partial = if node.children.is_empty() {
            if node.queue.is_empty() {
                0.0
            } else {
                node.head_served
            }
        } else {
            node.children
                .iter()
                .map(|&c| self.service_bytes(c) - self.nodes[c].done_bytes as f64)
                .sum()
        };
        node.done_bytes as f64 + partial
    }

    /// Completion time of packet `id`, ns, if it has completed by now.
    pub fn finish_ns(&self, id: usize) -> Option<f64> {
        self.packets.get(id).and_then(|p| p.finish_ns)
    }

    /// The leaf packet `id` arrived at.
    pub fn leaf_of(&self, id: usize) -> Option<usize> {
        self.packets.get(id).map(|p| p.leaf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gps::FluidGps;

    #[test]
    fn a_flat_tree_is_gps() {
        // weights 3, 1, 2 under the link, arrivals spread out and overlapping
        let weights = [3, 1, 2];
        let tree: Vec<_> = weights.iter().map(|&w| (None, w)).collect();
        let mut h = HierGps::new(&tree, 8e9);
        let mut g = FluidGps::new(&weights, 8e9);
        let arrivals = [
            (0.0, 0, 300),
            (0.0, 1, 500),
            (50.0, 2, 100),
            (120.0, 0, 1500),
            (700.0, 1, 64),
            (700.0, 2, 900),
            (5000.0, 0, 200),
        ];
        let mut ids = Vec::new();
        for &(t, f, len) in &arrivals {
            ids.push((h.arrive(t, f, len), g.arrive(t, f, len)));
        }
        h.drain();
        g.drain();
        for (a, b) in ids {
            let (x, y) = (h.finish_ns(a).unwrap(), g.finish_ns(b).unwrap());
            assert!((x - y).abs() < 1e-6, "packet {a}: {x} against GPS {y}");
        }
    }

    #[test]
    fn an_idle_class_leaves_its_share_to_its_siblings_subtrees() {
        // class 0 (weight 1): leaves 1 (w 1), 2 (w 3); class 3 (weight 1): leaf 4
        let tree = [
            (None, 1),
            (Some(0), 1),
            (Some(0), 3),
            (None, 1),
            (Some(3), 1),
        ];
        let mut h = HierGps::new(&tree, 8e9);
        h.arrive(0.0, 1, 1000);
        h.arrive(0.0, 2, 1000);
        h.arrive(0.0, 4, 400);
        // until 800: leaf 4 at 0.5 B/ns, leaves 1 and 2 at 0.125 and 0.375
        h.advance_to(400.0);
        assert!((h.service_bytes(4) - 200.0).abs() < 1e-9);
        assert!((h.service_bytes(1) - 50.0).abs() < 1e-9);
        assert!((h.service_bytes(0) - 200.0).abs() < 1e-9);
        h.advance_to(800.0);
        assert!(h.service_bytes(3) > 399.999);
        // then class 0 alone: leaves 1 and 2 at 0.25 and 0.75
        h.advance_to(1000.0);
        assert!((h.service_bytes(2) - (300.0 + 150.0)).abs() < 1e-9);
        h.drain();
        assert_eq!(h.service_bytes(0), 2000.0);
        assert!(h.is_idle());
    }
}
