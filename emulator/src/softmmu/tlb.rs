//! The per-vCPU direct-mapped TLB: one table per MMU index (problem state × translation on).
//!
//! Tags are page-aligned effective addresses; a tag with a low bit set never matches, which
//! is how entries are invalidated and how pages that need the slow path (MMIO, watched code
//! pages for writes) are kept off the fast path.

use super::{Access, PageMapping};

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Clears the offset within a page.
pub const PAGE_MASK: u64 = !(PAGE_SIZE - 1);
pub const TLB_ENTRIES: usize = 256;
/// Problem state × relocation: 0 = hypervisor/supervisor real, 1 = problem real (unused by
/// pseries guests but harmless), 2 = supervisor translated, 3 = problem translated.
pub const MMU_IDX_COUNT: usize = 4;

/// A tag that matches no address.
const INVALID: u64 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TlbEntry {
    pub read: u64,
    pub write: u64,
    pub exec: u64,
    /// Host address minus guest effective address, for the page.
    pub addend: u64,
}

impl TlbEntry {
    pub const EMPTY: TlbEntry = TlbEntry { read: INVALID, write: INVALID, exec: INVALID, addend: 0 };
}

/// Counters the run report shows.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlbCounters {
    pub fills: u64,
    pub full_flushes: u64,
    pub page_flushes: u64,
}

#[repr(C)]
pub struct Tlb {
    pub table: [[TlbEntry; TLB_ENTRIES]; MMU_IDX_COUNT],
    /// MMU indexes written since the last full flush: a flush of a clean TLB is elided.
    pub dirty: u8,
    pub counters: TlbCounters,
}

/// MMU index of an access in the current MSR state.
#[inline(always)]
pub fn mmu_idx(msr: u64, access: Access) -> usize {
    use crate::cpu::msr;
    let pr = (msr & msr::PR != 0) as usize;
    let reloc = match access {
        Access::Exec => msr & msr::IR != 0,
        _ => msr & msr::DR != 0,
    } as usize;
    pr | (reloc << 1)
}

impl Tlb {
    pub fn new() -> Self {
        Self { table: [[TlbEntry::EMPTY; TLB_ENTRIES]; MMU_IDX_COUNT], dirty: 0, counters: TlbCounters::default() }
    }

    #[inline(always)]
    fn slot(ea: u64) -> usize {
        (ea >> PAGE_SHIFT) as usize & (TLB_ENTRIES - 1)
    }

    /// The fast path: a host pointer when `size` bytes at `ea` hit one cached page.
    #[inline(always)]
    pub fn lookup(&self, idx: usize, ea: u64, size: usize, access: Access) -> Option<*mut u8> {
        let e = &self.table[idx][Self::slot(ea)];
        let tag = match access {
            Access::Read => e.read,
            Access::Write => e.write,
            Access::Exec => e.exec,
        };
        if tag == ea & PAGE_MASK && (ea & !PAGE_MASK) as usize + size <= PAGE_SIZE as usize {
            Some(ea.wrapping_add(e.addend) as *mut u8)
        } else {
            None
        }
    }

    /// Caches a translation. Devices get no fast-path tags; watched pages get no write tag.
    pub fn insert(&mut self, idx: usize, ea: u64, m: &PageMapping) {
        self.counters.fills += 1;
        self.dirty |= 1 << idx;
        let page = ea & PAGE_MASK;
        let e = &mut self.table[idx][Self::slot(ea)];
        let ram = !m.host.is_null();
        // A new page in the slot: drop the old page's other permissions.
        if e.read & PAGE_MASK != page || e.write & PAGE_MASK != page || e.exec & PAGE_MASK != page {
            *e = TlbEntry::EMPTY;
        }
        if !ram {
            return;
        }
        e.addend = (m.host as u64).wrapping_sub(page);
        if m.read {
            e.read = page;
        }
        if m.write && !m.watch_writes {
            e.write = page;
        }
        if m.exec {
            e.exec = page;
        }
    }

    /// Drops every entry (a no-op when nothing was filled since the last flush).
    pub fn flush_all(&mut self) -> bool {
        if self.dirty == 0 {
            return false;
        }
        for t in &mut self.table {
            t.fill(TlbEntry::EMPTY);
        }
        self.dirty = 0;
        self.counters.full_flushes += 1;
        true
    }

    /// Drops the entries for the page containing `ea` in every MMU index.
    pub fn flush_page(&mut self, ea: u64) {
        let page = ea & PAGE_MASK;
        let s = Self::slot(ea);
        for t in &mut self.table {
            let e = &mut t[s];
            if e.read & PAGE_MASK == page || e.write & PAGE_MASK == page || e.exec & PAGE_MASK == page {
                *e = TlbEntry::EMPTY;
            }
        }
        self.counters.page_flushes += 1;
    }
}

impl Default for Tlb {
    fn default() -> Self {
        Self::new()
    }
}
