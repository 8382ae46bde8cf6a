//! Vector (VMX) and vector-scalar (VSX) instructions other than VSX floating point.
//!
//! Registers are `u128` values with the ISA's big-endian element numbering: element 0 of any
//! width is the most significant one. [`Lane`] and the `get`/`put`/`map*` helpers express
//! every element-wise operation once for all element widths.

mod bcd;
mod crypto;
mod fp;
mod int;
mod mem;
mod perm;
mod softfp;
mod vsx;

pub(in crate::interp) use bcd::*;
pub(in crate::interp) use crypto::*;
pub(in crate::interp) use fp::*;
pub(in crate::interp) use int::*;
pub(in crate::interp) use mem::*;
pub(in crate::interp) use perm::*;
pub(in crate::interp) use vsx::*;

use super::{Cpu, Exec};
use crate::cpu::{Exception, msr};
use crate::isa::Insn;

/// VSCR[SAT]: a saturating instruction clipped a result (sticky).
pub const VSCR_SAT: u32 = 1;
/// VSCR[NJ]: non-Java mode, denormal floating-point inputs and results are flushed to zero.
pub const VSCR_NJ: u32 = 1 << 16;

/// An element of a vector register: 8, 16, 32 or 64 bits, signed or unsigned.
pub(crate) trait Lane: Copy {
    const BITS: u32;
    /// The low `BITS` bits of `v`.
    fn from_bits(v: u128) -> Self;
    /// The element's bits, zero-extended.
    fn bits(self) -> u128;
}

macro_rules! lanes {
    ($($t:ty => $u:ty),*) => {
        $(impl Lane for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn from_bits(v: u128) -> Self {
                v as $u as $t
            }
            #[inline(always)]
            fn bits(self) -> u128 {
                self as $u as u128
            }
        })*
    };
}
lanes!(u8 => u8, i8 => u8, u16 => u16, i16 => u16, u32 => u32, i32 => u32, u64 => u64, i64 => u64);

/// Number of `T` elements in a register.
#[inline(always)]
pub(crate) const fn count<T: Lane>() -> usize {
    (128 / T::BITS) as usize
}

/// Element `k` of `v` (0 = most significant).
#[inline(always)]
pub(crate) fn get<T: Lane>(v: u128, k: usize) -> T {
    T::from_bits(v >> (128 - T::BITS as usize * (k + 1)))
}

/// Replaces element `k` of `v`.
#[inline(always)]
pub(crate) fn put<T: Lane>(v: &mut u128, k: usize, x: T) {
    let sh = 128 - T::BITS as usize * (k + 1);
    let m = (u128::MAX >> (128 - T::BITS)) << sh;
    *v = (*v & !m) | (x.bits() << sh);
}

#[inline(always)]
pub(crate) fn map1<T: Lane, R: Lane>(a: u128, f: impl Fn(T) -> R) -> u128 {
    debug_assert_eq!(T::BITS, R::BITS);
    let mut r = 0;
    for k in 0..count::<T>() {
        put(&mut r, k, f(get(a, k)));
    }
    r
}

#[inline(always)]
pub(crate) fn map2<T: Lane, R: Lane>(a: u128, b: u128, f: impl Fn(T, T) -> R) -> u128 {
    debug_assert_eq!(T::BITS, R::BITS);
    let mut r = 0;
    for k in 0..count::<T>() {
        put(&mut r, k, f(get(a, k), get(b, k)));
    }
    r
}

#[inline(always)]
pub(crate) fn map3<T: Lane>(a: u128, b: u128, c: u128, f: impl Fn(T, T, T) -> T) -> u128 {
    let mut r = 0;
    for k in 0..count::<T>() {
        put(&mut r, k, f(get(a, k), get(b, k), get(c, k)));
    }
    r
}

