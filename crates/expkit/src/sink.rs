//! The sink: the receiving end of the kit. Counts pspat payloads per client (see
//! [`crate::client`]) and records each client's one-way latency, `receive time -
//! submit_ns`, both on CLOCK_MONOTONIC (one clock per host, so a sender in another network
//! namespace of the same host stamps on the same clock).
//!
//! Receiving: the pspat-io [`Receiver`] (recvmmsg, [`BATCH`] datagrams per call, a 4 MiB
//! receive buffer if `net.core.rmem_max` allows). With busy polling the socket is
//! non-blocking and the thread spins on it, so a datagram is taken as soon as it is queued
//! rather than after a wake-up (which costs tens of µs on a VM); pin it with
//! [`SinkConfig::cpu`]. On a CPU it does not have to itself, a thread that always spins is
//! a CPU hog to the Linux scheduler and waits out other threads' whole time slices
//! (milliseconds) while datagrams queue; [`SinkConfig::spin`] spins only that long after
//! each datagram and then sleeps in recvmmsg, so that the kernel wakes it (and, as a
//! sleeper, runs it promptly) when the next comes. The receive time is read once per call,
//! after recvmmsg returns, and given to every datagram of the batch.
//!
//! Measurement window: datagrams that arrive before `first datagram + warmup` only set up
//! each client's sequence tracking; the window then runs for `measure` (those after it
//! are received and not counted), or to the last datagram with a `measure` of zero. Rates
//! are over that window. The sink stops after `duration` from the start of
//! [`Sink::run`], or earlier once `idle` passes with no datagram after the first one.
//!
//! With [`SinkConfig::trace`] the report also lists every datagram counted (its arrival
//! time from the start of the window, its client, its length on the wire), in order of
//! receipt: what a class's throughput over any interval, and its bursts, are measured
//! from (`crate::meter`). The arrival time is then the kernel's receive stamp
//! (SO_TIMESTAMPNS, [`Receiver::kernel_timestamps`]): on a veth pair, when the shaper's
//! side handed the frame over, before it waited in the receiving host's backlog, socket
//! queue and the sink's wake-up (which would make datagrams look bunched up).

use std::net::SocketAddr;
use std::time::Duration;

use pspat_io::udp::{Received, Receiver, BATCH};
use pspat_io::{clock, cpu};

use crate::client::ClientState;
use crate::error::SinkError;
use crate::limits;
use crate::sink_report::{rate, Arrival, ClientReport, SinkReport};

/// Client numbers above this are counted in `other_packets` only (a garbled header must
/// not make the sink allocate per-client state for 4 billion clients).
pub const MAX_CLIENTS: u32 = 4096;
/// Wait per blocking receive call without busy polling (the loop checks its deadlines
/// between calls).
const BLOCKING_WAIT: Duration = Duration::from_millis(5);

/// The sink's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkConfig {
    /// Address to receive on (port 0: the kernel picks one, see [`Sink::local_addr`]).
    pub bind: SocketAddr,
    /// Longest time to run, 10 ms to an hour.
    pub duration: Duration,
    /// Time after the first datagram before counting starts, up to an hour.
    pub warmup: Duration,
    /// Length of the counting window from the end of the warm-up, up to an hour; datagrams
    /// after it are received but not counted (so that the drain of queues after the
    /// senders stop does not count). Zero: count to the end.
    pub measure: Duration,
    /// Stop once this long passes without a datagram (after the first), up to an hour;
    /// zero: never.
    pub idle: Duration,
    /// Spin on a non-blocking socket instead of sleeping in recvmmsg.
    pub busy_poll: bool,
    /// With `busy_poll`: spin at most this long after the last datagram, then sleep in
    /// recvmmsg until the next one; zero: spin all the time.
    pub spin: Duration,
    /// Pin the receiving thread (the one that calls [`Sink::bind`] and [`Sink::run`]) to
    /// this CPU.
    pub cpu: Option<usize>,
    /// List every datagram counted in the report ([`SinkReport::trace`]), with the
    /// kernel's receive stamp as its arrival time.
    pub trace: bool,
}

impl SinkConfig {
    /// Receives on `bind` for at most `duration`: no warm-up, no window, no idle stop,
    /// blocking receives, unpinned.
    pub fn new(bind: SocketAddr, duration: Duration) -> Self {
        SinkConfig {
            bind,
            duration,
            warmup: Duration::ZERO,
            measure: Duration::ZERO,
            idle: Duration::ZERO,
            busy_poll: false,
            spin: Duration::ZERO,
            cpu: None,
            trace: false,
        }
    }

    /// Checks the settings, alone and against each other.
    pub fn validate(&self) -> Result<(), SinkError> {
        limits::run_time("--duration", self.duration)?;
        limits::time("--warmup", self.warmup)?;
        limits::time("--measure", self.measure)?;
        limits::time("--idle", self.idle)?;
        if !self.spin.is_zero() && !self.busy_poll {
            return Err(SinkError::SpinWithoutBusyPoll);
        }
        Ok(())
    }
}

