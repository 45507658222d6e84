//! Live reloads of a dummynet-style configuration file: [`Reloader`] watches the file and
//! applies a new version of it to the running engine through [`Engine::reconfigure`]:
//! rates, weights, rules and tables change without stopping the arbiter. It runs on the
//! caller's (control) thread: reading and compiling the file never touches the data path.
//!
//! **When a version is applied.** A version of the file is its identity (device and
//! inode), size, and modification and change times. A new version is applied once a later
//! poll, at least [`Reloader::SETTLE`] after the first that saw it, finds it unchanged: a
//! file rewritten in place in several writes is read complete, not half written, as long
//! as no pause between two writes lasts longer than that. The way to replace a
//! configuration safely whatever the pauses is to write the new one next to it and rename
//! it into place (`mv rules.ipfw.new rules.ipfw`, what an editor's "atomic save" does):
//! the rename is atomic, and the new inode is applied once settled like any change.
//!
//! **What is refused** (the running configuration stays, and the report says why):
//! - a file that cannot be read ([`pspat_config::read_file`]: not a regular file, larger
//!   than its limit) or does not parse;
//! - a file with no rules that would drop every packet
//!   ([`pspat_config::check_not_empty`]);
//! - a file that lost all its rules, or all its schedulers and pipes, where the running
//!   configuration has some: an emptied or truncated file is far likelier an accident than
//!   the operator's intent. With [`Reloader::allow_empty`], files of this kind and of the
//!   one before are applied;
//! - a change the engine cannot make live (an algorithm, a mask, a `max-*` bound).
//!
//! **What is reported**, once per version ([`Reload`]): what was applied
//! (`reloaded FILE: applied 3 schedulers, 5 flowsets, ...`), why a version was refused,
//! that the file was removed (once; the running configuration stays), and that it was
//! re-created (its first version is applied as any change).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pspat_config::{Format, Summary};

use crate::control::Change;
use crate::engine::Engine;

/// A change every configuration read gets before the engine sees it (the shaper raises
/// flowsets' `max-len` to its longest frame, for example).
pub type Adjust = Box<dyn Fn(&mut pspat_config::Config) + Send>;

/// Watches one configuration file.
pub struct Reloader {
    /// Applied to every configuration read, before the engine sees it.
    pub adjust: Option<Adjust>,
    /// Apply a file without rules (also one that would drop every packet), or without
    /// schedulers and pipes, where the running configuration has some; `false` (the
    /// default) refuses it as an accident.
    pub allow_empty: bool,
    path: PathBuf,
    /// The version last applied or refused; `None` while there is no file.
    seen: Option<Version>,
    /// A new version, and when a poll first saw it.
    pending: Option<(Version, Instant)>,
    /// The file is missing (its removal was reported, or it was missing at the start).
    gone: bool,
    /// What the running configuration has, as far as this reloader knows: the file at the
    /// start, then each version applied (`None`: unknown, the file did not parse).
    running: Option<Summary>,
    next_check: Instant,
}

/// One version of the file, as [`std::fs::metadata`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(path: &Path) -> std::io::Result<Version> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(Version {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// What happened to the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new version of it settled.
    Changed,
    /// It appeared again after it was missing, and its first version settled.
    Recreated,
    /// It is missing (or cannot be looked at); reported once.
    Removed,
    /// It was read because the operator asked ([`Reloader::reload_now`], SIGHUP).
    Requested,
}

/// One report: which file, what happened, and what was applied or why nothing was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reload {
    /// The file.
    pub path: PathBuf,
    /// What happened to it.
    pub event: Event,
    /// What the configuration now running has, if this version was applied.
    pub applied: Option<Summary>,
    /// Why the running configuration stays, if it does (`None`: applied).
    pub error: Option<String>,
}

/// [`Reload::error`] of a removed file.
const REMOVED: &str = "the file was removed";

