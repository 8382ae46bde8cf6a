//! The per-vCPU jump cache (QEMU's `tb_jmp_cache`): the last block found for each effective
//! PC, looked up by the run loop and by translated code's exits. An entry holds while the
//! PC maps to the host page it was made for, so entries survive TLB flushes (translated
//! code checks the exec TLB entry's addend before it chains); it is cleared when blocks are
//! dropped anywhere (the code cache's generation moved).

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

/// The slot of `pc`.
#[inline(always)]
pub fn slot(pc: u64) -> usize {
    (pc >> 2) as usize & (JC_SIZE - 1)
}

pub(super) const JC_EMPTY: JcEntry = JcEntry {
    pc: 1,
    flags: 0,
    f: 0,
    addend: 0,
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
}
