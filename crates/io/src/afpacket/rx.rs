//! [`RxRing`]: frames from one interface through a TPACKET_V3 ring of blocks, or a
//! TPACKET_V2 ring of frames ([`RxMode`]).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use super::frame::{for_each_in_block, frame_in_slot, Frame};
use super::{resolve, sys, AfPacketError};

/// How several rings share an interface's frames (PACKET_FANOUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FanoutMode {
    /// By the kernel's flow hash (addresses, ports): a flow always goes to the same ring,
    /// so its frames stay in order (PACKET_FANOUT_HASH).
    Hash,
    /// By the CPU that received the frame (PACKET_FANOUT_CPU).
    Cpu,
    /// Round robin over the rings (PACKET_FANOUT_LB): flows are spread and reordered.
    Lb,
}

impl FanoutMode {
    fn raw(self) -> u32 {
        match self {
            Self::Hash => libc::PACKET_FANOUT_HASH,
            Self::Cpu => libc::PACKET_FANOUT_CPU,
            Self::Lb => libc::PACKET_FANOUT_LB,
        }
    }
}

/// A fanout group to join: rings of one group (same `group` id on the same interface, in
/// one network namespace) share the frames, each frame going to exactly one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fanout {
    /// Group id (per network namespace; unrelated sockets may not use the same one).
    pub group: u16,
    /// How frames are spread.
    pub mode: FanoutMode,
}

/// How the kernel hands received frames over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RxMode {
    /// TPACKET_V3: frames packed into blocks; a block is handed over (and a waiting
    /// reader woken) when it is full or [`RxOptions::block_timeout_ms`] after its first
    /// frame. Fewest wake-ups and the densest memory, but a frame on a quiet interface
    /// waits up to the timeout (1 ms at least).
    #[default]
    Blocks,
    /// TPACKET_V2: one slot of [`RxOptions::frame_size`] bytes per frame, each handed
    /// over (and a waiting reader woken) as soon as it is written: no wait; one wake-up
    /// per frame while the reader sleeps, none while it keeps up.
    Frames,
}

/// How an [`RxRing`] is set up. The defaults suit a 10 Gbit/s interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOptions {
    /// Blocks of frames (TPACKET_V3, the default) or a slot per frame (TPACKET_V2).
    pub mode: RxMode,
    /// Bytes per block: a multiple of the page size (default 1 MiB). A frame longer than a
    /// block minus its headers is truncated (`Frame::data` shorter than `wire_len`).
    pub block_size: usize,
    /// Blocks in the ring (default 64: 64 MiB of unswappable kernel memory while open).
    pub block_count: usize,
    /// `tp_frame_size`: in [`RxMode::Frames`], each frame's slot (header included: a frame
    /// longer than the slot is truncated); in [`RxMode::Blocks`] only checked by the
    /// kernel. A multiple of 16 that divides `block_size`; default 2048.
    pub frame_size: usize,
    /// [`RxMode::Blocks`]: a block that is not full is handed over this long after it was
    /// opened (default 1).
    pub block_timeout_ms: u32,
    /// Join a fanout group (default none).
    pub fanout: Option<Fanout>,
    /// Receive frames for any destination MAC (default `true`).
    pub promiscuous: bool,
    /// Do not capture frames sent on this interface (default `true`).
    pub ignore_outgoing: bool,
    /// PACKET_VNET_HDR: put each frame's offload state (a virtio-net header) in front of
    /// it, see [`super::vnet`] (default `false`). Needs Linux 5.1
    /// ([`super::vnet::rx_ring_supported`]); opening refuses it on older kernels.
    pub vnet_hdr: bool,
}

impl Default for RxOptions {
    fn default() -> Self {
        Self {
            mode: RxMode::Blocks,
            block_size: 1 << 20,
            block_count: 64,
            frame_size: 2048,
            block_timeout_ms: 1,
            fanout: None,
            promiscuous: true,
            ignore_outgoing: true,
            vnet_hdr: false,
        }
    }
}

/// Receive statistics since the ring was opened (PACKET_STATISTICS, accumulated: the
/// kernel resets its counters at every read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RxStats {
    /// Frames that reached the socket, **including** the dropped ones (the kernel counts
    /// them in both); delivered frames are `packets - drops`.
    pub packets: u64,
    /// Frames dropped because the ring was full (or the socket could not take them).
    pub drops: u64,
    /// Times the ring froze: the kernel needed a block that we still held.
    pub freezes: u64,
}

