//! Guest block → Cranelift IR. Registers live in `Variable`s within the block: loaded on
//! first use and stored through on every write, so that an exit (a fault, a stop, a branch)
//! is one jump to a shared exit block instead of a copy of the register write-back; the
//! stores cost about what a write-back at the end would. Instructions without a native
//! translation call the interpreter. Loads and stores inline the TLB hit path.
//!
//! Blocks use the `tail` calling convention and chain: the shared `chain` exit finds the next
//! block in the vCPU's jump cache and tail-calls it (see [`exits::emit_chain`]). Anything
//! else returns to the run loop.
//!
//! One file per instruction family (`fixed`, `branch`, `loadstore`, `system`, `vector`);
//! which ops each translates natively is the table in [`table`]; `exits` and `memory` hold
//! what the families share.

mod branch;
mod exits;
mod fixed;
mod loadstore;
mod memory;
mod system;
mod table;
mod vector;

pub use table::native_ops;

use super::tier::{Tier, TierId, Translation};
use super::{BlockKey, JitCtx, helpers};
use crate::cpu::{CR_PACK, CR_SPREAD, CpuState, Exception, msr};
use crate::isa::{Insn, InsnFlags, Op, decode};
use crate::softmmu::{Access, mmu_idx};
use crate::vcpu::{Cpu, DecodedBlock, forward_jump, never_falls_through, side_exit};
use core::mem::offset_of;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I16, I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, InstBuilder, MemFlagsData, SigRef, Type, UserFuncName, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::Module;

const ST: i32 = offset_of!(Cpu, st) as i32;
const GPR: i32 = ST + offset_of!(CpuState, gpr) as i32;
use super::{TLB_IDX_BYTES, TLB_TABLE_PTR};
const FAULT: i32 = offset_of!(JitCtx, fault) as i32;
const PC: i32 = ST + offset_of!(CpuState, pc) as i32;
const CRF: i32 = ST + offset_of!(CpuState, crf) as i32;

// Cached registers after the 32 GPRs.
const CR: usize = 32;
const CA: usize = 33;
const SO: usize = 34;
const LR: usize = 35;
const CTR: usize = 36;
const NREGS: usize = 37;

#[derive(Clone, Copy)]
struct Reg {
    var: Variable,
    off: i32,
    /// Memory type; the variable is I64 except for CR (I32).
    mem: Type,
    loaded: bool,
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

struct Tx<'a> {
    b: FunctionBuilder<'a>,
    cpu: Value,
    ctx: Value,
    regs: [Reg; NREGS],
    le: bool,
    tlb_idx_read: i32,
    tlb_idx_write: i32,
    /// `preserve_all` signature of the module's slow-path adapter, and its address.
    sig_slow: SigRef,
    adapter: usize,
    /// Shared exits: `ret(retired)` returns to the run loop, `ret_pc(retired, pc)` stores the
    /// PC first, `chain(retired, pc)` goes on to the next block when it can.
    ret: Block,
    ret_pc: Block,
    chain: Block,
    /// Index of the instruction being translated (instructions retired before it).
    n: u64,
    pc: u64,
    /// The block key's MSR bits (`KEY_MSR_BITS`).
    key: u64,
    vsrs: vector::VsrCache,
}

/// Signature of a translated block: `(cpu, ctx)`, tail calling convention, no result
/// (instructions retired are taken off `JitCtx::budget`).
pub fn block_signature(ptr: Type) -> cranelift_codegen::ir::Signature {
    let mut sig = cranelift_codegen::ir::Signature::new(CallConv::Tail);
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(ptr));
    sig
}

/// The slow-path adapter: `(cpu, ctx, a, b, c, helper)` in the `preserve_all` convention.
fn adapter_signature() -> cranelift_codegen::ir::Signature {
    let mut sig = cranelift_codegen::ir::Signature::new(CallConv::PreserveAll);
    sig.params.extend([AbiParam::new(I64); 6]);
    sig
}

/// Compiles the slow-path adapter of a module: it calls `helper(cpu, ctx, a, b, c)` (C
/// convention, result in `JitCtx::ret`) and preserves every register. Blocks call their
/// helpers (TLB misses, the interpreter) through it, so that a slow path clobbers nothing:
/// the hot path keeps its values in registers instead of saving callee-saved registers in
/// every block's prologue and spilling around each call.
fn compile_adapter(module: &mut cranelift_jit::JITModule) -> usize {
    compile_stub(module, adapter_signature(), |b, p| {
        let mut c_sig = cranelift_codegen::ir::Signature::new(CallConv::SystemV);
        c_sig.params.extend([AbiParam::new(I64); 5]);
        let c_sig = b.import_signature(c_sig);
        b.ins().call_indirect(c_sig, p[5], &p[..5]);
    })
}

