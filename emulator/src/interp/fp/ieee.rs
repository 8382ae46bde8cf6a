//! The arithmetic core shared by the FPU and VSX: one routine per operation, parameterised
//! by the target precision, returning the result bits and what the operation raised.
//!
//! Operands are always double-format bits (single-precision operands are widened exactly
//! first). Each finite operation is computed by `rustc_apfloat` in IEEE quad precision
//! either exactly or rounded to odd (truncate, then set the last bit if anything was lost),
//! and then rounded once to the target precision in the FPSCR's rounding mode. Quad has
//! more than p + 2 bits for both targets, so this single final rounding gives the correctly
//! rounded result, and the intermediate value tells us what plain IEEE flags do not:
//! tininess before rounding (as POWER and QEMU detect underflow), FR (the fraction was
//! incremented) and the exponent-adjusted results of enabled overflow and underflow.
//!
//! NaN operands and invalid operations are decided here too, in the ISA's order: the first
//! NaN of the operands in priority order is returned quieted, any SNaN operand raises
//! VXSNAN, and an invalid operation without a NaN operand returns the default QNaN.

use super::fpscr::{self, Flags};
use crate::interp::loadstore::{double_to_single, single_to_double};
use rustc_apfloat::ieee::{Double, Quad, Single};
use rustc_apfloat::{Float, FloatConvert, Round, Status, StatusAnd};

/// Precision an operation rounds its result to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prec {
    Single,
    Double,
}

/// What the FPSCR says about how to round: the mode, and whether enabled overflow and
/// underflow exceptions ask for exponent-adjusted results.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    pub round: Round,
    pub oe: bool,
    pub ue: bool,
}

impl Env {
    pub fn from_fpscr(f: u64) -> Self {
        Env {
            round: rounding_mode(f),
            oe: f & fpscr::OE != 0,
            ue: f & fpscr::UE != 0,
        }
    }
}

/// FPSCR[RN] as a rounding mode.
pub fn rounding_mode(f: u64) -> Round {
    match f & fpscr::RN {
        0 => Round::NearestTiesToEven,
        1 => Round::TowardZero,
        2 => Round::TowardPositive,
        _ => Round::TowardNegative,
    }
}

/// A result in the target format (double bits, or single bits in the low word) and the
/// FPSCR bits the operation raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Res {
    pub bits: u64,
    pub f: Flags,
    /// Double form of a single-precision result whose exponent was adjusted for an enabled
    /// overflow or underflow (FPR results of single-precision arithmetic use it: their
    /// exponent is not limited to the single range).
    pub wide: Option<u64>,
}

impl Res {
    pub fn new(bits: u64, f: Flags) -> Self {
        Res {
            bits,
            f,
            wide: None,
        }
    }

    fn invalid(prec: Prec, exc: u64) -> Self {
        Res::new(
            default_nan(prec),
            Flags {
                exc,
                ..Flags::default()
            },
        )
    }

    /// A single-precision result as rounding to single format (`frsp`, VSX) delivers it.
    pub fn via_single(self) -> Self {
        Res { wide: None, ..self }
    }

    /// The result in double format, as an FPR holds a single-precision result.
    pub fn to_double(self, prec: Prec) -> u64 {
        match (prec, self.wide) {
            (Prec::Double, _) => self.bits,
            (Prec::Single, Some(w)) => w,
            (Prec::Single, None) => single_to_double(self.bits as u32),
        }
    }
}

// --- classification of double-format bits ---

const SIGN: u64 = 1 << 63;
const EXP: u64 = 0x7ff0_0000_0000_0000;
const FRAC: u64 = (1 << 52) - 1;
const QUIET: u64 = 1 << 51;
pub const DEFAULT_NAN: u64 = 0x7ff8_0000_0000_0000;

#[inline]
pub fn is_nan(x: u64) -> bool {
    x & EXP == EXP && x & FRAC != 0
}
#[inline]
pub fn is_snan(x: u64) -> bool {
    is_nan(x) && x & QUIET == 0
}
#[inline]
pub fn is_inf(x: u64) -> bool {
    x & !SIGN == EXP
}
#[inline]
pub fn is_zero(x: u64) -> bool {
    x & !SIGN == 0
}
#[inline]
pub fn is_neg(x: u64) -> bool {
    x & SIGN != 0
}

