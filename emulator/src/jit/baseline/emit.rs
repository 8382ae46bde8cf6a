//! Guest block → x86-64, emitted in one pass with `dynasm`. Guest registers stay current
//! at their homes in `CpuState` (every instruction stores what it writes; copies of GPRs the
//! block uses again are kept in host registers, write-through: `regcache`), so that an
//! interpreter call, a fault or an exit needs no write-back and a block can be left anywhere.
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
//! Everything rare (TLB misses, faults, the entry's stop and promotion exits) is emitted
//! out of line after the body: translations of a real guest take hundreds of MiB, and the
//! instruction cache holds only the hot paths it fetches.
//!
//! This file holds the block frame (entry, exits, probes, out-of-line code) and the register
//! cache's plumbing; the instructions are translated by family, one file each (`fixed`,
//! `branch`, `memory`, `system`, `vector`), and `table` says which family translates each
//! op of the ISA table (none: the interpreter runs it).

// dynasm converts a dynamic register operand with `.into()`, a no-op for our `u8` registers.
#![allow(clippy::useless_conversion)]

use super::super::{BlockKey, JC_SIZE, JcEntry, JitCtx, TLB_IDX_BYTES, TLB_TABLE_PTR, helpers};
use super::regcache::{RegCache, later_gprs};
use super::{BASELINE_JC_TAG, PROMOTE};
use crate::cpu::{CpuState, NO_RESERVATION, msr};
use crate::engine::Cpu;
use crate::isa::{Insn, InsnFlags, Op, Operand, decode};
use crate::softmmu::{
    Access, PAGE_MASK, PAGE_SIZE, TLB_ENTRIES, TlbEntry, fast_path_mask, mmu_idx,
};
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
mod branch;
mod fixed;
mod memory;
mod system;
mod table;
mod vector;

pub use table::native_ops;

/// `rbx` points this far into `Cpu`: at GPR 16, so that all 32 GPRs are within a signed
/// 8-bit displacement ([`Em::gpr_rm`]), three bytes shorter per access than a 32-bit one.
/// Fields after the GPRs take 32-bit displacements as before.
const RBX_BIAS: i32 = (offset_of!(Cpu, st) + offset_of!(CpuState, gpr)) as i32 + 8 * 16;
const ST: i32 = offset_of!(Cpu, st) as i32 - RBX_BIAS;
const fn gpr(r: u32) -> i32 {
    ST + offset_of!(CpuState, gpr) as i32 + 8 * r as i32
}
const CR: i32 = ST + offset_of!(CpuState, cr) as i32;
const CA: i32 = ST + offset_of!(CpuState, ca) as i32;
const SO: i32 = ST + offset_of!(CpuState, so) as i32;
const LR: i32 = ST + offset_of!(CpuState, lr) as i32;
const CTR: i32 = ST + offset_of!(CpuState, ctr) as i32;
const fn vsr(r: u32) -> i32 {
    ST + offset_of!(CpuState, vsr) as i32 + 16 * r as i32
}
const PC: i32 = ST + offset_of!(CpuState, pc) as i32;
const RESERVE_ADDR: i32 = ST + offset_of!(CpuState, reserve_addr) as i32;
const RESERVE_SIZE: i32 = ST + offset_of!(CpuState, reserve_size) as i32;
const RESERVE_VAL: i32 = ST + offset_of!(CpuState, reserve_val) as i32;
const TLB_FLUSH_PENDING: i32 = offset_of!(Cpu, tlb_flush_pending) as i32 - RBX_BIAS;
const EVENTS: i32 = offset_of!(Cpu, events) as i32 - RBX_BIAS;
const BUDGET: i32 = offset_of!(JitCtx, budget) as i32;
const KICK: i32 = offset_of!(JitCtx, kick) as i32;
const JC: i32 = offset_of!(JitCtx, jc) as i32;
const RET: i32 = offset_of!(JitCtx, ret) as i32;
const FAULT: i32 = offset_of!(JitCtx, fault) as i32;
const LINK: i32 = offset_of!(JitCtx, link) as i32;
const OPTIMIZED: i32 = offset_of!(JitCtx, optimized_entry) as i32;
const BEYOND_USER_SPAN: i32 = offset_of!(JitCtx, beyond_user_span) as i32;

