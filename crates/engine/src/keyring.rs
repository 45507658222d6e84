//! Key rings: how a client hands the arbiter a packet's 5-tuple without widening the
//! descriptor.
//!
//! With a dummynet-style configuration, a client classifies each packet (stage 1) and the
//! arbiter needs the packet's key to find its scheduler instance and queue (stage 2). The
//! key (5 words) does not fit in the 4-word descriptor, so each client has a ring of keys
//! beside its mailbox, indexed by the packet's sequence number: the client writes the key
//! of sequence `s` into slot `s % N`, then pushes the descriptor; the arbiter reads slot
//! `s % N` after taking the descriptor out.
//!
//! Why a slot is never overwritten too early: `N` is the mailbox's size, the mailbox holds
//! at most `N - 1` packets of the client (a cache line of slots is always slack), and a
//! packet's mailbox slot is released only after the arbiter has read its key. So when the
//! client writes the key of sequence `s`, the packets it still has outstanding are at most
//! `s - N + 1 ..= s - 1`, none of which uses slot `s % N`. (A refused push does not consume
//! its sequence number, so the retry rewrites the same slot.)
//!
//! Each slot also holds the packet's **tag**: a 32-bit value the client chooses (by default
//! the sequence number itself) which replaces the descriptor's `seq` once the arbiter has
//! read the key. A shaper puts the index of the frame's buffer there, so the transmitting
//! side finds the bytes from the descriptor alone (see `pspat_mailbox::frames`): after the
//! arbiter, a dummynet-mode descriptor's `seq` is its tag.
//!
//! A third part, the **hops** word, names the pipes and queues after the first that a
//! chained packet crosses (`one_pass 0`, see `hops.rs`); 0 for every other packet.
//!
//! The words are atomics accessed with `Relaxed`: the mailbox push is a Release store and
//! the arbiter's extraction an Acquire load, which orders the key words written before the
//! push before the arbiter's reads after the extraction. Safe Rust, no data race.

use crate::sync::{AtomicU64, Ordering};

/// Words per key (`FlowKey::to_words`).
pub const KEY_WORDS: usize = 5;

/// Words per slot: the key, the tag, the hops.
const SLOT_WORDS: usize = KEY_WORDS + 2;
/// Index of the tag and of the hops word in a slot.
const TAG: usize = KEY_WORDS;
const HOPS: usize = KEY_WORDS + 1;

/// The key rings of every client.
#[derive(Debug)]
pub struct KeyRings {
    /// `clients * entries` keys and tags.
    words: Box<[[AtomicU64; SLOT_WORDS]]>,
    entries: usize,
}

impl KeyRings {
    /// Rings of `entries` keys (the mailbox size, a power of two) for `clients` clients; no
    /// memory when `entries` is 0 (engines without a dummynet configuration).
    pub fn new(clients: usize, entries: usize) -> Self {
        assert!(entries == 0 || entries.is_power_of_two());
        Self {
            words: (0..clients * entries)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            entries,
        }
    }

    #[inline]
    fn slot(&self, client: u32, seq: u32) -> &[AtomicU64; SLOT_WORDS] {
        &self.words[client as usize * self.entries + (seq as usize & (self.entries - 1))]
    }

    /// Client side: the key, tag and hops word of its packet `seq`, before pushing the
    /// packet.
    #[inline]
    pub fn put(&self, client: u32, seq: u32, key: [u64; KEY_WORDS], tag: u32, hops: u64) {
        let slot = self.slot(client, seq);
        for (w, v) in slot.iter().zip(key) {
            // ORDERING: Relaxed; published by the mailbox push's Release (module docs).
            w.store(v, Ordering::Relaxed);
        }
        // ORDERING: as above.
        slot[TAG].store(u64::from(tag), Ordering::Relaxed);
        // ORDERING: as above.
        slot[HOPS].store(hops, Ordering::Relaxed);
    }

    /// Client side: only the tag of packet `seq` (a packet that needs no key).
    #[inline]
    pub fn put_tag(&self, client: u32, seq: u32, tag: u32) {
        // ORDERING: Relaxed; published by the mailbox push's Release (module docs).
        self.slot(client, seq)[TAG].store(u64::from(tag), Ordering::Relaxed);
    }

    /// Arbiter side: the tag of `client`'s packet `seq`, after extracting it and before
    /// releasing its mailbox slot.
    #[inline]
    pub fn tag(&self, client: u32, seq: u32) -> u32 {
        // ORDERING: Relaxed; the mailbox extraction's Acquire orders it after `put`.
        self.slot(client, seq)[TAG].load(Ordering::Relaxed) as u32
    }

    /// Arbiter side: the hops word of `client`'s packet `seq` (one with a key), after
    /// extracting it.
    #[inline]
    pub fn hops(&self, client: u32, seq: u32) -> u64 {
        // ORDERING: Relaxed; the mailbox extraction's Acquire orders it after `put`.
        self.slot(client, seq)[HOPS].load(Ordering::Relaxed)
    }

    /// Arbiter side: the key of `client`'s packet `seq`, after extracting it.
    #[inline]
    pub fn get(&self, client: u32, seq: u32) -> [u64; KEY_WORDS] {
        let slot = self.slot(client, seq);
        // ORDERING: Relaxed; the mailbox extraction's Acquire orders it after `put`.
        std::array::from_fn(|i| slot[i].load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slots_wrap_per_client_and_do_not_overlap() {
        let r = KeyRings::new(3, 4);
        for c in 0..3u32 {
            for s in 0..4u32 {
                r.put(
                    c,
                    s,
                    [u64::from(c * 10 + s); KEY_WORDS],
                    c * 100 + s,
                    u64::from(s),
                );
            }
        }
        assert_eq!(r.get(1, 2), [12; KEY_WORDS]);
        assert_eq!(r.get(2, 7), [23; KEY_WORDS], "sequence 7 uses slot 3");
        assert_eq!(r.tag(1, 2), 102);
        assert_eq!(r.tag(2, 7), 203, "the tag shares the key's slot");
        assert_eq!(r.hops(2, 7), 3, "the hops share the key's slot");
        r.put(0, 5, [99; KEY_WORDS], 7, 0);
        assert_eq!(r.get(0, 1), [99; KEY_WORDS], "sequence 5 reuses slot 1");
        assert_eq!(r.tag(0, 1), 7);
        r.put_tag(0, 1, 8);
        assert_eq!(
            (r.get(0, 1), r.tag(0, 1)),
            ([99; KEY_WORDS], 8),
            "a tag alone keeps the key"
        );
        assert_eq!(r.get(1, 1), [11; KEY_WORDS], "other clients untouched");
    }
}
