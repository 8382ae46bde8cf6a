//! Instruction-level tests of the FPU and VSX floating point. Expected values are derived
//! by hand (comments say how) or from the host's IEEE arithmetic where it is provably the
//! same (round to nearest, no NaN results).

use super::fpscr::{self, *};
use crate::cpu::{Exception, ProgramKind, msr};
use crate::interp::Cpu;
use crate::interp::test_util::{cpu, run};

const MAX: u64 = 0x7fef_ffff_ffff_ffff;
const DENORM_MAX: u64 = 0x000f_ffff_ffff_ffff;
const ONE: u64 = 0x3ff0_0000_0000_0000;
const QNAN: u64 = 0x7ff8_0000_0000_0000;

fn d(x: f64) -> u64 {
    x.to_bits()
}

/// A-form: opcode, FRT, FRA, FRB, FRC, XO, Rc.
fn a_form(op: u32, t: u32, a: u32, b: u32, c: u32, xo: u32, rc: bool) -> u32 {
    op << 26 | t << 21 | a << 16 | b << 11 | c << 6 | xo << 1 | rc as u32
}
/// X-form with opcode 63 (or 59).
fn x_form(op: u32, t: u32, a: u32, b: u32, xo: u32, rc: bool) -> u32 {
    op << 26 | t << 21 | a << 16 | b << 11 | xo << 1 | rc as u32
}
/// XX3 form (opcode 60).
fn xx3(t: u32, a: u32, b: u32, xo: u32) -> u32 {
    60 << 26
        | (t & 31) << 21
        | (a & 31) << 16
        | (b & 31) << 11
        | xo << 3
        | (a >> 5) << 2
        | (b >> 5) << 1
        | t >> 5
}
/// XX2 form (opcode 60).
fn xx2(t: u32, b: u32, xo: u32) -> u32 {
    60 << 26 | (t & 31) << 21 | (b & 31) << 11 | xo << 2 | (b >> 5) << 1 | t >> 5
}

fn fadd(t: u32, a: u32, b: u32) -> u32 {
    a_form(63, t, a, b, 0, 21, false)
}
fn fmul(t: u32, a: u32, c: u32) -> u32 {
    a_form(63, t, a, 0, c, 25, false)
}
fn fdiv(t: u32, a: u32, b: u32) -> u32 {
    a_form(63, t, a, b, 0, 18, false)
}
fn fmadd(t: u32, a: u32, c: u32, b: u32) -> u32 {
    a_form(63, t, a, b, c, 29, false)
}

/// Runs one instruction with FPRs 1.. set to `fprs` and the given FPSCR.
fn exec(word: u32, fpscr: u64, fprs: &[u64]) -> Cpu {
    let mut c = cpu();
    c.st.fpscr = fpscr;
    for (k, &v) in fprs.iter().enumerate() {
        c.st.set_fpr(k as u32 + 1, v);
    }
    run(&mut c, &[word]);
    c
}

/// Executes one instruction word directly (to see the exception it raises).
fn step(c: &mut Cpu, word: u32) -> Result<(), Exception> {
    c.st.pc = 0x1000;
    c.nia = 0x1004;
    c.execute(word)
}

#[test]
fn rounding_modes_fi_and_fr() {
    // 1 + 1.5 ulp lies halfway between 1 + 1 ulp and 1 + 2 ulp.
    let b = 0x3cb8_0000_0000_0000; // 1.5 * 2^-52
    let cases = [
        (0, ONE + 2, true),  // nearest: tie to even (…10), rounded up
        (1, ONE + 1, false), // toward zero
        (2, ONE + 2, true),  // toward +inf
        (3, ONE + 1, false), // toward -inf
    ];
    for (rn, want, up) in cases {
        let c = exec(fadd(1, 2, 3), rn, &[0, ONE, b]);
        assert_eq!(c.st.fpr(1), want, "RN={rn}");
        let f = c.st.fpscr;
        assert_eq!(f & (XX | FI | FX), XX | FI | FX, "RN={rn}");
        assert_eq!(f & FR != 0, up, "RN={rn}");
        assert_eq!(f & FPRF, class::POS_NORMAL);
    }
    // Negative operands: toward -inf now rounds the magnitude up.
    let c = exec(fadd(1, 2, 3), 3, &[0, ONE | 1 << 63, b | 1 << 63]);
    assert_eq!(c.st.fpr(1), (ONE + 2) | 1 << 63);
    assert_ne!(c.st.fpscr & FR, 0);
    // An exact result clears FI and FR.
    let c = exec(fadd(1, 2, 3), FI | FR, &[0, d(1.0), d(2.0)]);
    assert_eq!(c.st.fpr(1), d(3.0));
    assert_eq!(c.st.fpscr & (FI | FR | XX | FX), 0);
}

