//! Guest block → x86-64, emitted in one pass with `dynasm`. Guest registers live at their
//! homes in `CpuState`; copies of GPRs the block uses again are kept in host registers
//! (`regcache`), and across integer instructions, loads and stores a result may stay in its
//! copy only. Every other instruction (an interpreter call, a helper, a branch or exit)
//! starts with the homes current, and a load's or store's out-of-line path (a TLB miss, a
//! fault) stores the copies it finds dirty first: a block can be left anywhere.
//!
//! Pinned host registers: `rbx` = the `Cpu` plus `RBX_BIAS`, `r12` = `*mut JitCtx`, `r13` =
//! the effective address of the current load/store (callee-saved: it survives slow-path
//! calls), `r14` = the vCPU's TLB entries, `rbp` = the instruction budget. `JitCtx::budget` is
//! loaded into `rbp` by the trampoline and stored back by the exit stub and around
//! `helpers::run_optimized`: a memory counter charged by every block was a chain of
//! read-modify-writes through store forwarding, several cycles per block.
//!
//! The code is position independent (helpers are called through absolute addresses, only
//! jumps inside the block are relative), so it is emitted into a buffer and then copied to
//! its place in the shared code region. Direct exits to the block's own guest page (in user
//! mode, to any page) end in a patchable `jmp rel32` (see [`super::Shared::link`]); other
//! exits probe the vCPU's jump
//! cache for a baseline block, run an optimized one through `helpers::run_optimized`, and
//! return to the run loop when there is neither.
//!
//! A page-relative block ([`BlockKey`]'s `relative`) holds no guest address of its own code:
//! each one it needs (the PC of an exit, a fault or an interpreter call, a return address, a
//! relative branch's target) is the running page (`JitCtx::page`) plus a constant, so
//! that one translation serves every mapping of its physical page. Absolute branch targets
//! stay constants and always probe: whether they are on the running page depends on the
//! mapping.
//!
//! Everything rare (TLB misses, faults, the entry's stop and promotion exits) is emitted
//! out of line after the body: translations of a real guest take hundreds of MiB, and the
//! instruction cache holds only the hot paths it fetches.
//!
//! This file holds block emission (the translator's state, the pass over a block's
//! instructions, the register cache's plumbing and what the families share); `frame` holds
//! the frame and ABI: the entry trampoline, the stubs every block shares, the entry check,
//! exits, probes and out-of-line code; `access_run` the runs of accesses that share one
//! TLB test; `self_loop` the blocks that branch back to their own start. The instructions
//! are translated by family, one file each (`fixed`, `branch`, `memory`, `system`,
//! `vector`), and `table` says which family translates each op of the ISA table (none: the
//! interpreter runs it) and which keep dirty register copies.

// dynasm converts a dynamic register operand with `.into()`, a no-op for our `u8` registers.
#![allow(clippy::useless_conversion)]

use super::regcache::{HOST_REGS, RegCache, later_gprs, named_gprs, written_gprs};
use crate::cpu::{CR_PACK, CR_SPREAD, CpuState, NO_RESERVATION, msr};
use crate::isa::{Insn, InsnFlags, Op, Operand, decode};
use crate::jit::ctx::{PROMOTE, RETURN_FRAMES_BYTES, STOP_BUDGET, STOP_EVENTS, STOP_KICK};
use crate::jit::jump_cache::{self, jc_flags};
use crate::jit::tier::TierId;
use crate::jit::{
    BlockKey, JC_SETS, JcEntry, JcSet, JitCtx, TLB_IDX_BYTES, TLB_TABLE_PTR, helpers,
};
use crate::softmmu::{
    Access, PAGE_MASK, PAGE_SIZE, TLB_ENTRIES, TlbEntry, fast_path_mask, mmu_idx,
};
use crate::vcpu::{Cpu, forward_jump, forward_target_index, never_falls_through, side_exit};
use asm::{AluImm, Asm, CrossRef};
use core::mem::offset_of;
use dynasmrt::x64::X64Relocation;
use dynasmrt::{DynamicLabel, DynasmApi, DynasmLabelApi, VecAssembler, dynasm};

macro_rules! asm {
    ($ops:expr; $($t:tt)*) => {
        dynasm!($ops ; .arch x64 ; $($t)*)
    };
}

// The native translators, one file per instruction family, and the table that says which
// family translates each op.
mod access_run;
mod asm;
mod branch;
mod fixed;
mod forward;
mod frame;
mod memory;
mod self_loop;
mod system;
mod table;
mod vector;

use frame::Exit;
pub use frame::{
    Counter, Emitted, Fixup, GUARDED_SITE, HELPERS, Helper, ProbeStubs, Stubs, exit_stub,
    guard_stub, probe_stub, thunk, trampoline,
};
pub use table::native_ops;

