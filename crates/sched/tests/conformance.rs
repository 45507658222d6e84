//! Conformance of every registered algorithm.
//!
//! Random sequences of flow and packet operations run on each scheduler of the registry and
//! on the queue model ([`QueueModel`]) side by side. After every step the scheduler must
//! agree with the model on: which packets it accepts and why it refuses the others, that a
//! dequeued packet is the head of its flow (nothing invented, lost, duplicated or
//! reordered within a flow), that it dequeues whenever something is queued (work
//! conservation), what `peek_len` announces, and every counter. Then each service class
//! gets the order check it promises: FIFO serves the oldest packet, strict priority the
//! lowest band, weighted-fair algorithms shares proportional to weights.

use proptest::prelude::*;
use pspat_sched::reference::model::QueueModel;
use pspat_sched::{
    registry, Desc, DropReason, FlowId, FlowParams, Params, Scheduler, ServiceClass,
};

#[derive(Debug, Clone)]
enum Op {
    Add {
        weight: u32,
        max_len: u32,
        limit_pkts: u32,
        limit_bytes: Option<u64>,
        prio: u8,
    },
    Enqueue {
        flow: usize,
        len: u32,
        burst: u8,
    },
    Dequeue {
        n: u8,
    },
    Peek,
    Update {
        flow: usize,
        weight: u32,
        limit_pkts: u32,
        prio: u8,
    },
    Remove {
        flow: usize,
    },
    Stale {
        len: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1u32..20, 40u32..1600, 1u32..12, prop::option::of(1600u64..6000), 0u8..4).prop_map(
            |(weight, max_len, limit_pkts, limit_bytes, prio)| Op::Add {
                weight, max_len, limit_pkts, limit_bytes, prio
            }
        ),
        10 => (any::<usize>(), 0u32..1700, 1u8..6).prop_map(|(flow, len, burst)| Op::Enqueue { flow, len, burst }),
        8 => (1u8..8).prop_map(|n| Op::Dequeue { n }),
        2 => Just(Op::Peek),
        1 => (any::<usize>(), 1u32..20, 1u32..12, 0u8..4)
            .prop_map(|(flow, weight, limit_pkts, prio)| Op::Update { flow, weight, limit_pkts, prio }),
        1 => any::<usize>().prop_map(|flow| Op::Remove { flow }),
        1 => (1u32..100).prop_map(|len| Op::Stale { len }),
    ]
}

struct Run {
    alg: &'static str,
    class: ServiceClass,
    sched: Box<dyn Scheduler<Desc>>,
    model: QueueModel<Desc>,
    live: Vec<FlowId>,
    dead: Vec<FlowId>,
    cookie: u64,
}

impl Run {
    fn new(alg: &'static str, class: ServiceClass, capacity: u32) -> Self {
        Self {
            alg,
            class,
            sched: registry::build(alg, &Params::new(), capacity).unwrap(),
            model: QueueModel::new(capacity),
            live: Vec::new(),
            dead: Vec::new(),
            cookie: 0,
        }
    }

    fn pick(&self, i: usize) -> Option<FlowId> {
        (!self.live.is_empty()).then(|| self.live[i % self.live.len()])
    }

    fn enqueue(&mut self, id: FlowId, len: u32) {
        self.cookie += 1;
        let pkt = Desc::new(self.cookie, len);
        let got = self.sched.enqueue(id, pkt).map_err(|r| {
            assert_eq!(r.pkt, pkt, "{}: refused packet not handed back", self.alg);
            r.reason
        });
        let want = self.model.enqueue(id, pkt);
        assert_eq!(got, want, "{}: admission of {pkt:?} on {id:?}", self.alg);
    }

