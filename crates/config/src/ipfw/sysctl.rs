//! `sysctl NAME=VALUE` lines: the kernel settings dummynet scripts set beside their ipfw
//! commands (pfSense raises `net.inet.ip.dummynet.pipe_slot_limit` before loading its
//! limiters; emulation scripts set `net.inet.ip.fw.one_pass`).
//!
//! - `net.inet.ip.fw.one_pass=1` (a packet sent to a pipe or queue leaves the rules there,
//!   ipfw's default) and `=0` (a packet leaving a pipe goes on at the next rule, so that
//!   pipes chain: `Config::one_pass`, carried out by the classifier and the engine).
//! - dummynet's sizing and tuning knobs (`net.inet.ip.dummynet.*`: `pipe_slot_limit`,
//!   `pipe_byte_limit`, `hash_size`, `expire`, `io_fast`, the `red_*` lookup sizes, ...)
//!   bound or tune what pspat does not bound that way (its queue limits have no slot cap,
//!   its tables grow): accepted, changing nothing.
//! - anything else is refused naming the setting.

use super::parser::{Cursor, R};
use crate::resolve::Draft;

/// A `sysctl` line after its command word: `[-w] NAME=VALUE`.
pub(super) fn sysctl(c: &mut Cursor<'_, '_>, d: &mut Draft) -> R<()> {
    if c.peek_is("-w") {
        c.pos += 1;
    }
    let t = c.word("a setting NAME=VALUE")?;
    let Some((name, value)) = t.text.split_once('=') else {
        return Err(c.err_at(t, "expected a setting NAME=VALUE"));
    };
    c.end()?;
    match name {
        "net.inet.ip.fw.one_pass" => match value {
            "1" | "0" => {
                d.one_pass = Some(value == "1");
                Ok(())
            }
            _ => Err(c.err_at(t, "net.inet.ip.fw.one_pass is 0 or 1")),
        },
        n if n.starts_with("net.inet.ip.dummynet.") => Ok(()),
        _ => Err(c.err_at(
            t,
            format!("`{name}` is not a dummynet setting pspat reads (it reads net.inet.ip.fw.one_pass and net.inet.ip.dummynet.*)"),
        )),
    }
}
