//! Which clients may have something in their mailbox: a two-level bitmap.
//!
//! The arbiter must not scan every registered client on every round (there can be
//! thousands). The PSPAT paper keeps per-CPU client lists that a client appends itself to
//! when it runs on a new CPU; in userspace that needs restartable sequences to know the
//! current CPU without a race. pspat uses an activity bitmap instead:
//!
//! - a client sets its bit (and its word's bit in the summary) after pushing a packet, only
//!   if the bit is clear: while it stays active, the check is one read of a line that
//!   nobody writes, as cheap as the paper's "am I the last entry of CL\[c\]" test;
//! - the arbiter visits the set summary bits, then the set bits of those words: a scan
//!   costs O(active clients + registered / 4096) and no per-CPU structure is needed, so
//!   CPU migration changes nothing (no client is listed twice or gains anything);
//! - the arbiter clears a client's bit only after the client stayed idle for a while, and
//!   re-checks the mailbox after clearing it (see [`Activity::deactivate`]); it clears
//!   several at once, with one heavy fence, and while it has work only rarely (see
//!   `DEACTIVATE_EVERY_NS` in the arbiter).
//!
//! Who writes: clients set bits, the arbiter clears them; both with read-modify-writes.

use crate::barrier;
use crate::sync::{AtomicU64, Ordering};

/// The two-level bitmap.
pub struct Activity {
    /// Bit `i % 64` of word `i / 64` is set while client `i` may have work.
    words: Box<[AtomicU64]>,
    /// Bit `w % 64` of summary word `w / 64` is set while `words[w]` may be non-zero.
    summary: Box<[AtomicU64]>,
}

impl Activity {
    /// Room for `clients` clients, all inactive.
    pub fn new(clients: usize) -> Self {
        let words = clients.div_ceil(64).max(1);
        Self {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            summary: (0..words.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Client side, after publishing a packet and after the (light) fence of
    /// [`crate::wake::publish_fence`]: makes sure the arbiter will visit `client`.
    #[inline]
    pub fn mark(&self, client: usize) {
        let (w, bit) = (client / 64, 1u64 << (client % 64));
        // ORDERING: Relaxed read; the caller's light fence orders it after the mailbox
        // push, pairing with the heavy fence in `deactivate` (Dekker: either we see our
        // bit cleared and set it again, or the arbiter's re-check sees our packet).
        if self.words[w].load(Ordering::Relaxed) & bit == 0 {
            // ORDERING: SeqCst RMWs: word before summary, so that an arbiter that clears
            // the summary bit and then re-reads the word sees this bit.
            self.words[w].fetch_or(bit, Ordering::SeqCst);
            self.summary[w / 64].fetch_or(1 << (w % 64), Ordering::SeqCst);
        }
    }

    /// Arbiter side: calls `f(client)` for every client whose bit is set.
    #[inline]
    pub fn for_each_active(&self, mut f: impl FnMut(usize)) {
        for (s, sword) in self.summary.iter().enumerate() {
            // ORDERING: Relaxed: a bit set concurrently is picked up by the next scan;
            // nothing is read through it that needs ordering (mailboxes have their own).
            let mut sbits = sword.load(Ordering::Relaxed);
            while sbits != 0 {
                let w = s * 64 + sbits.trailing_zeros() as usize;
                sbits &= sbits - 1;
                // ORDERING: Relaxed, as above.
                let mut bits = self.words[w].load(Ordering::Relaxed);
                if bits == 0 {
                    self.drop_empty_word(w);
                    continue;
                }
                while bits != 0 {
                    f(w * 64 + bits.trailing_zeros() as usize);
                    bits &= bits - 1;
                }
            }
        }
    }

    /// Clears the summary bit of a word found empty, unless a client set a bit meanwhile.
    #[cold]
    fn drop_empty_word(&self, w: usize) {
        let sbit = 1u64 << (w % 64);
        // ORDERING: SeqCst: clear the summary bit, then re-read the word; a client sets
        // the word bit before the summary bit, so either we see its word bit here and put
        // the summary bit back, or its summary fetch_or comes after our clear.
        self.summary[w / 64].fetch_and(!sbit, Ordering::SeqCst);
        if self.words[w].load(Ordering::SeqCst) != 0 {
            self.summary[w / 64].fetch_or(sbit, Ordering::SeqCst);
        }
    }

    /// Arbiter side: `client` looked idle; clear its bit. Returns with the bit cleared and
    /// a heavy fence executed: the caller must then re-check the client's mailbox and call
    /// [`Activity::mark`] again if a packet is there (a client that pushed before seeing
    /// its bit cleared does not set it again).
    pub fn deactivate(&self, client: usize) {
        self.deactivate_all(&[client as u32]);
    }

    /// [`Activity::deactivate`] for several clients with one heavy fence (a system call
    /// when membarrier is in use), as the arbiter does for the clients a scan found idle.
    pub fn deactivate_all(&self, clients: &[u32]) {
        for &c in clients {
            let (w, bit) = (c as usize / 64, 1u64 << (c % 64));
            // ORDERING: SeqCst RMW, then the heavy fence below, pairing with the client's
            // push + light fence + bit read in `mark` (barrier.rs).
            self.words[w].fetch_and(!bit, Ordering::SeqCst);
        }
        barrier::heavy();
    }

    /// Whether `client`'s bit is set (racy; for tests and statistics).
    pub fn is_marked(&self, client: usize) -> bool {
        self.words[client / 64].load(Ordering::Relaxed) & (1 << (client % 64)) != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn active(a: &Activity) -> Vec<usize> {
        let mut v = Vec::new();
        a.for_each_active(|c| v.push(c));
        v
    }

    #[test]
    fn visits_exactly_the_marked_clients_in_order() {
        let a = Activity::new(10_000);
        for c in [9_999, 0, 63, 64, 4095, 4096, 5000] {
            a.mark(c);
        }
        assert_eq!(active(&a), vec![0, 63, 64, 4095, 4096, 5000, 9_999]);
        a.deactivate(63);
        a.deactivate(4096);
        assert_eq!(active(&a), vec![0, 64, 4095, 5000, 9_999]);
        assert!(!a.is_marked(63));
        a.deactivate_all(&[0, 5000, 9_999]);
        assert_eq!(active(&a), vec![64, 4095]);
        a.deactivate_all(&[]);
        assert_eq!(active(&a), vec![64, 4095]);
    }

    #[test]
    fn empty_words_leave_the_summary() {
        let a = Activity::new(200);
        a.mark(130);
        a.deactivate(130);
        assert_eq!(active(&a), Vec::<usize>::new());
        assert_eq!(
            a.summary[0].load(Ordering::Relaxed),
            0,
            "word 2 dropped from summary"
        );
        a.mark(130);
        assert_eq!(active(&a), vec![130]);
    }

    proptest! {
        #[test]
        fn matches_a_set_model(ops in proptest::collection::vec((any::<bool>(), 0usize..5000), 0..300)) {
            let a = Activity::new(5000);
            let mut model = std::collections::BTreeSet::new();
            for (set, c) in ops {
                if set { a.mark(c); model.insert(c); } else { a.deactivate(c); model.remove(&c); }
                prop_assert_eq!(active(&a), model.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}
