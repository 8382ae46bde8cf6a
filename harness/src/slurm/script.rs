//! The two batch scripts and what they request: the plan's points as `sweep --plan` prints
//! them, each array task's resources, and the array and merge scripts. Pure text, so that
//! the scripts are tested without a cluster.

use std::path::Path;

use anyhow::{Result, bail};

use super::{StageRecord, share_file};
use crate::plan::in_share;
use crate::sizes;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::RECORD_FORMAT;

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
}
