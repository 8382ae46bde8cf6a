//! `SystemSpace`: the TLB fill path of one vCPU of the pseries machine.

use super::hpt::{Found, Hpt};
use super::slb::{self, hash_key, segment_page_sizes, vsid};
use super::{REAL_MODE_MASK, dsisr, hpte_r, hpte_v};
use crate::cpu::{CpuState, Exception, MachineCheckKind, msr};
use crate::softmmu::{Access, AddressSpace, GuestRam, PAGE_MASK, PageMapping};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Fill-path counters of one vCPU (shared with whoever reports them; only the vCPU's own
/// thread increments them).
#[derive(Debug, Default)]
pub struct MmuStats {
    /// Translations with relocation off.
    pub real_fills: AtomicU64,
    /// Translations through the SLB and the HPT that succeeded.
    pub hpt_fills: AtomicU64,
    /// PTE groups read: the primary, and the secondary when the primary has no match.
    pub pteg_reads: AtomicU64,
    /// R/C bits set in HPTEs.
    pub rc_updates: AtomicU64,
    /// Data / instruction segment interrupts raised.
    pub segment_faults: AtomicU64,
    /// Data / instruction storage interrupts raised.
    pub storage_faults: AtomicU64,
    /// Accesses outside RAM.
    pub machine_checks: AtomicU64,
    /// Stores that hit a page holding translated code.
    pub code_writes: AtomicU64,
}

impl MmuStats {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Translations served (successful fills of either kind).
    pub fn fills(&self) -> u64 {
        self.real_fills.load(Ordering::Relaxed) + self.hpt_fills.load(Ordering::Relaxed)
    }
}

/// One vCPU's view of the machine's memory: guest RAM and the partition's HPT, both shared
/// with the other vCPUs, translated through this vCPU's MSR and SLB.
pub struct SystemSpace {
    ram: Arc<GuestRam>,
    hpt: Arc<Hpt>,
    stats: Arc<MmuStats>,
    /// SLB index that translated last: checked first, since fills cluster in a segment.
    slb_hint: usize,
}

impl SystemSpace {
    pub fn new(ram: Arc<GuestRam>, hpt: Arc<Hpt>) -> Self {
        Self {
            ram,
            hpt,
            stats: Arc::new(MmuStats::default()),
            slb_hint: 0,
        }
    }

    /// The counters of this vCPU's fill path.
    pub fn stats(&self) -> Arc<MmuStats> {
        self.stats.clone()
    }

    fn segment(&mut self, st: &CpuState, ea: u64) -> Option<usize> {
        if st
            .slb
            .get(self.slb_hint)
            .is_some_and(|e| slb::matches(e, ea))
        {
            return Some(self.slb_hint);
        }
        let i = slb::lookup(&st.slb, ea)?;
        self.slb_hint = i;
        Some(i)
    }

    /// Maps the 4 KiB page of `pa` for the TLB entry of `ea`, or raises a machine check when
    /// there is no RAM behind it.
    fn map(
        &self,
        ea: u64,
        pa: u64,
        access: Access,
        read: bool,
        write: bool,
        exec: bool,
    ) -> Result<PageMapping, Exception> {
        let page = pa & PAGE_MASK;
        let Some(host) = self.ram.host_ptr(page) else {
            MmuStats::bump(&self.stats.machine_checks);
            let kind = match access {
                Access::Read => MachineCheckKind::Load,
                Access::Write => MachineCheckKind::Store,
                Access::Exec => MachineCheckKind::Fetch,
            };
            return Err(Exception::MachineCheck { ea, kind });
        };
        Ok(PageMapping {
            host,
            pa: page,
            read,
            write,
            exec,
            watch_writes: false,
        })
    }

    fn storage_fault(&self, ea: u64, access: Access, bits: u32) -> Exception {
        MmuStats::bump(&self.stats.storage_faults);
        match access {
            Access::Exec => Exception::Isi {
                ea,
                srr1: bits as u64,
            },
            Access::Read => Exception::Dsi { ea, dsisr: bits },
            Access::Write => Exception::Dsi {
                ea,
                dsisr: bits | dsisr::STORE,
            },
        }
    }

    fn translate_hpt(
        &mut self,
        st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        let Some(i) = self.segment(st, ea) else {
            MmuStats::bump(&self.stats.segment_faults);
            return Err(match access {
                Access::Exec => Exception::InstructionSegment { ea },
                _ => Exception::DataSegment { ea },
            });
        };
        let e = st.slb[i];
        if access == Access::Exec && e.vsid & vsid::N != 0 {
            return Err(self.storage_fault(ea, access, dsisr::NOEXEC_GUARD));
        }
        // slbmte refuses encodings we do not offer; a state set up otherwise finds no PTE.
        let Some(seg) = segment_page_sizes(e.vsid) else {
            return Err(self.storage_fault(ea, access, dsisr::NOPTE));
        };
        let key = hash_key(&e, seg.base_shift, ea);
        let supervisor_key = if st.msr & msr::PR != 0 {
            e.vsid & vsid::KP
        } else {
            e.vsid & vsid::KS
        } != 0;
        // Retried only when a concurrent hypercall changed the entry under us.
        let mut tries = 0;
        loop {
            tries += 1;
            let found = self.hpt.search(key, seg);
            let secondary = found.is_none_or(|f| f.pte0 & hpte_v::SECONDARY != 0);
            self.stats
                .pteg_reads
                .fetch_add(1 + secondary as u64, Ordering::Relaxed);
            let Some(f) = found else {
                return Err(self.storage_fault(ea, access, dsisr::NOPTE));
            };
            let (read, write) = pp_access(supervisor_key, f.pte1);
            let exec = read && f.pte1 & (hpte_r::N | hpte_r::G) == 0;
            let denied = match access {
                Access::Read => (!read).then_some(dsisr::PROTFAULT),
                Access::Write => (!write).then_some(dsisr::PROTFAULT),
                Access::Exec if exec => None,
                Access::Exec if read => Some(dsisr::NOEXEC_GUARD),
                Access::Exec => Some(dsisr::PROTFAULT),
            };
            if let Some(bits) = denied {
                return Err(self.storage_fault(ea, access, bits));
            }
            let rc = if access == Access::Write {
                hpte_r::R | hpte_r::C
            } else {
                hpte_r::R
            };
            if f.pte1 & rc != rc {
                if !self.hpt.set_rc(&f, rc) && tries < 1000 {
                    continue;
                }
                MmuStats::bump(&self.stats.rc_updates);
            }
            let pte1 = f.pte1 | rc;
            MmuStats::bump(&self.stats.hpt_fills);
            // Until C is set, stores must come back here to set it.
            let writable = write && pte1 & hpte_r::C != 0;
            return self.map(ea, real_address(&f, ea), access, read, writable, exec);
        }
    }
}

/// Real address of `ea` through the HPTE `f`.
#[inline]
fn real_address(f: &Found, ea: u64) -> u64 {
    let offset = (1u64 << f.shift) - 1;
    (f.pte1 & hpte_r::RPN & !offset) | (ea & offset)
}

/// Read and write permission of the PP bits (PP0 || PP) under storage key `key` (Ks or Kp of
/// the segment, by MSR[PR]); Book III-S 5.7.9.1. Undefined combinations give no access.
#[inline]
fn pp_access(key: bool, pte1: u64) -> (bool, bool) {
    let pp = (pte1 & hpte_r::PP) | ((pte1 & hpte_r::PP0) >> 61);
    match (key, pp) {
        (false, 0..=2) => (true, true),
        (false, 3 | 6) => (true, false),
        (true, 2) => (true, true),
        (true, 1 | 3) => (true, false),
        _ => (false, false),
    }
}

impl AddressSpace for SystemSpace {
    fn translate(
        &mut self,
        st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        let relocate = st.msr
            & if access == Access::Exec {
                msr::IR
            } else {
                msr::DR
            }
            != 0;
        if relocate {
            return self.translate_hpt(st, ea, access);
        }
        let m = self.map(ea, ea & REAL_MODE_MASK, access, true, true, true)?;
        MmuStats::bump(&self.stats.real_fills);
        Ok(m)
    }

    /// There are no devices in the pseries physical address space: every physical address
    /// outside RAM is a machine check (raised by `translate` before this can be reached).
    fn mmio_read(&mut self, _st: &CpuState, pa: u64, _size: usize) -> Result<u64, Exception> {
        Err(Exception::MachineCheck {
            ea: pa,
            kind: MachineCheckKind::Load,
        })
    }

    fn mmio_write(
        &mut self,
        _st: &CpuState,
        pa: u64,
        _size: usize,
        _val: u64,
    ) -> Result<(), Exception> {
        Err(Exception::MachineCheck {
            ea: pa,
            kind: MachineCheckKind::Store,
        })
    }

    /// Counted only, until the JIT invalidates the page's translations here.
    fn code_written(&mut self, _pa: u64, _len: usize) {
        MmuStats::bump(&self.stats.code_writes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{SlbEntry, msr};
    use crate::mmu::hpt::H_EXACT;
    use crate::mmu::slb::esid;
    use crate::papr::H_SUCCESS;

    const RAM: u64 = 64 << 20;

    struct Env {
        space: SystemSpace,
        ram: Arc<GuestRam>,
        hpt: Arc<Hpt>,
        st: CpuState,
    }

    fn env() -> Env {
        let ram = Arc::new(GuestRam::new(RAM).unwrap());
        let hpt = Arc::new(Hpt::new(18).unwrap());
        let mut st = CpuState::new();
        st.msr = msr::SF | msr::ME | msr::IR | msr::DR;
        Env {
            space: SystemSpace::new(ram.clone(), hpt.clone()),
            ram,
            hpt,
            st,
        }
    }

    impl Env {
        /// Installs SLB entry `i` for the segment of `ea`.
        fn segment(&mut self, i: usize, ea: u64, vsid_word: u64) {
            let mask = if vsid_word & vsid::B == vsid::B_1T {
                esid::ESID_1T
            } else {
                esid::ESID_256M
            };
            self.st.slb[i] = SlbEntry {
                esid: (ea & mask) | esid::VALID,
                vsid: vsid_word,
            };
        }

        /// Maps the page of `ea` (through SLB entry `i`) to real address `ra` with `pte1_flags`.
        fn map(&mut self, i: usize, ea: u64, ra: u64, pte1_flags: u64, secondary: bool) -> u64 {
            let e = self.st.slb[i];
            let seg = segment_page_sizes(e.vsid).unwrap();
            let key = hash_key(&e, seg.base_shift, ea);
            let large = seg.base_shift > 12;
            let (hash, h) = if secondary {
                (!key.hash, hpte_v::SECONDARY)
            } else {
                (key.hash, 0)
            };
            let group = (hash & self.hpt.pteg_mask()) * 8;
            let pteh = key.ptem | h | if large { hpte_v::LARGE } else { 0 };
            let enc = if large { 0x1000 } else { 0 };
            let wimg = if pte1_flags & hpte_r::I != 0 {
                0
            } else {
                hpte_r::M
            };
            let ptel = (ra & !((1 << seg.base_shift) - 1)) | enc | wimg | pte1_flags;
            let r = self.hpt.h_enter(&self.ram, 0, group, pteh, ptel);
            assert_eq!(r.ret, H_SUCCESS);
            r.out[0]
        }

        fn tr(&mut self, ea: u64, a: Access) -> Result<PageMapping, Exception> {
            self.space.translate(&self.st, ea, a)
        }

        fn err(&mut self, ea: u64, a: Access) -> Exception {
            self.tr(ea, a)
                .err()
                .unwrap_or_else(|| panic!("{ea:#x} translated"))
        }

        fn pa(&mut self, ea: u64, a: Access) -> u64 {
            let m = self.tr(ea, a).unwrap_or_else(|e| panic!("{ea:#x}: {e:?}"));
            assert_eq!(m.host, self.ram.host_ptr(m.pa).unwrap());
            m.pa | (ea & !PAGE_MASK)
        }
    }

    #[test]
    fn real_mode_ignores_top_bits_and_checks_ram() {
        let mut t = env();
        t.st.msr = msr::SF | msr::ME;
        assert_eq!(t.pa(0xc000_0000_0012_3456, Access::Read), 0x12_3456);
        assert_eq!(t.pa(0x0000_0000_0012_3456, Access::Exec), 0x12_3456);
        let m = t.tr(0x4000, Access::Write).unwrap();
        assert!(m.read && m.write && m.exec && !m.watch_writes);
        assert_eq!(
            t.err(0xc000_0000_0000_0000 | RAM, Access::Write),
            Exception::MachineCheck {
                ea: 0xc000_0000_0000_0000 | RAM,
                kind: MachineCheckKind::Store
            }
        );
        assert!(matches!(
            t.err(RAM + 0x1000, Access::Exec),
            Exception::MachineCheck {
                kind: MachineCheckKind::Fetch,
                ..
            }
        ));
        assert!(matches!(
            t.err(u64::MAX, Access::Read),
            Exception::MachineCheck {
                kind: MachineCheckKind::Load,
                ..
            }
        ));
        // Instruction and data relocation are independent.
        t.st.msr |= msr::DR;
        assert_eq!(
            t.err(0x4000, Access::Read),
            Exception::DataSegment { ea: 0x4000 }
        );
        assert_eq!(t.pa(0x4000, Access::Exec), 0x4000);
        assert_eq!(t.space.stats.real_fills.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn segment_misses() {
        let mut t = env();
        assert_eq!(
            t.err(0x1234, Access::Read),
            Exception::DataSegment { ea: 0x1234 }
        );
        assert_eq!(
            t.err(0x1234, Access::Write),
            Exception::DataSegment { ea: 0x1234 }
        );
        assert_eq!(
            t.err(0x1234, Access::Exec),
            Exception::InstructionSegment { ea: 0x1234 }
        );
        assert_eq!(t.space.stats.segment_faults.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn translation_4k_primary_and_secondary_256m_and_1t() {
        let mut t = env();
        t.segment(0, 0xc000_0000_0000_0000, 0x123 << 12);
        t.segment(5, 0x0000_1000_0000_0000, vsid::B_1T | (0x456 << 24));
        t.map(0, 0xc000_0000_0345_6000, 0x78_9000, 0x2, false);
        t.map(5, 0x0000_10ab_cdef_0000, 0x12_3000, 0x2, true);
        assert_eq!(t.pa(0xc000_0000_0345_6abc, Access::Read), 0x78_9abc);
        assert_eq!(t.space.stats.pteg_reads.load(Ordering::Relaxed), 1);
        assert_eq!(t.pa(0x0000_10ab_cdef_0ff8, Access::Read), 0x12_3ff8);
        assert_eq!(
            t.space.stats.pteg_reads.load(Ordering::Relaxed),
            3,
            "secondary hit: two groups"
        );
        // The neighbouring page is not mapped.
        assert_eq!(
            t.err(0xc000_0000_0345_7000, Access::Read),
            Exception::Dsi {
                ea: 0xc000_0000_0345_7000,
                dsisr: dsisr::NOPTE
            }
        );
        assert_eq!(
            t.err(0xc000_0000_0345_7000, Access::Write),
            Exception::Dsi {
                ea: 0xc000_0000_0345_7000,
                dsisr: dsisr::NOPTE | dsisr::STORE
            }
        );
        assert_eq!(
            t.err(0xc000_0000_0345_7000, Access::Exec),
            Exception::Isi {
                ea: 0xc000_0000_0345_7000,
                srr1: dsisr::NOPTE as u64
            }
        );
    }

    #[test]
    fn translation_64k_pages_every_4k_subpage() {
        let mut t = env();
        t.segment(1, 0x1000_0000, (0x99 << 12) | 0x110);
        t.map(1, 0x1234_0000, 0x03bc_0000, 0x2, false);
        for sub in 0..16u64 {
            assert_eq!(
                t.pa(0x1234_0000 + sub * 0x1000 + 8, Access::Read),
                0x03bc_0000 + sub * 0x1000 + 8
            );
        }
        assert!(t.tr(0x1235_0000, Access::Read).is_err());
        assert!(t.tr(0x1233_ffff, Access::Read).is_err());
        // The same HPTE is invisible through a 4K segment.
        t.segment(1, 0x1000_0000, 0x99 << 12);
        assert!(t.tr(0x1234_0000, Access::Read).is_err());
        // 1T segment with 64K pages, secondary hash.
        t.segment(
            2,
            0x0000_0400_0000_0000,
            vsid::B_1T | (0x3_0000 << 24) | 0x110,
        );
        t.map(2, 0x0000_04f0_0001_0000, 0x20_0000, 0x2, true);
        assert_eq!(t.pa(0x0000_04f0_0001_f004, Access::Exec), 0x20_f004);
    }

    #[test]
    fn pp_protection_by_key() {
        // (key, pp0, pp) → (read, write), per the ISA table.
        let table = [
            (false, 0, 0, true, true),
            (false, 0, 1, true, true),
            (false, 0, 2, true, true),
            (false, 0, 3, true, false),
            (false, 1, 2, true, false),
            (false, 1, 0, false, false),
            (true, 0, 0, false, false),
            (true, 0, 1, true, false),
            (true, 0, 2, true, true),
            (true, 0, 3, true, false),
            (true, 1, 2, false, false),
            (true, 1, 1, false, false),
        ];
        for (key, pp0, pp, r, w) in table {
            assert_eq!(
                pp_access(key, (pp0 << 63) | pp),
                (r, w),
                "key {key} pp {pp0}{pp:02b}"
            );
        }
    }

    #[test]
    fn protection_faults_and_key_selection() {
        let mut t = env();
        // Kp set: problem state uses key 1; Ks clear: supervisor uses key 0.
        t.segment(0, 0, (0x77 << 12) | vsid::KP);
        t.map(0, 0x1000, 0x5000, 0x0, false); // PP=00: supervisor RW, user none
        t.map(0, 0x2000, 0x6000, 0x3, false); // PP=11: read-only for both
        t.map(0, 0x3000, 0x7000, 0x2 | hpte_r::N, false); // RW, no-execute
        t.map(0, 0x4000, RAM, 0x2 | hpte_r::I | hpte_r::G, false); // guarded (I/O): no execute
        assert_eq!(t.pa(0x1008, Access::Write), 0x5008);
        assert_eq!(t.pa(0x1008, Access::Exec), 0x5008);
        t.st.msr |= msr::PR;
        assert_eq!(
            t.err(0x1008, Access::Read),
            Exception::Dsi {
                ea: 0x1008,
                dsisr: dsisr::PROTFAULT
            }
        );
        assert_eq!(
            t.err(0x1008, Access::Exec),
            Exception::Isi {
                ea: 0x1008,
                srr1: dsisr::PROTFAULT as u64
            }
        );
        assert_eq!(t.pa(0x2010, Access::Read), 0x6010);
        assert_eq!(
            t.err(0x2010, Access::Write),
            Exception::Dsi {
                ea: 0x2010,
                dsisr: dsisr::PROTFAULT | dsisr::STORE
            }
        );
        t.st.msr &= !msr::PR;
        assert_eq!(
            t.err(0x2010, Access::Write),
            Exception::Dsi {
                ea: 0x2010,
                dsisr: dsisr::PROTFAULT | dsisr::STORE
            }
        );
        assert_eq!(t.pa(0x3000, Access::Write), 0x7000);
        assert_eq!(
            t.err(0x3000, Access::Exec),
            Exception::Isi {
                ea: 0x3000,
                srr1: dsisr::NOEXEC_GUARD as u64
            }
        );
        assert_eq!(
            t.err(0x4000, Access::Exec),
            Exception::Isi {
                ea: 0x4000,
                srr1: dsisr::NOEXEC_GUARD as u64
            }
        );
        let m = t.tr(0x3000, Access::Read).unwrap();
        assert!(m.read && !m.exec);
        // A no-execute segment refuses fetches before looking at the HPT.
        t.st.slb[0].vsid |= vsid::N;
        assert_eq!(
            t.err(0x1000, Access::Exec),
            Exception::Isi {
                ea: 0x1000,
                srr1: dsisr::NOEXEC_GUARD as u64
            }
        );
        assert_eq!(
            t.err(0x9000, Access::Exec),
            Exception::Isi {
                ea: 0x9000,
                srr1: dsisr::NOEXEC_GUARD as u64
            }
        );
        assert!(t.tr(0x1000, Access::Read).is_ok());
    }

    #[test]
    fn referenced_and_changed_bits() {
        let mut t = env();
        t.segment(0, 0, 0x55 << 12);
        let ptex = t.map(0, 0x1000, 0x5000, 0x2, false);
        let rc = |t: &Env| t.hpt.read_hpte(ptex).unwrap().1 & (hpte_r::R | hpte_r::C);
        assert_eq!(rc(&t), 0);
        let m = t.tr(0x1000, Access::Exec).unwrap();
        assert_eq!(rc(&t), hpte_r::R);
        // Read-only mapping in the TLB until C is set, so the first store comes back.
        assert!(m.read && !m.write && m.exec);
        let m = t.tr(0x1000, Access::Write).unwrap();
        assert!(m.write);
        assert_eq!(rc(&t), hpte_r::R | hpte_r::C);
        // With C already set a load maps the page writable.
        assert!(t.tr(0x1000, Access::Read).unwrap().write);
        assert_eq!(t.space.stats.rc_updates.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn rpn_outside_ram_is_a_machine_check() {
        let mut t = env();
        t.segment(0, 0, 0x66 << 12);
        let group = (hash_key(&t.st.slb[0], 12, 0x2000).hash & t.hpt.pteg_mask()) * 8;
        let pteh = hash_key(&t.st.slb[0], 12, 0x2000).ptem;
        assert_eq!(
            t.hpt
                .h_enter(&t.ram, H_EXACT, group, pteh, RAM | hpte_r::I | 0x2)
                .ret,
            H_SUCCESS
        );
        assert_eq!(
            t.err(0x2008, Access::Read),
            Exception::MachineCheck {
                ea: 0x2008,
                kind: MachineCheckKind::Load
            }
        );
    }
}
