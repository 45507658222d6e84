//! The 5-tuples a tenant's clients send with, when a run has a dummynet-style
//! configuration: its rules and masks see these addresses and ports.
//!
//! A tenant has a source prefix (client `k` sends from the `k`-th address in it, so a
//! scheduler or flow mask on `src-ip` tells the clients apart), a destination prefix and
//! port ranges (each packet draws its destination address and ports uniformly from them, so
//! a `dst-port` flow mask spreads one client over several queues), and a protocol.
//!
//! Addresses, ports and protocols are read by pspat-config's parsers, the ones its ipfw
//! syntax uses, with its canonical-prefix check: `src = "10.0.1.5/24"` is refused, naming
//! `10.0.1.0/24`.

use std::net::IpAddr;
use std::time::Duration;

use pspat_config::classify::FlowKey;
use pspat_config::ipfw::parser::{parse_prefix, port_range, protocol_str};
use pspat_config::resolve::check_prefix;
use pspat_config::{Direction, PortRange, Prefix};
use pspat_engine::traffic::Submit;
use pspat_engine::{Accepted, Client, SubmitError};

use crate::error::ScenarioError;

/// Addresses and ports of one tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantAddrs {
    /// Source prefix: client `k` uses its `k`-th address (wrapping inside the prefix).
    pub src: Prefix,
    /// Destination prefix: each packet draws an address in it.
    pub dst: Prefix,
    /// Source ports, drawn per packet.
    pub sport: PortRange,
    /// Destination ports, drawn per packet.
    pub dport: PortRange,
    /// IP protocol number.
    pub proto: u8,
}

fn invalid(field: &str, message: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Invalid(format!("{field}: {message}"))
}

/// A canonical prefix (`10.0.0.0/24`, `10.0.0.1`, `2001:db8::/64`).
fn prefix(field: &str, text: &str) -> Result<Prefix, ScenarioError> {
    let p = parse_prefix(text).map_err(|e| invalid(field, e))?;
    check_prefix(&p).map_err(|e| invalid(field, e))?;
    Ok(p)
}

impl TenantAddrs {
    /// Tenant `i`'s defaults: sources in 10.0.i.0/24, destination 10.255.0.1, UDP from
    /// port 40000 to port 5000.
    pub fn default_for(i: usize) -> Self {
        TenantAddrs {
            src: Prefix {
                addr: IpAddr::from([10, 0, (i % 256) as u8, 0]),
                len: 24,
            },
            dst: Prefix {
                addr: IpAddr::from([10, 255, 0, 1]),
                len: 32,
            },
            sport: PortRange {
                lo: 40000,
                hi: 40000,
            },
            dport: PortRange { lo: 5000, hi: 5000 },
            proto: 17,
        }
    }

    /// Sets the source prefix from text (`10.0.1.0/24`).
    pub fn set_src(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.src = prefix("src", text)?;
        Ok(())
    }

    /// Sets the destination prefix from text (`10.255.0.1`, `10.255.0.0/24`).
    pub fn set_dst(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.dst = prefix("dst", text)?;
        Ok(())
    }

    /// Sets the source ports from text (`40000`, `40000-40010`).
    pub fn set_sport(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.sport = port_range(text).map_err(|e| invalid("sport", e))?;
        Ok(())
    }

    /// Sets the destination ports from text (`5000`, `5000-5003`).
    pub fn set_dport(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.dport = port_range(text).map_err(|e| invalid("dport", e))?;
        Ok(())
    }

    /// Sets the protocol from text: a name ipfw knows (`udp`, `tcp`, `icmp`, `sctp`, ...)
    /// or a number; not `ip`/`all`, since each packet carries one protocol.
    pub fn set_proto(&mut self, text: &str) -> Result<(), ScenarioError> {
        self.proto = protocol_str(text)
            .map_err(|e| invalid("proto", e))?
            .ok_or_else(|| {
                invalid(
                    "proto",
                    format!("'{text}' means any protocol; a tenant's packets need one"),
                )
            })?;
        Ok(())
    }

    /// Checks what the setters check, for addresses made by code: canonical prefixes of
    /// one family, non-empty port ranges.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        check_prefix(&self.src).map_err(|e| invalid("src", e))?;
        check_prefix(&self.dst).map_err(|e| invalid("dst", e))?;
        if self.src.addr.is_ipv4() != self.dst.addr.is_ipv4() {
            return Err(ScenarioError::Invalid(
                "src and dst must both be IPv4 or both IPv6".into(),
            ));
        }
        for (field, r) in [("sport", self.sport), ("dport", self.dport)] {
            if r.lo > r.hi {
                return Err(invalid(
                    field,
                    format!("port range {}-{} is empty (lo > hi)", r.lo, r.hi),
                ));
            }
        }
        Ok(())
    }
}

fn bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(v) => (u128::from(u32::from(v)), false),
        IpAddr::V6(v) => (u128::from(v), true),
    }
}

/// Host part `n` of a prefix (wrapping inside it).
fn nth(prefix: Prefix, n: u128) -> u128 {
    let (base, v6) = bits(prefix.addr);
    let width = if v6 { 128 } else { 32 };
    let host_bits = width - u32::from(prefix.len);
    let host = if host_bits >= 128 {
        n
    } else {
        n & ((1u128 << host_bits) - 1)
    };
    let net = if host_bits >= 128 {
        0
    } else {
        base & !((1u128 << host_bits) - 1)
    };
    net | host
}

/// Draws the keys of one client's packets.
#[derive(Clone, Debug)]
pub struct KeyGen {
    a: TenantAddrs,
    src: u128,
    v6: bool,
    rng: u64,
}

