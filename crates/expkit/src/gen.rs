//! The generator: M UDP sender threads (and an optional low-rate victim).
//!
//! Sender `i` (0-based) has a socket of its own bound to source port `base + i`, so each
//! sender is one 5-tuple that a rule (`src-port`), a tc u32 filter or a flow mask can tell
//! apart. Its datagrams carry the pspat payload header ([`pspat_io::payload`]) with
//! `client = flow = i`, a per-sender sequence number, `wire_len` = the configured length,
//! and `submit_ns` = the engine clock (CLOCK_MONOTONIC) when its batch is handed to the
//! kernel, so that a receiver in another namespace of the same host can compute one-way
//! latency, loss and reordering. The victim is client `M`, from its own port.
//!
//! [`Generator::open`] checks the settings and opens every socket before any thread
//! starts, so a bad address or a port in use is reported before anything is sent;
//! [`Generator::run`] starts the threads together (each waits at a gate until all wait
//! there; if one cannot start, the gate is cancelled, the others return, and the error is
//! returned), each sends until the duration is over (see [`crate::sender`] for pacing),
//! and returns the [`GenReport`].

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use pspat_io::udp::Udp;
use pspat_io::{cpu, Backend, Sender};

use crate::error::GenError;
use crate::gen_report::GenReport;
use crate::limits;
use crate::sender::{send_loop, StartGate, ThreadFlows};
use pspat_io::cpu::CpuList;

/// The generator's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Destination address.
    pub dest: SocketAddr,
    /// Greedy sender threads (M), 1..=1024.
    pub senders: u32,
    /// Length of each greedy sender's packets on the wire, bytes (Ethernet + IPv4 + UDP
    /// headers + payload), [`pspat_io::payload::MIN_WIRE_LEN`] to
    /// [`pspat_io::payload::MAX_WIRE_LEN`].
    pub len: u64,
    /// How long to send, 10 ms to an hour.
    pub duration: Duration,
    /// Source port of sender 0; sender i uses base + i. 0: ports chosen by the kernel.
    pub src_port_base: u16,
    /// Packets per second per greedy sender, up to 1e8; 0: as fast as possible.
    pub rate_pps: f64,
    /// Packets per second of each greedy sender in turn (0: as fast as possible), instead
    /// of `rate_pps` for all: empty, or one rate per sender.
    pub rates_pps: Vec<f64>,
    /// Threads the greedy senders share, sender i in thread i mod T (each thread takes
    /// its senders in turn), up to M; 0: a thread per sender. The victim has its own.
    pub threads: u32,
    /// Packets per second of the victim sender (client M); 0: no victim.
    pub victim_rate_pps: f64,
    /// Source port of the victim; `None`: base + M (kernel-chosen with base 0).
    pub victim_port: Option<u16>,
    /// Length of the victim's packets on the wire; `None`: `len`.
    pub victim_len: Option<u64>,
    /// CPUs to pin the senders to, round-robin: sender i on the (i mod n)-th, the victim
    /// next. `None`: unpinned.
    pub cpus: Option<CpuList>,
}

impl GenConfig {
    /// One greedy sender of 1000-byte packets, as fast as it can, from port 10000, for
    /// `duration`; no victim, no pinning.
    pub fn new(dest: SocketAddr, duration: Duration) -> Self {
        GenConfig {
            dest,
            senders: 1,
            len: 1000,
            duration,
            src_port_base: 10000,
            rate_pps: 0.0,
            rates_pps: Vec::new(),
            threads: 0,
            victim_rate_pps: 0.0,
            victim_port: None,
            victim_len: None,
            cpus: None,
        }
    }

