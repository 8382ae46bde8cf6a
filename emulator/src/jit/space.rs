//! The address-space wrapper that makes stores to translated code visible to the JIT.

use super::JitShared;
use crate::cpu::{CpuState, Exception};
use crate::softmmu::{Access, AddressSpace, PageMapping};
use std::sync::Arc;

/// Forwards to the vCPU's own address space; maps pages holding translated code with
/// `watch_writes` and drops their blocks when they are written.
pub struct JitSpace {
    pub inner: Box<dyn AddressSpace>,
    pub shared: Arc<JitShared>,
}

impl AddressSpace for JitSpace {
    fn translate(
        &mut self,
        st: &CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        let mut m = self.inner.translate(st, ea, access)?;
        if !m.host.is_null() && self.shared.is_code_page(m.pa) {
            m.watch_writes = true;
        }
        Ok(m)
    }

    fn mmio_read(&mut self, st: &CpuState, pa: u64, size: usize) -> Result<u64, Exception> {
        self.inner.mmio_read(st, pa, size)
    }

    fn mmio_write(
        &mut self,
        st: &CpuState,
        pa: u64,
        size: usize,
        val: u64,
    ) -> Result<(), Exception> {
        self.inner.mmio_write(st, pa, size, val)
    }

    fn code_written(&mut self, pa: u64, len: usize) {
        self.inner.code_written(pa, len);
        self.shared.code_written(pa, len);
    }
}
