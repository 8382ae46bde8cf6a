//! Integer arithmetic, logical, shift, rotate and compare instructions: the baseline tier's
//! `fixed` family (see `table`).

use super::*;

/// The second source of [`Em::in_place`]: a GPR or a sign-extended immediate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Operand2 {
    Gpr(u32),
    Imm(i32),
}

impl Em {
    /// The `fixed` family's translator: false leaves the instruction to the interpreter.
    pub(super) fn fixed(&mut self, op: Op, i: Insn, _ended: &mut bool) -> bool {
        use Op::*;
        let rt = i.rt();
        let ra = i.ra();
        let rb = i.rb();
        match op {
            Addi | Addis => {
                let imm = if op == Addis { i.si() << 16 } else { i.si() } as i32;
                if ra == 0 {
                    asm!(self.ops ; mov rax, imm);
                    self.set_gpr(rt);
                } else if !self.in_place(GprOp::Add64, rt, ra, Operand2::Imm(imm), false) {
                    self.gpr_rm(GprOp::Load64, RAX, ra);
                    self.ops.alu_imm(AluImm::Add, RAX, true, imm);
                    self.set_gpr(rt);
                }
            }
            // `nop` and `ori rX,rX,0` (after calls): nothing to do.
            Ori | Oris | Xori | Xoris if i.ui() == 0 && ra == rt => {}
            // `mr`: a copy, no `or`.
            Or if rt == rb => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                self.set_rc(ra, i.rc());
            }
            Add if self.in_place(GprOp::Add64, rt, ra, Operand2::Gpr(rb), i.rc()) => {}
            Subf if self.in_place(GprOp::Sub64, rt, rb, Operand2::Gpr(ra), i.rc()) => {}
            And | Or | Xor
                if self.in_place(
                    match op {
                        And => GprOp::And64,
                        Or => GprOp::Or64,
                        _ => GprOp::Xor64,
                    },
                    ra,
                    rt,
                    Operand2::Gpr(rb),
                    i.rc(),
                ) => {}
            Ori | Xori | AndiDot
                if self.in_place(
                    match op {
                        Ori => GprOp::Or64,
                        Xori => GprOp::Xor64,
                        _ => GprOp::And64,
                    },
                    ra,
                    rt,
                    Operand2::Imm(i.ui() as i32),
                    op == AndiDot,
                ) => {}
            Add => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                self.gpr_rm(GprOp::Add64, RAX, rb);
                self.set_rc(rt, i.rc());
            }
            Subf => {
                self.gpr_rm(GprOp::Load64, RAX, rb);
                self.gpr_rm(GprOp::Sub64, RAX, ra);
                self.set_rc(rt, i.rc());
            }
            Neg => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                asm!(self.ops ; neg rax);
                self.set_rc(rt, i.rc());
            }
            Addic | AddicDot | Subfic | Addc | Adde | Addze | Addme | Subfc | Subfe | Subfze
            | Subfme => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                if matches!(op, Subfic | Subfc | Subfe | Subfze | Subfme) {
                    asm!(self.ops ; not rax);
                }
                match op {
                    Addic | AddicDot | Subfic => asm!(self.ops ; mov rcx, i.si() as i32),
                    Addc | Adde | Subfc | Subfe => {
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                    }
                    Addze | Subfze => asm!(self.ops ; xor ecx, ecx),
                    _ => asm!(self.ops ; mov rcx, -1),
                }
                match op {
                    Addic | AddicDot | Addc => asm!(self.ops ; add rax, rcx),
                    Subfic | Subfc => asm!(self.ops ; stc ; adc rax, rcx),
                    _ => asm!(self.ops ; movzx edx, BYTE [rbx + CA] ; bt edx, 0 ; adc rax, rcx),
                }
                asm!(self.ops ; setc BYTE [rbx + CA]);
                let rc = op == AddicDot || (!matches!(op, Addic | Subfic) && i.rc());
                self.set_rc(rt, rc);
            }
            Mulli => {
                match self.copy_of(ra) {
                    Some(h) => asm!(self.ops ; imul rax, Rq(h), i.si() as i32),
                    None => asm!(self.ops ; imul rax, QWORD [rbx + gpr(ra)], i.si() as i32),
                }
                self.set_gpr(rt);
            }
            Mulld => {
                self.gpr_rm(GprOp::Load64, RAX, ra);
                self.gpr_rm(GprOp::Imul64, RAX, rb);
                self.set_rc(rt, i.rc());
            }
            Mullw => {
                self.gpr_rm(GprOp::Load32Signed, RAX, ra);
                self.gpr_rm(GprOp::Load32Signed, RCX, rb);
                asm!(self.ops ; imul rax, rcx);
                self.set_rc(rt, i.rc());
            }
            Mulhd | Mulhdu => {
                self.gpr_rm(GprOp::Load64, RCX, rb);
                self.gpr_rm(GprOp::Load64, RAX, ra);
                if op == Mulhd {
                    asm!(self.ops ; imul rcx);
                } else {
                    asm!(self.ops ; mul rcx);
                }
                asm!(self.ops ; mov rax, rdx);
                self.set_rc(rt, i.rc());
            }
            Mulhw | Mulhwu => {
                // The high word of the 64-bit product, zero-extended.
                if op == Mulhw {
                    self.gpr_rm(GprOp::Load32Signed, RAX, ra);
                    self.gpr_rm(GprOp::Load32Signed, RCX, rb);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, ra);
                    self.gpr_rm(GprOp::Load32, RCX, rb);
                }
                asm!(self.ops ; imul rax, rcx ; shr rax, 32);
                self.set_rc(rt, i.rc());
            }
            And | Or | Xor | Nand | Nor | Andc | Orc | Eqv => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if matches!(op, Andc | Orc) {
                    self.gpr_rm(GprOp::Load64, RCX, rb);
                    asm!(self.ops ; not rcx);
                    match op {
                        Andc => asm!(self.ops ; and rax, rcx),
                        _ => asm!(self.ops ; or rax, rcx),
                    }
                } else {
                    let g = match op {
                        And | Nand => GprOp::And64,
                        Or | Nor => GprOp::Or64,
                        _ => GprOp::Xor64,
                    };
                    self.gpr_rm(g, RAX, rb);
                }
                if matches!(op, Nand | Nor | Eqv) {
                    asm!(self.ops ; not rax);
                }
                self.set_rc(ra, i.rc());
            }
            Ori | Oris | Xori | Xoris | AndiDot | AndisDot => {
                let ui = i.ui() as u32;
                let imm = if matches!(op, Oris | Xoris | AndisDot) {
                    ui << 16
                } else {
                    ui
                };
                // `mov ecx, imm` zero-extends: the immediate is unsigned.
                self.gpr_rm(GprOp::Load64, RAX, rt);
                asm!(self.ops ; mov ecx, imm as i32);
                match op {
                    Ori | Oris => asm!(self.ops ; or rax, rcx),
                    Xori | Xoris => asm!(self.ops ; xor rax, rcx),
                    _ => asm!(self.ops ; and rax, rcx),
                }
                self.set_rc(ra, matches!(op, AndiDot | AndisDot));
            }
            Extsb => {
                match self.copy_of(rt) {
                    // (`mov` first: a dynamic byte register 4-7 would need a REX prefix.)
                    Some(h) => asm!(self.ops ; mov eax, Rd(h) ; movsx rax, al),
                    None => asm!(self.ops ; movsx rax, BYTE [rbx + gpr(rt)]),
                }
                self.set_rc(ra, i.rc());
            }
            Extsh => {
                match self.copy_of(rt) {
                    Some(h) => asm!(self.ops ; movsx rax, Rw(h)),
                    None => asm!(self.ops ; movsx rax, WORD [rbx + gpr(rt)]),
                }
                self.set_rc(ra, i.rc());
            }
            Extsw => {
                self.gpr_rm(GprOp::Load32Signed, RAX, rt);
                self.set_rc(ra, i.rc());
            }
            Cntlzw | Cntlzd => {
                // bsr leaves ZF set for a zero source: count -1 then, giving 32 / 64.
                if op == Cntlzw {
                    self.gpr_rm(GprOp::Load32, RAX, rt);
                    asm!(self.ops ; bsr eax, eax ; mov ecx, -1 ; cmovz eax, ecx ; neg eax ; add eax, 31);
                } else {
                    self.gpr_rm(GprOp::Load64, RAX, rt);
                    asm!(self.ops ; bsr rax, rax ; mov rcx, -1 ; cmovz rax, rcx ; neg rax ; add rax, 63);
                }
                self.set_rc(ra, i.rc());
            }
            Sld | Srd => {
                // x86 masks the count to 6 bits; bit 0x40 of RB makes the result 0.
                self.gpr_rm(GprOp::Load64, RCX, rb);
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if op == Sld {
                    asm!(self.ops ; shl rax, cl);
                } else {
                    asm!(self.ops ; shr rax, cl);
                }
                asm!(self.ops ; xor edx, edx ; test ecx, 0x40 ; cmovnz rax, rdx);
                self.set_rc(ra, i.rc());
            }
            Slw | Srw => {
                self.gpr_rm(GprOp::Load64, RCX, rb);
                self.gpr_rm(GprOp::Load32, RAX, rt);
                if op == Slw {
                    asm!(self.ops ; shl eax, cl);
                } else {
                    asm!(self.ops ; shr eax, cl);
                }
                asm!(self.ops ; xor edx, edx ; test ecx, 0x20 ; cmovnz eax, edx);
                self.set_rc(ra, i.rc());
            }
            Divw | Divwu | Divd | Divdu => self.divide(op, i),
            Srawi | Sradi | Sraw | Srad => {
                // CA: the source is negative and 1 bits were shifted out (shifting the
                // result back does not give the source).
                let done = self.label();
                match op {
                    Srawi | Sraw => {
                        self.gpr_rm(GprOp::Load32Signed, RAX, rt);
                    }
                    _ => {
                        self.gpr_rm(GprOp::Load64, RAX, rt);
                    }
                }
                asm!(self.ops ; mov rdx, rax);
                match op {
                    Sraw => {
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                        asm!(self.ops ; and ecx, 0x3f);
                    }
                    Srad => {
                        // Counts of 64 and more give the sign, and CA = the source is
                        // negative; the host's shifts take counts up to 63.
                        let small = self.label();
                        self.gpr_rm(GprOp::Load64, RCX, rb);
                        asm!(self.ops
                            ; and ecx, 0x7f
                            ; cmp ecx, 63
                            ; jbe =>small
                            ; sar rax, 63
                            ; mov edx, eax
                            ; and edx, 1
                            ; jmp =>done
                            ; =>small
                        );
                    }
                    Srawi => asm!(self.ops ; mov ecx, i.sh() as i32),
                    _ => asm!(self.ops ; mov ecx, i.sh6() as i32),
                }
                asm!(self.ops
                    ; sar rax, cl
                    ; mov r13, rax
                    ; shl r13, cl
                    ; cmp r13, rdx
                    ; setne r13b
                    ; test rdx, rdx
                    ; sets dl
                    ; and dl, r13b
                    ; =>done
                    ; mov BYTE [rbx + CA], dl
                );
                self.set_rc(ra, i.rc());
            }
            Rlwinm
                if crate::interp::mask64(i.mb() + 32, i.me() + 32) >> 32 == 0
                    && self.rotate_in_place(
                        ra,
                        rt,
                        true,
                        i.sh(),
                        crate::interp::mask64(i.mb() + 32, i.me() + 32),
                        i.rc(),
                    ) => {}
            Rldicl | Rldicr | Rldic
                if self.rotate_in_place(
                    ra,
                    rt,
                    false,
                    i.sh6(),
                    match op {
                        Rldicl => crate::interp::mask64(i.mb6(), 63),
                        Rldicr => crate::interp::mask64(0, i.mb6()),
                        _ => crate::interp::mask64(i.mb6(), 63 - i.sh6()),
                    },
                    i.rc(),
                ) => {}
            Rlwinm | Rlwnm | Rlwimi => {
                let m = crate::interp::mask64(i.mb() + 32, i.me() + 32);
                self.gpr_rm(GprOp::Load32, RAX, rt);
                if op == Rlwnm {
                    self.gpr_rm(GprOp::Load32, RCX, rb);
                }
                if m >> 32 == 0 {
                    // The mask keeps only the low word: a 32-bit rotate is enough.
                    if op == Rlwnm {
                        asm!(self.ops ; rol eax, cl);
                    } else if i.sh() != 0 {
                        asm!(self.ops ; rol eax, i.sh() as i8);
                    }
                } else {
                    // The word doubled, rotated as a doubleword (ROTL32 of the ISA).
                    asm!(self.ops ; mov edx, eax ; shl rdx, 32 ; or rax, rdx);
                    if op == Rlwnm {
                        asm!(self.ops ; and ecx, 0x1f ; rol rax, cl);
                    } else if i.sh() != 0 {
                        asm!(self.ops ; rol rax, i.sh() as i8);
                    }
                }
                self.and_mask(m);
                if op == Rlwimi {
                    self.insert_under_mask(ra, m);
                }
                self.set_rc(ra, i.rc());
            }
            Rldicl | Rldicr | Rldic | Rldimi | Rldcl | Rldcr => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                if matches!(op, Rldcl | Rldcr) {
                    self.gpr_rm(GprOp::Load64, RCX, rb);
                    asm!(self.ops ; rol rax, cl);
                } else if i.sh6() != 0 {
                    asm!(self.ops ; rol rax, i.sh6() as i8);
                }
                let m = match op {
                    Rldicl | Rldcl => crate::interp::mask64(i.mb6(), 63),
                    Rldicr | Rldcr => crate::interp::mask64(0, i.mb6()),
                    _ => crate::interp::mask64(i.mb6(), 63 - i.sh6()),
                };
                self.and_mask(m);
                if op == Rldimi {
                    self.insert_under_mask(ra, m);
                }
                self.set_rc(ra, i.rc());
            }
            Cmp | Cmpl => {
                if i.l10() != 0 {
                    self.gpr_rm(GprOp::Load64, RAX, ra);
                    self.gpr_rm(GprOp::Cmp64, RAX, rb);
                } else {
                    self.gpr_rm(GprOp::Load32, RAX, ra);
                    self.gpr_rm(GprOp::Cmp32, RAX, rb);
                }
                self.set_crf_from_flags(i.bf(), op == Cmp);
                self.handoff.cmp_src = Some(CmpSrc {
                    bf: i.bf(),
                    signed: op == Cmp,
                    wide: i.l10() != 0,
                    a: ra,
                    b: Operand2::Gpr(rb),
                });
            }
            Cmpi | Cmpli => {
                let imm = if op == Cmpi {
                    i.si() as i32
                } else {
                    i.ui() as i32
                };
                match (self.copy_of(ra), i.l10() != 0) {
                    (Some(h), wide) => self.ops.alu_imm(AluImm::Cmp, h, wide, imm),
                    (None, true) => asm!(self.ops ; cmp QWORD [rbx + gpr(ra)], imm),
                    (None, false) => asm!(self.ops ; cmp DWORD [rbx + gpr(ra)], imm),
                }
                self.set_crf_from_flags(i.bf(), op == Cmpi);
                self.handoff.cmp_src = Some(CmpSrc {
                    bf: i.bf(),
                    signed: op == Cmpi,
                    wide: i.l10() != 0,
                    a: ra,
                    b: Operand2::Imm(imm),
                });
            }
            Isel => {
                if ra == 0 {
                    asm!(self.ops ; xor ecx, ecx);
                } else {
                    self.gpr_rm(GprOp::Load64, RCX, ra);
                }
                self.gpr_rm(GprOp::Load64, RAX, rb);
                self.test_cr_bit(i.frc());
                asm!(self.ops ; cmovnz rax, rcx);
                self.set_gpr(rt);
            }
            Cmpb => {
                // Bytes equal → 0xff, else 0: one SSE byte compare.
                self.gpr_rm(GprOp::Load64, RAX, rt);
                self.gpr_rm(GprOp::Load64, RCX, rb);
                asm!(self.ops
                    ; movq xmm0, rax
                    ; movq xmm1, rcx
                    ; pcmpeqb xmm0, xmm1
                    ; movq rax, xmm0
                );
                self.set_gpr(ra);
            }
            Popcntd if std::arch::is_x86_feature_detected!("popcnt") => {
                self.gpr_rm(GprOp::Load64, RAX, rt);
                asm!(self.ops ; popcnt rax, rax);
                self.set_gpr(ra);
            }
            Popcntw if std::arch::is_x86_feature_detected!("popcnt") => {
                // Each word's count in its own word.
                self.gpr_rm(GprOp::Load64, RAX, rt);
                asm!(self.ops
                    ; mov rdx, rax
                    ; shr rdx, 32
                    ; popcnt edx, edx
                    ; popcnt eax, eax
                    ; shl rdx, 32
                    ; or rax, rdx
                );
                self.set_gpr(ra);
            }
            _ => return false,
        }
        true
    }
}