fn default_nan(prec: Prec) -> u64 {
    match prec {
        Prec::Double => DEFAULT_NAN,
        Prec::Single => 0x7fc0_0000,
    }
}

/// Quiets a NaN and narrows it to the target format (single keeps the high fraction bits).
fn nan_result(x: u64, prec: Prec) -> u64 {
    let q = x | QUIET;
    match prec {
        Prec::Double => q,
        Prec::Single => double_to_single(q) as u64,
    }
}

/// The NaN result when any operand is a NaN: the first NaN in priority order, quieted;
/// VXSNAN if any operand is signalling.
fn propagate(ops: &[u64], prec: Prec) -> Option<Res> {
    let first = *ops.iter().find(|&&x| is_nan(x))?;
    let exc = if ops.iter().any(|&x| is_snan(x)) {
        fpscr::VXSNAN
    } else {
        0
    };
    Some(Res::new(
        nan_result(first, prec),
        Flags {
            exc,
            ..Flags::default()
        },
    ))
}

// --- exact / round-to-odd evaluation in quad precision ---

fn quad(x: u64) -> Quad {
    let d = Double::from_bits(x as u128);
    d.convert(&mut false).value
}

/// Rounds to odd: a truncated inexact result gets its last bit set, so it stays strictly
/// between the two neighbours the exact value lies between, at any coarser precision.
fn odd(r: StatusAnd<Quad>) -> (Quad, bool) {
    if r.status.contains(Status::INEXACT) {
        (Quad::from_bits(r.value.to_bits() | 1), true)
    } else {
        (r.value, false)
    }
}

/// Rounds the exact-or-odd value `v` to the target precision.
pub(super) fn round(v: Quad, prec: Prec, env: Env) -> Res {
    match prec {
        Prec::Double => round_to::<Double>(v, env, 1536),
        Prec::Single => {
            let mut r = round_to::<Single>(v, env, 192);
            let ox = r.f.exc & fpscr::OX != 0;
            if (ox && env.oe) || (r.f.exc & fpscr::UX != 0 && env.ue) {
                // The adjusted exponent may still be outside the single range: round to
                // single precision with the exponent unbounded, then pack the exponent into
                // the format's field modulo its width, as QEMU (the oracle) does — 8 bits
                // for a single-format result, 11 bits for the double form FPRs hold.
                let w = v.scalbn(if ox { -192 } else { 192 });
                let k = w.ilogb();
                let frac = w.scalbn(-k);
                let m: StatusAnd<Single> = frac.convert_r(env.round, &mut false);
                let mb = m.value.to_bits() as u32;
                let e = k + ((mb >> 23) & 0xff) as i32 - 127;
                let sign = (w.is_negative() as u32) << 31;
                let f23 = mb & 0x7f_ffff;
                r.bits = (sign | (((e + 127) as u32 & 0xff) << 23) | f23) as u64;
                r.wide = Some(
                    (sign as u64) << 32 | (((e + 1023) as u64) & 0x7ff) << 52 | (f23 as u64) << 29,
                );
                let inexact = m.status.contains(Status::INEXACT);
                let back: Quad = m.value.convert(&mut false).value;
                r.f.exc = (r.f.exc & !fpscr::XX) | if inexact { fpscr::XX } else { 0 };
                r.f.fi = inexact;
                r.f.fr = inexact && back.abs() > frac.abs();
            }
            r
        }
    }
}

