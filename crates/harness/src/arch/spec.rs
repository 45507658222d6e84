//! What a run of the architecture benchmark is asked to do, and what it may be asked.
//!
//! The ranges are the command line's: a point lasts 10 ms to an hour (after a warm-up of a
//! tenth of it, at least 20 ms), 1 to 1024 greedy clients, mailboxes of a power of two in
//! 16..=65536 slots, a link of at most 10^15 bit/s (0: unlimited), 1 to 65535-byte packets,
//! a victim gap of 1 us to 1 s, scans of 1 to 65536 packets, greedy flows (when spread)
//! from the largest client count to [`MAX_FLOWS`]. `validate` checks them all and that the
//! algorithm takes its parameters, before any thread starts.

use std::sync::Arc;
use std::time::Duration;

use pspat_engine::Handoff;
use pspat_io::{Backend, Pkt};
use pspat_sched::registry::{self, Params};
use serde::{Serialize, Serializer};

use super::{Arch, ArchError, Setting};

/// The PSPAT engine's settings a run may change (the lock baseline has none of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Knobs {
    /// PSPAT's Delta_A: the arbiter reads each mailbox at most this often.
    #[serde(rename = "delta_a_ns", serialize_with = "as_ns")]
    pub delta_a: Duration,
    /// Decision aggregation: one decision covers up to this much link time (zero: off).
    #[serde(rename = "aggregate_ns", serialize_with = "as_ns")]
    pub aggregate: Duration,
    /// Most packets the arbiter releases in one scan.
    pub scan_batch: u32,
}

/// `d` in whole nanoseconds (saturating: no setting comes near 584 years).
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn as_ns<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(ns(*d))
}

/// What every point of a run shares.
#[derive(Clone)]
pub struct Setup {
    /// Scheduling algorithm: a name or alias of the registry.
    pub alg: String,
    /// Its parameters.
    pub params: Params,
    /// Where the packets leave (the same backend serves both architectures).
    pub backend: Arc<dyn Backend>,
    /// The backend as the caller named it, for reports.
    pub backend_name: String,
    /// Emulated link rate, bit/s (0: unlimited, decisions as fast as the engine makes them).
    pub rate_bps: u64,
    /// Packet length, bytes.
    pub len: u32,
    /// Measured time per point.
    pub duration: Duration,
    /// PSPAT hand-off mode.
    pub handoff: Handoff,
    /// Slots per client mailbox: what a client may have in flight in either architecture.
    pub mailbox: usize,
    /// Give the PSPAT arbiter a CPU of its own: pinned to the last CPU this process may
    /// use, PSPAT clients round-robin over the others; lock-based clients round-robin over
    /// all of them (they have no arbiter). With fewer than two CPUs nothing is pinned.
    pub pin: bool,
    /// The PSPAT engine's settings.
    pub knobs: Knobs,
}

/// Most link rate, bit/s.
const MAX_RATE_BPS: u64 = 1_000_000_000_000_000;

/// Most greedy flows a throughput run may spread its clients' packets over
/// (`ThroughputSpec::flows`): 2^20. Memory bounds it: every flow's ring is allocated when
/// the engine starts (at least 4 slots of 40 bytes, plus its entry), in the engine and
/// again in the limit loop, so 2^20 flows take some hundreds of megabytes.
pub const MAX_FLOWS: u32 = 1 << 20;

impl Setup {
    /// Checks every setting's range, and that the algorithm takes its parameters.
    pub fn validate(&self) -> Result<(), ArchError> {
        check_duration(self.duration)?;
        check_rate(self.rate_bps)?;
        if !(1..=65_535).contains(&self.len) {
            return Err(ArchError::range(Setting::Len, self.len, "1..=65535 bytes"));
        }
        if !self.mailbox.is_power_of_two() || !(16..=65_536).contains(&self.mailbox) {
            return Err(ArchError::range(
                Setting::Mailbox,
                self.mailbox,
                "a power of two in 16..=65536",
            ));
        }
        if !(1..=65_536).contains(&self.knobs.scan_batch) {
            return Err(ArchError::range(
                Setting::ScanBatch,
                self.knobs.scan_batch,
                "1..=65536",
            ));
        }
        registry::build::<Pkt>(&self.alg, &self.params, 16)?;
        Ok(())
    }
}

/// A point's measured time: 0.01..=3600 s.
fn check_duration(d: Duration) -> Result<(), ArchError> {
    let s = d.as_secs_f64();
    if !(0.01..=3600.0).contains(&s) {
        return Err(ArchError::range(
            Setting::Duration,
            format!("{s} s"),
            "0.01..=3600 s",
        ));
    }
    Ok(())
}

fn check_rate(bps: u64) -> Result<(), ArchError> {
    if bps > MAX_RATE_BPS {
        return Err(ArchError::range(
            Setting::Rate,
            format!("{bps} bit/s"),
            "0..=10^15 bit/s (0: unlimited)",
        ));
    }
    Ok(())
}

