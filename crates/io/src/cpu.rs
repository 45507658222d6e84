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
}
