//! Vector loads and stores (VMX and VSX).
//!
//! Byte order: a VMX quadword access (`lvx`) moves the 16 bytes as one 128-bit scalar in the
//! current byte order, so in little-endian mode the byte at the lowest address lands in
//! element 15. A VSX access (`lxvd2x`, `lxvw4x`) moves each doubleword or word element in
//! the current byte order but keeps element 0 at the lowest address in both modes.

use super::super::loadstore::{Addr, ea};
use super::super::loadstore::{double_to_single, single_to_double};
use super::{Cpu, Exec, Lane, get, put, vec_ok, vsx_ok};
use crate::cpu::{Exception, ProgramKind};
use crate::isa::Insn;
use crate::softmmu::{PAGE_MASK, PAGE_SIZE};

#[inline(always)]
fn ea_x(c: &Cpu, i: Insn) -> u64 {
    ea(c, i, Addr::X)
}

/// The two doublewords at `ea` and `ea + 8`, each in the current byte order.
fn load_dwords(c: &mut Cpu, ea: u64) -> Result<(u64, u64), Exception> {
    let le = c.st.le();
    let first = c.mmu.load(&c.st, ea, 8, le)?;
    let second = c.mmu.load(&c.st, c.mask_ea(ea.wrapping_add(8)), 8, le)?;
    Ok((first, second))
}

/// Stores two doublewords at `ea` and `ea + 8`; faults before storing anything.
fn store_dwords(c: &mut Cpu, ea: u64, first: u64, second: u64) -> Exec {
    let le = c.st.le();
    let second_ea = c.mask_ea(ea.wrapping_add(8));
    if (ea & !PAGE_MASK) > PAGE_SIZE - 16 {
        c.mmu.probe_write(&c.st, c.mask_ea(ea.wrapping_add(15)))?;
    }
    c.mmu.store(&c.st, ea, 8, first, le)?;
    c.mmu.store(&c.st, second_ea, 8, second, le)
}

/// A quadword as one 128-bit value in the current byte order.
fn load_quad(c: &mut Cpu, ea: u64) -> Result<u128, Exception> {
    let (first, second) = load_dwords(c, ea)?;
    Ok(if c.st.le() {
        ((second as u128) << 64) | first as u128
    } else {
        ((first as u128) << 64) | second as u128
    })
}

fn store_quad(c: &mut Cpu, ea: u64, v: u128) -> Exec {
    let (hi, lo) = ((v >> 64) as u64, v as u64);
    if c.st.le() {
        store_dwords(c, ea, lo, hi)
    } else {
        store_dwords(c, ea, hi, lo)
    }
}

// --- VMX ---

fn lvx_common(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let v = load_quad(c, ea_x(c, i) & !15)?;
    c.st.set_vr(i.rt(), v);
    Ok(())
}

fn stvx_common(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    store_quad(c, ea_x(c, i) & !15, c.st.vr(i.rs()))
}

pub(in crate::interp) fn lvx(c: &mut Cpu, i: Insn) -> Exec {
    lvx_common(c, i)
}
/// `lvxl`: `lvx` with a least-recently-used cache hint.
pub(in crate::interp) fn lvxl(c: &mut Cpu, i: Insn) -> Exec {
    lvx_common(c, i)
}
pub(in crate::interp) fn stvx(c: &mut Cpu, i: Insn) -> Exec {
    stvx_common(c, i)
}
pub(in crate::interp) fn stvxl(c: &mut Cpu, i: Insn) -> Exec {
    stvx_common(c, i)
}

/// Element index (0 = most significant) that the element of `T` at `ea` has in the aligned
/// quadword around it, as `lvx` would load it.
#[inline(always)]
fn element_index<T: Lane>(ea: u64, le: bool) -> usize {
    let size = (T::BITS / 8) as usize;
    let k = (ea & 15) as usize / size;
    if le { 16 / size - 1 - k } else { k }
}

