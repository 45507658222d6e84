//! Trees of classes in both syntaxes: `sched N config parent P rate R ceil C burst B cburst
//! B weight W prio X` and the same keys in a `[[sched]]` table.

use pspat_config::{parse_ipfw, parse_toml, ClassOf, Config};

const IPFW: &str = "\
pipe 1 config bw 1Gbit/s
sched 1 config type wf2q+
sched 10 config type drr parent 1 rate 300Mbit/s ceil 800Mbit/s prio 1
sched 11 config type qfq parent 10 rate 10Mbit/s ceil 100Mbit/s weight 3 cburst 30000
sched 12 config type fifo parent 10 burst 5000
queue 1 config sched 11 weight 2
queue 2 config sched 12
";

const TOML: &str = r#"
[[pipe]]
id = 1
bw = "1Gbit/s"

[[sched]]
id = 1
type = "wf2q+"

[[sched]]
id = 10
type = "drr"
parent = 1
rate = "300Mbit/s"
ceil = "800Mbit/s"
prio = 1

[[sched]]
id = 11
type = "qfq"
parent = 10
rate = "10Mbit/s"
ceil = "100Mbit/s"
weight = 3
cburst = 30000

[[sched]]
id = 12
type = "fifo"
parent = 10
burst = 5000

[[queue]]
id = 1
sched = 11
weight = 2

[[queue]]
id = 2
sched = 12
"#;

#[test]
fn both_syntaxes_give_the_same_tree() {
    let a = parse_ipfw(IPFW, "t.ipfw").unwrap();
    let b = parse_toml(TOML, "t.toml").unwrap();
    assert_eq!(a, b);
    assert_eq!(
        a.schedulers[&11].class,
        Some(ClassOf {
            parent: 10,
            rate_bps: 10_000_000,
            ceil_bps: Some(100_000_000),
            burst: None,
            cburst: Some(30_000),
            weight: 3,
            prio: 0,
        })
    );
    assert_eq!(
        a.schedulers[&1].class, None,
        "the root is the link's scheduler"
    );
    assert_eq!(a.schedulers[&12].class.unwrap().burst, Some(5000));
}

#[test]
fn printing_gives_back_the_same_tree() {
    let a: Config = parse_ipfw(IPFW, "t.ipfw").unwrap();
    let text = a.to_string();
    assert!(
        text.contains(
            "sched 10 config type drr parent 1 rate 300Mbit/s ceil 800Mbit/s weight 1 prio 1"
        ),
        "{text}"
    );
    assert_eq!(parse_ipfw(&text, "printed").unwrap(), a);
    assert_eq!(parse_toml(&a.to_toml(), "printed.toml").unwrap(), a);
}

fn ipfw_err(text: &str) -> String {
    parse_ipfw(text, "t.ipfw").unwrap_err().to_string()
}

#[test]
fn bad_trees_are_refused_naming_the_class() {
    let cases = [
        (
            "sched 1 config type drr\nsched 2 config parent 1 rate 10Mbit/s ceil 5Mbit/s\n",
            "sched 2: ceil 5Mbit/s is below its rate 10Mbit/s",
        ),
        (
            "sched 2 config parent 3\n",
            "sched 2: parent 3 is not another scheduler",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 2\n",
            "sched 2: parent 2 is not another scheduler",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 3\nsched 3 config parent 2\n",
            "sched 2 is its own ancestor",
        ),
        (
            "sched 1 config type fifo\nsched 2 config parent 1\n",
            "sched 1: 'fifo' cannot schedule the children of a class",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 1 mask dst-ip 0xffffffff\n",
            "sched 2: a mask on a class",
        ),
        (
            "pipe 2 config bw 1Mbit/s\nsched 1 config type drr\nsched 2 config parent 1\n",
            "sched 2 is a class of sched 1: it has no link of its own",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 1\nqueue 1 config sched 1\n",
            "queue 1: sched 1 has classes under it",
        ),
        (
            "sched 1 config type drr rate 1Mbit/s\n",
            "`rate` is a class's: give sched 1 a `parent`",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 1 prio 8\n",
            "a priority band",
        ),
        (
            "sched 1 config type drr\nsched 2 config parent 1 weight 0\n",
            "a weight",
        ),
    ];
    for (text, want) in cases {
        let e = ipfw_err(text);
        assert!(e.contains(want), "{text:?}: got {e:?}, want {want:?}");
    }
    let mut deep = String::from("sched 1 config type drr\n");
    for i in 2..=10 {
        deep += &format!("sched {i} config type drr parent {}\n", i - 1);
    }
    assert!(
        ipfw_err(&deep).contains("sched 10 is more than 8 levels below"),
        "{}",
        ipfw_err(&deep)
    );
    let e = parse_toml("[[sched]]\nid = 1\nweight = 2\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`weight` is a class's"), "{e}");
}

#[test]
fn the_classifier_puts_a_tree_under_its_root_and_flowsets_in_its_leaves() {
    let c = parse_ipfw(IPFW, "t.ipfw").unwrap();
    let k = pspat_config::classify::Classifier::new(&c).unwrap();
    // one scheduler for the tree (its root, sched 1), none for its classes
    let trees: Vec<_> = k.scheds().iter().filter(|s| s.tree.is_some()).collect();
    assert_eq!(trees.len(), 1);
    let tree = trees[0].tree.as_ref().unwrap();
    let names: Vec<&str> = tree.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["sched 10", "sched 11", "sched 12"]);
    assert_eq!(tree.classes[1].parent, Some(0));
    assert_eq!(tree.classes[1].rate_bps, 10_000_000);
    assert_eq!(tree.classes[1].cburst, Some(30_000));
    // queue 1 joins leaf sched 11, queue 2 leaf sched 12, both through sched 1's instances
    let leaves: Vec<Option<u32>> = k.classes().iter().map(|c| c.leaf).collect();
    assert_eq!(
        leaves,
        [Some(1), Some(2), None],
        "the pipe's own class has no leaf"
    );
}
