//! Runs of adjacent loads, or of adjacent stores, off one base register (a function's
//! register saves and restores, a structure's fields read one after another): one TLB test
//! for all the bytes they span instead of one per access.
//!
//! A plain access's fast path is about ten host instructions, most of them the TLB test;
//! an access of a run after the first is one. When the span misses (not cached, a page
//! crossed, a watched or device page), the run's cold path translates its instructions one
//! by one as usual, so every fault, device access and store into translated code happens
//! at the instruction it belongs to. The fast path does nothing before its one test, so the
//! cold path starts from the run's first instruction.

use super::memory::Fit;
use super::*;

/// The widest span a run covers: wider ones cross a page more often than they save.
const SPAN_MAX: i64 = 512;

/// One access of a run.
#[derive(Clone, Copy)]
struct Member {
    op: Op,
    i: Insn,
    disp: i64,
    size: u32,
}

/// A plain D- or DS-form load or store without update (`Some(true)`: a store).
fn plain(op: Op) -> Option<bool> {
    use Op::*;
    match op {
        Lbz | Lhz | Lha | Lwz | Lwa | Ld => Some(false),
        Stb | Sth | Stw | Std => Some(true),
        _ => None,
    }
}

fn member(w: u32) -> Option<(Member, bool)> {
    let op = decode(w);
    let store = plain(op)?;
    let i = Insn(w);
    let disp = if op.info().operands.contains(&Operand::DsRa) {
        i.ds()
    } else {
        i.si()
    };
    let size = op.info().size as u32;
    Some((Member { op, i, disp, size }, store))
}

/// How many of `words`' leading instructions form a run: loads only or stores only, one
/// base register (not r0, not written by a load of the run but the last), every byte within
/// [`SPAN_MAX`]. Fewer than two: no run.
pub(super) fn run_len(words: &[u32]) -> usize {
    let Some((first, store)) = words.first().and_then(|&w| member(w)) else {
        return 0;
    };
    let ra = first.i.ra();
    if ra == 0 {
        return 0;
    }
    let (mut lo, mut end) = (first.disp, first.disp + first.size as i64);
    let mut n = 0;
    for &w in words {
        let Some((m, st)) = member(w) else { break };
        if st != store || m.i.ra() != ra {
            break;
        }
        let (l, e) = (lo.min(m.disp), end.max(m.disp + m.size as i64));
        if e - l > SPAN_MAX {
            break;
        }
        (lo, end) = (l, e);
        n += 1;
        if !store && m.i.rt() == ra {
            // The base changes here: later accesses would use the new value.
            break;
        }
    }
    n
}

impl Em {
    /// Translates the run `words` (its length from [`run_len`]) starting at instruction
    /// `self.k`, `self.pc`.
    pub(super) fn access_run(&mut self, words: &[u32]) {
        let (k0, pc0) = (self.k, self.pc);
        let members: Vec<Member> = words.iter().map(|&w| member(w).expect("run").0).collect();
        let store = plain(members[0].op) == Some(true);
        let lo = members.iter().map(|m| m.disp).min().expect("run");
        let end = members
            .iter()
            .map(|m| m.disp + m.size as i64)
            .max()
            .expect("run");
        let (miss, back) = (self.label(), self.label());
        self.base_plus(members[0].i.ra(), lo);
        let (idx, tag) = if store {
            (self.idx_write, offset_of!(TlbEntry, write))
        } else {
            (self.idx_read, offset_of!(TlbEntry, read))
        };
        self.tlb_test(idx, tag, (end - lo) as u32, Fit::InPage, miss);
        // `rcx` (the page's addend) and `r13` (the base plus `lo`) hold for every access.
        for (j, m) in members.iter().enumerate() {
            (self.k, self.pc) = (k0 + j as u32, pc0.wrapping_add(4 * j as u64));
            let off = (m.disp - lo) as i32;
            if store {
                self.store_src(RAX, StoreSrc::Gpr(m.i.rt()));
                self.swap_if_big_endian(m.size, self.le);
                match m.size {
                    1 => asm!(self.ops ; mov BYTE [rcx + r13 + off], al),
                    2 => asm!(self.ops ; mov WORD [rcx + r13 + off], ax),
                    4 => asm!(self.ops ; mov DWORD [rcx + r13 + off], eax),
                    _ => asm!(self.ops ; mov QWORD [rcx + r13 + off], rax),
                }
            } else {
                match m.size {
                    1 => asm!(self.ops ; movzx eax, BYTE [rcx + r13 + off]),
                    2 => asm!(self.ops ; movzx eax, WORD [rcx + r13 + off]),
                    4 => asm!(self.ops ; mov eax, DWORD [rcx + r13 + off]),
                    _ => asm!(self.ops ; mov rax, QWORD [rcx + r13 + off]),
                }
                self.swap_if_big_endian(m.size, self.le);
                if m.op.info().flags.contains(InsnFlags::ALGEBRAIC) {
                    match m.size {
                        2 => asm!(self.ops ; movsx rax, ax),
                        _ => asm!(self.ops ; movsxd rax, eax),
                    }
                }
                self.set_gpr(m.i.rt());
            }
        }
        asm!(self.ops ; =>back);
        self.cold.push(Cold::AccessRun {
            at: miss,
            back,
            held: self.cache,
            k: k0,
            pc: pc0,
            words: words.to_vec(),
        });
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
        for (j, &w) in words.iter().enumerate() {
            (self.k, self.pc) = (k + j as u32, pc.wrapping_add(4 * j as u64));
            let translated = self.memory(decode(w), Insn(w), &mut false);
            debug_assert!(translated, "a run's access is always native");
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
    fn a_run_is_one_kind_off_one_base_within_the_span() {
        assert_eq!(run_len(&SAVES), 3);
        // Then a load off r1: another kind.
        assert_eq!(run_len(&[SAVES[0], SAVES[1], 0xebe1_fff8]), 2);
        // Then a store off r9: another base.
        assert_eq!(run_len(&[SAVES[0], 0xfbe9_0000]), 1);
        // std r31,0(r1) then std r30,1000(r1): too far apart.
        assert_eq!(run_len(&[0xfbe1_0000, 0xfbc1_03e8]), 1);
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
}
