//! The signals `pspat shape` and `pspat run` obey, as a daemon's user expects: SIGINT and
//! SIGTERM stop them cleanly (the final account is printed; a second one while they stop
//! ends the process at once, status 1), SIGHUP re-reads the configuration file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Flags the handlers set; the command's loop polls them.
pub struct Signals {
    stop: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers (more than once in a process is fine: each call has flags of
    /// its own).
    pub fn install() -> Result<Signals> {
        let stop = Arc::new(AtomicBool::new(false));
        let hup = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // First the exit on a second signal (it looks at the flag before the second
            // handler sets it), then the flag itself.
            signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))
                .context("installing the signal handlers")?;
            signal_hook::flag::register(sig, Arc::clone(&stop))
                .context("installing the signal handlers")?;
        }
        signal_hook::flag::register(SIGHUP, Arc::clone(&hup))
            .context("installing the signal handlers")?;
        Ok(Signals { stop, hup })
    }

    /// SIGINT or SIGTERM arrived.
    pub fn stop_requested(&self) -> bool {
        // ORDERING: Relaxed: the flag publishes nothing else (signal-hook's handler stores
        // it with SeqCst; any ordering reads it).
        self.stop.load(Ordering::Relaxed)
    }

    /// SIGHUP arrived since the last call.
    pub fn take_hup(&self) -> bool {
        // ORDERING: Relaxed: as above; swap so that each SIGHUP is acted on once.
        self.hup.swap(false, Ordering::Relaxed)
    }
}
