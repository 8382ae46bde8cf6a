//! Guest block → Cranelift IR. Registers live in `Variable`s within the block: loaded on
//! first use and stored through on every write, so that an exit (a fault, a stop, a branch)
//! is one jump to a shared exit block instead of a copy of the register write-back; the
//! stores cost about what a write-back at the end would. The hot integer, branch, CR,
//! rotate/shift and load/store instructions are translated natively, the rest calls the
//! interpreter. Loads and stores inline the TLB hit path.
//!
//! Blocks use the `tail` calling convention and chain: the shared `chain` exit finds the next
//! block in the vCPU's jump cache and tail-calls it (see [`emit_chain`]). Anything else
//! returns to the run loop.

#[path = "translate_vector.rs"]
mod vector;

use super::{BlockKey, JC_SIZE, JcEntry, Jit, JitCtx, MAX_BLOCK_INSNS, helpers};
use crate::cpu::{CpuState, Exception, msr};
use crate::interp::Cpu;
use crate::isa::{InsnFlags, Insn, Op, Operand, decode};
use crate::softmmu::{Access, PAGE_MASK, Tlb, TlbEntry, mmu_idx};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I16, I32, I64};
use cranelift_codegen::ir::{AbiParam, Block, BlockArg, InstBuilder, MemFlagsData, SigRef, Type, UserFuncName, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_module::Module;
use core::mem::offset_of;

/// Guest code of one block, as fetched.
pub struct DecodedBlock {
    pub pc: u64,
    pub words: Vec<u32>,
}

/// Fetches the block at `pc`: up to a branch or block-ending instruction, the page end or
/// `MAX_BLOCK_INSNS`. A fault on the first word is the guest's instruction storage interrupt.
pub fn decode_block(cpu: &mut Cpu, pc: u64) -> Result<DecodedBlock, Exception> {
    let mut words = Vec::new();
    let mut a = pc;
    loop {
        let w = match cpu.mmu.fetch(&cpu.st, a) {
            Ok(w) => w,
            Err(e) if words.is_empty() => return Err(e),
            Err(_) => break,
        };
        words.push(w);
        let op = decode(w);
        let f = op.info().flags;
        a = a.wrapping_add(4);
        if op == Op::Illegal
            || f.contains(InsnFlags::BRANCH)
            || f.contains(InsnFlags::ENDS_BLOCK)
            || words.len() >= MAX_BLOCK_INSNS
            || a & !PAGE_MASK == 0
        {
            break;
        }
    }
    Ok(DecodedBlock { pc, words })
}

/// One line per instruction, for `--trace`.
pub fn describe(b: &DecodedBlock, key: BlockKey) -> String {
    let mut s = format!("ppc64emu: jit block pc={:#x} msr-bits={:#x} ({} insns)", key.pc, key.flags, b.words.len());
    for (k, w) in b.words.iter().enumerate() {
        let pc = b.pc + 4 * k as u64;
        s.push_str(&format!("\n  {pc:#018x}: {w:08x}  {}", crate::isa::disassemble(*w, pc)));
    }
    s
}

const ST: i32 = offset_of!(Cpu, st) as i32;
const GPR: i32 = ST + offset_of!(CpuState, gpr) as i32;
const TLB_TABLE: i32 = (offset_of!(Cpu, mmu) + offset_of!(crate::softmmu::SoftMmu, tlb) + offset_of!(Tlb, table)) as i32;
const TLB_IDX_BYTES: i32 = (TLB_ENTRIES * size_of::<TlbEntry>()) as i32;
/// Entries per MMU index of `Tlb::table` (checked by a test).
pub(super) const TLB_ENTRIES: usize = 256;
const FAULT: i32 = offset_of!(JitCtx, fault) as i32;
const PC: i32 = ST + offset_of!(CpuState, pc) as i32;

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

/// Emits a block's `chain` exit (in the current Cranelift block): stores the PC, counts the
/// block's instructions, returns to the run loop when the budget is spent, the vCPU was
/// kicked (raising an interrupt kicks too) or the interpreter left events, else looks the PC
/// up in the jump cache and tail-calls the block found there. Each block has its own copy so
/// that each has its own indirect jump for the host's branch predictor (one shared
/// dispatcher was the hottest code of a run, mispredicting).
///
/// Blocks dropped by another vCPU are not checked here: their code stays mapped until the
/// next cache flush, and the guest makes cross-modified code visible with `isync`, which the
/// interpreter runs and which stops the block when blocks were dropped (`helpers::interp`).
fn emit_chain(b: &mut FunctionBuilder, cpu: Value, jctx: Value, n: Value, pc: Value, key_flags: u64, sig_block: SigRef) {
    let ld = |b: &mut FunctionBuilder, ty: Type, base: Value, off: usize| b.ins().load(ty, flags(), base, off as i32);
    b.ins().store(flags(), pc, cpu, PC);
    let budget_off = offset_of!(JitCtx, budget);
    let left = ld(b, I64, jctx, budget_off);
    let left = b.ins().isub(left, n);
    b.ins().store(flags(), left, jctx, budget_off as i32);
    let spent = b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, left, 0);
    let events = ld(b, I32, cpu, offset_of!(Cpu, events));
    let kick_ptr = ld(b, I64, jctx, offset_of!(JitCtx, kick));
    let kick = ld(b, I8, kick_ptr, 0);
    let kick = b.ins().uextend(I32, kick);
    let any = b.ins().bor(events, kick);
    let any = b.ins().icmp_imm_s(IntCC::NotEqual, any, 0);
    let stop = b.ins().bor(spent, any);
    let (probe, call, out) = (b.create_block(), b.create_block(), b.create_block());
    b.ins().brif(stop, out, &[], probe, &[]);

    b.switch_to_block(probe);
    let slot = b.ins().ushr_imm_s(pc, 2);
    let slot = b.ins().band_imm_s(slot, (JC_SIZE - 1) as i64);
    let slot = b.ins().imul_imm_s(slot, size_of::<JcEntry>() as i64);
    let jc = ld(b, I64, jctx, offset_of!(JitCtx, jc));
    let e = b.ins().iadd(jc, slot);
    let epc = ld(b, I64, e, offset_of!(JcEntry, pc));
    let eflags = ld(b, I64, e, offset_of!(JcEntry, flags));
    let f = ld(b, I64, e, offset_of!(JcEntry, f));
    let d = b.ins().bxor(epc, pc);
    let fd = b.ins().bxor_imm_s(eflags, key_flags as i64);
    let d = b.ins().bor(d, fd);
    let hit = b.ins().icmp_imm_s(IntCC::Equal, d, 0);
    b.ins().brif(hit, call, &[], out, &[]);

    b.switch_to_block(call);
    b.ins().return_call_indirect(sig_block, f, &[cpu, jctx]);

    b.switch_to_block(out);
    b.ins().return_(&[]);
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
pub fn compile_adapter(module: &mut cranelift_jit::JITModule) -> usize {
    compile_stub(module, adapter_signature(), |b, p| {
        let mut c_sig = cranelift_codegen::ir::Signature::new(CallConv::SystemV);
        c_sig.params.extend([AbiParam::new(I64); 5]);
        let c_sig = b.import_signature(c_sig);
        b.ins().call_indirect(c_sig, p[5], &p[..5]);
    })
}

/// Compiles the entry trampoline of a module: `extern "C" fn(cpu, ctx, block)` calls
/// `block` (Rust cannot call the tail convention).
pub fn compile_trampoline(module: &mut cranelift_jit::JITModule) -> usize {
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
    let id = module.declare_anonymous_function(&sig).expect("declare stub");
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

/// Translates `block` into a function of the vCPU's module.
pub fn compile(jit: &mut Jit, block: &DecodedBlock, key_flags: u64) -> Result<usize, Exception> {
    let module = &mut jit.module;
    let fcfg = module.target_config();
    let ptr = fcfg.pointer_type();
    let sig = block_signature(ptr);
    let id = module.declare_anonymous_function(&sig).expect("declare block");
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
            CR => (ST + offset_of!(CpuState, cr) as i32, I32),
            CA => (ST + offset_of!(CpuState, ca) as i32, I8),
            SO => (ST + offset_of!(CpuState, so) as i32, I8),
            LR => (ST + offset_of!(CpuState, lr) as i32, I64),
            _ => (ST + offset_of!(CpuState, ctr) as i32, I64),
        };
        let var = b.declare_var(if mem == I32 { I32 } else { I64 });
        Reg { var, off, mem, loaded: false }
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
    for (k, &w) in block.words.iter().enumerate() {
        tx.n = k as u64;
        tx.pc = block.pc.wrapping_add(4 * k as u64);
        let op = decode(w);
        let done = native_ok && tx.native(op, Insn(w), k + 1 == block.words.len());
        last_fallback = !done;
        if !done {
            tx.fallback(op, w);
        }
    }
    // Fell off the end (the last instruction was no native branch): after an interpreter
    // call the PC is in `CpuState` already.
    let n = block.words.len() as u64;
    let r = tx.iconst(n as i64);
    let next = if last_fallback {
        tx.b.ins().load(I64, flags(), tx.cpu, PC)
    } else {
        tx.iconst(block.pc.wrapping_add(4 * n) as i64)
    };
    tx.b.ins().jump(tx.chain, &[BlockArg::Value(r), BlockArg::Value(next)]);
    tx.emit_exits(key_flags, sig_block);
    tx.b.seal_all_blocks();
    tx.b.finalize(fcfg);
    module.define_function(id, &mut jit.cl_ctx).map_err(|e| {
        eprintln!("ppc64emu: jit: cannot compile block at {:#x}: {e:?}", block.pc);
        Exception::Program(crate::cpu::ProgramKind::Illegal)
    })?;
    jit.counters.code_bytes += jit.cl_ctx.compiled_code().map_or(0, |c| c.code_buffer().len() as u64);
    module.clear_context(&mut jit.cl_ctx);
    module.finalize_definitions().expect("finalize JIT code");
    Ok(module.get_finalized_function(id) as usize)
}

impl Tx<'_> {
    // --- register cache ---

    fn get(&mut self, r: usize) -> Value {
        let g = self.regs[r];
        if !g.loaded {
            let v = self.b.ins().load(g.mem, flags(), self.cpu, g.off);
            let v = if g.mem == I8 { self.b.ins().uextend(I64, v) } else { v };
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
        let m = if g.mem == I8 { self.b.ins().ireduce(I8, v) } else { v };
        self.b.ins().store(flags(), m, self.cpu, g.off);
    }

    fn gpr(&mut self, r: u32) -> Value {
        self.get(r as usize)
    }

    /// `(RA|0)`.
    fn gpr0(&mut self, r: u32) -> Value {
        if r == 0 { self.b.ins().iconst(I64, 0) } else { self.get(r as usize) }
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(I64, v)
    }

    /// Returns to the run loop with `retired` instructions done, storing `pc` when given.
    fn exit(&mut self, retired: Value, pc: Option<Value>) {
        match pc {
            Some(pc) => self.b.ins().jump(self.ret_pc, &[BlockArg::Value(retired), BlockArg::Value(pc)]),
            None => self.b.ins().jump(self.ret, &[BlockArg::Value(retired)]),
        };
    }

    /// Leaves the block for `pc` with `retired` instructions done, chaining when it can.
    fn chain_exit(&mut self, retired: Value, pc: Value) {
        self.b.ins().jump(self.chain, &[BlockArg::Value(retired), BlockArg::Value(pc)]);
    }

    fn ctx_load(&mut self, ty: Type, off: usize) -> Value {
        self.b.ins().load(ty, flags(), self.ctx, off as i32)
    }

    /// The shared exit blocks (see the module doc).
    fn emit_exits(&mut self, key_flags: u64, sig_block: SigRef) {
        let (ret, ret_pc, chain) = (self.ret, self.ret_pc, self.chain);
        let budget_off = offset_of!(JitCtx, budget);

        self.b.switch_to_block(ret_pc);
        let (n, pc) = (self.b.block_params(ret_pc)[0], self.b.block_params(ret_pc)[1]);
        self.b.ins().store(flags(), pc, self.cpu, PC);
        self.b.ins().jump(ret, &[BlockArg::Value(n)]);

        self.b.switch_to_block(ret);
        let n = self.b.block_params(ret)[0];
        let left = self.ctx_load(I64, budget_off);
        let left = self.b.ins().isub(left, n);
        self.b.ins().store(flags(), left, self.ctx, budget_off as i32);
        self.b.ins().return_(&[]);

        self.b.switch_to_block(chain);
        let (n, pc) = (self.b.block_params(chain)[0], self.b.block_params(chain)[1]);
        emit_chain(&mut self.b, self.cpu, self.ctx, n, pc, key_flags, sig_block);
    }

    /// Branches to an exit when `cond` holds, then goes on in a new block.
    fn exit_if(&mut self, cond: Value, f: impl FnOnce(&mut Self)) {
        let (out, cont) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(cond, out, &[], cont, &[]);
        self.b.switch_to_block(out);
        f(self);
        self.b.switch_to_block(cont);
    }

    // --- interpreter fallback ---

    /// Runs the instruction in the interpreter; the registers it may change are read again
    /// from `CpuState` afterwards.
    fn fallback(&mut self, op: Op, word: u32) {
        self.call_interp(op, word);
        for g in &mut self.regs {
            g.loaded = false;
        }
        self.vsrs.invalidate();
    }

    /// Calls the interpreter for one instruction (registers are in `CpuState` already: they
    /// are stored through); the block returns to the run loop when the helper says so.
    fn call_interp(&mut self, op: Op, word: u32) {
        let pc = self.iconst(self.pc as i64);
        self.b.ins().store(flags(), pc, self.cpu, PC);
        let w = self.iconst(word as i64);
        let o = self.iconst(op as i64);
        let zero = self.iconst(0);
        let r = self.slow_call(helpers::interp as *const () as usize, [w, o, zero]);
        let n = self.n as i64;
        self.exit_if(r, |t| {
            // STOP_FAULT retires nothing more, STOP_AFTER this instruction.
            let retired = t.b.ins().iadd_imm_s(r, n - 1);
            t.exit(retired, None);
        });
    }

    /// Calls `helper(cpu, ctx, a, b, c)` through the module's adapter; returns `JitCtx::ret`.
    fn slow_call(&mut self, helper: usize, args: [Value; 3]) -> Value {
        let adapter = self.iconst(self.adapter as i64);
        let h = self.iconst(helper as i64);
        let [a, b, c] = args;
        self.b.ins().call_indirect(self.sig_slow, adapter, &[self.cpu, self.ctx, a, b, c, h]);
        self.b.ins().load(I64, flags(), self.ctx, offset_of!(JitCtx, ret) as i32)
    }

    // --- memory ---

    fn tlb_entry(&mut self, ea: Value) -> Value {
        let s = self.b.ins().ushr_imm_s(ea, 12);
        let s = self.b.ins().band_imm_s(s, (TLB_ENTRIES - 1) as i64);
        let s = self.b.ins().imul_imm_s(s, size_of::<TlbEntry>() as i64);
        self.b.ins().iadd(self.cpu, s)
    }

    /// Page tag equal and the access aligned (an invalid tag has bit 0 set, so it never
    /// equals a page address; the alignment bits are tested apart so they cannot fake it).
    fn tag_hit(&mut self, ea: Value, tag: Value, size: u32) -> Value {
        let page = self.b.ins().band_imm_s(ea, PAGE_MASK as i64);
        let mut d = self.b.ins().bxor(page, tag);
        if size > 1 {
            let low = self.b.ins().band_imm_s(ea, size as i64 - 1);
            d = self.b.ins().bor(d, low);
        }
        self.b.ins().icmp_imm_s(IntCC::Equal, d, 0)
    }

    /// Branches to the fault exit (the current instruction did not retire) when `fault` is
    /// non-zero, else to `merge` with `v`.
    fn fault_or_merge(&mut self, fault: Value, merge: Block, v: Value) {
        let n = self.iconst(self.n as i64);
        let pc = self.iconst(self.pc as i64);
        let out = [BlockArg::Value(n), BlockArg::Value(pc)];
        self.b.ins().brif(fault, self.ret_pc, &out, merge, &[BlockArg::Value(v)]);
    }

    /// Loads `size` bytes at `ea` in guest order; the value is zero-extended to I64.
    fn load(&mut self, ea: Value, size: u32, le: bool) -> Value {
        let ty = int_ty(size);
        let ent = self.tlb_entry(ea);
        let base = TLB_TABLE + self.tlb_idx_read * TLB_IDX_BYTES;
        let tag = self.b.ins().load(I64, flags(), ent, base + offset_of!(TlbEntry, read) as i32);
        let hit = self.tag_hit(ea, tag, size);
        let (hb, mb, merge) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        let out = self.b.append_block_param(merge, I64);
        self.b.ins().brif(hit, hb, &[], mb, &[]);

        self.b.switch_to_block(hb);
        let add = self.b.ins().load(I64, flags(), ent, base + offset_of!(TlbEntry, addend) as i32);
        let host = self.b.ins().iadd(ea, add);
        let raw = self.b.ins().load(ty, flags(), host, 0);
        let v = if size > 1 && !le { self.b.ins().bswap(raw) } else { raw };
        let v = if size < 8 { self.b.ins().uextend(I64, v) } else { v };
        self.b.ins().jump(merge, &[BlockArg::Value(v)]);

        self.b.switch_to_block(mb);
        self.b.set_cold_block(mb);
        let sz = self.iconst(size as i64);
        let l = self.iconst(le as i64);
        let v = self.slow_call(helpers::load as *const () as usize, [ea, sz, l]);
        // The run loop clears `fault` when it takes the exception.
        let fault = self.b.ins().load(I32, flags(), self.ctx, FAULT);
        self.fault_or_merge(fault, merge, v);

        self.b.switch_to_block(merge);
        out
    }

    /// Stores the low `size` bytes of `val`; returns an I64 that is non-zero when the block
    /// must stop after this instruction (translated code was written).
    fn store(&mut self, ea: Value, val: Value, size: u32, le: bool) -> Value {
        let ty = int_ty(size);
        let ent = self.tlb_entry(ea);
        let base = TLB_TABLE + self.tlb_idx_write * TLB_IDX_BYTES;
        let tag = self.b.ins().load(I64, flags(), ent, base + offset_of!(TlbEntry, write) as i32);
        let hit = self.tag_hit(ea, tag, size);
        let (hb, mb, merge) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        let out = self.b.append_block_param(merge, I64);
        self.b.ins().brif(hit, hb, &[], mb, &[]);

        self.b.switch_to_block(hb);
        let add = self.b.ins().load(I64, flags(), ent, base + offset_of!(TlbEntry, addend) as i32);
        let host = self.b.ins().iadd(ea, add);
        let v = if size < 8 { self.b.ins().ireduce(ty, val) } else { val };
        let v = if size > 1 && !le { self.b.ins().bswap(v) } else { v };
        self.b.ins().store(flags(), v, host, 0);
        let zero = self.iconst(0);
        self.b.ins().jump(merge, &[BlockArg::Value(zero)]);

        self.b.switch_to_block(mb);
        self.b.set_cold_block(mb);
        let size_le = self.iconst((size | (le as u32) << 8) as i64);
        let r = self.slow_call(helpers::store as *const () as usize, [ea, val, size_le]);
        let is_fault = self.b.ins().icmp_imm_s(IntCC::Equal, r, helpers::STOP_FAULT as i64);
        self.fault_or_merge(is_fault, merge, r);

        self.b.switch_to_block(merge);
        out
    }

    /// After an instruction that stored: stop when the store wrote translated code.
    fn stop_after_if(&mut self, stop: Value) {
        let n = self.n as i64 + 1;
        let next = self.pc.wrapping_add(4) as i64;
        self.exit_if(stop, |t| {
            let r = t.iconst(n);
            let pc = t.iconst(next);
            t.exit(r, Some(pc));
        });
    }

    // --- CR ---

    fn set_crf(&mut self, bf: u32, field: Value) {
        let sh = 28 - 4 * bf as i64;
        let cr = self.get(CR);
        let cr = self.b.ins().band_imm_s(cr, !(0xf_i64 << sh) & 0xffff_ffff);
        let f = self.b.ins().ishl_imm_s(field, sh);
        let cr = self.b.ins().bor(cr, f);
        self.set(CR, cr);
    }

    /// CR field value LT|GT|EQ|SO from two comparisons (I8 booleans).
    fn compare_field(&mut self, lt: Value, gt: Value) -> Value {
        let c8 = self.b.ins().iconst(I32, 8);
        let c4 = self.b.ins().iconst(I32, 4);
        let c2 = self.b.ins().iconst(I32, 2);
        let g = self.b.ins().select(gt, c4, c2);
        let v = self.b.ins().select(lt, c8, g);
        let so = self.get(SO);
        let so = self.b.ins().ireduce(I32, so);
        self.b.ins().bor(v, so)
    }

    fn record(&mut self, v: Value) {
        let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
        let gt = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, v, 0);
        let f = self.compare_field(lt, gt);
        self.set_crf(0, f);
    }

    fn set_rc(&mut self, i: Insn, r: u32, v: Value) {
        self.set(r as usize, v);
        if i.rc() {
            self.record(v);
        }
    }

    /// CR bit `n` as an I8 boolean.
    fn cr_bit(&mut self, n: u32) -> Value {
        let cr = self.get(CR);
        let v = self.b.ins().ushr_imm_s(cr, 31 - n as i64);
        let v = self.b.ins().band_imm_s(v, 1);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
    }

    fn set_cr_bit(&mut self, n: u32, bit: Value) {
        let sh = 31 - n as i64;
        let cr = self.get(CR);
        let cr = self.b.ins().band_imm_s(cr, !(1_i64 << sh) & 0xffff_ffff);
        let bit = self.b.ins().uextend(I32, bit);
        let bit = self.b.ins().ishl_imm_s(bit, sh);
        let cr = self.b.ins().bor(cr, bit);
        self.set(CR, cr);
    }

    /// Branch condition of BO/BI (decrementing CTR when BO says so), as an I8 boolean.
    fn condition(&mut self, i: Insn, use_ctr: bool) -> Value {
        let bo = i.rt();
        let mut ok = self.b.ins().iconst(I8, 1);
        if use_ctr && bo & 4 == 0 {
            let ctr = self.get(CTR);
            let ctr = self.b.ins().iadd_imm_s(ctr, -1);
            self.set(CTR, ctr);
            let cc = if bo & 2 != 0 { IntCC::Equal } else { IntCC::NotEqual };
            ok = self.b.ins().icmp_imm_s(cc, ctr, 0);
        }
        if bo & 0x10 == 0 {
            let bit = self.cr_bit(i.ra());
            let want = if bo & 8 != 0 { bit } else { self.b.ins().bxor_imm_s(bit, 1) };
            ok = self.b.ins().band(ok, want);
        }
        ok
    }

    /// Ends the block at a branch: `taken` selects `target` over the next instruction.
    fn branch_exit(&mut self, i: Insn, taken: Option<Value>, target: Value) {
        let next = self.iconst(self.pc.wrapping_add(4) as i64);
        if i.lk() {
            self.set(LR, next);
        }
        let nia = match taken {
            Some(t) => self.b.ins().select(t, target, next),
            None => target,
        };
        let r = self.iconst(self.n as i64 + 1);
        self.chain_exit(r, nia);
        // Anything after is unreachable; give the builder a block to finish in.
        let dead = self.b.create_block();
        self.b.switch_to_block(dead);
    }

    // --- arithmetic ---

    /// `a + b + cin` and the carry out (I64 0/1).
    fn add_carry(&mut self, a: Value, b: Value, cin: Value) -> (Value, Value) {
        let s = self.b.ins().iadd(a, b);
        let c1 = self.b.ins().icmp(IntCC::UnsignedLessThan, s, a);
        let r = self.b.ins().iadd(s, cin);
        let c2 = self.b.ins().icmp(IntCC::UnsignedLessThan, r, s);
        let c = self.b.ins().bor(c1, c2);
        (r, self.b.ins().uextend(I64, c))
    }

    fn sra(&mut self, i: Insn, v: Value, n: Value, bits: i64) {
        let big = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, n, bits);
        let c63 = self.iconst(63);
        let nn = self.b.ins().select(big, c63, n);
        let r = self.b.ins().sshr(v, nn);
        let c64 = self.iconst(64);
        let back = self.b.ins().isub(c64, nn);
        let lostv = self.b.ins().ishl(v, back);
        let lost_small = self.b.ins().icmp_imm_s(IntCC::NotEqual, lostv, 0);
        let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, nn, 0);
        let lost_small = self.b.ins().band(lost_small, nz);
        let vnz = self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
        let lost = self.b.ins().select(big, vnz, lost_small);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
        let ca = self.b.ins().band(neg, lost);
        let ca = self.b.ins().uextend(I64, ca);
        self.set(CA, ca);
        self.set_rc(i, i.ra(), r);
    }

    fn rotl32(&mut self, x: Value, n: Value) -> Value {
        let w = self.b.ins().band_imm_s(x, 0xffff_ffff);
        let hi = self.b.ins().ishl_imm_s(w, 32);
        let d = self.b.ins().bor(w, hi);
        self.b.ins().rotl(d, n)
    }

    /// Effective address of a load/store: `D(RA|0)`, `DS(RA|0)`, `(RA|0)+RB`, or with RA
    /// for the update forms.
    fn ea(&mut self, op: Op, i: Insn, update: bool) -> Value {
        let ops = op.info().operands;
        let base = if update { self.gpr(i.ra()) } else { self.gpr0(i.ra()) };
        if ops.contains(&Operand::DRa) {
            self.b.ins().iadd_imm_s(base, i.si())
        } else if ops.contains(&Operand::DsRa) {
            self.b.ins().iadd_imm_s(base, i.ds())
        } else {
            let rb = self.gpr(i.rb());
            self.b.ins().iadd(base, rb)
        }
    }

    /// Translates one instruction natively; false leaves it to the interpreter.
    fn native(&mut self, op: Op, i: Insn, last: bool) -> bool {
        use Op::*;
        let info = op.info();
        let (rt, ra, rb) = (i.rt(), i.ra(), i.rb());
        // Overflow-recording (OE) forms stay in the interpreter.
        if info.flags.contains(InsnFlags::OE) && i.oe() {
            return false;
        }
        match op {
            Addi | Addis => {
                let a = self.gpr0(ra);
                let imm = if op == Addis { i.si() << 16 } else { i.si() };
                let v = self.b.ins().iadd_imm_s(a, imm);
                self.set(rt as usize, v);
            }
            Add | Subf | Neg => {
                let a = self.gpr(ra);
                let v = match op {
                    Add => {
                        let b = self.gpr(rb);
                        self.b.ins().iadd(a, b)
                    }
                    Subf => {
                        let b = self.gpr(rb);
                        self.b.ins().isub(b, a)
                    }
                    _ => self.b.ins().ineg(a),
                };
                self.set_rc(i, rt, v);
            }
            Addic | AddicDot | Subfic | Addc | Adde | Addze | Addme | Subfc | Subfe | Subfze | Subfme => {
                let a = self.gpr(ra);
                let na = self.b.ins().bnot(a);
                let (x, y, cin) = match op {
                    Addic | AddicDot => (a, self.iconst(i.si()), self.iconst(0)),
                    Subfic => (na, self.iconst(i.si()), self.iconst(1)),
                    Addc => (a, self.gpr(rb), self.iconst(0)),
                    Adde => (a, self.gpr(rb), self.get(CA)),
                    Addze => (a, self.iconst(0), self.get(CA)),
                    Addme => (a, self.iconst(-1), self.get(CA)),
                    Subfc => (na, self.gpr(rb), self.iconst(1)),
                    Subfe => (na, self.gpr(rb), self.get(CA)),
                    Subfze => (na, self.iconst(0), self.get(CA)),
                    _ => (na, self.iconst(-1), self.get(CA)),
                };
                let (r, ca) = self.add_carry(x, y, cin);
                self.set(CA, ca);
                self.set(rt as usize, r);
                if op == AddicDot || (!matches!(op, Addic | Subfic) && i.rc()) {
                    self.record(r);
                }
            }
            Mulli => {
                let a = self.gpr(ra);
                let v = self.b.ins().imul_imm_s(a, i.si());
                self.set(rt as usize, v);
            }
            Mulld | Mullw | Mulhd | Mulhdu => {
                let (a, b) = (self.gpr(ra), self.gpr(rb));
                let v = match op {
                    Mulld => self.b.ins().imul(a, b),
                    Mulhd => self.b.ins().smulhi(a, b),
                    Mulhdu => self.b.ins().umulhi(a, b),
                    _ => {
                        let a = self.b.ins().ireduce(I32, a);
                        let a = self.b.ins().sextend(I64, a);
                        let b = self.b.ins().ireduce(I32, b);
                        let b = self.b.ins().sextend(I64, b);
                        self.b.ins().imul(a, b)
                    }
                };
                self.set_rc(i, rt, v);
            }
            And | Or | Xor | Nand | Nor | Andc | Orc | Eqv => {
                let (s, b) = (self.gpr(rt), self.gpr(rb));
                let v = match op {
                    And => self.b.ins().band(s, b),
                    Or => self.b.ins().bor(s, b),
                    Xor => self.b.ins().bxor(s, b),
                    Nand => {
                        let x = self.b.ins().band(s, b);
                        self.b.ins().bnot(x)
                    }
                    Nor => {
                        let x = self.b.ins().bor(s, b);
                        self.b.ins().bnot(x)
                    }
                    Andc => self.b.ins().band_not(s, b),
                    Orc => self.b.ins().bor_not(s, b),
                    _ => {
                        let x = self.b.ins().bxor(s, b);
                        self.b.ins().bnot(x)
                    }
                };
                self.set_rc(i, ra, v);
            }
            Ori | Oris | Xori | Xoris | AndiDot | AndisDot => {
                let s = self.gpr(rt);
                let ui = i.ui() as i64;
                let v = match op {
                    Ori => self.b.ins().bor_imm_s(s, ui),
                    Oris => self.b.ins().bor_imm_s(s, ui << 16),
                    Xori => self.b.ins().bxor_imm_s(s, ui),
                    Xoris => self.b.ins().bxor_imm_s(s, ui << 16),
                    AndiDot => self.b.ins().band_imm_s(s, ui),
                    _ => self.b.ins().band_imm_s(s, ui << 16),
                };
                self.set(ra as usize, v);
                if matches!(op, AndiDot | AndisDot) {
                    self.record(v);
                }
            }
            Extsb | Extsh | Extsw | Cntlzw | Cntlzd => {
                let s = self.gpr(rt);
                let v = match op {
                    Extsb | Extsh | Extsw => {
                        let ty = match op {
                            Extsb => I8,
                            Extsh => I16,
                            _ => I32,
                        };
                        let x = self.b.ins().ireduce(ty, s);
                        self.b.ins().sextend(I64, x)
                    }
                    Cntlzw => {
                        let x = self.b.ins().ireduce(I32, s);
                        let x = self.b.ins().clz(x);
                        self.b.ins().uextend(I64, x)
                    }
                    _ => self.b.ins().clz(s),
                };
                self.set_rc(i, ra, v);
            }
            Slw | Srw | Sld | Srd => {
                let (s, b) = (self.gpr(rt), self.gpr(rb));
                let word = matches!(op, Slw | Srw);
                let (amt_mask, over) = if word { (0x1f, 0x20) } else { (0x3f, 0x40) };
                let n = self.b.ins().band_imm_s(b, amt_mask);
                let s = if word { self.b.ins().band_imm_s(s, 0xffff_ffff) } else { s };
                let v = if matches!(op, Slw | Sld) { self.b.ins().ishl(s, n) } else { self.b.ins().ushr(s, n) };
                let v = if word { self.b.ins().band_imm_s(v, 0xffff_ffff) } else { v };
                let o = self.b.ins().band_imm_s(b, over);
                let zero = self.iconst(0);
                let v = self.b.ins().select(o, zero, v);
                self.set_rc(i, ra, v);
            }
            Sraw | Srawi | Srad | Sradi => {
                let s = self.gpr(rt);
                let (v, n, bits) = match op {
                    Sraw | Srawi => {
                        let x = self.b.ins().ireduce(I32, s);
                        let x = self.b.ins().sextend(I64, x);
                        let n = if op == Sraw {
                            let b = self.gpr(rb);
                            self.b.ins().band_imm_s(b, 0x3f)
                        } else {
                            self.iconst(i.sh() as i64)
                        };
                        (x, n, 32)
                    }
                    _ => {
                        let n = if op == Srad {
                            let b = self.gpr(rb);
                            self.b.ins().band_imm_s(b, 0x7f)
                        } else {
                            self.iconst(i.sh6() as i64)
                        };
                        (s, n, 64)
                    }
                };
                self.sra(i, v, n, bits);
            }
            Rlwinm | Rlwnm | Rlwimi => {
                let s = self.gpr(rt);
                let n = if op == Rlwnm {
                    let b = self.gpr(rb);
                    self.b.ins().band_imm_s(b, 0x1f)
                } else {
                    self.iconst(i.sh() as i64)
                };
                let r = self.rotl32(s, n);
                let m = crate::interp::mask64(i.mb() + 32, i.me() + 32);
                let mut v = self.b.ins().band_imm_s(r, m as i64);
                if op == Rlwimi {
                    let a = self.gpr(ra);
                    let keep = self.b.ins().band_imm_s(a, !m as i64);
                    v = self.b.ins().bor(v, keep);
                }
                self.set_rc(i, ra, v);
            }
            Rldicl | Rldicr | Rldic | Rldimi | Rldcl | Rldcr => {
                let s = self.gpr(rt);
                let n = if matches!(op, Rldcl | Rldcr) {
                    let b = self.gpr(rb);
                    self.b.ins().band_imm_s(b, 0x3f)
                } else {
                    self.iconst(i.sh6() as i64)
                };
                let r = self.b.ins().rotl(s, n);
                let m = match op {
                    Rldicl | Rldcl => crate::interp::mask64(i.mb6(), 63),
                    Rldicr | Rldcr => crate::interp::mask64(0, i.mb6()),
                    _ => crate::interp::mask64(i.mb6(), 63 - i.sh6()),
                };
                let mut v = self.b.ins().band_imm_s(r, m as i64);
                if op == Rldimi {
                    let a = self.gpr(ra);
                    let keep = self.b.ins().band_imm_s(a, !m as i64);
                    v = self.b.ins().bor(v, keep);
                }
                self.set_rc(i, ra, v);
            }
            Cmp | Cmpi | Cmpl | Cmpli => {
                let a = self.gpr(ra);
                let signed = matches!(op, Cmp | Cmpi);
                let b = match op {
                    Cmp | Cmpl => self.gpr(rb),
                    Cmpi => self.iconst(i.si()),
                    _ => self.iconst(i.ui() as i64),
                };
                let (a, b) = if i.l10() != 0 {
                    (a, b)
                } else {
                    let ext = |t: &mut Self, x: Value| {
                        let x = t.b.ins().ireduce(I32, x);
                        if signed { t.b.ins().sextend(I64, x) } else { t.b.ins().uextend(I64, x) }
                    };
                    (ext(self, a), ext(self, b))
                };
                let (ltc, gtc) = if signed {
                    (IntCC::SignedLessThan, IntCC::SignedGreaterThan)
                } else {
                    (IntCC::UnsignedLessThan, IntCC::UnsignedGreaterThan)
                };
                let lt = self.b.ins().icmp(ltc, a, b);
                let gt = self.b.ins().icmp(gtc, a, b);
                let f = self.compare_field(lt, gt);
                self.set_crf(i.bf(), f);
            }
            Isel => {
                let c = self.cr_bit(i.frc());
                let a = self.gpr0(ra);
                let b = self.gpr(rb);
                let v = self.b.ins().select(c, a, b);
                self.set(rt as usize, v);
            }
            Crand | Cror | Crxor | Crnand | Crnor | Creqv | Crandc | Crorc => {
                let (a, b) = (self.cr_bit(ra), self.cr_bit(rb));
                let v = match op {
                    Crand => self.b.ins().band(a, b),
                    Cror => self.b.ins().bor(a, b),
                    Crxor => self.b.ins().bxor(a, b),
                    Crnand => {
                        let x = self.b.ins().band(a, b);
                        self.b.ins().bxor_imm_s(x, 1)
                    }
                    Crnor => {
                        let x = self.b.ins().bor(a, b);
                        self.b.ins().bxor_imm_s(x, 1)
                    }
                    Creqv => {
                        let x = self.b.ins().bxor(a, b);
                        self.b.ins().bxor_imm_s(x, 1)
                    }
                    Crandc => {
                        let nb = self.b.ins().bxor_imm_s(b, 1);
                        self.b.ins().band(a, nb)
                    }
                    _ => {
                        let nb = self.b.ins().bxor_imm_s(b, 1);
                        self.b.ins().bor(a, nb)
                    }
                };
                self.set_cr_bit(rt, v);
            }
            Mcrf => {
                let cr = self.get(CR);
                let f = self.b.ins().ushr_imm_s(cr, 28 - 4 * i.bfa() as i64);
                let f = self.b.ins().band_imm_s(f, 0xf);
                self.set_crf(i.bf(), f);
            }
            Mfcr => {
                let cr = self.get(CR);
                let v = self.b.ins().uextend(I64, cr);
                self.set(rt as usize, v);
            }
            Mtcrf => {
                let fxm = i.fxm();
                let m: u32 = (0..8).filter(|k| fxm & (0x80 >> k) != 0).map(|k| 0xf << (28 - 4 * k)).fold(0, |a, b| a | b);
                let s = self.gpr(rt);
                let s = self.b.ins().ireduce(I32, s);
                let s = self.b.ins().band_imm_s(s, m as i64);
                let cr = self.get(CR);
                let cr = self.b.ins().band_imm_s(cr, (!m) as i64);
                let cr = self.b.ins().bor(cr, s);
                self.set(CR, cr);
            }
            Mfspr | Mtspr if matches!(i.spr(), 8 | 9) => {
                let r = if i.spr() == 8 { LR } else { CTR };
                if op == Mfspr {
                    let v = self.get(r);
                    self.set(rt as usize, v);
                } else {
                    let v = self.gpr(rt);
                    self.set(r, v);
                }
            }
            B => {
                let base = if i.aa() != 0 { 0 } else { self.pc };
                let t = self.iconst(base.wrapping_add(i.li() as u64) as i64);
                self.branch_exit(i, None, t);
            }
            Bc => {
                let taken = self.condition(i, true);
                let base = if i.aa() != 0 { 0 } else { self.pc };
                let t = self.iconst(base.wrapping_add(i.bd() as u64) as i64);
                self.branch_exit(i, Some(taken), t);
            }
            Bclr | Bcctr if op == Bclr || i.rt() & 4 != 0 => {
                // The target is read before LK updates LR.
                let src = if op == Bclr { LR } else { CTR };
                let t = self.get(src);
                let t = self.b.ins().band_imm_s(t, !3);
                let taken = self.condition(i, op == Bclr);
                self.branch_exit(i, Some(taken), t);
            }
            Lbz | Lbzu | Lbzx | Lbzux | Lhz | Lhzu | Lhzx | Lhzux | Lha | Lhau | Lhax | Lhaux | Lwz | Lwzu | Lwzx
            | Lwzux | Lwa | Lwax | Lwaux | Ld | Ldu | Ldx | Ldux => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && (ra == 0 || ra == rt) {
                    return false;
                }
                let ea = self.ea(op, i, update);
                let size = info.size as u32;
                let v = self.load(ea, size, self.le);
                let v = if info.flags.contains(InsnFlags::ALGEBRAIC) && size < 8 {
                    let x = self.b.ins().ireduce(int_ty(size), v);
                    self.b.ins().sextend(I64, x)
                } else {
                    v
                };
                self.set(rt as usize, v);
                if update {
                    self.set(ra as usize, ea);
                }
            }
            Stb | Stbu | Stbx | Stbux | Sth | Sthu | Sthx | Sthux | Stw | Stwu | Stwx | Stwux | Std | Stdu | Stdx
            | Stdux => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                let ea = self.ea(op, i, update);
                let v = self.gpr(rt);
                let stop = self.store(ea, v, info.size as u32, self.le);
                if update {
                    self.set(ra as usize, ea);
                }
                if !last {
                    self.stop_after_if(stop);
                }
            }
            Divw | Divwu | Divd | Divdu => self.divide(op, i),
            Mulhw | Mulhwu => self.mul_high_word(op, i),
            Mfocrf | Mtocrf => self.move_cr_field(op, i),
            Mfspr | Mtspr => {
                let Some((off, mem, mask)) = self.plain_spr(i.spr(), op == Mtspr) else { return false };
                self.move_plain_spr(op, rt, off, mem, mask);
            }
            Dcbz => self.dcbz(i),
            // Cache hints have no architectural effect (and never fault).
            Dcbt | Dcbtst => {}
            Lhbrx | Lwbrx | Ldbrx => {
                let ea = self.ea(op, i, false);
                let v = self.load(ea, info.size as u32, !self.le);
                self.set(rt as usize, v);
            }
            Sthbrx | Stwbrx | Stdbrx => {
                let ea = self.ea(op, i, false);
                let v = self.gpr(rt);
                let stop = self.store(ea, v, info.size as u32, !self.le);
                if !last {
                    self.stop_after_if(stop);
                }
            }
            Popcntb | Popcntw | Popcntd | Prtyw | Prtyd | Cmpb => self.bit_lanes(op, i),
            _ => return self.vector(op, i, last),
        }
        true
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

