//! Configuration files as an operator's editor and tools leave them: huge tokens (an error
//! quotes a cut of them, never all of them), files that are not regular files or are too
//! large (refused by name before they are read whole), and files without rules.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use pspat_config::*;

const MB: usize = 1 << 20;

/// The error's text, which must be one short line.
fn short(e: &ConfigError) -> String {
    let s = e.to_string();
    let head: String = s.chars().take(400).collect();
    assert!(
        s.len() < 300,
        "an error of {} bytes (the first 400 characters: {head})",
        s.len()
    );
    assert!(!s.contains('\n'), "{s}");
    s
}

/// [`short`], and quoting the long text cut: its start, `...`, and its length.
fn cut_short(e: &ConfigError) -> String {
    let s = short(e);
    assert!(s.contains("...(") && s.contains(" bytes)"), "{s}");
    s
}

#[test]
fn a_huge_token_is_quoted_cut_in_ipfw_errors() {
    let x = "x".repeat(MB);
    let cases = [
        x.clone(),
        format!("sched 1 config type {x}"),
        format!("sched 1 config type fifo bw 1{x}"),
        format!("sched 1 config type fifo idle 1{x}"),
        format!("sched 1 config type drr params quantum={x}"),
        format!("sched 1 config type fifo {x}"),
        format!("sched 1 config type fifo mask src-ip 0x{}", "f".repeat(MB)),
        format!("sched 1 config type fifo mask src-ip6 /{x}"),
        format!("queue 1 config sched 1 queue 1{x}"),
        format!("queue 1 config sched 1 max-len 1{x}"),
        format!("add 100 deny src-ip 1.2.3.4/{x}"),
        format!("add 100 deny src-ip table({x})"),
        format!("add 100 deny proto {x}"),
        format!("add 100 deny {x} from any to any"),
        format!("add 100 deny dst-port 1-{x}"),
        format!("table 1 add 1.2.3.0/24 {}", "9".repeat(MB)),
        format!("table 1 add {x}"),
        format!("add {} deny", "1".repeat(MB)),
    ];
    for text in &cases {
        let e = parse_ipfw(text, "t.ipfw").expect_err("refused");
        let s = cut_short(&e);
        assert!(s.starts_with("t.ipfw:1:"), "{s}");
    }
    // The whole line is one token: its length is given, and its start is quoted.
    let e = parse_ipfw(&x, "t.ipfw").unwrap_err();
    let s = cut_short(&e);
    assert!(s.contains(&format!("`{}...({MB} bytes)`", &x[..32])), "{s}");
}

#[test]
fn a_huge_token_is_quoted_cut_in_toml_errors() {
    let x = "x".repeat(MB);
    let words = "x ".repeat(MB / 2);
    let sched = "[[sched]]\nid = 1\ntype = \"fifo\"\n";
    // A key without a value, a string without its end: the error is at the end of the
    // line, and quotes nothing.
    let s = short(&parse_toml(&x, "t.toml").unwrap_err());
    assert!(s.starts_with(&format!("t.toml:1:{}: ", MB + 1)), "{s}");
    let s = short(&parse_toml(&format!("default = \"{x}"), "t.toml").unwrap_err());
    assert!(s.starts_with(&format!("t.toml:1:{}: ", MB + 12)), "{s}");
    let cases = [
        format!("{x} = 1"),
        format!("default = \"{x}\""),
        format!("default = \"{words}\""),
        format!("[[sched]]\nid = \"{x}\"\ntype = \"fifo\"\n"),
        format!("[[sched]]\nid = 1\ntype = \"{x}\"\n"),
        format!("{sched}bw = \"1{x}\"\n"),
        format!("{sched}bw = \"{words}\"\n"),
        format!("{sched}idle = \"1{x}\"\n"),
        format!("{sched}{x} = 1\n"),
        format!("{sched}mask = {{ {x} = \"0xff\" }}\n"),
        format!("{sched}mask = \"{x}\"\n"),
        format!("[[sched]]\nid = 1\ntype = \"drr\"\nparams = {{ quantum = \"{x}\" }}\n"),
        format!("[[rule]]\naction = \"deny\"\ndir = \"{x}\"\n"),
        format!("[[rule]]\naction = \"{x}\"\n"),
        format!("[[rule]]\naction = \"deny\"\nsrc = \"{x}\"\n"),
        format!("[[rule]]\naction = \"deny\"\nproto = \"{x}\"\n"),
        format!("[[rule]]\naction = \"deny\"\ndst-port = \"{x}\"\n"),
        format!("[table.1]\n\"{x}\" = 1\n"),
        format!("[table.{x}]\n"),
    ];
    for text in &cases {
        let e = parse_toml(text, "t.toml").expect_err("refused");
        let s = cut_short(&e);
        assert!(s.starts_with("t.toml:"), "{s}");
    }
}

