//! What the mailbox benches share: a 32-byte message and pinning to two CPUs.

use pspat_mailbox::Message;

/// A 32-byte message (4 words, the engine's `Pkt` size).
#[derive(Clone, Copy)]
pub struct Four(pub [u64; 4]);

impl Message for Four {
    const WORDS: usize = 4;
    #[inline]
    fn encode(self) -> [u64; 4] {
        self.0
    }
    #[inline]
    fn decode(w: [u64; 4]) -> Self {
        Four(w)
    }
}

/// The first two CPUs this process may run on, if there are two.
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: cpu_set_t is a plain bit array, for which all-zero is a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 = this thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads the bit array of a valid cpu_set_t; the index is in range.
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((cpus.next()?, cpus.next()?))
}

/// Pins the calling thread to `cpu`; false if the kernel refused.
pub fn pin(cpu: usize) -> bool {
    // SAFETY: as in `two_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of a valid cpu_set_t; `cpu < CPU_SETSIZE` (it came
    // from `two_cpus`).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 = the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0 }
}

/// Whether pinning works here (tried on a throwaway thread, so this one stays unpinned).
fn pin_check(a: usize, b: usize) -> bool {
    std::thread::spawn(move || pin(a) && pin(b))
        .join()
        .unwrap_or(false)
}

/// Two CPUs to pin a producer and a consumer to, or `None` (said on stderr as `what`:
/// the threads then run unpinned).
pub fn cpus_or_warn(what: &str) -> Option<(usize, usize)> {
    match two_cpus() {
        Some((a, b)) if pin_check(a, b) => Some((a, b)),
        _ => {
            eprintln!("{what}: fewer than two usable CPUs; threads run unpinned");
            None
        }
    }
}
