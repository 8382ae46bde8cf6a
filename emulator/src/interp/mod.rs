//! The reference interpreter: one function per instruction, grouped by family, dispatched
//! through a table built from the ISA table by name (`for_each_insn!`). The JIT is tested
//! against it and calls into it for instructions it does not translate.

mod branch;
mod fixed;
mod fp;
mod loadstore;
mod system;
mod system_step;
mod vector;

pub use system::{MSR_IMPLEMENTED, events};
pub use system_step::StepOutcome;
pub(crate) use fixed::mask64;
pub(crate) use loadstore::CACHE_BLOCK;

use crate::cpu::{CpuState, Exception, ProgramKind};
use crate::isa::{Insn, OP_COUNT, Op, decode};
use crate::softmmu::{AddressSpace, SoftMmu};

/// Result of executing one instruction.
pub type Exec = Result<(), Exception>;

/// Semantics of one instruction.
pub type ExecFn = fn(&mut Cpu, Insn) -> Exec;

/// Timebase source (`mftb`); the system emulator shares one across vCPUs.
pub trait TimeBase: Send + Sync {
    fn now(&self) -> u64;
}

/// 512 MHz timebase from the host's monotonic clock, as on POWER8 pseries.
pub struct HostTimeBase {
    start: std::time::Instant,
}

impl HostTimeBase {
    pub const HZ: u64 = 512_000_000;
    pub fn new() -> Self {
        Self { start: std::time::Instant::now() }
    }
}

impl Default for HostTimeBase {
    fn default() -> Self {
        Self::new()
    }
}

impl TimeBase for HostTimeBase {
    fn now(&self) -> u64 {
        let ns = self.start.elapsed().as_nanos() as u64;
        ns.wrapping_mul(Self::HZ / 1_000_000) / 1000
    }
}

/// Execution counters of one vCPU (shown in run reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecCounters {
    pub instructions: u64,
}

/// A vCPU as the interpreter sees it: architected state, memory, and the address of the next
/// instruction while one executes.
pub struct Cpu {
    pub st: CpuState,
    pub mmu: SoftMmu,
    /// Next instruction address; branches overwrite it.
    pub nia: u64,
    pub timebase: std::sync::Arc<dyn TimeBase>,
    /// A local TLB flush is pending (`tlbiel`, `slbie`, `slbia`), performed at the next
    /// context-synchronising event (`isync`, `ptesync`, interrupt, `rfid`).
    pub tlb_flush_pending: bool,
    /// Events for the execution loop (`system::events`), cleared by whoever handles them.
    pub events: u32,
    pub counters: ExecCounters,
}

macro_rules! build_dispatch {
    ($(($op:ident, $func:ident, $mnemonic:literal)),* $(,)?) => {
        /// Interpreter entry for each `Op`, indexed by `op as usize`.
        pub static DISPATCH: [ExecFn; OP_COUNT] = {


            use branch::*;
            use fixed::*;
            use fp::*;
            use loadstore::*;
            use system::*;
            use vector::*;

            [illegal, $($func),*]
        };
    };
}
crate::isa::for_each_insn!(build_dispatch);

fn illegal(_: &mut Cpu, _: Insn) -> Exec {
    Err(Exception::Program(ProgramKind::Illegal))
}

impl Cpu {
    pub fn new(space: Box<dyn AddressSpace>) -> Self {
        Self {
            st: CpuState::new(),
            mmu: SoftMmu::new(space),
            nia: 0,
            timebase: std::sync::Arc::new(HostTimeBase::new()),
            tlb_flush_pending: false,
            events: 0,
            counters: ExecCounters::default(),
        }
    }

    /// Executes one instruction at `st.pc`. On an exception the state is as before the
    /// instruction (for `sc`, `pc` already points past it).
    #[inline]
    pub fn step(&mut self) -> Exec {
        let pc = self.st.pc;
        let word = self.mmu.fetch(&self.st, pc)?;
        self.nia = self.mask_ea(pc.wrapping_add(4));
        let r = self.execute(word);
        match r {
            Ok(()) => {
                self.st.pc = self.nia;
                self.counters.instructions += 1;
                Ok(())
            }
            Err(e @ Exception::SystemCall { .. }) => {
                self.st.pc = self.nia;
                self.counters.instructions += 1;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Executes the instruction `word` as if fetched from `st.pc` (`nia` must be set).
    #[inline]
    pub fn execute(&mut self, word: u32) -> Exec {
        DISPATCH[decode(word) as usize](self, Insn(word))
    }

    /// Runs until an exception or until `max` instructions have executed.
    pub fn run(&mut self, max: u64) -> Exec {
        for _ in 0..max {
            self.step()?;
        }
        Ok(())
    }

    /// Effective addresses are 32-bit in 32-bit mode (MSR[SF] = 0).
    #[inline(always)]
    pub fn mask_ea(&self, ea: u64) -> u64 {
        if self.st.sf() { ea } else { ea & 0xffff_ffff }
    }

    /// GPR `ra`, or 0 when `ra` is 0 (the `(RA|0)` of the ISA).
    #[inline(always)]
    pub fn ra0(&self, ra: u32) -> u64 {
        if ra == 0 { 0 } else { self.st.gpr[ra as usize] }
    }

    /// The op an instruction word decodes to (for tools and tests).
    pub fn decode(word: u32) -> Op {
        decode(word)
    }
}

/// Sets CR0 from a result as a recording (`.`) instruction does: LT/GT/EQ from the value as
/// a signed number of the current mode's width, SO copied from XER.
#[inline(always)]
pub(crate) fn record_cr0(st: &mut CpuState, v: u64) {
    let v = if st.sf() { v as i64 } else { v as i32 as i64 };
    let c = if v < 0 { 8 } else if v > 0 { 4 } else { 2 };
    st.cr = (st.cr & 0x0fff_ffff) | ((c | st.so as u32) << 28);
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;
    use crate::softmmu::FlatRam;

    /// A CPU over 1 MiB of flat RAM, little-endian, with FP/VMX/VSX enabled (user-mode MSR).
    pub fn cpu() -> Cpu {
        let mut c = Cpu::new(Box::new(FlatRam::new(1 << 20)));
        use crate::cpu::msr;
        c.st.msr = msr::SF | msr::LE | msr::PR | msr::FP | msr::VEC | msr::VSX | msr::EE;
        c
    }

    /// Runs `words` (placed at 0x1000) to the end, panicking on any exception.
    pub fn run(c: &mut Cpu, words: &[u32]) {
        let le = c.st.le();
        for (k, w) in words.iter().enumerate() {
            c.mmu.store(&c.st, 0x1000 + 4 * k as u64, 4, *w as u64, le).unwrap();
        }
        c.st.pc = 0x1000;
        let end = 0x1000 + 4 * words.len() as u64;
        while c.st.pc != end {
            c.step().unwrap_or_else(|e| panic!("exception {e:?} at {:#x}", c.st.pc));
        }
    }
}