/// An AF_PACKET receive ring on one interface (see the module documentation).
pub struct RxRing {
    // Field order matters: the mapping is unmapped before the socket closes.
    ring: sys::Ring,
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    /// The next block to look at: blocks are handed over in ring order.
    next: usize,
    totals: RxStats,
    vnet_hdr: bool,
    mode: RxMode,
}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("blocks", &self.ring.count())
            .field("next", &self.next)
            .finish()
    }
}

fn check(ifname: &str, o: &RxOptions) -> Result<(), AfPacketError> {
    let op = "open AF_PACKET receive ring";
    let bad = |why: String| Err(AfPacketError::config(ifname, op, why));
    let page = sys::page_size();
    let hdr = match o.mode {
        RxMode::Blocks => libc::TPACKET3_HDRLEN,
        RxMode::Frames => libc::TPACKET2_HDRLEN,
    };
    if o.block_size == 0 || o.block_size % page != 0 {
        return bad(format!(
            "block_size {} is not a positive multiple of the page size ({page})",
            o.block_size
        ));
    }
    if o.block_count == 0 {
        return bad("block_count is 0".into());
    }
    if o.vnet_hdr && !super::vnet::rx_ring_supported() {
        return bad(
            "vnet_hdr: this kernel's receive rings do not fill in the virtio-net header \
             (Linux 5.1 and later do)"
                .into(),
        );
    }
    if o.frame_size < hdr || o.frame_size % 16 != 0 || o.block_size % o.frame_size != 0 {
        return bad(format!(
            "frame_size {} must be a multiple of 16, at least {hdr}, that divides block_size {}",
            o.frame_size, o.block_size
        ));
    }
    let fits_u32 = |v: usize| u32::try_from(v).is_ok();
    let total = o.block_size.checked_mul(o.block_count);
    let frames = (o.block_size / o.frame_size).checked_mul(o.block_count);
    if !fits_u32(o.block_size)
        || !fits_u32(o.block_count)
        || total.is_none()
        || !frames.is_some_and(fits_u32)
    {
        return bad(format!(
            "ring of {} blocks of {} bytes is too large",
            o.block_count, o.block_size
        ));
    }
    Ok(())
}