/// Runs `f` on a thread: a reader that blocks (a FIFO without a writer) or never ends
/// (/dev/zero) fails the test instead of hanging it.
fn answered<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("no answer within 20 s: the file is being read whole, or the open blocks")
}

fn file_error(path: &Path) -> String {
    let p = path.to_path_buf();
    answered(move || parse_file(&p).map(|_| ()))
        .expect_err("refused")
        .to_string()
}

#[test]
fn files_that_are_not_regular_are_refused_by_name() {
    let e = file_error(Path::new("/dev/zero"));
    assert!(
        e.starts_with("/dev/zero: ") && e.contains("a character device, not a regular file"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("rules.ipfw");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(
        made.as_ref().is_ok_and(|s| s.success()),
        "mkfifo {}: {made:?}",
        fifo.display()
    );
    let e = file_error(&fifo);
    assert!(
        e.starts_with(&format!("{}: ", fifo.display())) && e.contains("a FIFO, not a regular file"),
        "{e}"
    );

    let e = file_error(dir.path());
    assert!(
        e.starts_with(&format!("{}: ", dir.path().display()))
            && e.contains("a directory, not a regular file"),
        "{e}"
    );
}

#[test]
fn a_file_over_the_limit_is_refused_by_name_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.ipfw");
    // Sparse: no disk space is used for the zeros.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    drop(f);
    let e = file_error(&path);
    assert!(
        e.starts_with(&format!("{}: ", path.display()))
            && e.contains(&format!("{} bytes", MAX_FILE_BYTES + 1))
            && e.contains("64 MiB"),
        "{e}"
    );
    // At the limit it is read (and then refused for what it holds, not for its size).
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(MAX_FILE_BYTES)
        .unwrap();
    let e = read_file(&path).map(|t| t.len());
    assert_eq!(e, Ok(MAX_FILE_BYTES as usize));
}

#[test]
fn a_file_without_rules_that_would_deny_everything_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.ipfw");
    for text in [
        "",
        "\n# nothing yet\n",
        "sched 1 config type fifo bw 1Mbit/s\nqueue 1 config sched 1\n",
        "default deny\n",
    ] {
        std::fs::write(&path, text).unwrap();
        let e = parse_file(&path).expect_err(text).to_string();
        assert!(
            e.starts_with(&format!("{}: ", path.display()))
                && e.contains("no rules")
                && e.contains("every packet would be dropped"),
            "{text:?}: {e}"
        );
        // parse_str is the model's reader: an empty model is a model.
        assert!(parse_str(text, Format::Ipfw, "t").is_ok(), "{text:?}");
    }
    let toml = dir.path().join("rules.toml");
    std::fs::write(&toml, "").unwrap();
    let e = parse_file(&toml).unwrap_err().to_string();
    assert!(e.contains("no rules"), "{e}");
    // Saying what no rule matched gets, or writing a rule, is a configuration.
    for text in ["default allow\n", "add deny\n"] {
        std::fs::write(&path, text).unwrap();
        parse_file(&path).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
}

#[test]
fn the_summary_counts_every_kind_of_object() {
    let c = parse_ipfw(
        "sched 1 config type fifo\nqueue 1 config sched 1\nqueue 2 config sched 1\n\
         pipe 3 config bw 1Mbit/s\ntable 1 add 1.2.3.0/24 1\ntable 1 add 1.2.4.0/24 2\n\
         add queue tablearg src-ip table(1)\nadd pipe 3\nadd allow\n",
        "t",
    )
    .unwrap();
    assert_eq!(
        c.summary().to_string(),
        "1 schedulers, 2 flowsets, 1 pipes, 3 rules, 1 tables with 2 entries, default deny"
    );
}