/// `rbx` points this far into `Cpu`: at GPR 16, so that all 32 GPRs are within a signed
/// 8-bit displacement ([`Em::gpr_rm`]), three bytes shorter per access than a 32-bit one.
/// Fields after the GPRs take 32-bit displacements as before.
const RBX_BIAS: i32 = (offset_of!(Cpu, st) + offset_of!(CpuState, gpr)) as i32 + 8 * 16;
const ST: i32 = offset_of!(Cpu, st) as i32 - RBX_BIAS;
const fn gpr(r: u32) -> i32 {
    ST + offset_of!(CpuState, gpr) as i32 + 8 * r as i32
}
const CRF: i32 = ST + offset_of!(CpuState, crf) as i32;
const CA: i32 = ST + offset_of!(CpuState, ca) as i32;
const SO: i32 = ST + offset_of!(CpuState, so) as i32;
const LR: i32 = ST + offset_of!(CpuState, lr) as i32;
const CTR: i32 = ST + offset_of!(CpuState, ctr) as i32;
const fn vsr(r: u32) -> i32 {
    ST + offset_of!(CpuState, vsr) as i32 + 16 * r as i32
}
const PC: i32 = ST + offset_of!(CpuState, pc) as i32;
const MSR: i32 = ST + offset_of!(CpuState, msr) as i32;
const RESERVE_ADDR: i32 = ST + offset_of!(CpuState, reserve_addr) as i32;
const RESERVE_SIZE: i32 = ST + offset_of!(CpuState, reserve_size) as i32;
const RESERVE_VAL: i32 = ST + offset_of!(CpuState, reserve_val) as i32;
const TLB_FLUSH_PENDING: i32 = offset_of!(Cpu, tlb_flush_pending) as i32 - RBX_BIAS;
// The stop condition (`vcpu::exit::keeps_running`) as block entries (the budget), probes and
// jumps back (the kick flag and events) test it.
const EVENTS: i32 = STOP_EVENTS as i32 - RBX_BIAS;
const BUDGET: i32 = STOP_BUDGET as i32;
const KICK: i32 = STOP_KICK as i32;
const JC: i32 = offset_of!(JitCtx, jc) as i32;
const PAGE: i32 = offset_of!(JitCtx, page) as i32;
const RET: i32 = offset_of!(JitCtx, ret) as i32;
const FAULT: i32 = offset_of!(JitCtx, fault) as i32;
const LINK: i32 = offset_of!(JitCtx, link) as i32;
const OPTIMIZED: i32 = offset_of!(JitCtx, optimized_entry) as i32;
const BEYOND_USER_SPAN: i32 = offset_of!(JitCtx, beyond_user_span) as i32;
const CODE_HOSTS: i32 = offset_of!(JitCtx, code_hosts) as i32;
const RSP_BASE: i32 = offset_of!(JitCtx, rsp_base) as i32;
const RSP_LIMIT: i32 = offset_of!(JitCtx, rsp_limit) as i32;

/// What the machine's address space and vCPUs promise the translator (user mode's process;
/// the default is a full system's).
#[derive(Clone, Copy, Debug, Default)]
pub struct Space {
    /// Host address of guest address 0 when every TLB entry has that addend (user mode's
    /// reserved range): loads and stores add the constant instead of loading the addend.
    pub flat_base: Option<u64>,
    /// With `flat_base`: the host protects every guest page as the guest does (and pages
    /// holding translated code against writes), and the code region's fault sites are
    /// bound while it runs (`fault`). Loads and stores then check only that the address is
    /// below `user::mem::USER_SPAN` and access the host page; what the guest may not do
    /// faults on the host and resumes at the access's miss path.
    pub guarded: bool,
    /// One process on one vCPU: no kick and no events from elsewhere, so probes and jumps
    /// back do not test them.
    pub user: bool,
}

/// Host registers by encoding number, for [`Em::gpr_rm`].
const RAX: u8 = 0;
const RCX: u8 = 1;
const RDX: u8 = 2;
const RBP: u8 = 5;
const R13: u8 = 13;

/// The instructions [`Em::gpr_rm`] encodes: `op reg, [gpr]` (`Store64`: `mov [gpr], reg`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum GprOp {
    Load64,
    Store64,
    Load32,
    Load32Signed,
    Add64,
    Sub64,
    And64,
    Or64,
    Xor64,
    Cmp64,
    Cmp32,
    Imul64,
}

impl GprOp {
    /// REX.W and the opcode bytes.
    fn encoding(self) -> (bool, &'static [u8]) {
        match self {
            GprOp::Load64 => (true, &[0x8b]),
            GprOp::Store64 => (true, &[0x89]),
            GprOp::Load32 => (false, &[0x8b]),
            GprOp::Load32Signed => (true, &[0x63]),
            GprOp::Add64 => (true, &[0x03]),
            GprOp::Sub64 => (true, &[0x2b]),
            GprOp::And64 => (true, &[0x23]),
            GprOp::Or64 => (true, &[0x0b]),
            GprOp::Xor64 => (true, &[0x33]),
            GprOp::Cmp64 => (true, &[0x3b]),
            GprOp::Cmp32 => (false, &[0x3b]),
            GprOp::Imul64 => (true, &[0x0f, 0xaf]),
        }
    }
}

