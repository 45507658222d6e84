//! Traffic: packet-size distributions, burst-length distributions and arrival processes.
//!
//! Every random draw goes through one [`WyRand`] per flow, seeded from the scenario's seed
//! and the flow's index, so that a flow's traffic does not change when another flow is
//! added or removed, and a seed reproduces a run exactly.
//!
//! Arrival processes (the `kind` of a flow group's `arrival` table):
//!
//! - `backlogged`: the flow always has `depth` packets in the scheduler: `depth` at time 0,
//!   then one more each time one of its packets is handed to the link (a greedy sender
//!   that never lets its queue empty, the "heavy flows" of the papers).
//! - `cbr`: one packet every `8 len / rate_bps` seconds (the next length decides the gap
//!   after it).
//! - `poisson`: exponential gaps of mean `8 E[len] / rate_bps`.
//! - `on-off`: bursts of `burst` packets (a [`BurstDist`]) sent at `peak_bps` (0: all at
//!   the same instant), separated by exponential idle gaps of mean `off_us`.
//! - `request-response`: closed loop. A response burst of `burst` packets arrives at
//!   `peak_bps`; when its last packet has left the link (or was dropped), the client thinks
//!   for `think_us` (exponential when `think_exp`, else constant) and the next response
//!   starts. The burst completion time is the response time of the paper's experiments.
//! - `vbr`: video frames at `fps` frames per second whose sizes average `rate_bps / fps / 8`
//!   bytes, uniformly within `+-variation` of that mean; a frame is cut in packets of the
//!   size distribution (the last one shorter) sent at `peak_bps`.
//!
//! A burst (on-off, request-response) and a frame (vbr) are *bursts* for the burst
//! completion metric: from the arrival of its first packet to the departure of its last.

use pspat_harness::rng::WyRand;
use serde::Deserialize;

use crate::error::SimError;

/// Largest packet the simulator generates: 64 KiB, the TSO/GSO maximum.
pub const MAX_SIM_PACKET: u32 = 65_536;

/// A uniform number in `[0, 1)`.
pub(crate) fn unit(rng: &mut WyRand) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential draw of mean `mean`.
pub fn exponential(rng: &mut WyRand, mean: f64) -> f64 {
    -mean * (1.0 - unit(rng)).ln()
}

/// A uniform integer in `lo..=hi`.
fn between(rng: &mut WyRand, lo: u32, hi: u32) -> u32 {
    lo + rng.below(u64::from(hi - lo) + 1) as u32
}

/// Packet lengths, bytes (the `size` table of a flow group).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SizeDist {
    /// Every packet `len` bytes.
    Fixed {
        /// Bytes.
        len: u32,
    },
    /// Uniform in `min..=max`.
    Uniform {
        /// Smallest, bytes.
        min: u32,
        /// Largest, bytes.
        max: u32,
    },
    /// 64, 576 or 1500 bytes with relative frequencies `weights` (default 7:4:1, the
    /// classic "simple IMIX").
    Trimodal {
        /// Relative frequencies of 64, 576 and 1500 bytes.
        #[serde(default = "imix_weights")]
        weights: [u32; 3],
    },
    /// An empirical distribution: a text file of lines `len [count]` (count 1 when absent;
    /// `#` starts a comment). Loaded by [`SizeDist::load`].
    Empirical {
        /// Path of the file, relative to the current directory.
        file: String,
        /// The table once loaded: (len, cumulative count).
        #[serde(skip)]
        table: Vec<(u32, u64)>,
    },
    /// TSO-like super-packets: `segments` MSS-sized segments (uniform in `1..=max_segments`
    /// when `full` is 0, else a full 64 KiB super-packet with probability `full`), each
    /// `mss` bytes, capped at 64 KiB.
    Tso {
        /// Segment size, bytes.
        #[serde(default = "default_mss")]
        mss: u32,
        /// Largest number of segments.
        #[serde(default = "default_max_segments")]
        max_segments: u32,
        /// Probability of a full 64 KiB super-packet.
        #[serde(default)]
        full: f64,
    },
}

