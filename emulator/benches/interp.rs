//! Guest instructions per second of the reference interpreter (criterion reports them as
//! "elements/s"):
//! - `flat_loop`: a hand-assembled integer loop (loads, stores, multiply, rotate, compare,
//!   branches) over flat RAM — the interpreter and TLB hit path alone;
//! - `user_sys_bench`: the compiled compute loop of tests/programs/bin/sys (`sys bench`) under
//!   the user-mode runner — loading, the page map and syscalls included.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ppc64emu::cpu::msr;
use ppc64emu::engine::Cpu;
use ppc64emu::softmmu::FlatRam;
use std::path::Path;

const CODE: u64 = 0x1000;
const TABLE: u64 = 0x10000;
const ITERATIONS: u64 = 100_000;

/// X/XO form of primary opcode 31 (the first field is RT or RS).
fn x(rt: u32, ra: u32, rb: u32, xo: u32) -> u32 {
    (31 << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1)
}
fn rlwinm(ra: u32, rs: u32, sh: u32, mb: u32, me: u32) -> u32 {
    (21 << 26) | (rs << 21) | (ra << 16) | (sh << 11) | (mb << 6) | (me << 1)
}

/// The loop: r3 accumulates a hash of a 4 KiB table it also scribbles on.
fn program() -> Vec<u32> {
    vec![
        x(5, 10, 4, 21),                                    // ldx    r5, r10, r4
        x(3, 3, 5, 266),                                    // add    r3, r3, r5
        x(6, 3, 7, 233),                                    // mulld  r6, r3, r7
        x(3, 3, 6, 316),                                    // xor    r3, r3, r6
        rlwinm(8, 3, 3, 20, 28),                            // rlwinm r8, r3, 3, 20, 28
        x(3, 10, 8, 149),                                   // stdx   r3, r10, r8
        (14 << 26) | (4 << 21) | (4 << 16) | 8,             // addi   r4, r4, 8
        rlwinm(4, 4, 0, 20, 28),                            // rlwinm r4, r4, 0, 20, 28
        (11 << 26) | (1 << 21) | (3 << 16),                 // cmpdi  r3, 0
        (16 << 26) | (4 << 21) | 8,                         // bge    +8
        x(3, 3, 0, 104),                                    // neg    r3, r3
        (16 << 26) | (16 << 21) | (-44i32 as u32 & 0xfffc), // bdnz loop
    ]
}

fn flat_cpu() -> Cpu {
    let mut c = Cpu::new(Box::new(FlatRam::new(1 << 20)));
    c.st.msr = msr::SF | msr::LE | msr::PR;
    for (k, w) in program().iter().enumerate() {
        c.mmu
            .store(&c.st, CODE + 4 * k as u64, 4, *w as u64, true)
            .unwrap();
    }
    c
}

/// Runs the loop from a fixed start state; returns the instructions executed.
fn run_flat(c: &mut Cpu) -> u64 {
    let end = CODE + 4 * program().len() as u64;
    c.st.pc = CODE;
    c.st.ctr = ITERATIONS;
    c.st.gpr[3] = 1;
    c.st.gpr[4] = 0;
    c.st.gpr[7] = 0x9e37_79b9_7f4a_7c15;
    c.st.gpr[10] = TABLE;
    let before = c.counters.instructions;
    while c.st.pc != end {
        c.step().expect("benchmark loop faulted");
    }
    c.counters.instructions - before
}

fn bench(crit: &mut Criterion) {
    let mut c = flat_cpu();
    let per_run = run_flat(&mut c);
    let mut g = crit.benchmark_group("interp");
    g.throughput(Throughput::Elements(per_run));
    g.bench_function("flat_loop", |b| b.iter(|| run_flat(&mut c)));

    let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/bin/sys");
    let image = std::fs::read(&exe).expect("tests/programs/bin/sys");
    let argv = [b"sys".to_vec(), b"bench".to_vec()];
    let config = ppc64emu::engine::EngineConfig {
        tier: ppc64emu::engine::TierKind::Interp,
        ..Default::default()
    };
    let load = || {
        ppc64emu::user::Runner::new(
            &image,
            &exe,
            &argv,
            &[],
            &config,
            ppc64emu::user::JitMemory::Guarded,
        )
        .expect("load sys")
    };
    let per_run = load().run().instructions;
    g.throughput(Throughput::Elements(per_run));
    g.bench_function("user_sys_bench", |b| b.iter(|| load().run()));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
