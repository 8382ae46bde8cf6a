//! The posted speedup curve (results/reference/posted-curve.json), for `--reference posted`.
//!
//! Values were read by eye from the ASCII chart of the mail that introduced the series; only
//! the points whose markers are visible are there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct CurveFile {
    #[serde(default)]
    source: String,
    series: BTreeMap<String, BTreeMap<String, f64>>,
}

/// One reference curve: (N, speedup) points sorted by N.
#[derive(Clone, Debug)]
pub struct RefCurve {
    pub variant: String,
    pub points: Vec<(u32, f64)>,
}

#[derive(Clone, Debug)]
pub struct Reference {
    pub source: String,
    pub curves: Vec<RefCurve>,
}

/// `posted` names the bundled file; anything else is a path to a file of the same shape.
pub fn resolve(repo: &Path, name: &str) -> PathBuf {
    if name == "posted" {
        repo.join("results/reference/posted-curve.json")
    } else {
        PathBuf::from(name)
    }
}

pub fn load(path: &Path) -> Result<Reference> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading reference curve {}", path.display()))?;
    let f: CurveFile =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let order = crate::builder::VARIANTS;
    let mut curves: Vec<RefCurve> = f
        .series
        .into_iter()
        .map(|(variant, pts)| {
            let mut points: Vec<(u32, f64)> = pts
                .into_iter()
                .filter_map(|(n, s)| n.trim().parse::<u32>().ok().map(|n| (n, s)))
                .collect();
            points.sort_by_key(|p| p.0);
            RefCurve { variant, points }
        })
        .collect();
    curves.sort_by_key(|c| {
        order
            .iter()
            .position(|v| *v == c.variant)
            .unwrap_or(usize::MAX)
    });
    Ok(Reference {
        source: f.source,
        curves,
    })
}