fn imix_weights() -> [u32; 3] {
    [7, 4, 1]
}
fn default_mss() -> u32 {
    1448
}
fn default_max_segments() -> u32 {
    45
}

const TRIMODAL: [u32; 3] = [64, 576, 1500];

impl SizeDist {
    /// Checks the parameters and loads an empirical file.
    pub fn load(&mut self, group: &str) -> Result<(), SimError> {
        let bad = |reason: String| SimError::Scenario(format!("group '{group}': size: {reason}"));
        let len_ok = |l: u32| (1..=MAX_SIM_PACKET).contains(&l);
        match self {
            SizeDist::Fixed { len } if !len_ok(*len) => {
                Err(bad(format!("len {len} not in 1..={MAX_SIM_PACKET}")))
            }
            SizeDist::Uniform { min, max } if !len_ok(*min) || !len_ok(*max) || *min > *max => {
                Err(bad(format!(
                    "uniform {min}..={max} not within 1..={MAX_SIM_PACKET}"
                )))
            }
            SizeDist::Trimodal { weights } if weights.iter().all(|&w| w == 0) => {
                Err(bad("trimodal weights are all 0".into()))
            }
            SizeDist::Tso {
                mss,
                max_segments,
                full,
            } if !len_ok(*mss) || *max_segments == 0 || !(0.0..=1.0).contains(full) => {
                Err(bad(format!(
                    "tso needs mss in 1..={MAX_SIM_PACKET}, max_segments >= 1, full in [0, 1] \
                     (got {mss}, {max_segments}, {full})"
                )))
            }
            SizeDist::Empirical { file, table } => {
                let text = std::fs::read_to_string(&*file)
                    .map_err(|e| bad(format!("cannot read '{file}': {e}")))?;
                *table = parse_empirical(&text).map_err(|e| bad(format!("'{file}': {e}")))?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The largest length this distribution can produce.
    pub fn max_len(&self) -> u32 {
        match self {
            SizeDist::Fixed { len } => *len,
            SizeDist::Uniform { max, .. } => *max,
            SizeDist::Trimodal { weights } => TRIMODAL
                .iter()
                .zip(weights)
                .filter(|(_, &w)| w > 0)
                .map(|(&l, _)| l)
                .max()
                .unwrap_or(1500),
            SizeDist::Empirical { table, .. } => table.iter().map(|e| e.0).max().unwrap_or(1),
            SizeDist::Tso {
                mss,
                max_segments,
                full,
            } => {
                if *full > 0.0 {
                    MAX_SIM_PACKET
                } else {
                    mss.saturating_mul(*max_segments).min(MAX_SIM_PACKET)
                }
            }
        }
    }

    /// The mean length, bytes.
    pub fn mean_len(&self) -> f64 {
        match self {
            SizeDist::Fixed { len } => f64::from(*len),
            SizeDist::Uniform { min, max } => (f64::from(*min) + f64::from(*max)) / 2.0,
            SizeDist::Trimodal { weights } => {
                let tot: f64 = weights.iter().map(|&w| f64::from(w)).sum();
                TRIMODAL
                    .iter()
                    .zip(weights)
                    .map(|(&l, &w)| f64::from(l) * f64::from(w))
                    .sum::<f64>()
                    / tot
            }
            SizeDist::Empirical { table, .. } => {
                let mut prev = 0;
                let mut sum = 0.0;
                for &(l, cum) in table.iter() {
                    sum += f64::from(l) * (cum - prev) as f64;
                    prev = cum;
                }
                sum / prev.max(1) as f64
            }
            SizeDist::Tso {
                mss,
                max_segments,
                full,
            } => {
                let m = f64::from(*mss);
                let spread = (1..=*max_segments)
                    .map(|k| (m * f64::from(k)).min(f64::from(MAX_SIM_PACKET)))
                    .sum::<f64>()
                    / f64::from(*max_segments);
                full * f64::from(MAX_SIM_PACKET) + (1.0 - full) * spread
            }
        }
    }

    /// One length.
    pub fn draw(&self, rng: &mut WyRand) -> u32 {
        match self {
            SizeDist::Fixed { len } => *len,
            SizeDist::Uniform { min, max } => between(rng, *min, *max),
            SizeDist::Trimodal { weights } => {
                let tot: u64 = weights.iter().map(|&w| u64::from(w)).sum();
                let mut x = rng.below(tot);
                for (l, &w) in TRIMODAL.iter().zip(weights) {
                    if x < u64::from(w) {
                        return *l;
                    }
                    x -= u64::from(w);
                }
                TRIMODAL[2]
            }
            SizeDist::Empirical { table, .. } => {
                let total = table.last().map_or(1, |e| e.1);
                let x = rng.below(total);
                let k = table.partition_point(|e| e.1 <= x);
                table[k.min(table.len() - 1)].0
            }
            SizeDist::Tso {
                mss,
                max_segments,
                full,
            } => {
                if *full > 0.0 && unit(rng) < *full {
                    MAX_SIM_PACKET
                } else {
                    mss.saturating_mul(between(rng, 1, *max_segments))
                        .min(MAX_SIM_PACKET)
                }
            }
        }
    }
}

/// Parses an empirical size file: lines `len [count]`, `#` comments, blank lines.
pub fn parse_empirical(text: &str) -> Result<Vec<(u32, u64)>, String> {
    let mut table = Vec::new();
    let mut cum = 0u64;
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let len: u32 = it
            .next()
            .unwrap_or("")
            .parse()
            .map_err(|e| format!("line {}: length: {e}", n + 1))?;
        if !(1..=MAX_SIM_PACKET).contains(&len) {
            return Err(format!(
                "line {}: length {len} not in 1..={MAX_SIM_PACKET}",
                n + 1
            ));
        }
        let count: u64 = match it.next() {
            None => 1,
            Some(c) => c
                .parse()
                .map_err(|e| format!("line {}: count: {e}", n + 1))?,
        };
        if it.next().is_some() {
            return Err(format!("line {}: expected 'len [count]'", n + 1));
        }
        if count > 0 {
            cum += count;
            table.push((len, cum));
        }
    }
    if table.is_empty() {
        return Err("no packet lengths".into());
    }
    Ok(table)
}

/// Burst lengths, packets.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BurstDist {
    /// Always `n`.
    Fixed {
        /// Packets.
        n: u32,
    },
    /// Uniform in `min..=max`.
    Uniform {
        /// Fewest packets.
        min: u32,
        /// Most packets.
        max: u32,
    },
    /// Geometric on `1, 2, ...` with mean `mean` (`>= 1`).
    Geometric {
        /// Mean length, packets.
        mean: f64,
    },
    /// Pareto of shape `alpha` and minimum `min`, rounded down and capped at `max`
    /// (heavy-tailed bursts).
    Pareto {
        /// Smallest burst, packets.
        min: u32,
        /// Shape (`> 0`; the mean is finite above 1).
        alpha: f64,
        /// Cap, packets.
        max: u32,
    },
}

impl BurstDist {
    fn check(&self) -> Result<(), String> {
        match *self {
            BurstDist::Fixed { n: 0 } => Err("burst n must be >= 1".into()),
            BurstDist::Uniform { min, max } if min == 0 || min > max => {
                Err(format!("burst uniform {min}..={max} needs 1 <= min <= max"))
            }
            BurstDist::Geometric { mean } if !(mean >= 1.0 && mean.is_finite()) => {
                Err(format!("burst geometric mean {mean} must be >= 1"))
            }
            BurstDist::Pareto { min, alpha, max }
                if min == 0 || min > max || !(alpha > 0.0 && alpha.is_finite()) =>
            {
                Err(format!(
                    "burst pareto needs 1 <= min <= max and alpha > 0 (got {min}, {alpha}, {max})"
                ))
            }
            _ => Ok(()),
        }
    }