fn check_archs(archs: &[Arch]) -> Result<(), ArchError> {
    if archs.is_empty() {
        return Err(ArchError::Empty {
            setting: Setting::Archs,
        });
    }
    Ok(())
}

/// Client counts: at least one, each 1..=1024.
fn check_clients(clients: &[usize]) -> Result<(), ArchError> {
    if clients.is_empty() {
        return Err(ArchError::Empty {
            setting: Setting::Clients,
        });
    }
    if let Some(&n) = clients.iter().find(|n| !(1..=1024).contains(*n)) {
        return Err(ArchError::range(Setting::Clients, n, "1..=1024"));
    }
    Ok(())
}

/// Throughput mode: decisions per second, shares and victim latency against clients.
#[derive(Clone)]
pub struct ThroughputSpec {
    /// What every point shares.
    pub setup: Setup,
    /// Architectures, in the order run at each client count.
    pub archs: Vec<Arch>,
    /// Greedy client counts (the victim comes on top).
    pub clients: Vec<usize>,
    /// The victim's gap between packets; `None`: no victim.
    pub victim_gap: Option<Duration>,
    /// Greedy flows in all, spread over the greedy clients of each point: flow `j` is
    /// client `j % C`'s (of `C` clients, with its weight), and client `i` sends on flows
    /// `i, i + C, i + 2C, ...` in turn; the victim's flow comes after them. From the
    /// largest client count (one flow each) to [`MAX_FLOWS`]. `None`: one flow per greedy
    /// client.
    pub flows: Option<u32>,
}

impl ThroughputSpec {
    /// Checks the setup, the lists, the victim's gap (1 us..=1 s) and the flows.
    pub fn validate(&self) -> Result<(), ArchError> {
        check_archs(&self.archs)?;
        check_clients(&self.clients)?;
        if let Some(n) = self.flows {
            // Every client of every point needs a flow of its own.
            let most = self.clients.iter().copied().max().unwrap_or(1);
            if !(most..=MAX_FLOWS as usize).contains(&(n as usize)) {
                return Err(ArchError::range(
                    Setting::Flows,
                    n,
                    format!(
                        "{most}..={MAX_FLOWS} (a flow at least per client of the largest count)"
                    ),
                ));
            }
        }
        if let Some(gap) = self.victim_gap {
            if !(Duration::from_micros(1)..=Duration::from_secs(1)).contains(&gap) {
                return Err(ArchError::range(
                    Setting::VictimGap,
                    format!("{gap:?}"),
                    "1 us..=1 s",
                ));
            }
        }
        self.setup.validate()
    }
}

/// Stability mode: the shares of two greedy clients, weights 10:1, against the link rate.
#[derive(Clone)]
pub struct StabilitySpec {
    /// What every point shares (its `rate_bps` is not used: the rates are below).
    pub setup: Setup,
    /// Architectures, in the order run at each rate.
    pub archs: Vec<Arch>,
    /// Link rates, bit/s; empty: 0.5x to 2x the rate the PSPAT engine sustains
    /// ([`super::STABILITY_STEPS`]), measured first.
    pub rates_bps: Vec<u64>,
}

impl StabilitySpec {
    /// Checks the setup and the rates (none of them 0).
    pub fn validate(&self) -> Result<(), ArchError> {
        check_archs(&self.archs)?;
        if let Some(&r) = self
            .rates_bps
            .iter()
            .find(|&&r| !(1..=MAX_RATE_BPS).contains(&r))
        {
            // 0 would be the engine's unlimited link.
            return Err(ArchError::range(
                Setting::StabilityRates,
                format!("{r} bit/s"),
                "1..=10^15 bit/s (0 is an unlimited link, not a rate)",
            ));
        }
        self.setup.validate()
    }
}

/// Floor mode: the machine's own drain gaps, no engine.
#[derive(Clone, Debug)]
pub struct FloorSpec {
    /// Yielding threads where the greedy clients go, one point per count.
    pub clients: Vec<usize>,
    /// Measured time per point.
    pub duration: Duration,
    /// Place the spinner and the yielders as `Setup::pin` places the arbiter and the
    /// PSPAT clients.
    pub pin: bool,
}

