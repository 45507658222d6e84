//! What the shaper's tests share: network namespaces with veth pairs, and when to skip.
//! (`pspat shape`'s own test, `crates/cli/tests/shape.rs`, includes this file too, and
//! starts the binary in a [`Topology`]'s shaper namespace.)
//!
//! **Namespaces.** Each [`Netns`] is a thread that called `unshare(CLONE_NEWNET)`: it, and
//! only it (with the `ip` processes it starts), is in a new, anonymous network namespace,
//! and runs the closures given to [`Netns::run`] there. A socket opened in such a closure
//! stays in that namespace whichever thread uses it later, so a shaper started there, or a
//! UDP socket bound there, is used from the test's own thread; a process spawned there
//! starts in that namespace. The namespaces have no
//! name: the kernel deletes each, veth ends included, once its thread has ended and its
//! sockets are closed, whether the test passed, failed or the process was killed; tests
//! running in parallel cannot see each other's interfaces or addresses.
//!
//! **Skipping.** The tests need root (CAP_NET_ADMIN for namespaces and veth pairs,
//! CAP_NET_RAW for AF_PACKET). Without it, or when the namespaces cannot be set up, a test
//! prints why and passes, except with `CI=true` in the environment, where it fails: CI
//! runs as root and must not pass a test that checked nothing.

#![allow(dead_code)] // each test file uses its own part

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::mpsc;
use std::thread::JoinHandle;

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Says why the test checks nothing: prints it and returns (the caller then returns), or,
/// with `CI=true`, fails the test.
pub fn skip(why: &str) {
    assert!(!ci(), "CI=true and this test cannot run: {why}");
    eprintln!("skipped: {why}");
}

/// `Ok` when root; otherwise the reason to [`skip`].
pub fn need_root() -> Result<(), String> {
    if is_root() {
        Ok(())
    } else {
        Err("needs root (network namespaces, CAP_NET_RAW for AF_PACKET)".into())
    }
}

