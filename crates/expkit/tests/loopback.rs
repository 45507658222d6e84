//! The generator sending to the sink on 127.0.0.1, through the library: what the sink
//! counts is what the generator reports sending, nothing is lost at a low rate, latency
//! percentiles are ordered; then the analysis of the two reports.

use std::time::Duration;

use pspat_expkit::{
    csv, figures, GenConfig, Generator, Row, RowSpec, Sink, SinkConfig, VictimFigures,
};

#[test]
fn a_generator_into_a_sink_on_loopback() {
    let mut sc = SinkConfig::new("127.0.0.1:0".parse().unwrap(), Duration::from_secs(20));
    sc.idle = Duration::from_millis(500);
    let sink = Sink::bind(sc).unwrap();
    let mut gc = GenConfig::new(sink.local_addr(), Duration::from_millis(200));
    gc.senders = 3;
    gc.len = 200;
    gc.src_port_base = 0;
    gc.rate_pps = 2000.0;
    gc.victim_rate_pps = 500.0;
    gc.victim_len = Some(100);
    let gen = Generator::open(gc).unwrap();
    assert_eq!(gen.plans().len(), 4);
    let sender = std::thread::spawn(move || gen.run());
    let got = sink.run().unwrap();
    let sent = sender.join().unwrap().unwrap();

    assert_eq!(sent.flows.len(), 4);
    assert!(sent.victim().is_some_and(|v| v.client == 3 && v.len == 100));
    for f in &sent.flows {
        // Paced at 2000/s (500/s) for 0.2 s: about 400 (100), and never far above.
        let want = if f.victim { 100.0 } else { 400.0 };
        let n = f.packets as f64;
        assert!(n > 0.7 * want && n <= want + 2.0, "{f:?}");
        assert_eq!(f.send_errors, 0);
        let c = got
            .client(f.client)
            .unwrap_or_else(|| panic!("client {} not in {got:?}", f.client));
        assert_eq!(c.packets, f.packets, "client {}", f.client);
        assert_eq!((c.lost, c.reordered, c.clock_skew), (0, 0, 0), "{c:?}");
        assert_eq!(c.wire_bytes, f.wire_bytes);
        let l = &c.latency;
        assert!(
            0 < l.p50_ns && l.p50_ns <= l.p99_ns && l.p99_ns <= l.p999_ns,
            "{l:?}"
        );
        assert!(l.p999_ns <= l.max_ns && l.max_ns < 2_000_000_000, "{l:?}");
    }
    assert_eq!(got.total_packets, sent.total_packets);
    assert_eq!(got.received_total, sent.total_packets);
    assert_eq!((got.garbled, got.other_packets), (0, 0));
    assert!(got.window_s > 0.1 && got.window_s < 0.5, "{}", got.window_s);

    // The reports survive their JSON, and make a row: the paced senders got everything
    // they offered, so their fair targets are their offered rates (equal), not weights
    // 1,1,2, against which the third sender got half its 50%.
    let dir = tempfile::tempdir().unwrap();
    let (gen_json, sink_json) = (dir.path().join("gen.json"), dir.path().join("sink.json"));
    std::fs::write(&gen_json, serde_json::to_string_pretty(&sent).unwrap()).unwrap();
    std::fs::write(&sink_json, serde_json::to_string_pretty(&got).unwrap()).unwrap();
    let (sent2, got2) = (
        pspat_expkit::GenReport::read(&gen_json).unwrap(),
        pspat_expkit::SinkReport::read(&sink_json).unwrap(),
    );
    // (Floats may differ in their last digit: serde_json's default parser is not exact.)
    assert_eq!(sent2.flows.len(), 4);
    assert_eq!(sent2.total_packets, sent.total_packets);
    assert_eq!(got2.total_packets, got.total_packets);
    assert_eq!(
        got2.clients[3].latency.p99_ns,
        got.clients[3].latency.p99_ns
    );
    let spec = RowSpec {
        set: "loop".into(),
        mode: "none".into(),
        link_bps: 0,
        weights: vec![1, 1, 2],
        sink_drops: None,
    };
    let row = Row::new(spec, &sent2, &got2).unwrap();
    assert!(row.fairness.max_share_err < 0.05, "{row:?}");
    assert!(
        (row.fairness.max_share_err_weight - 1.0 / 3.0).abs() < 0.05,
        "{row:?}"
    );
    assert!(matches!(row.victim, VictimFigures::Received { loss_frac, .. } if loss_frac == 0.0));
    let results = dir.path().join("results.csv");
    csv::append_row(&results, &row).unwrap();
    let files = figures::plot_results(&results, &dir.path().join("plots")).unwrap();
    assert_eq!(files.len(), 4);
}

