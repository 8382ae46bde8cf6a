//! `PPC64EMU_LOG=perfmap`: names every baseline block's code for `perf` in the host's JIT
//! symbol file (`/tmp/perf-<pid>.map`), one symbol per section — `bl.guard.<pc>` (where
//! jumps from other pages enter), `bl.entry.<pc>` (the promotion counter and stop checks),
//! `bl.body.<pc>`, `bl.exit.<pc>` (the shared probe exit) and `bl.cold.<pc>` (slow paths),
//! and the shared code (`bl.stubs`, the probe exits `bl.probe.<msr>` and
//! `bl.unlinked.<msr>`, the guards' `bl.guard-test.<msr>`) — so that a profile says which
//! part of translated code the time goes to, not only that it is there.

use super::emit::Emitted;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::Write;

/// The open symbol file (appended to: Cranelift's JIT module writes its own lines there).
pub struct PerfMap(Mutex<File>);

impl PerfMap {
    /// The writer when `PPC64EMU_LOG` names `perfmap` and the file opens.
    pub fn from_env() -> Option<Self> {
        let on = std::env::var("PPC64EMU_LOG").is_ok_and(|v| v.split(',').any(|w| w == "perfmap"));
        if !on {
            return None;
        }
        let path = format!("/tmp/perf-{}.map", std::process::id());
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => Some(PerfMap(Mutex::new(f))),
            Err(e) => {
                eprintln!("ppc64emu: PPC64EMU_LOG=perfmap: cannot open {path}: {e}");
                None
            }
        }
    }

    /// One symbol: shared code (`bl.stubs`, `bl.probe.<msr>`, `bl.unlinked.<msr>`,
    /// `bl.guard-test.<msr>`).
    pub fn named(&self, at: usize, len: usize, name: &str) {
        let _ = writeln!(self.0.lock(), "{at:x} {len:x} {name}");
    }

    /// The symbols of the block whose hot code starts at `hot` and whose out-of-line code
    /// at `cold`, translated from guest `pc`.
    pub fn block(&self, hot: usize, cold: usize, pc: u64, e: &Emitted) {
        let ([body, probe], out) = (e.sections, e.split);
        let (entry, end) = (e.entry, e.code.len() as u32);
        let mut s = String::with_capacity(200);
        for (name, from, to) in [
            ("guard", 0, entry),
            ("entry", entry, body),
            ("body", body, probe),
            ("exit", probe, out),
            ("cold", out, end),
        ] {
            if to > from {
                s.push_str(&format!(
                    "{:x} {:x} bl.{name}.{pc:x}\n",
                    e.address(from, hot, cold),
                    to - from
                ));
            }
        }
        // One write per block: lines stay whole beside the other writer's.
        let _ = self.0.lock().write_all(s.as_bytes());
    }
}
