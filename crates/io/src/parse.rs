//! Backend specifications as the command line gives them.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use crate::backend::{Backend, SendError};
use crate::null::Null;
use crate::pcap::Pcap;
use crate::udp::{Udp, DEFAULT_DEST};

/// The accepted forms, for error messages and `--help` texts.
pub const BACKEND_SPECS: &str = "null, udp, udp:HOST:PORT or pcap:PATH";

/// Builds the backend a specification names:
///
/// - `null`: [`Null`];
/// - `udp`: [`Udp`] to 127.0.0.1:9000;
/// - `udp:HOST:PORT`: [`Udp`] to that address; HOST is an IPv4 address, an IPv6 address
///   in brackets (`udp:[::1]:9000`) or a name (resolved now; the first address wins);
/// - `pcap:PATH`: [`Pcap`] writing PATH, which is created (or truncated) now, so that a
///   bad path is reported before the engine starts.
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
        _ => Err(err(format!("unknown backend, expected {BACKEND_SPECS}"))),
    }
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
        let dir = std::env::temp_dir().join(format!("pspat-parse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap");
        let spec = format!("pcap:{}", path.display());
        assert_eq!(parse_backend(&spec).unwrap().name(), "pcap");
        assert!(path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
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
    }
}
