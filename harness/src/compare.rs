//! `lockscale compare` and `lockscale gate`: two result sets, point by point.
//!
//! For each (variant, N) present in both, the ratio of median guest times NEW/OLD with a
//! bootstrap interval, and a permutation test on the repetitions. The gate follows the A/B
//! practice of declaring a regression only when the slowdown is both statistically clear
//! (p < α) and larger than a threshold, so that it fails on real regressions and stays green
//! on noise; a large but noisy slowdown is reported as inconclusive, not as a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use anyhow::{Result, bail};

use crate::analysis::{LEVEL, analyze};
use crate::model::{ResultsFile, Run};
use crate::report::lock_rows;
use crate::stats::{
    Alternative, Estimate, median, min_reps_for_alpha, permutation_test, ratio_ci_bootstrap,
    smallest_p,
};

#[derive(Clone, Debug)]
pub struct PointComparison {
    pub variant: String,
    pub cpus: u32,
    pub old: Vec<f64>,
    pub new: Vec<f64>,
    /// median(new) / median(old).
    pub ratio: Estimate,
    /// One-sided p-value for "new is slower".
    pub p_slower: f64,
    /// One-sided p-value for "new is faster".
    pub p_faster: f64,
    pub p_two_sided: f64,
}

/// Result of pairing two files.
pub struct Comparison {
    pub points: Vec<PointComparison>,
    pub notes: Vec<String>,
}

/// Refuses to compare sweeps of different guests: the numbers would mean nothing.
pub fn check_comparable(old: &ResultsFile, new: &ResultsFile) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let (a, b) = (&old.workload, &new.workload);
    if (a.units, a.size, a.seed) != (b.units, b.size, b.seed) || a.name != b.name {
        bail!(
            "{} and {} ran different guests ({} `{}` vs {} `{}`): not comparable",
            old.name,
            new.name,
            a.name,
            a.bootargs,
            b.name,
            b.bootargs
        );
    }
    if let (Some(x), Some(y)) = (&a.expected_checksum, &b.expected_checksum)
        && !x.eq_ignore_ascii_case(y)
    {
        bail!(
            "the guests of {} and {} computed different checksums ({x} vs {y}): one of them is wrong",
            old.name,
            new.name
        );
    }
    if a.image_sha256 != b.image_sha256 {
        notes.push("the guest images differ (different image hashes)".into());
    }
    let lock_of = |w: &crate::model::WorkloadInfo| {
        w.manifest
            .as_ref()
            .map(|m| m.lock_sha256.clone())
            .filter(|s| !s.is_empty())
    };
    match (lock_of(a), lock_of(b)) {
        (Some(x), Some(y)) if x != y => notes.push(format!(
            "warning: the guests were built from different package locks (lock SHA-256 {} vs {}): \
             different guests (compiler, libc, kernel), not only different emulators",
            &x[..12.min(x.len())],
            &y[..12.min(y.len())]
        )),
        (Some(_), None) | (None, Some(_)) if a.manifest.is_some() || b.manifest.is_some() => notes
            .push(
                "warning: one of the guests records no package lock (built before guests were \
                 locked): they may be different guests"
                    .into(),
            ),
        _ => {}
    }
    if !crate::host::same_type(&old.host, &new.host) {
        notes.push(format!(
            "different host types: {} vs {}",
            crate::host::describe(&old.host),
            crate::host::describe(&new.host)
        ));
    }
    Ok(notes)
}

