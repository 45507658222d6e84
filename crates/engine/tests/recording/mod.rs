//! A backend that records the `seq` of every packet it sends and of every packet it is told
//! to discard (the tests that check each packet comes back exactly once read both lists),
//! and every packet sent with when it was sent (the tests of timing).

use std::sync::{Arc, Mutex};

use pspat_engine::clock;
use pspat_io::{Backend, Pkt, SendError, Sender};

/// What a [`RecordingBackend`] saw: `seq` values, in the order they came.
#[derive(Default)]
pub struct Recorded {
    /// Sent by any of its senders.
    pub sent: Mutex<Vec<u32>>,
    /// Given to `Backend::discard`.
    pub discarded: Mutex<Vec<u32>>,
    /// Sent, each with the engine clock's reading when it was (ns).
    pub sent_at: Mutex<Vec<(Pkt, u64)>>,
}

/// Writes into the shared [`Recorded`].
pub struct RecordingBackend(pub Arc<Recorded>);

struct RecordingSender(Arc<Recorded>);

impl Backend for RecordingBackend {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(RecordingSender(Arc::clone(&self.0))))
    }
    fn discard(&self, pkts: &[Pkt]) {
        self.0
            .discarded
            .lock()
            .unwrap()
            .extend(pkts.iter().map(|p| p.seq));
    }
}

impl Sender for RecordingSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        let now = clock::now_ns();
        self.0
            .sent
            .lock()
            .unwrap()
            .extend(batch.iter().map(|p| p.seq));
        self.0
            .sent_at
            .lock()
            .unwrap()
            .extend(batch.iter().map(|p| (*p, now)));
        Ok(batch.len())
    }
}
