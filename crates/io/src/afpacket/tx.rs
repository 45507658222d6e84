//! [`TxSocket`]: whole Ethernet frames out of one interface, [`BATCH`] per sendmmsg(2).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::{resolve, sys, AfPacketError};

/// Frames per sendmmsg(2); longer batches take several calls.
pub const BATCH: usize = 64;

/// Retries of a batch the device refused (ENOBUFS / EAGAIN) before giving up on it: the
/// first [`SPINS`] after a spin-loop hint, the rest after a `yield_now`.
const RETRIES: u32 = 8;
const SPINS: u32 = 4;

/// How a [`TxSocket`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOptions {
    /// PACKET_QDISC_BYPASS: hand frames straight to the driver (default `true`; see the
    /// module documentation for what changes).
    pub qdisc_bypass: bool,
    /// SO_SNDBUF in bytes (the kernel caps it at `net.core.wmem_max` and doubles it);
    /// `None` keeps the system default.
    pub sndbuf: Option<usize>,
    /// PACKET_VNET_HDR: every frame given to [`TxSocket::send_batch`] starts with a
    /// virtio-net header giving its offload state (see [`super::vnet`]); default `false`.
    pub vnet_hdr: bool,
}

impl Default for TxOptions {
    fn default() -> Self {
        Self {
            qdisc_bypass: true,
            sndbuf: None,
            vnet_hdr: false,
        }
    }
}

/// An AF_PACKET socket that sends whole Ethernet frames on one interface.
///
/// Frames are sent as given: the caller writes the Ethernet header (and VLAN tags if it
/// wants them). The kernel refuses (EMSGSIZE) a frame longer than the interface's MTU plus
/// its 14-byte Ethernet header, except by 4 bytes more when the frame's EtherType (bytes
/// 12-13, so its outermost tag) is 802.1Q 0x8100, whatever follows; an 802.1ad 0x88a8
/// outer tag gets no such allowance (`packet_snd` and `packet_extra_vlan_len_allowed` in
/// net/packet/af_packet.c). A frame behind a virtio-net header that marks it GSO is not
/// checked. Check against [`TxSocket::mtu`] first.
pub struct TxSocket {
    fd: OwnedFd,
    ifname: String,
    cname: CString,
    ifindex: u32,
    batch: sys::MsgBatch,
}

impl std::fmt::Debug for TxSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxSocket")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN))
}

/// The kernel refused a frame for what it is, not for the state of the socket or the
/// device: too long (EMSGSIZE, see [`TxSocket`]), or a header it cannot take (EINVAL: a
/// frame shorter than an Ethernet header without CAP_SYS_RAWIO, a virtio-net header that
/// does not fit the frame). Another frame of the batch may well go.
pub(super) fn frame_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMSGSIZE | libc::EINVAL))
}

/// The error of a frame the kernel refused on `ifname`, for a backend's report.
pub(super) fn frame_refused(ifname: &str, len: usize, source: io::Error) -> crate::SendError {
    crate::SendError::Io {
        what: format!("sendmmsg on {ifname} (frame of {len} bytes)"),
        source,
    }
}

/// What a caller of [`TxSocket::send_frames`] wants done with the rest of a batch after
/// the kernel refused one of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Leave the frame out and send the ones after it.
    Skip,
    /// End the batch there: the frames after it are not offered.
    Stop,
}

/// What became of the frames given to [`TxSocket::send_frames`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchSent {
    /// Frames the kernel took.
    pub sent: usize,
    /// Frames it refused, each reported to the caller, and not sent.
    pub refused: usize,
    /// The frames from this index on were not offered to the kernel: the device stayed
    /// busy (ENOBUFS / EAGAIN through every retry) or the caller stopped at a refusal. The
    /// number of frames when every one was offered. `sent + refused == end`.
    pub end: usize,
}

