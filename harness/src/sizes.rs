//! Every number that sizes a sweep lives here, so that calibrating the guest against the real
//! emulator is a one-file change.
//!
//! The targets (docs/harness.md): a default sweep that finishes in about five minutes on a
//! 2-core machine (one vCPU ≈ 5 s), a quick sweep of about a minute, and a full sweep whose job
//! graph (at least 8 × 28 compile units) never limits the speedup.
//!
//! The default and quick guests are sized for ppc64emu's Cranelift JIT (`--accel jit`, the
//! emulator's default, which the sweep uses). Measured on the project's shared 2-core machine
//! while other builds kept its 1-minute load average between 6 and 14, with the release build
//! of each strategy, `-smp N -m 1G -append "jobs=N units=U size=S" --accel jit|interp`, on the
//! guest of f4c64c8 (compile → assembler pipes); JIT of 47991da, interpreter of da0a56b. "CPU"
//! is the user time of the emulator process (all threads), about what a run takes on a quiet
//! host; "guest" is the guest-measured time on the loaded host:
//!
//! | units × size | N | strategy | instructions | JIT: CPU s | guest s (load) | interp: CPU s | guest s (load) |
//! |---|---|---|---|---|---|---|---|
//! | 8 × 6 | 1 | baseline | 68 M | 1.2 | 1.5 (8) | 2.1 | 5.8 (13) |
//! | 8 × 6 | 2 | baseline | 68 M | – | – | 2.0 | 6.8 (13) |
//! | 16 × 8 | 1 | baseline | 183 M | 1.8 | 2.4 (8) | 5.6 | 18.5 (14) |
//! | 16 × 8 | 2 | baseline | 183 M | – | – | 5.3 | 12.8 (14) |
//! | 8 × 20 | 1 | baseline | 253 M | 2.1 | 3.0 (8) | – | – |
//! | 8 × 20 | 2 | baseline | 258 M | 2.4 | 3.5 (8) | – | – |
//! | 16 × 40 | 1 | baseline | 955 M | 5.5 | 8.8 (8) | – | – |
//! | 16 × 40 | 2 | per-cpu-lock | 958 M | 5.7 | 6.1 (8) | – | – |
//! | 16 × 40 | 4 | cputlb-no-bql | 966 M | 6.0 | 7.2 (8) | – | – |
//! | 6 × 400 (the guest's calibrated default) | 1 | baseline | 4.4 G | 24.2 | 36.5 (6) | 115 | 450 (13) |
//!
//! Re-measured after the JIT gained tiered translation and block chaining (d767d17) and the
//! guest queued its assemblers behind later compiles (6371d44), quiet host (load < 1),
//! release build, baseline, guest-measured time:
//!
//! | units × size | N | instructions | JIT guest s | QEMU 7.2 guest s |
//! |---|---|---|---|---|
//! | 8 × 30 | 1 | 384 M | 1.59 | – |
//! | 16 × 40 | 1 | 955 M | 3.20 | 1.80 |
//! | 16 × 40 | 2 | 955 M | 1.79 | 0.99 |
//! | 16 × 60 | 1 | 1.45 G | 4.48 | – |
//!
//! so the default became `units=16 size=60` (T(1) ≈ 4.5 s) and quick `units=8 size=30`
//! (T(1) ≈ 1.6 s). The older measurements below (JIT before those changes) explain the rest.
//!
//! Since the default sweep runs on virtual host time over N = 1 … 28 ([`FULL_CPUS`]), its guest
//! needs work for 28 vCPUs: 16 units left N > 16 idle. Measured at 9bc41a7 on the quiet 2-core
//! host, one run each, virtual time, guest-measured seconds (wall in brackets):
//!
//! | units × size | baseline N = 1 | baseline N = 28 | cputlb-no-bql N = 1 | cputlb-no-bql N = 28 |
//! |---|---|---|---|---|
//! | 16 × 60 | 1.07 (1.16) | 0.159 (1.03) | 1.13 (1.19) | 0.141 (0.86) |
//! | 56 × 16 | 0.97 (1.01) | 0.131 (0.93) | 1.09 (1.17) | 0.080 (0.83) |
//! | 84 × 12 | 1.37 (1.42) | 0.174 (1.55) | 1.21 (1.26) | 0.093 (1.01) |
//! | 56 × 24 | 1.49 (1.53) | 0.171 (1.33) | 1.48 (1.53) | 0.110 (1.10) |
//!
//! The default is `units=56 size=16`: two units per vCPU at N = 28, T(1) ≈ 1 s, every run about
//! a second of wall time, so 9 N × 3 strategies × 5 repetitions take about 2.5 minutes.
//!
//! The JIT ran ≈ 180 M guest instructions per CPU-second on long runs, with ≈ 1 s of
//! translation and boot per run (1.5 s of translation for 6 × 400); the interpreter runs
//! 31–38 M. The work grows as units × size (≈ 1.4 M instructions per unit and size step at
//! small sizes, 1.8 M at size 400, where the links' sorting grows). Hence:
//!
//! - default (then) `units=16 size=40`: T(1) ≈ 5.5 s of CPU, the target's T(1) ≈ 5 s. N = 1, 2, 4 ×
//!   5 repetitions × 3 strategies (45 runs) is ≈ 3.5 min on a quiet 2-core host and ≈ 6 min
//!   at load 8 (the sweep warns when it will overshoot its budget). 16 units are four
//!   directories: 18 compiles, 18 assemblers, 4 directory links and the final link, so the job
//!   graph keeps four vCPUs busy most of the time.
//! - quick (then) `units=8 size=20`: T(1) ≈ 2 s of CPU; its 18 runs take ≈ 35 s on a quiet host and
//!   ≈ 1 min at load 8. Two directories, so N = 2 has parallel work.
//! - With `--emu-args "--accel interp"` every run takes 3–5 × longer (more for larger sizes).
//!
//! These guests are small against the calibrated one (`units=6 size=400`, whose per-second
//! hypercall, fault and process rates match a real `make -j N` on QEMU, where it takes ≈ 10 s
//! of CPU at N = 1): on ppc64emu it takes 24 s of CPU under the JIT and 115 s under the
//! interpreter (with QEMU's checksum, `0x38c1c38f83d1558a`, on both), too long for T(1) ≈ 5 s.
//! Shrinking `size` keeps the mix of what the guest does (≈ 3 H_ENTER per fault, 4 entries per
//! H_BULK_REMOVE, a teardown per process, a pipe per compile) and raises the process rate per
//! instruction; the per-second rates of hypercalls and faults follow the emulator's speed, so
//! they are ≈ 2.4 × below the calibrated ones under the JIT (≈ 11 × under the interpreter:
//! 310 H_ENTER per CPU-second against 3561) whatever the size. As the JIT gets faster, grow
//! `size` by the same factor and re-measure with `lockscale sweep --cpus 1 --reps 3`.
//!
//! The full guest has 8 × 28 units of the calibrated `size=400`: it is meant for a many-core
//! host (its N = 1 run alone takes ≈ 15 min of CPU under the JIT, over an hour under the
//! interpreter).

