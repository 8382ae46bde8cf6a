//! SPR and MSR moves (the timebase and MSR writes through helpers), `icbi`, barriers and
//! traps: the baseline tier's `system` family (see `table`).

use super::*;
use crate::cpu::spr;

impl Em {
    /// The `system` family's translator: false leaves the instruction to the interpreter.
    pub(super) fn system(&mut self, op: Op, i: Insn, ended: &mut bool) -> bool {
        use Op::*;
        let rt = i.rt();
        match op {
            Mfspr | Mftb if crate::jit::spr::timebase_spr(i.spr(), self.problem_state()) => {
                self.call_inline(Helper::Timebase);
                if i.spr() == spr::TBU_READ {
                    asm!(self.ops ; shr rax, 32);
                }
                self.set_gpr(rt);
            }
            Mfspr | Mftb | Mtspr if i.spr() == spr::XER => self.move_xer(op == Mtspr, rt),
            // `mftb` of another number is `mfspr` of it (the interpreter's `mftb`).
            Mfspr | Mftb | Mtspr => {
                let pr = self.problem_state();
                let Some(p) = crate::jit::spr::plain_spr(i.spr(), op == Mtspr, pr) else {
                    return false;
                };
                let home = ST + p.offset as i32;
                if op != Mtspr {
                    match p.bytes {
                        8 => asm!(self.ops ; mov rax, QWORD [rbx + home]),
                        _ => asm!(self.ops ; mov eax, DWORD [rbx + home]),
                    }
                    self.set_gpr(rt);
                } else {
                    self.gpr_rm(GprOp::Load64, RAX, rt);
                    self.and_mask(p.write_mask);
                    match p.bytes {
                        8 => {
                            asm!(self.ops ; mov QWORD [rbx + home], rax);
                            self.handoff.spr_rax = Some(home);
                        }
                        _ => asm!(self.ops ; mov DWORD [rbx + home], eax),
                    }
                }
            }
            Mfmsr if !self.problem_state() => {
                asm!(self.ops ; mov rax, QWORD [rbx + MSR]);
                self.set_gpr(rt);
            }
            Mtmsr | Mtmsrd | Rfid if !self.problem_state() => self.write_msr(op, i, ended),
            Icbi if !self.guarded => self.icbi(i),
            // The host orders memory as strongly as the interpreter's fences ask (x86 TSO:
            // only `sync`'s sequentially consistent fence needs an instruction); `ptesync`
            // also performs a pending TLB flush, in the interpreter.
            Sync if i.l_sync() == 1 => {}
            Sync if i.l_sync() != 2 => asm!(self.ops ; mfence),
            Eieio => {}
            Isync => self.isync(i),
            Tdi | Twi => self.trap_immediate(op, i),
            _ => return false,
        }
        true
    }
}

impl Em {
    /// The block runs in problem state (MSR[PR] is part of its key).
    fn problem_state(&self) -> bool {
        self.key.flags & msr::PR != 0
    }

    /// `mfxer`/`mtxer` (`write`): XER composed from and split into its fields as
    /// `CpuState::xer`/`set_xer` do (SO, OV, CA, the reserved bits kept, the byte count).
    fn move_xer(&mut self, write: bool, r: u32) {
        const OV: i32 = ST + offset_of!(CpuState, ov) as i32;
        const BC: i32 = ST + offset_of!(CpuState, xer_bc) as i32;
        const RSVD: i32 = ST + offset_of!(CpuState, xer_rsvd) as i32;
        let rsvd = crate::cpu::XER_RESERVED as i32;
        if write {
            self.gpr_rm(GprOp::Load64, RAX, r);
            asm!(self.ops
                ; mov ecx, eax ; shr ecx, 31 ; mov BYTE [rbx + SO], cl
                ; mov ecx, eax ; shr ecx, 30 ; and ecx, 1 ; mov BYTE [rbx + OV], cl
                ; mov ecx, eax ; shr ecx, 29 ; and ecx, 1 ; mov BYTE [rbx + CA], cl
                ; mov ecx, eax ; and ecx, rsvd ; mov DWORD [rbx + RSVD], ecx
                ; and eax, 0x7f ; mov BYTE [rbx + BC], al
            );
        } else {
            asm!(self.ops
                ; movzx eax, BYTE [rbx + SO] ; shl eax, 31
                ; movzx ecx, BYTE [rbx + OV] ; shl ecx, 30 ; or eax, ecx
                ; movzx ecx, BYTE [rbx + CA] ; shl ecx, 29 ; or eax, ecx
                ; or eax, DWORD [rbx + RSVD]
                ; movzx ecx, BYTE [rbx + BC] ; or eax, ecx
            );
            self.set_gpr(r);
        }
    }

