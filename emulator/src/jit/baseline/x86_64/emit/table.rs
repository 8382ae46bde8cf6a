//! The natively translated instructions of the baseline tier, as data: for each op of the
//! ISA table the translator of its family (the table's `bl=` column, `isa/table/*.insn`),
//! or none (the block calls the interpreter for it).
//! A family translator may still decline an instance (an OE form, an update form with
//! RA = 0, a facility the block key has off, a host without the SSE extension it needs);
//! then the interpreter runs that one too.

use super::Em;
use crate::isa::{Insn, Op};

/// Translates one instruction (`ended`: set when it left the block); false: not natively.
pub(super) type Translate = fn(&mut Em, Op, Insn, &mut bool) -> bool;

/// The translator of family `f` (the table's `bl=f` column: the method `Em::f`).
macro_rules! families {
    ($($family:ident: [$($op:ident),* $(,)?]),* $(,)?) => {
        /// Each family's translator with the ops it handles.
        const FAMILIES: &[(Translate, &[Op])] = &[$((Em::$family, &[$(Op::$op),*])),*];
    };
}
crate::isa::native_families!(baseline, families);
crate::jit::table::op_table!(Translate);
