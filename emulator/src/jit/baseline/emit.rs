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
//! its place in the shared code region. Direct exits to the block's own guest page end in a
//! patchable `jmp rel32` (see [`super::Shared::link`]); other exits probe the vCPU's jump
//! cache for a baseline block, run an optimized one through `helpers::run_optimized`, and
//! return to the run loop when there is neither.
//!
//! Everything rare (TLB misses, faults, the entry's stop and promotion exits) is emitted
//! out of line after the body: translations of a real guest take hundreds of MiB, and the
//! instruction cache holds only the hot paths it fetches.

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

/// `lvsl`/`lvsr` with a zero shift, host byte order (byte j = element 15 - j).
static LVSL_BASE: [u8; 16] = [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0];
static LVSR_BASE: [u8; 16] = [
    31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
];

/// Host registers by encoding number, for [`Em::gpr_rm`].
const RAX: u8 = 0;
const RCX: u8 = 1;
const RDX: u8 = 2;
const R13: u8 = 13;

/// The second source of [`Em::in_place`]: a GPR or a sign-extended immediate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operand2 {
    Gpr(u32),
    Imm(i32),
}

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

// dynasm converts a dynamic register operand with `.into()`, which is a no-op for our `u8`.
#[allow(clippy::useless_conversion)]
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
        if target & PAGE_MASK != self.key.pc & PAGE_MASK {
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
        asm!(self.ops ; mov r8d, ecx ; movzx edx, BYTE [rbx + SO] ; or ecx, edx);
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

    /// `GPR rt = GPR a op b` computed in `rt`'s host copy (`op h, b`), not in `rax` and
    /// then copied: for the common integer ops whose result the rest of the block reads
    /// again. False (nothing emitted) when `rt` gets no copy, or when `b` is `rt` itself,
    /// held in that copy, and the op does not commute.
    fn in_place(&mut self, op: GprOp, rt: u32, a: u32, b: Operand2, rc: bool) -> bool {
        if !self.caching {
            return false;
        }
        let wanted = self.later[self.k as usize] & 1 << rt != 0;
        let prior = self.cache.find(rt);
        if prior.is_none() && !wanted {
            return false;
        }
        let commutes = matches!(op, GprOp::Add64 | GprOp::And64 | GprOp::Or64 | GprOp::Xor64);
        let (mut a, mut b) = (a, b);
        if b == Operand2::Gpr(rt) && a != rt {
            if commutes {
                (a, b) = (rt, Operand2::Gpr(a));
            } else if prior.is_some() {
                return false;
            }
        }
        let h = match prior {
            Some(h) => h,
            None => self.cache.take(rt),
        };
        // Sources come from copies or homes; none is given a copy here, so that taking one
        // cannot evict `h`.
        if a != rt || prior.is_none() {
            match self.cache_peek(a) {
                Some(c) if c != h => self.reg_reg(GprOp::Load64, h, c),
                _ => self.gpr_home(GprOp::Load64, h, a),
            }
        }
        match b {
            Operand2::Gpr(r) => match self.cache_peek(r) {
                Some(c) if !(r == rt && prior.is_none()) => self.reg_reg(op, h, c),
                _ => self.gpr_home(op, h, r),
            },
            Operand2::Imm(v) => match op {
                GprOp::Add64 => asm!(self.ops ; add Rq(h), v),
                GprOp::And64 => asm!(self.ops ; and Rq(h), v),
                GprOp::Or64 => asm!(self.ops ; or Rq(h), v),
                GprOp::Xor64 => asm!(self.ops ; xor Rq(h), v),
                _ => unreachable!("immediate form of {}", op.encoding().1[0]),
            },
        }
        self.gpr_home(GprOp::Store64, h, rt);
        if rc {
            self.record_from(h);
        }
        true
    }

    /// The host copy of GPR `rd` holding GPR `a` (loaded with `load`, `Load64` or
    /// `Load32`), for a one-source result computed in place; `None` (nothing emitted)
    /// when `rd` gets no copy.
    fn dest_from(&mut self, rd: u32, a: u32, load: GprOp) -> Option<u8> {
        if !self.caching {
            return None;
        }
        let wanted = self.later[self.k as usize] & 1 << rd != 0;
        let prior = self.cache.find(rd);
        if prior.is_none() && !wanted {
            return None;
        }
        let h = prior.unwrap_or_else(|| self.cache.take(rd));
        // A copy just taken holds nothing yet.
        match self.cache_peek(a).filter(|_| a != rd || prior.is_some()) {
            Some(c) if c == h => {
                if load == GprOp::Load32 {
                    asm!(self.ops ; mov Rd(h), Rd(h));
                }
            }
            Some(c) => self.reg_reg(load, h, c),
            None => self.gpr_home(load, h, a),
        }
        Some(h)
    }

    /// `GPR rd = ROTL(GPR rs, sh) & m` in `rd`'s host copy (see [`Em::dest_from`]), as a
    /// word (`rlwinm` with a mask in the low word: the source's low word, zero-extended)
    /// or a doubleword (`rldic[lr]`, `rldic`). Shifts become `shl`/`shr`.
    fn rotate_in_place(&mut self, rd: u32, rs: u32, word: bool, sh: u32, m: u64, rc: bool) -> bool {
        let load = if word { GprOp::Load32 } else { GprOp::Load64 };
        let Some(h) = self.dest_from(rd, rs, load) else {
            return false;
        };
        let bits = if word { 32 } else { 64 };
        let ones = u64::MAX >> (64 - bits);
        let mut m = m;
        if sh != 0 && m == (ones << sh) & ones {
            match word {
                true => asm!(self.ops ; shl Rd(h), sh as i8),
                false => asm!(self.ops ; shl Rq(h), sh as i8),
            }
            m = ones;
        } else if sh != 0 && m == ones >> (bits - sh) {
            match word {
                true => asm!(self.ops ; shr Rd(h), (bits - sh) as i8),
                false => asm!(self.ops ; shr Rq(h), (bits - sh) as i8),
            }
            m = ones;
        } else if sh != 0 {
            match word {
                true => asm!(self.ops ; rol Rd(h), sh as i8),
                false => asm!(self.ops ; rol Rq(h), sh as i8),
            }
        }
        if m == ones {
        } else if word || m == 0xffff_ffff {
            // 32-bit operations zero-extend.
            asm!(self.ops ; and Rd(h), m as i32);
        } else if m as i64 == m as i32 as i64 {
            asm!(self.ops ; and Rq(h), m as i32);
        } else {
            asm!(self.ops ; mov rdx, QWORD m as i64 ; and Rq(h), rdx);
        }
        self.gpr_home(GprOp::Store64, h, rd);
        if rc {
            self.record_from(h);
        }
        true
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

    /// `rax |= GPR[ra] & !m` (the insert of `rlwimi`/`rldimi`).
    fn insert_under_mask(&mut self, ra: u32, m: u64) {
        asm!(self.ops ; mov rdx, QWORD !m as i64);
        self.gpr_rm(GprOp::And64, RDX, ra);
        asm!(self.ops ; or rax, rdx);
    }

    // --- memory ---

    /// Effective address into `r13`: `D(RA|0)`, `DS(RA|0)`, `(RA|0)+RB` (RA for updates).
    fn ea(&mut self, op: Op, i: Insn, update: bool) {
        let ops = op.info().operands;
        let ra = i.ra();
        let base = update || ra != 0;
        let disp = if ops.contains(&Operand::DRa) {
            Some(i.si())
        } else if ops.contains(&Operand::DsRa) {
            Some(i.ds())
        } else {
            None
        };
        match (disp, base) {
            (Some(d), true) => {
                self.gpr_rm(GprOp::Load64, R13, ra);
                asm!(self.ops ; add r13, d as i32);
            }
            (Some(d), false) => asm!(self.ops ; mov r13, d as i32),
            (None, true) => {
                self.gpr_rm(GprOp::Load64, R13, i.rb());
                self.gpr_rm(GprOp::Add64, R13, ra);
            }
            (None, false) => {
                self.gpr_rm(GprOp::Load64, R13, i.rb());
            }
        }
    }

    /// TLB hit test for `size` bytes at `r13` in MMU index `idx` (`tag`: offset of the tag
    /// in `TlbEntry`): jumps to `miss` unless the page is cached and the access aligned;
    /// on a hit `rcx` = the page's addend (host − guest address), so that the access is at
    /// `[rcx + r13]`. With a flat address space the addend is a constant: the access does
    /// not wait for the entry's.
    fn tlb_hit(&mut self, idx: i32, tag: usize, size: u32, miss: DynamicLabel) {
        let base = idx * TLB_IDX_BYTES;
        let (tag, addend) = (
            base + tag as i32,
            base + offset_of!(TlbEntry, addend) as i32,
        );
        // Up to 8 bytes, the alignment bits stay in the compared address (one compare for
        // the page and the alignment); quadwords only need to stay inside the page.
        let (entry_bits, page_bits) = (
            size_of::<TlbEntry>().trailing_zeros(),
            PAGE_MASK.trailing_zeros(),
        );
        let compared = if size > 8 {
            PAGE_MASK
        } else {
            fast_path_mask(size)
        };
        asm!(self.ops
            ; mov eax, r13d
            ; shr eax, (page_bits - entry_bits) as i8
            ; and eax, ((TLB_ENTRIES - 1) << entry_bits) as i32
            ; mov rcx, r13
            ; and rcx, compared as i32
            ; cmp rcx, QWORD [r14 + rax + tag]
            ; jne =>miss
        );
        if size > 8 {
            // Quadwords need not be aligned, only inside the page.
            asm!(self.ops
                ; mov edx, r13d
                ; and edx, !PAGE_MASK as i32
                ; cmp edx, (PAGE_SIZE - size as u64) as i32
                ; ja =>miss
            );
        }
        match self.flat {
            Some(base) => asm!(self.ops ; mov rcx, QWORD base as i64),
            None => asm!(self.ops ; mov rcx, QWORD [r14 + rax + addend]),
        }
    }

    /// The hit test of a plain access (alignment aside, what the host does for it is what
    /// the guest's page allows): the TLB's, or host-guarded memory's.
    fn host_address(&mut self, idx: i32, tag: usize, size: u32, miss: DynamicLabel) {
        if self.guarded {
            self.guarded_address(miss);
        } else {
            self.tlb_hit(idx, tag, size, miss);
        }
    }

    /// Host-guarded memory's hit test: `rcx` = the range's addend when `r13` is in the
    /// process's range (jumps to `miss` otherwise). The caller marks its access instruction
    /// with [`Em::fault_site`]; page protections do the rest.
    fn guarded_address(&mut self, miss: DynamicLabel) {
        let base = self.flat.expect("guarded memory is flat");
        asm!(self.ops
            ; test r13, QWORD [r12 + BEYOND_USER_SPAN]
            ; jnz =>miss
            ; mov rcx, QWORD base as i64
        );
    }

    /// The next instruction accesses guest memory at `[rcx + r13]` after [`Em::tlb_hit`]: with
    /// host-guarded memory, a host fault on it resumes at `miss`.
    fn fault_site(&mut self, miss: DynamicLabel) {
        if self.guarded {
            self.sites.push((self.ops.offset().0 as u32, miss));
        }
    }

    /// `dcbz`: the aligned 128-byte block around the EA zeroed through a fast write entry
    /// (it never crosses a page); the slow path is the interpreter's.
    fn zero_block(&mut self, op: Op, i: Insn) {
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        let block = crate::interp::CACHE_BLOCK as i32;
        asm!(self.ops ; and r13, -block);
        self.tlb_hit(self.idx_write, offset_of!(TlbEntry, write), 1, slow);
        asm!(self.ops ; xorps xmm0, xmm0);
        for k in 0..block / 16 {
            asm!(self.ops ; movups [rcx + r13 + 16 * k], xmm0);
        }
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `divw[u]`/`divd[u]` (without OE: those stay in the interpreter). An undefined
    /// quotient (divide by zero, the most negative number by -1) leaves what the
    /// interpreter leaves: the dividend (its low word, zero-extended, for the word forms).
    /// Dividing by -1 is a negation, which gives exactly that for the most negative number.
    fn divide(&mut self, op: Op, i: Insn) {
        use Op::*;
        let (undefined, done) = (self.label(), self.label());
        let word = matches!(op, Divw | Divwu);
        let load = if word { GprOp::Load32 } else { GprOp::Load64 };
        self.gpr_rm(load, RAX, i.ra());
        self.gpr_rm(load, RCX, i.rb());
        asm!(self.ops ; test rcx, rcx ; jz =>undefined);
        match op {
            Divwu => asm!(self.ops ; xor edx, edx ; div ecx),
            Divdu => asm!(self.ops ; xor edx, edx ; div rcx),
            Divw => {
                let ok = self.label();
                asm!(self.ops ; cmp ecx, -1 ; jne =>ok ; neg eax ; jmp =>done ; =>ok ; cdq ; idiv ecx);
            }
            _ => {
                let ok = self.label();
                asm!(self.ops ; cmp rcx, -1 ; jne =>ok ; neg rax ; jmp =>done ; =>ok ; cqo ; idiv rcx);
            }
        }
        asm!(self.ops ; =>undefined ; =>done);
        self.set_rc(i.rt(), i.rc());
    }

    /// `lvsl`/`lvsr`: the permute control for the EA's low four bits, no memory access.
    /// Host byte j is big-endian element 15 - j: lvsl's is sh + 15 - j, lvsr's 31 - sh - j.
    fn shift_vector(&mut self, op: Op, i: Insn) {
        self.ea(op, i, false);
        let base: &'static [u8; 16] = if op == Op::Lvsl {
            &LVSL_BASE
        } else {
            &LVSR_BASE
        };
        asm!(self.ops
            ; mov eax, r13d ; and eax, 15 ; imul eax, eax, 0x0101_0101
            ; movd xmm1, eax ; pshufd xmm1, xmm1, 0
            ; mov rax, QWORD base.as_ptr() as i64 ; movups xmm0, [rax]
        );
        if op == Op::Lvsl {
            asm!(self.ops ; paddb xmm0, xmm1);
        } else {
            asm!(self.ops ; psubb xmm0, xmm1);
        }
        asm!(self.ops ; movups [rbx + vsr(32 + i.rt())], xmm0);
    }

    /// `isync`: nothing to do unless a local TLB flush is pending (the interpreter does it).
    fn isync(&mut self, i: Insn) {
        let (slow, back) = (self.label(), self.label());
        asm!(self.ops ; cmp BYTE [rbx + TLB_FLUSH_PENDING], 0 ; jne =>slow ; =>back);
        self.interp_slow(slow, back, Op::Isync, i);
    }

    /// `l[bhwd]arx` through a fast read entry: the load, and the reservation the interpreter
    /// records (address, size, the value in memory byte order). Misses, unaligned addresses
    /// (the alignment interrupt) and devices run the interpreter.
    fn load_reserve(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        self.tlb_hit(self.idx_read, offset_of!(TlbEntry, read), size, slow);
        self.read_host(size);
        asm!(self.ops
            ; mov QWORD [rbx + RESERVE_VAL], rax
            ; mov QWORD [rbx + RESERVE_VAL + 8], 0
            ; mov QWORD [rbx + RESERVE_ADDR], r13
            ; mov QWORD [rbx + RESERVE_SIZE], size as i32
        );
        self.swap_if_big_endian(size, self.le);
        self.set_gpr(i.rt());
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `st[bhwd]cx.` as the interpreter does it: without a reservation of exactly this
    /// address and size nothing is accessed and CR0 = 0b00 || SO; with one, a compare-and-swap
    /// against the reserved value through a fast write entry (anything else, e.g. a page
    /// holding translated code, runs the interpreter). The reservation is gone either way.
    fn store_conditional(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let (slow, back, unreserved, done) =
            (self.label(), self.label(), self.label(), self.label());
        self.ea(op, i, false);
        asm!(self.ops
            ; cmp QWORD [rbx + RESERVE_ADDR], r13
            ; jne =>unreserved
            ; cmp QWORD [rbx + RESERVE_SIZE], size as i32
            ; jne =>unreserved
        );
        self.tlb_hit(self.idx_write, offset_of!(TlbEntry, write), size, slow);
        // From the home: a copy taken on this path alone would be missing on the others.
        self.gpr_home(GprOp::Load64, RDX, i.rs());
        if !self.le {
            match size {
                2 => asm!(self.ops ; rol dx, 8),
                4 => asm!(self.ops ; bswap edx),
                8 => asm!(self.ops ; bswap rdx),
                _ => {}
            }
        }
        asm!(self.ops ; mov rax, QWORD [rbx + RESERVE_VAL]);
        match size {
            1 => asm!(self.ops ; lock cmpxchg BYTE [rcx + r13], dl),
            2 => asm!(self.ops ; lock cmpxchg WORD [rcx + r13], dx),
            4 => asm!(self.ops ; lock cmpxchg DWORD [rcx + r13], edx),
            _ => asm!(self.ops ; lock cmpxchg QWORD [rcx + r13], rdx),
        }
        // EQ (2) when the swap happened.
        asm!(self.ops
            ; setz cl
            ; movzx ecx, cl
            ; add ecx, ecx
            ; jmp =>done
            ; =>unreserved
            ; xor ecx, ecx
            ; =>done
            ; mov QWORD [rbx + RESERVE_ADDR], NO_RESERVATION as i32
            ; movzx edx, BYTE [rbx + SO]
            ; or ecx, edx
        );
        self.insert_crf(0);
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

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

    /// `rax` = the `size` bytes at host address `rcx + r13`, zero-extended, in memory byte
    /// order.
    fn read_host(&mut self, size: u32) {
        match size {
            1 => asm!(self.ops ; movzx eax, BYTE [rcx + r13]),
            2 => asm!(self.ops ; movzx eax, WORD [rcx + r13]),
            4 => asm!(self.ops ; mov eax, DWORD [rcx + r13]),
            _ => asm!(self.ops ; mov rax, QWORD [rcx + r13]),
        }
    }

    /// `rax`'s low `size` bytes from memory byte order to the guest's, when it is big-endian.
    fn swap_if_big_endian(&mut self, size: u32, le: bool) {
        if !le {
            match size {
                2 => asm!(self.ops ; rol ax, 8),
                4 => asm!(self.ops ; bswap eax),
                8 => asm!(self.ops ; bswap rax),
                _ => {}
            }
        }
    }

    /// Doubleword 0 of VSR `x` (FPR `x` below 32) to or from memory: `lfd`/`stfd` and
    /// their indexed and update forms, `lxsdx`/`stxsdx`. `lfd` zeroes doubleword 1 (as the
    /// interpreter's `set_fpr` does); `lxsdx` keeps it.
    fn fp_doubleword(&mut self, op: Op, i: Insn, x: u32, update: bool) {
        let ra = i.ra();
        self.ea(op, i, update);
        let home = vsr(x);
        if op.info().flags.contains(InsnFlags::LOAD) {
            self.load(8, self.le);
            asm!(self.ops ; mov QWORD [rbx + home + 8], rax);
            if op != Op::Lxsdx {
                asm!(self.ops ; mov QWORD [rbx + home], 0);
            }
        } else {
            self.store(StoreSrc::Dw0(x), 8, self.le, update.then_some(ra));
        }
        if update {
            self.gpr_rm(GprOp::Store64, R13, ra);
        }
    }

    /// `lvx`/`stvx`/`lxvd2x`/`stxvd2x` in little-endian mode: 16 bytes between memory and
    /// the register's home, with the doublewords swapped for the VSX forms (their
    /// doubleword 0 is at the lower address, and a `u128` home keeps it in the high half).
    /// Misses, page crossings and watched pages go to the interpreter.
    fn quadword(&mut self, op: Op, i: Insn) {
        let (store, vmx) = (
            matches!(op, Op::Stvx | Op::Stxvd2x),
            matches!(op, Op::Lvx | Op::Stvx),
        );
        let home = vsr(if vmx { 32 + i.rt() } else { i.xt() });
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        if vmx {
            asm!(self.ops ; and r13, -16);
        }
        let (idx, tag) = if store {
            (self.idx_write, offset_of!(TlbEntry, write))
        } else {
            (self.idx_read, offset_of!(TlbEntry, read))
        };
        self.host_address(idx, tag, 16, slow);
        if store {
            asm!(self.ops ; movups xmm0, [rbx + home]);
        } else {
            self.fault_site(slow);
            asm!(self.ops ; movups xmm0, [rcx + r13]);
        }
        if !vmx {
            asm!(self.ops ; pshufd xmm0, xmm0, 0x4e);
        }
        if store {
            self.fault_site(slow);
            asm!(self.ops ; movups [rcx + r13], xmm0);
        } else {
            asm!(self.ops ; movups [rbx + home], xmm0);
        }
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// Loads `size` bytes at `r13` in byte order `le` into `rax` (zero-extended).
    fn load(&mut self, size: u32, le: bool) {
        let (miss, done) = (self.label(), self.label());
        self.host_address(self.idx_read, offset_of!(TlbEntry, read), size, miss);
        self.fault_site(miss);
        self.read_host(size);
        self.swap_if_big_endian(size, le);
        asm!(self.ops ; =>done);
        let fault = self.label();
        self.cold.push(Cold::LoadMiss {
            at: miss,
            back: done,
            held: self.cache,
            size,
            le,
            fault,
        });
        self.cold.push(Cold::Fault {
            at: fault,
            k: self.k,
            pc: self.pc,
        });
    }

    /// The value a store writes into `reg`.
    fn store_src(&mut self, reg: u8, src: StoreSrc) {
        match src {
            StoreSrc::Gpr(r) => self.gpr_rm(GprOp::Load64, reg, r),
            StoreSrc::Dw0(x) => {
                let home = vsr(x) + 8;
                match reg {
                    RAX => asm!(self.ops ; mov rax, QWORD [rbx + home]),
                    _ => asm!(self.ops ; mov rcx, QWORD [rbx + home]),
                }
            }
        }
    }

    /// Stores the low `size` bytes of `src` at `r13`. `update_ra`: the update form's RA
    /// (set to `r13` after the store by the caller, and by the slow path when the store
    /// wrote translated code and the block stops after it).
    fn store(&mut self, src: StoreSrc, size: u32, le: bool, update_ra: Option<u32>) {
        let (miss, done) = (self.label(), self.label());
        self.host_address(self.idx_write, offset_of!(TlbEntry, write), size, miss);
        self.store_src(RAX, src);
        if !le {
            match size {
                2 => asm!(self.ops ; rol ax, 8),
                4 => asm!(self.ops ; bswap eax),
                8 => asm!(self.ops ; bswap rax),
                _ => {}
            }
        }
        // Pages holding translated code have no fast write entry (with host-guarded memory,
        // no host write permission): a fast store never needs the block to stop.
        self.fault_site(miss);
        match size {
            1 => asm!(self.ops ; mov BYTE [rcx + r13], al),
            2 => asm!(self.ops ; mov WORD [rcx + r13], ax),
            4 => asm!(self.ops ; mov DWORD [rcx + r13], eax),
            _ => asm!(self.ops ; mov QWORD [rcx + r13], rax),
        }
        asm!(self.ops ; =>done);
        let fault = self.label();
        self.cold.push(Cold::StoreMiss {
            at: miss,
            back: done,
            held: self.cache,
            src,
            size,
            le,
            update_ra,
            fault,
            k: self.k + 1,
            next: self.pc.wrapping_add(4),
        });
        self.cold.push(Cold::Fault {
            at: fault,
            k: self.k,
            pc: self.pc,
        });
    }

    // --- branches ---

    /// Jumps to `not_taken` unless the BO/BI condition holds (decrementing CTR when BO
    /// says so). Keeps `rax`.
    fn condition(&mut self, i: Insn, use_ctr: bool, not_taken: DynamicLabel) {
        let bo = i.rt();
        if use_ctr && bo & 4 == 0 {
            asm!(self.ops ; sub QWORD [rbx + CTR], 1);
            if bo & 2 != 0 {
                asm!(self.ops ; jnz =>not_taken);
            } else {
                asm!(self.ops ; jz =>not_taken);
            }
        }
        if bo & 0x10 == 0 {
            let bi = i.ra();
            if self.prev_crf == Some(bi / 4) && bi % 4 != 3 {
                // The compare right before left the field's LT/GT/EQ in `r8d`.
                asm!(self.ops ; test r8d, 8 >> (bi % 4));
                if bo & 8 != 0 {
                    asm!(self.ops ; jz =>not_taken);
                } else {
                    asm!(self.ops ; jnz =>not_taken);
                }
            } else {
                asm!(self.ops ; bt DWORD [rbx + CR], (31 - bi) as i8);
                if bo & 8 != 0 {
                    asm!(self.ops ; jnc =>not_taken);
                } else {
                    asm!(self.ops ; jc =>not_taken);
                }
            }
        }
    }

    /// `tdi`/`twi`: the TO conditions tested inline; when one holds the interpreter runs the
    /// instruction (and raises the trap).
    fn trap_immediate(&mut self, op: Op, i: Insn) {
        let to = i.rt();
        if to == 0 {
            return;
        }
        if op == Op::Twi {
            self.gpr_rm(GprOp::Load32Signed, RAX, i.ra());
        } else {
            self.gpr_rm(GprOp::Load64, RAX, i.ra());
        }
        // Word traps compare sign-extended words, which keeps their unsigned order too.
        let (trap, over) = (self.label(), self.label());
        asm!(self.ops ; cmp rax, i.si() as i32);
        if to & 16 != 0 {
            asm!(self.ops ; jl =>trap);
        }
        if to & 8 != 0 {
            asm!(self.ops ; jg =>trap);
        }
        if to & 4 != 0 {
            asm!(self.ops ; je =>trap);
        }
        if to & 2 != 0 {
            asm!(self.ops ; jb =>trap);
        }
        if to & 1 != 0 {
            asm!(self.ops ; ja =>trap);
        }
        asm!(self.ops ; jmp =>over ; =>trap);
        self.fallback(op, i.0);
        asm!(self.ops ; =>over);
    }

    /// The vector ops glibc's and gcc's vectorised loops run most, on SSE2. A register's
    /// home is a `u128` whose element 0 is the most significant, so host lanes hold the
    /// elements from the last one up: element-wise ops need no reordering, and the packs
    /// take VRB's elements into the low host lanes.
    fn vector(&mut self, op: Op, i: Insn) {
        use Op::*;
        let (t, a, b) = match op {
            Xxland | Xxlandc | Xxlor | Xxlorc | Xxlxor | Xxlnor | Xxpermdi => {
                (vsr(i.xt()), vsr(i.xa()), vsr(i.xb()))
            }
            _ => (vsr(32 + i.rt()), vsr(32 + i.ra()), vsr(32 + i.rb())),
        };
        if matches!(op, Vspltisb | Vspltish | Vspltisw) {
            // The immediate in every element: the 32-bit pattern of that element size.
            let imm = i.simm() as i32;
            let word = match op {
                Vspltisb => (imm as u8 as u32).wrapping_mul(0x0101_0101),
                Vspltish => (imm as u16 as u32).wrapping_mul(0x0001_0001),
                _ => imm as u32,
            };
            asm!(self.ops ; mov eax, word as i32 ; movd xmm0, eax ; pshufd xmm0, xmm0, 0);
        } else {
            asm!(self.ops ; movups xmm0, [rbx + a] ; movups xmm1, [rbx + b]);
        }
        match op {
            Vaddubm => asm!(self.ops ; paddb xmm0, xmm1),
            Vadduhm => asm!(self.ops ; paddw xmm0, xmm1),
            Vadduwm => asm!(self.ops ; paddd xmm0, xmm1),
            Vaddudm => asm!(self.ops ; paddq xmm0, xmm1),
            Vsububm => asm!(self.ops ; psubb xmm0, xmm1),
            Vsubuhm => asm!(self.ops ; psubw xmm0, xmm1),
            Vsubuwm => asm!(self.ops ; psubd xmm0, xmm1),
            Vsubudm => asm!(self.ops ; psubq xmm0, xmm1),
            Vminub => asm!(self.ops ; pminub xmm0, xmm1),
            Vmaxub => asm!(self.ops ; pmaxub xmm0, xmm1),
            Vcmpequh => asm!(self.ops ; pcmpeqw xmm0, xmm1),
            Vcmpequw => asm!(self.ops ; pcmpeqd xmm0, xmm1),
            Vcmpgtsb => asm!(self.ops ; pcmpgtb xmm0, xmm1),
            Vcmpgtsh => asm!(self.ops ; pcmpgtw xmm0, xmm1),
            Vcmpgtsw => asm!(self.ops ; pcmpgtd xmm0, xmm1),
            // VRA || VRB shifted left by SHB bytes: with the home's bytes in little-endian
            // order, byte shifts of the two halves.
            Vsldoi => {
                let sh = i.shb() as i8;
                asm!(self.ops ; pslldq xmm0, sh ; psrldq xmm1, 16 - sh ; por xmm0, xmm1);
            }
            // Byte k of VRT (big-endian numbering) is byte VRC[k] & 31 of VRA || VRB. Host
            // byte j is element 15 - j, so each half is shuffled by (~VRC & 15), and bit 4
            // of VRC picks the half.
            Vperm => {
                let c = vsr(32 + i.frc());
                asm!(self.ops
                    ; movups xmm2, [rbx + c]
                    ; mov eax, 0x0f0f_0f0f ; movd xmm3, eax ; pshufd xmm3, xmm3, 0
                    ; movdqa xmm4, xmm2 ; pandn xmm4, xmm3
                    ; pshufb xmm0, xmm4 ; pshufb xmm1, xmm4
                    ; mov eax, 0x1010_1010 ; movd xmm3, eax ; pshufd xmm3, xmm3, 0
                    ; pand xmm2, xmm3 ; pcmpeqb xmm2, xmm3
                    ; pand xmm1, xmm2 ; pandn xmm2, xmm0 ; por xmm2, xmm1 ; movdqa xmm0, xmm2
                );
            }
            Vor | Xxlor => asm!(self.ops ; por xmm0, xmm1),
            Vand | Xxland => asm!(self.ops ; pand xmm0, xmm1),
            Vxor | Xxlxor => asm!(self.ops ; pxor xmm0, xmm1),
            // `pandn` complements its destination: ~b & a.
            Vandc | Xxlandc => asm!(self.ops ; pandn xmm1, xmm0 ; movaps xmm0, xmm1),
            Vnor | Xxlnor => asm!(self.ops ; por xmm0, xmm1 ; pcmpeqd xmm2, xmm2 ; pxor xmm0, xmm2),
            Xxlorc => asm!(self.ops ; pcmpeqd xmm2, xmm2 ; pxor xmm1, xmm2 ; por xmm0, xmm1),
            Vcmpequb => asm!(self.ops ; pcmpeqb xmm0, xmm1),
            Vslb => {
                // SSE has no per-byte variable shift: shift by 1, 2 and 4 where the count's
                // bit says so (bytes selected with a compare mask).
                for sh in [1u8, 2, 4] {
                    let splat = |b: u8| (b as u32 * 0x0101_0101) as i32;
                    asm!(self.ops
                        ; mov eax, splat(sh) ; movd xmm2, eax ; pshufd xmm2, xmm2, 0
                        ; movdqa xmm3, xmm1 ; pand xmm3, xmm2 ; pcmpeqb xmm3, xmm2
                        ; mov eax, splat(0xff << sh) ; movd xmm5, eax ; pshufd xmm5, xmm5, 0
                        ; movdqa xmm4, xmm0 ; psllw xmm4, sh as i8 ; pand xmm4, xmm5
                        ; pand xmm4, xmm3 ; pandn xmm3, xmm0 ; por xmm3, xmm4 ; movdqa xmm0, xmm3
                    );
                }
            }
            // Modulo packs: the low half of each element, sign-extended in place so that the
            // saturating pack keeps it exactly.
            Vpkuwum => asm!(self.ops
                ; pslld xmm0, 16 ; psrad xmm0, 16 ; pslld xmm1, 16 ; psrad xmm1, 16
                ; packssdw xmm1, xmm0 ; movaps xmm0, xmm1
            ),
            Vpkuhum => asm!(self.ops
                ; psllw xmm0, 8 ; psraw xmm0, 8 ; psllw xmm1, 8 ; psraw xmm1, 8
                ; packsswb xmm1, xmm0 ; movaps xmm0, xmm1
            ),
            // The low words of VRB's doublewords, then VRA's.
            Vpkudum => asm!(self.ops ; shufps xmm1, xmm0, 0x88u8 as i8 ; movaps xmm0, xmm1),
            Xxpermdi => {
                // XT's doubleword 0 (host lane 1) from XA, doubleword 1 (lane 0) from XB:
                // DM's high bit picks XA's doubleword 1 (lane 0), its low bit XB's.
                let dm = i.dm();
                let imm = (dm & 1 == 0) as i8 | ((dm & 2 == 0) as i8) << 1;
                asm!(self.ops ; shufpd xmm1, xmm0, imm ; movaps xmm0, xmm1);
            }
            _ => {}
        }
        asm!(self.ops ; movups [rbx + t], xmm0);
        let compare = matches!(
            op,
            Vcmpequb | Vcmpequh | Vcmpequw | Vcmpgtsb | Vcmpgtsh | Vcmpgtsw
        );
        if compare && i.bit21() != 0 {
            // CR6: 8 when every element compared true, 2 when none did.
            asm!(self.ops
                ; pmovmskb eax, xmm0
                ; xor ecx, ecx
                ; mov edx, 8
                ; cmp eax, 0xffff
                ; cmove ecx, edx
                ; mov edx, 2
                ; test eax, eax
                ; cmovz ecx, edx
            );
            self.insert_crf(6);
        }
    }

    /// The facility a VSR half move needs is on in this block's MSR state: FP for VSRs
    /// 0-31, VMX for 32-63 (else the interpreter raises the unavailable interrupt).
    fn vsr_half_on(&self, x: u32) -> bool {
        self.key.flags & if x < 32 { msr::FP } else { msr::VEC } != 0
    }

    fn link_register(&mut self, i: Insn) {
        if i.lk() {
            asm!(self.ops ; mov rcx, QWORD self.pc.wrapping_add(4) as i64 ; mov QWORD [rbx + LR], rcx);
        }
    }

    /// Translates one instruction natively; false leaves it to the interpreter. `ended`:
    /// set when the instruction left the block (a branch).
    fn native(&mut self, op: Op, i: Insn, ended: &mut bool) -> bool {
        use Op::*;
        let info = op.info();
        let (rt, ra, rb) = (i.rt(), i.ra(), i.rb());
        // Overflow-recording (OE) forms stay in the interpreter.
        if info.flags.contains(InsnFlags::OE) && i.oe() {
            return false;
        }
        let n = self.k + 1;
        match op {
            Addi | Addis => {
                let imm = if op == Addis { i.si() << 16 } else { i.si() } as i32;
                if ra == 0 {
                    asm!(self.ops ; mov rax, imm);
                    self.set_gpr(rt);
                } else if !self.in_place(GprOp::Add64, rt, ra, Operand2::Imm(imm), false) {
                    self.gpr_rm(GprOp::Load64, RAX, ra);
                    asm!(self.ops ; add rax, imm);
                    self.set_gpr(rt);
                }
            }
            Add if self.in_place(GprOp::Add64, rt, ra, Operand2::Gpr(rb), i.rc()) => {}
            Subf if self.in_place(GprOp::Sub64, rt, rb, Operand2::Gpr(ra), i.rc()) => {}
            And | Or | Xor
                if self.in_place(
                    match op {
                        And => GprOp::And64,
                        Or => GprOp::Or64,
                        _ => GprOp::Xor64,
                    },
                    ra,
                    rt,
                    Operand2::Gpr(rb),
                    i.rc(),
                ) => {}
            Ori | Xori | AndiDot
                if self.in_place(
                    match op {
                        Ori => GprOp::Or64,
                        Xori => GprOp::Xor64,
                        _ => GprOp::And64,
                    },
                    ra,
                    rt,
                    Operand2::Imm(i.ui() as i32),
                    op == AndiDot,
                ) => {}
            Add => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                self.gpr_rm(GprOp::Add64, RAX, rb);
                self.set_rc(rt, i.rc());
            }
            Subf => {
                self.gpr_rm(GprOp::Load64, RAX, rb);
                self.gpr_rm(GprOp::Sub64, RAX, ra);
                self.set_rc(rt, i.rc());
            }
            Neg => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                asm!(self.ops ; neg rax);
                self.set_rc(rt, i.rc());
            }
            Addic | AddicDot | Subfic | Addc | Adde | Addze | Addme | Subfc | Subfe | Subfze
            | Subfme => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                if matches!(op, Subfic | Subfc | Subfe | Subfze | Subfme) {
                    asm!(self.ops ; not rax);
                }
                match op {
                    Addic | AddicDot | Subfic => asm!(self.ops ; mov rcx, i.si() as i32),
                    Addc | Adde | Subfc | Subfe => {
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                    }
                    Addze | Subfze => asm!(self.ops ; xor ecx, ecx),
                    _ => asm!(self.ops ; mov rcx, -1),
                }
                match op {
                    Addic | AddicDot | Addc => asm!(self.ops ; add rax, rcx),
                    Subfic | Subfc => asm!(self.ops ; stc ; adc rax, rcx),
                    _ => asm!(self.ops ; movzx edx, BYTE [rbx + CA] ; bt edx, 0 ; adc rax, rcx),
                }
                asm!(self.ops ; setc BYTE [rbx + CA]);
                let rc = op == AddicDot || (!matches!(op, Addic | Subfic) && i.rc());
                self.set_rc(rt, rc);
            }
            Mulli => {
                asm!(self.ops ; imul rax, QWORD [rbx + gpr(ra)], i.si() as i32);
                self.set_gpr(rt);
            }
            Mulld => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                self.gpr_rm(GprOp::Imul64, RAX, rb);
                self.set_rc(rt, i.rc());
            }
            Mullw => {
                self.gpr_rm(GprOp::Load32Signed, RAX, ra);
                self.gpr_rm(GprOp::Load32Signed, RCX, rb);
                asm!(self.ops ; imul rax, rcx);
                self.set_rc(rt, i.rc());
            }
            Mulhd | Mulhdu => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                if op == Mulhd {
                    asm!(self.ops ; imul QWORD [rbx + gpr(rb)]);
                } else {
                    asm!(self.ops ; mul QWORD [rbx + gpr(rb)]);
                }
                asm!(self.ops ; mov rax, rdx);
                self.set_rc(rt, i.rc());
            }
            Mulhw | Mulhwu => {
                // The high word of the 64-bit product, zero-extended.
                if op == Mulhw {
                    self.gpr_rm(GprOp::Load32Signed, RAX, ra);
                    self.gpr_rm(GprOp::Load32Signed, RCX, rb);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, ra);
                    self.gpr_rm(GprOp::Load32, RCX, rb);
                }
                asm!(self.ops ; imul rax, rcx ; shr rax, 32);
                self.set_rc(rt, i.rc());
            }
            And | Or | Xor | Nand | Nor | Andc | Orc | Eqv => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if matches!(op, Andc | Orc) {
                    self.gpr_rm(GprOp::Load64, RCX, rb);
                    asm!(self.ops ; not rcx);
                    match op {
                        Andc => asm!(self.ops ; and rax, rcx),
                        _ => asm!(self.ops ; or rax, rcx),
                    }
                } else {
                    let g = match op {
                        And | Nand => GprOp::And64,
                        Or | Nor => GprOp::Or64,
                        _ => GprOp::Xor64,
                    };
                    self.gpr_rm(g, RAX, rb);
                }
                if matches!(op, Nand | Nor | Eqv) {
                    asm!(self.ops ; not rax);
                }
                self.set_rc(ra, i.rc());
            }
            Ori | Oris | Xori | Xoris | AndiDot | AndisDot => {
                let ui = i.ui() as u32;
                let imm = if matches!(op, Oris | Xoris | AndisDot) {
                    ui << 16
                } else {
                    ui
                };
                // `mov ecx, imm` zero-extends: the immediate is unsigned.
                self.gpr_rm(GprOp::Load64, RAX, rt);
                asm!(self.ops ; mov ecx, imm as i32);
                match op {
                    Ori | Oris => asm!(self.ops ; or rax, rcx),
                    Xori | Xoris => asm!(self.ops ; xor rax, rcx),
                    _ => asm!(self.ops ; and rax, rcx),
                }
                self.set_rc(ra, matches!(op, AndiDot | AndisDot));
            }
            Extsb => {
                match self.copy_of(rt) {
                    // (`mov` first: a dynamic byte register 4-7 would need a REX prefix.)
                    Some(h) => asm!(self.ops ; mov eax, Rd(h) ; movsx rax, al),
                    None => asm!(self.ops ; movsx rax, BYTE [rbx + gpr(rt)]),
                }
                self.set_rc(ra, i.rc());
            }
            Extsh => {
                match self.copy_of(rt) {
                    Some(h) => asm!(self.ops ; movsx rax, Rw(h)),
                    None => asm!(self.ops ; movsx rax, WORD [rbx + gpr(rt)]),
                }
                self.set_rc(ra, i.rc());
            }
            Extsw => {
                self.gpr_rm(GprOp::Load32Signed, RAX, rt);
                self.set_rc(ra, i.rc());
            }
            Cntlzw | Cntlzd => {
                // bsr leaves ZF set for a zero source: count -1 then, giving 32 / 64.
                if op == Cntlzw {
                    self.gpr_rm(GprOp::Load32, RAX, rt);
                    asm!(self.ops ; bsr eax, eax ; mov ecx, -1 ; cmovz eax, ecx ; neg eax ; add eax, 31);
                } else {
                    asm!(self.ops ; bsr rax, QWORD [rbx + gpr(rt)] ; mov rcx, -1 ; cmovz rax, rcx ; neg rax ; add rax, 63);
                }
                self.set_rc(ra, i.rc());
            }
            Sld | Srd => {
                // x86 masks the count to 6 bits; bit 0x40 of RB makes the result 0.
                self.gpr_rm(GprOp::Load64, RCX, rb);
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if op == Sld {
                    asm!(self.ops ; shl rax, cl);
                } else {
                    asm!(self.ops ; shr rax, cl);
                }
                asm!(self.ops ; xor edx, edx ; test ecx, 0x40 ; cmovnz rax, rdx);
                self.set_rc(ra, i.rc());
            }
            Slw | Srw => {
                self.gpr_rm(GprOp::Load64, RCX, rb);
                self.gpr_rm(GprOp::Load32, RAX, rt);
                if op == Slw {
                    asm!(self.ops ; shl eax, cl);
                } else {
                    asm!(self.ops ; shr eax, cl);
                }
                asm!(self.ops ; xor edx, edx ; test ecx, 0x20 ; cmovnz eax, edx);
                self.set_rc(ra, i.rc());
            }
            Divw | Divwu | Divd | Divdu => self.divide(op, i),
            Srawi | Sradi | Sraw | Srad => {
                // CA: the source is negative and 1 bits were shifted out (shifting the
                // result back does not give the source).
                let done = self.label();
                match op {
                    Srawi | Sraw => {
                        self.gpr_rm(GprOp::Load32Signed, RAX, rt);
                    }
                    _ => {
                        self.gpr_rm(GprOp::Load64, RAX, rt);
                    }
                }
                asm!(self.ops ; mov rdx, rax);
                match op {
                    Sraw => {
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                        asm!(self.ops ; and ecx, 0x3f);
                    }
                    Srad => {
                        // Counts of 64 and more give the sign, and CA = the source is
                        // negative; the host's shifts take counts up to 63.
                        let small = self.label();
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                        asm!(self.ops
                            ; and ecx, 0x7f
                            ; cmp ecx, 63
                            ; jbe =>small
                            ; sar rax, 63
                            ; mov edx, eax
                            ; and edx, 1
                            ; jmp =>done
                            ; =>small
                        );
                    }
                    Srawi => asm!(self.ops ; mov ecx, i.sh() as i32),
                    _ => asm!(self.ops ; mov ecx, i.sh6() as i32),
                }
                asm!(self.ops
                    ; sar rax, cl
                    ; mov r8, rax
                    ; shl r8, cl
                    ; cmp r8, rdx
                    ; setne r8b
                    ; test rdx, rdx
                    ; sets dl
                    ; and dl, r8b
                    ; =>done
                    ; mov BYTE [rbx + CA], dl
                );
                self.set_rc(ra, i.rc());
            }
            Rlwinm
                if crate::interp::mask64(i.mb() + 32, i.me() + 32) >> 32 == 0
                    && self.rotate_in_place(
                        ra,
                        rt,
                        true,
                        i.sh(),
                        crate::interp::mask64(i.mb() + 32, i.me() + 32),
                        i.rc(),
                    ) => {}
            Rldicl | Rldicr | Rldic
                if self.rotate_in_place(
                    ra,
                    rt,
                    false,
                    i.sh6(),
                    match op {
                        Rldicl => crate::interp::mask64(i.mb6(), 63),
                        Rldicr => crate::interp::mask64(0, i.mb6()),
                        _ => crate::interp::mask64(i.mb6(), 63 - i.sh6()),
                    },
                    i.rc(),
                ) => {}
            Rlwinm | Rlwnm | Rlwimi => {
                let m = crate::interp::mask64(i.mb() + 32, i.me() + 32);
                self.gpr_rm(GprOp::Load32, RAX, rt);
                if op == Rlwnm {
                    self.gpr_rm(GprOp::Load32, RCX, rb);
                }
                if m >> 32 == 0 {
                    // The mask keeps only the low word: a 32-bit rotate is enough.
                    if op == Rlwnm {
                        asm!(self.ops ; rol eax, cl);
                    } else if i.sh() != 0 {
                        asm!(self.ops ; rol eax, i.sh() as i8);
                    }
                } else {
                    // The word doubled, rotated as a doubleword (ROTL32 of the ISA).
                    asm!(self.ops ; mov edx, eax ; shl rdx, 32 ; or rax, rdx);
                    if op == Rlwnm {
                        asm!(self.ops ; and ecx, 0x1f ; rol rax, cl);
                    } else if i.sh() != 0 {
                        asm!(self.ops ; rol rax, i.sh() as i8);
                    }
                }
                self.and_mask(m);
                if op == Rlwimi {
                    self.insert_under_mask(ra, m);
                }
                self.set_rc(ra, i.rc());
            }
            Rldicl | Rldicr | Rldic | Rldimi | Rldcl | Rldcr => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if matches!(op, Rldcl | Rldcr) {
                    self.gpr_rm(GprOp::Load64, RCX, rb);
                    asm!(self.ops ; rol rax, cl);
                } else if i.sh6() != 0 {
                    asm!(self.ops ; rol rax, i.sh6() as i8);
                }
                let m = match op {
                    Rldicl | Rldcl => crate::interp::mask64(i.mb6(), 63),
                    Rldicr | Rldcr => crate::interp::mask64(0, i.mb6()),
                    _ => crate::interp::mask64(i.mb6(), 63 - i.sh6()),
                };
                self.and_mask(m);
                if op == Rldimi {
                    self.insert_under_mask(ra, m);
                }
                self.set_rc(ra, i.rc());
            }
            Cmp | Cmpl => {
                if i.l10() != 0 {
                    self.gpr_rm(GprOp::Load64, RAX, ra);
                    self.gpr_rm(GprOp::Cmp64, RAX, rb);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, ra);
                    self.gpr_rm(GprOp::Cmp32, RAX, rb);
                }
                self.cmp_field(op == Cmp);
                self.set_crf_with_so(i.bf());
            }
            Cmpi | Cmpli => {
                let imm = if op == Cmpi {
                    i.si() as i32
                } else {
                    i.ui() as i32
                };
                match (self.copy_of(ra), i.l10() != 0) {
                    (Some(h), true) => asm!(self.ops ; cmp Rq(h), imm),
                    (Some(h), false) => asm!(self.ops ; cmp Rd(h), imm),
                    (None, true) => asm!(self.ops ; cmp QWORD [rbx + gpr(ra)], imm),
                    (None, false) => asm!(self.ops ; cmp DWORD [rbx + gpr(ra)], imm),
                }
                self.cmp_field(op == Cmpi);
                self.set_crf_with_so(i.bf());
            }
            Isel => {
                if ra == 0 {
                    asm!(self.ops ; xor ecx, ecx);
                } else {
                    self.gpr_rm(GprOp::Load64, RCX, ra);
                }
                self.gpr_rm(GprOp::Load64, RAX, rb);
                asm!(self.ops ; bt DWORD [rbx + CR], (31 - i.frc()) as i8 ; cmovc rax, rcx);
                self.set_gpr(rt);
            }
            Crand | Cror | Crxor | Crnand | Crnor | Creqv | Crandc | Crorc => {
                asm!(self.ops
                    ; mov eax, DWORD [rbx + CR]
                    ; mov ecx, eax
                    ; shr ecx, (31 - ra) as i8
                    ; mov edx, eax
                    ; shr edx, (31 - rb) as i8
                );
                if matches!(op, Crandc | Crorc) {
                    asm!(self.ops ; not edx);
                }
                match op {
                    Crand | Crnand | Crandc => asm!(self.ops ; and ecx, edx),
                    Cror | Crnor | Crorc => asm!(self.ops ; or ecx, edx),
                    _ => asm!(self.ops ; xor ecx, edx),
                }
                if matches!(op, Crnand | Crnor | Creqv) {
                    asm!(self.ops ; not ecx);
                }
                let sh = (31 - rt) as i8;
                asm!(self.ops
                    ; and ecx, 1
                    ; shl ecx, sh
                    ; and eax, !(1u32 << sh) as i32
                    ; or eax, ecx
                    ; mov DWORD [rbx + CR], eax
                );
            }
            Mcrf => {
                asm!(self.ops ; mov ecx, DWORD [rbx + CR] ; shr ecx, (28 - 4 * i.bfa()) as i8 ; and ecx, 0xf);
                self.insert_crf(i.bf());
            }
            Mfcr => {
                asm!(self.ops ; mov eax, DWORD [rbx + CR]);
                self.set_gpr(rt);
            }
            Mtcrf | Mtocrf | Mfocrf => {
                let fxm = i.fxm();
                let m: u32 = (0..8)
                    .filter(|k| fxm & (0x80 >> k) != 0)
                    .map(|k| 0xf << (28 - 4 * k))
                    .fold(0, |a, b| a | b);
                if op != Mtcrf && fxm.count_ones() != 1 {
                    // The interpreter leaves everything as it was.
                } else if op == Mfocrf {
                    asm!(self.ops ; mov eax, DWORD [rbx + CR] ; and eax, m as i32);
                    self.set_gpr(rt);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, rt);
                    asm!(self.ops ; and eax, m as i32 ; mov ecx, DWORD [rbx + CR] ; and ecx, !m as i32 ; or ecx, eax ; mov DWORD [rbx + CR], ecx);
                }
            }
            Mfspr | Mtspr => {
                let pr = self.key.flags & msr::PR != 0;
                let Some(p) = crate::jit::spr::plain_spr(i.spr(), op == Mtspr, pr) else {
                    return false;
                };
                let home = ST + p.offset as i32;
                if op == Mfspr {
                    match p.bytes {
                        8 => asm!(self.ops ; mov rax, QWORD [rbx + home]),
                        _ => asm!(self.ops ; mov eax, DWORD [rbx + home]),
                    }
                    self.set_gpr(rt);
                } else {
                    self.gpr_rm(GprOp::Load64, RAX, rt);
                    self.and_mask(p.write_mask);
                    match p.bytes {
                        8 => asm!(self.ops ; mov QWORD [rbx + home], rax),
                        _ => asm!(self.ops ; mov DWORD [rbx + home], eax),
                    }
                }
            }
            B => {
                let base = if i.aa() != 0 { 0 } else { self.pc };
                self.link_register(i);
                self.exit_direct(n, base.wrapping_add(i.li() as u64));
                *ended = true;
            }
            Bc => {
                let base = if i.aa() != 0 { 0 } else { self.pc };
                self.link_register(i);
                let nt = self.label();
                self.condition(i, true, nt);
                self.exit_direct(n, base.wrapping_add(i.bd() as u64));
                asm!(self.ops ; =>nt);
                self.exit_direct(n, self.pc.wrapping_add(4));
                *ended = true;
            }
            Bclr | Bcctr if op == Bclr || i.rt() & 4 != 0 => {
                // The target is read before LK updates LR.
                let home = if op == Bclr { LR } else { CTR };
                asm!(self.ops ; mov rax, QWORD [rbx + home] ; and rax, -4);
                self.link_register(i);
                let nt = self.label();
                self.condition(i, op == Bclr, nt);
                self.exit_indirect(n);
                asm!(self.ops ; =>nt);
                self.exit_direct(n, self.pc.wrapping_add(4));
                *ended = true;
            }
            Lbz | Lbzu | Lbzx | Lbzux | Lhz | Lhzu | Lhzx | Lhzux | Lha | Lhau | Lhax | Lhaux
            | Lwz | Lwzu | Lwzx | Lwzux | Lwa | Lwax | Lwaux | Ld | Ldu | Ldx | Ldux | Lhbrx
            | Lwbrx | Ldbrx => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && (ra == 0 || ra == rt) {
                    return false;
                }
                let size = info.size as u32;
                let reversed = matches!(op, Lhbrx | Lwbrx | Ldbrx);
                self.ea(op, i, update);
                self.load(size, self.le != reversed);
                if info.flags.contains(InsnFlags::ALGEBRAIC) {
                    match size {
                        2 => asm!(self.ops ; movsx rax, ax),
                        4 => asm!(self.ops ; movsxd rax, eax),
                        _ => {}
                    }
                }
                self.set_gpr(rt);
                if update {
                    self.gpr_rm(GprOp::Store64, R13, ra);
                }
            }
            Stb | Stbu | Stbx | Stbux | Sth | Sthu | Sthx | Sthux | Stw | Stwu | Stwx | Stwux
            | Std | Stdu | Stdx | Stdux | Sthbrx | Stwbrx | Stdbrx => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                let reversed = matches!(op, Sthbrx | Stwbrx | Stdbrx);
                self.ea(op, i, update);
                let update_ra = update.then_some(ra);
                self.store(
                    StoreSrc::Gpr(rt),
                    info.size as u32,
                    self.le != reversed,
                    update_ra,
                );
                if update {
                    self.gpr_rm(GprOp::Store64, R13, ra);
                }
            }
            Lfd | Lfdu | Lfdx | Lfdux | Stfd | Stfdu | Stfdx | Stfdux
                if self.key.flags & msr::FP != 0 =>
            {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                self.fp_doubleword(op, i, i.rt(), update);
            }
            Lxsdx | Stxsdx if self.key.flags & msr::VSX != 0 => {
                self.fp_doubleword(op, i, i.xt(), false)
            }
            Lvx | Stvx if self.le && self.key.flags & msr::VEC != 0 => self.quadword(op, i),
            Vaddubm | Vadduhm | Vadduwm | Vaddudm | Vsububm | Vsubuhm | Vsubuwm | Vsubudm
            | Vminub | Vmaxub | Vcmpequb | Vcmpequh | Vcmpequw | Vcmpgtsb | Vcmpgtsh | Vcmpgtsw
            | Vpkuhum | Vpkuwum | Vpkudum | Vslb | Vspltisb | Vspltish | Vspltisw | Vand
            | Vandc | Vor | Vxor | Vnor | Vsldoi
                if self.key.flags & msr::VEC != 0 =>
            {
                self.vector(op, i)
            }
            Vperm if self.key.flags & msr::VEC != 0 && is_x86_feature_detected!("ssse3") => {
                self.vector(op, i)
            }
            Lvsl | Lvsr if self.key.flags & msr::VEC != 0 => self.shift_vector(op, i),
            Xxland | Xxlandc | Xxlor | Xxlorc | Xxlxor | Xxlnor | Xxpermdi
                if self.key.flags & msr::VSX != 0 =>
            {
                self.vector(op, i)
            }
            Lxvd2x | Stxvd2x if self.le && self.key.flags & msr::VSX != 0 => self.quadword(op, i),
            // Doubleword 0 of a VSR (the high half of its home); doubleword 1 keeps its value.
            Mfvsrd | Mtvsrd | Mfvsrwz | Mtvsrwz if self.vsr_half_on(i.xt()) => {
                let dw0 = vsr(i.xt()) + 8;
                match op {
                    Mfvsrd => asm!(self.ops ; mov rax, QWORD [rbx + dw0]),
                    Mfvsrwz => asm!(self.ops ; mov eax, DWORD [rbx + dw0]),
                    Mtvsrd => {
                        self.gpr_rm(GprOp::Load64, RAX, ra);
                        asm!(self.ops ; mov QWORD [rbx + dw0], rax);
                    }
                    _ => {
                        self.gpr_rm(GprOp::Load32, RAX, ra);
                        asm!(self.ops ; mov QWORD [rbx + dw0], rax);
                    }
                }
                if matches!(op, Mfvsrd | Mfvsrwz) {
                    self.set_gpr(ra);
                }
            }
            Cmpb => {
                // Bytes equal → 0xff, else 0: one SSE byte compare.
                asm!(self.ops
                    ; movq xmm0, QWORD [rbx + gpr(rt)]
                    ; movq xmm1, QWORD [rbx + gpr(rb)]
                    ; pcmpeqb xmm0, xmm1
                    ; movq rax, xmm0
                );
                self.set_gpr(ra);
            }
            Dcbz => self.zero_block(op, i),
            Popcntd if std::arch::is_x86_feature_detected!("popcnt") => {
                asm!(self.ops ; popcnt rax, QWORD [rbx + gpr(rt)]);
                self.set_gpr(ra);
            }
            // Cache hints have no architectural effect (and never fault).
            Dcbt | Dcbtst => {}
            // The host orders memory as strongly as the interpreter's fences ask (x86 TSO:
            // only `sync`'s sequentially consistent fence needs an instruction); `ptesync`
            // also performs a pending TLB flush, in the interpreter.
            Sync if i.l_sync() == 1 => {}
            Sync if i.l_sync() != 2 => asm!(self.ops ; mfence),
            Eieio => {}
            Isync => self.isync(i),
            Lbarx | Lharx | Lwarx | Ldarx => self.load_reserve(op, i),
            StbcxDot | SthcxDot | StwcxDot | StdcxDot => self.store_conditional(op, i),
            Tdi | Twi => self.trap_immediate(op, i),
            _ => return false,
        }
        true
    }
}
