//! The live per-tenant table: rates over the interval between two snapshots, and each
//! victim's latency so far.

use pspat_units::HumanRate;

use crate::scenario::Scenario;
use crate::snapshot::{us, Snapshot};
use pspat_plot::table;

/// The table of `sc`'s tenants between `prev` and `now` (snapshots of one run, `prev`
/// first): weight, weighted fair target and rate (bit/s), rate against target, kpps,
/// drops (arbiter and rules), full-mailbox refusals, and latency p50/p99 (us).
pub fn table(sc: &Scenario, prev: &Snapshot, now: &Snapshot) -> String {
    let targets = sc.targets_bps();
    let (a, b) = (&prev.tenants, &now.tenants);
    let secs = (now.at_ns - prev.at_ns).max(1) as f64 / 1e9;
    let rows: Vec<Vec<String>> = sc
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let bps = (b[i].scheduled_bytes - a[i].scheduled_bytes) as f64 * 8.0 / secs;
            let pps = (b[i].scheduled - a[i].scheduled) as f64 / secs;
            let drops = b[i].dropped_total() - a[i].dropped_total() + b[i].filtered_total()
                - a[i].filtered_total();
            let (target, share) = match &targets {
                Some(tg) => (
                    HumanRate(tg[i]).to_string(),
                    format!("{:.3}", bps / tg[i].max(1.0)),
                ),
                None => ("-".into(), "-".into()),
            };
            let (p50, p99) = match &now.latencies[i] {
                Some(h) => (us(h.value_at_quantile(0.5)), us(h.value_at_quantile(0.99))),
                None => ("-".into(), "-".into()),
            };
            vec![
                t.name.clone(),
                t.weight.to_string(),
                target,
                HumanRate(bps).to_string(),
                share,
                format!("{:.1}", pps / 1e3),
                drops.to_string(),
                (b[i].mailbox_full - a[i].mailbox_full).to_string(),
                p50,
                p99,
            ]
        })
        .collect();
    table::render(
        &[
            "TENANT",
            "WEIGHT",
            "TARGET",
            "RATE",
            "RATE/TARGET",
            "KPPS",
            "DROPS",
            "FULL",
            "P50(us)",
            "P99(us)",
        ],
        &rows,
        &[1, 3, 4, 5, 6, 7, 8, 9],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::TenantCounts;

    #[test]
    fn rates_are_over_the_interval_between_the_snapshots() {
        let sc = Scenario::builtin();
        let n = sc.tenants.len();
        let prev = Snapshot {
            at_ns: 1_000_000_000,
            tenants: vec![TenantCounts::default(); n],
            latencies: vec![None; n],
        };
        let mut now = Snapshot {
            at_ns: 1_500_000_000,
            ..prev.clone()
        };
        // gold: 62.5 MB in half a second = 1 Gbit/s; 2 drops and 1 rules' drop.
        now.tenants[0].scheduled_bytes = 62_500_000;
        now.tenants[0].scheduled = 1000;
        now.tenants[0].dropped[0] = 2;
        now.tenants[0].filtered[0] = 1;
        now.tenants[0].mailbox_full = 7;
        let t = table(&sc, &prev, &now);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 1 + n, "{t}");
        assert!(lines[0].starts_with("TENANT"), "{t}");
        let gold: Vec<&str> = lines[1].split_whitespace().collect();
        // gold, 4, target 5.710 Gbit/s, rate 1.000 Gbit/s, share, 2.0 kpps, 3 drops, 7 full
        assert_eq!(gold[0], "gold");
        assert_eq!(gold[1], "4");
        assert_eq!(&gold[2..4], ["5.710", "Gbit/s"], "{t}");
        assert_eq!(&gold[4..6], ["1.000", "Gbit/s"], "{t}");
        assert_eq!(gold[6], "0.175", "{t}");
        assert_eq!(&gold[7..10], ["2.0", "3", "7"], "{t}");
        assert_eq!(&gold[10..], ["-", "-"], "no latency samples");
        // A tenant that sent nothing: 0 bit/s, not "unlimited".
        assert!(lines[2].contains(" 0 bit/s "), "{t}");
    }
}
