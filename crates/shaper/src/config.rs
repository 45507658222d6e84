//! What a shaper is started with: [`ShaperConfig`], the options of `pspat shape` the
//! shaper uses, typed, and its checks. How long to run and how often to show the live view
//! are the caller's (`--duration`, `--stats`): the shaper never stops by itself and keeps
//! no timer; the caller compares [`crate::Shaper::elapsed`] with its own.

use std::path::PathBuf;
use std::time::Duration;

use pspat_config::Direction;
use pspat_engine::Handoff;

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
    /// AF_PACKET RX ring: blocks per receiving thread (`--ring-blocks`).
    pub ring_blocks: usize,
    /// AF_PACKET RX ring: block size in KiB (`--ring-block-kib`).
    pub ring_block_kib: usize,
    /// Waits for a busy link shorter than this are spun, longer ones slept
    /// (`--link-spin-us`).
    pub link_spin: Duration,
    /// Send with PACKET_QDISC_BYPASS (the default; `--no-qdisc-bypass` turns it off).
    pub qdisc_bypass: bool,
    /// Finish partial TCP/UDP checksums in software instead of passing each frame's
    /// offload state through in a virtio-net header (`--sw-checksum`).
    pub sw_checksum: bool,
}

impl ShaperConfig {
    /// Default [`ShaperConfig::rx_threads`].
    pub const DEFAULT_RX_THREADS: usize = 1;
    /// Default [`ShaperConfig::mailbox`].
    pub const DEFAULT_MAILBOX: usize = 16384;
    /// Default [`ShaperConfig::ring_blocks`] (4 MiB with the default block: a larger ring
    /// only lengthens the wait of frames the shaper cannot keep up with).
    pub const DEFAULT_RING_BLOCKS: usize = 256;
    /// Default [`ShaperConfig::ring_block_kib`]: the kernel hands a block over when it is
    /// full or 1 ms after its first frame, so small blocks keep that wait short.
    pub const DEFAULT_RING_BLOCK_KIB: usize = 16;
    /// Default [`ShaperConfig::link_spin`]: the shaper shares its CPUs with the traffic,
    /// so its arbiter sleeps rather than spins.
    pub const DEFAULT_LINK_SPIN: Duration = Duration::from_micros(20);

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
            ring_blocks: Self::DEFAULT_RING_BLOCKS,
            ring_block_kib: Self::DEFAULT_RING_BLOCK_KIB,
            link_spin: Self::DEFAULT_LINK_SPIN,
            qdisc_bypass: true,
            sw_checksum: false,
        }
    }

    /// The checks made before anything opens: the interfaces differ, the thread count,
    /// the CPUs and the mailbox size are possible. (Interfaces, the configuration file and
    /// the ring geometry are checked when [`crate::Shaper::start`] uses them.)
    pub fn validate(&self) -> Result<(), ShaperError> {
        if self.input == self.output {
            return Err(ShaperError::SameInterface(self.input.clone()));
        }
        if !(1..=64).contains(&self.rx_threads) {
            return Err(ShaperError::RxThreads(self.rx_threads));
        }
        pspat_io::cpu::check_allowed(&self.rx_cpus).map_err(ShaperError::RxCpu)?;
        if !self.mailbox.is_power_of_two() || self.mailbox < 64 {
            return Err(ShaperError::Mailbox(self.mailbox));
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
        assert_eq!(
            with(&|c| c.mailbox = 1000),
            "--mailbox 1000: expected a power of two, at least 64"
        );
        assert_eq!(
            with(&|c| c.mailbox = 32),
            "--mailbox 32: expected a power of two, at least 64"
        );
        let e = with(&|c| c.rx_cpus = vec![100_000]);
        assert!(
            e.starts_with("--rx-cpus: CPU 100000 is not one this process may run on (allowed: ["),
            "{e}"
        );
    }
}