/// What a store writes: a GPR, or doubleword 0 of a VSR (an FPR for VSRs 0-31).
#[derive(Clone, Copy)]
enum StoreSrc {
    Gpr(u32),
    Dw0(u32),
}

/// Out-of-line code, emitted after the block body so that the hot path stays dense.
enum Cold {
    /// Leave for `pc`, with what came before retired: the block's own PC before its first
    /// instruction (budget spent), or a jump back's target (kick or events); the copies
    /// `held` dirty there stored first (a loop block's branch back).
    Stop {
        at: DynamicLabel,
        pc: u64,
        held: RegCache,
    },
    /// The low byte of the block's execution counter wrapped: a tick off the high word at
    /// `high`; when that runs out, ask the run loop to promote the block.
    Tick {
        at: DynamicLabel,
        back: DynamicLabel,
        high: usize,
        held: RegCache,
    },
    /// A direct exit not linked yet: returns with `JitCtx::link` naming the jump at `site`
    /// (through the unlinked-exit probe, which runs an optimized target at once).
    Unlinked {
        at: DynamicLabel,
        site: DynamicLabel,
        target: u64,
        /// The target is on another page: the link goes to its guard ([`GUARDED_SITE`]).
        guarded: bool,
    },
    /// A load's TLB miss (or unaligned, device, watched access): `helpers::load`, then
    /// back to `back` with the value in `rax`, or to the fault exit.
    LoadMiss {
        at: DynamicLabel,
        back: DynamicLabel,
        held: RegCache,
        /// Where the address is (`Em::load_ea`).
        ea: memory::Ea,
        size: u32,
        le: bool,
        fault: DynamicLabel,
    },
    /// A store's slow path: `helpers::store`, then back to `back`, to the fault exit, or,
    /// when it wrote translated code, out after this instruction (updating `ra` first for
    /// the update forms).
    StoreMiss {
        at: DynamicLabel,
        back: DynamicLabel,
        held: RegCache,
        /// Where the address is (`r13`, or a base register's copy and a displacement).
        ea: memory::Ea,
        src: StoreSrc,
        size: u32,
        le: bool,
        update_ra: Option<u32>,
        fault: DynamicLabel,
        k: u32,
        next: u64,
    },
    /// The interpreter said stop (`rax` = its code, 1: fault, 2: after); `k` instructions
    /// before it retired.
    Interp { at: DynamicLabel, k: u32 },
    /// A probe exit (`rax` = next PC, budget charged) out of the hot path.
    Probe { at: DynamicLabel },
    /// A return the top return frame does not predict: drops the frame, then to `probe`.
    DropFrame {
        at: DynamicLabel,
        probe: DynamicLabel,
    },
    /// A memory access at `pc` faulted: `k` instructions retired.
    Fault { at: DynamicLabel, k: u32, pc: u64 },
    /// The entry of an access's cold path while a CR field is deferred
    /// (`Handoff::crf_deferred`): stores the field of compare `c` computed again from its
    /// operands (the copies `held` there, or their homes), then goes on at `then`.
    CrfFirst {
        at: DynamicLabel,
        then: DynamicLabel,
        held: RegCache,
        c: fixed::CmpSrc,
    },
    /// A run of accesses whose one TLB test missed (`access_run`): its instructions
    /// `words` (the first one instruction `k`, at `pc`) one by one, then back to `back`.
    AccessRun {
        at: DynamicLabel,
        back: DynamicLabel,
        held: RegCache,
        k: u32,
        pc: u64,
        words: Vec<u32>,
    },
    /// The slow path of an instruction whose fast path is native: the interpreter runs it
    /// (instruction `k`, at `pc`), then the block goes on at `back` or leaves as it says.
    InterpSlow {
        at: DynamicLabel,
        back: DynamicLabel,
        held: RegCache,
        op: Op,
        word: u32,
        k: u32,
        pc: u64,
    },
}

