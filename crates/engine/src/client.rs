//! A client: one sending thread's handle on the engine (PSPAT section 3.1).
//!
//! `submit` pushes a descriptor into the client's private mailbox, marks the client active
//! and wakes the arbiter if it may be asleep; nothing else is shared with other clients.
//! A full mailbox is reported at once; a drop the scheduler decides later is reported on
//! the next `submit` (the backpressure flag of the paper), and counted either way.
//!
//! In the client hand-off mode (MYSCHED's `drain()`), the arbiter gives the client its
//! cleared packets back through a second mailbox, and the client transmits them itself
//! with [`Client::drain`]; `submit` drains opportunistically.

use std::sync::Arc;
use std::time::Duration;

use pspat_config::classify::{Classifier, DropCause, FlowKey, Rng, Verdict};
use pspat_config::Direction;
use pspat_io::Pkt;
use pspat_mailbox::{Consumer, Producer};

use crate::clock;
use crate::dummynet::{class_code, PASS_CODE};
use crate::hops::pack;
use crate::shared::Shared;
use crate::stats::{ClientCounters, Filtered};
use crate::tx::Transmitter;
use crate::wake::publish_fence;

/// Why a packet was not accepted by `submit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The client's mailbox is full: the scheduler holds as many of this client's packets
    /// as the mailbox has slots. Retry later or drop (the refusal is counted).
    #[error("client mailbox full")]
    MailboxFull,
    /// A zero length is not a packet.
    #[error("packet length 0")]
    ZeroLength,
    /// The engine is stopping.
    #[error("engine stopped")]
    Stopped,
    /// The classifier dropped it (dummynet-style configurations); counted.
    #[error("{0}")]
    Filtered(DropCause),
    /// `submit_frame`/`submit_key` on an engine started without a dummynet-style
    /// configuration.
    #[error("this engine has no dummynet-style configuration to classify with")]
    NoClassifier,
}

/// What `submit` reports when it accepted the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// Packets of this client the scheduler dropped since the previous `submit` (the
    /// backpressure flag); see [`crate::EngineReport`] for their reasons.
    pub dropped_before: u64,
}

/// What every kind of client keeps to stamp its packets and report backpressure: its id,
/// the next sequence number, and the scheduler drops already reported. Shared by the PSPAT
/// client and the lock-based baseline's.
#[derive(Debug)]
pub(crate) struct Stamper {
    pub(crate) id: u32,
    seq: u32,
    drops_seen: u64,
}

impl Stamper {
    pub(crate) fn new(id: u32) -> Self {
        Self {
            id,
            seq: 0,
            drops_seen: 0,
        }
    }

    /// The descriptor of the next packet (its sequence number is used only once
    /// [`Stamper::accepted`] is called).
    #[inline]
    pub(crate) fn pkt(&self, flow: u32, len: u32, now_ns: u64) -> Pkt {
        Pkt {
            len,
            client: self.id,
            flow,
            seq: self.seq,
            submit_ns: now_ns,
            depart_ns: 0,
        }
    }

    /// The sequence number the next accepted packet gets.
    #[inline]
    pub(crate) fn next_seq(&self) -> u32 {
        self.seq
    }

    /// The packet from [`Stamper::pkt`] was accepted: count it and move to the next
    /// sequence number.
    #[inline]
    pub(crate) fn accepted(&mut self, counters: &ClientCounters, len: u32) {
        self.seq = self.seq.wrapping_add(1);
        counters.client.0.submitted.add(1);
        counters.client.0.submitted_bytes.add(u64::from(len));
    }

    /// Scheduler drops since the previous call (the backpressure flag).
    #[inline]
    pub(crate) fn new_drops(&mut self, counters: &ClientCounters) -> u64 {
        let drops = counters.signal.0.drops.get();
        let new = drops - self.drops_seen;
        self.drops_seen = drops;
        new
    }
}

/// The client hand-off mode's state: cleared packets to transmit.
pub(crate) struct OwnTx {
    pub(crate) cleared: Consumer<Pkt>,
    pub(crate) tx: Transmitter,
}

impl OwnTx {
    /// Transmits every cleared packet waiting; returns how many were handed to the
    /// backend (sent or failed, each counted).
    #[inline]
    pub(crate) fn transmit_waiting(&mut self) -> usize {
        let mut n = 0;
        while let Some(p) = self.cleared.pop() {
            self.tx.push(p);
            n += 1;
        }
        if n > 0 {
            self.tx.flush();
        }
        n
    }
}

/// One sending thread's handle. `Send`, not `Sync`: give each thread its own.
pub struct Client {
    stamp: Stamper,
    mailbox: Producer<Pkt>,
    shared: Arc<Shared>,
    own: Option<OwnTx>,
    /// Dummynet-style configurations: the classifier in use and its generation.
    classifier: Option<(u64, Arc<Classifier>)>,
    /// What `prob` rules draw from: this client's own, seeded with its id, so a run's
    /// decisions repeat.
    rng: Rng,
}

