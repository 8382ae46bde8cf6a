//! VSX floating point (opcode 60). Scalar forms (`xs…`) compute on doubleword 0, write
//! doubleword 1 as zero (as QEMU does; the ISA leaves it undefined) and report FPRF, FR and
//! FI like the FPU; vector forms (`xv…`) compute every element and only set exception
//! bits. Element numbering is big-endian: doubleword 0 and word 0 are the high ones.

use super::fpscr::{self, Flags, Report};
use super::ieee::{self, Env, IntFmt, Prec, Res};
use super::scalar::{self, DOUBLE_RANGE, Parts, SINGLE_RANGE};
use super::{conclude, vsx_available};
use crate::interp::loadstore::{double_to_single, single_to_double};
use crate::interp::{Cpu, Exec};
use crate::isa::Insn;
use rustc_apfloat::Round;

#[inline]
fn env(c: &Cpu) -> Env {
    Env::from_fpscr(c.st.fpscr)
}

#[inline]
fn dw(v: u128, k: usize) -> u64 {
    (v >> (64 * (1 - k))) as u64
}

#[inline]
fn word(v: u128, k: usize) -> u32 {
    (v >> (32 * (3 - k))) as u32
}

#[inline]
fn from_dws(d0: u64, d1: u64) -> u128 {
    ((d0 as u128) << 64) | d1 as u128
}

#[inline]
fn from_words(w: [u32; 4]) -> u128 {
    w.iter().fold(0u128, |v, &x| (v << 32) | x as u128)
}

/// Operands of a vector element: doubles as they are, singles widened exactly.
#[inline]
fn elems_dp(v: u128) -> [u64; 2] {
    [dw(v, 0), dw(v, 1)]
}

#[inline]
fn elems_sp(v: u128) -> [u64; 4] {
    [0, 1, 2, 3].map(|k| single_to_double(word(v, k)))
}

/// Doubleword 0 of XA, XB and XT.
fn xa0(c: &Cpu, i: Insn) -> u64 {
    dw(c.st.vsr[i.xa() as usize], 0)
}
fn xb0(c: &Cpu, i: Insn) -> u64 {
    dw(c.st.vsr[i.xb() as usize], 0)
}
fn xt0(c: &Cpu, i: Insn) -> u64 {
    dw(c.st.vsr[i.xt() as usize], 0)
}

/// Stores a scalar result (double format in doubleword 0) and reports it in the FPSCR.
fn scalar_result(c: &mut Cpu, i: Insn, r: Res, prec: Prec) -> Exec {
    // QEMU classifies single results in double format (a single denormal is a double
    // normal).
    let d = r.to_double(prec);
    store_scalar(
        c,
        i,
        r.f,
        from_dws(d, 0),
        Report::Full(fpscr::class_double(d)),
    )
}

fn store_scalar(c: &mut Cpu, i: Insn, f: Flags, v: u128, report: Report) -> Exec {
    let written = !fpscr::suppresses(c.st.fpscr, f.exc);
    if written {
        c.st.vsr[i.xt() as usize] = v;
    }
    let e = fpscr::update(&mut c.st, f, written, report);
    conclude(c, e, false)
}

/// Stores a vector result unless an element raised an enabled invalid-operation or
/// zero-divide exception. As in QEMU (the oracle), when that exception interrupts, the
/// elements after it do not count, and neither do the overflow, underflow and inexact
/// exceptions of the ones before it; and an overflow hides an underflow of another element.
fn vector_result(c: &mut Cpu, i: Insn, flags: &[Flags], v: u128) -> Exec {
    let fp = c.st.fpscr;
    let mut f = Flags::default();
    let mut stopped = false;
    for e in flags {
        f |= *e;
        if fpscr::interrupts(&c.st) && fpscr::suppresses(fp, e.exc) {
            stopped = true;
            break;
        }
    }
    if stopped {
        f.exc &= fpscr::VX_ALL | fpscr::ZX;
    } else if f.exc & fpscr::OX != 0 {
        f.exc &= !fpscr::UX;
    }
    let written = !fpscr::suppresses(fp, f.exc);
    if written {
        c.st.vsr[i.xt() as usize] = v;
    }
    let e = fpscr::update(&mut c.st, f, written, Report::Exceptions);
    conclude(c, e, false)
}

