//! VMX single-precision floating point.
//!
//! Always round-to-nearest-even, no exceptions, no FPSCR. With VSCR[NJ] set (as Linux runs
//! POWER8), denormal results are flushed to zero of the same sign. NaN operands propagate
//! quieted, the first NaN in operand order (A, B, C) winning; invalid operations give the
//! default NaN 0x7fc00000. The arithmetic itself is the host's IEEE single precision,
//! which rounds exactly as the architecture requires.

use super::softfp::{Parts, exp2_series, log2_bits};
use super::{Cpu, Exec, VSCR_NJ, map1, map2, map2_sat, mask, set_sat, vec_ok};
use crate::isa::Insn;

const DEFAULT_NAN: u32 = 0x7fc0_0000;
const QUIET: u32 = 0x0040_0000;
const SIGN: u32 = 0x8000_0000;

#[inline(always)]
fn is_nan(x: u32) -> bool {
    x & 0x7fff_ffff > 0x7f80_0000
}

#[inline(always)]
fn is_denormal(x: u32) -> bool {
    x & 0x7f80_0000 == 0 && x & 0x007f_ffff != 0
}

/// The floating-point mode of the instruction (VSCR[NJ]).
#[derive(Clone, Copy)]
struct Mode {
    nj: bool,
}

impl Mode {
    fn of(c: &Cpu) -> Self {
        Mode {
            nj: c.st.vscr & VSCR_NJ != 0,
        }
    }

    /// An operand as the arithmetic sees it: in NJ mode a denormal reads as zero.
    #[inline(always)]
    fn input(self, x: u32) -> f32 {
        f32::from_bits(if self.nj && is_denormal(x) {
            x & SIGN
        } else {
            x
        })
    }

    /// A computed (non-NaN-operand) result: default NaN for invalid operations, denormals
    /// flushed in NJ mode.
    #[inline(always)]
    fn output(self, r: f32) -> u32 {
        let x = r.to_bits();
        if r.is_nan() {
            DEFAULT_NAN
        } else if self.nj && is_denormal(x) {
            x & SIGN
        } else {
            x
        }
    }

    #[inline(always)]
    fn op1(self, a: u32, f: impl Fn(f32) -> f32) -> u32 {
        if is_nan(a) {
            return a | QUIET;
        }
        self.output(f(self.input(a)))
    }

    #[inline(always)]
    fn op2(self, a: u32, b: u32, f: impl Fn(f32, f32) -> f32) -> u32 {
        if let Some(&n) = [a, b].iter().find(|&&x| is_nan(x)) {
            return n | QUIET;
        }
        self.output(f(self.input(a), self.input(b)))
    }

    /// `f(a, c, b)` for the multiply-adds `a * c ± b`; NaN priority is A, B, C.
    #[inline(always)]
    fn op3(self, a: u32, b: u32, c: u32, f: impl Fn(f32, f32, f32) -> f32) -> u32 {
        if let Some(&n) = [a, b, c].iter().find(|&&x| is_nan(x)) {
            return n | QUIET;
        }
        self.output(f(self.input(a), self.input(c), self.input(b)))
    }
}

/// Defines element-wise single-precision instructions over VRA and VRB.
macro_rules! vfp2 {
    ($($name:ident: |$m:ident, $a:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vec_ok(c)?;
            let $m = Mode::of(c);
            let r = map2(c.st.vr(i.ra()), c.st.vr(i.rb()), |$a: u32, $b: u32| -> u32 { $e });
            c.st.set_vr(i.rt(), r);
            Ok(())
        })*
    };
}

/// Defines element-wise single-precision instructions over VRB.
macro_rules! vfp1 {
    ($($name:ident: |$m:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vec_ok(c)?;
            let $m = Mode::of(c);
            let r = map1(c.st.vr(i.rb()), |$b: u32| -> u32 { $e });
            c.st.set_vr(i.rt(), r);
            Ok(())
        })*
    };
}

