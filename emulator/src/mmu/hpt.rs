//! The hashed page table of a pseries partition and the hypercalls that change it.
//!
//! The machine owns one `Hpt` (behind an `Arc`); the guest never sees its memory and changes
//! it only through H_ENTER, H_REMOVE, H_PROTECT and H_BULK_REMOVE. vCPU threads search it on
//! TLB misses without any lock: each HPTE is a pair of `AtomicU64`, writers publish the second
//! doubleword before setting the valid bit, and readers re-read the first doubleword to get a
//! consistent pair. Hypercalls that modify entries serialise on a per-PTEG-stripe lock (they
//! also run under the BQL, but the table does not rely on it). Referenced/changed bits are set
//! by readers with a compare-and-swap, so they are never lost to a concurrent H_PROTECT.
//!
//! Every function returns the hcall return code and outputs; when `flush_tlbs` is set the
//! caller must flush every vCPU's TLB (docs/locking.md: global flushes come only from H_REMOVE,
//! H_BULK_REMOVE and H_PROTECT).

use super::hpte_r;
use super::hpte_v;
use super::slb::{HashKey, SegmentPageSizes, hpte_page_shift, hpte_page_shift_any};
use crate::softmmu::GuestRam;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::papr::{H_NOT_FOUND, H_PARAMETER, H_PTEG_FULL, H_SUCCESS};

/// Flags (r4) of the page-table calls.
pub const H_EXACT: u64 = 1 << (63 - 24);
pub const H_R_XLATE: u64 = 1 << (63 - 25);
pub const H_READ_4: u64 = 1 << (63 - 26);
pub const H_AVPN: u64 = 1 << (63 - 32);
pub const H_ANDCOND: u64 = 1 << (63 - 33);
pub const H_ZERO_PAGE: u64 = 1 << (63 - 48);

/// H_BULK_REMOVE request/response word ("tsh") fields.
pub mod bulk {
    pub const TYPE: u64 = 0xc000_0000_0000_0000;
    pub const REQUEST: u64 = 0x4000_0000_0000_0000;
    pub const RESPONSE: u64 = 0x8000_0000_0000_0000;
    pub const END: u64 = 0xc000_0000_0000_0000;
    /// Response code: 0 success, 1 not found, 2 parameter error, 3 hardware error.
    pub const CODE: u64 = 0x3000_0000_0000_0000;
    pub const CODE_SHIFT: u32 = 60;
    pub const NOT_FOUND: u64 = 1;
    pub const PARAMETER: u64 = 2;
    /// R and C of the removed entry.
    pub const RC: u64 = 0x0c00_0000_0000_0000;
    pub const RC_SHIFT: u32 = 43;
    pub const FLAGS: u64 = 0x0300_0000_0000_0000;
    pub const ANDCOND: u64 = 0x0100_0000_0000_0000;
    pub const AVPN: u64 = 0x0200_0000_0000_0000;
    /// Shifts the flags onto H_ANDCOND / H_AVPN.
    pub const FLAGS_SHIFT: u32 = 26;
    pub const PTEX: u64 = 0x00ff_ffff_ffff_ffff;
    pub const MAX_PAIRS: usize = 4;
}

pub const HPTES_PER_GROUP: u64 = 8;
/// Bytes of one HPTE and of one PTE group.
pub const HPTE_SIZE: u64 = 16;
pub const PTEG_SIZE: u64 = 128;

/// Outcome of a page-table hypercall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HcallResult {
    /// Return code for r3.
    pub ret: i64,
    /// Values for r4, r5, …; only the first `n_out` are outputs.
    pub out: [u64; 8],
    pub n_out: usize,
    /// A valid translation was removed or changed: flush every vCPU's TLB before any of them
    /// can use it again (QEMU flushes all vCPUs' whole TLBs here, and so do the other vCPUs'
    /// flush jobs; the caller's own TLB drops only what maps the pages it names).
    pub flush_tlbs: Option<Invalidated>,
}

/// The guest-physical ranges (base, bytes) of the HPTEs an HPT hypercall removed or changed:
/// a TLB entry that maps anything else was not made from them and stays right.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Invalidated {
    ranges: [(u64, u64); bulk::MAX_PAIRS],
    n: u8,
    /// An HPTE whose page size could not be told: every translation may be stale.
    unknown: bool,
}

impl Invalidated {
    /// Adds the page the HPTE (`v`, `r`) mapped.
    fn add(&mut self, v: u64, r: u64) {
        match hpte_page_shift_any(v, r) {
            Some(shift) if (self.n as usize) < self.ranges.len() => {
                let size = 1u64 << shift;
                self.ranges[self.n as usize] = (r & hpte_r::RPN & !(size - 1), size);
                self.n += 1;
            }
            _ => self.unknown = true,
        }
    }

    /// The ranges, or `None` when any translation may be stale.
    pub fn ranges(&self) -> Option<&[(u64, u64)]> {
        (!self.unknown).then(|| &self.ranges[..self.n as usize])
    }