#[test]
fn fprf_classes() {
    let cases = [
        (d(1.5), d(2.0), class::POS_NORMAL),
        (d(-1.5), d(2.0), class::NEG_NORMAL),
        (d(0.0), d(-2.0), class::NEG_ZERO),
        (1, d(0.5), class::POS_ZERO), // the smallest denormal halved rounds to +0 (tie to even)
        (0x0010_0000_0000_0000, d(-0.5), class::NEG_DENORMAL),
        (MAX, d(2.0), class::POS_INF),
    ];
    for (a, c_, want) in cases {
        let c = exec(fmul(1, 2, 3), 0, &[0, a, c_]);
        assert_eq!(c.st.fpscr & FPRF, want, "{a:#x} * {c_:#x}");
    }
}

#[test]
fn nan_propagation_order_and_snan_quieting() {
    let qa = 0x7ff8_0000_0000_00aa;
    let qb = 0x7ff8_0000_0000_00bb;
    let qc = 0x7ff8_0000_0000_00cc;
    let sb = 0x7ff0_0000_0000_00bb;
    // fmadd FRT = FRA*FRC + FRB: FRA's NaN first, then FRB's, then FRC's.
    let c = exec(fmadd(1, 2, 4, 3), 0, &[0, qa, qb, qc]);
    assert_eq!(c.st.fpr(1), qa);
    let c = exec(fmadd(1, 2, 4, 3), 0, &[0, ONE, qb, qc]);
    assert_eq!(c.st.fpr(1), qb);
    let c = exec(fmadd(1, 2, 4, 3), 0, &[0, ONE, ONE, qc]);
    assert_eq!(c.st.fpr(1), qc);
    assert_eq!(c.st.fpscr & (VX | VXSNAN), 0);
    // A signalling NaN is returned quiet, and any SNaN operand raises VXSNAN.
    let c = exec(fadd(1, 2, 3), 0, &[0, ONE, sb]);
    assert_eq!(c.st.fpr(1), sb | 1 << 51);
    assert_eq!(c.st.fpscr, FX | VX | VXSNAN | class::QNAN);
    let c = exec(fadd(1, 2, 3), 0, &[0, qa, sb]);
    assert_eq!(c.st.fpr(1), qa);
    assert_ne!(c.st.fpscr & VXSNAN, 0);
    // Invalid operations without NaN operands give the default QNaN.
    let inf = 0x7ff0_0000_0000_0000;
    let c = exec(a_form(63, 1, 2, 3, 0, 20, false), 0, &[0, inf, inf]); // fsub inf - inf
    assert_eq!(c.st.fpr(1), QNAN);
    assert_eq!(c.st.fpscr & (VXISI | VX | FX), VXISI | VX | FX);
    let c = exec(fmul(1, 2, 3), 0, &[0, 0, inf]);
    assert_eq!((c.st.fpr(1), c.st.fpscr & VXIMZ), (QNAN, VXIMZ));
    let c = exec(fdiv(1, 2, 3), 0, &[0, 0, 1 << 63]);
    assert_eq!((c.st.fpr(1), c.st.fpscr & VXZDZ), (QNAN, VXZDZ));
    let c = exec(a_form(63, 1, 0, 2, 0, 22, false), 0, &[0, d(-4.0)]); // fsqrt(-4)
    assert_eq!((c.st.fpr(1), c.st.fpscr & VXSQRT), (QNAN, VXSQRT));
    // Single precision: the NaN keeps only the fraction bits a single has.
    let c = exec(
        a_form(59, 1, 2, 3, 0, 21, false),
        0,
        &[0, 0x7ff8_0000_0000_0001, ONE],
    );
    assert_eq!(c.st.fpr(1), QNAN);
}

