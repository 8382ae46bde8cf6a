//! Submitting a new sweep: plan it (by asking this binary for `sweep --plan`, so that the plan
//! is the one a local sweep runs), stage it, write the scripts, then `sbatch` the array and
//! the merge job after it (cancelling the array with `scancel` when the merge is refused).

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::follow::follow;
use super::script::{array_script, merge_script, parse_plan, resources};
use super::stage::{place, stage_binaries, stage_guest, staged_input};
use super::{RECORD_FORMAT, StageRecord, Submission, run_self, save_record, stage_dir};
use crate::cli::{SlurmArgs, SweepArgs};
use crate::model::ClockKind;
use crate::sizes::{self, Mode};
use crate::util::{file_stamp, now_rfc3339, unix_now, write_atomic};

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

pub(super) fn scancel(job: &str) {
    let _ = Command::new("scancel")
        .arg(job)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Submits the array (`tasks`, 0-based; none: the merge alone) and the merge job after it.
/// When the merge submission fails the array is cancelled: nothing is left half-submitted.
pub(super) fn submit(
    sbatch_path: &Path,
    a: &SlurmArgs,
    stage: &Path,
    tasks: &[u32],
) -> Result<Submission> {
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

pub(super) fn announce(rec: &StageRecord, sub: &Submission) {
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

pub(super) fn submit_new(repo: &Path, a: &SweepArgs, sbatch_path: &Path) -> Result<i32> {
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
