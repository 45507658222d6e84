//! A `Run` dropped without `stop` (an early `?` in its caller) stops its client threads,
//! also a client whose packets the rules all deny, which never sees the engine stop. Its
//! own test binary, so no other test's clients run beside it.

use std::path::Path;
use std::time::{Duration, Instant};

use pspat_run::{Run, Scenario};

/// Threads of this process named `client...`.
fn client_threads() -> usize {
    pspat_io::cpu::threads_cpu_s(&["client"]).len()
}

#[test]
fn dropping_a_run_stops_its_clients() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/run-dummynet.toml");
    let mut sc = Scenario::load(&path).unwrap();
    sc.backend = "null".into();
    // `barred`: every packet denied by the rules.
    assert!(sc.tenants.iter().any(|t| t.name == "barred"));
    let run = Run::start(&sc).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(client_threads() > 0);
    drop(run);
    let t = Instant::now();
    while client_threads() > 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(client_threads(), 0, "client threads left after the drop");
}
