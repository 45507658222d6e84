//! `pspat udpgen`: M UDP sender threads (and an optional low-rate victim) for the shaper
//! experiment kit (`experiments/shaper/`).
//!
//! Sender `i` (0-based) has a socket of its own bound to source port `base + i`, so each
//! sender is one 5-tuple that a rule (`src-port`), a tc u32 filter or a flow mask can tell
//! apart. Its datagrams carry the pspat payload header ([`pspat_io::payload`]) with
//! `client = flow = i`, a per-sender sequence number, `wire_len` = `--len`, and `submit_ns`
//! = the engine clock (CLOCK_MONOTONIC) when its batch is handed to the kernel, so that a
//! receiver in another namespace of the same host can compute one-way latency, loss and
//! reordering. The victim is client `M`, from its own port.
//!
//! The datagrams go out through the `udp` backend of pspat-io (sendmmsg batches of
//! [`BATCH`], preallocated headers, a shared run of zeros as padding), the same code the
//! engine transmits with; this module only paces and counts.
//!
//! Pacing: `--rate 0` sends full batches back to back (as fast as the socket, the CPU and
//! the queues below let it: a blocking socket waits when its send buffer is full). A
//! positive rate releases packet `k` at `start + k / rate`, up to a batch at a time when
//! behind, sleeping when the next packet is more than 200 µs away and spinning (with
//! yields) otherwise. A packet the kernel refused (an error, or a partial sendmmsg) is not
//! retried and does not consume a sequence number, so the receiver's gap count measures
//! loss after the socket only.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use pspat_io::payload::{MAX_WIRE_LEN, MIN_WIRE_LEN};
use pspat_io::udp::{Udp, BATCH};
use pspat_io::{clock, cpu, Backend, Pkt, Sender};
use serde::{Deserialize, Serialize};

use crate::{emit, table, Usage};

/// Sleep (rather than spin) when the next paced packet is further away than this.
const SLEEP_ABOVE_NS: u64 = 200_000;

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Destination address, IP:PORT.
    #[arg(long, value_name = "IP:PORT")]
    dest: SocketAddr,
    /// Greedy sender threads (each its own socket and source port).
    #[arg(long, value_name = "M", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    senders: u32,
    /// Length of each packet on the wire, bytes (Ethernet + IPv4 + UDP headers + payload):
    /// 82 (the 40-byte pspat header) to 65549.
    #[arg(long, value_name = "BYTES", default_value_t = 1000, value_parser = parse_wire_len)]
    len: u32,
    /// How long to send, seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Duration,
    /// Source port of sender 0; sender i uses base + i. 0: ports chosen by the kernel.
    #[arg(long, value_name = "P", default_value_t = 10000)]
    src_port_base: u16,
    /// Packets per second per greedy sender; 0: as fast as possible.
    #[arg(long, value_name = "PPS", default_value = "0", value_parser = parse_pps)]
    rate: f64,
    /// Packets per second of the victim sender (client M); 0: no victim.
    #[arg(long, value_name = "PPS", default_value = "0", value_parser = parse_pps)]
    victim_rate: f64,
    /// Source port of the victim [default: base + M, or kernel-chosen with base 0].
    #[arg(long, value_name = "P")]
    victim_port: Option<u16>,
    /// Length of the victim's packets on the wire [default: --len].
    #[arg(long, value_name = "BYTES", value_parser = parse_wire_len)]
    victim_len: Option<u32>,
    /// CPUs to pin the senders to, round-robin: sender i on the (i mod n)-th, the victim
    /// next (e.g. 0,1 or 0-3). Unpinned by default.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    cpus: Option<CpuList>,
    /// Write the report as JSON to FILE (`-`: stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// A list of CPU numbers, as `0,2,5-7`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `0,2,5-7` (at least one CPU; ranges increasing).
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("CPU '{t}' in '{s}' is not a number (e.g. 0,1 or 0-3)"))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("CPU range '{item}' is decreasing"));
                }
                v.extend(a..=b);
            }
            None => v.push(num(item)?),
        }
    }
    Ok(CpuList(v))
}