use serde::{Deserialize, Serialize};

use crate::workload::Workload;

/// Guest work for one sweep: `units=` compile units of `size=` work each, seeded by `seed=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestSize {
    pub units: u32,
    pub size: u32,
    pub seed: u32,
}

/// Which preset a sweep uses; `Custom` when the command line overrode the vCPU list or sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Default,
    Quick,
    Full,
    Custom,
}

/// The default guest: one vCPU takes about 1 s under the JIT, and N = 28 has two units per
/// vCPU (see above).
pub const DEFAULT_GUEST: GuestSize = GuestSize {
    units: 56,
    size: 16,
    seed: 1,
};
/// The `--quick` guest: small enough for CI smoke tests (about 35 s of runs for the whole
/// sweep on a quiet 2-core host under the JIT).
pub const QUICK_GUEST: GuestSize = GuestSize {
    units: 8,
    size: 30,
    seed: 1,
};
/// The `--full` guest: 8 × 28 units so that at N = 28 every vCPU still has work queued.
pub const FULL_GUEST: GuestSize = GuestSize {
    units: 8 * 28,
    size: 400,
    seed: 1,
};

/// Repetitions per point. Five is the minimum the gate accepts at α = 0.01 (1/C(10,5) = 1/252).
pub const DEFAULT_REPS: u32 = 5;
pub const QUICK_REPS: u32 = 3;
pub const FULL_REPS: u32 = 5;

/// `--quick` runs N = 1 and 2 only.
pub const QUICK_CPUS: &[u32] = &[1, 2];
/// The posted sweep.
pub const FULL_CPUS: &[u32] = &[1, 2, 4, 8, 12, 16, 20, 24, 28];
/// The default sweep goes up to twice the host's cores, never beyond this.
pub const MAX_DEFAULT_CPUS: u32 = 28;