/// A sink with its socket bound, ready to receive.
pub struct Sink {
    config: SinkConfig,
    rx: Receiver,
}

impl Sink {
    /// Checks `config`, pins the calling thread if it asks for a CPU (the receive loop runs
    /// on the thread that calls [`Sink::run`]: call both on one thread), and binds the
    /// socket.
    pub fn bind(config: SinkConfig) -> Result<Self, SinkError> {
        config.validate()?;
        if let Some(cpu) = config.cpu {
            cpu::pin_current_thread(cpu).map_err(|reason| SinkError::Pin {
                cpu,
                reason,
                allowed: cpu::allowed_cpus(),
            })?;
        }
        let mut rx = Receiver::bind(config.bind)?;
        if config.trace {
            rx.kernel_timestamps()?;
        }
        if config.busy_poll {
            rx.set_nonblocking(true)?;
        }
        Ok(Sink { config, rx })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.rx.local_addr()
    }

    /// Receives until the duration is over or the sender has been idle long enough, and
    /// reports what each client's datagrams looked like in the window.
    pub fn run(self) -> Result<SinkReport, SinkError> {
        let Sink { config: c, mut rx } = self;
        let start = clock::now_ns();
        let end = start + c.duration.as_nanos() as u64;
        let warmup_ns = c.warmup.as_nanos() as u64;
        let idle_ns = c.idle.as_nanos() as u64;
        let measure_ns = c.measure.as_nanos() as u64;
        let spin_ns = c.spin.as_nanos() as u64;
        let mut clients: Vec<Option<ClientState>> = Vec::new();
        let mut batch: Vec<Received> = Vec::with_capacity(BATCH);
        let (mut received_total, mut warmup_packets, mut other) = (0u64, 0u64, 0u64);
        let mut first: Option<u64> = None;
        let mut trace: Vec<Arrival> = Vec::new();
        let (mut last, mut last_counted) = (0u64, 0u64);
        let mut spinning = c.busy_poll;
        loop {
            batch.clear();
            let n = rx.recv_batch(&mut batch, BLOCKING_WAIT)?;
            let now = clock::now_ns();
            if n == 0 {
                let idle = idle_ns > 0 && first.is_some() && now - last >= idle_ns;
                if now >= end || idle {
                    break;
                }
                if spinning {
                    if spin_ns > 0 && now - last.max(start) >= spin_ns {
                        rx.set_nonblocking(false)?;
                        spinning = false;
                    }
                    std::hint::spin_loop();
                }
                continue;
            }
            if c.busy_poll && !spinning {
                rx.set_nonblocking(true)?;
                spinning = true;
            }
            received_total += n as u64;
            last = now;
            let t0 = *first.get_or_insert(now);
            let count =
                now >= t0 + warmup_ns && (measure_ns == 0 || now < t0 + warmup_ns + measure_ns);
            for r in &batch {
                let client = r.header.client;
                if client >= MAX_CLIENTS {
                    other += 1;
                    continue;
                }
                let i = client as usize;
                if clients.len() <= i {
                    clients.resize_with(i + 1, || None);
                }
                clients[i]
                    .get_or_insert_with(ClientState::new)
                    .take(r, count);
                if count && c.trace {
                    trace.push(Arrival {
                        t_ns: r.kernel_ns.unwrap_or(now).saturating_sub(t0 + warmup_ns),
                        client,
                        len: r.header.wire_len,
                    });
                }
            }
            if count {
                last_counted = now;
            } else if now < t0 + warmup_ns {
                warmup_packets += batch.len() as u64;
            }
            if now >= end {
                break;
            }
        }
        // The window ends at its set length if datagrams kept coming past it, else at the
        // last one counted.
        let window_s = match first {
            Some(t0) if last_counted > t0 + warmup_ns => {
                let from = t0 + warmup_ns;
                let to = if measure_ns > 0 && last >= from + measure_ns {
                    from + measure_ns
                } else {
                    last_counted
                };
                (to - from) as f64 / 1e9
            }
            _ => 0.0,
        };
        let clients: Vec<ClientReport> = clients
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.packets() > 0).map(|s| (i, s)))
            .map(|(i, s)| s.report(i as u32, window_s))
            .collect();
        let total_packets = clients.iter().map(|c| c.packets).sum();
        Ok(SinkReport {
            bind: rx.local_addr().to_string(),
            busy_poll: c.busy_poll,
            warmup_s: c.warmup.as_secs_f64(),
            measure_s: c.measure.as_secs_f64(),
            window_s,
            received_total,
            warmup_packets,
            garbled: rx.garbled(),
            other_packets: other,
            recv_buffer: rx.recv_buffer(),
            total_pps: rate(total_packets, window_s),
            total_packets,
            clients,
            trace,
        })
    }
}