impl fmt::Display for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let verb = match self.event {
            Event::Recreated => "re-created",
            Event::Changed => "reloaded",
            Event::Requested => "re-read on request",
            Event::Removed => {
                let e = self.error.as_deref().unwrap_or(REMOVED);
                let what = e.strip_prefix("the file ").unwrap_or(e);
                return write!(f, "{path} {what}; the running configuration stays");
            }
        };
        match (&self.applied, &self.error) {
            (Some(s), None) => write!(f, "{verb} {path}: applied {s}"),
            (_, e) => {
                let e = e.as_deref().unwrap_or("nothing was applied");
                match self.event {
                    Event::Recreated => write!(
                        f,
                        "{verb} {path}, refused, the running configuration stays: {e}"
                    ),
                    _ => write!(f, "refused {path}, the running configuration stays: {e}"),
                }
            }
        }
    }
}

impl Reloader {
    /// How often [`Reloader::poll`] looks at the file.
    pub const EVERY: Duration = Duration::from_millis(100);

    /// How long a new version must stay unchanged before it is applied: longer than the
    /// pauses between the writes of one save (an editor or a script writing a file in
    /// pieces takes milliseconds), short enough that a change is live within half a
    /// second of its last write.
    pub const SETTLE: Duration = Duration::from_millis(300);

    /// Watches `path`; its current version counts as applied (and as what is running,
    /// for the check of files that lost their rules).
    pub fn new(path: &Path) -> Self {
        let seen = Version::of(path).ok();
        let running = pspat_config::read_file(path)
            .ok()
            .and_then(|t| pspat_config::parse_str(&t, Format::of_path(path), "").ok())
            .map(|c| c.summary());
        Reloader {
            adjust: None,
            allow_empty: false,
            path: path.to_path_buf(),
            seen,
            pending: None,
            gone: seen.is_none(),
            running,
            next_check: Instant::now() + Self::EVERY,
        }
    }

    /// [`Reloader::poll_at`] now.
    pub fn poll(&mut self, engine: &Engine) -> Option<Reload> {
        self.poll_at(engine, Instant::now())
    }

    /// Looks at the file (at most every [`Reloader::EVERY`] of `now`); applies a new
    /// version to `engine` once it has settled ([`Reloader::SETTLE`]), and says how that
    /// went; reports a removed file once.
    pub fn poll_at(&mut self, engine: &Engine, now: Instant) -> Option<Reload> {
        if now < self.next_check {
            return None;
        }
        self.next_check = now + Self::EVERY;
        let v = match Version::of(&self.path) {
            Ok(v) => v,
            Err(e) => {
                self.pending = None;
                self.seen = None;
                if self.gone {
                    return None;
                }
                self.gone = true;
                let error = if e.kind() == std::io::ErrorKind::NotFound {
                    REMOVED.to_owned()
                } else {
                    format!("the file cannot be looked at: {e}")
                };
                return Some(self.report(Event::Removed, None, Some(error)));
            }
        };
        if Some(v) == self.seen {
            self.pending = None;
            return None;
        }
        match self.pending {
            Some((p, since)) if p == v && now.duration_since(since) >= Self::SETTLE => {}
            Some((p, _)) if p == v => return None,
            _ => {
                self.pending = Some((v, now));
                return None;
            }
        }
        self.pending = None;
        let read = pspat_config::read_file(&self.path);
        // Written to while it was read: a version of its own, to settle.
        match Version::of(&self.path) {
            Ok(after) if after == v => {}
            Ok(after) => {
                self.pending = Some((after, now));
                return None;
            }
            Err(_) => return None,
        }
        self.seen = Some(v);
        let event = if self.gone {
            Event::Recreated
        } else {
            Event::Changed
        };
        self.gone = false;
        Some(
            match read
                .map_err(|e| e.to_string())
                .and_then(|t| self.apply(engine, &t))
            {
                Ok(s) => {
                    self.running = Some(s);
                    self.report(event, Some(s), None)
                }
                Err(e) => self.report(event, None, Some(e)),
            },
        )
    }

