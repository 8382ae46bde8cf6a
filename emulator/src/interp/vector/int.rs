//! VMX integer arithmetic, compares, logical operations, rotates and shifts, bit counts.

use super::{Cpu, Exec, Lane, count, get, map1, map2, map2_sat, map3, mask, put};
use super::{va_abc, va_abc_sat, vc_ab, vx_ab, vx_ab_sat, vx_b};
use crate::isa::Insn;

/// Clamps a wide intermediate to the range of `T`, reporting whether it had to.
trait Clamp<T> {
    fn clamp_to(self) -> (T, bool);
}

macro_rules! clamps {
    ($($wide:ty => $($t:ty),*;)*) => {
        $($(impl Clamp<$t> for $wide {
            #[inline(always)]
            fn clamp_to(self) -> ($t, bool) {
                if self > <$t>::MAX as $wide {
                    (<$t>::MAX, true)
                } else if self < <$t>::MIN as $wide {
                    (<$t>::MIN, true)
                } else {
                    (self as $t, false)
                }
            }
        })*)*
    };
}
clamps! {
    i128 => u8, i8, u16, i16, u32, i32, u64, i64;
}

#[inline(always)]
fn sat<T>(wide: i128) -> (T, bool)
where
    i128: Clamp<T>,
{
    wide.clamp_to()
}

/// Saturating add/sub of elements of `T`, computed exactly in `i128` and clamped.
macro_rules! sat_arith {
    ($t:ty, $op:tt) => {
        |x: $t, y: $t| sat::<$t>(x as i128 $op y as i128)
    };
}

vx_ab! {
    vaddubm: |a, b| map2(a, b, u8::wrapping_add);
    vadduhm: |a, b| map2(a, b, u16::wrapping_add);
    vadduwm: |a, b| map2(a, b, u32::wrapping_add);
    vaddudm: |a, b| map2(a, b, u64::wrapping_add);
    vadduqm: |a, b| a.wrapping_add(b);
    vaddcuw: |a, b| map2(a, b, |x: u32, y: u32| x.overflowing_add(y).1 as u32);
    vaddcuq: |a, b| a.overflowing_add(b).1 as u128;
    vsububm: |a, b| map2(a, b, u8::wrapping_sub);
    vsubuhm: |a, b| map2(a, b, u16::wrapping_sub);
    vsubuwm: |a, b| map2(a, b, u32::wrapping_sub);
    vsubudm: |a, b| map2(a, b, u64::wrapping_sub);
    vsubuqm: |a, b| a.wrapping_sub(b);
    // The carry of a + ~b + 1 is 1 exactly when there is no borrow.
    vsubcuw: |a, b| map2(a, b, |x: u32, y: u32| (x >= y) as u32);
    vsubcuq: |a, b| (a >= b) as u128;
}

/// a + b + cin with the carry out, for the extended quadword forms.
#[inline(always)]
fn add_carry(a: u128, b: u128, cin: u128) -> (u128, bool) {
    let (s, c1) = a.overflowing_add(b);
    let (s, c2) = s.overflowing_add(cin & 1);
    (s, c1 | c2)
}

va_abc! {
    vaddeuqm: |a, b, c| add_carry(a, b, c).0;
    vaddecuq: |a, b, c| add_carry(a, b, c).1 as u128;
    vsubeuqm: |a, b, c| add_carry(a, !b, c).0;
    vsubecuq: |a, b, c| add_carry(a, !b, c).1 as u128;
}

vx_ab_sat! {
    vaddubs: |a, b| map2_sat(a, b, sat_arith!(u8, +));
    vadduhs: |a, b| map2_sat(a, b, sat_arith!(u16, +));
    vadduws: |a, b| map2_sat(a, b, sat_arith!(u32, +));
    vaddsbs: |a, b| map2_sat(a, b, sat_arith!(i8, +));
    vaddshs: |a, b| map2_sat(a, b, sat_arith!(i16, +));
    vaddsws: |a, b| map2_sat(a, b, sat_arith!(i32, +));
    vsububs: |a, b| map2_sat(a, b, sat_arith!(u8, -));
    vsubuhs: |a, b| map2_sat(a, b, sat_arith!(u16, -));
    vsubuws: |a, b| map2_sat(a, b, sat_arith!(u32, -));
    vsubsbs: |a, b| map2_sat(a, b, sat_arith!(i8, -));
    vsubshs: |a, b| map2_sat(a, b, sat_arith!(i16, -));
    vsubsws: |a, b| map2_sat(a, b, sat_arith!(i32, -));
}

