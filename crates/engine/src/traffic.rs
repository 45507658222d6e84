//! Packet sources for client threads: a rate (or greedy), packet sizes, bursts, a flow.
//!
//! A source (a [`TrafficSpec`]) decides when the next burst is due and how long each
//! packet is; [`drive`] runs one on a client until told to stop (`pspat run`'s tenants).
//! Paced sources are open-loop (like UDP): a packet refused by a full mailbox is counted as
//! `refused` and not retried, so the offered load stays what was configured. Greedy
//! sources are closed-loop: they retry after a pause of [`DRIVE_FULL_PAUSE`], so they
//! always have a packet waiting (the backlogged senders of the papers).
//!
//! The architecture benchmark (`pspat bench arch`) runs two sources of its own, as lean as
//! a client loop can be so that they measure the architecture and not the generator:
//! [`greedy`] (fixed-size packets as fast as the mailbox takes them, one clock reading per
//! [`GREEDY_STAMP_EVERY`] packets, backing off with [`Submit::back_off`]; [`greedy_spread`]
//! is the same loop over several flows in turn) and [`periodic`]
//! (one packet every gap on a schedule that does not drift, idling with
//! [`Submit::pause`] in between: the benchmark's latency "victim").
//!
//! Every source is generic over [`Submit`], so each client type gets its own
//! monomorphised loop.

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
    /// `1500`, `64-1500`, `imix` or `tso`; sizes as `pspat_units::parse_bytes` reads them
    /// (`1500`, `1500B`, `9KB`).
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |t: &str| -> Result<u32, String> {
            let n = pspat_units::parse_bytes(t.trim())
                .map_err(|e| format!("packet size `{t}`: {e}"))?;
            if n == 0 || n > 65_535 {
                return Err(format!("packet size {n} must be 1..=65535 bytes"));
            }
            Ok(n as u32)
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
    /// Greedy sources: times the mailbox was full and the source waited before retrying
    /// ([`Submit::back_off`] in [`greedy`], [`Submit::pause`] in [`drive`]).
    pub backoffs: u64,
    /// Scheduler drops reported back through `submit` (backpressure).
    pub dropped_reported: u64,
    /// Packets the client's classifier dropped (dummynet-style configurations; counted
    /// by the engine too, per reason).
    pub filtered: u64,
}

/// Anything a source can drive: the PSPAT client, or the lock-based baseline's client.
///
/// The two ways of waiting differ in what the source wants to happen meanwhile:
/// [`Submit::pause`] waits for a given time, leaving the CPU to the other threads (a paced
/// source before its next packet; [`drive`]'s greedy source on a full mailbox, which is
/// a load that gives way, see [`DRIVE_FULL_PAUSE`]); [`Submit::back_off`] lets the
/// threads that free slots run and returns as soon as it can, for a source whose figure
/// is how fast the mailbox is refilled ([`greedy`], the architecture benchmark's). The
/// benchmark's figures depend on both (a sleep where a yield was meant leaves the mailbox
/// empty for a timer's slack), so each implementation says what it does and why.
pub trait Submit {
    /// Submits one packet stamped `now_ns`.
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError>;
    /// The time to stamp packets with and to pace by: [`clock::now_ns`], the engine
    /// clock. (The sources read time only here, so that a test's client can run them on
    /// a clock of its own.)
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        clock::now_ns()
    }
    /// Waits `timeout` (transmitting cleared packets if this client does that), without
    /// spinning.
    fn pause(&mut self, timeout: Duration);
    /// The mailbox is full and the source wants to send again as soon as a slot comes
    /// back: lets the threads that free slots run, for at most about `at_most`. The
    /// default pauses, which always lets them run; the engine's clients do better.
    fn back_off(&mut self, at_most: Duration) {
        self.pause(at_most);
    }
}

impl Submit for crate::lock::LockClient {
    #[inline]
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        crate::lock::LockClient::submit_at(self, flow, len, now_ns)
    }
    /// Sleeps: nothing of this client's needs it meanwhile (the scheduler runs under the
    /// lock in whichever client submits next, or in the watchdog), and a sleeping client
    /// leaves its CPU to the others; spinning would take a core on a small machine.
    fn pause(&mut self, timeout: Duration) {
        std::thread::sleep(timeout);
    }
    /// Yields: the slots come back as the other clients run the scheduler under the lock,
    /// so let them run, and try again as soon as the OS gives this thread its CPU back
    /// (a sleep would keep it away for at least a timer's slack, tens of microseconds).
    fn back_off(&mut self, _at_most: Duration) {
        std::thread::yield_now();
    }
}

