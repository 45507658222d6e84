//! The mailbox: a ring of slots, a producer half and a consumer half.
//!
//! # Layout
//!
//! `entries` slots of `M::WORDS` words each, grouped in lines of `line_bytes`; the ring
//! starts on a line boundary. `line_entries = line_bytes / (8 M::WORDS)` slots share a line.
//! Apart from the ring, on a line of its own, one counter: `released`.
//!
//! # Protocol (who writes what)
//!
//! - Slot word 0: written by the producer (a non-zero value, `Release`) to publish a
//!   message, and by the consumer (0, `Relaxed`) to empty the slots of a line once it has
//!   extracted every message of the line, while the line is in its cache. Read by the
//!   consumer with `Acquire`. The producer never reads it.
//! - Other slot words: written by the producer (`Relaxed`) before it publishes word 0, read
//!   by the consumer (`Relaxed`) after it saw word 0 published, so the `Release`/`Acquire`
//!   pair on word 0 orders them.
//! - `released`: the number of slots the consumer has given back, written by the consumer
//!   (`Release`) a whole line at a time, read by the producer (`Acquire`) only when the
//!   credit it cached runs out (as `rtrb` caches the other side's index).
//! - `tail`, `limit` (producer) and `head`, `released`, `published` (consumer): private.
//!
//! A slot is free for the producer once the consumer has *released* it, not when it has
//! extracted it: a consumer that keeps extracted messages (the arbiter keeps a packet's
//! slot until the packet leaves the scheduler) holds the producer back, which is the
//! backpressure the engine needs. Emptying the slots (word 0 = 0) is separate from that
//! credit and happens when the consumer leaves a line, which it has just read: not per
//! message, so that while the producer fills a line the consumer is reading (the
//! nearly-empty case) the consumer does not take the line back from it at every message.
//!
//! The PSPAT paper's mailbox (after FastForward) has no counter: the consumer empties a
//! slot when it releases it, and the producer looks at the slot a line ahead before it
//! enters a line. This crate does not do that because the arbiter releases a slot
//! thousands of messages after it read it, when the line has left its caches: emptying
//! there is a cache miss per line, measured at 23% of the arbiter's time with 64 clients
//! (`perf`). A lap-parity bit in word 0 instead of emptying (so the consumer writes no
//! slot at all) moves messages faster between two threads but made the arbiter's mailbox
//! reads slower on some runs: see docs/PERFORMANCE.md, "The mailbox's release".
//!
//! # Invariants
//!
//! 1. `tail - released <= capacity = entries - line_entries`: the producer writes a slot
//!    only after the consumer released the message the slot held a lap ago. The producer
//!    checks its cached `limit` (a `released` it read, plus `capacity`) and reloads
//!    `released` with `Acquire` when `tail` reaches it; the consumer stores `released` with
//!    `Release` after it read and emptied every slot it counts. So everything the consumer
//!    did to a slot happens before the producer writes it again. One line of slack stays
//!    (the capacity is `entries - line_entries`, as the engine's key rings expect).
//! 2. The consumer sees each message once: it empties every slot of a line when `head`
//!    leaves the line, before it can count any of them released (`released <= head`, and
//!    `published` counts whole lines), so a non-zero word 0 at `head` is a message
//!    published after that (the producer's write of the slot is ordered after it by
//!    invariant 1), never the previous lap's.
//! 3. The two threads share a line only while the consumer reads the line the producer is
//!    filling (the nearly-empty case, which no scheme avoids; the arbiter rate-limits its
//!    reads for that) and when the producer reloads `released`, once per credit.

use std::fmt;
use std::marker::PhantomData;

use crate::message::Message;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering};

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
    /// Most slots a mailbox has: 2^22, 128 MiB of the largest messages. A queue that long
    /// holds seconds of a 10 Gbit/s link; a larger request is a mistake (2^32 would ask for
    /// 128 GiB), refused before anything is allocated.
    pub const MAX_ENTRIES: usize = 1 << 22;

    /// `entries` slots on 64-byte lines.
    pub const fn with_entries(entries: usize) -> Self {
        Self {
            entries,
            line_bytes: 64,
        }
    }

    /// The most messages of type `M` a valid mailbox of this geometry holds at once
    /// ([`Producer::capacity`]): `entries` less one line of slack.
    pub fn capacity<M: Message>(&self) -> usize {
        self.entries - self.line_entries(M::WORDS)
    }

    /// Slots of `words` words each that share a line (at least 1).
    fn line_entries(&self, words: usize) -> usize {
        (self.line_bytes / (8 * words)).max(1)
    }
}