/// Compiles the entry trampoline of a module: `extern "C" fn(cpu, ctx, block)` calls
/// `block` (Rust cannot call the tail convention).
fn compile_trampoline(module: &mut cranelift_jit::JITModule) -> usize {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.params.extend([AbiParam::new(ptr); 3]);
    compile_stub(module, sig, |b, p| {
        let tail = b.import_signature(block_signature(ptr));
        b.ins().call_indirect(tail, p[2], &[p[0], p[1]]);
    })
}

/// Compiles a one-block function of signature `sig` whose body `body` emits (given the
/// parameters) before it returns; finalizes it and returns its address.
fn compile_stub(
    module: &mut cranelift_jit::JITModule,
    sig: cranelift_codegen::ir::Signature,
    body: impl FnOnce(&mut FunctionBuilder, &[Value]),
) -> usize {
    let fcfg = module.target_config();
    let id = module
        .declare_anonymous_function(&sig)
        .expect("declare stub");
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fb = cranelift_frontend::FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fb);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    body(&mut b, &p);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(fcfg);
    module.define_function(id, &mut ctx).expect("compile stub");
    module.finalize_definitions().expect("finalize stub");
    module.get_finalized_function(id) as usize
}

/// The entry trampoline of a module: runs the block (and those it chains to) with these
/// pointers.
type Trampoline = unsafe extern "C" fn(*mut Cpu, *mut JitCtx, usize);

/// The optimizing tier: Cranelift, one `JITModule` per vCPU (modules are not `Sync`, and
/// one shared module would be a global translation lock).
pub struct CraneliftTier {
    module: JITModule,
    cl_ctx: cranelift_codegen::Context,
    fb_ctx: cranelift_frontend::FunctionBuilderContext,
    /// Entry trampoline and slow-path adapter of the current module.
    trampoline: Trampoline,
    adapter: usize,
}

// SAFETY: a backend is used by one vCPU thread at a time; its module's code and data are
// owned by it and move with it.
unsafe impl Send for CraneliftTier {}

impl CraneliftTier {
    pub fn new() -> Self {
        let mut module = new_module();
        let (trampoline, adapter) = entry_points(&mut module);
        let cl_ctx = module.make_context();
        Self {
            module,
            cl_ctx,
            fb_ctx: cranelift_frontend::FunctionBuilderContext::new(),
            trampoline,
            adapter,
        }
    }
}

impl Tier for CraneliftTier {
    fn id(&self) -> TierId {
        TierId::Cranelift
    }

    /// Cranelift blocks are the last tier: `promote_after` does not apply.
    fn translate(
        &mut self,
        block: &DecodedBlock,
        key: BlockKey,
        _promote_after: Option<u32>,
    ) -> Result<Option<Translation>, Exception> {
        compile(self, block, key.flags).map(Some)
    }

    unsafe fn enter(&mut self, cpu: &mut Cpu, ctx: &mut JitCtx, entry: usize) {
        // SAFETY: the trampoline calls `entry` (a live block, the caller's promise) with
        // these two pointers.
        unsafe { (self.trampoline)(cpu, ctx, entry) }
    }

    fn entry_point(&self) -> usize {
        self.trampoline as usize
    }

    fn reset(&mut self) {
        let mut module = new_module();
        (self.trampoline, self.adapter) = entry_points(&mut module);
        let old = std::mem::replace(&mut self.module, module);
        // SAFETY: the caller guarantees that no block of the old module runs any more.
        unsafe { old.free_memory() };
    }
}

/// The trampoline and the slow-path adapter of a new module.
fn entry_points(module: &mut JITModule) -> (Trampoline, usize) {
    let f = compile_trampoline(module);
    // SAFETY: compiled with exactly this signature.
    let t = unsafe { std::mem::transmute::<usize, Trampoline>(f) };
    (t, compile_adapter(module))
}

fn new_module() -> JITModule {
    use cranelift_codegen::settings::{self, Configurable};
    let mut flags = settings::builder();
    flags.set("use_colocated_libcalls", "false").expect("flag");
    flags.set("is_pic", "false").expect("flag");
    // Cranelift's x86-64 tail calls (block chaining) rely on frame pointers.
    flags.set("preserve_frame_pointers", "true").expect("flag");
    // Experiment knobs while the translation cost is being tuned (see the report of issue 7).
    let opt = std::env::var("PPC64EMU_JIT_OPT").unwrap_or_else(|_| "speed".into());
    flags
        .set("opt_level", if opt == "none" { "none" } else { "speed" })
        .expect("flag");
    if let Ok(ra) = std::env::var("PPC64EMU_JIT_REGALLOC") {
        flags
            .set("regalloc_algorithm", &ra)
            .expect("regalloc_algorithm");
    }
    if !cfg!(debug_assertions) || std::env::var_os("PPC64EMU_JIT_NOVERIFY").is_some() {
        flags.set("enable_verifier", "false").expect("flag");
    }
    let isa = cranelift_native::builder()
        .expect("host supported by Cranelift")
        .finish(settings::Flags::new(flags))
        .expect("Cranelift ISA");
    JITModule::new(JITBuilder::with_isa(
        isa,
        cranelift_module::default_libcall_names(),
    ))
}

