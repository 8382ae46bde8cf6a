//! Floating-point load/store pair: `lfdp`, `stfdp`, `lfdpx`, `stfdpx` (Book I 4.6.2-4.6.3).
//! The even FPR FRp and FRp+1 move as one quadword: in big-endian mode FRp is at the lower
//! address, in little-endian mode FRp+1 is (the quadword's bytes reversed as a whole). An odd
//! FRp is an invalid form: illegal instruction (as on QEMU).

use super::super::loadstore::{Addr, ea};
use super::{Cpu, Exec, fp_available};
use crate::cpu::{Exception, ProgramKind};
use crate::isa::Insn;

const ILLEGAL: Exception = Exception::Program(ProgramKind::Illegal);

/// The FPRs at EA and EA + 8, in that order.
fn pair_order(c: &Cpu, frp: u32) -> [u32; 2] {
    if c.st.le() {
        [frp + 1, frp]
    } else {
        [frp, frp + 1]
    }
}

fn load_pair(c: &mut Cpu, i: Insn, a: Addr) -> Exec {
    fp_available(c)?;
    let frp = i.rt();
    if frp & 1 != 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le();
    let lo = c.mmu.load(&c.st, ea, 8, le)?;
    let hi = c.mmu.load(&c.st, c.mask_ea(ea.wrapping_add(8)), 8, le)?;
    let [first, second] = pair_order(c, frp);
    c.st.set_fpr(first, lo);
    c.st.set_fpr(second, hi);
    Ok(())
}

fn store_pair(c: &mut Cpu, i: Insn, a: Addr) -> Exec {
    fp_available(c)?;
    let frp = i.rs();
    if frp & 1 != 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le();
    let [first, second] = pair_order(c, frp);
    let (lo, hi) = (c.st.fpr(first), c.st.fpr(second));
    // Two doubleword accesses: a fault on the second page leaves the first written, which the
    // ISA allows for an access that is not single-copy atomic.
    c.mmu.store(&c.st, ea, 8, lo, le)?;
    c.mmu.store(&c.st, c.mask_ea(ea.wrapping_add(8)), 8, hi, le)
}

pub(in crate::interp) fn lfdp(c: &mut Cpu, i: Insn) -> Exec {
    load_pair(c, i, Addr::Ds)
}

pub(in crate::interp) fn lfdpx(c: &mut Cpu, i: Insn) -> Exec {
    load_pair(c, i, Addr::X)
}

pub(in crate::interp) fn stfdp(c: &mut Cpu, i: Insn) -> Exec {
    store_pair(c, i, Addr::Ds)
}

pub(in crate::interp) fn stfdpx(c: &mut Cpu, i: Insn) -> Exec {
    store_pair(c, i, Addr::X)
}