/// `lve?x`: one element into its place in VRT; the other elements keep their values.
fn load_element<T: Lane>(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let size = T::BITS as u64 / 8;
    let ea = ea_x(c, i) & !(size - 1);
    let le = c.st.le();
    let x = c.mmu.load(&c.st, ea, size as usize, le)?;
    let mut v = c.st.vr(i.rt());
    put(&mut v, element_index::<T>(ea, le), T::from_bits(x as u128));
    c.st.set_vr(i.rt(), v);
    Ok(())
}

fn store_element<T: Lane>(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let size = T::BITS as u64 / 8;
    let ea = ea_x(c, i) & !(size - 1);
    let le = c.st.le();
    let x: T = get(c.st.vr(i.rs()), element_index::<T>(ea, le));
    c.mmu.store(&c.st, ea, size as usize, x.bits() as u64, le)
}

pub(in crate::interp) fn lvebx(c: &mut Cpu, i: Insn) -> Exec {
    load_element::<u8>(c, i)
}
pub(in crate::interp) fn lvehx(c: &mut Cpu, i: Insn) -> Exec {
    load_element::<u16>(c, i)
}
pub(in crate::interp) fn lvewx(c: &mut Cpu, i: Insn) -> Exec {
    load_element::<u32>(c, i)
}
pub(in crate::interp) fn stvebx(c: &mut Cpu, i: Insn) -> Exec {
    store_element::<u8>(c, i)
}
pub(in crate::interp) fn stvehx(c: &mut Cpu, i: Insn) -> Exec {
    store_element::<u16>(c, i)
}
pub(in crate::interp) fn stvewx(c: &mut Cpu, i: Insn) -> Exec {
    store_element::<u32>(c, i)
}

/// Permute control for a left shift by `ea & 15` bytes: bytes sh, sh+1, …, sh+15. The
/// same in both byte orders (little-endian code uses `lvsr` and swaps the `vperm` inputs).
pub(in crate::interp) fn lvsl(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let sh = (ea_x(c, i) & 15) as u128;
    c.st.set_vr(
        i.rt(),
        0x0001_0203_0405_0607_0809_0a0b_0c0d_0e0f + sh * 0x0101_0101_0101_0101_0101_0101_0101_0101,
    );
    Ok(())
}

/// Permute control for a right shift: bytes 16-sh, …, 31-sh.
pub(in crate::interp) fn lvsr(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let sh = (ea_x(c, i) & 15) as u128;
    c.st.set_vr(
        i.rt(),
        0x1011_1213_1415_1617_1819_1a1b_1c1d_1e1f - sh * 0x0101_0101_0101_0101_0101_0101_0101_0101,
    );
    Ok(())
}

/// The data stream instructions only hint at future accesses: no effect, no facility check.
/// A stream start needs a base register (RA = 0 is an invalid form).
fn stream_touch(_: &mut Cpu, i: Insn) -> Exec {
    if i.ra() == 0 {
        Err(Exception::Program(ProgramKind::Illegal))
    } else {
        Ok(())
    }
}

pub(in crate::interp) fn dst(c: &mut Cpu, i: Insn) -> Exec {
    stream_touch(c, i)
}
pub(in crate::interp) fn dstt(c: &mut Cpu, i: Insn) -> Exec {
    stream_touch(c, i)
}
pub(in crate::interp) fn dstst(c: &mut Cpu, i: Insn) -> Exec {
    stream_touch(c, i)
}
pub(in crate::interp) fn dststt(c: &mut Cpu, i: Insn) -> Exec {
    stream_touch(c, i)
}
pub(in crate::interp) fn dss(_: &mut Cpu, _: Insn) -> Exec {
    Ok(())
}
pub(in crate::interp) fn dssall(_: &mut Cpu, _: Insn) -> Exec {
    Ok(())
}

// --- VSX ---

#[inline(always)]
fn set_dw0(c: &mut Cpu, xt: u32, d: u64) {
    let r = &mut c.st.vsr[xt as usize];
    *r = (*r & u64::MAX as u128) | ((d as u128) << 64);
}