#[test]
fn overflow_and_underflow() {
    // MAX * 2 overflows: infinity, OX, XX, FI.
    let c = exec(fmul(1, 2, 3), 0, &[0, MAX, d(2.0)]);
    assert_eq!(c.st.fpr(1), 0x7ff0_0000_0000_0000);
    assert_eq!(c.st.fpscr & (OX | XX | FI | FX), OX | XX | FI | FX);
    // Toward zero, the largest finite number is delivered, still with OX.
    let c = exec(fmul(1, 2, 3), 1, &[0, MAX, d(2.0)]);
    assert_eq!(c.st.fpr(1), MAX);
    assert_ne!(c.st.fpscr & OX, 0);
    // With OE the result is the exact product scaled by 2^-1536: 2^1024 * (2 - 2^-52) / 2^1536.
    let c = exec(fmul(1, 2, 3), OE, &[0, MAX, d(2.0)]);
    assert_eq!(c.st.fpr(1), 0x1fef_ffff_ffff_ffff + (1 << 52));
    assert_eq!(c.st.fpscr & (OX | FEX | XX), OX | FEX);
    // Tininess is detected before rounding: (1 + 2^-52) * (2^-1022 - 2^-1074) is below
    // 2^-1022 but rounds to it.
    let c = exec(fmul(1, 2, 3), 0, &[0, ONE + 1, DENORM_MAX]);
    assert_eq!(c.st.fpr(1), 0x0010_0000_0000_0000);
    assert_eq!(c.st.fpscr & (UX | XX | FPRF), UX | XX | class::POS_NORMAL);
    // An exact denormal result does not underflow unless UE is set.
    let c = exec(fmul(1, 2, 3), 0, &[0, 0x0010_0000_0000_0000, d(0.5)]);
    assert_eq!(c.st.fpr(1), 0x0008_0000_0000_0000);
    assert_eq!(c.st.fpscr & (UX | XX), 0);
    let c = exec(fmul(1, 2, 3), UE, &[0, 0x0010_0000_0000_0000, d(0.5)]);
    assert_eq!(c.st.fpr(1), 0x6000_0000_0000_0000); // 2^-1023 * 2^1536
    assert_eq!(c.st.fpscr & (UX | FEX | XX), UX | FEX);
}

#[test]
fn enabled_exceptions_interrupt_in_precise_mode() {
    // Inexact with XE: result written, FPSCR updated, CR1 of fmul. not recorded.
    let word = a_form(63, 1, 2, 0, 3, 25, true);
    let mut c = cpu();
    c.st.msr |= msr::FE0 | msr::FE1;
    c.st.fpscr = XE;
    c.st.set_fpr(2, d(1.0 / 3.0));
    c.st.set_fpr(3, d(3.0));
    assert_eq!(
        step(&mut c, word),
        Err(Exception::Program(ProgramKind::FpEnabled))
    );
    assert_eq!(c.st.fpr(1), d(1.0));
    assert_eq!(c.st.fpscr & (XX | FEX | FX), XX | FEX | FX);
    assert_eq!(c.st.crf(1), 0);
    // Without FE0/FE1 the same instruction completes and records CR1 (FX, FEX).
    c.st.msr &= !(msr::FE0 | msr::FE1);
    c.st.fpscr = XE;
    assert_eq!(step(&mut c, word), Ok(()));
    assert_eq!(c.st.crf(1), 0b1100);
    // An enabled invalid operation leaves the target alone.
    c.st.fpscr = VE;
    c.st.set_fpr(1, 0x1234);
    c.st.set_fpr(2, 0);
    c.st.set_fpr(3, 0);
    assert_eq!(step(&mut c, fdiv(1, 2, 3)), Ok(()));
    assert_eq!(c.st.fpr(1), 0x1234);
    assert_eq!(c.st.fpscr & (VXZDZ | VX | FEX | FPRF), VXZDZ | VX | FEX);
    c.st.msr |= msr::FE0;
    assert_eq!(
        step(&mut c, fdiv(1, 2, 3)),
        Err(Exception::Program(ProgramKind::FpEnabled))
    );
    // Zero divide with ZE, likewise.
    c.st.fpscr = ZE;
    c.st.set_fpr(2, ONE);
    assert_eq!(
        step(&mut c, fdiv(1, 2, 3)),
        Err(Exception::Program(ProgramKind::FpEnabled))
    );
    assert_eq!(c.st.fpr(1), 0x1234);
    assert_eq!(c.st.fpscr & (ZX | FEX), ZX | FEX);
    // Without enabled bits: 1/0 is +inf with ZX.
    c.st.fpscr = 0;
    assert_eq!(step(&mut c, fdiv(1, 2, 3)), Ok(()));
    assert_eq!(c.st.fpr(1), 0x7ff0_0000_0000_0000);
    assert_eq!(c.st.fpscr & (ZX | FPRF), ZX | class::POS_INF);
}