impl Submit for Client {
    #[inline]
    fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        Client::submit_at(self, flow, len, now_ns)
    }
    /// [`Client::wait_and_drain`]: in the client hand-off mode the client transmits what
    /// the arbiter clears meanwhile (woken by the arbiter, no spinning); in the other modes
    /// it sleeps, as the lock-based client does.
    fn pause(&mut self, timeout: Duration) {
        self.wait_and_drain(timeout);
    }
    /// In the client hand-off mode, [`Client::wait_and_drain`]: the slots come back only
    /// when this client transmits its cleared packets, so it waits for them (up to
    /// `at_most`) and sends them. Otherwise it yields: the arbiter frees slots as it
    /// schedules, and a yield lets it (and the other clients) have the CPU without
    /// keeping this thread away for a timer's slack as a sleep would.
    fn back_off(&mut self, at_most: Duration) {
        if self.transmits_itself() {
            self.wait_and_drain(at_most);
        } else {
            std::thread::yield_now();
        }
    }
}

/// How long [`drive`]'s greedy source pauses ([`Submit::pause`], a sleep) when its mailbox
/// is full. `pspat run`'s tenants are a load, not a measurement: one thread per client,
/// as many as the scenario has, on a machine whose CPUs the arbiter shares with them. A
/// greedy source that yielded instead (as [`greedy`] does, to measure how fast the
/// mailbox refills) would keep every one of them runnable and take CPU time from the
/// arbiter that frees its slots; sleeping gives it way. 20 us (plus the timer's slack,
/// 50 us by default) is short against what a full mailbox holds (a 512-slot mailbox's 510
/// packets of 1500 bytes take 612 us at 10 Gbit/s), so the mailbox does not run dry
/// meanwhile.
pub const DRIVE_FULL_PAUSE: Duration = Duration::from_micros(20);
/// Paced sources sleep when the next burst is further than this; otherwise they spin.
const SPIN_BELOW_NS: u64 = 60_000;
/// Longest single [`Submit::pause`] of a paced source ([`drive`], [`periodic`]): a longer
/// wait is taken in pauses of at most this, each followed by a look at the stop flag, so
/// a source sees a stop request within this long whatever its rate (at 1 bit/s a
/// 200-byte packet is due every 1600 s; the flag is a plain boolean, which cannot wake a
/// sleeper). A source that slow wakes 50 times a second for nothing, which costs nothing
/// measurable; one fast enough to matter never waits this long.
pub const PAUSE_AT_MOST: Duration = Duration::from_millis(20);