impl FloorSpec {
    /// Checks the client counts and the duration.
    pub fn validate(&self) -> Result<(), ArchError> {
        check_clients(&self.clients)?;
        check_duration(self.duration)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid setup: qfq+ on the null backend, unlimited link, 60-byte packets, 20 ms.
    pub(crate) fn setup() -> Setup {
        Setup {
            alg: "qfq+".into(),
            params: Params::default(),
            backend: Arc::new(pspat_io::null::Null),
            backend_name: "null".into(),
            rate_bps: 0,
            len: 60,
            duration: Duration::from_millis(20),
            handoff: Handoff::Arbiter,
            mailbox: 512,
            pin: false,
            knobs: Knobs {
                delta_a: Duration::from_micros(1),
                aggregate: Duration::ZERO,
                scan_batch: 128,
            },
        }
    }

    fn throughput() -> ThroughputSpec {
        ThroughputSpec {
            setup: setup(),
            archs: vec![Arch::Pspat, Arch::Lock],
            clients: vec![1, 2],
            victim_gap: Some(Duration::from_micros(50)),
            flows: None,
        }
    }

    /// The message of `spec`'s validation error, which must be a usage error.
    fn refused(r: Result<(), ArchError>) -> String {
        let e = r.expect_err("refused");
        assert!(e.is_usage(), "{e}");
        e.to_string()
    }

    #[test]
    fn a_valid_spec_passes() {
        throughput().validate().unwrap();
        setup().validate().unwrap();
    }

    #[test]
    fn each_range_is_checked_and_named_with_its_value() {
        let with = |f: fn(&mut ThroughputSpec)| {
            let mut s = throughput();
            f(&mut s);
            refused(s.validate())
        };
        assert_eq!(
            with(|s| s.setup.duration = Duration::ZERO),
            "duration 0 s must be 0.01..=3600 s"
        );
        assert!(with(|s| s.setup.duration = Duration::from_secs(3601)).contains("duration 3601 s"));
        // The ends are in range.
        let mut s = throughput();
        s.setup.duration = Duration::from_millis(10);
        s.validate().unwrap();
        s.setup.duration = Duration::from_secs(3600);
        s.validate().unwrap();
        assert_eq!(
            with(|s| s.clients = vec![1, 0]),
            "client count 0 must be 1..=1024"
        );
        assert!(with(|s| s.clients = vec![1025]).contains("client count 1025"));
        assert!(with(|s| s.clients.clear()).contains("no client count"));
        assert!(with(|s| s.archs.clear()).contains("no architecture"));
        assert_eq!(
            with(|s| s.setup.mailbox = 100),
            "mailbox size 100 must be a power of two in 16..=65536"
        );
        assert!(with(|s| s.setup.mailbox = 8).contains("mailbox size 8"));
        assert!(with(|s| s.setup.rate_bps = MAX_RATE_BPS + 1).contains("rate 1000000000000001"));
        assert!(with(|s| s.setup.len = 0).contains("packet length 0"));
        assert!(with(|s| s.setup.knobs.scan_batch = 0).contains("scan batch 0"));
        assert!(with(|s| s.victim_gap = Some(Duration::from_secs(2))).contains("victim gap 2s"));
        assert!(with(|s| s.setup.alg = "nosuch".into()).contains("'nosuch'"));
    }

    /// Spread flows: at least one per client of the largest count, at most 2^20.
    #[test]
    fn flows_cover_every_client_and_stay_in_memory() {
        let with = |clients: Vec<usize>, flows| {
            let mut s = throughput();
            s.clients = clients;
            s.flows = Some(flows);
            s.validate()
        };
        let e = with(vec![4, 64, 16], 32).unwrap_err();
        assert_eq!(e.setting(), Some(Setting::Flows));
        assert_eq!(
            refused(Err(e)),
            "flow count 32 must be 64..=1048576 (a flow at least per client of the largest count)"
        );
        assert!(refused(with(vec![1], MAX_FLOWS + 1))
            .starts_with("flow count 1048577 must be 1..=1048576"));
        assert!(refused(with(vec![2], 0)).contains("flow count 0"));
        // The ends are in range, and so is no count at all.
        with(vec![4, 64, 16], 64).unwrap();
        with(vec![1], MAX_FLOWS).unwrap();
        throughput().validate().unwrap();
        // The clients are checked first: a bad count is named as such.
        assert!(refused(with(vec![0], 4)).contains("client count 0"));
    }

    #[test]
    fn stability_rates_must_be_rates() {
        let mut s = StabilitySpec {
            setup: setup(),
            archs: vec![Arch::Pspat],
            rates_bps: vec![20_000_000, 0],
        };
        assert_eq!(
            refused(s.validate()),
            "stability rate 0 bit/s must be 1..=10^15 bit/s (0 is an unlimited link, not a rate)"
        );
        s.rates_bps = vec![20_000_000];
        s.validate().unwrap();
        s.rates_bps.clear();
        s.validate().unwrap();
    }

    #[test]
    fn floor_checks_its_counts_and_duration() {
        let mut f = FloorSpec {
            clients: vec![1, 3],
            duration: Duration::from_millis(10),
            pin: false,
        };
        f.validate().unwrap();
        f.duration = Duration::from_millis(1);
        assert!(refused(f.validate()).contains("duration 0.001 s"));
        f.duration = Duration::from_millis(10);
        f.clients = vec![0];
        assert!(refused(f.validate()).contains("client count 0"));
    }

    #[test]
    fn knobs_serialise_as_nanoseconds() {
        let k = setup().knobs;
        let v = serde_json::to_value(k).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"delta_a_ns": 1000, "aggregate_ns": 0, "scan_batch": 128})
        );
    }
}
