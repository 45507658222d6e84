//! The packet descriptor that travels through mailboxes, the scheduler and the backends.

use pspat_mailbox::Message;
use pspat_sched::Packet;

/// A packet as pspat's engine sees it: who sent it, to which flow, how long it is, and
/// when. Four 64-bit words, so two share a cache line in a mailbox.
///
/// The engine never touches payload bytes: a backend builds the frame from the descriptor
/// (synthetic traffic) or finds it through `cookie` (real I/O keeps buffer indices there).
///
/// `Default` is all zeros, which is not a packet (`len` 0): a filler for buffers that
/// receive descriptors, such as the arbiter's drain batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pkt {
    /// Length on the wire in bytes, `1..=u32::MAX` (0 is not a packet).
    pub len: u32,
    /// Index of the client that submitted it.
    pub client: u32,
    /// Scheduler flow it belongs to.
    pub flow: u32,
    /// Per-client sequence number (wrapping), for loss and reordering checks.
    pub seq: u32,
    /// When the client submitted it, ns on the engine clock ([`crate::clock`]).
    pub submit_ns: u64,
    /// Set by the arbiter: when the emulated link finishes sending it, ns on the same clock.
    /// Free for the caller's use before that (a buffer index, for instance).
    pub depart_ns: u64,
}

impl Message for Pkt {
    const WORDS: usize = 4;
    #[inline(always)]
    fn encode(self) -> [u64; 4] {
        // Word 0 must be non-zero: `len` is at least 1.
        [
            u64::from(self.len) | u64::from(self.client) << 32,
            u64::from(self.flow) | u64::from(self.seq) << 32,
            self.submit_ns,
            self.depart_ns,
        ]
    }
    #[inline(always)]
    fn decode(w: [u64; 4]) -> Self {
        Self {
            len: w[0] as u32,
            client: (w[0] >> 32) as u32,
            flow: w[1] as u32,
            seq: (w[1] >> 32) as u32,
            submit_ns: w[2],
            depart_ns: w[3],
        }
    }
}

impl Packet for Pkt {
    #[inline(always)]
    fn wire_len(&self) -> u32 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn encode_decode_round_trip(len in 1u32.., client: u32, flow: u32, seq: u32,
                                    submit_ns: u64, depart_ns: u64) {
            let p = Pkt { len, client, flow, seq, submit_ns, depart_ns };
            let w = p.encode();
            prop_assert_ne!(w[0], 0);
            prop_assert_eq!(Pkt::decode(w), p);
        }
    }
}
