//! The results CSV and the shares CSV: the line format of a [`Row`], appending to a file
//! (with its header line when the file is new), and the parser the plots read it back with.
//!
//! Cells are plain: set and mode are words without commas or quotes ([`Row::new`] checks),
//! numbers are written with fixed decimals, a value there is none of is an empty cell (the
//! victim's latency when nothing of it got through, the CPU time when it was not measured,
//! the added latency without a baseline) or `NaN` (a share error when nothing got through
//! at all).

use std::io::Write;
use std::path::Path;

use crate::error::{AnalysisError, CsvError};
use crate::row::{Row, VictimFigures};

/// Columns of the results CSV, in order.
pub const COLUMNS: [&str; 25] = [
    "set",
    "mode",
    "link_bps",
    "senders",
    "len",
    "offered_pps",
    "delivered_pps",
    "delivered_mbps",
    "loss_frac",
    "max_share_err",
    "jain",
    "max_share_err_weight",
    "victim_pkts",
    "victim_p50_us",
    "victim_p99_us",
    "victim_p999_us",
    "victim_max_us",
    "victim_loss_frac",
    "victim_added_p50_us",
    "victim_added_p99_us",
    "cpu_ns_per_pkt",
    "shaper_ns_per_pkt",
    "softirq_ns_per_pkt",
    "window_s",
    "sink_drops",
];

/// Columns of the shares CSV (one line per greedy sender), in order.
pub const SHARE_COLUMNS: [&str; 12] = [
    "set",
    "mode",
    "link_bps",
    "senders",
    "client",
    "weight",
    "offered_pps",
    "delivered_pps",
    "packets",
    "target",
    "target_weight",
    "share",
];

impl Row {
    /// The row as a line of the results CSV (no newline), in the order of [`COLUMNS`].
    pub fn csv_line(&self) -> String {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        let victim: [String; 6] = match &self.victim {
            VictimFigures::Received {
                packets,
                latency: l,
                loss_frac,
            } => [
                packets.to_string(),
                us(l.p50_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns),
                format!("{loss_frac:.5}"),
            ],
            // A victim that sent and got nothing through: empty latency cells, all lost.
            VictimFigures::NothingReceived => ["0", "", "", "", "", "1"].map(String::from),
            VictimFigures::NotInRun => Default::default(),
        };
        let added: [String; 2] = match self.added_latency {
            Some(a) => [a.p50_ns, a.p99_ns].map(|ns| format!("{:.1}", ns as f64 / 1000.0)),
            None => Default::default(),
        };
        let ns = |v: f64| format!("{v:.0}");
        let cpu: [String; 3] = match self.cpu_per_packet() {
            Some(c) => [
                ns(c.total_ns),
                c.shaper_ns.map_or(String::new(), ns),
                ns(c.softirq_ns),
            ],
            None => Default::default(),
        };
        let s = &self.spec;
        [
            s.set.clone(),
            s.mode.clone(),
            s.link_bps.to_string(),
            self.senders.to_string(),
            self.len.to_string(),
            format!("{:.0}", self.offered_pps),
            format!("{:.0}", self.delivered_pps),
            format!("{:.2}", self.delivered_mbps),
            format!("{:.5}", self.loss_frac),
            format!("{:.5}", self.fairness.max_share_err),
            format!("{:.5}", self.fairness.jain),
            format!("{:.5}", self.fairness.max_share_err_weight),
        ]
        .into_iter()
        .chain(victim)
        .chain(added)
        .chain(cpu)
        .chain([
            format!("{:.3}", self.window_s),
            s.sink_drops.map_or(String::new(), |d| d.to_string()),
        ])
        .collect::<Vec<_>>()
        .join(",")
    }

    /// The lines of the shares CSV, one per greedy sender, in the order of
    /// [`SHARE_COLUMNS`].
    pub fn share_lines(&self) -> Vec<String> {
        let s = &self.spec;
        self.shares
            .iter()
            .map(|x| {
                format!(
                    "{},{},{},{},{},{},{:.1},{:.1},{},{:.6},{:.6},{:.6}",
                    s.set,
                    s.mode,
                    s.link_bps,
                    self.senders,
                    x.client,
                    x.weight,
                    x.offered_pps,
                    x.delivered_pps,
                    x.packets,
                    x.target,
                    x.target_weight,
                    x.share
                )
            })
            .collect()
    }
}

