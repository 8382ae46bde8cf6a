//! The bundled guest under `--accel jit`: the same checksum as the interpreter for several
//! vCPU counts (translation in parallel, shared block map, cross-vCPU flush jobs), and the JIT
//! counters in the run report.

mod common;

use common::{checksum, mkbench_config, reference_checksum, run_mkbench};
use ppc64emu::jit::Tiers;
use ppc64emu::machine::pseries::boot::RunOutcome;
use ppc64emu::machine::pseries::config::{AccelMode, MachineConfig};
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Strategy};

fn run<S: Strategy>(smp: usize, accel: AccelMode) -> RunOutcome {
    run_tiered::<S>(smp, accel, 0)
}

fn run_tiered<S: Strategy>(smp: usize, accel: AccelMode, jit_threshold: u32) -> RunOutcome {
    run_limited::<S>(smp, accel, jit_threshold, ppc64emu::jit::CODE_CACHE_LIMIT)
}

fn run_limited<S: Strategy>(
    smp: usize,
    accel: AccelMode,
    jit_threshold: u32,
    jit_cache_limit: u64,
) -> RunOutcome {
    run_on_tiers::<S>(smp, accel, Tiers::CRANELIFT, jit_threshold, jit_cache_limit)
}

fn run_on_tiers<S: Strategy>(
    smp: usize,
    accel: AccelMode,
    jit_tiers: Tiers,
    jit_threshold: u32,
    jit_cache_limit: u64,
) -> RunOutcome {
    run_mkbench::<S>(&MachineConfig {
        jit_threshold: Some(jit_threshold),
        jit_tiers,
        jit_cache_limit,
        ..mkbench_config(smp, accel)
    })
}

#[test]
fn jit_computes_the_interpreters_checksum() {
    let reference = reference_checksum();
    for smp in [1, 2, 4] {
        let o = run::<Baseline>(smp, AccelMode::Jit);
        assert_eq!(checksum(&o), reference, "baseline smp={smp}");
        let jit = o.report.vcpus[0]
            .jit
            .as_ref()
            .expect("JIT counters in the report");
        assert!(jit.blocks_translated > 0);
        assert_eq!(jit.cold_blocks, 0, "threshold 0 translates every block");
    }
    let o = run::<CputlbNoBql>(4, AccelMode::Jit);
    assert_eq!(checksum(&o), reference, "cputlb-no-bql smp=4");
}

/// The default tiering: cold blocks interpreted, hot ones translated, same checksum; fewer
/// translations than translating everything.
#[test]
fn tiered_jit_computes_the_same_checksum() {
    let eager = run::<PerCpuLock>(2, AccelMode::Jit);
    let tiered = run_tiered::<PerCpuLock>(2, AccelMode::Jit, ppc64emu::jit::DEFAULT_THRESHOLD);
    assert_eq!(checksum(&tiered), checksum(&eager));
    let sum = |o: &RunOutcome, f: fn(&ppc64emu::jit::JitReport) -> u64| -> u64 {
        o.report
            .vcpus
            .iter()
            .filter_map(|v| v.jit.as_ref())
            .map(f)
            .sum()
    };
    assert!(sum(&tiered, |j| j.cold_blocks) > 0);
    assert!(sum(&tiered, |j| j.blocks_translated) < sum(&eager, |j| j.blocks_translated));
}

/// A code cache limit of 16 KiB (a few dozen blocks): the code cache is flushed many times,
/// at one vCPU by the JIT itself, at several in exclusive sections that replace every vCPU's
/// module. Same checksum as the interpreter; every vCPU counts flushes.
#[test]
fn tiny_code_cache_flushes_often_and_computes_the_same_checksum() {
    let reference = reference_checksum();
    // Threshold 100: blocks are translated again after each flush, but not on first sight
    // (translating everything at every flush would take minutes).
    let limit = 16 << 10;
    for (smp, strategy) in [(1, "baseline"), (2, "baseline"), (4, "cputlb-no-bql")] {
        let o = match strategy {
            "baseline" => run_limited::<Baseline>(smp, AccelMode::Jit, 100, limit),
            _ => run_limited::<CputlbNoBql>(smp, AccelMode::Jit, 100, limit),
        };
        assert_eq!(checksum(&o), reference, "{strategy} smp={smp}");
        for (i, v) in o.report.vcpus.iter().enumerate() {
            let jit = v.jit.as_ref().expect("JIT counters in the report");
            assert!(
                jit.cache_flushes > 1,
                "{strategy} smp={smp} vcpu{i}: {} flushes",
                jit.cache_flushes
            );
        }
    }
}

/// The baseline tier forced (alone, threshold 0): the interpreter's checksum at N = 1, 2, 4,
/// with every block translated by it and blocks linked.
#[cfg(target_arch = "x86_64")]
#[test]
fn baseline_tier_computes_the_interpreters_checksum() {
    let reference = reference_checksum();
    for smp in [1, 2, 4] {
        let o = run_on_tiers::<Baseline>(
            smp,
            AccelMode::Jit,
            Tiers::BASELINE,
            0,
            ppc64emu::jit::CODE_CACHE_LIMIT,
        );
        assert_eq!(checksum(&o), reference, "baseline tier smp={smp}");
        let jit = o.report.vcpus[0]
            .jit
            .as_ref()
            .expect("JIT counters in the report");
        let b = jit
            .baseline
            .as_ref()
            .expect("baseline counters in the report");
        assert!(
            b.counters.blocks_translated > 0 && b.counters.links > 0,
            "{b:?}"
        );
        assert_eq!(
            jit.blocks_translated, 0,
            "no Cranelift translation without that tier"
        );
        assert_eq!(jit.cold_blocks, 0, "threshold 0 translates every block");
    }
    let o = run_on_tiers::<CputlbNoBql>(
        4,
        AccelMode::Jit,
        Tiers::BASELINE,
        0,
        ppc64emu::jit::CODE_CACHE_LIMIT,
    );
    assert_eq!(checksum(&o), reference, "cputlb-no-bql smp=4");
}

/// Both tiers with a low promotion threshold, and the baseline code cache flushed often.
#[cfg(target_arch = "x86_64")]
#[test]
fn baseline_then_cranelift_and_tiny_cache_compute_the_same_checksum() {
    let reference = reference_checksum();
    for smp in [1, 2] {
        let o = run_on_tiers::<Baseline>(smp, AccelMode::Jit, Tiers::BOTH, 2, 64 << 10);
        assert_eq!(checksum(&o), reference, "both tiers smp={smp}");
        let jit = o.report.vcpus[0].jit.as_ref().expect("JIT counters");
        assert!(jit.cache_flushes > 0, "64 KiB of baseline code flushes");
    }
}
