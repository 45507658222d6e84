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
//! `pending - qmin` dequeues, if nothing is refused) and asks [`Ops`] for that many in one
//! call: the same sequence of operations as [`Controller::fill`] step by step (a test
//! checks it), at no cost per packet. The controller keeps the count of pending packets
//! and the run's operation counts itself, per phase rather than per packet, so the loop
//! inside each call is the operation alone (and each of the two loops, compiled apart,
//! gets the machine's registers to itself).

/// What the controller drives: runs of packets in or out.
pub trait Ops {
    /// Generates and enqueues up to `n` packets (`n > 0`), stopping at the first one the
    /// scheduler refuses; returns how many were accepted (if fewer than `n`, one more was
    /// offered and refused).
    fn enqueue(&mut self, n: u64) -> u64;
    /// Dequeues up to `n` packets (`n > 0`), stopping when the scheduler has none; returns
    /// how many were dequeued (if fewer than `n`, one more dequeue found nothing).
    fn dequeue(&mut self, n: u64) -> u64;
}

/// How a [`Controller::drive`] went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Driven {
    /// Iterations run.
    pub loops: u64,
    /// Packets offered to the scheduler.
    pub enqueues: u64,
    /// Packets the scheduler refused.
    pub refused: u64,
    /// Packets the scheduler gave back.
    pub dequeued: u64,
    /// The scheduler had no packet to give while packets were pending (the run stopped).
    pub stalled: bool,
}

/// The hysteresis thresholds, the current phase and the packets pending.
#[derive(Clone, Debug)]
pub struct Controller {
    qmin: u64,
    qmax: u64,
    filling: bool,
    pending: u64,
}

impl Controller {
    /// Thresholds in packets; `qmax` is raised to `qmin + 1` if not above `qmin`.
    pub fn new(qmin: u64, qmax: u64) -> Self {
        Self {
            qmin,
            qmax: qmax.max(qmin.saturating_add(1)),
            filling: true,
            pending: 0,
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

    /// Packets enqueued and not dequeued, by the count of [`Controller::drive`].
    pub fn pending(&self) -> u64 {
        self.pending
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

    /// Runs `loops` iterations of `ops`: each enqueues one packet while filling or dequeues
    /// one while draining; a refused packet is followed, in the same iteration, by a
    /// dequeue (as dummynet does) if anything is pending. Stops early if a dequeue finds
    /// nothing.
    #[inline(always)]
    pub fn drive<O: Ops>(&mut self, ops: &mut O, loops: u64) -> Driven {
        let mut d = Driven::default();
        let mut pending = self.pending;
        // Iterations left to run.
        let mut left = loops;
        while left > 0 {
            if self.filling {
                if pending >= self.qmax {
                    self.filling = false;
                    continue;
                }
                // Enqueues until qmax, if none is refused.
                let n = (self.qmax - pending).min(left);
                let accepted = ops.enqueue(n);
                pending += accepted;
                d.enqueues += accepted;
                left -= accepted;
                if accepted < n {
                    // Refused: the iteration dequeues instead, if anything is pending.
                    d.enqueues += 1;
                    d.refused += 1;
                    left -= 1;
                    if pending > 0 {
                        if ops.dequeue(1) == 0 {
                            d.stalled = true;
                            break;
                        }
                        pending -= 1;
                        d.dequeued += 1;
                    }
                }
            } else {
                if pending <= self.qmin {
                    self.filling = true;
                    continue;
                }
                let n = (pending - self.qmin).min(left);
                let dequeued = ops.dequeue(n);
                pending -= dequeued;
                d.dequeued += dequeued;
                left -= dequeued;
                if dequeued < n {
                    left -= 1;
                    d.stalled = true;
                    break;
                }
            }
        }
        self.pending = pending;
        d.loops = loops - left;
        d
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

    impl Mock {
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
    }

    impl Ops for Mock {
        fn enqueue(&mut self, n: u64) -> u64 {
            assert!(n > 0);
            (0..n).take_while(|_| Mock::enqueue(self)).count() as u64
        }
        fn dequeue(&mut self, n: u64) -> u64 {
            assert!(n > 0);
            (0..n).take_while(|_| Mock::dequeue(self)).count() as u64
        }
    }

    /// The reference: dummynet's loop, one controller decision per iteration; returns the
    /// iterations run and whether it stalled.
    fn reference(qmin: u64, qmax: u64, loops: u64, mut m: Mock) -> (Mock, u64, bool) {
        let mut c = Controller::new(qmin, qmax);
        for i in 0..loops {
            let ok = if c.fill(m.pending) {
                m.enqueue() || m.pending == 0 || m.dequeue()
            } else {
                m.dequeue()
            };
            if !ok {
                return (m, i + 1, true);
            }
        }
        (m, loops, false)
    }

    #[test]
    fn drive_matches_the_step_by_step_controller() {
        for (qmin, qmax) in [(0, 1), (0, 5), (4, 30), (7, 8), (3, 3)] {
            for refuse_every in [u64::MAX, 7, 2] {
                for stall_after in [u64::MAX, 50] {
                    for loops in [0, 1, 29, 30, 31, 200] {
                        let (want, want_loops, want_stalled) =
                            reference(qmin, qmax, loops, Mock::new(refuse_every, stall_after));
                        let mut got = Mock::new(refuse_every, stall_after);
                        let mut c = Controller::new(qmin, qmax);
                        // in two batches: the phase carries over
                        let d1 = c.drive(&mut got, loops / 3);
                        let d2 = if d1.stalled {
                            Driven {
                                stalled: true,
                                ..Driven::default()
                            }
                        } else {
                            c.drive(&mut got, loops - loops / 3)
                        };
                        let case = (qmin, qmax, refuse_every, stall_after, loops);
                        assert_eq!(got.log, want.log, "{case:?}");
                        assert_eq!(d1.loops + d2.loops, want_loops, "{case:?}");
                        assert_eq!(d2.stalled, want_stalled, "{case:?}");
                        // the controller's counts are the queue's
                        assert_eq!(c.pending(), got.pending, "{case:?}");
                        assert_eq!(d1.enqueues + d2.enqueues, got.enqs, "{case:?}");
                        let refused = got.log.iter().filter(|e| e.0 == 'r').count() as u64;
                        assert_eq!(d1.refused + d2.refused, refused, "{case:?}");
                        assert_eq!(d1.dequeued + d2.dequeued, got.deqs, "{case:?}");
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
