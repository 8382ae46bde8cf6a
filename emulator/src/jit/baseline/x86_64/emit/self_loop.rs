//! Blocks that branch back to their own start: a loop of one block.
//!
//! Through the block's entry every iteration started with no copies and loaded from their
//! homes the values the iteration before had just stored (a store-to-load forwarding on
//! each value the loop carries, on its critical path). A loop block loads the copies of
//! the GPRs it names most once, at its head, and its branch back passes the entry's tests
//! (budget, promotion tick) itself, moves the copies to the host registers the head has
//! them in and jumps to the head. When every GPR the loop names has a copy, the copies of
//! those it writes are dirty at the head (the entry loaded them: a store of the same value
//! at worst), so the branch back carries them dirty and only the ways out of the loop store
//! them. A loop counted by `bdnz` (its closing `bc` decrements CTR, and nothing else in it
//! touches CTR) keeps CTR in `r15`, taken out of the copies: its decrement was a
//! read-modify-write of the home, a store-to-load forwarding per iteration; the home is
//! still written every time.

use super::*;

/// Whether the block `words` at `pc` ends with a direct branch back to `pc` (`b`, or
/// `bc` without LK; relative).
pub(super) fn loops_to_start(words: &[u32], pc: u64) -> bool {
    let Some(&w) = words.last() else {
        return false;
    };
    let (op, i) = (decode(w), Insn(w));
    let disp = match op {
        Op::B => i.li(),
        Op::Bc => i.bd(),
        _ => return false,
    };
    let at = pc.wrapping_add(4 * (words.len() as u64 - 1));
    !i.lk() && i.aa() == 0 && at.wrapping_add(disp as u64) == pc
}

/// Whether the loop block `words` is counted in CTR by its closing `bc` alone: that one
/// decrements CTR and no other instruction reads or writes it.
fn counted_in_ctr(words: &[u32]) -> bool {
    let decrements = |w: u32| {
        let (op, i) = (decode(w), Insn(w));
        matches!(op, Op::Bc | Op::Bclr | Op::Bctar) && i.rt() & 4 == 0
    };
    let touches = |w: u32| {
        let (op, i) = (decode(w), Insn(w));
        decrements(w) || op == Op::Bcctr || matches!(op, Op::Mtspr | Op::Mfspr) && i.spr() == 9
    };
    match words.split_last() {
        Some((&last, body)) => decrements(last) && !body.iter().any(|&w| touches(w)),
        None => false,
    }
}

/// The GPRs named by the most instructions of `words` (`regcache::named_gprs`), at most
/// `most`, most named first.
fn most_named(words: &[u32], most: usize) -> Vec<u32> {
    let mut count = [0u32; 32];
    for &w in words {
        let named = named_gprs(w);
        for (r, c) in count.iter_mut().enumerate() {
            *c += named >> r & 1;
        }
    }
    let mut named: Vec<u32> = (0..32).filter(|&r| count[r as usize] > 0).collect();
    named.sort_by_key(|&r| std::cmp::Reverse(count[r as usize]));
    named.truncate(most);
    named
}

/// The host register holding CTR in a loop counted in it (callee-saved: helper calls keep
/// it; out-of-line code does not reload it).
const CTR_COPY: u8 = 15;

/// Where a copy moved at the branch back comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Host(u8),
    Home(u32),
}

impl Em {
    /// At the start of a loop block's body: loads the copies of the GPRs the block names
    /// most and marks the loop's head after them.
    pub(super) fn loop_head(&mut self, words: &[u32]) {
        let mut copies = HOST_REGS.len();
        if counted_in_ctr(words) {
            copies = self.cache.reserve(CTR_COPY);
            asm!(self.ops ; mov Rq(CTR_COPY), QWORD [rbx + CTR]);
            self.ctr_copy = Some(CTR_COPY);
        }
        let named = most_named(words, usize::MAX);
        // With every GPR it names in a copy, nothing evicts one: the branch back keeps the
        // written ones dirty rather than store them every iteration. Otherwise a copy the
        // head holds dirty would be evicted, stored, before the loop writes it again.
        let written = if named.len() <= copies {
            words.iter().fold(0, |m, &w| m | written_gprs(w))
        } else {
            0
        };
        for &r in named.iter().take(copies) {
            let h = self.take_copy(r);
            self.gpr_home(GprOp::Load64, h, r);
            if written & 1 << r != 0 {
                self.cache.mark_dirty(r);
            }
        }
        let head = self.label();
        asm!(self.ops ; =>head);
        self.looping = Some((head, self.cache));
    }

