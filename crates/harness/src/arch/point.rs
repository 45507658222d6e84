//! One measurement: an engine of either architecture, its greedy clients and maybe a
//! victim, a warm-up, then the counters' growth between two snapshots.
//!
//! The client threads run `pspat_engine::traffic::{greedy, greedy_spread, periodic}` over
//! the concrete client type of the architecture ([`pspat_engine::Client`] or
//! [`pspat_engine::LockClient`]): one monomorphised loop each, no dispatch per packet.
//!
//! Flows: the greedy ones first, one per greedy client or (`PointSpec::flows`) spread over
//! them, client `i` of `C` owning flows `i, i + C, ...`; then the victim's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use pspat_engine::clock;
use pspat_engine::latency::LatencyBoard;
use pspat_engine::stats::ClientSnapshot;
use pspat_engine::traffic::{self, SourceStats, Submit};
use pspat_engine::{
    ClientConfig, Engine, EngineConfig, EngineReport, EngineSnapshot, LockedEngine,
};
use pspat_sched::FlowParams;

use super::report::{self, ArbiterStalls, Latency, Point};
use super::spec::{ns, Setup};
use super::{Arch, ArchError, GREEDY_WEIGHT, VICTIM_WEIGHT};

/// One measurement: an architecture, some greedy clients, maybe a victim.
pub(crate) struct PointSpec<'a> {
    pub arch: Arch,
    /// What every point of the run shares; its `rate_bps` is this point's link.
    pub setup: &'a Setup,
    /// Weights of the greedy clients.
    pub greedy: Vec<u32>,
    /// The victim's gap, if it runs.
    pub victim_gap: Option<Duration>,
    /// Greedy flows in all (`ThroughputSpec::flows`: at least one per greedy client);
    /// `None`: one per greedy client.
    pub flows: Option<u32>,
}

impl PointSpec<'_> {
    /// How many greedy flows the point has (the victim's is the next).
    fn greedy_flows(&self) -> usize {
        self.flows.map_or(self.greedy.len(), |n| n as usize)
    }
}

/// The two limits a throughput point is compared with (zero: not measured).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    pub flat: f64,
    pub backlogged: f64,
}

/// The greedy flows, then the victim's: one flow per greedy client (weights `greedy`), or
/// with `flows` (at least one per client) that many, flow `j` with client `j % C`'s weight.
/// A flow's maximum packet length is the packet length: timestamp schedulers size their
/// guarantees (and QFQ its groups) by it.
pub(crate) fn flows_of(
    greedy: &[u32],
    flows: Option<u32>,
    victim: bool,
    len: u32,
) -> Vec<FlowParams> {
    let n = flows.map_or(greedy.len(), |n| n as usize);
    (0..n)
        .map(|j| greedy[j % greedy.len()])
        .chain(victim.then_some(VICTIM_WEIGHT * GREEDY_WEIGHT))
        .map(|w| FlowParams::weighted(w).with_max_len(len))
        .collect()
}

/// The packet limit of each greedy flow when `clients` greedy clients spread their packets
/// over `flows` flows, with mailboxes of `mailbox_entries` slots (what a client may have in
/// flight): `ceil(mailbox_entries * clients / flows) * 2`, at least 4 and at most
/// `mailbox_entries`.
///
/// A client submits round robin over its flows (`flows / clients` of them, rounded up or
/// down), so its in-flight packets spread evenly over them: a flow holds about
/// `mailbox_entries * clients / flows`. Twice that covers a client with the rounded-down
/// number `m` (its flows hold `(m + 1) / m` of the average at most, twice for `m = 1`)
/// and otherwise leaves slack for a scheduler that serves a client's flows less than
/// evenly; the floor of 4 is slack for shares of one or two packets. Room for a whole
/// mailbox in every flow would cost memory, not packets: a flow's ring (its limit rounded
/// up to a power of two, 40 bytes a slot for the engine's descriptor) is allocated when
/// the engine starts, and 32k flows of 512 slots take 670 MB.
pub(crate) fn spread_limit(mailbox_entries: usize, clients: usize, flows: u32) -> u32 {
    let even = (mailbox_entries as u64 * clients as u64).div_ceil(u64::from(flows).max(1));
    let entries = mailbox_entries as u64;
    (even * 2).max(4).min(entries) as u32
}