/// Runs `ip ARGS` (in the calling thread's namespace).
pub fn ip(args: &str) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .map_err(|e| format!("ip {args}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {args}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

type Job = Box<dyn FnOnce() + Send>;

/// A thread in a network namespace of its own (see the module documentation).
pub struct Netns {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// The thread's id: `ip link set dev X netns TID` moves an interface into it.
    pub tid: i64,
}

impl Netns {
    pub fn new(name: &str) -> Result<Netns, String> {
        let (jobs, todo) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("netns-{name}"))
            .spawn(move || {
                // SAFETY: unshare takes no pointers; CLONE_NEWNET only moves the calling
                // thread to a new network namespace (allowed in a multi-threaded process).
                let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    let _ = ready.send(Err(format!("unshare(CLONE_NEWNET): {e}")));
                    return;
                }
                // SAFETY: gettid takes no arguments and cannot fail.
                let tid = unsafe { libc::syscall(libc::SYS_gettid) };
                let _ = ready.send(Ok(tid));
                for job in todo {
                    job();
                }
            })
            .map_err(|e| format!("starting a namespace thread: {e}"))?;
        let tid = started
            .recv()
            .map_err(|_| "the namespace thread ended".to_string())??;
        let ns = Netns {
            jobs: Some(jobs),
            thread: Some(thread),
            tid,
        };
        // Nothing but the test's frames: no router or neighbour solicitations.
        ns.run(|| {
            let _ = std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
            ip("link set dev lo up")
        })?;
        Ok(ns)
    }

    /// Runs `f` in the namespace and returns what it returns (a panic in `f` panics here).
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        });
        self.jobs
            .as_ref()
            .expect("running")
            .send(job)
            .expect("the namespace thread runs");
        match rx.recv().expect("the namespace thread answers") {
            Ok(r) => r,
            Err(panic) => resume_unwind(panic),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The address of `dev` (`ip -br link show` in the calling thread's namespace).
fn mac(dev: &str) -> Result<String, String> {
    let out = ip(&format!("-br link show {dev}"))?;
    out.split_whitespace()
        .nth(2)
        .map(str::to_owned)
        .ok_or_else(|| format!("no MAC address for {dev} in `{out}`"))
}

/// The sender's address (a topology's namespaces are its own, so every test uses these).
pub const SND_ADDR: &str = "10.77.0.1";
/// The receiver's address.
pub const RCV_ADDR: &str = "10.77.0.2";

/// Three namespaces and two veth pairs, the shaper's interfaces `s1` (in) and `r1` (out):
///
/// ```text
///  [snd: s0 10.77.0.1] --veth-- [shp: s1   shaper   r1] --veth-- [rcv: r0 10.77.0.2]
/// ```
///
/// Static neighbour entries on both ends: no ARP needs to cross the shaper.
pub struct Topology {
    pub snd: Netns,
    pub shp: Netns,
    pub rcv: Netns,
}

impl Topology {
    pub fn new() -> Result<Topology, String> {
        let (snd, shp, rcv) = (Netns::new("snd")?, Netns::new("shp")?, Netns::new("rcv")?);
        let (snd_tid, rcv_tid) = (snd.tid, rcv.tid);
        shp.run(move || {
            ip("link add s0 type veth peer name s1")?;
            ip("link add r0 type veth peer name r1")?;
            ip(&format!("link set dev s0 netns {snd_tid}"))?;
            ip(&format!("link set dev r0 netns {rcv_tid}"))?;
            ip("link set dev s1 up")?;
            ip("link set dev r1 up")
        })?;
        let end = |dev: &'static str, addr: &'static str| {
            move || -> Result<String, String> {
                ip(&format!("addr add {addr}/24 dev {dev}"))?;
                ip(&format!("link set dev {dev} up"))
            }
        };
        snd.run(end("s0", SND_ADDR))?;
        rcv.run(end("r0", RCV_ADDR))?;
        let t = Topology { snd, shp, rcv };
        t.neighbours()?;
        Ok(t)
    }
}

/// The topology, or `None` after [`skip`] said why there is none.
pub fn topology_or_skip() -> Option<Topology> {
    match need_root().and_then(|()| Topology::new()) {
        Ok(t) => Some(t),
        Err(why) => {
            skip(&format!("no namespaces: {why}"));
            None
        }
    }
}

/// The highest CPU in this process's affinity mask (`/proc/self/status`).
pub fn last_allowed_cpu() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status")
        .trim();
    // "0-3,8,10-11": the last number is the highest CPU.
    let last = list.rsplit([',', '-']).next().unwrap();
    last.parse().expect("a CPU number")
}

/// A raw AF_PACKET socket on one interface, for tests that send hand-made frames and check
/// byte for byte what arrives. Open it in the interface's namespace (in [`Netns::run`]); it
/// stays there whichever thread uses it later. It does not see the frames it sends itself
/// (PACKET_IGNORE_OUTGOING).
///
/// The kernel removes a received frame's outer VLAN tag before packet sockets see it and
/// reports it aside (PACKET_AUXDATA: the TCI, and the TPID when it sets
/// TP_STATUS_VLAN_TPID_VALID); [`RawSocket::recv`] puts it back, so what it returns is the
/// frame as it was on the wire. (Independent of `pspat_io`'s ring, which the shaper's own
/// reading of the tag goes through.)
pub struct RawSocket {
    fd: std::os::fd::OwnedFd,
}

impl RawSocket {
    /// Opens one bound to `dev`, receiving every frame that arrives on it.
    pub fn open(dev: &str) -> Result<RawSocket, String> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let err = |what: &str| format!("{what} ({dev}): {}", std::io::Error::last_os_error());
        let name = std::ffi::CString::new(dev).map_err(|e| e.to_string())?;
        // SAFETY: `name` is a NUL-terminated string that lives across the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(err("if_nametoindex"));
        }
        // Protocol 0 until the bind: no frame of another interface is queued before it.
        // SAFETY: socket(2) takes no pointers.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err("socket(AF_PACKET)"));
        }
        // SAFETY: `raw` was just returned by socket(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        for (opt, what) in [
            (libc::PACKET_AUXDATA, "PACKET_AUXDATA"),
            (libc::PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING"),
        ] {
            let one: libc::c_int = 1;
            // SAFETY: `one` is a live c_int whose size is passed; the kernel only reads it.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(err(what));
            }
        }
        // SAFETY: sockaddr_ll is plain integers and arrays; all zeroes is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` is a valid sockaddr_ll that lives across the call, its size given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(err("bind"));
        }
        Ok(RawSocket { fd })
    }

    /// Sends `frame` as it is (destination MAC first).
    pub fn send(&self, frame: &[u8]) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        // SAFETY: `frame` is a live slice of the length passed; the kernel only reads it.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(format!(
                "send of a {}-byte frame: {}",
                frame.len(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// The next frame that arrives within `timeout`, as it was on the wire (its outer VLAN
    /// tag put back, with its TPID), or `None`.
    pub fn recv(&self, timeout: std::time::Duration) -> Result<Option<Vec<u8>>, String> {
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is one valid, writable pollfd that lives across the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            return Err(format!("poll: {}", std::io::Error::last_os_error()));
        }
        if rc == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; 65_536];
        // u64s: a control buffer aligned for cmsghdr.
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is integers and raw pointers; all zeroes is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control) as _;
        // SAFETY: `msg` points at `iov` (describing `buf`) and `control`, all writable and
        // alive across the call, with their lengths.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            return Err(format!("recvmsg: {}", std::io::Error::last_os_error()));
        }
        let n = n as usize;
        if n > buf.len() {
            return Err(format!(
                "a frame of {n} bytes, longer than the test's buffer"
            ));
        }
        let mut tag = None;
        // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/CMSG_NXTHDR walk the control
        // bytes it reports, within `control`.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !c.is_null() {
            // SAFETY: `c` points at a complete cmsghdr inside `control` (CMSG_FIRSTHDR and
            // CMSG_NXTHDR return null otherwise).
            let h = unsafe { &*c };
            if h.cmsg_level == libc::SOL_PACKET && h.cmsg_type == libc::PACKET_AUXDATA {
                // SAFETY: a PACKET_AUXDATA message carries one tpacket_auxdata; its data
                // may be unaligned for it, hence the unaligned read.
                let aux: libc::tpacket_auxdata =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                if aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
                    let tpid = if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        aux.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    tag = Some((tpid, aux.tp_vlan_tci));
                }
            }
            // SAFETY: as above; `c` is a header of `msg`'s control bytes.
            c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
        }
        let data = &buf[..n];
        Ok(Some(match tag {
            Some((tpid, tci)) if n >= 12 => {
                let mut f = Vec::with_capacity(n + 4);
                f.extend_from_slice(&data[..12]);
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&tci.to_be_bytes());
                f.extend_from_slice(&data[12..]);
                f
            }
            _ => data.to_vec(),
        }))
    }
}

