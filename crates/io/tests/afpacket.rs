//! AF_PACKET sockets on a veth pair, each test in a network namespace of its own.
//!
//! They need root (CAP_NET_ADMIN for the namespace and the veth pair, CAP_NET_RAW for the
//! sockets); without it each test prints why it is skipped and passes.
//!
//! **Namespaces.** [`in_netns`] runs the test body in a dedicated thread that calls
//! `unshare(CLONE_NEWNET)`: the thread, and only it (and the `ip` processes and threads it
//! starts), is then in a new, anonymous network namespace, where it creates the veth pair
//! `a` <-> `b`. The namespace has no name and no other user, so the kernel deletes it,
//! veth pair included, as soon as the thread ends and its sockets are closed: whether the
//! test passed, panicked, or the whole process was killed, nothing is left behind, and
//! tests running in parallel cannot see each other's interfaces. (The alternative, `ip
//! netns add` plus setns(2), needs a guard to delete the namespace and leaks it when the
//! process is killed.) IPv6 is disabled on the pair before it comes up, so the kernel
//! sends nothing on it by itself (no router or neighbour solicitations) and counts are
//! exact; frames are still filtered by EtherType or payload.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use pspat_io::afpacket::vnet::{self, VNET_HDR_LEN};
use pspat_io::afpacket::{
    AfPacket, AfPacketError, Fanout, FanoutMode, Frame, RxMode, RxOptions, RxRing, TxOptions,
    TxSocket, BATCH,
};
use pspat_io::payload::{self, Header};
use pspat_io::{parse_backend, Pkt, SendError};

/// EtherType of the test frames: IEEE 802 "local experimental 1".
const ETH_TEST: u16 = 0x88b5;

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn ip(args: &str) {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .expect("run ip(8)");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `body` in a thread of its own, in a new network namespace holding the veth pair
/// `a` <-> `b`, both up (see the module documentation). Returns false (test skipped) when
/// not root. A panic in `body` fails the calling test.
fn in_netns(body: impl FnOnce() + Send + 'static) -> bool {
    if !is_root() {
        println!("skipped: needs root (CAP_NET_ADMIN for a network namespace, CAP_NET_RAW)");
        return false;
    }
    let t = std::thread::Builder::new()
        .name("afpacket-netns".into())
        .spawn(move || {
            // SAFETY: unshare takes no pointers; CLONE_NEWNET only moves the calling thread
            // to a new network namespace (allowed in a multi-threaded process).
            let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(
                rc,
                0,
                "unshare(CLONE_NEWNET): {}",
                std::io::Error::last_os_error()
            );
            ip("link add name a type veth peer name b");
            for i in ["a", "b"] {
                // /proc/sys/net is that of the namespace of the thread that opens it.
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
            }
            ip("link set dev a up");
            ip("link set dev b up");
            body();
        })
        .expect("spawn the namespace thread");
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
    true
}

/// A small ring: 32 blocks of 64 KiB.
fn small_ring() -> RxOptions {
    RxOptions {
        block_size: 64 << 10,
        block_count: 32,
        ..RxOptions::default()
    }
}

/// Test frame number `seq`, `len` bytes: Ethernet header with [`ETH_TEST`], `seq`, then
/// bytes derived from both.
fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 18);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0b]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&ETH_TEST.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (seq as usize * 31 + i * 7) as u8;
    }
    f
}

fn ethertype(data: &[u8]) -> u16 {
    u16::from_be_bytes([data[12], data[13]])
}

fn test_seq(data: &[u8]) -> Option<u32> {
    (data.len() >= 18 && ethertype(data) == ETH_TEST)
        .then(|| u32::from_be_bytes(data[14..18].try_into().unwrap()))
}

