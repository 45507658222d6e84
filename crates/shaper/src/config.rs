//! What a shaper is started with: [`ShaperConfig`], the options of `pspat shape` the
//! shaper uses, typed, and its checks. How long to run and how often to show the live view
//! are the caller's (`--duration`, `--stats`): the shaper never stops by itself and keeps
//! no timer; the caller compares [`crate::Shaper::elapsed`] with its own.

use std::path::PathBuf;
use std::time::Duration;

use pspat_config::Direction;
use pspat_engine::Handoff;
use pspat_io::afpacket::RxMode;

use crate::error::ShaperError;

/// How a [`crate::Shaper`] is built. [`ShaperConfig::new`] gives the defaults (those of
/// `pspat shape`); the fields are public to change.
#[derive(Clone, Debug, PartialEq)]
pub struct ShaperConfig {
    /// Interface the traffic to shape arrives on (`--in`).
    pub input: String,
    /// Interface the shaped traffic leaves by (`--out`).
    pub output: String,
    /// The dummynet-style configuration file (ipfw or TOML syntax), read at start and
    /// watched by [`crate::Shaper::poll_reload`] (`--config`).
    pub config: PathBuf,
    /// Receiving threads (PSPAT clients), 1..=64, joined in one AF_PACKET fanout group by
    /// flow hash so a flow stays on one thread and in order (`--rx-threads`).
    pub rx_threads: usize,
    /// Who transmits: the arbiter, dispatchers or the receiving threads (`--handoff`).
    pub handoff: Handoff,
    /// The direction the rules see shaped frames in (`--dir`; `out`, as ipfw's `out xmit`
    /// on the output interface).
    pub dir: Direction,
    /// Mailbox slots per receiving thread: a power of two, at least 64 (`--mailbox`).
    pub mailbox: usize,
    /// Forward traffic arriving on the output interface back to the input one, unshaped
    /// (the default; `--no-reverse` turns it off).
    pub reverse: bool,
    /// Pin the arbiter to this CPU (`--arbiter-cpu`).
    pub arbiter_cpu: Option<usize>,
    /// Pin receiving thread k to the k-th of these CPUs, round robin (`--rx-cpus`).
    pub rx_cpus: Vec<usize>,
    /// AF_PACKET RX ring: a slot per frame, each handed over at once (TPACKET_V2), or
    /// blocks of frames handed over when full or after 1 ms (TPACKET_V3) (`--rx-ring`).
    pub rx_mode: RxMode,
    /// AF_PACKET RX ring: blocks per receiving thread (`--ring-blocks`).
    pub ring_blocks: usize,
    /// AF_PACKET RX ring: block size in KiB (`--ring-block-kib`).
    pub ring_block_kib: usize,
    /// Waits for a busy link shorter than this are spun, longer ones slept
    /// (`--link-spin-us`).
    pub link_spin: Duration,
    /// How much lost time an emulated link makes up for when the shaper falls behind
    /// (`--max-lag`, `EngineConfig::max_lag_ns`): a hiccup shorter than this costs no
    /// rate; a longer lag (the shaper cannot keep up) leaves the backlog to the scheduler.
    pub max_lag: Duration,
    /// Send with PACKET_QDISC_BYPASS (the default; `--no-qdisc-bypass` turns it off).
    pub qdisc_bypass: bool,
    /// Finish partial TCP/UDP checksums in software instead of passing each frame's
    /// offload state through in a virtio-net header (`--sw-checksum`).
    pub sw_checksum: bool,
    /// How long a deleted interface is waited for before the shaper gives up on it (an
    /// interface that is down but present is waited for as long as it takes)
    /// (`--link-wait`).
    pub link_wait: Duration,
    /// Apply a changed configuration file even when it lost all its rules, or all its
    /// schedulers and pipes (otherwise refused as an accident) (`--allow-empty-reload`).
    pub allow_empty_reload: bool,
}

impl ShaperConfig {
    /// Default [`ShaperConfig::rx_threads`].
    pub const DEFAULT_RX_THREADS: usize = 1;
    /// Default [`ShaperConfig::mailbox`].
    pub const DEFAULT_MAILBOX: usize = 16384;
    /// Default [`ShaperConfig::rx_mode`].
    pub const DEFAULT_RX_MODE: RxMode = RxMode::Frames;
    /// Default [`ShaperConfig::ring_blocks`] (4 MiB with the default block: a larger ring
    /// only lengthens the wait of frames the shaper cannot keep up with).
    pub const DEFAULT_RING_BLOCKS: usize = 256;
    /// Default [`ShaperConfig::ring_block_kib`]: the kernel hands a block over when it is
    /// full or 1 ms after its first frame, so small blocks keep that wait short.
    pub const DEFAULT_RING_BLOCK_KIB: usize = 16;
    /// Default [`ShaperConfig::link_spin`]: the shaper shares its CPUs with the traffic,
    /// so its arbiter sleeps rather than spins.
    pub const DEFAULT_LINK_SPIN: Duration = Duration::from_micros(20);
    /// Default [`ShaperConfig::max_lag`]: the engine's.
    pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(20);

