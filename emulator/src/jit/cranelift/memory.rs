//! Guest memory access from translated code: the TLB hit path inline, the slow path through
//! the helpers, and effective addresses.

use super::{FAULT, TLB_IDX_BYTES, TLB_TABLE_PTR, Tx, flags, helpers, int_ty};
use crate::isa::{Insn, Op, Operand};
use crate::softmmu::{TLB_ENTRIES, TlbEntry, fast_path_mask};
use core::mem::offset_of;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value};

/// An inline access after [`Tx::tlb_probe`]: the builder is in the hit block, where `host` is
/// the host address of the access; `miss` and `merge` are the caller's to fill.
pub(super) struct TlbHit {
    pub(super) host: Value,
    pub(super) miss: Block,
    pub(super) merge: Block,
}

impl Tx<'_> {
    /// The TLB probe of an inline access at `ea`: loads the tag of its read or write entry,
    /// branches on `hit(tx, tag)` (whether the tag admits the whole access), and on a hit
    /// adds the entry's addend to `ea`.
    pub(super) fn tlb_probe(
        &mut self,
        ea: Value,
        write: bool,
        hit: impl FnOnce(&mut Self, Value) -> Value,
    ) -> TlbHit {
        let ent = self.tlb_entry(ea);
        let (idx, tag_at) = if write {
            (self.tlb_idx_write, offset_of!(TlbEntry, write))
        } else {
            (self.tlb_idx_read, offset_of!(TlbEntry, read))
        };
        let base = idx * TLB_IDX_BYTES;
        let tag = self.b.ins().load(I64, flags(), ent, base + tag_at as i32);
        let hit = hit(self, tag);
        let (hb, miss, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(hit, hb, &[], miss, &[]);

        self.b.switch_to_block(hb);
        let add = self.b.ins().load(
            I64,
            flags(),
            ent,
            base + offset_of!(TlbEntry, addend) as i32,
        );
        let host = self.b.ins().iadd(ea, add);
        TlbHit { host, miss, merge }
    }

    pub(super) fn tlb_entry(&mut self, ea: Value) -> Value {
        let s = self.b.ins().ushr_imm_s(ea, 12);
        let s = self.b.ins().band_imm_s(s, (TLB_ENTRIES - 1) as i64);
        let s = self.b.ins().imul_imm_s(s, size_of::<TlbEntry>() as i64);
        let table = self.tlb_table();
        self.b.ins().iadd(table, s)
    }

    /// The TLB entries' address (a load the block's value numbering shares: the pointer
    /// never changes).
    pub(super) fn tlb_table(&mut self) -> Value {
        let ro = super::flags().with_readonly();
        self.b.ins().load(I64, ro, self.cpu, TLB_TABLE_PTR)
    }

    /// Page tag equal and the access aligned (an invalid tag has bit 0 set, so it never
    /// equals a page address; the alignment bits are tested apart so they cannot fake it).
    pub(super) fn tag_hit(&mut self, ea: Value, tag: Value, size: u32) -> Value {
        let compared = self.b.ins().band_imm_s(ea, fast_path_mask(size) as i64);
        self.b.ins().icmp(IntCC::Equal, compared, tag)
    }

    /// Branches to the fault exit (the current instruction did not retire) when `fault` is
    /// non-zero, else to `merge` with `v`.
    pub(super) fn fault_or_merge(&mut self, fault: Value, merge: Block, v: Value) {
        let n = self.iconst(self.n as i64);
        let pc = self.iconst(self.pc as i64);
        let out = [BlockArg::Value(n), BlockArg::Value(pc)];
        self.b
            .ins()
            .brif(fault, self.ret_pc, &out, merge, &[BlockArg::Value(v)]);
    }

    /// Loads `size` bytes at `ea` in guest order; the value is zero-extended to I64.
    pub(super) fn load(&mut self, ea: Value, size: u32, le: bool) -> Value {
        let ty = int_ty(size);
        let TlbHit {
            host,
            miss: mb,
            merge,
        } = self.tlb_probe(ea, false, |t, tag| t.tag_hit(ea, tag, size));
        let out = self.b.append_block_param(merge, I64);
        let raw = self.b.ins().load(ty, flags(), host, 0);
        let v = if size > 1 && !le {
            self.b.ins().bswap(raw)
        } else {
            raw
        };
        let v = if size < 8 {
            self.b.ins().uextend(I64, v)
        } else {
            v
        };
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
    pub(super) fn store(&mut self, ea: Value, val: Value, size: u32, le: bool) -> Value {
        let ty = int_ty(size);
        let TlbHit {
            host,
            miss: mb,
            merge,
        } = self.tlb_probe(ea, true, |t, tag| t.tag_hit(ea, tag, size));
        let out = self.b.append_block_param(merge, I64);
        let v = if size < 8 {
            self.b.ins().ireduce(ty, val)
        } else {
            val
        };
        let v = if size > 1 && !le {
            self.b.ins().bswap(v)
        } else {
            v
        };
        self.b.ins().store(flags(), v, host, 0);
        let zero = self.iconst(0);
        self.b.ins().jump(merge, &[BlockArg::Value(zero)]);

        self.b.switch_to_block(mb);
        self.b.set_cold_block(mb);
        let size_le = self.iconst((size | (le as u32) << 8) as i64);
        let r = self.slow_call(helpers::store as *const () as usize, [ea, val, size_le]);
        let is_fault = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, r, helpers::STOP_FAULT as i64);
        self.fault_or_merge(is_fault, merge, r);

        self.b.switch_to_block(merge);
        out
    }

    /// After an instruction that stored: stop when the store wrote translated code.
    pub(super) fn stop_after_if(&mut self, stop: Value) {
        let n = self.n as i64 + 1;
        let next = self.pc.wrapping_add(4) as i64;
        self.exit_if(stop, |t| {
            let r = t.iconst(n);
            let pc = t.iconst(next);
            t.exit(r, Some(pc));
        });
    }

    /// Effective address of a load/store: `D(RA|0)`, `DS(RA|0)`, `(RA|0)+RB`, or with RA
    /// for the update forms.
    pub(super) fn ea(&mut self, op: Op, i: Insn, update: bool) -> Value {
        let ops = op.info().operands;
        let base = if update {
            self.gpr(i.ra())
        } else {
            self.gpr0(i.ra())
        };
        if ops.contains(&Operand::DRa) {
            self.b.ins().iadd_imm_s(base, i.si())
        } else if ops.contains(&Operand::DsRa) {
            self.b.ins().iadd_imm_s(base, i.ds())
        } else {
            let rb = self.gpr(i.rb());
            self.b.ins().iadd(base, rb)
        }
    }
}
