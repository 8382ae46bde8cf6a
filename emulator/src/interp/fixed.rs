//! Fixed-point arithmetic, compare, logical, rotate/shift and trap instructions.

use super::{Cpu, Exec, record_cr0};
use crate::cpu::{Exception, ProgramKind};
use crate::isa::{Insn, InsnFlags, Op};

// --- shared routines ---

/// Writes RT/RA and sets CR0 when the instruction's Rc bit is set.
#[inline(always)]
fn set_rc(c: &mut Cpu, i: Insn, r: u32, v: u64) {
    c.st.gpr[r as usize] = v;
    if i.rc() {
        record_cr0(&mut c.st, v);
    }
}

/// `a + b + cin` into RT, with what the table row of `op` says: XER[CA] per the mode
/// (`sets_ca`), OE and Rc (the XO forms; in the D forms bit 31 is part of SI).
#[inline(always)]
fn add_ext(c: &mut Cpu, op: Op, i: Insn, a: u64, b: u64, cin: u64) -> u64 {
    let r = a.wrapping_add(b).wrapping_add(cin);
    let sf = c.st.sf();
    let f = op.info().flags;
    if f.contains(InsnFlags::SETS_CA) {
        c.st.ca = if sf {
            ((a as u128 + b as u128 + cin as u128) >> 64) as u8
        } else {
            (((a & 0xffff_ffff) + (b & 0xffff_ffff) + cin) >> 32) as u8
        };
    }
    if f.contains(InsnFlags::OE) && i.oe() {
        let bit = if sf { 63 } else { 31 };
        set_ov(c, ((a ^ r) & (b ^ r)) >> bit & 1 != 0);
    }
    c.st.gpr[i.rt() as usize] = r;
    if f.contains(InsnFlags::RC) && i.rc() {
        record_cr0(&mut c.st, r);
    }
    r
}

#[inline(always)]
fn set_ov(c: &mut Cpu, ov: bool) {
    c.st.ov = ov as u8;
    c.st.so |= ov as u8;
}

#[inline(always)]
fn ra(c: &Cpu, i: Insn) -> u64 {
    c.st.gpr[i.ra() as usize]
}
#[inline(always)]
fn rb(c: &Cpu, i: Insn) -> u64 {
    c.st.gpr[i.rb() as usize]
}
#[inline(always)]
fn rs(c: &Cpu, i: Insn) -> u64 {
    c.st.gpr[i.rs() as usize]
}

// --- add / subtract ---

pub(super) fn addi(c: &mut Cpu, i: Insn) -> Exec {
    c.st.gpr[i.rt() as usize] = c.ra0(i.ra()).wrapping_add(i.si() as u64);
    Ok(())
}
pub(super) fn addis(c: &mut Cpu, i: Insn) -> Exec {
    c.st.gpr[i.rt() as usize] = c.ra0(i.ra()).wrapping_add((i.si() << 16) as u64);
    Ok(())
}
pub(super) fn addic(c: &mut Cpu, i: Insn) -> Exec {
    add_ext(c, Op::Addic, i, ra(c, i), i.si() as u64, 0);
    Ok(())
}
/// `addic.` records by its opcode: the D form has no Rc bit.
pub(super) fn addic_(c: &mut Cpu, i: Insn) -> Exec {
    let r = add_ext(c, Op::AddicDot, i, ra(c, i), i.si() as u64, 0);
    record_cr0(&mut c.st, r);
    Ok(())
}
pub(super) fn subfic(c: &mut Cpu, i: Insn) -> Exec {
    add_ext(c, Op::Subfic, i, !ra(c, i), i.si() as u64, 1);
    Ok(())
}

/// The XO-form adds: `name: Op => (a, b, carry in)`.
macro_rules! adds {
    ($($name:ident: $op:ident => |$c:ident, $i:ident| ($a:expr, $b:expr, $cin:expr);)*) => {
        $(pub(super) fn $name($c: &mut Cpu, $i: Insn) -> Exec {
            let (a, b, cin) = ($a, $b, $cin);
            add_ext($c, Op::$op, $i, a, b, cin);
            Ok(())
        })*
    };
}