impl RxRing {
    /// Opens a receive ring on `ifname`: socket, TPACKET_V3, the options, the ring, its
    /// mapping, then the bind to the interface (frames start arriving), promiscuous mode
    /// and the fanout group.
    pub fn open(ifname: &str, opts: &RxOptions) -> Result<Self, AfPacketError> {
        let op = "open AF_PACKET receive ring";
        let (_, ifindex) = resolve(ifname, op)?;
        check(ifname, opts)?;
        let fd = sys::packet_socket().map_err(|e| AfPacketError::os(ifname, op, e))?;
        let err = |what: &'static str| move |e| AfPacketError::os(ifname, what, e);
        let sol = libc::SOL_PACKET;
        let (version, name) = match opts.mode {
            RxMode::Blocks => (libc::tpacket_versions::TPACKET_V3, "TPACKET_V3"),
            RxMode::Frames => (libc::tpacket_versions::TPACKET_V2, "TPACKET_V2"),
        };
        sys::set_int(
            fd.as_fd(),
            sol,
            libc::PACKET_VERSION,
            version as libc::c_int,
        )
        .map_err(|e| AfPacketError::os(ifname, format!("setsockopt PACKET_VERSION {name}"), e))?;
        if opts.ignore_outgoing {
            sys::set_int(fd.as_fd(), sol, libc::PACKET_IGNORE_OUTGOING, 1)
                .map_err(err("setsockopt PACKET_IGNORE_OUTGOING"))?;
        }
        if opts.vnet_hdr {
            // Before the ring: the kernel refuses the option on a socket with one (EBUSY).
            sys::set_int(fd.as_fd(), sol, libc::PACKET_VNET_HDR, 1)
                .map_err(err("setsockopt PACKET_VNET_HDR"))?;
        }
        let frames = (opts.block_size / opts.frame_size) * opts.block_count;
        let req = libc::tpacket_req3 {
            tp_block_size: opts.block_size as u32,
            tp_block_nr: opts.block_count as u32,
            tp_frame_size: opts.frame_size as u32,
            tp_frame_nr: frames as u32,
            tp_retire_blk_tov: opts.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let set = match opts.mode {
            RxMode::Blocks => sys::set_opt(fd.as_fd(), sol, libc::PACKET_RX_RING, &req),
            // The same first four fields (`tpacket_req`).
            RxMode::Frames => {
                let req = libc::tpacket_req {
                    tp_block_size: req.tp_block_size,
                    tp_block_nr: req.tp_block_nr,
                    tp_frame_size: req.tp_frame_size,
                    tp_frame_nr: req.tp_frame_nr,
                };
                sys::set_opt(fd.as_fd(), sol, libc::PACKET_RX_RING, &req)
            }
        };
        set.map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOMEM) {
                format!(
                    "setsockopt PACKET_RX_RING ({} x {} bytes: not enough kernel memory)",
                    opts.block_count, opts.block_size
                )
            } else {
                "setsockopt PACKET_RX_RING".to_owned()
            };
            AfPacketError::os(ifname, hint, e)
        })?;
        // Frames that divide their blocks are contiguous: one slot each.
        let ring = match opts.mode {
            RxMode::Blocks => sys::Ring::map(
                fd.as_fd(),
                opts.block_size,
                opts.block_count,
                sys::BLOCK_STATUS_OFF,
            ),
            RxMode::Frames => {
                sys::Ring::map(fd.as_fd(), opts.frame_size, frames, sys::FRAME_STATUS_OFF)
            }
        }
        .map_err(err("mmap the receive ring"))?;
        sys::bind(fd.as_fd(), ifindex, sys::ETH_P_ALL_BE)
            .map_err(err("bind the receive socket"))?;
        if opts.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            sys::set_opt(fd.as_fd(), sol, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(err("setsockopt PACKET_ADD_MEMBERSHIP PACKET_MR_PROMISC"))?;
        }
        if let Some(f) = opts.fanout {
            let mut flags = f.mode.raw();
            if opts.ignore_outgoing {
                flags |= libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
            }
            let arg = (flags << 16 | u32::from(f.group)) as libc::c_int;
            sys::set_int(fd.as_fd(), sol, libc::PACKET_FANOUT, arg).map_err(|e| {
                AfPacketError::os(
                    ifname,
                    format!(
                        "setsockopt PACKET_FANOUT (group {}, {:?}; every member of a group \
                         must use the same mode and ignore_outgoing)",
                        f.group, f.mode
                    ),
                    e,
                )
            })?;
        }
        Ok(Self {
            ring,
            fd,
            ifname: ifname.to_owned(),
            ifindex,
            next: 0,
            totals: RxStats::default(),
            vnet_hdr: opts.vnet_hdr,
            mode: opts.mode,
        })
    }

    /// Waits up to `timeout` (rounded up to a millisecond; zero: just look) for the next
    /// block (or frame) to be handed over. `Ok(true)` if one is ready.
    ///
    /// When the interface went down since the last call, returns that error once
    /// (ENETDOWN, "Network is down"); the ring receives again when the interface comes back
    /// up (the kernel re-attaches the socket).
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, AfPacketError> {
        if self.ring.is_user(self.next) {
            return Ok(true);
        }
        let ms = timeout.as_nanos().div_ceil(1_000_000);
        let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
        sys::poll_in(self.fd.as_fd(), ms)
            .map_err(|e| AfPacketError::os(&self.ifname, "poll the receive ring", e))?;
        Ok(self.ring.is_user(self.next))
    }

    /// Calls `f` for every frame that is ready, in ring order (so in order of arrival),
    /// and gives each block (or frame slot) back to the kernel once its frames were seen.
    /// Walks at most one lap of the ring. Returns the number of frames.
    pub fn for_each_frame(&mut self, mut f: impl FnMut(Frame<'_>)) -> usize {
        let mut frames = 0;
        for _ in 0..self.ring.count() {
            let i = self.next;
            let Some(slot) = self.ring.user_block(i) else {
                break;
            };
            match self.mode {
                RxMode::Blocks => frames += for_each_in_block(slot, self.vnet_hdr, &mut f),
                RxMode::Frames => {
                    // A header pointing outside its slot (never written by a
                    // well-behaved kernel) is skipped; the slot goes back all the same.
                    if let Some(frame) = frame_in_slot(slot, self.vnet_hdr) {
                        f(frame);
                        frames += 1;
                    }
                }
            }
            self.ring.release(i);
            self.next = (i + 1) % self.ring.count();
        }
        frames
    }

    /// Statistics since the ring was opened (see [`RxStats`]).
    pub fn stats(&mut self) -> Result<RxStats, AfPacketError> {
        let (p, d, fr) = sys::packet_stats_v3(self.fd.as_fd())
            .map_err(|e| AfPacketError::os(&self.ifname, "getsockopt PACKET_STATISTICS", e))?;
        self.totals.packets += u64::from(p);
        self.totals.drops += u64::from(d);
        self.totals.freezes += u64::from(fr);
        Ok(self.totals)
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The socket, for callers that poll it with other descriptors (readable: a block is
    /// ready).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for RxRing {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for RxRing {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