/// The GPRs (bit `r`) that the instruction `w` writes when it is a plain integer one whose
/// translation here cannot leave the block (no fault, helper or exit) and reads each
/// source from its host copy when it has one (0 for the no-op immediates); `None` for any
/// other instruction.
fn plain_dest(w: u32) -> Option<u32> {
    use Op::*;
    let (op, i) = (decode(w), Insn(w));
    if op.info().flags.contains(InsnFlags::OE) && i.oe() {
        return None;
    }
    match op {
        // `nop` and the other no-op immediates write nothing.
        Ori | Oris | Xori | Xoris if i.ui() == 0 && i.ra() == i.rt() => Some(0),
        Addi | Addis | Add | Subf | Neg | Mulli | Mulld | Mullw => Some(1 << i.rt()),
        And | Or | Xor | Nand | Nor | Andc | Orc | Eqv | Ori | Oris | Xori | Xoris | AndiDot
        | AndisDot | Extsb | Extsh | Extsw | Rlwinm | Rldicl | Rldicr | Rldic | Slw | Srw | Sld
        | Srd => Some(1 << i.ra()),
        _ => None,
    }
}

/// Whether the compare `c` still gives its CR field after the instruction `w`: `w` sets no
/// CR field and writes none of the compare's GPRs (a plain integer instruction, a D- or
/// X-form load or store without update, a branch, which writes LR or CTR at most).
pub(super) fn keeps_compare(w: u32, c: &CmpSrc) -> bool {
    let (op, i) = (decode(w), Insn(w));
    let f = op.info().flags;
    if f.contains(InsnFlags::SETS_CR) || (f.contains(InsnFlags::RC) && i.rc()) {
        return false;
    }
    if f.contains(InsnFlags::BRANCH) {
        return true;
    }
    let written = match plain_dest(w) {
        Some(d) => d,
        None => match access_run::plain(op).or(memory::plain_indexed(op)) {
            Some(true) => 0,
            Some(false) => 1 << i.rt(),
            None => return false,
        },
    };
    written & c.gprs() == 0
}

