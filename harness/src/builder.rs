//! `lockscale build`: one ppc64emu binary per locking strategy.
//!
//! The variants are built one after another in one target directory, so only the emulator
//! crate recompiles between them; each binary is copied out next to a JSON file recording
//! where it came from (git rev, dirty flag, rustc, features, SHA-256). A sweep reads those
//! records instead of trusting whatever `target/release/ppc64emu` happens to be.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::git;
use crate::model::{BuildInfo, BuildKind};
use crate::runner::{strategy_of_version, version_of};
use crate::util::{now_rfc3339, sha256_file, write_atomic};

/// The three locking strategies, as cargo features of the emulator crate.
pub const VARIANTS: [&str; 3] = ["baseline", "per-cpu-lock", "cputlb-no-bql"];

/// Paths that go into the emulator binary: changes there make a build "dirty".
const SOURCE_PATHS: [&str; 3] = ["emulator", "Cargo.toml", "Cargo.lock"];

/// A built (or previously built) emulator binary.
#[derive(Clone, Debug)]
pub struct Built {
    pub variant: String,
    pub binary: PathBuf,
    pub info: BuildInfo,
}

pub struct BuildRequest<'a> {
    pub repo: &'a Path,
    pub variants: &'a [String],
    /// Build this git revision (in a worktree) instead of the working tree.
    pub rev: Option<&'a str>,
}

pub fn check_variants(variants: &[String]) -> Result<()> {
    for v in variants {
        if !VARIANTS.contains(&v.as_str()) {
            bail!("unknown variant {v:?}: choose from {}", VARIANTS.join(", "));
        }
    }
    Ok(())
}

/// Where the binaries of the working tree (rev = None) or of a revision are copied.
pub fn bin_dir(repo: &Path, rev: Option<&str>) -> PathBuf {
    let base = repo.join("target").join("lockscale").join("bin");
    match rev {
        None => base,
        Some(r) => base.join(crate::util::short_rev(r)),
    }
}

fn metadata_path(bin: &Path) -> PathBuf {
    bin.with_extension("json")
}

fn rustc_version(dir: &Path) -> Option<String> {
    let out = Command::new("rustc")
        .arg("--version")
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Marks the shared target directory of revision builds as holding `commit`'s build, and when
/// it held another revision's, gives the worktree's files a new modification time first.
///
/// Every revision's worktree has the same package (same name and version, so the same hash in
/// cargo's output names), and cargo decides whether it is fresh by comparing source times with
/// its output's. After building revision B, building A again (its worktree checked out
/// earlier, its sources older than B's output) would be "fresh" and leave B's binary in
/// `release/ppc64emu`, which would then be copied as A's: a gate of A against B run a second
/// time compared B with itself. Touching the sources makes cargo rebuild the workspace's own
/// crates (the dependencies stay built).
fn claim_rev_target(target_dir: &Path, worktree: &Path, commit: &str) -> Result<()> {
    let marker = target_dir.join("lockscale-last-rev");
    if fs::read_to_string(&marker).ok().as_deref().map(str::trim) == Some(commit) {
        return Ok(());
    }
    let now = std::time::SystemTime::now();
    for e in walkdir::WalkDir::new(worktree)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || (e.file_name() != ".git" && e.file_name() != "target"))
    {
        let e = e.with_context(|| format!("walking {}", worktree.display()))?;
        if e.file_type().is_file() {
            fs::File::options()
                .write(true)
                .open(e.path())
                .and_then(|f| f.set_modified(now))
                .with_context(|| format!("touching {}", e.path().display()))?;
        }
    }
    fs::create_dir_all(target_dir).with_context(|| format!("creating {}", target_dir.display()))?;
    write_atomic(&marker, commit.as_bytes())
}

