//! Loads, stores, atomics and storage control. Every instruction is a call of a shared
//! routine for its family with the parameters of its table row (address form, access size,
//! extension, byte order, reservation), so the table is the one description of each.

use super::{Cpu, Exec};
use crate::cpu::{Exception, NO_RESERVATION, ProgramKind, msr};
use crate::isa::{Form, Insn, InsnFlags, Op, OpInfo};
use crate::softmmu::Access;
use portable_atomic::AtomicU128;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering, fence};

const ILLEGAL: Exception = Exception::Program(ProgramKind::Illegal);

/// How the effective address is formed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Addr {
    /// `D(RA|0)`
    D,
    /// `DS(RA|0)`
    Ds,
    /// `(RA|0) + RB`
    X,
    /// `D(RA)`, RA updated with the EA
    DUpdate,
    DsUpdate,
    XUpdate,
}

impl Addr {
    fn update(self) -> bool {
        matches!(self, Addr::DUpdate | Addr::DsUpdate | Addr::XUpdate)
    }

    /// The address form of a table row: `indexed` or the D/DS displacement of its form, with
    /// RA updated when the row says `update`.
    pub(super) fn of(info: &OpInfo) -> Addr {
        let update = info.flags.contains(InsnFlags::UPDATE);
        match (info.flags.contains(InsnFlags::INDEXED), info.form, update) {
            (true, _, false) => Addr::X,
            (true, _, true) => Addr::XUpdate,
            (false, Form::DS, false) => Addr::Ds,
            (false, Form::DS, true) => Addr::DsUpdate,
            (false, _, false) => Addr::D,
            (false, _, true) => Addr::DUpdate,
        }
    }
}

#[inline(always)]
pub(super) fn ea(c: &Cpu, i: Insn, a: Addr) -> u64 {
    let base = match a {
        Addr::D | Addr::Ds | Addr::X => c.ra0(i.ra()),
        _ => c.st.gpr[i.ra() as usize],
    };
    let off = match a {
        Addr::D | Addr::DUpdate => i.si() as u64,
        Addr::Ds | Addr::DsUpdate => i.ds() as u64,
        Addr::X | Addr::XUpdate => c.st.gpr[i.rb() as usize],
    };
    c.mask_ea(base.wrapping_add(off))
}

/// A fixed-point load or store exactly as its table row describes it: address form, access
/// size, sign extension (`algebraic`), byte order (`byterev`), reservation (`reserve`,
/// `conditional`).
#[inline(always)]
fn gpr_access(c: &mut Cpu, i: Insn, op: Op) -> Exec {
    let info = op.info();
    let f = info.flags;
    let size = info.size as usize;
    if f.contains(InsnFlags::RESERVE) {
        return load_reserve(c, i, size);
    }
    if f.contains(InsnFlags::CONDITIONAL) {
        return store_conditional(c, i, size);
    }
    let a = Addr::of(info);
    let reverse = f.contains(InsnFlags::BYTEREV);
    if f.contains(InsnFlags::LOAD) {
        load_gpr(c, i, a, size, f.contains(InsnFlags::ALGEBRAIC), reverse)
    } else {
        store_gpr(c, i, a, size, reverse)
    }
}

