//! What an instruction can raise instead of completing. The interpreter and JIT return these;
//! the user-mode runner turns them into signals, the system exec loop into interrupts.

/// Reasons for a program interrupt (SRR1 bits 43-46 in system mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramKind {
    /// Illegal or reserved instruction (also ISA 3.0 instructions on this POWER8).
    Illegal,
    /// Privileged instruction executed in problem state (or hypervisor-only in a partition).
    Privileged,
    /// A trap instruction's condition was met.
    Trap,
    /// An enabled floating-point exception.
    FpEnabled,
}

/// The access that found no memory behind a physical address (machine check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineCheckKind {
    Load,
    Store,
    Fetch,
}

/// A synchronous exception raised by an instruction. The instruction has no side effects
/// when it raises one, except `SystemCall` (which completes: the return address is the next
/// instruction) and `Program(FpEnabled)` (the FPSCR, and for enabled overflow, underflow and
/// inexact exceptions the target register, are updated first, as the ISA specifies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    Program(ProgramKind),
    /// Data storage interrupt: effective address and DSISR.
    Dsi {
        ea: u64,
        dsisr: u32,
    },
    /// Data segment interrupt (no SLB entry).
    DataSegment {
        ea: u64,
    },
    /// Instruction storage interrupt: address and the SRR1 reason bits.
    Isi {
        ea: u64,
        srr1: u64,
    },
    /// Instruction segment interrupt.
    InstructionSegment {
        ea: u64,
    },
    /// Alignment interrupt (e.g. `lq`/`larx` on a misaligned address, `dcbz` on cache-inhibited).
    Alignment {
        ea: u64,
        dsisr: u32,
    },
    /// `sc LEV`; LEV 1 is a hypercall.
    SystemCall {
        lev: u8,
    },
    FpUnavailable,
    VecUnavailable,
    VsxUnavailable,
    /// Facility unavailable (FSCR-controlled facilities: TAR, EBB, DSCR, …); the cause code.
    FacilityUnavailable {
        cause: u8,
    },
    /// Machine check: the access at `ea` reached a physical address with no memory behind it.
    MachineCheck {
        ea: u64,
        kind: MachineCheckKind,
    },
}
