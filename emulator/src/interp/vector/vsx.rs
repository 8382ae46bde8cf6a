//! VSX moves between GPRs and VSRs, logical operations and permutes over all 64 VSRs.

use super::{Cpu, Exec, get, put, vsr_half_ok, vsx_ok};
use crate::isa::Insn;

// --- GPR <-> VSR doubleword 0 ---

pub(in crate::interp) fn mfvsrd(c: &mut Cpu, i: Insn) -> Exec {
    vsr_half_ok(c, i.xt())?;
    c.st.gpr[i.ra() as usize] = (c.st.vsr[i.xt() as usize] >> 64) as u64;
    Ok(())
}

pub(in crate::interp) fn mfvsrwz(c: &mut Cpu, i: Insn) -> Exec {
    vsr_half_ok(c, i.xt())?;
    c.st.gpr[i.ra() as usize] = (c.st.vsr[i.xt() as usize] >> 64) as u32 as u64;
    Ok(())
}

/// Doubleword 0 of XT from a GPR; doubleword 1 is undefined and keeps its value.
fn move_to(c: &mut Cpu, i: Insn, f: impl Fn(u64) -> u64) -> Exec {
    vsr_half_ok(c, i.xt())?;
    let d = f(c.st.gpr[i.ra() as usize]);
    let r = &mut c.st.vsr[i.xt() as usize];
    *r = (*r & u64::MAX as u128) | ((d as u128) << 64);
    Ok(())
}

pub(in crate::interp) fn mtvsrd(c: &mut Cpu, i: Insn) -> Exec {
    move_to(c, i, |x| x)
}
pub(in crate::interp) fn mtvsrwa(c: &mut Cpu, i: Insn) -> Exec {
    move_to(c, i, |x| x as i32 as i64 as u64)
}
pub(in crate::interp) fn mtvsrwz(c: &mut Cpu, i: Insn) -> Exec {
    move_to(c, i, |x| x as u32 as u64)
}

// --- logical, select, permute ---