    /// One burst length, `>= 1`.
    pub fn draw(&self, rng: &mut WyRand) -> u32 {
        match *self {
            BurstDist::Fixed { n } => n,
            BurstDist::Uniform { min, max } => between(rng, min, max),
            BurstDist::Geometric { mean } => {
                if mean <= 1.0 {
                    return 1;
                }
                // P(n) = (1 - p)^(n-1) p with p = 1 / mean, by inversion.
                let p = 1.0 / mean;
                let u = 1.0 - unit(rng);
                let n = 1.0 + (u.ln() / (1.0 - p).ln()).floor();
                n.min(f64::from(u32::MAX)) as u32
            }
            BurstDist::Pareto { min, alpha, max } => {
                let u = 1.0 - unit(rng);
                let x = f64::from(min) / u.powf(1.0 / alpha);
                (x.floor().min(f64::from(max)) as u32).max(min)
            }
        }
    }

    /// The mean, packets (Pareto: of the capped distribution, estimated numerically).
    pub fn mean(&self) -> f64 {
        match *self {
            BurstDist::Fixed { n } => f64::from(n),
            BurstDist::Uniform { min, max } => (f64::from(min) + f64::from(max)) / 2.0,
            BurstDist::Geometric { mean } => mean.max(1.0),
            BurstDist::Pareto { min, alpha, max } => {
                // E[min(floor(X), max)] = sum_{k >= 1} P(min(floor X, max) >= k)
                let mut s = f64::from(min);
                for k in (min + 1)..=max {
                    s += (f64::from(min) / f64::from(k)).powf(alpha);
                }
                s
            }
        }
    }
}

/// How a flow's packets arrive (the `arrival` table of a flow group).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ArrivalSpec {
    /// Always `depth` packets queued.
    Backlogged {
        /// Packets kept in the scheduler.
        #[serde(default = "default_depth")]
        depth: u32,
    },
    /// Constant bit rate.
    Cbr {
        /// Bit/s.
        rate_bps: f64,
    },
    /// Poisson arrivals.
    Poisson {
        /// Mean bit/s.
        rate_bps: f64,
    },
    /// Bursts separated by exponential idle times.
    OnOff {
        /// Burst length.
        burst: BurstDist,
        /// Mean idle time between bursts, microseconds.
        off_us: f64,
        /// Rate of the packets within a burst, bit/s (0: all at once).
        #[serde(default)]
        peak_bps: f64,
    },
    /// Closed-loop request-response: the next response when the previous one has left.
    RequestResponse {
        /// Response length, packets.
        burst: BurstDist,
        /// Think time after a response completes, microseconds.
        think_us: f64,
        /// Exponential think times (else constant).
        #[serde(default)]
        think_exp: bool,
        /// Rate of the packets within a response, bit/s (0: all at once).
        #[serde(default)]
        peak_bps: f64,
    },
    /// Variable-bit-rate video frames.
    Vbr {
        /// Frames per second.
        fps: f64,
        /// Mean bit/s.
        rate_bps: f64,
        /// Frame sizes uniform within `+-variation` of the mean (0..1).
        #[serde(default)]
        variation: f64,
        /// Rate of the packets within a frame, bit/s (0: all at once).
        #[serde(default)]
        peak_bps: f64,
    },
}

