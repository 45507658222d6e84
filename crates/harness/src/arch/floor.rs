//! Floor mode: the drain gaps this machine imposes on a thread that does nothing else.
//!
//! The PSPAT arbiter counts the intervals between two mailbox drains longer than
//! [`STALL_MIN_NS`] (`pspat_engine::stall`): its own long scans, its slow system calls, and
//! the times the operating system or the hypervisor did not run it. This mode measures the
//! last part alone. A "spinner" thread pinned where `Setup::pin` puts the arbiter reads the
//! clock in a loop and counts the gaps between two readings the same way, while `N`
//! threads pinned where the greedy clients go call `sched_yield` in a loop, as a greedy
//! client facing a full mailbox does. The spinner's p99 wait is then the p99 wait that a
//! packet arriving at a random instant would have under an arbiter that costs nothing: a
//! floor under the victim's p99 in throughput mode, on this machine, that no code in the
//! arbiter can lower.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pspat_engine::clock;
use pspat_engine::stall::{StallCounters, STALL_MIN_NS};

use super::point::Placement;
use super::report::{FloorPoint, FloorReport};
use super::{Arch, ArchError, FloorSpec};

/// Runs the floor measurement for each client count of `spec`.
pub fn floor(spec: &FloorSpec) -> Result<FloorReport, ArchError> {
    spec.validate()?;
    let points = spec
        .clients
        .iter()
        .map(|&n| point(n, spec.duration, spec.pin))
        .collect::<Result<_, _>>()?;
    Ok(FloorReport {
        stall_min_ns: STALL_MIN_NS,
        duration: spec.duration,
        points,
    })
}

fn spawn(
    name: String,
    what: &'static str,
    f: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, ArchError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|source| ArchError::Spawn { what, source })
}

fn point(n: usize, duration: Duration, pin: bool) -> Result<FloorPoint, ArchError> {
    // The spinner where the arbiter goes, the yielders where the PSPAT clients go.
    let placement = Placement::of(pin, Arch::Pspat);
    let spinner_cpu = placement.arbiter;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::with_capacity(n + 1);
    let counters = Arc::new(StallCounters::default());
    let started = (|| {
        for i in 0..n {
            let stop = Arc::clone(&stop);
            let cpu = placement.client(i);
            threads.push(spawn(
                format!("yielder-{i}"),
                "a yielding thread",
                move || {
                    if let Some(cpu) = cpu {
                        // Best effort, as for the benchmark's clients.
                        let _ = pspat_io::cpu::pin_current_thread(cpu);
                    }
                    // ORDERING: Relaxed: the flag only ends the loop.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    }
                },
            )?);
        }
        let stop = Arc::clone(&stop);
        let counters = Arc::clone(&counters);
        threads.push(spawn("spinner".into(), "the spinner", move || {
            if let Some(cpu) = spinner_cpu {
                let _ = pspat_io::cpu::pin_current_thread(cpu);
            }
            counters.restart(clock::now_ns());
            // ORDERING: Relaxed, as above.
            while !stop.load(Ordering::Relaxed) {
                counters.drained(clock::now_ns());
            }
        })?);
        Ok(())
    })();
    let measured = started.map(|()| {
        std::thread::sleep((duration / 10).max(Duration::from_millis(20)));
        let (t0, a) = (clock::now_ns(), counters.snapshot());
        std::thread::sleep(duration);
        let (t1, b) = (clock::now_ns(), counters.snapshot());
        let gaps = b.since(&a);
        FloorPoint {
            clients: n,
            span_ns: gaps.widened_span_ns(t1 - t0),
            gaps: gaps.summary(t1 - t0),
        }
    });
    // ORDERING: Relaxed, as above.
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    measured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_floor_run_has_a_point_per_count() {
        let spec = FloorSpec {
            clients: vec![1, 2],
            duration: Duration::from_millis(20),
            pin: true,
        };
        let r = floor(&spec).unwrap();
        assert_eq!(r.stall_min_ns, STALL_MIN_NS);
        let counts: Vec<usize> = r.points.iter().map(|p| p.clients).collect();
        assert_eq!(counts, [1, 2]);
        for p in &r.points {
            assert!(p.span_ns >= 20_000_000, "{p:?}");
            assert!((0.0..=100.0).contains(&p.gaps.stalled_pct), "{p:?}");
            assert_eq!(p.gaps.gaps == 0, p.gaps.longest_at_least_ns == 0, "{p:?}");
        }
    }
}
