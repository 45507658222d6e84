//! Backend specifications as the command line gives them.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use crate::afpacket::AfPacket;
use crate::backend::{Backend, SendError};
use crate::null::Null;
use crate::pcap::Pcap;
use crate::udp::{Udp, DEFAULT_DEST};

/// The accepted forms, for error messages and `--help` texts.
pub const BACKEND_SPECS: &str = "null, udp, udp:HOST:PORT, pcap:PATH or \
     afpacket:IF[,dst=MAC][,src=MAC][,ip=SRC>DST][,port=SPORT>DPORT]";

/// Builds the backend a specification names:
///
/// - `null`: [`Null`];
/// - `udp`: [`Udp`] to 127.0.0.1:9000;
/// - `udp:HOST:PORT`: [`Udp`] to that address; HOST is an IPv4 address, an IPv6 address
///   in brackets (`udp:[::1]:9000`) or a name (resolved now; the first address wins);
/// - `pcap:PATH`: [`Pcap`] writing PATH, which is created (or truncated) now, so that a
///   bad path is reported before the engine starts;
/// - `afpacket:IF[,dst=MAC][,src=MAC][,ip=SRC>DST][,port=SPORT>DPORT]`: [`AfPacket`]
///   sending Ethernet/IPv4/UDP frames on interface IF (which must exist now); options in
///   any order, each at most once: `dst=` the destination MAC (default broadcast), `src=`
///   the source MAC (default IF's), `ip=10.0.0.1>10.0.0.2` the IPv4 addresses, `port=9000>9000`
///   the UDP ports (those are the defaults). MACs are six hex pairs separated by `:`.
pub fn parse_backend(spec: &str) -> Result<Box<dyn Backend>, SendError> {
    let err = |why: String| SendError::Config(format!("backend '{spec}': {why}"));
    let (kind, arg) = match spec.split_once(':') {
        Some((k, a)) => (k, Some(a)),
        None => (spec, None),
    };
    match (kind, arg) {
        ("null", None) => Ok(Box::new(Null)),
        ("udp", None) => Ok(Box::new(Udp::new(DEFAULT_DEST))),
        ("udp", Some(addr)) => Ok(Box::new(Udp::new(parse_addr(addr).map_err(err)?))),
        ("pcap", Some("")) => Err(err("empty path: expected pcap:PATH".into())),
        ("pcap", Some(path)) => Ok(Box::new(Pcap::create(path)?)),
        ("null", Some(_)) => Err(err("null takes no argument".into())),
        ("pcap", None) => Err(err("missing path: expected pcap:PATH".into())),
        ("afpacket", None) | ("afpacket", Some("")) => {
            Err(err(format!("missing interface: expected {AFPACKET_SPEC}")))
        }
        ("afpacket", Some(arg)) => Ok(Box::new(parse_afpacket(arg).map_err(err)?)),
        _ => Err(err(format!("unknown backend, expected {BACKEND_SPECS}"))),
    }
}

const AFPACKET_SPEC: &str = "afpacket:IF[,dst=MAC][,src=MAC][,ip=SRC>DST][,port=SPORT>DPORT]";

/// `IF[,key=value]...` to an [`AfPacket`] backend.
fn parse_afpacket(arg: &str) -> Result<AfPacket, String> {
    let mut parts = arg.split(',');
    let ifname = parts.next().unwrap_or_default();
    if ifname.is_empty() {
        return Err(format!("missing interface: expected {AFPACKET_SPEC}"));
    }
    let mut b = AfPacket::new(ifname).map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    for opt in parts {
        let Some((key, value)) = opt.split_once('=') else {
            return Err(format!(
                "option '{opt}' is not key=value: expected {AFPACKET_SPEC}"
            ));
        };
        if seen.contains(&key) {
            return Err(format!("option '{key}' given twice"));
        }
        seen.push(key);
        match key {
            "dst" => b.dst_mac = parse_mac(value)?,
            "src" => b.src_mac = parse_mac(value)?,
            "ip" => {
                let (s, d) = pair(key, value, "SRC>DST, as in ip=10.0.0.1>10.0.0.2")?;
                let ip = |v: &str| {
                    v.parse::<std::net::Ipv4Addr>()
                        .map_err(|_| format!("bad IPv4 address '{v}' in ip={value}"))
                };
                (b.src_ip, b.dst_ip) = (ip(s)?, ip(d)?);
            }
            "port" => {
                let (s, d) = pair(key, value, "SPORT>DPORT, as in port=9000>9000")?;
                let port = |v: &str| {
                    v.parse::<u16>().map_err(|_| {
                        format!("bad port '{v}' in port={value}: expected a number in 0..=65535")
                    })
                };
                (b.src_port, b.dst_port) = (port(s)?, port(d)?);
            }
            _ => {
                return Err(format!(
                    "unknown option '{key}': expected dst=, src=, ip= or port="
                ))
            }
        }
    }
    Ok(b)
}

/// `A>B` to its two halves.
fn pair<'a>(key: &str, value: &'a str, form: &str) -> Result<(&'a str, &'a str), String> {
    value
        .split_once('>')
        .ok_or_else(|| format!("{key}={value}: expected {form}"))
}

