//! CPU placement of threads (Linux affinity): PSPAT gives the arbiter a CPU of its own;
//! and the CPU time threads used, by name, from /proc, for reports such as "the arbiter
//! used 0.4% of a CPU while idle"; and CPU lists as users write them (`0,2,5-7`), the one
//! parser of them in pspat, and the one check that CPUs are ones this process may run on
//! ([`check_allowed`]).

use std::collections::BTreeMap;
use std::str::FromStr;

/// The CPUs this thread may run on, in increasing order (empty if the kernel refuses to
/// say).
pub fn allowed_cpus() -> Vec<usize> {
    crate::sys::allowed_cpus().unwrap_or_default()
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    crate::sys::pin_current_thread(cpu)
}

/// Sets how late the kernel may wake the calling thread from a timed sleep (its timer
/// slack, 50 us by default for normal threads). A thread that sleeps until a precise
/// instant (the arbiter waiting for a slow link) asks for a small slack.
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    crate::sys::set_timer_slack(ns)
}

/// Registers this process for [`membarrier_expedited`] (Linux 4.14 or later). Fails if
/// the kernel (or a seccomp policy) does not offer it.
pub fn membarrier_register() -> std::io::Result<()> {
    crate::sys::register_private_expedited()
}

/// A full memory barrier on every thread of this process: when it returns, each thread
/// that was running on another CPU has executed one, and the others execute one (a
/// context switch) before they run again. The costly side of an asymmetric fence: the
/// other side needs only a compiler fence. Needs [`membarrier_register`] first.
pub fn membarrier_expedited() -> std::io::Result<()> {
    crate::sys::private_expedited()
}

/// Clock ticks per second of /proc's utime/stime (USER_HZ, 100 on every Linux ABI).
const TICKS_PER_S: f64 = 100.0;

/// CPU seconds (user + system) used so far by each thread whose name starts with one of
/// `prefixes`, summed per name. Empty where /proc is unavailable.
pub fn threads_cpu_s(prefixes: &[&str]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let path = e.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        let name = comm.trim();
        if !prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        if let Some(s) = cpu_of_stat(&stat) {
            *out.entry(name.to_string()).or_insert(0.0) += s;
        }
    }
    out
}

/// utime + stime of a /proc/.../stat line, in seconds. The name field (2nd) is in
/// parentheses and may hold spaces, so fields are counted after the last ')'.
fn cpu_of_stat(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

/// Checks that every CPU of `cpus` is one this process may run on (its affinity mask, as
/// [`allowed_cpus`] reads it), before a thread is pinned to it: the error names the first
/// that is not, and the allowed ones.
pub fn check_allowed(cpus: &[usize]) -> Result<(), NotAllowed> {
    if cpus.is_empty() {
        return Ok(());
    }
    let allowed = allowed_cpus();
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(&cpu) => Err(NotAllowed { cpu, allowed }),
        None => Ok(()),
    }
}

/// A CPU outside this process's affinity mask (see [`check_allowed`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CPU {cpu} is not one this process may run on (allowed: {allowed:?})")]
pub struct NotAllowed {
    /// The CPU asked for.
    pub cpu: usize,
    /// The CPUs this process may run on, in increasing order (empty if the kernel refused
    /// to say).
    pub allowed: Vec<usize>,
}

/// A list of CPU numbers, in the order written (`0,2,5-7` is 0, 2, 5, 6, 7). Threads take
/// them round-robin: thread i the (i mod n)-th.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// The CPU of thread `i`: the (i mod n)-th; `None` for an empty list.
    pub fn of(&self, i: usize) -> Option<usize> {
        self.0.get(i % self.0.len().max(1)).copied()
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;

    /// Parses `0,2,5-7`: comma-separated CPUs and increasing ranges, at least one.
    fn from_str(s: &str) -> Result<Self, CpuListError> {
        let mut v = Vec::new();
        for item in s.split(',').map(str::trim) {
            let num = |t: &str| {
                t.trim()
                    .parse::<usize>()
                    .map_err(|_| CpuListError::NotANumber {
                        cpu: t.to_owned(),
                        list: s.to_owned(),
                    })
            };
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(CpuListError::Decreasing(item.to_owned()));
                    }
                    v.extend(a..=b);
                }
                None => v.push(num(item)?),
            }
        }
        Ok(CpuList(v))
    }
}

