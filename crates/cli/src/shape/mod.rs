//! `pspat shape`: a transparent shaper between two interfaces.
//!
//! ```text
//!   --in IF ──AF_PACKET RX ring (fanout)──> RX thread k = PSPAT client k
//!                                              │ frame -> pool slot, classify (rules)
//!                                              v
//!                                 mailbox k ──> arbiter (dummynet service: instances,
//!                                              │  queues, one emulated link each)
//!                                              v
//!                                    transmitter (arbiter / dispatchers / the client)
//!                                              │ slot -> frame, sendmmsg
//!   --out IF <──AF_PACKET TX (qdisc bypass)────┘
//!   --out IF ──RX──> reverse thread ──TX──> --in IF   (unshaped, so replies and ARP pass)
//! ```
//!
//! Every frame taken from the ring is accounted: transmitted, dropped by the rules
//! (denied, no rule, malformed), dropped by the scheduler (queue or instance limit, with
//! the reason), refused for lack of room (mailbox, frame pool, too long for the output),
//! or still queued at the end (reported). The kernel's own ring overruns are read from
//! PACKET_STATISTICS.
//!
//! **Offloads.** Both sockets carry a virtio-net header before each frame
//! (`PACKET_VNET_HDR`, `pspat_io::afpacket::vnet`), so a frame crosses the shaper in the
//! offload state it arrived in, as it would cross the kernel's bridge: a checksum a local
//! sender left to a veth's "hardware" stays partial and is finished (or trusted) by whoever
//! is next. Without the header (`--sw-checksum`, or a kernel before 5.1) the receiving
//! thread finishes such checksums in software (`pspat_io::afpacket::csum`), and the receiver behind the
//! shaper then verifies each one again.

mod rx;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use pspat_config::Direction;
use pspat_engine::stats::{ArbiterDrop, Filtered};
use pspat_engine::{ClientConfig, Engine, EngineConfig, EngineSnapshot, Handoff};
use pspat_io::afpacket::vnet::{self, VNET_HDR_LEN};
use pspat_io::afpacket::{Fanout, FanoutMode, FrameTx, RxOptions, RxRing, TxOptions, TxSocket};
use pspat_mailbox::FramePool;
use serde_json::json;

use crate::scenario::parse_duration_ns;
use rx::{Forwarder, ReverseCounters, RxCounters};

/// `pspat shape` options.
#[derive(Args, Debug)]
pub struct ShapeArgs {
    /// Interface the traffic to shape arrives on.
    #[arg(long = "in", value_name = "IF")]
    pub input: String,
    /// Interface the shaped traffic leaves by.
    #[arg(long = "out", value_name = "IF")]
    pub output: String,
    /// The dummynet-style configuration (ipfw or TOML syntax, see `pspat config check`).
    /// Re-applied when the file changes.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Receiving threads (PSPAT clients), joined in one AF_PACKET fanout group by flow
    /// hash, so a flow stays on one thread and in order.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub rx_threads: usize,
    /// Who transmits: arbiter, dispatchers[:N] or clients (the receiving threads).
    #[arg(long, default_value = "arbiter")]
    pub handoff: Handoff,
    /// Stop after this long (e.g. 30s); default: until SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Print statistics every this many seconds (0 = only at the end).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub stats: f64,
    /// Write the final report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The direction the rules see shaped frames in (`out`: as ipfw's `out xmit` on the
    /// output interface, like a TC egress qdisc).
    #[arg(long, default_value = "out", value_parser = parse_dir)]
    pub dir: Direction,
    /// Mailbox slots per receiving thread: the most frames one thread can have queued in
    /// the schedulers at once (a power of two; keep it above the sum of queue limits, or
    /// frames are refused at the mailbox before the scheduler can choose).
    #[arg(long, default_value_t = 16384, value_name = "N")]
    pub mailbox: usize,
    /// Do not forward traffic arriving on the output interface back to the input one.
    #[arg(long)]
    pub no_reverse: bool,
    /// Pin the arbiter to this CPU.
    #[arg(long, value_name = "CPU")]
    pub arbiter_cpu: Option<usize>,
    /// Pin the receiving threads to these CPUs (thread k to the k-th, round robin), e.g.
    /// beside the senders of a small machine, where the kernel already did the rest of
    /// each frame's receive work, leaving the arbiter's CPU to scheduling and transmit.
    #[arg(long, value_name = "CPU,...", value_delimiter = ',')]
    pub rx_cpus: Vec<usize>,
    /// AF_PACKET RX ring: blocks per receiving thread (4 MiB with the default block: a
    /// larger ring only lengthens the wait of frames the shaper cannot keep up with).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub ring_blocks: usize,
    /// AF_PACKET RX ring: block size in KiB. The kernel hands a block over when it is full
    /// or 1 ms after its first frame (TPACKET_V3), so small blocks keep the wait short: a
    /// 16 KiB block holds about 15 full-size frames.
    #[arg(long, default_value_t = 16, value_name = "KIB")]
    pub ring_block_kib: usize,
    /// Waits for a busy link shorter than this (us) are spun, longer ones slept: the
    /// shaper shares its CPUs with the traffic, so its arbiter sleeps rather than spins.
    #[arg(long, default_value_t = 20, value_name = "US")]
    pub link_spin_us: u64,
    /// Send through the output interface's qdisc instead of bypassing it.
    #[arg(long)]
    pub no_qdisc_bypass: bool,
    /// Finish in software the TCP/UDP checksums that senders left to offload, instead of
    /// passing each frame's offload state through (PACKET_VNET_HDR, the default on Linux
    /// 5.1 and later; software is the only way before).
    #[arg(long)]
    pub sw_checksum: bool,
}

