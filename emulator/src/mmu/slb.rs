//! Segments: SLB entry formats, segment lookup, page sizes and the hash of a virtual page.

use crate::cpu::{SLB_VALID, SlbEntry};

/// `SlbEntry::esid` (slbmte RB) masks.
pub mod esid {
    /// ESID of a 256 MB segment: EA bits 0:35.
    pub const ESID_256M: u64 = 0xffff_ffff_f000_0000;
    /// ESID of a 1 TB segment: EA bits 0:23.
    pub const ESID_1T: u64 = 0xffff_ff00_0000_0000;
    pub const VALID: u64 = super::SLB_VALID;
    /// Low 12 bits of RB: the SLB index for slbmte.
    pub const INDEX: u64 = 0xfff;
}

/// `SlbEntry::vsid` (slbmte RS) fields.
pub mod vsid {
    /// Segment size B: 0b00 = 256 MB, 0b01 = 1 TB, others reserved.
    pub const B: u64 = 0xc000_0000_0000_0000;
    pub const B_1T: u64 = 0x4000_0000_0000_0000;
    /// VSID field of a 256 MB segment (VSID << 12) and of a 1 TB segment (VSID << 24).
    pub const VSID_256M: u64 = 0x3fff_ffff_ffff_f000;
    pub const VSID_1T: u64 = 0x3fff_ffff_ff00_0000;
    pub const SHIFT_256M: u32 = 12;
    pub const SHIFT_1T: u32 = 24;
    /// Supervisor and problem-state storage keys.
    pub const KS: u64 = 0x800;
    pub const KP: u64 = 0x400;
    /// No-execute segment.
    pub const N: u64 = 0x200;
    /// Large page (L) and its size selector (LP): the segment's base page size.
    pub const L: u64 = 0x100;
    pub const C: u64 = 0x80;
    pub const LP: u64 = 0x30;
    pub const LLP: u64 = L | LP;
}

/// One actual page size usable in a segment, with its encoding in the HPTE's low RPN bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSize {
    pub shift: u32,
    /// For large pages: the value of RPN bits `12..shift` that selects this size.
    pub pte_enc: u64,
}

/// A segment base page size (selected by the SLB L||LP bits) and the page sizes its HPTEs
/// may map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPageSizes {
    pub base_shift: u32,
    pub slb_enc: u64,
    pub sizes: &'static [PageSize],
}

/// The page sizes this machine offers, exactly as QEMU 7.2 advertises them for a POWER8
/// pseries guest under TCG (`ibm,segment-page-sizes`): 4 KiB segments with 4 KiB pages and
/// 64 KiB segments with 64 KiB pages. 16 MiB pages would be one more row
/// (`{24, 0x100, [(24, 0)]}`) but change Linux's HPT traffic relative to the peer.
pub const SEGMENT_PAGE_SIZES: &[SegmentPageSizes] = &[
    SegmentPageSizes {
        base_shift: 12,
        slb_enc: 0x000,
        sizes: &[PageSize {
            shift: 12,
            pte_enc: 0,
        }],
    },
    SegmentPageSizes {
        base_shift: 16,
        slb_enc: 0x110,
        sizes: &[PageSize {
            shift: 16,
            pte_enc: 1,
        }],
    },
];

/// The `ibm,segment-page-sizes` property cells for [`SEGMENT_PAGE_SIZES`]: per segment size
/// (base shift, SLB encoding, count, then (shift, HPTE encoding) per page size).
pub fn segment_page_sizes_cells() -> Vec<u32> {
    let mut cells = Vec::new();
    for s in SEGMENT_PAGE_SIZES {
        cells.extend([s.base_shift, s.slb_enc as u32, s.sizes.len() as u32]);
        for p in s.sizes {
            cells.extend([p.shift, p.pte_enc as u32]);
        }
    }
    cells
}

/// Page sizes of the segment an SLB entry describes, or `None` for an encoding this CPU
/// does not offer (slbmte refuses those, so a lookup never sees one).
#[inline]
pub fn segment_page_sizes(slb_vsid: u64) -> Option<&'static SegmentPageSizes> {
    SEGMENT_PAGE_SIZES
        .iter()
        .find(|s| s.slb_enc == slb_vsid & vsid::LLP)
}

