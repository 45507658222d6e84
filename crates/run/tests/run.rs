//! Short runs of the library, bounded in time, on the null backend.

use std::path::Path;
use std::time::Duration;

use pspat_run::{live, Run, RunError, Scenario};

/// Runs `sc` to its end, taking a live table every 100 ms; returns the tables.
fn run_to_end(run: &mut Run) -> Vec<String> {
    let mut tables = Vec::new();
    let mut prev = run.snapshot();
    while !run.is_over() {
        std::thread::sleep(Duration::from_millis(100).min(run.remaining()));
        run.poll_reload();
        let now = run.snapshot();
        tables.push(live::table(run.scenario(), &prev, &now));
        prev = now;
    }
    tables
}

fn short(mut sc: Scenario) -> Scenario {
    sc.backend = "null".into();
    sc.set_duration("400ms").unwrap();
    sc
}

#[test]
fn a_short_run_with_the_null_backend_accounts_for_every_packet() {
    let sc = short(Scenario::builtin());
    let mut run = Run::start(&sc).unwrap();
    let tables = run_to_end(&mut run);
    assert!(!tables.is_empty());
    for t in &tables {
        assert_eq!(t.lines().count(), 1 + sc.tenants.len(), "{t}");
    }
    let r = run.stop(false);
    assert!(r.elapsed >= Duration::from_millis(400), "{:?}", r.elapsed);
    let tenants = r.tenants();
    assert_eq!(tenants.len(), 4);
    for (t, c) in sc.tenants.iter().zip(&tenants) {
        assert_eq!(
            c.submitted,
            c.sent + c.send_failed + c.dropped_total() + c.left(),
            "{}: {c:?}",
            t.name
        );
        assert!(c.sent > 0, "{}: {c:?}", t.name);
    }
    // What is left is what the engine still held when it stopped: in the scheduler
    // (aggregation members included), in a stash, or not yet drained from a mailbox.
    let sched = r.engine.sched.as_ref().unwrap();
    let in_mailboxes: u64 = r
        .engine
        .snapshot
        .clients
        .iter()
        .map(|c| c.submitted - c.enqueued - c.dropped_total())
        .sum();
    assert_eq!(
        tenants.iter().map(|c| c.left()).sum::<u64>(),
        sched.backlog.pkts + sched.members_left + u64::from(sched.stashed) + in_mailboxes,
        "{sched:?}"
    );
    // The victim's latency is tracked, the others' is not.
    assert!(r.latencies[3].as_ref().is_some_and(|h| h.len() > 100));
    assert!(r.latencies[0].is_none());

    let v = r.json();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "algorithm",
            "arbiter",
            "backend",
            "cpu",
            "decisions_per_s",
            "dummynet",
            "errors",
            "handoff",
            "interrupted",
            "rate_bps",
            "reloads",
            "scenario",
            "seconds",
            "tenants"
        ]
    );
    let t0 = &v["tenants"][0];
    for k in [
        "name",
        "weight",
        "submitted",
        "mailbox_full",
        "refused_by_source",
        "scheduled",
        "scheduled_bytes",
        "sent",
        "send_failed",
        "dropped",
        "filtered_by_rules",
        "left_queued",
        "rate_bps",
        "target_bps",
        "latency",
    ] {
        assert!(t0.get(k).is_some(), "no {k} in {t0}");
    }
    assert_eq!(v["tenants"][0]["name"], "gold");
    assert_eq!(v["interrupted"], false);
    assert_eq!(
        v["scenario"],
        "qfq+ on an emulated 10.000 Gbit/s link, hand-off arbiter, backend null, 4 tenants, 0.4 s"
    );

    let text = r.text();
    assert!(text.starts_with("\nfinal account after 0.4"), "{text}");
    for t in &sc.tenants {
        assert!(text.contains(&format!("\n{} ", t.name)), "{text}");
    }
    assert!(
        text.contains("arbiter: ") && text.contains("M decisions/s"),
        "{text}"
    );
    assert!(text.contains("SUBMITTED = SENT + SEND-FAIL + DROPPED + LEFT"));
}