// --- multiply ---

/// Products of the even (`odd` = false) or odd elements, each as a double-width element.
#[inline(always)]
fn mul_half<T: Lane, W: Lane>(a: u128, b: u128, odd: bool, f: impl Fn(T, T) -> W) -> u128 {
    let mut r = 0;
    for j in 0..count::<W>() {
        let k = 2 * j + odd as usize;
        put(&mut r, j, f(get(a, k), get(b, k)));
    }
    r
}

vx_ab! {
    vmuleub: |a, b| mul_half(a, b, false, |x: u8, y: u8| x as u16 * y as u16);
    vmuloub: |a, b| mul_half(a, b, true, |x: u8, y: u8| x as u16 * y as u16);
    vmulesb: |a, b| mul_half(a, b, false, |x: i8, y: i8| x as i16 * y as i16);
    vmulosb: |a, b| mul_half(a, b, true, |x: i8, y: i8| x as i16 * y as i16);
    vmuleuh: |a, b| mul_half(a, b, false, |x: u16, y: u16| x as u32 * y as u32);
    vmulouh: |a, b| mul_half(a, b, true, |x: u16, y: u16| x as u32 * y as u32);
    vmulesh: |a, b| mul_half(a, b, false, |x: i16, y: i16| x as i32 * y as i32);
    vmulosh: |a, b| mul_half(a, b, true, |x: i16, y: i16| x as i32 * y as i32);
    vmuleuw: |a, b| mul_half(a, b, false, |x: u32, y: u32| x as u64 * y as u64);
    vmulouw: |a, b| mul_half(a, b, true, |x: u32, y: u32| x as u64 * y as u64);
    vmulesw: |a, b| mul_half(a, b, false, |x: i32, y: i32| x as i64 * y as i64);
    vmulosw: |a, b| mul_half(a, b, true, |x: i32, y: i32| x as i64 * y as i64);
    vmuluwm: |a, b| map2(a, b, u32::wrapping_mul);
}

/// Builds a word vector from four exact sums, clamped to `T` (modulo when `wrap`).
#[inline(always)]
fn words<T>(sums: [i128; 4], wrap: bool) -> (u128, bool)
where
    i128: Clamp<T>,
    T: Lane,
{
    let mut r = 0;
    let mut any = false;
    for (j, s) in sums.into_iter().enumerate() {
        if wrap {
            put(&mut r, j, s as u32);
        } else {
            let (x, sat) = sat::<T>(s);
            put(&mut r, j, x);
            any |= sat;
        }
    }
    (r, any)
}

/// Multiply-sum: per word, the products of the narrower elements plus word j of c.
#[inline(always)]
fn msum<A: Lane + Into<i128>, B: Lane + Into<i128>, T: Lane + Into<i128>>(
    a: u128,
    b: u128,
    c: u128,
    wrap: bool,
) -> (u128, bool)
where
    i128: Clamp<T>,
{
    let n = count::<A>() / 4;
    let sums = std::array::from_fn(|j| {
        let p: i128 = (0..n)
            .map(|k| get::<A>(a, n * j + k).into() * get::<B>(b, n * j + k).into())
            .sum();
        p + get::<T>(c, j).into()
    });
    words::<T>(sums, wrap)
}

va_abc! {
    vmsumubm: |a, b, c| msum::<u8, u8, u32>(a, b, c, true).0;
    vmsummbm: |a, b, c| msum::<i8, u8, u32>(a, b, c, true).0;
    vmsumuhm: |a, b, c| msum::<u16, u16, u32>(a, b, c, true).0;
    vmsumshm: |a, b, c| msum::<i16, i16, u32>(a, b, c, true).0;
    vmladduhm: |a, b, c| map3(a, b, c, |x: u16, y: u16, z: u16| x.wrapping_mul(y).wrapping_add(z));
}

