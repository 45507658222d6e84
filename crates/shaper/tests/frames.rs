//! Frames cross the shaper as they were on the wire (issue 25): VLAN tags come out with the
//! TPID they went in with (802.1ad 0x88a8 as well as 802.1Q 0x8100), both ways; a frame the
//! output interface cannot send (longer than its MTU plus the Ethernet header, plus 4
//! bytes when the outermost tag is 802.1Q: the kernel's rule for AF_PACKET sends) is
//! counted `too_long` on arrival and never scheduled, so it costs no other frame.
//!
//! Frames are hand-made and sent with a raw AF_PACKET socket on the sender's `s0`, and
//! captured byte for byte with another on the receiver's `r0` (see `common::RawSocket`);
//! topology and skipping as in `netns.rs`. `s0` and the shaper's `s1` get an MTU of 1600,
//! so frames longer than the shaper's output (`r1`, MTU 1500) sends reach the shaper.

mod common;

use std::time::{Duration, Instant};

use common::{set_mtu, topology_or_skip, RawSocket, Topology};
use pspat_engine::error_chain as chain;
use pspat_shaper::{Report, Shaper, ShaperConfig};

/// Every IPv4 frame through one 10 Gbit/s FIFO pipe; the rest allowed.
const CONFIG: &str = "pipe 1 config bw 10Gbit/s queue 500\n\
     add 100 pipe 1 ip from any to any\n\
     default allow\n";

/// UDP destination port of the test frames.
const PORT: u16 = 9999;

const QINQ: u16 = 0x88a8;
const DOT1Q: u16 = 0x8100;

/// VLAN tags (TPID, TCI), outermost first.
type Tags = [(u16, u16)];

/// A frame of `len` bytes: MAC addresses, the VLAN tags `tags` (TPID, TCI) outermost
/// first, then IPv4/UDP from the sender to the receiver's port [`PORT`] carrying `seq` and
/// a pattern. (The IPv4 checksum is left 0: the receiver's kernel drops the datagram
/// instead of answering it, the capture still sees it.)
fn frame(seq: u32, tags: &Tags, len: usize) -> Vec<u8> {
    let l3 = 14 + 4 * tags.len();
    assert!(len >= l3 + 28 + 4, "{len} bytes cannot hold the headers");
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]);
    for (k, (tpid, tci)) in tags.iter().enumerate() {
        f[12 + 4 * k..14 + 4 * k].copy_from_slice(&tpid.to_be_bytes());
        f[14 + 4 * k..16 + 4 * k].copy_from_slice(&tci.to_be_bytes());
    }
    f[l3 - 2..l3].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[l3..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - l3) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 77, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
    let udp = &mut ip[20..];
    udp[0..2].copy_from_slice(&10000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - l3 - 20) as u16).to_be_bytes());
    udp[8..12].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in udp[12..].iter_mut().enumerate() {
        *b = (seq as usize * 13 + i * 7) as u8;
    }
    f
}

/// The `seq` of a test frame made by [`frame`] (whatever its tags), `None` for any other.
fn seq_of(f: &[u8]) -> Option<u32> {
    let mut at = 12;
    while matches!(
        f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]])),
        Some(DOT1Q | QINQ)
    ) {
        at += 4;
    }
    let ip = f.get(at + 2..)?;
    let is_ours = f.get(at..at + 2)? == [0x08, 0x00]
        && ip.len() >= 32
        && ip[9] == 17
        && ip[22..24] == PORT.to_be_bytes();
    is_ours.then(|| u32::from_be_bytes(ip[28..32].try_into().unwrap()))
}

