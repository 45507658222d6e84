//! The scenario `pspat run` executes: an engine configuration plus tenants that generate
//! traffic. Read from TOML (`--config FILE`) or built in (no arguments).
//!
//! ```toml
//! algorithm = "qfq+"        # any name from `pspat algorithms`
//! params = ""               # algorithm parameters, key=value[,...]
//! rate = "10G"              # emulated link, bit/s (K, M, G suffixes; "unlimited")
//! duration = "5s"           # s, ms, us suffixes
//! handoff = "arbiter"       # arbiter | dispatchers[:N] | clients
//! backend = "udp"           # null | udp | udp:HOST:PORT | pcap:FILE | afpacket:IF[,...]
//! mailbox = 512             # slots per client mailbox
//! delta_a = "1us"           # the arbiter reads each mailbox at most this often
//! spin = "50us"             # T_w: idle spin before blocking
//! aggregate = "0"           # decision aggregation window (0 = off)
//!
//! [[tenant]]
//! name = "gold"
//! weight = 4
//! clients = 1               # sending threads (all feed the tenant's flow)
//! rate = "greedy"           # or an offered load in bit/s per client
//! size = "9000"             # 1500 | 64-1500 | imix | tso
//! burst = 1                 # packets per departure
//! limit = 1024              # the flow's queue limit, packets
//! victim = false            # track submit-to-transmit latency
//! ```
//!
//! With `dummynet = "FILE"` (a configuration in ipfw syntax or TOML, see
//! `examples/config/`; relative to the scenario file), the configuration's schedulers,
//! flowsets, rules and tables decide instead of `algorithm`, `rate` and the tenants'
//! weights, and each tenant's packets carry addresses the rules can match:
//!
//! ```toml
//! [[tenant]]
//! src = "10.0.1.0/24"       # client k sends from the k-th address
//! dst = "10.255.0.1"        # each packet draws a destination in this prefix
//! sport = "40000"           # port or range a-b, drawn per packet
//! dport = "5000-5003"
//! proto = "udp"             # udp | tcp | icmp | sctp | number
//! ```

use std::fmt;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pspat_engine::traffic::{SizeDist, TrafficSpec};
use pspat_engine::{ClientConfig, EngineConfig, Handoff};
use pspat_sched::registry::Params;
use pspat_sched::FlowParams;
use serde::Deserialize;

use crate::keys::{parse_ports, parse_prefix, parse_proto, TenantAddrs};

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

/// A dummynet-style configuration and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct DummynetFile {
    pub path: PathBuf,
    pub config: Arc<pspat_config::Config>,
}

impl DummynetFile {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let config = pspat_config::parse_file(path)?;
        Ok(DummynetFile {
            path: path.to_path_buf(),
            config: Arc::new(config),
        })
    }
}

/// Everything `pspat run` needs.
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
            name: name.into(),
            weight,
            clients: 1,
            rate_bps: None,
            size: SizeDist::Tso,
            burst: 1,
            limit_pkts: 1024,
            victim: false,
            addrs: TenantAddrs::default_for(i),
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
                    name: "victim".into(),
                    weight: 8,
                    clients: 1,
                    rate_bps: Some(8_000_000), // 5000 packets/s of 200 bytes
                    size: SizeDist::Fixed(200),
                    burst: 1,
                    limit_pkts: 1024,
                    victim: true,
                    addrs: TenantAddrs::default_for(3),
                },
            ],
            dummynet: None,
        }
    }

    /// Parses a TOML scenario; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let raw: RawScenario = toml::from_str(text).with_context(|| origin.to_string())?;
        let dir = Path::new(origin).parent().unwrap_or(Path::new("."));
        raw.resolve(dir).with_context(|| origin.to_string())
    }

    /// The engine configuration and one traffic spec per client (in client order), with
    /// each client's tenant index.
    pub fn engine(&self) -> Result<(EngineConfig, Vec<(usize, TrafficSpec)>)> {
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
            .map_err(|e| anyhow::anyhow!("params `{}`: {e}", self.params))?;
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
        let mut got = vec![0.0; demand.len()];
        let mut open: Vec<usize> = (0..demand.len()).collect();
        let mut left = self.rate_bps as f64;
        // Water-filling: satisfied tenants leave, the rest share what remains by weight.
        loop {
            let wsum: f64 = open
                .iter()
                .map(|&i| f64::from(self.tenants[i].weight))
                .sum();
            if open.is_empty() || wsum == 0.0 {
                break;
            }
            let sat: Vec<usize> = open
                .iter()
                .copied()
                .filter(|&i| demand[i] <= left * f64::from(self.tenants[i].weight) / wsum)
                .collect();
            if sat.is_empty() {
                for &i in &open {
                    got[i] = left * f64::from(self.tenants[i].weight) / wsum;
                }
                break;
            }
            for &i in &sat {
                got[i] = demand[i];
                left -= demand[i];
            }
            open.retain(|i| !sat.contains(i));
        }
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
            fmt_rate(self.rate_bps as f64),
            self.handoff,
            self.backend,
            self.tenants.len(),
            self.duration_ns as f64 / 1e9
        )
    }
}

