//! A run: the engine started on a scenario, one named thread per client driving its
//! tenant's traffic (`pspat_engine::traffic::drive`), the configuration file watched for
//! changes, and the final account when it stops.
//!
//! The caller owns the loop (and signals): it sleeps, calls [`Run::poll_reload`], takes
//! [`Run::snapshot`]s for the live table ([`crate::live::table`]) until [`Run::is_over`] or
//! it wants to stop, then [`Run::stop`]s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pspat_engine::reload::{Reload, Reloader};
use pspat_engine::traffic::{drive, SourceStats};
use pspat_engine::{DummynetStats, Engine, EngineSnapshot};

use crate::error::RunError;
use crate::keys::{KeyGen, Keyed};
use crate::report::RunReport;
use crate::scenario::Scenario;
use crate::snapshot::{latency_of, Snapshot, TenantCounts};

/// Engine threads whose CPU use the account reports (by name prefix).
const ENGINE_THREADS: &[&str] = &["pspat-"];

/// The clients' threads and the flag that stops them. Dropping it stops and joins them, so
/// a [`Run`] dropped without [`Run::stop`] (an early `?` in the caller) leaves no thread
/// behind: a client whose packets the rules all deny never sees the engine stop.
struct Clients {
    threads: Vec<JoinHandle<SourceStats>>,
    /// ORDERING: Relaxed both ways; the threads' results come back through `join`, which
    /// synchronises.
    stop: Arc<AtomicBool>,
}

impl Clients {
    /// Stops and joins every thread; what each source did (default for a panicked one).
    fn stop(&mut self) -> Vec<SourceStats> {
        // ORDERING: Relaxed, see the field.
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|t| t.join().unwrap_or_default())
            .collect()
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running scenario.
pub struct Run {
    /// Before `engine`: dropped (stopped) first.
    clients: Clients,
    scenario: Scenario,
    engine: Engine,
    /// The tenant of each client.
    tenant_of: Vec<usize>,
    started: Instant,
    first: EngineSnapshot,
    /// CPU seconds of the engine threads at the start.
    cpu0: BTreeMap<String, f64>,
    reloader: Option<Reloader>,
    reloads: Vec<(f64, Reload)>,
}

impl Run {
    /// Validates `sc`, starts the engine and its clients' threads (named `client<N>`).
    pub fn start(sc: &Scenario) -> Result<Run, RunError> {
        sc.validate()?;
        let backend = pspat_io::parse_backend(&sc.backend).map_err(RunError::Backend)?;
        let (cfg, specs) = sc.engine()?;
        let tenant_of: Vec<usize> = specs.iter().map(|(t, _)| *t).collect();
        let (engine, clients) =
            Engine::start(&cfg, Arc::from(backend)).map_err(RunError::Engine)?;
        let keyed = sc.dummynet.is_some();
        let mut threads = Clients {
            threads: Vec::with_capacity(clients.len()),
            stop: Arc::new(AtomicBool::new(false)),
        };
        for (i, (mut c, (t, spec))) in clients.into_iter().zip(specs).enumerate() {
            let stop_flag = Arc::clone(&threads.stop);
            // Client k of its tenant: the k-th address of the tenant's source prefix.
            let k = tenant_of[..i].iter().filter(|x| **x == t).count() as u32;
            let addrs = sc.tenants[t].addrs.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("client{}", c.id()))
                .spawn(move || {
                    if keyed {
                        let keys = KeyGen::new(addrs, k, spec.seed);
                        let mut kc = Keyed { client: c, keys };
                        drive(&mut kc, &spec, &stop_flag)
                    } else {
                        drive(&mut c, &spec, &stop_flag)
                    }
                });
            match spawned {
                Ok(h) => threads.threads.push(h),
                Err(e) => {
                    threads.stop();
                    engine.stop(false);
                    return Err(RunError::Threads(e));
                }
            }
        }
        let started = Instant::now();
        let first = engine.snapshot();
        let cpu0 = pspat_io::cpu::threads_cpu_s(ENGINE_THREADS);
        Ok(Run {
            scenario: sc.clone(),
            engine,
            tenant_of,
            clients: threads,
            started,
            first,
            cpu0,
            reloader: sc.dummynet.as_ref().map(|d| Reloader::new(&d.path)),
            reloads: Vec::new(),
        })
    }

