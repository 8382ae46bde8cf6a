//! `lockscale report`: a markdown summary of one sweep — per variant and N the median guest
//! time with its 95% interval, speedup, efficiency, and the lock sites that waited most (on a
//! virtual-time sweep also by virtual wait).

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::Result;

use crate::analysis::{Analysis, Point, analyze, median_opt};
use crate::model::{ResultsFile, Run, RunStatus};

/// Fields of one lock site in a run report.
const LOCK_FIELDS: [&str; 5] = [
    "acquisitions",
    "contended",
    "wait_ns",
    "max_wait_ns",
    "hold_ns",
];

fn fmt_s(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn fmt_opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

/// Median over the runs of a point of each lock site's counters; sites sorted by wait time.
pub fn lock_rows(runs: &[&Run]) -> Vec<(String, BTreeMap<&'static str, Option<f64>>)> {
    let mut per_site: BTreeMap<String, BTreeMap<&'static str, Vec<f64>>> = BTreeMap::new();
    for r in runs {
        let Some(locks) = r
            .report
            .as_ref()
            .and_then(|v| v.get("locks"))
            .and_then(|l| l.as_object())
        else {
            continue;
        };
        for (site, counters) in locks {
            let entry = per_site.entry(site.clone()).or_default();
            for f in LOCK_FIELDS {
                if let Some(x) = counters.get(f).and_then(|x| x.as_f64()) {
                    entry.entry(f).or_default().push(x);
                }
            }
        }
    }
    let mut rows: Vec<(String, BTreeMap<&'static str, Option<f64>>)> = per_site
        .into_iter()
        .map(|(site, fields)| {
            let m = LOCK_FIELDS
                .iter()
                .map(|f| (*f, fields.get(f).and_then(|v| median_opt(v))))
                .collect();
            (site, m)
        })
        .collect();
    rows.sort_by(|a, b| {
        let key = |r: &BTreeMap<&str, Option<f64>>| {
            (
                r["wait_ns"].unwrap_or(-1.0),
                r["acquisitions"].unwrap_or(-1.0),
            )
        };
        key(&b.1)
            .partial_cmp(&key(&a.1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

fn point_runs<'a>(file: &'a ResultsFile, p: &Point) -> Vec<&'a Run> {
    file.runs
        .iter()
        .filter(|r| r.variant == p.variant && r.cpus == p.cpus && r.status == RunStatus::Ok)
        .collect()
}

/// Renders the report of one file.
pub fn render(file: &ResultsFile, relative_to: Option<&str>, top: usize) -> Result<String> {
    let a = analyze(file, relative_to)?;
    let mut s = String::new();
    let _ = writeln!(s, "# lockscale report: {}\n", file.name);
    let _ = writeln!(s, "- host: {}", crate::host::describe(&file.host));
    let w = &file.workload;
    let _ = writeln!(
        s,
        "- workload: {} (`{}`), image sha256 {}…, checksum {}",
        w.name,
        w.bootargs,
        &w.image_sha256.get(..12).unwrap_or(&w.image_sha256),
        w.expected_checksum.as_deref().unwrap_or("none yet")
    );
    let _ = writeln!(s, "- clock: {}", crate::clock::describe_file(file));
    for (v, b) in a
        .variants
        .iter()
        .filter_map(|v| file.builds.get(v).map(|b| (v, b)))
    {
        let _ = writeln!(
            s,
            "- {v}: {}{}{}",
            b.version.as_deref().unwrap_or("(no --version)"),
            b.git_rev
                .as_deref()
                .map(|r| format!(", rev {}", crate::util::short_rev(r)))
                .unwrap_or_default(),
            if b.git_dirty == Some(true) {
                " (dirty)"
            } else {
                ""
            }
        );
    }
    let ok = file.runs.len() - a.failures.len();
    let _ = writeln!(
        s,
        "- runs: {} ok, {} failed; {} repetitions planned per point; {}{}\n",
        ok,
        a.failures.len(),
        file.config.reps,
        if crate::sweep::is_complete(file) {
            "complete"
        } else {
            "incomplete (resume with `lockscale sweep --resume`)"
        },
        file.config
            .share
            .map(|sh| format!("; share {}/{}", sh.index, sh.count))
            .unwrap_or_default()
    );
    let speedup_head = match relative_to {
        Some(v) => format!("speedup vs {v} N=1"),
        None => "speedup".into(),
    };
    let _ = writeln!(
        s,
        "| variant | N | runs | median guest s | 95% CI | {speedup_head} | 95% CI | efficiency | median host wall s |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---|---:|---|---:|---:|");
    // Where virtual points sit beside host-time ones (peers, merged files) each is marked.
    let mark_virtual =
        a.points.iter().any(|p| p.virtual_time) && a.points.iter().any(|p| !p.virtual_time);
    for p in &a.points {
        let runs = if p.failed > 0 {
            format!("{} (+{} failed)", p.times.len(), p.failed)
        } else {
            p.times.len().to_string()
        };
        let (t, tci) = match p.time {
            Some(e) => (fmt_s(e.value), format!("{} … {}", fmt_s(e.lo), fmt_s(e.hi))),
            None => ("–".into(), "–".into()),
        };
        let (sp, spci) = match p.speedup {
            Some(e) => (
                format!("{:.2}", e.value),
                format!("{:.2} … {:.2}", e.lo, e.hi),
            ),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "| {} | {}{}{} | {} | {} | {} | {} | {} | {} | {} |",
            p.variant,
            p.cpus,
            if p.oversubscribed { "†" } else { "" },
            if mark_virtual && p.virtual_time {
                "ᵛ"
            } else {
                ""
            },
            runs,
            t,
            tci,
            sp,
            spci,
            fmt_opt(p.efficiency(), |e| format!("{:.0}%", e * 100.0)),
            fmt_opt(median_opt(&p.walls), fmt_s)
        );
    }
    if a.points.iter().any(|p| p.oversubscribed) {
        let _ = writeln!(
            s,
            "\n† oversubscribed: more vCPUs than host cores ({}).",
            file.host.logical_cores
        );
    }
    if mark_virtual {
        let _ = writeln!(
            s,
            "\nᵛ {}: guest time on virtual clocks (never oversubscribed); the other points on host time.",
            crate::clock::VIRTUAL_LABEL
        );
    }
    if top > 0 {
        render_locks(&mut s, file, &a, top);
        render_virtual_waits(&mut s, file, &a, top);
    }
    if !a.failures.is_empty() {
        let _ = writeln!(s, "\n## Failed runs (left out of every figure above)\n");
        for f in &a.failures {
            let _ = writeln!(s, "- {f}");
        }
    }
    for n in &a.notes {
        if !n.contains("failed run") {
            let _ = writeln!(s, "\nNote: {n}");
        }
    }
    Ok(s)
}

fn render_locks(s: &mut String, file: &ResultsFile, a: &Analysis, top: usize) {
    let _ = writeln!(
        s,
        "\n## Lock statistics (top {top} sites by total wait, median over repetitions, at the largest N)\n"
    );
    let mut any = false;
    for v in &a.variants {
        let Some(p) = a
            .variant_points(v)
            .filter(|p| {
                point_runs(file, p)
                    .iter()
                    .any(|r| r.report.as_ref().and_then(|x| x.get("locks")).is_some())
            })
            .last()
        else {
            continue;
        };
        let runs = point_runs(file, p);
        let rows = lock_rows(&runs);
        if rows.is_empty() {
            continue;
        }
        // Hold times are timed only under the emulator's --sync-profile (counts always are).
        let profiled = runs.iter().any(|r| {
            r.report
                .as_ref()
                .and_then(|x| x.get("sync_profile"))
                .and_then(|x| x.as_bool())
                == Some(true)
        });
        any = true;
        let _ = writeln!(s, "### {v}, N = {}\n", p.cpus);
        let _ = writeln!(
            s,
            "| lock site | acquisitions | contended | contended % | wait ms | max wait µs | hold ms |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
        for (site, m) in rows.into_iter().take(top) {
            let pct = match (m["contended"], m["acquisitions"]) {
                (Some(c), Some(acq)) if acq > 0.0 => format!("{:.1}%", 100.0 * c / acq),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| `{site}` | {} | {} | {pct} | {} | {} | {} |",
                fmt_opt(m["acquisitions"], |x| format!("{x:.0}")),
                fmt_opt(m["contended"], |x| format!("{x:.0}")),
                fmt_opt(m["wait_ns"], |x| format!("{:.2}", x / 1e6)),
                fmt_opt(m["max_wait_ns"], |x| format!("{:.1}", x / 1e3)),
                if profiled {
                    fmt_opt(m["hold_ns"], |x| format!("{:.2}", x / 1e6))
                } else {
                    "–".into()
                },
            );
        }
        if !profiled {
            let _ = writeln!(
                s,
                "\nHold times (–) are timed only with `--emu-args \"--sync-profile\"`."
            );
        }
        if p.virtual_time {
            let _ = writeln!(
                s,
                "\nThese runs were on virtual time: the waits here are host wall time; the virtual \
                 waits are listed under *Virtual waits*."
            );
        }
        let _ = writeln!(s);
    }
    if !any {
        let _ = writeln!(
            s,
            "No run report with lock statistics (peers have none; the emulator may not write them yet)."
        );
    }
}

/// Per variant at its largest N with virtual runs: the lock sites by virtual wait (the time the
/// vCPUs' virtual clocks moved to get the lock, `virtual_wait_ns` of the run reports).
fn render_virtual_waits(s: &mut String, file: &ResultsFile, a: &Analysis, top: usize) {
    let mut sections = String::new();
    for v in &a.variants {
        let Some((p, rows, times)) = a
            .variant_points(v)
            .filter(|p| p.virtual_time)
            .map(|p| {
                let (rows, times) = crate::clock::virtual_wait_rows(&point_runs(file, p));
                (p, rows, times)
            })
            .filter(|(_, rows, times)| !rows.is_empty() || times.is_some())
            .last()
        else {
            continue;
        };
        let _ = writeln!(sections, "### {v}, N = {}\n", p.cpus);
        if let Some((vt, cpu)) = times {
            let _ = writeln!(
                sections,
                "Per vCPU (median over repetitions): virtual time {:.2} ms, host CPU time {:.2} ms.\n",
                vt / 1e6,
                cpu / 1e6
            );
        }
        if rows.is_empty() {
            let _ = writeln!(sections, "No lock site waited in virtual time.\n");
            continue;
        }
        let _ = writeln!(
            sections,
            "| lock site | acquisitions | virtual wait ms | per vCPU ms | % of virtual time | virtual hold ms |"
        );
        let _ = writeln!(sections, "|---|---:|---:|---:|---:|---:|");
        for r in rows.into_iter().take(top) {
            let _ = writeln!(
                sections,
                "| `{}` | {} | {:.2} | {:.2} | {} | {} |",
                r.site,
                fmt_opt(r.acquisitions, |x| format!("{x:.0}")),
                r.wait_ns / 1e6,
                r.wait_ns / 1e6 / p.cpus.max(1) as f64,
                fmt_opt(r.share, |x| format!("{:.1}%", x * 100.0)),
                fmt_opt(r.hold_ns, |x| format!("{:.2}", x / 1e6)),
            );
        }
        let _ = writeln!(sections);
    }
    if !sections.is_empty() {
        let _ = writeln!(
            s,
            "\n## Virtual waits (top {top} sites by virtual wait, median over repetitions, at the largest N)\n"
        );
        let _ = writeln!(
            s,
            "On virtual host time a vCPU's virtual wait at a lock is how far its clock moved to the \
             holder's release. Figures are all vCPUs together per run, and that as a share of their \
             virtual time together.\n"
        );
        s.push_str(&sections);
    }
}