va_abc_sat! {
    vmsumuhs: |a, b, c| msum::<u16, u16, u32>(a, b, c, false);
    vmsumshs: |a, b, c| msum::<i16, i16, i32>(a, b, c, false);
    vmhaddshs: |a, b, c| mhadd(a, b, c, 0);
    vmhraddshs: |a, b, c| mhadd(a, b, c, 0x4000);
}

/// High half of a signed halfword product (optionally rounded) plus c, saturated.
#[inline(always)]
fn mhadd(a: u128, b: u128, c: u128, round: i32) -> (u128, bool) {
    let mut r = 0;
    let mut any = false;
    for k in 0..8 {
        let p = (get::<i16>(a, k) as i32 * get::<i16>(b, k) as i32 + round) >> 15;
        let (x, s) = sat::<i16>((p + get::<i16>(c, k) as i32) as i128);
        put(&mut r, k, x);
        any |= s;
    }
    (r, any)
}

/// Sum across: the elements of `T` in word j of a, plus word j of b, saturated to `W`.
#[inline(always)]
fn sum4<T: Lane + Into<i128>, W: Lane + Into<i128>>(a: u128, b: u128) -> (u128, bool)
where
    i128: Clamp<W>,
{
    let n = count::<T>() / 4;
    let sums = std::array::from_fn(|j| {
        (0..n).map(|k| get::<T>(a, n * j + k).into()).sum::<i128>() + get::<W>(b, j).into()
    });
    words::<W>(sums, false)
}

vx_ab_sat! {
    vsum4ubs: |a, b| sum4::<u8, u32>(a, b);
    vsum4sbs: |a, b| sum4::<i8, i32>(a, b);
    vsum4shs: |a, b| sum4::<i16, i32>(a, b);
    vsum2sws: |a, b| {
        let w = |v: u128, k| get::<i32>(v, k) as i128;
        let (x1, s1) = sat::<i32>(w(a, 0) + w(a, 1) + w(b, 1));
        let (x3, s3) = sat::<i32>(w(a, 2) + w(a, 3) + w(b, 3));
        let mut r = 0;
        put(&mut r, 1, x1);
        put(&mut r, 3, x3);
        (r, s1 | s3)
    };
    vsumsws: |a, b| {
        let s = (0..4).map(|k| get::<i32>(a, k) as i128).sum::<i128>() + get::<i32>(b, 3) as i128;
        let (x, sat) = sat::<i32>(s);
        (x as u32 as u128, sat)
    };
}

// --- average, maximum, minimum ---

macro_rules! avg {
    ($t:ty) => {
        |x: $t, y: $t| ((x as i128 + y as i128 + 1) >> 1) as $t
    };
}

vx_ab! {
    vavgub: |a, b| map2(a, b, avg!(u8));
    vavguh: |a, b| map2(a, b, avg!(u16));
    vavguw: |a, b| map2(a, b, avg!(u32));
    vavgsb: |a, b| map2(a, b, avg!(i8));
    vavgsh: |a, b| map2(a, b, avg!(i16));
    vavgsw: |a, b| map2(a, b, avg!(i32));
    vmaxub: |a, b| map2(a, b, u8::max);
    vmaxuh: |a, b| map2(a, b, u16::max);
    vmaxuw: |a, b| map2(a, b, u32::max);
    vmaxud: |a, b| map2(a, b, u64::max);
    vmaxsb: |a, b| map2(a, b, i8::max);
    vmaxsh: |a, b| map2(a, b, i16::max);
    vmaxsw: |a, b| map2(a, b, i32::max);
    vmaxsd: |a, b| map2(a, b, i64::max);
    vminub: |a, b| map2(a, b, u8::min);
    vminuh: |a, b| map2(a, b, u16::min);
    vminuw: |a, b| map2(a, b, u32::min);
    vminud: |a, b| map2(a, b, u64::min);
    vminsb: |a, b| map2(a, b, i8::min);
    vminsh: |a, b| map2(a, b, i16::min);
    vminsw: |a, b| map2(a, b, i32::min);
    vminsd: |a, b| map2(a, b, i64::min);
}

// --- compares ---

macro_rules! cmp {
    ($t:ty, $op:tt) => {
        |x: $t, y: $t| mask::<$t>(x $op y)
    };
}

