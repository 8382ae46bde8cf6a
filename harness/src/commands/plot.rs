//! `lockscale plot`: speedup curves of results files (and the posted reference, projections)
//! as PNG/SVG or as text.

use std::path::Path;

use anyhow::{Result, bail};

use super::{abs, load_checked, user_path};
use crate::analysis::{Analysis, analyze};
use crate::charts::{self, Labelled};
use crate::cli::PlotArgs;
use crate::merge;
use crate::model::ResultsFile;
use crate::plot::LineKind;
use crate::reference;

/// The notes every plot of sweeps carries: how many failed runs it leaves out.
pub(super) fn plot_notes(analyses: &[&Analysis]) -> Vec<String> {
    let failed: usize = analyses.iter().map(|a| a.failures.len()).sum();
    let mut v = Vec::new();
    if failed > 0 {
        v.push(format!(
            "{failed} failed run(s) left out (see `lockscale report`)"
        ));
    }
    v
}

pub fn plot(repo: &Path, a: &PlotArgs) -> Result<i32> {
    if a.files.is_empty() && a.reference.is_none() {
        bail!("nothing to plot: give results files and/or --reference posted");
    }
    let files: Vec<ResultsFile> = a
        .files
        .iter()
        .map(|p| load_checked(p, a.workload))
        .collect::<Result<_>>()?;
    let analyses: Vec<_> = files
        .iter()
        .map(|f| analyze(f, a.relative_to.as_deref()))
        .collect::<Result<_>>()?;
    let labelled = labelled(&files, &analyses);
    let refc = a
        .reference
        .as_deref()
        .map(|r| reference::load(&abs(repo, &reference::resolve(repo, r))))
        .transpose()?;
    let mut series = charts::series(&labelled, refc.as_ref());
    if a.project {
        for (f, l) in files.iter().zip(&labelled) {
            series.extend(charts::projected_series(
                &l.prefix,
                &crate::project::project(f, &a.model.options())?,
            ));
        }
    }
    for an in &analyses {
        for f in &an.failures {
            eprintln!("lockscale: left out failed run {f}");
        }
    }
    let refs: Vec<&Analysis> = analyses.iter().collect();
    let mut notes = plot_notes(&refs);
    notes.extend(files.iter().filter_map(merge::mixed_hosts_note));
    if let Some(r) = &refc {
        notes.push(format!("posted: {}", r.source));
    }
    if a.ascii {
        print!("{}", charts::ascii_chart(&series, a.width));
        for n in &notes {
            println!("note: {n}");
        }
        return Ok(0);
    }
    let stem = files
        .first()
        .map(|f| f.name.clone())
        .unwrap_or_else(|| "posted-reference".into());
    let out = a
        .output
        .as_deref()
        .map(user_path)
        .unwrap_or_else(|| repo.join("plots").join(format!("{stem}.png")));
    let title = a.title.clone().unwrap_or_else(|| title_of(&files));
    charts::write_plot(
        &out,
        &series,
        &title,
        a.relative_to.as_deref(),
        shared_host_cores(&files),
        notes,
    )?;
    eprintln!("lockscale: wrote {}", out.display());
    Ok(0)
}

/// The measured curves, prefixed with their file's name when a plot shows several files.
fn labelled<'a>(files: &[ResultsFile], analyses: &'a [Analysis]) -> Vec<Labelled<'a>> {
    files
        .iter()
        .zip(analyses)
        .map(|(f, an)| Labelled {
            prefix: if files.len() > 1 {
                format!("{}: ", f.name)
            } else {
                String::new()
            },
            analysis: an,
            kind: LineKind::Solid,
        })
        .collect()
}

/// The default title: the sweeps' names, or the posted curve's when there are none.
fn title_of(files: &[ResultsFile]) -> String {
    if files.is_empty() {
        return "Posted speedup curve (per-CPU locks series)".into();
    }
    format!(
        "lockscale: {}",
        files
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")
    )
}

/// The host's core count to mark, when every file ran on a host with the same count.
fn shared_host_cores(files: &[ResultsFile]) -> Option<u32> {
    files
        .first()
        .map(|f| f.host.logical_cores)
        .filter(|c| files.iter().all(|f| f.host.logical_cores == *c))
}