adds! {
    add: Add => |c, i| (ra(c, i), rb(c, i), 0);
    addc: Addc => |c, i| (ra(c, i), rb(c, i), 0);
    adde: Adde => |c, i| (ra(c, i), rb(c, i), c.st.ca as u64);
    addme: Addme => |c, i| (ra(c, i), u64::MAX, c.st.ca as u64);
    addze: Addze => |c, i| (ra(c, i), 0, c.st.ca as u64);
    subf: Subf => |c, i| (!ra(c, i), rb(c, i), 1);
    subfc: Subfc => |c, i| (!ra(c, i), rb(c, i), 1);
    subfe: Subfe => |c, i| (!ra(c, i), rb(c, i), c.st.ca as u64);
    subfme: Subfme => |c, i| (!ra(c, i), u64::MAX, c.st.ca as u64);
    subfze: Subfze => |c, i| (!ra(c, i), 0, c.st.ca as u64);
    neg: Neg => |c, i| (!ra(c, i), 0, 1);
}

// --- multiply / divide ---

pub(super) fn mulli(c: &mut Cpu, i: Insn) -> Exec {
    c.st.gpr[i.rt() as usize] = ra(c, i).wrapping_mul(i.si() as u64);
    Ok(())
}

pub(super) fn mullw(c: &mut Cpu, i: Insn) -> Exec {
    let p = (ra(c, i) as i32 as i64) * (rb(c, i) as i32 as i64);
    if i.oe() {
        set_ov(c, p != p as i32 as i64);
    }
    set_rc(c, i, i.rt(), p as u64);
    Ok(())
}

pub(super) fn mulld(c: &mut Cpu, i: Insn) -> Exec {
    let p = (ra(c, i) as i64 as i128) * (rb(c, i) as i64 as i128);
    if i.oe() {
        set_ov(c, p != p as i64 as i128);
    }
    set_rc(c, i, i.rt(), p as u64);
    Ok(())
}

// Word results leave the high half of RT undefined in 64-bit mode; like QEMU (our reference)
// we zero-extend them (divwe: sign-extend) and set CR0 from the whole register.

pub(super) fn mulhw(c: &mut Cpu, i: Insn) -> Exec {
    let p = (ra(c, i) as i32 as i64) * (rb(c, i) as i32 as i64);
    set_rc(c, i, i.rt(), (p >> 32) as u32 as u64);
    Ok(())
}

pub(super) fn mulhwu(c: &mut Cpu, i: Insn) -> Exec {
    let p = (ra(c, i) & 0xffff_ffff) * (rb(c, i) & 0xffff_ffff);
    set_rc(c, i, i.rt(), p >> 32);
    Ok(())
}

pub(super) fn mulhd(c: &mut Cpu, i: Insn) -> Exec {
    let p = (ra(c, i) as i64 as i128) * (rb(c, i) as i64 as i128);
    set_rc(c, i, i.rt(), (p >> 64) as u64);
    Ok(())
}

pub(super) fn mulhdu(c: &mut Cpu, i: Insn) -> Exec {
    let p = ra(c, i) as u128 * rb(c, i) as u128;
    set_rc(c, i, i.rt(), (p >> 64) as u64);
    Ok(())
}

/// Shared by all divides: `q` is `None` for an undefined quotient (divide by zero, overflow),
/// which sets OV when OE is set and leaves `undefined` in RT: what QEMU leaves there (the
/// dividend for divw[u]/divd[u], which it divides by one instead; zero for the extended forms).
#[inline(always)]
fn div_result(c: &mut Cpu, i: Insn, q: Option<u64>, undefined: u64) -> Exec {
    if i.oe() {
        set_ov(c, q.is_none());
    }
    set_rc(c, i, i.rt(), q.unwrap_or(undefined));
    Ok(())
}