fn parse_dir(s: &str) -> Result<Direction, String> {
    match s {
        "in" => Ok(Direction::In),
        "out" => Ok(Direction::Out),
        _ => Err(format!("direction `{s}`: expected in or out")),
    }
}

/// Frame slots per receiving thread for a hand-off mode: every frame a thread can have in
/// flight (its mailbox, the transmitter's batch and TX mailbox) has a slot.
fn pool_slots(a: &ShapeArgs, cfg: &EngineConfig) -> usize {
    let behind = match a.handoff {
        Handoff::Arbiter => cfg.tx_batch,
        Handoff::Dispatchers(_) => cfg.tx_mailbox_entries + cfg.tx_batch,
        Handoff::Clients => 2 * cfg.mailbox_entries + cfg.tx_batch,
    };
    cfg.mailbox_entries + behind + 1
}

/// Runs the shaper until the duration ends or a signal arrives.
pub fn main(a: &ShapeArgs) -> Result<()> {
    if a.input == a.output {
        bail!("--in and --out are the same interface ({})", a.input);
    }
    if !(1..=64).contains(&a.rx_threads) {
        bail!("--rx-threads {}: expected 1..=64", a.rx_threads);
    }
    let allowed = pspat_io::cpu::allowed_cpus();
    if let Some(&cpu) = a.rx_cpus.iter().find(|c| !allowed.contains(c)) {
        bail!("--rx-cpus: CPU {cpu} is not one this process may run on (allowed: {allowed:?})");
    }
    if !a.mailbox.is_power_of_two() || a.mailbox < 64 {
        bail!(
            "--mailbox {}: expected a power of two, at least 64",
            a.mailbox
        );
    }
    if !(a.stats >= 0.0 && a.stats.is_finite()) {
        bail!("--stats {}: expected seconds >= 0", a.stats);
    }
    let run_for = match &a.duration {
        Some(d) => Some(Duration::from_nanos(
            parse_duration_ns(d).with_context(|| format!("--duration {d}"))?,
        )),
        None => None,
    };
    let mut config = pspat_config::parse_file(&a.config)
        .with_context(|| format!("reading {}", a.config.display()))?;

    // Sockets first: a missing capability or interface is reported before anything runs.
    // The frames' offload state passes through as a virtio-net header in front of each
    // (see pspat_io::afpacket::vnet), or partial checksums are finished in software.
    let vnet = !a.sw_checksum && vnet::rx_ring_supported();
    let tx_opts = TxOptions {
        qdisc_bypass: !a.no_qdisc_bypass,
        vnet_hdr: vnet,
        ..TxOptions::default()
    };
    let probe = TxSocket::open(&a.output, &tx_opts).with_context(|| "opening --out")?;
    let mtu = probe
        .mtu()
        .with_context(|| format!("reading the MTU of {}", a.output))? as usize;
    // Ethernet header and one VLAN tag on top of the MTU.
    let max_frame = mtu + 18;
    let group = (std::process::id() & 0xffff) as u16;
    let mut rings = Vec::with_capacity(a.rx_threads);
    for _ in 0..a.rx_threads {
        let opts = RxOptions {
            block_count: a.ring_blocks,
            block_size: a.ring_block_kib * 1024,
            frame_size: (max_frame + 128).next_power_of_two().max(2048),
            fanout: (a.rx_threads > 1).then_some(Fanout {
                group,
                mode: FanoutMode::Hash,
            }),
            vnet_hdr: vnet,
            ..RxOptions::default()
        };
        rings.push(RxRing::open(&a.input, &opts).with_context(|| "opening --in")?);
    }
    let reverse = if a.no_reverse {
        None
    } else {
        let opts = RxOptions {
            vnet_hdr: vnet,
            ..RxOptions::default()
        };
        let ring =
            RxRing::open(&a.output, &opts).with_context(|| "opening --out for the reverse path")?;
        let tx = TxSocket::open(&a.input, &tx_opts)
            .with_context(|| "opening --in for the reverse path")?;
        Some((ring, tx))
    };
    drop(probe);
    for (id, from) in fit_frames(&mut config, max_frame as u32) {
        eprintln!(
            "pspat shape: flowset {id}: max-len {from} raised to {max_frame}, the longest frame \
             {} sends (frames are scheduled whole, Ethernet header included)",
            a.output
        );
    }

    let mut cfg = EngineConfig::new(
        "fifo",
        Vec::new(),
        vec![ClientConfig::default(); a.rx_threads],
    );
    cfg.handoff = a.handoff;
    cfg.mailbox_entries = a.mailbox;
    cfg.arbiter_cpu = a.arbiter_cpu;
    cfg.link_spin_ns = a.link_spin_us * 1000;
    cfg.arbiter_timer_slack_ns = Some(1_000);
    cfg.dummynet = Some(Arc::new(config));
    // A slot holds what the output socket sends: the virtio-net header, then the frame.
    let hdr = if vnet { VNET_HDR_LEN } else { 0 };
    let pool = FramePool::new(a.rx_threads, pool_slots(a, &cfg), hdr + max_frame.max(64));
    let backend = FrameTx::new(Arc::clone(&pool), &a.output, tx_opts);
    let (engine, clients) =
        Engine::start(&cfg, Arc::new(backend)).context("starting the engine")?;

    let stop = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&interrupted);
        // SIGINT, SIGTERM and SIGHUP (ctrlc's "termination" feature): a clean stop.
        ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
            .context("installing the signal handler")?;
    }
    let counters: Vec<Arc<RxCounters>> = (0..a.rx_threads).map(|_| Arc::default()).collect();
    let mut threads = Vec::new();
    for (k, (client, ring)) in clients.into_iter().zip(rings).enumerate() {
        let fw = Forwarder {
            ring,
            frames: FramePool::writer(&pool, client.id()),
            client,
            counters: Arc::clone(&counters[k]),
            out: rx::Out {
                max_frame,
                dir: a.dir,
                vnet,
            },
        };
        let stop = Arc::clone(&stop);
        let cpu = (!a.rx_cpus.is_empty()).then(|| a.rx_cpus[k % a.rx_cpus.len()]);
        threads.push(
            std::thread::Builder::new()
                .name(format!("pspat-rx{k}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if let Err(e) = pspat_io::cpu::pin_current_thread(cpu) {
                            return Some(format!("pinning to CPU {cpu}: {e}"));
                        }
                    }
                    fw.run(&stop)
                })
                .context("starting a receiving thread")?,
        );
    }
    let rev_counters = Arc::new(ReverseCounters::default());
    let rev_thread = match reverse {
        Some((ring, txs)) => {
            let (stop, c) = (Arc::clone(&stop), Arc::clone(&rev_counters));
            Some(
                std::thread::Builder::new()
                    .name("pspat-reverse".into())
                    .spawn(move || rx::reverse(ring, txs, vnet, &stop, &c))
                    .context("starting the reverse thread")?,
            )
        }
        None => None,
    };
    eprintln!(
        "pspat shape: ready: {} -> {} ({} rx thread(s), hand-off {}, checksums {}, config {})",
        a.input,
        a.output,
        a.rx_threads,
        a.handoff,
        if vnet {
            "passed through"
        } else {
            "finished in software"
        },
        a.config.display()
    );

    let start = Instant::now();
    let first = engine.snapshot();
    let mut prev = (first.clone(), totals(&counters));
    let every = (a.stats > 0.0).then(|| Duration::from_secs_f64(a.stats));
    let mut next_tick = every.map(|e| start + e);
    let mut watch = pspat_engine::reload::Reloader::new(&a.config);
    let frame_max = max_frame as u32;
    watch.adjust = Some(Box::new(move |c| {
        fit_frames(c, frame_max);
    }));
    let tty = std::io::stderr().is_terminal();
    let mut dn_prev = engine.dummynet_stats().ok();
    loop {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        if run_for.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if threads.iter().any(|t| t.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Some(r) = watch.poll(&engine) {
            eprintln!("pspat shape: {r}");
        }
        if let (Some(t), Some(e)) = (next_tick, every) {
            if Instant::now() >= t {
                next_tick = Some(t + e);
                let now = (engine.snapshot(), totals(&counters));
                let text = live(&engine, &prev, &now, &mut dn_prev);
                if tty {
                    eprint!("\x1b[2J\x1b[H");
                }
                eprintln!("t={:.1}s\n{text}", start.elapsed().as_secs_f64());
                prev = now;
            }
        }
    }
    // Stop receiving, then stop the engine (without draining: what is queued is
    // reported as queued), then the reverse path.
    stop.store(true, Ordering::Relaxed);
    let mut errors = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Some(e)) => errors.push(format!("receiving: {e}")),
            Ok(None) => {}
            Err(_) => errors.push("a receiving thread panicked".into()),
        }
    }
    let dn = engine.dummynet_stats().ok();
    let report = engine.stop(false);
    if let Some(t) = rev_thread {
        if let Ok(Some(e)) = t.join() {
            errors.push(format!("reverse path: {e}"));
        }
    }
    errors.extend(report.dispatcher_errors.iter().cloned());
    if let Some(e) = report.sched.as_ref().and_then(|s| s.send_error.clone()) {
        errors.push(format!("sending: {e}"));
    }
    let elapsed = start.elapsed();
    let rx = totals(&counters);
    let summary = Summary {
        a,
        elapsed,
        first: &first,
        last: &report.snapshot,
        rx: &rx,
        queued: report.sched.as_ref().map_or(0, |s| s.backlog.pkts),
        in_mailboxes: report
            .snapshot
            .clients
            .iter()
            .map(|c| c.submitted - c.enqueued - c.dropped_total())
            .sum(),
        reverse: (
            RxCounters::get(&rev_counters.frames),
            RxCounters::get(&rev_counters.failed),
        ),
        errors: &errors,
        interrupted: interrupted.load(Ordering::Relaxed),
        vnet,
        dummynet: dn,
    };
    eprintln!("{}", summary.text());
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary.json())?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Raises every flowset's max-len below `max_frame` to it (frames are scheduled whole,
/// and the configuration's default, 1500, is an IP packet's MTU, not a frame's). Returns
/// the flowsets changed and their old value.
fn fit_frames(config: &mut pspat_config::Config, max_frame: u32) -> Vec<(u32, u32)> {
    let mut changed = Vec::new();
    for f in config.flowsets.values_mut() {
        if f.max_len < max_frame {
            changed.push((f.id, f.max_len));
            f.max_len = max_frame;
        }
    }
    changed
}

