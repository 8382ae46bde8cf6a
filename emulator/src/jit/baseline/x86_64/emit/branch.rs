//! Branches and the condition register: the baseline tier's `branch` family (see `table`).

use super::fixed::{CmpSrc, Operand2};
use super::*;

impl Em {
    /// The `branch` family's translator: false leaves the instruction to the interpreter.
    pub(super) fn branch(&mut self, op: Op, i: Insn, ended: &mut bool) -> bool {
        use Op::*;
        let rt = i.rt();
        let ra = i.ra();
        let rb = i.rb();
        let n = self.k + 1;
        match op {
            Crand | Cror | Crxor | Crnand | Crnor | Creqv | Crandc | Crorc => {
                // Bit `b` of the CR is bit 3 - b % 4 of field b / 4's byte.
                let field = |b: u32| CRF + (b / 4) as i32;
                let shift = |b: u32| (3 - b % 4) as i8;
                asm!(self.ops
                    ; movzx ecx, BYTE [rbx + field(ra)]
                    ; shr ecx, shift(ra)
                    ; movzx edx, BYTE [rbx + field(rb)]
                    ; shr edx, shift(rb)
                );
                if matches!(op, Crandc | Crorc) {
                    asm!(self.ops ; not edx);
                }
                match op {
                    Crand | Crnand | Crandc => asm!(self.ops ; and ecx, edx),
                    Cror | Crnor | Crorc => asm!(self.ops ; or ecx, edx),
                    _ => asm!(self.ops ; xor ecx, edx),
                }
                if matches!(op, Crnand | Crnor | Creqv) {
                    asm!(self.ops ; not ecx);
                }
                let sh = shift(rt);
                asm!(self.ops
                    ; and ecx, 1
                    ; shl ecx, sh
                    ; movzx eax, BYTE [rbx + field(rt)]
                    ; and eax, !(1u32 << sh) as i32
                    ; or eax, ecx
                    ; mov BYTE [rbx + field(rt)], al
                );
            }
            Mcrf => {
                asm!(self.ops ; movzx ecx, BYTE [rbx + CRF + i.bfa() as i32]);
                self.insert_crf(i.bf());
            }
            Mfcr => {
                self.pack_cr();
                self.set_gpr(rt);
            }
            Mtcrf | Mtocrf | Mfocrf => {
                let fxm = i.fxm();
                let m: u32 = (0..8)
                    .filter(|k| fxm & (0x80 >> k) != 0)
                    .map(|k| 0xf << (28 - 4 * k))
                    .fold(0, |a, b| a | b);
                if op != Mtcrf && fxm.count_ones() != 1 {
                    // The interpreter leaves everything as it was.
                } else if op == Mfocrf {
                    self.pack_cr();
                    asm!(self.ops ; and eax, m as i32);
                    self.set_gpr(rt);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, rt);
                    self.unpack_cr(fxm);
                }
            }
            B => {
                self.link_register(i, true);
                match self.forward_target(i) {
                    Some(j) => self.jump_forward(j, None),
                    None => self.exit_branch(i, n, i.li() as u64),
                }
                // Nothing falls through: the code goes on at a join, if any (`forward`).
                *ended = true;
            }
            Bc => {
                // `bcl` to the next instruction reads the PC (`mflr` follows): no return.
                let pc_read = i.bd() == 4 && i.aa() == 0;
                self.link_register(i, always(i) && !pc_read);
                let nt = self.label();
                // A compare right before may have left its field in the flags only.
                let pending = self.handoff.crf_pending.take();
                self.condition(i, true, nt);
                if self.closes_loop() {
                    // The branch back carries the dirty copies to the loop's head (a field
                    // is left in the flags only before a side exit, which this is not).
                    debug_assert!(pending.is_none());
                    self.exit_branch(i, n, i.bd() as u64);
                } else if let Some(j) = self.forward_target(i) {
                    self.jump_forward(j, pending);
                } else {
                    // A side exit keeps the dirty copies past it: only the taken way stores
                    // them.
                    self.leaving_with_homes(|e| {
                        if let Some((bf, signed)) = pending {
                            e.store_crf_from_flags(bf, signed);
                        }
                        e.exit_branch(i, n, i.bd() as u64)
                    });
                }
                asm!(self.ops ; =>nt);
                let k = self.k as usize;
                let rest = &self.words[k + 1..];
                if let Some((bf, signed)) = pending
                    && !fixed::field_set_first(rest, bf)
                {
                    // The compare right before; with accesses before the field is set
                    // again (and before a join, which a jump reaches with it stored), their
                    // cold paths store it (`Em::push_slow`).
                    let window = &self.words[k + 1..self.next_join(k)];
                    let deferred = (self.k.checked_sub(1))
                        .and_then(|j| CmpSrc::of_compare(self.words[j as usize]))
                        .filter(|c| c.bf == bf && c.signed == signed)
                        .filter(|c| fixed::field_set_past_accesses(window, c));
                    match deferred {
                        Some(c) => self.handoff.crf_deferred = Some(c),
                        None => self.store_crf_from_flags(bf, signed),
                    }
                }
                // A side exit's block goes on past it (`vcpu::side_exit`); when it is the
                // block's last word, the block's own end leaves for the next one.
                if !side_exit(op, i) {
                    self.flush_dirty();
                    self.exit_direct(n, self.pc.wrapping_add(4));
                    *ended = true;
                }
            }
            Bclr | Bcctr if op == Bclr || i.rt() & 4 != 0 => {
                // The target is read before LK updates LR.
                let home = if op == Bclr { LR } else { CTR };
                // After `mtlr`/`mtctr` the value is still in `rax`: reading it back would
                // wait for the store on the way to the jump.
                let nt = self.label();
                if !i.lk() {
                    // Tested first, on the flags of a compare right before if there is one.
                    self.condition(i, op == Bclr, nt);
                }
                if self.handoff.prev_spr != Some(home) {
                    asm!(self.ops ; mov rax, QWORD [rbx + home]);
                }
                asm!(self.ops ; and rax, -4);
                if i.lk() {
                    self.link_register(i, always(i));
                    self.condition(i, op == Bclr, nt);
                }
                if op == Bclr && !i.lk() {
                    self.exit_return(n);
                } else {
                    self.exit_indirect(n);
                }
                asm!(self.ops ; =>nt);
                self.exit_direct(n, self.pc.wrapping_add(4));
                *ended = true;
            }
            _ => return false,
        }
        true
    }
}