vc_ab! {
    vcmpequb: |a, b| map2(a, b, cmp!(u8, ==));
    vcmpequh: |a, b| map2(a, b, cmp!(u16, ==));
    vcmpequw: |a, b| map2(a, b, cmp!(u32, ==));
    vcmpequd: |a, b| map2(a, b, cmp!(u64, ==));
    vcmpgtub: |a, b| map2(a, b, cmp!(u8, >));
    vcmpgtuh: |a, b| map2(a, b, cmp!(u16, >));
    vcmpgtuw: |a, b| map2(a, b, cmp!(u32, >));
    vcmpgtud: |a, b| map2(a, b, cmp!(u64, >));
    vcmpgtsb: |a, b| map2(a, b, cmp!(i8, >));
    vcmpgtsh: |a, b| map2(a, b, cmp!(i16, >));
    vcmpgtsw: |a, b| map2(a, b, cmp!(i32, >));
    vcmpgtsd: |a, b| map2(a, b, cmp!(i64, >));
}

// --- logical ---

vx_ab! {
    vand: |a, b| a & b;
    vandc: |a, b| a & !b;
    vor: |a, b| a | b;
    vorc: |a, b| a | !b;
    vxor: |a, b| a ^ b;
    vnor: |a, b| !(a | b);
    vnand: |a, b| !(a & b);
    veqv: |a, b| !(a ^ b);
}

va_abc! {
    vsel: |a, b, c| (a & !c) | (b & c);
}

// --- rotate and shift (counts are taken modulo the element width) ---

vx_ab! {
    vrlb: |a, b| map2(a, b, |x: u8, y: u8| x.rotate_left(y as u32));
    vrlh: |a, b| map2(a, b, |x: u16, y: u16| x.rotate_left(y as u32));
    vrlw: |a, b| map2(a, b, |x: u32, y: u32| x.rotate_left(y));
    vrld: |a, b| map2(a, b, |x: u64, y: u64| x.rotate_left(y as u32));
    vslb: |a, b| map2(a, b, |x: u8, y: u8| x.wrapping_shl(y as u32));
    vslh: |a, b| map2(a, b, |x: u16, y: u16| x.wrapping_shl(y as u32));
    vslw: |a, b| map2(a, b, |x: u32, y: u32| x.wrapping_shl(y));
    vsld: |a, b| map2(a, b, |x: u64, y: u64| x.wrapping_shl(y as u32));
    vsrb: |a, b| map2(a, b, |x: u8, y: u8| x.wrapping_shr(y as u32));
    vsrh: |a, b| map2(a, b, |x: u16, y: u16| x.wrapping_shr(y as u32));
    vsrw: |a, b| map2(a, b, |x: u32, y: u32| x.wrapping_shr(y));
    vsrd: |a, b| map2(a, b, |x: u64, y: u64| x.wrapping_shr(y as u32));
    vsrab: |a, b| map2(a, b, |x: i8, y: i8| x.wrapping_shr(y as u32));
    vsrah: |a, b| map2(a, b, |x: i16, y: i16| x.wrapping_shr(y as u32));
    vsraw: |a, b| map2(a, b, |x: i32, y: i32| x.wrapping_shr(y as u32));
    vsrad: |a, b| map2(a, b, |x: i64, y: i64| x.wrapping_shr(y as u32));
    // Whole-register shifts by bits (0-7) and by octets (0-15), counts from the last byte.
    vsl: |a, b| a << (b & 7);
    vsr: |a, b| a >> (b & 7);
    vslo: |a, b| a << (b & 0x78);
    vsro: |a, b| a >> (b & 0x78);
}

// --- bit counts ---

vx_b! {
    vclzb: |b| map1(b, |x: u8| x.leading_zeros() as u8);
    vclzh: |b| map1(b, |x: u16| x.leading_zeros() as u16);
    vclzw: |b| map1(b, |x: u32| x.leading_zeros());
    vclzd: |b| map1(b, |x: u64| x.leading_zeros() as u64);
    vpopcntb: |b| map1(b, |x: u8| x.count_ones() as u8);
    vpopcnth: |b| map1(b, |x: u16| x.count_ones() as u16);
    vpopcntw: |b| map1(b, |x: u32| x.count_ones());
    vpopcntd: |b| map1(b, |x: u64| x.count_ones() as u64);
}