fn default_depth() -> u32 {
    2
}

impl ArrivalSpec {
    /// Checks the parameters.
    pub fn check(&self, group: &str) -> Result<(), SimError> {
        let bad =
            |reason: String| SimError::Scenario(format!("group '{group}': arrival: {reason}"));
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(bad(format!("{name} must be positive, got {v}")))
            }
        };
        let nonneg = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(bad(format!("{name} must be >= 0, got {v}")))
            }
        };
        match *self {
            ArrivalSpec::Backlogged { depth: 0 } => {
                Err(bad("backlogged depth must be >= 1".into()))
            }
            ArrivalSpec::Backlogged { .. } => Ok(()),
            ArrivalSpec::Cbr { rate_bps } | ArrivalSpec::Poisson { rate_bps } => {
                pos("rate_bps", rate_bps)
            }
            ArrivalSpec::OnOff {
                burst,
                off_us,
                peak_bps,
            } => {
                burst.check().map_err(bad)?;
                nonneg("off_us", off_us)?;
                nonneg("peak_bps", peak_bps)
            }
            ArrivalSpec::RequestResponse {
                burst,
                think_us,
                peak_bps,
                ..
            } => {
                burst.check().map_err(bad)?;
                nonneg("think_us", think_us)?;
                nonneg("peak_bps", peak_bps)
            }
            ArrivalSpec::Vbr {
                fps,
                rate_bps,
                variation,
                peak_bps,
            } => {
                pos("fps", fps)?;
                pos("rate_bps", rate_bps)?;
                nonneg("peak_bps", peak_bps)?;
                if (0.0..1.0).contains(&variation) {
                    Ok(())
                } else {
                    Err(bad(format!("variation {variation} must be in [0, 1)")))
                }
            }
        }
    }

    /// Whether the flow's packets come in bursts whose completion is measured.
    pub fn is_bursty(&self) -> bool {
        matches!(
            self,
            ArrivalSpec::OnOff { .. }
                | ArrivalSpec::RequestResponse { .. }
                | ArrivalSpec::Vbr { .. }
        )
    }
}

