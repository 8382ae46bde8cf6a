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

    /// Reads SPR `n`; `Ok(None)` when this CPU has no such SPR (see `undefined_spr`).
    pub fn read_spr(&mut self, n: u32) -> Result<Option<u64>, Exception> {
        if spr_privileged(n) && self.st.pr() {
            return Err(PRIVILEGED);
        }
        let s = &self.st;
        Ok(Some(match n {
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
            spr::BESCR | spr::BESCRS | spr::BESCRR => s.bescr,
            spr::BESCRSU | spr::BESCRRU => s.bescr >> 32,
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
            _ if pmu_index(n).is_some() => {
                if n < PMU_PRIVILEGED_BASE && s.pr() && pmcc(s) == PMCC_NO_ACCESS {
                    return Err(PRIVILEGED);
                }
                s.pmu[pmu_index(n).unwrap()]
            }
            spr::PSPB => s.pspb,
            // No doorbells are ever pending; one thread per core, so thread 0.
            spr::DPDES | spr::TIR => 0,
            // IC is set by the hypervisor (never, here); VTB counts with the timebase.
            spr::IC => 0,
            spr::VTB => self.timebase.now(),
            // PURR/SPURR count at the timebase rate while the thread runs; a partition reads
            // them for processor-utilisation accounting (the hypervisor writes them).
            spr::SPURR | spr::PURR => self.timebase.now(),
            // Hypervisor resources (LPCR, HSPRGx, HDEC, …): not accessible to a partition.
            _ if (304..320).contains(&n) => return Err(PRIVILEGED),
            _ => return Ok(None),
        }))
    }

    /// Writes SPR `n`; `Ok(false)` when this CPU has no such SPR (see `undefined_spr`).
    pub fn write_spr(&mut self, n: u32, v: u64) -> Result<bool, Exception> {
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
            spr::BESCRS => s.bescr |= v,
            spr::BESCRSU => s.bescr |= v << 32,
            spr::BESCRR => s.bescr &= !v,
            spr::BESCRRU => s.bescr &= !(v << 32),
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
            spr::PSPB => s.pspb = v & 0xffff_ffff,
            // Read-only or hypervisor resources.
            spr::PVR
            | spr::PIR
            | spr::TBL_WRITE
            | spr::TBU_WRITE
            | spr::DPDES
            | spr::TIR
            | spr::IC
            | spr::VTB => return Err(PRIVILEGED),
            _ if pmu_index(n).is_some() => {
                let k = pmu_index(n).unwrap();
                if n < PMU_PRIVILEGED_BASE && !pmu_alias_writable(s, n) {
                    return Err(PRIVILEGED);
                }
                // PMC1-6 are 32-bit registers.
                s.pmu[k] = if (spr::PMC1..=spr::PMC6).contains(&(n | 16)) {
                    v & 0xffff_ffff
                } else {
                    v
                };
            }
            _ if (304..320).contains(&n) => return Err(PRIVILEGED),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// An access to an SPR this CPU does not have: a no-op in supervisor state (Linux probes
    /// some), a privileged-instruction or illegal-instruction interrupt in problem state
    /// depending on the number's privilege bit — what the reference implementation does.
    fn undefined_spr(&self, n: u32) -> Exec {
        if !self.st.pr() && n != 0 {
            Ok(())
        } else if spr_privileged(n) {
            Err(PRIVILEGED)
        } else {
            Err(ILLEGAL)
        }
    }
}

/// First privileged PMU SPR (SIER); each has a problem-state alias 16 below it.
const PMU_PRIVILEGED_BASE: u32 = spr::SIER;

/// MMCR0[PMCC] (bits 44:45): what problem state may do with the PMU aliases (ISA 2.07 Book
/// III-S 9.4.4): 00 read the PMCs and MMCR0/2/A, 01 nothing (here: privileged-instruction
/// interrupt), 10 and 11 also write them.
fn pmcc(s: &crate::cpu::CpuState) -> u64 {
    (s.pmu[9] >> 18) & 3
}
const PMCC_NO_ACCESS: u64 = 1;

