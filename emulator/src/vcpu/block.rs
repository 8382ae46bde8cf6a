//! Where a block ends: the one rule that the translating tiers (when they decode a block) and
//! the interpreter (when it runs one) both follow, so that a block interpreted while it is
//! cold runs exactly the instructions its translation runs straight through. A fetched block
//! may hold more words, reached only by jumps into them ([`DecodedBlock::fetch`]); the
//! interpreter runs those as blocks of their own.

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

/// The displacement of a relative `b` or `bc`.
fn branch_disp(op: Op, i: Insn) -> u64 {
    match op {
        Op::B => i.li() as u64,
        _ => i.bd() as u64,
    }
}

/// Whether the target of the [`forward_jump`] `i`, the block's `len`-th word (the next at
/// `next`), is on its page and within `MAX_BLOCK_INSNS` of the block's start.
fn jump_in_reach(i: Insn, len: usize, next: u64) -> bool {
    let at = next.wrapping_sub(4);
    let target = at.wrapping_add(i.li() as u64);
    let index = len - 1 + (i.li() / 4) as usize;
    target & PAGE_MASK == at & PAGE_MASK && index < MAX_BLOCK_INSNS
}

/// A branch after which nothing falls through (no LK, relative or register): `b`, and
/// `bc`, `bclr`, `bcctr` with BO "branch always" (`blr`, `bctr`).
#[inline]
pub fn never_falls_through(op: Op, i: Insn) -> bool {
    let always = i.rt() & 0x14 == 0x14;
    !i.lk()
        && match op {
            Op::B | Op::Bc => i.aa() == 0 && (op == Op::B || always),
            Op::Bclr | Op::Bcctr => always,
            _ => false,
        }
}

/// The index in its block of the word a side exit or jump ahead at index `k` targets (it
/// may lie past the block); `None` for other instructions.
pub fn forward_target_index(k: usize, w: u32) -> Option<usize> {
    let (op, i) = (decode(w), Insn(w));
    if side_exit(op, i) {
        Some(k + (i.bd() / 4) as usize)
    } else if forward_jump(op, i) {
        Some(k + (i.li() / 4) as usize)
    } else {
        None
    }
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
    ///
    /// One exception to the rule: after a branch that never falls through (other than one
    /// back to `pc`, which closes a loop block), the block goes on while a side exit or jump
    /// ahead of it targets a later word on the page within `MAX_BLOCK_INSNS`. That is the
    /// layout compilers give `if (c) { …; return; } rest`: `rest`, reached by the side exit,
    /// was a block of its own, so the way that mostly ran left its block after a few words
    /// (bzip2's byte compare: five) and stored and loaded every copy on the way. The words
    /// after such a branch run only through jumps into them; the interpreter, which runs
    /// by [`ends_after`] alone, leaves at the branch all the same.
    pub fn fetch(cpu: &mut Cpu, pc: u64) -> Result<Self, Exception> {
        let mut words = Vec::new();
        let mut a = pc;
        // Words of the block that side exits and jumps ahead so far reach (the furthest
        // target's index + 1, within the page and `MAX_BLOCK_INSNS`).
        let mut reach = 0;
        loop {
            let w = match cpu.mmu.fetch(&cpu.st, a) {
                Ok(w) => w,
                Err(e) if words.is_empty() => return Err(e),
                Err(_) => break,
            };
            let k = words.len();
            words.push(w);
            a = a.wrapping_add(4);
            if let Some(t) = forward_target_index(k, w)
                && t < MAX_BLOCK_INSNS
                && pc.wrapping_add(4 * t as u64) & PAGE_MASK == pc & PAGE_MASK
            {
                reach = reach.max(t + 1);
            }
            let (op, i) = (decode(w), Insn(w));
            if ends_after(op, w, words.len(), a) {
                let back_to_start = matches!(op, Op::B | Op::Bc)
                    && a.wrapping_sub(4).wrapping_add(branch_disp(op, i)) == pc;
                let goes_on = never_falls_through(op, i)
                    && !back_to_start
                    && reach > words.len()
                    && words.len() < MAX_BLOCK_INSNS
                    && a & !PAGE_MASK != 0;
                if !goes_on {
                    break;
                }
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

    /// The length of the block fetched from `start` with `words` at 0x1000.
    fn fetched(words: &[u32], start: u64) -> usize {
        let mut c = Cpu::new(Box::new(crate::softmmu::FlatRam::new(1 << 16)));
        c.st.msr = crate::cpu::msr::SF | crate::cpu::msr::LE | crate::cpu::msr::PR;
        for (k, w) in words.iter().enumerate() {
            c.mmu
                .store(&c.st, 0x1000 + 4 * k as u64, 4, *w as u64, true)
                .unwrap();
        }
        DecodedBlock::fetch(&mut c, start).unwrap().words.len()
    }

    #[test]
    fn a_block_goes_on_past_a_branch_that_never_falls_through_while_a_jump_reaches_ahead() {
        // `f` of jit_diff's test of words after such branches.
        let f = [
            0x7086_0003, // andi. r6,r4,3
            0x4182_000c, // beq f_eq
            0x38a4_0001, // addi r5,r4,1
            0x4e80_0020, // blr
            0x7087_0004, // f_eq: andi. r7,r4,4
            0x4082_0014, // bne f_ne
            0x38a0_0007, // li r5,7
            0x7d08_02a6, // mflr r8
            0x7d09_03a6, // mtctr r8
            0x4e80_0420, // bctr
            0x2c24_0000, // f_ne: cmpdi r4,0
            0x4181_000c, // bgt f_pos
            0x38a0_fffd, // li r5,-3
            0x4bff_ffc4, // b f_back (before f)
            0x38a0_0009, // f_pos: li r5,9
            0x4e80_0020, // blr
            0x3860_0000, // li r3,0: no jump reaches it
        ];
        assert_eq!(fetched(&f, 0x1000), 16, "up to the last blr a jump reaches");
        // From the second word no jump reaches past the first blr.
        assert_eq!(fetched(&f, 0x1008), 2);
        // A branch back to the block's start closes a loop block: it ends there.
        let looping = [
            0x7086_0003, // loop: andi. r6,r4,3
            0x4182_000c, // beq out
            0x3884_0001, // addi r4,r4,1
            0x4bff_fff4, // b loop
            0x3860_0000, // out: li r3,0
        ];
        assert_eq!(fetched(&looping, 0x1000), 4);
        // A call ends it (its return lands after it).
        let call = [
            0x4182_000c, // beq +12
            0x4800_0101, // bl +256
            0x3860_0000, // li r3,0
            0x3860_0001, // li r3,1
        ];
        assert_eq!(fetched(&call, 0x1000), 2);
    }
}
