//! What the pseries devices ask of the rest of the machine.
//!
//! The device models (hcalls, RTAS, XICS, console) are plain single-threaded state machines
//! that the machine runs under the BQL. Everything they cannot do by themselves — touching
//! another vCPU, stopping the machine, flushing TLBs — goes through [`MachineEffects`], so the
//! models are unit-testable with a recorder and the machine decides how each effect is carried
//! out under its locking strategy. Guest physical memory is reached through [`PhysMemory`].

use crate::mmu::hpt::Invalidated;
use std::sync::Arc;
use std::time::Duration;

/// Requests from the devices to the machine. `cpu` is always a vCPU index (0..N), never a
/// server number.
pub trait MachineEffects {
    /// Sets the level of vCPU `cpu`'s external interrupt line (XICS presentation output).
    /// Level-sensitive: the line stays asserted until the devices lower it, so delivering the
    /// 0x500 interrupt must not clear it. Called only when the level changes.
    fn set_external_irq(&mut self, cpu: usize, asserted: bool);

    /// H_PROD: wake `cpu` if it is ceded. The devices already recorded the prod
    /// ([`super::PseriesDevices::take_prod`]), so a vCPU that cedes later returns at once.
    fn prod(&mut self, cpu: usize);

    /// RTAS start-cpu: start the stopped vCPU `cpu` at `entry` with r3 = `r3`, MSR = SF|ME and
    /// the partition's LPCR (ILE as last set by H_SET_MODE). Raises no interrupt.
    /// Errors if `cpu` is not stopped.
    fn start_cpu(&mut self, cpu: usize, entry: u64, r3: u64) -> Result<(), NotStopped>;

    /// H_SIGNAL_SYS_RESET: a system reset interrupt (0x100) on `cpu` at its next instruction
    /// boundary (not maskable by MSR[EE]; a ceded vCPU wakes for it).
    fn system_reset(&mut self, cpu: usize);

    /// RTAS stop-self: `cpu` (the caller) stops; only start-cpu restarts it.
    fn stop_self(&mut self, cpu: usize);

    /// Whether `cpu` is stopped (never started, or stopped itself). A ceded vCPU is not.
    fn is_stopped(&self, cpu: usize) -> bool;

    /// RTAS power-off: the machine stops and the emulator exits with status 0.
    fn power_off(&mut self);

    /// RTAS system-reboot: the machine resets (or exits with 0 under `-no-reboot`).
    fn reboot(&mut self);

    /// RTAS ibm,os-term: the guest gave up with `message`; the emulator exits non-zero.
    fn os_term(&mut self, message: String);

    /// Flush every other vCPU's whole TLB, and the caller's entries for the pages of `own`:
    /// an HPT hcall invalidated translations (docs/locking.md).
    fn flush_all_tlbs(&mut self, own: Invalidated);

    /// H_SET_MODE(LE): set or clear `LPCR[ILE]` on every vCPU, and for vCPUs started later.
    fn set_interrupt_little_endian(&mut self, le: bool);

    /// Bytes for the hvterm console (H_PUT_TERM_CHAR, display-character).
    fn console_write(&mut self, bytes: &[u8]);

    /// Host wall-clock time since the Unix epoch (RTAS get-time-of-day).
    fn wall_time(&self) -> Duration;
}

/// start-cpu was asked to start a vCPU that is running (or ceded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotStopped;

/// An access outside guest RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange {
    pub pa: u64,
    pub len: usize,
}

/// Guest physical memory as the hypervisor sees it: byte ranges at real addresses.
/// Shared `&self` for writes too, because guest RAM is shared by all vCPU threads.
pub trait PhysMemory {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange>;
    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange>;

    /// Copies `len` bytes from `src` to `dst` within guest memory (through a buffer unless
    /// the memory can do better).
    fn copy(&self, dst: u64, src: u64, len: usize) -> Result<(), OutOfRange> {
        let mut buf = vec![0; len];
        self.read(src, &mut buf)?;
        self.write(dst, &buf)
    }

    /// Sets `len` bytes at `pa` to `byte`.
    fn fill(&self, pa: u64, len: usize, byte: u8) -> Result<(), OutOfRange> {
        self.write(pa, &vec![byte; len])
    }