pub(super) fn divw(c: &mut Cpu, i: Insn) -> Exec {
    let (a, b) = (ra(c, i) as i32, rb(c, i) as i32);
    div_result(
        c,
        i,
        a.checked_div(b).map(|q| q as u32 as u64),
        a as u32 as u64,
    )
}
pub(super) fn divwu(c: &mut Cpu, i: Insn) -> Exec {
    let (a, b) = (ra(c, i) as u32, rb(c, i) as u32);
    div_result(c, i, a.checked_div(b).map(|q| q as u64), a as u64)
}
pub(super) fn divd(c: &mut Cpu, i: Insn) -> Exec {
    let (a, b) = (ra(c, i) as i64, rb(c, i) as i64);
    div_result(c, i, a.checked_div(b).map(|q| q as u64), a as u64)
}
pub(super) fn divdu(c: &mut Cpu, i: Insn) -> Exec {
    let a = ra(c, i);
    div_result(c, i, a.checked_div(rb(c, i)), a)
}
pub(super) fn divwe(c: &mut Cpu, i: Insn) -> Exec {
    let a = ((ra(c, i) as u32 as u64) << 32) as i64;
    let b = rb(c, i) as i32 as i64;
    let q = a.checked_div(b).filter(|q| *q == *q as i32 as i64);
    div_result(c, i, q.map(|q| q as u64), 0)
}
pub(super) fn divweu(c: &mut Cpu, i: Insn) -> Exec {
    let a = (ra(c, i) as u32 as u64) << 32;
    let b = rb(c, i) as u32 as u64;
    let q = a.checked_div(b).filter(|q| *q <= u32::MAX as u64);
    div_result(c, i, q, 0)
}
pub(super) fn divde(c: &mut Cpu, i: Insn) -> Exec {
    let a = (ra(c, i) as i64 as i128) << 64;
    let b = rb(c, i) as i64 as i128;
    let q = a.checked_div(b).filter(|q| *q == *q as i64 as i128);
    div_result(c, i, q.map(|q| q as u64), 0)
}
pub(super) fn divdeu(c: &mut Cpu, i: Insn) -> Exec {
    let a = (ra(c, i) as u128) << 64;
    let b = rb(c, i) as u128;
    let q = a.checked_div(b).filter(|q| *q <= u64::MAX as u128);
    div_result(c, i, q.map(|q| q as u64), 0)
}

// --- compare ---

#[inline(always)]
fn compare(c: &mut Cpu, bf: u32, lt: bool, gt: bool) {
    let v = if lt {
        8
    } else if gt {
        4
    } else {
        2
    };
    c.st.set_crf(bf, v | c.st.so as u32);
}

#[inline(always)]
fn cmp_signed(c: &mut Cpu, i: Insn, b: i64) {
    let a = if i.l10() != 0 {
        ra(c, i) as i64
    } else {
        ra(c, i) as i32 as i64
    };
    let b = if i.l10() != 0 { b } else { b as i32 as i64 };
    compare(c, i.bf(), a < b, a > b);
}

#[inline(always)]
fn cmp_unsigned(c: &mut Cpu, i: Insn, b: u64) {
    let a = if i.l10() != 0 {
        ra(c, i)
    } else {
        ra(c, i) & 0xffff_ffff
    };
    let b = if i.l10() != 0 { b } else { b & 0xffff_ffff };
    compare(c, i.bf(), a < b, a > b);
}

pub(super) fn cmp(c: &mut Cpu, i: Insn) -> Exec {
    cmp_signed(c, i, rb(c, i) as i64);
    Ok(())
}
pub(super) fn cmpi(c: &mut Cpu, i: Insn) -> Exec {
    cmp_signed(c, i, i.si());
    Ok(())
}
pub(super) fn cmpl(c: &mut Cpu, i: Insn) -> Exec {
    cmp_unsigned(c, i, rb(c, i));
    Ok(())
}
pub(super) fn cmpli(c: &mut Cpu, i: Insn) -> Exec {
    cmp_unsigned(c, i, i.ui());
    Ok(())
}

// --- trap ---

