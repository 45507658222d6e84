//! CPU placement of threads (Linux affinity): PSPAT gives the arbiter a CPU of its own.

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
}