/// Whether `mtspr` to the alias `n` (768-782) is allowed: in supervisor state for the
/// registers software may set through it (MMCR2, MMCRA, PMC1-6, MMCR0; SIER, SIAR, SDAR and
/// MMCR1 are read-only there), in problem state also only with PMCC = 1x.
fn pmu_alias_writable(s: &crate::cpu::CpuState, n: u32) -> bool {
    let full = n + 16;
    let writable = matches!(full, spr::MMCR2 | spr::MMCRA | spr::MMCR0)
        || (spr::PMC1..=spr::PMC6).contains(&full);
    writable && (!s.pr() || pmcc(s) >= 2)
}

/// Index in `CpuState::pmu` of a performance-monitor SPR of POWER8: SIER (784), MMCR2,
/// MMCRA, PMC1-6, MMCR0 (795), SIAR, SDAR, MMCR1 (798), and their aliases 768-782. The PMU
/// does not count: its registers only hold what the guest writes.
fn pmu_index(n: u32) -> Option<usize> {
    let p = if n < PMU_PRIVILEGED_BASE { n + 16 } else { n };
    match p {
        784..=792 => Some((p - 784) as usize),
        795..=798 => Some((p - 795 + 9) as usize),
        _ => None,
    }
}

/// SPRs 808-811 are reserved no-ops (ISA 2.07 Book III 1.3.3): `mfspr` leaves RT alone.
const NOOP_SPRS: std::ops::RangeInclusive<u32> = 808..=811;

pub(super) fn mfspr(c: &mut Cpu, i: Insn) -> Exec {
    if NOOP_SPRS.contains(&i.spr()) {
        return Ok(());
    }
    match c.read_spr(i.spr())? {
        Some(v) => c.st.gpr[i.rt() as usize] = v,
        None => c.undefined_spr(i.spr())?,
    }
    Ok(())
}

pub(super) fn mtspr(c: &mut Cpu, i: Insn) -> Exec {
    if NOOP_SPRS.contains(&i.spr()) {
        return Ok(());
    }
    if !c.write_spr(i.spr(), c.st.gpr[i.rs() as usize])? {
        c.undefined_spr(i.spr())?;
    }
    Ok(())
}

/// `mftb` with a TBR other than TB/TBU is an invalid form; the reference implementation
/// executes it as `mfspr` of that number, and so do we.
pub(super) fn mftb(c: &mut Cpu, i: Insn) -> Exec {
    mfspr(c, i)
}

// --- MSR ---

/// MSR bits a POWER8 partition has (others read as 0; TM is not offered).
pub const MSR_IMPLEMENTED: u64 = msr::SF
    | msr::HV
    | msr::VEC
    | msr::VSX
    | msr::EE
    | msr::PR
    | msr::FP
    | msr::ME
    | msr::FE0
    | msr::SE
    | msr::BE
    | msr::FE1
    | msr::IR
    | msr::DR
    | msr::PMM
    | msr::RI
    | msr::LE;

/// New MSR from `v` with the bits in `keep` unchanged; problem state forces EE, IR and DR
/// on (Book III-S 4.4.3).
fn msr_update(old: u64, v: u64, keep: u64) -> u64 {
    let mut m = (v & MSR_IMPLEMENTED & !keep) | (old & keep);
    if m & msr::PR != 0 {
        m |= msr::EE | msr::IR | msr::DR;
    }
    m
}

impl Cpu {
    /// Writes the MSR as `rfid` does: HV can only be cleared; with HV = 0 (a partition) ME
    /// is not altered (Book III-S, rfid); every other implemented bit, LE included, comes
    /// from `v`. QEMU 7.2 lets a partition's rfid clear ME; the ISA does not.
    pub fn set_msr(&mut self, v: u64) {
        let old = self.st.msr;
        let keep = if old & msr::HV == 0 { msr::ME } else { 0 };
        self.st.msr = msr_update(old, v & (!msr::HV | old), keep);
        self.events |= events::MSR_CHANGED;
    }