fn engine_config(spec: &PointSpec) -> EngineConfig {
    let s = spec.setup;
    let victim = spec.victim_gap.is_some();
    let mut clients = vec![ClientConfig::default(); spec.greedy.len()];
    if victim {
        clients.push(ClientConfig {
            track_latency: true,
        });
    }
    let flows = flows_of(&spec.greedy, spec.flows, victim, s.len);
    let mut cfg = EngineConfig::new(&s.alg, flows, clients);
    cfg.mailbox_entries = s.mailbox;
    // Each flow can hold everything its client can have in flight on it: no scheduler
    // drops. With one flow per client that is a mailbox's capacity; spread over several,
    // the client's share of them (`spread_limit`). The victim keeps a whole mailbox.
    let entries = cfg.mailbox_entries as u32;
    let greedy_limit = spec
        .flows
        .map_or(entries, |n| spread_limit(s.mailbox, spec.greedy.len(), n));
    let n_greedy_flows = spec.greedy_flows();
    for (j, f) in cfg.flows.iter_mut().enumerate() {
        let limit = if j < n_greedy_flows {
            greedy_limit
        } else {
            entries
        };
        *f = f.with_limit_pkts(limit);
    }
    cfg.params = s.params.clone();
    cfg.delta_a_ns = ns(s.knobs.delta_a);
    cfg.aggregate_ns = ns(s.knobs.aggregate);
    cfg.scan_batch = s.knobs.scan_batch;
    cfg.rate_bps = s.rate_bps;
    // PSPAT with decision aggregation schedules an aggregate as one packet of up to the
    // aggregation budget: each flow must admit packets that long, or nothing would merge.
    // (The lock baseline does not aggregate and keeps the flows as they are.)
    if spec.arch == Arch::Pspat {
        cfg.fit_flows_to_aggregates();
    }
    cfg.handoff = s.handoff;
    cfg.arbiter_cpu = Placement::of(s.pin, spec.arch).arbiter;
    cfg
}

/// Where `Setup::pin` puts the threads of a point (and floor mode its spinner and
/// yielders, as for [`Arch::Pspat`]): the PSPAT arbiter on the last CPU this process may
/// use, the PSPAT clients round-robin over the others, the lock-based clients (which have
/// no arbiter) round-robin over all of them. With fewer than two CPUs nothing is pinned:
/// there is no CPU to give the arbiter, and pinning every thread to the one CPU the
/// process may use would change nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The arbiter's CPU (`None`: unpinned).
    pub arbiter: Option<usize>,
    /// The clients' CPUs, client `i` on `clients[i % len]` (empty: unpinned).
    pub clients: Vec<usize>,
}

impl Placement {
    /// The placement of `arch`'s threads when `pin` is set (none when it is not).
    pub(crate) fn of(pin: bool, arch: Arch) -> Self {
        let cpus = pspat_io::cpu::allowed_cpus();
        if !pin || cpus.len() < 2 {
            return Placement::default();
        }
        match arch {
            Arch::Pspat => {
                let (&last, rest) = cpus.split_last().expect("two or more CPUs");
                Placement {
                    arbiter: Some(last),
                    clients: rest.to_vec(),
                }
            }
            Arch::Lock => Placement {
                arbiter: None,
                clients: cpus,
            },
        }
    }

    /// The CPU of client thread `i`, if pinned.
    pub(crate) fn client(&self, i: usize) -> Option<usize> {
        (!self.clients.is_empty()).then(|| self.clients[i % self.clients.len()])
    }
}

/// The engine under test, either architecture (observed a few times a point: the
/// clients, which run per packet, get a type of their own).
enum Running {
    Pspat(Engine),
    Lock(LockedEngine),
}