/// Per-run timeout handed to the emulator (`--timeout`); the harness itself kills a run that
/// outlives it by [`kill_grace`].
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;
pub const QUICK_TIMEOUT_S: f64 = 120.0;
pub const FULL_TIMEOUT_S: f64 = 3600.0;

/// Wall-clock budget of a whole sweep (after the builds) per mode; exceeding it only warns.
pub const DEFAULT_BUDGET_S: f64 = 300.0;
pub const QUICK_BUDGET_S: f64 = 60.0;

/// Guest memory for every emulator in a sweep.
pub const GUEST_MEMORY: &str = "1G";

// ------------------------------------------------------------------ the Linux guests
//
// `linux-make` (see guest/ and workloads/linux/README.md): Debian's kernel and gcc compile a
// generated project of `units` files × `size` functions, plus main.c, and link it; the
// guest's clock times `make -j N` alone (not the boot). What one compile costs is mostly gcc
// starting up (cc1, as, collect2, ld), so `units` sets the work and `size` its grain.
// Measurements: workloads/linux/README.md ("Sizes").

/// Guest memory of the Linux guests, as the calibration runs on QEMU had it
/// (the reference runs of workloads/linux/README.md); the HPT is sized from it (2^24 bytes).
pub const LINUX_GUEST_MEMORY: &str = "2G";
/// `linux-make --quick`: N = 1 and 2, sized so that the sweep of the three strategies and
/// QEMU stays within about ten minutes on a 2-core host. Measured on the 2-core host (release
/// build, baseline, load 0.2–3.8; guest clock): the 4 × 4 image boots to /init in 28–34 s and
/// makes in 85 s at N = 1, 68 s at N = 2 (QEMU 7.2: 64 s at N = 1 with load 11, 21 s boot), so
/// one repetition of that sweep is ≈ 13 min; the quick image is therefore 2 × 2 (3 compiles and
/// a link, estimated ≈ 45 s of make at N = 1 on ours, ≈ 75 s a run with the boot) with one
/// repetition: 6 runs of ours and 2 of QEMU ≈ 9 min. Re-measure with
/// `lockscale sweep --workload linux-make --quick --peer qemu=qemu-system-ppc64`.
pub const LINUX_QUICK_GUEST: GuestSize = GuestSize {
    units: 2,
    size: 2,
    seed: 1,
};
pub const LINUX_QUICK_REPS: u32 = 1;
/// `linux-make` default: the calibration project's shape (16 files × 12 functions + main.c).
pub const LINUX_DEFAULT_GUEST: GuestSize = GuestSize {
    units: 16,
    size: 12,
    seed: 1,
};
pub const LINUX_DEFAULT_REPS: u32 = 3;
/// `linux-make --full`: 8 × 28 files so that the job graph never limits N = 28.
pub const LINUX_FULL_GUEST: GuestSize = GuestSize {
    units: 8 * 28,
    size: 12,
    seed: 1,
};
/// Per-run timeouts of the Linux guests (boot included).
pub const LINUX_QUICK_TIMEOUT_S: f64 = 600.0;
pub const LINUX_DEFAULT_TIMEOUT_S: f64 = 1800.0;
pub const LINUX_FULL_TIMEOUT_S: f64 = 4.0 * 3600.0;
pub const LINUX_QUICK_BUDGET_S: f64 = 600.0;

// `kernel-make` (see kernel_tree.rs and workloads/kernel/README.md): Debian's linux-source-6.1,
// `tinyconfig` plus workloads/kernel/pseries-tiny.config, compiled by the guest's gcc. A
// kernel-make image is identified by `units`: the number of directories of the `--quick`
// subset, or 0 for the whole vmlinux; `size` is always 0. The host listing build of this
// configuration (6.1.192, cross gcc 12) makes 645 objects (34 of them host tools'); init/ and
// mm/ hold 57, and Kbuild's `prepare` adds about 40 (dtc, modpost's helpers, the vDSO,
// asm-offsets): about 100 compiles for `--quick`.