/// Whether the instructions `words` set CR field `bf` before anything could read it: only
/// plain integer instructions and compares (which cannot leave the block or fault) come
/// before a compare into `bf` or, for CR0, a recording instruction.
pub(super) fn field_set_first(words: &[u32], bf: u32) -> bool {
    for &w in words {
        if sets_field(w, bf) {
            return true;
        }
        match decode(w) {
            Op::Cmp | Op::Cmpl | Op::Cmpi | Op::Cmpli => {}
            _ if plain_dest(w).is_some() => {}
            _ => return false,
        }
    }
    false
}

/// Whether `w` sets CR field `bf` without reading it and without leaving the block: a
/// compare into it or, for CR0, `andi.`, `andis.` or a plain integer instruction that
/// records.
pub(super) fn sets_field(w: u32, bf: u32) -> bool {
    let (op, i) = (decode(w), Insn(w));
    let records = op.info().flags.contains(InsnFlags::RC) && i.rc();
    match op {
        Op::Cmp | Op::Cmpl | Op::Cmpi | Op::Cmpli => i.bf() == bf,
        Op::AndiDot | Op::AndisDot => bf == 0,
        _ => bf == 0 && records && plain_dest(w).is_some(),
    }
}

/// As [`field_set_first`] with plain loads and stores (no update) allowed before the
/// setter, for a field the compare `c` left in the flags: their cold paths, the only ways
/// out of the block before the setter, compute the field again from `c`'s operands first
/// (`Cold::CrfFirst`), so none of the instructions before the setter may write those.
pub(super) fn field_set_past_accesses(words: &[u32], c: &CmpSrc) -> bool {
    for &w in words {
        if sets_field(w, c.bf) {
            return true;
        }
        let (op, i) = (decode(w), Insn(w));
        let written = match (op, plain_dest(w), access_run::plain(op)) {
            (Op::Cmp | Op::Cmpl | Op::Cmpi | Op::Cmpli, _, _) => 0,
            (_, Some(d), _) => d,
            (_, None, Some(true)) => 0,
            (_, None, Some(false)) => 1 << i.rt(),
            _ => return false,
        };
        if written & c.gprs() != 0 {
            return false;
        }
    }
    false
}