/// Sums of the receiving threads' counters.
#[derive(Clone, Copy, Debug, Default)]
struct RxTotals {
    frames: u64,
    bytes: u64,
    truncated: u64,
    runt: u64,
    csum_completed: u64,
    csum_passed: u64,
    too_long: u64,
    pool_full: u64,
    stopped: u64,
    ring_drops: u64,
}

fn totals(c: &[Arc<RxCounters>]) -> RxTotals {
    let mut t = RxTotals::default();
    for c in c {
        t.frames += RxCounters::get(&c.frames);
        t.bytes += RxCounters::get(&c.bytes);
        t.truncated += RxCounters::get(&c.truncated);
        t.runt += RxCounters::get(&c.runt);
        t.csum_completed += RxCounters::get(&c.csum_completed);
        t.csum_passed += RxCounters::get(&c.csum_passed);
        t.too_long += RxCounters::get(&c.too_long);
        t.pool_full += RxCounters::get(&c.pool_full);
        t.stopped += RxCounters::get(&c.stopped);
        t.ring_drops += RxCounters::get(&c.ring_drops);
    }
    t
}

/// Engine counters summed over clients.
#[derive(Clone, Copy, Debug, Default)]
struct EngineTotals {
    submitted: u64,
    mailbox_full: u64,
    filtered: [u64; Filtered::COUNT],
    dropped: [u64; ArbiterDrop::COUNT],
    sent: u64,
    sent_bytes: u64,
    send_failed: u64,
}