    /// `mtmsr`/`mtmsrd` with L = 1: only EE and RI.
    fn set_msr_ee_ri(&mut self, v: u64) {
        let m = msr::EE | msr::RI;
        self.st.msr = (self.st.msr & !m) | (v & m);
        self.events |= events::MSR_CHANGED;
    }
}

pub(super) fn mfmsr(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    c.st.gpr[i.rt() as usize] = c.st.msr;
    Ok(())
}

/// `mtmsrd`: HV, ME and LE are not altered (endianness changes need `rfid`).
pub(super) fn mtmsrd(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let v = c.st.gpr[i.rs() as usize];
    if i.l15() != 0 {
        c.set_msr_ee_ri(v);
    } else {
        c.st.msr = msr_update(c.st.msr, v, msr::HV | msr::ME | msr::LE);
        c.events |= events::MSR_CHANGED;
    }
    Ok(())
}

/// `mtmsr`: as `mtmsrd` on the low 32 bits; bits 0:31 (SF, HV) are not altered.
pub(super) fn mtmsr(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let v = c.st.gpr[i.rs() as usize];
    if i.l15() != 0 {
        c.set_msr_ee_ri(v);
    } else {
        c.st.msr = msr_update(c.st.msr, v, 0xffff_ffff_0000_0000 | msr::ME | msr::LE);
        c.events |= events::MSR_CHANGED;
    }
    Ok(())
}

/// `rfid`: back to SRR0 with the MSR from SRR1; context synchronising (a pending local TLB
/// flush happens here).
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
/// synchronisation (docs/locking.md: local flushes).
pub(super) fn tlbiel(c: &mut Cpu, _: Insn) -> Exec {
    supervisor(c)?;
    c.tlb_flush_pending = true;
    Ok(())
}

// --- SLB ---

use crate::mmu::slb::{self, esid, segment_page_sizes, vsid};

/// `slbmte RS,RB`: writes SLB entry RB[52:63]. An index beyond the SLB, reserved ESID bits,
/// a reserved segment size or a page size this CPU does not offer is an illegal instruction.
pub(super) fn slbmte(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let rb = c.st.gpr[i.rb() as usize];
    let rs = c.st.gpr[i.rs() as usize];
    let index = (rb & esid::INDEX) as usize;
    let esid_word = rb & !esid::INDEX;
    if index >= SLB_SIZE
        || esid_word & !(esid::ESID_256M | SLB_VALID) != 0
        || rs & vsid::B & !vsid::B_1T != 0
        || segment_page_sizes(rs).is_none()
    {
        return Err(ILLEGAL);
    }
    c.st.slb[index] = SlbEntry {
        esid: esid_word,
        vsid: rs,
    };
    Ok(())
}

/// `slbie RB`: invalidates the entry that translates the effective address in RB; the TLB
/// flush it implies happens at the next context synchronisation.
pub(super) fn slbie(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let ea = c.mask_ea(c.st.gpr[i.rb() as usize]);
    for e in &mut c.st.slb {
        if slb::matches(e, ea) {
            e.esid &= !SLB_VALID;
            c.tlb_flush_pending = true;
        }
    }
    Ok(())
}

/// `slbia`: invalidates every entry except entry 0 (ISA 2.07).
pub(super) fn slbia(c: &mut Cpu, _: Insn) -> Exec {
    supervisor(c)?;
    for e in &mut c.st.slb[1..] {
        if e.esid & SLB_VALID != 0 {
            e.esid &= !SLB_VALID;
            c.tlb_flush_pending = true;
        }
    }
    Ok(())
}

fn slb_index(c: &Cpu, rb: u32) -> Result<usize, Exception> {
    let index = (c.st.gpr[rb as usize] & esid::INDEX) as usize;
    if index < SLB_SIZE {
        Ok(index)
    } else {
        Err(ILLEGAL)
    }
}

