//! One step of a vCPU of the system emulator: run an instruction and turn what it raises into
//! the interrupt the guest takes. The multi-threaded exec loop is built on these pieces; tests
//! drive a single vCPU with them directly.

use super::Cpu;
use crate::cpu::interrupt::{self, Delivery, Interrupt, Pending};
use crate::cpu::{Exception, msr};
use crate::isa::{InsnFlags, Op, decode};
use crate::vcpu::{SystemExit, hypercall_rule};

/// What one [`Cpu::system_step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// The instruction completed.
    Retired,
    /// The instruction raised an exception; the guest now runs the handler at `vector`.
    Interrupt { vector: u64 },
    /// `sc 1` in supervisor state: the machine performs hypercall r3 with arguments r4.., puts
    /// the return code in r3 and outputs in r4.., then the guest continues (`pc` is already
    /// past the `sc`).
    Hypercall,
    /// A machine check with MSR[ME] = 0: the vCPU stops and the machine reports a checkstop.
    Checkstop,
}

impl Cpu {
    /// Takes `irq` (context synchronising: a pending local TLB flush happens now).
    pub fn deliver_interrupt(&mut self, irq: Interrupt) -> Delivery {
        let d = interrupt::deliver(&mut self.st, irq);
        if matches!(d, Delivery::Taken { .. }) {
            self.context_synchronize();
        }
        d
    }

    /// [`Cpu::step`], then the trace interrupt MSR[SE] or MSR[BE] asks for (Book III-S
    /// 6.5.15): after an instruction that completed (not one that raised an interrupt, nor
    /// `rfid`, which sets the MSR it returns to), with SE; after a branch, taken or not, with
    /// BE. SRR0 is the next instruction, SIAR the traced one. Returns the trace vector when
    /// one was taken (and counts it in `counters.trace_interrupts`). The engine runs only
    /// this while SE or BE is set.
    pub fn step_traced(&mut self) -> Result<Option<u64>, Exception> {
        let m = self.st.msr;
        if m & (msr::SE | msr::BE) == 0 {
            return self.step().map(|()| None);
        }
        let pc = self.st.pc;
        let op = self
            .mmu
            .fetch(&self.st, pc)
            .map(decode)
            .unwrap_or(Op::Illegal);
        self.step()?;
        let single_step = m & msr::SE != 0 && !matches!(op, Op::Rfid | Op::Hrfid);
        let branch = m & msr::BE != 0 && op.info().flags.contains(InsnFlags::BRANCH);
        if !(single_step || branch) {
            return Ok(None);
        }
        match self.deliver_interrupt(Interrupt::Trace { siar: pc }) {
            Delivery::Taken { vector } => {
                self.counters.trace_interrupts += 1;
                Ok(Some(vector))
            }
            Delivery::Checkstop => Ok(None),
        }
    }

    /// Executes one instruction and delivers whatever it raises, a trace interrupt included
    /// (`sc 1`: [`hypercall_rule`]).
    pub fn system_step(&mut self) -> StepOutcome {
        match self.step_traced() {
            Ok(Some(vector)) => StepOutcome::Interrupt { vector },
            Ok(None) => StepOutcome::Retired,
            Err(e) => match hypercall_rule(self, e) {
                None => StepOutcome::Retired,
                Some(SystemExit::Hypercall) => StepOutcome::Hypercall,
                Some(SystemExit::Exception(e)) => {
                    match self.deliver_interrupt(Interrupt::from(e)) {
                        Delivery::Taken { vector } => StepOutcome::Interrupt { vector },
                        Delivery::Checkstop => StepOutcome::Checkstop,
                    }
                }
            },
        }
    }

    /// Takes the most important of the `pending` asynchronous interrupts that the MSR lets in
    /// now (between two instructions); its vector, or `None`.
    pub fn take_async(&mut self, pending: Pending) -> Option<u64> {
        let irq = interrupt::next_async(&self.st, pending)?;
        match self.deliver_interrupt(irq) {
            Delivery::Taken { vector } => Some(vector),
            Delivery::Checkstop => None,
        }
    }

    /// DEC is negative: the decrementer interrupt is pending (POWER8 keeps it pending, level
    /// style, until DEC is written with a non-negative value).
    pub fn decrementer_pending(&self) -> bool {
        self.dec() & 0x8000_0000 != 0
    }
}
