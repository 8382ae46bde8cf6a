//! The FPSCR: bit masks, FPRF classes, and the one routine that folds what an instruction
//! raised into the register (sticky bits, summaries, suppressed results, enabled
//! exceptions).
//!
//! The status bits follow QEMU 7.2 (the oracle of our golden vectors), also where it is
//! stricter or looser than the ISA: FX is set whenever an instruction raises an exception
//! (the ISA: only when an exception bit changes from 0 to 1), invalid arithmetic and zero
//! divides clear FR and FI, and an instruction whose enabled exception interrupts does not
//! record CR1. FR is the exception: QEMU never computes it; we set it as the ISA says.

use crate::cpu::{CpuState, msr};

// Bits of the low word, named as in the ISA (FX is bit 32 of the 64-bit register).
pub const FX: u64 = 1 << 31;
pub const FEX: u64 = 1 << 30;
pub const VX: u64 = 1 << 29;
pub const OX: u64 = 1 << 28;
pub const UX: u64 = 1 << 27;
pub const ZX: u64 = 1 << 26;
pub const XX: u64 = 1 << 25;
pub const VXSNAN: u64 = 1 << 24;
pub const VXISI: u64 = 1 << 23;
pub const VXIDI: u64 = 1 << 22;
pub const VXZDZ: u64 = 1 << 21;
pub const VXIMZ: u64 = 1 << 20;
pub const VXVC: u64 = 1 << 19;
pub const FR: u64 = 1 << 18;
pub const FI: u64 = 1 << 17;
/// Result flags: class (C) and condition code (FPCC: FL FG FE FU).
pub const FPRF: u64 = 0x1f << 12;
pub const FPCC: u64 = 0xf << 12;
pub const C: u64 = 1 << 16;
pub const VXSOFT: u64 = 1 << 10;
pub const VXSQRT: u64 = 1 << 9;
pub const VXCVI: u64 = 1 << 8;
pub const VE: u64 = 1 << 7;
pub const OE: u64 = 1 << 6;
pub const UE: u64 = 1 << 5;
pub const ZE: u64 = 1 << 4;
pub const XE: u64 = 1 << 3;
pub const NI: u64 = 1 << 2;
pub const RN: u64 = 3;
/// Decimal rounding mode (bits 29-31), the only implemented bits of the high word.
pub const DRN: u64 = 7 << 32;

/// All invalid-operation exception bits.
pub const VX_ALL: u64 = VXSNAN | VXISI | VXIDI | VXZDZ | VXIMZ | VXVC | VXSOFT | VXSQRT | VXCVI;
/// All exception bits (those whose 0→1 change sets FX).
pub const EXCEPTIONS: u64 = OX | UX | ZX | XX | VX_ALL;
/// Bits software can write: everything implemented except the summaries FEX and VX.
pub const WRITABLE: u64 = DRN | (0xffff_f7ff & !(FEX | VX));

/// FPRF values (already shifted into place).
pub mod class {
    pub const QNAN: u64 = 0x11 << 12;
    pub const NEG_INF: u64 = 0x09 << 12;
    pub const NEG_NORMAL: u64 = 0x08 << 12;
    pub const NEG_DENORMAL: u64 = 0x18 << 12;
    pub const NEG_ZERO: u64 = 0x12 << 12;
    pub const POS_ZERO: u64 = 0x02 << 12;
    pub const POS_DENORMAL: u64 = 0x14 << 12;
    pub const POS_NORMAL: u64 = 0x04 << 12;
    pub const POS_INF: u64 = 0x05 << 12;
    /// Never produced by arithmetic; QEMU reports 0.
    pub const SNAN: u64 = 0;
}

/// FPRF of a double-format value.
pub fn class_double(x: u64) -> u64 {
    classify(
        x >> 63 != 0,
        (x >> 52) & 0x7ff,
        0x7ff,
        x & ((1 << 52) - 1),
        1 << 51,
    )
}

/// FPRF of a single-format value.
pub fn class_single(x: u32) -> u64 {
    let x = x as u64;
    classify(x >> 31 != 0, (x >> 23) & 0xff, 0xff, x & 0x7f_ffff, 1 << 22)
}

fn classify(neg: bool, exp: u64, exp_max: u64, frac: u64, quiet: u64) -> u64 {
    use class::*;
    match (exp, frac) {
        (e, f) if e == exp_max && f != 0 => {
            if f & quiet != 0 {
                QNAN
            } else {
                SNAN
            }
        }
        (e, _) if e == exp_max => {
            if neg {
                NEG_INF
            } else {
                POS_INF
            }
        }
        (0, 0) => {
            if neg {
                NEG_ZERO
            } else {
                POS_ZERO
            }
        }
        (0, _) => {
            if neg {
                NEG_DENORMAL
            } else {
                POS_DENORMAL
            }
        }
        _ => {
            if neg {
                NEG_NORMAL
            } else {
                POS_NORMAL
            }
        }
    }
}

/// What one instruction (or one vector element) raised, before it reaches the FPSCR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// Exception bits raised: any of `EXCEPTIONS`.
    pub exc: u64,
    /// The result is inexact (FI).
    pub fi: bool,
    /// The result's magnitude was rounded up (FR).
    pub fr: bool,
}

impl std::ops::BitOrAssign for Flags {
    fn bitor_assign(&mut self, o: Flags) {
        self.exc |= o.exc;
        self.fi |= o.fi;
        self.fr |= o.fr;
    }
}

/// An enabled invalid-operation or zero-divide exception leaves the target unchanged.
pub fn suppresses(fpscr: u64, exc: u64) -> bool {
    (exc & VX_ALL != 0 && fpscr & VE != 0) || (exc & ZX != 0 && fpscr & ZE != 0)
}

