//! Fixed-point instructions: add/subtract (with carry), multiply, divide, logical, extend,
//! count, shift, rotate, compare, `isel`, popcount/parity/`cmpb`. Each computes exactly what
//! its interpreter function (the reference) leaves in the architectural state.

use super::{CA, Tx};
use crate::isa::{Insn, Op};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I16, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Value};

impl Tx<'_> {
    /// The fixed-point family; false leaves the instruction to the interpreter.
    pub(super) fn fixed(&mut self, op: Op, i: Insn, _last: bool) -> bool {
        use Op::*;
        let (rt, ra, rb) = (i.rt(), i.ra(), i.rb());
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
            Addic | AddicDot | Subfic | Addc | Adde | Addze | Addme | Subfc | Subfe | Subfze
            | Subfme => {
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
                let s = if word {
                    self.b.ins().band_imm_s(s, 0xffff_ffff)
                } else {
                    s
                };
                let v = if matches!(op, Slw | Sld) {
                    self.b.ins().ishl(s, n)
                } else {
                    self.b.ins().ushr(s, n)
                };
                let v = if word {
                    self.b.ins().band_imm_s(v, 0xffff_ffff)
                } else {
                    v
                };
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
                        if signed {
                            t.b.ins().sextend(I64, x)
                        } else {
                            t.b.ins().uextend(I64, x)
                        }
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
            Divw | Divwu | Divd | Divdu => self.divide(op, i),
            Mulhw | Mulhwu => self.mul_high_word(op, i),
            Popcntb | Popcntw | Popcntd | Prtyw | Prtyd | Cmpb => self.bit_lanes(op, i),
            _ => return false,
        }
        true
    }

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
        let big = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, n, bits);
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

    /// `divw[u]`, `divd[u]` without OE. A zero divisor or INT_MIN / -1 leaves the dividend
    /// in RT (interp `div_result`): dividing by one instead gives exactly that, without a
    /// host trap.
    fn divide(&mut self, op: Op, i: Insn) {
        let (a, b) = (self.gpr(i.ra()), self.gpr(i.rb()));
        let word = matches!(op, Op::Divw | Op::Divwu);
        let signed = matches!(op, Op::Divw | Op::Divd);
        let (a, b) = if word {
            (self.b.ins().ireduce(I32, a), self.b.ins().ireduce(I32, b))
        } else {
            (a, b)
        };
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
        let q = if signed {
            self.b.ins().sdiv(a, d)
        } else {
            self.b.ins().udiv(a, d)
        };
        // Word quotients are zero-extended (interp: `q as u32 as u64`).
        let v = if word {
            self.b.ins().uextend(I64, q)
        } else {
            q
        };
        self.set_rc(i, i.rt(), v);
    }

    /// `mulhw`, `mulhwu`: the high word of the 64-bit product, zero-extended.
    fn mul_high_word(&mut self, op: Op, i: Insn) {
        let (a, b) = (self.gpr(i.ra()), self.gpr(i.rb()));
        let ext = |t: &mut Self, x: Value| {
            let x = t.b.ins().ireduce(I32, x);
            if op == Op::Mulhw {
                t.b.ins().sextend(I64, x)
            } else {
                t.b.ins().uextend(I64, x)
            }
        };
        let (a, b) = (ext(self, a), ext(self, b));
        let p = self.b.ins().imul(a, b);
        let v = self.b.ins().ushr_imm_s(p, 32);
        self.set_rc(i, i.rt(), v);
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
