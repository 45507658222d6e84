//! The scenario a run executes: an engine configuration plus tenants that generate
//! traffic. Built in ([`Scenario::builtin`]), read from TOML ([`crate::file`]), and
//! changed field by field (the command line's overrides) through setters that read text
//! as the file does.
//!
//! Quantities are read by `pspat_units`, with its one rule for a bare number (bit/s for a
//! rate, seconds for a duration); what is checked on top of parsing (ranges, a link of 0
//! bit/s written as `unlimited`) is checked here, by the setters and by
//! [`Scenario::validate`], with messages that name the field.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pspat_engine::traffic::{SizeDist, TrafficSpec};
use pspat_engine::{ClientConfig, EngineConfig, Handoff};
use pspat_sched::reference::fluid::max_min_fair;
use pspat_sched::registry::Params;
use pspat_sched::FlowParams;
use pspat_units::{parse_bandwidth, parse_duration_ns, HumanBandwidth};

use crate::error::ScenarioError;
use crate::keys::TenantAddrs;

/// Fastest link, and fastest per-client offered load, a scenario takes (10 Tbit/s).
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Most client threads one tenant may have.
pub const MAX_TENANT_CLIENTS: u32 = 256;

fn invalid(field: &str, message: impl fmt::Display) -> ScenarioError {
    ScenarioError::Invalid(format!("{field}: {message}"))
}

/// A duration field (`5s`, `500ms`, `1us`; a bare number is seconds), in ns.
pub(crate) fn duration_ns(field: &str, text: &str) -> Result<u64, ScenarioError> {
    parse_duration_ns(text).map_err(|e| invalid(field, e))
}

/// `rate_bps` is within 1 bit/s..=[`MAX_RATE_BPS`].
fn check_rate(field: &str, rate_bps: u64, zero: &str) -> Result<(), ScenarioError> {
    if rate_bps == 0 || rate_bps > MAX_RATE_BPS {
        return Err(invalid(
            field,
            format!("{rate_bps} bit/s is not 1 bit/s..10 Tbit/s{zero}"),
        ));
    }
    Ok(())
}

/// One tenant: a scheduler flow and the client threads feeding it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tenant {
    pub name: String,
    pub weight: u32,
    pub clients: u32,
    /// Per client; `None` = greedy.
    pub rate_bps: Option<u64>,
    pub size: SizeDist,
    pub burst: u32,
    pub limit_pkts: u32,
    pub victim: bool,
    /// Addresses and ports of its packets (used with a dummynet-style configuration).
    pub addrs: TenantAddrs,
}

impl Tenant {
    /// Tenant `i` named `name`: weight 1, one greedy client of 1500-byte packets, a queue
    /// of 1024 packets, [`TenantAddrs::default_for`] `i`.
    pub fn new(name: &str, i: usize) -> Self {
        Tenant {
            name: name.into(),
            weight: 1,
            clients: 1,
            rate_bps: None,
            size: SizeDist::Fixed(1500),
            burst: 1,
            limit_pkts: 1024,
            victim: false,
            addrs: TenantAddrs::default_for(i),
        }
    }

    /// Sets the offered load per client from text: `greedy`, or a bandwidth (`2M`,
    /// `100Mbit/s`; a bare number is bit/s) of 1 bit/s..10 Tbit/s.
    pub fn set_rate(&mut self, text: &str) -> Result<(), ScenarioError> {
        if text == "greedy" {
            self.rate_bps = None;
            return Ok(());
        }
        let bps = parse_bandwidth(text).map_err(|e| invalid("rate", e))?;
        check_rate("rate", bps, " (or greedy)")?;
        self.rate_bps = Some(bps);
        Ok(())
    }

    /// Sets the packet sizes from text (`1500`, `64-1500`, `imix`, `tso`).
    pub fn set_size(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.size = text.parse().map_err(|e: String| invalid("size", e))?;
        Ok(())
    }

    /// Checks the ranges the setters and the file cannot: weight, clients, rate, addresses.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.weight == 0 {
            return Err(ScenarioError::Invalid("weight must be at least 1".into()));
        }
        if self.clients == 0 || self.clients > MAX_TENANT_CLIENTS {
            return Err(ScenarioError::Invalid(format!(
                "clients must be 1..={MAX_TENANT_CLIENTS}, got {}",
                self.clients
            )));
        }
        if let Some(r) = self.rate_bps {
            check_rate("rate", r, " (or greedy)")?;
        }
        self.addrs.validate()
    }
}