fn pack_dp(r: &[Res; 2]) -> u128 {
    from_dws(r[0].bits, r[1].bits)
}

fn pack_sp(r: &[Res; 4]) -> u128 {
    from_words(r.map(|x| x.bits as u32))
}

/// Single results of doubleword operands go to words 0 and 2, each copied to the word
/// after it (what POWER8 hardware does).
fn pack_sp_from_dp(r: &[Res; 2]) -> u128 {
    let (a, b) = (r[0].bits as u32, r[1].bits as u32);
    from_words([a, a, b, b])
}

fn vec_dp(c: &mut Cpu, i: Insn, r: [Res; 2]) -> Exec {
    vector_result(c, i, &r.map(|x| x.f), pack_dp(&r))
}

fn vec_sp(c: &mut Cpu, i: Insn, r: [Res; 4]) -> Exec {
    vector_result(c, i, &r.map(|x| x.f), pack_sp(&r))
}

// --- arithmetic ---

macro_rules! xs_binary {
    ($($name:ident => $op:ident, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            // QEMU rounds these like frsp (exponent adjustments wrap in single format).
            let r = ieee::$op(xa0(c, i), xb0(c, i), Prec::$prec, env(c)).via_single();
            scalar_result(c, i, r, Prec::$prec)
        }
    )*};
}

xs_binary! {
    xsadddp => add, Double;  xsaddsp => add, Single;
    xssubdp => sub, Double;  xssubsp => sub, Single;
    xsmuldp => mul, Double;  xsmulsp => mul, Single;
    xsdivdp => div, Double;  xsdivsp => div, Single;
}

macro_rules! xv_binary {
    ($($name:ident => $op:ident, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (a, b, e) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize], env(c));
            xv_binary!(@ $prec, c, i, a, b, e, ieee::$op)
        }
    )*};
    (@ Double, $c:ident, $i:ident, $a:ident, $b:ident, $e:ident, $f:path) => {{
        let (a, b) = (elems_dp($a), elems_dp($b));
        vec_dp($c, $i, [0, 1].map(|k| $f(a[k], b[k], Prec::Double, $e)))
    }};
    (@ Single, $c:ident, $i:ident, $a:ident, $b:ident, $e:ident, $f:path) => {{
        let (a, b) = (elems_sp($a), elems_sp($b));
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| $f(a[k], b[k], Prec::Single, $e)))
    }};
}

xv_binary! {
    xvadddp => add, Double;  xvaddsp => add, Single;
    xvsubdp => sub, Double;  xvsubsp => sub, Single;
    xvmuldp => mul, Double;  xvmulsp => mul, Single;
    xvdivdp => div, Double;  xvdivsp => div, Single;
}

/// Multiply-add operand order: "a" forms compute XA*XB + XT (XT is the addend), "m" forms
/// XA*XT + XB (XT is a multiplicand). Returns (multiplicand, addend).
fn ma_operands<T: Copy>(a_form: bool, xt: T, xb: T) -> (T, T) {
    if a_form { (xb, xt) } else { (xt, xb) }
}

macro_rules! xs_fma {
    ($($name:ident => $prec:ident, $a_form:literal, $neg_b:literal, $neg_r:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (m, add) = ma_operands($a_form, xt0(c, i), xb0(c, i));
            let r = ieee::fma(xa0(c, i), m, add, $neg_b, $neg_r, Prec::$prec, env(c));
            scalar_result(c, i, r, Prec::$prec)
        }
    )*};
}

xs_fma! {
    xsmaddadp => Double, true, false, false;    xsmaddmdp => Double, false, false, false;
    xsmsubadp => Double, true, true, false;     xsmsubmdp => Double, false, true, false;
    xsnmaddadp => Double, true, false, true;    xsnmaddmdp => Double, false, false, true;
    xsnmsubadp => Double, true, true, true;     xsnmsubmdp => Double, false, true, true;
    xsmaddasp => Single, true, false, false;    xsmaddmsp => Single, false, false, false;
    xsmsubasp => Single, true, true, false;     xsmsubmsp => Single, false, true, false;
    xsnmaddasp => Single, true, false, true;    xsnmaddmsp => Single, false, false, true;
    xsnmsubasp => Single, true, true, true;     xsnmsubmsp => Single, false, true, true;
}

