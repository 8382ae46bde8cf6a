//! FPU instructions (opcodes 59 and 63). FPRs hold double-format values; single-precision
//! instructions round to single and store the result in double format.

use super::fpscr::{self, Flags, Report};
use super::ieee::{self, Env, IntFmt, Prec, Res};
use super::{conclude, fp_available};
use crate::interp::{Cpu, Exec};
use crate::isa::Insn;
use rustc_apfloat::Round;

const SIGN: u64 = 1 << 63;

#[inline]
fn env(c: &Cpu) -> Env {
    Env::from_fpscr(c.st.fpscr)
}

/// Stores an arithmetic result in FRT (unless an enabled exception suppresses it) and
/// reports it in FPRF, FR and FI.
fn arith(c: &mut Cpu, i: Insn, r: Res, prec: Prec) -> Exec {
    let written = !fpscr::suppresses(c.st.fpscr, r.f.exc);
    let bits = r.to_double(prec);
    if written {
        c.st.set_fpr(i.rt(), bits);
    }
    // QEMU classifies single results in double format (a single denormal is a double
    // normal).
    let e = fpscr::update(
        &mut c.st,
        r.f,
        written,
        Report::Full(fpscr::class_double(bits)),
    );
    conclude(c, e, i.rc())
}

macro_rules! binary {
    ($($name:ident => $op:ident, $prec:ident, $second:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            fp_available(c)?;
            let r = ieee::$op(c.st.fpr(i.ra()), c.st.fpr(i.$second()), Prec::$prec, env(c));
            arith(c, i, r, Prec::$prec)
        }
    )*};
}

binary! {
    fadd => add, Double, rb;   fadds => add, Single, rb;
    fsub => sub, Double, rb;   fsubs => sub, Single, rb;
    fmul => mul, Double, frc;  fmuls => mul, Single, frc;
    fdiv => div, Double, rb;   fdivs => div, Single, rb;
}

macro_rules! multiply_add {
    ($($name:ident => $prec:ident, $neg_b:literal, $neg_result:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            fp_available(c)?;
            let (a, b, cc) = (c.st.fpr(i.ra()), c.st.fpr(i.rb()), c.st.fpr(i.frc()));
            let r = ieee::fma(a, cc, b, $neg_b, $neg_result, Prec::$prec, env(c));
            arith(c, i, r, Prec::$prec)
        }
    )*};
}

multiply_add! {
    fmadd => Double, false, false;   fmadds => Single, false, false;
    fmsub => Double, true, false;    fmsubs => Single, true, false;
    fnmadd => Double, false, true;   fnmadds => Single, false, true;
    fnmsub => Double, true, true;    fnmsubs => Single, true, true;
}

pub(in crate::interp) fn fsqrt(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = ieee::sqrt(c.st.fpr(i.rb()), Prec::Double, env(c));
    arith(c, i, r, Prec::Double)
}

pub(in crate::interp) fn fsqrts(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = ieee::sqrt(c.st.fpr(i.rb()), Prec::Single, env(c));
    arith(c, i, r, Prec::Single)
}

/// Reciprocal estimate. QEMU (the oracle) computes the exact reciprocal, which is within
/// the ISA's bound; so do we, to keep results deterministic and comparable. (QEMU 7.2 also
/// returns ±0.5 for ±0; the ISA's ±infinity is kept here.)
pub(super) fn reciprocal(b: u64, prec: Prec, env: Env) -> Res {
    ieee::div(1f64.to_bits(), b, prec, env)
}

/// Reciprocal square root estimate: 1 / (sqrt rounded to double), as QEMU computes it.
pub(super) fn reciprocal_sqrt(b: u64, prec: Prec, env: Env) -> Res {
    let s = ieee::sqrt(b, Prec::Double, env);
    if ieee::is_nan(s.bits) {
        let mut r = ieee::round_to_prec(s.bits, prec, env);
        r.f.exc |= s.f.exc;
        return r;
    }
    let mut r = ieee::div(1f64.to_bits(), s.bits, prec, env);
    r.f.exc |= s.f.exc;
    r.f.fi |= s.f.fi;
    r
}

