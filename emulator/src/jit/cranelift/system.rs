//! Special-purpose registers and the other system instructions that real software runs
//! often. Only moves without side effects are native; everything else (privileged in problem
//! state, composed registers, registers with side effects) stays with the interpreter.

use super::{CTR, LR, ST, Tx, flags};
use crate::cpu::CpuState;
use crate::isa::{Insn, Op};
use core::mem::offset_of;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Type};

impl Tx<'_> {
    /// SPR moves and system instructions; false leaves the instruction to the interpreter.
    pub(super) fn system(&mut self, op: Op, i: Insn, _last: bool) -> bool {
        use Op::*;
        let rt = i.rt();
        match op {
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
            Mfspr | Mtspr => {
                let Some((off, mem, mask)) = self.plain_spr(i.spr(), op == Mtspr) else {
                    return false;
                };
                self.move_plain_spr(op, rt, off, mem, mask);
            }
            _ => return false,
        }
        true
    }

    /// The block runs in problem state: `mmu_idx` puts MSR[PR] in bit 0 of the index, and
    /// MSR[PR] is part of the block key (checked by a test below).
    fn problem_state(&self) -> bool {
        self.tlb_idx_read & 1 != 0
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
            let v = if mask != u64::MAX {
                self.b.ins().band_imm_s(v, mask as i64)
            } else {
                v
            };
            self.b.ins().store(flags(), v, self.cpu, off);
        }
    }
}
