//! Operand fields of an instruction word. Bit numbers in comments are IBM's (0 = MSB).

/// A raw 32-bit instruction word with typed accessors for its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn(pub u32);

macro_rules! fields {
    ($($(#[$doc:meta])* $name:ident: $first:literal..=$last:literal;)*) => {
        impl Insn {
            $(
                $(#[$doc])*
                #[inline(always)]
                pub const fn $name(self) -> u32 {
                    (self.0 >> (31 - $last)) & ((1u32 << ($last - $first + 1)) - 1)
                }
            )*
        }
    };
}

fields! {
    /// Primary opcode (0-5)
    opcd: 0..=5;
    /// RT/RS/FRT/VRT/BO/TO/BT (6-10)
    rt: 6..=10;
    /// BF (6-8)
    bf: 6..=8;
    /// L of compares (10)
    l10: 10..=10;
    /// RA/FRA/VRA/BI/BA (11-15)
    ra: 11..=15;
    /// BFA (11-13)
    bfa: 11..=13;
    /// L of mtmsr[d] (15)
    l15: 15..=15;
    /// RB/FRB/VRB/BB/SH/NB (16-20)
    rb: 16..=20;
    /// RC/FRC/VRC/MB/BC (21-25)
    rc_field: 21..=25;
    /// ME (26-30)
    me: 26..=30;
    /// D/SI/UI (16-31)
    d16: 16..=31;
    /// DS (16-29)
    ds14: 16..=29;
    /// DQ (16-27)
    dq12: 16..=27;
    /// LI (6-29)
    li24: 6..=29;
    /// BD (16-29)
    bd14: 16..=29;
    /// AA (30)
    aa: 30..=30;
    /// LK / Rc (31)
    bit31: 31..=31;
    /// OE / Rc of VC and XX3R forms (21)
    bit21: 21..=21;
    /// L of sync (9-10)
    l_sync: 9..=10;
    /// BH (19-20)
    bh: 19..=20;
    /// FXM / CRM (12-19)
    fxm: 12..=19;
    /// FLM of mtfsf (7-14)
    flm: 7..=14;
    /// L of mtfsf (6)
    mtfsf_l: 6..=6;
    /// W of mtfsf[i] (15)
    w: 15..=15;
    /// U of mtfsfi (16-19)
    u: 16..=19;
    /// LEV of sc (20-26)
    lev: 20..=26;
    /// DM / SHW of XX3 permutes (22-23)
    dm: 22..=23;
    /// SHB of vsldoi (22-25)
    shb: 22..=25;
    /// UIM of vector splats (11-15; the used width depends on the element size)
    uim: 11..=15;
    /// ST (16) and SIX (17-20) of vshasigma[wd]
    st: 16..=16;
    six: 17..=20;
    /// PS of bcdadd./bcdsub. (22)
    ps: 22..=22;
    /// STRM of dst/dss (9-10)
    strm: 9..=10;
    /// TX/SX (31), AX (29), BX (30), CX (28)
    tx: 31..=31;
    ax: 29..=29;
    bx: 30..=30;
    cx: 28..=28;
}

impl Insn {
    #[inline(always)]
    pub const fn rs(self) -> u32 {
        self.rt()
    }
    #[inline(always)]
    pub const fn rc(self) -> bool {
        self.bit31() != 0
    }
    #[inline(always)]
    pub const fn oe(self) -> bool {
        self.bit21() != 0
    }
    #[inline(always)]
    pub const fn lk(self) -> bool {
        self.bit31() != 0
    }
    #[inline(always)]
    pub const fn si(self) -> i64 {
        self.d16() as u16 as i16 as i64
    }
    #[inline(always)]
    pub const fn ui(self) -> u64 {
        self.d16() as u64
    }
    /// DS displacement, already scaled by 4.
    #[inline(always)]
    pub const fn ds(self) -> i64 {
        ((self.ds14() << 2) as u16 as i16) as i64
    }
    /// DQ displacement, already scaled by 16.
    #[inline(always)]
    pub const fn dq(self) -> i64 {
        ((self.dq12() << 4) as u16 as i16) as i64
    }
    /// Branch displacement of `b`, scaled and sign-extended.
    #[inline(always)]
    pub const fn li(self) -> i64 {
        (((self.li24() << 8) as i32) >> 6) as i64
    }
    /// Branch displacement of `bc`, scaled and sign-extended.
    #[inline(always)]
    pub const fn bd(self) -> i64 {
        (((self.bd14() << 18) as i32) >> 16) as i64
    }
    /// SH of rotate/shift word forms (16-20).
    #[inline(always)]
    pub const fn sh(self) -> u32 {
        self.rb()
    }
    /// MB of M-form (21-25).
    #[inline(always)]
    pub const fn mb(self) -> u32 {
        self.rc_field()
    }
    /// 6-bit SH of MD/XS forms: sh(16-20) || sh5(30).
    #[inline(always)]
    pub const fn sh6(self) -> u32 {
        self.rb() | (self.aa() << 5)
    }
    /// 6-bit MB/ME of MD/MDS forms, stored as mb(21-25) rotated: mb5 is bit 26.
    #[inline(always)]
    pub const fn mb6(self) -> u32 {
        let f = (self.0 >> 5) & 0x3f;
        ((f & 1) << 5) | (f >> 1)
    }
    /// SPR number (the two 5-bit halves of bits 11-20 are swapped in the encoding).
    #[inline(always)]
    pub const fn spr(self) -> u32 {
        let f = (self.0 >> 11) & 0x3ff;
        ((f & 0x1f) << 5) | (f >> 5)
    }
    /// FPR/VR register in bits 21-25 (FRC, VRC) or isel's BC.
    #[inline(always)]
    pub const fn frc(self) -> u32 {
        self.rc_field()
    }
    /// VSX register XT/XS: TX(31) || T(6-10) for XX1/XX2/XX3 forms.
    #[inline(always)]
    pub const fn xt(self) -> u32 {
        self.rt() | (self.tx() << 5)
    }
    /// VSX register XA: AX(29) || A(11-15).
    #[inline(always)]
    pub const fn xa(self) -> u32 {
        self.ra() | (self.ax() << 5)
    }
    /// VSX register XB: BX(30) || B(16-20).
    #[inline(always)]
    pub const fn xb(self) -> u32 {
        self.rb() | (self.bx() << 5)
    }
    /// VSX register XC: CX(28) || C(21-25).
    #[inline(always)]
    pub const fn xc(self) -> u32 {
        self.rc_field() | (self.cx() << 5)
    }
    /// Signed 5-bit immediate of vspltis[bhw] (11-15).
    #[inline(always)]
    pub const fn simm(self) -> i64 {
        (((self.ra() << 27) as i32) >> 27) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_extraction() {
        let i = Insn(0x7c642a14); // add r3,r4,r5
        assert_eq!((i.opcd(), i.rt(), i.ra(), i.rb()), (31, 3, 4, 5));
        assert_eq!(Insn(0x3860fffe).si(), -2); // li r3,-2
        assert_eq!(Insn(0x4bfffffc).li(), -4); // b .-4
        assert_eq!(Insn(0x4182fff8).bd(), -8); // beq .-8
        assert_eq!(Insn(0xe8010010).ds(), 16); // ld r0,16(r1)
        assert_eq!(Insn(0xe801fff8).ds(), -8); // ld r0,-8(r1)
        assert_eq!(Insn(0x7c6802a6).spr(), 8); // mflr r3
        assert_eq!(Insn(0x7c6902a6).spr(), 9); // mfctr r3
        assert_eq!(Insn(0x7c7f42a6).spr(), 287); // mfpvr r3
        // rldicl r3,r4,61,3 (srdi r3,r4,3 == rldicl r3,r4,61,3)
        let r = Insn(0x7883e8c2);
        assert_eq!((r.sh6(), r.mb6()), (61, 3));
        // rldicr r3,r4,4,59 (sldi r3,r4,4)
        let r = Insn(0x788326e4);
        assert_eq!((r.sh6(), r.mb6()), (4, 59));
    }
}