/// The walk of [`TxSocket::send_frames`] over a batch of `n` frames, apart from the
/// system calls (so that it is tested without a socket): each sendmmsg(2) result moves it
/// on and says what comes next.
#[derive(Debug)]
struct Walk {
    n: usize,
    /// The next frame to offer.
    at: usize,
    /// Consecutive transient refusals of frame `at`.
    retries: u32,
    done: BatchSent,
}

/// What [`Walk`] wants done next.
#[derive(Debug)]
enum Next {
    /// Offer the frames from `Walk::at` on.
    Send,
    /// Offer them again after a short wait: a spin (`true`) or a yield.
    Wait(bool),
    /// The kernel refused frame `.0` with `.1`: ask the caller whether to go on.
    Refused(usize, io::Error),
    /// The batch is over: `Walk::done` says what became of it.
    Done,
}

impl Walk {
    fn new(n: usize) -> Self {
        Self {
            n,
            at: 0,
            retries: 0,
            done: BatchSent {
                end: n,
                ..BatchSent::default()
            },
        }
    }

    /// Send while frames are left, else done.
    fn next(&self) -> Next {
        if self.at < self.n {
            Next::Send
        } else {
            Next::Done
        }
    }

    /// Takes the result of a sendmmsg(2) of the frames from `at` on: `m >= 1` of them
    /// sent, or the error of the first one.
    fn after(&mut self, r: io::Result<usize>) -> Next {
        match r {
            Ok(m) => {
                self.at += m;
                self.done.sent += m;
                self.retries = 0;
                self.next()
            }
            // The device's queue is full: the same frame, a little later, a few times.
            Err(e) if transient(&e) => {
                if self.retries == RETRIES {
                    self.done.end = self.at;
                    return Next::Done;
                }
                self.retries += 1;
                Next::Wait(self.retries <= SPINS)
            }
            // sendmmsg(2) stops at the first frame it cannot send and reports the frames
            // before it as sent; called again from that frame, it reports that frame's
            // error. That frame alone is refused.
            Err(e) => {
                let i = self.at;
                self.at += 1;
                self.retries = 0;
                self.done.refused += 1;
                Next::Refused(i, e)
            }
        }
    }

    /// The caller ended the batch after the refused frame.
    fn stop(&mut self) {
        self.done.end = self.at;
    }
}

impl TxSocket {
    /// Opens a sending socket on `ifname`.
    pub fn open(ifname: &str, opts: &TxOptions) -> Result<Self, AfPacketError> {
        let op = "open AF_PACKET send socket";
        let (cname, ifindex) = resolve(ifname, op)?;
        let fd = sys::packet_socket().map_err(|e| AfPacketError::os(ifname, op, e))?;
        let set = |level: libc::c_int, name: libc::c_int, what: &str, v: libc::c_int| {
            sys::set_int(fd.as_fd(), level, name, v)
                .map_err(|e| AfPacketError::os(ifname, format!("setsockopt {what}"), e))
        };
        if opts.qdisc_bypass {
            let name = libc::PACKET_QDISC_BYPASS;
            set(libc::SOL_PACKET, name, "PACKET_QDISC_BYPASS", 1)?;
        }
        if opts.vnet_hdr {
            set(
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                "PACKET_VNET_HDR",
                1,
            )?;
        }
        if let Some(bytes) = opts.sndbuf {
            let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
            set(libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF", v)?;
        }
        // Protocol 0: the socket is bound to the interface for sending but receives nothing.
        sys::bind(fd.as_fd(), ifindex, 0)
            .map_err(|e| AfPacketError::os(ifname, "bind the send socket", e))?;
        Ok(Self {
            fd,
            ifname: ifname.to_owned(),
            cname,
            ifindex,
            batch: sys::MsgBatch::new(BATCH),
        })
    }

    /// Sends frames `frame(0)`, ..., `frame(n - 1)` in this order, [`BATCH`] per
    /// sendmmsg(2), and returns how many the kernel took. Allocates nothing.
    ///
    /// - A frame the kernel refuses (too long for the interface, see [`TxSocket`], or any
    ///   error but a full device queue) is left out and costs no other frame: the frames
    ///   after it are sent.
    /// - The device refused a frame because its queue is full (ENOBUFS / EAGAIN, with or
    ///   without a qdisc): the call is retried a few times after a short spin or yield,
    ///   starting with that frame; if it is still refused, the batch ends there.
    /// - `Ok(k)`: `k` frames went out; the `n - k` others did not (refused, or behind a
    ///   full queue). `Err` only when none went out and a refusal was about the socket or
    ///   the interface (down, gone), not about a frame (EMSGSIZE, EINVAL).
    ///
    /// Each frame must be at least 14 bytes (an Ethernet header), after the 10-byte
    /// virtio-net header that starts it on a socket opened with [`TxOptions::vnet_hdr`].
    /// To know which frames were refused, use [`TxSocket::send_frames`].
    pub fn send_batch<'a>(
        &mut self,
        n: usize,
        frame: impl Fn(usize) -> &'a [u8],
    ) -> Result<usize, AfPacketError> {
        let mut failure = None;
        let done = self.send_frames(n, &frame, |i, e| {
            if !frame_error(&e) {
                failure = Some((i, e));
            }
            AfterRefusal::Skip
        });
        match failure {
            Some((i, e)) if done.sent == 0 => Err(AfPacketError::os(
                &self.ifname,
                format!("sendmmsg (frame {i} of {n}, {} bytes)", frame(i).len()),
                e,
            )),
            _ => Ok(done.sent),
        }
    }

