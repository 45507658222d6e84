//! Throughput mode: decisions per second, shares and victim latency against the number
//! of clients, each point beside the limit of the same algorithm on one thread.

use pspat_io::Pkt;

use super::point::{flows_of, run_point, spread_limit, Limits, PointSpec};
use super::report::{self, ThroughputReport};
use super::{ArchError, Progress, ThroughputSpec, GREEDY_WEIGHT, VICTIM_WEIGHT};
use crate::limit::Limit;

/// Runs `spec`: for each client count, the two limits (each over half a point's
/// duration), then a point per architecture. `progress` hears of each point before it
/// starts.
pub fn throughput(
    spec: &ThroughputSpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<ThroughputReport, ArchError> {
    spec.validate()?;
    let s = &spec.setup;
    let victim = spec.victim_gap.is_some();
    let mut points = Vec::with_capacity(spec.clients.len() * spec.archs.len());
    for &n in &spec.clients {
        let greedy = vec![GREEDY_WEIGHT; n];
        // The engine's flows, and with them spread its greedy flows' packet limits (the
        // scheduler's rings as large as the engine's; the default room would take
        // gigabytes with many flows).
        let flows = flows_of(&greedy, spec.flows, victim, s.len);
        let flow_limit_pkts = spec.flows.map(|f| spread_limit(s.mailbox, n, f));
        let limit = |backlog, backlogged| {
            Limit {
                alg: s.alg.clone(),
                params: s.params.clone(),
                flows: flows.clone(),
                len: s.len,
                duration: s.duration / 2,
                backlog,
                backlogged,
                flow_limit_pkts,
            }
            .measure()
        };
        // A greedy client keeps its mailbox's capacity in flight, nearly all of it in the
        // scheduler, spread evenly over its flows (at least one packet each); the victim's
        // flow is nearly empty.
        let in_flight = pspat_mailbox::Config::with_entries(s.mailbox).capacity::<Pkt>();
        let (backlog, backlogged) = match spec.flows {
            None => (in_flight, n),
            Some(f) => ((in_flight * n / f as usize).max(1), f as usize),
        };
        let limits = Limits {
            flat: limit(0, 0)?,
            backlogged: limit(backlog, backlogged)?,
        };
        for &arch in &spec.archs {
            progress(Progress::Point { clients: n, arch });
            let point = PointSpec {
                arch,
                setup: s,
                greedy: greedy.clone(),
                victim_gap: spec.victim_gap,
                flows: spec.flows,
            };
            let p = run_point(&point, limits).map_err(|e| ArchError::Point {
                arch,
                clients: n,
                source: Box::new(e),
            })?;
            points.push(p);
        }
    }
    Ok(ThroughputReport {
        alg: s.alg.clone(),
        backend: s.backend_name.clone(),
        handoff: s.handoff,
        rate_bps: s.rate_bps,
        len: s.len,
        flows: spec.flows,
        duration: s.duration,
        knobs: s.knobs,
        victim_gap: spec.victim_gap,
        victim_weight: victim.then_some(VICTIM_WEIGHT),
        ratios: report::ratios(&points, &spec.clients),
        points,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use pspat_io::{Backend, SendError, Sender};

    use super::*;
    use crate::arch::spec::tests::setup;
    use crate::arch::Arch;

    #[test]
    fn a_tiny_run_has_every_point_in_order_and_their_ratios() {
        let spec = ThroughputSpec {
            setup: setup(),
            archs: vec![Arch::Lock, Arch::Pspat],
            clients: vec![2, 1],
            victim_gap: None,
            flows: None,
        };
        let mut heard = Vec::new();
        let r = throughput(&spec, &mut |p| heard.push(p)).unwrap();
        let order: Vec<(Arch, usize)> = r.points.iter().map(|p| (p.arch, p.clients)).collect();
        let want = [
            (Arch::Lock, 2),
            (Arch::Pspat, 2),
            (Arch::Lock, 1),
            (Arch::Pspat, 1),
        ];
        assert_eq!(order, want);
        let heard_order: Vec<(Arch, usize)> = heard
            .iter()
            .map(|p| match *p {
                Progress::Point { clients, arch } => (arch, clients),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(heard_order, want);
        for p in &r.points {
            assert!(
                p.limit_per_s > 0.0 && p.limit_backlogged_per_s > 0.0,
                "{p:?}"
            );
            assert!(p.victim.is_none());
        }
        let ratio_clients: Vec<usize> = r.ratios.iter().map(|r| r.clients).collect();
        assert_eq!(ratio_clients, [2, 1]);
        let want = r.points[1].decisions_per_s / r.points[0].decisions_per_s;
        assert!((r.ratios[0].pspat_over_lock - want).abs() <= 1e-9 * want);
        assert_eq!((r.victim_gap, r.victim_weight), (None, None));
    }

    /// A backend that counts the packets it is given per (client, flow).
    #[derive(Default)]
    struct PerFlow(Arc<Mutex<BTreeMap<(u32, u32), u64>>>);

    impl Backend for PerFlow {
        fn name(&self) -> &'static str {
            "per-flow"
        }
        fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
            Ok(Box::new(PerFlow(Arc::clone(&self.0))))
        }
    }

    impl Sender for PerFlow {
        fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
            let mut seen = self.0.lock().unwrap();
            for p in batch {
                *seen.entry((p.client, p.flow)).or_default() += 1;
            }
            Ok(batch.len())
        }
    }

    /// Two greedy clients spread over 64 flows, and the victim: in either architecture
    /// every greedy flow carries packets, each from the client that owns it (flow `j` is
    /// client `j % 2`'s), the victim's is flow 64, there is no other, and the flows' packet
    /// limits (a share of a mailbox each) drop nothing.
    #[test]
    fn a_tiny_run_spread_over_64_flows_sends_on_every_one() {
        for arch in [Arch::Pspat, Arch::Lock] {
            let seen = Arc::new(Mutex::new(BTreeMap::new()));
            let mut spec = ThroughputSpec {
                setup: setup(),
                archs: vec![arch],
                clients: vec![2],
                victim_gap: Some(Duration::from_micros(50)),
                flows: Some(64),
            };
            spec.setup.backend = Arc::new(PerFlow(Arc::clone(&seen)));
            let r = throughput(&spec, &mut |_| {}).unwrap();
            assert_eq!(r.flows, Some(64));
            let p = &r.points[0];
            assert_eq!((p.arch, p.clients, p.shares.len()), (arch, 2, 2));
            assert!(
                p.decisions_per_s > 0.0 && p.limit_backlogged_per_s > 0.0,
                "{p:?}"
            );
            assert_eq!((p.drops, p.send_failed), (0, 0), "{p:?}");
            // Every (flow, client) pair that sent a packet, by flow.
            let mut sent: Vec<(u32, u32)> =
                seen.lock().unwrap().keys().map(|&(c, f)| (f, c)).collect();
            sent.sort_unstable();
            let want: Vec<(u32, u32)> = (0..64).map(|f| (f, f % 2)).chain([(64, 2)]).collect();
            assert_eq!(sent, want, "{arch}");
        }
    }

    #[test]
    fn an_invalid_spec_starts_nothing() {
        let mut spec = ThroughputSpec {
            setup: setup(),
            archs: vec![Arch::Pspat],
            clients: vec![1],
            victim_gap: Some(Duration::from_micros(50)),
            flows: None,
        };
        spec.setup.duration = Duration::ZERO;
        let mut heard = 0;
        let e = throughput(&spec, &mut |_| heard += 1).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert_eq!(heard, 0);
    }
}
