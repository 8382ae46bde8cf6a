//! The sweep engine: runs the plan, one emulator invocation at a time, and rewrites the
//! results file atomically after every run, so that an interrupted sweep loses at most the
//! run in flight and `--resume` picks up where it stopped.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model::{ClockKind, PinPolicy, ResultsFile, Run, RunStatus};
use crate::plan::{PlannedRun, in_share, plan};
use crate::runner::{EmulatorCmd, GuestSpec, RunRequest, run_once};
use crate::util::{now_rfc3339, write_atomic};

/// Everything a sweep needs besides its results file.
pub struct Sweep {
    /// Where the results file lives.
    pub path: PathBuf,
    /// Per-run reports and console logs: `<work_dir>/<variant>-n<N>-r<rep>.{json,log}`.
    pub work_dir: PathBuf,
    pub emulators: Vec<EmulatorCmd>,
    pub guest: GuestSpec,
    /// Warn when the projected duration exceeds this (seconds).
    pub budget_s: Option<f64>,
    /// Re-run runs recorded as failed (with `--resume`).
    pub retry_failed: bool,
    /// Repository root: paths inside it are stored relative to it.
    pub repo: PathBuf,
}

/// What a sweep did in this invocation.
pub struct Outcome {
    pub ran: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// The runs of the plan (this file's share) that have no recorded outcome yet.
pub fn pending(file: &ResultsFile) -> Vec<PlannedRun> {
    let done: BTreeSet<(String, u32, u32)> = file
        .runs
        .iter()
        .map(|r| (r.variant.clone(), r.cpus, r.rep))
        .collect();
    plan(&file.config.variants, &file.config.cpus, file.config.reps)
        .into_iter()
        .filter(|p| in_share(p.point, file.config.share))
        .filter(|p| !done.contains(&(p.variant.clone(), p.cpus, p.rep)))
        .collect()
}

/// Whether every planned run of this file's share has an outcome (a plan of no runs is never
/// complete: it ran nothing).
pub fn is_complete(file: &ResultsFile) -> bool {
    file.config.reps > 0
        && !file.config.cpus.is_empty()
        && !file.config.variants.is_empty()
        && pending(file).is_empty()
}

/// Refuses a results file whose plan or runs cannot be continued: a plan of no runs, vCPU
/// counts of 0, or one (variant, N, repetition) recorded twice.
pub fn check_resumable(file: &ResultsFile) -> Result<()> {
    let c = &file.config;
    if c.reps == 0 || c.cpus.is_empty() || c.variants.is_empty() {
        anyhow::bail!(
            "its plan has no runs (reps {}, {} vCPU counts, {} variants)",
            c.reps,
            c.cpus.len(),
            c.variants.len()
        );
    }
    if c.cpus.contains(&0) {
        anyhow::bail!("its plan asks for 0 vCPUs");
    }
    let mut seen = BTreeSet::new();
    for r in &file.runs {
        if !seen.insert((r.variant.as_str(), r.cpus, r.rep)) {
            anyhow::bail!("{} N={} rep {} is recorded twice", r.variant, r.cpus, r.rep);
        }
    }
    Ok(())
}

pub fn save(path: &std::path::Path, file: &mut ResultsFile) -> Result<()> {
    file.updated = now_rfc3339();
    // Compact: the file holds every run's report whole (a 28-vCPU report is ≈ 45 kB indented),
    // it is rewritten after every run, and `lockscale report` is how it is read.
    let mut text = serde_json::to_string(file)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

fn pin_for(policy: PinPolicy, cpus: u32, host_cores: u32) -> &'static str {
    match policy {
        PinPolicy::Compact => "compact",
        PinPolicy::None => "none",
        PinPolicy::Auto => {
            if cpus <= host_cores {
                "compact"
            } else {
                "none"
            }
        }
    }
}

fn file_stem(variant: &str) -> String {
    variant
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn progress_bar(len: u64) -> ProgressBar {
    // indicatif hides itself when stderr is not a terminal: CI logs stay clean.
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} runs, ETA {eta} · {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb
}

/// Projected wall time of the remaining runs from what has run so far: the mean of the same
/// (variant, N) when known, else of the same N, else of everything.
fn projected_remaining(done: &[Run], rest: &[PlannedRun]) -> Option<f64> {
    if done.is_empty() {
        return None;
    }
    let mean = |it: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = it.collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let all = mean(&mut done.iter().map(|r| r.host_wall_s))?;
    Some(
        rest.iter()
            .map(|p| {
                mean(
                    &mut done
                        .iter()
                        .filter(|r| r.variant == p.variant && r.cpus == p.cpus)
                        .map(|r| r.host_wall_s),
                )
                .or_else(|| {
                    mean(
                        &mut done
                            .iter()
                            .filter(|r| r.cpus == p.cpus)
                            .map(|r| r.host_wall_s),
                    )
                })
                .unwrap_or(all)
            })
            .sum(),
    )
}

/// Runs every pending run of `file`, saving after each.
pub fn execute(s: &Sweep, file: &mut ResultsFile) -> Result<Outcome> {
    if s.retry_failed {
        file.runs.retain(|r| r.status == RunStatus::Ok);
    }
    let todo = pending(file);
    let skipped = file.runs.len();
    let host_cores = file.host.logical_cores;
    file.complete = todo.is_empty();
    save(&s.path, file)?;
    let pb = progress_bar(todo.len() as u64);
    let t0 = Instant::now();
    let mut warned = false;
    let mut ran_now: Vec<Run> = Vec::new();
    let mut failed = 0;
    for (i, p) in todo.iter().enumerate() {
        let Some(emu) = s.emulators.iter().find(|e| e.label == p.variant) else {
            anyhow::bail!("no emulator for variant {:?}", p.variant);
        };
        pb.set_message(format!(
            "{} N={} rep {}/{}",
            p.variant, p.cpus, p.rep, file.config.reps
        ));
        pb.enable_steady_tick(Duration::from_millis(250));
        let stem = format!("{}-n{}-r{}", file_stem(&p.variant), p.cpus, p.rep);
        // Our emulator runs on the sweep's clock, peers on host time (clock.rs).
        let clock = crate::clock::asked_for(&file.config.clock, emu.kind);
        let mut extra_args = crate::clock::emulator_args(&clock);
        extra_args.extend(file.config.emulator_args.iter().cloned());
        let req = RunRequest {
            cpus: p.cpus,
            rep: p.rep,
            seq: p.seq,
            pin: pin_for(file.config.pin, p.cpus, host_cores).to_string(),
            oversubscribed: p.cpus > host_cores && clock.kind == ClockKind::Host,
            host_cores,
            timeout_s: file.config.timeout_s,
            report_path: s.work_dir.join(format!("{stem}.json")),
            log_path: s.work_dir.join(format!("{stem}.log")),
            expected_checksum: file.workload.expected_checksum.clone(),
            extra_args,
        };
        let mut run = run_once(emu, &s.guest, &req, now_rfc3339());
        crate::clock::settle_run(&mut run, clock);
        run.log = Some(crate::util::stored_path(&s.repo, &req.log_path));
        if run.status == RunStatus::Ok {
            if file.workload.expected_checksum.is_none() {
                file.workload.expected_checksum = run.checksum.clone();
            }
        } else {
            failed += 1;
            let why = run.reason.clone().unwrap_or_default();
            let log = run.log.clone().unwrap_or_default();
            pb.suspend(|| {
                eprintln!(
                    "lockscale: run failed: {} N={} rep {}: {why} (log: {log})",
                    p.variant, p.cpus, p.rep
                )
            });
        }
        ran_now.push(run.clone());
        file.runs.push(run);
        file.complete = i + 1 == todo.len();
        if file.complete {
            file.host.load_after = crate::host::load_average();
        }
        save(&s.path, file)?;
        pb.inc(1);
        if let (Some(budget), false) = (s.budget_s, warned)
            && let Some(rest) = projected_remaining(&ran_now, &todo[i + 1..])
        {
            let total = t0.elapsed().as_secs_f64() + rest;
            if total > 1.25 * budget && ran_now.len() >= s.emulators.len().min(todo.len()) {
                warned = true;
                pb.suspend(|| {
                    eprintln!(
                        "lockscale: this sweep will take about {:.0} min, over its budget of {:.0} min; \
                         the guest sizes (harness/src/sizes.rs) may need calibrating for this host",
                        total / 60.0,
                        budget / 60.0
                    )
                });
            }
        }
    }
    pb.finish_and_clear();
    Ok(Outcome {
        ran: todo.len(),
        failed,
        skipped,
    })
}
