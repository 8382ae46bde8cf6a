//! The natively translated instructions, as data: for each op of the ISA table the
//! translator of its family, or none (the block calls the interpreter's function for it).
//! A family translator may still decline an instance (an SPR number, an update form with
//! RA = 0, a facility the block key has off); then the interpreter runs that one too.

use super::Tx;
use crate::isa::{Insn, OP_COUNT, Op};

/// Translates one instruction (the last of its block when `last`); false: not natively.
pub(super) type Translate = fn(&mut Tx<'_>, Op, Insn, bool) -> bool;

/// The translator that calls the family method `Tx::$m`.
macro_rules! via {
    ($m:ident) => {{
        fn f(t: &mut Tx<'_>, op: Op, i: Insn, last: bool) -> bool {
            t.$m(op, i, last)
        }
        f as Translate
    }};
}

/// Each family's translator with the ops it handles.
const FAMILIES: &[(Translate, &[Op])] = &[
    // fixed.rs: integer arithmetic, logical, shift, rotate, compare
    (
        via!(fixed),
        &[
            Op::Addi,
            Op::Addis,
            Op::Add,
            Op::Subf,
            Op::Neg,
            Op::Addic,
            Op::AddicDot,
            Op::Subfic,
            Op::Addc,
            Op::Adde,
            Op::Addze,
            Op::Addme,
            Op::Subfc,
            Op::Subfe,
            Op::Subfze,
            Op::Subfme,
            Op::Mulli,
            Op::Mulld,
            Op::Mullw,
            Op::Mulhd,
            Op::Mulhdu,
            Op::And,
            Op::Or,
            Op::Xor,
            Op::Nand,
            Op::Nor,
            Op::Andc,
            Op::Orc,
            Op::Eqv,
            Op::Ori,
            Op::Oris,
            Op::Xori,
            Op::Xoris,
            Op::AndiDot,
            Op::AndisDot,
            Op::Extsb,
            Op::Extsh,
            Op::Extsw,
            Op::Cntlzw,
            Op::Cntlzd,
            Op::Slw,
            Op::Srw,
            Op::Sld,
            Op::Srd,
            Op::Sraw,
            Op::Srawi,
            Op::Srad,
            Op::Sradi,
            Op::Rlwinm,
            Op::Rlwnm,
            Op::Rlwimi,
            Op::Rldicl,
            Op::Rldicr,
            Op::Rldic,
            Op::Rldimi,
            Op::Rldcl,
            Op::Rldcr,
            Op::Cmp,
            Op::Cmpi,
            Op::Cmpl,
            Op::Cmpli,
            Op::Isel,
            Op::Divw,
            Op::Divwu,
            Op::Divd,
            Op::Divdu,
            Op::Mulhw,
            Op::Mulhwu,
            Op::Popcntb,
            Op::Popcntw,
            Op::Popcntd,
            Op::Prtyw,
            Op::Prtyd,
            Op::Cmpb,
        ],
    ),
    // branch.rs: branches and the condition register
    (
        via!(branch),
        &[
            Op::Crand,
            Op::Cror,
            Op::Crxor,
            Op::Crnand,
            Op::Crnor,
            Op::Creqv,
            Op::Crandc,
            Op::Crorc,
            Op::Mcrf,
            Op::Mfcr,
            Op::Mtcrf,
            Op::B,
            Op::Bc,
            Op::Bclr,
            Op::Bcctr,
            Op::Mfocrf,
            Op::Mtocrf,
        ],
    ),
    // loadstore.rs: loads, stores, cache block operations
    (
        via!(load_store),
        &[
            Op::Lbz,
            Op::Lbzu,
            Op::Lbzx,
            Op::Lbzux,
            Op::Lhz,
            Op::Lhzu,
            Op::Lhzx,
            Op::Lhzux,
            Op::Lha,
            Op::Lhau,
            Op::Lhax,
            Op::Lhaux,
            Op::Lwz,
            Op::Lwzu,
            Op::Lwzx,
            Op::Lwzux,
            Op::Lwa,
            Op::Lwax,
            Op::Lwaux,
            Op::Ld,
            Op::Ldu,
            Op::Ldx,
            Op::Ldux,
            Op::Stb,
            Op::Stbu,
            Op::Stbx,
            Op::Stbux,
            Op::Sth,
            Op::Sthu,
            Op::Sthx,
            Op::Sthux,
            Op::Stw,
            Op::Stwu,
            Op::Stwx,
            Op::Stwux,
            Op::Std,
            Op::Stdu,
            Op::Stdx,
            Op::Stdux,
            Op::Dcbz,
            Op::Dcbt,
            Op::Dcbtst,
            Op::Lhbrx,
            Op::Lwbrx,
            Op::Ldbrx,
            Op::Sthbrx,
            Op::Stwbrx,
            Op::Stdbrx,
        ],
    ),
    // system.rs: SPR moves and system instructions
    (
        via!(system),
        &[
            Op::Mfspr,
            Op::Mtspr,
            Op::Mftb,
            Op::Sync,
            Op::Eieio,
            Op::Isync,
            Op::Tw,
            Op::Twi,
            Op::Td,
            Op::Tdi,
            Op::Lbarx,
            Op::Lharx,
            Op::Lwarx,
            Op::Ldarx,
            Op::StbcxDot,
            Op::SthcxDot,
            Op::StwcxDot,
            Op::StdcxDot,
            Op::Dcbst,
            Op::Dcbf,
        ],
    ),
    // vector.rs: VMX, VSX and FP register moves, loads and stores
    (
        via!(vector),
        &[
            Op::Vaddubm,
            Op::Vadduhm,
            Op::Vadduwm,
            Op::Vaddudm,
            Op::Vsububm,
            Op::Vsubuhm,
            Op::Vsubuwm,
            Op::Vsubudm,
            Op::Vand,
            Op::Vandc,
            Op::Vor,
            Op::Vorc,
            Op::Vxor,
            Op::Vnor,
            Op::Vnand,
            Op::Veqv,
            Op::Xxland,
            Op::Xxlandc,
            Op::Xxlor,
            Op::Xxlxor,
            Op::Xxlnor,
            Op::Xxleqv,
            Op::Xxlnand,
            Op::Xxlorc,
            Op::Vsel,
            Op::Xxsel,
            Op::Vcmpequb,
            Op::Vcmpequh,
            Op::Vcmpequw,
            Op::Vcmpequd,
            Op::Vcmpgtub,
            Op::Vcmpgtuh,
            Op::Vcmpgtuw,
            Op::Vcmpgtud,
            Op::Vcmpgtsb,
            Op::Vcmpgtsh,
            Op::Vcmpgtsw,
            Op::Vcmpgtsd,
            Op::Vslb,
            Op::Vslh,
            Op::Vslw,
            Op::Vsld,
            Op::Vsrb,
            Op::Vsrh,
            Op::Vsrw,
            Op::Vsrd,
            Op::Vsrab,
            Op::Vsrah,
            Op::Vsraw,
            Op::Vsrad,
            Op::Vpkuhum,
            Op::Vpkuwum,
            Op::Vpkudum,
            Op::Vmrghb,
            Op::Vmrghh,
            Op::Vmrghw,
            Op::Vmrglb,
            Op::Vmrglh,
            Op::Vmrglw,
            Op::Vmrgew,
            Op::Vmrgow,
            Op::Vsldoi,
            Op::Xxpermdi,
            Op::Xxsldwi,
            Op::Xxmrghw,
            Op::Xxmrglw,
            Op::Vspltb,
            Op::Vsplth,
            Op::Vspltw,
            Op::Xxspltw,
            Op::Vspltisb,
            Op::Vspltish,
            Op::Vspltisw,
            Op::Vperm,
            Op::Lvsl,
            Op::Lvsr,
            Op::Mfvsrd,
            Op::Mfvsrwz,
            Op::Mtvsrd,
            Op::Mtvsrwa,
            Op::Mtvsrwz,
            Op::Lvx,
            Op::Lvxl,
            Op::Lxvd2x,
            Op::Lxvw4x,
            Op::Stvx,
            Op::Stvxl,
            Op::Stxvd2x,
            Op::Stxvw4x,
            Op::Lxvdsx,
            Op::Lxsdx,
            Op::Lxsiwax,
            Op::Lxsiwzx,
            Op::Lxsspx,
            Op::Stxsdx,
            Op::Stxsiwx,
            Op::Stxsspx,
            Op::Lfs,
            Op::Lfsu,
            Op::Lfsx,
            Op::Lfsux,
            Op::Lfd,
            Op::Lfdu,
            Op::Lfdx,
            Op::Lfdux,
            Op::Lfiwax,
            Op::Lfiwzx,
            Op::Stfs,
            Op::Stfsu,
            Op::Stfsx,
            Op::Stfsux,
            Op::Stfd,
            Op::Stfdu,
            Op::Stfdx,
            Op::Stfdux,
            Op::Stfiwx,
            Op::Fmr,
            Op::Fneg,
            Op::Fabs,
            Op::Fnabs,
            Op::Fcpsgn,
            Op::Fmrgew,
            Op::Fmrgow,
        ],
    ),
];

/// Translator of each op, indexed by `op as usize`; `None`: the interpreter runs it.
pub(super) static TRANSLATORS: [Option<Translate>; OP_COUNT] = {
    let mut t: [Option<Translate>; OP_COUNT] = [None; OP_COUNT];
    let mut f = 0;
    while f < FAMILIES.len() {
        let (translate, ops) = FAMILIES[f];
        let mut k = 0;
        while k < ops.len() {
            t[ops[k] as usize] = Some(translate);
            k += 1;
        }
        f += 1;
    }
    t
};

/// The ops with a native translator (for reports and tests).
pub fn native_ops() -> impl Iterator<Item = Op> {
    crate::isa::ALL_OPS
        .iter()
        .copied()
        .filter(|op| TRANSLATORS[*op as usize].is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_at_most_one_family() {
        let mut seen = [false; OP_COUNT];
        for (_, ops) in FAMILIES {
            for op in *ops {
                assert!(!seen[*op as usize], "{op:?} in two families");
                seen[*op as usize] = true;
            }
        }
        assert!(TRANSLATORS[Op::Illegal as usize].is_none());
        assert_eq!(native_ops().count(), seen.iter().filter(|s| **s).count());
    }
}
