//! The vCPU as every tier sees it: architected state, its memory (soft MMU), the timebase
//! and what one instruction leaves for the run loop. It sits below the tiers (`interp`,
//! `jit`) and the engine that runs them, so that each of those only points down: the
//! interpreter adds stepping ([`Cpu::step`], in `interp/step.rs`), the engine the run loop.
//!
//! Also here, because every tier follows them: where a block ends ([`block::ends_after`]),
//! when guest code returns to the run loop ([`exit`]) and what `sc 1` does
//! ([`hypercall_rule`]).

mod block;
pub mod exit;
mod hypercall;
mod timebase;

pub use block::{
    DecodedBlock, MAX_BLOCK_INSNS, ends_after, forward_jump, forward_target_index,
    never_falls_through, side_exit,
};
pub use hypercall::{SystemExit, hypercall_rule};
pub use timebase::{HostTimeBase, TimeBase, VirtualTimeBase, ns_to_tb, tb_to_ns};

use crate::cpu::CpuState;
use crate::isa::{Op, decode};
use crate::softmmu::{AddressSpace, SoftMmu};
use std::sync::Arc;

/// Execution counters of one vCPU (shown in run reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecCounters {
    pub instructions: u64,
    /// Trace interrupts taken by [`Cpu::step_traced`] (the machine moves them into its
    /// per-vector interrupt counts).
    pub trace_interrupts: u64,
}

/// A vCPU: architected state, memory, and the address of the next instruction while one
/// executes.
pub struct Cpu {
    pub st: CpuState,
    pub mmu: SoftMmu,
    /// Next instruction address; branches overwrite it.
    pub nia: u64,
    pub timebase: Arc<dyn TimeBase>,
    /// A local TLB flush is pending (`tlbiel`, `slbie`, `slbia`), performed at the next
    /// context-synchronising event (`isync`, `ptesync`, interrupt, `rfid`).
    pub tlb_flush_pending: bool,
    /// Events for the run loop (`interp::events`), cleared by whoever handles them.
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
