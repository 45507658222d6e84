//! [`Shaper`]: building the shaper (sockets, frame pool, engine, threads), observing it,
//! changing its configuration while it runs, and stopping it with a final account.
//!
//! Threads: `pspat-rx{k}` (one per receiving thread, each a PSPAT client), the engine's
//! arbiter (and dispatchers, with that hand-off), `pspat-reverse` (unless the reverse path
//! is off). The caller's thread only controls: snapshots, reloads and the stop.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pspat_config::classify::Interfaces;
use pspat_engine::reload::{Reload, Reloader};
use pspat_engine::{Change, ClientConfig, Engine, EngineConfig, Handoff};
use pspat_io::afpacket::vnet::{self, VNET_HDR_LEN};
use pspat_io::afpacket::{Fanout, FanoutMode, FrameTx, RxOptions, RxRing, TxOptions, TxSocket};
use pspat_io::link::LinkEvents;
use pspat_mailbox::FramePool;

use crate::config::ShaperConfig;
use crate::counters::{EngineTotals, ReverseCounters, ReverseTotals, RxCounters, RxTotals};
use crate::error::ShaperError;
use crate::link::{LinkTotals, LinkWatch};
use crate::report::Report;
use crate::reverse::{reverse, ReverseLinks};
use crate::rx::{Forwarder, Out, Reopen};

/// How the frames' TCP/UDP checksums cross the shaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumOffload {
    /// In the offload state they arrived in, in a virtio-net header before each frame on
    /// both sockets (`PACKET_VNET_HDR`, Linux 5.1 and later): a partial checksum stays
    /// partial, as across the kernel's bridge.
    PassedThrough,
    /// Partial checksums are finished by the receiving thread (`sw_checksum`, or a kernel
    /// without the header).
    Software,
}

impl ChecksumOffload {
    /// Its name in the JSON report: `passed_through` or `software`.
    pub fn key(self) -> &'static str {
        match self {
            ChecksumOffload::PassedThrough => "passed_through",
            ChecksumOffload::Software => "software",
        }
    }
}

impl fmt::Display for ChecksumOffload {
    /// `passed through` or `finished in software`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChecksumOffload::PassedThrough => "passed through",
            ChecksumOffload::Software => "finished in software",
        })
    }
}

/// A flowset whose `max-len` was below the longest frame the output sends, raised to it
/// (frames are scheduled whole, and the configuration's default, 1500, is an IP packet's
/// MTU, not a frame's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaxLenRaised {
    /// The flowset.
    pub flowset: u32,
    /// Its `max-len` in the configuration.
    pub from: u32,
    /// What it became: the longest frame, bytes.
    pub to: u32,
    /// The output interface.
    pub output: String,
}

impl fmt::Display for MaxLenRaised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "flowset {}: max-len {} raised to {}, the longest frame {} sends (frames are \
             scheduled whole, Ethernet header included)",
            self.flowset, self.from, self.to, self.output
        )
    }
}

/// The shaper's counters at one instant.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The engine's counters.
    pub engine: pspat_engine::EngineSnapshot,
    /// The receiving threads' counters, summed.
    pub rx: RxTotals,
    /// The reverse path's counters.
    pub reverse: ReverseTotals,
    /// Per scheduler, instance and queue (`None` if the arbiter did not answer).
    pub dummynet: Option<pspat_engine::DummynetStats>,
    /// The input's and the output's faults.
    pub links: Vec<LinkTotals>,
}

/// A running shaper; see the crate documentation. Dropping it stops it (without a report).
pub struct Shaper {
    config: ShaperConfig,
    /// `Some` until stopped.
    engine: Option<Engine>,
    rx_threads: Vec<JoinHandle<Option<String>>>,
    reverse_thread: Option<JoinHandle<Option<String>>>,
    rx: Vec<Arc<RxCounters>>,
    reverse: Arc<ReverseCounters>,
    /// Set once, by `stop` or `drop`; read by the receiving and reverse threads.
    stop: Arc<AtomicBool>,
    reloader: Reloader,
    max_frame: u32,
    checksums: ChecksumOffload,
    raised: Vec<MaxLenRaised>,
    started: Instant,
    /// The engine's counters when it started, for the report's rates.
    first: EngineTotals,
    links: Links,
}

/// The two interfaces' fault watches, shared with the threads that use them.
struct Links {
    input: Arc<LinkWatch>,
    output: Arc<LinkWatch>,
}