    fn read_u32_be(&self, pa: u64) -> Result<u32, OutOfRange> {
        let mut b = [0; 4];
        self.read(pa, &mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    fn write_u32_be(&self, pa: u64, v: u32) -> Result<(), OutOfRange> {
        self.write(pa, &v.to_be_bytes())
    }
}

impl PhysMemory for crate::softmmu::GuestRam {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        crate::softmmu::GuestRam::read(self, pa, buf).map_err(|_| OutOfRange { pa, len: buf.len() })
    }

    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange> {
        crate::softmmu::GuestRam::write(self, pa, data).map_err(|_| OutOfRange {
            pa,
            len: data.len(),
        })
    }

    fn copy(&self, dst: u64, src: u64, len: usize) -> Result<(), OutOfRange> {
        self.copy_within(dst, src, len).map_err(|_| {
            let pa = if self.contains(dst, len as u64) {
                src
            } else {
                dst
            };
            OutOfRange { pa, len }
        })
    }

    fn fill(&self, pa: u64, len: usize, byte: u8) -> Result<(), OutOfRange> {
        crate::softmmu::GuestRam::fill(self, pa, len as u64, byte)
            .map_err(|_| OutOfRange { pa, len })
    }
}

/// Guest memory as the machine (hypercalls, RTAS, the VPA) writes it: with a JIT, each write
/// drops the translations of the bytes it overwrites, as a guest store to translated code
/// does. Built once per machine (`Shared::phys`), so every machine write goes through it.
pub struct CodeWatch<M> {
    pub mem: M,
    /// The machine's code cache; `None` when the vCPUs interpret.
    pub jit: Option<Arc<crate::jit::JitShared>>,
}

impl<M: PhysMemory> PhysMemory for CodeWatch<M> {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        self.mem.read(pa, buf)
    }

    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange> {
        self.mem.write(pa, data)?;
        self.written(pa, data.len());
        Ok(())
    }

    fn copy(&self, dst: u64, src: u64, len: usize) -> Result<(), OutOfRange> {
        self.mem.copy(dst, src, len)?;
        self.written(dst, len);
        Ok(())
    }

    fn fill(&self, pa: u64, len: usize, byte: u8) -> Result<(), OutOfRange> {
        self.mem.fill(pa, len, byte)?;
        self.written(pa, len);
        Ok(())
    }
}

impl<M> CodeWatch<M> {
    /// The machine wrote `len` bytes at `pa`: translations of them go.
    fn written(&self, pa: u64, len: usize) {
        let Some(jit) = &self.jit else { return };
        // Ranges may cross pages; `code_written` works per page.
        let (mut a, end) = (pa, pa + len as u64);
        while a < end {
            let next = ((a >> 12) + 1) << 12;
            jit.code_written(a, (next.min(end) - a) as usize);
            a = next;
        }
    }
}

/// Shared guest memory (the machine's RAM handle is an `Arc<GuestRam>`).
impl<T: PhysMemory + ?Sized> PhysMemory for Arc<T> {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        (**self).read(pa, buf)
    }

    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange> {
        (**self).write(pa, data)
    }

    fn copy(&self, dst: u64, src: u64, len: usize) -> Result<(), OutOfRange> {
        (**self).copy(dst, src, len)
    }

    fn fill(&self, pa: u64, len: usize, byte: u8) -> Result<(), OutOfRange> {
        (**self).fill(pa, len, byte)
    }
}

/// Guest memory held in a plain buffer: tests, and tools that prepare an image.
#[derive(Debug, Default)]
pub struct VecMemory {
    bytes: std::cell::RefCell<Vec<u8>>,
}

impl VecMemory {
    pub fn new(size: usize) -> Self {
        Self {
            bytes: std::cell::RefCell::new(vec![0; size]),
        }
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.bytes.into_inner()
    }

    fn range(&self, pa: u64, len: usize) -> Result<std::ops::Range<usize>, OutOfRange> {
        let size = self.bytes.borrow().len() as u64;
        match pa.checked_add(len as u64) {
            Some(end) if end <= size => Ok(pa as usize..end as usize),
            _ => Err(OutOfRange { pa, len }),
        }
    }
}

