//! CLOCK_MONOTONIC and CLOCK_REALTIME through clock_gettime(2).

/// Nanoseconds on CLOCK_MONOTONIC. glibc serves it from the vDSO: no system call.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds on CLOCK_REALTIME (the clock of the kernel's receive timestamps), also
/// from the vDSO.
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[inline]
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_MONOTONIC and CLOCK_REALTIME (the only ids passed) every Linux kernel supports.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    // clock_gettime fails only for a bad clock id or pointer, neither possible here.
    debug_assert_eq!(rc, 0);
    // Neither clock is negative here; u64 ns last 584 years.
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
