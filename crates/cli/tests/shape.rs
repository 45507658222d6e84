//! `pspat shape`'s command line: bad options and interfaces are named with the exit code
//! that says whose fault they are, `--duration` and `--stats` take durations (a bare number
//! is seconds), and a run shapes real traffic, prints the ready line, the live view and the
//! final account and writes the JSON report, whether it ends at `--duration` or on SIGTERM
//! (what `experiments/shaper/run.sh` sends it). The shaper itself (shares, accounting,
//! reloads) is tested through its library, in `crates/shaper/tests/`.
//!
//! The runs need root: they build the shaper library's test topology (its
//! `tests/common/mod.rs`, included here): three network namespaces of the test's own,
//!
//! ```text
//!  [snd: s0 10.77.0.1] --veth-- [shp: s1   pspat shape   r1] --veth-- [rcv: r0 10.77.0.2]
//! ```
//!
//! with the binary started in `shp`. Without root, or when the namespaces cannot be set
//! up, a test says so and passes, except with `CI=true`, where it fails.

#[path = "../../shaper/tests/common/mod.rs"]
mod common;
mod shape_process;

use std::net::UdpSocket;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use common::{topology_or_skip, Topology, RCV_ADDR, SND_ADDR};
use serde_json::Value;
use shape_process::Shape;

const CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/config/shaper.ipfw"
);