#[test]
fn an_interrupted_run_says_so() {
    let sc = short(Scenario::builtin());
    let run = Run::start(&sc).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let r = run.stop(true);
    assert!(r.text().contains("(interrupted)"));
    assert_eq!(r.json()["interrupted"], true);
}

#[test]
fn bad_input_is_a_usage_error_named_in_the_message() {
    let chain = |e: &RunError| pspat_engine::error_chain(e);
    let mut sc = short(Scenario::builtin());
    sc.backend = "carrier-pigeon".into();
    let e = Run::start(&sc).err().unwrap();
    assert!(e.is_usage() && chain(&e).contains("carrier-pigeon"), "{e}");

    let mut sc = short(Scenario::builtin());
    sc.algorithm = "nope".into();
    let e = Run::start(&sc).err().unwrap();
    assert!(matches!(e, RunError::Engine(_)));
    assert!(e.is_usage() && chain(&e).contains("nope"), "{}", chain(&e));

    // Validated at the start too: scenarios made or changed by code.
    let mut sc = short(Scenario::builtin());
    sc.tenants[0].weight = 0;
    let e = Run::start(&sc).err().unwrap();
    assert!(e.is_usage());
    assert_eq!(chain(&e), "tenant `gold`: weight must be at least 1");
}

#[test]
fn a_dummynet_configuration_classifies_by_the_tenants_addresses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/run-dummynet.toml");
    let sc = short(Scenario::load(&path).unwrap());
    let mut run = Run::start(&sc).unwrap();
    let stats = run.dummynet_stats().unwrap();
    assert_eq!(stats.schedulers.len(), 1);
    run_to_end(&mut run);
    let r = run.stop(false);
    let t = r.tenants();
    // config/run-customers.ipfw: the barred network's packets are denied by the rules.
    assert_eq!(sc.tenants[2].name, "barred");
    assert_eq!(t[2].submitted, 0, "{:?}", t[2]);
    assert!(t[2].filtered_total() > 10, "{:?}", t[2]);
    assert!(t[0].sent > 0 && t[1].sent > 0);
    let ds = r.dummynet().unwrap();
    let queued: u64 = ds.schedulers[0]
        .instances
        .iter()
        .flat_map(|i| &i.queues)
        .map(|q| q.counters.sent_pkts)
        .sum();
    assert_eq!(queued, t.iter().map(|c| c.scheduled).sum::<u64>());
    assert!(r.text().contains("rules:denied="), "{}", r.text());
}

#[test]
fn a_changed_configuration_is_applied_and_a_bad_one_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dn = tmp.path().join("dn.ipfw");
    let config = |w: u32| {
        format!(
            "sched 1 config type drr bw 50Mbit/s\nqueue 1 config sched 1 weight {w}\n\
             add queue 1 src-ip 10.0.0.0/24\n"
        )
    };
    std::fs::write(&dn, config(1)).unwrap();
    let mut sc = short(Scenario::from_toml("[[tenant]]\n", "s.toml").unwrap());
    sc.set_dummynet(&dn).unwrap();
    sc.set_duration("10s").unwrap();
    let mut run = Run::start(&sc).unwrap();
    let wait_for_reload = |run: &mut Run| {
        for _ in 0..200 {
            if let Some(r) = run.poll_reload() {
                return r.clone();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no reload");
    };
    // mtime granularity: let the clock move before rewriting.
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(&dn, config(3)).unwrap();
    let ok = wait_for_reload(&mut run);
    assert_eq!(ok.error, None, "{ok}");
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(&dn, "sched 1 config type drr bw 50Mbit/z\n").unwrap();
    let bad = wait_for_reload(&mut run);
    let e = bad.error.as_deref().unwrap();
    assert!(e.contains("dn.ipfw:1:") && e.contains("50Mbit/z"), "{e}");
    let r = run.stop(true);
    assert_eq!(r.reloads.len(), 2);
    let reloads = &r.json()["reloads"];
    assert_eq!(reloads[0]["ok"], true);
    assert_eq!(reloads[1]["ok"], false);
    assert!(
        r.tenants()[0].sent > 0,
        "kept sending through the refused reload"
    );
}
