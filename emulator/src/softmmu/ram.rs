//! Guest RAM: one anonymous host mapping shared by every vCPU thread.
//!
//! vCPUs reach it through the raw host pointers their TLBs cache, so Rust references into it
//! never exist while the guest runs. The machine side (loader, hypercalls, RTAS) copies bytes
//! in and out with [`GuestRam::read`] / [`GuestRam::write`], which use relaxed atomics so that a
//! copy racing with guest stores is defined behaviour on the host (it sees old or new bytes).
//!
//! Pages that hold translated code are watched for stores by the JIT's address space
//! ([`crate::jit::JitSpace`]), not marked here.

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Why a RAM operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamError {
    /// The requested size is zero or not a multiple of 64 KiB (the largest page the guest maps).
    BadSize(u64),
    /// The host refused the mapping (`-m` larger than the host can reserve).
    HostMap(u64),
    /// `[pa, pa + len)` is not inside guest RAM.
    OutOfRange { pa: u64, len: u64 },
}

impl fmt::Display for RamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RamError::BadSize(s) => write!(
                f,
                "guest RAM size {s:#x} is not a non-zero multiple of 64 KiB"
            ),
            RamError::HostMap(s) => write!(
                f,
                "cannot reserve {s:#x} bytes of host memory for guest RAM"
            ),
            RamError::OutOfRange { pa, len } => {
                write!(f, "guest physical range {pa:#x}+{len:#x} is outside RAM")
            }
        }
    }
}

impl std::error::Error for RamError {}

/// Guest physical memory `[0, size)`.
pub struct GuestRam {
    base: NonNull<u8>,
    size: u64,
}

// SAFETY: the mapping is only reached through raw pointers with atomic or racy-by-design
// accesses (guest memory semantics); the struct itself is immutable after creation, and the
// mapping belongs to no thread.
unsafe impl Send for GuestRam {}
// SAFETY: as for Send: `&GuestRam` gives no access that is not safe from several threads.
unsafe impl Sync for GuestRam {}

impl GuestRam {
    /// Largest page a pseries guest maps; RAM sizes are multiples of it.
    pub const GRANULE: u64 = 64 << 10;