fn engine_totals(s: &EngineSnapshot) -> EngineTotals {
    let mut t = EngineTotals::default();
    for c in &s.clients {
        t.submitted += c.submitted;
        t.mailbox_full += c.mailbox_full;
        for i in 0..Filtered::COUNT {
            t.filtered[i] += c.filtered[i];
        }
        for i in 0..ArbiterDrop::COUNT {
            t.dropped[i] += c.dropped[i];
        }
        t.sent += c.sent;
        t.sent_bytes += c.sent_bytes;
        t.send_failed += c.send_failed;
    }
    t
}

fn rate(a: u64, b: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    b.saturating_sub(a) as f64 / secs
}

/// The live view: totals and rates since the previous view, then the per-instance and
/// per-queue table and their rates since the previous view.
fn live(
    engine: &Engine,
    prev: &(EngineSnapshot, RxTotals),
    now: &(EngineSnapshot, RxTotals),
    dn_prev: &mut Option<pspat_engine::DummynetStats>,
) -> String {
    let secs = now.0.at_ns.saturating_sub(prev.0.at_ns) as f64 / 1e9;
    let (e0, e1) = (engine_totals(&prev.0), engine_totals(&now.0));
    let mut s = format!(
        "rx {:.0} pkt/s {:.1} Mbit/s   tx {:.0} pkt/s {:.1} Mbit/s   queued {}\n",
        rate(prev.1.frames, now.1.frames, secs),
        rate(prev.1.bytes, now.1.bytes, secs) * 8e-6,
        rate(e0.sent, e1.sent, secs),
        rate(e0.sent_bytes, e1.sent_bytes, secs) * 8e-6,
        now.0.sched_backlog,
    );
    s.push_str(&drop_line(&e1, &now.1));
    if let Ok(d) = engine.dummynet_stats() {
        s.push('\n');
        s.push_str(&d.to_string());
        if let Some(old) = dn_prev.as_ref() {
            s.push_str(&d.rates(old).to_string());
        }
        *dn_prev = Some(d);
    }
    s
}

