//! Turns analysed result files (and the reference curve) into the series the PNG/SVG and
//! ASCII renderers draw, so both show exactly the same points.

use std::path::Path;

use anyhow::Result;

use crate::analysis::Analysis;
use crate::ascii::{self, AsciiSeries};
use crate::plot::{self, LineKind, PlotOptions, PlotPoint, PlotSeries};
use crate::project::ProjectionSet;
use crate::reference::Reference;
use crate::stats::Estimate;

/// One analysed file with the label its series get (empty: variant names alone).
pub struct Labelled<'a> {
    pub prefix: String,
    pub analysis: &'a Analysis,
    pub kind: LineKind,
}

pub fn series(files: &[Labelled], reference: Option<&Reference>) -> Vec<PlotSeries> {
    let mut out = Vec::new();
    for f in files {
        for v in &f.analysis.variants {
            let points: Vec<PlotPoint> = f
                .analysis
                .variant_points(v)
                .filter_map(|p| {
                    p.speedup.map(|s| PlotPoint {
                        cpus: p.cpus,
                        speedup: s,
                        oversubscribed: p.oversubscribed,
                    })
                })
                .filter(|p| {
                    [p.speedup.value, p.speedup.lo, p.speedup.hi]
                        .iter()
                        .all(|v| v.is_finite())
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            let label = if f.prefix.is_empty() {
                v.clone()
            } else {
                format!("{}{v}", f.prefix)
            };
            let virtual_time = f
                .analysis
                .variant_points(v)
                .filter(|p| p.speedup.is_some())
                .all(|p| p.virtual_time);
            out.push(PlotSeries {
                label,
                variant: v.clone(),
                kind: f.kind,
                points,
                joined: true,
                virtual_time,
            });
        }
    }
    if let Some(r) = reference {
        // A curve posted at fewer N than another is drawn as markers only: a straight line
        // across the N it has no point for would show a shape the posted chart does not have.
        let all_n: Vec<u32> = r
            .curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .collect();
        for c in &r.curves {
            let (first, last) = (
                c.points.first().map_or(0, |p| p.0),
                c.points.last().map_or(0, |p| p.0),
            );
            let joined = all_n
                .iter()
                .filter(|&&n| n > first && n < last)
                .all(|n| c.points.iter().any(|p| p.0 == *n));
            out.push(PlotSeries {
                label: if joined {
                    format!("posted {}", c.variant)
                } else {
                    format!("posted {} (markers only)", c.variant)
                },
                variant: c.variant.clone(),
                kind: LineKind::Reference,
                joined,
                virtual_time: false,
                points: c
                    .points
                    .iter()
                    .map(|&(n, s)| PlotPoint {
                        cpus: n,
                        speedup: Estimate {
                            value: s,
                            lo: s,
                            hi: s,
                        },
                        oversubscribed: false,
                    })
                    .collect(),
            });
        }
    }
    crate::clock::label_mixed(&mut out);
    out
}

/// The projected curves of one file (`lockscale project`), drawn dashed with their bands.
pub fn projected_series(prefix: &str, set: &ProjectionSet) -> Vec<PlotSeries> {
    set.projections
        .iter()
        .map(|p| PlotSeries {
            label: format!("{prefix}{} projected", p.variant),
            variant: p.variant.clone(),
            kind: LineKind::Projected,
            joined: true,
            virtual_time: false,
            points: p
                .points
                .iter()
                .map(|q| PlotPoint {
                    cpus: q.cpus,
                    speedup: q.speedup,
                    oversubscribed: q.cpus > set.cores,
                })
                .collect(),
        })
        .collect()
}

pub fn ascii_chart(series: &[PlotSeries], width: usize) -> String {
    let a: Vec<AsciiSeries> = series
        .iter()
        .map(|s| AsciiSeries {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .map(|p| (p.cpus as f64, p.speedup.value, p.oversubscribed))
                .collect(),
            reference: matches!(s.kind, LineKind::Reference | LineKind::Projected),
            joined: s.joined,
        })
        .collect();
    // Virtual curves say so in the legend (host-time charts stay as they were).
    let extra: Vec<String> = crate::clock::caption(series)
        .filter(|_| series.iter().any(|s| s.virtual_time))
        .into_iter()
        .collect();
    ascii::render(
        "Speedup vs a single thread (higher is better):",
        &a,
        width,
        25,
        &extra,
    )
}

/// Writes one plot; `notes` go under the chart (e.g. how many failed runs were left out).
pub fn write_plot(
    path: &Path,
    series: &[PlotSeries],
    title: &str,
    relative_to: Option<&str>,
    host_cores: Option<u32>,
    notes: Vec<String>,
) -> Result<()> {
    let y_label = match relative_to {
        Some(v) => format!("speedup vs {v} at N = 1"),
        None => "speedup T(1)/T(N) (guest time)".to_string(),
    };
    let clock = crate::clock::caption(series);
    let title = match &clock {
        Some(_) if crate::plot::all_virtual(series) => {
            format!("{title} ({})", crate::clock::VIRTUAL_LABEL)
        }
        Some(_) if series.iter().any(|s| s.virtual_time) => format!("{title} (mixed clocks)"),
        Some(_) => format!("{title} ({})", crate::clock::HOST_LABEL),
        None => title.to_string(),
    };
    plot::render(
        path,
        series,
        &PlotOptions {
            title,
            clock,
            y_label,
            width: plot::WIDTH,
            height: plot::HEIGHT,
            host_cores,
            notes,
        },
    )
}