impl Client {
    pub(crate) fn new(
        id: u32,
        mailbox: Producer<Pkt>,
        shared: Arc<Shared>,
        own: Option<OwnTx>,
    ) -> Self {
        Self {
            stamp: Stamper::new(id),
            mailbox,
            shared,
            own,
            classifier: None,
            rng: Rng::new(u64::from(id)),
        }
    }

    /// This client's index (the `client` field of its packets, and its row in reports).
    pub fn id(&self) -> u32 {
        self.stamp.id
    }

    /// Submits a packet of `len` bytes for `flow`, stamped now.
    #[inline]
    pub fn submit(&mut self, flow: u32, len: u32) -> Result<Accepted, SubmitError> {
        self.submit_at(flow, len, clock::now_ns())
    }

    /// Submits a packet stamped `now_ns` (a reading of [`clock::now_ns`] the caller already
    /// has, saving one).
    #[inline]
    pub fn submit_at(&mut self, flow: u32, len: u32, now_ns: u64) -> Result<Accepted, SubmitError> {
        if len == 0 {
            return Err(SubmitError::ZeroLength);
        }
        if self.own.is_some() {
            self.drain();
        }
        let pkt = self.stamp.pkt(flow, len, now_ns);
        let counters = &self.shared.counters[self.stamp.id as usize];
        if self.mailbox.push(pkt).is_err() {
            counters.client.0.mailbox_full.add(1);
            if self.shared.stopping().is_some() {
                return Err(SubmitError::Stopped);
            }
            return Err(SubmitError::MailboxFull);
        }
        self.stamp.accepted(counters, len);
        // Dekker with the arbiter: our push, then its sleep flag and our activity bit.
        publish_fence();
        self.shared.activity.mark(self.stamp.id as usize);
        self.shared.arbiter.0.wake();
        Ok(Accepted {
            dropped_before: self.stamp.new_drops(counters),
        })
    }

    /// Classifies an Ethernet frame of `len` bytes on the wire with the engine's
    /// dummynet-style configuration (its rules and tables, as `dir` traffic) and submits it
    /// to the class the rules chose; its queue and scheduler instance are found by the
    /// arbiter from the frame's 5-tuple and the masks. A frame the rules drop is counted
    /// and refused with [`SubmitError::Filtered`].
    #[inline]
    pub fn submit_frame(
        &mut self,
        frame: &[u8],
        len: u32,
        dir: Direction,
    ) -> Result<Accepted, SubmitError> {
        let mut rng = self.rng;
        let verdict = self.classifier()?.classify_frame_with(frame, dir, &mut rng);
        self.rng = rng;
        let tag = self.stamp.next_seq();
        self.submit_verdict(verdict, len, tag)
    }

    /// As [`Client::submit_frame`], with a `tag` the packet's descriptor carries in `seq`
    /// once the arbiter has taken it (to the transmitter, and to
    /// [`pspat_io::Backend::discard`] when the scheduler drops it): a shaper puts the
    /// index of the frame's buffer there (see `keyring.rs`).
    #[inline]
    pub fn submit_frame_tagged(
        &mut self,
        frame: &[u8],
        len: u32,
        dir: Direction,
        tag: u32,
    ) -> Result<Accepted, SubmitError> {
        self.submit_frame_tagged_at(frame, len, dir, tag, clock::now_ns())
    }

    /// As [`Client::submit_frame_tagged`], stamped as having arrived at `arrived_ns` on the
    /// engine clock (a receive timestamp: the links charge the frame from then, and a
    /// frame that waited in a receive ring is one the arbiter is late for). At most now.
    #[inline]
    pub fn submit_frame_tagged_at(
        &mut self,
        frame: &[u8],
        len: u32,
        dir: Direction,
        tag: u32,
        arrived_ns: u64,
    ) -> Result<Accepted, SubmitError> {
        let mut rng = self.rng;
        let verdict = self.classifier()?.classify_frame_with(frame, dir, &mut rng);
        self.rng = rng;
        self.submit_verdict_at(verdict, len, tag, arrived_ns)
    }

    /// As [`Client::submit_frame`], for a packet already reduced to its 5-tuple.
    #[inline]
    pub fn submit_key(
        &mut self,
        key: &FlowKey,
        len: u32,
        dir: Direction,
    ) -> Result<Accepted, SubmitError> {
        let mut rng = self.rng;
        let verdict = self.classifier()?.classify_key_with(key, dir, &mut rng);
        self.rng = rng;
        let tag = self.stamp.next_seq();
        self.submit_verdict(verdict, len, tag)
    }

    /// The current classifier, reloaded when a reconfiguration published a new one.
    #[inline]
    fn classifier(&mut self) -> Result<&Classifier, SubmitError> {
        // ORDERING: Acquire pairs with the Release in `Shared::publish_classifier`.
        let gen = self
            .shared
            .classifier_gen
            .load(std::sync::atomic::Ordering::Acquire);
        let stale = !matches!(&self.classifier, Some((g, _)) if *g == gen);
        if stale {
            // Once per reconfiguration: arc-swap's load is lock-free.
            let c = self
                .shared
                .classifier
                .load_full()
                .ok_or(SubmitError::NoClassifier)?;
            self.classifier = Some((gen, c));
        }
        Ok(&self.classifier.as_ref().expect("loaded above").1)
    }

