//! How long one `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` takes while the process's
//! other threads keep the other CPUs busy: the price of the heavy fence
//! (`pspat_engine::barrier::heavy`) the arbiter pays to deactivate idle clients.
//!
//! ```sh
//! cargo run --release -p pspat-io --example membarrier_cost -- [THREADS] [CALLS] [spin|yield]
//! ```
//!
//! THREADS (default 1) busy threads are pinned round-robin to every allowed CPU but the
//! last, spinning or calling `sched_yield` in a loop (as greedy clients facing a full
//! mailbox do); the main thread, pinned to the last CPU, makes CALLS (default 2000)
//! membarrier calls 200 us apart and prints the percentiles of their duration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: usize = args.first().map_or(Ok(1), |s| s.parse()).expect("THREADS");
    let calls: usize = args.get(1).map_or(Ok(2000), |s| s.parse()).expect("CALLS");
    let spin = match args.get(2).map(String::as_str) {
        None | Some("yield") => false,
        Some("spin") => true,
        Some(other) => panic!("mode '{other}': spin or yield"),
    };
    assert!(calls > 0, "CALLS must be at least 1");
    let cpus = pspat_io::cpu::allowed_cpus();
    let (&mine, others) = cpus.split_last().expect("at least one CPU");
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..threads)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let cpu = (!others.is_empty()).then(|| others[i % others.len()]);
            std::thread::spawn(move || {
                if let Some(cpu) = cpu {
                    let _ = pspat_io::cpu::pin_current_thread(cpu);
                }
                // ORDERING: Relaxed: the flag only ends the loop.
                while !stop.load(Ordering::Relaxed) {
                    if spin {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    pspat_io::cpu::pin_current_thread(mine)?;
    pspat_io::cpu::membarrier_register()?;
    std::thread::sleep(Duration::from_millis(100));
    let mut ns: Vec<u64> = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        pspat_io::cpu::membarrier_expedited()?;
        ns.push(t.elapsed().as_nanos() as u64);
        let w = Instant::now();
        while w.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        let _ = t.join();
    }
    ns.sort_unstable();
    let q = |f: f64| ns[((ns.len() - 1) as f64 * f) as usize] as f64 / 1000.0;
    println!(
        "{threads} {} threads on the other CPUs, {calls} calls: membarrier us p50 {:.1} p90 {:.1} p99 {:.1} max {:.1}",
        if spin { "spinning" } else { "yielding" },
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );
    Ok(())
}
