//! The interface between the engine and packet output.

/// Something packets can be sent to: opens one [`Sender`] per transmitting thread.
pub trait Backend: Send + Sync {
    /// Short name (`null`, `udp`, `pcap`).
    fn name(&self) -> &'static str;
    /// A sender for the transmitting thread number `thread` (0-based; the arbiter, a
    /// dispatcher or a client, depending on the hand-off mode).
    fn open(&self, thread: usize) -> Result<Box<dyn Sender>, SendError>;
    /// The engine will never send these packets (the scheduler dropped them): release
    /// whatever the backend keeps for them (a frame buffer named by the descriptor).
    /// Called from the arbiter thread; the default keeps nothing.
    fn discard(&self, _pkts: &[crate::Pkt]) {}
}

/// One thread's way out. Not shared: each transmitting thread owns its sender.
pub trait Sender: Send {
    /// Transmits a batch, in order. Returns how many packets were handed to the output;
    /// the rest (from the first one that failed) were not sent, and the caller counts them
    /// as drops with the error as reason.
    ///
    /// `Ok(n)` with `n < batch.len()`: packets `n..` were not sent, and calling again with
    /// `&batch[n..]` reports why (an error then) or sends them (a transient failure).
    /// `Err(_)`: no packet of the batch was sent. Batches of any length are accepted
    /// (backends split them into their own batch size).
    fn send(&mut self, batch: &[crate::Pkt]) -> Result<usize, SendError>;
    /// [`Sender::send`] for a backend that can leave out a packet the output refuses for
    /// what it is (its length, say) and go on with the rest, so that one bad packet costs
    /// no other: each such packet's index is given to `refused` with the reason, in
    /// increasing order, and the backend has released what it kept for it (it is not
    /// offered to [`Sender::discard`]). Returns `end`: every packet before it was sent or
    /// refused that way; those from `end` on were not sent (the caller counts them as
    /// failures and gives them to `discard`). `Err` is `end` 0, with the reason.
    ///
    /// The default is [`Sender::send`]: nothing refused alone.
    fn send_each(
        &mut self,
        batch: &[crate::Pkt],
        refused: &mut dyn FnMut(usize, &SendError),
    ) -> Result<usize, SendError> {
        let _ = refused;
        self.send(batch)
    }
    /// These packets of a batch given to [`Sender::send`] were not sent and will not be
    /// offered again (the caller counts them as send failures): release what the backend
    /// keeps for them. The default keeps nothing.
    fn discard(&mut self, _pkts: &[crate::Pkt]) {}
    /// Pushes out anything buffered (called when the engine stops).
    fn flush(&mut self) -> Result<(), SendError> {
        Ok(())
    }
}

/// Why a backend could not be opened or could not send.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (`sendmmsg to 127.0.0.1:9000`, `create pcap file x.pcap`).
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The backend was configured wrongly.
    #[error("{0}")]
    Config(String),
}
