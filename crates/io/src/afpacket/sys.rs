//! The libc glue of the AF_PACKET module: sockets, socket options, ioctls, the mmap'd
//! TPACKET_V3 ring and sendmmsg(2). The only part of `afpacket` allowed `unsafe` code;
//! every block says why it is sound. Everything here returns plain `io::Result`s: the
//! callers add the interface and the operation to the error.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `ETH_P_ALL` in network byte order, as bind(2) and socket(2) take it.
pub(super) const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// The index of the interface called `name`, or the error if_nametoindex(3) gives
/// (ENODEV for an unknown name).
pub(super) fn if_index(name: &CStr) -> io::Result<u32> {
    // SAFETY: `name` is a valid NUL-terminated string that lives across the call; the
    // function only reads it.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(idx)
}

fn socket(domain: libc::c_int, ty: libc::c_int, proto: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; any argument values are allowed.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2), is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An AF_PACKET SOCK_RAW socket with protocol 0: it receives nothing until bound with a
/// protocol ([`bind`]), so no frame of another interface slips in before the bind.
pub(super) fn packet_socket() -> io::Result<OwnedFd> {
    socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
}

/// An AF_INET datagram socket, for interface ioctls that need no privilege.
pub(super) fn inet_socket() -> io::Result<OwnedFd> {
    socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
}

/// setsockopt(2) with a plain-data value (one home for it: `crate::sys`).
pub(super) use crate::sys::set_opt;

/// setsockopt(2) with an `int` value.
pub(super) fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    set_opt(fd, level, name, &value)
}

/// PACKET_STATISTICS for a TPACKET_V3 socket: (packets, drops, freezes) since the last
/// read (the kernel resets them on every read).
pub(super) fn packet_stats_v3(fd: BorrowedFd<'_>) -> io::Result<(u32, u32, u32)> {
    let mut st = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are writable and live across the call, `len` holds the size of
    // `st`; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.tp_packets, st.tp_drops, st.tp_freeze_q_cnt))
}

/// Binds a packet socket to interface `ifindex` and protocol `proto_be` (network order; 0
/// for a socket that only sends).
pub(super) fn bind(fd: BorrowedFd<'_>, ifindex: u32, proto_be: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain integers and arrays; all zeroes is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as libc::c_ushort;
    sll.sll_protocol = proto_be;
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `sll` is a valid sockaddr_ll that lives across the call, with its size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An `ifreq` naming `name` (at most IFNAMSIZ - 1 bytes; callers check).
fn ifreq(name: &CStr) -> libc::ifreq {
    // SAFETY: ifreq is a C struct of a char array and a union of integers, arrays and a
    // pointer; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.to_bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

fn ioctl(fd: BorrowedFd<'_>, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: the two requests used here (SIOCGIFMTU, SIOCGIFHWADDR) read the name and
    // write one member of the union of `req`, which is writable and lives across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The MTU of interface `name` (SIOCGIFMTU).
pub(super) fn if_mtu(fd: BorrowedFd<'_>, name: &CStr) -> io::Result<u32> {
    let mut req = ifreq(name);
    ioctl(fd, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU succeeded, so it wrote the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(mtu.max(0) as u32)
}

/// The hardware type (an `ARPHRD_*` value) and the first 6 bytes of the hardware address
/// of interface `name` (SIOCGIFHWADDR).
pub(super) fn if_hwaddr(fd: BorrowedFd<'_>, name: &CStr) -> io::Result<(u16, [u8; 6])> {
    let mut req = ifreq(name);
    ioctl(fd, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR succeeded, so it wrote the `ifru_hwaddr` member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, &src) in mac.iter_mut().zip(&sa.sa_data) {
        *dst = src as u8;
    }
    Ok((sa.sa_family, mac))
}

/// The page size (sysconf(_SC_PAGESIZE)).
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Waits up to `timeout_ms` (-1: forever) for `fd` to be readable. Ok(false) after the
/// timeout or an interrupting signal. A pending socket error (POLLERR: ENETDOWN when the
/// interface went down) is returned, and cleared, as an error.
pub(super) fn poll_in(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid, writable pollfd that lives across the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err);
    }
    if pfd.revents & libc::POLLERR != 0 {
        // SO_ERROR reads and clears the socket's pending error.
        let err = crate::sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
    }
    Ok(rc > 0 && pfd.revents & libc::POLLIN != 0)
}

/// Offset of `block_status` in a block descriptor (`tpacket_block_desc.hdr.bh1`).
pub(super) const BLOCK_STATUS_OFF: usize = std::mem::offset_of!(libc::tpacket_block_desc, hdr)
    + std::mem::offset_of!(libc::tpacket_hdr_v1, block_status);
/// Offset of `tp_status` in a TPACKET_V2 frame slot (`tpacket2_hdr`).
pub(super) const FRAME_STATUS_OFF: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_status);

/// A receive ring: `count` slots of `block_size` bytes mapped from the kernel, each with
/// a status word at `status_off`: TPACKET_V3 blocks of frames (the status in the block
/// descriptor) or TPACKET_V2 frame slots (the status in the frame header). A slot belongs
/// to the kernel while its status has no `TP_STATUS_USER` bit and to us once it has;
/// [`Ring::user_block`] hands out a slot only in the second state, and [`Ring::release`]
/// gives it back.
pub(super) struct Ring {
    base: NonNull<u8>,
    block_size: usize,
    count: usize,
    status_off: usize,
}

// SAFETY: the ring is a private mapping of this value (unmapped on drop); moving the value
// to another thread moves its ownership. Concurrent access is only by the kernel, through
// the block-status protocol.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of socket `fd`, on which PACKET_RX_RING was set for `count` slots of
    /// `block_size` bytes, contiguous (blocks; or frames that divide their blocks), with
    /// their status words at `status_off` (a multiple of 4, below 16).
    pub(super) fn map(
        fd: BorrowedFd<'_>,
        block_size: usize,
        count: usize,
        status_off: usize,
    ) -> io::Result<Self> {
        debug_assert!(status_off % 4 == 0 && status_off < 16 && block_size % 16 == 0);
        let len = block_size
            .checked_mul(count)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        // SAFETY: a fresh shared mapping of the socket's ring at an address the kernel
        // chooses; no existing memory is affected. The length is the ring's size.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        Ok(Self {
            base,
            block_size,
            count,
            status_off,
        })
    }

    /// Number of blocks.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.count);
        // SAFETY: slot `i` starts `i * block_size` bytes into the mapping (in bounds as
        // `i < count`), and its status word is 4-byte aligned (the mapping is page aligned,
        // slots are multiples of 16 bytes and the offset a multiple of 4, below 16: `map`).
        // The kernel and we access it only atomically (the kernel with plain stores after a
        // write barrier, which an acquire load pairs with), and the mapping outlives
        // `&self`.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(i * self.block_size + self.status_off)
                .cast::<AtomicU32>()
        }
    }

    /// Whether block `i` has been handed to user space.
    pub(super) fn is_user(&self, i: usize) -> bool {
        // ORDERING: acquire pairs with the kernel's write barrier before it sets the status
        // (prb_close_block for a block, tpacket_rcv's smp_wmb before
        // __packet_set_status for a frame): the contents are visible once TP_STATUS_USER
        // is.
        self.status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Block `i`'s bytes if it belongs to user space, None while the kernel owns it.
    pub(super) fn user_block(&mut self, i: usize) -> Option<&[u8]> {
        if !self.is_user(i) {
            return None;
        }
        // SAFETY: the block is in bounds (`status` checked `i < count`) and the kernel
        // does not write it while it is user-owned (until `release`, which needs `&mut
        // self` and so ends this borrow first). The memory lives as long as the mapping.
        Some(unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(i * self.block_size), self.block_size)
        })
    }

    /// Gives block `i` back to the kernel.
    pub(super) fn release(&mut self, i: usize) {
        // ORDERING: release, so that our reads of the block happen before the kernel
        // (which reads the status before filling the block) can overwrite it.
        self.status(i)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `map` with this address and length, and no
        // borrow of it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.block_size * self.count);
        }
    }
}

