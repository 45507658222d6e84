//! Sleeping without lost wake-ups (PSPAT paper section 3.5, early draft Figure 4).
//!
//! A thread that runs out of work (the arbiter, a dispatcher, a client waiting for
//! cleared packets) spins a while, then:
//!
//! 1. announces it is about to sleep ([`Parker::prepare`]: a `SeqCst` store and the heavy
//!    side of an asymmetric fence, [`crate::barrier::heavy`]);
//! 2. looks for work once more;
//! 3. sleeps ([`Parker::sleep`]) only if it found none.
//!
//! A thread that hands it work publishes the work (a mailbox push), executes
//! [`publish_fence`] (the light side, [`crate::barrier::light`]: a compiler fence), and
//! then calls [`Parker::wake`], which reads the flag and unparks only if the sleeper
//! announced itself. This is Dekker's pattern: either the sleeper's re-check sees the work
//! or the waker sees the flag (`barrier.rs` explains why the asymmetric pair is enough).
//! The waker pays a compiler fence and one read of a rarely-written line per hand-off;
//! notifications (a syscall) happen only when the sleeper may really be asleep, at most
//! once per sleep.
//!
//! `std::thread::park`'s token makes an unpark that races ahead of the park harmless: the
//! park returns at once.

use std::time::Duration;

use crate::barrier;
use crate::sync::{current, park, AtomicBool, AtomicU64, Ordering, Thread};

/// The fence a waker executes between publishing work and reading sleep flags (and the
/// activity bitmap, which relies on the same fence): the light side of an asymmetric
/// fence.
#[inline(always)]
pub fn publish_fence() {
    // ORDERING: pairs with the heavy fence in `Parker::prepare` (and in
    // `Activity::deactivate`): store-load ordering that acquire/release cannot give.
    barrier::light();
}

/// Where the sleeper's thread handle is kept: set once, read by wakers.
#[cfg(not(loom))]
type ThreadSlot = std::sync::OnceLock<Thread>;
#[cfg(loom)]
type ThreadSlot = loom::sync::Mutex<Option<Thread>>;

/// One sleeper's flag and thread handle.
#[derive(Debug, Default)]
pub struct Parker {
    /// True from `prepare` until the sleeper wakes or cancels. Written by the sleeper
    /// (set) and by wakers (cleared by swap); read by wakers.
    sleeping: AtomicBool,
    /// The sleeping thread, registered once by the sleeper.
    thread: ThreadSlot,
    /// Number of wake-ups that had to unpark (statistics).
    unparks: AtomicU64,
}

impl Parker {
    /// A parker for a thread not registered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sleeper: registers the calling thread as the one to unpark. Call once, from the
    /// thread that will sleep, before the first `prepare`.
    pub fn register_current(&self) {
        #[cfg(not(loom))]
        let _ = self.thread.set(current());
        #[cfg(loom)]
        {
            let mut t = self.thread.lock().unwrap();
            if t.is_none() {
                *t = Some(current());
            }
        }
    }

    fn registered(&self) -> Option<Thread> {
        #[cfg(not(loom))]
        return self.thread.get().cloned();
        #[cfg(loom)]
        return self.thread.lock().unwrap().clone();
    }

    /// Sleeper, step 1: announce the sleep. The caller must look for work afterwards.
    #[inline]
    pub fn prepare(&self) {
        // ORDERING: SeqCst store + heavy fence; pairs with `publish_fence` + the load in
        // `wake`: the re-check that follows cannot be reordered before this store, and a
        // waker's push before its light fence is visible to it (barrier.rs).
        self.sleeping.store(true, Ordering::SeqCst);
        barrier::heavy();
    }

    /// Sleeper: work was found after `prepare`; stay awake.
    #[inline]
    pub fn cancel(&self) {
        // ORDERING: Relaxed: a waker that still sees `true` only makes a spurious unpark.
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Sleeper, step 3: sleep until woken or until `timeout` passes (under loom, which
    /// does not model time, until woken: a lost wake-up is then a deadlock loom reports).
    pub fn sleep(&self, timeout: Option<Duration>) {
        match timeout {
            #[cfg(not(loom))]
            Some(t) => std::thread::park_timeout(t),
            _ => park(),
        }
        // ORDERING: Relaxed, as in `cancel`.
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Sleeper: sleeps until `timeout` passes or [`Parker::unpark`] is called (under loom,
    /// until unparked), without announcing it: [`Parker::wake`] does not end this sleep.
    /// For a sleeper that waits for a deadline rather than for work (the arbiter waiting
    /// for the link to be free: a packet handed to it meanwhile cannot leave earlier), yet
    /// must answer a stop request or a control at once; their senders set their flag, then
    /// unpark, and the sleeper checks the flag before each nap. An unpark that comes
    /// before the nap makes it return at once (`park`'s token), so none is lost
    /// (`tests/loom.rs`). A nap can also end early on an unpark meant for an earlier
    /// sleep: the caller re-checks its deadline and naps again.
    pub fn nap(&self, timeout: Duration) {
        #[cfg(not(loom))]
        std::thread::park_timeout(timeout);
        #[cfg(loom)]
        {
            let _ = timeout;
            park();
        }
    }

    /// Waker, after publishing work and [`publish_fence`]: unparks the sleeper if it
    /// announced a sleep. Returns whether it had to.
    #[inline]
    pub fn wake(&self) -> bool {
        // ORDERING: Relaxed load after the caller's SeqCst fence (Dekker, see the module
        // docs); the swap makes one waker, not all of them, pay for the unpark.
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.unpark();
            return true;
        }
        false
    }

    /// Unparks unconditionally (stopping, or a deadline the sleeper must see).
    pub fn unpark(&self) {
        if let Some(t) = self.registered() {
            // ORDERING: Relaxed statistics counter.
            self.unparks.fetch_add(1, Ordering::Relaxed);
            t.unpark();
        }
    }

    /// How many times a waker had to unpark this sleeper.
    pub fn unparks(&self) -> u64 {
        self.unparks.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// A sleeper that parks with no timeout must be woken for every item: if a wake-up
    /// were lost, the test would hang (and the harness would time out).
    #[test]
    fn no_lost_wakeups_under_stress() {
        let parker = Arc::new(Parker::new());
        let work = Arc::new(AtomicU64::new(0));
        const N: u64 = 20_000;
        let (p2, w2) = (Arc::clone(&parker), Arc::clone(&work));
        let sleeper = std::thread::spawn(move || {
            p2.register_current();
            let mut seen = 0;
            while seen < N {
                let now = w2.load(Ordering::Acquire);
                if now > seen {
                    seen = now;
                    continue;
                }
                p2.prepare();
                if w2.load(Ordering::Acquire) > seen {
                    p2.cancel();
                    continue;
                }
                p2.sleep(Some(Duration::from_secs(20)));
            }
            seen
        });
        // let the sleeper register
        while parker.registered().is_none() {
            std::thread::yield_now();
        }
        let start = std::time::Instant::now();
        for i in 1..=N {
            work.store(i, Ordering::Release);
            publish_fence();
            parker.wake();
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
        assert_eq!(sleeper.join().unwrap(), N);
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "a wake-up was lost and the sleeper waited for its timeout"
        );
    }
}