/// Appends `row` to the results CSV at `path` (created, with its header line, if missing
/// or empty).
pub fn append_row(path: &Path, row: &Row) -> Result<(), AnalysisError> {
    append(path, &COLUMNS, &[row.csv_line()])
}

/// Appends `row`'s shares to the shares CSV at `path` (created, with its header line, if
/// missing or empty).
pub fn append_shares(path: &Path, row: &Row) -> Result<(), AnalysisError> {
    append(path, &SHARE_COLUMNS, &row.share_lines())
}

/// Appends `lines` to the CSV at `path` (created, with `header`, if missing or empty).
pub(crate) fn append(path: &Path, header: &[&str], lines: &[String]) -> Result<(), AnalysisError> {
    let open = |source| AnalysisError::Open {
        path: path.to_owned(),
        source,
    };
    let new = match std::fs::metadata(path) {
        Ok(m) => m.len() == 0,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(open(e)),
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(open)?;
    let mut text = String::new();
    if new {
        text = header.join(",") + "\n";
    }
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    f.write_all(text.as_bytes())
        .map_err(|source| AnalysisError::Write {
            path: path.to_owned(),
            source,
        })
}

/// One parsed line of the results CSV (the columns the plots and the summary use).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The experiment set.
    pub set: String,
    /// The mode.
    pub mode: String,
    /// Greedy senders (M).
    pub senders: u32,
    /// Packets per second offered, all senders.
    pub offered_pps: f64,
    /// Packets per second delivered.
    pub delivered_pps: f64,
    /// The largest share error against the max-min fair targets (a fraction).
    pub max_share_err: f64,
    /// The victim's median latency, µs.
    pub victim_p50_us: f64,
    /// The victim's p99 latency, µs.
    pub victim_p99_us: f64,
    /// The victim's median latency above the bridge alone's, µs.
    pub victim_added_p50_us: f64,
    /// The victim's p99 latency above the bridge alone's, µs.
    pub victim_added_p99_us: f64,
    /// CPU ns per delivered packet: the shaper's threads and softirq.
    pub cpu_ns_per_pkt: f64,
    /// Of which the shaper's threads.
    pub shaper_ns_per_pkt: f64,
    /// Of which softirq, all CPUs.
    pub softirq_ns_per_pkt: f64,
    /// Datagrams the sink's socket buffer dropped.
    pub sink_drops: f64,
}

/// Columns a results CSV must have (those of the first version of the file).
const REQUIRED: [&str; 8] = [
    "set",
    "mode",
    "senders",
    "offered_pps",
    "delivered_pps",
    "max_share_err",
    "victim_p50_us",
    "victim_p99_us",
];

/// Columns added later: a file without one reads as NaN (no value) there.
const OPTIONAL: [&str; 6] = [
    "victim_added_p50_us",
    "victim_added_p99_us",
    "cpu_ns_per_pkt",
    "shaper_ns_per_pkt",
    "softirq_ns_per_pkt",
    "sink_drops",
];