impl Running {
    /// The counters, stamped within 100 us of being read: a snapshot stamps its time
    /// first, so a thread preempted while reading would count packets of the next
    /// milliseconds in this window (up to a few tries on a loaded machine).
    fn snapshot(&self) -> EngineSnapshot {
        let mut tries = 0;
        loop {
            let s = match self {
                Running::Pspat(e) => e.snapshot(),
                Running::Lock(e) => e.snapshot(),
            };
            tries += 1;
            if clock::now_ns() - s.at_ns < 100_000 || tries == 10 {
                return s;
            }
        }
    }
    fn board(&self) -> Arc<LatencyBoard> {
        match self {
            Running::Pspat(e) => e.latency_board(),
            Running::Lock(e) => e.latency_board(),
        }
    }
    fn contended(&self) -> Option<u64> {
        match self {
            Running::Pspat(_) => None,
            Running::Lock(e) => Some(e.lock_stats().contended.iter().sum()),
        }
    }
    fn stop(self) -> EngineReport {
        match self {
            Running::Pspat(e) => e.stop(false),
            Running::Lock(e) => e.stop(false),
        }
    }
}

/// Runs one point, compared with `limits`.
pub(crate) fn run_point(spec: &PointSpec, limits: Limits) -> Result<Point, ArchError> {
    let Measured { point, sources } = measure_point(spec, limits)?;
    // Every push a full mailbox refused reached a source, as a greedy client's back-off or
    // a victim's refused packet (the clients stop before the engine: none saw it stopped).
    debug_assert_eq!(
        sources.iter().map(|s| s.backoffs + s.refused).sum::<u64>(),
        point.mailbox_full,
        "{sources:?}"
    );
    Ok(point)
}

/// A point, and what each client's source counted (greedy clients first, then the victim)
/// over the whole run, warm-up included, as the point's totals are.
struct Measured {
    point: Point,
    sources: Vec<SourceStats>,
}

/// [`run_point`], with the sources' counts.
fn measure_point(spec: &PointSpec, limits: Limits) -> Result<Measured, ArchError> {
    let cfg = engine_config(spec);
    let backend = Arc::clone(&spec.setup.backend);
    match spec.arch {
        Arch::Pspat => {
            let (e, clients) = Engine::start(&cfg, backend)?;
            measure(spec, limits, Running::Pspat(e), clients)
        }
        Arch::Lock => {
            let (e, clients) = LockedEngine::start(&cfg, backend)?;
            measure(spec, limits, Running::Lock(e), clients)
        }
    }
}

/// Starts a thread per client: the greedy ones first, then the victim. Each returns what
/// its source counted.
fn spawn_clients<C: Submit + Send + 'static>(
    spec: &PointSpec,
    clients: Vec<C>,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<JoinHandle<SourceStats>>, ArchError> {
    let n_greedy = spec.greedy.len();
    let len = spec.setup.len;
    let placement = Placement::of(spec.setup.pin, spec.arch);
    // Greedy client `i` sends on flows `i, i + C, ...` below this; the victim on it.
    let n_flows = spec.greedy_flows() as u32;
    let stride = n_greedy as u32;
    let spread = spec.flows.is_some();
    let mut threads = Vec::with_capacity(clients.len());
    for (i, mut c) in clients.into_iter().enumerate() {
        let stop = Arc::clone(stop);
        let gap = spec.victim_gap.filter(|_| i >= n_greedy);
        let flow = if gap.is_some() { n_flows } else { i as u32 };
        let name = if gap.is_some() {
            "victim".to_owned()
        } else {
            format!("greedy-{i}")
        };
        let cpu = placement.client(i);
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                if let Some(cpu) = cpu {
                    // Best effort: an unpinned client is still correct.
                    let _ = pspat_io::cpu::pin_current_thread(cpu);
                }
                match gap {
                    // Its flows: those of `flow + k * stride` below `n_flows`.
                    None if spread => {
                        let count = (n_flows - flow).div_ceil(stride);
                        traffic::greedy_spread(&mut c, flow, stride, count, len, &stop)
                    }
                    None => traffic::greedy(&mut c, flow, len, &stop),
                    Some(gap) => traffic::periodic(&mut c, flow, len, gap, &stop),
                }
            })
            .map_err(|source| ArchError::Spawn {
                what: "a client thread",
                source,
            })?;
        threads.push(h);
    }
    Ok(threads)
}