    /// Reads the file and applies it now, changed or not and without waiting for it to
    /// settle: the operator says it is complete (`pspat shape` and `pspat run` on SIGHUP).
    /// The same checks as a change's; says how that went.
    pub fn reload_now(&mut self, engine: &Engine) -> Reload {
        self.pending = None;
        let before = Version::of(&self.path).ok();
        let result = pspat_config::read_file(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|t| self.apply(engine, &t));
        self.seen = before;
        self.gone = before.is_none();
        match result {
            Ok(s) => {
                self.running = Some(s);
                self.report(Event::Requested, Some(s), None)
            }
            Err(e) => self.report(Event::Requested, None, Some(e)),
        }
    }

    /// Parses and checks `text`, and has the engine apply it; what it holds, or why not.
    fn apply(&self, engine: &Engine, text: &str) -> Result<Summary, String> {
        let origin = self.path.display().to_string();
        let mut c = pspat_config::parse_str(text, Format::of_path(&self.path), &origin)
            .map_err(|e| e.to_string())?;
        if !self.allow_empty {
            pspat_config::check_not_empty(&c, &origin).map_err(|e| e.to_string())?;
            let new = c.summary();
            if let Some(run) = self.running {
                if new.rules == 0 && run.rules > 0 {
                    return Err(lost(&origin, "rules", run.rules));
                }
                if new.schedulers + new.pipes == 0 && run.schedulers + run.pipes > 0 {
                    return Err(lost(
                        &origin,
                        "schedulers or pipes",
                        run.schedulers + run.pipes,
                    ));
                }
            }
        }
        if let Some(f) = &self.adjust {
            f(&mut c);
        }
        let s = c.summary();
        engine
            .reconfigure(Change::Config(Arc::new(c)))
            .map_err(|e| crate::error_chain(&e))?;
        Ok(s)
    }

    fn report(&self, event: Event, applied: Option<Summary>, error: Option<String>) -> Reload {
        Reload {
            path: self.path.clone(),
            event,
            applied,
            error,
        }
    }
}

