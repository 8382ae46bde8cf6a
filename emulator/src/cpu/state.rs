//! `CpuState`: the architected registers of one POWER8 thread.
//!
//! `#[repr(C)]` with the fields every block touches first, so that translated code reaches
//! them at small constant offsets (`core::mem::offset_of!`) and they share cache lines.

/// MSR bits (Book III-S 4.2.1), as masks on the 64-bit register.
pub mod msr {
    pub const SF: u64 = 1 << 63;
    pub const HV: u64 = 1 << 60;
    pub const TM_TS: u64 = 3 << 33;
    pub const VEC: u64 = 1 << 25;
    pub const VSX: u64 = 1 << 23;
    pub const EE: u64 = 1 << 15;
    pub const PR: u64 = 1 << 14;
    pub const FP: u64 = 1 << 13;
    pub const ME: u64 = 1 << 12;
    pub const FE0: u64 = 1 << 11;
    pub const SE: u64 = 1 << 10;
    pub const BE: u64 = 1 << 9;
    pub const FE1: u64 = 1 << 8;
    pub const IR: u64 = 1 << 5;
    pub const DR: u64 = 1 << 4;
    pub const PMM: u64 = 1 << 2;
    pub const RI: u64 = 1 << 1;
    pub const LE: u64 = 1 << 0;
}

/// XER bits kept in `CpuState::xer_rsvd`.
pub const XER_RESERVED: u64 = 0x1ff3_ff80;

/// Packing `CpuState::crf` (loaded little-endian and byte-swapped, so CR0 is the top byte)
/// into the 32-bit CR: rounds of `x = (x | x >> shift) & keep`, each halving the gap between
/// neighbouring fields. The interpreter and both JIT tiers use these rounds.
pub const CR_PACK: [(u32, u64); 3] = [
    (4, 0x00ff_00ff_00ff_00ff),
    (8, 0x0000_ffff_0000_ffff),
    (16, 0xffff_ffff),
];

/// The inverse of [`CR_PACK`]: rounds of `x = (x | x << shift) & keep` spread the CR's
/// nibbles over bytes, which a byte swap puts in `CpuState::crf` order.
pub const CR_SPREAD: [(u32, u64); 3] = [
    (16, 0x0000_ffff_0000_ffff),
    (8, 0x00ff_00ff_00ff_00ff),
    (4, 0x0f0f_0f0f_0f0f_0f0f),
];

/// No reservation held (`reserve_addr` value).
pub const NO_RESERVATION: u64 = u64::MAX;

#[repr(C)]
#[derive(Clone, Debug)]
pub struct CpuState {
    // --- hot: every block ---
    pub gpr: [u64; 32],
    /// Condition register, one field per byte (CR0 first; LT|GT|EQ|SO in the low four
    /// bits): translated code sets a field with one byte store, where a packed word made
    /// every compare a read-modify-write waiting on the previous one. [`CpuState::cr`] packs
    /// them as `mfcr` reads them.
    pub crf: [u8; 8],
    /// XER[SO], XER[OV], XER[CA] as 0/1, and the string byte count (bits 57-63).
    pub so: u8,
    pub ov: u8,
    pub ca: u8,
    pub xer_bc: u8,
    pub lr: u64,
    pub ctr: u64,
    /// Address of the current instruction.
    pub pc: u64,
    pub msr: u64,
    /// Reservation of `l?arx`: address (or `NO_RESERVATION`), size and the value read, so that
    /// `st?cx.` can succeed by compare-and-swap against it.
    pub reserve_addr: u64,
    pub reserve_size: u64,
    pub reserve_val: [u64; 2],

    // --- floating point and vector ---
    /// VSR 0-63. VSR i (i < 32) has FPR i as its high doubleword; VSR 32+i is VR i.
    /// Element numbering is big-endian: byte 0 is bits 127..120.
    pub vsr: [u128; 64],
    pub fpscr: u64,
    pub vscr: u32,
    pub vrsave: u32,
    /// XER bits 32-63 that have no function on POWER8 (all but SO, OV, CA, OV32, CA32 and the
    /// byte count): `mtxer` keeps them and `mfxer` returns them, as the reference
    /// implementation (QEMU) does. The ISA leaves what reserved SPR bits read back open.
    pub xer_rsvd: u32,

