//! Flows: identifiers and per-flow parameters.
//!
//! A flow is a FIFO queue of packets with a weight, a maximum packet length and a queue
//! limit. Flows are created, reconfigured and removed at run time; a [`FlowId`] carries a
//! generation so that a handle to a removed flow is recognised as stale even after its slot
//! has been reused.

use std::fmt;

use crate::error::ParamError;

/// Largest weight a flow may have.
///
/// Weights are integers, as in Linux and dummynet. 2^16 keeps the per-flow inverse weight
/// of the timestamp schedulers (`2^32 / w`, see [`crate::vtime`]) accurate to 2^-16.
pub const MAX_WEIGHT: u32 = 1 << 16;

/// Largest packet length a flow may declare (1 MiB: room for TSO/GSO and BIG TCP
/// super-packets). The virtual-time bit budget in [`crate::vtime`] depends on it.
pub const MAX_PACKET_LEN: u32 = 1 << 20;

/// Largest per-flow packet limit.
pub const MAX_LIMIT_PKTS: u32 = 1 << 31;

/// Default maximum packet length: the Ethernet MTU.
pub const DEFAULT_MAX_LEN: u32 = 1500;

/// Default per-flow queue limit in packets (Linux `sch_fq`'s default `flow_limit`). A
/// flow's queue is a ring allocated for its limit, so this also sets its memory.
pub const DEFAULT_LIMIT_PKTS: u32 = 100;

/// Handle to a flow of one scheduler.
///
/// `index` is the slot in the scheduler's flow table; `gen` distinguishes successive flows
/// that used the same slot. Handles are cheap to copy and compare.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    index: u32,
    gen: u32,
}

impl FlowId {
    pub(crate) const fn new(index: u32, gen: u32) -> Self {
        Self { index, gen }
    }

    /// Slot of the flow in its scheduler's flow table: dense, starting at 0, reused after
    /// removal. Useful to index per-flow side tables.
    pub const fn index(self) -> u32 {
        self.index
    }

    /// Generation of the slot when this flow was created.
    pub const fn generation(self) -> u32 {
        self.gen
    }
}

impl fmt::Debug for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow#{}.{}", self.index, self.gen)
    }
}

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow #{}", self.index)
    }
}

/// Parameters of a flow.
///
/// Every algorithm reads the parameters it needs and ignores the rest: weighted algorithms
/// read `weight`, strict-priority ones read `priority`, all enforce `max_len` and the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowParams {
    /// Share of the link relative to the other flows, `1..=MAX_WEIGHT`.
    pub weight: u32,
    /// Largest packet the flow may send, in bytes, `1..=MAX_PACKET_LEN`. Longer packets are
    /// rejected with [`crate::DropReason::PacketTooLong`]; timestamp schedulers use it for
    /// their guarantees.
    pub max_len: u32,
    /// Queue limit in packets, `1..=2^31`. The flow's queue is a ring of this many entries
    /// (rounded up to a power of two), allocated when the flow is created.
    pub limit_pkts: u32,
    /// Queue limit in bytes (at least `max_len`); `u64::MAX` for no byte limit.
    pub limit_bytes: u64,
    /// Band for strict-priority algorithms: 0 is served first.
    pub priority: u8,
}

impl Default for FlowParams {
    fn default() -> Self {
        Self {
            weight: 1,
            max_len: DEFAULT_MAX_LEN,
            limit_pkts: DEFAULT_LIMIT_PKTS,
            limit_bytes: u64::MAX,
            priority: 0,
        }
    }
}

impl FlowParams {
    /// Default parameters with the given weight.
    pub fn weighted(weight: u32) -> Self {
        Self {
            weight,
            ..Self::default()
        }
    }

    /// Sets the maximum packet length.
    pub fn with_max_len(mut self, max_len: u32) -> Self {
        self.max_len = max_len;
        self
    }

    /// Sets the queue limit in packets.
    pub fn with_limit_pkts(mut self, limit: u32) -> Self {
        self.limit_pkts = limit;
        self
    }

    /// Sets the queue limit in bytes.
    pub fn with_limit_bytes(mut self, limit: u64) -> Self {
        self.limit_bytes = limit;
        self
    }

    /// Sets the strict-priority band.
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Checks the ranges every algorithm relies on.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.weight == 0 || self.weight > MAX_WEIGHT {
            return Err(ParamError::Weight {
                weight: self.weight,
                max: MAX_WEIGHT,
            });
        }
        if self.max_len == 0 || self.max_len > MAX_PACKET_LEN {
            return Err(ParamError::MaxLen {
                max_len: self.max_len,
                max: MAX_PACKET_LEN,
            });
        }
        if self.limit_pkts == 0 || self.limit_pkts > MAX_LIMIT_PKTS {
            return Err(ParamError::LimitPkts {
                limit_pkts: self.limit_pkts,
                max: MAX_LIMIT_PKTS,
            });
        }
        if self.limit_bytes < u64::from(self.max_len) {
            return Err(ParamError::LimitBytes {
                limit_bytes: self.limit_bytes,
                max_len: self.max_len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(FlowParams::default().validate(), Ok(()));
    }

    #[test]
    fn out_of_range_parameters_are_named() {
        let e = FlowParams::weighted(0).validate().unwrap_err();
        assert!(e.to_string().contains("weight 0"), "{e}");
        let e = FlowParams::weighted(MAX_WEIGHT + 1).validate().unwrap_err();
        assert!(e.to_string().contains("weight 65537"), "{e}");
        let e = FlowParams::default()
            .with_max_len(0)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("max_len 0"), "{e}");
        let e = FlowParams::default()
            .with_limit_pkts(0)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("limit_pkts"), "{e}");
        let e = FlowParams::default()
            .with_limit_bytes(100)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("limit_bytes 100"), "{e}");
    }

    #[test]
    fn flow_id_formats_index_and_generation() {
        let id = FlowId::new(7, 3);
        assert_eq!(format!("{id:?}"), "flow#7.3");
        assert_eq!(id.to_string(), "flow #7");
        assert_eq!((id.index(), id.generation()), (7, 3));
    }
}
