//! Interrupt delivery for a POWER8 thread in a pseries partition (Book III-S ch. 6).
//!
//! The partition runs with MSR[HV] = 0 and LPCR[AIL] = 0 (H_SET_MODE refuses AIL), so every
//! interrupt goes to its real-mode vector with SRR0/SRR1. SRR0 is always `st.pc`: the
//! interpreter leaves `pc` at the faulting instruction for synchronous exceptions, past `sc`
//! for system calls, and at the next instruction to run when an asynchronous interrupt is
//! taken between instructions. SRR1 is the MSR with bits 33:36 and 42:47 replaced by the
//! interrupt's reason bits.
//!
//! Entering an interrupt is context synchronising: the caller performs a pending local TLB
//! flush (`engine::Cpu::deliver_interrupt` does).

use super::{CpuState, Exception, MachineCheckKind, NO_RESERVATION, ProgramKind, msr};

/// LPCR[ILE]: interrupts are taken in little-endian mode. A pseries guest sets it for the
/// whole partition with H_SET_MODE (resource 4).
pub const LPCR_ILE: u64 = 1 << (63 - 38);
/// LPCR[AIL]: alternate interrupt location (not supported: always 0 here).
pub const LPCR_AIL: u64 = 3 << (63 - 40);

/// MSR bits that are copied into SRR1 as reason bits rather than state (33:36, 42:47).
pub const SRR1_REASON_MASK: u64 = 0x0000_0000_783f_0000;

/// SRR1 reason bits of a program interrupt.
pub mod srr1 {
    pub const FP_ENABLED: u64 = 1 << (63 - 43);
    pub const ILLEGAL: u64 = 1 << (63 - 44);
    pub const PRIVILEGED: u64 = 1 << (63 - 45);
    pub const TRAP: u64 = 1 << (63 - 46);
}

/// SRR1 reason bits of a machine check from an access outside RAM (POWER8 codes), and the
/// DSISR bit of a load that causes one.
pub mod mce {
    /// Load: SRR1 bit 42 ("load/store, DAR/DSISR valid"), DSISR bit 57.
    pub const LOAD_SRR1: u64 = 1 << (63 - 42);
    pub const LOAD_DSISR: u32 = 1 << (63 - 57);
    /// Store: SRR1 bits 36, 42, 43, 45.
    pub const STORE_SRR1: u64 =
        (1 << (63 - 36)) | (1 << (63 - 42)) | (1 << (63 - 43)) | (1 << (63 - 45));
    /// Instruction fetch: SRR1 bits 36, 44, 45.
    pub const FETCH_SRR1: u64 = (1 << (63 - 36)) | (1 << (63 - 44)) | (1 << (63 - 45));
}

/// FSCR[IC]: the cause of the last facility unavailable interrupt (bits 0:7).
pub const FSCR_IC_SHIFT: u32 = 56;

/// An interrupt as the CPU takes it: every synchronous exception plus the asynchronous ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    SystemReset,
    MachineCheck {
        ea: u64,
        kind: MachineCheckKind,
    },
    Dsi {
        ea: u64,
        dsisr: u32,
    },
    DataSegment {
        ea: u64,
    },
    Isi {
        srr1: u64,
    },
    InstructionSegment,
    External,
    Alignment {
        ea: u64,
        dsisr: u32,
    },
    Program(ProgramKind),
    FpUnavailable,
    Decrementer,
    SystemCall,
    /// Trace (MSR[SE] single step, MSR[BE] branch trace) after the instruction at `siar`
    /// completed; SRR0 is the next instruction.
    Trace {
        siar: u64,
    },
    VecUnavailable,
    VsxUnavailable,
    FacilityUnavailable {
        cause: u8,
    },
}

impl Interrupt {
    /// Real-mode vector offset.
    pub fn vector(&self) -> u64 {
        match self {
            Interrupt::SystemReset => 0x100,
            Interrupt::MachineCheck { .. } => 0x200,
            Interrupt::Dsi { .. } => 0x300,
            Interrupt::DataSegment { .. } => 0x380,
            Interrupt::Isi { .. } => 0x400,
            Interrupt::InstructionSegment => 0x480,
            Interrupt::External => 0x500,
            Interrupt::Alignment { .. } => 0x600,
            Interrupt::Program(_) => 0x700,
            Interrupt::FpUnavailable => 0x800,
            Interrupt::Decrementer => 0x900,
            Interrupt::SystemCall => 0xc00,
            Interrupt::Trace { .. } => 0xd00,
            Interrupt::VecUnavailable => 0xf20,
            Interrupt::VsxUnavailable => 0xf40,
            Interrupt::FacilityUnavailable { .. } => 0xf60,
        }
    }
}

