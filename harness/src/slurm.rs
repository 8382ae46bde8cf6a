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

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cli::SlurmArgs;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::builder::{self, BuildRequest, VARIANTS};
use crate::cli::SweepArgs;
use crate::model::{BuildKind, ClockKind};
use crate::plan::in_share;
use crate::sizes::{self, Mode};
use crate::util::find_in_path;
use crate::util::{file_stamp, now_rfc3339, unix_now, write_atomic};

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
        return resume(repo, a, &sbatch, &name.to_string_lossy());
    }
    submit_new(repo, a, &sbatch)
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

fn mode_of(a: &SweepArgs) -> Mode {
    let p = &a.plan_args;
    if p.cpus.is_some()
        || p.units.is_some()
        || p.size.is_some()
        || p.seed.is_some()
        || p.reps.is_some()
    {
        Mode::Custom
    } else if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Default => "default",
        Mode::Quick => "quick",
        Mode::Full => "full",
        Mode::Custom => "custom",
    }
}

fn value_name<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// Where a task finds a file given on the command line: inside the checkout the same relative
/// path in the stage, else `guest/<file name>`.
fn staged_input(repo: &Path, stage: &Path, p: &Path) -> PathBuf {
    let p = crate::util::user_path(p);
    match p.strip_prefix(repo) {
        Ok(rel) if !rel.as_os_str().is_empty() => stage.join(rel),
        _ => stage.join("guest").join(p.file_name().unwrap_or_default()),
    }
}

/// The sweep options a task (or the planning call) is given: the user's, minus what `--slurm`
/// decides itself (binaries, names, outputs, shares). `kernel`/`bios` are the paths to pass.
fn forwarded_args(
    a: &SweepArgs,
    kernel: Option<&Path>,
    bios: Option<&Path>,
    cpus: Option<&str>,
) -> Vec<String> {
    let p = &a.plan_args;
    let mut v: Vec<String> = vec!["--workload".into(), a.workload.name().into()];
    if a.quick {
        v.push("--quick".into());
    }
    if a.full {
        v.push("--full".into());
    }
    if let Some(vars) = &p.variants {
        v.push(format!("--variants={}", vars.join(",")));
    }
    if let Some(c) = cpus.map(str::to_string).or_else(|| p.cpus.clone()) {
        v.push(format!("--cpus={c}"));
    }
    let mut opt = |flag: &str, val: Option<String>| {
        if let Some(x) = val {
            v.push(format!("{flag}={x}"));
        }
    };
    opt("--reps", p.reps.map(|x| x.to_string()));
    opt("--units", p.units.map(|x| x.to_string()));
    opt("--size", p.size.map(|x| x.to_string()));
    opt("--seed", p.seed.map(|x| x.to_string()));
    opt("--timeout", p.timeout.map(|x| x.to_string()));
    opt("--clock", p.clock.as_ref().map(value_name));
    opt("--quantum", p.quantum.map(|ns| format!("{ns}ns")));
    opt("--line-cost", p.line_cost.map(|ns| format!("{ns}ns")));
    opt("--budget", a.budget.map(|x| x.to_string()));
    opt("--expect-checksum", a.expect_checksum.clone());
    opt("--emu-args", a.emu_args.clone());
    opt("--kernel", kernel.map(|k| k.display().to_string()));
    opt("--bios", bios.map(|b| b.display().to_string()));
    v.push(format!("--pin={}", value_name(&p.pin)));
    for peer in &a.peers {
        v.push(format!("--peer={peer}"));
    }
    v
}

/// One point of the plan as `sweep --plan` prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanPoint {
    pub point: u32,
    pub variant: String,
    pub cpus: u32,
    pub reps: u32,
}

