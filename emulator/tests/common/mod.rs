//! The bundled guest as the system tests run it: a small build on the machine, its checksum,
//! and the interpreter's checksum the runs are compared with.

#![allow(dead_code)]

use ppc64emu::machine::pseries::MachineExit;
use ppc64emu::machine::pseries::boot::{Console, RunOutcome, run_with};
use ppc64emu::machine::pseries::config::{AccelMode, MachineConfig};
use ppc64emu::machine::pseries::loader::plan_from_files;
use ppc64emu::sync::{Baseline, Strategy};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// A small guest: a few compile jobs, two directory links, enough for flushes, IPIs and cedes.
pub const BOOTARGS: &str = "units=3 size=4";

/// The machine that runs the small guest with `smp` vCPUs (and as many jobs).
pub fn mkbench_config(smp: usize, accel: AccelMode) -> MachineConfig {
    MachineConfig {
        smp,
        ram_bytes: 512 << 20,
        kernel: Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../workloads/mkbench/mkbench.elf"
        ))),
        append: format!("jobs={smp} {BOOTARGS}"),
        accel,
        timeout: Some(Duration::from_secs(300)),
        ..MachineConfig::default()
    }
}

/// Runs `cfg` under strategy `S`; the guest must power off without reporting an error.
pub fn run_mkbench<S: Strategy>(cfg: &MachineConfig) -> RunOutcome {
    let smp = cfg.smp;
    let plan = plan_from_files(cfg).expect("boot plan");
    let out = run_with::<S>(cfg, &plan, Console::Capture).expect("machine runs");
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

/// The checksum of the guest's result line.
pub fn checksum(o: &RunOutcome) -> String {
    let line = o.report.result_line.as_deref().expect("result line");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("checksum="))
        .expect("checksum")
        .to_string()
}

/// The checksum of the interpreter with one vCPU under the baseline strategy, run once for
/// all tests of a binary.
pub fn reference_checksum() -> String {
    static REFERENCE: OnceLock<String> = OnceLock::new();
    REFERENCE
        .get_or_init(|| {
            checksum(&run_mkbench::<Baseline>(&mkbench_config(
                1,
                AccelMode::Interp,
            )))
        })
        .clone()
}
