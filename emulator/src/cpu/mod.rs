//! Architected CPU state and the exceptions instructions can raise.

mod exception;
pub mod interrupt;
pub mod spr;
mod state;

pub use exception::{Exception, MachineCheckKind, ProgramKind};
pub use state::{
    CR_PACK, CR_SPREAD, CpuState, NO_RESERVATION, SLB_SIZE, SLB_VALID, SlbEntry, XER_RESERVED, msr,
};
