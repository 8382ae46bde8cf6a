//! Every number that sizes a sweep lives here, so that calibrating the guest against the real
//! emulator is a one-file change.
//!
//! The guest sizes below are provisional: they were measured on the peer (qemu-system-ppc64
//! 7.2, MTTCG, on the project's shared 2-core machine: units=16 size=150 took ≈5.5 s of guest
//! time at N = 1) because ppc64emu cannot run the guest yet. HARNESS.md asks for a default
//! sweep that finishes in about five minutes on a 2-core machine (one vCPU ≈ 5 s), a quick
//! sweep of about a minute, and a full sweep whose job graph (at least 8 × 28 compile units)
//! never limits the speedup. Once ppc64emu runs the guest, re-measure with
//! `lockscale sweep --cpus 1 --reps 3` and adjust `units`/`size` here; the sweep warns when
//! its projected duration overshoots the budget of its mode.

use serde::{Deserialize, Serialize};

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

/// The default guest: one vCPU should take about 5 s under the JIT on a 2-core machine.
pub const DEFAULT_GUEST: GuestSize = GuestSize { units: 16, size: 150, seed: 1 };
/// The `--quick` guest: small enough for CI smoke tests (about a minute for the whole sweep).
pub const QUICK_GUEST: GuestSize = GuestSize { units: 8, size: 40, seed: 1 };
/// The `--full` guest: 8 × 28 units so that at N = 28 every vCPU still has work queued.
pub const FULL_GUEST: GuestSize = GuestSize { units: 8 * 28, size: 350, seed: 1 };

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
}

pub fn preset(mode: Mode, host_logical_cores: u32) -> Preset {
    match mode {
        Mode::Quick => Preset {
            guest: QUICK_GUEST,
            reps: QUICK_REPS,
            cpus: QUICK_CPUS.to_vec(),
            timeout_s: QUICK_TIMEOUT_S,
            budget_s: Some(QUICK_BUDGET_S),
        },
        Mode::Full => Preset {
            guest: FULL_GUEST,
            reps: FULL_REPS,
            cpus: FULL_CPUS.to_vec(),
            timeout_s: FULL_TIMEOUT_S,
            budget_s: None,
        },
        Mode::Default | Mode::Custom => Preset {
            guest: DEFAULT_GUEST,
            reps: DEFAULT_REPS,
            cpus: default_cpus(host_logical_cores),
            timeout_s: DEFAULT_TIMEOUT_S,
            budget_s: Some(DEFAULT_BUDGET_S),
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

    #[test]
    fn full_sweep_reaches_28() {
        assert_eq!(FULL_CPUS.last(), Some(&28));
    }
}
