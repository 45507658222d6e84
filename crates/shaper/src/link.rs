//! Riding through link faults: an interface that goes down and comes back, or is deleted
//! and created again, must not end the shaper. A thread whose socket reports the link gone
//! ([`pspat_io::link::is_link_error`]) records the fault in its interface's [`LinkWatch`]
//! and waits in [`LinkWatch::wait`] (checking its stop flag) until the interface is up
//! again, then carries on with the same socket (the kernel re-attaches a bound AF_PACKET
//! socket when its interface comes back up) or opens a new one (the interface was created
//! again under a new index). Only an interface that stays deleted longer than
//! [`crate::ShaperConfig::link_wait`] ends the thread, with an error naming it.
//!
//! The waits look the interface up by name in the waiting thread's own network namespace:
//! the shaper's threads are started from the thread that called `Shaper::start`, so they
//! see its interfaces, whoever reads the counters.
//!
//! Frames are not held while a link is down: the input receives nothing then, and what
//! the schedulers release for a down output fails to send and is counted (`send_failed`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pspat_io::link::{link_state, LinkEvents, LinkState};

use crate::counters::{add, get};

/// How often a waiting thread looks at its interface again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// One interface's faults, shared by the threads that use it and read by snapshots.
#[derive(Debug)]
pub(crate) struct LinkWatch {
    /// `input` or `output`.
    role: &'static str,
    /// The interface's name.
    name: String,
    /// Faults seen (a thread found the link down or gone); written with `add`.
    downs: AtomicU64,
    /// Recoveries (the link up again, whether the sockets were opened again or not).
    ups: AtomicU64,
    /// Sockets opened again because the interface came back under a new index.
    reopens: AtomicU64,
    /// Time the link was found down by the fault in progress (engine clock, ns), 0 when
    /// none is. Relaxed: read for display only.
    down_since_ns: AtomicU64,
    /// The last fault's cause, as the socket said it (error path only: not the data path).
    last_error: Mutex<String>,
}

impl LinkWatch {
    pub(crate) fn new(role: &'static str, name: &str) -> Arc<Self> {
        Arc::new(LinkWatch {
            role,
            name: name.to_owned(),
            downs: AtomicU64::new(0),
            ups: AtomicU64::new(0),
            reopens: AtomicU64::new(0),
            down_since_ns: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
        })
    }

    /// Records that a socket found the link down (`why`: its error). Several threads on
    /// one interface may each record the same outage: each is counted.
    pub(crate) fn went_down(&self, why: &dyn std::fmt::Display) {
        add(&self.downs, 1);
        // ORDERING: Relaxed: a display value, ordered with nothing. The first thread to
        // see the outage sets it; the others keep its time.
        let _ = self.down_since_ns.compare_exchange(
            0,
            pspat_io::clock::now_ns().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if let Ok(mut e) = self.last_error.lock() {
            *e = why.to_string();
        }
    }

    fn came_back(&self, reopened: bool) {
        add(&self.ups, 1);
        if reopened {
            add(&self.reopens, 1);
        }
        // ORDERING: Relaxed: as in `went_down`.
        self.down_since_ns.store(0, Ordering::Relaxed);
    }

    /// Waits until the interface is up again. `bound` is the index the caller's socket
    /// is bound to; `idle` runs every [`POLL`] meanwhile (a receiving thread that also
    /// transmits keeps doing so); `stop` ends the wait. An interface absent for longer
    /// than `give_up` ends it with an error naming it.
    pub(crate) fn wait(
        &self,
        bound: u32,
        give_up: Duration,
        stop: &dyn Fn() -> bool,
        idle: &mut dyn FnMut(),
    ) -> Recovery {
        let mut gone_since: Option<Instant> = None;
        loop {
            if stop() {
                return Recovery::Stopped;
            }
            match link_state(&self.name) {
                Ok(LinkState::Present { index, up: true }) => {
                    let reopen = index != bound;
                    self.came_back(reopen);
                    return if reopen {
                        Recovery::Reopen
                    } else {
                        Recovery::Up
                    };
                }
                Ok(LinkState::Present { up: false, .. }) => gone_since = None,
                Ok(LinkState::Gone) => {
                    let since = *gone_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= give_up {
                        return Recovery::GaveUp(format!(
                            "{} {} was deleted and did not come back within {}",
                            self.role,
                            self.name,
                            pspat_units::format_duration(
                                u64::try_from(give_up.as_nanos()).unwrap_or(u64::MAX)
                            )
                        ));
                    }
                }
                Err(e) => {
                    return Recovery::GaveUp(format!(
                        "{} {}: looking it up: {e}",
                        self.role, self.name
                    ))
                }
            }
            idle();
            std::thread::sleep(POLL);
        }
    }

    /// What a thread does when its socket (bound to index `bound`) failed with the link
    /// fault `e`: records it, waits for the interface ([`LinkWatch::wait`]) and opens a new
    /// socket with `open` if the interface came back under a new index. `Ok(None)`: carry
    /// on with the same socket; `Ok(Some(s))`: with `s`; `Err(None)`: the shaper is
    /// stopping; `Err(Some(why))`: the thread ends with this error.
    pub(crate) fn ride_through<S, E: std::fmt::Display>(
        &self,
        e: &dyn std::fmt::Display,
        bound: u32,
        give_up: Duration,
        stop: &dyn Fn() -> bool,
        idle: &mut dyn FnMut(),
        open: impl FnOnce(&str) -> Result<S, E>,
    ) -> Result<Option<S>, Option<String>> {
        self.went_down(e);
        match self.wait(bound, give_up, stop, idle) {
            Recovery::Up => Ok(None),
            Recovery::Reopen => open(&self.name).map(Some).map_err(|e| {
                Some(format!(
                    "opening the {} {} again: {e}",
                    self.role, self.name
                ))
            }),
            Recovery::Stopped => Err(None),
            Recovery::GaveUp(why) => Err(Some(why)),
        }
    }

    /// Its counters now.
    pub(crate) fn totals(&self) -> LinkTotals {
        // ORDERING: Relaxed: as in `went_down`.
        let since = self.down_since_ns.load(Ordering::Relaxed);
        LinkTotals {
            role: self.role,
            name: self.name.clone(),
            downs: get(&self.downs),
            ups: get(&self.ups),
            reopens: get(&self.reopens),
            down_for: (since != 0)
                .then(|| Duration::from_nanos(pspat_io::clock::now_ns().saturating_sub(since))),
            last_error: self
                .last_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
        }
    }
}

/// The engine's transmitting threads (`FrameTx`) report the output's faults here.
impl LinkEvents for LinkWatch {
    fn went_down(&self, why: &dyn std::fmt::Display) {
        LinkWatch::went_down(self, why);
    }
    fn came_back(&self, reopened: bool) {
        LinkWatch::came_back(self, reopened);
    }
}

/// How a wait for a link ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// Up again under the same index: the socket carries on.
    Up,
    /// Up again under a new index (deleted and created again): open a new socket.
    Reopen,
    /// The shaper is stopping.
    Stopped,
    /// Gone for too long, or it cannot be looked up: the thread ends with this error.
    GaveUp(String),
}

