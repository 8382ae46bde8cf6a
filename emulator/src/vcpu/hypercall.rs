//! What `sc 1` does in a system emulator: the rule the engine's run loop and the
//! interpreter's single step ([`Cpu::system_step`]) both apply.

use super::Cpu;
use crate::cpu::{Exception, msr};
use crate::papr::H_PRIVILEGE;

/// What a stint of system-mode guest code (`Engine::run_system`) stopped for.
#[derive(Debug)]
pub enum SystemExit {
    /// `sc 1` in supervisor state: the machine performs hypercall r3 with arguments r4..,
    /// puts the return code in r3 and outputs in r4.., then the guest continues (`pc` is
    /// already past the `sc`).
    Hypercall,
    /// An exception for the machine to deliver.
    Exception(Exception),
}

/// The hypercall rule of a system emulator, for an exception raised by guest code: `sc 1`
/// in supervisor state is a hypercall; from problem state it fails with H_PRIVILEGE in r3
/// without reaching the machine (as on QEMU) and the guest goes on (`None`); anything else
/// is for the machine to deliver.
pub fn hypercall_rule(cpu: &mut Cpu, e: Exception) -> Option<SystemExit> {
    match e {
        Exception::SystemCall { lev: 1 } if cpu.st.msr & msr::PR == 0 => {
            Some(SystemExit::Hypercall)
        }
        Exception::SystemCall { lev: 1 } => {
            cpu.st.gpr[3] = H_PRIVILEGE as u64;
            None
        }
        e => Some(SystemExit::Exception(e)),
    }
}