/// Collects (copies of) frames accepted by `keep` until `n` were kept or `within` passed.
fn recv_until(
    rx: &mut RxRing,
    n: usize,
    within: Duration,
    keep: impl Fn(&Frame<'_>) -> bool,
) -> Vec<(Vec<u8>, u32, Option<u16>)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + within;
    while got.len() < n && Instant::now() < deadline {
        if rx.wait(Duration::from_millis(20)).unwrap() {
            rx.for_each_frame(|f| {
                if keep(&f) {
                    got.push((f.data.to_vec(), f.wire_len, f.vlan_tci));
                }
            });
        }
    }
    got
}

fn ours(f: &Frame<'_>) -> bool {
    test_seq(f.data).is_some()
}

#[test]
fn frames_sent_on_a_arrive_byte_exact_and_in_order_on_b() {
    in_netns(|| {
        for mode in [RxMode::Blocks, RxMode::Frames] {
            byte_exact_and_in_order(mode);
        }
    });
}

fn byte_exact_and_in_order(mode: RxMode) {
    {
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        // 16 blocks of 64 KiB (512 frame slots): the 1.7 MB sent below go round the ring
        // twice.
        let ring = RxOptions {
            block_count: 16,
            mode,
            ..small_ring()
        };
        let mut rx = RxRing::open("b", &ring).unwrap();
        assert_eq!(tx.mtu().unwrap(), 1500);
        assert_ne!(tx.ifindex(), rx.ifindex());
        let mut seq = 0u32;
        let mut total = 0;
        // One frame, a sendmmsg minus one, exactly one, one more, several calls...
        for size in [
            1usize,
            BATCH - 1,
            BATCH,
            BATCH + 1,
            3 * BATCH + 5,
            1,
            500,
            7,
            400,
            300,
            450,
        ] {
            // Lengths cover both ends (60 and 1514) and pseudo-random ones between.
            let frames: Vec<Vec<u8>> = (0..size)
                .map(|i| {
                    let s = seq + i as u32;
                    let len = match s % 5 {
                        0 => 60,
                        1 => 1514,
                        _ => 60 + (s as usize * 977) % (1514 - 60 + 1),
                    };
                    test_frame(s, len)
                })
                .collect();
            let sent = tx.send_batch(size, |i| &frames[i]).unwrap();
            assert_eq!(sent, size);
            let got = recv_until(&mut rx, size, Duration::from_secs(5), ours);
            assert_eq!(got.len(), size, "batch of {size} from seq {seq}");
            for (i, (data, wire_len, vlan)) in got.iter().enumerate() {
                assert_eq!(data, &frames[i], "frame seq {}", seq + i as u32);
                assert_eq!(*wire_len as usize, frames[i].len());
                assert_eq!(*vlan, None);
            }
            seq += size as u32;
            total += size;
        }
        // Nothing extra came: one more look finds no test frame.
        let extra = recv_until(&mut rx, 1, Duration::from_millis(50), ours);
        assert!(extra.is_empty(), "{} unexpected frames", extra.len());
        let st = rx.stats().unwrap();
        assert_eq!(st.drops, 0, "{mode:?}");
        assert!(
            st.packets >= total as u64,
            "{mode:?}: {st:?} after {total} frames"
        );
    }
}

/// A ring of frames hands a lone frame over at once; a ring of blocks holds it until its
/// block times out (here never within the test: a 10 s timeout).
#[test]
fn a_frame_ring_hands_a_lone_frame_over_at_once_a_block_ring_at_its_timeout() {
    in_netns(|| {
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        for (mode, at_once) in [(RxMode::Frames, true), (RxMode::Blocks, false)] {
            let opts = RxOptions {
                mode,
                block_timeout_ms: 10_000,
                ..small_ring()
            };
            let mut rx = RxRing::open("b", &opts).unwrap();
            let frame = test_frame(7, 100);
            assert_eq!(tx.send_batch(1, |_| &frame).unwrap(), 1);
            let t0 = Instant::now();
            let ready = rx.wait(Duration::from_millis(200)).unwrap();
            assert_eq!(ready, at_once, "{mode:?} after {:?}", t0.elapsed());
            if at_once {
                assert!(t0.elapsed() < Duration::from_millis(100), "{mode:?}");
                let mut seqs = Vec::new();
                rx.for_each_frame(|f| seqs.extend(test_seq(f.data)));
                assert_eq!(seqs, [7]);
            }
        }
    });
}

