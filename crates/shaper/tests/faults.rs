//! What an operator's network does to a shaper: interfaces named twice (an altname), links
//! that go down and come back, an output that disappears. Each case between real
//! interfaces, in network namespaces of the test's own (see `common`):
//!
//! ```text
//!  [snd: s0 10.77.0.1] --veth-- [shp: s1   Shaper   r1] --veth-- [rcv: r0 10.77.0.2]
//! ```
//!
//! Needs root (namespaces, AF_PACKET); CI runs as root. Without it the tests say so and
//! pass without checking anything, except with `CI=true`, where they fail.

mod common;

use common::{ip, topology_or_skip};
use pspat_engine::error_chain as chain;
use pspat_shaper::{Shaper, ShaperConfig};

const CONFIG: &str = "sched 1 config type fifo bw 10Mbit/s\n\
                      queue 1 config sched 1\n\
                      add 100 queue 1 ip from any to any\n";

/// `--in` and `--out` naming one interface, once by its name and once by an altname, are
/// refused as the same interface: a shaper between them would reflect every frame back to
/// its sender, twice.
#[test]
fn one_interface_by_its_name_and_an_altname_is_refused() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("shaper.ipfw");
    std::fs::write(&cfg, CONFIG).unwrap();
    let added = t
        .shp
        .run(|| ip("link property add dev r1 altname pspat-r1-alt"));
    if let Err(why) = added {
        // Altnames arrived in Linux 5.5 and iproute2 5.4.
        common::skip(&format!("no altnames here: {why}"));
        return;
    }
    for (input, output) in [("pspat-r1-alt", "r1"), ("r1", "pspat-r1-alt")] {
        let config = ShaperConfig::new(input, output, &cfg);
        let e = t
            .shp
            .run(move || Shaper::start(config).err())
            .map(|e| (e.is_usage(), chain(&e)));
        let (usage, msg) = e.unwrap_or_else(|| panic!("--in {input} --out {output} started"));
        assert!(usage, "{msg}");
        assert!(
            msg.starts_with(&format!(
                "--in {input} and --out {output} are the same interface (index "
            )),
            "{msg}"
        );
    }
}
