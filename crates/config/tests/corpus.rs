//! The corpus of real dummynet configurations (`tests/fixtures/dummynet/`, each file with
//! its public source in its header; its README says what each uses).
//!
//! - Every file names its source and parses or is refused with a positioned error.
//! - Line by line, as ipfw applies a file: each command line is accepted, or refused with
//!   a reason pspat names by design (issue 26 item 7: dummynet's AQM until pspat has it,
//!   `me` in a bump in the wire), or depends on a line so refused (a queue on an fq_codel
//!   scheduler). No line fails for any other reason.
//! - The files accepted whole mean what ipfw makes of them: each has its resolved model
//!   checked below against FreeBSD's reading (ipfw(8), `sbin/ipfw/dummynet.c`,
//!   `ip_dummynet.c`).

use std::path::{Path, PathBuf};

use pspat_config::*;

/// Why pspat refuses a line by design, as its message says it.
const BY_DESIGN: &[&str] = &[
    "active queue management", // dummynet's CoDel/PIE/fq_codel/fq_pie: the AQM issue's
    "`me`",                    // the host's own addresses: a bump in the wire has none
    "clocks the pipe by a device",
    // Not ipfw either: dummynet.txt's `to all` (ipfw's address is `any`).
    "'all' is not an address",
];

/// Rule-stream lines of the corpus pspat refuses, by file and the feature named in the
/// refusal: ipfw has these and pspat does not (or, for `to all`, neither has it).
const RULE_LINES_REFUSED: &[(&str, &str)] = &[
    (
        "16-dummynet-txt-sched-flow-masks.ipfw",
        "'all' is not an address",
    ),
    (
        "17-rizzo-bsdcon01-wfq.ipfw",
        "`me` is the firewall host's own addresses",
    ),
];

fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dummynet");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipfw"))
        .collect();
    files.sort();
    files
}

fn file(name: &str) -> PathBuf {
    corpus()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("{name} is not in the corpus"))
}