macro_rules! xv_fma {
    ($($name:ident => $prec:ident, $a_form:literal, $neg_b:literal, $neg_r:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let e = env(c);
            let (a, b, t) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize], c.st.vsr[i.xt() as usize]);
            let (m, add) = ma_operands($a_form, t, b);
            xv_fma!(@ $prec, c, i, a, m, add, e, $neg_b, $neg_r)
        }
    )*};
    (@ Double, $c:ident, $i:ident, $a:ident, $m:ident, $add:ident, $e:ident, $nb:literal, $nr:literal) => {{
        let (a, m, add) = (elems_dp($a), elems_dp($m), elems_dp($add));
        vec_dp($c, $i, [0, 1].map(|k| ieee::fma(a[k], m[k], add[k], $nb, $nr, Prec::Double, $e)))
    }};
    (@ Single, $c:ident, $i:ident, $a:ident, $m:ident, $add:ident, $e:ident, $nb:literal, $nr:literal) => {{
        let (a, m, add) = (elems_sp($a), elems_sp($m), elems_sp($add));
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| ieee::fma(a[k], m[k], add[k], $nb, $nr, Prec::Single, $e)))
    }};
}

xv_fma! {
    xvmaddadp => Double, true, false, false;    xvmaddmdp => Double, false, false, false;
    xvmsubadp => Double, true, true, false;     xvmsubmdp => Double, false, true, false;
    xvnmaddadp => Double, true, false, true;    xvnmaddmdp => Double, false, false, true;
    xvnmsubadp => Double, true, true, true;     xvnmsubmdp => Double, false, true, true;
    xvmaddasp => Single, true, false, false;    xvmaddmsp => Single, false, false, false;
    xvmsubasp => Single, true, true, false;     xvmsubmsp => Single, false, true, false;
    xvnmaddasp => Single, true, false, true;    xvnmaddmsp => Single, false, false, true;
    xvnmsubasp => Single, true, true, true;     xvnmsubmsp => Single, false, true, true;
}

/// Unary operations on one element: square root and the estimates. The estimates are
/// computed the way QEMU does (exactly, then rounded step by step): the scalar single forms
/// in double precision and then rounded to single like `frsp`, the vector single forms in
/// single precision throughout.
fn unary(op: u8, b: u64, prec: Prec, vector: bool, env: Env) -> Res {
    match (op, prec, vector) {
        (SQRT, _, _) => ieee::sqrt(b, prec, env),
        (RE, Prec::Single, false) => {
            then_round_single(scalar::reciprocal(b, Prec::Double, env), env)
        }
        (RE, _, _) => scalar::reciprocal(b, prec, env),
        (_, Prec::Single, false) => {
            then_round_single(scalar::reciprocal_sqrt(b, Prec::Double, env), env)
        }
        (_, Prec::Single, true) => {
            let s = ieee::sqrt(b, Prec::Single, env);
            let mut r = scalar::reciprocal(single_to_double(s.bits as u32), Prec::Single, env);
            r.f.exc |= s.f.exc;
            r.f.fi |= s.f.fi;
            r
        }
        _ => scalar::reciprocal_sqrt(b, prec, env),
    }
}

/// Rounds a double result to single precision as a second step, merging the flags.
fn then_round_single(d: Res, env: Env) -> Res {
    let mut r = ieee::round_to_prec(d.bits, Prec::Single, env);
    r.f.exc |= d.f.exc;
    r.f.fi |= d.f.fi;
    r
}

const SQRT: u8 = 0;
const RE: u8 = 1;
const RSQRTE: u8 = 2;

macro_rules! xs_unary {
    ($($name:ident => $op:ident, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let r = unary($op, xb0(c, i), Prec::$prec, false, env(c)).via_single();
            scalar_result(c, i, r, Prec::$prec)
        }
    )*};
}

xs_unary! {
    xssqrtdp => SQRT, Double;      xssqrtsp => SQRT, Single;
    xsredp => RE, Double;          xsresp => RE, Single;
    xsrsqrtedp => RSQRTE, Double;  xsrsqrtesp => RSQRTE, Single;
}