/// The `--quick` subset: `make -j N` of these directories (with the `prepare` every directory
/// build starts with).
pub const KERNEL_QUICK_DIRS: &[&str] = &["init", "mm"];
pub const KERNEL_QUICK_GUEST: GuestSize = GuestSize {
    units: KERNEL_QUICK_DIRS.len() as u32,
    size: 0,
    seed: 1,
};
/// The default and `--full` kernel-make: the whole vmlinux.
pub const KERNEL_FULL_GUEST: GuestSize = GuestSize {
    units: 0,
    size: 0,
    seed: 1,
};
/// Guest memory of the whole-vmlinux kernel-make. The guest's root file system is the
/// initramfs on tmpfs, which may fill half of RAM: at 2 GiB the locked image's build ran out
/// of space ("No space left on device" writing `.cmd` files of drivers/pci and lib/, 1026 s
/// into `make -j2 vmlinux` on ours, 2026-12-05), so the whole build gets 4 GiB. The
/// `--quick` subset stays at [`LINUX_GUEST_MEMORY`], as its recorded runs had.
pub const KERNEL_FULL_GUEST_MEMORY: &str = "4G";
/// One repetition: a whole-vmlinux run at N = 1 is about an hour under TCG-class speed.
pub const KERNEL_REPS: u32 = 1;
/// Per-run timeouts of kernel-make (boot included; the tree comes configured).
pub const KERNEL_QUICK_TIMEOUT_S: f64 = 3.0 * 3600.0;
pub const KERNEL_FULL_TIMEOUT_S: f64 = 12.0 * 3600.0;
/// The one configuration run of kernel-make's tree at image build time (guest/): vCPUs and
/// timeout. Measured in the guest before the timed make, on ours: 668 s at N = 2 (loaded
/// host), 939 s at N = 1 (loaded); on QEMU 7.2 1224 s at N = 2 (quiet).
pub const PREPARE_CPUS: u32 = 2;
pub const PREPARE_TIMEOUT_S: f64 = 3600.0;

/// Repetitions per side for `gate --base-rev/--candidate-rev` when not told otherwise.
pub const GATE_REPS: u32 = 5;

/// How long the harness waits past the emulator's own `--timeout` before killing it: peers
/// have no timeout option, and ours should stop by itself first.
pub fn kill_grace(timeout_s: f64) -> f64 {
    2.0 + 0.1 * timeout_s
}

/// The default vCPU list: 1, 2, 4, … up to 2 × host cores, capped at 28 (the cap itself is
/// included when it is not a power of two).
pub fn default_cpus(host_logical_cores: u32) -> Vec<u32> {
    let cap = (2 * host_logical_cores.max(1)).min(MAX_DEFAULT_CPUS);
    let mut v = Vec::new();
    let mut n = 1;
    while n <= cap {
        v.push(n);
        n *= 2;
    }
    if *v.last().unwrap_or(&0) != cap {
        v.push(cap);
    }
    v
}

/// Preset values of a mode: (guest, reps, cpus, timeout, budget).
pub struct Preset {
    pub guest: GuestSize,
    pub reps: u32,
    pub cpus: Vec<u32>,
    pub timeout_s: f64,
    pub budget_s: Option<f64>,
    /// Guest memory (`-m`).
    pub memory: &'static str,
}

pub fn preset(workload: Workload, mode: Mode, host_logical_cores: u32) -> Preset {
    if workload == Workload::KernelMake {
        return kernel_preset(mode, host_logical_cores);
    }
    if workload.is_linux() {
        return linux_preset(mode, host_logical_cores);
    }
    match mode {
        Mode::Quick => Preset {
            guest: QUICK_GUEST,
            reps: QUICK_REPS,
            cpus: QUICK_CPUS.to_vec(),
            timeout_s: QUICK_TIMEOUT_S,
            budget_s: Some(QUICK_BUDGET_S),
            memory: GUEST_MEMORY,
        },
        Mode::Full => Preset {
            guest: FULL_GUEST,
            reps: FULL_REPS,
            cpus: FULL_CPUS.to_vec(),
            timeout_s: FULL_TIMEOUT_S,
            budget_s: None,
            memory: GUEST_MEMORY,
        },
        Mode::Default | Mode::Custom => Preset {
            guest: DEFAULT_GUEST,
            reps: DEFAULT_REPS,
            cpus: default_cpus(host_logical_cores),
            timeout_s: DEFAULT_TIMEOUT_S,
            budget_s: Some(DEFAULT_BUDGET_S),
            memory: GUEST_MEMORY,
        },
    }
}

