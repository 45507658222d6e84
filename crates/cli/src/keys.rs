//! The 5-tuples a tenant's clients send with, when `pspat run` runs a dummynet-style
//! configuration: its rules and masks see these addresses and ports.
//!
//! A tenant has a source prefix (client `k` sends from the `k`-th address in it, so a
//! scheduler or flow mask on `src-ip` tells the clients apart), a destination prefix and
//! port ranges (each packet draws its destination address and ports uniformly from them, so
//! a `dst-port` flow mask spreads one client over several queues), and a protocol.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pspat_config::classify::FlowKey;
use pspat_config::Direction;
use pspat_engine::traffic::Submit;
use pspat_engine::{Accepted, Client, SubmitError};

/// Addresses and ports of one tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantAddrs {
    /// Source prefix: client `k` uses its `k`-th address (wrapping inside the prefix).
    pub src: (IpAddr, u8),
    /// Destination prefix: each packet draws an address in it.
    pub dst: (IpAddr, u8),
    /// Source ports, inclusive.
    pub sport: (u16, u16),
    /// Destination ports, inclusive.
    pub dport: (u16, u16),
    /// IP protocol number.
    pub proto: u8,
}

impl TenantAddrs {
    /// Tenant `i`'s defaults: sources in 10.0.i.0/24, destination 10.255.0.1, UDP from
    /// port 40000 to port 5000.
    pub fn default_for(i: usize) -> Self {
        TenantAddrs {
            src: (IpAddr::from([10, 0, (i % 256) as u8, 0]), 24),
            dst: (IpAddr::from([10, 255, 0, 1]), 32),
            sport: (40000, 40000),
            dport: (5000, 5000),
            proto: 17,
        }
    }
}

/// `10.0.0.0/24`, `10.0.0.1` (a /32 or /128), `2001:db8::/64`.
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8)> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a
        .trim()
        .parse()
        .with_context(|| format!("address `{s}`: expected e.g. 10.0.0.0/24 or 2001:db8::1"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        Some(l) => l
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= max)
            .with_context(|| format!("address `{s}`: prefix length must be 0..={max}"))?,
        None => max,
    };
    Ok((addr, len))
}

/// `5000` or `5000-5100`.
pub fn parse_ports(s: &str) -> Result<(u16, u16)> {
    let p = |x: &str| {
        x.trim()
            .parse::<u16>()
            .with_context(|| format!("ports `{s}`: expected a port 0..=65535 or a range a-b"))
    };
    let r = match s.split_once('-') {
        Some((a, b)) => (p(a)?, p(b)?),
        None => {
            let v = p(s)?;
            (v, v)
        }
    };
    if r.0 > r.1 {
        bail!("ports `{s}`: the range is empty");
    }
    Ok(r)
}

/// `udp`, `tcp`, `icmp`, `sctp` or a protocol number.
pub fn parse_proto(s: &str) -> Result<u8> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "udp" => 17,
        "tcp" => 6,
        "icmp" => 1,
        "sctp" => 132,
        n => n
            .parse()
            .with_context(|| format!("proto `{s}`: expected udp, tcp, icmp, sctp or 0..=255"))?,
    })
}

fn bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(v) => (u128::from(u32::from(v)), false),
        IpAddr::V6(v) => (u128::from(v), true),
    }
}

/// Host part `n` of a prefix (wrapping inside it).
fn nth(prefix: (IpAddr, u8), n: u128) -> u128 {
    let (base, v6) = bits(prefix.0);
    let width = if v6 { 128 } else { 32 };
    let host_bits = width - u32::from(prefix.1);
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
        let (_, v6) = bits(a.src.0);
        // Host 0 of a prefix shorter than the address is the network: start at 1.
        let first = u128::from(a.src.1 < if v6 { 128 } else { 32 });
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
        let span = |r: (u16, u16)| u64::from(r.1 - r.0) + 1;
        let sport = a.sport.0 + self.draw(span(a.sport)) as u16;
        let dport = a.dport.0 + self.draw(span(a.dport)) as u16;
        let (_, dv6) = bits(a.dst.0);
        let width = if dv6 { 128 } else { 32 };
        let hosts = 1u64 << (width - u32::from(a.dst.1)).min(32);
        let dst = nth(a.dst, u128::from(self.draw(hosts)));
        FlowKey {
            src: self.src,
            dst,
            src_port: sport,
            dst_port: dport,
            proto: a.proto,
            v6: self.v6,
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

    #[test]
    fn clients_get_successive_sources_and_draws_stay_in_range() {
        let mut a = TenantAddrs::default_for(3);
        a.dst = parse_prefix("192.168.4.0/30").unwrap();
        a.dport = parse_ports("80-81").unwrap();
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
        let e = |r: Result<()>| format!("{:#}", r.unwrap_err());
        assert!(e(parse_prefix("10.0.0.0/33").map(|_| ())).contains("0..=32"));
        assert!(e(parse_prefix("ten").map(|_| ())).contains("`ten`"));
        assert!(e(parse_ports("90-80").map(|_| ())).contains("empty"));
        assert!(e(parse_ports("http").map(|_| ())).contains("`http`"));
        assert!(e(parse_proto("ipx").map(|_| ())).contains("`ipx`"));
        assert_eq!(parse_proto("tcp").unwrap(), 6);
        assert_eq!(
            parse_prefix("2001:db8::/64").unwrap(),
            ("2001:db8::".parse().unwrap(), 64)
        );
    }
}
