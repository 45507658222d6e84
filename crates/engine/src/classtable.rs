//! A live summary of the trees of classes between two statistics snapshots: one row per
//! inner class (an uplink's sites), one per plan (the leaf classes that share a rate, a
//! ceil, a weight and a band: an ISP's subscriber plans), summed over the instances of the
//! tree's root. What an operator watches where `tc -s class show` would print a thousand
//! subscribers: [`crate::DummynetStats`] keeps every class for that.

use std::collections::BTreeMap;
use std::fmt;

use pspat_units::{HumanBandwidth, HumanRate};
use serde::Serialize;

use crate::dnstats::{DummynetStats, SchedRef, TreeClassStats};

/// What one inner class did over the interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InnerRow {
    /// Its name.
    pub name: String,
    /// Classes above it.
    pub depth: u32,
    /// Its guaranteed rate, bit/s (0: none).
    pub rate_bps: u64,
    /// Its ceil, bit/s.
    pub ceil_bps: Option<u64>,
    /// Bits per second sent through it.
    pub bps: f64,
    /// Bits per second of those it borrowed from its parent's excess.
    pub borrowed_bps: f64,
    /// Drops below it over the interval.
    pub drops: u64,
    /// Packets queued below it now.
    pub backlog_pkts: u64,
}

/// What the leaf classes of one plan did over the interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanRow {
    /// The plan's guaranteed rate, bit/s.
    pub rate_bps: u64,
    /// Its ceil, bit/s.
    pub ceil_bps: Option<u64>,
    /// Its weight.
    pub weight: u32,
    /// Its band.
    pub prio: u8,
    /// Leaf classes on it.
    pub classes: usize,
    /// Those that sent over the interval.
    pub active: usize,
    /// Bits per second they sent, all together.
    pub bps: f64,
    /// Their drops over the interval.
    pub drops: u64,
    /// Packets they have queued now.
    pub backlog_pkts: u64,
}

/// One tree's rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TreeTable {
    /// The tree's root.
    pub sched: SchedRef,
    /// Its inner classes, in the configuration's order.
    pub inner: Vec<InnerRow>,
    /// Its plans, by band, rate, ceil and weight.
    pub plans: Vec<PlanRow>,
}

/// Every tree's rows between two snapshots; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassTable {
    /// The interval (ns).
    pub interval_ns: u64,
    /// One per tree.
    pub trees: Vec<TreeTable>,
}

/// A class summed over the instances of its tree: the later snapshot's figures and the
/// bytes it had sent, borrowed and dropped in the earlier one.
struct Summed {
    class: TreeClassStats,
    before: (u64, u64, u64),
    active: bool,
}

impl ClassTable {
    /// The rows of every tree in `now`, rates since `earlier` (classes matched by name
    /// within an instance of the same key and creation; a class new since then counts
    /// from zero).
    pub fn between(earlier: &DummynetStats, now: &DummynetStats) -> ClassTable {
        let interval_ns = now.at_ns.saturating_sub(earlier.at_ns);
        let secs = (interval_ns as f64 / 1e9).max(1e-9);
        let mut trees = Vec::new();
        for s in &now.schedulers {
            if s.instances.iter().all(|i| i.classes.is_empty()) {
                continue;
            }
            let old = earlier.scheduler(s.sched);
            // by name, in the configuration's order
            let mut order: Vec<String> = Vec::new();
            let mut by_name: BTreeMap<String, Summed> = BTreeMap::new();
            for i in &s.instances {
                let old_i = old.and_then(|o| {
                    o.instances
                        .iter()
                        .find(|x| x.key == i.key && x.created_ns == i.created_ns)
                });
                for c in &i.classes {
                    let then = old_i
                        .and_then(|o| o.classes.iter().find(|x| x.name == c.name))
                        .map_or((0, 0, 0), |x| {
                            (
                                x.counters.sent_bytes,
                                x.borrowed_bytes,
                                x.counters.drops.total(),
                            )
                        });
                    let active = c.counters.sent_bytes > then.0;
                    match by_name.get_mut(&c.name) {
                        Some(sum) => {
                            add_class(&mut sum.class, c);
                            sum.before.0 += then.0;
                            sum.before.1 += then.1;
                            sum.before.2 += then.2;
                            sum.active |= active;
                        }
                        None => {
                            order.push(c.name.clone());
                            by_name.insert(
                                c.name.clone(),
                                Summed {
                                    class: c.clone(),
                                    before: then,
                                    active,
                                },
                            );
                        }
                    }
                }
            }
            let mut inner = Vec::new();
            let mut plans: BTreeMap<(u8, u64, Option<u64>, u32), PlanRow> = BTreeMap::new();
            for name in &order {
                let Summed {
                    class: c,
                    before,
                    active,
                } = &by_name[name];
                let bps = c.counters.sent_bytes.saturating_sub(before.0) as f64 * 8.0 / secs;
                let drops = c.counters.drops.total().saturating_sub(before.2);
                if !c.leaf {
                    inner.push(InnerRow {
                        name: c.name.clone(),
                        depth: c.depth,
                        rate_bps: c.rate_bps,
                        ceil_bps: c.ceil_bps,
                        bps,
                        borrowed_bps: c.borrowed_bytes.saturating_sub(before.1) as f64 * 8.0 / secs,
                        drops,
                        backlog_pkts: c.counters.backlog_pkts,
                    });
                    continue;
                }
                let plan = plans
                    .entry((c.prio, c.rate_bps, c.ceil_bps, c.weight))
                    .or_insert(PlanRow {
                        rate_bps: c.rate_bps,
                        ceil_bps: c.ceil_bps,
                        weight: c.weight,
                        prio: c.prio,
                        classes: 0,
                        active: 0,
                        bps: 0.0,
                        drops: 0,
                        backlog_pkts: 0,
                    });
                plan.classes += 1;
                plan.active += usize::from(*active);
                plan.bps += bps;
                plan.drops += drops;
                plan.backlog_pkts += c.counters.backlog_pkts;
            }
            trees.push(TreeTable {
                sched: s.sched,
                inner,
                plans: plans.into_values().collect(),
            });
        }
        ClassTable { interval_ns, trees }
    }
}

