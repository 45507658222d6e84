//! PRIO: strict priority between bands, arrival order inside a band.
//!
//! As Linux `prio` (whose bands are `pfifo` queues by default) and dummynet's
//! `dn_sched_prio.c` (which merges the queues of one priority into one): a packet of band
//! `b` leaves only when bands `0..b` are empty, and the packets of one band leave in the
//! order they arrived, whatever their flows. A flow's band is its
//! [`crate::FlowParams::priority`]. When a backlogged flow changes band, its queued packets
//! move to the tail of the new band, in their order, as if they arrived then: a flow's
//! packets are always in one band, so they never overtake one another.
//!
//! # State
//!
//! The packets live in one pool of slots allocated with the scheduler's capacity; each band
//! is a FIFO list threaded through the pool, and free slots form a stack (the slot a new
//! packet takes is the one freed last, still in cache). A bitmap marks the non-empty bands.
//! The flow table works in accounting mode: per-flow limits, counters and handles as for
//! every algorithm, no per-flow queue.
//!
//! # Invariants
//!
//! - Every queued packet is on exactly one band list, in arrival order; every other slot is
//!   on the free stack. All queued packets of a flow are on the list of its band.
//! - Bit `b` of `mask` is set exactly when band `b`'s list is non-empty; the next packet is
//!   the head of the lowest set bit's band, found with one count-trailing-zeros.
//!
//! # Complexity
//!
//! O(1) per packet, independent of the number of flows and bands. Removing a backlogged
//! flow, or moving it to another band, walks its band: O(backlog). Strict priority gives no
//! guarantee to lower bands: a backlogged band starves every band after it.

use crate::error::{ConfigError, FlowError, ParamError, Rejected};
use crate::flow::{FlowId, FlowParams};
use crate::packet::Packet;
use crate::registry::{Algorithm, AlgorithmInfo, ParamInfo, Params, ServiceClass};
use crate::scheduler::Scheduler;
use crate::table::{FlowTable, NoPacket, MAX_FLOWS, NIL};

/// Most bands (one bit each in a `u64`).
pub const MAX_BANDS: u32 = 64;

/// The registry entry of PRIO (see [`Prio`] for the scheduler).
#[derive(Debug)]
pub enum PrioAlgorithm {}

impl Algorithm for PrioAlgorithm {
    const INFO: AlgorithmInfo = AlgorithmInfo {
        name: "prio",
        aliases: &[],
        summary: "strict priority between bands (0 first), arrival order inside a band",
        complexity: "O(1)",
        guarantee: "band b is served only when bands 0..b are empty",
        source: "Linux sch_prio.c; dummynet dn_sched_prio.c",
        file: crate::registry::source_file(file!()),
        class: ServiceClass::StrictPriority,
        params: &[ParamInfo {
            name: "bands",
            default: "16",
            help: "number of priority bands, 1..=64",
        }],
    };
    type Sched<P: Packet + 'static> = Prio<P>;

    fn build<P: Packet + 'static>(params: &Params, capacity: u32) -> Result<Prio<P>, ConfigError> {
        let bands = params.get_in(&Self::INFO, "bands", 16, 1..=MAX_BANDS)?;
        Prio::new(bands, capacity)
    }
}

struct Slot<P> {
    pkt: Option<P>,
    flow: u32,
    next: u32,
}

#[derive(Clone, Copy)]
struct Band {
    head: u32,
    tail: u32,
}

/// Strict priority.
pub struct Prio<P> {
    flows: FlowTable<NoPacket, ()>,
    /// Power-of-two length; the first `capacity` slots are in use or free.
    slots: Box<[Slot<P>]>,
    free: u32,
    bands: Box<[Band]>,
    mask: u64,
}

impl<P: Packet> Prio<P> {
    /// A scheduler with `bands` bands (`1..=64`) holding at most `capacity` packets
    /// (`1..=2^31`), allocated now.
    pub fn new(bands: u32, capacity: u32) -> Result<Self, ConfigError> {
        if capacity == 0 || capacity > MAX_FLOWS {
            return Err(ConfigError::Capacity(capacity as usize));
        }
        assert!((1..=MAX_BANDS).contains(&bands));
        let slots = (0..capacity.next_power_of_two())
            .map(|i| Slot {
                pkt: None,
                flow: NIL,
                next: if i + 1 < capacity { i + 1 } else { NIL },
            })
            .collect();
        Ok(Self {
            flows: FlowTable::accounting(capacity),
            slots,
            free: 0,
            bands: vec![
                Band {
                    head: NIL,
                    tail: NIL
                };
                bands as usize
            ]
            .into_boxed_slice(),
            mask: 0,
        })
    }