pub fn compare(old: &ResultsFile, new: &ResultsFile) -> Result<Comparison> {
    let mut notes = check_comparable(old, new)?;
    let ao = analyze(old, None)?;
    let an = analyze(new, None)?;
    let mut points = Vec::new();
    for po in &ao.points {
        let Some(pn) = an.point(&po.variant, po.cpus) else {
            notes.push(format!("{} N={} only in {}", po.variant, po.cpus, old.name));
            continue;
        };
        if po.times.is_empty() || pn.times.is_empty() {
            notes.push(format!(
                "{} N={}: no successful runs on one side",
                po.variant, po.cpus
            ));
            continue;
        }
        points.push(PointComparison {
            variant: po.variant.clone(),
            cpus: po.cpus,
            ratio: ratio_ci_bootstrap(&pn.times, &po.times, LEVEL),
            p_slower: permutation_test(&po.times, &pn.times, Alternative::Greater).p,
            p_faster: permutation_test(&po.times, &pn.times, Alternative::Less).p,
            p_two_sided: permutation_test(&po.times, &pn.times, Alternative::TwoSided).p,
            old: po.times.clone(),
            new: pn.times.clone(),
        });
    }
    for pn in &an.points {
        if ao.point(&pn.variant, pn.cpus).is_none() {
            notes.push(format!("{} N={} only in {}", pn.variant, pn.cpus, new.name));
        }
    }
    let failed = ao.failures.len() + an.failures.len();
    if failed > 0 {
        notes.push(format!(
            "{failed} failed run(s) left out ({} in {}, {} in {})",
            ao.failures.len(),
            old.name,
            an.failures.len(),
            new.name
        ));
    }
    Ok(Comparison { points, notes })
}

/// Lock sites listed per changed point.
const ATTRIBUTION_SITES: usize = 3;

/// Per lock site of one point: median over its successful runs of (wait, hold) seconds per run.
/// Hold is `None` unless the runs were `--sync-profile`d (else the emulator reports 0).
fn site_costs(
    file: &ResultsFile,
    variant: &str,
    cpus: u32,
) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    let runs: Vec<&Run> = file
        .ok_runs()
        .filter(|r| r.variant == variant && r.cpus == cpus)
        .collect();
    let profiled = runs.iter().any(|r| {
        r.report
            .as_ref()
            .and_then(|x| x.get("sync_profile"))
            .and_then(|x| x.as_bool())
            == Some(true)
    });
    lock_rows(&runs)
        .into_iter()
        .map(|(site, m)| {
            (
                site,
                (
                    m["wait_ns"].map(|x| x / 1e9),
                    m["hold_ns"].filter(|_| profiled).map(|x| x / 1e9),
                ),
            )
        })
        .collect()
}