/// Starts a shaper `s1` -> `r1` with [`CONFIG`], after raising the MTU of `s0` and `s1` to
/// 1600 (`r1` and `r0` keep 1500).
fn start(t: &Topology) -> (Shaper, tempfile::TempDir) {
    t.snd.run(|| set_mtu("s0", 1600)).unwrap();
    t.shp.run(|| set_mtu("s1", 1600)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("shaper.ipfw");
    std::fs::write(&cfg, CONFIG).unwrap();
    let config = ShaperConfig::new("s1", "r1", &cfg);
    let shaper = t
        .shp
        .run(move || Shaper::start(config))
        .unwrap_or_else(|e| panic!("starting the shaper: {}", chain(&e)));
    assert_eq!(shaper.max_frame(), 1518, "r1's MTU and 18 bytes");
    (shaper, tmp)
}

/// Test frames arriving on `sock`, in order, until `want` came (then for 200 ms more, so
/// that an extra frame is seen) or 5 s passed.
fn capture(sock: &RawSocket, want: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut quiet_from = None;
    loop {
        let now = Instant::now();
        if now >= deadline || quiet_from.is_some_and(|q| now >= q) {
            return got;
        }
        if let Some(f) = sock.recv(Duration::from_millis(20)).unwrap() {
            if seq_of(&f).is_some() {
                got.push(f);
            }
        }
        if got.len() >= want && quiet_from.is_none() {
            quiet_from = Some(Instant::now() + Duration::from_millis(200));
        }
    }
}

/// Sends `frames` from `s0` and returns what `r0` captured of them.
fn through(t: &Topology, frames: &[Vec<u8>], want: usize) -> Vec<Vec<u8>> {
    let rx = t.rcv.run(|| RawSocket::open("r0")).unwrap();
    let tx = t.snd.run(|| RawSocket::open("s0")).unwrap();
    for f in frames {
        tx.send(f).unwrap();
    }
    capture(&rx, want)
}

/// Checks that `got` is `want`, byte for byte; says where they differ (not all the bytes).
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(g, w)| g != w);
    let show = |f: &[u8], at: usize| format!("{:02x?}", &f[at.min(f.len())..(at + 8).min(f.len())]);
    match at {
        Some(at) => panic!(
            "{what}: byte {at} differs: {} instead of {}",
            show(got, at),
            show(want, at)
        ),
        None => panic!("{what}: {} bytes instead of {}", got.len(), want.len()),
    }
}

/// The seqs of `frames`, to show which arrived.
fn seqs(frames: &[Vec<u8>]) -> Vec<Option<u32>> {
    frames.iter().map(|f| seq_of(f)).collect()
}

/// The report's counts every test checks: nothing failed to send, nothing unaccounted.
fn check_account(report: &Report, too_long: u64) {
    assert_eq!(report.rx.too_long, too_long, "too_long\n{report}");
    assert_eq!(report.engine.send_failed, 0, "send_failed\n{report}");
    assert_eq!(report.unaccounted(), 0, "unaccounted\n{report}");
    assert!(report.errors.is_empty(), "{report}");
}

/// Tag stacks the tests send: none, 802.1Q, 802.1ad, QinQ (802.1ad outside 802.1Q), two
/// 802.1Q tags.
fn stacks() -> Vec<Vec<(u16, u16)>> {
    vec![
        vec![],
        vec![(DOT1Q, 0x2005)],
        vec![(QINQ, 0x0064)],
        vec![(QINQ, 0x0064), (DOT1Q, 0x2005)],
        vec![(DOT1Q, 0x0007), (DOT1Q, 0xe00a)],
    ]
}

#[test]
fn vlan_tags_keep_their_tpid_through_the_shaper_and_back() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let (shaper, _tmp) = start(&t);
    let frames: Vec<Vec<u8>> = stacks()
        .iter()
        .enumerate()
        .map(|(k, tags)| frame(k as u32, tags, 200 + 100 * k))
        .collect();
    let got = through(&t, &frames, frames.len());
    assert_eq!(seqs(&got), seqs(&frames), "which frames arrived");
    for (g, f) in got.iter().zip(&frames) {
        assert_same(g, f, &format!("frame {:?}", seq_of(f)));
    }

    // The reverse path, r0 -> r1 -> s1 -> s0, puts the tags back the same way.
    let rx = t.snd.run(|| RawSocket::open("s0")).unwrap();
    let tx = t.rcv.run(|| RawSocket::open("r0")).unwrap();
    let back: Vec<Vec<u8>> = stacks()
        .iter()
        .enumerate()
        .map(|(k, tags)| frame(100 + k as u32, tags, 120 + 50 * k))
        .collect();
    for f in &back {
        tx.send(f).unwrap();
    }
    let got = capture(&rx, back.len());
    assert_eq!(seqs(&got), seqs(&back), "which frames came back");
    for (g, f) in got.iter().zip(&back) {
        assert_same(g, f, &format!("frame {:?}, reverse path", seq_of(f)));
    }

    let report = shaper.stop();
    check_account(&report, 0);
    assert!(report.reverse.frames >= back.len() as u64, "{report}");
    assert_eq!(report.reverse.failed, 0, "{report}");
}