#[inline(always)]
fn trap(to: u32, a: i64, b: i64) -> Exec {
    let hit = (to & 16 != 0 && a < b)
        || (to & 8 != 0 && a > b)
        || (to & 4 != 0 && a == b)
        || (to & 2 != 0 && (a as u64) < (b as u64))
        || (to & 1 != 0 && (a as u64) > (b as u64));
    if hit {
        Err(Exception::Program(ProgramKind::Trap))
    } else {
        Ok(())
    }
}

// Word traps compare the low words sign-extended, which keeps their unsigned order too.
pub(super) fn tw(c: &mut Cpu, i: Insn) -> Exec {
    trap(i.rt(), ra(c, i) as i32 as i64, rb(c, i) as i32 as i64)
}
pub(super) fn twi(c: &mut Cpu, i: Insn) -> Exec {
    trap(i.rt(), ra(c, i) as i32 as i64, i.si() as i32 as i64)
}
pub(super) fn td(c: &mut Cpu, i: Insn) -> Exec {
    trap(i.rt(), ra(c, i) as i64, rb(c, i) as i64)
}
pub(super) fn tdi(c: &mut Cpu, i: Insn) -> Exec {
    trap(i.rt(), ra(c, i) as i64, i.si())
}

// --- logical ---

macro_rules! logical_x {
    ($($name:ident => |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let ($a, $b) = (rs(c, i), rb(c, i));
            set_rc(c, i, i.ra(), $e);
            Ok(())
        })*
    };
}

logical_x! {
    and => |a, b| a & b;
    andc => |a, b| a & !b;
    or => |a, b| a | b;
    orc => |a, b| a | !b;
    xor => |a, b| a ^ b;
    nor => |a, b| !(a | b);
    nand => |a, b| !(a & b);
    eqv => |a, b| !(a ^ b);
    slw => |a, b| if b & 0x20 != 0 { 0 } else { ((a as u32 as u64) << (b & 0x1f)) & 0xffff_ffff };
    srw => |a, b| if b & 0x20 != 0 { 0 } else { (a as u32 as u64) >> (b & 0x1f) };
    sld => |a, b| if b & 0x40 != 0 { 0 } else { a << (b & 0x3f) };
    srd => |a, b| if b & 0x40 != 0 { 0 } else { a >> (b & 0x3f) };
}

macro_rules! logical_imm {
    ($($name:ident => |$a:ident, $u:ident| $e:expr, $rc:literal;)*) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let ($a, $u) = (rs(c, i), i.ui());
            let v = $e;
            c.st.gpr[i.ra() as usize] = v;
            if $rc {
                record_cr0(&mut c.st, v);
            }
            Ok(())
        })*
    };
}

logical_imm! {
    ori => |a, u| a | u, false;
    oris => |a, u| a | (u << 16), false;
    xori => |a, u| a ^ u, false;
    xoris => |a, u| a ^ (u << 16), false;
    andi_ => |a, u| a & u, true;
    andis_ => |a, u| a & (u << 16), true;
}

macro_rules! unary_x {
    ($($name:ident => |$a:ident| $e:expr;)*) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let $a = rs(c, i);
            set_rc(c, i, i.ra(), $e);
            Ok(())
        })*
    };
}

unary_x! {
    cntlzw => |a| (a as u32).leading_zeros() as u64;
    cntlzd => |a| a.leading_zeros() as u64;
    extsb => |a| a as i8 as i64 as u64;
    extsh => |a| a as i16 as i64 as u64;
    extsw => |a| a as i32 as i64 as u64;
}

/// Popcount, byte-wise parity and the like ignore Rc (the bit is reserved).
macro_rules! unary_norc {
    ($($name:ident => |$a:ident| $e:expr;)*) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let $a = rs(c, i);
            c.st.gpr[i.ra() as usize] = $e;
            Ok(())
        })*
    };
}

unary_norc! {
    popcntb => |a| lanes(a, 8, |x| x.count_ones() as u64);
    popcntw => |a| lanes(a, 32, |x| x.count_ones() as u64);
    popcntd => |a| a.count_ones() as u64;
    prtyw => |a| lanes(a, 32, |x| (x & 0x0101_0101).count_ones() as u64 & 1);
    prtyd => |a| (a & 0x0101_0101_0101_0101).count_ones() as u64 & 1;
}