/// Element-wise with saturation: `f` returns the (clipped) element and whether it clipped.
#[inline(always)]
pub(crate) fn map2_sat<T: Lane, R: Lane>(
    a: u128,
    b: u128,
    f: impl Fn(T, T) -> (R, bool),
) -> (u128, bool) {
    let mut r = 0;
    let mut sat = false;
    for k in 0..count::<R>() {
        let (x, s) = f(get(a, k), get(b, k));
        put(&mut r, k, x);
        sat |= s;
    }
    (r, sat)
}

/// All-ones for true, zero for false: the element result of a compare.
#[inline(always)]
pub(crate) fn mask<T: Lane>(t: bool) -> T {
    T::from_bits(if t { u128::MAX } else { 0 })
}

/// Vector instructions need MSR[VEC].
#[inline(always)]
pub(super) fn vec_ok(c: &Cpu) -> Exec {
    if c.st.msr & msr::VEC == 0 {
        Err(Exception::VecUnavailable)
    } else {
        Ok(())
    }
}

/// VSX instructions need MSR[VSX].
#[inline(always)]
pub(super) fn vsx_ok(c: &Cpu) -> Exec {
    if c.st.msr & msr::VSX == 0 {
        Err(Exception::VsxUnavailable)
    } else {
        Ok(())
    }
}

/// Moves between GPRs and VSRs need the facility of the register half they touch: FP for
/// VSR 0-31 (the FPRs), VEC for VSR 32-63 (the VRs).
#[inline(always)]
pub(super) fn vsr_half_ok(c: &Cpu, vsr: u32) -> Exec {
    if vsr < 32 {
        if c.st.msr & msr::FP == 0 {
            Err(Exception::FpUnavailable)
        } else {
            Ok(())
        }
    } else {
        vec_ok(c)
    }
}

/// Sets VSCR[SAT] if an instruction saturated (it is never cleared by them).
#[inline(always)]
pub(super) fn set_sat(c: &mut Cpu, sat: bool) {
    if sat {
        c.st.vscr |= VSCR_SAT;
    }
}

/// CR6 of a recording vector compare: 0b1000 if every element compared true, 0b0010 if none.
#[inline(always)]
pub(super) fn record_cr6(c: &mut Cpu, i: Insn, r: u128) {
    if i.bit21() != 0 {
        let v = if r == u128::MAX {
            0b1000
        } else if r == 0 {
            0b0010
        } else {
            0
        };
        c.st.set_crf(6, v);
    }
}

/// Defines VX-form instructions `VRT <- f(VRA, VRB)`.
macro_rules! vx_ab {
    ($($name:ident: |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let ($a, $b) = (c.st.vr(i.ra()), c.st.vr(i.rb()));
            c.st.set_vr(i.rt(), $e);
            Ok(())
        })*
    };
}

/// Defines VX-form instructions `VRT <- f(VRA, VRB)` that may saturate (`f` returns the
/// result and whether any element saturated).
macro_rules! vx_ab_sat {
    ($($name:ident: |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let ($a, $b) = (c.st.vr(i.ra()), c.st.vr(i.rb()));
            let (r, sat): (u128, bool) = $e;
            c.st.set_vr(i.rt(), r);
            super::set_sat(c, sat);
            Ok(())
        })*
    };
}

/// Defines VX-form instructions `VRT <- f(VRB)`.
macro_rules! vx_b {
    ($($name:ident: |$b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let $b = c.st.vr(i.rb());
            c.st.set_vr(i.rt(), $e);
            Ok(())
        })*
    };
}

/// Defines VA-form instructions `VRT <- f(VRA, VRB, VRC)`.
macro_rules! va_abc {
    ($($name:ident: |$a:ident, $b:ident, $cc:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let ($a, $b, $cc) = (c.st.vr(i.ra()), c.st.vr(i.rb()), c.st.vr(i.frc()));
            c.st.set_vr(i.rt(), $e);
            Ok(())
        })*
    };
}

/// Defines VA-form instructions `VRT <- f(VRA, VRB, VRC)` that may saturate.
macro_rules! va_abc_sat {
    ($($name:ident: |$a:ident, $b:ident, $cc:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let ($a, $b, $cc) = (c.st.vr(i.ra()), c.st.vr(i.rb()), c.st.vr(i.frc()));
            let (r, sat): (u128, bool) = $e;
            c.st.set_vr(i.rt(), r);
            super::set_sat(c, sat);
            Ok(())
        })*
    };
}