/// A compare (or a recording instruction: its result against 0) whose CR field a branch
/// further on can compute again from the same operands ([`Em::recompare`]).
#[derive(Clone, Copy)]
pub(super) struct CmpSrc {
    pub bf: u32,
    pub signed: bool,
    /// A doubleword compare (else the low words).
    pub wide: bool,
    pub a: u32,
    pub b: Operand2,
}

impl CmpSrc {
    fn gprs(&self) -> u32 {
        1 << self.a
            | match self.b {
                Operand2::Gpr(r) => 1 << r,
                Operand2::Imm(_) => 0,
            }
    }

    /// The compare `w` (`cmp`, `cmpl`, `cmpi`, `cmpli`); `None` for any other instruction.
    pub(super) fn of_compare(w: u32) -> Option<Self> {
        let (op, i) = (decode(w), Insn(w));
        let (signed, b) = match op {
            Op::Cmp => (true, Operand2::Gpr(i.rb())),
            Op::Cmpl => (false, Operand2::Gpr(i.rb())),
            Op::Cmpi => (true, Operand2::Imm(i.si() as i32)),
            Op::Cmpli => (false, Operand2::Imm(i.ui() as i32)),
            _ => return None,
        };
        Some(Self {
            bf: i.bf(),
            signed,
            wide: i.l10() != 0,
            a: i.ra(),
            b,
        })
    }