/// Nanoseconds between two packets of `len` bytes sent at `bps` (0 when `bps` is 0).
fn gap_ns(len: u32, bps: f64) -> f64 {
    if bps > 0.0 {
        f64::from(len) * 8e9 / bps
    } else {
        0.0
    }
}

/// One packet a source produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emit {
    /// Length, bytes.
    pub len: u32,
    /// Length of the burst it opens, packets, when it is the first of a burst.
    pub opens_burst: Option<u32>,
}

/// What a source does after emitting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// Its next packet comes at this time, ns.
    At(f64),
    /// It waits for the link (backlogged: a hand-out; request-response: a completion).
    Wait,
}

/// A flow's traffic generator: a small state machine per arrival process.
#[derive(Clone, Debug)]
pub struct Source {
    spec: ArrivalSpec,
    size: SizeDist,
    rng: WyRand,
    /// Packets left in the current burst (bytes left in the current frame for vbr).
    left: u64,
    /// Time of the current burst's or frame's start, ns (vbr: frame clock).
    epoch_ns: f64,
}

impl Source {
    /// A source for one flow.
    pub fn new(spec: ArrivalSpec, size: SizeDist, seed: u64) -> Self {
        Self {
            spec,
            size,
            rng: WyRand::new(seed),
            left: 0,
            epoch_ns: 0.0,
        }
    }

    /// The arrival process.
    pub fn spec(&self) -> &ArrivalSpec {
        &self.spec
    }

    /// When the first packet arrives, ns; `None` for backlogged flows (they start with
    /// [`Source::initial_depth`] packets at 0).
    pub fn first_ns(&mut self) -> Option<f64> {
        match self.spec {
            ArrivalSpec::Backlogged { .. } => None,
            ArrivalSpec::Cbr { .. } => Some(0.0),
            // A random phase, so that identical flows do not arrive in lock step.
            ArrivalSpec::Poisson { rate_bps } => Some(exponential(
                &mut self.rng,
                self.size.mean_len() * 8e9 / rate_bps,
            )),
            ArrivalSpec::OnOff { off_us, .. } => Some(unit(&mut self.rng) * off_us * 1e3),
            ArrivalSpec::RequestResponse { think_us, .. } => {
                Some(unit(&mut self.rng) * think_us * 1e3)
            }
            ArrivalSpec::Vbr { fps, .. } => Some(unit(&mut self.rng) * 1e9 / fps),
        }
    }

    /// Packets a backlogged flow keeps queued (0 for the others).
    pub fn initial_depth(&self) -> u32 {
        match self.spec {
            ArrivalSpec::Backlogged { depth } => depth,
            _ => 0,
        }
    }

    /// A packet of a backlogged flow (at the start or to replace one handed out).
    pub fn refill(&mut self) -> u32 {
        self.size.draw(&mut self.rng)
    }

