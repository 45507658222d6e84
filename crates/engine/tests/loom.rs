//! Model checking (loom) of the two handshakes the engine builds on the mailbox: the
//! activity bitmap (a client with a packet is never left off the arbiter's scan list) and
//! the sleep/wake protocol (a sleeper is never left asleep with work pending).
//!
//! Run with: `RUSTFLAGS="--cfg loom" cargo test -p pspat-engine --release --test loom`
//! (`.ci/run` does). Broken on purpose and caught by these models (by hand, then
//! restored): removing `publish_fence()` between the push and the mark (the activity
//! model fails its assertion) and between the work and the wake (the sleeper deadlocks).
#![cfg(loom)]

use std::num::NonZeroU64;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use pspat_engine::activity::Activity;
use pspat_engine::wake::{publish_fence, Parker};
use pspat_mailbox::{mailbox, Config};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// A client pushes and marks itself while the arbiter deactivates it and re-checks the
/// mailbox: afterwards, a pending packet always has its client's bit set.
#[test]
fn activity_never_loses_a_pending_client() {
    model(|| {
        let act = Arc::new(Activity::new(1));
        act.mark(0);
        let (mut p, c) = mailbox::<NonZeroU64>(Config {
            entries: 4,
            line_bytes: 16,
        })
        .unwrap();
        let a2 = Arc::clone(&act);
        let client = loom::thread::spawn(move || {
            p.push(NonZeroU64::new(7).unwrap()).unwrap();
            publish_fence();
            a2.mark(0);
            p
        });
        // The arbiter found the mailbox empty a while ago and drops the client.
        act.deactivate(0);
        if c.has_message() {
            act.mark(0);
        }
        let _p = client.join().unwrap();
        if c.has_message() {
            assert!(
                act.is_marked(0),
                "a client with a packet is off the scan list"
            );
        }
    });
}

/// The sleeper announces, re-checks and parks; the waker publishes, fences and wakes. A
/// lost wake-up leaves the sleeper parked forever, which loom reports as a deadlock.
#[test]
fn no_lost_wakeup() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let work = Arc::new(AtomicU64::new(0));
        let (p2, w2) = (Arc::clone(&parker), Arc::clone(&work));
        parker.register_current();
        let waker = loom::thread::spawn(move || {
            w2.store(1, Ordering::Relaxed);
            publish_fence();
            p2.wake();
        });
        loop {
            if work.load(Ordering::Relaxed) == 1 {
                break;
            }
            parker.prepare();
            if work.load(Ordering::Relaxed) == 1 {
                parker.cancel();
                break;
            }
            parker.sleep(None);
        }
        waker.join().unwrap();
    });
}