/// Sets the MTU of `dev` (in the calling thread's namespace).
pub fn set_mtu(dev: &str, mtu: u32) -> Result<String, String> {
    ip(&format!("link set dev {dev} mtu {mtu}"))
}

impl Topology {
    /// Creates the sender's veth pair (`s0`, `s1`) again after a test deleted it, as
    /// [`Topology::new`] made it.
    pub fn recreate_input(&self) -> Result<(), String> {
        self.recreate("s", &self.snd, SND_ADDR)
    }

    /// Creates the receiver's veth pair (`r0`, `r1`) again after a test deleted it.
    pub fn recreate_output(&self) -> Result<(), String> {
        self.recreate("r", &self.rcv, RCV_ADDR)
    }

    /// The pair `{p}0`-`{p}1`: `{p}1` up in the shaper's namespace, `{p}0` with `addr` in
    /// `end`'s; then both neighbour entries, for the new end's address.
    fn recreate(&self, p: &'static str, end: &Netns, addr: &'static str) -> Result<(), String> {
        let tid = end.tid;
        self.shp.run(move || {
            ip(&format!("link add {p}0 type veth peer name {p}1"))?;
            ip(&format!("link set dev {p}0 netns {tid}"))?;
            ip(&format!("link set dev {p}1 up"))
        })?;
        end.run(move || {
            ip(&format!("addr add {addr}/24 dev {p}0"))?;
            ip(&format!("link set dev {p}0 up"))
        })?;
        self.neighbours()
    }

    /// Static neighbour entries on both ends (no ARP needs to cross the shaper).
    fn neighbours(&self) -> Result<(), String> {
        let mac_s0 = self.snd.run(|| mac("s0"))?;
        let mac_r0 = self.rcv.run(|| mac("r0"))?;
        self.snd.run(move || {
            ip(&format!(
                "neigh replace {RCV_ADDR} lladdr {mac_r0} dev s0 nud permanent"
            ))
        })?;
        self.rcv.run(move || {
            ip(&format!(
                "neigh replace {SND_ADDR} lladdr {mac_s0} dev r0 nud permanent"
            ))
        })?;
        Ok(())
    }
}
