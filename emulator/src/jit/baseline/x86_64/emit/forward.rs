//! Branches ahead into the block's own tail: a jump inside it instead of an exit.
//!
//! A loop with a test in its body (`if (a[i] != b) continue;`) is one block whose side exit
//! skips part of it: taken, the exit stored its dirty copies and the CR field, left for a
//! second block made of the first one's tail, which loaded its copies again, and that one
//! branched back to the first one's entry. So every iteration crossed two block boundaries
//! (the budget charged, an entry test, the copies stored and loaded through memory), and
//! the loop block's own head (`self_loop`) was never reached by the way it actually ran.
//!
//! A side exit, or a jump ahead (`vcpu::forward_jump`: the block goes on past it), whose
//! target is a later word of the block jumps to that word's code. The word is a *join*: the
//! first jump to it fixes the copies there (the jumping path's, dirty ones included); every
//! later jump and the fall-through into it move their copies to match first
//! (`Em::become_copies`, the loop head's parallel move). What the instructions before a join
//! leave for the next one (a CR field in the flags, a remembered compare, an SPR in `rax`)
//! is stored or dropped at it, since a jumping path has none of it; access runs and
//! deferred CR fields end before a join. After a jump ahead nothing falls through: the
//! words up to the next join a jump reached are not translated. A jump skips instructions
//! the block's exits charge as if it ran straight through, so it gives their count back to
//! the budget.

use super::*;

/// Per instruction of `words`: whether a side exit or a jump ahead of the block targets it.
pub(super) fn join_targets(words: &[u32]) -> Vec<bool> {
    let mut at = vec![false; words.len()];
    for (k, &w) in words.iter().enumerate() {
        if let Some(j) = forward_target_index(k, w).filter(|&j| j < words.len()) {
            at[j] = true;
        }
    }
    at
}

/// A join's label and the copies every way into it arrives with.
#[derive(Clone, Copy)]
pub(super) struct Join {
    label: DynamicLabel,
    copies: RegCache,
}

impl Em {
    /// The join the side exit or jump ahead `i` (the instruction being translated) goes to,
    /// if it targets its own block's tail.
    pub(super) fn forward_target(&self, i: Insn) -> Option<usize> {
        forward_target_index(self.k as usize, i.0).filter(|&j| j < self.words.len())
    }

    /// The first join after instruction `k` (the block's length if none): where an access
    /// run or a deferred CR field starting at `k` must end.
    pub(super) fn next_join(&self, k: usize) -> usize {
        (k + 1..self.words.len())
            .find(|&j| self.join_at[j])
            .unwrap_or(self.words.len())
    }

    /// A jump to join `j` (a side exit's taken way, or a jump ahead): the CR field the
    /// compare before left in the flags (`pending`; unless the join's code sets it first)
    /// or deferred is stored, the copies moved to the join's, the skipped instructions
    /// given back to the budget. The copies of the way on stay as they were.
    pub(super) fn jump_forward(&mut self, j: usize, pending: Option<(u32, bool)>) {
        if let Some((bf, signed)) = pending
            && !fixed::field_set_first(&self.words[j..], bf)
        {
            self.store_crf_from_flags(bf, signed);
        }
        if let Some(c) = self.handoff.crf_deferred {
            let held = self.cache;
            self.crf_again(c, &held);
        }
        let way_on = self.cache;
        let join = match self.joins[j] {
            Some(join) => {
                self.become_copies(&join.copies);
                join
            }
            None => {
                let join = Join {
                    label: self.label(),
                    copies: way_on,
                };
                self.joins[j] = Some(join);
                join
            }
        };
        self.cache = way_on;
        let skipped = (j - self.k as usize - 1) as i32;
        if skipped > 0 {
            self.ops.alu_imm(AluImm::Add, RBP, true, skipped);
        }
        asm!(self.ops ; jmp =>join.label);
    }

    /// Instruction `k`, after a jump ahead that nothing falls through from: whether a jump
    /// arrives here (the code goes on from the join, with its copies); if not, the
    /// instruction is not reached.
    pub(super) fn resume_at_join(&mut self, k: usize) -> bool {
        let Some(join) = self.joins[k] else {
            return false;
        };
        self.enter_join(join);
        true
    }

    /// At instruction `k`, before anything else is emitted for it: if a jump arrives
    /// here, the fall-through stores what the instructions before left for this one, moves
    /// its copies to the join's and marks the join.
    pub(super) fn arrive_at_join(&mut self, k: usize) {
        let Some(join) = self.joins[k] else {
            return;
        };
        if let Some((bf, signed)) = self.handoff.crf_pending.take() {
            self.store_crf_from_flags(bf, signed);
        }
        if let Some(c) = self.handoff.crf_deferred.take() {
            let held = self.cache;
            self.crf_again(c, &held);
        }
        self.become_copies(&join.copies);
        self.enter_join(join);
    }

    /// Marks `join` here: the code after it starts with the join's copies and nothing
    /// left by the instructions before (a jumping path has none of it).
    fn enter_join(&mut self, join: Join) {
        self.handoff = Handoff::default();
        self.cache = join.copies;
        asm!(self.ops ; =>join.label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_exit_into_the_block_makes_a_join() {
        let words = [
            0x2c03_0000, // cmpwi r3,0
            0x4182_000c, // beq +12: to index 4
            0x3863_0001, // addi r3,r3,1
            0x4180_0004, // blt +4: to index 4
            0x3884_0001, // addi r4,r4,1
            0x4082_0008, // bne +8: past the block
            0x3884_0001, // addi r4,r4,1
        ];
        assert_eq!(
            join_targets(&words),
            [false, false, false, false, true, false, false]
        );
        // bnel (LK) and an unconditional `bc` are not side exits.
        assert!(!join_targets(&[0x4082_0009, 0, 0, 0]).contains(&true));
        assert!(!join_targets(&[0x4280_0008, 0, 0, 0]).contains(&true));
    }
}
