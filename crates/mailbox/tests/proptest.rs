//! Property tests of the mailbox.
//!
//! 1. A single-threaded model test: random sequences of push / pop / extract / release(n)
//!    run on a real mailbox and on an obviously-correct model (a `VecDeque` of queued
//!    messages, a `VecDeque` of extracted and unreleased ones, and the counters below), for
//!    random geometries (1 to 8 slots a line, 2 to 16 lines) and 1-, 2- and 4-word
//!    messages. Every answer of the mailbox must equal the model's.
//! 2. A two-thread stress test: random burst sizes on both sides, extract/release in random
//!    chunks; the consumer must see 1, 2, ..., n in order, untorn.
//!
//! # The exact capacity rule (derived from the invariants in `src/mailbox.rs`)
//!
//! Let `le` be the slots per line, `E` the entries, `C = E - le` the capacity, `pushed` the
//! messages pushed so far, `released` the slots released so far, and `published` the
//! count of released slots the consumer has told the producer about. The consumer
//! publishes only whole lines: after `release(k)` when at least one line is unpublished,
//! after a `pop` when at least `B = max(le, (C / 4) rounded down to lines)` slots are;
//! it then publishes every whole line released (`published += le * floor((released -
//! published) / le)`). The producer may write while
//!
//! ```text
//! push succeeds  <=>  pushed < published + C
//! ```
//!
//! so at most `C` messages (queued plus extracted-unreleased) are ever held, a partly
//! released line gives nothing back, and `pop` gives slots back `B` at a time. The model
//! below uses this rule, not the mailbox's own state.
#![cfg(not(loom))]

mod common;

use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use common::{Four, Seq, Two};
use proptest::prelude::*;
use pspat_mailbox::{mailbox, Config};

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Push up to this many messages (stops at the first refusal, as a client would).
    Push(usize),
    /// Pop up to this many messages.
    Pop(usize),
    /// Extract up to this many messages without releasing.
    Extract(usize),
    /// `extract_batch` into a buffer of this many messages.
    ExtractBatch(usize),
    /// Release `x % (unreleased + 1)` slots.
    Release(usize),
    /// Release every extracted slot.
    ReleaseAll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..12).prop_map(Op::Push),
        1 => (1usize..12).prop_map(Op::Pop),
        2 => (1usize..12).prop_map(Op::Extract),
        2 => (1usize..12).prop_map(Op::ExtractBatch),
        2 => any::<usize>().prop_map(Op::Release),
        1 => Just(Op::ReleaseAll),
    ]
}

/// The reference: what a correct mailbox of this geometry holds and answers.
struct Model<M> {
    entries: usize,
    le: usize,
    queued: VecDeque<M>,
    extracted: VecDeque<M>,
    pushed: usize,
    released: usize,
    published: usize,
}

impl<M: Seq> Model<M> {
    fn capacity(&self) -> usize {
        self.entries - self.le
    }

    fn push_ok(&self) -> bool {
        self.pushed < self.published + self.capacity()
    }

    /// Slots `pop` gives back at a time.
    fn pop_batch(&self) -> usize {
        (self.capacity() / 4 / self.le * self.le).max(self.le)
    }

    /// `released` grew by `k`; publishes whole lines once `threshold` slots are
    /// unpublished.
    fn release(&mut self, k: usize, threshold: usize) {
        self.released += k;
        let unpublished = self.released - self.published;
        if unpublished >= threshold {
            self.published += unpublished / self.le * self.le;
        }
    }
}

