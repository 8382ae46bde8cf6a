//! The per-vCPU jump cache (QEMU's `tb_jmp_cache`): the last blocks found for effective PCs,
//! looked up by the run loop and by translated code's exits. An entry holds while the
//! PC maps to the host page it was made for, so entries survive TLB flushes (translated
//! code checks the exec TLB entry's addend before it chains); it is cleared when blocks are
//! dropped anywhere (the code cache's generation moved).
//!
//! Two ways per set, a set per cache line: direct-mapped, 90 % of the run loop's block-map
//! lookups on a compile in Linux (linux-make, N = 1: 6.3 M of 7.0 M) were conflicts — the slot
//! held another PC 256 KiB away (a compiler's hot code spans megabytes, the kernel's beside
//! it). A probe compares the first way's PC and then the second's, in the same line.

use super::cache::KEY_MSR_BITS;
use super::tier::TierId;

/// Jump cache entry; read by translated code (`repr(C)`).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct JcEntry {
    pub pc: u64,
    pub flags: u64,
    pub f: usize,
    /// Host address minus guest effective address of the block's page when the entry was
    /// made: the entry holds while the exec TLB entry of `pc` has this addend.
    pub addend: u64,
}

/// Jump cache entries per vCPU. A compiler's hot code spans tens of thousands of blocks: with
/// 4096 entries, `make` of a C project found the next block in the shared map more often than
/// here (conflict misses), each a run-loop round trip.
pub(crate) const JC_SIZE: usize = 1 << 16;
/// Ways per set, and sets.
pub(crate) const JC_WAYS: usize = 2;
pub(crate) const JC_SETS: usize = JC_SIZE / JC_WAYS;

/// One set of the jump cache: the most recently inserted PC first. Read by translated code
/// (`repr(C)`; one cache line).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct JcSet {
    pub ways: [JcEntry; JC_WAYS],
}
const _: () = assert!(size_of::<JcSet>() == 64);

impl JcSet {
    /// The entry a probe for `pc` compares: the first way if it holds `pc`, else the second
    /// (which then holds `pc` or misses).
    #[inline(always)]
    pub fn probe(&self, pc: u64) -> &JcEntry {
        if self.ways[0].pc == pc {
            &self.ways[0]
        } else {
            &self.ways[1]
        }
    }

    /// Puts `e` first; the entry it displaces moves to the second way (dropping the older
    /// one), unless it is an entry for the same PC, which `e` replaces. A PC is in one way at
    /// most.
    #[inline]
    pub fn insert(&mut self, e: JcEntry) {
        if self.ways[0].pc != e.pc {
            self.ways[1] = self.ways[0];
        }
        self.ways[0] = e;
    }
}

/// One vCPU's jump cache: its sets, and the sets written since the last clear. The cache is
/// cleared whenever blocks are dropped anywhere (a guest write to translated code, about
/// 3,000 times in a linux-make run), usually with a few hundred sets written since the clear
/// before: a clear rewrites those instead of all 2 MiB. Past [`JumpCache::LOGGED`] writes
/// it rewrites every set.
pub struct JumpCache {
    /// `JC_SETS` sets in a shared anonymous host mapping ([`zero_pages`]).
    mem: memmap2::MmapMut,
    /// Indexes of the sets written since the last clear (repeats allowed), up to `LOGGED`.
    written: Vec<u32>,
}

