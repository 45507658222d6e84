//! Asymmetric fences: Dekker's handshake with one frequent and one rare side.
//!
//! Two handshakes in the engine need store-load ordering on both sides:
//!
//! - sleep/wake (`wake.rs`): a waker publishes work, then reads the sleeper's flag; a
//!   sleeper sets its flag, then looks for work;
//! - activity (`activity.rs`): a client pushes a packet, then reads its activity bit; the
//!   arbiter clears an idle client's bit, then looks at its mailbox.
//!
//! With a `SeqCst` fence on both sides, either the second side sees the work or the first
//! sees the flag. But the first side runs once per packet (a client's `submit`) or per scan
//! (the arbiter's hand-off), while the second runs only when a thread has been idle for a
//! while. On this machine's VM a fence costs a client about as much as the rest of
//! `submit` together, because it waits for the store of the mailbox slot, whose line the
//! arbiter is reading, to leave the store buffer (docs/PERFORMANCE.md, "The client's
//! fence").
//!
//! So the frequent side executes [`light`], a compiler fence, and the rare side executes
//! [`heavy`], which is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: it returns once every
//! other running thread of the process has executed a full memory barrier (and the threads
//! not running execute one, a context switch, before they run again). The handshake still
//! holds: take the point P where the barrier ran on the light side's CPU. If the light
//! side's store (the push) came before P in its program order, it is globally visible
//! before `heavy` returns, so the heavy side's later load sees it. Otherwise the light
//! side's load (the flag) comes after P too, and P comes after the heavy side's store (its
//! store precedes the system call), so the load sees the flag. This is the scheme of the
//! Linux membarrier(2) man page, of liburcu and of folly's `asymmetricHeavyBarrier`.
//!
//! Without membarrier (a kernel older than 4.14, a seccomp policy, or before the first
//! [`enable`]) both sides are `SeqCst` fences, as a plain Dekker handshake. [`heavy`]
//! calls [`enable`] itself before it decides, so no `light` can see the asymmetric mode
//! while a `heavy` acts on the symmetric one. Under loom both are `SeqCst` fences (loom does
//! not model membarrier): `tests/loom.rs` explores the symmetric protocol.

#[cfg(not(loom))]
use std::sync::atomic::{compiler_fence, AtomicBool};
#[cfg(not(loom))]
use std::sync::OnceLock;

use crate::sync::{fence, Ordering};

/// Whether the process is registered for expedited membarrier; set once, by [`enable`].
#[cfg(not(loom))]
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

/// Registers the process for membarrier(2) once; returns whether the asymmetric mode is
/// on. Called by `Engine::start` before it spawns any thread, and by every [`heavy`].
#[cfg(not(loom))]
pub fn enable() -> bool {
    static ONCE: OnceLock<bool> = OnceLock::new();
    *ONCE.get_or_init(|| {
        let ok = pspat_io::cpu::membarrier_register().is_ok();
        // ORDERING: Relaxed: a thread that reads `false` executes a full fence (always
        // correct); `heavy` reads the final value through `ONCE`, whose initialisation
        // happens-before its return.
        ASYMMETRIC.store(ok, Ordering::Relaxed);
        ok
    })
}

/// Under loom: the symmetric handshake.
#[cfg(loom)]
pub fn enable() -> bool {
    false
}

/// The frequent side: between publishing (a push, a flag) and reading the other side's
/// flag.
#[inline(always)]
pub fn light() {
    #[cfg(not(loom))]
    {
        // ORDERING: Relaxed read of a flag written once (see `enable`).
        if ASYMMETRIC.load(Ordering::Relaxed) {
            // ORDERING: the compiler keeps the store before the load; the CPU's
            // reordering is undone by `heavy` (module docs).
            compiler_fence(Ordering::SeqCst);
            return;
        }
    }
    // ORDERING: SeqCst fence, pairing with the one in `heavy` (symmetric Dekker).
    fence(Ordering::SeqCst);
}

/// The rare side: between publishing (a sleep flag, a cleared activity bit) and looking
/// for the other side's work.
pub fn heavy() {
    // ORDERING: SeqCst fence: orders this thread's store before its later loads, and
    // pairs with `light` when membarrier is not available.
    fence(Ordering::SeqCst);
    if enable() {
        // Registered, so the command cannot fail (it fails only for a process that is
        // not registered or a kernel without it, and registration proved both false).
        pspat_io::cpu::membarrier_expedited()
            .expect("membarrier(PRIVATE_EXPEDITED) failed after a successful registration");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn asymmetric_mode_is_on_where_membarrier_works() {
        // The machines pspat runs on (Linux 4.14+) have it; CI checks that the fast mode
        // is the one that ships.
        let registered = pspat_io::cpu::membarrier_register().is_ok();
        assert_eq!(enable(), registered);
        assert_eq!(ASYMMETRIC.load(Ordering::Relaxed), registered);
        heavy();
        light();
    }
}
