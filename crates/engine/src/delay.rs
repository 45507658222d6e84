//! Delay lines: dummynet's `delay`, the time every packet leaving an emulated link is held
//! before it is sent on (FreeBSD's `ip_dn_io.c` keeps one such FIFO per scheduler instance,
//! `si->dline`, and releases from it on each tick).
//!
//! A packet enters a line when the link releases it, due `delay` later. Within one line
//! every packet has the same delay and enters in release order, and the arbiter's clock
//! never goes back, so a line is a FIFO sorted by due time: no timer and no sort per packet.
//! One line per scheduler (a pipe's FIFO, a `sched`), shared by its instances. A min-heap
//! holds the head of each non-empty line, so finding the next packet due across lines
//! costs O(log lines) per packet and the arbiter sleeps until the earliest one
//! ([`DelayLines::next_due`]).
//!
//! Memory: the packets live in one slab of [`DelayLines::reserve`]d slots, linked into
//! their lines by index, allocated once off the data path. The slab is as large as the
//! number of packets the engine can hold at once (every packet, delayed too, holds its
//! client's mailbox slot until it leaves), so a push never finds it full: 40 bytes per
//! mailbox slot, and nothing when no link has a delay.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pspat_io::Pkt;

/// No slot.
const NIL: u32 = u32::MAX;

/// A delayed packet; its `depart_ns` is when it is due.
#[derive(Clone, Copy)]
struct Slot {
    pkt: Pkt,
    next: u32,
}

/// One line's FIFO of slots.
#[derive(Clone, Copy)]
struct Line {
    head: u32,
    tail: u32,
    /// Packets on it (statistics).
    pkts: u64,
}

const EMPTY: Line = Line {
    head: NIL,
    tail: NIL,
    pkts: 0,
};

/// Every delay line of a dummynet service; see the module docs.
pub(crate) struct DelayLines {
    slots: Vec<Slot>,
    /// Head of the free list threaded through `slots`.
    free: u32,
    lines: Vec<Line>,
    /// (due time of a line's head, line), one entry per non-empty line.
    heads: BinaryHeap<Reverse<(u64, u32)>>,
    /// Packets and bytes held.
    pkts: u64,
    bytes: u64,
}

impl DelayLines {
    /// No lines and no slots yet (nothing allocated).
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: NIL,
            lines: Vec::new(),
            heads: BinaryHeap::new(),
            pkts: 0,
            bytes: 0,
        }
    }

    /// Makes room for `capacity` packets in all and `lines` lines, allocating what is
    /// missing (off the data path: when a configuration with a delay is installed).
    pub(crate) fn reserve(&mut self, capacity: u32, lines: usize) {
        if self.lines.len() < lines {
            self.lines.resize(lines, EMPTY);
            self.heads.reserve(lines - self.heads.len().min(lines));
        }
        let have = self.slots.len() as u32;
        if have >= capacity {
            return;
        }
        self.slots.resize(
            capacity as usize,
            Slot {
                pkt: Pkt::default(),
                next: NIL,
            },
        );
        // Thread the new slots onto the free list, lowest index first.
        for i in (have..capacity).rev() {
            self.slots[i as usize].next = self.free;
            self.free = i;
        }
    }

    /// Holds `p` on `line` until `due`, or until the packet before it on the line is due
    /// if that is later: a line keeps its order (the due times of one scan's packets can
    /// differ by the gaps between their arrivals, microseconds, never less than their
    /// delay). Gives the packet back if there is no free slot (the caller reserved too
    /// few: see the module docs for why that does not happen).
    pub(crate) fn push(&mut self, line: u32, due: u64, mut p: Pkt) -> Result<(), Pkt> {
        let i = self.free;
        if i == NIL || line as usize >= self.lines.len() {
            return Err(p);
        }
        self.free = self.slots[i as usize].next;
        p.depart_ns = due;
        self.slots[i as usize] = Slot { pkt: p, next: NIL };
        let l = &mut self.lines[line as usize];
        if l.tail == NIL {
            l.head = i;
            self.heads.push(Reverse((due, line)));
        } else {
            let before = self.slots[l.tail as usize].pkt.depart_ns;
            self.slots[i as usize].pkt.depart_ns = due.max(before);
            self.slots[l.tail as usize].next = i;
        }
        l.tail = i;
        l.pkts += 1;
        self.pkts += 1;
        self.bytes += u64::from(p.len);
        Ok(())
    }

    /// The earliest packet due at `now` or before, taken off its line (its `depart_ns` is
    /// its due time).
    #[inline]
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<Pkt> {
        let &Reverse((due, line)) = self.heads.peek()?;
        if due > now {
            return None;
        }
        self.heads.pop();
        let l = &mut self.lines[line as usize];
        let i = l.head;
        let slot = self.slots[i as usize];
        l.head = slot.next;
        l.pkts -= 1;
        if l.head == NIL {
            l.tail = NIL;
        } else {
            let next_due = self.slots[l.head as usize].pkt.depart_ns;
            self.heads.push(Reverse((next_due, line)));
        }
        self.slots[i as usize].next = self.free;
        self.free = i;
        self.pkts -= 1;
        self.bytes -= u64::from(slot.pkt.len);
        Some(slot.pkt)
    }

    /// When the next packet is due, if any is held.
    #[inline]
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.heads.peek().map(|Reverse((due, _))| *due)
    }

    /// Whether no packet is held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.pkts == 0
    }

    /// Packets and bytes held.
    pub(crate) fn held(&self) -> (u64, u64) {
        (self.pkts, self.bytes)
    }

    /// Packets held on `line` (0 for a line never reserved).
    pub(crate) fn held_on(&self, line: usize) -> u64 {
        self.lines.get(line).map_or(0, |l| l.pkts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u32, len: u32) -> Pkt {
        Pkt {
            len,
            seq,
            ..Pkt::default()
        }
    }

    #[test]
    fn packets_leave_in_due_order_across_lines_and_slots_are_reused() {
        let mut d = DelayLines::new();
        assert_eq!(
            d.push(0, 1, pkt(0, 1)).unwrap_err().seq,
            0,
            "nothing reserved"
        );
        d.reserve(4, 2);
        // line 0: delay 100, line 1: delay 30, released at 0, 10, 20
        d.push(0, 100, pkt(1, 10)).unwrap();
        d.push(1, 40, pkt(2, 20)).unwrap();
        d.push(0, 120, pkt(3, 30)).unwrap();
        d.push(1, 50, pkt(4, 40)).unwrap();
        assert_eq!(d.push(1, 60, pkt(5, 1)).unwrap_err().seq, 5, "full");
        assert_eq!(d.held(), (4, 100));
        assert_eq!((d.held_on(0), d.held_on(1), d.held_on(7)), (2, 2, 0));
        assert_eq!(d.next_due(), Some(40));
        assert!(d.pop_due(39).is_none());
        let mut out = Vec::new();
        for now in [40, 60, 110, 200] {
            while let Some(p) = d.pop_due(now) {
                out.push((p.seq, p.depart_ns));
            }
        }
        assert_eq!(out, vec![(2, 40), (4, 50), (1, 100), (3, 120)]);
        assert!(d.is_empty() && d.next_due().is_none());
        // Every slot is free again.
        for s in 0..4 {
            d.push(0, 300 + s, pkt(s as u32, 1)).unwrap();
        }
        assert!(d.push(0, 400, pkt(9, 1)).is_err());
    }
}