/// Parses a results CSV: the header must name at least set, mode, senders, offered_pps,
/// delivered_pps, max_share_err, victim_p50_us and victim_p99_us (columns of the file's
/// first version); an empty cell, or a missing later column, reads as NaN (no value; not
/// plotted).
pub fn parse_results(text: &str) -> Result<Vec<Point>, CsvError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(CsvError::Empty);
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let pos = |column: &str| cols.iter().position(|c| *c == column);
    let mut req = [0; REQUIRED.len()];
    for (i, column) in REQUIRED.into_iter().enumerate() {
        req[i] = pos(column).ok_or_else(|| CsvError::NoColumn {
            column,
            header: header.to_owned(),
        })?;
    }
    let opt = OPTIONAL.map(pos);
    let mut out = Vec::new();
    for (n, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != cols.len() {
            return Err(CsvError::Fields {
                line: n + 1,
                fields: f.len(),
                columns: cols.len(),
            });
        }
        let bad = |i: usize| CsvError::NotANumber {
            line: n + 1,
            column: cols[i].to_owned(),
            value: f[i].to_owned(),
        };
        let num = |i: usize| {
            if f[i].is_empty() {
                return Ok(f64::NAN);
            }
            f[i].parse::<f64>().map_err(|_| bad(i))
        };
        let maybe = |i: Option<usize>| i.map_or(Ok(f64::NAN), num);
        out.push(Point {
            set: f[req[0]].to_owned(),
            mode: f[req[1]].to_owned(),
            senders: f[req[2]].parse().map_err(|_| bad(req[2]))?,
            offered_pps: num(req[3])?,
            delivered_pps: num(req[4])?,
            max_share_err: num(req[5])?,
            victim_p50_us: num(req[6])?,
            victim_p99_us: num(req[7])?,
            victim_added_p50_us: maybe(opt[0])?,
            victim_added_p99_us: maybe(opt[1])?,
            cpu_ns_per_pkt: maybe(opt[2])?,
            shaper_ns_per_pkt: maybe(opt[3])?,
            softirq_ns_per_pkt: maybe(opt[4])?,
            sink_drops: maybe(opt[5])?,
        });
    }
    Ok(out)
}

/// The sets of `points`, in order of first appearance (one table, one set of plots each).
pub fn sets(points: &[Point]) -> Vec<&str> {
    let mut sets: Vec<&str> = Vec::new();
    for p in points {
        if !sets.contains(&p.set.as_str()) {
            sets.push(&p.set);
        }
    }
    sets
}

