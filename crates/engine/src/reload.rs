//! Live reloads of a dummynet-style configuration file: [`Reloader`] watches the file and
//! applies it to the running engine when it changes (its modification time moves), through
//! [`Engine::reconfigure`]: rates, weights, rules and tables change without stopping the
//! arbiter. A file that does not parse, or a change the engine cannot make live, is
//! reported and the running configuration stays.
//!
//! It runs on the caller's (control) thread: reading and compiling the file never touches
//! the data path.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::control::Change;
use crate::engine::Engine;

/// A change every configuration read gets before the engine sees it (the shaper raises
/// flowsets' `max-len` to its longest frame, for example).
pub type Adjust = Box<dyn Fn(&mut pspat_config::Config) + Send>;

/// Watches one configuration file.
pub struct Reloader {
    /// Applied to every configuration read, before the engine sees it.
    pub adjust: Option<Adjust>,
    path: PathBuf,
    seen: Option<SystemTime>,
    next_check: Instant,
}

/// One reload: which file, and why it was refused (`None`: applied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reload {
    /// The file.
    pub path: PathBuf,
    /// Why the running configuration stays, if it does.
    pub error: Option<String>,
}

impl fmt::Display for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            None => write!(f, "reloaded {}: applied", self.path.display()),
            Some(e) => write!(
                f,
                "reload of {} refused, the running configuration stays: {e}",
                self.path.display()
            ),
        }
    }
}

impl Reloader {
    /// How often [`Reloader::poll`] looks at the file.
    pub const EVERY: Duration = Duration::from_millis(200);

    /// Watches `path`; its current version counts as applied.
    pub fn new(path: &Path) -> Self {
        Reloader {
            adjust: None,
            path: path.to_path_buf(),
            seen: Self::mtime(path),
            next_check: Instant::now() + Self::EVERY,
        }
    }

    fn mtime(path: &Path) -> Option<SystemTime> {
        std::fs::metadata(path).and_then(|m| m.modified()).ok()
    }

    /// Checks the file (at most every [`Reloader::EVERY`]); applies it to `engine` if it
    /// changed, and says how that went.
    pub fn poll(&mut self, engine: &Engine) -> Option<Reload> {
        if Instant::now() < self.next_check {
            return None;
        }
        self.next_check = Instant::now() + Self::EVERY;
        let m = Self::mtime(&self.path);
        if m.is_none() || m == self.seen {
            return None;
        }
        self.seen = m;
        let error = match pspat_config::parse_file(&self.path) {
            Err(e) => Some(e.to_string()),
            Ok(mut c) => {
                if let Some(f) = &self.adjust {
                    f(&mut c);
                }
                engine
                    .reconfigure(Change::Config(Arc::new(c)))
                    .err()
                    .map(|e| crate::error_chain(&e))
            }
        };
        Some(Reload {
            path: self.path.clone(),
            error,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{ClientConfig, EngineConfig};

    const RULES: &str = "sched 1 config type fifo bw 8Mbit/s\n\
                         queue 1 config sched 1 queue 4\n\
                         add 100 queue 1 src-ip 10.0.0.1\n\
                         default deny\n";

    /// Writes `text` to `path` and sets its modification time `secs` after `base` (a
    /// change the file system's clock granularity cannot hide).
    fn write(path: &Path, text: &str, base: SystemTime, secs: u64) {
        std::fs::write(path, text).unwrap();
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(base + Duration::from_secs(secs)).unwrap();
    }

    /// Polls once the reloader is due again.
    fn poll_when_due(r: &mut Reloader, engine: &Engine) -> Option<Reload> {
        std::thread::sleep(Reloader::EVERY + Duration::from_millis(20));
        r.poll(engine)
    }

    /// The running scheduler's bandwidth, as the engine reports it.
    fn bandwidth(engine: &Engine) -> u64 {
        engine.dummynet_stats().unwrap().schedulers[0].bandwidth_bps
    }

    #[test]
    fn a_changed_file_is_applied_a_broken_one_refused_and_an_unchanged_one_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.ipfw");
        let base = SystemTime::now();
        write(&path, RULES, base, 0);
        let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
        cfg.spin_ns = 20_000;
        cfg.dummynet = Some(Arc::new(pspat_config::parse_file(&path).unwrap()));
        let (engine, _clients) = Engine::start(&cfg, Arc::new(pspat_io::null::Null)).unwrap();
        assert_eq!(bandwidth(&engine), 8_000_000);
        let mut r = Reloader::new(&path);
        // Not due yet, then due with the file as it was started with.
        assert_eq!(r.poll(&engine), None);
        assert_eq!(poll_when_due(&mut r, &engine), None);

        // A change is applied, after the adjustment every configuration read gets.
        r.adjust = Some(Box::new(|c: &mut pspat_config::Config| {
            for s in c.schedulers.values_mut() {
                s.bandwidth_bps *= 2;
            }
        }));
        write(&path, &RULES.replace("8Mbit/s", "16Mbit/s"), base, 10);
        let applied = poll_when_due(&mut r, &engine).expect("the change was seen");
        assert_eq!(applied.error, None, "{applied}");
        assert_eq!(applied.path, path);
        assert!(applied.to_string().contains("applied"), "{applied}");
        assert_eq!(bandwidth(&engine), 32_000_000);

        // A file that does not parse is refused, and the running configuration stays.
        write(&path, &RULES.replace("type fifo", "type nosuch"), base, 20);
        let refused = poll_when_due(&mut r, &engine).expect("the change was seen");
        let e = refused.error.clone().expect("a broken file is refused");
        assert!(e.contains("nosuch"), "{e}");
        assert!(
            refused
                .to_string()
                .contains("the running configuration stays"),
            "{refused}"
        );
        assert_eq!(bandwidth(&engine), 32_000_000);

        // Nothing changed since: nothing to report.
        assert_eq!(poll_when_due(&mut r, &engine), None);
        engine.stop(false);
    }
}
