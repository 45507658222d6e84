//! The engine clock: nanoseconds on CLOCK_MONOTONIC, shared by every thread and
//! comparable across processes on the host (a receiver can compute one-way latency from
//! the submit time a packet carries). See `pspat_io::clock`.

pub use pspat_io::clock::now_ns;
