//! The trees of the kit's `tree` set: a pspat configuration with one tree of classes, read
//! by pspat-config, and what the kit derives from it, so that the tree is written once:
//!
//! - the leaf each sender's source port goes to, found by pspat's own classifier (so the
//!   HTB filters send each port where pspat's rules do);
//! - the same tree as Linux TC HTB ([`KitTree::htb`], a `tc -batch` file);
//! - the reference allocation of the senders' offered rates ([`KitTree::reference`]:
//!   `pspat_sched::reference::fluid::allocate_tree`, HTB's model as a fluid allocation).
//!
//! HTB's classes get pspat's rate, ceil, burst, cburst and prio, a quantum of weight x the
//! tree's MTU (the quantum pspat's DRR nodes use: HTB shares a parent's excess among
//! greedy siblings of one prio by their quanta), and each leaf a `pfifo` with its queue's
//! limit. Bursts are resolved as pspat resolves them (1 ms at the rate, at least two
//! packets of the MTU). A class without a ceil of its own gets the one that applies to it
//! (its nearest ancestor's, else the link's): HTB needs one, and pspat holds the class to
//! that one anyway. HTB needs a rate above 0, so a class without one is refused; so is
//! what HTB's generated tree would not mean the same by (several instances of the tree, a
//! link that charges frames more than their length, a leaf with several flowsets or a
//! limit in bytes).

use std::fmt::Write;

use pspat_config::classify::{Classifier, FlowKey, Verdict};
use pspat_config::{Config, Direction, QueueLimit};
use pspat_sched::reference::fluid::{allocate_tree, FluidClass};
use pspat_sched::tree::ClassSpec;

use crate::error::TreeSetError;

/// The UDP protocol number.
const UDP: u8 = 17;
/// HTB's minor class number of the kit tree's class 0 (the link's class is 1).
const FIRST_MINOR: usize = 0x10;
/// Above this many senders' ports, HTB's filters are hashed (see [`KitTree::htb`]).
const LINEAR_FILTERS: usize = 32;

/// One class of a kit tree, every value resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct KitClass {
    /// Its name in pspat (`sched 11`).
    pub name: String,
    /// Its parent's index; `None` under the link.
    pub parent: Option<usize>,
    /// Whether it has no children.
    pub leaf: bool,
    /// Guaranteed rate, bit/s (above 0).
    pub rate_bps: u64,
    /// Its own ceil, bit/s, if it has one.
    pub own_ceil_bps: Option<u64>,
    /// The ceil that applies to it: its own, else its nearest ancestor's, else the link's.
    pub ceil_bps: u64,
    /// Bytes it may send at once beyond its rate.
    pub burst: u64,
    /// Bytes it may send at once beyond its ceil (`ceil_bps`).
    pub cburst: u64,
    /// Share of its parent's excess among its siblings of the same band.
    pub weight: u32,
    /// Band among its siblings, lowest first.
    pub prio: u8,
    /// A leaf: the packet limit of its queue (`None` for an inner class, or a leaf without
    /// a flowset).
    pub limit_pkts: Option<u32>,
}

/// A configuration's one tree of classes, with the leaf of each sender's port.
#[derive(Clone, Debug, PartialEq)]
pub struct KitTree {
    /// The link's rate, bit/s.
    pub link_bps: u64,
    /// Largest packet, bytes (pspat's default bursts and HTB's quanta are counted in it).
    pub mtu: u32,
    /// The classes, parents before children, in the configuration's order.
    pub classes: Vec<KitClass>,
    /// Each sender's source port, in the order given, with the leaf its datagrams join.
    pub ports: Vec<(u16, usize)>,
    /// The classes as the reference allocation sees them, leaves offering nothing.
    fluid: Vec<FluidClass>,
}