#[inline(always)]
fn load_gpr(c: &mut Cpu, i: Insn, a: Addr, size: usize, sign: bool, reverse: bool) -> Exec {
    let (rt, ra) = (i.rt(), i.ra());
    if a.update() && (ra == 0 || ra == rt) {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le() ^ reverse;
    let v = c.mmu.load(&c.st, ea, size, le)?;
    c.st.gpr[rt as usize] = match (sign, size) {
        (true, 2) => v as i16 as i64 as u64,
        (true, 4) => v as i32 as i64 as u64,
        _ => v,
    };
    if a.update() {
        c.st.gpr[ra as usize] = ea;
    }
    Ok(())
}

#[inline(always)]
fn store_gpr(c: &mut Cpu, i: Insn, a: Addr, size: usize, reverse: bool) -> Exec {
    let ra = i.ra();
    if a.update() && ra == 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le() ^ reverse;
    c.mmu
        .store(&c.st, ea, size, c.st.gpr[i.rs() as usize], le)?;
    if a.update() {
        c.st.gpr[ra as usize] = ea;
    }
    Ok(())
}

/// Binds each interpreter function of a row with `via=ROUTINE` to that routine and the
/// row's op (`lbz` runs `gpr_access(c, i, Op::Lbz)`).
macro_rules! bind_via {
    ($(($via:ident, $name:ident, $op:ident)),* $(,)?) => {
        $(pub(super) fn $name(c: &mut Cpu, i: Insn) -> Exec { $via(c, i, Op::$op) })*
    };
}
crate::isa::for_each_via!(bind_via);

// --- quadword ---

/// `lq`/`stq` move an even/odd register pair; in little-endian mode the doublewords swap.
pub(super) fn lq(c: &mut Cpu, i: Insn) -> Exec {
    let (rt, ra) = (i.rt(), i.ra());
    if rt & 1 != 0 || rt == ra {
        return Err(ILLEGAL);
    }
    let ea = c.mask_ea(c.ra0(ra).wrapping_add(i.dq() as u64));
    let (hi, lo) = load_quad(c, ea)?;
    c.st.gpr[rt as usize] = hi;
    c.st.gpr[rt as usize + 1] = lo;
    Ok(())
}

pub(super) fn stq(c: &mut Cpu, i: Insn) -> Exec {
    let rs = i.rs();
    if rs & 1 != 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, Addr::Ds);
    store_quad(c, ea, c.st.gpr[rs as usize], c.st.gpr[rs as usize + 1])
}

/// Loads a quadword as (register of the even number, odd number): one atomic access when it
/// is aligned. The ISA leaves a misaligned `lq` to the implementation; QEMU (our reference)
/// performs it as two doubleword accesses, and so do we.
fn load_quad(c: &mut Cpu, ea: u64) -> Result<(u64, u64), Exception> {
    let le = c.st.le();
    if ea & 15 != 0 {
        let first = c.mmu.load(&c.st, ea, 8, le)?;
        let second = c.mmu.load(&c.st, c.mask_ea(ea.wrapping_add(8)), 8, le)?;
        return Ok(if le { (second, first) } else { (first, second) });
    }
    let p = c.mmu.ram_ptr(&c.st, ea, 16, Access::Read)?;
    // SAFETY: `ram_ptr` returned 16 bytes of guest RAM, mapped for the machine's life and
    // 16-byte aligned (`ea` is, and RAM pages are host-page aligned).
    let raw = unsafe { (*AtomicU128::from_ptr(p.cast())).load(Ordering::Relaxed) };
    Ok(split_quad(raw, le))
}

fn store_quad(c: &mut Cpu, ea: u64, hi: u64, lo: u64) -> Exec {
    let le = c.st.le();
    if ea & 15 != 0 {
        // Both halves must be writable before either is written.
        let second = c.mask_ea(ea.wrapping_add(8));
        c.mmu.ram_ptr(&c.st, ea, 1, Access::Write)?;
        c.mmu
            .ram_ptr(&c.st, c.mask_ea(ea.wrapping_add(15)), 1, Access::Write)?;
        let (first_val, second_val) = if le { (lo, hi) } else { (hi, lo) };
        c.mmu.store(&c.st, ea, 8, first_val, le)?;
        return c.mmu.store(&c.st, second, 8, second_val, le);
    }
    let raw = join_quad(hi, lo, le);
    let p = c.mmu.ram_ptr(&c.st, ea, 16, Access::Write)?;
    // SAFETY: as in `load_quad`: 16 aligned bytes of guest RAM, writable.
    unsafe { (*AtomicU128::from_ptr(p.cast())).store(raw, Ordering::Relaxed) };
    Ok(())
}

/// Host-native 16 bytes of memory → (RT, RT+1).
fn split_quad(raw: u128, le: bool) -> (u64, u64) {
    let bytes = raw.to_ne_bytes();
    let first = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
    let second = u64::from_ne_bytes(bytes[8..].try_into().unwrap());
    if le {
        (u64::from_le(second), u64::from_le(first))
    } else {
        (u64::from_be(first), u64::from_be(second))
    }
}

