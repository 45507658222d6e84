//! The scenario file (TOML). Every key is optional but one `[[tenant]]`; what is left out
//! is the built-in scenario's (`examples/run-tenants.toml` shows and explains every key):
//!
//! ```toml
//! algorithm = "qfq+"        # any name from `pspat algorithms`
//! params = ""               # algorithm parameters, key=value[,...]
//! rate = "10G"              # emulated link: a bandwidth (10G, 100Mbit/s; bare = bit/s) or "unlimited"
//! duration = "5s"           # ns, us, ms, s (bare = seconds)
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
//! rate = "greedy"           # or an offered load per client, a bandwidth
//! size = "9000"             # 1500 | 64-1500 | imix | tso
//! burst = 1                 # packets per departure
//! limit = 1024              # the flow's queue limit, packets
//! victim = false            # track submit-to-transmit latency
//! ```
//!
//! With `dummynet = "FILE"` (a configuration in ipfw syntax or TOML, see
//! `examples/config/`; relative to the scenario file), the configuration's schedulers,
//! flowsets, rules and tables decide instead of `algorithm`, `rate` and the tenants'
//! weights, and each tenant's packets carry addresses the rules can match
//! ([`crate::keys`]):
//!
//! ```toml
//! [[tenant]]
//! src = "10.0.1.0/24"       # client k sends from the k-th address
//! dst = "10.255.0.1"        # each packet draws a destination in this prefix
//! sport = "40000"           # port or range a-b, drawn per packet
//! dport = "5000-5003"
//! proto = "udp"             # udp | tcp | icmp | sctp | ... | a number
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::error::ScenarioError;
use crate::scenario::{duration_ns, DummynetFile, Scenario, Tenant};

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

impl Scenario {
    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates a TOML scenario; `origin` names the file in errors, and a
    /// `dummynet` file is relative to its directory.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ScenarioError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError::Toml {
            origin: origin.into(),
            source: Box::new(e),
        })?;
        let dir = Path::new(origin).parent().unwrap_or(Path::new("."));
        let s = raw.resolve(dir).map_err(|e| e.within(origin))?;
        s.validate().map_err(|e| e.within(origin))?;
        Ok(s)
    }
}

impl RawTenant {
    fn resolve(self, i: usize) -> Result<Tenant, ScenarioError> {
        type Setter = fn(&mut Tenant, &str) -> Result<(), ScenarioError>;
        let mut t = Tenant::new(&self.name.unwrap_or_else(|| format!("tenant{i}")), i);
        let text_fields: [(Option<String>, Setter); 7] = [
            (self.rate, Tenant::set_rate),
            (self.size, Tenant::set_size),
            (self.src, |t, v| t.addrs.set_src(v)),
            (self.dst, |t, v| t.addrs.set_dst(v)),
            (self.sport, |t, v| t.addrs.set_sport(v)),
            (self.dport, |t, v| t.addrs.set_dport(v)),
            (self.proto, |t, v| t.addrs.set_proto(v)),
        ];
        for (value, set) in text_fields {
            if let Some(v) = value {
                set(&mut t, &v).map_err(|e| e.within(format!("tenant `{}`", t.name)))?;
            }
        }
        t.weight = self.weight.unwrap_or(t.weight);
        t.clients = self.clients.unwrap_or(t.clients);
        t.burst = self.burst.unwrap_or(1).max(1);
        t.limit_pkts = self.limit.unwrap_or(t.limit_pkts);
        t.victim = self.victim.unwrap_or(false);
        Ok(t)
    }
}

impl RawScenario {
    fn resolve(self, dir: &Path) -> Result<Scenario, ScenarioError> {
        if self.tenant.is_empty() {
            return Err(ScenarioError::Invalid(
                "no [[tenant]]: a scenario needs at least one".into(),
            ));
        }
        let mut s = Scenario::builtin();
        s.tenants = self
            .tenant
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.resolve(i))
            .collect::<Result<_, _>>()?;
        s.algorithm = self.algorithm.unwrap_or(s.algorithm);
        s.params = self.params.unwrap_or_default();
        s.backend = self.backend.unwrap_or(s.backend);
        s.mailbox = self.mailbox.unwrap_or(s.mailbox);
        if let Some(v) = &self.rate {
            s.set_rate(v)?;
        }
        if let Some(v) = &self.duration {
            s.set_duration(v)?;
        }
        if let Some(v) = &self.handoff {
            s.set_handoff(v)?;
        }
        for (field, value, slot) in [
            ("delta_a", &self.delta_a, &mut s.delta_a_ns),
            ("spin", &self.spin, &mut s.spin_ns),
            ("aggregate", &self.aggregate, &mut s.aggregate_ns),
        ] {
            if let Some(v) = value {
                *slot = duration_ns(field, v)?;
            }
        }
        if let Some(p) = self.dummynet {
            s.dummynet = Some(
                DummynetFile::load(&dir.join(&p))
                    .map_err(|e| e.within(format!("dummynet = \"{p}\"")))?,
            );
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::chain;
    use pspat_config::{PortRange, Prefix};
    use pspat_engine::Handoff;

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
        let e = |t: &str| chain(&Scenario::from_toml(t, "x.toml").unwrap_err());
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
        // The file, the tenant and the field, in that order.
        assert_eq!(
            e("[[tenant]]\nname = \"a\"\nrate = \"fast\""),
            "x.toml: tenant `a`: rate: expected a number in bandwidth 'fast'"
        );
        assert!(e("[[tenant]]\nclients = 0").contains("clients must be 1..=256, got 0"));
        let m = e("spin = \"1d\"\n[[tenant]]");
        assert!(m.starts_with("x.toml: spin: ") && m.contains("'1d'"), "{m}");
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
        assert_eq!(
            a.src,
            Prefix {
                addr: "2001:db8::".parse().unwrap(),
                len: 64
            }
        );
        assert_eq!(
            (a.sport, a.dport, a.proto),
            (PortRange { lo: 1, hi: 2 }, PortRange { lo: 80, hi: 80 }, 6)
        );
        let (cfg, _) = s.engine().unwrap();
        assert!(cfg.dummynet.is_some() && cfg.flows.is_empty());
        assert!(
            s.targets_bps().is_none(),
            "the configuration decides, not weights"
        );
        assert!(s.to_string().contains("dn.ipfw"));

        let e = |t: &str| chain(&Scenario::from_toml(t, origin.to_str().unwrap()).unwrap_err());
        let m = e("[[tenant]]\nsrc = \"10.0.0.1\"\ndst = \"::1\"");
        assert!(m.contains("both be IPv4 or both IPv6"), "{m}");
        assert!(e("[[tenant]]\ndport = \"9-1\"").contains("empty"));
        let m = e("[[tenant]]\nname = \"b\"\nsrc = \"10.0.1.5/24\"");
        assert!(
            m.contains("tenant `b`: src: ") && m.contains("did you mean 10.0.1.0/24"),
            "{m}"
        );
        assert!(e("dummynet = \"missing.ipfw\"\n[[tenant]]").contains("missing.ipfw"));
    }

    #[test]
    fn an_unreadable_file_is_not_a_usage_error() {
        let e = Scenario::load(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert!(!e.is_usage());
        assert!(chain(&e).contains("/nonexistent/x.toml"));
        let e = Scenario::from_toml("[[tenant]]\nweight = 0", "x.toml").unwrap_err();
        assert!(e.is_usage());
    }
}
