//! pspat-engine: the PSPAT architecture (Rizzo, Valente, Lettieri, Maffione).
//!
//! Clients push packet descriptors into private lock-free mailboxes ([`Client::submit`]);
//! one arbiter thread moves them into a scheduling algorithm from `pspat-sched`, releases
//! them at the rate of an emulated link (a leaky bucket), and hands them to the
//! transmitting side: itself, dispatcher threads, or the clients. Nothing on the data path
//! takes a lock or allocates.
//!
//! | file | concept | paper |
//! |---|---|---|
//! | `config.rs` | what an engine is built from: algorithm, flows, clients, hand-off, timings | |
//! | `engine.rs` | building, running, observing and stopping it all | |
//! | `shared.rs` | what the threads of one engine share: activity, sleep flags, counters, stop | |
//! | `client.rs` | a sending thread's handle: submit, backpressure, own transmission | 3.1 |
//! | `activity.rs` | which clients the arbiter visits (a bitmap, not per-CPU client lists) | 3.1, 3.4 |
//! | `barrier.rs` | asymmetric fences: a compiler fence per packet, membarrier(2) per sleep | 3.5 |
//! | `arbiter.rs` | `do_scan()`: drain, schedule, emulate the link, hand off | 3.4, Fig. 5 |
//! | `aggregate.rs` | decision aggregation: one decision for consecutive packets of a flow | 6.3.1 |
//! | `service.rs` | the algorithm and link(s) the arbiter schedules onto | 3.4 |
//! | `link.rs` | the leaky-bucket link | 3.4 |
//! | `dummynet.rs` | dummynet-style configurations: instances, dynamic queues (stage 2) | |
//! | `instsched.rs` | an instance's scheduler: one algorithm, or a tree of classes | |
//! | `delay.rs` | delay lines: dummynet's `delay` after an emulated link | |
//! | `hops.rs` | chained pipes (`one_pass 0`): a packet crossing several pipes and queues | |
//! | `red.rs` | RED and GRED early drop of a queue, as dummynet | |
//! | `dice.rs` | the arbiter's seeded random numbers (loss, RED) | |
//! | `dnstats.rs` | their statistics per scheduler, instance, class and queue (`tc -s`) | |
//! | `classtable.rs` | a live summary of trees: per inner class and per plan | |
//! | `keyring.rs` | how a client hands the arbiter a packet's 5-tuple | |
//! | `control.rs` | run-time changes (rates, weights, configurations) | |
//! | `reload.rs` | a configuration file watched and applied to the running engine | |
//! | `dispatcher.rs` | TX mailbox to backend threads | 3.3 |
//! | `tx.rs` | the transmit end of every hand-off mode: batches, sent and failed counts | 3.3 |
//! | `wake.rs` | sleeping without busy-wait and without lost wake-ups | 3.5 |
//! | `stats.rs` | per-client counters, one writer per block, without false sharing | |
//! | `stall.rs` | drain gaps: how long the arbiter went without reading the mailboxes | Eq. 1 |
//! | `latency.rs` | submit-to-transmit latency of chosen clients (HDR histograms) | |
//! | `clock.rs` | the engine clock: nanoseconds on CLOCK_MONOTONIC | |
//! | `sync.rs` | the atomics facade: `--cfg loom` swaps in loom's model-checked ones | |
//! | `lock.rs` | the conventional architecture (one lock around the scheduler) to compare | 2.3, Fig. 1b |
//! | `traffic.rs` | packet sources for clients: rates, sizes, bursts; the architecture benchmark's greedy and periodic clients | 6 |
//!
//! The mailbox itself is `pspat-mailbox`; backends are `pspat-io`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod activity;
mod aggregate;
mod arbiter;
pub mod barrier;
pub mod classtable;
pub mod client;
pub mod clock;
pub mod config;
pub mod control;
mod delay;
mod dice;
mod dispatcher;
pub mod dnstats;
pub mod dummynet;
pub mod engine;
mod hops;
mod instsched;
pub mod keyring;
pub mod latency;
pub mod link;
pub mod lock;
mod red;
pub mod reload;
mod service;
pub mod shared;
pub mod stall;
pub mod stats;
mod sync;
pub mod traffic;
mod tx;
pub mod wake;

pub use arbiter::ScanOutcome;
pub use classtable::ClassTable;
pub use client::{Accepted, Client, SubmitError};
pub use config::{ClientConfig, EngineConfig, Handoff};
pub use control::Change;
pub use dnstats::{
    ClassRef, Counters, Drops, DummynetRates, DummynetStats, InstanceStats, QueueStats, Rate,
    SchedRef, SchedulerStats, TreeClassStats,
};
pub use engine::{error_chain, Engine, EngineError, EngineReport, EngineSnapshot, SchedSummary};
pub use lock::{LockClient, LockStats, LockedEngine};

#[cfg(test)]
mod tests {
    /// The modules declared here, and the files the module map of the crate docs names
    /// (its rows: `//! | \`x.rs\` | ...`).
    fn modules_and_rows() -> (Vec<&'static str>, Vec<&'static str>) {
        let src = include_str!("lib.rs");
        let modules = src
            .lines()
            .filter_map(|line| {
                let decl = line.strip_prefix("pub ").unwrap_or(line);
                decl.strip_prefix("mod ")?.strip_suffix(';')
            })
            .collect();
        let rows = src
            .lines()
            .filter_map(|line| line.strip_prefix("//! | `")?.split_once(".rs` |"))
            .map(|(file, _)| file)
            .collect();
        (modules, rows)
    }

    /// The module map of the crate docs has a row for every module declared here, and
    /// every row names a module declared here.
    #[test]
    fn module_map_lists_every_module_and_only_modules() {
        let (modules, rows) = modules_and_rows();
        assert!(
            modules.len() > 20 && rows.len() > 20,
            "{modules:?} {rows:?}"
        );
        for name in &modules {
            assert!(
                rows.contains(name),
                "the module map in lib.rs has no row for {name}.rs"
            );
        }
        for row in &rows {
            assert!(
                modules.contains(row),
                "the module map in lib.rs has a row for {row}.rs, which is no module"
            );
        }
    }
}
