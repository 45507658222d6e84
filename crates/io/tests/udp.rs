//! The udp backend against the udp Receiver over loopback.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use pspat_io::payload::{Header, PayloadError, MAX_WIRE_LEN, MIN_WIRE_LEN};
use pspat_io::udp::{Received, Receiver, Udp, BATCH};
use pspat_io::{clock, Backend, Pkt, SendError};

fn loopback_receiver() -> Receiver {
    Receiver::bind("127.0.0.1:0".parse().unwrap()).unwrap()
}

/// Receives until `n` well-formed datagrams are in `out` or 5 s pass.
fn recv_n(rx: &mut Receiver, out: &mut Vec<Received>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < n && Instant::now() < deadline {
        rx.recv_batch(out, Duration::from_millis(100)).unwrap();
    }
}

/// Lengths around every boundary: below the header (sent as 82), the boundary itself,
/// Ethernet's usual sizes, jumbo and the largest datagram.
const LENS: [u32; 12] = [
    1,
    41,
    64,
    81,
    MIN_WIRE_LEN,
    83,
    128,
    1000,
    1514,
    1515,
    9000,
    MAX_WIRE_LEN,
];

fn pkt(client: u32, seq: u32, len: u32) -> Pkt {
    Pkt {
        len,
        client,
        flow: seq % 7,
        seq,
        submit_ns: 1_000 + u64::from(seq),
        depart_ns: clock::now_ns(),
    }
}

#[test]
fn every_datagram_arrives_whole_with_its_header_in_order() {
    let mut rx = loopback_receiver();
    let backend = Udp::new(rx.local_addr());
    let mut tx = backend.open(0).unwrap();
    let mut seq = 0u32;
    let mut got = Vec::new();
    let mut sent = Vec::new();
    let mut k = 0;
    // Batch sizes: one, a full sendmmsg, one more (two calls), several calls.
    for size in [1usize, BATCH, BATCH + 1, 2 * BATCH + 3, 7] {
        let batch: Vec<Pkt> = (0..size)
            .map(|i| {
                seq += 1;
                // Mostly small frames, every 13th from the boundary list in turn (19 picks
                // in all: each boundary at least once), so that one batch stays well inside
                // even a default receive buffer.
                let len = if i % 13 == 0 {
                    k += 1;
                    LENS[k % LENS.len()]
                } else {
                    60 + seq % 1455
                };
                pkt(3, seq, len)
            })
            .collect();
        assert_eq!(tx.send(&batch).unwrap(), size);
        let want = got.len() + size;
        recv_n(&mut rx, &mut got, want);
        assert_eq!(got.len(), want, "batch of {size}: datagrams lost");
        sent.extend(batch);
    }
    tx.flush().unwrap();
    assert_eq!(rx.garbled(), 0, "{:?}", rx.last_garbled());
    assert!(sent.iter().any(|p| p.len == MAX_WIRE_LEN) && sent.iter().any(|p| p.len < 42));
    for (p, r) in sent.iter().zip(&got) {
        assert_eq!(r.header, Header::of(p), "order or contents differ");
        // UDP payload = len - 42, at least the 40-byte header.
        let expect = if p.len >= MIN_WIRE_LEN {
            p.len as usize - 42
        } else {
            40
        };
        assert_eq!(r.payload_len, expect, "len {}", p.len);
        // Received after it was stamped, and within the test's lifetime.
        assert!(r.since_depart_ns() >= 0 && r.since_depart_ns() < 10_000_000_000);
    }
}

#[test]
fn kernel_timestamps_fall_between_the_send_and_the_receive_call() {
    let mut rx = loopback_receiver();
    let backend = Udp::new(rx.local_addr());
    let mut tx = backend.open(0).unwrap();
    let mut got = Vec::new();
    assert_eq!(tx.send(&[pkt(1, 1, 100)]).unwrap(), 1);
    recv_n(&mut rx, &mut got, 1);
    assert_eq!(got[0].kernel_ns, None, "no stamps unless asked for");
    rx.kernel_timestamps().unwrap();
    // (the kernel turns its receive stamps on a moment later: see kernel_timestamps)
    std::thread::sleep(Duration::from_millis(50));
    let before = clock::now_ns();
    let batch: Vec<Pkt> = (2..2 + BATCH as u32).map(|s| pkt(1, s, 100)).collect();
    assert_eq!(tx.send(&batch).unwrap(), BATCH);
    std::thread::sleep(Duration::from_millis(20));
    recv_n(&mut rx, &mut got, 1 + BATCH);
    assert_eq!(got.len(), 1 + BATCH);
    for r in &got[1..] {
        let k = r.kernel_ns.expect("a stamp");
        // Stamped when loopback received it, before the receive call, which came at
        // least 20 ms later (give or take the clocks' offset, read per batch).
        assert!(k + 1_000_000 >= before, "{k} before {before}");
        assert!(
            k + 10_000_000 <= r.recv_ns,
            "{k} not 20 ms before {}",
            r.recv_ns
        );
    }
}