pub(super) fn slbmfee(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let index = slb_index(c, i.rb())?;
    c.st.gpr[i.rt() as usize] = c.st.slb[index].esid;
    Ok(())
}

pub(super) fn slbmfev(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let index = slb_index(c, i.rb())?;
    c.st.gpr[i.rt() as usize] = c.st.slb[index].vsid;
    Ok(())
}

pub(super) fn slbfee_(c: &mut Cpu, i: Insn) -> Exec {
    supervisor(c)?;
    let ea = c.mask_ea(c.st.gpr[i.rb() as usize]);
    let hit = slb::lookup(&c.st.slb, ea).map(|k| c.st.slb[k].vsid);
    c.st.gpr[i.rt() as usize] = hit.unwrap_or(0);
    let so = c.st.so as u32;
    c.st.set_crf(0, if hit.is_some() { 2 } else { 0 } | so);
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
        run(
            &mut c,
            &[0x7c60_2324, 0x7ca0_26a6, 0x7cc0_2726, 0x7ce0_27a7],
        );
        assert_eq!(c.st.gpr[5], c.st.gpr[3]);
        assert_eq!(c.st.gpr[6], 0xc000_0000_0800_0000);
        assert_eq!(c.st.gpr[7], c.st.gpr[3]);
        assert_eq!(c.st.crf(0) & 2, 2);
    }

    fn supervisor_cpu() -> crate::interp::Cpu {
        let mut c = cpu();
        c.st.msr = msr::SF | msr::ME | msr::LE;
        c
    }

    #[test]
    fn mtmsrd_keeps_hv_me_le_and_forces_translation_in_problem_state() {
        let mut c = supervisor_cpu();
        c.st.gpr[3] = msr::SF | msr::PR | msr::FP; // LE and ME clear, PR set
        run(&mut c, &[0x7c60_0164]); // mtmsrd r3
        assert_eq!(
            c.st.msr,
            msr::SF | msr::ME | msr::LE | msr::PR | msr::FP | msr::EE | msr::IR | msr::DR
        );
        // L=1 touches only EE and RI.
        let mut c = supervisor_cpu();
        c.st.gpr[3] = !0;
        run(&mut c, &[0x7c61_0164]); // mtmsrd r3,1
        assert_eq!(c.st.msr, msr::SF | msr::ME | msr::LE | msr::EE | msr::RI);
        // Unimplemented bits (TM, reserved) read back as 0; HV cannot be set.
        let mut c = supervisor_cpu();
        c.st.gpr[3] = msr::SF | msr::HV | (3 << 33) | (1 << 32) | 0x7800_0000 | msr::VSX;
        run(&mut c, &[0x7c60_0164]);
        assert_eq!(c.st.msr, msr::SF | msr::ME | msr::LE | msr::VSX);
    }

    #[test]
    fn mtmsr_leaves_the_upper_word() {
        let mut c = supervisor_cpu();
        c.st.gpr[3] = msr::IR | msr::DR | msr::EE; // SF clear in RS
        run(&mut c, &[0x7c60_0124]); // mtmsr r3
        assert_eq!(
            c.st.msr,
            msr::SF | msr::ME | msr::LE | msr::IR | msr::DR | msr::EE
        );
    }

    #[test]
    fn rfid_restores_le_but_cannot_set_hv_or_change_me() {
        let mut c = supervisor_cpu();
        c.st.msr = msr::SF | msr::ME;
        c.st.srr0 = 0x2003; // low bits ignored
        c.st.srr1 = msr::HV | msr::PR | msr::LE | msr::FP | 0x783f_0000;
        c.tlb_flush_pending = true;
        c.st.pc = 0x1000;
        c.nia = 0x1004;
        c.execute(0x4c00_0024).unwrap(); // rfid
        assert_eq!(c.nia, 0x2000);
        assert_eq!(
            c.st.msr,
            msr::PR | msr::LE | msr::FP | msr::EE | msr::IR | msr::DR | msr::ME,
            "ME kept"
        );
        assert!(!c.tlb_flush_pending, "rfid is context synchronising");
        // Nor can it set ME in a partition.
        let mut c = supervisor_cpu();
        c.st.msr = msr::SF;
        c.st.srr1 = msr::SF | msr::ME;
        c.execute(0x4c00_0024).unwrap();
        assert_eq!(c.st.msr, msr::SF);
        // 32-bit target: the return address is truncated.
        let mut c = supervisor_cpu();
        c.st.srr0 = 0xffff_ffff_0000_1000;
        c.st.srr1 = msr::ME;
        c.execute(0x4c00_0024).unwrap();
        assert_eq!(c.nia, 0x1000);
        // Problem state may not use it.
        let mut c = cpu();
        assert_eq!(c.execute(0x4c00_0024), Err(PRIVILEGED));
    }

    #[test]
    fn slbmte_rejects_bad_entries() {
        let mut c = supervisor_cpu();
        let ok_esid = 0x1000_0000 | SLB_VALID;
        for (rs, rb) in [
            (0x100 << 12, ok_esid | 32),                      // index beyond the SLB
            (0x100 << 12, ok_esid | 0x0400_0000 | 1),         // reserved ESID bit
            ((0x100 << 12) | 0x8000_0000_0000_0000, ok_esid), // segment size 0b10
            ((0x100 << 12) | 0x100, ok_esid),                 // 16M pages: not offered
            ((0x100 << 12) | 0x120, ok_esid),                 // undefined L||LP
        ] {
            c.st.gpr[3] = rs;
            c.st.gpr[4] = rb;
            assert_eq!(
                c.execute(0x7c60_2324),
                Err(ILLEGAL),
                "rs {rs:#x} rb {rb:#x}"
            );
        }
        assert!(c.st.slb.iter().all(|e| *e == SlbEntry::default()));
        c.st.gpr[4] = 40;
        assert_eq!(c.execute(0x7ca0_26a6), Err(ILLEGAL)); // slbmfev r5,r4
        assert_eq!(c.execute(0x7cc0_2726), Err(ILLEGAL)); // slbmfee r6,r4
    }

    #[test]
    fn slbie_and_slbia_invalidate_and_defer_the_flush() {
        let mut c = supervisor_cpu();
        c.st.slb[0] = SlbEntry {
            esid: SLB_VALID,
            vsid: 1 << 12,
        };
        c.st.slb[1] = SlbEntry {
            esid: 0x1000_0000 | SLB_VALID,
            vsid: 2 << 12,
        };
        c.st.slb[2] = SlbEntry {
            esid: 0x0000_0100_0000_0000 | SLB_VALID,
            vsid: vsid::B_1T | (3 << 24),
        };
        c.st.gpr[4] = 0x1000_0000 | 0xffff; // offset bits ignored
        c.execute(0x7c00_2364).unwrap(); // slbie r4
        assert_eq!(c.st.slb[1].esid & SLB_VALID, 0);
        assert!(c.tlb_flush_pending);
        c.tlb_flush_pending = false;
        // No matching entry: no flush needed.
        c.execute(0x7c00_2364).unwrap();
        assert!(!c.tlb_flush_pending);
        // A 1T segment is found by any address inside it.
        c.st.gpr[4] = 0x0000_01ab_cdef_0000;
        c.execute(0x7c00_2364).unwrap();
        assert_eq!(c.st.slb[2].esid & SLB_VALID, 0);
        c.st.slb[5] = SlbEntry {
            esid: 0x5000_0000 | SLB_VALID,
            vsid: 5 << 12,
        };
        c.execute(0x7c00_03e4).unwrap(); // slbia
        assert_eq!(c.st.slb[5].esid & SLB_VALID, 0);
        assert_ne!(c.st.slb[0].esid & SLB_VALID, 0, "slbia keeps entry 0");
        // isync performs the pending flush.
        assert!(c.tlb_flush_pending);
        c.execute(0x4c00_012c).unwrap();
        assert!(!c.tlb_flush_pending);
    }
}