    /// CR0 of a recording instruction whose result is GPR `r`.
    pub(super) fn record(r: u32) -> Self {
        Self {
            bf: 0,
            signed: true,
            wide: true,
            a: r,
            b: Operand2::Imm(0),
        }
    }
}

impl Em {
    /// `GPR rt = GPR a op b` computed in `rt`'s host copy (`op h, b`), not in `rax` and
    /// then copied: for the common integer ops whose result the rest of the block reads
    /// again. False (nothing emitted) when `rt` gets no copy, or when `b` is `rt` itself,
    /// held in that copy, and the op does not commute.
    pub(super) fn in_place(&mut self, op: GprOp, rt: u32, a: u32, b: Operand2, rc: bool) -> bool {
        if !self.caching {
            return false;
        }
        let wanted = self.later[self.k as usize] & 1 << rt != 0;
        let prior = self.cache.find(rt);
        if prior.is_none() && !wanted {
            return false;
        }
        let commutes = matches!(op, GprOp::Add64 | GprOp::And64 | GprOp::Or64 | GprOp::Xor64);
        let (mut a, mut b) = (a, b);
        if b == Operand2::Gpr(rt) && a != rt {
            if commutes {
                (a, b) = (rt, Operand2::Gpr(a));
            } else if prior.is_some() {
                return false;
            }
        }
        let h = match prior {
            Some(h) => h,
            None => self.take_copy(rt),
        };
        // Sources come from copies or homes; none is given a copy here, so that taking one
        // cannot evict `h`.
        if a != rt || prior.is_none() {
            match self.cache_peek(a) {
                Some(c) if c != h => self.reg_reg(GprOp::Load64, h, c),
                _ => self.gpr_home(GprOp::Load64, h, a),
            }
        }
        match b {
            Operand2::Gpr(r) => match self.cache_peek(r) {
                Some(c) if !(r == rt && prior.is_none()) => self.reg_reg(op, h, c),
                _ => self.gpr_home(op, h, r),
            },
            Operand2::Imm(v) => match op {
                GprOp::Add64 => self.ops.alu_imm(AluImm::Add, h, true, v),
                GprOp::And64 => self.ops.alu_imm(AluImm::And, h, true, v),
                GprOp::Or64 => self.ops.alu_imm(AluImm::Or, h, true, v),
                GprOp::Xor64 => self.ops.alu_imm(AluImm::Xor, h, true, v),
                _ => unreachable!("immediate form of {}", op.encoding().1[0]),
            },
        }
        self.store_home(h, rt);
        if rc {
            self.record_from(h);
            self.handoff.cmp_src = Some(CmpSrc::record(rt));
        }
        true
    }