#[test]
fn fused_multiply_add_rounds_once() {
    // (1 + 2^-52)(1 - 2^-52) - 1 = -2^-104 exactly; fmul then fadd would give 0.
    let (a, c_) = (ONE + 1, 0x3fef_ffff_ffff_fffe);
    let c = exec(fmadd(1, 2, 3, 4), 0, &[0, a, c_, d(-1.0)]);
    assert_eq!(c.st.fpr(1), d(-(2f64.powi(-104))));
    let c = exec(fmul(1, 2, 3), 0, &[0, a, c_]);
    assert_eq!(c.st.fpr(1), ONE);
    // fmadds rounds the exact a*c + b once to single: 1 + 2^-24 + 2^-60 rounds up to
    // 1 + 2^-23 (via double it would be the tie 1 + 2^-24 and round to 1).
    let b = d(2f64.powi(-24) + 2f64.powi(-60));
    let c = exec(a_form(59, 1, 2, 3, 4, 29, false), 0, &[0, ONE, b, ONE]);
    assert_eq!(c.st.fpr(1), d(1.0 + 2f64.powi(-23)));
    // fnmsub: -(a*c - b).
    let c = exec(
        a_form(63, 1, 2, 3, 4, 30, false),
        0,
        &[0, d(2.0), d(1.0), d(3.0)],
    );
    assert_eq!(c.st.fpr(1), d(-5.0));
}

