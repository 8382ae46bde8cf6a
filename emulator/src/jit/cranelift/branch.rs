//! Branches and the condition register: `b`, `bc`, `bclr`, `bcctr` (block exits that chain
//! to the next block), CR logical operations and field moves, and the CR helpers the other
//! families use (recording forms, compares).

use super::{CR, CRF, CTR, LR, SO, Tx, flags};
use crate::isa::{Insn, Op};
use crate::vcpu::side_exit;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Value};

impl Tx<'_> {
    /// Branches and CR operations; false leaves the instruction to the interpreter.
    pub(super) fn branch(&mut self, op: Op, i: Insn, _last: bool) -> bool {
        use Op::*;
        let (rt, ra, rb) = (i.rt(), i.ra(), i.rb());
        match op {
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
                let m: u32 = (0..8)
                    .filter(|k| fxm & (0x80 >> k) != 0)
                    .map(|k| 0xf << (28 - 4 * k))
                    .fold(0, |a, b| a | b);
                let s = self.gpr(rt);
                let s = self.b.ins().ireduce(I32, s);
                let s = self.b.ins().band_imm_s(s, m as i64);
                let cr = self.get(CR);
                let cr = self.b.ins().band_imm_s(cr, (!m) as i64);
                let cr = self.b.ins().bor(cr, s);
                self.set(CR, cr);
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
                if side_exit(op, i) {
                    // The block goes on past it (`vcpu::side_exit`).
                    let r = self.iconst(self.n as i64 + 1);
                    self.exit_if(taken, |tx| tx.chain_exit(r, t));
                } else {
                    self.branch_exit(i, Some(taken), t);
                }
            }
            Bclr | Bcctr if op == Bclr || i.rt() & 4 != 0 => {
                // The target is read before LK updates LR.
                let src = if op == Bclr { LR } else { CTR };
                let t = self.get(src);
                let t = self.b.ins().band_imm_s(t, !3);
                let taken = self.condition(i, op == Bclr);
                self.branch_exit(i, Some(taken), t);
            }
            Mfocrf | Mtocrf => self.move_cr_field(op, i),
            _ => return false,
        }
        true
    }

    /// CR field `bf` = `field` (I32, 4 bits): one byte store; the packed copy is made again
    /// when next read.
    pub(super) fn set_crf(&mut self, bf: u32, field: Value) {
        let f = self.b.ins().ireduce(I8, field);
        self.b.ins().store(flags(), f, self.cpu, CRF + bf as i32);
        self.regs[CR].loaded = false;
    }

    /// CR field value LT|GT|EQ|SO from two comparisons (I8 booleans).
    pub(super) fn compare_field(&mut self, lt: Value, gt: Value) -> Value {
        let c8 = self.b.ins().iconst(I32, 8);
        let c4 = self.b.ins().iconst(I32, 4);
        let c2 = self.b.ins().iconst(I32, 2);
        let g = self.b.ins().select(gt, c4, c2);
        let v = self.b.ins().select(lt, c8, g);
        let so = self.get(SO);
        let so = self.b.ins().ireduce(I32, so);
        self.b.ins().bor(v, so)
    }

    pub(super) fn record(&mut self, v: Value) {
        let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
        let gt = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, v, 0);
        let f = self.compare_field(lt, gt);
        self.set_crf(0, f);
    }

    pub(super) fn set_rc(&mut self, i: Insn, r: u32, v: Value) {
        self.set(r as usize, v);
        if i.rc() {
            self.record(v);
        }
    }

    /// CR bit `n` as an I8 boolean.
    pub(super) fn cr_bit(&mut self, n: u32) -> Value {
        let cr = self.get(CR);
        let v = self.b.ins().ushr_imm_s(cr, 31 - n as i64);
        let v = self.b.ins().band_imm_s(v, 1);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
    }

    fn set_cr_bit(&mut self, n: u32, bit: Value) {
        let sh = 3 - (n % 4) as i64;
        let cr = self.get(CR);
        let f = self.b.ins().ushr_imm_s(cr, 28 - 4 * (n / 4) as i64);
        let f = self.b.ins().band_imm_s(f, 0xf & !(1_i64 << sh));
        let bit = self.b.ins().uextend(I32, bit);
        let bit = self.b.ins().ishl_imm_s(bit, sh);
        let f = self.b.ins().bor(f, bit);
        self.set_crf(n / 4, f);
    }

    /// Branch condition of BO/BI (decrementing CTR when BO says so), as an I8 boolean.
    fn condition(&mut self, i: Insn, use_ctr: bool) -> Value {
        let bo = i.rt();
        let mut ok = self.b.ins().iconst(I8, 1);
        if use_ctr && bo & 4 == 0 {
            let ctr = self.get(CTR);
            let ctr = self.b.ins().iadd_imm_s(ctr, -1);
            self.set(CTR, ctr);
            let cc = if bo & 2 != 0 {
                IntCC::Equal
            } else {
                IntCC::NotEqual
            };
            ok = self.b.ins().icmp_imm_s(cc, ctr, 0);
        }
        if bo & 0x10 == 0 {
            let bit = self.cr_bit(i.ra());
            let want = if bo & 8 != 0 {
                bit
            } else {
                self.b.ins().bxor_imm_s(bit, 1)
            };
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
}