/// `aa:bb:cc:dd:ee:ff` to six bytes.
fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("bad MAC address '{s}': expected six hex pairs as in 02:00:00:00:00:01");
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let p = parts.next().ok_or_else(bad)?;
        if p.len() != 2 {
            return Err(bad());
        }
        *byte = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(mac)
}

/// `HOST:PORT` to a socket address.
fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("'{s}' has no port: expected udp:HOST:PORT"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("bad port '{port}': expected a number in 0..=65535"))?;
    if host.is_empty() {
        return Err("empty host: expected udp:HOST:PORT".into());
    }
    // An IPv6 address without brackets is ambiguous (`::1:9000` is an address too).
    let bare = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(inner) => inner,
        None if host.contains(':') => {
            return Err(format!(
                "bad address '{s}': an IPv6 address goes in brackets, as in [::1]:9000"
            ))
        }
        None => host,
    };
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{bare}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{bare}' resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        match parse_backend(spec) {
            Ok(b) => panic!("'{spec}' accepted as {}", b.name()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn names() {
        assert_eq!(parse_backend("null").unwrap().name(), "null");
        assert_eq!(parse_backend("udp").unwrap().name(), "udp");
        assert_eq!(parse_backend("udp:127.0.0.1:9").unwrap().name(), "udp");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pcap");
        let spec = format!("pcap:{}", path.display());
        assert_eq!(parse_backend(&spec).unwrap().name(), "pcap");
        assert!(path.exists());
    }

    #[test]
    fn addresses() {
        let a = |s: &str| parse_addr(s).unwrap();
        assert_eq!(a("127.0.0.1:9000"), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(a("[::1]:53"), "[::1]:53".parse().unwrap());
        let l = a("localhost:7");
        assert!(l.ip().is_loopback() && l.port() == 7, "{l}");
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(err("tcp").contains("unknown backend"));
        assert!(err("tcp").contains(BACKEND_SPECS));
        assert!(err("").contains("unknown backend"));
        assert!(err("udp:127.0.0.1").contains("no port"));
        assert!(err("udp:localhost").contains("no port"));
        assert!(err("udp:1.2.3.4:99999").contains("bad port '99999'"));
        assert!(err("udp::9000").contains("empty host"));
        assert!(err("udp:::1:9000").contains("brackets"));
        assert!(err("pcap:").contains("empty path"));
        assert!(err("pcap").contains("missing path"));
        assert!(err("null:x").contains("no argument"));
        assert!(err("pcap:/nonexistent-dir-pspat/x.pcap").contains("create pcap file"));
        assert!(err("afpacket").contains("missing interface"));
        assert!(err("afpacket:").contains("missing interface"));
        assert!(err("afpacket:,dst=ff:ff:ff:ff:ff:ff").contains("missing interface"));
        let e = err("afpacket:pspat-nope0");
        assert!(
            e.contains("no network interface named 'pspat-nope0'"),
            "{e}"
        );
    }

    /// The loopback interface exists in every network namespace and has a (zero) MAC.
    #[test]
    fn afpacket_options() {
        let b = parse_afpacket("lo").unwrap();
        assert_eq!(b.ifname, "lo");
        assert_eq!(b.dst_mac, [0xff; 6]);
        assert_eq!(b.src_mac, [0; 6]);
        assert_eq!(
            (b.src_ip, b.dst_ip),
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        );
        assert_eq!((b.src_port, b.dst_port), (9000, 9000));
        assert!(b.tx.qdisc_bypass);
        let b = parse_afpacket(
            "lo,port=1>65535,dst=02:0a:0B:c0:ff:01,ip=192.168.1.2>255.255.255.255,src=00:00:00:00:00:07",
        )
        .unwrap();
        assert_eq!(b.dst_mac, [2, 0x0a, 0x0b, 0xc0, 0xff, 1]);
        assert_eq!(b.src_mac, [0, 0, 0, 0, 0, 7]);
        assert_eq!(b.src_ip, std::net::Ipv4Addr::new(192, 168, 1, 2));
        assert_eq!(b.dst_ip, std::net::Ipv4Addr::BROADCAST);
        assert_eq!((b.src_port, b.dst_port), (1, 65535));
        assert_eq!(parse_backend("afpacket:lo").unwrap().name(), "afpacket");
        let e = |s: &str| parse_afpacket(s).unwrap_err();
        assert!(e("lo,dst=1:2:3:4:5:6").contains("bad MAC address '1:2:3:4:5:6'"));
        assert!(e("lo,dst=01:02:03:04:05").contains("bad MAC"));
        assert!(e("lo,dst=01:02:03:04:05:06:07").contains("bad MAC"));
        assert!(e("lo,src=0g:02:03:04:05:06").contains("bad MAC"));
        assert!(e("lo,ip=10.0.0.1").contains("SRC>DST"));
        assert!(e("lo,ip=10.0.0.1>10.0.0").contains("bad IPv4 address '10.0.0'"));
        assert!(e("lo,port=9000>70000").contains("bad port '70000'"));
        assert!(e("lo,port=9000").contains("SPORT>DPORT"));
        assert!(e("lo,mtu=9000").contains("unknown option 'mtu'"));
        assert!(e("lo,dst").contains("not key=value"));
        assert!(e("lo,port=1>2,port=3>4").contains("given twice"));
        let long = e("an-interface-name-too-long");
        assert!(long.contains("at most 15"), "{long}");
    }
}