fn round_to<T>(v: Quad, env: Env, bias: i32) -> Res
where
    T: Float + FloatConvert<Quad>,
    Quad: FloatConvert<T>,
{
    let conv = |x: Quad| -> StatusAnd<T> { x.convert_r(env.round, &mut false) };
    if !v.is_finite_non_zero() {
        return Res::new(conv(v).value.to_bits() as u64, Flags::default());
    }
    let to_quad = |x: T| -> Quad { x.convert(&mut false).value };
    let tiny = v.abs() < to_quad(T::smallest_normalized());
    let r = conv(v);
    // Overflow: the value rounded with an unbounded exponent exceeds the largest finite
    // number. apfloat reports it only when it rounds to infinity, not when a directed
    // mode clamps to the largest number.
    let limit = Quad::from_u128(1).value.scalbn(T::MAX_EXP + 1);
    let overflow = r.status.contains(Status::OVERFLOW) || v.abs() >= limit;
    let (out, mut exc) = if overflow && env.oe {
        (conv(v.scalbn(-bias)), fpscr::OX)
    } else if overflow {
        (r, fpscr::OX)
    } else if tiny && env.ue {
        (conv(v.scalbn(bias)), fpscr::UX)
    } else if tiny && r.status.contains(Status::INEXACT) {
        (r, fpscr::UX)
    } else {
        (r, 0)
    };
    let inexact = out.status.contains(Status::INEXACT) || (overflow && !env.oe);
    if inexact {
        exc |= fpscr::XX;
    }
    // FR: the rounded magnitude is above the exact one (compare in the scale rounded at).
    let scaled = match exc & (fpscr::OX | fpscr::UX) {
        fpscr::OX if env.oe => v.scalbn(-bias),
        fpscr::UX if env.ue => v.scalbn(bias),
        _ => v,
    };
    let fr = inexact && to_quad(out.value).abs() > scaled.abs();
    Res::new(
        out.value.to_bits() as u64,
        Flags {
            exc,
            fi: inexact,
            fr,
        },
    )
}

/// Exact zero results of sums take their sign from the rounding mode (IEEE 754 6.3).
fn zero_sum_sign(v: Quad, env: Env) -> Quad {
    if !v.is_zero() {
        v
    } else if env.round == Round::TowardNegative {
        -Quad::ZERO
    } else {
        Quad::ZERO
    }
}

// --- operations ---

/// `a + b`.
pub fn add(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    if let Some(r) = propagate(&[a, b], prec) {
        return r;
    }
    if is_inf(a) && is_inf(b) && is_neg(a) != is_neg(b) {
        return Res::invalid(prec, fpscr::VXISI);
    }
    host::add(a, b, prec, env).unwrap_or_else(|| add_quad(a, b, prec, env))
}

fn add_quad(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    let (qa, qb) = (quad(a), quad(b));
    let (mut v, inexact) = odd(qa.add_r(qb, Round::TowardZero));
    // x + (-x) is +0 except when rounding toward -inf; like-signed zeros keep their sign.
    if !inexact && v.is_zero() && !(qa.is_zero() && qb.is_zero() && is_neg(a) == is_neg(b)) {
        v = zero_sum_sign(v, env);
    }
    round(v, prec, env)
}

/// `a - b`.
pub fn sub(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    if is_nan(b) {
        // The NaN is propagated as it is, not negated.
        return add(a, b, prec, env);
    }
    add(a, b ^ SIGN, prec, env)
}

/// `a * b`.
pub fn mul(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    if let Some(r) = propagate(&[a, b], prec) {
        return r;
    }
    if (is_inf(a) && is_zero(b)) || (is_zero(a) && is_inf(b)) {
        return Res::invalid(prec, fpscr::VXIMZ);
    }
    host::mul(a, b, prec, env).unwrap_or_else(|| mul_quad(a, b, prec, env))
}

fn mul_quad(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    // A product of two 53-bit significands is exact in quad.
    round((quad(a) * quad(b)).value, prec, env)
}

/// `a / b`.
pub fn div(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    if let Some(r) = propagate(&[a, b], prec) {
        return r;
    }
    if is_inf(a) && is_inf(b) {
        return Res::invalid(prec, fpscr::VXIDI);
    }
    if is_zero(a) && is_zero(b) {
        return Res::invalid(prec, fpscr::VXZDZ);
    }
    if is_zero(b) && !is_inf(a) {
        let inf = EXP | ((a ^ b) & SIGN);
        let bits = match prec {
            Prec::Double => inf,
            Prec::Single => double_to_single(inf) as u64,
        };
        return Res::new(
            bits,
            Flags {
                exc: fpscr::ZX,
                ..Flags::default()
            },
        );
    }
    host::div(a, b, prec, env).unwrap_or_else(|| div_quad(a, b, prec, env))
}

