//! The mailbox: a ring of slots, a producer half and a consumer half.
//!
//! # Layout
//!
//! `entries` slots of `M::WORDS` words each, grouped in lines of `line_bytes`; the ring
//! starts on a line boundary. `line_entries = line_bytes / (8 M::WORDS)` slots share a line.
//!
//! # Protocol (who writes what)
//!
//! - Slot word 0: written by the producer (a non-zero value, `Release`) to publish a
//!   message, and by the consumer (0, `Release`) to release the slot. Read by both with
//!   `Acquire`. This is the only shared state.
//! - Other slot words: written by the producer (`Relaxed`) before it publishes word 0, read
//!   by the consumer (`Relaxed`) after it saw word 0 published, so the `Release`/`Acquire`
//!   pair on word 0 orders them.
//! - `tail`, `check` (producer) and `head`, `released`, `cleared` (consumer): private.
//!
//! # Invariants
//!
//! 1. Lines are filled and released in ring order, each line completely: the producer
//!    writes every slot in order, and the consumer clears a line only when every slot in it
//!    has been released.
//! 2. When the producer is about to write the first slot of line L it checks that the first
//!    slot of line L+1 is empty. Line L+1 was filled on the previous lap (invariant 1) before
//!    line L was filled again, so it being empty means the consumer cleared it, hence
//!    cleared line L before it (invariant 1). The consumer clears L+1's first slot with a
//!    `Release` store after clearing all of L and after reading L's messages, and the
//!    producer loads it with `Acquire`: everything the consumer did to L happens before the
//!    producer writes L again. The price is one line of slack: at most
//!    `entries - line_entries` messages are ever queued.
//! 3. The producer never writes a line while the consumer still reads it (invariant 2), and
//!    the consumer clears only lines the producer has left: the two threads share a line
//!    only while the consumer reads the line the producer is filling (the nearly-empty
//!    case, which no scheme avoids; the arbiter rate-limits its reads for that).

use std::fmt;
use std::marker::PhantomData;

use crate::message::Message;
use crate::sync::{Arc, AtomicU64, Ordering};

/// Geometry of a mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of slots; a power of two, at least two lines' worth.
    pub entries: usize,
    /// Cache line size in bytes; a power of two, at least one slot (64 on x86).
    pub line_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            entries: 512,
            line_bytes: 64,
        }
    }
}

impl Config {
    /// `entries` slots on 64-byte lines.
    pub const fn with_entries(entries: usize) -> Self {
        Self {
            entries,
            line_bytes: 64,
        }
    }
}

