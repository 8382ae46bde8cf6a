//! The assembler blocks are written with: dynasm's `VecAssembler`, and a record of every
//! reference to a dynamic label, so that a block's out-of-line code can be placed away from
//! its hot code (the references between the two parts are resolved again where they land,
//! `Emitted::place`).

use dynasmrt::components::LabelRegistry;
use dynasmrt::relocations::{Relocation, RelocationKind};
use dynasmrt::x64::X64Relocation;
use dynasmrt::{
    AssemblyOffset, DynamicLabel, DynasmApi, DynasmError, DynasmLabelApi, VecAssembler,
};

/// A `rel32` field whose target lies in the other part of its block: at `field`, relative
/// to the end of its instruction at `next`, reaching `target` (offsets in the block's code).
#[derive(Clone, Copy, Debug)]
pub struct CrossRef {
    pub field: u32,
    pub next: u32,
    pub target: u32,
}

/// A reference to a dynamic label, as dynasm reports it (see `dynasmrt::PatchLoc`).
#[derive(Clone, Copy)]
struct LabelRef {
    /// The offset right after the instruction that refers.
    location: u32,
    /// Bytes back from `location` to the field and to the point it is relative to.
    field_back: u8,
    ref_back: u8,
    size: u8,
    relative: bool,
    target_offset: i32,
    label: DynamicLabel,
}

/// The group-1 ALU instructions with an immediate ([`Asm::alu_imm`]): the `/digit` of their
/// ModRM byte.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AluImm {
    Add = 0,
    Or = 1,
    And = 4,
    Sub = 5,
    Xor = 6,
    Cmp = 7,
}

pub struct Asm {
    inner: VecAssembler<X64Relocation>,
    refs: Vec<LabelRef>,
    /// A reference to a local or global label was made (none are: only dynamic ones are
    /// recorded, so a split block must have no other kind).
    static_refs: bool,
}

impl Asm {
    pub fn new() -> Self {
        Self::with_capacity(0, 0)
    }

    /// Room for `bytes` of code and `labels` dynamic labels and references.
    pub fn with_capacity(bytes: usize, labels: usize) -> Self {
        Self {
            inner: VecAssembler::new_with_capacity(0, bytes, 0, 0, labels, 0, labels),
            refs: Vec::with_capacity(labels),
            static_refs: false,
        }
    }

    pub fn new_dynamic_label(&mut self) -> DynamicLabel {
        self.inner.new_dynamic_label()
    }

    pub fn labels(&self) -> &LabelRegistry {
        self.inner.labels()
    }

    /// The code, every label resolved for the code in one piece.
    pub fn finalize(self) -> Result<Vec<u8>, DynasmError> {
        self.inner.finalize()
    }

    /// The code, and the references that cross `split` (the code before it placed in one
    /// place, the rest in another).
    pub fn finalize_split(self, split: u32) -> Result<(Vec<u8>, Vec<CrossRef>), DynasmError> {
        let mut cross = Vec::new();
        for r in &self.refs {
            let target =
                self.inner.labels().resolve_dynamic(r.label)?.0 as i64 + r.target_offset as i64;
            let field = r.location - r.field_back as u32;
            if (field < split) != (target < split as i64) {
                assert!(
                    r.size == 4 && r.relative && r.target_offset == 0,
                    "a reference across the split must be a rel32"
                );
                cross.push(CrossRef {
                    field,
                    next: r.location - r.ref_back as u32,
                    target: target as u32,
                });
            }
        }
        assert!(
            !self.static_refs || cross.is_empty(),
            "a block split in two refers to a static label"
        );
        Ok((self.inner.finalize()?, cross))
    }

    /// `op reg, v` (64-bit when `wide`), encoded here because dynasm gives every runtime
    /// immediate 32 bits and a dynamic 32-bit register a REX prefix: the sign-extended byte
    /// form is 3 bytes shorter, and the budget's `sub rbp, n` ends every exit. `cmp reg, 0` is
    /// `test reg, reg` (the same flags).
    pub fn alu_imm(&mut self, op: AluImm, reg: u8, wide: bool, v: i32) {
        let test = op == AluImm::Cmp && v == 0;
        // REX.B names the register; `test` names it twice (REX.R too).
        let rex = 0x40 | (wide as u8) << 3 | (test as u8 * (reg >> 3)) << 2 | reg >> 3;
        if rex != 0x40 {
            self.inner.push(rex);
        }
        let rm = reg & 7;
        match i8::try_from(v) {
            _ if test => self.inner.extend([0x85, 0xc0 | rm << 3 | rm]),
            Ok(b) => self
                .inner
                .extend([0x83, 0xc0 | (op as u8) << 3 | rm, b as u8]),
            Err(_) => {
                self.inner.extend([0x81, 0xc0 | (op as u8) << 3 | rm]);
                self.inner.extend(v.to_le_bytes());
            }
        }
    }

