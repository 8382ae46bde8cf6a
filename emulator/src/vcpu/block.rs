//! Where a block ends: the one rule that the translating tiers (when they decode a block) and
//! the interpreter (when it runs one) both follow, so that a block interpreted while it is
//! cold covers exactly the instructions its translation will.

use super::Cpu;
use crate::cpu::Exception;
use crate::isa::{InsnFlags, Op, decode};
use crate::softmmu::PAGE_MASK;

/// Longest block, in instructions (bounds translation time and the latency of a kick).
pub const MAX_BLOCK_INSNS: usize = 64;

/// The block ends after an instruction of `op` that is its `len`-th, when the next
/// instruction would be at `next`: at a branch, at an instruction the ISA table marks
/// `ends_block` (it may change the MSR, the PC or the code), at an illegal word, at a page
/// end, or at `MAX_BLOCK_INSNS`.
#[inline]
pub fn ends_after(op: Op, len: usize, next: u64) -> bool {
    let f = op.info().flags;
    op == Op::Illegal
        || f.contains(InsnFlags::BRANCH)
        || f.contains(InsnFlags::ENDS_BLOCK)
        || len >= MAX_BLOCK_INSNS
        || next & !PAGE_MASK == 0
}

/// Guest code of one block, as fetched.
pub struct DecodedBlock {
    pub pc: u64,
    pub words: Vec<u32>,
}

impl DecodedBlock {
    /// Fetches the block at `pc` (the rule of [`ends_after`]; a fetch fault after the first
    /// word ends it too). A fault on the first word is the guest's instruction storage
    /// interrupt.
    pub fn fetch(cpu: &mut Cpu, pc: u64) -> Result<Self, Exception> {
        let mut words = Vec::new();
        let mut a = pc;
        loop {
            let w = match cpu.mmu.fetch(&cpu.st, a) {
                Ok(w) => w,
                Err(e) if words.is_empty() => return Err(e),
                Err(_) => break,
            };
            words.push(w);
            a = a.wrapping_add(4);
            if ends_after(decode(w), words.len(), a) {
                break;
            }
        }
        Ok(Self { pc, words })
    }

    /// One line per instruction (`PPC64EMU_LOG=jit`).
    pub fn describe(&self, flags: u64) -> String {
        let mut s = format!(
            "ppc64emu: jit block pc={:#x} msr-bits={flags:#x} ({} insns)",
            self.pc,
            self.words.len()
        );
        for (k, w) in self.words.iter().enumerate() {
            let pc = self.pc + 4 * k as u64;
            s.push_str(&format!(
                "\n  {pc:#018x}: {w:08x}  {}",
                crate::isa::disassemble(*w, pc)
            ));
        }
        s
    }
}
