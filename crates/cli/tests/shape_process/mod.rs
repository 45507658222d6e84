//! `pspat shape` as a process in a test topology's shaper namespace (see the shaper
//! library's `tests/common/mod.rs`): started with `--in s1 --out r1`, its stderr read line
//! by line, killed if a test fails. The tests that include it use all of it.

#![allow(dead_code)]

use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::Topology;

/// Longest wait for a line of the shaper's, or for it to end.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// `pspat shape --in s1 --out r1 --config CONFIG ARGS`, started in the topology's shaper
/// namespace, its stderr read line by line. Killed on drop: a failed assertion must not
/// leave a shaper running.
pub struct Shape {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line of stderr received so far.
    pub seen: Vec<String>,
}

impl Shape {
    pub fn start(t: &Topology, config: &str, args: &[&str]) -> Shape {
        let bin = assert_cmd::cargo::cargo_bin("pspat");
        let args: Vec<String> = ["shape", "--in", "s1", "--out", "r1", "--config", config]
            .iter()
            .chain(args)
            .map(|a| a.to_string())
            .collect();
        // Spawned by the namespace's thread, the process starts in its namespace.
        let mut child = t
            .shp
            .run(move || {
                Command::new(bin)
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
            })
            .expect("starting pspat shape");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Shape {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    pub fn stderr(&self) -> String {
        self.seen.join("\n")
    }

    /// Waits for a line starting with `prefix` (one already seen counts).
    pub fn wait_for(&mut self, prefix: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.seen.iter().any(|l| l.starts_with(prefix)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("no line '{prefix}...' from pspat shape:\n{}", self.stderr()),
            }
        }
    }

    /// Waits for the process to end and for the rest of its stderr.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "pspat shape still runs:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends at the end of the pipe, closed when the process ended.
        while let Ok(l) = self.lines.recv_timeout(PATIENCE) {
            self.seen.push(l);
        }
        status
    }
}

impl Drop for Shape {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Shape {
    /// Sends `sig` to the process.
    pub fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill takes no pointers; the pid is our child's, not yet reaped (it is
        // reaped only by `wait` or on drop), so it names no other process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// The lines received so far, without waiting.
    pub fn drain(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
    }
}
