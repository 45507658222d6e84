//! One sender thread of the generator: pacing and counting, for each of its senders.
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
//!
//! A thread serves one sender, or several (`--threads`): it takes them in turn, each
//! sending what its own pacing has due (a batch, unpaced), and sleeps only when none has
//! anything due.

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

/// The senders one thread serves, each with its socket.
pub(crate) type ThreadFlows = Vec<(SenderPlan, Box<dyn Sender>)>;

/// Pins itself (to the first plan's CPU), waits at `gate` for the others, then sends for
/// each of `flows` until `duration` is over, taking them in turn: each due batch of one,
/// then the next's. `None`: the gate was cancelled (another thread did not start),
/// nothing sent.
pub(crate) fn send_loop(
    flows: ThreadFlows,
    gate: &StartGate,
    duration: Duration,
) -> Option<Result<Vec<SenderReport>, GenError>> {
    let pinned = flows
        .first()
        .and_then(|(p, _)| p.cpu)
        .map(|c| (c, cpu::pin_current_thread(c)));
    if !gate.wait() {
        return None;
    }
    if let Some((cpu, Err(reason))) = pinned {
        return Some(Err(GenError::Pin {
            client: flows[0].0.client,
            cpu,
            reason,
        }));
    }
    Some(send(flows, duration))
}

/// One sender's state in its thread.
struct Flow {
    p: SenderPlan,
    sender: Box<dyn Sender>,
    batch: [Pkt; BATCH],
    /// Its next sequence number.
    seq: u32,
    /// Packets the kernel took.
    sent: u64,
    /// Packets released by the pacing so far (sent or refused).
    released: u64,
    errors: u64,
    last_error: Option<String>,
    /// ns between its packets; 0: unpaced.
    ns_per_pkt: f64,
}

impl Flow {
    fn new(p: SenderPlan, sender: Box<dyn Sender>) -> Self {
        let template = Pkt {
            len: p.len,
            client: p.client,
            flow: p.client,
            seq: 0,
            submit_ns: 0,
            depart_ns: 0,
        };
        let ns_per_pkt = if p.rate_pps > 0.0 {
            1e9 / p.rate_pps
        } else {
            0.0
        };
        Flow {
            p,
            sender,
            batch: [template; BATCH],
            seq: 0,
            sent: 0,
            released: 0,
            errors: 0,
            last_error: None,
            ns_per_pkt,
        }
    }

    /// How many packets are due at `now` (a run started at `start`), at most a batch; 0
    /// and when the next one is due when none is.
    fn due(&self, start: u64, now: u64) -> (usize, u64) {
        if self.ns_per_pkt == 0.0 {
            return (BATCH, now);
        }
        // Packet k is due at start + k * ns_per_pkt.
        let due = ((now - start) as f64 / self.ns_per_pkt) as u64 + 1;
        if due <= self.released {
            let next = start + (self.released as f64 * self.ns_per_pkt) as u64;
            return (0, next);
        }
        (((due - self.released) as usize).min(BATCH), now)
    }

    /// Sends `n` packets stamped `now`.
    fn send(&mut self, n: usize, now: u64) -> Result<(), GenError> {
        for pkt in &mut self.batch[..n] {
            pkt.seq = self.seq;
            pkt.submit_ns = now;
            self.seq = self.seq.wrapping_add(1);
        }
        self.released += n as u64;
        let ok = match self.sender.send(&self.batch[..n]) {
            Ok(k) => k,
            Err(reason) => {
                if self.sent == 0 {
                    // Nothing ever went out: a configuration problem (no route, ...),
                    // not congestion.
                    return Err(GenError::FirstSend {
                        client: self.p.client,
                        port: self.p.port,
                        reason,
                    });
                }
                self.errors += 1;
                self.last_error = Some(reason.to_string());
                0
            }
        };
        if ok < n {
            // Unsent packets give their sequence numbers back: no false loss at the sink.
            self.seq = self.seq.wrapping_sub((n - ok) as u32);
        }
        self.sent += ok as u64;
        Ok(())
    }

    fn report(self, elapsed_s: f64) -> SenderReport {
        SenderReport {
            client: self.p.client,
            victim: self.p.victim,
            src_port: self.p.port,
            len: self.p.len,
            rate_pps: self.p.rate_pps,
            packets: self.sent,
            wire_bytes: self.sent * u64::from(self.p.len),
            pps: self.sent as f64 / elapsed_s,
            send_errors: self.errors,
            last_error: self.last_error,
            elapsed_s,
        }
    }
}

/// Sends for every flow until `duration` is over, paced as the module documentation says.
fn send(flows: ThreadFlows, duration: Duration) -> Result<Vec<SenderReport>, GenError> {
    let mut flows: Vec<Flow> = flows.into_iter().map(|(p, s)| Flow::new(p, s)).collect();
    let start = clock::now_ns();
    let deadline = start + duration.as_nanos() as u64;
    let mut now = start;
    while now < deadline {
        let mut next = u64::MAX;
        let mut sent_any = false;
        for f in &mut flows {
            let (n, at) = f.due(start, now);
            if n == 0 {
                next = next.min(at);
                continue;
            }
            f.send(n, now)?;
            sent_any = true;
            now = clock::now_ns();
        }
        if !sent_any {
            let wait = next.saturating_sub(now).min(deadline.saturating_sub(now));
            if wait > SLEEP_ABOVE_NS {
                std::thread::sleep(Duration::from_nanos(wait - SLEEP_ABOVE_NS / 2));
            } else {
                std::thread::yield_now();
            }
            now = clock::now_ns();
        }
    }
    let elapsed_s = (now - start) as f64 / 1e9;
    Ok(flows.into_iter().map(|f| f.report(elapsed_s)).collect())
}