/// Exceptions in `exc` that the enable bits of `fpscr` enable.
pub fn enabled(fpscr: u64, exc: u64) -> bool {
    (exc & VX_ALL != 0 && fpscr & VE != 0)
        || (exc & OX != 0 && fpscr & OE != 0)
        || (exc & UX != 0 && fpscr & UE != 0)
        || (exc & ZX != 0 && fpscr & ZE != 0)
        || (exc & XX != 0 && fpscr & XE != 0)
}

/// Recomputes the summary bits VX and FEX from the exception and enable bits.
pub fn with_summaries(f: u64) -> u64 {
    let mut f = f & !(VX | FEX);
    if f & VX_ALL != 0 {
        f |= VX;
    }
    if enabled(f, f) {
        f |= FEX;
    }
    f
}

/// How an instruction reports its result in FPRF, FR and FI.
#[derive(Clone, Copy, Debug)]
pub enum Report {
    /// FPRF from the result (when written), FR and FI from the rounding.
    Full(u64),
    /// FR and FI from the rounding, FPRF untouched.
    Rounding,
    /// Exception bits only (vector instructions, compares).
    Exceptions,
}

/// Folds `f` into the FPSCR. `written` says whether the result was stored (it is not when
/// `suppresses`). Returns true when an enabled exception occurred, i.e. the instruction
/// must end in a floating-point enabled program interrupt if MSR[FE0|FE1] allows.
pub fn update(st: &mut CpuState, f: Flags, written: bool, report: Report) -> bool {
    let old = st.fpscr;
    let mut s = old | f.exc;
    if f.exc != 0 {
        s |= FX;
    }
    // Invalid arithmetic and conversions, and zero divides, clear FR and FI (an SNaN
    // operand or an invalid compare alone do not).
    if f.exc & (VXISI | VXIDI | VXZDZ | VXIMZ | VXSQRT | VXCVI | ZX) != 0 {
        s &= !(FR | FI);
    }
    if written {
        if let Report::Full(fprf) = report {
            s = (s & !FPRF) | fprf;
        }
        if matches!(report, Report::Full(_) | Report::Rounding) {
            s &= !(FR | FI);
            s |= if f.fr { FR } else { 0 } | if f.fi { FI } else { 0 };
        }
    }
    st.fpscr = with_summaries(s);
    enabled(old, f.exc)
}

/// Floating-point enabled exceptions interrupt only in one of the precise or imprecise
/// modes (MSR[FE0|FE1] != 0); user-mode Linux runs with both off unless a program asks.
pub fn interrupts(st: &CpuState) -> bool {
    st.msr & (msr::FE0 | msr::FE1) != 0
}

/// CR1 of a recording (`.`) instruction: FX, FEX, VX, OX.
pub fn cr1(st: &mut CpuState) {
    let v = ((st.fpscr >> 28) & 0xf) as u32;
    st.set_crf(1, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_double(1.0f64.to_bits()), class::POS_NORMAL);
        assert_eq!(class_double((-0.0f64).to_bits()), class::NEG_ZERO);
        assert_eq!(class_double(1), class::POS_DENORMAL);
        assert_eq!(class_double(f64::NEG_INFINITY.to_bits()), class::NEG_INF);
        assert_eq!(class_double(0x7ff8_0000_0000_0000), class::QNAN);
        assert_eq!(class_double(0x7ff0_0000_0000_0001), class::SNAN);
        assert_eq!(class_single(0x8000_0001), class::NEG_DENORMAL);
        assert_eq!(class_single(0x7f80_0000), class::POS_INF);
    }

    #[test]
    fn summaries_follow_exception_and_enable_bits() {
        assert_eq!(with_summaries(VXSNAN), VXSNAN | VX);
        assert_eq!(with_summaries(VXSNAN | VE), VXSNAN | VX | VE | FEX);
        assert_eq!(with_summaries(XX | XE | FEX | VX), XX | XE | FEX);
        assert_eq!(with_summaries(XX | OE), XX | OE);
    }

    #[test]
    fn update_sets_fx_and_suppression_rules() {
        let mut st = CpuState::new();
        st.fpscr = VE;
        let f = Flags {
            exc: VXISI,
            ..Flags::default()
        };
        assert!(suppresses(st.fpscr, f.exc));
        assert!(update(&mut st, f, false, Report::Full(class::QNAN)));
        assert_eq!(st.fpscr, VE | VXISI | VX | FX | FEX);
        // A lone SNaN with VE keeps FR/FI; other invalid operations clear them.
        st.fpscr = VE | FR | FI;
        update(
            &mut st,
            Flags {
                exc: VXSNAN,
                ..Flags::default()
            },
            false,
            Report::Full(0),
        );
        assert_eq!(st.fpscr & (FR | FI), FR | FI);
        st.fpscr = FR | FI;
        update(
            &mut st,
            Flags {
                exc: VXZDZ,
                ..Flags::default()
            },
            true,
            Report::Exceptions,
        );
        assert_eq!(st.fpscr & (FR | FI), 0);
        // Inexact with XE: written, interrupts.
        st.fpscr = XE;
        let f = Flags {
            exc: XX,
            fi: true,
            fr: true,
        };
        assert!(!suppresses(st.fpscr, f.exc));
        assert!(update(&mut st, f, true, Report::Full(class::POS_NORMAL)));
        assert_eq!(st.fpscr, XE | XX | FX | FEX | FI | FR | class::POS_NORMAL);
    }
}