/// Parses a duration in seconds, 0.01 to 3600.
pub fn parse_secs(s: &str) -> Result<Duration, String> {
    parse_secs_from(s, 0.01)
}

/// Parses a duration in seconds, `min` to 3600.
pub fn parse_secs_from(s: &str, min: f64) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(min..=3600.0).contains(&v) {
        return Err(format!("{v} s is outside {min}..=3600 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

fn parse_pps(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of packets per second"))?;
    if !v.is_finite() || !(0.0..=100e6).contains(&v) {
        return Err(format!("{s} packets per second is outside 0..=1e8"));
    }
    Ok(v)
}

fn parse_wire_len(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a length in bytes"))?;
    if !(MIN_WIRE_LEN..=MAX_WIRE_LEN).contains(&v) {
        return Err(format!(
            "length {v} is outside {MIN_WIRE_LEN}..={MAX_WIRE_LEN} bytes (the wire length: \
             42 bytes of Ethernet, IPv4 and UDP headers, then at least the 40-byte pspat \
             payload header)"
        ));
    }
    Ok(v)
}

/// What one sender did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SenderReport {
    /// The payload's client (and flow) number: the sender's index, M for the victim.
    pub client: u32,
    /// `true` for the victim.
    pub victim: bool,
    /// Source port its socket was bound to.
    pub src_port: u16,
    /// Wire length of its packets.
    pub len: u32,
    /// Paced rate asked for, packets/s (0: as fast as possible).
    pub rate_pps: f64,
    /// Datagrams the kernel accepted.
    pub packets: u64,
    /// `packets * len`.
    pub wire_bytes: u64,
    /// `packets` per second of its sending time.
    pub pps: f64,
    /// Send calls that failed (their packets are not counted as sent).
    pub send_errors: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// Seconds it sent for.
    pub elapsed_s: f64,
}

/// The whole report of `pspat udpgen`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GenReport {
    /// Destination.
    pub dest: String,
    /// Greedy senders (M).
    pub senders: u32,
    /// One entry per greedy sender, in order, then the victim's if any.
    pub flows: Vec<SenderReport>,
    /// Datagrams sent by all of them.
    pub total_packets: u64,
    /// `total_packets` over the longest sender's time.
    pub total_pps: f64,
}

/// One sender's settings.
struct Plan {
    client: u32,
    victim: bool,
    port: u16,
    len: u32,
    rate_pps: f64,
    cpu: Option<usize>,
}

pub fn run(a: GenArgs) -> Result<()> {
    let plans = plan(&a)?;
    if let Some(CpuList(cpus)) = &a.cpus {
        let allowed = cpu::allowed_cpus();
        if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(Usage(format!(
                "--cpus: CPU {c} is not one this process may use ({allowed:?})"
            ))
            .into());
        }
    }
    // Every socket is opened before any thread starts, so a bad address or a port in use
    // is reported before anything is sent.
    let mut senders: Vec<Box<dyn Sender>> = Vec::with_capacity(plans.len());
    for p in &plans {
        let bind: SocketAddr = if a.dest.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, p.port).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, p.port).into()
        };
        let udp = Udp {
            dest: a.dest,
            bind: Some(bind),
        };
        let what = if p.victim {
            "the victim".to_owned()
        } else {
            format!("sender {}", p.client)
        };
        senders.push(
            udp.open(p.client as usize)
                .with_context(|| format!("{what}: opening its socket on port {}", p.port))?,
        );
    }
    let ports: Vec<u16> = plans.iter().map(|p| p.port).collect();
    let duration_ns = a.duration.as_nanos() as u64;
    let barrier = Arc::new(Barrier::new(plans.len()));
    let mut handles = Vec::with_capacity(plans.len());
    for (p, s) in plans.into_iter().zip(senders) {
        let barrier = Arc::clone(&barrier);
        let name = if p.victim {
            "udpgen-victim".to_owned()
        } else {
            format!("udpgen-{}", p.client)
        };
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || send_loop(&p, s, &barrier, duration_ns))
            .context("spawning a sender thread")?;
        handles.push(h);
    }
    let mut flows = Vec::with_capacity(handles.len());
    for (h, port) in handles.into_iter().zip(ports) {
        let mut r = h
            .join()
            .map_err(|_| anyhow!("a sender thread panicked"))??;
        r.src_port = port;
        flows.push(r);
    }
    let total_packets = flows.iter().map(|f| f.packets).sum();
    let longest = flows.iter().map(|f| f.elapsed_s).fold(0.0, f64::max);
    let report = GenReport {
        dest: a.dest.to_string(),
        senders: a.senders,
        total_pps: if longest > 0.0 {
            total_packets as f64 / longest
        } else {
            0.0
        },
        total_packets,
        flows,
    };
    output(&report, a.json.as_deref())
}

