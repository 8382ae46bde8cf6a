//! Guest memory access through a per-vCPU software TLB.
//!
//! The hit path is a tag compare and an add to a host pointer. A miss asks the vCPU's
//! [`AddressSpace`] (user-mode page map, or the machine's MMU) to translate the page and
//! caches the result. Guest RAM is shared between vCPU threads, so it is only ever reached
//! through raw pointers; aligned accesses use relaxed atomics so that concurrent guest
//! accesses are defined behaviour on the host.

mod flat;
mod ram;
mod tlb;

pub use flat::FlatRam;
pub use ram::{GuestRam, RamError};
pub use tlb::{
    MMU_IDX_COUNT, PAGE_MASK, PAGE_SIZE, TLB_ENTRIES, Tlb, TlbCounters, TlbEntry, TlbTable,
    fast_path_mask, mmu_idx,
};

use crate::cpu::{CpuState, Exception};
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Kind of access, for protection checks and for picking the TLB tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// Result of translating one page: where it lives on the host and what it allows.
#[derive(Clone, Copy, Debug)]
pub struct PageMapping {
    /// Host address of the first byte of the page; null for MMIO.
    pub host: *mut u8,
    /// Guest physical address of the page (for MMIO dispatch and code tracking).
    pub pa: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// Writes must take the slow path (the page holds translated code).
    pub watch_writes: bool,
}

/// The fill path of the TLB: translation, protection and devices. One per vCPU.
pub trait AddressSpace: Send {
    /// Translates the page containing `ea` for `access` in the CPU's current mode, or raises
    /// the storage interrupt the architecture requires.
    fn translate(
        &mut self,
        st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception>;

    /// Device read at guest physical `pa`.
    fn mmio_read(&mut self, _st: &CpuState, pa: u64, _size: usize) -> Result<u64, Exception> {
        Err(Exception::Dsi {
            ea: pa,
            dsisr: 0x0800_0000,
        })
    }

    /// Device write at guest physical `pa`.
    fn mmio_write(
        &mut self,
        _st: &CpuState,
        pa: u64,
        _size: usize,
        _val: u64,
    ) -> Result<(), Exception> {
        Err(Exception::Dsi {
            ea: pa,
            dsisr: 0x0a00_0000,
        })
    }

    /// A store hit a page marked `watch_writes` (translated code lives there).
    fn code_written(&mut self, _pa: u64, _len: usize) {}
}

/// One vCPU's view of memory: its TLB and its fill path.
pub struct SoftMmu {
    pub tlb: Tlb,
    pub space: Box<dyn AddressSpace>,
}

impl SoftMmu {
    pub fn new(space: Box<dyn AddressSpace>) -> Self {
        Self {
            tlb: Tlb::new(),
            space,
        }
    }

    /// Host pointer for `size` bytes at `ea`, filling the TLB on a miss. `None` means the
    /// access must go to a device (MMIO) or crosses a page.
    #[inline]
    fn host_ptr(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        access: Access,
    ) -> Result<Option<*mut u8>, Exception> {
        let idx = mmu_idx(st.msr, access);
        if let Some(p) = self.tlb.lookup(idx, ea, size, access) {
            return Ok(Some(p));
        }
        self.fill(st, idx, ea, size, access)
    }

    #[cold]
    fn fill(
        &mut self,
        st: &CpuState,
        idx: usize,
        ea: u64,
        size: usize,
        access: Access,
    ) -> Result<Option<*mut u8>, Exception> {
        if self.tlb.victim_lookup(idx, ea, access)
            && let Some(p) = self.tlb.lookup(idx, ea, size, access)
        {
            return Ok(Some(p));
        }
        let m = self.space.translate(st, ea, access)?;
        self.tlb.insert(idx, ea, &m);
        if m.host.is_null() || (ea & !PAGE_MASK) as usize + size > PAGE_SIZE as usize {
            return Ok(None);
        }
        if access == Access::Write && m.watch_writes {
            self.space.code_written(m.pa + (ea & !PAGE_MASK), size);
        }
        // SAFETY: `m.host` is the host address of a whole RAM page (not null: checked above)
        // and the offset is below the page size, so the result stays inside that page.
        Ok(Some(unsafe { m.host.add((ea & !PAGE_MASK) as usize) }))
    }

    /// Loads `size` (1, 2, 4, 8) bytes at `ea` in the byte order `le`, zero-extended.
    #[inline]
    pub fn load(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        le: bool,
    ) -> Result<u64, Exception> {
        match self.host_ptr(st, ea, size, Access::Read)? {
            // SAFETY: `host_ptr` returns a pointer only for `size` bytes inside one RAM page.
            Some(p) => Ok(unsafe { read_host(p, size, le) }),
            None => self.load_slow(st, ea, size, le, Access::Read),
        }
    }

