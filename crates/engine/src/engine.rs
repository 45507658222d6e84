//! Building, observing and stopping an engine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use hdrhistogram::Histogram;
use pspat_config::classify::Classifier;
use pspat_io::{Backend, Pkt};
use pspat_mailbox::{mailbox, Config as MailboxConfig};
use pspat_sched::registry::{self, SchedulerVisitor};
use pspat_sched::{Backlog, FlowId, SchedStats, Scheduler};

use crate::arbiter::{Arbiter, ClientPort, Output};
use crate::client::{Client, OwnTx};
use crate::clock;
use crate::config::{EngineConfig, Handoff};
use crate::control::Change;
use crate::dispatcher;
use crate::dnstats::DummynetStats;
use crate::dummynet::Dummynet;
use crate::service::{Service, Single, NOT_DUMMYNET};
use crate::shared::Shared;
use crate::stall::Stalls;
use crate::stats::ClientSnapshot;
use crate::tx::Transmitter;

/// Why an engine could not start (or a change was refused). A variant with a cause keeps
/// it as its `source`, not in its message: print the chain (`{:#}` through anyhow) to see
/// both, each once.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A configuration value is out of range.
    #[error("{0}")]
    Config(String),
    /// The scheduling algorithm or its parameters were refused.
    #[error("scheduler")]
    Scheduler(#[from] pspat_sched::ConfigError),
    /// A flow was refused.
    #[error("flow {index}")]
    Flow {
        /// Index in `EngineConfig::flows`.
        index: usize,
        /// The reason.
        source: pspat_sched::FlowError,
    },
    /// A mailbox geometry was refused.
    #[error("mailbox")]
    Mailbox(#[from] pspat_mailbox::ConfigError),
    /// The backend could not open a sender.
    #[error("backend")]
    Backend(#[from] pspat_io::SendError),
    /// A thread could not be started.
    #[error("spawning {what}")]
    Spawn {
        /// Which thread.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl EngineError {
    /// Whether the caller can fix it by changing what it asked for (a value out of range,
    /// an algorithm, parameter, flow or mailbox refused); not a thread that did not start
    /// nor a backend that did not open.
    pub fn is_usage(&self) -> bool {
        !matches!(self, EngineError::Spawn { .. } | EngineError::Backend(_))
    }
}

/// An error and its causes on one line, `: `-separated, as anyhow's `{:#}` prints them: the
/// form for a message kept as text (a refused reload's reason).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Longest wait for the arbiter's answer to [`Engine::dummynet_stats`].
const STATS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Most clients an engine takes (client ids travel in 32 bits; the activity bitmap and
/// counters are sized for this many).
pub const MAX_CLIENTS: usize = 1 << 20;

/// The scheduler's state when the arbiter stopped.
#[derive(Clone, Debug)]
pub struct SchedSummary {
    /// Algorithm name.
    pub algorithm: &'static str,
    /// Its counters.
    pub stats: SchedStats,
    /// What was still queued in it.
    pub backlog: Backlog,
    /// Aggregation: member packets still waiting behind queued aggregates.
    pub members_left: u64,
    /// A packet was dequeued but could not be handed to a full dispatcher mailbox.
    pub stashed: bool,
    /// The last backend error seen by the arbiter's sender, if any.
    pub send_error: Option<String>,
    /// Dummynet-style configurations: the per-scheduler, per-instance and per-queue
    /// statistics when the arbiter stopped (as [`Engine::dummynet_stats`]).
    pub dummynet: Option<DummynetStats>,
}

/// Counters of the whole engine at one instant.
#[derive(Clone, Debug)]
pub struct EngineSnapshot {
    /// When, on [`clock::now_ns`].
    pub at_ns: u64,
    /// Per-client counters.
    pub clients: Vec<ClientSnapshot>,
    /// Calls of `do_scan`.
    pub scans: u64,
    /// Times the arbiter blocked for lack of work.
    pub idle_sleeps: u64,
    /// Times the arbiter slept until the link was free.
    pub link_sleeps: u64,
    /// Nanoseconds the arbiter spent asleep.
    pub arbiter_slept_ns: u64,
    /// Packets in the scheduler.
    pub sched_backlog: u64,
    /// Times a full dispatcher mailbox held the arbiter back.
    pub tx_stalls: u64,
    /// Times a client had to unpark the arbiter.
    pub arbiter_wakeups: u64,
    /// Clients dropped from the scan list after an idle period.
    pub deactivations: u64,
    /// Heavy fences (membarrier calls) those deactivations cost.
    pub deactivation_fences: u64,
    /// Long intervals between two mailbox drains (see [`crate::stall`]); empty for the
    /// lock baseline, which has no arbiter.
    pub stalls: Stalls,
}

/// The final account of a run: every submitted packet is sent, dropped with a reason, or
/// reported as still queued.
#[derive(Clone, Debug)]
pub struct EngineReport {
    /// Counters when everything had stopped.
    pub snapshot: EngineSnapshot,
    /// The scheduler's final state.
    pub sched: Option<SchedSummary>,
    /// Errors from dispatcher senders.
    pub dispatcher_errors: Vec<String>,
}

/// A running engine: the arbiter thread, dispatcher threads, and shared counters. The
/// client handles are returned separately by [`Engine::start`].
pub struct Engine {
    shared: Arc<Shared>,
    arbiter: Option<JoinHandle<Option<SchedSummary>>>,
    dispatchers: Vec<JoinHandle<Option<String>>>,
    arbiter_done: Arc<AtomicBool>,
    handoff: Handoff,
    /// What reconfigurations compile their rules for ([`EngineConfig::interfaces`]).
    interfaces: pspat_config::classify::Interfaces,
}

impl Engine {
    /// Starts the arbiter (and dispatchers) and returns the engine with one client handle
    /// per configured client, in order.
    pub fn start(
        cfg: &EngineConfig,
        backend: Arc<dyn Backend>,
    ) -> Result<(Engine, Vec<Client>), EngineError> {
        validate(cfg)?;
        // Before any engine thread exists: the light side of the fences is then fixed.
        crate::barrier::enable();
        let classifier = match &cfg.dummynet {
            Some(dn) => {
                if cfg.aggregate_ns != 0 {
                    return Err(EngineError::Config(
                        "decision aggregation is not available with a dummynet-style \
                         configuration"
                            .into(),
                    ));
                }
                Some(Arc::new(
                    Classifier::with_interfaces(dn, &cfg.interfaces)
                        .map_err(|e| EngineError::Config(format!("configuration: {e}")))?,
                ))
            }
            None => None,
        };
        let n_clients = cfg.clients.len();
        let n_disp = match cfg.handoff {
            Handoff::Dispatchers(n) => n,
            _ => 0,
        };
        let tracked: Vec<bool> = cfg.clients.iter().map(|c| c.track_latency).collect();
        let key_entries = if classifier.is_some() {
            cfg.mailbox_entries
        } else {
            0
        };
        let shared = Arc::new(Shared::new(
            n_clients,
            n_disp,
            &tracked,
            classifier.clone(),
            key_entries,
        ));
        let mb = MailboxConfig {
            entries: cfg.mailbox_entries,
            line_bytes: cfg.line_bytes,
        };
        let mut clients = Vec::with_capacity(n_clients);
        let mut ports = Vec::with_capacity(n_clients);
        for id in 0..n_clients {
            let (prod, cons) = mailbox::<Pkt>(mb)?;
            // The key rings rely on it (keyring.rs).
            assert!(prod.capacity() < cfg.mailbox_entries);
            let (own, cleared) = if cfg.handoff == Handoff::Clients {
                // Twice the client mailbox: a client has at most a mailbox's worth of
                // packets not yet drained, so the arbiter's push cannot fail.
                let (cp, cc) = mailbox::<Pkt>(MailboxConfig {
                    entries: 2 * cfg.mailbox_entries,
                    line_bytes: cfg.line_bytes,
                })?;
                let tx = Transmitter::new(
                    backend.open(id)?,
                    cfg.tx_batch,
                    Arc::clone(&shared.counters),
                    Arc::clone(&shared.latency),
                );
                (Some(OwnTx { cleared: cc, tx }), Some(cp))
            } else {
                (None, None)
            };
            clients.push(Client::new(id as u32, prod, Arc::clone(&shared), own));
            ports.push(ClientPort::new(cons, cleared));
        }
        let arbiter_done = Arc::new(AtomicBool::new(false));
        let mut dispatchers = Vec::new();
        let out = match cfg.handoff {
            Handoff::Arbiter => Output::Arbiter(Transmitter::new(
                backend.open(0)?,
                cfg.tx_batch,
                Arc::clone(&shared.counters),
                Arc::clone(&shared.latency),
            )),
            Handoff::Clients => Output::Clients {
                touched: Vec::with_capacity(n_clients),
            },
            Handoff::Dispatchers(n) => {
                // Open every sender and mailbox first: a failure then leaves no thread behind.
                let mut mailboxes = Vec::with_capacity(n);
                let mut ends = Vec::with_capacity(n);
                for d in 0..n {
                    let (p, c) = mailbox::<Pkt>(MailboxConfig {
                        entries: cfg.tx_mailbox_entries,
                        line_bytes: cfg.line_bytes,
                    })?;
                    mailboxes.push(p);
                    let tx = Transmitter::new(
                        backend.open(d)?,
                        cfg.tx_batch,
                        Arc::clone(&shared.counters),
                        Arc::clone(&shared.latency),
                    );
                    ends.push((c, tx));
                }
                for (d, (c, tx)) in ends.into_iter().enumerate() {
                    let (sh, done, spin) =
                        (Arc::clone(&shared), Arc::clone(&arbiter_done), cfg.spin_ns);
                    let spawned = std::thread::Builder::new()
                        .name(format!("pspat-disp{d}"))
                        .spawn(move || dispatcher::run(d, c, tx, sh, spin, done));
                    match spawned {
                        Ok(h) => dispatchers.push(h),
                        Err(source) => {
                            stop_dispatchers(&shared, &arbiter_done, dispatchers);
                            return Err(EngineError::Spawn {
                                what: format!("dispatcher {d}"),
                                source,
                            });
                        }
                    }
                }
                Output::Dispatchers {
                    mailboxes,
                    touched: vec![false; n],
                }
            }
        };
        // Every packet in the scheduler holds a mailbox slot, so this is enough.
        let capacity =
            u32::try_from(n_clients.saturating_mul(cfg.mailbox_entries)).unwrap_or(u32::MAX);
        // The scheduler is built on the arbiter thread (schedulers need not be Send); the
        // thread reports whether building it and its flows worked before it runs.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), EngineError>>();
        let spawn = SpawnArbiter {
            cfg: cfg.clone(),
            ports,
            shared: Arc::clone(&shared),
            out,
            ready: ready_tx.clone(),
            backend: Arc::clone(&backend),
        };
        let (algorithm, params) = (cfg.algorithm.clone(), cfg.params.clone());
        let failed = ready_tx;
        let thread = std::thread::Builder::new()
            .name("pspat-arbiter".into())
            .spawn(move || match classifier {
                Some(plan) => spawn.run_dummynet(plan, capacity),
                None => match registry::visit::<Pkt, _>(&algorithm, &params, capacity, spawn) {
                    Ok(summary) => summary,
                    Err(e) => {
                        // The registry refused the name or the parameters before building.
                        let _ = failed.send(Err(EngineError::Scheduler(e)));
                        None
                    }
                },
            });
        let arbiter = match thread {
            Ok(h) => h,
            Err(source) => {
                stop_dispatchers(&shared, &arbiter_done, dispatchers);
                return Err(EngineError::Spawn {
                    what: "arbiter".into(),
                    source,
                });
            }
        };
        let ready = ready_rx.recv().unwrap_or_else(|_| {
            Err(EngineError::Config(
                "the arbiter thread exited while starting".into(),
            ))
        });
        if let Err(e) = ready {
            let _ = arbiter.join();
            stop_dispatchers(&shared, &arbiter_done, dispatchers);
            return Err(e);
        }
        Ok((
            Engine {
                shared,
                arbiter: Some(arbiter),
                dispatchers,
                arbiter_done,
                handoff: cfg.handoff,
                interfaces: cfg.interfaces.clone(),
            },
            clients,
        ))
    }

    /// The hand-off mode it runs in.
    pub fn handoff(&self) -> Handoff {
        self.handoff
    }

    /// Reads every counter now (for live statistics).
    pub fn snapshot(&self) -> EngineSnapshot {
        let a = &self.shared.arbiter_counters.0;
        EngineSnapshot {
            at_ns: clock::now_ns(),
            clients: self.shared.counters.iter().map(|c| c.snapshot()).collect(),
            scans: a.scans.get(),
            idle_sleeps: a.idle_sleeps.get(),
            link_sleeps: a.link_sleeps.get(),
            arbiter_slept_ns: a.slept_ns.get(),
            sched_backlog: a.sched_backlog.get(),
            tx_stalls: a.tx_stalls.get(),
            arbiter_wakeups: self.shared.arbiter.0.unparks(),
            deactivations: a.deactivations.get(),
            deactivation_fences: a.deactivation_fences.get(),
            stalls: a.stalls.snapshot(),
        }
    }

    /// Applies a change to the running engine without stopping it (see [`Change`]): the
    /// arbiter takes it between two scans. Returns once the arbiter applied it, or with
    /// the reason it refused it.
    ///
    /// A [`Change::Config`] is compiled here, on the caller's thread (a large table costs
    /// milliseconds the arbiter should not spend); once the arbiter accepted it, clients
    /// classify with the new rules and tables from their next packet.
    pub fn reconfigure(&self, change: Change) -> Result<(), EngineError> {
        let change = match change {
            Change::Config(c) => Change::Plan(Arc::new(
                Classifier::with_interfaces(&c, &self.interfaces)
                    .map_err(|e| EngineError::Config(e.to_string()))?,
            )),
            c => c,
        };
        let plan = match &change {
            Change::Plan(p) => Some(Arc::clone(p)),
            _ => None,
        };
        let reply = self.shared.control.push(change);
        self.shared.arbiter.0.unpark();
        match reply.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(r) => r.map_err(EngineError::Config)?,
            Err(_) => {
                return Err(EngineError::Config(
                    "the arbiter did not take the change (it has stopped)".into(),
                ))
            }
        }
        if let Some(p) = plan {
            self.shared.publish_classifier(p);
        }
        Ok(())
    }

    /// Statistics per scheduler, scheduler instance and queue of an engine running a
    /// dummynet-style configuration, like `ipfw sched show` or `tc -s class show` (see
    /// [`crate::dnstats`]).
    ///
    /// The arbiter builds the snapshot between two scans, so its counters are consistent
    /// with each other; this call waits for it (the request unparks an arbiter asleep
    /// until the link is free, so the wait is the scan under way plus the copy of every
    /// instance and queue). An engine running one algorithm on one link gets an error
    /// saying so; an arbiter that has stopped (it panicked) gets an error rather than a
    /// wait.
    pub fn dummynet_stats(&self) -> Result<DummynetStats, EngineError> {
        if self.shared.classifier.load().is_none() {
            return Err(EngineError::Config(NOT_DUMMYNET.into()));
        }
        let gone = || {
            EngineError::Config("the arbiter has stopped: no dummynet statistics to report".into())
        };
        let reply = self.shared.control.push_stats_request();
        self.shared.arbiter.0.unpark();
        let deadline = std::time::Instant::now() + STATS_TIMEOUT;
        loop {
            match reply.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(r) => return r.map_err(EngineError::Config),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(gone()),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let finished = match &self.arbiter {
                        Some(h) => h.is_finished(),
                        None => true,
                    };
                    if finished {
                        return Err(gone());
                    }
                    if std::time::Instant::now() >= deadline {
                        return Err(EngineError::Config(format!(
                            "the arbiter did not answer a statistics request within {} s",
                            STATS_TIMEOUT.as_secs()
                        )));
                    }
                }
            }
        }
    }

    /// The latency histogram (ns, submit to transmit) of a tracked client, as published
    /// so far (every 50 ms by each transmitting thread).
    pub fn latency(&self, client: usize) -> Option<Histogram<u64>> {
        self.shared.latency.snapshot(client)
    }

    /// The latency histograms, to read after [`Engine::stop`] (which publishes what the
    /// transmitting threads still held).
    pub fn latency_board(&self) -> Arc<crate::latency::LatencyBoard> {
        Arc::clone(&self.shared.latency)
    }

    /// Stops the engine. With `drain`, the arbiter first sends everything clients have
    /// submitted (at the link rate); otherwise it stops at once, however slow the link
    /// (its wait for the link ends on the stop request), and what is left is reported as
    /// queued. Clients still alive get `SubmitError::Stopped` once their mailbox fills.
    ///
    /// Client hand-off: what the arbiter cleared to clients already dropped is transmitted
    /// here, on their senders; a client still alive transmits what was cleared to it on
    /// its next drain, or when dropped, and is counted then, after this report.
    pub fn stop(mut self, drain: bool) -> EngineReport {
        self.shared.request_stop(drain);
        let sched = self.arbiter.take().and_then(|h| h.join().ok().flatten());
        self.shared.transmit_departed();
        let dispatcher_errors = stop_dispatchers(
            &self.shared,
            &self.arbiter_done,
            std::mem::take(&mut self.dispatchers),
        );
        EngineReport {
            snapshot: self.snapshot(),
            sched,
            dispatcher_errors,
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.arbiter.is_some() {
            self.shared.request_stop(false);
            if let Some(h) = self.arbiter.take() {
                let _ = h.join();
            }
            self.shared.transmit_departed();
            stop_dispatchers(
                &self.shared,
                &self.arbiter_done,
                std::mem::take(&mut self.dispatchers),
            );
        }
    }
}

fn stop_dispatchers(
    shared: &Shared,
    done: &AtomicBool,
    handles: Vec<JoinHandle<Option<String>>>,
) -> Vec<String> {
    // ORDERING: Release after the arbiter thread was joined (or never started): pairs
    // with the dispatchers' Acquire load, so they see every packet pushed to them.
    done.store(true, Ordering::Release);
    for p in shared.dispatchers.iter() {
        p.0.unpark();
    }
    handles
        .into_iter()
        .filter_map(|h| h.join().ok().flatten())
        .collect()
}

/// Checks what both architectures need (the lock-based baseline shares it).
pub(crate) fn validate(cfg: &EngineConfig) -> Result<(), EngineError> {
    let bad = |m: String| Err(EngineError::Config(m));
    if cfg.clients.is_empty() {
        return bad("an engine needs at least one client".into());
    }
    if cfg.clients.len() > MAX_CLIENTS {
        return bad(format!(
            "{} clients: at most {MAX_CLIENTS} are supported",
            cfg.clients.len()
        ));
    }
    if cfg.flows.is_empty() && cfg.dummynet.is_none() {
        return bad("an engine needs at least one flow".into());
    }
    if cfg.tx_batch == 0 || cfg.tx_batch > 1024 {
        return bad(format!("tx batch {} must be 1..=1024", cfg.tx_batch));
    }
    if let Handoff::Dispatchers(n) = cfg.handoff {
        if n == 0 || n > 64 {
            return bad(format!("{n} dispatchers: must be 1..=64"));
        }
    }
    if cfg.delta_a_ns > 1_000_000_000 {
        return bad(format!(
            "Delta_A of {} ns is over a second: the arbiter would hold packets that long",
            cfg.delta_a_ns
        ));
    }
    Ok(())
}

/// Builds the arbiter around the scheduler the registry made (monomorphised per
/// algorithm), on the arbiter thread, and runs it.
struct SpawnArbiter {
    cfg: EngineConfig,
    ports: Vec<ClientPort>,
    shared: Arc<Shared>,
    out: Output,
    ready: std::sync::mpsc::Sender<Result<(), EngineError>>,
    backend: Arc<dyn Backend>,
}

impl SpawnArbiter {
    /// Pins the arbiter if asked; reports a failure to the starting thread.
    fn pin(&self) -> bool {
        if let Some(ns) = self.cfg.arbiter_timer_slack_ns {
            if let Err(e) = pspat_io::cpu::set_timer_slack_ns(ns) {
                let _ = self.ready.send(Err(EngineError::Config(format!(
                    "setting the arbiter's timer slack to {ns} ns: {e}"
                ))));
                return false;
            }
        }
        if let Some(cpu) = self.cfg.arbiter_cpu {
            if let Err(e) = pspat_io::cpu::pin_current_thread(cpu) {
                let _ = self.ready.send(Err(EngineError::Config(format!(
                    "pinning the arbiter to CPU {cpu}: {e}"
                ))));
                return false;
            }
        }
        true
    }

    /// Builds the arbiter over `svc`, tells the starting thread it is ready, and runs it.
    fn launch<V: Service>(self, svc: V) -> Option<SchedSummary> {
        let arbiter = Arbiter::new(
            svc,
            &self.cfg,
            self.ports,
            self.shared,
            self.out,
            self.backend,
        );
        let _ = self.ready.send(Ok(()));
        Some(summary(arbiter.run()))
    }

    /// Runs the arbiter over a dummynet-style configuration.
    fn run_dummynet(self, plan: Arc<Classifier>, capacity: u32) -> Option<SchedSummary> {
        if !self.pin() {
            return None;
        }
        let svc = match Dummynet::new(plan, Arc::clone(&self.shared.keys), capacity) {
            Ok(s) => s,
            Err(e) => {
                let _ = self
                    .ready
                    .send(Err(EngineError::Config(format!("configuration: {e}"))));
                return None;
            }
        };
        self.launch(svc)
    }
}

fn summary(exit: crate::arbiter::ArbiterExit) -> SchedSummary {
    SchedSummary {
        algorithm: exit.service.algorithm,
        stats: exit.service.stats,
        backlog: exit.service.backlog,
        members_left: exit.members_left,
        stashed: exit.stashed,
        send_error: exit.send_error,
        dummynet: exit.service.dummynet,
    }
}

impl SchedulerVisitor<Pkt> for SpawnArbiter {
    type Output = Option<SchedSummary>;

    fn visit<S: Scheduler<Pkt> + 'static>(self, mut sched: S) -> Self::Output {
        if !self.pin() {
            return None;
        }
        let mut flows: Vec<FlowId> = Vec::with_capacity(self.cfg.flows.len());
        for (index, p) in self.cfg.flows.iter().enumerate() {
            match sched.add_flow(*p) {
                Ok(f) => flows.push(f),
                Err(source) => {
                    let _ = self.ready.send(Err(EngineError::Flow { index, source }));
                    return None;
                }
            }
        }
        let max_len = self.cfg.flows.iter().map(|f| f.max_len).collect();
        let svc = Single::new(sched, self.cfg.rate_bps, flows, max_len);
        self.launch(svc)
    }
}
