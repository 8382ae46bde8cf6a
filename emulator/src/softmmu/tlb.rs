//! The per-vCPU direct-mapped TLB: one table per MMU index (problem state × translation on).
//!
//! Tags are page-aligned effective addresses; a tag with a low bit set never matches, which
//! is how entries are invalidated and how pages that need the slow path (MMIO, watched code
//! pages for writes) are kept off the fast path.
//!
//! An entry displaced from the table goes to a small fully associative victim table of its
//! MMU index, searched on a miss before the MMU is asked. Without it, a loop whose code page
//! and data page share a slot refills both on every access.

use super::{Access, PageMapping};

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Clears the offset within a page.
pub const PAGE_MASK: u64 = !(PAGE_SIZE - 1);
/// Entries per MMU index: 16 MiB of reach. A compiler's code and data, the kernel's beside
/// them, overflow 8 MiB (with 256, `make` of a C project refilled once every few hundred
/// instructions; 2048 → 4096 took linux-make's fills from 5.2 M to 2.2 M and its run-loop
/// refills from 8.3 M to 3.0 M). A full flush clears only what was filled since the last one
/// (`filled`).
pub const TLB_ENTRIES: usize = 4096;
/// Fills a full flush clears one by one, and a flush of host ranges looks at; past that many
/// both go through the indexes filled whole. On the kernel build about 900 fills come between
/// two full flushes: with 512 the HPT hypercalls' range flushes scanned both translated
/// indexes whole in 80 % of their 135 k calls a minute (2.6 % of the samples at N = 1), with
/// 4096 they took 1.4 %.
const FILL_LOG: usize = 4096;
/// Victim entries per MMU index.
pub const VICTIM_ENTRIES: usize = 8;
/// Problem state × relocation: 0 = hypervisor/supervisor real, 1 = problem real (unused by
/// pseries guests but harmless), 2 = supervisor translated, 3 = problem translated.
pub const MMU_IDX_COUNT: usize = 4;
/// The MMU indexes whose entries come from the page table (relocation on).
const TRANSLATED_IDX: [usize; 2] = [2, 3];

/// A tag that matches no address: not page-aligned, and above the alignment bits that
/// translated code keeps in the address it compares ([`fast_path_mask`]).
const INVALID: u64 = 1 << 11;

/// What translated code compares with a tag for an access of `size` bytes (up to 8): the
/// page and the alignment bits, so that one compare finds a hit that is also aligned (a
/// misaligned access misses a valid entry, and no address hits [`INVALID`]).
pub const fn fast_path_mask(size: u32) -> u64 {
    PAGE_MASK | (size as u64 - 1)
}

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
    pub const EMPTY: TlbEntry = TlbEntry {
        read: INVALID,
        write: INVALID,
        exec: INVALID,
        addend: 0,
    };

    /// The page this entry maps, if it has any valid tag.
    fn page(&self) -> Option<u64> {
        [self.read, self.write, self.exec]
            .into_iter()
            .find(|t| t & !PAGE_MASK == 0)
    }
}

/// Counters the run report shows.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlbCounters {
    pub fills: u64,
    /// Misses served by the victim table (no MMU walk).
    pub victim_hits: u64,
    pub full_flushes: u64,
    pub page_flushes: u64,
    /// Flushes of the entries for some physical pages ([`Tlb::flush_translated_host_ranges`]).
    pub range_flushes: u64,
}

/// The entries of every MMU index (on the heap: a quarter MiB inside `Cpu` would not fit the
/// stacks `Cpu` values pass through). Translated code reaches it through the pointer at
/// `Tlb::table`, which never changes for the life of the `Tlb`.
pub type TlbTable = [[TlbEntry; TLB_ENTRIES]; MMU_IDX_COUNT];