    /// The packet arriving at `now_ns`, and when the next one comes.
    pub fn emit(&mut self, now_ns: f64) -> (Emit, Next) {
        match self.spec {
            ArrivalSpec::Backlogged { .. } => (
                Emit {
                    len: self.size.draw(&mut self.rng),
                    opens_burst: None,
                },
                Next::Wait,
            ),
            ArrivalSpec::Cbr { rate_bps } => {
                let len = self.size.draw(&mut self.rng);
                let e = Emit {
                    len,
                    opens_burst: None,
                };
                (e, Next::At(now_ns + gap_ns(len, rate_bps)))
            }
            ArrivalSpec::Poisson { rate_bps } => {
                let len = self.size.draw(&mut self.rng);
                let mean = self.size.mean_len() * 8e9 / rate_bps;
                let e = Emit {
                    len,
                    opens_burst: None,
                };
                (e, Next::At(now_ns + exponential(&mut self.rng, mean)))
            }
            ArrivalSpec::OnOff {
                burst,
                off_us,
                peak_bps,
            } => {
                let opens = self.start_burst_if_idle(&burst);
                let len = self.size.draw(&mut self.rng);
                self.left -= 1;
                let next = if self.left > 0 {
                    now_ns + gap_ns(len, peak_bps)
                } else {
                    now_ns + gap_ns(len, peak_bps) + exponential(&mut self.rng, off_us * 1e3)
                };
                (
                    Emit {
                        len,
                        opens_burst: opens,
                    },
                    Next::At(next),
                )
            }
            ArrivalSpec::RequestResponse {
                burst, peak_bps, ..
            } => {
                let opens = self.start_burst_if_idle(&burst);
                let len = self.size.draw(&mut self.rng);
                self.left -= 1;
                let next = if self.left > 0 {
                    Next::At(now_ns + gap_ns(len, peak_bps))
                } else {
                    Next::Wait
                };
                (
                    Emit {
                        len,
                        opens_burst: opens,
                    },
                    next,
                )
            }
            ArrivalSpec::Vbr {
                fps,
                rate_bps,
                variation,
                peak_bps,
            } => {
                let mut opens = None;
                if self.left == 0 {
                    let mean = rate_bps / fps / 8.0;
                    let f = mean * (1.0 + variation * (2.0 * unit(&mut self.rng) - 1.0));
                    self.left = (f.round() as u64).max(1);
                    self.epoch_ns = now_ns;
                    // Packets of the frame: the size distribution's lengths, the last one cut.
                    let mut probe = self.rng;
                    let mut bytes = self.left;
                    let mut n = 0u32;
                    while bytes > 0 {
                        bytes = bytes.saturating_sub(u64::from(self.size.draw(&mut probe)));
                        n += 1;
                    }
                    opens = Some(n);
                }
                let len = (u64::from(self.size.draw(&mut self.rng)).min(self.left)) as u32;
                self.left -= u64::from(len);
                let next = if self.left > 0 {
                    now_ns + gap_ns(len, peak_bps)
                } else {
                    self.epoch_ns + 1e9 / fps
                };
                (
                    Emit {
                        len,
                        opens_burst: opens,
                    },
                    Next::At(next.max(now_ns)),
                )
            }
        }
    }

    fn start_burst_if_idle(&mut self, burst: &BurstDist) -> Option<u32> {
        if self.left == 0 {
            let n = burst.draw(&mut self.rng);
            self.left = u64::from(n);
            Some(n)
        } else {
            None
        }
    }

    /// A request-response flow's response completed at `now_ns`: when the next one starts.
    pub fn think(&mut self, now_ns: f64) -> Option<f64> {
        match self.spec {
            ArrivalSpec::RequestResponse {
                think_us,
                think_exp,
                ..
            } => Some(
                now_ns
                    + if think_exp {
                        exponential(&mut self.rng, think_us * 1e3)
                    } else {
                        think_us * 1e3
                    },
            ),
            _ => None,
        }
    }