    /// Every translation may be stale (a flush that names no page).
    pub fn everything() -> Self {
        Self {
            unknown: true,
            ..Self::default()
        }
    }

    /// The one HPTE (`v`, `r`).
    pub fn of(v: u64, r: u64) -> Self {
        let mut i = Self::default();
        i.add(v, r);
        i
    }
}

impl HcallResult {
    fn code(ret: i64) -> Self {
        Self {
            ret,
            out: [0; 8],
            n_out: 0,
            flush_tlbs: None,
        }
    }

    /// The outputs, for the dispatcher to copy into r4.. .
    pub fn outputs(&self) -> &[u64] {
        &self.out[..self.n_out]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HptError {
    /// log2 of the table size outside `[Hpt::MIN_SHIFT, Hpt::MAX_SHIFT]`.
    BadShift(u32),
    /// The host could not allocate the table.
    NoMemory(u32),
}

impl std::fmt::Display for HptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HptError::BadShift(s) => write!(
                f,
                "HPT size 2^{s} outside 2^{}..2^{}",
                Hpt::MIN_SHIFT,
                Hpt::MAX_SHIFT
            ),
            HptError::NoMemory(s) => write!(f, "cannot allocate a 2^{s}-byte HPT"),
        }
    }
}

impl std::error::Error for HptError {}

/// A matching HPTE found by [`Hpt::search`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub ptex: u64,
    pub pte0: u64,
    pub pte1: u64,
    /// Actual page shift (12 or 16).
    pub shift: u32,
}

const LOCK_STRIPES: usize = 64;

/// The hashed page table: `2^shift` bytes of 16-byte HPTEs in 128-byte PTE groups.
pub struct Hpt {
    /// Doublewords 0 and 1 of HPTE `i` at `2i` and `2i + 1`.
    words: Box<[AtomicU64]>,
    shift: u32,
    pteg_mask: u64,
    locks: [Mutex<()>; LOCK_STRIPES],
}

impl Hpt {
    /// Smallest and largest tables (PAPR minimum 256 KiB; 16 GiB is far beyond any `-m`).
    pub const MIN_SHIFT: u32 = 18;
    pub const MAX_SHIFT: u32 = 34;

    /// The table size QEMU gives a pseries machine with `ram` bytes (`ibm,pft-size`): 1/128 of
    /// RAM rounded up to a power of two, at least 256 KiB (1 GiB → 2^23, as in the reference
    /// device tree; 2 GiB → 2^24).
    pub fn shift_for_ram_size(ram: u64) -> u32 {
        let log2 = 64 - ram.max(1).next_power_of_two().leading_zeros() - 1;
        log2.saturating_sub(7)
            .clamp(Self::MIN_SHIFT, Self::MAX_SHIFT)
    }