/// Applies `f` to each `bits`-wide lane of `a`.
#[inline(always)]
fn lanes(a: u64, bits: u32, f: impl Fn(u64) -> u64) -> u64 {
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    (0..64 / bits).fold(0, |acc, k| {
        acc | (f((a >> (k * bits)) & mask) << (k * bits))
    })
}

pub(super) fn cmpb(c: &mut Cpu, i: Insn) -> Exec {
    let (a, b) = (rs(c, i), rb(c, i));
    c.st.gpr[i.ra() as usize] = lanes(a ^ b, 8, |x| if x == 0 { 0xff } else { 0 });
    Ok(())
}

pub(super) fn bpermd(c: &mut Cpu, i: Insn) -> Exec {
    let (s, b) = (rs(c, i), rb(c, i));
    let mut r = 0;
    for k in 0..8 {
        let index = (s >> (56 - 8 * k)) & 0xff;
        let bit = if index < 64 {
            (b >> (63 - index)) & 1
        } else {
            0
        };
        r |= bit << (7 - k);
    }
    c.st.gpr[i.ra() as usize] = r;
    Ok(())
}

// --- decimal assist (BCD) ---

/// `addg6s`: for each decimal digit (nibble) of RA + RB without a carry out of the sum of
/// it and the digits below it, a 6 in that digit of RT (what a BCD add then subtracts).
pub(super) fn addg6s(c: &mut Cpu, i: Insn) -> Exec {
    let (a, b) = (ra(c, i) as u128, rb(c, i) as u128);
    let mut r = 0u64;
    for k in 0..16 {
        let bits = 4 * (k + 1);
        let low = (1u128 << bits) - 1;
        if ((a & low) + (b & low)) >> bits == 0 {
            r |= 6 << (4 * k);
        }
    }
    c.st.gpr[i.rt() as usize] = r;
    Ok(())
}

/// `cdtbcd`: in each word of RS, the two declets of the low 20 bits to six BCD digits.
pub(super) fn cdtbcd(c: &mut Cpu, i: Insn) -> Exec {
    let word = |w: u64| dpd_to_bcd((w >> 10) & 0x3ff) << 12 | dpd_to_bcd(w & 0x3ff);
    let s = rs(c, i);
    c.st.gpr[i.ra() as usize] = word(s >> 32) << 32 | word(s & 0xffff_ffff);
    Ok(())
}

/// `cbcdtd`: in each word of RS, the six BCD digits of the low 24 bits to two declets.
pub(super) fn cbcdtd(c: &mut Cpu, i: Insn) -> Exec {
    let word = |w: u64| bcd_to_dpd((w >> 12) & 0xfff) << 10 | bcd_to_dpd(w & 0xfff);
    let s = rs(c, i);
    c.st.gpr[i.ra() as usize] = word(s >> 32) << 32 | word(s & 0xffff_ffff);
    Ok(())
}

/// Three BCD digits from a declet (bits `pqr stu v wxy`), by the densely-packed-decimal
/// decoding of IEEE 754-2008: `v` says whether all three digits are small (0-7); otherwise
/// `wx` (and `st` when both are set) say which digits are large (8 or 9), each of those
/// keeping only its low bit and lending its other bit positions to the small ones.
fn dpd_to_bcd(d: u64) -> u64 {
    let bit = |k: u32| (d >> k) & 1;
    let (pqr, stu, wxy) = (d >> 7, (d >> 4) & 7, d & 7);
    let (pq, st) = (d >> 8, (d >> 5) & 3);
    let (r, u, y) = (bit(7), bit(4), bit(0));
    let large = |low: u64| 8 | low;
    let (d2, d1, d0) = if bit(3) == 0 {
        (pqr, stu, wxy)
    } else {
        match (d >> 1) & 3 {
            0b00 => (pqr, stu, large(y)),
            0b01 => (pqr, large(u), st << 1 | y),
            0b10 => (large(r), stu, pq << 1 | y),
            _ => match st {
                0b00 => (large(r), large(u), pq << 1 | y),
                0b01 => (large(r), pq << 1 | u, large(y)),
                0b10 => (pqr, large(u), large(y)),
                _ => (large(r), large(u), large(y)),
            },
        }
    };
    d2 << 8 | d1 << 4 | d0
}

