//! Whether a network interface exists and is up, by name, in the calling thread's network
//! namespace: what a shaper checks while one of its interfaces is down or gone, to know
//! when to carry on and whether its sockets must be opened again.

use std::ffi::CString;
use std::io;

/// An interface's state at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// No interface has the name (deleted, or not created yet).
    Gone,
    /// It exists, with this index; `up`: administratively up and with a carrier
    /// (IFF_UP and IFF_RUNNING), so frames can pass.
    Present {
        /// Its index: a socket bound to another index (the interface was deleted and
        /// created again) must be opened again.
        index: u32,
        /// Up and running.
        up: bool,
    },
}

/// Looks `ifname` up now. An error is a name that cannot be one (empty, too long, a NUL
/// byte) or a failed system call.
pub fn link_state(ifname: &str) -> io::Result<LinkState> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{ifname}' cannot be an interface name"),
        ));
    }
    let name = CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    let Some(index) = crate::sys::index_of(&name)? else {
        return Ok(LinkState::Gone);
    };
    match crate::sys::flags_of(&name) {
        Ok(f) => {
            let want = (libc::IFF_UP | libc::IFF_RUNNING) as u32;
            Ok(LinkState::Present {
                index,
                up: f & want == want,
            })
        }
        // Deleted between the two calls.
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(LinkState::Gone),
        Err(e) => Err(e),
    }
}

/// Whether a socket error means the interface went down or away (so the shaper waits for
/// it), rather than a fault of the socket itself: ENETDOWN (down, or deleted under a bound
/// socket), ENXIO and ENODEV (no such device any more).
pub fn is_link_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV)
    )
}

/// Told by a sender when it finds its interface down or away, and when it can send
/// again (with a socket opened again when the interface came back under a new index): how
/// a shaper hears of its output's faults from the engine's transmitting threads.
pub trait LinkEvents: Send + Sync {
    /// A send failed because the link is down or gone (`why`: the error).
    fn went_down(&self, why: &dyn std::fmt::Display);
    /// Sending works again; `reopened`: on a new socket.
    fn came_back(&self, reopened: bool);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_present_and_up_and_a_missing_name_is_gone() {
        match link_state("lo").unwrap() {
            LinkState::Present { index, up } => {
                assert!(index > 0);
                assert!(up, "lo is up in this namespace");
            }
            LinkState::Gone => panic!("no lo"),
        }
        assert_eq!(link_state("pspat-nosuch0").unwrap(), LinkState::Gone);
        assert!(link_state("").is_err());
        assert!(link_state("a-name-longer-than-16").is_err());
        assert!(link_state("a\0b").is_err());
    }

    #[test]
    fn link_errors_are_down_and_gone_not_others() {
        for e in [libc::ENETDOWN, libc::ENXIO, libc::ENODEV] {
            assert!(is_link_error(&io::Error::from_raw_os_error(e)));
        }
        for e in [libc::EMSGSIZE, libc::ENOBUFS, libc::EPERM] {
            assert!(!is_link_error(&io::Error::from_raw_os_error(e)));
        }
    }
}