    // --- user-visible SPRs ---
    pub tar: u64,
    pub dscr: u64,
    pub ppr: u64,
    pub ctrl: u64,
    pub ebbhr: u64,
    pub ebbrr: u64,
    pub bescr: u64,

    // --- supervisor SPRs ---
    pub srr0: u64,
    pub srr1: u64,
    pub dar: u64,
    pub dsisr: u64,
    pub sprg: [u64; 4],
    pub cfar: u64,
    pub amr: u64,
    pub iamr: u64,
    pub uamor: u64,
    pub pidr: u64,
    pub fscr: u64,
    pub lpcr: u64,
    pub pvr: u64,
    pub pir: u64,
    /// Performance-monitor registers (SIER, MMCR2, MMCRA, PMC1-6, MMCR0, SIAR, SDAR, MMCR1).
    pub pmu: [u64; 13],
    /// Decrementer: value written and the timebase at the time of the write (it counts
    /// down at the timebase frequency from there).
    pub dec_value: u64,
    pub dec_tb: u64,
    /// Segment lookaside buffer.
    pub slb: [SlbEntry; SLB_SIZE],
    /// Data address breakpoint (DABR, DABRX) as H_SET_DABR / H_SET_XDABR set them; kept, not
    /// matched (no breakpoint fires).
    pub dabr: u64,
    pub dabrx: u64,
    /// Problem state priority boost register (32 bits).
    pub pspb: u64,
}

/// Index of SIAR in `CpuState::pmu`.
pub const PMU_SIAR: usize = 10;

/// Number of SLB entries of POWER8 (`ibm,slb-size`).
pub const SLB_SIZE: usize = 32;

/// One SLB entry in the register formats of `slbmte`: `esid` as RB (ESID, V bit 36 → mask
/// `SLB_VALID`), `vsid` as RS (B, VSID, Ks, Kp, N, L, C, LP).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlbEntry {
    pub esid: u64,
    pub vsid: u64,
}

/// Valid bit of `SlbEntry::esid` (bit 36).
pub const SLB_VALID: u64 = 1 << 27;

impl CpuState {
    /// A thread in the reset state of a POWER8: 64-bit, big-endian, MMU off, machine checks on.
    pub fn new() -> Self {
        Self {
            gpr: [0; 32],
            crf: [0; 8],
            so: 0,
            ov: 0,
            ca: 0,
            xer_bc: 0,
            lr: 0,
            ctr: 0,
            pc: 0,
            msr: msr::SF | msr::ME,
            reserve_addr: NO_RESERVATION,
            reserve_size: 0,
            reserve_val: [0; 2],
            vsr: [0; 64],
            fpscr: 0,
            vscr: 0x0001_0000, // NJ set, as after reset
            vrsave: 0,
            xer_rsvd: 0,
            tar: 0,
            dscr: 0,
            ppr: 0x000c_0000_0000_0000, // medium priority
            ctrl: 0,
            ebbhr: 0,
            ebbrr: 0,
            bescr: 0,
            srr0: 0,
            srr1: 0,
            dar: 0,
            dsisr: 0,
            sprg: [0; 4],
            cfar: 0,
            amr: 0,
            iamr: 0,
            uamor: 0,
            pidr: 0,
            fscr: 0,
            lpcr: 0,
            pvr: 0x004d_0200,
            pir: 0,
            pmu: [0; 13],
            dec_value: 0,
            dec_tb: 0,
            slb: [SlbEntry::default(); SLB_SIZE],
            dabr: 0,
            dabrx: 0,
            pspb: 0,
        }
    }

    /// XER as `mfxer` reads it.
    pub fn xer(&self) -> u64 {
        ((self.so as u64) << 31)
            | ((self.ov as u64) << 30)
            | ((self.ca as u64) << 29)
            | self.xer_rsvd as u64
            | self.xer_bc as u64
    }

