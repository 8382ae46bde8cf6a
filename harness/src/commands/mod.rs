//! The commands: argument checking, wiring of the modules, and what is printed where
//! (results on stdout and in files, progress and diagnostics on stderr). One file per
//! subcommand or family; this one holds what several of them share.

mod analyse;
mod build;
mod files;
mod gate;
mod guest;
mod plot;
mod sweep;
mod sweep_guest;
mod sweep_plan;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::model::{ResultsFile, SCHEMA_ID};
use crate::workload::Workload;

pub use analyse::{compare, project, report};
pub use build::build;
pub use files::{merge, schema};
pub use gate::gate;
pub use guest::guest;
pub use plot::plot;
pub use sweep::sweep;

/// Exit code of a sweep that finished with failed runs.
pub const EXIT_FAILED_RUNS: i32 = 3;

/// Reads and checks a results file.
pub fn load_results(path: &Path) -> Result<ResultsFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA_ID) => {}
        Some(other) => bail!(
            "{} has schema {other:?}; this lockscale reads {SCHEMA_ID}",
            path.display()
        ),
        None => bail!(
            "{} is not a lockscale results file (no \"schema\" field)",
            path.display()
        ),
    }
    let f: ResultsFile = serde_json::from_value(v)
        .with_context(|| format!("{} does not follow {SCHEMA_ID}", path.display()))?;
    crate::util::check_name(&f.name).with_context(|| format!("{}", path.display()))?;
    Ok(f)
}

fn abs(repo: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

use crate::util::user_path;

/// Loads a results file named on the command line, refusing another workload than `--workload`.
fn load_checked(p: &Path, workload: Option<Workload>) -> Result<ResultsFile> {
    let path = user_path(p);
    let f = load_results(&path)?;
    f.check_workload(workload, &path)?;
    Ok(f)
}

fn parse_pairs(items: &[String], what: &str) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => bail!("{what} takes NAME=VALUE, got {s:?}"),
        })
        .collect()
}
