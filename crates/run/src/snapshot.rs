//! A run's counters per tenant at one instant: the engine's per-client counters summed
//! over each tenant's clients, and its victims' latency histograms merged.

use hdrhistogram::Histogram;
use pspat_engine::stats::{ArbiterDrop, Filtered};
use pspat_engine::{Engine, EngineSnapshot};

/// One tenant's counters: the sums of its clients'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantCounts {
    /// Packets accepted into the mailboxes.
    pub submitted: u64,
    /// Packets released onto the emulated link.
    pub scheduled: u64,
    /// Bytes released onto the emulated link.
    pub scheduled_bytes: u64,
    /// Packets handed to the backend.
    pub sent: u64,
    /// Packets the backend refused.
    pub send_failed: u64,
    /// Arbiter drops, by [`ArbiterDrop::slot`].
    pub dropped: [u64; ArbiterDrop::COUNT],
    /// Packets the classifier's rules dropped, by [`Filtered::slot`].
    pub filtered: [u64; Filtered::COUNT],
    /// Submissions refused by a full mailbox (not in `submitted`).
    pub mailbox_full: u64,
}

impl TenantCounts {
    /// Arbiter drops, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Rules' drops, all reasons.
    pub fn filtered_total(&self) -> u64 {
        self.filtered.iter().sum()
    }

    /// Still queued: submitted, neither scheduled nor dropped.
    pub fn left(&self) -> u64 {
        self.submitted - self.scheduled - self.dropped_total()
    }

    /// Per tenant: the sums over the clients of `s`, client `c` belonging to tenant
    /// `tenant_of[c]`.
    pub fn per_tenant(s: &EngineSnapshot, tenant_of: &[usize], tenants: usize) -> Vec<Self> {
        let mut out = vec![TenantCounts::default(); tenants];
        for (c, snap) in s.clients.iter().enumerate() {
            let t = &mut out[tenant_of[c]];
            t.submitted += snap.submitted;
            t.scheduled += snap.scheduled;
            t.scheduled_bytes += snap.scheduled_bytes;
            t.sent += snap.sent;
            t.send_failed += snap.send_failed;
            t.mailbox_full += snap.mailbox_full;
            for (d, v) in t.dropped.iter_mut().zip(snap.dropped) {
                *d += v;
            }
            for (d, v) in t.filtered.iter_mut().zip(snap.filtered) {
                *d += v;
            }
        }
        out
    }
}

/// The latency histogram (ns, submit to transmit) of tenant `t`: its tracked clients'
/// merged; `None` when it has no samples.
pub(crate) fn latency_of(engine: &Engine, tenant_of: &[usize], t: usize) -> Option<Histogram<u64>> {
    let mut h: Option<Histogram<u64>> = None;
    for (c, &tt) in tenant_of.iter().enumerate() {
        if tt != t {
            continue;
        }
        if let Some(x) = engine.latency(c) {
            match h.as_mut() {
                Some(h) => {
                    let _ = h.add(&x);
                }
                None => h = Some(x),
            }
        }
    }
    h.filter(|h| !h.is_empty())
}

/// Microseconds with one decimal (`12.3`), for latency cells.
pub(crate) fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// A run's state at one instant ([`crate::Run::snapshot`]).
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When, on the engine's clock (ns).
    pub at_ns: u64,
    /// Per tenant, in the scenario's order.
    pub tenants: Vec<TenantCounts>,
    /// Per tenant: the latency histogram so far (victims only; `None` without samples).
    pub latencies: Vec<Option<Histogram<u64>>>,
}
