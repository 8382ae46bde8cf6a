//! A flat RAM address space: effective address = offset into one host buffer. Used by tests
//! and by single-program benches where no MMU is involved.

use super::{Access, AddressSpace, PAGE_MASK, PageMapping};
use crate::cpu::{CpuState, Exception};

pub struct FlatRam {
    mem: Box<[u8]>,
}

// SAFETY: the buffer is owned; it is only reached through the TLB's raw pointers by the
// vCPU that owns this address space, which moves with it.
unsafe impl Send for FlatRam {}

impl FlatRam {
    pub fn new(size: usize) -> Self {
        Self {
            mem: vec![0u8; size].into_boxed_slice(),
        }
    }
}

impl AddressSpace for FlatRam {
    fn translate(
        &mut self,
        _st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        let page = ea & PAGE_MASK;
        if page >= self.mem.len() as u64 {
            return Err(match access {
                Access::Exec => Exception::Isi {
                    ea,
                    srr1: 0x4000_0000,
                },
                Access::Read => Exception::Dsi {
                    ea,
                    dsisr: 0x4000_0000,
                },
                Access::Write => Exception::Dsi {
                    ea,
                    dsisr: 0x4200_0000,
                },
            });
        }
        Ok(PageMapping {
            // SAFETY: `page` is a page inside the buffer (checked above).
            host: unsafe { self.mem.as_mut_ptr().add(page as usize) },
            pa: page,
            read: true,
            write: true,
            exec: true,
            watch_writes: false,
        })
    }
}