/// The resolved model of a corpus file (a file of pipes alone, such as a lab's, is a
/// model too: `parse_file`'s refusal of a file that would drop everything is a check of
/// the command line's, not of the syntax).
fn model(name: &str) -> Config {
    let text = std::fs::read_to_string(file(name)).unwrap();
    parse_ipfw(&text, name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Whether `msg` names the object `id` (`pipe 1` in "pipe 1," but not in "pipe 10").
fn names(msg: &str, id: &str) -> bool {
    msg.match_indices(id).any(|(i, _)| {
        !msg[i + id.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// What happened to each command line of a file.
#[derive(Debug, Default)]
struct Lines {
    accepted: usize,
    by_design: Vec<String>,
    dependent: Vec<String>,
    failed: Vec<String>,
}

/// Applies `path` line by line, as ipfw does: a line joins the file so far if the whole
/// still reads (a rule may name a pipe configured further down, as in ipfw, so references
/// are checked once the file is read; a line whose reference fails then leaves too).
fn lines(path: &Path) -> Lines {
    let text = std::fs::read_to_string(path).unwrap();
    let mut kept: Vec<String> = Vec::new();
    let mut out = Lines::default();
    let mut refused_ids: Vec<String> = Vec::new();
    let named = |line: &str, msg: &str| format!("{line}  ->  {msg}");
    for line in text.lines() {
        let body = line.split('#').next().unwrap().trim();
        if body.is_empty() {
            kept.push(String::new());
            continue;
        }
        let trial = format!("{}\n{line}\n", kept.join("\n"));
        match pspat_config::ipfw::parser::parse(&trial, "corpus") {
            Ok(_) => {
                out.accepted += 1;
                kept.push(line.to_owned());
            }
            Err(e) => {
                let msg = e.to_string();
                if BY_DESIGN.iter().any(|r| msg.contains(r)) {
                    // What a refused object was: `pipe 1`, `sched 1`, `queue 2`.
                    let words: Vec<&str> = body.split_whitespace().collect();
                    if let [kind, n, ..] = words.as_slice() {
                        refused_ids.push(format!("{kind} {n}"));
                    }
                    out.by_design.push(named(line, &msg));
                } else {
                    out.failed.push(named(line, &msg));
                }
                kept.push(String::new());
            }
        }
    }
    // References: drop the line each error names until the rest resolves.
    while let Err(e) = parse_ipfw(&kept.join("\n"), "corpus") {
        let msg = e.to_string();
        let at: usize = msg
            .strip_prefix("corpus:")
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: an error with no line: {msg}", path.display()));
        let line = std::mem::take(&mut kept[at - 1]);
        out.accepted -= 1;
        if refused_ids.iter().any(|id| names(&msg, id)) {
            // What depends on it depends on the refused line too.
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [kind, n, ..] = words.as_slice() {
                refused_ids.push(format!("{kind} {n}"));
            }
            out.dependent.push(named(&line, &msg));
        } else {
            out.failed.push(named(&line, &msg));
        }
    }
    out
}

#[test]
fn every_file_names_its_source_and_parses_or_says_where_not() {
    let files = corpus();
    assert!(files.len() >= 20, "{} files", files.len());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            text.lines().any(|l| l.starts_with("# source: ")),
            "{}: no source line",
            f.display()
        );
        match parse_file(f) {
            Ok(_) => {}
            Err(ConfigError::Syntax { line, .. }) => assert!(line > 0, "{}", f.display()),
            Err(e) => assert!(!e.to_string().is_empty(), "{}", f.display()),
        }
    }
}

#[test]
fn every_line_is_read_with_ipfws_meaning_or_refused_by_design() {
    let mut report = String::new();
    let (mut total, mut accepted, mut refused) = (0, 0, 0);
    for f in corpus() {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let l = lines(&f);
        total += l.accepted + l.by_design.len() + l.dependent.len() + l.failed.len();
        accepted += l.accepted;
        refused += l.by_design.len() + l.dependent.len();
        if !l.failed.is_empty() {
            report += &format!("{name}:\n  {}\n", l.failed.join("\n  "));
        }
    }
    assert!(
        report.is_empty(),
        "lines refused without a reason by design:\n{report}"
    );
    eprintln!("corpus: {accepted} of {total} lines accepted, {refused} refused by design");
}

/// The files accepted whole today: they stay accepted.
const ACCEPTED: &[&str] = &[
    "01-freebsd-test-pipe-bytes.ipfw",
    "02-freebsd-test-pipe-delay.ipfw",
    "03-freebsd-test-queue-wf2q.ipfw",
    "04-freebsd-test-queue-wf2q-v6.ipfw",
    "06-ipfw8-plr.ipfw",
    "07-ipfw8-router-bw.ipfw",
    "08-ipfw8-bidirectional.ipfw",
    "09-ipfw8-red.ipfw",
    "10-ipfw8-delay.ipfw",
    "11-ipfw8-count-mask-all.ipfw",
    "12-ipfw8-per-host-masks.ipfw",
    "13-ipfw8-lookup-tables.ipfw",
    "18-opnsense-prioritize-queues.ipfw",
    "19-opnsense-per-user-pipes.ipfw",
    "22-webpagetest-windows-agent.ipfw",
    "23-comn-coursework-link-emulation.ipfw",
    "24-sctplab-interop-pipes.ipfw",
];

#[test]
fn the_files_accepted_stay_accepted() {
    for name in ACCEPTED {
        model(name);
    }
}

fn pipe_rule(c: &Config, i: usize) -> (u32, Target) {
    match c.rules[i].action {
        Action::Pipe(t) => (c.rules[i].number, t),
        a => panic!("rule {i}: {a}"),
    }
}

/// FreeBSD's own tests: `30Byte/s` is 240 bit/s; a bare delay is milliseconds; a
/// scheduler on pipe 1 runs at the pipe's 1 MByte/s, its queues with their weights.
#[test]
fn the_freebsd_tests_mean_what_dummynet_makes_of_them() {
    let c = model("01-freebsd-test-pipe-bytes.ipfw");
    assert_eq!(c.pipes[&1].bandwidth_bps, 240);
    assert_eq!(pipe_rule(&c, 0), (1000, Target::Id(1)));

    let c = model("02-freebsd-test-pipe-delay.ipfw");
    assert_eq!(
        (c.pipes[&1].delay_ns, c.pipes[&1].bandwidth_bps),
        (1_500_000_000, 0)
    );

    let c = model("03-freebsd-test-queue-wf2q.ipfw");
    let s = &c.schedulers[&1];
    assert_eq!(s.algorithm, "wf2q+");
    assert_eq!(c.link_of(s).bandwidth_bps, 8_000_000, "1 MByte/s");
    assert_eq!((c.flowsets[&100].weight, c.flowsets[&100].sched), (99, 1));
    assert_eq!((c.flowsets[&200].weight, c.flowsets[&200].sched), (1, 1));
    assert_eq!(c.flowsets[&100].mask, FlowMask::ALL);
    assert_eq!(c.rules[0].matcher.proto, Some(6));
    assert_eq!(c.rules[0].matcher.direction, Some(Direction::Out));
}

/// ipfw(8)'s examples: loss, byte queues (K = 1024), RED, delays both ways, masks.
#[test]
fn the_manual_examples_mean_what_ipfw8_says() {
    let c = model("06-ipfw8-plr.ipfw");
    assert_eq!(c.pipes[&10].qm.plr, Probability(50_000_000));
    assert_eq!(c.rules[0].number, 100, "the first unnumbered rule");

    let c = model("07-ipfw8-router-bw.ipfw");
    assert_eq!(c.pipes[&1].bandwidth_bps, 300_000);
    assert_eq!(c.pipes[&1].limit, QueueLimit::Bytes(50 * 1024));

    let c = model("08-ipfw8-bidirectional.ipfw");
    assert_eq!(c.pipes[&2].limit, QueueLimit::Bytes(10 * 1024));
    assert_eq!(c.rules[1].matcher.direction, Some(Direction::In));

    let c = model("09-ipfw8-red.ipfw");
    let r = c.pipes[&1].qm.red.unwrap();
    assert_eq!(
        (r.w_q, r.min_th, r.max_th),
        (Probability(2_000_000), 30, 80)
    );
    assert_eq!((r.max_p, r.gentle), (Probability(100_000_000), false));
    assert_eq!(c.pipes[&1].limit, QueueLimit::Packets(100));

    let c = model("10-ipfw8-delay.ipfw");
    for p in [1, 2] {
        assert_eq!(c.pipes[&p].delay_ns, 250_000_000);
        assert_eq!(c.pipes[&p].bandwidth_bps, 1_000_000);
    }

    let c = model("11-ipfw8-count-mask-all.ipfw");
    assert_eq!(c.pipes[&1].mask, FlowMask::ALL);
    assert_eq!(c.pipes[&1].bandwidth_bps, 0, "unlimited");
    assert_eq!(c.rules.len(), 3);

    let c = model("12-ipfw8-per-host-masks.ipfw");
    assert_eq!(c.pipes[&1].mask.src_ip, 0xff);
    assert_eq!(c.pipes[&2].mask.dst_ip, 0xff);
    assert_eq!(c.pipes[&2].limit, QueueLimit::Bytes(20 * 1024));
}

/// Lab scripts: `10MBit/s` is bits (ipfw reads `Bi` as bits), `delay 5ms` is 5 ms, rules
/// without a body match everything; 18 lossless pipes with no delay.
#[test]
fn the_lab_scripts_mean_what_ipfw_makes_of_them() {
    let c = model("23-comn-coursework-link-emulation.ipfw");
    for p in [100, 200] {
        let p = &c.pipes[&p];
        assert_eq!(
            (p.bandwidth_bps, p.delay_ns, p.qm.plr),
            (10_000_000, 5_000_000, Probability(5_000_000))
        );
    }
    assert_eq!(c.rules[0].matcher.direction, Some(Direction::In));
    assert_eq!(c.rules[0].matcher.src, AddrMatch::Any);

    let c = model("24-sctplab-interop-pipes.ipfw");
    assert_eq!(c.pipes.len(), 18);
    assert!(c.pipes.values().all(|p| p == &PipeSpec::new(p.id)));
}

/// The AQM configurations are refused naming AQM, line by line, and nothing else: the
/// lines around the AQM lines are read (`every_line_...` checks that).
#[test]
fn aqm_lines_are_refused_by_name_and_the_rest_is_read() {
    for name in [
        "05-freebsd-test-fq-codel.ipfw",
        "14-ipfw8-codel-queue.ipfw",
        "15-ipfw8-fq-codel-sched.ipfw",
        "20-opnsense-fq-codel-bufferbloat.ipfw",
        "21-pfsense-limiters.ipfw",
    ] {
        let l = lines(&file(name));
        assert!(!l.by_design.is_empty(), "{name}: nothing refused");
        assert!(
            l.by_design
                .iter()
                .all(|m| m.contains("active queue management")),
            "{name}: {:?}",
            l.by_design
        );
    }
}

/// Every rule-stream line (`add`, `delete`, `flush`, `table`) of every file parses on its
/// own, or is one of [`RULE_LINES_REFUSED`], refused naming its feature.
#[test]
fn every_rule_line_parses_or_names_what_pspat_lacks() {
    let mut lines = 0;
    for f in corpus() {
        let name = f.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line
                .split_whitespace()
                .skip_while(|w| matches!(*w, "ipfw" | "dnctl" | "-q" | "-f"))
                .collect();
            if !matches!(words.first(), Some(&("add" | "delete" | "flush" | "table"))) {
                continue;
            }
            lines += 1;
            let origin = format!("{name}:{}", i + 1);
            match pspat_config::ipfw::parser::parse(line, &origin) {
                Ok(_) => {}
                Err(e) => {
                    let named = RULE_LINES_REFUSED
                        .iter()
                        .any(|(n, why)| *n == name && e.to_string().contains(why));
                    assert!(named, "{origin}: {e}");
                }
            }
        }
    }
    assert!(lines > 40, "only {lines} rule lines");
}
