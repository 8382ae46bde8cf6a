//! Loads, stores, the reservation pair and cache block operations: the baseline tier's
//! `memory` family (see `table`), with the TLB and host-guarded hit tests they share.

use super::*;

/// `rax` = the `size` bytes at the memory operand `[$m]`, zero-extended.
macro_rules! load_sized {
    ($ops:expr, $size:expr, $($m:tt)*) => {
        match $size {
            1 => asm!($ops ; movzx eax, BYTE [$($m)*]),
            2 => asm!($ops ; movzx eax, WORD [$($m)*]),
            4 => asm!($ops ; mov eax, DWORD [$($m)*]),
            _ => asm!($ops ; mov rax, QWORD [$($m)*]),
        }
    };
}

/// The low `size` bytes of register `$v` stored at the memory operand `[$m]`.
macro_rules! store_sized {
    ($ops:expr, $size:expr, $v:expr, $($m:tt)*) => {
        match $size {
            1 => asm!($ops ; mov BYTE [$($m)*], Rb($v)),
            2 => asm!($ops ; mov WORD [$($m)*], Rw($v)),
            4 => asm!($ops ; mov DWORD [$($m)*], Rd($v)),
            _ => asm!($ops ; mov QWORD [$($m)*], Rq($v)),
        }
    };
}

/// Where a fast access finds the host bytes of its guest address after its hit test.
#[derive(Clone, Copy)]
pub(super) enum HostAt {
    /// At `rcx` + the address: `rcx` holds the page's addend (the TLB's, or a flat base too
    /// far from 0 for a displacement).
    Rcx,
    /// At the address + `base`: host-guarded memory reserved below 2 GiB.
    Base(i32),
}

impl HostAt {
    /// The displacement of an access to `ea`.
    fn disp(self, ea: Ea) -> i32 {
        match self {
            HostAt::Rcx => ea.disp,
            HostAt::Base(b) => b + ea.disp,
        }
    }
}

/// A guest address as a register plus a displacement: `r13` + 0, or an access off a base
/// register's copy ([`Em::load_ea`], [`Em::store`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ea {
    pub reg: u8,
    pub disp: i32,
}

impl Ea {
    pub const R13: Ea = Ea { reg: R13, disp: 0 };
}

impl Em {
    /// The `memory` family's translator: false leaves the instruction to the interpreter.
    pub(super) fn memory(&mut self, op: Op, i: Insn, _ended: &mut bool) -> bool {
        use Op::*;
        let info = op.info();
        let rt = i.rt();
        let ra = i.ra();
        match op {
            _ if gpr_load(op) => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && (ra == 0 || ra == rt) {
                    return false;
                }
                let size = info.size as u32;
                let reversed = matches!(op, Lhbrx | Lwbrx | Ldbrx);
                let ea = self.load_ea(op, i, update);
                self.load(size, self.le != reversed, ea);
                self.extend_algebraic(op, size);
                self.set_gpr(rt);
                if update {
                    self.gpr_rm(GprOp::Store64, R13, ra);
                }
            }
            _ if gpr_store(op) => {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                let reversed = matches!(op, Sthbrx | Stwbrx | Stdbrx);
                let off_base = self.off_base(op, i, update);
                if off_base.is_none() {
                    self.ea(op, i, update);
                }
                let update_ra = update.then_some(ra);
                self.store(
                    StoreSrc::Gpr(rt),
                    info.size as u32,
                    self.le != reversed,
                    update_ra,
                    off_base,
                );
                if update {
                    self.gpr_rm(GprOp::Store64, R13, ra);
                }
            }
            Lfd | Lfdu | Lfdx | Lfdux | Stfd | Stfdu | Stfdx | Stfdux
                if self.key.flags & msr::FP != 0 =>
            {
                let update = info.flags.contains(InsnFlags::UPDATE);
                if update && ra == 0 {
                    return false;
                }
                self.fp_doubleword(op, i, i.rt(), update);
            }
            Lxsdx | Stxsdx if self.key.flags & msr::VSX != 0 => {
                self.fp_doubleword(op, i, i.xt(), false)
            }
            Lvx | Stvx if self.le && self.key.flags & msr::VEC != 0 => self.quadword(op, i),
            Lxvd2x | Stxvd2x if self.le && self.key.flags & msr::VSX != 0 => self.quadword(op, i),
            Dcbz => self.zero_block(op, i),
            Dcbst | Dcbf => self.cache_flush(op, i),
            // Cache hints have no architectural effect (and never fault).
            Dcbt | Dcbtst => {}
            Lbarx | Lharx | Lwarx | Ldarx => self.load_reserve(op, i),
            StbcxDot | SthcxDot | StwcxDot | StdcxDot => self.store_conditional(op, i),
            _ => return false,
        }
        true
    }
}