/// A declet from three BCD digits, the inverse of [`dpd_to_bcd`]. A digit's top bit says
/// whether it is large; a large digit contributes only its low bit, so the middle bits of a
/// digit over 9 (not BCD; the ISA leaves the result undefined) are ignored.
fn bcd_to_dpd(b: u64) -> u64 {
    let digit = |k: u32| (b >> (4 * k)) & 0xf;
    let (d2, d1, d0) = (digit(2), digit(1), digit(0));
    let (a, e, i) = (d2 >> 3, d1 >> 3, d0 >> 3);
    // Low three bits of each digit, and the low bit alone.
    let (bcd, fgh, jkm) = (d2 & 7, d1 & 7, d0 & 7);
    let (d, h, m) = (d2 & 1, d1 & 1, d0 & 1);
    let (jk, fg) = (jkm >> 1, fgh >> 1);
    // (pqr, stu, wxy) with v = 1 unless all three digits are small.
    let (pqr, stu, v, wxy) = match (a, e, i) {
        (0, 0, 0) => (bcd, fgh, 0, jkm),
        (0, 0, 1) => (bcd, fgh, 1, m),
        (0, 1, 0) => (bcd, jk << 1 | h, 1, 0b010 | m),
        (0, 1, 1) => (bcd, 0b100 | h, 1, 0b110 | m),
        (1, 0, 0) => (jk << 1 | d, fgh, 1, 0b100 | m),
        (1, 0, 1) => (fg << 1 | d, 0b010 | h, 1, 0b110 | m),
        (1, 1, 0) => (jk << 1 | d, h, 1, 0b110 | m),
        _ => (d, 0b110 | h, 1, 0b110 | m),
    };
    pqr << 7 | stu << 4 | v << 3 | wxy
}

pub(super) fn isel(c: &mut Cpu, i: Insn) -> Exec {
    let v = if c.st.cr_bit(i.frc()) {
        c.ra0(i.ra())
    } else {
        rb(c, i)
    };
    c.st.gpr[i.rt() as usize] = v;
    Ok(())
}

// --- rotate and shift ---

/// MASK(mb, me) of the ISA (IBM bit numbering; wraps when mb > me).
#[inline(always)]
pub(crate) fn mask64(mb: u32, me: u32) -> u64 {
    let a = u64::MAX >> mb;
    let b = u64::MAX << (63 - me);
    if mb <= me { a & b } else { a | b }
}

/// ROTL32: rotate the low word, replicated into both halves.
#[inline(always)]
fn rotl32(x: u64, n: u32) -> u64 {
    let w = x & 0xffff_ffff;
    (w | (w << 32)).rotate_left(n)
}

