//! The limit: a scheduling algorithm's enqueue+dequeue rate on one thread, no engine, no
//! clients (the ceiling `pspat bench arch` sets each point against).
//!
//! The loop enqueues [`LIMIT_BATCH`] packets, then dequeues as many, reading each packet
//! as the arbiter reads it to hand it on, and counts the pairs per second of wall-clock
//! time. Without a backlog the packets go round robin over the flows, so the scheduler
//! holds at most 64 of them; with one, each of the first `backlogged` flows keeps
//! `backlog` packets queued throughout (as a greedy client keeps its mailbox's capacity
//! in the engine), which is what a large scheduler state costs.
//!
//! Each flow's packet limit is by default room for what the loop gives it and more
//! (`LIMIT_BATCH * 2 + backlog`); with [`Limit::flow_limit_pkts`] it is the engine's own,
//! so that the scheduler's rings (allocated with the flows, their limit rounded up to a
//! power of two) are as large as in the engine: with tens of thousands of flows the
//! default would take gigabytes. The loop's need bounds it from below: without a backlog a
//! batch goes round robin over the flows and leaves the scheduler empty, so a flow holds at
//! most `ceil(LIMIT_BATCH / flows)`; with one, a flow's backlog plus the slots of the batch
//! naming it stays what it was after the backlog was queued (each dequeued packet's flow
//! gets the next one), so it holds at most `backlog + ceil(LIMIT_BATCH / backlogged)`.

use std::time::{Duration, Instant};

use pspat_io::Pkt;
use pspat_sched::registry::{self, Params, SchedulerVisitor};
use pspat_sched::{ConfigError, FlowError, FlowParams, Scheduler};
use thiserror::Error;

/// Packets enqueued before they are dequeued, in the limit loop.
pub const LIMIT_BATCH: usize = 64;

/// A limit measurement.
#[derive(Clone, Debug)]
pub struct Limit {
    /// Scheduling algorithm: a name or alias of the registry.
    pub alg: String,
    /// Its parameters.
    pub params: Params,
    /// The flows (the engine's: same weights and maximum lengths).
    pub flows: Vec<FlowParams>,
    /// Packet length, bytes.
    pub len: u32,
    /// How long to run the timed loop (it stops at the first check past it).
    pub duration: Duration,
    /// Packets kept queued in each of the first `backlogged` flows (0: none).
    pub backlog: usize,
    /// How many flows keep the backlog (the greedy clients', not the victim's).
    pub backlogged: usize,
    /// Each flow's packet limit, raised to what the loop puts in a flow if that is more
    /// (see the module's documentation); `None`: `LIMIT_BATCH * 2 + backlog`.
    pub flow_limit_pkts: Option<u32>,
}

/// What can go wrong measuring a limit.
#[derive(Debug, Error)]
pub enum LimitError {
    /// The algorithm's name, parameters or capacity were refused.
    #[error(transparent)]
    Scheduler(#[from] ConfigError),
    /// The scheduler refused a flow.
    #[error("the limit loop's flow {index}")]
    Flow {
        /// Index in `Limit::flows`.
        index: usize,
        /// Why.
        #[source]
        source: FlowError,
    },
    /// The backlog asked for does not fit in a scheduler.
    #[error("the limit's backlog ({packets} packets) does not fit in a scheduler")]
    TooLarge {
        /// Packets the scheduler would need to hold.
        packets: usize,
    },
    /// The scheduler refused a packet of the backlog or of the loop (a scheduler bug: every
    /// flow admits what the loop gives it).
    #[error("the limit loop's scheduler refused {what}")]
    Refused {
        /// `its backlog` or `a packet`.
        what: &'static str,
    },
    /// The scheduler gave back fewer packets than it took (a scheduler bug).
    #[error("the limit loop's scheduler gave back fewer packets than it took")]
    Short,
}

impl Limit {
    /// Enqueue+dequeue pairs per second.
    pub fn measure(&self) -> Result<f64, LimitError> {
        let total = LIMIT_BATCH * 2 + self.backlog * self.backlogged;
        let capacity = u32::try_from(total).map_err(|_| LimitError::TooLarge { packets: total })?;
        let per_flow = match self.flow_limit_pkts {
            None => LIMIT_BATCH * 2 + self.backlog,
            Some(limit) => (limit as usize).max(self.most_in_a_flow()),
        };
        let per_flow =
            u32::try_from(per_flow).map_err(|_| LimitError::TooLarge { packets: per_flow })?;
        let flows = self
            .flows
            .iter()
            .map(|f| f.with_limit_pkts(per_flow))
            .collect();
        registry::visit::<Pkt, _>(
            &self.alg,
            &self.params,
            capacity,
            Visit { limit: self, flows },
        )?
    }
}

impl Limit {
    /// The most packets the loop puts in one flow at once (see the module's documentation).
    fn most_in_a_flow(&self) -> usize {
        if self.backlog > 0 {
            self.backlog + LIMIT_BATCH.div_ceil(self.backlogged.max(1))
        } else {
            LIMIT_BATCH.div_ceil(self.flows.len().max(1))
        }
    }
}

/// The timed loop, monomorphised per algorithm by the registry.
struct Visit<'a> {
    limit: &'a Limit,
    /// The flows, each admitting what the loop gives it.
    flows: Vec<FlowParams>,
}