fn join_quad(hi: u64, lo: u64, le: bool) -> u128 {
    let (first, second) = if le {
        (lo.to_le(), hi.to_le())
    } else {
        (hi.to_be(), lo.to_be())
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&first.to_ne_bytes());
    bytes[8..].copy_from_slice(&second.to_ne_bytes());
    u128::from_ne_bytes(bytes)
}

// --- multiple and string (big-endian only: alignment interrupt in little-endian mode) ---

/// `lmw` with RA among the registers loaded is an invalid form; QEMU loads them all, RA
/// included, from the address computed first, and so do we.
pub(super) fn lmw(c: &mut Cpu, i: Insn) -> Exec {
    let rt = i.rt();
    let ea = ea(c, i, Addr::D);
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    let mut vals = [0u64; 32];
    for r in rt..32 {
        vals[r as usize] = c.mmu.load(
            &c.st,
            c.mask_ea(ea.wrapping_add(4 * (r - rt) as u64)),
            4,
            false,
        )?;
    }
    c.st.gpr[rt as usize..].copy_from_slice(&vals[rt as usize..]);
    Ok(())
}

pub(super) fn stmw(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::D);
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    for r in i.rs()..32 {
        c.mmu.store(
            &c.st,
            c.mask_ea(ea.wrapping_add(4 * (r - i.rs()) as u64)),
            4,
            c.st.gpr[r as usize],
            false,
        )?;
    }
    Ok(())
}

/// Loads `n` bytes into registers starting at `rt`, four per register, wrapping at r31.
fn load_string(c: &mut Cpu, rt: u32, ea: u64, n: u64) -> Exec {
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    let mut regs = c.st.gpr;
    let mut r = rt;
    for k in 0..n {
        if k % 4 == 0 {
            if k > 0 {
                r = (r + 1) % 32;
            }
            regs[r as usize] = 0;
        }
        let b = c.mmu.load(&c.st, c.mask_ea(ea.wrapping_add(k)), 1, false)?;
        regs[r as usize] |= b << (24 - 8 * (k % 4));
    }
    c.st.gpr = regs;
    Ok(())
}

fn store_string(c: &mut Cpu, rs: u32, ea: u64, n: u64) -> Exec {
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    for k in 0..n {
        let r = (rs + (k / 4) as u32) % 32;
        let b = c.st.gpr[r as usize] >> (24 - 8 * (k % 4));
        c.mmu
            .store(&c.st, c.mask_ea(ea.wrapping_add(k)), 1, b, false)?;
    }
    Ok(())
}

/// Whether register `r` is among the `n`-byte string's registers starting at `rt` (wrapping).
fn in_string_regs(rt: u32, n: u64, r: u32) -> bool {
    let nregs = n.div_ceil(4) as u32;
    (r + 32 - rt) % 32 < nregs
}

/// A string load whose registers include RA (or RB) is an invalid form: an illegal
/// instruction, as in QEMU (which checks RA even when it is 0 for `lswi`).
pub(super) fn lswi(c: &mut Cpu, i: Insn) -> Exec {
    let n = if i.rb() == 0 { 32 } else { i.rb() as u64 };
    let ea = c.mask_ea(c.ra0(i.ra()));
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    if in_string_regs(i.rt(), n, i.ra()) {
        return Err(ILLEGAL);
    }
    load_string(c, i.rt(), ea, n)
}

pub(super) fn lswx(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::X);
    let n = c.st.xer_bc as u64;
    if c.st.le() {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    if n > 0
        && ((i.ra() != 0 && in_string_regs(i.rt(), n, i.ra())) || in_string_regs(i.rt(), n, i.rb()))
    {
        return Err(ILLEGAL);
    }
    load_string(c, i.rt(), ea, n)
}

pub(super) fn stswi(c: &mut Cpu, i: Insn) -> Exec {
    let n = if i.rb() == 0 { 32 } else { i.rb() as u64 };
    store_string(c, i.rs(), c.mask_ea(c.ra0(i.ra())), n)
}