impl Em {
    /// Jumps to `not_taken` unless the BO/BI condition holds (decrementing CTR when BO
    /// says so). Keeps `rax`.
    pub(super) fn condition(&mut self, i: Insn, use_ctr: bool, not_taken: DynamicLabel) {
        let bo = i.rt();
        if use_ctr && bo & 4 == 0 {
            match self.ctr_copy.filter(|_| self.caching) {
                Some(h) => asm!(self.ops ; sub Rq(h), 1 ; mov QWORD [rbx + CTR], Rq(h)),
                None => asm!(self.ops ; sub QWORD [rbx + CTR], 1),
            }
            if bo & 2 != 0 {
                asm!(self.ops ; jnz =>not_taken);
            } else {
                asm!(self.ops ; jz =>not_taken);
            }
        }
        if bo & 0x10 == 0 {
            let bi = i.ra();
            // Nothing between the compare and here changed the flags: no LK, no CTR.
            let flags = self.handoff.prev_flags.filter(|&(bf, _)| {
                bf == bi / 4 && bi % 4 != 3 && !i.lk() && !(use_ctr && bo & 4 == 0)
            });
            // Only from copies: comparing homes again costs more than loading the CR byte.
            let again = self.handoff.cmp_src.filter(|c| {
                let copy = |r| self.cache_peek(r).is_some();
                c.bf == bi / 4
                    && bi % 4 != 3
                    && copy(c.a)
                    && match c.b {
                        Operand2::Gpr(r) => copy(r),
                        Operand2::Imm(_) => true,
                    }
            });
            match (flags, again) {
                (Some((_, signed)), _) => {
                    self.jump_unless_cr_bit(bi % 4, signed, bo & 8 != 0, not_taken)
                }
                (None, Some(c)) => {
                    self.recompare(c);
                    self.jump_unless_cr_bit(bi % 4, c.signed, bo & 8 != 0, not_taken);
                }
                (None, None) => {
                    self.test_cr_bit(bi);
                    if bo & 8 != 0 {
                        asm!(self.ops ; jz =>not_taken);
                    } else {
                        asm!(self.ops ; jnz =>not_taken);
                    }
                }
            }
        }
    }

    /// Queues `cold`, the cold path of an access or of an instruction the interpreter runs
    /// when its fast path cannot; while a CR field is deferred (`Handoff::crf_deferred`)
    /// its entry stores the field first (`Cold::CrfFirst`).
    pub(super) fn push_slow(&mut self, mut cold: Cold) {
        if let Some(c) = self.handoff.crf_deferred {
            let then = self.label();
            let at = match &mut cold {
                Cold::LoadMiss { at, .. }
                | Cold::StoreMiss { at, .. }
                | Cold::AccessRun { at, .. }
                | Cold::InterpSlow { at, .. } => std::mem::replace(at, then),
                _ => unreachable!("not an access's cold path"),
            };
            self.cold.push(Cold::CrfFirst {
                at,
                then,
                held: self.cache,
                c,
            });
        }
        self.cold.push(cold);
    }

    /// Stores CR field `c.bf` as the compare `c` sets it, computed again from its operands:
    /// a dirty copy in `held`, else the home (current: nothing wrote them since the
    /// compare). Clobbers `rax`, `rcx`, `rdx`, `r13` and the flags.
    pub(super) fn crf_again(&mut self, c: CmpSrc, held: &RegCache) {
        let dirty = |r: u32| held.dirty_held().find(|&(_, g)| g == r).map(|(h, _)| h);
        let a = dirty(c.a).unwrap_or_else(|| {
            self.gpr_home(GprOp::Load64, RAX, c.a);
            RAX
        });
        let b = match c.b {
            Operand2::Gpr(r) => dirty(r),
            Operand2::Imm(_) => None,
        };
        self.compare_with(c, a, b);
        self.store_crf_from_flags(c.bf, c.signed);
    }