pub(super) fn rlwinm(c: &mut Cpu, i: Insn) -> Exec {
    let v = rotl32(rs(c, i), i.sh()) & mask64(i.mb() + 32, i.me() + 32);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rlwnm(c: &mut Cpu, i: Insn) -> Exec {
    let v = rotl32(rs(c, i), (rb(c, i) & 0x1f) as u32) & mask64(i.mb() + 32, i.me() + 32);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rlwimi(c: &mut Cpu, i: Insn) -> Exec {
    let m = mask64(i.mb() + 32, i.me() + 32);
    let v = (rotl32(rs(c, i), i.sh()) & m) | (ra(c, i) & !m);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldicl(c: &mut Cpu, i: Insn) -> Exec {
    let v = rs(c, i).rotate_left(i.sh6()) & mask64(i.mb6(), 63);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldicr(c: &mut Cpu, i: Insn) -> Exec {
    let v = rs(c, i).rotate_left(i.sh6()) & mask64(0, i.mb6());
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldic(c: &mut Cpu, i: Insn) -> Exec {
    let v = rs(c, i).rotate_left(i.sh6()) & mask64(i.mb6(), 63 - i.sh6());
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldimi(c: &mut Cpu, i: Insn) -> Exec {
    let m = mask64(i.mb6(), 63 - i.sh6());
    let v = (rs(c, i).rotate_left(i.sh6()) & m) | (ra(c, i) & !m);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldcl(c: &mut Cpu, i: Insn) -> Exec {
    let v = rs(c, i).rotate_left((rb(c, i) & 0x3f) as u32) & mask64(i.mb6(), 63);
    set_rc(c, i, i.ra(), v);
    Ok(())
}
pub(super) fn rldcr(c: &mut Cpu, i: Insn) -> Exec {
    let v = rs(c, i).rotate_left((rb(c, i) & 0x3f) as u32) & mask64(0, i.mb6());
    set_rc(c, i, i.ra(), v);
    Ok(())
}

/// Algebraic right shift of a `bits`-wide value by `n` (already range-checked by the
/// caller's field width): sign-extended result, CA = negative and ones shifted out.
#[inline(always)]
fn sra(c: &mut Cpu, i: Insn, v: i64, n: u32, bits: u32) -> Exec {
    let (r, lost) = if n >= bits {
        (if v < 0 { -1 } else { 0 }, v != 0)
    } else {
        (v >> n, n > 0 && (v as u64) << (64 - n) != 0)
    };
    c.st.ca = (v < 0 && lost) as u8;
    set_rc(c, i, i.ra(), r as u64);
    Ok(())
}

pub(super) fn sraw(c: &mut Cpu, i: Insn) -> Exec {
    sra(c, i, rs(c, i) as i32 as i64, (rb(c, i) & 0x3f) as u32, 32)
}
pub(super) fn srawi(c: &mut Cpu, i: Insn) -> Exec {
    sra(c, i, rs(c, i) as i32 as i64, i.sh(), 32)
}
pub(super) fn srad(c: &mut Cpu, i: Insn) -> Exec {
    sra(c, i, rs(c, i) as i64, (rb(c, i) & 0x7f) as u32, 64)
}
pub(super) fn sradi(c: &mut Cpu, i: Insn) -> Exec {
    sra(c, i, rs(c, i) as i64, i.sh6(), 64)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{cpu, run};
    use super::*;

    #[test]
    fn declets_and_bcd_digits_convert_both_ways() {
        let mut declets = std::collections::BTreeSet::new();
        for n in 0..1000u64 {
            let bcd = (n / 100) << 8 | (n / 10 % 10) << 4 | (n % 10);
            let dpd = bcd_to_dpd(bcd);
            assert!(dpd < 1024);
            assert_eq!(dpd_to_bcd(dpd), bcd, "{n}");
            declets.insert(dpd);
        }
        assert_eq!(declets.len(), 1000);
        // Small digits keep their bits; 999 is 0x0ff (IEEE 754-2008's example encodings).
        assert_eq!(bcd_to_dpd(0x079), 0x079);
        assert_eq!(bcd_to_dpd(0x999), 0x0ff);
        // A non-canonical declet (one of the 24) still decodes: 999.
        assert_eq!(dpd_to_bcd(0x3ff), 0x999);
    }

    #[test]
    fn decimal_assist_instructions() {
        let mut c = cpu();
        c.st.gpr[4] = 0x0000_0000_0000_0009;
        c.st.gpr[5] = 0x0000_0000_0000_0007;
        run(&mut c, &[0x7c64_2894]); // addg6s r3,r4,r5
        assert_eq!(c.st.gpr[3], 0x6666_6666_6666_6660, "the low digit carries");
        // Declets 0x0ff and 0x079 (999 and 079) in both words; bits above them are ignored.
        c.st.gpr[4] = 0xfff3_fc79_0003_fc79;
        run(&mut c, &[0x7c83_0234]); // cdtbcd r3,r4
        assert_eq!(c.st.gpr[3], 0x0099_9079_0099_9079);
        run(&mut c, &[0x7c65_0274]); // cbcdtd r5,r3
        assert_eq!(c.st.gpr[5], 0x0003_fc79_0003_fc79);
    }

    #[test]
    fn masks() {
        assert_eq!(mask64(0, 63), u64::MAX);
        assert_eq!(mask64(32, 63), 0xffff_ffff);
        assert_eq!(mask64(63, 0), 0x8000_0000_0000_0001);
        assert_eq!(mask64(60, 3), 0xf000_0000_0000_000f);
    }

    #[test]
    fn carries_and_overflow() {
        let mut c = cpu();
        c.st.gpr[4] = u64::MAX;
        c.st.gpr[5] = 1;
        c.st.gpr[6] = i64::MAX as u64;
        // addc r3,r4,r5 ; adde r7,r5,r5 (1+1+CA) ; addo. r8,r6,r5 (overflow)
        run(&mut c, &[0x7c64_2814, 0x7ce5_2914, 0x7d06_2e15]);
        assert_eq!(c.st.gpr[3], 0);
        assert_eq!(c.st.gpr[7], 3);
        assert_eq!(c.st.gpr[8], 1 << 63);
        assert_eq!((c.st.ov, c.st.so), (1, 1));
        assert_eq!(c.st.crf(0), 0b1001); // LT and SO
    }

    #[test]
    fn shifts_and_rotates() {
        let mut c = cpu();
        c.st.gpr[4] = 0xffff_ffff_8000_0001;
        c.st.gpr[5] = 4;
        // srawi r3,r4,4 ; rlwinm r6,r4,4,0,31 ; sradi r7,r4,63 ; slw r8,r4,r5
        run(
            &mut c,
            &[0x7c83_2670, 0x5486_203e, 0x7c87_fe76, 0x7c88_2830],
        );
        assert_eq!(c.st.gpr[3], 0xffff_ffff_f800_0000);
        assert_eq!(c.st.ca, 1);
        assert_eq!(c.st.gpr[6], 0x0000_0000_0000_0018);
        assert_eq!(c.st.gpr[7], u64::MAX);
        assert_eq!(c.st.gpr[8], 0x10);
    }

    #[test]
    fn compares_set_the_field() {
        let mut c = cpu();
        c.st.gpr[3] = u64::MAX;
        // cmpdi cr7,r3,0 ; cmpldi cr6,r3,0 ; cmpwi cr5,r3,-1
        run(&mut c, &[0x2fa3_0000, 0x2b23_0000, 0x2e83_ffff]);
        assert_eq!(c.st.crf(7), 8);
        assert_eq!(c.st.crf(6), 4);
        assert_eq!(c.st.crf(5), 2);
    }

    #[test]
    fn divide_by_zero_sets_ov() {
        let mut c = cpu();
        c.st.gpr[4] = 7;
        run(&mut c, &[0x7c64_2fd6]); // divwo r3,r4,r5 with r5 = 0
        assert_eq!((c.st.ov, c.st.so), (1, 1));
    }

    #[test]
    fn extended_divide_overflow_sets_ov() {
        let mut c = cpu();
        c.st.gpr[4] = 1;
        c.st.gpr[5] = 2;
        // divdeo r3,r4,r5: 2^64 / 2 does not fit in a signed doubleword.
        run(&mut c, &[0x7c64_2f52]);
        assert_eq!((c.st.gpr[3], c.st.ov), (0, 1));
        // divdeuo r3,r4,r5 fits in an unsigned one.
        run(&mut c, &[0x7c64_2f12]);
        assert_eq!((c.st.gpr[3], c.st.ov), (1 << 63, 0));
    }

    #[test]
    fn word_results_set_cr0_from_the_whole_register() {
        let mut c = cpu();
        c.st.gpr[4] = 0xffff_ffff;
        c.st.gpr[5] = 0xffff_ffff;
        run(&mut c, &[0x7c64_2817]); // mulhwu. r3,r4,r5
        assert_eq!(c.st.gpr[3], 0xffff_fffe);
        assert_eq!(c.st.crf(0), 4); // positive as a doubleword
    }
}