/// Runs `spec` on `client` until `stop` is set (which it sees within [`PAUSE_AT_MOST`]
/// whatever its rate).
pub fn drive<C: Submit>(client: &mut C, spec: &TrafficSpec, stop: &AtomicBool) -> SourceStats {
    let mut rng = SplitMix(spec.seed);
    let mut stats = SourceStats::default();
    let interval = spec.interval_ns();
    let mut next_ns = client.now_ns();
    // ORDERING: Relaxed: the stop flag carries no data.
    while !stop.load(Ordering::Relaxed) {
        let now = client.now_ns();
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
                            client.pause(DRIVE_FULL_PAUSE);
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
                        let pause = Duration::from_nanos(wait - SPIN_BELOW_NS / 2);
                        client.pause(pause.min(PAUSE_AT_MOST));
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

/// [`greedy`] stamps its packets with one clock reading per this many submissions (and a
/// fresh one after every refusal), as packet generators stamp a burst: on a VM a reading
/// (vDSO `clock_gettime`) costs as much as the rest of a submit. The stamp is then up to a
/// burst's generation time early; the benchmark measures only the [`periodic`] victim's
/// latency, and it reads the clock for every packet.
pub const GREEDY_STAMP_EVERY: u32 = 16;

/// How long [`greedy`] lets a full mailbox's slots come back, at most (see
/// [`Submit::back_off`]).
pub const GREEDY_BACK_OFF: Duration = Duration::from_micros(50);

/// The architecture benchmark's greedy client: submits `len`-byte packets on `flow` as
/// fast as the mailbox takes them until `stop` is set or the client refuses for good
/// (stopped engine, bad length, or a packet the client's rules filter: every packet is
/// the same, so every one would be; counted in `filtered`). A full mailbox makes it
/// [`Submit::back_off`] (counted as `backoffs`) and retry with a fresh stamp.
pub fn greedy<C: Submit>(client: &mut C, flow: u32, len: u32, stop: &AtomicBool) -> SourceStats {
    greedy_over(client, One(flow), len, stop)
}

/// [`greedy`] over `count` flows, `first + k * stride` for `k` in `0..count`: one packet
/// on each in turn, round robin in the order of `k` (a refused packet is retried on the
/// same flow, so the flows get their packets in strict rotation). The architecture
/// benchmark's `--flows`: greedy client `i` of `C` sends on flows `i, i + C, i + 2C, ...`.
/// With `count` 0 there is nothing to send on, and it returns at once; the flows must be
/// below 2^32 (a flow past the engine's is refused, and ends the loop).
pub fn greedy_spread<C: Submit>(
    client: &mut C,
    first: u32,
    stride: u32,
    count: u32,
    len: u32,
    stop: &AtomicBool,
) -> SourceStats {
    if count == 0 {
        return SourceStats::default();
    }
    let spread = Spread {
        first,
        stride,
        count,
        k: 0,
        flow: first,
    };
    greedy_over(client, spread, len, stop)
}

/// Where a greedy source's packets go: the flow of the next one, and the move to the
/// flow after it once a packet was accepted.
trait Rotation {
    fn flow(&self) -> u32;
    fn advance(&mut self);
}

/// Always the same flow: `advance` does nothing, so [`greedy_over`] on it compiles to the
/// loop of a constant flow. Sharing the loop does not slow [`greedy`]: its machine code
/// (x86-64, release, for both client types) has the same instructions as the loop it
/// replaced, three of them in another order within one block.
struct One(u32);

impl Rotation for One {
    #[inline(always)]
    fn flow(&self) -> u32 {
        self.0
    }
    #[inline(always)]
    fn advance(&mut self) {}
}

/// `count` (at least 1) flows `first + k * stride`, round robin: `flow` is the `k`-th.
struct Spread {
    first: u32,
    stride: u32,
    count: u32,
    k: u32,
    flow: u32,
}

impl Rotation for Spread {
    #[inline(always)]
    fn flow(&self) -> u32 {
        self.flow
    }
    #[inline(always)]
    fn advance(&mut self) {
        self.k += 1;
        if self.k == self.count {
            self.k = 0;
            self.flow = self.first;
        } else {
            // Wrapping: a flow past 2^32 cannot be the engine's, and the client refuses it.
            self.flow = self.flow.wrapping_add(self.stride);
        }
    }
}

/// The greedy loop, over the flows `flows` names in turn (moving on after each accepted
/// packet): [`greedy`] and [`greedy_spread`], each monomorphised with its own rotation.
#[inline(always)]
fn greedy_over<C: Submit, R: Rotation>(
    client: &mut C,
    mut flows: R,
    len: u32,
    stop: &AtomicBool,
) -> SourceStats {
    let mut stats = SourceStats::default();
    let mut now = client.now_ns();
    let mut until_stamp = GREEDY_STAMP_EVERY;
    // ORDERING: Relaxed: the flag only ends the loop; the join orders everything else.
    while !stop.load(Ordering::Relaxed) {
        if until_stamp == 0 {
            now = client.now_ns();
            until_stamp = GREEDY_STAMP_EVERY;
        }
        until_stamp -= 1;
        match client.submit_at(flows.flow(), len, now) {
            Ok(a) => {
                stats.accepted += 1;
                stats.dropped_reported += a.dropped_before;
                flows.advance();
            }
            Err(SubmitError::MailboxFull) => {
                stats.backoffs += 1;
                client.back_off(GREEDY_BACK_OFF);
                until_stamp = 0;
            }
            Err(SubmitError::Filtered(_)) => {
                stats.filtered += 1;
                break;
            }
            Err(_) => break,
        }
    }
    stats
}

/// The architecture benchmark's victim: one `len`-byte packet on `flow` every `gap`,
/// stamped when it is submitted, on a schedule that does not drift (the next packet is
/// due a gap after the previous one was due, not after it left). A thread descheduled for
/// longer than a gap skips what it missed rather than bursting to catch up. A packet
/// refused by a full mailbox is counted as `refused` and not retried (open loop). Between
/// packets the client [`Submit::pause`]s (at most [`PAUSE_AT_MOST`] at a time): a victim
/// that spun would take a core from the greedy clients and the arbiter on a small machine.
pub fn periodic<C: Submit>(
    client: &mut C,
    flow: u32,
    len: u32,
    gap: Duration,
    stop: &AtomicBool,
) -> SourceStats {
    let gap_ns = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX).max(1);
    let mut stats = SourceStats::default();
    let mut next = client.now_ns();
    // ORDERING: as in `greedy`.
    while !stop.load(Ordering::Relaxed) {
        let now = client.now_ns();
        if now >= next {
            match client.submit_at(flow, len, client.now_ns()) {
                Ok(a) => {
                    stats.accepted += 1;
                    stats.dropped_reported += a.dropped_before;
                }
                Err(SubmitError::MailboxFull) => stats.refused += 1,
                Err(SubmitError::Filtered(_)) => stats.filtered += 1,
                Err(_) => break,
            }
            next = next.saturating_add(gap_ns);
            if next < now {
                // Descheduled for longer than a gap: skip, do not burst to catch up.
                next = now.saturating_add(gap_ns);
            }
        } else {
            client.pause(Duration::from_nanos(next - now).min(PAUSE_AT_MOST));
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
        assert_eq!("9KB".parse(), Ok(SizeDist::Fixed(9216)));
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
    /// A client on a clock of its own: every reading advances it by `read_ns`, a pause
    /// by what was asked plus `late_ns` (a late wake-up), and the `stall_at`-th pause by
    /// `stall_ns` more; it refuses when `refuse` says so and stops (refusing for good)
    /// once its clock passes `end_ns` or after `max_attempts` submissions.
    struct Clocked {
        now: std::cell::Cell<u64>,
        read_ns: u64,
        late_ns: u64,
        stall_at: Option<(usize, u64)>,
        refuse: fn(usize) -> bool,
        end_ns: u64,
        max_attempts: usize,
        /// Stamp of each submission attempt, and whether it was refused.
        attempts: Vec<(u64, bool)>,
        /// The flow of each submission attempt.
        flows: Vec<u32>,
        pauses: Vec<Duration>,
        back_offs: Vec<Duration>,
        /// Clock readings taken.
        reads: std::cell::Cell<u64>,
        /// When the stalled pause ended.
        stall_end: Option<u64>,
    }

    impl Clocked {
        fn new(refuse: fn(usize) -> bool) -> Self {
            Self {
                now: std::cell::Cell::new(1_000_000),
                read_ns: 1,
                late_ns: 0,
                stall_at: None,
                refuse,
                end_ns: u64::MAX,
                max_attempts: usize::MAX,
                attempts: vec![],
                flows: vec![],
                pauses: vec![],
                back_offs: vec![],
                reads: std::cell::Cell::new(0),
                stall_end: None,
            }
        }
    }

    impl Submit for Clocked {
        fn submit_at(&mut self, flow: u32, _len: u32, now: u64) -> Result<Accepted, SubmitError> {
            if self.now.get() > self.end_ns || self.attempts.len() == self.max_attempts {
                return Err(SubmitError::Stopped);
            }
            let refused = (self.refuse)(self.attempts.len());
            self.attempts.push((now, refused));
            self.flows.push(flow);
            if refused {
                return Err(SubmitError::MailboxFull);
            }
            Ok(Accepted { dropped_before: 0 })
        }
        fn now_ns(&self) -> u64 {
            self.reads.set(self.reads.get() + 1);
            self.now.set(self.now.get() + self.read_ns);
            self.now.get()
        }
        fn pause(&mut self, t: Duration) {
            let mut ns = t.as_nanos() as u64 + self.late_ns;
            if let Some((at, stall)) = self.stall_at {
                if self.pauses.len() == at {
                    ns += stall;
                }
            }
            self.pauses.push(t);
            self.now.set(self.now.get() + ns);
            if ns > self.late_ns + t.as_nanos() as u64 {
                self.stall_end = Some(self.now.get());
            }
        }
        fn back_off(&mut self, t: Duration) {
            self.back_offs.push(t);
        }
    }

    #[test]
    fn greedy_reads_the_clock_once_a_burst_and_again_after_a_refusal() {
        let stop = AtomicBool::new(false);
        // Every 37th attempt is refused; the client stops after 1000.
        let mut c = Clocked::new(|i| i % 37 == 36);
        c.max_attempts = 1000;
        let st = greedy(&mut c, 0, 60, &stop);
        let refused = c.attempts.iter().filter(|a| a.1).count();
        assert_eq!(refused, 1000 / 37);
        assert_eq!(st.accepted as usize, 1000 - refused);
        assert_eq!(st.backoffs as usize, refused);
        assert!(c.back_offs.iter().all(|&t| t == GREEDY_BACK_OFF));
        assert!(
            c.pauses.is_empty(),
            "a full mailbox is a back-off, not a pause"
        );
        // Where the stamp must change: every GREEDY_STAMP_EVERY attempts, counted afresh
        // from the attempt after each refusal. (The clock moves on every reading.)
        let mut want = Vec::new();
        let mut until = GREEDY_STAMP_EVERY;
        for (i, &(_, refused)) in c.attempts.iter().enumerate() {
            if until == 0 {
                want.push(i);
                until = GREEDY_STAMP_EVERY;
            }
            until -= 1;
            if refused {
                until = 0;
            }
        }
        let changed: Vec<usize> = (1..c.attempts.len())
            .filter(|&i| c.attempts[i].0 != c.attempts[i - 1].0)
            .collect();
        assert_eq!(changed, want);
        // One reading before the loop, one per burst: about 1000 / 16 + one per refusal.
        assert_eq!(c.reads.get() as usize, 1 + want.len());
        assert!(
            c.reads.get() < 1000 / 16 + 1000 / 37 + 3,
            "{}",
            c.reads.get()
        );
    }

    /// `greedy_spread` sends on exactly its flows, one accepted packet each in turn, and
    /// retries a refused packet on the same flow; `greedy` and a spread of one flow stay on
    /// theirs; a spread of no flows sends nothing.
    #[test]
    fn greedy_spread_cycles_through_exactly_its_flows_in_order() {
        let stop = AtomicBool::new(false);
        // Every 5th attempt refused; the client stops after 100.
        let mut c = Clocked::new(|i| i % 5 == 4);
        c.max_attempts = 100;
        // Client 1 of 3 with 11 flows in all: flows 1, 4, 7 and 10.
        let st = greedy_spread(&mut c, 1, 3, 4, 60, &stop);
        let accepted: Vec<u32> = c
            .flows
            .iter()
            .zip(&c.attempts)
            .filter(|(_, a)| !a.1)
            .map(|(&f, _)| f)
            .collect();
        assert_eq!((accepted.len(), st.accepted, st.backoffs), (80, 80, 20));
        let want: Vec<u32> = [1, 4, 7, 10].into_iter().cycle().take(80).collect();
        assert_eq!(accepted, want);
        for (i, a) in c.attempts.iter().enumerate().take(99) {
            if a.1 {
                assert_eq!(c.flows[i + 1], c.flows[i], "attempt {i} refused");
            }
        }
        // The stamps are greedy's: one reading per burst, a fresh one after a refusal.
        assert!(c.reads.get() < 100 / 16 + 20 + 3, "{}", c.reads.get());

        for one in [true, false] {
            let mut c = Clocked::new(|i| i % 5 == 4);
            c.max_attempts = 50;
            let st = if one {
                greedy_spread(&mut c, 7, 3, 1, 60, &stop)
            } else {
                greedy(&mut c, 7, 60, &stop)
            };
            assert_eq!(st.accepted, 40);
            assert!(c.flows.iter().all(|&f| f == 7), "{:?}", c.flows);
        }
        let mut c = Clocked::new(|_| false);
        assert_eq!(
            greedy_spread(&mut c, 0, 1, 0, 60, &stop),
            SourceStats::default()
        );
        assert!(c.attempts.is_empty());
    }

    /// A paced source of one packet every 1600 s and a periodic one of one every 1800 s
    /// wait in pauses of at most a tenth of a second, so they see a stop request that
    /// soon, and still keep to their schedule.
    #[test]
    fn slow_sources_pause_in_slices_and_keep_their_schedule() {
        let slice = Duration::from_millis(100);
        let stop = AtomicBool::new(false);
        let mut c = Clocked::new(|_| false);
        // Refuses for good once its clock passes the second packet's time.
        c.end_ns = c.now.get() + 1_700_000_000_000;
        // 200 bytes at 1 bit/s: one packet every 1600 s.
        let spec = TrafficSpec::paced(0, 1, SizeDist::Fixed(200), 1);
        let st = drive(&mut c, &spec, &stop);
        assert_eq!(st.accepted, 2, "{st:?}");
        assert!(c.pauses.iter().all(|&p| p <= slice));
        let slept: Duration = c.pauses.iter().sum();
        assert!(slept >= Duration::from_secs(1599), "{slept:?}");
        let gap = c.attempts[1].0 - c.attempts[0].0;
        assert!(
            gap.abs_diff(1_600_000_000_000) < 1_000_000,
            "{gap} ns apart"
        );

        let mut c = Clocked::new(|_| false);
        c.end_ns = c.now.get() + 1_900_000_000_000;
        let st = periodic(&mut c, 0, 200, Duration::from_secs(1800), &stop);
        assert_eq!(st.accepted, 2, "{st:?}");
        assert!(c.pauses.iter().all(|&p| p <= slice));
        let gap = c.attempts[1].0 - c.attempts[0].0;
        assert!(
            gap.abs_diff(1_800_000_000_000) < 1_000_000,
            "{gap} ns apart"
        );
    }

    /// A client whose rules filter every packet.
    struct Denied(u32);
    impl Submit for Denied {
        fn submit_at(&mut self, _flow: u32, _len: u32, _now: u64) -> Result<Accepted, SubmitError> {
            self.0 += 1;
            Err(SubmitError::Filtered(
                pspat_config::classify::DropCause::NoRuleMatched,
            ))
        }
        fn pause(&mut self, _t: Duration) {}
    }

    #[test]
    fn greedy_stops_at_a_filtered_packet() {
        // Every packet is the same, so every one would be filtered: no spinning on them.
        let stop = AtomicBool::new(false);
        let mut c = Denied(0);
        let st = greedy(&mut c, 0, 60, &stop);
        assert_eq!((c.0, st.filtered, st.accepted), (1, 1, 0));
    }

    #[test]
    fn greedy_and_periodic_end_on_the_flag() {
        let stop = AtomicBool::new(true);
        let mut c = Clocked::new(|_| false);
        assert_eq!(greedy(&mut c, 0, 60, &stop), SourceStats::default());
        let st = periodic(&mut c, 0, 60, Duration::from_micros(10), &stop);
        assert_eq!(st, SourceStats::default());
        assert!(c.attempts.is_empty());
    }

    #[test]
    fn periodic_keeps_to_its_schedule_despite_late_wake_ups() {
        let stop = AtomicBool::new(false);
        // 10 us gaps for 10 ms, each pause waking 3 us late: on schedule, 1000 packets
        // (a schedule restarted from each send would drift to one per 13 us, 770).
        let mut c = Clocked::new(|_| false);
        c.late_ns = 3_000;
        c.end_ns = c.now.get() + 10_000_000;
        let st = periodic(&mut c, 0, 60, Duration::from_micros(10), &stop);
        assert!((999..=1001).contains(&st.accepted), "{st:?}");
        assert!(c.pauses.iter().all(|&p| p <= Duration::from_micros(10)));
        // Packet k is due k gaps after the first and stamped when sent: as late as one
        // wake-up (3 us), never early, and the lateness does not add up.
        let first = c.attempts[0].0;
        for (k, a) in c.attempts.iter().enumerate() {
            let late = a.0 - first - k as u64 * 10_000;
            assert!(late <= 3_100, "packet {k} is {late} ns behind its schedule");
        }
    }

    #[test]
    fn periodic_skips_what_a_long_stall_missed_and_does_not_retry_refusals() {
        let stop = AtomicBool::new(false);
        // Every packet refused; the 5th pause lasts 35 gaps longer.
        let mut c = Clocked::new(|_| true);
        c.stall_at = Some((5, 350_000));
        c.end_ns = c.now.get() + 10_000_000;
        let st = periodic(&mut c, 0, 60, Duration::from_micros(10), &stop);
        assert_eq!(st.accepted, 0);
        assert_eq!(
            st.refused as usize,
            c.attempts.len(),
            "one attempt per packet"
        );
        // 1000 gaps, 35 of them missed and not made up.
        assert!((960..=970).contains(&st.refused), "{st:?}");
        let end = c.stall_end.expect("the stall happened");
        let after = c
            .attempts
            .iter()
            .filter(|a| (end..end + 10_000).contains(&a.0))
            .count();
        assert_eq!(after, 1, "a burst to catch up after the stall");
    }
}
