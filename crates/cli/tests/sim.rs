//! End-to-end tests of `pspat sim`: a flags-only scenario, a checked-in reproduction with its
//! plots, and errors that name the problem.

use assert_cmd::Command;

fn pspat(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("pspat")
        .expect("the pspat binary is built")
        .args(args)
        .output()
        .expect("pspat runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn flags_only_scenario_gives_weighted_shares_and_writes_csv_and_plots() {
    // A directory `sim` creates itself, inside one removed when the test ends.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let d = dir.to_str().unwrap();
    let (code, out, err) = pspat(&[
        "sim",
        "--alg",
        "qfq",
        "--rate",
        "1e9",
        "--packets",
        "20000",
        "--json",
        "--csv",
        d,
        "--plots",
        d,
        "--flow",
        r#"name="heavy", weight=3, size={kind="fixed",len=1500}, arrival={kind="backlogged"}"#,
        "--flow",
        r#"name="light", weight=1, size={kind="fixed",len=1500}, arrival={kind="backlogged"}"#,
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let g = v["groups"].as_array().unwrap();
    assert_eq!(g.len(), 2);
    for grp in g {
        let r = grp["share_over_phi"].as_f64().unwrap();
        assert!((r - 1.0).abs() < 0.01, "{grp}");
        assert_eq!(grp["arrived"], grp["packets"], "no loss without limits");
    }
    // QFQ's T-WFI bound for the light flow is a few service times; measured within it.
    assert!(g[1]["t_wfi_service_times"].as_f64().unwrap() <= 6.0);
    for f in ["flows.csv", "groups.csv", "report.json"] {
        assert!(dir.join(f).exists(), "{f} not written");
    }
    let svgs = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "svg")
        })
        .count();
    assert!(svgs > 0, "no SVG plot written");
}

#[test]
fn the_qfq_plus_figure_8_reproduction_runs() {
    let scen = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/qfqplus-fig8.toml"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plots");
    let (code, out, err) = pspat(&["sim", scen, "--plots", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The 1k-highw row: DRR is two orders of magnitude above QFQ and QFQ+ (paper: 249.0
    // against 1.244 and 2.744 service times).
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("| 1k-highw"))
        .expect("1k-highw row");
    let nums: Vec<f64> = row
        .split('|')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    assert_eq!(nums.len(), 3, "{row}");
    assert!(nums[0] > 200.0 && nums[1] < 3.0 && nums[2] < 4.0, "{row}");
}

#[test]
fn sim_errors_name_the_problem() {
    let (code, _, err) = pspat(&["sim", "/nonexistent/s.toml"]);
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/s.toml"), "{err}");
    let flow = r#"name="a", size={kind="fixed",len=100}, arrival={kind="backlogged"}"#;
    let (code, _, err) = pspat(&["sim", "--alg", "nope", "--packets", "10", "--flow", flow]);
    assert_ne!(code, 0);
    assert!(err.contains("nope"), "{err}");
    let flow = r#"name="a", size={kind="fixed",len=0}, arrival={kind="backlogged"}"#;
    let (code, _, err) = pspat(&["sim", "--alg", "drr", "--packets", "10", "--flow", flow]);
    assert_ne!(code, 0, "a zero-length packet size is refused");
    assert!(!err.is_empty());
}

/// The wire's framing from the flags, as a pipe's: `--linklayer atm --overhead 10` makes a
/// 1000-byte packet 22 ATM cells, 1166 bytes, 932 800 ns at 10 Mbit/s; `--framing
/// pppoe-ptm,ether-vlan` is overhead 20 on PTM; a bad value is refused naming it.
#[test]
fn the_framing_flags_give_the_wire_a_pipes_framing() {
    let flow = r#"name="a", size={kind="fixed",len=1000}, arrival={kind="backlogged"}"#;
    let base = [
        "sim",
        "--alg",
        "fifo",
        "--rate",
        "10e6",
        "--packets",
        "100",
        "--json",
        "--flow",
        flow,
    ];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (code, out, err) = pspat(&args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let v = run(&["--linklayer", "atm", "--overhead", "10"]);
    assert_eq!(v["wire_bytes"], 100 * 1166);
    assert_eq!(v["bytes"], 100 * 1000);
    assert_eq!(v["duration_ns"].as_f64(), Some(100.0 * 932_800.0));
    let v = run(&["--framing", "pppoe-ptm,ether-vlan"]);
    assert_eq!(
        (v["overhead"].as_i64(), v["linklayer"].as_str()),
        (Some(20), Some("ptm"))
    );
    let args: Vec<&str> = base.iter().copied().chain(["--overhead", "-70"]).collect();
    let (code, _, err) = pspat(&args);
    assert_ne!(code, 0);
    assert!(err.contains("overhead -70 is not -64..=256"), "{err}");
}
