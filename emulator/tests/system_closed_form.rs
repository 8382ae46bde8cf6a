//! The closed form of mkbench's `closed=K` mode on virtual time at small N (its own test
//! binary, so no other test competes for the host's cores while it measures).
//!
//! Every vCPU computes, then makes K hypercalls, each done under the BQL. With only the BQL
//! shared, N vCPUs finish in max(work / N, the BQL's total hold): below the knee the
//! speedup is N, past it the BQL's hold is the whole run. The serialized time is the hold
//! measured in each run (thread CPU time varies with what the other core runs), so the
//! check is of virtual time's queue, not of the host's caches. The committed figures
//! against the closed form of the N = 1 run, N = 1..28: scripts/virtual-validate closed.

mod common;

use common::{checksum, mkbench_config, run_mkbench};
use ppc64emu::machine::pseries::boot::RunOutcome;
use ppc64emu::machine::pseries::config::{AccelMode, ClockMode};
use ppc64emu::sync::Baseline;

fn run(n: usize, append: &str) -> RunOutcome {
    let mut cfg = mkbench_config(n, AccelMode::Jit);
    cfg.clock = ClockMode::Virtual {
        quantum_ns: 500_000,
    };
    cfg.append = append.to_string();
    run_mkbench::<Baseline>(&cfg)
}

fn bql_hold_s(o: &RunOutcome) -> f64 {
    o.report.locks["bql.hcall"].virtual_hold_ns as f64 / 1e9
}

/// Far below the knee (little work under the BQL), two vCPUs halve the time.
#[test]
fn below_the_knee_the_speedup_is_n() {
    let append = "units=400 size=40 closed=1";
    let one = run(1, append);
    let two = run(2, append);
    assert_eq!(checksum(&one), checksum(&two));
    let knee = one.report.guest_elapsed_s / bql_hold_s(&one);
    assert!(
        knee > 8.0,
        "the guest is no longer far below its knee: {knee:.1}"
    );
    let speedup = one.report.guest_elapsed_s / two.report.guest_elapsed_s;
    assert!(
        (speedup / 2.0 - 1.0).abs() <= 0.10,
        "N = 2: speedup {speedup:.2}, closed form 2 (knee {knee:.1})"
    );
}

/// Past the knee (most of a round under the BQL), the run takes as long as the BQL was held,
/// however many vCPUs share it: the queue serialises the holds and adds nothing else.
#[test]
fn past_the_knee_the_bql_hold_is_the_whole_run() {
    let append = "units=4000 size=0 closed=1";
    let one = run(1, append);
    let knee = one.report.guest_elapsed_s / bql_hold_s(&one);
    assert!(
        knee < 4.0,
        "the guest no longer saturates the BQL at N = 4: knee {knee:.1}"
    );
    let four = run(4, append);
    assert_eq!(checksum(&one), checksum(&four));
    let (elapsed, hold) = (four.report.guest_elapsed_s, bql_hold_s(&four));
    assert!(
        (elapsed / hold - 1.0).abs() <= 0.10,
        "N = 4: {elapsed:.4} s elapsed, the BQL held {hold:.4} s"
    );
}