struct Em {
    ops: Asm,
    key: BlockKey,
    le: bool,
    idx_read: i32,
    idx_write: i32,
    /// Index of the instruction being translated and its address.
    k: u32,
    pc: u64,
    /// The block's first instruction's address (where this translation was made).
    block_pc: u64,
    /// Page-relative: the page of `block_pc`, which guest addresses are computed from at
    /// run time ([`Em::pc_into`]).
    page: Option<u64>,
    cold: Vec<Cold>,
    /// The probe exit: `rax` = next PC, budget already charged.
    probe: Exit,
    stubs: Stubs,
    fixups: Vec<Fixup>,
    /// GPR copies in host registers (`regcache`); used only while `caching` (the body: out
    /// of line code reads the homes).
    cache: RegCache,
    caching: bool,
    /// Per instruction, the GPRs the rest of the block names (`regcache::later_gprs`).
    later: Vec<u32>,
    /// Host address of guest address 0 when all TLB entries share it (see [`Space`]).
    flat: Option<u64>,
    /// Host-guarded memory (see [`Space`]), and the direct access sites so far: the access
    /// instruction's offset and its miss path.
    guarded: bool,
    sites: Vec<(u32, DynamicLabel)>,
    /// User mode: nothing outside the vCPU's own instructions stops it (see [`Space`]).
    user: bool,
    /// What the instructions translated so far leave for the next ones.
    handoff: Handoff,
    /// The instruction being translated may leave its results in their copies only
    /// ([`table::WRITE_BACK`]).
    write_back: bool,
    /// The block's execution counter, if it has one.
    counter: Option<Counter>,
    /// A block that loops to its start (`self_loop`): the head its branch back jumps to,
    /// and the copies there.
    looping: Option<(DynamicLabel, RegCache)>,
    /// The host register holding CTR (current at its home too) in a loop counted in it.
    ctr_copy: Option<u8>,
    /// The block's instructions.
    words: Vec<u32>,
    /// Per instruction: whether a side exit or a jump ahead targets it (`forward`), and once
    /// one jumps there, the join.
    join_at: Vec<bool>,
    joins: Vec<Option<forward::Join>>,
}

/// What the instructions translated so far leave for the next ones to use (all empty at a
/// block's start and in shared code).
#[derive(Default)]
struct Handoff {
    /// The CR field whose value the instruction just translated computed from the host's
    /// flags, with the flags left as the compare set them (and whether it compared signed),
    /// and the same for the one before it (`prev_flags`): a conditional branch right after
    /// a compare jumps on the flags, not on the CR home it was just stored to, so that a
    /// mispredicted branch resolves as soon as the compare does.
    crf_flags: Option<(u32, bool)>,
    prev_flags: Option<(u32, bool)>,
    /// The last compare whose operands are unchanged since and whose field nothing has set
    /// since ([`fixed::keeps_compare`]): a branch on that field compares again rather than
    /// load the CR byte just stored.
    cmp_src: Option<fixed::CmpSrc>,
    /// The CR field (and whether signed) the instruction just translated left in the host
    /// flags only, for the side exit right after it to store on its ways
    /// ([`Em::set_crf_from_flags`]).
    crf_pending: Option<(u32, bool)>,
    /// The compare whose CR field a side exit left unstored on its way on, because a later
    /// instruction sets the field first with only plain instructions and accesses between
    /// ([`fixed::field_set_past_accesses`]): until then each access's cold path, and an
    /// instruction the interpreter runs, compute it again first ([`Em::crf_again`]).
    crf_deferred: Option<fixed::CmpSrc>,
    /// The home (`ST`-relative) of the 64-bit SPR the instruction just translated set from
    /// `rax` (`mtlr`, `mtctr`), and the previous instruction's.
    spr_rax: Option<i32>,
    prev_spr: Option<i32>,
}