/// Why a file without any of `what` is refused while the running configuration has `had`.
fn lost(origin: &str, what: &str, had: usize) -> String {
    format!(
        "{origin}: no {what}, where the running configuration has {had}: an emptied file is \
         taken for an accident (a reloader with allow_empty applies it)"
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{ClientConfig, EngineConfig};
    use std::time::SystemTime;

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

    /// An engine running [`RULES`] from a file in a temporary directory, its reloader, and
    /// the reloader's clock: the tests move time by hand, [`Reloader::poll_at`] is given it.
    struct Setup {
        _dir: tempfile::TempDir,
        path: PathBuf,
        base: SystemTime,
        engine: Engine,
        reloader: Reloader,
        now: Instant,
    }

    impl Setup {
        fn new() -> Setup {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rules.ipfw");
            let base = SystemTime::now();
            write(&path, RULES, base, 0);
            let mut cfg = EngineConfig::new("fifo", Vec::new(), vec![ClientConfig::default()]);
            cfg.spin_ns = 20_000;
            cfg.dummynet = Some(Arc::new(pspat_config::parse_file(&path).unwrap()));
            let (engine, _clients) = Engine::start(&cfg, Arc::new(pspat_io::null::Null)).unwrap();
            let reloader = Reloader::new(&path);
            Setup {
                _dir: dir,
                path,
                base,
                engine,
                reloader,
                now: Instant::now(),
            }
        }

        /// Moves the clock by `d` and polls.
        fn poll_after(&mut self, d: Duration) -> Option<Reload> {
            self.now += d;
            self.reloader.poll_at(&self.engine, self.now)
        }

        /// Polls every [`Reloader::EVERY`] for 10 s of the reloader's clock; the first
        /// report, if any.
        fn next_report(&mut self) -> Option<Reload> {
            for _ in 0..(10_000 / Reloader::EVERY.as_millis()) {
                if let Some(r) = self.poll_after(Reloader::EVERY) {
                    return Some(r);
                }
            }
            None
        }

        /// The running scheduler's bandwidth, as the engine reports it.
        fn bandwidth(&self) -> u64 {
            self.engine.dummynet_stats().unwrap().schedulers[0].bandwidth_bps
        }

        fn rules(&self, bw: &str) -> String {
            RULES.replace("8Mbit/s", bw)
        }
    }

    #[test]
    fn a_changed_file_is_applied_once_settled_a_broken_one_refused_and_an_unchanged_one_ignored() {
        let mut s = Setup::new();
        assert_eq!(s.bandwidth(), 8_000_000);
        // Not due yet, then due with the file as it was started with.
        assert_eq!(s.poll_after(Duration::ZERO), None);
        assert_eq!(s.next_report(), None);

        // A change is applied once it has settled, after the adjustment every
        // configuration read gets.
        s.reloader.adjust = Some(Box::new(|c: &mut pspat_config::Config| {
            for s in c.schedulers.values_mut() {
                s.bandwidth_bps *= 2;
            }
        }));
        write(&s.path, &s.rules("16Mbit/s"), s.base, 10);
        assert_eq!(s.poll_after(Reloader::EVERY), None, "first seen");
        assert_eq!(s.poll_after(Reloader::SETTLE / 2), None, "not settled yet");
        assert_eq!(s.bandwidth(), 8_000_000);
        let applied = s
            .poll_after(Reloader::SETTLE / 2)
            .expect("applied once unchanged for the settle interval");
        assert_eq!(applied.error, None, "{applied}");
        assert_eq!(applied.path, s.path);
        assert_eq!(
            applied.to_string(),
            format!(
                "reloaded {}: applied 1 schedulers, 1 flowsets, 0 pipes, 1 rules, \
                 0 tables with 0 entries, default deny",
                s.path.display()
            )
        );
        assert_eq!(s.bandwidth(), 32_000_000);

        // A file that does not parse is refused, and the running configuration stays.
        write(
            &s.path,
            &RULES.replace("type fifo", "type nosuch"),
            s.base,
            20,
        );
        let refused = s.next_report().expect("the change was seen");
        let e = refused.error.clone().expect("a broken file is refused");
        assert!(e.contains("nosuch"), "{e}");
        assert!(
            refused.to_string().starts_with(&format!(
                "refused {}, the running configuration stays: ",
                s.path.display()
            )),
            "{refused}"
        );
        assert_eq!(s.bandwidth(), 32_000_000);

        // Nothing changed since: nothing to report.
        assert_eq!(s.next_report(), None);
        s.engine.stop(false);
    }

    #[test]
    fn a_half_written_file_is_not_applied_until_its_writes_settle() {
        let mut s = Setup::new();
        // Rewritten in place in two writes with a pause between them: the first half is a
        // configuration of its own (the rule for 10.0.0.2 is still missing).
        let full = s.rules("16Mbit/s") + "add 200 queue 1 src-ip 10.0.0.2\n";
        let half = &full[..full.find("default").unwrap()];
        std::fs::write(&s.path, half).unwrap();
        assert_eq!(s.poll_after(Reloader::EVERY), None, "half written");
        assert_eq!(s.bandwidth(), 8_000_000);
        let mut f = std::fs::File::options().append(true).open(&s.path).unwrap();
        std::io::Write::write_all(&mut f, &full.as_bytes()[half.len()..]).unwrap();
        drop(f);
        let applied = s.next_report().expect("the finished file is applied");
        assert_eq!(applied.error, None, "{applied}");
        assert!(applied.to_string().contains(" 2 rules,"), "{applied}");
        assert_eq!(s.bandwidth(), 16_000_000);
        assert_eq!(s.next_report(), None, "one report per change");
        s.engine.stop(false);
    }

    #[test]
    fn a_file_that_lost_its_rules_is_refused_unless_allowed() {
        let mut s = Setup::new();
        // Emptied: nothing would pass.
        write(&s.path, "", s.base, 10);
        let r = s.next_report().expect("the change was seen");
        let e = r.error.clone().expect("an empty file is refused");
        assert!(e.contains("no rules"), "{e}");
        assert!(r.to_string().starts_with("refused "), "{r}");
        assert_eq!(s.bandwidth(), 8_000_000);

        // Rules gone, although what no rule matches would pass.
        let no_rules = "sched 1 config type fifo bw 4Mbit/s\nqueue 1 config sched 1\n\
                        default allow\n";
        write(&s.path, no_rules, s.base, 20);
        let r = s.next_report().expect("the change was seen");
        let e = r
            .error
            .clone()
            .expect("a file without its rules is refused");
        assert!(e.contains("no rules") && e.contains("allow_empty"), "{e}");
        // Schedulers and pipes gone.
        write(&s.path, "add 100 allow\n", s.base, 30);
        let r = s.next_report().expect("the change was seen");
        let e = r
            .error
            .clone()
            .expect("a file without its schedulers is refused");
        assert!(
            e.contains("no schedulers") && e.contains("allow_empty"),
            "{e}"
        );
        assert_eq!(s.bandwidth(), 8_000_000);

        // Asked for: applied.
        s.reloader.allow_empty = true;
        write(&s.path, no_rules, s.base, 40);
        let r = s.next_report().expect("the change was seen");
        assert_eq!(r.error, None, "{r}");
        assert!(r.to_string().contains(" 0 rules,"), "{r}");
        assert_eq!(s.bandwidth(), 4_000_000);
        s.engine.stop(false);
    }

    #[test]
    fn a_removed_file_is_reported_once_and_its_return_applied() {
        let mut s = Setup::new();
        std::fs::remove_file(&s.path).unwrap();
        let r = s.next_report().expect("the removal is reported");
        assert!(r.error.is_some(), "{r}");
        assert_eq!(
            r.to_string(),
            format!(
                "{} was removed; the running configuration stays",
                s.path.display()
            )
        );
        assert_eq!(s.next_report(), None, "reported once");
        assert_eq!(s.bandwidth(), 8_000_000);

        std::fs::write(&s.path, s.rules("2Mbit/s")).unwrap();
        let r = s.next_report().expect("the new file is applied");
        assert_eq!(r.error, None, "{r}");
        assert!(
            r.to_string().starts_with(&format!(
                "re-created {}: applied 1 schedulers",
                s.path.display()
            )),
            "{r}"
        );
        assert_eq!(s.bandwidth(), 2_000_000);
        assert_eq!(s.next_report(), None);
        s.engine.stop(false);
    }

    #[test]
    fn a_request_reads_the_file_now_changed_or_not() {
        let mut s = Setup::new();
        // Unchanged: applied all the same, and said so.
        let r = s.reloader.reload_now(&s.engine);
        assert_eq!(r.event, Event::Requested);
        assert_eq!(r.error, None, "{r}");
        assert!(
            r.to_string().starts_with(&format!(
                "re-read on request {}: applied 1 schedulers",
                s.path.display()
            )),
            "{r}"
        );
        // Just written (not settled): read at once; and the poll does not apply it again.
        write(&s.path, &s.rules("12Mbit/s"), s.base, 20);
        assert_eq!(s.reloader.reload_now(&s.engine).error, None);
        assert_eq!(s.bandwidth(), 12_000_000);
        assert_eq!(s.next_report(), None);
        // Broken: refused, the running configuration stays.
        write(&s.path, "sched 1 config type nope\n", s.base, 30);
        let r = s.reloader.reload_now(&s.engine);
        assert!(r.error.is_some(), "{r}");
        assert!(r.to_string().starts_with("refused "), "{r}");
        assert_eq!(s.bandwidth(), 12_000_000);
        s.engine.stop(false);
    }

    #[test]
    fn a_file_renamed_into_place_is_applied() {
        let mut s = Setup::new();
        let tmp = s.path.with_extension("ipfw.new");
        // Same size and modification time as the file it replaces: only its inode tells.
        write(&tmp, &s.rules("9Mbit/s"), s.base, 0);
        std::fs::rename(&tmp, &s.path).unwrap();
        let r = s.next_report().expect("the new file is applied");
        assert_eq!(r.error, None, "{r}");
        assert_eq!(s.bandwidth(), 9_000_000);
        assert_eq!(s.next_report(), None);
        s.engine.stop(false);
    }
}
