//! The packet handle a scheduler queues.
//!
//! Schedulers never look inside a packet: they queue an opaque handle (an index into a
//! buffer pool, a pointer-sized descriptor, an owned buffer) and need only its length on
//! the wire. The handle is moved in on `enqueue` and moved out on `dequeue`, so ownership of
//! the underlying buffer follows the packet.

/// A packet handle that knows its length on the wire, in bytes.
pub trait Packet {
    /// Length in bytes as charged by the scheduler (what the link will transmit).
    fn wire_len(&self) -> u32;
}

impl Packet for Vec<u8> {
    fn wire_len(&self) -> u32 {
        u32::try_from(self.len()).unwrap_or(u32::MAX)
    }
}

impl Packet for Box<[u8]> {
    fn wire_len(&self) -> u32 {
        u32::try_from(self.len()).unwrap_or(u32::MAX)
    }
}

/// A minimal descriptor: an opaque 64-bit cookie and a length. Handy for tests,
/// simulations and any caller that keeps buffers elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Desc {
    /// Caller-defined identifier (sequence number, buffer index, ...).
    pub cookie: u64,
    /// Length in bytes.
    pub len: u32,
}

impl Desc {
    /// A descriptor with the given cookie and length.
    pub const fn new(cookie: u64, len: u32) -> Self {
        Self { cookie, len }
    }
}

impl Packet for Desc {
    fn wire_len(&self) -> u32 {
        self.len
    }
}