#[inline(always)]
fn dw0(c: &Cpu, xs: u32) -> u64 {
    (c.st.vsr[xs as usize] >> 64) as u64
}

pub(in crate::interp) fn lxvd2x(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let (d0, d1) = load_dwords(c, ea_x(c, i))?;
    c.st.vsr[i.xt() as usize] = ((d0 as u128) << 64) | d1 as u128;
    Ok(())
}

pub(in crate::interp) fn stxvd2x(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let v = c.st.vsr[i.xt() as usize];
    store_dwords(c, ea_x(c, i), (v >> 64) as u64, v as u64)
}

/// In little-endian mode a doubleword load yields word 1 in its high half; swapping the
/// halves gives word 0 first, as `lxvw4x` wants (a no-op on the order of big-endian loads).
#[inline(always)]
fn word_order(d: u64, le: bool) -> u64 {
    if le { d.rotate_left(32) } else { d }
}

pub(in crate::interp) fn lxvw4x(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let le = c.st.le();
    let (d0, d1) = load_dwords(c, ea_x(c, i))?;
    c.st.vsr[i.xt() as usize] = ((word_order(d0, le) as u128) << 64) | word_order(d1, le) as u128;
    Ok(())
}

pub(in crate::interp) fn stxvw4x(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let le = c.st.le();
    let v = c.st.vsr[i.xt() as usize];
    store_dwords(
        c,
        ea_x(c, i),
        word_order((v >> 64) as u64, le),
        word_order(v as u64, le),
    )
}

/// `lxvdsx`: one doubleword into both halves.
pub(in crate::interp) fn lxvdsx(c: &mut Cpu, i: Insn) -> Exec {
    vsx_ok(c)?;
    let ea = ea_x(c, i);
    let d = c.mmu.load(&c.st, ea, 8, c.st.le())? as u128;
    c.st.vsr[i.xt() as usize] = (d << 64) | d;
    Ok(())
}

/// Scalar loads write doubleword 0; doubleword 1 is undefined and keeps its value.
fn load_scalar(c: &mut Cpu, i: Insn, size: usize, conv: impl Fn(u64) -> u64) -> Exec {
    vsx_ok(c)?;
    let ea = ea_x(c, i);
    let x = c.mmu.load(&c.st, ea, size, c.st.le())?;
    set_dw0(c, i.xt(), conv(x));
    Ok(())
}

fn store_scalar(c: &mut Cpu, i: Insn, size: usize, conv: impl Fn(u64) -> u64) -> Exec {
    vsx_ok(c)?;
    let ea = ea_x(c, i);
    let x = conv(dw0(c, i.xt()));
    c.mmu.store(&c.st, ea, size, x, c.st.le())
}

pub(in crate::interp) fn lxsdx(c: &mut Cpu, i: Insn) -> Exec {
    load_scalar(c, i, 8, |x| x)
}
pub(in crate::interp) fn lxsiwax(c: &mut Cpu, i: Insn) -> Exec {
    load_scalar(c, i, 4, |x| x as i32 as i64 as u64)
}
pub(in crate::interp) fn lxsiwzx(c: &mut Cpu, i: Insn) -> Exec {
    load_scalar(c, i, 4, |x| x)
}
pub(in crate::interp) fn lxsspx(c: &mut Cpu, i: Insn) -> Exec {
    load_scalar(c, i, 4, |x| single_to_double(x as u32))
}
pub(in crate::interp) fn stxsdx(c: &mut Cpu, i: Insn) -> Exec {
    store_scalar(c, i, 8, |x| x)
}
/// `stxsiwx` stores word 1 (the low word of doubleword 0).
pub(in crate::interp) fn stxsiwx(c: &mut Cpu, i: Insn) -> Exec {
    store_scalar(c, i, 4, |x| x & 0xffff_ffff)
}
pub(in crate::interp) fn stxsspx(c: &mut Cpu, i: Insn) -> Exec {
    store_scalar(c, i, 4, |x| double_to_single(x) as u64)
}

