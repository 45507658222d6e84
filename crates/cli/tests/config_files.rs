//! `pspat config check` on files an operator's tools can leave: not regular files and a
//! one-line file of one huge token are refused at once with one short line naming the file
//! (exit code 1); a file without rules passes with a warning.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

/// Runs `pspat config check FILE` (killed after 20 s: a reader that blocks or never ends
/// fails the test instead of hanging it); returns (exit code, stdout, stderr).
fn check(file: &Path) -> (i32, String, String) {
    let out = Command::cargo_bin("pspat")
        .expect("the pspat binary is built")
        .args(["config", "check"])
        .arg(file)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks that `file` is refused with one line that names it and says `why`.
fn refused(file: &Path, why: &str) {
    let (code, out, err) = check(file);
    let head: String = err.chars().take(400).collect();
    assert_eq!(code, 1, "{}: {head}", file.display());
    assert!(out.is_empty(), "{out}");
    assert!(
        err.len() < 400 && err.trim_end().lines().count() == 1,
        "{head}"
    );
    assert!(
        err.contains(&format!("error: {}:", file.display())) && err.contains(why),
        "{err}"
    );
}

#[test]
fn files_that_are_not_regular_are_refused() {
    refused(
        Path::new("/dev/zero"),
        "a character device, not a regular file",
    );
    let tmp = tempfile::tempdir().unwrap();
    refused(tmp.path(), "a directory, not a regular file");
    let fifo = tmp.path().join("rules.ipfw");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
    refused(&fifo, "a FIFO, not a regular file");
}

#[test]
fn a_huge_token_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let huge = tmp.path().join("huge.ipfw");
    std::fs::write(&huge, "x".repeat(8 << 20)).unwrap();
    refused(&huge, "...(8388608 bytes)");
}

#[test]
fn an_empty_file_passes_with_a_warning_that_run_and_shape_refuse_it() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.ipfw");
    std::fs::write(&empty, "").unwrap();
    let (code, out, err) = check(&empty);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": ok: 0 schedulers"), "{out}");
    assert!(
        err.starts_with(&format!("warning: {}: no rules", empty.display()))
            && err.contains("every packet would be dropped")
            && err
                .trim_end()
                .ends_with("pspat run and pspat shape refuse it"),
        "{err}"
    );
    // With a rule, no warning.
    std::fs::write(&empty, "add deny\n").unwrap();
    let (code, _, err) = check(&empty);
    assert_eq!((code, err.as_str()), (0, ""));
}