    fn dequeue(&mut self) {
        let announced = self.sched.peek_len();
        let got = self.sched.dequeue();
        let backlogged = self.model.backlog().pkts > 0;
        assert_eq!(got.is_some(), backlogged, "{}: work conservation", self.alg);
        let Some((id, pkt)) = got else {
            assert_eq!(announced, None, "{}: peek on empty", self.alg);
            return;
        };
        assert_eq!(
            announced,
            Some(pkt.len),
            "{}: peek_len announced another packet",
            self.alg
        );
        match self.class {
            ServiceClass::Fifo => {
                assert_eq!(
                    Some(id),
                    self.model.oldest_flow(),
                    "{}: not the oldest packet",
                    self.alg
                )
            }
            ServiceClass::StrictPriority => assert_eq!(
                Some(id),
                self.model.oldest_of_top_band(),
                "{}: not the oldest packet of the best band",
                self.alg
            ),
            ServiceClass::WeightedFair => {}
        }
        self.model.dequeue_from(id, &pkt);
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Add {
                weight,
                max_len,
                limit_pkts,
                limit_bytes,
                prio,
            } => {
                let params = FlowParams {
                    weight,
                    max_len,
                    limit_pkts,
                    limit_bytes: limit_bytes.unwrap_or(u64::MAX).max(u64::from(max_len)),
                    priority: prio,
                };
                let id = self.sched.add_flow(params).unwrap();
                assert!(
                    !self.live.contains(&id) && !self.dead.contains(&id),
                    "{}: id reused",
                    self.alg
                );
                self.model.add_flow(id, params);
                self.live.push(id);
            }
            Op::Enqueue { flow, len, burst } => {
                if let Some(id) = self.pick(flow) {
                    for _ in 0..burst {
                        self.enqueue(id, len);
                    }
                }
            }
            Op::Dequeue { n } => {
                for _ in 0..n {
                    self.dequeue();
                }
            }
            Op::Peek => {
                let a = self.sched.peek_len();
                let b = self.sched.peek_len();
                assert_eq!(a, b, "{}: peek changed its answer", self.alg);
                assert_eq!(
                    a.is_some(),
                    self.model.backlog().pkts > 0,
                    "{}: peek vs backlog",
                    self.alg
                );
            }
            Op::Update {
                flow,
                weight,
                limit_pkts,
                prio,
            } => {
                if let Some(id) = self.pick(flow) {
                    let params = FlowParams {
                        weight,
                        limit_pkts,
                        priority: prio,
                        ..self.model.params(id).unwrap()
                    };
                    self.sched.update_flow(id, params).unwrap();
                    self.model.update_flow(id, params);
                }
            }
            Op::Remove { flow } => {
                if let Some(id) = self.pick(flow) {
                    let got = self.sched.remove_flow(id).unwrap();
                    let want = self.model.remove_flow(id);
                    assert_eq!(got, want, "{}: packets handed back on removal", self.alg);
                    self.live.retain(|&f| f != id);
                    self.dead.push(id);
                    assert!(self.sched.flow_stats(id).is_none());
                    assert!(
                        self.sched.remove_flow(id).is_err(),
                        "{}: removed twice",
                        self.alg
                    );
                }
            }
            Op::Stale { len } => {
                if let Some(&id) = self.dead.last() {
                    self.enqueue(id, len);
                }
            }
        }
        self.check_counters();
    }

    fn check_counters(&self) {
        assert_eq!(
            self.sched.backlog(),
            self.model.backlog(),
            "{}: backlog",
            self.alg
        );
        let stats = self.sched.stats();
        let (sent_pkts, sent_bytes, drops) = self.model.totals();
        assert_eq!(
            (stats.sent_pkts, stats.sent_bytes, stats.drops),
            (sent_pkts, sent_bytes, drops),
            "{}: totals",
            self.alg
        );
        assert_eq!(stats.flows as usize, self.live.len());
        let mut ids = self.sched.flows();
        let mut want = self.live.clone();
        ids.sort();
        want.sort();
        assert_eq!(ids, want, "{}: flow list", self.alg);
        for &id in &self.live {
            assert_eq!(
                self.sched.flow_stats(id),
                self.model.flow_stats(id),
                "{}: stats of {id:?}",
                self.alg
            );
        }
    }

    fn drain(&mut self) {
        while self.model.backlog().pkts > 0 {
            self.dequeue();
        }
        assert!(
            self.sched.dequeue().is_none(),
            "{}: packets left over",
            self.alg
        );
        self.check_counters();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every algorithm agrees with the queue model on any sequence of operations.
    #[test]
    fn every_algorithm_conforms(ops in prop::collection::vec(op(), 1..160), capacity in 4u32..48) {
        for info in registry::algorithms() {
            let mut run = Run::new(info.name, info.class, capacity);
            // start with two flows so that most sequences exercise scheduling
            for w in [1, 3] {
                run.step(&Op::Add { weight: w, max_len: 1500, limit_pkts: 8, limit_bytes: None, prio: 1 });
            }
            for op in &ops {
                run.step(op);
            }
            run.drain();
        }
    }
}

