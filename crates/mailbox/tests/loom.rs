//! Exhaustive loom models of the mailbox on tiny rings.
//!
//! Run with (the model-checking step of `.ci/run`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pspat-mailbox --release --test loom --locked
//! ```
//!
//! Every model is a ring of 4 entries in lines of 2 slots (1-word messages on 16-byte
//! lines, 2-word on 32-byte lines, 4-word on 64-byte lines), so capacity is 2 and a handful
//! of messages already wraps the ring twice. A producer thread pushes `k` messages,
//! spinning (loom `yield_now`) while the mailbox is full; the main thread consumes them by
//! `pop`, or by `extract` with `release` of one slot, of a batch, or only when it runs dry.
//! loom runs every interleaving up to a preemption bound (2 or 3, or `LOOM_MAX_PREEMPTIONS`
//! if set) and, for each, every value the C11 model lets a load return. Each model checks:
//!
//! - FIFO order, no loss, no duplicate: the consumer gets exactly 1, 2, ..., k in order;
//! - no torn multi-word message: every word of message i is a distinct function of i;
//! - capacity never exceeded: a push succeeds only while pushed - released <= capacity,
//!   where "released" is a counter the consumer bumps *before* each `release` call (so a
//!   slot the producer sees free implies the count it reads includes that release);
//! - the racy queries keep their documented promises: `has_message() == true` means the
//!   next `extract` returns a message, `is_full() == false` means the next `push` succeeds.
//!
//! # These models do catch broken protocols (checked by hand)
//!
//! Each of these edits of the credit protocol in `src/mailbox.rs`, made one at a time and
//! then undone, made every mailbox model fail or, where said, some of them:
//!
//! - publishing `released` with `Relaxed` instead of `Release` (`Consumer::publish`), or
//!   loading it with `Relaxed` instead of `Acquire` (`Ring::limit`): all fail (the push is
//!   not ordered after the release that made room, so the consumer's reads and emptying
//!   of the slot are not ordered before the overwrite);
//! - not emptying a line's slots when `Consumer::extract` leaves it, or emptying all but
//!   its first slot: all fail (the consumer reads the previous lap's message again);
//! - emptying the line `head` enters instead of the one it leaves: these models pass (with
//!   one line of capacity the producer cannot have written that line yet), the property
//!   tests (`tests/proptest.rs`, up to 16 lines) fail on lost messages;
//! - letting the producer write one slot past its credit (`tail == limit + 1` as the full
//!   test): all fail on the capacity assertion;
//! - publishing word 0 with `Relaxed` instead of `Release` in `Producer::push`: the 2- and
//!   4-word models fail on the order/torn assertion (word 1 read stale); the 1-word
//!   models pass, as they should (a lone word needs no publication order).
//!
//! The protocol before (the consumer emptied slots on release, the producer checked the
//! slot a line ahead) was checked the same way; its list is in this file's history.
#![cfg(loom)]

mod common;

use std::num::NonZeroU64;

use common::{Four, Seq, Two};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use pspat_mailbox::{mailbox, Config};

/// Line size giving 2 slots a line for each message size.
fn line_bytes<M: Seq>() -> usize {
    2 * 8 * M::WORDS
}

/// How the consumer gives slots back.
#[derive(Clone, Copy, Debug)]
enum Consume {
    /// `pop`: extract and release one slot at once.
    Pop,
    /// `extract`, then `release(unreleased)` once `batch` are held or nothing is waiting.
    Batch(usize),
    /// `extract_batch` of up to this many, then `release` of everything held.
    ExtractBatch(usize),
}

fn builder(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        b.preemption_bound = Some(preemptions);
    }
    b
}

