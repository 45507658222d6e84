//! The example of README.md ("Using the library"), kept compiling and true.

use pspat_sched::{registry, Desc, FlowParams, Params, Scheduler};

#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let mut s = registry::build::<Desc>("wf2q+", &Params::new(), 4096)?;
    let video = s.add_flow(FlowParams::weighted(3).with_limit_pkts(256))?;
    let bulk = s.add_flow(FlowParams::weighted(1))?;
    s.enqueue(video, Desc::new(1, 1200)).map_err(|r| r.reason)?;
    s.enqueue(bulk, Desc::new(2, 1500)).map_err(|r| r.reason)?;
    let mut lines = Vec::new();
    while let Some((flow, pkt)) = s.dequeue() {
        lines.push(format!("{flow} sends {} bytes", pkt.len));
    }
    assert_eq!(
        lines,
        ["flow #0 sends 1200 bytes", "flow #1 sends 1500 bytes"]
    );
    assert_eq!(
        s.stats().to_string(),
        "Sent 2700 bytes 2 pkt (dropped 0) backlog 0b 0p flows 2"
    );
    Ok(())
}
