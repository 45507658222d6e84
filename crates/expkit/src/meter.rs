//! What each class of a kit tree got, from the sink's report: its throughput over the
//! counting window, over each whole second of it, and its largest burst above its ceil.
//!
//! A datagram counts for its sender's leaf (the generator's report gives each client's
//! source port, the tree the port's leaf) and for every class above it, so an inner class
//! is the sum of its subtree. Throughput over the window comes from the per-client counts;
//! the one-second windows and the bursts need the sink's trace (`--trace`).
//!
//! **Bursts.** pspat's guarantee for a class of ceil `C` and burst `cburst` is that over
//! any interval `[t1, t2]`, `bytes <= C (t2 - t1) + cburst + L` (L: its largest packet).
//! The smallest `b` with `bytes <= C (t2 - t1) + b` for every interval of the trace is the
//! backlog of a virtual queue served at `C` and fed by the class's arrivals (Lindley's
//! recursion: `q = max(0, q - C dt) + len`), at its largest; [`ClassMeasure::burst_bytes`]
//! is that, to compare with `cburst + L`. The arrival times are the kernel's receive
//! stamps at the sink's host (on the kit's veth pair, when the shaper's side handed each
//! frame over), so the sink's own wake-ups do not bunch datagrams up; what remains of the
//! path is the shaper's transmit (pspat's sendmmsg, HTB's dequeue in softirq) up to the
//! veth pair.

use crate::error::MeterError;
use crate::gen_report::GenReport;
use crate::sink_report::SinkReport;
use crate::tree::KitTree;

/// What one class got.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassMeasure {
    /// Throughput over the counting window, bit/s.
    pub bps: f64,
    /// Throughput over each whole second of the window, in order, bit/s (empty without a
    /// trace).
    pub windows_bps: Vec<f64>,
    /// Largest burst above its ceil in the trace, bytes (see the module documentation;
    /// NaN without a trace).
    pub burst_bytes: f64,
    /// Its largest packet in the trace, bytes.
    pub max_len: u32,
}

/// The measures of every class of `tree` (in its order) in one run: `gen`'s senders to
/// `sink`.
pub fn measure(
    tree: &KitTree,
    gen: &GenReport,
    sink: &SinkReport,
) -> Result<Vec<ClassMeasure>, MeterError> {
    let n = tree.classes.len();
    // leaf of each client, by its source port
    let mut leaf_of: Vec<Option<usize>> = Vec::new();
    for f in &gen.flows {
        let leaf = tree
            .ports
            .iter()
            .find(|(p, _)| *p == f.src_port)
            .map(|&(_, l)| l)
            .ok_or(MeterError::PortNotInTree(f.src_port))?;
        let i = f.client as usize;
        if leaf_of.len() <= i {
            leaf_of.resize(i + 1, None);
        }
        leaf_of[i] = Some(leaf);
    }
    let leaf = |client: u32| {
        leaf_of
            .get(client as usize)
            .copied()
            .flatten()
            .ok_or(MeterError::UnknownClient(client))
    };
    let mut bytes = vec![0.0; n];
    for c in &sink.clients {
        for k in tree.path(leaf(c.client)?) {
            bytes[k] += c.wire_bytes as f64;
        }
    }
    // the windows and the bursts need the trace
    let traced = !sink.trace.is_empty();
    let whole = if traced {
        sink.window_s.floor() as usize
    } else {
        0
    };
    let mut windows = vec![vec![0.0; whole]; n];
    // Lindley's recursion per class: (time of the last arrival, backlog, largest backlog)
    let mut queue = vec![(0u64, 0.0f64, 0.0f64); n];
    let mut max_len = vec![0u32; n];
    for a in &sink.trace {
        let w = (a.t_ns / 1_000_000_000) as usize;
        for k in tree.path(leaf(a.client)?) {
            if w < whole {
                windows[k][w] += f64::from(a.len);
            }
            let ceil_bytes_per_ns = tree.classes[k].ceil_bps as f64 / 8e9;
            let (last, q, top) = &mut queue[k];
            let drained = a.t_ns.saturating_sub(*last) as f64 * ceil_bytes_per_ns;
            *q = (*q - drained).max(0.0) + f64::from(a.len);
            *top = top.max(*q);
            *last = a.t_ns;
            max_len[k] = max_len[k].max(a.len);
        }
    }
    let rate = |b: f64, s: f64| if s > 0.0 { b * 8.0 / s } else { 0.0 };
    Ok((0..n)
        .map(|k| ClassMeasure {
            bps: rate(bytes[k], sink.window_s),
            windows_bps: windows[k].iter().map(|&b| b * 8.0).collect(),
            burst_bytes: if traced { queue[k].2 } else { f64::NAN },
            max_len: max_len[k],
        })
        .collect())
}