    /// Fetches the instruction word at `ea` (byte order from MSR[LE]).
    #[inline]
    pub fn fetch(&mut self, st: &CpuState, ea: u64) -> Result<u32, Exception> {
        match self.host_ptr(st, ea, 4, Access::Exec)? {
            // SAFETY: `host_ptr` returns a pointer only for 4 bytes inside one RAM page.
            Some(p) => Ok(unsafe { read_host(p, 4, st.le()) } as u32),
            None => Err(Exception::Isi {
                ea,
                srr1: 0x1000_0000,
            }),
        }
    }

    /// Stores the low `size` bytes of `val` at `ea` in the byte order `le`.
    #[inline]
    pub fn store(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        val: u64,
        le: bool,
    ) -> Result<(), Exception> {
        match self.host_ptr(st, ea, size, Access::Write)? {
            Some(p) => {
                // SAFETY: `host_ptr` returns a pointer only for `size` bytes inside one RAM
                // page, writable for this access.
                unsafe { write_host(p, size, val, le) };
                Ok(())
            }
            None => self.store_slow(st, ea, size, val, le),
        }
    }

    /// Page-crossing or device load: byte by byte through the translation, or MMIO.
    #[cold]
    fn load_slow(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        le: bool,
        access: Access,
    ) -> Result<u64, Exception> {
        let m = self.space.translate(st, ea, access)?;
        if m.host.is_null() {
            let v = self.space.mmio_read(st, m.pa + (ea & !PAGE_MASK), size)?;
            return Ok(v);
        }
        // Translate every page first so a fault leaves no partial effect.
        let last = ea.wrapping_add(size as u64 - 1);
        self.host_ptr(st, last, 1, access)?;
        let mut bytes = [0u8; 8];
        for (k, b) in bytes.iter_mut().enumerate().take(size) {
            let p = self
                .host_ptr(st, ea.wrapping_add(k as u64), 1, access)?
                .expect("RAM page");
            // SAFETY: `p` is one byte of a RAM page (`host_ptr` for size 1); other vCPUs
            // reach it only through atomics too, and a byte is always aligned.
            *b = unsafe { (*AtomicU8::from_ptr(p)).load(Ordering::Relaxed) };
        }
        Ok(assemble(&bytes[..size], le))
    }

    #[cold]
    fn store_slow(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        val: u64,
        le: bool,
    ) -> Result<(), Exception> {
        let m = self.space.translate(st, ea, Access::Write)?;
        if m.host.is_null() {
            return self
                .space
                .mmio_write(st, m.pa + (ea & !PAGE_MASK), size, val);
        }
        let last = ea.wrapping_add(size as u64 - 1);
        self.host_ptr(st, last, 1, Access::Write)?;
        for k in 0..size {
            let shift = if le { 8 * k } else { 8 * (size - 1 - k) };
            let p = self
                .host_ptr(st, ea.wrapping_add(k as u64), 1, Access::Write)?
                .expect("RAM page");
            // SAFETY: `p` is one writable byte of a RAM page (`host_ptr` for size 1); other
            // vCPUs reach it only through atomics too, and a byte is always aligned.
            unsafe { (*AtomicU8::from_ptr(p)).store((val >> shift) as u8, Ordering::Relaxed) };
        }
        Ok(())
    }

    /// Raises the fault a store to the byte at `ea` would raise, without storing: a store
    /// done in parts (16-byte vector stores) probes its last byte first so that a fault in
    /// the second page leaves memory untouched.
    pub fn probe_write(&mut self, st: &CpuState, ea: u64) -> Result<(), Exception> {
        self.host_ptr(st, ea, 1, Access::Write).map(|_| ())
    }

