//! What an engine is built from.

use pspat_sched::registry::Params;
use pspat_sched::FlowParams;

/// Who transmits the packets the arbiter cleared (the kernel implementation's `xmit_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// The arbiter transmits, in batches at the end of each scan (best when sending is
    /// cheap: netmap, DPDK, the null backend).
    Arbiter,
    /// `n` dispatcher threads each drain a TX mailbox; client `c`'s packets go to
    /// dispatcher `c % n`, so a client's packets stay in order.
    Dispatchers(usize),
    /// Each client transmits its own cleared packets (MYSCHED's `drain()`, the userspace
    /// PSPAT mode): the arbiter only decides.
    Clients,
}

impl std::fmt::Display for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handoff::Arbiter => f.write_str("arbiter"),
            Handoff::Dispatchers(n) => write!(f, "dispatchers:{n}"),
            Handoff::Clients => f.write_str("clients"),
        }
    }
}

impl std::str::FromStr for Handoff {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "arbiter" => Ok(Handoff::Arbiter),
            "clients" | "client" => Ok(Handoff::Clients),
            "dispatcher" | "dispatchers" => Ok(Handoff::Dispatchers(1)),
            _ => match s.split_once(':') {
                Some(("dispatchers" | "dispatcher", n)) => match n.parse::<usize>() {
                    Ok(n) if (1..=64).contains(&n) => Ok(Handoff::Dispatchers(n)),
                    _ => Err(format!(
                        "hand-off `{s}`: the number of dispatchers must be 1..=64"
                    )),
                },
                _ => Err(format!(
                    "unknown hand-off mode `{s}` (expected arbiter, dispatchers[:N] or clients)"
                )),
            },
        }
    }
}

/// One client of the engine.
#[derive(Clone, Debug, Default)]
pub struct ClientConfig {
    /// Record this client's submit-to-transmit latency (a "victim").
    pub track_latency: bool,
}

/// Everything needed to start an engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Scheduling algorithm, by registry name (`qfq+`, `drr`, ...).
    pub algorithm: String,
    /// Its parameters.
    pub params: Params,
    /// Emulated link rate in bits per second; 0 = unlimited (decisions as fast as possible).
    pub rate_bps: u64,
    /// Scheduler flows; a packet names one by its index in this list.
    pub flows: Vec<FlowParams>,
    /// Clients, one handle each.
    pub clients: Vec<ClientConfig>,
    /// Slots per client mailbox (power of two; one cache line of them is slack).
    pub mailbox_entries: usize,
    /// Cache line size in bytes, for mailbox layout.
    pub line_bytes: usize,
    /// Slots per dispatcher TX mailbox.
    pub tx_mailbox_entries: usize,
    /// Who transmits.
    pub handoff: Handoff,
    /// Largest batch handed to a backend sender.
    pub tx_batch: usize,
    /// Delta_A: the arbiter reads client mailboxes at most once per this many ns.
    pub delta_a_ns: u64,
    /// T_w: how long an idle arbiter or dispatcher spins before it blocks, in ns.
    pub spin_ns: u64,
    /// A client idle this long (ns) leaves the arbiter's scan list: before the arbiter
    /// sleeps, or, while it has work, together with others (64 at once, or 100 ms after the
    /// previous time: each removal costs a `membarrier`).
    pub client_idle_ns: u64,
    /// Decision aggregation (PSPAT section 6.3.1): one scheduler decision covers up to
    /// this many ns of consecutive packets of one client and flow; 0 = off.
    pub aggregate_ns: u64,
    /// Most packets the arbiter releases in one scan before it looks at the mailboxes again
    /// (bounds a scan's length when the link is unlimited or the arbiter is catching up, so
    /// that a newly arrived packet of a light flow waits at most one short scan).
    pub scan_batch: u32,
    /// Pin the arbiter thread to this CPU (the paper gives it a core of its own).
    pub arbiter_cpu: Option<usize>,
    /// Waits for a busy link shorter than this (ns) are spun, longer ones slept (a sleep
    /// ends early by up to 100 us, or half the wait, and the link catches up on what an
    /// overslept wake-up lost: released packets go back to back until it is on time).
    /// 200 us by default, for an arbiter with a CPU of its own; a shaper sharing its CPUs
    /// with other work sleeps instead of spinning (`pspat shape` uses 20 us).
    pub link_spin_ns: u64,
    /// How far the emulated links' clocks may lag real time (ns, 20 ms by default: longer
    /// than a time slice the arbiter loses to another thread on its CPU). A link
    /// catches up on what a late arbiter lost (a sleep that overslept, a scan that was
    /// descheduled), replaying the packets that arrived meanwhile in their order of arrival,
    /// but only within this window: when the arbiter, or the transmitter behind it, cannot
    /// keep up with the configured rate for longer, the links lose the time instead of
    /// bursting to make it up, and the backlog stays in the scheduler, which keeps
    /// deciding (by weight) what is sent and what is dropped. As HTB's tokens stop at its
    /// burst size.
    pub max_lag_ns: u64,
    /// The arbiter's timer slack (ns): how late the kernel may end its sleeps; `None`
    /// keeps the thread's default (50 us).
    pub arbiter_timer_slack_ns: Option<u64>,
    /// A dummynet-style configuration (schedulers with their own bandwidths, flowsets,
    /// masks, rules and tables). When set, `algorithm`, `params`, `rate_bps` and `flows`
    /// are not used: clients submit with [`crate::Client::submit_frame`] or
    /// [`crate::Client::submit_key`] and the configuration decides (see `dummynet.rs`).
    pub dummynet: Option<std::sync::Arc<pspat_config::Config>>,
    /// The interfaces packets pass between, for the rules' `recv`, `xmit` and `via` (a
    /// shaper's input and output); none by default, and a configuration whose rules name
    /// one is then refused.
    pub interfaces: pspat_config::classify::Interfaces,
}