/// IPv4/UDP frame from port `sport` carrying `seq`, for the flow hash.
fn udp_frame(sport: u16, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 4];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0b]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&(20u16 + 8 + 4).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 1, 0, 1]);
    f[30..34].copy_from_slice(&[10, 1, 0, 2]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&7000u16.to_be_bytes());
    f[38..40].copy_from_slice(&12u16.to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn udp_flow_seq(d: &[u8]) -> Option<(u16, u32)> {
    (d.len() == 46 && ethertype(d) == 0x0800 && d[23] == 17).then(|| {
        (
            u16::from_be_bytes([d[34], d[35]]),
            u32::from_be_bytes(d[42..46].try_into().unwrap()),
        )
    })
}

#[test]
fn a_hash_fanout_group_receives_each_frame_once_and_keeps_flows_together() {
    in_netns(|| {
        let opts = RxOptions {
            fanout: Some(Fanout {
                group: 7,
                mode: FanoutMode::Hash,
            }),
            ..small_ring()
        };
        let mut rings = [
            RxRing::open("b", &opts).unwrap(),
            RxRing::open("b", &opts).unwrap(),
        ];
        // A member asking for another mode is refused, and the error says why.
        let lb = RxOptions {
            fanout: Some(Fanout {
                group: 7,
                mode: FanoutMode::Lb,
            }),
            ..small_ring()
        };
        let e = RxRing::open("b", &lb).unwrap_err().to_string();
        assert!(
            e.contains("PACKET_FANOUT") && e.contains("same mode"),
            "{e}"
        );

        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        const FLOWS: u16 = 64;
        const PER_FLOW: u32 = 10;
        // Flows interleaved: frame k is flow k % FLOWS, its (k / FLOWS)-th.
        let frames: Vec<Vec<u8>> = (0..u32::from(FLOWS) * PER_FLOW)
            .map(|k| udp_frame(1000 + (k % u32::from(FLOWS)) as u16, k / u32::from(FLOWS)))
            .collect();
        assert_eq!(
            tx.send_batch(frames.len(), |i| &frames[i]).unwrap(),
            frames.len()
        );

        // (flow, seq) -> ring that got it; per ring and flow, the order of seqs.
        let mut seen: HashMap<(u16, u32), usize> = HashMap::new();
        let mut order: HashMap<(usize, u16), Vec<u32>> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen.len() < frames.len() && Instant::now() < deadline {
            for (r, ring) in rings.iter_mut().enumerate() {
                ring.wait(Duration::from_millis(5)).unwrap();
                ring.for_each_frame(|f| {
                    if let Some((flow, seq)) = udp_flow_seq(f.data) {
                        assert!(
                            seen.insert((flow, seq), r).is_none(),
                            "({flow}, {seq}) twice"
                        );
                        order.entry((r, flow)).or_default().push(seq);
                    }
                });
            }
        }
        assert_eq!(seen.len(), frames.len());
        let mut flows_per_ring = [0; 2];
        for flow in 1000..1000 + FLOWS {
            let rings_of_flow: Vec<usize> =
                (0..2).filter(|r| order.contains_key(&(*r, flow))).collect();
            assert_eq!(
                rings_of_flow.len(),
                1,
                "flow {flow} on rings {rings_of_flow:?}"
            );
            let r = rings_of_flow[0];
            assert_eq!(
                order[&(r, flow)],
                (0..PER_FLOW).collect::<Vec<_>>(),
                "flow {flow}"
            );
            flows_per_ring[r] += 1;
        }
        // 64 flows all hashed to one ring would happen with probability 2^-63.
        assert!(flows_per_ring.iter().all(|&n| n > 0), "{flows_per_ring:?}");
    });
}

#[test]
fn ignore_outgoing_hides_our_own_frames_and_qdisc_bypass_hides_them_from_everyone() {
    in_netns(|| {
        let ignoring = RxOptions {
            ignore_outgoing: true,
            ..small_ring()
        };
        let seeing = RxOptions {
            ignore_outgoing: false,
            ..small_ring()
        };
        let mut ign = RxRing::open("a", &ignoring).unwrap();
        let mut all = RxRing::open("a", &seeing).unwrap();
        let mut peer = RxRing::open("b", &small_ring()).unwrap();
        let frames: Vec<Vec<u8>> = (0..100).map(|s| test_frame(s, 100)).collect();
        let wait = Duration::from_secs(5);

        // Through the qdisc path, outgoing frames pass the interface's taps.
        let qdisc = TxOptions {
            qdisc_bypass: false,
            ..TxOptions::default()
        };
        let mut tx = TxSocket::open("a", &qdisc).unwrap();
        assert_eq!(tx.send_batch(100, |i| &frames[i]).unwrap(), 100);
        assert_eq!(recv_until(&mut peer, 100, wait, ours).len(), 100);
        let echoed = recv_until(&mut all, 100, wait, ours);
        assert_eq!(
            echoed.len(),
            100,
            "a tap without ignore_outgoing sees outgoing frames"
        );
        assert_eq!(echoed[0].0, frames[0]);
        let hidden = recv_until(&mut ign, 1, Duration::from_millis(100), ours);
        assert!(
            hidden.is_empty(),
            "ignore_outgoing let {} frames through",
            hidden.len()
        );

        // With the bypass, no tap on `a` sees them; the peer still receives them.
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        assert_eq!(tx.send_batch(100, |i| &frames[i]).unwrap(), 100);
        assert_eq!(recv_until(&mut peer, 100, wait, ours).len(), 100);
        assert!(recv_until(&mut all, 1, Duration::from_millis(100), ours).is_empty());
        assert!(recv_until(&mut ign, 1, Duration::from_millis(100), ours).is_empty());
    });
}

#[test]
fn a_stripped_vlan_tag_is_reported_and_can_be_put_back() {
    in_netns(|| {
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        let mut rx = RxRing::open("b", &small_ring()).unwrap();
        // 802.1Q tag: priority 1, VLAN 5, then the test EtherType.
        let plain = test_frame(42, 120);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x05]);
        tagged.extend_from_slice(&plain[12..]);
        assert_eq!(tx.send_batch(1, |_| &tagged).unwrap(), 1);
        let got = recv_until(&mut rx, 1, Duration::from_secs(5), |_| true);
        assert_eq!(got.len(), 1);
        let (data, wire_len, vlan) = &got[0];
        // The receive path removes the tag before packet sockets see the frame, on veth as
        // on hardware, and reports it aside.
        assert_eq!(*vlan, Some(0x2005));
        assert_eq!(data, &plain);
        assert_eq!(*wire_len as usize, plain.len());
        let mut rebuilt = data[..12].to_vec();
        rebuilt.extend_from_slice(&[0x81, 0x00]);
        rebuilt.extend_from_slice(&vlan.unwrap().to_be_bytes());
        rebuilt.extend_from_slice(&data[12..]);
        assert_eq!(rebuilt, tagged);
    });
}

