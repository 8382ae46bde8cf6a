//! Guest GPRs kept in host registers within one baseline block.
//!
//! Each guest instruction used to load its sources from their homes in `CpuState` and store
//! its result there, so a value passed from one instruction to the next went through a
//! store and a load (store-to-load forwarding, about five cycles, on the critical path of
//! every loop). The cache keeps copies in host registers instead.
//!
//! Copies are **write-back** across the instructions that cannot leave the block from the
//! middle of their code and read every GPR through the cache (integer instructions and GPR
//! loads and stores: the emitter's `table::WRITE_BACK`): their results stay in the copy
//! only (*dirty*, not stored home). Before any other instruction the emitter stores the
//! dirty copies home (`Em::flush_dirty`), so that one sees current homes as before:
//! helpers, the interpreter, exits and branches (a side exit, which the block goes on
//! past, stores them on its taken way only). A dirty copy evicted for another GPR is stored
//! home first. A load's or store's out-of-line path, entered with the copies as they were
//! at the access, stores the dirty ones home before it calls a helper or leaves (a fault).
//!
//! Out-of-line code, which calls helpers (clobbering the caller-saved registers) or the
//! interpreter (which may write any GPR), reloads the copies of the point it returns to
//! from the homes ([`RegCache::held`]).
//!
//! Only registers the rest of the block names again are cached ([`later_gprs`]): a value
//! read once is cheaper read from its home.

use crate::isa::{InsnFlags, Operand, decode};

/// Host registers that hold copies, by encoding number: `r15` (callee-saved, saved by the
/// trampoline), then `rsi`, `rdi`, `r9`–`r11` and `r8` (caller-saved; the emitter's
/// scratch registers are `rax`, `rcx`, `rdx` and `r13`, and `rbp` holds the budget; `r8`
/// is also a helper's fifth argument, set only after the copies were stored home).
pub const HOST_REGS: [u8; 7] = [15, 6, 7, 9, 10, 11, 8];

/// Which guest GPR each host register of [`HOST_REGS`] holds, and when it was last used.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegCache {
    gpr: [Option<u8>; HOST_REGS.len()],
    used: [u32; HOST_REGS.len()],
    clock: u32,
    /// GPRs (bit `r`) whose copies hold values not yet stored home.
    dirty: u32,
    /// Slots (bit `s`) whose host registers hold something else for the whole block.
    reserved: u8,
}

impl RegCache {
    /// The host register holding GPR `r`, if one does (counts as a use).
    pub fn find(&mut self, r: u32) -> Option<u8> {
        let slot = self.gpr.iter().position(|&g| g == Some(r as u8))?;
        self.touch(slot);
        Some(HOST_REGS[slot])
    }

    /// A host register for GPR `r` (which the caller fills): a free one, else the least
    /// recently used; with the GPR whose dirty copy it held, which the caller stores home
    /// before filling it.
    pub fn take(&mut self, r: u32) -> (u8, Option<u32>) {
        debug_assert!(self.gpr.iter().all(|&g| g != Some(r as u8)));
        let open = |s: &usize| self.reserved & 1 << s == 0;
        let slot = match (0..HOST_REGS.len())
            .filter(open)
            .find(|&s| self.gpr[s].is_none())
        {
            Some(s) => s,
            None => (0..HOST_REGS.len())
                .filter(open)
                .min_by_key(|&s| self.used[s])
                .expect("host registers"),
        };
        let evicted = self.gpr[slot]
            .map(u32::from)
            .filter(|&g| self.dirty & 1 << g != 0);
        if let Some(g) = evicted {
            self.dirty &= !(1 << g);
        }
        self.gpr[slot] = Some(r as u8);
        self.touch(slot);
        (HOST_REGS[slot], evicted)
    }

