//! The vCPU as every tier sees it: architected state, its memory (soft MMU), the timebase
//! and what one instruction leaves for the execution loop; and stepping one instruction
//! through the interpreter's dispatch table.

use crate::cpu::{CpuState, Exception};
use crate::interp::{DISPATCH, Exec};
use crate::isa::{Insn, Op, decode};
use crate::softmmu::{AddressSpace, SoftMmu};
use std::sync::Arc;

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
        Self {
            start: std::time::Instant::now(),
        }
    }
}

/// Timebase ticks (512 MHz) of `ns` nanoseconds.
#[inline]
pub fn ns_to_tb(ns: u64) -> u64 {
    ns.wrapping_mul(HostTimeBase::HZ / 1_000_000) / 1000
}

/// Nanoseconds of `tb` timebase ticks.
#[inline]
pub fn tb_to_ns(tb: u64) -> u64 {
    (tb as u128 * 1000 / (HostTimeBase::HZ / 1_000_000) as u128) as u64
}

impl Default for HostTimeBase {
    fn default() -> Self {
        Self::new()
    }
}

impl HostTimeBase {
    /// When the timebase was 0.
    pub fn start(&self) -> std::time::Instant {
        self.start
    }
}

impl TimeBase for HostTimeBase {
    fn now(&self) -> u64 {
        ns_to_tb(self.start.elapsed().as_nanos() as u64)
    }
}

/// The timebase on virtual host time: the reading vCPU's clock, monotonic across vCPUs
/// (sync/vclock.rs).
pub struct VirtualTimeBase(pub Arc<crate::sync::vclock::VirtualTime>);

impl TimeBase for VirtualTimeBase {
    fn now(&self) -> u64 {
        ns_to_tb(self.0.tb_ns())
    }
}

/// Execution counters of one vCPU (shown in run reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecCounters {
    pub instructions: u64,
    /// Trace interrupts taken by [`Cpu::step_traced`] (the machine moves them into its
    /// per-vector interrupt counts).
    pub trace_interrupts: u64,
}

/// A vCPU as the interpreter sees it: architected state, memory, and the address of the next
/// instruction while one executes.
pub struct Cpu {
    pub st: CpuState,
    pub mmu: SoftMmu,
    /// Next instruction address; branches overwrite it.
    pub nia: u64,
    pub timebase: Arc<dyn TimeBase>,
    /// A local TLB flush is pending (`tlbiel`, `slbie`, `slbia`), performed at the next
    /// context-synchronising event (`isync`, `ptesync`, interrupt, `rfid`).
    pub tlb_flush_pending: bool,
    /// Events for the execution loop (`system::events`), cleared by whoever handles them.
    pub events: u32,
    pub counters: ExecCounters,
}

impl Cpu {
    pub fn new(space: Box<dyn AddressSpace>) -> Self {
        Self {
            st: CpuState::new(),
            mmu: SoftMmu::new(space),
            nia: 0,
            timebase: Arc::new(HostTimeBase::new()),
            tlb_flush_pending: false,
            events: 0,
            counters: ExecCounters::default(),
        }
    }

    /// Executes one instruction at `st.pc`. On an exception the state is as before the
    /// instruction (for `sc`, `pc` already points past it).
    #[inline]
    pub fn step(&mut self) -> Exec {
        self.step_op().map(|_| ())
    }

    /// [`Cpu::step`], returning the op executed.
    #[inline]
    pub fn step_op(&mut self) -> Result<Op, Exception> {
        let pc = self.st.pc;
        let word = self.mmu.fetch(&self.st, pc)?;
        self.nia = self.mask_ea(pc.wrapping_add(4));
        let op = decode(word);
        match DISPATCH[op as usize](self, Insn(word)) {
            Ok(()) => {}
            Err(e @ Exception::SystemCall { .. }) => {
                self.st.pc = self.nia;
                self.counters.instructions += 1;
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        self.st.pc = self.nia;
        self.counters.instructions += 1;
        Ok(op)
    }

    /// Executes the instruction `word` as if fetched from `st.pc` (`nia` must be set).
    #[inline]
    pub fn execute(&mut self, word: u32) -> Exec {
        DISPATCH[decode(word) as usize](self, Insn(word))
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