/// `tags` (TPID, TCI) inserted after the MAC addresses of `plain`, outermost first.
fn with_tags(plain: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut f = plain[..12].to_vec();
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&plain[12..]);
    f
}

#[test]
fn a_stripped_tag_is_reported_with_its_tpid_802_1ad_included() {
    in_netns(|| {
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        let mut rx = RxRing::open("b", &small_ring()).unwrap();
        let plain = test_frame(43, 150);
        // 802.1ad outside 802.1Q (QinQ), 802.1ad alone, 802.1Q alone.
        let sent = [
            with_tags(&plain, &[(0x88a8, 0x0064), (0x8100, 0x2005)]),
            with_tags(&plain, &[(0x88a8, 0x3007)]),
            with_tags(&plain, &[(0x8100, 0x0009)]),
        ];
        assert_eq!(tx.send_batch(3, |i| &sent[i]).unwrap(), 3);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 3 && Instant::now() < deadline {
            if rx.wait(Duration::from_millis(20)).unwrap() {
                rx.for_each_frame(|f| {
                    got.push((f.data.to_vec(), f.vlan_tci, f.vlan_tpid));
                });
            }
        }
        // The kernel removes the outer tag only, whatever its TPID, and says which it was;
        // an inner tag stays in the frame.
        let want = [
            (with_tags(&plain, &[(0x8100, 0x2005)]), Some(0x0064), 0x88a8),
            (plain.clone(), Some(0x3007), 0x88a8),
            (plain.clone(), Some(0x0009), 0x8100),
        ];
        assert_eq!(got, want);
    });
}

