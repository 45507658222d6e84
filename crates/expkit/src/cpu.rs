//! CPU time per forwarded packet, from two samples of the kernel's CPU accounting taken by
//! the kit's script at the start and the end of the counting window.
//!
//! A sample is a small text file (`experiments/shaper/run.sh` writes it with shell
//! builtins, so that taking it starts no process):
//!
//! ```text
//! time_us 1764000000123456
//! clk_tck 100
//! cpu  4206817 65679 469503 2434138 10806 0 26308 16228 0 0
//! cpu0 2090315 33256 247977 1218725 2528 0 16188 7951 0 0
//! shaper 4242 (pspat) S 4200 ... (the shaper's /proc/PID/stat, pspat mode only)
//! ```
//!
//! `time_us` is the wall clock when it was taken, `clk_tck` the unit of the counters
//! (`getconf CLK_TCK`), the `cpu` lines are /proc/stat's. Two figures come from it:
//!
//! - **softirq**: /proc/stat's softirq column (the 7th number of the `cpu` line: all CPUs).
//!   /proc/softirqs is no finer: it counts how often each softirq ran, not for how long.
//!   The column holds every softirq type (network receive and transmit, but also timers,
//!   RCU, the block layer of whatever else runs), and on a kernel without
//!   CONFIG_IRQ_TIME_ACCOUNTING it is sampled at each tick: a tick that finds a CPU in
//!   softirq context (or in ksoftirqd) charges it a whole tick.
//! - **shaper**: the shaper process's utime + stime (fields 14 and 15 of /proc/PID/stat:
//!   all its threads, those that ended included). Without IRQ time accounting this also
//!   holds the softirqs that ran in its threads' context, which the softirq column counts
//!   as well: the sum counts those twice.
//!
//! Per packet: each time over the window divided by the window (CPU seconds per second),
//! divided by the sink's delivered packets per second. The script's window and the sink's
//! are aligned to within the generator's start-up, so rates, not counts, are compared.

use std::path::Path;

use crate::error::{AnalysisError, CpuSampleError};

/// One sample of the CPU counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    /// Wall-clock time it was taken, µs.
    pub time_us: u64,
    /// Ticks per second of the counters.
    pub clk_tck: u64,
    /// Softirq time on all CPUs, ticks.
    pub softirq_ticks: u64,
    /// The shaper process's utime + stime, ticks (`None`: no shaper process in the run).
    pub shaper_ticks: Option<u64>,
}

/// CPU use over a window: CPU seconds per second (1.0 is one CPU's whole time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    /// Length of the window, seconds.
    pub window_s: f64,
    /// Softirq, all CPUs.
    pub softirq_cpus: f64,
    /// The shaper's threads (`None`: no shaper process).
    pub shaper_cpus: Option<f64>,
}

/// CPU nanoseconds per delivered packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuPerPacket {
    /// The shaper's threads plus softirq on all CPUs.
    pub total_ns: f64,
    /// The shaper's threads (`None`: no shaper process).
    pub shaper_ns: Option<f64>,
    /// Softirq on all CPUs.
    pub softirq_ns: f64,
}

impl CpuSample {
    /// Parses a sample (the format in the module's documentation).
    pub fn parse(text: &str) -> Result<CpuSample, CpuSampleError> {
        let (mut time_us, mut clk_tck, mut softirq, mut shaper) = (None, None, None, None);
        for (n, line) in text.lines().enumerate() {
            let bad = |what: &str| CpuSampleError::Line {
                line: n + 1,
                what: what.to_owned(),
            };
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            let whole = || number(rest.trim()).ok_or_else(|| bad("not a whole number"));
            match key {
                "time_us" => time_us = Some(whole()?),
                "clk_tck" => clk_tck = Some(whole()?),
                // user nice system idle iowait irq softirq ...
                "cpu" => {
                    let f = rest.split_whitespace().nth(6);
                    softirq = Some(
                        f.and_then(number)
                            .ok_or_else(|| bad("no softirq column (its 7th number)"))?,
                    );
                }
                "shaper" => {
                    shaper = Some(
                        proc_ticks(rest)
                            .ok_or_else(|| bad("no utime and stime (fields 14 and 15)"))?,
                    )
                }
                // The per-CPU lines are kept for whoever reads the file.
                k if k.starts_with("cpu") => {}
                "" => {}
                _ => return Err(bad(&format!("unknown key '{key}'"))),
            }
        }
        let need = |v: Option<u64>, what| v.ok_or(CpuSampleError::Missing(what));
        let clk_tck = need(clk_tck, "clk_tck")?;
        if clk_tck == 0 {
            return Err(CpuSampleError::ZeroClkTck);
        }
        Ok(CpuSample {
            time_us: need(time_us, "time_us")?,
            clk_tck,
            softirq_ticks: need(softirq, "cpu")?,
            shaper_ticks: shaper,
        })
    }