#[cfg(test)]
mod tests {
    use super::super::super::test_util::{cpu, run};
    use crate::cpu::{Exception, msr};

    const Q: u128 = 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff;

    /// Memory at 0x9000 holds bytes 0x00, 0x11, …, 0xff (in address order).
    fn cpu_with_bytes(le: bool) -> crate::interp::Cpu {
        let mut c = cpu();
        if !le {
            c.st.msr &= !msr::LE;
        }
        for k in 0..16u64 {
            c.mmu.store(&c.st, 0x9000 + k, 1, k * 0x11, false).unwrap();
        }
        c.st.gpr[3] = 0x9000;
        c
    }

    fn mem_bytes(c: &mut crate::interp::Cpu, at: u64) -> u128 {
        let mut v = 0u128;
        for k in 0..16 {
            v = (v << 8) | c.mmu.load(&c.st, at + k, 1, false).unwrap() as u128;
        }
        v
    }

    #[test]
    fn lvx_is_a_quadword_in_the_current_byte_order() {
        let mut c = cpu_with_bytes(false);
        c.st.gpr[4] = 7; // low four bits are ignored
        run(&mut c, &[0x7c43_20ce]); // lvx v2,r3,r4
        assert_eq!(c.st.vr(2), Q);
        let mut c = cpu_with_bytes(true);
        c.st.gpr[4] = 7;
        run(&mut c, &[0x7c43_20ce]);
        assert_eq!(c.st.vr(2), u128::from_le_bytes(Q.to_be_bytes()));
        // stvx puts it back the same way.
        c.st.gpr[4] = 0x10;
        run(&mut c, &[0x7c43_21ce]); // stvx v2,r3,r4
        assert_eq!(mem_bytes(&mut c, 0x9010), Q);
    }

    #[test]
    fn lxvd2x_keeps_doubleword_order_in_little_endian() {
        let mut c = cpu_with_bytes(true);
        c.st.gpr[4] = 0;
        run(&mut c, &[0x7c43_2698]); // lxvd2x vs2,r3,r4
        // Each doubleword byte-reversed, doubleword 0 from the lower address.
        assert_eq!(c.st.vsr[2], 0x7766_5544_3322_1100_ffee_ddcc_bbaa_9988);
        run(&mut c, &[0x7c43_2618]); // lxvw4x vs2,r3,r4
        assert_eq!(c.st.vsr[2], 0x3322_1100_7766_5544_bbaa_9988_ffee_ddcc);
        c.st.gpr[4] = 0x20;
        run(&mut c, &[0x7c43_2718]); // stxvw4x vs2,r3,r4
        assert_eq!(mem_bytes(&mut c, 0x9020), Q);
        let mut c = cpu_with_bytes(false);
        run(&mut c, &[0x7c43_2698, 0x7c63_2618]); // lxvd2x vs2; lxvw4x vs3
        assert_eq!(c.st.vsr[2], Q);
        assert_eq!(c.st.vsr[3], Q);
    }

    #[test]
    fn element_loads_pick_the_element_of_the_aligned_quadword() {
        for le in [false, true] {
            let mut c = cpu_with_bytes(le);
            c.st.set_vr(5, u128::MAX);
            c.st.gpr[4] = 6; // halfword at 0x9006
            run(&mut c, &[0x7ca3_204e]); // lvehx v5,r3,r4
            let lvx_view = if le {
                u128::from_le_bytes(Q.to_be_bytes())
            } else {
                Q
            };
            let k = if le { 4 } else { 3 };
            let sh = 112 - 16 * k;
            assert_eq!(
                c.st.vr(5),
                !(0xffff << sh) | (lvx_view & (0xffff << sh)),
                "le={le}"
            );
            // stvewx of the word at 0x900c stores that word back where lvx found it.
            c.st.set_vr(6, !lvx_view);
            c.st.gpr[4] = 0xd; // aligned down to 0x900c
            run(&mut c, &[0x7cc3_218e]); // stvewx v6,r3,r4
            assert_eq!(mem_bytes(&mut c, 0x9000), Q ^ 0xffff_ffff, "le={le}");
        }
    }

