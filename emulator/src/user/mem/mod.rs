//! The guest process's address space: mappings (VMAs) with per-page protections, backed by
//! host pages allocated on first touch (so large reservations cost nothing until used).
//!
//! Where the host allows it, guest page `n` lives at `base + n × 4096` of one reserved host
//! range covering every user address ([`USER_SPAN`]): then every TLB entry has the same
//! addend, and translated code adds the constant instead of loading the entry's addend
//! (which put a TLB load on the path of every guest load; see [`ProcessMemory::flat_base`]).
//! Otherwise each page is a separate host allocation.
//!
//! In the reserved range the host protects every page as the guest does (unmapped pages
//! not at all), and a page that holds translated code against writes ([`ProcessMemory::
//! guard_code`]): the baseline tier's loads and stores then use the host address without
//! a TLB lookup, and what the guest may not do faults on the host (`jit::baseline::fault`)
//! and is redone through the TLB's slow path. A write by the guest or a system call to a
//! guarded page first drops every translation on the page and lifts the guard.
//!
//! The vCPU reaches guest pages through its TLB (raw host pointers); the syscall layer copies
//! through [`ProcessMemory::read`] / [`ProcessMemory::write`] with the same protection checks the
//! kernel's user-copy would make. Any change that removes or downgrades a mapping must be
//! followed by a TLB flush before the guest runs again.

use crate::cpu::{CpuState, Exception};
use crate::softmmu::{Access, AddressSpace, PAGE_MASK, PAGE_SIZE, PageMapping};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

mod span;
use span::{Span, host_prot};

pub const PROT_READ: u32 = 1;
pub const PROT_WRITE: u32 = 2;
pub const PROT_EXEC: u32 = 4;

/// Lowest address `mmap` hands out without `MAP_FIXED` (as Linux's `mmap_min_addr`).
pub const MMAP_MIN: u64 = 0x1_0000;

/// The user address space: every mapping lies below (defined with the translated code that
/// relies on it).
pub use crate::jit::USER_SPAN;

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
    /// Without the reserved range: host pages of touched guest pages, keyed by guest page
    /// number. Owned (from `Box::into_raw`), freed on unmap; never reached through Rust
    /// references. (In the range, translated code touches pages without telling.)
    pages: HashMap<u64, *mut Page>,
    /// Lets a JIT drop translations of code that changed (guest stores it sees itself).
    pub code_hook: Option<CodeHook>,
    /// The reserved host range behind every page, if the host gave one (`USER_SPAN` bytes,
    /// host protections as the guest's, `MAP_NORESERVE`: host pages are taken on first
    /// touch).
    span: Option<Span>,
    /// Guest page numbers whose host write permission is withheld because translated code
    /// lies there (only in the reserved range).
    guarded: std::collections::HashSet<u64>,
}

