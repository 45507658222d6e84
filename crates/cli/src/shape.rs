//! `pspat shape`: the transparent shaper of `pspat-shaper` behind a command line. Here are
//! only the options, the signals, the loop (duration, live statistics, reloads) and the
//! printing; the shaper, its live view and its final account are the library's.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use pspat_config::Direction;
use pspat_engine::Handoff;
use pspat_io::afpacket::RxMode;
use pspat_io::cpu::CpuList;
use pspat_shaper::{live_view, Shaper, ShaperConfig};

use crate::signals::Signals;
use crate::Faulted;

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
    #[arg(long, default_value_t = ShaperConfig::DEFAULT_RX_THREADS, value_name = "N")]
    pub rx_threads: usize,
    /// Who transmits: arbiter, dispatchers[:N] or clients (the receiving threads).
    #[arg(long, default_value = "arbiter")]
    pub handoff: Handoff,
    /// Stop after this long (e.g. 30s); default: until SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = pspat_units::parse_duration)]
    pub duration: Option<Duration>,
    /// Print statistics every this many seconds (0 = only at the end).
    #[arg(long, default_value = "1", value_name = "SECS", value_parser = pspat_units::parse_duration)]
    pub stats: Duration,
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
    #[arg(long, default_value_t = ShaperConfig::DEFAULT_MAILBOX, value_name = "N")]
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
    /// A list of CPUs and ranges: 0,2 or 1-3.
    #[arg(long, value_name = "CPU,...")]
    pub rx_cpus: Option<CpuList>,
    /// AF_PACKET RX ring: blocks per receiving thread (4 MiB with the default block: a
    /// larger ring only lengthens the wait of frames the shaper cannot keep up with).
    #[arg(long, default_value_t = ShaperConfig::DEFAULT_RING_BLOCKS, value_name = "N")]
    pub ring_blocks: usize,
    /// AF_PACKET RX ring: `frames` (TPACKET_V2, each frame handed over as it arrives: no
    /// wait) or `blocks` (TPACKET_V3, frames handed over a block at a time, when it is full
    /// or 1 ms after its first frame: fewer wake-ups, up to a millisecond's wait).
    #[arg(long, default_value = "frames", value_name = "frames|blocks", value_parser = parse_rx_ring)]
    pub rx_ring: RxMode,
    /// AF_PACKET RX ring: block size in KiB. The kernel hands a block over when it is full
    /// or 1 ms after its first frame (TPACKET_V3), so small blocks keep the wait short: a
    /// 16 KiB block holds about 15 full-size frames.
    #[arg(long, default_value_t = ShaperConfig::DEFAULT_RING_BLOCK_KIB, value_name = "KIB")]
    pub ring_block_kib: usize,
    /// Waits for a busy link shorter than this (us) are spun, longer ones slept: the
    /// shaper shares its CPUs with the traffic, so its arbiter sleeps rather than spins.
    #[arg(long, default_value_t = ShaperConfig::DEFAULT_LINK_SPIN.as_micros() as u64,
          value_name = "US")]
    pub link_spin_us: u64,
    /// How much lost time an emulated link makes up for when the shaper falls behind (a
    /// descheduled or late arbiter): a shorter hiccup costs no rate; beyond it the link
    /// loses the time rather than bursting, and the backlog stays in the scheduler, which
    /// keeps deciding by weight what is sent and what is dropped.
    #[arg(long, default_value = "20ms", value_name = "DURATION", value_parser = pspat_units::parse_duration)]
    pub max_lag: Duration,
    /// Send through the output interface's qdisc instead of bypassing it.
    #[arg(long)]
    pub no_qdisc_bypass: bool,
    /// How long a deleted interface is waited for before the shaper gives up on it and
    /// exits (1); an interface that is down but present is waited for as long as it takes.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = pspat_units::parse_duration)]
    pub link_wait: Duration,
    /// Apply a changed configuration file even when it lost all its rules, or all its
    /// schedulers and pipes (refused as an accident otherwise).
    #[arg(long)]
    pub allow_empty_reload: bool,
    /// Finish in software the TCP/UDP checksums that senders left to offload, instead of
    /// passing each frame's offload state through (PACKET_VNET_HDR, the default on Linux
    /// 5.1 and later; software is the only way before).
    #[arg(long)]
    pub sw_checksum: bool,
}

