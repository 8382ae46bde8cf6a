//! A sweep's plan: its options checked and completed from the size presets (sizes.rs), and
//! `sweep --plan`'s listing of it.

use anyhow::{Result, bail};

use super::parse_pairs;
use crate::builder::{self, VARIANTS};
use crate::cli::SweepArgs;
use crate::model::{Clock, ClockKind, Share};
use crate::plan::{parse_share, points};
use crate::sizes::{self, Mode};
use crate::util::parse_cpu_list;
use crate::workload::Workload;

/// A sweep's plan: its options with the preset's defaults filled in, checked.
pub(super) struct Resolved {
    pub mode: Mode,
    pub variants: Vec<String>,
    pub peers: Vec<(String, String)>,
    pub cpus: Vec<u32>,
    pub reps: u32,
    pub guest: sizes::GuestSize,
    pub timeout_s: f64,
    pub budget_s: Option<f64>,
    pub memory: &'static str,
    pub share: Option<Share>,
    pub clock: Clock,
}

/// Checks a sweep's options and fills in what they leave to the preset.
pub(super) fn resolve_args(a: &SweepArgs, host_cores: u32) -> Result<Resolved> {
    let p = &a.plan_args;
    let base_mode = if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    };
    let preset = sizes::preset(a.workload, base_mode, host_cores);
    let custom = p.cpus.is_some()
        || p.units.is_some()
        || p.size.is_some()
        || p.seed.is_some()
        || p.reps.is_some();
    let (variants, peers) = variants_and_peers(a)?;
    // Virtual host time unless told otherwise: on a host with fewer cores than the largest N,
    // host time cannot tell the strategies apart (docs/locking.md). Peers alone run on host
    // time, the only clock they have.
    let default_kind = if variants.is_empty() {
        ClockKind::Host
    } else {
        ClockKind::Virtual
    };
    let clock = crate::clock::from_args(
        Some(p.clock.unwrap_or(default_kind)),
        p.quantum,
        p.line_cost,
    )?;
    crate::clock::check_emu_args(a.emu_args.as_deref().unwrap_or(""))?;
    if clock.kind == ClockKind::Virtual && variants.is_empty() {
        bail!(
            "--clock virtual with --variants none: peers run on host time only, so nothing would run on virtual time"
        );
    }
    check_names(&variants, &peers)?;
    let cpus = match &p.cpus {
        Some(s) => parse_cpu_list(s)?,
        None => default_sweep_cpus(a.workload, base_mode, clock.kind, preset.cpus),
    };
    let reps = p.reps.unwrap_or(preset.reps);
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    let guest = sizes::GuestSize {
        units: p.units.unwrap_or(preset.guest.units),
        size: p.size.unwrap_or(preset.guest.size),
        seed: p.seed.unwrap_or(preset.guest.seed),
    };
    check_guest_size(a.workload, p.units.is_some() || p.size.is_some(), guest)?;
    let timeout_s = p.timeout.unwrap_or(preset.timeout_s);
    if !(timeout_s > 0.0 && timeout_s.is_finite()) {
        bail!("--timeout must be a positive number of seconds");
    }
    let budget_s = match a.budget {
        Some(b) if b <= 0.0 => None,
        Some(b) => Some(b),
        None => preset.budget_s,
    };
    Ok(Resolved {
        mode: if custom { Mode::Custom } else { base_mode },
        variants,
        peers,
        cpus,
        reps,
        guest,
        timeout_s,
        budget_s,
        memory: preset.memory,
        share: a.only.as_deref().map(parse_share).transpose()?,
        clock,
    })
}

/// The vCPU list of a sweep given none: on virtual host time the default mkbench sweep is the
/// posted one ([`sizes::FULL_CPUS`]) whatever the host's cores; otherwise the preset's.
fn default_sweep_cpus(
    workload: Workload,
    mode: Mode,
    clock: ClockKind,
    preset_cpus: Vec<u32>,
) -> Vec<u32> {
    if workload == Workload::Mkbench && mode == Mode::Default && clock == ClockKind::Virtual {
        sizes::FULL_CPUS.to_vec()
    } else {
        preset_cpus
    }
}

pub(super) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Default => "default",
        Mode::Quick => "quick",
        Mode::Full => "full",
        Mode::Custom => "custom",
    }
}

/// `sweep --plan`: the points of the plan, and which of them a share runs.
pub(super) fn print_plan(r: &Resolved) {
    let mut all = r.variants.clone();
    all.extend(r.peers.iter().map(|p| p.0.clone()));
    let pts = points(&all, &r.cpus);
    println!(
        "# lockscale sweep plan: {} variants × {} vCPU counts × {} repetitions = {} runs in {} points",
        all.len(),
        r.cpus.len(),
        r.reps,
        all.len() * r.cpus.len() * r.reps as usize,
        pts.len()
    );
    println!(
        "# run share I of K on host I: lockscale sweep <same options> --only I/K; then lockscale merge"
    );
    println!("# clock: {}", crate::clock::describe(&r.clock));
    println!(
        "# point\tvariant\tvcpus\treps{}",
        if r.share.is_some() { "\tin-share" } else { "" }
    );
    for (p, v, n) in pts {
        match r.share {
            None => println!("{p}\t{v}\t{n}\t{}", r.reps),
            Some(s) => println!(
                "{p}\t{v}\t{n}\t{}\t{}",
                r.reps,
                if crate::plan::in_share(p, Some(s)) {
                    "yes"
                } else {
                    "no"
                }
            ),
        }
    }
}

/// `--peer NAME=COMMAND`s, in order.
type Peers = Vec<(String, String)>;

/// `--variants` (all of ours by default; `none` for peers only) and `--peer NAME=COMMAND`.
fn variants_and_peers(a: &SweepArgs) -> Result<(Vec<String>, Peers)> {
    let mut variants = a
        .plan_args
        .variants
        .clone()
        .unwrap_or_else(|| VARIANTS.iter().map(|s| s.to_string()).collect());
    // `--variants none`: peers only (e.g. to calibrate the guest on QEMU).
    if variants == ["none"] {
        variants.clear();
    }
    builder::check_variants(&variants)?;
    let peers = parse_pairs(&a.peers, "--peer")?;
    Ok((variants, peers))
}

/// Something runs, and no two emulators share a name.
fn check_names(variants: &[String], peers: &[(String, String)]) -> Result<()> {
    if variants.is_empty() && peers.is_empty() {
        bail!("nothing to run: --variants none needs at least one --peer");
    }
    for (i, (name, _)) in peers.iter().enumerate() {
        if VARIANTS.contains(&name.as_str()) || peers[..i].iter().any(|p| &p.0 == name) {
            bail!("--peer {name}: the name is already taken");
        }
    }
    Ok(())
}

/// `--units`/`--size`: at least 1 for the generated guests; kernel-make's sources are the
/// kernel's, its presets say what it builds.
pub(super) fn check_guest_size(
    workload: Workload,
    overridden: bool,
    g: sizes::GuestSize,
) -> Result<()> {
    if workload == Workload::KernelMake {
        if overridden {
            bail!(
                "kernel-make takes no --units or --size: --quick builds a fixed subset, the default and --full the whole vmlinux"
            );
        }
        return Ok(());
    }
    if g.units == 0 || g.size == 0 {
        bail!("--units and --size must be at least 1");
    }
    Ok(())
}
