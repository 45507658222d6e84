//! Tags: a client's own 32-bit value per packet (a shaper's frame-buffer index) reaches
//! the transmitting side in `seq`, and every packet the scheduler drops reaches
//! `Backend::discard` with its tag: each tag comes back exactly once, sent or discarded.

mod recording;

use std::sync::Arc;

use pspat_config::Direction;
use pspat_engine::{Client, ClientConfig, Engine, EngineConfig, SubmitError};
use recording::{Recorded, RecordingBackend};

/// An Ethernet + IPv4 + UDP frame from 10.0.0.`src` port 5000 to 10.1.0.1 port 9.
fn frame(src: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, src]);
    f[30..34].copy_from_slice(&[10, 1, 0, 1]);
    f[34..36].copy_from_slice(&5000u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

fn start(handoff: pspat_engine::Handoff, backend: Arc<Recorded>) -> (Engine, Vec<Client>) {
    // Host 1 is shaped into a 4-packet queue on a slow link (most of a burst is
    // dropped); host 2 passes unscheduled; host 3 is denied by the rules.
    let config = pspat_config::parse_ipfw(
        "sched 1 config type fifo bw 8Mbit/s\n\
         queue 1 config sched 1 queue 4\n\
         add 100 queue 1 src-ip 10.0.0.1\n\
         add 200 allow src-ip 10.0.0.2\n\
         default deny\n",
        "test",
    )
    .unwrap();
    let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default(); 2]);
    cfg.spin_ns = 20_000;
    cfg.handoff = handoff;
    cfg.dummynet = Some(Arc::new(config));
    Engine::start(&cfg, Arc::new(RecordingBackend(backend))).unwrap()
}

fn each_tag_once(handoff: pspat_engine::Handoff) {
    let tags = Arc::new(Recorded::default());
    let (engine, clients) = start(handoff, Arc::clone(&tags));
    let mut accepted = Vec::new();
    let mut denied = 0;
    for (c, mut client) in clients.into_iter().enumerate() {
        for i in 0..300u32 {
            let src = [1, 2, 3][(i % 3) as usize];
            // Recorded far from any sequence number, different per client.
            let tag = 1_000_000 * (c as u32 + 1) + i;
            match client.submit_frame_tagged(&frame(src), 60, Direction::In, tag) {
                Ok(_) => accepted.push(tag),
                Err(SubmitError::Filtered(_)) => {
                    assert_eq!(src, 3, "only host 3 is denied");
                    denied += 1;
                }
                Err(SubmitError::MailboxFull) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
            client.drain();
        }
    }
    let report = engine.stop(true);
    assert_eq!(denied, 200);
    let sent = tags.sent.lock().unwrap().clone();
    let discarded = tags.discarded.lock().unwrap().clone();
    let drops: u64 = report
        .snapshot
        .clients
        .iter()
        .map(|c| c.dropped_total())
        .sum();
    assert_eq!(
        discarded.len() as u64,
        drops,
        "one discard per scheduler drop"
    );
    assert!(drops > 0, "the 4-packet queue overflowed");
    assert!(!sent.is_empty());
    let mut all: Vec<u32> = sent.iter().chain(&discarded).copied().collect();
    all.sort_unstable();
    accepted.sort_unstable();
    assert_eq!(all, accepted, "every accepted tag comes back exactly once");
}

#[test]
fn tags_reach_the_sender_or_the_discard_hook_arbiter_handoff() {
    each_tag_once(pspat_engine::Handoff::Arbiter);
}

#[test]
fn tags_reach_the_sender_or_the_discard_hook_dispatchers() {
    each_tag_once(pspat_engine::Handoff::Dispatchers(2));
}