/// Runs `clients` on `running` for a warm-up and the measured interval, then stops it.
fn measure<C: Submit + Send + 'static>(
    spec: &PointSpec,
    limits: Limits,
    running: Running,
    clients: Vec<C>,
) -> Result<Measured, ArchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = match spawn_clients(spec, clients, &stop) {
        Ok(t) => t,
        Err(e) => {
            // The clients already started end on the flag, or on the stopped engine.
            // ORDERING: Relaxed, as below.
            stop.store(true, Ordering::Relaxed);
            running.stop();
            return Err(e);
        }
    };
    let n_greedy = spec.greedy.len();
    let duration = spec.setup.duration;
    let warmup = (duration / 10).max(Duration::from_millis(20));
    std::thread::sleep(warmup);
    let board = running.board();
    let a = running.snapshot();
    // The victim's latency over the measured interval only, like every other figure of
    // the point: what was published by now is subtracted at the end (the board is
    // cumulative and published every 50 ms, so the cut is within 50 ms of `a`).
    let victim_before = board.snapshot(n_greedy);
    std::thread::sleep(duration);
    let b = running.snapshot();
    let victim_after = board.snapshot(n_greedy);
    let contended = running.contended();
    // ORDERING: Relaxed: the flag only ends the client loops; the joins order the rest.
    stop.store(true, Ordering::Relaxed);
    // A client thread that panicked counted nothing we can read.
    let sources: Vec<SourceStats> = threads
        .into_iter()
        .map(|t| t.join().unwrap_or_default())
        .collect();
    let report = running.stop();

    let dt = (b.at_ns - a.at_ns) as f64 / 1e9;
    // A counter's growth over the measured interval, summed over the clients.
    let delta = |f: fn(&ClientSnapshot) -> u64| -> u64 {
        b.clients
            .iter()
            .zip(&a.clients)
            .map(|(b, a)| f(b) - f(a))
            .sum()
    };
    let decisions = delta(|c| c.scheduled);
    let bytes = delta(|c| c.scheduled_bytes);
    let sent = delta(|c| c.sent);
    let greedy_delta = |f: fn(&ClientSnapshot) -> u64| -> Vec<u64> {
        (0..n_greedy)
            .map(|i| f(&b.clients[i]) - f(&a.clients[i]))
            .collect()
    };
    let (shares, share_min_max) = report::shares(
        &spec.greedy,
        &greedy_delta(|c| c.scheduled),
        &greedy_delta(|c| c.scheduled_bytes),
    );
    let victim = spec.victim_gap.and(victim_after).map(|mut h| {
        if let Some(before) = &victim_before {
            // Same bounds, and `before` is an earlier state of the same counts.
            let _ = h.subtract(before);
        }
        Latency {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
        }
    });
    let stalls = (spec.arch == Arch::Pspat).then(|| ArbiterStalls {
        // Over the snapshots' distance, or the stall counters' own span when longer
        // (`pspat_engine::stall`: a gap in progress at `a` is counted from its start).
        gaps: b.stalls.since(&a.stalls).summary(b.at_ns - a.at_ns),
        deactivation_fences: b.deactivation_fences - a.deactivation_fences,
        scans_per_s: (b.scans - a.scans) as f64 / dt,
        decisions_per_scan: decisions as f64 / (b.scans - a.scans).max(1) as f64,
    });
    let s = &report.snapshot.clients;
    let decisions_per_s = decisions as f64 / dt;
    let point = Point {
        arch: spec.arch,
        clients: n_greedy,
        decisions_per_s,
        sent_per_s: sent as f64 / dt,
        released_bps: bytes as f64 * 8.0 / dt,
        limit_per_s: limits.flat,
        of_limit: report::ratio(decisions_per_s, limits.flat),
        limit_backlogged_per_s: limits.backlogged,
        of_limit_backlogged: report::ratio(decisions_per_s, limits.backlogged),
        share_min_max,
        shares,
        victim,
        decisions_total: s.iter().map(|c| c.scheduled).sum(),
        sched_dequeues_total: report.sched.as_ref().map(|x| x.stats.sent_pkts),
        drops: s.iter().map(|c| c.dropped_total()).sum(),
        send_failed: s.iter().map(|c| c.send_failed).sum(),
        mailbox_full: s.iter().map(|c| c.mailbox_full).sum(),
        lock_contended: contended,
        stalls,
    };
    Ok(Measured { point, sources })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::spec::tests::setup;

    #[test]
    fn flows_put_the_victim_last_with_its_weight() {
        let f = flows_of(&[1, 2], None, true, 60);
        assert_eq!(f.len(), 3);
        assert_eq!(f[1], FlowParams::weighted(2).with_max_len(60));
        assert_eq!(f[2], FlowParams::weighted(VICTIM_WEIGHT).with_max_len(60));
        assert_eq!(flows_of(&[1, 2], None, false, 60).len(), 2);
        // Spread: flow j is client j % 2's, the victim's after the 5 greedy flows.
        let f = flows_of(&[1, 2], Some(5), true, 60);
        let weights: Vec<u32> = f.iter().map(|f| f.weight).collect();
        assert_eq!(weights, [1, 2, 1, 2, 1, VICTIM_WEIGHT]);
        assert!(f.iter().all(|f| f.max_len == 60));
        assert_eq!(
            flows_of(&[1, 2], Some(2), false, 60),
            flows_of(&[1, 2], None, false, 60)
        );
    }

    #[test]
    fn spread_flows_share_a_mailbox_and_the_victim_keeps_one() {
        // 2 clients of 512-slot mailboxes over 64 flows: 16 packets a flow, twice that.
        assert_eq!(spread_limit(512, 2, 64), 32);
        // Never more than a mailbox, never fewer than 4.
        assert_eq!(spread_limit(512, 1, 1), 512);
        assert_eq!(spread_limit(512, 3, 4), 512);
        assert_eq!(spread_limit(512, 16, 32_768), 4);
        assert_eq!(spread_limit(16, 1, 1 << 20), 4);
        // Rounded up: 512 * 3 / 1000 is 1.5.
        assert_eq!(spread_limit(512, 3, 1000), 4);
        assert_eq!(spread_limit(512, 3, 100), 32);

        let s = setup();
        let spec = |flows| PointSpec {
            arch: Arch::Pspat,
            setup: &s,
            greedy: vec![1, 1],
            victim_gap: Some(Duration::from_micros(50)),
            flows,
        };
        let limits =
            |cfg: EngineConfig| -> Vec<u32> { cfg.flows.iter().map(|f| f.limit_pkts).collect() };
        assert_eq!(limits(engine_config(&spec(None))), [512; 3]);
        let want: Vec<u32> = [32; 64].into_iter().chain([512]).collect();
        assert_eq!(limits(engine_config(&spec(Some(64)))), want);
    }

    #[test]
    fn the_arbiter_gets_a_cpu_of_its_own_only_when_pinned() {
        let mut s = setup();
        let spec = |s: &Setup, arch| {
            let p = PointSpec {
                arch,
                setup: s,
                greedy: vec![1; 3],
                victim_gap: None,
                flows: None,
            };
            let placement = Placement::of(s.pin, arch);
            (
                engine_config(&p).arbiter_cpu,
                (0..3).map(|i| placement.client(i)).collect::<Vec<_>>(),
            )
        };
        assert_eq!(spec(&s, Arch::Pspat), (None, vec![None; 3]));
        s.pin = true;
        let cpus = pspat_io::cpu::allowed_cpus();
        let (arbiter, clients) = spec(&s, Arch::Pspat);
        let (lock_arbiter, lock_clients) = spec(&s, Arch::Lock);
        assert_eq!(lock_arbiter, None);
        if cpus.len() < 2 {
            // No CPU to give the arbiter: nothing pinned, in either architecture.
            assert_eq!((arbiter, clients), (None, vec![None; 3]));
            assert_eq!(lock_clients, vec![None; 3]);
            return;
        }
        assert_eq!(arbiter, cpus.last().copied());
        assert!(
            clients.iter().all(|c| c.is_some() && *c != arbiter),
            "{clients:?} {arbiter:?}"
        );
        assert_eq!(clients[0], cpus.first().copied());
        assert_eq!(lock_clients[0], cpus.first().copied());
        // The lock-based clients use every CPU, the arbiter's too.
        let lock_all: Vec<_> = (0..cpus.len())
            .map(|i| Placement::of(true, Arch::Lock).client(i))
            .collect();
        assert_eq!(lock_all, cpus.iter().copied().map(Some).collect::<Vec<_>>());
    }

    /// A tiny point of each architecture on the null backend: the clients ran, the
    /// victim was measured, nothing was lost, and the figures (the engine's and the
    /// sources') hang together.
    #[test]
    fn a_tiny_point_of_each_architecture_runs() {
        // Long enough for the latency board (published every 50 ms) to cover the victim.
        let s = Setup {
            duration: Duration::from_millis(150),
            ..setup()
        };
        for arch in [Arch::Pspat, Arch::Lock] {
            let spec = PointSpec {
                arch,
                setup: &s,
                greedy: vec![1, 1],
                victim_gap: Some(Duration::from_micros(50)),
                flows: None,
            };
            let limits = Limits {
                flat: 1e6,
                backlogged: 0.0,
            };
            let Measured { point: p, sources } = measure_point(&spec, limits).unwrap();
            assert_eq!((p.arch, p.clients, p.shares.len()), (arch, 2, 2));
            assert!(p.decisions_per_s > 0.0, "{p:?}");
            assert_eq!(p.of_limit, p.decisions_per_s / 1e6);
            assert_eq!(p.of_limit_backlogged, 0.0, "no backlogged limit measured");
            assert!(p.victim.as_ref().is_some_and(|v| v.count > 0), "{p:?}");
            assert_eq!((p.drops, p.send_failed), (0, 0), "{p:?}");
            assert!((0.0..=1.0).contains(&p.share_min_max), "{p:?}");
            assert!(p.decisions_total >= p.shares.iter().map(|s| s.decisions).sum::<u64>());
            // The sources saw what the engine counted: each refusal by a full mailbox is a
            // greedy client's back-off or a victim's refused packet, and every decision
            // was a packet some source had submitted.
            assert_eq!(sources.len(), 3, "{sources:?}");
            let (greedy, victim) = sources.split_at(2);
            assert!(
                greedy.iter().all(|g| g.accepted > 0 && g.refused == 0),
                "{sources:?}"
            );
            assert_eq!(victim[0].backoffs, 0, "{sources:?}");
            let sum = |f: fn(&SourceStats) -> u64| sources.iter().map(f).sum::<u64>();
            assert_eq!(
                sum(|s| s.backoffs) + sum(|s| s.refused),
                p.mailbox_full,
                "{sources:?} {p:?}"
            );
            assert!(
                sum(|s| s.accepted) >= p.decisions_total,
                "{sources:?} {p:?}"
            );
            assert_eq!(sum(|s| s.dropped_reported) + sum(|s| s.filtered), 0);
            match arch {
                Arch::Pspat => {
                    let st = p.stalls.as_ref().expect("the arbiter's stalls");
                    assert!((0.0..=100.0).contains(&st.gaps.stalled_pct), "{st:?}");
                    assert!(p.lock_contended.is_none());
                }
                Arch::Lock => assert!(p.stalls.is_none() && p.lock_contended.is_some()),
            }
        }
    }
}
