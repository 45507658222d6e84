//! The two front ends on hand-written inputs: what they accept (checked against the model
//! the slides' commands mean), and where and how they refuse.

use std::net::{IpAddr, Ipv4Addr};

use pspat_config::*;

fn ipfw(text: &str) -> Config {
    parse_ipfw(text, "t.ipfw").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn ipfw_err(text: &str) -> ConfigError {
    parse_ipfw(text, "t.ipfw").expect_err(text)
}

fn toml_err(text: &str) -> ConfigError {
    parse_toml(text, "t.toml").expect_err(text)
}

/// The position and token of a syntax error.
fn at(e: &ConfigError) -> (u32, u32, &str, &str) {
    match e {
        ConfigError::Syntax {
            line,
            column,
            token,
            message,
            ..
        } => (*line, *column, token.as_str(), message.as_str()),
        other => panic!("not a syntax error: {other}"),
    }
}

fn v4(a: [u8; 4], len: u8) -> Prefix {
    Prefix {
        addr: IpAddr::V4(Ipv4Addr::from(a)),
        len,
    }
}

#[test]
fn the_slides_user_view_means_what_the_slides_say() {
    let c = ipfw(
        "ipfw sched 4 config type qfq bw 4Mbit/s\n\
         ipfw queue 1 config weight 10 sched 4\n\
         ipfw queue 2 config weight 3 sched 4\n\
         ipfw add 100 queue 1 out src-ip 1.2.3.4\n\
         ipfw add 100 queue 2 out src-ip 1.2.3.5\n",
    );
    let s = &c.schedulers[&4];
    assert_eq!((s.algorithm.as_str(), s.bandwidth_bps), ("qfq", 4_000_000));
    assert_eq!((c.flowsets[&1].weight, c.flowsets[&1].sched), (10, 4));
    assert_eq!((c.flowsets[&2].weight, c.flowsets[&2].sched), (3, 4));
    assert_eq!(c.rules.len(), 2);
    // equal numbers keep the written order
    assert_eq!(c.rules[0].action, Action::Queue(Target::Id(1)));
    assert_eq!(c.rules[1].action, Action::Queue(Target::Id(2)));
    assert_eq!(c.rules[1].matcher.direction, Some(Direction::Out));
    assert_eq!(
        c.rules[1].matcher.src,
        AddrMatch::Prefixes(vec![v4([1, 2, 3, 5], 32)])
    );
    assert_eq!(c.default_action, Action::Deny);
}

#[test]
fn masks_tables_and_tablearg() {
    let c = ipfw(
        "add queue tablearg out src-ip table(1)\n\
         table 1 add 1.2.3.0/24 20 // this goes to queue 20\n\
         table 1 add 1.2.3.8 21\n\
         queue 20 config sched 3 weight 5 mask src-ip 0xff\n\
         queue 21 config sched 3 weight 20\n\
         sched 3 config type QFQ bw 4Mbit/s mask dst-ip 255.255.0.0 src-ip6 /48 proto 0x11\n",
    );
    assert_eq!(c.rules[0].number, 100, "autoincrement from nothing");
    assert_eq!(c.rules[0].matcher.src, AddrMatch::Table(1.into()));
    assert_eq!(c.flowsets[&20].mask.src_ip, 0xff);
    let m = c.schedulers[&3].mask;
    assert_eq!(m.dst_ip, 0xffff_0000);
    assert_eq!(m.src_ip6, u128::MAX << 80);
    assert_eq!(m.proto, 0x11);
    assert_eq!(c.schedulers[&3].algorithm, "qfq", "canonical name");
    assert_eq!(
        c.tables[&1.into()].entries,
        vec![(v4([1, 2, 3, 0], 24), 20), (v4([1, 2, 3, 8], 32), 21)]
    );
}

/// dummynet's object model (FreeBSD's ipfw(8) and ip_dummynet.c): pipe N is link N and
/// creates scheduler N (WF2Q+ unless typed, with the pipe's mask only when typed on the
/// pipe line); `queue N config pipe P` is `sched P`; a sched line's `pipe P` changes
/// nothing; the link's emulation belongs to the pipe, loss and RED to each queue.
#[test]
fn pipes_are_links_that_clock_the_scheduler_of_their_number() {
    let c = ipfw(
        "pipe 1 config bw 10Mbit/s delay 50 plr 0.01 queue 100 droptail\n\
         queue 3 config pipe 1 weight 10 red 0.002/30/80/0.1\n\
         queue 4 config sched 1 gred 0.5/5/10/1 plr 1\n\
         pipe 2 config bw 100Mb burst 64KB mask src-ip 0xff type qfq\n\
         sched 5 config pipe 5 type rr\n\
         sched 6 config pipe 7 mask all\n\
         add pipe 1 ip from any to any\n\
         add queue 3 tcp from any to any\n",
    );
    let s1 = &c.schedulers[&1];
    assert_eq!(s1.algorithm, "wf2q+", "dummynet's default scheduler");
    assert!(s1.mask.is_empty());
    let link = c.link_of(s1);
    assert_eq!(
        (link.bandwidth_bps, link.delay_ns, link.burst_bytes),
        (10_000_000, 50_000_000, 0)
    );
    let p1 = &c.pipes[&1];
    assert_eq!(p1.qm.plr, Probability(10_000_000));
    assert_eq!(p1.limit, QueueLimit::Packets(100));
    assert_eq!((c.flowsets[&3].sched, c.flowsets[&4].sched), (1, 1));
    let red = c.flowsets[&3].qm.red.unwrap();
    assert_eq!((red.min_th, red.max_th, red.gentle), (30, 80, false));
    assert_eq!(red.w_q, Probability(2_000_000));
    assert!(c.flowsets[&4].qm.red.unwrap().gentle);
    assert_eq!(c.flowsets[&4].qm.plr, Probability::ONE);
    let s2 = &c.schedulers[&2];
    assert_eq!((s2.algorithm.as_str(), s2.mask.src_ip), ("qfq", 0xff));
    assert_eq!(c.link_of(s2).burst_bytes, 65536);
    assert_eq!(c.link_of(s2).bandwidth_bps, 100_000_000);
    assert_eq!(
        c.schedulers[&5].algorithm, "drr",
        "rr is deficit round robin"
    );
    assert_eq!(c.link_of(&c.schedulers[&5]).bandwidth_bps, 0, "no pipe 5");
    assert_eq!(c.schedulers[&6].mask, FlowMask::ALL);
    // printed back, it means the same
    assert_eq!(ipfw(&c.to_string()), c);
    assert_eq!(parse_toml(&c.to_toml(), "t.toml").unwrap(), c);
}

/// A file is applied as ipfw applies its lines: a later `config` of an object
/// reconfigures it, keeping what ipfw keeps (a pipe's bandwidth, a queue's scheduler,
/// weight and lmax, a scheduler's type) and resetting the rest; `delete` and `flush` remove.
#[test]
fn a_file_is_a_command_stream_as_ipfw_applies_it() {
    let c = ipfw(
        "pipe 1 config bw 10M queue 20 delay 7\n\
         pipe 1 config delay 5\n\
         queue 1 config pipe 1 weight 5 lmax 1000 queue 9\n\
         queue 1 config plr 0.5\n\
         sched 1 config type qfq mask dst-ip 0xff\n\
         sched 1 config mask src-ip 0xff\n",
    );
    let p = &c.pipes[&1];
    assert_eq!(p.bandwidth_bps, 10_000_000, "kept");
    assert_eq!(p.delay_ns, 5_000_000);
    assert_eq!(p.limit, QueueLimit::Packets(50), "reset to the default");
    let q = &c.flowsets[&1];
    assert_eq!((q.sched, q.weight, q.max_len), (1, 5, 1000), "kept");
    assert_eq!(q.limit, QueueLimit::Packets(50), "reset to the default");
    assert_eq!(q.qm.plr, Probability(500_000_000));
    let s = &c.schedulers[&1];
    assert_eq!(s.algorithm, "qfq", "kept");
    assert_eq!((s.mask.src_ip, s.mask.dst_ip), (0xff, 0), "replaced");

    let c = ipfw(
        "pipe 1 config\npipe 2 config\npipe 3 config\nsched 1 config type drr\n\
         queue 7 config pipe 3\npipe 1 delete\nqueue delete 7\n",
    );
    assert_eq!(c.pipes.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    assert!(c.schedulers.is_empty(), "deleting pipe 1 deleted sched 1");
    assert!(c.flowsets.is_empty());
    let c = ipfw("pipe 1 config\nqueue 1 config pipe 1\npipe flush\npipe 4 config\n");
    assert_eq!((c.pipes.len(), c.flowsets.len()), (1, 0));
}

#[test]
fn classic_and_option_bodies_mean_the_same() {
    let a = ipfw(
        "pipe 1 config bw 1M\n\
         add 10 pipe 1 udp from 10.0.0.0/8 1000-2000 to { 1.1.1.1, 2.2.2.0/24 } 53,853 in\n",
    );
    let b = ipfw(
        "pipe 1 config bw 1M\n\
         add 10 pipe 1 in proto udp src-ip 10.0.0.0/8 src-port 1000-2000 dst-ip 1.1.1.1,2.2.2.0/24 dst-port 53,853\n",
    );
    assert_eq!(a, b);
    let m = &a.rules[0].matcher;
    assert_eq!(m.proto, Some(17));
    assert_eq!(m.src_ports, vec![PortRange { lo: 1000, hi: 2000 }]);
    assert_eq!(
        m.dst_ports,
        vec![PortRange { lo: 53, hi: 53 }, PortRange { lo: 853, hi: 853 }]
    );
}

#[test]
fn rule_numbers_autoincrement_from_the_highest_so_far_as_ipfw_does() {
    let c = ipfw("add allow\nadd 1000 deny\nadd allow\nadd 50 deny\nadd allow\n");
    let n: Vec<u32> = c.rules.iter().map(|r| r.number).collect();
    // written 100, 1000, 1100, 50, 1200 (the highest so far plus 100, not the previous
    // rule's: 150); sorted stably
    assert_eq!(n, vec![50, 100, 1000, 1100, 1200]);
    // Near the top, the highest number itself: rules may share one.
    for (top, next) in [(65434, 65534), (65435, 65435), (65500, 65500)] {
        let c = ipfw(&format!("add {top} allow\nadd deny\n"));
        let n: Vec<u32> = c.rules.iter().map(|r| r.number).collect();
        assert_eq!(n, vec![top, next]);
    }
    let t = parse_toml(
        "[[rule]]\nnumber = 700\naction = \"allow\"\n[[rule]]\nnumber = 10\n\
         action = \"deny\"\n[[rule]]\naction = \"allow\"\n",
        "t.toml",
    )
    .unwrap();
    let n: Vec<u32> = t.rules.iter().map(|r| r.number).collect();
    assert_eq!(n, vec![10, 700, 800]);
}

#[test]
fn syntax_errors_point_at_line_column_and_token() {
    let cases: &[(&str, u32, u32, &str, &str)] = &[
        // (text, line, column, token, part of the message)
        (
            "sched 1 config type qfq bw 4Mbit/z",
            1,
            28,
            "4Mbit/z",
            "unit",
        ),
        (
            "\n  queue 1 config sched 1 weight 0",
            2,
            33,
            "0",
            "weight must be 1..=65536",
        ),
        (
            "pipe 1 config bw 1M delay 1s",
            1,
            27,
            "1s",
            "whole milliseconds",
        ),
        ("pipe 1 config bw 1M plr 1.5", 1, 25, "1.5", "not 0..1"),
        (
            "pipe 1 config plr 0.1,0.2,0.3,0.4",
            1,
            22,
            ",",
            "Gilbert-Elliott",
        ),
        (
            "pipe 1 config delay 10000",
            1,
            21,
            "10000",
            "below 10000 ms",
        ),
        ("pipe 1 config bw tun0", 1, 18, "tun0", "device"),
        (
            "pipe 1 config bw 1M codel",
            1,
            21,
            "codel",
            "active queue management",
        ),
        (
            "pipe 1 config type fq_codel",
            1,
            20,
            "fq_codel",
            "active queue management",
        ),
        (
            "pipe 1 config red 0.002/80/30/0.1",
            1,
            19,
            "0.002/80/30/0.1",
            "min_th < max_th",
        ),
        ("queue 1 config pipe 1 queue 2M", 1, 29, "2M", "2 slots"),
        ("queue 1 config pipe 1 queue 50b", 1, 29, "50b", "50 slots"),
        ("queue 1 config pipe 1 sched 1", 1, 23, "sched", "give one"),
        ("sched 1 config delay 10", 1, 16, "delay", "pipe 1 config"),
        ("queue 1 config pipe 1 bw 1M", 1, 23, "bw", "pipe 1 config"),
        (
            "queue 1 config delay 5 pipe 1",
            1,
            16,
            "delay",
            "`pipe P config`",
        ),
        ("pipe 1 config profile x", 1, 15, "profile", "extra-delay"),
        (
            "sysctl net.inet.ip.fw.one_pass=2",
            1,
            8,
            "net.inet.ip.fw.one_pass=2",
            "0 or 1",
        ),
        (
            "sysctl -w kern.hz=1000",
            1,
            11,
            "kern.hz=1000",
            "not a dummynet setting",
        ),
        (
            "sysctl net.inet.ip.fw.one_pass",
            1,
            8,
            "net.inet.ip.fw.one_pass",
            "NAME=VALUE",
        ),
        (
            "pipe 1 config mask flow-id 0xf",
            1,
            20,
            "flow-id",
            "flow label",
        ),
        ("add 100 queue 1 from me to any", 1, 22, "me", "`me`"),
        (
            "add 100 queue 1 via table(1)",
            1,
            21,
            "table(1)",
            "matched by name",
        ),
        (
            "add 100 fwd 1.2.3.4 ip from any to any",
            1,
            9,
            "fwd",
            "next hop",
        ),
        ("add 100 allow from any", 1, 23, "", "expected `to`"),
        ("add 100 allow out out", 1, 19, "out", "twice"),
        (
            "queue 1 config sched 1 weight 2 weight 3",
            1,
            33,
            "weight",
            "given twice",
        ),
        (
            "queue 1 config weight 3",
            1,
            24,
            "",
            "expected `pipe P` or `sched S`",
        ),
        ("pipe show", 1, 6, "show", "lists objects"),
        ("pipe 1 frob", 1, 8, "frob", "`config` or `delete`"),
        ("sched 0 config type fifo", 1, 7, "0", "1..=65535"),
        (
            "sched 1 type fifo",
            1,
            9,
            "type",
            "expected `config` or `delete`",
        ),
        ("frobnicate 1", 1, 1, "frobnicate", "expected a command"),
        ("sched 1 config type drr mask", 1, 29, "", "mask field"),
        (
            "sched 1 config type drr mask src-ip 1.2.3",
            1,
            37,
            "1.2.3",
            "IPv4 mask",
        ),
        ("table 1 add 1.2.3.0/33 1", 1, 13, "1.2.3.0/33", "0..=32"),
        ("table 1 add 1.2.3.0/24 x", 1, 24, "x", "table value"),
        (
            "add 100 allow from { 1.2.3.4 5.6.7.8 } to any",
            1,
            30,
            "5.6.7.8",
            "`}`",
        ),
        (
            "add 100 allow tcp from any 99999 to any",
            1,
            28,
            "99999",
            "port",
        ),
        (
            "add 100 allow bogus from any to any",
            1,
            15,
            "bogus",
            "unknown protocol",
        ),
        (
            "add 100 queue table(1) out",
            1,
            15,
            "table(1)",
            "queue number",
        ),
        (
            "sched 1 config type drr params quantum",
            1,
            32,
            "quantum",
            "key=value",
        ),
        ("default maybe", 1, 9, "maybe", "expected an action"),
        ("sched 1 config type drr idle 10d", 1, 30, "10d", "unit"),
    ];
    for &(text, line, column, token, msg) in cases {
        let e = ipfw_err(text);
        let got = at(&e);
        assert_eq!(
            (got.0, got.1, got.2),
            (line, column, token),
            "{text:?}: {e}"
        );
        assert!(got.3.contains(msg), "{text:?}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("t.ipfw:{line}:{column}: ")),
            "{e}"
        );
    }
}

#[test]
fn semantic_errors_name_the_object_and_its_line() {
    let cases: &[(&str, &str)] = &[
        (
            "queue 1 config sched 9",
            "t.ipfw:1:1: queue 1: sched 9 is not defined",
        ),
        (
            "pipe 1 config bw 1M\nsched 1 config type drr bw 2M",
            "t.ipfw:2:1: sched 1: its link is pipe 1's",
        ),
        (
            "pipe 1 config queue 10 red 0.002/10/20/0.1",
            "pipe 1: RED's min_th 10 is not below the queue's limit of 10 slots",
        ),
        (
            "sched 1 config type nosuch",
            "t.ipfw:1:1: sched 1: unknown algorithm 'nosuch'",
        ),
        (
            "sched 1 config type drr params bogus=1",
            "sched 1: algorithm 'drr' has no parameter 'bogus'",
        ),
        (
            "sched 1 config type drr params quantum=abc",
            "invalid value 'abc' for parameter 'quantum'",
        ),
        (
            "sched 1 config type drr params quantum=1,quantum=2",
            "parameter 'quantum' given twice",
        ),
        (
            "\n\nadd 5 pipe 3",
            "t.ipfw:3:1: rule 5: pipe 3 is not defined",
        ),
        (
            "add 5 deny src-ip table(2)",
            "rule 5: source: table(2) is not defined",
        ),
        (
            "table 1 add 1.2.4.0/20 1",
            "table 1: 1.2.4.0/20 has bits set past the prefix length (did you mean 1.2.0.0/20?)",
        ),
        (
            "add 1 deny dst-ip 10.1.0.0/8",
            "rule 1: destination: 10.1.0.0/8 has bits set",
        ),
        (
            "table 1 add 1.2.3.0/24 1\ntable 1 add 1.2.3.0/24 2",
            "t.ipfw:2:1: table 1: 1.2.3.0/24 is entered twice",
        ),
        (
            "add 1 queue tablearg",
            "queue tablearg needs exactly one table(N)",
        ),
        (
            "table 1 add ::/0 1\nadd 1 queue tablearg src-ip table(1) dst-ip table(1)",
            "needs exactly one table(N)",
        ),
        (
            "table 1 add 10.0.0.0/8 7\nadd 1 queue tablearg src-ip table(1)",
            "table 1 sends 10.0.0.0/8 to queue 7, which is not defined",
        ),
        ("default queue tablearg", "default: queue tablearg"),
        (
            "default allow\ndefault deny",
            "t.ipfw:2:1: the default action is given twice",
        ),
        (
            "pipe 1 config queue 0",
            "pipe 1: a queue limit of 0 would drop everything",
        ),
    ];
    for &(text, want) in cases {
        let e = ipfw_err(text);
        assert!(
            matches!(e, ConfigError::Invalid(_)),
            "{text:?}: not semantic: {e}"
        );
        assert!(
            e.to_string().contains(want),
            "{text:?}:\n{e}\nwanted {want}"
        );
    }
}

#[test]
fn toml_errors_point_at_line_column_and_key() {
    // unknown key
    let e = toml_err("[[sched]]\nid = 1\ntype = \"drr\"\nbandwith = \"1M\"\n");
    let (line, col, tok, msg) = at(&e);
    assert_eq!((line, col, tok), (4, 1, "bandwith"), "{e}");
    assert!(msg.contains("unknown field `bandwith`"), "{e}");
    // a bad value: the message names the value, the place is the value
    let e = toml_err("[[sched]]\nid = 1\ntype = \"drr\"\nbw = \"4Mbit/z\"\n");
    let (line, col, tok, msg) = at(&e);
    assert_eq!((line, col, tok), (4, 6, "\"4Mbit/z\""), "{e}");
    assert!(msg.contains("unknown bandwidth unit"), "{e}");
    // unknown mask field
    let e = toml_err("[[pipe]]\nid = 1\nmask = { src = 1 }\n");
    assert_eq!(at(&e).0, 3, "{e}");
    assert!(at(&e).3.contains("unknown mask field `src`"), "{e}");
    // a bad table prefix points at its key
    let e = toml_err("[table.1]\n\"1.2.3.0/24\" = 1\n\"1.2.3.0/99\" = 2\n");
    let (line, col, tok, msg) = at(&e);
    assert_eq!((line, col, tok), (3, 1, "\"1.2.3.0/99\""), "{e}");
    assert!(msg.contains("0..=32"), "{e}");
    // a bad table name, a table number out of range
    let e = toml_err("[table.\"x y\"]\n");
    assert!(
        at(&e).3.contains("table's key is its name or number"),
        "{e}"
    );
    let e = toml_err("[table.0]\n");
    assert!(
        at(&e).3.contains("table's key is its name or number"),
        "{e}"
    );
    // TOML syntax itself
    let e = toml_err("[[sched]\n");
    assert_eq!(at(&e).0, 1, "{e}");
    // semantic errors carry the object's line
    let e = toml_err("[[sched]]\nid = 1\ntype = \"drr\"\n\n[[queue]]\nid = 2\nsched = 3\n");
    assert!(
        e.to_string().starts_with("t.toml:5:") && e.to_string().contains("queue 2: sched 3"),
        "{e}"
    );
    // an action phrase keeps the ipfw parser's message
    let e = toml_err("[[rule]]\naction = \"queue\"\n");
    assert!(at(&e).3.contains("queue number or `tablearg`"), "{e}");
}

#[test]
fn parse_file_chooses_the_front_end_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("a.toml");
    std::fs::write(&t, "default = \"allow\"\n").unwrap();
    assert_eq!(parse_file(&t).unwrap().default_action, Action::Allow);
    let i = dir.path().join("a.conf");
    std::fs::write(&i, "default allow\n").unwrap();
    assert_eq!(parse_file(&i).unwrap().default_action, Action::Allow);
    // the same ipfw text in a .toml file is a TOML error
    std::fs::write(&t, "default allow\n").unwrap();
    assert!(matches!(
        parse_file(&t).unwrap_err(),
        ConfigError::Syntax { .. }
    ));
    let e = parse_file(dir.path().join("missing.ipfw"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("missing.ipfw") && e.contains("cannot read"),
        "{e}"
    );
}

#[test]
fn a_bare_duration_is_seconds_in_both_syntaxes() {
    // pspat-units' rule for a bare number: the quantity's base unit (seconds here).
    let c = ipfw("sched 1 config type drr idle 10\nqueue 1 config sched 1 idle 0.5\n");
    assert_eq!(c.schedulers[&1].idle_ns, 10_000_000_000);
    assert_eq!(c.flowsets[&1].idle_ns, 500_000_000);
    let t = parse_toml(
        "[[sched]]\nid = 1\ntype = \"drr\"\nidle = 10\n[[queue]]\nid = 1\nsched = 1\nidle = \"0.5\"\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(t, c);
}

/// Spellings real ipfw configurations use: a leading `-q`, repeated spaces, an IPv4 mask of
/// `/32`, and `buckets` (a hash size in dummynet, which bounds nothing: it leaves
/// `max-queues` as it was).
#[test]
fn ipfw_spellings_of_real_configurations() {
    let c = ipfw(
        "-q pipe  1   config bw 100Mb mask src-ip /32 buckets 256\n\
         ipfw -q sched 2 config type drr buckets 64\n\
         queue 3 config sched 2 mask dst-ip 0xffffff00 buckets 1024\n\
         add queue 3 ip from any to any\n",
    );
    let p = &c.pipes[&1];
    assert_eq!(p.bandwidth_bps, 100_000_000);
    assert_eq!(p.mask.src_ip, u32::MAX);
    let q = &c.flowsets[&3];
    assert_eq!(q.mask.dst_ip, 0xffff_ff00);
    assert_eq!(q.max_queues, DEFAULT_MAX_QUEUES, "buckets bounds nothing");
    assert_eq!(c.schedulers[&2].algorithm, "drr");
    let e = ipfw_err("pipe 1 config mask src-ip /33\n");
    assert!(at(&e).3.contains("/0../32"), "{e}");
    // ipfw's /24 is the 24 low bits, not a prefix: refused, naming both.
    let e = ipfw_err("pipe 1 config mask src-ip /24\n");
    let m = at(&e).3;
    assert!(m.contains("0x00ffffff") && m.contains("0xffffff00"), "{e}");
    let e = ipfw_err("queue 1 config sched 2 buckets 0\n");
    assert!(at(&e).3.contains("hash buckets"), "{e}");
}

/// Link framing (pspat's extension: tc's `overhead`, `mpu`, `linklayer` and CAKE's
/// presets) on pipes and on a scheduler with its own link, the same in both syntaxes,
/// printed back only where it adds something.
#[test]
fn link_framing_in_both_syntaxes() {
    let text = "pipe 1 config bw 10Mbit/s linklayer atm overhead 10\n\
                pipe 2 config bw 1M framing pppoe-ptm,ether-vlan mpu 72\n\
                pipe 4 config bw 1M\n\
                sched 3 config type drr bw 4M framing DOCSIS\n\
                queue 1 config sched 3\n";
    let c = ipfw(text);
    assert_eq!(c.pipes[&1].framing, Framing::new(10, 0, LinkLayer::Atm));
    // pppoe-ptm (CAKE's 30 on the IP packet) and one VLAN tag (4), 14 less on the frame;
    // the mpu written beside the preset replaces the preset's (none).
    assert_eq!(c.pipes[&2].framing, Framing::new(20, 72, LinkLayer::Ptm));
    assert_eq!(c.pipes[&4].framing, Framing::PLAIN);
    // docsis: CAKE's 18 is 4 on the frame, at least 64 bytes.
    assert_eq!(
        c.schedulers[&3].framing,
        Framing::new(4, 64, LinkLayer::Ethernet)
    );
    // The classifier's schedulers carry their link's framing to the engine.
    let k = classify::Classifier::new(&c).unwrap();
    let of = |o: classify::SchedOrigin| {
        k.scheds()
            .iter()
            .find(|s| s.origin == o)
            .map(|s| s.framing)
            .unwrap()
    };
    assert_eq!(
        of(classify::SchedOrigin::Pipe(1)),
        Framing::new(10, 0, LinkLayer::Atm)
    );
    assert_eq!(
        of(classify::SchedOrigin::Sched(3)),
        Framing::new(4, 64, LinkLayer::Ethernet)
    );

    let toml = parse_toml(
        "[[pipe]]\nid = 1\nbw = \"10Mbit/s\"\nlinklayer = \"atm\"\noverhead = 10\n\
         [[pipe]]\nid = 2\nbw = \"1M\"\nframing = [\"pppoe-ptm\", \"ether-vlan\"]\nmpu = 72\n\
         [[pipe]]\nid = 4\nbw = \"1M\"\n\
         [[sched]]\nid = 3\ntype = \"drr\"\nbw = \"4M\"\nframing = \"docsis\"\n\
         [[queue]]\nid = 1\nsched = 3\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(toml, c);

    // Printed as the numbers the presets gave, and only where the framing adds something.
    let printed = c.to_string();
    let line = |start: &str| {
        printed
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap()
            .to_owned()
    };
    assert!(
        line("pipe 1 ").contains(" overhead 10 linklayer atm "),
        "{printed}"
    );
    assert!(
        line("pipe 2 ").contains(" overhead 20 mpu 72 linklayer ptm "),
        "{printed}"
    );
    assert!(
        line("sched 3 ").contains(" overhead 4 mpu 64 "),
        "{printed}"
    );
    assert!(
        !line("pipe 4 ").contains("overhead")
            && !line("pipe 4 ").contains("mpu")
            && !line("pipe 4 ").contains("linklayer"),
        "{printed}"
    );
    let t = c.to_toml();
    assert!(t.contains("overhead = 10\nlinklayer = \"atm\"\n"), "{t}");
    assert!(
        t.contains("overhead = 20\nmpu = 72\nlinklayer = \"ptm\"\n"),
        "{t}"
    );
    assert_eq!(t.matches("overhead = ").count(), 3, "{t}");
    assert_eq!(parse_ipfw(&printed, "printed").unwrap(), c);
    assert_eq!(parse_toml(&t, "printed").unwrap(), c);
}

/// A later `pipe N config` keeps the pipe's framing as it keeps its bandwidth, unless it
/// writes any framing option: then the framing is what it writes. A later `sched N config`
/// replaces a scheduler's framing, as its `bw`.
#[test]
fn a_reconfigured_link_keeps_its_framing_as_its_bandwidth() {
    let c = ipfw("pipe 1 config bw 10M overhead 10 linklayer atm\npipe 1 config delay 20\n");
    assert_eq!(c.pipes[&1].framing, Framing::new(10, 0, LinkLayer::Atm));
    assert_eq!(c.pipes[&1].bandwidth_bps, 10_000_000);
    assert_eq!(c.pipes[&1].delay_ns, 20_000_000);
    let c = ipfw("pipe 1 config bw 10M overhead 10 linklayer atm\npipe 1 config mpu 64\n");
    assert_eq!(
        c.pipes[&1].framing,
        Framing::new(0, 64, LinkLayer::Ethernet)
    );
    let c = ipfw("pipe 1 config framing conservative\npipe 1 config overhead 0\n");
    assert_eq!(c.pipes[&1].framing, Framing::PLAIN);
    let c = ipfw("sched 1 config type drr bw 1M overhead 8\nsched 1 config type drr\n");
    assert_eq!(c.schedulers[&1].framing, Framing::PLAIN);
}

#[test]
fn bad_framing_is_refused_where_it_is_written() {
    let cases: &[(&str, u32, u32, &str, &str)] = &[
        (
            "pipe 1 config overhead 300",
            1,
            24,
            "300",
            "overhead 300 is not -64..=256 bytes",
        ),
        (
            "pipe 1 config overhead -65",
            1,
            24,
            "-65",
            "overhead -65 is not -64..=256 bytes",
        ),
        (
            "pipe 1 config overhead 1.5",
            1,
            24,
            "1.5",
            "not an overhead in bytes",
        ),
        (
            "pipe 1 config mpu 257",
            1,
            19,
            "257",
            "mpu 257 is not 0..=256 bytes",
        ),
        (
            "pipe 1 config mpu -1",
            1,
            19,
            "-1",
            "mpu -1 is not 0..=256 bytes",
        ),
        (
            "pipe 1 config mpu 6o",
            1,
            19,
            "6o",
            "'6o' is not an mpu in bytes (0..=256)",
        ),
        (
            "pipe 1 config linklayer docsis",
            1,
            25,
            "docsis",
            "unknown link layer 'docsis' (expected ethernet, atm or ptm)",
        ),
        (
            "pipe 1 config framing pppoe-ptm,bogus",
            1,
            33,
            "bogus",
            "unknown framing preset 'bogus' (CAKE's: raw, conservative,",
        ),
        (
            "pipe 1 config framing",
            1,
            22,
            "",
            "expected a framing preset",
        ),
        (
            "pipe 1 config overhead 4 overhead 8",
            1,
            26,
            "overhead",
            "given twice",
        ),
        (
            "pipe 1 config bw 1M\nqueue 1 config pipe 1 mpu 64",
            2,
            23,
            "mpu",
            "`mpu` is a parameter of a link: write it on `pipe 1 config`",
        ),
    ];
    for (text, line, column, token, msg) in cases {
        let e = ipfw_err(text);
        let (l, c, t, m) = at(&e);
        assert_eq!((l, c, t), (*line, *column, *token), "{text}: {e}");
        assert!(m.contains(msg), "{text}: {e}");
    }
    // A scheduler on pipe N's link takes the pipe's framing.
    let e = ipfw_err("pipe 1 config bw 1M\nsched 1 config type drr overhead 10\n").to_string();
    assert!(
        e.starts_with(
            "t.ipfw:2:1: sched 1: its link is pipe 1's; give the framing on `pipe 1 \
             config` only"
        ),
        "{e}"
    );
    // The same values in TOML: at the value, with the ipfw parser's message.
    let cases: &[(&str, u32, u32, &str)] = &[
        (
            "overhead = 300",
            3,
            12,
            "overhead 300 is not -64..=256 bytes",
        ),
        ("mpu = \"x\"", 3, 7, "'x' is not an mpu in bytes"),
        ("linklayer = \"adls\"", 3, 13, "unknown link layer 'adls'"),
        (
            "framing = [\"pppoe-ptm\", \"nope\"]",
            3,
            11,
            "unknown framing preset 'nope'",
        ),
    ];
    for (key, line, column, msg) in cases {
        let text = format!("[[pipe]]\nid = 1\n{key}\n");
        let e = toml_err(&text);
        let (l, c, _, m) = at(&e);
        assert_eq!((l, c), (*line, *column), "{key}: {e}");
        assert!(m.contains(msg), "{key}: {e}");
    }
    // A model built by code is checked too.
    let mut d = resolve::Draft::new("code");
    let mut p = PipeSpec::new(1);
    p.framing = Framing::new(0, 300, LinkLayer::Atm);
    d.pipes.push(resolve::Located { item: p, at: None });
    let e = resolve::resolve(d).unwrap_err().to_string();
    assert!(e.contains("pipe 1: mpu 300 is not 0..=256 bytes"), "{e}");
}