/// Code of one block.
pub struct Emitted {
    pub code: Vec<u8>,
    /// Instructions translated natively / left to the interpreter.
    pub native: u32,
    pub fallbacks: u32,
    /// Offsets where the body, the exits and the out-of-line code start (the entry checks
    /// come first): sections of `PPC64EMU_LOG=perfmap`.
    pub sections: [u32; 3],
    /// `rel32` fields of jumps, calls and RIP-relative operands whose target is outside the
    /// block (shared stubs, the block's counter), resolved where the code is placed
    /// ([`Emitted::place`]).
    pub fixups: Vec<Fixup>,
    /// Host-guarded memory ([`Space::guarded`]): each direct access instruction's offset
    /// and the offset of the miss path a host fault on it resumes at.
    pub fault_sites: Vec<(u32, u32)>,
}

/// A `rel32` field at `off` in a block's code that must reach `target`; `tail`: bytes of
/// the instruction after the field (an immediate), which the displacement is relative to.
#[derive(Clone, Copy, Debug)]
pub struct Fixup {
    off: u32,
    tail: u8,
    target: usize,
}

impl Emitted {
    /// Resolves the jumps to shared stubs for the code copied to `at`.
    ///
    /// # Safety
    /// `at` holds a copy of `code`, writable, not yet run.
    pub unsafe fn place(&self, at: *mut u8) {
        for &Fixup { off, tail, target } in &self.fixups {
            let next = at as i64 + off as i64 + 4 + tail as i64;
            let disp = i32::try_from(target as i64 - next).expect("target out of rel32 reach");
            // SAFETY: `off + 4 <= code.len()` (an emitted rel32 field) inside the copy.
            unsafe { (at.add(off as usize) as *mut [u8; 4]).write_unaligned(disp.to_le_bytes()) };
        }
    }
}

/// Code every block of the machine shares, placed once in the code region next to the
/// entry trampoline (blocks reach it with `rel32` jumps and calls): the return to the run
/// loop and one thunk per helper. Keeping it out of the blocks makes each translation a few
/// hundred bytes smaller, and the instruction cache holds the hot paths of more blocks.
#[derive(Clone, Copy, Debug)]
pub struct Stubs {
    /// Pops the trampoline's frame and returns to the run loop.
    pub exit: usize,
    /// `helper(cpu, ctx, rdx, rcx, r8)`: sets the first two arguments and jumps to the
    /// helper, in the order of [`HELPERS`].
    pub thunks: [usize; HELPERS.len()],
}

/// A block's execution counter, in two parts so that the part every entry touches is one
/// byte: the entries counted by the translated code dominate a cold block's cost, and 388 k
/// blocks of a Linux build keep 1.5 MB of 4-byte counters, which miss in the cache.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    /// The low byte, decremented on every entry (within `rel32` reach of the code).
    pub low: usize,
    /// The high part (`u32`), decremented each time the low byte wraps; the block asks to be
    /// promoted when it goes negative.
    pub high: usize,
}

/// The helpers blocks call, each through its thunk.
pub const HELPERS: [Helper; 4] = [
    Helper::Interp,
    Helper::Load,
    Helper::Store,
    Helper::RunOptimized,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helper {
    Interp,
    Load,
    Store,
    RunOptimized,
}

impl Helper {
    fn address(self) -> usize {
        match self {
            Helper::Interp => helpers::interp as *const () as usize,
            Helper::Load => helpers::load as *const () as usize,
            Helper::Store => helpers::store as *const () as usize,
            Helper::RunOptimized => helpers::run_optimized as *const () as usize,
        }
    }
}

/// The shared return to the run loop (after the trampoline's frame).
pub fn exit_stub() -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    asm!(ops ; mov QWORD [r12 + BUDGET], rbp ; add rsp, 8 ; pop rbp ; pop r15 ; pop r14 ; pop r13 ; pop r12 ; pop rbx ; ret);
    ops.finalize().expect("exit stub")
}

/// The thunk of `h`: `cpu` and `ctx` into the first two argument registers, then the helper
/// (a tail jump: the block's `call` return address is the helper's).
pub fn thunk(h: Helper) -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    asm!(ops ; lea rdi, [rbx - RBX_BIAS] ; mov rsi, r12 ; mov rax, QWORD h.address() as i64 ; jmp rax);
    ops.finalize().expect("helper thunk")
}

