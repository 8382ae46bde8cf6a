//! The reserved host range behind the guest's pages: `USER_SPAN` bytes of host address space
//! where guest address `a` lives at `base + a`. Its host calls sit behind safe methods that
//! take guest addresses and check them against the range, so the rest of `mem` names no
//! host pointer arithmetic.

use super::{PROT_EXEC, PROT_READ, PROT_WRITE, USER_SPAN, page_up};
use crate::softmmu::PAGE_MASK;

/// Where the reserved range goes when the host has it free: above the first GiB (a host
/// binary loaded low and its heap stay below) and below 2 GiB, so that the base is a
/// positive 32-bit displacement (`jit::baseline`'s guarded accesses).
pub const LOW_BASE: usize = 1 << 30;

/// Inaccessible host pages on each side of the range: translated code tests a base
/// register against the range and adds a 16-bit displacement in the access itself, so an
/// address up to 32 KiB outside the range must fault on the host too (and take the
/// access's miss path), never reach another mapping.
const GUARD: usize = 64 << 10;

/// Bytes reserved: the range and its guards.
const RESERVED: usize = USER_SPAN as usize + 2 * GUARD;

/// The reserved range. A copyable handle: its owner, `ProcessMemory`, releases it once.
#[derive(Clone, Copy, Debug)]
pub struct Span(*mut u8);

impl Span {
    /// Reserves `USER_SPAN` bytes of host address space for the guest's pages, between two
    /// [`GUARD`]s; `None` when the host refuses (an address-space limit, or strict
    /// overcommit accounting). Mapped writable first, so that the host must accept writable
    /// pages there without accounting for them (`MAP_NORESERVE` is ignored under strict
    /// accounting, and this mapping then fails), then made inaccessible until the guest maps
    /// pages.
    ///
    /// The range goes at [`LOW_BASE`] when that is free, so that translated code reaches a
    /// guest byte as `[address + base]` with the base as a displacement (no register, no
    /// 64-bit constant per access); elsewhere when it is not (a second process's range).
    pub fn reserve() -> Option<Span> {
        Self::reserve_at(true)
    }

