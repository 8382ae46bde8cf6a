//! Memory of the baseline tier: one executable code region and one counter region per
//! machine, each a fixed virtual reservation filled by an atomic bump pointer, so that
//! vCPUs place translations without a lock. Both are emptied only by a code cache flush,
//! when no vCPU runs translated code.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A reserved, lazily committed mapping with a bump allocator.
pub struct Region {
    base: *mut u8,
    size: usize,
    next: AtomicUsize,
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
        if exec {
            // Translations of a real guest spread over hundreds of MiB: huge pages keep the
            // instruction TLB from missing on every block. Advice only; failure is fine.
            // SAFETY: advice on the mapping just made.
            unsafe { libc::madvise(p, size, libc::MADV_HUGEPAGE) };
        }
        Ok(Self {
            base: p as *mut u8,
            size,
            next: AtomicUsize::new(0),
        })
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
        let part = |base: *mut u8, size| Self {
            base,
            size,
            next: AtomicUsize::new(0),
        };
        // SAFETY: `data` is inside the mapping.
        Ok((part(base, data), part(unsafe { base.add(data) }, code)))
    }

    /// The address of the region's first byte.
    pub fn base(&self) -> usize {
        self.base as usize
    }

    /// `len` bytes aligned to `align` (a power of two), or `None` when the region is full.
    pub fn alloc(&self, len: usize, align: usize) -> Option<*mut u8> {
        let mut cur = self.next.load(Ordering::Relaxed);
        loop {
            let start = (cur + align - 1) & !(align - 1);
            let end = start.checked_add(len)?;
            if end > self.size {
                return None;
            }
            match self
                .next
                .compare_exchange_weak(cur, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                // SAFETY: `start + len <= size`, inside the mapping.
                Ok(_) => return Some(unsafe { self.base.add(start) }),
                Err(now) => cur = now,
            }
        }
    }

    /// Bytes handed out since the last reset.
    pub fn used(&self) -> usize {
        self.next.load(Ordering::Relaxed)
    }

    /// Forgets every allocation after the first `keep` bytes; the pages after them are given
    /// back to the host. The caller guarantees that nothing uses them any more.
    pub fn reset(&self, keep: usize) {
        let used = self.next.swap(keep, Ordering::AcqRel);
        let page = 4096;
        let from = (keep + page - 1) & !(page - 1);
        if used > from {
            // SAFETY: page-aligned range inside the mapping; its contents are dead.
            unsafe {
                libc::madvise(
                    self.base.add(from) as *mut libc::c_void,
                    used - from,
                    libc::MADV_DONTNEED,
                )
            };
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
    use super::Region;

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
}