/// Reads and parses the results CSV at `path`.
pub fn read_results(path: &Path) -> Result<Vec<Point>, AnalysisError> {
    let text = crate::json::read_text(path)?;
    parse_results(&text).map_err(|source| AnalysisError::Csv {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuUse;
    use crate::fixtures::sink;
    use crate::row::RowSpec;
    use crate::sink_report::Latency;

    #[test]
    fn csv_round_trip_and_errors() {
        let head = COLUMNS.join(",");
        let line = "shares,htb,100000000,8,1000,400000,12000,96.00,0.9,0.031,0.99,0.5,3000,40.5,\
                    80.25,90,100,0,20.5,-3.0,2600,100,2500,3.000,17";
        let p = parse_results(&format!("{head}\n{line}\n")).unwrap();
        let want = Point {
            set: "shares".into(),
            mode: "htb".into(),
            senders: 8,
            offered_pps: 400000.0,
            delivered_pps: 12000.0,
            max_share_err: 0.031,
            victim_p50_us: 40.5,
            victim_p99_us: 80.25,
            victim_added_p50_us: 20.5,
            victim_added_p99_us: -3.0,
            cpu_ns_per_pkt: 2600.0,
            shaper_ns_per_pkt: 100.0,
            softirq_ns_per_pkt: 2500.0,
            sink_drops: 17.0,
        };
        assert_eq!(p, [want]);
        let empty_cell = line.replace("80.25", "");
        assert!(
            parse_results(&format!("{head}\n{empty_cell}\n")).unwrap()[0]
                .victim_p99_us
                .is_nan()
        );
        // The first version of the file, without the later columns, still reads.
        let old = "set,mode,link_bps,senders,len,offered_pps,delivered_pps,delivered_mbps,\
                   loss_frac,max_share_err,jain,victim_pkts,victim_p50_us,victim_p99_us,\
                   victim_p999_us,victim_max_us,victim_loss_frac,window_s,sink_drops\n\
                   shares,pspat,200000000,1,1000,51000,25223,195.38,0.50544,0.00000,1.00000,\
                   3000,197.2,440.6,1333.2,2852.9,0.00000,3.000,0\n";
        let p = parse_results(old).unwrap();
        assert_eq!((p[0].delivered_pps, p[0].victim_p50_us), (25223.0, 197.2));
        assert!(p[0].cpu_ns_per_pkt.is_nan() && p[0].victim_added_p99_us.is_nan());
        let e = parse_results("set,mode\nx,y\n").unwrap_err().to_string();
        assert!(e.contains("'senders'"), "{e}");
        let e = parse_results(&format!("{head}\nshares,htb\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("2 fields"), "{e}");
        let bad = line.replace("12000", "lots");
        let e = parse_results(&format!("{head}\n{bad}\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: delivered_pps 'lots' is not a number"
        );
        let bad = line.replace("-3.0", "x");
        let e = parse_results(&format!("{head}\n{bad}\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: victim_added_p99_us 'x' is not a number"
        );
        assert_eq!(parse_results(""), Err(CsvError::Empty));
    }

    fn row(victim: bool, p99_ns: u64) -> Row {
        // Both senders offer 50/s, more than the 40/s they got between them: their targets
        // are their weights' shares.
        let gen = crate::fixtures::gen(2, victim, 1000, 100, 2.0);
        let mut s = sink(&[(0, 10), (1, 30), (2, 4)]);
        s.total_pps = 44.0;
        s.clients[2].latency = Latency {
            p50_ns: 1000,
            p99_ns,
            p999_ns: 3000,
            max_ns: 4000,
            mean_ns: 0.0,
        };
        let spec = RowSpec {
            set: "t".into(),
            mode: "none".into(),
            link_bps: 200_000_000,
            weights: vec![1, 3],
            sink_drops: Some(5),
        };
        Row::new(spec, &gen, &s).unwrap()
    }

    #[test]
    fn a_row_is_written_as_the_plots_read_it() {
        let r = row(true, 2500);
        assert_eq!(
            r.csv_line(),
            "t,none,200000000,2,1000,150,44,0.04,0.00000,0.00000,1.00000,0.00000,4,1.0,2.5,\
             3.0,4.0,0.00000,,,,,,1.000,5"
        );
        assert_eq!(
            r.share_lines(),
            [
                "t,none,200000000,2,0,1,50.0,10.0,10,0.250000,0.250000,0.250000",
                "t,none,200000000,2,1,3,50.0,30.0,30,0.750000,0.750000,0.750000"
            ]
        );
        let no_victim = row(false, 0).csv_line();
        let tail = format!(",1.00000,0.00000{},1.000,5", ",".repeat(11));
        assert!(no_victim.ends_with(&tail), "{no_victim}");
        // With the CPU measured (44 packets/s: 88 us of softirq and 44 us of the shaper
        // per second are 2000 and 1000 ns per packet) and the bridge's victim 0.5 us
        // faster at p50 and slower at p99.
        let mut base = sink(&[(2, 4)]);
        base.clients[0].latency.p50_ns = 500;
        base.clients[0].latency.p99_ns = 3000;
        let cpu = CpuUse {
            window_s: 1.0,
            softirq_cpus: 88e-6,
            shaper_cpus: Some(44e-6),
        };
        let measured = row(true, 2500).with_cpu(cpu).with_baseline(&base);
        let line = measured.csv_line();
        assert!(
            line.ends_with(",0.00000,0.5,-0.5,3000,1000,2000,1.000,5"),
            "{line}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        append_row(&path, &r).unwrap();
        append_row(&path, &row(true, 7000)).unwrap();
        append_row(&path, &measured).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        let p = read_results(&path).unwrap();
        assert_eq!(p.len(), 3);
        let mut other = p[1].clone();
        other.set = "u".into();
        assert_eq!(sets(&[p[0].clone(), other, p[2].clone()]), ["t", "u"]);
        assert_eq!((p[0].senders, p[0].delivered_pps), (2, 44.0));
        assert_eq!((p[0].victim_p99_us, p[1].victim_p99_us), (2.5, 7.0));
        assert!(p[0].cpu_ns_per_pkt.is_nan());
        assert_eq!(
            (
                p[2].cpu_ns_per_pkt,
                p[2].shaper_ns_per_pkt,
                p[2].victim_added_p99_us
            ),
            (3000.0, 1000.0, -0.5)
        );
        let shares = dir.path().join("shares.csv");
        append_shares(&shares, &r).unwrap();
        let text = std::fs::read_to_string(&shares).unwrap();
        assert!(text.starts_with(&SHARE_COLUMNS.join(",")), "{text}");
        assert_eq!(text.lines().count(), 3);
        let e = read_results(&dir.path().join("none.csv")).unwrap_err();
        assert!(e.to_string().contains("none.csv"), "{e}");
    }
}