/// A CPU list that does not parse (see [`CpuList`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// An item is not a number.
    #[error("CPU '{cpu}' in '{list}' is not a number (e.g. 0,1 or 0-3)")]
    NotANumber {
        /// The item.
        cpu: String,
        /// The whole list.
        list: String,
    },
    /// A range `a-b` with `a > b`.
    #[error("CPU range '{0}' is decreasing")]
    Decreasing(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_cpu_and_refuses_a_bad_one() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus(), vec![last]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(1 << 20).is_err());
    }

    #[test]
    fn membarrier_works_once_registered() {
        // Every kernel CI and users run (4.14+) has it; a refusal would make the engine
        // fall back to full fences, which this test would hide.
        membarrier_register().expect("membarrier PRIVATE_EXPEDITED registration");
        membarrier_expedited().unwrap();
        membarrier_register().expect("registering twice is allowed");
    }

    #[test]
    fn timer_slack_is_set_for_the_calling_thread() {
        std::thread::spawn(|| {
            set_timer_slack_ns(2_000).unwrap();
            // /proc shows it for this thread.
            let tid = std::fs::read_link("/proc/thread-self").unwrap();
            let path = std::path::Path::new("/proc")
                .join(tid)
                .join("timerslack_ns");
            if let Ok(s) = std::fs::read_to_string(&path) {
                assert_eq!(s.trim(), "2000");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn parses_utime_and_stime_even_with_spaces_in_the_name() {
        let line = "1234 (pspat arb) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100";
        assert_eq!(cpu_of_stat(line), Some(3.0));
        assert_eq!(cpu_of_stat("garbage"), None);
    }

    #[test]
    fn finds_a_named_busy_thread() {
        let h = std::thread::Builder::new()
            .name("cpu-test-spin".into())
            .spawn(|| {
                let t = std::time::Instant::now();
                let mut x = 0u64;
                while t.elapsed() < std::time::Duration::from_millis(300) {
                    x = x.wrapping_add(1);
                    std::hint::black_box(x);
                }
                threads_cpu_s(&["cpu-test"])
            })
            .unwrap();
        let m = h.join().unwrap();
        let s = m.get("cpu-test-spin").copied().unwrap_or(0.0);
        assert!(s > 0.0, "{m:?}");
    }

    fn parse(s: &str) -> Result<CpuList, CpuListError> {
        s.parse()
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse("0").unwrap().0, [0]);
        assert_eq!(parse("0,2,5-7").unwrap().0, [0, 2, 5, 6, 7]);
        assert!(parse("3-1").unwrap_err().to_string().contains("decreasing"));
        assert!(parse("a").unwrap_err().to_string().contains("'a'"));
        assert!(parse("").is_err());
        assert!(parse("1,,2").is_err());
    }

    #[test]
    fn only_cpus_of_the_affinity_mask_are_allowed() {
        let allowed = allowed_cpus();
        assert_eq!(check_allowed(&allowed), Ok(()));
        assert_eq!(check_allowed(&[]), Ok(()));
        let mut cpus = allowed.clone();
        cpus.push(100_000);
        let e = check_allowed(&cpus).unwrap_err();
        assert_eq!(
            e,
            NotAllowed {
                cpu: 100_000,
                allowed: allowed.clone()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("CPU 100000 is not one this process may run on (allowed: {allowed:?})")
        );
    }

    #[test]
    fn threads_take_them_round_robin() {
        let l = parse("4,6").unwrap();
        assert_eq!([l.of(0), l.of(1), l.of(2)], [Some(4), Some(6), Some(4)]);
        assert_eq!(CpuList(vec![]).of(3), None);
    }
}