    /// `lea dst, [base + disp]` in its shortest form: a byte displacement where it fits
    /// (dynasm gives a runtime one 32 bits and a dynamic base a SIB byte), a `mov` without
    /// one, nothing for `lea r, [r]`.
    pub fn lea(&mut self, dst: u8, base: u8, disp: i32) {
        if disp == 0 && dst == base {
            return;
        }
        let rex = 0x48 | (dst >> 3) << 2 | base >> 3;
        let (reg, rm) = ((dst & 7) << 3, base & 7);
        if disp == 0 {
            self.inner.extend([rex, 0x8b, 0xc0 | reg | rm]);
            return;
        }
        let short = i8::try_from(disp).is_ok();
        self.inner
            .extend([rex, 0x8d, if short { 0x40 } else { 0x80 } | reg | rm]);
        if rm == 4 {
            // rsp and r12 as a base need a SIB byte (no index).
            self.inner.push(0x24);
        }
        match short {
            true => self.inner.push(disp as u8),
            false => self.inner.extend(disp.to_le_bytes()),
        }
    }
}

impl Extend<u8> for Asm {
    fn extend<T: IntoIterator<Item = u8>>(&mut self, iter: T) {
        self.inner.extend(iter)
    }
}

impl<'a> Extend<&'a u8> for Asm {
    fn extend<T: IntoIterator<Item = &'a u8>>(&mut self, iter: T) {
        self.inner.extend(iter)
    }
}

impl DynasmApi for Asm {
    fn offset(&self) -> AssemblyOffset {
        self.inner.offset()
    }
    fn push(&mut self, byte: u8) {
        self.inner.push(byte)
    }
    fn align(&mut self, alignment: usize, with: u8) {
        self.inner.align(alignment, with)
    }
}

impl DynasmLabelApi for Asm {
    type Relocation = X64Relocation;

