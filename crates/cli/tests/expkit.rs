//! The shaper experiment kit's tools end to end on loopback: `pspat udpgen` into
//! `pspat udpsink`, then `pspat experiment row` and `plot` on their reports.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use assert_cmd::Command;
use serde_json::Value;

fn pspat() -> Command {
    Command::cargo_bin("pspat").expect("the pspat binary is built")
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Runs `pspat ARGS`, expecting failure with exit code `code` and `needle` in stderr.
fn fails(args: &[&str], code: i32, needle: &str) {
    let out = pspat().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: no '{needle}' in: {err}");
}

#[test]
fn gen_into_sink_counts_add_up_and_latency_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (gen_json, sink_json) = (dir.join("gen.json"), dir.join("sink.json"));
    // The sink picks its port and says which on stderr once bound.
    let mut sink = StdCommand::cargo_bin("pspat")
        .unwrap()
        .args([
            "udpsink",
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "30",
            "--idle",
        ])
        // Spins 50 us after each datagram, then sleeps: the packets 333 us apart make it
        // switch between the two all the time.
        .args(["1", "--busy-poll", "--spin-us", "50", "--json"])
        .arg(&sink_json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(sink.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("pspat udpsink: ready on ")
        .unwrap_or_else(|| panic!("no ready line: {line:?}"))
        .to_owned();
    // Two paced senders and a victim, low rates: nothing should be lost on loopback.
    let gen = pspat()
        .args(["udpgen", "--dest", &addr, "--senders", "2", "--len", "300"])
        .args([
            "--duration",
            "0.5",
            "--src-port-base",
            "0",
            "--rate",
            "3000",
        ])
        .args(["--victim-rate", "400", "--victim-len", "120", "--json"])
        .arg(&gen_json)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let status = sink.wait().unwrap();
    assert!(status.success());
    let g = read_json(&gen_json);
    let s = read_json(&sink_json);
    let flows = g["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[2]["victim"], true);
    assert_eq!(flows[2]["client"], 2);
    let mut total = 0;
    for f in flows {
        let client = f["client"].as_u64().unwrap();
        let sent = f["packets"].as_u64().unwrap();
        // Paced at 3000/s (400/s) for 0.5 s: about 1500 (200), and never far above.
        let want = if client == 2 { 200.0 } else { 1500.0 };
        assert!(
            (sent as f64) > 0.7 * want && (sent as f64) <= want + 2.0,
            "client {client} sent {sent}"
        );
        let c = s["clients"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["client"] == client)
            .unwrap_or_else(|| panic!("client {client} not in the sink's report: {s}"));
        assert_eq!(c["packets"].as_u64(), Some(sent), "client {client}: {c}");
        assert_eq!(c["lost"], 0);
        assert_eq!(c["reordered"], 0);
        let len = if client == 2 { 120 } else { 300 };
        assert_eq!(c["wire_bytes"].as_u64(), Some(sent * len));
        let lat = &c["latency"];
        let (p50, p99, max) = (
            lat["p50_ns"].as_u64().unwrap(),
            lat["p99_ns"].as_u64().unwrap(),
            lat["max_ns"].as_u64().unwrap(),
        );
        assert!(p50 > 0 && p50 <= p99 && p99 <= max, "{lat}");
        assert!(max < 2_000_000_000, "{lat}");
        total += sent;
    }
    assert_eq!(s["total_packets"].as_u64(), Some(total));
    assert_eq!(s["received_total"].as_u64(), Some(total));
    assert_eq!(s["garbled"], 0);

    // The analysis: one CSV line (then one with CPU samples and a baseline), the summary,
    // then four plots.
    let csv = dir.join("results.csv");
    let shares = dir.join("shares.csv");
    let out = pspat()
        .args(["experiment", "row", "--set", "t", "--mode", "none"])
        .args(["--weights", "1,3", "--gen"])
        .arg(&gen_json)
        .arg("--sink")
        .arg(&sink_json)
        .arg("--csv")
        .arg(&csv)
        .arg("--shares-csv")
        .arg(&shares)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let head: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    let cell = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    assert_eq!(cell("senders"), "2");
    assert_eq!(cell("victim_pkts"), flows[2]["packets"].to_string());
    // Equal rates, all delivered: the fair targets are the offered rates (no error), and
    // against weights 1:3 alone sender 0 has about twice its 25%.
    let err: f64 = cell("max_share_err").parse().unwrap();
    assert!(err < 0.1, "{err}");
    let err: f64 = cell("max_share_err_weight").parse().unwrap();
    assert!((0.9..1.1).contains(&err), "{err}");
    assert_eq!(std::fs::read_to_string(&shares).unwrap().lines().count(), 3);
    assert_eq!(cell("cpu_ns_per_pkt"), "");

    // The same run with CPU samples 2 s apart (0.5 CPU of softirq, 1.5 CPU of the
    // shaper) and itself as the baseline: no latency added.
    let sample = |name: &str, t_us: u64, softirq: u64, utime: u64| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "time_us {t_us}\nclk_tck 100\ncpu  1 2 3 4 5 6 {softirq} 8 0 0\n\
                 shaper 7 (pspat) S 1 7 7 0 -1 0 0 0 0 0 {utime} 10 0 0\n"
            ),
        )
        .unwrap();
        path
    };
    let (before, after) = (
        sample("b.txt", 1_000_000, 100, 50),
        sample("a.txt", 3_000_000, 200, 350),
    );
    let out = pspat()
        .args(["experiment", "row", "--set", "t", "--mode", "pspat"])
        .args(["--weights", "1,3", "--gen"])
        .arg(&gen_json)
        .arg("--sink")
        .arg(&sink_json)
        .arg("--baseline-sink")
        .arg(&sink_json)
        .arg("--cpu-before")
        .arg(&before)
        .arg("--cpu-after")
        .arg(&after)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("+0.0/+0.0 us against the bridge alone"),
        "{said}"
    );
    assert!(
        said.contains("1.50 CPU") && said.contains("0.50 CPU"),
        "{said}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let row: Vec<&str> = text.lines().nth(2).unwrap().split(',').collect();
    let cell = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    let pps: f64 = s["total_pps"].as_f64().unwrap();
    let cpu: f64 = cell("cpu_ns_per_pkt").parse().unwrap();
    assert!((cpu - 2e9 / pps).abs() < 1.0, "{cpu} ns at {pps} pps");
    assert_eq!(cell("victim_added_p99_us"), "0.0");
    let summary = pspat()
        .args(["experiment", "summary"])
        .arg(&csv)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&summary.stdout);
    assert!(summary.status.success());
    assert!(
        said.starts_with("set t:\n") && said.contains("CPU ns/pkt"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 4, "{said}");
    // A sample that does not parse is named; one without the other is refused.
    let row_with = |cpu: &[&Path]| {
        let mut c = pspat();
        c.args([
            "experiment",
            "row",
            "--set",
            "t",
            "--mode",
            "x",
            "--weights",
            "1",
        ])
        .arg("--gen")
        .arg(&gen_json)
        .arg("--sink")
        .arg(&sink_json)
        .arg("--csv")
        .arg(dir.join("other.csv"));
        for (flag, path) in ["--cpu-before", "--cpu-after"].iter().zip(cpu) {
            c.arg(flag).arg(path);
        }
        c.output().unwrap()
    };
    let out = row_with(&[&before, &gen_json]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("gen.json") && err.contains("unknown key"),
        "{err}"
    );
    let out = row_with(&[&before]);
    assert_eq!(out.status.code(), Some(2));
    let plots = dir.join("plots");
    pspat()
        .args(["experiment", "plot"])
        .arg(&csv)
        .arg(&plots)
        .assert()
        .success();
    for name in [
        "t-pps.svg",
        "t-share-error.svg",
        "t-victim-p99.svg",
        "t-cpu-per-pkt.svg",
    ] {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("none"), "{name}");
    }
}