    /// Reads and parses the sample at `path`.
    pub fn read(path: &Path) -> Result<CpuSample, AnalysisError> {
        let text = crate::json::read_text(path)?;
        CpuSample::parse(&text).map_err(|source| AnalysisError::CpuSample {
            path: path.to_owned(),
            source,
        })
    }
}

impl CpuUse {
    /// The CPU use between two samples of the same counters.
    pub fn between(before: &CpuSample, after: &CpuSample) -> Result<CpuUse, CpuSampleError> {
        if before.clk_tck != after.clk_tck {
            return Err(CpuSampleError::ClkTck);
        }
        if after.time_us <= before.time_us {
            return Err(CpuSampleError::NoWindow);
        }
        let window_s = (after.time_us - before.time_us) as f64 / 1e6;
        let tck = before.clk_tck as f64;
        let cpus = |b: u64, a: u64, what| {
            a.checked_sub(b)
                .map(|d| d as f64 / tck / window_s)
                .ok_or(CpuSampleError::Backwards(what))
        };
        let shaper_cpus = match (before.shaper_ticks, after.shaper_ticks) {
            (Some(b), Some(a)) => Some(cpus(b, a, "the shaper's utime + stime")?),
            (None, None) => None,
            _ => return Err(CpuSampleError::ShaperInOne),
        };
        Ok(CpuUse {
            window_s,
            softirq_cpus: cpus(before.softirq_ticks, after.softirq_ticks, "softirq")?,
            shaper_cpus,
        })
    }

    /// The CPU use between the samples in the files `before` and `after`.
    pub fn read(before: &Path, after: &Path) -> Result<CpuUse, AnalysisError> {
        CpuUse::between(&CpuSample::read(before)?, &CpuSample::read(after)?).map_err(|source| {
            AnalysisError::CpuWindow {
                before: before.to_owned(),
                after: after.to_owned(),
                source,
            }
        })
    }

    /// Nanoseconds of CPU per packet at `delivered_pps` (NaN when nothing was delivered).
    pub fn per_packet(&self, delivered_pps: f64) -> CpuPerPacket {
        let ns = |cpus: f64| {
            if delivered_pps > 0.0 {
                cpus * 1e9 / delivered_pps
            } else {
                f64::NAN
            }
        };
        let shaper_ns = self.shaper_cpus.map(ns);
        let softirq_ns = ns(self.softirq_cpus);
        CpuPerPacket {
            total_ns: softirq_ns + shaper_ns.unwrap_or(0.0),
            shaper_ns,
            softirq_ns,
        }
    }
}