impl KeyGen {
    /// Client `k` of a tenant with addresses `a`; `seed` makes runs repeatable.
    pub fn new(a: TenantAddrs, k: u32, seed: u64) -> Self {
        let (_, v6) = bits(a.src.addr);
        // Host 0 of a prefix shorter than the address is the network: start at 1.
        let first = u128::from(a.src.len < if v6 { 128 } else { 32 });
        let src = nth(a.src, first + u128::from(k));
        KeyGen {
            a,
            src,
            v6,
            rng: seed,
        }
    }

    fn draw(&mut self, n: u64) -> u64 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }

    /// The next packet's key.
    pub fn next_key(&mut self) -> FlowKey {
        let a = self.a.clone();
        let span = |r: PortRange| u64::from(r.hi - r.lo) + 1;
        let sport = a.sport.lo + self.draw(span(a.sport)) as u16;
        let dport = a.dport.lo + self.draw(span(a.dport)) as u16;
        let (_, dv6) = bits(a.dst.addr);
        let width = if dv6 { 128 } else { 32 };
        let hosts = 1u64 << (width - u32::from(a.dst.len)).min(32);
        let dst = nth(a.dst, u128::from(self.draw(hosts)));
        FlowKey {
            src: self.src,
            dst,
            src_port: sport,
            dst_port: dport,
            proto: a.proto,
            v6: self.v6,
            // A drawn packet has no header fields beside the 5-tuple.
            ..FlowKey::default()
        }
    }
}

/// A client that classifies each packet by the key its generator draws (the `flow`
/// argument of [`Submit::submit_at`] is not used: the configuration's rules decide).
pub struct Keyed {
    /// The engine client.
    pub client: Client,
    /// Its keys.
    pub keys: KeyGen,
}

impl Submit for Keyed {
    #[inline]
    fn submit_at(&mut self, _flow: u32, len: u32, _now_ns: u64) -> Result<Accepted, SubmitError> {
        let k = self.keys.next_key();
        self.client.submit_key(&k, len, Direction::Out)
    }
    fn pause(&mut self, timeout: Duration) {
        self.client.wait_and_drain(timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::chain;

    #[test]
    fn clients_get_successive_sources_and_draws_stay_in_range() {
        let mut a = TenantAddrs::default_for(3);
        a.set_dst("192.168.4.0/30").unwrap();
        a.set_dport("80-81").unwrap();
        let mut g0 = KeyGen::new(a.clone(), 0, 1);
        let mut g5 = KeyGen::new(a, 5, 2);
        assert_eq!(g0.next_key().src_v4(), u32::from_be_bytes([10, 0, 3, 1]));
        assert_eq!(g5.next_key().src_v4(), u32::from_be_bytes([10, 0, 3, 6]));
        let mut seen_ports = [false; 2];
        let mut seen_dst = [false; 4];
        for _ in 0..200 {
            let k = g0.next_key();
            assert_eq!(k.proto, 17);
            assert_eq!(k.src_port, 40000);
            seen_ports[usize::from(k.dst_port - 80)] = true;
            let d = k.dst_v4();
            assert_eq!(d & !3, u32::from_be_bytes([192, 168, 4, 0]));
            seen_dst[(d & 3) as usize] = true;
        }
        assert_eq!(seen_ports, [true; 2]);
        assert_eq!(seen_dst, [true; 4]);
    }

    #[test]
    fn bad_addresses_ports_and_protocols_are_named() {
        let mut a = TenantAddrs::default_for(0);
        let before = a.clone();
        let e = |r: Result<(), ScenarioError>| chain(&r.unwrap_err());
        let m = e(a.set_src("10.0.0.0/33"));
        assert!(m.starts_with("src: ") && m.contains("0..=32"), "{m}");
        let m = e(a.set_dst("ten"));
        assert!(m.starts_with("dst: ") && m.contains("'ten'"), "{m}");
        let m = e(a.set_dport("90-80"));
        assert!(m.starts_with("dport: ") && m.contains("empty"), "{m}");
        // (service names are ports, as in rules: `http` is 80)
        a.set_sport("http").unwrap();
        a.sport = before.sport;
        let m = e(a.set_sport("nosuchport"));
        assert!(
            m.starts_with("sport: ") && m.contains("'nosuchport'"),
            "{m}"
        );
        let m = e(a.set_proto("ipx"));
        assert!(m.starts_with("proto: ") && m.contains("'ipx'"), "{m}");
        let m = e(a.set_proto("ip"));
        assert!(m.contains("need one"), "{m}");
        // pspat-config's canonical-prefix check: no host bits past the length.
        let m = e(a.set_src("10.0.1.5/24"));
        assert!(m.contains("did you mean 10.0.1.0/24"), "{m}");
        assert_eq!(a, before, "a refused value changes nothing");
        a.set_proto("tcp").unwrap();
        assert_eq!(a.proto, 6);
        a.set_src("2001:db8::/64").unwrap();
        assert_eq!(
            a.src,
            Prefix {
                addr: "2001:db8::".parse().unwrap(),
                len: 64
            }
        );
        let m = chain(&a.validate().unwrap_err());
        assert!(m.contains("both be IPv4 or both IPv6"), "{m}");
    }

    #[test]
    fn validation_catches_what_code_builds() {
        let mut a = TenantAddrs::default_for(0);
        a.validate().unwrap();
        a.sport = PortRange { lo: 9, hi: 1 };
        let m = chain(&a.validate().unwrap_err());
        assert!(m.starts_with("sport: ") && m.contains("empty"), "{m}");
        let mut a = TenantAddrs::default_for(0);
        a.dst.len = 8;
        let m = chain(&a.validate().unwrap_err());
        assert!(m.starts_with("dst: ") && m.contains("did you mean"), "{m}");
    }
}
