//! Helpers shared by the engine's integration tests.

#![allow(dead_code)] // each test file uses its own part

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_engine::clock;
use pspat_engine::traffic::Submit;
use pspat_engine::EngineSnapshot;
use pspat_io::Pkt;

/// Checks that every client's packets arrived exactly once and in submission order: the
/// packets of one client must appear with seq 0, 1, 2, ... and `per_client` of them.
pub fn assert_complete_and_ordered<'a>(
    pkts: impl IntoIterator<Item = &'a Pkt>,
    clients: usize,
    per_client: u32,
) {
    let mut next = vec![0u32; clients];
    for p in pkts {
        let c = p.client as usize;
        assert_eq!(
            p.seq, next[c],
            "client {c}: expected seq {} got {}",
            next[c], p.seq
        );
        next[c] += 1;
    }
    assert_eq!(next, vec![per_client; clients], "packets lost");
}

/// Client threads submitting packets as fast as they can (client `i` on flow `i`),
/// pausing 50 us on a refusal, until [`Greedy::finish`], which joins them (their clients
/// are dropped then).
pub struct Greedy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Greedy {
    /// Starts one thread per client, submitting 1000-byte packets.
    pub fn start<C: Submit + Send + 'static>(clients: Vec<C>) -> Self {
        Self::start_with_len(clients, 1000)
    }

    /// Starts one thread per client, submitting `len`-byte packets.
    pub fn start_with_len<C: Submit + Send + 'static>(clients: Vec<C>, len: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if c.submit_at(i as u32, len, clock::now_ns()).is_err() {
                            c.pause(Duration::from_micros(50));
                        }
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }

    /// Stops and joins the threads.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// Two snapshots of a [`Greedy`] run: one after 100 ms of warm-up and one 400 ms later.
/// Returns them with the time elapsed since `start`.
pub fn greedy_window<C: Submit + Send + 'static>(
    clients: Vec<C>,
    snapshot: impl Fn() -> EngineSnapshot,
    start: Instant,
) -> (EngineSnapshot, EngineSnapshot, Duration) {
    let greedy = Greedy::start(clients);
    std::thread::sleep(Duration::from_millis(100));
    let a = snapshot();
    std::thread::sleep(Duration::from_millis(400));
    let b = snapshot();
    let elapsed = start.elapsed();
    greedy.finish();
    (a, b, elapsed)
}