    /// Host pointer to `size` bytes of RAM at `ea` for an atomic read-modify-write
    /// (`st?cx.`) or a block operation (`dcbz`). The range must lie in one page.
    pub fn ram_ptr(
        &mut self,
        st: &CpuState,
        ea: u64,
        size: usize,
        access: Access,
    ) -> Result<*mut u8, Exception> {
        match self.host_ptr(st, ea, size, access)? {
            Some(p) => Ok(p),
            None => Err(Exception::Alignment { ea, dsisr: 0 }),
        }
    }
}

fn assemble(bytes: &[u8], le: bool) -> u64 {
    let mut v = 0u64;
    if le {
        for &b in bytes.iter().rev() {
            v = (v << 8) | b as u64;
        }
    } else {
        for &b in bytes {
            v = (v << 8) | b as u64;
        }
    }
    v
}

/// Reads `size` bytes of guest RAM at host address `p`.
///
/// # Safety
/// `p..p+size` must be inside guest RAM.
#[inline(always)]
pub unsafe fn read_host(p: *mut u8, size: usize, le: bool) -> u64 {
    // SAFETY: the caller vouches that `p..p+size` is guest RAM, which lives as long as the
    // machine. Aligned accesses are atomics (the alignment is checked here), so concurrent
    // vCPUs never race on them; unaligned ones are plain reads, as a host CPU performs them,
    // and the guest's memory model gives no atomicity to those either.
    unsafe {
        let aligned = (p as usize) & (size - 1) == 0;
        let raw = match (size, aligned) {
            (1, _) => (*AtomicU8::from_ptr(p)).load(Ordering::Relaxed) as u64,
            (2, true) => (*AtomicU16::from_ptr(p.cast())).load(Ordering::Relaxed) as u64,
            (4, true) => (*AtomicU32::from_ptr(p.cast())).load(Ordering::Relaxed) as u64,
            (8, true) => (*AtomicU64::from_ptr(p.cast())).load(Ordering::Relaxed),
            (2, false) => p.cast::<u16>().read_unaligned() as u64,
            (4, false) => p.cast::<u32>().read_unaligned() as u64,
            _ => p.cast::<u64>().read_unaligned(),
        };
        from_order(raw, size, le)
    }
}

/// Writes the low `size` bytes of `val` to guest RAM at host address `p`.
///
/// # Safety
/// `p..p+size` must be inside guest RAM.
#[inline(always)]
pub unsafe fn write_host(p: *mut u8, size: usize, val: u64, le: bool) {
    // SAFETY: as for `read_host`: `p..p+size` is guest RAM (the caller's promise); aligned
    // stores are atomics, unaligned ones plain writes the guest cannot expect to be atomic.
    unsafe {
        let raw = from_order(val, size, le);
        let aligned = (p as usize) & (size - 1) == 0;
        match (size, aligned) {
            (1, _) => (*AtomicU8::from_ptr(p)).store(raw as u8, Ordering::Relaxed),
            (2, true) => (*AtomicU16::from_ptr(p.cast())).store(raw as u16, Ordering::Relaxed),
            (4, true) => (*AtomicU32::from_ptr(p.cast())).store(raw as u32, Ordering::Relaxed),
            (8, true) => (*AtomicU64::from_ptr(p.cast())).store(raw, Ordering::Relaxed),
            (2, false) => p.cast::<u16>().write_unaligned(raw as u16),
            (4, false) => p.cast::<u32>().write_unaligned(raw as u32),
            _ => p.cast::<u64>().write_unaligned(raw),
        }
    }
}

/// Converts between a host-native load of `size` bytes and the guest value in order `le`
/// (an involution, so it serves loads and stores).
#[inline(always)]
fn from_order(raw: u64, size: usize, le: bool) -> u64 {
    let host_le = cfg!(target_endian = "little");
    if le == host_le {
        raw
    } else {
        match size {
            1 => raw,
            2 => (raw as u16).swap_bytes() as u64,
            4 => (raw as u32).swap_bytes() as u64,
            _ => raw.swap_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmu() -> (SoftMmu, CpuState) {
        (
            SoftMmu::new(Box::new(FlatRam::new(0x10000))),
            CpuState::new(),
        )
    }

    #[test]
    fn byte_orders() {
        let (mut m, mut st) = mmu();
        m.store(&st, 0x100, 4, 0x11223344, false).unwrap();
        assert_eq!(m.load(&st, 0x100, 1, false).unwrap(), 0x11);
        assert_eq!(m.load(&st, 0x100, 4, true).unwrap(), 0x44332211);
        st.msr |= crate::cpu::msr::LE;
        m.store(&st, 0x200, 8, 0x0102030405060708, true).unwrap();
        assert_eq!(m.load(&st, 0x200, 1, true).unwrap(), 0x08);
        assert_eq!(m.load(&st, 0x200, 2, false).unwrap(), 0x0807);
    }

    #[test]
    fn page_crossing_access() {
        let (mut m, st) = mmu();
        m.store(&st, 0xffe, 4, 0xaabbccdd, false).unwrap();
        assert_eq!(m.load(&st, 0xffe, 4, false).unwrap(), 0xaabbccdd);
        assert_eq!(m.load(&st, 0x1000, 1, false).unwrap(), 0xcc);
        // Unaligned within a page.
        m.store(&st, 0x2003, 8, 0x1122334455667788, true).unwrap();
        assert_eq!(m.load(&st, 0x2003, 8, true).unwrap(), 0x1122334455667788);
    }

    #[test]
    fn out_of_range_faults_without_partial_store() {
        let (mut m, st) = mmu();
        assert!(matches!(
            m.load(&st, 0x10000, 4, false),
            Err(Exception::Dsi { .. })
        ));
        m.store(&st, 0xfffc, 4, 0x55555555, false).unwrap();
        assert!(m.store(&st, 0xfffe, 4, 0, false).is_err());
        assert_eq!(m.load(&st, 0xfffc, 4, false).unwrap(), 0x55555555);
    }
}