/// Translates `words` (the block at `pc`, its key `key`). `counter`: the block's execution counter,
/// if it has one (the block asks for promotion when it runs out). `probe`:
/// the shared probe exits of the block's MSR state, if the machine has them. `space`: what
/// the address space promises (user mode's).
pub fn emit(
    pc: u64,
    key: BlockKey,
    words: &[u32],
    counter: Option<Counter>,
    stubs: &Stubs,
    probe: Option<ProbeStubs>,
    space: Space,
) -> Emitted {
    // Room for a typical block's code and labels up front: grown from empty, the buffers
    // were reallocated and copied a dozen times per block.
    let n = words.len();
    let mut ops = Asm::with_capacity(160 * n + 256, 6 * n + 8);
    let probe = match probe {
        Some(p) => Exit::Shared {
            probe: p.probe,
            unlinked: p.unlinked,
            guard: p.guard,
        },
        None => Exit::Local(ops.new_dynamic_label()),
    };
    let mut e = Em {
        ops,
        key,
        le: key.flags & msr::LE != 0,
        idx_read: mmu_idx(key.flags, Access::Read) as i32,
        idx_write: mmu_idx(key.flags, Access::Write) as i32,
        k: 0,
        pc,
        block_pc: pc,
        page: key.relative.then_some(pc & PAGE_MASK),
        cold: Vec::with_capacity(2 * n),
        probe,
        stubs: *stubs,
        fixups: Vec::with_capacity(4),
        cache: RegCache::default(),
        caching: true,
        later: later_gprs(words),
        flat: space.flat_base,
        guarded: space.guarded && space.flat_base.is_some(),
        sites: Vec::new(),
        user: space.user,
        handoff: Handoff::default(),
        write_back: false,
        counter,
        looping: None,
        ctr_copy: None,
        words: words.to_vec(),
        join_at: forward::join_targets(words),
        joins: vec![None; n],
    };
    // A jump from another page enters at the guard, which falls through into the entry.
    let guard_miss = e.label();
    let guard = match e.probe {
        Exit::Shared { guard, .. } if !e.user => Some(e.emit_guard(guard_miss, guard)),
        _ => None,
    };
    let entry = e.ops.offset().0 as u32;
    e.entry(counter);
    let body = e.ops.offset().0 as u32;
    // 32-bit mode (rare: early boot) runs everything through the interpreter.
    let native_ok = key.flags & msr::SF != 0;
    if native_ok && self_loop::loops_to_start(words, pc) {
        e.loop_head(words);
    }
    let (mut native, mut fallbacks) = (0, 0);
    let mut ended = false;
    let mut last_fallback = false;
    let mut k = 0;
    while k < words.len() {
        let w = words[k];
        e.k = k as u32;
        e.pc = pc.wrapping_add(4 * k as u64);
        if !ended {
            e.arrive_at_join(k);
        } else if e.resume_at_join(k) {
            ended = false;
        } else {
            // After a jump ahead, reached by no jump (yet): never runs.
            k += 1;
            continue;
        }
        e.handoff.prev_flags = e.handoff.crf_flags.take();
        e.handoff.prev_spr = e.handoff.spr_rax.take();
        // A run ends before a join (`forward`); host-guarded memory has none (`access_run`).
        let end = e.next_join(k);
        let run = if native_ok && !e.guarded {
            access_run::run_len(&words[k..end])
        } else {
            0
        };
        if e.handoff
            .crf_deferred
            .is_some_and(|c| fixed::sets_field(w, c.bf))
        {
            e.handoff.crf_deferred = None;
        }
        // An access run's cold paths run it again from the homes: it starts with them
        // current and writes through.
        let op = decode(w);
        e.write_back = native_ok && run < 2 && table::WRITE_BACK[op as usize];
        // A side exit stores the dirty copies on its taken way only (`Em::leaving_with_homes`);
        // a jump within the block moves them to the join's (`forward`).
        let side =
            native_ok && run < 2 && (side_exit(op, Insn(w)) || e.forward_target(Insn(w)).is_some());
        debug_assert!(
            side || e.handoff.crf_pending.is_none(),
            "a CR field left in the flags at {:#x} without the side exit to store it",
            e.pc
        );
        // A loop block's branch back carries the dirty copies to its head (`self_loop`).
        if !e.write_back && !side && !e.closes_loop() {
            e.flush_dirty();
        }
        let span = &words[k..k + run.max(1)];
        if let Some(c) = e.handoff.cmp_src
            && !span.iter().all(|&w| fixed::keeps_compare(w, &c))
        {
            e.handoff.cmp_src = None;
        }
        if run >= 2 {
            e.access_run(&words[k..k + run]);
            (native, last_fallback) = (native + run as u32, false);
            k += run;
            continue;
        }
        k += 1;
        let done = native_ok && e.native(op, Insn(w), &mut ended);
        if done {
            native += 1;
        } else {
            fallbacks += 1;
            e.fallback(op, w);
            if k < words.len() && never_falls_through(op, Insn(w)) {
                // Words follow (`DecodedBlock::fetch`): leave for the PC the interpreter set.
                e.ops.alu_imm(AluImm::Sub, RBP, true, k as i32);
                asm!(e.ops ; mov rax, QWORD [rbx + PC]);
                e.jmp_probe();
                ended = true;
            }
        }
        last_fallback = !done;
    }
    debug_assert!(
        e.handoff.crf_pending.is_none() && e.handoff.crf_deferred.is_none(),
        "a CR field left in the flags or deferred"
    );
    e.write_back = false;
    e.flush_dirty();
    if !ended {
        let n = words.len() as u32;
        if last_fallback {
            // The interpreter left the next PC in `CpuState`.
            e.ops.alu_imm(AluImm::Sub, RBP, true, n as i32);
            asm!(e.ops ; mov rax, QWORD [rbx + PC]);
            e.jmp_probe();
        } else {
            e.exit_direct(n, pc.wrapping_add(4 * n as u64));
        }
    }
    let probe = e.ops.offset().0 as u32;
    let cold = e.emit_cold();
    if guard.is_some() {
        asm!(e.ops ; =>guard_miss);
        e.jmp_probe();
    }
    let fault_sites = e
        .sites
        .iter()
        .map(|&(at, miss)| {
            let miss = e.ops.labels().resolve_dynamic(miss).expect("miss path");
            (at, miss.0 as u32)
        })
        .collect();
    let (code, cross) = e.ops.finalize_split(cold).expect("block code");
    Emitted {
        guard,
        entry,
        split: cold,
        cross,
        code,
        native,
        fallbacks,
        sections: [body, probe],
        fixups: e.fixups,
        fault_sites,
    }
}

