//! The results CSV and the shares CSV: the line format of a [`Row`], appending to a file
//! (with its header line when the file is new), and the parser the plots read it back with.
//!
//! Cells are plain: set and mode are words without commas or quotes ([`Row::new`] checks),
//! numbers are written with fixed decimals, a value there is none of is an empty cell (the
//! victim's latency when nothing of it got through) or `NaN` (a share error when nothing
//! got through at all).

use std::io::Write;
use std::path::Path;

use crate::error::{AnalysisError, CsvError};
use crate::row::{Row, VictimFigures};

/// Columns of the results CSV, in order.
pub const COLUMNS: [&str; 19] = [
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
    "victim_pkts",
    "victim_p50_us",
    "victim_p99_us",
    "victim_p999_us",
    "victim_max_us",
    "victim_loss_frac",
    "window_s",
    "sink_drops",
];

/// Columns of the shares CSV (one line per greedy sender), in order.
pub const SHARE_COLUMNS: [&str; 9] = [
    "set", "mode", "link_bps", "senders", "client", "weight", "packets", "target", "share",
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
        ]
        .into_iter()
        .chain(victim)
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
                    "{},{},{},{},{},{},{},{:.6},{:.6}",
                    s.set,
                    s.mode,
                    s.link_bps,
                    self.senders,
                    x.client,
                    x.weight,
                    x.packets,
                    x.target,
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

fn append(path: &Path, header: &[&str], lines: &[String]) -> Result<(), AnalysisError> {
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

/// One parsed line of the results CSV (the columns the plots use).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The experiment set.
    pub set: String,
    /// The mode.
    pub mode: String,
    /// Greedy senders (M).
    pub senders: u32,
    /// Packets per second delivered.
    pub delivered_pps: f64,
    /// The largest share error (a fraction).
    pub max_share_err: f64,
    /// The victim's p99 latency, µs.
    pub victim_p99_us: f64,
}

/// Parses a results CSV: the header must name at least the columns the plots use; an
/// empty cell reads as NaN (no value; not plotted).
pub fn parse_results(text: &str) -> Result<Vec<Point>, CsvError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(CsvError::Empty);
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |column: &'static str| {
        cols.iter()
            .position(|c| *c == column)
            .ok_or_else(|| CsvError::NoColumn {
                column,
                header: header.to_owned(),
            })
    };
    let idx = [
        col("set")?,
        col("mode")?,
        col("senders")?,
        col("delivered_pps")?,
        col("max_share_err")?,
        col("victim_p99_us")?,
    ];
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
        out.push(Point {
            set: f[idx[0]].to_owned(),
            mode: f[idx[1]].to_owned(),
            senders: f[idx[2]].parse().map_err(|_| bad(idx[2]))?,
            delivered_pps: num(idx[3])?,
            max_share_err: num(idx[4])?,
            victim_p99_us: num(idx[5])?,
        });
    }
    Ok(out)
}

/// Reads and parses the results CSV at `path`.
pub fn read_results(path: &Path) -> Result<Vec<Point>, AnalysisError> {
    let text = std::fs::read_to_string(path).map_err(|source| AnalysisError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_results(&text).map_err(|source| AnalysisError::Csv {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sink;
    use crate::row::RowSpec;
    use crate::sink_report::Latency;

    #[test]
    fn csv_round_trip_and_errors() {
        let head = COLUMNS.join(",");
        let line = "shares,htb,100000000,8,1000,400000,12000,96.00,0.9,0.031,0.99,3000,40.5,\
                    80.25,90,100,0,3.000,17";
        let p = parse_results(&format!("{head}\n{line}\n")).unwrap();
        assert_eq!(
            p,
            [Point {
                set: "shares".into(),
                mode: "htb".into(),
                senders: 8,
                delivered_pps: 12000.0,
                max_share_err: 0.031,
                victim_p99_us: 80.25,
            }]
        );
        let empty_cell = line.replace("80.25", "");
        assert!(
            parse_results(&format!("{head}\n{empty_cell}\n")).unwrap()[0]
                .victim_p99_us
                .is_nan()
        );
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
        assert_eq!(parse_results(""), Err(CsvError::Empty));
    }

    fn row(victim: bool, p99_ns: u64) -> Row {
        let gen = crate::fixtures::gen(2, victim, 1000, 10, 2.0);
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
            "t,none,200000000,2,1000,15,44,0.04,0.00000,0.00000,1.00000,4,1.0,2.5,3.0,4.0,\
             0.00000,1.000,5"
        );
        assert_eq!(
            r.share_lines(),
            [
                "t,none,200000000,2,0,1,10,0.250000,0.250000",
                "t,none,200000000,2,1,3,30,0.750000,0.750000"
            ]
        );
        let no_victim = row(false, 0).csv_line();
        assert!(no_victim.ends_with(",1.00000,,,,,,,1.000,5"), "{no_victim}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        append_row(&path, &r).unwrap();
        append_row(&path, &row(true, 7000)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        let p = read_results(&path).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].senders, p[0].delivered_pps), (2, 44.0));
        assert_eq!((p[0].victim_p99_us, p[1].victim_p99_us), (2.5, 7.0));
        let shares = dir.path().join("shares.csv");
        append_shares(&shares, &r).unwrap();
        let text = std::fs::read_to_string(&shares).unwrap();
        assert!(text.starts_with(&SHARE_COLUMNS.join(",")), "{text}");
        assert_eq!(text.lines().count(), 3);
        let e = read_results(&dir.path().join("none.csv")).unwrap_err();
        assert!(e.to_string().contains("none.csv"), "{e}");
    }
}