macro_rules! xv_unary {
    ($($name:ident => $op:ident, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (b, e) = (c.st.vsr[i.xb() as usize], env(c));
            xv_unary!(@ $prec, c, i, b, e, $op)
        }
    )*};
    (@ Double, $c:ident, $i:ident, $b:ident, $e:ident, $op:ident) => {{
        let b = elems_dp($b);
        vec_dp($c, $i, [0, 1].map(|k| unary($op, b[k], Prec::Double, true, $e)))
    }};
    (@ Single, $c:ident, $i:ident, $b:ident, $e:ident, $op:ident) => {{
        let b = elems_sp($b);
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| unary($op, b[k], Prec::Single, true, $e)))
    }};
}

xv_unary! {
    xvsqrtdp => SQRT, Double;      xvsqrtsp => SQRT, Single;
    xvredp => RE, Double;          xvresp => RE, Single;
    xvrsqrtedp => RSQRTE, Double;  xvrsqrtesp => RSQRTE, Single;
}

// --- maximum and minimum ---

/// `xsmaxdp`/`xsmindp` and vector forms: a quiet NaN loses to a number, a signalling NaN
/// wins (quieted, VXSNAN), and +0 is greater than -0.
fn max_min(a: u64, b: u64, max: bool, prec: Prec) -> Res {
    let narrow = |x: u64| match prec {
        Prec::Double => x,
        Prec::Single => double_to_single(x) as u64,
    };
    if ieee::is_snan(a) || ieee::is_snan(b) {
        let q = if ieee::is_nan(a) { a } else { b } | (1 << 51);
        return Res::new(
            narrow(q),
            Flags {
                exc: fpscr::VXSNAN,
                ..Flags::default()
            },
        );
    }
    let pick = match (ieee::is_nan(a), ieee::is_nan(b)) {
        (true, _) if ieee::is_nan(b) => a,
        (true, false) => b,
        (false, true) => a,
        _ => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            if x == y {
                // Equal: only the zeros differ, by sign.
                if max == ieee::is_neg(a) { b } else { a }
            } else if (x > y) == max {
                a
            } else {
                b
            }
        }
    };
    Res::new(narrow(pick), Flags::default())
}

pub(in crate::interp) fn xsmaxdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let r = max_min(xa0(c, i), xb0(c, i), true, Prec::Double);
    store_scalar(c, i, r.f, from_dws(r.bits, 0), Report::Exceptions)
}

pub(in crate::interp) fn xsmindp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let r = max_min(xa0(c, i), xb0(c, i), false, Prec::Double);
    store_scalar(c, i, r.f, from_dws(r.bits, 0), Report::Exceptions)
}

macro_rules! xv_max_min {
    ($($name:ident => $max:literal, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (a, b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
            xv_max_min!(@ $prec, c, i, a, b, $max)
        }
    )*};
    (@ Double, $c:ident, $i:ident, $a:ident, $b:ident, $max:literal) => {{
        let (a, b) = (elems_dp($a), elems_dp($b));
        vec_dp($c, $i, [0, 1].map(|k| max_min(a[k], b[k], $max, Prec::Double)))
    }};
    (@ Single, $c:ident, $i:ident, $a:ident, $b:ident, $max:literal) => {{
        let (a, b) = (elems_sp($a), elems_sp($b));
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| max_min(a[k], b[k], $max, Prec::Single)))
    }};
}

xv_max_min! {
    xvmaxdp => true, Double;  xvmindp => false, Double;
    xvmaxsp => true, Single;  xvminsp => false, Single;
}

// --- sign manipulation: no FPSCR change ---