impl KitTree {
    /// The tree of `config` (which must have exactly one), with the leaf each of `ports`
    /// goes to (a UDP datagram from that port; addresses and destination port 0).
    pub fn from_config(config: &Config, ports: &[u16]) -> Result<Self, TreeSetError> {
        let cl = Classifier::new(config)?;
        let trees: Vec<_> = cl.scheds().iter().filter(|s| s.tree.is_some()).collect();
        let [root] = trees[..] else {
            return Err(TreeSetError::NotOneTree(trees.len()));
        };
        let spec = root.tree.as_deref().expect("a tree");
        if !root.mask.is_empty() {
            return Err(TreeSetError::Unsupported(
                "the root has a mask (one tree per masked value)".into(),
            ));
        }
        if !root.framing.is_plain() {
            return Err(TreeSetError::Unsupported(
                "the link charges frames more than their length".into(),
            ));
        }
        if root.bandwidth_bps == 0 {
            return Err(TreeSetError::Unsupported("the link has no rate".into()));
        }
        let link_bps = root.bandwidth_bps;
        let has_children = spec.has_children();
        let fluid = (spec.classes.iter().zip(&has_children))
            .map(|(c, &inner)| FluidClass::of_class(c, (!inner).then_some(0.0)))
            .collect();
        let mut classes: Vec<KitClass> = Vec::with_capacity(spec.classes.len());
        for (i, c) in spec.classes.iter().enumerate() {
            if c.rate_bps == 0 {
                return Err(TreeSetError::Unsupported(format!(
                    "{} has no rate (HTB needs one above 0)",
                    c.name
                )));
            }
            let inherited = c.parent.map_or(link_bps, |p| classes[p].ceil_bps);
            let ceil_bps = c.ceil_bps.unwrap_or(inherited);
            let mut flowsets = cl.classes().iter().filter(|k| k.leaf == Some(i as u32));
            let limit_pkts = match (flowsets.next(), flowsets.next()) {
                (None, _) => None,
                (Some(_), Some(_)) => {
                    return Err(TreeSetError::Unsupported(format!(
                        "{} has several flowsets (HTB's leaf has one queue)",
                        c.name
                    )))
                }
                (Some(k), None) => match k.limit {
                    QueueLimit::Packets(n) if k.mask.is_empty() => Some(n),
                    QueueLimit::Packets(_) => {
                        return Err(TreeSetError::Unsupported(format!(
                            "{}'s flowset has a mask (HTB's leaf has one queue)",
                            c.name
                        )))
                    }
                    QueueLimit::Bytes(_) => {
                        return Err(TreeSetError::Unsupported(format!(
                            "{}'s queue limit is in bytes (the kit's pfifo counts packets)",
                            c.name
                        )))
                    }
                },
            };
            classes.push(KitClass {
                name: c.name.clone(),
                parent: c.parent,
                leaf: !has_children[i],
                rate_bps: c.rate_bps,
                own_ceil_bps: c.ceil_bps,
                ceil_bps,
                burst: ClassSpec::burst_bytes(c.rate_bps, c.burst, spec.mtu),
                cburst: ClassSpec::burst_bytes(ceil_bps, c.cburst, spec.mtu),
                weight: c.weight,
                prio: c.prio,
                limit_pkts,
            });
        }
        let mut leaf_of = Vec::with_capacity(ports.len());
        for &port in ports {
            let key = FlowKey::v4(0, 0, port, 0, UDP);
            let leaf = match cl.classify_key(&key, Direction::Out) {
                Verdict::Schedule { class, .. } => cl.classes()[class as usize].leaf,
                _ => None,
            };
            let leaf = leaf.ok_or(TreeSetError::PortNotInTree(port))? as usize;
            leaf_of.push((port, leaf));
        }
        Ok(KitTree {
            link_bps,
            mtu: spec.mtu,
            classes,
            ports: leaf_of,
            fluid,
        })
    }