#[test]
fn bad_settings_are_refused_before_anything_is_sent() {
    let mut gc = GenConfig::new("127.0.0.1:9".parse().unwrap(), Duration::from_secs(1));
    gc.cpus = Some("100000".parse().unwrap());
    let e = Generator::open(gc).err().unwrap();
    assert!(e.is_usage() && e.to_string().contains("CPU 100000"), "{e}");
    let mut sc = SinkConfig::new("127.0.0.1:0".parse().unwrap(), Duration::from_secs(1));
    sc.spin = Duration::from_micros(5);
    let e = Sink::bind(sc.clone()).err().unwrap();
    assert!(e.is_usage() && e.to_string().contains("--busy-poll"), "{e}");
    sc.spin = Duration::ZERO;
    sc.duration = Duration::ZERO;
    let e = Sink::bind(sc.clone()).err().unwrap();
    assert!(e.to_string().contains("0.01..=3600"), "{e}");
    sc.duration = Duration::from_secs(1);
    sc.bind = "192.0.2.1:9".parse().unwrap();
    let e = Sink::bind(sc).err().unwrap();
    assert!(
        !e.is_usage() && e.to_string().contains("192.0.2.1:9"),
        "{e}"
    );
}

#[test]
fn senders_sharing_threads_each_keep_their_rate_and_sequence() {
    let mut sc = SinkConfig::new("127.0.0.1:0".parse().unwrap(), Duration::from_secs(20));
    sc.idle = Duration::from_millis(500);
    sc.trace = true;
    let sink = Sink::bind(sc).unwrap();
    let mut gc = GenConfig::new(sink.local_addr(), Duration::from_millis(300));
    gc.senders = 5;
    gc.len = 200;
    gc.src_port_base = 0;
    gc.threads = 2;
    gc.rates_pps = vec![1000.0, 2000.0, 1000.0, 3000.0, 500.0];
    let gen = Generator::open(gc).unwrap();
    let threads: Vec<u32> = gen.plans().iter().map(|p| p.thread).collect();
    assert_eq!(threads, [0, 1, 0, 1, 0]);
    let sender = std::thread::spawn(move || gen.run());
    let got = sink.run().unwrap();
    let sent = sender.join().unwrap().unwrap();
    let clients: Vec<u32> = sent.flows.iter().map(|f| f.client).collect();
    assert_eq!(clients, [0, 1, 2, 3, 4], "reports in sender order");
    for f in &sent.flows {
        // each at its own rate for 0.3 s, though two or three share a thread
        let want = f.rate_pps * 0.3;
        let n = f.packets as f64;
        assert!(n > 0.7 * want && n <= want + 2.0, "{f:?}");
        let c = got.client(f.client).unwrap();
        assert_eq!((c.packets, c.lost, c.reordered), (f.packets, 0, 0), "{c:?}");
    }
    // the trace lists every datagram counted, stamped by the kernel, in order
    assert_eq!(got.trace.len() as u64, got.total_packets);
    assert!(got
        .trace
        .windows(2)
        .all(|w| w[0].t_ns <= w[1].t_ns + 1_000_000));
}