#[repr(C)]
pub struct Tlb {
    pub table: Box<TlbTable>,
    /// MMU indexes written since the last full flush: a flush of a clean TLB is elided.
    pub dirty: u8,
    /// Entries displaced from `table`, and where the next one goes (round robin).
    victim: [[TlbEntry; VICTIM_ENTRIES]; MMU_IDX_COUNT],
    victim_next: [u8; MMU_IDX_COUNT],
    /// Slots filled since the last full flush (`idx × TLB_ENTRIES + slot`), up to
    /// `FILL_LOG`; full: more than that were. Most flushes follow a few hundred fills, and
    /// clearing those beats clearing 128 KiB per index.
    filled: Vec<u16>,
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
        Self {
            table: vec![[TlbEntry::EMPTY; TLB_ENTRIES]; MMU_IDX_COUNT]
                .into_boxed_slice()
                .try_into()
                .expect("MMU_IDX_COUNT tables"),
            dirty: 0,
            victim: [[TlbEntry::EMPTY; VICTIM_ENTRIES]; MMU_IDX_COUNT],
            victim_next: [0; MMU_IDX_COUNT],
            filled: Vec::with_capacity(FILL_LOG),
            counters: TlbCounters::default(),
        }
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

    /// On a miss: moves a victim entry with a tag for `access` to `ea`'s page back into the
    /// table (swapping it with the entry there); true when the table now has it.
    pub fn victim_lookup(&mut self, idx: usize, ea: u64, access: Access) -> bool {
        let page = ea & PAGE_MASK;
        let tag = |e: &TlbEntry| match access {
            Access::Read => e.read,
            Access::Write => e.write,
            Access::Exec => e.exec,
        };
        let Some(k) = self.victim[idx].iter().position(|e| tag(e) == page) else {
            return false;
        };
        let slot = Self::slot(ea);
        std::mem::swap(&mut self.table[idx][slot], &mut self.victim[idx][k]);
        self.counters.victim_hits += 1;
        true
    }

    /// Caches a translation, replacing what the slot held for this page (a fill always
    /// carries every permission the page has now). Devices get no fast-path tags; watched
    /// pages get no write tag. Another page's entry in the slot moves to the victim table.
    pub fn insert(&mut self, idx: usize, ea: u64, m: &PageMapping) {
        self.counters.fills += 1;
        self.dirty |= 1 << idx;
        let page = ea & PAGE_MASK;
        let slot = Self::slot(ea);
        if self.filled.len() < FILL_LOG {
            self.filled.push((idx * TLB_ENTRIES + slot) as u16);
        }
        let old = std::mem::replace(&mut self.table[idx][slot], TlbEntry::EMPTY);
        if old.page().is_some_and(|p| p != page) {
            let n = &mut self.victim_next[idx];
            self.victim[idx][*n as usize] = old;
            *n = (*n + 1) % VICTIM_ENTRIES as u8;
        }
        if m.host.is_null() {
            return;
        }
        let tag = |allowed: bool| if allowed { page } else { INVALID };
        self.table[idx][slot] = TlbEntry {
            read: tag(m.read),
            write: tag(m.write && !m.watch_writes),
            exec: tag(m.exec),
            addend: (m.host as u64).wrapping_sub(page),
        };
    }

    /// Nothing was filled since the last full flush: no entry to drop.
    pub fn is_clean(&self) -> bool {
        self.dirty == 0
    }

    /// Drops every entry (a no-op when nothing was filled since the last flush).
    pub fn flush_all(&mut self) -> bool {
        if self.is_clean() {
            return false;
        }
        // Only the slots filled since the last flush hold entries (the rest are empty), and
        // the victims of the indexes filled.
        let whole = self.filled.len() == FILL_LOG;
        for &k in self.filled.iter().filter(|_| !whole) {
            let (idx, slot) = (k as usize / TLB_ENTRIES, k as usize % TLB_ENTRIES);
            self.table[idx][slot] = TlbEntry::EMPTY;
        }
        for (idx, (t, v)) in self.table.iter_mut().zip(&mut self.victim).enumerate() {
            if self.dirty & (1 << idx) != 0 {
                if whole {
                    t.fill(TlbEntry::EMPTY);
                }
                v.fill(TlbEntry::EMPTY);
            }
        }
        self.filled.clear();
        self.dirty = 0;
        self.counters.full_flushes += 1;
        true
    }

