//! VMX permutes and formatting: permute, shift by octets, merge, splat, pack, unpack and
//! the bit-matrix permutes.

use super::{Cpu, Exec, Lane, count, get, put, vec_ok};
use super::{va_abc, vx_ab, vx_ab_sat, vx_b};
use crate::isa::Insn;

#[inline(always)]
fn bytes(v: u128) -> [u8; 16] {
    v.to_be_bytes()
}

va_abc! {
    // Each control byte picks one of the 32 bytes of a:b.
    vperm: |a, b, c| {
        let (a, b) = (bytes(a), bytes(b));
        u128::from_be_bytes(bytes(c).map(|k| if k & 16 == 0 { a[(k & 15) as usize] } else { b[(k & 15) as usize] }))
    };
    // Each control byte picks a byte of a (high nibble) and a byte of b (low nibble).
    vpermxor: |a, b, c| {
        let (a, b) = (bytes(a), bytes(b));
        u128::from_be_bytes(bytes(c).map(|k| a[(k >> 4) as usize] ^ b[(k & 15) as usize]))
    };
}

/// `vsldoi`: bytes SHB..SHB+15 of a:b.
pub(in crate::interp) fn vsldoi(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let (a, b) = (c.st.vr(i.ra()), c.st.vr(i.rb()));
    let sh = 8 * i.shb();
    c.st.set_vr(
        i.rt(),
        if sh == 0 {
            a
        } else {
            (a << sh) | (b >> (128 - sh))
        },
    );
    Ok(())
}

/// Interleaves elements `first..first + n/2` of a and b: a[first], b[first], a[first+1], …
#[inline(always)]
fn merge<T: Lane>(a: u128, b: u128, first: usize) -> u128 {
    let mut r = 0;
    for j in 0..count::<T>() / 2 {
        put(&mut r, 2 * j, get::<T>(a, first + j));
        put(&mut r, 2 * j + 1, get::<T>(b, first + j));
    }
    r
}

/// Interleaves the even (`odd` = false) or odd words of a and b.
#[inline(always)]
fn merge_words(a: u128, b: u128, odd: bool) -> u128 {
    let o = odd as usize;
    let mut r = 0;
    for j in 0..2 {
        put(&mut r, 2 * j, get::<u32>(a, 2 * j + o));
        put(&mut r, 2 * j + 1, get::<u32>(b, 2 * j + o));
    }
    r
}

vx_ab! {
    vmrghb: |a, b| merge::<u8>(a, b, 0);
    vmrghh: |a, b| merge::<u16>(a, b, 0);
    vmrghw: |a, b| merge::<u32>(a, b, 0);
    vmrglb: |a, b| merge::<u8>(a, b, 8);
    vmrglh: |a, b| merge::<u16>(a, b, 4);
    vmrglw: |a, b| merge::<u32>(a, b, 2);
    vmrgew: |a, b| merge_words(a, b, false);
    vmrgow: |a, b| merge_words(a, b, true);
}

/// Every element `x`.
#[inline(always)]
pub(crate) fn splat<T: Lane>(x: T) -> u128 {
    let mut r = 0;
    for k in 0..count::<T>() {
        put(&mut r, k, x);
    }
    r
}

/// `vsplt?`: UIM selects the element (only as many low bits as there are elements).
fn splat_element<T: Lane>(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let x: T = get(c.st.vr(i.rb()), i.uim() as usize & (count::<T>() - 1));
    c.st.set_vr(i.rt(), splat(x));
    Ok(())
}

/// `vspltis?`: the sign-extended 5-bit immediate in every element.
fn splat_immediate<T: Lane>(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    c.st.set_vr(i.rt(), splat(T::from_bits(i.simm() as i128 as u128)));
    Ok(())
}

pub(in crate::interp) fn vspltb(c: &mut Cpu, i: Insn) -> Exec {
    splat_element::<u8>(c, i)
}
pub(in crate::interp) fn vsplth(c: &mut Cpu, i: Insn) -> Exec {
    splat_element::<u16>(c, i)
}
pub(in crate::interp) fn vspltw(c: &mut Cpu, i: Insn) -> Exec {
    splat_element::<u32>(c, i)
}
pub(in crate::interp) fn vspltisb(c: &mut Cpu, i: Insn) -> Exec {
    splat_immediate::<u8>(c, i)
}
pub(in crate::interp) fn vspltish(c: &mut Cpu, i: Insn) -> Exec {
    splat_immediate::<u16>(c, i)
}
pub(in crate::interp) fn vspltisw(c: &mut Cpu, i: Insn) -> Exec {
    splat_immediate::<u32>(c, i)
}

// --- pack and unpack ---