/// The loads into a GPR.
const fn gpr_load(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        Lbz | Lbzu
            | Lbzx
            | Lbzux
            | Lhz
            | Lhzu
            | Lhzx
            | Lhzux
            | Lha
            | Lhau
            | Lhax
            | Lhaux
            | Lwz
            | Lwzu
            | Lwzx
            | Lwzux
            | Lwa
            | Lwax
            | Lwaux
            | Ld
            | Ldu
            | Ldx
            | Ldux
            | Lhbrx
            | Lwbrx
            | Ldbrx
    )
}

/// The stores from a GPR.
const fn gpr_store(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        Stb | Stbu
            | Stbx
            | Stbux
            | Sth
            | Sthu
            | Sthx
            | Sthux
            | Stw
            | Stwu
            | Stwx
            | Stwux
            | Std
            | Stdu
            | Stdx
            | Stdux
            | Sthbrx
            | Stwbrx
            | Stdbrx
    )
}

/// An indexed (X-form) load or store without update (`Some(true)`: a store): what it
/// writes is RT at most, as for a D-form one ([`super::access_run::plain`]).
pub(super) const fn plain_indexed(op: Op) -> Option<bool> {
    use Op::*;
    match op {
        Lbzx | Lhzx | Lhax | Lwzx | Lwax | Ldx | Lhbrx | Lwbrx | Ldbrx => Some(false),
        Stbx | Sthx | Stwx | Stdx | Sthbrx | Stwbrx | Stdbrx => Some(true),
        _ => None,
    }
}

/// The loads into and stores from a GPR: translated by [`Em::load`] and [`Em::store`],
/// whose out-of-line paths store dirty copies home (`table::WRITE_BACK`).
pub(super) const fn gpr_access(op: Op) -> bool {
    gpr_load(op) || gpr_store(op)
}

impl Em {
    /// Effective address into `r13`: `D(RA|0)`, `DS(RA|0)`, `(RA|0)+RB` (RA for updates).
    pub(super) fn ea(&mut self, op: Op, i: Insn, update: bool) {
        let ra = i.ra();
        let base = update || ra != 0;
        match (displacement(op, i), base) {
            (Some(d), true) => self.base_plus(ra, d),
            (Some(d), false) => asm!(self.ops ; mov r13, d as i32),
            (None, true) => {
                self.gpr_rm(GprOp::Load64, R13, i.rb());
                self.gpr_rm(GprOp::Add64, R13, ra);
            }
            (None, false) => {
                self.gpr_rm(GprOp::Load64, R13, i.rb());
            }
        }
    }

    /// Where a GPR load's EA is: in host-guarded memory, for a D- or DS-form access off a
    /// base register (not an update form), the base's copy itself and the displacement,
    /// which the test (of the base: an EA up to 32 KiB outside the range faults in its
    /// guards, `user::mem`'s `GUARD`) and the access use directly (the miss path adds them);
    /// else `r13` ([`Em::ea`]).
    fn load_ea(&mut self, op: Op, i: Insn, update: bool) -> Ea {
        if let Some((ra, disp)) = self.off_base(op, i, update)
            && let Some(reg) = self.copy_for(ra)
        {
            return Ea { reg, disp };
        }
        self.ea(op, i, update);
        Ea::R13
    }