/// `10 Gbit/s`, `8.0 Mbit/s`, `unlimited`.
pub fn fmt_rate(bps: f64) -> String {
    if bps == 0.0 {
        return "unlimited".into();
    }
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "G")
    } else if bps >= 1e6 {
        (bps / 1e6, "M")
    } else if bps >= 1e3 {
        (bps / 1e3, "K")
    } else {
        (bps, "")
    };
    format!("{v:.2} {u}bit/s")
}

/// A rate: `10G`, `100M`, `1.5G`, `64K`, `1000`, optionally followed by `bit/s` or `bps`;
/// `unlimited` = 0.
pub fn parse_rate(s: &str) -> Result<u64> {
    let t = s.trim();
    if t == "unlimited" {
        return Ok(0);
    }
    let t = t
        .strip_suffix("bit/s")
        .or_else(|| t.strip_suffix("bps"))
        .unwrap_or(t)
        .trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'G' | 'g')) => (&t[..i], 1e9),
        Some((i, 'M' | 'm')) => (&t[..i], 1e6),
        Some((i, 'K' | 'k')) => (&t[..i], 1e3),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .with_context(|| {
            format!("rate `{s}`: expected a positive number of bit/s like 10G, 100M or 64K")
        })?;
    let bps = v * mult;
    if !(1.0..=1e13).contains(&bps) {
        bail!("rate `{s}`: must be between 1 bit/s and 10 Tbit/s");
    }
    Ok(bps as u64)
}

/// A duration in ns: `5s`, `500ms`, `20us`, `100ns`, `1.5s`; a bare number is seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t, 1e9)
    };
    let v: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .with_context(|| format!("duration `{s}`: expected e.g. 5s, 500ms, 20us"))?;
    Ok((v * mult) as u64)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    algorithm: Option<String>,
    params: Option<String>,
    rate: Option<String>,
    duration: Option<String>,
    handoff: Option<String>,
    backend: Option<String>,
    mailbox: Option<usize>,
    delta_a: Option<String>,
    spin: Option<String>,
    aggregate: Option<String>,
    dummynet: Option<String>,
    #[serde(default)]
    tenant: Vec<RawTenant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: Option<String>,
    weight: Option<u32>,
    clients: Option<u32>,
    rate: Option<String>,
    size: Option<String>,
    burst: Option<u32>,
    limit: Option<u32>,
    victim: Option<bool>,
    src: Option<String>,
    dst: Option<String>,
    sport: Option<String>,
    dport: Option<String>,
    proto: Option<String>,
}