/// One model: a producer pushes `1..=k`, the consumer takes them as `how` says.
fn run<M: Seq>(k: u64, how: Consume, preemptions: usize) {
    builder(preemptions).check(move || {
        let config = Config {
            entries: 4,
            line_bytes: line_bytes::<M>(),
        };
        let (mut p, mut c) = mailbox::<M>(config).unwrap();
        assert_eq!(p.capacity(), 2);
        // Messages the consumer has released or is about to release (bumped before the
        // `release` call).
        let released = Arc::new(AtomicUsize::new(0));

        let released_p = Arc::clone(&released);
        let producer = thread::spawn(move || {
            let cap = p.capacity();
            let mut i = 1;
            while i <= k {
                let full = p.is_full();
                match p.push(M::from_seq(i)) {
                    Ok(()) => {
                        // ORDERING: SeqCst is plenty; the consumer's bump is sequenced
                        // before its release, which happens before this push saw room.
                        let r = released_p.load(Ordering::SeqCst);
                        let queued = i as usize - r;
                        assert!(queued <= cap, "{queued} messages held, capacity {cap}");
                        i += 1;
                    }
                    Err(back) => {
                        assert!(full, "is_full() said false but push failed");
                        assert_eq!(back, M::from_seq(i), "push gave back another message");
                        thread::yield_now();
                    }
                }
            }
        });

        let mut next = 1;
        while next <= k {
            let waiting = c.has_message();
            let got = match how {
                Consume::Pop => {
                    // `pop` only when a message is known to wait, so that the bump
                    // announces exactly the release `pop` makes.
                    if waiting {
                        released.fetch_add(1, Ordering::SeqCst);
                        let got = c.pop();
                        assert!(got.is_some(), "has_message() said true but pop failed");
                        got
                    } else {
                        None
                    }
                }
                Consume::ExtractBatch(n) => {
                    let mut buf = vec![M::from_seq(k + 1); n];
                    let got = c.extract_batch(&mut buf);
                    if waiting {
                        assert!(
                            got > 0,
                            "has_message() said true but extract_batch took nothing"
                        );
                    }
                    for &m in &buf[..got] {
                        assert_eq!(
                            m,
                            M::from_seq(next),
                            "out of order, lost, duplicated or torn"
                        );
                        next += 1;
                    }
                    let held = c.unreleased();
                    if held > 0 {
                        released.fetch_add(held, Ordering::SeqCst);
                        c.release(held);
                    }
                    if got == 0 {
                        thread::yield_now();
                    }
                    continue;
                }
                Consume::Batch(batch) => {
                    let got = c.extract();
                    if waiting {
                        assert!(got.is_some(), "has_message() said true but extract failed");
                    }
                    let held = c.unreleased();
                    if held >= batch || (got.is_none() && held > 0) {
                        released.fetch_add(held, Ordering::SeqCst);
                        c.release(held);
                    }
                    got
                }
            };
            match got {
                Some(m) => {
                    assert_eq!(
                        m,
                        M::from_seq(next),
                        "out of order, lost, duplicated or torn"
                    );
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(c.pop(), None, "a message after the last one");
    });
}

#[test]
fn one_word_pop() {
    run::<NonZeroU64>(7, Consume::Pop, 3);
}

#[test]
fn one_word_extract_release_by_line() {
    run::<NonZeroU64>(7, Consume::Batch(2), 3);
}

#[test]
fn one_word_extract_release_one_by_one() {
    run::<NonZeroU64>(7, Consume::Batch(1), 3);
}

#[test]
fn one_word_extract_release_when_dry() {
    run::<NonZeroU64>(7, Consume::Batch(usize::MAX), 3);
}

#[test]
fn two_words_pop() {
    run::<Two>(7, Consume::Pop, 3);
}

#[test]
fn two_words_extract_release_by_line() {
    run::<Two>(6, Consume::Batch(2), 3);
}

#[test]
fn four_words_pop() {
    run::<Four>(7, Consume::Pop, 3);
}

#[test]
fn one_word_extract_batch() {
    run::<NonZeroU64>(7, Consume::ExtractBatch(2), 3);
}

#[test]
fn four_words_extract_batch() {
    run::<Four>(4, Consume::ExtractBatch(3), 3);
}

#[test]
fn four_words_extract_release_when_dry() {
    run::<Four>(6, Consume::Batch(usize::MAX), 3);
}

/// The frame pool: a writer stores frames into a one-slot region (so every frame reuses
/// the slot the reader just freed), hands each slot index to the reader through a
/// `Relaxed` atomic (so only the pool's own orderings can make the bytes visible; the
/// engine's mailbox adds Release/Acquire on top), and waits for the slot to be free again;
/// the reader copies each frame out. Every frame must arrive whole (its bytes a function
/// of its number) and in order, whatever the interleaving: a reader's copy is never
/// overlapped by the writer's next frame. (Weakening the Release store of READY in `put`, or
/// the Acquire load in `take_into`, makes loom find a stale frame: checked by hand.)
#[test]
fn frame_pool_handover() {
    use loom::sync::atomic::AtomicU64;
    use pspat_mailbox::{FrameError, FramePool};
    builder(3).check(|| {
        const K: u64 = 3;
        let pool = FramePool::new(1, 1, 16);
        let handed = Arc::new(AtomicU64::new(0)); // 0 = nothing; 1 + slot otherwise
        let (p2, h2) = (Arc::clone(&pool), Arc::clone(&handed));
        let writer = thread::spawn(move || {
            let mut w = FramePool::writer(&p2, 0);
            for i in 1..=K {
                let frame: Vec<u8> = (0..9).map(|b| (i as u8) * 16 + b).collect();
                let slot = loop {
                    match w.put(&frame) {
                        Ok(s) => break s,
                        Err(FrameError::Full) => thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                };
                h2.store(1 + u64::from(slot), Ordering::Relaxed);
                while h2.load(Ordering::Relaxed) != 0 {
                    thread::yield_now();
                }
            }
        });
        let mut out = [0u8; 16];
        for i in 1..=K {
            let slot = loop {
                let h = handed.load(Ordering::Relaxed);
                if h != 0 {
                    break (h - 1) as u32;
                }
                thread::yield_now();
            };
            // The index may arrive before the READY state is visible: retry.
            loop {
                match pool.take_into(0, slot, &mut out) {
                    Ok(n) => break assert_eq!(n, 9),
                    Err(FrameError::NotReady { .. }) => thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
            for (b, &v) in out[..9].iter().enumerate() {
                assert_eq!(v, (i as u8) * 16 + b as u8, "frame {i} torn or stale");
            }
            handed.store(0, Ordering::Relaxed);
        }
        writer.join().unwrap();
        assert_eq!(pool.in_use(0), 0);
    });
}