/// Actual page shift of an HPTE in a segment with page sizes `seg`, or `None` when the HPTE
/// encodes a size the segment cannot use (such an entry never matches).
#[inline]
pub fn hpte_page_shift(seg: &SegmentPageSizes, pte0: u64, pte1: u64) -> Option<u32> {
    use super::hpte_r::RPN;
    if pte0 & super::hpte_v::LARGE == 0 {
        return (seg.base_shift == 12).then_some(12);
    }
    seg.sizes.iter().filter(|p| p.shift > 12).find_map(|p| {
        let mask = ((1u64 << p.shift) - 1) & RPN;
        (pte1 & mask == p.pte_enc << 12).then_some(p.shift)
    })
}

/// Page shift of an HPTE in any segment (H_ENTER validation), `None` for a bad encoding.
pub fn hpte_page_shift_any(pte0: u64, pte1: u64) -> Option<u32> {
    if pte0 & super::hpte_v::LARGE == 0 {
        return Some(12);
    }
    SEGMENT_PAGE_SIZES
        .iter()
        .find_map(|s| hpte_page_shift(s, pte0, pte1))
}

/// The SLB entry that translates `ea`: a valid entry whose ESID matches for its segment size.
#[inline]
pub fn lookup(slb: &[SlbEntry], ea: u64) -> Option<usize> {
    slb.iter().position(|e| matches(e, ea))
}

/// Whether `e` translates `ea`.
#[inline]
pub fn matches(e: &SlbEntry, ea: u64) -> bool {
    if e.esid & esid::VALID == 0 {
        return false;
    }
    match e.vsid & vsid::B {
        0 => (e.esid ^ ea) & esid::ESID_256M == 0,
        vsid::B_1T => (e.esid ^ ea) & esid::ESID_1T == 0,
        _ => false,
    }
}

/// Where a virtual page lives in the HPT: the primary hash and the value the `COMPARE`
/// bits of a matching HPTE's first doubleword must have (the secondary search uses `!hash`
/// and adds `SECONDARY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashKey {
    pub hash: u64,
    pub ptem: u64,
}