/// Parses the job list of `sweep --plan`.
pub fn parse_plan(text: &str) -> Result<Vec<PlanPoint>> {
    let mut v = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let parsed = (f.len() >= 4)
            .then(|| Some((f[0].parse().ok()?, f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten();
        let Some((point, cpus, reps)) = parsed else {
            bail!("unexpected line in the sweep plan: {line:?}");
        };
        v.push(PlanPoint {
            point,
            variant: f[1].to_string(),
            cpus,
            reps,
        });
    }
    if v.is_empty() {
        bail!("the sweep plan has no points");
    }
    Ok(v)
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

/// Resources of every array task: cores, exclusivity, time limit (minutes).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskResources {
    pub cpus_per_task: u32,
    pub exclusive: bool,
    pub minutes: u64,
}

/// A host-time point at N vCPUs needs N cores of its own (and no neighbours): the largest N of
/// any share, exclusively. On virtual time a run needs no more than a core or two (its clocks
/// advance by thread CPU time). The time limit: every run of the largest share at its timeout
/// and kill grace, plus five minutes. One array has one request, so every task gets the
/// largest share's.
pub fn resources(
    points: &[PlanPoint],
    shares: u32,
    virtual_clock: bool,
    timeout_s: f64,
) -> TaskResources {
    let mut max_n = 1;
    let mut max_runs = 0;
    for i in 1..=shares {
        let share = Some(crate::model::Share {
            index: i,
            count: shares,
        });
        let mine: Vec<&PlanPoint> = points.iter().filter(|p| in_share(p.point, share)).collect();
        max_n = max_n.max(mine.iter().map(|p| p.cpus).max().unwrap_or(1));
        max_runs = max_runs.max(mine.iter().map(|p| p.reps as u64).sum::<u64>());
    }
    let per_run = timeout_s + sizes::kill_grace(timeout_s);
    let secs = max_runs as f64 * per_run + 300.0;
    TaskResources {
        cpus_per_task: if virtual_clock { max_n.min(2) } else { max_n },
        exclusive: !virtual_clock,
        minutes: (secs / 60.0).ceil() as u64,
    }
}

/// Quotes a word for bash.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn quoted(words: &[String]) -> String {
    words
        .iter()
        .map(|w| sh_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The array job's script.
pub fn array_script(
    stage: &Path,
    name: &str,
    shares: u32,
    res: &TaskResources,
    task_args: &[String],
) -> String {
    let st = sh_quote(&stage.display().to_string());
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!(
        "# Written by `lockscale sweep --slurm` for the sweep {name}: array task T runs share T+1 of {shares}.\n"
    ));
    s.push_str(&format!("#SBATCH --job-name=lockscale-{name}\n"));
    s.push_str(&format!("#SBATCH --array=0-{}\n", shares - 1));
    s.push_str(&format!("#SBATCH --cpus-per-task={}\n", res.cpus_per_task));
    if res.exclusive {
        s.push_str("#SBATCH --exclusive\n");
    }
    s.push_str(&format!("#SBATCH --time={}\n", res.minutes));
    s.push_str(&format!(
        "#SBATCH --output={}/logs/task-%a-job-%A.out\n",
        stage.display()
    ));
    s.push_str("set -eu\n");
    s.push_str(&format!("STAGE={st}\nK={shares}\n"));
    s.push_str("I=$((SLURM_ARRAY_TASK_ID+1))\n");
    s.push_str(&format!(
        "OUT=\"$STAGE/results/{name}-part-$I-of-$K.json\"\n"
    ));
    s.push_str(&format!(
        "echo \"lockscale: share $I/$K of {name} on ${{SLURMD_NODENAME:-$(hostname)}}\" >&2\n"
    ));
    s.push_str("if [ -e \"$OUT\" ]; then\n");
    s.push_str(
        "    exec \"$STAGE/bin/lockscale\" -C \"$STAGE\" sweep --resume \"$OUT\" --retry-failed --no-plot\n",
    );
    s.push_str("fi\n");
    s.push_str(&format!(
        "exec \"$STAGE/bin/lockscale\" -C \"$STAGE\" sweep {} --no-build --no-plot \\\n    --only \"$((SLURM_ARRAY_TASK_ID+1))/$K\" --name \"{name}-part-$I-of-$K\" -o \"$OUT\"\n",
        quoted(task_args)
    ));
    s
}

/// The merge job's script: merge every share, then draw the plots (a plot that cannot be
/// drawn is reported, as at the end of a local sweep, and does not fail the job).
pub fn merge_script(stage: &Path, rec: &StageRecord, allow_mixed_hosts: bool) -> String {
    let st = sh_quote(&stage.display().to_string());
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!(
        "# Written by `lockscale sweep --slurm`: merges the {} shares of {} once they all succeeded.\n",
        rec.shares, rec.name
    ));
    s.push_str(&format!(
        "#SBATCH --job-name=lockscale-{}-merge\n",
        rec.name
    ));
    s.push_str("#SBATCH --cpus-per-task=1\n#SBATCH --time=30\n#SBATCH --kill-on-invalid-dep=yes\n");
    s.push_str(&format!(
        "#SBATCH --output={}/logs/merge-job-%j.out\n",
        stage.display()
    ));
    s.push_str("set -eu\n");
    s.push_str(&format!("STAGE={st}\n"));
    let files: Vec<String> = (1..=rec.shares)
        .map(|i| {
            share_file(stage, &rec.name, i, rec.shares)
                .display()
                .to_string()
        })
        .collect();
    let mut merge = vec![
        "merge".to_string(),
        "--name".into(),
        rec.name.clone(),
        "-o".into(),
        rec.results.display().to_string(),
    ];
    if allow_mixed_hosts {
        merge.push("--allow-mixed-hosts".into());
    }
    merge.extend(files);
    s.push_str(&format!(
        "\"$STAGE/bin/lockscale\" -C \"$STAGE\" {}\n",
        quoted(&merge)
    ));
    for p in &rec.plots {
        let pq = sh_quote(&p.display().to_string());
        s.push_str(&format!(
            "\"$STAGE/bin/lockscale\" -C \"$STAGE\" plot {} -o {pq} || echo \"lockscale: could not write {}\" >&2\n",
            sh_quote(&rec.results.display().to_string()),
            p.display()
        ));
    }
    s.push_str(&format!(
        "echo \"lockscale: merged {} shares into {}\" >&2\n",
        rec.shares,
        rec.results.display()
    ));
    s
}

/// Copies `from` to `to` (a hard link when the filesystem allows), creating directories.
fn place(from: &Path, to: &Path) -> Result<()> {
    if let Some(d) = to.parent() {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let _ = fs::remove_file(to);
    if fs::hard_link(from, to).is_err() {
        fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for e in walkdir::WalkDir::new(from) {
        let e = e.with_context(|| format!("reading {}", from.display()))?;
        let rel = e.path().strip_prefix(from).expect("below the root");
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        } else if e.file_type().is_file() {
            fs::copy(e.path(), &dest).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Builds (or takes) the binaries of our variants and stages them with their build records.
fn stage_binaries(repo: &Path, a: &SweepArgs, variants: &[String], stage: &Path) -> Result<()> {
    let mut bins: BTreeMap<String, PathBuf> = BTreeMap::new();
    for b in &a.bins {
        let Some((v, p)) = b.split_once('=') else {
            bail!("--bin takes NAME=VALUE, got {b:?}");
        };
        builder::check_variants(&[v.trim().to_string()])?;
        bins.insert(
            v.trim().to_string(),
            crate::util::user_path(Path::new(p.trim())),
        );
    }
    let ours: Vec<String> = variants
        .iter()
        .filter(|v| VARIANTS.contains(&v.as_str()))
        .cloned()
        .collect();
    let to_build: Vec<String> = ours
        .iter()
        .filter(|v| !bins.contains_key(*v))
        .cloned()
        .collect();
    let mut found: Vec<(String, PathBuf, crate::model::BuildInfo)> = Vec::new();
    if !to_build.is_empty() {
        let list = if a.no_build {
            let dir = builder::bin_dir(repo, None);
            to_build
                .iter()
                .map(|v| builder::load_built(&dir, v))
                .collect::<Result<Vec<_>>>()?
        } else {
            builder::build(&BuildRequest {
                repo,
                variants: &to_build,
                rev: None,
            })?
        };
        found.extend(list.into_iter().map(|b| (b.variant, b.binary, b.info)));
    }
    for v in &ours {
        if let Some(p) = bins.get(v) {
            found.push((
                v.clone(),
                p.clone(),
                builder::describe_binary(repo, v, p, BuildKind::Ours)?,
            ));
        }
    }
    let dir = builder::bin_dir(stage, None);
    for (v, path, mut info) in found {
        let dest = dir.join(format!("ppc64emu-{v}"));
        place(&path, &dest)?;
        info.binary = crate::util::stored_path(stage, &dest);
        write_atomic(
            &dest.with_extension("json"),
            serde_json::to_string_pretty(&info)?.as_bytes(),
        )?;
    }
    Ok(())
}

/// Stages the guest: the checkout's workloads/, the files given by --kernel/--bios, and a
/// Linux workload's image (exported from this checkout, imported into the stage).
fn stage_guest(repo: &Path, a: &SweepArgs, stage: &Path) -> Result<()> {
    let w = repo.join("workloads");
    if w.is_dir() {
        copy_tree(&w, &stage.join("workloads"))?;
    }
    for p in [a.plan_args.kernel.as_deref(), a.bios.as_deref()]
        .into_iter()
        .flatten()
    {
        let dest = staged_input(repo, stage, p);
        let src = crate::util::user_path(p);
        if src != dest {
            place(&src, &dest)?;
        }
    }
    if a.workload.is_linux() {
        let tar = stage.join(format!("guest-{}.tar", a.workload.name()));
        let mut args = vec![
            "guest".to_string(),
            "export".into(),
            a.workload.name().into(),
            "-o".into(),
            tar.display().to_string(),
        ];
        if a.quick {
            args.push("--quick".into());
        }
        if a.full {
            args.push("--full".into());
        }
        if let Some(u) = a.plan_args.units {
            args.push(format!("--units={u}"));
        }
        if let Some(s) = a.plan_args.size {
            args.push(format!("--size={s}"));
        }
        eprintln!(
            "lockscale: exporting the {} image for the nodes",
            a.workload
        );
        run_self(repo, &args).context("exporting the guest image")?;
        crate::carry::import(stage, &tar).context("installing the guest image into the stage")?;
    }
    Ok(())
}

/// `sbatch --parsable ARGS…`: the job id, or sbatch's own message as the error.
fn sbatch(sbatch: &Path, args: &[String]) -> Result<String> {
    let out = Command::new(sbatch)
        .arg("--parsable")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", sbatch.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "sbatch refused the job ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let id = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .and_then(|l| l.split(';').next())
        .unwrap_or("")
        .to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch printed no job id: {stdout:?}");
    }
    Ok(id)
}

fn scancel(job: &str) {
    let _ = Command::new("scancel")
        .arg(job)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Submits the array (`tasks`, 0-based; none: the merge alone) and the merge job after it.
/// When the merge submission fails the array is cancelled: nothing is left half-submitted.
fn submit(sbatch_path: &Path, a: &SlurmArgs, stage: &Path, tasks: &[u32]) -> Result<Submission> {
    let array = if tasks.is_empty() {
        None
    } else {
        let mut args = vec![format!(
            "--array={}",
            tasks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )];
        args.extend(a.slurm_args.iter().cloned());
        args.push(stage.join("sweep.sbatch").display().to_string());
        Some(sbatch(sbatch_path, &args).context("submitting the array job")?)
    };
    let mut args = Vec::new();
    if let Some(id) = &array {
        args.push(format!("--dependency=afterok:{id}"));
    }
    args.extend(a.slurm_args.iter().cloned());
    args.push(stage.join("merge.sbatch").display().to_string());
    let merge = match sbatch(sbatch_path, &args) {
        Ok(id) => id,
        Err(e) => {
            if let Some(id) = &array {
                scancel(id);
                return Err(e.context(format!(
                    "submitting the merge job (the array job {id} was cancelled)"
                )));
            }
            return Err(e.context("submitting the merge job"));
        }
    };
    Ok(Submission {
        submitted: now_rfc3339(),
        array_job: array,
        tasks: tasks.to_vec(),
        merge_job: merge,
    })
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

fn announce(rec: &StageRecord, sub: &Submission) {
    if let Some(a) = &sub.array_job {
        let shares: Vec<String> = sub
            .tasks
            .iter()
            .map(|t| format!("{}/{}", t + 1, rec.shares))
            .collect();
        println!("array job {a} (shares {})", shares.join(", "));
    }
    println!("merge job {}", sub.merge_job);
    println!("results {}", rec.results.display());
    let _ = std::io::stdout().flush();
}

fn submit_new(repo: &Path, a: &SweepArgs, sbatch_path: &Path) -> Result<i32> {
    let s = &a.slurm;
    let mode = mode_of(a);
    let name = a.name.clone().unwrap_or_else(|| {
        let stamp = file_stamp(unix_now());
        match a.plan_args.clock {
            Some(ClockKind::Virtual) => format!("{}-virtual-{stamp}", mode_name(mode)),
            _ => format!("{}-{stamp}", mode_name(mode)),
        }
    });
    crate::util::check_name(&name).context("--name")?;
    let stage = stage_dir(repo, s, &name);
    if stage.join("slurm.json").exists() {
        bail!(
            "{} was submitted before: continue it with --slurm --resume {name}, or choose another --name",
            stage.display()
        );
    }
    let host_cores = crate::host::logical_cores();
    // A default plan depends on the host's cores: the nodes get the submitting host's.
    let cpus = (mode == Mode::Default).then(|| {
        sizes::preset(a.workload, mode, host_cores)
            .cpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    });
    let user_kernel = a.plan_args.kernel.as_deref().map(crate::util::user_path);
    let user_bios = a.bios.as_deref().map(crate::util::user_path);
    let mut plan_args = vec!["sweep".to_string(), "--plan".into()];
    plan_args.extend(forwarded_args(
        a,
        user_kernel.as_deref(),
        user_bios.as_deref(),
        cpus.as_deref(),
    ));
    let points = parse_plan(&run_self(repo, &plan_args)?)?;
    let k = s.shares.unwrap_or(points.len() as u32);
    if k == 0 || k as usize > points.len() {
        bail!(
            "--shares {k}: the plan has {} points; give 1 to {0} shares",
            points.len()
        );
    }
    let results = a
        .output
        .as_deref()
        .map(crate::util::user_path)
        .unwrap_or_else(|| repo.join("results").join(format!("{name}.json")));
    if results.exists() {
        bail!(
            "{} already exists: choose another --name or -o",
            results.display()
        );
    }
    let plots = ["png", "svg"]
        .iter()
        .map(|ext| repo.join("plots").join(format!("{name}.{ext}")))
        .collect();
    let virtual_clock = a.plan_args.clock == Some(ClockKind::Virtual) && a.peers.is_empty();
    let timeout_s = a
        .plan_args
        .timeout
        .unwrap_or_else(|| sizes::preset(a.workload, mode_base(a), host_cores).timeout_s);
    let res = resources(&points, k, virtual_clock, timeout_s);

    // Build and stage.
    fs::create_dir_all(stage.join("logs"))
        .with_context(|| format!("creating {}", stage.display()))?;
    fs::create_dir_all(stage.join("results"))?;
    let mut variants: Vec<String> = Vec::new();
    for p in &points {
        if !variants.contains(&p.variant) {
            variants.push(p.variant.clone());
        }
    }
    stage_binaries(repo, a, &variants, &stage)?;
    stage_guest(repo, a, &stage)?;
    let exe = std::env::current_exe().context("locating the lockscale binary")?;
    place(&exe, &stage.join("bin/lockscale"))?;
    let task_kernel = user_kernel
        .as_deref()
        .map(|k| staged_input(repo, &stage, k));
    let task_bios = user_bios.as_deref().map(|b| staged_input(repo, &stage, b));
    let task_args = forwarded_args(
        a,
        task_kernel.as_deref(),
        task_bios.as_deref(),
        cpus.as_deref(),
    );
    write_atomic(
        &stage.join("sweep.sbatch"),
        array_script(&stage, &name, k, &res, &task_args).as_bytes(),
    )?;
    let mut rec = StageRecord {
        format: RECORD_FORMAT.into(),
        name: name.clone(),
        shares: k,
        results,
        plots,
        submissions: Vec::new(),
    };
    write_atomic(
        &stage.join("merge.sbatch"),
        merge_script(&stage, &rec, s.allow_mixed_hosts).as_bytes(),
    )?;
    eprintln!(
        "lockscale: staged {name} in {} ({} points in {k} shares; per task {} cores{}, {} min)",
        stage.display(),
        points.len(),
        res.cpus_per_task,
        if res.exclusive { ", exclusive" } else { "" },
        res.minutes
    );
    let tasks: Vec<u32> = (0..k).collect();
    let sub = submit(sbatch_path, s, &stage, &tasks)?;
    rec.submissions.push(sub.clone());
    save_record(&stage, &rec)?;
    announce(&rec, &sub);
    if s.slurm_wait {
        return follow(&stage, &rec, &sub);
    }
    Ok(0)
}

fn mode_base(a: &SweepArgs) -> Mode {
    if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    }
}

/// Whether share `i`'s results are there and complete without failed runs.
fn share_done(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<crate::model::ResultsFile>(&t).ok())
        .is_some_and(|f| f.complete && f.failed_runs().count() == 0)
}

fn resume(repo: &Path, a: &SweepArgs, sbatch_path: &Path, name: &str) -> Result<i32> {
    let mut given = a.plan_options_given();
    if a.slurm.shares.is_some() {
        given.push("--shares");
    }
    if !given.is_empty() {
        bail!(
            "--slurm --resume NAME takes the configuration from the staged sweep; drop {}",
            given.join(", ")
        );
    }
    crate::util::check_name(name).context("--resume NAME (with --slurm: the sweep's name)")?;
    let stage = stage_dir(repo, &a.slurm, name);
    let mut rec = load_record(&stage)?;
    if let Some(last) = rec.submissions.last() {
        let mut active = Vec::new();
        for id in last.array_job.iter().chain([&last.merge_job]) {
            if let Some(states) = job_states(id)
                && states.iter().any(|s| !s.terminal())
            {
                active.push(id.clone());
            }
        }
        if !active.is_empty() {
            bail!(
                "job(s) {} of {name} are still queued or running: wait for them (or scancel them) first",
                active.join(", ")
            );
        }
    }
    let tasks: Vec<u32> = (1..=rec.shares)
        .filter(|&i| !share_done(&share_file(&stage, name, i, rec.shares)))
        .map(|i| i - 1)
        .collect();
    if tasks.is_empty() {
        eprintln!("lockscale: every share of {name} is complete; submitting the merge alone");
    } else {
        eprintln!(
            "lockscale: resubmitting share(s) {} of {}",
            tasks
                .iter()
                .map(|t| (t + 1).to_string())
                .collect::<Vec<_>>()
                .join(", "),
            rec.shares
        );
    }
    let sub = submit(sbatch_path, &a.slurm, &stage, &tasks)?;
    rec.submissions.push(sub.clone());
    save_record(&stage, &rec)?;
    announce(&rec, &sub);
    if a.slurm.slurm_wait {
        return follow(&stage, &rec, &sub);
    }
    Ok(0)
}

// ---------------------------------------------------------------- following the jobs

/// The state of one job or array task as Slurm reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobState {
    /// The array task id (None: not an array task, or a record of still-pending tasks).
    pub task: Option<u32>,
    /// Pending array tasks that Slurm reports in one record (`ArrayTaskId=1-2`).
    pub pending_tasks: Vec<u32>,
    pub state: String,
    pub reason: String,
    pub exit_code: String,
    pub node: String,
}

impl JobState {
    pub fn terminal(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "REQUEUED"
                | "RESIZING"
                | "SUSPENDED"
                | "STAGE_OUT"
                | "SIGNALING"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "RESV_DEL_HOLD"
                | "STOPPED"
        )
    }
}

/// Parses Slurm's task list `0-2,5` (with an optional `%limit`).
pub fn parse_task_list(s: &str) -> Vec<u32> {
    let s = s.split('%').next().unwrap_or("");
    let mut v = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((x, y)) => {
                if let (Ok(x), Ok(y)) = (x.parse::<u32>(), y.parse::<u32>()) {
                    v.extend(x..=y);
                }
            }
            None => {
                if let Ok(x) = part.parse() {
                    v.push(x);
                }
            }
        }
    }
    v
}

