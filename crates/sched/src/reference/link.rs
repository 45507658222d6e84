//! A deterministic virtual link: drives any scheduler with an arrival sequence on a
//! constant-rate link and records when every packet left.
//!
//! # Model
//!
//! The system of the QFQ+ paper, appendix A.1 (figure A.9 A): arriving packets are enqueued
//! at once; the link is work-conserving and has no output queue, so it asks the scheduler
//! for a packet exactly when it is idle and the scheduler is not empty, and transmits it for
//! `8 len / rate_bps` seconds. Output queues (figure A.9 B) belong to the simulator.
//!
//! # Event order
//!
//! At equal times: first the transmission ending at `t` completes, then every arrival with
//! time `<= t` is enqueued, then the link dequeues. A packet arriving exactly when the link
//! frees up therefore competes in that decision.
//!
//! # Laziness
//!
//! Arrivals are handed to the scheduler only when the link next decides (at the end of the
//! current transmission, or at the arrival itself when the link is idle), not at their own
//! time. This is the same sequence of scheduler calls as enqueuing each packet at its
//! arrival time: no dequeue happens in between, and schedulers never read a clock. The
//! times recorded in the trace are the true arrival times.
//!
//! Times are `f64` nanoseconds; integer arrival times convert exactly below 2^53 ns
//! (104 days).

use crate::flow::FlowId;
use crate::packet::Desc;
use crate::scheduler::Scheduler;

use super::trace::{Arrival, DropRecord, Trace, TxRecord};

/// Transmission time of `len` bytes at `rate_bps`, in nanoseconds.
pub fn tx_time_ns(len: u32, rate_bps: f64) -> f64 {
    f64::from(len) * 8e9 / rate_bps
}