/// Runs `ops` on a mailbox of `lines` lines of `le` slots and on the model.
fn check<M: Seq>(le: usize, lines: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let entries = le * lines;
    let config = Config {
        entries,
        line_bytes: le * 8 * M::WORDS,
    };
    let (mut p, mut c) = mailbox::<M>(config).unwrap();
    prop_assert_eq!(p.capacity(), entries - le);
    let mut m = Model::<M> {
        entries,
        le,
        queued: VecDeque::new(),
        extracted: VecDeque::new(),
        pushed: 0,
        released: 0,
        published: 0,
    };
    let mut next = 1u64;
    for &op in ops {
        match op {
            Op::Push(n) => {
                for _ in 0..n {
                    let ok = m.push_ok();
                    prop_assert_eq!(p.is_full(), !ok, "is_full at pushed={}", m.pushed);
                    let msg = M::from_seq(next);
                    match p.push(msg) {
                        Ok(()) => {
                            prop_assert!(ok, "push accepted beyond the rule, pushed={}", m.pushed);
                            m.queued.push_back(msg);
                            m.pushed += 1;
                            next += 1;
                        }
                        Err(back) => {
                            prop_assert!(!ok, "push refused with room, pushed={}", m.pushed);
                            prop_assert_eq!(back, msg);
                            break;
                        }
                    }
                    let held = m.queued.len() + m.extracted.len();
                    prop_assert!(held <= p.capacity());
                }
            }
            Op::Pop(n) | Op::Extract(n) => {
                let pop = matches!(op, Op::Pop(_));
                for _ in 0..n {
                    prop_assert_eq!(c.has_message(), !m.queued.is_empty());
                    let got = if pop { c.pop() } else { c.extract() };
                    prop_assert_eq!(got, m.queued.pop_front());
                    let Some(msg) = got else { break };
                    m.extracted.push_back(msg);
                    if pop {
                        // `pop` is `extract` then `release(1)`: the oldest extracted slot
                        // goes back (slots are released in ring order).
                        m.extracted.pop_front();
                        let batch = m.pop_batch();
                        m.release(1, batch);
                    }
                }
            }
            Op::ExtractBatch(n) => {
                // A filler the call must overwrite for every message it returns.
                let mut buf = vec![M::from_seq(u64::MAX); n];
                let got = c.extract_batch(&mut buf);
                prop_assert_eq!(got, n.min(m.queued.len()), "batch of {} taken", got);
                for &msg in &buf[..got] {
                    prop_assert_eq!(Some(msg), m.queued.pop_front());
                    m.extracted.push_back(msg);
                }
                prop_assert_eq!(c.has_message(), !m.queued.is_empty());
            }
            Op::Release(x) => {
                let k = x % (m.extracted.len() + 1);
                c.release(k);
                m.extracted.drain(..k);
                let le = m.le;
                m.release(k, le);
            }
            Op::ReleaseAll => {
                let k = m.extracted.len();
                c.release(k);
                m.extracted.clear();
                let le = m.le;
                m.release(k, le);
            }
        }
        prop_assert_eq!(c.unreleased(), m.extracted.len());
    }
    // Drain: everything left comes out in order, and then the ring is empty again.
    c.release(c.unreleased());
    while let Some(msg) = c.pop() {
        prop_assert_eq!(Some(msg), m.queued.pop_front());
    }
    prop_assert!(m.queued.is_empty());
    prop_assert!(!c.has_message());
    Ok(())
}