    /// Checks the settings, alone and against each other, and lists the senders: the
    /// greedy ones in order, then the victim.
    pub fn plan(&self) -> Result<Vec<SenderPlan>, GenError> {
        let m = limits::senders(self.senders)?;
        let len = limits::wire_len("--len", self.len)?;
        limits::run_time("--duration", self.duration)?;
        let rate_pps = limits::rate_pps("--rate", self.rate_pps)?;
        let rates = self
            .rates_pps
            .iter()
            .map(|&r| limits::rate_pps("--rates", r))
            .collect::<Result<Vec<f64>, _>>()?;
        if !rates.is_empty() && rates.len() != m as usize {
            return Err(GenError::RatesCount {
                rates: rates.len(),
                senders: m,
            });
        }
        let victim_rate_pps = limits::rate_pps("--victim-rate", self.victim_rate_pps)?;
        let base = self.src_port_base;
        if self.threads > m {
            return Err(GenError::Invalid(crate::error::Invalid {
                option: "--threads",
                value: self.threads.to_string(),
                reason: format!("more than the {m} senders"),
            }));
        }
        // greedy sender i runs in thread i mod t, the victim in thread t; a thread's CPU
        // is the (thread mod n)-th of the list
        let t = if self.threads == 0 { m } else { self.threads };
        let cpu_of = |i: u32| self.cpus.as_ref().and_then(|c| c.of(i as usize));
        if base != 0 && u32::from(base) + m - 1 > 65535 {
            return Err(GenError::PortsPastEnd { base, senders: m });
        }
        let mut plans: Vec<SenderPlan> = (0..m)
            .map(|i| SenderPlan {
                client: i,
                victim: false,
                port: if base == 0 { 0 } else { base + i as u16 },
                len,
                rate_pps: rates.get(i as usize).copied().unwrap_or(rate_pps),
                thread: i % t,
                cpu: cpu_of(i % t),
            })
            .collect();
        if victim_rate_pps > 0.0 {
            let port = match self.victim_port {
                Some(p) => p,
                None if base == 0 => 0,
                None => {
                    let p = u32::from(base) + m;
                    u16::try_from(p).map_err(|_| GenError::VictimPortPastEnd {
                        senders: m,
                        port: p,
                    })?
                }
            };
            if port != 0 && plans.iter().any(|p| p.port == port) {
                return Err(GenError::VictimPortTaken {
                    port,
                    first: base,
                    last: u32::from(base) + m - 1,
                });
            }
            let len = match self.victim_len {
                Some(l) => limits::wire_len("--victim-len", l)?,
                None => len,
            };
            plans.push(SenderPlan {
                client: m,
                victim: true,
                port,
                len,
                rate_pps: victim_rate_pps,
                thread: t,
                cpu: cpu_of(t),
            });
        } else if self.victim_port.is_some() || self.victim_len.is_some() {
            return Err(GenError::NoVictim);
        }
        Ok(plans)
    }
}

/// One sender's settings, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct SenderPlan {
    /// The payload's client (and flow) number: its index, M for the victim.
    pub client: u32,
    /// `true` for the victim.
    pub victim: bool,
    /// Source port (0: the kernel's choice).
    pub port: u16,
    /// Wire length of its packets.
    pub len: u32,
    /// Paced rate, packets/s (0: as fast as possible).
    pub rate_pps: f64,
    /// The thread it runs in (of those the generator starts, from 0).
    pub thread: u32,
    /// CPU its thread pins itself to.
    pub cpu: Option<usize>,
}

impl SenderPlan {
    /// How messages name it: `sender 3`, `the victim`.
    fn what(&self) -> String {
        if self.victim {
            "the victim".to_owned()
        } else {
            format!("sender {}", self.client)
        }
    }

    /// Its thread's name: `udpgen-3`, `udpgen-victim`.
    fn thread_name(&self) -> String {
        if self.victim {
            "udpgen-victim".to_owned()
        } else {
            format!("udpgen-{}", self.thread)
        }
    }
}

/// A generator with its sockets open, ready to send.
pub struct Generator {
    config: GenConfig,
    plans: Vec<SenderPlan>,
    senders: Vec<Box<dyn Sender>>,
}