fn div_quad(a: u64, b: u64, prec: Prec, env: Env) -> Res {
    round(odd(quad(a).div_r(quad(b), Round::TowardZero)).0, prec, env)
}

/// `sqrt(b)`.
pub fn sqrt(b: u64, prec: Prec, env: Env) -> Res {
    if let Some(r) = propagate(&[b], prec) {
        return r;
    }
    if is_neg(b) && !is_zero(b) {
        return Res::invalid(prec, fpscr::VXSQRT);
    }
    if is_zero(b) || is_inf(b) {
        return round(quad(b), prec, env);
    }
    host::sqrt(b, prec, env).unwrap_or_else(|| round(sqrt_odd(b), prec, env))
}

/// The host's double arithmetic where it provably gives what the quad path gives: double
/// precision, round to nearest (the host's mode), finite operands and results well inside
/// the normal range (so no overflow, underflow or exponent adjustment can happen), and an
/// error-free transformation that yields the exact rounding error, from which XX, FI and FR
/// follow. Anything else returns `None` and takes the quad path. x86-64 and AArch64 hosts do
/// IEEE binary64 arithmetic in SSE2/NEON registers without flush-to-zero, and `mul_add` is
/// a fused multiply-add (hardware or libm's correctly rounded `fma`).
mod host {
    use super::{Env, Flags, Prec, Res, fpscr};
    use rustc_apfloat::Round;

    /// Magnitudes in [2^-500, 2^500]: products, quotients and square roots of such values,
    /// and their rounding errors, are normal numbers.
    fn moderate(x: f64) -> bool {
        let e = (x.to_bits() >> 52) & 0x7ff;
        (1023 - 500..=1023 + 500).contains(&e)
    }

    fn usable(prec: Prec, env: Env) -> bool {
        prec == Prec::Double && env.round == Round::NearestTiesToEven
    }

    /// `r` rounded from `r + err` exactly: XX/FI when `err` is non-zero, FR when the
    /// rounding moved away from zero (the error points the other way).
    fn result(r: f64, err_toward_exact_positive: Option<bool>) -> Res {
        let f = match err_toward_exact_positive {
            None => Flags::default(),
            Some(up) => Flags {
                exc: fpscr::XX,
                fi: true,
                fr: up != (r > 0.0),
            },
        };
        Res::new(r.to_bits(), f)
    }

    pub(super) fn add(a: u64, b: u64, prec: Prec, env: Env) -> Option<Res> {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        if !usable(prec, env) || !x.is_finite() || !y.is_finite() {
            return None;
        }
        let s = x + y;
        if !s.is_finite() {
            return None;
        }
        // TwoSum: s + e == x + y exactly (sums below 2^-1022 are exact, e = 0).
        let bb = s - x;
        let e = (x - (s - bb)) + (y - bb);
        Some(result(s, (e != 0.0).then_some(e > 0.0)))
    }

    pub(super) fn mul(a: u64, b: u64, prec: Prec, env: Env) -> Option<Res> {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        if !usable(prec, env) || !moderate(x) || !moderate(y) {
            return None;
        }
        let p = x * y;
        let e = x.mul_add(y, -p); // x*y - p, exact
        Some(result(p, (e != 0.0).then_some(e > 0.0)))
    }

    pub(super) fn div(a: u64, b: u64, prec: Prec, env: Env) -> Option<Res> {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        if !usable(prec, env) || !moderate(x) || !moderate(y) {
            return None;
        }
        let q = x / y;
        // x - q*y = y * (x/y - q), exact.
        let rem = (-q).mul_add(y, x);
        Some(result(q, (rem != 0.0).then_some((rem > 0.0) == (y > 0.0))))
    }

