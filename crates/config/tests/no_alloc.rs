//! The data path allocates nothing: classifying frames (stage 1) and mapping keys to
//! queues with a `KeyMap` (stage 2, after `new`), counted by a wrapping global allocator.
//! One test in this binary, so no other thread allocates while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use pspat_config::classify::packet::build::{tcp4, udp4, udp6};
use pspat_config::classify::{Classifier, FlowKey, KeyMap, Verdict};
use pspat_config::*;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter has no effect on
// the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // ORDERING: a plain counter read after the measured code on the same thread.
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // ORDERING: as in `alloc`.
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    // ORDERING: see `alloc`.
    ALLOCS.load(Ordering::Relaxed)
}

fn config() -> Config {
    let mut c = Config::default();
    c.schedulers.insert(
        1,
        SchedSpec {
            id: 1,
            algorithm: "qfq".into(),
            params: vec![],
            bandwidth_bps: 0,
            framing: Framing::PLAIN,
            mask: FlowMask::default(),
            max_instances: 1,
            idle_ns: 1,
            class: None,
        },
    );
    c.flowsets.insert(
        1,
        FlowsetSpec {
            id: 1,
            sched: 1,
            weight: 1,
            max_len: 1500,
            limit: QueueLimit::default(),
            qm: QueueManagement::default(),
            mask: FlowMask {
                src_ip: 0xff,
                ..FlowMask::default()
            },
            max_queues: 64,
            idle_ns: 1,
        },
    );
    let entries = (0..256u32)
        .map(|i| {
            (
                Prefix {
                    addr: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i << 8)),
                    len: 24,
                },
                if i % 2 == 0 { 1 } else { 9 },
            )
        })
        .collect();
    c.tables.insert(
        1.into(),
        Table {
            id: 1.into(),
            entries,
        },
    );
    c.rules = vec![
        Rule {
            number: 1,
            action: Action::Deny,
            matcher: Match {
                proto: Some(6),
                dst_ports: vec![PortRange { lo: 25, hi: 25 }, PortRange { lo: 587, hi: 587 }],
                ..Match::default()
            },
        },
        Rule {
            number: 2,
            action: Action::Queue(Target::Tablearg),
            matcher: Match {
                src: AddrMatch::Table(1.into()),
                ..Match::default()
            },
        },
    ];
    c.default_action = Action::Allow;
    c
}

#[test]
fn classification_and_keymap_do_not_allocate() {
    let k = Classifier::new(&config()).unwrap();
    let frames: Vec<Vec<u8>> = (0..512u32)
        .map(|i| match i % 4 {
            0 => udp4(0x0a00_0000 | i << 7, 1, 1000, 53),
            1 => tcp4(0x0a00_0000 | i << 7, 1, 1000, 587),
            2 => udp6(u128::from(i), 1, 1, 1),
            _ => vec![0xff; (i % 60) as usize],
        })
        .collect();
    let mut map: KeyMap<FlowKey> = KeyMap::new(64);
    let mask = k.classes()[0].mask;
    let before = allocs();
    let mut counts = [0usize; 3];
    for round in 0..4u64 {
        for f in &frames {
            match k.classify_frame(f, Direction::Out) {
                Verdict::Schedule { key, .. } | Verdict::Chain { key, .. } => {
                    let m = key.masked(&mask);
                    let _ = map.get_or_insert(m, m.hash64(), round);
                    counts[0] += 1;
                }
                Verdict::Allow => counts[1] += 1,
                Verdict::Drop(_) => counts[2] += 1,
            }
        }
        map.expire(round + 10, 5, 16, |_| true, |_| {});
    }
    let after = allocs();
    assert_eq!(
        after,
        before,
        "{} allocations on the data path",
        after - before
    );
    // The loop did real work: all three verdicts occurred, and the map filled.
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    assert!(!map.is_empty());
}