/// Runs `arrivals` through `sched` on a link of `rate_bps` bit/s until every packet is
/// transmitted or dropped.
///
/// Packet `k` of `arrivals` is enqueued as `Desc::new(k as u64, len)` on
/// `flows[arrivals[k].flow]`; refused packets are recorded in [`Trace::drops`] with the
/// scheduler's reason. The scheduler must be empty on entry.
///
/// # Panics
///
/// If `arrivals` is not sorted by time, if an arrival names a flow outside `flows`, if the
/// rate is not positive and finite, or if the scheduler returns a packet this function did
/// not give it, or on a flow other than the one it was enqueued on.
pub fn run_on_link<S: Scheduler<Desc> + ?Sized>(
    sched: &mut S,
    flows: &[FlowId],
    arrivals: &[Arrival],
    rate_bps: f64,
) -> Trace {
    assert!(
        rate_bps.is_finite() && rate_bps > 0.0,
        "link rate must be positive and finite, got {rate_bps}"
    );
    assert!(
        arrivals.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "arrivals must be sorted by time"
    );
    assert!(
        sched.is_empty(),
        "the scheduler must be empty before the run"
    );
    let mut trace = Trace {
        rate_bps,
        tx: Vec::with_capacity(arrivals.len()),
        drops: Vec::new(),
    };
    let mut next = 0; // first arrival not yet handed to the scheduler
    let mut now = 0.0_f64; // the link is idle from `now` on
    loop {
        if sched.is_empty() {
            // Idle link, empty scheduler: nothing happens until the next arrival.
            let Some(a) = arrivals.get(next) else { break };
            now = now.max(a.time_ns as f64);
        }
        // The transmission that ended at `now` is complete; enqueue arrivals up to `now`.
        while let Some(a) = arrivals.get(next) {
            if a.time_ns as f64 > now {
                break;
            }
            assert!(
                a.flow < flows.len(),
                "arrival {next} names flow {} of {}",
                a.flow,
                flows.len()
            );
            if let Err(rej) = sched.enqueue(flows[a.flow], Desc::new(next as u64, a.len)) {
                trace.drops.push(DropRecord {
                    seq: next,
                    flow: a.flow,
                    reason: rej.reason,
                });
            }
            next += 1;
        }
        // Then the link picks the next packet (none if every arrival was refused).
        let Some((fid, pkt)) = sched.dequeue() else {
            continue;
        };
        let seq = usize::try_from(pkt.cookie).expect("cookie is an arrival index");
        assert!(seq < next, "scheduler returned unknown packet {seq}");
        let a = arrivals[seq];
        assert_eq!(
            fid, flows[a.flow],
            "packet {seq} left on another flow than it came in"
        );
        assert_eq!(pkt.len, a.len, "packet {seq} changed length");
        let finish = now + tx_time_ns(a.len, rate_bps);
        trace.tx.push(TxRecord {
            seq,
            flow: a.flow,
            len: a.len,
            arrival_ns: a.time_ns as f64,
            start_ns: now,
            finish_ns: finish,
        });
        now = finish;
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{build, Params};
    use crate::stats::DropReason;
    use crate::FlowParams;

    /// 8 Gbit/s: one byte per nanosecond, so times read as byte counts.
    const R: f64 = 8e9;

    fn arr(time_ns: u64, flow: usize, len: u32) -> Arrival {
        Arrival { time_ns, flow, len }
    }

    fn sched_with(alg: &str, params: &[FlowParams]) -> (Box<dyn Scheduler<Desc>>, Vec<FlowId>) {
        let mut s = build::<Desc>(alg, &Params::new(), 1024).unwrap();
        let ids = params.iter().map(|p| s.add_flow(*p).unwrap()).collect();
        (s, ids)
    }

    #[test]
    fn single_flow_on_an_idle_link_is_never_queued() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        // 1 Gbit/s: 1500 bytes take 12 us; arrivals 20 us apart never wait.
        let a = [arr(0, 0, 1500), arr(20_000, 0, 1500), arr(40_000, 0, 100)];
        let t = run_on_link(&mut s, &ids, &a, 1e9);
        assert_eq!(t.tx.len(), 3);
        assert!(t.drops.is_empty());
        for (r, a) in t.tx.iter().zip(&a) {
            assert_eq!(r.start_ns, a.time_ns as f64, "{r:?}");
            assert_eq!(r.arrival_ns, r.start_ns);
            assert!((r.finish_ns - r.start_ns - f64::from(a.len) * 8.0).abs() < 1e-9);
        }
        assert_eq!(t.tx[2].finish_ns, 40_800.0);
        assert!(s.is_empty());
    }

    #[test]
    fn back_to_back_packets_start_when_the_previous_finishes() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        let a = [
            arr(5, 0, 100),
            arr(5, 0, 300),
            arr(50, 0, 200),
            arr(1000, 0, 10),
        ];
        let t = run_on_link(&mut s, &ids, &a, R);
        let times: Vec<_> =
            t.tx.iter()
                .map(|r| (r.seq, r.start_ns, r.finish_ns))
                .collect();
        // 5..105, 105..405, then the packet that arrived at 50 waits until 405; the link
        // is idle from 605 to 1000.
        assert_eq!(
            times,
            [
                (0, 5.0, 105.0),
                (1, 105.0, 405.0),
                (2, 405.0, 605.0),
                (3, 1000.0, 1010.0)
            ]
        );
    }

    #[test]
    fn arrival_at_the_instant_the_link_frees_competes() {
        // Low-priority flow 0 has two packets; high-priority flow 1's packet arrives exactly
        // when the first one finishes (t = 100), and must go before flow 0's second one.
        let (mut s, ids) = sched_with(
            "prio",
            &[
                FlowParams::default().with_priority(1),
                FlowParams::default().with_priority(0),
            ],
        );
        let a = [arr(0, 0, 100), arr(0, 0, 100), arr(100, 1, 50)];
        let t = run_on_link(&mut s, &ids, &a, R);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(order, [(0, 0.0), (2, 100.0), (1, 150.0)]);
        // One nanosecond later it would have missed the decision.
        let (mut s, ids) = sched_with(
            "prio",
            &[
                FlowParams::default().with_priority(1),
                FlowParams::default().with_priority(0),
            ],
        );
        let a = [arr(0, 0, 100), arr(0, 0, 100), arr(101, 1, 50)];
        let t = run_on_link(&mut s, &ids, &a, R);
        let order: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(order, [(0, 0.0), (1, 100.0), (2, 200.0)]);
    }

    #[test]
    fn refusals_are_recorded_with_their_reason() {
        let (mut s, ids) = sched_with(
            "fifo",
            &[
                FlowParams::default().with_limit_pkts(1),
                FlowParams::default().with_max_len(100),
            ],
        );
        // At t = 0 the three packets of flow 0 are all enqueued before the link picks one,
        // so the second and third find the queue full. Flow 1's 101-byte packet is too
        // long; its next one is fine.
        let a = [
            arr(0, 0, 10),
            arr(0, 0, 10),
            arr(0, 0, 10),
            arr(3, 1, 101),
            arr(20, 1, 100),
            arr(500, 0, 10),
        ];
        let t = run_on_link(&mut s, &ids, &a, R);
        assert_eq!(
            t.drops,
            [
                DropRecord {
                    seq: 1,
                    flow: 0,
                    reason: DropReason::FlowPacketLimit
                },
                DropRecord {
                    seq: 2,
                    flow: 0,
                    reason: DropReason::FlowPacketLimit
                },
                DropRecord {
                    seq: 3,
                    flow: 1,
                    reason: DropReason::PacketTooLong
                },
            ]
        );
        let sent: Vec<_> = t.tx.iter().map(|r| (r.seq, r.start_ns)).collect();
        assert_eq!(sent, [(0, 0.0), (4, 20.0), (5, 500.0)]);
        assert_eq!(s.stats().drops.total(), 3);
    }

    #[test]
    fn all_refused_then_more_arrivals() {
        // Every packet of the first instant is refused: the link stays idle and the run
        // goes on with later arrivals.
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default().with_max_len(10)]);
        let a = [arr(0, 0, 11), arr(0, 0, 0), arr(7, 0, 10)];
        let t = run_on_link(&mut s, &ids, &a, R);
        assert_eq!(t.drops.len(), 2);
        assert_eq!(t.drops[1].reason, DropReason::EmptyPacket);
        assert_eq!(t.tx.len(), 1);
        assert_eq!((t.tx[0].start_ns, t.tx[0].finish_ns), (7.0, 17.0));
    }

    #[test]
    fn empty_run_is_an_empty_trace() {
        let (mut s, ids) = sched_with("wf2q+", &[FlowParams::default()]);
        let t = run_on_link(&mut s, &ids, &[], 1e9);
        assert!(t.tx.is_empty() && t.drops.is_empty());
        assert_eq!(t.rate_bps, 1e9);
    }

    #[test]
    #[should_panic(expected = "sorted")]
    fn unsorted_arrivals_are_refused() {
        let (mut s, ids) = sched_with("fifo", &[FlowParams::default()]);
        run_on_link(&mut s, &ids, &[arr(10, 0, 1), arr(9, 0, 1)], R);
    }
}