/// A dummynet-style configuration and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct DummynetFile {
    pub path: PathBuf,
    pub config: Arc<pspat_config::Config>,
}

impl DummynetFile {
    /// Reads and checks `path` (ipfw syntax, or TOML for `.toml`).
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let config =
            pspat_config::parse_file(path).map_err(|source| ScenarioError::Dummynet { source })?;
        Ok(DummynetFile {
            path: path.to_path_buf(),
            config: Arc::new(config),
        })
    }
}

/// Everything a run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub algorithm: String,
    pub params: String,
    /// 0 = unlimited.
    pub rate_bps: u64,
    pub duration_ns: u64,
    pub handoff: Handoff,
    pub backend: String,
    pub mailbox: usize,
    pub delta_a_ns: u64,
    pub spin_ns: u64,
    pub aggregate_ns: u64,
    pub tenants: Vec<Tenant>,
    /// A dummynet-style configuration that replaces `algorithm`, `rate_bps` and the
    /// tenants' weights.
    pub dummynet: Option<DummynetFile>,
}

impl Scenario {
    /// The built-in scenario: three tenants of weights 4, 2 and 1 sending as fast as they
    /// can, plus a light victim of weight 8, under QFQ+ on an emulated 10 Gbit/s link, sent
    /// as UDP to loopback. The tenants send TSO-like super-packets (3 in 4 of 64 KB, the
    /// rest 64..1500 bytes), as a host's TCP stack hands them to the qdisc: 10 Gbit/s is then
    /// about 25 kpps, which a 2-core machine sends to loopback with room to spare, so the
    /// emulated link, not the CPU, is the bottleneck and the shares show the scheduler.
    pub fn builtin() -> Self {
        let greedy = |name: &str, weight, i| Tenant {
            weight,
            size: SizeDist::Tso,
            ..Tenant::new(name, i)
        };
        Scenario {
            algorithm: "qfq+".into(),
            params: String::new(),
            rate_bps: 10_000_000_000,
            duration_ns: 5_000_000_000,
            handoff: Handoff::Arbiter,
            backend: "udp".into(),
            mailbox: 512,
            delta_a_ns: 1_000,
            spin_ns: 50_000,
            aggregate_ns: 0,
            tenants: vec![
                greedy("gold", 4, 0),
                greedy("silver", 2, 1),
                greedy("bronze", 1, 2),
                Tenant {
                    weight: 8,
                    rate_bps: Some(8_000_000), // 5000 packets/s of 200 bytes
                    size: SizeDist::Fixed(200),
                    victim: true,
                    ..Tenant::new("victim", 3)
                },
            ],
            dummynet: None,
        }
    }

    /// Sets the emulated link's rate from text: a bandwidth (`10G`, `100Mbit/s`; a bare
    /// number is bit/s) of 1 bit/s..10 Tbit/s, or `unlimited`.
    pub fn set_rate(&mut self, text: &str) -> Result<(), ScenarioError> {
        let bps = parse_bandwidth(text).map_err(|e| invalid("rate", e))?;
        if !(bps == 0 && text.eq_ignore_ascii_case("unlimited")) {
            check_rate("rate", bps, " (or unlimited)")?;
        }
        self.rate_bps = bps;
        Ok(())
    }

    /// Sets how long the run lasts from text (`5s`, `500ms`; a bare number is seconds).
    pub fn set_duration(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.duration_ns = duration_ns("duration", text)?;
        Ok(())
    }

    /// Sets who transmits from text (`arbiter`, `dispatchers[:N]`, `clients`).
    pub fn set_handoff(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.handoff = text.parse().map_err(|e: String| invalid("handoff", e))?;
        Ok(())
    }

    /// Reads the dummynet-style configuration at `path`, which then decides instead of
    /// `algorithm`, `rate` and the tenants' weights.
    pub fn set_dummynet(&mut self, path: &Path) -> Result<(), ScenarioError> {
        self.dummynet = Some(DummynetFile::load(path)?);
        Ok(())
    }