    /// The host copy of GPR `rd` holding GPR `a` (loaded with `load`, `Load64` or
    /// `Load32`), for a one-source result computed in place; `None` (nothing emitted)
    /// when `rd` gets no copy.
    pub(super) fn dest_from(&mut self, rd: u32, a: u32, load: GprOp) -> Option<u8> {
        if !self.caching {
            return None;
        }
        let wanted = self.later[self.k as usize] & 1 << rd != 0;
        let prior = self.cache.find(rd);
        if prior.is_none() && !wanted {
            return None;
        }
        let h = match prior {
            Some(h) => h,
            None => self.take_copy(rd),
        };
        // A copy just taken holds nothing yet.
        match self.cache_peek(a).filter(|_| a != rd || prior.is_some()) {
            Some(c) if c == h => {
                if load == GprOp::Load32 {
                    asm!(self.ops ; mov Rd(h), Rd(h));
                }
            }
            Some(c) => self.reg_reg(load, h, c),
            None => self.gpr_home(load, h, a),
        }
        Some(h)
    }

    /// `GPR rd = ROTL(GPR rs, sh) & m` in `rd`'s host copy (see [`Em::dest_from`]), as a
    /// word (`rlwinm` with a mask in the low word: the source's low word, zero-extended)
    /// or a doubleword (`rldic[lr]`, `rldic`). Shifts become `shl`/`shr`.
    pub(super) fn rotate_in_place(
        &mut self,
        rd: u32,
        rs: u32,
        word: bool,
        sh: u32,
        m: u64,
        rc: bool,
    ) -> bool {
        let load = if word { GprOp::Load32 } else { GprOp::Load64 };
        let Some(h) = self.dest_from(rd, rs, load) else {
            return false;
        };
        let bits = if word { 32 } else { 64 };
        let ones = u64::MAX >> (64 - bits);
        let mut m = m;
        if sh != 0 && m == (ones << sh) & ones {
            match word {
                true => asm!(self.ops ; shl Rd(h), sh as i8),
                false => asm!(self.ops ; shl Rq(h), sh as i8),
            }
            m = ones;
        } else if sh != 0 && m == ones >> (bits - sh) {
            match word {
                true => asm!(self.ops ; shr Rd(h), (bits - sh) as i8),
                false => asm!(self.ops ; shr Rq(h), (bits - sh) as i8),
            }
            m = ones;
        } else if sh != 0 {
            match word {
                true => asm!(self.ops ; rol Rd(h), sh as i8),
                false => asm!(self.ops ; rol Rq(h), sh as i8),
            }
        }
        if m == ones {
        } else if m == 0xffff_ffff {
            // 32-bit operations zero-extend.
            self.reg_reg(GprOp::Load32, h, h);
        } else if word {
            self.ops.alu_imm(AluImm::And, h, false, m as i32);
        } else if m as i64 == m as i32 as i64 {
            self.ops.alu_imm(AluImm::And, h, true, m as i32);
        } else {
            asm!(self.ops ; mov rdx, QWORD m as i64 ; and Rq(h), rdx);
        }
        self.store_home(h, rd);
        if rc {
            self.record_from(h);
            self.handoff.cmp_src = Some(CmpSrc::record(rd));
        }
        true
    }