    /// An empty table of `2^shift` bytes.
    pub fn new(shift: u32) -> Result<Self, HptError> {
        if !(Self::MIN_SHIFT..=Self::MAX_SHIFT).contains(&shift) {
            return Err(HptError::BadShift(shift));
        }
        let n = (1usize << shift) / 8;
        let layout =
            std::alloc::Layout::array::<AtomicU64>(n).map_err(|_| HptError::NoMemory(shift))?;
        // SAFETY: non-zero size; zeroed memory is a valid `AtomicU64` array; the box frees it
        // with the same layout.
        let words = unsafe {
            let p = std::alloc::alloc_zeroed(layout).cast::<AtomicU64>();
            if p.is_null() {
                return Err(HptError::NoMemory(shift));
            }
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
        };
        // A write to every page now: a large zeroed allocation is the host's zero page until
        // written, and hash-table searches read a group before an insert writes it; the
        // replacement of a zero page on that write is announced to every core running a
        // thread of the process (a TLB shootdown per page, on the vCPUs' cores).
        for page in words.chunks(4096 / 8) {
            page[0].store(0, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(Self {
            words,
            shift,
            pteg_mask: (1u64 << (shift - 7)) - 1,
            locks: [const { Mutex::new(()) }; LOCK_STRIPES],
        })
    }

    /// log2 of the size in bytes (the second cell of `ibm,pft-size`).
    pub fn shift(&self) -> u32 {
        self.shift
    }

    pub fn hpte_count(&self) -> u64 {
        (self.words.len() / 2) as u64
    }

    /// Mask applied to a hash to get a PTEG index.
    pub fn pteg_mask(&self) -> u64 {
        self.pteg_mask
    }

    #[inline]
    fn valid_ptex(&self, ptex: u64) -> bool {
        ptex < self.hpte_count()
    }

    #[inline]
    fn v(&self, ptex: u64) -> &AtomicU64 {
        &self.words[2 * ptex as usize]
    }

    #[inline]
    fn r(&self, ptex: u64) -> &AtomicU64 {
        &self.words[2 * ptex as usize + 1]
    }

    fn lock(&self, ptex: u64) -> parking_lot::MutexGuard<'_, ()> {
        self.locks[((ptex / HPTES_PER_GROUP) as usize) % LOCK_STRIPES].lock()
    }

    /// A consistent snapshot of HPTE `ptex` (both doublewords from the same version).
    #[inline]
    fn load(&self, ptex: u64) -> (u64, u64) {
        loop {
            let v = self.v(ptex).load(Ordering::Acquire);
            let r = self.r(ptex).load(Ordering::Acquire);
            if self.v(ptex).load(Ordering::Relaxed) == v {
                return (v, r);
            }
        }
    }

    /// HPTE `ptex`, or `None` beyond the table.
    pub fn read_hpte(&self, ptex: u64) -> Option<(u64, u64)> {
        self.valid_ptex(ptex).then(|| self.load(ptex))
    }

    /// Searches the primary then the secondary PTEG of `key` for a valid HPTE with the
    /// right AVPN, segment size and a page size the segment can use.
    pub fn search(&self, key: HashKey, seg: &SegmentPageSizes) -> Option<Found> {
        self.search_group(key.hash, key.ptem, seg)
            .or_else(|| self.search_group(!key.hash, key.ptem | hpte_v::SECONDARY, seg))
    }

    #[inline]
    fn search_group(&self, hash: u64, ptem: u64, seg: &SegmentPageSizes) -> Option<Found> {
        let base = (hash & self.pteg_mask) * HPTES_PER_GROUP;
        for ptex in base..base + HPTES_PER_GROUP {
            let v = self.v(ptex).load(Ordering::Acquire);
            if (v ^ ptem) & hpte_v::COMPARE != 0 {
                continue;
            }
            let (v, r) = self.load(ptex);
            if (v ^ ptem) & hpte_v::COMPARE != 0 {
                continue;
            }
            // An entry for another base page size (left over from a segment demotion) is
            // not a match.
            if let Some(shift) = hpte_page_shift(seg, v, r) {
                return Some(Found {
                    ptex,
                    pte0: v,
                    pte1: r,
                    shift,
                });
            }
        }
        None
    }

    /// Sets `bits` (R, C) in a found HPTE as the hardware does on an access. Fails when the
    /// entry changed since it was read; the caller searches again.
    #[inline]
    pub fn set_rc(&self, f: &Found, bits: u64) -> bool {
        if f.pte1 & bits == bits {
            return true;
        }
        self.r(f.ptex)
            .compare_exchange(f.pte1, f.pte1 | bits, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            && self.v(f.ptex).load(Ordering::Acquire) == f.pte0
    }

    /// Invalidates every entry (machine reset).
    pub fn clear(&self) {
        for w in self.words.iter() {
            w.store(0, Ordering::Release);
        }
    }

    // --- hypercalls ---

    /// H_ENTER(flags, ptex, pteh, ptel): inserts an HPTE into the PTEG of `ptex`, in the first
    /// free slot, or exactly at `ptex` with H_EXACT. r4 = the index used. Like QEMU, RAM must
    /// be mapped with WIMG = M and anything else with I or I|M; H_ZERO_PAGE zeroes a RAM page
    /// first (PAPR; Linux does not use it).
    pub fn h_enter(
        &self,
        ram: &GuestRam,
        flags: u64,
        ptex: u64,
        pteh: u64,
        ptel: u64,
    ) -> HcallResult {
        let Some(shift) = hpte_page_shift_any(pteh, ptel) else {
            return HcallResult::code(H_PARAMETER);
        };
        let page = 1u64 << shift;
        let raddr = ptel & hpte_r::RPN & !(page - 1);
        let is_ram = raddr < ram.size();
        if is_ram {
            if ptel & hpte_r::WIMG != hpte_r::M {
                return HcallResult::code(H_PARAMETER);
            }
        } else {
            let wim = ptel & (hpte_r::W | hpte_r::I | hpte_r::M);
            if wim != hpte_r::I && wim != hpte_r::I | hpte_r::M {
                return HcallResult::code(H_PARAMETER);
            }
        }
        if !self.valid_ptex(ptex) {
            return HcallResult::code(H_PARAMETER);
        }
        let group = ptex & !(HPTES_PER_GROUP - 1);
        let _g = self.lock(group);
        let free = |i: u64| self.v(i).load(Ordering::Acquire) & hpte_v::VALID == 0;
        let slot = if flags & H_EXACT != 0 {
            Some(ptex).filter(|&i| free(i))
        } else {
            (group..group + HPTES_PER_GROUP).find(|&i| free(i))
        };
        let Some(slot) = slot else {
            return HcallResult::code(H_PTEG_FULL);
        };
        if flags & H_ZERO_PAGE != 0 && is_ram {
            // In RAM by the check above; a page straddling the top is left as it is.
            let _ = ram.fill(raddr, page, 0);
        }
        self.r(slot).store(ptel, Ordering::Release);
        self.v(slot).store(pteh, Ordering::Release);
        HcallResult {
            ret: H_SUCCESS,
            out: [slot, 0, 0, 0, 0, 0, 0, 0],
            n_out: 1,
            flush_tlbs: None,
        }
    }

    /// Removes a valid HPTE that passes the H_AVPN / H_ANDCOND test; the old entry.
    fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> Result<(u64, u64), i64> {
        if !self.valid_ptex(ptex) {
            return Err(H_PARAMETER);
        }
        let _g = self.lock(ptex);
        let v = self.v(ptex).load(Ordering::Acquire);
        if v & hpte_v::VALID == 0
            || (flags & H_AVPN != 0 && v & !0x7f != avpn)
            || (flags & H_ANDCOND != 0 && v & avpn != 0)
        {
            return Err(H_NOT_FOUND);
        }
        self.v(ptex).store(0, Ordering::SeqCst);
        // Swap, so R/C set by a racing reader before the invalidation are returned.
        let r = self.r(ptex).swap(0, Ordering::AcqRel);
        Ok((v, r))
    }

    /// H_REMOVE(flags, ptex, avpn): r4, r5 = the removed HPTE.
    pub fn h_remove(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
        match self.remove(flags, ptex, avpn) {
            Ok((v, r)) => HcallResult {
                ret: H_SUCCESS,
                out: [v, r, 0, 0, 0, 0, 0, 0],
                n_out: 2,
                flush_tlbs: Some(Invalidated::of(v, r)),
            },
            Err(code) => HcallResult::code(code),
        }
    }

    /// H_READ(flags, ptex): r4.. = one HPTE, or with H_READ_4 the four of the aligned group
    /// of four containing `ptex`.
    pub fn h_read(&self, flags: u64, ptex: u64) -> HcallResult {
        if !self.valid_ptex(ptex) {
            return HcallResult::code(H_PARAMETER);
        }
        let (first, n) = if flags & H_READ_4 != 0 {
            (ptex & !3, 4)
        } else {
            (ptex, 1)
        };
        let mut res = HcallResult {
            ret: H_SUCCESS,
            out: [0; 8],
            n_out: 2 * n,
            flush_tlbs: None,
        };
        for k in 0..n {
            let (v, r) = self.load(first + k as u64);
            res.out[2 * k] = v;
            res.out[2 * k + 1] = r;
        }
        res
    }

    /// H_PROTECT(flags, ptex, avpn): replaces PP0, PP, N and the key of a valid HPTE (that
    /// passes H_AVPN) with those in `flags` (PP0 from bit 55, key bits 0:1 from bits 50:51).
    pub fn h_protect(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
        if !self.valid_ptex(ptex) {
            return HcallResult::code(H_PARAMETER);
        }
        let _g = self.lock(ptex);
        let v = self.v(ptex).load(Ordering::Acquire);
        if v & hpte_v::VALID == 0 || (flags & H_AVPN != 0 && v & !0x7f != avpn) {
            return HcallResult::code(H_NOT_FOUND);
        }
        let keep = !(hpte_r::PP0 | hpte_r::PP | hpte_r::N | hpte_r::KEY_HI | hpte_r::KEY_LO);
        let new = ((flags << 55) & hpte_r::PP0)
            | ((flags << 48) & hpte_r::KEY_HI)
            | (flags & (hpte_r::PP | hpte_r::N | hpte_r::KEY_LO));
        // Invalidate while rewriting so no reader pairs the old V with a half-new R; keep
        // R/C bits readers set meanwhile.
        self.v(ptex).store(v & !hpte_v::VALID, Ordering::SeqCst);
        let _ = self
            .r(ptex)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                Some((r & keep) | new)
            });
        self.v(ptex).store(v, Ordering::SeqCst);
        let r = self.r(ptex).load(Ordering::Acquire);
        HcallResult {
            ret: H_SUCCESS,
            out: [0; 8],
            n_out: 0,
            flush_tlbs: Some(Invalidated::of(v, r)),
        }
    }