    /// The branch back of a loop block whose head is `head` (with the copies `at_head`),
    /// its instructions charged: the entry's tests (`stop`: out with the block's own PC,
    /// the dirty copies stored), the dirty copies the head does not hold dirty stored, then
    /// the copies moved to where the head has them. The emitter's cache is left as it was
    /// (the code after this is the way on).
    pub(super) fn loop_back(
        &mut self,
        (head, at_head): (DynamicLabel, RegCache),
        stop: DynamicLabel,
    ) {
        if let Some(c) = self.counter {
            self.tick(c);
        }
        asm!(self.ops ; test rbp, rbp ; jle =>stop);
        self.become_copies(&at_head);
        asm!(self.ops ; jmp =>head);
    }

    /// Makes the copies `want` has (a loop's head, a join: `forward`) from this point's:
    /// the dirty copies `want` does not hold dirty stored home, then the copies moved. The
    /// emitter's cache is left as it was.
    pub(super) fn become_copies(&mut self, want: &RegCache) {
        let kept = want.dirty();
        let stores: Vec<(u8, u32)> = self
            .cache
            .dirty_held()
            .filter(|&(_, r)| kept & 1 << r == 0)
            .collect();
        for (h, r) in stores {
            self.gpr_home(GprOp::Store64, h, r);
        }
        self.move_copies(want);
    }

    /// Puts each copy of `want` in its host register, from the copy this point has or,
    /// when it has none, from the home (current here). A parallel move: a register that
    /// another move still reads is written only after that one ran (a cycle goes through
    /// `rax`).
    fn move_copies(&mut self, want: &RegCache) {
        let mut moves: Vec<(u8, Source)> = want
            .held()
            .filter_map(|(h, r)| match self.cache_peek(r) {
                Some(c) if c == h => None,
                Some(c) => Some((h, Source::Host(c))),
                None => Some((h, Source::Home(r))),
            })
            .collect();
        while !moves.is_empty() {
            let free = moves
                .iter()
                .position(|&(d, _)| !moves.iter().any(|&(_, s)| s == Source::Host(d)));
            match free {
                Some(k) => match moves.remove(k) {
                    (d, Source::Host(c)) => self.reg_reg(GprOp::Load64, d, c),
                    (d, Source::Home(r)) => self.gpr_home(GprOp::Load64, d, r),
                },
                None => {
                    // Every destination is still read: keep one's value in `rax`.
                    let d = moves[0].0;
                    self.reg_reg(GprOp::Load64, RAX, d);
                    for m in &mut moves {
                        if m.1 == Source::Host(d) {
                            m.1 = Source::Host(RAX);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_block_branches_back_to_its_start() {
        // addi r3,r3,1; cmpwi r3,10; blt -8
        let words = [0x3863_0001, 0x2c03_000a, 0x4180_fff8];
        assert!(loops_to_start(&words, 0x1000));
        // The same branch from a block that starts one word later: not to its start.
        assert!(!loops_to_start(&words[1..], 0x1004));
        // bl to the start (LK): a call, not a loop.
        assert!(!loops_to_start(&[0x3863_0001, 0x4bff_fffd], 0x1000));
        // b -4 from the second word.
        assert!(loops_to_start(&[0x3863_0001, 0x4bff_fffc], 0x1000));
    }

    #[test]
    fn the_most_named_registers_come_first() {
        // add r3,r4,r5; add r3,r3,r4; addi r3,r3,1
        let words = [0x7c64_2a14, 0x7c63_2214, 0x3863_0001];
        assert_eq!(most_named(&words, 6), [3, 4, 5]);
        assert_eq!(most_named(&words, 2), [3, 4]);
    }

    #[test]
    fn a_loop_counted_by_its_closing_bdnz_alone_keeps_ctr() {
        // addi r3,r3,1; bdnz -4
        assert!(counted_in_ctr(&[0x3863_0001, 0x4200_fffc]));
        // ... with mfctr r4 in the body.
        assert!(!counted_in_ctr(&[0x7c89_02a6, 0x4200_fffc]));
        // ... with bdz (a side exit) in the body.
        assert!(!counted_in_ctr(&[0x4240_0008, 0x4200_fffc]));
        // b -4: no CTR.
        assert!(!counted_in_ctr(&[0x3863_0001, 0x4bff_fffc]));
    }
}
