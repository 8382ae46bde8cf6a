//! Floating point: the FPU instructions (`fp.insn`, Book I ch. 4) and the VSX floating-point
//! instructions (`vsx_fp.insn`, Book I ch. 7), sharing one arithmetic core (`ieee`) and one
//! FPSCR update routine (`fpscr`).
//!
//! An enabled floating-point exception is the one program interrupt that happens after
//! the instruction changed state: the ISA updates the FPSCR (and, for overflow, underflow
//! and inexact, the target) before the interrupt, so these functions return
//! `Program(FpEnabled)` with those updates done.

pub(crate) mod fpscr;
pub(crate) mod ieee;
mod pair;
mod scalar;
mod vsx;

pub(super) use pair::*;
pub(super) use scalar::*;
pub(super) use vsx::*;

use super::{Cpu, Exec};
use crate::cpu::{Exception, ProgramKind, msr};

/// FPU instructions need MSR[FP].
#[inline]
fn fp_available(c: &Cpu) -> Exec {
    if c.st.msr & msr::FP == 0 {
        Err(Exception::FpUnavailable)
    } else {
        Ok(())
    }
}

/// VSX instructions need MSR[VSX].
#[inline]
fn vsx_available(c: &Cpu) -> Exec {
    if c.st.msr & msr::VSX == 0 {
        Err(Exception::VsxUnavailable)
    } else {
        Ok(())
    }
}

/// Ends an instruction after its FPSCR update: the enabled-exception interrupt (which
/// skips CR1), else CR1 for a recording form.
#[inline]
fn conclude(c: &mut Cpu, enabled_exception: bool, record: bool) -> Exec {
    if enabled_exception && fpscr::interrupts(&c.st) {
        return Err(Exception::Program(ProgramKind::FpEnabled));
    }
    if record {
        fpscr::cr1(&mut c.st);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
