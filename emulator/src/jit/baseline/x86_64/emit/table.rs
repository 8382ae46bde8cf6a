//! The natively translated instructions of the baseline tier, as data: for each op of the
//! ISA table the translator of its family (the table's `bl=` column, `isa/table/*.insn`),
//! or none (the block calls the interpreter for it).
//! A family translator may still decline an instance (an OE form, an update form with
//! RA = 0, a facility the block key has off, a host without the SSE extension it needs);
//! then the interpreter runs that one too.

use super::Em;
use super::memory::gpr_access;
use crate::isa::{Insn, OP_COUNT, Op};

/// Translates one instruction (`ended`: set when it left the block); false: not natively.
pub(super) type Translate = fn(&mut Em, Op, Insn, &mut bool) -> bool;

/// The translator of family `f` (the table's `bl=f` column: the method `Em::f`).
macro_rules! families {
    ($($family:ident: [$($op:ident),* $(,)?]),* $(,)?) => {
        /// Each family's translator with the ops it handles.
        const FAMILIES: &[(Translate, &[Op])] = &[$((Em::$family, &[$(Op::$op),*])),*];

        /// Per op, whether its translation may find copies dirty and leave its results
        /// dirty (`regcache`): it reads every GPR through the cache and leaves the block
        /// only through out-of-line code that stores dirty copies home first. The integer
        /// family (no helper, no exit) and the GPR loads and stores.
        pub(super) static WRITE_BACK: [bool; OP_COUNT] =
            write_back(&[$((keeps_dirty!($family), &[$(Op::$op),*])),*]);
    };
}

/// Whether a whole family keeps dirty copies (see `WRITE_BACK`).
macro_rules! keeps_dirty {
    (fixed) => {
        true
    };
    ($family:ident) => {
        false
    };
}

const fn write_back(families: &[(bool, &[Op])]) -> [bool; OP_COUNT] {
    let mut table = [false; OP_COUNT];
    let mut f = 0;
    while f < families.len() {
        let (whole, ops) = families[f];
        let mut k = 0;
        while k < ops.len() {
            table[ops[k] as usize] = whole || gpr_access(ops[k]);
            k += 1;
        }
        f += 1;
    }
    table
}
crate::isa::native_families!(baseline, families);
crate::jit::table::op_table!(Translate);