/// Translates `block` into a function of the vCPU's module.
fn compile(
    jit: &mut CraneliftTier,
    block: &DecodedBlock,
    key_flags: u64,
) -> Result<Translation, Exception> {
    let module = &mut jit.module;
    let fcfg = module.target_config();
    let ptr = fcfg.pointer_type();
    let sig = block_signature(ptr);
    let id = module
        .declare_anonymous_function(&sig)
        .expect("declare block");
    jit.cl_ctx.func.signature = sig;
    jit.cl_ctx.func.name = UserFuncName::user(0, id.as_u32());

    let mut b = FunctionBuilder::new(&mut jit.cl_ctx.func, &mut jit.fb_ctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (cpu, ctx) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let sig_slow = b.import_signature(adapter_signature());
    let regs = std::array::from_fn(|k| {
        let (off, mem) = match k {
            0..32 => (GPR + 8 * k as i32, I64),
            CR => (CRF, I32),
            CA => (ST + offset_of!(CpuState, ca) as i32, I8),
            SO => (ST + offset_of!(CpuState, so) as i32, I8),
            LR => (ST + offset_of!(CpuState, lr) as i32, I64),
            _ => (ST + offset_of!(CpuState, ctr) as i32, I64),
        };
        let var = b.declare_var(if mem == I32 { I32 } else { I64 });
        Reg {
            var,
            off,
            mem,
            loaded: false,
        }
    });
    let (ret, ret_pc, chain) = (b.create_block(), b.create_block(), b.create_block());
    b.append_block_param(ret, I64);
    for blk in [ret_pc, chain] {
        b.append_block_param(blk, I64);
        b.append_block_param(blk, I64);
    }
    let sig_block = b.import_signature(block_signature(ptr));
    let m = key_flags;
    let mut tx = Tx {
        b,
        cpu,
        ctx,
        regs,
        le: m & msr::LE != 0,
        tlb_idx_read: mmu_idx(m, Access::Read) as i32,
        tlb_idx_write: mmu_idx(m, Access::Write) as i32,
        sig_slow,
        adapter: jit.adapter,
        ret,
        ret_pc,
        chain,
        n: 0,
        pc: block.pc,
        key: m,
        vsrs: vector::VsrCache::new(),
    };
    // 32-bit mode (rare: early boot) runs everything through the interpreter.
    let native_ok = m & msr::SF != 0;
    let mut last_fallback = false;
    // Words run straight through: up to a jump ahead or a branch that never falls through,
    // after which words run only through side exits into them (`DecodedBlock::fetch`),
    // which leave this tier's blocks.
    let mut n = block.words.len() as u64;
    for (k, &w) in block.words.iter().enumerate() {
        tx.n = k as u64;
        tx.pc = block.pc.wrapping_add(4 * k as u64);
        let op = decode(w);
        let done = native_ok && tx.native(op, Insn(w), k + 1 == block.words.len());
        last_fallback = !done;
        if done && forward_jump(op, Insn(w)) || never_falls_through(op, Insn(w)) {
            n = k as u64 + 1;
            if !done {
                tx.fallback(op, w);
            }
            break;
        }
        if !done {
            tx.fallback(op, w);
            if side_exit(op, Insn(w)) || forward_jump(op, Insn(w)) {
                // A side exit the interpreter took (a jump ahead: always) left its target in
                // `CpuState`.
                let pc = tx.b.ins().load(I64, flags(), tx.cpu, PC);
                let next = tx.pc.wrapping_add(4) as i64;
                let taken = tx.b.ins().icmp_imm_s(IntCC::NotEqual, pc, next);
                let r = tx.iconst(k as i64 + 1);
                tx.exit_if(taken, |tx| tx.chain_exit(r, pc));
            }
        }
    }
    // Fell off the end (the last instruction was no native branch): after an interpreter
    // call the PC is in `CpuState` already.
    let r = tx.iconst(n as i64);
    let next = if last_fallback {
        tx.b.ins().load(I64, flags(), tx.cpu, PC)
    } else {
        tx.iconst(block.pc.wrapping_add(4 * n) as i64)
    };
    tx.b.ins()
        .jump(tx.chain, &[BlockArg::Value(r), BlockArg::Value(next)]);
    tx.emit_exits(key_flags, sig_block);
    tx.b.seal_all_blocks();
    tx.b.finalize(fcfg);
    module.define_function(id, &mut jit.cl_ctx).map_err(|e| {
        eprintln!(
            "ppc64emu: jit: cannot compile block at {:#x}: {e:?}",
            block.pc
        );
        Exception::Program(crate::cpu::ProgramKind::Illegal)
    })?;
    let code_bytes = jit
        .cl_ctx
        .compiled_code()
        .map_or(0, |c| c.code_buffer().len() as u64);
    module.clear_context(&mut jit.cl_ctx);
    module.finalize_definitions().expect("finalize JIT code");
    Ok(Translation {
        entry: module.get_finalized_function(id) as usize,
        code_bytes,
        native: 0,
        fallbacks: 0,
    })
}

impl Tx<'_> {
    fn get(&mut self, r: usize) -> Value {
        let g = self.regs[r];
        if !g.loaded {
            let v = if r == CR {
                self.pack_cr()
            } else {
                self.b.ins().load(g.mem, flags(), self.cpu, g.off)
            };
            let v = if g.mem == I8 {
                self.b.ins().uextend(I64, v)
            } else {
                v
            };
            self.b.def_var(g.var, v);
            self.regs[r].loaded = true;
        }
        self.b.use_var(g.var)
    }

    /// Writes a register: the variable for later reads, and `CpuState` at once.
    fn set(&mut self, r: usize, v: Value) {
        let g = self.regs[r];
        self.b.def_var(g.var, v);
        self.regs[r].loaded = true;
        if r == CR {
            return self.unpack_cr(v);
        }
        let m = if g.mem == I8 {
            self.b.ins().ireduce(I8, v)
        } else {
            v
        };
        self.b.ins().store(flags(), m, self.cpu, g.off);
    }

    /// The condition register as `mfcr` reads it (I32), from its fields' bytes (CR0 first,
    /// becoming the top nibble): byte-swapped, each round halves the gap between neighbours.
    fn pack_cr(&mut self) -> Value {
        let x = self.b.ins().load(I64, flags(), self.cpu, CRF);
        let mut x = self.b.ins().bswap(x);
        for (sh, keep) in CR_PACK {
            let y = self.b.ins().ushr_imm_s(x, sh as i64);
            let y = self.b.ins().bor(x, y);
            x = self.b.ins().band_imm_s(y, keep as i64);
        }
        self.b.ins().ireduce(I32, x)
    }

    /// Stores every CR field from `cr` (I32, as `mtcrf 0xff` takes it): [`Tx::pack_cr`]'s
    /// rounds backwards.
    fn unpack_cr(&mut self, cr: Value) {
        let mut x = self.b.ins().uextend(I64, cr);
        for (sh, keep) in CR_SPREAD {
            let y = self.b.ins().ishl_imm_s(x, sh as i64);
            let y = self.b.ins().bor(x, y);
            x = self.b.ins().band_imm_s(y, keep as i64);
        }
        let x = self.b.ins().bswap(x);
        self.b.ins().store(flags(), x, self.cpu, CRF);
    }

    fn gpr(&mut self, r: u32) -> Value {
        self.get(r as usize)
    }

    /// `(RA|0)`.
    fn gpr0(&mut self, r: u32) -> Value {
        if r == 0 {
            self.b.ins().iconst(I64, 0)
        } else {
            self.get(r as usize)
        }
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(I64, v)
    }

    /// Translates one instruction natively through its family's translator (the table in
    /// [`table`]); false leaves it to the interpreter.
    fn native(&mut self, op: Op, i: Insn, last: bool) -> bool {
        // Overflow-recording (OE) forms stay in the interpreter.
        if op.info().flags.contains(InsnFlags::OE) && i.oe() {
            return false;
        }
        match table::TRANSLATORS[op as usize] {
            Some(f) => f(self, op, i, last),
            None => false,
        }
    }
}

fn int_ty(size: u32) -> Type {
    match size {
        1 => I8,
        2 => I16,
        4 => I32,
        _ => I64,
    }
}

#[cfg(test)]
mod tests {
    use crate::cpu::msr;
    use crate::softmmu::{Access, mmu_idx};

    /// `Tx::problem_state` reads MSR[PR] from the data MMU index.
    #[test]
    fn mmu_index_bit_0_is_problem_state() {
        for m in [0, msr::DR, msr::IR | msr::DR, msr::SF | msr::LE] {
            for a in [Access::Read, Access::Write] {
                assert_eq!(mmu_idx(m, a) & 1, 0);
                assert_eq!(mmu_idx(m | msr::PR, a) & 1, 1);
            }
        }
    }
}
