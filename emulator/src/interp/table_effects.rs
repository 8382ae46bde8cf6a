//! The table's data-flow flags checked against the interpreter: every row is executed on
//! random states with random free fields, and what the instruction did must be what its row
//! says (`sets_ca`, `reads_ca`, `sets_cr`/Rc, `sets_fpscr`, `priv`/`hv`). A flag the
//! interpreter contradicts, or an effect the table does not declare, fails here; the JIT
//! tiers and the golden generator rely on the same rows.

use super::Cpu;
use super::test_util::cpu;
use crate::cpu::{Exception, ProgramKind, msr};
use crate::isa::{ALL_OPS, Insn, InsnFlags, Op, Operand};

const RUNS: usize = 48;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A CPU in problem state whose registers are drawn from `seed`: GPRs half inside the 1 MiB
/// of RAM (so loads and stores reach memory), half anything; FPSCR without enabled
/// exceptions, so that floating-point results complete.
fn random_cpu(seed: u64) -> Cpu {
    let mut r = Rng(seed | 1);
    let mut c = cpu();
    for g in c.st.gpr.iter_mut() {
        let v = r.next();
        *g = if v & 1 == 0 { (v >> 8) % 0xf_0000 } else { v };
    }
    c.st.gpr[1] = 0x8_0000;
    c.st.set_cr(r.next() as u32);
    let x = r.next();
    c.st.so = (x & 1) as u8;
    c.st.ov = (x >> 1 & 1) as u8;
    c.st.ca = (x >> 2 & 1) as u8;
    c.st.xer_bc = (x >> 8 & 0x7f) as u8;
    c.st.lr = r.next();
    c.st.ctr = r.next() >> (x >> 16 & 63);
    for v in c.st.vsr.iter_mut() {
        *v = (r.next() as u128) << 64 | r.next() as u128;
    }
    // Rounding mode and sticky bits at random; no enables (bits 56-60 of the 64-bit FPSCR).
    c.st.fpscr = r.next() & 0xffff_ffff & !0xf8;
    c.st.vscr = (r.next() as u32) & 0x0001_0001;
    c.st.pc = 0x1000;
    c.nia = 0x1004;
    c
}

/// SPRs a problem-state program reaches (XER, LR, CTR, VRSAVE, TAR, DSCR, PPR): drawn half
/// of the time, since a random SPR number is almost always an illegal instruction.
const USER_SPRS: [u32; 7] = [1, 8, 9, 256, 815, 3, 896];

/// A word of `op` with every free field random.
fn random_word(r: &mut Rng, op: Op) -> u32 {
    let info = op.info();
    let mut w = (r.next() as u32 & !info.mask) | info.value;
    if info
        .operands
        .iter()
        .any(|o| matches!(o, Operand::Spr | Operand::Tbr))
        && r.next() & 1 == 0
    {
        let n = USER_SPRS[r.next() as usize % USER_SPRS.len()];
        w = (w & !(0x3ff << 11)) | ((n & 0x1f) << 16) | ((n >> 5) << 11);
    }
    w
}

/// Whether the result depends on something other than the state (the timebase).
fn reads_time(op: Op, w: u32) -> bool {
    matches!(op, Op::Mftb | Op::Mfspr) && matches!(Insn(w).spr(), 268 | 269)
}

fn records(op: Op, w: u32) -> bool {
    let (f, i) = (op.info().flags, Insn(w));
    f.contains(InsnFlags::SETS_CR)
        || (f.contains(InsnFlags::RC) && i.rc())
        || (f.contains(InsnFlags::RC21) && i.bit21() != 0)
}

/// Everything an instruction can change in the vCPU's registers, as text (the state has
/// no `PartialEq`; its `Debug` lists every field).
fn registers(c: &Cpu) -> String {
    format!("{:?} nia={:#x}", c.st, c.nia)
}

fn ops() -> impl Iterator<Item = Op> {
    ALL_OPS.iter().copied().filter(|op| *op != Op::Illegal)
}

#[test]
fn rows_declare_every_ca_cr_and_fpscr_write() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut checked = 0;
    for op in ops() {
        let f = op.info().flags;
        for _ in 0..RUNS {
            let w = random_word(&mut r, op);
            let mut c = random_cpu(r.next());
            let before = c.st.clone();
            if c.execute(w).is_err() {
                continue;
            }
            checked += 1;
            let m = op.info().mnemonic;
            if !f.contains(InsnFlags::SETS_CA) {
                assert_eq!(c.st.ca, before.ca, "{m} ({w:#010x}) changed CA: no sets_ca");
            }
            if !records(op, w) {
                assert_eq!(
                    c.st.cr(),
                    before.cr(),
                    "{m} ({w:#010x}) changed CR: no sets_cr/Rc"
                );
            }
            if !f.contains(InsnFlags::SETS_FPSCR) {
                assert_eq!(
                    c.st.fpscr, before.fpscr,
                    "{m} ({w:#010x}) changed the FPSCR: no sets_fpscr"
                );
            }
        }
    }
    assert!(checked > 10_000, "only {checked} executions completed");
}

#[test]
fn rows_without_reads_ca_ignore_it() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let mut seen_dependent = 0;
    for op in ops() {
        let f = op.info().flags;
        for _ in 0..RUNS {
            let w = random_word(&mut r, op);
            if reads_time(op, w) {
                continue;
            }
            let seed = r.next();
            // Everything but CA itself is compared (which the input sets, unless written).
            let run = |ca: u8| {
                let mut c = random_cpu(seed);
                c.st.ca = ca;
                let e = c.execute(w);
                c.st.ca = 0;
                (e, registers(&c))
            };
            let (zero, one) = (run(0), run(1));
            if f.contains(InsnFlags::READS_CA) {
                seen_dependent += (zero != one) as usize;
            } else {
                let m = op.info().mnemonic;
                assert_eq!(zero, one, "{m} ({w:#010x}) depends on CA: no reads_ca");
            }
        }
    }
    // The flag is not vacuous: the rows that have it do read CA.
    assert!(seen_dependent > 0);
}

#[test]
fn privileged_rows_trap_in_problem_state_and_only_they() {
    let mut r = Rng(0xdead_beef_cafe_f00d);
    const PRIVILEGED: Exception = Exception::Program(ProgramKind::Privileged);
    for op in ops() {
        let f = op.info().flags;
        let m = op.info().mnemonic;
        // SPR moves (and mftb, mfspr for other TBRs): the SPR number decides (SPR tests in
        // system.rs).
        let by_operand = matches!(op, Op::Mfspr | Op::Mtspr | Op::Mftb);
        for _ in 0..RUNS {
            let w = random_word(&mut r, op);
            let mut c = random_cpu(r.next());
            assert_ne!(c.st.msr & msr::PR, 0);
            let e = c.execute(w);
            if f.contains(InsnFlags::PRIV) || f.contains(InsnFlags::HV) {
                assert_eq!(e, Err(PRIVILEGED), "{m} ({w:#010x}) in problem state");
            } else if !by_operand {
                assert_ne!(e, Err(PRIVILEGED), "{m} ({w:#010x}) is privileged: no priv");
            }
        }
    }
}