fn pspat(args: &[&str]) -> Output {
    Command::cargo_bin("pspat")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

/// Runs `pspat ARGS`, expecting exit code `code` (2: the user's options are at fault, 1: a
/// failure of the machine); returns stderr.
fn refused(args: &[&str], code: i32) -> String {
    let out = pspat(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    err
}

#[test]
fn bad_interfaces_and_options_are_named() {
    // Root: the interface is unknown; not root: AF_PACKET needs CAP_NET_RAW. Either way
    // the message says what to fix, and the machine is at fault (exit 1).
    let e = refused(
        &[
            "shape", "--in", "nosuch0", "--out", "nosuch1", "--config", CONFIG,
        ],
        1,
    );
    assert!(e.contains("nosuch1") || e.contains("CAP_NET_RAW"), "{e}");
    // The options or the configuration file are at fault: exit 2.
    let e = refused(
        &["shape", "--in", "lo", "--out", "lo", "--config", CONFIG],
        2,
    );
    assert!(e.contains("same interface"), "{e}");
    let e = refused(
        &[
            "shape",
            "--in",
            "a",
            "--out",
            "b",
            "--config",
            "/nonexistent.ipfw",
        ],
        2,
    );
    assert!(e.contains("/nonexistent.ipfw"), "{e}");
    // A good configuration and a bad option: the option is named before any socket opens.
    let bad = |opt: &[&str]| {
        let mut args = vec!["shape", "--in", "a", "--out", "b", "--config", CONFIG];
        args.extend_from_slice(opt);
        refused(&args, 2)
    };
    let e = bad(&["--mailbox", "1000"]);
    assert!(e.contains("--mailbox 1000"), "{e}");
    let e = bad(&["--rx-cpus", "0,100000"]);
    assert!(e.contains("--rx-cpus: CPU 100000"), "{e}");
    for opt in ["--duration", "--stats"] {
        let e = bad(&[opt, "5 parsecs"]);
        assert!(e.contains(opt) && e.contains("5 parsecs"), "{e}");
    }
}

/// Datagrams sent through the shaper by [`send_through`].
const DATAGRAMS: u32 = 200;

/// Sends [`DATAGRAMS`] UDP datagrams of 1000 bytes on the wire, one every millisecond (8
/// Mbit/s, far below the configuration's 100 Mbit/s), from the sender's port 10001 (queue 1
/// of the configuration) to the receiver, and counts those that arrive (until 1 s passes
/// without one). Returns (sent, received).
fn send_through(t: &Topology) -> (u32, u32) {
    let sink = t.rcv.run(|| UdpSocket::bind((RCV_ADDR, 9000))).unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let sock = t.snd.run(|| UdpSocket::bind((SND_ADDR, 10001))).unwrap();
    let payload = [0x5au8; 1000 - 14 - 20 - 8];
    let mut sent = 0;
    for _ in 0..DATAGRAMS {
        if sock.send_to(&payload, (RCV_ADDR, 9000)).is_ok() {
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut received = 0;
    let mut buf = [0u8; 2048];
    while sink.recv(&mut buf).is_ok() {
        received += 1;
    }
    (sent, received)
}

fn read_json(p: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every frame received is accounted for, and the traffic sent went through.
fn assert_shaped(j: &Value, received: u32) {
    assert!(j["rx_frames"].as_u64().unwrap() > 0, "{j}");
    assert!(j["sent"].as_u64().unwrap() >= u64::from(received), "{j}");
    assert!(j["sent"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["unaccounted"], 0, "{j}");
    assert_eq!(j["errors"], serde_json::json!([]), "{j}");
}

#[test]
fn a_run_prints_its_account_and_writes_the_json_report() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("shape.json");
    let started = Instant::now();
    // For 1 s (a bare number: seconds), a live view every 0.5 s.
    let mut shape = Shape::start(
        &t,
        CONFIG,
        &[
            "--duration",
            "1",
            "--stats",
            "0.5",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    shape.wait_for("pspat shape: ready");
    let (sent, received) = send_through(&t);
    assert!(sent > 0 && received > 0, "sent {sent}, received {received}");
    assert!(shape.wait().success(), "{}", shape.stderr());
    let err = shape.stderr();
    assert!(started.elapsed() < Duration::from_secs(15), "{err}");
    let lines = &shape.seen;
    let has = |p: &str| lines.iter().any(|l| l.starts_with(p));
    assert!(
        has("pspat shape: flowset 1: max-len 1500 raised to 1518, the longest frame r1 sends"),
        "{err}"
    );
    let config = format!("config {CONFIG})");
    assert!(
        lines.iter().any(|l| l.starts_with(
            "pspat shape: ready: s1 -> r1 (1 rx thread(s), hand-off arbiter, checksums "
        ) && l.ends_with(&config)),
        "{err}"
    );
    // The live view: its time, then rates.
    let tick = lines
        .iter()
        .position(|l| l.starts_with("t=0."))
        .expect(&err);
    assert!(lines[tick + 1].starts_with("rx "), "{err}");
    // The final account.
    assert!(has("pspat shape: s1 -> r1 for 1."), "{err}");
    assert!(!err.contains("(interrupted)"), "{err}");
    assert!(has("received "), "{err}");
    assert!(has("reverse path: "), "{err}");
    assert!(!err.contains("unaccounted"), "{err}");

    let j = read_json(&json);
    assert_eq!(j["input"], "s1", "{j}");
    assert_eq!(j["output"], "r1", "{j}");
    assert_eq!(j["config"], CONFIG, "{j}");
    assert_eq!(j["handoff"], "arbiter", "{j}");
    assert_eq!(j["interrupted"], false, "{j}");
    assert!(j["seconds"].as_f64().unwrap() >= 1.0, "{j}");
    assert!(j["drops"].is_object() && j["dummynet"].is_object(), "{j}");
    assert_shaped(&j, received);
}

/// SIGTERM (what `experiments/shaper/run.sh` stops the shaper with) is a clean stop: exit
/// 0, the final account marked interrupted, the JSON report written.
#[test]
fn sigterm_stops_it_cleanly_with_its_account_and_json_report() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("shape.json");
    // No --duration: it runs until a signal.
    let mut shape = Shape::start(
        &t,
        CONFIG,
        &["--stats", "0.5", "--json", json.to_str().unwrap()],
    );
    shape.wait_for("pspat shape: ready");
    let (sent, received) = send_through(&t);
    assert!(sent > 0 && received > 0, "sent {sent}, received {received}");
    // The loop runs (and so the handler is in place) once the live view shows.
    shape.wait_for("t=");
    shape.signal(libc::SIGTERM);
    let status = shape.wait();
    let err = shape.stderr();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        shape
            .seen
            .iter()
            .any(|l| l.starts_with("pspat shape: s1 -> r1 for ") && l.ends_with("(interrupted)")),
        "{err}"
    );
    assert!(!err.contains("unaccounted"), "{err}");

    let j = read_json(&json);
    assert_eq!(j["interrupted"], true, "{j}");
    assert_shaped(&j, received);
}
