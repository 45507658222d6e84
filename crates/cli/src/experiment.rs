//! `pspat experiment row|plot`: the analysis half of the shaper experiment kit
//! (`experiments/shaper/run.sh`).
//!
//! `row` reads one run's `udpgen` and `udpsink` reports and appends one line to the
//! results CSV: delivered packets per second (all clients, over the sink's window), the
//! largest relative error of a greedy sender's share against its weight's share, the
//! victim's latency percentiles and loss. `plot` turns the CSV into SVG plots, one set of
//! three per experiment set (`set` column): delivered pps, max share error and victim p99
//! latency, each against the number of senders, one line per mode.
//!
//! Share error: greedy senders 0..M-1 with weights w_i delivered n_i packets (all of the
//! same length, so packets are proportional to bytes). The share is s_i = n_i / sum(n),
//! the target t_i = w_i / sum(w), and the error |s_i / t_i - 1|; the row has the largest
//! over i. The victim is left out of both sums: it asks for less than its share, and a
//! weighted fair scheduler hands what it leaves to the others in proportion to their
//! weights. With one sender the error is 0 by definition.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use crate::udpgen::GenReport;
use crate::udpsink::SinkReport;
use crate::Usage;

#[derive(Subcommand, Debug)]
pub enum ExperimentCmd {
    /// Appends one run's figures (from udpgen's and udpsink's JSON) to a results CSV.
    Row(RowArgs),
    /// Plots a results CSV: delivered pps, max share error, victim p99 against senders.
    Plot(PlotArgs),
}

#[derive(Args, Debug)]
pub struct RowArgs {
    /// Name of the experiment set (e.g. `shares`, `cpu`): one set of plots each.
    #[arg(long, value_name = "NAME")]
    set: String,
    /// The mode measured (e.g. pspat, htb, none).
    #[arg(long, value_name = "NAME")]
    mode: String,
    /// Configured link rate, bit/s (0: none).
    #[arg(long, value_name = "BPS", default_value_t = 0)]
    link_bps: u64,
    /// Weights of senders 0, 1, ...; a shorter list repeats (1,2,3,4: sender i has
    /// weight 1 + i mod 4).
    #[arg(long, value_name = "W,...", value_delimiter = ',', required = true)]
    weights: Vec<u32>,
    /// udpgen's JSON report.
    #[arg(long, value_name = "FILE")]
    gen: PathBuf,
    /// udpsink's JSON report.
    #[arg(long, value_name = "FILE")]
    sink: PathBuf,
    /// The results CSV to append to (created with its header line).
    #[arg(long, value_name = "FILE")]
    csv: PathBuf,
    /// Datagrams the receiving host dropped because the sink's socket buffer was full
    /// (RcvbufErrors), measured by the caller; written as is (empty: unknown).
    #[arg(long, value_name = "N")]
    sink_drops: Option<u64>,
    /// Also append each greedy sender's share against its target to this CSV.
    #[arg(long, value_name = "FILE")]
    shares_csv: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// The results CSV written by `pspat experiment row`.
    csv: PathBuf,
    /// Directory for the SVG files (created if missing).
    outdir: PathBuf,
}

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

const SHARE_COLUMNS: [&str; 9] = [
    "set", "mode", "link_bps", "senders", "client", "weight", "packets", "target", "share",
];