fn linux_preset(mode: Mode, host_logical_cores: u32) -> Preset {
    match mode {
        Mode::Quick => Preset {
            guest: LINUX_QUICK_GUEST,
            reps: LINUX_QUICK_REPS,
            cpus: QUICK_CPUS.to_vec(),
            timeout_s: LINUX_QUICK_TIMEOUT_S,
            budget_s: Some(LINUX_QUICK_BUDGET_S),
            memory: LINUX_GUEST_MEMORY,
        },
        Mode::Full => Preset {
            guest: LINUX_FULL_GUEST,
            reps: FULL_REPS,
            cpus: FULL_CPUS.to_vec(),
            timeout_s: LINUX_FULL_TIMEOUT_S,
            budget_s: None,
            memory: LINUX_GUEST_MEMORY,
        },
        Mode::Default | Mode::Custom => Preset {
            guest: LINUX_DEFAULT_GUEST,
            reps: LINUX_DEFAULT_REPS,
            cpus: default_cpus(host_logical_cores),
            timeout_s: LINUX_DEFAULT_TIMEOUT_S,
            budget_s: None,
            memory: LINUX_GUEST_MEMORY,
        },
    }
}

fn kernel_preset(mode: Mode, host_logical_cores: u32) -> Preset {
    match mode {
        Mode::Quick => Preset {
            guest: KERNEL_QUICK_GUEST,
            reps: KERNEL_REPS,
            cpus: QUICK_CPUS.to_vec(),
            timeout_s: KERNEL_QUICK_TIMEOUT_S,
            budget_s: None,
            memory: LINUX_GUEST_MEMORY,
        },
        Mode::Full => Preset {
            guest: KERNEL_FULL_GUEST,
            reps: KERNEL_REPS,
            cpus: FULL_CPUS.to_vec(),
            timeout_s: KERNEL_FULL_TIMEOUT_S,
            budget_s: None,
            memory: KERNEL_FULL_GUEST_MEMORY,
        },
        Mode::Default | Mode::Custom => Preset {
            guest: KERNEL_FULL_GUEST,
            reps: KERNEL_REPS,
            cpus: default_cpus(host_logical_cores),
            timeout_s: KERNEL_FULL_TIMEOUT_S,
            budget_s: None,
            memory: KERNEL_FULL_GUEST_MEMORY,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cpus_follow_host() {
        assert_eq!(default_cpus(2), vec![1, 2, 4]);
        assert_eq!(default_cpus(1), vec![1, 2]);
        assert_eq!(default_cpus(12), vec![1, 2, 4, 8, 16, 24]);
        assert_eq!(default_cpus(64), vec![1, 2, 4, 8, 16, 28]);
    }

    // The full sweep's job graph must never limit the speedup at 28 vCPUs.
    const _: () = assert!(FULL_GUEST.units >= 8 * 28);
    // The default sweep reaches N = 4 on a 2-core host: at least one directory (4 units) per vCPU.
    const _: () = assert!(DEFAULT_GUEST.units >= 4 * 4);
    // --quick runs N = 2: two directories, so that two links can run side by side.
    const _: () = assert!(QUICK_GUEST.units >= 2 * 4);

    // linux-make --quick at N = 2: two files to compile side by side.
    const _: () = assert!(LINUX_QUICK_GUEST.units >= 2);
    const _: () = assert!(LINUX_FULL_GUEST.units >= 8 * 28);

    #[test]
    fn linux_presets_use_their_own_guest() {
        let q = preset(Workload::LinuxMake, Mode::Quick, 2);
        assert_eq!(
            (q.guest, q.memory, q.cpus),
            (LINUX_QUICK_GUEST, LINUX_GUEST_MEMORY, vec![1, 2])
        );
        assert_eq!(preset(Workload::Mkbench, Mode::Quick, 2).guest, QUICK_GUEST);
        let k = preset(Workload::KernelMake, Mode::Quick, 2);
        assert_eq!((k.guest, k.cpus), (KERNEL_QUICK_GUEST, vec![1, 2]));
        let whole = preset(Workload::KernelMake, Mode::Default, 2);
        assert_eq!(
            (whole.guest, whole.memory),
            (KERNEL_FULL_GUEST, KERNEL_FULL_GUEST_MEMORY)
        );
        assert_eq!(k.memory, LINUX_GUEST_MEMORY);
    }

    #[test]
    fn full_sweep_reaches_28() {
        assert_eq!(FULL_CPUS.last(), Some(&28));
    }
}
