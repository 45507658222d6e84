//! The engine sending real UDP datagrams to a receiver on loopback: every packet arrives
//! once, in order per client, with the header the client stamped, and the one-way latency
//! measured by the receiver is consistent with the engine's departure times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_engine::{ClientConfig, Engine, EngineConfig, Handoff, SubmitError};
use pspat_io::udp::{Received, Receiver, Udp};
use pspat_sched::FlowParams;

#[test]
fn datagrams_arrive_once_in_order_with_their_stamps() {
    for handoff in [Handoff::Arbiter, Handoff::Dispatchers(2), Handoff::Clients] {
        let mut rx = Receiver::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let flows = vec![
            FlowParams::weighted(2).with_limit_pkts(4096),
            FlowParams::weighted(1).with_limit_pkts(4096),
        ];
        let mut cfg = EngineConfig::new("qfq+", flows, vec![ClientConfig::default(); 3]);
        cfg.handoff = handoff;
        // 200 Mbit/s keeps the receiver's socket buffer from overflowing.
        cfg.rate_bps = 200_000_000;
        let (engine, clients) = Engine::start(&cfg, Arc::new(Udp::new(rx.local_addr()))).unwrap();
        const N: u32 = 3_000;
        let senders: Vec<_> = clients
            .into_iter()
            .map(|mut c| {
                std::thread::spawn(move || {
                    let mut sent = 0;
                    while sent < N {
                        match c.submit(c.id() % 2, 100 + (sent % 900)) {
                            Ok(_) => sent += 1,
                            Err(SubmitError::MailboxFull) => {
                                c.wait_and_drain(Duration::from_micros(100));
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let t = Instant::now();
                    while c.in_flight() > 0 && t.elapsed() < Duration::from_secs(10) {
                        c.wait_and_drain(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        let mut got: Vec<Received> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got.len() < 3 * N as usize && Instant::now() < deadline {
            rx.recv_batch(&mut got, Duration::from_millis(50)).unwrap();
        }
        for s in senders {
            s.join().unwrap();
        }
        let report = engine.stop(true);
        assert_eq!(got.len(), 3 * N as usize, "{handoff}: datagrams lost");
        assert_eq!(rx.garbled(), 0);
        let mut next = [0u32; 3];
        for r in &got {
            let h = &r.header;
            let c = h.client as usize;
            assert_eq!(h.seq, next[c], "{handoff}: client {c} out of order");
            next[c] += 1;
            assert_eq!(h.flow, h.client % 2);
            assert_eq!(h.wire_len, 100 + (h.seq % 900));
            // Sent no earlier than the emulated link released it... minus the transmission
            // time, which the departure stamp includes (it is when the last bit leaves).
            assert!(
                h.depart_ns > h.submit_ns,
                "{handoff}: departure before submission"
            );
            assert!(
                r.since_submit_ns() > 0,
                "{handoff}: received before submitted"
            );
        }
        for s in &report.snapshot.clients {
            assert_eq!((s.sent, s.send_failed), (u64::from(N), 0), "{handoff}");
        }
    }
}