/// Adds the counters of `c` (the same class in another instance) to `into`.
fn add_class(into: &mut TreeClassStats, c: &TreeClassStats) {
    into.counters.add(&c.counters);
    into.lent_bytes += c.lent_bytes;
    into.borrowed_bytes += c.borrowed_bytes;
    into.overlimits += c.overlimits;
    into.draining &= c.draining;
}

/// A configured rate or ceil; `-` for none.
fn bw_text(bps: Option<u64>) -> String {
    match bps {
        None | Some(0) => "-".to_owned(),
        Some(b) => HumanBandwidth(b as f64).to_string(),
    }
}

impl fmt::Display for ClassTable {
    /// Per tree, the inner classes indented by depth, then the plans:
    ///
    /// ```text
    /// sched 1 classes                  rate        ceil        sent        borrowed   drops  backlog
    ///   sched 2                 200.000 Mbit/s 400.000 Mbit/s 310.2 Mbit/s 110.2 Mbit/s     0       12
    /// plans (leaf classes)     rate        ceil  prio weight  classes  active   sent      drops  backlog
    ///                       10.000 Mbit/s 300.000 Mbit/s 0 4   334     12   250.0 Mbit/s      3       40
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.trees {
            writeln!(
                f,
                "{:<24} {:>15} {:>15} {:>14} {:>14} {:>8} {:>8}",
                format!("{} classes", t.sched),
                "rate",
                "ceil",
                "sent",
                "borrowed",
                "drops",
                "backlog"
            )?;
            for r in &t.inner {
                writeln!(
                    f,
                    "{:<24} {:>15} {:>15} {:>14} {:>14} {:>8} {:>8}",
                    format!("{:w$}{}", "", r.name, w = 2 + 2 * r.depth as usize),
                    bw_text(Some(r.rate_bps)),
                    bw_text(r.ceil_bps),
                    HumanRate(r.bps).to_string(),
                    HumanRate(r.borrowed_bps).to_string(),
                    r.drops,
                    r.backlog_pkts
                )?;
            }
            writeln!(
                f,
                "{:<24} {:>15} {:>15} {:>4} {:>6} {:>8} {:>7} {:>14} {:>8} {:>8}",
                "  plans (leaf classes)",
                "rate",
                "ceil",
                "prio",
                "weight",
                "classes",
                "active",
                "sent",
                "drops",
                "backlog"
            )?;
            for p in &t.plans {
                writeln!(
                    f,
                    "{:<24} {:>15} {:>15} {:>4} {:>6} {:>8} {:>7} {:>14} {:>8} {:>8}",
                    "",
                    bw_text(Some(p.rate_bps)),
                    bw_text(p.ceil_bps),
                    p.prio,
                    p.weight,
                    p.classes,
                    p.active,
                    HumanRate(p.bps).to_string(),
                    p.drops,
                    p.backlog_pkts
                )?;
            }
        }
        Ok(())
    }
}
