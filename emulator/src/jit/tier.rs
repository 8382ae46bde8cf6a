//! The translating tiers as peers: each one ([`super::baseline`], [`super::cranelift`])
//! implements [`Tier`] for one vCPU, and, when its code is shared by the machine's vCPUs,
//! [`MachineCode`] for the code cache. The runner ([`super::Jit`]) knows tiers only through
//! these traits and [`TierId`]; whatever a tier needs of its host architecture stays in its
//! own module.
//!
//! The block protocol every tier's code follows: a block is entered with `(cpu, ctx)`;
//! guest registers live in `cpu.st`; it takes the instructions it retired off
//! `ctx.budget` and leaves `cpu.st.pc` at the next instruction; a guest fault stores
//! `ctx.exc` (with `st.pc` at the faulting instruction, which did not retire); an
//! interpreter call goes through `helpers::interp` and stops as its result says. A block
//! may go on to the next one (through the jump cache `ctx.jc`, or a patched jump) while
//! `vcpu::exit::keeps_running` holds; a jump-cache entry holds a block of the tier its
//! flags name ([`super::jump_cache::jc_flags`]). A block that leaves by an unlinked jump
//! or asks to be promoted says so in `ctx.link`.

use super::cache::BlockKey;
use super::ctx::JitCtx;
use crate::cpu::Exception;
use crate::vcpu::{Cpu, DecodedBlock};
use std::sync::Arc;

/// A translating tier, in the order blocks move through them: the first one in use
/// translates a block once it is hot, the next one when the first one's code asks to be
/// promoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TierId {
    /// Cranelift, the optimizing tier (its number is 0: its jump-cache entries carry the
    /// block key's MSR bits unchanged).
    Cranelift = 0,
    /// The single-pass baseline tier.
    Baseline = 1,
}

impl TierId {
    pub const COUNT: usize = 2;

    pub const fn from_index(k: usize) -> TierId {
        match k {
            0 => TierId::Cranelift,
            _ => TierId::Baseline,
        }
    }
}

/// A block translated by a tier.
pub struct Translation {
    pub entry: usize,
    /// Host code bytes it took (the vCPU's own code counts towards its module's share of
    /// the cache limit; machine-wide code's total is [`MachineCode::used`]).
    pub code_bytes: u64,
    /// Instructions translated natively / as interpreter calls (0 when not counted).
    pub native: u32,
    pub fallbacks: u32,
}

/// One vCPU's side of a translating tier.
pub trait Tier: Send {
    fn id(&self) -> TierId;

    /// Translates `block` (its key's MSR bits are `key.flags`). `promote_after`: executions
    /// after which the block's code asks to be promoted to the next tier (`ctx.link =
    /// PROMOTE`); `None`: never. `Ok(None)` when the tier's code region is full (the caller
    /// requests a code cache flush; the block is interpreted meanwhile).
    fn translate(
        &mut self,
        block: &DecodedBlock,
        key: BlockKey,
        promote_after: Option<u32>,
    ) -> Result<Option<Translation>, Exception>;

    /// Runs the block at `entry` (and those it chains to) until one returns.
    ///
    /// # Safety
    /// `entry` came from this tier's `translate` and is live (in the block map, not flushed
    /// or reset since), and so are the blocks `ctx.jc` holds.
    unsafe fn enter(&mut self, cpu: &mut Cpu, ctx: &mut JitCtx, entry: usize);

    /// The link hook: the last stint left this tier's code by the unlinked jump at `site`
    /// (`ctx.link`, when the tier's code stamp was `stamp`), and the next block is this
    /// tier's `target`, translated for `flags`. Patches the jump to go there when the tier
    /// can; true when linked.
    fn link(&self, _site: usize, _stamp: u64, _target: usize, _flags: u64) -> bool {
        false
    }

    /// What [`Tier::link`] checks a jump site against: it changes whenever addresses of this
    /// tier's code taken before become stale (a flush of its region).
    fn link_stamp(&self) -> u64 {
        0
    }

    /// Frees this vCPU's translations; the caller guarantees that none can run any more.
    fn reset(&mut self);

    /// An `extern "C" fn(*mut Cpu, *mut JitCtx, usize)` that does what [`Tier::enter`] does
    /// for the current translations (changes with `reset`): how another tier's code runs
    /// this one's blocks (`helpers::run_optimized`). 0 when there is none.
    fn entry_point(&self) -> usize {
        0
    }
}

/// A tier's code shared by every vCPU of the machine, as the code cache sees it.
pub trait MachineCode: Send + Sync {
    /// The block at `entry` left the block map: jumps patched to it go back to the run loop.
    fn dropped(&self, entry: usize);

    /// Forgets every block. The caller guarantees that no vCPU runs this code and that no
    /// map or jump cache leads to any (the exclusive section of a flush).
    fn flush(&self);

    /// Code bytes placed since the last flush.
    fn used(&self) -> u64;

    /// The machine is a user-mode process (see `JitShared::set_user_process`).
    fn set_user_process(&self, process: UserProcess);

    /// Itself, for the tier's vCPU side to recover its own type.
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}

/// What a user-mode process promises the translated code (see
/// `JitShared::set_user_process`).
#[derive(Clone, Copy, Debug, Default)]
pub struct UserProcess {
    /// Every TLB entry maps guest address `ea` to host `flat_base + ea`.
    pub flat_base: Option<u64>,
    /// The host protects the range's pages as the guest does.
    pub guarded: bool,
}

/// The machine-wide code of each tier that has one, indexed by `TierId as usize`.
pub type MachineCodes = [Option<Arc<dyn MachineCode>>; TierId::COUNT];
