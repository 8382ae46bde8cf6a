//! Special-purpose registers and the other system instructions that real software runs
//! often: SPR moves without side effects, the timebase, storage barriers, `isync`, traps,
//! the reservation pair and the cache block flushes. Each does what its interpreter function
//! (the reference) does; anything rare or with side effects (privileged SPRs in problem state,
//! composed registers, DEC, `ptesync`, a trap that fires, a reservation on a TLB miss) runs
//! the interpreter, often on a cold path of the native code.

use super::{CA, CR, CTR, LR, SO, ST, TLB_IDX_BYTES, Tx, flags, helpers, int_ty};
use crate::cpu::{CpuState, NO_RESERVATION};
use crate::isa::{Insn, Op};
use crate::jit::JitCtx;
use crate::softmmu::TlbEntry;
use crate::vcpu::Cpu;
use core::mem::offset_of;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Type, Value};

/// A store barrier the host needs no fence for: x86-64 keeps loads in order and stores in
/// order (only a store before a later load may pass, which `sync` orders with a full fence).
const TSO_HOST: bool = cfg!(target_arch = "x86_64");

impl Tx<'_> {
    /// SPR moves and system instructions; false leaves the instruction to the interpreter.
    pub(super) fn system(&mut self, op: Op, i: Insn, _last: bool) -> bool {
        use Op::*;
        let rt = i.rt();
        match op {
            // LR and CTR live in the block's variables, not in their homes.
            Mfspr | Mftb | Mtspr if matches!(i.spr(), 8 | 9) => {
                let r = if i.spr() == 8 { LR } else { CTR };
                if op != Mtspr {
                    let v = self.get(r);
                    self.set(rt as usize, v);
                } else {
                    let v = self.gpr(rt);
                    self.set(r, v);
                }
            }
            // SO and CA live in the block's variables.
            Mfspr | Mftb | Mtspr if i.spr() == crate::cpu::spr::XER => {
                self.move_xer(op == Mtspr, rt)
            }
            Mfmsr if !self.problem_state() => {
                let v = self.b.ins().load(
                    I64,
                    flags(),
                    self.cpu,
                    ST + offset_of!(CpuState, msr) as i32,
                );
                self.set(rt as usize, v);
            }
            Mfspr | Mftb if crate::jit::spr::timebase_spr(i.spr(), self.problem_state()) => {
                let zero = self.iconst(0);
                let tb =
                    self.slow_call(helpers::timebase as *const () as usize, [zero, zero, zero]);
                let v = if i.spr() == crate::cpu::spr::TBU_READ {
                    self.b.ins().ushr_imm_s(tb, 32)
                } else {
                    tb
                };
                self.set(rt as usize, v);
            }
            // `mftb` of another number is `mfspr` of it (the interpreter's `mftb`).
            Mfspr | Mftb | Mtspr => {
                let Some((off, mem, mask)) = self.plain_spr(i.spr(), op == Mtspr) else {
                    return false;
                };
                self.move_plain_spr(op, rt, off, mem, mask);
            }
            // sync (L=0) and lwsync (L=1); ptesync (L=2) may flush the TLB: interpreter.
            Sync if i.l_sync() == 2 => return false,
            Sync if i.l_sync() == 1 => self.weak_barrier(),
            Sync => {
                self.b.ins().fence();
            }
            Eieio => self.weak_barrier(),
            Isync => self.isync(i),
            Tw | Twi | Td | Tdi => self.trap(op, i),
            Lbarx | Lharx | Lwarx | Ldarx => self.load_reserve(op, i),
            StbcxDot | SthcxDot | StwcxDot | StdcxDot => self.store_conditional(op, i),
            Dcbst | Dcbf => self.cache_flush(op, i),
            _ => return false,
        }
        true
    }

    /// `lwsync`, `eieio`: ordering the host keeps by itself when it is TSO, else a fence.
    fn weak_barrier(&mut self) {
        if !TSO_HOST {
            self.b.ins().fence();
        }
    }

    /// Runs the interpreter's function for the current instruction on a cold path taken when
    /// `cond` holds (it stops the block as the interpreter call says); the instruction must
    /// leave the cached registers valid when it goes on.
    fn interp_if(&mut self, cond: Value, op: Op, i: Insn) {
        let (cold, cont) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        self.b.set_cold_block(cold);
        self.call_interp(op, i.0);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// `isync`: nothing to do unless a local TLB flush is pending or blocks were dropped since
    /// the jump cache was synced; then the interpreter performs it and the block stops (the
    /// rest of the block may be stale).
    fn isync(&mut self, i: Insn) {
        let pending = self.b.ins().load(
            I8,
            flags(),
            self.cpu,
            offset_of!(Cpu, tlb_flush_pending) as i32,
        );
        let pending = self.b.ins().uextend(I64, pending);
        let gp = self.ctx_load(I64, offset_of!(JitCtx, generation));
        let g = self.b.ins().load(I64, flags(), gp, 0);
        let seen = self.ctx_load(I64, offset_of!(JitCtx, seen_generation));
        let moved = self.b.ins().bxor(g, seen);
        let any = self.b.ins().bor(moved, pending);
        let any = self.b.ins().icmp_imm_s(IntCC::NotEqual, any, 0);
        self.interp_if(any, Op::Isync, i);
    }

    /// `tw`, `twi`, `td`, `tdi`: the comparison inline; when it traps, the interpreter
    /// raises the program interrupt.
    fn trap(&mut self, op: Op, i: Insn) {
        let to = i.rt();
        if to == 0 {
            return;
        }
        let word = matches!(op, Op::Tw | Op::Twi);
        let a = self.gpr(i.ra());
        let b = if matches!(op, Op::Twi | Op::Tdi) {
            self.iconst(i.si())
        } else {
            self.gpr(i.rb())
        };
        // Word traps compare the low words sign-extended (interp `tw`).
        let (a, b) = if word {
            let x = self.b.ins().ireduce(I32, a);
            let y = self.b.ins().ireduce(I32, b);
            (self.b.ins().sextend(I64, x), self.b.ins().sextend(I64, y))
        } else {
            (a, b)
        };
        let mut hit = self.b.ins().iconst(I8, 0);
        for (bit, cc) in [
            (16, IntCC::SignedLessThan),
            (8, IntCC::SignedGreaterThan),
            (4, IntCC::Equal),
            (2, IntCC::UnsignedLessThan),
            (1, IntCC::UnsignedGreaterThan),
        ] {
            if to & bit != 0 {
                let c = self.b.ins().icmp(cc, a, b);
                hit = self.b.ins().bor(hit, c);
            }
        }
        self.interp_if(hit, op, i);
    }

    /// `dcbst`, `dcbf`: no effect on a coherent host, but they fault like a one-byte load.
    fn cache_flush(&mut self, op: Op, i: Insn) {
        let ea = self.ea(op, i, false);
        let ent = self.tlb_entry(ea);
        let tbase = self.tlb_idx_read * TLB_IDX_BYTES;
        let tag = self
            .b
            .ins()
            .load(I64, flags(), ent, tbase + offset_of!(TlbEntry, read) as i32);
        let hit = self.tag_hit(ea, tag, 1);
        let miss = self.b.ins().bxor_imm_s(hit, 1);
        self.interp_if(miss, op, i);
    }

    /// The host address of an aligned `size`-byte access at `ea` when the TLB has a fast
    /// entry of kind `write`/read for it: (hit, host address, meaningful on a hit only).
    fn fast_host(&mut self, ea: Value, size: u32, write: bool) -> (Value, Value) {
        let ent = self.tlb_entry(ea);
        let idx = if write {
            self.tlb_idx_write
        } else {
            self.tlb_idx_read
        };
        let tbase = idx * TLB_IDX_BYTES;
        let field = if write {
            offset_of!(TlbEntry, write)
        } else {
            offset_of!(TlbEntry, read)
        };
        let tag = self.b.ins().load(I64, flags(), ent, tbase + field as i32);
        let hit = self.tag_hit(ea, tag, size);
        let add = self.b.ins().load(
            I64,
            flags(),
            ent,
            tbase + offset_of!(TlbEntry, addend) as i32,
        );
        (hit, self.b.ins().iadd(ea, add))
    }

    /// Guest order ↔ the value as it lies in host memory (`size` bytes, zero-extended).
    fn memory_order(&mut self, v: Value, size: u32) -> Value {
        if size == 1 || self.le {
            return v;
        }
        let x = if size < 8 {
            self.b.ins().ireduce(int_ty(size), v)
        } else {
            v
        };
        let x = self.b.ins().bswap(x);
        if size < 8 {
            self.b.ins().uextend(I64, x)
        } else {
            x
        }
    }

    /// Reloads cached registers from `CpuState` after the interpreter ran on one path.
    fn reload(&mut self, regs: &[usize]) {
        for &r in regs {
            let g = self.regs[r];
            let v = self.b.ins().load(g.mem, flags(), self.cpu, g.off);
            let v = if g.mem == I8 {
                self.b.ins().uextend(I64, v)
            } else {
                v
            };
            self.b.def_var(g.var, v);
        }
    }

    /// Runs the interpreter's function when `cond` holds (a TLB miss, a misaligned
    /// reservation: it faults or takes the slow path, and stops the block as it says),
    /// else `fast`; then reloads `regs` on the interpreter's side. `fast` may only read
    /// registers already in the cache (loaded before: one loaded on one path only would be
    /// undefined on the other).
    fn fast_or_interp(
        &mut self,
        cond: Value,
        op: Op,
        i: Insn,
        regs: &[usize],
        fast: impl FnOnce(&mut Self),
    ) {
        // Defined on both paths before they part.
        for &r in regs {
            self.get(r);
        }
        let (slow, fb, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(cond, slow, &[], fb, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        self.call_interp(op, i.0);
        self.reload(regs);
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(fb);
        fast(self);
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
    }

    /// `l[bhwd]arx` with the interpreter's semantics: an atomic load of RAM through the
    /// TLB's read entry, remembering address, size and the value as it lies in memory for
    /// `st?cx.`'s compare-and-swap. Misaligned or not a fast read: the interpreter.
    fn load_reserve(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let rt = i.rt() as usize;
        let ea = self.ea(op, i, false);
        let (hit, host) = self.fast_host(ea, size, false);
        let miss = self.b.ins().bxor_imm_s(hit, 1);
        self.fast_or_interp(miss, op, i, &[rt], |t| {
            let raw = t.b.ins().atomic_load(int_ty(size), flags(), host);
            let raw = if size < 8 {
                t.b.ins().uextend(I64, raw)
            } else {
                raw
            };
            let v = t.memory_order(raw, size);
            t.set(rt, v);
            let st = |t: &mut Self, v: Value, o: usize| {
                t.b.ins().store(flags(), v, t.cpu, ST + o as i32)
            };
            st(t, ea, offset_of!(CpuState, reserve_addr));
            let sz = t.iconst(size as i64);
            st(t, sz, offset_of!(CpuState, reserve_size));
            st(t, raw, offset_of!(CpuState, reserve_val));
            let zero = t.iconst(0);
            st(t, zero, offset_of!(CpuState, reserve_val) + 8);
        });
    }

    /// `st[bhwd]cx.` with the interpreter's semantics: without a reservation of exactly this
    /// address and size nothing is accessed and CR0 = 0b00 || SO; with one, a compare-and-swap
    /// of the reserved value through the TLB's write entry (not a fast write, e.g. a page
    /// holding translated code: the interpreter). The reservation is gone either way.
    fn store_conditional(&mut self, op: Op, i: Insn) {
        let size = op.info().size as u32;
        let ea = self.ea(op, i, false);
        let ld = |t: &mut Self, o: usize| t.b.ins().load(I64, flags(), t.cpu, ST + o as i32);
        let raddr = ld(self, offset_of!(CpuState, reserve_addr));
        let rsize = ld(self, offset_of!(CpuState, reserve_size));
        let d = self.b.ins().bxor(raddr, ea);
        let ds = self.b.ins().bxor_imm_s(rsize, size as i64);
        let d = self.b.ins().bor(d, ds);
        let reserved = self.b.ins().icmp_imm_s(IntCC::Equal, d, 0);
        let (hit, host) = self.fast_host(ea, size, true);
        // The interpreter when reserved but not a fast write.
        let nohit = self.b.ins().bxor_imm_s(hit, 1);
        let slow = self.b.ins().band(reserved, nohit);
        // Registers used on one path only must be loaded before the paths part, so that the
        // cache holds a definition on every path.
        let v = self.gpr(i.rs());
        let so = self.get(SO);
        self.fast_or_interp(slow, op, i, &[CR], |t| {
            let none = t.iconst(NO_RESERVATION as i64);
            t.b.ins().store(
                flags(),
                none,
                t.cpu,
                ST + offset_of!(CpuState, reserve_addr) as i32,
            );
            let (cas, no, merge) = (t.b.create_block(), t.b.create_block(), t.b.create_block());
            let ok = t.b.append_block_param(merge, I64);
            t.b.ins().brif(reserved, cas, &[], no, &[]);

            t.b.switch_to_block(cas);
            let old = ld(t, offset_of!(CpuState, reserve_val));
            let new = t.memory_order(v, size);
            let ty = int_ty(size);
            let (old_n, new_n) = if size < 8 {
                (t.b.ins().ireduce(ty, old), t.b.ins().ireduce(ty, new))
            } else {
                (old, new)
            };
            let seen = t.b.ins().atomic_cas(flags(), host, old_n, new_n);
            let eq = t.b.ins().icmp(IntCC::Equal, seen, old_n);
            let eq = t.b.ins().uextend(I64, eq);
            t.b.ins()
                .jump(merge, &[cranelift_codegen::ir::BlockArg::Value(eq)]);

            t.b.switch_to_block(no);
            let zero = t.iconst(0);
            t.b.ins()
                .jump(merge, &[cranelift_codegen::ir::BlockArg::Value(zero)]);

            t.b.switch_to_block(merge);
            // CR0 = 0b00 || EQ=ok || SO.
            let eqbit = t.b.ins().ishl_imm_s(ok, 1);
            let f = t.b.ins().bor(eqbit, so);
            let f = t.b.ins().ireduce(I32, f);
            t.set_crf(0, f);
        });
    }

    /// The block runs in problem state: `mmu_idx` puts MSR[PR] in bit 0 of the index, and
    /// MSR[PR] is part of the block key (checked by a test below).
    fn problem_state(&self) -> bool {
        self.tlb_idx_read & 1 != 0
    }

    /// The field of SPR `n` for `mfspr` (`write` false) or `mtspr` in this privilege state
    /// (the table both tiers share, `jit::spr`): (offset from `cpu`, memory type, mask
    /// applied on write).
    fn plain_spr(&self, n: u32, write: bool) -> Option<(i32, Type, u64)> {
        let p = crate::jit::spr::plain_spr(n, write, self.problem_state())?;
        let ty = if p.bytes == 8 { I64 } else { I32 };
        Some((ST + p.offset as i32, ty, p.write_mask))
    }

    /// `mfxer`/`mtxer` (`write`): XER composed from and split into its fields as
    /// `CpuState::xer`/`set_xer` do.
    fn move_xer(&mut self, write: bool, r: u32) {
        let field = |f: usize| ST + f as i32;
        let (ov, rsvd, bc) = (
            field(offset_of!(CpuState, ov)),
            field(offset_of!(CpuState, xer_rsvd)),
            field(offset_of!(CpuState, xer_bc)),
        );
        if write {
            let v = self.gpr(r);
            let bit = |t: &mut Self, n: i64| {
                let x = t.b.ins().ushr_imm_s(v, n);
                t.b.ins().band_imm_s(x, 1)
            };
            let so = bit(self, 31);
            self.set(SO, so);
            let ca = bit(self, 29);
            self.set(CA, ca);
            let o = bit(self, 30);
            let o = self.b.ins().ireduce(I8, o);
            self.b.ins().store(flags(), o, self.cpu, ov);
            let x = self.b.ins().band_imm_s(v, crate::cpu::XER_RESERVED as i64);
            let x = self.b.ins().ireduce(I32, x);
            self.b.ins().store(flags(), x, self.cpu, rsvd);
            let x = self.b.ins().band_imm_s(v, 0x7f);
            let x = self.b.ins().ireduce(I8, x);
            self.b.ins().store(flags(), x, self.cpu, bc);
        } else {
            let so = self.get(SO);
            let ca = self.get(CA);
            let load = |t: &mut Self, ty: Type, off: i32| {
                let x = t.b.ins().load(ty, flags(), t.cpu, off);
                t.b.ins().uextend(I64, x)
            };
            let o = load(self, I8, ov);
            let mut x = load(self, I32, rsvd);
            let b = load(self, I8, bc);
            for (f, sh) in [(so, 31), (o, 30), (ca, 29)] {
                let f = self.b.ins().ishl_imm_s(f, sh);
                x = self.b.ins().bor(x, f);
            }
            let x = self.b.ins().bor(x, b);
            self.set(r as usize, x);
        }
    }

    fn move_plain_spr(&mut self, op: Op, r: u32, off: i32, mem: Type, mask: u64) {
        if op != Op::Mtspr {
            let v = self.b.ins().load(mem, flags(), self.cpu, off);
            let v = if mem == I64 {
                v
            } else {
                self.b.ins().uextend(I64, v)
            };
            self.set(r as usize, v);
        } else {
            let v = self.gpr(r);
            let v = if mask != u64::MAX {
                self.b.ins().band_imm_s(v, mask as i64)
            } else {
                v
            };
            let v = if mem == I64 {
                v
            } else {
                self.b.ins().ireduce(mem, v)
            };
            self.b.ins().store(flags(), v, self.cpu, off);
        }
    }
}