/// Natively translated instructions beyond the core families: divides, high word multiplies,
/// single CR field moves, plain SPRs, `dcbz`, popcount/parity/`cmpb`. Each computes exactly
/// what its interpreter function (the reference) leaves in the architectural state.
impl Tx<'_> {
    /// The block runs in problem state: `mmu_idx` puts MSR[PR] in bit 0 of the index, and
    /// MSR[PR] is part of the block key (checked by a test below).
    fn problem_state(&self) -> bool {
        self.tlb_idx_read & 1 != 0
    }

    /// `divw[u]`, `divd[u]` without OE. A zero divisor or INT_MIN / -1 leaves the dividend
    /// in RT (interp `div_result`): dividing by one instead gives exactly that, without a
    /// host trap.
    fn divide(&mut self, op: Op, i: Insn) {
        let (a, b) = (self.gpr(i.ra()), self.gpr(i.rb()));
        let word = matches!(op, Op::Divw | Op::Divwu);
        let signed = matches!(op, Op::Divw | Op::Divd);
        let (a, b) = if word { (self.b.ins().ireduce(I32, a), self.b.ins().ireduce(I32, b)) } else { (a, b) };
        let ty = if word { I32 } else { I64 };
        let mut undefined = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
        if signed {
            let min = if word { i32::MIN as i64 } else { i64::MIN };
            let a_min = self.b.ins().icmp_imm_s(IntCC::Equal, a, min);
            let b_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
            let ovf = self.b.ins().band(a_min, b_m1);
            undefined = self.b.ins().bor(undefined, ovf);
        }
        let one = self.b.ins().iconst(ty, 1);
        let d = self.b.ins().select(undefined, one, b);
        let q = if signed { self.b.ins().sdiv(a, d) } else { self.b.ins().udiv(a, d) };
        // Word quotients are zero-extended (interp: `q as u32 as u64`).
        let v = if word { self.b.ins().uextend(I64, q) } else { q };
        self.set_rc(i, i.rt(), v);
    }

    /// `mulhw`, `mulhwu`: the high word of the 64-bit product, zero-extended.
    fn mul_high_word(&mut self, op: Op, i: Insn) {
        let (a, b) = (self.gpr(i.ra()), self.gpr(i.rb()));
        let ext = |t: &mut Self, x: Value| {
            let x = t.b.ins().ireduce(I32, x);
            if op == Op::Mulhw { t.b.ins().sextend(I64, x) } else { t.b.ins().uextend(I64, x) }
        };
        let (a, b) = (ext(self, a), ext(self, b));
        let p = self.b.ins().imul(a, b);
        let v = self.b.ins().ushr_imm_s(p, 32);
        self.set_rc(i, i.rt(), v);
    }

    /// `mfocrf`/`mtocrf`: one field selected moves it (`mfocrf` zeroes the rest of RT);
    /// any other FXM leaves everything as it was, as the interpreter does.
    fn move_cr_field(&mut self, op: Op, i: Insn) {
        let fxm = i.fxm();
        if fxm.count_ones() != 1 {
            return;
        }
        let m = 0xf000_0000_u32 >> (4 * fxm.leading_zeros().saturating_sub(24));
        if op == Op::Mfocrf {
            let cr = self.get(CR);
            let f = self.b.ins().band_imm_s(cr, m as i64);
            let v = self.b.ins().uextend(I64, f);
            self.set(i.rt() as usize, v);
        } else {
            let s = self.gpr(i.rs());
            let s = self.b.ins().ireduce(I32, s);
            let s = self.b.ins().band_imm_s(s, m as i64);
            let cr = self.get(CR);
            let cr = self.b.ins().band_imm_s(cr, (!m) as i64);
            let cr = self.b.ins().bor(cr, s);
            self.set(CR, cr);
        }
    }

    /// SPRs that are one plain `CpuState` field for `mfspr` (`write` false) or `mtspr` in
    /// this privilege state: (offset from `cpu`, memory type, mask applied on write). `None`
    /// leaves the instruction to the interpreter (privileged in problem state, composed
    /// registers such as XER, side effects such as DEC, and everything else).
    fn plain_spr(&self, n: u32, write: bool) -> Option<(i32, Type, u64)> {
        use crate::cpu::spr;
        // Book III-S: numbers with 0x10 set are privileged (interp `spr_privileged`).
        if n & 0x10 != 0 && self.problem_state() {
            return None;
        }
        let f = |o: usize| ST + o as i32;
        let sprg = |k: u32| f(offset_of!(CpuState, sprg) + 8 * k as usize);
        Some(match n {
            spr::SRR0 => (f(offset_of!(CpuState, srr0)), I64, u64::MAX),
            spr::SRR1 => (f(offset_of!(CpuState, srr1)), I64, u64::MAX),
            spr::DAR => (f(offset_of!(CpuState, dar)), I64, u64::MAX),
            spr::DSISR => (f(offset_of!(CpuState, dsisr)), I64, 0xffff_ffff),
            spr::SPRG0..=spr::SPRG3 => (sprg(n - spr::SPRG0), I64, u64::MAX),
            // The problem-state alias of SPRG3 reads only.
            spr::SPRG3_USER if !write => (sprg(3), I64, u64::MAX),
            spr::TAR => (f(offset_of!(CpuState, tar)), I64, u64::MAX),
            _ => return None,
        })
    }

    fn move_plain_spr(&mut self, op: Op, r: u32, off: i32, mem: Type, mask: u64) {
        debug_assert_eq!(mem, I64);
        if op == Op::Mfspr {
            let v = self.b.ins().load(mem, flags(), self.cpu, off);
            self.set(r as usize, v);
        } else {
            let v = self.gpr(r);
            let v = if mask != u64::MAX { self.b.ins().band_imm_s(v, mask as i64) } else { v };
            self.b.ins().store(flags(), v, self.cpu, off);
        }
    }

    /// `dcbz`: zeroes the aligned cache block through the TLB's fast write entry (RAM, not
    /// watched for translated code, so the block goes on); anything else runs the
    /// interpreter's `dcbz` at run time (faults, MMIO, TLB misses, watched pages).
    fn dcbz(&mut self, i: Insn) {
        use crate::interp::CACHE_BLOCK;
        let base = self.gpr0(i.ra());
        let b = self.gpr(i.rb());
        let ea = self.b.ins().iadd(base, b);
        let ea = self.b.ins().band_imm_s(ea, !(CACHE_BLOCK as i64 - 1));
        let ent = self.tlb_entry(ea);
        let tbase = TLB_TABLE + self.tlb_idx_write * TLB_IDX_BYTES;
        let tag = self.b.ins().load(I64, flags(), ent, tbase + offset_of!(TlbEntry, write) as i32);
        // The block is aligned and smaller than a page: it lies in the page of its first byte.
        let hit = self.tag_hit(ea, tag, 1);
        let (hb, mb, merge) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().brif(hit, hb, &[], mb, &[]);

        self.b.switch_to_block(hb);
        let add = self.b.ins().load(I64, flags(), ent, tbase + offset_of!(TlbEntry, addend) as i32);
        let host = self.b.ins().iadd(ea, add);
        let zero = self.iconst(0);
        // Doublewords, as the interpreter stores them (each one atomic for other vCPUs).
        for k in 0..(CACHE_BLOCK / 8) as i32 {
            self.b.ins().store(flags(), zero, host, 8 * k);
        }
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(mb);
        // dcbz changes no register: the cached ones stay valid.
        self.call_interp(Op::Dcbz, i.0);
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(merge);
    }

    /// `popcntb/w/d`, `prtyw/d`, `cmpb` (no Rc: the bit is reserved).
    fn bit_lanes(&mut self, op: Op, i: Insn) {
        const B01: i64 = 0x0101_0101_0101_0101;
        let s = self.gpr(i.rs());
        let v = match op {
            Op::Popcntd => self.b.ins().popcnt(s),
            Op::Popcntw => {
                let lo = self.b.ins().band_imm_s(s, 0xffff_ffff);
                let lo = self.b.ins().popcnt(lo);
                let hi = self.b.ins().ushr_imm_s(s, 32);
                let hi = self.b.ins().popcnt(hi);
                let hi = self.b.ins().ishl_imm_s(hi, 32);
                self.b.ins().bor(lo, hi)
            }
            Op::Popcntb => {
                // Bit counts per byte (no carry ever crosses a byte).
                let x = self.b.ins().ushr_imm_s(s, 1);
                let x = self.b.ins().band_imm_s(x, 0x5555_5555_5555_5555);
                let x = self.b.ins().isub(s, x);
                let lo = self.b.ins().band_imm_s(x, 0x3333_3333_3333_3333);
                let hi = self.b.ins().ushr_imm_s(x, 2);
                let hi = self.b.ins().band_imm_s(hi, 0x3333_3333_3333_3333);
                let x = self.b.ins().iadd(lo, hi);
                let y = self.b.ins().ushr_imm_s(x, 4);
                let x = self.b.ins().iadd(x, y);
                self.b.ins().band_imm_s(x, 0x0f0f_0f0f_0f0f_0f0f)
            }
            Op::Prtyd => {
                let x = self.b.ins().band_imm_s(s, B01);
                let x = self.b.ins().popcnt(x);
                self.b.ins().band_imm_s(x, 1)
            }
            Op::Prtyw => {
                let lo = self.b.ins().band_imm_s(s, 0x0101_0101);
                let lo = self.b.ins().popcnt(lo);
                let lo = self.b.ins().band_imm_s(lo, 1);
                let hi = self.b.ins().band_imm_s(s, 0x0101_0101 << 32);
                let hi = self.b.ins().popcnt(hi);
                let hi = self.b.ins().band_imm_s(hi, 1);
                let hi = self.b.ins().ishl_imm_s(hi, 32);
                self.b.ins().bor(lo, hi)
            }
            _ => {
                // cmpb: 0xff in each byte where RS and RB agree. Bit 7 of t is set in each
                // byte of x that is not zero (the low 7 bits cannot carry out of the byte).
                let b = self.gpr(i.rb());
                let x = self.b.ins().bxor(s, b);
                let t = self.b.ins().band_imm_s(x, 0x7f7f_7f7f_7f7f_7f7f);
                let t = self.b.ins().iadd_imm_s(t, 0x7f7f_7f7f_7f7f_7f7f);
                let t = self.b.ins().bor(t, x);
                let t = self.b.ins().ushr_imm_s(t, 7);
                let nz = self.b.ins().band_imm_s(t, B01);
                let ones = self.b.ins().imul_imm_s(nz, 0xff);
                self.b.ins().bnot(ones)
            }
        };
        self.set(i.ra() as usize, v);
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