/// Hash and AVPN of `ea` in the segment `e` with base page shift `base_shift`
/// (Book III-S 5.7.7.3: 256 MB: VSID ^ page index; 1 TB: VSID ^ (VSID << 25) ^ page index).
#[inline]
pub fn hash_key(e: &SlbEntry, base_shift: u32, ea: u64) -> HashKey {
    let page_mask = !((1u64 << base_shift) - 1);
    let (hash, vsid_bits, epn) = if e.vsid & vsid::B == vsid::B_1T {
        let v = (e.vsid & vsid::VSID_1T) >> vsid::SHIFT_1T;
        let epn = ea & !esid::ESID_1T & page_mask;
        (
            v ^ (v << 25) ^ (epn >> base_shift),
            e.vsid & (vsid::B | vsid::VSID_1T),
            epn,
        )
    } else {
        let v = (e.vsid & vsid::VSID_256M) >> vsid::SHIFT_256M;
        let epn = ea & !esid::ESID_256M & page_mask;
        (
            v ^ (epn >> base_shift),
            e.vsid & (vsid::B | vsid::VSID_256M),
            epn,
        )
    };
    HashKey {
        hash,
        ptem: vsid_bits | ((epn >> 16) & super::hpte_v::AVPN) | super::hpte_v::VALID,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::hpte_v;

    fn seg256(esid_ea: u64, vsid_val: u64, llp: u64) -> SlbEntry {
        SlbEntry {
            esid: (esid_ea & esid::ESID_256M) | esid::VALID,
            vsid: (vsid_val << 12) | llp,
        }
    }

    fn seg1t(esid_ea: u64, vsid_val: u64, llp: u64) -> SlbEntry {
        SlbEntry {
            esid: (esid_ea & esid::ESID_1T) | esid::VALID,
            vsid: vsid::B_1T | (vsid_val << 24) | llp,
        }
    }

    #[test]
    fn device_tree_cells_match_qemu_7_2() {
        // ibm,segment-page-sizes from qemu-7.2-pseries-power8-smp2.dts.
        assert_eq!(
            segment_page_sizes_cells(),
            vec![0x0c, 0x00, 0x01, 0x0c, 0x00, 0x10, 0x110, 0x01, 0x10, 0x01]
        );
    }

    #[test]
    fn slb_lookup_256m_and_1t() {
        let mut slb = [SlbEntry::default(); 32];
        slb[3] = seg256(0xc000_0000_1000_0000, 0x1234, 0);
        slb[7] = seg1t(0x0000_0100_0000_0000, 0x55, 0x110);
        assert_eq!(lookup(&slb, 0xc000_0000_1fff_fff8), Some(3));
        assert_eq!(lookup(&slb, 0xc000_0000_2000_0000), None);
        assert_eq!(lookup(&slb, 0xc000_0000_0fff_ffff), None);
        assert_eq!(lookup(&slb, 0x0000_0100_0000_0000), Some(7));
        assert_eq!(lookup(&slb, 0x0000_01ff_ffff_ffff), Some(7));
        assert_eq!(lookup(&slb, 0x0000_0200_0000_0000), None);
        // Invalid entries and reserved segment sizes never match.
        slb[3].esid &= !esid::VALID;
        assert_eq!(lookup(&slb, 0xc000_0000_1000_0000), None);
        slb[3] = seg256(0xc000_0000_1000_0000, 0x1234, 0);
        slb[3].vsid |= 0x8000_0000_0000_0000;
        assert_eq!(lookup(&slb, 0xc000_0000_1000_0000), None);
    }

    #[test]
    fn segment_page_size_decoding() {
        assert_eq!(segment_page_sizes(0x123_4000).unwrap().base_shift, 12);
        assert_eq!(
            segment_page_sizes(0x123_4000 | 0x110).unwrap().base_shift,
            16
        );
        assert_eq!(
            segment_page_sizes(0x123_4000 | 0x100),
            None,
            "16M segments are not offered"
        );
        assert_eq!(segment_page_sizes(0x123_4000 | 0x120), None);
        let s4k = segment_page_sizes(0).unwrap();
        let s64k = segment_page_sizes(0x110).unwrap();
        // 4K HPTE: only in a 4K segment.
        assert_eq!(hpte_page_shift(s4k, hpte_v::VALID, 0x1234_5000), Some(12));
        assert_eq!(hpte_page_shift(s64k, hpte_v::VALID, 0x1234_5000), None);
        // 64K HPTE: L set, RPN bits 12..15 = 0b0001; only in a 64K segment.
        let l = hpte_v::VALID | hpte_v::LARGE;
        assert_eq!(hpte_page_shift(s64k, l, 0x1234_0000 | 0x1000), Some(16));
        assert_eq!(hpte_page_shift(s64k, l, 0x1234_0000 | 0x2000), None);
        assert_eq!(hpte_page_shift(s4k, l, 0x1234_0000 | 0x1000), None);
        assert_eq!(hpte_page_shift_any(l, 0x1234_1000), Some(16));
        assert_eq!(
            hpte_page_shift_any(l, 0x1234_0000),
            None,
            "16M encoding refused"
        );
        assert_eq!(hpte_page_shift_any(hpte_v::VALID, 0x1234_0000), Some(12));
    }

    #[test]
    fn hash_256m_4k() {
        let e = seg256(0xc000_0000_0000_0000, 0x0abc_def1, 0);
        let ea = 0xc000_0000_0123_4567;
        let k = hash_key(&e, 12, ea);
        assert_eq!(k.hash, 0x0abc_def1 ^ 0x1234);
        // AVPN: VSID << 12 | EA bits 36:40 (page index bits above the hash) << 7.
        assert_eq!(
            k.ptem,
            (0x0abc_def1 << 12) | ((0x0123_4567u64 >> 23) << 7) | hpte_v::VALID
        );
    }

    #[test]
    fn hash_256m_64k() {
        let e = seg256(0x1000_0000, 0x77, 0x110);
        let ea = 0x1fed_cba9;
        let k = hash_key(&e, 16, ea);
        assert_eq!(k.hash, 0x77 ^ 0xfed);
        assert_eq!(
            k.ptem,
            (0x77 << 12) | ((0x0fed_cba9u64 >> 23) << 7) | hpte_v::VALID
        );
    }

    #[test]
    fn hash_1t_4k_and_64k() {
        let v = 0x3_4567_89ab_u64;
        let e = seg1t(0x0000_0300_0000_0000, v, 0);
        let ea = 0x0000_03ab_cdef_1234;
        let off = ea & 0xff_ffff_ffff;
        let k = hash_key(&e, 12, ea);
        assert_eq!(k.hash, v ^ (v << 25) ^ (off >> 12));
        assert_eq!(
            k.ptem,
            hpte_v::SSIZE_1T | (v << 24) | ((off >> 23) << 7) | hpte_v::VALID
        );
        let e64 = seg1t(0x0000_0300_0000_0000, v, 0x110);
        let k = hash_key(&e64, 16, ea);
        assert_eq!(k.hash, v ^ (v << 25) ^ (off >> 16));
        assert_eq!(
            k.ptem,
            hpte_v::SSIZE_1T | (v << 24) | ((off >> 23) << 7) | hpte_v::VALID
        );
    }
}