/// Checks the options against each other and lists the senders.
fn plan(a: &GenArgs) -> Result<Vec<Plan>> {
    let m = a.senders;
    let cpu_of = |i: u32| {
        a.cpus
            .as_ref()
            .and_then(|c| c.0.get(i as usize % c.0.len().max(1)).copied())
    };
    if a.src_port_base != 0 && u32::from(a.src_port_base) + m - 1 > 65535 {
        return Err(Usage(format!(
            "--src-port-base {} with {m} senders goes past port 65535",
            a.src_port_base
        ))
        .into());
    }
    let mut plans: Vec<Plan> = (0..m)
        .map(|i| Plan {
            client: i,
            victim: false,
            port: if a.src_port_base == 0 {
                0
            } else {
                a.src_port_base + i as u16
            },
            len: a.len,
            rate_pps: a.rate,
            cpu: cpu_of(i),
        })
        .collect();
    if a.victim_rate > 0.0 {
        let port = match a.victim_port {
            Some(p) => p,
            None if a.src_port_base == 0 => 0,
            None => {
                let p = u32::from(a.src_port_base) + m;
                u16::try_from(p).map_err(|_| {
                    Usage(format!(
                        "the victim's default port (base + {m} = {p}) is past 65535: give \
                         --victim-port"
                    ))
                })?
            }
        };
        if port != 0 && plans.iter().any(|p| p.port == port) {
            return Err(Usage(format!(
                "--victim-port {port} is one of the senders' ports ({}..={})",
                a.src_port_base,
                u32::from(a.src_port_base) + m - 1
            ))
            .into());
        }
        plans.push(Plan {
            client: m,
            victim: true,
            port,
            len: a.victim_len.unwrap_or(a.len),
            rate_pps: a.victim_rate,
            cpu: cpu_of(m),
        });
    } else if a.victim_port.is_some() || a.victim_len.is_some() {
        return Err(Usage(
            "--victim-port and --victim-len need a victim: give --victim-rate PPS".into(),
        )
        .into());
    }
    Ok(plans)
}