macro_rules! sign_ops {
    ($($name:ident => $elem:ident, |$a:ident, $b:ident| $e:expr;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (va, vb) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
            c.st.vsr[i.xt() as usize] = sign_ops!(@ $elem, va, vb, |$a, $b| $e);
            Ok(())
        }
    )*};
    (@ scalar, $va:ident, $vb:ident, |$a:ident, $b:ident| $e:expr) => {{
        let ($a, $b) = (dw($va, 0), dw($vb, 0));
        from_dws($e, 0)
    }};
    (@ dp, $va:ident, $vb:ident, |$a:ident, $b:ident| $e:expr) => {{
        let r = [0, 1].map(|k| {
            let ($a, $b) = (dw($va, k), dw($vb, k));
            $e
        });
        from_dws(r[0], r[1])
    }};
    (@ sp, $va:ident, $vb:ident, |$a:ident, $b:ident| $e:expr) => {{
        from_words([0, 1, 2, 3].map(|k| {
            let ($a, $b) = (word($va, k), word($vb, k));
            $e
        }))
    }};
}

const S64: u64 = 1 << 63;
const S32: u32 = 1 << 31;

sign_ops! {
    xsabsdp => scalar, |_a, b| b & !S64;
    xsnabsdp => scalar, |_a, b| b | S64;
    xsnegdp => scalar, |_a, b| b ^ S64;
    xscpsgndp => scalar, |a, b| (a & S64) | (b & !S64);
    xvabsdp => dp, |_a, b| b & !S64;
    xvnabsdp => dp, |_a, b| b | S64;
    xvnegdp => dp, |_a, b| b ^ S64;
    xvcpsgndp => dp, |a, b| (a & S64) | (b & !S64);
    xvabssp => sp, |_a, b| b & !S32;
    xvnabssp => sp, |_a, b| b | S32;
    xvnegsp => sp, |_a, b| b ^ S32;
    xvcpsgnsp => sp, |a, b| (a & S32) | (b & !S32);
}

// --- compares and tests ---

pub(in crate::interp) fn xscmpudp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (a, b) = (xa0(c, i), xb0(c, i));
    scalar::compare(c, i.bf(), a, b, false, false)
}

pub(in crate::interp) fn xscmpodp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (a, b) = (xa0(c, i), xb0(c, i));
    scalar::compare(c, i.bf(), a, b, true, false)
}

const EQ: u8 = 0;
const GT: u8 = 1;
const GE: u8 = 2;

/// One element of `xvcmp*`: (true?, flags). NaNs compare false; SNaN raises VXSNAN and the
/// ordered (gt, ge) compares raise VXVC for any NaN.
fn cmp_elem(a: u64, b: u64, how: u8) -> (bool, Flags) {
    let mut exc = 0;
    if ieee::is_nan(a) || ieee::is_nan(b) {
        if ieee::is_snan(a) || ieee::is_snan(b) {
            exc |= fpscr::VXSNAN;
        }
        if how != EQ {
            exc |= fpscr::VXVC;
        }
        return (
            false,
            Flags {
                exc,
                ..Flags::default()
            },
        );
    }
    let (x, y) = (f64::from_bits(a), f64::from_bits(b));
    let t = match how {
        EQ => x == y,
        GT => x > y,
        _ => x >= y,
    };
    (t, Flags::default())
}

fn vector_compare(c: &mut Cpu, i: Insn, how: u8, single: bool) -> Exec {
    vsx_available(c)?;
    let (va, vb) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
    let (bits, flags): (Vec<bool>, Vec<Flags>) = if single {
        let (a, b) = (elems_sp(va), elems_sp(vb));
        (0..4).map(|k| cmp_elem(a[k], b[k], how)).unzip()
    } else {
        let (a, b) = (elems_dp(va), elems_dp(vb));
        (0..2).map(|k| cmp_elem(a[k], b[k], how)).unzip()
    };
    let v = if single {
        from_words([0, 1, 2, 3].map(|k| if bits[k] { u32::MAX } else { 0 }))
    } else {
        from_dws(
            if bits[0] { u64::MAX } else { 0 },
            if bits[1] { u64::MAX } else { 0 },
        )
    };
    let fp = c.st.fpscr;
    let f = flags.iter().fold(Flags::default(), |mut a, b| {
        a |= *b;
        a
    });
    let written = !fpscr::suppresses(fp, f.exc);
    if written {
        c.st.vsr[i.xt() as usize] = v;
        if i.bit21() != 0 {
            let all = bits.iter().all(|&b| b);
            let none = bits.iter().all(|&b| !b);
            c.st.set_crf(6, (all as u32) << 3 | (none as u32) << 1);
        }
    }
    let e = fpscr::update(&mut c.st, f, written, Report::Exceptions);
    conclude(c, e, false)
}