#[test]
fn no_receiver_is_not_an_error() {
    // A loopback port nobody listens on: the kernel answers each datagram with an ICMP
    // port unreachable. On a connected socket that would fail the next send with
    // ECONNREFUSED; the udp backend's unconnected socket never sees it.
    let closed: SocketAddr = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    let mut tx = Udp::new(closed).open(0).unwrap();
    for round in 0..5u32 {
        let batch: Vec<Pkt> = (0..BATCH as u32)
            .map(|i| pkt(0, round * 100 + i, 200))
            .collect();
        assert_eq!(tx.send(&batch).unwrap(), BATCH, "round {round}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn too_long_stops_the_batch_with_a_clear_error() {
    let mut rx = loopback_receiver();
    let mut tx = Udp::new(rx.local_addr()).open(0).unwrap();
    let batch = [
        pkt(1, 1, 100),
        pkt(1, 2, MAX_WIRE_LEN),
        pkt(1, 3, MAX_WIRE_LEN + 1),
        pkt(1, 4, 100),
    ];
    assert_eq!(tx.send(&batch).unwrap(), 2);
    match tx.send(&batch[2..]) {
        Err(SendError::Config(msg)) => {
            assert!(
                msg.contains("65550") && msg.contains("longer than"),
                "{msg}"
            )
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert_eq!(tx.send(&batch[3..]).unwrap(), 1);
    let mut got = Vec::new();
    recv_n(&mut rx, &mut got, 3);
    let seqs: Vec<u32> = got.iter().map(|r| r.header.seq).collect();
    assert_eq!(seqs, [1, 2, 4]);
}

#[test]
fn garbled_datagrams_are_counted_not_returned() {
    let mut rx = loopback_receiver();
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.send_to(
        b"not a pspat packet, long enough to hold a header.....",
        rx.local_addr(),
    )
    .unwrap();
    // A well-formed header whose wire_len (1000) promises 958 bytes, in 40.
    let mut short = [0u8; 40];
    pspat_io::payload::encode(&pkt(0, 9, 82), &mut short).unwrap();
    short[20..24].copy_from_slice(&1000u32.to_le_bytes());
    raw.send_to(&short, rx.local_addr()).unwrap();
    let mut tx = Udp::new(rx.local_addr()).open(0).unwrap();
    tx.send(&[pkt(0, 10, 300)]).unwrap();

    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.is_empty() || rx.garbled() < 2 {
        assert!(
            Instant::now() < deadline,
            "timed out: {got:?}, {}",
            rx.garbled()
        );
        rx.recv_batch(&mut got, Duration::from_millis(100)).unwrap();
    }
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].header.seq, 10);
    assert_eq!(rx.garbled(), 2);
    assert_eq!(
        rx.last_garbled(),
        Some(PayloadError::LengthMismatch {
            wire_len: 1000,
            expected: 958,
            got: 40
        })
    );
}

#[test]
fn one_socket_per_thread_and_per_client_order() {
    let mut rx = loopback_receiver();
    let backend = Udp::new(rx.local_addr());
    const PER: u32 = 300;
    let senders: Vec<_> = (0..2u32)
        .map(|t| {
            let mut tx = backend.open(t as usize).unwrap();
            std::thread::spawn(move || {
                for chunk in (0..PER).collect::<Vec<_>>().chunks(50) {
                    let batch: Vec<Pkt> = chunk.iter().map(|&s| pkt(t, s, 100)).collect();
                    assert_eq!(tx.send(&batch).unwrap(), batch.len());
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let mut got = Vec::new();
    recv_n(&mut rx, &mut got, 2 * PER as usize);
    for s in senders {
        s.join().unwrap();
    }
    assert!(rx.recv_buffer() > 0);
    assert_eq!(
        got.len(),
        2 * PER as usize,
        "receive buffer {}",
        rx.recv_buffer()
    );
    for client in 0..2 {
        let seqs: Vec<u32> = got
            .iter()
            .filter(|r| r.header.client == client)
            .map(|r| r.header.seq)
            .collect();
        assert_eq!(seqs, (0..PER).collect::<Vec<_>>(), "client {client}");
    }
}

#[test]
fn ipv6_loopback() {
    let mut rx = match Receiver::bind("[::1]:0".parse().unwrap()) {
        Ok(rx) => rx,
        Err(e) => {
            eprintln!("skipped: no IPv6 loopback here ({e})");
            return;
        }
    };
    let mut tx = Udp::new(rx.local_addr()).open(0).unwrap();
    assert_eq!(tx.send(&[pkt(2, 1, 500), pkt(2, 2, 60)]).unwrap(), 2);
    let mut got = Vec::new();
    recv_n(&mut rx, &mut got, 2);
    let lens: Vec<usize> = got.iter().map(|r| r.payload_len).collect();
    assert_eq!(lens, [458, 40]);
}

#[test]
fn mismatched_bind_family_is_a_config_error() {
    let b = Udp {
        dest: "127.0.0.1:9000".parse().unwrap(),
        bind: Some("[::1]:0".parse().unwrap()),
    };
    match b.open(0) {
        Err(SendError::Config(msg)) => assert!(msg.contains("address famil"), "{msg}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn recv_batch_times_out_with_nothing() {
    let mut rx = loopback_receiver();
    let mut got = Vec::new();
    let t = Instant::now();
    assert_eq!(
        rx.recv_batch(&mut got, Duration::from_millis(30)).unwrap(),
        0
    );
    let waited = t.elapsed();
    assert!(got.is_empty());
    assert!(
        waited >= Duration::from_millis(25) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}

#[test]
fn a_nonblocking_receiver_returns_at_once_and_still_receives() {
    let mut rx = loopback_receiver();
    rx.set_nonblocking(true).unwrap();
    let mut out = Vec::new();
    // Nothing queued: the call returns 0 without waiting for the (long) timeout.
    let t = Instant::now();
    assert_eq!(rx.recv_batch(&mut out, Duration::from_secs(2)).unwrap(), 0);
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let mut tx = Udp::new(rx.local_addr()).open(0).unwrap();
    let batch: Vec<Pkt> = (1..=5).map(|s| pkt(9, s, 200)).collect();
    assert_eq!(tx.send(&batch).unwrap(), 5);
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < 5 && Instant::now() < deadline {
        rx.recv_batch(&mut out, Duration::from_secs(2)).unwrap();
    }
    let seqs: Vec<u32> = out.iter().map(|r| r.header.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
}