/// Narrows every element of a, then every element of b, into one register.
#[inline(always)]
fn pack<S: Lane, D: Lane>(a: u128, b: u128, f: impl Fn(S) -> (D, bool)) -> (u128, bool) {
    let n = count::<S>();
    let mut r = 0;
    let mut any = false;
    for (half, v) in [a, b].into_iter().enumerate() {
        for k in 0..n {
            let (x, s) = f(get(v, k));
            put(&mut r, half * n + k, x);
            any |= s;
        }
    }
    (r, any)
}

/// Narrowing with saturation to the range of `D`, through an exact `i128`.
macro_rules! narrow {
    ($s:ty => $d:ty) => {
        |x: $s| {
            let w = x as i128;
            if w > <$d>::MAX as i128 {
                (<$d>::MAX, true)
            } else if w < <$d>::MIN as i128 {
                (<$d>::MIN, true)
            } else {
                (w as $d, false)
            }
        }
    };
}

/// A 32-bit pixel (bit 7, and the high 5 bits of each of the other bytes' colour) → 1:5:5:5.
#[inline(always)]
fn pack_pixel(w: u32) -> u16 {
    ((((w >> 24) & 1) << 15)
        | (((w >> 19) & 0x1f) << 10)
        | (((w >> 11) & 0x1f) << 5)
        | ((w >> 3) & 0x1f)) as u16
}

/// A 1:5:5:5 pixel → 32 bits: the sign-extended first bit, then the three 5-bit channels.
#[inline(always)]
fn unpack_pixel(h: u16) -> u32 {
    let h = h as u32;
    let a = if h & 0x8000 != 0 { 0xff } else { 0 };
    (a << 24) | (((h >> 10) & 0x1f) << 16) | (((h >> 5) & 0x1f) << 8) | (h & 0x1f)
}

vx_ab! {
    vpkuhum: |a, b| pack(a, b, |x: u16| (x as u8, false)).0;
    vpkuwum: |a, b| pack(a, b, |x: u32| (x as u16, false)).0;
    vpkudum: |a, b| pack(a, b, |x: u64| (x as u32, false)).0;
    vpkpx: |a, b| pack(a, b, |x: u32| (pack_pixel(x), false)).0;
}

vx_ab_sat! {
    vpkuhus: |a, b| pack(a, b, narrow!(u16 => u8));
    vpkuwus: |a, b| pack(a, b, narrow!(u32 => u16));
    vpkudus: |a, b| pack(a, b, narrow!(u64 => u32));
    vpkshus: |a, b| pack(a, b, narrow!(i16 => u8));
    vpkswus: |a, b| pack(a, b, narrow!(i32 => u16));
    vpksdus: |a, b| pack(a, b, narrow!(i64 => u32));
    vpkshss: |a, b| pack(a, b, narrow!(i16 => i8));
    vpkswss: |a, b| pack(a, b, narrow!(i32 => i16));
    vpksdss: |a, b| pack(a, b, narrow!(i64 => i32));
}

/// Widens elements `first..first + n/2` of `T` in b into elements of `W`.
#[inline(always)]
fn unpack<T: Lane, W: Lane>(b: u128, first: usize, f: impl Fn(T) -> W) -> u128 {
    let mut r = 0;
    for j in 0..count::<W>() {
        put(&mut r, j, f(get(b, first + j)));
    }
    r
}

vx_b! {
    vupkhsb: |b| unpack(b, 0, |x: i8| x as i16);
    vupklsb: |b| unpack(b, 8, |x: i8| x as i16);
    vupkhsh: |b| unpack(b, 0, |x: i16| x as i32);
    vupklsh: |b| unpack(b, 4, |x: i16| x as i32);
    vupkhsw: |b| unpack(b, 0, |x: i32| x as i64);
    vupklsw: |b| unpack(b, 2, |x: i32| x as i64);
    vupkhpx: |b| unpack(b, 0, unpack_pixel);
    vupklpx: |b| unpack(b, 4, unpack_pixel);
}

// --- bit-matrix permutes ---

/// Transposes the 8×8 bit matrix of a doubleword (byte j, bit k ↔ byte k, bit j).
#[inline(always)]
fn transpose8x8(x: u64) -> u64 {
    let mut r = 0;
    for j in 0..8 {
        for k in 0..8 {
            r |= ((x >> (63 - (8 * k + j))) & 1) << (63 - (8 * j + k));
        }
    }
    r
}

vx_b! {
    vgbbd: |b| ((transpose8x8((b >> 64) as u64) as u128) << 64) | transpose8x8(b as u64) as u128;
}

vx_ab! {
    // Each byte of b indexes a bit of a (0 = most significant; 128 and up give 0); the 16
    // bits form the low halfword of doubleword 0.
    vbpermq: |a, b| {
        let mut perm = 0u128;
        for (i, &k) in bytes(b).iter().enumerate() {
            let bit = if k < 128 { (a >> (127 - k)) & 1 } else { 0 };
            perm |= bit << (15 - i);
        }
        perm << 64
    };
}

