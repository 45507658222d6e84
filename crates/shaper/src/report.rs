//! The final account ([`Report`]): every frame taken from the rings is sent, dropped with
//! a reason, refused for lack of room, or still queued; `unaccounted` is what is none of
//! these and must be 0. As text (`Display`, what `pspat shape` prints) and as JSON
//! ([`Report::to_json`], what `pspat shape --json` writes).

use std::fmt;
use std::time::Duration;

use pspat_engine::stats::{ArbiterDrop, Filtered};
use serde_json::json;

use crate::config::ShaperConfig;
use crate::counters::{EngineTotals, ReverseTotals, RxTotals};
use crate::link::LinkTotals;
use crate::shaper::ChecksumOffload;

/// What [`crate::Shaper::stop`] returns: everything the final account needs.
#[derive(Clone, Debug)]
pub struct Report {
    /// What the shaper ran with (interfaces, configuration file, threads, CPUs, hand-off).
    pub config: ShaperConfig,
    /// From the start of shaping until everything had stopped.
    pub elapsed: Duration,
    /// Stopped by a signal rather than at the planned end: [`crate::Shaper::stop`] cannot
    /// tell, so whoever stopped it sets this (the text then says `(interrupted)`).
    pub interrupted: bool,
    /// How checksums crossed the shaper.
    pub checksums: ChecksumOffload,
    /// The receiving threads' counters.
    pub rx: RxTotals,
    /// The engine's counters when shaping started (for the rates).
    pub engine_start: EngineTotals,
    /// The engine's counters when everything had stopped.
    pub engine: EngineTotals,
    /// Frames still in the schedulers at the stop.
    pub queued: u64,
    /// Submitted frames the arbiter had not taken yet when it stopped.
    pub in_mailboxes: u64,
    /// The reverse path's counters.
    pub reverse: ReverseTotals,
    /// What went wrong in the threads (receiving, sending, the reverse path).
    pub errors: Vec<String>,
    /// Per scheduler, instance and queue, just before the engine stopped.
    pub dummynet: Option<pspat_engine::DummynetStats>,
    /// The input's and the output's faults (each seen by the threads using it).
    pub links: Vec<LinkTotals>,
}

/// `(b - a) / secs`; 0 for an empty interval.
pub(crate) fn rate(a: u64, b: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    b.saturating_sub(a) as f64 / secs
}

/// Every drop counter that is not zero, by name (`drops: none` if none is).
pub(crate) fn drop_line(e: &EngineTotals, r: &RxTotals) -> String {
    let mut parts = Vec::new();
    for f in Filtered::ALL {
        if e.filtered[f.slot()] > 0 {
            parts.push(format!("{} {}", f.name(), e.filtered[f.slot()]));
        }
    }
    for d in ArbiterDrop::all() {
        if e.dropped[d.slot()] > 0 {
            parts.push(format!("{} {}", d.name(), e.dropped[d.slot()]));
        }
    }
    for (n, v) in [
        ("mailbox_full", e.mailbox_full),
        ("pool_full", r.pool_full),
        ("too_long", r.too_long),
        ("truncated", r.truncated),
        ("runt", r.runt),
        ("ring_overrun", r.ring_drops),
        ("send_failed", e.send_failed),
        ("stopping", r.stopped),
    ] {
        if v > 0 {
            parts.push(format!("{n} {v}"));
        }
    }
    if parts.is_empty() {
        "drops: none".into()
    } else {
        format!("drops: {}", parts.join(", "))
    }
}

impl Report {
    /// Frames taken from the rings that are neither sent, dropped with a reason, nor
    /// queued: 0 unless the engine has a leak (client hand-off: frames cleared but not
    /// yet transmitted when the engine stopped would land here).
    pub fn unaccounted(&self) -> i64 {
        let (r, e) = (&self.rx, &self.engine);
        let dropped: u64 = e.dropped.iter().sum::<u64>() + e.filtered.iter().sum::<u64>();
        r.frames as i64
            - (e.sent
                + e.send_failed
                + dropped
                + e.mailbox_full
                + r.pool_full
                + r.too_long
                + r.truncated
                + r.runt
                + r.stopped
                + self.queued
                + self.in_mailboxes) as i64
    }

    /// What lost frames the shaper was to carry, one line each: the threads' errors, the
    /// frames the output refused (`send_failed`) or the reverse path could not pass, and
    /// any frame unaccounted. Empty when every frame was sent, dropped with a reason (a
    /// rule, a queue limit, overload) or left queued: `pspat shape` then exits 0.
    pub fn faults(&self) -> Vec<String> {
        let mut f = self.errors.clone();
        if self.engine.send_failed > 0 {
            f.push(format!(
                "the output refused {} frames (send_failed)",
                self.engine.send_failed
            ));
        }
        if self.reverse.failed > 0 {
            f.push(format!(
                "the reverse path could not pass {} frames",
                self.reverse.failed
            ));
        }
        if self.unaccounted() != 0 {
            f.push(format!("{} frames unaccounted", self.unaccounted()));
        }
        f
    }

