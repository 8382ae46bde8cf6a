//! Native translations over the vector-scalar register file: VMX integer arithmetic,
//! compares, logical operations, per-element shifts and permutes; VSX logical operations,
//! permutes and GPR moves; VMX/VSX loads and stores; floating-point loads, stores and sign
//! moves. Each computes what its interpreter function (the reference) leaves in the
//! architectural state, and is translated only when the block key says the facility it needs
//! is enabled (MSR[FP], [VEC], [VSX] are key bits), so the unavailable interrupts stay with the
//! interpreter.
//!
//! VSRs are cached in `I64X2` variables within a block, loaded on first use and stored
//! through on every write, as the GPRs are. `CpuState::vsr` holds `u128` values with the
//! ISA's big-endian element numbering; on the (little-endian) host the low host lane is the
//! guest's last element, so element-wise operations need no reordering and permutes reverse
//! byte indexes (see [`Tx::permute`]). Guest byte order matters only for memory accesses.

use super::memory::TlbHit;
use super::{ST, Tx, flags};
use crate::cpu::{CpuState, msr};
use crate::isa::{Insn, InsnFlags, Op};
use crate::softmmu::PAGE_MASK;
use core::mem::offset_of;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I8X16, I16X8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::Variable;

const VSR: i32 = ST + offset_of!(CpuState, vsr) as i32;
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the VSR lane mapping assumes a little-endian host"
);
const _: () = assert!(offset_of!(CpuState, vsr) % 16 == 0 && align_of::<CpuState>() >= 16);

/// The block's VSR variables (declared on first use) and which of them hold the register.
#[derive(Clone, Copy)]
pub(super) struct VsrCache {
    vars: [Option<Variable>; 64],
    loaded: u64,
}

impl VsrCache {
    pub(super) fn new() -> Self {
        Self {
            vars: [None; 64],
            loaded: 0,
        }
    }

    /// After an interpreter call: every VSR is read again from `CpuState`.
    pub(super) fn invalidate(&mut self) {
        self.loaded = 0;
    }
}

fn lane_type(bytes: u32) -> Type {
    match bytes {
        1 => I8X16,
        2 => I16X8,
        4 => I32X4,
        _ => I64X2,
    }
}

/// Guest byte selectors (`out[g]` = byte of a:b, 0-15 from a, 16-31 from b, big-endian
/// numbering) of the fixed permutes.
mod sel {
    /// Modulo packing of elements of `s` bytes: the low half of every element of a, then b.
    pub fn pack(s: usize) -> [u8; 16] {
        let n = 16 / s;
        let mut out = [0; 16];
        for k in 0..2 * n {
            let src = if k < n { k * s } else { 16 + (k - n) * s };
            for j in 0..s / 2 {
                out[k * s / 2 + j] = (src + s / 2 + j) as u8;
            }
        }
        out
    }

    /// a[f], b[f], a[f+1], b[f+1], … for elements of `s` bytes, from element `f` on, element
    /// `f + step * j` for the j-th pair.
    pub fn merge(s: usize, f: usize, step: usize) -> [u8; 16] {
        let mut out = [0; 16];
        for j in 0..16 / s / 2 {
            let e = f + step * j;
            for x in 0..s {
                out[2 * j * s + x] = (e * s + x) as u8;
                out[(2 * j + 1) * s + x] = (16 + e * s + x) as u8;
            }
        }
        out
    }

    /// Element `u` of `s` bytes of the first operand in every element.
    pub fn splat(s: usize, u: usize) -> [u8; 16] {
        std::array::from_fn(|g| (u * s + g % s) as u8)
    }

    /// Bytes `sh..sh + 16` of a:b.
    pub fn shift(sh: usize) -> [u8; 16] {
        std::array::from_fn(|g| (g + sh) as u8)
    }

    /// `xxpermdi`: doubleword DM[0] of a, then doubleword DM[1] of b.
    pub fn permdi(dm: usize) -> [u8; 16] {
        std::array::from_fn(|g| if g < 8 { (dm >> 1) * 8 + g } else { 16 + (dm & 1) * 8 + g - 8 } as u8)
    }
}

