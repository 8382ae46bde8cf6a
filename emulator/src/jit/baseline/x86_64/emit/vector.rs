//! VMX, VSX and FP-register moves and permutes (their loads and stores are `memory`'s): the
//! baseline tier's `vector` family (see `table`).

use super::*;

/// `lvsl`/`lvsr` with a zero shift, host byte order (byte j = element 15 - j).
static LVSL_BASE: [u8; 16] = [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0];
static LVSR_BASE: [u8; 16] = [
    31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
];

impl Em {
    /// The `vector` family's translator: false leaves the instruction to the interpreter.
    pub(super) fn vector(&mut self, op: Op, i: Insn, _ended: &mut bool) -> bool {
        use Op::*;
        let ra = i.ra();
        match op {
            Vaddubm | Vadduhm | Vadduwm | Vaddudm | Vsububm | Vsubuhm | Vsubuwm | Vsubudm
            | Vminub | Vmaxub | Vcmpequb | Vcmpequh | Vcmpequw | Vcmpgtsb | Vcmpgtsh | Vcmpgtsw
            | Vpkuhum | Vpkuwum | Vpkudum | Vslb | Vspltisb | Vspltish | Vspltisw | Vand
            | Vandc | Vor | Vxor | Vnor | Vsldoi
                if self.key.flags & msr::VEC != 0 =>
            {
                self.vector_sse(op, i)
            }
            Vperm if self.key.flags & msr::VEC != 0 && is_x86_feature_detected!("ssse3") => {
                self.vector_sse(op, i)
            }
            Lvsl | Lvsr if self.key.flags & msr::VEC != 0 => self.shift_vector(op, i),
            Vgbbd if self.key.flags & msr::VEC != 0 => self.gather_bits_by_bytes(i),
            Vbpermq if self.key.flags & msr::VEC != 0 && is_x86_feature_detected!("ssse3") => {
                self.bit_permute(i)
            }
            Xxspltw if self.key.flags & msr::VSX != 0 => {
                // Word UIM is host lane 3 - UIM, copied to every lane.
                let l = 3 - (i.uim() & 3) as u8;
                asm!(self.ops
                    ; movups xmm0, [rbx + vsr(i.xb())]
                    ; pshufd xmm0, xmm0, (l * 0x55) as i8
                    ; movups [rbx + vsr(i.xt())], xmm0
                );
            }
            Xxland | Xxlandc | Xxlor | Xxlorc | Xxlxor | Xxlnor | Xxpermdi
                if self.key.flags & msr::VSX != 0 =>
            {
                self.vector_sse(op, i)
            }
            // Doubleword 0 of a VSR (the high half of its home); doubleword 1 keeps its value.
            Mfvsrd | Mtvsrd | Mfvsrwz | Mtvsrwz if self.vsr_half_on(i.xt()) => {
                let dw0 = vsr(i.xt()) + 8;
                match op {
                    Mfvsrd => asm!(self.ops ; mov rax, QWORD [rbx + dw0]),
                    Mfvsrwz => asm!(self.ops ; mov eax, DWORD [rbx + dw0]),
                    Mtvsrd => {
                        self.gpr_rm(GprOp::Load64, RAX, ra);
                        asm!(self.ops ; mov QWORD [rbx + dw0], rax);
                    }
                    _ => {
                        self.gpr_rm(GprOp::Load32, RAX, ra);
                        asm!(self.ops ; mov QWORD [rbx + dw0], rax);
                    }
                }
                if matches!(op, Mfvsrd | Mfvsrwz) {
                    self.set_gpr(ra);
                }
            }
            _ => return false,
        }
        true
    }
}