/// What each of `gen`'s greedy senders offered, bit/s, in the order of `tree.ports`: its
/// packets per second over its run, times its length.
pub fn offered_bps(tree: &KitTree, gen: &GenReport) -> Result<Vec<f64>, MeterError> {
    tree.ports
        .iter()
        .map(|&(port, _)| {
            gen.flows
                .iter()
                .filter(|f| f.src_port == port)
                .map(|f| f.pps * f64::from(f.len) * 8.0)
                .reduce(|a, b| a + b)
                .ok_or(MeterError::NoSender(port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::fixtures::two_level;
    use crate::sink_report::Arrival;

    #[test]
    fn classes_sum_their_leaves_per_second_and_bursts_follow_the_ceil() {
        let t = two_level();
        // clients 0..5 from ports 10000..10004
        let mut gen = fixtures::gen(5, false, 1000, 100, 2.0);
        for (i, f) in gen.flows.iter_mut().enumerate() {
            f.src_port = 10000 + i as u16;
        }
        // client 2 (sched 21, ceil 13 Mbit/s = 1625 bytes/ms): 1000-byte datagrams, two
        // every ms for the first second, then one every ms; client 0 (sched 11) one.
        let mut trace = Vec::new();
        for ms in 0..2000u64 {
            let k = if ms < 1000 { 2 } else { 1 };
            for _ in 0..k {
                trace.push(Arrival {
                    t_ns: ms * 1_000_000,
                    client: 2,
                    len: 1000,
                });
            }
        }
        trace.push(Arrival {
            t_ns: 1_500_000_000,
            client: 0,
            len: 1000,
        });
        let mut sink = fixtures::sink(&[(0, 1), (2, 3000)]);
        for c in &mut sink.clients {
            c.wire_bytes = c.packets * 1000;
        }
        sink.window_s = 2.5;
        sink.trace = trace;
        let m = measure(&t, &gen, &sink).unwrap();
        // sched 21 (index 4): 3 MB in 2.5 s; 16 then 8 Mbit/s in the two whole seconds.
        assert!((m[4].bps - 9.6e6).abs() < 1e-3, "{:?}", m[4]);
        assert_eq!(m[4].windows_bps, [16e6, 8e6]);
        // B (index 1) is its sum; A (0) has sched 11's datagram in its second window.
        assert_eq!(m[1].windows_bps, m[4].windows_bps);
        assert_eq!(m[0].windows_bps, [0.0, 8000.0]);
        // At 2000 bytes a ms against 1625 drained, the backlog grows 375 a ms for a
        // second: 375 x 999 + 2000 at its largest. B's ceil is the link's (6250 a ms):
        // never more than the 2000 of one ms.
        assert!((m[4].burst_bytes - (375.0 * 999.0 + 2000.0)).abs() < 1e-6);
        assert!((m[1].burst_bytes - 2000.0).abs() < 1e-6);
        assert_eq!((m[4].max_len, m[2].max_len, m[3].max_len), (1000, 1000, 0));
        // Offered: 100 packets of 1000 bytes in 2 s each.
        assert_eq!(offered_bps(&t, &gen).unwrap(), [400e3; 5]);
        // Without a trace: the throughput only.
        let mut untraced = sink.clone();
        untraced.trace.clear();
        let u = measure(&t, &gen, &untraced).unwrap();
        assert_eq!(u[4].bps, m[4].bps);
        assert!(u[4].windows_bps.is_empty() && u[4].burst_bytes.is_nan());
        // A client the generator did not report is an error, not a guess.
        sink.trace[0].client = 7;
        let e = measure(&t, &gen, &sink).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the sink counted client 7, which no sender was"
        );
    }
}