    /// Sends frames `frame(0)`, ..., `frame(n - 1)` in this order, [`BATCH`] per
    /// sendmmsg(2), as [`TxSocket::send_batch`] does, and calls `refused(i, error)` for
    /// each frame `i` the kernel refuses; what it returns says whether the frames after
    /// `i` are still sent ([`AfterRefusal::Skip`]) or not ([`AfterRefusal::Stop`], for a
    /// caller whose account needs the frames sent to be the first ones). Allocates
    /// nothing.
    pub fn send_frames<'a>(
        &mut self,
        n: usize,
        frame: impl Fn(usize) -> &'a [u8],
        mut refused: impl FnMut(usize, io::Error) -> AfterRefusal,
    ) -> BatchSent {
        let mut walk = Walk::new(n);
        let mut next = walk.next();
        loop {
            next = match next {
                Next::Send => {
                    let k = (n - walk.at).min(BATCH);
                    walk.after(self.batch.send(self.fd.as_fd(), walk.at, k, &frame))
                }
                Next::Wait(spin) => {
                    if spin {
                        for _ in 0..64 {
                            std::hint::spin_loop();
                        }
                    } else {
                        std::thread::yield_now();
                    }
                    Next::Send
                }
                Next::Refused(i, e) => match refused(i, e) {
                    AfterRefusal::Skip => walk.next(),
                    AfterRefusal::Stop => {
                        walk.stop();
                        Next::Done
                    }
                },
                Next::Done => return walk.done,
            };
        }
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's current MTU (SIOCGIFMTU): the longest frame is this plus 14, or 18
    /// for a frame whose outermost tag is 802.1Q (see [`TxSocket`]).
    pub fn mtu(&self) -> Result<u32, AfPacketError> {
        sys::if_mtu(self.fd.as_fd(), &self.cname)
            .map_err(|e| AfPacketError::os(&self.ifname, "ioctl SIOCGIFMTU", e))
    }
}