impl Em {
    fn label(&mut self) -> DynamicLabel {
        self.ops.new_dynamic_label()
    }

    /// `op reg, GPR r`: on the host register holding a copy of `r` when there is one
    /// (`regcache`); a store also writes the copy, and a GPR the rest of the block names
    /// gets one.
    fn gpr_rm(&mut self, op: GprOp, reg: u8, r: u32) {
        if !self.caching {
            return self.gpr_home(op, reg, r);
        }
        let wanted = self.later[self.k as usize] & 1 << r != 0;
        if op == GprOp::Store64 {
            let copy = match self.cache.find(r) {
                Some(h) => Some(h),
                None => wanted.then(|| self.take_copy(r)),
            };
            match copy {
                Some(h) => {
                    self.store_home(reg, r);
                    self.reg_reg(GprOp::Store64, reg, h);
                }
                None => self.gpr_home(op, reg, r),
            }
            return;
        }
        match self.copy_for(r) {
            Some(h) => self.reg_reg(op, reg, h),
            None => self.gpr_home(op, reg, r),
        }
    }

    /// Stores GPR `r`'s new value (in `reg`, which is or is copied to `r`'s host copy) to
    /// its home, or, while the instruction may write back ([`table::WRITE_BACK`]), leaves it
    /// in the copy only (dirty) until [`Em::flush_dirty`] or an eviction stores it.
    fn store_home(&mut self, reg: u8, r: u32) {
        if self.caching && self.write_back {
            self.cache.mark_dirty(r);
        } else {
            self.gpr_home(GprOp::Store64, reg, r);
        }
    }

    /// Stores every dirty copy home (before an instruction that may leave the block or
    /// read a home, or at the block's end).
    fn flush_dirty(&mut self) {
        let held = self.cache;
        self.flush_held(&held);
        self.cache.cleaned();
    }

    /// Emits a way out of the block (`leave`) on which the dirty copies are stored home first,
    /// while the code after it, which the block falls through to, keeps them dirty.
    fn leaving_with_homes(&mut self, leave: impl FnOnce(&mut Em)) {
        let dirty = self.cache;
        self.flush_dirty();
        leave(self);
        self.cache.redirty(&dirty);
    }

    /// Out-of-line code entered with the copies `held` had: stores the dirty ones home.
    fn flush_held(&mut self, held: &RegCache) {
        for (h, r) in held.dirty_held() {
            self.gpr_home(GprOp::Store64, h, r);
        }
    }

    /// A host register for a new copy of GPR `r` (which the caller fills), the copy it
    /// evicts stored home first when dirty.
    fn take_copy(&mut self, r: u32) -> u8 {
        let (h, evicted) = self.cache.take(r);
        if let Some(g) = evicted {
            self.gpr_home(GprOp::Store64, h, g);
        }
        h
    }

    /// Whether this instruction is a loop block's branch back to its start, its last
    /// (`self_loop::loops_to_start`).
    fn closes_loop(&self) -> bool {
        self.looping.is_some() && self.caching && self.k as usize + 1 == self.words.len()
    }

    /// Every home is current here (an exit, a helper call).
    fn assert_homes_current(&self) {
        debug_assert!(
            !self.caching || self.cache.dirty() == 0,
            "a GPR's home is stale at {:#x}",
            self.pc
        );
    }

    /// The host register holding a copy of GPR `r`, made now when the rest of the block
    /// names `r` again (as [`Em::gpr_rm`] would); none when `r` is read from its home.
    fn copy_for(&mut self, r: u32) -> Option<u8> {
        if !self.caching {
            return None;
        }
        if let Some(h) = self.cache.find(r) {
            return Some(h);
        }
        (self.later[self.k as usize] & 1 << r != 0).then(|| {
            let h = self.take_copy(r);
            self.gpr_home(GprOp::Load64, h, r);
            h
        })
    }

    /// The host register holding a copy of GPR `r`, if any (body code only).
    fn copy_of(&mut self, r: u32) -> Option<u8> {
        if self.caching {
            self.cache.find(r)
        } else {
            None
        }
    }

    /// `op reg, h` (`Store64`: `mov h, reg`).
    fn reg_reg(&mut self, op: GprOp, reg: u8, h: u8) {
        let (wide, opcode) = op.encoding();
        let rex = 0x40 | (wide as u8) << 3 | (reg >> 3) << 2 | h >> 3;
        if rex != 0x40 {
            self.ops.push(rex);
        }
        self.ops.extend(opcode.iter().copied());
        self.ops.push(0xc0 | (reg & 7) << 3 | (h & 7));
    }

