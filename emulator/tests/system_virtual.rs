//! Virtual host time on the bundled guest (`--clock virtual`, emulator/src/sync/vclock/):
//! the same results as host time and the lock invariants of docs/locking.md in the virtual
//! runs. The closed form is a benchmark, not a test (its speedups are timings):
//! scripts/virtual-validate closed; its guest's results are checked here.

mod common;

use common::{checksum, mkbench_config, reference_checksum, run_mkbench};
use ppc64emu::machine::pseries::boot::RunOutcome;
use ppc64emu::machine::pseries::config::{AccelMode, ClockMode, MachineConfig};
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Strategy};

fn virtual_config(smp: usize, append: Option<&str>) -> MachineConfig {
    let mut cfg = mkbench_config(smp, AccelMode::Jit);
    cfg.clock = ClockMode::Virtual {
        quantum_ns: 500_000,
    };
    if let Some(a) = append {
        cfg.append = a.to_string();
    }
    cfg
}

fn acquisitions(o: &RunOutcome, site: &str) -> u64 {
    o.report.locks.get(site).map_or(0, |s| s.acquisitions)
}

fn check_strategy<S: Strategy>() {
    let reference = reference_checksum();
    for smp in [1, 2, 4] {
        let mut cfg = virtual_config(smp, None);
        // Four vCPUs share one host core (sync/vclock/cores.rs), whatever the host has.
        cfg.host_cores = (smp == 4).then_some(1);
        let o = run_mkbench::<S>(&cfg);
        assert_eq!(checksum(&o), reference, "{} smp={smp}", S::NAME);
        assert_eq!(o.report.clock.kind, "virtual");
        assert_eq!(o.report.clock.quantum_ns, Some(500_000));
        if smp == 4 {
            assert_eq!(o.report.clock.host_cores, Some(1));
        }
        for v in &o.report.vcpus {
            let (virt, cpu) = (v.virtual_ns.unwrap(), v.cpu_ns.unwrap());
            // The clock is CPU time plus waits and idle jumps: never less than its CPU time.
            assert!(
                virt >= cpu,
                "{} smp={smp} vcpu{}: {virt} < {cpu}",
                S::NAME,
                v.index
            );
            assert!(
                cpu > 0,
                "{} smp={smp} vcpu{} ran no CPU time",
                S::NAME,
                v.index
            );
        }
        // The guest's elapsed time is virtual: the run's clocks reach at least that far.
        let latest = o
            .report
            .vcpus
            .iter()
            .map(|v| v.virtual_ns.unwrap())
            .max()
            .unwrap();
        assert!(o.report.guest_elapsed_s * 1e9 <= latest as f64 + 1e3);
        if smp < 2 {
            continue;
        }
        let jobs: u64 = o
            .report
            .vcpus
            .iter()
            .map(|v| v.flush_jobs_run + v.flush_jobs_elided)
            .sum();
        assert!(jobs > 0, "{} smp={smp}: no flush jobs", S::NAME);
        if S::BQL_OUTSIDE_GUEST {
            assert!(acquisitions(&o, "bql.exec_loop") > 0);
        } else {
            assert_eq!(
                acquisitions(&o, "bql.exec_loop"),
                0,
                "{} smp={smp}",
                S::NAME
            );
            assert_eq!(
                acquisitions(&o, "bql.idle_wait"),
                0,
                "{} smp={smp}",
                S::NAME
            );
        }
        if S::TLB_FLUSH_WITHOUT_BQL {
            assert_eq!(
                acquisitions(&o, "bql.tlb_flush_item"),
                0,
                "{} smp={smp}",
                S::NAME
            );
        } else {
            assert_eq!(
                acquisitions(&o, "bql.tlb_flush_item"),
                jobs,
                "{} smp={smp}",
                S::NAME
            );
        }
    }
}

#[test]
fn baseline_on_virtual_time_same_checksum_and_invariants() {
    check_strategy::<Baseline>();
}

#[test]
fn per_cpu_lock_on_virtual_time_same_checksum_and_invariants() {
    check_strategy::<PerCpuLock>();
}

#[test]
fn cputlb_no_bql_on_virtual_time_same_checksum_and_invariants() {
    check_strategy::<CputlbNoBql>();
}

/// mkbench's `mix64`, for the closed-form loop's checksum computed here.
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(0x7fb5_d329_728e_a185);
    x ^= x >> 27;
    x = x.wrapping_mul(0x81da_def4_bc2d_d44d);
    x ^ (x >> 33)
}

/// The closed-form guest (`closed=K`) with `hold=KB`, the long BQL hold of
/// scripts/virtual-validate closed: every round's result reaches the checksum whichever vCPU
/// ran it, each round makes exactly one H_LOGICAL_MEMOP, each under the BQL.
#[test]
fn closed_form_guest_with_long_holds() {
    let (rounds, size, seed) = (240u64, 1u64, 1u64);
    let want = (0..rounds).fold(0u64, |sum, r| {
        let x = (0..size * 1000).fold(mix64(seed + r), |x, i| {
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(x >> 29)
                .wrapping_add(i)
        });
        sum.wrapping_add(x)
    });
    for smp in [1, 3] {
        let append = format!("units={rounds} size={size} seed={seed} closed=1 hold=4");
        let o = run_mkbench::<Baseline>(&virtual_config(smp, Some(&append)));
        assert_eq!(checksum(&o), format!("{want:#018x}"), "smp={smp}");
        assert_eq!(
            o.report.hcalls.get("h_logical_memop"),
            Some(&rounds),
            "smp={smp}"
        );
        assert!(acquisitions(&o, "bql.hcall") >= rounds, "smp={smp}");
    }
}