pub(in crate::interp) fn fre(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = reciprocal(c.st.fpr(i.rb()), Prec::Double, env(c));
    arith(c, i, r, Prec::Double)
}

pub(in crate::interp) fn fres(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = reciprocal(c.st.fpr(i.rb()), Prec::Single, env(c));
    arith(c, i, r, Prec::Single)
}

pub(in crate::interp) fn frsqrte(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = reciprocal_sqrt(c.st.fpr(i.rb()), Prec::Double, env(c));
    arith(c, i, r, Prec::Double)
}

pub(in crate::interp) fn frsqrtes(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = reciprocal_sqrt(c.st.fpr(i.rb()), Prec::Single, env(c));
    arith(c, i, r, Prec::Single)
}

pub(in crate::interp) fn frsp(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let r = ieee::round_to_prec(c.st.fpr(i.rb()), Prec::Single, env(c)).via_single();
    arith(c, i, r, Prec::Single)
}

/// `fri*`: round to an integral value in a fixed mode. Never inexact as far as the FPSCR
/// is concerned (XX untouched, FR and FI cleared).
fn round_integral(c: &mut Cpu, i: Insn, mode: Round) -> Exec {
    fp_available(c)?;
    let mut r = ieee::round_to_integral(c.st.fpr(i.rb()), Prec::Double, mode);
    r.f.fi = false;
    arith(c, i, r, Prec::Double)
}

pub(in crate::interp) fn frin(c: &mut Cpu, i: Insn) -> Exec {
    round_integral(c, i, Round::NearestTiesToAway)
}
pub(in crate::interp) fn friz(c: &mut Cpu, i: Insn) -> Exec {
    round_integral(c, i, Round::TowardZero)
}
pub(in crate::interp) fn frip(c: &mut Cpu, i: Insn) -> Exec {
    round_integral(c, i, Round::TowardPositive)
}
pub(in crate::interp) fn frim(c: &mut Cpu, i: Insn) -> Exec {
    round_integral(c, i, Round::TowardNegative)
}

/// `fcti*`: convert to an integer. FPRF is left alone, except that an invalid conversion
/// with VE=0 reports a QNaN class as if the result were a NaN.
fn to_integer(c: &mut Cpu, i: Insn, fmt: IntFmt, toward_zero: bool) -> Exec {
    fp_available(c)?;
    let mode = if toward_zero {
        Round::TowardZero
    } else {
        env(c).round
    };
    let r = ieee::to_int(c.st.fpr(i.rb()), fmt, mode);
    let written = !fpscr::suppresses(c.st.fpscr, r.f.exc);
    if written {
        c.st.set_fpr(i.rt(), r.bits);
    }
    let report = if r.f.exc & fpscr::VXCVI != 0 {
        Report::Full(fpscr::class::QNAN)
    } else {
        Report::Rounding
    };
    let e = fpscr::update(&mut c.st, r.f, written, report);
    conclude(c, e, i.rc())
}

macro_rules! to_integer {
    ($($name:ident => $fmt:ident, $z:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            to_integer(c, i, IntFmt::$fmt, $z)
        }
    )*};
}

to_integer! {
    fctiw => I32, false;   fctiwz => I32, true;
    fctiwu => U32, false;  fctiwuz => U32, true;
    fctid => I64, false;   fctidz => I64, true;
    fctidu => U64, false;  fctiduz => U64, true;
}

