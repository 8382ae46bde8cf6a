//! The natively translated instructions of the baseline tier, as data: for each op of the
//! ISA table the translator of its family, or none (the block calls the interpreter for it).
//! A family translator may still decline an instance (an OE form, an update form with
//! RA = 0, a facility the block key has off, a host without the SSE extension it needs);
//! then the interpreter runs that one too.

use super::Em;
use crate::isa::{Insn, OP_COUNT, Op};

/// Translates one instruction (`ended`: set when it left the block); false: not natively.
pub(super) type Translate = fn(&mut Em, Op, Insn, &mut bool) -> bool;

/// Each family's translator with the ops it handles.
const FAMILIES: &[(Translate, &[Op])] = &[
    // fixed.rs: integer arithmetic, logical, shift, rotate, compare
    (
        Em::fixed,
        &[
            Op::Addi,
            Op::Addis,
            Op::Add,
            Op::Subf,
            Op::And,
            Op::Or,
            Op::Xor,
            Op::Ori,
            Op::Xori,
            Op::AndiDot,
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
            Op::Mulhw,
            Op::Mulhwu,
            Op::Nand,
            Op::Nor,
            Op::Andc,
            Op::Orc,
            Op::Eqv,
            Op::Oris,
            Op::Xoris,
            Op::AndisDot,
            Op::Extsb,
            Op::Extsh,
            Op::Extsw,
            Op::Cntlzw,
            Op::Cntlzd,
            Op::Sld,
            Op::Srd,
            Op::Slw,
            Op::Srw,
            Op::Divw,
            Op::Divwu,
            Op::Divd,
            Op::Divdu,
            Op::Srawi,
            Op::Sradi,
            Op::Sraw,
            Op::Srad,
            Op::Rlwinm,
            Op::Rldicl,
            Op::Rldicr,
            Op::Rldic,
            Op::Rlwnm,
            Op::Rlwimi,
            Op::Rldimi,
            Op::Rldcl,
            Op::Rldcr,
            Op::Cmp,
            Op::Cmpl,
            Op::Cmpi,
            Op::Cmpli,
            Op::Isel,
            Op::Cmpb,
            Op::Popcntd,
            Op::Popcntw,
        ],
    ),
    // branch.rs: branches and the condition register
    (
        Em::branch,
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
            Op::Mtocrf,
            Op::Mfocrf,
            Op::B,
            Op::Bc,
            Op::Bclr,
            Op::Bcctr,
        ],
    ),
    // memory.rs: loads, stores, reservations, cache blocks
    (
        Em::memory,
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
            Op::Lhbrx,
            Op::Lwbrx,
            Op::Ldbrx,
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
            Op::Sthbrx,
            Op::Stwbrx,
            Op::Stdbrx,
            Op::Lfd,
            Op::Lfdu,
            Op::Lfdx,
            Op::Lfdux,
            Op::Stfd,
            Op::Stfdu,
            Op::Stfdx,
            Op::Stfdux,
            Op::Lxsdx,
            Op::Stxsdx,
            Op::Lvx,
            Op::Stvx,
            Op::Lxvd2x,
            Op::Stxvd2x,
            Op::Dcbz,
            Op::Dcbst,
            Op::Dcbf,
            Op::Dcbt,
            Op::Dcbtst,
            Op::Lbarx,
            Op::Lharx,
            Op::Lwarx,
            Op::Ldarx,
            Op::StbcxDot,
            Op::SthcxDot,
            Op::StwcxDot,
            Op::StdcxDot,
        ],
    ),
    // system.rs: SPR moves, barriers, traps
    (
        Em::system,
        &[
            Op::Mfspr,
            Op::Mtspr,
            Op::Sync,
            Op::Eieio,
            Op::Isync,
            Op::Tdi,
            Op::Twi,
        ],
    ),
    // vector.rs: VMX, VSX and FP register moves
    (
        Em::vector,
        &[
            Op::Vaddubm,
            Op::Vadduhm,
            Op::Vadduwm,
            Op::Vaddudm,
            Op::Vsububm,
            Op::Vsubuhm,
            Op::Vsubuwm,
            Op::Vsubudm,
            Op::Vminub,
            Op::Vmaxub,
            Op::Vcmpequb,
            Op::Vcmpequh,
            Op::Vcmpequw,
            Op::Vcmpgtsb,
            Op::Vcmpgtsh,
            Op::Vcmpgtsw,
            Op::Vpkuhum,
            Op::Vpkuwum,
            Op::Vpkudum,
            Op::Vslb,
            Op::Vspltisb,
            Op::Vspltish,
            Op::Vspltisw,
            Op::Vand,
            Op::Vandc,
            Op::Vor,
            Op::Vxor,
            Op::Vnor,
            Op::Vsldoi,
            Op::Vperm,
            Op::Lvsl,
            Op::Lvsr,
            Op::Xxland,
            Op::Xxlandc,
            Op::Xxlor,
            Op::Xxlorc,
            Op::Xxlxor,
            Op::Xxlnor,
            Op::Xxpermdi,
            Op::Mfvsrd,
            Op::Mtvsrd,
            Op::Mfvsrwz,
            Op::Mtvsrwz,
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

/// The ops the baseline tier translates natively, at least in some instances (for reports
/// and tests).
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