#[test]
fn bad_input_gets_a_clear_error() {
    let base = ["udpgen", "--dest", "127.0.0.1:9", "--duration", "0.1"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    fails(&with(&["--len", "60"]), 2, "82..=");
    fails(&with(&["--senders", "0"]), 2, "--senders");
    fails(&with(&["--victim-port", "9999"]), 2, "--victim-rate");
    fails(
        &with(&["--src-port-base", "65530", "--senders", "8"]),
        2,
        "65535",
    );
    fails(&with(&["--cpus", "5-2"]), 2, "decreasing");
    fails(&with(&["--cpus", "100000"]), 2, "CPU 100000");
    fails(
        &["udpgen", "--dest", "nowhere", "--duration", "1"],
        2,
        "--dest",
    );
    fails(
        &[
            "udpsink",
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "1",
            "--spin-us",
            "5",
        ],
        2,
        "--busy-poll",
    );
    fails(
        &["udpsink", "--bind", "127.0.0.1:0", "--duration", "0"],
        2,
        "0.01..=3600",
    );
    // 192.0.2.1 (TEST-NET-1) is on no interface here: bind fails, naming the address.
    fails(
        &["udpsink", "--bind", "192.0.2.1:9", "--duration", "1"],
        1,
        "192.0.2.1:9",
    );
    fails(
        &["experiment", "plot", "/nonexistent/results.csv", "/tmp"],
        1,
        "/nonexistent/results.csv",
    );
}