    /// Default [`ShaperConfig::link_wait`]: long enough for a container or a tunnel to
    /// recreate its interface, short enough for a supervisor to act on a shaper that
    /// lost one for good.
    pub const DEFAULT_LINK_WAIT: Duration = Duration::from_secs(30);

    /// Shapes from `input` to `output` with the configuration file `config`, every other
    /// option at its default.
    pub fn new(input: &str, output: &str, config: impl Into<PathBuf>) -> Self {
        ShaperConfig {
            input: input.to_owned(),
            output: output.to_owned(),
            config: config.into(),
            rx_threads: Self::DEFAULT_RX_THREADS,
            handoff: Handoff::Arbiter,
            dir: Direction::Out,
            mailbox: Self::DEFAULT_MAILBOX,
            reverse: true,
            arbiter_cpu: None,
            rx_cpus: Vec::new(),
            rx_mode: Self::DEFAULT_RX_MODE,
            ring_blocks: Self::DEFAULT_RING_BLOCKS,
            ring_block_kib: Self::DEFAULT_RING_BLOCK_KIB,
            link_spin: Self::DEFAULT_LINK_SPIN,
            max_lag: Self::DEFAULT_MAX_LAG,
            qdisc_bypass: true,
            sw_checksum: false,
            link_wait: Self::DEFAULT_LINK_WAIT,
            allow_empty_reload: false,
        }
    }

    /// Most receiving threads ([`ShaperConfig::rx_threads`]).
    pub const MAX_RX_THREADS: usize = 64;
    /// Fewest mailbox slots per receiving thread ([`ShaperConfig::mailbox`]).
    pub const MIN_MAILBOX: usize = 64;
    /// Most mailbox slots per receiving thread: each slot has a frame slot of the output's
    /// longest frame behind it, and with client hand-off three (see `pool_slots` in
    /// shaper.rs), so 2^18 is up to 1.2 GiB of frames per thread at MTU 1500: more than
    /// any queue limit needs, less than the machine has.
    pub const MAX_MAILBOX: usize = 1 << 18;
    /// Most RX ring blocks per receiving thread ([`ShaperConfig::ring_blocks`]).
    pub const MAX_RING_BLOCKS: usize = 1 << 16;
    /// Largest RX ring block, KiB ([`ShaperConfig::ring_block_kib`]): 16 MiB. A block is
    /// handed over when full or 1 ms after its first frame, so a large one only delays.
    pub const MAX_RING_BLOCK_KIB: usize = 16 << 10;
    /// Largest RX ring per receiving thread, KiB (blocks times block size): 1 GiB of
    /// kernel memory the ring pins.
    pub const MAX_RING_KIB: usize = 1 << 20;
    /// Longest [`ShaperConfig::link_spin`]: spinning longer than a second for a link is
    /// a burnt CPU, not a precise wait.
    pub const MAX_LINK_SPIN: Duration = Duration::from_secs(1);
    /// Longest [`ShaperConfig::max_lag`]: a link making up for more than a second sends
    /// a second's worth at once.
    pub const MAX_MAX_LAG: Duration = Duration::from_secs(1);