    /// Number of bands.
    pub fn bands(&self) -> u32 {
        self.bands.len() as u32
    }

    /// Slot `s`: the prefix `..=mask` indexed with a masked index needs no bounds check.
    #[inline(always)]
    fn slot(&mut self, s: u32) -> &mut Slot<P> {
        let m = self.slots.len().wrapping_sub(1);
        &mut self.slots[..=m][s as usize & m]
    }

    fn check(&self, params: &FlowParams) -> Result<(), FlowError> {
        params.validate()?;
        if u32::from(params.priority) >= self.bands() {
            return Err(ParamError::Unsupported(format!(
                "invalid priority {}: this prio scheduler has bands 0..={}",
                params.priority,
                self.bands() - 1
            ))
            .into());
        }
        Ok(())
    }

    /// Appends slot `s` (holding a packet) to band `band`.
    #[inline(always)]
    fn append(&mut self, band: u8, s: u32) {
        self.slot(s).next = NIL;
        let b = &mut self.bands[usize::from(band)];
        let tail = b.tail;
        b.tail = s;
        if tail == NIL {
            b.head = s;
            self.mask |= 1u64 << band;
        } else {
            self.slot(tail).next = s;
        }
    }

    /// Takes flow `f`'s packets off band `band` (where all of them are) and returns their
    /// slots, oldest first. Walks the band.
    fn unlink_flow(&mut self, f: u32, band: u8) -> Vec<u32> {
        let b = usize::from(band);
        let mut taken = Vec::new();
        let (mut prev, mut s) = (NIL, self.bands[b].head);
        while s != NIL {
            let next = self.slot(s).next;
            if self.slot(s).flow == f {
                taken.push(s);
                if prev == NIL {
                    self.bands[b].head = next;
                } else {
                    self.slot(prev).next = next;
                }
                if self.bands[b].tail == s {
                    self.bands[b].tail = prev;
                }
            } else {
                prev = s;
            }
            s = next;
        }
        if self.bands[b].head == NIL {
            self.mask &= !(1u64 << band);
        }
        taken
    }
}