impl From<Exception> for Interrupt {
    /// The interrupt a synchronous exception causes. `sc 1` (a hypercall) never reaches the
    /// guest on this machine; converting it gives the system call interrupt `sc 1` would take
    /// without a hypervisor.
    fn from(e: Exception) -> Self {
        match e {
            Exception::Program(k) => Interrupt::Program(k),
            Exception::Dsi { ea, dsisr } => Interrupt::Dsi { ea, dsisr },
            Exception::DataSegment { ea } => Interrupt::DataSegment { ea },
            Exception::Isi { srr1, .. } => Interrupt::Isi { srr1 },
            Exception::InstructionSegment { .. } => Interrupt::InstructionSegment,
            Exception::Alignment { ea, dsisr } => Interrupt::Alignment { ea, dsisr },
            Exception::SystemCall { .. } => Interrupt::SystemCall,
            Exception::FpUnavailable => Interrupt::FpUnavailable,
            Exception::VecUnavailable => Interrupt::VecUnavailable,
            Exception::VsxUnavailable => Interrupt::VsxUnavailable,
            Exception::FacilityUnavailable { cause } => Interrupt::FacilityUnavailable { cause },
            Exception::MachineCheck { ea, kind } => Interrupt::MachineCheck { ea, kind },
        }
    }
}

/// What happened when an interrupt was delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The CPU now executes the handler at `vector`.
    Taken { vector: u64 },
    /// A machine check with MSR[ME] = 0: the thread stops (the machine reports a checkstop).
    /// The state is left as it was, for diagnosis.
    Checkstop,
}

/// Takes interrupt `irq` on `st`: SRR0/SRR1, DAR/DSISR/FSCR where the interrupt sets them,
/// the new MSR (SF = 1; HV and ME kept, ME cleared for a machine check with HV = 1; LE = LPCR[ILE]; all
/// else 0, so IR = DR = EE = PR = FP = VEC = VSX = FE0 = FE1 = RI = 0) and `pc` = vector.
/// The reservation of `l?arx` is lost.
pub fn deliver(st: &mut CpuState, irq: Interrupt) -> Delivery {
    let mut new_msr = msr::SF | (st.msr & (msr::HV | msr::ME));
    let mut reason = 0u64;
    match irq {
        Interrupt::MachineCheck { ea, kind } => {
            if st.msr & msr::ME == 0 {
                return Delivery::Checkstop;
            }
            // ME = 0 in the handler only with HV = 1: a partition cannot change ME (rfid and
            // mtmsrd keep it), so clearing it here would leave it off for good.
            if st.msr & msr::HV != 0 {
                new_msr &= !msr::ME;
            }
            match kind {
                MachineCheckKind::Load => {
                    st.dar = ea;
                    st.dsisr = mce::LOAD_DSISR as u64;
                    reason = mce::LOAD_SRR1;
                }
                MachineCheckKind::Store => {
                    st.dar = ea;
                    reason = mce::STORE_SRR1;
                }
                MachineCheckKind::Fetch => reason = mce::FETCH_SRR1,
            }
        }
        Interrupt::Dsi { ea, dsisr } | Interrupt::Alignment { ea, dsisr } => {
            st.dar = ea;
            st.dsisr = dsisr as u64;
        }
        Interrupt::DataSegment { ea } => st.dar = ea,
        Interrupt::Isi { srr1 } => reason = srr1 & SRR1_REASON_MASK,
        Interrupt::Program(k) => {
            reason = match k {
                ProgramKind::FpEnabled => srr1::FP_ENABLED,
                ProgramKind::Illegal => srr1::ILLEGAL,
                ProgramKind::Privileged => srr1::PRIVILEGED,
                ProgramKind::Trap => srr1::TRAP,
            }
        }
        // POWER8 records the traced instruction's address in SIAR; the SRR1 reason bits stay
        // 0 (as on QEMU).
        Interrupt::Trace { siar } => st.pmu[super::state::PMU_SIAR] = siar,
        Interrupt::FacilityUnavailable { cause } => {
            st.fscr = (st.fscr & !(0xff << FSCR_IC_SHIFT)) | ((cause as u64) << FSCR_IC_SHIFT);
        }
        Interrupt::SystemReset
        | Interrupt::InstructionSegment
        | Interrupt::External
        | Interrupt::FpUnavailable
        | Interrupt::Decrementer
        | Interrupt::SystemCall
        | Interrupt::VecUnavailable
        | Interrupt::VsxUnavailable => {}
    }
    if st.lpcr & LPCR_ILE != 0 {
        new_msr |= msr::LE;
    }
    st.srr0 = st.pc;
    st.srr1 = (st.msr & !SRR1_REASON_MASK) | reason;
    st.msr = new_msr;
    st.reserve_addr = NO_RESERVATION;
    let vector = irq.vector();
    st.pc = vector;
    Delivery::Taken { vector }
}

