//! What the machine's threads share: the state every vCPU reaches without the BQL, and how a
//! run ends. Its own module so that `boot` (which makes it) and `vcpu` (which reads it) do
//! not import each other.

use super::MachineExit;
use super::config::TlbFlushMode;
use super::effects::CodeWatch;
use crate::accel::timers::Timers;
use crate::engine::TimeBase;
use crate::mmu::hpt::Hpt;
use crate::softmmu::GuestRam;
use crate::sync::StatMutex;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, OnceLock};

/// The debugging logs `PPC64EMU_LOG` asks for (comma-separated words), read once per run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogFlags {
    /// `int`: every synchronous interrupt with its instruction.
    pub interrupts: bool,
    /// `jit`: each translated block with its disassembly.
    pub jit: bool,
}

impl LogFlags {
    pub fn from_env() -> Self {
        Self::parse(&std::env::var("PPC64EMU_LOG").unwrap_or_default())
    }

    fn parse(words: &str) -> Self {
        let has = |w: &str| words.split(',').any(|x| x == w);
        Self {
            interrupts: has("int"),
            jit: has("jit"),
        }
    }
}

/// Machine-wide state every vCPU thread reaches without the BQL.
pub struct Shared {
    /// Guest RAM as the vCPUs' MMUs reach it.
    pub ram: Arc<GuestRam>,
    /// The same RAM as the machine (hypercalls, RTAS, the VPA) writes it: the one place that
    /// tells the JIT of code the machine overwrites.
    pub phys: CodeWatch<Arc<GuestRam>>,
    pub hpt: Arc<Hpt>,
    pub timebase: Arc<dyn TimeBase>,
    pub timers: Timers,
    /// The TLB lock of each vCPU: taken by the owner to flush, and by whoever else writes it.
    pub tlb_locks: Vec<StatMutex<()>>,
    pub flush_mode: TlbFlushMode,
    pub flush_coalesce: bool,
    /// `PPC64EMU_LOG=int`: log every synchronous interrupt with its instruction (debugging).
    pub log_interrupts: bool,
    pub(super) end: RunEnd,
}

/// How the run ends: the first exit asked for (by a device, a checkstop or the timeout) is
/// the run's, and asking wakes the run loop.
pub(super) struct RunEnd {
    exit: OnceLock<MachineExit>,
    wake: Sender<()>,
}

impl RunEnd {
    pub(super) fn new() -> (Self, Receiver<()>) {
        let (wake, woken) = std::sync::mpsc::channel();
        let end = Self {
            exit: OnceLock::new(),
            wake,
        };
        (end, woken)
    }

    /// Ends the run with `exit` unless it already has an exit.
    pub(super) fn finish(&self, exit: MachineExit) {
        let _ = self.exit.set(exit);
        let _ = self.wake.send(());
    }

    /// The exit of the run; a run that nothing ended timed out.
    pub(super) fn exit(&self) -> MachineExit {
        self.exit.get().cloned().unwrap_or(MachineExit::Timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_words() {
        assert_eq!(LogFlags::parse(""), LogFlags::default());
        let both = LogFlags {
            interrupts: true,
            jit: true,
        };
        assert_eq!(LogFlags::parse("jit,int"), both);
        assert!(LogFlags::parse("perfmap,jit").jit);
        assert!(
            !LogFlags::parse("interrupts").interrupts,
            "whole words only"
        );
    }
}