impl SchedulerVisitor<Pkt> for Visit<'_> {
    type Output = Result<f64, LimitError>;

    fn visit<S: Scheduler<Pkt> + Send + 'static>(self, mut sched: S) -> Result<f64, LimitError> {
        let Limit {
            len,
            duration,
            backlog,
            backlogged,
            ..
        } = *self.limit;
        let mut ids = Vec::with_capacity(self.flows.len());
        for (index, p) in self.flows.iter().enumerate() {
            ids.push(
                sched
                    .add_flow(*p)
                    .map_err(|source| LimitError::Flow { index, source })?,
            );
        }
        let n = ids.len();
        let mut pairs = 0u64;
        let mut f = 0usize;
        let mut seq = 0u32;
        let mut sink = 0u64;
        let packet = |f: usize, seq: u32| Pkt {
            len,
            client: f as u32,
            flow: f as u32,
            seq,
            submit_ns: 0,
            depart_ns: 0,
        };
        for _ in 0..backlog {
            for (g, &id) in ids.iter().enumerate().take(backlogged) {
                if sched.enqueue(id, packet(g, seq)).is_err() {
                    return Err(LimitError::Refused {
                        what: "its backlog",
                    });
                }
                seq = seq.wrapping_add(1);
            }
        }
        // With a backlog, each dequeued packet's flow gets the next packet (a closed loop,
        // as a greedy client refills its mailbox as its packets leave), so that every flow
        // keeps its backlog whatever the weights, and the flows without one (the victim's)
        // stay empty; the first batch goes round robin over the backlogged flows. Without
        // a backlog, round robin over all flows.
        let mut next = [0u32; LIMIT_BATCH];
        if backlog > 0 {
            for (i, slot) in next.iter_mut().enumerate() {
                *slot = (i % backlogged.max(1)) as u32;
            }
        }
        let t0 = Instant::now();
        loop {
            for _ in 0..16 {
                for slot in next.iter_mut() {
                    if backlog > 0 {
                        f = *slot as usize;
                    }
                    if sched.enqueue(ids[f], packet(f, seq)).is_err() {
                        return Err(LimitError::Refused { what: "a packet" });
                    }
                    seq = seq.wrapping_add(1);
                    f = if f + 1 == n { 0 } else { f + 1 };
                }
                // Each packet is read, as the arbiter reads it to hand it on; the sink keeps
                // the reads. (`black_box` of the whole `Option` made the compiler copy it
                // through the stack in pieces, and the reloads of those copies stalled on
                // store forwarding: a cost of this loop, not of the scheduler.)
                for slot in next.iter_mut() {
                    let Some((_, p)) = sched.dequeue() else {
                        return Err(LimitError::Short);
                    };
                    sink = sink.wrapping_add(u64::from(p.seq)) ^ u64::from(p.client);
                    *slot = p.flow;
                }
                std::hint::black_box(sink);
                pairs += LIMIT_BATCH as u64;
            }
            let el = t0.elapsed();
            if el >= duration {
                return Ok(pairs as f64 / el.as_secs_f64());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(alg: &str, backlog: usize, backlogged: usize) -> Limit {
        Limit {
            alg: alg.into(),
            params: Params::default(),
            flows: [1, 1, 100]
                .iter()
                .map(|&w| FlowParams::weighted(w).with_max_len(60))
                .collect(),
            len: 60,
            duration: Duration::from_millis(5),
            backlog,
            backlogged,
            flow_limit_pkts: None,
        }
    }

    #[test]
    fn every_registered_algorithm_has_a_limit_with_and_without_a_backlog() {
        for info in registry::algorithms() {
            let flat = limit(info.name, 0, 0).measure().unwrap();
            assert!(flat > 0.0, "{}", info.name);
            let bl = limit(info.name, 510, 2).measure().unwrap();
            assert!(bl > 0.0, "{}", info.name);
        }
    }

    /// With flow limits of 1, raised to what the loop needs, every algorithm takes every
    /// packet the loop gives it (a refusal would fail the measurement): the loop's bound
    /// on a flow's packets holds, with and without a backlog, for few flows and many.
    #[test]
    fn the_loop_fits_in_flows_as_small_as_its_bound() {
        for info in registry::algorithms() {
            for (flows, backlog, backlogged) in [(3, 0, 0), (3, 7, 2), (1000, 0, 0), (1000, 1, 999)]
            {
                let l = Limit {
                    flows: (0..flows)
                        .map(|j| FlowParams::weighted(1 + j % 3).with_max_len(60))
                        .collect(),
                    flow_limit_pkts: Some(1),
                    duration: Duration::from_millis(2),
                    ..limit(info.name, backlog, backlogged)
                };
                let rate = l.measure().unwrap_or_else(|e| {
                    panic!("{} with {flows} flows, backlog {backlog}: {e}", info.name)
                });
                assert!(rate > 0.0, "{}", info.name);
            }
        }
    }

    #[test]
    fn the_bound_on_a_flow_counts_its_share_of_a_batch() {
        let mut l = limit("drr", 0, 0);
        // Three flows, no backlog: a batch of 64 puts 22 in a flow.
        assert_eq!(l.most_in_a_flow(), 22);
        l.backlog = 5;
        l.backlogged = 2;
        assert_eq!(l.most_in_a_flow(), 5 + 32);
    }

    #[test]
    fn bad_algorithms_and_impossible_backlogs_are_named() {
        let e = limit("nosuch", 0, 0).measure().unwrap_err();
        assert!(matches!(e, LimitError::Scheduler(_)), "{e}");
        assert!(e.to_string().contains("'nosuch'"), "{e}");
        let e = limit("drr", usize::MAX / 4, 2).measure().unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }
}