    /// The classes from `leaf` up to the top, `leaf` first.
    pub fn path(&self, leaf: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(leaf), |&c| self.classes[c].parent)
    }

    /// HTB's class id of class `i` (`1:10`, hexadecimal minor numbers from 0x10).
    pub fn htb_classid(i: usize) -> String {
        format!("1:{:x}", FIRST_MINOR + i)
    }

    /// The tree as HTB on device `dev`: a `tc -batch` file (one command a line, without
    /// `tc`). The link is class 1:1 (rate and ceil the link's, its burst as a class's at
    /// that rate), classes follow from 1:10, each leaf gets a `pfifo` of its queue's limit
    /// (handle its minor number) and each sender's port a u32 filter to its leaf. With
    /// more than 32 ports the filters are hashed, as HTB is set up for many classes: a
    /// 256-bucket table (handle 2:) keyed by the low byte of the UDP source port (the
    /// word 20 bytes into an IPv4 header without options), each bucket holding its
    /// ports' filters, so that a packet meets a few filters instead of all of them.
    pub fn htb(&self, dev: &str) -> String {
        let mut out = String::new();
        let link = self.link_bps;
        let link_burst = ClassSpec::burst_bytes(link, None, self.mtu);
        let _ = writeln!(out, "qdisc add dev {dev} root handle 1: htb");
        let _ = writeln!(
            out,
            "class add dev {dev} parent 1: classid 1:1 htb rate {link}bit ceil {link}bit \
             burst {link_burst}b cburst {link_burst}b quantum {}",
            self.mtu
        );
        for (i, c) in self.classes.iter().enumerate() {
            let parent = c.parent.map_or("1:1".to_owned(), Self::htb_classid);
            let _ = writeln!(
                out,
                "class add dev {dev} parent {parent} classid {} htb rate {}bit ceil {}bit \
                 burst {}b cburst {}b prio {} quantum {}",
                Self::htb_classid(i),
                c.rate_bps,
                c.ceil_bps,
                c.burst,
                c.cburst,
                c.prio,
                u64::from(c.weight) * u64::from(self.mtu)
            );
            if let (true, Some(limit)) = (c.leaf, c.limit_pkts) {
                let _ = writeln!(
                    out,
                    "qdisc add dev {dev} parent {} handle {:x}: pfifo limit {limit}",
                    Self::htb_classid(i),
                    FIRST_MINOR + i
                );
            }
        }
        let hashed = self.ports.len() > LINEAR_FILTERS;
        if hashed {
            let _ = writeln!(
                out,
                "filter add dev {dev} parent 1: protocol ip prio 1 handle 2: u32 divisor 256"
            );
            let _ = writeln!(
                out,
                "filter add dev {dev} parent 1: protocol ip prio 1 u32 ht 800:: match ip \
                 protocol {UDP} 0xff hashkey mask 0x00ff0000 at 20 link 2:"
            );
        }
        for &(port, leaf) in &self.ports {
            let at = if hashed {
                format!("ht 2:{:x}: ", port & 0xff)
            } else {
                format!("match ip protocol {UDP} 0xff ")
            };
            let _ = writeln!(
                out,
                "filter add dev {dev} parent 1: protocol ip prio 1 u32 {at}match ip sport \
                 {port} 0xffff flowid {}",
                Self::htb_classid(leaf)
            );
        }
        out
    }

    /// The reference allocation, bit/s per class, when the senders of [`KitTree::ports`]
    /// offer `offered_bps` (in the same order): each leaf offers what its senders do
    /// together, a leaf no sender goes to nothing.
    ///
    /// # Panics
    /// If `offered_bps` is not one rate per port.
    pub fn reference(&self, offered_bps: &[f64]) -> Vec<f64> {
        self.reference_on(self.link_bps as f64, offered_bps)
    }

    /// [`KitTree::reference`] on a link of `link_bps` instead of the tree's own: what the
    /// tree owes each class of what a shaper that is itself the bottleneck delivered.
    pub fn reference_on(&self, link_bps: f64, offered_bps: &[f64]) -> Vec<f64> {
        assert_eq!(offered_bps.len(), self.ports.len(), "one rate per port");
        let mut offered = vec![0.0; self.classes.len()];
        for (&(_, leaf), &bps) in self.ports.iter().zip(offered_bps) {
            offered[leaf] += bps;
        }
        let mut classes = self.fluid.clone();
        for (c, o) in classes.iter_mut().zip(offered) {
            if c.offered.is_some() {
                c.offered = Some(o);
            }
        }
        allocate_tree(link_bps.max(0.0), &classes)
            .expect("a tree pspat-config accepted is a valid fluid tree")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{two_level, TWO_LEVEL};

    const M: f64 = 1e6;

    #[test]
    fn classes_are_resolved_and_ports_found_by_the_rules() {
        let t = two_level();
        assert_eq!((t.link_bps, t.mtu), (50_000_000, 1500));
        let names: Vec<&str> = t.classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["sched 10", "sched 20", "sched 11", "sched 12", "sched 21", "sched 22"]
        );
        let leaves: Vec<bool> = t.classes.iter().map(|c| c.leaf).collect();
        assert_eq!(leaves, [false, false, true, true, true, true]);
        // Ceils: A's own, its leaves' A's; B and its paced leaf the link's.
        let ceils: Vec<u64> = t.classes.iter().map(|c| c.ceil_bps / 1_000_000).collect();
        assert_eq!(ceils, [20, 50, 20, 20, 13, 50]);
        // Bursts: 1 ms at the rate, at least two MTUs; a cburst given is kept.
        let a1 = &t.classes[2];
        assert_eq!((a1.burst, a1.cburst, a1.weight), (3000, 3000, 1));
        assert_eq!((t.classes[1].burst, t.classes[4].cburst), (3750, 5000));
        assert_eq!(t.classes[4].limit_pkts, Some(50));
        assert_eq!(t.classes[0].limit_pkts, None);
        assert_eq!(
            t.ports,
            [(10000, 2), (10001, 3), (10002, 4), (10003, 5), (10004, 5)]
        );
        assert_eq!(t.path(4).collect::<Vec<_>>(), [4, 1]);
    }

    #[test]
    fn htb_gets_the_same_tree() {
        let b = two_level().htb("r1");
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], "qdisc add dev r1 root handle 1: htb");
        assert_eq!(
            lines[1],
            "class add dev r1 parent 1: classid 1:1 htb rate 50000000bit ceil 50000000bit \
             burst 6250b cburst 6250b quantum 1500"
        );
        assert_eq!(
            lines[2],
            "class add dev r1 parent 1:1 classid 1:10 htb rate 20000000bit ceil 20000000bit \
             burst 3000b cburst 3000b prio 0 quantum 1500"
        );
        // sched 12: weight 3, band 1, under A (1:10), its pfifo after it.
        assert_eq!(
            lines[6],
            "class add dev r1 parent 1:10 classid 1:13 htb rate 5000000bit ceil 20000000bit \
             burst 3000b cburst 3000b prio 1 quantum 4500"
        );
        assert_eq!(
            lines[7],
            "qdisc add dev r1 parent 1:13 handle 13: pfifo limit 100"
        );
        assert!(lines.contains(&"qdisc add dev r1 parent 1:14 handle 14: pfifo limit 50"));
        assert_eq!(
            lines[lines.len() - 1],
            "filter add dev r1 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff \
             match ip sport 10004 0xffff flowid 1:15"
        );
        // 1 qdisc, 7 classes, 4 pfifos, 5 filters.
        assert_eq!(lines.len(), 17);
    }

    #[test]
    fn many_ports_get_hashed_filters() {
        let mut text = String::from("pipe 1 config bw 1Gbit/s\nsched 1 config type wf2q+\n");
        for i in 0..40u32 {
            text += &format!(
                "sched {s} config type fifo parent 1 rate 1Mbit/s weight {w}\n\
                 queue {s} config sched {s} queue 10\n\
                 add {r} queue {s} udp from any {p} to any\n",
                s = 10 + i,
                w = 1 + i % 4,
                r = 100 + i,
                p = 10200 + i
            );
        }
        let c = pspat_config::parse_ipfw(&text, "many").unwrap();
        let ports: Vec<u16> = (10200..10240).collect();
        let t = KitTree::from_config(&c, &ports).unwrap();
        let b = t.htb("r1");
        let filters: Vec<&str> = b.lines().filter(|l| l.starts_with("filter")).collect();
        assert_eq!(filters.len(), 42);
        assert_eq!(
            filters[1],
            "filter add dev r1 parent 1: protocol ip prio 1 u32 ht 800:: match ip protocol 17 \
             0xff hashkey mask 0x00ff0000 at 20 link 2:"
        );
        // 10200 = 0x27d8: bucket d8; sched 10 is class 0, 1:10
        assert_eq!(
            filters[2],
            "filter add dev r1 parent 1: protocol ip prio 1 u32 ht 2:d8: match ip sport 10200 \
             0xffff flowid 1:10"
        );
        // On a link of what a shaper delivered, 2.5 Mbit/s among 40 greedy leaves: by
        // rate (1 Mbit/s each: all equal) up to that.
        let got = t.reference_on(2.5e6, &[1e9; 40]);
        assert!(
            got.iter().all(|g| (g - 2.5e6 / 40.0).abs() < 1e-6),
            "{got:?}"
        );
    }

    #[test]
    fn the_reference_shares_by_rate_ceil_and_weight() {
        let t = two_level();
        // A's leaves greedy; sched 21 greedy, held by its ceil; sched 22's two senders 3 + 2.
        let got = t.reference(&[50.0 * M, 50.0 * M, 50.0 * M, 3.0 * M, 2.0 * M]);
        // A's leaves are greedy: their guarantees (5 each), then A's excess (10) to band 0
        // first, sched 11. B: sched 21 greedy but held by its ceil at 13, sched 22's two
        // senders offer 3 + 2; the link's remaining 12 finds no taker.
        let want = [20.0, 18.0, 15.0, 5.0, 13.0, 5.0];
        for (g, w) in got.iter().zip(want) {
            assert!((g / M - w).abs() < 1e-9, "{got:?}");
        }
        // sched 12 in band 0 beside sched 11: A's excess by weight, 1:3.
        let c = pspat_config::parse_ipfw(&TWO_LEVEL.replace(" prio 1", ""), "t").unwrap();
        let t = KitTree::from_config(&c, &[10000, 10001]).unwrap();
        let got = t.reference(&[50.0 * M, 50.0 * M]);
        assert!((got[2] / M - 7.5).abs() < 1e-9 && (got[3] / M - 12.5).abs() < 1e-9);
        // No sender on B's leaves: B gets nothing.
        assert_eq!((got[1], got[4], got[5]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn trees_htb_cannot_mean_the_same_by_are_refused() {
        let parse = |t: &str| pspat_config::parse_ipfw(t, "t").unwrap();
        let e = |text: &str, ports: &[u16]| {
            KitTree::from_config(&parse(text), ports)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&TWO_LEVEL.replace(" rate 10Mbit/s\n", "\n"), &[]),
            "the tree set's HTB twin: sched 22 has no rate (HTB needs one above 0)"
        );
        assert_eq!(
            e(TWO_LEVEL, &[10000, 9]),
            "port 9 goes to no leaf of the tree"
        );
        let flat = "sched 1 config type wf2q+ bw 1Mbit/s\nqueue 1 config sched 1\n\
                    add 100 queue 1 ip from any to any\n";
        assert_eq!(
            e(flat, &[]),
            "the configuration has 0 trees of classes: the tree set takes one"
        );
        let bytes = TWO_LEVEL.replace("sched 21 queue 50", "sched 21 queue 50KBytes");
        assert!(e(&bytes, &[]).contains("in bytes"));
        let twice = format!("{TWO_LEVEL}queue 13 config sched 12\n");
        assert!(e(&twice, &[]).contains("several flowsets"));
    }
}