#[test]
fn a_frame_the_kernel_refuses_costs_only_itself() {
    in_netns(|| {
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        let mut rx = RxRing::open("b", &small_ring()).unwrap();
        // 1515 bytes untagged on an MTU of 1500: EMSGSIZE. In the first, a middle and the
        // last position of a sendmmsg, and twice in a row, among 2 * BATCH frames.
        let n = 2 * BATCH;
        let refused = [0, 5, 6, BATCH - 1, BATCH + 7, n - 1];
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|i| test_frame(i as u32, if refused.contains(&i) { 1515 } else { 1514 }))
            .collect();
        assert_eq!(
            tx.send_batch(n, |i| &frames[i]).unwrap(),
            n - refused.len(),
            "every frame but the refused ones sent"
        );
        let got = recv_until(&mut rx, n, Duration::from_secs(2), ours);
        let want: Vec<&Vec<u8>> = (0..n)
            .filter(|i| !refused.contains(i))
            .map(|i| &frames[i])
            .collect();
        let got: Vec<&Vec<u8>> = got.iter().map(|g| &g.0).collect();
        assert_eq!(got, want, "the others arrived, in order");
        // A batch of refused frames only: none sent, and no error for the socket.
        let big = [test_frame(900, 1515), test_frame(901, 1600)];
        assert_eq!(tx.send_batch(2, |i| &big[i]).unwrap(), 0);
    });
}

#[test]
fn a_partial_checksum_crosses_with_its_vnet_header_and_not_without() {
    in_netns(|| {
        ip("addr add 10.9.0.1/24 dev a");
        ip("neigh add 10.9.0.3 lladdr 02:00:00:00:00:0b dev a nud permanent");
        partial_checksum_crosses(RxMode::Blocks);
        partial_checksum_crosses(RxMode::Frames);
    });
}