impl Generator {
    /// Checks `config` (and that its CPUs are ones this process may use) and opens every
    /// sender's socket.
    pub fn open(config: GenConfig) -> Result<Self, GenError> {
        let plans = config.plan()?;
        if let Some(CpuList(cpus)) = &config.cpus {
            cpu::check_allowed(cpus).map_err(GenError::CpuNotAllowed)?;
        }
        let mut senders = Vec::with_capacity(plans.len());
        for p in &plans {
            let bind: SocketAddr = if config.dest.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, p.port).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, p.port).into()
            };
            let udp = Udp {
                dest: config.dest,
                bind: Some(bind),
            };
            let sender = udp
                .open(p.client as usize)
                .map_err(|source| GenError::Open {
                    what: p.what(),
                    port: p.port,
                    source,
                })?;
            senders.push(sender);
        }
        Ok(Generator {
            config,
            plans,
            senders,
        })
    }

    /// The senders it will run, greedy ones first.
    pub fn plans(&self) -> &[SenderPlan] {
        &self.plans
    }

    /// Runs every sender for the configured duration, starting them together.
    pub fn run(self) -> Result<GenReport, GenError> {
        let Generator {
            config,
            plans,
            senders,
        } = self;
        let duration = config.duration;
        let mut threads: BTreeMap<u32, ThreadFlows> = BTreeMap::new();
        for (p, s) in plans.into_iter().zip(senders) {
            threads.entry(p.thread).or_default().push((p, s));
        }
        let handles = start_together(threads.into_values(), |flows, gate| {
            std::thread::Builder::new()
                .name(flows[0].0.thread_name())
                .spawn(move || send_loop(flows, &gate, duration))
        })
        .map_err(GenError::Spawn)?;
        let mut flows = Vec::new();
        for h in handles {
            let sent = h.join().map_err(|_| GenError::Panicked)?;
            flows.extend(sent.expect("every thread started: the gate was not cancelled")?);
        }
        // greedy senders in order, then the victim
        flows.sort_by_key(|f| (f.victim, f.client));
        Ok(GenReport::new(
            config.dest.to_string(),
            config.senders,
            flows,
        ))
    }
}