/// A mailbox geometry that cannot work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `entries` is not a power of two.
    EntriesNotPowerOfTwo(usize),
    /// `line_bytes` is not a power of two or is smaller than one slot.
    BadLine {
        /// The line size asked for.
        line_bytes: usize,
        /// The size of one slot.
        slot_bytes: usize,
    },
    /// Fewer than two lines of slots: the producer keeps one line of slack.
    TooFewEntries {
        /// The entries asked for.
        entries: usize,
        /// The smallest number that works with this line size.
        min: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::EntriesNotPowerOfTwo(n) => {
                write!(f, "mailbox entries must be a power of two, got {n}")
            }
            Self::BadLine {
                line_bytes,
                slot_bytes,
            } => write!(
                f,
                "mailbox line size must be a power of two of at least one slot \
                 ({slot_bytes} bytes), got {line_bytes}"
            ),
            Self::TooFewEntries { entries, min } => write!(
                f,
                "mailbox needs at least two cache lines of slots ({min} entries), got {entries}"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Builds a mailbox and returns its two halves.
pub fn mailbox<M: Message>(config: Config) -> Result<(Producer<M>, Consumer<M>), ConfigError> {
    assert!(
        matches!(M::WORDS, 1 | 2 | 4),
        "Message::WORDS must be 1, 2 or 4"
    );
    let slot_bytes = 8 * M::WORDS;
    if !config.entries.is_power_of_two() {
        return Err(ConfigError::EntriesNotPowerOfTwo(config.entries));
    }
    if !config.line_bytes.is_power_of_two() || config.line_bytes < slot_bytes {
        return Err(ConfigError::BadLine {
            line_bytes: config.line_bytes,
            slot_bytes,
        });
    }
    let line_entries = config.line_bytes / slot_bytes;
    if config.entries < 2 * line_entries {
        return Err(ConfigError::TooFewEntries {
            entries: config.entries,
            min: 2 * line_entries,
        });
    }
    let shared = Arc::new(Ring::new(config, slot_bytes / 8));
    let producer = Producer {
        ring: Arc::clone(&shared),
        tail: 0,
        check: 0,
        _m: PhantomData,
    };
    let consumer = Consumer {
        ring: shared,
        head: 0,
        released: 0,
        cleared: 0,
        _m: PhantomData,
    };
    Ok((producer, consumer))
}

/// The slots, shared by the two halves.
struct Ring {
    /// `entries * words` words plus room to start on a line boundary.
    words: Box<[AtomicU64]>,
    /// Index in `words` of slot 0's word 0 (the first line-aligned word).
    base: usize,
    /// `entries - 1`.
    mask: usize,
    /// Slots per line.
    line_entries: usize,
}

impl Ring {
    fn new(config: Config, stride: usize) -> Self {
        let line_words = config.line_bytes / 8;
        let len = config.entries * stride + line_words;
        let words: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
        // Start on a line boundary so that `line_entries` slots share exactly one line.
        let addr = words.as_ptr() as usize;
        let misalign = (addr / 8) % line_words;
        let base = if misalign == 0 {
            0
        } else {
            line_words - misalign
        };
        Self {
            words,
            base,
            mask: config.entries - 1,
            line_entries: config.line_bytes / (8 * stride),
        }
    }

    /// The words of the slot at ring position `pos` (any integer; wraps), `M::WORDS` of
    /// them: one bounds check here, none on the constant indices the callers use.
    #[inline(always)]
    fn slot<M: Message>(&self, pos: usize) -> &[AtomicU64] {
        let at = self.base + (pos & self.mask) * M::WORDS;
        &self.words[at..at + M::WORDS]
    }
}

/// The producer half: owned by exactly one thread at a time (it is `Send`, not `Sync`).
pub struct Producer<M: Message> {
    ring: Arc<Ring>,
    /// Next position to write. Private.
    tail: usize,
    /// First position of the next line to enter: when `tail == check` the producer checks
    /// the line ahead before writing. Private.
    check: usize,
    _m: PhantomData<fn(M) -> M>,
}

impl<M: Message> Producer<M> {
    /// Appends `msg`, or gives it back if the mailbox is full.
    #[inline]
    pub fn push(&mut self, msg: M) -> Result<(), M> {
        if self.tail == self.check && !self.enter_line() {
            return Err(msg);
        }
        let slot = self.ring.slot::<M>(self.tail);
        let words = msg.encode();
        debug_assert_ne!(words[0], 0, "Message word 0 must be non-zero");
        for k in 1..M::WORDS {
            // ORDERING: Relaxed; published by the Release store of word 0 below.
            slot[k].store(words[k], Ordering::Relaxed);
        }
        // ORDERING: Release publishes the words above; pairs with the Acquire load of word
        // 0 in `Consumer::extract`.
        slot[0].store(words[0], Ordering::Release);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// The producer is about to write the first slot of a line: it may once the first
    /// slot of the line after it is free (invariant 2 in the module docs). Once per line,
    /// out of the per-message path.
    #[inline(never)]
    fn enter_line(&mut self) -> bool {
        let ring = &*self.ring;
        let ahead = ring.slot::<M>(self.tail.wrapping_add(ring.line_entries));
        // ORDERING: Acquire pairs with the consumer's Release clear of this slot in
        // `Consumer::clear_lines`, which follows its clears and reads of this line.
        if ahead[0].load(Ordering::Acquire) != 0 {
            return false;
        }
        self.check = self.tail.wrapping_add(ring.line_entries);
        true
    }

    /// Whether the next `push` would fail right now. The consumer may free room at any
    /// moment, so `true` can be stale; `false` stays true until this producer pushes.
    pub fn is_full(&self) -> bool {
        if self.tail != self.check {
            return false;
        }
        let ahead = self
            .ring
            .slot::<M>(self.tail.wrapping_add(self.ring.line_entries));
        // ORDERING: Acquire, as in `enter_line`.
        ahead[0].load(Ordering::Acquire) != 0
    }

    /// The most messages that can ever be queued: `entries` less one line of slack.
    pub fn capacity(&self) -> usize {
        self.ring.mask + 1 - self.ring.line_entries
    }
}

/// The consumer half: owned by exactly one thread at a time.
pub struct Consumer<M: Message> {
    ring: Arc<Ring>,
    /// Next position to read. Private.
    head: usize,
    /// Positions below this are released (given back by the caller). Private.
    released: usize,
    /// Positions below this are cleared (zeroed in the ring); a multiple of the line
    /// length, `cleared <= released <= head`. Private.
    cleared: usize,
    _m: PhantomData<fn(M) -> M>,
}

impl<M: Message> Consumer<M> {
    /// Takes the next message and releases its slot at once (`extract` then `release(1)`:
    /// with earlier messages extracted and unreleased, the oldest of those is released).
    #[inline]
    pub fn pop(&mut self) -> Option<M> {
        let msg = self.extract()?;
        // `extract` just took a slot, so there is one to release: no check needed.
        self.released = self.released.wrapping_add(1);
        if self.released.wrapping_sub(self.cleared) >= self.ring.line_entries {
            self.clear_lines();
        }
        Some(msg)
    }

    /// Takes the next message but keeps its slot occupied until [`Consumer::release`]:
    /// the producer cannot reuse it meanwhile.
    #[inline]
    pub fn extract(&mut self) -> Option<M> {
        let slot = self.ring.slot::<M>(self.head);
        // ORDERING: Acquire pairs with the producer's Release store of word 0 in `push`,
        // making the other words of the slot visible.
        let w0 = slot[0].load(Ordering::Acquire);
        if w0 == 0 {
            return None;
        }
        // A non-zero slot at `head` is a new message, never one extracted a lap ago and
        // not yet cleared: the producer keeps `tail <= cleared + entries - line_entries`
        // (invariant 2), and `head <= tail`.
        debug_assert!(self.head.wrapping_sub(self.cleared) <= self.ring.mask);
        let mut words = [w0, 0, 0, 0];
        for k in 1..M::WORDS {
            // ORDERING: Relaxed; ordered by the Acquire load of word 0 above.
            words[k] = slot[k].load(Ordering::Relaxed);
        }
        self.head = self.head.wrapping_add(1);
        Some(M::decode(words))
    }

    /// Whether a message is waiting. It stays true until this consumer takes it; `false`
    /// may be stale as soon as it is returned.
    pub fn has_message(&self) -> bool {
        // ORDERING: Acquire, as in `extract`.
        self.ring.slot::<M>(self.head)[0].load(Ordering::Acquire) != 0
    }

    /// Gives back the slots of the `n` oldest extracted and unreleased messages. Slots go
    /// back to the producer a whole line at a time.
    ///
    /// # Panics
    /// If fewer than `n` messages are extracted and unreleased (a caller bug that would
    /// corrupt the ring).
    #[inline]
    pub fn release(&mut self, n: usize) {
        let pending = self.head.wrapping_sub(self.released);
        assert!(
            n <= pending,
            "mailbox: releasing {n} slots but only {pending} are extracted"
        );
        self.released = self.released.wrapping_add(n);
        if self.released.wrapping_sub(self.cleared) >= self.ring.line_entries {
            self.clear_lines();
        }
    }

    /// Number of extracted messages whose slots are not released yet.
    pub fn unreleased(&self) -> usize {
        self.head.wrapping_sub(self.released)
    }

    /// Zeroes every wholly released line, oldest first: the released slots of whole lines
    /// form at most two contiguous runs of the ring (two when they wrap).
    #[inline(never)]
    fn clear_lines(&mut self) {
        let ring = &*self.ring;
        let le = ring.line_entries;
        // `cleared` is a multiple of `le`, and so is the ring's size: a run never splits a
        // line.
        let slots = self.released.wrapping_sub(self.cleared) / le * le;
        let start = self.cleared & ring.mask;
        let first = slots.min(ring.mask + 1 - start);
        for (from, n) in [(start, first), (0, slots - first)] {
            let at = ring.base + from * M::WORDS;
            for word0 in ring.words[at..at + n * M::WORDS].iter().step_by(M::WORDS) {
                // ORDERING: Release orders this line's reads and clears before the store;
                // the producer's Acquire load in `enter_line` of the first slot of a line
                // pairs with it (invariant 2). Within a line the order does not matter:
                // the producer looks only at first slots, a line ahead.
                word0.store(0, Ordering::Release);
            }
        }
        self.cleared = self.cleared.wrapping_add(slots);
    }
}

// Both halves move between threads (they are Send because `Ring` is Send + Sync); neither
// is Sync: `&mut self` on every operation keeps each half single-threaded.

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn nz(v: u64) -> NonZeroU64 {
        NonZeroU64::new(v).unwrap()
    }

    #[test]
    fn rejects_bad_geometry() {
        assert_eq!(
            mailbox::<NonZeroU64>(Config::with_entries(100)).err(),
            Some(ConfigError::EntriesNotPowerOfTwo(100))
        );
        assert!(matches!(
            mailbox::<NonZeroU64>(Config::with_entries(8)),
            Err(ConfigError::TooFewEntries { min: 16, .. })
        ));
        assert!(matches!(
            mailbox::<NonZeroU64>(Config {
                entries: 64,
                line_bytes: 4
            }),
            Err(ConfigError::BadLine { .. })
        ));
    }

    #[test]
    fn fills_to_capacity_then_refuses() {
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config::with_entries(32)).unwrap();
        assert_eq!(p.capacity(), 24);
        for i in 1..=24 {
            p.push(nz(i)).unwrap();
        }
        assert!(p.is_full());
        assert_eq!(p.push(nz(99)), Err(nz(99)));
        // Taking fewer than a line frees nothing; a whole line frees a line.
        for i in 1..=7 {
            assert_eq!(c.pop(), Some(nz(i)));
        }
        assert!(p.push(nz(99)).is_err());
        assert_eq!(c.pop(), Some(nz(8)));
        for i in 25..=32 {
            p.push(nz(i)).unwrap();
        }
        assert!(p.push(nz(33)).is_err());
        for i in 9..=32 {
            assert_eq!(c.pop(), Some(nz(i)));
        }
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn extracted_slots_stay_taken_until_released() {
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config::with_entries(16)).unwrap();
        for i in 1..=8 {
            p.push(nz(i)).unwrap();
        }
        for i in 1..=8 {
            assert_eq!(c.extract(), Some(nz(i)));
        }
        assert_eq!(c.unreleased(), 8);
        assert!(p.push(nz(9)).is_err(), "no slot was released");
        c.release(3);
        assert!(p.push(nz(9)).is_err(), "a partial line is not given back");
        c.release(5);
        for i in 9..=16 {
            p.push(nz(i)).unwrap();
        }
        assert_eq!(c.extract(), Some(nz(9)));
    }

    #[test]
    #[should_panic(expected = "releasing 2 slots but only 1")]
    fn over_release_panics() {
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config::with_entries(16)).unwrap();
        p.push(nz(1)).unwrap();
        c.extract().unwrap();
        c.release(2);
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Four([u64; 4]);
    impl Message for Four {
        const WORDS: usize = 4;
        fn encode(self) -> [u64; 4] {
            self.0
        }
        fn decode(words: [u64; 4]) -> Self {
            Four(words)
        }
    }

    #[test]
    fn multi_word_messages_cross_threads_in_order() {
        let (mut p, mut c) = mailbox::<Four>(Config::with_entries(64)).unwrap();
        const N: u64 = 200_000;
        let t = std::thread::spawn(move || {
            let mut i = 1;
            while i <= N {
                if p.push(Four([i, i * 3, !i, i ^ 0x55])).is_ok() {
                    i += 1;
                } else {
                    // Yield, not spin: on a loaded machine both threads may share a CPU.
                    std::thread::yield_now();
                }
            }
        });
        let mut next = 1;
        while next <= N {
            if let Some(Four(w)) = c.pop() {
                assert_eq!(w, [next, next * 3, !next, next ^ 0x55]);
                next += 1;
            } else {
                std::thread::yield_now();
            }
        }
        t.join().unwrap();
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn ring_starts_on_a_line() {
        let (p, _c) = mailbox::<Four>(Config {
            entries: 16,
            line_bytes: 128,
        })
        .unwrap();
        let r = &*p.ring;
        let addr = &r.words[r.base] as *const AtomicU64 as usize;
        assert_eq!(addr % 128, 0);
        assert_eq!(r.line_entries, 4);
    }
}