/// Every drop reason the framework knows can happen, and is counted for every algorithm.
#[test]
fn every_drop_reason_is_reachable_and_counted() {
    for info in registry::algorithms() {
        let mut s = registry::build::<Desc>(info.name, &Params::new(), 4).unwrap();
        let f = s
            .add_flow(
                FlowParams::default()
                    .with_max_len(1000)
                    .with_limit_pkts(3)
                    .with_limit_bytes(2500),
            )
            .unwrap();
        let g = s.add_flow(FlowParams::default()).unwrap();
        let reason = |r: Result<(), pspat_sched::Rejected<Desc>>| r.unwrap_err().reason;
        assert_eq!(
            reason(s.enqueue(f, Desc::new(0, 0))),
            DropReason::EmptyPacket
        );
        assert_eq!(
            reason(s.enqueue(f, Desc::new(0, 1001))),
            DropReason::PacketTooLong
        );
        s.enqueue(f, Desc::new(1, 1000)).unwrap();
        s.enqueue(f, Desc::new(2, 1000)).unwrap();
        assert_eq!(
            reason(s.enqueue(f, Desc::new(3, 1000))),
            DropReason::FlowByteLimit
        );
        s.enqueue(f, Desc::new(4, 100)).unwrap();
        assert_eq!(
            reason(s.enqueue(f, Desc::new(5, 100))),
            DropReason::FlowPacketLimit
        );
        s.enqueue(g, Desc::new(6, 100)).unwrap();
        assert_eq!(
            reason(s.enqueue(g, Desc::new(7, 100))),
            DropReason::SchedulerFull
        );
        let purged = s.remove_flow(f).unwrap();
        assert_eq!(purged.len(), 3);
        assert_eq!(
            reason(s.enqueue(f, Desc::new(8, 100))),
            DropReason::UnknownFlow
        );
        let stats = s.stats();
        for r in DropReason::ALL {
            let want = if r == DropReason::FlowRemoved { 3 } else { 1 };
            assert_eq!(stats.drops.get(r), want, "{}: {r}", info.name);
        }
        assert_eq!(s.dequeue().map(|(_, d)| d.cookie), Some(6), "{}", info.name);
        assert!(s.dequeue().is_none());
    }
}

/// Invalid flow parameters are refused with an error naming the value, by every algorithm.
#[test]
fn invalid_flow_parameters_are_refused() {
    for info in registry::algorithms() {
        let mut s = registry::build::<Desc>(info.name, &Params::new(), 4).unwrap();
        for (params, needle) in [
            (FlowParams::weighted(0), "weight 0"),
            (
                FlowParams::weighted(pspat_sched::MAX_WEIGHT + 1),
                "weight 65537",
            ),
            (
                FlowParams::default().with_max_len(pspat_sched::MAX_PACKET_LEN + 1),
                "max_len 1048577",
            ),
            (FlowParams::default().with_limit_pkts(0), "limit_pkts 0"),
        ] {
            let e = s.add_flow(params).unwrap_err().to_string();
            assert!(e.contains(needle), "{}: {e}", info.name);
        }
        let f = s.add_flow(FlowParams::default()).unwrap();
        let e = s
            .update_flow(f, FlowParams::weighted(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("weight 0"), "{}: {e}", info.name);
        assert_eq!(
            s.flow_params(f),
            Some(FlowParams::default()),
            "{}: refused update applied",
            info.name
        );
    }
}