    /// The report as `pspat shape --json` writes it. (Keys come out sorted: serde_json's
    /// map without its `preserve_order` feature.)
    pub fn to_json(&self) -> serde_json::Value {
        let (e, e0, rx) = (&self.engine, &self.engine_start, &self.rx);
        let secs = self.elapsed.as_secs_f64();
        let mut drops = serde_json::Map::new();
        for f in Filtered::ALL {
            drops.insert(f.name().into(), json!(e.filtered[f.slot()]));
        }
        for d in ArbiterDrop::all() {
            drops.insert(d.name(), json!(e.dropped[d.slot()]));
        }
        drops.insert("mailbox_full".into(), json!(e.mailbox_full));
        drops.insert("pool_full".into(), json!(rx.pool_full));
        drops.insert("too_long".into(), json!(rx.too_long));
        drops.insert("truncated".into(), json!(rx.truncated));
        drops.insert("runt".into(), json!(rx.runt));
        drops.insert("ring_overrun".into(), json!(rx.ring_drops));
        drops.insert("send_failed".into(), json!(e.send_failed));
        drops.insert("stopping".into(), json!(rx.stopped));
        let c = &self.config;
        json!({
            "input": c.input,
            "output": c.output,
            "config": c.config.display().to_string(),
            "rx_threads": c.rx_threads,
            "rx_cpus": c.rx_cpus,
            "arbiter_cpu": c.arbiter_cpu,
            "handoff": c.handoff.to_string(),
            "seconds": secs,
            "interrupted": self.interrupted,
            "rx_frames": rx.frames,
            "rx_bytes": rx.bytes,
            "checksum_offload": self.checksums.key(),
            "checksums_completed": rx.csum_completed,
            "checksums_passed_partial": rx.csum_passed,
            "submitted": e.submitted,
            "sent": e.sent,
            "sent_bytes": e.sent_bytes,
            "tx_pps": rate(e0.sent, e.sent, secs),
            "tx_bps": rate(e0.sent_bytes, e.sent_bytes, secs) * 8.0,
            "queued_at_stop": self.queued,
            "in_mailboxes_at_stop": self.in_mailboxes,
            "drops": drops,
            "unaccounted": self.unaccounted(),
            "reverse_frames": self.reverse.frames,
            "reverse_failed": self.reverse.failed,
            "errors": self.errors,
            "links": self.links.iter().map(|l| json!({
                "role": l.role,
                "name": l.name,
                "downs": l.downs,
                "ups": l.ups,
                "reopens": l.reopens,
                "down_at_stop_s": l.down_for.map(|d| d.as_secs_f64()),
            })).collect::<Vec<_>>(),
            "dummynet": self.dummynet.as_ref().map(|d| serde_json::to_value(d).unwrap_or_default()),
        })
    }
}

