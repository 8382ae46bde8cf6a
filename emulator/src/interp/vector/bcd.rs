//! Decimal integer add and subtract (`bcdadd.`, `bcdsub.`).
//!
//! A signed packed decimal is 31 BCD digits and a sign code in the last nibble; digit n
//! (1 = least significant) is nibble n of the register. Sign codes 0xA, 0xC, 0xE, 0xF are
//! plus, 0xB and 0xD minus. The result always gets a preferred sign: 0xC (or 0xF with PS)
//! for plus, 0xD for minus. CR6 says LT/GT for the sign, EQ for a zero sum of like signs,
//! SO for a carry out of digit 31 (the result keeps the low 31 digits) or for invalid input
//! (every bit of the result set). These are the reference implementation's (QEMU's) CR6
//! rules, including its comparison of unlike-signed operands, which stops at the first
//! invalid digit from the top and then treats the operands as equal.

use super::{Cpu, Exec, vec_ok};
use crate::isa::Insn;

const LT: u32 = 8;
const GT: u32 = 4;
const EQ: u32 = 2;
const SO: u32 = 1;

/// +1, -1, or 0 for an invalid sign code.
fn sign(v: u128) -> i32 {
    match v & 0xf {
        0xa | 0xc | 0xe | 0xf => 1,
        0xb | 0xd => -1,
        _ => 0,
    }
}

#[inline(always)]
fn digit(v: u128, n: u32) -> u32 {
    ((v >> (4 * n)) & 0xf) as u32
}

/// Compares magnitudes from the top digit down; an invalid digit ends the scan as "equal".
fn compare_magnitudes(a: u128, b: u128) -> std::cmp::Ordering {
    for n in (1..=31).rev() {
        let (x, y) = (digit(a, n), digit(b, n));
        if x > 9 || y > 9 {
            break;
        }
        if x != y {
            return x.cmp(&y);
        }
    }
    std::cmp::Ordering::Equal
}

/// Digit-wise a + b (or a - b, with |a| > |b|) into digits 1-31 of `r`: (result, carry out,
/// invalid digit seen, all result digits zero).
fn add_digits(a: u128, b: u128, subtract: bool) -> (u128, bool, bool, bool) {
    let (mut r, mut carry, mut invalid, mut zero) = (0u128, 0i32, false, true);
    for n in 1..=31 {
        let (x, y) = (digit(a, n), digit(b, n));
        invalid |= x > 9 || y > 9;
        let mut d = if subtract {
            x as i32 - y as i32 + carry
        } else {
            x as i32 + y as i32 + carry
        };
        carry = 0;
        if subtract && d < 0 {
            d += 10;
            carry = -1;
        } else if !subtract && d > 9 {
            d -= 10;
            carry = 1;
        }
        zero &= d == 0;
        r |= ((d as u128) & 0xf) << (4 * n);
    }
    (r, carry != 0, invalid, zero)
}

/// The result and CR6 of a + b.
fn bcd_add(a: u128, b: u128, ps: bool) -> (u128, u32) {
    let (sa, sb) = (sign(a), sign(b));
    if sa == 0 || sb == 0 {
        return (u128::MAX, SO);
    }
    let preferred = |s: i32| -> u128 {
        if s < 0 {
            0xd
        } else if ps {
            0xf
        } else {
            0xc
        }
    };
    let cr_of = |s: i32| if s > 0 { GT } else { LT };
    let (digits, carry, invalid, zero, s) = if sa == sb {
        let (r, c, inv, z) = add_digits(a, b, false);
        (r, c, inv, z, sa)
    } else {
        match compare_magnitudes(a, b) {
            std::cmp::Ordering::Greater => {
                let (r, c, inv, _) = add_digits(a, b, true);
                (r, c, inv, false, sa)
            }
            std::cmp::Ordering::Less => {
                let (r, c, inv, _) = add_digits(b, a, true);
                (r, c, inv, false, sb)
            }
            std::cmp::Ordering::Equal => return (preferred(1), EQ),
        }
    };
    if invalid {
        return (u128::MAX, SO);
    }
    let cr = cr_of(s)
        | if carry {
            SO
        } else if zero {
            EQ
        } else {
            0
        };
    (digits | preferred(s), cr)
}

fn bcd(c: &mut Cpu, i: Insn, subtract: bool) -> Exec {
    vec_ok(c)?;
    let (a, mut b) = (c.st.vr(i.ra()), c.st.vr(i.rb()));
    if subtract {
        // Negate b by giving it the opposite sign code (an invalid one stays invalid).
        match sign(b) {
            1 => b = (b & !0xf) | 0xd,
            -1 => b = (b & !0xf) | 0xc,
            _ => {}
        }
    }
    let (r, cr) = bcd_add(a, b, i.ps() != 0);
    c.st.set_vr(i.rt(), r);
    c.st.set_crf(6, cr);
    Ok(())
}

pub(in crate::interp) fn bcdadd_(c: &mut Cpu, i: Insn) -> Exec {
    bcd(c, i, false)
}

pub(in crate::interp) fn bcdsub_(c: &mut Cpu, i: Insn) -> Exec {
    bcd(c, i, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_subtract() {
        // 123 + 989 = 1112; 123 - 989 = -866; with PS the plus sign is 0xF.
        assert_eq!(bcd_add(0x123c, 0x989c, false), (0x1112c, GT));
        assert_eq!(bcd_add(0x123c, 0x989d, true), (0x866d, LT));
        assert_eq!(bcd_add(0x123f, 0x989a, true), (0x1112f, GT));
        // Equal magnitudes of unlike sign give +0; like-signed zeros report EQ with the sign.
        assert_eq!(bcd_add(0x5c, 0x5d, false), (0xc, EQ));
        assert_eq!(bcd_add(0x0d, 0x0d, false), (0xd, LT | EQ));
        // Carry out of digit 31.
        let nines = (1..=31).fold(0xcu128, |v, n| v | 9 << (4 * n));
        assert_eq!(bcd_add(nines, 0x1c, false), (0xc, GT | SO));
        // Invalid sign or digit.
        assert_eq!(bcd_add(0x12, 0x1c, false), (u128::MAX, SO));
        assert_eq!(bcd_add(0x1ac, 0x1c, false), (u128::MAX, SO));
    }
}
