//! The guest process's address space: mappings (VMAs) with per-page protections, backed by
//! host pages allocated on first touch (so large reservations cost nothing until used).
//!
//! Where the host allows it, guest page `n` lives at `base + n × 4096` of one reserved host
//! range covering every user address ([`USER_SPAN`]): then every TLB entry has the same
//! addend, and translated code adds the constant instead of loading the entry's addend
//! (which put a TLB load on the path of every guest load; see [`ProcessMemory::flat_base`]).
//! Otherwise each page is a separate host allocation.
//!
//! The vCPU reaches guest pages through its TLB (raw host pointers); the syscall layer copies
//! through [`ProcessMemory::read`] / [`ProcessMemory::write`] with the same protection checks the
//! kernel's user-copy would make. Any change that removes or downgrades a mapping must be
//! followed by a TLB flush before the guest runs again.

use crate::cpu::{CpuState, Exception};
use crate::softmmu::{Access, AddressSpace, PAGE_MASK, PAGE_SIZE, PageMapping};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub const PROT_READ: u32 = 1;
pub const PROT_WRITE: u32 = 2;
pub const PROT_EXEC: u32 = 4;

/// Lowest address `mmap` hands out without `MAP_FIXED` (as Linux's `mmap_min_addr`).
pub const MMAP_MIN: u64 = 0x1_0000;

/// The user address space: every mapping lies below (the loader's stack top and `mmap`'s
/// limits are under it). 40 bits, where Linux gives 47, so that the host can reserve the
/// whole range as one mapping.
pub const USER_SPAN: u64 = 1 << 40;

/// One host page of guest memory, aligned so that any naturally aligned guest access
/// (up to a 128-byte `dcbz` block) is aligned on the host too.
#[repr(C, align(4096))]
struct Page([u8; PAGE_SIZE as usize]);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Vma {
    end: u64,
    prot: u32,
}

/// Why a guest range could not be copied: the syscall answers `EFAULT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault;

/// Told `(address, length)` (within one page) of guest bytes that changed without a guest
/// store: written by a system call into an executable page, or unmapped/discarded.
pub type CodeHook = Box<dyn Fn(u64, usize) + Send>;

/// The guest process's memory: its mappings and the host pages behind them.
pub struct ProcessMemory {
    /// Mappings keyed by start address; page aligned, non-overlapping.
    vmas: BTreeMap<u64, Vma>,
    /// Host pages of touched guest pages, keyed by guest page number. Owned (from
    /// `Box::into_raw`), freed on unmap; never reached through Rust references.
    pages: HashMap<u64, *mut Page>,
    /// Lets a JIT drop translations of code that changed (guest stores it sees itself).
    pub code_hook: Option<CodeHook>,
    /// The reserved host range behind every page, if the host gave one (`USER_SPAN` bytes,
    /// read-write, `MAP_NORESERVE`: host pages are taken on first touch).
    span: Option<*mut u8>,
}

// Pages are only touched by the one vCPU thread that owns the process and its syscalls.
unsafe impl Send for ProcessMemory {}

#[inline]
pub fn page_up(x: u64) -> u64 {
    x.wrapping_add(PAGE_SIZE - 1) & PAGE_MASK
}

impl Default for ProcessMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessMemory {
    pub fn new() -> Self {
        Self::with_span(reserve_span())
    }

    /// Pages in the reserved range `span` when there is one, else separate allocations.
    fn with_span(span: Option<*mut u8>) -> Self {
        Self {
            vmas: BTreeMap::new(),
            pages: HashMap::new(),
            code_hook: None,
            span,
        }
    }

    /// Host address of guest address 0 when every page is at a constant offset from its
    /// guest address (the reserved range); `None` with separately allocated pages.
    pub fn flat_base(&self) -> Option<u64> {
        self.span.map(|b| b as u64)
    }

    /// The mapping containing `addr`: its start, end and protection.
    pub fn vma_at(&self, addr: u64) -> Option<(u64, u64, u32)> {
        let (&start, v) = self.vmas.range(..=addr).next_back()?;
        (addr < v.end).then_some((start, v.end, v.prot))
    }

    /// True when any byte of `[start, end)` is mapped.
    pub fn any_mapped(&self, start: u64, end: u64) -> bool {
        if self.vma_at(start).is_some() {
            return true;
        }
        self.vmas.range(start..end).next().is_some()
    }

    /// True when every byte of `[start, end)` is mapped.
    pub fn all_mapped(&self, start: u64, end: u64) -> bool {
        let mut a = start;
        while a < end {
            match self.vma_at(a) {
                Some((_, e, _)) => a = e,
                None => return false,
            }
        }
        true
    }