/// Defines XX3-form instructions `XT <- f(XA, XB)`.
macro_rules! xx3 {
    ($($name:ident: |$a:ident, $b:ident| $e:expr;)*) => {
        $(pub(in crate::interp) fn $name(c: &mut Cpu, i: Insn) -> Exec {
            vsx_ok(c)?;
            let ($a, $b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
            c.st.vsr[i.xt() as usize] = $e;
            Ok(())
        })*
    };
}

xx3! {
    xxland: |a, b| a & b;
    xxlandc: |a, b| a & !b;
    xxlor: |a, b| a | b;
    xxlxor: |a, b| a ^ b;
    xxlnor: |a, b| !(a | b);
    xxleqv: |a, b| !(a ^ b);
    xxlnand: |a, b| !(a & b);
    xxlorc: |a, b| a | !b;
    xxmrghw: |a, b| merge_words(a, b, 0);
    xxmrglw: |a, b| merge_words(a, b, 2);
}

/// a[first], b[first], a[first+1], b[first+1] (words).
#[inline(always)]
fn merge_words(a: u128, b: u128, first: usize) -> u128 {
    let mut r = 0;
    for j in 0..2 {
        put(&mut r, 2 * j, get::<u32>(a, first + j));
        put(&mut r, 2 * j + 1, get::<u32>(b, first + j));
    }
    r
}

pub(in crate::interp) fn xxsel(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let (a, b, m) = (
        c.st.vsr[i.xa() as usize],
        c.st.vsr[i.xb() as usize],
        c.st.vsr[i.xc() as usize],
    );
    c.st.vsr[i.xt() as usize] = (a & !m) | (b & m);
    Ok(())
}

/// `xxpermdi`: DM's high bit picks the doubleword of XA, its low bit that of XB.
pub(in crate::interp) fn xxpermdi(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let (a, b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
    let dm = i.dm();
    let hi = if dm & 2 == 0 {
        a >> 64
    } else {
        a & u64::MAX as u128
    };
    let lo = if dm & 1 == 0 {
        b >> 64
    } else {
        b & u64::MAX as u128
    };
    c.st.vsr[i.xt() as usize] = (hi << 64) | lo;
    Ok(())
}

/// `xxsldwi`: words SHW..SHW+3 of XA:XB.
pub(in crate::interp) fn xxsldwi(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let (a, b) = (c.st.vsr[i.xa() as usize], c.st.vsr[i.xb() as usize]);
    let sh = 32 * i.dm();
    c.st.vsr[i.xt() as usize] = if sh == 0 {
        a
    } else {
        (a << sh) | (b >> (128 - sh))
    };
    Ok(())
}

/// `xxspltw`: word UIM (bits 14-15) of XB in every word.
pub(in crate::interp) fn xxspltw(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let w: u32 = get(c.st.vsr[i.xb() as usize], (i.uim() & 3) as usize);
    c.st.vsr[i.xt() as usize] = super::perm::splat(w);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::super::test_util::{cpu, run};
    use crate::cpu::{Exception, msr};

    #[test]
    fn xxpermdi_selects_doublewords_across_all_64_registers() {
        let mut c = cpu();
        c.st.vsr[1] = (0xa0u128 << 64) | 0xa1;
        c.st.vsr[34] = (0xb0u128 << 64) | 0xb1;
        // xxpermdi vs35,vs1,vs34,DM: XT=35 (TX=1), XA=1, XB=34 (BX=1).
        for (dm, want) in [
            (0, (0xa0, 0xb0)),
            (1, (0xa0, 0xb1)),
            (2, (0xa1, 0xb0)),
            (3, (0xa1, 0xb1)),
        ] {
            run(&mut c, &[0xf061_1053 | (dm << 8)]);
            assert_eq!(c.st.vsr[35], ((want.0 as u128) << 64) | want.1, "dm={dm}");
        }
        // xxswapd vs35,vs35 (xxpermdi vs35,vs35,vs35,2)
        run(&mut c, &[0xf063_1a57]);
        assert_eq!(c.st.vsr[35], (0xb1u128 << 64) | 0xa1);
    }

    #[test]
    fn gpr_moves_check_the_facility_of_the_register_half() {
        let mut c = cpu();
        c.st.gpr[5] = 0xffff_ffff_8000_0001;
        c.st.vsr[40] = 7;
        run(&mut c, &[0x7d05_01a7]); // mtvsrwa vs40,r5
        assert_eq!(c.st.vsr[40], (0xffff_ffff_8000_0001u128 << 64) | 7);
        run(&mut c, &[0x7d06_00e7]); // mfvsrwz r6,vs40
        assert_eq!(c.st.gpr[6], 0x8000_0001);
        c.st.msr &= !msr::VEC;
        assert_eq!(c.execute(0x7d06_0067), Err(Exception::VecUnavailable)); // mfvsrd r6,vs40
        assert_eq!(c.execute(0x7c26_0066), Ok(())); // mfvsrd r6,vs1 needs FP only
        c.st.msr &= !msr::FP;
        assert_eq!(c.execute(0x7c26_0066), Err(Exception::FpUnavailable));
    }

    #[test]
    fn xxsldwi_and_xxspltw() {
        let mut c = cpu();
        c.st.vsr[2] = 0x0000_0000_1111_1111_2222_2222_3333_3333;
        c.st.vsr[3] = 0x4444_4444_5555_5555_6666_6666_7777_7777;
        run(&mut c, &[0xf082_1910]); // xxsldwi vs4,vs2,vs3,1
        assert_eq!(c.st.vsr[4], 0x1111_1111_2222_2222_3333_3333_4444_4444);
        run(&mut c, &[0xf0a2_1a90]); // xxspltw vs5,vs3,2
        assert_eq!(c.st.vsr[5], 0x6666_6666_6666_6666_6666_6666_6666_6666);
    }
}