    /// `mtxer`: bits 0-31 are dropped; OV32/CA32 (bits 44-45, ISA 3.0) do not exist on POWER8.
    pub fn set_xer(&mut self, v: u64) {
        self.so = ((v >> 31) & 1) as u8;
        self.ov = ((v >> 30) & 1) as u8;
        self.ca = ((v >> 29) & 1) as u8;
        self.xer_rsvd = (v & XER_RESERVED) as u32;
        self.xer_bc = (v & 0x7f) as u8;
    }

    /// The condition register as `mfcr` reads it: CR0 in the most significant nibble.
    pub fn cr(&self) -> u32 {
        let mut x = u64::from_le_bytes(self.crf).swap_bytes();
        for (sh, keep) in CR_PACK {
            x = (x | x >> sh) & keep;
        }
        x as u32
    }

    /// `mtcrf 0xff`: every field from `cr` (CR0 in the most significant nibble).
    pub fn set_cr(&mut self, cr: u32) {
        let mut x = cr as u64;
        for (sh, keep) in CR_SPREAD {
            x = (x | x << sh) & keep;
        }
        self.crf = x.swap_bytes().to_le_bytes();
    }

    /// CR field `n` (0-7) as a 4-bit value LT|GT|EQ|SO.
    #[inline]
    pub fn crf(&self, n: u32) -> u32 {
        self.crf[n as usize] as u32
    }

    #[inline]
    pub fn set_crf(&mut self, n: u32, v: u32) {
        self.crf[n as usize] = (v & 0xf) as u8;
    }

    /// CR bit `n` (0 = CR0[LT]).
    #[inline]
    pub fn cr_bit(&self, n: u32) -> bool {
        self.crf[n as usize / 4] & (8 >> (n % 4)) != 0
    }

    #[inline]
    pub fn set_cr_bit(&mut self, n: u32, v: bool) {
        let (f, m) = (&mut self.crf[n as usize / 4], 8 >> (n % 4));
        *f = if v { *f | m } else { *f & !m };
    }

    /// FPR `n`: the high doubleword of VSR `n`.
    #[inline]
    pub fn fpr(&self, n: u32) -> u64 {
        (self.vsr[n as usize] >> 64) as u64
    }

    /// Writes FPR `n` and zeroes the low doubleword of the VSR. ISA 2.07 leaves that
    /// doubleword undefined after a scalar floating-point result; QEMU (our reference) and
    /// ISA 3.1 set it to zero.
    #[inline]
    pub fn set_fpr(&mut self, n: u32, v: u64) {
        self.vsr[n as usize] = (v as u128) << 64;
    }

    /// VR `n` (VSR 32 + n).
    #[inline]
    pub fn vr(&self, n: u32) -> u128 {
        self.vsr[32 + n as usize]
    }

    #[inline]
    pub fn set_vr(&mut self, n: u32, v: u128) {
        self.vsr[32 + n as usize] = v;
    }

    /// Data accesses are little-endian.
    #[inline]
    pub fn le(&self) -> bool {
        self.msr & msr::LE != 0
    }

    /// 64-bit mode (MSR[SF]); in 32-bit mode effective addresses are truncated.
    #[inline]
    pub fn sf(&self) -> bool {
        self.msr & msr::SF != 0
    }

    /// Problem state (user mode).
    #[inline]
    pub fn pr(&self) -> bool {
        self.msr & msr::PR != 0
    }
}

impl Default for CpuState {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::CpuState;

    /// The packed CR as `mfcr` reads it, its fields and its bits are views of one register.
    #[test]
    fn cr_fields_bits_and_the_packed_word_agree() {
        let mut s = CpuState::new();
        s.set_cr(0x1234_5678);
        assert_eq!(s.crf, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!((s.cr(), s.crf(0), s.crf(7)), (0x1234_5678, 1, 8));
        // Bit 0 is CR0[LT], bit 31 CR7[SO].
        assert!(s.cr_bit(3) && !s.cr_bit(0) && s.cr_bit(28) && !s.cr_bit(31));
        s.set_cr_bit(0, true);
        s.set_cr_bit(28, false);
        s.set_crf(2, 0xfa);
        assert_eq!(s.cr(), 0x92a4_5670);
    }
}