    /// Takes host register `host` out of the cache for the rest of the block (it must hold no
    /// copy); returns how many registers are left for copies.
    pub fn reserve(&mut self, host: u8) -> usize {
        let slot = HOST_REGS
            .iter()
            .position(|&h| h == host)
            .expect("a copy register");
        debug_assert!(self.gpr[slot].is_none(), "a reserved register holds a copy");
        self.reserved |= 1 << slot;
        HOST_REGS.len() - self.reserved.count_ones() as usize
    }

    /// GPR `r`'s copy holds a value its home does not have yet.
    pub fn mark_dirty(&mut self, r: u32) {
        debug_assert!(
            self.gpr.contains(&Some(r as u8)),
            "a dirty GPR without a copy"
        );
        self.dirty |= 1 << r;
    }

    /// GPRs (bit `r`) whose copies are dirty.
    pub fn dirty(&self) -> u32 {
        self.dirty
    }

    /// `(host register, GPR)` of every dirty copy.
    pub fn dirty_held(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        self.held().filter(|&(_, r)| self.dirty & 1 << r != 0)
    }

    /// The dirty copies have been stored home.
    pub fn cleaned(&mut self) {
        self.dirty = 0;
    }

    /// The copies dirty in `before` are dirty again (after a way out of the block stored
    /// them: the way on still has them only in their copies). Nothing may have been taken
    /// or dropped since.
    pub fn redirty(&mut self, before: &RegCache) {
        debug_assert_eq!(self.gpr, before.gpr, "copies changed on a way out");
        self.dirty = before.dirty;
    }

    /// Forgets every copy (after the interpreter ran, which may have written any GPR).
    pub fn clear(&mut self) {
        debug_assert_eq!(self.dirty, 0, "a dirty copy dropped");
        self.gpr = [None; HOST_REGS.len()];
    }

    /// Forgets the copies in caller-saved registers (after an inline helper call, which
    /// writes no GPR but clobbers them); `r15`'s survives.
    pub fn clobber_caller_saved(&mut self) {
        debug_assert_eq!(self.dirty, 0, "a dirty copy dropped");
        for (g, h) in self.gpr.iter_mut().zip(HOST_REGS) {
            if h != 15 {
                *g = None;
            }
        }
    }

    /// `(host register, GPR)` of every copy: what out-of-line code returning here reloads.
    pub fn held(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        self.gpr
            .iter()
            .zip(HOST_REGS)
            .filter_map(|(g, h)| g.map(|g| (h, g as u32)))
    }

    fn touch(&mut self, slot: usize) {
        self.clock += 1;
        self.used[slot] = self.clock;
    }
}

/// The GPRs (bit `r`) the instruction `w` is expected to write, read off the ISA table's
/// operands: a first operand `rt` (`rs` is a source) or `ra` (the logical and rotate forms,
/// `ra,rs,...`; `ra0` is an address), and `ra` of the update forms. A forecast for
/// [`super::emit`]'s loop blocks, not a rule: a GPR written otherwise costs a store there.
pub fn written_gprs(w: u32) -> u32 {
    let (info, i) = (decode(w).info(), crate::isa::Insn(w));
    let first = match info.operands.first() {
        Some(Operand::Rt) => 1 << i.rt(),
        Some(Operand::Ra) => 1 << i.ra(),
        _ => 0,
    };
    let update = if info.flags.contains(InsnFlags::UPDATE) {
        1 << i.ra()
    } else {
        0
    };
    first | update
}

/// The GPRs (bit `r`) the instruction `w` names, as register operands of the ISA table.
pub fn named_gprs(w: u32) -> u32 {
    let i = crate::isa::Insn(w);
    decode(w).info().operands.iter().fold(0, |acc, op| {
        acc | match op {
            Operand::Rt | Operand::Rs => 1 << i.rt(),
            Operand::Ra | Operand::Ra0 | Operand::DRa | Operand::DsRa | Operand::DqRa => {
                1 << i.ra()
            }
            Operand::Rb => 1 << i.rb(),
            _ => 0,
        }
    })
}