    /// Checks what a scenario made by code, or changed by its fields, may get wrong: at
    /// least one tenant, the link rate, each tenant (see [`Tenant::validate`]).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.tenants.is_empty() {
            return Err(ScenarioError::Invalid(
                "no [[tenant]]: a scenario needs at least one".into(),
            ));
        }
        if self.rate_bps != 0 {
            check_rate("rate", self.rate_bps, " (or unlimited)")?;
        }
        for t in &self.tenants {
            t.validate()
                .map_err(|e| e.within(format!("tenant `{}`", t.name)))?;
        }
        Ok(())
    }

    /// The engine configuration and one traffic spec per client (in client order), with
    /// each client's tenant index.
    pub fn engine(&self) -> Result<(EngineConfig, Vec<(usize, TrafficSpec)>), ScenarioError> {
        let flows = self
            .tenants
            .iter()
            .map(|t| {
                FlowParams::weighted(t.weight)
                    .with_limit_pkts(t.limit_pkts)
                    .with_max_len(t.size.max().max(1500))
            })
            .collect();
        let mut clients = Vec::new();
        let mut specs = Vec::new();
        for (i, t) in self.tenants.iter().enumerate() {
            for k in 0..t.clients {
                clients.push(ClientConfig {
                    track_latency: t.victim,
                });
                let mut spec = match t.rate_bps {
                    None => TrafficSpec::greedy(i as u32, 0),
                    Some(r) => TrafficSpec::paced(i as u32, r, t.size.clone(), t.burst),
                };
                spec.size = t.size.clone();
                spec.seed = ((i as u64) << 32) | (u64::from(k) + 1);
                specs.push((i, spec));
            }
        }
        let flows = if self.dummynet.is_some() {
            Vec::new()
        } else {
            flows
        };
        let mut cfg = EngineConfig::new(&self.algorithm, flows, clients);
        cfg.dummynet = self.dummynet.as_ref().map(|d| Arc::clone(&d.config));
        cfg.params = self
            .params
            .parse::<Params>()
            .map_err(|e| ScenarioError::Invalid(format!("params `{}`: {e}", self.params)))?;
        cfg.rate_bps = self.rate_bps;
        cfg.handoff = self.handoff;
        cfg.mailbox_entries = self.mailbox;
        cfg.delta_a_ns = self.delta_a_ns;
        cfg.spin_ns = self.spin_ns;
        cfg.aggregate_ns = self.aggregate_ns;
        // "N ns worth" of a tenant's packets per decision, not N ns capped at 1500 bytes.
        cfg.fit_flows_to_aggregates();
        Ok((cfg, specs))
    }

    /// Rate each tenant should get (bit/s): weighted max-min fairness over the link, where
    /// a paced tenant never gets more than it offers. `None` for an unlimited link.
    pub fn targets_bps(&self) -> Option<Vec<f64>> {
        if self.rate_bps == 0 || self.dummynet.is_some() {
            return None;
        }
        let demand: Vec<f64> = self
            .tenants
            .iter()
            .map(|t| match t.rate_bps {
                Some(r) => r as f64 * f64::from(t.clients),
                None => f64::INFINITY,
            })
            .collect();
        let weights: Vec<f64> = self.tenants.iter().map(|t| f64::from(t.weight)).collect();
        let got = max_min_fair(self.rate_bps as f64, &weights, &demand);
        Some(got)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.dummynet {
            let c = &d.config;
            return write!(
                f,
                "dummynet configuration {} ({} schedulers, {} flowsets, {} pipes, {} rules), \
                 hand-off {}, backend {}, {} tenants, {:.1} s",
                d.path.display(),
                c.schedulers.len(),
                c.flowsets.len(),
                c.pipes.len(),
                c.rules.len(),
                self.handoff,
                self.backend,
                self.tenants.len(),
                self.duration_ns as f64 / 1e9
            );
        }
        write!(
            f,
            "{} on an emulated {} link, hand-off {}, backend {}, {} tenants, {:.1} s",
            self.algorithm,
            HumanBandwidth(self.rate_bps as f64),
            self.handoff,
            self.backend,
            self.tenants.len(),
            self.duration_ns as f64 / 1e9
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::chain;

    #[test]
    fn rates_and_durations_parse() {
        let mut s = Scenario::builtin();
        let e = |r: Result<(), ScenarioError>| chain(&r.unwrap_err());
        for (text, bps) in [
            ("10G", 10_000_000_000),
            ("1.5Gbit/s", 1_500_000_000),
            ("64K", 64_000),
            ("64000", 64_000),
            ("10T", MAX_RATE_BPS),
            ("unlimited", 0),
        ] {
            s.set_rate(text).unwrap();
            assert_eq!(s.rate_bps, bps, "{text}");
        }
        let m = e(s.set_rate("fast"));
        assert!(m.starts_with("rate: ") && m.contains("'fast'"), "{m}");
        assert!(s.set_rate("-3M").is_err());
        // Parsed, but out of range: 0 bit/s is written `unlimited`, and 10 Tbit/s at most.
        let m = e(s.set_rate("0"));
        assert!(m.contains("not 1 bit/s..10 Tbit/s (or unlimited)"), "{m}");
        assert!(e(s.set_rate("11T")).contains("10 Tbit/s"));
        assert_eq!(s.rate_bps, 0, "a refused value changes nothing");
        s.set_duration("5s").unwrap();
        assert_eq!(s.duration_ns, 5_000_000_000);
        s.set_duration("20us").unwrap();
        assert_eq!(s.duration_ns, 20_000);
        s.set_duration("1.5").unwrap();
        assert_eq!(s.duration_ns, 1_500_000_000, "a bare number is seconds");
        let m = e(s.set_duration("soon"));
        assert!(m.starts_with("duration: ") && m.contains("'soon'"), "{m}");
        let m = e(s.set_handoff("nic"));
        assert!(m.starts_with("handoff: ") && m.contains("`nic`"), "{m}");

        let mut t = Tenant::new("t", 0);
        t.set_rate("2M").unwrap();
        assert_eq!(t.rate_bps, Some(2_000_000));
        t.set_rate("greedy").unwrap();
        assert_eq!(t.rate_bps, None);
        for bad in ["unlimited", "0"] {
            let m = e(t.set_rate(bad));
            assert!(m.contains("(or greedy)"), "{bad}: {m}");
        }
        assert!(e(t.set_size("huge")).contains("`huge`"));
    }

    #[test]
    fn validation_names_the_tenant_and_the_field() {
        let mut s = Scenario::builtin();
        s.validate().unwrap();
        s.tenants[1].weight = 0;
        let m = chain(&s.validate().unwrap_err());
        assert_eq!(m, "tenant `silver`: weight must be at least 1");
        s.tenants[1].weight = 1;
        s.tenants[2].clients = 300;
        let m = chain(&s.validate().unwrap_err());
        assert!(m.contains("clients must be 1..=256, got 300"), "{m}");
        s.tenants[2].clients = 1;
        s.tenants[3].rate_bps = Some(0);
        assert!(chain(&s.validate().unwrap_err()).starts_with("tenant `victim`: rate: "));
        s.tenants[3].rate_bps = Some(1);
        s.rate_bps = MAX_RATE_BPS + 1;
        assert!(chain(&s.validate().unwrap_err()).starts_with("rate: "));
        s.rate_bps = 0;
        s.validate().unwrap();
        s.tenants.clear();
        assert!(chain(&s.validate().unwrap_err()).contains("no [[tenant]]"));
    }

    #[test]
    fn targets_are_weighted_max_min_fair() {
        let mut s = Scenario::builtin();
        let t = s.targets_bps().unwrap();
        // The victim offers 8 Mbit/s, less than its share; the rest split 4:2:1.
        assert_eq!(t[3], 8e6);
        let rest = 10e9 - 8e6;
        assert!((t[0] - rest * 4.0 / 7.0).abs() < 1.0);
        assert!((t[2] - rest / 7.0).abs() < 1.0);
        s.rate_bps = 0;
        assert!(s.targets_bps().is_none());
    }

    #[test]
    fn the_link_prints_with_three_decimals_or_unlimited() {
        let mut s = Scenario::builtin();
        assert!(
            s.to_string()
                .starts_with("qfq+ on an emulated 10.000 Gbit/s link, hand-off arbiter"),
            "{s}"
        );
        s.rate_bps = 0;
        assert!(s.to_string().contains("an emulated unlimited link"), "{s}");
    }
}