    /// Drops the entries of the translated MMU indexes that map host addresses in any of
    /// `ranges` (`[lo, hi)`): what a change to the HPTEs of those pages leaves stale.
    /// Real-mode entries were not made from HPTEs, and an entry with no valid tag maps
    /// nothing; both stay.
    pub fn flush_translated_host_ranges(&mut self, ranges: &[(u64, u64)]) {
        let stale = |e: &TlbEntry| {
            e.page().is_some_and(|p| {
                let h = p.wrapping_add(e.addend);
                ranges.iter().any(|&(lo, hi)| (lo..hi).contains(&h))
            })
        };
        // A flush per removed HPTE scanning 8 K slots was 2.5 % of mkbench: the fill log's.
        self.for_each_filled(|idx, e| {
            if TRANSLATED_IDX.contains(&idx) && stale(e) {
                *e = TlbEntry::EMPTY;
            }
        });
        for idx in TRANSLATED_IDX {
            for e in &mut self.victim[idx] {
                if stale(e) {
                    *e = TlbEntry::EMPTY;
                }
            }
        }
        self.counters.range_flushes += 1;
    }

    /// Calls `f(idx, entry)` on every table slot that can hold an entry: while the fill log
    /// holds every fill since the last full flush, the logged slots (as in a full flush);
    /// else every slot of every index.
    fn for_each_filled(&mut self, mut f: impl FnMut(usize, &mut TlbEntry)) {
        if self.filled.len() < FILL_LOG {
            for &k in &self.filled {
                let (idx, slot) = (k as usize / TLB_ENTRIES, k as usize % TLB_ENTRIES);
                f(idx, &mut self.table[idx][slot]);
            }
        } else {
            for (idx, t) in self.table.iter_mut().enumerate() {
                t.iter_mut().for_each(|e| f(idx, e));
            }
        }
    }

    /// Withdraws fast-path write permission from every entry that maps the host page
    /// `host_page`, under any effective address and MMU index, victims included: the page
    /// now holds translated code, and stores to it must take the watched slow path. (A
    /// victim with its write tag would come back on the next store's miss.)
    pub fn drop_writes_to_host_page(&mut self, host_page: u64) {
        let drop = |e: &mut TlbEntry| {
            if e.write & !PAGE_MASK == 0 && e.write.wrapping_add(e.addend) == host_page {
                e.write = INVALID;
            }
        };
        self.for_each_filled(|_, e| drop(e));
        self.victim.iter_mut().flatten().for_each(drop);
    }