    /// H_BULK_REMOVE(r4..r11): up to four (request, AVPN) pairs; each request word comes back
    /// as a response word (code, R/C of the removed entry). Stops at an END word; a word of
    /// another type, or both ANDCOND and AVPN, is a parameter error that ends the call.
    pub fn h_bulk_remove(&self, args: [u64; 8]) -> HcallResult {
        let mut res = HcallResult {
            ret: H_SUCCESS,
            out: args,
            n_out: 8,
            flush_tlbs: None,
        };
        for i in 0..bulk::MAX_PAIRS {
            let tsh = args[2 * i];
            let tsl = args[2 * i + 1];
            match tsh & bulk::TYPE {
                bulk::END => break,
                bulk::REQUEST => {}
                _ => {
                    res.ret = H_PARAMETER;
                    break;
                }
            }
            let mut resp = (tsh & (bulk::PTEX | bulk::FLAGS)) | bulk::RESPONSE;
            if tsh & bulk::ANDCOND != 0 && tsh & bulk::AVPN != 0 {
                res.out[2 * i] = resp | (bulk::PARAMETER << bulk::CODE_SHIFT);
                res.ret = H_PARAMETER;
                break;
            }
            let flags = (tsh & bulk::FLAGS) >> bulk::FLAGS_SHIFT;
            match self.remove(flags, tsh & bulk::PTEX, tsl) {
                Ok((v, r)) => {
                    resp |= (r & (hpte_r::R | hpte_r::C)) << bulk::RC_SHIFT;
                    res.flush_tlbs.get_or_insert_default().add(v, r);
                }
                Err(H_NOT_FOUND) => resp |= bulk::NOT_FOUND << bulk::CODE_SHIFT,
                Err(code) => {
                    res.out[2 * i] = resp | (bulk::PARAMETER << bulk::CODE_SHIFT);
                    res.ret = code;
                    break;
                }
            }
            res.out[2 * i] = resp;
        }
        res
    }
}