#[test]
fn conversions_to_integer() {
    let fctiw = |b: u64, rn: u64| exec(x_form(63, 1, 0, 2, 14, false), rn, &[0, b]);
    let c = fctiw(d(-3.5), 0);
    assert_eq!(c.st.fpr(1), (-4i64) as u64); // ties to even, sign-extended
    assert_eq!(c.st.fpscr & (XX | FI | VXCVI), XX | FI);
    assert_eq!(fctiw(d(-3.5), 1).st.fpr(1), (-3i64) as u64);
    assert_eq!(fctiw(d(2.5), 2).st.fpr(1), 3);
    // Saturation and VXCVI; FPRF reports a QNaN class.
    let c = fctiw(d(3e10), 0);
    assert_eq!(c.st.fpr(1), 0x7fff_ffff);
    assert_eq!(
        c.st.fpscr & (VXCVI | VX | XX | FPRF),
        VXCVI | VX | class::QNAN
    );
    assert_eq!(fctiw(d(-3e10), 0).st.fpr(1), (i32::MIN as i64) as u64);
    let c = fctiw(0x7ff0_0000_0000_0001, 0);
    assert_eq!(c.st.fpr(1), 0x8000_0000);
    assert_eq!(c.st.fpscr & (VXCVI | VXSNAN), VXCVI | VXSNAN);
    // Unsigned: negative values that round to 0 are fine, others saturate at 0.
    let fctiwu = |b: u64| exec(x_form(63, 1, 0, 2, 142, false), 0, &[0, b]);
    assert_eq!(fctiwu(d(-0.3)).st.fpscr & VXCVI, 0);
    assert_eq!(fctiwu(d(-0.7)).st.fpr(1), 0);
    assert_ne!(fctiwu(d(-0.7)).st.fpscr & VXCVI, 0);
    assert_eq!(fctiwu(d(4294967295.0)).st.fpr(1), 0xffff_ffff);
    // fctidz: 2^63 is out of range, the largest double below it is not.
    let fctidz = |b: u64| exec(x_form(63, 1, 0, 2, 815, false), 0, &[0, b]);
    assert_eq!(
        fctidz(d(9.223372036854775e18)).st.fpr(1),
        9223372036854774784
    );
    assert_eq!(fctidz(d(2f64.powi(63))).st.fpr(1), i64::MAX as u64);
    // fcfid: 2^53 + 1 is not representable; to nearest it is 2^53.
    let c = exec(x_form(63, 1, 0, 2, 846, false), 0, &[0, (1 << 53) + 1]);
    assert_eq!(c.st.fpr(1), d(9007199254740992.0));
    assert_eq!(c.st.fpscr & (XX | FI | FPRF), XX | FI | class::POS_NORMAL);
    // frsp: rounds to single precision, result in double format.
    let c = exec(x_form(63, 1, 0, 2, 12, false), 0, &[0, d(0.1)]);
    assert_eq!(c.st.fpr(1), d(0.1f32 as f64));
    // frin rounds half away from zero and never reports inexact.
    let c = exec(x_form(63, 1, 0, 2, 392, false), FI, &[0, d(-2.5)]);
    assert_eq!(c.st.fpr(1), d(-3.0));
    assert_eq!(c.st.fpscr & (XX | FI), 0);
}

#[test]
fn select_moves_and_compares() {
    let fsel = |a: u64| {
        exec(
            a_form(63, 1, 2, 3, 4, 23, false),
            0,
            &[0, a, d(10.0), d(20.0)],
        )
        .st
        .fpr(1)
    };
    assert_eq!(fsel(d(0.0)), d(20.0));
    assert_eq!(fsel(d(-0.0)), d(20.0));
    assert_eq!(fsel(d(-1.0)), d(10.0));
    assert_eq!(fsel(QNAN), d(10.0));
    let c = exec(x_form(63, 1, 2, 3, 8, false), 0, &[0, d(-1.0), d(2.0)]); // fcpsgn
    assert_eq!(c.st.fpr(1), d(-2.0));
    let c = exec(x_form(63, 1, 0, 2, 136, false), 0, &[0, d(2.0)]); // fnabs
    assert_eq!(c.st.fpr(1), d(-2.0));
    let c = exec(
        x_form(63, 1, 2, 3, 966, false),
        0,
        &[0, 0x1111_2222_3333_4444, 0x5555_6666_7777_8888],
    );
    assert_eq!(c.st.fpr(1), 0x1111_2222_5555_6666); // fmrgew
    // fcmpu: CR field and FPCC; NaN → unordered, VXSNAN only for SNaN.
    let fcmpu = |a: u64, b: u64| exec(x_form(63, 3 << 2, 2, 3, 0, false), 0, &[0, a, b]);
    let c = fcmpu(d(1.0), d(2.0));
    assert_eq!((c.st.crf(3), c.st.fpscr & FPCC), (0b1000, 0b1000 << 12));
    assert_eq!(fcmpu(d(0.0), d(-0.0)).st.crf(3), 0b0010);
    let c = fcmpu(QNAN, d(1.0));
    assert_eq!((c.st.crf(3), c.st.fpscr & VX), (0b0001, 0));
    assert_ne!(fcmpu(0x7ff0_0000_0000_0001, d(1.0)).st.fpscr & VXSNAN, 0);
    // fcmpo: any NaN raises VXVC.
    let c = exec(x_form(63, 0, 2, 3, 32, false), 0, &[0, QNAN, d(1.0)]);
    assert_eq!(c.st.fpscr & (VXVC | VX | FX), VXVC | VX | FX);
}