impl Links {
    fn totals(&self) -> Vec<LinkTotals> {
        vec![self.input.totals(), self.output.totals()]
    }
}

impl Shaper {
    /// Checks `config`, reads its configuration file, opens the sockets (so a missing
    /// capability or interface is reported before anything runs), starts the engine and
    /// the threads. Returns when frames are being shaped.
    pub fn start(config: ShaperConfig) -> Result<Shaper, ShaperError> {
        config.validate()?;
        let mut rules =
            pspat_config::parse_file(&config.config).map_err(|source| ShaperError::Config {
                path: config.config.clone(),
                source,
            })?;
        // The frames' offload state passes through as a virtio-net header in front of each
        // (see pspat_io::afpacket::vnet), or partial checksums are finished in software.
        let vnet = !config.sw_checksum && vnet::rx_ring_supported();
        let tx_opts = TxOptions {
            qdisc_bypass: config.qdisc_bypass,
            vnet_hdr: vnet,
            ..TxOptions::default()
        };
        let probe = TxSocket::open(&config.output, &tx_opts)
            .map_err(ShaperError::socket("opening --out"))?;
        let mtu = probe.mtu().map_err(ShaperError::socket(format!(
            "reading the MTU of {}",
            config.output
        )))? as usize;
        // Ethernet header and one 802.1Q tag on top of the MTU: the longest frame the
        // kernel sends, 4 bytes more than it sends without that tag outermost (image.rs).
        let max_frame = mtu + 18;
        let group = (std::process::id() & 0xffff) as u16;
        let rx_opts = RxOptions {
            mode: config.rx_mode,
            block_count: config.ring_blocks,
            block_size: config.ring_block_kib * 1024,
            frame_size: (max_frame + 128).next_power_of_two().max(2048),
            fanout: (config.rx_threads > 1).then_some(Fanout {
                group,
                mode: FanoutMode::Hash,
            }),
            vnet_hdr: vnet,
            ..RxOptions::default()
        };
        let mut rings = Vec::with_capacity(config.rx_threads);
        for _ in 0..config.rx_threads {
            rings.push(
                RxRing::open(&config.input, &rx_opts)
                    .map_err(ShaperError::socket("opening --in"))?,
            );
        }
        let links = Links {
            input: LinkWatch::new("input", &config.input),
            output: LinkWatch::new("output", &config.output),
        };
        let reverse_path = if config.reverse {
            let opts = RxOptions {
                vnet_hdr: vnet,
                ..RxOptions::default()
            };
            let ring = RxRing::open(&config.output, &opts)
                .map_err(ShaperError::socket("opening --out for the reverse path"))?;
            let tx = TxSocket::open(&config.input, &tx_opts)
                .map_err(ShaperError::socket("opening --in for the reverse path"))?;
            let rl = ReverseLinks {
                output: Arc::clone(&links.output),
                input: Arc::clone(&links.input),
                rx: opts,
                tx: tx_opts,
                vnet,
                give_up: config.link_wait,
            };
            Some((ring, tx, rl))
        } else {
            None
        };
        // Names differ (validate checked) but may be one interface's name and altname.
        if rings[0].ifindex() == probe.ifindex() {
            return Err(ShaperError::SameIndex {
                input: config.input.clone(),
                output: config.output.clone(),
                index: probe.ifindex(),
            });
        }
        drop(probe);
        let raised = fit_frames(&mut rules, max_frame as u32, &config.output);

        let mut cfg = EngineConfig::new(
            "fifo",
            Vec::new(),
            vec![ClientConfig::default(); config.rx_threads],
        );
        cfg.handoff = config.handoff;
        cfg.mailbox_entries = config.mailbox;
        cfg.arbiter_cpu = config.arbiter_cpu;
        cfg.link_spin_ns = u64::try_from(config.link_spin.as_nanos()).unwrap_or(u64::MAX);
        cfg.max_lag_ns = u64::try_from(config.max_lag.as_nanos()).unwrap_or(u64::MAX);
        cfg.arbiter_timer_slack_ns = Some(1_000);
        cfg.dummynet = Some(Arc::new(rules));
        // The rules' `recv`, `xmit` and `via` see frames received on the input and sent
        // on the output.
        cfg.interfaces = Interfaces::between(&config.input, &config.output);
        // A slot holds what the output socket sends: the virtio-net header, then the frame.
        let hdr = if vnet { VNET_HDR_LEN } else { 0 };
        let slots = pool_slots(&cfg);
        let pool = FramePool::new(config.rx_threads, slots, hdr + max_frame.max(64));
        let backend = FrameTx::new(Arc::clone(&pool), &config.output, tx_opts)
            .with_link_events(Arc::clone(&links.output) as Arc<dyn LinkEvents>);
        let (engine, clients) =
            Engine::start(&cfg, Arc::new(backend)).map_err(ShaperError::Engine)?;

        let mut reloader = Reloader::new(&config.config);
        reloader.allow_empty = config.allow_empty_reload;
        let frame_max = max_frame as u32;
        let output = config.output.clone();
        reloader.adjust = Some(Box::new(move |c| {
            fit_frames(c, frame_max, &output);
        }));
        // From here on, an early return drops `shaper`, which stops what was started.
        let mut shaper = Shaper {
            engine: Some(engine),
            rx_threads: Vec::with_capacity(config.rx_threads),
            reverse_thread: None,
            rx: (0..config.rx_threads).map(|_| Arc::default()).collect(),
            reverse: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            reloader,
            max_frame: frame_max,
            checksums: if vnet {
                ChecksumOffload::PassedThrough
            } else {
                ChecksumOffload::Software
            },
            raised,
            started: Instant::now(),
            first: EngineTotals::default(),
            links,
            config,
        };
        for (k, (client, ring)) in clients.into_iter().zip(rings).enumerate() {
            let fw = Forwarder {
                ring,
                frames: FramePool::writer(&pool, client.id()),
                client,
                counters: Arc::clone(&shaper.rx[k]),
                out: Out {
                    max_frame,
                    dir: shaper.config.dir,
                    vnet,
                },
                link: Arc::clone(&shaper.links.input),
                reopen: Reopen {
                    opts: rx_opts,
                    give_up: shaper.config.link_wait,
                },
            };
            let stop = Arc::clone(&shaper.stop);
            let cpus = &shaper.config.rx_cpus;
            let cpu = (!cpus.is_empty()).then(|| cpus[k % cpus.len()]);
            let thread = std::thread::Builder::new()
                .name(format!("pspat-rx{k}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if let Err(e) = pspat_io::cpu::pin_current_thread(cpu) {
                            return Some(format!("pinning to CPU {cpu}: {e}"));
                        }
                    }
                    fw.run(&stop)
                })
                .map_err(|source| ShaperError::Spawn {
                    what: "starting a receiving thread",
                    source,
                })?;
            shaper.rx_threads.push(thread);
        }
        if let Some((ring, tx, rl)) = reverse_path {
            let (stop, c) = (Arc::clone(&shaper.stop), Arc::clone(&shaper.reverse));
            let thread = std::thread::Builder::new()
                .name("pspat-reverse".into())
                .spawn(move || reverse(ring, tx, rl, &stop, &c))
                .map_err(|source| ShaperError::Spawn {
                    what: "starting the reverse thread",
                    source,
                })?;
            shaper.reverse_thread = Some(thread);
        }
        shaper.started = Instant::now();
        shaper.first = EngineTotals::of(&shaper.engine().snapshot());
        Ok(shaper)
    }

    fn engine(&self) -> &Engine {
        self.engine
            .as_ref()
            .expect("the engine runs until `stop` takes the shaper")
    }

    /// What it was started with.
    pub fn config(&self) -> &ShaperConfig {
        &self.config
    }

    /// How checksums cross it.
    pub fn checksums(&self) -> ChecksumOffload {
        self.checksums
    }

    /// The longest frame the output sends (its MTU, an Ethernet header and an 802.1Q
    /// tag), bytes. A frame without an 802.1Q tag outermost may be 4 bytes shorter at most:
    /// a longer one is counted `too_long` on arrival.
    pub fn max_frame(&self) -> u32 {
        self.max_frame
    }

    /// The flowsets whose `max-len` [`Shaper::start`] raised to [`Shaper::max_frame`].
    pub fn max_len_raised(&self) -> &[MaxLenRaised] {
        &self.raised
    }

    /// Time since it started shaping.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// A thread ended on its own: a receiving thread or the reverse path met a fault it
    /// could not ride through (an interface deleted for longer than
    /// [`ShaperConfig::link_wait`], a socket error that is not a link's), or could not be
    /// pinned; the reason is in the report's errors. The caller should stop the shaper.
    pub fn thread_ended(&self) -> bool {
        self.rx_threads.iter().any(|t| t.is_finished())
            || self
                .reverse_thread
                .as_ref()
                .is_some_and(|t| t.is_finished())
    }

    /// Reads every counter now: the engine's, the receiving threads' and the reverse
    /// path's, then the per-queue statistics (which waits for the arbiter's next scan).
    pub fn snapshot(&self) -> Snapshot {
        let engine = self.engine();
        Snapshot {
            engine: engine.snapshot(),
            rx: RxTotals::of(&self.rx),
            reverse: ReverseTotals::of(&self.reverse),
            dummynet: engine.dummynet_stats().ok(),
            links: self.links.totals(),
        }
    }

    /// The input's and the output's faults now (cheap: no wait for the arbiter). Compare
    /// two with [`LinkTotals::changes_since`] to tell an operator what happened.
    pub fn links(&self) -> Vec<LinkTotals> {
        self.links.totals()
    }

    /// Applies a new dummynet-style configuration without stopping (rates, weights, rules
    /// and tables; see `pspat_engine::dummynet` for what may change), its `max-len`s raised
    /// to the longest frame first. Returns the flowsets raised, or why the engine refused
    /// it (the running configuration then stays).
    pub fn reconfigure(
        &self,
        mut config: pspat_config::Config,
    ) -> Result<Vec<MaxLenRaised>, ShaperError> {
        let raised = fit_frames(&mut config, self.max_frame, &self.config.output);
        self.engine()
            .reconfigure(Change::Config(Arc::new(config)))
            .map_err(ShaperError::Reconfigure)?;
        Ok(raised)
    }

    /// Re-applies the configuration file if it changed since it was last read (checked at
    /// most every [`Reloader::EVERY`]), as [`Shaper::reconfigure`] does; says how that
    /// went, or `None` when nothing was done.
    pub fn poll_reload(&mut self) -> Option<Reload> {
        let engine = self.engine.as_ref()?;
        self.reloader.poll(engine)
    }

    /// Reads the configuration file and applies it now, changed or not (the operator
    /// says it is complete: SIGHUP), as [`Shaper::reconfigure`] does; says how that went.
    pub fn reload_now(&mut self) -> Option<Reload> {
        let engine = self.engine.as_ref()?;
        Some(self.reloader.reload_now(engine))
    }

    /// Stops receiving, then the engine (without draining: what is queued is reported as
    /// queued), then the reverse path; returns the final account.
    pub fn stop(mut self) -> Report {
        let mut errors = self.halt_receivers();
        let engine = self
            .engine
            .take()
            .expect("the engine runs until `stop` takes the shaper");
        let dummynet = engine.dummynet_stats().ok();
        let report = engine.stop(false);
        if let Some(t) = self.reverse_thread.take() {
            if let Ok(Some(e)) = t.join() {
                errors.push(format!("reverse path: {e}"));
            }
        }
        errors.extend(report.dispatcher_errors.iter().cloned());
        if let Some(e) = report.sched.as_ref().and_then(|s| s.send_error.clone()) {
            errors.push(format!("sending: {e}"));
        }
        let elapsed = self.started.elapsed();
        let last = &report.snapshot;
        Report {
            config: self.config.clone(),
            elapsed,
            interrupted: false,
            checksums: self.checksums,
            rx: RxTotals::of(&self.rx),
            engine_start: self.first,
            engine: EngineTotals::of(last),
            queued: report.sched.as_ref().map_or(0, |s| s.backlog.pkts),
            in_mailboxes: last
                .clients
                .iter()
                .map(|c| c.submitted - c.enqueued - c.dropped_total())
                .sum(),
            reverse: ReverseTotals::of(&self.reverse),
            errors,
            dummynet,
            links: self.links.totals(),
        }
    }

    /// Asks the receiving and reverse threads to stop and joins the receiving ones;
    /// returns their errors.
    fn halt_receivers(&mut self) -> Vec<String> {
        // ORDERING: Relaxed: pairs with the threads' Relaxed loads; nothing is published
        // through the flag (their counters are read after join, which synchronises).
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for t in std::mem::take(&mut self.rx_threads) {
            match t.join() {
                Ok(Some(e)) => errors.push(format!("receiving: {e}")),
                Ok(None) => {}
                Err(_) => errors.push("a receiving thread panicked".into()),
            }
        }
        errors
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        // After `stop`, everything has ended already.
        if self.engine.is_none() {
            return;
        }
        self.halt_receivers();
        // Engine's own drop stops it without draining.
        drop(self.engine.take());
        if let Some(t) = self.reverse_thread.take() {
            let _ = t.join();
        }
    }
}