/// `fcfid*`. QEMU (the oracle) sets FPRF only for `fcfid`. (It also interrupts for an
/// enabled inexact exception before storing FRT; the ISA stores it first, as here.)
fn from_integer(c: &mut Cpu, i: Insn, signed: bool, prec: Prec, sets_fprf: bool) -> Exec {
    fp_available(c)?;
    let r = ieee::from_int(c.st.fpr(i.rb()), signed, prec, env(c));
    let bits = r.to_double(prec);
    c.st.set_fpr(i.rt(), bits);
    let report = if sets_fprf {
        Report::Full(fpscr::class_double(bits))
    } else {
        Report::Rounding
    };
    let e = fpscr::update(&mut c.st, r.f, true, report);
    conclude(c, e, i.rc())
}

pub(in crate::interp) fn fcfid(c: &mut Cpu, i: Insn) -> Exec {
    from_integer(c, i, true, Prec::Double, true)
}
pub(in crate::interp) fn fcfidu(c: &mut Cpu, i: Insn) -> Exec {
    from_integer(c, i, false, Prec::Double, false)
}
pub(in crate::interp) fn fcfids(c: &mut Cpu, i: Insn) -> Exec {
    from_integer(c, i, true, Prec::Single, false)
}
pub(in crate::interp) fn fcfidus(c: &mut Cpu, i: Insn) -> Exec {
    from_integer(c, i, false, Prec::Single, false)
}

// --- moves and sign manipulation: no FPSCR change ---

fn set_and_record(c: &mut Cpu, i: Insn, v: u64) -> Exec {
    c.st.set_fpr(i.rt(), v);
    conclude(c, false, i.rc())
}

pub(in crate::interp) fn fmr(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = c.st.fpr(i.rb());
    set_and_record(c, i, v)
}
pub(in crate::interp) fn fneg(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = c.st.fpr(i.rb()) ^ SIGN;
    set_and_record(c, i, v)
}
pub(in crate::interp) fn fabs(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = c.st.fpr(i.rb()) & !SIGN;
    set_and_record(c, i, v)
}
pub(in crate::interp) fn fnabs(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = c.st.fpr(i.rb()) | SIGN;
    set_and_record(c, i, v)
}
pub(in crate::interp) fn fcpsgn(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = (c.st.fpr(i.ra()) & SIGN) | (c.st.fpr(i.rb()) & !SIGN);
    set_and_record(c, i, v)
}

/// `fsel`: FRC if FRA >= 0 (either zero counts), else FRB; a NaN selects FRB.
pub(in crate::interp) fn fsel(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let a = c.st.fpr(i.ra());
    let take_c = !ieee::is_nan(a) && (!ieee::is_neg(a) || ieee::is_zero(a));
    let v = if take_c {
        c.st.fpr(i.frc())
    } else {
        c.st.fpr(i.rb())
    };
    set_and_record(c, i, v)
}

pub(in crate::interp) fn fmrgew(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = (c.st.fpr(i.ra()) & 0xffff_ffff_0000_0000) | (c.st.fpr(i.rb()) >> 32);
    c.st.set_fpr(i.rt(), v);
    Ok(())
}

pub(in crate::interp) fn fmrgow(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = (c.st.fpr(i.ra()) << 32) | (c.st.fpr(i.rb()) & 0xffff_ffff);
    c.st.set_fpr(i.rt(), v);
    Ok(())
}

// --- compares and tests ---

/// LT/GT/EQ/UN of a comparison, as a CR field.
pub(super) fn compare_bits(a: u64, b: u64) -> u32 {
    if ieee::is_nan(a) || ieee::is_nan(b) {
        return 0b0001;
    }
    let (x, y) = (f64::from_bits(a), f64::from_bits(b));
    if x < y {
        0b1000
    } else if x > y {
        0b0100
    } else {
        0b0010
    }
}

