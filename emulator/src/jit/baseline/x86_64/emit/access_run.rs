//! Runs of loads and stores off one base register (a function's register saves and
//! restores, a structure's fields read one after another): one TLB test for all the bytes
//! they span instead of one per access.
//!
//! A plain access's fast path is about ten host instructions, most of them the TLB test;
//! an access of a run after the first is one. Between the accesses a run may hold simple
//! integer instructions ([`between`]: no CR, CA or OV, never the base register), which
//! cannot fail. When the span misses (not cached, a page crossed, a watched or device
//! page, a store to a page without a write entry), the run's cold path translates its
//! instructions one by one as usual, so every fault, device access and store into
//! translated code happens at the instruction it belongs to. The fast path does nothing
//! before its one test, so the cold path starts from the run's first instruction.
//!
//! Host-guarded memory (user mode) has no runs: an access's own test is one instruction
//! there, and a run, which writes its results through to the homes and starts with the
//! dirty copies stored, cost more than it saved (sha256sum ran 0.92 of the time without
//! runs, gzip and bzip2 0.98–0.99, md5sum 1.005).

use super::memory::Fit;
use super::*;

/// The widest span a run covers: wider ones cross a page more often than they save.
const SPAN_MAX: i64 = 512;

/// One instruction of a run.
#[derive(Clone, Copy)]
enum Step {
    Access {
        op: Op,
        i: Insn,
        disp: i64,
        size: u32,
        store: bool,
    },
    /// An integer instruction between two accesses.
    Between(Op, Insn),
}

/// A plain D- or DS-form load or store without update (`Some(true)`: a store).
pub(super) fn plain(op: Op) -> Option<bool> {
    use Op::*;
    match op {
        Lbz | Lhz | Lha | Lwz | Lwa | Ld => Some(false),
        Stb | Sth | Stw | Std => Some(true),
        _ => None,
    }
}

/// The GPR an integer instruction a run may hold writes (RT, or RA for the forms that name
/// RS), or none when it may not stand in a run: one that records CR0, OV or CA, or whose
/// translation could leave the block.
fn between(op: Op, i: Insn) -> Option<u32> {
    use Op::*;
    match op {
        Addi | Addis | Mulli => Some(i.rt()),
        Add | Subf | Neg | Mulld | Mullw if !i.oe() && !i.rc() => Some(i.rt()),
        Ori | Oris | Xori | Xoris => Some(i.ra()),
        Or | Xor | And | Andc | Nor | Extsb | Extsh | Extsw | Rlwinm | Rldicl | Rldicr | Rldic
            if !i.rc() =>
        {
            Some(i.ra())
        }
        _ => None,
    }
}

fn step(w: u32) -> Option<Step> {
    let op = decode(w);
    let i = Insn(w);
    let Some(store) = plain(op) else {
        return between(op, i).map(|_| Step::Between(op, i));
    };
    let disp = if op.info().operands.contains(&Operand::DsRa) {
        i.ds()
    } else {
        i.si()
    };
    let size = op.info().size as u32;
    Some(Step::Access {
        op,
        i,
        disp,
        size,
        store,
    })
}

/// How many of `words`' leading instructions form a run: accesses off one base register
/// (not r0; a load into it ends the run) within [`SPAN_MAX`] bytes, and between them the
/// integer instructions [`between`] allows that leave the base alone. The run starts and
/// ends with an access; fewer than two accesses: no run (0).
pub(super) fn run_len(words: &[u32]) -> usize {
    let Some(Step::Access { i, .. }) = words.first().and_then(|&w| step(w)) else {
        return 0;
    };
    let ra = i.ra();
    if ra == 0 {
        return 0;
    }
    let (mut lo, mut end) = (i64::MAX, i64::MIN);
    let (mut accesses, mut len) = (0, 0);
    for (k, &w) in words.iter().enumerate() {
        match step(w) {
            Some(Step::Access {
                i,
                disp,
                size,
                store,
                ..
            }) if i.ra() == ra => {
                let (l, e) = (lo.min(disp), end.max(disp + size as i64));
                if e - l > SPAN_MAX {
                    break;
                }
                (lo, end, accesses, len) = (l, e, accesses + 1, k + 1);
                if !store && i.rt() == ra {
                    // The base changes here: later accesses would use the new value.
                    break;
                }
            }
            Some(Step::Between(op, i)) if between(op, i) != Some(ra) => {}
            _ => break,
        }
    }
    if accesses >= 2 { len } else { 0 }
}