impl Em {
    /// The vector ops glibc's and gcc's vectorised loops run most, on SSE2. A register's
    /// home is a `u128` whose element 0 is the most significant, so host lanes hold the
    /// elements from the last one up: element-wise ops need no reordering, and the packs
    /// take VRB's elements into the low host lanes.
    pub(super) fn vector_sse(&mut self, op: Op, i: Insn) {
        use Op::*;
        let (t, a, b) = match op {
            Xxland | Xxlandc | Xxlor | Xxlorc | Xxlxor | Xxlnor | Xxpermdi => {
                (vsr(i.xt()), vsr(i.xa()), vsr(i.xb()))
            }
            _ => (vsr(32 + i.rt()), vsr(32 + i.ra()), vsr(32 + i.rb())),
        };
        if matches!(op, Vspltisb | Vspltish | Vspltisw) {
            // The immediate in every element: the 32-bit pattern of that element size.
            let imm = i.simm() as i32;
            let word = match op {
                Vspltisb => (imm as u8 as u32).wrapping_mul(0x0101_0101),
                Vspltish => (imm as u16 as u32).wrapping_mul(0x0001_0001),
                _ => imm as u32,
            };
            asm!(self.ops ; mov eax, word as i32 ; movd xmm0, eax ; pshufd xmm0, xmm0, 0);
        } else {
            asm!(self.ops ; movups xmm0, [rbx + a] ; movups xmm1, [rbx + b]);
        }
        match op {
            Vaddubm => asm!(self.ops ; paddb xmm0, xmm1),
            Vadduhm => asm!(self.ops ; paddw xmm0, xmm1),
            Vadduwm => asm!(self.ops ; paddd xmm0, xmm1),
            Vaddudm => asm!(self.ops ; paddq xmm0, xmm1),
            Vsububm => asm!(self.ops ; psubb xmm0, xmm1),
            Vsubuhm => asm!(self.ops ; psubw xmm0, xmm1),
            Vsubuwm => asm!(self.ops ; psubd xmm0, xmm1),
            Vsubudm => asm!(self.ops ; psubq xmm0, xmm1),
            Vminub => asm!(self.ops ; pminub xmm0, xmm1),
            Vmaxub => asm!(self.ops ; pmaxub xmm0, xmm1),
            Vcmpequh => asm!(self.ops ; pcmpeqw xmm0, xmm1),
            Vcmpequw => asm!(self.ops ; pcmpeqd xmm0, xmm1),
            Vcmpgtsb => asm!(self.ops ; pcmpgtb xmm0, xmm1),
            Vcmpgtsh => asm!(self.ops ; pcmpgtw xmm0, xmm1),
            Vcmpgtsw => asm!(self.ops ; pcmpgtd xmm0, xmm1),
            // VRA || VRB shifted left by SHB bytes: with the home's bytes in little-endian
            // order, byte shifts of the two halves.
            Vsldoi => {
                let sh = i.shb() as i8;
                asm!(self.ops ; pslldq xmm0, sh ; psrldq xmm1, 16 - sh ; por xmm0, xmm1);
            }
            // Byte k of VRT (big-endian numbering) is byte VRC[k] & 31 of VRA || VRB. Host
            // byte j is element 15 - j, so each half is shuffled by (~VRC & 15), and bit 4
            // of VRC picks the half.
            Vperm => {
                let c = vsr(32 + i.frc());
                asm!(self.ops
                    ; movups xmm2, [rbx + c]
                    ; mov eax, 0x0f0f_0f0f ; movd xmm3, eax ; pshufd xmm3, xmm3, 0
                    ; movdqa xmm4, xmm2 ; pandn xmm4, xmm3
                    ; pshufb xmm0, xmm4 ; pshufb xmm1, xmm4
                    ; mov eax, 0x1010_1010 ; movd xmm3, eax ; pshufd xmm3, xmm3, 0
                    ; pand xmm2, xmm3 ; pcmpeqb xmm2, xmm3
                    ; pand xmm1, xmm2 ; pandn xmm2, xmm0 ; por xmm2, xmm1 ; movdqa xmm0, xmm2
                );
            }
            Vor | Xxlor => asm!(self.ops ; por xmm0, xmm1),
            Vand | Xxland => asm!(self.ops ; pand xmm0, xmm1),
            Vxor | Xxlxor => asm!(self.ops ; pxor xmm0, xmm1),
            // `pandn` complements its destination: ~b & a.
            Vandc | Xxlandc => asm!(self.ops ; pandn xmm1, xmm0 ; movaps xmm0, xmm1),
            Vnor | Xxlnor => asm!(self.ops ; por xmm0, xmm1 ; pcmpeqd xmm2, xmm2 ; pxor xmm0, xmm2),
            Xxlorc => asm!(self.ops ; pcmpeqd xmm2, xmm2 ; pxor xmm1, xmm2 ; por xmm0, xmm1),
            Vcmpequb => asm!(self.ops ; pcmpeqb xmm0, xmm1),
            Vslb => {
                // SSE has no per-byte variable shift: shift by 1, 2 and 4 where the count's
                // bit says so (bytes selected with a compare mask).
                for sh in [1u8, 2, 4] {
                    let splat = |b: u8| (b as u32 * 0x0101_0101) as i32;
                    asm!(self.ops
                        ; mov eax, splat(sh) ; movd xmm2, eax ; pshufd xmm2, xmm2, 0
                        ; movdqa xmm3, xmm1 ; pand xmm3, xmm2 ; pcmpeqb xmm3, xmm2
                        ; mov eax, splat(0xff << sh) ; movd xmm5, eax ; pshufd xmm5, xmm5, 0
                        ; movdqa xmm4, xmm0 ; psllw xmm4, sh as i8 ; pand xmm4, xmm5
                        ; pand xmm4, xmm3 ; pandn xmm3, xmm0 ; por xmm3, xmm4 ; movdqa xmm0, xmm3
                    );
                }
            }
            // Modulo packs: the low half of each element, sign-extended in place so that the
            // saturating pack keeps it exactly.
            Vpkuwum => asm!(self.ops
                ; pslld xmm0, 16 ; psrad xmm0, 16 ; pslld xmm1, 16 ; psrad xmm1, 16
                ; packssdw xmm1, xmm0 ; movaps xmm0, xmm1
            ),
            Vpkuhum => asm!(self.ops
                ; psllw xmm0, 8 ; psraw xmm0, 8 ; psllw xmm1, 8 ; psraw xmm1, 8
                ; packsswb xmm1, xmm0 ; movaps xmm0, xmm1
            ),
            // The low words of VRB's doublewords, then VRA's.
            Vpkudum => asm!(self.ops ; shufps xmm1, xmm0, 0x88u8 as i8 ; movaps xmm0, xmm1),
            Xxpermdi => {
                // XT's doubleword 0 (host lane 1) from XA, doubleword 1 (lane 0) from XB:
                // DM's high bit picks XA's doubleword 1 (lane 0), its low bit XB's.
                let dm = i.dm();
                let imm = (dm & 1 == 0) as i8 | ((dm & 2 == 0) as i8) << 1;
                asm!(self.ops ; shufpd xmm1, xmm0, imm ; movaps xmm0, xmm1);
            }
            _ => {}
        }
        asm!(self.ops ; movups [rbx + t], xmm0);
        let compare = matches!(
            op,
            Vcmpequb | Vcmpequh | Vcmpequw | Vcmpgtsb | Vcmpgtsh | Vcmpgtsw
        );
        if compare && i.bit21() != 0 {
            // CR6: 8 when every element compared true, 2 when none did.
            asm!(self.ops
                ; pmovmskb eax, xmm0
                ; xor ecx, ecx
                ; mov edx, 8
                ; cmp eax, 0xffff
                ; cmove ecx, edx
                ; mov edx, 2
                ; test eax, eax
                ; cmovz ecx, edx
            );
            self.insert_crf(6);
        }
    }