/// One sender thread: pins itself, waits for the others, then sends until the deadline.
fn send_loop(
    p: &Plan,
    mut sender: Box<dyn Sender>,
    barrier: &Barrier,
    duration_ns: u64,
) -> Result<SenderReport> {
    let pinned = p.cpu.map(cpu::pin_current_thread);
    barrier.wait();
    if let Some(Err(e)) = pinned {
        bail!("sender {}: pinning to CPU {:?}: {e}", p.client, p.cpu);
    }
    let template = Pkt {
        len: p.len,
        client: p.client,
        flow: p.client,
        seq: 0,
        submit_ns: 0,
        depart_ns: 0,
    };
    let mut batch = [template; BATCH];
    let (mut seq, mut sent, mut released, mut errors) = (0u32, 0u64, 0u64, 0u64);
    let mut last_error: Option<String> = None;
    let ns_per_pkt = if p.rate_pps > 0.0 {
        1e9 / p.rate_pps
    } else {
        0.0
    };
    let start = clock::now_ns();
    let deadline = start + duration_ns;
    let mut now = start;
    while now < deadline {
        let n = if p.rate_pps > 0.0 {
            // Packet k is due at start + k * ns_per_pkt.
            let due = ((now - start) as f64 / ns_per_pkt) as u64 + 1;
            if due <= released {
                let next = start + (released as f64 * ns_per_pkt) as u64;
                let wait = next.saturating_sub(now).min(deadline - now);
                if wait > SLEEP_ABOVE_NS {
                    std::thread::sleep(Duration::from_nanos(wait - SLEEP_ABOVE_NS / 2));
                } else {
                    std::thread::yield_now();
                }
                now = clock::now_ns();
                continue;
            }
            ((due - released) as usize).min(BATCH)
        } else {
            BATCH
        };
        for pkt in &mut batch[..n] {
            pkt.seq = seq;
            pkt.submit_ns = now;
            seq = seq.wrapping_add(1);
        }
        released += n as u64;
        let ok = match sender.send(&batch[..n]) {
            Ok(k) => k,
            Err(e) => {
                if sent == 0 {
                    // Nothing ever went out: a configuration problem (no route, ...),
                    // not congestion.
                    bail!("sender {} (port {}): {e}", p.client, p.port);
                }
                errors += 1;
                last_error = Some(e.to_string());
                0
            }
        };
        if ok < n {
            // Unsent packets give their sequence numbers back: no false loss at the sink.
            seq = seq.wrapping_sub((n - ok) as u32);
        }
        sent += ok as u64;
        now = clock::now_ns();
    }
    let elapsed_s = (now - start) as f64 / 1e9;
    Ok(SenderReport {
        client: p.client,
        victim: p.victim,
        src_port: p.port,
        len: p.len,
        rate_pps: p.rate_pps,
        packets: sent,
        wire_bytes: sent * u64::from(p.len),
        pps: sent as f64 / elapsed_s,
        send_errors: errors,
        last_error,
        elapsed_s,
    })
}

/// Prints the table, or writes the JSON (to stdout with `-`).
fn output(r: &GenReport, json: Option<&std::path::Path>) -> Result<()> {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(r)?;
        if path.as_os_str() == "-" {
            return emit(&text);
        }
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let rows: Vec<Vec<String>> = r
        .flows
        .iter()
        .map(|f| {
            vec![
                if f.victim {
                    format!("victim ({})", f.client)
                } else {
                    f.client.to_string()
                },
                f.src_port.to_string(),
                if f.rate_pps > 0.0 {
                    format!("{:.0}", f.rate_pps)
                } else {
                    "max".into()
                },
                f.packets.to_string(),
                format!("{:.0}", f.pps),
                format!("{:.1}", f.pps * f64::from(f.len) * 8.0 / 1e6),
                f.send_errors.to_string(),
            ]
        })
        .collect();
    let t = table::render(
        &[
            "sender", "port", "rate", "packets", "pps", "Mbit/s", "errors",
        ],
        &rows,
        &[1, 2, 3, 4, 5, 6],
    );
    emit(&format!(
        "{t}total: {} packets, {:.0} pps to {}",
        r.total_packets, r.total_pps, r.dest
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0").unwrap().0, [0]);
        assert_eq!(parse_cpu_list("0,2,5-7").unwrap().0, [0, 2, 5, 6, 7]);
        assert!(parse_cpu_list("3-1").unwrap_err().contains("decreasing"));
        assert!(parse_cpu_list("a").unwrap_err().contains("'a'"));
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn lengths_and_rates_are_checked() {
        assert_eq!(parse_wire_len("82"), Ok(82));
        assert!(parse_wire_len("81").unwrap_err().contains("82..="));
        assert!(parse_wire_len("65550").is_err());
        assert_eq!(parse_pps("0"), Ok(0.0));
        assert!(parse_pps("-1").is_err());
        assert!(parse_pps("NaN").is_err());
        assert!(parse_secs("0").is_err());
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_secs_from("0", 0.0), Ok(Duration::ZERO));
    }
}
