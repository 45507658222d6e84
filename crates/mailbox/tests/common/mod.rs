//! Test messages of 1, 2 and 4 words built from a sequence number, shared by the loom
//! models and the property tests.
//!
//! Each word is a different function of the sequence number, so a torn read (words of two
//! messages, or of a message and an empty slot) never decodes to a valid message.

#![allow(dead_code)]

use std::num::NonZeroU64;

use pspat_mailbox::Message;

/// A message that can be built from, and checked against, its sequence number `i >= 1`.
pub trait Seq: Message + std::fmt::Debug + PartialEq + Send + 'static {
    fn from_seq(i: u64) -> Self;
}

impl Seq for NonZeroU64 {
    fn from_seq(i: u64) -> Self {
        NonZeroU64::new(i).expect("sequence numbers start at 1")
    }
}

/// A 2-word message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Two(pub [u64; 2]);

impl Message for Two {
    const WORDS: usize = 2;
    fn encode(self) -> [u64; 4] {
        [self.0[0], self.0[1], 0, 0]
    }
    fn decode(w: [u64; 4]) -> Self {
        Two([w[0], w[1]])
    }
}

impl Seq for Two {
    fn from_seq(i: u64) -> Self {
        Two([i, i.wrapping_mul(0x9e37_79b9) ^ 0xabc])
    }
}

/// A 4-word message (the size of the engine's `Pkt`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Four(pub [u64; 4]);

impl Message for Four {
    const WORDS: usize = 4;
    fn encode(self) -> [u64; 4] {
        self.0
    }
    fn decode(w: [u64; 4]) -> Self {
        Four(w)
    }
}

impl Seq for Four {
    fn from_seq(i: u64) -> Self {
        Four([i, i + 100, !i, (i << 20) | 7])
    }
}