impl AsFd for TxSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for TxSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(code: i32) -> io::Result<usize> {
        Err(io::Error::from_raw_os_error(code))
    }

    /// Feeds `results` to a walk over `n` frames, skipping every refused frame (or stopping
    /// at the first one, with `stop`); returns what it asked for, in order, and its
    /// account. A result is consumed by each `Send`.
    fn run(n: usize, results: Vec<io::Result<usize>>, stop: bool) -> (Vec<String>, BatchSent) {
        let mut walk = Walk::new(n);
        let mut results = results.into_iter();
        let mut next = walk.next();
        let mut trace = Vec::new();
        loop {
            next = match next {
                Next::Send => {
                    trace.push(format!("send {}", walk.at));
                    walk.after(results.next().expect("a result for each send"))
                }
                Next::Wait(spin) => {
                    trace.push(if spin { "spin" } else { "yield" }.to_owned());
                    Next::Send
                }
                Next::Refused(i, e) => {
                    trace.push(format!("refused {i} {}", e.raw_os_error().unwrap()));
                    if stop {
                        walk.stop();
                        Next::Done
                    } else {
                        walk.next()
                    }
                }
                Next::Done => {
                    assert!(results.next().is_none(), "every result used");
                    let d = walk.done;
                    assert_eq!(d.sent + d.refused, d.end, "{d:?}");
                    return (trace, d);
                }
            };
        }
    }

    #[test]
    fn a_refused_frame_is_left_out_and_the_rest_sent() {
        // 10 frames: 3 go, the 4th is too long, the other 6 go in two calls.
        let (trace, done) = run(10, vec![Ok(3), os(libc::EMSGSIZE), Ok(4), Ok(2)], false);
        assert_eq!(
            trace,
            ["send 0", "send 3", "refused 3 90", "send 4", "send 8"],
            "{trace:?}"
        );
        let all = BatchSent {
            sent: 9,
            refused: 1,
            end: 10,
        };
        assert_eq!(done, all);
        // Refused first and last, and twice in a row.
        let (trace, done) = run(
            5,
            vec![
                os(libc::EMSGSIZE),
                os(libc::EMSGSIZE),
                Ok(2),
                os(libc::ENETDOWN),
            ],
            false,
        );
        assert_eq!(
            trace,
            [
                "send 0",
                "refused 0 90",
                "send 1",
                "refused 1 90",
                "send 2",
                "send 4",
                "refused 4 100"
            ]
        );
        assert_eq!(
            done,
            BatchSent {
                sent: 2,
                refused: 3,
                end: 5
            }
        );
    }

    #[test]
    fn a_caller_may_stop_at_the_first_refusal() {
        let (trace, done) = run(10, vec![Ok(3), os(libc::EMSGSIZE)], true);
        assert_eq!(trace, ["send 0", "send 3", "refused 3 90"]);
        assert_eq!(
            done,
            BatchSent {
                sent: 3,
                refused: 1,
                end: 4
            }
        );
    }

    #[test]
    fn a_full_queue_is_retried_then_ends_the_batch() {
        // Busy twice, then the frame goes: the retries start over for the next one.
        let busy = || os(libc::ENOBUFS);
        let (trace, done) = run(4, vec![Ok(1), busy(), os(libc::EAGAIN), Ok(3)], false);
        assert_eq!(
            trace,
            ["send 0", "send 1", "spin", "send 1", "spin", "send 1"]
        );
        assert_eq!(done.sent, 4);
        // Busy through every retry: SPINS spins, then yields, then the batch ends there.
        let mut results = vec![Ok(2)];
        results.extend((0..=RETRIES).map(|_| busy()));
        let (trace, done) = run(6, results, false);
        let waits: Vec<&str> = trace
            .iter()
            .filter(|t| !t.starts_with("send"))
            .map(String::as_str)
            .collect();
        let mut want = vec!["spin"; SPINS as usize];
        want.extend(vec!["yield"; (RETRIES - SPINS) as usize]);
        assert_eq!(waits, want);
        assert_eq!(
            done,
            BatchSent {
                sent: 2,
                refused: 0,
                end: 2
            }
        );
    }

    #[test]
    fn an_empty_batch_sends_nothing() {
        assert_eq!(run(0, vec![], false), (vec![], BatchSent::default()));
    }

    #[test]
    fn frame_errors_are_told_from_the_sockets() {
        for (code, frame) in [
            (libc::EMSGSIZE, true),
            (libc::EINVAL, true),
            (libc::ENETDOWN, false),
            (libc::ENXIO, false),
        ] {
            assert_eq!(frame_error(&io::Error::from_raw_os_error(code)), frame);
        }
    }
}