fn number(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// utime + stime from a /proc/PID/stat line: fields 14 and 15, counted after the
/// command name, which is in parentheses and may hold spaces and parentheses itself
/// (so the fields start after the last ')').
fn proc_ticks(stat: &str) -> Option<u64> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    // Field 3 (state) is the first after the name: utime is the 12th from there.
    let mut f = after_comm.split_whitespace().skip(11);
    let utime = number(f.next()?)?;
    let stime = number(f.next()?)?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample taken at `t_us` with `softirq` ticks and, if given, the shaper's
    /// utime and stime.
    fn text(t_us: u64, softirq: u64, shaper: Option<(u64, u64)>) -> String {
        let mut s = format!(
            "time_us {t_us}\nclk_tck 100\ncpu  4206817 65679 469503 2434138 10806 0 {softirq} \
             16228 0 0\ncpu0 2090315 33256 247977 1218725 2528 0 16188 7951 0 0\n"
        );
        if let Some((u, st)) = shaper {
            // A name with a space and a parenthesis, as a process may call itself.
            s += &format!(
                "shaper 4242 (pspat (x) y) S 4200 4242 4200 0 -1 4194560 200 0 0 0 {u} {st} 0 \
                 0 -20 0 5 0 100 0 0\n"
            );
        }
        s
    }

    #[test]
    fn a_sample_parses_and_two_give_cpu_per_packet() {
        let b = CpuSample::parse(&text(1_000_000, 26308, Some((150, 50)))).unwrap();
        assert_eq!(
            b,
            CpuSample {
                time_us: 1_000_000,
                clk_tck: 100,
                softirq_ticks: 26308,
                shaper_ticks: Some(200),
            }
        );
        // 2 s later: 60 ticks of softirq (0.3 CPU), 180 of the shaper (0.9 CPU).
        let a = CpuSample::parse(&text(3_000_000, 26368, Some((300, 80)))).unwrap();
        let u = CpuUse::between(&b, &a).unwrap();
        assert!((u.window_s - 2.0).abs() < 1e-12);
        assert!((u.softirq_cpus - 0.3).abs() < 1e-12, "{u:?}");
        assert!((u.shaper_cpus.unwrap() - 0.9).abs() < 1e-12, "{u:?}");
        // At 100 kpps: 3000 ns of softirq and 9000 of the shaper per packet.
        let p = u.per_packet(100_000.0);
        assert!((p.softirq_ns - 3000.0).abs() < 1e-6, "{p:?}");
        assert!((p.shaper_ns.unwrap() - 9000.0).abs() < 1e-6, "{p:?}");
        assert!((p.total_ns - 12000.0).abs() < 1e-6, "{p:?}");
        assert!(u.per_packet(0.0).total_ns.is_nan());
        // Without a shaper (the bridge, HTB) the total is the softirq time.
        let b = CpuSample::parse(&text(0, 100, None)).unwrap();
        let a = CpuSample::parse(&text(500_000, 150, None)).unwrap();
        let p = CpuUse::between(&b, &a).unwrap().per_packet(50_000.0);
        assert_eq!(p.shaper_ns, None);
        assert!((p.total_ns - 20_000.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn bad_samples_and_windows_say_what_is_wrong() {
        let e = |t: &str| CpuSample::parse(t).unwrap_err().to_string();
        assert_eq!(e("clk_tck 100\ncpu  1 2 3 4 5 6 7\n"), "no time_us line");
        assert_eq!(
            e("time_us 1\nclk_tck 0\ncpu  1 2 3 4 5 6 7\n"),
            "clk_tck is 0"
        );
        assert_eq!(
            e("time_us 1\nclk_tck 100\ncpu  1 2 3\n"),
            "line 3: no softirq column (its 7th number)"
        );
        assert_eq!(e("time_us x\n"), "line 1: not a whole number");
        assert_eq!(
            e("time_us 1\nclk_tck 100\ncpu  1 2 3 4 5 6 7\nshaper 1 (p) S 2\n"),
            "line 4: no utime and stime (fields 14 and 15)"
        );
        assert_eq!(e("time_us 1\nwhat 2\n"), "line 2: unknown key 'what'");

        let s = |t, irq, sh| CpuSample::parse(&text(t, irq, sh)).unwrap();
        let between = |b, a| CpuUse::between(&b, &a).unwrap_err().to_string();
        assert_eq!(
            between(s(5, 1, None), s(5, 2, None)),
            "the second sample is not later than the first"
        );
        assert_eq!(
            between(s(1, 9, None), s(5, 2, None)),
            "softirq went backwards between the samples"
        );
        assert_eq!(
            between(s(1, 1, Some((1, 1))), s(5, 2, None)),
            "one sample has a shaper line and the other not"
        );
        // A restarted shaper (another process) shows as time going backwards.
        assert!(between(s(1, 1, Some((9, 9))), s(5, 2, Some((1, 1)))).contains("shaper"));
    }

    #[test]
    fn samples_are_read_from_files_and_errors_name_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let b = file("b.txt", text(0, 10, None));
        let a = file("a.txt", text(1_000_000, 30, None));
        let u = CpuUse::read(&b, &a).unwrap();
        assert!((u.softirq_cpus - 0.2).abs() < 1e-12, "{u:?}");
        let chain = |e: AnalysisError| {
            let source = std::error::Error::source(&e).map(ToString::to_string);
            format!("{e}: {}", source.unwrap_or_default())
        };
        // Swapped: the window runs backwards; both files are named.
        let e = chain(CpuUse::read(&a, &b).unwrap_err());
        assert!(e.contains("a.txt") && e.contains("b.txt"), "{e}");
        assert!(e.ends_with("not later than the first"), "{e}");
        let bad = file("bad.txt", "time_us 1\n".into());
        let e = chain(CpuUse::read(&b, &bad).unwrap_err());
        assert!(
            e.contains("bad.txt") && e.ends_with("no clk_tck line"),
            "{e}"
        );
        let e = CpuUse::read(&b, &dir.path().join("none.txt")).unwrap_err();
        assert!(e.to_string().contains("none.txt"), "{e}");
    }
}