/// Per instruction of a block: the GPRs (bit `r`) named by the instructions after it
/// ([`named_gprs`]). A GPR outside the mask is not worth a copy.
pub fn later_gprs(words: &[u32]) -> Vec<u32> {
    let mut later = vec![0u32; words.len()];
    let mut acc = 0u32;
    for (k, &w) in words.iter().enumerate().rev() {
        later[k] = acc;
        acc |= named_gprs(w);
    }
    later
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_copy() {
        let mut c = RegCache::default();
        let hosts: Vec<u8> = (0..HOST_REGS.len() as u32).map(|r| c.take(r).0).collect();
        assert_eq!(hosts, HOST_REGS);
        // GPR 0 used again: GPR 1 is now the oldest.
        assert_eq!(c.find(0), Some(HOST_REGS[0]));
        assert_eq!(c.take(20), (HOST_REGS[1], None));
        assert_eq!(c.find(1), None);
        assert_eq!(c.find(20), Some(HOST_REGS[1]));
        assert_eq!(c.held().count(), HOST_REGS.len());
        // A call keeps only the callee-saved copy.
        c.clobber_caller_saved();
        assert_eq!(c.held().collect::<Vec<_>>(), [(15, 0)]);
        c.clear();
        assert_eq!((c.held().count(), c.find(0)), (0, None));
    }

    #[test]
    fn an_evicted_dirty_copy_is_named_for_its_store_home() {
        let mut c = RegCache::default();
        for r in 0..HOST_REGS.len() as u32 {
            c.take(r);
        }
        c.mark_dirty(0);
        c.mark_dirty(2);
        assert_eq!(
            c.dirty_held().collect::<Vec<_>>(),
            [(HOST_REGS[0], 0), (HOST_REGS[2], 2)]
        );
        // GPR 0 is the oldest: its register goes to GPR 20, and GPR 0 is to be stored.
        assert_eq!(c.take(20), (HOST_REGS[0], Some(0)));
        assert_eq!(c.dirty(), 1 << 2);
        // A clean copy evicted needs nothing.
        assert_eq!(c.take(21), (HOST_REGS[1], None));
        c.cleaned();
        assert_eq!(c.dirty_held().count(), 0);
    }

    #[test]
    fn a_reserved_register_is_never_taken() {
        let mut c = RegCache::default();
        assert_eq!(c.reserve(15), HOST_REGS.len() - 1);
        let hosts: Vec<u8> = (0..HOST_REGS.len() as u32 + 3)
            .map(|r| c.take(r).0)
            .collect();
        assert!(!hosts.contains(&15), "{hosts:?}");
        c.clear();
        assert_ne!(c.take(40).0, 15);
    }

    #[test]
    fn written_registers_are_the_destinations() {
        // addi r3,r4,1; stw r5,8(r6); or r7,r8,r9; lwzu r10,4(r11); stdu r1,-32(r1);
        // cmpw r3,r4; dcbz 0,r5
        let cases = [
            (0x3864_0001, 1 << 3),
            (0x90a6_0008, 0),
            (0x7d07_4b78, 1 << 7),
            (0x854b_0004, 1 << 10 | 1 << 11),
            (0xf821_ffe1, 1 << 1),
            (0x7c03_2000, 0),
            (0x7c00_2fec, 0),
        ];
        for (w, want) in cases {
            assert_eq!(written_gprs(w), want, "{w:#010x}");
        }
    }

    #[test]
    fn later_names_the_registers_of_the_following_instructions() {
        // addi r3,r4,1; lwz r5,8(r6); add r7,r3,r5
        let words = [0x3864_0001, 0x80a6_0008, 0x7ce3_2a14];
        let later = later_gprs(&words);
        assert_eq!(later[2], 0);
        assert_eq!(later[1], 1 << 7 | 1 << 3 | 1 << 5);
        assert_eq!(later[0], later[1] | 1 << 5 | 1 << 6);
    }
}
