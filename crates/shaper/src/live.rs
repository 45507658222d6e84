//! The live view `pspat shape` prints every `--stats` interval: a function of two
//! snapshots.

use crate::counters::EngineTotals;
use crate::report::{drop_line, rate};
use crate::shaper::Snapshot;
use pspat_engine::ClassTable;

/// Totals and rates from `prev` to `now` (receive, transmit, queued), the drop counters
/// that are not zero, the trees' classes per inner class and per plan (`ClassTable`), then
/// the per-instance, per-class and per-queue table of `now` and their rates since `prev`
/// (when both have it).
pub fn live_view(prev: &Snapshot, now: &Snapshot) -> String {
    let secs = now.engine.at_ns.saturating_sub(prev.engine.at_ns) as f64 / 1e9;
    let (e0, e1) = (
        EngineTotals::of(&prev.engine),
        EngineTotals::of(&now.engine),
    );
    let mut s = format!(
        "rx {:.0} pkt/s {:.1} Mbit/s   tx {:.0} pkt/s {:.1} Mbit/s   queued {}\n",
        rate(prev.rx.frames, now.rx.frames, secs),
        rate(prev.rx.bytes, now.rx.bytes, secs) * 8e-6,
        rate(e0.sent, e1.sent, secs),
        rate(e0.sent_bytes, e1.sent_bytes, secs) * 8e-6,
        now.engine.sched_backlog,
    );
    s.push_str(&drop_line(&e1, &now.rx));
    for l in &now.links {
        if let Some(d) = l.down_for {
            s.push_str(&format!(
                "\n{} {} DOWN for {:.1}s ({}); waiting for it",
                l.role,
                l.name,
                d.as_secs_f64(),
                l.last_error
            ));
        }
    }
    if let (Some(d), Some(old)) = (&now.dummynet, &prev.dummynet) {
        let trees = ClassTable::between(old, d);
        if !trees.trees.is_empty() {
            s.push('\n');
            s.push_str(&trees.to_string());
        }
    }
    if let Some(d) = &now.dummynet {
        s.push('\n');
        s.push_str(&d.to_string());
        if let Some(old) = &prev.dummynet {
            s.push_str(&d.rates(old).to_string());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{ReverseTotals, RxTotals};
    use pspat_engine::stats::ClientSnapshot;
    use pspat_engine::EngineSnapshot;

    fn snap(at_s: u64, rx_frames: u64, sent: u64, backlog: u64, mailbox_full: u64) -> Snapshot {
        Snapshot {
            engine: EngineSnapshot {
                at_ns: at_s * 1_000_000_000,
                clients: vec![ClientSnapshot {
                    sent,
                    sent_bytes: sent * 1000,
                    mailbox_full,
                    ..ClientSnapshot::default()
                }],
                scans: 0,
                idle_sleeps: 0,
                link_sleeps: 0,
                arbiter_slept_ns: 0,
                sched_backlog: backlog,
                tx_stalls: 0,
                arbiter_wakeups: 0,
                deactivations: 0,
                deactivation_fences: 0,
                stalls: Default::default(),
            },
            rx: RxTotals {
                frames: rx_frames,
                bytes: rx_frames * 1000,
                ..RxTotals::default()
            },
            reverse: ReverseTotals::default(),
            dummynet: None,
            links: Vec::new(),
        }
    }

    #[test]
    fn rates_are_over_the_interval_and_drops_since_the_start() {
        let (a, b) = (snap(1, 1000, 500, 3, 2), snap(3, 5000, 2500, 7, 2));
        assert_eq!(
            live_view(&a, &b),
            "rx 2000 pkt/s 16.0 Mbit/s   tx 1000 pkt/s 8.0 Mbit/s   queued 7\n\
             drops: mailbox_full 2"
        );
        // A link down says so, with how long and why.
        let mut down = b.clone();
        down.links = vec![crate::LinkTotals {
            role: "input",
            name: "s1".into(),
            downs: 1,
            down_for: Some(std::time::Duration::from_millis(1500)),
            last_error: "Network is down".into(),
            ..Default::default()
        }];
        assert!(
            live_view(&a, &down)
                .ends_with("\ninput s1 DOWN for 1.5s (Network is down); waiting for it"),
            "{}",
            live_view(&a, &down)
        );
        // The same instant twice: no rates rather than a division by zero.
        assert_eq!(
            live_view(&b, &b),
            "rx 0 pkt/s 0.0 Mbit/s   tx 0 pkt/s 0.0 Mbit/s   queued 7\n\
             drops: mailbox_full 2"
        );
        let c = snap(4, 5000, 2500, 0, 0);
        assert!(live_view(&b, &c).ends_with("drops: none"));
    }
}