    /// `divw[u]`/`divd[u]` (without OE: those stay in the interpreter). An undefined
    /// quotient (divide by zero, the most negative number by -1) leaves what the
    /// interpreter leaves: the dividend (its low word, zero-extended, for the word forms).
    /// Dividing by -1 is a negation, which gives exactly that for the most negative number.
    pub(super) fn divide(&mut self, op: Op, i: Insn) {
        use Op::*;
        let (undefined, done) = (self.label(), self.label());
        let word = matches!(op, Divw | Divwu);
        let load = if word { GprOp::Load32 } else { GprOp::Load64 };
        self.gpr_rm(load, RAX, i.ra());
        self.gpr_rm(load, RCX, i.rb());
        asm!(self.ops ; test rcx, rcx ; jz =>undefined);
        match op {
            Divwu => asm!(self.ops ; xor edx, edx ; div ecx),
            Divdu => asm!(self.ops ; xor edx, edx ; div rcx),
            Divw => {
                let ok = self.label();
                asm!(self.ops ; cmp ecx, -1 ; jne =>ok ; neg eax ; jmp =>done ; =>ok ; cdq ; idiv ecx);
            }
            _ => {
                let ok = self.label();
                asm!(self.ops ; cmp rcx, -1 ; jne =>ok ; neg rax ; jmp =>done ; =>ok ; cqo ; idiv rcx);
            }
        }
        asm!(self.ops ; =>undefined ; =>done);
        self.set_rc(i.rt(), i.rc());
    }

    /// `rax |= GPR[ra] & !m` (the insert of `rlwimi`/`rldimi`).
    pub(super) fn insert_under_mask(&mut self, ra: u32, m: u64) {
        asm!(self.ops ; mov rdx, QWORD !m as i64);
        self.gpr_rm(GprOp::And64, RDX, ra);
        asm!(self.ops ; or rax, rdx);
    }
}
