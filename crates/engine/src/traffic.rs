//! Packet sources for client threads: a rate (or greedy), packet sizes, bursts, a flow.
//!
//! A source (a [`TrafficSpec`]) decides when the next burst is due and how long each
//! packet is; [`drive`] runs one on a client until told to stop. Paced sources are
//! open-loop (like UDP): a packet refused by a full mailbox is counted as `refused` and not
//! retried, so the offered load stays what was configured. Greedy sources are closed-loop:
//! they retry, backing off briefly, so they always have a packet waiting (the backlogged
//! senders of the papers).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::client::{Accepted, Client, SubmitError};
use crate::clock;

/// Packet length distribution (bytes on the wire).
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Always this length.
    Fixed(u32),
    /// Uniform in `min..=max`.
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length.
        max: u32,
    },
    /// 64, 576 and 1500 bytes with probabilities 7/12, 4/12, 1/12 (the classic IMIX).
    Imix,
    /// TSO-like: mostly 64 KB super-packets, some small ones (1/4 of 64..1500 bytes).
    Tso,
}

impl SizeDist {
    /// Mean length in bytes.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Fixed(n) => f64::from(n),
            SizeDist::Uniform { min, max } => (f64::from(min) + f64::from(max)) / 2.0,
            SizeDist::Imix => (7.0 * 64.0 + 4.0 * 576.0 + 1500.0) / 12.0,
            SizeDist::Tso => 0.75 * 65_535.0 + 0.25 * (64.0 + 1500.0) / 2.0,
        }
    }

    /// Largest length it can produce.
    pub fn max(&self) -> u32 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Uniform { max, .. } => max,
            SizeDist::Imix => 1500,
            SizeDist::Tso => 65_535,
        }
    }

    fn sample(&self, rng: &mut SplitMix) -> u32 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Uniform { min, max } => min + (rng.next() % u64::from(max - min + 1)) as u32,
            SizeDist::Imix => match rng.next() % 12 {
                0..=6 => 64,
                7..=10 => 576,
                _ => 1500,
            },
            SizeDist::Tso => {
                if rng.next() % 4 == 0 {
                    64 + (rng.next() % 1437) as u32
                } else {
                    65_535
                }
            }
        }
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "{n}"),
            SizeDist::Uniform { min, max } => write!(f, "{min}-{max}"),
            SizeDist::Imix => f.write_str("imix"),
            SizeDist::Tso => f.write_str("tso"),
        }
    }
}

impl FromStr for SizeDist {
    type Err = String;
    /// `1500`, `64-1500`, `imix` or `tso`.
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |t: &str| -> Result<u32, String> {
            let n: u32 = t
                .trim()
                .parse()
                .map_err(|_| format!("packet size `{t}` is not a number of bytes"))?;
            if n == 0 || n > 65_535 {
                return Err(format!("packet size {n} must be 1..=65535 bytes"));
            }
            Ok(n)
        };
        match s.trim() {
            "imix" => Ok(SizeDist::Imix),
            "tso" => Ok(SizeDist::Tso),
            t => match t.split_once('-') {
                Some((a, b)) => {
                    let (min, max) = (num(a)?, num(b)?);
                    if min > max {
                        return Err(format!("packet size range `{t}`: {min} > {max}"));
                    }
                    Ok(SizeDist::Uniform { min, max })
                }
                None => Ok(SizeDist::Fixed(num(t)?)),
            },
        }
    }
}

/// What one client sends.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficSpec {
    /// Offered load in bits per second; `None` = greedy (always backlogged).
    pub rate_bps: Option<u64>,
    /// Packet lengths.
    pub size: SizeDist,
    /// Packets sent back to back at each departure (1 = smooth).
    pub burst: u32,
    /// Scheduler flow (index in the engine's flows).
    pub flow: u32,
    /// Seed of the size sequence.
    pub seed: u64,
}

impl TrafficSpec {
    /// A greedy source of fixed-size packets.
    pub fn greedy(flow: u32, len: u32) -> Self {
        Self {
            rate_bps: None,
            size: SizeDist::Fixed(len),
            burst: 1,
            flow,
            seed: u64::from(flow) + 1,
        }
    }

