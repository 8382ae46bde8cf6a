//! SPR moves, MSR, SLB and TLB management: the instructions whose legality depends on the
//! privilege state (problem state → privileged-instruction program interrupt; hypervisor-only
//! → the same, since a pseries partition never runs in hypervisor state).

use super::{Cpu, Exec};
use crate::cpu::{Exception, ProgramKind, SLB_SIZE, SLB_VALID, SlbEntry, msr, spr};
use crate::isa::Insn;

const PRIVILEGED: Exception = Exception::Program(ProgramKind::Privileged);
const ILLEGAL: Exception = Exception::Program(ProgramKind::Illegal);

/// Exit-loop events an instruction leaves for the execution loop (`Cpu::events`).
pub mod events {
    /// MSR changed (EE may have been enabled: pending interrupts must be rechecked).
    pub const MSR_CHANGED: u32 = 1;
    /// DEC was written: the decrementer timer must be re-armed.
    pub const DEC_WRITTEN: u32 = 2;
}

#[inline(always)]
fn supervisor(c: &Cpu) -> Exec {
    if c.st.pr() { Err(PRIVILEGED) } else { Ok(()) }
}

// --- SPRs ---

/// SPR numbers with bit 0x10 set are privileged (Book III-S 5.4.4).
fn spr_privileged(n: u32) -> bool {
    n & 0x10 != 0
}

impl Cpu {
    /// Current decrementer value (it keeps counting below zero, as a 32-bit register).
    pub fn dec(&self) -> u64 {
        let elapsed = self.timebase.now().wrapping_sub(self.st.dec_tb);
        self.st.dec_value.wrapping_sub(elapsed) & 0xffff_ffff
    }

    pub fn read_spr(&mut self, n: u32) -> Result<u64, Exception> {
        if spr_privileged(n) && self.st.pr() {
            return Err(PRIVILEGED);
        }
        let s = &self.st;
        Ok(match n {
            spr::XER => s.xer(),
            spr::LR => s.lr,
            spr::CTR => s.ctr,
            spr::DSCR_USER | spr::DSCR => s.dscr,
            spr::VRSAVE => s.vrsave as u64,
            spr::TAR => s.tar,
            spr::PPR => s.ppr,
            spr::PPR32 => s.ppr >> 32,
            spr::CTRL_READ => s.ctrl,
            spr::TB_READ => self.timebase.now(),
            spr::TBU_READ => self.timebase.now() >> 32,
            spr::SPRG3_USER => s.sprg[3],
            spr::EBBHR => s.ebbhr,
            spr::EBBRR => s.ebbrr,
            spr::BESCR => s.bescr,
            13 => s.amr,
            spr::SRR0 => s.srr0,
            spr::SRR1 => s.srr1,
            spr::DAR => s.dar,
            spr::DSISR => s.dsisr,
            spr::DEC => self.dec(),
            spr::SPRG0..=spr::SPRG3 => s.sprg[(n - spr::SPRG0) as usize],
            spr::CFAR => s.cfar,
            spr::AMR => s.amr,
            spr::IAMR => s.iamr,
            spr::UAMOR => s.uamor,
            spr::PIDR => s.pidr,
            spr::FSCR => s.fscr,
            spr::PVR => s.pvr,
            spr::PIR => s.pir,
            // Hypervisor resources (LPCR, HSPRGx, HDEC, …): not accessible to a partition.
            _ if n >= 304 && n < 320 => return Err(PRIVILEGED),
            _ => return Err(ILLEGAL),
        })
    }

