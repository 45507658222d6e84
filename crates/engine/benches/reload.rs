//! What a reload of a large tree costs: `reload/subscribers/N` re-rates every one of N
//! subscriber classes of a running engine (an uplink, 4 sites, N subscribers on 3 plans,
//! each with its flowset and table entry), alternating between two configurations, so each
//! iteration is N class changes: compiled on the caller's thread, then checked and applied
//! by the arbiter between two scans (`Engine::reconfigure` returns once it has), in the
//! tree's running instance. The bar: 10k subscriber changes in under 100 ms.
//!
//! `cargo bench -p pspat-engine --bench reload`

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pspat_config::classify::FlowKey;
use pspat_config::Direction;
use pspat_engine::{Change, ClientConfig, Engine, EngineConfig, SchedRef};
use pspat_io::null::Null as NullBackend;

/// An uplink, 4 sites and `subs` subscribers, each subscriber's plan rate scaled by
/// `scale` percent.
fn isp_tree(subs: u32, scale: u64) -> pspat_config::Config {
    let mut t = String::from("pipe 1 config bw 10Gbit/s\nsched 1 config type wf2q+\n");
    for site in 2..6 {
        t += &format!("sched {site} config type wf2q+ parent 1 rate 2Gbit/s ceil 4Gbit/s\n");
    }
    let plans = [
        (10_000, 300_000, 4, 0),
        (5_000, 100_000, 2, 1),
        (2_000, 25_000, 1, 1),
    ];
    for i in 0..subs {
        let (rate, ceil, w, prio) = plans[i as usize % 3];
        let (id, site) = (1000 + i, 2 + i % 4);
        t += &format!(
            "sched {id} config type drr parent {site} rate {}kbit/s ceil {ceil}kbit/s \
             weight {w} prio {prio}\n\
             queue {id} config sched {id} mask all queue 100 max-queues 64 idle 30s\n\
             table 1 add 10.{}.{}.{} {id}\n",
            rate * scale / 100,
            site,
            i / 250,
            i % 250 + 1
        );
    }
    t += "add 100 queue tablearg ip from any to table(1) out\nadd 200 deny ip from any to any\n";
    pspat_config::parse_ipfw(&t, "bench").unwrap()
}

fn reload(c: &mut Criterion) {
    let mut g = c.benchmark_group("reload");
    g.sample_size(10);
    for subs in [1_000u32, 10_000] {
        let (a, b) = (Arc::new(isp_tree(subs, 100)), Arc::new(isp_tree(subs, 110)));
        let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
        cfg.dummynet = Some(Arc::clone(&a));
        let (engine, mut clients) = Engine::start(&cfg, Arc::new(NullBackend)).unwrap();
        // A packet to the first subscriber: the tree's instance exists, and each reload
        // changes its classes in place.
        let to_first = FlowKey::v4(0x0a00_0001, 0x0a02_0001, 5000, 80, 17);
        clients[0]
            .submit_key(&to_first, 1000, Direction::Out)
            .unwrap();
        while engine.snapshot().clients[0].scheduled == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let instances = |e: &Engine| {
            let ds = e.dummynet_stats().unwrap();
            ds.scheduler(SchedRef::Sched(1)).unwrap().instances.len()
        };
        assert_eq!(instances(&engine), 1);
        let mut flip = false;
        g.bench_with_input(BenchmarkId::new("subscribers", subs), &subs, |bench, _| {
            bench.iter(|| {
                flip = !flip;
                let next = if flip { &b } else { &a };
                engine
                    .reconfigure(Change::Config(Arc::clone(next)))
                    .unwrap()
            })
        });
        assert_eq!(
            instances(&engine),
            1,
            "the instance lived through the reloads"
        );
        engine.stop(false);
    }
    g.finish();
}

criterion_group!(benches, reload);
criterion_main!(benches);