/// A mailbox geometry that cannot work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `entries` is not a power of two.
    EntriesNotPowerOfTwo(usize),
    /// `entries` is above [`Config::MAX_ENTRIES`].
    TooManyEntries(usize),
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
            Self::TooManyEntries(n) => write!(
                f,
                "mailbox entries must be at most {}, got {n}",
                Config::MAX_ENTRIES
            ),
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
    if config.entries > Config::MAX_ENTRIES {
        return Err(ConfigError::TooManyEntries(config.entries));
    }
    if !config.line_bytes.is_power_of_two() || config.line_bytes < slot_bytes {
        return Err(ConfigError::BadLine {
            line_bytes: config.line_bytes,
            slot_bytes,
        });
    }
    let line_entries = config.line_entries(M::WORDS);
    if config.entries < 2 * line_entries {
        return Err(ConfigError::TooFewEntries {
            entries: config.entries,
            min: 2 * line_entries,
        });
    }
    let shared = Arc::new(Ring::new(config, M::WORDS));
    let producer = Producer {
        ring: Arc::clone(&shared),
        tail: 0,
        limit: shared.capacity,
        _m: PhantomData,
    };
    let consumer = Consumer {
        ring: shared,
        head: 0,
        released: 0,
        published: 0,
        _m: PhantomData,
    };
    Ok((producer, consumer))
}

/// The message in a consumer's next slot, if the producer has published one there. A
/// non-zero word 0 is a new message: the consumer emptied the slot when it left the slot's
/// line on the previous lap, and the producer rewrote it only after that (invariant 2).
#[inline(always)]
fn read_slot<M: Message>(slot: &[AtomicU64]) -> Option<M> {
    // ORDERING: Acquire pairs with the producer's Release store of word 0 in `push`,
    // making the other words of the slot visible.
    let w0 = slot[0].load(Ordering::Acquire);
    if w0 == 0 {
        return None;
    }
    let mut words = [w0, 0, 0, 0];
    for k in 1..M::WORDS {
        // ORDERING: Relaxed; ordered by the Acquire load of word 0 above.
        words[k] = slot[k].load(Ordering::Relaxed);
    }
    Some(M::decode(words))
}

/// A value alone on its cache lines (two: x86 prefetches lines in pairs), so that the
/// consumer's stores to it do not disturb the ring or the halves' private fields.
#[repr(align(128))]
struct Alone<T>(T);

/// The slots and the credit counter, shared by the two halves.
struct Ring {
    /// `entries * words` words plus room to start on a line boundary.
    words: Box<[AtomicU64]>,
    /// Index in `words` of slot 0's word 0 (the first line-aligned word).
    base: usize,
    /// `entries - 1`.
    mask: usize,
    /// Slots per line.
    line_entries: usize,
    /// Most messages queued at once: `entries - line_entries`.
    capacity: usize,
    /// Slots `Consumer::pop` gives back at a time: a quarter of the capacity in whole
    /// lines, at least one line.
    pop_batch: usize,
    /// Slots the consumer has given back (a position, wrapping), published a whole line at
    /// a time.
    released: Alone<AtomicUsize>,
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
        let line_entries = config.line_entries(stride);
        Self {
            words,
            base,
            mask: config.entries - 1,
            line_entries,
            capacity: config.entries - line_entries,
            pop_batch: ((config.entries - line_entries) / 4 / line_entries * line_entries)
                .max(line_entries),
            released: Alone(AtomicUsize::new(0)),
        }
    }

    /// The words of the slot at ring position `pos` (any integer; wraps), `M::WORDS` of
    /// them: one bounds check here, none on the constant indices the callers use.
    #[inline(always)]
    fn slot<M: Message>(&self, pos: usize) -> &[AtomicU64] {
        let at = self.base + (pos & self.mask) * M::WORDS;
        &self.words[at..at + M::WORDS]
    }

    /// Consumer side: empties the line that position `head` (a line boundary) just left,
    /// every slot of which has been read.
    #[inline]
    fn empty_line<M: Message>(&self, head: usize) {
        let le = self.line_entries;
        // A line never wraps: the ring's size is a multiple of the line's.
        let at = self.base + (head.wrapping_sub(le) & self.mask) * M::WORDS;
        let line = &self.words[at..at + le * M::WORDS];
        // A plain index loop: `line.len()` bounds it, so the indexing needs no check (an
        // iterator adapter here cost more instructions than the stores, under callgrind).
        let mut k = 0;
        while k < line.len() {
            // ORDERING: Relaxed; the producer never reads word 0, and it writes this slot
            // again only after the Release store of a `released` that counts it
            // (`Consumer::publish`), which orders this store (and the reads of the slot)
            // before that write. `published` counts whole lines, all of them emptied here
            // first.
            line[k].store(0, Ordering::Relaxed);
            k += M::WORDS;
        }
    }

    /// The consumer's published `released`, plus the capacity: the position the producer
    /// may write up to (excluded).
    #[inline]
    fn limit(&self) -> usize {
        // ORDERING: Acquire pairs with the consumer's Release store in `Consumer::publish`,
        // which follows its reads and emptying of every slot it counts as released: those
        // happen before the producer writes any of them again (invariant 1).
        self.released
            .0
            .load(Ordering::Acquire)
            .wrapping_add(self.capacity)
    }
}