    /// `lvsl`/`lvsr`: the permute control for the EA's low four bits, no memory access.
    /// Host byte j is big-endian element 15 - j: lvsl's is sh + 15 - j, lvsr's 31 - sh - j.
    pub(super) fn shift_vector(&mut self, op: Op, i: Insn) {
        self.ea(op, i, false);
        let base: &'static [u8; 16] = if op == Op::Lvsl {
            &LVSL_BASE
        } else {
            &LVSR_BASE
        };
        asm!(self.ops
            ; mov eax, r13d ; and eax, 15 ; imul eax, eax, 0x0101_0101
            ; movd xmm1, eax ; pshufd xmm1, xmm1, 0
            ; mov rax, QWORD base.as_ptr() as i64 ; movups xmm0, [rax]
        );
        if op == Op::Lvsl {
            asm!(self.ops ; paddb xmm0, xmm1);
        } else {
            asm!(self.ops ; psubb xmm0, xmm1);
        }
        asm!(self.ops ; movups [rbx + vsr(32 + i.rt())], xmm0);
    }

    /// `xmm{x}` = the 64-bit constant `m` in both lanes (clobbers `rax`).
    fn splat_qword(&mut self, x: u8, m: u64) {
        asm!(self.ops ; mov rax, QWORD m as i64 ; movq Rx(x), rax ; punpcklqdq Rx(x), Rx(x));
    }

    /// `vgbbd`: the 8×8 bit matrix of each doubleword (bytes × bits) transposed. A
    /// doubleword's value has byte a, bit b (counting from the least significant) at bit
    /// 8a + b, so the transpose swaps bits 8a + b and 8b + a: three exchanges of the bits
    /// 7, 14 and 28 places apart that the masks select (1×1, 2×2, then 4×4 blocks), on
    /// both lanes at once.
    pub(super) fn gather_bits_by_bytes(&mut self, i: Insn) {
        asm!(self.ops ; movups xmm0, [rbx + vsr(32 + i.rb())]);
        for (sh, m) in [
            (7, 0x00aa_00aa_00aa_00aau64),
            (14, 0x0000_cccc_0000_cccc),
            (28, 0x0000_0000_f0f0_f0f0),
        ] {
            self.splat_qword(2, m);
            asm!(self.ops
                ; movdqa xmm1, xmm0 ; psrlq xmm1, sh ; pxor xmm1, xmm0 ; pand xmm1, xmm2
                ; pxor xmm0, xmm1 ; psllq xmm1, sh ; pxor xmm0, xmm1
            );
        }
        asm!(self.ops ; movups [rbx + vsr(32 + i.rt())], xmm0);
    }

    /// `vbpermq`: byte k of VRB (k < 128) picks bit k of VRA (0 = the most significant);
    /// the 16 bits form the low halfword of doubleword 0, the rest is 0. Per host lane:
    /// `pshufb` fetches VRA's byte (host byte 15 - k/8; an index with bit 7 set, k ≥ 128,
    /// gives 0) and the bit's mask (0x80 >> k%8), and `pmovmskb` collects the zero tests in
    /// host lane order, which is the result's bit order (inverted).
    pub(super) fn bit_permute(&mut self, i: Insn) {
        let splat = |b: u8| (b as u32 * 0x0101_0101) as i32;
        asm!(self.ops
            ; movups xmm0, [rbx + vsr(32 + i.ra())]
            ; movups xmm1, [rbx + vsr(32 + i.rb())]
            // Byte selectors: ((k >> 3) & 15) ^ 15, with k's bit 7.
            ; movdqa xmm2, xmm1 ; psrlw xmm2, 3
            ; mov eax, splat(0x0f) ; movd xmm3, eax ; pshufd xmm3, xmm3, 0
            ; pand xmm2, xmm3 ; pxor xmm2, xmm3
            ; mov eax, splat(0x80) ; movd xmm4, eax ; pshufd xmm4, xmm4, 0
            ; pand xmm4, xmm1 ; por xmm2, xmm4
            ; pshufb xmm0, xmm2
            // Bit masks 0x80 >> (k & 7), from a table in both quadwords.
            ; mov rax, QWORD 0x0102_0408_1020_4080 ; movq xmm3, rax ; punpcklqdq xmm3, xmm3
            ; pshufb xmm3, xmm1
            ; pand xmm0, xmm3 ; pxor xmm4, xmm4 ; pcmpeqb xmm0, xmm4
            ; pmovmskb eax, xmm0 ; xor eax, 0xffff
            ; mov QWORD [rbx + vsr(32 + i.rt()) + 8], rax
            ; mov QWORD [rbx + vsr(32 + i.rt())], 0
        );
    }

    /// The facility a VSR half move needs is on in this block's MSR state: FP for VSRs
    /// 0-31, VMX for 32-63 (else the interpreter raises the unavailable interrupt).
    pub(super) fn vsr_half_on(&self, x: u32) -> bool {
        self.key.flags & if x < 32 { msr::FP } else { msr::VEC } != 0
    }
}