    /// The base GPR and displacement of a D- or DS-form access (not an update form, RA not
    /// 0) that may address off the base's copy: in host-guarded memory only (the TLB test
    /// needs the EA in `r13`).
    fn off_base(&self, op: Op, i: Insn, update: bool) -> Option<(u32, i32)> {
        let d = displacement(op, i).filter(|_| self.guarded && !update && i.ra() != 0)?;
        Some((i.ra(), d as i32))
    }

    /// `r13` = GPR `ra` + `d` (a 16-bit displacement).
    pub(super) fn base_plus(&mut self, ra: u32, d: i64) {
        match self.copy_for(ra) {
            Some(h) if d == 0 => self.reg_reg(GprOp::Load64, R13, h),
            Some(h) => self.ops.lea(R13, h, d as i32),
            None => {
                self.gpr_rm(GprOp::Load64, R13, ra);
                if d != 0 {
                    self.ops.alu_imm(AluImm::Add, R13, true, d as i32);
                }
            }
        }
    }

    /// TLB hit test for `size` bytes at `r13` in MMU index `idx` (`tag`: offset of the tag
    /// in `TlbEntry`): jumps to `miss` unless the page is cached and the access aligned;
    /// on a hit `rcx` = the page's addend (host − guest address), so that the access is at
    /// `[rcx + r13]`. With a flat address space the addend is a constant: the access does
    /// not wait for the entry's. For the accesses the ISA requires aligned (the
    /// reservation pair); plain ones use [`Em::host_address`].
    pub(super) fn tlb_hit(&mut self, idx: i32, tag: usize, size: u32, miss: DynamicLabel) {
        self.tlb_test(idx, &[tag], size, Fit::Aligned, miss);
    }

    /// The TLB hit test `fit` asks for (see [`Fit`]).
    /// `tags`: the entry's tags that must all match (a run that loads and stores: read and
    /// write).
    pub(super) fn tlb_test(
        &mut self,
        idx: i32,
        tags: &[usize],
        size: u32,
        fit: Fit,
        miss: DynamicLabel,
    ) {
        let base = idx * TLB_IDX_BYTES;
        let addend = base + offset_of!(TlbEntry, addend) as i32;
        let (entry_bits, page_bits) = (
            size_of::<TlbEntry>().trailing_zeros(),
            PAGE_MASK.trailing_zeros(),
        );
        if std::arch::is_x86_feature_detected!("bmi2") {
            // The rotated-in low bits fall outside the mask: one instruction for two.
            asm!(self.ops ; rorx eax, r13d, (page_bits - entry_bits) as i8);
        } else {
            asm!(self.ops ; mov eax, r13d ; shr eax, (page_bits - entry_bits) as i8);
        }
        asm!(self.ops ; and eax, ((TLB_ENTRIES - 1) << entry_bits) as i32);
        match fit {
            // The page of the access's last byte: a page crossing compares the next page
            // with this page's entry and misses.
            Fit::InPage => {
                self.ops.lea(RCX, R13, size as i32 - 1);
                asm!(self.ops ; and rcx, PAGE_MASK as i32);
            }
            // Up to 8 bytes, the alignment bits stay in the compared address (one compare
            // for the page and the alignment); quadwords only need to stay inside the page.
            Fit::Aligned => {
                let compared = if size > 8 {
                    PAGE_MASK
                } else {
                    fast_path_mask(size)
                };
                asm!(self.ops ; mov rcx, r13 ; and rcx, compared as i32);
            }
        }
        for &tag in tags {
            asm!(self.ops
                ; cmp rcx, QWORD [r14 + rax + base + tag as i32]
                ; jne =>miss
            );
        }
        if size > 8 && fit == Fit::Aligned {
            // Quadwords need not be aligned, only inside the page.
            asm!(self.ops
                ; mov edx, r13d
                ; and edx, !PAGE_MASK as i32
                ; cmp edx, (PAGE_SIZE - size as u64) as i32
                ; ja =>miss
            );
        }
        match self.flat {
            Some(base) => asm!(self.ops ; mov rcx, QWORD base as i64),
            None => asm!(self.ops ; mov rcx, QWORD [r14 + rax + addend]),
        }
    }

