//! The controller: hysteresis on the number of pending packets (dummynet's
//! `controller()`).
//!
//! Each loop iteration either enqueues one generated packet or dequeues one. The controller
//! is *filling* until `pending >= qmax`, then *draining* until `pending <= qmin`, then
//! filling again, so the scheduler always works with a backlog between the two thresholds
//! (`qmin 4n, qmax 30n`: each flow holds about 4 to 30 packets).
//!
//! # Invariants
//!
//! - `qmin < qmax` (a `qmax <= qmin` is raised to `qmin + 1`, as dummynet does).
//! - While filling, `pending < qmax` when a packet is generated, so if every enqueue
//!   succeeds `pending <= qmax` at all times.
//! - While draining, `pending > qmin >= 0` when a dequeue is asked for, so a correct
//!   scheduler always has a packet to give.
//!
//! # The loop
//!
//! [`Controller::drive`] runs the iterations. Rather than testing the phase before every
//! packet, it computes how many iterations the phase lasts (`qmax - pending` enqueues, or
//! `pending - qmin` dequeues, if nothing is refused) and runs them in a plain counted loop:
//! the same sequence of operations as [`Controller::fill`] step by step (a test checks
//! it), at no cost per packet.

/// What the controller drives: one packet in or out.
pub trait Ops {
    /// Generates and enqueues one packet; `false` if the scheduler refused it.
    fn enqueue(&mut self) -> bool;
    /// Dequeues one packet; `false` if the scheduler had none.
    fn dequeue(&mut self) -> bool;
    /// Packets enqueued and not yet dequeued.
    fn pending(&self) -> u64;
}

/// How a [`Controller::drive`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Driven {
    /// Iterations run.
    pub loops: u64,
    /// The scheduler had no packet to give while packets were pending (the run stopped).
    pub stalled: bool,
}

/// The hysteresis thresholds and the current phase.
#[derive(Clone, Debug)]
pub struct Controller {
    qmin: u64,
    qmax: u64,
    filling: bool,
}

impl Controller {
    /// Thresholds in packets; `qmax` is raised to `qmin + 1` if not above `qmin`.
    pub fn new(qmin: u64, qmax: u64) -> Self {
        Self {
            qmin,
            qmax: qmax.max(qmin.saturating_add(1)),
            filling: true,
        }
    }

    /// The low threshold.
    pub fn qmin(&self) -> u64 {
        self.qmin
    }

    /// The high threshold (after the `qmin + 1` adjustment).
    pub fn qmax(&self) -> u64 {
        self.qmax
    }

    /// Whether this iteration enqueues (`true`) or dequeues (`false`), given the number of
    /// packets pending now.
    #[inline]
    pub fn fill(&mut self, pending: u64) -> bool {
        if self.filling {
            if pending >= self.qmax {
                self.filling = false;
            }
        } else if pending <= self.qmin {
            self.filling = true;
        }
        self.filling
    }
}