/// `fcmpu`/`fcmpo` and their VSX twins: CR field and FPCC; a NaN raises VXSNAN (signalling)
/// and, for ordered compares, VXVC. The two families differ where QEMU (the oracle) does:
/// `fcmpo` raises VXVC even for an SNaN with VE=1 and then reports a QNaN class (C set),
/// and the FPU compares clear FI; the VSX compares raise VXVC for an SNaN only with VE=0
/// and leave C and FI alone.
pub(super) fn compare(c: &mut Cpu, bf: u32, a: u64, b: u64, ordered: bool, fpu: bool) -> Exec {
    let cc = compare_bits(a, b);
    c.st.set_crf(bf, cc);
    c.st.fpscr = (c.st.fpscr & !fpscr::FPCC) | ((cc as u64) << 12);
    let mut exc = 0;
    let snan = ieee::is_snan(a) || ieee::is_snan(b);
    if snan {
        exc |= fpscr::VXSNAN;
    }
    if ordered && cc == 1 && (!snan || fpu || c.st.fpscr & fpscr::VE == 0) {
        exc |= fpscr::VXVC;
        if fpu {
            c.st.fpscr |= fpscr::C;
        }
    }
    let old = c.st.fpscr;
    let e = fpscr::update(
        &mut c.st,
        Flags {
            exc,
            ..Flags::default()
        },
        false,
        Report::Exceptions,
    );
    // QEMU clears FI after the compare, unless an enabled VXSNAN interrupted it first.
    if fpu && !(snan && old & fpscr::VE != 0 && fpscr::interrupts(&c.st)) {
        c.st.fpscr &= !fpscr::FI;
    }
    conclude(c, e, false)
}

pub(in crate::interp) fn fcmpu(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let (a, b) = (c.st.fpr(i.ra()), c.st.fpr(i.rb()));
    compare(c, i.bf(), a, b, false, true)
}

pub(in crate::interp) fn fcmpo(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let (a, b) = (c.st.fpr(i.ra()), c.st.fpr(i.rb()));
    compare(c, i.bf(), a, b, true, true)
}

/// What the test instructions look at in an operand.
#[derive(Clone, Copy, Debug)]
pub(super) struct Parts {
    nan: bool,
    inf: bool,
    zero: bool,
    neg: bool,
    /// Zero or denormal.
    tiny: bool,
    /// Unbiased exponent field (denormals read as the minimum exponent - 1).
    exp: i32,
}

impl Parts {
    pub(super) fn double(x: u64) -> Self {
        let e = ((x >> 52) & 0x7ff) as i32;
        let f = x & ((1 << 52) - 1);
        Parts {
            nan: e == 0x7ff && f != 0,
            inf: e == 0x7ff && f == 0,
            zero: e == 0 && f == 0,
            neg: x >> 63 != 0,
            tiny: e == 0,
            exp: e - 1023,
        }
    }

    pub(super) fn single(x: u32) -> Self {
        let e = ((x >> 23) & 0xff) as i32;
        let f = x & 0x7f_ffff;
        Parts {
            nan: e == 0xff && f != 0,
            inf: e == 0xff && f == 0,
            zero: e == 0 && f == 0,
            neg: x >> 31 != 0,
            tiny: e == 0,
            exp: e - 127,
        }
    }
}

/// Exponent range and fraction width of the format the test instructions check.
#[derive(Clone, Copy)]
pub(super) struct Range {
    pub emin: i32,
    pub emax: i32,
    pub nbits: i32,
}

pub(super) const DOUBLE_RANGE: Range = Range {
    emin: -1022,
    emax: 1023,
    nbits: 52,
};
pub(super) const SINGLE_RANGE: Range = Range {
    emin: -126,
    emax: 127,
    nbits: 23,
};

/// FE and FG of `ftdiv`/`xstdivdp`: whether a software divide a/b needs the slow path.
pub(super) fn test_div(a: Parts, b: Parts, r: Range) -> (bool, bool) {
    if a.inf || b.inf || b.zero {
        return (true, true);
    }
    let fe = a.nan
        || b.nan
        || b.exp <= r.emin
        || b.exp >= r.emax - 2
        || (!a.zero
            && (a.exp - b.exp >= r.emax
                || a.exp - b.exp <= r.emin + 1
                || a.exp <= r.emin + r.nbits));
    (fe, b.tiny)
}