impl RawScenario {
    fn resolve(self, dir: &Path) -> Result<Scenario> {
        let d = Scenario::builtin();
        if self.tenant.is_empty() {
            bail!("no [[tenant]]: a scenario needs at least one");
        }
        let mut tenants = Vec::new();
        for (i, t) in self.tenant.into_iter().enumerate() {
            let name = t.name.unwrap_or_else(|| format!("tenant{i}"));
            let ctx = || format!("tenant `{name}`");
            let rate_bps = match t.rate.as_deref() {
                None | Some("greedy") => None,
                Some(r) => Some(parse_rate(r).with_context(ctx)?),
            };
            let size: SizeDist = t
                .size
                .as_deref()
                .unwrap_or("1500")
                .parse()
                .map_err(|e: String| anyhow::anyhow!(e))
                .with_context(ctx)?;
            let weight = t.weight.unwrap_or(1);
            if weight == 0 {
                bail!("tenant `{name}`: weight must be at least 1");
            }
            let clients = t.clients.unwrap_or(1);
            if clients == 0 || clients > 256 {
                bail!("tenant `{name}`: clients must be 1..=256, got {clients}");
            }
            let mut addrs = TenantAddrs::default_for(i);
            if let Some(v) = &t.src {
                addrs.src = parse_prefix(v).with_context(ctx)?;
            }
            if let Some(v) = &t.dst {
                addrs.dst = parse_prefix(v).with_context(ctx)?;
            }
            if addrs.src.0.is_ipv4() != addrs.dst.0.is_ipv4() {
                bail!("tenant `{name}`: src and dst must both be IPv4 or both IPv6");
            }
            if let Some(v) = &t.sport {
                addrs.sport = parse_ports(v).with_context(ctx)?;
            }
            if let Some(v) = &t.dport {
                addrs.dport = parse_ports(v).with_context(ctx)?;
            }
            if let Some(v) = &t.proto {
                addrs.proto = parse_proto(v).with_context(ctx)?;
            }
            tenants.push(Tenant {
                addrs,
                name: name.clone(),
                weight,
                clients,
                rate_bps,
                size,
                burst: t.burst.unwrap_or(1).max(1),
                limit_pkts: t.limit.unwrap_or(1024),
                victim: t.victim.unwrap_or(false),
            });
        }
        let handoff = match self.handoff {
            Some(h) => h.parse().map_err(|e: String| anyhow::anyhow!(e))?,
            None => d.handoff,
        };
        let dur = |v: Option<String>, def: u64| -> Result<u64> {
            v.as_deref().map_or(Ok(def), parse_duration_ns)
        };
        Ok(Scenario {
            algorithm: self.algorithm.unwrap_or(d.algorithm),
            params: self.params.unwrap_or_default(),
            rate_bps: match self.rate.as_deref() {
                Some(r) => parse_rate(r)?,
                None => d.rate_bps,
            },
            duration_ns: dur(self.duration, d.duration_ns)?,
            handoff,
            backend: self.backend.unwrap_or(d.backend),
            mailbox: self.mailbox.unwrap_or(d.mailbox),
            delta_a_ns: dur(self.delta_a, d.delta_a_ns)?,
            spin_ns: dur(self.spin, d.spin_ns)?,
            aggregate_ns: dur(self.aggregate, 0)?,
            tenants,
            dummynet: match self.dummynet {
                Some(p) => {
                    let path = dir.join(&p);
                    Some(DummynetFile::load(&path).with_context(|| format!("dummynet = \"{p}\""))?)
                }
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_durations_parse() {
        assert_eq!(parse_rate("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("1.5Gbit/s").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("64K").unwrap(), 64_000);
        assert_eq!(parse_rate("unlimited").unwrap(), 0);
        assert!(parse_rate("fast")
            .unwrap_err()
            .to_string()
            .contains("`fast`"));
        assert!(parse_rate("-3M").is_err());
        assert_eq!(parse_duration_ns("5s").unwrap(), 5_000_000_000);
        assert_eq!(parse_duration_ns("20us").unwrap(), 20_000);
        assert_eq!(parse_duration_ns("1.5").unwrap(), 1_500_000_000);
        assert!(parse_duration_ns("soon")
            .unwrap_err()
            .to_string()
            .contains("`soon`"));
    }

    #[test]
    fn toml_round_trip_of_every_field() {
        let s = Scenario::from_toml(
            r#"
            algorithm = "drr"
            params = "quantum=3000"
            rate = "1G"
            duration = "2s"
            handoff = "dispatchers:2"
            backend = "null"
            mailbox = 256
            delta_a = "2us"
            spin = "10us"
            aggregate = "5us"
            [[tenant]]
            name = "a"
            weight = 3
            clients = 2
            rate = "100M"
            size = "64-1500"
            burst = 4
            limit = 64
            victim = true
            "#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(s.algorithm, "drr");
        assert_eq!(s.handoff, Handoff::Dispatchers(2));
        assert_eq!(
            (s.rate_bps, s.duration_ns, s.mailbox),
            (1_000_000_000, 2_000_000_000, 256)
        );
        assert_eq!(
            (s.delta_a_ns, s.spin_ns, s.aggregate_ns),
            (2_000, 10_000, 5_000)
        );
        let t = &s.tenants[0];
        assert_eq!((t.weight, t.clients, t.burst, t.limit_pkts), (3, 2, 4, 64));
        assert_eq!(t.rate_bps, Some(100_000_000));
        assert!(t.victim);
        let (cfg, specs) = s.engine().unwrap();
        assert_eq!(cfg.clients.len(), 2);
        assert_eq!(specs.len(), 2);
        assert!(cfg.clients.iter().all(|c| c.track_latency));
        // 5 us at 1 Gbit/s is 625 bytes: below the tenant's 1500, which stays.
        assert_eq!(cfg.flows[0].max_len, 1500);
        let mut wide = s.clone();
        wide.aggregate_ns = 50_000;
        // 50 us at 1 Gbit/s: aggregates of up to 6250 bytes.
        assert_eq!(wide.engine().unwrap().0.flows[0].max_len, 6250);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = |t: &str| format!("{:#}", Scenario::from_toml(t, "x.toml").unwrap_err());
        assert!(e("").contains("no [[tenant]]"));
        assert!(
            e("colour = 1\n[[tenant]]\n").contains("colour"),
            "{}",
            e("colour = 1\n[[tenant]]\n")
        );
        assert!(e("[[tenant]]\nweight = 0").contains("weight must be at least 1"));
        assert!(e("[[tenant]]\nsize = \"huge\"").contains("`huge`"));
        assert!(e("handoff = \"nic\"\n[[tenant]]").contains("`nic`"));
        assert!(e("rate = \"x\"\n[[tenant]]").contains("x.toml"));
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
    fn tenant_addresses_and_the_dummynet_file_resolve() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(
            dir.join("dn.ipfw"),
            "sched 1 config type drr bw 1Mbit/s\nqueue 1 config sched 1\nadd queue 1\n",
        )
        .unwrap();
        let origin = dir.join("s.toml");
        let s = Scenario::from_toml(
            "dummynet = \"dn.ipfw\"\n[[tenant]]\nsrc = \"2001:db8::/64\"\n\
             dst = \"2001:db8:1::1\"\nsport = \"1-2\"\ndport = \"80\"\nproto = \"tcp\"\n",
            origin.to_str().unwrap(),
        )
        .unwrap();
        let d = s.dummynet.as_ref().unwrap();
        assert_eq!(d.path, dir.join("dn.ipfw"), "relative to the scenario file");
        assert_eq!(d.config.flowsets.len(), 1);
        let a = &s.tenants[0].addrs;
        assert_eq!(a.src, ("2001:db8::".parse().unwrap(), 64));
        assert_eq!((a.sport, a.dport, a.proto), ((1, 2), (80, 80), 6));
        let (cfg, _) = s.engine().unwrap();
        assert!(cfg.dummynet.is_some() && cfg.flows.is_empty());
        assert!(
            s.targets_bps().is_none(),
            "the configuration decides, not weights"
        );
        assert!(s.to_string().contains("dn.ipfw"));

        let e = |t: &str| {
            format!(
                "{:#}",
                Scenario::from_toml(t, origin.to_str().unwrap()).unwrap_err()
            )
        };
        let m = e("[[tenant]]\nsrc = \"10.0.0.1\"\ndst = \"::1\"");
        assert!(m.contains("both be IPv4 or both IPv6"), "{m}");
        assert!(e("[[tenant]]\ndport = \"9-1\"").contains("empty"));
        assert!(e("dummynet = \"missing.ipfw\"\n[[tenant]]").contains("missing.ipfw"));
    }
}
