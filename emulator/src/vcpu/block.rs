//! Where a block ends: the one rule that the translating tiers (when they decode a block) and
//! the interpreter (when it runs one) both follow, so that a block interpreted while it is
//! cold covers exactly the instructions its translation will.

use super::Cpu;
use crate::cpu::Exception;
use crate::isa::{Insn, InsnFlags, Op, decode};
use crate::softmmu::PAGE_MASK;

/// Longest block, in instructions (bounds translation time and the latency of a kick).
pub const MAX_BLOCK_INSNS: usize = 64;

/// The block ends after the instruction `word` (of `op`) that is its `len`-th, when the next
/// instruction would be at `next`: at a branch other than a side exit ([`side_exit`]) or a
/// jump ahead within the block's reach ([`forward_jump`]), at an instruction the ISA table
/// marks `ends_block` (it may change the MSR, the PC or the code), at an illegal word, at a
/// page end, or at `MAX_BLOCK_INSNS`.
#[inline]
pub fn ends_after(op: Op, word: u32, len: usize, next: u64) -> bool {
    let (f, i) = (op.info().flags, Insn(word));
    op == Op::Illegal
        || ((f.contains(InsnFlags::BRANCH) || f.contains(InsnFlags::ENDS_BLOCK))
            && !side_exit(op, i)
            && !(forward_jump(op, i) && jump_in_reach(i, len, next)))
        || len >= MAX_BLOCK_INSNS
        || next & !PAGE_MASK == 0
}

/// A conditional `bc` without LK whose target lies ahead: the block leaves by it when it is
/// taken and goes on past it when not, so that the fall-through path runs on in the same
/// host code (no exit, no entry, host copies of registers kept). A branch back (a loop's
/// end, mostly taken) still ends the block; so does a call, whose `bl` makes a return frame.
#[inline]
pub fn side_exit(op: Op, i: Insn) -> bool {
    op == Op::Bc && !i.lk() && i.aa() == 0 && i.rt() & 0x14 != 0x14 && i.bd() > 0
}

/// An unconditional `b` without LK whose target lies ahead (over an `else` to its join, out
/// of a loop's body). When the target is within the block's reach the block goes on past
/// it, so that a tier may jump to the target's code inside the block; the words between are
/// reached only by side exits into them.
#[inline]
pub fn forward_jump(op: Op, i: Insn) -> bool {
    op == Op::B && !i.lk() && i.aa() == 0 && i.li() > 0
}

/// Whether the target of the [`forward_jump`] `i`, the block's `len`-th word (the next at
/// `next`), is on its page and within `MAX_BLOCK_INSNS` of the block's start.
fn jump_in_reach(i: Insn, len: usize, next: u64) -> bool {
    let at = next.wrapping_sub(4);
    let target = at.wrapping_add(i.li() as u64);
    let index = len - 1 + (i.li() / 4) as usize;
    target & PAGE_MASK == at & PAGE_MASK && index < MAX_BLOCK_INSNS
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
            if ends_after(decode(w), w, words.len(), a) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(word: u32) -> bool {
        ends_after(decode(word), word, 1, 0x1004)
    }

    #[test]
    fn forward_branches_are_side_exits_or_jumps_ahead() {
        assert!(!ends(0x4182_000c), "beq +12");
        assert!(!ends(0x4240_0008), "bdz +8: CTR-decrementing");
        assert!(ends(0x4182_fff4), "beq -12: a loop's end");
        assert!(ends(0x4182_000d), "beql +12: a call");
        assert!(ends(0x4182_000e), "beqa: absolute");
        assert!(ends(0x4280_000c), "bc 20,0,+12: always taken");
        assert!(
            !ends(0x4800_000c),
            "b +12: a jump ahead within the block's reach"
        );
        assert!(ends(0x4800_0101), "bl +256: a call");
        assert!(ends(0x4bff_fff4), "b -12");
        // Past the block's reach, or onto the next page: the block ends.
        assert!(!ends_after(Op::B, 0x4800_0010, MAX_BLOCK_INSNS - 4, 0x1004));
        assert!(ends_after(Op::B, 0x4800_0010, MAX_BLOCK_INSNS - 3, 0x1004));
        assert!(ends_after(Op::B, 0x4800_0010, 1, 0x1ff8));
        assert!(ends(0x4e80_0020), "blr");
        assert!(ends(0x4d82_0020), "beqlr");
        assert!(!ends(0x3860_0000), "li r3,0");
        // The other limits hold for side exits too.
        assert!(ends_after(Op::Bc, 0x4182_000c, MAX_BLOCK_INSNS, 0x1004));
        assert!(ends_after(Op::Bc, 0x4182_000c, 1, 0x2000));
    }
}