    pub fn write_spr(&mut self, n: u32, v: u64) -> Exec {
        if spr_privileged(n) && self.st.pr() {
            return Err(PRIVILEGED);
        }
        let s = &mut self.st;
        match n {
            spr::XER => s.set_xer(v),
            spr::LR => s.lr = v,
            spr::CTR => s.ctr = v,
            spr::DSCR_USER | spr::DSCR => s.dscr = v,
            spr::VRSAVE => s.vrsave = v as u32,
            spr::TAR => s.tar = v,
            spr::PPR => s.ppr = v,
            spr::PPR32 => s.ppr = (s.ppr & 0xffff_ffff) | (v << 32),
            spr::CTRL_WRITE => s.ctrl = v & 1,
            spr::EBBHR => s.ebbhr = v,
            spr::EBBRR => s.ebbrr = v,
            spr::BESCR => s.bescr = v,
            13 | spr::AMR => s.amr = v,
            spr::SRR0 => s.srr0 = v,
            spr::SRR1 => s.srr1 = v,
            spr::DAR => s.dar = v,
            spr::DSISR => s.dsisr = v & 0xffff_ffff,
            spr::DEC => {
                s.dec_value = v & 0xffff_ffff;
                s.dec_tb = self.timebase.now();
                self.events |= events::DEC_WRITTEN;
            }
            spr::SPRG0..=spr::SPRG3 => s.sprg[(n - spr::SPRG0) as usize] = v,
            spr::CFAR => s.cfar = v,
            spr::IAMR => s.iamr = v,
            spr::UAMOR => s.uamor = v,
            spr::PIDR => s.pidr = v,
            spr::FSCR => s.fscr = v,
            // Read-only or hypervisor resources.
            spr::PVR | spr::PIR | spr::TBL_WRITE | spr::TBU_WRITE => return Err(PRIVILEGED),
            _ if n >= 304 && n < 320 => return Err(PRIVILEGED),
            _ => return Err(ILLEGAL),
        }
        Ok(())
    }
}

/// SPRs 808-811 are reserved no-ops (ISA 2.07 Book III 1.3.3): `mfspr` leaves RT alone.
const NOOP_SPRS: std::ops::RangeInclusive<u32> = 808..=811;

pub(super) fn mfspr(c: &mut Cpu, i: Insn) -> Exec {
    if NOOP_SPRS.contains(&i.spr()) {
        return Ok(());
    }
    let v = c.read_spr(i.spr())?;
    c.st.gpr[i.rt() as usize] = v;
    Ok(())
}

pub(super) fn mtspr(c: &mut Cpu, i: Insn) -> Exec {
    if NOOP_SPRS.contains(&i.spr()) {
        return Ok(());
    }
    c.write_spr(i.spr(), c.st.gpr[i.rs() as usize])
}

/// `mftb` with a TBR other than TB/TBU is an invalid form; the reference implementation
/// executes it as `mfspr` of that number, and so do we.
pub(super) fn mftb(c: &mut Cpu, i: Insn) -> Exec {
    mfspr(c, i)
}

// --- MSR ---

impl Cpu {
    /// Writes the MSR as `mtmsrd`/`rfid` may: HV and ME stay as they are (they belong to the
    /// hypervisor), and problem state forces EE, IR and DR on.
    pub fn set_msr(&mut self, v: u64) {
        let keep = msr::HV | msr::ME;
        let mut m = (v & !keep) | (self.st.msr & keep);
        if m & msr::PR != 0 {
            m |= msr::EE | msr::IR | msr::DR;
        }
        self.st.msr = m;
        self.events |= events::MSR_CHANGED;
    }
}

pub(super) fn mfmsr(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    c.st.gpr[i.rt() as usize] = c.st.msr;
    Ok(())
}

pub(super) fn mtmsrd(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let v = c.st.gpr[i.rs() as usize];
    if i.l15() != 0 {
        let m = msr::EE | msr::RI;
        c.st.msr = (c.st.msr & !m) | (v & m);
        c.events |= events::MSR_CHANGED;
    } else {
        c.set_msr(v);
    }
    Ok(())
}

pub(super) fn mtmsr(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let v = c.st.gpr[i.rs() as usize];
    if i.l15() != 0 {
        let m = msr::EE | msr::RI;
        c.st.msr = (c.st.msr & !m) | (v & m);
        c.events |= events::MSR_CHANGED;
    } else {
        c.set_msr((c.st.msr & !0xffff_ffff) | (v & 0xffff_ffff));
    }
    Ok(())
}

pub(super) fn rfid(c: &mut Cpu, _: Insn) -> Exec {
    supervisor(c)?;
    let srr1 = c.st.srr1;
    c.set_msr(srr1);
    c.nia = c.mask_ea(c.st.srr0 & !3);
    c.context_synchronize();
    Ok(())
}

fn hypervisor_only(_: &mut Cpu, _: Insn) -> Exec {
    Err(PRIVILEGED)
}

pub(super) fn hrfid(c: &mut Cpu, i: Insn) -> Exec {
    hypervisor_only(c, i)
}
pub(super) fn tlbie(c: &mut Cpu, i: Insn) -> Exec {
    hypervisor_only(c, i)
}
pub(super) fn tlbsync(c: &mut Cpu, i: Insn) -> Exec {
    hypervisor_only(c, i)
}
pub(super) fn dcbi(c: &mut Cpu, i: Insn) -> Exec {
    hypervisor_only(c, i)
}

