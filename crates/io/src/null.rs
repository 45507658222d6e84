//! The `null` backend: every packet is accepted and dropped on the floor. It measures the
//! scheduler and the engine without any I/O cost.

use crate::backend::{Backend, SendError, Sender};
use crate::Pkt;

/// Sends nothing; every `send` succeeds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Null;

impl Backend for Null {
    fn name(&self) -> &'static str {
        "null"
    }
    fn open(&self, _thread: usize) -> Result<Box<dyn Sender>, SendError> {
        Ok(Box::new(NullSender))
    }
}

struct NullSender;

impl Sender for NullSender {
    fn send(&mut self, batch: &[Pkt]) -> Result<usize, SendError> {
        Ok(batch.len())
    }
}
