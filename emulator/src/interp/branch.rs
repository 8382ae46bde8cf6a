//! Branches, `sc`, condition-register logic and CR moves.

use super::{Cpu, Exec};
use crate::cpu::Exception;
use crate::isa::Insn;

/// Evaluates BO/BI, decrementing CTR when BO says so. Returns whether to branch.
#[inline(always)]
fn condition(c: &mut Cpu, i: Insn, use_ctr: bool) -> bool {
    let bo = i.rt();
    let ctr_ok = if !use_ctr || bo & 4 != 0 {
        true
    } else {
        c.st.ctr = c.st.ctr.wrapping_sub(1);
        let ctr = if c.st.sf() {
            c.st.ctr
        } else {
            c.st.ctr & 0xffff_ffff
        };
        (ctr != 0) != (bo & 2 != 0)
    };
    let cond_ok = bo & 0x10 != 0 || c.st.cr_bit(i.ra()) == (bo & 8 != 0);
    ctr_ok && cond_ok
}

#[inline(always)]
fn link(c: &mut Cpu, i: Insn) {
    if i.lk() {
        c.st.lr = c.nia;
    }
}

pub(super) fn b(c: &mut Cpu, i: Insn) -> Exec {
    let base = if i.aa() != 0 { 0 } else { c.st.pc };
    link(c, i);
    c.nia = c.mask_ea(base.wrapping_add(i.li() as u64));
    Ok(())
}

pub(super) fn bc(c: &mut Cpu, i: Insn) -> Exec {
    let taken = condition(c, i, true);
    let base = if i.aa() != 0 { 0 } else { c.st.pc };
    link(c, i);
    if taken {
        c.nia = c.mask_ea(base.wrapping_add(i.bd() as u64));
    }
    Ok(())
}

/// Branch to a register (LR, CTR, TAR); the target is read before LK updates LR.
#[inline(always)]
fn branch_to(c: &mut Cpu, i: Insn, target: u64, use_ctr: bool) -> Exec {
    let taken = condition(c, i, use_ctr);
    link(c, i);
    if taken {
        c.nia = c.mask_ea(target & !3);
    }
    Ok(())
}

pub(super) fn bclr(c: &mut Cpu, i: Insn) -> Exec {
    branch_to(c, i, c.st.lr, true)
}

/// `bcctr` with a BO that decrements CTR is an invalid form in the ISA; POWER8 (and QEMU, our
/// reference) implement "test and decrement" instead, which Linux uses as a Spectre v2
/// mitigation: the CTR test uses the value before the decrement, a failed test leaves CTR
/// alone, and the target is the old CTR.
pub(super) fn bcctr(c: &mut Cpu, i: Insn) -> Exec {
    let bo = i.rt();
    if bo & 4 != 0 {
        return branch_to(c, i, c.st.ctr, false);
    }
    let target = c.st.ctr;
    link(c, i);
    let ctr = if c.st.sf() {
        target
    } else {
        target & 0xffff_ffff
    };
    if (ctr == 0) != (bo & 2 != 0) {
        return Ok(());
    }
    c.st.ctr = target.wrapping_sub(1);
    if bo & 0x10 != 0 || c.st.cr_bit(i.ra()) == (bo & 8 != 0) {
        c.nia = c.mask_ea(target & !3);
    }
    Ok(())
}

pub(super) fn bctar(c: &mut Cpu, i: Insn) -> Exec {
    branch_to(c, i, c.st.tar, true)
}

pub(super) fn sc(_: &mut Cpu, i: Insn) -> Exec {
    Err(Exception::SystemCall { lev: i.lev() as u8 })
}

// --- condition register ---

macro_rules! cr_logical {
    ($($name:ident => |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            let ($a, $b) = (c.st.cr_bit(i.ra()), c.st.cr_bit(i.rb()));
            c.st.set_cr_bit(i.rt(), $e);
            Ok(())
        })*
    };
}

cr_logical! {
    crand => |a, b| a & b;
    crandc => |a, b| a & !b;
    creqv => |a, b| a == b;
    crnand => |a, b| !(a & b);
    crnor => |a, b| !(a | b);
    cror => |a, b| a | b;
    crorc => |a, b| a | !b;
    crxor => |a, b| a ^ b;
}

pub(super) fn mcrf(c: &mut Cpu, i: Insn) -> Exec {
    let v = c.st.crf(i.bfa());
    c.st.set_crf(i.bf(), v);
    Ok(())
}

pub(super) fn mfcr(c: &mut Cpu, i: Insn) -> Exec {
    c.st.gpr[i.rt() as usize] = c.st.cr() as u64;
    Ok(())
}

/// CR field mask of FXM/CRM: bit 7 selects CR0.
#[inline(always)]
fn field_mask(fxm: u32) -> u32 {
    (0..8)
        .filter(|k| fxm & (0x80 >> k) != 0)
        .fold(0, |m, k| m | (0xf000_0000 >> (4 * k)))
}

pub(super) fn mfocrf(c: &mut Cpu, i: Insn) -> Exec {
    let fxm = i.fxm();
    // One field selected: only it is copied, the rest of RT is zero. Otherwise the ISA leaves
    // the result undefined; the reference implementation leaves RT as it was.
    if fxm.count_ones() == 1 {
        c.st.gpr[i.rt() as usize] = (c.st.cr() & field_mask(fxm)) as u64;
    }
    Ok(())
}

pub(super) fn mtcrf(c: &mut Cpu, i: Insn) -> Exec {
    let m = field_mask(i.fxm());
    c.st.set_cr((c.st.cr() & !m) | (c.st.gpr[i.rs() as usize] as u32 & m));
    Ok(())
}

pub(super) fn mtocrf(c: &mut Cpu, i: Insn) -> Exec {
    let fxm = i.fxm();
    if fxm.count_ones() == 1 {
        let m = field_mask(fxm);
        c.st.set_cr((c.st.cr() & !m) | (c.st.gpr[i.rs() as usize] as u32 & m));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{cpu, run};

    #[test]
    fn counted_loop_with_bdnz() {
        let mut c = cpu();
        // li r3,0 ; li r4,5 ; mtctr r4 ; addi r3,r3,2 ; bdnz .-4
        run(
            &mut c,
            &[
                0x3860_0000,
                0x3880_0005,
                0x7c89_03a6,
                0x3863_0002,
                0x4200_fffc,
            ],
        );
        assert_eq!(c.st.gpr[3], 10);
        assert_eq!(c.st.ctr, 0);
    }

    #[test]
    fn call_and_return() {
        let mut c = cpu();
        // bl +12 ; li r5,1 ; b +12 ; li r6,2 ; blr
        run(
            &mut c,
            &[
                0x4800_000d,
                0x38a0_0001,
                0x4800_000c,
                0x38c0_0002,
                0x4e80_0020,
            ],
        );
        assert_eq!((c.st.gpr[5], c.st.gpr[6]), (1, 2));
        assert_eq!(c.st.lr, 0x1004);
    }

    #[test]
    fn cr_moves() {
        let mut c = cpu();
        c.st.gpr[3] = 0x1234_5678;
        // mtcrf 0xff,r3 ; crxor 0,3,2 ; mfocrf r4,0x80 ; mcrf cr7,cr1
        run(
            &mut c,
            &[0x7c6f_f120, 0x4c03_1182, 0x7c98_0026, 0x4f84_0000],
        );
        assert_eq!(c.st.gpr[4], 0x9000_0000);
        assert_eq!(c.st.crf(7), 2);
    }
}
