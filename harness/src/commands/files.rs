//! `lockscale merge` and `lockscale schema`: results files written from others, and the
//! format's JSON schema.

use std::path::Path;

use anyhow::{Context, Result};

use super::{load_checked, user_path};
use crate::cli::{MergeArgs, SchemaArgs};
use crate::model::{ResultsFile, schema_json};
use crate::{merge, sweep};

pub fn merge(a: &MergeArgs) -> Result<i32> {
    let files: Vec<ResultsFile> = a
        .files
        .iter()
        .map(|p| load_checked(p, a.workload))
        .collect::<Result<_>>()?;
    let out = user_path(&a.output);
    let name = a.name.clone().unwrap_or_else(|| {
        out.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "merged".into())
    });
    crate::util::check_name(&name)
        .context("the merged sweep's name (--name, or the output file's stem)")?;
    let mut merged = merge::merge(
        &files,
        &merge::MergeOptions {
            name,
            allow_mixed_hosts: a.allow_mixed_hosts,
            allow_mixed_builds: a.allow_mixed_builds,
            allow_mixed_clocks: a.allow_mixed_clocks,
        },
    )?;
    sweep::save(&out, &mut merged)?;
    eprintln!(
        "lockscale: merged {} files, {} runs{} → {}",
        files.len(),
        merged.runs.len(),
        if merged.complete {
            ""
        } else {
            " (plan not complete)"
        },
        out.display()
    );
    Ok(0)
}

pub fn schema(repo: &Path, a: &SchemaArgs) -> Result<i32> {
    let text = schema_json();
    match a.output.as_deref() {
        Some(p) if p == Path::new("-") => print!("{text}"),
        other => {
            let p = other
                .map(user_path)
                .unwrap_or_else(|| repo.join("results/schema.json"));
            crate::util::write_atomic(&p, text.as_bytes())?;
            eprintln!("lockscale: wrote {}", p.display());
        }
    }
    Ok(0)
}