    /// Reserves `size` bytes of zeroed RAM. The host commits pages on first touch, so a large
    /// `-m` costs nothing until the guest uses it.
    pub fn new(size: u64) -> Result<Self, RamError> {
        if size == 0 || !size.is_multiple_of(Self::GRANULE) || usize::try_from(size).is_err() {
            return Err(RamError::BadSize(size));
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RamError::HostMap(size));
        }
        // No transparent-huge-page advice: a guest touches its RAM sparsely at first (its
        // allocator hands out pages from all over), and a huge page is zeroed whole on the
        // first touch of any byte. Measured on linux-make at N = 1: 2 MiB pages spent 5 % of
        // the run in the host's page clearing and ran 3 % slower than 4 KiB ones; the
        // kernel build and the bundled guest ran at the same speed either way.
        Ok(Self {
            base: NonNull::new(p.cast()).expect("mmap returned null"),
            size,
        })
    }

    #[inline]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `[pa, pa + len)` lies inside RAM.
    #[inline]
    pub fn contains(&self, pa: u64, len: u64) -> bool {
        pa < self.size && len <= self.size - pa
    }

    /// Host address of guest physical `pa`, or `None` outside RAM. The pointer stays valid for
    /// the lifetime of `self`; accesses through it must tolerate concurrent guest accesses.
    #[inline]
    pub fn host_ptr(&self, pa: u64) -> Option<*mut u8> {
        // SAFETY: in bounds of the mapping.
        (pa < self.size).then(|| unsafe { self.base.as_ptr().add(pa as usize) })
    }

    fn check(&self, pa: u64, len: usize) -> Result<*mut u8, RamError> {
        if self.contains(pa, len as u64) {
            // SAFETY: `pa + len` is inside the mapping (just checked).
            Ok(unsafe { self.base.as_ptr().add(pa as usize) })
        } else {
            Err(RamError::OutOfRange {
                pa,
                len: len as u64,
            })
        }
    }

    /// Copies guest RAM at `pa` into `buf`.
    pub fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), RamError> {
        let p = self.check(pa, buf.len())?;
        // SAFETY: checked range; every access is atomic.
        unsafe { copy_atomic(p, buf.as_mut_ptr(), buf.len(), Dir::FromGuest) };
        Ok(())
    }

    /// Copies `data` into guest RAM at `pa`.
    pub fn write(&self, pa: u64, data: &[u8]) -> Result<(), RamError> {
        let p = self.check(pa, data.len())?;
        // SAFETY: checked range; every access is atomic.
        unsafe { copy_atomic(p, data.as_ptr().cast_mut(), data.len(), Dir::ToGuest) };
        Ok(())
    }

    /// Copies `len` bytes of guest RAM from `src` to `dst` (`H_PAGE_INIT`'s copy), both
    /// sides through atomics. Where both are word aligned the words go straight across, a
    /// cache line per trip; a copy through a private buffer moves each byte through the
    /// cache twice more. Overlapping ranges copy as a forward word loop does (`dst == src`
    /// rewrites the bytes unchanged).
    pub fn copy_within(&self, dst: u64, src: u64, len: usize) -> Result<(), RamError> {
        let d = self.check(dst, len)?;
        let s = self.check(src, len)?;
        if !(dst | src | len as u64).is_multiple_of(8) {
            // Unaligned: through a small buffer, a chunk at a time.
            let mut buf = [0u8; 256];
            let mut k = 0;
            while k < len {
                let n = (len - k).min(buf.len());
                // SAFETY: both ranges were checked; every guest access is atomic.
                unsafe {
                    copy_atomic(s.add(k), buf.as_mut_ptr(), n, Dir::FromGuest);
                    copy_atomic(d.add(k), buf.as_mut_ptr(), n, Dir::ToGuest);
                }
                k += n;
            }
            return Ok(());
        }
        // SAFETY: both ranges are inside the mapping (checked) and word aligned; every
        // access is an aligned atomic word.
        unsafe {
            let word = |k: usize| {
                let v = AtomicU64::from_ptr(s.add(k).cast()).load(Ordering::Relaxed);
                AtomicU64::from_ptr(d.add(k).cast()).store(v, Ordering::Relaxed);
            };
            let mut k = 0;
            while k + 64 <= len {
                for j in 0..8 {
                    word(k + 8 * j);
                }
                k += 64;
            }
            while k < len {
                word(k);
                k += 8;
            }
        }
        Ok(())
    }

    /// Sets `len` bytes at `pa` to `byte` (zeroing BSS, `H_ZERO_PAGE`).
    pub fn fill(&self, pa: u64, len: u64, byte: u8) -> Result<(), RamError> {
        let p = self.check(pa, len as usize)?;
        let word = u64::from_ne_bytes([byte; 8]);
        let mut k = 0usize;
        let len = len as usize;
        // SAFETY: `p..p+len` is inside the mapping (`check`); every store is an atomic of
        // its own size at an address aligned for it (bytes up to an 8-byte boundary, words).
        unsafe {
            while k < len && !(p as usize + k).is_multiple_of(8) {
                AtomicU8::from_ptr(p.add(k)).store(byte, Ordering::Relaxed);
                k += 1;
            }
            while k + 8 <= len {
                AtomicU64::from_ptr(p.add(k).cast()).store(word, Ordering::Relaxed);
                k += 8;
            }
            while k < len {
                AtomicU8::from_ptr(p.add(k)).store(byte, Ordering::Relaxed);
                k += 1;
            }
        }
        Ok(())
    }

    pub fn read_u32_be(&self, pa: u64) -> Result<u32, RamError> {
        let mut b = [0; 4];
        self.read(pa, &mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    pub fn read_u64_be(&self, pa: u64) -> Result<u64, RamError> {
        let mut b = [0; 8];
        self.read(pa, &mut b)?;
        Ok(u64::from_be_bytes(b))
    }

    pub fn read_u64_le(&self, pa: u64) -> Result<u64, RamError> {
        let mut b = [0; 8];
        self.read(pa, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write_u32_be(&self, pa: u64, v: u32) -> Result<(), RamError> {
        self.write(pa, &v.to_be_bytes())
    }

    pub fn write_u32_le(&self, pa: u64, v: u32) -> Result<(), RamError> {
        self.write(pa, &v.to_le_bytes())
    }

    pub fn write_u64_be(&self, pa: u64, v: u64) -> Result<(), RamError> {
        self.write(pa, &v.to_be_bytes())
    }
}

impl Drop for GuestRam {
    fn drop(&mut self) {
        // SAFETY: the mapping created in `new`; nothing can use it once `self` is gone.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.size as usize) };
    }
}

impl fmt::Debug for GuestRam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuestRam")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToGuest,
    FromGuest,
}

/// Copies `len` bytes between guest RAM at `g` and a private buffer at `h`, with atomic
/// accesses on the guest side: bytes at the unaligned ends, 8-byte words in between.
///
/// # Safety
/// `g..g+len` must be guest RAM and `h..h+len` a buffer the caller owns (writable for
/// `FromGuest`).
unsafe fn copy_atomic(g: *mut u8, h: *mut u8, len: usize, dir: Dir) {
    // SAFETY: both ranges are valid (the caller's promise); the guest side is reached only
    // through atomics at addresses aligned for them, the private side through unaligned
    // plain accesses no other thread makes.
    unsafe {
        let mut k = 0usize;
        let byte = |k: usize| match dir {
            Dir::ToGuest => AtomicU8::from_ptr(g.add(k)).store(*h.add(k), Ordering::Relaxed),
            Dir::FromGuest => *h.add(k) = AtomicU8::from_ptr(g.add(k)).load(Ordering::Relaxed),
        };
        while k < len && !(g as usize + k).is_multiple_of(8) {
            byte(k);
            k += 1;
        }
        let word = |k: usize| {
            let a = AtomicU64::from_ptr(g.add(k).cast());
            match dir {
                Dir::ToGuest => a.store(h.add(k).cast::<u64>().read_unaligned(), Ordering::Relaxed),
                Dir::FromGuest => h
                    .add(k)
                    .cast::<u64>()
                    .write_unaligned(a.load(Ordering::Relaxed)),
            }
        };
        // A cache line per trip: with one word per trip the loop's speed depended on where
        // the build happened to place it (a page copy took 1.65x as long in one build of
        // the same code as in another).
        while k + 64 <= len {
            for j in 0..8 {
                word(k + 8 * j);
            }
            k += 64;
        }
        while k + 8 <= len {
            word(k);
            k += 8;
        }
        while k < len {
            byte(k);
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked() {
        assert_eq!(GuestRam::new(0).unwrap_err(), RamError::BadSize(0));
        assert_eq!(
            GuestRam::new(0x1_1000).unwrap_err(),
            RamError::BadSize(0x1_1000)
        );
        let ram = GuestRam::new(1 << 20).unwrap();
        assert_eq!(ram.size(), 1 << 20);
    }

    #[test]
    fn fresh_ram_reads_zero_and_round_trips() {
        let ram = GuestRam::new(1 << 20).unwrap();
        let mut buf = [0xffu8; 37];
        ram.read(0x1_0003, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..100u8).collect();
        ram.write(0x2_0005, &data).unwrap();
        let mut back = vec![0u8; 100];
        ram.read(0x2_0005, &mut back).unwrap();
        assert_eq!(back, data);
        // Neighbours untouched.
        assert_eq!(ram.read_u32_be(0x2_0001).unwrap(), 0);
        assert_eq!(ram.read_u32_be(0x2_0005 + 100).unwrap(), 0);
    }

    /// Every start offset within a word and every length up to three cache lines: the
    /// copy's head bytes, whole lines, words and tail bytes land where they should and
    /// nowhere else.
    #[test]
    fn copies_of_any_offset_and_length_round_trip_and_stay_in_range() {
        let ram = GuestRam::new(1 << 20).unwrap();
        for off in 0..8u64 {
            for len in 0..200usize {
                let base = 0x1_0000 + off;
                ram.fill(0x1_0000 - 8, 256 + 16, 0xee).unwrap();
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                ram.write(base, &data).unwrap();
                let mut back = vec![0u8; len];
                ram.read(base, &mut back).unwrap();
                assert_eq!(back, data, "offset {off} length {len}");
                let mut around = [0u8; 8];
                ram.read(base - 8, &mut around).unwrap();
                assert_eq!(around, [0xee; 8], "before: offset {off} length {len}");
                ram.read(base + len as u64, &mut around).unwrap();
                assert_eq!(around, [0xee; 8], "after: offset {off} length {len}");
            }
        }
    }

    /// Aligned and unaligned copies within RAM land where they should and nowhere else,
    /// a copy onto itself leaves the bytes as they were, and a range outside RAM is an
    /// error that copies nothing.
    #[test]
    fn copies_within_ram_land_exactly_and_refuse_ranges_outside() {
        let ram = GuestRam::new(1 << 20).unwrap();
        let page: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 5) as u8).collect();
        for (dst, src, len) in [
            (0x3_0000, 0x1_0000, 4096),
            (0x3_0003, 0x1_0001, 999),
            (0x3_0008, 0x1_0000, 72),
        ] {
            ram.fill(0x3_0000 - 8, 4096 + 24, 0xee).unwrap();
            ram.write(0x1_0000, &page).unwrap();
            ram.copy_within(dst, src, len).unwrap();
            let mut back = vec![0u8; len];
            ram.read(dst, &mut back).unwrap();
            let from = (src - 0x1_0000) as usize;
            assert_eq!(back, page[from..from + len], "{dst:#x} <- {src:#x}, {len}");
            let mut around = [0u8; 8];
            ram.read(dst - 8, &mut around).unwrap();
            assert_eq!(around, [0xee; 8], "before {dst:#x}");
            ram.read(dst + len as u64, &mut around).unwrap();
            assert_eq!(around, [0xee; 8], "after {dst:#x} + {len}");
        }
        ram.copy_within(0x1_0000, 0x1_0000, 4096).unwrap();
        let mut back = vec![0u8; 4096];
        ram.read(0x1_0000, &mut back).unwrap();
        assert_eq!(back, page);
        assert!(ram.copy_within((1 << 20) - 4096, 0x1_0000, 4097).is_err());
        assert!(ram.copy_within(0x1_0000, (1 << 20) - 8, 16).is_err());
        ram.read(0x1_0000, &mut back).unwrap();
        assert_eq!(back, page, "a refused copy wrote nothing");
    }

    #[test]
    fn typed_helpers_use_the_named_byte_order() {
        let ram = GuestRam::new(1 << 16).unwrap();
        ram.write_u64_be(0x100, 0x0102_0304_0506_0708).unwrap();
        let mut b = [0u8; 8];
        ram.read(0x100, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ram.read_u64_le(0x100).unwrap(), 0x0807_0605_0403_0201);
        assert_eq!(ram.read_u32_be(0x104).unwrap(), 0x0506_0708);
        ram.write_u32_le(0x200, 0xaabb_ccdd).unwrap();
        assert_eq!(ram.read_u32_be(0x200).unwrap(), 0xddcc_bbaa);
    }

    #[test]
    fn out_of_range_is_an_error_not_a_panic() {
        let ram = GuestRam::new(1 << 16).unwrap();
        let mut b = [0u8; 8];
        assert!(ram.read((1 << 16) - 4, &mut b).is_err());
        assert!(ram.write(u64::MAX - 2, &b).is_err());
        assert!(ram.read_u64_be(1 << 16).is_err());
        assert!(ram.fill(0xfff0, 0x20, 0).is_err());
        assert_eq!(ram.host_ptr(1 << 16), None);
        assert!(ram.host_ptr((1 << 16) - 1).is_some());
        // A range ending exactly at the top is fine.
        ram.write((1 << 16) - 8, &b).unwrap();
    }

    #[test]
    fn host_pointer_sees_writes() {
        let ram = GuestRam::new(1 << 16).unwrap();
        ram.write(0x1234, &[0x5a]).unwrap();
        let p = ram.host_ptr(0x1234).unwrap();
        assert_eq!(
            // SAFETY: a byte of the mapping, which outlives the check.
            unsafe { AtomicU8::from_ptr(p).load(Ordering::Relaxed) },
            0x5a
        );
    }

    #[test]
    fn fill_covers_exactly_the_range() {
        let ram = GuestRam::new(1 << 16).unwrap();
        ram.fill(0x103, 29, 0xee).unwrap();
        let mut b = [0u8; 40];
        ram.read(0x100, &mut b).unwrap();
        for (k, &x) in b.iter().enumerate() {
            assert_eq!(x, if (3..32).contains(&k) { 0xee } else { 0 }, "byte {k}");
        }
    }
}
