//! What [`Shaper::start`] refuses, and how it says so: the messages `pspat shape` prints
//! (the error and its causes on one line), and whether the user's options are at fault
//! (`is_usage`: `pspat shape` exits with 2, else 1). Needs no privilege: an unknown
//! interface is named as root, and without root the missing capability is.

use pspat_engine::error_chain as chain;
use pspat_shaper::{Shaper, ShaperConfig};

const CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/config/shaper.ipfw"
);

/// The error's chain, after checking that it is a usage error.
fn refused(c: ShaperConfig) -> String {
    refused_as(c, true)
}

/// The error's chain, after checking whether it is a usage error.
fn refused_as(c: ShaperConfig, usage: bool) -> String {
    let e = Shaper::start(c).err().expect("the shaper started");
    assert_eq!(e.is_usage(), usage, "{}", chain(&e));
    chain(&e)
}

#[test]
fn start_names_what_is_wrong() {
    // Root: the interface is unknown; not root: AF_PACKET needs CAP_NET_RAW. Either way
    // the message says what to fix.
    let e = refused_as(ShaperConfig::new("nosuch0", "nosuch1", CONFIG), false);
    assert!(e.starts_with("opening --out: "), "{e}");
    assert!(e.contains("nosuch1") || e.contains("CAP_NET_RAW"), "{e}");
    let e = refused(ShaperConfig::new("lo", "lo", CONFIG));
    assert_eq!(e, "--in and --out are the same interface (lo)");
    let e = refused(ShaperConfig::new("a", "b", "/nonexistent.ipfw"));
    assert!(e.starts_with("reading /nonexistent.ipfw: "), "{e}");
    // A good configuration and a bad option: the option is named before any socket opens.
    let mut c = ShaperConfig::new("a", "b", CONFIG);
    c.mailbox = 1000;
    assert_eq!(
        refused(c),
        "--mailbox 1000: expected a power of two in 64..=262144"
    );
    let mut c = ShaperConfig::new("a", "b", CONFIG);
    c.rx_cpus = vec![0, 100_000];
    let e = refused(c);
    assert!(e.starts_with("--rx-cpus: CPU 100000 is not one"), "{e}");
    let mut c = ShaperConfig::new("a", "b", CONFIG);
    c.rx_threads = 0;
    assert_eq!(refused(c), "--rx-threads 0: expected 1..=64");
}
