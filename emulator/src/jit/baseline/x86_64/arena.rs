//! Memory of the baseline tier: one executable code region and one counter region per
//! machine, each a fixed virtual reservation filled by atomic bump pointers, so that vCPUs
//! place translations without a lock. Both are emptied only by a code cache flush, when no
//! vCPU runs translated code.
//!
//! The code region is filled from both ends: blocks' hot code from the bottom, their
//! out-of-line code from the top, so that the code a guest runs lies close together.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Code bytes in use after which a code region asks for transparent huge pages. Translations
/// of a real guest spread over hundreds of MiB, and huge pages keep the instruction TLB from
/// missing on every block; but the first touch of each end of the region then zeroes 2 MiB,
/// which cost a short user-mode process (busybox md5sum, 20 ms) 2.6 % of its time and bzip2
/// 0.7 % (alternating, k = 21). Pages touched before the advice stay small.
const HUGE_AFTER: usize = 4 << 20;

/// A reserved, lazily committed mapping with a bump allocator at each end.
pub struct Region {
    base: *mut u8,
    size: usize,
    /// The two ends in one word, so that neither can pass the other: the offset of the
    /// bottom's next free byte (low half) and of the top's last allocation (high half).
    ends: AtomicU64,
    /// Bytes in use at which the region is advised to use huge pages (`usize::MAX`: never),
    /// and whether it has been.
    huge_after: usize,
    advised: AtomicBool,
}

/// `Region::ends` of a region whose bottom is handed out up to `bottom` and whose top from
/// `top` (offsets; `bottom <= top <= size`, which fits 32 bits).
fn ends(bottom: usize, top: usize) -> u64 {
    bottom as u64 | (top as u64) << 32
}

/// The bottom and top offsets packed by [`ends`].
fn unpack(v: u64) -> (usize, usize) {
    ((v & 0xffff_ffff) as usize, (v >> 32) as usize)
}

// SAFETY: the mapping lives as long as the region; allocation is atomic, and callers write
// only the bytes they were given (or, for patching, aligned words of their own jumps).
unsafe impl Send for Region {}
// SAFETY: as for `Send`: shared use only allocates (atomically) and writes disjoint bytes.
unsafe impl Sync for Region {}

impl Region {
    /// Reserves `size` bytes, readable, writable and (when `exec`) executable. Code regions
    /// stay writable so that direct jumps between blocks can be patched in place.
    pub fn new(size: usize, exec: bool) -> std::io::Result<Self> {
        let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        assert!(size <= u32::MAX as usize, "a region's offsets are 32-bit");
        Ok(Self::part(p as *mut u8, size, exec))
    }

    /// The region of `size` bytes at `base` (code when `exec`), nothing handed out.
    fn part(base: *mut u8, size: usize, exec: bool) -> Self {
        Self {
            base,
            size,
            ends: AtomicU64::new(ends(0, size)),
            huge_after: if exec { HUGE_AFTER } else { usize::MAX },
            advised: AtomicBool::new(false),
        }
    }