impl std::fmt::Debug for Hpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hpt")
            .field("shift", &self.shift)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::SlbEntry;
    use crate::mmu::slb::{self, esid, hash_key, segment_page_sizes};

    const RAM: u64 = 16 << 20;

    fn setup() -> (Hpt, GuestRam) {
        (Hpt::new(18).unwrap(), GuestRam::new(RAM).unwrap())
    }

    /// First doubleword of a 4K HPTE for `ea` in a 256M segment with VSID `vsid`.
    fn pteh(vsid: u64, ea: u64) -> u64 {
        let e = SlbEntry {
            esid: (ea & esid::ESID_256M) | esid::VALID,
            vsid: vsid << 12,
        };
        hash_key(&e, 12, ea).ptem
    }

    fn group_of(hpt: &Hpt, vsid: u64, ea: u64) -> u64 {
        let e = SlbEntry {
            esid: (ea & esid::ESID_256M) | esid::VALID,
            vsid: vsid << 12,
        };
        (hash_key(&e, 12, ea).hash & hpt.pteg_mask()) * 8
    }

    const PTEL_RAM: u64 = 0x0000_5000 | hpte_r::M | 0x2; // RPN 5, M, PP=2

    #[test]
    fn size_for_ram() {
        assert_eq!(Hpt::shift_for_ram_size(1 << 30), 23);
        assert_eq!(Hpt::shift_for_ram_size(2 << 30), 24);
        assert_eq!(Hpt::shift_for_ram_size(3 << 30), 25);
        assert_eq!(Hpt::shift_for_ram_size(16 << 20), 18);
        assert!(Hpt::new(17).is_err() && Hpt::new(35).is_err());
        let h = Hpt::new(23).unwrap();
        assert_eq!(h.hpte_count(), (1 << 23) / 16);
        assert_eq!(h.pteg_mask(), (1 << 16) - 1);
    }

    #[test]
    fn enter_fills_slots_in_order_then_reports_full() {
        let (hpt, ram) = setup();
        let g = 8 * 37;
        for k in 0..8 {
            let r = hpt.h_enter(&ram, 0, g + 3, pteh(1, k << 12), PTEL_RAM);
            assert_eq!((r.ret, r.outputs()), (H_SUCCESS, &[g + k][..]), "slot {k}");
            assert!(r.flush_tlbs.is_none());
        }
        assert_eq!(
            hpt.h_enter(&ram, 0, g, pteh(1, 0x9000), PTEL_RAM).ret,
            H_PTEG_FULL
        );
        // Other groups are unaffected.
        assert_eq!(
            hpt.h_enter(&ram, 0, g + 8, pteh(1, 0x9000), PTEL_RAM)
                .outputs(),
            &[g + 8]
        );
    }

    #[test]
    fn enter_exact() {
        let (hpt, ram) = setup();
        let r = hpt.h_enter(&ram, H_EXACT, 8 * 5 + 6, pteh(2, 0), PTEL_RAM);
        assert_eq!((r.ret, r.outputs()), (H_SUCCESS, &[8 * 5 + 6][..]));
        assert_eq!(hpt.read_hpte(8 * 5 + 6), Some((pteh(2, 0), PTEL_RAM)));
        assert_eq!(
            hpt.h_enter(&ram, H_EXACT, 8 * 5 + 6, pteh(2, 0), PTEL_RAM)
                .ret,
            H_PTEG_FULL
        );
        // Without H_EXACT the first free slot of the group is used.
        assert_eq!(
            hpt.h_enter(&ram, 0, 8 * 5 + 6, pteh(2, 0), PTEL_RAM)
                .outputs(),
            &[8 * 5]
        );
    }

    #[test]
    fn enter_rejects_bad_arguments() {
        let (hpt, ram) = setup();
        let v = pteh(3, 0);
        // ptex beyond the table.
        assert_eq!(
            hpt.h_enter(&ram, 0, hpt.hpte_count(), v, PTEL_RAM).ret,
            H_PARAMETER
        );
        assert_eq!(
            hpt.h_enter(&ram, H_EXACT, u64::MAX, v, PTEL_RAM).ret,
            H_PARAMETER
        );
        // RAM must be WIMG = M.
        assert_eq!(hpt.h_enter(&ram, 0, 0, v, 0x5000 | 0x2).ret, H_PARAMETER);
        assert_eq!(
            hpt.h_enter(&ram, 0, 0, v, 0x5000 | hpte_r::M | hpte_r::I)
                .ret,
            H_PARAMETER
        );
        // Beyond RAM: I or I|M only.
        assert_eq!(hpt.h_enter(&ram, 0, 0, v, RAM | hpte_r::M).ret, H_PARAMETER);
        assert_eq!(
            hpt.h_enter(&ram, 0, 0, v, RAM | hpte_r::I | hpte_r::G).ret,
            H_SUCCESS
        );
        // Large page with an encoding that is not 64K (16M is not offered).
        let l = v | hpte_v::LARGE;
        assert_eq!(
            hpt.h_enter(&ram, 0, 8, l, 0x100_0000 | hpte_r::M).ret,
            H_PARAMETER
        );
        assert_eq!(
            hpt.h_enter(&ram, 0, 8, l, 0x1_0000 | 0x1000 | hpte_r::M)
                .ret,
            H_SUCCESS
        );
        // Nothing was written by the failures.
        assert_eq!(hpt.read_hpte(16), Some((0, 0)));
    }

    #[test]
    fn enter_zero_page() {
        let (hpt, ram) = setup();
        ram.fill(0x5000, 0x1000, 0xab).unwrap();
        assert_eq!(hpt.h_enter(&ram, 0, 0, pteh(1, 0), PTEL_RAM).ret, H_SUCCESS);
        assert_eq!(ram.read_u64_be(0x5ff8).unwrap(), 0xabab_abab_abab_abab);
        assert_eq!(
            hpt.h_enter(&ram, H_ZERO_PAGE, 0, pteh(1, 0x1000), PTEL_RAM)
                .ret,
            H_SUCCESS
        );
        assert_eq!(ram.read_u64_be(0x5000).unwrap(), 0);
        assert_eq!(ram.read_u64_be(0x5ff8).unwrap(), 0);
        assert_eq!(ram.read_u64_be(0x6000).unwrap(), 0);
        assert_eq!(ram.read_u64_be(0x4ff8).unwrap(), 0);
    }

    #[test]
    fn remove_with_and_without_conditions() {
        let (hpt, ram) = setup();
        let v = pteh(4, 0x7000) | hpte_v::BOLTED;
        assert_eq!(
            hpt.h_enter(&ram, 0, 16, v, PTEL_RAM | hpte_r::R).ret,
            H_SUCCESS
        );
        // Wrong AVPN.
        assert_eq!(
            hpt.h_remove(H_AVPN, 16, (v & !0x7f) ^ 0x80).ret,
            H_NOT_FOUND
        );
        // ANDCOND: fails when any of the given bits is set.
        assert_eq!(hpt.h_remove(H_ANDCOND, 16, hpte_v::BOLTED).ret, H_NOT_FOUND);
        assert!(hpt.read_hpte(16).unwrap().0 & hpte_v::VALID != 0);
        // Bad index; empty slot.
        assert_eq!(hpt.h_remove(0, hpt.hpte_count() + 8, 0).ret, H_PARAMETER);
        assert_eq!(hpt.h_remove(0, 17, 0).ret, H_NOT_FOUND);
        let r = hpt.h_remove(H_AVPN, 16, v & !0x7f);
        assert_eq!(
            (r.ret, r.outputs(), r.flush_tlbs.is_some()),
            (H_SUCCESS, &[v, PTEL_RAM | hpte_r::R][..], true)
        );
        assert_eq!(hpt.read_hpte(16), Some((0, 0)));
        assert_eq!(hpt.h_remove(0, 16, 0).ret, H_NOT_FOUND);
        // ANDCOND with bits that are clear succeeds.
        hpt.h_enter(&ram, 0, 16, v, PTEL_RAM);
        assert_eq!(hpt.h_remove(H_ANDCOND, 16, hpte_v::LARGE).ret, H_SUCCESS);
    }

    #[test]
    fn read_one_and_four() {
        let (hpt, ram) = setup();
        for k in 0..8 {
            hpt.h_enter(&ram, 0, 24, pteh(5, k << 12), PTEL_RAM + (k << 12));
        }
        let r = hpt.h_read(0, 26);
        assert_eq!(
            (r.ret, r.outputs()),
            (H_SUCCESS, &[pteh(5, 0x2000), PTEL_RAM + 0x2000][..])
        );
        let r = hpt.h_read(H_READ_4, 30);
        assert_eq!(r.n_out, 8);
        for k in 0..4u64 {
            assert_eq!(r.out[2 * k as usize], pteh(5, (4 + k) << 12));
            assert_eq!(r.out[2 * k as usize + 1], PTEL_RAM + ((4 + k) << 12));
        }
        assert_eq!(hpt.h_read(0, hpt.hpte_count()).ret, H_PARAMETER);
        assert_eq!(hpt.h_read(H_READ_4, u64::MAX).ret, H_PARAMETER);
        // Reading the last entries of the table is fine.
        assert_eq!(
            hpt.h_read(H_READ_4, hpt.hpte_count() - 1).outputs(),
            &[0; 8]
        );
    }

    #[test]
    fn protect_changes_only_protection_bits() {
        let (hpt, ram) = setup();
        let v = pteh(6, 0);
        let r0 = PTEL_RAM | hpte_r::R | hpte_r::C | hpte_r::N | (3 << 9);
        hpt.h_enter(&ram, 0, 40, v, r0);
        // New: PP0=1 (flag bit 8), PP=1, no N, key 0b10_001 (hi from flag bits 12:13, lo 9:11).
        let flags = (1 << 8) | 0x1 | (0x2 << 12) | (0x1 << 9);
        let r = hpt.h_protect(flags, 40, 0);
        assert_eq!((r.ret, r.flush_tlbs.is_some()), (H_SUCCESS, true));
        let (v2, r2) = hpt.read_hpte(40).unwrap();
        assert_eq!(v2, v);
        assert_eq!(
            r2,
            (PTEL_RAM & !0x3)
                | hpte_r::R
                | hpte_r::C
                | hpte_r::PP0
                | 0x1
                | (0x2 << 60)
                | (0x1 << 9)
        );
        // AVPN mismatch / empty / bad index.
        assert_eq!(
            hpt.h_protect(H_AVPN, 40, (v & !0x7f) + 0x80).ret,
            H_NOT_FOUND
        );
        assert_eq!(hpt.h_protect(0, 41, 0).ret, H_NOT_FOUND);
        assert_eq!(hpt.h_protect(0, 1 << 40, 0).ret, H_PARAMETER);
        assert!(hpt.h_protect(0, 41, 0).flush_tlbs.is_none());
        assert_eq!(hpt.h_protect(H_AVPN | 2, 40, v & !0x7f).ret, H_SUCCESS);
        assert_eq!(hpt.read_hpte(40).unwrap().1 & (hpte_r::PP | hpte_r::PP0), 2);
    }

    #[test]
    fn bulk_remove() {
        let (hpt, ram) = setup();
        let v0 = pteh(7, 0);
        let v1 = pteh(7, 0x1000);
        hpt.h_enter(&ram, H_EXACT, 48, v0, PTEL_RAM | hpte_r::R);
        hpt.h_enter(&ram, H_EXACT, 49, v1, PTEL_RAM | hpte_r::R | hpte_r::C);
        let req = |ptex: u64, flags: u64| bulk::REQUEST | flags | ptex;
        let args = [
            req(48, bulk::AVPN),
            v0 & !0x7f,
            req(50, 0), // empty: not found
            0,
            req(49, 0),
            0,
            bulk::END,
            0,
        ];
        let r = hpt.h_bulk_remove(args);
        assert_eq!(r.ret, H_SUCCESS);
        assert!(r.flush_tlbs.is_some());
        assert_eq!(
            r.out[0],
            bulk::RESPONSE | bulk::AVPN | 48 | (hpte_r::R << 43)
        );
        assert_eq!(r.out[1], v0 & !0x7f);
        assert_eq!(r.out[2], bulk::RESPONSE | 50 | (1 << 60));
        assert_eq!(
            r.out[4],
            bulk::RESPONSE | 49 | ((hpte_r::R | hpte_r::C) << 43)
        );
        assert_eq!(r.out[6], bulk::END);
        assert_eq!(hpt.read_hpte(48), Some((0, 0)));
        assert_eq!(hpt.read_hpte(49), Some((0, 0)));

        // Nothing removed: no flush.
        let r = hpt.h_bulk_remove([req(48, 0), 0, bulk::END, 0, 0, 0, 0, 0]);
        assert_eq!((r.ret, r.flush_tlbs.is_some()), (H_SUCCESS, false));
        // A word that is neither a request nor END.
        let r = hpt.h_bulk_remove([bulk::RESPONSE | 48, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.ret, H_PARAMETER);
        // ANDCOND together with AVPN.
        hpt.h_enter(&ram, H_EXACT, 48, v0, PTEL_RAM);
        let r = hpt.h_bulk_remove([
            req(48, bulk::AVPN | bulk::ANDCOND),
            0,
            bulk::END,
            0,
            0,
            0,
            0,
            0,
        ]);
        assert_eq!(r.ret, H_PARAMETER);
        assert_eq!(r.out[0] & bulk::CODE, bulk::PARAMETER << 60);
        assert!(hpt.read_hpte(48).unwrap().0 & hpte_v::VALID != 0);
        // Bad index: parameter error, earlier removals still flush.
        let r = hpt.h_bulk_remove([req(48, 0), 0, req(bulk::PTEX, 0), 0, bulk::END, 0, 0, 0]);
        assert_eq!((r.ret, r.flush_tlbs.is_some()), (H_PARAMETER, true));
        assert_eq!(r.out[2] & bulk::CODE, bulk::PARAMETER << 60);
        // Four requests with no END word.
        for k in 0..4 {
            hpt.h_enter(&ram, H_EXACT, 56 + k, pteh(8, k << 12), PTEL_RAM);
        }
        let r = hpt.h_bulk_remove([req(56, 0), 0, req(57, 0), 0, req(58, 0), 0, req(59, 0), 0]);
        assert_eq!(r.ret, H_SUCCESS);
        assert!((0..4).all(|k| r.out[2 * k] & (bulk::TYPE | bulk::CODE) == bulk::RESPONSE));
        assert!((56..60).all(|p| hpt.read_hpte(p) == Some((0, 0))));
    }

    #[test]
    fn search_primary_and_secondary() {
        let (hpt, ram) = setup();
        let seg = segment_page_sizes(0).unwrap();
        let ea = 0x0123_4000;
        let e = SlbEntry {
            esid: esid::VALID,
            vsid: 9 << 12,
        };
        let key = hash_key(&e, 12, ea);
        assert_eq!(hpt.search(key, seg), None);
        // Secondary group entry (H bit set).
        let sec = ((!key.hash) & hpt.pteg_mask()) * 8;
        hpt.h_enter(
            &ram,
            H_EXACT,
            sec + 2,
            key.ptem | hpte_v::SECONDARY,
            PTEL_RAM,
        );
        let f = hpt.search(key, seg).unwrap();
        assert_eq!((f.ptex, f.shift), (sec + 2, 12));
        // An entry in the secondary group without H is not a match.
        hpt.h_remove(0, sec + 2, 0);
        hpt.h_enter(&ram, H_EXACT, sec + 2, key.ptem, PTEL_RAM);
        assert_eq!(hpt.search(key, seg), None);
        // Primary group entry wins.
        let pri = group_of(&hpt, 9, ea);
        hpt.h_enter(&ram, H_EXACT, pri + 7, key.ptem, PTEL_RAM + 0x1000);
        let f = hpt.search(key, seg).unwrap();
        assert_eq!((f.ptex, f.pte1), (pri + 7, PTEL_RAM + 0x1000));
        // A 64K entry with the same AVPN does not match in a 4K segment.
        hpt.h_remove(0, pri + 7, 0);
        hpt.h_enter(
            &ram,
            H_EXACT,
            pri + 7,
            key.ptem | hpte_v::LARGE,
            0x1_1000 | hpte_r::M,
        );
        assert_eq!(hpt.search(key, seg), None);
        let _ = slb::lookup(&[e], ea);
    }

    #[test]
    fn rc_update_fails_after_a_change() {
        let (hpt, ram) = setup();
        let seg = segment_page_sizes(0).unwrap();
        let e = SlbEntry {
            esid: esid::VALID,
            vsid: 10 << 12,
        };
        let key = hash_key(&e, 12, 0);
        let pri = (key.hash & hpt.pteg_mask()) * 8;
        hpt.h_enter(&ram, 0, pri, key.ptem, PTEL_RAM);
        let f = hpt.search(key, seg).unwrap();
        assert!(hpt.set_rc(&f, hpte_r::R));
        assert_eq!(hpt.read_hpte(f.ptex).unwrap().1, PTEL_RAM | hpte_r::R);
        // The snapshot is stale now: a second update must re-read.
        assert!(!hpt.set_rc(&f, hpte_r::R | hpte_r::C));
        let f = hpt.search(key, seg).unwrap();
        assert!(hpt.set_rc(&f, hpte_r::R | hpte_r::C));
        // H_PROTECT keeps R/C.
        hpt.h_protect(3, f.ptex, 0);
        assert_eq!(
            hpt.read_hpte(f.ptex).unwrap().1,
            (PTEL_RAM & !3) | 3 | hpte_r::R | hpte_r::C
        );
    }

    #[test]
    fn concurrent_readers_see_consistent_entries() {
        use std::sync::Arc;
        let hpt = Arc::new(Hpt::new(18).unwrap());
        let ram = GuestRam::new(RAM).unwrap();
        let seg = segment_page_sizes(0).unwrap();
        let e = SlbEntry {
            esid: esid::VALID,
            vsid: 11 << 12,
        };
        let key = hash_key(&e, 12, 0x3000);
        let pri = (key.hash & hpt.pteg_mask()) * 8;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (hpt, stop) = (hpt.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(f) = hpt.search(key, seg) {
                        // Each writer version pairs RPN n with PP = n % 3.
                        let n = (f.pte1 & hpte_r::RPN) >> 12;
                        assert_eq!(f.pte1 & 3, n % 3, "torn HPTE {:#x}", f.pte1);
                        seen += 1;
                    }
                }
                seen
            })
        };
        for k in 1..20_000u64 {
            let n = k % 4096;
            let r = hpt.h_enter(
                &ram,
                H_EXACT,
                pri,
                key.ptem,
                (n << 12) | hpte_r::M | (n % 3),
            );
            assert_eq!(r.ret, H_SUCCESS);
            assert_eq!(hpt.h_remove(0, pri, 0).ret, H_SUCCESS);
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    }
}
