//! End-to-end tests of the `pspat` binary: small runs, bounded in time.

mod account;

use assert_cmd::Command;
use pspat_sched::registry::algorithms;

fn pspat() -> Command {
    Command::cargo_bin("pspat").expect("the pspat binary is built")
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let out = pspat().args(args).output().expect("pspat runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `key=value` tokens of a summary line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

#[test]
fn bench_sched_prints_dummynets_line() {
    let o = run(&[
        "bench",
        "sched",
        "-alg",
        "wf2qp",
        "-n",
        "20K",
        "-qmin",
        "4n",
        "-qmax",
        "30n",
        "-flowsets",
        "1::16,4::4",
    ]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    let summary = lines[0];
    assert_eq!(field(summary, "sched"), "wf2q+");
    assert_eq!(field(summary, "flow"), "1::16,4::4");
    let wfi: f64 = field(summary, "wfi").parse().unwrap();
    assert!(wfi >= 0.0);
    // time=S.MMM sec (N nsec)
    let time = field(summary, "time");
    assert!(time.parse::<f64>().is_ok(), "{summary}");
    let nsec = summary
        .split('(')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(nsec.parse::<u64>().unwrap() > 0, "{summary}");
    let details = lines[1];
    assert_eq!(field(details, "flows"), "20");
    assert_eq!(field(details, "qmin"), "80");
    assert_eq!(field(details, "qmax"), "600");
    assert_eq!(field(details, "loops"), "20000");
    assert_eq!(field(details, "mismatches"), "0");
    assert_eq!(field(details, "drops"), "0");
    let enq: u64 = field(details, "enq").parse().unwrap();
    let deq: u64 = field(details, "deq").parse().unwrap();
    assert_eq!(enq + deq, 20_000);
}

#[test]
fn gnu_options_work_too() {
    let o = run(&[
        "bench",
        "sched",
        "--alg",
        "drr",
        "--loops",
        "5000",
        "--flows",
        "8",
        "--len",
        "1500",
        "--pattern",
        "bursty",
        "--seed",
        "7",
        "--burst",
        "3",
        "-d",
        "2",
    ]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("sched=drr "), "{}", o.stdout);
    assert_eq!(field(&o.stdout, "flow"), "1::8");
    assert_eq!(field(o.stdout.lines().nth(1).unwrap(), "pattern"), "bursty");
}

#[test]
fn json_has_every_field() {
    let o = run(&[
        "bench",
        "sched",
        "-alg",
        "prio",
        "-n",
        "10000",
        "-flowsets",
        "1::4,3::2",
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("one JSON object");
    assert_eq!(v["sched"], "prio");
    assert_eq!(v["params"], "bands=64");
    assert_eq!(v["flows"], 6);
    assert_eq!(v["loops_run"], 10000);
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["flowset_list"][1]["weight"], 3);
    assert_eq!(v["flowset_list"][1]["len"], 1000);
    for key in [
        "ns_per_pair",
        "elapsed_ns",
        "enqueue_attempts",
        "enqueued",
        "dequeued",
        "drops",
        "drops_total",
        "wfi_bytes",
        "wfi_flow",
        "qmin",
        "qmax",
        "capacity",
        "pattern",
        "seed",
        "pending_end",
        "sched_backlog_end",
        "order_errors",
        "lost",
        "sched_counters",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
}

/// Runs a command expected to fail with a usage error naming `token`.
fn usage_error(args: &[&str], token: &str) {
    let o = run(args);
    assert_eq!(o.code, 2, "{args:?}: {}{}", o.stdout, o.stderr);
    assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
    assert_eq!(
        o.stderr.lines().count(),
        1,
        "{args:?}: one line: {}",
        o.stderr
    );
    assert!(o.stderr.starts_with("error: "), "{args:?}: {}", o.stderr);
    assert!(
        o.stderr.contains(token),
        "{args:?}: {token} not in {}",
        o.stderr
    );
}

#[test]
fn usage_errors_are_one_line_naming_the_token() {
    usage_error(&["bench", "sched", "-alg", "nosuch"], "'nosuch'");
    usage_error(
        &["bench", "sched", "-alg", "fifo", "-flowsets", "0:1500:4"],
        "'0:1500:4'",
    );
    usage_error(
        &["bench", "sched", "-alg", "fifo", "-flowsets", "0:1500:4"],
        "invalid weight '0'",
    );
    usage_error(&["bench", "sched", "-flowsets", "1:x:4"], "len 'x'");
    usage_error(&["bench", "sched", "-flowsets", "1::4,"], "'1::4,'");
    usage_error(
        &["bench", "sched", "-alg", "prio", "-flowsets", "65::1"],
        "'65::1'",
    );
    usage_error(&["bench", "sched", "-qmin", "4x"], "'4x'");
    usage_error(&["bench", "sched", "-n", "3n"], "'3n'");
    usage_error(
        &["bench", "sched", "-alg", "drr", "--params", "quantum=abc"],
        "'abc'",
    );
    usage_error(
        &["bench", "sched", "-alg", "drr", "--params", "bogus=1"],
        "'bogus'",
    );
    usage_error(&["bench", "sched", "--bogus"], "'--bogus'");
    usage_error(&["nosuch"], "'nosuch'");
}

#[test]
fn algorithms_lists_every_registered_name() {
    let o = run(&["algorithms"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for a in algorithms() {
        let row = o
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(a.name))
            .unwrap_or_else(|| panic!("{} not listed:\n{}", a.name, o.stdout));
        assert!(row.contains(a.complexity) && row.contains(a.file), "{row}");
        for p in a.params {
            assert!(row.contains(&format!("{}={}", p.name, p.default)), "{row}");
        }
    }
    let o = run(&["algorithms", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), algorithms().len());
}

#[test]
fn every_algorithm_runs_by_name_and_alias() {
    for a in algorithms() {
        for name in std::iter::once(a.name).chain(a.aliases.iter().copied()) {
            let o = run(&[
                "bench",
                "sched",
                "-alg",
                name,
                "-n",
                "2000",
                "-flowsets",
                "1::8,2::4",
            ]);
            assert_eq!(o.code, 0, "{name}: {}", o.stderr);
            assert_eq!(field(&o.stdout, "sched"), a.name);
        }
    }
}

#[test]
fn bench_table_lists_every_algorithm() {
    let o = run(&["bench", "table", "-n", "3000"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for a in algorithms() {
        assert!(
            o.stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(a.name)),
            "{} missing:\n{}",
            a.name,
            o.stdout
        );
    }
    let o = run(&["bench", "table", "-n", "3000", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        v["results"].as_array().unwrap().len(),
        algorithms().len() + 1
    );
}

#[test]
fn run_builtin_scenario_accounts_for_every_packet_and_follows_weights() {
    let o = run(&["run", "--help"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("built-in scenario"), "{}", o.stdout);
    let o = run(&["run", "--duration", "1s", "--backend", "null", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["algorithm"], "qfq+");
    let tenants = v["tenants"].as_array().unwrap();
    assert_eq!(tenants.len(), 4);
    account::assert_balanced(&v, "the built-in scenario");
    for t in tenants {
        assert!(t["sent"].as_u64().unwrap() > 0, "{t}");
    }
    // gold, silver, bronze are greedy with weights 4:2:1 on a saturated link.
    let rate = |i: usize| tenants[i]["rate_bps"].as_f64().unwrap();
    for (i, w) in [(0, 4.0), (1, 2.0)] {
        let r = rate(i) / rate(2);
        assert!(
            (r / w - 1.0).abs() < 0.1,
            "tenant {i}: ratio {r} vs weight ratio {w}"
        );
    }
    let lat = &tenants[3]["latency"];
    assert!(lat["samples"].as_u64().unwrap() > 100, "{lat}");
    assert!(lat["p50_ns"].as_u64().unwrap() <= lat["p99_ns"].as_u64().unwrap());
    // The arbiter's drain gaps: at least 4096 ns each, within the run, and a p99 wait no
    // longer than the time they cover.
    let g = &v["arbiter"]["drain_gaps"];
    let (gaps, stalled) = (
        g["gaps"].as_u64().unwrap(),
        g["stalled_ns"].as_u64().unwrap(),
    );
    assert!(stalled >= gaps * 4096, "{g}");
    assert!(
        (stalled as f64) < v["seconds"].as_f64().unwrap() * 1e9 * 1.01,
        "{g}"
    );
    assert!(g["wait_p99_ns"].as_f64().unwrap() <= stalled as f64, "{g}");
}

#[test]
fn run_with_a_config_file_and_every_handoff() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cfg = dir.join("s.toml");
    std::fs::write(
        &cfg,
        "algorithm = \"drr\"\nrate = \"200M\"\nbackend = \"null\"\n\
         [[tenant]]\nname = \"a\"\nweight = 3\nsize = \"1000\"\n\
         [[tenant]]\nname = \"b\"\nweight = 1\nsize = \"1000\"\nclients = 2\n",
    )
    .unwrap();
    for handoff in ["arbiter", "dispatchers:2", "clients"] {
        let o = run(&[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "600ms",
            "--handoff",
            handoff,
            "--json",
        ]);
        assert_eq!(o.code, 0, "{handoff}: {}", o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(v["handoff"], handoff);
        let t = v["tenants"].as_array().unwrap();
        let (a, b) = (
            t[0]["rate_bps"].as_f64().unwrap(),
            t[1]["rate_bps"].as_f64().unwrap(),
        );
        assert!((a / b / 3.0 - 1.0).abs() < 0.1, "{handoff}: {a} vs {b}");
        // The link is never exceeded (200 Mbit/s, plus one packet of slack).
        assert!(a + b <= 200e6 * 1.01, "{handoff}: {}", a + b);
    }
}

#[test]
fn every_example_scenario_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        n += 1;
        let o = run(&[
            "run",
            "--config",
            p.to_str().unwrap(),
            "--duration",
            "300ms",
            "--backend",
            "null",
            "--json",
        ]);
        assert_eq!(o.code, 0, "{}: {}", p.display(), o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert!(!v["tenants"].as_array().unwrap().is_empty());
    }
    assert!(n >= 2, "examples/ has the scenarios");
}

#[test]
fn run_writes_a_pcap_of_what_was_scheduled() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run.pcap");
    let spec = format!("pcap:{}", path.display());
    let o = run(&[
        "run",
        "--duration",
        "300ms",
        "--rate",
        "1G",
        "--backend",
        &spec,
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let sent: u64 = v["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["sent"].as_u64().unwrap())
        .sum();
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let (mut n, mut last) = (0u64, std::time::Duration::ZERO);
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert!(p.timestamp >= last, "departure times go back");
        last = p.timestamp;
        n += 1;
    }
    assert_eq!(n, sent, "one record per packet sent");
}

/// A run whose backend lost packets (a pcap file on a full disk) ends with status 3 and
/// says why on its last line; its report (JSON here) is still printed.
#[test]
fn a_run_that_lost_packets_to_errors_exits_3() {
    let o = run(&[
        "run",
        "--duration",
        "200ms",
        "--backend",
        "pcap:/dev/full",
        "--json",
    ]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert!(v["tenants"].is_array(), "the report is printed first");
    let last = o.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: packets were lost to errors: ")
            && last.contains("No space left on device"),
        "{}",
        o.stderr
    );
}

/// `pspat shape --json` to a path that cannot be written fails at once, before any
/// socket opens (no privilege needed), not after the run.
#[test]
fn shape_refuses_an_unwritable_json_path_before_it_starts() {
    let o = run(&[
        "shape",
        "--in",
        "nosuch0",
        "--out",
        "nosuch1",
        "--config",
        "/nonexistent.ipfw",
        "--json",
        "/nonexistent/dir/report.json",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with("error: creating /nonexistent/dir/report.json: "),
        "{}",
        o.stderr
    );
}

#[test]
fn run_names_bad_input() {
    let o = run(&["run", "--rate", "fast", "--duration", "0.1s"]);
    assert_eq!(o.code, 2);
    // pspat-units' message quotes the text as 'fast'; the scenario's field names `rate`.
    assert!(
        o.stderr.contains("rate: ") && o.stderr.contains("'fast'"),
        "{}",
        o.stderr
    );
    // Parsed, but out of range: the checks on top of parsing stay usage errors.
    let dn = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/config/run-customers.ipfw"
    );
    for (args, says) in [
        (&["--rate", "0"][..], "(or unlimited)"),
        (&["--rate", "11T"], "10 Tbit/s"),
        (&["--duration", "soon"], "duration: "),
        (&["--interval", "1d"], "--interval: "),
        (&["--dummynet", dn, "--stats-every", "x"], "--stats-every: "),
    ] {
        let o = run(&[&["run", "--backend", "null"], args].concat());
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
    }
    let o = run(&[
        "run",
        "--alg",
        "nope",
        "--backend",
        "null",
        "--duration",
        "0.1s",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("nope"), "{}", o.stderr);
    let o = run(&["run", "--config", "/nonexistent/x.toml"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("/nonexistent/x.toml"), "{}", o.stderr);
    let o = run(&["run", "--handoff", "nic", "--duration", "0.1s"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("`nic`"), "{}", o.stderr);
    let o = run(&["run", "--backend", "carrier-pigeon", "--duration", "0.1s"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("carrier-pigeon"), "{}", o.stderr);
}

#[test]
fn bench_sched_help_documents_dummynet_options() {
    let o = run(&["bench", "sched", "--help"]);
    assert_eq!(o.code, 0);
    for opt in [
        "--alg",
        "--qmin",
        "--qmax",
        "--flowsets",
        "--burst",
        "-n",
        "-d",
        "single-dash",
    ] {
        assert!(o.stdout.contains(opt), "{opt} not in help");
    }
}

#[test]
fn bench_wfi_reports_each_flowset() {
    let o = run(&[
        "bench",
        "wfi",
        "-alg",
        "qfq",
        "-n",
        "20K",
        "-qmax",
        "30n",
        "-flowsets",
        "8:1500:1,1:1500:24",
        "-txq",
        "1",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", o.stdout);
    assert_eq!(field(lines[0], "sched"), "qfq");
    assert_eq!(field(lines[0], "txq"), "1");
    assert_eq!(field(lines[1], "packets"), "20000");
    assert_eq!(field(lines[1], "drops"), "0");
    assert!(lines[3].starts_with("8:1500:1 "), "{}", lines[3]);
    assert!(lines[4].starts_with("1:1500:24 "), "{}", lines[4]);
    // JSON: the heavy flow's T-WFI in its service times is the ratio of the two fields,
    // and within QFQ's bound: phi = 1/4, 6 + Q / (4 L) with Q = 2 L.
    let o = run(&[
        "bench",
        "wfi",
        "--alg",
        "qfq",
        "-n",
        "20K",
        "--flowsets",
        "8:1500:1,1:1500:24",
        "--txq",
        "1",
        "--pattern",
        "bursty",
        "--fill-rate",
        "inf",
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["pattern"], "bursty");
    assert!(v["fill_rate"].is_null());
    let heavy = &v["classes"][0];
    let (t, st) = (
        heavy["t_wfi_ns"].as_f64().unwrap(),
        heavy["service_time_ns"].as_f64().unwrap(),
    );
    assert!((st - 1500.0 * 8.0 * 4.0).abs() < 1e-6, "{st}");
    assert!((heavy["t_wfi_service_times"].as_f64().unwrap() - t / st).abs() < 1e-9);
    assert!(t / st <= 6.5, "{heavy}");
}

#[test]
fn bench_wfi_usage_errors() {
    usage_error(&["bench", "wfi", "-alg", "none"], "--alg 'none'");
    usage_error(
        &["bench", "wfi", "-alg", "qfq", "--fill-rate", "0.5"],
        "--fill-rate '0.5'",
    );
    usage_error(
        &["bench", "wfi", "-alg", "qfq", "-flowsets", "1:0:1"],
        "len '0'",
    );
    usage_error(&["bench", "wfi", "-txq", "2000000"], "--txq '2000000'");
    usage_error(&["bench", "wfi", "--switch-on-empty", "-1"], "-1");
}

#[test]
fn run_with_a_dummynet_configuration_follows_its_rules_masks_and_weights() {
    let o = run(&[
        "run",
        "--config",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/run-dummynet.toml"
        ),
        "--duration",
        "1s",
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert!(
        v["scenario"]
            .as_str()
            .unwrap()
            .contains("run-customers.ipfw"),
        "{v}"
    );
    let t = v["tenants"].as_array().unwrap();
    let rate = |i: usize| t[i]["rate_bps"].as_f64().unwrap();
    // Two customer instances of 100 Mbit/s each (one instance would give 100 Mbit/s),
    // never more than their links (a loaded machine may leave a little unused).
    let bulk_and_voice = rate(0) + rate(1);
    assert!(
        bulk_and_voice > 160e6 && bulk_and_voice < 200e6 * 1.01,
        "two 100 Mbit/s instances: {bulk_and_voice}"
    );
    // Voice offers 2 Mbit/s and, at weight 8 of 12 in its instance, gets all of it.
    assert!((rate(1) / 2e6 - 1.0).abs() < 0.1, "voice {}", rate(1));
    let lat = &t[1]["latency"];
    assert!(lat["samples"].as_u64().unwrap() > 100, "{lat}");
    // The barred network: nothing submitted, everything dropped by the rules.
    assert_eq!(t[2]["submitted"].as_u64().unwrap(), 0, "{}", t[2]);
    assert!(
        t[2]["filtered_by_rules"]["denied"].as_u64().unwrap() > 100,
        "{}",
        t[2]
    );

    let o = run(&[
        "run",
        "--dummynet",
        "/nonexistent/x.ipfw",
        "--duration",
        "0.1s",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("/nonexistent/x.ipfw"), "{}", o.stderr);
}

/// `out` has the line part `want`.
fn assert_shows(out: &str, want: &str) {
    assert!(out.contains(want), "missing {want:?} in:\n{out}");
}

#[test]
fn run_shows_a_tree_per_site_and_plan_and_every_class_in_the_json() {
    let sc = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/run-isp.toml");
    let o = run(&[
        "run",
        "--config",
        sc,
        "--duration",
        "1.2s",
        "--interval",
        "0.4s",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in [
        "sched 1 classes",
        "  sched 2 ",
        "  sched 5 ",
        "plans (leaf classes)",
        // the plans: rate, ceil, band, weight, classes
        " 10.000 Mbit/s  300.000 Mbit/s    0      4      334 ",
        "  2.000 Mbit/s   25.000 Mbit/s    1      1      333 ",
    ] {
        assert_shows(&o.stdout, want);
    }
    let o = run(&["run", "--config", sc, "--duration", "1s", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let inst = &v["dummynet"]["schedulers"][0]["instances"][0];
    let classes = inst["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 4 + 1000, "sites and subscribers");
    // what the sites sent is what the instance sent; a subscriber never beats its ceil
    let sent = |c: &serde_json::Value| c["counters"]["sent_bytes"].as_u64().unwrap();
    let sites: u64 = classes.iter().filter(|c| c["depth"] == 0).map(sent).sum();
    assert_eq!(sites, inst["totals"]["sent_bytes"].as_u64().unwrap());
    let bulk = classes.iter().find(|c| c["name"] == "sched 1008").unwrap();
    let secs = v["seconds"].as_f64().unwrap();
    // 25 Mbit/s over the run, plus its default cburst (1 ms) and a packet
    assert!(
        (sent(bulk) as f64) < 25e6 / 8.0 * secs + 3125.0 + 1514.0,
        "{bulk}"
    );
    assert_eq!(bulk["ceil_bps"], 25_000_000);
}

#[test]
fn run_prints_statistics_per_instance_and_queue_of_a_dummynet_configuration() {
    let sc = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/run-dummynet.toml"
    );
    let o = run(&[
        "run",
        "--config",
        sc,
        "--duration",
        "0.7s",
        "--interval",
        "0.2s",
        "--stats-every",
        "0.2s",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // config/run-customers.ipfw: one QFQ+ instance per customer (masked source address),
    // voice in queue 10 (weight 8, no mask), bulk in queue 11 (one queue per port).
    for want in [
        "sched 1 qfq+ 100.000 Mbit/s: 2 instances, 0 expired",
        "instance ",
        " ip 10.0.1.1/0 -> 0.0.0.0/0: Sent ",
        " ip 10.0.1.2/0 -> 0.0.0.0/0: Sent ",
        "queue 10 weight 8 ip 0.0.0.0/0 -> 0.0.0.0/0: Sent ",
        "queue 11 weight 1 ip 0.0.0.0/0 -> 0.0.0.0/6003: Sent ",
        "rates over ",
        "final statistics",
    ] {
        assert_shows(&o.stdout, want);
    }

    // The JSON account carries the final statistics: what the queues sent is what the
    // tenants' clients had scheduled (the barred tenant's packets never reach a queue).
    let o = run(&["run", "--config", sc, "--duration", "0.3s", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let scheduled: u64 = v["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["scheduled"].as_u64().unwrap())
        .sum();
    let insts = v["dummynet"]["schedulers"][0]["instances"]
        .as_array()
        .unwrap();
    assert_eq!(insts.len(), 2, "{}", v["dummynet"]);
    let queued: u64 = insts
        .iter()
        .flat_map(|i| i["queues"].as_array().unwrap())
        .map(|q| q["counters"]["sent_pkts"].as_u64().unwrap())
        .sum();
    assert!(scheduled > 0);
    assert_eq!(queued, scheduled, "{}", v["dummynet"]);

    // Without a configuration there are no instances to show.
    let o = run(&["run", "--duration", "0.1s", "--stats-every", "1s"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--stats-every needs"), "{}", o.stderr);
}

#[test]
fn run_reloads_the_dummynet_configuration_when_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dn = dir.join("dn.ipfw");
    let config = |w: u32| {
        format!(
            "sched 1 config type drr bw 50Mbit/s\nqueue 1 config sched 1 weight {w}\n\
             queue 2 config sched 1 weight 1\n\
             add queue 1 src-ip 10.0.1.0/24\nadd queue 2 src-ip 10.0.2.0/24\n"
        )
    };
    std::fs::write(&dn, config(1)).unwrap();
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        "backend = \"null\"\n[[tenant]]\nsrc = \"10.0.1.0/24\"\n\
         [[tenant]]\nsrc = \"10.0.2.0/24\"\n",
    )
    .unwrap();
    let mut child = pspat();
    child
        .args(["run", "--config", sc.to_str().unwrap(), "--dummynet"])
        .arg(&dn)
        .args(["--duration", "2.5s", "--json"])
        .timeout(std::time::Duration::from_secs(30));
    let writer = {
        let dn = dn.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(800));
            std::fs::write(&dn, config(3)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(800));
            // A typo: refused with its position, the running configuration stays.
            std::fs::write(&dn, "sched 1 config type drr bw 50Mbit/z\n").unwrap();
        })
    };
    let out = child.output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reloads = v["reloads"].as_array().unwrap();
    assert_eq!(reloads.len(), 2, "{v}");
    assert_eq!(reloads[0]["ok"], true, "{}", reloads[0]);
    assert_eq!(reloads[1]["ok"], false);
    let e = reloads[1]["error"].as_str().unwrap();
    assert!(e.contains("dn.ipfw:1:") && e.contains("50Mbit/z"), "{e}");
    // Both tenants kept sending through the refused reload.
    for t in v["tenants"].as_array().unwrap() {
        assert!(t["rate_bps"].as_f64().unwrap() > 1e6, "{t}");
    }
}

/// SIGHUP re-reads the configuration file (here unchanged) without stopping the run, as a
/// daemon's user expects; SIGTERM then stops it cleanly (exit 0, interrupted).
#[test]
fn sighup_rereads_the_configuration_and_sigterm_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let dn = tmp.path().join("dn.ipfw");
    std::fs::write(
        &dn,
        "sched 1 config type drr bw 50Mbit/s\nqueue 1 config sched 1\nadd queue 1 src-ip 10.0.0.0/8\n",
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("pspat");
    let child = std::process::Command::new(bin)
        .args([
            "run",
            "--backend",
            "null",
            "--duration",
            "30s",
            "--dummynet",
        ])
        .arg(&dn)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let signal = |sig| {
        // SAFETY: kill takes no pointers; the pid is our child's, not yet reaped (reaped
        // by wait_with_output below), so it names no other process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    };
    // The handlers are in place once the run prints its first line; give it a second.
    std::thread::sleep(std::time::Duration::from_secs(1));
    signal(libc::SIGHUP);
    std::thread::sleep(std::time::Duration::from_millis(500));
    signal(libc::SIGHUP);
    std::thread::sleep(std::time::Duration::from_millis(500));
    signal(libc::SIGTERM);
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let rereads = stdout
        .lines()
        .filter(|l| l.starts_with(&format!("re-read on request {}: applied", dn.display())))
        .count();
    assert_eq!(rereads, 2, "{stdout}");
}

/// A reloaded file that lost all its rules is refused as an accident, unless
/// `--allow-empty-reload` says it is meant.
#[test]
fn an_emptied_file_is_applied_only_when_allowed() {
    for allow in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dn = tmp.path().join("dn.ipfw");
        let with_rule = "sched 1 config type drr bw 50Mbit/s\nqueue 1 config sched 1\n\
                         add queue 1 src-ip 10.0.0.0/8\n";
        std::fs::write(&dn, with_rule).unwrap();
        let mut cmd = pspat();
        cmd.args(["run", "--backend", "null", "--duration", "1.5s", "--json"])
            .arg("--dummynet")
            .arg(&dn)
            .timeout(std::time::Duration::from_secs(30));
        if allow {
            cmd.arg("--allow-empty-reload");
        }
        let writer = {
            let dn = dn.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(400));
                let emptied = "sched 1 config type drr bw 50Mbit/s\nqueue 1 config sched 1\n\
                               default allow\n";
                std::fs::write(&dn, emptied).unwrap();
            })
        };
        let out = cmd.output().unwrap();
        writer.join().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let reloads = v["reloads"].as_array().unwrap();
        assert_eq!(reloads.len(), 1, "allow {allow}: {v}");
        assert_eq!(reloads[0]["ok"], allow, "allow {allow}: {}", reloads[0]);
        if !allow {
            let e = reloads[0]["error"].as_str().unwrap();
            assert!(e.contains("no rules"), "{e}");
        }
    }
}