    /// A paced source.
    pub fn paced(flow: u32, rate_bps: u64, size: SizeDist, burst: u32) -> Self {
        Self {
            rate_bps: Some(rate_bps),
            size,
            burst: burst.max(1),
            flow,
            seed: u64::from(flow) + 1,
        }
    }

    /// Time between bursts in ns for a paced source (mean sizes).
    pub fn interval_ns(&self) -> Option<u64> {
        let rate = self.rate_bps?;
        let bits = self.size.mean() * 8.0 * f64::from(self.burst);
        Some(((bits * 1e9 / rate.max(1) as f64) as u64).max(1))
    }
}

/// A tiny deterministic generator (SplitMix64): sizes only, not security.
#[derive(Clone, Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// What a source did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Packets accepted by the client's mailbox.
    pub accepted: u64,
    /// Paced sources: packets refused by a full mailbox and not retried.
    pub refused: u64,
    /// Greedy sources: times the mailbox was full and the source backed off.
    pub backoffs: u64,
    /// Scheduler drops reported back through `submit` (backpressure).
    pub dropped_reported: u64,
    /// Packets the client's classifier dropped (dummynet-style configurations; counted
    /// by the engine too, per reason).
    pub filtered: u64,
}

/// Anything a source can drive: the PSPAT client, or the lock-based baseline's client.
pub trait Submit {
    /// Submits one packet stamped `now_ns`.
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError>;
    /// Waits up to `timeout` (transmitting cleared packets if this client does that).
    fn pause(&mut self, timeout: Duration);
}

impl Submit for crate::lock::LockClient {
    #[inline]
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        crate::lock::LockClient::submit_at(self, flow, len, now_ns)
    }
    fn pause(&mut self, timeout: Duration) {
        std::thread::sleep(timeout);
    }
}

impl Submit for Client {
    #[inline]
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        Client::submit_at(self, flow, len, now_ns)
    }
    fn pause(&mut self, timeout: Duration) {
        self.wait_and_drain(timeout);
    }
}

/// Back-off of a greedy source facing a full mailbox: short enough to keep the mailbox
/// fed, long enough to leave the CPU to the arbiter on small machines.
const GREEDY_BACKOFF: Duration = Duration::from_micros(20);
/// Paced sources sleep when the next burst is further than this; otherwise they spin.
const SPIN_BELOW_NS: u64 = 60_000;