impl Controller {
    /// Runs `loops` iterations of `ops`: each enqueues one packet while filling or dequeues
    /// one while draining; a refused packet is followed, in the same iteration, by a
    /// dequeue (as dummynet does) if anything is pending. Stops early if a dequeue finds
    /// nothing.
    #[inline(always)]
    pub fn drive<O: Ops>(&mut self, ops: &mut O, loops: u64) -> Driven {
        let mut done = 0;
        while done < loops {
            let pending = ops.pending();
            if self.filling {
                if pending >= self.qmax {
                    self.filling = false;
                    continue;
                }
                // Enqueues until qmax, if none is refused.
                let n = (self.qmax - pending).min(loops - done);
                for _ in 0..n {
                    done += 1;
                    if !ops.enqueue() {
                        if ops.pending() > 0 && !ops.dequeue() {
                            return Driven {
                                loops: done,
                                stalled: true,
                            };
                        }
                        // `pending` is not what the count assumed: count again.
                        break;
                    }
                }
            } else {
                if pending <= self.qmin {
                    self.filling = true;
                    continue;
                }
                let n = (pending - self.qmin).min(loops - done);
                for _ in 0..n {
                    done += 1;
                    if !ops.dequeue() {
                        return Driven {
                            loops: done,
                            stalled: true,
                        };
                    }
                }
            }
        }
        Driven {
            loops: done,
            stalled: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qmax_is_above_qmin() {
        assert_eq!(Controller::new(5, 5).qmax(), 6);
        assert_eq!(Controller::new(5, 2).qmax(), 6);
        assert_eq!(Controller::new(0, 0).qmax(), 1);
        assert_eq!(Controller::new(4, 30).qmax(), 30);
        assert_eq!(Controller::new(4, 30).qmin(), 4);
    }

    /// Drives the controller as the harness does and records `pending` after each step.
    fn trace(qmin: u64, qmax: u64, loops: usize) -> Vec<u64> {
        let mut c = Controller::new(qmin, qmax);
        let mut pending = 0;
        (0..loops)
            .map(|_| {
                if c.fill(pending) {
                    pending += 1;
                } else {
                    pending -= 1;
                }
                pending
            })
            .collect()
    }

    #[test]
    fn pending_oscillates_between_the_thresholds() {
        let t = trace(4, 10, 100);
        assert!(t.iter().all(|&p| p <= 10), "never above qmax: {t:?}");
        // once it has reached qmax it never falls below qmin
        let first_top = t.iter().position(|&p| p == 10).unwrap();
        assert_eq!(first_top, 9);
        assert!(t[first_top..].iter().all(|&p| p >= 4), "{t:?}");
        // full swings: 10 -> 4 -> 10
        assert_eq!(&t[9..22], [10, 9, 8, 7, 6, 5, 4, 5, 6, 7, 8, 9, 10]);
    }

    /// A queue that refuses every `refuse_every`-th packet and loses everything after
    /// `stall_after` dequeues; records `(op, pending after)`.
    struct Mock {
        pending: u64,
        enqs: u64,
        deqs: u64,
        refuse_every: u64,
        stall_after: u64,
        log: Vec<(char, u64)>,
    }

    impl Mock {
        fn new(refuse_every: u64, stall_after: u64) -> Self {
            Self {
                pending: 0,
                enqs: 0,
                deqs: 0,
                refuse_every,
                stall_after,
                log: Vec::new(),
            }
        }
    }

    impl Ops for Mock {
        fn enqueue(&mut self) -> bool {
            self.enqs += 1;
            let ok = self.enqs % self.refuse_every != 0;
            self.pending += u64::from(ok);
            self.log.push((if ok { 'e' } else { 'r' }, self.pending));
            ok
        }
        fn dequeue(&mut self) -> bool {
            if self.deqs >= self.stall_after || self.pending == 0 {
                self.log.push(('x', self.pending));
                return false;
            }
            self.deqs += 1;
            self.pending -= 1;
            self.log.push(('d', self.pending));
            true
        }
        fn pending(&self) -> u64 {
            self.pending
        }
    }

    /// The reference: dummynet's loop, one controller decision per iteration.
    fn reference(qmin: u64, qmax: u64, loops: u64, mut m: Mock) -> (Mock, Driven) {
        let mut c = Controller::new(qmin, qmax);
        for i in 0..loops {
            let ok = if c.fill(m.pending) {
                m.enqueue() || m.pending == 0 || m.dequeue()
            } else {
                m.dequeue()
            };
            if !ok {
                return (
                    m,
                    Driven {
                        loops: i + 1,
                        stalled: true,
                    },
                );
            }
        }
        (
            m,
            Driven {
                loops,
                stalled: false,
            },
        )
    }

    #[test]
    fn drive_matches_the_step_by_step_controller() {
        for (qmin, qmax) in [(0, 1), (0, 5), (4, 30), (7, 8), (3, 3)] {
            for refuse_every in [u64::MAX, 7, 2] {
                for stall_after in [u64::MAX, 50] {
                    for loops in [0, 1, 29, 30, 31, 200] {
                        let (want, want_d) =
                            reference(qmin, qmax, loops, Mock::new(refuse_every, stall_after));
                        let mut got = Mock::new(refuse_every, stall_after);
                        let mut c = Controller::new(qmin, qmax);
                        // in two batches: the phase carries over
                        let d1 = c.drive(&mut got, loops / 3);
                        let d2 = if d1.stalled {
                            Driven {
                                loops: 0,
                                stalled: true,
                            }
                        } else {
                            c.drive(&mut got, loops - loops / 3)
                        };
                        let case = (qmin, qmax, refuse_every, stall_after, loops);
                        assert_eq!(got.log, want.log, "{case:?}");
                        assert_eq!(d1.loops + d2.loops, want_d.loops, "{case:?}");
                        assert_eq!(d2.stalled, want_d.stalled, "{case:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn qmin_zero_drains_completely() {
        let t = trace(0, 3, 12);
        assert_eq!(t, [1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0]);
    }
}