/// Every drop counter that is not zero, by name.
fn drop_line(e: &EngineTotals, r: &RxTotals) -> String {
    let mut parts = Vec::new();
    for f in Filtered::ALL {
        if e.filtered[f.slot()] > 0 {
            parts.push(format!("{} {}", f.name(), e.filtered[f.slot()]));
        }
    }
    for d in ArbiterDrop::all() {
        if e.dropped[d.slot()] > 0 {
            parts.push(format!("{} {}", d.name(), e.dropped[d.slot()]));
        }
    }
    for (n, v) in [
        ("mailbox_full", e.mailbox_full),
        ("pool_full", r.pool_full),
        ("too_long", r.too_long),
        ("truncated", r.truncated),
        ("runt", r.runt),
        ("ring_overrun", r.ring_drops),
        ("send_failed", e.send_failed),
        ("stopping", r.stopped),
    ] {
        if v > 0 {
            parts.push(format!("{n} {v}"));
        }
    }
    if parts.is_empty() {
        "drops: none".into()
    } else {
        format!("drops: {}", parts.join(", "))
    }
}

struct Summary<'a> {
    a: &'a ShapeArgs,
    elapsed: Duration,
    first: &'a EngineSnapshot,
    last: &'a EngineSnapshot,
    rx: &'a RxTotals,
    queued: u64,
    /// Submitted frames the arbiter had not taken yet when it stopped.
    in_mailboxes: u64,
    reverse: (u64, u64),
    errors: &'a [String],
    interrupted: bool,
    /// Offload state passed through in virtio-net headers (else checksums in software).
    vnet: bool,
    dummynet: Option<pspat_engine::DummynetStats>,
}

