//! End-to-end tests of `pspat config check`, and the CI check of `examples/config/`: every
//! example passes, the `.toml`/`.ipfw` twins resolve to equal models, and between them the
//! ipfw examples use every keyword of the ipfw parser.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn pspat() -> Command {
    Command::cargo_bin("pspat").expect("the pspat binary is built")
}

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/config");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/config exists")
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    assert!(v.len() >= 8, "{v:?}");
    v
}

/// Runs `pspat config check ARGS`; returns (exit code, stdout, stderr).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = pspat()
        .arg("config")
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn every_example_passes_config_check() {
    for f in examples() {
        let (code, out, err) = check(&[f.to_str().unwrap()]);
        assert_eq!(code, 0, "{}: {err}", f.display());
        let last = out.lines().last().unwrap();
        assert!(last.starts_with("# ") && last.contains(": ok: "), "{last}");
    }
}

#[test]
fn twins_resolve_to_equal_models() {
    let mut twins = 0;
    for f in examples() {
        if f.extension().is_some_and(|e| e == "toml") {
            let ipfw = f.with_extension("ipfw");
            assert!(ipfw.exists(), "{} has no .ipfw twin", f.display());
            let a = pspat_config::parse_file(&f).unwrap();
            let b = pspat_config::parse_file(&ipfw).unwrap();
            assert_eq!(a, b, "{} and its twin differ", f.display());
            // and the printed models are the same text
            let (_, pa, _) = check(&[f.to_str().unwrap(), "--quiet"]);
            let (_, pb, _) = check(&[ipfw.to_str().unwrap(), "--quiet"]);
            let summary = |s: &str| s.split_once(": ok: ").unwrap().1.to_owned();
            assert_eq!(summary(&pa), summary(&pb));
            twins += 1;
        }
    }
    assert!(twins >= 3, "only {twins} twins");
}

#[test]
fn the_ipfw_examples_use_every_keyword() {
    let mut words = std::collections::BTreeSet::new();
    for f in examples() {
        if f.extension().is_some_and(|e| e == "ipfw") {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in text.lines() {
                // only the commands, not the comments
                let code = line.split('#').next().unwrap().split("//").next().unwrap();
                for w in code.split(|c: char| c.is_whitespace() || c == ',' || c == '{' || c == '}')
                {
                    let w = w.to_ascii_lowercase();
                    let w = if w.starts_with("table(") {
                        "table".into()
                    } else {
                        w
                    };
                    words.insert(w);
                }
            }
        }
    }
    let missing: Vec<&str> = pspat_config::ipfw::parser::KEYWORDS
        .iter()
        .chain(pspat_config::ipfw::rule::RULE_KEYWORDS)
        .copied()
        .filter(|k| !words.contains(*k))
        .collect();
    assert!(missing.is_empty(), "no example uses {missing:?}");
}

#[test]
fn the_printed_model_is_itself_a_valid_configuration() {
    let f = examples()
        .into_iter()
        .find(|f| f.ends_with("isp.ipfw"))
        .unwrap();
    let want = pspat_config::parse_file(&f).unwrap();
    for print in ["ipfw", "toml"] {
        let (code, out, err) = check(&[f.to_str().unwrap(), "--print", print]);
        assert_eq!(code, 0, "{err}");
        let got = pspat_config::parse_str(
            &out,
            if print == "toml" {
                pspat_config::Format::Toml
            } else {
                pspat_config::Format::Ipfw
            },
            "out",
        )
        .unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert_eq!(got, want, "--print {print}");
    }
    let (_, out, _) = check(&[f.to_str().unwrap()]);
    assert!(
        out.trim_end().ends_with(
            "ok: 2 schedulers, 4 flowsets, 2 pipes, 15 rules, 4 tables with 6 entries, default deny"
        ),
        "{out}"
    );
}

#[test]
fn a_bad_file_fails_with_line_column_and_token() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.ipfw");
    std::fs::write(
        &bad,
        "sched 1 config type drr bw 1M\n# comment\nqueue 2 config sched 1 weigth 5\n",
    )
    .unwrap();
    let (code, out, err) = check(&[bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("bad.ipfw:3:24:") && err.contains("`weigth`"),
        "{err}"
    );
    // --format overrides the extension
    let (code, _, err) = check(&[bad.to_str().unwrap(), "--format", "toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.ipfw:1:"), "{err}");
    // a semantic error names the object and its line
    std::fs::write(&bad, "queue 2 config sched 1\n").unwrap();
    let (code, _, err) = check(&[bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.ipfw:1:1: queue 2: sched 1 is not defined"),
        "{err}"
    );
    let (code, _, err) = check(&[dir.join("nope.ipfw").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("nope.ipfw"), "{err}");
}

#[test]
fn a_tree_is_printed_as_an_outline_with_its_resolved_values() {
    let f = examples()
        .into_iter()
        .find(|f| f.ends_with("isp-tree.ipfw"))
        .unwrap();
    let (code, out, err) = check(&[f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("# tree of sched 1 (wf2q+) on link 1, 1Gbit/s: 1004 classes\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "#  sched 2 wf2q+: rate 200Mbit/s (burst 25000 B), ceil 400Mbit/s (cburst 125000 B), \
             weight 1, prio 0; orders 250 classes\n"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("; flowsets ").count(),
        1000,
        "one line per subscriber"
    );
    // the outline is comments: the whole output reads back as the same configuration
    let back = pspat_config::parse_str(&out, pspat_config::Format::Ipfw, "out").unwrap();
    assert_eq!(back, pspat_config::parse_file(&f).unwrap());
}