    /// `x + y` as `(sum, error)`, both exact: Knuth's TwoSum.
    fn two_sum(x: f64, y: f64) -> (f64, f64) {
        let s = x + y;
        let bb = s - x;
        (s, (x - (s - bb)) + (y - bb))
    }

    /// The sign of the exact sum of `terms` (-1, 0, 1): Shewchuk's grow-expansion turns them
    /// into non-overlapping components of increasing magnitude, the last of which decides.
    fn exact_sign(terms: [f64; 4]) -> i32 {
        let mut e = [0.0f64; 4];
        let mut n = 0;
        for t in terms {
            let mut q = t;
            let mut m = 0;
            for k in 0..n {
                let (s, err) = two_sum(q, e[k]);
                if err != 0.0 {
                    e[m] = err;
                    m += 1;
                }
                q = s;
            }
            e[m] = q;
            n = m + 1;
        }
        match e[..n].iter().rev().find(|&&c| c != 0.0) {
            Some(&c) if c > 0.0 => 1,
            Some(_) => -1,
            None => 0,
        }
    }

    pub(super) fn fma(a: u64, c: u64, b: u64, prec: Prec, env: Env) -> Option<Res> {
        let (x, y, z) = (f64::from_bits(a), f64::from_bits(c), f64::from_bits(b));
        if !usable(prec, env) || !moderate(x) || !moderate(y) || !(moderate(z) || z == 0.0) {
            return None;
        }
        let r = x.mul_add(y, z);
        // Results near the underflow range (cancellation) take the quad path.
        if r.abs() < f64::MIN_POSITIVE * 4.0 {
            return None;
        }
        // x*y + z - r exactly: x*y = p + ep, p + z = s + es, s - r = d + ed.
        let p = x * y;
        let ep = x.mul_add(y, -p);
        let (s, es) = two_sum(p, z);
        let (d, ed) = two_sum(s, -r);
        Some(result(
            r,
            match exact_sign([d, ed, es, ep]) {
                0 => None,
                k => Some(k > 0),
            },
        ))
    }

    pub(super) fn sqrt(b: u64, prec: Prec, env: Env) -> Option<Res> {
        let x = f64::from_bits(b);
        if !usable(prec, env) || !moderate(x) || x < 0.0 {
            return None;
        }
        let r = x.sqrt();
        // x - r*r, exact; positive when the exact root is above r.
        let rem = (-r).mul_add(r, x);
        Some(result(r, (rem != 0.0).then_some(rem > 0.0)))
    }
}

/// The square root of a positive finite double, rounded to odd at 60+ bits.
fn sqrt_odd(b: u64) -> Quad {
    let biased = ((b & EXP) >> 52) as i32;
    let (m, e) = if biased == 0 {
        (b & FRAC, -1074)
    } else {
        ((b & FRAC) | (1 << 52), biased - 1075)
    };
    // b = m * 2^e. Scale m up to about 124 bits with an even total exponent.
    let mut s = m.leading_zeros() as i32 + 64 - 4;
    if (e - s) % 2 != 0 {
        s -= 1;
    }
    let big = (m as u128) << s;
    let r = big.isqrt();
    let r = if r * r == big { r } else { r | 1 };
    let q = Quad::from_u128(r).value; // r < 2^63: exact
    q.scalbn((e - s) / 2)
}

/// The fused multiply-add `±(a * c ± b)` with one rounding. `neg_b` subtracts `b`,
/// `neg_result` negates the rounded result (a NaN result is never negated).
pub fn fma(a: u64, c: u64, b: u64, neg_b: bool, neg_result: bool, prec: Prec, env: Env) -> Res {
    let imz = (is_inf(a) && is_zero(c)) || (is_zero(a) && is_inf(c));
    if let Some(mut r) = propagate(&[a, b, c], prec) {
        // 0 * inf is reported even when the addend is a NaN, and then (as QEMU does) instead
        // of VXSNAN for a signalling addend.
        if imz {
            r.f.exc = fpscr::VXIMZ;
        }
        return r;
    }
    if imz {
        return Res::invalid(prec, fpscr::VXIMZ);
    }
    let b = if neg_b { b ^ SIGN } else { b };
    let prod_inf = is_inf(a) || is_inf(c);
    if prod_inf && is_inf(b) && (is_neg(a) ^ is_neg(c)) != is_neg(b) {
        return Res::invalid(prec, fpscr::VXISI);
    }
    let r = host::fma(a, c, b, prec, env).unwrap_or_else(|| fma_quad(a, c, b, prec, env));
    if neg_result {
        // The ISA rounds, then negates: -(round(v)) is round(-v) in the mirrored directed
        // mode. (QEMU 7.2 rounds -v in the mode itself, which differs in directed modes.)
        return negate(r, prec, a, c, b, env);
    }
    r
}

