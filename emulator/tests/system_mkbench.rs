//! The bundled guest on the emulator: every strategy and vCPU count computes the same checksum,
//! and the run reports hold the lock invariants of docs/locking.md.

mod common;

use common::{checksum, mkbench_config, reference_checksum, run_mkbench};
use ppc64emu::machine::pseries::boot::RunOutcome;
use ppc64emu::machine::pseries::config::AccelMode;
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Strategy};

fn run<S: Strategy>(smp: usize) -> RunOutcome {
    run_mkbench::<S>(&mkbench_config(smp, AccelMode::Interp))
}

fn lock(o: &RunOutcome, site: &str) -> u64 {
    o.report.locks.get(site).map_or(0, |s| s.acquisitions)
}

fn flush_jobs_run(o: &RunOutcome) -> u64 {
    o.report
        .vcpus
        .iter()
        .map(|v| v.flush_jobs_run + v.flush_jobs_elided)
        .sum()
}

fn check_strategy<S: Strategy>(reference: &str) {
    for smp in [1, 2, 4, 8] {
        let o = run::<S>(smp);
        assert_eq!(checksum(&o), reference, "{} smp={smp}", S::NAME);
        assert_eq!(o.report.strategy, S::NAME);
        assert_eq!(o.report.smp, smp);
        assert_eq!(o.report.guest_elapsed_source, "result-line");
        if smp < 2 {
            continue;
        }
        let jobs = flush_jobs_run(&o);
        assert!(
            jobs > 0,
            "{} smp={smp}: no cross-vCPU flush jobs ran",
            S::NAME
        );
        if S::BQL_OUTSIDE_GUEST {
            assert!(lock(&o, "bql.exec_loop") > 0);
        } else {
            assert_eq!(lock(&o, "bql.exec_loop"), 0, "{} smp={smp}", S::NAME);
            assert_eq!(lock(&o, "bql.idle_wait"), 0, "{} smp={smp}", S::NAME);
        }
        if S::TLB_FLUSH_WITHOUT_BQL {
            assert_eq!(lock(&o, "bql.tlb_flush_item"), 0, "{} smp={smp}", S::NAME);
        } else {
            assert_eq!(
                lock(&o, "bql.tlb_flush_item"),
                jobs,
                "{} smp={smp}",
                S::NAME
            );
        }
    }
}

#[test]
fn baseline_same_checksum_for_every_n() {
    check_strategy::<Baseline>(&reference_checksum());
}

#[test]
fn per_cpu_lock_same_checksum_for_every_n() {
    check_strategy::<PerCpuLock>(&reference_checksum());
}

#[test]
fn cputlb_no_bql_same_checksum_for_every_n() {
    check_strategy::<CputlbNoBql>(&reference_checksum());
}