impl fmt::Display for Report {
    /// The account `pspat shape` prints when it stops: totals, drops by reason, the
    /// reverse path, any unaccounted frames, the per-queue table, errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (e, c) = (&self.engine, &self.config);
        let secs = self.elapsed.as_secs_f64();
        write!(
            f,
            "pspat shape: {} -> {} for {:.1}s{}\n\
             received {} frames ({} bytes); sent {} ({} bytes, {:.1} Mbit/s); \
             still queued {} (+{} in mailboxes)\n{}\n\
             reverse path: {} frames passed, {} failed",
            c.input,
            c.output,
            secs,
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            },
            self.rx.frames,
            self.rx.bytes,
            e.sent,
            e.sent_bytes,
            rate(0, e.sent_bytes, secs) * 8e-6,
            self.queued,
            self.in_mailboxes,
            drop_line(e, &self.rx),
            self.reverse.frames,
            self.reverse.failed,
        )?;
        for l in self.links.iter().filter(|l| l.downs > 0) {
            write!(f, "\nlink: {}", l.line())?;
        }
        let u = self.unaccounted();
        if u != 0 {
            write!(f, "\n{u} frame(s) unaccounted for")?;
        }
        if let Some(d) = &self.dummynet {
            write!(f, "\n{d}")?;
        }
        for err in &self.errors {
            write!(f, "\nerror: {err}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pspat_engine::Handoff;

    fn report() -> Report {
        let mut engine = EngineTotals {
            submitted: 90,
            mailbox_full: 1,
            sent: 80,
            sent_bytes: 80_000,
            send_failed: 2,
            ..EngineTotals::default()
        };
        engine.filtered[Filtered::ALL[0].slot()] = 3;
        let mut config = ShaperConfig::new("s1", "r1", "/x/shaper.ipfw");
        config.rx_cpus = vec![1];
        config.handoff = Handoff::Dispatchers(2);
        Report {
            config,
            elapsed: Duration::from_millis(2000),
            interrupted: true,
            checksums: ChecksumOffload::PassedThrough,
            rx: RxTotals {
                frames: 100,
                bytes: 100_000,
                pool_full: 4,
                csum_passed: 7,
                ..RxTotals::default()
            },
            engine_start: EngineTotals {
                sent: 10,
                sent_bytes: 10_000,
                ..EngineTotals::default()
            },
            engine,
            queued: 5,
            in_mailboxes: 1,
            reverse: ReverseTotals {
                frames: 6,
                failed: 0,
            },
            errors: vec!["receiving: boom".into()],
            dummynet: None,
            links: Vec::new(),
        }
    }

    #[test]
    fn the_account_adds_up_and_reads_as_documented() {
        let r = report();
        // 100 received = 80 sent + 2 failed + 3 filtered + 1 mailbox + 4 pool + 5 queued
        // + 1 in mailboxes + 4 missing.
        assert_eq!(r.unaccounted(), 4);
        let filtered = Filtered::ALL[0].name();
        assert_eq!(
            r.to_string(),
            format!(
                "pspat shape: s1 -> r1 for 2.0s (interrupted)\n\
                 received 100 frames (100000 bytes); sent 80 (80000 bytes, 0.3 Mbit/s); \
                 still queued 5 (+1 in mailboxes)\n\
                 drops: {filtered} 3, mailbox_full 1, pool_full 4, send_failed 2\n\
                 reverse path: 6 frames passed, 0 failed\n\
                 4 frame(s) unaccounted for\n\
                 error: receiving: boom"
            )
        );
    }

    #[test]
    fn faults_are_what_lost_frames_and_nothing_else() {
        let mut r = report();
        assert_eq!(
            r.faults(),
            [
                "receiving: boom",
                "the output refused 2 frames (send_failed)",
                "4 frames unaccounted"
            ]
        );
        r.reverse.failed = 3;
        assert_eq!(r.faults()[2], "the reverse path could not pass 3 frames");
        // Drops with a reason (rules, full mailboxes and pools), queued frames: no fault.
        r.errors.clear();
        r.engine.send_failed = 0;
        r.reverse.failed = 0;
        r.rx.frames -= 6;
        assert_eq!(r.unaccounted(), 0);
        assert!(r.faults().is_empty(), "{:?}", r.faults());
    }

    #[test]
    fn the_json_has_every_key_in_order() {
        let r = report();
        let j = r.to_json();
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "arbiter_cpu",
                "checksum_offload",
                "checksums_completed",
                "checksums_passed_partial",
                "config",
                "drops",
                "dummynet",
                "errors",
                "handoff",
                "in_mailboxes_at_stop",
                "input",
                "interrupted",
                "links",
                "output",
                "queued_at_stop",
                "reverse_failed",
                "reverse_frames",
                "rx_bytes",
                "rx_cpus",
                "rx_frames",
                "rx_threads",
                "seconds",
                "sent",
                "sent_bytes",
                "submitted",
                "tx_bps",
                "tx_pps",
                "unaccounted",
            ]
        );
        assert_eq!(j["handoff"], "dispatchers:2");
        assert_eq!(j["config"], "/x/shaper.ipfw");
        assert_eq!(j["rx_cpus"], json!([1]));
        assert_eq!(j["arbiter_cpu"], serde_json::Value::Null);
        assert_eq!(j["checksum_offload"], "passed_through");
        assert_eq!(j["checksums_passed_partial"], 7);
        assert_eq!(j["interrupted"], true);
        assert_eq!(j["seconds"], 2.0);
        // Rates over the run: 70 frames, 70 000 bytes in 2 s.
        assert_eq!(j["tx_pps"], 35.0);
        assert_eq!(j["tx_bps"], 280_000.0);
        assert_eq!(j["unaccounted"], 4);
        assert_eq!(j["dummynet"], serde_json::Value::Null);
        let drops = j["drops"].as_object().unwrap();
        assert_eq!(drops[Filtered::ALL[0].name()], 3);
        assert_eq!(drops["pool_full"], 4);
        assert_eq!(drops["stopping"], 0);
        assert_eq!(
            drops.len(),
            Filtered::COUNT + ArbiterDrop::COUNT + 8,
            "{drops:?}"
        );
    }
}
