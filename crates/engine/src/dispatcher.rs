//! Dispatchers: threads that drain a TX mailbox into the backend (PSPAT section 3.3).
//!
//! Each dispatcher owns one TX mailbox (the arbiter is its producer) and one backend
//! sender. It sends in batches; with nothing to send it spins T_w, then announces a sleep,
//! looks again, and blocks until the arbiter wakes it (see [`crate::wake`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pspat_io::Pkt;
use pspat_mailbox::Consumer;

use crate::clock;
use crate::shared::Shared;
use crate::tx::Transmitter;

/// One dispatcher's loop. Returns the last send error, if any.
pub(crate) fn run(
    index: usize,
    mut rx: Consumer<Pkt>,
    mut tx: Transmitter,
    shared: Arc<Shared>,
    spin_ns: u64,
    arbiter_done: Arc<AtomicBool>,
) -> Option<String> {
    let parker = &shared.dispatchers[index].0;
    parker.register_current();
    let mut idle_since: Option<u64> = None;
    loop {
        let mut n = 0;
        while let Some(p) = rx.pop() {
            tx.push(p);
            n += 1;
        }
        tx.flush();
        if n > 0 {
            idle_since = None;
            continue;
        }
        // ORDERING: Acquire pairs with the Release store after the arbiter thread joined:
        // every packet it pushed is visible to the pop below.
        if arbiter_done.load(Ordering::Acquire) {
            while let Some(p) = rx.pop() {
                tx.push(p);
            }
            break;
        }
        let now = clock::now_ns();
        let since = *idle_since.get_or_insert(now);
        if now - since < spin_ns {
            std::hint::spin_loop();
            continue;
        }
        parker.prepare();
        if rx.has_message() || arbiter_done.load(Ordering::Acquire) {
            parker.cancel();
        } else {
            parker.sleep(Some(Duration::from_millis(200)));
        }
        idle_since = None;
    }
    tx.finish();
    tx.last_error.take()
}