/// The probe exit of blocks of MSR state `flags` (`rax` = next PC, budget charged), called by
/// the block: a baseline block for it in the jump cache is returned in `rcx` for the block's
/// own indirect jump (the target's entry checks the budget);
/// an optimized block of the same MSR state is run through `helpers::run_optimized`, after
/// which the probe goes on from the PC it left; anything else returns to the run loop.
///
/// With `unlinked_of` (the address of that stub), the variant for direct exits whose jump is
/// not linked (`r13` = the jump's displacement): a baseline target, or none in the jump
/// cache, returns with `JitCtx::link` naming the jump so that the run loop links it; an
/// optimized target is run at once and the plain probe goes on. Without it, a block whose
/// same-page successor was promoted would return to the run loop on every pass (baseline
/// jumps link only to baseline blocks).
pub fn probe_stub(flags: u64, stubs: &Stubs, unlinked_of: Option<usize>) -> Emitted {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    let probe = ops.new_dynamic_label();
    let mut e = Em {
        ops,
        key: BlockKey {
            pc: 0,
            host: 0,
            flags,
        },
        le: flags & msr::LE != 0,
        idx_read: 0,
        idx_write: 0,
        k: 0,
        pc: 0,
        cold: Vec::new(),
        probe: Exit::Local(probe),
        stubs: *stubs,
        fixups: Vec::new(),
        cache: RegCache::default(),
        caching: false,
        later: Vec::new(),
        flat: None,
        guarded: false,
        sites: Vec::new(),
        user: false,
        crf_r8: None,
        prev_crf: None,
    };
    e.emit_probe(probe, unlinked_of);
    Emitted {
        code: e.ops.finalize().expect("probe stub"),
        native: 0,
        fallbacks: 0,
        sections: [0; 3],
        fixups: e.fixups,
        fault_sites: Vec::new(),
    }
}

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
    /// One process on one vCPU: no kick and no events from elsewhere, so block entries
    /// test only the budget.
    pub user: bool,
}

/// Host registers by encoding number, for [`Em::gpr_rm`].
const RAX: u8 = 0;
const RCX: u8 = 1;
const RDX: u8 = 2;
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

/// Where a block's probe exits go: its own copy (when the machine has no room for another
/// shared one) or the shared stubs of its MSR state (see [`probe_stub`]).
#[derive(Clone, Copy)]
enum Exit {
    Local(DynamicLabel),
    Shared { probe: usize, unlinked: usize },
}

/// The shared probe stubs of one MSR state: the plain one and the unlinked-exit variant.
#[derive(Clone, Copy, Debug)]
pub struct ProbeStubs {
    pub probe: usize,
    pub unlinked: usize,
}

/// What a store writes: a GPR, or doubleword 0 of a VSR (an FPR for VSRs 0-31).
#[derive(Clone, Copy)]
enum StoreSrc {
    Gpr(u32),
    Dw0(u32),
}

