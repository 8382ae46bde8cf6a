//! The reference semantics: one function per instruction, grouped by family, dispatched
//! through a table built from the ISA table by name (`for_each_insn!`). The functions act on
//! the vCPU ([`crate::vcpu::Cpu`]), which steps through them (`step`); every JIT tier is
//! tested against them and calls into them for instructions it does not translate.

mod branch;
mod fixed;
mod fp;
mod loadstore;
mod step;
mod system;
mod system_step;
#[cfg(test)]
mod table_effects;
mod vector;

pub(crate) use fixed::mask64;
pub(crate) use loadstore::CACHE_BLOCK;
pub use system::{MSR_IMPLEMENTED, events};
pub use system_step::StepOutcome;

use crate::cpu::{CpuState, Exception, ProgramKind};
use crate::isa::{Insn, OP_COUNT};
pub(crate) use crate::vcpu::Cpu;

/// Result of executing one instruction.
pub type Exec = Result<(), Exception>;

/// Semantics of one instruction.
pub type ExecFn = fn(&mut Cpu, Insn) -> Exec;

macro_rules! build_dispatch {
    ($(($op:ident, $func:ident, $mnemonic:literal)),* $(,)?) => {
        /// Interpreter entry for each `Op`, indexed by `op as usize`.
        pub static DISPATCH: [ExecFn; OP_COUNT] = {


            use branch::*;
            use fixed::*;
            use fp::*;
            use loadstore::*;
            use system::*;
            use vector::*;

            [illegal, $($func),*]
        };
    };
}
crate::isa::for_each_insn!(build_dispatch);

fn illegal(_: &mut Cpu, _: Insn) -> Exec {
    Err(Exception::Program(ProgramKind::Illegal))
}

/// Sets CR0 from a result as a recording (`.`) instruction does: LT/GT/EQ from the value as
/// a signed number of the current mode's width, SO copied from XER.
#[inline(always)]
pub(crate) fn record_cr0(st: &mut CpuState, v: u64) {
    let v = if st.sf() { v as i64 } else { v as i32 as i64 };
    let c = if v < 0 {
        8
    } else if v > 0 {
        4
    } else {
        2
    };
    st.set_crf(0, c | st.so as u32);
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;
    use crate::softmmu::FlatRam;

    /// A CPU over 1 MiB of flat RAM, little-endian, with FP/VMX/VSX enabled (user-mode MSR).
    pub fn cpu() -> Cpu {
        let mut c = Cpu::new(Box::new(FlatRam::new(1 << 20)));
        use crate::cpu::msr;
        c.st.msr = msr::SF | msr::LE | msr::PR | msr::FP | msr::VEC | msr::VSX | msr::EE;
        c
    }

    /// Runs `words` (placed at 0x1000) to the end, panicking on any exception.
    pub fn run(c: &mut Cpu, words: &[u32]) {
        let le = c.st.le();
        for (k, w) in words.iter().enumerate() {
            c.mmu
                .store(&c.st, 0x1000 + 4 * k as u64, 4, *w as u64, le)
                .unwrap();
        }
        c.st.pc = 0x1000;
        let end = 0x1000 + 4 * words.len() as u64;
        while c.st.pc != end {
            c.step()
                .unwrap_or_else(|e| panic!("exception {e:?} at {:#x}", c.st.pc));
        }
    }
}