/// `len` bytes of zeros that the host fills page by page on first touch: a zeroed heap
/// allocation of 64-byte-aligned sets is written whole (2 MiB and 512 page faults per vCPU
/// at start, 15 % of a short user-mode program's run). Shared rather than private: the
/// run loop reads a set before it writes one, and a private mapping serves the read with
/// the host's zero page, whose replacement at the write is a page-table change that the
/// host announces to every core running a thread of the process (a TLB shootdown: 4,000
/// of them in a 28-vCPU run of the bundled guest on two cores). A shared page is the
/// process's own from its first read; the write only adds write permission.
fn zero_pages(len: usize) -> std::io::Result<memmap2::MmapMut> {
    use std::os::fd::FromRawFd;
    // SAFETY: a new anonymous file with a static name; the `File` owns the descriptor.
    let file = unsafe {
        let fd = libc::memfd_create(c"jump-cache".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        std::fs::File::from_raw_fd(fd)
    };
    file.set_len(len as u64)?;
    // SAFETY: the file is ours alone, so nothing else changes the mapped bytes.
    unsafe { memmap2::MmapMut::map_mut(&file) }
}

impl JumpCache {
    /// Writes logged between clears; one more and a clear rewrites the whole cache.
    pub const LOGGED: usize = JC_SETS / 8;

    pub fn new() -> Self {
        Self {
            mem: zero_pages(JC_SETS * size_of::<JcSet>())
                .expect("the host refused the jump cache's 2 MiB"),
            written: Vec::with_capacity(Self::LOGGED + 1),
        }
    }

    fn sets(&self) -> &[JcSet] {
        // SAFETY: the mapping holds `JC_SETS` sets' bytes, page aligned (more than a set's
        // 64), and lives as long as `self`; `JcSet` is plain integers, so any bytes, the
        // zeros the host maps included, are a value (all zero: `JC_EMPTY_SET`).
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr().cast(), JC_SETS) }
    }

    /// The sets of `mem` (a field of `self`, so that `written` stays borrowable beside).
    fn sets_mut(mem: &mut memmap2::MmapMut) -> &mut [JcSet] {
        // SAFETY: as in `sets`, borrowed mutably through the mapping.
        unsafe { std::slice::from_raw_parts_mut(mem.as_mut_ptr().cast(), JC_SETS) }
    }

    /// The sets, as translated code reads them (`JitCtx::jc`); they never move.
    pub fn as_ptr(&self) -> *const JcSet {
        self.sets().as_ptr()
    }

    /// The entry for `pc` if it is cached (else another, whose PC differs).
    #[inline(always)]
    pub fn probe(&self, pc: u64) -> &JcEntry {
        self.sets()[set(pc)].probe(pc)
    }

    pub fn insert(&mut self, e: JcEntry) {
        let s = set(e.pc);
        if self.written.len() <= Self::LOGGED {
            self.written.push(s as u32);
        }
        Self::sets_mut(&mut self.mem)[s].insert(e);
    }

    /// Empties every set.
    pub fn clear(&mut self) {
        let sets = Self::sets_mut(&mut self.mem);
        if self.written.len() > Self::LOGGED {
            sets.fill(JC_EMPTY_SET);
        } else {
            for &s in &self.written {
                sets[s as usize] = JC_EMPTY_SET;
            }
        }
        self.written.clear();
    }
}

impl Default for JumpCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a jump-cache entry's flags word (`JcEntry::flags`) holds the number of the tier
/// whose block it is (beside the block key's MSR bits, which never use these bits): the
/// exits of each tier's code compare the whole word, so that they chain only to blocks of
/// their own tier and MSR state.
const TIER_SHIFT: u32 = 62;
const _: () = assert!(KEY_MSR_BITS & (1 << TIER_SHIFT) == 0 && TierId::COUNT <= 2);

/// `JcEntry::flags` of a block of `tier` translated for the MSR bits `flags`.
#[inline(always)]
pub const fn jc_flags(flags: u64, tier: TierId) -> u64 {
    flags | (tier as u64) << TIER_SHIFT
}

/// The tier and block key MSR bits of an entry's flags word.
#[inline(always)]
pub fn split_flags(jc_flags: u64) -> (TierId, u64) {
    let t = TierId::from_index(((jc_flags >> TIER_SHIFT) & 1) as usize);
    (t, jc_flags & !(1 << TIER_SHIFT))
}

/// The set of `pc`.
#[inline(always)]
pub fn set(pc: u64) -> usize {
    (pc >> 2) as usize & (JC_SETS - 1)
}