fn zeroed_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and raw pointers (plus, on some libcs,
    // integer padding); all-zero bytes are a valid value of each.
    unsafe { std::mem::zeroed() }
}

/// Preallocated message headers for sendmmsg(2) of whole frames, one iovec each, on a
/// bound packet socket (no destination address: the bound interface is used).
pub(super) struct MsgBatch {
    iovs: Box<[libc::iovec]>,
    msgs: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers inside are rewritten from `&mut self` right before each system
// call, point only at frames borrowed for that call, and are never dereferenced by Rust.
unsafe impl Send for MsgBatch {}

impl MsgBatch {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            iovs: (0..capacity)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            msgs: (0..capacity).map(|_| zeroed_mmsghdr()).collect(),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Sends frames `frame(first)`, ..., `frame(first + n - 1)` in one sendmmsg(2)
    /// (retried on EINTR). Returns how many the kernel took (>= 1), or the error of the
    /// first one.
    ///
    /// Panics if `n` is 0 or above the capacity.
    pub(super) fn send<'a>(
        &mut self,
        fd: BorrowedFd<'_>,
        first: usize,
        n: usize,
        frame: &impl Fn(usize) -> &'a [u8],
    ) -> io::Result<usize> {
        assert!(n > 0 && n <= self.capacity());
        for i in 0..n {
            let f = frame(first + i);
            self.iovs[i] = libc::iovec {
                iov_base: f.as_ptr().cast_mut().cast(),
                iov_len: f.len(),
            };
            crate::sys::single_iov(&mut self.msgs[i], &mut self.iovs[i]);
        }
        loop {
            // SAFETY: `msgs[..n]` are initialised mmsghdrs whose single iovecs (set just
            // above) describe frames borrowed for `'a`, which outlives this call; the
            // kernel only reads them (so the `*mut` cast is never written through) and
            // writes `msg_len` inside `msgs`, owned through `&mut self`. `n` is at most the
            // capacity, small enough for c_uint.
            let rc = unsafe {
                libc::sendmmsg(fd.as_raw_fd(), self.msgs.as_mut_ptr(), n as libc::c_uint, 0)
            };
            if rc > 0 {
                return Ok(rc as usize);
            }
            let err = if rc == 0 {
                io::Error::from_raw_os_error(libc::EAGAIN)
            } else {
                io::Error::last_os_error()
            };
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}