    /// Splits the mapping that straddles `addr` so that a mapping starts there.
    fn split_at(&mut self, addr: u64) {
        if let Some((start, end, prot)) = self.vma_at(addr)
            && start < addr
        {
            self.vmas.insert(start, Vma { end: addr, prot });
            self.vmas.insert(addr, Vma { end, prot });
        }
    }

    /// Maps `[start, end)` (page aligned) with zero-filled pages, replacing whatever was there.
    pub fn map(&mut self, start: u64, end: u64, prot: u32) {
        self.unmap(start, end);
        if start < end {
            self.vmas.insert(start, Vma { end, prot });
        }
    }

    /// Removes every mapping in `[start, end)` (page aligned) and frees its pages.
    pub fn unmap(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.split_at(start);
        self.split_at(end);
        let doomed: Vec<u64> = self.vmas.range(start..end).map(|(&s, _)| s).collect();
        for s in doomed {
            self.vmas.remove(&s);
        }
        self.free_pages(start, end);
    }

    fn free_pages(&mut self, start: u64, end: u64) {
        let (first, last) = (start >> 12, end >> 12);
        let (hook, span) = (&self.code_hook, self.span);
        let free = |n: u64, p: *mut Page| {
            if let Some(h) = hook {
                h(n << 12, PAGE_SIZE as usize);
            }
            release_page(span, p);
        };
        if last - first > self.pages.len() as u64 {
            self.pages.retain(|&n, &mut p| {
                let keep = n < first || n >= last;
                if !keep {
                    free(n, p);
                }
                keep
            });
        } else {
            for n in first..last {
                if let Some(p) = self.pages.remove(&n) {
                    free(n, p);
                }
            }
        }
    }

    /// Drops the contents of `[start, end)`: the pages read as zero again (`MADV_DONTNEED`).
    pub fn discard(&mut self, start: u64, end: u64) {
        self.free_pages(start, end);
    }

    /// Changes the protection of `[start, end)`; every page must be mapped.
    pub fn protect(&mut self, start: u64, end: u64, prot: u32) -> bool {
        if !self.all_mapped(start, end) {
            return false;
        }
        self.split_at(start);
        self.split_at(end);
        for (_, v) in self.vmas.range_mut(start..end) {
            v.prot = prot;
        }
        self.merge_around(start, end);
        true
    }

    /// Joins adjacent mappings of equal protection in and next to `[start, end)`, so that
    /// repeated `mprotect` calls do not fragment the map.
    fn merge_around(&mut self, start: u64, end: u64) {
        let lo = self
            .vma_at(start.wrapping_sub(1))
            .map_or(start, |(s, _, _)| s);
        let keys: Vec<u64> = self.vmas.range(lo..=end).map(|(&s, _)| s).collect();
        let mut prev: Option<u64> = None;
        for k in keys {
            if let Some(p) = prev {
                let (pv, kv) = (self.vmas[&p], self.vmas[&k]);
                if pv.end == k && pv.prot == kv.prot {
                    self.vmas.get_mut(&p).unwrap().end = kv.end;
                    self.vmas.remove(&k);
                    continue;
                }
            }
            prev = Some(k);
        }
    }

    /// Moves the pages of `[old, old+len)` to `[new, new+len)` (mappings and contents), for
    /// `mremap`. The destination must be unmapped.
    pub fn relocate(&mut self, old: u64, len: u64, new: u64) {
        let prot = self.vma_at(old).map_or(0, |v| v.2);
        let mut moved = Vec::new();
        for n in 0..len >> 12 {
            if let Some(p) = self.pages.remove(&((old >> 12) + n)) {
                let to = (new >> 12) + n;
                let p = match self.span {
                    // Pages of the reserved range stay where their address says: copy.
                    Some(base) => {
                        let q = page_in(base, to);
                        // SAFETY: two distinct pages of the range (the destination is
                        // unmapped, so untouched).
                        unsafe { std::ptr::copy_nonoverlapping(p, q, 1) };
                        release_page(self.span, p);
                        q
                    }
                    None => p,
                };
                moved.push((to, p));
                if let Some(h) = &self.code_hook {
                    h(old + (n << 12), PAGE_SIZE as usize);
                }
            }
        }
        self.unmap(old, old + len);
        self.vmas.insert(
            new,
            Vma {
                end: new + len,
                prot,
            },
        );
        self.pages.extend(moved);
    }

    /// Moves the end of the mapping that starts at `vma_start` (same protection); the caller
    /// has checked that the new range is free.
    pub fn set_end(&mut self, vma_start: u64, new_end: u64) {
        if let Some(v) = self.vmas.get_mut(&vma_start) {
            v.end = new_end;
        }
    }