/// Sets or clears LPCR[ILE] (H_SET_MODE resource 4 applies this to every vCPU).
pub fn set_interrupt_little_endian(st: &mut CpuState, little: bool) {
    st.lpcr = if little {
        st.lpcr | LPCR_ILE
    } else {
        st.lpcr & !LPCR_ILE
    };
}

/// The highest-priority asynchronous interrupt the thread takes now, given which sources
/// are pending: system reset and machine check regardless of MSR[EE], then external before
/// decrementer, both only with MSR[EE] = 1.
pub fn next_async(st: &CpuState, pending: Pending) -> Option<Interrupt> {
    if pending.system_reset {
        return Some(Interrupt::SystemReset);
    }
    if st.msr & msr::EE == 0 {
        return None;
    }
    if pending.external {
        Some(Interrupt::External)
    } else if pending.decrementer {
        Some(Interrupt::Decrementer)
    } else {
        None
    }
}

/// Asynchronous interrupt sources a vCPU has pending (the exec loop keeps them; the
/// decrementer stays pending while DEC is negative, the external input while the XICS
/// presentation controller has an interrupt to present).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub system_reset: bool,
    pub external: bool,
    pub decrementer: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> CpuState {
        let mut st = CpuState::new();
        st.pc = 0x1234;
        st.msr = msr::SF
            | msr::EE
            | msr::PR
            | msr::FP
            | msr::ME
            | msr::IR
            | msr::DR
            | msr::RI
            | msr::LE
            | msr::VEC
            | msr::VSX;
        st
    }

    #[test]
    fn vectors() {
        let cases = [
            (Interrupt::SystemReset, 0x100),
            (Interrupt::Dsi { ea: 0, dsisr: 0 }, 0x300),
            (Interrupt::DataSegment { ea: 0 }, 0x380),
            (Interrupt::Isi { srr1: 0 }, 0x400),
            (Interrupt::InstructionSegment, 0x480),
            (Interrupt::External, 0x500),
            (Interrupt::Alignment { ea: 0, dsisr: 0 }, 0x600),
            (Interrupt::Program(ProgramKind::Trap), 0x700),
            (Interrupt::FpUnavailable, 0x800),
            (Interrupt::Decrementer, 0x900),
            (Interrupt::SystemCall, 0xc00),
            (Interrupt::VecUnavailable, 0xf20),
            (Interrupt::VsxUnavailable, 0xf40),
            (Interrupt::FacilityUnavailable { cause: 2 }, 0xf60),
        ];
        for (irq, v) in cases {
            let mut st = state();
            assert_eq!(deliver(&mut st, irq), Delivery::Taken { vector: v });
            assert_eq!(st.pc, v);
            assert_eq!(st.srr0, 0x1234);
        }
    }

    #[test]
    fn new_msr_and_srr1() {
        let mut st = state();
        st.msr |= 0x0000_0000_7800_0000; // stray bits in the reason field
        st.reserve_addr = 0x100;
        let old = st.msr;
        deliver(&mut st, Interrupt::Program(ProgramKind::Privileged));
        assert_eq!(st.msr, msr::SF | msr::ME);
        assert_eq!(st.srr1, (old & !SRR1_REASON_MASK) | srr1::PRIVILEGED);
        assert_eq!(st.reserve_addr, NO_RESERVATION);
        // LPCR[ILE] selects little-endian handlers; 32-bit code still enters in 64-bit mode.
        let mut st = state();
        st.msr &= !msr::SF;
        set_interrupt_little_endian(&mut st, true);
        deliver(&mut st, Interrupt::Decrementer);
        assert_eq!(st.msr, msr::SF | msr::ME | msr::LE);
        assert_eq!(st.srr1 & msr::SF, 0);
        set_interrupt_little_endian(&mut st, false);
        assert_eq!(st.lpcr & LPCR_ILE, 0);
    }

    #[test]
    fn program_reason_bits() {
        for (k, bit) in [
            (ProgramKind::FpEnabled, 0x0010_0000),
            (ProgramKind::Illegal, 0x0008_0000),
            (ProgramKind::Privileged, 0x0004_0000),
            (ProgramKind::Trap, 0x0002_0000),
        ] {
            let mut st = state();
            deliver(&mut st, Interrupt::Program(k));
            assert_eq!(st.srr1 & SRR1_REASON_MASK, bit, "{k:?}");
        }
    }

    #[test]
    fn storage_interrupt_registers() {
        let mut st = state();
        deliver(
            &mut st,
            Interrupt::Dsi {
                ea: 0xdead_0000,
                dsisr: 0x4200_0000,
            },
        );
        assert_eq!((st.dar, st.dsisr), (0xdead_0000, 0x4200_0000));
        let mut st = state();
        st.dsisr = 7;
        deliver(&mut st, Interrupt::DataSegment { ea: 0xbeef });
        assert_eq!((st.dar, st.dsisr), (0xbeef, 7));
        let mut st = state();
        deliver(
            &mut st,
            Interrupt::Isi {
                srr1: 0x4000_0000 | msr::EE,
            },
        );
        assert_eq!(st.srr1 & SRR1_REASON_MASK, 0x4000_0000);
        assert_eq!(st.srr1 & msr::EE, msr::EE, "EE comes from the old MSR only");
        let mut st = state();
        deliver(
            &mut st,
            Interrupt::Alignment {
                ea: 0x1001,
                dsisr: 0x0002_0000,
            },
        );
        assert_eq!((st.dar, st.dsisr), (0x1001, 0x0002_0000));
        let mut st = state();
        st.fscr = 0x0300_0000_0000_0007;
        deliver(&mut st, Interrupt::FacilityUnavailable { cause: 8 });
        assert_eq!(st.fscr, 0x0800_0000_0000_0007);
    }

    #[test]
    fn machine_check() {
        let mut st = state();
        let r = deliver(
            &mut st,
            Interrupt::MachineCheck {
                ea: 0x8000_0000,
                kind: MachineCheckKind::Load,
            },
        );
        assert_eq!(r, Delivery::Taken { vector: 0x200 });
        assert_eq!(st.msr, msr::SF | msr::ME, "a partition keeps ME");
        // With HV = 1, ME is cleared in the handler.
        let mut st = state();
        st.msr |= msr::HV;
        deliver(
            &mut st,
            Interrupt::MachineCheck {
                ea: 0x8000_0000,
                kind: MachineCheckKind::Load,
            },
        );
        assert_eq!(st.msr, msr::SF | msr::HV, "ME is cleared in the handler");
        assert_eq!(st.dar, 0x8000_0000);
        assert_eq!(st.srr1 & SRR1_REASON_MASK, 1 << 21);
        // A second one while ME = 0: checkstop, nothing changes.
        let before = st.clone();
        st.pc = 0x4444;
        let r = deliver(
            &mut st,
            Interrupt::MachineCheck {
                ea: 0,
                kind: MachineCheckKind::Fetch,
            },
        );
        assert_eq!(r, Delivery::Checkstop);
        assert_eq!(
            (st.srr0, st.srr1, st.msr, st.pc),
            (before.srr0, before.srr1, before.msr, 0x4444)
        );
    }

    #[test]
    fn async_priorities_and_ee() {
        let mut st = state();
        let all = Pending {
            system_reset: true,
            external: true,
            decrementer: true,
        };
        assert_eq!(next_async(&st, all), Some(Interrupt::SystemReset));
        let ext_dec = Pending {
            external: true,
            decrementer: true,
            ..Pending::default()
        };
        assert_eq!(next_async(&st, ext_dec), Some(Interrupt::External));
        assert_eq!(
            next_async(
                &st,
                Pending {
                    decrementer: true,
                    ..Pending::default()
                }
            ),
            Some(Interrupt::Decrementer)
        );
        assert_eq!(next_async(&st, Pending::default()), None);
        st.msr &= !msr::EE;
        assert_eq!(next_async(&st, ext_dec), None);
        assert_eq!(next_async(&st, all), Some(Interrupt::SystemReset));
    }
}
