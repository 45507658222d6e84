//! Packets on their way through several pipes and queues: ipfw's `one_pass 0`, where a
//! packet leaving a pipe goes on at the next rule and may enter another (the rules' side is
//! `pspat_config::classify::Chain`).
//!
//! The client names the whole path when it classifies: the first hop's class code in
//! `Pkt::flow`, the others packed into one word of the key ring ([`pack`]). The key ring
//! slot is the client's to reuse once the arbiter has taken the packet out of its mailbox
//! (see `keyring.rs`), so on entering its first hop the packet's key, tag and remaining hops
//! move into an entry of this table and the packet carries the entry's index in `seq`,
//! with [`CHAINED`] set in `flow`. Each time it leaves a hop (a link, and the delay line
//! after it) the dummynet service enqueues it at the next one, with the time it left as
//! its arrival there; after the last hop the tag goes back into `seq` and the entry is
//! freed.
//!
//! Bounded: every packet in the engine holds its client's mailbox slot until it leaves, so
//! no more entries are in use than the engine holds packets. The table is reserved for
//! that many when a configuration with `one_pass 0` is installed (off the data path), and
//! only grows if one arrives first.

use pspat_config::classify::{FlowKey, MAX_HOPS};

/// Set in `Pkt::flow` while a packet has an entry here (class codes are below `2^17`).
pub(crate) const CHAINED: u32 = 1 << 31;

/// Bits per class code in a packed word.
const CODE_BITS: u32 = 17;
const CODE_MASK: u64 = (1 << CODE_BITS) - 1;
/// Hops after the first a word holds.
const NEXT: usize = MAX_HOPS - 1;
const _: () = assert!(
    NEXT as u32 * CODE_BITS + 2 <= 64,
    "the hops fit in one word"
);

/// Packs the class codes of the hops after the first (at most `MAX_HOPS - 1`, each below
/// `2^17`) into the key ring's hops word: 0 for none, so that an unchained packet's word
/// is 0.
pub(crate) fn pack(next: impl Iterator<Item = u32>) -> u64 {
    let mut word = 0;
    let mut n = 0u64;
    for code in next.take(NEXT) {
        debug_assert!(
            u64::from(code) <= CODE_MASK,
            "class code {code} over 17 bits"
        );
        word |= (u64::from(code) & CODE_MASK) << (CODE_BITS as u64 * n);
        n += 1;
    }
    word | n << (NEXT as u32 * CODE_BITS)
}

/// The codes [`pack`] packed, and how many.
fn unpack(word: u64) -> ([u32; NEXT], u8) {
    let n = (word >> (NEXT as u32 * CODE_BITS)) as u8;
    let codes = std::array::from_fn(|i| ((word >> (CODE_BITS * i as u32)) & CODE_MASK) as u32);
    (codes, n)
}

/// One chained packet's state.
#[derive(Clone, Copy)]
struct Entry {
    key: FlowKey,
    /// The client's tag, for `seq` once the packet leaves its last hop.
    tag: u32,
    next: [u32; NEXT],
    /// Hops in `next`, and how many of them it has entered.
    len: u8,
    done: u8,
    /// When it entered its current hop (ns): its link charges it from then.
    arrived_ns: u64,
}

/// Where a packet that left a hop goes.
pub(crate) enum Leaving {
    /// To the hop of class code `code`, with its key.
    Next { code: u32, key: FlowKey },
    /// Out of the engine, with its tag.
    Out { tag: u32 },
}

/// The chained packets of a dummynet service; see the module docs.
pub(crate) struct Hops {
    entries: Vec<Entry>,
    free: Vec<u32>,
}

impl Hops {
    pub(crate) fn new() -> Self {
        Self {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Makes room for `capacity` chained packets at once (off the data path).
    pub(crate) fn reserve(&mut self, capacity: u32) {
        let n = (capacity as usize).saturating_sub(self.entries.len());
        self.entries.reserve(n);
        self.free.reserve(capacity as usize);
    }

    /// A packet enters its first hop at `arrived_ns`: its entry, for `seq`.
    pub(crate) fn start(&mut self, key: FlowKey, tag: u32, packed: u64, arrived_ns: u64) -> u32 {
        let (next, len) = unpack(packed);
        let e = Entry {
            key,
            tag,
            next,
            len,
            done: 0,
            arrived_ns,
        };
        match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = e;
                i
            }
            None => {
                self.entries.push(e);
                (self.entries.len() - 1) as u32
            }
        }
    }

    /// When the packet of entry `i` entered its current hop.
    #[inline]
    pub(crate) fn arrived_ns(&self, i: u32) -> u64 {
        self.entries[i as usize].arrived_ns
    }

    /// The packet of entry `i` left its current hop at `at_ns`: where it goes. Its entry
    /// is freed when it goes [`Leaving::Out`].
    pub(crate) fn leave(&mut self, i: u32, at_ns: u64) -> Leaving {
        let e = &mut self.entries[i as usize];
        if e.done < e.len {
            let code = e.next[usize::from(e.done)];
            e.done += 1;
            e.arrived_ns = at_ns;
            Leaving::Next { code, key: e.key }
        } else {
            self.free.push(i);
            Leaving::Out { tag: e.tag }
        }
    }

    /// The packet of entry `i` is dropped on its way: its tag; the entry is freed.
    pub(crate) fn drop_out(&mut self, i: u32) -> u32 {
        self.free.push(i);
        self.entries[i as usize].tag
    }

    /// Packets in flight through a chain.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.entries.len() - self.free.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn packed_hops_come_back_in_order() {
        assert_eq!(pack(std::iter::empty()), 0, "no hops packs to 0");
        for codes in [vec![7], vec![1, (1 << 17) - 1], vec![65536 + 3, 99]] {
            let (got, n) = unpack(pack(codes.iter().copied()));
            assert_eq!(&got[..usize::from(n)], &codes[..]);
        }
    }

    #[test]
    fn a_packet_goes_through_every_hop_then_out_with_its_tag() {
        let mut h = Hops::new();
        h.reserve(2);
        let key = FlowKey {
            src_port: 5,
            ..FlowKey::default()
        };
        let a = h.start(key, 42, pack([3, 4].into_iter()), 10);
        assert_eq!(NEXT, 2, "the test walks a chain of MAX_HOPS = 3");
        let b = h.start(FlowKey::default(), 43, pack(std::iter::empty()), 11);
        assert_ne!(a, b);
        assert_eq!(h.arrived_ns(a), 10);
        match h.leave(a, 20) {
            Leaving::Next { code, key: k } => assert_eq!((code, k.src_port), (3, 5)),
            Leaving::Out { .. } => panic!("hop 2 skipped"),
        }
        assert_eq!(h.arrived_ns(a), 20);
        assert!(matches!(h.leave(a, 30), Leaving::Next { code: 4, .. }));
        assert!(matches!(h.leave(a, 40), Leaving::Out { tag: 42 }));
        assert_eq!(h.in_flight(), 1);
        assert_eq!(h.drop_out(b), 43);
        assert_eq!(h.in_flight(), 0);
        let c = h.start(key, 44, 0, 50);
        assert!(c == a || c == b, "a freed entry is reused");
    }
}
