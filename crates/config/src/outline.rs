//! The trees of classes of a configuration as an indented outline, every value resolved
//! (the bursts a class gets when it gives none, whose ceil applies when it has none): what
//! `pspat config check` prints after the model, as comment lines of both syntaxes.

use std::collections::BTreeMap;
use std::fmt::Write;

use pspat_sched::flow::DEFAULT_MAX_LEN;
use pspat_sched::tree::ClassSpec;
use pspat_units as units;

use crate::model::{Config, SchedSpec};

/// The outline of every tree in `c` (empty when it has none). Each line starts with `#`.
pub fn trees(c: &Config) -> String {
    let mut children: BTreeMap<u32, Vec<&SchedSpec>> = BTreeMap::new();
    for s in c.schedulers.values() {
        if let Some(k) = s.class {
            children.entry(k.parent).or_default().push(s);
        }
    }
    let mut out = String::new();
    for s in c.schedulers.values() {
        if s.class.is_some() || !children.contains_key(&s.id) {
            continue;
        }
        let link = c.link_of(s);
        let bw = if link.bandwidth_bps == 0 {
            "unlimited".to_owned()
        } else {
            units::format_bandwidth(link.bandwidth_bps)
        };
        let _ = writeln!(
            out,
            "# tree of sched {} ({}) on link {}, {}: {} classes",
            s.id,
            s.algorithm,
            s.id,
            bw,
            count(&children, s.id)
        );
        let under = flowsets_of(c);
        walk(&mut out, &children, &under, s.id, 1, None);
    }
    out
}

/// Classes in the subtree under `id`.
fn count(children: &BTreeMap<u32, Vec<&SchedSpec>>, id: u32) -> usize {
    children
        .get(&id)
        .map_or(0, |cs| cs.iter().map(|c| 1 + count(children, c.id)).sum())
}

fn flowsets_of(c: &Config) -> BTreeMap<u32, Vec<u32>> {
    let mut m: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for q in c.flowsets.values() {
        m.entry(q.sched).or_default().push(q.id);
    }
    m
}

fn walk(
    out: &mut String,
    children: &BTreeMap<u32, Vec<&SchedSpec>>,
    flowsets: &BTreeMap<u32, Vec<u32>>,
    id: u32,
    depth: usize,
    parent_rate: Option<u64>,
) {
    let Some(cs) = children.get(&id) else { return };
    let indent = "  ".repeat(depth);
    let rates: u64 = cs.iter().filter_map(|c| c.class).map(|k| k.rate_bps).sum();
    if let Some(r) = parent_rate.filter(|&r| r > 0 && rates > r) {
        let _ = writeln!(
            out,
            "#{indent}note: the rates of sched {id}'s classes add up to {}, above its own \
             {}: when all want them, they share it in proportion to their rates",
            units::format_bandwidth(rates),
            units::format_bandwidth(r)
        );
    }
    for c in cs {
        let Some(k) = c.class else { continue };
        let bw = units::format_bandwidth;
        let rate = if k.rate_bps == 0 {
            "rate 0".to_owned()
        } else {
            format!(
                "rate {} (burst {} B)",
                bw(k.rate_bps),
                ClassSpec::burst_bytes(k.rate_bps, k.burst, DEFAULT_MAX_LEN)
            )
        };
        let ceil = match k.ceil_bps {
            Some(b) => format!(
                "ceil {} (cburst {} B)",
                bw(b),
                ClassSpec::burst_bytes(b, k.cburst, DEFAULT_MAX_LEN)
            ),
            None => "no ceil of its own".to_owned(),
        };
        let what = match (children.contains_key(&c.id), flowsets.get(&c.id)) {
            (true, _) => format!("orders {} classes", children[&c.id].len()),
            (false, Some(q)) => format!(
                "flowsets {}",
                q.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            ),
            (false, None) => "no flowset".to_owned(),
        };
        let _ = writeln!(
            out,
            "#{indent}sched {} {}: {rate}, {ceil}, weight {}, prio {}; {what}",
            c.id, c.algorithm, k.weight, k.prio
        );
        walk(out, children, flowsets, c.id, depth + 1, Some(k.rate_bps));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outline_resolves_every_value() {
        let c = crate::parse_ipfw(
            "pipe 1 config bw 100Mbit/s\nsched 1 config type qfq\n\
             sched 2 config type drr parent 1 rate 10Mbit/s\n\
             sched 3 config type fifo parent 2 rate 8Mbit/s ceil 50Mbit/s cburst 9000 prio 1\n\
             sched 4 config type fifo parent 2 rate 4Mbit/s weight 2\n\
             queue 7 config sched 3\n",
            "t",
        )
        .unwrap();
        let o = trees(&c);
        assert_eq!(
            o,
            "# tree of sched 1 (qfq) on link 1, 100Mbit/s: 3 classes\n\
             #  sched 2 drr: rate 10Mbit/s (burst 3000 B), no ceil of its own, weight 1, prio 0; orders 2 classes\n\
             #    note: the rates of sched 2's classes add up to 12Mbit/s, above its own 10Mbit/s: when all want them, they share it in proportion to their rates\n\
             #    sched 3 fifo: rate 8Mbit/s (burst 3000 B), ceil 50Mbit/s (cburst 9000 B), weight 1, prio 1; flowsets 7\n\
             #    sched 4 fifo: rate 4Mbit/s (burst 3000 B), no ceil of its own, weight 2, prio 0; no flowset\n"
        );
        assert_eq!(
            trees(&crate::parse_ipfw("sched 1 config type qfq\n", "t").unwrap()),
            ""
        );
    }
}
