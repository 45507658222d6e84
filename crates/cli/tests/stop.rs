//! `pspat run` stops promptly whatever the link rate: at `--duration` and on SIGINT, with
//! exit status 0 and an account where every tenant's submitted packets are sent, refused,
//! dropped or left queued. On a 10 kbit/s link the built-in scenario's 64 KB packets take
//! 52 s each, at 1 bit/s six days: a stop that waits for the link never ends.

mod account;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use account::assert_balanced;
use serde_json::Value;

/// Longest a 1 s run may take from start to exit (start-up, the run, the stop, the
/// account); the stops these tests catch take 5 s to forever.
const RUN_LIMIT: Duration = Duration::from_secs(4);
/// Longest the binary may take to exit after SIGINT.
const SIGINT_LIMIT: Duration = Duration::from_secs(2);
/// A hung binary is killed after this, and the test fails.
const KILL_AFTER: Duration = Duration::from_secs(30);

fn pspat() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pspat"));
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Waits for `child` to exit, at most [`KILL_AFTER`] (then kills it and fails); returns
/// its exit code, stdout and stderr, and when it exited.
fn finish(mut child: Child, what: &str) -> (i32, String, String, Instant) {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let deadline = Instant::now() + KILL_AFTER;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {KILL_AFTER:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let ended = Instant::now();
    let (stdout, stderr) = (reader.join().unwrap(), err_reader.join().unwrap());
    (status.code().unwrap_or(-1), stdout, stderr, ended)
}

/// A 1 s run with `--json` and `args`: ends within [`RUN_LIMIT`], status 0, balanced,
/// with packets left queued (the link was the bottleneck).
fn one_second_run(args: &[&str]) {
    let what = args.join(" ");
    let t0 = Instant::now();
    let child = pspat()
        .args(["run", "--backend", "null", "--duration", "1s", "--json"])
        .args(args)
        .spawn()
        .unwrap();
    let (code, stdout, stderr, ended) = finish(child, &what);
    let took = ended - t0;
    assert_eq!(code, 0, "{what}: {stdout}{stderr}");
    assert!(took < RUN_LIMIT, "{what}: a 1 s run took {took:?}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["interrupted"], false, "{what}");
    assert!(
        assert_balanced(&v, &what) > 0,
        "{what}: nothing left queued"
    );
}

#[test]
fn a_run_on_a_10_kbit_link_ends_at_its_duration() {
    one_second_run(&["--rate", "10K"]);
}

#[test]
fn a_run_on_a_1_bit_link_ends_at_its_duration() {
    one_second_run(&["--rate", "1"]);
}

/// Client hand-off: the clients' threads stop before the engine, which goes on clearing
/// packets to them meanwhile; those are transmitted at the stop, not lost. 1000-byte
/// packets at 200 Mbit/s: greedy tenants queue, and 25,000 packets a second are cleared,
/// so some are while the clients stop.
#[test]
fn a_run_with_client_handoff_accounts_for_what_was_cleared_at_stop() {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("clients.toml");
    std::fs::write(
        &sc,
        "algorithm = \"drr\"\nrate = \"200M\"\nhandoff = \"clients\"\n\
         [[tenant]]\nname = \"a\"\nweight = 3\nsize = \"1000\"\n\
         [[tenant]]\nname = \"b\"\nweight = 1\nsize = \"1000\"\nclients = 2\n",
    )
    .unwrap();
    let sc = sc.to_str().unwrap();
    for _ in 0..3 {
        one_second_run(&["--config", sc]);
    }
    one_second_run(&["--rate", "10K", "--handoff", "clients"]);
}

/// SIGINT ends a run of 60 s on a 10 kbit/s link at once, with status 0 and the account.
#[test]
fn sigint_stops_a_run_on_a_slow_link_promptly() {
    let mut child = pspat()
        .args([
            "run",
            "--backend",
            "null",
            "--duration",
            "60s",
            "--rate",
            "10K",
        ])
        .spawn()
        .unwrap();
    // The first line is printed once the SIGINT handler is in place.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("pspat run:"), "{first}");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    let signalled = Instant::now();
    child.stdout = Some(out.into_inner());
    let (code, stdout, stderr, ended) = finish(child, "SIGINT");
    let took = ended - signalled;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(took < SIGINT_LIMIT, "exited {took:?} after SIGINT");
    assert!(stdout.contains("(interrupted)"), "{stdout}");
    // TENANT SUBMITTED SENT SEND-FAIL DROPPED [(reasons)] FULL LEFT ...
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("TENANT"))
        .skip(1)
        .take_while(|l| !l.starts_with("arbiter:"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for r in rows {
        let n = |i: usize| -> u64 { r[i].parse().unwrap_or_else(|_| panic!("{r:?}")) };
        let left = if r[5].starts_with('(') { n(7) } else { n(6) };
        assert_eq!(n(1), n(2) + n(3) + n(4) + left, "{r:?}");
    }
}
