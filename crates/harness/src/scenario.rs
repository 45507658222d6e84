//! What to run: the options of a benchmark as given ([`BenchSpec`], dummynet's command
//! line) and as resolved against the registry ([`Scenario`]: flows, thresholds in packets,
//! capacity, per-flow parameters).

use pspat_sched::registry::{self, AlgorithmInfo, Params, ServiceClass};
use pspat_sched::{ConfigError, FlowParams, MAX_PACKET_LEN};

use crate::error::{Error, SetupError};
use crate::flowset::{Flowsets, DEFAULT_LEN};
use crate::number::Num;
use crate::pattern::{max_burst, Kind, LEVELS};
use crate::target::NONE;
use crate::tree::TreeShape;

/// Default number of loop iterations (dummynet's is 1: it is always given).
pub const DEFAULT_LOOPS: u64 = 10_000_000;

/// Default low threshold: 1 packet per flow (dummynet's `th_min = -1`).
pub const DEFAULT_QMIN: Num = Num::PerFlow(1);

/// Default high threshold: 20 packets per flow (dummynet's `th_max = -20`).
pub const DEFAULT_QMAX: Num = Num::PerFlow(20);

/// Bands given to strict-priority algorithms unless the user sets `bands`: dummynet's
/// `prio` has 64 levels and uses the flowset weight as the priority.
pub const PRIO_BANDS: u32 = 64;

/// Largest scheduler capacity, in packets.
pub const MAX_CAPACITY: u64 = (1 << 31) - 1;

/// A benchmark as specified on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchSpec {
    /// Algorithm name or alias, or `none`.
    pub alg: String,
    /// Loop iterations; each one enqueues or dequeues one packet.
    pub loops: u64,
    /// Low threshold of the hysteresis.
    pub qmin: Num,
    /// High threshold of the hysteresis.
    pub qmax: Num,
    /// `weight:len:flows,...`, or `None` for `flows` flows of weight 1.
    pub flowsets: Option<String>,
    /// Number of flows when there are no flowsets.
    pub flows: u64,
    /// Packet length of flowsets that leave `len` empty.
    pub len: u32,
    /// Arrival pattern.
    pub pattern: Kind,
    /// Seed of the bursty pattern's generator.
    pub seed: u64,
    /// Algorithm parameters.
    pub params: Params,
    /// Scheduler capacity in packets; default `qmax` plus the largest burst.
    pub capacity: Option<u64>,
    /// Classes above the flows (`-tree`, see [`crate::tree`]); the algorithm runs in the
    /// leaves.
    pub tree: Option<String>,
}

impl Default for BenchSpec {
    fn default() -> Self {
        Self {
            alg: NONE.to_owned(),
            loops: DEFAULT_LOOPS,
            qmin: DEFAULT_QMIN,
            qmax: DEFAULT_QMAX,
            flowsets: None,
            flows: 1,
            len: DEFAULT_LEN,
            pattern: Kind::Smooth,
            seed: 1,
            params: Params::new(),
            capacity: None,
            tree: None,
        }
    }
}

/// A benchmark resolved and validated, ready to build.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The specification it came from.
    pub spec: BenchSpec,
    /// The algorithm, or `None` for the `none` baseline.
    pub info: Option<&'static AlgorithmInfo>,
    /// The expanded flowsets.
    pub flowsets: Flowsets,
    /// Low threshold, in packets.
    pub qmin: u64,
    /// High threshold, in packets (above `qmin`).
    pub qmax: u64,
    /// Packets the scheduler (and the buffer pool) holds at most.
    pub capacity: u32,
    /// Parameters passed to the algorithm (the user's, plus `bands` for priority ones).
    pub params: Params,
    /// Parameters of each flow, by flow index.
    pub flow_params: Vec<FlowParams>,
    /// The classes above the flows, if any.
    pub tree: Option<TreeShape>,
}

fn bad(option: &'static str, value: impl ToString, reason: impl Into<String>) -> Error {
    SetupError::Option {
        option,
        value: value.to_string(),
        reason: reason.into(),
    }
    .into()
}