fn parse_rx_ring(s: &str) -> Result<RxMode, String> {
    match s {
        "frames" => Ok(RxMode::Frames),
        "blocks" => Ok(RxMode::Blocks),
        _ => Err(format!("receive ring `{s}`: expected frames or blocks")),
    }
}

fn parse_dir(s: &str) -> Result<Direction, String> {
    match s {
        "in" => Ok(Direction::In),
        "out" => Ok(Direction::Out),
        _ => Err(format!("direction `{s}`: expected in or out")),
    }
}

impl ShapeArgs {
    /// The options as the library takes them.
    fn shaper_config(&self) -> ShaperConfig {
        ShaperConfig {
            input: self.input.clone(),
            output: self.output.clone(),
            config: self.config.clone(),
            rx_threads: self.rx_threads,
            handoff: self.handoff,
            dir: self.dir,
            mailbox: self.mailbox,
            reverse: !self.no_reverse,
            arbiter_cpu: self.arbiter_cpu,
            rx_cpus: self.rx_cpus.as_ref().map_or_else(Vec::new, |l| l.0.clone()),
            rx_mode: self.rx_ring,
            ring_blocks: self.ring_blocks,
            ring_block_kib: self.ring_block_kib,
            link_spin: Duration::from_micros(self.link_spin_us),
            max_lag: self.max_lag,
            qdisc_bypass: !self.no_qdisc_bypass,
            sw_checksum: self.sw_checksum,
            link_wait: self.link_wait,
            allow_empty_reload: self.allow_empty_reload,
        }
    }
}

/// Runs the shaper until the duration ends, a signal arrives or a receiving thread fails;
/// prints the live view every `--stats` and the final account (and writes it as JSON).
pub fn main(a: &ShapeArgs) -> Result<()> {
    let signals = Signals::install()?;
    // The report's file is created now: a path that cannot be written fails before the
    // run, not after it.
    let json_file = match &a.json {
        Some(path) => Some(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        ),
        None => None,
    };
    let mut shaper = Shaper::start(a.shaper_config())?;
    for r in shaper.max_len_raised() {
        eprintln!("pspat shape: {r}");
    }
    let c = shaper.config().clone();
    eprintln!(
        "pspat shape: ready: {} -> {} ({} rx thread(s), hand-off {}, checksums {}, config {})",
        c.input,
        c.output,
        c.rx_threads,
        c.handoff,
        shaper.checksums(),
        c.config.display()
    );

    let stats_every = (!a.stats.is_zero()).then_some(a.stats);
    let mut prev = shaper.snapshot();
    let mut next_tick = stats_every;
    let tty = std::io::stderr().is_terminal();
    let mut links = shaper.links();
    loop {
        if signals.stop_requested()
            || a.duration.is_some_and(|d| shaper.elapsed() >= d)
            || shaper.thread_ended()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Some(r) = shaper.poll_reload() {
            eprintln!("pspat shape: {r}");
        }
        if signals.take_hup() {
            if let Some(r) = shaper.reload_now() {
                eprintln!("pspat shape: {r}");
            }
        }
        let now_links = shaper.links();
        for (now, before) in now_links.iter().zip(&links) {
            for line in now.changes_since(before) {
                eprintln!("pspat shape: {line}");
            }
        }
        links = now_links;
        if let (Some(t), Some(every)) = (next_tick, stats_every) {
            if shaper.elapsed() >= t {
                next_tick = Some(t + every);
                let now = shaper.snapshot();
                let text = live_view(&prev, &now);
                if tty {
                    eprint!("\x1b[2J\x1b[H");
                }
                eprintln!("t={:.1}s\n{text}", shaper.elapsed().as_secs_f64());
                prev = now;
            }
        }
    }
    // Told to stop: by a signal or the duration; else a thread of the shaper ended by itself.
    let signalled = signals.stop_requested();
    let told = signalled || a.duration.is_some_and(|d| shaper.elapsed() >= d);
    let mut report = shaper.stop();
    report.interrupted = signalled;
    eprintln!("{report}");
    if let (Some(file), Some(path)) = (json_file, &a.json) {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), &report.to_json())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if !told {
        let mut why = report.faults();
        if why.is_empty() {
            why.push("a shaper thread ended".into());
        }
        anyhow::bail!("the shaper stopped by itself: {}", why.join("; "));
    }
    Faulted::check(report.faults())
}
