//! The instruction set: one declarative table (`table/*.insn`, compiled by `build.rs`),
//! the decoder derived from it, operand fields and the disassembler.
//!
//! This module knows encodings only: no CPU state, no execution.

mod disasm;
mod fields;

pub use disasm::disassemble;
pub use fields::Insn;

/// Instruction formats of the Power ISA (they fix where the extended opcode and flag bits sit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum Form {
    I,
    B,
    SC,
    D,
    DS,
    DQ,
    X,
    XL,
    XFX,
    XFL,
    XO,
    XS,
    M,
    MD,
    MDS,
    A,
    VA,
    VX,
    VC,
    XX1,
    XX2,
    XX3,
    XX3R,
    XX4,
}

/// Data-flow and behaviour flags of an instruction (one bit per flag word of the table). The
/// interpreter's loads, stores and adds take their parameters from them, and its tests
/// (`interp::table_effects`) check the data-flow ones against what it executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct InsnFlags(pub u32);

impl InsnFlags {
    pub const fn contains(self, other: InsnFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Operand kinds, in the order the assembler writes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    Rt,
    Rs,
    Ra,
    /// RA, where register 0 means the value 0.
    Ra0,
    Rb,
    Si,
    Ui,
    /// `D(RA|0)`
    DRa,
    /// `DS(RA|0)`, DS scaled by 4
    DsRa,
    /// `DQ(RA|0)`, DQ scaled by 16
    DqRa,
    Bf,
    Bfa,
    /// L bit of compares (bit 10)
    L10,
    /// L bit of mtmsr[d] (bit 15)
    L15,
    /// L field of sync (bits 9-10)
    LSync,
    Bt,
    Ba,
    Bb,
    Bo,
    Bi,
    Bh,
    Bd,
    Li,
    To,
    Sh,
    Mb,
    Me,
    Sh6,
    Mb6,
    Spr,
    Tbr,
    Crm,
    Fxm,
    Flm,
    U,
    W,
    Frt,
    Frs,
    Fra,
    Frb,
    Frc,
    Vrt,
    Vrs,
    Vra,
    Vrb,
    Vrc,
    Xt,
    Xs,
    Xa,
    Xb,
    Xc,
    Dm,
    Shw,
    Uim,
    Simm,
    Shb,
    Nb,
    Th,
    Lev,
    Eh,
    Sr,
    /// CR bit selected by isel (bits 21-25)
    Bc,
    /// ST of vshasigma[wd] (bit 16): lower-case sigma (0) or upper-case Sigma (1)
    St,
    /// SIX of vshasigma[wd] (bits 17-20): which function per element
    Six,
    /// PS of bcdadd./bcdsub. (bit 22): preferred plus sign 0xF instead of 0xC
    Ps,
    /// STRM of the data stream instructions (bits 9-10)
    Strm,
}

/// Everything the table says about one instruction.
#[derive(Debug)]
pub struct OpInfo {
    pub mnemonic: &'static str,
    pub form: Form,
    /// Bits that identify the instruction, and their value.
    pub mask: u32,
    pub value: u32,
    pub operands: &'static [Operand],
    pub flags: InsnFlags,
    /// Access size in bytes for loads and stores, else 0.
    pub size: u8,
}

include!(concat!(env!("OUT_DIR"), "/isa_table.rs"));
#[allow(unused_imports)]
pub(crate) use {for_each_insn, for_each_via, native_families};

impl Op {
    #[inline]
    pub fn info(self) -> &'static OpInfo {
        &INFO[self as usize]
    }
}

/// Decodes one instruction word. Anything not in the table is `Op::Illegal`.
#[inline]
pub fn decode(word: u32) -> Op {
    let (kind, idx) = DECODE_PRIMARY[(word >> 26) as usize];
    let list = if kind == 0 {
        DECODE_LISTS[idx as usize]
    } else {
        DECODE_LISTS[DECODE_SECONDARY[idx as usize][(word & 0x7ff) as usize] as usize]
    };
    for &op in list {
        let info = &INFO[op as usize];
        if word & info.mask == info.value {
            return op;
        }
    }
    Op::Illegal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_entry_decodes_to_itself() {
        for op in ALL_OPS.iter().skip(1) {
            let info = op.info();
            // The canonical encoding, and the same with every free bit set.
            assert_eq!(decode(info.value), *op, "{}", info.mnemonic);
            let all_free = info.value | !info.mask;
            let d = decode(all_free);
            // A more specific instruction may claim the all-ones pattern; it must still
            // be consistent with this op's fixed bits.
            assert!(
                d == *op || d.info().mask.count_ones() > info.mask.count_ones(),
                "{} -> {:?}",
                info.mnemonic,
                d
            );
        }
    }

    #[test]
    fn known_words() {
        assert_eq!(decode(0x7c642a14), Op::Add); // add r3,r4,r5
        assert_eq!(decode(0x7c642a15), Op::Add); // add. r3,r4,r5
        assert_eq!(decode(0x7c642e14), Op::Add); // addo r3,r4,r5
        assert_eq!(decode(0x38600001), Op::Addi); // li r3,1
        assert_eq!(decode(0x4e800020), Op::Bclr); // blr
        assert_eq!(decode(0x7c0004ac), Op::Sync); // sync
        assert_eq!(decode(0x7c2004ac), Op::Sync); // lwsync
        assert_eq!(decode(0x7c600026), Op::Mfcr);
        assert_eq!(decode(0x7c701026), Op::Mfocrf);
        assert_eq!(decode(0x7c64292d), Op::StwcxDot);
        assert_eq!(decode(0x7c64292c), Op::Illegal); // stwcx without the dot is reserved
        assert_eq!(decode(0x7c8300de), Op::Isel);
        assert_eq!(decode(0x00000000), Op::Illegal);
        assert_eq!(decode(0x07ffffff), Op::Illegal); // primary opcode 1 (prefixes, ISA 3.1)
    }

    #[test]
    fn isa_3_0_instructions_are_illegal_on_power8() {
        assert_eq!(decode(0x7c830434), Op::Illegal); // cnttzw r3,r4
        assert_eq!(decode(0x7c832a12), Op::Illegal); // modud r4,r3,r5
        assert_eq!(decode(0x7c6005e6), Op::Illegal); // darn r3,0
    }

    #[test]
    fn decode_never_panics() {
        let mut x = 0x12345678u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let op = decode(x);
            let _ = disassemble(x, 0x1000);
            if op != Op::Illegal {
                assert_eq!(x & op.info().mask, op.info().value);
            }
        }
    }
}
