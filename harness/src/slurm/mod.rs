//! `lockscale sweep --slurm`: a sweep on a Slurm cluster, as one array job (one task per share,
//! `--only $((SLURM_ARRAY_TASK_ID+1))/K`) and a merge job that runs once every task succeeded
//! (`--dependency=afterok:<array>`) and writes the merged results file and its plots.
//!
//! The submitting host plans the points (by asking this very binary for `sweep --plan`, so
//! the plan is the one a local sweep runs), builds the variants once and stages everything a
//! node needs into one directory on a shared filesystem, the *stage*
//! (`<--stage or target/lockscale/slurm>/<name>/`), laid out like a checkout so that the staged
//! `lockscale -C <stage>` finds its defaults there:
//!
//! - `bin/lockscale`: this binary;
//! - `target/lockscale/bin/ppc64emu-<variant>` and its build record (tasks run `--no-build`);
//! - `workloads/`: the checkout's workloads (mkbench's ELF, the Linux locks and inputs), and
//!   `guest/` for a `--kernel`/`--bios` given from elsewhere;
//! - `target/guest-cache/…`: a Linux workload's image, exported here with `guest export` and
//!   imported into the stage (so nodes need no mirror);
//! - `sweep.sbatch`, `merge.sbatch`, `slurm.json` (what was submitted, for `--resume NAME`),
//!   `results/<name>-part-I-of-K.json` (one per share), `logs/`.
//!
//! Nodes need neither cargo nor a mirror, only the shared filesystem. `--slurm-wait` follows the
//! jobs with `scontrol show job` (and `sacct` once the controller has forgotten a job) and
//! exits with the merge job's outcome, naming every share that did not complete.
//!
//! One file per concern, so that each can be read and tested alone: `script.rs` (the batch
//! scripts and what they request), `stage.rs` (filling the stage), `submit.rs` (a new sweep;
//! `sbatch`, `scancel`), `follow.rs` (`--slurm-wait`), `resume.rs` (`--resume NAME`). This file
//! holds what they share: the entry point, the stage's paths and its record.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::cli::{SlurmArgs, SweepArgs};
use crate::util::{find_in_path, write_atomic};

mod follow;
mod resume;
mod script;
mod stage;
mod submit;

pub use follow::{JobState, parse_sacct, parse_scontrol, parse_task_list};
pub use script::{
    PlanPoint, TaskResources, array_script, merge_script, parse_plan, resources, sh_quote,
};

/// Exit code of `--slurm-wait` when a share did not complete (as a sweep with failed runs).
pub const EXIT_SHARE_FAILED: i32 = 3;

/// What was staged and submitted: `<stage>/slurm.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageRecord {
    /// Always `lockscale.slurm/1`.
    pub format: String,
    pub name: String,
    /// K: the number of shares (array tasks 0 … K-1).
    pub shares: u32,
    /// The merged results file the merge job writes.
    pub results: PathBuf,
    /// The plots the merge job writes.
    pub plots: Vec<PathBuf>,
    /// Every submission, the first one and each `--resume`.
    pub submissions: Vec<Submission>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Submission {
    pub submitted: String,
    /// The array job (absent when no share had to run again).
    pub array_job: Option<String>,
    /// The 0-based array task ids submitted (share = task + 1).
    pub tasks: Vec<u32>,
    pub merge_job: String,
}

const RECORD_FORMAT: &str = "lockscale.slurm/1";

/// The stage of sweep `name`.
pub fn stage_dir(repo: &Path, a: &SlurmArgs, name: &str) -> PathBuf {
    stage_root(repo, a).join(name)
}

fn stage_root(repo: &Path, a: &SlurmArgs) -> PathBuf {
    a.stage
        .as_deref()
        .map(crate::util::user_path)
        .unwrap_or_else(|| repo.join("target/lockscale/slurm"))
}

/// The file share `i` of `k` writes.
pub fn share_file(stage: &Path, name: &str, i: u32, k: u32) -> PathBuf {
    stage
        .join("results")
        .join(format!("{name}-part-{i}-of-{k}.json"))
}

/// `sweep --slurm`: the entry point from `commands::sweep`.
pub fn sweep(repo: &Path, a: &SweepArgs) -> Result<i32> {
    let s = &a.slurm;
    if a.only.is_some() {
        bail!(
            "--slurm runs every share as an array task itself: drop --only (--shares K sets how many)"
        );
    }
    if a.plan {
        bail!("--slurm submits the sweep; --plan only prints it: give one of them");
    }
    if a.retry_failed {
        bail!("--slurm --resume NAME reruns failed shares by itself: drop --retry-failed");
    }
    let Some(sbatch) = find_in_path("sbatch") else {
        bail!(
            "--slurm needs Slurm's sbatch on PATH (none found); submit from a Slurm login node, \
             or run the shares by hand with --only I/K"
        );
    };
    let root = stage_root(repo, s);
    check_writable(&root)?;
    if let Some(name) = &a.resume {
        return resume::resume(repo, a, &sbatch, &name.to_string_lossy());
    }
    submit::submit_new(repo, a, &sbatch)
}

/// Refuses a stage directory that cannot be created or written, before anything is built.
fn check_writable(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)
        .with_context(|| format!("--stage {}: cannot create it", dir.display()))?;
    let probe = dir.join(format!(".lockscale-probe-{}", std::process::id()));
    fs::write(&probe, b"probe")
        .with_context(|| format!("--stage {}: cannot write into it", dir.display()))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// Runs this binary with `args`; its stdout, or its own error message as ours.
fn run_self(repo: &Path, args: &[String]) -> Result<String> {
    let exe = std::env::current_exe().context("locating the lockscale binary")?;
    let out = Command::new(&exe)
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = err
            .lines()
            .filter_map(|l| l.strip_prefix("lockscale: error: "))
            .collect::<Vec<_>>()
            .join("; ");
        bail!(
            "{}",
            if msg.is_empty() {
                err.trim().to_string()
            } else {
                msg
            }
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn save_record(stage: &Path, rec: &StageRecord) -> Result<()> {
    let mut text = serde_json::to_string_pretty(rec)?;
    text.push('\n');
    write_atomic(&stage.join("slurm.json"), text.as_bytes())
}

fn load_record(stage: &Path) -> Result<StageRecord> {
    let p = stage.join("slurm.json");
    let text = fs::read_to_string(&p).with_context(|| {
        format!(
            "reading {} (no sweep submitted with --slurm under that name and --stage)",
            p.display()
        )
    })?;
    let rec: StageRecord =
        serde_json::from_str(&text).with_context(|| format!("reading {}", p.display()))?;
    if rec.format != RECORD_FORMAT {
        bail!("{} has format {:?}", p.display(), rec.format);
    }
    Ok(rec)
}
