//! The context translated code runs with: what it shares with its helpers and the run loop
//! (one per vCPU, `repr(C)`: generated code reads its fields), and the offsets generated
//! code of every tier uses.

use super::cache::JitShared;
use super::jump_cache::JcSet;
use crate::cpu::Exception;
use crate::isa::OP_COUNT;
use crate::vcpu::Cpu;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// `JitCtx::link` when the block asks to be promoted to the next tier ([`super::tier::Tier::translate`]'s
/// `promote_after` ran out).
pub const PROMOTE: u64 = 1;

/// The fields of the stop condition (`vcpu::exit::keeps_running`) as generated code tests
/// them: the budget left and the kick flag's pointer in [`JitCtx`], the events in [`Cpu`].
pub(crate) const STOP_BUDGET: usize = core::mem::offset_of!(JitCtx, budget);
pub(crate) const STOP_KICK: usize = core::mem::offset_of!(JitCtx, kick);
pub(crate) const STOP_EVENTS: usize = crate::vcpu::exit::EVENTS;

/// Never set: the kick flag of a vCPU no machine watches (user mode).
pub(super) static NO_KICK: AtomicBool = AtomicBool::new(false);

/// What translated code shares with its helpers; one per vCPU.
#[repr(C)]
pub struct JitCtx {
    /// Instructions the blocks may still retire before chaining stops; every block exit
    /// subtracts what it retired.
    pub budget: i64,
    /// The effective address of the page of the baseline block running (set by the run
    /// loop and by the probe that enters a block; linked jumps stay in the page): what a
    /// page-relative block ([`super::BlockKey`]) computes its guest addresses from.
    pub page: u64,
    /// The vCPU's jump cache (`JC_SETS` sets).
    pub jc: *const JcSet,
    /// The machine's kick flag for this vCPU: set, the next block exit returns.
    pub kick: *const AtomicBool,
    /// `JitShared::generation` when the jump cache was last synced.
    pub seen_generation: u64,
    /// `JitShared::generation` itself (read by translated `isync`).
    pub generation: *const AtomicU64,
    /// Result of the last helper called through the slow-path adapter.
    pub ret: u64,
    /// Set by a memory helper when the access faulted (`exc` holds why).
    pub fault: u32,
    pub exc: Option<Exception>,
    pub shared: Arc<JitShared>,
    /// Interpreter fallbacks by op.
    pub fallbacks: Box<[u64; OP_COUNT]>,
    /// Slow-path memory accesses (TLB misses, MMIO, unaligned, watched pages).
    pub slow_mem: u64,
    /// Set by a block's exit: the address of its unlinked jump (the run loop has the tier
    /// link it to the next block, [`super::tier::Tier::link`]), or [`PROMOTE`]; 0 otherwise.
    pub link: u64,
    /// The optimizing tier's entry trampoline for its current module
    /// ([`super::tier::Tier::entry_point`]): baseline code runs optimized blocks through it
    /// ([`helpers::run_optimized`]) without returning to the run loop.
    pub optimized_entry: usize,
    /// Calls of optimized code from baseline code, and the instructions they retired.
    pub optimized_calls: u64,
    pub optimized_instructions: u64,
    /// `JitShared`'s filter of host pages that may hold translated code (read by translated
    /// `icbi`).
    pub code_hosts: *const std::sync::atomic::AtomicU64,
    /// The address bits beyond user mode's reserved range (`user::mem::USER_SPAN`): a
    /// memory operand for host-guarded memory's one-instruction range test.
    pub beyond_user_span: u64,
    /// The baseline tier's host stack pointer when the trampoline entered translated code,
    /// and the lowest it may push return frames to ([`RETURN_FRAMES_BYTES`] below): a call
    /// pushes a return frame there, and a `blr` that it predicts returns with the host's
    /// `ret` (`jit/baseline/x86_64/emit/frame.rs`, `Em::exit_return`). Every exit to the run
    /// loop resets the stack to the base, frames and all: a frame lives within one stint,
    /// which runs under one mapping and one MSR key state (a TLB flush, a drop of blocks or
    /// a change of the key bits ends the stint: `helpers::interp`, `helpers::write_msr`).
    pub rsp_base: u64,
    pub rsp_limit: u64,
}

/// Room for return frames on a vCPU thread's stack: 64 KiB, 2,048 nested calls; a deeper
/// call pushes none and its return probes.
pub const RETURN_FRAMES_BYTES: u64 = 64 << 10;

// SAFETY: the pointers are to the owning `Jit`'s jump cache (moves with it), to a flag that
// outlives it (`watch`'s contract) and into `shared` (kept alive by the `Arc` here:
// `generation`, `code_hosts`).
unsafe impl Send for JitCtx {}

/// Where `Cpu` keeps the pointer to its TLB entries (`Tlb::table`, fixed for its life), and
/// the bytes of one MMU index's entries: how translated code of either tier finds an entry.
pub(crate) const TLB_TABLE_PTR: i32 = (core::mem::offset_of!(Cpu, mmu)
    + core::mem::offset_of!(crate::softmmu::SoftMmu, tlb)
    + core::mem::offset_of!(crate::softmmu::Tlb, table))
    as i32;
pub(crate) const TLB_IDX_BYTES: i32 =
    (crate::softmmu::TLB_ENTRIES * size_of::<crate::softmmu::TlbEntry>()) as i32;