impl EngineConfig {
    /// Decision aggregation's byte budget: the bytes `aggregate_ns` of link time carry at
    /// `rate_bps` (at least 1), 64 KiB on an unlimited link, 0 when aggregation is off. A
    /// flow's packets merge into one decision only up to its `max_len` as well.
    pub fn aggregate_bytes(&self) -> u64 {
        if self.aggregate_ns == 0 {
            0
        } else if self.rate_bps == 0 {
            // An infinitely fast link: "N ns worth" is unbounded; cap at 64 KiB.
            65_536
        } else {
            (u128::from(self.aggregate_ns) * u128::from(self.rate_bps) / 8_000_000_000).max(1)
                as u64
        }
    }

    /// Raises every flow's `max_len` to the aggregation budget ([`Self::aggregate_bytes`],
    /// at most [`pspat_sched::MAX_PACKET_LEN`]), so that decision aggregation merges a
    /// flow's packets up to `aggregate_ns` of link time: an aggregate is scheduled as one
    /// packet, and the flow caps its length. Without aggregation it changes nothing.
    pub fn fit_flows_to_aggregates(&mut self) {
        let budget = self
            .aggregate_bytes()
            .min(u64::from(pspat_sched::MAX_PACKET_LEN)) as u32;
        for f in &mut self.flows {
            *f = f.with_max_len(f.max_len.max(budget));
        }
    }

    /// Defaults for `algorithm` with the given flows and clients: 10 Gbit/s, 512-slot
    /// mailboxes, arbiter hand-off, Delta_A = 1 us, T_w = 50 us.
    pub fn new(algorithm: &str, flows: Vec<FlowParams>, clients: Vec<ClientConfig>) -> Self {
        Self {
            algorithm: algorithm.to_string(),
            params: Params::new(),
            rate_bps: 10_000_000_000,
            flows,
            clients,
            mailbox_entries: 512,
            line_bytes: 64,
            tx_mailbox_entries: 2048,
            handoff: Handoff::Arbiter,
            tx_batch: 64,
            delta_a_ns: 1_000,
            spin_ns: 50_000,
            client_idle_ns: 1_000_000,
            aggregate_ns: 0,
            scan_batch: 128,
            arbiter_cpu: None,
            link_spin_ns: 200_000,
            max_lag_ns: 20_000_000,
            arbiter_timer_slack_ns: None,
            dummynet: None,
            interfaces: pspat_config::classify::Interfaces::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_fit_the_aggregation_budget() {
        let flows = vec![
            FlowParams::weighted(1).with_max_len(60),
            FlowParams::weighted(1).with_max_len(9000),
        ];
        let mut cfg = EngineConfig::new("drr", flows, vec![ClientConfig::default()]);
        let lens = |c: &EngineConfig| c.flows.iter().map(|f| f.max_len).collect::<Vec<_>>();
        // Off: nothing changes.
        cfg.fit_flows_to_aggregates();
        assert_eq!((cfg.aggregate_bytes(), lens(&cfg)), (0, vec![60, 9000]));
        // 1 us at 10 Gbit/s: 1250 bytes; a flow that admits more keeps its length.
        cfg.aggregate_ns = 1_000;
        cfg.fit_flows_to_aggregates();
        assert_eq!(
            (cfg.aggregate_bytes(), lens(&cfg)),
            (1250, vec![1250, 9000])
        );
        // An unlimited link: the 64 KiB cap.
        cfg.rate_bps = 0;
        cfg.fit_flows_to_aggregates();
        assert_eq!(
            (cfg.aggregate_bytes(), lens(&cfg)),
            (65_536, vec![65_536, 65_536])
        );
    }

    #[test]
    fn handoff_parses_and_names_bad_input() {
        assert_eq!("arbiter".parse(), Ok(Handoff::Arbiter));
        assert_eq!("clients".parse(), Ok(Handoff::Clients));
        assert_eq!("dispatchers:4".parse(), Ok(Handoff::Dispatchers(4)));
        assert_eq!("dispatchers".parse(), Ok(Handoff::Dispatchers(1)));
        let e = "dispatchers:0".parse::<Handoff>().unwrap_err();
        assert!(e.contains("1..=64"), "{e}");
        let e = "nic".parse::<Handoff>().unwrap_err();
        assert!(e.contains("`nic`"), "{e}");
        for h in [Handoff::Arbiter, Handoff::Clients, Handoff::Dispatchers(3)] {
            assert_eq!(h.to_string().parse(), Ok(h));
        }
    }
}
