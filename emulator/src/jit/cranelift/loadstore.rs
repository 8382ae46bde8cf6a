//! Fixed-point loads and stores (with update, indexed, byte-reversed), `dcbz` and the cache
//! hints. The TLB hit path is inline ([`super::memory`]); misses, devices, unaligned and
//! watched accesses take the slow path.

use super::Tx;
use super::memory::TlbHit;
use super::{flags, int_ty};
use crate::isa::{Insn, InsnFlags, Op};
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::types::I64;

impl Tx<'_> {
    /// Loads, stores and cache block operations; false leaves the instruction to the interpreter.
    pub(super) fn load_store(&mut self, op: Op, i: Insn, last: bool) -> bool {
        use Op::*;
        let info = op.info();
        let (rt, ra) = (i.rt(), i.ra());
        match op {
            Lbz | Lbzu | Lbzx | Lbzux | Lhz | Lhzu | Lhzx | Lhzux | Lha | Lhau | Lhax | Lhaux
            | Lwz | Lwzu | Lwzx | Lwzux | Lwa | Lwax | Lwaux | Ld | Ldu | Ldx | Ldux => {
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
            Stb | Stbu | Stbx | Stbux | Sth | Sthu | Sthx | Sthux | Stw | Stwu | Stwx | Stwux
            | Std | Stdu | Stdx | Stdux => {
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
            _ => return false,
        }
        true
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
        // The block is aligned and smaller than a page: it lies in the page of its first byte.
        let TlbHit {
            host,
            miss: mb,
            merge,
        } = self.tlb_probe(ea, true, |t, tag| t.tag_hit(ea, tag, 1));
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
}