impl Summary<'_> {
    /// Frames taken from the rings that are neither sent, dropped with a reason, nor
    /// queued: 0 unless the engine has a leak (client hand-off: frames cleared but not
    /// yet transmitted when the engine stopped would land here).
    fn unaccounted(&self, e: &EngineTotals) -> i64 {
        let r = self.rx;
        let dropped: u64 = e.dropped.iter().sum::<u64>() + e.filtered.iter().sum::<u64>();
        r.frames as i64
            - (e.sent
                + e.send_failed
                + dropped
                + e.mailbox_full
                + r.pool_full
                + r.too_long
                + r.truncated
                + r.runt
                + r.stopped
                + self.queued
                + self.in_mailboxes) as i64
    }

    fn json(&self) -> serde_json::Value {
        let e = engine_totals(self.last);
        let e0 = engine_totals(self.first);
        let secs = self.elapsed.as_secs_f64();
        let mut drops = serde_json::Map::new();
        for f in Filtered::ALL {
            drops.insert(f.name().into(), json!(e.filtered[f.slot()]));
        }
        for d in ArbiterDrop::all() {
            drops.insert(d.name(), json!(e.dropped[d.slot()]));
        }
        drops.insert("mailbox_full".into(), json!(e.mailbox_full));
        drops.insert("pool_full".into(), json!(self.rx.pool_full));
        drops.insert("too_long".into(), json!(self.rx.too_long));
        drops.insert("truncated".into(), json!(self.rx.truncated));
        drops.insert("runt".into(), json!(self.rx.runt));
        drops.insert("ring_overrun".into(), json!(self.rx.ring_drops));
        drops.insert("send_failed".into(), json!(e.send_failed));
        drops.insert("stopping".into(), json!(self.rx.stopped));
        json!({
            "input": self.a.input,
            "output": self.a.output,
            "config": self.a.config.display().to_string(),
            "rx_threads": self.a.rx_threads,
            "rx_cpus": self.a.rx_cpus,
            "arbiter_cpu": self.a.arbiter_cpu,
            "handoff": self.a.handoff.to_string(),
            "seconds": secs,
            "interrupted": self.interrupted,
            "rx_frames": self.rx.frames,
            "rx_bytes": self.rx.bytes,
            "checksum_offload": if self.vnet { "passed_through" } else { "software" },
            "checksums_completed": self.rx.csum_completed,
            "checksums_passed_partial": self.rx.csum_passed,
            "submitted": e.submitted,
            "sent": e.sent,
            "sent_bytes": e.sent_bytes,
            "tx_pps": rate(e0.sent, e.sent, secs),
            "tx_bps": rate(e0.sent_bytes, e.sent_bytes, secs) * 8.0,
            "queued_at_stop": self.queued,
            "in_mailboxes_at_stop": self.in_mailboxes,
            "drops": drops,
            "unaccounted": self.unaccounted(&e),
            "reverse_frames": self.reverse.0,
            "reverse_failed": self.reverse.1,
            "errors": self.errors,
            "dummynet": self.dummynet.as_ref().map(|d| serde_json::to_value(d).unwrap_or_default()),
        })
    }

    fn text(&self) -> String {
        let e = engine_totals(self.last);
        let secs = self.elapsed.as_secs_f64();
        let mut s = format!(
            "pspat shape: {} -> {} for {:.1}s{}\n\
             received {} frames ({} bytes); sent {} ({} bytes, {:.1} Mbit/s); \
             still queued {} (+{} in mailboxes)\n{}\n\
             reverse path: {} frames passed, {} failed",
            self.a.input,
            self.a.output,
            secs,
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            },
            self.rx.frames,
            self.rx.bytes,
            e.sent,
            e.sent_bytes,
            rate(0, e.sent_bytes, secs) * 8e-6,
            self.queued,
            self.in_mailboxes,
            drop_line(&e, self.rx),
            self.reverse.0,
            self.reverse.1,
        );
        let u = self.unaccounted(&e);
        if u != 0 {
            s.push_str(&format!("\n{u} frame(s) unaccounted for"));
        }
        if let Some(d) = &self.dummynet {
            s.push('\n');
            s.push_str(&d.to_string());
        }
        for err in self.errors {
            s.push_str(&format!("\nerror: {err}"));
        }
        s
    }
}