#[test]
fn fpscr_access() {
    // mtfsfi 7,2 (RN = toward +inf), then mffs.
    let mut c = cpu();
    run(
        &mut c,
        &[
            x_form(63, 7 << 2, 0, 2 << 1, 134, false),
            x_form(63, 5, 0, 0, 583, false),
        ],
    );
    assert_eq!(c.st.fpscr, 2);
    assert_eq!(c.st.fpr(5), 2);
    // mtfsb1 VXSNAN sets VX; mtfsb0 clears it again. FEX and VX cannot be set directly.
    run(&mut c, &[x_form(63, 7, 0, 0, 38, false)]);
    assert_eq!(c.st.fpscr, 2 | VXSNAN | VX);
    run(
        &mut c,
        &[
            x_form(63, 7, 0, 0, 70, false),
            x_form(63, 1, 0, 0, 38, false),
            x_form(63, 2, 0, 0, 38, false),
        ],
    );
    assert_eq!(c.st.fpscr, 2);
    // mtfsf 0x81 with FRB: fields 0 (FX..OX) and 7 (XE NI RN); Rc records CR1.
    c.st.set_fpr(1, 0x9000_000b);
    run(&mut c, &[0xfc00_0000 | 0x81 << 17 | 1 << 11 | 711 << 1 | 1]);
    assert_eq!(c.st.fpscr, FX | OX | XE | 3);
    assert_eq!(c.st.crf(1), 0b1001);
    // mcrfs cr2, field 0: copies FX FEX VX OX and clears the exception bits.
    run(&mut c, &[x_form(63, 2 << 2, 0, 0, 64, false)]);
    assert_eq!(c.st.crf(2), 0b1001);
    assert_eq!(c.st.fpscr, XE | 3);
    // Enabling an exception whose bit is set interrupts in precise mode.
    c.st.fpscr = XX;
    c.st.msr |= msr::FE0;
    assert_eq!(
        step(&mut c, x_form(63, 7 << 2, 0, 8 << 1, 134, false)),
        Err(Exception::Program(ProgramKind::FpEnabled))
    );
    assert_eq!(c.st.fpscr, XX | XE | FEX);
}

#[test]
fn facility_unavailable() {
    let mut c = cpu();
    c.st.msr &= !msr::FP;
    assert_eq!(step(&mut c, fadd(1, 2, 3)), Err(Exception::FpUnavailable));
    let mut c = cpu();
    c.st.msr &= !msr::VSX;
    assert_eq!(
        step(&mut c, xx3(1, 2, 3, 32)),
        Err(Exception::VsxUnavailable)
    );
}