    /// Drops the entries for the page containing `ea` in every MMU index.
    pub fn flush_page(&mut self, ea: u64) {
        let page = ea & PAGE_MASK;
        let s = Self::slot(ea);
        let same = |e: &TlbEntry| e.page() == Some(page);
        for t in self.table.iter_mut() {
            if same(&t[s]) {
                t[s] = TlbEntry::EMPTY;
            }
        }
        for e in self.victim.iter_mut().flatten() {
            if same(e) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The one compare of translated code: an aligned address of a cached page hits; a
    /// misaligned one, another page, or any address against an invalid tag misses.
    #[test]
    fn fast_path_compare_needs_the_page_and_alignment_and_never_hits_invalid() {
        let page = 0x7fff_1234_5000u64;
        for size in [1u32, 2, 4, 8] {
            let m = fast_path_mask(size);
            for off in 0..PAGE_SIZE {
                let ea = page + off;
                let aligned = off % size as u64 == 0;
                assert_eq!(ea & m == page, aligned, "size {size} off {off:#x}");
                assert_ne!(ea & m, INVALID, "size {size} off {off:#x}");
                assert_ne!(off & m, INVALID, "page 0, size {size} off {off:#x}");
            }
            assert_ne!((page + PAGE_SIZE) & m, page, "the next page, size {size}");
        }
    }

    fn mapping(host: *mut u8, read: bool, write: bool, exec: bool) -> PageMapping {
        PageMapping {
            host,
            pa: 0,
            read,
            write,
            exec,
            watch_writes: false,
        }
    }

    /// A page that becomes code loses its write tags everywhere, the victim table too
    /// (its entry there would return with write permission on the next store's miss), and
    /// keeps its read tags; another page's entries keep theirs.
    #[test]
    fn dropping_writes_to_a_code_page_reaches_the_victims() {
        let mut t = Tlb::new();
        let h = 0x7000_0000_0000usize as *mut u8;
        let other = h.wrapping_add(PAGE_SIZE as usize);
        let (a, b) = (
            0x4000_0000u64,
            0x4000_0000u64 + (TLB_ENTRIES as u64) * PAGE_SIZE,
        );
        assert_eq!(Tlb::slot(a), Tlb::slot(b));
        t.insert(2, a, &mapping(h, true, true, false));
        t.insert(2, b, &mapping(other, true, true, false));
        // The same host page at a second address, in the table.
        t.insert(3, a + PAGE_SIZE, &mapping(h, true, true, false));
        t.drop_writes_to_host_page(h as u64);
        assert!(
            !t.victim_lookup(2, a, Access::Write),
            "victim kept its write tag"
        );
        assert!(t.victim_lookup(2, a, Access::Read));
        assert!(t.lookup(2, a, 8, Access::Read).is_some());
        assert!(t.lookup(2, a, 8, Access::Write).is_none());
        assert!(t.lookup(3, a + PAGE_SIZE, 8, Access::Write).is_none());
        assert!(t.lookup(3, a + PAGE_SIZE, 8, Access::Read).is_some());
        // `b` (now the victim) maps another host page: untouched.
        assert!(t.victim_lookup(2, b, Access::Write));
        // With the fill log overflowed, the whole table is searched.
        let mut t = Tlb::new();
        for k in 0..FILL_LOG as u64 + 1 {
            t.insert(1, k * PAGE_SIZE, &mapping(other, true, true, false));
        }
        t.insert(1, a, &mapping(h, true, true, false));
        t.drop_writes_to_host_page(h as u64);
        assert!(t.lookup(1, a, 8, Access::Write).is_none());
        assert!(t.lookup(1, a, 8, Access::Read).is_some());
    }

    #[test]
    fn insert_replaces_the_slot_and_keeps_the_displaced_page_as_a_victim() {
        let mut buf = vec![0u8; 3 * PAGE_SIZE as usize];
        let h = buf.as_mut_ptr();
        let mut t = Tlb::new();
        let a = 0x10_0000u64;
        let b = a + (TLB_ENTRIES as u64) * PAGE_SIZE; // same slot as `a`
        t.insert(2, a, &mapping(h, true, false, true));
        assert!(t.lookup(2, a + 8, 8, Access::Read).is_some());
        assert!(t.lookup(2, a, 4, Access::Write).is_none());
        // The same page again, now writable: one entry with all three tags.
        t.insert(2, a, &mapping(h, true, true, true));
        assert_eq!(
            t.lookup(2, a + 8, 8, Access::Write),
            Some(h.wrapping_add(8))
        );
        t.insert(
            2,
            b,
            &mapping(h.wrapping_add(PAGE_SIZE as usize), true, true, false),
        );
        assert!(
            t.lookup(2, a, 4, Access::Read).is_none(),
            "displaced from the table"
        );
        assert_eq!(
            t.lookup(2, b + 4, 4, Access::Read),
            Some(h.wrapping_add(PAGE_SIZE as usize + 4))
        );
        // A miss on `a` finds it among the victims and swaps it back, with its permissions.
        assert!(t.victim_lookup(2, a + 16, Access::Write));
        assert_eq!(
            t.lookup(2, a + 16, 8, Access::Write),
            Some(h.wrapping_add(16))
        );
        assert!(t.lookup(2, b, 4, Access::Read).is_none());
        assert!(t.victim_lookup(2, b, Access::Read));
        assert!(
            !t.victim_lookup(2, b, Access::Exec),
            "b was never executable"
        );
        // Other MMU indexes have their own victims.
        assert!(!t.victim_lookup(3, a, Access::Read));
        assert_eq!(t.counters.victim_hits, 2);
    }

    /// A full flush after few fills clears those slots; after more than it logs, every
    /// slot of the indexes filled. Either way nothing is left.
    #[test]
    fn full_flushes_clear_every_fill_below_and_above_the_log() {
        let mut buf = vec![0u8; PAGE_SIZE as usize];
        let h = buf.as_mut_ptr();
        for n in [3, FILL_LOG - 1, FILL_LOG, 3 * FILL_LOG] {
            let mut t = Tlb::new();
            let ea = |k: usize| 0x10_0000 + (k as u64 * 7 % 5000) * PAGE_SIZE;
            for k in 0..n {
                t.insert(2 + k % 2, ea(k), &mapping(h, true, true, true));
            }
            assert!(t.flush_all());
            for k in 0..n {
                for idx in 0..MMU_IDX_COUNT {
                    assert!(t.lookup(idx, ea(k), 1, Access::Read).is_none(), "{n}: {k}");
                    assert!(!t.victim_lookup(idx, ea(k), Access::Read), "{n}: {k}");
                }
            }
        }
    }

    #[test]
    fn a_range_flush_drops_translated_entries_of_those_host_pages_only() {
        let mut buf = vec![0u8; 3 * PAGE_SIZE as usize];
        let base = buf.as_mut_ptr();
        let h = |k: usize| base.wrapping_add(k * PAGE_SIZE as usize);
        let (h0, h1, h2) = (h(0), h(1), h(2));
        // Below the fill log (its slots are visited) and above it (every slot is).
        for extra in [0, FILL_LOG] {
            let mut t = Tlb::new();
            for k in 0..extra {
                let ea = 0x1000_0000 + k as u64 * PAGE_SIZE;
                t.insert(3, ea, &mapping(h1, true, true, true));
            }
            let (a, b, c) = (0x4000u64, 0x9000, 0x7000_0000);
            // Translated: `a` and `b` map host page 0 (two mappings of one page), `c` page 1,
            // and `a + TLB_ENTRIES pages` (displacing `a` to the victims) page 0 again.
            let far = a + TLB_ENTRIES as u64 * PAGE_SIZE;
            t.insert(2, a, &mapping(h0, true, true, true));
            t.insert(3, far, &mapping(h2, true, true, true));
            t.insert(3, a, &mapping(h0, true, true, true));
            t.insert(3, far, &mapping(h0, true, true, true));
            t.insert(2, b, &mapping(h0, true, false, false));
            t.insert(2, c, &mapping(h1, true, true, true));
            // Real mode: made without the page table.
            t.insert(0, a, &mapping(h0, true, true, true));
            let lo = h0 as u64;
            t.flush_translated_host_ranges(&[(lo, lo + PAGE_SIZE)]);
            assert!(t.lookup(2, a, 1, Access::Read).is_none());
            assert!(t.lookup(2, b, 1, Access::Read).is_none());
            assert!(t.lookup(3, far, 1, Access::Read).is_none());
            assert!(!t.victim_lookup(3, a, Access::Read), "the victim too");
            assert!(t.lookup(2, c, 1, Access::Read).is_some(), "another page");
            assert!(t.lookup(0, a, 1, Access::Read).is_some(), "real mode");
            assert_eq!(t.counters.range_flushes, 1);
        }
    }

    #[test]
    fn flushes_reach_the_victims() {
        let mut buf = vec![0u8; PAGE_SIZE as usize];
        let h = buf.as_mut_ptr();
        let mut t = Tlb::new();
        let a = 0x4000u64;
        let b = a + (TLB_ENTRIES as u64) * PAGE_SIZE;
        t.insert(0, a, &mapping(h, true, true, true));
        t.insert(0, b, &mapping(h, true, true, true));
        t.flush_page(a);
        assert!(!t.victim_lookup(0, a, Access::Read));
        assert!(t.lookup(0, b, 1, Access::Read).is_some());
        t.insert(0, a, &mapping(h, true, true, true));
        assert!(t.flush_all());
        assert!(!t.victim_lookup(0, b, Access::Read));
        assert!(t.lookup(0, a, 1, Access::Read).is_none());
    }

    #[test]
    fn victims_are_bounded_round_robin() {
        let mut buf = vec![0u8; PAGE_SIZE as usize];
        let h = buf.as_mut_ptr();
        let mut t = Tlb::new();
        let stride = (TLB_ENTRIES as u64) * PAGE_SIZE;
        for k in 0..=VICTIM_ENTRIES as u64 + 1 {
            t.insert(1, k * stride, &mapping(h, true, false, false));
        }
        // Pages 0..=VICTIM_ENTRIES were displaced; page 0 was pushed out of the victims again.
        assert!(!t.victim_lookup(1, 0, Access::Read));
        for k in 1..=VICTIM_ENTRIES as u64 {
            assert!(t.victim_lookup(1, k * stride, Access::Read), "page {k}");
        }
    }
}
