//! Per-op translator tables, as data: each translating tier lists its instruction families
//! (a translator and the ops it handles) and gets from here the table indexed by op that its
//! translator dispatches through, the set it translates natively, and the check that no op
//! is in two families.

use crate::isa::{ALL_OPS, OP_COUNT, Op};

/// The translator of each op in `families`, indexed by `op as usize`; `None`: the
/// interpreter runs it.
pub(crate) const fn by_op<T: Copy>(families: &[(T, &[Op])]) -> [Option<T>; OP_COUNT] {
    let mut t: [Option<T>; OP_COUNT] = [None; OP_COUNT];
    let mut f = 0;
    while f < families.len() {
        let (translate, ops) = families[f];
        let mut k = 0;
        while k < ops.len() {
            t[ops[k] as usize] = Some(translate);
            k += 1;
        }
        f += 1;
    }
    t
}

/// The ops `table` translates natively (for reports and tests).
pub(crate) fn native<T: 'static>(
    table: &'static [Option<T>; OP_COUNT],
) -> impl Iterator<Item = Op> {
    ALL_OPS
        .iter()
        .copied()
        .filter(move |op| table[*op as usize].is_some())
}

/// Panics unless every op of `families` is in one family only, `Illegal` in none, and
/// `table` is theirs.
#[cfg(test)]
pub(crate) fn check<T: 'static>(families: &[(T, &[Op])], table: &'static [Option<T>; OP_COUNT]) {
    let mut seen = [false; OP_COUNT];
    for (_, ops) in families {
        for op in *ops {
            assert!(!seen[*op as usize], "{op:?} in two families");
            seen[*op as usize] = true;
        }
    }
    assert!(!seen[Op::Illegal as usize], "Illegal has a translator");
    assert_eq!(native(table).count(), seen.iter().filter(|s| **s).count());
}

/// The rest of a tier's table module from its `FAMILIES` (each family's translator of type
/// `$translate` with its ops): `TRANSLATORS`, the translator of each op indexed by
/// `op as usize` (`None`: the interpreter runs it); `native_ops`, the ops translated natively
/// at least in some instances (for reports and tests); and the test of the two.
macro_rules! op_table {
    ($translate:ty) => {
        /// Translator of each op, indexed by `op as usize`; `None`: the interpreter runs it.
        pub(super) static TRANSLATORS: [Option<$translate>; crate::isa::OP_COUNT] =
            crate::jit::table::by_op(FAMILIES);

        /// The ops translated natively, at least in some instances (for reports and tests).
        pub fn native_ops() -> impl Iterator<Item = crate::isa::Op> {
            crate::jit::table::native(&TRANSLATORS)
        }

        #[cfg(test)]
        mod tests {
            #[test]
            fn every_op_has_at_most_one_family() {
                crate::jit::table::check(super::FAMILIES, &super::TRANSLATORS);
            }
        }
    };
}
pub(crate) use op_table;