// SAFETY: pages are only touched by the one vCPU thread that owns the process and its syscalls.
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
        Self::with_span(Span::reserve())
    }

    /// As [`ProcessMemory::new`], the reserved range wherever the host puts it rather than
    /// low (`--jit-memory guarded-high`).
    pub fn new_high() -> Self {
        Self::with_span(Span::reserve_at(false))
    }

    /// Pages in the reserved range `span` when there is one, else separate allocations.
    fn with_span(span: Option<Span>) -> Self {
        Self {
            vmas: BTreeMap::new(),
            pages: HashMap::new(),
            code_hook: None,
            span,
            guarded: Default::default(),
        }
    }

    /// Host address of guest address 0 when every page is at a constant offset from its
    /// guest address (the reserved range); `None` with separately allocated pages.
    pub fn flat_base(&self) -> Option<u64> {
        self.span.map(Span::base)
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
            self.apply_host_protection(start, end);
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
        self.apply_host_protection(start, end);
    }

    fn free_pages(&mut self, start: u64, end: u64) {
        let (first, last) = (start >> 12, end >> 12);
        if let Some(span) = self.span {
            let last = last.min(USER_SPAN >> 12);
            if first >= last {
                return;
            }
            if let Some(h) = &self.code_hook {
                for n in first..last {
                    h(n << 12, PAGE_SIZE as usize);
                }
            }
            span.discard(first << 12, (last - first) << 12);
            return;
        }
        let hook = &self.code_hook;
        let free = |n: u64, p: *mut Page| {
            if let Some(h) = hook {
                h(n << 12, PAGE_SIZE as usize);
            }
            release_page(p);
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
        self.apply_host_protection(start, end);
    }

    /// Changes the protection of `[start, end)`; every page must be mapped.
    pub fn protect(&mut self, start: u64, end: u64, prot: u32) -> bool {
        if !self.all_mapped(start, end) {
            return false;
        }
        self.split_at(start);
        self.split_at(end);
        for (&s, v) in self.vmas.range_mut(start..end) {
            if v.prot & PROT_EXEC != 0
                && prot & PROT_EXEC == 0
                && let Some(h) = &self.code_hook
            {
                // Translations of code that may no longer run go (and jumps into them).
                for a in (s..v.end).step_by(PAGE_SIZE as usize) {
                    h(a, PAGE_SIZE as usize);
                }
            }
            v.prot = prot;
        }
        self.merge_around(start, end);
        self.apply_host_protection(start, end);
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
        if let Some(span) = self.span {
            // Both ranges lie in the reserved range (every mapping does); the destination is
            // unmapped, so they do not overlap.
            span.relocate(old, len, new);
            if let Some(h) = &self.code_hook {
                for n in 0..len >> 12 {
                    h(old + (n << 12), PAGE_SIZE as usize);
                }
            }
        } else {
            for n in 0..len >> 12 {
                if let Some(p) = self.pages.remove(&((old >> 12) + n)) {
                    moved.push(((new >> 12) + n, p));
                    if let Some(h) = &self.code_hook {
                        h(old + (n << 12), PAGE_SIZE as usize);
                    }
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
        self.apply_host_protection(new, new + len);
    }

    /// Moves the end of the mapping that starts at `vma_start` (same protection); the caller
    /// has checked that the new range is free.
    pub fn set_end(&mut self, vma_start: u64, new_end: u64) {
        if let Some(v) = self.vmas.get_mut(&vma_start) {
            let old_end = std::mem::replace(&mut v.end, new_end);
            self.apply_host_protection(old_end.min(new_end), old_end.max(new_end));
        }
    }

    /// Host protection of the reserved range's `[start, end)` (page aligned) from the
    /// mappings: readable where the guest may read or execute, writable where it may write
    /// and no translated code lies, nothing elsewhere.
    fn apply_host_protection(&mut self, start: u64, end: u64) {
        let Some(span) = self.span else {
            return;
        };
        let end = end.min(USER_SPAN);
        let mut a = start;
        while a < end {
            let (piece_end, prot) = match self.vma_at(a) {
                Some((_, e, prot)) => (e.min(end), prot),
                None => (self.vmas.range(a..end).next().map_or(end, |(&s, _)| s), 0),
            };
            span.protect(a, piece_end - a, host_prot(prot));
            a = piece_end;
        }
        let in_range: Vec<u64> = self
            .guarded
            .iter()
            .copied()
            .filter(|&n| (start >> 12..end.div_ceil(PAGE_SIZE)).contains(&n))
            .collect();
        for n in in_range {
            match self.vma_at(n << 12) {
                Some((_, _, prot)) => {
                    span.protect(n << 12, PAGE_SIZE, host_prot(prot) & !libc::PROT_WRITE);
                }
                None => {
                    self.guarded.remove(&n);
                }
            }
        }
    }

    /// Withholds host write permission from the page at `addr`, which now holds translated
    /// code: the guest's direct stores to it fault on the host and take the slow path.
    /// Nothing happens outside the reserved range.
    pub fn guard_code(&mut self, addr: u64) {
        let n = addr >> 12;
        if let (Some(span), Some((_, _, prot))) = (self.span, self.vma_at(addr))
            && self.guarded.insert(n)
        {
            span.protect(n << 12, PAGE_SIZE, host_prot(prot) & !libc::PROT_WRITE);
        }
    }

    /// The guest or a system call is about to write the page at `addr`: when it is guarded,
    /// its translations are dropped (all of them: the host stops guarding the page) and its
    /// host protection is the guest's again.
    fn unguard(&mut self, addr: u64) {
        let n = addr >> 12;
        if self.guarded.remove(&n) {
            if let Some(h) = &self.code_hook {
                h(n << 12, PAGE_SIZE as usize);
            }
            self.apply_host_protection(n << 12, (n + 1) << 12);
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
        if let Some(span) = self.span {
            // Every mapping lies below `USER_SPAN` (the syscall layer and the loader keep
            // them there); `at` checks it.
            return span.at(n << 12);
        }
        let p = *self.pages.entry(n).or_insert_with(zeroed_page);
        p.cast()
    }

    /// Host pointer to the byte at `addr` if its page allows `need`, allocating the page.
    fn byte_ptr(&mut self, addr: u64, need: u32) -> Result<*mut u8, Fault> {
        match self.vma_at(addr) {
            Some((_, _, prot)) if prot & need == need => {
                // SAFETY: the offset is within the page `page` returns (a whole host page).
                Ok(unsafe { self.page(addr >> 12).add((addr & !PAGE_MASK) as usize) })
            }
            _ => Err(Fault),
        }
    }

    /// Copies guest memory out (needs read permission on every page).
    pub fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        // SAFETY: `copy` hands `n` bytes of a guest page at `host`, and `off + n` is within
        // `out` (it splits `out.len()` bytes by page).
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
        if !self.guarded.is_empty() && !data.is_empty() {
            for n in addr >> 12..=(addr + data.len() as u64 - 1) >> 12 {
                self.unguard(n << 12);
            }
        }
        // SAFETY: as in `read`, with `data`.
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

    /// Writes regardless of protection (the loader filling read-only segments); nothing is
    /// written when part of the range is not mapped.
    pub fn poke(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.check(addr, data.len() as u64, 0)?;
        let (first, last) = (addr & PAGE_MASK, page_up(addr + data.len() as u64));
        // One host call for the whole range (one per page made a 2.5 MB program's start
        // 770 `mprotect`s, each splitting the host's mapping).
        if let Some(span) = self.span
            && last > first
        {
            span.protect(first, last - first, libc::PROT_READ | libc::PROT_WRITE);
        }
        let r = self.copy(addr, data.len(), 0, |host, off, n| {
            // SAFETY: as in `read`, with `data`; the range was made writable on the host.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(off), host, n) }
        });
        for n in first >> 12..last >> 12 {
            self.unguard(n << 12);
        }
        self.apply_host_protection(first, last);
        r
    }

    /// [`Self::poke`] of a program segment's file bytes `data`, which lie at `offset` in
    /// `file`: in the reserved range, the pages `data` covers whole are mapped from the file
    /// (the host reads only those the guest touches; a 2.5 MB program's copy was a quarter
    /// of its start), the partial first and last pages copied.
    pub fn poke_file(
        &mut self,
        addr: u64,
        data: &[u8],
        file: &std::fs::File,
        offset: u64,
    ) -> Result<(), Fault> {
        self.check(addr, data.len() as u64, 0)?;
        let end = addr + data.len() as u64;
        let (lo, hi) = (page_up(addr), end & PAGE_MASK);
        let mapped = match self.span {
            Some(span) if hi > lo && (offset + (lo - addr)).is_multiple_of(PAGE_SIZE) => {
                span.map_file(lo, hi - lo, file, offset + (lo - addr))
            }
            _ => false,
        };
        if !mapped {
            return self.poke(addr, data);
        }
        for n in lo >> 12..hi >> 12 {
            self.unguard(n << 12);
        }
        self.apply_host_protection(lo, hi);
        self.poke(addr, &data[..(lo - addr) as usize])?;
        self.poke(hi, &data[(hi - addr) as usize..])
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
                // SAFETY: `k` < the bytes left in the page `byte_ptr` returned a pointer into.
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
                if access == Access::Write {
                    self.unguard(ea);
                }
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

    /// Number of host pages in use (for `--stats`; pages mapped from the program's file
    /// count while the host has them cached).
    pub fn resident_pages(&self) -> usize {
        let Some(span) = self.span else {
            return self.pages.len();
        };
        self.vmas
            .iter()
            .map(|(&start, v)| span.resident(start, v.end.min(USER_SPAN) - start))
            .sum()
    }
}

impl Drop for ProcessMemory {
    fn drop(&mut self) {
        match self.span {
            Some(span) => {
                // SAFETY: the memory's own range, released once, here; no page pointer
                // outlives `self` (the vCPU's TLB and translations go with the process).
                unsafe { span.release() };
            }
            None => {
                for (_, p) in self.pages.drain() {
                    // SAFETY: every page of the map came from `zeroed_page`'s box, once.
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

/// Gives a separately allocated page's host memory back.
fn release_page(p: *mut Page) {
    // SAFETY: pages of the map are owned `Box`es (`zeroed_page`), freed once.
    drop(unsafe { Box::from_raw(p) })
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
        if let Some(span) = Span::reserve() {
            v.push(ProcessMemory::with_span(Some(span)));
        }
        v
    }

    /// The low place is taken once: a second range, or one asked for high, goes elsewhere
    /// (MAP_FIXED_NOREPLACE never replaces a range already there).
    #[test]
    fn ranges_never_share_the_low_place() {
        let spans = [Span::reserve(), Span::reserve(), Span::reserve_at(false)];
        let bases: Vec<u64> = spans.iter().flatten().map(|s| s.base()).collect();
        let low = bases
            .iter()
            .filter(|&&b| b == span::LOW_BASE as u64)
            .count();
        assert!(low <= 1, "{bases:x?}");
        if let Some(high) = spans[2] {
            assert_ne!(high.base(), span::LOW_BASE as u64);
        }
        for (k, a) in bases.iter().enumerate() {
            for b in &bases[k + 1..] {
                assert!(
                    a.abs_diff(*b) >= crate::jit::USER_SPAN,
                    "{bases:x?} overlap"
                );
            }
        }
        for s in spans.into_iter().flatten() {
            // SAFETY: reserved here, released once, nothing points into them.
            unsafe { s.release() };
        }
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

    /// What the host lets this process do with the byte at `p`: (read, write). Probed
    /// through a pipe, where the kernel answers `EFAULT` instead of raising a signal.
    fn host_access(p: *mut u8) -> (bool, bool) {
        let mut fds = [0; 2];
        // SAFETY: plain system calls on a fresh pipe; `p` is only handed to the kernel.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let read = libc::write(fds[1], p.cast(), 1) == 1;
            if !read {
                // The byte that goes back is irrelevant: a page that cannot be read cannot
                // be written.
                libc::write(fds[1], [0u8].as_ptr().cast(), 1);
            }
            let write = libc::read(fds[0], p.cast(), 1) == 1;
            libc::close(fds[0]);
            libc::close(fds[1]);
            (read, write)
        }
    }

    #[test]
    fn host_protection_follows_the_guest_and_guards_code() {
        let Some(span) = Span::reserve() else {
            return;
        };
        let mut m = ProcessMemory::with_span(Some(span));
        let hooked = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let h = hooked.clone();
        m.code_hook = Some(Box::new(move |a, _| h.lock().push(a)));
        let at = |a: u64| span.at(a);
        assert_eq!(host_access(at(0x10000)), (false, false), "unmapped");
        m.map(0x10000, 0x13000, PROT_READ | PROT_WRITE);
        assert_eq!(host_access(at(0x10000)), (true, true));
        assert!(m.protect(0x11000, 0x12000, PROT_READ | PROT_EXEC));
        assert_eq!(host_access(at(0x11000)), (true, false), "read-only");
        assert_eq!(host_access(at(0x12fff)), (true, true));
        assert!(m.protect(0x12000, 0x13000, 0));
        assert_eq!(host_access(at(0x12000)), (false, false), "PROT_NONE");
        // A guarded page is read-only on the host until the guest or a system call writes it;
        // then its translations go (the hook) and the guest's protection is back.
        m.guard_code(0x10000);
        assert_eq!(host_access(at(0x10008)), (true, false));
        assert!(m.protect(0x10000, 0x11000, PROT_READ | PROT_WRITE | PROT_EXEC));
        assert_eq!(host_access(at(0x10008)), (true, false), "still guarded");
        hooked.lock().clear();
        m.write(0x10008, b"x").unwrap();
        assert_eq!(host_access(at(0x10008)), (true, true));
        assert!(hooked.lock().contains(&0x10000));
        m.guard_code(0x10000);
        hooked.lock().clear();
        m.translate(0x10010, Access::Write).unwrap();
        assert_eq!(host_access(at(0x10010)), (true, true));
        assert_eq!(hooked.lock().as_slice(), &[0x10000]);
        // Loader writes go through any protection and leave it as it was.
        m.poke(0x11000, b"text").unwrap();
        assert_eq!(host_access(at(0x11000)), (true, false));
        assert_eq!(m.read_vec(0x11000, 4).unwrap(), b"text");
        // Code that may no longer run loses its translations.
        hooked.lock().clear();
        assert!(m.protect(0x11000, 0x12000, PROT_READ));
        assert_eq!(hooked.lock().as_slice(), &[0x11000]);
        m.unmap(0x10000, 0x13000);
        assert_eq!(host_access(at(0x10008)), (false, false));
        assert_eq!(host_access(at(0x11000)), (false, false));
    }

    /// A segment loaded from its file reads as the file's bytes in both page stores: whole
    /// pages mapped from the file, the partial first and last ones copied; the rest of its
    /// last page stays zero (the bss); a guest write changes the process's page, not the
    /// file; discarded pages read as zero, not as the file again.
    #[test]
    fn a_segment_loaded_from_its_file_reads_as_the_file_and_discards_to_zero() {
        let path = std::env::temp_dir().join(format!("ppc64emu-segment-{}", std::process::id()));
        let contents: Vec<u8> = (0..5 * PAGE_SIZE as usize)
            .map(|k| (k % 251) as u8 + 1)
            .collect();
        std::fs::write(&path, &contents).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // Bytes 0x800..0x4800 of the file at 0x10800: three whole pages and two halves.
        let (addr, off, len) = (0x10800u64, 0x800u64, 0x4000usize);
        let seg = &contents[off as usize..off as usize + len];
        for mut m in stores() {
            m.map(0x10000, 0x16000, PROT_READ);
            m.poke_file(addr, seg, &file, off).unwrap();
            assert_eq!(m.read_vec(addr, len).unwrap(), seg);
            assert_eq!(m.read_vec(0x10000, 0x800).unwrap(), vec![0; 0x800]);
            assert_eq!(m.read_vec(0x14800, 0x800).unwrap(), vec![0; 0x800]);
            assert!(
                m.write(0x12000, b"x").is_err(),
                "the guest's protection stays"
            );
            assert!(m.protect(0x10000, 0x16000, PROT_READ | PROT_WRITE));
            m.write(0x12000, b"xyz").unwrap();
            assert_eq!(m.read_vec(0x12000, 3).unwrap(), b"xyz");
            m.discard(0x11000, 0x14000);
            assert_eq!(m.read_vec(0x11000, 0x3000).unwrap(), vec![0; 0x3000]);
            assert_eq!(m.read_vec(0x10800, 0x800).unwrap(), &seg[..0x800]);
            // Out of the mappings: refused, nothing written.
            assert!(m.poke_file(0x15800, seg, &file, off).is_err());
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            contents,
            "the file is unchanged"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn relocate_moves_touched_pages_and_clears_the_source() {
        let Some(span) = Span::reserve() else {
            return;
        };
        let mut m = ProcessMemory::with_span(Some(span));
        m.map(0x10000, 0x14000, PROT_READ | PROT_WRITE);
        // Written straight through the host page, as translated code does.
        // SAFETY: a mapped, writable page of the reserved range.
        unsafe { span.at(0x12345).write(7) };
        m.relocate(0x10000, 0x4000, 0x80000);
        assert_eq!(m.read_vec(0x82345, 1).unwrap(), [7]);
        let moved_from = span.at(0x12345);
        assert_eq!(host_access(moved_from), (false, false));
        m.map(0x10000, 0x14000, PROT_READ | PROT_WRITE);
        assert_eq!(
            m.read_vec(0x12345, 1).unwrap(),
            [0],
            "the old range reads as zero"
        );
    }
}