pub fn main(cmd: ExperimentCmd) -> Result<()> {
    match cmd {
        ExperimentCmd::Row(a) => row(&a),
        ExperimentCmd::Plot(a) => plot(&a),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// One greedy sender's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub client: u32,
    pub weight: u32,
    pub packets: u64,
    pub target: f64,
    pub share: f64,
}

/// Shares of the greedy senders `0..m` (weights repeating), from the sink's counts.
pub fn shares(m: u32, weights: &[u32], sink: &SinkReport) -> Vec<Share> {
    let w = |i: u32| weights[i as usize % weights.len()];
    let packets = |i: u32| {
        sink.clients
            .iter()
            .find(|c| c.client == i)
            .map_or(0, |c| c.packets)
    };
    let total_w: u64 = (0..m).map(|i| u64::from(w(i))).sum();
    let total_n: u64 = (0..m).map(packets).sum();
    (0..m)
        .map(|i| Share {
            client: i,
            weight: w(i),
            packets: packets(i),
            target: f64::from(w(i)) / total_w as f64,
            share: if total_n > 0 {
                packets(i) as f64 / total_n as f64
            } else {
                0.0
            },
        })
        .collect()
}

/// Largest |share/target - 1| and Jain's index of share/target.
pub fn share_error(s: &[Share]) -> (f64, f64) {
    if s.iter().all(|x| x.packets == 0) {
        return (f64::NAN, f64::NAN);
    }
    let ratios: Vec<f64> = s.iter().map(|x| x.share / x.target).collect();
    let max_err = ratios.iter().map(|r| (r - 1.0).abs()).fold(0.0, f64::max);
    let sum: f64 = ratios.iter().sum();
    let sq: f64 = ratios.iter().map(|r| r * r).sum();
    (max_err, sum * sum / (ratios.len() as f64 * sq))
}

fn append(path: &Path, header: &[&str], line: &str) -> Result<()> {
    let new = !path.exists() || std::fs::metadata(path).map(|m| m.len() == 0)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    if new {
        writeln!(f, "{}", header.join(","))?;
    }
    writeln!(f, "{line}").with_context(|| format!("writing {}", path.display()))
}

fn row(a: &RowArgs) -> Result<()> {
    if a.weights.contains(&0) {
        return Err(Usage("--weights: a weight of 0 has no share".into()).into());
    }
    for s in [&a.set, &a.mode] {
        if s.is_empty() || s.contains([',', '"', '\n']) {
            return Err(Usage(format!("--set/--mode '{s}': give a plain word")).into());
        }
    }
    let gen: GenReport = read_json(&a.gen)?;
    let sink: SinkReport = read_json(&a.sink)?;
    let m = gen.senders;
    let len = gen.flows.first().map_or(0, |f| f.len);
    let shares = shares(m, &a.weights, &sink);
    let (max_err, jain) = share_error(&shares);
    let victim = gen.flows.iter().find(|f| f.victim).map(|f| f.client);
    let vrep = victim.and_then(|v| sink.clients.iter().find(|c| c.client == v));
    let lost: u64 = sink.clients.iter().map(|c| c.lost).sum();
    let frac = |lost: u64, got: u64| {
        if lost + got > 0 {
            lost as f64 / (lost + got) as f64
        } else {
            f64::NAN
        }
    };
    let us = |ns: u64| ns as f64 / 1000.0;
    let wire_bytes: u64 = sink.clients.iter().map(|c| c.wire_bytes).sum();
    let mbps = if sink.window_s > 0.0 {
        wire_bytes as f64 * 8.0 / sink.window_s / 1e6
    } else {
        0.0
    };
    let (vp, v50, v99, v999, vmax, vloss) = match (victim, vrep) {
        (Some(_), Some(v)) => (
            v.packets.to_string(),
            format!("{:.1}", us(v.latency.p50_ns)),
            format!("{:.1}", us(v.latency.p99_ns)),
            format!("{:.1}", us(v.latency.p999_ns)),
            format!("{:.1}", us(v.latency.max_ns)),
            format!("{:.5}", frac(v.lost, v.packets)),
        ),
        // A victim that sent and got nothing through: empty latency cells, all lost.
        (Some(_), None) => (
            "0".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            "1".into(),
        ),
        (None, _) => Default::default(),
    };
    let line = [
        a.set.clone(),
        a.mode.clone(),
        a.link_bps.to_string(),
        m.to_string(),
        len.to_string(),
        format!("{:.0}", gen.total_pps),
        format!("{:.0}", sink.total_pps),
        format!("{mbps:.2}"),
        format!("{:.5}", frac(lost, sink.total_packets)),
        format!("{max_err:.5}"),
        format!("{jain:.5}"),
        vp,
        v50,
        v99,
        v999,
        vmax,
        vloss,
        format!("{:.3}", sink.window_s),
        a.sink_drops.map_or(String::new(), |d| d.to_string()),
    ]
    .join(",");
    append(&a.csv, &COLUMNS, &line)?;
    if let Some(path) = &a.shares_csv {
        for s in &shares {
            let l = format!(
                "{},{},{},{m},{},{},{},{:.6},{:.6}",
                a.set, a.mode, a.link_bps, s.client, s.weight, s.packets, s.target, s.share
            );
            append(path, &SHARE_COLUMNS, &l)?;
        }
    }
    crate::emit(&format!(
        "{} {} M={m}: delivered {:.0} pps ({mbps:.1} Mbit/s), max share error {:.2}%, \
         victim p99 {} us",
        a.set,
        a.mode,
        sink.total_pps,
        max_err * 100.0,
        vrep.map_or("-".into(), |v| format!("{:.1}", us(v.latency.p99_ns)))
    ))
}

/// One parsed line of the results CSV (the columns the plots use).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub set: String,
    pub mode: String,
    pub senders: u32,
    pub delivered_pps: f64,
    pub max_share_err: f64,
    pub victim_p99_us: f64,
}

