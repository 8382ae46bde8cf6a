//! Block exits: returning to the run loop, chaining to the next block through the jump
//! cache, and the interpreter fallback (through the slow-path adapter).

use super::{PC, TLB_IDX_BYTES, Tx, flags, helpers};
use crate::isa::Op;
use crate::jit::ctx::{STOP_BUDGET, STOP_EVENTS, STOP_KICK};
use crate::jit::jump_cache::jc_flags;
use crate::jit::tier::TierId;
use crate::jit::{JC_SETS, JcEntry, JcSet, JitCtx};
use crate::softmmu::{Access, PAGE_MASK, TLB_ENTRIES, TlbEntry, mmu_idx};
use core::mem::offset_of;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I32, I64};
use cranelift_codegen::ir::{BlockArg, InstBuilder, SigRef, Type, Value};
use cranelift_frontend::FunctionBuilder;

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
fn emit_chain(
    b: &mut FunctionBuilder,
    cpu: Value,
    jctx: Value,
    n: Value,
    pc: Value,
    key_flags: u64,
    sig_block: SigRef,
) {
    let ld = |b: &mut FunctionBuilder, ty: Type, base: Value, off: usize| {
        b.ins().load(ty, flags(), base, off as i32)
    };
    b.ins().store(flags(), pc, cpu, PC);
    // The stop condition (`vcpu::exit::keeps_running`): budget spent, events, kick.
    let budget_off = STOP_BUDGET;
    let left = ld(b, I64, jctx, budget_off);
    let left = b.ins().isub(left, n);
    b.ins().store(flags(), left, jctx, budget_off as i32);
    let spent = b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, left, 0);
    let events = ld(b, I32, cpu, STOP_EVENTS);
    let kick_ptr = ld(b, I64, jctx, STOP_KICK);
    let kick = ld(b, I8, kick_ptr, 0);
    let kick = b.ins().uextend(I32, kick);
    let any = b.ins().bor(events, kick);
    let any = b.ins().icmp_imm_s(IntCC::NotEqual, any, 0);
    let stop = b.ins().bor(spent, any);
    let (probe, call, out) = (b.create_block(), b.create_block(), b.create_block());
    b.ins().brif(stop, out, &[], probe, &[]);

    b.switch_to_block(probe);
    let set = b.ins().ushr_imm_s(pc, 2);
    let set = b.ins().band_imm_s(set, (JC_SETS - 1) as i64);
    let set = b.ins().imul_imm_s(set, size_of::<JcSet>() as i64);
    let jc = ld(b, I64, jctx, offset_of!(JitCtx, jc));
    // The set's first way if it holds the PC, else its second (`JcSet::probe`).
    let e0 = b.ins().iadd(jc, set);
    let pc0 = ld(b, I64, e0, offset_of!(JcEntry, pc));
    let e1 = b.ins().iadd_imm_s(e0, size_of::<JcEntry>() as i64);
    let first = b.ins().icmp(IntCC::Equal, pc0, pc);
    let e = b.ins().select(first, e0, e1);
    let epc = ld(b, I64, e, offset_of!(JcEntry, pc));
    let eflags = ld(b, I64, e, offset_of!(JcEntry, flags));
    let f = ld(b, I64, e, offset_of!(JcEntry, f));
    let d = b.ins().bxor(epc, pc);
    // Only a Cranelift block of the same MSR state (`jump_cache::jc_flags`).
    let want = jc_flags(key_flags, TierId::Cranelift);
    let fd = b.ins().bxor_imm_s(eflags, want as i64);
    let d = b.ins().bor(d, fd);
    // The PC must still map to the entry's host page: the exec TLB entry of its page has the
    // entry's addend (jump cache entries survive TLB flushes).
    let tslot = b.ins().ushr_imm_s(pc, 12);
    let tslot = b.ins().band_imm_s(tslot, (TLB_ENTRIES - 1) as i64);
    let tslot = b.ins().imul_imm_s(tslot, size_of::<TlbEntry>() as i64);
    let ro = super::flags().with_readonly();
    let table = b.ins().load(I64, ro, cpu, super::TLB_TABLE_PTR);
    let t = b.ins().iadd(table, tslot);
    let tbase = mmu_idx(key_flags, Access::Exec) * TLB_IDX_BYTES as usize;
    let tag = ld(b, I64, t, tbase + offset_of!(TlbEntry, exec));
    let page = b.ins().band_imm_s(pc, PAGE_MASK as i64);
    let td = b.ins().bxor(tag, page);
    let tadd = ld(b, I64, t, tbase + offset_of!(TlbEntry, addend));
    let eadd = ld(b, I64, e, offset_of!(JcEntry, addend));
    let ad = b.ins().bxor(tadd, eadd);
    let d = b.ins().bor(d, td);
    let d = b.ins().bor(d, ad);
    let hit = b.ins().icmp_imm_s(IntCC::Equal, d, 0);
    b.ins().brif(hit, call, &[], out, &[]);

    b.switch_to_block(call);
    b.ins().return_call_indirect(sig_block, f, &[cpu, jctx]);

    b.switch_to_block(out);
    b.ins().return_(&[]);
}

