//! One step of a vCPU of the system emulator: run an instruction and turn what it raises into
//! the interrupt the guest takes. The multi-threaded exec loop is built on these pieces; tests
//! drive a single vCPU with them directly.

use super::Cpu;
use crate::cpu::interrupt::{self, Delivery, Interrupt, Pending};
use crate::engine::SystemExit;

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

    /// Executes one instruction and delivers whatever it raises (`sc 1`: the engine's
    /// [`crate::engine::hypercall_rule`]).
    pub fn system_step(&mut self) -> StepOutcome {
        match self.step() {
            Ok(()) => StepOutcome::Retired,
            Err(e) => match crate::engine::hypercall_rule(self, e) {
                None => StepOutcome::Retired,
                Some(SystemExit::Hypercall) => StepOutcome::Hypercall,
                Some(SystemExit::Exception(e)) => match self.deliver_interrupt(Interrupt::from(e)) {
                    Delivery::Taken { vector } => StepOutcome::Interrupt { vector },
                    Delivery::Checkstop => StepOutcome::Checkstop,
                },
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
