//! Model checking (loom) of the engine's handshakes: the activity bitmap (a client with a
//! packet, or with sent packets whose slots are owed, is never left off the arbiter's scan
//! list), the
//! sleep/wake protocol (a sleeper is never left asleep with work pending), the stop of an
//! arbiter napping until the link is free, and the key rings.
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

/// Client hand-off: a client that sent cleared packets publishes how many (its `drained`
/// counter), fences and marks itself, while the arbiter, which saw the old count on its
/// visit, deactivates it and re-checks the count: afterwards, sent packets whose slots the
/// arbiter has not given back always have their client's bit set (else its mailbox stays
/// full forever). Re-checking only the mailbox, as before, fails this model.
#[test]
fn activity_never_loses_a_client_that_sent() {
    model(|| {
        let act = Arc::new(Activity::new(1));
        act.mark(0);
        let drained = Arc::new(AtomicU64::new(0));
        let seen = 0; // what the arbiter's visit read
        let (a2, d2) = (Arc::clone(&act), Arc::clone(&drained));
        let client = loom::thread::spawn(move || {
            d2.store(d2.load(Ordering::Relaxed) + 3, Ordering::Relaxed);
            publish_fence();
            a2.mark(0);
        });
        act.deactivate(0);
        if drained.load(Ordering::Relaxed) != seen {
            act.mark(0);
        }
        client.join().unwrap();
        if drained.load(Ordering::Relaxed) != seen {
            assert!(
                act.is_marked(0),
                "a client owed its slots is off the scan list"
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

/// The arbiter naps until the link is free ([`Parker::nap`]: no announcement, so clients'
/// wake-ups do not end it); a stop request (`Shared::request_stop`: its flag with Release,
/// then an unconditional unpark) must end the nap, whether the unpark comes before the
/// nap (park's token), during it, or before the arbiter's check of the flag (which then
/// sees the flag). A lost stop leaves the arbiter parked forever: a deadlock loom reports.
/// Broken on purpose (the unpark removed from the stopper), the model deadlocks.
#[test]
fn a_stop_request_ends_a_link_nap() {
    use loom::sync::atomic::AtomicBool;
    model(|| {
        let parker = Arc::new(Parker::new());
        let stop = Arc::new(AtomicBool::new(false));
        let (p2, s2) = (Arc::clone(&parker), Arc::clone(&stop));
        parker.register_current();
        let stopper = loom::thread::spawn(move || {
            // As `Shared::request_stop`.
            s2.store(true, Ordering::Release);
            p2.unpark();
        });
        // As `Arbiter::run`: check for a stop after each scan, else nap until the link
        // is free (under loom, until unparked).
        while !stop.load(Ordering::Acquire) {
            parker.nap(std::time::Duration::from_secs(3600));
        }
        stopper.join().unwrap();
    });
}

/// A client writes each packet's key into its key ring, then pushes the packet; the
/// arbiter extracts the packet, reads the key, then releases the slot. The ring has as
/// many keys as the mailbox has slots: the arbiter always reads the key that was written
/// for that packet, never a later packet's (keyring.rs explains why). Broken on purpose
/// (a ring of 2 keys behind this 4-slot mailbox), the model fails its assertion.
#[test]
fn key_rings_hand_over_the_key_of_each_packet() {
    use pspat_engine::keyring::KeyRings;
    model(|| {
        const N: u64 = 3;
        let rings = Arc::new(KeyRings::new(1, 4));
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config {
            entries: 4,
            line_bytes: 16,
        })
        .unwrap();
        let r2 = Arc::clone(&rings);
        let client = loom::thread::spawn(move || {
            for seq in 0..N {
                let msg = NonZeroU64::new(seq + 1).unwrap();
                r2.put(0, seq as u32, [seq + 100; 5], (seq * 7) as u32, seq + 9);
                while p.push(msg).is_err() {
                    loom::thread::yield_now();
                }
            }
        });
        let mut got = 0;
        while got < N {
            match c.extract() {
                Some(m) => {
                    let seq = m.get() - 1;
                    assert_eq!(seq, got, "in order");
                    assert_eq!(rings.get(0, seq as u32), [seq + 100; 5], "its own key");
                    assert_eq!(rings.tag(0, seq as u32), (seq * 7) as u32, "its own tag");
                    assert_eq!(rings.hops(0, seq as u32), seq + 9, "its own hops");
                    c.release(1);
                    got += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        client.join().unwrap();
    });
}
