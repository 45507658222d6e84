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
    "07-ipfw8-router-bw.ipfw",
    "08-ipfw8-bidirectional.ipfw",
    "11-ipfw8-count-mask-all.ipfw",
    "12-ipfw8-per-host-masks.ipfw",
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
