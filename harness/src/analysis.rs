//! From runs to points: per (variant, N) the median guest time with its interval, and the
//! speedup `T(1)/T(N)` each curve is drawn from. Failed runs are left out here, once, and
//! listed so that every consumer (plot, report, ASCII chart) can say so.

use anyhow::{Result, bail};

use crate::model::{ClockKind, ResultsFile, Run};
use crate::stats::{Estimate, median, median_ci_bootstrap, ratio_ci_bootstrap};

/// Confidence level of every interval the harness prints.
pub const LEVEL: f64 = 0.95;

#[derive(Clone, Debug)]
pub struct Point {
    pub variant: String,
    pub cpus: u32,
    /// Guest-measured seconds of the successful runs.
    pub times: Vec<f64>,
    /// Host wall seconds of the successful runs.
    pub walls: Vec<f64>,
    pub failed: usize,
    /// N greater than the host's cores in a host-time run (never on virtual time).
    pub oversubscribed: bool,
    /// Every run of the point ran on virtual host time (`--clock virtual`).
    pub virtual_time: bool,
    /// Median guest time with its interval (None when no run succeeded).
    pub time: Option<Estimate>,
    /// Speedup against N = 1 (of the same variant, or of `--relative-to`).
    pub speedup: Option<Estimate>,
}

impl Point {
    pub fn efficiency(&self) -> Option<f64> {
        self.speedup.map(|s| s.value / self.cpus as f64)
    }
}

#[derive(Clone, Debug)]
pub struct Analysis {
    pub variants: Vec<String>,
    pub points: Vec<Point>,
    /// One line per failed run: `variant N=… rep …: reason`.
    pub failures: Vec<String>,
    pub notes: Vec<String>,
    pub relative_to: Option<String>,
}

/// Variants in the order of the config, then any others the runs name.
pub fn variant_order(file: &ResultsFile) -> Vec<String> {
    let mut v = file.config.variants.clone();
    for r in &file.runs {
        if !v.contains(&r.variant) {
            v.push(r.variant.clone());
        }
    }
    v
}

fn is_ok(r: &Run) -> bool {
    r.status == crate::model::RunStatus::Ok
        && r.guest_elapsed_s.is_some_and(|t| t.is_finite() && t > 0.0)
}

pub fn describe_failure(r: &Run) -> String {
    format!(
        "{} N={} rep {}: {}",
        r.variant,
        r.cpus,
        r.rep,
        r.reason.as_deref().unwrap_or("failed (no reason recorded)")
    )
}

/// Groups the runs of a file into points.
pub fn analyze(file: &ResultsFile, relative_to: Option<&str>) -> Result<Analysis> {
    let variants = variant_order(file);
    if let Some(rel) = relative_to
        && !variants.iter().any(|v| v == rel)
    {
        bail!(
            "--relative-to {rel}: no such variant in {} (have {})",
            file.name,
            variants.join(", ")
        );
    }
    let mut points = Vec::new();
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    for r in &file.runs {
        if !is_ok(r) {
            failures.push(describe_failure(r));
        }
    }
    for v in &variants {
        let mut cpus: Vec<u32> = file
            .runs
            .iter()
            .filter(|r| &r.variant == v)
            .map(|r| r.cpus)
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        for n in cpus {
            let runs: Vec<&Run> = file
                .runs
                .iter()
                .filter(|r| &r.variant == v && r.cpus == n)
                .collect();
            let ok: Vec<&&Run> = runs.iter().filter(|r| is_ok(r)).collect();
            let times: Vec<f64> = ok.iter().map(|r| r.guest_elapsed_s.unwrap()).collect();
            let walls: Vec<f64> = ok.iter().map(|r| r.host_wall_s).collect();
            points.push(Point {
                variant: v.clone(),
                cpus: n,
                time: (!times.is_empty()).then(|| median_ci_bootstrap(&times, LEVEL)),
                times,
                walls,
                failed: runs.len() - ok.len(),
                oversubscribed: runs
                    .iter()
                    .any(|r| r.oversubscribed && r.clock.kind == ClockKind::Host),
                virtual_time: !runs.is_empty()
                    && runs.iter().all(|r| r.clock.kind == ClockKind::Virtual),
                speedup: None,
            });
        }
    }
    // Speedups against N = 1.
    let base_times = |var: &str| -> Option<Vec<f64>> {
        points
            .iter()
            .find(|p| p.variant == var && p.cpus == 1 && !p.times.is_empty())
            .map(|p| p.times.clone())
    };
    let bases: Vec<Option<Vec<f64>>> = points
        .iter()
        .map(|p| base_times(relative_to.unwrap_or(&p.variant)))
        .collect();
    let mut missing_base: Vec<String> = Vec::new();
    for (p, base) in points.iter_mut().zip(bases) {
        match base {
            Some(b) if !p.times.is_empty() => {
                p.speedup = Some(ratio_ci_bootstrap(&b, &p.times, LEVEL))
            }
            None => {
                let who = relative_to.unwrap_or(&p.variant).to_string();
                if !missing_base.contains(&who) {
                    missing_base.push(who);
                }
            }
            _ => {}
        }
    }
    for who in missing_base {
        notes.push(format!(
            "{who} has no successful N=1 run: no speedups against it"
        ));
    }
    if !failures.is_empty() {
        notes.push(format!("{} failed run(s) left out", failures.len()));
    }
    Ok(Analysis {
        variants,
        points,
        failures,
        notes,
        relative_to: relative_to.map(String::from),
    })
}

impl Analysis {
    pub fn point(&self, variant: &str, cpus: u32) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.variant == variant && p.cpus == cpus)
    }

    pub fn variant_points<'a>(&'a self, variant: &'a str) -> impl Iterator<Item = &'a Point> + 'a {
        self.points.iter().filter(move |p| p.variant == variant)
    }
}

/// Median of a sample, `None` when empty.
pub fn median_opt(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| median(x))
}