/// Builds the requested variants and returns them in the requested order.
pub fn build(req: &BuildRequest) -> Result<Vec<Built>> {
    check_variants(req.variants)?;
    let (src, target_dir, commit) = match req.rev {
        None => {
            let td = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| req.repo.join("target"));
            (req.repo.to_path_buf(), td, None)
        }
        Some(rev) => {
            let commit = git::resolve(req.repo, rev)?;
            let wt = git::worktree(
                req.repo,
                &commit,
                &req.repo.join("target/lockscale/worktrees"),
            )?;
            (
                wt,
                req.repo.join("target/lockscale/rev-target"),
                Some(commit),
            )
        }
    };
    if !src.join("emulator").join("Cargo.toml").is_file() {
        bail!(
            "{} has no emulator/Cargo.toml: not a lockscale checkout (use --repo)",
            src.display()
        );
    }
    if let Some(c) = &commit {
        claim_rev_target(&target_dir, &src, c)?;
    }
    let out_dir = bin_dir(req.repo, commit.as_deref());
    fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let git_rev = git::head(&src);
    let git_dirty = git::dirty(&src, &SOURCE_PATHS);
    let rustc = rustc_version(&src);
    let cargo = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| "cargo".into());

    let mut built = Vec::new();
    for variant in req.variants {
        eprintln!(
            "lockscale: building ppc64emu ({variant}){}",
            commit
                .as_deref()
                .map(|c| format!(" at {}", crate::util::short_rev(c)))
                .unwrap_or_default()
        );
        let status = Command::new(&cargo)
            .args([
                "build",
                "--release",
                "-p",
                "ppc64emu",
                "--no-default-features",
                "--features",
                variant,
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(&src)
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("running {}", cargo.display()))?;
        if !status.success() {
            bail!("cargo build of ppc64emu with --features {variant} failed ({status})");
        }
        let produced = target_dir.join("release").join("ppc64emu");
        let dest = out_dir.join(format!("ppc64emu-{variant}"));
        let tmp = out_dir.join(format!(".ppc64emu-{variant}.tmp"));
        fs::copy(&produced, &tmp).with_context(|| format!("copying {}", produced.display()))?;
        fs::rename(&tmp, &dest)?;
        let version = version_of(&dest);
        check_strategy(&dest, variant, version.as_deref(), "was built for")?;
        let info = BuildInfo {
            kind: BuildKind::Ours,
            binary: crate::util::stored_path(req.repo, &dest),
            binary_sha256: Some(sha256_file(&dest)?),
            version,
            features: vec![variant.clone()],
            git_rev: git_rev.clone(),
            git_dirty,
            rustc: rustc.clone(),
            built_at: Some(now_rfc3339()),
        };
        write_atomic(
            &metadata_path(&dest),
            serde_json::to_string_pretty(&info)?.as_bytes(),
        )?;
        built.push(Built {
            variant: variant.clone(),
            binary: dest,
            info,
        });
    }
    Ok(built)
}

/// Loads a binary built earlier by `lockscale build`, checking that it is unchanged.
/// The working tree's variants: the binaries of the last `lockscale build` when `no_build`,
/// else built now (`sweep` and the Slurm stage both start from these).
pub fn build_or_load(repo: &Path, variants: &[String], no_build: bool) -> Result<Vec<Built>> {
    if no_build {
        let dir = bin_dir(repo, None);
        variants.iter().map(|v| load_built(&dir, v)).collect()
    } else {
        build(&BuildRequest {
            repo,
            variants,
            rev: None,
        })
    }
}

pub fn load_built(dir: &Path, variant: &str) -> Result<Built> {
    let bin = dir.join(format!("ppc64emu-{variant}"));
    let meta = metadata_path(&bin);
    let text = fs::read_to_string(&meta).with_context(|| {
        format!(
            "no build of {variant} in {} (run `lockscale build` first)",
            dir.display()
        )
    })?;
    let info: BuildInfo =
        serde_json::from_str(&text).with_context(|| format!("reading {}", meta.display()))?;
    let sha = sha256_file(&bin)?;
    if info.binary_sha256.as_deref() != Some(sha.as_str()) {
        bail!(
            "{} changed since it was built; rebuild with `lockscale build`",
            bin.display()
        );
    }
    Ok(Built {
        variant: variant.to_string(),
        binary: bin,
        info,
    })
}

/// Refuses a binary whose `--version` names another strategy than the variant it stands for.
fn check_strategy(path: &Path, variant: &str, version: Option<&str>, role: &str) -> Result<()> {
    if let Some(s) = version.and_then(strategy_of_version)
        && s != variant
    {
        bail!(
            "{} reports strategy {s:?} but {role} {variant:?}",
            path.display()
        );
    }
    Ok(())
}

/// Describes a binary given directly on the command line (`--bin VARIANT=PATH`).
pub fn describe_binary(
    repo: &Path,
    variant: &str,
    path: &Path,
    kind: BuildKind,
) -> Result<BuildInfo> {
    if !path.is_file() {
        bail!("{} (for {variant}) does not exist", path.display());
    }
    let version = version_of(path);
    if kind == BuildKind::Ours {
        check_strategy(path, variant, version.as_deref(), "was given as")?;
    }
    Ok(BuildInfo {
        kind,
        binary: crate::util::stored_path(repo, path),
        binary_sha256: Some(sha256_file(path)?),
        version,
        features: if kind == BuildKind::Ours {
            vec![variant.to_string()]
        } else {
            vec![]
        },
        git_rev: None,
        git_dirty: None,
        rustc: None,
        built_at: None,
    })
}