    /// The hit test of a plain access (what the host does for it is what the guest's page
    /// allows): the TLB's, or host-guarded memory's. Plain loads and stores raise no
    /// alignment interrupt, so an unaligned one inside a page takes the fast path: on a
    /// Linux build 4.2 M of 10 M slow-path accesses were unaligned hits (linux-make N = 1).
    pub(super) fn host_address(
        &mut self,
        idx: i32,
        tag: usize,
        size: u32,
        miss: DynamicLabel,
    ) -> HostAt {
        self.host_address_of(Ea::R13, idx, tag, size, miss)
    }

    /// [`Em::host_address`] of the address at `ea` (`r13` unless host-guarded).
    fn host_address_of(
        &mut self,
        ea: Ea,
        idx: i32,
        tag: usize,
        size: u32,
        miss: DynamicLabel,
    ) -> HostAt {
        if self.guarded {
            self.guarded_address(ea.reg, miss)
        } else {
            debug_assert!(ea == Ea::R13, "the TLB test reads r13");
            self.tlb_test(idx, &[tag], size, Fit::InPage, miss);
            HostAt::Rcx
        }
    }

    /// Host-guarded memory's hit test: jumps to `miss` unless the address in `tested`
    /// (`r13`, or for a run the OR of its first and last byte's) is in the process's range.
    /// The range's base is a displacement when it fits one (the range was reserved low,
    /// `user::mem::span::LOW_BASE`), else loaded into `rcx`. The caller marks its access
    /// instructions with [`Em::fault_site`]; page protections do the rest.
    pub(super) fn guarded_address(&mut self, tested: u8, miss: DynamicLabel) -> HostAt {
        let base = self.flat.expect("guarded memory is flat");
        asm!(self.ops
            ; test Rq(tested), QWORD [r12 + BEYOND_USER_SPAN]
            ; jnz =>miss
        );
        match i32::try_from(base) {
            Ok(d) => HostAt::Base(d),
            Err(_) => {
                asm!(self.ops ; mov rcx, QWORD base as i64);
                HostAt::Rcx
            }
        }
    }

    /// The next instruction accesses guest memory after [`Em::host_address`]: with
    /// host-guarded memory, a host fault on it resumes at `miss`.
    pub(super) fn fault_site(&mut self, miss: DynamicLabel) {
        if self.guarded {
            self.sites.push((self.ops.offset().0 as u32, miss));
        }
    }