macro_rules! xv_cmp {
    ($($name:ident => $how:ident, $single:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vector_compare(c, i, $how, $single)
        }
    )*};
}

xv_cmp! {
    xvcmpeqdp => EQ, false;  xvcmpgtdp => GT, false;  xvcmpgedp => GE, false;
    xvcmpeqsp => EQ, true;   xvcmpgtsp => GT, true;   xvcmpgesp => GE, true;
}

pub(in crate::interp) fn xstdivdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (fe, fg) = scalar::test_div(
        Parts::double(xa0(c, i)),
        Parts::double(xb0(c, i)),
        DOUBLE_RANGE,
    );
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn xstsqrtdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (fe, fg) = scalar::test_sqrt(Parts::double(xb0(c, i)), DOUBLE_RANGE);
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn xvtdivdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (a, b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
    let (fe, fg) = (0..2)
        .map(|k| {
            scalar::test_div(
                Parts::double(dw(a, k)),
                Parts::double(dw(b, k)),
                DOUBLE_RANGE,
            )
        })
        .fold((false, false), |x, y| (x.0 | y.0, x.1 | y.1));
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn xvtdivsp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (a, b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
    let (fe, fg) = (0..4)
        .map(|k| {
            scalar::test_div(
                Parts::single(word(a, k)),
                Parts::single(word(b, k)),
                SINGLE_RANGE,
            )
        })
        .fold((false, false), |x, y| (x.0 | y.0, x.1 | y.1));
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn xvtsqrtdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let b = c.st.vsr[i.xb() as usize];
    let (fe, fg) = (0..2)
        .map(|k| scalar::test_sqrt(Parts::double(dw(b, k)), DOUBLE_RANGE))
        .fold((false, false), |x, y| (x.0 | y.0, x.1 | y.1));
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

pub(in crate::interp) fn xvtsqrtsp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let b = c.st.vsr[i.xb() as usize];
    let (fe, fg) = (0..4)
        .map(|k| scalar::test_sqrt(Parts::single(word(b, k)), SINGLE_RANGE))
        .fold((false, false), |x, y| (x.0 | y.0, x.1 | y.1));
    c.st.set_crf(i.bf(), scalar::test_bits(fe, fg));
    Ok(())
}

// --- rounding to integral values ---

/// The fixed-mode forms (`xsrdpi`, `…z`, `…p`, `…m`) never report inexact; the `…c` forms
/// round in the FPSCR's mode and do.
fn round_elem(b: u64, prec: Prec, mode: Option<Round>, env: Env) -> Res {
    let mut r = ieee::round_to_integral(b, prec, mode.unwrap_or(env.round));
    if mode.is_some() {
        r.f.fi = false;
    } else if r.f.fi {
        r.f.exc |= fpscr::XX;
    }
    r
}

macro_rules! round_ops {
    ($($name:ident => $kind:ident, $mode:expr;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let e = env(c);
            round_ops!(@ $kind, c, i, e, $mode)
        }
    )*};
    (@ xs, $c:ident, $i:ident, $e:ident, $mode:expr) => {{
        let r = round_elem(xb0($c, $i), Prec::Double, $mode, $e);
        scalar_result($c, $i, r, Prec::Double)
    }};
    (@ xvdp, $c:ident, $i:ident, $e:ident, $mode:expr) => {{
        let b = elems_dp($c.st.vsr[$i.xb() as usize]);
        vec_dp($c, $i, [0, 1].map(|k| round_elem(b[k], Prec::Double, $mode, $e)))
    }};
    (@ xvsp, $c:ident, $i:ident, $e:ident, $mode:expr) => {{
        let b = elems_sp($c.st.vsr[$i.xb() as usize]);
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| round_elem(b[k], Prec::Single, $mode, $e)))
    }};
}

