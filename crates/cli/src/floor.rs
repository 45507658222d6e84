//! `pspat bench arch --mode floor`: the drain gaps this machine imposes on a thread that
//! does nothing else.
//!
//! The PSPAT arbiter counts the intervals between two mailbox drains longer than
//! [`STALL_MIN_NS`] (`pspat_engine::stall`): its own long scans, its slow system calls, and
//! the times the operating system or the hypervisor did not run it. This mode measures the
//! last part alone. A "spinner" thread pinned where `bench arch --pin` puts the arbiter
//! reads the clock in a loop and counts the gaps between two readings the same way, while
//! `N` threads pinned where the greedy clients go call `sched_yield` in a loop, as a
//! greedy client facing a full mailbox does. The spinner's `stall-p99us` is then the p99
//! wait that a packet arriving at a random instant would have under an arbiter that costs
//! nothing: a floor under the victim's p99 in throughput mode, on this machine, that no
//! code in the arbiter can lower.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use pspat_engine::clock;
use pspat_engine::stall::{StallCounters, StallSummary, STALL_MIN_NS};
use serde::Serialize;

use crate::{emit, table};

#[derive(Serialize)]
struct FloorPoint {
    /// Yielding threads on the clients' CPUs.
    clients: usize,
    /// The span the gaps are counted over and divided by, ns: the snapshots' distance, or
    /// longer when a gap in progress at the first one is counted from its start.
    span_ns: u64,
    /// The gaps between two clock readings of the spinner.
    #[serde(flatten)]
    gaps: StallSummary,
}

#[derive(Serialize)]
struct FloorOut<'a> {
    mode: &'static str,
    stall_min_ns: u64,
    duration_s: f64,
    points: &'a [FloorPoint],
}

/// Runs the floor measurement for each client count.
pub(crate) fn floor(clients: &[usize], duration: Duration, pin: bool, json: bool) -> Result<()> {
    let mut points = Vec::with_capacity(clients.len());
    for &n in clients {
        points.push(point(n, duration, pin)?);
    }
    if json {
        return emit(&serde_json::to_string(&FloorOut {
            mode: "floor",
            stall_min_ns: STALL_MIN_NS,
            duration_s: duration.as_secs_f64(),
            points: &points,
        })?);
    }
    emit(&format!(
        "bench arch --mode floor: a spinner on the arbiter's CPU, N yielding threads on the \
         clients' CPUs, {:.2} s per point; gaps of {:.1} us or more",
        duration.as_secs_f64(),
        STALL_MIN_NS as f64 / 1000.0
    ))?;
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.clients.to_string(),
                p.gaps.gaps.to_string(),
                format!("{:.2}", p.gaps.stalled_pct),
                format!("{:.1}", p.gaps.wait_p99_ns / 1000.0),
                format!("{:.0}", p.gaps.longest_at_least_ns as f64 / 1000.0),
            ]
        })
        .collect();
    let t = table::render(
        &["clients", "gaps", "stall%", "stall-p99us", "longest>=us"],
        &rows,
        &[0, 1, 2, 3, 4],
    );
    emit(t.trim_end())
}

/// The CPUs of the spinner and of the yielders, as `bench arch --pin` places the arbiter
/// and the PSPAT clients (`None`: unpinned).
fn placement(pin: bool) -> (Option<usize>, Vec<usize>) {
    let cpus = pspat_io::cpu::allowed_cpus();
    if !pin || cpus.len() < 2 {
        return (None, Vec::new());
    }
    let (last, rest) = cpus.split_last().expect("two or more CPUs");
    (Some(*last), rest.to_vec())
}

fn point(n: usize, duration: Duration, pin: bool) -> Result<FloorPoint> {
    let (spinner_cpu, client_cpus) = placement(pin);
    let stop = Arc::new(AtomicBool::new(false));
    let mut yielders = Vec::with_capacity(n);
    for i in 0..n {
        let stop = Arc::clone(&stop);
        let cpu = (!client_cpus.is_empty()).then(|| client_cpus[i % client_cpus.len()]);
        yielders.push(
            std::thread::Builder::new()
                .name(format!("yielder-{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        // Best effort, as for bench arch's clients.
                        let _ = pspat_io::cpu::pin_current_thread(cpu);
                    }
                    // ORDERING: Relaxed: the flag only ends the loop.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    }
                })
                .context("spawning a yielding thread")?,
        );
    }
    let counters = Arc::new(StallCounters::default());
    let spinner = {
        let stop = Arc::clone(&stop);
        let counters = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("spinner".into())
            .spawn(move || {
                if let Some(cpu) = spinner_cpu {
                    let _ = pspat_io::cpu::pin_current_thread(cpu);
                }
                counters.restart(clock::now_ns());
                // ORDERING: Relaxed, as above.
                while !stop.load(Ordering::Relaxed) {
                    counters.drained(clock::now_ns());
                }
            })
            .context("spawning the spinner")?
    };
    std::thread::sleep((duration / 10).max(Duration::from_millis(20)));
    let (t0, a) = (clock::now_ns(), counters.snapshot());
    std::thread::sleep(duration);
    let (t1, b) = (clock::now_ns(), counters.snapshot());
    stop.store(true, Ordering::Relaxed);
    for t in yielders {
        let _ = t.join();
    }
    let _ = spinner.join();
    let gaps = b.since(&a);
    Ok(FloorPoint {
        clients: n,
        span_ns: gaps.summary_span_ns(t1 - t0),
        gaps: gaps.summary(t1 - t0),
    })
}