/// `tlbiel`: invalidate this thread's translations; performed at the next context
/// synchronisation (LOCKING.md: local flush points).
pub(super) fn tlbiel(c: &mut Cpu, _: Insn) -> Exec {
    supervisor(c)?;
    c.tlb_flush_pending = true;
    Ok(())
}

// --- SLB ---

/// ESID bits of an `slbmte`/`slbie` RB operand for a 256 MB segment (bits 0-35).
const ESID_MASK: u64 = !0xfff_ffff;

pub(super) fn slbmte(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let rb = c.st.gpr[i.rb() as usize];
    let index = (rb & 0xfff) as usize;
    if index >= SLB_SIZE {
        return Err(ILLEGAL);
    }
    c.st.slb[index] = SlbEntry { esid: rb & (ESID_MASK | SLB_VALID), vsid: c.st.gpr[i.rs() as usize] };
    Ok(())
}

pub(super) fn slbie(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let rb = c.st.gpr[i.rb() as usize];
    for e in &mut c.st.slb {
        if e.esid & SLB_VALID != 0 && (e.esid ^ rb) & ESID_MASK == 0 {
            e.esid &= !SLB_VALID;
        }
    }
    c.tlb_flush_pending = true;
    Ok(())
}

pub(super) fn slbia(c: &mut Cpu, _: Insn) -> Exec {
    supervisor(c)?;
    for e in &mut c.st.slb[1..] {
        e.esid &= !SLB_VALID;
    }
    c.tlb_flush_pending = true;
    Ok(())
}

pub(super) fn slbmfee(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let index = (c.st.gpr[i.rb() as usize] & 0xfff) as usize;
    c.st.gpr[i.rt() as usize] = c.st.slb.get(index).map_or(0, |e| e.esid);
    Ok(())
}

pub(super) fn slbmfev(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let index = (c.st.gpr[i.rb() as usize] & 0xfff) as usize;
    c.st.gpr[i.rt() as usize] = c.st.slb.get(index).map_or(0, |e| e.vsid);
    Ok(())
}

pub(super) fn slbfee_(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let rb = c.st.gpr[i.rb() as usize];
    let hit = c.st.slb.iter().find(|e| e.esid & SLB_VALID != 0 && (e.esid ^ rb) & ESID_MASK == 0).map(|e| e.vsid);
    c.st.gpr[i.rt() as usize] = hit.unwrap_or(0);
    let so = c.st.so as u32;
    c.st.cr = (c.st.cr & 0x0fff_ffff) | ((if hit.is_some() { 2 } else { 0 } | so) << 28);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{cpu, run};
    use super::*;

    #[test]
    fn privileged_instructions_trap_in_problem_state() {
        let mut c = cpu();
        c.st.pc = 0x1000;
        c.nia = 0x1004;
        assert_eq!(c.execute(0x7c60_00a6), Err(PRIVILEGED)); // mfmsr r3
        assert_eq!(c.execute(0x7c7f_42a6), Err(PRIVILEGED)); // mfpvr r3
        assert_eq!(c.execute(0x7c00_2264), Err(PRIVILEGED)); // tlbie r4,r0
        assert_eq!(c.execute(0x7c69_c2a6), Err(ILLEGAL)); // mfspr r3,777 (no such SPR)
    }

    #[test]
    fn slb_roundtrip() {
        let mut c = cpu();
        c.st.msr &= !msr::PR;
        c.st.gpr[3] = 0x0000_0001_2345_6000 | 0x400; // VSID word
        c.st.gpr[4] = 0xc000_0000_0800_0005; // ESID 0xc00000000, V, index 5
        // slbmte r3,r4 ; slbmfev r5,r4 ; slbmfee r6,r4 ; slbfee. r7,r4
        run(&mut c, &[0x7c60_2324, 0x7ca0_26a6, 0x7cc0_2726, 0x7ce0_27a7]);
        assert_eq!(c.st.gpr[5], c.st.gpr[3]);
        assert_eq!(c.st.gpr[6], 0xc000_0000_0800_0000);
        assert_eq!(c.st.gpr[7], c.st.gpr[3]);
        assert_eq!(c.st.crf(0) & 2, 2);
    }
}