    /// The long-run mean rate the process offers, bit/s (`None`: backlogged or closed
    /// loop, set by the link).
    pub fn offered_bps(&self) -> Option<f64> {
        let mean_len = self.size.mean_len();
        match self.spec {
            ArrivalSpec::Cbr { rate_bps } | ArrivalSpec::Poisson { rate_bps } => Some(rate_bps),
            ArrivalSpec::Vbr { rate_bps, .. } => Some(rate_bps),
            ArrivalSpec::OnOff {
                burst,
                off_us,
                peak_bps,
            } => {
                let b = burst.mean();
                // A burst of b packets spaced at the peak rate, the last one followed by
                // the idle time.
                let on_ns = b * gap_ns(1, peak_bps) * mean_len;
                Some(b * mean_len * 8e9 / (on_ns + off_us * 1e3))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empirical_file_parses_counts_and_comments() {
        let t = parse_empirical("# lens\n64 3\n\n1500  1 # big\n576\n").unwrap();
        assert_eq!(t, vec![(64, 3), (1500, 4), (576, 5)]);
        assert!(parse_empirical("").unwrap_err().contains("no packet"));
        assert!(parse_empirical("0 1").unwrap_err().contains("line 1"));
        assert!(parse_empirical("64 x").unwrap_err().contains("count"));
    }

    #[test]
    fn size_distributions_have_their_means() {
        let mut rng = WyRand::new(3);
        let dists = [
            SizeDist::Fixed { len: 700 },
            SizeDist::Uniform { min: 100, max: 300 },
            SizeDist::Trimodal { weights: [7, 4, 1] },
            SizeDist::Empirical {
                file: String::new(),
                table: vec![(100, 1), (1000, 4)],
            },
            SizeDist::Tso {
                mss: 1000,
                max_segments: 10,
                full: 0.0,
            },
        ];
        // Hand-computed means: 700; 200; (7*64 + 4*576 + 1500)/12 = 349.33; (100 + 3*1000)/4;
        // 1000 * 5.5.
        let want = [700.0, 200.0, 4252.0 / 12.0, 775.0, 5500.0];
        for (d, w) in dists.iter().zip(want) {
            assert!((d.mean_len() - w).abs() < 1e-9, "{d:?}");
            let n = 200_000;
            let avg = (0..n).map(|_| f64::from(d.draw(&mut rng))).sum::<f64>() / f64::from(n);
            assert!(
                (avg - w).abs() < 0.01 * w,
                "{d:?}: sample mean {avg}, want {w}"
            );
            for _ in 0..1000 {
                assert!(d.draw(&mut rng) <= d.max_len());
            }
        }
    }

    #[test]
    fn burst_distributions_have_their_means() {
        let mut rng = WyRand::new(5);
        let cases = [
            (BurstDist::Fixed { n: 4 }, 4.0),
            (BurstDist::Uniform { min: 1, max: 9 }, 5.0),
            (BurstDist::Geometric { mean: 8.0 }, 8.0),
        ];
        for (d, w) in cases {
            assert!((d.mean() - w).abs() < 1e-9);
            let n = 200_000;
            let avg = (0..n).map(|_| f64::from(d.draw(&mut rng))).sum::<f64>() / f64::from(n);
            assert!((avg - w).abs() < 0.02 * w, "{d:?}: {avg}");
        }
        // Pareto: the sample mean matches the computed mean of the capped law.
        let d = BurstDist::Pareto {
            min: 1,
            alpha: 1.5,
            max: 100,
        };
        let n = 400_000;
        let avg = (0..n).map(|_| f64::from(d.draw(&mut rng))).sum::<f64>() / f64::from(n);
        assert!(
            (avg - d.mean()).abs() < 0.02 * d.mean(),
            "{avg} {}",
            d.mean()
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = ArrivalSpec::Cbr { rate_bps: 0.0 }.check("g").unwrap_err();
        assert!(e.to_string().contains("group 'g'") && e.to_string().contains("rate_bps"));
        let e = ArrivalSpec::OnOff {
            burst: BurstDist::Uniform { min: 3, max: 2 },
            off_us: 1.0,
            peak_bps: 0.0,
        }
        .check("h")
        .unwrap_err();
        assert!(e.to_string().contains("3..=2"), "{e}");
        let mut s = SizeDist::Fixed { len: 70_000 };
        assert!(s.load("x").unwrap_err().to_string().contains("70000"));
    }
}