impl Em {
    /// Translates the run `words` (its length from [`run_len`]) starting at instruction
    /// `self.k`, `self.pc`.
    pub(super) fn access_run(&mut self, words: &[u32]) {
        let (k0, pc0) = (self.k, self.pc);
        let steps: Vec<Step> = words.iter().map(|&w| step(w).expect("run")).collect();
        let (mut lo, mut end, mut loads, mut stores, mut base) =
            (i64::MAX, i64::MIN, false, false, 0);
        for s in &steps {
            if let Step::Access {
                i,
                disp,
                size,
                store,
                ..
            } = *s
            {
                (lo, end, base) = (lo.min(disp), end.max(disp + size as i64), i.ra());
                (loads, stores) = (loads || !store, stores || store);
            }
        }
        let (miss, back) = (self.label(), self.label());
        let span = (end - lo) as u32;
        self.base_plus(base, lo);
        debug_assert!(!self.guarded, "no access runs in host-guarded memory");
        // Data accesses share one MMU index: a store's write tag is in the same entry as a
        // load's read tag, with the same addend.
        debug_assert_eq!(self.idx_read, self.idx_write);
        let tags = match (loads, stores) {
            (true, true) => &[offset_of!(TlbEntry, read), offset_of!(TlbEntry, write)][..],
            (true, false) => &[offset_of!(TlbEntry, read)],
            _ => &[offset_of!(TlbEntry, write)],
        };
        self.tlb_test(self.idx_read, tags, span, Fit::InPage, miss);
        // `r13` = the host address of the base plus `lo`: the instructions between the
        // accesses may use `rcx`.
        asm!(self.ops ; add r13, rcx);
        for (j, s) in steps.iter().enumerate() {
            (self.k, self.pc) = (k0 + j as u32, pc0.wrapping_add(4 * j as u64));
            match *s {
                Step::Between(op, i) => {
                    let translated = self.native(op, i, &mut false);
                    debug_assert!(translated, "{op:?} between accesses is native");
                }
                Step::Access {
                    op,
                    i,
                    disp,
                    size,
                    store,
                } => self.run_access(op, i, (disp - lo) as i32, size, store),
            }
        }
        asm!(self.ops ; =>back);
        self.push_slow(Cold::AccessRun {
            at: miss,
            back,
            held: self.cache,
            k: k0,
            pc: pc0,
            words: words.to_vec(),
        });
    }

    /// One access of a run's fast path, at host address `r13 + off`.
    fn run_access(&mut self, op: Op, i: Insn, off: i32, size: u32, store: bool) {
        if store {
            self.store_src(RAX, StoreSrc::Gpr(i.rt()));
            self.swap_if_big_endian(size, self.le);
            match size {
                1 => asm!(self.ops ; mov BYTE [r13 + off], al),
                2 => asm!(self.ops ; mov WORD [r13 + off], ax),
                4 => asm!(self.ops ; mov DWORD [r13 + off], eax),
                _ => asm!(self.ops ; mov QWORD [r13 + off], rax),
            }
            return;
        }
        match size {
            1 => asm!(self.ops ; movzx eax, BYTE [r13 + off]),
            2 => asm!(self.ops ; movzx eax, WORD [r13 + off]),
            4 => asm!(self.ops ; mov eax, DWORD [r13 + off]),
            _ => asm!(self.ops ; mov rax, QWORD [r13 + off]),
        }
        self.swap_if_big_endian(size, self.le);
        self.extend_algebraic(op, size);
        self.set_gpr(i.rt());
    }

