//! Stability mode (PSPAT paper section 6.5): two greedy clients, weights 10:1, on links
//! from 0.5x to 2x the rate the PSPAT engine sustains (or at the rates given): the share
//! each architecture gives the heavy client at each rate.

use super::point::{run_point, Limits, PointSpec};
use super::report::{StabilityReport, StabilityResult, StabilityRow};
use super::{Arch, ArchError, Progress, Setup, StabilitySpec, GREEDY_WEIGHT, STABILITY_STEPS};

/// Runs `spec`. `progress` hears of each point before it starts.
pub fn stability(
    spec: &StabilitySpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<StabilityReport, ArchError> {
    spec.validate()?;
    let greedy = [10 * GREEDY_WEIGHT, GREEDY_WEIGHT];
    let point = |arch, rate_bps| {
        let setup = Setup {
            rate_bps,
            ..spec.setup.clone()
        };
        let p = PointSpec {
            arch,
            setup: &setup,
            greedy: greedy.to_vec(),
            victim_gap: None,
            flows: None,
        };
        run_point(&p, Limits::default()).map_err(|e| ArchError::Point {
            arch,
            clients: greedy.len(),
            source: Box::new(e),
        })
    };
    let (rates, sustained): (Vec<(u64, Option<f64>)>, Option<f64>) = if spec.rates_bps.is_empty() {
        progress(Progress::Sustained);
        let p = point(Arch::Pspat, 0)?;
        let bps = p.decisions_per_s * f64::from(spec.setup.len) * 8.0;
        (steps(bps), Some(bps))
    } else {
        (spec.rates_bps.iter().map(|&r| (r, None)).collect(), None)
    };
    let mut rows = Vec::with_capacity(rates.len());
    for (rate_bps, times_sustained) in rates {
        let mut results = Vec::with_capacity(spec.archs.len());
        for &arch in &spec.archs {
            progress(Progress::Rate { rate_bps, arch });
            results.push(StabilityResult::of(&point(arch, rate_bps)?));
        }
        rows.push(StabilityRow {
            rate_bps,
            times_sustained,
            results,
        });
    }
    let s = &spec.setup;
    Ok(StabilityReport {
        alg: s.alg.clone(),
        backend: s.backend_name.clone(),
        handoff: s.handoff,
        len: s.len,
        duration: s.duration,
        knobs: s.knobs,
        sustained_bps: sustained,
        rows,
    })
}

/// The rates of [`STABILITY_STEPS`] times `sustained_bps` (at least 1 bit/s each).
fn steps(sustained_bps: f64) -> Vec<(u64, Option<f64>)> {
    STABILITY_STEPS
        .iter()
        .map(|&x| ((sustained_bps * x).round().max(1.0) as u64, Some(x)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::spec::tests::setup;

    #[test]
    fn steps_scale_the_sustained_rate() {
        let s = steps(1_000_000.0);
        assert_eq!(s.len(), STABILITY_STEPS.len());
        assert_eq!(s[0], (500_000, Some(0.5)));
        assert_eq!(s[5], (2_000_000, Some(2.0)));
        assert!(
            steps(0.0).iter().all(|&(r, _)| r == 1),
            "never an unlimited link"
        );
    }

    #[test]
    fn given_rates_are_run_for_each_architecture() {
        let mut s = setup();
        s.len = 1500;
        let spec = StabilitySpec {
            setup: s,
            archs: vec![Arch::Pspat, Arch::Lock],
            rates_bps: vec![40_000_000],
        };
        let mut heard = Vec::new();
        let r = stability(&spec, &mut |p| heard.push(p)).unwrap();
        assert_eq!(r.sustained_bps, None);
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].rate_bps, 40_000_000);
        assert_eq!(r.rows[0].times_sustained, None);
        let archs: Vec<Arch> = r.rows[0].results.iter().map(|x| x.arch).collect();
        assert_eq!(archs, [Arch::Pspat, Arch::Lock]);
        assert_eq!(
            heard,
            [
                Progress::Rate {
                    rate_bps: 40_000_000,
                    arch: Arch::Pspat
                },
                Progress::Rate {
                    rate_bps: 40_000_000,
                    arch: Arch::Lock
                }
            ]
        );
        for x in &r.rows[0].results {
            // The link, not the clients, sets the pace (20 ms is about 70 packets: the
            // snapshots' skew of a few packets is a large fraction of them).
            assert!(x.released_bps <= 40_000_000.0 * 2.0, "{x:?}");
            assert!(x.share > 0.0, "{x:?}");
        }
    }
}