/// Markdown: for each changed point, the lock sites whose wait + hold per run changed most,
/// with both sides' figures, so that a regression names its cause. Empty when nothing changed.
pub fn attribution(old: &ResultsFile, new: &ResultsFile, changed: &[(&str, u32)]) -> String {
    let mut rows = String::new();
    let mut silent = Vec::new();
    for &(variant, cpus) in changed {
        let (a, b) = (
            site_costs(old, variant, cpus),
            site_costs(new, variant, cpus),
        );
        if a.is_empty() || b.is_empty() {
            silent.push(format!("{variant} N={cpus}"));
            continue;
        }
        let sites: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let mut ranked: Vec<(f64, &String)> = sites
            .into_iter()
            .map(|site| {
                let (wa, ha) = a.get(site).copied().unwrap_or((Some(0.0), Some(0.0)));
                let (wb, hb) = b.get(site).copied().unwrap_or((Some(0.0), Some(0.0)));
                let d = |x: Option<f64>, y: Option<f64>| match (x, y) {
                    (Some(x), Some(y)) => y - x,
                    _ => 0.0,
                };
                (d(wa, wb) + d(ha, hb), site)
            })
            .filter(|(delta, _)| *delta != 0.0)
            .collect();
        ranked.sort_by(|x, y| y.0.abs().total_cmp(&x.0.abs()));
        for (delta, site) in ranked.into_iter().take(ATTRIBUTION_SITES) {
            let ms = |v: Option<f64>| {
                v.map(|x| format!("{:.2}", x * 1e3))
                    .unwrap_or_else(|| "–".into())
            };
            let (wa, ha) = a.get(site).copied().unwrap_or((Some(0.0), Some(0.0)));
            let (wb, hb) = b.get(site).copied().unwrap_or((Some(0.0), Some(0.0)));
            let _ = writeln!(
                rows,
                "| {variant} | {cpus} | `{site}` | {} → {} | {} → {} | {:+.2} |",
                ms(wa),
                ms(wb),
                ms(ha),
                ms(hb),
                delta * 1e3
            );
        }
    }
    let mut s = String::new();
    if !rows.is_empty() {
        let _ = writeln!(s, "\n### Lock sites behind the changed points\n");
        let _ = writeln!(
            s,
            "Per run (both sides ran the same guest work), median over the repetitions: the {ATTRIBUTION_SITES} sites whose \
             wait + hold changed most. Hold times need `--sync-profile` on both sides (else –).\n"
        );
        let _ = writeln!(
            s,
            "| variant | N | lock site | wait ms (base → candidate) | hold ms (base → candidate) | change ms |"
        );
        let _ = writeln!(s, "|---|---:|---|---:|---:|---:|");
        s.push_str(&rows);
    }
    if !silent.is_empty() {
        let _ = writeln!(
            s,
            "\nNo lock statistics on one side for {}: no lock site to name.",
            silent.join(", ")
        );
    }
    s
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// Markdown table for `lockscale compare`.
pub fn render_compare(old: &ResultsFile, new: &ResultsFile, c: &Comparison, alpha: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# lockscale compare: {} → {}\n", old.name, new.name);
    let _ = writeln!(
        s,
        "Guest time NEW/OLD per point (lower is faster); permutation test, two-sided, α = {alpha}.\n"
    );
    let _ = writeln!(s, "{}\n", crate::clock::clock_line(old, new));
    let _ = writeln!(
        s,
        "| variant | N | old median s | new median s | change | 95% CI | p | verdict |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---|---:|---|");
    let mut changed = Vec::new();
    for p in &c.points {
        if p.p_two_sided < alpha {
            changed.push((p.variant.as_str(), p.cpus));
        }
        let verdict = if p.p_two_sided < alpha {
            if p.ratio.value > 1.0 {
                "slower"
            } else {
                "faster"
            }
        } else if smallest_p(p.old.len(), p.new.len()) >= alpha {
            "too few runs to tell"
        } else {
            "no significant change"
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.4} | {:.4} | {} | {} … {} | {:.4} | {verdict} |",
            p.variant,
            p.cpus,
            median(&p.old),
            median(&p.new),
            pct(p.ratio.value),
            pct(p.ratio.lo),
            pct(p.ratio.hi),
            p.p_two_sided
        );
    }
    s.push_str(&attribution(old, new, &changed));
    for n in &c.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    s
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Slower with p < α and by more than the threshold: the gate fails.
    Regression,
    /// Slower by more than the threshold, but not significantly.
    Inconclusive,
    /// Significantly slower, but by less than the threshold.
    SlowerBelowThreshold,
    /// Significantly faster by more than the threshold.
    Faster,
    NoChange,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Regression => "**REGRESSION**",
            Verdict::Inconclusive => "inconclusive (slower, but within the noise)",
            Verdict::SlowerBelowThreshold => "slower, below threshold",
            Verdict::Faster => "faster",
            Verdict::NoChange => "no change",
        }
    }
}

pub fn verdict(p: &PointComparison, threshold: f64, alpha: f64) -> Verdict {
    let change = p.ratio.value - 1.0;
    if change > threshold {
        if p.p_slower < alpha {
            Verdict::Regression
        } else {
            Verdict::Inconclusive
        }
    } else if change > 0.0 && p.p_slower < alpha {
        Verdict::SlowerBelowThreshold
    } else if -change > threshold && p.p_faster < alpha {
        Verdict::Faster
    } else {
        Verdict::NoChange
    }
}

/// What the gate decided.
pub struct GateOutcome {
    /// 0 pass, 1 regression, 2 refused.
    pub exit_code: i32,
    pub markdown: String,
}

