//! CPU time of this process's threads by name, from /proc (Linux), for reports such as
//! "the arbiter used 0.4% of a CPU while idle".

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