/// `fma` with the result negated after rounding.
fn negate(r: Res, prec: Prec, a: u64, c: u64, b: u64, env: Env) -> Res {
    if env.round == Round::NearestTiesToEven || env.round == Round::TowardZero {
        // Symmetric modes: negating the rounded result is exact.
        let sign = match prec {
            Prec::Double => SIGN,
            Prec::Single => 1 << 31,
        };
        let mut n = r;
        n.bits ^= sign;
        n.wide = r.wide.map(|w| w ^ SIGN);
        return n;
    }
    fma_quad(
        a ^ SIGN,
        c,
        b ^ SIGN,
        prec,
        Env {
            round: mirror(env.round),
            ..env
        },
    )
}

/// `a * c + b` rounded once, in quad precision.
fn fma_quad(a: u64, c: u64, b: u64, prec: Prec, env: Env) -> Res {
    // The product of two doubles is exact in quad, so this rounds (to odd) only once.
    let (mut v, inexact) = odd(quad(a).mul_add_r(quad(c), quad(b), Round::TowardZero));
    if !inexact && v.is_zero() {
        let prod_neg = is_neg(a) ^ is_neg(c);
        // (±0) + (±0) of one sign keeps that sign; any other exact zero follows the mode.
        let like = is_zero(b) && prod_neg == is_neg(b);
        v = if like {
            if prod_neg { -Quad::ZERO } else { Quad::ZERO }
        } else {
            zero_sum_sign(v, env)
        };
    }
    round(v, prec, env)
}

/// The rounding mode that rounding a negated value must use to give the negated result of
/// rounding the value itself.
fn mirror(r: Round) -> Round {
    match r {
        Round::TowardPositive => Round::TowardNegative,
        Round::TowardNegative => Round::TowardPositive,
        r => r,
    }
}

/// Rounds a double to the target precision (`frsp`, `xscvdpsp`, `xsrsp`).
pub fn round_to_prec(b: u64, prec: Prec, env: Env) -> Res {
    if let Some(r) = propagate(&[b], prec) {
        return r;
    }
    round(quad(b), prec, env)
}

/// Rounds to an integral value in `mode`; NaNs propagate. Inexact results are reported
/// through `fi` (callers decide what the FPSCR sees).
pub fn round_to_integral(b: u64, prec: Prec, mode: Round) -> Res {
    if let Some(r) = propagate(&[b], prec) {
        return r;
    }
    let r = Double::from_bits(b as u128).round_to_integral(mode);
    let inexact = r.status.contains(Status::INEXACT);
    let bits = r.value.to_bits() as u64;
    let bits = match prec {
        Prec::Double => bits,
        // A single operand's integral value is a single value.
        Prec::Single => double_to_single(bits) as u64,
    };
    Res::new(
        bits,
        Flags {
            exc: 0,
            fi: inexact,
            fr: false,
        },
    )
}

/// Integer formats of the float-to-integer conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntFmt {
    I32,
    U32,
    I64,
    U64,
}

impl IntFmt {
    fn range(self) -> (i128, i128) {
        match self {
            IntFmt::I32 => (i32::MIN as i128, i32::MAX as i128),
            IntFmt::U32 => (0, u32::MAX as i128),
            IntFmt::I64 => (i64::MIN as i128, i64::MAX as i128),
            IntFmt::U64 => (0, u64::MAX as i128),
        }
    }

