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
                    .map(|e| e.to_string())
            }
        };
        Some(Reload {
            path: self.path.clone(),
            error,
        })
    }
}
