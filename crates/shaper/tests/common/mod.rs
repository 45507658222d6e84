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
                ip(&format!("link set dev {dev} up"))?;
                mac(dev)
            }
        };
        let mac_s0 = snd.run(end("s0", SND_ADDR))?;
        let mac_r0 = rcv.run(end("r0", RCV_ADDR))?;
        snd.run(move || {
            ip(&format!(
                "neigh replace {RCV_ADDR} lladdr {mac_r0} dev s0 nud permanent"
            ))
        })?;
        rcv.run(move || {
            ip(&format!(
                "neigh replace {SND_ADDR} lladdr {mac_s0} dev r0 nud permanent"
            ))
        })?;
        Ok(Topology { snd, shp, rcv })
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
