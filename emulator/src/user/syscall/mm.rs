//! Memory management: the program break and the `mmap` family, on the process's mappings.
//! Whatever removes or downgrades a mapping flushes the vCPU's TLB before the guest runs on.

use super::host;
use super::{Process, Stop, SysResult, errno::*, nr};
use crate::engine::Cpu;
use crate::softmmu::PAGE_MASK;
use crate::user::loader::MMAP_TOP;
use crate::user::mem::{MMAP_MIN, PROT_EXEC, PROT_READ, PROT_WRITE, page_up};

const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const MREMAP_MAYMOVE: u64 = 1;
const MADV_DONTNEED: u64 = 4;

/// The calls of this area; `None` for other numbers.
pub(super) fn call(p: &mut Process, cpu: &mut Cpu, n: u64, a: [u64; 6]) -> Option<SysResult> {
    Some(match n {
        nr::BRK => Ok(p.do_brk(cpu, a[0])),
        nr::MMAP => p.mmap(cpu, a),
        nr::MUNMAP => p.munmap(cpu, a[0], a[1]),
        nr::MPROTECT => p.mprotect(cpu, a[0], a[1], a[2]),
        nr::MREMAP => p.mremap(cpu, a),
        nr::MADVISE => p.madvise(cpu, a[0], a[1], a[2]),
        nr::MSYNC | nr::MINCORE => Ok(0),
        _ => return None,
    })
}

impl Process {
    fn do_brk(&mut self, cpu: &mut Cpu, want: u64) -> u64 {
        if want < self.brk_start {
            return self.brk;
        }
        let (old_top, new_top) = (page_up(self.brk), page_up(want));
        let mut mem = self.mem.lock();
        if new_top > old_top {
            if new_top > MMAP_TOP || mem.any_mapped(old_top, new_top) {
                return self.brk;
            }
            mem.map(old_top, new_top, PROT_READ | PROT_WRITE);
        } else if new_top < old_top {
            mem.unmap(new_top, old_top);
            cpu.mmu.tlb.flush_all();
        }
        self.brk = want;
        want
    }

    fn mmap(&mut self, cpu: &mut Cpu, a: [u64; 6]) -> SysResult {
        let (addr, len, prot, flags, fd, off) =
            (a[0], a[1], guest_prot(a[2]), a[3], a[4] as i32, a[5]);
        if len == 0 || off & !PAGE_MASK != 0 || !matches!(flags & 3, MAP_SHARED | MAP_PRIVATE | 3) {
            return Err(Stop::Errno(EINVAL));
        }
        let len = page_up(len);
        if len == 0 || len > MMAP_TOP {
            return Err(Stop::Errno(ENOMEM));
        }
        let mut mem = self.mem.lock();
        let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
            if addr & !PAGE_MASK != 0
                || addr
                    .checked_add(len)
                    .is_none_or(|e| e > MMAP_TOP.max(crate::user::loader::STACK_TOP))
            {
                return Err(Stop::Errno(EINVAL));
            }
            if flags & MAP_FIXED_NOREPLACE != 0
                && flags & MAP_FIXED == 0
                && mem.any_mapped(addr, addr + len)
            {
                return Err(Stop::Errno(EEXIST));
            }
            addr
        } else {
            let hint = addr & PAGE_MASK;
            if hint >= MMAP_MIN
                && hint.checked_add(len).is_some_and(|e| e <= MMAP_TOP)
                && !mem.any_mapped(hint, hint + len)
            {
                hint
            } else {
                mem.find_free(len, MMAP_MIN, MMAP_TOP)
                    .ok_or(Stop::Errno(ENOMEM))?
            }
        };
        let mut contents = Vec::new();
        if flags & MAP_ANONYMOUS == 0 {
            // File mapping: a private copy of the file's bytes (writes are not written back).
            contents = vec![0u8; len as usize];
            let mut got = 0usize;
            while got < contents.len() {
                let r = host::read(fd, &mut contents[got..], Some((off + got as u64) as i64))?;
                if r == 0 {
                    break;
                }
                got += r as usize;
            }
            contents.truncate(got);
        }
        mem.map(start, start + len, prot);
        mem.poke(start, &contents).expect("just mapped");
        drop(mem);
        cpu.mmu.tlb.flush_all();
        Ok(start)
    }

    fn munmap(&mut self, cpu: &mut Cpu, addr: u64, len: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || len == 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        self.mem.lock().unmap(addr, page_up(addr + len));
        cpu.mmu.tlb.flush_all();
        Ok(0)
    }

    fn mprotect(&mut self, cpu: &mut Cpu, addr: u64, len: u64, prot: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        if len == 0 {
            return Ok(0);
        }
        if !self
            .mem
            .lock()
            .protect(addr, page_up(addr + len), guest_prot(prot))
        {
            return Err(Stop::Errno(ENOMEM));
        }
        cpu.mmu.tlb.flush_all();
        Ok(0)
    }

    fn mremap(&mut self, cpu: &mut Cpu, a: [u64; 6]) -> SysResult {
        let (old, old_len, new_len, flags) = (a[0], page_up(a[1]), page_up(a[2]), a[3]);
        if old & !PAGE_MASK != 0 || new_len == 0 || flags & !MREMAP_MAYMOVE != 0 {
            return Err(Stop::Errno(EINVAL));
        }
        let mut mem = self.mem.lock();
        let Some((vstart, vend, _)) = mem.vma_at(old) else {
            return Err(Stop::Errno(EFAULT));
        };
        if old.checked_add(old_len).is_none_or(|e| e > vend) {
            return Err(Stop::Errno(EFAULT));
        }
        let r = if new_len <= old_len {
            mem.unmap(old + new_len, old + old_len);
            old
        } else if vend == old + old_len
            && old + new_len <= MMAP_TOP
            && !mem.any_mapped(vend, old + new_len)
        {
            mem.set_end(vstart, old + new_len);
            old
        } else if flags & MREMAP_MAYMOVE != 0 {
            let new = mem
                .find_free(new_len, MMAP_MIN, MMAP_TOP)
                .ok_or(Stop::Errno(ENOMEM))?;
            mem.relocate(old, old_len, new);
            mem.set_end(new, new + new_len);
            new
        } else {
            return Err(Stop::Errno(ENOMEM));
        };
        drop(mem);
        cpu.mmu.tlb.flush_all();
        Ok(r)
    }

    fn madvise(&mut self, cpu: &mut Cpu, addr: u64, len: u64, advice: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        if advice == MADV_DONTNEED {
            self.mem.lock().discard(addr, page_up(addr + len));
            cpu.mmu.tlb.flush_all();
        }
        Ok(0)
    }
}

/// PROT_* from the guest: write or execute imply read (as with the hash MMU).
fn guest_prot(p: u64) -> u32 {
    let mut prot = (p & 7) as u32;
    if prot & (PROT_WRITE | PROT_EXEC) != 0 {
        prot |= PROT_READ;
    }
    prot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prot_implications() {
        assert_eq!(guest_prot(2), PROT_READ | PROT_WRITE);
        assert_eq!(guest_prot(4), PROT_READ | PROT_EXEC);
        assert_eq!(guest_prot(0), 0);
    }
}