/// Defines VC-form compares: `VRT <- f(VRA, VRB)`, CR6 from the result when Rc = 1.
macro_rules! vc_ab {
    ($($name:ident: |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            super::vec_ok(c)?;
            let ($a, $b) = (c.st.vr(i.ra()), c.st.vr(i.rb()));
            let r: u128 = $e;
            c.st.set_vr(i.rt(), r);
            super::record_cr6(c, i, r);
            Ok(())
        })*
    };
}

pub(crate) use {va_abc, va_abc_sat, vc_ab, vx_ab, vx_ab_sat, vx_b};

pub(in crate::interp) fn mfvscr(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    c.st.set_vr(i.rt(), c.st.vscr as u128);
    Ok(())
}

pub(in crate::interp) fn mtvscr(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    // The reserved bits are kept as written, as QEMU does.
    c.st.vscr = c.st.vr(i.rb()) as u32;
    Ok(())
}

/// Test helpers: instruction words built from the table by mnemonic, and a one-instruction
/// runner over VR operands.
#[cfg(test)]
pub(crate) mod testing {
    use crate::interp::Cpu;
    use crate::isa::ALL_OPS;

    /// The word of `mnemonic` with VRT/VRA/VRB/VRC (or XT/XA/XB) = t, a, b, c and `extra`
    /// ORed in (Rc, immediates).
    pub fn word(mnemonic: &str, t: u32, a: u32, b: u32, c: u32, extra: u32) -> u32 {
        use crate::isa::Operand::*;
        let op = ALL_OPS
            .iter()
            .find(|op| op.info().mnemonic == mnemonic)
            .unwrap_or_else(|| panic!("{mnemonic}"));
        let mut w = op.info().value | extra;
        for o in op.info().operands {
            w |= match o {
                Vrt | Vrs | Rt | Rs => (t & 31) << 21,
                Vra | Ra | Ra0 => (a & 31) << 16,
                Vrb | Rb => (b & 31) << 11,
                Vrc => (c & 31) << 6,
                Xt | Xs => (t & 31) << 21 | t >> 5,
                Xa => (a & 31) << 16 | (a >> 5) << 2,
                Xb => (b & 31) << 11 | (b >> 5) << 1,
                Xc => (c & 31) << 6 | (c >> 5) << 3,
                _ => 0,
            };
        }
        w
    }

    /// Runs `mnemonic` with VRA = a, VRB = b, VRC = c into VRT = v3; returns v3.
    pub fn vr_op(c: &mut Cpu, mnemonic: &str, a: u128, b: u128, cc: u128, extra: u32) -> u128 {
        c.st.set_vr(4, a);
        c.st.set_vr(5, b);
        c.st.set_vr(6, cc);
        super::super::test_util::run(c, &[word(mnemonic, 3, 4, 5, 6, extra)]);
        c.st.vr(3)
    }

    /// Four words as a vector (word 0 first).
    pub fn w4(w: [u32; 4]) -> u128 {
        w.iter().fold(0, |v, &x| v << 32 | x as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_numbered_from_the_most_significant_end() {
        let v = 0x0011_2233_4455_6677_8899_aabb_ccdd_eeffu128;
        assert_eq!(get::<u8>(v, 0), 0x00);
        assert_eq!(get::<u8>(v, 15), 0xff);
        assert_eq!(get::<u16>(v, 1), 0x2233);
        assert_eq!(get::<i32>(v, 3), 0xccdd_eeffu32 as i32);
        assert_eq!(get::<u64>(v, 0), 0x0011_2233_4455_6677);
        let mut w = v;
        put::<u16>(&mut w, 7, 0x1234);
        assert_eq!(w, 0x0011_2233_4455_6677_8899_aabb_ccdd_1234);
        put::<i8>(&mut w, 0, -1);
        assert_eq!(w >> 120, 0xff);
    }
}