/// Out-of-line code, emitted after the block body so that the hot path stays dense.
enum Cold {
    /// Leave before the first instruction (budget spent, kick or events): the block's PC.
    Stop { at: DynamicLabel },
    /// The low byte of the block's execution counter wrapped: a tick off the high word at
    /// `high`; when that runs out, ask the run loop to promote the block.
    Tick {
        at: DynamicLabel,
        back: DynamicLabel,
        high: usize,
    },
    /// A direct exit not linked yet: returns with `JitCtx::link` naming the jump at `site`
    /// (through the unlinked-exit probe, which runs an optimized target at once).
    Unlinked {
        at: DynamicLabel,
        site: DynamicLabel,
        target: u64,
    },
    /// A load's TLB miss (or unaligned, device, watched access): `helpers::load`, then
    /// back to `back` with the value in `rax`, or to the fault exit.
    LoadMiss {
        at: DynamicLabel,
        back: DynamicLabel,
        held: RegCache,
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
    /// A memory access at `pc` faulted: `k` instructions retired.
    Fault { at: DynamicLabel, k: u32, pc: u64 },
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
    ops: VecAssembler<X64Relocation>,
    key: BlockKey,
    le: bool,
    idx_read: i32,
    idx_write: i32,
    /// Index of the instruction being translated and its address.
    k: u32,
    pc: u64,
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
    /// The CR field whose LT/GT/EQ bits the instruction just translated left in `r8d`
    /// (8/4/2, as `cmp_field` makes them), and the same for the one before it (`prev_crf`):
    /// a conditional branch right after a compare tests the register, not the CR home it
    /// was just stored to, so that a mispredicted branch resolves without a store-to-load
    /// round trip.
    crf_r8: Option<u32>,
    prev_crf: Option<u32>,
}

/// The entry trampoline, `extern "C" fn(cpu, ctx, code)`: saves the callee-saved registers
/// blocks use, pins the two pointers and jumps to the block; every exit pops and returns.
pub fn trampoline() -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    // Six pushes and eight bytes keep rsp 16-byte aligned for helper calls. `rbp` holds the
    // budget while blocks run, `r15` a copy of a guest GPR (`regcache`).
    asm!(ops
        ; push rbx
        ; push r12
        ; push r13
        ; push r14
        ; push r15
        ; push rbp
        ; sub rsp, 8
        ; mov r14, QWORD [rdi + TLB_TABLE_PTR]
        ; lea rbx, [rdi + RBX_BIAS]
        ; mov r12, rsi
        ; mov rbp, QWORD [r12 + BUDGET]
        ; jmp rdx
    );
    ops.finalize().expect("trampoline")
}