impl Scenario {
    /// Resolves `spec`: looks the algorithm up, expands the flowsets, turns per-flow
    /// thresholds into packets, maps weights to priorities for strict-priority algorithms.
    pub fn resolve(spec: &BenchSpec) -> Result<Self, Error> {
        let info = if spec.alg.eq_ignore_ascii_case(NONE) {
            None
        } else {
            Some(registry::lookup(&spec.alg).map_err(|e| match e {
                ConfigError::UnknownAlgorithm { name, known } => {
                    SetupError::UnknownAlgorithm { name, known }
                }
                other => SetupError::Config(other),
            })?)
        };
        if spec.len == 0 || spec.len > MAX_PACKET_LEN {
            return Err(bad(
                "-len",
                spec.len,
                format!("must be 1..={MAX_PACKET_LEN}"),
            ));
        }
        let flowsets = match &spec.flowsets {
            Some(fs) => Flowsets::parse(fs, spec.len)?,
            None if spec.flows == 0 => return Err(bad("-flows", 0, "must be at least 1")),
            None => Flowsets::uniform(spec.flows, spec.len)?,
        };
        let flows = u64::from(flowsets.flows);
        let qmin = spec.qmin.resolve(flows);
        let qmax = spec.qmax.resolve(flows).max(qmin.saturating_add(1));
        let max_burst = match spec.pattern {
            Kind::Smooth => 1,
            Kind::Bursty => max_burst(flowsets.sets.iter().map(|s| s.weight).max().unwrap_or(1)),
        };
        let capacity = match spec.capacity {
            Some(c) if c == 0 || c > MAX_CAPACITY => {
                return Err(SetupError::Capacity {
                    capacity: c,
                    why: "as given",
                    max: MAX_CAPACITY,
                }
                .into())
            }
            Some(c) => c,
            None => {
                let c = qmax.saturating_add(max_burst);
                if c > MAX_CAPACITY {
                    return Err(SetupError::Capacity {
                        capacity: c,
                        why: "qmax plus the largest burst",
                        max: MAX_CAPACITY,
                    }
                    .into());
                }
                c
            }
        } as u32;

        let mut params = spec.params.clone();
        let mut bands = None;
        if let Some(info) = info.filter(|i| i.class == ServiceClass::StrictPriority) {
            let has_bands = info.params.iter().any(|p| p.name == "bands");
            let given: Option<u32> = if has_bands {
                params.get(info, "bands").map_err(SetupError::Config)?
            } else {
                None
            };
            if has_bands && given.is_none() {
                params = params.set("bands", PRIO_BANDS);
            }
            bands = Some((info.name, given.unwrap_or(PRIO_BANDS).min(PRIO_BANDS)));
        }

        // Per-flow limit: the smooth pattern gives a packet only to a least-backlogged flow,
        // so a flow reaching b + 1 packets had every flow at b or more: with at most qmax
        // pending, no flow exceeds (qmax - 1) / n + 1. The pattern's levels stop at TOP,
        // where flows take turns whatever their backlog; a flow there gets a packet only
        // when every flow has TOP or more, so none exceeds qmax - TOP (n - 1). Bursty adds
        // one burst on top. The scheduler allocates each flow's queue for its limit, so it
        // must not be the whole capacity; a wrong bound would show as counted drops, which
        // fail the run.
        let top = u64::from(LEVELS - 1);
        let smooth = qmax.saturating_sub(1) / flows + 1;
        let bound = if smooth >= top {
            qmax.saturating_sub(top * (flows - 1)).max(smooth)
        } else {
            smooth
        };
        let per_flow = (bound + max_burst).min(u64::from(capacity)) as u32;
        let mut flow_params = Vec::with_capacity(flowsets.flows as usize);
        for set in &flowsets.sets {
            let priority = match bands {
                Some((alg, bands)) if set.weight > bands => {
                    return Err(SetupError::Priority {
                        weight: set.weight,
                        bands,
                        alg,
                        flowset: set.spec.clone(),
                    }
                    .into())
                }
                Some(_) => (set.weight - 1) as u8,
                None => 0,
            };
            let p = FlowParams {
                weight: set.weight,
                max_len: set.len,
                limit_pkts: per_flow,
                limit_bytes: u64::MAX,
                priority,
            };
            flow_params.extend(std::iter::repeat(p).take(set.flows as usize));
        }
        let tree = match &spec.tree {
            None => None,
            Some(_) if info.is_none() => {
                return Err(bad(
                    "-tree",
                    spec.tree.as_deref().unwrap_or_default(),
                    "the leaves need an algorithm (-alg)",
                ))
            }
            Some(t) => Some(TreeShape::parse(t)?),
        };
        Ok(Self {
            spec: spec.clone(),
            info,
            flowsets,
            qmin,
            qmax,
            capacity,
            params,
            flow_params,
            tree,
        })
    }

    /// Canonical name of the algorithm (`none` for the baseline).
    pub fn alg_name(&self) -> &'static str {
        self.info.map_or(NONE, |i| i.name)
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.flowsets.flows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(alg: &str, flowsets: &str) -> BenchSpec {
        BenchSpec {
            alg: alg.into(),
            flowsets: Some(flowsets.into()),
            ..BenchSpec::default()
        }
    }