fn geometry() -> impl Strategy<Value = (usize, usize)> {
    // 1, 2, 4 or 8 slots a line; 2, 4, 8 or 16 lines.
    ((0u32..4), (1u32..5)).prop_map(|(a, b)| (1 << a, 1 << b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn one_word_matches_model((le, lines) in geometry(), ops in prop::collection::vec(op(), 1..200)) {
        check::<NonZeroU64>(le, lines, &ops)?;
    }

    #[test]
    fn two_words_match_model((le, lines) in geometry(), ops in prop::collection::vec(op(), 1..200)) {
        check::<Two>(le, lines, &ops)?;
    }

    #[test]
    fn four_words_match_model((le, lines) in geometry(), ops in prop::collection::vec(op(), 1..200)) {
        check::<Four>(le, lines, &ops)?;
    }
}

/// A sanity check of the rule itself against hand-derived numbers, so that the model is
/// not just the implementation restated: 64 entries, 4 slots a line (capacity 60, `pop`
/// gives back 12 at a time).
#[test]
fn capacity_rule_by_hand() {
    let mut m = Model::<NonZeroU64> {
        entries: 64,
        le: 4,
        queued: VecDeque::new(),
        extracted: VecDeque::new(),
        pushed: 0,
        released: 0,
        published: 0,
    };
    assert_eq!(m.pop_batch(), 12);
    m.pushed = 59;
    assert!(m.push_ok());
    m.pushed = 60;
    assert!(!m.push_ok(), "full at the capacity");
    m.release(3, 4);
    assert!(!m.push_ok(), "a partial line gives nothing back");
    m.release(1, 4);
    assert_eq!(m.published, 4);
    assert!(m.push_ok());
    m.pushed = 64;
    assert!(!m.push_ok());
    // Pops: eleven slots unpublished are not enough, the twelfth publishes all of them.
    for _ in 0..11 {
        m.release(1, 12);
    }
    assert_eq!(m.published, 4);
    m.release(1, 12);
    assert_eq!(m.published, 16);
    // Seven released past a publication: one whole line goes out, three wait.
    m.release(7, 4);
    assert_eq!(m.published, 20);
    assert_eq!(m.released, 23);
}

/// Two threads, random bursts: the producer pushes bursts of random sizes, the consumer
/// extracts bursts of random sizes and releases random chunks, spinning when it must.
fn stress<M: Seq>(
    le: usize,
    lines: usize,
    n: u64,
    push_bursts: Vec<usize>,
    take_bursts: Vec<usize>,
) {
    let config = Config {
        entries: le * lines,
        line_bytes: le * 8 * M::WORDS,
    };
    let (mut p, mut c) = mailbox::<M>(config).unwrap();
    // A lost message or a lost slot shows as a side waiting for ever: fail instead.
    let deadline = Instant::now() + Duration::from_secs(10);
    let producer = std::thread::spawn(move || {
        let mut i = 1;
        let mut b = 0;
        while i <= n {
            let burst = push_bursts[b % push_bursts.len()];
            b += 1;
            let mut sent = 0;
            while sent < burst && i <= n {
                if p.push(M::from_seq(i)).is_ok() {
                    i += 1;
                    sent += 1;
                } else {
                    assert!(Instant::now() < deadline, "producer stuck at message {i}");
                    std::thread::yield_now();
                }
            }
        }
    });
    let mut next = 1;
    let mut b = 0;
    while next <= n {
        let burst = take_bursts[b % take_bursts.len()];
        b += 1;
        for _ in 0..burst {
            match c.extract() {
                Some(msg) => {
                    assert_eq!(msg, M::from_seq(next), "lost, reordered or torn");
                    next += 1;
                }
                None => break,
            }
        }
        // Release a burst-dependent part; everything when nothing more is waiting, so the
        // producer is never starved for good.
        let held = c.unreleased();
        let k = if c.has_message() { held / 2 } else { held };
        c.release(k);
        if k == 0 {
            assert!(
                Instant::now() < deadline,
                "consumer stuck waiting for {next}"
            );
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    c.release(c.unreleased());
    assert_eq!(c.pop(), None, "a message after the last one");
}

proptest! {
    // Shrinking a thread race finds nothing smaller and re-runs failing cases up to the
    // deadline each: fail on the first counterexample.
    #![proptest_config(ProptestConfig { cases: 12, max_shrink_iters: 0, ..ProptestConfig::default() })]

    #[test]
    fn two_threads_one_word(
        (le, lines) in geometry(),
        push in prop::collection::vec(1usize..64, 1..8),
        take in prop::collection::vec(1usize..64, 1..8),
    ) {
        stress::<NonZeroU64>(le, lines, 20_000, push, take);
    }

    #[test]
    fn two_threads_four_words(
        (le, lines) in geometry(),
        push in prop::collection::vec(1usize..64, 1..8),
        take in prop::collection::vec(1usize..64, 1..8),
    ) {
        stress::<Four>(le, lines, 20_000, push, take);
    }
}

mod frame_pool {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use pspat_mailbox::{FrameError, FramePool};

    #[derive(Clone, Debug)]
    enum Op {
        /// Store a frame of this length.
        Put(usize),
        /// Take the n-th (mod count) stored frame.
        Take(usize),
        /// Discard the n-th (mod count) stored frame.
        Discard(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..40).prop_map(Op::Put),
            any::<usize>().prop_map(Op::Take),
            any::<usize>().prop_map(Op::Discard),
        ]
    }

    proptest! {
        /// Against a map from slot to frame: every stored frame comes out byte-exact
        /// exactly once, in any order; the pool is full exactly when the model holds
        /// `slots` frames; discarded and taken slots are reused.
        #[test]
        fn pool_matches_a_map(ops in proptest::collection::vec(op(), 1..200), slots in 1usize..6) {
            let pool = FramePool::new(2, slots, 32);
            let mut w = FramePool::writer(&pool, 1);
            let mut model: HashMap<u32, Vec<u8>> = HashMap::new();
            let mut order: Vec<u32> = Vec::new();
            let mut stamp = 0u8;
            for op in ops {
                match op {
                    Op::Put(len) => {
                        stamp = stamp.wrapping_add(1);
                        let frame: Vec<u8> = (0..len).map(|i| stamp ^ i as u8).collect();
                        match w.put(&frame) {
                            Ok(s) => {
                                prop_assert!(len <= 32);
                                prop_assert!(model.insert(s, frame).is_none(), "slot {} handed out twice", s);
                                order.push(s);
                            }
                            Err(FrameError::Full) => prop_assert_eq!(model.len(), slots),
                            Err(FrameError::TooLong { .. }) => prop_assert!(len > 32),
                            Err(e) => prop_assert!(false, "unexpected {}", e),
                        }
                    }
                    Op::Take(n) | Op::Discard(n) if order.is_empty() => {
                        let s = (n % slots) as u32;
                        let mut out = [0u8; 32];
                        prop_assert!(pool.take_into(1, s, &mut out).is_err());
                        prop_assert!(!pool.discard(1, s));
                    }
                    Op::Take(n) => {
                        let s = order.remove(n % order.len());
                        let want = model.remove(&s).unwrap();
                        let mut out = [0u8; 32];
                        let len = pool.take_into(1, s, &mut out).unwrap();
                        prop_assert_eq!(&out[..len], &want[..]);
                    }
                    Op::Discard(n) => {
                        let s = order.remove(n % order.len());
                        model.remove(&s);
                        prop_assert!(pool.discard(1, s));
                    }
                }
                prop_assert_eq!(pool.in_use(1), model.len());
                prop_assert_eq!(pool.in_use(0), 0, "the other region is untouched");
            }
        }
    }
}