    /// As [`Span::reserve`], `low` false: wherever the host puts it.
    pub fn reserve_at(low: bool) -> Option<Span> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let map = |at: usize, extra: libc::c_int| {
            // SAFETY: a fresh anonymous mapping; with MAP_FIXED_NOREPLACE the host refuses
            // rather than replace anything already at `at`, and without it the host picks
            // a free place.
            unsafe { libc::mmap(at as *mut _, RESERVED, prot, flags | extra, -1, 0) }
        };
        let low_start = LOW_BASE - GUARD;
        let mut p = if low {
            map(low_start, libc::MAP_FIXED_NOREPLACE)
        } else {
            libc::MAP_FAILED
        };
        if p != libc::MAP_FAILED && p as usize != low_start {
            // A kernel older than MAP_FIXED_NOREPLACE takes the address as a hint only.
            // SAFETY: the mapping just made, which nothing uses.
            unsafe { libc::munmap(p, RESERVED) };
            p = libc::MAP_FAILED;
        }
        if p == libc::MAP_FAILED {
            p = map(0, 0);
        }
        if p == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the mapping just made, which nothing uses yet.
        if unsafe { libc::mprotect(p, RESERVED, libc::PROT_NONE) } != 0 {
            // SAFETY: as above.
            unsafe { libc::munmap(p, RESERVED) };
            return None;
        }
        // SAFETY: `GUARD` bytes into the mapping of `RESERVED` bytes.
        Some(Span(unsafe { p.cast::<u8>().add(GUARD) }))
    }

    /// Gives the range back to the host.
    ///
    /// # Safety
    /// Called once, by the owner, when no host pointer into the range is used any more.
    pub unsafe fn release(self) {
        // SAFETY: the range `reserve` mapped with its guards, not released before (the
        // caller's promise).
        unsafe { libc::munmap(self.0.sub(GUARD).cast(), RESERVED) };
    }

    /// Host address of guest address 0.
    pub fn base(self) -> u64 {
        self.0 as u64
    }

    /// Host address of guest address `a`, which lies in the range.
    pub fn at(self, a: u64) -> *mut u8 {
        assert!(a < USER_SPAN, "guest address {a:#x} beyond the user span");
        // SAFETY: `a` is below `USER_SPAN`, the length of the range `self.0` starts.
        unsafe { self.0.add(a as usize) }
    }

    /// `[a, a + len)` as host start and length, checked to lie in the range.
    fn range(self, a: u64, len: u64) -> (*mut libc::c_void, usize) {
        assert!(
            a.checked_add(len).is_some_and(|e| e <= USER_SPAN),
            "guest range {a:#x}+{len:#x} beyond the user span"
        );
        (self.at(a).cast(), len as usize)
    }

    /// Sets the host protection of the whole pages holding guest `[a, a + len)`.
    pub fn protect(self, a: u64, len: u64, prot: libc::c_int) {
        let start = a & PAGE_MASK;
        let (p, n) = self.range(start, page_up(a + len) - start);
        // SAFETY: whole pages of the reserved range, which only guest memory uses; changing
        // their protection invalidates no Rust reference (none is held into the range).
        let r = unsafe { libc::mprotect(p, n, prot) };
        assert_eq!(
            r,
            0,
            "mprotect of the guest's reserved range failed ({}): the host's map count limit \
             (vm.max_map_count)?",
            std::io::Error::last_os_error()
        );
    }

    /// Drops the contents of guest `[a, a + len)` (page aligned): a fresh zero mapping takes
    /// their place, inaccessible until the caller protects it again. (`MADV_DONTNEED` would
    /// not do for pages mapped from a file, [`Span::map_file`]: they would read the file's
    /// bytes again.)
    pub fn discard(self, a: u64, len: u64) {
        let (p, n) = self.range(a, len);
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
        // SAFETY: whole pages of the reserved range, which only guest memory uses, replaced
        // by a mapping of the same kind the reservation made; no Rust reference points there.
        let back = unsafe { libc::mmap(p, n, libc::PROT_NONE, flags, -1, 0) };
        assert_eq!(back, p, "could not reserve a discarded guest range again");
    }

    /// Maps `len` bytes of `file` from `offset` (both page aligned) privately at guest `a`
    /// (page aligned), readable and writable: the host reads the pages from its page cache
    /// when first touched, and a write copies the page. False when the host refuses; the
    /// range is then a fresh zero mapping (as after [`Span::discard`]).
    pub fn map_file(self, a: u64, len: u64, file: &std::fs::File, offset: u64) -> bool {
        use std::os::fd::AsRawFd;
        let (p, n) = self.range(a, len);
        let Ok(off) = libc::off_t::try_from(offset) else {
            return false;
        };
        let flags = libc::MAP_PRIVATE | libc::MAP_FIXED;
        // SAFETY: whole pages of the reserved range, which only guest memory uses; the file
        // mapping replaces them and is private (the file is never written through it).
        let r = unsafe {
            libc::mmap(
                p,
                n,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                off,
            )
        };
        if r == p {
            return true;
        }
        // A failed fixed mapping may have removed the range's pages: reserve them again.
        self.discard(a, len);
        false
    }

    /// How many pages of guest `[a, a + len)` (page aligned) have host memory behind them.
    pub fn resident(self, a: u64, len: u64) -> usize {
        let (p, n) = self.range(a, len);
        let mut vec = vec![0u8; n >> 12];
        // SAFETY: pages of the reserved range; `vec` has the byte per page the call writes.
        let r = unsafe { libc::mincore(p, n, vec.as_mut_ptr()) };
        if r == 0 {
            vec.iter().filter(|&&b| b & 1 != 0).count()
        } else {
            0
        }
    }

    /// Moves the contents of guest `[old, old + len)` to `[new, new + len)` (`mremap`, which
    /// moves the host's page tables rather than the bytes), leaving the source reserved,
    /// inaccessible and zero. Copies where `mremap` refuses (a source split into several
    /// host mappings by protections). Both ranges are page aligned and must not overlap.
    pub fn relocate(self, old: u64, len: u64, new: u64) {
        assert!(
            old.max(new) - old.min(new) >= len,
            "overlapping ranges to relocate"
        );
        let ((from, n), (to, _)) = (self.range(old, len), self.range(new, len));
        // SAFETY: two disjoint ranges of the reserved range, which only guest memory uses;
        // the destination replaces pages of the same reservation.
        let moved =
            unsafe { libc::mremap(from, n, n, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, to) };
        if moved == libc::MAP_FAILED {
            self.protect(old, len, libc::PROT_READ);
            self.protect(new, len, libc::PROT_READ | libc::PROT_WRITE);
            // SAFETY: `n` bytes each, readable and writable as just set, and disjoint.
            unsafe { std::ptr::copy_nonoverlapping(from.cast::<u8>(), to.cast::<u8>(), n) };
            self.discard(old, len);
            return;
        }
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
        // SAFETY: `from` is the old range, now unmapped by `mremap`, inside the reservation:
        // the fixed mapping takes back only what the range owned.
        let back = unsafe { libc::mmap(from, n, libc::PROT_NONE, flags, -1, 0) };
        assert_eq!(
            back, from,
            "could not reserve the guest range again after mremap"
        );
    }
}

/// The host protection of a guest page with protection `prot` (x86 cannot withhold
/// reading from a writable page, nor the guest from an executable one: the slow path and
/// the interpreter read code through the host page).
pub fn host_prot(prot: u32) -> libc::c_int {
    if prot & PROT_WRITE != 0 {
        libc::PROT_READ | libc::PROT_WRITE
    } else if prot & (PROT_READ | PROT_EXEC) != 0 {
        libc::PROT_READ
    } else {
        libc::PROT_NONE
    }
}