    /// `dcbst`/`dcbf`: a one-byte load for storage protection and nothing else, as the
    /// interpreter does them (a miss or a fault runs the interpreter).
    pub(super) fn cache_flush(&mut self, op: Op, i: Insn) {
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        let at = self.host_address(self.idx_read, offset_of!(TlbEntry, read), 1, slow);
        self.fault_site(slow);
        self.read_host(1, at, Ea::R13);
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `dcbz`: the aligned 128-byte block around the EA zeroed through a fast write entry
    /// (it never crosses a page); the slow path is the interpreter's.
    pub(super) fn zero_block(&mut self, op: Op, i: Insn) {
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        let block = crate::interp::CACHE_BLOCK as i32;
        asm!(self.ops ; and r13, -block);
        self.tlb_hit(self.idx_write, offset_of!(TlbEntry, write), 1, slow);
        asm!(self.ops ; xorps xmm0, xmm0);
        for k in 0..block / 16 {
            asm!(self.ops ; movups [rcx + r13 + 16 * k], xmm0);
        }
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `l[bhwd]arx` through a fast read entry: the load, and the reservation the interpreter
    /// records (address, size, the value in memory byte order). Misses, unaligned addresses
    /// (the alignment interrupt) and devices run the interpreter.
    pub(super) fn load_reserve(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        self.tlb_hit(self.idx_read, offset_of!(TlbEntry, read), size, slow);
        self.read_host(size, HostAt::Rcx, Ea::R13);
        asm!(self.ops
            ; mov QWORD [rbx + RESERVE_VAL], rax
            ; mov QWORD [rbx + RESERVE_VAL + 8], 0
            ; mov QWORD [rbx + RESERVE_ADDR], r13
            ; mov QWORD [rbx + RESERVE_SIZE], size as i32
        );
        self.swap_if_big_endian(size, self.le);
        self.set_gpr(i.rt());
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `st[bhwd]cx.` as the interpreter does it: without a reservation of exactly this
    /// address and size nothing is accessed and CR0 = 0b00 || SO; with one, a compare-and-swap
    /// against the reserved value through a fast write entry (anything else, e.g. a page
    /// holding translated code, runs the interpreter). The reservation is gone either way.
    pub(super) fn store_conditional(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let (slow, back, unreserved, done) =
            (self.label(), self.label(), self.label(), self.label());
        self.ea(op, i, false);
        asm!(self.ops
            ; cmp QWORD [rbx + RESERVE_ADDR], r13
            ; jne =>unreserved
            ; cmp QWORD [rbx + RESERVE_SIZE], size as i32
            ; jne =>unreserved
        );
        self.tlb_hit(self.idx_write, offset_of!(TlbEntry, write), size, slow);
        // From the home: a copy taken on this path alone would be missing on the others.
        self.gpr_home(GprOp::Load64, RDX, i.rs());
        if !self.le {
            match size {
                2 => asm!(self.ops ; rol dx, 8),
                4 => asm!(self.ops ; bswap edx),
                8 => asm!(self.ops ; bswap rdx),
                _ => {}
            }
        }
        asm!(self.ops ; mov rax, QWORD [rbx + RESERVE_VAL]);
        match size {
            1 => asm!(self.ops ; lock cmpxchg BYTE [rcx + r13], dl),
            2 => asm!(self.ops ; lock cmpxchg WORD [rcx + r13], dx),
            4 => asm!(self.ops ; lock cmpxchg DWORD [rcx + r13], edx),
            _ => asm!(self.ops ; lock cmpxchg QWORD [rcx + r13], rdx),
        }
        // EQ (2) when the swap happened.
        asm!(self.ops
            ; setz cl
            ; movzx ecx, cl
            ; add ecx, ecx
            ; jmp =>done
            ; =>unreserved
            ; xor ecx, ecx
            ; =>done
            ; mov QWORD [rbx + RESERVE_ADDR], NO_RESERVATION as i32
            ; movzx edx, BYTE [rbx + SO]
            ; or ecx, edx
        );
        self.insert_crf(0);
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// `rax` = the `size` bytes of guest memory at `ea` (found as `at` says),
    /// zero-extended, in memory byte order.
    pub(super) fn read_host(&mut self, size: u32, at: HostAt, ea: Ea) {
        let (r, d) = (ea.reg, at.disp(ea));
        match at {
            // The shorter encoding (no displacement): what the TLB's accesses use.
            HostAt::Rcx if d == 0 => load_sized!(self.ops, size, rcx + Rq(r)),
            HostAt::Rcx => load_sized!(self.ops, size, rcx + Rq(r) + d),
            HostAt::Base(_) => load_sized!(self.ops, size, Rq(r) + d),
        }
    }

    /// Stores the low `size` bytes of register `v` at guest `ea` (found as `at` says).
    fn write_host(&mut self, size: u32, at: HostAt, ea: Ea, v: u8) {
        let (r, d) = (ea.reg, at.disp(ea));
        match at {
            HostAt::Rcx if d == 0 => store_sized!(self.ops, size, v, rcx + Rq(r)),
            HostAt::Rcx => store_sized!(self.ops, size, v, rcx + Rq(r) + d),
            HostAt::Base(_) => store_sized!(self.ops, size, v, Rq(r) + d),
        }
    }

    /// `lha`/`lwa` and their forms: `rax`'s low `size` bytes sign-extended.
    pub(super) fn extend_algebraic(&mut self, op: Op, size: u32) {
        if op.info().flags.contains(InsnFlags::ALGEBRAIC) {
            match size {
                2 => asm!(self.ops ; movsx rax, ax),
                4 => asm!(self.ops ; movsxd rax, eax),
                _ => {}
            }
        }
    }

    /// `rax`'s low `size` bytes from memory byte order to the guest's (or back: the swap is
    /// its own inverse), when the guest is big-endian.
    pub(super) fn swap_if_big_endian(&mut self, size: u32, le: bool) {
        if !le {
            match size {
                2 => asm!(self.ops ; rol ax, 8),
                4 => asm!(self.ops ; bswap eax),
                8 => asm!(self.ops ; bswap rax),
                _ => {}
            }
        }
    }

    /// Doubleword 0 of VSR `x` (FPR `x` below 32) to or from memory: `lfd`/`stfd` and
    /// their indexed and update forms, `lxsdx`/`stxsdx`. `lfd` zeroes doubleword 1 (as the
    /// interpreter's `set_fpr` does); `lxsdx` keeps it.
    pub(super) fn fp_doubleword(&mut self, op: Op, i: Insn, x: u32, update: bool) {
        let ra = i.ra();
        self.ea(op, i, update);
        let home = vsr(x);
        if op.info().flags.contains(InsnFlags::LOAD) {
            self.load(8, self.le, Ea::R13);
            asm!(self.ops ; mov QWORD [rbx + home + 8], rax);
            if op != Op::Lxsdx {
                asm!(self.ops ; mov QWORD [rbx + home], 0);
            }
        } else {
            self.store(StoreSrc::Dw0(x), 8, self.le, update.then_some(ra), None);
        }
        if update {
            self.gpr_rm(GprOp::Store64, R13, ra);
        }
    }

    /// `lvx`/`stvx`/`lxvd2x`/`stxvd2x` in little-endian mode: 16 bytes between memory and
    /// the register's home, with the doublewords swapped for the VSX forms (their
    /// doubleword 0 is at the lower address, and a `u128` home keeps it in the high half).
    /// Misses, page crossings and watched pages go to the interpreter.
    pub(super) fn quadword(&mut self, op: Op, i: Insn) {
        let (store, vmx) = (
            matches!(op, Op::Stvx | Op::Stxvd2x),
            matches!(op, Op::Lvx | Op::Stvx),
        );
        let home = vsr(if vmx { 32 + i.rt() } else { i.xt() });
        let (slow, back) = (self.label(), self.label());
        self.ea(op, i, false);
        if vmx {
            asm!(self.ops ; and r13, -16);
        }
        let (idx, tag) = if store {
            (self.idx_write, offset_of!(TlbEntry, write))
        } else {
            (self.idx_read, offset_of!(TlbEntry, read))
        };
        let at = self.host_address(idx, tag, 16, slow);
        if store {
            asm!(self.ops ; movups xmm0, [rbx + home]);
        } else {
            self.fault_site(slow);
            match at {
                HostAt::Rcx => asm!(self.ops ; movups xmm0, [rcx + r13]),
                HostAt::Base(d) => asm!(self.ops ; movups xmm0, [r13 + d]),
            }
        }
        if !vmx {
            asm!(self.ops ; pshufd xmm0, xmm0, 0x4e);
        }
        if store {
            self.fault_site(slow);
            match at {
                HostAt::Rcx => asm!(self.ops ; movups [rcx + r13], xmm0),
                HostAt::Base(d) => asm!(self.ops ; movups [r13 + d], xmm0),
            }
        } else {
            asm!(self.ops ; movups [rbx + home], xmm0);
        }
        asm!(self.ops ; =>back);
        self.interp_slow(slow, back, op, i);
    }

    /// Loads `size` bytes at the address in `ea` (see [`Em::load_ea`]) in byte order `le`
    /// into `rax` (zero-extended).
    pub(super) fn load(&mut self, size: u32, le: bool, ea: Ea) {
        let (miss, done) = (self.label(), self.label());
        let at = self.host_address_of(ea, self.idx_read, offset_of!(TlbEntry, read), size, miss);
        self.fault_site(miss);
        self.read_host(size, at, ea);
        self.swap_if_big_endian(size, le);
        let fault = self.label();
        let cold = Cold::LoadMiss {
            at: miss,
            back: done,
            held: self.cache,
            ea,
            size,
            le,
            fault,
        };
        self.cold_paths(done, cold, fault);
    }

    /// Ends a fast access at `done` and queues its cold code: the TLB miss `miss` and the
    /// host-fault exit `fault`, which the miss and the fast access share.
    fn cold_paths(&mut self, done: DynamicLabel, miss: Cold, fault: DynamicLabel) {
        asm!(self.ops ; =>done);
        self.push_slow(miss);
        self.cold.push(Cold::Fault {
            at: fault,
            k: self.k,
            pc: self.pc,
        });
    }

    /// The value a store writes into `reg`.
    pub(super) fn store_src(&mut self, reg: u8, src: StoreSrc) {
        match src {
            StoreSrc::Gpr(r) => self.gpr_rm(GprOp::Load64, reg, r),
            StoreSrc::Dw0(x) => {
                let home = vsr(x) + 8;
                match reg {
                    RAX => asm!(self.ops ; mov rax, QWORD [rbx + home]),
                    _ => asm!(self.ops ; mov rcx, QWORD [rbx + home]),
                }
            }
        }
    }

    /// Stores the low `size` bytes of `src` at `r13`, or off the base register of `off_base`
    /// ([`Em::off_base`]) when that has a copy. `update_ra`: the update form's RA (set to
    /// `r13` after the store by the caller, and by the slow path when the store wrote
    /// translated code and the block stops after it).
    pub(super) fn store(
        &mut self,
        src: StoreSrc,
        size: u32,
        le: bool,
        update_ra: Option<u32>,
        off_base: Option<(u32, i32)>,
    ) {
        let (miss, done) = (self.label(), self.label());
        // The source's copy, if it gets one, is taken before the miss test: the miss path
        // (and a host fault on the store) must find the cache as the cold path records it.
        if let StoreSrc::Gpr(r) = src {
            self.copy_for(r);
        }
        // A store off a base register (`off_base`: the GPR and the displacement) in
        // host-guarded memory addresses the base's copy, as a load does (`Em::load_ea`), when
        // it has one after the source's was taken (a copy taken now could evict that).
        let ea = match off_base.map(|(ra, d)| (ra, d, self.cache_peek(ra))) {
            None => Ea::R13,
            Some((_, d, Some(h))) => Ea { reg: h, disp: d },
            Some((ra, d, None)) => {
                self.base_plus(ra, d as i64);
                Ea::R13
            }
        };
        let at = self.host_address_of(ea, self.idx_write, offset_of!(TlbEntry, write), size, miss);
        // A GPR's copy stored as it is where no swap is needed (little-endian, or a byte);
        // else the value goes through `rax`.
        let direct = match src {
            StoreSrc::Gpr(r) if le || size == 1 => self.cache_peek(r),
            _ => None,
        };
        let value = match direct {
            Some(h) => h,
            None => {
                self.store_src(RAX, src);
                // The same swap as a load's: guest byte order to memory order.
                self.swap_if_big_endian(size, le);
                RAX
            }
        };
        // Pages holding translated code have no fast write entry (with host-guarded memory,
        // no host write permission): a fast store never needs the block to stop.
        self.fault_site(miss);
        self.write_host(size, at, ea, value);
        let fault = self.label();
        let cold = Cold::StoreMiss {
            at: miss,
            back: done,
            held: self.cache,
            ea,
            src,
            size,
            le,
            update_ra,
            fault,
            k: self.k + 1,
            next: self.pc.wrapping_add(4),
        };
        self.cold_paths(done, cold, fault);
    }
}

/// What a TLB hit test requires of an access besides a cached page.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// Natural alignment (quadwords: inside the page).
    Aligned,
    /// Inside the page.
    InPage,
}

/// The displacement of a D- or DS-form access; `None` for the X forms.
fn displacement(op: Op, i: Insn) -> Option<i64> {
    let ops = op.info().operands;
    if ops.contains(&Operand::DRa) {
        Some(i.si())
    } else if ops.contains(&Operand::DsRa) {
        Some(i.ds())
    } else {
        None
    }
}