    /// What a NaN converts to.
    fn nan_value(self) -> u64 {
        match self {
            IntFmt::I32 => 0x8000_0000,
            IntFmt::I64 => 1 << 63,
            IntFmt::U32 | IntFmt::U64 => 0,
        }
    }

    /// The integer as the FPR/VSR doubleword holds it (32-bit results sign- or zero-extended).
    fn encode(self, v: i128) -> u64 {
        match self {
            IntFmt::I32 | IntFmt::I64 => v as i64 as u64,
            IntFmt::U32 | IntFmt::U64 => v as u64,
        }
    }
}

/// Converts a double to an integer, rounding in `mode`; out-of-range values saturate and
/// raise VXCVI (with VXSNAN for an SNaN), inexact conversions raise XX.
pub fn to_int(b: u64, fmt: IntFmt, mode: Round) -> Res {
    if is_nan(b) {
        let exc = fpscr::VXCVI | if is_snan(b) { fpscr::VXSNAN } else { 0 };
        return Res::new(
            fmt.nan_value(),
            Flags {
                exc,
                ..Flags::default()
            },
        );
    }
    let (lo, hi) = fmt.range();
    let r = Double::from_bits(b as u128).round_to_integral(mode);
    let inexact = r.status.contains(Status::INEXACT);
    let v = r.value;
    // Integral and below 2^64 in magnitude, it converts to i128 exactly; anything larger
    // (or infinite) is out of range by its sign.
    let big = v.is_infinite() || v.abs() >= Double::from_u128(1 << 64).value;
    let i = if big {
        if v.is_negative() {
            i128::MIN
        } else {
            i128::MAX
        }
    } else {
        v.to_i128_r(128, Round::TowardZero, &mut false).value
    };
    let (value, exc) = if i < lo {
        (lo, fpscr::VXCVI)
    } else if i > hi {
        (hi, fpscr::VXCVI)
    } else {
        (i, 0)
    };
    if exc != 0 {
        return Res::new(
            fmt.encode(value),
            Flags {
                exc,
                ..Flags::default()
            },
        );
    }
    let exc = if inexact { fpscr::XX } else { 0 };
    let fr = inexact && v.abs() > Double::from_bits(b as u128).abs();
    Res::new(
        fmt.encode(value),
        Flags {
            exc,
            fi: inexact,
            fr,
        },
    )
}