fn partial_checksum_crosses(mode: RxMode) {
    {
        let vnet_ring = RxOptions {
            vnet_hdr: true,
            mode,
            ..small_ring()
        };
        let mut rx = RxRing::open("b", &vnet_ring).unwrap();
        // A local UDP socket sends through a (checksum offload on, as on any veth): the
        // frame leaves with only the pseudo-header sum in its checksum field.
        let sock = std::net::UdpSocket::bind("10.9.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        sock.send_to(&[0x5a; 100], "10.9.0.3:9").unwrap();
        let is_ours = |d: &[u8]| d.len() >= 42 && d[12..14] == [8, 0] && d[36..38] == [0, 9];
        let mut got = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.is_none() && Instant::now() < deadline {
            if rx.wait(Duration::from_millis(20)).unwrap() {
                rx.for_each_frame(|f| {
                    if is_ours(f.data) {
                        got = Some((f.vnet(), f.csum_not_ready, f.with_vnet.to_vec()));
                    }
                });
            }
        }
        let (hdr, not_ready, mut bytes) = got.expect("the datagram's frame on b");
        let hdr = hdr.expect("a ring with vnet_hdr gives the header");
        assert!(not_ready, "TP_STATUS_CSUMNOTREADY");
        assert!(hdr.needs_csum(), "{hdr:?}");
        // Checksummed from the UDP header (14 + 20) on; the field is 6 bytes into it.
        assert_eq!((hdr.csum_start, hdr.csum_offset), (34, 6), "{hdr:?}");
        assert_eq!(hdr.gso_type, vnet::GSO_NONE);
        assert_eq!(bytes.len(), VNET_HDR_LEN + 14 + 20 + 8 + 100);

        // Turn it around, still partial: MACs, addresses and ports swapped (neither the
        // IPv4 header checksum nor the pseudo-header sum changes), sent back to a.
        let f = &mut bytes[VNET_HDR_LEN..];
        let (dst, src) = (mac_of("a"), [2, 0, 0, 0, 0, 0x0b]);
        f[0..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&src);
        let (sa, da) = (f[26..30].to_vec(), f[30..34].to_vec());
        f[26..30].copy_from_slice(&da);
        f[30..34].copy_from_slice(&sa);
        f[34..36].copy_from_slice(&9u16.to_be_bytes());
        f[36..38].copy_from_slice(&port.to_be_bytes());
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut buf = [0u8; 200];
        // Without the header the receiver sees a wrong checksum and drops the datagram.
        let mut plain = TxSocket::open("b", &TxOptions::default()).unwrap();
        assert_eq!(plain.send_batch(1, |_| &bytes[VNET_HDR_LEN..]).unwrap(), 1);
        assert!(
            sock.recv_from(&mut buf).is_err(),
            "a partial checksum sent as is must not be accepted"
        );
        // With it the packet is partial again on the other side, and accepted.
        let opts = TxOptions {
            vnet_hdr: true,
            ..TxOptions::default()
        };
        let mut tx = TxSocket::open("b", &opts).unwrap();
        assert_eq!(tx.send_batch(1, |_| &bytes).unwrap(), 1);
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (n, from) = sock.recv_from(&mut buf).expect("the datagram, accepted");
        assert_eq!(&buf[..n], &[0x5a; 100]);
        assert_eq!(from.to_string(), "10.9.0.3:9");
    }
}

#[test]
fn an_overrun_drops_new_frames_counts_them_and_the_ring_recovers() {
    in_netns(|| {
        // 4 pages: a few 1000-byte frames per block.
        let tiny = RxOptions {
            block_size: 4096,
            block_count: 4,
            frame_size: 2048,
            ..RxOptions::default()
        };
        let mut rx = RxRing::open("b", &tiny).unwrap();
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        let frames: Vec<Vec<u8>> = (0..200).map(|s| test_frame(s, 1000)).collect();
        assert_eq!(tx.send_batch(200, |i| &frames[i]).unwrap(), 200);
        std::thread::sleep(Duration::from_millis(20)); // let the last block time out
        let mut seqs = Vec::new();
        let mut all = 0;
        rx.for_each_frame(|f| {
            all += 1;
            seqs.extend(test_seq(f.data));
        });
        let st = rx.stats().unwrap();
        assert!(st.drops > 0 && st.freezes > 0, "{st:?}");
        assert_eq!(st.packets, 200, "{st:?}");
        assert_eq!(all as u64, st.packets - st.drops, "{st:?}");
        // What was kept is the oldest frames, whole and in order: 0, 1, 2, ...
        assert!(!seqs.is_empty() && seqs.len() < 200);
        assert_eq!(seqs, (0..seqs.len() as u32).collect::<Vec<_>>());

        // Released, the ring takes frames again; statistics accumulate.
        assert_eq!(tx.send_batch(3, |i| &frames[i]).unwrap(), 3);
        assert_eq!(
            recv_until(&mut rx, 3, Duration::from_secs(5), ours).len(),
            3
        );
        let again = rx.stats().unwrap();
        assert_eq!(again.packets, st.packets + 3);
        assert_eq!((again.drops, again.freezes), (st.drops, st.freezes));
        assert_eq!(rx.stats().unwrap(), again, "no traffic, no change");
    });
}

#[test]
fn an_interface_going_down_is_reported_once_and_the_ring_resumes() {
    in_netns(|| {
        let mut rx = RxRing::open("b", &small_ring()).unwrap();
        let mut tx = TxSocket::open("a", &TxOptions::default()).unwrap();
        ip("link set dev b down");
        let e = rx.wait(Duration::from_millis(50)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("on b") && msg.contains("poll"), "{msg}");
        assert!(
            matches!(&e, AfPacketError::Io { source, .. }
            if source.raw_os_error() == Some(libc::ENETDOWN)),
            "{e:?}"
        );
        assert!(
            !rx.wait(Duration::from_millis(10)).unwrap(),
            "the error is reported once"
        );
        ip("link set dev b up");
        // The veth pair needs both ends up to carry frames; retry until it does.
        let frame = test_frame(1, 64);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            let _ = tx.send_batch(1, |_| &frame);
            got = recv_until(&mut rx, 1, Duration::from_millis(50), ours);
        }
        assert_eq!(
            got.len(),
            1,
            "the ring receives again after the interface is back"
        );
    });
}