    fn local_label(&mut self, name: &'static str) {
        self.inner.local_label(name)
    }
    fn global_label(&mut self, name: &'static str) {
        self.inner.global_label(name)
    }
    fn dynamic_label(&mut self, id: DynamicLabel) {
        self.inner.dynamic_label(id)
    }
    fn forward_relocation(
        &mut self,
        name: &'static str,
        target_offset: isize,
        field_offset: u8,
        ref_offset: u8,
        kind: X64Relocation,
    ) {
        self.static_refs = true;
        self.inner
            .forward_relocation(name, target_offset, field_offset, ref_offset, kind)
    }
    fn backward_relocation(
        &mut self,
        name: &'static str,
        target_offset: isize,
        field_offset: u8,
        ref_offset: u8,
        kind: X64Relocation,
    ) {
        self.static_refs = true;
        self.inner
            .backward_relocation(name, target_offset, field_offset, ref_offset, kind)
    }
    fn global_relocation(
        &mut self,
        name: &'static str,
        target_offset: isize,
        field_offset: u8,
        ref_offset: u8,
        kind: X64Relocation,
    ) {
        self.static_refs = true;
        self.inner
            .global_relocation(name, target_offset, field_offset, ref_offset, kind)
    }
    fn dynamic_relocation(
        &mut self,
        id: DynamicLabel,
        target_offset: isize,
        field_offset: u8,
        ref_offset: u8,
        kind: X64Relocation,
    ) {
        self.refs.push(LabelRef {
            location: self.inner.offset().0 as u32,
            field_back: field_offset,
            ref_back: ref_offset,
            size: kind.size() as u8,
            relative: matches!(kind.kind(), RelocationKind::Relative),
            target_offset: target_offset as i32,
            label: id,
        });
        self.inner
            .dynamic_relocation(id, target_offset, field_offset, ref_offset, kind)
    }
    fn value_relocation(
        &mut self,
        value: usize,
        field_offset: u8,
        ref_offset: u8,
        kind: X64Relocation,
    ) {
        self.inner
            .value_relocation(value, field_offset, ref_offset, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Emitted;
    use super::*;
    use dynasmrt::dynasm;

    /// A slow path out of line: the branch to it and the jump back each cross the split,
    /// and land right wherever the two parts are placed.
    #[test]
    fn references_across_the_split_are_resolved_where_the_parts_land() {
        let mut a = Asm::new();
        let (slow, back, local) = (
            a.new_dynamic_label(),
            a.new_dynamic_label(),
            a.new_dynamic_label(),
        );
        asm!(a ; jne =>slow ; =>back ; jmp =>local ; =>local ; ret ; int3);
        let split = a.offset().0 as u32;
        asm!(a ; =>slow ; mov eax, 1 ; jmp =>back);
        let (code, cross) = a.finalize_split(split).unwrap();
        // `jmp =>local` stays inside the hot part: not recorded.
        assert_eq!(cross.len(), 2);
        let e = Emitted {
            split,
            cross,
            native: 0,
            fallbacks: 0,
            sections: [0; 2],
            fixups: Vec::new(),
            fault_sites: Vec::new(),
            guard: None,
            entry: 0,
            code,
        };
        let (h, c) = e.parts();
        let (mut hot, mut cold) = (vec![0u8; h.len()], vec![0u8; c.len() + 4096]);
        // The out-of-line part far from the hot one, not at its end.
        let cold_at = cold.as_mut_ptr().wrapping_add(4000);
        // SAFETY: both buffers have room for their part; nothing runs them.
        unsafe { e.place(hot.as_mut_ptr(), cold_at) };
        let rel = |b: &[u8]| i32::from_le_bytes(b.try_into().unwrap()) as i64;
        let (hot_at, cold_at) = (hot.as_ptr() as i64, cold_at as i64);
        // jne rel32 (6 bytes) reaches the slow path's first byte.
        assert_eq!(&hot[..2], &[0x0f, 0x85]);
        assert_eq!(hot_at + 6 + rel(&hot[2..6]), cold_at);
        let cold_bytes = &cold[4000..4000 + c.len()];
        // mov eax, 1 (5 bytes), then jmp rel32 back to the instruction after the jne.
        assert_eq!(cold_bytes[5], 0xe9);
        assert_eq!(cold_at + 10 + rel(&cold_bytes[6..10]), hot_at + 6);
    }
    /// The byte form where the immediate fits one, no REX prefix a 32-bit low register does
    /// not need, `test` for a compare with 0 (REX.R and REX.B for a high register); `lea`
    /// with a byte displacement, a SIB byte only for rsp and r12, a `mov` for none.
    #[test]
    fn immediates_and_displacements_take_their_shortest_encodings() {
        use capstone::prelude::*;
        let mut a = Asm::new();
        a.alu_imm(AluImm::Sub, 5, true, 7);
        a.alu_imm(AluImm::Add, 13, true, 200);
        a.alu_imm(AluImm::Cmp, 15, false, 0x21);
        a.alu_imm(AluImm::Cmp, 9, true, 0);
        a.alu_imm(AluImm::Cmp, 6, false, 0);
        a.alu_imm(AluImm::And, 0, false, -4);
        a.alu_imm(AluImm::Xor, 7, true, -129);
        a.alu_imm(AluImm::Or, 10, false, 1 << 20);
        a.lea(1, 13, 7);
        a.lea(13, 15, -0x50);
        a.lea(13, 12, 0x1000);
        a.lea(13, 4, 8);
        a.lea(0, 13, 0);
        a.lea(5, 5, 0);
        let end = a.offset().0 as u32;
        let (code, _) = a.finalize_split(end).unwrap();
        let cs = Capstone::new()
            .x86()
            .mode(arch::x86::ArchMode::Mode64)
            .build()
            .unwrap();
        let insns = cs.disasm_all(&code, 0).unwrap();
        let got: Vec<(String, usize)> = insns
            .iter()
            .map(|i| {
                let text = format!("{} {}", i.mnemonic().unwrap(), i.op_str().unwrap());
                (text, i.len())
            })
            .collect();
        let want = [
            ("sub rbp, 7", 4),
            ("add r13, 0xc8", 7),
            ("cmp r15d, 0x21", 4),
            ("test r9, r9", 3),
            ("test esi, esi", 2),
            ("and eax, 0xfffffffc", 3),
            ("xor rdi, 0xffffffffffffff7f", 7),
            ("or r10d, 0x100000", 7),
            ("lea rcx, [r13 + 7]", 4),
            ("lea r13, [r15 - 0x50]", 4),
            ("lea r13, [r12 + 0x1000]", 8),
            ("lea r13, [rsp + 8]", 5),
            ("mov rax, r13", 3),
        ];
        let want: Vec<(String, usize)> = want.iter().map(|&(t, n)| (t.to_string(), n)).collect();
        assert_eq!(got, want);
    }
}