    /// `mtmsr`, `mtmsrd`, `rfid` (supervisor state: the block key says so) as a call of
    /// `helpers::write_msr`, which stops the block only when the new MSR needs the run loop.
    /// The block ends after them (the ISA table's `ends_block`): `rfid` goes on to SRR0
    /// through the probe, the others to the next instruction.
    fn write_msr(&mut self, op: Op, i: Insn, ended: &mut bool) {
        self.store_pc(self.pc);
        asm!(self.ops ; mov edx, i.0 as i32 ; mov ecx, op as i32);
        self.call_inline(Helper::WriteMsr);
        let stop = self.label();
        asm!(self.ops ; test rax, rax ; jnz =>stop);
        self.cold.push(Cold::Interp {
            at: stop,
            k: self.k,
        });
        if op == Op::Rfid {
            asm!(self.ops ; mov rax, QWORD [rbx + PC]);
            self.exit_indirect(self.k + 1);
            *ended = true;
        }
    }

    /// `icbi`: what the interpreter does (a one-byte load at the cache block for the
    /// protection check, then the block's translations dropped) is needed only when the
    /// host page may hold translated code, which `JitShared`'s host-page filter says; a TLB
    /// read miss or a marked page runs the interpreter. (Host-guarded memory has no TLB
    /// entries to test: the interpreter always.)
    fn icbi(&mut self, i: Insn) {
        use crate::jit::cache::{FILTER_HASH, FILTER_HASH_SHIFT};
        let (slow, back) = (self.label(), self.label());
        self.ea(Op::Icbi, i, false);
        asm!(self.ops ; and r13, -(crate::interp::CACHE_BLOCK as i32));
        self.tlb_hit(self.idx_read, offset_of!(TlbEntry, read), 1, slow);
        // `cache::code_host_bit` of the host address (of its 4 KiB page).
        asm!(self.ops
            ; lea rax, [rcx + r13]
            ; shr rax, 12
            ; mov rdx, QWORD FILTER_HASH as i64
            ; imul rax, rdx
            ; shr rax, FILTER_HASH_SHIFT as i8
            ; mov ecx, eax
            ; and ecx, 63
            ; shr eax, 6
            ; mov rdx, QWORD [r12 + CODE_HOSTS]
            ; mov rdx, QWORD [rdx + rax * 8]
            ; bt rdx, rcx
            ; jc =>slow
            ; =>back
        );
        self.interp_slow(slow, back, Op::Icbi, i);
    }

    /// `isync`: nothing to do unless a local TLB flush is pending (the interpreter does it).
    pub(super) fn isync(&mut self, i: Insn) {
        let (slow, back) = (self.label(), self.label());
        asm!(self.ops ; cmp BYTE [rbx + TLB_FLUSH_PENDING], 0 ; jne =>slow ; =>back);
        self.interp_slow(slow, back, Op::Isync, i);
    }

    /// `tdi`/`twi`: the TO conditions tested inline; when one holds the interpreter runs the
    /// instruction (and raises the trap).
    pub(super) fn trap_immediate(&mut self, op: Op, i: Insn) {
        let to = i.rt();
        if to == 0 {
            return;
        }
        if op == Op::Twi {
            self.gpr_rm(GprOp::Load32Signed, RAX, i.ra());
        } else {
            self.gpr_rm(GprOp::Load64, RAX, i.ra());
        }
        // Word traps compare sign-extended words, which keeps their unsigned order too.
        let (trap, over) = (self.label(), self.label());
        asm!(self.ops ; cmp rax, i.si() as i32);
        if to & 16 != 0 {
            asm!(self.ops ; jl =>trap);
        }
        if to & 8 != 0 {
            asm!(self.ops ; jg =>trap);
        }
        if to & 4 != 0 {
            asm!(self.ops ; je =>trap);
        }
        if to & 2 != 0 {
            asm!(self.ops ; jb =>trap);
        }
        if to & 1 != 0 {
            asm!(self.ops ; ja =>trap);
        }
        asm!(self.ops ; jmp =>over ; =>trap);
        self.fallback(op, i.0);
        asm!(self.ops ; =>over);
    }
}