    /// The checks made before anything opens: the interfaces differ, and every count,
    /// size and CPU is in its range. (That the interfaces exist, the configuration file
    /// and the ring's fit to the output's MTU are checked when [`crate::Shaper::start`]
    /// uses them.)
    pub fn validate(&self) -> Result<(), ShaperError> {
        if self.input == self.output {
            return Err(ShaperError::SameInterface(self.input.clone()));
        }
        let out_of_range = |option, value: &dyn std::fmt::Display, expected: String| {
            Err(ShaperError::OutOfRange {
                option,
                value: value.to_string(),
                expected,
            })
        };
        if !(1..=Self::MAX_RX_THREADS).contains(&self.rx_threads) {
            let want = format!("1..={}", Self::MAX_RX_THREADS);
            return out_of_range("--rx-threads", &self.rx_threads, want);
        }
        pspat_io::cpu::check_allowed(&self.rx_cpus).map_err(ShaperError::RxCpu)?;
        if !self.mailbox.is_power_of_two()
            || !(Self::MIN_MAILBOX..=Self::MAX_MAILBOX).contains(&self.mailbox)
        {
            let want = format!(
                "a power of two in {}..={}",
                Self::MIN_MAILBOX,
                Self::MAX_MAILBOX
            );
            return out_of_range("--mailbox", &self.mailbox, want);
        }
        if !(1..=Self::MAX_RING_BLOCKS).contains(&self.ring_blocks) {
            let want = format!("1..={}", Self::MAX_RING_BLOCKS);
            return out_of_range("--ring-blocks", &self.ring_blocks, want);
        }
        // The kernel maps a ring block in whole pages (4 KiB here; a larger page is
        // named when the ring opens).
        if self.ring_block_kib % 4 != 0
            || !(4..=Self::MAX_RING_BLOCK_KIB).contains(&self.ring_block_kib)
        {
            let want = format!(
                "a multiple of 4 (KiB, whole pages) in 4..={}",
                Self::MAX_RING_BLOCK_KIB
            );
            return out_of_range("--ring-block-kib", &self.ring_block_kib, want);
        }
        if self.ring_blocks * self.ring_block_kib > Self::MAX_RING_KIB {
            return out_of_range(
                "--ring-blocks",
                &self.ring_blocks,
                format!(
                    "at most {} blocks of {} KiB (a ring of at most {} MiB per thread)",
                    Self::MAX_RING_KIB / self.ring_block_kib,
                    self.ring_block_kib,
                    Self::MAX_RING_KIB >> 10
                ),
            );
        }
        if self.link_spin > Self::MAX_LINK_SPIN {
            return out_of_range(
                "--link-spin-us",
                &self.link_spin.as_micros(),
                format!("at most {}", Self::MAX_LINK_SPIN.as_micros()),
            );
        }
        if self.max_lag > Self::MAX_MAX_LAG {
            return out_of_range(
                "--max-lag",
                &format!("{:?}", self.max_lag),
                format!("at most {:?}", Self::MAX_MAX_LAG),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused_with_the_options_name() {
        let ok = ShaperConfig::new("a", "b", "x.ipfw");
        assert!(ok.validate().is_ok());
        let with = |f: &dyn Fn(&mut ShaperConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert_eq!(
            with(&|c| c.output = "a".into()),
            "--in and --out are the same interface (a)"
        );
        assert_eq!(
            with(&|c| c.rx_threads = 0),
            "--rx-threads 0: expected 1..=64"
        );
        assert_eq!(
            with(&|c| c.rx_threads = 65),
            "--rx-threads 65: expected 1..=64"
        );
        for m in [1000, 32, 1 << 24, 1 << 32] {
            assert_eq!(
                with(&|c| c.mailbox = m),
                format!("--mailbox {m}: expected a power of two in 64..=262144")
            );
        }
        let mut big = ok.clone();
        big.mailbox = 1 << 18;
        big.ring_blocks = 64;
        big.ring_block_kib = 16384;
        big.link_spin = Duration::from_secs(1);
        big.max_lag = Duration::from_secs(1);
        assert!(big.validate().is_ok(), "the largest values are allowed");
        assert_eq!(
            with(&|c| c.ring_blocks = 0),
            "--ring-blocks 0: expected 1..=65536"
        );
        assert_eq!(
            with(&|c| c.ring_block_kib = 6),
            "--ring-block-kib 6: expected a multiple of 4 (KiB, whole pages) in 4..=16384"
        );
        assert_eq!(
            with(&|c| c.ring_block_kib = 1 << 20),
            "--ring-block-kib 1048576: expected a multiple of 4 (KiB, whole pages) in 4..=16384"
        );
        assert_eq!(
            with(&|c| {
                c.ring_blocks = 65536;
                c.ring_block_kib = 16384
            }),
            "--ring-blocks 65536: expected at most 64 blocks of 16384 KiB (a ring of at most \
             1024 MiB per thread)"
        );
        assert_eq!(
            with(&|c| c.link_spin = Duration::from_micros(u64::MAX)),
            format!("--link-spin-us {}: expected at most 1000000", u64::MAX)
        );
        assert_eq!(
            with(&|c| c.max_lag = Duration::from_millis(1001)),
            "--max-lag 1.001s: expected at most 1s"
        );
        let e = with(&|c| c.rx_cpus = vec![100_000]);
        assert!(
            e.starts_with("--rx-cpus: CPU 100000 is not one this process may run on (allowed: ["),
            "{e}"
        );
    }
}
