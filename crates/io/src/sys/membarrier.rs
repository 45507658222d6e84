//! membarrier(2): a memory barrier executed on every running thread of this process.

use std::io;

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (linux/membarrier.h, Linux 4.14).
const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
/// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED` (linux/membarrier.h, Linux 4.14).
const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(cmd: libc::c_long) -> io::Result<()> {
    // SAFETY: membarrier takes two integers (command, flags) and a CPU id that the
    // commands used here ignore; no pointers, no memory of ours is touched.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers the process for [`private_expedited`] (required once before it works).
pub(crate) fn register_private_expedited() -> io::Result<()> {
    membarrier(REGISTER_PRIVATE_EXPEDITED)
}

/// Returns once every thread of the process that was running on another CPU has executed
/// a full memory barrier (threads not running pass one when they are next scheduled).
pub(crate) fn private_expedited() -> io::Result<()> {
    membarrier(PRIVATE_EXPEDITED)
}