impl Tx<'_> {
    // --- register file ---

    fn vsr_var(&mut self, n: u32) -> Variable {
        if let Some(v) = self.vsrs.vars[n as usize] {
            return v;
        }
        let v = self.b.declare_var(I64X2);
        self.vsrs.vars[n as usize] = Some(v);
        v
    }

    /// VSR `n` as `I64X2`.
    fn vsr(&mut self, n: u32) -> Value {
        let var = self.vsr_var(n);
        if self.vsrs.loaded & (1 << n) == 0 {
            let v = self
                .b
                .ins()
                .load(I64X2, flags(), self.cpu, VSR + 16 * n as i32);
            self.b.def_var(var, v);
            self.vsrs.loaded |= 1 << n;
        }
        self.b.use_var(var)
    }

    /// Writes VSR `n`: the variable, and `CpuState` at once.
    fn set_vsr(&mut self, n: u32, v: Value) {
        let v = self.cast(v, I64X2);
        let var = self.vsr_var(n);
        self.b.def_var(var, v);
        self.vsrs.loaded |= 1 << n;
        self.b
            .ins()
            .store(flags(), v, self.cpu, VSR + 16 * n as i32);
    }

    fn cast(&mut self, v: Value, ty: Type) -> Value {
        if self.b.func.dfg.value_type(v) == ty {
            v
        } else {
            self.b.ins().bitcast(
                ty,
                MemFlagsData::new().with_endianness(Endianness::Little),
                v,
            )
        }
    }

    /// VSR `n` with lanes of `ty`.
    fn vsr_as(&mut self, n: u32, ty: Type) -> Value {
        let v = self.vsr(n);
        self.cast(v, ty)
    }

    /// Doubleword `k` (0 = the high one) of a vector.
    fn dword(&mut self, v: Value, k: u8) -> Value {
        let v = self.cast(v, I64X2);
        self.b.ins().extractlane(v, 1 - k)
    }

    fn join_dwords(&mut self, hi: Value, lo: Value) -> Value {
        let v = self.b.ins().scalar_to_vector(I64X2, lo);
        self.b.ins().insertlane(v, hi, 1)
    }

    /// FPR `n`: doubleword 0 of VSR `n`.
    fn fpr(&mut self, n: u32) -> Value {
        let v = self.vsr(n);
        self.dword(v, 0)
    }

    /// `CpuState::set_fpr`: doubleword 0, and doubleword 1 zeroed.
    fn set_fpr(&mut self, n: u32, d: Value) {
        let zero = self.iconst(0);
        let v = self.join_dwords(d, zero);
        self.set_vsr(n, v);
    }

    /// Doubleword 0 of VSR `n`; doubleword 1 keeps its value.
    fn set_dw0(&mut self, n: u32, d: Value) {
        let v = self.vsr(n);
        let v = self.b.ins().insertlane(v, d, 1);
        self.set_vsr(n, v);
    }

    fn splat_const(&mut self, ty: Type, x: i64) -> Value {
        let lane = ty.lane_type();
        let mask = if lane.bits() == 64 {
            -1
        } else {
            (1i64 << lane.bits()) - 1
        };
        let c = self.b.ins().iconst(lane, x & mask);
        self.b.ins().splat(ty, c)
    }

    /// A constant vector from its 16 guest bytes (big-endian numbering).
    fn vconst(&mut self, guest: [u8; 16]) -> Value {
        let host: Vec<u8> = guest.iter().rev().copied().collect();
        let c = self.b.func.dfg.constants.insert(ConstantData::from(host));
        self.b.ins().vconst(I8X16, c)
    }

    /// The fixed permute `out[g]` = byte `sel[g]` of a:b (guest numbering). On the host, guest
    /// byte g of a register is byte 15 - g.
    fn permute(&mut self, a: Value, b: Value, sel: [u8; 16]) -> Value {
        let (a, b) = (self.cast(a, I8X16), self.cast(b, I8X16));
        let mask: [u8; 16] = std::array::from_fn(|h| {
            let s = sel[15 - h];
            if s < 16 { 15 - s } else { 47 - s }
        });
        let imm = self
            .b
            .func
            .dfg
            .immediates
            .push(ConstantData::from(&mask[..]));
        self.b.ins().shuffle(a, b, imm)
    }

    /// Every element of `a` shifted by the low bits of the same element of `b` (modulo the
    /// element width): one conditional constant shift per bit of the count.
    fn shift_lanes(&mut self, op: Op, ty: Type, a: Value, b: Value) -> Value {
        use Op::*;
        let bits = ty.lane_bits() as i64;
        let zero = self.splat_const(ty, 0);
        let mut r = a;
        let mut s = 1;
        while s < bits {
            let m = self.splat_const(ty, s);
            let t = self.b.ins().band(b, m);
            let on = self.b.ins().icmp(IntCC::NotEqual, t, zero);
            let amt = self.b.ins().iconst(I32, s);
            let shifted = match op {
                Vslb | Vslh | Vslw | Vsld => self.b.ins().ishl(r, amt),
                Vsrb | Vsrh | Vsrw | Vsrd => self.b.ins().ushr(r, amt),
                _ => self.b.ins().sshr(r, amt),
            };
            r = self.b.ins().bitselect(on, shifted, r);
            s *= 2;
        }
        r
    }

    /// CR6 of a recording vector compare: 0b1000 all true, 0b0010 none.
    fn record_cr6(&mut self, r: Value) {
        let (hi, lo) = (self.dword(r, 0), self.dword(r, 1));
        let all = self.b.ins().band(hi, lo);
        let all = self.b.ins().icmp_imm_s(IntCC::Equal, all, -1);
        let any = self.b.ins().bor(hi, lo);
        let none = self.b.ins().icmp_imm_s(IntCC::Equal, any, 0);
        let (c8, c2, c0) = (
            self.b.ins().iconst(I32, 8),
            self.b.ins().iconst(I32, 2),
            self.b.ins().iconst(I32, 0),
        );
        let f = self.b.ins().select(none, c2, c0);
        let f = self.b.ins().select(all, c8, f);
        self.set_crf(6, f);
    }

    // --- memory ---

    /// The two doublewords at `ea` and `ea + 8` in the block's byte order, as the
    /// interpreter's `load_dwords` reads them (a fault in either raises it, nothing written).
    fn load_pair(&mut self, ea: Value) -> (Value, Value) {
        let first = self.load(ea, 8, self.le);
        let ea8 = self.b.ins().iadd_imm_s(ea, 8);
        let second = self.load(ea8, 8, self.le);
        (first, second)
    }

    /// Stores two doublewords at `ea`, `ea + 8` inline when the 16 bytes lie in one page the
    /// TLB maps for fast writes; anything else (a miss, a page crossing, a watched or device
    /// page, a fault) runs the instruction in the interpreter, which stores nothing when
    /// either part faults. All operands are read before the branch.
    fn store_pair(&mut self, op: Op, i: Insn, ea: Value, first: Value, second: Value) {
        // The first and the last byte in the page of the tag.
        let TlbHit {
            host,
            miss: mb,
            merge,
        } = self.tlb_probe(ea, true, |t, tag| {
            let last = t.b.ins().iadd_imm_s(ea, 15);
            let p0 = t.b.ins().band_imm_s(ea, PAGE_MASK as i64);
            let p1 = t.b.ins().band_imm_s(last, PAGE_MASK as i64);
            let d0 = t.b.ins().bxor(p0, tag);
            let d1 = t.b.ins().bxor(p1, tag);
            let d = t.b.ins().bor(d0, d1);
            t.b.ins().icmp_imm_s(IntCC::Equal, d, 0)
        });
        for (k, v) in [first, second].into_iter().enumerate() {
            let v = if self.le { v } else { self.b.ins().bswap(v) };
            self.b.ins().store(flags(), v, host, 8 * k as i32);
        }
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(mb);
        self.b.set_cold_block(mb);
        // A store changes no register: the cached ones stay valid.
        self.call_interp(op, i.0);
        self.b.ins().jump(merge, &[]);

        self.b.switch_to_block(merge);
    }

    /// The ISA's DOUBLE() (interp `single_to_double`) on the low word of `w`.
    fn single_to_double(&mut self, w: Value) -> Value {
        let sign = self.b.ins().ushr_imm_s(w, 31);
        let sign = self.b.ins().band_imm_s(sign, 1);
        let sign = self.b.ins().ishl_imm_s(sign, 63);
        let exp = self.b.ins().ushr_imm_s(w, 23);
        let exp = self.b.ins().band_imm_s(exp, 0xff);
        let frac = self.b.ins().band_imm_s(w, 0x7f_ffff);
        let frac29 = self.b.ins().ishl_imm_s(frac, 29);
        let sf = self.b.ins().bor(sign, frac29);
        // Normal: the exponent rebiased.
        let e = self.b.ins().iadd_imm_s(exp, 896);
        let e = self.b.ins().ishl_imm_s(e, 52);
        let normal = self.b.ins().bor(sf, e);
        // Infinity and NaN (signalling ones stay signalling).
        let special = self.b.ins().bor_imm_s(sf, 0x7ff << 52);
        // Denormal: frac * 2^-149, normalised around its leading one (bit p).
        let lz = self.b.ins().clz(frac);
        let p = self.rsub(lz, 63);
        let de = self.b.ins().iadd_imm_s(p, 874);
        let de = self.b.ins().ishl_imm_s(de, 52);
        let sh = self.rsub(p, 52);
        let m = self.b.ins().ishl(frac, sh);
        let m = self.b.ins().band_imm_s(m, (1 << 52) - 1);
        let den = self.b.ins().bor(de, m);
        let den = self.b.ins().bor(den, sign);
        let frac_zero = self.b.ins().icmp_imm_s(IntCC::Equal, frac, 0);
        let small = self.b.ins().select(frac_zero, sign, den);
        let is_zero_exp = self.b.ins().icmp_imm_s(IntCC::Equal, exp, 0);
        let is_max_exp = self.b.ins().icmp_imm_s(IntCC::Equal, exp, 0xff);
        let r = self.b.ins().select(is_max_exp, special, normal);
        self.b.ins().select(is_zero_exp, small, r)
    }

    /// The ISA's SINGLE() (interp `double_to_single`), zero-extended to I64.
    fn double_to_single(&mut self, d: Value) -> Value {
        let exp = self.b.ins().ushr_imm_s(d, 52);
        let exp = self.b.ins().band_imm_s(exp, 0x7ff);
        let top = self.b.ins().ushr_imm_s(d, 62);
        let top = self.b.ins().ishl_imm_s(top, 30);
        let rest = self.b.ins().ushr_imm_s(d, 29);
        let rest = self.b.ins().band_imm_s(rest, 0x3fff_ffff);
        let big = self.b.ins().bor(top, rest);
        let sign = self.b.ins().ushr_imm_s(d, 63);
        let sign = self.b.ins().ishl_imm_s(sign, 31);
        let m = self.b.ins().band_imm_s(d, (1 << 52) - 1);
        let m = self.b.ins().bor_imm_s(m, 1 << 52);
        let sh = self.rsub(exp, 926);
        let part = self.b.ins().ushr(m, sh);
        let part = self.b.ins().band_imm_s(part, 0xffff_ffff);
        let with = self.b.ins().bor(sign, part);
        let has_part = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, exp, 874);
        let small = self.b.ins().select(has_part, with, sign);
        let is_big = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThan, exp, 896);
        self.b.ins().select(is_big, big, small)
    }

    /// `k - v`.
    fn rsub(&mut self, v: Value, k: i64) -> Value {
        let k = self.iconst(k);
        self.b.ins().isub(k, v)
    }

    fn sext32(&mut self, v: Value) -> Value {
        let x = self.b.ins().ireduce(I32, v);
        self.b.ins().sextend(I64, x)
    }

    /// Doubleword in `lxvw4x`/`stxvw4x` word order (interp `word_order`).
    fn word_order(&mut self, d: Value) -> Value {
        if self.le {
            self.b.ins().rotl_imm_s(d, 32)
        } else {
            d
        }
    }

    // --- instructions ---

    /// Translates a vector, VSX or floating-point register-file instruction natively when its
    /// facility is enabled in the block key; false leaves it to the interpreter.
    pub(super) fn vector(&mut self, op: Op, i: Insn, last: bool) -> bool {
        use Op::*;
        let info = op.info();
        let fl = info.flags;
        let key = self.key;
        let facility = match op {
            // GPR moves need the facility of the register half they touch (interp
            // `vsr_half_ok`).
            Mfvsrd | Mfvsrwz | Mtvsrd | Mtvsrwa | Mtvsrwz => {
                if i.xt() < 32 {
                    msr::FP
                } else {
                    msr::VEC
                }
            }
            _ if fl.contains(InsnFlags::VEC) => msr::VEC,
            _ if fl.contains(InsnFlags::VSX) => msr::VSX,
            _ if fl.contains(InsnFlags::FP) => msr::FP,
            _ => return false,
        };
        if key & facility == 0 {
            return false;
        }
        let (rt, ra, rb) = (i.rt(), i.ra(), i.rb());
        let vr = |r: u32| 32 + r;
        match op {
            Vaddubm | Vadduhm | Vadduwm | Vaddudm | Vsububm | Vsubuhm | Vsubuwm | Vsubudm => {
                let ty = match op {
                    Vaddubm | Vsububm => I8X16,
                    Vadduhm | Vsubuhm => I16X8,
                    Vadduwm | Vsubuwm => I32X4,
                    _ => I64X2,
                };
                let (a, b) = (self.vsr_as(vr(ra), ty), self.vsr_as(vr(rb), ty));
                let r = if matches!(op, Vaddubm | Vadduhm | Vadduwm | Vaddudm) {
                    self.b.ins().iadd(a, b)
                } else {
                    self.b.ins().isub(a, b)
                };
                self.set_vsr(vr(rt), r);
            }
            Vand | Vandc | Vor | Vorc | Vxor | Vnor | Vnand | Veqv | Xxland | Xxlandc | Xxlor
            | Xxlxor | Xxlnor | Xxleqv | Xxlnand | Xxlorc => {
                let (t, a, b) = if op.info().flags.contains(InsnFlags::VSX) {
                    (i.xt(), i.xa(), i.xb())
                } else {
                    (vr(rt), vr(ra), vr(rb))
                };
                let (a, b) = (self.vsr(a), self.vsr(b));
                let r = match op {
                    Vand | Xxland => self.b.ins().band(a, b),
                    Vandc | Xxlandc => self.b.ins().band_not(a, b),
                    Vor | Xxlor => self.b.ins().bor(a, b),
                    Vorc | Xxlorc => {
                        let nb = self.b.ins().bnot(b);
                        self.b.ins().bor(a, nb)
                    }
                    Vxor | Xxlxor => self.b.ins().bxor(a, b),
                    Vnor | Xxlnor => {
                        let x = self.b.ins().bor(a, b);
                        self.b.ins().bnot(x)
                    }
                    Vnand | Xxlnand => {
                        let x = self.b.ins().band(a, b);
                        self.b.ins().bnot(x)
                    }
                    _ => {
                        let x = self.b.ins().bxor(a, b);
                        self.b.ins().bnot(x)
                    }
                };
                self.set_vsr(t, r);
            }
            Vsel | Xxsel => {
                let (t, a, b, c) = if op == Xxsel {
                    (i.xt(), i.xa(), i.xb(), i.xc())
                } else {
                    (vr(rt), vr(ra), vr(rb), vr(i.frc()))
                };
                let (a, b, c) = (self.vsr(a), self.vsr(b), self.vsr(c));
                let r = self.b.ins().bitselect(c, b, a);
                self.set_vsr(t, r);
            }
            Vcmpequb | Vcmpequh | Vcmpequw | Vcmpequd | Vcmpgtub | Vcmpgtuh | Vcmpgtuw
            | Vcmpgtud | Vcmpgtsb | Vcmpgtsh | Vcmpgtsw | Vcmpgtsd => {
                let ty = match op {
                    Vcmpequb | Vcmpgtub | Vcmpgtsb => I8X16,
                    Vcmpequh | Vcmpgtuh | Vcmpgtsh => I16X8,
                    Vcmpequw | Vcmpgtuw | Vcmpgtsw => I32X4,
                    _ => I64X2,
                };
                let cc = match op {
                    Vcmpequb | Vcmpequh | Vcmpequw | Vcmpequd => IntCC::Equal,
                    Vcmpgtub | Vcmpgtuh | Vcmpgtuw | Vcmpgtud => IntCC::UnsignedGreaterThan,
                    _ => IntCC::SignedGreaterThan,
                };
                let (a, b) = (self.vsr_as(vr(ra), ty), self.vsr_as(vr(rb), ty));
                let r = self.b.ins().icmp(cc, a, b);
                self.set_vsr(vr(rt), r);
                if i.bit21() != 0 {
                    self.record_cr6(r);
                }
            }
            Vslb | Vslh | Vslw | Vsld | Vsrb | Vsrh | Vsrw | Vsrd | Vsrab | Vsrah | Vsraw
            | Vsrad => {
                let ty = match op {
                    Vslb | Vsrb | Vsrab => I8X16,
                    Vslh | Vsrh | Vsrah => I16X8,
                    Vslw | Vsrw | Vsraw => I32X4,
                    _ => I64X2,
                };
                let (a, b) = (self.vsr_as(vr(ra), ty), self.vsr_as(vr(rb), ty));
                let r = self.shift_lanes(op, ty, a, b);
                self.set_vsr(vr(rt), r);
            }
            Vpkuhum | Vpkuwum | Vpkudum | Vmrghb | Vmrghh | Vmrghw | Vmrglb | Vmrglh | Vmrglw
            | Vmrgew | Vmrgow | Vsldoi => {
                let s = match op {
                    Vpkuhum => sel::pack(2),
                    Vpkuwum => sel::pack(4),
                    Vpkudum => sel::pack(8),
                    Vmrghb => sel::merge(1, 0, 1),
                    Vmrghh => sel::merge(2, 0, 1),
                    Vmrghw => sel::merge(4, 0, 1),
                    Vmrglb => sel::merge(1, 8, 1),
                    Vmrglh => sel::merge(2, 4, 1),
                    Vmrglw => sel::merge(4, 2, 1),
                    Vmrgew => sel::merge(4, 0, 2),
                    Vmrgow => sel::merge(4, 1, 2),
                    _ => sel::shift(i.shb() as usize),
                };
                let (a, b) = (self.vsr(vr(ra)), self.vsr(vr(rb)));
                let r = self.permute(a, b, s);
                self.set_vsr(vr(rt), r);
            }
            Xxpermdi | Xxsldwi | Xxmrghw | Xxmrglw => {
                let s = match op {
                    Xxpermdi => sel::permdi(i.dm() as usize),
                    Xxsldwi => sel::shift(4 * i.dm() as usize),
                    Xxmrghw => sel::merge(4, 0, 1),
                    _ => sel::merge(4, 2, 1),
                };
                let (a, b) = (self.vsr(i.xa()), self.vsr(i.xb()));
                let r = self.permute(a, b, s);
                self.set_vsr(i.xt(), r);
            }
            Vgbbd => {
                // Each doubleword's 8×8 bit matrix transposed: three exchanges of bits 7, 14
                // and 28 places apart (as the baseline tier's `gather_bits_by_bytes`).
                let mut x = self.vsr(vr(rb));
                for (sh, m) in [
                    (7, 0x00aa_00aa_00aa_00aau64),
                    (14, 0x0000_cccc_0000_cccc),
                    (28, 0x0000_0000_f0f0_f0f0),
                ] {
                    let m = self.splat_const(I64X2, m as i64);
                    let amt = self.b.ins().iconst(I32, sh);
                    let s = self.b.ins().ushr(x, amt);
                    let t = self.b.ins().bxor(x, s);
                    let t = self.b.ins().band(t, m);
                    let u = self.b.ins().ishl(t, amt);
                    let x1 = self.b.ins().bxor(x, t);
                    x = self.b.ins().bxor(x1, u);
                }
                self.set_vsr(vr(rt), x);
            }
            Vbpermq => {
                // Byte k of VRB picks VRA's host byte 15 - k/8 (k ≥ 128: out of the
                // swizzle's range, 0) and tests bit 0x80 >> k%8 of it; the tests in host
                // lane order are the result's bits, in doubleword 0.
                let (a, k) = (self.vsr_as(vr(ra), I8X16), self.vsr_as(vr(rb), I8X16));
                let three = self.b.ins().iconst(I32, 3);
                let row = self.b.ins().ushr(k, three);
                let fifteen = self.splat_const(I8X16, 15);
                let sel = self.b.ins().bxor(row, fifteen);
                let bytes = self.b.ins().swizzle(a, sel);
                let seven = self.splat_const(I8X16, 7);
                let col = self.b.ins().band(k, seven);
                let table: Vec<u8> = (0..16).map(|j| if j < 8 { 0x80 >> j } else { 0 }).collect();
                let table = self.b.func.dfg.constants.insert(ConstantData::from(table));
                let table = self.b.ins().vconst(I8X16, table);
                let bit = self.b.ins().swizzle(table, col);
                let t = self.b.ins().band(bytes, bit);
                let zero = self.splat_const(I8X16, 0);
                let hit = self.b.ins().icmp(IntCC::NotEqual, t, zero);
                let bits = self.b.ins().vhigh_bits(I64, hit);
                let z = self.splat_const(I64X2, 0);
                let r = self.b.ins().insertlane(z, bits, 1);
                self.set_vsr(vr(rt), r);
            }
            Vspltb | Vsplth | Vspltw | Xxspltw => {
                let (s, t, b) = match op {
                    Vspltb => (1, vr(rt), vr(rb)),
                    Vsplth => (2, vr(rt), vr(rb)),
                    Vspltw => (4, vr(rt), vr(rb)),
                    _ => (4, i.xt(), i.xb()),
                };
                let u = i.uim() as usize & (16 / s - 1);
                let b = self.vsr(b);
                let r = self.permute(b, b, sel::splat(s, u));
                self.set_vsr(t, r);
            }
            Vspltisb | Vspltish | Vspltisw => {
                let ty = lane_type(match op {
                    Vspltisb => 1,
                    Vspltish => 2,
                    _ => 4,
                });
                let r = self.splat_const(ty, i.simm());
                self.set_vsr(vr(rt), r);
            }
            Vperm => {
                // Host byte h of the result is guest byte 15 - h, whose control is host byte h
                // of VRC; guest byte k of a register is its host byte 15 - k.
                let (a, b, c) = (
                    self.vsr_as(vr(ra), I8X16),
                    self.vsr_as(vr(rb), I8X16),
                    self.vsr_as(vr(i.frc()), I8X16),
                );
                let m15 = self.splat_const(I8X16, 15);
                let idx = self.b.ins().band(c, m15);
                let idx = self.b.ins().bxor(idx, m15);
                let from_a = self.b.ins().swizzle(a, idx);
                let from_b = self.b.ins().swizzle(b, idx);
                let m16 = self.splat_const(I8X16, 16);
                let bit4 = self.b.ins().band(c, m16);
                let zero = self.splat_const(I8X16, 0);
                let pick_b = self.b.ins().icmp(IntCC::NotEqual, bit4, zero);
                let r = self.b.ins().bitselect(pick_b, from_b, from_a);
                self.set_vsr(vr(rt), r);
            }
            Lvsl | Lvsr => {
                let ea = self.ea(op, i, false);
                let sh = self.b.ins().band_imm_s(ea, 15);
                let sh = self.b.ins().ireduce(I8, sh);
                let sh = self.b.ins().splat(I8X16, sh);
                let r = if op == Lvsl {
                    let base = self.vconst(std::array::from_fn(|g| g as u8));
                    self.b.ins().iadd(base, sh)
                } else {
                    let base = self.vconst(std::array::from_fn(|g| 0x10 + g as u8));
                    self.b.ins().isub(base, sh)
                };
                self.set_vsr(vr(rt), r);
            }
            Mfvsrd | Mfvsrwz => {
                let d = self.fpr(i.xt());
                let d = if op == Mfvsrwz {
                    self.b.ins().band_imm_s(d, 0xffff_ffff)
                } else {
                    d
                };
                self.set(ra as usize, d);
            }
            Mtvsrd | Mtvsrwa | Mtvsrwz => {
                let g = self.gpr(ra);
                let d = match op {
                    Mtvsrd => g,
                    Mtvsrwa => self.sext32(g),
                    _ => self.b.ins().band_imm_s(g, 0xffff_ffff),
                };
                self.set_dw0(i.xt(), d);
            }
            Lvx | Lvxl | Lxvd2x | Lxvw4x => {
                let ea = self.ea(op, i, false);
                let ea = if matches!(op, Lvx | Lvxl) {
                    self.b.ins().band_imm_s(ea, !15)
                } else {
                    ea
                };
                let (first, second) = self.load_pair(ea);
                let (t, hi, lo) = match op {
                    Lvx | Lvxl if self.le => (vr(rt), second, first),
                    Lvx | Lvxl => (vr(rt), first, second),
                    Lxvd2x => (i.xt(), first, second),
                    _ => (i.xt(), self.word_order(first), self.word_order(second)),
                };
                let v = self.join_dwords(hi, lo);
                self.set_vsr(t, v);
            }
            Stvx | Stvxl | Stxvd2x | Stxvw4x => {
                let ea = self.ea(op, i, false);
                let ea = if matches!(op, Stvx | Stvxl) {
                    self.b.ins().band_imm_s(ea, !15)
                } else {
                    ea
                };
                let s = if matches!(op, Stvx | Stvxl) {
                    vr(rt)
                } else {
                    i.xt()
                };
                let v = self.vsr(s);
                let (hi, lo) = (self.dword(v, 0), self.dword(v, 1));
                let (first, second) = match op {
                    Stvx | Stvxl if self.le => (lo, hi),
                    Stvx | Stvxl | Stxvd2x => (hi, lo),
                    _ => (self.word_order(hi), self.word_order(lo)),
                };
                self.store_pair(op, i, ea, first, second);
            }
            Lxvdsx => {
                let ea = self.ea(op, i, false);
                let d = self.load(ea, 8, self.le);
                let v = self.join_dwords(d, d);
                self.set_vsr(i.xt(), v);
            }
            Lxsdx | Lxsiwax | Lxsiwzx | Lxsspx => {
                let ea = self.ea(op, i, false);
                let x = self.load(ea, info.size as u32, self.le);
                let d = match op {
                    Lxsiwax => self.sext32(x),
                    Lxsspx => self.single_to_double(x),
                    _ => x,
                };
                self.set_dw0(i.xt(), d);
            }
            Stxsdx | Stxsiwx | Stxsspx => {
                let ea = self.ea(op, i, false);
                let d = self.fpr(i.xt());
                let x = if op == Stxsspx {
                    self.double_to_single(d)
                } else {
                    d
                };
                let stop = self.store(ea, x, info.size as u32, self.le);
                if !last {
                    self.stop_after_if(stop);
                }
            }
            Lfs | Lfsu | Lfsx | Lfsux | Lfd | Lfdu | Lfdx | Lfdux | Lfiwax | Lfiwzx => {
                let update = fl.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                let ea = self.ea(op, i, update);
                let x = self.load(ea, info.size as u32, self.le);
                let d = match op {
                    Lfs | Lfsu | Lfsx | Lfsux => self.single_to_double(x),
                    Lfiwax => self.sext32(x),
                    _ => x,
                };
                self.set_fpr(rt, d);
                if update {
                    self.set(ra as usize, ea);
                }
            }
            Stfs | Stfsu | Stfsx | Stfsux | Stfd | Stfdu | Stfdx | Stfdux | Stfiwx => {
                let update = fl.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                let ea = self.ea(op, i, update);
                let f = self.fpr(rt);
                let x = if matches!(op, Stfs | Stfsu | Stfsx | Stfsux) {
                    self.double_to_single(f)
                } else {
                    f
                };
                let stop = self.store(ea, x, info.size as u32, self.le);
                if update {
                    self.set(ra as usize, ea);
                }
                if !last {
                    self.stop_after_if(stop);
                }
            }
            Fmr | Fneg | Fabs | Fnabs | Fcpsgn if !i.rc() => {
                const SIGN: i64 = i64::MIN;
                let b = self.fpr(rb);
                let v = match op {
                    Fmr => b,
                    Fneg => self.b.ins().bxor_imm_s(b, SIGN),
                    Fabs => self.b.ins().band_imm_s(b, !SIGN),
                    Fnabs => self.b.ins().bor_imm_s(b, SIGN),
                    _ => {
                        let a = self.fpr(ra);
                        let s = self.b.ins().band_imm_s(a, SIGN);
                        let m = self.b.ins().band_imm_s(b, !SIGN);
                        self.b.ins().bor(s, m)
                    }
                };
                self.set_fpr(rt, v);
            }
            Fmrgew | Fmrgow => {
                let (a, b) = (self.fpr(ra), self.fpr(rb));
                let v = if op == Fmrgew {
                    let hi = self.b.ins().band_imm_s(a, 0xffff_ffff_0000_0000_u64 as i64);
                    let lo = self.b.ins().ushr_imm_s(b, 32);
                    self.b.ins().bor(hi, lo)
                } else {
                    let hi = self.b.ins().ishl_imm_s(a, 32);
                    let lo = self.b.ins().band_imm_s(b, 0xffff_ffff);
                    self.b.ins().bor(hi, lo)
                };
                self.set_fpr(rt, v);
            }
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::sel;

    #[test]
    fn selectors() {
        // vpkudum: words 1 and 3 of a, then of b.
        assert_eq!(
            sel::pack(8),
            [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31]
        );
        // vmrglw: words 2, 3 of a and b interleaved.
        assert_eq!(
            sel::merge(4, 2, 1),
            [8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31]
        );
        assert_eq!(
            sel::permdi(2),
            [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
        );
        assert_eq!(sel::splat(2, 7)[..4], [14, 15, 14, 15]);
    }
}