    /// The run's miss path: its instructions translated one by one (out of line, reading
    /// the homes), then back with the copies of `held` reloaded.
    pub(super) fn access_run_cold(
        &mut self,
        at: DynamicLabel,
        back: DynamicLabel,
        held: &RegCache,
        (k, pc): (u32, u64),
        words: &[u32],
    ) {
        asm!(self.ops ; =>at);
        // A run starts with the homes current and writes through.
        debug_assert_eq!(held.dirty(), 0, "an access run with dirty copies");
        for (j, &w) in words.iter().enumerate() {
            (self.k, self.pc) = (k + j as u32, pc.wrapping_add(4 * j as u64));
            let translated = self.native(decode(w), Insn(w), &mut false);
            debug_assert!(translated, "a run's instructions are native");
        }
        self.reload(held);
        asm!(self.ops ; jmp =>back);
    }
}

#[cfg(test)]
mod tests {
    use super::run_len;

    // std r31,-8(r1); std r30,-16(r1); std r29,-24(r1)
    const SAVES: [u32; 3] = [0xfbe1_fff8, 0xfbc1_fff0, 0xfba1_ffe8];

    #[test]
    fn a_run_is_accesses_off_one_base_within_the_span() {
        assert_eq!(run_len(&SAVES), 3);
        // Then a load off r1: loads and stores mix.
        assert_eq!(run_len(&[SAVES[0], SAVES[1], 0xebe1_fff8]), 3);
        // Then a store off r9: another base.
        assert_eq!(run_len(&[SAVES[0], 0xfbe9_0000]), 0);
        // std r31,0(r1) then std r30,1000(r1): too far apart.
        assert_eq!(run_len(&[0xfbe1_0000, 0xfbc1_03e8]), 0);
        // stdu r31,-8(r1): an update form is not a run's.
        assert_eq!(run_len(&[0xfbe1_fff9, SAVES[1]]), 0);
        // stw r3,0(0): no base register.
        assert_eq!(run_len(&[0x9060_0000, 0x9060_0004]), 0);
    }

    #[test]
    fn a_load_into_the_base_ends_the_run() {
        // ld r4,0(r3); ld r3,8(r3); ld r5,16(r3)
        assert_eq!(run_len(&[0xe883_0000, 0xe863_0008, 0xe8a3_0010]), 2);
        // lwz r5,4(r3); lha r6,8(r3); lbz r7,11(r3)
        assert_eq!(run_len(&[0x80a3_0004, 0xa8c3_0008, 0x88e3_000b]), 3);
    }

    #[test]
    fn integer_instructions_between_accesses_leave_the_base_alone() {
        // ld r4,0(r3); addi r4,r4,1; std r4,0(r3); mr r5,r4; ld r6,8(r3)
        let words = [
            0xe883_0000,
            0x3884_0001,
            0xf883_0000,
            0x7c85_2378,
            0xe8c3_0008,
        ];
        assert_eq!(run_len(&words), 5);
        // ld r4,0(r3); addi r3,r3,8; ld r5,0(r3): the base changes.
        assert_eq!(run_len(&[0xe883_0000, 0x3863_0008, 0xe8a3_0000]), 0);
        // ld r4,0(r3); addi r4,r4,1; (ends): the run ends at its last access.
        assert_eq!(run_len(&[0xe883_0000, 0xe8a3_0008, 0x3884_0001]), 2);
        // ld r4,0(r3); addic r4,r4,1 (sets CA); ld r5,8(r3)
        assert_eq!(run_len(&[0xe883_0000, 0x3084_0001, 0xe8a3_0008]), 0);
        // ld r4,0(r3); add. r4,r4,r4 (records CR0); ld r5,8(r3)
        assert_eq!(run_len(&[0xe883_0000, 0x7c84_2215, 0xe8a3_0008]), 0);
    }
}
