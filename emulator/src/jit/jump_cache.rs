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

pub(super) const JC_EMPTY: JcEntry = JcEntry {
    pc: 1,
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