/// Parses `scontrol show job -o` (one line per job or array task record).
pub fn parse_scontrol(text: &str) -> Vec<JobState> {
    text.lines()
        .filter(|l| l.contains("JobState="))
        .map(|l| {
            let kv: BTreeMap<&str, &str> = l
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            let get = |k: &str| kv.get(k).copied().unwrap_or("").to_string();
            let tasks = kv
                .get("ArrayTaskId")
                .map(|t| parse_task_list(t))
                .unwrap_or_default();
            let (task, pending_tasks) = if tasks.len() == 1 {
                (Some(tasks[0]), Vec::new())
            } else {
                (None, tasks)
            };
            JobState {
                task,
                pending_tasks,
                state: get("JobState"),
                reason: get("Reason"),
                exit_code: get("ExitCode"),
                node: get("BatchHost"),
            }
        })
        .collect()
}

/// Parses `sacct -n -P -X -o JobID,State,ExitCode,NodeList`.
pub fn parse_sacct(text: &str) -> Vec<JobState> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().split('|').collect();
            if f.len() < 3 {
                return None;
            }
            let (task, pending_tasks) = match f[0].split_once('_') {
                Some((_, t)) if t.starts_with('[') => {
                    (None, parse_task_list(t.trim_matches(['[', ']'])))
                }
                Some((_, t)) => (t.parse().ok(), Vec::new()),
                None => (None, Vec::new()),
            };
            Some(JobState {
                task,
                pending_tasks,
                // "CANCELLED by 0" → CANCELLED
                state: f[1].split_whitespace().next().unwrap_or("").to_string(),
                reason: String::new(),
                exit_code: f[2].to_string(),
                node: f.get(3).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// What the controller (or, for a job it has forgotten, accounting) says about `job`; None
/// when neither knows it.
fn job_states(job: &str) -> Option<Vec<JobState>> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if out.status.success() {
        let v = parse_scontrol(&String::from_utf8_lossy(&out.stdout));
        if !v.is_empty() {
            return Some(v);
        }
    }
    let out = Command::new("sacct")
        .args([
            "-n",
            "-P",
            "-X",
            "-o",
            "JobID,State,ExitCode,NodeList",
            "-j",
            job,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let v = parse_sacct(&String::from_utf8_lossy(&out.stdout));
    (out.status.success() && !v.is_empty()).then_some(v)
}

fn poll_interval() -> Duration {
    let s = std::env::var("LOCKSCALE_SLURM_POLL_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| *v > 0.0)
        .unwrap_or(10.0);
    Duration::from_secs_f64(s)
}

/// Follows a submission until its merge job ends; 0 when it completed.
fn follow(stage: &Path, rec: &StageRecord, sub: &Submission) -> Result<i32> {
    let k = rec.shares;
    let mut last: BTreeMap<u32, String> = BTreeMap::new();
    let mut last_merge = String::new();
    let mut tasks: BTreeMap<u32, JobState> = BTreeMap::new();
    let mut unknown_polls = 0;
    let mut cancelled_merge = false;
    let mut array_unknown_polls = 0;
    loop {
        if let Some(array) = &sub.array_job {
            let states = job_states(array);
            array_unknown_polls = if states.is_none() {
                array_unknown_polls + 1
            } else {
                0
            };
            if let Some(states) = states {
                // A task cancelled while pending leaves the array's pending record and gets
                // no record of its own in `scontrol`: a submitted task no record lists ended.
                let listed: Vec<u32> = states
                    .iter()
                    .flat_map(|s| s.task.into_iter().chain(s.pending_tasks.iter().copied()))
                    .collect();
                for t in &sub.tasks {
                    if !listed.contains(t) && !tasks.get(t).is_some_and(JobState::terminal) {
                        tasks.insert(
                            *t,
                            JobState {
                                task: Some(*t),
                                pending_tasks: Vec::new(),
                                state: "CANCELLED".into(),
                                reason: "no longer listed by Slurm".into(),
                                exit_code: "-".into(),
                                node: String::new(),
                            },
                        );
                    }
                }
                for st in states {
                    if let Some(t) = st.task {
                        tasks.insert(t, st);
                    } else {
                        for &t in &st.pending_tasks {
                            tasks.insert(
                                t,
                                JobState {
                                    task: Some(t),
                                    pending_tasks: Vec::new(),
                                    ..st.clone()
                                },
                            );
                        }
                    }
                }
            }
            for (t, st) in &tasks {
                let line = format!("{} {}", st.state, st.node);
                if last.get(t) != Some(&line) {
                    eprintln!(
                        "lockscale: share {}/{k} (job {array}_{t}): {}{}",
                        t + 1,
                        st.state,
                        match st.state.as_str() {
                            "RUNNING" if !st.node.is_empty() => format!(" on {}", st.node),
                            "PENDING" if !st.reason.is_empty() => format!(" ({})", st.reason),
                            s if s != "COMPLETED" && st.terminal() =>
                                format!(" (exit {})", st.exit_code),
                            _ => String::new(),
                        }
                    );
                    last.insert(*t, line);
                }
            }
        }
        let merge = job_states(&sub.merge_job).and_then(|v| v.into_iter().next());
        match &merge {
            None => {
                unknown_polls += 1;
                if unknown_polls > 3 {
                    bail!(
                        "Slurm no longer knows the merge job {} (and sacct has no record of it); see {}",
                        sub.merge_job,
                        stage.join("logs").display()
                    );
                }
            }
            Some(m) => {
                unknown_polls = 0;
                let line = format!("{} {}", m.state, m.reason);
                if line != last_merge {
                    eprintln!(
                        "lockscale: merge (job {}): {}{}",
                        sub.merge_job,
                        m.state,
                        if m.reason.is_empty() || m.reason == "None" {
                            String::new()
                        } else {
                            format!(" ({})", m.reason)
                        }
                    );
                    last_merge = line;
                }
                // A merge job whose dependency can never be met stays pending where the
                // cluster does not cancel such jobs: cancel it here.
                let never =
                    m.state == "PENDING" && m.reason.starts_with("DependencyNeverSatisfied");
                if never && !cancelled_merge {
                    scancel(&sub.merge_job);
                    cancelled_merge = true;
                }
                if m.terminal() && m.state == "COMPLETED" {
                    eprintln!(
                        "lockscale: the merge job completed: {}",
                        rec.results.display()
                    );
                    return Ok(0);
                }
                // The merge will not run: report once every share has ended (a failed task
                // cancels the merge at once, while the others may still run).
                let shares_ended = array_unknown_polls > 3
                    || sub
                        .tasks
                        .iter()
                        .all(|t| tasks.get(t).is_some_and(JobState::terminal));
                if (m.terminal() || never) && shares_ended {
                    return report_failure(stage, rec, sub, &tasks, m);
                }
            }
        }
        std::thread::sleep(poll_interval());
    }
}

fn report_failure(
    stage: &Path,
    rec: &StageRecord,
    sub: &Submission,
    tasks: &BTreeMap<u32, JobState>,
    merge: &JobState,
) -> Result<i32> {
    let k = rec.shares;
    let mut failed = Vec::new();
    if let Some(array) = &sub.array_job {
        for &t in &sub.tasks {
            let st = tasks.get(&t);
            let state = st.map(|s| s.state.as_str()).unwrap_or("UNKNOWN");
            if state != "COMPLETED" {
                failed.push(format!(
                    "share {}/{k} (job {array}_{t}) {state}{}; log {}",
                    t + 1,
                    st.map(|s| format!(", exit {}", s.exit_code))
                        .unwrap_or_default(),
                    stage
                        .join("logs")
                        .join(format!("task-{t}-job-{array}.out"))
                        .display()
                ));
            }
        }
    }
    for f in &failed {
        eprintln!("lockscale: failed: {f}");
    }
    if failed.is_empty() {
        eprintln!(
            "lockscale: the merge job {} ended {} (exit {}); log {}",
            sub.merge_job,
            merge.state,
            merge.exit_code,
            stage
                .join("logs")
                .join(format!("merge-job-{}.out", sub.merge_job))
                .display()
        );
        return Ok(2);
    }
    eprintln!(
        "lockscale: the merge job {} did not run ({}); rerun the missing shares with \
         `lockscale sweep --slurm --resume {}`",
        sub.merge_job, merge.state, rec.name
    );
    Ok(EXIT_SHARE_FAILED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(cpus: &[u32], variants: usize, reps: u32) -> Vec<PlanPoint> {
        let mut v = Vec::new();
        for &n in cpus {
            for i in 0..variants {
                v.push(PlanPoint {
                    point: v.len() as u32 + 1,
                    variant: format!("v{i}"),
                    cpus: n,
                    reps,
                });
            }
        }
        v
    }

    #[test]
    fn plan_lines_parse() {
        let text = "# lockscale sweep plan: …\n# point\tvariant\tvcpus\treps\n1\tbaseline\t1\t3\n2\tper-cpu-lock\t2\t3\n";
        let p = parse_plan(text).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].variant, "per-cpu-lock");
        assert_eq!(p[1].cpus, 2);
        assert!(parse_plan("# nothing\n").is_err());
        assert!(parse_plan("x\ty\n").is_err());
    }

    #[test]
    fn resources_follow_the_clock() {
        // 3 variants × N = 1, 2, 4, 3 reps, 3 shares: every share gets one point of each N.
        let p = pts(&[1, 2, 4], 3, 3);
        let host = resources(&p, 3, false, 120.0);
        assert_eq!(host.cpus_per_task, 4);
        assert!(host.exclusive);
        // 9 runs × (120 + 14) s + 300 s = 1506 s → 26 min.
        assert_eq!(host.minutes, 26);
        let virt = resources(&p, 3, true, 120.0);
        assert_eq!(virt.cpus_per_task, 2);
        assert!(!virt.exclusive);
        // Two shares of N = 1 points only: one core.
        let p1 = pts(&[1], 2, 1);
        assert_eq!(resources(&p1, 2, true, 10.0).cpus_per_task, 1);
        assert_eq!(resources(&p1, 2, false, 10.0).cpus_per_task, 1);
    }

    #[test]
    fn scripts_run_one_share_per_task() {
        let stage = Path::new("/shared/stage/q");
        let res = TaskResources {
            cpus_per_task: 2,
            exclusive: true,
            minutes: 9,
        };
        let s = array_script(
            stage,
            "q",
            3,
            &res,
            &["--quick".into(), "--emu-args=a b".into()],
        );
        assert!(s.contains("#SBATCH --array=0-2\n"));
        assert!(s.contains("#SBATCH --cpus-per-task=2\n"));
        assert!(s.contains("#SBATCH --exclusive\n"));
        assert!(s.contains("#SBATCH --time=9\n"));
        assert!(s.contains("--only \"$((SLURM_ARRAY_TASK_ID+1))/$K\""));
        assert!(s.contains("'--emu-args=a b'"));
        let rec = StageRecord {
            format: RECORD_FORMAT.into(),
            name: "q".into(),
            shares: 3,
            results: "/r/q.json".into(),
            plots: vec!["/p/q.png".into()],
            submissions: vec![],
        };
        let m = merge_script(stage, &rec, true);
        assert!(m.contains("/shared/stage/q/results/q-part-3-of-3.json"));
        assert!(m.contains("--allow-mixed-hosts"));
        assert!(m.contains("plot /r/q.json -o /p/q.png"));
    }

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("abc"), "abc");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote(""), "''");
    }

    #[test]
    fn slurm_reports_parse() {
        let sc = "JobId=12 ArrayJobId=12 ArrayTaskId=1-2 JobState=PENDING Reason=Resources ExitCode=0:0\n\
                  JobId=13 ArrayJobId=12 ArrayTaskId=0 JobState=RUNNING Reason=None ExitCode=0:0 BatchHost=vm\n";
        let v = parse_scontrol(sc);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].pending_tasks, [1, 2]);
        assert_eq!(v[1].task, Some(0));
        assert_eq!(v[1].node, "vm");
        assert!(!v[1].terminal());
        let sa = "12_0|COMPLETED|0:0|vm\n12_1|FAILED|3:0|vm\n12_[2-3]|PENDING|0:0|None assigned\n14|CANCELLED by 0|0:0|\n";
        let v = parse_sacct(sa);
        assert_eq!(v.len(), 4);
        assert_eq!(v[1].task, Some(1));
        assert!(v[1].terminal());
        assert_eq!(v[2].pending_tasks, [2, 3]);
        assert_eq!(v[3].state, "CANCELLED");
        assert_eq!(parse_task_list("0-2,5%2"), [0, 1, 2, 5]);
    }
}
