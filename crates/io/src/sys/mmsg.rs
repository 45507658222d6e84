//! sendmmsg(2) and recvmmsg(2): many UDP datagrams per system call, with preallocated
//! message headers.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::payload::{HEADER_LEN, MAX_PAYLOAD_LEN};

/// Most padding a payload can need. Every message's second iovec points into this one
/// static run of zeros (it lives in .bss: no allocation, pages shared), so the padding of a
/// datagram is never written, only read by the kernel.
const MAX_PAD: usize = MAX_PAYLOAD_LEN - HEADER_LEN;
static ZEROS: [u8; MAX_PAD] = [0; MAX_PAD];

/// A socket address in the form the kernel takes.
enum SockAddr {
    V4(libc::sockaddr_in),
    V6(libc::sockaddr_in6),
}

impl SockAddr {
    fn new(addr: SocketAddr) -> Self {
        match addr {
            SocketAddr::V4(a) => Self::V4(libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            }),
            SocketAddr::V6(a) => Self::V6(libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            }),
        }
    }

    /// Pointer and length for `msg_name` / `msg_namelen`. The kernel only reads it.
    fn as_raw(&mut self) -> (*mut libc::c_void, libc::socklen_t) {
        match self {
            Self::V4(a) => (
                (a as *mut libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            Self::V6(a) => (
                (a as *mut libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            ),
        }
    }
}

/// Makes `m` describe the one buffer `iov`, with no address, no control data, no flags
/// and no length yet (`iov` must stay where it is until the system call that uses `m`).
pub(crate) fn single_iov(m: &mut libc::mmsghdr, iov: &mut libc::iovec) {
    m.msg_hdr.msg_name = std::ptr::null_mut();
    m.msg_hdr.msg_namelen = 0;
    m.msg_hdr.msg_iov = iov;
    m.msg_hdr.msg_iovlen = 1;
    m.msg_hdr.msg_control = std::ptr::null_mut();
    m.msg_hdr.msg_controllen = 0;
    m.msg_hdr.msg_flags = 0;
    m.msg_len = 0;
}

fn zeroed_mmsghdrs(n: usize) -> Box<[libc::mmsghdr]> {
    (0..n)
        // SAFETY: mmsghdr is a C struct of integers and raw pointers (plus, on some libcs,
        // integer padding fields); all-zero bytes are a valid value of each of them.
        .map(|_| unsafe { std::mem::zeroed::<libc::mmsghdr>() })
        .collect()
}

const EMPTY_IOV: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// Up to `capacity` datagrams to one address, sent by one sendmmsg(2) on an unconnected
/// socket (the address is in every message's `msg_name`). Each datagram is two pieces: a
/// header held here and a run of zeros from [`ZEROS`]. Everything is allocated by
/// [`SendBatch::new`]; [`SendBatch::send`] allocates nothing.
pub(crate) struct SendBatch {
    dest: Box<SockAddr>,
    headers: Box<[[u8; HEADER_LEN]]>,
    pads: Box<[usize]>,
    iovs: Box<[[libc::iovec; 2]]>,
    msgs: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers inside `iovs` and `msgs` only ever point into this value's own
// heap allocations (`dest`, `headers`, `iovs`) or into the immutable static `ZEROS`; they
// are rewritten from `&mut self` right before each system call and never dereferenced by
// Rust code. Moving the value to another thread moves that ownership with it.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Room for `capacity` datagrams to `dest`.
    pub(crate) fn new(capacity: usize, dest: SocketAddr) -> Self {
        Self {
            dest: Box::new(SockAddr::new(dest)),
            headers: vec![[0; HEADER_LEN]; capacity].into_boxed_slice(),
            pads: vec![0; capacity].into_boxed_slice(),
            iovs: vec![[EMPTY_IOV; 2]; capacity].into_boxed_slice(),
            msgs: zeroed_mmsghdrs(capacity),
        }
    }

    /// How many datagrams one [`SendBatch::send`] can carry.
    pub(crate) fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Sets datagram `i`: `header`, then `payload_len - HEADER_LEN` zeros.
    ///
    /// Panics if `i >= capacity` or `payload_len` is outside
    /// `HEADER_LEN..=MAX_PAYLOAD_LEN` (callers check lengths first).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, header: [u8; HEADER_LEN], payload_len: usize) {
        assert!((HEADER_LEN..=MAX_PAYLOAD_LEN).contains(&payload_len));
        self.headers[i] = header;
        self.pads[i] = payload_len - HEADER_LEN;
    }

    /// Sends datagrams `0..n` in one sendmmsg(2) (retried on EINTR). Returns how many the
    /// kernel took: all of them, or fewer when one failed after the first (its error is
    /// then reported by the next call). An error means none was sent.
    ///
    /// Panics if `n > capacity`.
    pub(crate) fn send(&mut self, fd: BorrowedFd<'_>, n: usize) -> io::Result<usize> {
        assert!(n <= self.capacity());
        if n == 0 {
            return Ok(0);
        }
        let (name, namelen) = self.dest.as_raw();
        let zeros = ZEROS.as_ptr().cast_mut().cast::<libc::c_void>();
        for i in 0..n {
            let iov = &mut self.iovs[i];
            iov[0] = libc::iovec {
                iov_base: self.headers[i].as_mut_ptr().cast(),
                iov_len: HEADER_LEN,
            };
            iov[1] = libc::iovec {
                iov_base: zeros,
                iov_len: self.pads[i],
            };
            let m = &mut self.msgs[i];
            m.msg_hdr.msg_name = name;
            m.msg_hdr.msg_namelen = namelen;
            m.msg_hdr.msg_iov = iov.as_mut_ptr();
            m.msg_hdr.msg_iovlen = 2;
            m.msg_hdr.msg_control = std::ptr::null_mut();
            m.msg_hdr.msg_controllen = 0;
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        loop {
            // SAFETY: `msgs[..n]` are initialised mmsghdrs whose pointers (set just above)
            // refer to live memory owned by `self` or to `ZEROS`, with matching lengths
            // (`pads[i] <= MAX_PAD` by `set`); the kernel only reads the buffers
            // (sendmmsg does not write through iov_base, so handing it `ZEROS` as `*mut`
            // is sound) and writes `msg_len` inside `msgs`, which `&mut self` lets it do.
            // `n <= capacity` fits in c_uint since capacities are small.
            let rc = unsafe {
                libc::sendmmsg(fd.as_raw_fd(), self.msgs.as_mut_ptr(), n as libc::c_uint, 0)
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Bytes kept of each received datagram: the header and a little more. The datagram's
/// real length is still reported (MSG_TRUNC).
pub(crate) const RECV_KEEP: usize = 64;

/// Up to `capacity` datagrams received by one recvmmsg(2), of which the first
/// [`RECV_KEEP`] bytes are kept. Allocated once by [`RecvBatch::new`].
pub(crate) struct RecvBatch {
    bufs: Box<[[u8; RECV_KEEP]]>,
    iovs: Box<[libc::iovec]>,
    msgs: Box<[libc::mmsghdr]>,
    /// Each message's control buffer (u64 words: aligned as a cmsghdr must be), given to
    /// the kernel only when `stamps` is set.
    ctrls: Box<[[u64; CTRL_WORDS]]>,
    /// Whether to ask for control data: the socket has SO_TIMESTAMPNS on
    /// ([`set_timestamps`]).
    stamps: bool,
    got: usize,
}

/// Words of a message's control buffer: room for one SCM_TIMESTAMPNS (a cmsghdr and a
/// timespec, 32 bytes on 64-bit Linux) and more.
const CTRL_WORDS: usize = 8;

// SAFETY: as for SendBatch: the raw pointers inside `iovs` and `msgs` point only into this
// value's own heap allocations, are rewritten from `&mut self` before each system call and
// are never dereferenced by Rust code.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `capacity` datagrams per call.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            bufs: vec![[0; RECV_KEEP]; capacity].into_boxed_slice(),
            iovs: vec![EMPTY_IOV; capacity].into_boxed_slice(),
            msgs: zeroed_mmsghdrs(capacity),
            ctrls: vec![[0; CTRL_WORDS]; capacity].into_boxed_slice(),
            stamps: false,
            got: 0,
        }
    }

    /// Asks each later [`RecvBatch::recv`] for the kernel's receive timestamps (the
    /// socket must have SO_TIMESTAMPNS on: [`set_timestamps`]).
    pub(crate) fn want_stamps(&mut self) {
        self.stamps = true;
    }

    /// Waits for one datagram (as long as the socket's SO_RCVTIMEO allows), then takes
    /// every one already queued, up to the capacity: recvmmsg with MSG_WAITFORONE, and
    /// MSG_TRUNC so each datagram's real length is reported though only [`RECV_KEEP`]
    /// bytes are kept. Returns how many were received; 0 when the wait timed out.
    pub(crate) fn recv(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        self.got = 0;
        let n = self.msgs.len();
        for i in 0..n {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: RECV_KEEP,
            };
            single_iov(&mut self.msgs[i], &mut self.iovs[i]);
            if self.stamps {
                let h = &mut self.msgs[i].msg_hdr;
                h.msg_control = self.ctrls[i].as_mut_ptr().cast();
                h.msg_controllen = size_of::<[u64; CTRL_WORDS]>() as _;
            }
        }
        loop {
            // SAFETY: `msgs[..n]` are initialised mmsghdrs whose iovecs (set just above)
            // each describe one writable RECV_KEEP-byte buffer owned by `self`; no name
            // is given, and a control buffer only with `stamps`: each message's own
            // `ctrls[i]`, owned by `self`, of the length given. The kernel writes at most
            // iov_len bytes into each buffer, at most msg_controllen into each control
            // buffer, and the lengths and flags inside `msgs`, all owned through `&mut
            // self`. A null timeout is allowed (SO_RCVTIMEO bounds the wait).
            let rc = unsafe {
                libc::recvmmsg(
                    fd.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_WAITFORONE | libc::MSG_TRUNC,
                    std::ptr::null_mut(),
                )
            };
            if rc >= 0 {
                self.got = rc as usize;
                return Ok(self.got);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => return Ok(0),
                _ => return Err(err),
            }
        }
    }

    /// Datagram `i` of the last [`RecvBatch::recv`]: its first bytes (at most
    /// [`RECV_KEEP`]) and its real length.
    ///
    /// Panics if `i` is not below what the last `recv` returned.
    pub(crate) fn datagram(&self, i: usize) -> (&[u8], usize) {
        assert!(i < self.got);
        let len = self.msgs[i].msg_len as usize;
        (&self.bufs[i][..len.min(RECV_KEEP)], len)
    }

    /// The kernel's receive timestamp of datagram `i` of the last [`RecvBatch::recv`],
    /// CLOCK_REALTIME ns, if it came with one (see [`RecvBatch::want_stamps`]).
    ///
    /// Panics if `i` is not below what the last `recv` returned.
    pub(crate) fn stamp(&self, i: usize) -> Option<u64> {
        assert!(i < self.got);
        if !self.stamps {
            return None;
        }
        let h = &self.msgs[i].msg_hdr;
        // SAFETY: `h` is the header the last recvmmsg filled in: its msg_control points
        // at `ctrls[i]` (owned by `self`, not moved since) and its msg_controllen is what
        // the kernel wrote there, at most that buffer's length. CMSG_FIRSTHDR and
        // CMSG_NXTHDR stay within msg_control..msg_control + msg_controllen and return
        // null past it; each cmsghdr they return lies wholly inside the buffer, which is
        // aligned for it (u64 words).
        let mut c = unsafe { libc::CMSG_FIRSTHDR(h) };
        while !c.is_null() {
            // SAFETY: `c` is a non-null cmsghdr inside the control buffer (above).
            let cm = unsafe { &*c };
            if cm.cmsg_level == libc::SOL_SOCKET && cm.cmsg_type == libc::SCM_TIMESTAMPNS {
                // SAFETY: an SCM_TIMESTAMPNS message carries one timespec right after its
                // header, inside the buffer (the kernel wrote cmsg_len bytes); read
                // unaligned, as CMSG_DATA promises no more than byte alignment.
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            // SAFETY: `h` and `c` as above.
            c = unsafe { libc::CMSG_NXTHDR(h, c) };
        }
        None
    }
}

/// Turns on SO_TIMESTAMPNS: the kernel stamps each datagram when it is received (on
/// CLOCK_REALTIME) and hands the stamp over as control data ([`RecvBatch::stamp`]).
pub(crate) fn set_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    let on: libc::c_int = 1;
    set_opt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on)
}

/// setsockopt(2) with a plain-data value `T` (an integer or a C struct).
pub(crate) fn set_opt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads an integer socket option.
pub(crate) fn getsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are writable and live across the call; `len` holds the size
    // of `v`, as getsockopt requires; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Asks for a receive buffer of `bytes` (SO_RCVBUF; the kernel caps the request at
/// `net.core.rmem_max` and doubles it for its bookkeeping). Returns the size granted.
pub(crate) fn set_rcvbuf(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &want)?;
    Ok(getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)? as usize)
}