    /// The scenario it runs.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time left of the scenario's duration (zero when over).
    pub fn remaining(&self) -> Duration {
        Duration::from_nanos(self.scenario.duration_ns).saturating_sub(self.elapsed())
    }

    /// The scenario's duration has passed.
    pub fn is_over(&self) -> bool {
        self.remaining().is_zero()
    }

    /// The counters per tenant now, and the victims' latency so far.
    pub fn snapshot(&self) -> Snapshot {
        let s = self.engine.snapshot();
        let n = self.scenario.tenants.len();
        Snapshot {
            at_ns: s.at_ns,
            tenants: TenantCounts::per_tenant(&s, &self.tenant_of, n),
            latencies: (0..n)
                .map(|t| latency_of(&self.engine, &self.tenant_of, t))
                .collect(),
        }
    }

    /// With a dummynet-style configuration: re-reads its file if it changed (looking at
    /// most every [`Reloader::EVERY`]), applies it to the running engine, and says how that
    /// went (also kept for the account). `None`: no change, or no configuration.
    pub fn poll_reload(&mut self) -> Option<&Reload> {
        let r = self.reloader.as_mut()?.poll(&self.engine)?;
        self.reloads.push((self.elapsed().as_secs_f64(), r));
        self.reloads.last().map(|(_, r)| r)
    }

    /// With a dummynet-style configuration file: whether a changed file that lost all its
    /// rules, or all its schedulers and pipes, is applied (refused as an accident by
    /// default).
    pub fn allow_empty_reload(&mut self, allow: bool) {
        if let Some(r) = &mut self.reloader {
            r.allow_empty = allow;
        }
    }

    /// With a dummynet-style configuration file: reads it and applies it now, changed or
    /// not (SIGHUP), and keeps the report as [`Run::poll_reload`] does; `None` without one.
    pub fn reload_now(&mut self) -> Option<&Reload> {
        let r = self.reloader.as_mut()?.reload_now(&self.engine);
        self.reloads.push((self.elapsed().as_secs_f64(), r));
        self.reloads.last().map(|(_, r)| r)
    }

    /// With a dummynet-style configuration: the statistics per scheduler instance and
    /// queue now.
    pub fn dummynet_stats(&self) -> Result<DummynetStats, RunError> {
        self.engine.dummynet_stats().map_err(RunError::Stats)
    }

    /// Stops the clients, then the engine (what is queued stays queued), and gives the
    /// account; `interrupted` says it stopped before its duration.
    pub fn stop(mut self, interrupted: bool) -> RunReport {
        let sources = self.clients.stop();
        // The engine threads' CPU, read while they still run.
        let cpu_secs = self.started.elapsed().as_secs_f64();
        let cpu1 = pspat_io::cpu::threads_cpu_s(ENGINE_THREADS);
        let cpu = cpu1
            .iter()
            .map(|(k, v)| {
                let used = v - self.cpu0.get(k).unwrap_or(&0.0);
                (k.clone(), used / cpu_secs)
            })
            .collect();
        let latencies = (0..self.scenario.tenants.len())
            .map(|t| latency_of(&self.engine, &self.tenant_of, t))
            .collect();
        let engine = self.engine.stop(false);
        // The link kept sending what was queued until the engine stopped: the run, and the
        // rates of what it sent, last until then (on a loaded machine stopping takes tens
        // of milliseconds).
        let elapsed = self.started.elapsed();
        RunReport {
            engine,
            scenario: self.scenario,
            tenant_of: self.tenant_of,
            first: self.first,
            sources,
            latencies,
            elapsed,
            interrupted,
            cpu,
            reloads: self.reloads,
        }
    }
}
