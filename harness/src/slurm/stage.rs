//! Filling the stage: the binaries with their build records, the workloads, the files given
//! by `--kernel`/`--bios`, and a Linux workload's image, so that nodes need only the shared
//! filesystem (neither cargo nor a mirror).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::run_self;
use crate::builder::{self, VARIANTS};
use crate::cli::SweepArgs;
use crate::model::BuildKind;
use crate::util::write_atomic;

/// Where a task finds a file given on the command line: inside the checkout the same relative
/// path in the stage, else `guest/<file name>`.
pub(super) fn staged_input(repo: &Path, stage: &Path, p: &Path) -> PathBuf {
    let p = crate::util::user_path(p);
    match p.strip_prefix(repo) {
        Ok(rel) if !rel.as_os_str().is_empty() => stage.join(rel),
        _ => stage.join("guest").join(p.file_name().unwrap_or_default()),
    }
}

/// Copies `from` to `to` (a hard link when the filesystem allows), creating directories.
pub(super) fn place(from: &Path, to: &Path) -> Result<()> {
    if let Some(d) = to.parent() {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let _ = fs::remove_file(to);
    if fs::hard_link(from, to).is_err() {
        fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for e in walkdir::WalkDir::new(from) {
        let e = e.with_context(|| format!("reading {}", from.display()))?;
        let rel = e.path().strip_prefix(from).expect("below the root");
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        } else if e.file_type().is_file() {
            fs::copy(e.path(), &dest).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Builds (or takes) the binaries of our variants and stages them with their build records.
pub(super) fn stage_binaries(
    repo: &Path,
    a: &SweepArgs,
    variants: &[String],
    stage: &Path,
) -> Result<()> {
    let mut bins: BTreeMap<String, PathBuf> = BTreeMap::new();
    for b in &a.bins {
        let Some((v, p)) = b.split_once('=') else {
            bail!("--bin takes NAME=VALUE, got {b:?}");
        };
        builder::check_variants(&[v.trim().to_string()])?;
        bins.insert(
            v.trim().to_string(),
            crate::util::user_path(Path::new(p.trim())),
        );
    }
    let ours: Vec<String> = variants
        .iter()
        .filter(|v| VARIANTS.contains(&v.as_str()))
        .cloned()
        .collect();
    let to_build: Vec<String> = ours
        .iter()
        .filter(|v| !bins.contains_key(*v))
        .cloned()
        .collect();
    let mut found: Vec<(String, PathBuf, crate::model::BuildInfo)> = Vec::new();
    if !to_build.is_empty() {
        let list = builder::build_or_load(repo, &to_build, a.no_build)?;
        found.extend(list.into_iter().map(|b| (b.variant, b.binary, b.info)));
    }
    for v in &ours {
        if let Some(p) = bins.get(v) {
            found.push((
                v.clone(),
                p.clone(),
                builder::describe_binary(repo, v, p, BuildKind::Ours)?,
            ));
        }
    }
    let dir = builder::bin_dir(stage, None);
    for (v, path, mut info) in found {
        let dest = dir.join(format!("ppc64emu-{v}"));
        place(&path, &dest)?;
        info.binary = crate::util::stored_path(stage, &dest);
        write_atomic(
            &dest.with_extension("json"),
            serde_json::to_string_pretty(&info)?.as_bytes(),
        )?;
    }
    Ok(())
}

/// Stages the guest: the checkout's workloads/, the files given by --kernel/--bios, and a
/// Linux workload's image (exported from this checkout, imported into the stage).
pub(super) fn stage_guest(repo: &Path, a: &SweepArgs, stage: &Path) -> Result<()> {
    let w = repo.join("workloads");
    if w.is_dir() {
        copy_tree(&w, &stage.join("workloads"))?;
    }
    for p in [a.plan_args.kernel.as_deref(), a.bios.as_deref()]
        .into_iter()
        .flatten()
    {
        let dest = staged_input(repo, stage, p);
        let src = crate::util::user_path(p);
        if src != dest {
            place(&src, &dest)?;
        }
    }
    if a.workload.is_linux() {
        let tar = stage.join(format!("guest-{}.tar", a.workload.name()));
        let mut args = vec![
            "guest".to_string(),
            "export".into(),
            a.workload.name().into(),
            "-o".into(),
            tar.display().to_string(),
        ];
        if a.quick {
            args.push("--quick".into());
        }
        if a.full {
            args.push("--full".into());
        }
        if let Some(u) = a.plan_args.units {
            args.push(format!("--units={u}"));
        }
        if let Some(s) = a.plan_args.size {
            args.push(format!("--size={s}"));
        }
        eprintln!(
            "lockscale: exporting the {} image for the nodes",
            a.workload
        );
        run_self(repo, &args).context("exporting the guest image")?;
        crate::carry::import(stage, &tar).context("installing the guest image into the stage")?;
    }
    Ok(())
}