    /// Refills the copies `held` names from their homes (out-of-line code going back).
    fn reload(&mut self, held: &RegCache) {
        for (h, r) in held.held() {
            self.gpr_home(GprOp::Load64, h, r);
        }
    }

    /// `op reg, [rbx + gpr(r)]`, encoded here because `dynasm` gives every runtime
    /// displacement 32 bits: with `RBX_BIAS` each GPR takes an 8-bit one.
    fn gpr_home(&mut self, op: GprOp, reg: u8, r: u32) {
        debug_assert!(
            op == GprOp::Store64 || !self.caching || self.cache.dirty() & 1 << r == 0,
            "GPR {r}'s stale home read at {:#x}",
            self.pc
        );
        let (wide, opcode) = op.encoding();
        let rex = 0x40 | (wide as u8) << 3 | (reg >> 3) << 2;
        if rex != 0x40 {
            self.ops.push(rex);
        }
        self.ops.extend(opcode.iter().copied());
        let disp = gpr(r);
        // ModRM: rm = rbx (011), mod 01 = disp8, 10 = disp32.
        match i8::try_from(disp) {
            Ok(d) => self.ops.extend([0x43 | (reg & 7) << 3, d as u8]),
            Err(_) => {
                self.ops.push(0x83 | (reg & 7) << 3);
                self.ops.extend(disp.to_le_bytes());
            }
        }
    }

    /// Runs the instruction in the interpreter (the registers are in `CpuState` already).
    fn fallback(&mut self, op: Op, word: u32) {
        if let Some(c) = self.handoff.crf_deferred.take() {
            let held = self.cache;
            self.crf_again(c, &held);
        }
        self.flush_dirty();
        self.store_pc(self.pc);
        asm!(self.ops ; mov edx, word as i32 ; mov ecx, op as i32 ; xor r8d, r8d);
        self.call(Helper::Interp);
        // The interpreter may have written any GPR (and the call clobbered the caller-saved
        // registers).
        self.cache.clear();
        let at = self.label();
        asm!(self.ops ; mov rax, QWORD [r12 + RET] ; test rax, rax ; jnz =>at);
        self.cold.push(Cold::Interp { at, k: self.k });
        if side_exit(op, Insn(word)) || forward_jump(op, Insn(word)) {
            // A side exit the interpreter took (a jump ahead: always) left its target in
            // `CpuState`; the block goes on only from the next word.
            let on = self.label();
            self.pc_into(RCX, self.pc.wrapping_add(4));
            asm!(self.ops
                ; mov rax, QWORD [rbx + PC]
                ; cmp rax, rcx
                ; je =>on
            );
            self.ops
                .alu_imm(AluImm::Sub, RBP, true, (self.k + 1) as i32);
            self.jmp_probe();
            asm!(self.ops ; =>on);
        }
    }

    // --- CR ---

    /// CR field `bf` = LT/GT/EQ (8/4/2) from the flags of a compare (signed or unsigned)
    /// | XER[SO], for a branch that follows (`crf_flags`). When the next instruction is a
    /// side exit on that field that branches on the flags, the field is left in the flags
    /// (`crf_pending`): the side exit stores it on its taken way, and on the way on unless
    /// a later compare sets the field first ([`fixed::field_set_first`]).
    fn set_crf_from_flags(&mut self, bf: u32, signed: bool) {
        self.handoff.crf_flags = Some((bf, signed));
        if self.caching && self.crf_waits(bf) {
            self.handoff.crf_pending = Some((bf, signed));
        } else {
            self.store_crf_from_flags(bf, signed);
        }
    }

    /// Whether the instruction after this one is a side exit that branches on CR field
    /// `bf` from the host flags (a bit other than SO, no LK, no CTR decrement).
    fn crf_waits(&self, bf: u32) -> bool {
        let Some(&w) = self.words.get(self.k as usize + 1) else {
            return false;
        };
        let (op, i) = (decode(w), Insn(w));
        op == Op::Bc
            && side_exit(op, i)
            && i.rt() & 0x14 == 0x04
            && i.ra() / 4 == bf
            && i.ra() % 4 != 3
    }

    /// Stores CR field `bf` from the flags of a compare, with instructions that leave the
    /// flags as they are. Clobbers `rcx`, `rdx` and `r13`.
    fn store_crf_from_flags(&mut self, bf: u32, signed: bool) {
        asm!(self.ops
            ; movzx ecx, BYTE [rbx + SO]
            ; lea edx, [rcx + 4]
            ; lea r13d, [rcx + 8]
            ; lea ecx, [rcx + 2]
        );
        if signed {
            asm!(self.ops ; cmovg ecx, edx ; cmovl ecx, r13d);
        } else {
            asm!(self.ops ; cmova ecx, edx ; cmovb ecx, r13d);
        }
        self.insert_crf(bf);
    }