/// Converts a signed or unsigned 64-bit integer to the target precision.
pub fn from_int(x: u64, signed: bool, prec: Prec, env: Env) -> Res {
    let v = if signed {
        Quad::from_i128(x as i64 as i128).value
    } else {
        Quad::from_u128(x as u128).value
    };
    round(v, prec, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(x: f64) -> u64 {
        x.to_bits()
    }
    fn rn() -> Env {
        Env {
            round: Round::NearestTiesToEven,
            oe: false,
            ue: false,
        }
    }

    #[test]
    fn sqrt_is_correctly_rounded_against_host() {
        // The host's sqrt is correctly rounded to nearest: compare on a spread of inputs.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x & !SIGN;
            if is_nan(b) || is_inf(b) {
                continue;
            }
            let r = sqrt(b, Prec::Double, rn());
            let s = f64::from_bits(b).sqrt();
            assert_eq!(r.bits, s.to_bits(), "{b:#x}");
            // The fused residual is exact unless it underflows.
            if f64::from_bits(b) > 1e-290 {
                assert_eq!(r.f.fi, s.mul_add(s, -f64::from_bits(b)) != 0.0, "{b:#x}");
            }
        }
    }

    #[test]
    fn arithmetic_matches_host_in_round_to_nearest() {
        let vals = [
            1.0,
            -2.5,
            3.0,
            1e300,
            -1e-300,
            0.1,
            7.0 / 3.0,
            5e-324,
            f64::MAX,
            0.0,
            -0.0,
        ];
        for &a in &vals {
            for &b in &vals {
                assert_eq!(
                    add(d(a), d(b), Prec::Double, rn()).bits,
                    d(a + b),
                    "{a}+{b}"
                );
                assert_eq!(
                    sub(d(a), d(b), Prec::Double, rn()).bits,
                    d(a - b),
                    "{a}-{b}"
                );
                assert_eq!(
                    mul(d(a), d(b), Prec::Double, rn()).bits,
                    d(a * b),
                    "{a}*{b}"
                );
                if b != 0.0 {
                    assert_eq!(
                        div(d(a), d(b), Prec::Double, rn()).bits,
                        d(a / b),
                        "{a}/{b}"
                    );
                }
                for &c in &vals {
                    let r = fma(d(a), d(c), d(b), false, false, Prec::Double, rn());
                    assert_eq!(r.bits, d(a.mul_add(c, b)), "{a}*{c}+{b}");
                }
            }
        }
    }

    #[test]
    fn single_precision_rounds_once() {
        // 1 + 2^-24 + 2^-60 rounded to double is 1 + 2^-24, a tie that rounds to 1.0 in
        // single; rounded once to single it is 1 + 2^-23.
        let b = d(2f64.powi(-24) + 2f64.powi(-60));
        assert_eq!(
            add(d(1.0), b, Prec::Single, rn()).bits as u32,
            (1.0f32 + f32::EPSILON).to_bits()
        );
    }

    /// The host fast path and the quad path agree on everything they both handle.
    #[test]
    fn host_fast_path_equals_quad_path() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [
            ONE_BITS,
            0x3ff0_0000_0000_0001,
            0x3fef_ffff_ffff_ffff,
            0x3ca0_0000_0000_0000,
            0x4330_0000_0000_0000,
        ];
        let mut compared = [0usize; 5];
        for k in 0..200_000 {
            let pick = |r: u64| -> u64 {
                match r % 4 {
                    0 => edges[(r >> 8) as usize % edges.len()] ^ (r & 1 << 63),
                    // Moderate exponents, so that the fast path applies.
                    1 | 2 => (r & 0x800f_ffff_ffff_ffff) | (((r >> 52) % 600 + 1023 - 300) << 52),
                    _ => r,
                }
            };
            let (a, b) = (pick(next()), pick(next()));
            let b = if k % 3 == 0 {
                b ^ (a & 0xffff_ffff_ffff_ff00) & 0x800f_ffff_ffff_ff00
                    | (a & 0x7ff0_0000_0000_0000)
            } else {
                b
            };
            if is_nan(a) || is_nan(b) || is_inf(a) || is_inf(b) {
                continue;
            }
            let e = rn();
            if let Some(r) = host::add(a, b, Prec::Double, e) {
                assert_eq!(r, add_quad(a, b, Prec::Double, e), "{a:#x} + {b:#x}");
                compared[0] += 1;
            }
            if let Some(r) = host::mul(a, b, Prec::Double, e) {
                assert_eq!(r, mul_quad(a, b, Prec::Double, e), "{a:#x} * {b:#x}");
                compared[1] += 1;
            }
            if let Some(r) = host::div(a, b, Prec::Double, e) {
                assert_eq!(r, div_quad(a, b, Prec::Double, e), "{a:#x} / {b:#x}");
                compared[2] += 1;
            }
            let c = pick(next());
            let c = if k % 2 == 0 {
                c
            } else {
                (a ^ b ^ c) & 0x800f_ffff_ffff_ffff | (c & 0x7ff0_0000_0000_0000)
            };
            if !is_nan(c) && !is_inf(c) {
                for b in [b, mul(a, c, Prec::Double, e).bits ^ SIGN] {
                    if let Some(r) = host::fma(a, c, b, Prec::Double, e) {
                        assert_eq!(
                            r,
                            fma_quad(a, c, b, Prec::Double, e),
                            "{a:#x} * {c:#x} + {b:#x}"
                        );
                        compared[4] += 1;
                    }
                }
            }
            if let Some(r) = host::sqrt(a, Prec::Double, e) {
                assert_eq!(r, round(sqrt_odd(a), Prec::Double, e), "sqrt {a:#x}");
                compared[3] += 1;
            }
        }
        assert!(compared.iter().all(|&n| n > 10_000), "{compared:?}");
    }

    const ONE_BITS: u64 = 0x3ff0_0000_0000_0000;
}