/// Frame slots per receiving thread for the engine's hand-off mode: every frame a thread
/// can have in flight (its mailbox, the transmitter's batch and TX mailbox) has a slot.
fn pool_slots(cfg: &EngineConfig) -> usize {
    let behind = match cfg.handoff {
        Handoff::Arbiter => cfg.tx_batch,
        Handoff::Dispatchers(_) => cfg.tx_mailbox_entries + cfg.tx_batch,
        Handoff::Clients => 2 * cfg.mailbox_entries + cfg.tx_batch,
    };
    cfg.mailbox_entries + behind + 1
}

/// Raises every flowset's max-len below `max_frame`, the longest frame `output` sends, to
/// it. Returns the flowsets changed.
fn fit_frames(
    config: &mut pspat_config::Config,
    max_frame: u32,
    output: &str,
) -> Vec<MaxLenRaised> {
    let mut changed = Vec::new();
    for f in config.flowsets.values_mut() {
        if f.max_len < max_frame {
            changed.push(MaxLenRaised {
                flowset: f.id,
                from: f.max_len,
                to: max_frame,
                output: output.to_owned(),
            });
            f.max_len = max_frame;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_len_below_the_longest_frame_is_raised_and_the_rest_kept() {
        let mut c = pspat_config::parse_str(
            "sched 1 config type wf2q+ bw 20Mbit/s\n\
             queue 1 config sched 1 weight 10\n\
             queue 2 config sched 1 weight 1 max-len 9000\n",
            pspat_config::Format::Ipfw,
            "test",
        )
        .unwrap();
        let before: Vec<(u32, u32)> = c.flowsets.values().map(|f| (f.id, f.max_len)).collect();
        let changed = fit_frames(&mut c, 1518, "eth1");
        let low: Vec<MaxLenRaised> = before
            .iter()
            .filter(|f| f.1 < 1518)
            .map(|&(flowset, from)| MaxLenRaised {
                flowset,
                from,
                to: 1518,
                output: "eth1".into(),
            })
            .collect();
        assert_eq!(changed, low);
        assert!(!changed.is_empty(), "the default max-len is below 1518");
        for f in c.flowsets.values() {
            let was = before.iter().find(|b| b.0 == f.id).unwrap().1;
            assert_eq!(f.max_len, was.max(1518), "flowset {}", f.id);
        }
        assert!(
            fit_frames(&mut c, 1518, "eth1").is_empty(),
            "a second pass changes nothing"
        );
    }

    #[test]
    fn every_frame_in_flight_has_a_slot() {
        let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
        cfg.mailbox_entries = 1024;
        let (m, b, t) = (cfg.mailbox_entries, cfg.tx_batch, cfg.tx_mailbox_entries);
        let mut slots = |handoff| {
            cfg.handoff = handoff;
            pool_slots(&cfg)
        };
        assert_eq!(slots(Handoff::Arbiter), m + b + 1);
        assert_eq!(slots(Handoff::Dispatchers(2)), m + t + b + 1);
        assert_eq!(slots(Handoff::Clients), 3 * m + b + 1);
    }

    #[test]
    fn raised_max_len_and_checksum_modes_print_their_notices() {
        let r = MaxLenRaised {
            flowset: 2,
            from: 1500,
            to: 1518,
            output: "eth1".into(),
        };
        assert_eq!(
            r.to_string(),
            "flowset 2: max-len 1500 raised to 1518, the longest frame eth1 sends (frames are \
             scheduled whole, Ethernet header included)"
        );
        assert_eq!(ChecksumOffload::PassedThrough.to_string(), "passed through");
        assert_eq!(
            ChecksumOffload::Software.to_string(),
            "finished in software"
        );
        assert_eq!(ChecksumOffload::PassedThrough.key(), "passed_through");
        assert_eq!(ChecksumOffload::Software.key(), "software");
    }
}