#[test]
fn frames_longer_than_the_output_sends_are_too_long_on_arrival() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let (shaper, _tmp) = start(&t);
    let (none, dot1q, qinq) = (&[][..], &[(DOT1Q, 5)][..], &[(QINQ, 6)][..]);
    let qinq_dot1q = &[(QINQ, 6), (DOT1Q, 5)][..];
    let two_dot1q = &[(DOT1Q, 7), (DOT1Q, 5)][..];
    // (tags, length, whether r1 with MTU 1500 sends it): 1514 bytes, 4 more when the
    // outermost tag is 802.1Q (whatever follows it), for any other (0x88a8) none more.
    let cases: Vec<(&Tags, usize, bool)> = vec![
        (none, 1514, true),
        (none, 1515, false),
        (none, 1516, false),
        (none, 1517, false),
        (none, 1518, false),
        (dot1q, 1515, true),
        (dot1q, 1518, true),
        (dot1q, 1519, false),
        (dot1q, 1522, false),
        (qinq, 1514, true),
        (qinq, 1515, false),
        (qinq, 1518, false),
        (qinq_dot1q, 1514, true),
        (qinq_dot1q, 1518, false),
        (two_dot1q, 1518, true),
        (two_dot1q, 1519, false),
    ];
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(k, (tags, len, _))| frame(k as u32, tags, *len))
        .collect();
    let sendable: Vec<Vec<u8>> = frames
        .iter()
        .zip(&cases)
        .filter(|(_, c)| c.2)
        .map(|(f, _)| f.clone())
        .collect();
    let got = through(&t, &frames, sendable.len());
    assert_eq!(seqs(&got), seqs(&sendable), "which frames arrived");
    for (g, f) in got.iter().zip(&sendable) {
        assert_same(g, f, &format!("frame {:?}", seq_of(f)));
    }
    let report = shaper.stop();
    assert!(report.rx.frames >= frames.len() as u64, "{report}");
    check_account(&report, (frames.len() - sendable.len()) as u64);
}

#[test]
fn fifty_frames_over_the_mtu_cost_none_of_the_fifty_between_them() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let (shaper, _tmp) = start(&t);
    // Good and too long alternate: 1514, 1515, 1514, 1516, ... (untagged).
    let frames: Vec<Vec<u8>> = (0..100u32)
        .map(|k| {
            let len = if k % 2 == 0 {
                1514
            } else {
                1515 + (k / 2 % 4) as usize
            };
            frame(k, &[], len)
        })
        .collect();
    let good: Vec<Vec<u8>> = frames.iter().step_by(2).cloned().collect();
    let got = through(&t, &frames, good.len());
    assert_eq!(seqs(&got), seqs(&good), "which frames arrived");
    for (g, f) in got.iter().zip(&good) {
        assert_same(g, f, &format!("frame {:?}", seq_of(f)));
    }
    let report = shaper.stop();
    check_account(&report, 50);
}

/// The output's MTU lowered while the shaper runs (its arrival check still allows 1518):
/// each frame the kernel now refuses (EMSGSIZE) is a send failure of its own, and the
/// frames between them, in the same sendmmsg batches, all go out.
#[test]
fn frames_the_kernel_refuses_cost_none_of_the_frames_between_them() {
    let Some(t) = topology_or_skip() else {
        return;
    };
    let (shaper, _tmp) = start(&t);
    t.shp.run(|| set_mtu("r1", 1400)).unwrap();
    t.rcv.run(|| set_mtu("r0", 1400)).unwrap();
    // 1000 and 1500 bytes alternate: the 1500-byte ones are over the new MTU.
    let frames: Vec<Vec<u8>> = (0..100u32)
        .map(|k| frame(k, &[], if k % 2 == 0 { 1000 } else { 1500 }))
        .collect();
    let good: Vec<Vec<u8>> = frames.iter().step_by(2).cloned().collect();
    let got = through(&t, &frames, good.len());
    assert_eq!(seqs(&got), seqs(&good), "which frames arrived");
    let report = shaper.stop();
    assert_eq!(report.rx.too_long, 0, "{report}");
    assert_eq!(report.engine.send_failed, 50, "{report}");
    assert_eq!(report.unaccounted(), 0, "{report}");
}