    #[test]
    fn lvsl_lvsr_controls() {
        let mut c = cpu();
        c.st.gpr[3] = 0x1003;
        c.st.gpr[4] = 0;
        run(&mut c, &[0x7c43_200c, 0x7c63_204c]); // lvsl v2,r3,r4; lvsr v3,r3,r4
        assert_eq!(c.st.vr(2), 0x0304_0506_0708_090a_0b0c_0d0e_0f10_1112);
        assert_eq!(c.st.vr(3), 0x0d0e_0f10_1112_1314_1516_1718_191a_1b1c);
    }

    #[test]
    fn scalar_loads_and_stores() {
        let mut c = cpu_with_bytes(true);
        c.st.gpr[4] = 0xc;
        c.st.vsr[40] = 0x5555;
        // lxsiwax vs40,r3,r4: word 0xffeeddcc sign-extended into doubleword 0.
        run(&mut c, &[0x7d03_2099]);
        assert_eq!(c.st.vsr[40], (0xffff_ffff_ffee_ddccu128 << 64) | 0x5555);
        run(&mut c, &[0x7d03_2019]); // lxsiwzx vs40,r3,r4
        assert_eq!(c.st.vsr[40] >> 64, 0xffee_ddcc);
        // stxsspx of 1.5 (double) stores the single 0x3fc00000.
        c.st.vsr[1] = (1.5f64.to_bits() as u128) << 64;
        c.st.gpr[4] = 0x40;
        run(&mut c, &[0x7c23_2518]); // stxsspx vs1,r3,r4
        assert_eq!(c.mmu.load(&c.st, 0x9040, 4, true).unwrap(), 0x3fc0_0000);
        run(&mut c, &[0x7c43_2418]); // lxsspx vs2,r3,r4
        assert_eq!(c.st.vsr[2] >> 64, 1.5f64.to_bits() as u128);
    }

    #[test]
    fn a_store_crossing_into_a_missing_page_writes_nothing() {
        let mut c = cpu();
        let top = (1u64 << 20) - 8; // the last 8 bytes of RAM
        c.mmu.store(&c.st, top, 8, 0x1234, true).unwrap();
        c.st.gpr[3] = top;
        c.st.gpr[4] = 0;
        c.st.vsr[2] = u128::MAX;
        c.st.pc = 0x1000;
        c.mmu.store(&c.st, 0x1000, 4, 0x7c43_2798, true).unwrap(); // stxvd2x vs2,r3,r4
        assert!(matches!(c.step(), Err(Exception::Dsi { .. })));
        assert_eq!(c.mmu.load(&c.st, top, 8, true).unwrap(), 0x1234);
    }

    #[test]
    fn stream_hints_need_no_facility_but_a_base_register() {
        let mut c = cpu();
        c.st.msr &= !(msr::VEC | msr::VSX | msr::FP);
        assert_eq!(c.execute(0x7e00_066c), Ok(())); // dssall
        assert_eq!(c.execute(0x7c23_22ac), Ok(())); // dst r3,r4,1
        assert_eq!(
            c.execute(0x7c20_22ac),
            Err(Exception::Program(crate::cpu::ProgramKind::Illegal))
        ); // dst r0,r4,1
    }

    #[test]
    fn availability() {
        let mut c = cpu();
        c.st.msr &= !msr::VSX;
        assert_eq!(c.execute(0x7c43_2698), Err(Exception::VsxUnavailable)); // lxvd2x
        c.st.msr &= !msr::VEC;
        assert_eq!(c.execute(0x7c43_20ce), Err(Exception::VecUnavailable)); // lvx
    }
}
