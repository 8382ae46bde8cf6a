//! Floating-point load/store pair: `lfdp`, `stfdp`, `lfdpx`, `stfdpx` (Book I 4.6.2-4.6.3),
//! reached through the table-driven floating-point access of `loadstore`.
//! The even FPR FRp and FRp+1 move as one quadword: in big-endian mode FRp is at the lower
//! address, in little-endian mode FRp+1 is (the quadword's bytes reversed as a whole). An odd
//! FRp is an invalid form, for which we raise the illegal instruction (QEMU 7.2 runs it with
//! FRp+1 the next register).

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

pub(in crate::interp) fn load_pair(c: &mut Cpu, i: Insn, a: Addr) -> Exec {
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

pub(in crate::interp) fn store_pair(c: &mut Cpu, i: Insn, a: Addr) -> Exec {
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
