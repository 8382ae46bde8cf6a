//! Following the jobs for `--slurm-wait`: polls `scontrol show job` (and `sacct` once the
//! controller has forgotten a job), prints each share's state as it changes, and ends with
//! the merge job's outcome, naming every share that did not complete. The parsers of Slurm's
//! reports are pure, so that they are tested without a cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Result, bail};

use super::submit::scancel;
use super::{EXIT_SHARE_FAILED, StageRecord, Submission};

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
pub(super) fn job_states(job: &str) -> Option<Vec<JobState>> {
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
pub(super) fn follow(stage: &Path, rec: &StageRecord, sub: &Submission) -> Result<i32> {
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