impl Tx<'_> {
    /// Returns to the run loop with `retired` instructions done, storing `pc` when given.
    pub(super) fn exit(&mut self, retired: Value, pc: Option<Value>) {
        match pc {
            Some(pc) => self.b.ins().jump(
                self.ret_pc,
                &[BlockArg::Value(retired), BlockArg::Value(pc)],
            ),
            None => self.b.ins().jump(self.ret, &[BlockArg::Value(retired)]),
        };
    }

    /// Leaves the block for `pc` with `retired` instructions done, chaining when it can.
    pub(super) fn chain_exit(&mut self, retired: Value, pc: Value) {
        self.b
            .ins()
            .jump(self.chain, &[BlockArg::Value(retired), BlockArg::Value(pc)]);
    }

    pub(super) fn ctx_load(&mut self, ty: Type, off: usize) -> Value {
        self.b.ins().load(ty, flags(), self.ctx, off as i32)
    }

    /// The shared exit blocks (see the module doc).
    pub(super) fn emit_exits(&mut self, key_flags: u64, sig_block: SigRef) {
        let (ret, ret_pc, chain) = (self.ret, self.ret_pc, self.chain);
        let budget_off = STOP_BUDGET;

        self.b.switch_to_block(ret_pc);
        let (n, pc) = (
            self.b.block_params(ret_pc)[0],
            self.b.block_params(ret_pc)[1],
        );
        self.b.ins().store(flags(), pc, self.cpu, PC);
        self.b.ins().jump(ret, &[BlockArg::Value(n)]);

        self.b.switch_to_block(ret);
        let n = self.b.block_params(ret)[0];
        let left = self.ctx_load(I64, budget_off);
        let left = self.b.ins().isub(left, n);
        self.b
            .ins()
            .store(flags(), left, self.ctx, budget_off as i32);
        self.b.ins().return_(&[]);

        self.b.switch_to_block(chain);
        let (n, pc) = (self.b.block_params(chain)[0], self.b.block_params(chain)[1]);
        emit_chain(&mut self.b, self.cpu, self.ctx, n, pc, key_flags, sig_block);
    }

    /// Branches to an exit when `cond` holds, then goes on in a new block.
    pub(super) fn exit_if(&mut self, cond: Value, f: impl FnOnce(&mut Self)) {
        let (out, cont) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(cond, out, &[], cont, &[]);
        self.b.switch_to_block(out);
        f(self);
        self.b.switch_to_block(cont);
    }

    /// Runs the instruction in the interpreter; the registers it may change are read again
    /// from `CpuState` afterwards.
    pub(super) fn fallback(&mut self, op: Op, word: u32) {
        self.call_interp(op, word);
        for g in &mut self.regs {
            g.loaded = false;
        }
        self.vsrs.invalidate();
    }

    /// Calls the interpreter for one instruction (registers are in `CpuState` already: they
    /// are stored through); the block returns to the run loop when the helper says so.
    pub(super) fn call_interp(&mut self, op: Op, word: u32) {
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
    pub(super) fn slow_call(&mut self, helper: usize, args: [Value; 3]) -> Value {
        let adapter = self.iconst(self.adapter as i64);
        let h = self.iconst(helper as i64);
        let [a, b, c] = args;
        self.b
            .ins()
            .call_indirect(self.sig_slow, adapter, &[self.cpu, self.ctx, a, b, c, h]);
        self.b
            .ins()
            .load(I64, flags(), self.ctx, offset_of!(JitCtx, ret) as i32)
    }
}