/// Runs `spec` on `client` until `stop` is set.
pub fn drive<C: Submit>(client: &mut C, spec: &TrafficSpec, stop: &AtomicBool) -> SourceStats {
    let mut rng = SplitMix(spec.seed);
    let mut stats = SourceStats::default();
    let interval = spec.interval_ns();
    let mut next_ns = clock::now_ns();
    // ORDERING: Relaxed: the stop flag carries no data.
    while !stop.load(Ordering::Relaxed) {
        let now = clock::now_ns();
        match interval {
            None => {
                let len = spec.size.sample(&mut rng);
                loop {
                    match client.submit_at(spec.flow, len, now) {
                        Ok(a) => {
                            stats.accepted += 1;
                            stats.dropped_reported += a.dropped_before;
                            break;
                        }
                        Err(SubmitError::Filtered(_)) => {
                            stats.filtered += 1;
                            break;
                        }
                        Err(SubmitError::MailboxFull) => {
                            stats.backoffs += 1;
                            client.pause(GREEDY_BACKOFF);
                            if stop.load(Ordering::Relaxed) {
                                return stats;
                            }
                        }
                        Err(_) => return stats,
                    }
                }
            }
            Some(iv) => {
                if now < next_ns {
                    let wait = next_ns - now;
                    if wait > SPIN_BELOW_NS {
                        client.pause(Duration::from_nanos(wait - SPIN_BELOW_NS / 2));
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                for _ in 0..spec.burst {
                    let len = spec.size.sample(&mut rng);
                    match client.submit_at(spec.flow, len, now) {
                        Ok(a) => {
                            stats.accepted += 1;
                            stats.dropped_reported += a.dropped_before;
                        }
                        Err(SubmitError::MailboxFull) => stats.refused += 1,
                        Err(SubmitError::Filtered(_)) => stats.filtered += 1,
                        Err(_) => return stats,
                    }
                }
                next_ns += iv;
                // Far behind (the thread was descheduled): do not catch up in one burst.
                if now > next_ns + 100 * iv.max(1_000) {
                    next_ns = now;
                }
            }
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_errors_name_the_token() {
        assert_eq!("1500".parse(), Ok(SizeDist::Fixed(1500)));
        assert_eq!(
            "64-1500".parse(),
            Ok(SizeDist::Uniform { min: 64, max: 1500 })
        );
        assert_eq!("imix".parse(), Ok(SizeDist::Imix));
        assert!("0".parse::<SizeDist>().unwrap_err().contains("1..=65535"));
        assert!("abc".parse::<SizeDist>().unwrap_err().contains("`abc`"));
        assert!("900-100"
            .parse::<SizeDist>()
            .unwrap_err()
            .contains("900 > 100"));
        for d in [
            SizeDist::Fixed(60),
            SizeDist::Uniform { min: 1, max: 9 },
            SizeDist::Imix,
        ] {
            assert_eq!(d.to_string().parse(), Ok(d));
        }
    }

    #[test]
    fn samples_stay_in_range_and_match_the_mean() {
        let mut rng = SplitMix(7);
        for d in [
            SizeDist::Uniform { min: 64, max: 1500 },
            SizeDist::Imix,
            SizeDist::Tso,
        ] {
            let n = 200_000;
            let mut sum = 0.0;
            for _ in 0..n {
                let s = d.sample(&mut rng);
                assert!((1..=d.max()).contains(&s));
                sum += f64::from(s);
            }
            let mean = sum / f64::from(n);
            assert!(
                (mean / d.mean() - 1.0).abs() < 0.02,
                "{d}: {mean} vs {}",
                d.mean()
            );
        }
    }

    #[test]
    fn paced_interval_follows_rate_size_and_burst() {
        let s = TrafficSpec::paced(0, 8_000_000, SizeDist::Fixed(1000), 4);
        // 4 x 1000 bytes = 32000 bits at 8 Mbit/s = 4 ms.
        assert_eq!(s.interval_ns(), Some(4_000_000));
        assert_eq!(TrafficSpec::greedy(0, 60).interval_ns(), None);
    }

    /// A fake client that records what was submitted and refuses every third packet.
    struct Fake {
        got: Vec<(u32, u32)>,
        n: u32,
    }
    impl Submit for Fake {
        fn submit_at(&mut self, flow: u32, len: u32, _now: u64) -> Result<Accepted, SubmitError> {
            self.n += 1;
            if self.n % 3 == 0 {
                return Err(SubmitError::MailboxFull);
            }
            self.got.push((flow, len));
            Ok(Accepted { dropped_before: 1 })
        }
        fn pause(&mut self, _t: Duration) {}
    }

    #[test]
    fn greedy_retries_and_paced_counts_refusals() {
        let stop = AtomicBool::new(false);
        let mut f = Fake { got: vec![], n: 0 };
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                stop.store(true, Ordering::Relaxed);
            });
            let st = drive(&mut f, &TrafficSpec::greedy(3, 60), &stop);
            assert_eq!(st.accepted as usize, f.got.len());
            assert_eq!(st.dropped_reported, st.accepted);
            assert!(st.backoffs > 0 && st.refused == 0);
        });
        assert!(f.got.iter().all(|&(fl, l)| fl == 3 && l == 60));
        let stop = AtomicBool::new(false);
        let mut f = Fake { got: vec![], n: 0 };
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::Relaxed);
            });
            // 1000-byte packets at 80 Mbit/s: one every 100 us, about 500 in 50 ms.
            let spec = TrafficSpec::paced(1, 80_000_000, SizeDist::Fixed(1000), 1);
            let st = drive(&mut f, &spec, &stop);
            assert!(st.refused > 0 && st.backoffs == 0);
            let offered = st.accepted + st.refused;
            assert!((50..=700).contains(&offered), "{offered} offered in 50 ms");
        });
    }
}