/// An empty entry: all zero, so that a new cache is zero pages the host maps lazily (a
/// 2 MiB fill per vCPU was a tenth of a short user-mode program's run). It never serves
/// a probe: only a probe for PC 0 gets past the PC compare, and every user of an entry
/// (the run loop, the baseline probe stubs, Cranelift's chain exits) then requires the exec
/// TLB entry of the PC's page to have the entry's addend, 0 — a host address equal to the
/// guest one, 0, which no page has.
pub(super) const JC_EMPTY: JcEntry = JcEntry {
    pc: 0,
    flags: 0,
    f: 0,
    addend: 0,
};

pub(super) const JC_EMPTY_SET: JcSet = JcSet {
    ways: [JC_EMPTY; JC_WAYS],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_marks_round_trip() {
        for t in [TierId::Baseline, TierId::Cranelift] {
            let f = crate::cpu::msr::SF | crate::cpu::msr::LE;
            assert_eq!(split_flags(jc_flags(f, t)), (t, f));
        }
        // Cranelift's entries are the bare key bits (its chain exit compares them).
        assert_eq!(jc_flags(5, TierId::Cranelift), 5);
    }

    fn entry(pc: u64, f: usize) -> JcEntry {
        JcEntry {
            pc,
            flags: 0,
            f,
            addend: 0,
        }
    }

    #[test]
    fn a_new_cache_is_empty_and_misses_every_pc() {
        let jc = JumpCache::new();
        let empty = |e: &JcEntry| (e.pc, e.flags, e.f, e.addend) == (0, 0, 0, 0);
        assert!(jc.sets().iter().all(|s| s.ways.iter().all(empty)));
        assert!(JC_EMPTY_SET.ways.iter().all(empty));
        // PC 0 reaches the (empty) entry; its addend 0 is what keeps it from being used.
        assert_eq!(jc.probe(0).addend, 0);
        assert_ne!(jc.probe(0x1000).pc, 0x1000);
    }

    /// Both ways of a clear, the logged sets and the whole cache, leave no entry behind.
    #[test]
    fn a_clear_empties_every_set_written_since_the_last() {
        for n in [3, JumpCache::LOGGED + 5] {
            let mut jc = JumpCache::new();
            let pcs: Vec<u64> = (0..n as u64).map(|k| 0x4000 + 4 * k).collect();
            for (k, &pc) in pcs.iter().enumerate() {
                jc.insert(entry(pc, k + 1));
            }
            assert!(pcs.iter().all(|&pc| jc.probe(pc).pc == pc));
            jc.clear();
            assert!(
                pcs.iter().all(|&pc| jc.probe(pc).pc != pc),
                "{n} sets written"
            );
            // The log starts again after a clear.
            jc.insert(entry(0x9000, 1));
            jc.clear();
            assert_ne!(jc.probe(0x9000).pc, 0x9000);
        }
    }

    #[test]
    fn a_set_keeps_two_pcs_and_drops_the_older_for_a_third() {
        let (a, b, c) = (0x1018, 0x8_1018, 0x10_1018);
        assert!(set(a) == set(b) && set(b) == set(c));
        let mut s = JC_EMPTY_SET;
        assert_ne!(s.probe(a).pc, a);
        s.insert(entry(a, 1));
        s.insert(entry(b, 2));
        assert_eq!((s.probe(a).pc, s.probe(a).f), (a, 1));
        assert_eq!((s.probe(b).pc, s.probe(b).f), (b, 2));
        s.insert(entry(c, 3));
        assert_ne!(s.probe(a).pc, a, "the older of the two made room");
        assert_eq!((s.probe(b).f, s.probe(c).f), (2, 3));
        // A PC inserted again replaces its entry and does not take the other way too.
        s.insert(entry(c, 4));
        assert_eq!((s.probe(b).f, s.probe(c).f), (2, 4));
        s.insert(entry(b, 5));
        assert_eq!((s.probe(b).f, s.probe(c).f), (5, 4));
    }
}