/// One interface's fault counters at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkTotals {
    /// `input` or `output`.
    pub role: &'static str,
    /// The interface.
    pub name: String,
    /// Faults seen (by each thread using it).
    pub downs: u64,
    /// Recoveries.
    pub ups: u64,
    /// Recoveries that opened new sockets (the interface was created again).
    pub reopens: u64,
    /// How long the fault in progress has lasted, if one is.
    pub down_for: Option<Duration>,
    /// What the socket said of the last fault.
    pub last_error: String,
}

impl LinkTotals {
    /// What changed from `prev` to `self`, as lines for an operator: a fault that began
    /// and the recoveries since (`input s1 is down (Network is down); waiting for it`,
    /// `input s1 is up again`, `output r1 is back and its sockets were opened again`).
    pub fn changes_since(&self, prev: &LinkTotals) -> Vec<String> {
        let mut out = Vec::new();
        let who = format!("{} {}", self.role, self.name);
        if self.downs > prev.downs {
            out.push(format!(
                "{who} is down ({}); waiting for it",
                self.last_error
            ));
        }
        if self.reopens > prev.reopens {
            out.push(format!("{who} is back and its sockets were opened again"));
        } else if self.ups > prev.ups && self.down_for.is_none() {
            out.push(format!("{who} is up again"));
        }
        out
    }

    /// One line for the final report: `input s1: down 2 times, up 2 times, reopened 0`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} {}: down {} time(s), up again {}, sockets reopened {}",
            self.role, self.name, self.downs, self.ups, self.reopens
        );
        if let Some(d) = self.down_for {
            s.push_str(&format!(
                "; down for {:.1}s at the stop ({})",
                d.as_secs_f64(),
                self.last_error
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_and_its_recovery_read_as_an_operator_wants() {
        let w = LinkWatch::new("input", "lo");
        let t0 = w.totals();
        assert_eq!(
            t0.line(),
            "input lo: down 0 time(s), up again 0, sockets reopened 0"
        );
        w.went_down(&"Network is down (os error 100)");
        let t1 = w.totals();
        assert!(t1.down_for.is_some());
        assert_eq!(
            t1.changes_since(&t0),
            ["input lo is down (Network is down (os error 100)); waiting for it"]
        );
        assert!(t1.line().contains("down for"), "{}", t1.line());
        // lo is up: the wait ends at once; the index it is bound to decides whether the
        // socket is opened again.
        let lo = match link_state("lo").unwrap() {
            LinkState::Present { index, .. } => index,
            LinkState::Gone => panic!("no lo"),
        };
        let never = || false;
        assert_eq!(w.wait(lo, POLL, &never, &mut || {}), Recovery::Up);
        let t2 = w.totals();
        assert_eq!(t2.down_for, None);
        assert_eq!(t2.changes_since(&t1), ["input lo is up again"]);
        w.went_down(&"x");
        assert_eq!(
            w.wait(lo + 1000, POLL, &never, &mut || {}),
            Recovery::Reopen
        );
        let t3 = w.totals();
        assert_eq!(
            t3.changes_since(&t2),
            [
                "input lo is down (x); waiting for it",
                "input lo is back and its sockets were opened again"
            ]
        );
        assert_eq!((t3.downs, t3.ups, t3.reopens), (2, 2, 1));
    }

    #[test]
    fn a_missing_interface_is_waited_for_then_given_up_and_a_stop_ends_the_wait() {
        let w = LinkWatch::new("output", "pspat-nosuch9");
        let mut idles = 0;
        let r = w.wait(1, Duration::from_millis(100), &|| false, &mut || idles += 1);
        assert_eq!(
            r,
            Recovery::GaveUp(
                "output pspat-nosuch9 was deleted and did not come back within 100ms".into()
            )
        );
        assert!(idles >= 1, "the caller's work goes on while it waits");
        let r = w.wait(1, Duration::from_secs(3600), &|| true, &mut || {});
        assert_eq!(r, Recovery::Stopped);
    }
}