    /// The host flags of the compare `c` again, from its operands' host copies (they have
    /// not changed since it ran). Keeps `rax`.
    fn recompare(&mut self, c: CmpSrc) {
        let copy = |r| self.cache_peek(r).expect("a compared register's copy");
        let b = match c.b {
            Operand2::Gpr(r) => Some(copy(r)),
            Operand2::Imm(_) => None,
        };
        self.compare_with(c, copy(c.a), b);
    }

    /// The compare `c` with its first operand in host register `a` and its second, a GPR,
    /// in host register `b` or else read from its home (an immediate needs neither).
    fn compare_with(&mut self, c: CmpSrc, a: u8, b: Option<u8>) {
        match (c.b, c.wide) {
            (Operand2::Imm(v), wide) => self.ops.alu_imm(AluImm::Cmp, a, wide, v),
            (Operand2::Gpr(r), wide) => {
                let cmp = if wide { GprOp::Cmp64 } else { GprOp::Cmp32 };
                match b {
                    Some(h) => self.reg_reg(cmp, a, h),
                    None => self.gpr_home(cmp, a, r),
                }
            }
        }
    }

    /// Jumps to `not_taken` unless LT, GT or EQ (`bit` 0, 1, 2) of the compare whose flags
    /// the host has (signed or unsigned) is `want`.
    fn jump_unless_cr_bit(&mut self, bit: u32, signed: bool, want: bool, not_taken: DynamicLabel) {
        match (bit, signed, want) {
            (0, true, true) => asm!(self.ops ; jge =>not_taken),
            (0, true, false) => asm!(self.ops ; jl =>not_taken),
            (0, false, true) => asm!(self.ops ; jae =>not_taken),
            (0, false, false) => asm!(self.ops ; jb =>not_taken),
            (1, true, true) => asm!(self.ops ; jle =>not_taken),
            (1, true, false) => asm!(self.ops ; jg =>not_taken),
            (1, false, true) => asm!(self.ops ; jbe =>not_taken),
            (1, false, false) => asm!(self.ops ; ja =>not_taken),
            (_, _, true) => asm!(self.ops ; jne =>not_taken),
            (_, _, false) => asm!(self.ops ; je =>not_taken),
        }
    }

    /// The taken exit of `b`/`bc` with displacement `disp`: relative to this instruction,
    /// or absolute (AA).
    fn exit_branch(&mut self, i: Insn, retired: u32, disp: u64) {
        if i.aa() != 0 {
            self.exit_absolute(retired, disp);
        } else {
            self.exit_direct(retired, self.pc.wrapping_add(disp));
        }
    }

    /// With LK, sets LR to the return address. A call (`returns`: the branch is taken
    /// whatever the condition, and the callee is expected to return) whose return address
    /// is on this block's page also pushes a return frame ([`Em::push_return`]).
    pub(super) fn link_register(&mut self, i: Insn, returns: bool) {
        if !i.lk() {
            return;
        }
        let ret = self.pc.wrapping_add(4);
        self.pc_into(RCX, ret);
        asm!(self.ops ; mov QWORD [rbx + LR], rcx);
        if returns && ret & PAGE_MASK == self.block_pc & PAGE_MASK {
            return self.push_return(ret);
        }
        // The callee's `blr` will probe the jump cache for the return address: start
        // loading that set now (most probes wait for a cache miss on it).
        if self.page.is_some() {
            asm!(self.ops
                ; shr ecx, 2
                ; and ecx, (JC_SETS - 1) as i32
                ; shl ecx, size_of::<JcSet>().trailing_zeros() as i8
                ; add rcx, QWORD [r12 + JC]
                ; prefetcht0 [rcx]
            );
        } else {
            let set = (jump_cache::set(ret) * size_of::<JcSet>()) as i32;
            asm!(self.ops ; mov rcx, QWORD [r12 + JC] ; prefetcht0 [rcx + set]);
        }
    }

    /// Pushes a return frame for the return address `ret` (in `rcx`) and calls the rest of
    /// the block (its exits), so that the host's return stack predicts the `ret` of the
    /// callee's `blr` ([`Em::exit_return`]). A frame is `ret` and the landing, the frame's
    /// return address, which follows the call: it drops `ret` and jumps to the block at
    /// `ret`, linked as any direct exit to the page (a predicted return comes with the
    /// running page set and the budget charged). 16 bytes: helper calls stay aligned. Past
    /// the frames' room ([`RETURN_FRAMES_BYTES`]) the call pushes none.
    fn push_return(&mut self, ret: u64) {
        let exits = self.label();
        asm!(self.ops
            ; cmp rsp, QWORD [r12 + RSP_LIMIT]
            ; jbe =>exits
            ; push rcx
            ; call =>exits
            ; add rsp, 8
        );
        self.jump_direct(ret);
        asm!(self.ops ; =>exits);
    }
}

/// The branch is taken whatever CTR and the CR hold (BO = 1z1zz).
fn always(i: Insn) -> bool {
    i.rt() & 0x14 == 0x14
}
