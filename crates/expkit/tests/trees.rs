//! The `tree` set's trees (experiments/shaper/trees/*.ipfw): each reads as one tree of
//! classes with a leaf per sender port, becomes HTB, and has the reference allocation
//! its header comment states for what experiments/shaper/run.sh offers (`tree_offered`,
//! greedy senders at the default 25 Mbit/s).

use std::path::PathBuf;

use pspat_expkit::KitTree;

fn tree(name: &str, senders: u16) -> KitTree {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/shaper/trees")
        .join(format!("{name}.ipfw"));
    let config = pspat_config::parse_file(&path).unwrap();
    let ports: Vec<u16> = (0..senders).map(|i| 10000 + i).collect();
    KitTree::from_config(&config, &ports).unwrap()
}

/// Checks `name`'s reference allocation, Mbit/s per class by name, for `offered` Mbit/s
/// per sender, and its HTB twin: a class per class, a pfifo per leaf, a filter per sender.
fn check(name: &str, offered: &[f64], want: &[(&str, f64)]) {
    let t = tree(name, offered.len() as u16);
    assert_eq!(t.link_bps, 50_000_000, "{name}");
    let mbit: Vec<f64> = offered.iter().map(|o| o * 1e6).collect();
    let got = t.reference(&mbit);
    for &(class, w) in want {
        let k = t.classes.iter().position(|c| c.name == class).unwrap();
        assert!(
            (got[k] / 1e6 - w).abs() < 0.005,
            "{name}: {class} gets {} Mbit/s, the header says {w}",
            got[k] / 1e6
        );
    }
    let leaves = t.classes.iter().filter(|c| c.leaf).count();
    // every leaf has a sender
    for k in (0..t.classes.len()).filter(|&k| t.classes[k].leaf) {
        assert!(t.ports.iter().any(|&(_, l)| l == k), "{name}: leaf {k}");
    }
    let htb = t.htb("r1");
    let count = |what: &str| htb.lines().filter(|l| l.starts_with(what)).count();
    assert_eq!(count("class add"), t.classes.len() + 1, "{name}\n{htb}");
    assert_eq!(count("qdisc add dev r1 parent"), leaves, "{name}\n{htb}");
    assert_eq!(count("filter add"), offered.len(), "{name}\n{htb}");
}

const G: f64 = 25.0;

#[test]
fn two_level() {
    check(
        "two-level",
        &[G, G, G, 6.0, G],
        &[
            ("sched 10", 20.0),
            ("sched 20", 30.0),
            ("sched 11", 7.5),
            ("sched 12", 12.5),
            ("sched 21", 13.0),
            ("sched 22", 6.0),
            ("sched 23", 11.0),
        ],
    );
}

#[test]
fn three_level() {
    check(
        "three-level",
        &[G, G, G, 4.0, G],
        &[
            ("sched 10", 28.0),
            ("sched 11", 20.0),
            ("sched 111", 15.0),
            ("sched 112", 5.0),
            ("sched 12", 8.0),
            ("sched 20", 22.0),
            ("sched 21", 4.0),
            ("sched 22", 18.0),
        ],
    );
}

#[test]
fn root_prio() {
    check(
        "root-prio",
        &[4.0, G, G, G, G, 4.0],
        &[
            ("sched 10", 4.0),
            ("sched 11", 15.0 + 1.0 / 3.0),
            ("sched 12", 20.0 + 2.0 / 3.0),
            ("sched 20", 10.0),
            ("sched 21", 2.7),
            ("sched 22", 4.8),
            ("sched 23", 2.5),
        ],
    );
}
