//! The bundled guest on the emulator: every strategy and vCPU count computes the same checksum,
//! and the run reports hold the lock invariants of LOCKING.md.

use ppc64emu::machine::pseries::MachineExit;
use ppc64emu::machine::pseries::boot::{Console, RunOutcome, run_with};
use ppc64emu::machine::pseries::config::{AccelMode, MachineConfig};
use ppc64emu::machine::pseries::loader::plan_from_files;
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Strategy};
use std::path::PathBuf;
use std::time::Duration;

/// A small guest: a few compile jobs, two directory links, enough for flushes, IPIs and cedes.
const BOOTARGS: &str = "units=3 size=4";

fn run<S: Strategy>(smp: usize) -> RunOutcome {
    let cfg = MachineConfig {
        smp,
        ram_bytes: 512 << 20,
        kernel: Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../workloads/mkbench/mkbench.elf"
        ))),
        append: format!("jobs={smp} {BOOTARGS}"),
        accel: AccelMode::Interp,
        timeout: Some(Duration::from_secs(300)),
        ..MachineConfig::default()
    };
    let plan = plan_from_files(&cfg).expect("boot plan");
    let out = run_with::<S>(&cfg, &plan, Console::Capture).expect("machine runs");
    let console = String::from_utf8_lossy(&out.console);
    assert_eq!(
        out.exit,
        MachineExit::PowerOff,
        "{} smp={smp}: {console}",
        S::NAME
    );
    assert!(
        !console.contains("MKBENCH-ERROR"),
        "{} smp={smp}: {console}",
        S::NAME
    );
    out
}

fn checksum(o: &RunOutcome) -> String {
    let line = o.report.result_line.as_deref().expect("result line");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("checksum="))
        .expect("checksum")
        .to_string()
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

fn reference() -> String {
    checksum(&run::<Baseline>(1))
}

#[test]
fn baseline_same_checksum_for_every_n() {
    check_strategy::<Baseline>(&reference());
}

#[test]
fn per_cpu_lock_same_checksum_for_every_n() {
    check_strategy::<PerCpuLock>(&reference());
}

#[test]
fn cputlb_no_bql_same_checksum_for_every_n() {
    check_strategy::<CputlbNoBql>(&reference());
}
