//! Counters in the spirit of `tc -s`: packets and bytes sent, drops by reason, backlog.

use std::fmt;

/// Why a packet was not queued. Every drop is counted under exactly one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The flow handle does not name a live flow.
    UnknownFlow,
    /// Zero-length packet.
    EmptyPacket,
    /// Packet longer than the flow's `max_len`.
    PacketTooLong,
    /// The flow's queue holds `limit_pkts` packets already.
    FlowPacketLimit,
    /// Queuing the packet would exceed the flow's `limit_bytes`.
    FlowByteLimit,
    /// The scheduler's preallocated packet capacity is exhausted.
    SchedulerFull,
    /// The packet was queued when its flow was removed; it was handed back to the caller.
    FlowRemoved,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 7] = [
        DropReason::UnknownFlow,
        DropReason::EmptyPacket,
        DropReason::PacketTooLong,
        DropReason::FlowPacketLimit,
        DropReason::FlowByteLimit,
        DropReason::SchedulerFull,
        DropReason::FlowRemoved,
    ];

    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Short stable name, used in statistics output and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::UnknownFlow => "unknown_flow",
            DropReason::EmptyPacket => "empty_packet",
            DropReason::PacketTooLong => "packet_too_long",
            DropReason::FlowPacketLimit => "flow_packet_limit",
            DropReason::FlowByteLimit => "flow_byte_limit",
            DropReason::SchedulerFull => "scheduler_full",
            DropReason::FlowRemoved => "flow_removed",
        }
    }

    const fn slot(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for DropReason {}

/// Drop counters, one per [`DropReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::COUNT]);

impl DropCounts {
    /// Counts one drop.
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.0[reason.slot()] += n;
    }

    /// Drops counted under `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.slot()]
    }

    /// Drops under all reasons.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add_all(&mut self, other: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// `(reason, count)` for every reason with a non-zero count.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// Packets and bytes currently queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Packets queued.
    pub pkts: u64,
    /// Bytes queued.
    pub bytes: u64,
}

/// Counters of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets dequeued.
    pub sent_pkts: u64,
    /// Bytes dequeued.
    pub sent_bytes: u64,
    /// Drops by reason.
    pub drops: DropCounts,
    /// Current backlog.
    pub backlog: Backlog,
}

/// Counters of a whole scheduler.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedStats {
    /// Flows configured now.
    pub flows: u32,
    /// Packets dequeued.
    pub sent_pkts: u64,
    /// Bytes dequeued.
    pub sent_bytes: u64,
    /// Drops by reason, including drops of flows since removed.
    pub drops: DropCounts,
    /// Current backlog.
    pub backlog: Backlog,
    /// Algorithm-specific counters (e.g. DRR's empty and missed visits).
    pub algorithm: Vec<(&'static str, u64)>,
}

impl SchedStats {
    /// Adds a flow's counters (packets, bytes, drops, backlog) to these, as one more flow.
    pub fn add_flow(&mut self, f: &FlowStats) {
        self.flows += 1;
        self.sent_pkts += f.sent_pkts;
        self.sent_bytes += f.sent_bytes;
        self.drops.add_all(&f.drops);
        self.backlog.pkts += f.backlog.pkts;
        self.backlog.bytes += f.backlog.bytes;
    }

    /// Adds another scheduler's counters (not its algorithm's) to these.
    pub fn add_sched(&mut self, s: &SchedStats) {
        self.flows += s.flows;
        self.sent_pkts += s.sent_pkts;
        self.sent_bytes += s.sent_bytes;
        self.drops.add_all(&s.drops);
        self.backlog.pkts += s.backlog.pkts;
        self.backlog.bytes += s.backlog.bytes;
    }
}

fn write_sent(
    f: &mut fmt::Formatter<'_>,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: &DropCounts,
    backlog: Backlog,
) -> fmt::Result {
    write!(
        f,
        "Sent {sent_bytes} bytes {sent_pkts} pkt (dropped {}",
        drops.total()
    )?;
    for (reason, n) in drops.nonzero() {
        write!(f, ", {reason} {n}")?;
    }
    write!(f, ") backlog {}b {}p", backlog.bytes, backlog.pkts)
}

impl fmt::Display for FlowStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_sent(
            f,
            self.sent_bytes,
            self.sent_pkts,
            &self.drops,
            self.backlog,
        )
    }
}

impl fmt::Display for SchedStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_sent(
            f,
            self.sent_bytes,
            self.sent_pkts,
            &self.drops,
            self.backlog,
        )?;
        write!(f, " flows {}", self.flows)?;
        for (name, n) in &self.algorithm {
            write!(f, " {name} {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_reads_like_tc() {
        let mut drops = DropCounts::default();
        drops.add(DropReason::FlowPacketLimit, 3);
        let s = FlowStats {
            sent_pkts: 2,
            sent_bytes: 3000,
            drops,
            backlog: Backlog {
                pkts: 1,
                bytes: 1500,
            },
        };
        assert_eq!(
            s.to_string(),
            "Sent 3000 bytes 2 pkt (dropped 3, flow_packet_limit 3) backlog 1500b 1p"
        );
        assert_eq!(drops.total(), 3);
        assert_eq!(drops.get(DropReason::FlowByteLimit), 0);
    }

    #[test]
    fn reasons_have_distinct_slots_and_names() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.slot(), i);
        }
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }
}