fn pkt(client: u32, seq: u32, len: u32) -> Pkt {
    Pkt {
        len,
        client,
        flow: seq % 5,
        seq,
        submit_ns: 1_000_000 + u64::from(seq),
        depart_ns: 2_000_000 + u64::from(seq) * 3,
    }
}

/// One's-complement sum of 16-bit words, folded.
fn csum(bytes: &[u8]) -> u16 {
    let mut s: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn mac_of(ifname: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args(["-o", "link", "show", "dev", ifname])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let after = text
        .split("link/ether ")
        .nth(1)
        .expect("an Ethernet address");
    let mut mac = [0u8; 6];
    for (b, h) in mac.iter_mut().zip(after[..17].split(':')) {
        *b = u8::from_str_radix(h, 16).unwrap();
    }
    mac
}

#[test]
fn the_afpacket_backend_frames_parse_back() {
    in_netns(|| {
        let backend = parse_backend(
            "afpacket:a,dst=02:00:00:00:00:0b,ip=192.168.7.1>192.168.7.2,port=4000>5000",
        )
        .unwrap();
        assert_eq!(backend.name(), "afpacket");
        let mut rx = RxRing::open("b", &small_ring()).unwrap();
        let mut senders = [backend.open(0).unwrap(), backend.open(1).unwrap()];
        let src_mac = mac_of("a");
        // Around every length boundary: below the payload header (sent as 82), 82, the
        // Ethernet extremes; batches longer than one sendmmsg.
        let lens = [1u32, 41, 60, 64, 81, 82, 83, 128, 1000, 1513, 1514];
        let mut expect: Vec<Vec<Pkt>> = vec![Vec::new(), Vec::new()];
        for round in 0..3u32 {
            for (c, s) in senders.iter_mut().enumerate() {
                let n = if c == 0 { 150 } else { 70 };
                let base = expect[c].len() as u32;
                let pkts: Vec<Pkt> = (0..n)
                    .map(|i| {
                        pkt(
                            c as u32,
                            base + i,
                            lens[((base + i + round) as usize) % lens.len()],
                        )
                    })
                    .collect();
                assert_eq!(s.send(&pkts).unwrap(), pkts.len());
                expect[c].extend(pkts);
            }
        }
        let total = expect[0].len() + expect[1].len();
        let got = recv_until(&mut rx, total, Duration::from_secs(5), |f| {
            f.data.len() >= 14 && ethertype(f.data) == 0x0800
        });
        assert_eq!(got.len(), total);
        let mut next = [0usize; 2];
        for (f, wire_len, _) in &got {
            assert_eq!(*wire_len as usize, f.len());
            assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 0x0b]);
            assert_eq!(&f[6..12], &src_mac);
            let ip = &f[14..34];
            assert_eq!(ip[0], 0x45);
            assert_eq!(csum(ip), 0xffff, "IPv4 header checksum");
            assert_eq!(
                usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                f.len() - 14
            );
            assert_eq!((ip[8], ip[9]), (64, 17));
            assert_eq!(&ip[12..20], &[192, 168, 7, 1, 192, 168, 7, 2]);
            let udp = &f[34..42];
            assert_eq!(&udp[0..4], &[0x0f, 0xa0, 0x13, 0x88]); // 4000, 5000
            assert_eq!(
                usize::from(u16::from_be_bytes([udp[4], udp[5]])),
                f.len() - 34
            );
            assert_eq!(&udp[6..8], &[0, 0]);
            let h = payload::decode(&f[42..]).unwrap();
            let c = h.client as usize;
            let want = expect[c][next[c]];
            next[c] += 1;
            assert_eq!(h, Header::of(&want), "sender {c} in order");
            assert_eq!(f.len(), (want.len as usize).max(82));
            assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), want.seq as u16);
        }
        assert_eq!(next, [expect[0].len(), expect[1].len()]);

        // Longer than MTU + 14: refused, by name, when first; stops the batch otherwise.
        let s = &mut senders[0];
        let e = s.send(&[pkt(0, 9, 1515)]).unwrap_err();
        assert!(matches!(e, SendError::Config(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("on a") && msg.contains("MTU 1500") && msg.contains("1515"),
            "{msg}"
        );
        assert_eq!(s.send(&[pkt(0, 9, 1514), pkt(0, 10, 1515)]).unwrap(), 1);
    });
}