#[cfg(test)]
mod tests {
    use super::super::VSCR_SAT;
    use super::super::testing::{vr_op, w4};
    use super::*;
    use crate::interp::test_util::cpu;

    const A: u128 = 0x0001_0203_0405_0607_0809_0a0b_0c0d_0e0f;
    const B: u128 = 0x1011_1213_1415_1617_1819_1a1b_1c1d_1e1f;

    #[test]
    fn permutes_pick_bytes_of_the_concatenation() {
        let mut c = cpu();
        // vperm: control bytes 0x1f, 0x00, 0x35 (= 0x15: bit 4 picks b), … reversed a:b.
        let ctl = 0x1f00_3510_0f01_2345_6789_abcd_ef10_0e1eu128;
        let want: Vec<u8> = ctl.to_be_bytes().iter().map(|&k| k & 31).collect();
        let r = vr_op(&mut c, "vperm", A, B, ctl, 0);
        assert_eq!(r.to_be_bytes().to_vec(), want);
        // vsldoi 3: bytes 3..18 of a:b.
        let r = vr_op(&mut c, "vsldoi", A, B, 0, 3 << 6);
        assert_eq!(r, 0x0304_0506_0708_090a_0b0c_0d0e_0f10_1112);
        // Merges interleave the high or low halves.
        assert_eq!(
            vr_op(&mut c, "vmrghw", A, B, 0, 0),
            w4([0x0001_0203, 0x1011_1213, 0x0405_0607, 0x1415_1617])
        );
        assert_eq!(
            vr_op(&mut c, "vmrglb", A, B, 0, 0),
            0x0818_0919_0a1a_0b1b_0c1c_0d1d_0e1e_0f1f
        );
        assert_eq!(
            vr_op(&mut c, "vmrgow", A, B, 0, 0),
            w4([0x0405_0607, 0x1415_1617, 0x0c0d_0e0f, 0x1c1d_1e1f])
        );
        // Splats: element 2 of b; the immediate -1 in every halfword.
        assert_eq!(
            vr_op(&mut c, "vspltw", 0, B, 0, 2 << 16),
            w4([0x1819_1a1b; 4])
        );
        assert_eq!(vr_op(&mut c, "vspltish", 0, 0, 0, 0x1f << 16), u128::MAX);
    }

    #[test]
    fn packs_saturate_and_unpacks_sign_extend() {
        let mut c = cpu();
        c.st.vscr = 0;
        // Halfwords 0x0100 (256) and 0x00ff (255) packed to unsigned bytes: 255, 255.
        let r = vr_op(&mut c, "vpkuhus", 0x0100_00ff << 96, 0, 0, 0);
        assert_eq!(r >> 112, 0xffff);
        assert_eq!(c.st.vscr & VSCR_SAT, VSCR_SAT);
        // The modulo pack truncates and leaves SAT alone.
        c.st.vscr = 0;
        assert_eq!(
            vr_op(&mut c, "vpkuhum", 0x0100_00ff << 96, 0, 0, 0) >> 112,
            0x00ff
        );
        assert_eq!(c.st.vscr, 0);
        // Signed words to signed halfwords: -40000 clamps to -32768.
        let r = vr_op(
            &mut c,
            "vpkswss",
            w4([(-40000i32) as u32, 5, 0, 0]),
            0,
            0,
            0,
        );
        assert_eq!(r >> 96, 0x8000_0005);
        // The high bytes of b sign-extended to halfwords.
        let r = vr_op(&mut c, "vupkhsb", 0, 0x80ff_017f << 96, 0, 0);
        assert_eq!(r >> 64, 0xff80_ffff_0001_007f);
    }

    #[test]
    fn pixels_round_trip() {
        for h in [0u16, 0x8000, 0x7fff, 0xffff, 0x1234, 0xa5a5] {
            assert_eq!(
                pack_pixel(unpack_pixel(h) << 3 | (unpack_pixel(h) & 0xff00_0000)),
                h,
                "{h:#x}"
            );
        }
    }

    #[test]
    fn transpose_is_an_involution_and_moves_bits() {
        assert_eq!(transpose8x8(0x8000_0000_0000_0000), 0x8000_0000_0000_0000);
        // Byte 0, bit 7 (the last of byte 0) → byte 7, bit 0.
        assert_eq!(transpose8x8(0x0100_0000_0000_0000), 0x0000_0000_0000_0080);
        for x in [0x0123_4567_89ab_cdefu64, u64::MAX, 0xff00_ff00_0f0f_3c3c] {
            assert_eq!(transpose8x8(transpose8x8(x)), x);
        }
    }
}
