//! The natively translated instructions, as data: for each op of the ISA table the
//! translator of its family (the table's `cl=` column, `isa/table/*.insn`), or none (the
//! block calls the interpreter's function for it).
//! A family translator may still decline an instance (an SPR number, an update form with
//! RA = 0, a facility the block key has off); then the interpreter runs that one too.

use super::Tx;
use crate::isa::{Insn, Op};

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

/// The translator of family `f` (the table's `cl=f` column: the method `Tx::f`).
macro_rules! families {
    ($($family:ident: [$($op:ident),* $(,)?]),* $(,)?) => {
        /// Each family's translator with the ops it handles.
        const FAMILIES: &[(Translate, &[Op])] = &[$((via!($family), &[$(Op::$op),*])),*];
    };
}
crate::isa::native_families!(cranelift, families);
crate::jit::table::op_table!(Translate);
