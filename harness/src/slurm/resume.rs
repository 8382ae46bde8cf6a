//! `--slurm --resume NAME`: resubmits the shares whose results are missing, incomplete or
//! hold failed runs (or the merge alone), once none of the last submission's jobs is active.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::follow::{follow, job_states};
use super::submit::{announce, submit};
use super::{load_record, save_record, share_file, stage_dir};
use crate::cli::SweepArgs;

/// Whether share `i`'s results are there and complete without failed runs.
fn share_done(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<crate::model::ResultsFile>(&t).ok())
        .is_some_and(|f| f.complete && f.failed_runs().count() == 0)
}

pub(super) fn resume(repo: &Path, a: &SweepArgs, sbatch_path: &Path, name: &str) -> Result<i32> {
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