impl<P: Packet> Scheduler<P> for Prio<P> {
    fn info(&self) -> &'static AlgorithmInfo {
        &PrioAlgorithm::INFO
    }

    fn add_flow(&mut self, params: FlowParams) -> Result<FlowId, FlowError> {
        self.check(&params)?;
        let f = self.flows.add(params)?;
        Ok(self.flows.id(f))
    }

    fn update_flow(&mut self, flow: FlowId, params: FlowParams) -> Result<(), FlowError> {
        let f = self.flows.lookup(flow)?;
        self.check(&params)?;
        let old = self.flows.priority(f);
        self.flows.set_params(f, params);
        if params.priority != old && self.flows.is_backlogged(f) {
            for s in self.unlink_flow(f, old) {
                self.append(params.priority, s);
            }
        }
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<P>, FlowError> {
        let f = self.flows.lookup(flow)?;
        let band = self.flows.priority(f);
        let mut out = Vec::new();
        if self.flows.is_backlogged(f) {
            for s in self.unlink_flow(f, band) {
                let free = self.free;
                let slot = self.slot(s);
                out.push(slot.pkt.take().expect("queued slot"));
                slot.flow = NIL;
                slot.next = free;
                self.free = s;
            }
        }
        self.flows.remove_counted(f);
        Ok(out)
    }

    #[inline(always)]
    fn enqueue(&mut self, flow: FlowId, pkt: P) -> Result<(), Rejected<P>> {
        let len = pkt.wire_len();
        match self.flows.admit(flow, len) {
            Ok((f, _)) => {
                self.flows.count_in(f, len);
                let band = self.flows.priority(f);
                // The table's capacity check guarantees a free slot.
                let s = self.free;
                let slot = self.slot(s);
                let next_free = slot.next;
                slot.pkt = Some(pkt);
                slot.flow = f;
                self.free = next_free;
                self.append(band, s);
                Ok(())
            }
            Err((f, reason)) => {
                self.flows.count_drop(f, reason);
                Err(Rejected { pkt, reason })
            }
        }
    }

    #[inline(always)]
    fn dequeue(&mut self) -> Option<(FlowId, P)> {
        if self.mask == 0 {
            return None;
        }
        let band = self.mask.trailing_zeros() as usize;
        let s = self.bands[band].head;
        let free = self.free;
        let slot = self.slot(s);
        let pkt = slot.pkt.take()?;
        let (f, next) = (slot.flow, slot.next);
        slot.next = free;
        self.free = s;
        let b = &mut self.bands[band];
        b.head = next;
        if next == NIL {
            b.tail = NIL;
            self.mask &= !(1u64 << band);
        }
        let id = self.flows.count_out(f, pkt.wire_len());
        Some((id, pkt))
    }

    #[inline(always)]
    fn peek_len(&mut self) -> Option<u32> {
        if self.mask == 0 {
            return None;
        }
        let s = self.bands[self.mask.trailing_zeros() as usize].head;
        self.slot(s).pkt.as_ref().map(Packet::wire_len)
    }

    crate::table::table_queries!(flows, |_| Vec::new());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Desc;

    fn drain(s: &mut Prio<Desc>) -> Vec<u64> {
        crate::testing::drain_cookies(s)
    }

    #[test]
    fn lower_band_first_arrival_order_inside() {
        let mut s = Prio::<Desc>::new(16, 64).unwrap();
        let lo = s.add_flow(FlowParams::default().with_priority(2)).unwrap();
        let hi1 = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        let hi2 = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        s.enqueue(lo, Desc::new(100, 10)).unwrap();
        for (c, f) in [(10, hi1), (11, hi1), (20, hi2), (12, hi1), (21, hi2)] {
            s.enqueue(f, Desc::new(c, 10)).unwrap();
        }
        assert_eq!(s.peek_len(), Some(10));
        assert_eq!(drain(&mut s), [10, 11, 20, 12, 21, 100]);
        assert_eq!(s.peek_len(), None);
    }

    #[test]
    fn priority_beyond_the_bands_is_refused() {
        let mut s = Prio::<Desc>::new(4, 8).unwrap();
        let e = s
            .add_flow(FlowParams::default().with_priority(4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("priority 4") && e.contains("0..=3"), "{e}");
    }

    #[test]
    fn a_flow_moving_band_takes_its_packets_along_in_order() {
        let mut s = Prio::<Desc>::new(16, 64).unwrap();
        let a = s.add_flow(FlowParams::default().with_priority(1)).unwrap();
        let b = s.add_flow(FlowParams::default().with_priority(0)).unwrap();
        s.enqueue(a, Desc::new(1, 10)).unwrap();
        s.enqueue(b, Desc::new(2, 10)).unwrap();
        s.enqueue(a, Desc::new(3, 10)).unwrap();
        // a joins band 0 behind b's packet, as if its packets arrived now
        s.update_flow(a, FlowParams::default().with_priority(0))
            .unwrap();
        s.enqueue(a, Desc::new(4, 10)).unwrap();
        s.enqueue(b, Desc::new(5, 10)).unwrap();
        assert_eq!(drain(&mut s), [2, 1, 3, 4, 5]);
    }

    #[test]
    fn removal_hands_back_the_flows_packets_in_order() {
        let mut s = Prio::<Desc>::new(16, 4).unwrap();
        let a = s.add_flow(FlowParams::default().with_priority(1)).unwrap();
        let b = s.add_flow(FlowParams::default().with_priority(1)).unwrap();
        s.enqueue(a, Desc::new(1, 10)).unwrap();
        s.enqueue(b, Desc::new(2, 10)).unwrap();
        s.update_flow(a, FlowParams::default().with_priority(0))
            .unwrap();
        s.enqueue(a, Desc::new(3, 10)).unwrap();
        s.enqueue(b, Desc::new(4, 10)).unwrap();
        let purged: Vec<_> = s.remove_flow(a).unwrap().iter().map(|d| d.cookie).collect();
        assert_eq!(purged, [1, 3]);
        // the freed slots serve new packets: capacity 4, two still queued
        let c = s.add_flow(FlowParams::default()).unwrap();
        s.enqueue(c, Desc::new(5, 10)).unwrap();
        s.enqueue(c, Desc::new(6, 10)).unwrap();
        assert!(s.enqueue(c, Desc::new(7, 10)).is_err());
        assert_eq!(drain(&mut s), [5, 6, 2, 4]);
    }
}