/// Maximum/minimum: -0 orders below +0.
#[inline(always)]
fn max(a: f32, b: f32) -> f32 {
    if a == b {
        if a.is_sign_positive() { a } else { b }
    } else if a > b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn min(a: f32, b: f32) -> f32 {
    if a == b {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

vfp2! {
    vaddfp: |m, a, b| m.op2(a, b, |x, y| x + y);
    vsubfp: |m, a, b| m.op2(a, b, |x, y| x - y);
    vmaxfp: |m, a, b| m.op2(a, b, max);
    vminfp: |m, a, b| m.op2(a, b, min);
}

/// `a × c + b` (negated with `negate`, as -(a × c - b)), fused; computed in software so that
/// NJ flushes a result that is tiny before rounding even if it rounds up to a normal.
fn multiply_add(c: &mut Cpu, i: Insn, negate: bool) -> Exec {
    vec_ok(c)?;
    let m = Mode::of(c);
    let (va, vb, vc) = (c.st.vr(i.ra()), c.st.vr(i.rb()), c.st.vr(i.frc()));
    let mut r = 0;
    for k in 0..4 {
        let (a, b, cc) = (
            super::get::<u32>(va, k),
            super::get::<u32>(vb, k),
            super::get::<u32>(vc, k),
        );
        let x = m.op3(a, b, cc, |x, y, z| {
            if x.is_infinite() || y.is_infinite() || z.is_infinite() {
                // Infinities (and inf × 0) need no rounding: the host gets them right.
                return if negate {
                    -x.mul_add(y, -z)
                } else {
                    x.mul_add(y, z)
                };
            }
            let z = if negate { -z } else { z };
            let p = Parts::from_f32(x.to_bits())
                .mul_add(Parts::from_f32(y.to_bits()), Parts::from_f32(z.to_bits()));
            let p = if negate {
                Parts { sign: !p.sign, ..p }
            } else {
                p
            };
            f32::from_bits(p.round_f32(m.nj))
        });
        super::put(&mut r, k, x);
    }
    c.st.set_vr(i.rt(), r);
    Ok(())
}

/// `vmaddfp`: VRA × VRC + VRB, fused (one rounding).
pub(in crate::interp) fn vmaddfp(c: &mut Cpu, i: Insn) -> Exec {
    multiply_add(c, i, false)
}

/// `vnmsubfp`: -(VRA × VRC - VRB), fused.
pub(in crate::interp) fn vnmsubfp(c: &mut Cpu, i: Insn) -> Exec {
    multiply_add(c, i, true)
}

vfp1! {
    vrefp: |m, b| m.op1(b, |x| 1.0 / x);
    vrsqrtefp: |m, b| m.op1(b, |x| 1.0 / x.sqrt());
    // The estimates are the reference implementation's: a 15-term series for 2^x and a
    // bit-by-bit logarithm, both well within the architecture's required accuracy.
    vexptefp: |m, b| m.op1(b, |x| {
        if x == 0.0 {
            1.0
        } else if x.is_infinite() {
            if x < 0.0 { 0.0 } else { x }
        } else {
            f32::from_bits(exp2_series(x.to_bits()).round_f32(m.nj))
        }
    });
    vlogefp: |m, b| {
        let x = m.input(b);
        if is_nan(b) {
            b | QUIET
        } else if x == 0.0 {
            0xff80_0000 // -inf for either zero
        } else if x.is_sign_negative() {
            DEFAULT_NAN
        } else if x.is_infinite() {
            b
        } else {
            log2_bits(x.to_bits(), m.nj)
        }
    };
    vrfin: |m, b| m.op1(b, f32::round_ties_even);
    vrfiz: |m, b| m.op1(b, f32::trunc);
    vrfip: |m, b| m.op1(b, f32::ceil);
    vrfim: |m, b| m.op1(b, f32::floor);
}

/// `vcf?x`: integer words to single precision, divided by 2^UIM.
fn convert_from(c: &mut Cpu, i: Insn, signed: bool) -> Exec {
    vec_ok(c)?;
    let scale = 0.5f32.powi(i.uim() as i32);
    let r = map1(c.st.vr(i.rb()), |x: u32| {
        let f = if signed { x as i32 as f32 } else { x as f32 };
        (f * scale).to_bits()
    });
    c.st.set_vr(i.rt(), r);
    Ok(())
}

pub(in crate::interp) fn vcfux(c: &mut Cpu, i: Insn) -> Exec {
    convert_from(c, i, false)
}
pub(in crate::interp) fn vcfsx(c: &mut Cpu, i: Insn) -> Exec {
    convert_from(c, i, true)
}

/// `vct?xs`: single precision × 2^UIM to integer words, truncated and saturated; NaN gives 0.
fn convert_to(c: &mut Cpu, i: Insn, signed: bool) -> Exec {
    vec_ok(c)?;
    let m = Mode::of(c);
    let scale = 2f64.powi(i.uim() as i32);
    let (r, sat) = map2_sat(c.st.vr(i.rb()), 0, |x: u32, _: u32| {
        if is_nan(x) {
            return (0u32, false);
        }
        let t = (m.input(x) as f64 * scale).trunc();
        let (lo, hi) = if signed {
            (i32::MIN as f64, i32::MAX as f64)
        } else {
            (0.0, u32::MAX as f64)
        };
        let v = t.clamp(lo, hi);
        let bits = if signed { v as i32 as u32 } else { v as u32 };
        (bits, v != t)
    });
    c.st.set_vr(i.rt(), r);
    set_sat(c, sat);
    Ok(())
}

pub(in crate::interp) fn vctuxs(c: &mut Cpu, i: Insn) -> Exec {
    convert_to(c, i, false)
}
pub(in crate::interp) fn vctsxs(c: &mut Cpu, i: Insn) -> Exec {
    convert_to(c, i, true)
}

/// An ordered comparison of two elements; false when either is a NaN.
macro_rules! fcmp {
    ($m:ident, $op:tt) => {
        |x: u32, y: u32| mask::<u32>(!is_nan(x) && !is_nan(y) && $m.input(x) $op $m.input(y))
    };
}

/// Defines the floating-point compares (CR6 all-true/all-false when Rc = 1).
macro_rules! vfcmp {
    ($($name:ident: $op:tt;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let m = Mode::of(c);
            compare(c, i, fcmp!(m, $op))
        })*
    };
}

fn compare(c: &mut Cpu, i: Insn, f: impl Fn(u32, u32) -> u32) -> Exec {
    vec_ok(c)?;
    let r = map2(c.st.vr(i.ra()), c.st.vr(i.rb()), f);
    c.st.set_vr(i.rt(), r);
    super::record_cr6(c, i, r);
    Ok(())
}

vfcmp! {
    vcmpeqfp: ==;
    vcmpgefp: >=;
    vcmpgtfp: >;
}

/// `vcmpbfp`: bounds check, bit 0 = not (a <= b), bit 1 = not (a >= -b); a NaN sets both.
/// With Rc, CR6 bit 2 says every element is within bounds.
pub(in crate::interp) fn vcmpbfp(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let m = Mode::of(c);
    let r = map2(c.st.vr(i.ra()), c.st.vr(i.rb()), |a: u32, b: u32| {
        if is_nan(a) || is_nan(b) {
            return 0xc000_0000u32;
        }
        // Neither operand is a NaN here, so "not <=" is ">" and "not >=" is "<".
        let (x, y) = (m.input(a), m.input(b));
        (((x > y) as u32) << 31) | (((x < -y) as u32) << 30)
    });
    c.st.set_vr(i.rt(), r);
    if i.bit21() != 0 {
        c.st.set_crf(6, if r == 0 { 0b0010 } else { 0 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{vr_op, w4};
    use super::super::{VSCR_NJ, VSCR_SAT};
    use crate::interp::test_util::cpu;

    const RC: u32 = 1 << 10;
    const MIN_NORMAL: u32 = 0x0080_0000;

    #[test]
    fn nj_flushes_denormal_inputs_and_results() {
        let mut c = cpu();
        let den = 0x0000_0001; // the smallest denormal
        c.st.vscr = VSCR_NJ;
        let r = vr_op(
            &mut c,
            "vaddfp",
            w4([den, 0x8000_0003, MIN_NORMAL, 0x3f80_0000]),
            w4([0, 0, 0x8000_0001, 0]),
            0,
            0,
        );
        // (-0 + +0 is +0 in round-to-nearest.)
        assert_eq!(r, w4([0, 0, MIN_NORMAL, 0x3f80_0000]));
        // Without NJ the same sums are exact denormals.
        c.st.vscr = 0;
        let r = vr_op(
            &mut c,
            "vaddfp",
            w4([den, 0x8000_0003, MIN_NORMAL, 0x3f80_0000]),
            w4([0, 0, 0x8000_0001, 0]),
            0,
            0,
        );
        assert_eq!(r, w4([den, 0x8000_0003, 0x007f_ffff, 0x3f80_0000]));
    }

    #[test]
    fn nj_flushes_a_result_that_is_tiny_before_rounding() {
        let mut c = cpu();
        // MIN_NORMAL - (tiny product): rounds back up to MIN_NORMAL, but is below it exactly.
        let (a, cc, b) = (
            w4([0x069f_1dec; 4]),
            w4([0x9959_0a6e; 4]),
            w4([MIN_NORMAL; 4]),
        );
        c.st.vscr = 0;
        assert_eq!(vr_op(&mut c, "vmaddfp", a, b, cc, 0), w4([MIN_NORMAL; 4]));
        c.st.vscr = VSCR_NJ;
        assert_eq!(vr_op(&mut c, "vmaddfp", a, b, cc, 0), 0);
    }

    #[test]
    fn nans_propagate_quieted_in_operand_order() {
        let mut c = cpu();
        let (snan_a, qnan_b) = (0x7f80_0001, 0xffc0_0002);
        let r = vr_op(
            &mut c,
            "vaddfp",
            w4([snan_a, 0x3f80_0000, 0x7f80_0000, 0]),
            w4([qnan_b, qnan_b, 0xff80_0000, 0]),
            0,
            0,
        );
        // A's NaN wins and is quieted; inf - inf is the default NaN.
        assert_eq!(r, w4([0x7fc0_0001, qnan_b, 0x7fc0_0000, 0]));
    }

    #[test]
    fn conversions_saturate_and_set_sat() {
        let mut c = cpu();
        c.st.vscr = VSCR_NJ;
        // 3e9 (as a single), -1.5, NaN, 2.75 to signed words, scaled by 2^1.
        let b = w4([0x4f32_d05e, 0xbfc0_0000, 0x7fc0_0000, 0x4030_0000]);
        let r = vr_op(&mut c, "vctsxs", 0, b, 0, 1 << 16);
        assert_eq!(r, w4([0x7fff_ffff, (-3i32) as u32, 0, 5]));
        assert_eq!(c.st.vscr, VSCR_NJ | VSCR_SAT);
        // Unsigned: negative values clamp to 0.
        c.st.vscr = VSCR_NJ;
        let r = vr_op(&mut c, "vctuxs", 0, b, 0, 0);
        assert_eq!(r, w4([3_000_000_000, 0, 0, 2]));
        assert_eq!(c.st.vscr, VSCR_NJ | VSCR_SAT);
        // vcfsx: -6 / 2^2.
        assert_eq!(
            vr_op(&mut c, "vcfsx", 0, w4([(-6i32) as u32; 4]), 0, 2 << 16),
            w4([0xbfc0_0000; 4])
        );
    }

    #[test]
    fn bounds_compare_and_cr6() {
        let mut c = cpu();
        // |a| <= b for 1 vs 2 and -2 vs 2; 3 > 2; -3 < -2.
        let a = w4([0x3f80_0000, 0xc000_0000, 0x4040_0000, 0xc040_0000]);
        let b = w4([0x4000_0000; 4]);
        assert_eq!(
            vr_op(&mut c, "vcmpbfp", a, b, 0, RC),
            w4([0, 0, 0x8000_0000, 0x4000_0000])
        );
        assert_eq!(c.st.crf(6), 0);
        let a = w4([0x3f80_0000, 0xc000_0000, 0, 0x8000_0000]);
        assert_eq!(vr_op(&mut c, "vcmpbfp", a, b, 0, RC), 0);
        assert_eq!(c.st.crf(6), 0b0010);
        // vcmpgefp: NaN compares false in every element.
        assert_eq!(
            vr_op(
                &mut c,
                "vcmpgefp",
                w4([0x7fc0_0000; 4]),
                w4([0x7fc0_0000; 4]),
                0,
                RC
            ),
            0
        );
        assert_eq!(c.st.crf(6), 0b0010);
    }
}
