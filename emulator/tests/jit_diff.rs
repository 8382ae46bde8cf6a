//! JIT against the interpreter: random instruction streams and hand-written programs must end
//! in the same architectural state, memory and exception, in both byte orders; stores into
//! translated code must take effect.

use ppc64emu::cpu::{Exception, msr};
use ppc64emu::engine::{Cpu, run};
use ppc64emu::isa::{ALL_OPS, InsnFlags, Op};
use ppc64emu::jit::{Jit, JitShared, Tiers};
use ppc64emu::softmmu::FlatRam;

const RAM: usize = 1 << 20;
const CODE: u64 = 0x1000;
const DATA: u64 = 0x40000;
const LIMIT: u64 = 20_000;

/// r3 = 0; ctr = 100; loop: lwzx r4, r5, r6; add r3, r3, r4; stwx r3, r5, r6; addi r6, r6, 4;
/// bdnz loop; then an illegal word. Many block executions through the caches; with
/// [`counted_loop_data`] r3 ends as the sum 1..100.
const COUNTED_LOOP: [u32; 9] = [
    0x3860_0000,
    0x3880_0064,
    0x7c89_03a6,
    0x7c85_302e,
    0x7c63_2214,
    0x7c65_312e,
    0x38c6_0004,
    0x4200_fff0,
    0,
];

/// The counted loop's operands: the words 1..=100 at `DATA`, r5 = `DATA`, r6 = 0.
fn counted_loop_data(c: &mut Cpu) {
    c.st.gpr[5] = DATA;
    c.st.gpr[6] = 0;
    for k in 0..100 {
        c.mmu
            .store(&c.st, DATA + 4 * k, 4, k + 1, c.st.le())
            .unwrap();
    }
}