pub(super) fn stswx(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::X);
    store_string(c, i.rs(), ea, c.st.xer_bc as u64)
}

// --- load and reserve / store conditional ---

/// `l?arx`: load, remember the address and the value read (in memory byte order) so that
/// `st?cx.` can succeed by compare-and-swap against it, as on a multi-threaded host.
fn load_reserve(c: &mut Cpu, i: Insn, size: usize) -> Exec {
    let rt = i.rt() as usize;
    // The invalid forms of lqarx are illegal before any address check.
    if size == 16 && (rt & 1 != 0 || rt as u32 == i.ra() || rt as u32 == i.rb()) {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, Addr::X);
    if ea & (size as u64 - 1) != 0 {
        return Err(Exception::Alignment { ea, dsisr: 0 });
    }
    let p = c.mmu.ram_ptr(&c.st, ea, size, Access::Read)?;
    let le = c.st.le();
    if size == 16 {
        // SAFETY: `ram_ptr` returned `size` bytes of guest RAM, aligned to `size` (checked
        // above; RAM pages are host-page aligned), mapped for the machine's life.
        let raw = unsafe { (*AtomicU128::from_ptr(p.cast())).load(Ordering::Acquire) };
        let (hi, lo) = split_quad(raw, le);
        c.st.gpr[rt] = hi;
        c.st.gpr[rt + 1] = lo;
        c.st.reserve_val = [raw as u64, (raw >> 64) as u64];
    } else {
        // SAFETY: as above, for the access's size.
        let raw = unsafe {
            match size {
                1 => (*AtomicU8::from_ptr(p)).load(Ordering::Acquire) as u64,
                2 => (*AtomicU16::from_ptr(p.cast())).load(Ordering::Acquire) as u64,
                4 => (*AtomicU32::from_ptr(p.cast())).load(Ordering::Acquire) as u64,
                _ => (*AtomicU64::from_ptr(p.cast())).load(Ordering::Acquire),
            }
        };
        c.st.gpr[rt] = native_to_guest(raw, size, le);
        c.st.reserve_val = [raw, 0];
    }
    c.st.reserve_addr = ea;
    c.st.reserve_size = size as u64;
    Ok(())
}

fn native_to_guest(raw: u64, size: usize, le: bool) -> u64 {
    let swapped = match size {
        1 => raw,
        2 => (raw as u16).swap_bytes() as u64,
        4 => (raw as u32).swap_bytes() as u64,
        _ => raw.swap_bytes(),
    };
    if le == cfg!(target_endian = "little") {
        raw
    } else {
        swapped
    }
}