/// A significance level must lie strictly between 0 and 1 (at α ≥ 1 every point "differs").
pub fn check_alpha(alpha: f64) -> Result<()> {
    if !(alpha > 0.0 && alpha < 1.0) {
        bail!("--alpha must be between 0 and 1 (exclusive), got {alpha}");
    }
    Ok(())
}

/// The file form of the gate.
pub fn gate(
    base: &ResultsFile,
    cand: &ResultsFile,
    threshold: f64,
    alpha: f64,
) -> Result<GateOutcome> {
    check_alpha(alpha)?;
    let c = match compare(base, cand) {
        Ok(c) => c,
        Err(e) => return Ok(refuse(&format!("{e:#}"))),
    };
    if c.points.is_empty() {
        return Ok(refuse(
            "no (variant, N) point has successful runs in both result sets",
        ));
    }
    let need = min_reps_for_alpha(alpha);
    let short: Vec<String> = c
        .points
        .iter()
        .filter(|p| p.old.len() < need || p.new.len() < need)
        .map(|p| {
            format!(
                "{} N={} ({} base, {} candidate)",
                p.variant,
                p.cpus,
                p.old.len(),
                p.new.len()
            )
        })
        .collect();
    if !short.is_empty() {
        return Ok(refuse(&format!(
            "too few repetitions: at α = {alpha} the permutation test needs at least {need} successful runs per side \
             (with n per side the smallest possible p is 1/C(2n, n); for n = {} that is {:.4}), so a regression could \
             never be detected. Re-run with --reps {need} or more. Short points: {}",
            need - 1,
            smallest_p(need - 1, need - 1),
            short.join(", ")
        )));
    }
    let rows: Vec<(&PointComparison, Verdict)> = c
        .points
        .iter()
        .map(|p| (p, verdict(p, threshold, alpha)))
        .collect();
    let regressions = rows.iter().filter(|r| r.1 == Verdict::Regression).count();
    let inconclusive = rows.iter().filter(|r| r.1 == Verdict::Inconclusive).count();
    let mut s = String::new();
    let head = if regressions > 0 {
        format!("FAIL: {regressions} regression(s)")
    } else if inconclusive > 0 {
        format!(
            "PASS (inconclusive: {inconclusive} point(s) slower beyond the threshold but within the noise)"
        )
    } else {
        "PASS".to_string()
    };
    let _ = writeln!(s, "## lockscale gate: {head}\n");
    let _ = writeln!(
        s,
        "Base `{}` vs candidate `{}`: guest time per (variant, N); a regression is slower by more than {:.1}% with p < {alpha} \
         (one-sided permutation test on the repetitions).\n",
        base.name,
        cand.name,
        threshold * 100.0
    );
    let _ = writeln!(s, "{}\n", crate::clock::clock_line(base, cand));
    let _ = writeln!(
        s,
        "| variant | N | runs | base median s | candidate median s | change | 95% CI | p (slower) | verdict |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|---:|---|");
    for (p, v) in &rows {
        let _ = writeln!(
            s,
            "| {} | {} | {}+{} | {:.4} | {:.4} | {} | {} … {} | {:.4} | {} |",
            p.variant,
            p.cpus,
            p.old.len(),
            p.new.len(),
            median(&p.old),
            median(&p.new),
            pct(p.ratio.value),
            pct(p.ratio.lo),
            pct(p.ratio.hi),
            p.p_slower,
            v.text()
        );
    }
    let changed: Vec<(&str, u32)> = rows
        .iter()
        .filter(|r| r.1 != Verdict::NoChange)
        .map(|r| (r.0.variant.as_str(), r.0.cpus))
        .collect();
    s.push_str(&attribution(base, cand, &changed));
    for n in &c.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    Ok(GateOutcome {
        exit_code: if regressions > 0 { 1 } else { 0 },
        markdown: s,
    })
}

fn refuse(why: &str) -> GateOutcome {
    GateOutcome {
        exit_code: 2,
        markdown: format!("## lockscale gate: REFUSED\n\n{why}\n"),
    }
}