    /// CR field `bf` = `cl` (4 bits).
    fn insert_crf(&mut self, bf: u32) {
        asm!(self.ops ; mov BYTE [rbx + CRF + bf as i32], cl);
    }

    /// ZF clear when CR bit `bi` is set.
    fn test_cr_bit(&mut self, bi: u32) {
        asm!(self.ops ; test BYTE [rbx + CRF + (bi / 4) as i32], (8 >> (bi % 4)) as i8);
    }

    /// `eax` = the condition register as `mfcr` reads it (CR0 in the top nibble); clobbers
    /// `rcx` and `rdx`. The fields' bytes, CR0 first, become nibbles CR0 first: byte-swapped, each
    /// round halves the gap between neighbouring values.
    fn pack_cr(&mut self) {
        asm!(self.ops ; mov rax, QWORD [rbx + CRF] ; bswap rax);
        for (sh, keep) in CR_PACK {
            asm!(self.ops ; mov rcx, rax ; shr rcx, sh as i8 ; or rax, rcx);
            self.and_mask(keep);
        }
    }

    /// The fields that `mask` (bit 7 = CR0) selects from `eax` (as `mtcrf` takes them);
    /// clobbers `rcx` and `rdx`. The inverse of [`Em::pack_cr`]'s rounds ([`CR_SPREAD`])
    /// spreads the nibbles over bytes.
    fn unpack_cr(&mut self, mask: u32) {
        let bytes = (0..8)
            .filter(|k| mask & (0x80 >> k) != 0)
            .fold(0u64, |m, k| m | 0xff << (8 * k));
        asm!(self.ops ; mov eax, eax);
        for (sh, keep) in CR_SPREAD {
            asm!(self.ops ; mov rcx, rax ; shl rcx, sh as i8 ; or rax, rcx);
            self.and_mask(keep);
        }
        asm!(self.ops ; bswap rax);
        if bytes != u64::MAX {
            asm!(self.ops
                ; mov rcx, QWORD bytes as i64
                ; and rax, rcx
                ; not rcx
                ; and rcx, QWORD [rbx + CRF]
                ; or rax, rcx
            );
        }
        asm!(self.ops ; mov QWORD [rbx + CRF], rax);
    }

    /// CR0 from `rax` (a recording instruction, 64-bit mode); keeps `rax`.
    fn record(&mut self) {
        self.record_from(RAX);
    }

    /// CR0 from host register `reg`; keeps it.
    fn record_from(&mut self, reg: u8) {
        asm!(self.ops ; test Rq(reg), Rq(reg));
        self.set_crf_from_flags(0, true);
    }

    /// `rax` → GPR `r`, recording CR0 when `rc`.
    fn set_rc(&mut self, r: u32, rc: bool) {
        self.gpr_rm(GprOp::Store64, RAX, r);
        if rc {
            self.record();
            self.handoff.cmp_src = Some(fixed::CmpSrc::record(r));
        }
    }

    fn set_gpr(&mut self, r: u32) {
        self.gpr_rm(GprOp::Store64, RAX, r);
    }

    /// The host register holding GPR `r`, without counting a use or taking one.
    fn cache_peek(&self, r: u32) -> Option<u8> {
        self.cache.held().find(|&(_, g)| g == r).map(|(h, _)| h)
    }

    /// `rax &= m`, with the shortest encoding.
    fn and_mask(&mut self, m: u64) {
        if m == u64::MAX {
        } else if m == 0xffff_ffff {
            asm!(self.ops ; mov eax, eax);
        } else if m as i64 == m as i32 as i64 {
            self.ops.alu_imm(AluImm::And, RAX, true, m as i32);
        } else {
            asm!(self.ops ; mov rdx, QWORD m as i64 ; and rax, rdx);
        }
    }

    // --- memory ---

    /// Queues the interpreter as the slow path at `slow` of the instruction being translated,
    /// which goes on at `back` (the register cache as it is there).
    fn interp_slow(&mut self, slow: DynamicLabel, back: DynamicLabel, op: Op, i: Insn) {
        self.push_slow(Cold::InterpSlow {
            at: slow,
            back,
            held: self.cache,
            op,
            word: i.0,
            k: self.k,
            pc: self.pc,
        });
    }

    // --- branches ---

    /// Translates one instruction natively; false leaves it to the interpreter. `ended`:
    /// set when the instruction left the block (a branch).
    fn native(&mut self, op: Op, i: Insn, ended: &mut bool) -> bool {
        // Overflow-recording (OE) forms stay in the interpreter.
        if op.info().flags.contains(InsnFlags::OE) && i.oe() {
            return false;
        }
        match table::TRANSLATORS[op as usize] {
            Some(translate) => translate(self, op, i, ended),
            None => false,
        }
    }
}
