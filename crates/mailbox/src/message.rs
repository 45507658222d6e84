//! What a mailbox slot carries.

use std::num::NonZeroU64;

/// A value that travels through a mailbox ([`crate::mailbox()`]): one to four 64-bit words,
/// the first of which is never zero.
///
/// PSPAT's mailboxes (section 4.1 of the paper, after FastForward) mark an empty slot with a
/// special value, so that the consumer finds messages without reading an index the producer
/// writes: here word 0 is that marker, 0 meaning "empty". The other words travel alongside
/// it, published by the store of word 0.
pub trait Message: Copy {
    /// Number of 64-bit words: 1, 2 or 4 (so that slots tile a cache line).
    const WORDS: usize;
    /// The words; `words[0]` must not be zero, and only the first `WORDS` are carried.
    fn encode(self) -> [u64; 4];
    /// Rebuilds the value from the words `encode` produced.
    fn decode(words: [u64; 4]) -> Self;
}

impl Message for NonZeroU64 {
    const WORDS: usize = 1;
    fn encode(self) -> [u64; 4] {
        [self.get(), 0, 0, 0]
    }
    fn decode(words: [u64; 4]) -> Self {
        // A slot is decoded only after its word 0 was seen non-zero.
        NonZeroU64::new(words[0]).expect("mailbox slot decoded while empty")
    }
}
