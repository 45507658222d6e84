//! One sender thread of the generator: pacing and counting.
//!
//! The datagrams go out through the `udp` backend of pspat-io (sendmmsg batches of
//! [`BATCH`], preallocated headers, a shared run of zeros as padding), the same code the
//! engine transmits with; this module only paces and counts.
//!
//! Pacing: a rate of 0 sends full batches back to back (as fast as the socket, the CPU and
//! the queues below let it: a blocking socket waits when its send buffer is full). A
//! positive rate releases packet `k` at `start + k / rate`, up to a batch at a time when
//! behind, sleeping when the next packet is more than 200 µs away and spinning (with
//! yields) otherwise. A packet the kernel refused (an error, or a partial sendmmsg) is not
//! retried and does not consume a sequence number, so the receiver's gap count measures
//! loss after the socket only.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use pspat_io::udp::BATCH;
use pspat_io::{clock, cpu, Pkt, Sender};

use crate::error::GenError;
use crate::gen::SenderPlan;
use crate::gen_report::SenderReport;

/// Sleep (rather than spin) when the next paced packet is further away than this.
const SLEEP_ABOVE_NS: u64 = 200_000;

/// Where the sender threads wait for each other, so that they start sending together: a
/// barrier for `threads` threads that can be cancelled. (A `Barrier` sized for all of them
/// would hold the started ones forever if one never started.)
pub(crate) struct StartGate {
    state: Mutex<Gate>,
    decided: Condvar,
}

struct Gate {
    /// Threads that called [`StartGate::wait`] so far.
    arrived: usize,
    /// How many are to arrive.
    threads: usize,
    /// `None` until decided: `Some(true)` when the last thread arrived, `Some(false)` when
    /// cancelled first. Set once.
    go: Option<bool>,
}

impl StartGate {
    /// A gate for `threads` threads.
    pub(crate) fn new(threads: usize) -> Self {
        StartGate {
            state: Mutex::new(Gate {
                arrived: 0,
                threads,
                go: None,
            }),
            decided: Condvar::new(),
        }
    }

    /// Blocks until every thread waits here (returns `true`: go) or the gate is cancelled
    /// (returns `false`: return without sending).
    pub(crate) fn wait(&self) -> bool {
        // Nothing panics with the lock held: a poisoned lock still holds a valid state.
        let mut g = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        g.arrived += 1;
        if g.arrived >= g.threads && g.go.is_none() {
            g.go = Some(true);
            self.decided.notify_all();
        }
        let g = self
            .decided
            .wait_while(g, |g| g.go.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        g.go == Some(true)
    }

    /// Sends the threads waiting, and any later one, home: their [`StartGate::wait`]
    /// returns `false`. Nothing changes once they went.
    pub(crate) fn cancel(&self) {
        let mut g = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if g.go.is_none() {
            g.go = Some(false);
            self.decided.notify_all();
        }
    }
}

/// Pins itself, waits at `gate` for the others, then sends until `duration` is over.
/// `None`: the gate was cancelled (another sender's thread did not start), nothing sent.
pub(crate) fn send_loop(
    p: &SenderPlan,
    mut sender: Box<dyn Sender>,
    gate: &StartGate,
    duration: Duration,
) -> Option<Result<SenderReport, GenError>> {
    let pinned = p.cpu.map(|c| (c, cpu::pin_current_thread(c)));
    if !gate.wait() {
        return None;
    }
    if let Some((cpu, Err(reason))) = pinned {
        return Some(Err(GenError::Pin {
            client: p.client,
            cpu,
            reason,
        }));
    }
    Some(send(p, sender.as_mut(), duration))
}

/// Sends until `duration` is over, paced as the module documentation says.
fn send(
    p: &SenderPlan,
    sender: &mut dyn Sender,
    duration: Duration,
) -> Result<SenderReport, GenError> {
    let template = Pkt {
        len: p.len,
        client: p.client,
        flow: p.client,
        seq: 0,
        submit_ns: 0,
        depart_ns: 0,
    };
    let mut batch = [template; BATCH];
    let (mut seq, mut sent, mut released, mut errors) = (0u32, 0u64, 0u64, 0u64);
    let mut last_error: Option<String> = None;
    let ns_per_pkt = if p.rate_pps > 0.0 {
        1e9 / p.rate_pps
    } else {
        0.0
    };
    let start = clock::now_ns();
    let deadline = start + duration.as_nanos() as u64;
    let mut now = start;
    while now < deadline {
        let n = if p.rate_pps > 0.0 {
            // Packet k is due at start + k * ns_per_pkt.
            let due = ((now - start) as f64 / ns_per_pkt) as u64 + 1;
            if due <= released {
                let next = start + (released as f64 * ns_per_pkt) as u64;
                let wait = next.saturating_sub(now).min(deadline - now);
                if wait > SLEEP_ABOVE_NS {
                    std::thread::sleep(Duration::from_nanos(wait - SLEEP_ABOVE_NS / 2));
                } else {
                    std::thread::yield_now();
                }
                now = clock::now_ns();
                continue;
            }
            ((due - released) as usize).min(BATCH)
        } else {
            BATCH
        };
        for pkt in &mut batch[..n] {
            pkt.seq = seq;
            pkt.submit_ns = now;
            seq = seq.wrapping_add(1);
        }
        released += n as u64;
        let ok = match sender.send(&batch[..n]) {
            Ok(k) => k,
            Err(reason) => {
                if sent == 0 {
                    // Nothing ever went out: a configuration problem (no route, ...),
                    // not congestion.
                    return Err(GenError::FirstSend {
                        client: p.client,
                        port: p.port,
                        reason,
                    });
                }
                errors += 1;
                last_error = Some(reason.to_string());
                0
            }
        };
        if ok < n {
            // Unsent packets give their sequence numbers back: no false loss at the sink.
            seq = seq.wrapping_sub((n - ok) as u32);
        }
        sent += ok as u64;
        now = clock::now_ns();
    }
    let elapsed_s = (now - start) as f64 / 1e9;
    Ok(SenderReport {
        client: p.client,
        victim: p.victim,
        src_port: p.port,
        len: p.len,
        rate_pps: p.rate_pps,
        packets: sent,
        wire_bytes: sent * u64::from(p.len),
        pps: sent as f64 / elapsed_s,
        send_errors: errors,
        last_error,
        elapsed_s,
    })
}
