//! What an operator's network does to a shaper: interfaces named twice (an altname), links
//! that go down and come back, an output that disappears. Each case between real
//! interfaces, in network namespaces of the test's own (see `common`):
//!
//! ```text
//!  [snd: s0 10.77.0.1] --veth-- [shp: s1   Shaper   r1] --veth-- [rcv: r0 10.77.0.2]
//! ```
//!
//! Needs root (namespaces, AF_PACKET); CI runs as root. Without it the tests say so and
//! pass without checking anything, except with `CI=true`, where they fail.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{ip, topology_or_skip, Netns, Topology, RCV_ADDR, SND_ADDR};
use pspat_engine::error_chain as chain;
use pspat_shaper::{Shaper, ShaperConfig};

const CONFIG: &str = "sched 1 config type fifo bw 10Mbit/s\n\
                      queue 1 config sched 1\n\
                      add 100 queue 1 ip from any to any\n";

/// `--in` and `--out` naming one interface, once by its name and once by an altname, are
/// refused as the same interface: a shaper between them would reflect every frame back to
/// its sender, twice.
#[test]
fn one_interface_by_its_name_and_an_altname_is_refused() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("shaper.ipfw");
    std::fs::write(&cfg, CONFIG).unwrap();
    let added = t
        .shp
        .run(|| ip("link property add dev r1 altname pspat-r1-alt"));
    if let Err(why) = added {
        // Altnames arrived in Linux 5.5 and iproute2 5.4.
        common::skip(&format!("no altnames here: {why}"));
        return;
    }
    for (input, output) in [("pspat-r1-alt", "r1"), ("r1", "pspat-r1-alt")] {
        let config = ShaperConfig::new(input, output, &cfg);
        let e = t
            .shp
            .run(move || Shaper::start(config).err())
            .map(|e| (e.is_usage(), chain(&e)));
        let (usage, msg) = e.unwrap_or_else(|| panic!("--in {input} --out {output} started"));
        assert!(usage, "{msg}");
        assert!(
            msg.starts_with(&format!(
                "--in {input} and --out {output} are the same interface (index "
            )),
            "{msg}"
        );
    }
}

/// Sends `n` datagrams from `from` (bound in its namespace to `src`) to `dst` port 9000,
/// one every millisecond, and counts what `to` receives (bound to `dst`) until 500 ms
/// pass without one.
fn probe(from: &Netns, src: &'static str, to: &Netns, dst: &'static str, n: u32) -> u32 {
    let rx = to.run(move || UdpSocket::bind((dst, 9000))).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    send(from, src, dst, n);
    let mut got = 0;
    let mut buf = [0u8; 256];
    while rx.recv(&mut buf).is_ok() {
        got += 1;
    }
    got
}

