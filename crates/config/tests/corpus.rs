//! The corpus of real dummynet configurations (`tests/fixtures/dummynet/`, each file with
//! its public source in its header): every file names its source, every file either
//! parses or is refused with a positioned error (never a panic), and the files pspat
//! accepts keep being accepted. Issue 26 (dummynet compatibility) raises that set until
//! every line is accepted with ipfw's meaning or refused with a named reason.

use std::path::PathBuf;

use pspat_config::{parse_file, ConfigError};

/// The files accepted as a whole today.
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
fn the_files_accepted_stay_accepted() {
    let files = corpus();
    for name in ACCEPTED {
        let f = files
            .iter()
            .find(|p| p.file_name().is_some_and(|n| n == *name))
            .unwrap_or_else(|| panic!("{name} is not in the corpus"));
        if let Err(e) = parse_file(f) {
            panic!("{name}: {e}");
        }
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