#[cfg(test)]
mod tests {
    use super::super::VSCR_SAT;
    use super::super::testing::{vr_op, w4};
    use crate::interp::test_util::cpu;

    const RC: u32 = 1 << 10;

    #[test]
    fn saturation_sets_the_sticky_sat_bit() {
        let mut c = cpu();
        c.st.vscr = 0;
        // 0xf0 + 0x20 saturates to 0xff; 0x10 + 0x20 does not.
        let r = vr_op(&mut c, "vaddubs", 0xf010u128, 0x2020, 0, 0);
        assert_eq!(r, 0xff30);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
        // A modulo add wraps and leaves SAT as it was (set).
        assert_eq!(vr_op(&mut c, "vaddubm", 0xf0, 0x20, 0, 0), 0x10);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
        // Without saturation SAT stays clear.
        c.st.vscr = 0;
        vr_op(&mut c, "vaddubs", 0x10, 0x20, 0, 0);
        assert_eq!(c.st.vscr, 0);
        // Signed: -128 - 1 clamps to -128, 127 + 1 to 127.
        let r = vr_op(&mut c, "vsubsbs", 0x807f << 112, 0x01ff << 112, 0, 0);
        assert_eq!(r >> 112, 0x807f);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
        c.st.vscr = 0;
        let r = vr_op(
            &mut c,
            "vaddshs",
            w4([0x7fff_8000, 0, 0, 0]),
            w4([0x0001_ffff, 0, 0, 0]),
            0,
            0,
        );
        assert_eq!(r >> 96, 0x7fff_8000);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
        c.st.vscr = 0;
        // vsumsws: the sum across a word vector saturates to i32.
        let r = vr_op(
            &mut c,
            "vsumsws",
            w4([0x7fff_ffff, 1, 0, 0]),
            w4([0, 0, 0, 5]),
            0,
            0,
        );
        assert_eq!(r, 0x7fff_ffff);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
    }

    #[test]
    fn recording_compares_summarise_in_cr6() {
        let mut c = cpu();
        c.st.set_cr(0);
        let a = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128;
        assert_eq!(vr_op(&mut c, "vcmpequb", a, a, 0, RC), u128::MAX);
        assert_eq!(c.st.crf(6), 0b1000);
        assert_eq!(vr_op(&mut c, "vcmpequb", a, !a, 0, RC), 0);
        assert_eq!(c.st.crf(6), 0b0010);
        assert_eq!(vr_op(&mut c, "vcmpequb", a, a ^ 1, 0, RC), u128::MAX << 8);
        assert_eq!(c.st.crf(6), 0);
        // Without Rc, CR is left alone.
        c.st.set_cr(0x1234_5678);
        vr_op(&mut c, "vcmpequb", a, a, 0, 0);
        assert_eq!(c.st.cr(), 0x1234_5678);
        // Signed and unsigned order differ for 0x80000000 versus 1.
        let (x, y) = (w4([0x8000_0000, 1, 2, 3]), w4([1, 1, 1, 1]));
        assert_eq!(vr_op(&mut c, "vcmpgtsw", x, y, 0, 0), w4([0, 0, !0, !0]));
        assert_eq!(vr_op(&mut c, "vcmpgtuw", x, y, 0, 0), w4([!0, 0, !0, !0]));
    }

    #[test]
    fn quadword_carries() {
        let mut c = cpu();
        assert_eq!(vr_op(&mut c, "vadduqm", u128::MAX, 2, 0, 0), 1);
        assert_eq!(vr_op(&mut c, "vaddcuq", u128::MAX, 2, 0, 0), 1);
        // vaddeuqm adds the carry-in bit of VRC.
        assert_eq!(vr_op(&mut c, "vaddeuqm", 5, 6, 1, 0), 12);
        // 3 - 5 borrows: the carry is 0.
        assert_eq!(vr_op(&mut c, "vsubcuq", 3, 5, 0, 0), 0);
        assert_eq!(vr_op(&mut c, "vsubeuqm", 7, 5, 0, 0), 1);
    }
}