/// A CPU at the start of the counted loop, its operands in place.
fn counted_loop_cpu(le: bool) -> Cpu {
    let mut c = cpu(le);
    put_code(&mut c, CODE, &COUNTED_LOOP);
    counted_loop_data(&mut c);
    c.st.pc = CODE;
    c
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A timebase that does not move, so that `mftb` reads the same on both sides (with an upper
/// word, so that `mftbu` reads something).
const TB: u64 = 0x0000_0042_1234_5678;
struct FixedTb;
impl ppc64emu::engine::TimeBase for FixedTb {
    fn now(&self) -> u64 {
        TB
    }
}

fn cpu(le: bool) -> Cpu {
    let mut c = Cpu::new(Box::new(FlatRam::new(RAM)));
    c.timebase = std::sync::Arc::new(FixedTb);
    c.st.msr =
        msr::SF | msr::PR | msr::FP | msr::VEC | msr::VSX | msr::EE | if le { msr::LE } else { 0 };
    c
}

fn put_code(c: &mut Cpu, at: u64, words: &[u32]) {
    let le = c.st.le();
    for (k, w) in words.iter().enumerate() {
        c.mmu
            .store(&c.st, at + 4 * k as u64, 4, *w as u64, le)
            .unwrap();
    }
}

/// Runs to the first exception (or `LIMIT` instructions: `None`).
fn run_interp(c: &mut Cpu) -> Option<Exception> {
    while c.counters.instructions < LIMIT {
        if let Err(e) = c.step() {
            return Some(e);
        }
        c.events = 0;
    }
    None
}

fn run_jit(c: &mut Cpu, jit: &mut Jit) -> Option<Exception> {
    while c.counters.instructions < LIMIT {
        if let Err(e) = run(jit, c, 1000, &|_| false) {
            return Some(e);
        }
        c.events = 0;
    }
    None
}

fn state(c: &mut Cpu) -> String {
    let s = &c.st;
    let mut out = format!(
        "pc={:#x} msr={:#x} cr={:#010x} xer={:#x} lr={:#x} ctr={:#x} fpscr={:#x} n={}\n",
        s.pc,
        s.msr,
        s.cr(),
        s.xer(),
        s.lr,
        s.ctr,
        s.fpscr,
        c.counters.instructions
    );
    for (i, g) in s.gpr.iter().enumerate() {
        out += &format!("r{i}={g:#x} ");
    }
    for (i, v) in s.vsr.iter().enumerate().filter(|(_, v)| **v != 0) {
        out += &format!("vs{i}={v:#x} ");
    }
    out += &format!("resv={:#x}\n", s.reserve_addr);
    out += &format!(
        "srr0={:#x} srr1={:#x} dar={:#x} dsisr={:#x} sprg={:x?} tar={:#x}\n",
        s.srr0, s.srr1, s.dar, s.dsisr, s.sprg, s.tar
    );
    let mut h = 0u64;
    for a in (0..RAM as u64).step_by(8) {
        let v = c.mmu.load(&c.st, a, 8, true).unwrap();
        h = (h ^ v).wrapping_mul(0x100_0000_01b3).rotate_left(5);
    }
    out + &format!("mem={h:#x}")
}

thread_local! {
    /// The tiers `differential_tiered` runs, with the promotion threshold: Cranelift alone
    /// unless a baseline twin (below) set them for its test thread.
    static TIERS: std::cell::Cell<(Tiers, u32)> = const { std::cell::Cell::new((Tiers::CRANELIFT, 0)) };
}

/// Runs `test` with the tiers `tiers` (baseline blocks promoted after `promote` runs).
fn with_tiers(tiers: Tiers, promote: u32, test: fn()) {
    TIERS.set((tiers, promote));
    test();
}

/// Runs the same program on both and compares everything; every block is translated on its
/// first execution.
fn differential(words: &[u32], le: bool, init: impl Fn(&mut Cpu)) -> (Option<Exception>, String) {
    differential_tiered(words, le, init, 0)
}

/// As `differential`, with blocks interpreted `threshold` times before they are translated.
fn differential_tiered(
    words: &[u32],
    le: bool,
    init: impl Fn(&mut Cpu),
    threshold: u32,
) -> (Option<Exception>, String) {
    let mut a = cpu(le);
    let mut b = cpu(le);
    for c in [&mut a, &mut b] {
        put_code(c, CODE, words);
        init(c);
        c.st.pc = CODE;
    }
    let mut jit = Jit::attach(&mut b, JitShared::new());
    let (tiers, promote) = TIERS.get();
    jit.set_tiers(tiers, Some(threshold));
    jit.promote_threshold = promote;
    let ea = run_interp(&mut a);
    let eb = run_jit(&mut b, &mut jit);
    let (sa, sb) = (state(&mut a), state(&mut b));
    if ea.is_some() {
        assert_eq!(
            ea, eb,
            "exception differs for {words:08x?}\ninterp: {sa}\njit:    {sb}"
        );
        assert_eq!(sa, sb, "state differs (le={le}) for {words:08x?}");
    }
    (ea, sa)
}

/// Ops the random streams draw from: everything but what leaves problem state or waits.
fn pool() -> Vec<Op> {
    ALL_OPS
        .iter()
        .copied()
        .filter(|op| *op != Op::Illegal && !op.info().flags.contains(InsnFlags::HV))
        .collect()
}

fn random_program(r: &mut Rng, pool: &[Op], len: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for _ in 0..len {
        let op = pool[r.next() as usize % pool.len()];
        let info = op.info();
        let mut w = (r.next() as u32 & !info.mask) | info.value;
        // Branches mostly forward and near, so that most programs run to the end.
        if op == Op::Bc || op == Op::B {
            let disp = 4 * (1 + r.next() % 4) as u32;
            w = if op == Op::B {
                (w & !0x03ff_fffe) | disp
            } else {
                (w & !0xfffe) | disp
            };
            w &= !2; // relative
        }
        // Base registers r1-r7 point into the data area (see `init_regs`).
        if info.flags.contains(InsnFlags::LOAD) || info.flags.contains(InsnFlags::STORE) {
            w = (w & !(0x1f << 16)) | ((1 + r.next() as u32 % 7) << 16);
            if info.operands.contains(&ppc64emu::isa::Operand::Rb) {
                w = (w & !(0x1f << 11)) | (((r.next() % 2) as u32 * 8) << 11);
            }
        }
        out.push(w);
    }
    out.push(0); // illegal: the end
    out
}

fn init_regs(seed: u64) -> impl Fn(&mut Cpu) {
    move |c: &mut Cpu| {
        let mut r = Rng(seed | 1);
        for i in 0..32 {
            c.st.gpr[i] = match i {
                1..=7 => (DATA + (r.next() % 0x8000)) & !7,
                8 => r.next() % 64,
                _ => r.next() >> (r.next() % 64),
            };
        }
        c.st.set_cr(r.next() as u32);
        c.st.set_xer(r.next() & 0xe000_0000);
        c.st.lr = CODE + 4 * (r.next() % 40);
        c.st.ctr = r.next() % 5;
        for k in 0..0x400u64 {
            c.mmu.store(&c.st, DATA + 8 * k, 8, r.next(), true).unwrap();
        }
    }
}

#[test]
fn random_streams_match_the_interpreter_in_both_byte_orders() {
    let pool = pool();
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut ended = 0;
    for case in 0..600 {
        let len = 1 + (r.next() % 40) as usize;
        let prog = random_program(&mut r, &pool, len);
        let le = case % 2 == 0;
        if differential(&prog, le, init_regs(r.next())).0.is_some() {
            ended += 1;
        }
    }
    assert!(ended > 500, "only {ended} programs ended");
}

/// Integer-heavy streams (the natively translated families) without loads that fault.
#[test]
fn native_families_match_the_interpreter() {
    use Op::*;
    let pool = [
        Addi, Addis, Add, Subf, Neg, Addic, AddicDot, Subfic, Addc, Adde, Addze, Addme, Subfc,
        Subfe, Subfze, Subfme, Mulli, Mulld, Mullw, Mulhd, Mulhdu, And, Or, Xor, Nand, Nor, Andc,
        Orc, Eqv, Ori, Oris, Xori, Xoris, AndiDot, AndisDot, Extsb, Extsh, Extsw, Cntlzw, Cntlzd,
        Slw, Srw, Sld, Srd, Sraw, Srawi, Srad, Sradi, Rlwinm, Rlwnm, Rlwimi, Rldicl, Rldicr, Rldic,
        Rldimi, Rldcl, Rldcr, Cmp, Cmpi, Cmpl, Cmpli, Isel, Crand, Cror, Crxor, Crnand, Crnor,
        Creqv, Crandc, Crorc, Mcrf, Mfcr, Mtcrf, Bc, B, Lbz, Lhz, Lha, Lwz, Ld, Lwa, Stb, Sth, Stw,
        Std, Lbzu, Stwu, Ldx, Stdx, Lwzux, Stdux,
    ];
    let mut r = Rng(0xfeed_f00d_dead_beef);
    for case in 0..1500 {
        let len = 1 + (r.next() % 60) as usize;
        let prog = random_program(&mut r, &pool, len);
        differential(&prog, case % 2 == 1, init_regs(r.next()));
    }
}

/// No-op immediates (`nop`, `ori rX,rX,0` and the other three) change nothing; `mr` and
/// `mr.` copy (and record), `ori rY,rX,0` copies.
#[test]
fn nops_and_register_moves_match_the_interpreter() {
    let prog = [
        0x6000_0000, // nop
        0x60a5_0000, // ori r5,r5,0
        0x64a5_0000, // oris r5,r5,0
        0x68a5_0000, // xori r5,r5,0
        0x6ca5_0000, // xoris r5,r5,0
        0x7ca6_2b78, // mr r6,r5
        0x7ca7_2b79, // mr. r7,r5
        0x60a8_0000, // ori r8,r5,0
        0,
    ];
    for (le, v) in [(false, -5i64 as u64), (true, 7), (true, 0)] {
        let (e, s) = differential(&prog, le, |c| {
            c.st.gpr[5] = v;
            c.st.gpr[6..9].copy_from_slice(&[1, 2, 3]);
        });
        assert!(matches!(e, Some(Exception::Program(_))), "{s}");
        for r in 5..=8 {
            assert!(s.contains(&format!("r{r}={v:#x} ")), "r{r}: {s}");
        }
    }
}

/// `mtlr`/`mtctr` right before `blr`/`bctr`, in both orders: each branch goes through its
/// own register, whichever was set last.
#[test]
fn moves_to_lr_and_ctr_then_branches_through_them() {
    // r5 = CODE + 0x20 (r3 = 1 there), r6 = CODE + 0x30 (r3 = 2 there); illegal words end.
    let (mtlr, mtctr, blr, bctr) = (0x7ca8_03a6, 0x7cc9_03a6, 0x4e80_0020, 0x4e80_0420);
    for (moves, branch, r3) in [
        ([mtlr, mtctr], blr, 1),
        ([mtlr, mtctr], bctr, 2),
        ([mtctr, mtlr], bctr, 2),
        ([mtctr, mtlr], blr, 1),
    ] {
        let mut prog = vec![0u32; 14];
        prog[..5].copy_from_slice(&[0x38a0_1020, 0x38c0_1030, moves[0], moves[1], branch]);
        prog[8] = 0x3860_0001;
        prog[12] = 0x3860_0002;
        for le in [false, true] {
            let (e, s) = differential(&prog, le, |_| {});
            assert!(matches!(e, Some(Exception::Program(_))), "{s}");
            assert!(
                s.contains(&format!("r3={r3:#x} ")),
                "{moves:08x?} {branch:08x}: {s}"
            );
        }
    }
}

/// A counted loop with loads and stores: many block executions through the caches.
#[test]
fn loop_with_memory() {
    for le in [false, true] {
        let (e, s) = differential(&COUNTED_LOOP, le, counted_loop_data);
        assert!(matches!(e, Some(Exception::Program(_))), "{s}");
        assert!(s.contains("r3=0x13ba "), "sum 1..100: {s}");
    }
}

/// The loop's blocks go from the interpreter to translated code (and chain) mid-run.
#[test]
fn loop_changes_tier_mid_run() {
    for threshold in [1, 3, 50] {
        let (e, s) = differential_tiered(
            &COUNTED_LOOP,
            threshold % 2 == 1,
            counted_loop_data,
            threshold,
        );
        assert!(matches!(e, Some(Exception::Program(_))), "{s}");
        assert!(s.contains("r3=0x13ba "), "sum 1..100: {s}");
    }
}

/// Random streams with blocks that change tier after a couple of runs.
#[test]
fn random_streams_match_with_tiering() {
    let pool = pool();
    let mut r = Rng(0x0bad_cafe_1234_5678);
    for case in 0..200 {
        let len = 1 + (r.next() % 40) as usize;
        let prog = random_program(&mut r, &pool, len);
        differential_tiered(&prog, case % 2 == 0, init_regs(r.next()), 2);
    }
}

/// The guest patches an instruction later in the same block: the new one must run.
#[test]
fn store_into_own_block_takes_effect() {
    // r4 = "li r3, 2" (0x38600002); stw r4, 8(r5) with r5 = CODE, overwriting the `li r3, 1`
    // at CODE+8; then illegal.
    for le in [false, true] {
        let patch = [0x3c80_3860, 0x6084_0002, 0x9085_000c, 0x3860_0001, 0];
        let (_, s) = differential(&patch, le, |c| c.st.gpr[5] = CODE);
        assert!(s.contains("r3=0x2 "), "{s}");
    }
}

/// Code run once, rewritten by a later block, then run again: the second run sees the change.
#[test]
fn self_modifying_code_across_blocks() {
    // f at CODE+0x100: li r3, 7; blr
    let f = [0x3860_0007, 0x4e80_0020];
    let main = [
        0x4800_0101, // bl CODE+0x100
        0x7c69_1b78, // mr r9, r3
        0x3c80_3860, // lis r4, 0x3860
        0x6084_0009, // ori r4, r4, 9      (r4 = li r3, 9)
        0x9085_0100, // stw r4, 0x100(r5)  (over f's first word)
        0x4800_00ed, // bl CODE+0x100
        0,
    ];
    for le in [false, true] {
        let (_, s) = differential(&main, le, |c| {
            c.st.gpr[5] = CODE;
            put_code(c, CODE + 0x100, &f);
        });
        assert!(s.contains("r9=0x7 ") && s.contains("r3=0x9 "), "{s}");
    }
}

/// Registers full of the values divides, multiplies and byte lanes get wrong first: zero,
/// one, -1, INT_MIN of both widths, words with a high half, equal bytes.
fn edge_regs(seed: u64) -> impl Fn(&mut Cpu) {
    move |c: &mut Cpu| {
        init_regs(seed)(c);
        let mut r = Rng(seed.rotate_left(17) | 1);
        const EDGES: [u64; 12] = [
            0,
            1,
            u64::MAX,
            0x8000_0000,
            0xffff_ffff_8000_0000,
            0x8000_0000_0000_0000,
            0xffff_ffff,
            0x1_0000_0000,
            0x7fff_ffff,
            0x0000_0001_ffff_ffff,
            0x4141_4141_4141_4141,
            0x4100_4142_0041_4141,
        ];
        for g in 9..32 {
            if !r.next().is_multiple_of(3) {
                c.st.gpr[g] = EDGES[r.next() as usize % EDGES.len()];
            }
        }
    }
}

/// Rewrites the SPR field of `mfspr`/`mtspr`/`mftb` words to SPRs the JIT translates
/// natively and their neighbours (composed, side-effecting, privileged, undefined, the
/// timebase and the registers that count with it).
fn pick_sprs(r: &mut Rng, prog: &mut [u32]) {
    const SPRS: [u32; 39] = [
        1, 3, 8, 9, 13, 17, 18, 19, 22, 26, 27, 259, 268, 272, 273, 274, 275, 287, 815, 777, 28,
        29, 48, 61, 136, 152, 153, 157, 256, 269, 804, 805, 806, 896, 898, 1023, 308, 309, 351,
    ];
    for w in prog.iter_mut() {
        if matches!(ppc64emu::isa::decode(*w), Op::Mfspr | Op::Mtspr | Op::Mftb) {
            let n = SPRS[r.next() as usize % SPRS.len()];
            *w = (*w & !(0x3ff << 11)) | ((n & 0x1f) << 16) | ((n >> 5) << 11);
        }
    }
}

/// The instructions translated beyond the core families, with edge operands, in problem
/// and supervisor state and both byte orders.
#[test]
fn divides_cr_fields_sprs_dcbz_and_byte_lanes_match_the_interpreter() {
    use Op::*;
    let pool = [
        Divw, Divwu, Divd, Divdu, Mulhw, Mulhwu, Mfocrf, Mtocrf, Mfspr, Mtspr, Mfspr, Mtspr, Dcbz,
        Dcbt, Dcbtst, Lhbrx, Lwbrx, Ldbrx, Sthbrx, Stwbrx, Stdbrx, Popcntb, Popcntw, Popcntd,
        Prtyw, Prtyd, Cmpb, Add, Addi, Ori, Cmp, Bc, Ld, Std, Mfcr, Mtcrf, Lwz, Stw,
    ];
    let mut r = Rng(0x0dd_ba11_cafe_f00d);
    for case in 0..1500 {
        let len = 1 + (r.next() % 50) as usize;
        let mut prog = random_program(&mut r, &pool, len);
        pick_sprs(&mut r, &mut prog);
        let supervisor = case % 4 >= 2;
        let init = edge_regs(r.next());
        differential(&prog, case % 2 == 1, |c| {
            init(c);
            if supervisor {
                c.st.msr &= !msr::PR;
            }
        });
    }
}

/// Barriers, `isync`, traps, the reservation pair (aligned and not, with and without a
/// reservation, in both byte orders), cache block flushes, the timebase and SPR moves, in
/// problem and supervisor state.
#[test]
fn barriers_traps_reservations_and_sprs_match_the_interpreter() {
    use Op::*;
    let pool = [
        Sync, Eieio, Isync, Tw, Twi, Td, Tdi, Lbarx, Lharx, Lwarx, Ldarx, Lwarx, Ldarx, StbcxDot,
        SthcxDot, StwcxDot, StdcxDot, StwcxDot, StdcxDot, Dcbst, Dcbf, Icbi, Mftb, Mfspr, Mtspr,
        Add, Addi, Stw, Lwz, Std, Bc,
    ];
    let mut r = Rng(0x5eed_0fa7_01c5);
    let mut ran = 0;
    for case in 0..1500 {
        let len = 1 + (r.next() % 40) as usize;
        let mut prog = random_program(&mut r, &pool, len);
        pick_sprs(&mut r, &mut prog);
        for w in prog.iter_mut() {
            let op = ppc64emu::isa::decode(*w);
            // Traps mostly with a condition that may not hold, so that programs go on.
            if matches!(op, Tw | Twi | Td | Tdi) && r.next().is_multiple_of(2) {
                *w &= !(0x1f << 21);
            }
            // A store conditional mostly right after a reservation of the same place.
            if matches!(op, StwcxDot | StdcxDot) && r.next().is_multiple_of(2) {
                *w = (*w & !(0x1f << 16 | 0x1f << 11)) | (1 << 16);
            }
            if matches!(op, Lwarx | Ldarx) && r.next().is_multiple_of(2) {
                *w = (*w & !(0x1f << 16 | 0x1f << 11)) | (1 << 16);
            }
        }
        let supervisor = case % 4 >= 2;
        let init = edge_regs(r.next());
        let (e, _) = differential(&prog, case % 2 == 1, |c| {
            init(c);
            if supervisor {
                c.st.msr &= !msr::PR;
            }
        });
        ran += e.is_some() as u32;
    }
    assert!(ran > 0);
}

/// MSR images for `mtmsr[d]` and `rfid` in supervisor state: the starting MSR with one or two
/// bits flipped, bits the block key holds (FP, VEC, VSX, PR, LE, SF, IR, DR) or not (EE,
/// RI, SE, FE0, PMM); SRR0 mostly an instruction of the program; the decrementer negative
/// (an interrupt EE would let in) or not.
fn msr_regs(seed: u64) -> impl Fn(&mut Cpu) {
    move |c: &mut Cpu| {
        vector_regs(seed, msr::FP | msr::VEC | msr::VSX)(c);
        c.st.msr &= !msr::PR;
        let base = c.st.msr;
        const BITS: [u64; 13] = [
            msr::EE,
            msr::RI,
            msr::FP,
            msr::VEC,
            msr::VSX,
            msr::PR,
            msr::LE,
            msr::SF,
            msr::IR,
            msr::DR,
            msr::SE,
            msr::FE0,
            msr::PMM,
        ];
        let mut r = Rng(seed.rotate_left(7) | 1);
        let image = |r: &mut Rng| {
            let mut v = base;
            for _ in 0..1 + r.next() % 2 {
                v ^= BITS[r.next() as usize % BITS.len()];
            }
            v
        };
        for g in 9..32 {
            if r.next().is_multiple_of(2) {
                c.st.gpr[g] = image(&mut r);
            }
        }
        c.st.srr0 = CODE + 4 * (r.next() % 48);
        c.st.srr1 = image(&mut r);
        c.st.dec_value = if r.next().is_multiple_of(2) {
            0x8000_0000
        } else {
            1 << 20
        };
        c.st.dec_tb = TB;
    }
}

/// `mtmsr`, `mtmsrd` (both L), `mfmsr` and `rfid` between instructions whose translation
/// depends on the MSR (FP, VMX, VSX, privileged SPRs, loads and stores), in supervisor state:
/// a mode change mid-block must not let the rest of it run in the old mode.
#[test]
fn msr_writes_and_rfid_match_the_interpreter() {
    use Op::*;
    let pool = [
        Mtmsrd, Mtmsrd, Mtmsr, Mfmsr, Rfid, Rfid, Mfspr, Mtspr, Fmr, Vaddubm, Xxlor, Lfd, Stfd,
        Lvx, Addi, Ori, Lwz, Stw, Bc, Mftb,
    ];
    let mut r = Rng(0x0356_0f1d_c0de);
    let mut faulted = 0;
    for case in 0..1500 {
        let len = 1 + (r.next() % 40) as usize;
        let mut prog = random_program(&mut r, &pool, len);
        pick_sprs(&mut r, &mut prog);
        for w in prog.iter_mut() {
            // The MSR images are in r9-r31.
            if matches!(ppc64emu::isa::decode(*w), Mtmsr | Mtmsrd) {
                *w = (*w & !(0x1f << 21)) | (9 + r.next() as u32 % 23) << 21;
            }
        }
        let (e, _) = differential(&prog, case % 2 == 1, msr_regs(r.next()));
        faulted += matches!(
            e,
            Some(Exception::FpUnavailable | Exception::VecUnavailable | Exception::Program(_))
        ) as u32;
    }
    assert!(faulted > 100, "{faulted}");
}

/// Every divide edge case, word and doubleword, with and without Rc.
#[test]
fn divide_edge_cases() {
    const V: [u64; 8] = [
        0,
        1,
        u64::MAX,
        0x8000_0000,
        0xffff_ffff_8000_0000,
        0x8000_0000_0000_0000,
        7,
        0xffff_ffff_ffff_fff9,
    ];
    // divw r3,r4,r5 / divwu / divd / divdu, each as is and with Rc.
    for base in [0x7c64_2bd6u32, 0x7c64_2b96, 0x7c64_2bd2, 0x7c64_2b92] {
        for rc in [0, 1] {
            for a in V {
                for b in V {
                    let (_, s) = differential(&[base | rc, 0], true, |c| {
                        c.st.gpr[4] = a;
                        c.st.gpr[5] = b;
                    });
                    assert!(s.starts_with("pc=0x1004 "), "{s}");
                }
            }
        }
    }
}

/// `srad` with every kind of count (0, inside, 63, 64 and beyond, bit 6 set) on edge values:
/// the result and CA, with and without Rc.
#[test]
fn shift_right_algebraic_edge_cases() {
    const V: [u64; 6] = [
        0,
        1,
        u64::MAX,
        0x8000_0000_0000_0000,
        0x8000_0000_0000_0001,
        0x7fff_ffff_ffff_fff0,
    ];
    const COUNTS: [u64; 9] = [0, 1, 4, 63, 64, 65, 127, 128 + 3, 0xffff_ff40];
    // srad r3,r4,r5
    for rc in [0, 1] {
        for v in V {
            for n in COUNTS {
                let (_, s) = differential(&[0x7c83_2e34 | rc, 0], true, |c| {
                    c.st.gpr[4] = v;
                    c.st.gpr[5] = n;
                });
                assert!(s.starts_with("pc=0x1004 "), "{s}");
            }
        }
    }
}

/// `dcbz` zeroes the aligned 128-byte block: through the fast path after a TLB fill, across
/// pages, into translated code (the rest of the block must not run stale), and faulting.
#[test]
fn dcbz_paths() {
    // li r6,0; li r4,40; mtctr r4; loop: dcbz r5,r6; addi r6,r6,100; bdnz loop; illegal.
    let lp = [
        0x38c0_0000,
        0x3880_0028,
        0x7c89_03a6,
        0x7c05_37ec,
        0x38c6_0064,
        0x4200_fff8,
        0,
    ];
    for le in [false, true] {
        let (e, s) = differential(&lp, le, |c| {
            c.st.gpr[5] = DATA + 0xf30;
            for k in 0..0x400u64 {
                c.mmu.store(&c.st, DATA + 8 * k, 8, !k, true).unwrap();
            }
        });
        assert!(matches!(e, Some(Exception::Program(_))), "{s}");
    }
    // dcbz 0,r5 with r5 inside this very block: the next instructions become zero (illegal).
    for le in [false, true] {
        let prog = [0x7c00_2fec, 0x3860_0001, 0x3860_0002, 0];
        let (e, s) = differential(&prog, le, |c| c.st.gpr[5] = CODE + 0x44);
        assert!(matches!(e, Some(Exception::Program(_))), "{s}");
        assert!(s.starts_with("pc=0x1004 "), "stale code ran: {s}");
    }
    // Outside RAM: the data storage interrupt, with the instruction's PC.
    for le in [false, true] {
        let prog = [0x3860_0001, 0x7c00_2fec, 0x3860_0002, 0];
        let (e, s) = differential(&prog, le, |c| c.st.gpr[5] = 0x20_0000 + 0x7f);
        assert!(matches!(e, Some(Exception::Dsi { .. })), "{e:?} {s}");
        assert!(s.starts_with("pc=0x1004 ") && s.contains("r3=0x1 "), "{s}");
    }
}

/// Doubles and singles at the edges of the conversions (`lfs`/`stfs` and the VSX scalar
/// forms): zeros, denormal singles, infinities, signalling and quiet NaNs, doubles around the
/// single-precision exponent range, random bits.
const FP_EDGES: [u64; 16] = [
    0,
    0x8000_0000_0000_0000,
    0x0000_0001_0000_0001,
    0x007f_ffff_807f_ffff,
    0x8040_0000_0000_8000,
    0x7f80_0000_ff80_0000,
    0x7f80_0001_7fc0_0000,
    0x7ff0_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x3690_0000_0000_0000, // exponent 873: below every single
    0x36a0_0000_1234_5678, // 874
    0x3800_0000_0000_0001, // 896: the largest denormal single
    0x3810_0000_0000_0000, // 897: the smallest normal single
    0xc7ef_ffff_ffff_ffff,
    0x3ff0_0000_0000_0000,
    0x0000_0000_0000_0003,
];

/// Registers and memory for the vector and FP streams: bases r1-r7 in the data area, some of
/// them just before a page end (accesses cross it) or the end of RAM (the second part
/// faults); random VSRs with edge doubles in some FPR halves; edge values in memory.
fn vector_regs(seed: u64, facilities: u64) -> impl Fn(&mut Cpu) {
    move |c: &mut Cpu| {
        init_regs(seed)(c);
        let mut r = Rng(seed.rotate_left(29) | 1);
        for g in 1..=7 {
            c.st.gpr[g] = match r.next() % 6 {
                0 => {
                    DATA + 0x1000 * (1 + r.next() % 6) - 8 * (1 + r.next() % 2) - (r.next() % 2) * 4
                }
                1 => RAM as u64 - 8 - (r.next() % 2) * 4,
                2 => DATA + 0x1000 * (1 + r.next() % 6) - (r.next() % 16),
                _ => c.st.gpr[g],
            };
        }
        for v in c.st.vsr.iter_mut() {
            *v = (r.next() as u128) << 64 | r.next() as u128;
            if r.next().is_multiple_of(3) {
                *v = (FP_EDGES[r.next() as usize % FP_EDGES.len()] as u128) << 64
                    | (*v & u64::MAX as u128);
            }
        }
        c.st.vscr = r.next() as u32 & 0x0001_0001;
        for k in 0..0x1000u64 {
            if r.next().is_multiple_of(2) {
                c.mmu
                    .store(
                        &c.st,
                        DATA + 8 * k,
                        8,
                        FP_EDGES[r.next() as usize % FP_EDGES.len()],
                        true,
                    )
                    .unwrap();
            }
        }
        c.st.msr &= !(msr::FP | msr::VEC | msr::VSX) | facilities;
    }
}

/// The natively translated vector, VSX and FP register-file instructions (with a few integer
/// ones around them), in both byte orders, with every facility on and with each one off.
#[test]
fn vector_and_fp_register_file_instructions_match_the_interpreter() {
    use Op::*;
    let pool = [
        Vaddubm, Vadduhm, Vadduwm, Vaddudm, Vsububm, Vsubuhm, Vsubuwm, Vsubudm, Vand, Vandc, Vor,
        Vorc, Vxor, Vnor, Vnand, Veqv, Vsel, Vcmpequb, Vcmpequh, Vcmpequw, Vcmpequd, Vcmpgtub,
        Vcmpgtuh, Vcmpgtuw, Vcmpgtud, Vcmpgtsb, Vcmpgtsh, Vcmpgtsw, Vcmpgtsd, Vslb, Vslh, Vslw,
        Vsld, Vsrb, Vsrh, Vsrw, Vsrd, Vsrab, Vsrah, Vsraw, Vsrad, Vpkuhum, Vpkuwum, Vpkudum,
        Vmrghb, Vmrghh, Vmrghw, Vmrglb, Vmrglh, Vmrglw, Vmrgew, Vmrgow, Vsldoi, Vspltb, Vsplth,
        Vspltw, Vspltisb, Vspltish, Vspltisw, Vperm, Lvsl, Lvsr, Lvx, Lvxl, Stvx, Stvxl, Xxland,
        Xxlandc, Xxlor, Xxlxor, Xxlnor, Xxleqv, Xxlnand, Xxlorc, Xxsel, Xxpermdi, Xxsldwi, Xxmrghw,
        Xxmrglw, Xxspltw, Vgbbd, Vbpermq, Lxvd2x, Stxvd2x, Lxvw4x, Stxvw4x, Lxvdsx, Lxsdx, Lxsiwax,
        Lxsiwzx, Lxsspx, Stxsdx, Stxsiwx, Stxsspx, Mfvsrd, Mfvsrwz, Mtvsrd, Mtvsrwa, Mtvsrwz, Lfs,
        Lfsu, Lfsx, Lfsux, Lfd, Lfdu, Lfdx, Lfdux, Lfiwax, Lfiwzx, Stfs, Stfsu, Stfsx, Stfsux,
        Stfd, Stfdu, Stfdx, Stfdux, Stfiwx, Fmr, Fneg, Fabs, Fnabs, Fcpsgn, Fmrgew, Fmrgow, Mfcr,
        Addi, Ori, Ld, Std, Bc,
    ];
    let facilities = [
        msr::FP | msr::VEC | msr::VSX,
        msr::VEC | msr::VSX,
        msr::FP | msr::VSX,
        msr::FP | msr::VEC,
    ];
    let mut r = Rng(0x005e_ed0f_7ec7_0125);
    for case in 0..2400 {
        let len = 1 + (r.next() % 40) as usize;
        let prog = random_program(&mut r, &pool, len);
        // Mostly everything on; every fourth case one facility off.
        let f = if case % 4 == 3 {
            facilities[1 + (case / 4) % 3]
        } else {
            facilities[0]
        };
        differential(&prog, case % 2 == 1, vector_regs(r.next(), f));
    }
}

/// Vector stores crossing a page, faulting in their second page, and writing into the block
/// that runs them; FP loads and stores at unaligned and page-crossing addresses.
#[test]
fn vector_and_fp_accesses_across_pages_and_into_code() {
    // stxvd2x vs0,r5,r6; stvx v1,r5,r6; lxvd2x vs2,r5,r6; lfd f3,0(r7); stfd f3,3(r7);
    // lfs f4,1(r7); stfs f4,-2(r7); illegal.
    let prog = [
        0x7c05_3798,
        0x7c25_31ce,
        0x7c45_3698,
        0xc867_0000,
        0xd867_0003,
        0xc087_0001,
        0xd087_fffe,
        0,
    ];
    let places = [
        DATA + 0xff8,
        DATA + 0xffc,
        DATA + 0x1ff0,
        RAM as u64 - 8,
        RAM as u64 - 16,
        DATA + 0x2003,
    ];
    for le in [false, true] {
        for &at in &places {
            for &fp_at in &places {
                differential(&prog, le, |c| {
                    vector_regs(at ^ fp_at, msr::FP | msr::VEC | msr::VSX)(c);
                    c.st.gpr[5] = at;
                    c.st.gpr[6] = 0;
                    c.st.gpr[7] = fp_at + 1;
                });
            }
        }
    }
    // stxvd2x vs0,0,r5 over the next instructions of its own block: the stored words run.
    for le in [false, true] {
        let prog = [
            0x7c00_2f98,
            0x3860_0001,
            0x3860_0002,
            0x3860_0003,
            0x3860_0004,
            0,
        ];
        let (_, s) = differential(&prog, le, |c| {
            c.st.gpr[5] = CODE + 4;
            // 0x38600009 (li r3,9) four times: the same words in either byte order.
            let w = 0x3860_0009u64;
            let d = w | w << 32;
            c.st.vsr[0] = (d as u128) << 64 | d as u128;
        });
        assert!(s.contains("r3=0x9 "), "{s}");
    }
}

/// Integer loads and stores of every size at unaligned addresses inside a page (the fast
/// path takes them: the ISA raises no alignment interrupt for plain accesses), across a page
/// boundary, and at the end of RAM (a fault in the second page), in both byte orders.
#[test]
fn integer_accesses_unaligned_and_across_pages() {
    // ld r8,0(r5); std r8,8(r6); lwz r9,1(r5); stw r9,3(r6); lhz r10,3(r5); sth r10,5(r6);
    // ldx r11,r5,r7; stdx r11,r6,r7; lha r12,-1(r5); illegal.
    let prog = [
        0xe905_0000,
        0xf906_0008,
        0x8125_0001,
        0x9126_0003,
        0xa145_0003,
        0xb146_0005,
        0x7d65_382a,
        0x7d66_392a,
        0xa985_ffff,
        0,
    ];
    let places = [
        DATA + 0x3,
        DATA + 0x7f9,
        DATA + 0xffd,
        DATA + 0x1ffa,
        RAM as u64 - 6,
    ];
    for le in [false, true] {
        for &at in &places {
            for &to in &places {
                differential(&prog, le, |c| {
                    c.st.gpr[5] = at;
                    c.st.gpr[6] = to;
                    c.st.gpr[7] = 5;
                });
            }
        }
    }
}

/// Runs of loads and stores off one base register, which the baseline tier gives one TLB
/// test for the bytes they span (integer instructions between them): inside a page, unaligned, across a page
/// (the run's miss path), running into the end of RAM (a fault after the run's first
/// accesses took effect), a load into the base register ending a run, and a run of stores
/// over the next instructions of its own block; both byte orders. (With flat test memory a
/// span that crosses a page is found only at the end of RAM.)
#[test]
fn access_runs_match_the_interpreter() {
    let d = |op: u32, rt: u32, ra: u32, d: i16| op | rt << 21 | ra << 16 | d as u16 as u32;
    // add rt,ra,rb after a run: its sources are the run's copies in host registers.
    let add = |rt: u32, ra: u32, rb: u32| 0x7c00_0214 | rt << 21 | ra << 16 | rb << 11;
    let (std, stw, sth, stb) = (0xf800_0000, 0x9000_0000, 0xb000_0000, 0x9800_0000);
    let (ld, lwa, lwz, lha, lhz, lbz) = (
        0xe800_0000,
        0xe800_0002,
        0x8000_0000,
        0xa800_0000,
        0xa000_0000,
        0x8800_0000,
    );
    // The first accesses fill the TLB for each base's first page, so that the runs after
    // them take their fast path where their span allows it.
    let prog = [
        d(lbz, 0, 5, 0),
        d(stb, 0, 5, 0),
        d(lbz, 0, 6, -16),
        d(stb, 0, 6, -16),
        d(std, 8, 5, 0),
        d(std, 9, 5, 8),
        d(stw, 10, 5, 16),
        d(sth, 11, 5, 20),
        d(stb, 12, 5, 23),
        d(std, 8, 6, -16),
        d(stw, 9, 6, -4),
        d(ld, 20, 5, 0),
        d(lwa, 21, 5, 16),
        d(lha, 22, 5, 20),
        d(lbz, 23, 5, 23),
        d(lwz, 24, 5, 4),
        add(29, 20, 24),
        d(lhz, 25, 6, -14),
        d(ld, 26, 6, -8),
        d(ld, 6, 6, -16),
        d(ld, 27, 6, 0),
        d(lwz, 28, 6, 8),
        add(30, 25, 28),
        // Loads and stores mixed, integer instructions between them.
        d(ld, 14, 7, 0),
        d(0x3800_0000, 14, 14, 1), // addi r14,r14,1
        d(std, 14, 7, 0),
        0x55cf_1838, // rlwinm r15,r14,3,0,28
        d(stw, 15, 7, 12),
        add(18, 14, 15),
        d(lwz, 16, 7, 12),
        add(17, 16, 18),
        // Compares in a run, their operands loaded again after them, and branches on their
        // fields after the run.
        0x7cae_7800, // cmpd cr1,r14,r15
        d(ld, 14, 7, 8),
        0x2d10_0005, // cmpwi cr2,r16,5
        d(lwz, 16, 7, 16),
        0x4185_0008,             // bgt cr1,+8
        0x3860_0001,             // li r3,1
        0x418a_0008,             // beq cr2,+8
        0x3880_0001,             // li r4,1
        d(0x3800_0000, 7, 7, 4), // addi r7,r7,4: the base moves, the run ends
        d(ld, 19, 7, 0),
        0,
    ];
    let firsts = [
        DATA,
        DATA + 0x7,
        DATA + 0xff0,
        DATA + 0x1ffb,
        RAM as u64 - 16,
    ];
    let seconds = [DATA + 0x3008, DATA + 0x4000, DATA + 0x4fff, RAM as u64 + 8];
    for le in [false, true] {
        for &at in &firsts {
            for &at2 in &seconds {
                differential(&prog, le, |c| {
                    c.st.gpr[5] = at;
                    c.st.gpr[6] = at2;
                    c.st.gpr[7] = at + 0x100;
                    c.st.gpr[8] = DATA + 0x123;
                    c.st.gpr[9] = 0x8899_aabb_ccdd_eeff;
                    c.st.gpr[10] = 0x1234_8765_4321;
                    c.st.gpr[11] = 0xfedc_ba98_7654_3210;
                    c.st.gpr[12] = 0x55aa;
                });
            }
        }
    }
    // A compare in a run whose operand the run loads again after it: a branch on its field
    // after the run reads the field, not the compare done again on the new value.
    for le in [false, true] {
        let prog = [
            d(lwz, 16, 5, 0),
            0x2d10_0005, // cmpwi cr2,r16,5
            d(lwz, 16, 5, 4),
            0x3a52_0001, // addi r18,r18,1
            0x418a_0008, // beq cr2,+8
            0x3860_0001, // li r3,1
            add(17, 16, 16),
            0,
        ];
        let (_, s) = differential(&prog, le, |c| {
            (c.st.gpr[3], c.st.gpr[5]) = (0, DATA);
            c.mmu.store(&c.st, DATA, 4, 5, le).unwrap();
            c.mmu.store(&c.st, DATA + 4, 4, 7, le).unwrap();
        });
        assert!(s.contains("r3=0x0 ") && s.contains("r17=0xe "), "{s}");
    }
    // The same with indexed accesses between a compare and its branch: a store (the branch
    // compares again from the copies) and a load into the compared register (it must not:
    // the register, named after the branch, has a copy there).
    for le in [false, true] {
        let prog = [
            d(lwz, 16, 5, 0),
            0x2d10_0005, // cmpwi cr2,r16,5
            0x7e45_312e, // stwx r18,r5,r6
            0x418a_0008, // beq cr2,+8
            0x3860_0001, // li r3,1
            0x7e05_302e, // lwzx r16,r5,r6
            0x2d90_0005, // cmpwi cr3,r16,5
            0x7e05_382e, // lwzx r16,r5,r7
            0x418e_0008, // beq cr3,+8
            0x3880_0001, // li r4,1
            add(17, 16, 16),
            0,
        ];
        let (_, s) = differential(&prog, le, |c| {
            (c.st.gpr[3], c.st.gpr[4], c.st.gpr[7]) = (0, 0, 4);
            (c.st.gpr[5], c.st.gpr[6], c.st.gpr[18]) = (DATA, 8, 5);
            c.mmu.store(&c.st, DATA, 4, 5, le).unwrap();
            c.mmu.store(&c.st, DATA + 4, 4, 7, le).unwrap();
        });
        // r16 = 5 at the first compare: taken, r3 stays 0. The word at DATA + 8 is 5 (the
        // stwx's) at the second, and r16 = 7 after the load: the branch still sees EQ.
        assert!(
            s.contains("r3=0x0 ") && s.contains("r4=0x0 ") && s.contains("r17=0xe "),
            "{s}"
        );
    }
    // stw r8,0(r5); stw r8,4(r5) over the two instructions after them: li r3,9 runs.
    for le in [false, true] {
        let prog = [
            d(stw, 8, 5, 0),
            d(stw, 8, 5, 4),
            0x3860_0001,
            0x3860_0002,
            0,
        ];
        let (_, s) = differential(&prog, le, |c| {
            c.st.gpr[5] = CODE + 8;
            c.st.gpr[8] = 0x3860_0009;
        });
        assert!(s.contains("r3=0x9 "), "{s}");
    }
    // lbz r0,0(r6) reads the block's page (its read entry), then lwz r9,0(r5); stw r8,0(r5)
    // over the instruction after them: a page with a read entry and no write entry.
    for le in [false, true] {
        let prog = [
            d(lbz, 0, 6, 0),
            d(lwz, 9, 5, 0),
            d(stw, 8, 5, 0),
            0x3860_0001,
            0,
        ];
        let (_, s) = differential(&prog, le, |c| {
            (c.st.gpr[5], c.st.gpr[6]) = (CODE + 12, CODE);
            c.st.gpr[8] = 0x3860_0009;
        });
        assert!(s.contains("r3=0x9 "), "{s}");
    }
}

/// A loop whose body has forward conditional branches (side exits: the block goes on past
/// them when they are not taken) with registers used on both sides of them, a CR field other
/// than CR0, a CTR-decrementing side exit, and a load after them that faults in some runs:
/// every path out of the middle of a block and every fault after a side exit not taken must
/// leave what the interpreter leaves.
#[test]
fn side_exits_match_the_interpreter() {
    for (stride, start) in [
        (0x398c_0008, 0), // addi r12,r12,8: no fault, the loop ends by `bdz`
        (0x3d8c_0001, 0), // addis r12,r12,1: the load leaves RAM in iteration 12
        (0x398c_0008, RAM as u64 - DATA - 40), // a fault in iteration 6
    ] {
        let prog = [
            0x3860_0000, // li r3,0
            0x3880_0028, // li r4,40
            0x7c89_03a6, // mtctr r4
            0x38a5_0001, // loop: addi r5,r5,1
            0x70a6_0001, // andi. r6,r5,1
            0x4182_000c, // beq +12 (odd r5 falls through)
            0x7c63_2a14, // add r3,r3,r5
            0x38e7_0003, // addi r7,r7,3
            0x2f05_0007, // cmpwi cr6,r5,7
            0x4199_0008, // bgt cr6,+8
            0x7c63_1a14, // add r3,r3,r3
            0x7d4b_602a, // ldx r10,r11,r12
            0x7c63_5214, // add r3,r3,r10
            stride,
            0x4240_0008, // bdz +8
            0x4bff_ffd0, // b loop
            0,
        ];
        for le in [false, true] {
            for threshold in [0, 3] {
                let (e, s) = differential_tiered(
                    &prog,
                    le,
                    |c| {
                        (c.st.gpr[5], c.st.gpr[7]) = (0, 0);
                        (c.st.gpr[11], c.st.gpr[12]) = (DATA, start);
                        for k in 0..64 {
                            c.mmu
                                .store(&c.st, DATA + 8 * k, 8, k * 0x101, true)
                                .unwrap();
                        }
                    },
                    threshold,
                );
                let faults = stride != 0x398c_0008 || start != 0;
                assert_eq!(
                    matches!(e, Some(Exception::Dsi { .. })),
                    faults,
                    "{e:?} {s}"
                );
            }
        }
    }
}

/// A compare or a recording instruction and right after it a conditional branch on its field:
/// each compare (word and doubleword, signed and logical, register and immediate), operands
/// that order differently signed and unsigned or as words and doublewords, every CR bit
/// (SO from XER), both senses, with and without a CTR decrement and LK, and the three branch
/// forms. The baseline tier branches on the host's flags of the compare there.
#[test]
fn compares_then_branches_match_the_interpreter() {
    let x = |bf: u32, l: u32, ra: u32, rb: u32, xo: u32| {
        0x7c00_0000 | bf << 23 | l << 21 | ra << 16 | rb << 11 | xo << 1
    };
    let d = |op: u32, bf: u32, l: u32, ra: u32, imm: i16| {
        op | bf << 23 | l << 21 | ra << 16 | imm as u16 as u32
    };
    const VALUES: [(u64, u64); 7] = [
        (5, 5),
        (3, 9),
        (9, 3),
        (u64::MAX, 1),
        (1, u64::MAX),
        (0x1_0000_0000, 1),
        (0x8000_0000, 0x7fff_ffff),
    ];
    // Every compare form, operand pair, bit and sense with the operands read (so held in
    // host copies) between the compare and the branch: the branch compares again.
    for (k, &(a, b)) in VALUES.iter().enumerate() {
        for (form, l) in (0..4).flat_map(|form| [(form, 0), (form, 1)]) {
            for (bit, sense) in (0..3).flat_map(|bit| [(bit, 4), (bit, 12)]) {
                let compare = match form {
                    0 => x(6, l, 6, 7, 0),            // cmp
                    1 => x(6, l, 6, 7, 32),           // cmpl
                    2 => d(0x2c00_0000, 6, l, 6, 5),  // cmpi
                    _ => d(0x2800_0000, 6, l, 6, -1), // cmpli
                };
                let prog = [
                    compare,
                    0x90c1_000c,                                  // stw r6,12(r1)
                    0x90e1_0010,                                  // stw r7,16(r1)
                    0x7e86_3a14,                                  // add r20,r6,r7
                    0x4000_0008 | sense << 21 | (24 + bit) << 16, // bc sense,cr6[bit],+8
                    0x3860_0001,
                    0x3880_0001,
                    0,
                ];
                differential(&prog, k % 2 == 1, |c| {
                    c.st.gpr[1] = DATA;
                    (c.st.gpr[6], c.st.gpr[7]) = (a, b);
                });
            }
        }
    }
    let mut r = Rng(0x00c0_ffee_cafe);
    let mut taken = [0u32; 2];
    for case in 0..1200 {
        let bf = [0, 6][r.next() as usize % 2];
        let l = r.next() as u32 % 2;
        let (compare, field) = match r.next() % 6 {
            0 => (x(bf, l, 6, 7, 0), bf),            // cmp
            1 => (x(bf, l, 6, 7, 32), bf),           // cmpl
            2 => (d(0x2c00_0000, bf, l, 6, 5), bf),  // cmpi r6,5
            3 => (d(0x2800_0000, bf, l, 6, -1), bf), // cmpli r6,0xffff
            4 => (0x7cc5_3839, 0),                   // and. r5,r6,r7
            _ => (0x70c5_00ff, 0),                   // andi. r5,r6,0xff
        };
        // Mostly the field just set; sometimes another, tested in the CR home.
        let bi = if r.next().is_multiple_of(8) {
            4 * (7 - field)
        } else {
            4 * field
        } + r.next() as u32 % 4;
        let bo = [12, 4, 8, 0, 10, 2, 20][r.next() as usize % 7];
        let lk = r.next() as u32 % 2;
        let (branch, to) = match r.next() % 3 {
            0 => (0x4000_0008 | bo << 21 | bi << 16 | lk, None), // bc +8
            1 => (0x4c00_0020 | bo << 21 | bi << 16 | lk, Some(0)), // bclr
            _ => (0x4c00_0420 | (bo | 4) << 21 | bi << 16 | lk, Some(1)), // bcctr
        };
        // Between them (the tier then compares again at the branch when the operands, in
        // host copies, and the field are unchanged): nothing, or up to three of: reads of
        // the compared registers, an unrelated write, a write of a compared register, a load
        // into one, an unrelated load, a store, a field set another way, a recording
        // instruction, a no-op.
        const BETWEEN: [u32; 14] = [
            0x7e86_3a14, // add r20,r6,r7: reads both (read twice, they get host copies)
            0x7e86_3a14,
            0x7e86_3a14,
            0x90c1_000c, // stw r6,12(r1)
            0x90c1_000c,
            0x3a94_0001, // addi r20,r20,1
            0x38c6_0001, // addi r6,r6,1
            0x80e1_0000, // lwz r7,0(r1)
            0x8281_0004, // lwz r20,4(r1)
            0x9281_0008, // stw r20,8(r1)
            0x4f39_ca42, // crset 25 (cr6 gt)
            0x4c42_1182, // crxor 2,2,2 (cr0 eq)
            0x7e95_b215, // add. r20,r21,r22
            0x6000_0000, // nop
        ];
        let between: Vec<u32> = (0..r.next() % 5)
            .map(|_| BETWEEN[r.next() as usize % BETWEEN.len()])
            .collect();
        let mut prog = vec![compare];
        prog.extend(&between);
        prog.extend([branch, 0x3860_0001, 0x3880_0001, 0]);
        let landing = CODE + 4 * (prog.len() as u64 - 2);
        let (a, b) = VALUES[r.next() as usize % VALUES.len()];
        let so = r.next().is_multiple_of(4);
        let (_, s) = differential(&prog, case % 2 == 1, |c| {
            c.st.gpr[1] = DATA;
            (c.st.gpr[6], c.st.gpr[7]) = (a, b);
            c.st.set_xer(if so { 0x8000_0000 } else { 0 });
            c.st.ctr = if to == Some(1) { landing } else { 1 + case % 2 };
            c.st.lr = landing;
        });
        taken[s.contains("r3=0x1 ") as usize] += 1;
    }
    // Both ways, many times.
    assert!(taken[0] > 300 && taken[1] > 300, "{taken:?}");
}

/// Chains of integer instructions on a few registers, so that most results are overwritten
/// by the next instruction (the baseline tier keeps them in host copies only), with
/// no-op immediates (which write nothing), moves, loads, stores, compares and forward
/// branches between them, and more registers live than the tier has host copies.
#[test]
fn results_overwritten_next_match_the_interpreter() {
    use Op::*;
    let pool = [
        Addi, Addi, Addis, Add, Subf, Neg, Mulli, Mulld, Mullw, And, Or, Or, Xor, Nand, Nor, Andc,
        Orc, Eqv, Ori, Ori, Oris, Xori, Xoris, AndiDot, AndisDot, Extsb, Extsh, Extsw, Rlwinm,
        Rlwinm, Rldicl, Rldicr, Rldic, Slw, Srw, Sld, Srd, Mulhd, Cntlzd, Rlwimi, Cmp, Cmpi, Bc,
        Lwz, Ld, Stw, Std, Mftb,
    ];
    let mut r = Rng(0x5eed_0fd0_570e);
    for case in 0..1500 {
        let len = 1 + (r.next() % 50) as usize;
        let mut prog = random_program(&mut r, &pool, len);
        // Registers from r9..r16 (r1-r7 stay the data bases of `init_regs`), often the same
        // in both fields so that an instruction reads what the one before it wrote.
        for w in prog.iter_mut() {
            let op = ppc64emu::isa::decode(*w);
            let mem = op.info().flags.contains(InsnFlags::LOAD)
                || op.info().flags.contains(InsnFlags::STORE);
            if op == Bc || op == Illegal {
                continue;
            }
            let a = 9 + r.next() as u32 % 8;
            let b = if r.next().is_multiple_of(2) {
                a
            } else {
                9 + r.next() as u32 % 8
            };
            let c = 9 + r.next() as u32 % 8;
            *w &= !(0x1f << 21);
            *w |= a << 21;
            if !mem {
                *w = (*w & !(0x1f << 16)) | b << 16;
                if op.info().operands.contains(&ppc64emu::isa::Operand::Rb) {
                    *w = (*w & !(0x1f << 11)) | c << 11;
                }
            }
            // Some no-op immediates: `ori rX,rX,0`.
            if op == Ori && r.next().is_multiple_of(3) {
                *w = 0x6000_0000 | a << 21 | a << 16;
            }
        }
        differential(&prog, case % 2 == 1, init_regs(r.next()));
    }
}

/// Results kept in their host copies only (the baseline tier's write-back across integer
/// instructions, loads and stores): chains on eight registers (more than the tier has
/// copies, so dirty copies are evicted), loads and stores of them (a load's first run takes
/// its TLB miss path with dirty copies, which it stores home before the refill), and in
/// about half the programs an access off a base outside RAM, whose fault must see every
/// earlier result at its home.
#[test]
fn dirty_copies_match_the_interpreter() {
    use Op::*;
    let pool = [
        Addi, Add, Subf, Neg, Mulli, Mulld, Mulhd, And, Or, Xor, Nor, Rlwinm, Rldicl, Extsw,
        Cntlzd, Popcntd, Cmpb, Cmp, Cmpi, Lwz, Ld, Lbzx, Ldx, Lwzu, Stw, Std, Stbx, Stdu,
    ];
    // A base past the end of RAM.
    const OUTSIDE: u32 = 17;
    let mut r = Rng(0xd1e7_c0de_5eed);
    let mut faulted = 0;
    for case in 0..1200 {
        let len = 4 + (r.next() % 40) as usize;
        let mut prog = random_program(&mut r, &pool, len);
        let fault_at = (case % 2 == 0).then(|| r.next() as usize % len);
        for (k, w) in prog.iter_mut().enumerate().take(len) {
            let op = ppc64emu::isa::decode(*w);
            let mem = op.info().flags.contains(InsnFlags::LOAD)
                || op.info().flags.contains(InsnFlags::STORE);
            let field = |r: &mut Rng| 9 + r.next() as u32 % 8;
            *w = (*w & !(0x1f << 21)) | field(&mut r) << 21;
            if !mem {
                *w = (*w & !(0x1f << 16)) | field(&mut r) << 16;
                if op.info().operands.contains(&ppc64emu::isa::Operand::Rb) {
                    *w = (*w & !(0x1f << 11)) | field(&mut r) << 11;
                }
            } else if fault_at.is_some_and(|f| k >= f) {
                *w = (*w & !(0x1f << 16)) | OUTSIDE << 16;
            }
        }
        let seed = r.next();
        let (e, _) = differential(&prog, case % 4 < 2, |c| {
            init_regs(seed)(c);
            c.st.gpr[OUTSIDE as usize] = RAM as u64 + 0x10_0000;
        });
        faulted += matches!(e, Some(Exception::Dsi { .. })) as u32;
    }
    // Most programs with an access off the outside base fault there.
    assert!(faulted > 300, "{faulted} faults");
}

/// Blocks that branch back to their own start (the baseline tier loads the copies of the
/// registers the loop names most once, at the loop's head, and its branch back moves the
/// copies there and jumps to the head): random bodies on eight registers (more than the
/// tier has copies, so at the branch back some sit in other host registers than at the head
/// or only at their homes), loads and stores, forward branches, iterations counted down in
/// r17 or by `bdnz` (CTR kept in a host register when nothing else in the loop touches it),
/// and in a third of the programs a load that leaves RAM in some iteration. Then a loop
/// that never ends stops when the budget runs out, as it would through the block's entry.
#[test]
fn loop_blocks_match_the_interpreter() {
    use Op::*;
    let pool = [
        Addi, Add, Subf, Mulli, And, Or, Xor, Nor, Rlwinm, Rldicl, Extsw, Cmp, Cmpi, Lwz, Ld, Lbzx,
        Stw, Std, Stbx, Bc,
    ];
    let mut r = Rng(0x100b_b10c_5eed);
    let mut faulted = 0;
    for case in 0..600 {
        let len = 1 + (r.next() % 24) as usize;
        let mut body = random_program(&mut r, &pool, len);
        body.pop();
        for w in body.iter_mut() {
            let op = ppc64emu::isa::decode(*w);
            if op == Bc {
                continue;
            }
            let mem = op.info().flags.contains(InsnFlags::LOAD)
                || op.info().flags.contains(InsnFlags::STORE);
            let field = |r: &mut Rng| 9 + r.next() as u32 % 8;
            *w = (*w & !(0x1f << 21)) | field(&mut r) << 21;
            if !mem {
                *w = (*w & !(0x1f << 16)) | field(&mut r) << 16;
                if op.info().operands.contains(&ppc64emu::isa::Operand::Rb) {
                    *w = (*w & !(0x1f << 11)) | field(&mut r) << 11;
                }
            }
        }
        let fault = case % 3 == 0;
        if fault {
            // addi r18,r18,8; ld r9,0(r18)
            body.extend([0x3a52_0008, 0xe932_0000]);
        }
        let iterations = 1 + r.next() % 30;
        let n = body.len() as u32;
        let mut prog = vec![0x3a20_0000 | iterations as u32]; // li r17,iterations
        if case % 4 < 2 {
            // Counted by CTR: mtctr r17; the body; bdnz to the body's start.
            prog.push(0x7e29_03a6);
            prog.extend(&body);
            prog.extend([0x4200_0000 | (-4 * n as i32) as u32 & 0xfffc, 0]);
        } else {
            prog.extend(&body);
            prog.extend([
                0x3a31_ffff,                                         // addi r17,r17,-1
                0x2c31_0000,                                         // cmpdi r17,0
                0x4082_0000 | (-4 * (n as i32 + 2)) as u32 & 0xfffc, // bne to the body's start
                0,
            ]);
        }
        let seed = r.next();
        let left = 1 + r.next() % 40;
        let (e, _) = differential(&prog, case % 2 == 1, |c| {
            init_regs(seed)(c);
            c.st.gpr[18] = RAM as u64 - 8 * left;
        });
        faulted += matches!(e, Some(Exception::Dsi { .. })) as u32;
    }
    assert!(faulted > 50, "{faulted} faults");

    // li r3,0; loop: addi r3,r3,1; addi r4,r4,3; cmpd r3,r5; bne loop (ten million times)
    let words = [
        0x3860_0000,
        0x3863_0001,
        0x3884_0003,
        0x7c23_2800,
        0x4082_fff4,
        0,
    ];
    let mut c = cpu(true);
    put_code(&mut c, CODE, &words);
    c.st.pc = CODE;
    c.st.gpr[5] = 10_000_000;
    let mut jit = Jit::attach(&mut c, JitShared::new());
    let (tiers, promote) = TIERS.get();
    jit.set_tiers(tiers, Some(0));
    jit.promote_threshold = promote;
    for round in 1..=3u64 {
        run(&mut jit, &mut c, 1000, &|_| false).unwrap();
        // Each run may end up to a block's length past its budget.
        let n = c.counters.instructions;
        assert!(n <= 1004 * round, "round {round}: {n} instructions");
        assert_eq!(c.st.gpr[3], (n - 1) / 4, "{n}");
    }
}

/// A compare right before a side exit on its field: the baseline tier leaves the field in
/// the host flags, stores it on the taken way, and on the way on unless a compare sets the
/// field again before anything could read it (only integer instructions between). Here the
/// way on has a load between (which faults when r10 is outside RAM: the field must be at
/// its home then) or only integer instructions, both senses, both outcomes.
#[test]
fn compare_fields_left_in_flags_at_side_exits() {
    let between_load = [
        0x3860_0000, // li r3,0
        0x2c04_0005, // cmpwi r4,5
        0x4182_0008, // beq +8
        0x3860_0001, // li r3,1
        0xe92a_0000, // ld r9,0(r10)
        0x2c04_0007, // cmpwi r4,7
        0,
    ];
    let between_integer = [
        0x3860_0000, // li r3,0
        0x2f84_0005, // cmpwi cr7,r4,5
        0x409e_0008, // bne cr7,+8
        0x3860_0001, // li r3,1
        0x38a5_0001, // addi r5,r5,1
        0x2f84_0007, // cmpwi cr7,r4,7
        0x419d_0008, // bgt cr7,+8
        0x3860_0002, // li r3,2
        0,
    ];
    let mut faults = 0;
    for prog in [&between_load[..], &between_integer[..]] {
        for le in [false, true] {
            for (r4, r10) in [
                (5, DATA),
                (6, DATA),
                (5, RAM as u64 + 8),
                (6, RAM as u64 + 8),
                (8, DATA),
            ] {
                let (e, _) = differential(prog, le, |c| {
                    c.st.set_cr(0x1234_5678);
                    (c.st.gpr[4], c.st.gpr[10]) = (r4, r10);
                });
                faults += matches!(e, Some(Exception::Dsi { .. })) as u32;
            }
        }
    }
    assert_eq!(faults, 4);
}

/// Side exits whose target is a later instruction of their own block (the baseline tier
/// jumps there inside the block, the copies moved to those the first jump left): two jumps
/// into one instruction and the fall-through with other dirty copies, a join inside what
/// would be a run of loads, a join that is itself a side exit on a field a compare right
/// before left in the flags, in a block that loops to its start. Three starts of r11: no
/// fault, a load leaving RAM in iteration 6 (after a join and before one), and outside RAM
/// from the first load on. Then jumps with a field in the flags to code that sets the field
/// first and to code that reads it.
#[test]
fn side_exits_into_their_own_block_match_the_interpreter() {
    let prog = [
        0x3860_0000, // li r3,0
        0x3880_0031, // li r4,49: the last iteration jumps at `beq j17`
        0x7c89_03a6, // mtctr r4
        0x38a5_0001, // loop: addi r5,r5,1
        0x70a6_0003, // andi. r6,r5,3
        0x4182_0030, // beq j17
        0x7c63_2a14, // add r3,r3,r5
        0x2c85_0014, // cmpwi cr1,r5,20
        0x4185_000c, // bgt cr1,j11
        0xe94b_0000, // ld r10,0(r11)
        0xe98b_0008, // ld r12,8(r11)
        0x7c63_5214, // j11: add r3,r3,r10
        0xe92b_0010, // ld r9,16(r11)
        0x70a7_0002, // andi. r7,r5,2
        0x4182_000c, // beq j17
        0x7d29_3a78, // xor r9,r9,r7
        0x7f29_1800, // cmpd cr6,r9,r3
        0x4198_0008, // j17: blt cr6,j19
        0x7c63_4a78, // xor r3,r3,r9
        0x396b_0008, // j19: addi r11,r11,8
        0x7d08_1a14, // add r8,r8,r3
        0x4240_0008, // bdz out
        0x4bff_ffb4, // b loop
        0,           // out
    ];
    let faults = from_r11_starts(
        &prog,
        |c, start| {
            c.st.set_cr(0x8421_8421);
            (c.st.gpr[5], c.st.gpr[8], c.st.gpr[11]) = (0, 7, start);
            for k in 0..64 {
                c.mmu
                    .store(&c.st, DATA + 8 * k, 8, (k * 0x3355) ^ 0x80, true)
                    .unwrap();
            }
        },
        |e, s| assert!(e.is_some(), "{s}"),
    );
    assert_eq!(faults, 8);
    // The field a compare left in the flags, at a jump to code that sets it first (not
    // stored on the jump) and to code that reads it (`mfcr`: stored).
    let fields = [
        0x3880_001e, // li r4,30
        0x7c89_03a6, // mtctr r4
        0x38a5_0001, // loop: addi r5,r5,1
        0x2c05_000c, // cmpwi r5,12
        0x4182_0008, // beq j1
        0x3863_0001, // addi r3,r3,1
        0x2c03_0005, // j1: cmpwi r3,5
        0x4180_0008, // blt j2
        0x38c6_0001, // addi r6,r6,1
        0x70a7_0003, // j2: andi. r7,r5,3
        0x4082_0008, // bne j3
        0x3908_0002, // addi r8,r8,2
        0x7d20_0026, // j3: mfcr r9
        0x7d4a_4a14, // add r10,r10,r9
        0x4200_ffd0, // bdnz loop
        0,
    ];
    for le in [false, true] {
        for threshold in [0, 3] {
            let (e, s) = differential_tiered(&fields, le, |c| c.st.set_cr(0x2468_ace1), threshold);
            assert!(matches!(e, Some(Exception::Program(_))), "{e:?} {s}");
        }
    }
}

/// Jumps ahead (`b` without LK to a later word within the block's reach): the block goes on
/// past them, the baseline tier jumps to the target's code inside the block and translates
/// the words between only from a side exit into them. An if/else in a loop block (the else
/// part reached by a side exit, its join by the `b` and by a second side exit, a load on the
/// `then` way), and a jump whose target lies past a block that ends early (at `twi`, which
/// never traps with TO = 0). The three starts of r11 as in the test above.
#[test]
fn jumps_ahead_match_the_interpreter() {
    let prog = [
        0x3860_0000, // li r3,0
        0x3880_0028, // li r4,40
        0x7c89_03a6, // mtctr r4
        0x38a5_0001, // loop: addi r5,r5,1
        0x70a6_0001, // andi. r6,r5,1
        0x4082_0010, // bne odd
        0x7c63_2a14, // add r3,r3,r5
        0xe94b_0000, // ld r10,0(r11)
        0x4800_0014, // b join
        0x7c65_1850, // odd: subf r3,r5,r3
        0x2c05_0009, // cmpwi r5,9
        0x4181_0008, // bgt join
        0x7c63_2a78, // xor r3,r3,r5
        0x396b_0008, // join: addi r11,r11,8
        0x7d08_1a14, // add r8,r8,r3
        0x4240_0008, // bdz out
        0x4bff_ffcc, // b loop
        0x3920_0001, // out: li r9,1
        0x4800_000c, // b skip
        0x0c00_0000, // twi 0,r0,0
        0x3929_0005, // addi r9,r9,5
        0x3929_0007, // skip: addi r9,r9,7
        0,
    ];
    let faults = from_r11_starts(
        &prog,
        |c, start| {
            (c.st.gpr[5], c.st.gpr[8], c.st.gpr[11]) = (0, 3, start);
            for k in 0..64 {
                c.mmu.store(&c.st, DATA + 8 * k, 8, k * 77, true).unwrap();
            }
        },
        |e, s| {
            if !matches!(e, Some(Exception::Dsi { .. })) {
                assert!(s.contains("r9=0x8 "), "{e:?} {s}");
            }
        },
    );
    assert_eq!(faults, 8);
}

/// Words after a branch that never falls through (`blr`, `bctr`, a `b` back), reached by side
/// exits over it: the block goes on past it (`DecodedBlock::fetch`), and the baseline tier
/// translates them from the joins. A loop calls `f`, whose `if (…) { …; return; }` ways
/// are all one block: a return by `blr`, one through CTR, one by a `b` back to a shared
/// tail. Also in 32-bit mode, where every instruction runs in the interpreter and each
/// branch that never falls through leaves the block from the middle. The three starts of
/// r11 as in the tests above.
#[test]
fn words_after_a_branch_that_never_falls_through_match_the_interpreter() {
    let prog = [
        0x3a80_0028, // li r20,40
        0x3860_0000, // li r3,0
        0xe94b_0000, // loop: ld r10,0(r11)
        0x7d44_5378, // mr r4,r10
        0x4800_0021, // bl f
        0x7c63_2a14, // add r3,r3,r5
        0x396b_0008, // addi r11,r11,8
        0x3694_ffff, // addic. r20,r20,-1
        0x4082_ffe8, // bne loop
        0x4800_004c, // b out
        0x7ca5_2214, // f_back: add r5,r5,r4
        0x4e80_0020, // blr
        0x7086_0003, // f: andi. r6,r4,3
        0x4182_000c, // beq f_eq
        0x38a4_0001, // addi r5,r4,1
        0x4e80_0020, // blr
        0x7087_0004, // f_eq: andi. r7,r4,4
        0x4082_0014, // bne f_ne
        0x38a0_0007, // li r5,7
        0x7d08_02a6, // mflr r8
        0x7d09_03a6, // mtctr r8
        0x4e80_0420, // bctr
        0x2c24_0000, // f_ne: cmpdi r4,0
        0x4181_000c, // bgt f_pos
        0x38a0_fffd, // li r5,-3
        0x4bff_ffc4, // b f_back
        0x38a0_0009, // f_pos: li r5,9
        0x4e80_0020, // blr
        0,           // out
    ];
    for wide in [true, false] {
        let faults = from_r11_starts(
            &prog,
            |c, start| {
                if !wide {
                    c.st.msr &= !msr::SF;
                }
                c.st.gpr[11] = start;
                for k in 0..64u64 {
                    let v = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k;
                    c.mmu.store(&c.st, DATA + 8 * k, 8, v, true).unwrap();
                }
            },
            |e, s| assert!(e.is_some(), "{s}"),
        );
        // The loads leave RAM in the middle start's ninth iteration and at once from the
        // last: two starts in two byte orders at two thresholds.
        assert_eq!(faults, 8, "wide={wide}");
    }
}

/// Runs `prog` against the interpreter from three starts of r11 (in RAM; 64 bytes below its
/// end, so that a load leaves it after a few iterations; at its end, so that the first load
/// faults), in both byte orders, translated at once and after three runs; `init` sets up
/// each CPU for a start, `check` sees each run's exception and state. Returns how many runs
/// ended in a DSI.
fn from_r11_starts(
    prog: &[u32],
    init: impl Fn(&mut Cpu, u64),
    check: impl Fn(&Option<Exception>, &str),
) -> u32 {
    let mut faults = 0;
    for start in [DATA, RAM as u64 - 8 * 8, RAM as u64] {
        for le in [false, true] {
            for threshold in [0, 3] {
                let (e, s) = differential_tiered(prog, le, |c| init(c, start), threshold);
                check(&e, &s);
                faults += matches!(e, Some(Exception::Dsi { .. })) as u32;
            }
        }
    }
    faults
}

/// The machine-wide flush of several vCPUs (`Jit::flush_all`, run by the machine in an
/// exclusive section when a module passes the limit or a flush is requested): two JITs on
/// one shared state, run in turn as two vCPUs would be; each flush replaces the flusher's
/// module at once and the other's at its next run, and both keep computing what the
/// interpreter computes.
#[test]
fn machine_wide_flush_replaces_every_module() {
    let mut reference = counted_loop_cpu(true);
    let e = run_interp(&mut reference);
    assert!(matches!(e, Some(Exception::Program(_))));
    let want = state(&mut reference);

    let shared = JitShared::new();
    let (mut a, mut b) = (counted_loop_cpu(true), counted_loop_cpu(true));
    let mut ja = Jit::attach(&mut a, shared.clone());
    let mut jb = Jit::attach(&mut b, shared.clone());
    for j in [&mut ja, &mut jb] {
        j.threshold = 0;
        j.self_flush = false;
        // Smaller than one block: full after every translation.
        j.cache_limit = 16;
    }
    let mut flushes = 0;
    let mut done = [false; 2];
    while done != [true, true] {
        for (k, (c, j)) in [(&mut a, &mut ja), (&mut b, &mut jb)]
            .into_iter()
            .enumerate()
        {
            if done[k] {
                continue;
            }
            match run(j, c, 7, &|_| false) {
                Ok(()) => {}
                Err(Exception::Program(_)) => done[k] = true,
                Err(e) => panic!("{e:?}"),
            }
            c.events = 0;
            if j.wants_flush() && j.claim_flush() {
                assert!(!j.claim_flush(), "one claim per flush");
                j.flush_all();
                flushes += 1;
            }
        }
    }
    assert!(flushes > 10, "{flushes} flushes");
    assert_eq!(state(&mut a), want);
    assert_eq!(state(&mut b), want);
    // Each JIT counts every flush it has seen: its own at once, the other's at its next run.
    assert!(ja.counters.cache_flushes > 0 && jb.counters.cache_flushes > 0);
    assert!(ja.counters.cache_flushes + jb.counters.cache_flushes >= flushes);

    // A requested flush: every JIT wants it until one has run it.
    let before = jb.counters.cache_flushes;
    shared.request_flush();
    assert!(ja.wants_flush() && jb.wants_flush());
    assert!(ja.claim_flush());
    ja.flush_all();
    jb.cache_limit = u64::MAX;
    assert!(!jb.wants_flush());
    // jb takes the new epoch at its next run (a block that faults at once suffices).
    b.st.pc = CODE + 4 * 8;
    assert!(matches!(
        run(&mut jb, &mut b, 1, &|_| false),
        Err(Exception::Program(_))
    ));
    assert_eq!(jb.counters.cache_flushes, before + 1);
}

/// The baseline tier's twins of the tests above: the baseline tier alone at threshold 0, and
/// both tiers with blocks promoted to Cranelift after a few baseline runs.
#[cfg(target_arch = "x86_64")]
mod baseline {
    use super::*;

    macro_rules! twins {
        ($($name:ident: $tiers:expr, $promote:expr, $test:ident;)*) => {$(
            #[test]
            fn $name() {
                with_tiers($tiers, $promote, $test);
            }
        )*};
    }

    twins! {
        random_streams_in_both_byte_orders: Tiers::BASELINE, 0, random_streams_match_the_interpreter_in_both_byte_orders;
        native_families: Tiers::BASELINE, 0, native_families_match_the_interpreter;
        loop_with_memory_baseline: Tiers::BASELINE, 0, loop_with_memory;
        moves_to_lr_and_ctr_then_branches: Tiers::BASELINE, 0, moves_to_lr_and_ctr_then_branches_through_them;
        nops_and_register_moves: Tiers::BASELINE, 0, nops_and_register_moves_match_the_interpreter;
        loop_promoted_mid_run: Tiers::BOTH, 5, loop_changes_tier_mid_run;
        random_streams_promoted: Tiers::BOTH, 2, random_streams_match_with_tiering;
        store_into_own_block: Tiers::BASELINE, 0, store_into_own_block_takes_effect;
        self_modifying_code: Tiers::BASELINE, 0, self_modifying_code_across_blocks;
        self_modifying_code_promoted: Tiers::BOTH, 1, self_modifying_code_across_blocks;
        divides_cr_fields_sprs_dcbz_byte_lanes: Tiers::BASELINE, 0, divides_cr_fields_sprs_dcbz_and_byte_lanes_match_the_interpreter;
        barriers_traps_reservations_sprs: Tiers::BASELINE, 0, barriers_traps_reservations_and_sprs_match_the_interpreter;
        divides: Tiers::BASELINE, 0, divide_edge_cases;
        shifts_right_algebraic: Tiers::BASELINE, 0, shift_right_algebraic_edge_cases;
        vector_and_fp: Tiers::BASELINE, 0, vector_and_fp_register_file_instructions_match_the_interpreter;
        vector_and_fp_across_pages: Tiers::BASELINE, 0, vector_and_fp_accesses_across_pages_and_into_code;
        integer_unaligned_and_across_pages: Tiers::BASELINE, 0, integer_accesses_unaligned_and_across_pages;
        access_runs: Tiers::BASELINE, 0, access_runs_match_the_interpreter;
        side_exits: Tiers::BASELINE, 0, side_exits_match_the_interpreter;
        results_overwritten_next: Tiers::BASELINE, 0, results_overwritten_next_match_the_interpreter;
        dirty_copies: Tiers::BASELINE, 0, dirty_copies_match_the_interpreter;
        loop_blocks: Tiers::BASELINE, 0, loop_blocks_match_the_interpreter;
        compare_fields_left_in_flags: Tiers::BASELINE, 0, compare_fields_left_in_flags_at_side_exits;
        side_exits_into_own_block: Tiers::BASELINE, 0, side_exits_into_their_own_block_match_the_interpreter;
        side_exits_into_own_block_promoted: Tiers::BOTH, 2, side_exits_into_their_own_block_match_the_interpreter;
        jumps_ahead: Tiers::BASELINE, 0, jumps_ahead_match_the_interpreter;
        jumps_ahead_promoted: Tiers::BOTH, 2, jumps_ahead_match_the_interpreter;
        never_falls_through: Tiers::BASELINE, 0, words_after_a_branch_that_never_falls_through_match_the_interpreter;
        never_falls_through_promoted: Tiers::BOTH, 2, words_after_a_branch_that_never_falls_through_match_the_interpreter;
        loop_blocks_promoted: Tiers::BOTH, 3, loop_blocks_match_the_interpreter;
        compares_then_branches: Tiers::BASELINE, 0, compares_then_branches_match_the_interpreter;
        side_exits_promoted: Tiers::BOTH, 2, side_exits_match_the_interpreter;
        msr_writes_and_rfid: Tiers::BASELINE, 0, msr_writes_and_rfid_match_the_interpreter;
        msr_writes_and_rfid_promoted: Tiers::BOTH, 2, msr_writes_and_rfid_match_the_interpreter;
    }

    /// Runs `words` on `tiers` with every block translated at once; the interpreter
    /// fallbacks taken, by mnemonic, other than the illegal word that ends the program.
    fn fallbacks(tiers: Tiers, words: &[u32], le: bool, init: impl Fn(&mut Cpu)) -> Vec<String> {
        let mut c = cpu(le);
        put_code(&mut c, CODE, words);
        init(&mut c);
        c.st.pc = CODE;
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(tiers, Some(0));
        run_jit(&mut c, &mut jit);
        jit.fallback_counts()
            .into_iter()
            .filter(|(m, _)| *m != "(illegal)")
            .map(|(m, n)| format!("{m} ×{n}"))
            .collect()
    }

    /// `mftb`, `mftbu`, `mfspr` of TB and TBU, and in supervisor state of PURR, SPURR and VTB
    /// read the vCPU's timebase (the interpreter's) without the interpreter.
    #[test]
    fn timebase_reads_are_translated() {
        // mftb r3; mftb r4,269; mfspr r5,268; mfspr r6,269; mfspr r7,309 (PURR);
        // mfspr r8,308 (SPURR); mfspr r9,351 (VTB); illegal.
        let user = [0x7c6c_42e6, 0x7c8d_42e6, 0x7cac_42a6, 0x7ccd_42a6];
        let supervisor = [user.as_slice(), &[0x7cf5_4aa6, 0x7d14_4aa6, 0x7d3f_52a6, 0]].concat();
        let user = [user.as_slice(), &[0]].concat();
        for (tiers, le) in [
            (Tiers::BASELINE, false),
            (Tiers::BASELINE, true),
            (Tiers::CRANELIFT, true),
        ] {
            TIERS.set((tiers, 0));
            for (prog, pr) in [(&user, msr::PR), (&supervisor, 0)] {
                let init = |c: &mut Cpu| c.st.msr = (c.st.msr & !msr::PR) | pr;
                let (_, s) = differential(prog, le, init);
                let (tb, tbu) = (format!("{TB:#x}"), format!("{:#x}", TB >> 32));
                for (r, v) in [(3, &tb), (4, &tbu), (5, &tb), (6, &tbu)] {
                    assert!(s.contains(&format!(" r{r}={v} ")), "r{r}: {s}");
                }
                if pr == 0 {
                    for r in 7..=9 {
                        assert!(s.contains(&format!(" r{r}={tb} ")), "r{r}: {s}");
                    }
                }
                assert_eq!(
                    fallbacks(tiers, prog, le, init),
                    [] as [String; 0],
                    "{tiers:?}"
                );
            }
        }
    }

    /// `vgbbd`, `vbpermq` (bit indexes at the ends of each byte and at and past 128) and
    /// `xxspltw` (every word, VSRs of both halves) on edge operands, on both tiers without
    /// the interpreter; also in place (target = source).
    #[test]
    fn bit_matrix_permutes_and_word_splat_are_translated() {
        // vgbbd v3,v4; vbpermq v5,v6,v7; xxspltw vs40,vs8,0; xxspltw vs40,vs8,1 (over it);
        // xxspltw vs9,vs41,2; xxspltw vs10,vs41,3 (own word); vgbbd v4,v4; vbpermq v6,v6,v6.
        let prog = [
            0x1060_250c,
            0x10a6_3d4c,
            0xf100_4291,
            0xf101_4291,
            0xf122_4a92,
            0xf143_4a92,
            0x1080_250c,
            0x10c6_354c,
            0,
        ];
        let indexes = u128::from_be_bytes([
            0, 1, 7, 8, 63, 64, 126, 127, 128, 129, 200, 255, 15, 16, 120, 119,
        ]);
        let values = [
            0,
            u128::MAX,
            1,
            1 << 127,
            0x8040_2010_0804_0201_0102_0408_1020_4080,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
            0x5555_5555_5555_5555_aaaa_aaaa_aaaa_aaaa,
            0x00ff_00ff_0f0f_3333_ff00_ff00_f0f0_cccc,
        ];
        let mut r = Rng(0xb17_3a7);
        for (tiers, le) in [
            (Tiers::BASELINE, false),
            (Tiers::BASELINE, true),
            (Tiers::CRANELIFT, true),
        ] {
            TIERS.set((tiers, 0));
            for (k, &a) in values.iter().enumerate() {
                let b = values[(k + 3) % values.len()] ^ r.next() as u128;
                let init = |c: &mut Cpu| {
                    c.st.vsr[32 + 4] = a;
                    c.st.vsr[32 + 6] = b;
                    c.st.vsr[32 + 7] = if k % 2 == 0 { indexes } else { a ^ b };
                    c.st.vsr[8] = a;
                    c.st.vsr[41] = b;
                };
                let (e, s) = differential(&prog, le, init);
                assert!(matches!(e, Some(Exception::Program(_))), "{s}");
                assert_eq!(
                    fallbacks(tiers, &prog, le, init),
                    [] as [String; 0],
                    "{tiers:?}"
                );
            }
        }
        // By hand (big-endian numbering): byte 7 bit 6 becomes byte 6 bit 7; byte 6 bit 6
        // stays.
        let (_, s) = differential(&prog, true, |c| c.st.vsr[32 + 4] = 0x2 << 64 | 0x200);
        assert!(s.contains(" vs35=0x1000000000000000200 "), "{s}");
    }

    /// `mtxer`/`mfxer` (and `mftb` of SPR 1) split and compose XER's fields like the
    /// interpreter, with every bit pattern of the low word, on both tiers; CA is the one
    /// `adde` reads.
    #[test]
    fn xer_moves_are_translated() {
        // mtxer r9; adde r3,r3,r3; mfxer r6; mftb r7,1; illegal.
        let prog = [0x7d21_03a6, 0x7c63_1914, 0x7cc1_02a6, 0x7ce1_02e6, 0];
        let mut r = Rng(0x00ce_5a11);
        for case in 0..64u64 {
            let tiers = [Tiers::BASELINE, Tiers::CRANELIFT][case as usize % 2];
            TIERS.set((tiers, 0));
            let v = match case {
                0 => 0,
                1 => u64::MAX,
                2 => 0xe000_007f,
                3 => 0x1ff3_ff80,
                4 => 0xffff_ffff_0000_0000,
                _ => r.next(),
            };
            let init = |c: &mut Cpu| {
                c.st.gpr[9] = v;
                c.st.gpr[3] = 1 << 63;
                if case % 4 >= 2 {
                    c.st.msr &= !msr::PR;
                }
            };
            let (_, s) = differential(&prog, case % 3 == 0, init);
            // SO, OV, the reserved bits and the count as written; CA from `adde` (set).
            let want = v & 0xc000_007f | 1 << 29 | v & 0x1ff3_ff80;
            assert!(s.contains(&format!(" r6={want:#x} ")), "{v:#x}: {s}");
            assert_eq!(
                fallbacks(tiers, &prog, true, init),
                [] as [String; 0],
                "{tiers:?}"
            );
        }
    }

    /// Where translated MSR writes leave translated code (the second pass of a program, its
    /// blocks translated and linked by the first): turning EE off or writing RI goes on in the
    /// chain; turning EE on returns to the run loop, which goes on at once (no event) unless
    /// the decrementer is negative (the event for the machine's exec loop); a change of the
    /// block key's bits looks the next block up in the new state, where a disabled facility
    /// faults. None of them reaches the interpreter.
    #[test]
    fn msr_writes_leave_translated_code_only_when_needed() {
        // mtmsrd r3,1 (EE and RI off); mtmsrd r4,1 (RI); mtmsrd r5,1 (EE); mtmsrd r3,1;
        // mtmsrd r6 (FP off, EE stays off); mfmsr r7; fmr f1,f2; illegal.
        let prog = [
            0x7c61_0164,
            0x7c81_0164,
            0x7ca1_0164,
            0x7c61_0164,
            0x7cc0_0164,
            0x7ce0_00a6,
            0xfc20_1090,
            0,
        ];
        for dec_pending in [false, true] {
            let mut c = cpu(true);
            c.st.msr &= !msr::PR;
            put_code(&mut c, CODE, &prog);
            let m = c.st.msr;
            c.st.gpr[3] = 0;
            c.st.gpr[4] = msr::RI;
            c.st.gpr[5] = msr::EE;
            c.st.gpr[6] = m & !(msr::FP | msr::EE);
            c.st.dec_value = if dec_pending { 0xffff_fff0 } else { 1 << 20 };
            c.st.dec_tb = TB;
            let mut jit = Jit::attach(&mut c, JitShared::new());
            jit.set_tiers(Tiers::BASELINE, Some(0));
            // First pass: translation and linking (each new exit returns once to be linked).
            c.st.pc = CODE;
            run_jit(&mut c, &mut jit);
            c.st.msr = m;
            c.st.pc = CODE;
            let entries = jit.counters.baseline.entries;
            let first = run(&mut jit, &mut c, 1000, &|_| false);
            if dec_pending {
                // Out after `mtmsrd r5,1`, for the exec loop to take the decrementer.
                assert_eq!(first, Ok(()));
                assert_eq!(c.st.pc, CODE + 12);
                assert_ne!(c.events, 0);
                c.events = 0;
                let second = run(&mut jit, &mut c, 1000, &|_| false);
                assert_eq!(second, Err(Exception::FpUnavailable));
            } else {
                // Out after `mtmsrd r5,1` and after `mtmsrd r6`, both times back in at once.
                assert_eq!(first, Err(Exception::FpUnavailable));
                assert_eq!(jit.counters.baseline.entries - entries, 3);
            }
            assert_eq!(c.st.pc, CODE + 24);
            assert_eq!(c.st.gpr[7], m & !(msr::FP | msr::EE));
            // (`fmr` with FP off: the interpreter raises the interrupt.)
            let fb = jit.fallback_counts();
            assert!(
                fb.iter().all(|(m, _)| ["(illegal)", "fmr"].contains(m)),
                "{fb:?}"
            );
        }
    }

    /// `rfid` back to the same block key goes on through the jump cache; to problem state it
    /// returns to the run loop, which goes on under the new key (where `mfmsr` traps); with
    /// the byte order flipped the target is fetched in the new order.
    #[test]
    fn rfid_goes_on_under_the_new_msr() {
        // At CODE: mtspr srr0,r7; mtspr srr1,r8; rfid. At CODE+0x100: li r3,7; mfmsr r4;
        // illegal (mfmsr traps in problem state).
        let main = [0x7cfa_03a6, 0x7d1b_03a6, 0x4c00_0024];
        let target = [0x3860_0007u32, 0x7c80_00a6, 0];
        for (flip, want) in [
            (0, Exception::Program(ppc64emu::cpu::ProgramKind::Illegal)),
            (
                msr::PR,
                Exception::Program(ppc64emu::cpu::ProgramKind::Privileged),
            ),
            (
                msr::LE,
                Exception::Program(ppc64emu::cpu::ProgramKind::Illegal),
            ),
            (
                msr::EE,
                Exception::Program(ppc64emu::cpu::ProgramKind::Illegal),
            ),
        ] {
            for tiers in [Tiers::BASELINE, Tiers::BOTH] {
                TIERS.set((tiers, 1));
                let init = |c: &mut Cpu| {
                    c.st.msr &= !(msr::PR | msr::EE);
                    c.st.gpr[7] = CODE + 0x100;
                    c.st.gpr[8] = c.st.msr ^ flip;
                    let words: Vec<u32> = if flip == msr::LE {
                        target.iter().map(|w| w.swap_bytes()).collect()
                    } else {
                        target.to_vec()
                    };
                    put_code(c, CODE + 0x100, &words);
                };
                let (e, s) = differential(&main, true, init);
                assert_eq!(e, Some(want), "{s}");
                assert!(s.contains(" r3=0x7 "), "{s}");
                if tiers == Tiers::BASELINE {
                    // (`mfmsr` in problem state: the interpreter raises the interrupt.)
                    let fb = fallbacks(tiers, &main, true, init);
                    assert_eq!(
                        fb,
                        if flip == msr::PR {
                            vec!["mfmsr ×1"]
                        } else {
                            vec![]
                        }
                    );
                }
            }
        }
    }

    /// 1 MiB of guest RAM and the smallest hash page table, for tests of a full system's
    /// address space.
    fn system_memory() -> (
        std::sync::Arc<ppc64emu::softmmu::GuestRam>,
        std::sync::Arc<ppc64emu::mmu::Hpt>,
    ) {
        use ppc64emu::mmu::Hpt;
        let ram = ppc64emu::softmmu::GuestRam::new(1 << 20).unwrap();
        let hpt = Hpt::new(Hpt::MIN_SHIFT).unwrap();
        (std::sync::Arc::new(ram), std::sync::Arc::new(hpt))
    }

    /// Blocks the run loop looked up (jump cache, block map, or translated anew): what a
    /// linked or predicted transfer between blocks does not add to.
    fn lookups(jit: &Jit) -> u64 {
        let k = &jit.counters;
        k.jump_cache_hits + k.jump_cache_refills + k.map_hits + k.baseline.blocks_translated
    }

    /// Big-endian instruction words at guest physical `at`.
    fn put_be(ram: &ppc64emu::softmmu::GuestRam, at: u64, words: &[u32]) {
        for (k, w) in words.iter().enumerate() {
            ram.write(at + 4 * k as u64, &w.to_be_bytes()).unwrap();
        }
    }

    /// A segment: its effective address, its VSID, and its `(effective, physical)` pages.
    type Segment<'a> = (u64, u64, &'a [(u64, u64)]);

    /// A CPU translating through `hpt` (64-bit, IR and DR on) whose SLB entry `index` maps
    /// the segment of each `(ea, vsid, pages)` given, each `(effective, physical)` 4 KiB page
    /// entered in the hash table.
    fn mapped_cpu(
        ram: &std::sync::Arc<ppc64emu::softmmu::GuestRam>,
        hpt: &std::sync::Arc<ppc64emu::mmu::Hpt>,
        segments: &[Segment],
    ) -> Cpu {
        use ppc64emu::cpu::SlbEntry;
        use ppc64emu::mmu::slb::{esid, hash_key};
        use ppc64emu::mmu::{SystemSpace, hpte_r};
        let mut c = Cpu::new(Box::new(SystemSpace::new(ram.clone(), hpt.clone())));
        c.st.msr = msr::SF | msr::ME | msr::IR | msr::DR;
        for (index, &(ea, vsid, pages)) in segments.iter().enumerate() {
            c.st.slb[index] = SlbEntry {
                esid: (ea & esid::ESID_256M) | esid::VALID,
                vsid: (vsid << 12) | 0x400,
            };
            for &(at, phys) in pages {
                let key = hash_key(&c.st.slb[index], 12, at);
                let ptel = (phys & !0xfff) | hpte_r::M | 0x2;
                let ptex = (key.hash & hpt.pteg_mask()) * 8;
                let r = hpt.h_enter(ram, 0, ptex, key.ptem, ptel);
                assert_eq!(r.ret, ppc64emu::papr::H_SUCCESS);
            }
        }
        c
    }

    /// Cross-modified code: vCPU B's fast TLB write entry for a page predates vCPU A's
    /// translation of code on it (a translation drops only its own vCPU's entries), so B's
    /// store of new code there invalidates nothing; B's `icbi` must (its host page is in the
    /// code filter), and A then runs the new code. `icbi` of a page without code stays in
    /// translated code.
    #[test]
    fn icbi_makes_cross_modified_code_visible() {
        use ppc64emu::mmu::SystemSpace;
        // A's code: li r3,1; illegal.
        const F: u64 = 0x3000;
        // B: lwz r7,0x80(r5); stw r6,0x80(r5) (B's entries for F's page, before A
        // translates); stw r4,0(r5); icbi 0,r5 (new code for F); lwz r7,0(r8);
        // icbi 0,r8 (a data page).
        const B1: u64 = 0x8000;
        const B2: u64 = 0x8100;
        const B3: u64 = 0x8200;
        let (ram, hpt) = system_memory();
        let put = |at: u64, words: &[u32]| put_be(&ram, at, words);
        put(F, &[0x3860_0001, 0]);
        put(B1, &[0x80e5_0080, 0x90c5_0080, 0]);
        put(B2, &[0x9085_0000, 0x7c00_2fac, 0]);
        put(B3, &[0x80e8_0000, 0x7c00_47ac, 0]);
        // Big-endian real mode: effective address = guest physical address.
        let vcpu = || {
            let mut c = Cpu::new(Box::new(SystemSpace::new(ram.clone(), hpt.clone())));
            c.st.msr = msr::SF | msr::ME;
            c.st.gpr[4] = 0x3860_0002;
            c.st.gpr[5] = F;
            c.st.gpr[8] = 0x6000;
            c
        };
        let shared = JitShared::new();
        let (mut a, mut b) = (vcpu(), vcpu());
        let mut ja = Jit::attach(&mut a, shared.clone());
        let mut jb = Jit::attach(&mut b, shared.clone());
        for j in [&mut ja, &mut jb] {
            j.set_tiers(Tiers::BASELINE, Some(0));
        }
        let go = |c: &mut Cpu, j: &mut Jit, pc: u64| {
            c.st.pc = pc;
            let e = run(j, c, 1000, &|_| false);
            assert!(
                matches!(e, Err(Exception::Program(_))),
                "{e:?} at {:#x}",
                c.st.pc
            );
        };
        go(&mut b, &mut jb, B1);
        go(&mut a, &mut ja, F);
        assert_eq!(a.st.gpr[3], 1);
        go(&mut b, &mut jb, B2);
        go(&mut a, &mut ja, F);
        assert_eq!(a.st.gpr[3], 2, "A ran the stale translation");
        go(&mut b, &mut jb, B3);
        // The interpreter ran B2's `icbi` (of code) only.
        let fb = jb.fallback_counts();
        assert_eq!(
            fb.iter().find(|(m, _)| *m == "icbi"),
            Some(&("icbi", 1)),
            "{fb:?}"
        );
    }

    /// One physical page of code mapped at two effective addresses (two processes running the
    /// same program): the second mapping runs the first one's translations (no block is
    /// translated again), and every guest address the code makes — a return address, a
    /// relative branch to the next page, the PC of a fault — is the running mapping's. A
    /// store to the code through one mapping takes effect at the other. (Blocks keyed by
    /// effective PC would translate everything again; blocks that kept the first mapping's
    /// addresses would leave r3, r4 and the PC there.)
    #[test]
    fn code_mapped_at_two_addresses_shares_translations_and_computes_each_ones_addresses() {
        // Two physical pages of code, at A and A + 4 KiB in one segment and at B and
        // B + 4 KiB in another.
        const P: u64 = 0x5000;
        const A: u64 = 0x1000_3000;
        const B: u64 = 0x2000_7000;
        let (ram, hpt) = system_memory();
        let put = |at: u64, words: &[u32]| put_be(&ram, at, words);
        put(
            P,
            &[
                0x4800_0011, // bl .+0x10
                0x7c88_02a6, // mflr r4
                0x4800_0ff8, // b .+0xff8: the next page
                0,
                0x7c68_02a6, // mflr r3
                0x3863_0001, // addi r3, r3, 1
                0x4e80_0020, // blr
            ],
        );
        put(P + 0x1000, &[0x38c0_0007, 0]); // li r6, 7; illegal
        let pages = |ea: u64| [(ea, P), (ea + 0x1000, P + 0x1000)];
        let mut c = mapped_cpu(&ram, &hpt, &[(A, 0x100, &pages(A)), (B, 0x200, &pages(B))]);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        let go = |c: &mut Cpu, jit: &mut Jit, base: u64| {
            c.st.pc = base;
            c.st.gpr[3..7].fill(0);
            let e = run(jit, c, 1000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
            let got = (c.st.gpr[3], c.st.gpr[4], c.st.gpr[6], c.st.pc);
            assert_eq!(got, (base + 5, base + 4, 7, base + 0x1004), "at {base:#x}");
        };
        go(&mut c, &mut jit, A);
        let translated = jit.counters.baseline.blocks_translated;
        assert!(translated >= 4, "{:?}", jit.counters);
        go(&mut c, &mut jit, B);
        assert_eq!(
            jit.counters.baseline.blocks_translated, translated,
            "the second mapping translated again: {:?}",
            jit.counters
        );
        // addi r3, r3, 2 through B; A runs the new instruction.
        c.mmu.store(&c.st, B + 0x14, 4, 0x3863_0002, false).unwrap();
        c.st.pc = A;
        let e = run(&mut jit, &mut c, 1000, &|_| false);
        assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
        assert_eq!(c.st.gpr[3], A + 6, "A ran the stale translation");
    }

    /// A jump to the next page, linked while one mapping ran and taken in another: code page
    /// P at A and at B (two processes running the same program), the page after it Q1 at
    /// A + 4 KiB and Q2 at B + 4 KiB. Linked at A to Q1's block, the jump from P's block at
    /// B must reach Q2's code (the target's guard finds B + 4 KiB mapping another page and
    /// probes), and at A again Q1's through the link, with no run-loop lookup. (A link that
    /// trusted the page it was made for would run Q1 at B: r6 = 7.)
    #[test]
    fn a_jump_linked_across_pages_reaches_each_mappings_next_page() {
        const P: u64 = 0x5000;
        const Q1: u64 = 0x6000;
        const Q2: u64 = 0x8000;
        const A: u64 = 0x1000_3000;
        const B: u64 = 0x2000_7000;
        let (ram, hpt) = system_memory();
        let put = |at: u64, words: &[u32]| put_be(&ram, at, words);
        put(P, &[0x38a5_0001, 0x4800_0ffc]); // addi r5, r5, 1; b .+0xffc: the next page
        put(Q1, &[0x38c0_0007, 0]); // li r6, 7; illegal
        put(Q2, &[0x38c0_0009, 0]); // li r6, 9; illegal
        let mut c = mapped_cpu(
            &ram,
            &hpt,
            &[
                (A, 0x100, &[(A, P), (A + 0x1000, Q1)]),
                (B, 0x200, &[(B, P), (B + 0x1000, Q2)]),
            ],
        );
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        let go = |c: &mut Cpu, jit: &mut Jit, base: u64, r6: u64| {
            c.st.pc = base;
            c.st.gpr[5..7].fill(0);
            let e = run(jit, c, 1000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
            let got = (c.st.gpr[5], c.st.gpr[6], c.st.pc);
            assert_eq!(got, (1, r6, base + 0x1004), "at {base:#x}");
        };
        go(&mut c, &mut jit, A, 7);
        let links = jit.counters.baseline.links;
        assert!(
            links >= 1,
            "the jump to the next page was not linked: {:?}",
            jit.counters
        );
        go(&mut c, &mut jit, B, 9);
        let before = lookups(&jit);
        go(&mut c, &mut jit, A, 7);
        assert_eq!(
            lookups(&jit),
            before + 1,
            "only P's block is looked up; Q1 is reached through the link: {:?}",
            jit.counters
        );
    }

    /// Unaligned accesses take the fast path only inside a page: two pages adjacent in
    /// effective addresses but not in physical memory (D1 at A, D3 at A + 4 KiB, D2 between
    /// them in RAM), the first page's TLB entries filled by aligned accesses, then loads and
    /// stores of every size straddling the boundary and unaligned inside the page. A fast
    /// path that tested only the first byte's page would read and write D2. Compared with the
    /// interpreter on a second machine set up the same way.
    #[test]
    fn unaligned_accesses_across_a_page_reach_both_pages() {
        const CODE_P: u64 = 0x5000;
        const D1: u64 = 0x8000;
        const D2: u64 = 0x9000;
        const D3: u64 = 0xa000;
        const A: u64 = 0x1000_3000;
        const X: u64 = 0x2000_0000;
        // lbz r3,0xff8(r5); stb r3,0xff8(r5) (fill the read and write entries of A); then
        // across the boundary: ld r8,0xffd(r5); std r8,0xffb(r5); lwz r9,0xffe(r5);
        // stw r9,0xfff(r5); lhz r10,0xfff(r5); sth r10,0xfff(r5); and inside the page:
        // ld r11,0x7f3(r5); std r11,0x7f5(r5); illegal.
        let prog = [
            0x8865_0ff8,
            0x9865_0ff8,
            0xe905_0ffd,
            0xf905_0ffb,
            0x8125_0ffe,
            0x9125_0fff,
            0xa145_0fff,
            0xb145_0fff,
            0xe965_07f3,
            0xf965_07f5,
            0,
        ];
        let machine = |jit: bool| {
            let (ram, hpt) = system_memory();
            put_be(&ram, CODE_P, &prog);
            for (k, pa) in [D1, D2, D3].into_iter().enumerate() {
                let bytes: Vec<u8> = (0..4096u32)
                    .map(|b| (b * 7 + 13 * k as u32) as u8)
                    .collect();
                ram.write(pa, &bytes).unwrap();
            }
            let pages: &[(u64, u64)] = &[(A, D1), (A + 0x1000, D3)];
            let mut c = mapped_cpu(&ram, &hpt, &[(X, 0x300, &[(X, CODE_P)]), (A, 0x100, pages)]);
            c.st.pc = X;
            c.st.gpr[5] = A;
            let e = if jit {
                let mut j = Jit::attach(&mut c, JitShared::new());
                j.set_tiers(Tiers::BASELINE, Some(0));
                run_jit(&mut c, &mut j)
            } else {
                run_interp(&mut c)
            };
            assert!(matches!(e, Some(Exception::Program(_))), "{e:?}");
            let mut mem = vec![0u8; 3 * 4096];
            ram.read(D1, &mut mem).unwrap();
            (c.st.gpr[3..12].to_vec(), mem)
        };
        let (want, got) = (machine(false), machine(true));
        assert_eq!(got.0, want.0, "registers");
        assert!(got.1 == want.1, "memory differs");
    }

    /// A call's return frame predicts its return: with the chain linked, a call to another
    /// page and the callee's `blr` back run without a run-loop lookup, though the jump cache
    /// was emptied (another page's block was dropped): the return went through the host's
    /// `ret` to the caller's landing, not the probe.
    #[test]
    fn a_predicted_return_needs_no_lookup() {
        const P: u64 = 0x5000;
        const F: u64 = 0x6000;
        const D: u64 = 0x9000;
        const A: u64 = 0x1000_3000;
        let (ram, hpt) = system_memory();
        let put = |at: u64, words: &[u32]| put_be(&ram, at, words);
        put(P, &[0x4800_1001, 0x38c0_0007, 0]); // bl .+0x1000; li r6, 7; illegal
        put(F, &[0x38a5_0001, 0x4e80_0020]); // addi r5, r5, 1; blr
        put(D, &[0x3860_0000, 0]); // li r3, 0; illegal
        let pages: &[(u64, u64)] = &[(A, P), (A + 0x1000, F), (A + 0x2000, D)];
        let mut c = mapped_cpu(&ram, &hpt, &[(A, 0x100, pages)]);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        let go = |c: &mut Cpu, jit: &mut Jit, at: u64| {
            c.st.pc = at;
            c.st.gpr[5] = 0;
            let e = run(jit, c, 1000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
        };
        // Translate and link: the call, the return's landing, the continuation.
        for _ in 0..3 {
            go(&mut c, &mut jit, A);
            assert_eq!((c.st.gpr[5], c.st.gpr[6], c.st.pc), (1, 7, A + 8));
        }
        go(&mut c, &mut jit, A + 0x2000);
        jit.shared().code_written(D, 4);
        let before = lookups(&jit);
        go(&mut c, &mut jit, A);
        assert_eq!((c.st.gpr[5], c.st.gpr[6], c.st.pc), (1, 7, A + 8));
        assert_eq!(
            lookups(&jit),
            before + 1,
            "only the call's block is looked up: {:?}",
            jit.counters
        );
    }

    /// A return predicted by its frame must not outlive the mapping of the call: the callee
    /// (on the caller's page) moves that page's segment to another VSID (`slbie`,
    /// `slbmte`, `isync`: another process's code at the same address) and returns. Under
    /// the first mapping the return comes back to P1's code (r6 = 7); under the second it
    /// must reach P2's (r6 = 9), though the caller's landing is linked to P1's block. The
    /// flush ends the stint and the frame with it; a frame that outlived it ran P1's block.
    #[test]
    fn a_return_after_the_callee_remapped_its_caller_reaches_the_new_code() {
        use ppc64emu::mmu::slb::esid;
        const P1: u64 = 0x5000;
        const P2: u64 = 0x7000;
        const A: u64 = 0x1000_3000;
        const B: u64 = 0x2000_3000;
        let (ram, hpt) = system_memory();
        let put = |at: u64, words: &[u32]| put_be(&ram, at, words);
        // The callee at +0x100: slbie r8; slbmte r9, r10; isync; blr.
        let callee = [0x7c00_4364, 0x7d20_5324, 0x4c00_012c, 0x4e80_0020];
        put(P1, &[0x4800_0101, 0x38c0_0007, 0]); // bl .+0x100; li r6, 7; illegal
        put(P2, &[0x4800_0101, 0x38c0_0009, 0]); // bl .+0x100; li r6, 9; illegal
        put(P1 + 0x100, &callee);
        put(P2 + 0x100, &callee);
        // B has A's offset in its segment: A's segment moved to VSID 0x200 maps A to P2.
        let mut c = mapped_cpu(
            &ram,
            &hpt,
            &[(A, 0x100, &[(A, P1)]), (B, 0x200, &[(B, P2)])],
        );
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        let go = |c: &mut Cpu, jit: &mut Jit, vsid: u64, r6: u64| {
            c.st.pc = A;
            c.st.gpr[8] = A;
            c.st.gpr[9] = (vsid << 12) | 0x400;
            c.st.gpr[10] = (A & esid::ESID_256M) | esid::VALID;
            c.st.gpr[6] = 0;
            let e = run(jit, c, 1000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
            assert_eq!((c.st.gpr[6], c.st.pc), (r6, A + 8), "VSID {vsid:#x}");
        };
        for _ in 0..3 {
            go(&mut c, &mut jit, 0x100, 7);
        }
        go(&mut c, &mut jit, 0x200, 9);
        go(&mut c, &mut jit, 0x100, 7);
    }

    /// The counted loop's block branches back to its own head (`self_loop`), not through a
    /// linked jump; the run loop sees the blocks once each to link them, then only when the
    /// budget runs out.
    #[test]
    fn loop_blocks_are_linked() {
        let mut c = counted_loop_cpu(true);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        let e = run(&mut jit, &mut c, 1_000_000, &|_| false);
        assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
        assert_eq!(c.counters.instructions, 3 + 5 * 100);
        // The first block to the loop and the loop to the end.
        assert_eq!(jit.counters.baseline.links, 2);
        // No lookup: the first block links to the loop, and the loop runs all 100
        // iterations from its head.
        assert_eq!(
            jit.counters.jump_cache_hits + jit.counters.map_hits,
            0,
            "{:?}",
            jit.counters
        );
    }

    /// A call through `bctrl` to a subroutine whose address shares the jump cache's set with
    /// the call's return point (512 KiB apart), and its `blr` back, 100 times: both probes
    /// find their block in translated code once each has been looked up, with no run-loop
    /// trip per call (a direct-mapped cache evicted one for the other on every probe).
    #[test]
    fn a_call_and_its_return_sharing_a_set_both_stay_cached() {
        const SUB: u64 = CODE + 0x18 + 0x8_0000;
        // Each tier's probes: the baseline tier's stub and Cranelift's chain exit.
        for tiers in [Tiers::BASELINE, Tiers::CRANELIFT] {
            let mut c = cpu(true);
            put_code(
                &mut c,
                CODE,
                &[
                    0x3860_0000, // li r3, 0
                    0x3880_0064, // li r4, 100
                    0x3d20_0008, // lis r9, 8
                    0x6129_1018, // ori r9, r9, 0x1018: r9 = SUB
                    0x7d29_03a6, // loop: mtctr r9
                    0x4e80_0421, // bctrl
                    0x3884_ffff, // addi r4, r4, -1 (the return point, CODE + 0x18)
                    0x2c04_0000, // cmpwi r4, 0
                    0x4082_fff0, // bne loop
                    0,
                ],
            );
            put_code(&mut c, SUB, &[0x3863_0001, 0x4e80_0020]); // addi r3, r3, 1; blr
            c.st.pc = CODE;
            let mut jit = Jit::attach(&mut c, JitShared::new());
            jit.set_tiers(tiers, Some(0));
            let e = run(&mut jit, &mut c, 1_000_000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
            assert_eq!(c.st.gpr[3], 100);
            // Run-loop lookups that found a block (not a translation): the first call and
            // the first return, and their repeats before each was linked or cached.
            let k = &jit.counters;
            assert!(
                k.jump_cache_hits + k.jump_cache_refills + k.map_hits <= 4,
                "{tiers:?}: {k:?}"
            );
        }
    }

    /// A small budget makes a linked loop come back to the run loop (as a kick would).
    #[test]
    fn linked_loops_return_when_the_budget_is_spent() {
        let mut c = counted_loop_cpu(false);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        run(&mut jit, &mut c, 50, &|_| false).unwrap();
        // Blocks are entered while budget is left: at most one loop iteration past 50.
        let n = c.counters.instructions;
        assert!((50..50 + 5).contains(&n), "{n}");
        assert!(c.st.pc >= CODE && c.st.pc < CODE + 4 * COUNTED_LOOP.len() as u64);
    }

    /// A kick ends a loop at its jump back: block entries test only the budget, and the
    /// loop's block branches back to its own head, so without the test at the jump back it
    /// would run its 100 passes (500 instructions) in one stint.
    #[test]
    fn a_kick_stops_a_linked_loop_at_its_jump_back() {
        static KICK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        const LOOP_HEAD: u64 = CODE + 12;
        let mut c = counted_loop_cpu(true);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BASELINE, Some(0));
        // SAFETY: a static outlives the JIT.
        unsafe { jit.watch(&KICK) };
        // Three passes: the first block is linked to the loop when the second one enters
        // (the loop's jump back needs no link).
        run(&mut jit, &mut c, 3 + 15, &|_| false).unwrap();
        assert_eq!(jit.counters.baseline.links, 1, "{:?}", jit.counters);
        KICK.store(true, std::sync::atomic::Ordering::Relaxed);
        let before = c.counters.instructions;
        let n = jit.enter(&mut c, 1_000_000).unwrap();
        assert_eq!((n, c.st.pc), (5, LOOP_HEAD), "from {before}");
    }

    /// Promoted blocks end up in Cranelift and compute the same.
    #[test]
    fn hot_blocks_are_promoted() {
        let mut c = counted_loop_cpu(true);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BOTH, Some(0));
        jit.promote_threshold = 10;
        let e = run(&mut jit, &mut c, 1_000_000, &|_| false);
        assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
        assert_eq!(c.st.gpr[3], 5050);
        assert_eq!(
            jit.counters.baseline.promotions, 1,
            "{:?}",
            jit.counters.baseline
        );
        assert!(jit.counters.blocks_translated >= 1);
    }

    /// The promotion counter counts every entry across its low byte's wraps: a block
    /// entered about 100 times per pass of the counted loop is promoted in the fifth pass
    /// with a threshold of 450, not before.
    #[test]
    fn promotion_counts_entries_past_the_counters_low_byte() {
        let mut c = counted_loop_cpu(true);
        let mut jit = Jit::attach(&mut c, JitShared::new());
        jit.set_tiers(Tiers::BOTH, Some(0));
        jit.promote_threshold = 450;
        for pass in 1..=5 {
            c.st.pc = CODE;
            counted_loop_data(&mut c);
            let e = run(&mut jit, &mut c, 1_000_000, &|_| false);
            assert!(matches!(e, Err(Exception::Program(_))), "{e:?}");
            assert_eq!(c.st.gpr[3], 5050, "pass {pass}");
            let promoted = jit.counters.baseline.promotions;
            assert_eq!(promoted, u64::from(pass == 5), "pass {pass}");
        }
    }
}