/// Translates `words` (the block at `key.pc`). `counter`: the block's execution counter,
/// if it has one (the block asks for promotion when it runs out). `probe`:
/// the shared probe exits of the block's MSR state, if the machine has them. `space`: what
/// the address space promises (user mode's).
pub fn emit(
    key: BlockKey,
    words: &[u32],
    counter: Option<Counter>,
    stubs: &Stubs,
    probe: Option<ProbeStubs>,
    space: Space,
) -> Emitted {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    let probe = match probe {
        Some(p) => Exit::Shared {
            probe: p.probe,
            unlinked: p.unlinked,
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
        pc: key.pc,
        cold: Vec::new(),
        probe,
        stubs: *stubs,
        fixups: Vec::new(),
        cache: RegCache::default(),
        caching: true,
        later: later_gprs(words),
        flat: space.flat_base,
        guarded: space.guarded && space.flat_base.is_some(),
        sites: Vec::new(),
        user: space.user,
        crf_r8: None,
        prev_crf: None,
    };
    e.entry(counter);
    let body = e.ops.offset().0 as u32;
    // 32-bit mode (rare: early boot) runs everything through the interpreter.
    let native_ok = key.flags & msr::SF != 0;
    let (mut native, mut fallbacks) = (0, 0);
    let mut ended = false;
    let mut last_fallback = false;
    for (k, &w) in words.iter().enumerate() {
        e.k = k as u32;
        e.pc = key.pc.wrapping_add(4 * k as u64);
        e.prev_crf = e.crf_r8.take();
        let op = decode(w);
        let done = native_ok && e.native(op, Insn(w), &mut ended);
        if done {
            native += 1;
        } else {
            fallbacks += 1;
            e.fallback(op, w);
        }
        last_fallback = !done;
    }
    if !ended {
        let n = words.len() as u32;
        if last_fallback {
            // The interpreter left the next PC in `CpuState`.
            asm!(e.ops ; sub rbp, n as i32 ; mov rax, QWORD [rbx + PC]);
            e.jmp_probe();
        } else {
            e.exit_direct(n, key.pc.wrapping_add(4 * n as u64));
        }
    }
    let probe = e.ops.offset().0 as u32;
    let cold = e.emit_cold();
    let fault_sites = e
        .sites
        .iter()
        .map(|&(at, miss)| {
            let miss = e.ops.labels().resolve_dynamic(miss).expect("miss path");
            (at, miss.0 as u32)
        })
        .collect();
    Emitted {
        code: e.ops.finalize().expect("block code"),
        native,
        fallbacks,
        sections: [body, probe, cold],
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
            self.gpr_home(op, reg, r);
            let copy = match self.cache.find(r) {
                Some(h) => Some(h),
                None => wanted.then(|| self.cache.take(r)),
            };
            if let Some(h) = copy {
                self.reg_reg(GprOp::Store64, reg, h);
            }
            return;
        }
        match self.cache.find(r) {
            Some(h) => self.reg_reg(op, reg, h),
            None if wanted => {
                let h = self.cache.take(r);
                self.gpr_home(GprOp::Load64, h, r);
                self.reg_reg(op, reg, h);
            }
            None => self.gpr_home(op, reg, r),
        }
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

    /// A `jmp` or `call` (`opcode`) to a shared stub at `target`.
    fn branch_to_stub(&mut self, opcode: u8, target: usize) {
        self.ops.push(opcode);
        self.rel32(target, 0);
    }

    /// A `rel32` field reaching `target` from the end of an instruction `tail` bytes later.
    fn rel32(&mut self, target: usize, tail: u8) {
        let off = self.ops.offset().0 as u32;
        self.fixups.push(Fixup { off, tail, target });
        self.ops.extend([0u8; 4]);
    }

    /// Returns to the run loop.
    fn epilogue(&mut self) {
        self.branch_to_stub(0xe9, self.stubs.exit);
    }

    /// Leaves through the probe exit (`rax` = next PC, budget charged).
    ///
    /// The probe is called and returns the target block in `rcx` when the jump cache has
    /// one, so that the indirect jump is the block's own: one shared jump for every indirect
    /// exit of the machine left the host's branch predictor a single site for all targets.
    fn jmp_probe(&mut self) {
        match self.probe {
            Exit::Local(l) => asm!(self.ops ; call =>l),
            Exit::Shared { probe, .. } => self.branch_to_stub(0xe8, probe),
        }
        asm!(self.ops ; jmp rcx);
    }

    fn store_pc(&mut self, pc: u64) {
        asm!(self.ops ; mov rax, QWORD pc as i64 ; mov QWORD [rbx + PC], rax);
    }

    /// Block entry: the promotion counter, then the budget, the kick flag and pending
    /// events, so that a vCPU leaves a chain of linked blocks promptly. In user mode only
    /// the budget: nothing but the vCPU's own instructions stops it there, and the
    /// interpreter's helper already stops the block when one of them leaves events.
    fn entry(&mut self, counter: Option<Counter>) {
        let stop = self.label();
        if let Some(c) = counter {
            // `sub byte [rip + low], 1`: every 256th entry (the byte wraps to 0) takes a
            // tick off the word out of line.
            let (tick, back) = (self.label(), self.label());
            self.ops.extend([0x80, 0x2d]);
            self.rel32(c.low, 1);
            self.ops.push(1);
            asm!(self.ops ; jz =>tick ; =>back);
            self.cold.push(Cold::Tick {
                at: tick,
                back,
                high: c.high,
            });
        }
        asm!(self.ops ; test rbp, rbp ; jle =>stop);
        if !self.user {
            asm!(self.ops
                ; mov rax, QWORD [r12 + KICK]
                ; cmp BYTE [rax], 0
                ; jne =>stop
                ; cmp DWORD [rbx + EVENTS], 0
                ; jne =>stop
            );
        }
        self.cold.push(Cold::Stop { at: stop });
    }

    /// Emits the block's own probe exit if it has one and the out-of-line code; returns
    /// where the latter starts.
    fn emit_cold(&mut self) -> u32 {
        if let Exit::Local(l) = self.probe {
            self.emit_probe(l, None);
        }
        let cold = self.ops.offset().0 as u32;
        // Out-of-line code reads the homes and reloads the copies it returns to.
        (self.caching, self.cache) = (false, RegCache::default());
        // Cold code may queue more cold code (an interpreter slow path queues its exit).
        while !self.cold.is_empty() {
            for c in std::mem::take(&mut self.cold) {
                self.emit_cold_item(c);
            }
        }
        cold
    }

    /// The probe exit at `probe`; with `unlinked_of`, its unlinked-exit variant, which goes
    /// on at that plain probe after running an optimized block (see [`probe_stub`]).
    ///
    /// The plain probe is called (`Em::jmp_probe`): a baseline target in the jump cache is
    /// returned in `rcx`; every other way drops the return address and does not come back.
    /// The unlinked variant is jumped to.
    fn emit_probe(&mut self, probe: DynamicLabel, unlinked_of: Option<usize>) {
        let called = unlinked_of.is_none();
        let (out, optimized) = (self.label(), self.label());
        // Where the run loop is asked to link the jump in `r13` to the block at the PC.
        let out_link = if unlinked_of.is_some() {
            self.label()
        } else {
            out
        };
        // Ways out of the lookup: the called probe first drops its return address.
        let (miss, other) = if called {
            (self.label(), self.label())
        } else {
            (out_link, optimized)
        };
        let tag = (self.key.flags | BASELINE_JC_TAG) as i64;
        let exec = mmu_idx(self.key.flags, Access::Exec) as i32 * TLB_IDX_BYTES;
        let exec_tag = exec + offset_of!(TlbEntry, exec) as i32;
        let exec_addend = exec + offset_of!(TlbEntry, addend) as i32;
        asm!(self.ops
            ; =>probe
            ; mov QWORD [rbx + PC], rax
            ; mov rcx, rax
            ; shr rcx, 2
            ; and ecx, (JC_SIZE - 1) as i32
            ; imul ecx, ecx, size_of::<JcEntry>() as i32
            ; add rcx, QWORD [r12 + JC]
            ; cmp rax, QWORD [rcx + offset_of!(JcEntry, pc) as i32]
            ; jne =>miss
            // The entry holds while the PC's exec TLB entry maps the page it was made for.
            ; mov rdx, rax
            ; shr rdx, 12
            ; and edx, (TLB_ENTRIES - 1) as i32
            ; shl edx, size_of::<TlbEntry>().trailing_zeros() as i8
            ; mov rsi, rax
            ; and rsi, PAGE_MASK as i32
            ; cmp rsi, QWORD [r14 + rdx + exec_tag]
            ; jne =>miss
            ; mov rsi, QWORD [r14 + rdx + exec_addend]
            ; cmp rsi, QWORD [rcx + offset_of!(JcEntry, addend) as i32]
            ; jne =>miss
            ; mov rdx, QWORD tag
            ; cmp rdx, QWORD [rcx + offset_of!(JcEntry, flags) as i32]
            ; jne =>other
        );
        if called {
            asm!(self.ops
                ; mov rcx, QWORD [rcx + offset_of!(JcEntry, f) as i32]
                ; ret
                ; =>miss
                ; add rsp, 8
                ; jmp =>out_link
                ; =>other
                ; add rsp, 8
            );
        } else {
            // A baseline target: the run loop links the jump to it.
            asm!(self.ops ; jmp =>out_link);
        }
        asm!(self.ops
            ; =>optimized
            ; mov rdx, QWORD self.key.flags as i64
            ; cmp rdx, QWORD [rcx + offset_of!(JcEntry, flags) as i32]
            ; jne =>out_link
            ; cmp QWORD [r12 + OPTIMIZED], 0
            ; je =>out_link
            ; mov rdx, QWORD [rcx + offset_of!(JcEntry, f) as i32]
            ; mov rcx, QWORD self.key.flags as i64
            ; mov QWORD [r12 + BUDGET], rbp
        );
        self.call(Helper::RunOptimized);
        asm!(self.ops
            ; mov rbp, QWORD [r12 + BUDGET]
            ; cmp QWORD [r12 + RET], 0
            ; jne =>out
            ; mov rax, QWORD [rbx + PC]
        );
        // Probe again from the PC the optimized code left.
        match unlinked_of {
            Some(plain) => self.branch_to_stub(0xe8, plain),
            None => asm!(self.ops ; call =>probe),
        }
        asm!(self.ops ; jmp rcx);
        if unlinked_of.is_some() {
            asm!(self.ops ; =>out_link ; mov QWORD [r12 + LINK], r13);
        }
        asm!(self.ops ; =>out);
        self.epilogue();
    }

    fn emit_cold_item(&mut self, c: Cold) {
        {
            match c {
                Cold::InterpSlow {
                    at,
                    back,
                    held,
                    op,
                    word,
                    k,
                    pc,
                } => {
                    asm!(self.ops ; =>at);
                    (self.k, self.pc) = (k, pc);
                    self.fallback(op, word);
                    self.reload(&held);
                    asm!(self.ops ; jmp =>back);
                }
                Cold::Stop { at } => {
                    asm!(self.ops ; =>at);
                    self.store_pc(self.key.pc);
                    self.epilogue();
                }
                Cold::Unlinked { at, site, target } => {
                    asm!(self.ops ; =>at);
                    if let Exit::Shared { unlinked, .. } = self.probe {
                        asm!(self.ops ; lea r13, [=>site] ; mov rax, QWORD target as i64);
                        self.branch_to_stub(0xe9, unlinked);
                    } else {
                        self.store_pc(target);
                        asm!(self.ops ; lea rax, [=>site] ; mov QWORD [r12 + LINK], rax);
                        self.epilogue();
                    }
                }
                Cold::Tick { at, back, high } => {
                    // Retires nothing when it promotes: the run loop promotes the block and
                    // runs it again.
                    let promote = self.label();
                    asm!(self.ops
                        ; =>at
                        ; mov rax, QWORD high as i64
                        ; sub DWORD [rax], 1
                        ; js =>promote
                        ; jmp =>back
                        ; =>promote
                    );
                    self.store_pc(self.key.pc);
                    asm!(self.ops ; mov QWORD [r12 + LINK], PROMOTE as i32);
                    self.epilogue();
                }
                Cold::LoadMiss {
                    at,
                    back,
                    held,
                    size,
                    le,
                    fault,
                } => {
                    asm!(self.ops ; =>at ; mov rdx, r13 ; mov ecx, size as i32 ; mov r8d, le as i32);
                    self.call(Helper::Load);
                    asm!(self.ops
                        ; cmp DWORD [r12 + FAULT], 0
                        ; jne =>fault
                    );
                    self.reload(&held);
                    asm!(self.ops
                        ; mov rax, QWORD [r12 + RET]
                        ; jmp =>back
                    );
                }
                Cold::StoreMiss {
                    at,
                    back,
                    held,
                    src,
                    size,
                    le,
                    update_ra,
                    fault,
                    k,
                    next,
                } => {
                    let wrote_code = self.label();
                    asm!(self.ops ; =>at ; mov rdx, r13);
                    self.store_src(RCX, src);
                    asm!(self.ops ; mov r8d, (size | (le as u32) << 8) as i32);
                    self.call(Helper::Store);
                    asm!(self.ops
                        ; mov rax, QWORD [r12 + RET]
                        ; cmp eax, helpers::STOP_FAULT as i32
                        ; je =>fault
                        ; test eax, eax
                        ; jnz =>wrote_code
                    );
                    self.reload(&held);
                    asm!(self.ops
                        ; jmp =>back
                        ; =>wrote_code
                    );
                    // The rest of the block may be stale: stop after this instruction.
                    if let Some(ra) = update_ra {
                        self.gpr_rm(GprOp::Store64, R13, ra);
                    }
                    self.store_pc(next);
                    asm!(self.ops ; sub rbp, k as i32);
                    self.epilogue();
                }
                Cold::Interp { at, k } => {
                    // STOP_FAULT retires nothing more, STOP_AFTER this instruction.
                    asm!(self.ops ; =>at ; lea rax, [rax + k as i32 - 1] ; sub rbp, rax);
                    self.epilogue();
                }
                Cold::Fault { at, k, pc } => {
                    asm!(self.ops ; =>at);
                    self.store_pc(pc);
                    asm!(self.ops ; sub rbp, k as i32);
                    self.epilogue();
                }
            }
        }
    }

    /// Leaves the block for `target` with `retired` instructions done. A target on the
    /// block's own page gets a patchable jump (initially to the next instruction, which
    /// returns with `JitCtx::link` naming the jump); others go through the probe.
    fn exit_direct(&mut self, retired: u32, target: u64) {
        asm!(self.ops ; sub rbp, retired as i32);
        // A user process's pages never change mapping (an unmapped, replaced or no longer
        // executable page drops its blocks, and with them the jumps into them), so its
        // exits link to any page.
        if !self.user && target & PAGE_MASK != self.key.pc & PAGE_MASK {
            asm!(self.ops ; mov rax, QWORD target as i64);
            self.jmp_probe();
            return;
        }
        // The displacement must be 4-byte aligned so that patching it is one atomic store.
        while !(self.ops.offset().0 + 1).is_multiple_of(4) {
            asm!(self.ops ; nop);
        }
        let (site, unlinked) = (self.label(), self.label());
        self.ops.push(0xe9);
        asm!(self.ops ; =>site);
        self.ops.extend([0u8; 4]);
        // Unlinked, the jump falls through to here: the way out is out of line.
        asm!(self.ops ; jmp =>unlinked);
        self.cold.push(Cold::Unlinked {
            at: unlinked,
            site,
            target,
        });
    }

    /// Leaves the block for the PC in `rax` with `retired` instructions done.
    fn exit_indirect(&mut self, retired: u32) {
        asm!(self.ops ; sub rbp, retired as i32);
        self.jmp_probe();
    }

    /// `helper(cpu, ctx, rdx, rcx, r8)` through its thunk: the caller has set the three
    /// arguments.
    fn call(&mut self, h: Helper) {
        let i = HELPERS
            .iter()
            .position(|&x| x == h)
            .expect("a helper with a thunk");
        self.branch_to_stub(0xe8, self.stubs.thunks[i]);
    }

    /// Runs the instruction in the interpreter (the registers are in `CpuState` already).
    fn fallback(&mut self, op: Op, word: u32) {
        self.store_pc(self.pc);
        asm!(self.ops ; mov edx, word as i32 ; mov ecx, op as i32 ; xor r8d, r8d);
        self.call(Helper::Interp);
        // The interpreter may have written any GPR (and the call clobbered the caller-saved
        // registers).
        self.cache.clear();
        let at = self.label();
        asm!(self.ops ; mov rax, QWORD [r12 + RET] ; test rax, rax ; jnz =>at);
        self.cold.push(Cold::Interp { at, k: self.k });
    }

    // --- CR ---

    /// `ecx` = LT/GT/EQ (8/4/2) from the flags of a compare: signed or unsigned.
    fn cmp_field(&mut self, signed: bool) {
        asm!(self.ops ; mov ecx, 2 ; mov edx, 4);
        if signed {
            asm!(self.ops ; cmovg ecx, edx ; mov edx, 8 ; cmovl ecx, edx);
        } else {
            asm!(self.ops ; cmova ecx, edx ; mov edx, 8 ; cmovb ecx, edx);
        }
    }

    /// CR field `bf` = `ecx` | XER[SO] (LT/GT/EQ kept in `r8d` for a branch that follows).
    fn set_crf_with_so(&mut self, bf: u32) {
        asm!(self.ops ; mov r8d, ecx ; or cl, BYTE [rbx + SO]);
        self.crf_r8 = Some(bf);
        self.insert_crf(bf);
    }

    /// CR field `bf` = `ecx` (4 bits); clobbers `edx`.
    fn insert_crf(&mut self, bf: u32) {
        let sh = 28 - 4 * bf as i8;
        let keep = !(0xf_u32 << sh) as i32;
        asm!(self.ops ; shl ecx, sh ; mov edx, DWORD [rbx + CR] ; and edx, keep ; or edx, ecx ; mov DWORD [rbx + CR], edx);
    }

    /// CR0 from `rax` (a recording instruction, 64-bit mode); keeps `rax`.
    fn record(&mut self) {
        self.record_from(RAX);
    }

    /// CR0 from host register `reg`; keeps it.
    fn record_from(&mut self, reg: u8) {
        asm!(self.ops ; test Rq(reg), Rq(reg));
        self.cmp_field(true);
        self.set_crf_with_so(0);
    }

    /// `rax` → GPR `r`, recording CR0 when `rc`.
    fn set_rc(&mut self, r: u32, rc: bool) {
        self.gpr_rm(GprOp::Store64, RAX, r);
        if rc {
            self.record();
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
            asm!(self.ops ; and rax, m as i32);
        } else {
            asm!(self.ops ; mov rdx, QWORD m as i64 ; and rax, rdx);
        }
    }

    // --- memory ---

    /// Queues the interpreter as the slow path at `slow` of the instruction being translated,
    /// which goes on at `back` (the register cache as it is there).
    fn interp_slow(&mut self, slow: DynamicLabel, back: DynamicLabel, op: Op, i: Insn) {
        self.cold.push(Cold::InterpSlow {
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