impl PhysMemory for VecMemory {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        let r = self.range(pa, buf.len())?;
        buf.copy_from_slice(&self.bytes.borrow()[r]);
        Ok(())
    }

    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange> {
        let r = self.range(pa, data.len())?;
        self.bytes.borrow_mut()[r].copy_from_slice(data);
        Ok(())
    }
}

/// One recorded effect (see [`Recorder`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    ExternalIrq { cpu: usize, asserted: bool },
    Prod(usize),
    StartCpu { cpu: usize, entry: u64, r3: u64 },
    StopSelf(usize),
    SystemReset(usize),
    PowerOff,
    Reboot,
    OsTerm(String),
    FlushAllTlbs(Invalidated),
    InterruptLittleEndian(bool),
}

/// A [`MachineEffects`] that records every request and keeps a model of which vCPUs are
/// stopped and what each line's level is: for unit tests of the devices and for tools.
#[derive(Debug)]
pub struct Recorder {
    pub effects: Vec<Effect>,
    pub console: Vec<u8>,
    pub stopped: Vec<bool>,
    pub irq_lines: Vec<bool>,
    pub now: Duration,
}

impl Recorder {
    /// `ncpus` vCPUs; vCPU 0 running, the others stopped (the boot state).
    pub fn new(ncpus: usize) -> Self {
        Self {
            effects: Vec::new(),
            console: Vec::new(),
            stopped: (0..ncpus).map(|i| i != 0).collect(),
            irq_lines: vec![false; ncpus],
            now: Duration::from_secs(0),
        }
    }

    /// The recorded effects since the last call.
    pub fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}

impl MachineEffects for Recorder {
    fn set_external_irq(&mut self, cpu: usize, asserted: bool) {
        self.irq_lines[cpu] = asserted;
        self.effects.push(Effect::ExternalIrq { cpu, asserted });
    }

    fn prod(&mut self, cpu: usize) {
        self.effects.push(Effect::Prod(cpu));
    }

    fn start_cpu(&mut self, cpu: usize, entry: u64, r3: u64) -> Result<(), NotStopped> {
        if !self.stopped[cpu] {
            return Err(NotStopped);
        }
        self.stopped[cpu] = false;
        self.effects.push(Effect::StartCpu { cpu, entry, r3 });
        Ok(())
    }

    fn system_reset(&mut self, cpu: usize) {
        self.effects.push(Effect::SystemReset(cpu));
    }

    fn stop_self(&mut self, cpu: usize) {
        self.stopped[cpu] = true;
        self.effects.push(Effect::StopSelf(cpu));
    }

    fn is_stopped(&self, cpu: usize) -> bool {
        self.stopped[cpu]
    }

    fn power_off(&mut self) {
        self.effects.push(Effect::PowerOff);
    }

    fn reboot(&mut self) {
        self.effects.push(Effect::Reboot);
    }

    fn os_term(&mut self, message: String) {
        self.effects.push(Effect::OsTerm(message));
    }

    fn flush_all_tlbs(&mut self, own: Invalidated) {
        self.effects.push(Effect::FlushAllTlbs(own));
    }

    fn set_interrupt_little_endian(&mut self, le: bool) {
        self.effects.push(Effect::InterruptLittleEndian(le));
    }

    fn console_write(&mut self, bytes: &[u8]) {
        self.console.extend_from_slice(bytes);
    }

    fn wall_time(&self) -> Duration {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn machine_writes_reach_the_jit_page_by_page() {
        let jit = crate::jit::JitShared::new();
        jit.mark_code_page(0x3000);
        let mem = CodeWatch {
            mem: VecMemory::new(0x10000),
            jit: Some(jit.clone()),
        };
        let writes = || jit.stats.code_writes.load(Ordering::Relaxed);
        mem.write(0x5000, &[1; 16]).unwrap();
        assert_eq!(writes(), 0, "a page without code");
        // Starts on a plain page and ends on the code page.
        mem.write(0x2ff0, &[7; 0x20]).unwrap();
        assert_eq!(writes(), 1);
        let mut back = [0; 0x20];
        mem.read(0x2ff0, &mut back).unwrap();
        assert_eq!(back, [7; 0x20]);
        assert!(
            mem.write(0xfff0, &[0; 0x20]).is_err(),
            "out of range is refused, not watched"
        );
        assert_eq!(writes(), 1);
    }
}