round_ops! {
    xsrdpi => xs, Some(Round::NearestTiesToAway);
    xsrdpiz => xs, Some(Round::TowardZero);
    xsrdpip => xs, Some(Round::TowardPositive);
    xsrdpim => xs, Some(Round::TowardNegative);
    xsrdpic => xs, None;
    xvrdpi => xvdp, Some(Round::NearestTiesToAway);
    xvrdpiz => xvdp, Some(Round::TowardZero);
    xvrdpip => xvdp, Some(Round::TowardPositive);
    xvrdpim => xvdp, Some(Round::TowardNegative);
    xvrdpic => xvdp, None;
    xvrspi => xvsp, Some(Round::NearestTiesToAway);
    xvrspiz => xvsp, Some(Round::TowardZero);
    xvrspip => xvsp, Some(Round::TowardPositive);
    xvrspim => xvsp, Some(Round::TowardNegative);
    xvrspic => xvsp, None;
}

// --- floating-point format conversions ---

/// `xsrsp`: round to single precision, result in double format.
pub(in crate::interp) fn xsrsp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let r = ieee::round_to_prec(xb0(c, i), Prec::Single, env(c)).via_single();
    scalar_result(c, i, r, Prec::Single)
}

/// `xscvdpsp`: round to single precision, result in single format in words 0 and 1.
pub(in crate::interp) fn xscvdpsp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let r = ieee::round_to_prec(xb0(c, i), Prec::Single, env(c));
    let w = r.bits as u32;
    store_scalar(
        c,
        i,
        r.f,
        from_words([w, w, 0, 0]),
        Report::Full(fpscr::class_single(w)),
    )
}

/// `xscvdpspn`: the single-format bits of a value assumed representable, no exceptions.
pub(in crate::interp) fn xscvdpspn(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let w = double_to_single(xb0(c, i));
    c.st.vsr[i.xt() as usize] = from_words([w, w, 0, 0]);
    Ok(())
}

/// A single in double format; an SNaN is quieted and raises VXSNAN.
fn widen(w: u32) -> Res {
    let d = single_to_double(w);
    if ieee::is_snan(d) {
        return Res::new(
            d | (1 << 51),
            Flags {
                exc: fpscr::VXSNAN,
                ..Flags::default()
            },
        );
    }
    Res::new(d, Flags::default())
}

pub(in crate::interp) fn xscvspdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let r = widen(word(c.st.vsr[i.xb() as usize], 0));
    scalar_result(c, i, r, Prec::Double)
}

/// `xscvspdpn`: word 0 to double format, no exceptions.
pub(in crate::interp) fn xscvspdpn(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let d = single_to_double(word(c.st.vsr[i.xb() as usize], 0));
    c.st.vsr[i.xt() as usize] = from_dws(d, 0);
    Ok(())
}

pub(in crate::interp) fn xvcvspdp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let b = c.st.vsr[i.xb() as usize];
    vec_dp(c, i, [0, 2].map(|k| widen(word(b, k))))
}

pub(in crate::interp) fn xvcvdpsp(c: &mut Cpu, i: Insn) -> Exec {
    vsx_available(c)?;
    let (b, e) = (elems_dp(c.st.vsr[i.xb() as usize]), env(c));
    let r = [0, 1].map(|k| ieee::round_to_prec(b[k], Prec::Single, e));
    vector_result(c, i, &r.map(|x| x.f), pack_sp_from_dp(&r))
}

// --- conversions to integers (always toward zero) ---

fn to_int(b: u64, fmt: IntFmt) -> Res {
    ieee::to_int(b, fmt, Round::TowardZero)
}

macro_rules! xs_to_int {
    ($($name:ident => $fmt:ident, $word:literal;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let r = to_int(xb0(c, i), IntFmt::$fmt);
            let v = if $word {
                let w = r.bits as u32;
                from_words([w, w, 0, 0])
            } else {
                from_dws(r.bits, 0)
            };
            store_scalar(c, i, r.f, v, Report::Rounding)
        }
    )*};
}

xs_to_int! {
    xscvdpsxds => I64, false;  xscvdpuxds => U64, false;
    xscvdpsxws => I32, true;   xscvdpuxws => U32, true;
}