    /// A data region of `data` bytes followed by an executable one of `code` bytes, in one
    /// reservation, so that code reaches the data with 32-bit displacements (both below
    /// 2 GiB together). Each region unmaps its own part.
    pub fn pair(data: usize, code: usize) -> std::io::Result<(Self, Self)> {
        assert!(data.is_multiple_of(4096) && data + code <= i32::MAX as usize);
        let whole = Self::new(data + code, true)?;
        let base = whole.base;
        std::mem::forget(whole);
        // SAFETY: the first `data` bytes of the mapping just made: no longer executable.
        unsafe {
            libc::mprotect(
                base as *mut libc::c_void,
                data,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        // SAFETY: `data` is inside the mapping.
        let code_base = unsafe { base.add(data) };
        Ok((
            Self::part(base, data, false),
            Self::part(code_base, code, true),
        ))
    }

    /// The address of the region's first byte.
    pub fn base(&self) -> usize {
        self.base as usize
    }

    /// `len` bytes aligned to `align` (a power of two) from the bottom, or `None` when the
    /// region is full.
    pub fn alloc(&self, len: usize, align: usize) -> Option<*mut u8> {
        self.alloc_at(len, align, false)
    }

    /// `len` bytes aligned to `align` (a power of two) from the top, below the last ones
    /// handed out there, or `None` when the region is full.
    pub fn alloc_top(&self, len: usize, align: usize) -> Option<*mut u8> {
        self.alloc_at(len, align, true)
    }

    fn alloc_at(&self, len: usize, align: usize, top: bool) -> Option<*mut u8> {
        let mut cur = self.ends.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = unpack(cur);
            let (start, lo, hi) = if top {
                let start = hi.checked_sub(len)? & !(align - 1);
                (start, lo, start)
            } else {
                let start = lo.next_multiple_of(align);
                (start, start.checked_add(len)?, hi)
            };
            if lo > hi {
                return None;
            }
            let next = ends(lo, hi);
            match self
                .ends
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    if lo + (self.size - hi) >= self.huge_after {
                        self.advise_huge();
                    }
                    // SAFETY: `start + len <= size`, inside the mapping.
                    return Some(unsafe { self.base.add(start) });
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Asks the host for huge pages for the whole region, once. Advice only; failure is fine.
    fn advise_huge(&self) {
        if !self.advised.swap(true, Ordering::Relaxed) {
            // SAFETY: advice on the region's own mapping.
            unsafe {
                libc::madvise(
                    self.base as *mut libc::c_void,
                    self.size,
                    libc::MADV_HUGEPAGE,
                )
            };
        }
    }

    /// Bytes handed out since the last reset, at both ends.
    pub fn used(&self) -> usize {
        let (lo, hi) = unpack(self.ends.load(Ordering::Relaxed));
        lo + (self.size - hi)
    }

    /// Forgets every allocation after the first `keep` bytes of the bottom, and every one of
    /// the top; their pages are given back to the host. The caller guarantees that nothing
    /// uses them any more.
    pub fn reset(&self, keep: usize) {
        let (lo, hi) = unpack(self.ends.swap(ends(keep, self.size), Ordering::AcqRel));
        let page = 4096;
        let from = keep.next_multiple_of(page);
        let top = hi & !(page - 1);
        for (start, end) in [(from, lo), (top, self.size)] {
            if end > start {
                // SAFETY: page-aligned range inside the mapping; its contents are dead.
                unsafe {
                    libc::madvise(
                        self.base.add(start) as *mut libc::c_void,
                        end - start,
                        libc::MADV_DONTNEED,
                    )
                };
            }
        }
    }

    pub fn contains(&self, p: usize) -> bool {
        p >= self.base as usize && p < self.base as usize + self.size
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; no code of it runs once its owner is dropped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.size) };
    }
}

#[cfg(test)]
mod tests {
    use super::{HUGE_AFTER, Region};

    #[test]
    fn bump_allocation_aligns_bounds_and_resets() {
        let r = Region::new(1 << 16, false).unwrap();
        let a = r.alloc(10, 16).unwrap() as usize;
        let b = r.alloc(10, 16).unwrap() as usize;
        assert_eq!(a % 16, 0);
        assert_eq!(b - a, 16);
        assert!(r.alloc(1 << 16, 16).is_none());
        r.reset(0);
        assert_eq!(r.alloc(4, 4).unwrap() as usize, a);
    }

    #[test]
    fn the_two_ends_fill_towards_each_other_and_never_overlap() {
        let r = Region::new(1 << 16, false).unwrap();
        let base = r.base();
        let low = r.alloc(100, 16).unwrap() as usize;
        let top = r.alloc_top(100, 16).unwrap() as usize;
        assert_eq!(low, base);
        assert_eq!(top, (base + (1 << 16) - 100) & !15);
        let below = r.alloc_top(10, 16).unwrap() as usize;
        assert!(below + 10 <= top && below.is_multiple_of(16));
        assert_eq!(r.used(), 100 + (base + (1 << 16) - below));
        // What is left between the ends, and not a byte more.
        let left = below - (low + 100);
        assert!(r.alloc(left + 1, 1).is_none() && r.alloc_top(left + 1, 1).is_none());
        assert!(r.alloc(left, 1).is_some());
        assert!(r.alloc(1, 1).is_none() && r.alloc_top(1, 1).is_none());
        r.reset(16);
        assert_eq!(r.used(), 16);
        assert_eq!(r.alloc_top(100, 16).unwrap() as usize, top);
    }

    /// Whether the host's mapping at `base` carries the huge-page advice (`hg` in smaps).
    fn advised_huge(base: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((start, _)) = range.split_once('-')
                && let Ok(start) = usize::from_str_radix(start, 16)
            {
                ours = start == base;
            } else if ours && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().any(|f| f == "hg");
            }
        }
        panic!("no mapping at {base:#x}");
    }

    #[test]
    fn a_code_region_asks_for_huge_pages_once_it_holds_enough_code() {
        let r = Region::new(4 * HUGE_AFTER, true).unwrap();
        r.alloc(HUGE_AFTER / 2, 16).unwrap();
        r.alloc_top(HUGE_AFTER / 4, 16).unwrap();
        assert!(
            !advised_huge(r.base()),
            "a small translation cache stays on small pages"
        );
        r.alloc_top(HUGE_AFTER / 4, 16).unwrap();
        assert!(advised_huge(r.base()));
        let data = Region::new(4 * HUGE_AFTER, false).unwrap();
        data.alloc(2 * HUGE_AFTER, 16).unwrap();
        assert!(!advised_huge(data.base()), "data regions never");
    }
}