    #[test]
    fn per_flow_thresholds_and_capacity() {
        let mut s = spec("wf2qp", "1::512,8::64");
        s.qmin = Num::PerFlow(4);
        s.qmax = Num::PerFlow(30);
        let sc = Scenario::resolve(&s).unwrap();
        assert_eq!(sc.alg_name(), "wf2q+");
        assert_eq!((sc.flows(), sc.qmin, sc.qmax), (576, 4 * 576, 30 * 576));
        assert_eq!(sc.capacity, 30 * 576 + 1);
        assert_eq!(sc.flow_params.len(), 576);
        assert_eq!(sc.flow_params[511].weight, 1);
        assert_eq!(sc.flow_params[512].weight, 8);
        assert_eq!(sc.flow_params[0].max_len, 1000);
        // (30 * 576 - 1) / 576 + 1 packets, plus one: the smooth pattern's bound
        assert_eq!(sc.flow_params[0].limit_pkts, 31);
        assert_eq!(sc.params, Params::new());
        // bursty: room for the largest burst, 16 * 8
        let mut b = s.clone();
        b.pattern = Kind::Bursty;
        assert_eq!(Scenario::resolve(&b).unwrap().capacity, 30 * 576 + 128);
        // beyond the pattern's top level: qmax - 63 (n - 1), plus one
        s.flowsets = Some("1::4".into());
        s.qmax = Num::Abs(1000);
        let sc = Scenario::resolve(&s).unwrap();
        assert_eq!(sc.flow_params[0].limit_pkts, 1000 - 63 * 3 + 1);
    }

    #[test]
    fn defaults_match_dummynet() {
        let sc = Scenario::resolve(&BenchSpec::default()).unwrap();
        assert_eq!(sc.alg_name(), "none");
        assert_eq!(sc.flowsets.label, "1::1");
        assert_eq!((sc.qmin, sc.qmax), (1, 20));
        let sc = Scenario::resolve(&BenchSpec {
            flows: 8,
            qmin: Num::Abs(5),
            qmax: Num::Abs(5),
            ..BenchSpec::default()
        })
        .unwrap();
        assert_eq!((sc.flows(), sc.qmin, sc.qmax), (8, 5, 6));
        assert_eq!(sc.flowsets.label, "1::8");
    }

    #[test]
    fn prio_uses_the_weight_as_priority() {
        let sc = Scenario::resolve(&spec("prio", "1::2,64::1")).unwrap();
        let prios: Vec<u8> = sc.flow_params.iter().map(|p| p.priority).collect();
        assert_eq!(prios, [0, 0, 63]);
        assert_eq!(sc.params, Params::new().set("bands", 64));
        let e = Scenario::resolve(&spec("prio", "1::2,65:1500:4"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid weight '65' in flowset '65:1500:4'"),
            "{e}"
        );
        // with the user's bands
        let mut s = spec("prio", "1::2,9::1");
        s.params = "bands=8".parse().unwrap();
        let e = Scenario::resolve(&s).unwrap_err().to_string();
        assert!(
            e.contains("'9'") && e.contains("'9::1'") && e.contains("1..=8"),
            "{e}"
        );
        s.flowsets = Some("8::1".into());
        let sc = Scenario::resolve(&s).unwrap();
        assert_eq!(
            (sc.flow_params[0].priority, sc.params),
            (7, s.params.clone())
        );
        // weighted algorithms leave priorities alone
        let sc = Scenario::resolve(&spec("drr", "9::1")).unwrap();
        assert_eq!(sc.flow_params[0].priority, 0);
    }

    #[test]
    fn errors_name_their_token() {
        let e = Scenario::resolve(&spec("nosuch", "1::1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'nosuch'") && e.contains("none, fifo"), "{e}");
        let e = Scenario::resolve(&spec("fifo", "0:1500:4")).unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().contains("'0:1500:4'"), "{e}");
        let e = Scenario::resolve(&BenchSpec {
            len: 0,
            ..BenchSpec::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("-len '0'"), "{e}");
        let e = Scenario::resolve(&BenchSpec {
            flows: 0,
            ..BenchSpec::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("-flows '0'"), "{e}");
        let e = Scenario::resolve(&BenchSpec {
            capacity: Some(0),
            ..BenchSpec::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("capacity 0"), "{e}");
        let e = Scenario::resolve(&BenchSpec {
            qmax: Num::Abs(1 << 40),
            ..BenchSpec::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("qmax"), "{e}");
        let mut s = spec("prio", "1::1");
        s.params = "bands=x".parse().unwrap();
        let e = Scenario::resolve(&s).unwrap_err().to_string();
        assert!(e.contains("'x'") && e.contains("bands"), "{e}");
    }
}