/// Parses a results CSV: the header must name at least the columns the plots use; an
/// empty cell reads as NaN (no value; not plotted).
pub fn parse_csv(text: &str) -> Result<Vec<Point>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        bail!("empty results file");
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .with_context(|| format!("no '{name}' column in the header line '{header}'"))
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
            bail!(
                "line {}: {} fields, the header has {}",
                n + 1,
                f.len(),
                cols.len()
            );
        }
        let num = |i: usize| -> Result<f64> {
            if f[i].is_empty() {
                return Ok(f64::NAN);
            }
            f[i].parse::<f64>()
                .with_context(|| format!("line {}: {} '{}' is not a number", n + 1, cols[i], f[i]))
        };
        out.push(Point {
            set: f[idx[0]].to_owned(),
            mode: f[idx[1]].to_owned(),
            senders: f[idx[2]]
                .parse()
                .with_context(|| format!("line {}: senders '{}'", n + 1, f[idx[2]]))?,
            delivered_pps: num(idx[3])?,
            max_share_err: num(idx[4])?,
            victim_p99_us: num(idx[5])?,
        });
    }
    Ok(out)
}

/// One line of a plot: a mode's (senders, mean value) points in order of senders.
type Series = Vec<(String, Vec<(u32, f64)>)>;

/// Per mode (in order of first appearance), the mean of `f` over the points of each
/// sender count; NaN values are left out.
fn series(points: &[&Point], f: impl Fn(&Point) -> f64) -> Series {
    let mut modes: Vec<String> = Vec::new();
    let mut acc: BTreeMap<(usize, u32), (f64, u32)> = BTreeMap::new();
    for p in points {
        let i = match modes.iter().position(|m| *m == p.mode) {
            Some(i) => i,
            None => {
                modes.push(p.mode.clone());
                modes.len() - 1
            }
        };
        let v = f(p);
        if v.is_finite() {
            let e = acc.entry((i, p.senders)).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }
    modes
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let pts = acc
                .range((i, 0)..=(i, u32::MAX))
                .map(|(&(_, s), &(sum, n))| (s, sum / f64::from(n)))
                .collect();
            (m, pts)
        })
        .collect()
}

fn plot(a: &PlotArgs) -> Result<()> {
    let text =
        std::fs::read_to_string(&a.csv).with_context(|| format!("reading {}", a.csv.display()))?;
    let points = parse_csv(&text).with_context(|| format!("in {}", a.csv.display()))?;
    if points.is_empty() {
        bail!("{}: no result lines to plot", a.csv.display());
    }
    std::fs::create_dir_all(&a.outdir)
        .with_context(|| format!("creating {}", a.outdir.display()))?;
    let mut sets: Vec<&str> = Vec::new();
    for p in &points {
        if !sets.contains(&p.set.as_str()) {
            sets.push(&p.set);
        }
    }
    for set in sets {
        let pts: Vec<&Point> = points.iter().filter(|p| p.set == set).collect();
        let figures: [(&str, String, &str, Series, bool); 3] = [
            (
                "pps",
                format!("{set}: delivered packets per second"),
                "kpps",
                series(&pts, |p| p.delivered_pps / 1e3),
                false,
            ),
            (
                "share-error",
                format!("{set}: largest sender share error against its weight"),
                "max |share/target - 1|, %",
                series(&pts, |p| p.max_share_err * 100.0),
                true,
            ),
            (
                "victim-p99",
                format!("{set}: victim one-way latency, p99"),
                "p99 latency, us",
                series(&pts, |p| p.victim_p99_us),
                true,
            ),
        ];
        for (name, caption, ylabel, data, log) in figures {
            let path = a.outdir.join(format!("{set}-{name}.svg"));
            draw(&path, &caption, ylabel, &data, log)
                .with_context(|| format!("plotting {}", path.display()))?;
            crate::emit(&path.display().to_string())?;
        }
    }
    Ok(())
}