    /// Highest free range of `len` bytes that ends at or below `top` and starts at or above
    /// `bottom` (top-down search, as Linux's default mmap layout).
    pub fn find_free(&self, len: u64, bottom: u64, top: u64) -> Option<u64> {
        let mut hi = top;
        // Walk the mappings downward from `top`, checking each gap.
        for (&s, v) in self.vmas.range(..top).rev() {
            if v.end < hi && hi - v.end >= len {
                return Some(hi - len);
            }
            hi = hi.min(s);
            if hi < bottom.saturating_add(len) {
                return None;
            }
        }
        (hi >= bottom.saturating_add(len)).then(|| hi - len)
    }

    /// Host address of guest page `n`, allocating a zero page on first touch.
    fn page(&mut self, n: u64) -> *mut u8 {
        let span = self.span;
        let p = *self.pages.entry(n).or_insert_with(|| match span {
            Some(base) => page_in(base, n),
            None => zeroed_page(),
        });
        p.cast()
    }

    /// Host pointer to the byte at `addr` if its page allows `need`, allocating the page.
    fn byte_ptr(&mut self, addr: u64, need: u32) -> Result<*mut u8, Fault> {
        match self.vma_at(addr) {
            Some((_, _, prot)) if prot & need == need => {
                Ok(unsafe { self.page(addr >> 12).add((addr & !PAGE_MASK) as usize) })
            }
            _ => Err(Fault),
        }
    }

    /// Copies guest memory out (needs read permission on every page).
    pub fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        self.copy(addr, out.len(), PROT_READ, |host, off, n| unsafe {
            std::ptr::copy_nonoverlapping(host, out.as_mut_ptr().add(off), n)
        })
    }

    pub fn read_vec(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, Fault> {
        let mut v = vec![0u8; len];
        self.read(addr, &mut v)?;
        Ok(v)
    }

    /// Copies into guest memory (needs write permission on every page; nothing is written
    /// when any page lacks it).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.check(addr, data.len() as u64, PROT_WRITE)?;
        self.copy(addr, data.len(), PROT_WRITE, |host, off, n| unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr().add(off), host, n)
        })?;
        if let Some(hook) = &self.code_hook {
            let mut off = 0;
            while off < data.len() {
                let a = addr + off as u64;
                let n = ((PAGE_SIZE - (a & !PAGE_MASK)) as usize).min(data.len() - off);
                if self.vma_at(a).is_some_and(|v| v.2 & PROT_EXEC != 0) {
                    hook(a, n);
                }
                off += n;
            }
        }
        Ok(())
    }

    /// Writes regardless of protection (the loader filling read-only segments).
    pub fn poke(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.copy(addr, data.len(), 0, |host, off, n| unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr().add(off), host, n)
        })
    }

    /// Fails unless every page of `[addr, addr+len)` allows `need`.
    pub fn check(&self, addr: u64, len: u64, need: u32) -> Result<(), Fault> {
        let end = addr.checked_add(len).ok_or(Fault)?;
        let mut a = addr;
        while a < end {
            match self.vma_at(a) {
                Some((_, e, prot)) if prot & need == need => a = e,
                _ => return Err(Fault),
            }
        }
        Ok(())
    }

    /// Walks `[addr, addr+len)` page by page, calling `f(host, offset, n)` for each piece.
    fn copy(
        &mut self,
        addr: u64,
        len: usize,
        need: u32,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> Result<(), Fault> {
        addr.checked_add(len as u64).ok_or(Fault)?;
        let mut off = 0usize;
        while off < len {
            let a = addr + off as u64;
            let n = ((PAGE_SIZE - (a & !PAGE_MASK)) as usize).min(len - off);
            let host = self.byte_ptr(a, need)?;
            f(host, off, n);
            off += n;
        }
        Ok(())
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the NUL).
    pub fn read_cstr(&mut self, addr: u64, max: usize) -> Result<Vec<u8>, Fault> {
        let mut s = Vec::new();
        let mut a = addr;
        loop {
            let avail = (PAGE_SIZE - (a & !PAGE_MASK)) as usize;
            let host = self.byte_ptr(a, PROT_READ)?;
            for k in 0..avail {
                let b = unsafe { *host.add(k) };
                if b == 0 {
                    return Ok(s);
                }
                s.push(b);
                if s.len() >= max {
                    return Err(Fault);
                }
            }
            a += avail as u64;
        }
    }

    pub fn read_u64(&mut self, addr: u64) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// The TLB fill for the vCPU: protection check, then the host page.
    pub fn translate(&mut self, ea: u64, access: Access) -> Result<PageMapping, Exception> {
        let need = match access {
            Access::Read => PROT_READ,
            Access::Write => PROT_WRITE,
            Access::Exec => PROT_EXEC,
        };
        match self.vma_at(ea) {
            Some((_, _, prot)) if prot & need != 0 => {
                let host = self.page(ea >> 12);
                Ok(PageMapping {
                    host,
                    pa: ea & PAGE_MASK,
                    read: prot & PROT_READ != 0,
                    write: prot & PROT_WRITE != 0,
                    exec: prot & PROT_EXEC != 0,
                    watch_writes: false,
                })
            }
            found => {
                // DSISR/SRR1: bit 33 (0x4000_0000) no translation, bit 36 (0x0800_0000)
                // protection; bit 38 (0x0200_0000) marks a store.
                let cause: u32 = if found.is_some() {
                    0x0800_0000
                } else {
                    0x4000_0000
                };
                Err(match access {
                    Access::Exec => Exception::Isi {
                        ea,
                        srr1: cause as u64,
                    },
                    Access::Read => Exception::Dsi { ea, dsisr: cause },
                    Access::Write => Exception::Dsi {
                        ea,
                        dsisr: cause | 0x0200_0000,
                    },
                })
            }
        }
    }

    /// Number of host pages in use (for `--stats`).
    pub fn resident_pages(&self) -> usize {
        self.pages.len()
    }
}