/// The producer half: owned by exactly one thread at a time (it is `Send`, not `Sync`).
pub struct Producer<M: Message> {
    ring: Arc<Ring>,
    /// Next position to write. Private.
    tail: usize,
    /// Position the producer may write up to (excluded), as of the last read of the
    /// consumer's `released`. Private.
    limit: usize,
    _m: PhantomData<fn(M) -> M>,
}

impl<M: Message> Producer<M> {
    /// Appends `msg`, or gives it back if the mailbox is full.
    #[inline]
    pub fn push(&mut self, msg: M) -> Result<(), M> {
        if self.tail == self.limit && !self.more_credit() {
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

    /// The cached credit ran out: reads the consumer's `released` again. Once per line
    /// the consumer gives back at most, out of the per-message path.
    #[inline(never)]
    fn more_credit(&mut self) -> bool {
        self.limit = self.ring.limit();
        self.tail != self.limit
    }

    /// Whether the next `push` would fail right now. The consumer may free room at any
    /// moment, so `true` can be stale; `false` stays true until this producer pushes.
    pub fn is_full(&self) -> bool {
        self.tail == self.limit && self.tail == self.ring.limit()
    }

    /// The most messages that can ever be queued: `entries` less one line of slack.
    pub fn capacity(&self) -> usize {
        self.ring.capacity
    }
}

/// The consumer half: owned by exactly one thread at a time.
pub struct Consumer<M: Message> {
    ring: Arc<Ring>,
    /// Next position to read. Private.
    head: usize,
    /// Positions below this are released (given back by the caller). Private.
    released: usize,
    /// The `released` the producer was last told: a multiple of the line length,
    /// `published <= released <= head`. Private.
    published: usize,
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
        if self.released.wrapping_sub(self.published) >= self.ring.pop_batch {
            self.publish();
        }
        Some(msg)
    }

    /// Takes the next message but keeps its slot occupied until [`Consumer::release`]:
    /// the producer cannot reuse it meanwhile.
    #[inline]
    pub fn extract(&mut self) -> Option<M> {
        let msg = read_slot::<M>(self.ring.slot::<M>(self.head))?;
        debug_assert!(self.head.wrapping_sub(self.released) < self.ring.capacity);
        self.head = self.head.wrapping_add(1);
        if self.head & (self.ring.line_entries - 1) == 0 {
            self.ring.empty_line::<M>(self.head);
        }
        Some(msg)
    }

    /// Takes up to `buf.len()` messages at once, as that many [`Consumer::extract`] calls
    /// would (their slots stay occupied until [`Consumer::release`]); returns how many,
    /// in `buf[..n]`. One tight loop over the slots, with the ring's geometry in registers:
    /// the reads of consecutive slots do not wait for the caller's work on each message,
    /// so the processor can have several of the producer's lines in flight at once.
    #[inline]
    pub fn extract_batch(&mut self, buf: &mut [M]) -> usize {
        let ring = &*self.ring;
        // The geometry in locals: `Ring` holds atomics, so the compiler cannot assume the
        // stores below leave its fields alone and would reload them per message.
        let (words, base, mask, le) = (&ring.words[..], ring.base, ring.mask, ring.line_entries);
        let mut head = self.head;
        let mut n = 0;
        for out in buf.iter_mut() {
            let at = base + (head & mask) * M::WORDS;
            let Some(msg) = read_slot::<M>(&words[at..at + M::WORDS]) else {
                break;
            };
            debug_assert!(head.wrapping_sub(self.released) < ring.capacity);
            *out = msg;
            head = head.wrapping_add(1);
            n += 1;
            if head & (le - 1) == 0 {
                ring.empty_line::<M>(head);
            }
        }
        self.head = head;
        n
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
        if self.released.wrapping_sub(self.published) >= self.ring.line_entries {
            self.publish();
        }
    }

    /// Number of extracted messages whose slots are not released yet.
    pub fn unreleased(&self) -> usize {
        self.head.wrapping_sub(self.released)
    }

    /// Tells the producer about every wholly released line.
    #[inline(never)]
    fn publish(&mut self) {
        let le = self.ring.line_entries;
        let lines = self.released.wrapping_sub(self.published) / le;
        self.published = self.published.wrapping_add(lines * le);
        // ORDERING: Release orders this thread's reads and emptying of every slot below
        // `published` before the store; the producer's Acquire load in `Ring::limit` pairs
        // with it (invariant 1).
        self.ring
            .released
            .0
            .store(self.published, Ordering::Release);
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

    /// Pushes `first..=last`, each of which must fit.
    fn push_all(p: &mut Producer<NonZeroU64>, first: u64, last: u64) {
        for i in first..=last {
            p.push(nz(i)).unwrap();
        }
    }

    /// Pops `first..=last`, which must come out in order.
    fn pop_all(c: &mut Consumer<NonZeroU64>, first: u64, last: u64) {
        for i in first..=last {
            assert_eq!(c.pop(), Some(nz(i)));
        }
    }

    #[test]
    fn config_capacity_is_the_producers() {
        for (entries, line_bytes) in [(4, 16), (16, 64), (512, 64), (64, 128)] {
            let config = Config {
                entries,
                line_bytes,
            };
            let (p, _c) = mailbox::<NonZeroU64>(config).unwrap();
            assert_eq!(config.capacity::<NonZeroU64>(), p.capacity(), "{config:?}");
        }
    }

    #[test]
    fn rejects_bad_geometry() {
        assert_eq!(
            mailbox::<NonZeroU64>(Config::with_entries(100)).err(),
            Some(ConfigError::EntriesNotPowerOfTwo(100))
        );
        for n in [Config::MAX_ENTRIES * 2, 1 << 32] {
            assert_eq!(
                mailbox::<NonZeroU64>(Config::with_entries(n)).err(),
                Some(ConfigError::TooManyEntries(n))
            );
        }
        assert!(mailbox::<NonZeroU64>(Config::with_entries(Config::MAX_ENTRIES)).is_ok());
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
        push_all(&mut p, 1, 24);
        assert!(p.is_full());
        assert_eq!(p.push(nz(99)), Err(nz(99)));
        // Taking fewer than a line frees nothing; a whole line frees a line.
        pop_all(&mut c, 1, 7);
        assert!(p.push(nz(99)).is_err());
        assert_eq!(c.pop(), Some(nz(8)));
        push_all(&mut p, 25, 32);
        assert!(p.push(nz(33)).is_err());
        pop_all(&mut c, 9, 32);
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn extracted_slots_stay_taken_until_released() {
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config::with_entries(16)).unwrap();
        push_all(&mut p, 1, 8);
        for i in 1..=8 {
            assert_eq!(c.extract(), Some(nz(i)));
        }
        assert_eq!(c.unreleased(), 8);
        assert!(p.push(nz(9)).is_err(), "no slot was released");
        c.release(3);
        assert!(p.push(nz(9)).is_err(), "a partial line is not given back");
        c.release(5);
        push_all(&mut p, 9, 16);
        assert_eq!(c.extract(), Some(nz(9)));
    }

    #[test]
    fn pop_gives_slots_back_a_quarter_at_a_time() {
        // 512 one-word slots on 64-byte lines: capacity 504, given back 120 at a time by
        // `pop` (a quarter, in whole lines of 8).
        let (mut p, mut c) = mailbox::<NonZeroU64>(Config::with_entries(512)).unwrap();
        push_all(&mut p, 1, 504);
        assert!(p.is_full());
        pop_all(&mut c, 1, 119);
        assert!(p.is_full(), "119 popped slots are not given back yet");
        assert_eq!(c.pop(), Some(nz(120)));
        push_all(&mut p, 505, 624);
        assert!(p.push(nz(625)).is_err());
        // `release` gives back every whole line at once.
        for i in 121..=136 {
            assert_eq!(c.extract(), Some(nz(i)));
        }
        c.release(16);
        push_all(&mut p, 625, 640);
        assert!(p.is_full());
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