/// FE and FG of `ftsqrt`/`xstsqrtdp`.
pub(super) fn test_sqrt(b: Parts, r: Range) -> (bool, bool) {
    if b.inf || b.zero {
        return (true, true);
    }
    let fe = b.nan || b.neg || b.exp <= r.emin + r.nbits;
    (fe, b.tiny)
}

/// CR field of the test instructions: 0b1000 | FG | FE.
pub(super) fn test_bits(fe: bool, fg: bool) -> u32 {
    0b1000 | (fg as u32) << 2 | (fe as u32) << 1
}

pub(in crate::interp) fn ftdiv(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let (fe, fg) = test_div(
        Parts::double(c.st.fpr(i.ra())),
        Parts::double(c.st.fpr(i.rb())),
        DOUBLE_RANGE,
    );
    c.st.set_crf(i.bf(), test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn ftsqrt(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let (fe, fg) = test_sqrt(Parts::double(c.st.fpr(i.rb())), DOUBLE_RANGE);
    c.st.set_crf(i.bf(), test_bits(fe, fg));
    Ok(())
}

// --- FPSCR access ---

pub(in crate::interp) fn mffs(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let v = c.st.fpscr;
    set_and_record(c, i, v)
}

/// Writes `value` into the FPSCR bits in `mask` (FEX and VX are always recomputed), records
/// CR1, then interrupts if that leaves an enabled exception pending.
fn store_fpscr(c: &mut Cpu, i: Insn, value: u64, mask: u64) -> Exec {
    let mask = mask & fpscr::WRITABLE;
    let new = fpscr::with_summaries((c.st.fpscr & !mask) | (value & mask));
    c.st.fpscr = new;
    if i.rc() {
        fpscr::cr1(&mut c.st);
    }
    conclude(c, new & fpscr::FEX != 0, false)
}

/// Mask of 4-bit FPSCR field `field` (0-15; fields 8-15 are the low word).
fn field_mask(field: u32) -> u64 {
    0xf << (60 - 4 * field)
}

pub(in crate::interp) fn mtfsf(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let mask = if i.mtfsf_l() != 0 {
        u64::MAX
    } else {
        let base = 8 * (1 - i.w());
        (0..8)
            .filter(|k| i.flm() >> (7 - k) & 1 != 0)
            .map(|k| field_mask(base + k))
            .fold(0, |m, f| m | f)
    };
    let v = c.st.fpr(i.rb());
    store_fpscr(c, i, v, mask)
}

pub(in crate::interp) fn mtfsfi(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let field = i.bf() + 8 * (1 - i.w());
    let value = (i.u() as u64) << (60 - 4 * field);
    store_fpscr(c, i, value, field_mask(field))
}

pub(in crate::interp) fn mtfsb0(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let bit = 1u64 << (31 - i.rt());
    store_fpscr(c, i, 0, bit)
}

/// `mtfsb1`: NI cannot be set this way (QEMU implements IEEE mode only), and unlike the
/// arithmetic instructions setting an exception bit does not set FX.
pub(in crate::interp) fn mtfsb1(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let bit = 1u64 << (31 - i.rt());
    let bit = if bit == fpscr::NI { 0 } else { bit };
    store_fpscr(c, i, bit, bit)
}

/// `mcrfs`: copy an FPSCR field to a CR field and clear the exception bits copied.
pub(in crate::interp) fn mcrfs(c: &mut Cpu, i: Insn) -> Exec {
    fp_available(c)?;
    let field = i.bfa() + 8;
    let mask = field_mask(field);
    let v = ((c.st.fpscr & mask) >> (60 - 4 * field)) as u32;
    c.st.set_crf(i.bf(), v);
    let clear = mask & (fpscr::EXCEPTIONS | fpscr::FX);
    c.st.fpscr = fpscr::with_summaries(c.st.fpscr & !clear);
    Ok(())
}