/// Sends `n` datagrams from `from` (bound to `src`) to `dst` port 9000, one every
/// millisecond.
fn send(from: &Netns, src: &'static str, dst: &'static str, n: u32) {
    let tx = from.run(move || UdpSocket::bind((src, 0))).unwrap();
    for _ in 0..n {
        let _ = tx.send_to(&[7u8; 100], (dst, 9000));
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Forward (sender to receiver, shaped) and back (unshaped): most of 50 pass each way.
fn both_ways_pass(t: &Topology, when: &str, report: impl Fn() -> String) {
    let fwd = probe(&t.snd, SND_ADDR, &t.rcv, RCV_ADDR, 50);
    assert!(fwd >= 45, "{when}: {fwd} of 50 forward\n{}", report());
    let back = probe(&t.rcv, RCV_ADDR, &t.snd, SND_ADDR, 50);
    assert!(back >= 45, "{when}: {back} of 50 back\n{}", report());
}

fn start(t: &Topology, config: ShaperConfig) -> Shaper {
    t.shp
        .run(move || Shaper::start(config))
        .unwrap_or_else(|e| panic!("starting the shaper: {}", chain(&e)))
}

fn config_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let cfg = dir.path().join("shaper.ipfw");
    std::fs::write(&cfg, CONFIG).unwrap();
    cfg
}

/// Waits until `f` holds, for at most `secs`.
fn eventually(secs: u64, f: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// One second down, then up, first of the input, then of the output: the shaper carries
/// on with the same sockets both ways, says what happened in its link counters, and
/// accounts for every frame.
#[test]
fn a_flap_of_either_interface_is_ridden_through() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let shaper = start(&t, ShaperConfig::new("s1", "r1", config_file(&tmp)));
    both_ways_pass(&t, "before", String::new);
    for dev in ["s1", "r1"] {
        t.shp
            .run(move || ip(&format!("link set dev {dev} down")))
            .unwrap();
        // Its own threads find it down (the kernel reports it to a bound socket once).
        let role = if dev == "s1" { 0 } else { 1 };
        assert!(
            eventually(5, || shaper.links()[role].down_for.is_some()),
            "{dev} down not seen: {:?}",
            shaper.links()
        );
        std::thread::sleep(Duration::from_secs(1));
        t.shp
            .run(move || ip(&format!("link set dev {dev} up")))
            .unwrap();
        assert!(
            eventually(5, || shaper.links()[role].down_for.is_none()),
            "{dev} up not seen: {:?}",
            shaper.links()
        );
        assert!(!shaper.thread_ended(), "a thread ended after {dev}'s flap");
        both_ways_pass(&t, &format!("after {dev}'s flap"), || {
            format!("{:?}", shaper.links())
        });
    }
    let report = shaper.stop();
    assert_eq!(report.unaccounted(), 0, "{report}");
    let [input, output] = [&report.links[0], &report.links[1]];
    assert!(input.downs >= 1 && input.ups >= 1, "{report}");
    assert!(output.downs >= 1 && output.ups >= 1, "{report}");
    assert_eq!(input.reopens + output.reopens, 0, "{report}");
    assert!(report.errors.is_empty(), "{report}");
    let text = report.to_string();
    assert!(text.contains("link: input s1: down"), "{text}");
    assert!(text.contains("link: output r1: down"), "{text}");
}

/// The input deleted (the veth pair with it) and created again under a new index: the
/// receiving thread and the reverse path open their sockets again, and frames pass.
#[test]
fn a_deleted_input_created_again_is_opened_again() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let shaper = start(&t, ShaperConfig::new("s1", "r1", config_file(&tmp)));
    both_ways_pass(&t, "before", String::new);
    t.shp.run(|| ip("link del dev s1")).unwrap();
    assert!(
        eventually(5, || shaper.links()[0].downs > 0),
        "the deletion was not seen: {:?}",
        shaper.links()
    );
    std::thread::sleep(Duration::from_millis(500));
    t.recreate_input().unwrap();
    assert!(
        eventually(5, || shaper.links()[0].reopens > 0),
        "not reopened: {:?}",
        shaper.links()
    );
    // The new veth pair's first frames may meet a link still settling: a first burst
    // warms it, the counted one must pass.
    probe(&t.snd, SND_ADDR, &t.rcv, RCV_ADDR, 20);
    both_ways_pass(&t, "after the input came back", || {
        format!(
            "{:?} {:?} ended {}",
            shaper.links(),
            shaper.snapshot().reverse,
            shaper.thread_ended()
        )
    });
    assert!(!shaper.thread_ended());
    let report = shaper.stop();
    assert_eq!(report.unaccounted(), 0, "{report}");
    assert!(report.errors.is_empty(), "{report}");
    assert!(report.to_string().contains("sockets reopened"), "{report}");
}

/// The output deleted and created again, with no reverse path (the engine's transmitting
/// thread is the only one on it): it opens its socket again, and frames pass.
#[test]
fn a_deleted_output_created_again_is_opened_again_by_the_transmitter() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut config = ShaperConfig::new("s1", "r1", config_file(&tmp));
    config.reverse = false;
    let shaper = start(&t, config);
    let fwd = probe(&t.snd, SND_ADDR, &t.rcv, RCV_ADDR, 50);
    assert!(fwd >= 45, "before: {fwd} of 50");
    t.shp.run(|| ip("link del dev r1")).unwrap();
    // What arrives meanwhile fails to go out: the transmitter finds the output gone.
    send(&t.snd, SND_ADDR, RCV_ADDR, 20);
    assert!(
        eventually(5, || shaper.links()[1].down_for.is_some()),
        "the deletion was not seen: {:?}",
        shaper.links()
    );
    t.recreate_output().unwrap();
    assert!(
        eventually(5, || {
            probe(&t.snd, SND_ADDR, &t.rcv, RCV_ADDR, 5);
            shaper.links()[1].reopens > 0
        }),
        "not reopened: {:?}",
        shaper.links()
    );
    let fwd = probe(&t.snd, SND_ADDR, &t.rcv, RCV_ADDR, 50);
    assert!(fwd >= 45, "after: {fwd} of 50: {:?}", shaper.links());
    let report = shaper.stop();
    assert_eq!(report.unaccounted(), 0, "{report}");
    assert!(report.engine.send_failed > 0, "{report}");
    assert!(
        report.faults().iter().any(|f| f.contains("send_failed")),
        "the frames lost while it was gone are a fault: {report}"
    );
}

/// The output deleted for longer than `link_wait`: the shaper's thread on it ends, the
/// shaper says so (`thread_ended`), and the error names the interface and the wait.
#[test]
fn an_output_deleted_for_good_ends_the_shaper_naming_it() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut config = ShaperConfig::new("s1", "r1", config_file(&tmp));
    config.link_wait = Duration::from_secs(1);
    let shaper = start(&t, config);
    t.shp.run(|| ip("link del dev r1")).unwrap();
    assert!(
        eventually(10, || shaper.thread_ended()),
        "still running: {:?}",
        shaper.links()
    );
    let report = shaper.stop();
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("output r1 was deleted and did not come back within 1s")),
        "{report}"
    );
    assert!(!report.faults().is_empty());
}