    #[inline]
    fn submit_verdict(
        &mut self,
        verdict: Verdict,
        len: u32,
        tag: u32,
    ) -> Result<Accepted, SubmitError> {
        self.submit_verdict_at(verdict, len, tag, clock::now_ns())
    }

    #[inline]
    fn submit_verdict_at(
        &mut self,
        verdict: Verdict,
        len: u32,
        tag: u32,
        arrived_ns: u64,
    ) -> Result<Accepted, SubmitError> {
        let code = match verdict {
            Verdict::Schedule { class, key } => self.put_key(&key, tag, class, &[]),
            Verdict::Chain { chain, key } => {
                let (first, rest) = chain.classes().split_first().expect("a chain has hops");
                self.put_key(&key, tag, *first, rest)
            }
            Verdict::Allow => {
                self.shared
                    .keys
                    .put_tag(self.stamp.id, self.stamp.next_seq(), tag);
                PASS_CODE
            }
            Verdict::Drop(cause) => {
                self.shared.counters[self.stamp.id as usize]
                    .client
                    .0
                    .filtered[Filtered::of(cause).slot()]
                .add(1);
                return Err(SubmitError::Filtered(cause));
            }
        };
        self.submit_at(code, len, arrived_ns)
    }

    /// Puts the key, tag and later hops (`one_pass 0`; none for most packets) of the packet
    /// about to be pushed into its key ring slot, the slot of its sequence number (see
    /// keyring.rs for why it cannot be overwritten early, hops.rs for the hops); returns
    /// the code of its first class, for the descriptor.
    #[inline]
    fn put_key(&self, key: &FlowKey, tag: u32, first: u32, rest: &[u32]) -> u32 {
        let classes = self
            .classifier
            .as_ref()
            .expect("classified with it")
            .1
            .classes();
        let code = |c: &u32| class_code(classes[*c as usize].origin);
        let hops = pack(rest.iter().map(code));
        self.shared.keys.put(
            self.stamp.id,
            self.stamp.next_seq(),
            key.to_words(),
            tag,
            hops,
        );
        code(&first)
    }

    /// Packets the scheduler dropped for this client so far (all reasons).
    pub fn drops(&self) -> u64 {
        self.shared.counters[self.stamp.id as usize]
            .signal
            .0
            .drops
            .get()
    }

    /// Packets submitted and neither dropped nor done yet: done means released onto the
    /// link, or, when this client transmits itself, handed to its backend.
    pub fn in_flight(&self) -> u64 {
        let c = &self.shared.counters[self.stamp.id as usize];
        let done = if self.own.is_some() {
            c.tx.0.sent.get() + c.tx.0.send_failed.get()
        } else {
            c.arbiter.0.scheduled.get()
        };
        c.client.0.submitted.get() - c.signal.0.drops.get() - done
    }

    /// Whether the next `submit` would find the mailbox full right now.
    pub fn is_full(&self) -> bool {
        self.mailbox.is_full()
    }

    /// Client hand-off mode: transmits the packets the arbiter cleared for this client.
    /// Returns how many were handed to the backend (sent or failed). A no-op in the other
    /// modes.
    pub fn drain(&mut self) -> usize {
        let Some(own) = self.own.as_mut() else {
            return 0;
        };
        let n = own.transmit_waiting();
        if n > 0 {
            // Tell the arbiter these mailbox slots can be reused (it releases them on its
            // next visit, so make sure it visits).
            self.shared.counters[self.stamp.id as usize]
                .client
                .0
                .drained
                .add(n as u64);
            publish_fence();
            self.shared.activity.mark(self.stamp.id as usize);
            self.shared.arbiter.0.wake();
        }
        n
    }

    /// Client hand-off mode: waits up to `timeout` for cleared packets, transmitting them;
    /// returns how many. Sleeps without spinning; the arbiter wakes it. Other modes: sleeps
    /// for `timeout`.
    pub fn wait_and_drain(&mut self, timeout: Duration) -> usize {
        if self.own.is_none() {
            std::thread::sleep(timeout);
            return 0;
        }
        let n = self.drain();
        if n > 0 {
            return n;
        }
        let parker = &self.shared.clients[self.stamp.id as usize].0;
        parker.register_current();
        parker.prepare();
        let has = self.own.as_ref().is_some_and(|o| o.cleared.has_message());
        if has || self.shared.stopping().is_some() {
            parker.cancel();
        } else {
            parker.sleep(Some(timeout));
        }
        self.drain()
    }

    /// Whether this client transmits its own cleared packets.
    pub fn transmits_itself(&self) -> bool {
        self.own.is_some()
    }
}

impl Drop for Client {
    /// Client hand-off mode: what was cleared to this client already is sent now; the
    /// arbiter may go on clearing packets to it until the engine stops (a shaper or a run
    /// stops its clients first), so its return mailbox and sender go to the engine, which
    /// transmits those once the arbiter has stopped (`Shared::adopt`).
    fn drop(&mut self) {
        if let Some(mut own) = self.own.take() {
            own.transmit_waiting();
            own.tx.finish();
            self.shared.adopt(own);
        }
    }
}