/// Starts a thread per job with `spawn`, each to wait at the gate it is given until all
/// wait there, as at a barrier. If one does not start, the gate is cancelled instead: the
/// started ones return from [`StartGate::wait`] with `false`, are joined, and the error is
/// returned.
fn start_together<J, T>(
    jobs: impl ExactSizeIterator<Item = J>,
    mut spawn: impl FnMut(J, Arc<StartGate>) -> io::Result<JoinHandle<T>>,
) -> io::Result<Vec<JoinHandle<T>>> {
    let gate = Arc::new(StartGate::new(jobs.len()));
    let mut handles = Vec::with_capacity(jobs.len());
    for job in jobs {
        match spawn(job, Arc::clone(&gate)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                gate.cancel();
                for h in handles {
                    // A panic there is no more than the error already being returned.
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    Ok(handles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn config() -> GenConfig {
        GenConfig::new("127.0.0.1:9".parse().unwrap(), Duration::from_secs(1))
    }

    #[test]
    fn senders_get_consecutive_ports_and_the_victim_the_next() {
        let mut c = config();
        c.senders = 3;
        c.victim_rate_pps = 100.0;
        c.victim_len = Some(200);
        c.cpus = Some(CpuList(vec![0, 1]));
        let p = c.plan().unwrap();
        let ports: Vec<u16> = p.iter().map(|p| p.port).collect();
        assert_eq!(ports, [10000, 10001, 10002, 10003]);
        assert_eq!((p[3].client, p[3].victim, p[3].len), (3, true, 200));
        assert_eq!((p[0].len, p[3].rate_pps), (1000, 100.0));
        let cpus: Vec<Option<usize>> = p.iter().map(|p| p.cpu).collect();
        assert_eq!(cpus, [Some(0), Some(1), Some(0), Some(1)]);
        c.src_port_base = 0;
        assert!(c.plan().unwrap().iter().all(|p| p.port == 0));
        // A rate per sender, the victim's its own.
        c.rates_pps = vec![10.0, 0.0, 30.0];
        let rates: Vec<f64> = c.plan().unwrap().iter().map(|p| p.rate_pps).collect();
        assert_eq!(rates, [10.0, 0.0, 30.0, 100.0]);
        // Threads: a thread per sender, or senders sharing T, the victim apart.
        let threads = |c: &GenConfig| -> Vec<(u32, Option<usize>)> {
            c.plan()
                .unwrap()
                .iter()
                .map(|p| (p.thread, p.cpu))
                .collect()
        };
        assert_eq!(
            threads(&c),
            [(0, Some(0)), (1, Some(1)), (2, Some(0)), (3, Some(1))]
        );
        c.threads = 2;
        assert_eq!(
            threads(&c),
            [(0, Some(0)), (1, Some(1)), (0, Some(0)), (2, Some(0))]
        );
        c.threads = 4;
        let e = c.plan().unwrap_err();
        assert!(
            e.is_usage() && e.to_string() == "--threads 4: more than the 3 senders",
            "{e}"
        );
    }

    #[test]
    fn conflicting_settings_are_refused() {
        let mut c = config();
        c.senders = 8;
        c.src_port_base = 65530;
        let e = c.plan().unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("65535"), "{e}");
        c.senders = 6;
        c.victim_rate_pps = 1.0;
        let e = c.plan().unwrap_err().to_string();
        assert!(e.contains("give --victim-port"), "{e}");
        c.victim_port = Some(65532);
        let e = c.plan().unwrap_err().to_string();
        assert!(
            e.contains("one of the senders' ports (65530..=65535)"),
            "{e}"
        );
        let mut c = config();
        c.victim_port = Some(20000);
        assert!(matches!(c.plan(), Err(GenError::NoVictim)));
        c.victim_rate_pps = 10.0;
        c.victim_len = Some(60);
        let e = c.plan().unwrap_err().to_string();
        assert!(e.starts_with("--victim-len 60: outside 82..="), "{e}");
        let mut c = config();
        c.senders = 2;
        c.rates_pps = vec![1.0];
        let e = c.plan().unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert_eq!(e.to_string(), "--rates: 1 rates for 2 senders");
        c.rates_pps = vec![1.0, -1.0];
        assert!(c.plan().unwrap_err().to_string().starts_with("--rates -1"));
        let mut c = config();
        c.senders = 0;
        assert!(c.plan().unwrap_err().to_string().contains("--senders 0"));
    }

    /// Spawns a thread that waits at the gate and reports `(job, go)` on `tx`.
    fn waiter(
        i: u32,
        gate: Arc<StartGate>,
        tx: &mpsc::Sender<(u32, bool)>,
    ) -> io::Result<JoinHandle<()>> {
        let tx = tx.clone();
        std::thread::Builder::new().spawn(move || {
            let go = gate.wait();
            tx.send((i, go)).unwrap();
        })
    }

    #[test]
    fn threads_wait_until_all_have_started_then_go_together() {
        let (tx, rx) = mpsc::channel();
        let handles = start_together(0..3, |i, gate| {
            if i == 2 {
                // The first two have had time to pass a gate that did not hold them.
                std::thread::sleep(Duration::from_millis(50));
                assert!(rx.try_recv().is_err(), "a thread went before all waited");
            }
            waiter(i, gate, &tx)
        })
        .unwrap();
        for h in handles {
            h.join().unwrap();
        }
        let mut went: Vec<(u32, bool)> = rx.try_iter().collect();
        went.sort_unstable();
        assert_eq!(went, [(0, true), (1, true), (2, true)]);
    }

    #[test]
    fn a_thread_that_does_not_start_sends_the_started_ones_home() {
        // In a thread of its own: with the started threads left waiting (a barrier for
        // all four), joining them would hang; the test fails after 10 s instead.
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let (tx, rx) = mpsc::channel();
            let r = start_together(0..4, |i, gate| {
                if i == 2 {
                    return Err(io::Error::other("no thread for job 2"));
                }
                waiter(i, gate, &tx)
            });
            let r = r.map(|h| h.len()).map_err(|e| e.to_string());
            let mut went: Vec<(u32, bool)> = rx.try_iter().collect();
            went.sort_unstable();
            done.send((r, went)).unwrap();
        });
        let (r, went) = result
            .recv_timeout(Duration::from_secs(10))
            .expect("the started threads returned and were joined");
        assert_eq!(r, Err("no thread for job 2".to_owned()));
        // Jobs 0 and 1 had started, were sent home and returned; 3 never started.
        assert_eq!(went, [(0, false), (1, false)]);
    }
}
