//! Throughput mode's plot: two panels, decisions/s against clients and the victim's p99
//! latency against clients, one line per architecture. The x axis is a power-of-two axis
//! of the client count, the y axes are logarithmic (the two architectures' latencies
//! differ by orders of magnitude).

use std::path::Path;

use pspat_plot::{Colour, Figure, Legend, LineChart, PlotError, Scale, Series};

use super::report::{Point, ThroughputReport};
use super::Arch;

impl ThroughputReport {
    /// Writes the plot to `path` (SVG).
    pub fn plot(&self, path: &Path) -> Result<(), PlotError> {
        // The architectures in the order they ran.
        let mut archs: Vec<Arch> = Vec::new();
        for p in &self.points {
            if !archs.contains(&p.arch) {
                archs.push(p.arch);
            }
        }
        let series = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<Series> {
            archs
                .iter()
                .map(|&arch| {
                    let pts = self
                        .points
                        .iter()
                        .filter(|p| p.arch == arch)
                        .filter_map(|p| f(p).map(|y| (p.clients as f64, y)))
                        .collect();
                    let colour = match arch {
                        Arch::Pspat => Colour::BLUE,
                        Arch::Lock => Colour::RED,
                    };
                    Series::new(arch.name(), pts).with_colour(colour)
                })
                .collect()
        };
        let rate = series(&|p| Some(p.decisions_per_s / 1e6));
        let p99 = series(&|p| p.victim.as_ref().map(|v| v.p99_ns as f64 / 1000.0));
        // The flows only when spread: one per client is the plot's usual case.
        let flows = self.flows.map_or(String::new(), |n| format!(", {n} flows"));
        let rate_title = format!(
            "{}: scheduler decisions per second ({} B{flows}, {} backend)",
            self.alg, self.len, self.backend
        );
        let p99_title = match (self.victim_gap, self.victim_weight) {
            (Some(gap), Some(weight)) => format!(
                "victim p99 latency (1 pkt / {} us, weight {weight}x)",
                gap.as_micros()
            ),
            _ => "victim p99 latency (no victim)".to_owned(),
        };
        let panel = LineChart {
            x_label: "client threads",
            x_scale: Scale::Log2,
            y_scale: Scale::Log,
            markers: true,
            legend: Legend::MiddleRight,
            ..LineChart::default()
        };
        Figure::new((800, 900))
            .panel(
                LineChart {
                    title: &rate_title,
                    y_label: "Mdecisions/s",
                    ..panel.clone()
                },
                &rate,
            )
            .panel(
                LineChart {
                    title: &p99_title,
                    y_label: "p99 latency, us",
                    ..panel
                },
                &p99,
            )
            .write(path)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pspat_engine::Handoff;

    use super::*;
    use crate::arch::report::tests::point;
    use crate::arch::report::Ratio;

    #[test]
    fn the_plot_names_both_architectures_and_both_panels() {
        let r = ThroughputReport {
            alg: "drr".into(),
            backend: "null".into(),
            handoff: Handoff::Arbiter,
            rate_bps: 0,
            len: 60,
            flows: None,
            duration: Duration::from_secs(1),
            knobs: crate::arch::spec::tests::setup().knobs,
            victim_gap: Some(Duration::from_micros(50)),
            victim_weight: Some(100),
            points: [1, 2, 4]
                .iter()
                .flat_map(|&n| [point(Arch::Pspat, n, 2e6), point(Arch::Lock, n, 1e6)])
                .collect(),
            ratios: vec![Ratio {
                clients: 1,
                pspat_over_lock: 2.0,
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("arch.svg");
        r.plot(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "pspat",
            "lock",
            "drr: scheduler decisions per second (60 B, null backend)",
            "victim p99 latency (1 pkt / 50 us, weight 100x)",
            "client threads",
        ] {
            assert!(svg.contains(text), "{text} not in the plot");
        }
        // A directory that cannot be made: the error names the file.
        std::fs::write(dir.path().join("file"), "").unwrap();
        let e = r.plot(&dir.path().join("file/x.svg")).unwrap_err();
        assert!(e.to_string().contains("x.svg"), "{e}");
        // Spread over more flows than clients: the title says how many.
        let r = ThroughputReport {
            flows: Some(4096),
            ..r
        };
        r.plot(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let title = "drr: scheduler decisions per second (60 B, 4096 flows, null backend)";
        assert!(svg.contains(title), "{title} not in the plot");
    }
}