macro_rules! xv_to_int {
    ($($name:ident => $fmt:ident, $src:ident, $dst:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let b = c.st.vsr[i.xb() as usize];
            xv_to_int!(@ $src, $dst, c, i, b, IntFmt::$fmt)
        }
    )*};
    (@ dp, dw, $c:ident, $i:ident, $b:ident, $fmt:expr) => {{
        let b = elems_dp($b);
        vec_dp($c, $i, [0, 1].map(|k| to_int(b[k], $fmt)))
    }};
    (@ dp, w, $c:ident, $i:ident, $b:ident, $fmt:expr) => {{
        let b = elems_dp($b);
        let r = [0, 1].map(|k| to_int(b[k], $fmt));
        vector_result($c, $i, &r.map(|x| x.f), pack_sp_from_dp(&r))
    }};
    (@ sp, w, $c:ident, $i:ident, $b:ident, $fmt:expr) => {{
        let b = elems_sp($b);
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| to_int(b[k], $fmt)))
    }};
    (@ sp, dw, $c:ident, $i:ident, $b:ident, $fmt:expr) => {{
        let b = elems_sp($b);
        vec_dp($c, $i, [0, 2].map(|k| to_int(b[k], $fmt)))
    }};
}

xv_to_int! {
    xvcvdpsxds => I64, dp, dw;  xvcvdpuxds => U64, dp, dw;
    xvcvdpsxws => I32, dp, w;   xvcvdpuxws => U32, dp, w;
    xvcvspsxws => I32, sp, w;   xvcvspuxws => U32, sp, w;
    xvcvspsxds => I64, sp, dw;  xvcvspuxds => U64, sp, dw;
}

// --- conversions from integers ---

macro_rules! xs_from_int {
    ($($name:ident => $signed:literal, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let r = ieee::from_int(xb0(c, i), $signed, Prec::$prec, env(c));
            scalar_result(c, i, r, Prec::$prec)
        }
    )*};
}

xs_from_int! {
    xscvsxddp => true, Double;   xscvuxddp => false, Double;
    xscvsxdsp => true, Single;   xscvuxdsp => false, Single;
}

/// Integer element `k` of `v` as a 64-bit value of the given width and signedness.
fn int_elem(v: u128, k: usize, words: bool, signed: bool) -> u64 {
    match (words, signed) {
        (true, true) => word(v, k) as i32 as i64 as u64,
        (true, false) => word(v, k) as u64,
        (false, _) => dw(v, k),
    }
}

macro_rules! xv_from_int {
    ($($name:ident => $signed:literal, $src:ident, $prec:ident;)*) => {$(
        pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_available(c)?;
            let (b, e) = (c.st.vsr[i.xb() as usize], env(c));
            xv_from_int!(@ $src, $prec, c, i, b, e, $signed)
        }
    )*};
    (@ dw, Double, $c:ident, $i:ident, $b:ident, $e:ident, $s:literal) => {
        vec_dp($c, $i, [0, 1].map(|k| ieee::from_int(int_elem($b, k, false, $s), $s, Prec::Double, $e)))
    };
    (@ dw, Single, $c:ident, $i:ident, $b:ident, $e:ident, $s:literal) => {{
        let r = [0, 1].map(|k| ieee::from_int(int_elem($b, k, false, $s), $s, Prec::Single, $e));
        vector_result($c, $i, &r.map(|x| x.f), pack_sp_from_dp(&r))
    }};
    (@ w, Double, $c:ident, $i:ident, $b:ident, $e:ident, $s:literal) => {
        vec_dp($c, $i, [0, 2].map(|k| ieee::from_int(int_elem($b, k, true, $s), $s, Prec::Double, $e)))
    };
    (@ w, Single, $c:ident, $i:ident, $b:ident, $e:ident, $s:literal) => {
        vec_sp($c, $i, [0, 1, 2, 3].map(|k| ieee::from_int(int_elem($b, k, true, $s), $s, Prec::Single, $e)))
    };
}

xv_from_int! {
    xvcvsxddp => true, dw, Double;   xvcvuxddp => false, dw, Double;
    xvcvsxdsp => true, dw, Single;   xvcvuxdsp => false, dw, Single;
    xvcvsxwdp => true, w, Double;    xvcvuxwdp => false, w, Double;
    xvcvsxwsp => true, w, Single;    xvcvuxwsp => false, w, Single;
}