#[test]
fn vsx_scalar_and_vector() {
    let mut c = cpu();
    c.st.vsr[34] = (d(1.5) as u128) << 64 | 0xdead;
    c.st.vsr[35] = (d(2.25) as u128) << 64 | 0xbeef;
    // xsadddp vs33, vs34, vs35: doubleword 1 of the target becomes 0.
    run(&mut c, &[xx3(33, 34, 35, 32)]);
    assert_eq!(c.st.vsr[33], (d(3.75) as u128) << 64);
    assert_eq!(c.st.fpscr & FPRF, class::POS_NORMAL);
    // xvmuldp: both doublewords; vector forms leave FPRF alone.
    c.st.fpscr = 0;
    c.st.vsr[2] = (d(3.0) as u128) << 64 | d(-0.5) as u128;
    c.st.vsr[3] = (d(1.0 / 3.0) as u128) << 64 | d(8.0) as u128;
    run(&mut c, &[xx3(4, 2, 3, 112)]);
    assert_eq!(
        c.st.vsr[4],
        (d(3.0 * (1.0 / 3.0)) as u128) << 64 | d(-4.0) as u128
    );
    assert_eq!(c.st.fpscr & (FPRF | FI), 0);
    // xsmaddadp XT = XA*XB + XT, xsmaddmdp XT = XA*XT + XB.
    c.st.vsr[5] = (d(2.0) as u128) << 64;
    c.st.vsr[6] = (d(3.0) as u128) << 64;
    c.st.vsr[7] = (d(5.0) as u128) << 64;
    let mut c2 = Cpu {
        st: c.st.clone(),
        ..cpu()
    };
    run(&mut c, &[xx3(7, 5, 6, 33)]);
    assert_eq!(c.st.vsr[7] >> 64, d(2.0 * 3.0 + 5.0) as u128);
    run(&mut c2, &[xx3(7, 5, 6, 41)]);
    assert_eq!(c2.st.vsr[7] >> 64, d(2.0 * 5.0 + 3.0) as u128);
    // xvcmpgtdp. sets CR6 (all true / none true).
    c.st.vsr[8] = (d(2.0) as u128) << 64 | d(1.0) as u128;
    c.st.vsr[9] = (d(1.0) as u128) << 64 | d(2.0) as u128;
    run(&mut c, &[xx3(10, 8, 9, 107) | 1 << 10]);
    assert_eq!(c.st.vsr[10], (u64::MAX as u128) << 64);
    assert_eq!(c.st.crf(6), 0);
    run(&mut c, &[xx3(10, 8, 8, 107) | 1 << 10]);
    assert_eq!(c.st.crf(6), 0b0010);
    // xscvdpsxws: saturating, truncating, result replicated in words 0 and 1.
    c.st.vsr[11] = (d(-7.9) as u128) << 64;
    run(&mut c, &[xx2(12, 11, 88)]);
    assert_eq!(c.st.vsr[12], 0xffff_fff9_ffff_fff9u128 << 64);
    // xvcvsxwdp: words 0 and 2 to doubles.
    c.st.vsr[13] = 0xffff_fffe_0000_0000_0000_0005_0000_0000;
    run(&mut c, &[xx2(14, 13, 248)]);
    assert_eq!(c.st.vsr[14], (d(-2.0) as u128) << 64 | d(5.0) as u128);
    // xvaddsp works on the four singles.
    let w = |x: f32| x.to_bits() as u128;
    c.st.vsr[15] = w(1.0) << 96 | w(2.0) << 64 | w(-3.0) << 32 | w(0.5);
    c.st.vsr[16] = w(0.25) << 96 | w(2.0) << 64 | w(3.0) << 32 | w(1e-8);
    run(&mut c, &[xx3(17, 15, 16, 64)]);
    assert_eq!(
        c.st.vsr[17],
        w(1.25) << 96 | w(4.0) << 64 | w(0.0) << 32 | w(0.5 + 1e-8)
    );
    // xsmaxdp: a quiet NaN loses, +0 beats -0.
    c.st.vsr[18] = (QNAN as u128) << 64;
    c.st.vsr[19] = (d(-1.0) as u128) << 64;
    run(&mut c, &[xx3(20, 18, 19, 160)]);
    assert_eq!(c.st.vsr[20] >> 64, d(-1.0) as u128);
    c.st.vsr[18] = (d(-0.0) as u128) << 64;
    c.st.vsr[19] = (d(0.0) as u128) << 64;
    run(&mut c, &[xx3(20, 18, 19, 160)]);
    assert_eq!(c.st.vsr[20] >> 64, 0);
}

#[test]
fn fpscr_summaries_are_consistent_after_any_update() {
    // Whatever an instruction does, VX and FEX stay the summaries of their bits.
    let words = [
        fadd(1, 2, 3),
        fmul(1, 2, 3),
        fdiv(1, 2, 3),
        fmadd(1, 2, 3, 4),
    ];
    let vals = [
        0,
        1 << 63,
        ONE,
        MAX,
        1,
        QNAN,
        0x7ff0_0000_0000_0001,
        0x7ff0_0000_0000_0000,
    ];
    for &w in &words {
        for &a in &vals {
            for &b in &vals {
                for en in [0, VE | ZE, OE | UE | XE] {
                    let c = exec(w, en, &[0, a, b, d(3.0)]);
                    assert_eq!(
                        c.st.fpscr,
                        fpscr::with_summaries(c.st.fpscr),
                        "{w:#x} {a:#x} {b:#x}"
                    );
                }
            }
        }
    }
}