fn store_conditional(c: &mut Cpu, i: Insn, size: usize) -> Exec {
    let ea = ea(c, i, Addr::X);
    let rs = i.rs() as usize;
    if size == 16 && rs & 1 != 0 {
        return Err(ILLEGAL);
    }
    // Without a reservation for exactly this address and size the store is not performed and
    // nothing is accessed: no alignment or storage interrupt (QEMU's behaviour; the ISA leaves
    // it to the implementation). A reserved address is aligned: `l?arx` checked it.
    let reserved = c.st.reserve_addr == ea && c.st.reserve_size == size as u64;
    c.st.reserve_addr = NO_RESERVATION;
    let p = if reserved {
        Some(c.mmu.ram_ptr(&c.st, ea, size, Access::Write)?)
    } else {
        None
    };
    let le = c.st.le();
    // SAFETY: `p` is `size` bytes of writable guest RAM from `ram_ptr` at the reserved
    // address, which `l?arx` checked is aligned to `size` (RAM pages are host-page aligned),
    // mapped for the machine's life.
    let ok = p.is_some_and(|p| unsafe {
        let old = c.st.reserve_val;
        match size {
            1 => (*AtomicU8::from_ptr(p))
                .compare_exchange(
                    old[0] as u8,
                    native_to_guest(c.st.gpr[rs], 1, le) as u8,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok(),
            2 => (*AtomicU16::from_ptr(p.cast()))
                .compare_exchange(
                    old[0] as u16,
                    native_to_guest(c.st.gpr[rs] & 0xffff, 2, le) as u16,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok(),
            4 => (*AtomicU32::from_ptr(p.cast()))
                .compare_exchange(
                    old[0] as u32,
                    native_to_guest(c.st.gpr[rs] & 0xffff_ffff, 4, le) as u32,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok(),
            8 => (*AtomicU64::from_ptr(p.cast()))
                .compare_exchange(
                    old[0],
                    native_to_guest(c.st.gpr[rs], 8, le),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok(),
            _ => {
                let expected = old[0] as u128 | ((old[1] as u128) << 64);
                let new = join_quad(c.st.gpr[rs], c.st.gpr[rs + 1], le);
                (*AtomicU128::from_ptr(p.cast()))
                    .compare_exchange(expected, new, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            }
        }
    });
    let so = c.st.so as u32;
    c.st.set_crf(0, if ok { 2 } else { 0 } | so);
    Ok(())
}

// --- floating-point loads and stores ---

#[inline(always)]
fn fp_enabled(c: &Cpu) -> Exec {
    if c.st.msr & msr::FP == 0 {
        Err(Exception::FpUnavailable)
    } else {
        Ok(())
    }
}

/// The ISA's DOUBLE(): single-precision bits to double-precision bits, exactly, keeping
/// signalling NaNs signalling (a host `f32 as f64` would quiet them).
pub(crate) fn single_to_double(w: u32) -> u64 {
    let sign = ((w >> 31) as u64) << 63;
    let exp = (w >> 23) & 0xff;
    let frac = (w & 0x7f_ffff) as u64;
    match exp {
        0xff => sign | (0x7ff << 52) | (frac << 29),
        0 if frac == 0 => sign,
        0 => sign | ((frac as f64) * f64::powi(2.0, -149)).to_bits(),
        e => sign | ((e as u64 + 896) << 52) | (frac << 29),
    }
}

/// The ISA's SINGLE(): double-precision bits to single-precision bits by truncation
/// (what `stfs` stores; no rounding).
pub(crate) fn double_to_single(d: u64) -> u32 {
    let exp = ((d >> 52) & 0x7ff) as u32;
    if exp > 896 {
        (((d >> 62) << 30) | ((d >> 29) & 0x3fff_ffff)) as u32
    } else {
        let mut w = ((d >> 63) << 31) as u32;
        if exp >= 874 {
            w |= (((1u64 << 52) | (d & ((1 << 52) - 1))) >> (896 + 30 - exp)) as u32;
        }
        w
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FpKind {
    Single,
    Double,
    /// Integer word, sign-extended (lfiwax) / zero-extended (lfiwzx, stfiwx).
    WordSigned,
    WordZero,
}

/// A floating-point load or store as its table row describes it: 16 bytes a register pair,
/// 8 a double, 4 a single, or with `int_word` an integer word (sign-extended when
/// `algebraic`).
#[inline(always)]
fn fpr_access(c: &mut Cpu, i: Insn, op: Op) -> Exec {
    let info = op.info();
    let f = info.flags;
    let a = Addr::of(info);
    let load = f.contains(InsnFlags::LOAD);
    let kind = match (info.size, f.contains(InsnFlags::INT_WORD)) {
        (16, _) if load => return super::fp::load_pair(c, i, a),
        (16, _) => return super::fp::store_pair(c, i, a),
        (8, _) => FpKind::Double,
        (_, false) => FpKind::Single,
        (_, true) if f.contains(InsnFlags::ALGEBRAIC) => FpKind::WordSigned,
        (_, true) => FpKind::WordZero,
    };
    if load {
        load_fpr(c, i, a, kind)
    } else {
        store_fpr(c, i, a, kind)
    }
}

#[inline(always)]
fn load_fpr(c: &mut Cpu, i: Insn, a: Addr, kind: FpKind) -> Exec {
    fp_enabled(c)?;
    let ra = i.ra();
    if a.update() && ra == 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le();
    let v = match kind {
        FpKind::Double => c.mmu.load(&c.st, ea, 8, le)?,
        FpKind::Single => single_to_double(c.mmu.load(&c.st, ea, 4, le)? as u32),
        FpKind::WordSigned => c.mmu.load(&c.st, ea, 4, le)? as i32 as i64 as u64,
        FpKind::WordZero => c.mmu.load(&c.st, ea, 4, le)?,
    };
    c.st.set_fpr(i.rt(), v);
    if a.update() {
        c.st.gpr[ra as usize] = ea;
    }
    Ok(())
}

#[inline(always)]
fn store_fpr(c: &mut Cpu, i: Insn, a: Addr, kind: FpKind) -> Exec {
    fp_enabled(c)?;
    let ra = i.ra();
    if a.update() && ra == 0 {
        return Err(ILLEGAL);
    }
    let ea = ea(c, i, a);
    let le = c.st.le();
    let f = c.st.fpr(i.rs());
    match kind {
        FpKind::Double => c.mmu.store(&c.st, ea, 8, f, le)?,
        FpKind::Single => c.mmu.store(&c.st, ea, 4, double_to_single(f) as u64, le)?,
        _ => c.mmu.store(&c.st, ea, 4, f & 0xffff_ffff, le)?,
    }
    if a.update() {
        c.st.gpr[ra as usize] = ea;
    }
    Ok(())
}

// --- storage control ---

/// Data cache block size of POWER8.
pub const CACHE_BLOCK: u64 = 128;

pub(super) fn dcbz(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::X) & !(CACHE_BLOCK - 1);
    let p = c
        .mmu
        .ram_ptr(&c.st, ea, CACHE_BLOCK as usize, Access::Write)?;
    for k in 0..(CACHE_BLOCK / 8) as usize {
        // SAFETY: `p` is the whole aligned cache block of writable guest RAM (`ram_ptr`).
        unsafe { (*AtomicU64::from_ptr(p.add(8 * k).cast())).store(0, Ordering::Relaxed) };
    }
    Ok(())
}

/// Cache hints have no architectural effect on an emulated coherent memory.
fn cache_hint(_: &mut Cpu, _: Insn) -> Exec {
    Ok(())
}

/// Write-backs and flushes are treated as loads for storage protection: they fault where a
/// load would (as in QEMU), and have no other effect.
fn cache_flush(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::X);
    c.mmu.load(&c.st, ea, 1, c.st.le())?;
    Ok(())
}

pub(super) fn dcbt(c: &mut Cpu, i: Insn) -> Exec {
    cache_hint(c, i)
}
pub(super) fn dcbtst(c: &mut Cpu, i: Insn) -> Exec {
    cache_hint(c, i)
}
pub(super) fn dcbst(c: &mut Cpu, i: Insn) -> Exec {
    cache_flush(c, i)
}
pub(super) fn dcbf(c: &mut Cpu, i: Insn) -> Exec {
    cache_flush(c, i)
}

/// `icbi`: translated code of the block must be dropped; the interpreter decodes afresh
/// every time, and the JIT learns of the page through its code-page tracking. Faults like a
/// load of the block.
pub(super) fn icbi(c: &mut Cpu, i: Insn) -> Exec {
    let ea = ea(c, i, Addr::X);
    c.mmu.load(&c.st, ea & !(CACHE_BLOCK - 1), 1, c.st.le())?;
    if let Ok(p) = c.mmu.space.translate(&c.st, ea, Access::Read) {
        c.mmu.space.code_written(
            p.pa + (ea & !crate::softmmu::PAGE_MASK & !(CACHE_BLOCK - 1)),
            CACHE_BLOCK as usize,
        );
    }
    Ok(())
}

/// `sync` (L=0, heavyweight), `lwsync` (L=1), `ptesync` (L=2). Host fences keep guest
/// ordering on any host; `ptesync` also performs a pending local TLB flush.
pub(super) fn sync(c: &mut Cpu, i: Insn) -> Exec {
    match i.l_sync() {
        1 => fence(Ordering::AcqRel),
        2 => {
            fence(Ordering::SeqCst);
            c.context_synchronize();
        }
        _ => fence(Ordering::SeqCst),
    }
    Ok(())
}

pub(super) fn eieio(_: &mut Cpu, _: Insn) -> Exec {
    fence(Ordering::Release);
    Ok(())
}

pub(super) fn isync(c: &mut Cpu, _: Insn) -> Exec {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    c.context_synchronize();
    Ok(())
}

impl Cpu {
    /// A context-synchronising point: perform a pending local TLB flush.
    pub fn context_synchronize(&mut self) {
        if std::mem::take(&mut self.tlb_flush_pending) {
            self.mmu.tlb.flush_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{cpu, run};
    use super::*;

    #[test]
    fn single_double_conversions_are_exact() {
        for w in [
            0u32,
            0x8000_0000,
            0x3f80_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0001,
            0x7f80_0001,
            0x0000_0001,
            0x807f_ffff,
            0x7f7f_ffff,
        ] {
            let d = single_to_double(w);
            assert_eq!(double_to_single(d), w, "{w:#x}");
            if (w >> 23) & 0xff != 0xff {
                assert_eq!(f64::from_bits(d), f32::from_bits(w) as f64);
            }
        }
        // A signalling NaN stays signalling.
        assert_eq!(single_to_double(0x7f80_0001) >> 51 & 1, 0);
    }

    #[test]
    fn update_forms_and_byte_reverse() {
        let mut c = cpu();
        c.st.gpr[4] = 0x8000;
        c.st.gpr[5] = 0x1122_3344_5566_7788;
        // stdu r5,8(r4); lwbrx r6,0,r4 (r4 = 0x8008 now); lhz r7,6(r4)
        run(&mut c, &[0xf8a4_0009, 0x7cc0_242c, 0xa0e4_0006]);
        assert_eq!(c.st.gpr[4], 0x8008);
        assert_eq!(c.st.gpr[6], 0x8877_6655);
        assert_eq!(c.st.gpr[7], 0x1122);
    }

    #[test]
    fn reservation_pairs() {
        let mut c = cpu();
        c.st.gpr[3] = 0x9000;
        c.st.gpr[5] = 42;
        // lwarx r4,0,r3; stwcx. r5,0,r3; stwcx. r5,0,r3 (second fails: reservation gone)
        run(&mut c, &[0x7c80_1828, 0x7ca0_192d]);
        assert_eq!(c.st.crf(0), 2);
        assert_eq!(c.mmu.load(&c.st, 0x9000, 4, true).unwrap(), 42);
        run(&mut c, &[0x7ca0_192d]);
        assert_eq!(c.st.crf(0), 0);
    }

    #[test]
    fn quadword_order_follows_endianness() {
        let mut c = cpu();
        c.st.gpr[3] = 0x9000;
        c.st.gpr[6] = 0x1111;
        c.st.gpr[7] = 0x2222;
        // stq r6,0(r3); lq r8,0(r3)
        run(&mut c, &[0xf8c3_0002, 0xe103_0000]);
        assert_eq!((c.st.gpr[8], c.st.gpr[9]), (0x1111, 0x2222));
        // Little-endian: the odd register's doubleword comes first in memory.
        assert_eq!(c.mmu.load(&c.st, 0x9000, 8, true).unwrap(), 0x2222);
    }

    #[test]
    fn dcbz_clears_an_aligned_128_byte_block() {
        let mut c = cpu();
        for k in 0..64 {
            c.mmu
                .store(&c.st, 0x8f80 + 8 * k, 8, u64::MAX, true)
                .unwrap();
        }
        c.st.gpr[3] = 0x9010;
        run(&mut c, &[0x7c00_1fec]); // dcbz 0,r3
        assert_eq!(c.mmu.load(&c.st, 0x8ff8, 8, true).unwrap(), u64::MAX);
        for k in 0..16 {
            assert_eq!(c.mmu.load(&c.st, 0x9000 + 8 * k, 8, true).unwrap(), 0);
        }
        assert_eq!(c.mmu.load(&c.st, 0x9080, 8, true).unwrap(), u64::MAX);
    }

    #[test]
    fn multiple_and_string_are_big_endian_only() {
        let mut c = cpu();
        c.st.gpr[3] = 0x9000;
        c.st.pc = 0x1000;
        c.nia = 0x1004;
        // lmw r28,0(r3); stmw r28,0(r3); lswi r5,r3,8
        for w in [0xbb83_0000, 0xbf83_0000, 0x7ca3_44aa] {
            assert!(
                matches!(c.execute(w), Err(Exception::Alignment { .. })),
                "{w:#x}"
            );
        }
        c.st.msr &= !msr::LE;
        c.st.gpr[28] = 0x1122_3344;
        c.st.gpr[29] = 0x5566_7788_99aa_bbcc;
        run(&mut c, &[0xbf83_0000, 0xba83_0000]); // stmw r28,0(r3); lmw r20,0(r3)
        assert_eq!(c.st.gpr[20..23], [0x1122_3344, 0x99aa_bbcc, 0]);
        assert_eq!(c.st.gpr[28], 0); // loaded from beyond what stmw wrote
    }

    #[test]
    fn string_load_over_its_address_register_is_illegal() {
        let mut c = cpu();
        c.st.msr &= !msr::LE;
        c.st.gpr[6] = 0x9000;
        c.st.set_xer(8);
        c.st.pc = 0x1000;
        c.nia = 0x1004;
        // lswx r5,r6,r7 loads r5 and r6: RA is among them.
        assert_eq!(c.execute(0x7ca6_3c2a), Err(ILLEGAL));
        // lswi r5,r6,8 likewise; lswi r5,r7,8 is fine.
        assert_eq!(c.execute(0x7ca6_44aa), Err(ILLEGAL));
        c.st.gpr[7] = 0x9000;
        assert_eq!(c.execute(0x7ca7_44aa), Ok(()));
    }

    #[test]
    fn store_conditional_without_reservation_touches_nothing() {
        let mut c = cpu();
        c.st.gpr[3] = 0x4000_0001; // unmapped and misaligned
        c.st.set_cr(0xf000_0000);
        run(&mut c, &[0x7ca0_192d]); // stwcx. r5,0,r3
        assert_eq!(c.st.crf(0), 0);
    }

    #[test]
    fn misaligned_quadword_is_two_doublewords() {
        let mut c = cpu();
        c.st.gpr[3] = 0x9008;
        c.st.gpr[6] = 0x1111;
        c.st.gpr[7] = 0x2222;
        run(&mut c, &[0xf8c3_0002, 0xe103_0000]); // stq r6,0(r3); lq r8,0(r3)
        assert_eq!((c.st.gpr[8], c.st.gpr[9]), (0x1111, 0x2222));
        assert_eq!(c.mmu.load(&c.st, 0x9008, 8, true).unwrap(), 0x2222);
    }

    #[test]
    fn cache_flushes_fault_like_loads() {
        let mut c = cpu();
        c.st.gpr[3] = 0x4000_0000; // beyond the 1 MiB of RAM
        c.st.pc = 0x1000;
        c.nia = 0x1004;
        for w in [0x7c00_186c, 0x7c00_18ac, 0x7c00_1fac] {
            // dcbst 0,r3; dcbf 0,r3; icbi 0,r3
            assert!(matches!(c.execute(w), Err(Exception::Dsi { .. })), "{w:#x}");
        }
        assert_eq!(c.execute(0x7c00_1a2c), Ok(())); // dcbt 0,r3: a hint
    }

    #[test]
    fn quadword_reservation_pair_succeeds() {
        let mut c = cpu();
        c.st.gpr[3] = 0x9000;
        c.st.gpr[8] = 0x1111;
        c.st.gpr[9] = 0x2222;
        // lqarx r6,0,r3; stqcx. r8,0,r3
        run(&mut c, &[0x7cc0_1a28, 0x7d00_196d]);
        assert_eq!(c.st.crf(0), 2);
        run(&mut c, &[0xe143_0000]); // lq r10,0(r3)
        assert_eq!((c.st.gpr[10], c.st.gpr[11]), (0x1111, 0x2222));
    }
}
