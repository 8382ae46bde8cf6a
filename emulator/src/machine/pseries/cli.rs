//! The system emulator's entry: parse, validate, prepare the boot, run, map the end of the
//! run to the exit status.
//!
//! Exit status:
//! - 0 ([`EXIT_POWER_OFF`]): the guest powered off (RTAS power-off carries no status; QEMU
//!   exits 0 too), or rebooted under `-no-reboot`; also `--dump-dtb`, `--help`, `--version`.
//! - 1 ([`EXIT_HOST_ERROR`]): host-side error: a kernel, initrd or bios that cannot be read,
//!   is malformed or does not fit in RAM; an I/O error; an emulator fault.
//! - 2 ([`EXIT_USAGE`]): bad command line.
//! - 3 ([`EXIT_OS_TERM`]): the guest called ibm,os-term (Linux does on a panic).
//! - 4 ([`EXIT_CHECKSTOP`]): checkstop, a machine check with `MSR[ME]` = 0.
//! - 124 ([`EXIT_TIMEOUT`]): `--timeout` expired (the status `timeout(1)` uses).

use super::config::{self, Command, HELP, MachineConfig};
use super::{MachineExit, boot, loader};
use crate::machine::STRATEGY_NAME;

pub const EXIT_POWER_OFF: i32 = 0;
pub const EXIT_HOST_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_OS_TERM: i32 = 3;
pub const EXIT_CHECKSTOP: i32 = 4;
pub const EXIT_TIMEOUT: i32 = 124;

/// The `--version` line: `ppc64emu <version> (strategy: <name>)`.
pub fn version_line() -> String {
    format!(
        "ppc64emu {} (strategy: {STRATEGY_NAME})",
        env!("CARGO_PKG_VERSION")
    )
}

/// Entry of the system emulator; returns the process exit status.
pub fn main(args: &[String]) -> i32 {
    match config::parse(args) {
        Err(e) => usage_error(&e.0),
        Ok(Command::Help) => {
            print!("{HELP}");
            EXIT_POWER_OFF
        }
        Ok(Command::Version) => {
            println!("{}", version_line());
            EXIT_POWER_OFF
        }
        Ok(Command::Run(cfg)) => run(*cfg),
    }
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("ppc64emu: {msg}");
    eprintln!("Try 'ppc64emu --help' for the options.");
    EXIT_USAGE
}

fn run(cfg: MachineConfig) -> i32 {
    for w in &cfg.warnings {
        eprintln!("ppc64emu: warning: {w}");
    }
    let checked = if cfg.dump_dtb.is_some() {
        config::validate_common(&cfg)
    } else {
        config::validate_for_run(&cfg)
    };
    if let Err(e) = checked {
        return usage_error(&e.0);
    }
    let plan = match loader::plan_from_files(&cfg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ppc64emu: {e}");
            return EXIT_HOST_ERROR;
        }
    };
    if let Some(path) = &cfg.dump_dtb {
        return match std::fs::write(path, &plan.fdt) {
            Ok(()) => EXIT_POWER_OFF,
            Err(e) => {
                eprintln!(
                    "ppc64emu: cannot write the device tree to '{}': {e}",
                    path.display()
                );
                EXIT_HOST_ERROR
            }
        };
    }
    let timeout = cfg.timeout;
    match boot::run(cfg, plan) {
        Ok(exit) => exit_status(&exit, timeout),
        Err(e) => {
            eprintln!("ppc64emu: error: {e:#}");
            EXIT_HOST_ERROR
        }
    }
}

/// Reports how the run ended and returns the exit status for it.
pub fn exit_status(exit: &MachineExit, timeout: Option<std::time::Duration>) -> i32 {
    match exit {
        MachineExit::PowerOff | MachineExit::Reboot => EXIT_POWER_OFF,
        MachineExit::OsTerm(msg) => {
            eprintln!("ppc64emu: the guest terminated (ibm,os-term): {msg}");
            EXIT_OS_TERM
        }
        MachineExit::Checkstop(why) => {
            eprintln!("ppc64emu: checkstop: {why}");
            EXIT_CHECKSTOP
        }
        MachineExit::ClockDiverged(why) => {
            eprintln!("ppc64emu: error: {why}");
            EXIT_HOST_ERROR
        }
        MachineExit::Timeout => {
            let secs = timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
            eprintln!("ppc64emu: guest did not power off within {secs} s (--timeout)");
            EXIT_TIMEOUT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [
            exit_status(&MachineExit::PowerOff, None),
            exit_status(&MachineExit::OsTerm("panic".into()), None),
            exit_status(&MachineExit::Checkstop("mc".into()), None),
            exit_status(&MachineExit::Timeout, None),
            EXIT_HOST_ERROR,
            EXIT_USAGE,
        ];
        assert_eq!(codes[0], 0);
        for (i, a) in codes.iter().enumerate() {
            for b in &codes[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(exit_status(&MachineExit::Reboot, None), 0);
    }

    #[test]
    fn version_names_the_strategy() {
        let v = version_line();
        assert!(v.starts_with("ppc64emu "), "{v}");
        assert!(v.ends_with(&format!("(strategy: {STRATEGY_NAME})")), "{v}");
    }
}