impl Drop for ProcessMemory {
    fn drop(&mut self) {
        match self.span {
            Some(base) => {
                // SAFETY: the range `reserve_span` mapped; no page pointer outlives `self`.
                unsafe { libc::munmap(base.cast(), USER_SPAN as usize) };
            }
            None => {
                for (_, p) in self.pages.drain() {
                    drop(unsafe { Box::from_raw(p) });
                }
            }
        }
    }
}

fn zeroed_page() -> *mut Page {
    // SAFETY: all-zero bytes are a valid `Page`.
    Box::into_raw(unsafe { Box::<Page>::new_zeroed().assume_init() })
}

/// Reserves `USER_SPAN` bytes of host address space for the guest's pages; `None` when the
/// host refuses (an address-space limit, or strict overcommit accounting).
fn reserve_span() -> Option<*mut u8> {
    // SAFETY: a fresh anonymous mapping, owned by the `ProcessMemory`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            USER_SPAN as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// Guest page `n` in the reserved range at `base`. Every mapping lies below `USER_SPAN`
/// (the syscall layer and the loader keep them there).
fn page_in(base: *mut u8, n: u64) -> *mut Page {
    assert!(
        n < USER_SPAN >> 12,
        "guest page {n:#x} beyond the user span"
    );
    // SAFETY: inside the reserved range.
    unsafe { base.add((n << 12) as usize) }.cast()
}

/// Gives a page's host memory back: zero-filled again on its next touch.
fn release_page(span: Option<*mut u8>, p: *mut Page) {
    match span {
        // SAFETY: a page of the reserved range; `MADV_DONTNEED` on a private anonymous
        // mapping drops its contents.
        Some(_) => unsafe {
            libc::madvise(p.cast(), PAGE_SIZE as usize, libc::MADV_DONTNEED);
        },
        // SAFETY: pages of the map are owned `Box`es (`zeroed_page`), freed once.
        None => drop(unsafe { Box::from_raw(p) }),
    }
}

/// The vCPU's fill path: the process's memory, shared with the syscall layer.
pub struct UserSpace(pub Arc<parking_lot::Mutex<ProcessMemory>>);

impl AddressSpace for UserSpace {
    fn translate(
        &mut self,
        _st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        self.0.lock().translate(ea, access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both page stores: the reserved range (when the host gives it) and separate pages.
    fn stores() -> Vec<ProcessMemory> {
        let mut v = vec![ProcessMemory::with_span(None)];
        if let Some(span) = reserve_span() {
            v.push(ProcessMemory::with_span(Some(span)));
        }
        v
    }

    #[test]
    fn pages_move_discard_and_translate_alike_in_both_stores() {
        for mut m in stores() {
            let flat = m.flat_base();
            m.map(0x10000, 0x14000, PROT_READ | PROT_WRITE);
            m.write(0x10ffc, &[7; 8]).unwrap();
            m.write(0x13000, &[9; 4]).unwrap();
            // mremap: contents follow the pages; the old range is gone.
            m.relocate(0x10000, 0x4000, 0x40000);
            assert_eq!(m.read_vec(0x40ffc, 8).unwrap(), vec![7; 8]);
            assert_eq!(m.read_vec(0x43000, 4).unwrap(), vec![9; 4]);
            assert!(m.read_vec(0x10ffc, 1).is_err());
            // MADV_DONTNEED: zero again.
            m.discard(0x43000, 0x44000);
            assert_eq!(m.read_vec(0x43000, 4).unwrap(), vec![0; 4]);
            // The TLB's host page: at the constant offset when the range is flat.
            let host = m.translate(0x41000, Access::Read).unwrap().host as u64;
            if let Some(base) = flat {
                assert_eq!(host, base + 0x41000);
            }
            // SAFETY: the first byte of a mapped, readable page of the process.
            assert_eq!(unsafe { *(host as *const u8) }, 7);
        }
    }

    #[test]
    fn map_split_protect_unmap() {
        let mut m = ProcessMemory::new();
        m.map(0x10000, 0x20000, PROT_READ | PROT_WRITE);
        m.write(0x10ff8, &[1; 16]).unwrap();
        assert!(m.protect(0x11000, 0x12000, PROT_READ));
        assert_eq!(m.write(0x11000, &[2]), Err(Fault));
        // A failed write across a read-only page writes nothing.
        assert_eq!(m.write(0x10fff, &[3, 3]), Err(Fault));
        assert_eq!(m.read_vec(0x10fff, 2).unwrap(), vec![1, 1]);
        assert_eq!(m.vma_at(0x11800), Some((0x11000, 0x12000, PROT_READ)));
        assert!(m.protect(0x11000, 0x12000, PROT_READ | PROT_WRITE));
        assert_eq!(
            m.vma_at(0x11800),
            Some((0x10000, 0x20000, PROT_READ | PROT_WRITE))
        );
        m.unmap(0x11000, 0x13000);
        assert!(m.read_vec(0x11000, 1).is_err());
        assert_eq!(m.read_vec(0x10ff8, 8).unwrap(), vec![1; 8]);
        assert_eq!(
            m.vma_at(0x13000),
            Some((0x13000, 0x20000, PROT_READ | PROT_WRITE))
        );
        // Unmapped and remapped memory reads as zero.
        m.map(0x11000, 0x12000, PROT_READ);
        assert_eq!(m.read_vec(0x11000, 8).unwrap(), vec![0; 8]);
        assert!(!m.protect(0x12000, 0x14000, PROT_READ));
    }

    #[test]
    fn find_free_top_down() {
        let mut m = ProcessMemory::new();
        m.map(0x7000_0000, 0x8000_0000, PROT_READ);
        assert_eq!(
            m.find_free(0x1000, MMAP_MIN, 0x8000_0000),
            Some(0x6fff_f000)
        );
        m.map(0x6fff_f000, 0x7000_0000, PROT_READ);
        m.map(0x6fff_c000, 0x6fff_d000, PROT_READ);
        assert_eq!(
            m.find_free(0x1000, MMAP_MIN, 0x8000_0000),
            Some(0x6fff_e000)
        );
        assert_eq!(
            m.find_free(0x2000, MMAP_MIN, 0x8000_0000),
            Some(0x6fff_d000)
        );
        assert_eq!(
            m.find_free(0x3000, MMAP_MIN, 0x8000_0000),
            Some(0x6fff_9000)
        );
        assert_eq!(m.find_free(0x1_0000_0000, MMAP_MIN, 0x8000_0000), None);
    }

    #[test]
    fn translate_faults() {
        let mut m = ProcessMemory::new();
        m.map(0x10000, 0x11000, PROT_READ);
        assert!(m.translate(0x10000, Access::Read).is_ok());
        assert_eq!(
            m.translate(0x10000, Access::Write).unwrap_err(),
            Exception::Dsi {
                ea: 0x10000,
                dsisr: 0x0a00_0000
            }
        );
        assert_eq!(
            m.translate(0x20000, Access::Read).unwrap_err(),
            Exception::Dsi {
                ea: 0x20000,
                dsisr: 0x4000_0000
            }
        );
        assert!(matches!(
            m.translate(0x10000, Access::Exec),
            Err(Exception::Isi { .. })
        ));
    }

    #[test]
    fn relocate_moves_contents() {
        let mut m = ProcessMemory::new();
        m.map(0x10000, 0x12000, PROT_READ | PROT_WRITE);
        m.write(0x11ff0, b"hello").unwrap();
        m.relocate(0x10000, 0x2000, 0x40000);
        assert!(m.read_vec(0x10000, 1).is_err());
        assert_eq!(m.read_vec(0x41ff0, 5).unwrap(), b"hello");
    }
}
