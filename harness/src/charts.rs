//! Turns analysed result files (and the reference curve) into the series the PNG/SVG and
//! ASCII renderers draw, so both show exactly the same points.

use std::path::Path;

use anyhow::Result;

use crate::analysis::Analysis;
use crate::ascii::{self, AsciiSeries};
use crate::plot::{self, LineKind, PlotOptions, PlotPoint, PlotSeries};
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
                .filter_map(|p| p.speedup.map(|s| PlotPoint { cpus: p.cpus, speedup: s, oversubscribed: p.oversubscribed }))
                .collect();
            if points.is_empty() {
                continue;
            }
            let label = if f.prefix.is_empty() { v.clone() } else { format!("{}{v}", f.prefix) };
            out.push(PlotSeries { label, variant: v.clone(), kind: f.kind, points });
        }
    }
    if let Some(r) = reference {
        for c in &r.curves {
            out.push(PlotSeries {
                label: format!("posted {}", c.variant),
                variant: c.variant.clone(),
                kind: LineKind::Reference,
                points: c
                    .points
                    .iter()
                    .map(|&(n, s)| PlotPoint { cpus: n, speedup: Estimate { value: s, lo: s, hi: s }, oversubscribed: false })
                    .collect(),
            });
        }
    }
    out
}

pub fn ascii_chart(series: &[PlotSeries], width: usize) -> String {
    let a: Vec<AsciiSeries> = series
        .iter()
        .map(|s| AsciiSeries {
            label: s.label.clone(),
            points: s.points.iter().map(|p| (p.cpus as f64, p.speedup.value, p.oversubscribed)).collect(),
            reference: s.kind == LineKind::Reference,
        })
        .collect();
    ascii::render("Speedup vs a single thread (higher is better):", &a, width, 25)
}

/// Writes one plot; `notes` go under the chart (e.g. how many failed runs were left out).
pub fn write_plot(path: &Path, series: &[PlotSeries], title: &str, relative_to: Option<&str>, host_cores: Option<u32>, notes: Vec<String>) -> Result<()> {
    let y_label = match relative_to {
        Some(v) => format!("speedup vs {v} at N = 1"),
        None => "speedup T(1)/T(N) (guest time)".to_string(),
    };
    plot::render(
        path,
        series,
        &PlotOptions { title: title.to_string(), y_label, width: plot::WIDTH, height: plot::HEIGHT, host_cores, notes },
    )
}
