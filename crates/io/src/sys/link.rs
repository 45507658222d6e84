//! An interface's index and flags, looked up by name in the calling thread's network
//! namespace: if_nametoindex(3) and the SIOCGIFFLAGS ioctl on a throwaway datagram socket.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The index of the interface called `name`, or `None` when there is none.
pub(crate) fn index_of(name: &CStr) -> io::Result<Option<u32>> {
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx != 0 {
        return Ok(Some(idx));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // An unknown name is ENODEV (glibc's ioctl), ENXIO on some libcs.
        Some(libc::ENODEV) | Some(libc::ENXIO) => Ok(None),
        _ => Err(e),
    }
}

/// The IFF_* flags of the interface called `name` (at most IFNAMSIZ - 1 bytes).
pub(crate) fn flags_of(name: &CStr) -> io::Result<u32> {
    let bytes = name.to_bytes();
    if bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    // SAFETY: socket(2) takes no pointers; a negative result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns; the OwnedFd closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data (a name array and a union of integers): all zeros is a
    // valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid, writable ifreq with a NUL-terminated name (zeroed above,
    // the name shorter than the array); SIOCGIFFLAGS writes only `ifru_flags` in it.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS succeeded, so the union holds the flags.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(u32::from(flags as u16))
}