#[test]
fn errors_name_the_interface_and_the_problem() {
    // No privilege needed: names and options are checked before any socket.
    let unknown = |e: AfPacketError| {
        let msg = e.to_string();
        assert!(matches!(e, AfPacketError::NoSuchInterface { .. }), "{e:?}");
        assert!(
            msg.contains("no network interface named 'pspat-nope0'"),
            "{msg}"
        );
    };
    unknown(TxSocket::open("pspat-nope0", &TxOptions::default()).unwrap_err());
    unknown(RxRing::open("pspat-nope0", &RxOptions::default()).unwrap_err());
    unknown(AfPacket::new("pspat-nope0").unwrap_err());
    let msg = TxSocket::open("x".repeat(16).as_str(), &TxOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("at most 15"), "{msg}");
    let bad = |o: RxOptions, what: &str| {
        let msg = RxRing::open("lo", &o).unwrap_err().to_string();
        assert!(msg.contains("on lo") && msg.contains(what), "{msg}");
    };
    bad(
        RxOptions {
            block_size: 1000,
            ..RxOptions::default()
        },
        "multiple of the page size",
    );
    bad(
        RxOptions {
            block_count: 0,
            ..RxOptions::default()
        },
        "block_count is 0",
    );
    bad(
        RxOptions {
            frame_size: 2050,
            ..RxOptions::default()
        },
        "frame_size 2050",
    );
    if is_root() {
        // As root, a real interface opens; the permission message is checked below
        // only when it can happen.
        assert!(TxSocket::open("lo", &TxOptions::default()).is_ok());
    } else {
        let e = TxSocket::open("lo", &TxOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("CAP_NET_RAW") && msg.contains("setcap"),
            "{msg}"
        );
        assert!(msg.contains("on lo"), "{msg}");
    }
}