/// One SVG: x = senders (a power-of-two axis), one line per mode in the kit's colours;
/// `log`: logarithmic y axis (values at or below 0 are drawn at its floor).
fn draw(path: &Path, caption: &str, ylabel: &str, data: &Series, log: bool) -> Result<()> {
    use pspat_plot::{Colour, Figure, Legend, LineChart, NonPositive, Scale};
    let lines: Vec<pspat_plot::Series> = data
        .iter()
        .map(|(mode, pts)| {
            let xy = pts.iter().map(|&(s, y)| (f64::from(s), y)).collect();
            let line = pspat_plot::Series::new(mode.as_str(), xy);
            // The kit's modes keep their colours whichever ran.
            match mode.as_str() {
                "pspat" => line.with_colour(Colour::BLUE),
                "htb" => line.with_colour(Colour::RED),
                "none" => line.with_colour(Colour::GREEN),
                _ => line,
            }
        })
        .collect();
    let chart = LineChart {
        title: caption,
        x_label: "greedy senders (M)",
        y_label: ylabel,
        x_scale: Scale::Log2,
        y_scale: if log { Scale::Log } else { Scale::Linear },
        non_positive: NonPositive::AtFloor,
        markers: true,
        legend: Legend::AboveData,
        ..LineChart::default()
    };
    Figure::new((760, 460)).panel(chart, &lines).write(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpsink::{ClientReport, Latency};

    fn sink(counts: &[(u32, u64)]) -> SinkReport {
        SinkReport {
            bind: "x".into(),
            busy_poll: true,
            warmup_s: 0.0,
            measure_s: 0.0,
            window_s: 1.0,
            received_total: 0,
            warmup_packets: 0,
            garbled: 0,
            other_packets: 0,
            recv_buffer: 0,
            clients: counts
                .iter()
                .map(|&(client, packets)| ClientReport {
                    client,
                    packets,
                    wire_bytes: packets * 100,
                    pps: packets as f64,
                    lost: 0,
                    reordered: 0,
                    latency: Latency::default(),
                    clock_skew: 0,
                })
                .collect(),
            total_packets: counts.iter().map(|c| c.1).sum(),
            total_pps: 0.0,
        }
    }

    #[test]
    fn exact_weighted_shares_have_no_error() {
        // Weights 1,2,3,4 repeating over 6 senders: 1,2,3,4,1,2 (sum 13). The victim
        // (client 6) is left out of the shares.
        let s = sink(&[
            (0, 100),
            (1, 200),
            (2, 300),
            (3, 400),
            (4, 100),
            (5, 200),
            (6, 77),
        ]);
        let sh = shares(6, &[1, 2, 3, 4], &s);
        assert_eq!(
            sh.iter().map(|x| x.weight).collect::<Vec<_>>(),
            [1, 2, 3, 4, 1, 2]
        );
        assert!((sh[3].target - 4.0 / 13.0).abs() < 1e-12);
        let (err, jain) = share_error(&sh);
        assert!(err < 1e-12, "{err}");
        assert!((jain - 1.0).abs() < 1e-12);
    }

    #[test]
    fn equal_counts_under_unequal_weights_are_wrong_by_the_weight_ratio() {
        // Weights 1 and 3 want 25% / 75%; 50/50 is +100% for the first, -33% for the
        // second.
        let sh = shares(2, &[1, 3], &sink(&[(0, 500), (1, 500)]));
        let (err, jain) = share_error(&sh);
        assert!((err - 1.0).abs() < 1e-12, "{err}");
        // Ratios 2 and 2/3: (8/3)^2 / (2 * (4 + 4/9)) = 0.8.
        assert!((jain - 0.8).abs() < 1e-12, "{jain}");
        // A sender that got nothing is -100%; nothing at all is no value.
        let (err, _) = share_error(&shares(2, &[1, 1], &sink(&[(0, 10)])));
        assert!((err - 1.0).abs() < 1e-12);
        assert!(share_error(&shares(2, &[1, 1], &sink(&[]))).0.is_nan());
    }

    #[test]
    fn csv_round_trip_and_errors() {
        let head = COLUMNS.join(",");
        let line = "shares,htb,100000000,8,1000,400000,12000,96.00,0.9,0.031,0.99,3000,40.5,\
                    80.25,90,100,0,3.000,17";
        let p = parse_csv(&format!("{head}\n{line}\n")).unwrap();
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
        assert!(parse_csv(&format!("{head}\n{empty_cell}\n")).unwrap()[0]
            .victim_p99_us
            .is_nan());
        let e = parse_csv("set,mode\nx,y\n").unwrap_err().to_string();
        assert!(e.contains("'senders'"), "{e}");
        let e = parse_csv(&format!("{head}\nshares,htb\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("2 fields"), "{e}");
        assert!(parse_csv("").is_err());
    }

    #[test]
    fn series_average_repeats_and_keep_mode_order() {
        let mk = |mode: &str, senders, v| Point {
            set: "s".into(),
            mode: mode.into(),
            senders,
            delivered_pps: v,
            max_share_err: f64::NAN,
            victim_p99_us: 0.0,
        };
        let pts = [
            mk("b", 8, 1.0),
            mk("a", 2, 5.0),
            mk("b", 8, 3.0),
            mk("b", 2, 4.0),
        ];
        let refs: Vec<&Point> = pts.iter().collect();
        let s = series(&refs, |p| p.delivered_pps);
        assert_eq!(
            s,
            vec![
                ("b".to_owned(), vec![(2, 4.0), (8, 2.0)]),
                ("a".to_owned(), vec![(2, 5.0)])
            ]
        );
        // NaN values are not plotted.
        assert!(series(&refs, |p| p.max_share_err)
            .iter()
            .all(|(_, v)| v.is_empty()));
    }
}
